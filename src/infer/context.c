/* context.c — creating a context and editing its KV cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "error.h"
#include "lora.h"
#include "pipeline.h"
#include "params.h"
#include "quant.h"

void toy_context_params_init(toy_context_params *params, size_t size) {
    const toy_context_params defaults = {
        .size = sizeof defaults,
        .n_ctx = 0,
        .n_batch = 512,
        .n_seq_max = 1,
        .n_outputs = 0,
        .n_threads = 1,
        .cache_type_k = TOY_TYPE_F32,
        .cache_type_v = TOY_TYPE_F32,
    };
    ty_params_init(params, size, &defaults, sizeof defaults);
}

#define ALLOC(field, count)                                                                 \
    do {                                                                                    \
        size_t n_ = (size_t)(count);                                                        \
        if (n_ == 0) n_ = 1;                                                                \
        if (!(ctx->field = calloc(n_, sizeof *ctx->field))) {                               \
            toy_context_free(ctx);                                                          \
            return ty_error(TOY_ERR_NOMEM, "no memory for context scratch (" #field ")");  \
        }                                                                                   \
    } while (0)

/* A context of a pipelined model: every rank makes its own (pipeline.h). */
static toy_status join_pipeline(toy_context *ctx) {
    if (ctx->params.trace)
        return ty_error(TOY_ERR_UNSUPPORTED, "tracing is not supported in a pipeline (mpirun): each process holds "
                                             "other layers");
    if ((ctx->pipe_id = ty_pipeline_add(PIPE_CONTEXTS, ctx)) < 0)
        return ty_error(TOY_ERR_UNSUPPORTED, "too many contexts in one pipeline");
    if (ty_pipeline_rank() != 0) return TOY_OK;
    ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_CONTEXT_NEW, .id = ctx->pipe_id, .x = {ctx->model->pipe_id},
                                    .payload = (uint8_t *)&ctx->params, .len = (int64_t)sizeof ctx->params});
    return ty_pipeline_agree(TOY_OK);
}

toy_status toy_context_new(toy_model *model, const toy_context_params *params, toy_context **out) {
    *out = NULL;
    toy_status st = toy_kernel_init();
    if (st) return st;
    toy_context_params p = toy_context_default_params();
    if (params && ty_params_read(&p, sizeof p, params, "toy_context_params")) return TOY_ERR_INVALID;
    const ty_hparams *hp = &model->hp;
    if (p.n_ctx <= 0) p.n_ctx = hp->n_ctx_train;
    if (hp->pos_embd && p.n_ctx > hp->n_ctx_train) /* no position past the learned ones */
        return ty_error(TOY_ERR_INVALID, "a context of %d tokens: the model has %d learned positions", p.n_ctx,
                        hp->n_ctx_train);
    if (p.n_seq_max <= 0) p.n_seq_max = 1;
    if (p.attn != TOY_ATTN_FUSED && p.attn != TOY_ATTN_PLAIN)
        return ty_error(TOY_ERR_INVALID, "attention %d is neither TOY_ATTN_FUSED nor TOY_ATTN_PLAIN", (int)p.attn);
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.n_outputs <= 0) p.n_outputs = p.n_seq_max;
    if (p.n_outputs > p.n_batch) p.n_outputs = p.n_batch;
    if (p.n_threads <= 0) p.n_threads = 1;
    if (p.n_ctx > (1 << 24) || p.n_seq_max > 4096 || p.n_batch > (1 << 20))
        return ty_error(TOY_ERR_INVALID, "context too large (n_ctx %d, n_seq_max %d, n_batch %d)",
                        p.n_ctx, p.n_seq_max, p.n_batch);

    toy_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return ty_error(TOY_ERR_NOMEM, "no memory for a context");
    ctx->model = model;
    ctx->params = p;
    ctx->pipe_id = -1;
    st = ty_kv_cache_init(&ctx->kv, hp->n_layer, p.n_seq_max, p.n_ctx, hp->n_head_kv,
                                      hp->head_dim, p.cache_type_k, p.cache_type_v);
    if (st) {
        free(ctx);
        return st;
    }
    ctx->be = ty_backend_cpu_new(p.n_threads);
    if (!ctx->be) {
        toy_context_free(ctx);
        return ty_error(TOY_ERR_NOMEM, "cannot start %d threads", p.n_threads);
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
    if (p.embeddings) ALLOC(embd, nb * hp->n_embd);
    if (p.trace) { /* the FFN's activation without its gate's product, for the ffn_act tap */
        ALLOC(trace_act, nb * ff);
        ALLOC(trace_ones, nb * ff);
        for (int64_t i = 0; i < nb * ff; i++) ctx->trace_ones[i] = 1.0f;
    }
    ctx->flight_cap = model->n_stages;
    ctx->flight = calloc((size_t)ctx->flight_cap, sizeof *ctx->flight);
    for (int i = 0; ctx->flight && i < ctx->flight_cap; i++)
        if (!(ctx->flight[i].logits_row = malloc((size_t)nb * sizeof(int32_t)))) {
            toy_context_free(ctx);
            return ty_error(TOY_ERR_NOMEM, "no memory for a context");
        }
    if (!ctx->flight) {
        toy_context_free(ctx);
        return ty_error(TOY_ERR_NOMEM, "no memory for a context");
    }
    if (model->pipe_id >= 0 && (st = join_pipeline(ctx))) {
        toy_context_free(ctx);
        return st;
    }
    *out = ctx;
    return TOY_OK;
}

