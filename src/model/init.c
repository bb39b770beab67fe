/* init.c — random-weight models of real shapes (toy init).
 *
 * The shapes are those of published models; the tokenizer comes from another GGUF file,
 * so n_vocab is that vocabulary's size. Weights are Gaussian as GPT-2 initialises them
 * (std 0.02, output projections of each block 0.02 / sqrt(2 n_layer)), norms 1, biases 0.
 * Every row draws from its own random stream (seed, tensor, row), so the file does not
 * depend on the number of threads. Tensors are generated row by row straight into the
 * target type, mix rules included: nothing of model size is held in F32.
 */
#include <math.h>
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gguf.h"
#include "model.h"
#include "params.h"
#include "quantize.h"
#include "tokenizer_bpe.h"
#include "splitmix.h"

typedef struct {
    const char *name;
    const char *arch;
    int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    float rope_base, rms_eps;
    bool tied;
    bool qkv_bias;
    bool llama3_rope; /* rope_freqs from Llama 3.1's scaling (factor 32, 1, 4, 8192) */
    int32_t n_expert, n_expert_used;
} preset;

/* From the models' published configurations. */
static const preset presets[] = {
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 2048, 10000.0f, 1e-5f, false, false, false, 0, 0},
    {"smollm2-135m", "llama", 576, 30, 9, 3, 1536, 8192, 100000.0f, 1e-5f, true, false, false, 0, 0},
    {"smollm2-360m", "llama", 960, 32, 15, 5, 2560, 8192, 100000.0f, 1e-5f, true, false, false, 0, 0},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 131072, 500000.0f, 1e-5f, true, false, true, 0, 0},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 32768, 1000000.0f, 1e-6f, true, true, false, 0, 0},
    /* a small Mixtral-style MoE: 8 experts, 2 per token */
    {"mixtral-tiny", "llama", 1024, 8, 16, 4, 1408, 4096, 1000000.0f, 1e-5f, false, false, false, 8, 2},
    /* GPT-2 small: LayerNorm, learned positions, biases everywhere, tied output */
    {"gpt2-124m", "gpt2", 768, 12, 12, 12, 3072, 1024, 0.0f, 1e-5f, true, true, false, 0, 0},
};

#define N_PRESETS (int)(sizeof presets / sizeof presets[0])

const char *toy_init_preset_name(int i) { return i >= 0 && i < N_PRESETS ? presets[i].name : NULL; }
const char *toy_init_preset_arch(int i) { return i >= 0 && i < N_PRESETS ? presets[i].arch : NULL; }

/* ---------------------------------------------------------------- random rows */

typedef enum { FILL_NORMAL, FILL_ONES, FILL_ZEROS, FILL_ROPE_FREQS } fill_kind;

typedef struct {
    toy_gguf_tensor info;
    fill_kind fill;
    float std;
} planned_tensor;

typedef struct {
    const planned_tensor *t;
    uint64_t seed;
    int64_t index;
    const preset *p;
} row_gen;

/* Llama 3.1's frequency factors, as convert_hf_to_gguf.py computes them. */
static float llama3_factor(const preset *p, int64_t i) {
    const double factor = 32, low = 1, high = 4, old_ctx = 8192;
    const int32_t dim = p->n_embd / p->n_head;
    double freq = 1.0 / pow(p->rope_base, (double)(2 * i) / dim);
    double wavelen = 2 * M_PI / freq;
    if (wavelen < old_ctx / high) return 1.0f;
    if (wavelen > old_ctx / low) return (float)factor;
    double smooth = (old_ctx / wavelen - low) / (high - low);
    return (float)(1.0 / ((1 - smooth) / factor + smooth));
}

static void random_row(void *user, int64_t r, float *out) {
    const row_gen *g = user;
    const int64_t n = g->t->info.ne[0];
    switch (g->t->fill) {
    case FILL_ONES:
        for (int64_t i = 0; i < n; i++) out[i] = 1.0f;
        return;
    case FILL_ZEROS:
        memset(out, 0, (size_t)n * sizeof *out);
        return;
    case FILL_ROPE_FREQS:
        for (int64_t i = 0; i < n; i++) out[i] = llama3_factor(g->p, i);
        return;
    case FILL_NORMAL:
        break;
    }
    uint64_t state = g->seed ^ (0x632be59bd9b4e019ULL * (uint64_t)(g->index + 1)) ^
                     (0x9e3779b97f4a7c15ULL * (uint64_t)(r + 1));
    for (int64_t i = 0; i < n; i += 2) { /* Box-Muller: two normals per draw */
        double u1 = ((ty_splitmix64(&state) >> 11) + 1) * (1.0 / 9007199254740993.0);
        double u2 = (ty_splitmix64(&state) >> 11) * (1.0 / 9007199254740992.0);
        double rad = sqrt(-2.0 * log(u1));
        out[i] = (float)(g->t->std * rad * cos(2 * M_PI * u2));
        if (i + 1 < n) out[i + 1] = (float)(g->t->std * rad * sin(2 * M_PI * u2));
    }
}

