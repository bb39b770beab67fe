/* test_determinism.c — a token's logits do not depend on how it was computed.
 *
 * For every fixture model (every architecture, so QK norms, post-norms, soft-caps,
 * biases, MoE and sliding windows are all covered), the logits of one sequence must be
 * bit-identical whether it is evaluated
 *   A. as one batch with 2 threads,
 *   B. one token at a time with 1 thread,
 *   C. in one batch interleaved with a second sequence, with 3 threads,
 *   D. half as a batch, then token by token while another sequence decodes beside it,
 *   E. by a fresh load of the model, whose first batch (of 5 tokens, fewer than
 *      TY_PACK_PROMPT_TOKENS) and next token run before the weights are repacked, on
 *      the row kernels, and the rest after toy_model_pack, on the packed ones.
 * A and B run on the row kernels (one sequence, fewer than TY_PACK_PROMPT_TOKENS); C's
 * batch of two sequences repacks the model, so C and D run packed (model.h).
 * toy reduces every dot product and attention row in one fixed order, so these are
 * equal by construction; this test keeps them so. A long sequence (300 tokens: two
 * attention segments, which decode spreads over threads and a batch folds inside each
 * task) is checked the same way on a few models, with 2 and 3 threads. Editing the KV
 * cache is checked too (check_kv_edit).
 */
#include <stdint.h>

#include "test.h"
#include "toy.h"
#include "init_models.h"

enum { N_TOK = 20 };

typedef struct {
    toy_model *m;
    int32_t n_vocab;
    int32_t tok[2][N_TOK]; /* sequence 0 and another one */
} fixture;

static toy_context *new_ctx(toy_model *m, int threads) {
    toy_context_params p = toy_context_default_params();
    p.n_ctx = 64;
    p.n_batch = 2 * N_TOK;
    p.n_seq_max = 2;
    p.n_outputs = 2 * N_TOK;
    p.n_threads = threads;
    toy_context *ctx = NULL;
    CHECK_MSG(toy_context_new(m, &p, &ctx) == TOY_OK, "%s", toy_last_error());
    return ctx;
}

/* Decodes the given tokens as one batch and copies the logits of sequence 0's tokens
 * (in order of position) to out + pos * n_vocab. */
static void run_batch(toy_context *ctx, const fixture *f, int n, const int32_t *tok,
                      const int32_t *pos, const int32_t *seq, float *out) {
    int8_t want[2 * N_TOK];
    memset(want, 1, sizeof want);
    toy_batch b = {n, tok, pos, seq, want};
    CHECK_MSG(toy_decode(ctx, &b) == TOY_OK, "%s", toy_last_error());
    for (int i = 0; i < n; i++)
        if (seq[i] == 0)
            memcpy(out + (int64_t)pos[i] * f->n_vocab, toy_get_logits(ctx, i),
                   (size_t)f->n_vocab * sizeof(float));
}

/* A fixture model by name; NULL (and a failed check) if it does not load. */
static toy_model *load_model(const char *fix, const char *name) {
    char path[8400];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, name);
    toy_model *m = NULL;
    if (toy_model_load(path, &m) != TOY_OK) {
        CHECK_MSG(0, "%s", toy_last_error());
        return NULL;
    }
    return m;
}

