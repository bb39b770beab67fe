/* model.c — loading a model: hyperparameters from GGUF metadata, weights bound in place.
 *
 * Every tensor is checked for presence, shape and a type toy computes with before the
 * model is handed out; a problem is an error naming the tensor. Nothing large is
 * copied: matrices point into the mapped file. Only norm vectors stored in a type other
 * than F32 are converted (they are a few KB).
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu.h"
#include "error.h"
#include "gguf.h"
#include "kernels.h"
#include "model.h"
#include "packed.h"
#include "params.h"
#include "pipeline.h"
#include "threadpool.h"
#include "tool_prompt.h"

/* ---------------------------------------------------------------- metadata */

typedef struct {
    const toy_gguf *g;
    const char *path;
    const char *arch;
} meta_reader;

/* Reads "{arch}.{suffix}" as an integer (layer 0's value for a per-layer array). Absent:
 * *out = def, or an error if def < 0 (required). */
static toy_status meta_int(const meta_reader *r, const char *suffix, int64_t def, int64_t min,
                           int64_t max, int32_t *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", r->arch, suffix);
    const toy_gguf_value *v = toy_gguf_get(r->g, key);
    int64_t x = def;
    if (!v) {
        if (def < 0) return ty_error(TOY_ERR_FORMAT, "%s: required key %s is missing", r->path, key);
    } else if (toy_gguf_value_type(v) == TOY_GGUF_ARRAY) {
        if (toy_gguf_array_len(v) == 0 || toy_gguf_array_i64(v, 0, &x))
            return ty_error(TOY_ERR_FORMAT, "%s: %s: expected an integer or integer array",
                            r->path, key);
        /* layers that differ are not supported yet: say so rather than misread */
        for (uint64_t j = 1; j < toy_gguf_array_len(v); j++) {
            int64_t y;
            if (toy_gguf_array_i64(v, j, &y) || y != x)
                return ty_error(TOY_ERR_UNSUPPORTED, "%s: %s differs between layers", r->path,
                                key);
        }
    } else if (toy_gguf_value_i64(v, &x)) {
        return ty_error(TOY_ERR_FORMAT, "%s: %s: expected an integer, got %s", r->path, key,
                        toy_gguf_type_name(toy_gguf_value_type(v)));
    }
    if (x < min || x > max)
        return ty_error(TOY_ERR_FORMAT, "%s: %s = %lld is outside %lld..%lld", r->path, key,
                        (long long)x, (long long)min, (long long)max);
    *out = (int32_t)x;
    return TOY_OK;
}

static toy_status meta_float(const meta_reader *r, const char *suffix, double def, float *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", r->arch, suffix);
    const toy_gguf_value *v = toy_gguf_get(r->g, key);
    double x = def;
    if (!v) {
        if (isnan(def)) return ty_error(TOY_ERR_FORMAT, "%s: required key %s is missing", r->path, key);
    } else if (toy_gguf_value_f64(v, &x)) {
        return ty_error(TOY_ERR_FORMAT, "%s: %s: expected a number, got %s", r->path, key,
                        toy_gguf_type_name(toy_gguf_value_type(v)));
    }
    if (!isfinite(x))
        return ty_error(TOY_ERR_FORMAT, "%s: %s is not a finite number", r->path, key);
    *out = (float)x;
    return TOY_OK;
}

typedef enum {
    TY_QK_NORM_NONE,
    TY_QK_NORM_HEAD, /* RMSNorm of each head's q and k */
    TY_QK_NORM_FULL, /* RMSNorm over the whole q and k projections */
} ty_qk_norm;

/* The architectures, one row each: the switches of llama.cpp's llm_build_* graph for it.
 * read_hparams and bind_layer turn a row and the metadata into ty_hparams and ty_layer,
 * which the forwards (inference and training) read without deciding anything: a new
 * architecture is a row, a new switch a column. */
typedef struct arch_desc {
    const char *name;
    ty_rope_type rope_type;
    bool qkv_bias;
    ty_qk_norm qk_norm;
    bool post_norms;           /* post_attention_norm and post_ffw_norm */
    ty_ffn_act ffn_act;
    bool fused_qkv;            /* attn_qkv */
    bool fused_gate_up;        /* ffn_up holding the gate rows too */
    bool gpt2;                 /* LayerNorm with biases, learned positions and no RoPE, biases on every
                                  matrix, a plain GELU FFN */
    bool q_prescale;           /* Q, not QK^T, carries the attention scale */
    bool query_pre_attn_scalar; /* not in GGUF: llama.cpp scales by 1/sqrt(head_dim) */
    bool embd_scale_sqrt;      /* embeddings are multiplied by sqrt(n_embd) */
    bool expert_weights_norm;  /* renormalise the top-k, whatever norm_topk_prob says */
    int swa_period;            /* the last layer of each period attends fully (0: none does) */
    float swa_rope_base;       /* the windowed layers' RoPE base, unscaled (0: the model's) */
    bool swa_ignored;          /* llama.cpp ignores the window ("Phi SWA is currently disabled") */
} arch_desc;

static const arch_desc archs[] = {
    {"llama", TY_ROPE_NORM, .expert_weights_norm = true}, /* mixtral */
    {"qwen2", TY_ROPE_NEOX, .qkv_bias = true},
    {"qwen2moe", TY_ROPE_NEOX, .qkv_bias = true},
    {"qwen3", TY_ROPE_NEOX, .qk_norm = TY_QK_NORM_HEAD},
    {"qwen3moe", TY_ROPE_NEOX, .qk_norm = TY_QK_NORM_HEAD, .expert_weights_norm = true},
    {"gemma2", TY_ROPE_NEOX, .post_norms = true, .ffn_act = TY_ACT_GELU_TANH, .q_prescale = true,
     .query_pre_attn_scalar = true, .embd_scale_sqrt = true, .swa_period = 2},
    {"gemma3", TY_ROPE_NEOX, .qk_norm = TY_QK_NORM_HEAD, .post_norms = true, .ffn_act = TY_ACT_GELU_TANH,
     .q_prescale = true, .query_pre_attn_scalar = true, .embd_scale_sqrt = true, .swa_period = 6,
     .swa_rope_base = 10000.0f},
    {"phi3", TY_ROPE_NEOX, .fused_qkv = true, .fused_gate_up = true, .q_prescale = true, .swa_ignored = true},
    {"olmoe", TY_ROPE_NEOX, .qk_norm = TY_QK_NORM_FULL},
    {"granite", TY_ROPE_NORM, .expert_weights_norm = true},
    {"gpt2", TY_ROPE_NORM, .qkv_bias = true, .ffn_act = TY_ACT_GELU_TANH, .fused_qkv = true, .gpt2 = true},
};
enum { N_ARCHS = sizeof archs / sizeof archs[0] };

