/* trainer_steps.c — toy_trainer: a model trained one step at a time over batches in the
 * caller's memory (toy.h). The same train_model, AdamW step and checkpoint writers as
 * toy_train; the caller holds the data and the schedule. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "error.h"
#include "optimizer.h"
#include "params.h"
#include "train_model.h"

struct toy_trainer {
    toy_trainer_params p;
    const toy_model *model;
    ty_pool *pool;
    train_model *tm;
    float *m, *v;        /* AdamW's moments */
    adamw_params ap;
    int64_t step;        /* updates made */
    int32_t *tokens, *targets;
    float *weights;
    int last_B, last_T;  /* the last step's shape; 0 before any */
    char *taps;          /* the caller's patterns, kept */
};

void toy_trainer_params_init(toy_trainer_params *params, size_t size) {
    const toy_trainer_params defaults = {
        .size = sizeof defaults, .batch = 8, .seq = 256, .lr = 1e-3f, .weight_decay = 0.1f, .beta1 = 0.9f,
        .beta2 = 0.95f, .eps = 1e-8f, .clip = 1.0f, .lora_targets = 0x7f, .seed = 42, .n_threads = 0};
    ty_params_init(params, size, &defaults, sizeof defaults);
}

void toy_trainer_free(toy_trainer *t) {
    if (!t) return;
    ty_train_model_free(t->tm);
    ty_pool_free(t->pool);
    free(t->m);
    free(t->v);
    free(t->tokens);
    free(t->targets);
    free(t->weights);
    free(t->taps);
    free(t);
}

/* The taps the patterns name, kept; a pattern that names none is an error. */
static toy_status keep_taps(toy_trainer *t) {
    for (const char *s = t->taps; *s;) {
        const size_t len = strcspn(s, ",");
        bool any = false;
        char one[128], tap[64];
        if (len >= sizeof one) return ty_error(TOY_ERR_INVALID, "taps: a glob of %zu characters", len);
        snprintf(one, sizeof one, "%.*s", (int)len, s);
        for (int il = 0; il < toy_model_n_layer(t->model); il++)
            for (int k = 0; k < TRAIN_TAP_KINDS; k++) {
                snprintf(tap, sizeof tap, "L%d.%s", il, ty_train_tap_names[k]);
                if (fnmatch(one, tap, 0)) continue;
                float *buf;
                toy_status st = ty_train_model_keep_tap(t->tm, il, k, &buf);
                if (st) return st;
                any = true;
            }
        if (!any)
            return ty_error(TOY_ERR_INVALID,
                            "taps: '%s' names no tap (L<layer>.attn_norm, attn_out, ffn_norm, ffn_out or out, "
                            "layers 0..%d)", one, toy_model_n_layer(t->model) - 1);
        s += len + (s[len] == ',');
    }
    return TOY_OK;
}

static toy_status check(const toy_trainer_params *p) {
    if (p->batch < 1 || p->seq < 1)
        return ty_error(TOY_ERR_INVALID, "trainer: batch %d and seq %d must be at least 1", p->batch, p->seq);
    if ((int64_t)p->batch * p->seq > INT32_MAX / 4)
        return ty_error(TOY_ERR_INVALID, "trainer: batch %d x seq %d is too many tokens", p->batch, p->seq);
    if (!(p->lr > 0) || !(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1) || !(p->eps > 0) ||
        !(p->weight_decay >= 0) || !(p->clip >= 0))
        return ty_error(TOY_ERR_INVALID,
                        "trainer: lr %g must be > 0, betas in [0, 1), eps > 0, weight decay and clip >= 0", p->lr);
    if (p->compute_type && p->compute_type != TOY_TYPE_F32 && p->compute_type != TOY_TYPE_BF16 &&
        p->compute_type != TOY_TYPE_F16)
        return ty_error(TOY_ERR_INVALID, "trainer: compute type %s: f32, bf16 or f16", toy_type_name(p->compute_type));
    if ((p->lora_per_head || p->lora_init_scale != 0 || p->lora_alpha != 0) && !p->lora_rank)
        return ty_error(TOY_ERR_INVALID, "trainer: lora_alpha, lora_per_head and lora_init_scale need lora_rank");
    return TOY_OK;
}