static void check_model(const char *fix, const char *name) {
    fixture f;
    if (!(f.m = load_model(fix, name))) return;
    f.n_vocab = toy_model_n_vocab(f.m);
    unsigned long long rng = 1234;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < N_TOK; i++) f.tok[s][i] = (int32_t)(test_rand_u64(&rng) % (uint64_t)f.n_vocab);

    size_t bytes = (size_t)N_TOK * f.n_vocab * sizeof(float);
    float *ref = malloc(bytes), *got = malloc(bytes);
    int32_t tok[2 * N_TOK], pos[2 * N_TOK], seq[2 * N_TOK];

    /* A: one batch */
    toy_context *ctx = new_ctx(f.m, 2);
    for (int i = 0; i < N_TOK; i++) tok[i] = f.tok[0][i], pos[i] = i, seq[i] = 0;
    run_batch(ctx, &f, N_TOK, tok, pos, seq, ref);
    toy_context_free(ctx);

    /* B: one token at a time, 1 thread */
    ctx = new_ctx(f.m, 1);
    memset(got, 0, bytes);
    for (int i = 0; i < N_TOK; i++) run_batch(ctx, &f, 1, &f.tok[0][i], &i, &(int32_t){0}, got);
    CHECK_MSG(memcmp(ref, got, bytes) == 0, "%s: one-token logits differ from the batch", name);
    toy_context_free(ctx);

    /* C: interleaved with another sequence, 3 threads */
    ctx = new_ctx(f.m, 3);
    memset(got, 0, bytes);
    for (int i = 0; i < N_TOK; i++) {
        tok[2 * i] = f.tok[1][i], pos[2 * i] = i, seq[2 * i] = 1;
        tok[2 * i + 1] = f.tok[0][i], pos[2 * i + 1] = i, seq[2 * i + 1] = 0;
    }
    run_batch(ctx, &f, 2 * N_TOK, tok, pos, seq, got);
    CHECK_MSG(memcmp(ref, got, bytes) == 0, "%s: logits differ when batched with another sequence",
              name);
    toy_context_free(ctx);

    /* D: half prefill, then decode beside another sequence */
    ctx = new_ctx(f.m, 2);
    memset(got, 0, bytes);
    const int half = N_TOK / 2;
    for (int i = 0; i < half; i++) tok[i] = f.tok[0][i], pos[i] = i, seq[i] = 0;
    run_batch(ctx, &f, half, tok, pos, seq, got);
    for (int i = half; i < N_TOK; i++) {
        int32_t t2[2] = {f.tok[0][i], f.tok[1][i - half]}, p2[2] = {i, i - half}, s2[2] = {0, 1};
        run_batch(ctx, &f, 2, t2, p2, s2, got);
    }
    CHECK_MSG(memcmp(ref, got, bytes) == 0, "%s: logits differ between prefill+decode and batch", name);
    toy_context_free(ctx);

    /* E: a fresh load: the first short batch before the repacking, the rest after */
    toy_model *fresh = load_model(fix, name);
    if (fresh) {
        ctx = new_ctx(fresh, 2);
        memset(got, 0, bytes);
        for (int i = 0; i < N_TOK; i++) tok[i] = f.tok[0][i], pos[i] = i, seq[i] = 0;
        run_batch(ctx, &f, 5, tok, pos, seq, got);
        run_batch(ctx, &f, 1, &tok[5], &pos[5], &seq[5], got);
        CHECK_MSG(toy_model_pack(fresh, 2) == TOY_OK, "%s", toy_last_error());
        for (int i = 6; i < N_TOK; i++) run_batch(ctx, &f, 1, &tok[i], &pos[i], &seq[i], got);
        CHECK_MSG(memcmp(ref, got, bytes) == 0, "%s: logits before and after the repacking differ", name);
        toy_context_free(ctx);
        toy_model_free(fresh);
    }

    printf("%-20s bit-identical in all five ways\n", name);
    free(ref);
    free(got);
    toy_model_free(f.m);
}

enum { N_LONG = 300, N_PAIR = 150 };

/* The long case: one batch with 2 threads against one token at a time with 2 and 3
 * threads (and a 2-token step beside another sequence). */