static toy_status read_hparams(toy_model *m, const char *path) {
    ty_hparams *hp = &m->hp;
    const char *arch;
    size_t len;
    if (toy_gguf_get_str(m->gguf, "general.architecture", &arch, &len))
        return ty_error(TOY_ERR_FORMAT, "%s: key general.architecture is missing: not a model",
                        path);
    char name[64], supported[256] = "";
    snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), arch);
    int ai = 0;
    while (ai < N_ARCHS && strcmp(archs[ai].name, name) != 0) ai++;
    for (int i = 0; ai == N_ARCHS && i < N_ARCHS; i++)
        snprintf(supported + strlen(supported), sizeof supported - strlen(supported), "%s%s", i ? ", " : "",
                 archs[i].name);
    if (ai == N_ARCHS)
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: %s)", path,
                        name, supported);
    const arch_desc *a = m->arch = &archs[ai];
    meta_reader r = {m->gguf, path, name};
    toy_status st;
    if ((st = meta_int(&r, "embedding_length", -1, 1, 1 << 20, &hp->n_embd))) return st;
    if ((st = meta_int(&r, "block_count", -1, 1, TOY_MAX_LAYERS, &hp->n_layer))) return st;
    if ((st = meta_int(&r, "context_length", 2048, 1, INT32_MAX, &hp->n_ctx_train))) return st;
    if ((st = meta_int(&r, "attention.head_count", -1, 1, 1 << 14, &hp->n_head))) return st;
    if ((st = meta_int(&r, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv)))
        return st;
    if (hp->n_head % hp->n_head_kv)
        return ty_error(TOY_ERR_FORMAT, "%s: head_count %d is not a multiple of head_count_kv %d",
                        path, hp->n_head, hp->n_head_kv);
    if ((st = meta_int(&r, "attention.key_length", hp->n_embd / hp->n_head, 1, TOY_MAX_HEAD_DIM,
                       &hp->head_dim)))
        return st;
    if ((st = meta_int(&r, "attention.value_length", hp->head_dim, 1, TOY_MAX_HEAD_DIM, &hp->head_dim_v)))
        return st;
    if (hp->head_dim_v != hp->head_dim)
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: key_length %d != value_length %d", path,
                        hp->head_dim, hp->head_dim_v);
    if ((st = meta_int(&r, "rope.dimension_count", a->gpt2 ? 0 : hp->head_dim, 0, hp->head_dim, &hp->n_rot)))
        return st;
    if (hp->n_rot % 2)
        return ty_error(TOY_ERR_FORMAT, "%s: rope.dimension_count %d is odd", path, hp->n_rot);
    if ((st = meta_float(&r, a->gpt2 ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon", 1e-5,
                         &hp->rms_eps)))
        return st;
    if ((st = meta_float(&r, "rope.freq_base", 10000.0, &hp->rope_freq_base))) return st;
    /* either not positive would make every logit NaN */
    if (!(hp->rms_eps > 0))
        return ty_error(TOY_ERR_FORMAT, "%s: %s.attention.layer_norm%s_epsilon is %g, not positive", path, name,
                        a->gpt2 ? "" : "_rms", (double)hp->rms_eps);
    if (!(hp->rope_freq_base > 0))
        return ty_error(TOY_ERR_FORMAT, "%s: %s.rope.freq_base is %g, not positive", path, name,
                        (double)hp->rope_freq_base);
    float factor = 1.0f;
    if ((st = meta_float(&r, "rope.scaling.factor", 1.0, &factor))) return st;
    hp->rope_freq_scale = factor > 0 ? 1.0f / factor : 1.0f;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", name);
    const char *scaling;
    size_t scaling_len;
    if (!toy_gguf_get_str(m->gguf, key, &scaling, &scaling_len)) {
        if (scaling_len == 4 && !memcmp(scaling, "yarn", 4)) hp->rope_yarn = true;
        else if (scaling_len == 4 && !memcmp(scaling, "none", 4)) hp->rope_freq_scale = 1.0f;
        else if (!(scaling_len == 6 && !memcmp(scaling, "linear", 6)))
            return ty_error(TOY_ERR_UNSUPPORTED, "%s: %s '%.*s' is not supported (none, linear, yarn)",
                            path, key, (int)scaling_len, scaling);
    }
    if ((st = meta_int(&r, "rope.scaling.original_context_length", hp->n_ctx_train, 1, INT32_MAX,
                       &hp->n_ctx_orig)))
        return st;
    if ((st = meta_float(&r, "rope.scaling.attn_factor", 1.0, &hp->rope_attn_factor))) return st;
    if ((st = meta_int(&r, "expert_count", 0, 0, TOY_MAX_EXPERTS, &hp->n_expert))) return st;
    if ((st = meta_int(&r, "expert_used_count", 0, 0, hp->n_expert, &hp->n_expert_used))) return st;
    if (hp->n_expert > 0 && hp->n_expert_used == 0)
        return ty_error(TOY_ERR_FORMAT, "%s: %s.expert_used_count is missing or 0", path, name);
    if ((st = meta_int(&r, "feed_forward_length", hp->n_expert ? 0 : -1, 0, 1 << 20, &hp->n_ff)))
        return st;
    if ((st = meta_int(&r, "expert_feed_forward_length", hp->n_ff, 0, 1 << 20, &hp->n_ff_exp)))
        return st;
    if ((st = meta_int(&r, "expert_shared_feed_forward_length", 0, 0, 1 << 20, &hp->n_ff_shexp)))
        return st;
    float attn_scale; /* of QK^T */
    if ((st = meta_float(&r, "attention.scale", 0.0, &attn_scale))) return st;
    if (attn_scale == 0.0f) attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if ((st = meta_float(&r, "attn_logit_softcapping", 0.0, &hp->attn_softcap))) return st;
    if ((st = meta_float(&r, "final_logit_softcapping", 0.0, &hp->final_softcap))) return st;
    if ((st = meta_float(&r, "embedding_scale", 1.0, &hp->embd_scale))) return st;
    if ((st = meta_float(&r, "residual_scale", 1.0, &hp->residual_scale))) return st;
    if ((st = meta_float(&r, "logit_scale", 1.0, &hp->logit_scale))) return st;
    if ((st = meta_int(&r, "attention.sliding_window", 0, 0, INT32_MAX, &hp->n_swa))) return st;
    int32_t pooling = TOY_POOLING_UNSPECIFIED;
    snprintf(key, sizeof key, "%s.pooling_type", name);
    if (toy_gguf_get(m->gguf, key) &&
        (st = meta_int(&r, "pooling_type", 0, TOY_POOLING_NONE, TOY_POOLING_RANK, &pooling)))
        return st;
    hp->pooling = (toy_pooling)pooling;
    /* The per-head layout of toy's design (blk.N.attn_q.head_H.weight ...) is told by its
     * sentinel, whatever the key says: toy.ggml_native means, as in the design, that the
     * file holds the ggml layout to map as it is (older toy files set it on per-head files,
     * which the sentinel still finds). */
    hp->per_head_weights = toy_gguf_find_tensor(m->gguf, "blk.0.attn_q.head_0.weight") != NULL;

    hp->rope_type = a->rope_type;
    hp->qkv_bias = a->qkv_bias;
    /* a full fine-tune in the design writes per-head biases, whatever the architecture */
    if (hp->per_head_weights && toy_gguf_find_tensor(m->gguf, "blk.0.attn_q.head_0.bias")) hp->qkv_bias = true;
    const int32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    hp->q_norm_len = a->qk_norm == TY_QK_NORM_HEAD ? hp->head_dim : a->qk_norm == TY_QK_NORM_FULL ? q_dim : 0;
    hp->k_norm_len = a->qk_norm == TY_QK_NORM_HEAD ? hp->head_dim : a->qk_norm == TY_QK_NORM_FULL ? kv_dim : 0;
    hp->post_norms = a->post_norms;
    hp->ffn_act = a->ffn_act;
    hp->fused_qkv = a->fused_qkv;
    hp->fused_gate_up = a->fused_gate_up;
    hp->mat_bias = hp->layer_norm = hp->pos_embd = hp->ffn_no_gate = a->gpt2;
    hp->expert_weights_norm = a->expert_weights_norm;
    if (a->embd_scale_sqrt) hp->embd_scale = sqrtf((float)hp->n_embd);
    if (a->query_pre_attn_scalar) /* except on gemma3 27B (62 layers): n_embd / n_head */
        attn_scale = 1.0f / sqrtf((float)(!strcmp(a->name, "gemma3") && hp->n_layer == 62 ? hp->n_embd / hp->n_head
                                                                                          : hp->head_dim));
    hp->q_scale = a->q_prescale ? attn_scale : 1.0f;
    hp->kq_scale = a->q_prescale ? 1.0f : attn_scale;
    if (a->swa_ignored) { /* a context can ask for it (toy_context_params.honor_sliding_window) */
        hp->n_swa_ignored = hp->n_swa;
        hp->n_swa = 0;
    }
    return TOY_OK;
}

