/* lora.c — reading an adapter against its base model, and writing one (lora.h). */
#include "lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "quant.h"
#include "quantize.h"

static bool ends_with(const char *s, const char *suffix, size_t *stem) {
    const size_t n = strlen(s), k = strlen(suffix);
    if (n < k || strcmp(s + n - k, suffix)) return false;
    *stem = n - k;
    return true;
}

static bool str_is(const toy_gguf *g, const char *key, const char *want, const char **got, size_t *len) {
    if (toy_gguf_get_str(g, key, got, len)) {
        *got = "";
        *len = 0;
        return false;
    }
    return *len == strlen(want) && !memcmp(*got, want, *len);
}

void toy_lora_free(toy_lora *lora) {
    if (!lora) return;
    for (int i = 0; i < lora->n_pairs; i++) {
        free(lora->pairs[i].a);
        free(lora->pairs[i].b);
    }
    free(lora->pairs);
    free(lora->path);
    free(lora);
}

const ty_lora_pair *ty_lora_find(const toy_lora *lora, const char *name) {
    for (int i = 0; i < lora->n_pairs; i++)
        if (!strcmp(lora->pairs[i].name, name)) return &lora->pairs[i];
    return NULL;
}

float ty_lora_pair_scale(const toy_lora *lora, const ty_lora_pair *p, float scale) {
    return lora->alpha != 0.0f ? scale * lora->alpha / (float)(p->rank / p->n_groups) : scale;
}

bool ty_lora_per_head_name(const char *name, int *layer, int *head, char *ab) {
    int len = 0;
    return sscanf(name, "blk.%d.attn_q.head_%d.lora_%c.weight%n", layer, head, ab, &len) == 3 && !name[len] &&
           *layer >= 0 && *head >= 0 && (*ab == 'a' || *ab == 'b');
}

/* An AdamW moment of a per-head pair tensor: "X.weight.m" or "X.m" (and .v). */
static bool is_per_head_moment(const char *name) {
    size_t stem;
    if (!ends_with(name, ".m", &stem) && !ends_with(name, ".v", &stem)) return false;
    char base[128];
    int layer, head;
    char ab;
    if (stem + sizeof ".weight" > sizeof base) return false;
    snprintf(base, sizeof base, "%.*s", (int)stem, name);
    if (ty_lora_per_head_name(base, &layer, &head, &ab)) return true;
    snprintf(base, sizeof base, "%.*s.weight", (int)stem, name);
    return ty_lora_per_head_name(base, &layer, &head, &ab);
}

/* The base matrix an adapter pair of `name` adapts: its shape, also for the per-head
 * layout's Q, K and V (model.h), which have no whole tensor in the file. */
static bool base_matrix(const toy_model *base, const char *name, int64_t *n_in, int64_t *n_out, int *n_dims) {
    const toy_gguf_tensor *w = toy_gguf_find_tensor(base->gguf, name);
    if (w) {
        *n_in = w->ne[0];
        *n_out = w->ne[1];
        *n_dims = w->n_dims;
        return true;
    }
    int il, len = 0;
    char kind[16];
    if (!base->hp.per_head_weights || sscanf(name, "blk.%d.attn_%15[qkv].weight%n", &il, kind, &len) != 2 ||
        name[len] || kind[1] || il < 0 || il >= base->hp.n_layer)
        return false;
    *n_in = base->hp.n_embd;
    *n_out = (int64_t)(kind[0] == 'q' ? base->hp.n_head : base->hp.n_head_kv) * base->hp.head_dim;
    *n_dims = 2;
    return true;
}

static toy_status to_f32(const char *path, const toy_gguf_tensor *t, float **out) {
    const int64_t n = t->ne[0] * t->ne[1];
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) return ty_error(TOY_ERR_NOMEM, "%s: no memory for tensor %s", path, t->name);
    toy_status st = toy_dequantize(t->type, t->data, f, n);
    if (st) {
        free(f);
        return ty_error_wrap(st, "%s: tensor %s", path, t->name);
    }
    *out = f;
    return TOY_OK;
}

