/* test_quantize_mix.c — the per-tensor types of toy's mixes against llama-quantize's.
 *
 * Small synthetic F32 models (a TinyLlama-shaped llama, the same with its tensors stored
 * in reverse order, one with tied embeddings, a phi3 with fused attn_qkv, an 8-expert
 * MoE, and one whose rows are 128 wide) are quantized to every file type toy writes;
 * each output tensor's type must be the one llama.cpp's llama-quantize picks.
 *
 * The expectations come from llama.cpp's src/llama-quant.cpp as of the snapshot the
 * fixtures were made with (September 2025): llama_tensor_get_type, use_more_bits, the
 * fallback switch for rows that are no whole number of blocks, and the "quantize &= ..."
 * list of tensors never quantized. expected_type() below restates those rules for the
 * cases built here (no imatrix, no Falcon, no 70B, no user overrides); hand-counted
 * tables and layer lists pin the best known cases independently of it (TinyLlama-1.1B
 * at Q4_K_M is 135 Q4_K + 21 Q6_K + 45 F32 tensors in llama.cpp's own file).
 *
 * The rules read a tensor's name, ne[0] and the model's metadata, never its row count,
 * so the models keep a few rows per tensor and twenty quantizations of each stay fast.
 */
#include <stdint.h>
#include <unistd.h>

#include "test.h"
#include "toy.h"

/* ---------------------------------------------------------------- synthetic models */

typedef enum {
    ROLE_TOKEN_EMBD,
    ROLE_OUTPUT_NORM,
    ROLE_OUTPUT,
    ROLE_ATTN_NORM,
    ROLE_ATTN_Q,
    ROLE_ATTN_K,
    ROLE_ATTN_V,
    ROLE_ATTN_QKV,
    ROLE_ATTN_OUTPUT,
    ROLE_FFN_NORM,
    ROLE_FFN_GATE_INP,
    ROLE_FFN_GATE,
    ROLE_FFN_UP,
    ROLE_FFN_DOWN,
} tensor_role;

typedef struct {
    const char *label;
    const char *arch;
    int n_layer, n_head, n_head_kv, n_expert;
    int64_t n_embd, n_ff, n_vocab;
    bool tied;      /* no output.weight: token_embd doubles as the output projection */
    bool fused_qkv; /* phi3: attn_qkv instead of attn_q/k/v, ffn_up holds gate and up */
    bool reversed;  /* tensors stored last layer first, so file order != llama.cpp's */
} model_spec;

typedef struct {
    char name[64];
    tensor_role role;
    int layer; /* -1 outside blk.N */
    int n_dims;
    int64_t ne[TOY_MAX_DIMS];
} tensor_desc;

#define N_ROWS 8 /* rows of every per-layer weight (see the top of the file) */
#define MAX_TENSORS 512

static void add_desc(tensor_desc *d, int *n, int layer, const char *suffix, tensor_role role,
                     int n_dims, int64_t ne0, int64_t ne1, int64_t ne2) {
    tensor_desc *t = &d[(*n)++];
    if (layer >= 0)
        snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, suffix);
    else
        snprintf(t->name, sizeof t->name, "%s", suffix);
    t->role = role;
    t->layer = layer;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = 1;
}

/* The tensors of a model, in the order a converter would write them. */
static int model_tensors(const model_spec *m, tensor_desc *d) {
    int n = 0;
    const int64_t E = m->n_embd, F = m->n_ff, X = m->n_expert;
    add_desc(d, &n, -1, "token_embd.weight", ROLE_TOKEN_EMBD, 2, E, m->n_vocab, 1);
    for (int il = 0; il < m->n_layer; il++) {
        add_desc(d, &n, il, "attn_norm.weight", ROLE_ATTN_NORM, 1, E, 1, 1);
        if (m->fused_qkv) {
            add_desc(d, &n, il, "attn_qkv.weight", ROLE_ATTN_QKV, 2, E, N_ROWS, 1);
        } else {
            add_desc(d, &n, il, "attn_q.weight", ROLE_ATTN_Q, 2, E, N_ROWS, 1);
            add_desc(d, &n, il, "attn_k.weight", ROLE_ATTN_K, 2, E, N_ROWS, 1);
            add_desc(d, &n, il, "attn_v.weight", ROLE_ATTN_V, 2, E, N_ROWS, 1);
        }
        add_desc(d, &n, il, "attn_output.weight", ROLE_ATTN_OUTPUT, 2, E, N_ROWS, 1);
        add_desc(d, &n, il, "ffn_norm.weight", ROLE_FFN_NORM, 1, E, 1, 1);
        if (X > 1) {
            add_desc(d, &n, il, "ffn_gate_inp.weight", ROLE_FFN_GATE_INP, 2, E, X, 1);
            add_desc(d, &n, il, "ffn_gate_exps.weight", ROLE_FFN_GATE, 3, E, N_ROWS, X);
            add_desc(d, &n, il, "ffn_up_exps.weight", ROLE_FFN_UP, 3, E, N_ROWS, X);
            add_desc(d, &n, il, "ffn_down_exps.weight", ROLE_FFN_DOWN, 3, F, N_ROWS, X);
        } else {
            if (!m->fused_qkv)
                add_desc(d, &n, il, "ffn_gate.weight", ROLE_FFN_GATE, 2, E, N_ROWS, 1);
            add_desc(d, &n, il, "ffn_up.weight", ROLE_FFN_UP, 2, E, N_ROWS, 1);
            add_desc(d, &n, il, "ffn_down.weight", ROLE_FFN_DOWN, 2, F, N_ROWS, 1);
        }
    }
    add_desc(d, &n, -1, "output_norm.weight", ROLE_OUTPUT_NORM, 1, E, 1, 1);
    if (!m->tied) add_desc(d, &n, -1, "output.weight", ROLE_OUTPUT, 2, E, m->n_vocab, 1);
    return n;
}