/* ---------------------------------------------------------------- tensors */

static toy_status own(toy_model *m, void *p) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **o = realloc(m->owned, (size_t)cap * sizeof *o);
        if (!o) {
            free(p);
            return ty_error(TOY_ERR_NOMEM, "no memory");
        }
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return TOY_OK;
}

static const char *model_path(const toy_model *m) { return toy_gguf_path(m->gguf); }

/* A tensor of exactly the shape ne (n_dims entries; trailing dims must be 1). */
static toy_status find_shaped(const toy_model *m, const char *name, int n_dims,
                              const int64_t *ne, bool required, const toy_gguf_tensor **out) {
    *out = toy_gguf_find_tensor(m->gguf, name);
    if (!*out) {
        if (!required) return TOY_OK;
        return ty_error(TOY_ERR_FORMAT, "%s: tensor %s is missing", model_path(m), name);
    }
    const toy_gguf_tensor *t = *out;
    bool ok = true;
    for (int d = 0; d < TOY_MAX_DIMS; d++) ok &= t->ne[d] == (d < n_dims ? ne[d] : 1);
    if (!ok)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]",
                        model_path(m), name, (long long)t->ne[0], (long long)t->ne[1],
                        (long long)t->ne[2], (long long)t->ne[3], (long long)ne[0],
                        (long long)(n_dims > 1 ? ne[1] : 1), (long long)(n_dims > 2 ? ne[2] : 1));
    if (!ty_kernel_scalar(t->type))
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which toy cannot compute with",
                        model_path(m), name, toy_type_name(t->type));
    return TOY_OK;
}

/* A matrix [n_cols, n_rows] (or n_mats stacked of them, for experts). */
static toy_status bind_matrix(toy_model *m, const char *name, int64_t n_cols, int64_t n_rows,
                              int64_t n_mats, bool required, ty_weight *w) {
    memset(w, 0, sizeof *w);
    const toy_gguf_tensor *t;
    int64_t ne[3] = {n_cols, n_rows, n_mats};
    toy_status st = find_shaped(m, name, n_mats > 1 ? 3 : 2, ne, required, &t);
    if (st || !t) return st;
    w->type = t->type;
    w->n_cols = n_cols;
    w->n_rows = n_rows;
    w->data = t->data;
    w->n_parts = 1;
    return toy_type_row_size(t->type, n_cols, &w->row_size);
}

/* Old toy layout: one [n_cols, rows_per_head] tensor per head, stacked along rows. */
static toy_status bind_per_head(toy_model *m, int layer, const char *what, int n_heads,
                                int64_t n_cols, int64_t rows_per_head, ty_weight *w) {
    memset(w, 0, sizeof *w);
    w->parts = calloc((size_t)n_heads, sizeof *w->parts);
    if (!w->parts) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_status st = own(m, (void *)w->parts);
    for (int h = 0; h < n_heads && !st; h++) {
        char name[96];
        snprintf(name, sizeof name, "blk.%d.%s.head_%d.weight", layer, what, h);
        const toy_gguf_tensor *t;
        int64_t ne[2] = {n_cols, rows_per_head};
        if ((st = find_shaped(m, name, 2, ne, true, &t))) break;
        if (h > 0 && t->type != w->type)
            return ty_error(TOY_ERR_FORMAT, "%s: tensor %s has type %s, head 0 has %s",
                            model_path(m), name, toy_type_name(t->type), toy_type_name(w->type));
        w->type = t->type;
        w->parts[h] = t->data;
    }
    if (st) return st;
    w->n_cols = n_cols;
    w->n_rows = rows_per_head * n_heads;
    w->n_parts = n_heads;
    w->rows_per_part = rows_per_head;
    if (n_heads == 1) w->data = w->parts[0]; /* one part: an ordinary matrix (ty_weight_row reads data) */
    return toy_type_row_size(w->type, n_cols, &w->row_size);
}

static toy_status bind_vector(toy_model *m, const char *name, int64_t n, ty_vector *v) {
    const toy_gguf_tensor *t;
    toy_status st = find_shaped(m, name, 1, &n, true, &t);
    if (st) return st;
    v->n = n;
    if (t->type == TOY_TYPE_F32) {
        v->data = t->data;
        return TOY_OK;
    }
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) return ty_error(TOY_ERR_NOMEM, "no memory");
    if ((st = own(m, f))) return st;
    if ((st = toy_dequantize(t->type, t->data, f, n)))
        return ty_error_wrap(st, "%s: tensor %s", model_path(m), name);
    v->data = f;
    return TOY_OK;
}

