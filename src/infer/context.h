/* context.h — per-context state: the KV cache, the backend and scratch, all allocated
 * once when the context is created. */
#ifndef TOY_CONTEXT_H
#define TOY_CONTEXT_H

#include "backend.h"
#include "kv_cache.h"
#include "model.h"

/* One adapter pair applied to one product: out += scale * (in A^T) B^T, B the rows of
 * lora_b that belong to this product (a part of a fused matrix). */
typedef struct {
    const float *a, *b;
    int64_t rank, n_in, n_rows;
    float scale;
} ty_lora_use;

struct toy_context {
    toy_model *model;
    toy_context_params params;
    ty_backend *be;
    ty_kv_cache kv;

    /* scratch, n_batch rows each */
    float *x;      /* residual stream [n_embd] */
    float *h;      /* normed input of a block [n_embd] */
    float *q;      /* [n_head * head_dim] */
    float *k;      /* [n_head_kv * head_dim] */
    float *v;
    float *attn;   /* attention output [n_head * head_dim] */
    float *kq;     /* TOY_ATTN_PLAIN: scores, then their softmax [n_tok][n_head][n_kv] */
    size_t kq_cap; /* floats kq holds */
    float *trace_act, *trace_ones; /* tracing: the FFN's activation alone [n_batch][n_ff], ones */
    float *o;      /* block output [n_embd] */
    float *gate;   /* [n_ff] */
    float *up;
    int32_t *cells;
    /* MoE */
    float *router;      /* [n_expert] per token */
    int32_t *expert_id; /* [n_expert_used] per token */
    float *expert_w;
    float *expert_out;  /* [n_expert_used][n_embd] per token */
    float *moe_in;      /* gathered rows of the tokens routed to one expert */
    int32_t *moe_rows;  /* (token, slot) of each gathered row */

    /* adapters (toy_context_set_lora): the uses of product slot i (layer il, matrix k at
     * il * MAT_KINDS + k; the output, then the embedding, after the layers) are
     * lora_uses[lora_first[i] .. lora_first[i + 1]) */
    ty_lora_use *lora_uses;
    int32_t *lora_first;
    float *lora_t, *lora_u; /* scratch: in A^T, then its product with B */
    float **lora_owned;     /* transposed copies (a tied output's share of an embedding adapter) */
    int n_lora_owned;

    /* logits of the last batch */
    float *logits;       /* [n_outputs][n_vocab] */
    int32_t *logits_row; /* per token of the last batch: row in logits, or -1 */
    int32_t n_last;      /* tokens in the last batch */
    int pipe_id;         /* its id in a pipeline (pipeline.h), or -1 */
    /* batches submitted (toy_decode_submit) whose outputs are not yet taken, oldest
     * first, a ring of depth flight_cap (the pipeline's stages; 1 alone) */
    struct ty_flight {
        int32_t n_tokens;
        int64_t rows;        /* its micro-batches' rows */
        int32_t *logits_row; /* [n_batch] */
    } *flight;
    int n_flight, flight_head, flight_cap;
    float *embd;         /* params.embeddings: final-norm state of each token of the last batch
                          * [n_batch][n_embd]; else NULL */
};

/* Layer il's RoPE in this context (its frequency factors: ty_model_rope_factors). */
ty_rope_params ty_context_rope(const toy_context *ctx, int il);

#endif
