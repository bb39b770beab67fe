/* ops.h — training's operations as forward/backward pairs over plain arrays (as in
 * llm.c). Activations are row-major, one row per token: n = B * T rows, token t of
 * sequence b in row b * T + t.
 *
 * Backward functions ADD into every gradient they produce (inputs and weights), so
 * branches that meet — the residual stream, Q, K and V reading one input, a tied
 * embedding — accumulate without copies; whoever starts a sum zeroes it. A gradient
 * pointer may be NULL where nobody needs it.
 *
 * Every result is independent of the number of threads: products are FMA chains in a
 * fixed order (gemm.h), row operations run one row per task, and sums over rows (the
 * gradient of a norm weight or a bias) run one column per task, rows in order.
 */
#ifndef TOY_TRAIN_OPS_H
#define TOY_TRAIN_OPS_H

#include <stdint.h>

#include "gemm.h"
#include "model.h"
#include "threadpool.h"

/* ---- embedding: out[i] = scale * wte[tok[i]] */
void ty_embedding_forward(float *out, const int32_t *tok, const float *wte, int64_t n, int64_t C,
                       float scale);
void ty_embedding_backward(float *dwte, const float *dout, const int32_t *tok, int64_t n, int64_t C,
                        float scale);

/* ---- learned positions: out[r] += wpe[r % T] (row r is at position r % T) */
void ty_position_forward(float *out, const float *wpe, int64_t n, int64_t T, int64_t C);
void ty_position_backward(ty_pool *pool, float *dwpe, const float *dout, int64_t n, int64_t T, int64_t C);

/* ---- LayerNorm: out = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var(x) + eps) per row;
 * mean and rstd kept for the backward (either may be NULL in a forward that needs none) */
void ty_layernorm_forward(ty_pool *pool, float *out, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int64_t n, int64_t C, float eps);
void ty_layernorm_backward(ty_pool *pool, float *dx, float *dw, float *db, const float *dout, const float *x,
                        const float *w, const float *mean, const float *rstd, int64_t n, int64_t C);

/* ---- RMSNorm: out = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) per row */
void ty_rmsnorm_forward(ty_pool *pool, float *out, float *rstd, const float *x, const float *w,
                     int64_t n, int64_t C, float eps);
void ty_rmsnorm_backward(ty_pool *pool, float *dx, float *dw, const float *dout, const float *x,
                      const float *w, const float *rstd, int64_t n, int64_t C);

/* ---- linear: out[n x OC] = in[n x C] W^T + bias, W stored [OC][C], bias may be NULL.
 * panels (may be NULL, and each of its members): operands packed beforehand, so that
 * products that share one (a weight across the parts of a step, an input through
 * several weights) pack it once. Forward: w as op(B) of x W^T (ty_gemm_pack_b), in as
 * op(A) (ty_gemm_pack_a). Backward: w as op(B) of the input gradient's dy W, in as op(B)
 * of the weight gradient's dy^T x. */
typedef struct {
    const float *w, *in;
} ty_matmul_panels;
void ty_matmul_forward(ty_gemm *g, float *out, const float *in, const float *w, const ty_matmul_panels *panels,
                       const float *bias, int64_t n, int64_t C, int64_t OC);
void ty_matmul_backward(ty_gemm *g, float *din, float *dw, float *dbias, const float *dout, const float *in,
                        const float *w, const ty_matmul_panels *panels, int64_t n, int64_t C, int64_t OC);

/* ---- RoPE, in place over n rows of n_heads heads of head_dim; row r is at position
 * r % T, and cs holds ty_rope_cos_sin of positions 0..T-1 (n_rot floats each). The
 * backward rotates by the transpose (cos and sin may carry attn_factor: not orthogonal). */
void ty_rope_forward(ty_pool *pool, float *x, int64_t n, int64_t T, int n_heads, int head_dim,
                  const ty_rope_params *p, const float *cs);
void ty_rope_backward(ty_pool *pool, float *dx, int64_t n, int64_t T, int n_heads, int head_dim,
                   const ty_rope_params *p, const float *cs);
/* The gradient of the frequency factors p->freq_factors (llama3's rope_freqs, LongRoPE's
 * factors): every angle is theta / factor, so dL/dfactor_i = sum over rows and heads of
 * -(angle / factor_i) dL/dangle, with dL/dangle = dy1 y0 - dy0 y1 for the rotated pair
 * (y0, y1) and its gradient. y: the rotated rows, dy: their gradients; theta holds
 * ty_rope_angles of positions 0..T-1 (n_rot / 2 each). Added into dff. */
void ty_rope_freq_backward(float *dff, const float *y, const float *dy, int64_t n, int64_t T,
                        int n_heads, int head_dim, const ty_rope_params *p, const float *theta);

/* ---- causal attention of B sequences of T tokens, grouped-query: query head h reads KV
 * head h / (n_head / n_head_kv). score = softcap(q . k) * scale (softcap c > 0:
 * c * tanh(x / c)); a query at t sees keys at u <= t, and with n_swa > 0 only those with
 * t - u < n_swa. q, out [n][n_head * hd]; k, v [n][n_head_kv * hd]; lse [B][n_head][T]
 * holds each row's log-sum-exp for the backward, which recomputes the scores. */