/* ---------------------------------------------------------------- the tensor list */

typedef struct {
    planned_tensor *t;
    int64_t n, cap;
    char (*names)[64];
} tensor_list;

static toy_status add(tensor_list *l, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                      int64_t ne2, fill_kind fill, float std) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        planned_tensor *t = realloc(l->t, (size_t)cap * sizeof *t);
        char(*names)[64] = realloc(l->names, (size_t)cap * sizeof *names);
        if (t) l->t = t;
        if (names) l->names = names;
        if (!t || !names) return ty_error(TOY_ERR_NOMEM, "no memory");
        l->cap = cap;
    }
    snprintf(l->names[l->n], sizeof l->names[l->n], "%s", name);
    planned_tensor *p = &l->t[l->n++];
    memset(p, 0, sizeof *p);
    p->info.type = TOY_TYPE_F32;
    p->info.n_dims = n_dims;
    p->info.ne[0] = ne0;
    p->info.ne[1] = n_dims > 1 ? ne1 : 1;
    p->info.ne[2] = n_dims > 2 ? ne2 : 1;
    p->info.ne[3] = 1;
    p->fill = fill;
    p->std = std;
    return TOY_OK;
}

static bool is_gpt2(const preset *p) { return !strcmp(p->arch, "gpt2"); }

static toy_status plan_tensors(const preset *p, int64_t n_vocab, tensor_list *l) {
    const int64_t e = p->n_embd, hd = p->n_embd / p->n_head;
    const int64_t q = p->n_head * hd, kv = p->n_head_kv * hd;
    const float std = 0.02f, std_out = 0.02f / sqrtf(2.0f * (float)p->n_layer);
    const bool gpt2 = is_gpt2(p);
    toy_status st = add(l, "token_embd.weight", 2, e, n_vocab, 1, FILL_NORMAL, std);
    if (!st && gpt2) st = add(l, "position_embd.weight", 2, e, p->n_ctx, 1, FILL_NORMAL, 0.01f);
    if (!st) st = add(l, "output_norm.weight", 1, e, 1, 1, FILL_ONES, 0);
    if (!st && gpt2) st = add(l, "output_norm.bias", 1, e, 1, 1, FILL_ZEROS, 0);
    if (!st && !p->tied) st = add(l, "output.weight", 2, e, n_vocab, 1, FILL_NORMAL, std);
    if (!st && p->llama3_rope) st = add(l, "rope_freqs.weight", 1, hd / 2, 1, 1, FILL_ROPE_FREQS, 0);
    for (int il = 0; il < p->n_layer && !st; il++) {
        char name[64];
#define T(suffix, nd, a, b, c, fill, s)                                                    \
    if (!st) {                                                                             \
        snprintf(name, sizeof name, "blk.%d." suffix, il);                                 \
        st = add(l, name, nd, a, b, c, fill, s);                                           \
    }
        T("attn_norm.weight", 1, e, 1, 1, FILL_ONES, 0);
        if (gpt2) {
            T("attn_norm.bias", 1, e, 1, 1, FILL_ZEROS, 0);
            T("attn_qkv.weight", 2, e, q + 2 * kv, 1, FILL_NORMAL, std);
            T("attn_qkv.bias", 1, q + 2 * kv, 1, 1, FILL_ZEROS, 0);
            T("attn_output.weight", 2, q, e, 1, FILL_NORMAL, std_out);
            T("attn_output.bias", 1, e, 1, 1, FILL_ZEROS, 0);
            T("ffn_norm.weight", 1, e, 1, 1, FILL_ONES, 0);
            T("ffn_norm.bias", 1, e, 1, 1, FILL_ZEROS, 0);
            T("ffn_up.weight", 2, e, p->n_ff, 1, FILL_NORMAL, std);
            T("ffn_up.bias", 1, p->n_ff, 1, 1, FILL_ZEROS, 0);
            T("ffn_down.weight", 2, p->n_ff, e, 1, FILL_NORMAL, std_out);
            T("ffn_down.bias", 1, e, 1, 1, FILL_ZEROS, 0);
            continue;
        }
        T("attn_q.weight", 2, e, q, 1, FILL_NORMAL, std);
        T("attn_k.weight", 2, e, kv, 1, FILL_NORMAL, std);
        T("attn_v.weight", 2, e, kv, 1, FILL_NORMAL, std);
        if (p->qkv_bias) {
            T("attn_q.bias", 1, q, 1, 1, FILL_ZEROS, 0);
            T("attn_k.bias", 1, kv, 1, 1, FILL_ZEROS, 0);
            T("attn_v.bias", 1, kv, 1, 1, FILL_ZEROS, 0);
        }
        T("attn_output.weight", 2, q, e, 1, FILL_NORMAL, std_out);
        T("ffn_norm.weight", 1, e, 1, 1, FILL_ONES, 0);
        if (p->n_expert) {
            T("ffn_gate_inp.weight", 2, e, p->n_expert, 1, FILL_NORMAL, std);
            T("ffn_gate_exps.weight", 3, e, p->n_ff, p->n_expert, FILL_NORMAL, std);
            T("ffn_up_exps.weight", 3, e, p->n_ff, p->n_expert, FILL_NORMAL, std);
            T("ffn_down_exps.weight", 3, p->n_ff, e, p->n_expert, FILL_NORMAL, std_out);
        } else {
            T("ffn_gate.weight", 2, e, p->n_ff, 1, FILL_NORMAL, std);
            T("ffn_up.weight", 2, e, p->n_ff, 1, FILL_NORMAL, std);
            T("ffn_down.weight", 2, p->n_ff, e, 1, FILL_NORMAL, std_out);
        }
#undef T
    }
    for (int64_t i = 0; i < l->n; i++) l->t[i].info.name = l->names[i];
    return st;
}

