/* forward.c — how a batch of tokens becomes logits.
 *
 * One function, toy_decode, top to bottom: embed → for each layer (norm, attention,
 * FFN) → final norm → output projection. The batch may be a prompt, one token of each
 * of several sequences, or any mix: every token carries its sequence id and position,
 * matmuls run over the whole batch, and attention reads each token's own sequence from
 * the KV cache. Architecture differences are switches in the hyperparameters.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "error.h"
#include "lora.h"
#include "pipeline.h"

static void trace(const toy_context *ctx, const char *name, int layer, const float *x,
                  int64_t n_tok, int64_t n) {
    if (!ctx->params.trace) return;
    char full[64];
    if (layer >= 0) snprintf(full, sizeof full, "L%d.%s", layer, name);
    else snprintf(full, sizeof full, "%s", name);
    ctx->params.trace(ctx->params.trace_user, full, x, n_tok, n);
}

/* An F32 matrix of the adapters as the backend multiplies it. */
static ty_weight f32_weight(const float *data, int64_t n_rows, int64_t n_cols) {
    return (ty_weight){.type = TOY_TYPE_F32, .n_cols = n_cols, .n_rows = n_rows,
                        .row_size = (size_t)n_cols * sizeof(float), .data = (const uint8_t *)data, .n_parts = 1};
}

/* The adapters' share of product slot `slot` (context.h), after the base product:
 * out[n x rows] += scale * (in A^T) B^T, one adapter after the other, as llama.cpp adds
 * them. */
static void apply_lora(toy_context *ctx, int slot, const float *in, int64_t n, float *out) {
    if (!ctx->lora_first) return;
    ty_backend *be = ctx->be;
    for (int32_t i = ctx->lora_first[slot]; i < ctx->lora_first[slot + 1]; i++) {
        const ty_lora_use *u = &ctx->lora_uses[i];
        const ty_weight a = f32_weight(u->a, u->rank, u->n_in), b = f32_weight(u->b, u->n_rows, u->rank);
        be->matmul(be, &a, in, n, ctx->lora_t);
        be->matmul(be, &b, ctx->lora_t, n, ctx->lora_u);
        be->scale(be, ctx->lora_u, u->scale, n * u->n_rows);
        be->add(be, out, ctx->lora_u, n * u->n_rows);
    }
}

/* The embedding's adapters: row t gains scale * B a_t, a_t the token's row of A. */
static void apply_lora_embd(toy_context *ctx, const int32_t *tok, int64_t n, float *x) {
    if (!ctx->lora_first) return;
    ty_backend *be = ctx->be;
    const int slot = ctx->model->hp.n_layer * MAT_KINDS + 1;
    for (int32_t i = ctx->lora_first[slot]; i < ctx->lora_first[slot + 1]; i++) {
        const ty_lora_use *u = &ctx->lora_uses[i];
        const ty_weight a = f32_weight(u->a, u->n_in, u->rank), b = f32_weight(u->b, u->n_rows, u->rank);
        be->get_rows(be, &a, tok, n, ctx->lora_t);
        be->matmul(be, &b, ctx->lora_t, n, ctx->lora_u);
        be->scale(be, ctx->lora_u, u->scale, n * u->n_rows);
        be->add(be, x, ctx->lora_u, n * u->n_rows);
    }
}

static toy_status check_batch(const toy_context *ctx, const toy_batch *b) {
    const ty_hparams *hp = &ctx->model->hp;
    if (!b || b->n_tokens <= 0) return ty_error(TOY_ERR_INVALID, "empty batch");
    if (!b->token || !b->pos || !b->seq_id)
        return ty_error(TOY_ERR_INVALID, "batch without %s", !b->token ? "token ids"
                                                             : !b->pos ? "positions"
                                                                       : "sequence ids");
    if (b->n_tokens > ctx->params.n_batch)
        return ty_error(TOY_ERR_INVALID, "batch of %d tokens exceeds n_batch %d", b->n_tokens,
                        ctx->params.n_batch);
    int32_t n_out = 0;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->token[i] < 0 || b->token[i] >= hp->n_vocab)
            return ty_error(TOY_ERR_INVALID, "batch token %d: id %d out of range (0..%d)", i,
                            b->token[i], hp->n_vocab - 1);
        if (b->seq_id[i] < 0 || b->seq_id[i] >= ctx->params.n_seq_max)
            return ty_error(TOY_ERR_INVALID, "batch token %d: sequence id %d out of range (0..%d)",
                            i, b->seq_id[i], ctx->params.n_seq_max - 1);
        if (b->pos[i] < 0)
            return ty_error(TOY_ERR_INVALID, "batch token %d: negative position %d", i, b->pos[i]);
        if (hp->pos_embd && b->pos[i] >= hp->n_ctx_train)
            return ty_error(TOY_ERR_INVALID, "batch token %d: position %d is past the model's %d learned positions",
                            i, b->pos[i], hp->n_ctx_train);
        n_out += b->logits ? b->logits[i] != 0 : i == b->n_tokens - 1;
    }
    if (n_out > ctx->params.n_outputs)
        return ty_error(TOY_ERR_INVALID, "batch asks for logits of %d tokens, the context holds %d",
                        n_out, ctx->params.n_outputs);
    return TOY_OK;
}

