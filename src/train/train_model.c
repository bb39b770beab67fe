/* train_model.c — the training forward and backward of a dense model.
 *
 * train_model_step reads as toy_decode does: embed → for each layer (norm, attention,
 * FFN) → final norm → output projection and loss; then the same in reverse. The
 * architecture switches are those of toy_hparams. Per layer the forward keeps what the
 * backward cannot cheaply recompute (the layer's input, Q/K/V, the attention output and
 * its log-sum-exp, the FFN's gate and up); norms and gated activations are recomputed.
 * The output projection and the loss run over chunks of rows, the backward of each
 * chunk right after its forward, so the logits of the whole batch never exist at once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ops.h"
#include "train_model.h"

/* what the forward keeps of one layer, [n rows] each */
typedef struct {
    float *x;            /* the layer's input (the residual stream) */
    float *q_raw, *k_raw; /* before the QK norms (qk_norm only) */
    float *q, *k, *v;    /* as attention reads them (normed, rotated, prescaled) */
    float *att;          /* attention output [n][n_head * head_dim] */
    float *lse;          /* [B][n_head][T] */
    float *o_raw;        /* attention projection before its post-norm (post_norms only) */
    float *x_mid;        /* the residual stream after attention */
    float *gate, *up;    /* [n][n_ff] */
    float *f_raw;        /* FFN output before its post-norm (post_norms only) */
} layer_acts;

struct train_model {
    toy_hparams hp;
    toy_rope_params *rope; /* per layer, freq_factors pointing into the parameters */
    int32_t *n_swa;        /* per layer */
    int32_t seq_len;
    train_tensor *tensors;
    int n_tensors;
    int64_t n_floats, n_trainable;
    float *params, *grads;
    train_weights w, g;
    toy_gemm *gemm;
    toy_pool *pool;

    /* activations, for B x T */
    int B, T;
    float *act_mem;
    layer_acts *acts;
    float *x_final;
    /* scratch */
    float *h, *rstd, *act, *dact, *dgate, *dup, *dh, *dbranch, *draw, *datt, *dq, *dk, *dv;
    float *dq_raw, *dk_raw, *att_scratch, *cs, *theta, *logits, *row_loss, *row_lse;
    int64_t head_rows; /* rows of logits per chunk */
};

/* ---------------------------------------------------------------- tensors */

static int find_tensor(const train_model *tm, const char *name) {
    for (int i = 0; i < tm->n_tensors; i++)
        if (!strcmp(tm->tensors[i].name, name)) return i;
    return -1;
}

/* The tensor's floats in params (or grads), NULL if absent; `rows_skip` rows of
 * `row_len` into it (a part of a fused matrix). */
static float *tensor_at(const train_model *tm, float *base, const char *name, int64_t row0,
                        int64_t row_len) {
    const int i = find_tensor(tm, name);
    return i < 0 ? NULL : base + tm->tensors[i].offset + row0 * row_len;
}

static void bind_weights(const train_model *tm, float *base, train_weights *w) {
    const toy_hparams *hp = &tm->hp;
    const int64_t C = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    char name[96];
    w->token_embd = tensor_at(tm, base, "token_embd.weight", 0, 0);
    w->output_norm = tensor_at(tm, base, "output_norm.weight", 0, 0);
    w->output = hp->tied_output ? w->token_embd : tensor_at(tm, base, "output.weight", 0, 0);
    for (int il = 0; il < hp->n_layer; il++) {
        train_layer_weights *l = &w->layers[il];
#define T(fmt, row0, len) (snprintf(name, sizeof name, "blk.%d." fmt, il), tensor_at(tm, base, name, row0, len))
        l->attn_norm = T("attn_norm.weight", 0, 0);
        if (hp->fused_qkv) {
            l->wq = T("attn_qkv.weight", 0, C);
            l->wk = T("attn_qkv.weight", qd, C);
            l->wv = T("attn_qkv.weight", qd + kvd, C);
        } else {
            l->wq = T("attn_q.weight", 0, 0);
            l->wk = T("attn_k.weight", 0, 0);
            l->wv = T("attn_v.weight", 0, 0);
        }
        l->bq = T("attn_q.bias", 0, 0);
        l->bk = T("attn_k.bias", 0, 0);
        l->bv = T("attn_v.bias", 0, 0);
        l->q_norm = T("attn_q_norm.weight", 0, 0);
        l->k_norm = T("attn_k_norm.weight", 0, 0);
        l->wo = T("attn_output.weight", 0, 0);
        l->post_attn_norm = T("post_attention_norm.weight", 0, 0);
        l->ffn_norm = T("ffn_norm.weight", 0, 0);
        if (hp->fused_gate_up) {
            l->ffn_gate = T("ffn_up.weight", 0, C);
            l->ffn_up = T("ffn_up.weight", hp->n_ff, C);
        } else {
            l->ffn_gate = T("ffn_gate.weight", 0, 0);
            l->ffn_up = T("ffn_up.weight", 0, 0);
        }
        l->ffn_down = T("ffn_down.weight", 0, 0);
        l->post_ffn_norm = T("post_ffw_norm.weight", 0, 0);
#undef T
    }
}