/* ---------------------------------------------------------------- metadata */

static toy_status set_hparams(toy_gguf_writer *w, const preset *p, int64_t n_vocab, int ftype) {
    char key[128];
    toy_status st = toy_gguf_writer_set_str(w, "general.architecture", p->arch, strlen(p->arch));
    if (!st) st = toy_gguf_writer_set_str(w, "general.name", p->name, strlen(p->name));
#define U32(suffix, v)                                                                     \
    if (!st) {                                                                             \
        snprintf(key, sizeof key, "%s." suffix, p->arch);                                  \
        st = toy_gguf_writer_set_u32(w, key, (uint32_t)(v));                               \
    }
#define F32(suffix, v)                                                                     \
    if (!st) {                                                                             \
        snprintf(key, sizeof key, "%s." suffix, p->arch);                                  \
        st = toy_gguf_writer_set_f32(w, key, v);                                           \
    }
    U32("vocab_size", n_vocab);
    U32("context_length", p->n_ctx);
    U32("embedding_length", p->n_embd);
    U32("block_count", p->n_layer);
    U32("feed_forward_length", p->n_ff);
    U32("attention.head_count", p->n_head);
    if (is_gpt2(p)) { /* no RoPE */
        F32("attention.layer_norm_epsilon", p->rms_eps);
    } else {
        U32("attention.head_count_kv", p->n_head_kv);
        F32("attention.layer_norm_rms_epsilon", p->rms_eps);
        F32("rope.freq_base", p->rope_base);
        U32("rope.dimension_count", p->n_embd / p->n_head);
    }
    if (p->n_expert) {
        U32("expert_count", p->n_expert);
        U32("expert_used_count", p->n_expert_used);
    }
#undef U32
#undef F32
    if (!st) st = toy_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    if (!st) st = toy_gguf_writer_set_u32(w, "general.quantization_version", 2);
    return st;
}

/* ---------------------------------------------------------------- the model */

/* The shape to write: the preset's, or the architecture's defaults (a SmolLM2-like small
 * llama: tied embeddings, rope base 10000), with every explicit dimension of params
 * replacing the preset's. */
