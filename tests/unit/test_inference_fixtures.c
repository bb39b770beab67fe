/* test_inference_fixtures.c — toy's logits against llama.cpp's, model by model.
 *
 * For every model in the fixtures (as its README describes): the prompt tokenizes to
 * the prompt part of ref.tokens; the whole sequence evaluated as one batch matches
 * ref.logits, and evaluated one token at a time through the KV cache matches
 * ref.logits_seq, within the README's tolerances for the weight type; greedy generation
 * from the prompt reproduces the reference continuation up to the first position whose
 * reference margin is below the threshold. Prints the per-fixture error table.
 *
 * Models of an architecture toy does not support yet are reported and skipped; any
 * other failure to load fails the test.
 */
#include <stdint.h>

#include "test.h"
#include "toy.h"

typedef struct {
    const char *name;
    double median_max, max_max, margin; /* tolerances (README "Recommended tolerances") */
} tolerance;

static const tolerance tol_float = {"F32/F16", 3e-3, 2e-2, 0.05};
static const tolerance tol_bf16 = {"BF16", 8e-3, 3e-2, 0.05};
/* toy rounds activations to 8 bits as ggml does, so the README's tighter bound for
 * such engines applies; no bound on the single worst position (rounding and routing
 * flips). */
static const tolerance tol_quant = {"quantized", 0.03, INFINITY, 1.5};

static const tolerance *tolerance_for(const toy_gguf *g) {
    bool bf16 = false, quant = false;
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
        int t = toy_gguf_tensor_at(g, i)->type;
        bf16 |= t == TOY_TYPE_BF16;
        quant |= t != TOY_TYPE_F32 && t != TOY_TYPE_F16 && t != TOY_TYPE_BF16;
    }
    return quant ? &tol_quant : bf16 ? &tol_bf16 : &tol_float;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

typedef struct {
    double median, max, max_abs;
    int argmax_checked, argmax_bad;
} row_errors;

/* Compares n_rows rows of logits with the reference, row by row. */
static row_errors compare(const float *got, const float *ref, const float *margin, int32_t n_rows,
                          int32_t n_vocab, double margin_min) {
    row_errors e = {0};
    double *rel = malloc((size_t)n_rows * sizeof *rel);
    for (int32_t t = 0; t < n_rows; t++) {
        double d2 = 0, r2 = 0;
        for (int32_t v = 0; v < n_vocab; v++) {
            double d = (double)got[(int64_t)t * n_vocab + v] - ref[(int64_t)t * n_vocab + v];
            d2 += d * d;
            r2 += (double)ref[(int64_t)t * n_vocab + v] * ref[(int64_t)t * n_vocab + v];
            if (fabs(d) > e.max_abs) e.max_abs = fabs(d);
        }
        rel[t] = sqrt(d2 / (r2 > 0 ? r2 : 1));
        if (rel[t] > e.max) e.max = rel[t];
        if (margin[t] >= margin_min) {
            e.argmax_checked++;
            e.argmax_bad += argmax(got + (int64_t)t * n_vocab, n_vocab) !=
                            argmax(ref + (int64_t)t * n_vocab, n_vocab);
        }
    }
    qsort(rel, (size_t)n_rows, sizeof *rel, cmp_double);
    e.median = n_rows % 2 ? rel[n_rows / 2] : 0.5 * (rel[n_rows / 2 - 1] + rel[n_rows / 2]);
    free(rel);
    return e;
}

static const toy_gguf_tensor *ref_tensor(const toy_gguf *r, const char *name, int type,
                                         int64_t n) {
    const toy_gguf_tensor *t = toy_gguf_find_tensor(r, name);
    if (!t || t->type != type || toy_tensor_nelements(t) != n) {
        fprintf(stderr, "%s: tensor %s missing or mis-shaped\n", toy_gguf_path(r), name);
        return NULL;
    }
    return t;
}