void toy_context_free(toy_context *ctx) {
    if (!ctx) return;
    while (ctx->n_flight && toy_decode_wait(ctx) == TOY_OK) continue; /* the other ranks' outputs, taken */
    for (int i = 0; ctx->flight && i < ctx->flight_cap; i++) free(ctx->flight[i].logits_row);
    free(ctx->flight);
    if (ctx->pipe_id >= 0) {
        ty_pipeline_remove(PIPE_CONTEXTS, ctx->pipe_id);
        ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_CONTEXT_FREE, .id = ctx->pipe_id});
    }
    if (ctx->be) ctx->be->free(ctx->be);
    ty_kv_cache_free(&ctx->kv);
    free(ctx->x);
    free(ctx->h);
    free(ctx->q);
    free(ctx->k);
    free(ctx->v);
    free(ctx->attn);
    free(ctx->kq);
    free(ctx->trace_act);
    free(ctx->trace_ones);
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
    free(ctx->embd);
    free(ctx->lora_uses);
    free(ctx->lora_first);
    free(ctx->lora_t);
    free(ctx->lora_u);
    for (int i = 0; i < ctx->n_lora_owned; i++) free(ctx->lora_owned[i]);
    free(ctx->lora_owned);
    free(ctx);
}

/* ---------------------------------------------------------------- adapters */

typedef struct {
    int slot;
    int64_t row0, n_rows;
} lora_target;

/* Where the pair for base tensor `name` applies: up to 3 parts of a fused matrix. */
static int lora_targets(const ty_hparams *hp, const char *name, lora_target *t) {
    const int n_slots = hp->n_layer * MAT_KINDS;
    if (!strcmp(name, "output.weight")) return t[0] = (lora_target){n_slots, 0, hp->n_vocab}, 1;
    if (!strcmp(name, "token_embd.weight")) return t[0] = (lora_target){n_slots + 1, 0, hp->n_embd}, 1;
    int il, len = 0;
    char kind[32];
    if (sscanf(name, "blk.%d.%31[a-z_].weight%n", &il, kind, &len) != 2 || name[len] || il < 0 ||
        il >= hp->n_layer)
        return 0;
    int n_t = 0;
    for (int k = 0; k < (hp->n_expert ? MAT_GATE : MAT_KINDS); k++) { /* not the experts' FFN */
        const ty_mat_home h = ty_layer_mat_home(hp, k);
        if (!strcmp(kind, h.tensor)) t[n_t++] = (lora_target){il * MAT_KINDS + k, h.row0, h.n_rows};
    }
    return n_t;
}