static toy_status choose_shape(const toy_init_params *params, preset *out) {
    const preset *p = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (params->preset && !strcmp(presets[i].name, params->preset)) p = &presets[i];
    if (params->preset && !p) {
        char list[512] = "";
        for (int i = 0; i < N_PRESETS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     presets[i].name);
        return ty_error(TOY_ERR_INVALID, "unknown preset '%s' (presets: %s)", params->preset, list);
    }
    if (p && (!params->arch || strcmp(params->arch, p->arch) != 0))
        return ty_error(TOY_ERR_INVALID, "preset %s is architecture %s, not '%s'", p->name, p->arch,
                        params->arch ? params->arch : "");
    if (!p) {
        if (!params->arch ||
            (strcmp(params->arch, "llama") && strcmp(params->arch, "qwen2") && strcmp(params->arch, "gpt2")))
            return ty_error(TOY_ERR_INVALID, "architecture '%s': toy init writes llama, qwen2 or gpt2",
                            params->arch ? params->arch : "");
        const bool qwen2 = !strcmp(params->arch, "qwen2"), gpt2 = !strcmp(params->arch, "gpt2");
        *out = (preset){"custom", params->arch, 0, 0, 0, 0, 0, gpt2 ? 1024 : 2048,
                        qwen2 ? 1000000.0f : 10000.0f, qwen2 ? 1e-6f : 1e-5f, true, qwen2 || gpt2, false, 0, 0};
    } else {
        *out = *p;
    }
    if (params->name) out->name = params->name;
    if (params->n_embd) out->n_embd = params->n_embd;
    if (params->n_layer) out->n_layer = params->n_layer;
    if (params->n_head) out->n_head = params->n_head;
    if (params->n_head_kv) out->n_head_kv = params->n_head_kv;
    else if (params->n_head && !p) out->n_head_kv = params->n_head;
    if (is_gpt2(out)) { /* no grouped-query attention: every head has its K and V */
        if (params->n_head_kv && params->n_head_kv != out->n_head)
            return ty_error(TOY_ERR_INVALID, "gpt2 has no grouped-query attention: n_head_kv %d must be n_head %d",
                            params->n_head_kv, out->n_head);
        out->n_head_kv = out->n_head;
    }
    if (params->n_ff) out->n_ff = params->n_ff;
    if (params->n_ctx) out->n_ctx = params->n_ctx;
    if (params->tied) out->tied = params->tied > 0;
    static const char *const dims[] = {"n_embd", "n_layer", "n_head", "n_head_kv", "n_ff", "n_ctx"};
    const int32_t vals[] = {out->n_embd, out->n_layer, out->n_head, out->n_head_kv, out->n_ff, out->n_ctx};
    for (int i = 0; i < 6; i++)
        if (vals[i] <= 0 || vals[i] > (i == 5 ? (1 << 24) : (1 << 16)))
            return ty_error(TOY_ERR_INVALID, "%s %d is out of range%s", dims[i], vals[i],
                            p ? "" : " (without a preset, give every dimension)");
    if (out->n_embd % out->n_head || (out->n_embd / out->n_head) % 2)
        return ty_error(TOY_ERR_INVALID, "n_embd %d is not n_head %d times an even head size",
                        out->n_embd, out->n_head);
    if (out->n_head % out->n_head_kv)
        return ty_error(TOY_ERR_INVALID, "n_head %d is not a multiple of n_head_kv %d", out->n_head,
                        out->n_head_kv);
    if (out->n_layer > TOY_MAX_LAYERS)
        return ty_error(TOY_ERR_INVALID, "n_layer %d is over %d", out->n_layer, TOY_MAX_LAYERS);
    return TOY_OK;
}

void toy_init_params_init(toy_init_params *params, size_t size) {
    const toy_init_params defaults = {.size = sizeof defaults, .ftype = TOY_FTYPE_ALL_F32, .seed = 42, .n_threads = 1};
    ty_params_init(params, size, &defaults, sizeof defaults);
}

