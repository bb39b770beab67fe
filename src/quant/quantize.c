/* quantize.c — converting a GGUF model to another weight type, tensor by tensor.
 *
 * The mixes (Q4_K_M, Q3_K_M, ...) give some tensors more bits than others. The choices
 * follow llama.cpp's llama-quantize (llama_tensor_get_type) so that a file toy writes
 * has the same per-tensor types as one made by llama.cpp from the same input: the
 * output projection at Q6_K, attn_v and ffn_down of selected layers at higher
 * precision in the _M mixes, fallbacks where a row is not a whole number of 256-blocks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "params.h"
#include "quant.h"
#include "quantize.h"

/* ---------------------------------------------------------------- file types */

static const struct {
    const char *name;
    int ftype;
    int base_type; /* the type most tensors get */
} ftypes[] = {
    {"F32", TOY_FTYPE_ALL_F32, TOY_TYPE_F32},
    {"F16", TOY_FTYPE_MOSTLY_F16, TOY_TYPE_F16},
    {"BF16", TOY_FTYPE_MOSTLY_BF16, TOY_TYPE_BF16},
    {"Q4_0", TOY_FTYPE_MOSTLY_Q4_0, TOY_TYPE_Q4_0},
    {"Q4_1", TOY_FTYPE_MOSTLY_Q4_1, TOY_TYPE_Q4_1},
    {"Q5_0", TOY_FTYPE_MOSTLY_Q5_0, TOY_TYPE_Q5_0},
    {"Q5_1", TOY_FTYPE_MOSTLY_Q5_1, TOY_TYPE_Q5_1},
    {"Q8_0", TOY_FTYPE_MOSTLY_Q8_0, TOY_TYPE_Q8_0},
    {"Q2_K", TOY_FTYPE_MOSTLY_Q2_K, TOY_TYPE_Q2_K},
    {"Q3_K_S", TOY_FTYPE_MOSTLY_Q3_K_S, TOY_TYPE_Q3_K},
    {"Q3_K_M", TOY_FTYPE_MOSTLY_Q3_K_M, TOY_TYPE_Q3_K},
    {"Q3_K_L", TOY_FTYPE_MOSTLY_Q3_K_L, TOY_TYPE_Q3_K},
    {"Q4_K_S", TOY_FTYPE_MOSTLY_Q4_K_S, TOY_TYPE_Q4_K},
    {"Q4_K_M", TOY_FTYPE_MOSTLY_Q4_K_M, TOY_TYPE_Q4_K},
    {"Q5_K_S", TOY_FTYPE_MOSTLY_Q5_K_S, TOY_TYPE_Q5_K},
    {"Q5_K_M", TOY_FTYPE_MOSTLY_Q5_K_M, TOY_TYPE_Q5_K},
    {"Q6_K", TOY_FTYPE_MOSTLY_Q6_K, TOY_TYPE_Q6_K},
    {"IQ4_NL", TOY_FTYPE_MOSTLY_IQ4_NL, TOY_TYPE_IQ4_NL},
    /* llama-quantize's aliases */
    {"Q3_K", TOY_FTYPE_MOSTLY_Q3_K_M, TOY_TYPE_Q3_K},
    {"Q4_K", TOY_FTYPE_MOSTLY_Q4_K_M, TOY_TYPE_Q4_K},
    {"Q5_K", TOY_FTYPE_MOSTLY_Q5_K_M, TOY_TYPE_Q5_K},
};

#define N_FTYPES (int)(sizeof ftypes / sizeof ftypes[0])

toy_ftype toy_ftype_from_name(const char *name) {
    for (int i = 0; i < N_FTYPES; i++)
        if (strcasecmp(ftypes[i].name, name) == 0) return (toy_ftype)ftypes[i].ftype;
    return TOY_FTYPE_NONE;
}

const char *toy_ftype_name(toy_ftype ftype) {
    for (int i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype) return ftypes[i].name;
    return NULL;
}

static int ftype_base_type(int ftype) {
    for (int i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == ftype) return ftypes[i].base_type;
    return -1;
}

/* ---------------------------------------------------------------- the mix */