/* Checks one pair against the base tensor and converts it. */
static toy_status load_pair(const toy_model *base, const char *path, const char *name,
                            const toy_gguf_tensor *ta, const toy_gguf_tensor *tb, ty_lora_pair *p) {
    int64_t w_in, w_out;
    int w_dims;
    if (!base_matrix(base, name, &w_in, &w_out, &w_dims))
        return ty_error(TOY_ERR_FORMAT, "%s: adapter tensor %s.lora_a: the base model %s has no tensor %s",
                        path, name, toy_gguf_path(base->gguf), name);
    if (w_dims != 2)
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: %s has %d dimensions: toy applies LoRA to matrices only",
                        path, name, w_dims);
    if (ta->n_dims > 2 || tb->n_dims > 2)
        return ty_error(TOY_ERR_FORMAT, "%s: %s.lora_a/lora_b must be matrices", path, name);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->n_in = w_in;
    p->n_out = w_out;
    p->n_groups = 1;
    const bool embd = !strcmp(name, "token_embd.weight");
    /* token_embd: a [rank, n_vocab], b [rank, n_embd]; else a [n_in, rank], b [rank, n_out] */
    p->rank = embd ? ta->ne[0] : ta->ne[1];
    const bool shape_ok = embd ? ta->ne[1] == w_out && tb->ne[1] == w_in && tb->ne[0] == p->rank
                               : ta->ne[0] == w_in && tb->ne[1] == w_out && tb->ne[0] == p->rank;
    if (!shape_ok || p->rank < 1)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: %s.lora_a is [%lld, %lld] and lora_b [%lld, %lld], which do not fit %s [%lld, %lld] "
                        "of the base model (a different base?)",
                        path, name, (long long)ta->ne[0], (long long)ta->ne[1], (long long)tb->ne[0],
                        (long long)tb->ne[1], name, (long long)w_in, (long long)w_out);
    toy_status st = to_f32(path, ta, &p->a);
    if (!st) st = to_f32(path, tb, &p->b);
    return st;
}

/* Layer il's per-head pairs as one pair of rank n_head r with a block-diagonal B (lora.h). */
static toy_status load_per_head(const toy_model *base, const toy_gguf *g, const char *path, int il, ty_lora_pair *p) {
    const ty_hparams *hp = &base->hp;
    if (il >= hp->n_layer)
        return ty_error(TOY_ERR_FORMAT, "%s: per-head adapter of layer %d: the base model has %d layers", path, il,
                        hp->n_layer);
    if (hp->fused_qkv)
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: a per-head LoRA-Q adapter, and the base fuses Q into attn_qkv", path);
    const int64_t G = hp->n_head, C = hp->n_embd, hd = hp->head_dim, qd = G * hd;
    int64_t r = 0;
    char name[128];
    for (int64_t h = 0; h < G; h++) {
        const toy_gguf_tensor *t[2];
        for (int ab = 0; ab < 2; ab++) {
            snprintf(name, sizeof name, "blk.%d.attn_q.head_%lld.lora_%c.weight", il, (long long)h, ab ? 'b' : 'a');
            t[ab] = toy_gguf_find_tensor(g, name);
            if (!t[ab])
                return ty_error(TOY_ERR_FORMAT, "%s: per-head adapter of layer %d: tensor %s is missing (the base has "
                                "%lld query heads)", path, il, name, (long long)G);
        }
        if (h == 0) {
            r = t[0]->ne[1];
            if (r < 1 || r > 4096 || r * G > INT32_MAX / C)
                return ty_error(TOY_ERR_FORMAT, "%s: %s: rank %lld", path, t[0]->name, (long long)r);
            *p = (ty_lora_pair){.n_in = C, .n_out = qd, .rank = G * r, .n_groups = G, .per_head = true};
            snprintf(p->name, sizeof p->name, "blk.%d.attn_q.weight", il);
            p->a = malloc((size_t)(G * r * C) * sizeof *p->a);
            p->b = calloc((size_t)(qd * G * r), sizeof *p->b);
            if (!p->a || !p->b) return ty_error(TOY_ERR_NOMEM, "%s: no memory", path);
        }
        if (t[0]->n_dims > 2 || t[1]->n_dims > 2 || t[0]->ne[0] != C || t[0]->ne[1] != r || t[1]->ne[0] != r ||
            t[1]->ne[1] != hd)
            return ty_error(TOY_ERR_FORMAT,
                            "%s: %s is [%lld, %lld] and lora_b [%lld, %lld]: head %lld of layer %d needs [%lld, %lld] "
                            "and [%lld, %lld] (n_embd, rank; rank, head_dim)",
                            path, t[0]->name, (long long)t[0]->ne[0], (long long)t[0]->ne[1], (long long)t[1]->ne[0],
                            (long long)t[1]->ne[1], (long long)h, il, (long long)C, (long long)r, (long long)r,
                            (long long)hd);
        float *a, *b;
        toy_status st = to_f32(path, t[0], &a);
        if (st) return st;
        memcpy(p->a + h * r * C, a, (size_t)(r * C) * sizeof *a);
        free(a);
        if ((st = to_f32(path, t[1], &b))) return st;
        for (int64_t o = 0; o < hd; o++) memcpy(p->b + (h * hd + o) * G * r + h * r, b + o * r, (size_t)r * sizeof *b);
        free(b);
    }
    return TOY_OK;
}