static void check_model(const char *fix, const char *name) {
    char path[8400], ref_path[8400];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, name);
    snprintf(ref_path, sizeof ref_path, "%s/models/%s.ref.gguf", fix, name);
    toy_model *m;
    toy_status st = toy_model_load(path, &m);
    if (st == TOY_ERR_UNSUPPORTED && strstr(toy_last_error(), "architecture")) {
        printf("%-20s skipped: %s\n", name, toy_last_error());
        return;
    }
    CHECK_MSG(st == TOY_OK, "%s", toy_last_error());
    if (st) return;
    toy_gguf *r;
    CHECK(toy_gguf_open(ref_path, &r) == TOY_OK);
    uint64_t n_prompt = 0;
    const char *prompt;
    size_t prompt_len;
    CHECK(toy_gguf_get_u64(r, "ref.n_prompt", &n_prompt) == TOY_OK);
    CHECK(toy_gguf_get_str(r, "ref.prompt", &prompt, &prompt_len) == TOY_OK);
    const toy_gguf_tensor *tt = toy_gguf_find_tensor(r, "ref.tokens");
    const int32_t n_vocab = toy_model_n_vocab(m);
    const int32_t n = tt ? (int32_t)tt->ne[0] : 0;
    const toy_gguf_tensor *tl = ref_tensor(r, "ref.logits", TOY_TYPE_F32, (int64_t)n * n_vocab);
    const toy_gguf_tensor *ts = ref_tensor(r, "ref.logits_seq", TOY_TYPE_F32, (int64_t)n * n_vocab);
    const toy_gguf_tensor *tm = ref_tensor(r, "ref.margin", TOY_TYPE_F32, n);
    CHECK(tt && tl && ts && tm);
    if (!tt || !tl || !ts || !tm) goto out_ref;
    const int32_t *ref_tokens = tt->data;
    const float *margin = tm->data;
    const tolerance *tol = tolerance_for(toy_model_gguf(m));

    /* the prompt tokenizes to the prompt part of ref.tokens */
    int32_t toks[256], n_tok = 0;
    CHECK(toy_tokenize(toy_model_vocab(m), prompt, prompt_len, true, false, toks, 256, &n_tok) == TOY_OK);
    CHECK_MSG(n_tok == (int32_t)n_prompt, "%s: prompt gives %d tokens, reference %d", name, n_tok,
              (int)n_prompt);
    for (int32_t i = 0; i < n_tok && i < (int32_t)n_prompt; i++)
        CHECK_MSG(toks[i] == ref_tokens[i], "%s: prompt token %d is %d, reference %d", name, i,
                  toks[i], ref_tokens[i]);

    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.n_outputs = n;
    cp.n_threads = 2;
    toy_context *ctx = NULL;
    CHECK_MSG(toy_context_new(m, &cp, &ctx) == TOY_OK, "%s: %s", name, toy_last_error());
    if (!ctx) goto out_ref;
    float *logits = calloc((size_t)n * n_vocab, sizeof *logits); /* zeros if a decode fails */
    int32_t *pos = malloc((size_t)n * sizeof *pos), *seq = calloc((size_t)n, sizeof *seq);
    int8_t *want = malloc((size_t)n);
    for (int32_t i = 0; i < n; i++) pos[i] = i, want[i] = 1;

    /* one batch */
    toy_batch b = {n, ref_tokens, pos, seq, want};
    CHECK_MSG(toy_decode(ctx, &b) == TOY_OK, "%s", toy_last_error());
    for (int32_t i = 0; i < n; i++)
        memcpy(logits + (int64_t)i * n_vocab, toy_get_logits(ctx, i), n_vocab * sizeof(float));
    row_errors eb = compare(logits, tl->data, margin, n, n_vocab, tol->margin);

    /* one token at a time, through the cache */
    CHECK(toy_kv_seq_rm(ctx, 0, 0, -1) == TOY_OK);
    for (int32_t i = 0; i < n; i++) {
        toy_batch one = {1, ref_tokens + i, pos + i, seq, want};
        CHECK_MSG(toy_decode(ctx, &one) == TOY_OK, "%s", toy_last_error());
        memcpy(logits + (int64_t)i * n_vocab, toy_get_logits(ctx, 0), n_vocab * sizeof(float));
    }
    row_errors es = compare(logits, ts->data, margin, n, n_vocab, tol->margin);

    /* greedy generation from the prompt */
    CHECK(toy_kv_seq_rm(ctx, 0, 0, -1) == TOY_OK);
    toy_batch pb = {(int32_t)n_prompt, ref_tokens, pos, seq, NULL};
    CHECK(toy_decode(ctx, &pb) == TOY_OK);
    int32_t matched = 0, compared = 0, last = (int32_t)n_prompt - 1;
    for (int32_t t = (int32_t)n_prompt - 1; t + 1 < n; t++, last = 0) {
        if (margin[t] < tol->margin) break; /* the reference itself is a near tie here */
        int32_t next = argmax(toy_get_logits(ctx, last), n_vocab);
        compared++;
        if (next != ref_tokens[t + 1]) {
            CHECK_MSG(0, "%s: generated token %d is %d, reference %d", name, t + 1, next,
                      ref_tokens[t + 1]);
            break;
        }
        matched++;
        toy_batch g = {1, &next, pos + t + 1, seq, NULL};
        CHECK(toy_decode(ctx, &g) == TOY_OK);
    }

    /* the KV cache in f16 and q8_0: within the F16 and the quantized tolerances */
    static const int cache_types[2] = {TOY_TYPE_F16, TOY_TYPE_Q8_0};
    double cache_median[2] = {0, 0};
    for (int ci = 0; ci < 2; ci++) {
        toy_context_params cq = cp;
        cq.cache_type_k = cq.cache_type_v = cache_types[ci];
        toy_context *cctx;
        if (toy_context_new(m, &cq, &cctx) != TOY_OK) {
            CHECK_MSG(0, "%s: %s", name, toy_last_error());
            continue;
        }
        CHECK(toy_decode(cctx, &b) == TOY_OK);
        for (int32_t i = 0; i < n; i++)
            memcpy(logits + (int64_t)i * n_vocab, toy_get_logits(cctx, i), n_vocab * sizeof(float));
        /* an f16 cache rounds K and V to 16 bits: an error of the BF16 class (the README
         * measures 3.6e-4 on llama-spm; gemma2's large, soft-capped scores make it about
         * 3e-3); a q8_0 cache is held to the quantized tolerance, as the speed issue asks */
        const tolerance *ct = ci == 0 && tol != &tol_quant ? &tol_bf16 : &tol_quant;
        row_errors ec = compare(logits, tl->data, margin, n, n_vocab, ct->margin);
        cache_median[ci] = ec.median;
        CHECK_MSG(ec.median <= (ci ? 0.1 : ct->median_max) && ec.max <= (ci ? INFINITY : ct->max_max) &&
                      ec.argmax_bad == 0,
                  "%s: logits with a %s KV cache outside tolerance (median %.3g)", name,
                  toy_type_name(cache_types[ci]), ec.median);
        toy_context_free(cctx);
    }

    /* the plain attention (toy_attn), batched and one token at a time: the same tolerance,
     * and the same bits both ways (each step is per token, in cell order) */
    toy_context_params cpl = cp;
    cpl.attn = TOY_ATTN_PLAIN;
    toy_context *pctx = NULL;
    row_errors ep = {0};
    if (toy_context_new(m, &cpl, &pctx) == TOY_OK) {
        CHECK(toy_decode(pctx, &b) == TOY_OK);
        for (int32_t i = 0; i < n; i++)
            memcpy(logits + (int64_t)i * n_vocab, toy_get_logits(pctx, i), n_vocab * sizeof(float));
        ep = compare(logits, tl->data, margin, n, n_vocab, tol->margin);
        CHECK_MSG(ep.median <= tol->median_max && ep.max <= tol->max_max && ep.argmax_bad == 0,
                  "%s: plain attention's logits outside tolerance (median %.3g, max %.3g)", name, ep.median, ep.max);
        CHECK(toy_kv_seq_rm(pctx, 0, 0, -1) == TOY_OK);
        for (int32_t i = 0; i < n; i++) {
            toy_batch one = {1, ref_tokens + i, pos + i, seq, want};
            CHECK(toy_decode(pctx, &one) == TOY_OK);
            CHECK_MSG(!memcmp(logits + (int64_t)i * n_vocab, toy_get_logits(pctx, 0), n_vocab * sizeof(float)),
                      "%s: plain attention, token %d: other bits one at a time than batched", name, i);
        }
        toy_context_free(pctx);
    } else {
        CHECK_MSG(0, "%s: %s", name, toy_last_error());
    }

    printf("%-20s %-9s batch %.2e/%.2e (abs %.3f, argmax %d/%d)  seq %.2e/%.2e (abs %.3f, "
           "argmax %d/%d)  greedy %d/%d  cache f16 %.1e q8_0 %.1e  plain %.2e/%.2e\n",
           name, tol->name, eb.median, eb.max, eb.max_abs, eb.argmax_checked - eb.argmax_bad,
           eb.argmax_checked, es.median, es.max, es.max_abs, es.argmax_checked - es.argmax_bad,
           es.argmax_checked, matched, n - (int32_t)n_prompt, cache_median[0], cache_median[1], ep.median, ep.max);
    CHECK_MSG(eb.median <= tol->median_max && eb.max <= tol->max_max && eb.argmax_bad == 0,
              "%s: batch logits outside tolerance", name);
    CHECK_MSG(es.median <= tol->median_max && es.max <= tol->max_max && es.argmax_bad == 0,
              "%s: one-token logits outside tolerance", name);
    CHECK_MSG(matched == compared, "%s: greedy continuation differs", name);

    free(logits);
    free(pos);
    free(seq);
    free(want);
    toy_context_free(ctx);
out_ref:
    toy_gguf_close(r);
    toy_model_free(m);
}

int main(int argc, char **argv) {
    const char *fix = test_fixtures_dir();
    if (!fix) {
        printf("SKIP: needs llama.cpp's reference logits of the fixture models (*.ref.gguf)\n");
        return TEST_SKIP_CODE;
    }
    test_each_fixture_model(fix, argc > 1 ? argv[1] : NULL, check_model); /* a filter, for debugging */
    return test_finish("test_inference_fixtures");
}