toy_status toy_trainer_new(const toy_model *model, const toy_trainer_params *params, toy_trainer **out) {
    *out = NULL;
    if (!model) return ty_error(TOY_ERR_INVALID, "trainer: no model");
    toy_trainer_params p = toy_trainer_default_params();
    if (params && ty_params_read(&p, sizeof p, params, "toy_trainer_params")) return TOY_ERR_INVALID;
    toy_status st = toy_kernel_init();
    if (!st) st = check(&p);
    if (st) return st;
    toy_trainer *t = calloc(1, sizeof *t);
    if (!t) return ty_error(TOY_ERR_NOMEM, "no memory");
    t->p = p;
    t->p.taps = NULL;
    t->model = model;
    t->taps = strdup(p.taps ? p.taps : "");
    t->pool = ty_pool_new(p.n_threads > 0 ? p.n_threads : 1);
    const size_t rows = (size_t)p.batch * (size_t)p.seq;
    t->tokens = malloc(rows * sizeof *t->tokens);
    t->targets = malloc(rows * sizeof *t->targets);
    t->weights = malloc(rows * sizeof *t->weights);
    if (!t->taps || !t->pool || !t->tokens || !t->targets || !t->weights) st = ty_error(TOY_ERR_NOMEM, "no memory");
    if (!st && p.lora_rank) {
        const train_lora_params lp = {p.lora_rank, p.lora_alpha > 0 ? p.lora_alpha : (float)p.lora_rank,
                                      p.lora_targets, 0.0f, p.seed, p.lora_per_head, p.lora_init_scale};
        st = ty_train_model_new_lora(model, p.seq, t->pool, &lp, &t->tm);
    } else if (!st) {
        st = ty_train_model_new(model, p.seq, t->pool, &t->tm);
    }
    if (!st) {
        ty_gemm_set_operand_type(ty_train_model_gemm(t->tm), p.compute_type ? p.compute_type : TOY_TYPE_F32);
        st = ty_train_model_reserve(t->tm, p.batch, p.seq);
    }
    if (!st) st = keep_taps(t);
    if (!st) {
        const int64_t nf = ty_train_model_n_floats(t->tm);
        t->m = calloc((size_t)nf, sizeof *t->m);
        t->v = calloc((size_t)nf, sizeof *t->v);
        if (!t->m || !t->v) st = ty_error(TOY_ERR_NOMEM, "no memory for the optimizer state");
    }
    if (st) {
        toy_trainer_free(t);
        return st;
    }
    /* a constant rate: the caller schedules it */
    t->ap = (adamw_params){p.lr, p.lr, 0, 1, p.beta1, p.beta2, p.eps, p.weight_decay, p.clip};
    *out = t;
    return TOY_OK;
}

