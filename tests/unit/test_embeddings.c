/* test_embeddings.c — toy_get_embeddings and toy_model_pooling on fixture models.
 *
 * - a context with `embeddings` keeps every token's final-norm state: row i is, bit for
 *   bit, the "final_norm" trace row of token i (the output projection's input) of a run
 *   with every logit asked for, whether the token's logits were asked for or not, and
 *   whatever chunk of the sequence its batch held; the logits are the same bits as
 *   without `embeddings`; without it there are none;
 * - so the mean of a sequence pooled over chunks is the mean of the trace rows;
 * - toy_model_pooling: absent (the fixtures) is UNSPECIFIED; <arch>.pooling_type 2 is
 *   CLS; a value outside llama.cpp's enum, or not an integer, fails the load naming
 *   the key.
 */
#include <errno.h>
#include <unistd.h>

#include "test.h"
#include "toy.h"
#include "init_models.h"

typedef struct {
    float *rows; /* the final_norm rows of the last traced batch */
    int64_t n_rows, n;
} final_norm_trace;

static void on_trace(void *user, const char *name, const float *data, int64_t n_tokens, int64_t n) {
    final_norm_trace *t = user;
    if (strcmp(name, "final_norm")) return;
    free(t->rows);
    t->rows = xmalloc((size_t)(n_tokens * n) * sizeof *t->rows);
    memcpy(t->rows, data, (size_t)(n_tokens * n) * sizeof *t->rows);
    t->n_rows = n_tokens;
    t->n = n;
}

static toy_batch sequence_batch(const int32_t *tok, int32_t first, int32_t n, int32_t *pos, int32_t *seq,
                                const int8_t *want) {
    for (int32_t i = 0; i < n; i++) pos[i] = first + i, seq[i] = 0;
    return (toy_batch){n, tok + first, pos, seq, want};
}

static void check_model(const char *fix, const char *name) {
    char path[4400];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, name);
    toy_model *m;
    if (toy_model_load(path, &m)) {
        CHECK_MSG(false, "%s: %s", name, toy_last_error());
        return;
    }
    CHECK_EQ(toy_model_pooling(m), TOY_POOLING_UNSPECIFIED);
    const char *text = "Hello world! The café fox ran 42 km, then slept. And then it woke up again.";
    int32_t *tok, n;
    CHECK(toy_tokenize_alloc(toy_model_vocab(m), text, strlen(text), true, false, &tok, &n) == TOY_OK);
    const int64_t n_embd = toy_model_n_embd(m), n_vocab = toy_model_n_vocab(m);
    int32_t *pos = xmalloc((size_t)n * sizeof *pos), *seq = xmalloc((size_t)n * sizeof *seq);
    int8_t *all = xmalloc((size_t)n), *none = xmalloc((size_t)n);
    memset(all, 1, (size_t)n);
    memset(none, 0, (size_t)n);

    /* A: no embeddings, every logit; the trace's final_norm rows are the reference */
    final_norm_trace tr = {0};
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = 128;
    cp.n_outputs = n;
    cp.trace = on_trace;
    cp.trace_user = &tr;
    toy_context *a, *b, *c;
    CHECK(toy_context_new(m, &cp, &a) == TOY_OK);
    toy_batch batch = sequence_batch(tok, 0, n, pos, seq, all);
    CHECK(toy_decode(a, &batch) == TOY_OK);
    CHECK_EQ(tr.n_rows, n);
    CHECK_EQ(tr.n, n_embd);
    CHECK(toy_get_embeddings(a, 0) == NULL); /* off: none */
    float *logits_a = xmalloc((size_t)(n * n_vocab) * sizeof *logits_a);
    for (int32_t i = 0; i < n; i++)
        memcpy(logits_a + i * n_vocab, toy_get_logits(a, i), (size_t)n_vocab * sizeof(float));
    float *ref = tr.rows;
    tr.rows = NULL;

    /* B: embeddings on, the same batch: the trace's rows, and the same logits */
    cp.embeddings = true;
    CHECK(toy_context_new(m, &cp, &b) == TOY_OK);
    CHECK(toy_decode(b, &batch) == TOY_OK);
    int bad_rows = 0, bad_logits = 0;
    for (int32_t i = 0; i < n; i++) {
        const float *e = toy_get_embeddings(b, i), *l = toy_get_logits(b, i);
        bad_rows += !e || memcmp(e, ref + i * n_embd, (size_t)n_embd * sizeof *e) != 0;
        bad_logits += !l || memcmp(l, logits_a + i * n_vocab, (size_t)n_vocab * sizeof *l) != 0;
    }
    CHECK_MSG(bad_rows == 0, "%s: %d of %d embedding rows differ from the final_norm trace", name, bad_rows, n);
    CHECK_MSG(bad_logits == 0, "%s: %d of %d logit rows change with embeddings on", name, bad_logits, n);
    CHECK(toy_get_embeddings(b, -1) == NULL);
    CHECK(toy_get_embeddings(b, n) == NULL);

    /* C: embeddings on, chunks of 16 without logits, then the last chunk with its last
     * token's only: every row is the trace's, and the mean over the chunks is theirs */
    cp.trace = NULL;
    cp.n_batch = 16;
    cp.n_outputs = 1;
    CHECK(toy_context_new(m, &cp, &c) == TOY_OK);
    double *mean = calloc((size_t)n_embd, sizeof *mean), *mean_ref = calloc((size_t)n_embd, sizeof *mean_ref);
    bad_rows = 0;
    for (int32_t first = 0; first < n; first += 16) {
        const int32_t k = n - first < 16 ? n - first : 16;
        const bool last = first + k == n;
        batch = sequence_batch(tok, first, k, pos, seq, last ? NULL : none);
        CHECK(toy_decode(c, &batch) == TOY_OK);
        for (int32_t i = 0; i < k; i++) {
            const float *e = toy_get_embeddings(c, i);
            bad_rows += !e || memcmp(e, ref + (first + i) * n_embd, (size_t)n_embd * sizeof *e) != 0;
            for (int64_t d = 0; e && d < n_embd; d++) mean[d] += e[d];
            CHECK((toy_get_logits(c, i) != NULL) == (last && i == k - 1));
        }
        CHECK(toy_get_embeddings(c, k) == NULL);
    }
    CHECK_MSG(bad_rows == 0, "%s: %d of %d rows evaluated in chunks differ from the trace's", name, bad_rows, n);
    for (int32_t i = 0; i < n; i++)
        for (int64_t d = 0; d < n_embd; d++) mean_ref[d] += ref[i * n_embd + d];
    int bad_mean = 0;
    for (int64_t d = 0; d < n_embd; d++) bad_mean += mean[d] / n != mean_ref[d] / n;
    CHECK_MSG(bad_mean == 0, "%s: the mean over chunks differs from the trace rows' in %d dimensions", name, bad_mean);
    printf("  %-16s %d tokens: states = final_norm rows in one batch and in chunks of 16; logits unchanged\n", name, n);

    free(mean);
    free(mean_ref);
    toy_context_free(a);
    toy_context_free(b);
    toy_context_free(c);
    free(ref);
    free(tr.rows);
    free(logits_a);
    free(pos);
    free(seq);
    free(all);
    free(none);
    toy_free(tok);
    toy_model_free(m);
}