/* The per-head layout's biases: blk.N.WHAT.head_H.bias of n each, stacked in one vector. */
static toy_status bind_per_head_bias(toy_model *m, int layer, const char *what, int n_heads, int64_t n,
                                     ty_vector *out) {
    float *all = malloc((size_t)n_heads * (size_t)n * sizeof *all);
    if (!all) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_status st = own(m, all);
    for (int h = 0; h < n_heads && !st; h++) {
        char name[96];
        snprintf(name, sizeof name, "blk.%d.%s.head_%d.bias", layer, what, h);
        ty_vector v;
        if (!(st = bind_vector(m, name, n, &v))) memcpy(all + (size_t)h * (size_t)n, v.data, (size_t)n * sizeof *all);
    }
    *out = (ty_vector){all, (int64_t)n_heads * n};
    return st;
}

static int64_t packed_groups(const ty_weight *w) {
    return (w->n_rows + TOY_PACK_ROWS - 1) / TOY_PACK_ROWS;
}

/* Rows [row0, row0 + n_rows) of a matrix, in place: the parts of a fused matrix. */
static ty_weight weight_rows(const ty_weight *w, int64_t row0, int64_t n_rows) {
    ty_weight x = *w;
    x.data = w->data + (size_t)row0 * w->row_size;
    x.n_rows = n_rows;
    return x;
}

/* YaRN's correction range (ggml_rope_yarn_corr_dims): the dimension pairs whose
 * wavelength lies between beta_fast and beta_slow rotations over the original context. */
static float yarn_corr_dim(int32_t n_rot, int32_t n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2 * (float)M_PI)) / (2 * logf(base));
}

static ty_rope_params layer_rope(const toy_model *m, bool swa) {
    const ty_hparams *hp = &m->hp;
    ty_rope_params r = {
        .type = hp->rope_type,
        .n_rot = hp->n_rot,
        .freq_base = hp->rope_freq_base,
        .freq_scale = hp->rope_freq_scale,
        .freq_factors = m->rope_freqs.data,
        .attn_factor = hp->rope_attn_factor,
    };
    /* gemma3's local layers use base 10000 and no scaling, whatever the file says */
    if (swa && m->arch->swa_rope_base) {
        r.freq_base = m->arch->swa_rope_base;
        r.freq_scale = 1.0f;
    }
    if (hp->rope_yarn) {
        const float beta_fast = 32.0f, beta_slow = 1.0f;
        float lo = floorf(yarn_corr_dim(hp->n_rot, hp->n_ctx_orig, beta_fast, r.freq_base));
        float hi = ceilf(yarn_corr_dim(hp->n_rot, hp->n_ctx_orig, beta_slow, r.freq_base));
        r.ext_factor = 1.0f;
        r.corr_dims[0] = lo > 0 ? lo : 0;
        r.corr_dims[1] = hi < (float)(hp->n_rot - 1) ? hi : (float)(hp->n_rot - 1);
    }
    return r;
}

ty_mat_home ty_layer_mat_home(const ty_hparams *hp, int kind) {
    static const char *const names[MAT_KINDS] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                 "ffn_gate", "ffn_up", "ffn_down"};
    const int64_t C = hp->n_embd, F = hp->n_ff, qd = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t n_in[MAT_KINDS] = {C, C, C, qd, C, C, F}, n_rows[MAT_KINDS] = {qd, kvd, kvd, C, F, F, C};
    ty_mat_home h = {names[kind], n_in[kind], 0, n_rows[kind], n_rows[kind], kind};
    if (hp->fused_qkv && kind <= MAT_V)
        h = (ty_mat_home){"attn_qkv", C, kind == MAT_Q ? 0 : kind == MAT_K ? qd : qd + kvd, n_rows[kind],
                           qd + 2 * kvd, MAT_Q};
    if (hp->fused_gate_up && (kind == MAT_GATE || kind == MAT_UP))
        h = (ty_mat_home){"ffn_up", C, kind == MAT_UP ? F : 0, F, 2 * F, MAT_GATE};
    return h;
}