/* What the mix rules need to know about the model. */
typedef struct {
    char arch[64];
    int n_layer;
    int n_gqa;
    int n_expert;
    bool is_70b;     /* llama.cpp's LLM_TYPE_70B: 80 layers with GQA */
    bool has_output; /* output.weight present (else token_embd is the output) */
    int n_attention_wv;
    /* counters over the tensors in llama.cpp's order */
    int i_attention_wv;
    int i_ffn_down;
} mix_state;

static bool contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* llama.cpp's use_more_bits: the first and last eighth of the layers and every third
 * layer in between. */
static bool use_more_bits(int i_layer, int n_layer) {
    return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

/* ggml_n_dims: trailing dimensions of size 1 do not count. */
static int effective_dims(const toy_gguf_tensor *t) {
    for (int d = TOY_MAX_DIMS - 1; d >= 1; d--)
        if (t->ne[d] > 1) return d + 1;
    return 1;
}

/* Whether llama-quantize would quantize this tensor at all. */
static bool tensor_is_quantizable(const toy_gguf_tensor *t) {
    const char *name = t->name;
    size_t n = strlen(name);
    if (n < 6 || strcmp(name + n - 6, "weight") != 0) return false;
    if (effective_dims(t) < 2) return false;
    static const char *const keep[] = {
        "_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d.weight", "shortconv.conv.weight", "time_mix_first.weight",
        "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
        "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (contains(name, keep[i])) return false;
    return strcmp(name, "position_embd.weight") != 0 && strcmp(name, "token_types.weight") != 0;
}

/* The layer of a "blk.N." tensor, or -1. */
static int tensor_layer(const char *name) {
    int layer;
    if (sscanf(name, "blk.%d.", &layer) == 1 && layer >= 0) return layer;
    return -1;
}

/* llama.cpp's llama_tensor_get_type for the mixes toy offers. */
static int mix_tensor_type(mix_state *s, int ftype, const toy_gguf_tensor *t, int type) {
    const char *name = t->name;
    bool falcon = strcmp(s->arch, "falcon") == 0;
    int64_t nx = t->ne[0];

    if (strcmp(name, "output.weight") == 0 || (!s->has_output && strcmp(name, "token_embd.weight") == 0)) {
        if (falcon || nx % toy_type_block_size(type) != 0) type = TOY_TYPE_Q8_0;
        else if (type != TOY_TYPE_Q8_0) type = TOY_TYPE_Q6_K;
    } else if (strcmp(name, "token_embd.weight") == 0) {
        /* only the IQ1/IQ2/IQ3 mixes change it */
    } else if (contains(name, "attn_v.weight")) {
        if (ftype == TOY_FTYPE_MOSTLY_Q2_K)
            type = s->n_gqa >= 4 ? TOY_TYPE_Q4_K : TOY_TYPE_Q3_K;
        else if (ftype == TOY_FTYPE_MOSTLY_Q3_K_M)
            type = s->i_attention_wv < 2 ? TOY_TYPE_Q5_K : TOY_TYPE_Q4_K;
        else if (ftype == TOY_FTYPE_MOSTLY_Q3_K_L)
            type = TOY_TYPE_Q5_K;
        else if (ftype == TOY_FTYPE_MOSTLY_IQ4_NL && s->n_gqa >= 4)
            type = TOY_TYPE_Q5_K;
        else if ((ftype == TOY_FTYPE_MOSTLY_Q4_K_M || ftype == TOY_FTYPE_MOSTLY_Q5_K_M) &&
                 use_more_bits(s->i_attention_wv, s->n_attention_wv))
            type = TOY_TYPE_Q6_K;
        else if (ftype == TOY_FTYPE_MOSTLY_Q4_K_S && s->i_attention_wv < 4)
            type = TOY_TYPE_Q5_K;
        /* 70B: attn_v is 8x smaller than attn_q, so more bits cost little */
        if (s->is_70b && (type == TOY_TYPE_Q3_K || type == TOY_TYPE_Q4_K)) type = TOY_TYPE_Q5_K;
        if (s->n_expert == 8) type = TOY_TYPE_Q8_0;
        s->i_attention_wv++;
    } else if (contains(name, "attn_k.weight")) {
        if (s->n_expert == 8) type = TOY_TYPE_Q8_0;
    } else if (contains(name, "ffn_down")) {
        /* llama.cpp counts ffn_down tensors, except in MoE models where it parses the
         * layer from the name; the two agree for files whose tensors are in order. */
        int i_layer = s->n_expert > 1 ? tensor_layer(name) : s->i_ffn_down;
        int n_layer = s->n_layer;
        if (i_layer < 0) i_layer = s->i_ffn_down;
        if (ftype == TOY_FTYPE_MOSTLY_Q2_K) {
            type = TOY_TYPE_Q3_K;
        } else if (ftype == TOY_FTYPE_MOSTLY_Q3_K_M) {
            type = i_layer < n_layer / 16 ? TOY_TYPE_Q5_K
                   : !falcon || use_more_bits(i_layer, n_layer) ? TOY_TYPE_Q4_K
                                                               : TOY_TYPE_Q3_K;
        } else if (ftype == TOY_FTYPE_MOSTLY_Q3_K_L) {
            type = falcon ? TOY_TYPE_Q4_K : TOY_TYPE_Q5_K;
        } else if (ftype == TOY_FTYPE_MOSTLY_Q4_K_M) {
            if (falcon)
                type = i_layer < n_layer / 16 ? TOY_TYPE_Q6_K
                       : use_more_bits(i_layer, n_layer) ? TOY_TYPE_Q5_K
                                                         : TOY_TYPE_Q4_K;
            else if (use_more_bits(i_layer, n_layer))
                type = TOY_TYPE_Q6_K;
        } else if (i_layer < n_layer / 8 && ftype == TOY_FTYPE_MOSTLY_IQ4_NL) {
            type = TOY_TYPE_Q5_K;
        } else if (ftype == TOY_FTYPE_MOSTLY_Q5_K_M && use_more_bits(i_layer, n_layer)) {
            type = TOY_TYPE_Q6_K;
        } else if (ftype == TOY_FTYPE_MOSTLY_Q4_K_S && !falcon && i_layer < n_layer / 8) {
            type = TOY_TYPE_Q5_K;
        }
        s->i_ffn_down++;
    } else if (contains(name, "attn_output.weight")) {
        if (!falcon) {
            if (s->n_expert == 8) {
                if (ftype == TOY_FTYPE_MOSTLY_Q2_K || ftype == TOY_FTYPE_MOSTLY_Q3_K_S ||
                    ftype == TOY_FTYPE_MOSTLY_Q3_K_M || ftype == TOY_FTYPE_MOSTLY_IQ4_NL ||
                    ftype == TOY_FTYPE_MOSTLY_Q4_K_S || ftype == TOY_FTYPE_MOSTLY_Q4_K_M)
                    type = TOY_TYPE_Q5_K;
            } else {
                if (ftype == TOY_FTYPE_MOSTLY_Q2_K) type = TOY_TYPE_Q3_K;
                else if (ftype == TOY_FTYPE_MOSTLY_Q3_K_M) type = TOY_TYPE_Q4_K;
                else if (ftype == TOY_FTYPE_MOSTLY_Q3_K_L) type = TOY_TYPE_Q5_K;
            }
        } else if (ftype == TOY_FTYPE_MOSTLY_Q3_K_L) {
            type = TOY_TYPE_Q4_K;
        }
    } else if (contains(name, "attn_qkv.weight")) {
        if (ftype == TOY_FTYPE_MOSTLY_Q3_K_M || ftype == TOY_FTYPE_MOSTLY_Q3_K_L)
            type = TOY_TYPE_Q4_K;
        else if (ftype == TOY_FTYPE_MOSTLY_Q4_K_M)
            type = TOY_TYPE_Q5_K;
        else if (ftype == TOY_FTYPE_MOSTLY_Q5_K_M)
            type = TOY_TYPE_Q6_K;
    }
    return type;
}

/* When a row is not a whole number of blocks, llama.cpp falls back to a 32-block type
 * of similar size, and to F16 if even that does not fit. */
static int fallback_type(const toy_gguf_tensor *t, int type) {
    if (t->ne[0] % toy_type_block_size(type) == 0) return type;
    switch (type) {
    case TOY_TYPE_Q2_K:
    case TOY_TYPE_Q3_K:
    case TOY_TYPE_IQ4_XS: type = TOY_TYPE_IQ4_NL; break;
    case TOY_TYPE_Q4_K: type = TOY_TYPE_Q5_0; break;
    case TOY_TYPE_Q5_K: type = TOY_TYPE_Q5_1; break;
    case TOY_TYPE_Q6_K: type = TOY_TYPE_Q8_0; break;
    default: break;
    }
    if (t->ne[0] % toy_type_block_size(type) != 0) type = TOY_TYPE_F16;
    return type;
}

static bool type_is_quantized(int type) {
    return type != TOY_TYPE_F32 && type != TOY_TYPE_F16 && type != TOY_TYPE_BF16;
}

/* ---------------------------------------------------------------- model facts */

static int64_t arch_int(const toy_gguf *g, const char *arch, const char *suffix, int64_t def) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const toy_gguf_value *v = toy_gguf_get(g, key);
    if (!v) return def;
    int64_t x;
    if (toy_gguf_value_type(v) == TOY_GGUF_ARRAY) { /* per-layer values: take layer 0 */
        if (toy_gguf_array_len(v) == 0 || toy_gguf_array_i64(v, 0, &x)) return def;
        return x;
    }
    return toy_gguf_value_i64(v, &x) ? def : x;
}

void ty_quant_shape_from_gguf(const toy_gguf *g, ty_quant_shape *shape) {
    memset(shape, 0, sizeof *shape);
    const char *arch;
    size_t len;
    if (toy_gguf_get_str(g, "general.architecture", &arch, &len) == TOY_OK && len < sizeof shape->arch)
        memcpy(shape->arch, arch, len); /* zero-terminated by the memset */
    int max_layer = -1;
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
        int l = tensor_layer(toy_gguf_tensor_at(g, i)->name);
        if (l > max_layer) max_layer = l;
    }
    shape->n_layer = (int)arch_int(g, shape->arch, "block_count", max_layer + 1);
    shape->n_head = (int)arch_int(g, shape->arch, "attention.head_count", 0);
    shape->n_head_kv = (int)arch_int(g, shape->arch, "attention.head_count_kv", shape->n_head);
    shape->n_expert = (int)arch_int(g, shape->arch, "expert_count", 0);
}