static int64_t desc_nelements(const tensor_desc *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static const char *const vocab[] = {"<unk>", "<s>", "</s>", "a", "b", "c"};

/* Writes the model as F32 GGUF. The metadata is what convert_hf_to_gguf.py writes for
 * such a model, general.file_type (0, ALL_F32) in the middle of it. */
static toy_status write_model(const model_spec *m, const char *path) {
    tensor_desc *d = malloc(MAX_TENSORS * sizeof *d);
    if (!d) return TOY_ERR_NOMEM;
    int n = model_tensors(m, d);
    int64_t max_ne = 0;
    for (int i = 0; i < n; i++)
        if (desc_nelements(&d[i]) > max_ne) max_ne = desc_nelements(&d[i]);
    /* One buffer of deterministic Gaussian values backs every tensor. */
    float *data = malloc((size_t)max_ne * sizeof *data);
    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_status st = data && w ? TOY_OK : TOY_ERR_NOMEM;
    unsigned long long seed = 0x9e3779b97f4a7c15ULL;
    for (int64_t i = 0; data && i < max_ne; i++) data[i] = 0.02f * test_rand_normal(&seed);

    char key[128];
#define ARCH_KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, m->arch), key)
    if (!st) st = toy_gguf_writer_set_str(w, "general.architecture", m->arch, strlen(m->arch));
    if (!st) st = toy_gguf_writer_set_str(w, "general.name", m->label, strlen(m->label));
    if (!st) st = toy_gguf_writer_set_u32(w, ARCH_KEY("block_count"), (uint32_t)m->n_layer);
    if (!st) st = toy_gguf_writer_set_u32(w, ARCH_KEY("context_length"), 2048);
    if (!st) st = toy_gguf_writer_set_u32(w, ARCH_KEY("embedding_length"), (uint32_t)m->n_embd);
    if (!st) st = toy_gguf_writer_set_u32(w, ARCH_KEY("feed_forward_length"), (uint32_t)m->n_ff);
    if (!st) st = toy_gguf_writer_set_u32(w, ARCH_KEY("attention.head_count"), (uint32_t)m->n_head);
    if (!st)
        st = toy_gguf_writer_set_u32(w, ARCH_KEY("attention.head_count_kv"),
                                     (uint32_t)m->n_head_kv);
    if (!st) st = toy_gguf_writer_set_u32(w, "general.file_type", TOY_FTYPE_ALL_F32);
    if (!st) st = toy_gguf_writer_set_f32(w, ARCH_KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (!st) st = toy_gguf_writer_set_f32(w, ARCH_KEY("rope.freq_base"), 10000.0f);
    if (!st && m->n_expert > 1) {
        st = toy_gguf_writer_set_u32(w, ARCH_KEY("expert_count"), (uint32_t)m->n_expert);
        if (!st) st = toy_gguf_writer_set_u32(w, ARCH_KEY("expert_used_count"), 2);
    }
#undef ARCH_KEY
    const size_t n_vocab_strs = sizeof vocab / sizeof vocab[0];
    float scores[sizeof vocab / sizeof vocab[0]];
    int32_t token_types[sizeof vocab / sizeof vocab[0]];
    for (size_t i = 0; i < n_vocab_strs; i++) {
        scores[i] = -(float)i;
        token_types[i] = i < 3 ? 3 : 1;
    }
    if (!st) st = toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5);
    if (!st)
        st = toy_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", vocab, NULL, n_vocab_strs);
    if (!st)
        st = toy_gguf_writer_set_array(w, "tokenizer.ggml.scores", TOY_GGUF_FLOAT32, scores,
                                       n_vocab_strs);
    if (!st)
        st = toy_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TOY_GGUF_INT32,
                                       token_types, n_vocab_strs);
    if (!st) st = toy_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);

    for (int k = 0; k < n && !st; k++) {
        const tensor_desc *t = &d[m->reversed ? n - 1 - k : k];
        st = toy_gguf_writer_add_tensor(w, t->name, TOY_TYPE_F32, t->n_dims, t->ne, data);
    }
    if (!st) st = toy_gguf_writer_write(w, path);
    toy_gguf_writer_free(w);
    free(data);
    free(d);
    return st;
}

/* ---------------------------------------------------------------- llama.cpp's rules */

/* use_more_bits in llama_tensor_get_type: "return i_layer < n_layers/8 || i_layer >=
 * 7*n_layers/8 || (i_layer - n_layers/8)%3 == 2;" */
static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
           (i_layer - n_layers / 8) % 3 == 2;
}

static int ftype_base_type(int ftype) {
    switch (ftype) {
    case TOY_FTYPE_ALL_F32: return TOY_TYPE_F32;
    case TOY_FTYPE_MOSTLY_F16: return TOY_TYPE_F16;
    case TOY_FTYPE_MOSTLY_BF16: return TOY_TYPE_BF16;
    case TOY_FTYPE_MOSTLY_Q4_0: return TOY_TYPE_Q4_0;
    case TOY_FTYPE_MOSTLY_Q4_1: return TOY_TYPE_Q4_1;
    case TOY_FTYPE_MOSTLY_Q5_0: return TOY_TYPE_Q5_0;
    case TOY_FTYPE_MOSTLY_Q5_1: return TOY_TYPE_Q5_1;
    case TOY_FTYPE_MOSTLY_Q8_0: return TOY_TYPE_Q8_0;
    case TOY_FTYPE_MOSTLY_Q2_K: return TOY_TYPE_Q2_K;
    case TOY_FTYPE_MOSTLY_Q3_K_S:
    case TOY_FTYPE_MOSTLY_Q3_K_M:
    case TOY_FTYPE_MOSTLY_Q3_K_L: return TOY_TYPE_Q3_K;
    case TOY_FTYPE_MOSTLY_Q4_K_S:
    case TOY_FTYPE_MOSTLY_Q4_K_M: return TOY_TYPE_Q4_K;
    case TOY_FTYPE_MOSTLY_Q5_K_S:
    case TOY_FTYPE_MOSTLY_Q5_K_M: return TOY_TYPE_Q5_K;
    case TOY_FTYPE_MOSTLY_Q6_K: return TOY_TYPE_Q6_K;
    case TOY_FTYPE_MOSTLY_IQ4_NL: return TOY_TYPE_IQ4_NL;
    default: return -1;
    }
}