static const char *arch_name(const toy_model *m) {
    const char *s;
    size_t len;
    static _Thread_local char buf[64];
    if (toy_gguf_get_str(m->gguf, "general.architecture", &s, &len)) return "?";
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 63 ? len : 63), s);
    return buf;
}

toy_status train_model_new(const toy_model *m, int32_t seq_len, toy_pool *pool, train_model **out) {
    *out = NULL;
    const toy_hparams *hp = &m->hp;
    const char *path = toy_gguf_path(m->gguf);
    if (hp->n_expert > 0)
        return toy_error(TOY_ERR_UNSUPPORTED, "%s: training not supported for %s (mixture of experts)",
                         path, arch_name(m));
    if (hp->per_head_weights)
        return toy_error(TOY_ERR_UNSUPPORTED, "%s: training not supported for the per-head tensor layout",
                         path);
    if (seq_len < 1) return toy_error(TOY_ERR_INVALID, "sequence length %d", seq_len);
    train_model *tm = calloc(1, sizeof *tm);
    if (!tm) return toy_error(TOY_ERR_NOMEM, "no memory");
    tm->hp = *hp;
    tm->seq_len = seq_len;
    tm->pool = pool;
    toy_status st = TOY_OK;
    const toy_gguf *g = m->gguf;
    tm->n_tensors = (int)toy_gguf_n_tensors(g);
    tm->tensors = calloc((size_t)tm->n_tensors, sizeof *tm->tensors);
    tm->rope = calloc((size_t)hp->n_layer, sizeof *tm->rope);
    tm->n_swa = calloc((size_t)hp->n_layer, sizeof *tm->n_swa);
    tm->w.layers = calloc((size_t)hp->n_layer, sizeof *tm->w.layers);
    tm->g.layers = calloc((size_t)hp->n_layer, sizeof *tm->g.layers);
    tm->gemm = toy_gemm_new(pool);
    if (!tm->tensors || !tm->rope || !tm->n_swa || !tm->w.layers || !tm->g.layers || !tm->gemm) {
        train_model_free(tm);
        return toy_error(TOY_ERR_NOMEM, "no memory");
    }
    /* one float per element, tensors in file order, each 16-float aligned */
    int64_t off = 0;
    for (int i = 0; i < tm->n_tensors; i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        train_tensor *tt = &tm->tensors[i];
        snprintf(tt->name, sizeof tt->name, "%s", t->name);
        tt->type = t->type;
        tt->n_dims = t->n_dims;
        memcpy(tt->ne, t->ne, sizeof tt->ne);
        tt->n = toy_tensor_nelements(t);
        tt->offset = off;
        if (!toy_type_can_dequantize(t->type)) {
            st = toy_error(TOY_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which toy cannot train",
                           path, t->name, toy_type_name(t->type));
            break;
        }
        tt->trainable = strncmp(t->name, "rope_freqs", 10) && strncmp(t->name, "rope_factors", 12);
        tt->decay = tt->trainable && t->n_dims >= 2;
        if (tt->trainable) tm->n_trainable += tt->n;
        off += (tt->n + 15) / 16 * 16;
    }
    tm->n_floats = off;
    if (!st) {
        tm->params = aligned_alloc(64, (size_t)off * sizeof(float) + 64);
        tm->grads = aligned_alloc(64, (size_t)off * sizeof(float) + 64);
        if (!tm->params || !tm->grads)
            st = toy_error(TOY_ERR_NOMEM, "cannot allocate %lld parameters and gradients",
                           (long long)off);
    }
    for (int i = 0; !st && i < tm->n_tensors; i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        st = toy_dequantize(t->type, t->data, tm->params + tm->tensors[i].offset, tm->tensors[i].n);
        if (st) toy_error_wrap(st, "%s: tensor %s", path, t->name);
    }
    if (st) {
        train_model_free(tm);
        return st;
    }
    memset(tm->grads, 0, (size_t)off * sizeof(float));
    bind_weights(tm, tm->params, &tm->w);
    bind_weights(tm, tm->grads, &tm->g);
    /* RoPE as a context of seq_len would use it (LongRoPE: long factors past the
     * original context), the factors pointing at the trainable copy */
    const char *factors = NULL;
    if (m->rope_factors_long.data) factors = seq_len > hp->n_ctx_orig ? "rope_factors_long.weight"
                                                                      : "rope_factors_short.weight";
    else if (m->rope_freqs.data) factors = "rope_freqs.weight";
    if (factors) {
        tm->w.rope_factors = tensor_at(tm, tm->params, factors, 0, 0);
        tm->g.rope_factors = tensor_at(tm, tm->grads, factors, 0, 0);
    }
    for (int il = 0; il < hp->n_layer; il++) {
        tm->rope[il] = m->layers[il].rope;
        tm->rope[il].freq_factors = tm->w.rope_factors; /* every layer, as toy_context_rope */
        tm->n_swa[il] = m->layers[il].n_swa;
    }
    *out = tm;
    return TOY_OK;
}