toy_status toy_context_set_lora(toy_context *ctx, toy_lora *const *loras, const float *scales, int n) {
    if (ctx->pipe_id >= 0 && n > 0)
        return ty_error(TOY_ERR_UNSUPPORTED, "LoRA adapters are not supported in a pipeline (mpirun)");
    const ty_hparams *hp = &ctx->model->hp;
    const int n_slots = hp->n_layer * MAT_KINDS + 2;
    int n_uses = 0;
    for (int i = 0; i < n; i++) n_uses += 4 * loras[i]->n_pairs;
    ty_lora_use *uses = calloc((size_t)n_uses + 1, sizeof *uses);
    int32_t *first = calloc((size_t)n_slots + 1, sizeof *first);
    int *slot_of = calloc((size_t)n_uses + 1, sizeof *slot_of);
    if (!uses || !first || !slot_of) {
        free(uses);
        free(first);
        free(slot_of);
        return ty_error(TOY_ERR_NOMEM, "no memory for adapters");
    }
    /* a tied output is the embedding matrix: an embedding adapter changes the output
     * projection too, logits += s (h B) A^T, with B transposed once here */
    float **owned = calloc((size_t)n_uses + 1, sizeof *owned);
    int n_owned = 0;
    if (!owned) {
        free(uses), free(first), free(slot_of);
        return ty_error(TOY_ERR_NOMEM, "no memory for adapters");
    }
    /* collect the uses, then order them by slot (adapters in the order given) */
    int k = 0;
    int64_t max_rank = 1, max_t = 1, max_u = 1;
    for (int i = 0; i < n; i++) {
        const toy_lora *lora = loras[i];
        for (int j = 0; j < lora->n_pairs; j++) {
            const ty_lora_pair *p = &lora->pairs[j];
            lora_target t[3];
            const int n_t = lora_targets(hp, p->name, t);
            if (!n_t) {
                for (int o = 0; o < n_owned; o++) free(owned[o]);
                free(owned);
                free(uses);
                free(first);
                free(slot_of);
                return ty_error(TOY_ERR_UNSUPPORTED, "%s: toy cannot apply LoRA to %s", lora->path, p->name);
            }
            const bool embd = t[0].slot == n_slots - 1;
            if (embd && hp->tied_output) {
                float *bt = malloc((size_t)(p->rank * p->n_in) * sizeof *bt);
                if (!bt) {
                    for (int o = 0; o < n_owned; o++) free(owned[o]);
                    free(owned), free(uses), free(first), free(slot_of);
                    return ty_error(TOY_ERR_NOMEM, "no memory for adapters");
                }
                for (int64_t e = 0; e < p->n_in; e++)
                    for (int64_t r = 0; r < p->rank; r++) bt[r * p->n_in + e] = p->b[e * p->rank + r];
                owned[n_owned++] = bt;
                uses[k] = (ty_lora_use){bt, p->a, p->rank, p->n_in, p->n_out,
                                         ty_lora_pair_scale(lora, p, scales ? scales[i] : 1.0f)};
                slot_of[k++] = n_slots - 2;
                if (ctx->params.n_outputs * p->n_out > max_u) max_u = ctx->params.n_outputs * p->n_out;
                if (ctx->params.n_outputs * p->rank > max_t) max_t = ctx->params.n_outputs * p->rank;
            }
            for (int q = 0; q < n_t; q++) {
                uses[k] = (ty_lora_use){p->a, p->b + t[q].row0 * p->rank, p->rank, embd ? p->n_out : p->n_in,
                                         t[q].n_rows, ty_lora_pair_scale(lora, p, scales ? scales[i] : 1.0f)};
                slot_of[k++] = t[q].slot;
                const int64_t rows = t[q].slot == n_slots - 2 ? ctx->params.n_outputs : ctx->params.n_batch;
                if (p->rank > max_rank) max_rank = p->rank;
                if (rows * p->rank > max_t) max_t = rows * p->rank;
                if (rows * t[q].n_rows > max_u) max_u = rows * t[q].n_rows;
            }
        }
    }
    ty_lora_use *sorted = calloc((size_t)k + 1, sizeof *sorted);
    float *tbuf = malloc((size_t)max_t * sizeof *tbuf), *ubuf = malloc((size_t)max_u * sizeof *ubuf);
    if (!sorted || !tbuf || !ubuf) {
        for (int o = 0; o < n_owned; o++) free(owned[o]);
        free(owned), free(uses), free(first), free(slot_of), free(sorted), free(tbuf), free(ubuf);
        return ty_error(TOY_ERR_NOMEM, "no memory for adapters");
    }
    int m = 0;
    for (int s = 0; s < n_slots; s++) {
        first[s] = m;
        for (int i = 0; i < k; i++)
            if (slot_of[i] == s) sorted[m++] = uses[i];
    }
    first[n_slots] = m;
    free(uses);
    free(slot_of);
    free(ctx->lora_uses);
    free(ctx->lora_first);
    free(ctx->lora_t);
    free(ctx->lora_u);
    ctx->lora_uses = sorted;
    ctx->lora_first = n ? first : (free(first), NULL);
    ctx->lora_t = tbuf;
    ctx->lora_u = ubuf;
    for (int i = 0; i < ctx->n_lora_owned; i++) free(ctx->lora_owned[i]);
    free(ctx->lora_owned);
    ctx->lora_owned = owned;
    ctx->n_lora_owned = n_owned;
    return TOY_OK;
}