static bool type_is_quantized(int type) {
    return type != TOY_TYPE_F32 && type != TOY_TYPE_F16 && type != TOY_TYPE_BF16;
}

/* The mix rule of llama_tensor_get_type for one tensor, before the fallback. The attn_v
 * counter i_attention_wv and, without experts, the ffn_down counter i_ffn_down count
 * tensors in llama.cpp's walk order (layer, then name), one per layer here, so they
 * equal the layer index; with experts the layer is parsed from the name. */
static int mix_rule(const model_spec *m, int ftype, int base, const tensor_desc *t) {
    const int n_layer = m->n_layer, il = t->layer;
    const int n_gqa = m->n_head / m->n_head_kv;
    const bool moe8 = m->n_expert == 8;
    /* "if (name == tn(LLM_TENSOR_OUTPUT, "weight") || (!qs.has_output && name ==
     * tn(LLM_TENSOR_TOKEN_EMBD, "weight")))": "nx % qk_k != 0" -> Q8_0, else
     * "new_type != GGML_TYPE_Q8_0" -> Q6_K. */
    if (t->role == ROLE_OUTPUT || (m->tied && t->role == ROLE_TOKEN_EMBD)) {
        if (t->ne[0] % toy_type_block_size(base) != 0) return TOY_TYPE_Q8_0;
        return base == TOY_TYPE_Q8_0 ? TOY_TYPE_Q8_0 : TOY_TYPE_Q6_K;
    }
    switch (t->role) {
    case ROLE_ATTN_V: {
        int type = base;
        switch (ftype) {
        case TOY_FTYPE_MOSTLY_Q2_K: /* "n_gqa() >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K" */
            type = n_gqa >= 4 ? TOY_TYPE_Q4_K : TOY_TYPE_Q3_K;
            break;
        case TOY_FTYPE_MOSTLY_Q3_K_M: /* "qs.i_attention_wv < 2 ? Q5_K : Q4_K" */
            type = il < 2 ? TOY_TYPE_Q5_K : TOY_TYPE_Q4_K;
            break;
        case TOY_FTYPE_MOSTLY_Q3_K_L: type = TOY_TYPE_Q5_K; break;
        case TOY_FTYPE_MOSTLY_IQ4_NL: /* "(IQ4_NL || IQ4_XS) && n_gqa() >= 4" -> Q5_K */
            if (n_gqa >= 4) type = TOY_TYPE_Q5_K;
            break;
        case TOY_FTYPE_MOSTLY_Q4_K_M:
        case TOY_FTYPE_MOSTLY_Q5_K_M: /* "use_more_bits(qs.i_attention_wv, qs.n_attention_wv)" */
            if (use_more_bits(il, n_layer)) type = TOY_TYPE_Q6_K;
            break;
        case TOY_FTYPE_MOSTLY_Q4_K_S: /* "qs.i_attention_wv < 4" -> Q5_K */
            if (il < 4) type = TOY_TYPE_Q5_K;
            break;
        }
        /* "if (qs.model.hparams.n_expert == 8) { ... new_type = GGML_TYPE_Q8_0;" */
        return moe8 ? TOY_TYPE_Q8_0 : type;
    }
    case ROLE_ATTN_K: return moe8 ? TOY_TYPE_Q8_0 : base;
    case ROLE_FFN_DOWN:
        switch (ftype) {
        case TOY_FTYPE_MOSTLY_Q2_K: return TOY_TYPE_Q3_K;
        case TOY_FTYPE_MOSTLY_Q3_K_M: /* "i_layer < n_layer/16 ? Q5_K : arch != FALCON ..." */
            return il < n_layer / 16 ? TOY_TYPE_Q5_K : TOY_TYPE_Q4_K;
        case TOY_FTYPE_MOSTLY_Q3_K_L: return TOY_TYPE_Q5_K;
        case TOY_FTYPE_MOSTLY_Q4_K_M:
        case TOY_FTYPE_MOSTLY_Q5_K_M: return use_more_bits(il, n_layer) ? TOY_TYPE_Q6_K : base;
        case TOY_FTYPE_MOSTLY_IQ4_NL: /* "i_layer < n_layer/8 && (IQ4_NL || IQ4_XS)" */
        case TOY_FTYPE_MOSTLY_Q4_K_S: /* "Q4_K_S && arch != FALCON && i_layer < n_layer/8" */
            return il < n_layer / 8 ? TOY_TYPE_Q5_K : base;
        default: return base; /* the Q4_0/Q5_0 rule needs an imatrix */
        }
    case ROLE_ATTN_OUTPUT:
        if (moe8) {
            switch (ftype) { /* the list under "if (qs.model.hparams.n_expert == 8)" */
            case TOY_FTYPE_MOSTLY_Q2_K:
            case TOY_FTYPE_MOSTLY_Q3_K_S:
            case TOY_FTYPE_MOSTLY_Q3_K_M:
            case TOY_FTYPE_MOSTLY_IQ4_NL:
            case TOY_FTYPE_MOSTLY_Q4_K_S:
            case TOY_FTYPE_MOSTLY_Q4_K_M: return TOY_TYPE_Q5_K;
            default: return base;
            }
        }
        switch (ftype) {
        case TOY_FTYPE_MOSTLY_Q2_K: return TOY_TYPE_Q3_K;
        case TOY_FTYPE_MOSTLY_Q3_K_M: return TOY_TYPE_Q4_K;
        case TOY_FTYPE_MOSTLY_Q3_K_L: return TOY_TYPE_Q5_K;
        default: return base;
        }
    case ROLE_ATTN_QKV: /* "attn_qkv.weight": Q3_K_M/L -> Q4_K, Q4_K_M -> Q5_K, Q5_K_M -> Q6_K */
        switch (ftype) {
        case TOY_FTYPE_MOSTLY_Q3_K_M:
        case TOY_FTYPE_MOSTLY_Q3_K_L: return TOY_TYPE_Q4_K;
        case TOY_FTYPE_MOSTLY_Q4_K_M: return TOY_TYPE_Q5_K;
        case TOY_FTYPE_MOSTLY_Q5_K_M: return TOY_TYPE_Q6_K;
        default: return base;
        }
    default: return base; /* token_embd (untied), attn_q, ffn_gate, ffn_up: IQ mixes only */
    }
}