static void free_acts(train_model *tm) {
    free(tm->act_mem);
    free(tm->acts);
    tm->act_mem = NULL;
    tm->acts = NULL;
    tm->B = tm->T = 0;
}

void train_model_free(train_model *tm) {
    if (!tm) return;
    free_acts(tm);
    free(tm->tensors);
    free(tm->rope);
    free(tm->n_swa);
    free(tm->w.layers);
    free(tm->g.layers);
    free(tm->params);
    free(tm->grads);
    toy_gemm_free(tm->gemm);
    free(tm);
}

/* ---------------------------------------------------------------- activations */

/* Carves named arrays out of one allocation: a first pass only counts. */
typedef struct {
    float *base;
    int64_t used;
} carver;

static float *carve(carver *c, int64_t n) {
    float *p = c->base ? c->base + c->used : NULL;
    c->used += (n + 15) / 16 * 16;
    return p;
}

static void layout_acts(train_model *tm, carver *c, int B, int T) {
    const toy_hparams *hp = &tm->hp;
    const int64_t n = (int64_t)B * T, C = hp->n_embd, F = hp->n_ff;
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_acts *a = tm->acts ? &tm->acts[il] : &(layer_acts){0};
        a->x = carve(c, n * C);
        if (hp->qk_norm != TOY_QK_NORM_NONE) {
            a->q_raw = carve(c, n * qd);
            a->k_raw = carve(c, n * kvd);
        }
        a->q = carve(c, n * qd);
        a->k = carve(c, n * kvd);
        a->v = carve(c, n * kvd);
        a->att = carve(c, n * qd);
        a->lse = carve(c, n * hp->n_head);
        if (hp->post_norms) {
            a->o_raw = carve(c, n * C);
            a->f_raw = carve(c, n * C);
        }
        a->x_mid = carve(c, n * C);
        a->gate = carve(c, n * F);
        a->up = carve(c, n * F);
    }
    tm->x_final = carve(c, n * C);
    const int64_t wide = C > qd ? C : qd;
    tm->h = carve(c, n * C);
    tm->rstd = carve(c, n * (hp->n_head > 1 ? hp->n_head : 1));
    tm->act = carve(c, n * F);
    tm->dact = carve(c, n * F);
    tm->dgate = carve(c, n * F);
    tm->dup = carve(c, n * F);
    tm->dh = carve(c, n * C);
    tm->dbranch = carve(c, n * C);
    tm->draw = carve(c, n * wide);
    tm->datt = carve(c, n * qd);
    tm->dq = carve(c, n * qd);
    tm->dk = carve(c, n * kvd);
    tm->dv = carve(c, n * kvd);
    tm->dq_raw = carve(c, n * qd);
    tm->dk_raw = carve(c, n * kvd);
    const attention_shape as = {B, T, hp->n_head, hp->n_head_kv, hp->head_dim, 1, 0, 0};
    tm->att_scratch = carve(c, attention_scratch_floats(&as, tm->pool ? toy_pool_size(tm->pool) : 1));
    tm->cs = carve(c, (int64_t)T * hp->n_rot);
    tm->theta = carve(c, (int64_t)T * hp->n_rot / 2 + 1);
    /* logits of about 16M floats at a time, at least one row */
    tm->head_rows = (16 << 20) / hp->n_vocab;
    if (tm->head_rows < 1) tm->head_rows = 1;
    if (tm->head_rows > n) tm->head_rows = n;
    tm->logits = carve(c, tm->head_rows * hp->n_vocab);
    tm->row_loss = carve(c, n);
    tm->row_lse = carve(c, n);
}

