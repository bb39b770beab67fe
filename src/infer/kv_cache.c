/* kv_cache.c — see kv_cache.h. */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "quant.h"

static bool cache_type_ok(int type) {
    return type == TOY_TYPE_F32 || type == TOY_TYPE_F16 || type == TOY_TYPE_BF16 ||
           type == TOY_TYPE_Q8_0;
}

toy_status ty_kv_cache_init(ty_kv_cache *c, int32_t n_layer, int32_t n_seq,
                            int32_t cells_per_seq, int32_t n_head_kv, int32_t head_dim,
                            int type_k, int type_v) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 2; i++) {
        int t = i ? type_v : type_k;
        if (!cache_type_ok(t))
            return ty_error(TOY_ERR_UNSUPPORTED, "KV cache type %s is not supported (f32, f16, bf16, q8_0)",
                            toy_type_name(t) ? toy_type_name(t) : "?");
        if (toy_type_row_size(t, head_dim, i ? &c->head_bytes_v : &c->head_bytes_k))
            return ty_error(TOY_ERR_UNSUPPORTED, "KV cache type %s needs head_dim %% %lld == 0, got %d",
                            toy_type_name(t), (long long)toy_type_block_size(t), head_dim);
    }
    c->n_layer = n_layer;
    c->n_seq = n_seq;
    c->cells_per_seq = cells_per_seq;
    c->n_head_kv = n_head_kv;
    c->head_dim = head_dim;
    c->type_k = type_k;
    c->type_v = type_v;
    size_t cells = (size_t)n_seq * (size_t)cells_per_seq, bytes_k, bytes_v;
    if (ty_mul_overflows(cells * (size_t)n_layer * (size_t)n_head_kv, c->head_bytes_k, &bytes_k) ||
        ty_mul_overflows(cells * (size_t)n_layer * (size_t)n_head_kv, c->head_bytes_v, &bytes_v))
        return ty_error(TOY_ERR_INVALID, "KV cache size overflows");
    size_t bytes = bytes_k + bytes_v;
    c->k = malloc(bytes_k ? bytes_k : 1);
    c->v = malloc(bytes_v ? bytes_v : 1);
    c->pos = calloc(cells ? cells : 1, sizeof *c->pos);
    c->n_used = calloc((size_t)n_seq, sizeof *c->n_used);
    if (!c->k || !c->v || !c->pos || !c->n_used) {
        ty_kv_cache_free(c);
        return ty_error(TOY_ERR_NOMEM, "cannot allocate a KV cache of %zu bytes", bytes);
    }
    return TOY_OK;
}

void ty_kv_cache_free(ty_kv_cache *c) {
    free(c->k);
    free(c->v);
    free(c->pos);
    free(c->n_used);
    memset(c, 0, sizeof *c);
}

toy_status ty_kv_cache_place(ty_kv_cache *c, int32_t n_tokens, const int32_t *seq_id,
                             const int32_t *pos, int32_t *cells) {
    for (int32_t i = 0; i < n_tokens; i++) {
        int32_t s = seq_id[i];
        int32_t used = c->n_used[s];
        for (int32_t j = 0; j < i; j++) used += seq_id[j] == s;
        if (used >= c->cells_per_seq)
            return ty_error(TOY_ERR_INVALID,
                            "the context of sequence %d is full (%d cells): position %d does "
                            "not fit",
                            s, c->cells_per_seq, pos[i]);
    }
    for (int32_t i = 0; i < n_tokens; i++) {
        int32_t s = seq_id[i];
        int64_t cell = (int64_t)s * c->cells_per_seq + c->n_used[s]++;
        c->pos[cell] = pos[i];
        cells[i] = (int32_t)cell;
    }
    return TOY_OK;
}

ty_kv_view ty_kv_cache_view(const ty_kv_cache *c, int32_t layer) {
    return (ty_kv_view){
        .k = ty_kv_k(c, layer, 0, 0),
        .v = ty_kv_v(c, layer, 0, 0),
        .type_k = c->type_k,
        .type_v = c->type_v,
        .head_bytes_k = c->head_bytes_k,
        .head_bytes_v = c->head_bytes_v,
        .pos = c->pos,
        .cells_per_seq = c->cells_per_seq,
        .n_used = c->n_used,
    };
}