static void mix_state_init(mix_state *s, const ty_quant_shape *shape, const toy_gguf_tensor *tensors,
                           int64_t n) {
    memset(s, 0, sizeof *s);
    memcpy(s->arch, shape->arch, sizeof s->arch);
    for (int64_t i = 0; i < n; i++) {
        const char *name = tensors[i].name;
        if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight") ||
            contains(name, "attn_kv_b.weight"))
            s->n_attention_wv++;
        if (strcmp(name, "output.weight") == 0) s->has_output = true;
    }
    s->n_layer = shape->n_layer;
    s->n_gqa = shape->n_head_kv > 0 ? shape->n_head / shape->n_head_kv : 1;
    s->n_expert = shape->n_expert;
    s->is_70b = strcmp(s->arch, "llama") == 0 && s->n_layer == 80 && shape->n_head != shape->n_head_kv;
}

/* ---------------------------------------------------------------- conversion */

typedef struct {
    const char *name;
    int64_t n_cols, n_rows;
    ty_row_source source;
    void *user;
    int type_out;
    uint8_t *out;
    size_t row_out;
    int n_threads;
    int thread;
    toy_status status;
} convert_job;

static void *convert_rows(void *arg) {
    convert_job *job = arg;
    const ty_type_traits *out = ty_type_traits_get(job->type_out);
    float *row = malloc((size_t)(job->n_cols ? job->n_cols : 1) * sizeof *row);
    if (!row) {
        job->status = TOY_ERR_NOMEM;
        return NULL;
    }
    /* rows are split into contiguous ranges, so results do not depend on threads */
    int64_t per = (job->n_rows + job->n_threads - 1) / job->n_threads;
    int64_t r0 = per * job->thread, r1 = r0 + per < job->n_rows ? r0 + per : job->n_rows;
    for (int64_t r = r0; r < r1; r++) {
        job->source(job->user, r, row);
        out->from_float(row, job->out + (size_t)r * job->row_out, job->n_cols);
    }
    free(row);
    return NULL;
}