static toy_status bind_layer(toy_model *m, int il) {
    const ty_hparams *hp = &m->hp;
    ty_layer *l = &m->layers[il];
    int64_t n_embd = hp->n_embd, q_rows = (int64_t)hp->n_head * hp->head_dim;
    int64_t kv_rows = (int64_t)hp->n_head_kv * hp->head_dim;
    char name[96];
#define NAME(fmt) (snprintf(name, sizeof name, "blk.%d." fmt, il), name)
    toy_status st;
    if ((st = bind_vector(m, NAME("attn_norm.weight"), n_embd, &l->attn_norm))) return st;
    if (hp->layer_norm && (st = bind_vector(m, NAME("attn_norm.bias"), n_embd, &l->attn_norm_b))) return st;
    if (hp->per_head_weights) {
        if ((st = bind_per_head(m, il, "attn_q", hp->n_head, n_embd, hp->head_dim, &l->wq))) return st;
        if ((st = bind_per_head(m, il, "attn_k", hp->n_head_kv, n_embd, hp->head_dim, &l->wk))) return st;
        if ((st = bind_per_head(m, il, "attn_v", hp->n_head_kv, n_embd, hp->head_dim, &l->wv))) return st;
    }
    /* the matrices but per-head ones (above) and, in a mixture of experts, the FFN's (below) */
    for (int k = hp->per_head_weights ? MAT_O : MAT_Q; k < (hp->n_expert ? MAT_GATE : MAT_KINDS); k++) {
        if (k == MAT_GATE && hp->ffn_no_gate) continue;
        const ty_mat_home h = ty_layer_mat_home(hp, k);
        ty_weight whole;
        snprintf(name, sizeof name, "blk.%d.%s.weight", il, h.tensor);
        if ((st = bind_matrix(m, name, h.n_in, h.n_out, 1, true, &whole))) return st;
        *ty_layer_mat(l, k) = weight_rows(&whole, h.row0, h.n_rows);
    }
    if (hp->qkv_bias && hp->per_head_weights) {
        if ((st = bind_per_head_bias(m, il, "attn_q", hp->n_head, hp->head_dim, &l->bq)) ||
            (st = bind_per_head_bias(m, il, "attn_k", hp->n_head_kv, hp->head_dim, &l->bk)) ||
            (st = bind_per_head_bias(m, il, "attn_v", hp->n_head_kv, hp->head_dim, &l->bv)))
            return st;
    } else if (hp->qkv_bias && hp->fused_qkv) { /* attn_qkv.bias: Q's, then K's, then V's */
        ty_vector b;
        if ((st = bind_vector(m, NAME("attn_qkv.bias"), q_rows + 2 * kv_rows, &b))) return st;
        l->bq = (ty_vector){b.data, q_rows};
        l->bk = (ty_vector){b.data + q_rows, kv_rows};
        l->bv = (ty_vector){b.data + q_rows + kv_rows, kv_rows};
    } else if (hp->qkv_bias) {
        if ((st = bind_vector(m, NAME("attn_q.bias"), q_rows, &l->bq))) return st;
        if ((st = bind_vector(m, NAME("attn_k.bias"), kv_rows, &l->bk))) return st;
        if ((st = bind_vector(m, NAME("attn_v.bias"), kv_rows, &l->bv))) return st;
    }
    if (hp->q_norm_len) {
        if ((st = bind_vector(m, NAME("attn_q_norm.weight"), hp->q_norm_len, &l->q_norm))) return st;
        if ((st = bind_vector(m, NAME("attn_k_norm.weight"), hp->k_norm_len, &l->k_norm))) return st;
    }
    if (hp->post_norms) {
        if ((st = bind_vector(m, NAME("post_attention_norm.weight"), n_embd, &l->post_attn_norm))) return st;
        if ((st = bind_vector(m, NAME("post_ffw_norm.weight"), n_embd, &l->post_ffn_norm))) return st;
    }
    if ((st = bind_vector(m, NAME("ffn_norm.weight"), n_embd, &l->ffn_norm))) return st;
    if (hp->layer_norm && (st = bind_vector(m, NAME("ffn_norm.bias"), n_embd, &l->ffn_norm_b))) return st;
    if (hp->mat_bias) {
        if ((st = bind_vector(m, NAME("attn_output.bias"), n_embd, &l->bo))) return st;
        if ((st = bind_vector(m, NAME("ffn_up.bias"), hp->n_ff, &l->b_up))) return st;
        if ((st = bind_vector(m, NAME("ffn_down.bias"), n_embd, &l->b_down))) return st;
    }
    if (hp->n_expert) {
        int64_t ne = hp->n_expert, ff = hp->n_ff_exp;
        if ((st = bind_matrix(m, NAME("ffn_gate_inp.weight"), n_embd, ne, 1, true, &l->ffn_gate_inp))) return st;
        if ((st = bind_matrix(m, NAME("ffn_gate_exps.weight"), n_embd, ff, ne, true, &l->ffn_gate_exps))) return st;
        if ((st = bind_matrix(m, NAME("ffn_up_exps.weight"), n_embd, ff, ne, true, &l->ffn_up_exps))) return st;
        if ((st = bind_matrix(m, NAME("ffn_down_exps.weight"), ff, n_embd, ne, true, &l->ffn_down_exps))) return st;
        if (hp->n_ff_shexp) {
            int64_t sf = hp->n_ff_shexp;
            if ((st = bind_matrix(m, NAME("ffn_gate_inp_shexp.weight"), n_embd, 1, 1, true, &l->ffn_gate_inp_shexp))) return st;
            if ((st = bind_matrix(m, NAME("ffn_gate_shexp.weight"), n_embd, sf, 1, true, &l->ffn_gate_shexp))) return st;
            if ((st = bind_matrix(m, NAME("ffn_up_shexp.weight"), n_embd, sf, 1, true, &l->ffn_up_shexp))) return st;
            if ((st = bind_matrix(m, NAME("ffn_down_shexp.weight"), sf, n_embd, 1, true, &l->ffn_down_shexp))) return st;
        }
    }
#undef NAME
    const int period = m->arch->swa_period; /* llama.cpp's swa patterns */
    const bool swa = hp->n_swa > 0 && (!period || il % period < period - 1);
    l->n_swa = swa ? hp->n_swa : 0;
    l->rope = layer_rope(m, swa);
    return TOY_OK;
}

const char *ty_model_rope_factors(const toy_model *m, int32_t n_ctx, const float **data) {
    const bool use_long = n_ctx > m->hp.n_ctx_orig;
    *data = m->rope_freqs.data;
    if (!m->rope_factors_long.data) return *data ? "rope_freqs.weight" : NULL;
    *data = use_long ? m->rope_factors_long.data : m->rope_factors_short.data;
    return use_long ? "rope_factors_long.weight" : "rope_factors_short.weight";
}

ty_weight ty_weight_expert(const ty_weight *w, int e) {
    ty_weight x = *w;
    x.data = w->data + (size_t)e * (size_t)w->n_rows * w->row_size;
    const uint8_t *packed = ty_weight_packed(w);
    x.packed = packed ? packed + (size_t)e * (size_t)packed_groups(w) * w->packed_group : NULL;
    return x;
}

static toy_status bind_tensors(toy_model *m) {
    ty_hparams *hp = &m->hp;
    const toy_gguf_tensor *emb = toy_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb) return ty_error(TOY_ERR_FORMAT, "%s: tensor token_embd.weight is missing", model_path(m));
    hp->n_vocab = (int32_t)emb->ne[1];
    if (emb->ne[1] > INT32_MAX || emb->ne[1] < 1)
        return ty_error(TOY_ERR_FORMAT, "%s: token_embd.weight has %lld rows", model_path(m),
                        (long long)emb->ne[1]);
    toy_status st = bind_matrix(m, "token_embd.weight", hp->n_embd, hp->n_vocab, 1, true, &m->token_embd);
    if (st) return st;
    if ((st = bind_vector(m, "output_norm.weight", hp->n_embd, &m->output_norm))) return st;
    if (hp->layer_norm && (st = bind_vector(m, "output_norm.bias", hp->n_embd, &m->output_norm_b))) return st;
    if (hp->pos_embd &&
        (st = bind_matrix(m, "position_embd.weight", hp->n_embd, hp->n_ctx_train, 1, true, &m->pos_embd)))
        return st;
    if ((st = bind_matrix(m, "output.weight", hp->n_embd, hp->n_vocab, 1, false, &m->output))) return st;
    /* llama3's frequency factors; LongRoPE's two sets (a context chooses one) */
    static const char *const factor_names[3] = {"rope_freqs.weight", "rope_factors_long.weight",
                                                "rope_factors_short.weight"};
    ty_vector *factor_vecs[3] = {&m->rope_freqs, &m->rope_factors_long, &m->rope_factors_short};
    for (int i = 0; i < 3; i++)
        if (toy_gguf_find_tensor(m->gguf, factor_names[i]) &&
            (st = bind_vector(m, factor_names[i], hp->n_rot / 2, factor_vecs[i])))
            return st;
    if (!m->rope_factors_long.data != !m->rope_factors_short.data)
        return ty_error(TOY_ERR_FORMAT, "%s: LongRoPE needs both rope_factors_long and rope_factors_short",
                        model_path(m));
    hp->tied_output = m->output.data == NULL;
    if (hp->tied_output) m->output = m->token_embd;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return ty_error(TOY_ERR_NOMEM, "no memory");
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = bind_layer(m, il))) return st;
    if (toy_vocab_n_tokens(m->vocab) != hp->n_vocab)
        return ty_error(TOY_ERR_FORMAT, "%s: tokenizer has %d tokens but token_embd.weight has %d rows",
                        model_path(m), toy_vocab_n_tokens(m->vocab), hp->n_vocab);
    return TOY_OK;
}