typedef struct {
    int64_t B, T;
    int n_head, n_head_kv, head_dim;
    float scale, softcap;
    int32_t n_swa;
} attention_shape;

/* floats of scratch attention needs (all threads) */
int64_t ty_attention_scratch_floats(const attention_shape *s, int n_threads);
void ty_attention_forward(ty_gemm *g, float *out, float *lse, const float *q, const float *k,
                       const float *v, const attention_shape *s, float *scratch);
void ty_attention_backward(ty_gemm *g, float *dq, float *dk, float *dv, const float *dout,
                        const float *out, const float *lse, const float *q, const float *k,
                        const float *v, const attention_shape *s, float *scratch);

/* ---- gated activations over n elements: out = act(gate) * up; SwiGLU act = silu,
 * GeGLU act = tanh-approximated GELU (the smooth function, not ggml's fp16 table) */
void ty_swiglu_forward(ty_pool *pool, float *out, const float *gate, const float *up, int64_t n);
void ty_swiglu_backward(ty_pool *pool, float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, int64_t n);
/* ---- GELU (tanh), plain: out = gelu(x) (gpt2's MLP) */
void ty_gelu_forward(ty_pool *pool, float *out, const float *x, int64_t n);
void ty_gelu_backward(ty_pool *pool, float *dx, const float *dout, const float *x, int64_t n);
void ty_geglu_forward(ty_pool *pool, float *out, const float *gate, const float *up, int64_t n);
void ty_geglu_backward(ty_pool *pool, float *dgate, float *dup, const float *dout, const float *gate,
                    const float *up, int64_t n);

/* ---- next-token loss over n rows of V logits y (the output projection): z = s * y, then
 * z = c * tanh(z / c) when c > 0; loss[i] = logsumexp(z_i) - z_i[target[i]]. Rows with
 * target < 0 are not scored (loss 0). The forward turns y into z in place and keeps each
 * row's log-sum-exp; the backward writes dy for dloss[i] (the row's weight in the total),
 * reading z: dy and z may be the same array. */
void ty_lm_loss_forward(ty_pool *pool, float *y, float *loss, float *lse, const int32_t *target,
                     int64_t n, int64_t V, float s, float c);
void ty_lm_loss_backward(ty_pool *pool, float *dy, const float *z, const float *lse,
                      const int32_t *target, const float *dloss, int64_t n, int64_t V, float s,
                      float c);

/* ---- a frozen matrix (LoRA's base), in its file type: out = in W^T + bias, the rows of
 * W dequantized panel_rows at a time into panel [panel_rows x C] (never the whole
 * matrix), each panel one product; the backward gives din += dout W only. Each result
 * is the bits ty_matmul_forward / ty_matmul_backward give with W dequantized (gemm.h: a
 * product split over K with accumulate is the product in one call). */
void ty_frozen_matmul_forward(ty_gemm *g, float *out, const float *in, const ty_weight *w, const float *bias,
                           int64_t n, float *panel, int64_t panel_rows);
void ty_frozen_matmul_backward(ty_gemm *g, float *din, const float *dout, const ty_weight *w, int64_t n,
                            float *panel, int64_t panel_rows);
/* out[i] = scale * W[tok[i]], rows dequantized one by one (no backward: frozen) */
void ty_frozen_embedding_forward(float *out, const int32_t *tok, const ty_weight *w, int64_t n, float scale);

/* ---- LoRA: out[n x OC] += s (x A^T) B^T, A [r x C], B [OC x r]. The forward keeps
 * ts = s (x A^T) [n x r] for the backward, which adds dB += dout^T ts, dA += dt^T x and
 * dx += dt A with dt = s (dout B) (dts: [n x r] scratch). With groups G > 1 (one pair per
 * query head, toy's design) A is G pairs' A stacked [G r x C], ts [n x G r], and B is G
 * blocks [OC / G x r]: group q's rows of out gain ts's columns q r.. q r + r times B_q^T
 * (a block-diagonal B, its zeros never stored). x is the adapter's input after
 * dropout: ty_dropout_forward zeroes each element with probability p (a hash of key and
 * the element's index, so the backward can redraw the same mask) and scales the rest by
 * 1 / (1 - p); it is its own backward (the same mask applied to the gradient). The rows
 * are rows row0.. of the micro-batch: the index counts from its first row, so that a
 * micro-batch run in parts draws the masks of the whole. */
void ty_dropout_forward(ty_pool *pool, float *out, const float *in, int64_t n, int64_t C, float p, uint64_t key,
                        int64_t row0);
void ty_lora_forward(ty_gemm *g, float *out, float *ts, const float *x, const float *a, const float *b, int64_t n,
                     int64_t C, int64_t OC, int64_t r, int64_t groups, float s);
void ty_lora_backward(ty_gemm *g, float *dx, float *da, float *db, float *dts, const float *dout, const float *x,
                      const float *ts, const float *a, const float *b, int64_t n, int64_t C, int64_t OC, int64_t r,
                      int64_t groups, float s);

/* ---- small helpers: y = a + s * b (y may be a); y *= s */
void ty_add_scaled(ty_pool *pool, float *y, const float *a, const float *b, float s, int64_t n);
void ty_scale_inplace(ty_pool *pool, float *y, float s, int64_t n);

#endif