toy_status ty_quantize_rows(const char *name, int64_t n_cols, int64_t n_rows,
                            ty_row_source source, void *user, int type_out, int n_threads,
                            uint8_t **out, size_t *out_size) {
    const ty_type_traits *tr = ty_type_traits_get(type_out);
    if (!tr || !tr->from_float)
        return ty_error(TOY_ERR_UNSUPPORTED, "tensor '%s': cannot quantize to type %s", name,
                        tr ? tr->name : "?");
    convert_job base = {.name = name, .n_cols = n_cols, .n_rows = n_rows, .source = source,
                        .user = user, .type_out = type_out};
    toy_status st = toy_type_row_size(type_out, n_cols, &base.row_out);
    if (!st && ty_mul_overflows(base.row_out, (size_t)n_rows, out_size))
        st = ty_error(TOY_ERR_INVALID, "tensor '%s' is too large", name);
    if (st) return ty_error_wrap(st, "tensor '%s'", name);
    *out = malloc(*out_size ? *out_size : 1);
    if (!*out) return ty_error(TOY_ERR_NOMEM, "tensor '%s': no memory for %zu bytes", name, *out_size);

    base.out = *out;
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    if (n_threads > n_rows) n_threads = n_rows > 0 ? (int)n_rows : 1;
    base.n_threads = n_threads;
    convert_job jobs[256];
    pthread_t threads[256];
    bool started[256] = {false};
    for (int i = 0; i < n_threads; i++) {
        jobs[i] = base;
        jobs[i].thread = i;
        if (i > 0) started[i] = pthread_create(&threads[i], NULL, convert_rows, &jobs[i]) == 0;
    }
    convert_rows(&jobs[0]);
    for (int i = 1; i < n_threads; i++) {
        if (started[i]) pthread_join(threads[i], NULL);
        else convert_rows(&jobs[i]); /* no thread: its share runs here */
    }
    for (int i = 0; i < n_threads; i++)
        if (jobs[i].status) {
            free(*out);
            *out = NULL;
            return ty_error(jobs[i].status, "tensor '%s': no memory", name);
        }
    return TOY_OK;
}