/* llama.cpp's fallback where a row is no whole number of blocks of the chosen type:
 * "case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_IQ4_XS: new_type =
 * GGML_TYPE_IQ4_NL; case GGML_TYPE_Q4_K: new_type = GGML_TYPE_Q5_0; case GGML_TYPE_Q5_K:
 * new_type = GGML_TYPE_Q5_1; case GGML_TYPE_Q6_K: new_type = GGML_TYPE_Q8_0;", and F16
 * if even that does not fit. */
static int fallback(int type, int64_t ne0) {
    if (ne0 % toy_type_block_size(type) == 0) return type;
    switch (type) {
    case TOY_TYPE_Q2_K:
    case TOY_TYPE_Q3_K: type = TOY_TYPE_IQ4_NL; break;
    case TOY_TYPE_Q4_K: type = TOY_TYPE_Q5_0; break;
    case TOY_TYPE_Q5_K: type = TOY_TYPE_Q5_1; break;
    case TOY_TYPE_Q6_K: type = TOY_TYPE_Q8_0; break;
    default: return -1; /* llama.cpp throws "Unsupported tensor size encountered" */
    }
    return ne0 % toy_type_block_size(type) == 0 ? type : TOY_TYPE_F16;
}

/* The type llama-quantize gives tensor t of model m for file type ftype. */
static int expected_type(const model_spec *m, int ftype, bool pure, const tensor_desc *t) {
    /* "quantize &= (ggml_n_dims(tensor) >= 2)", "name.find("_norm.weight") ==
     * std::string::npos", "name.find("ffn_gate_inp.weight") == std::string::npos" */
    bool quantize = t->n_dims >= 2 && t->role != ROLE_FFN_GATE_INP;
    if (!quantize) return TOY_TYPE_F32;
    int base = ftype_base_type(ftype);
    /* "if (!params->pure && ggml_is_quantized(default_type))" */
    if (pure || !type_is_quantized(base)) return base;
    return fallback(mix_rule(m, ftype, base, t), t->ne[0]);
}

/* ---------------------------------------------------------------- checking output */

static int tensor_layer(const char *name) {
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = -1;
    return layer;
}

static char tmp_dir[64];

static void tmp_path(char *buf, size_t size, const char *file) {
    snprintf(buf, size, "%s/%s", tmp_dir, file);
}

/* Quantizes in_path to ftype and opens the result; NULL (after a failed check) if it
 * could not. The caller closes it and removes the file. */
static toy_gguf *quantize(const char *in_path, int ftype, bool pure, const char *label) {
    char out_path[128];
    tmp_path(out_path, sizeof out_path, "out.gguf");
    toy_quantize_params params = toy_quantize_default_params();
    params.pure = pure;
    toy_status st = toy_quantize_file(in_path, out_path, ftype, &params);
    CHECK_MSG(st == TOY_OK, "%s %s%s: %s", label, toy_ftype_name(ftype), pure ? " --pure" : "",
              toy_last_error());
    if (st) return NULL;
    toy_gguf *g = NULL;
    st = toy_gguf_open(out_path, &g);
    CHECK_MSG(st == TOY_OK, "%s %s: reopening: %s", label, toy_ftype_name(ftype),
              toy_last_error());
    return st ? NULL : g;
}

static void discard(toy_gguf *g) {
    char out_path[128];
    tmp_path(out_path, sizeof out_path, "out.gguf");
    toy_gguf_close(g);
    unlink(out_path);
}

static const char *type_str(int type) {
    const char *s = toy_type_name(type);
    return s ? s : "(none)";
}

static int type_of(const toy_gguf *g, const char *name) {
    const toy_gguf_tensor *t = toy_gguf_find_tensor(g, name);
    CHECK_MSG(t != NULL, "tensor %s missing from the output", name);
    return t ? t->type : -1;
}

#define CHECK_TYPE(g, name, want)                                                       \
    do {                                                                                \
        int got_ = type_of((g), (name)), want_ = (want);                                \
        CHECK_MSG(got_ == want_, "%s: %s, llama.cpp gives %s", (name), type_str(got_),  \
                  type_str(want_));                                                     \
    } while (0)

/* Every tensor of the model against expected_type, the shapes kept, the output in
 * llama.cpp's order (layer, then name) and its last two keys those llama-quantize
 * sets. */
static void check_all(const model_spec *m, const toy_gguf *g, int ftype, bool pure) {
    static tensor_desc d[MAX_TENSORS];
    int n = model_tensors(m, d);
    const char *mode = pure ? " --pure" : "";
    CHECK_EQ(toy_gguf_n_tensors(g), n);
    for (int i = 0; i < n; i++) {
        const toy_gguf_tensor *t = toy_gguf_find_tensor(g, d[i].name);
        CHECK_MSG(t != NULL, "%s %s%s: %s missing", m->label, toy_ftype_name(ftype), mode,
                  d[i].name);
        if (!t) continue;
        int want = expected_type(m, ftype, pure, &d[i]);
        CHECK_MSG(t->type == want, "%s %s%s: %s is %s, llama.cpp gives %s", m->label,
                  toy_ftype_name(ftype), mode, d[i].name, type_str(t->type), type_str(want));
        CHECK_EQ(t->n_dims, d[i].n_dims);
        for (int k = 0; k < TOY_MAX_DIMS; k++) CHECK_EQ(t->ne[k], d[i].ne[k]);
    }
    for (int64_t i = 1; i < toy_gguf_n_tensors(g); i++) {
        const char *a = toy_gguf_tensor_at(g, i - 1)->name, *b = toy_gguf_tensor_at(g, i)->name;
        int la = tensor_layer(a), lb = tensor_layer(b);
        CHECK_MSG(la < lb || (la == lb && strcmp(a, b) < 0),
                  "%s %s: tensor order %s before %s is not llama.cpp's", m->label,
                  toy_ftype_name(ftype), a, b);
    }
    int64_t n_kv = toy_gguf_n_kv(g);
    CHECK(n_kv >= 2);
    if (n_kv < 2) return;
    uint64_t v = 0;
    CHECK_MSG(strcmp(toy_gguf_key(g, n_kv - 2), "general.quantization_version") == 0 &&
                  strcmp(toy_gguf_key(g, n_kv - 1), "general.file_type") == 0,
              "%s %s: last keys are %s, %s", m->label, toy_ftype_name(ftype),
              toy_gguf_key(g, n_kv - 2), toy_gguf_key(g, n_kv - 1));
    CHECK_EQ(toy_gguf_value_type(toy_gguf_kv(g, n_kv - 1)), TOY_GGUF_UINT32);
    CHECK(toy_gguf_value_u64(toy_gguf_kv(g, n_kv - 1), &v) == TOY_OK);
    CHECK_EQ(v, ftype);
    CHECK_EQ(toy_gguf_value_type(toy_gguf_kv(g, n_kv - 2)), TOY_GGUF_UINT32);
    CHECK(toy_gguf_value_u64(toy_gguf_kv(g, n_kv - 2), &v) == TOY_OK);
    CHECK_EQ(v, 2);
}