/* ---------------------------------------------------------------- huge pages
 * Decode streams every byte of the packed weights, and fewer TLB misses bring it closer
 * to the memory's bandwidth (TinyLlama Q4_K_M: 65 against 52 tokens/s on a Zen 5,
 * docs/performance.md). But asking for huge pages before packing makes packing wait for
 * them, and on a virtual machine fresh huge pages can take seconds where small pages
 * take a fraction of one. So the copies are packed in small pages, and then a thread of
 * idle priority (SCHED_IDLE: it runs only on CPUs nothing else wants) turns them into
 * huge pages one at a time (MADV_COLLAPSE: the same bytes at the same addresses, read by
 * products meanwhile as before). It collapses only between forward passes: a page being
 * copied stalls whoever touches it, and a request sent to a server just ready took twice
 * as long while the collapser ran beside it (TinyLlama Q8_0, 170 against 82 ms). Between
 * a decode's tokens one 2 MiB copy (a fraction of a millisecond) may still overlap the
 * next token. Where the kernel has no MADV_COLLAPSE, the pages are marked MADV_HUGEPAGE
 * for the kernel's own collapsing thread. toy_model_free stops it. */

#define HUGE_PAGE ((size_t)2 << 20)
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif

static toy_status add_region(toy_model *m, uint8_t *p, size_t bytes) {
    if (m->n_regions == m->cap_regions) {
        const int cap = m->cap_regions ? 2 * m->cap_regions : 64;
        struct packed_region *r = realloc(m->regions, (size_t)cap * sizeof *r);
        if (!r) return ty_error(TOY_ERR_NOMEM, "no memory");
        m->regions = r;
        m->cap_regions = cap;
    }
    m->regions[m->n_regions++] = (struct packed_region){p, bytes};
    return TOY_OK;
}

void ty_model_forward_begin(toy_model *m) {
    __atomic_add_fetch(&m->forwards, 1, __ATOMIC_SEQ_CST);
}

void ty_model_forward_end(toy_model *m) {
    if (__atomic_sub_fetch(&m->forwards, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&m->collapse_waiting, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&m->collapse_lock);
        pthread_cond_broadcast(&m->collapse_wake);
        pthread_mutex_unlock(&m->collapse_lock);
    }
}

/* Waits until no forward pass runs; false once toy_model_free asks the collapser to stop.
 * collapse_waiting is set before `forwards` is read, and ty_model_forward_end reads it
 * after its decrement (both sequentially consistent), so a last forward that ends
 * unseen by this check sees the flag and wakes it. */
static bool wait_for_idle(toy_model *m) {
    pthread_mutex_lock(&m->collapse_lock);
    __atomic_store_n(&m->collapse_waiting, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&m->forwards, __ATOMIC_SEQ_CST) > 0 && !__atomic_load_n(&m->collapse_stop, __ATOMIC_SEQ_CST))
        pthread_cond_wait(&m->collapse_wake, &m->collapse_lock);
    __atomic_store_n(&m->collapse_waiting, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&m->collapse_lock);
    return !__atomic_load_n(&m->collapse_stop, __ATOMIC_SEQ_CST);
}

static void *collapse_regions(void *arg) {
    toy_model *m = arg;
    const struct sched_param idle = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    bool collapse = true;
    for (int i = 0; i < m->n_regions; i++)
        for (size_t off = 0; off < m->regions[i].bytes; off += HUGE_PAGE) {
            if (!wait_for_idle(m)) return NULL;
            if (collapse && madvise(m->regions[i].p + off, HUGE_PAGE, MADV_COLLAPSE) && errno == EINVAL)
                collapse = false; /* no MADV_COLLAPSE here */
            if (!collapse) {
#ifdef MADV_HUGEPAGE
                madvise(m->regions[i].p + off, m->regions[i].bytes - off, MADV_HUGEPAGE);
#endif
                break;
            }
            __atomic_add_fetch(&m->collapse_pages, 1, __ATOMIC_RELAXED);
        }
    __atomic_store_n(&m->collapse_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void start_collapsing(toy_model *m) {
    if (m->n_regions && !m->collapser_started)
        m->collapser_started = pthread_create(&m->collapser, NULL, collapse_regions, m) == 0;
}

/* ---------------------------------------------------------------- packing */

typedef struct {
    const ty_weight *w;
    uint8_t *out;
    int64_t n_groups; /* per matrix */
    size_t per_mat;   /* packed bytes per matrix */
} pack_job;

/* groups [i0, i1) of the stacked matrices, counted across them */
static void pack_range(const void *ctx, int64_t i0, int64_t i1) {
    const pack_job *j = ctx;
    const ty_weight *w = j->w;
    const size_t mat_bytes = (size_t)w->n_rows * w->row_size;
    while (i0 < i1) {
        const int64_t e = i0 / j->n_groups, g0 = i0 % j->n_groups;
        const int64_t g1 = i1 - e * j->n_groups < j->n_groups ? i1 - e * j->n_groups : j->n_groups;
        ty_pack_groups(w->type, w->data + (size_t)e * mat_bytes, w->row_size, w->n_rows, w->n_cols, g0, g1,
                       j->out + (size_t)e * j->per_mat);
        i0 += g1 - g0;
    }
}

/* Packs n_mats stacked matrices of w (experts; 1 otherwise) on the pool. */
static toy_status pack_weight(toy_model *m, ty_weight *w, int64_t n_mats, ty_pool *pool) {
    if (!w->data || w->n_parts > 1 || w->packed || !ty_packed_get(w->type)) return TOY_OK;
    const size_t group = ty_packed_group_size(w->type, w->n_cols);
    if (!group) return TOY_OK;
    const size_t per_mat = (size_t)packed_groups(w) * group;
    size_t bytes;
    if (per_mat / group != (size_t)packed_groups(w) || __builtin_mul_overflow(per_mat, (size_t)n_mats, &bytes) ||
        bytes > SIZE_MAX - 63)
        return ty_error(TOY_ERR_NOMEM, "%s: packed weights too large", model_path(m));
    /* From a 2 MiB boundary, so that its whole 2 MiB pages can become huge ones after
     * packing ("huge pages" below). The tail past the last whole huge page keeps small
     * pages (a huge page there would hold up to 2 MiB that is never used). */
    const size_t huge = HUGE_PAGE;
    void *mem = NULL;
    if (posix_memalign(&mem, bytes >= huge ? huge : 64, (bytes + 63) / 64 * 64))
        return ty_error(TOY_ERR_NOMEM, "%s: no memory for %zu bytes of packed weights", model_path(m), bytes);
    uint8_t *p = mem;
    toy_status st = own(m, p);
    if (!st && bytes >= huge) st = add_region(m, p, bytes / huge * huge);
    if (st) return st;
    const size_t mat_bytes = (size_t)w->n_rows * w->row_size;
    const pack_job job = {w, p, packed_groups(w), per_mat};
    ty_pool_for(pool, n_mats * job.n_groups, 4, pack_range, &job); /* 4 groups: 64 rows a range at least */
    /* the file's pages of this matrix are read no more by products (only by row
     * lookups: the embedding, tied to the output, refills from the page cache) */
    ty_gguf_drop_pages(m->gguf, w->data, mat_bytes * (size_t)n_mats);
    w->packed_group = group;
    __atomic_store_n(&w->packed, p, __ATOMIC_RELEASE); /* the groups, then their pointer */
    m->packed_bytes += bytes;
    return TOY_OK;
}

toy_status ty_model_pack(toy_model *m, int n_threads) {
    pthread_mutex_lock(&m->pack_lock);
    toy_status st = TOY_OK;
    ty_pool *pool = NULL;
    if (!m->packed && n_threads > 1 && !(pool = ty_pool_new(n_threads)))
        st = ty_error(TOY_ERR_NOMEM, "cannot start %d threads", n_threads);
    if (!m->packed && !st) {
        const ty_hparams *hp = &m->hp;
        for (int il = m->layer_first; il < m->layer_end && !st; il++) { /* this process's stage */
            ty_layer *l = &m->layers[il];
            ty_weight *dense[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down,
                                   &l->ffn_gate_inp, &l->ffn_gate_inp_shexp, &l->ffn_gate_shexp,
                                   &l->ffn_up_shexp, &l->ffn_down_shexp};
            for (size_t i = 0; i < sizeof dense / sizeof dense[0] && !st; i++) st = pack_weight(m, dense[i], 1, pool);
            ty_weight *experts[] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
            for (size_t i = 0; i < 3 && !st; i++) st = pack_weight(m, experts[i], hp->n_expert, pool);
        }
        if (!st && m->stage == m->n_stages - 1) st = pack_weight(m, &m->output, 1, pool);
        m->packed = !st;
        if (!st) start_collapsing(m);
    }
    ty_pool_free(pool);
    pthread_mutex_unlock(&m->pack_lock);
    return st;
}

toy_status toy_model_pack(toy_model *m, int n_threads) {
    if (n_threads < 1) return ty_error(TOY_ERR_INVALID, "toy_model_pack: %d threads", n_threads);
    const bool pipelined = m->pipe_id >= 0;
    if (pipelined) ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_MODEL_PACK, .id = m->pipe_id, .x = {n_threads}});
    const toy_status st = ty_model_pack(m, n_threads);
    return pipelined ? ty_pipeline_agree(st) : st;
}