static void check_long(const char *fix, const char *name) {
    toy_model *m = load_model(fix, name);
    if (!m) return;
    const int failures_before = test_failures;
    const int32_t n_vocab = toy_model_n_vocab(m);
    int32_t *tok = malloc(N_LONG * sizeof *tok), *pos = malloc(N_LONG * sizeof *pos);
    int32_t *seq = calloc(N_LONG, sizeof *seq);
    int8_t *want = malloc(N_LONG);
    unsigned long long rng = 99;
    for (int i = 0; i < N_LONG; i++) {
        tok[i] = (int32_t)(test_rand_u64(&rng) % (uint64_t)n_vocab);
        pos[i] = i;
        want[i] = 1;
    }
    const size_t row = (size_t)n_vocab * sizeof(float);
    float *ref = malloc(N_LONG * row), *got = malloc(N_LONG * row);
    for (int mode = 0; mode < 3; mode++) {
        toy_context_params p = toy_context_default_params();
        p.n_ctx = N_LONG + 8;
        p.n_batch = p.n_outputs = mode == 0 ? N_LONG : 2;
        p.n_seq_max = 2;
        p.n_threads = mode == 2 ? 3 : 2;
        toy_context *ctx = NULL;
        if (toy_context_new(m, &p, &ctx) != TOY_OK) {
            CHECK_MSG(0, "%s", toy_last_error());
            break;
        }
        float *out = mode == 0 ? ref : got;
        bool ok = true;
        for (int i = 0; i < N_LONG && ok;) {
            /* mode 2 decodes beside a second sequence from token N_PAIR on */
            const bool pair = mode == 2 && i >= N_PAIR;
            const int n = mode == 0 ? N_LONG : 1;
            int32_t t2[2] = {tok[i], tok[i < N_PAIR ? 0 : i - N_PAIR]}, p2[2] = {i, i - N_PAIR}, s2[2] = {0, 1};
            toy_batch b = mode == 0 ? (toy_batch){n, tok, pos, seq, want}
                                    : (toy_batch){pair ? 2 : 1, t2, p2, s2, want};
            ok = toy_decode(ctx, &b) == TOY_OK;
            CHECK_MSG(ok, "%s", toy_last_error());
            for (int k = 0; k < n && ok; k++) memcpy(out + (size_t)(i + k) * n_vocab, toy_get_logits(ctx, k), row);
            i += n;
        }
        if (mode > 0)
            CHECK_MSG(memcmp(ref, got, N_LONG * row) == 0,
                      "%s: %d tokens one at a time (%d threads%s) differ from the batch", name,
                      N_LONG, p.n_threads, mode == 2 ? ", beside another sequence" : "");
        toy_context_free(ctx);
    }
    if (test_failures == failures_before) printf("%-20s bit-identical over %d tokens\n", name, N_LONG);
    free(ref);
    free(got);
    free(tok);
    free(pos);
    free(seq);
    free(want);
    toy_model_free(m);
}

/* Decodes n tokens at the given positions (sequence 0) in one batch; copies the last
 * token's logits to out if out is not NULL. */
static bool decode_at(toy_context *ctx, int n, const int32_t *tok, const int32_t *pos, float *out,
                      int32_t n_vocab) {
    int32_t seq[64] = {0};
    toy_batch b = {n, tok, pos, seq, NULL};
    if (toy_decode(ctx, &b) != TOY_OK) {
        CHECK_MSG(0, "%s", toy_last_error());
        return false;
    }
    if (out) memcpy(out, toy_get_logits(ctx, 0), (size_t)n_vocab * sizeof(float));
    return true;
}

/* KV cache edits: dropping the tail (positions 30..39 of 40) leaves exactly what a
 * context fed only 30 tokens holds, so the next token's logits are the same bits; and
 * moving all 30 positions up by 5 (toy_kv_seq_add re-rotates the keys) matches a context
 * fed them at 5..34 directly, within rounding, since RoPE scores depend only on relative
 * positions. (Removing a middle range is checked on the cache itself, test_kv_cache.) */