toy_status train_model_reserve(train_model *tm, int B, int T) {
    if (B < 1 || T < 1) return toy_error(TOY_ERR_INVALID, "batch of %d x %d tokens", B, T);
    if (T > tm->seq_len)
        return toy_error(TOY_ERR_INVALID, "sequences of %d tokens, the model was set up for %d", T,
                         tm->seq_len);
    if (B == tm->B && T == tm->T) return TOY_OK;
    free_acts(tm);
    carver c = {0};
    layout_acts(tm, &c, B, T);
    tm->acts = calloc((size_t)tm->hp.n_layer, sizeof *tm->acts);
    tm->act_mem = aligned_alloc(64, (size_t)c.used * sizeof(float) + 64);
    if (!tm->acts || !tm->act_mem) {
        free_acts(tm);
        return toy_error(TOY_ERR_NOMEM, "cannot allocate %.1f MB of activations for %d x %d tokens",
                         (double)c.used * 4 / 1e6, B, T);
    }
    c = (carver){tm->act_mem, 0};
    layout_acts(tm, &c, B, T);
    tm->B = B;
    tm->T = T;
    return TOY_OK;
}

/* ---------------------------------------------------------------- forward */

static void zero(float *x, int64_t n) { memset(x, 0, (size_t)n * sizeof *x); }

static attention_shape layer_attention(const train_model *tm, int il, int B, int T) {
    const toy_hparams *hp = &tm->hp;
    return (attention_shape){B, T, hp->n_head, hp->n_head_kv, hp->head_dim,
                             hp->q_prescale ? 1.0f : hp->attn_scale, hp->attn_softcap, tm->n_swa[il]};
}

static void rope_tables(train_model *tm, int il, int T) {
    for (int t = 0; t < T; t++) toy_rope_cos_sin(&tm->rope[il], t, tm->cs + (int64_t)t * tm->hp.n_rot);
}

static void glu_forward(train_model *tm, float *out, const float *gate, const float *up, int64_t n) {
    if (tm->hp.ffn_act == TOY_ACT_GELU_TANH) geglu_forward(tm->pool, out, gate, up, n);
    else swiglu_forward(tm->pool, out, gate, up, n);
}