ty_rope_params ty_context_rope(const toy_context *ctx, int il) {
    ty_rope_params r = ctx->model->layers[il].rope;
    ty_model_rope_factors(ctx->model, ctx->params.n_ctx, &r.freq_factors);
    return r;
}

int32_t toy_n_ctx(const toy_context *ctx) { return ctx->params.n_ctx; }
int32_t toy_n_batch(const toy_context *ctx) { return ctx->params.n_batch; }

const float *toy_get_logits(const toy_context *ctx, int32_t i) {
    if (i < 0 || i >= ctx->n_last || ctx->logits_row[i] < 0) return NULL;
    return ctx->logits + (int64_t)ctx->logits_row[i] * ctx->model->hp.n_vocab;
}

const float *toy_get_embeddings(const toy_context *ctx, int32_t i) {
    if (!ctx->embd || i < 0 || i >= ctx->n_last) return NULL;
    return ctx->embd + (int64_t)i * ctx->model->hp.n_embd;
}

toy_status toy_decode_wait(toy_context *ctx) {
    if (!ctx->n_flight) return ty_error(TOY_ERR_INVALID, "toy_decode_wait: no batch was submitted");
    const struct ty_flight *f = &ctx->flight[ctx->flight_head];
    const toy_model *m = ctx->model;
    const int64_t n = f->n_tokens, n_embd = m->hp.n_embd, n_vocab = m->hp.n_vocab;
    /* the outputs, micro-batch by micro-batch, as the last stage posted them */
    int64_t out0 = 0;
    for (int64_t t0 = 0; m->n_stages > 1 && m->stage == 0 && t0 < n; t0 += f->rows) {
        const int64_t t1 = t0 + f->rows < n ? t0 + f->rows : n;
        int64_t outs = 0;
        for (int64_t t = t0; t < t1; t++) outs += f->logits_row[t] >= 0;
        if (outs) ty_pipeline_recv_floats(ctx->logits + out0 * n_vocab, outs * n_vocab, m->n_stages - 1, PIPE_TAG_LOGITS);
        if (ctx->embd) ty_pipeline_recv_floats(ctx->embd + t0 * n_embd, (t1 - t0) * n_embd, m->n_stages - 1, PIPE_TAG_EMBD);
        out0 += outs;
    }
    memcpy(ctx->logits_row, f->logits_row, (size_t)n * sizeof *ctx->logits_row);
    ctx->n_last = f->n_tokens;
    ctx->flight_head = (ctx->flight_head + 1) % ctx->flight_cap;
    ctx->n_flight--;
    return TOY_OK;
}

