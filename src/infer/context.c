/* context.c — creating a context and editing its KV cache. */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "error.h"
#include "quant.h"

toy_context_params toy_context_default_params(void) {
    return (toy_context_params){
        .n_ctx = 0,
        .n_batch = 512,
        .n_seq_max = 1,
        .n_outputs = 0,
        .n_threads = 1,
        .cache_type_k = TOY_TYPE_F32,
        .cache_type_v = TOY_TYPE_F32,
    };
}

#define ALLOC(field, count)                                                                 \
    do {                                                                                    \
        size_t n_ = (size_t)(count);                                                        \
        if (n_ == 0) n_ = 1;                                                                \
        if (!(ctx->field = calloc(n_, sizeof *ctx->field))) {                               \
            toy_context_free(ctx);                                                          \
            return toy_error(TOY_ERR_NOMEM, "no memory for context scratch (" #field ")");  \
        }                                                                                   \
    } while (0)

toy_status toy_context_new(toy_model *model, const toy_context_params *params, toy_context **out) {
    *out = NULL;
    toy_context_params p = params ? *params : toy_context_default_params();
    const toy_hparams *hp = &model->hp;
    if (p.n_ctx <= 0) p.n_ctx = hp->n_ctx_train;
    if (p.n_seq_max <= 0) p.n_seq_max = 1;
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.n_outputs <= 0) p.n_outputs = p.n_seq_max;
    if (p.n_outputs > p.n_batch) p.n_outputs = p.n_batch;
    if (p.n_threads <= 0) p.n_threads = 1;
    if (p.n_ctx > (1 << 24) || p.n_seq_max > 4096 || p.n_batch > (1 << 20))
        return toy_error(TOY_ERR_INVALID, "context too large (n_ctx %d, n_seq_max %d, n_batch %d)",
                         p.n_ctx, p.n_seq_max, p.n_batch);

    toy_status st = toy_model_pack(model);
    if (st) return st;
    toy_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return toy_error(TOY_ERR_NOMEM, "no memory for a context");
    ctx->model = model;
    ctx->params = p;
    st = toy_kv_cache_init(&ctx->kv, hp->n_layer, p.n_seq_max, p.n_ctx, hp->n_head_kv,
                                      hp->head_dim, p.cache_type_k, p.cache_type_v);
    if (st) {
        free(ctx);
        return st;
    }
    ctx->be = toy_backend_cpu_new(p.n_threads);
    if (!ctx->be) {
        toy_context_free(ctx);
        return toy_error(TOY_ERR_NOMEM, "cannot start %d threads", p.n_threads);
    }
    int64_t nb = p.n_batch, q_dim = (int64_t)hp->n_head * hp->head_dim;
    int64_t kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    int64_t ff = hp->n_ff > hp->n_ff_exp ? hp->n_ff : hp->n_ff_exp;
    if (hp->n_ff_shexp > ff) ff = hp->n_ff_shexp;
    int64_t max_cols = hp->n_embd > q_dim ? hp->n_embd : q_dim;
    if (ff > max_cols) max_cols = ff;
    if ((st = ctx->be->reserve(ctx->be, nb, max_cols, hp->n_head, hp->head_dim))) {
        toy_context_free(ctx);
        return st;
    }
    ALLOC(x, nb * hp->n_embd);
    ALLOC(h, nb * hp->n_embd);
    ALLOC(q, nb * q_dim);
    ALLOC(k, nb * kv_dim);
    ALLOC(v, nb * kv_dim);
    ALLOC(attn, nb * q_dim);
    ALLOC(o, nb * hp->n_embd);
    ALLOC(gate, nb * ff);
    ALLOC(up, nb * ff);
    ALLOC(cells, nb);
    if (hp->n_expert) {
        ALLOC(router, nb * hp->n_expert);
        ALLOC(expert_id, nb * hp->n_expert_used);
        ALLOC(expert_w, nb * hp->n_expert_used);
        ALLOC(expert_out, nb * hp->n_expert_used * hp->n_embd);
        ALLOC(moe_in, nb * hp->n_embd);
        ALLOC(moe_rows, nb);
    }
    ALLOC(logits, (int64_t)p.n_outputs * hp->n_vocab);
    ALLOC(logits_row, nb);
    *out = ctx;
    return TOY_OK;
}