/* ---------------------------------------------------------------- public */

void toy_model_params_init(toy_model_params *params, size_t size) {
    const toy_model_params defaults = {.size = sizeof defaults, .use_mmap = true};
    ty_params_init(params, size, &defaults, sizeof defaults);
}

toy_status toy_model_load(const char *path, toy_model **out) { return toy_model_load_with(path, NULL, out); }

toy_status ty_model_from_gguf(toy_gguf *gguf, void *memory, toy_model **out) {
    *out = NULL;
    toy_model *m = calloc(1, sizeof *m);
    if (!m) {
        toy_gguf_close(gguf);
        free(memory);
        return ty_error(TOY_ERR_NOMEM, "%s: no memory", toy_gguf_path(gguf));
    }
    pthread_mutex_init(&m->pack_lock, NULL);
    pthread_mutex_init(&m->collapse_lock, NULL);
    pthread_cond_init(&m->collapse_wake, NULL);
    m->gguf = gguf;
    m->memory = memory;
    m->n_stages = 1;
    m->pipe_id = -1;
    const char *path = toy_gguf_path(gguf);
    toy_status st = read_hparams(m, path);
    if (!st && (st = toy_vocab_load(m->gguf, &m->vocab))) ty_error_wrap(st, "%s", path);
    if (!st) st = bind_tensors(m);
    m->layer_end = m->hp.n_layer;
    if (st) {
        toy_model_free(m);
        return st;
    }
    *out = m;
    return TOY_OK;
}

/* In a pipeline: this process's stage of the model, which rank 0 has every rank load. */
static toy_status join_pipeline(toy_model *m, const char *path, const toy_model_params *p) {
    const int n = ty_pipeline_size(), rank = ty_pipeline_rank();
    int32_t *first = malloc(((size_t)n + 1) * sizeof *first);
    if (!first) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_status st = ty_pipeline_split(m->gguf, m->hp.n_layer, m->hp.tied_output, p->split, p->split ? p->n_split : 0,
                                      first);
    if (!st) {
        m->layer_first = first[rank];
        m->layer_end = first[rank + 1];
        m->stage = rank;
        m->n_stages = n;
    }
    free(first);
    if (st) return st;
    if ((m->pipe_id = ty_pipeline_add(PIPE_MODELS, m)) < 0)
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: too many models in one pipeline", path);
    if (rank != 0) return TOY_OK;
    /* the others load it too: the path, then the split */
    const size_t path_len = strlen(path) + 1, n_split = p->split ? (size_t)p->n_split : 0;
    uint8_t *payload = malloc(path_len + n_split * sizeof(int32_t));
    if (!payload) return ty_error(TOY_ERR_NOMEM, "no memory");
    memcpy(payload, path, path_len);
    if (n_split) memcpy(payload + path_len, p->split, n_split * sizeof(int32_t));
    ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_MODEL_LOAD, .id = m->pipe_id, .x = {p->use_mmap, (int64_t)n_split, (int64_t)path_len},
                                    .payload = payload, .len = (int64_t)(path_len + n_split * sizeof(int32_t))});
    free(payload);
    return ty_pipeline_agree(TOY_OK);
}

toy_status toy_model_load_with(const char *path, const toy_model_params *params, toy_model **out) {
    *out = NULL;
    toy_model_params p = toy_model_default_params();
    if (params && ty_params_read(&p, sizeof p, params, "toy_model_params")) return TOY_ERR_INVALID;
    if (p.split && !ty_pipeline_on())
        return ty_error(TOY_ERR_INVALID, "%s: a split into stages is for a pipeline of processes (mpirun -np N)", path);
    toy_gguf *g;
    toy_status st = p.use_mmap ? toy_gguf_open(path, &g) : toy_gguf_open_read(path, &g);
    if (!st) st = ty_model_from_gguf(g, NULL, out);
    if (!st && ty_pipeline_on() && (st = join_pipeline(*out, path, &p))) {
        toy_model_free(*out);
        *out = NULL;
    }
    return st;
}