/* The model of params, written to out_path, or with mem to memory (gguf.h). */
static toy_status init_model(const toy_init_params *caller_params, const char *out_path, void **mem, size_t *mem_size) {
    toy_init_params full = toy_init_default_params();
    if (!caller_params) return ty_error(TOY_ERR_INVALID, "toy_init_model: no parameters");
    if (ty_params_read(&full, sizeof full, caller_params, "toy_init_params")) return TOY_ERR_INVALID;
    const toy_init_params *params = &full;
    preset chosen;
    toy_status st = choose_shape(params, &chosen);
    if (st) return st;
    const preset *p = &chosen;
    if (!toy_ftype_name(params->ftype))
        return ty_error(TOY_ERR_INVALID, "unknown file type %d", params->ftype);
    if (!params->vocab_path && !mem) return ty_error(TOY_ERR_INVALID, "no vocabulary file given");

    /* in memory without a vocabulary file: the 256 byte tokens */
    toy_gguf *vocab;
    void *byte_vocab = NULL;
    size_t byte_vocab_size = 0;
    if (params->vocab_path) st = toy_gguf_open(params->vocab_path, &vocab);
    else if (!(st = ty_bpe_byte_vocab(&byte_vocab, &byte_vocab_size)))
        st = toy_gguf_open_memory(byte_vocab, byte_vocab_size, "(the byte-level vocabulary)", &vocab);
    if (st) {
        free(byte_vocab);
        return st;
    }
    const toy_gguf_value *tokens = toy_gguf_get(vocab, "tokenizer.ggml.tokens");
    int64_t n_vocab = tokens ? (int64_t)toy_gguf_array_len(tokens) : 0;
    if (n_vocab <= 0) {
        toy_gguf_close(vocab);
        free(byte_vocab);
        return ty_error(TOY_ERR_FORMAT, "%s: no tokenizer.ggml.tokens: not a vocabulary",
                        params->vocab_path);
    }
    /* a tokenizer toy cannot load is refused here, naming the file it came from, not
     * when the model made from it is loaded */
    toy_vocab *check = NULL;
    if ((st = toy_vocab_load(vocab, &check))) {
        toy_gguf_close(vocab);
        free(byte_vocab);
        return ty_error_wrap(st, "%s", params->vocab_path ? params->vocab_path : "the byte-level vocabulary");
    }
    toy_vocab_free(check);

    tensor_list l = {0};
    toy_gguf_writer *w = toy_gguf_writer_new();
    int64_t *order = NULL;
    int *types = NULL;
    if (!w) st = ty_error(TOY_ERR_NOMEM, "no memory");
    if (!st) st = plan_tensors(p, n_vocab, &l);
    if (!st) {
        order = malloc((size_t)l.n * sizeof *order);
        types = malloc((size_t)l.n * sizeof *types);
        if (!order || !types) st = ty_error(TOY_ERR_NOMEM, "no memory");
    }
    ty_quant_shape shape = {.n_layer = p->n_layer, .n_head = p->n_head, .n_head_kv = p->n_head_kv,
                             .n_expert = p->n_expert};
    snprintf(shape.arch, sizeof shape.arch, "%s", p->arch);
    /* the plan reads an array of toy_gguf_tensor: gather them */
    toy_gguf_tensor *infos = NULL;
    if (!st) {
        infos = malloc((size_t)l.n * sizeof *infos);
        if (!infos) st = ty_error(TOY_ERR_NOMEM, "no memory");
        for (int64_t i = 0; !st && i < l.n; i++) infos[i] = l.t[i].info;
    }
    if (!st) st = ty_quantize_plan(&shape, infos, l.n, params->ftype, false, order, types);

    if (!st) st = set_hparams(w, p, n_vocab, params->ftype);
    for (int64_t i = 0; !st && i < toy_gguf_n_kv(vocab); i++) {
        const char *key = toy_gguf_key(vocab, i);
        if (!strncmp(key, "tokenizer.", 10)) st = toy_gguf_writer_set_value(w, key, toy_gguf_kv(vocab, i));
    }
    for (int64_t k = 0; !st && k < l.n; k++) {
        const toy_gguf_tensor *t = &infos[order[k]];
        st = toy_gguf_writer_add_tensor(w, t->name, types[k], t->n_dims, t->ne, NULL);
    }
    if (!st && mem) ty_gguf_writer_to_memory(w, mem, mem_size);
    if (!st) st = toy_gguf_writer_begin(w, out_path);
    for (int64_t k = 0; !st && k < l.n; k++) {
        const planned_tensor *t = &l.t[order[k]];
        row_gen gen = {t, params->seed, order[k], p};
        int64_t rows = t->info.ne[1] * t->info.ne[2];
        uint8_t *buf = NULL;
        size_t size = 0;
        st = ty_quantize_rows(t->info.name, t->info.ne[0], rows, random_row, &gen, types[k],
                              params->n_threads, &buf, &size);
        if (!st) st = toy_gguf_writer_write_tensor_data(w, buf, size);
        free(buf);
        if (!st && params->progress)
            params->progress(params->progress_user, k, l.n, t->info.name, TOY_TYPE_F32, types[k],
                             (size_t)(t->info.ne[0] * rows) * sizeof(float), size);
    }
    if (!st) st = toy_gguf_writer_finish(w);

    toy_gguf_writer_free(w);
    free(infos);
    free(order);
    free(types);
    free(l.t);
    free(l.names);
    toy_gguf_close(vocab);
    free(byte_vocab);
    return st;
}

toy_status toy_init_model(const toy_init_params *params, const char *out_path) {
    return init_model(params, out_path, NULL, NULL);
}

toy_status toy_model_new(const toy_init_params *params, toy_model **out) {
    *out = NULL;
    void *mem = NULL;
    size_t size = 0;
    char name[96];
    snprintf(name, sizeof name, "(a new %s model in memory)", params && params->arch ? params->arch : "llama");
    toy_status st = init_model(params, name, &mem, &size);
    toy_gguf *g = NULL;
    if (!st && (st = toy_gguf_open_memory(mem, size, name, &g))) free(mem);
    return st ? st : ty_model_from_gguf(g, mem, out);
}
