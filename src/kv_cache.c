/* kv_cache.c — see kv_cache.h. */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

toy_status toy_kv_cache_init(toy_kv_cache *c, int32_t n_layer, int32_t n_seq,
                             int32_t cells_per_seq, int32_t row) {
    memset(c, 0, sizeof *c);
    c->n_layer = n_layer;
    c->n_seq = n_seq;
    c->cells_per_seq = cells_per_seq;
    c->row = row;
    size_t cells = (size_t)n_seq * (size_t)cells_per_seq, bytes;
    if (toy_mul_overflows(cells * (size_t)n_layer, (size_t)row * sizeof(float), &bytes))
        return toy_error(TOY_ERR_INVALID, "KV cache size overflows");
    c->k = malloc(bytes ? bytes : 1);
    c->v = malloc(bytes ? bytes : 1);
    c->pos = calloc(cells ? cells : 1, sizeof *c->pos);
    c->n_used = calloc((size_t)n_seq, sizeof *c->n_used);
    if (!c->k || !c->v || !c->pos || !c->n_used) {
        toy_kv_cache_free(c);
        return toy_error(TOY_ERR_NOMEM, "cannot allocate a KV cache of 2 x %zu bytes", bytes);
    }
    return TOY_OK;
}

void toy_kv_cache_free(toy_kv_cache *c) {
    free(c->k);
    free(c->v);
    free(c->pos);
    free(c->n_used);
    memset(c, 0, sizeof *c);
}

toy_status toy_kv_cache_place(toy_kv_cache *c, int32_t n_tokens, const int32_t *seq_id,
                              const int32_t *pos, int32_t *cells) {
    for (int32_t i = 0; i < n_tokens; i++) {
        int32_t s = seq_id[i];
        int32_t used = c->n_used[s];
        for (int32_t j = 0; j < i; j++) used += seq_id[j] == s;
        if (used >= c->cells_per_seq)
            return toy_error(TOY_ERR_INVALID,
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

toy_kv_view toy_kv_cache_view(const toy_kv_cache *c, int32_t layer) {
    return (toy_kv_view){
        .k = toy_kv_k(c, layer, 0),
        .v = toy_kv_v(c, layer, 0),
        .pos = c->pos,
        .cells_per_seq = c->cells_per_seq,
        .n_used = c->n_used,
    };
}

void toy_kv_cache_seq_rm(toy_kv_cache *c, int32_t seq, int32_t p0, int32_t p1) {
    int64_t base = (int64_t)seq * c->cells_per_seq;
    int32_t kept = 0;
    size_t row_bytes = (size_t)c->row * sizeof(float);
    for (int32_t i = 0; i < c->n_used[seq]; i++) {
        int32_t p = c->pos[base + i];
        if (p >= p0 && p < p1) continue;
        if (kept != i) {
            c->pos[base + kept] = p;
            for (int32_t l = 0; l < c->n_layer; l++) {
                memmove(toy_kv_k(c, l, base + kept), toy_kv_k(c, l, base + i), row_bytes);
                memmove(toy_kv_v(c, l, base + kept), toy_kv_v(c, l, base + i), row_bytes);
            }
        }
        kept++;
    }
    c->n_used[seq] = kept;
}