static void count_types(const toy_gguf *g, int *counts) {
    memset(counts, 0, TOY_TYPE_COUNT * sizeof *counts);
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) counts[toy_gguf_tensor_at(g, i)->type]++;
}

/* Two values alike in type and content (arrays element by element). */
static bool same_value(const toy_gguf_value *a, const toy_gguf_value *b) {
    toy_gguf_type type = toy_gguf_value_type(a);
    if (type != toy_gguf_value_type(b)) return false;
    const char *sa, *sb;
    size_t la, lb;
    switch (type) {
    case TOY_GGUF_STRING:
        return toy_gguf_value_str(a, &sa, &la) == TOY_OK &&
               toy_gguf_value_str(b, &sb, &lb) == TOY_OK && la == lb && memcmp(sa, sb, la) == 0;
    case TOY_GGUF_ARRAY: {
        toy_gguf_type et = toy_gguf_array_type(a);
        uint64_t n = toy_gguf_array_len(a);
        if (et != toy_gguf_array_type(b) || n != toy_gguf_array_len(b)) return false;
        for (uint64_t j = 0; j < n; j++) {
            if (et == TOY_GGUF_STRING) {
                if (toy_gguf_array_str(a, j, &sa, &la) || toy_gguf_array_str(b, j, &sb, &lb) ||
                    la != lb || memcmp(sa, sb, la) != 0)
                    return false;
            } else if (et == TOY_GGUF_ARRAY) {
                if (!same_value(toy_gguf_array_get(a, j), toy_gguf_array_get(b, j))) return false;
            } else {
                double x, y;
                if (toy_gguf_array_f64(a, j, &x) || toy_gguf_array_f64(b, j, &y) || x != y)
                    return false;
            }
        }
        return true;
    }
    case TOY_GGUF_BOOL: {
        bool x, y;
        return !toy_gguf_value_bool(a, &x) && !toy_gguf_value_bool(b, &y) && x == y;
    }
    case TOY_GGUF_FLOAT32:
    case TOY_GGUF_FLOAT64: {
        double x, y;
        return !toy_gguf_value_f64(a, &x) && !toy_gguf_value_f64(b, &y) && x == y;
    }
    default: {
        int64_t x, y;
        uint64_t ux, uy;
        if (!toy_gguf_value_i64(a, &x) && !toy_gguf_value_i64(b, &y)) return x == y;
        return !toy_gguf_value_u64(a, &ux) && !toy_gguf_value_u64(b, &uy) && ux == uy;
    }
    }
}

/* ---------------------------------------------------------------- the cases */

static const int all_ftypes[] = {
    TOY_FTYPE_ALL_F32,     TOY_FTYPE_MOSTLY_F16,    TOY_FTYPE_MOSTLY_BF16,
    TOY_FTYPE_MOSTLY_Q4_0, TOY_FTYPE_MOSTLY_Q4_1,   TOY_FTYPE_MOSTLY_Q5_0,
    TOY_FTYPE_MOSTLY_Q5_1, TOY_FTYPE_MOSTLY_Q8_0,   TOY_FTYPE_MOSTLY_Q2_K,
    TOY_FTYPE_MOSTLY_Q3_K_S, TOY_FTYPE_MOSTLY_Q3_K_M, TOY_FTYPE_MOSTLY_Q3_K_L,
    TOY_FTYPE_MOSTLY_Q4_K_S, TOY_FTYPE_MOSTLY_Q4_K_M, TOY_FTYPE_MOSTLY_Q5_K_S,
    TOY_FTYPE_MOSTLY_Q5_K_M, TOY_FTYPE_MOSTLY_Q6_K,   TOY_FTYPE_MOSTLY_IQ4_NL,
};
#define N_ALL_FTYPES (int)(sizeof all_ftypes / sizeof all_ftypes[0])

/* TinyLlama-1.1B's shape: 22 layers, 32 heads sharing 4 KV heads (n_gqa 8). */
static const model_spec tinyllama = {"tinyllama", "llama", 22, 32, 4, 0, 256, 256, 32,
                                     false, false, false};

/* Hand-counted type totals of the 22-layer llama per file type: 201 tensors, 45 of them
 * norms (F32), 156 weights (token_embd, output, 7 per layer). */
typedef struct {
    int ftype;
    struct {
        int type, count;
    } counts[5];
} count_row;