toy_status toy_lora_load(const toy_model *base, const char *path, toy_lora **out) {
    *out = NULL;
    toy_gguf *g;
    toy_status st = toy_gguf_open(path, &g);
    if (st) return st;
    const char *s = "", *base_arch = "";
    size_t len = 0, base_len = 0;
    bool per_head = false; /* toy's design's adapter (lora.h) */
    int layer, head;
    char ab;
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++)
        per_head |= ty_lora_per_head_name(toy_gguf_tensor_at(g, i)->name, &layer, &head, &ab);
    if (per_head) {
        if (toy_gguf_get(g, "adapter.type") && !str_is(g, "adapter.type", "lora", &s, &len))
            st = ty_error(TOY_ERR_UNSUPPORTED, "%s: adapter.type is \"%.*s\"; toy reads \"lora\" adapters", path,
                          (int)len, s);
        else if (toy_gguf_get(g, "general.architecture") &&
                 (toy_gguf_get_str(base->gguf, "general.architecture", &base_arch, &base_len) ||
                  toy_gguf_get_str(g, "general.architecture", &s, &len) || len != base_len ||
                  memcmp(s, base_arch, len)))
            st = ty_error(TOY_ERR_FORMAT, "%s: an adapter for architecture \"%.*s\", the base model is \"%.*s\"",
                          path, (int)len, s, (int)base_len, base_arch);
    } else if (!str_is(g, "general.type", "adapter", &s, &len))
        st = ty_error(TOY_ERR_FORMAT, "%s: general.type is \"%.*s\", not \"adapter\": not a LoRA adapter", path,
                      (int)len, s);
    else if (!str_is(g, "adapter.type", "lora", &s, &len))
        st = ty_error(TOY_ERR_UNSUPPORTED, "%s: adapter.type is \"%.*s\"; toy reads \"lora\" adapters", path,
                      (int)len, s);
    else if (toy_gguf_get_str(base->gguf, "general.architecture", &base_arch, &base_len) ||
             toy_gguf_get_str(g, "general.architecture", &s, &len) || len != base_len ||
             memcmp(s, base_arch, len))
        st = ty_error(TOY_ERR_FORMAT, "%s: an adapter for architecture \"%.*s\", the base model is \"%.*s\"",
                      path, (int)len, s, (int)base_len, base_arch);
    toy_lora *lora = NULL;
    if (!st) {
        lora = calloc(1, sizeof *lora);
        const int64_t n_t = toy_gguf_n_tensors(g);
        if (lora) lora->pairs = calloc((size_t)(n_t / 2 + 1), sizeof *lora->pairs);
        if (lora) lora->path = strdup(path);
        if (!lora || !lora->pairs || !lora->path) st = ty_error(TOY_ERR_NOMEM, "%s: no memory", path);
        double alpha = 0;
        const toy_gguf_value *v = toy_gguf_get(g, "adapter.lora.alpha");
        if (!st && v && toy_gguf_value_f64(v, &alpha))
            st = ty_error(TOY_ERR_FORMAT, "%s: adapter.lora.alpha is not a number", path);
        if (!st && !isfinite(alpha)) /* it scales every product of the adapter */
            st = ty_error(TOY_ERR_FORMAT, "%s: adapter.lora.alpha is %g, not a finite number", path, alpha);
        if (lora) lora->alpha = (float)alpha;
        for (int64_t i = 0; !st && i < n_t; i++) {
            const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
            size_t stem;
            if (ty_lora_per_head_name(t->name, &layer, &head, &ab)) {
                char first[128];
                snprintf(first, sizeof first, "blk.%d.attn_q.head_0.lora_a.weight", layer);
                if (head == 0 && ab == 'a') st = load_per_head(base, g, path, layer, &lora->pairs[lora->n_pairs++]);
                else if (!toy_gguf_find_tensor(g, first))
                    st = ty_error(TOY_ERR_FORMAT, "%s: tensor %s has no %s beside it", path, t->name, first);
                continue;
            }
            if (per_head && (is_per_head_moment(t->name) || (!ends_with(t->name, ".lora_a", &stem) &&
                                                             !ends_with(t->name, ".lora_b", &stem))))
                continue; /* the moments, and the tensors of a checkpoint's base */
            if (ends_with(t->name, "_norm.weight", &stem)) continue; /* llama.cpp skips them too */
            if (ends_with(t->name, ".lora_b", &stem)) {
                char a_name[128];
                snprintf(a_name, sizeof a_name, "%.*s.lora_a", (int)stem, t->name);
                if (!toy_gguf_find_tensor(g, a_name))
                    st = ty_error(TOY_ERR_FORMAT, "%s: tensor %s has no %s beside it", path, t->name, a_name);
                continue;
            }
            if (!ends_with(t->name, ".lora_a", &stem)) {
                st = ty_error(TOY_ERR_FORMAT, "%s: tensor %s is neither a .lora_a nor a .lora_b", path, t->name);
                break;
            }
            char name[96], b_name[128];
            if (stem >= sizeof name) {
                st = ty_error(TOY_ERR_FORMAT, "%s: tensor name %s too long", path, t->name);
                break;
            }
            snprintf(name, sizeof name, "%.*s", (int)stem, t->name);
            snprintf(b_name, sizeof b_name, "%s.lora_b", name);
            const toy_gguf_tensor *tb = toy_gguf_find_tensor(g, b_name);
            if (!tb) {
                st = ty_error(TOY_ERR_FORMAT, "%s: tensor %s has no %s beside it", path, t->name, b_name);
                break;
            }
            st = load_pair(base, path, name, t, tb, &lora->pairs[lora->n_pairs++]);
        }
        if (!st && lora->n_pairs == 0) st = ty_error(TOY_ERR_FORMAT, "%s: the adapter has no lora_a/lora_b pairs", path);
    }
    toy_gguf_close(g);
    if (st) {
        toy_lora_free(lora);
        return st;
    }
    *out = lora;
    return TOY_OK;
}

