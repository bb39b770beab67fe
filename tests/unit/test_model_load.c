/* test_model_load.c — binding a model: the per-head layout of toy's design (one tensor per
 * head, blk.N.attn_q.head_H.weight, and per-head biases) gives the same logits as the
 * standard one, told by its sentinel whatever toy.ggml_native says (in the design, that
 * key marks the standard layout); a broken model file is an error naming what is wrong. */
#include <stdint.h>
#include <unistd.h>

#include "test.h"
#include "toy.h"
#include "init_models.h"

static char tmpdir[] = "/tmp/toy_model_load_XXXXXX";

/* EDIT_PER_HEAD: split Q, K, V (and their biases) by head, with toy.ggml_native = true as
 * toy once wrote them; EDIT_PER_HEAD_BARE: the same without the key; EDIT_NATIVE: the
 * standard layout with the key true, the design's meaning */
typedef enum {
    EDIT_NONE, EDIT_PER_HEAD, EDIT_PER_HEAD_BARE, EDIT_DROP_PER_HEAD_BIAS, EDIT_NATIVE, EDIT_DROP, EDIT_RESHAPE,
    EDIT_ARCH, EDIT_DROP_KEY
} edit;

/* Copies `src` to a new file with one edit; returns its path (static buffer). */
static const char *write_variant(const toy_gguf *src, edit e, const char *what) {
    static char path[512];
    static int counter;
    snprintf(path, sizeof path, "%s/m%d.gguf", tmpdir, counter++);
    toy_gguf_writer *w = toy_gguf_writer_new();
    for (int64_t i = 0; i < toy_gguf_n_kv(src); i++) {
        const char *key = toy_gguf_key(src, i);
        if (e == EDIT_DROP_KEY && !strcmp(key, what)) continue;
        CHECK(toy_gguf_writer_set_value(w, key, toy_gguf_kv(src, i)) == TOY_OK);
    }
    if (e == EDIT_ARCH) CHECK(toy_gguf_writer_set_str(w, "general.architecture", what, strlen(what)) == TOY_OK);
    if (e == EDIT_PER_HEAD || e == EDIT_NATIVE) CHECK(toy_gguf_writer_set_bool(w, "toy.ggml_native", true) == TOY_OK);
    uint64_t n_head = 0, n_head_kv = 0;
    const char *arch_s;
    size_t arch_len;
    CHECK(toy_gguf_get_str(src, "general.architecture", &arch_s, &arch_len) == TOY_OK);
    char key[128];
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)arch_len, arch_s);
    toy_gguf_get_u64(src, key, &n_head);
    snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)arch_len, arch_s);
    toy_gguf_get_u64(src, key, &n_head_kv);
    for (int64_t i = 0; i < toy_gguf_n_tensors(src); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(src, i);
        if (e == EDIT_DROP && !strcmp(t->name, what)) continue;
        if (e == EDIT_RESHAPE && !strcmp(t->name, what)) {
            int64_t ne[2] = {t->ne[0], t->ne[1] / 2};
            CHECK(toy_gguf_writer_add_tensor(w, t->name, t->type, 2, ne, t->data) == TOY_OK);
            continue;
        }
        const char *dot = strstr(t->name, ".attn_");
        bool split = (e == EDIT_PER_HEAD || e == EDIT_PER_HEAD_BARE || e == EDIT_DROP_PER_HEAD_BIAS) && dot &&
                     strlen(dot) > 8 &&
                     strchr("qkv", dot[6]) && dot[7] == '.' &&
                     (!strcmp(dot + 7, ".weight") || !strcmp(dot + 7, ".bias"));
        if (!split) {
            CHECK(toy_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) == TOY_OK);
            continue;
        }
        /* one [n_embd, head_dim] tensor (or [head_dim] bias) per head: rows h*head_dim .. */
        const bool bias = !strcmp(dot + 7, ".bias");
        int64_t heads = dot[6] == 'q' ? (int64_t)n_head : (int64_t)n_head_kv;
        int64_t hd = (bias ? t->ne[0] : t->ne[1]) / heads;
        size_t row = 0; /* bytes of one row of a matrix, or of one element of a bias */
        CHECK(toy_type_row_size(t->type, bias ? 1 : t->ne[0], &row) == TOY_OK);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(dot + 7 - t->name), t->name);
        for (int64_t h = 0; h < heads; h++) {
            char name[96];
            snprintf(name, sizeof name, "%s.head_%lld.%s", prefix, (long long)h, bias ? "bias" : "weight");
            if (e == EDIT_DROP_PER_HEAD_BIAS && !strcmp(name, "blk.1.attn_k.head_0.bias")) continue;
            int64_t ne[2] = {bias ? hd : t->ne[0], hd};
            CHECK(toy_gguf_writer_add_tensor(w, name, t->type, bias ? 1 : 2, ne,
                                             (const uint8_t *)t->data + (size_t)(h * hd) * row) == TOY_OK);
        }
    }
    CHECK_MSG(toy_gguf_writer_write(w, path) == TOY_OK, "%s", toy_last_error());
    toy_gguf_writer_free(w);
    return path;
}

