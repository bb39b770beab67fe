/* test_abi.c — the ABI rules of toy.h: the version, structs that carry their size (an
 * older program's shorter struct gets the defaults of the fields it lacks; a result is
 * written no further than its caller's size; size 0 and a newer size are errors naming
 * the struct), and toy_model_params.use_mmap, which must not change a logit. */
#include <stddef.h>

#include "test.h"
#include "toy.h"

static void test_version(void) {
    int major = -1, minor = -1, patch = -1;
    const int v = toy_version(&major, &minor, &patch);
    CHECK_EQ(major, TOY_VERSION_MAJOR);
    CHECK_EQ(minor, TOY_VERSION_MINOR);
    CHECK_EQ(patch, TOY_VERSION_PATCH);
    CHECK_EQ(v, TOY_VERSION_MAJOR * 1000000 + TOY_VERSION_MINOR * 1000 + TOY_VERSION_PATCH);
    CHECK_EQ(toy_version(NULL, NULL, NULL), v);
    char s[32];
    snprintf(s, sizeof s, "%d.%d.%d", major, minor, patch);
    CHECK_MSG(!strcmp(s, TOY_VERSION_STRING), "%s against TOY_VERSION_STRING %s", s, TOY_VERSION_STRING);
}

/* An "older program": its toy_sampler_params ended before min_p. The library must give
 * min_p and what follows their defaults, whatever bytes lie beyond the old size. */
static void test_short_params(void) {
    toy_sampler_params full = toy_sampler_default_params();
    CHECK_EQ(full.size, sizeof full);
    unsigned char buf[sizeof(toy_sampler_params)];
    memset(buf, 0xA5, sizeof buf); /* garbage past the old end */
    toy_sampler_params *old = (toy_sampler_params *)buf;
    const size_t old_size = offsetof(toy_sampler_params, min_p);
    toy_sampler_params_init(old, old_size);
    CHECK_EQ(old->size, old_size);
    CHECK(old->temperature == 0.8f && old->top_k == 40);
    /* init wrote nothing past the old size */
    for (size_t i = old_size; i < sizeof buf; i++) CHECK_EQ(buf[i], 0xA5);
    old->temperature = 0.0f; /* greedy */
    toy_sampler *s = NULL;
    CHECK_MSG(toy_sampler_new(old, 4, &s) == TOY_OK, "%s", toy_last_error());
    if (s) {
        /* with min_p and the penalties read from the garbage, the sampler would be refused
         * (a repeat penalty of 0xA5A5A5A5 as a float is negative) or sample otherwise */
        const float logits[4] = {0.1f, 2.0f, 1.9f, -1.0f};
        CHECK_EQ(toy_sampler_sample(s, logits), 1);
        toy_sampler_free(s);
    }

    /* a context from an older program's shorter toy_context_params: n_batch 64 read,
     * everything from n_threads on its default */
    unsigned char cbuf[sizeof(toy_context_params)];
    memset(cbuf, 0xFF, sizeof cbuf);
    toy_context_params *cp = (toy_context_params *)cbuf;
    toy_context_params_init(cp, offsetof(toy_context_params, n_threads));
    cp->n_batch = 64;
    const char *fix = test_fixtures_dir();
    if (!fix) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/models/llama-spm-f32.gguf", fix);
    toy_model *m = NULL;
    CHECK_MSG(toy_model_load(path, &m) == TOY_OK, "%s", toy_last_error());
    if (!m) return;
    toy_context *ctx = NULL;
    CHECK_MSG(toy_context_new(m, cp, &ctx) == TOY_OK, "%s", toy_last_error());
    if (ctx) {
        CHECK_EQ(toy_n_batch(ctx), 64);
        CHECK_EQ(toy_n_ctx(ctx), toy_model_n_ctx_train(m));
        toy_context_free(ctx);
    }
    toy_model_free(m);
}