/* Mixture of experts: softmax router, top-k experts per token, each expert a SwiGLU
 * FFN; the outputs, scaled by their router weights, are summed in rank order. */
static void moe_ffn(toy_context *ctx, const ty_layer *l, int il, int64_t n_tok) {
    const ty_hparams *hp = &ctx->model->hp;
    ty_backend *be = ctx->be;
    const int32_t n_exp = hp->n_expert, k = hp->n_expert_used, n_embd = hp->n_embd;

    be->matmul(be, &l->ffn_gate_inp, ctx->h, n_tok, ctx->router);
    trace(ctx, "moe_router", il, ctx->router, n_tok, n_exp);
    for (int64_t t = 0; t < n_tok; t++) {
        float *p = ctx->router + t * n_exp;
        float max = -INFINITY;
        for (int32_t e = 0; e < n_exp; e++) max = p[e] > max ? p[e] : max;
        double sum = 0;
        for (int32_t e = 0; e < n_exp; e++) sum += (double)(p[e] = expf(p[e] - max));
        for (int32_t e = 0; e < n_exp; e++) p[e] *= (float)(1.0 / sum);
        /* top-k by probability; the lower expert id wins a tie */
        int32_t *ids = ctx->expert_id + t * k;
        float *w = ctx->expert_w + t * k;
        for (int32_t s = 0; s < k; s++) {
            int32_t best = -1;
            for (int32_t e = 0; e < n_exp; e++) {
                bool taken = false;
                for (int32_t r = 0; r < s; r++) taken |= ids[r] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            ids[s] = best;
            w[s] = p[best];
        }
        if (hp->expert_weights_norm) {
            float sw = 0;
            for (int32_t s = 0; s < k; s++) sw += w[s];
            if (sw < 6.103515625e-5f) sw = 6.103515625e-5f; /* llama.cpp's clamp */
            for (int32_t s = 0; s < k; s++) w[s] /= sw;
        }
    }
    /* each expert runs once over the tokens routed to it */
    for (int32_t e = 0; e < n_exp; e++) {
        int64_t n = 0;
        for (int64_t t = 0; t < n_tok; t++)
            for (int32_t s = 0; s < k; s++)
                if (ctx->expert_id[t * k + s] == e) {
                    memcpy(ctx->moe_in + n * n_embd, ctx->h + t * n_embd, n_embd * sizeof(float));
                    ctx->moe_rows[n++] = (int32_t)(t * k + s);
                }
        if (!n) continue;
        ty_weight gate = ty_weight_expert(&l->ffn_gate_exps, e);
        ty_weight up = ty_weight_expert(&l->ffn_up_exps, e);
        ty_weight down = ty_weight_expert(&l->ffn_down_exps, e);
        const ty_weight *gate_up[2] = {&gate, &up};
        float *gate_up_out[2] = {ctx->gate, ctx->up};
        be->matmul_multi(be, 2, gate_up, ctx->moe_in, n, gate_up_out);
        be->swiglu(be, ctx->gate, ctx->gate, ctx->up, n * hp->n_ff_exp);
        be->matmul(be, &down, ctx->gate, n, ctx->moe_in);
        for (int64_t i = 0; i < n; i++) {
            int32_t slot = ctx->moe_rows[i];
            float *dst = ctx->expert_out + (int64_t)slot * n_embd;
            const float *src = ctx->moe_in + i * n_embd;
            for (int32_t d = 0; d < n_embd; d++) dst[d] = src[d] * ctx->expert_w[slot];
        }
    }
    /* each token's k experts' outputs, in rank order, scaled by their weights */
    trace(ctx, "moe_experts", il, ctx->expert_out, n_tok, (int64_t)k * n_embd);
    for (int64_t t = 0; t < n_tok; t++) {
        float *o = ctx->o + t * n_embd;
        const float *src = ctx->expert_out + t * k * n_embd;
        memcpy(o, src, n_embd * sizeof(float));
        for (int32_t s = 1; s < k; s++) be->add(be, o, src + (int64_t)s * n_embd, n_embd);
    }
    if (hp->n_ff_shexp) { /* qwen2moe: a shared expert, gated by sigmoid(w . x) */
        float *gate = ctx->router; /* the routing probabilities are no longer needed */
        be->matmul(be, &l->ffn_gate_inp_shexp, ctx->h, n_tok, gate);
        be->sigmoid(be, gate, n_tok);
        const ty_weight *gate_up[2] = {&l->ffn_gate_shexp, &l->ffn_up_shexp};
        float *gate_up_out[2] = {ctx->gate, ctx->up};
        be->matmul_multi(be, 2, gate_up, ctx->h, n_tok, gate_up_out);
        be->swiglu(be, ctx->gate, ctx->gate, ctx->up, n_tok * hp->n_ff_shexp);
        be->matmul(be, &l->ffn_down_shexp, ctx->gate, n_tok, ctx->moe_in);
        for (int64_t t = 0; t < n_tok; t++) {
            be->scale(be, ctx->moe_in + t * n_embd, gate[t], n_embd);
            be->add(be, ctx->o + t * n_embd, ctx->moe_in + t * n_embd, n_embd);
        }
    }
}

/* Attention the plain way (toy_attn): the scores of every token against the n_kv cells of
 * the longest of the batch's sequences, traced; their softmax, traced; its product with V. */
static toy_status plain_attention(toy_context *ctx, const toy_batch *b, int il, const ty_kv_view *kv,
                                  const ty_attn_params *attn) {
    ty_backend *be = ctx->be;
    const int64_t n = b->n_tokens;
    int32_t n_kv = 0;
    for (int64_t t = 0; t < n; t++)
        if (kv->n_used[b->seq_id[t]] > n_kv) n_kv = kv->n_used[b->seq_id[t]];
    const int64_t row = (int64_t)attn->n_head * n_kv;
    if (row > 0 && n > (int64_t)(SIZE_MAX / sizeof(float)) / row)
        return ty_error(TOY_ERR_NOMEM, "plain attention: %lld tokens x %lld scores", (long long)n, (long long)row);
    const size_t need = (size_t)n * (size_t)row;
    if (need > ctx->kq_cap) {
        float *kq = realloc(ctx->kq, need * sizeof *kq);
        if (!kq)
            return ty_error(TOY_ERR_NOMEM, "plain attention: no memory for %zu scores (%lld tokens x %d heads x %d cells)",
                            need, (long long)n, attn->n_head, n_kv);
        ctx->kq = kq;
        ctx->kq_cap = need;
    }
    be->attn_scores(be, ctx->kq, ctx->q, n, b->pos, b->seq_id, kv, attn, n_kv);
    trace(ctx, "kq", il, ctx->kq, n, row);
    be->softmax_rows(be, ctx->kq, n * attn->n_head, n_kv);
    trace(ctx, "kq_soft", il, ctx->kq, n, row);
    be->attn_mix(be, ctx->attn, ctx->kq, n, b->seq_id, kv, attn, n_kv);
    return TOY_OK;
}

/* The norm of a model, RMSNorm or LayerNorm, with weight w (and bias b) */
static void norm(toy_context *ctx, float *y, const float *x, const ty_vector *w, const ty_vector *b, int64_t n_tok) {
    const ty_hparams *hp = &ctx->model->hp;
    if (hp->layer_norm) ctx->be->layer_norm(ctx->be, y, x, w->data, b->data, n_tok, hp->n_embd, hp->rms_eps);
    else ctx->be->rms_norm(ctx->be, y, x, w->data, n_tok, hp->n_embd, hp->rms_eps);
}

/* y = act(gate) * up, the model's gated activation; when tracing, act(gate) alone first (its
 * product with ones: the same bits) as the ffn_act tap */
static void glu(toy_context *ctx, int il, float *y, const float *gate, const float *up, int64_t n_tok, int64_t n_ff) {
    ty_backend *be = ctx->be;
    void (*f)(ty_backend *, float *, const float *, const float *, int64_t) =
        ctx->model->hp.ffn_act == TY_ACT_GELU_TANH ? be->geglu : be->swiglu;
    if (ctx->trace_act) {
        f(be, ctx->trace_act, gate, ctx->trace_ones, n_tok * n_ff);
        trace(ctx, "ffn_act", il, ctx->trace_act, n_tok, n_ff);
    }
    f(be, y, gate, up, n_tok * n_ff);
}

static void dense_ffn(toy_context *ctx, const ty_layer *l, int il, int64_t n_tok) {
    const ty_hparams *hp = &ctx->model->hp;
    ty_backend *be = ctx->be;
    if (hp->ffn_no_gate) { /* down(gelu(up h + b_up)) + b_down */
        be->matmul(be, &l->ffn_up, ctx->h, n_tok, ctx->up);
        apply_lora(ctx, il * MAT_KINDS + MAT_UP, ctx->h, n_tok, ctx->up);
        be->add_bias(be, ctx->up, l->b_up.data, n_tok, hp->n_ff);
        trace(ctx, "ffn_up", il, ctx->up, n_tok, hp->n_ff);
        be->gelu(be, ctx->gate, ctx->up, n_tok * hp->n_ff);
        trace(ctx, "ffn_act", il, ctx->gate, n_tok, hp->n_ff);
        be->matmul(be, &l->ffn_down, ctx->gate, n_tok, ctx->o);
        apply_lora(ctx, il * MAT_KINDS + MAT_DOWN, ctx->gate, n_tok, ctx->o);
        be->add_bias(be, ctx->o, l->b_down.data, n_tok, hp->n_embd);
        trace(ctx, "ffn_down", il, ctx->o, n_tok, hp->n_embd);
        return;
    }
    const ty_weight *gate_up[2] = {&l->ffn_gate, &l->ffn_up};
    float *gate_up_out[2] = {ctx->gate, ctx->up};
    be->matmul_multi(be, 2, gate_up, ctx->h, n_tok, gate_up_out);
    apply_lora(ctx, il * MAT_KINDS + MAT_GATE, ctx->h, n_tok, ctx->gate);
    apply_lora(ctx, il * MAT_KINDS + MAT_UP, ctx->h, n_tok, ctx->up);
    trace(ctx, "ffn_gate", il, ctx->gate, n_tok, hp->n_ff);
    trace(ctx, "ffn_up", il, ctx->up, n_tok, hp->n_ff);
    glu(ctx, il, ctx->gate, ctx->gate, ctx->up, n_tok, hp->n_ff);
    trace(ctx, "ffn_gated", il, ctx->gate, n_tok, hp->n_ff);
    be->matmul(be, &l->ffn_down, ctx->gate, n_tok, ctx->o);
    apply_lora(ctx, il * MAT_KINDS + MAT_DOWN, ctx->gate, n_tok, ctx->o);
    trace(ctx, "ffn_down", il, ctx->o, n_tok, hp->n_embd);
}

/* The logits of the n_out rows gathered at the front of x (or of the normed rows in h,
 * with embeddings on), into logits. */
static void compute_logits(toy_context *ctx, int32_t n_out, float *logits) {
    const toy_model *m = ctx->model;
    const ty_hparams *hp = &m->hp;
    ty_backend *be = ctx->be;
    if (!ctx->embd) norm(ctx, ctx->h, ctx->x, &m->output_norm, &m->output_norm_b, n_out);
    trace(ctx, "final_norm", -1, ctx->h, n_out, hp->n_embd);
    const int64_t n_logits = (int64_t)n_out * hp->n_vocab;
    be->matmul(be, &m->output, ctx->h, n_out, logits);
    apply_lora(ctx, hp->n_layer * MAT_KINDS, ctx->h, n_out, logits);
    if (hp->logit_scale != 1.0f) be->scale(be, logits, 1.0f / hp->logit_scale, n_logits);
    if (hp->final_softcap > 0.0f) be->softcap(be, logits, hp->final_softcap, n_logits);
    trace(ctx, "logits", -1, logits, n_out, hp->n_vocab);
}

/* Rows t0 .. t1 - 1 of a batch placed in the KV cache through this process's layers:
 * the embedding (or the stage before's activations), the layers, then the activations
 * to the stage after, or the outputs: logits from row out0 of ctx->logits, embeddings
 * from row t0 of ctx->embd. */
static toy_status stage_rows(toy_context *ctx, const toy_batch *batch, int64_t t0, int64_t t1, int32_t out0) {
    toy_status st;
    const toy_model *m = ctx->model;
    const ty_hparams *hp = &m->hp;
    ty_backend *be = ctx->be;
    const toy_batch sub = {(int32_t)(t1 - t0), batch->token + t0, batch->pos + t0, batch->seq_id + t0, NULL};
    const toy_batch *b = &sub;
    const int32_t *cells = ctx->cells + t0;
    const int64_t n = t1 - t0, n_embd = hp->n_embd;
    const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;

    if (m->stage > 0) {
        ty_pipeline_recv_floats(ctx->x, n * n_embd, m->stage - 1, PIPE_TAG_X);
    } else {
        be->get_rows(be, &m->token_embd, b->token, n, ctx->x);
        apply_lora_embd(ctx, b->token, n, ctx->x);
        if (hp->embd_scale != 1.0f) be->scale(be, ctx->x, hp->embd_scale, n * n_embd);
        if (hp->pos_embd) {
            be->get_rows(be, &m->pos_embd, b->pos, n, ctx->h);
            be->add(be, ctx->x, ctx->h, n * n_embd);
        }
        trace(ctx, "embed", -1, ctx->x, n, n_embd);
    }

    for (int il = m->layer_first; il < m->layer_end; il++) {
        const ty_layer *l = &m->layers[il];

        /* attention */
        norm(ctx, ctx->h, ctx->x, &l->attn_norm, &l->attn_norm_b, n);
        trace(ctx, "attn_norm", il, ctx->h, n, n_embd);
        const ty_weight *qkv[3] = {&l->wq, &l->wk, &l->wv};
        float *qkv_out[3] = {ctx->q, ctx->k, ctx->v};
        be->matmul_multi(be, 3, qkv, ctx->h, n, qkv_out);
        apply_lora(ctx, il * MAT_KINDS + MAT_Q, ctx->h, n, ctx->q);
        apply_lora(ctx, il * MAT_KINDS + MAT_K, ctx->h, n, ctx->k);
        apply_lora(ctx, il * MAT_KINDS + MAT_V, ctx->h, n, ctx->v);
        if (hp->qkv_bias) {
            be->add_bias(be, ctx->q, l->bq.data, n, q_dim);
            be->add_bias(be, ctx->k, l->bk.data, n, kv_dim);
            be->add_bias(be, ctx->v, l->bv.data, n, kv_dim);
        }
        if (hp->q_norm_len) {
            be->rms_norm(be, ctx->q, ctx->q, l->q_norm.data, n * q_dim / hp->q_norm_len, hp->q_norm_len, hp->rms_eps);
            be->rms_norm(be, ctx->k, ctx->k, l->k_norm.data, n * kv_dim / hp->k_norm_len, hp->k_norm_len,
                         hp->rms_eps);
        }
        trace(ctx, "q_pre", il, ctx->q, n, q_dim); /* before RoPE */
        trace(ctx, "k_pre", il, ctx->k, n, kv_dim);
        const ty_rope_params rope = ty_context_rope(ctx, il);
        if (hp->n_rot) {
            be->rope(be, ctx->q, n, hp->n_head, hp->head_dim, b->pos, &rope);
            be->rope(be, ctx->k, n, hp->n_head_kv, hp->head_dim, b->pos, &rope);
        }
        if (hp->q_scale != 1.0f) be->scale(be, ctx->q, hp->q_scale, n * q_dim);
        trace(ctx, "q", il, ctx->q, n, q_dim);
        trace(ctx, "k", il, ctx->k, n, kv_dim);
        trace(ctx, "v", il, ctx->v, n, kv_dim);
        for (int64_t t = 0; t < n; t++)
            ty_kv_cache_store(&ctx->kv, il, cells[t], ctx->k + t * kv_dim, ctx->v + t * kv_dim);
        int32_t n_swa = l->n_swa;
        if (!n_swa && ctx->params.honor_sliding_window) n_swa = hp->n_swa_ignored;
        const ty_attn_params attn = {hp->n_head, hp->n_head_kv, hp->head_dim, hp->kq_scale, hp->attn_softcap,
                                      n_swa};
        ty_kv_view kv = ty_kv_cache_view(&ctx->kv, il);
        if (ctx->params.attn == TOY_ATTN_PLAIN) {
            if ((st = plain_attention(ctx, b, il, &kv, &attn))) return st;
        } else {
            be->attention(be, ctx->attn, ctx->q, n, b->pos, b->seq_id, &kv, &attn);
        }
        trace(ctx, "attn", il, ctx->attn, n, q_dim); /* the heads' outputs, concatenated */
        be->matmul(be, &l->wo, ctx->attn, n, ctx->o);
        apply_lora(ctx, il * MAT_KINDS + MAT_O, ctx->attn, n, ctx->o);
        if (hp->mat_bias) be->add_bias(be, ctx->o, l->bo.data, n, n_embd);
        trace(ctx, "attn_proj", il, ctx->o, n, n_embd);
        if (hp->post_norms) {
            be->rms_norm(be, ctx->o, ctx->o, l->post_attn_norm.data, n, n_embd, hp->rms_eps);
            trace(ctx, "attn_post_norm", il, ctx->o, n, n_embd);
        }
        if (hp->residual_scale != 1.0f) be->scale(be, ctx->o, hp->residual_scale, n * n_embd);
        trace(ctx, "attn_out", il, ctx->o, n, n_embd);
        be->add(be, ctx->x, ctx->o, n * n_embd);

        /* feed-forward */
        norm(ctx, ctx->h, ctx->x, &l->ffn_norm, &l->ffn_norm_b, n);
        trace(ctx, "ffn_norm", il, ctx->h, n, n_embd);
        if (hp->n_expert) moe_ffn(ctx, l, il, n);
        else dense_ffn(ctx, l, il, n);
        if (hp->post_norms) {
            be->rms_norm(be, ctx->o, ctx->o, l->post_ffn_norm.data, n, n_embd, hp->rms_eps);
            trace(ctx, "ffn_post_norm", il, ctx->o, n, n_embd);
        }
        if (hp->residual_scale != 1.0f) be->scale(be, ctx->o, hp->residual_scale, n * n_embd);
        trace(ctx, "ffn_out", il, ctx->o, n, n_embd);
        be->add(be, ctx->x, ctx->o, n * n_embd);
        trace(ctx, "out", il, ctx->x, n, n_embd); /* the residual stream after the block */
    }

    const bool last = m->stage == m->n_stages - 1;
    if (!last) {
        ty_pipeline_send_floats(ctx->x, n * n_embd, m->stage + 1, PIPE_TAG_X);
        return TOY_OK;
    }
    /* only the rows whose logits were asked for go through the output projection; with
     * embeddings on, every row is normed first and kept (a row's norm is its own, so
     * the projected rows are the same bits either way) */
    float *embd = ctx->embd ? ctx->embd + t0 * n_embd : NULL;
    if (embd) norm(ctx, embd, ctx->x, &m->output_norm, &m->output_norm_b, n);
    int32_t n_out = 0;
    for (int64_t t = 0; t < n; t++) {
        if (ctx->logits_row[t0 + t] < 0) continue;
        if (embd) memcpy(ctx->h + n_out * n_embd, embd + t * n_embd, n_embd * sizeof(float));
        else memmove(ctx->x + n_out * n_embd, ctx->x + t * n_embd, n_embd * sizeof(float));
        n_out++;
    }
    float *logits = ctx->logits + (int64_t)out0 * hp->n_vocab;
    if (n_out) compute_logits(ctx, n_out, logits);
    if (m->stage > 0) { /* to rank 0, which takes them after the whole batch */
        if (n_out) ty_pipeline_post_floats(logits, (int64_t)n_out * hp->n_vocab, 0, PIPE_TAG_LOGITS);
        if (embd) ty_pipeline_post_floats(embd, n * n_embd, 0, PIPE_TAG_EMBD);
    }
    return TOY_OK;
}

/* Rows per micro-batch: the whole batch alone; in a pipeline about a quarter of the batch
 * per stage, 4 rows at least, so that stage s works on one while stage s + 1 works on the
 * one before. The same bits either way: a row's products and attention do not depend on
 * the rows beside it. A batch in which a sequence's positions do not rise runs whole:
 * its rows may attend to rows placed after them. */
static int64_t micro_batch_rows(const toy_context *ctx, const toy_batch *b) {
    const int64_t n = b->n_tokens;
    if (ctx->model->n_stages == 1 || ctx->params.attn == TOY_ATTN_PLAIN) return n;
    int32_t *last = malloc((size_t)ctx->params.n_seq_max * sizeof *last);
    if (!last) return n;
    for (int32_t s = 0; s < ctx->params.n_seq_max; s++) last[s] = INT32_MIN;
    bool rising = true;
    for (int64_t t = 0; t < n && rising; t++) {
        rising = b->pos[t] > last[b->seq_id[t]];
        last[b->seq_id[t]] = b->pos[t];
    }
    free(last);
    const int64_t rows = (n + 4 * ctx->model->n_stages - 1) / (4 * ctx->model->n_stages);
    return rising ? (rows < 4 ? 4 : rows) : n;
}

/* Whether a batch holds tokens of more than one sequence (decoding them side by side). */
static bool several_sequences(const toy_batch *b) {
    for (int32_t t = 1; t < b->n_tokens; t++)
        if (b->seq_id[t] != b->seq_id[0]) return true;
    return false;
}

/* A checked batch through this process's layers: all of them alone; in a pipeline its
 * stage's, in micro-batches that flow from stage to stage, the outputs sent from the last
 * stage to rank 0 (pipeline.h). *rows (may be NULL): the micro-batches' rows. */
static toy_status decode_stage(toy_context *ctx, const toy_batch *b, int64_t *rows_out) {
    toy_status st;
    if ((b->n_tokens >= TY_PACK_PROMPT_TOKENS || several_sequences(b)) &&
        (st = ty_model_pack(ctx->model, ctx->params.n_threads)))
        return st;
    const int64_t n = b->n_tokens;
    if ((st = ty_kv_cache_place(&ctx->kv, b->n_tokens, b->seq_id, b->pos, ctx->cells))) return st;
    int32_t n_out = 0;
    for (int64_t t = 0; t < n; t++) {
        const bool want = b->logits ? b->logits[t] != 0 : t == n - 1;
        ctx->logits_row[t] = want ? n_out++ : -1;
    }
    ctx->n_last = b->n_tokens;
    const int64_t rows = micro_batch_rows(ctx, b);
    if (rows_out) *rows_out = rows;
    int32_t out0 = 0; /* the outputs of the micro-batches before */
    for (int64_t t0 = 0; t0 < n; t0 += rows) {
        const int64_t t1 = t0 + rows < n ? t0 + rows : n;
        if ((st = stage_rows(ctx, b, t0, t1, out0))) return st;
        for (int64_t t = t0; t < t1; t++) out0 += ctx->logits_row[t] >= 0;
    }
    return TOY_OK;
}

toy_status ty_decode_stage(toy_context *ctx, const toy_batch *b, int64_t *rows_out) {
    ty_model_forward_begin(ctx->model);
    const toy_status st = decode_stage(ctx, b, rows_out);
    ty_model_forward_end(ctx->model);
    return st;
}

toy_status toy_decode_submit(toy_context *ctx, const toy_batch *b) {
    toy_status st = check_batch(ctx, b);
    if (st) return st;
    if (ctx->n_flight == ctx->flight_cap)
        return ty_error(TOY_ERR_INVALID, "%d batches are in flight, as many as the context takes: toy_decode_wait first",
                        ctx->n_flight);
    if (ctx->pipe_id >= 0) ty_pipeline_send_batch(ctx->pipe_id, b); /* the other stages' share */
    struct ty_flight *f = &ctx->flight[(ctx->flight_head + ctx->n_flight) % ctx->flight_cap];
    if ((st = ty_decode_stage(ctx, b, &f->rows))) return st;
    f->n_tokens = b->n_tokens;
    memcpy(f->logits_row, ctx->logits_row, (size_t)b->n_tokens * sizeof *f->logits_row);
    ctx->n_flight++;
    return TOY_OK;
}

toy_status toy_decode(toy_context *ctx, const toy_batch *b) {
    if (ctx->n_flight)
        return ty_error(TOY_ERR_INVALID, "%d batches are in flight (toy_decode_submit): toy_decode_wait first",
                        ctx->n_flight);
    toy_status st = toy_decode_submit(ctx, b);
    return st ? st : toy_decode_wait(ctx);
}