/* The fixture with <arch>.pooling_type set by `set` (a copy of every key and tensor). */
static void write_with_pooling(const char *src, const char *dst, void (*set)(toy_gguf_writer *w)) {
    toy_gguf *g;
    if (toy_gguf_open(src, &g)) abort();
    toy_gguf_writer *w = toy_gguf_writer_new();
    for (int64_t i = 0; i < toy_gguf_n_kv(g); i++)
        if (toy_gguf_writer_set_value(w, toy_gguf_key(g, i), toy_gguf_kv(g, i))) abort();
    set(w);
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        if (toy_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data)) abort();
    }
    if (toy_gguf_writer_write(w, dst)) abort();
    toy_gguf_writer_free(w);
    toy_gguf_close(g);
}

static void set_cls(toy_gguf_writer *w) { toy_gguf_writer_set_u32(w, "llama.pooling_type", 2); }
static void set_out_of_range(toy_gguf_writer *w) { toy_gguf_writer_set_u32(w, "llama.pooling_type", 9); }
static void set_string(toy_gguf_writer *w) { toy_gguf_writer_set_str(w, "llama.pooling_type", "mean", 4); }

static void check_pooling_key(const char *fix, const char *name) {
    char src[4400], dir[4200], dst[4400];
    snprintf(src, sizeof src, "%s/models/%s.gguf", fix, name);
    snprintf(dir, sizeof dir, "%s/toy-embeddings-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        CHECK_MSG(false, "mkdtemp %s: %s", dir, strerror(errno));
        return;
    }
    snprintf(dst, sizeof dst, "%s/pooled.gguf", dir);
    toy_model *m = NULL;
    write_with_pooling(src, dst, set_cls);
    CHECK(toy_model_load(dst, &m) == TOY_OK);
    if (m) CHECK_EQ(toy_model_pooling(m), TOY_POOLING_CLS);
    toy_model_free(m);
    write_with_pooling(src, dst, set_out_of_range);
    CHECK(toy_model_load(dst, &m) == TOY_ERR_FORMAT);
    CHECK_STR_CONTAINS(toy_last_error(), "llama.pooling_type = 9 is outside 0..4");
    write_with_pooling(src, dst, set_string);
    CHECK(toy_model_load(dst, &m) == TOY_ERR_FORMAT);
    CHECK_STR_CONTAINS(toy_last_error(), "llama.pooling_type: expected an integer");
    unlink(dst);
    rmdir(dir);
}

int main(void) {
    const char *fix = test_fixtures_dir();
    if (!fix) {
        /* the bundled model and models of toy_init_model: llama and qwen2, F32, F16, Q4_K_M */
        const char *dir = test_init_models_dir();
        if (!dir) return test_finish("test_embeddings");
        const char *models[] = {"toy-kjv", "init-llama-f32", "init-qwen2-f16", "init-llama-q4_k_m"};
        for (size_t i = 0; i < sizeof models / sizeof *models; i++) check_model(dir, models[i]);
        check_pooling_key(dir, "init-llama-f32");
        return test_finish("test_embeddings");
    }
    /* dense and MoE, SPM with BOS and BPE without, F32 and F16, gemma's post norms */
    const char *models[] = {"llama-spm-f32", "qwen2-f16", "qwen3moe-f16", "gemma2-f32", "llama-spm-q4_k_m"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) check_model(fix, models[i]);
    check_pooling_key(fix, "llama-spm-f32");
    return test_finish("test_embeddings");
}