toy_status ty_lora_writer_new(const char *arch, size_t arch_len, float alpha, toy_gguf_writer **out) {
    toy_gguf_writer *w = *out = toy_gguf_writer_new();
    if (!w) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_status st = toy_gguf_writer_set_str(w, "general.type", "adapter", 7);
    if (!st) st = toy_gguf_writer_set_str(w, "general.architecture", arch, arch_len);
    if (!st) st = toy_gguf_writer_set_str(w, "adapter.type", "lora", 4);
    if (!st) st = toy_gguf_writer_set_f32(w, "adapter.lora.alpha", alpha);
    return st;
}

toy_status ty_lora_write(const char *path, const char *arch, float alpha, const ty_lora_pair *pairs,
                         int n) {
    toy_gguf_writer *w;
    toy_status st = ty_lora_writer_new(arch, strlen(arch), alpha, &w);
    for (int i = 0; !st && i < n; i++) {
        const ty_lora_pair *p = &pairs[i];
        const bool embd = !strcmp(p->name, "token_embd.weight");
        char name[128];
        const int64_t ne_a[2] = {embd ? p->rank : p->n_in, embd ? p->n_out : p->rank};
        const int64_t ne_b[2] = {p->rank, embd ? p->n_in : p->n_out};
        snprintf(name, sizeof name, "%s.lora_a", p->name);
        st = toy_gguf_writer_add_tensor(w, name, TOY_TYPE_F32, 2, ne_a, p->a);
        snprintf(name, sizeof name, "%s.lora_b", p->name);
        if (!st) st = toy_gguf_writer_add_tensor(w, name, TOY_TYPE_F32, 2, ne_b, p->b);
    }
    if (!st) st = toy_gguf_writer_write(w, path);
    toy_gguf_writer_free(w);
    return st;
}

