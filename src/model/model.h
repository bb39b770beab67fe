/* model.h — a model as loaded: hyperparameters read once from GGUF metadata, and weights
 * that point into the mapped file.
 *
 * Architecture differences are named switches in ty_hparams and ty_layer (qkv_bias,
 * n_swa, ...), set once at load from model.c's table of architectures and the metadata;
 * the forwards of inference and training read the switches and never the architecture.
 */
#ifndef TOY_MODEL_H
#define TOY_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "toy.h"

#define TOY_MAX_LAYERS 512
#define TOY_MAX_EXPERTS 256
#define TOY_MAX_HEAD_DIM 1024

typedef enum {
    TY_ACT_SILU,      /* SwiGLU */
    TY_ACT_GELU_TANH, /* tanh-approximated GELU: GeGLU (gemma), or plain with ffn_no_gate (gpt2) */
} ty_ffn_act;

typedef enum {
    TY_ROPE_NORM, /* rotate adjacent pairs (2i, 2i+1): llama, granite */
    TY_ROPE_NEOX, /* rotate (i, i + n_rot/2): qwen, gemma, phi3, olmoe */
} ty_rope_type;

typedef struct {
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;   /* attention.key_length, default n_embd / n_head */
    int32_t head_dim_v; /* attention.value_length, default head_dim */
    int32_t n_ff;
    float rms_eps;      /* the norms' epsilon (layer_norm_epsilon where layer_norm) */

    /* RoPE (per-layer parameters are in ty_layer.rope) */
    ty_rope_type rope_type;
    int32_t n_rot;        /* rope.dimension_count: leading dimensions of a head rotated */
    float rope_freq_base; /* rope.freq_base */
    float rope_freq_scale; /* 1 / rope.scaling.factor (linear and YaRN scaling) */
    bool rope_yarn;
    int32_t n_ctx_orig;   /* rope.scaling.original_context_length */
    float rope_attn_factor; /* rope.scaling.attn_factor: multiplies cos and sin */

    /* feature switches: each architecture is a set of these (model.c's table) */
    bool tied_output;       /* no output.weight: token_embd is the output projection */
    bool per_head_weights;  /* toy's design's layout: blk.N.attn_{q,k,v}.head_H.weight (and .bias) */
    bool fused_qkv;         /* one attn_qkv matrix: rows of Q, then K, then V (phi3) */
    bool fused_gate_up;     /* ffn_up holds the gate rows, then the up rows (phi3) */
    bool qkv_bias;          /* attn_{q,k,v}.bias (qwen2), or attn_qkv.bias's parts (gpt2) */
    bool mat_bias;          /* attn_output, ffn_up and ffn_down have biases too (gpt2) */
    bool layer_norm;        /* the norms are LayerNorm (mean removed) with a bias, not RMSNorm (gpt2) */
    bool pos_embd;          /* learned position embeddings position_embd.weight, added to the token's (gpt2) */
    bool ffn_no_gate;       /* the FFN is down(act(up x)): no gate matrix (gpt2) */
    int32_t q_norm_len;     /* q is RMS-normed in groups of this many: head_dim or all of it, 0: not */
    int32_t k_norm_len;     /* the same for k */
    bool post_norms;        /* post_attention_norm and post_ffw_norm (gemma) */
    ty_ffn_act ffn_act;
    float q_scale;          /* Q is multiplied by it after RoPE (gemma, phi3: attention.scale; else 1) */
    float kq_scale;         /* QK^T is multiplied by it (attention.scale, 1/sqrt(head_dim), or 1) */
    float attn_softcap;     /* 0: off; else scores = cap * tanh(scores / cap) */
    float final_softcap;    /* the same on the logits */
    float embd_scale;       /* token embeddings are multiplied by it (gemma, granite) */
    float residual_scale;   /* attention and FFN outputs are multiplied by it (granite) */
    float logit_scale;      /* logits are divided by it (granite) */
    int32_t n_swa;          /* sliding window of SWA layers (0: none) */
    int32_t n_swa_ignored;  /* a window the file gives but llama.cpp ignores (phi3) */
    int32_t n_expert;       /* 0: dense FFN */
    int32_t n_expert_used;
    int32_t n_ff_exp;       /* rows of one expert's gate/up */
    int32_t n_ff_shexp;     /* rows of the shared expert (qwen2moe), 0: none */
    bool expert_weights_norm; /* renormalise the chosen experts' weights to sum 1 */
    toy_pooling pooling;    /* pooling_type of an embedding model, TOY_POOLING_UNSPECIFIED if absent */
} ty_hparams;