typedef struct {
    const toy_gguf_tensor *t;
    const ty_type_traits *in;
    size_t row_in;
} tensor_rows;

static void dequantized_row(void *user, int64_t r, float *out) {
    const tensor_rows *s = user;
    s->in->to_float((const uint8_t *)s->t->data + (size_t)r * s->row_in, out, s->t->ne[0]);
}

static toy_status convert_tensor(const toy_gguf_tensor *t, int type_out, int n_threads,
                                 uint8_t **out, size_t *out_size) {
    tensor_rows src = {t, ty_type_traits_get(t->type), 0};
    if (!src.in->to_float)
        return ty_error(TOY_ERR_UNSUPPORTED, "tensor '%s': cannot convert from type %s",
                        t->name, src.in->name);
    toy_status st = toy_type_row_size(t->type, t->ne[0], &src.row_in);
    if (st) return ty_error_wrap(st, "tensor '%s'", t->name);
    int64_t n_rows = t->ne[0] ? toy_tensor_nelements(t) / t->ne[0] : 0;
    return ty_quantize_rows(t->name, t->ne[0], n_rows, dequantized_row, &src, type_out, n_threads,
                            out, out_size);
}

/* ---------------------------------------------------------------- the file */

/* llama.cpp's weight_name_comparer: by layer (tensors outside blk.N first), then by
 * name. Its quantizer walks and writes the tensors in this order. */
static int cmp_tensor_order(const void *a, const void *b) {
    const char *x = (*(const toy_gguf_tensor *const *)a)->name;
    const char *y = (*(const toy_gguf_tensor *const *)b)->name;
    int lx = tensor_layer(x), ly = tensor_layer(y);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x, y);
}

toy_status ty_quantize_plan(const ty_quant_shape *shape, const toy_gguf_tensor *tensors,
                            int64_t n, int ftype, bool pure, int64_t *order, int *types) {
    int base_type = ftype_base_type(ftype);
    if (base_type < 0) return ty_error(TOY_ERR_INVALID, "unknown file type %d", ftype);
    const toy_gguf_tensor **sorted = malloc((size_t)(n ? n : 1) * sizeof *sorted);
    if (!sorted) return ty_error(TOY_ERR_NOMEM, "no memory");
    for (int64_t i = 0; i < n; i++) sorted[i] = &tensors[i];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_tensor_order);
    mix_state mix;
    mix_state_init(&mix, shape, tensors, n);
    for (int64_t k = 0; k < n; k++) {
        const toy_gguf_tensor *t = sorted[k];
        int type = t->type;
        if (tensor_is_quantizable(t)) {
            type = base_type;
            if (type_is_quantized(base_type)) {
                if (!pure) type = mix_tensor_type(&mix, ftype, t, type);
                type = fallback_type(t, type);
            }
        }
        order[k] = t - tensors;
        types[k] = type;
    }
    free(sorted);
    return TOY_OK;
}