static void layer_forward(train_model *tm, int il, int B, int T) {
    const toy_hparams *hp = &tm->hp;
    const train_layer_weights *w = &tm->w.layers[il];
    layer_acts *a = &tm->acts[il];
    toy_pool *pool = tm->pool;
    toy_gemm *g = tm->gemm;
    const int64_t n = (int64_t)B * T, C = hp->n_embd, F = hp->n_ff, hd = hp->head_dim;
    const int64_t qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;
    float *x_next = il + 1 < hp->n_layer ? tm->acts[il + 1].x : tm->x_final;

    /* attention */
    rmsnorm_forward(pool, tm->h, NULL, a->x, w->attn_norm, n, C, hp->rms_eps);
    float *q = hp->qk_norm != TOY_QK_NORM_NONE ? a->q_raw : a->q;
    float *k = hp->qk_norm != TOY_QK_NORM_NONE ? a->k_raw : a->k;
    matmul_forward(g, q, tm->h, w->wq, w->bq, n, C, qd);
    matmul_forward(g, k, tm->h, w->wk, w->bk, n, C, kvd);
    matmul_forward(g, a->v, tm->h, w->wv, w->bv, n, C, kvd);
    if (hp->qk_norm == TOY_QK_NORM_HEAD) {
        rmsnorm_forward(pool, a->q, NULL, a->q_raw, w->q_norm, n * hp->n_head, hd, hp->rms_eps);
        rmsnorm_forward(pool, a->k, NULL, a->k_raw, w->k_norm, n * hp->n_head_kv, hd, hp->rms_eps);
    } else if (hp->qk_norm == TOY_QK_NORM_FULL) {
        rmsnorm_forward(pool, a->q, NULL, a->q_raw, w->q_norm, n, qd, hp->rms_eps);
        rmsnorm_forward(pool, a->k, NULL, a->k_raw, w->k_norm, n, kvd, hp->rms_eps);
    }
    rope_tables(tm, il, T);
    rope_forward(pool, a->q, n, T, hp->n_head, hd, &tm->rope[il], tm->cs);
    rope_forward(pool, a->k, n, T, hp->n_head_kv, hd, &tm->rope[il], tm->cs);
    if (hp->q_prescale) scale_inplace(pool, a->q, hp->attn_scale, n * qd);
    const attention_shape as = layer_attention(tm, il, B, T);
    attention_forward(g, a->att, a->lse, a->q, a->k, a->v, &as, tm->att_scratch);
    float *o = hp->post_norms ? a->o_raw : tm->dbranch; /* dbranch is free in the forward */
    matmul_forward(g, o, a->att, w->wo, NULL, n, qd, C);
    if (hp->post_norms) {
        rmsnorm_forward(pool, tm->dbranch, NULL, a->o_raw, w->post_attn_norm, n, C, hp->rms_eps);
        o = tm->dbranch;
    }
    add_scaled(pool, a->x_mid, a->x, o, hp->residual_scale, n * C);

    /* feed-forward */
    rmsnorm_forward(pool, tm->h, NULL, a->x_mid, w->ffn_norm, n, C, hp->rms_eps);
    matmul_forward(g, a->gate, tm->h, w->ffn_gate, NULL, n, C, F);
    matmul_forward(g, a->up, tm->h, w->ffn_up, NULL, n, C, F);
    glu_forward(tm, tm->act, a->gate, a->up, n * F);
    float *f = hp->post_norms ? a->f_raw : tm->dbranch;
    matmul_forward(g, f, tm->act, w->ffn_down, NULL, n, F, C);
    if (hp->post_norms) {
        rmsnorm_forward(pool, tm->dbranch, NULL, a->f_raw, w->post_ffn_norm, n, C, hp->rms_eps);
        f = tm->dbranch;
    }
    add_scaled(pool, x_next, a->x_mid, f, hp->residual_scale, n * C);
}

/* Output projection and loss over chunks of rows; with backward, each chunk's gradient
 * right away: dres (zeroed first) gets d(final norm input). */
static double head_forward_backward(train_model *tm, const train_batch *b, bool backward) {
    const toy_hparams *hp = &tm->hp;
    const int64_t n = (int64_t)b->B * b->T, C = hp->n_embd, V = hp->n_vocab;
    toy_pool *pool = tm->pool;
    rmsnorm_forward(pool, tm->h, tm->rstd, tm->x_final, tm->w.output_norm, n, C, hp->rms_eps);
    if (backward) zero(tm->dh, n * C);
    const float s = 1.0f / hp->logit_scale;
    double total = 0;
    for (int64_t r0 = 0; r0 < n; r0 += tm->head_rows) {
        const int64_t m = n - r0 < tm->head_rows ? n - r0 : tm->head_rows;
        matmul_forward(tm->gemm, tm->logits, tm->h + r0 * C, tm->w.output, NULL, m, C, V);
        lm_loss_forward(pool, tm->logits, tm->row_loss + r0, tm->row_lse + r0, b->targets + r0, m, V,
                        s, hp->final_softcap);
        for (int64_t i = r0; i < r0 + m; i++)
            if (b->targets[i] >= 0) total += (double)b->weights[i] * tm->row_loss[i];
        if (!backward) continue;
        lm_loss_backward(pool, tm->logits, tm->logits, tm->row_lse + r0, b->targets + r0, b->weights + r0,
                         m, V, s, hp->final_softcap);
        matmul_backward(tm->gemm, tm->dh + r0 * C, tm->g.output, NULL, tm->logits, tm->h + r0 * C,
                        tm->w.output, m, C, V);
    }
    if (backward) {
        zero(tm->dbranch, n * C); /* becomes d(x_final), the start of the residual gradient */
        rmsnorm_backward(pool, tm->dbranch, tm->g.output_norm, tm->dh, tm->x_final, tm->w.output_norm,
                         tm->rstd, n, C);
    }
    return total;
}

/* ---------------------------------------------------------------- backward */

