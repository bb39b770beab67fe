/* backend.h — the small set of operations a forward pass is made of. The CPU backend
 * implements them (backend_cpu.c); a CUDA backend will implement the same table. The
 * forward pass calls only these and does not know which backend runs.
 *
 * Shapes: activations are row-major, one row per token. Every reduction that produces
 * one output element is done in one fixed order, whatever the number of tokens or
 * threads: a token's results do not depend on what else is in its batch.
 */
#ifndef TOY_BACKEND_H
#define TOY_BACKEND_H

#include <stdint.h>

#include "model.h"

typedef struct ty_backend ty_backend;

/* Where the K and V of one layer are, and which cells each sequence holds. */
typedef struct {
    const uint8_t *k;     /* [n_seq][n_head_kv][cells_per_seq] rows of head_dim, type_k */
    const uint8_t *v;     /* the same, type_v */
    int type_k, type_v;
    size_t head_bytes_k, head_bytes_v;
    const int32_t *pos;   /* position of each cell */
    int32_t cells_per_seq;
    const int32_t *n_used; /* per sequence: cells in use, from seq * cells_per_seq */
} ty_kv_view;

typedef struct {
    int32_t n_head, n_head_kv, head_dim;
    float scale;   /* applied to QK^T before the softmax */
    float softcap; /* 0: off; else scores = softcap * tanh(scores / softcap) first */
    int32_t n_swa; /* 0: causal; else a query at p sees only keys at k with p - k < n_swa */
} ty_attn_params;


struct ty_backend {
    const char *name;
    /* Allocates scratch once, for batches of up to n_tok tokens of rows up to max_cols
     * floats and attention with n_head query heads of head_dim; after it only the CPU's
     * prefill attention grows one buffer (a sequence's K and V as floats) when a longer
     * prompt needs it, and goes token by token if that allocation fails. */
    toy_status (*reserve)(ty_backend *be, int64_t n_tok, int64_t max_cols, int64_t n_head,
                          int64_t head_dim);
    /* y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w, over n_tok rows of n */
    void (*rms_norm)(ty_backend *be, float *y, const float *x, const float *w, int64_t n_tok,
                     int64_t n, float eps);
    /* LayerNorm: y[t] = (x[t] - mean(x[t])) * rsqrt(var(x[t]) + eps) * w + b, over n_tok rows of n
     * (ggml_norm, then mul and add: each step rounded) */
    void (*layer_norm)(ty_backend *be, float *y, const float *x, const float *w, const float *b, int64_t n_tok,
                       int64_t n, float eps);
    /* y[t][r] = W[r] . x[t] for n_tok tokens; x rows have w->n_cols floats, y rows
     * w->n_rows floats */
    void (*matmul)(ty_backend *be, const ty_weight *w, const float *x, int64_t n_tok, float *y);
    /* The same for n_w matrices of one input (Q, K, V; gate, up): y[i] = w[i] x */
    void (*matmul_multi)(ty_backend *be, int n_w, const ty_weight *const *w, const float *x,
                         int64_t n_tok, float *const *y);
    /* rows of an embedding matrix as floats */
    void (*get_rows)(ty_backend *be, const ty_weight *w, const int32_t *ids, int64_t n, float *y);
    /* rotates n_heads heads of each of n_tok rows in place, row t at position pos[t] */
    void (*rope)(ty_backend *be, float *x, int64_t n_tok, int32_t n_heads, int32_t head_dim,
                 const int32_t *pos, const ty_rope_params *p);
    /* out[t] = softmax(scale * q[t] K^T, causal over seq_id[t]'s cells) V, per head:
     * fused, one pass with an online softmax, the K and V rows of a KV head read once
     * for all the query heads that share it */
    void (*attention)(ty_backend *be, float *out, const float *q, int64_t n_tok,
                      const int32_t *pos, const int32_t *seq_id, const ty_kv_view *kv,
                      const ty_attn_params *p);
    /* The plain path (toy_attn), in three steps over kq [n_tok][n_head][n_kv], column c
     * of a token being cell c of its sequence: the scores (softcapped, scaled; -inf
     * where the token does not see the cell or it is past the sequence's cells), their
     * softmax in place, and out[t] = kq V. */
    void (*attn_scores)(ty_backend *be, float *kq, const float *q, int64_t n_tok, const int32_t *pos,
                        const int32_t *seq_id, const ty_kv_view *kv, const ty_attn_params *p, int32_t n_kv);
    void (*softmax_rows)(ty_backend *be, float *x, int64_t n_rows, int64_t n);
    void (*attn_mix)(ty_backend *be, float *out, const float *kq, int64_t n_tok, const int32_t *seq_id,
                     const ty_kv_view *kv, const ty_attn_params *p, int32_t n_kv);
    /* y = silu(gate) * up, elementwise */
    void (*swiglu)(ty_backend *be, float *y, const float *gate, const float *up, int64_t n);
    /* y = gelu(gate) * up, tanh GELU through ggml's fp16 table */
    void (*geglu)(ty_backend *be, float *y, const float *gate, const float *up, int64_t n);
    /* y = gelu(x), elementwise, through the same table */
    void (*gelu)(ty_backend *be, float *y, const float *x, int64_t n);
    /* y += x, elementwise */
    void (*add)(ty_backend *be, float *y, const float *x, int64_t n);
    /* y[t] += b for n_tok rows of n */
    void (*add_bias)(ty_backend *be, float *y, const float *b, int64_t n_tok, int64_t n);
    /* y *= s */
    void (*scale)(ty_backend *be, float *y, float s, int64_t n);
    /* y = cap * tanh(y / cap) */
    void (*softcap)(ty_backend *be, float *y, float cap, int64_t n);
    /* y = sigmoid(y) */
    void (*sigmoid)(ty_backend *be, float *y, int64_t n);
    void (*free)(ty_backend *be);
};

/* A CPU backend with n_threads threads (a persistent pool). NULL on failure. */
ty_backend *ty_backend_cpu_new(int n_threads);

#endif