int toy_decode_depth(const toy_context *ctx) { return ctx->flight_cap; }

static toy_status check_seq(const toy_context *ctx, int32_t seq_id) {
    if (seq_id < 0 || seq_id >= ctx->params.n_seq_max)
        return ty_error(TOY_ERR_INVALID, "sequence id %d out of range (0..%d)", seq_id,
                        ctx->params.n_seq_max - 1);
    return TOY_OK;
}

toy_status toy_kv_seq_rm(toy_context *ctx, int32_t seq_id, int32_t p0, int32_t p1) {
    toy_status st = check_seq(ctx, seq_id);
    if (st) return st;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    ty_kv_cache_seq_rm(&ctx->kv, seq_id, p0, p1);
    if (ctx->pipe_id >= 0) ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_KV, .id = ctx->pipe_id, .x = {PIPE_KV_RM, seq_id, p0, p1}});
    return TOY_OK;
}

toy_status toy_kv_seq_cp(toy_context *ctx, int32_t seq_src, int32_t seq_dst, int32_t p0, int32_t p1) {
    toy_status st = check_seq(ctx, seq_src);
    if (!st) st = check_seq(ctx, seq_dst);
    if (st) return st;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    if (p1 < p0) return ty_error(TOY_ERR_INVALID, "positions [%d, %d) to copy: the end is before the start", p0, p1);
    if (seq_src == seq_dst) return TOY_OK;
    if ((st = ty_kv_cache_seq_cp(&ctx->kv, seq_src, seq_dst, p0, p1))) return st;
    if (ctx->pipe_id >= 0) ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_KV, .id = ctx->pipe_id, .x = {PIPE_KV_CP, seq_src, seq_dst, p0, p1}});
    return TOY_OK;
}

toy_status toy_kv_seq_add(toy_context *ctx, int32_t seq_id, int32_t p0, int32_t p1, int32_t delta) {
    toy_status st = check_seq(ctx, seq_id);
    if (st) return st;
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT32_MAX;
    const ty_hparams *hp = &ctx->model->hp;
    ty_kv_cache *c = &ctx->kv;
    int64_t base = (int64_t)seq_id * c->cells_per_seq;
    for (int32_t i = 0; i < c->n_used[seq_id]; i++) {
        int32_t *pos = &c->pos[base + i];
        if (*pos < p0 || *pos >= p1) continue;
        /* keys hold rotated vectors: rotating by delta moves them to pos + delta, as
         * llama.cpp's K shift does */
        for (int32_t l = ctx->model->layer_first; l < ctx->model->layer_end; l++) { /* this process's stage */
            ty_rope_params rp = ty_context_rope(ctx, l);
            const ty_type_traits *tk = ty_type_traits_get(c->type_k);
            for (int32_t h = 0; h < hp->n_head_kv; h++) {
                float row[TOY_MAX_HEAD_DIM];
                uint8_t *kh = ty_kv_k(c, l, base + i, h);
                tk->to_float(kh, row, hp->head_dim);
                ctx->be->rope(ctx->be, row, 1, 1, hp->head_dim, &delta, &rp);
                tk->from_float(row, kh, hp->head_dim);
            }
        }
        *pos += delta;
    }
    if (ctx->pipe_id >= 0) ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_KV, .id = ctx->pipe_id, .x = {PIPE_KV_ADD, seq_id, p0, p1, delta}});
    return TOY_OK;
}

int32_t toy_kv_seq_pos_max(const toy_context *ctx, int32_t seq_id) {
    if (seq_id < 0 || seq_id >= ctx->params.n_seq_max) return -1;
    const ty_kv_cache *c = &ctx->kv;
    int32_t max = -1;
    for (int32_t i = 0; i < c->n_used[seq_id]; i++) {
        int32_t p = c->pos[(int64_t)seq_id * c->cells_per_seq + i];
        if (p > max) max = p;
    }
    return max;
}