void ty_kv_cache_store(ty_kv_cache *c, int32_t layer, int64_t cell, const float *k,
                       const float *v) {
    const ty_type_traits *tk = ty_type_traits_get(c->type_k), *tv = ty_type_traits_get(c->type_v);
    for (int32_t h = 0; h < c->n_head_kv; h++) {
        tk->from_float(k + (size_t)h * c->head_dim, ty_kv_k(c, layer, cell, h), c->head_dim);
        tv->from_float(v + (size_t)h * c->head_dim, ty_kv_v(c, layer, cell, h), c->head_dim);
    }
}

void ty_kv_cache_seq_rm(ty_kv_cache *c, int32_t seq, int32_t p0, int32_t p1) {
    int64_t base = (int64_t)seq * c->cells_per_seq;
    int32_t kept = 0;
    for (int32_t i = 0; i < c->n_used[seq]; i++) {
        int32_t p = c->pos[base + i];
        if (p >= p0 && p < p1) continue;
        if (kept != i) {
            c->pos[base + kept] = p;
            for (int32_t l = 0; l < c->n_layer; l++)
                for (int32_t h = 0; h < c->n_head_kv; h++) {
                    memmove(ty_kv_k(c, l, base + kept, h), ty_kv_k(c, l, base + i, h), c->head_bytes_k);
                    memmove(ty_kv_v(c, l, base + kept, h), ty_kv_v(c, l, base + i, h), c->head_bytes_v);
                }
        }
        kept++;
    }
    c->n_used[seq] = kept;
}

/* Moves the rows of cells [from, from + n) of a sequence to [to, to + n) in every layer
 * and head (the ranges may overlap). */
static void move_rows(ty_kv_cache *c, int64_t base, int32_t to, int32_t from, int32_t n) {
    if (n <= 0 || to == from) return;
    for (int32_t l = 0; l < c->n_layer; l++)
        for (int32_t h = 0; h < c->n_head_kv; h++) {
            memmove(ty_kv_k(c, l, base + to, h), ty_kv_k(c, l, base + from, h), (size_t)n * c->head_bytes_k);
            memmove(ty_kv_v(c, l, base + to, h), ty_kv_v(c, l, base + from, h), (size_t)n * c->head_bytes_v);
        }
    memmove(c->pos + base + to, c->pos + base + from, (size_t)n * sizeof *c->pos);
}

toy_status ty_kv_cache_seq_cp(ty_kv_cache *c, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    const int64_t sbase = (int64_t)src * c->cells_per_seq, dbase = (int64_t)dst * c->cells_per_seq;
    int32_t n_copy = 0, n_keep = 0;
    for (int32_t i = 0; i < c->n_used[src]; i++) n_copy += c->pos[sbase + i] >= p0 && c->pos[sbase + i] < p1;
    for (int32_t i = 0; i < c->n_used[dst]; i++) n_keep += !(c->pos[dbase + i] >= p0 && c->pos[dbase + i] < p1);
    if (n_keep + n_copy > c->cells_per_seq)
        return ty_error(TOY_ERR_INVALID,
                        "copying %d cells of sequence %d into sequence %d overflows its %d cells (%d kept)",
                        n_copy, src, dst, c->cells_per_seq, n_keep);
    ty_kv_cache_seq_rm(c, dst, p0, p1);
    int32_t at = 0;
    while (at < c->n_used[dst] && c->pos[dbase + at] < p1) at++;
    move_rows(c, dbase, at + n_copy, at, c->n_used[dst] - at);
    /* runs of consecutive cells in range, one copy of rows each */
    for (int32_t i = 0; i < c->n_used[src];) {
        if (c->pos[sbase + i] < p0 || c->pos[sbase + i] >= p1) {
            i++;
            continue;
        }
        int32_t n = 1;
        while (i + n < c->n_used[src] && c->pos[sbase + i + n] >= p0 && c->pos[sbase + i + n] < p1) n++;
        for (int32_t l = 0; l < c->n_layer; l++)
            for (int32_t h = 0; h < c->n_head_kv; h++) {
                memcpy(ty_kv_k(c, l, dbase + at, h), ty_kv_k(c, l, sbase + i, h), (size_t)n * c->head_bytes_k);
                memcpy(ty_kv_v(c, l, dbase + at, h), ty_kv_v(c, l, sbase + i, h), (size_t)n * c->head_bytes_v);
            }
        memcpy(c->pos + dbase + at, c->pos + sbase + i, (size_t)n * sizeof *c->pos);
        at += n;
        i += n;
    }
    c->n_used[dst] = n_keep + n_copy;
    return TOY_OK;
}