/* The matrices of a layer, in the order adapters and training count them. */
enum { MAT_Q, MAT_K, MAT_V, MAT_O, MAT_GATE, MAT_UP, MAT_DOWN, MAT_KINDS };

/* Where matrix `kind` of a layer is in the file: rows [row0, row0 + n_rows) of the n_out
 * rows of n_in elements of "blk.N.{tensor}.weight". A fused tensor (phi3's attn_qkv, its
 * ffn_up holding gate and up) holds several matrices, `first` the first of them. */
typedef struct {
    const char *tensor;
    int64_t n_in, row0, n_rows, n_out;
    int first;
} ty_mat_home;
ty_mat_home ty_layer_mat_home(const ty_hparams *hp, int kind);

typedef struct {
    ty_rope_type type;
    int32_t n_rot;
    float freq_base;
    float freq_scale;
    const float *freq_factors; /* n_rot/2 divisors of the angles (llama3, LongRoPE), or NULL */
    float attn_factor;         /* multiplies cos and sin */
    float ext_factor;          /* YaRN: 0 off, 1 on */
    float corr_dims[2];        /* YaRN correction range, in dimension pairs */
} ty_rope_params;

/* cos and sin of the n_rot / 2 angles of position pos, interleaved: cs[2i] = cos,
 * cs[2i + 1] = sin of pair i (rope.c). */
void ty_rope_cos_sin(const ty_rope_params *p, int32_t pos, float *cs);
/* The n_rot / 2 angles themselves (the backward of the frequency factors needs them). */
void ty_rope_angles(const ty_rope_params *p, int32_t pos, float *theta);

/* A weight matrix of n_rows rows of n_cols elements, in place in the mapped file. An
 * old-layout per-head matrix is several tensors ("parts") stacked along the rows. Where
 * this CPU has a packed kernel for the type (packed.h), inference also holds the matrix
 * repacked into groups of 16 rows, and the matmuls read only that. */
typedef struct {
    int type;
    int64_t n_cols;
    int64_t n_rows;
    size_t row_size;
    const uint8_t *data;          /* n_parts == 1 */
    int n_parts;
    int64_t rows_per_part;
    const uint8_t **parts;        /* n_parts > 1 */
    const uint8_t *packed;        /* the packed groups, or NULL (ty_model_pack; read with ty_weight_packed) */
    size_t packed_group;          /* bytes of one packed group of 16 rows */
} ty_weight;

static inline const void *ty_weight_row(const ty_weight *w, int64_t r) {
    if (w->n_parts <= 1) return w->data + (size_t)r * w->row_size;
    return w->parts[r / w->rows_per_part] + (size_t)(r % w->rows_per_part) * w->row_size;
}

/* A vector (norm weight, bias) as floats: in place when the file holds F32, else
 * converted once at load (these are small). */
typedef struct {
    const float *data;
    int64_t n;
} ty_vector;

typedef struct {
    ty_vector attn_norm, attn_norm_b; /* the bias: layer_norm */
    ty_weight wq, wk, wv, wo;
    ty_vector bq, bk, bv;          /* qkv_bias */
    ty_vector bo, b_up, b_down;    /* mat_bias */
    ty_vector q_norm, k_norm;      /* q_norm_len, k_norm_len */
    ty_vector post_attn_norm;      /* post_norms */
    ty_vector ffn_norm, ffn_norm_b;
    ty_vector post_ffn_norm;
    int32_t n_swa;                  /* this layer's sliding window, 0: full attention */
    ty_rope_params rope;           /* this layer's RoPE */
    ty_weight ffn_gate, ffn_up, ffn_down;      /* dense FFN */
    ty_weight ffn_gate_inp;                    /* MoE router [n_embd -> n_expert] */
    ty_weight ffn_gate_exps, ffn_up_exps, ffn_down_exps; /* n_expert stacked matrices */
    ty_weight ffn_gate_inp_shexp;                        /* shared expert's gate [n_embd -> 1] */
    ty_weight ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
} ty_layer;

/* Matrix `kind` (MAT_Q ...) of a layer. */
static inline ty_weight *ty_layer_mat(ty_layer *l, int kind) {
    ty_weight *w[MAT_KINDS] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down};
    return w[kind];
}