static float *logits_of(const char *path, const int32_t *tok, int n, int32_t *n_vocab) {
    toy_model *m;
    if (toy_model_load(path, &m) != TOY_OK) {
        CHECK_MSG(0, "%s", toy_last_error());
        return NULL;
    }
    *n_vocab = toy_model_n_vocab(m);
    toy_context_params p = toy_context_default_params();
    p.n_ctx = 64;
    p.n_outputs = n;
    toy_context *ctx;
    CHECK(toy_context_new(m, &p, &ctx) == TOY_OK);
    int32_t pos[64], seq[64] = {0};
    int8_t want[64];
    for (int i = 0; i < n; i++) pos[i] = i, want[i] = 1;
    toy_batch b = {n, tok, pos, seq, want};
    CHECK(toy_decode(ctx, &b) == TOY_OK);
    float *out = malloc((size_t)n * *n_vocab * sizeof *out);
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * *n_vocab, toy_get_logits(ctx, i), (size_t)*n_vocab * sizeof *out);
    toy_context_free(ctx);
    toy_model_free(m);
    return out;
}

static void expect_load_error(const char *path, const char *needle) {
    toy_model *m = NULL;
    toy_status st = toy_model_load(path, &m);
    CHECK_MSG(st != TOY_OK, "loading a broken model succeeded (expected '%s')", needle);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(toy_last_error(), needle);
    CHECK(strchr(toy_last_error(), '\n') == NULL);
    toy_model_free(m);
}