static void glu_backward(train_model *tm, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, int64_t n) {
    if (tm->hp.ffn_act == TOY_ACT_GELU_TANH) geglu_backward(tm->pool, dgate, dup, dout, gate, up, n);
    else swiglu_backward(tm->pool, dgate, dup, dout, gate, up, n);
}

/* d(branch output) = residual_scale * dres into dbranch, through the branch's post-norm
 * (of `raw` with weight w, gradient gw) when there is one: returns the gradient of the
 * raw branch output. */
static const float *branch_grad(train_model *tm, const float *dres, const float *raw, const float *w,
                                float *gw, int64_t n) {
    const toy_hparams *hp = &tm->hp;
    const int64_t C = hp->n_embd;
    for (int64_t i = 0; i < n * C; i++) tm->dbranch[i] = hp->residual_scale * dres[i];
    if (!hp->post_norms) return tm->dbranch;
    rmsnorm_forward(tm->pool, tm->h, tm->rstd, raw, w, n, C, hp->rms_eps); /* for rstd */
    zero(tm->draw, n * C);
    rmsnorm_backward(tm->pool, tm->draw, gw, tm->dbranch, raw, w, tm->rstd, n, C);
    return tm->draw;
}

/* dres holds d(layer output) on entry, d(layer input) on return */
static void layer_backward(train_model *tm, int il, int B, int T, float *dres) {
    const toy_hparams *hp = &tm->hp;
    const train_layer_weights *w = &tm->w.layers[il];
    train_layer_weights *gw = &tm->g.layers[il];
    layer_acts *a = &tm->acts[il];
    toy_pool *pool = tm->pool;
    toy_gemm *g = tm->gemm;
    const int64_t n = (int64_t)B * T, C = hp->n_embd, F = hp->n_ff, hd = hp->head_dim;
    const int64_t qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;

    /* feed-forward: x_next = x_mid + rs * post_norm(act(h W_gate^T) * (h W_up^T) W_down^T) */
    const float *df = branch_grad(tm, dres, a->f_raw, w->post_ffn_norm, gw->post_ffn_norm, n);
    glu_forward(tm, tm->act, a->gate, a->up, n * F);
    zero(tm->dact, n * F);
    matmul_backward(g, tm->dact, gw->ffn_down, NULL, df, tm->act, w->ffn_down, n, F, C);
    zero(tm->dgate, n * F);
    zero(tm->dup, n * F);
    glu_backward(tm, tm->dgate, tm->dup, tm->dact, a->gate, a->up, n * F);
    rmsnorm_forward(pool, tm->h, tm->rstd, a->x_mid, w->ffn_norm, n, C, hp->rms_eps);
    zero(tm->dh, n * C);
    matmul_backward(g, tm->dh, gw->ffn_gate, NULL, tm->dgate, tm->h, w->ffn_gate, n, C, F);
    matmul_backward(g, tm->dh, gw->ffn_up, NULL, tm->dup, tm->h, w->ffn_up, n, C, F);
    rmsnorm_backward(pool, dres, gw->ffn_norm, tm->dh, a->x_mid, w->ffn_norm, tm->rstd, n, C);

    /* attention: x_mid = x + rs * post_norm(attention(q, k, v) W_o^T) */
    const float *dox = branch_grad(tm, dres, a->o_raw, w->post_attn_norm, gw->post_attn_norm, n);
    zero(tm->datt, n * qd);
    matmul_backward(g, tm->datt, gw->wo, NULL, dox, a->att, w->wo, n, qd, C);
    zero(tm->dq, n * qd);
    zero(tm->dk, n * kvd);
    zero(tm->dv, n * kvd);
    const attention_shape as = layer_attention(tm, il, B, T);
    attention_backward(g, tm->dq, tm->dk, tm->dv, tm->datt, a->att, a->lse, a->q, a->k, a->v, &as,
                       tm->att_scratch);
    if (hp->q_prescale) scale_inplace(pool, tm->dq, hp->attn_scale, n * qd);
    if (tm->rope[il].freq_factors && tm->g.rope_factors) {
        /* the rotated q is a->q before its prescale (a->q is not read again) */
        for (int t = 0; t < T; t++) toy_rope_angles(&tm->rope[il], t, tm->theta + (int64_t)t * hp->n_rot / 2);
        if (hp->q_prescale) scale_inplace(pool, a->q, 1.0f / hp->attn_scale, n * qd);
        rope_freq_backward(tm->g.rope_factors, a->q, tm->dq, n, T, hp->n_head, (int)hd, &tm->rope[il], tm->theta);
        rope_freq_backward(tm->g.rope_factors, a->k, tm->dk, n, T, hp->n_head_kv, (int)hd, &tm->rope[il], tm->theta);
    }
    rope_tables(tm, il, T);
    rope_backward(pool, tm->dq, n, T, hp->n_head, (int)hd, &tm->rope[il], tm->cs);
    rope_backward(pool, tm->dk, n, T, hp->n_head_kv, (int)hd, &tm->rope[il], tm->cs);
    float *dq = tm->dq, *dk = tm->dk;
    if (hp->qk_norm != TOY_QK_NORM_NONE) {
        const bool head = hp->qk_norm == TOY_QK_NORM_HEAD;
        const int64_t qrows = head ? n * hp->n_head : n, krows = head ? n * hp->n_head_kv : n;
        const int64_t qw = head ? hd : qd, kw = head ? hd : kvd;
        zero(tm->dq_raw, n * qd);
        zero(tm->dk_raw, n * kvd);
        rmsnorm_forward(pool, tm->datt, tm->rstd, a->q_raw, w->q_norm, qrows, qw, hp->rms_eps);
        rmsnorm_backward(pool, tm->dq_raw, gw->q_norm, tm->dq, a->q_raw, w->q_norm, tm->rstd, qrows, qw);
        rmsnorm_forward(pool, tm->datt, tm->rstd, a->k_raw, w->k_norm, krows, kw, hp->rms_eps);
        rmsnorm_backward(pool, tm->dk_raw, gw->k_norm, tm->dk, a->k_raw, w->k_norm, tm->rstd, krows, kw);
        dq = tm->dq_raw;
        dk = tm->dk_raw;
    }
    rmsnorm_forward(pool, tm->h, tm->rstd, a->x, w->attn_norm, n, C, hp->rms_eps);
    zero(tm->dh, n * C);
    matmul_backward(g, tm->dh, gw->wq, gw->bq, dq, tm->h, w->wq, n, C, qd);
    matmul_backward(g, tm->dh, gw->wk, gw->bk, dk, tm->h, w->wk, n, C, kvd);
    matmul_backward(g, tm->dh, gw->wv, gw->bv, tm->dv, tm->h, w->wv, n, C, kvd);
    rmsnorm_backward(pool, dres, gw->attn_norm, tm->dh, a->x, w->attn_norm, tm->rstd, n, C);
}