void toy_context_free(toy_context *ctx) {
    if (!ctx) return;
    if (ctx->be) ctx->be->free(ctx->be);
    toy_kv_cache_free(&ctx->kv);
    free(ctx->x);
    free(ctx->h);
    free(ctx->q);
    free(ctx->k);
    free(ctx->v);
    free(ctx->attn);
    free(ctx->o);
    free(ctx->gate);
    free(ctx->up);
    free(ctx->cells);
    free(ctx->router);
    free(ctx->expert_id);
    free(ctx->expert_w);
    free(ctx->expert_out);
    free(ctx->moe_in);
    free(ctx->moe_rows);
    free(ctx->logits);
    free(ctx->logits_row);
    free(ctx);
}

toy_rope_params toy_context_rope(const toy_context *ctx, int il) {
    const toy_model *m = ctx->model;
    toy_rope_params r = m->layers[il].rope;
    if (m->rope_factors_long.data)
        r.freq_factors = ctx->params.n_ctx > m->hp.n_ctx_orig ? m->rope_factors_long.data
                                                              : m->rope_factors_short.data;
    return r;
}

int32_t toy_n_ctx(const toy_context *ctx) { return ctx->params.n_ctx; }
int32_t toy_n_batch(const toy_context *ctx) { return ctx->params.n_batch; }

const float *toy_get_logits(const toy_context *ctx, int32_t i) {
    if (i < 0 || i >= ctx->n_last || ctx->logits_row[i] < 0) return NULL;
    return ctx->logits + (int64_t)ctx->logits_row[i] * ctx->model->hp.n_vocab;
}

static toy_status check_seq(const toy_context *ctx, int32_t seq_id) {
    if (seq_id < 0 || seq_id >= ctx->params.n_seq_max)
        return toy_error(TOY_ERR_INVALID, "sequence id %d out of range (0..%d)", seq_id,
                         ctx->params.n_seq_max - 1);
    return TOY_OK;
}

toy_status toy_kv_seq_rm(toy_context *ctx, int32_t seq_id, int32_t p0, int32_t p1) {
    toy_status st = check_seq(ctx, seq_id);
    if (st) return st;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    toy_kv_cache_seq_rm(&ctx->kv, seq_id, p0, p1);
    return TOY_OK;
}

toy_status toy_kv_seq_add(toy_context *ctx, int32_t seq_id, int32_t p0, int32_t p1, int32_t delta) {
    toy_status st = check_seq(ctx, seq_id);
    if (st) return st;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    const toy_hparams *hp = &ctx->model->hp;
    toy_kv_cache *c = &ctx->kv;
    int64_t base = (int64_t)seq_id * c->cells_per_seq;
    for (int32_t i = 0; i < c->n_used[seq_id]; i++) {
        int32_t *pos = &c->pos[base + i];
        if (*pos < p0 || *pos >= p1) continue;
        /* keys hold rotated vectors: rotating by delta moves them to pos + delta, as
         * llama.cpp's K shift does */
        for (int32_t l = 0; l < hp->n_layer; l++) {
            toy_rope_params rp = toy_context_rope(ctx, l);
            const toy_type_traits *tk = toy_type_traits_get(c->type_k);
            for (int32_t h = 0; h < hp->n_head_kv; h++) {
                float row[TOY_MAX_HEAD_DIM];
                uint8_t *kh = toy_kv_k(c, l, base + i, h);
                tk->to_float(kh, row, hp->head_dim);
                ctx->be->rope(ctx->be, row, 1, 1, hp->head_dim, &delta, &rp);
                tk->from_float(row, kh, hp->head_dim);
            }
        }
        *pos += delta;
    }
    return TOY_OK;
}

int32_t toy_kv_seq_pos_max(const toy_context *ctx, int32_t seq_id) {
    if (seq_id < 0 || seq_id >= ctx->params.n_seq_max) return -1;
    const toy_kv_cache *c = &ctx->kv;
    int32_t max = -1;
    for (int32_t i = 0; i < c->n_used[seq_id]; i++) {
        int32_t p = c->pos[(int64_t)seq_id * c->cells_per_seq + i];
        if (p > max) max = p;
    }
    return max;
}