static const count_row tinyllama_counts[] = {
    /* output Q6_K; attn_v Q4_K (n_gqa 8 >= 4); ffn_down and attn_output Q3_K */
    {TOY_FTYPE_MOSTLY_Q2_K,
     {{TOY_TYPE_Q6_K, 1}, {TOY_TYPE_Q4_K, 22}, {TOY_TYPE_Q3_K, 44}, {TOY_TYPE_Q2_K, 89}}},
    {TOY_FTYPE_MOSTLY_Q3_K_S, {{TOY_TYPE_Q6_K, 1}, {TOY_TYPE_Q3_K, 155}}},
    /* attn_v Q5_K in layers 0-1, Q4_K after; ffn_down Q5_K in layer 0 (< 22/16), Q4_K
     * after; attn_output Q4_K */
    {TOY_FTYPE_MOSTLY_Q3_K_M,
     {{TOY_TYPE_Q6_K, 1}, {TOY_TYPE_Q5_K, 3}, {TOY_TYPE_Q4_K, 63}, {TOY_TYPE_Q3_K, 89}}},
    {TOY_FTYPE_MOSTLY_Q3_K_L, {{TOY_TYPE_Q6_K, 1}, {TOY_TYPE_Q5_K, 66}, {TOY_TYPE_Q3_K, 89}}},
    /* attn_v Q5_K in layers 0-3, ffn_down Q5_K in layers 0-1 (< 22/8) */
    {TOY_FTYPE_MOSTLY_Q4_K_S, {{TOY_TYPE_Q6_K, 1}, {TOY_TYPE_Q5_K, 6}, {TOY_TYPE_Q4_K, 149}}},
    /* llama.cpp's TinyLlama-1.1B Q4_K_M: 135 Q4_K, 21 Q6_K, 45 F32 */
    {TOY_FTYPE_MOSTLY_Q4_K_M, {{TOY_TYPE_Q6_K, 21}, {TOY_TYPE_Q4_K, 135}}},
    {TOY_FTYPE_MOSTLY_Q5_K_S, {{TOY_TYPE_Q6_K, 1}, {TOY_TYPE_Q5_K, 155}}},
    {TOY_FTYPE_MOSTLY_Q5_K_M, {{TOY_TYPE_Q6_K, 21}, {TOY_TYPE_Q5_K, 135}}},
    {TOY_FTYPE_MOSTLY_Q6_K, {{TOY_TYPE_Q6_K, 156}}},
    /* the output rule keeps Q8_0: "else if (new_type != GGML_TYPE_Q8_0)" */
    {TOY_FTYPE_MOSTLY_Q8_0, {{TOY_TYPE_Q8_0, 156}}},
    {TOY_FTYPE_MOSTLY_Q4_0, {{TOY_TYPE_Q6_K, 1}, {TOY_TYPE_Q4_0, 155}}},
    /* attn_v Q5_K (n_gqa >= 4), ffn_down Q5_K in layers 0-1 */
    {TOY_FTYPE_MOSTLY_IQ4_NL, {{TOY_TYPE_Q6_K, 1}, {TOY_TYPE_Q5_K, 24}, {TOY_TYPE_IQ4_NL, 131}}},
    {TOY_FTYPE_MOSTLY_F16, {{TOY_TYPE_F16, 156}}},
};

static void check_counts(const toy_gguf *g, const char *label, const count_row *row) {
    int counts[TOY_TYPE_COUNT], want[TOY_TYPE_COUNT] = {0};
    count_types(g, counts);
    want[TOY_TYPE_F32] = 45;
    for (int k = 0; k < 5 && row->counts[k].count; k++)
        want[row->counts[k].type] = row->counts[k].count;
    for (int type = 0; type < TOY_TYPE_COUNT; type++)
        CHECK_MSG(counts[type] == want[type], "%s %s: %d %s tensors, llama.cpp has %d", label,
                  toy_ftype_name(row->ftype), counts[type], type_str(type), want[type]);
}

/* Case 1: TinyLlama at Q4_K_M, by hand. use_more_bits(i, 22) holds for i < 2, i >= 19
 * and (i - 2) % 3 == 2: layers 0, 1, 4, 7, 10, 13, 16, 19, 20, 21. */
static void check_tinyllama_q4_k_m(const toy_gguf *g) {
    static const int more_bits[] = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
    char name[64];
    for (int il = 0; il < 22; il++) {
        bool more = false;
        for (size_t k = 0; k < sizeof more_bits / sizeof more_bits[0]; k++)
            more |= more_bits[k] == il;
        int want = more ? TOY_TYPE_Q6_K : TOY_TYPE_Q4_K;
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", il);
        CHECK_TYPE(g, name, want);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", il);
        CHECK_TYPE(g, name, want);
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_F32);
    }
    CHECK_TYPE(g, "output.weight", TOY_TYPE_Q6_K);
    CHECK_TYPE(g, "token_embd.weight", TOY_TYPE_Q4_K);
    CHECK_TYPE(g, "output_norm.weight", TOY_TYPE_F32);
}

/* Case 7: every input key is copied in order, general.file_type (present in the input)
 * moved to the end behind general.quantization_version, as gguf_set_val_u32 does
 * (gguf_remove_key, then kv.emplace_back). */
static void check_metadata(const toy_gguf *in, const toy_gguf *out) {
    int64_t n_in = toy_gguf_n_kv(in), n_out = toy_gguf_n_kv(out);
    CHECK_EQ(n_out, n_in + 1);
    int64_t j = 0;
    for (int64_t i = 0; i < n_in; i++) {
        const char *key = toy_gguf_key(in, i);
        if (strcmp(key, "general.file_type") == 0) continue;
        CHECK_MSG(j < n_out && strcmp(toy_gguf_key(out, j), key) == 0,
                  "output key %lld is %s, input has %s", (long long)j,
                  j < n_out ? toy_gguf_key(out, j) : "(none)", key);
        const toy_gguf_value *v = toy_gguf_get(out, key);
        CHECK_MSG(v && same_value(toy_gguf_kv(in, i), v), "key %s not copied as is", key);
        j++;
    }
    CHECK_EQ(j, n_out - 2);
}

static bool make_model(const model_spec *m, char *path, size_t size) {
    char file[64];
    snprintf(file, sizeof file, "%s.gguf", m->label);
    tmp_path(path, size, file);
    toy_status st = write_model(m, path);
    CHECK_MSG(st == TOY_OK, "writing %s: %s", m->label, toy_last_error());
    return st == TOY_OK;
}