toy_status toy_trainer_step(toy_trainer *t, const int32_t *tokens, int32_t n_seq, int32_t n_tokens, bool update,
                            double *loss) {
    if (!tokens || n_seq < 1 || n_seq > t->p.batch || n_tokens < 2 || n_tokens > t->p.seq + 1)
        return ty_error(TOY_ERR_INVALID, "trainer step: %d sequences of %d tokens (1..%d of 2..%d)", n_seq, n_tokens,
                        t->p.batch, t->p.seq + 1);
    const int32_t n_vocab = toy_model_n_vocab(t->model), T = n_tokens - 1;
    for (int64_t i = 0; i < (int64_t)n_seq * n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return ty_error(TOY_ERR_INVALID, "trainer step: sequence %lld, token %lld: id %d out of range (0..%d)",
                            (long long)(i / n_tokens), (long long)(i % n_tokens), tokens[i], n_vocab - 1);
    const float w = 1.0f / (float)((int64_t)n_seq * T);
    for (int s = 0; s < n_seq; s++)
        for (int i = 0; i < T; i++) {
            t->tokens[s * T + i] = tokens[(int64_t)s * n_tokens + i];
            t->targets[s * T + i] = tokens[(int64_t)s * n_tokens + i + 1];
            t->weights[s * T + i] = w;
        }
    ty_train_model_zero_grads(t->tm);
    const train_batch b = {n_seq, T, (uint64_t)t->step, t->tokens, t->targets, t->weights};
    const double l = ty_train_model_step(t->tm, &b, true);
    t->last_B = n_seq;
    t->last_T = T;
    if (update) {
        ty_adamw_step(t->pool, t->tm, t->m, t->v, &t->ap, t->ap.lr, t->step + 1);
        t->step++;
    }
    if (loss) *loss = l;
    return TOY_OK;
}

void toy_trainer_set_lr(toy_trainer *t, float lr) {
    if (lr > 0) t->ap.lr = t->ap.min_lr = lr;
}

int64_t toy_trainer_n_steps(const toy_trainer *t) { return t->step; }

int toy_trainer_n_tensors(const toy_trainer *t) {
    int n = 0;
    for (int i = 0; i < ty_train_model_n_tensors(t->tm); i++) n += ty_train_model_tensor(t->tm, i)->trainable;
    return n;
}

/* The i-th trainable tensor. */
static const train_tensor *trained(const toy_trainer *t, int i) {
    for (int k = 0; k < ty_train_model_n_tensors(t->tm); k++) {
        const train_tensor *x = ty_train_model_tensor(t->tm, k);
        if (x->trainable && i-- == 0) return x;
    }
    return NULL;
}

const char *toy_trainer_tensor_name(const toy_trainer *t, int i) {
    const train_tensor *x = i >= 0 ? trained(t, i) : NULL;
    return x ? x->name : NULL;
}

static const train_tensor *named(const toy_trainer *t, const char *name, int64_t ne[4]) {
    for (int k = 0; name && k < ty_train_model_n_tensors(t->tm); k++) {
        const train_tensor *x = ty_train_model_tensor(t->tm, k);
        if (!x->trainable || strcmp(x->name, name)) continue;
        for (int d = 0; ne && d < 4; d++) ne[d] = d < x->n_dims ? x->ne[d] : 1;
        return x;
    }
    ty_error(TOY_ERR_NOT_FOUND, "trainer: no trained tensor %s", name ? name : "(null)");
    return NULL;
}

float *toy_trainer_param(toy_trainer *t, const char *name, int64_t ne[4]) {
    const train_tensor *x = named(t, name, ne);
    return x ? ty_train_model_params(t->tm) + x->offset : NULL;
}

const float *toy_trainer_grad(const toy_trainer *t, const char *name, int64_t ne[4]) {
    const train_tensor *x = named(t, name, ne);
    return x ? ty_train_model_grads(t->tm) + x->offset : NULL;
}

const float *toy_trainer_tap(const toy_trainer *t, const char *name, int64_t *rows, int64_t *cols) {
    int il = -1, len = 0;
    char kind[32] = "";
    if (!name || sscanf(name, "L%d.%31[a-z_]%n", &il, kind, &len) != 2 || name[len]) il = -1;
    for (int k = 0; il >= 0 && k < TRAIN_TAP_KINDS; k++) {
        const float *buf = ty_train_model_tap(t->tm, il, k);
        if (strcmp(kind, ty_train_tap_names[k]) || !buf) continue;
        if (!t->last_B) {
            ty_error(TOY_ERR_INVALID, "trainer: tap %s: no step has run", name);
            return NULL;
        }
        if (rows) *rows = (int64_t)t->last_B * t->last_T;
        if (cols) *cols = toy_model_n_embd(t->model);
        return buf;
    }
    ty_error(TOY_ERR_NOT_FOUND, "trainer: tap %s is not kept (toy_trainer_params.taps: '%s')", name ? name : "(null)",
             t->taps);
    return NULL;
}

toy_status toy_trainer_save(toy_trainer *t, const char *path, toy_ftype ftype) {
    if (!path) return ty_error(TOY_ERR_INVALID, "trainer: no path");
    if (ty_train_model_lora(t->tm))
        return ty_checkpoint_write_adapter(t->tm, toy_model_gguf(t->model), t->m, t->v, t->step, path);
    if (!toy_ftype_name(ftype)) return ty_error(TOY_ERR_INVALID, "trainer: unknown file type %d", ftype);
    return ty_checkpoint_write_model(t->tm, toy_model_gguf(t->model), ftype, t->p.n_threads > 0 ? t->p.n_threads : 1,
                                     path);
}