toy_status toy_model_save(const toy_model *m, const char *path) {
    const toy_gguf *g = m->gguf;
    toy_gguf_writer *w = toy_gguf_writer_new();
    if (!w) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_status st = TOY_OK;
    for (int64_t i = 0; !st && i < toy_gguf_n_kv(g); i++) st = toy_gguf_writer_set_value(w, toy_gguf_key(g, i), toy_gguf_kv(g, i));
    for (int64_t i = 0; !st && i < toy_gguf_n_tensors(g); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        st = toy_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims ? t->n_dims : 1, t->ne, t->data);
    }
    if (!st) st = toy_gguf_writer_write(w, path);
    toy_gguf_writer_free(w);
    return st;
}

void toy_model_free(toy_model *m) {
    if (!m) return;
    if (m->pipe_id >= 0) {
        ty_pipeline_remove(PIPE_MODELS, m->pipe_id);
        if (ty_pipeline_rank() == 0) ty_pipeline_send(&(ty_pipe_msg){.cmd = PIPE_MODEL_FREE, .id = m->pipe_id});
    }
    if (m->collapser_started) {
        pthread_mutex_lock(&m->collapse_lock);
        __atomic_store_n(&m->collapse_stop, 1, __ATOMIC_SEQ_CST);
        pthread_cond_broadcast(&m->collapse_wake);
        pthread_mutex_unlock(&m->collapse_lock);
        pthread_join(m->collapser, NULL);
    }
    free(m->regions);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    toy_vocab_free(m->vocab);
    toy_gguf_close(m->gguf);
    free(m->memory);
    pthread_mutex_destroy(&m->pack_lock);
    pthread_mutex_destroy(&m->collapse_lock);
    pthread_cond_destroy(&m->collapse_wake);
    free(m);
}

const toy_vocab *toy_model_vocab(const toy_model *m) { return m->vocab; }

toy_status toy_model_mlock(toy_model *m) { return toy_gguf_mlock(m->gguf); }

/* The bytes a product with the matrix reads: its packed copy where it has one. */
static uint64_t weight_bytes(const ty_weight *w) {
    if (ty_weight_packed(w)) return (uint64_t)packed_groups(w) * w->packed_group;
    return w->data || w->n_parts > 1 ? (uint64_t)w->n_rows * w->row_size : 0;
}

uint64_t toy_model_weight_bytes_per_token(const toy_model *m) {
    const ty_hparams *hp = &m->hp;
    uint64_t total = weight_bytes(&m->output) + m->token_embd.row_size;
    for (int il = 0; il < hp->n_layer; il++) {
        const ty_layer *l = &m->layers[il];
        total += weight_bytes(&l->wq) + weight_bytes(&l->wk) + weight_bytes(&l->wv) +
                 weight_bytes(&l->wo) + weight_bytes(&l->ffn_gate) + weight_bytes(&l->ffn_up) +
                 weight_bytes(&l->ffn_down) + weight_bytes(&l->ffn_gate_inp) +
                 weight_bytes(&l->ffn_gate_inp_shexp) + weight_bytes(&l->ffn_gate_shexp) +
                 weight_bytes(&l->ffn_up_shexp) + weight_bytes(&l->ffn_down_shexp);
        /* one expert matrix per used expert (stacks bind n_rows of one expert) */
        total += (uint64_t)hp->n_expert_used *
                 (weight_bytes(&l->ffn_gate_exps) + weight_bytes(&l->ffn_up_exps) +
                  weight_bytes(&l->ffn_down_exps));
    }
    return total;
}
const toy_gguf *toy_model_gguf(const toy_model *m) { return m->gguf; }

/* ---------------------------------------------------------------- its chat template */

static const char *token_text(const toy_vocab *v, int32_t id) {
    const char *s = id >= 0 ? toy_vocab_token_text(v, id) : NULL;
    return s ? s : "";
}

toy_status toy_model_chat_template(const toy_model *model, const char *name, toy_chat_template **out) {
    if (!out) return ty_error(TOY_ERR_INVALID, "toy_model_chat_template: out is NULL");
    *out = NULL;
    if (!model) return ty_error(TOY_ERR_INVALID, "toy_model_chat_template: no model");
    const toy_gguf *g = toy_model_gguf(model);
    char key[256];
    if (name && *name) snprintf(key, sizeof key, "tokenizer.chat_template.%s", name);
    else snprintf(key, sizeof key, "tokenizer.chat_template");
    const char *text;
    size_t len;
    if (toy_gguf_get_str(g, key, &text, &len))
        return ty_error(TOY_ERR_NOT_FOUND, "%s: no %s", toy_gguf_path(g), key);
    char *z = strndup(text, len);
    if (!z) return ty_error(TOY_ERR_NOMEM, "no memory");
    if (strlen(z) != len) {
        free(z);
        return ty_error(TOY_ERR_FORMAT, "%s: %s holds a NUL byte", toy_gguf_path(g), key);
    }
    const toy_vocab *v = toy_model_vocab(model);
    const toy_status st = toy_chat_template_new(z, token_text(v, toy_vocab_bos(v)), token_text(v, toy_vocab_eos(v)), out);
    free(z);
    if (st) return ty_error_wrap(st, "%s: %s", toy_gguf_path(g), key);
    /* the default template carries the variant for requests with tools, where there is one */
    toy_chat_template *tool_use = NULL;
    if (!(name && *name) && !toy_gguf_get_str(g, "tokenizer.chat_template.tool_use", &text, &len)) {
        const toy_status tst = toy_model_chat_template(model, "tool_use", &tool_use);
        if (tst) {
            toy_chat_template_free(*out);
            *out = NULL;
            return tst;
        }
        ty_chat_template_set_tool_use(*out, tool_use);
    }
    return TOY_OK;
}
int32_t toy_model_n_vocab(const toy_model *m) { return m->hp.n_vocab; }
int32_t toy_model_n_ctx_train(const toy_model *m) { return m->hp.n_ctx_train; }
int32_t toy_model_n_embd(const toy_model *m) { return m->hp.n_embd; }
toy_pooling toy_model_pooling(const toy_model *m) { return m->hp.pooling; }
int32_t toy_model_n_layer(const toy_model *m) { return m->hp.n_layer; }
int32_t toy_model_n_head(const toy_model *m) { return m->hp.n_head; }
int32_t toy_model_n_head_kv(const toy_model *m) { return m->hp.n_head_kv; }