/* Quantizes model m to every file type and checks every tensor; `extra` adds the
 * hand-written checks of a case. */
typedef void (*extra_checks)(const model_spec *m, const toy_gguf *g, int ftype);

static void run_model(const model_spec *m, extra_checks extra) {
    char in_path[128];
    if (!make_model(m, in_path, sizeof in_path)) return;
    for (int k = 0; k < N_ALL_FTYPES; k++) {
        toy_gguf *g = quantize(in_path, all_ftypes[k], false, m->label);
        if (!g) continue;
        check_all(m, g, all_ftypes[k], false);
        if (extra) extra(m, g, all_ftypes[k]);
        discard(g);
    }
    unlink(in_path);
}

/* Cases 1 and 2, on the model as written and on its tensors stored in reverse: the
 * attn_v counter follows llama.cpp's order, not the file's. */
static void tinyllama_checks(const model_spec *m, const toy_gguf *g, int ftype) {
    for (size_t k = 0; k < sizeof tinyllama_counts / sizeof tinyllama_counts[0]; k++)
        if (tinyllama_counts[k].ftype == ftype) check_counts(g, m->label, &tinyllama_counts[k]);
    if (ftype == TOY_FTYPE_MOSTLY_Q4_K_M) check_tinyllama_q4_k_m(g);
    if (ftype == TOY_FTYPE_MOSTLY_Q2_K) {
        CHECK_TYPE(g, "blk.0.attn_v.weight", TOY_TYPE_Q4_K);
        CHECK_TYPE(g, "blk.0.attn_output.weight", TOY_TYPE_Q3_K);
        CHECK_TYPE(g, "blk.0.ffn_down.weight", TOY_TYPE_Q3_K);
        CHECK_TYPE(g, "blk.0.ffn_up.weight", TOY_TYPE_Q2_K);
    }
    if (ftype == TOY_FTYPE_MOSTLY_IQ4_NL) {
        CHECK_TYPE(g, "blk.1.ffn_down.weight", TOY_TYPE_Q5_K);
        CHECK_TYPE(g, "blk.2.ffn_down.weight", TOY_TYPE_IQ4_NL);
        CHECK_TYPE(g, "token_embd.weight", TOY_TYPE_IQ4_NL);
    }
}

/* Case 3: without output.weight, token_embd takes the output rule. */
static void tied_checks(const model_spec *m, const toy_gguf *g, int ftype) {
    switch (ftype) {
    case TOY_FTYPE_MOSTLY_Q2_K:
    case TOY_FTYPE_MOSTLY_Q3_K_M:
    case TOY_FTYPE_MOSTLY_Q4_K_M:
    case TOY_FTYPE_MOSTLY_Q5_K_S:
    case TOY_FTYPE_MOSTLY_Q4_0: CHECK_TYPE(g, "token_embd.weight", TOY_TYPE_Q6_K); break;
    case TOY_FTYPE_MOSTLY_Q8_0: CHECK_TYPE(g, "token_embd.weight", TOY_TYPE_Q8_0); break;
    case TOY_FTYPE_MOSTLY_F16: CHECK_TYPE(g, "token_embd.weight", TOY_TYPE_F16); break;
    }
    if (ftype == TOY_FTYPE_MOSTLY_Q4_K_M) {
        int counts[TOY_TYPE_COUNT];
        count_types(g, counts);
        CHECK_EQ(counts[TOY_TYPE_Q6_K], 21); /* token_embd + 10 attn_v + 10 ffn_down */
        CHECK_EQ(counts[TOY_TYPE_Q4_K], 134);
        CHECK_EQ(counts[TOY_TYPE_F32], 45);
    }
}

/* Case 4: rows of 128 elements fit no 256-block. */
static void narrow_checks(const model_spec *m, const toy_gguf *g, int ftype) {
    switch (ftype) {
    case TOY_FTYPE_MOSTLY_Q4_K_M:
        CHECK_TYPE(g, "blk.0.attn_q.weight", TOY_TYPE_Q5_0);   /* Q4_K -> Q5_0 */
        CHECK_TYPE(g, "blk.0.attn_v.weight", TOY_TYPE_Q8_0);   /* Q6_K -> Q8_0 */
        CHECK_TYPE(g, "blk.1.attn_v.weight", TOY_TYPE_Q5_0);   /* use_more_bits(1, 8) false */
        CHECK_TYPE(g, "blk.7.ffn_down.weight", TOY_TYPE_Q8_0); /* Q6_K -> Q8_0 */
        CHECK_TYPE(g, "token_embd.weight", TOY_TYPE_Q5_0);
        CHECK_TYPE(g, "output.weight", TOY_TYPE_Q8_0); /* "nx % qk_k != 0" -> Q8_0 */
        break;
    case TOY_FTYPE_MOSTLY_Q5_K_S:
        CHECK_TYPE(g, "blk.0.attn_q.weight", TOY_TYPE_Q5_1);
        CHECK_TYPE(g, "output.weight", TOY_TYPE_Q8_0);
        break;
    case TOY_FTYPE_MOSTLY_Q6_K:
        CHECK_TYPE(g, "blk.0.ffn_up.weight", TOY_TYPE_Q8_0);
        CHECK_TYPE(g, "output.weight", TOY_TYPE_Q8_0);
        break;
    case TOY_FTYPE_MOSTLY_Q2_K:
        CHECK_TYPE(g, "blk.0.attn_q.weight", TOY_TYPE_IQ4_NL);      /* Q2_K -> IQ4_NL */
        CHECK_TYPE(g, "blk.0.ffn_down.weight", TOY_TYPE_IQ4_NL);    /* Q3_K -> IQ4_NL */
        CHECK_TYPE(g, "blk.0.attn_output.weight", TOY_TYPE_IQ4_NL); /* Q3_K -> IQ4_NL */
        CHECK_TYPE(g, "blk.0.attn_v.weight", TOY_TYPE_Q5_0);        /* Q4_K -> Q5_0 */
        CHECK_TYPE(g, "output.weight", TOY_TYPE_Q8_0);
        break;
    case TOY_FTYPE_MOSTLY_Q3_K_S:
        CHECK_TYPE(g, "blk.3.attn_k.weight", TOY_TYPE_IQ4_NL);
        CHECK_TYPE(g, "token_embd.weight", TOY_TYPE_IQ4_NL);
        break;
    case TOY_FTYPE_MOSTLY_Q4_0: /* the output rule's Q6_K, then Q6_K -> Q8_0 */
        CHECK_TYPE(g, "output.weight", TOY_TYPE_Q8_0);
        CHECK_TYPE(g, "blk.0.attn_q.weight", TOY_TYPE_Q4_0);
        break;
    }
}