struct toy_model {
    const struct arch_desc *arch; /* the architecture's row of model.c's table */
    toy_gguf *gguf;
    toy_vocab *vocab;
    ty_hparams hp;
    ty_weight token_embd;
    ty_weight pos_embd;   /* pos_embd: [n_embd, n_ctx_train] */
    ty_vector output_norm, output_norm_b;
    ty_vector rope_freqs; /* llama3 frequency factors (data NULL when absent) */
    ty_vector rope_factors_long, rope_factors_short; /* LongRoPE (phi3) */
    ty_weight output;
    ty_layer *layers;
    /* what was allocated at load: converted vectors, per-head part tables, packed weights */
    void **owned;
    int n_owned, cap_owned;
    pthread_mutex_t pack_lock;
    bool packed;      /* ty_model_pack has run */
    uint64_t packed_bytes;
    /* the packed copies' whole 2 MiB pages, made huge after packing by a thread of idle
     * priority (model.c, "huge pages") */
    struct packed_region {
        uint8_t *p;
        size_t bytes;
    } *regions;
    int n_regions, cap_regions;
    pthread_t collapser;
    bool collapser_started;
    /* the collapser takes one huge page at a time, only while no forward pass runs
     * (ty_model_forward_begin/end): read with __atomic builtins; the wait under
     * collapse_lock, woken by collapse_wake */
    int collapse_stop, forwards, collapse_waiting;
    int collapse_pages, collapse_done; /* pages handed to the kernel; 1 once all were */
    pthread_mutex_t collapse_lock;
    pthread_cond_t collapse_wake;
    void *memory;     /* the file, for a model made in memory (toy_model_new), freed last */
    /* the pipeline stage this process computes (pipeline.h): layers [layer_first,
     * layer_end) of stage `stage` of n_stages; alone, all of them, stage 0 of 1 */
    int32_t layer_first, layer_end;
    int stage, n_stages;
    int pipe_id; /* its id in the pipeline, or -1 */
};

/* A model over an open GGUF (which it takes, with `memory`, the buffer under it, if
 * any: both are freed with the model, also when this fails). */
toy_status ty_model_from_gguf(toy_gguf *gguf, void *memory, toy_model **out);

/* Repacks, once, every matrix of a type this CPU has a packed kernel for (packed.h) and
 * gives the file's pages of those matrices back to the kernel (they are read again, from
 * the page cache, only by row lookups such as the token embedding). Each matrix is packed
 * by n_threads threads, one after another (so the file's pages go as soon as a matrix is
 * done). toy_model_pack calls it (a server, before it says ready), or toy_decode when a
 * batch first needs it (TY_PACK_PROMPT_TOKENS); a matrix is published, whole, by a
 * release store of its `packed`, so other contexts' products may run meanwhile on the
 * row kernels (the same bits: packed.h). */
toy_status ty_model_pack(toy_model *m, int n_threads);

/* Around each forward pass over the model's weights (toy_decode's stage): while one runs,
 * the thread that makes the packed copies' pages huge (model.c, "huge pages") waits, so
 * that a request is not held up by a page being copied under it. */
void ty_model_forward_begin(toy_model *m);
void ty_model_forward_end(toy_model *m);

/* toy_decode repacks before a batch of this many tokens or more, or one that holds
 * tokens of several sequences (batched decoding); a shorter prompt and one sequence's
 * decoding run on the row kernels. Repacking a model costs what about 80-100 prompt
 * tokens save on the packed products (docs/performance.md, "Start-up against
 * llama.cpp"), more where fresh memory is slow to come; one sequence's decoding reads
 * every weight once a token either way. */
#define TY_PACK_PROMPT_TOKENS 128

/* The packed groups of w, or NULL while there are none (another thread may be packing). */
static inline const uint8_t *ty_weight_packed(const ty_weight *w) {
    return __atomic_load_n(&w->packed, __ATOMIC_ACQUIRE);
}

/* The RoPE frequency factors of a context of n_ctx tokens (*data, NULL: none) and the
 * tensor that holds them: LongRoPE models use their long factors only when the context is
 * longer than the original one, as llama.cpp chooses. */
const char *ty_model_rope_factors(const toy_model *m, int32_t n_ctx, const float **data);

/* Matrix e of a stack of expert matrices. */
ty_weight ty_weight_expert(const ty_weight *w, int e);

#endif