/* ---------------------------------------------------------------- merging */

typedef struct {
    const toy_gguf_tensor *t;
    const ty_type_traits *tr;
    const ty_lora_pair *pairs[TOY_LORA_MERGE_MAX];
    float scales[TOY_LORA_MERGE_MAX];
    int n;
} merge_rows;

/* Row r of W + sum of s B A (token_embd: row r gains s B a_r). */
static void merged_row(void *user, int64_t r, float *out) {
    const merge_rows *m = user;
    const int64_t n_cols = m->t->ne[0];
    m->tr->to_float((const uint8_t *)m->t->data + (size_t)r * (m->t->size / (size_t)m->t->ne[1]), out, n_cols);
    for (int i = 0; i < m->n; i++) {
        const ty_lora_pair *p = m->pairs[i];
        const float s = m->scales[i];
        const bool embd = !strcmp(p->name, "token_embd.weight");
        for (int64_t c = 0; c < n_cols; c++) {
            float d = 0.0f;
            for (int64_t k = 0; k < p->rank; k++)
                d += embd ? p->b[c * p->rank + k] * p->a[r * p->rank + k] : p->b[r * p->rank + k] * p->a[k * n_cols + c];
            out[c] += s * d;
        }
    }
}

toy_status toy_lora_merge(const toy_model *base, toy_lora *const *loras, const float *scales, int n, toy_type type,
                          int n_threads, const char *path) {
    if (n > TOY_LORA_MERGE_MAX) return ty_error(TOY_ERR_INVALID, "at most %d adapters to merge", TOY_LORA_MERGE_MAX);
    const toy_gguf *src = base->gguf;
    toy_gguf_writer *w = toy_gguf_writer_new();
    if (!w) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_status st = TOY_OK;
    for (int64_t i = 0; !st && i < toy_gguf_n_kv(src); i++)
        st = toy_gguf_writer_set_value(w, toy_gguf_key(src, i), toy_gguf_kv(src, i));
    const int64_t n_t = toy_gguf_n_tensors(src);
    int *types = calloc((size_t)n_t + 1, sizeof *types);
    if (!types) st = ty_error(TOY_ERR_NOMEM, "no memory");
    for (int64_t i = 0; !st && i < n_t; i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(src, i);
        bool merged = false;
        for (int j = 0; j < n; j++) merged |= ty_lora_find(loras[j], t->name) != NULL;
        types[i] = merged ? type : t->type;
        st = toy_gguf_writer_add_tensor(w, t->name, types[i], t->n_dims ? t->n_dims : 1, t->ne, NULL);
    }
    if (!st) st = toy_gguf_writer_begin(w, path);
    for (int64_t i = 0; !st && i < n_t; i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(src, i);
        merge_rows m = {.t = t, .tr = ty_type_traits_get(t->type)};
        for (int j = 0; j < n; j++) {
            const ty_lora_pair *p = ty_lora_find(loras[j], t->name);
            if (p) {
                m.pairs[m.n] = p;
                m.scales[m.n++] = ty_lora_pair_scale(loras[j], p, scales ? scales[j] : 1.0f);
            }
        }
        if (!m.n) {
            st = toy_gguf_writer_write_tensor_data(w, t->data, t->size);
            continue;
        }
        uint8_t *buf = NULL;
        size_t size = 0;
        st = ty_quantize_rows(t->name, t->ne[0], t->ne[1], merged_row, &m, types[i], n_threads, &buf, &size);
        if (!st) st = toy_gguf_writer_write_tensor_data(w, buf, size);
        free(buf);
    }
    if (!st) st = toy_gguf_writer_finish(w);
    toy_gguf_writer_free(w);
    free(types);
    return st;
}