/* Case 5: Mixtral-like, 8 experts. use_more_bits(i, 16): layers 0, 1, 4, 7, 10, 13, 14,
 * 15, the layer of ffn_down_exps parsed from its name. */
static void moe_checks(const model_spec *m, const toy_gguf *g, int ftype) {
    if (ftype != TOY_FTYPE_MOSTLY_Q4_K_M) return;
    static const bool more_bits[16] = {1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1};
    char name[64];
    for (int il = 0; il < 16; il++) {
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_Q8_0);
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_Q8_0);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_output.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_Q5_K);
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_F32);
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", il);
        CHECK_TYPE(g, name, TOY_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", il);
        CHECK_TYPE(g, name, more_bits[il] ? TOY_TYPE_Q6_K : TOY_TYPE_Q4_K);
    }
    CHECK_TYPE(g, "output.weight", TOY_TYPE_Q6_K);
}

/* phi3's fused attn_qkv has its own rule: Q4_K_M -> Q5_K, Q5_K_M -> Q6_K. */
static void phi3_checks(const model_spec *m, const toy_gguf *g, int ftype) {
    if (ftype == TOY_FTYPE_MOSTLY_Q4_K_M) {
        CHECK_TYPE(g, "blk.0.attn_qkv.weight", TOY_TYPE_Q5_K);
        CHECK_TYPE(g, "blk.5.attn_qkv.weight", TOY_TYPE_Q5_K);
        CHECK_TYPE(g, "blk.0.ffn_down.weight", TOY_TYPE_Q6_K);
        CHECK_TYPE(g, "blk.5.ffn_down.weight", TOY_TYPE_Q4_K);
        CHECK_TYPE(g, "blk.0.ffn_up.weight", TOY_TYPE_Q4_K);
    }
    if (ftype == TOY_FTYPE_MOSTLY_Q5_K_M) CHECK_TYPE(g, "blk.3.attn_qkv.weight", TOY_TYPE_Q6_K);
    if (ftype == TOY_FTYPE_MOSTLY_Q3_K_M) CHECK_TYPE(g, "blk.3.attn_qkv.weight", TOY_TYPE_Q4_K);
    if (ftype == TOY_FTYPE_MOSTLY_Q2_K) CHECK_TYPE(g, "blk.3.attn_qkv.weight", TOY_TYPE_Q2_K);
}

/* Case 6: --pure gives every quantizable tensor the base type, norms and ffn_gate_inp
 * stay F32. */
static void run_pure(const model_spec *m) {
    static const int ftypes[] = {TOY_FTYPE_MOSTLY_Q4_K_M, TOY_FTYPE_MOSTLY_Q2_K,
                                 TOY_FTYPE_MOSTLY_Q3_K_L, TOY_FTYPE_MOSTLY_IQ4_NL};
    char in_path[128];
    if (!make_model(m, in_path, sizeof in_path)) return;
    for (size_t k = 0; k < sizeof ftypes / sizeof ftypes[0]; k++) {
        toy_gguf *g = quantize(in_path, ftypes[k], true, m->label);
        if (!g) continue;
        check_all(m, g, ftypes[k], true);
        int base = ftype_base_type(ftypes[k]);
        CHECK_TYPE(g, "output.weight", base);
        CHECK_TYPE(g, "blk.0.attn_v.weight", base);
        CHECK_TYPE(g, m->n_expert > 1 ? "blk.0.ffn_down_exps.weight" : "blk.0.ffn_down.weight",
                   base);
        discard(g);
    }
    unlink(in_path);
}

/* Case 7 on the TinyLlama model at Q4_K_M. */
static void run_metadata(void) {
    char in_path[128];
    if (!make_model(&tinyllama, in_path, sizeof in_path)) return;
    toy_gguf *in = NULL;
    CHECK(toy_gguf_open(in_path, &in) == TOY_OK);
    toy_gguf *out = quantize(in_path, TOY_FTYPE_MOSTLY_Q4_K_M, false, "metadata");
    if (in && out) check_metadata(in, out);
    if (out) discard(out);
    toy_gguf_close(in);
    unlink(in_path);
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/toy_quantize_mix_XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }

    model_spec reversed = tinyllama;
    reversed.label = "tinyllama-reversed";
    reversed.reversed = true;
    model_spec tied = tinyllama;
    tied.label = "tinyllama-tied";
    tied.tied = true;
    /* 8 layers, rows of 128: llama.cpp's fallbacks */
    const model_spec narrow = {"narrow", "llama", 8, 32, 4, 0, 128, 128, 32,
                               false, false, false};
    const model_spec phi3 = {"phi3", "phi3", 16, 32, 32, 0, 256, 256, 32, false, true, false};
    /* Mixtral's n_head 32, n_head_kv 8 */
    const model_spec moe = {"moe", "llama", 16, 32, 8, 8, 256, 256, 32, false, false, false};

    run_model(&tinyllama, tinyllama_checks);
    run_model(&reversed, tinyllama_checks);
    run_model(&tied, tied_checks);
    run_model(&narrow, narrow_checks);
    run_model(&phi3, phi3_checks);
    run_model(&moe, moe_checks);
    run_pure(&tinyllama);
    run_pure(&moe);
    run_metadata();

    if (rmdir(tmp_dir) != 0) perror(tmp_dir);
    return test_finish("test_quantize_mix");
}
