/* train_model.h — a dense model being trained: every tensor of its GGUF file as F32 in
 * one allocation (the parameters), a gradient of the same layout, and the activations
 * of one micro-batch of B sequences of T tokens (the "seq mode" forward: whole
 * sequences from position 0, no KV cache).
 *
 * Quantized and half-precision tensors are dequantized once when the model is made, so
 * their gradients are those of the dequantized values. The forward follows toy_decode's
 * architecture switches, in F32 throughout (no rounding of matmul inputs) and with the
 * smooth tanh-GELU; llama.cpp's numbers differ from it by that rounding only.
 */
#ifndef TOY_TRAIN_MODEL_H
#define TOY_TRAIN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gemm.h"
#include "model.h"

/* A layer's weights: pointers into the parameters (or, in a gradient view, into the
 * gradients). Fused matrices (phi3's attn_qkv, ffn_up) are row ranges of one tensor. */
typedef struct {
    float *attn_norm, *wq, *wk, *wv, *bq, *bk, *bv, *q_norm, *k_norm, *wo, *post_attn_norm;
    float *ffn_norm, *ffn_gate, *ffn_up, *ffn_down, *post_ffn_norm;
    float *attn_norm_b, *ffn_norm_b, *bo, *b_up, *b_down; /* layer_norm, mat_bias (gpt2) */
} train_layer_weights;

typedef struct {
    float *token_embd, *output_norm, *output; /* output == token_embd when tied */
    float *output_norm_b, *pos_embd;          /* layer_norm, pos_embd (gpt2) */
    float *rope_factors;                      /* the frequency factors the layers use, or NULL */
    train_layer_weights *layers;
} train_weights;

/* One tensor of the file: where its floats are in the parameters. */
typedef struct {
    char name[96];
    int type; /* in the source file */
    int n_dims;
    int64_t ne[4];
    int64_t offset, n; /* floats */
    bool trainable;    /* false: carried unchanged (RoPE frequency factors) */
    bool decay;        /* weight decay applies: matrices, not norms and biases */
    bool lora;         /* a LoRA adapter's A or B */
    bool lora_a;       /* its A */
} train_tensor;

typedef struct {
    int B, T;
    uint64_t key;           /* which micro-batch this is: LoRA dropout's masks follow it */
    const int32_t *tokens;  /* [B * T] */
    const int32_t *targets; /* [B * T], the token each row predicts; < 0: not scored */
    const float *weights;   /* [B * T] each scored row's weight in the loss */
} train_batch;

typedef struct train_model train_model;

/* Training copies of a loaded model's tensors (the model may be freed after). MoE and
 * other layouts training does not cover are an error naming the architecture. seq_len
 * is the context the model is trained at (it picks LongRoPE's factors). */
toy_status ty_train_model_new(const toy_model *model, int32_t seq_len, ty_pool *pool,
                           train_model **out);
void ty_train_model_free(train_model *tm);

/* LoRA: the base's matrices stay as they are in the file (any type, memory-mapped: the
 * model must outlive the train_model), frozen with its norms and biases; the
 * parameters are adapters on the matrices named by `targets` (bits of 1 << MAT_Q ...
 * MAT_DOWN, model.h), y = W x + (alpha / rank) B (A dropout(x)), A
 * Gaussian (std init_scale, 1 / rank by default, from seed) and B zero, so that the
 * model starts as the base.
 * Their tensors are named as llama.cpp's adapters ("blk.0.attn_q.weight.lora_a",
 * ne [n_in, rank]; "...lora_b", ne [rank, n_out]). */
typedef struct {
    int32_t rank;
    float alpha;
    uint32_t targets;
    float dropout;
    uint64_t seed;
    /* toy's design's LoRA-Q: one rank-`rank` pair per query head (targets q only), named
     * "blk.0.attn_q.head_H.lora_a.weight" (ne [n_embd, rank]) and "...lora_b.weight"
     * (ne [rank, head_dim]), the scale alpha / rank */
    bool per_head;
    float init_scale; /* A's standard deviation; 0: 1 / rank */
} train_lora_params;
toy_status ty_train_model_new_lora(const toy_model *model, int32_t seq_len, ty_pool *pool,
                                const train_lora_params *lp, train_model **out);
/* NULL for a full model */
const train_lora_params *ty_train_model_lora(const train_model *tm);

/* Activations for micro-batches of up to B x T tokens (T <= the seq_len given), which
 * run in parts of whole sequences (train_model.c): the memory is that of one part. */
toy_status ty_train_model_reserve(train_model *tm, int B, int T);
/* The same in parts of part_B sequences (ty_train_model_reserve picks it): the parts
 * change the memory, never the bits, as test_train_fixtures checks. */
toy_status ty_train_model_reserve_parts(train_model *tm, int B, int T, int part_B);

/* The weighted loss sum_i weights[i] * loss_i of a batch. With backward, the gradient
 * of that sum is ADDED to the gradients (zero them to start a sum). */
double ty_train_model_step(train_model *tm, const train_batch *b, bool backward);

/* Taps the forward keeps on request (toy_trainer_tap), named as toy_decode's trace names
 * them: the layer's attention norm output, the attention branch as added to the residual,
 * the FFN norm output, the FFN branch as added, the residual stream after the layer. */
enum { TRAIN_TAP_ATTN_NORM, TRAIN_TAP_ATTN_OUT, TRAIN_TAP_FFN_NORM, TRAIN_TAP_FFN_OUT, TRAIN_TAP_OUT, TRAIN_TAP_KINDS };
extern const char *const ty_train_tap_names[TRAIN_TAP_KINDS];
/* From every later step, tap `kind` of layer il: *out, [B * T][n_embd] rows of the
 * micro-batch reserved (a reserve of another size drops the taps). */
toy_status ty_train_model_keep_tap(train_model *tm, int il, int kind, float **out);
/* The tap's rows, or NULL when it is not kept. */
const float *ty_train_model_tap(const train_model *tm, int il, int kind);

int64_t ty_train_model_n_params(const train_model *tm); /* trainable floats */
int64_t ty_train_model_n_floats(const train_model *tm);   /* the length of params and grads */
float *ty_train_model_params(train_model *tm);
float *ty_train_model_grads(train_model *tm);
void ty_train_model_zero_grads(train_model *tm);
int ty_train_model_n_tensors(const train_model *tm);
const train_tensor *ty_train_model_tensor(const train_model *tm, int i);
const ty_hparams *ty_train_model_hparams(const train_model *tm);
ty_gemm *ty_train_model_gemm(train_model *tm);

#endif