double train_model_step(train_model *tm, const train_batch *b, bool backward) {
    const toy_hparams *hp = &tm->hp;
    const int64_t n = (int64_t)b->B * b->T, C = hp->n_embd;
    embedding_forward(tm->acts[0].x, b->tokens, tm->w.token_embd, n, C, hp->embd_scale);
    for (int il = 0; il < hp->n_layer; il++) layer_forward(tm, il, b->B, b->T);
    const double loss = head_forward_backward(tm, b, backward);
    if (!backward) return loss;
    /* The gradient of the residual stream, layer by layer, lives where x_final was (the
     * layers use dbranch as scratch). */
    float *dres = tm->x_final;
    memcpy(dres, tm->dbranch, (size_t)(n * C) * sizeof *dres);
    for (int il = hp->n_layer - 1; il >= 0; il--) layer_backward(tm, il, b->B, b->T, dres);
    embedding_backward(tm->g.token_embd, dres, b->tokens, n, C, hp->embd_scale);
    return loss;
}

/* ---------------------------------------------------------------- accessors */

int64_t train_model_n_params(const train_model *tm) { return tm->n_trainable; }
int64_t train_model_n_floats(const train_model *tm) { return tm->n_floats; }
float *train_model_params(train_model *tm) { return tm->params; }
float *train_model_grads(train_model *tm) { return tm->grads; }
void train_model_zero_grads(train_model *tm) { zero(tm->grads, tm->n_floats); }
int train_model_n_tensors(const train_model *tm) { return tm->n_tensors; }
const train_tensor *train_model_tensor(const train_model *tm, int i) { return &tm->tensors[i]; }
const toy_hparams *train_model_hparams(const train_model *tm) { return &tm->hp; }
toy_gemm *train_model_gemm(train_model *tm) { return tm->gemm; }