static void test_bad_sizes(void) {
    toy_sampler_params zero;
    memset(&zero, 0, sizeof zero);
    toy_sampler *s = NULL;
    CHECK(toy_sampler_new(&zero, 4, &s) == TOY_ERR_INVALID && !s);
    CHECK_STR_CONTAINS(toy_last_error(), "toy_sampler_params: size is 0");

    /* a program built against a newer header: more bytes than this library knows */
    struct {
        toy_model_params p;
        char newer_fields[16];
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.p.size = sizeof newer;
    newer.p.use_mmap = true;
    toy_model *m = NULL;
    CHECK(toy_model_load_with("unused.gguf", &newer.p, &m) == TOY_ERR_INVALID && !m);
    CHECK_STR_CONTAINS(toy_last_error(), "toy_model_params: size is");
    CHECK_STR_CONTAINS(toy_last_error(), "newer toy.h");

    toy_quantize_params q;
    memset(&q, 0, sizeof q);
    CHECK(toy_quantize_file("in.gguf", "out.gguf", TOY_FTYPE_MOSTLY_Q8_0, &q) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "toy_quantize_params: size is 0");

    /* toy_grad: no params, no model, too few tokens are errors naming what is wrong */
    const int32_t tok[2] = {1, 2};
    CHECK(toy_grad(NULL, tok, 2, "g.gguf", NULL) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "params is NULL");
    toy_grad_params gp = toy_grad_default_params();
    CHECK(toy_grad(&gp, tok, 2, "g.gguf", NULL) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "neither model nor model_path");
    gp.model_path = "unused.gguf";
    CHECK(toy_grad(&gp, tok, 1, "g.gguf", NULL) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "at least 2 tokens, got 1");
    memset(&gp, 0, sizeof gp);
    CHECK(toy_grad(&gp, tok, 2, "g.gguf", NULL) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "toy_grad_params: size is 0");
}

/* A result the caller sized shorter than the library's struct: no byte past it written. */
static void test_short_result(const char *dir) {
    char data[4200], out[4200];
    snprintf(data, sizeof data, "%s/abi_text.txt", dir);
    snprintf(out, sizeof out, "%s/abi_tok.gguf", dir);
    FILE *f = fopen(data, "w");
    CHECK(f != NULL);
    if (!f) return;
    for (int i = 0; i < 50; i++) fputs("the quick brown fox jumps over the lazy dog. ", f);
    fclose(f);
    unsigned char buf[sizeof(toy_tokenizer_train_stats) + 8];
    memset(buf, 0x5A, sizeof buf);
    toy_tokenizer_train_stats *stats = (toy_tokenizer_train_stats *)buf;
    const size_t old_size = offsetof(toy_tokenizer_train_stats, n_distinct);
    stats->size = old_size;
    const char *paths[1] = {data};
    toy_tokenizer_train_params p = toy_tokenizer_train_default_params();
    p.data_paths = paths;
    p.n_data = 1;
    p.vocab_size = 300;
    p.stats = stats;
    CHECK_MSG(toy_tokenizer_train(&p, out) == TOY_OK, "%s", toy_last_error());
    CHECK_EQ(stats->size, old_size);
    CHECK_EQ(stats->n_bytes, 50 * 45);
    CHECK(stats->n_pretokens > 0);
    for (size_t i = old_size; i < sizeof buf; i++) CHECK_EQ(buf[i], 0x5A);
    remove(out);
    remove(data);

    toy_tokenizer_train_stats unsized;
    memset(&unsized, 0, sizeof unsized);
    p.stats = &unsized;
    CHECK(toy_tokenizer_train(&p, out) == TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "toy_tokenizer_train_stats: size is 0");
}

/* use_mmap false reads the file into memory: the same logits, bit for bit. The bundled
 * model is the regression test of a bug: after packing a matrix, its pages were dropped
 * with MADV_DONTNEED, which zeroes allocated memory (the embedding, tied to the output,
 * read back as zeros); the fixtures' matrices are smaller than a page. */
static void test_no_mmap(const char *fix) {
    static const char *const models[] = {TOY_SOURCE_DIR "/models/toy-kjv.gguf", "llama-spm-f32.gguf",
                                         "llama-spm-q4_k_m.gguf", "qwen2-f16.gguf", "mixtral-f16.gguf"};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        char path[4200];
        if (k == 0) snprintf(path, sizeof path, "%s", models[k]);
        else if (fix) snprintf(path, sizeof path, "%s/models/%s", fix, models[k]);
        else break;
        float *logits[2] = {NULL, NULL};
        int32_t n_vocab = 0;
        for (int mode = 0; mode < 2; mode++) {
            toy_model_params mp = toy_model_default_params();
            CHECK(mp.use_mmap);
            mp.use_mmap = mode == 0;
            toy_model *m = NULL;
            CHECK_MSG(toy_model_load_with(path, &mp, &m) == TOY_OK, "%s: %s", models[k], toy_last_error());
            if (!m) continue;
            n_vocab = toy_model_n_vocab(m);
            toy_context_params cp = toy_context_default_params();
            cp.n_ctx = 64;
            toy_context *ctx = NULL;
            CHECK_MSG(toy_context_new(m, &cp, &ctx) == TOY_OK, "%s", toy_last_error());
            const int32_t tokens[6] = {1, 17, 42, 99, 5, 23}, pos[6] = {0, 1, 2, 3, 4, 5}, seq[6] = {0};
            const toy_batch b = {6, tokens, pos, seq, NULL};
            if (ctx && toy_decode(ctx, &b) == TOY_OK) {
                logits[mode] = xmalloc((size_t)n_vocab * sizeof(float));
                memcpy(logits[mode], toy_get_logits(ctx, 5), (size_t)n_vocab * sizeof(float));
            } else {
                CHECK_MSG(0, "%s: %s", models[k], toy_last_error());
            }
            toy_context_free(ctx);
            toy_model_free(m);
        }
        CHECK_MSG(logits[0] && logits[1] && !memcmp(logits[0], logits[1], (size_t)n_vocab * sizeof(float)),
                  "%s: the logits differ with and without mmap", models[k]);
        free(logits[0]);
        free(logits[1]);
    }
    /* an unreadable file is an error naming it either way */
    toy_model_params mp = toy_model_default_params();
    mp.use_mmap = false;
    toy_model *m = NULL;
    CHECK(toy_model_load_with("/nonexistent/x.gguf", &mp, &m) == TOY_ERR_IO && !m);
    CHECK_STR_CONTAINS(toy_last_error(), "/nonexistent/x.gguf: cannot open");
}

int main(void) {
    test_version();
    test_short_params();
    test_bad_sizes();
    char dir[] = "/tmp/toy_abi_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    test_short_result(dir);
    remove(dir);
    const char *fix = test_fixtures_dir();
    test_no_mmap(fix);
    if (!fix) printf("test_abi: fixtures absent, the mmap/no-mmap comparison ran on the bundled model only\n");
    return test_finish("test_abi");
}