static void check_kv_edit(const char *fix, const char *name) {
    toy_model *m = load_model(fix, name);
    if (!m) return;
    const int failures_before = test_failures;
    const int32_t n_vocab = toy_model_n_vocab(m);
    int32_t tok[40], pos[40], moved[40];
    unsigned long long rng = 7;
    for (int i = 0; i < 40; i++) {
        tok[i] = (int32_t)(test_rand_u64(&rng) % (uint64_t)n_vocab);
        pos[i] = i;
        moved[i] = i + 5;
    }
    const int32_t next = tok[7];
    float *a = malloc((size_t)n_vocab * sizeof *a), *b = malloc((size_t)n_vocab * sizeof *b);
    toy_context_params p = toy_context_default_params();
    p.n_ctx = 64;
    p.n_batch = p.n_outputs = 64;
    p.n_threads = 2;
    for (int shift = 0; shift < 2; shift++) {
        toy_context *c1 = NULL, *c2 = NULL;
        CHECK(toy_context_new(m, &p, &c1) == TOY_OK && toy_context_new(m, &p, &c2) == TOY_OK);
        if (!c1 || !c2) {
            toy_context_free(c1);
            toy_context_free(c2);
            break;
        }
        const int32_t at = shift ? 35 : 30;
        bool ok;
        if (!shift) {
            ok = decode_at(c1, 40, tok, pos, NULL, n_vocab) && toy_kv_seq_rm(c1, 0, 30, -1) == TOY_OK;
            ok = ok && decode_at(c2, 30, tok, pos, NULL, n_vocab);
        } else {
            ok = decode_at(c1, 30, tok, pos, NULL, n_vocab) && toy_kv_seq_add(c1, 0, 0, -1, 5) == TOY_OK;
            ok = ok && decode_at(c2, 30, tok, moved, NULL, n_vocab);
        }
        ok = ok && decode_at(c1, 1, &next, &at, a, n_vocab) && decode_at(c2, 1, &next, &at, b, n_vocab);
        CHECK_MSG(ok, "%s: KV edit sequence failed", name);
        if (ok && !shift)
            CHECK_MSG(memcmp(a, b, (size_t)n_vocab * sizeof *a) == 0,
                      "%s: logits after removing positions 30..39 differ from a fresh context", name);
        if (ok && shift) {
            double num = 0, den = 0;
            for (int32_t i = 0; i < n_vocab; i++) {
                num += (double)(a[i] - b[i]) * (a[i] - b[i]);
                den += (double)b[i] * b[i];
            }
            CHECK_MSG(sqrt(num / den) < 1e-3, "%s: logits after shifting positions by 5: relRMS %.3g",
                      name, sqrt(num / den));
        }
        toy_context_free(c1);
        toy_context_free(c2);
    }
    if (test_failures == failures_before) printf("%-20s KV cache edits as a fresh context\n", name);
    free(a);
    free(b);
    toy_model_free(m);
}

int main(void) {
    const char *fix = test_fixtures_dir();
    if (!fix) {
        /* a bare clone: the bundled model and llama and qwen2 models of toy_init_model
         * (GQA, head_dim 128, biases, a K-quant); sliding windows, soft-caps, QK norms and
         * MoE need the fixtures' architectures */
        const char *dir = test_init_models_dir();
        if (!dir) return test_finish("test_determinism");
        test_each_fixture_model(dir, NULL, check_model);
        check_long(dir, "init-llama-q4_k_m");
        check_long(dir, "init-qwen2-f16");
        check_kv_edit(dir, "init-llama-q4_k_m");
        check_kv_edit(dir, "init-qwen2-f16");
        return test_finish("test_determinism");
    }
    test_each_fixture_model(fix, NULL, check_model);
    /* GQA, head_dim 128, and sliding windows (whole segments out of the window) */
    check_long(fix, "llama-spm-q4_k_m");
    check_long(fix, "qwen3-f16");
    check_long(fix, "gemma2-f32");
    check_kv_edit(fix, "llama-spm-q4_k_m");
    check_kv_edit(fix, "qwen3-f16");
    return test_finish("test_determinism");
}