void toy_quantize_params_init(toy_quantize_params *params, size_t size) {
    const toy_quantize_params defaults = {.size = sizeof defaults, .n_threads = 1};
    ty_params_init(params, size, &defaults, sizeof defaults);
}

toy_status toy_quantize_file(const char *in_path, const char *out_path, toy_ftype ftype,
                             const toy_quantize_params *caller_params) {
    if (ftype_base_type(ftype) < 0) return ty_error(TOY_ERR_INVALID, "unknown file type %d", ftype);
    toy_quantize_params full = toy_quantize_default_params();
    if (caller_params && ty_params_read(&full, sizeof full, caller_params, "toy_quantize_params"))
        return TOY_ERR_INVALID;
    const toy_quantize_params *params = &full;

    toy_gguf *g;
    toy_status st = params->no_mmap ? toy_gguf_open_read(in_path, &g) : toy_gguf_open(in_path, &g);
    if (st) return st;
    int64_t n = toy_gguf_n_tensors(g);
    int *types = calloc((size_t)(n ? n : 1), sizeof *types);
    int64_t *order = calloc((size_t)(n ? n : 1), sizeof *order);
    toy_gguf_tensor *infos = calloc((size_t)(n ? n : 1), sizeof *infos);
    toy_gguf_writer *w = toy_gguf_writer_new();
    if (!types || !order || !infos || !w) {
        st = ty_error(TOY_ERR_NOMEM, "%s: no memory", in_path);
        goto done;
    }
    /* Tensors are decided and written in llama.cpp's order (its counters of attn_v and
     * ffn_down tensors follow it), so a mix gives the same types as llama-quantize. */
    for (int64_t i = 0; i < n; i++) infos[i] = *toy_gguf_tensor_at(g, i);
    ty_quant_shape shape;
    ty_quant_shape_from_gguf(g, &shape);
    if ((st = ty_quantize_plan(&shape, infos, n, ftype, params->pure, order, types))) goto done;

    /* llama.cpp's gguf_set_val moves an existing key to the end; these two are set last
     * in this order, so the metadata matches llama-quantize's byte for byte. */
    for (int64_t i = 0; i < toy_gguf_n_kv(g) && !st; i++) {
        const char *key = toy_gguf_key(g, i);
        if (strcmp(key, "general.quantization_version") != 0 && strcmp(key, "general.file_type") != 0)
            st = toy_gguf_writer_set_value(w, key, toy_gguf_kv(g, i));
    }
    if (!st) st = toy_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!st) st = toy_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    for (int64_t i = 0; i < n && !st; i++) {
        const toy_gguf_tensor *t = &infos[order[i]];
        st = toy_gguf_writer_add_tensor(w, t->name, types[i], t->n_dims ? t->n_dims : 1, t->ne,
                                        NULL);
    }
    if (!st) st = toy_gguf_writer_begin(w, out_path);
    for (int64_t i = 0; i < n && !st; i++) {
        const toy_gguf_tensor *t = &infos[order[i]];
        uint8_t *buf = NULL;
        size_t size = t->size;
        if (types[i] == t->type) {
            st = toy_gguf_writer_write_tensor_data(w, t->data, t->size);
        } else {
            st = convert_tensor(t, types[i], params->n_threads, &buf, &size);
            if (!st) st = toy_gguf_writer_write_tensor_data(w, buf, size);
            free(buf);
        }
        if (!st && params->progress)
            params->progress(params->progress_user, i, n, t->name, t->type, types[i], t->size,
                             size);
    }
    if (!st) st = toy_gguf_writer_finish(w);

done:
    toy_gguf_writer_free(w);
    free(infos);
    free(order);
    free(types);
    toy_gguf_close(g);
    return st;
}