int main(void) {
    /* an F32 llama: the fixtures', or without them one of toy_init_model */
    const char *fix = test_fixtures_dir(), *init = fix ? NULL : test_init_models_dir();
    if (!fix && !init) return test_finish("test_model_load");
    CHECK(mkdtemp(tmpdir) != NULL);
    char base[4400];
    if (fix) snprintf(base, sizeof base, "%s/models/llama-spm-f32.gguf", fix);
    else snprintf(base, sizeof base, "%s/models/init-llama-f32.gguf", init);
    toy_gguf *src;
    CHECK(toy_gguf_open(base, &src) == TOY_OK);

    /* the per-head layout computes exactly what the fused one does */
    const int32_t tok[8] = {1, 15, 300, 42, 1000, 7, 512, 2000};
    int32_t nv1 = 0, nv2 = 0;
    float *a = logits_of(base, tok, 8, &nv1);
    static const edit same[3] = {EDIT_PER_HEAD, EDIT_PER_HEAD_BARE, EDIT_NATIVE};
    for (int v = 0; v < 3; v++) {
        float *b = logits_of(write_variant(src, same[v], NULL), tok, 8, &nv2);
        CHECK(a && b && nv1 == nv2);
        if (a && b) CHECK_MSG(!memcmp(a, b, (size_t)8 * nv1 * sizeof(float)), "layout %d: other logits", (int)same[v]);
        free(b);
    }
    free(a);
    /* with per-head biases (a qwen2: Q, K and V have biases), the same bits too */
    char qwen[4400];
    if (fix) snprintf(qwen, sizeof qwen, "%s/models/qwen2-f16.gguf", fix);
    else snprintf(qwen, sizeof qwen, "%s/models/init-qwen2-f16.gguf", init);
    toy_gguf *qsrc;
    CHECK(toy_gguf_open(qwen, &qsrc) == TOY_OK);
    a = logits_of(qwen, tok, 8, &nv1);
    float *b = logits_of(write_variant(qsrc, EDIT_PER_HEAD_BARE, NULL), tok, 8, &nv2);
    CHECK(a && b && nv1 == nv2);
    if (a && b) CHECK_MSG(!memcmp(a, b, (size_t)8 * nv1 * sizeof(float)), "per-head biases: other logits");
    free(a);
    free(b);
    expect_load_error(write_variant(qsrc, EDIT_DROP_PER_HEAD_BIAS, NULL), "blk.1.attn_k.head_0.bias is missing");
    toy_gguf_close(qsrc);

    /* a malformed batch is an error, not a crash */
    {
        toy_model *m;
        CHECK(toy_model_load(base, &m) == TOY_OK);
        toy_context *ctx;
        CHECK(toy_context_new(m, NULL, &ctx) == TOY_OK);
        int32_t tk[2] = {1, 99999}, ps[2] = {0, 1}, sq[2] = {0, 0};
        toy_batch nopos = {1, tk, NULL, sq, NULL};
        CHECK(toy_decode(ctx, &nopos) == TOY_ERR_INVALID);
        CHECK_STR_CONTAINS(toy_last_error(), "positions");
        toy_batch bad_token = {2, tk, ps, sq, NULL};
        CHECK(toy_decode(ctx, &bad_token) == TOY_ERR_INVALID);
        CHECK_STR_CONTAINS(toy_last_error(), "99999");
        int32_t bad_seq = 5;
        toy_batch bad_s = {1, tk, ps, &bad_seq, NULL};
        CHECK(toy_decode(ctx, &bad_s) == TOY_ERR_INVALID);
        CHECK_STR_CONTAINS(toy_last_error(), "sequence id 5");
        CHECK(toy_decode(ctx, NULL) == TOY_ERR_INVALID);
        toy_context_params bad_attn = toy_context_default_params();
        bad_attn.attn = (toy_attn)7;
        toy_context *none = NULL;
        CHECK(toy_context_new(m, &bad_attn, &none) == TOY_ERR_INVALID && none == NULL);
        CHECK_STR_CONTAINS(toy_last_error(), "attention 7 is neither");
        CHECK(toy_get_logits(ctx, 0) == NULL); /* nothing decoded yet */
        toy_context_free(ctx);
        toy_model_free(m);
    }

    /* errors name the tensor, key or architecture */
    expect_load_error(write_variant(src, EDIT_DROP, "blk.1.ffn_up.weight"), "blk.1.ffn_up.weight");
    expect_load_error(write_variant(src, EDIT_RESHAPE, "blk.0.attn_q.weight"), "blk.0.attn_q.weight");
    expect_load_error(write_variant(src, EDIT_DROP, "output_norm.weight"), "output_norm.weight");
    expect_load_error(write_variant(src, EDIT_DROP_KEY, "llama.block_count"), "llama.block_count");
    expect_load_error(write_variant(src, EDIT_DROP_KEY, "tokenizer.ggml.tokens"), "tokenizer.ggml.tokens");
    const char *unknown = write_variant(src, EDIT_ARCH, "mamba");
    expect_load_error(unknown, "'mamba' is not supported");
    expect_load_error(unknown, "qwen3moe"); /* the list of supported ones */
    expect_load_error("/nonexistent/model.gguf", "/nonexistent/model.gguf");

    toy_gguf_close(src);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    CHECK(system(cmd) == 0);
    return test_finish("test_model_load");
}
