/* test_train_fixtures.c — training's forward and backward on every fixture model.
 *
 * For each dense model: the loss of the reference token sequence (prompt and greedy
 * continuation) computed by training's forward agrees with the loss computed from
 * llama.cpp's own logits of that sequence (ref.logits); for one model of each
 * architecture and feature set (the quantized variants of llama-spm share its graph:
 * their dequantization is what the loss checks), the gradient of every tensor agrees
 * with central finite differences of that loss along random directions. MoE models give
 * the "training not supported" error. On one model, the gradients with 1 and 3 threads
 * are the same bits, and so are the loss and gradients of a micro-batch run whole or in
 * parts of 1 or 2 sequences (train_model.c), full and LoRA with dropout. Once copied, a
 * mapped model's tensor pages leave the process's memory (RssFile).
 *
 * Tolerances. The loss: training runs in F32 without ggml's rounding of matmul inputs
 * and with the smooth tanh-GELU, so against llama.cpp's logits it differs by that
 * rounding: 1e-5 relative for F32 models (float noise), 3e-4 for F16 (the fixtures'
 * README puts F16 rounding at ~1e-3 relative RMS of the logits; the loss, a mean over
 * positions, moves less), 2e-3 for BF16 and gemma2's fp16 GELU table, 5e-3 for
 * quantized models (8-bit activations).
 * The gradients: along a random direction u of tensor W (each element +-rms(W)), the
 * loss changes by h g.u + O(h^3). These random models are far from linear (gemma2's
 * embedding, scaled by 16, moves the loss by 10 % along u at h = 1e-2), so the
 * difference quotients at h = 1e-3 and h / 2 are combined by Richardson extrapolation,
 * which cancels the h^2 term. What remains is the float rounding of the loss, measured
 * at 1e-7..5e-7 (the scatter of the loss about a straight line along u), which the
 * extrapolated quotient turns into about 1e-3 absolute: the RMS error over two
 * directions must stay within 2 % of the RMS of g.u plus 4e-6 / h. A wrongly wired
 * gradient (a missing term, a wrong sign, a swapped tensor) is off by far more; the
 * precise checks are test_train_ops (op by op) and an independent float64 reference.
 */
#include "cpu.h"
#include "gemm.h"
#include "test.h"
#include "toy.h"
#include "train_model.h"

static const char *moe_names[] = {"mixtral", "qwen2moe", "qwen3moe", "olmoe"};

static bool is_moe(const char *name) {
    for (size_t i = 0; i < sizeof moe_names / sizeof *moe_names; i++)
        if (!strncmp(name, moe_names[i], strlen(moe_names[i]))) return true;
    return false;
}

static double ref_loss(const toy_gguf *ref, const int32_t **tokens_out, int32_t *n_out) {
    const toy_gguf_tensor *tt = toy_gguf_find_tensor(ref, "ref.tokens");
    const toy_gguf_tensor *lt = toy_gguf_find_tensor(ref, "ref.logits");
    const int32_t *tok = tt->data;
    const int32_t n = (int32_t)tt->ne[0], V = (int32_t)lt->ne[0];
    const float *logits = lt->data;
    double sum = 0;
    for (int32_t t = 0; t + 1 < n; t++) {
        const float *z = logits + (int64_t)t * V;
        double mx = -INFINITY, se = 0;
        for (int32_t v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        for (int32_t v = 0; v < V; v++) se += exp(z[v] - mx);
        sum += mx + log(se) - z[tok[t + 1]];
    }
    *tokens_out = tok;
    *n_out = n;
    return sum / (n - 1);
}

static double loss_of(train_model *tm, const train_batch *b) { return ty_train_model_step(tm, b, false); }

static void check_model(const char *fix, const char *name) {
    char path[4400], ref_path[4400];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, name);
    snprintf(ref_path, sizeof ref_path, "%s/models/%s.ref.gguf", fix, name);
    toy_model *m;
    toy_gguf *ref;
    if (toy_model_load(path, &m) || toy_gguf_open(ref_path, &ref)) {
        CHECK_MSG(0, "%s: %s", name, toy_last_error());
        return;
    }
    const int32_t *tok;
    int32_t n;
    const double want = ref_loss(ref, &tok, &n);
    ty_pool *pool = ty_pool_new(2);
    train_model *tm = NULL;
    toy_status st = ty_train_model_new(m, n, pool, &tm);
    if (is_moe(name)) {
        CHECK_MSG(st == TOY_ERR_UNSUPPORTED, "%s: MoE accepted for training", name);
        CHECK_STR_CONTAINS(toy_last_error(), "training not supported for");
        printf("%-22s %s\n", name, toy_last_error());
        goto done;
    }
    CHECK_MSG(st == TOY_OK, "%s: %s", name, toy_last_error());
    if (st || ty_train_model_reserve(tm, 1, n)) goto done;
    int32_t *targets = xmalloc((size_t)n * sizeof *targets);
    float *weights = xmalloc((size_t)n * sizeof *weights);
    for (int32_t i = 0; i < n; i++) {
        targets[i] = i + 1 < n ? tok[i + 1] : -1;
        weights[i] = 1.0f / (float)(n - 1);
    }
    train_batch b = {1, n, 0, tok, targets, weights};
    ty_train_model_zero_grads(tm);
    const double loss = ty_train_model_step(tm, &b, true);

    bool quant = false, bf16 = false, f16 = false;
    for (int i = 0; i < ty_train_model_n_tensors(tm); i++) {
        const int t = ty_train_model_tensor(tm, i)->type;
        quant |= t != TOY_TYPE_F32 && t != TOY_TYPE_F16 && t != TOY_TYPE_BF16;
        bf16 |= t == TOY_TYPE_BF16;
        f16 |= t == TOY_TYPE_F16;
    }
    const bool gelu_table = ty_train_model_hparams(tm)->ffn_act == TY_ACT_GELU_TANH;
    const double tol = quant ? 5e-3 : bf16 || gelu_table ? 2e-3 : f16 ? 3e-4 : 1e-5;
    const double rel = fabs(loss - want) / want;
    CHECK_MSG(rel <= tol, "%s: loss %.7f, from llama.cpp's logits %.7f (relative %.2e > %.0e)", name,
              loss, want, rel, tol);

    if (strstr(name, "llama-spm") && strcmp(name, "llama-spm-f32")) {
        printf("%-22s loss %.6f (llama.cpp logits %.6f, rel %.1e)\n", name, loss, want, rel);
        goto done_fd;
    }
    /* finite differences along random directions, tensor by tensor (under AddressSanitizer
     * one tensor in three: each is eight more runs of the same forward pass) */
    float *params = ty_train_model_params(tm), *grads = ty_train_model_grads(tm);
    unsigned long long rng = 0x5eed0000ULL + (unsigned long long)n;
    double worst = 0;
    const char *worst_name = "";
    const float h = 1e-3f;
#ifdef TEST_UNDER_ASAN
    const int fd_every = 3;
#else
    const int fd_every = 1;
#endif
    for (int i = 0; i < ty_train_model_n_tensors(tm); i += fd_every) {
        const train_tensor *t = ty_train_model_tensor(tm, i);
        float *w = params + t->offset;
        const float *g = grads + t->offset;
        double ms = 0;
        for (int64_t k = 0; k < t->n; k++) ms += (double)w[k] * w[k];
        const float amp = ms > 0 ? (float)sqrt(ms / (double)t->n) : 1e-2f;
        float *u = xmalloc((size_t)t->n * sizeof *u), *saved = xmalloc((size_t)t->n * sizeof *saved);
        memcpy(saved, w, (size_t)t->n * sizeof *w);
        double err2 = 0, sig2 = 0;
        for (int dir = 0; dir < 2; dir++) {
            double gu = 0;
            for (int64_t k = 0; k < t->n; k++) {
                u[k] = (test_rand_u64(&rng) & 1) ? amp : -amp;
                gu += (double)g[k] * u[k];
            }
            double d[2];
            for (int half = 0; half < 2; half++) {
                const float step = half ? h / 2 : h;
                for (int64_t k = 0; k < t->n; k++) w[k] = saved[k] + step * u[k];
                const double lp = loss_of(tm, &b);
                for (int64_t k = 0; k < t->n; k++) w[k] = saved[k] - step * u[k];
                const double lm = loss_of(tm, &b);
                d[half] = (lp - lm) / (2.0 * step);
            }
            memcpy(w, saved, (size_t)t->n * sizeof *w);
            const double fd = (4.0 * d[1] - d[0]) / 3.0;
            err2 += (fd - gu) * (fd - gu);
            sig2 += gu * gu;
        }
        const double err = sqrt(err2 / 2), sig = sqrt(sig2 / 2), floor = 4e-6 / h;
        CHECK_MSG(err <= 2e-2 * sig + floor,
                  "%s: %s: gradient off finite differences by %.2e (RMS of g.u %.2e)", name, t->name,
                  err, sig);
        const double e = err / (sig + floor);
        if (e > worst) worst = e, worst_name = t->name;
        free(u);
        free(saved);
    }
    printf("%-22s loss %.6f (llama.cpp logits %.6f, rel %.1e); worst |fd - g.u| / (|g.u| + floor) %.1e (%s)\n",
           name, loss, want, rel, worst, worst_name);
done_fd:
    free(targets);
    free(weights);
done:
    ty_train_model_free(tm);
    ty_pool_free(pool);
    toy_gguf_close(ref);
    toy_model_free(m);
}

/* toy_grad writes the same bits with 1 and 3 threads */
static void check_threads(const char *fix) {
    char path[4400];
    snprintf(path, sizeof path, "%s/models/qwen3-f16.gguf", fix);
    const int32_t tok[12] = {1, 5, 77, 300, 2000, 17, 17, 4, 900, 1500, 3, 8};
    const char *out[2] = {"test_train_grad_t1.gguf", "test_train_grad_t3.gguf"};
    double loss[2];
    for (int r = 0; r < 2; r++) {
        toy_grad_params gp = toy_grad_default_params();
        gp.model_path = path;
        gp.n_threads = r ? 3 : 1;
        CHECK_MSG(toy_grad(&gp, tok, 12, out[r], &loss[r]) == TOY_OK, "%s", toy_last_error());
    }
    toy_gguf *a, *b;
    if (toy_gguf_open(out[0], &a) || toy_gguf_open(out[1], &b)) {
        CHECK_MSG(0, "%s", toy_last_error());
        return;
    }
    CHECK(loss[0] == loss[1]);
    CHECK_EQ(toy_gguf_n_tensors(a), toy_gguf_n_tensors(b));
    for (int64_t i = 0; i < toy_gguf_n_tensors(a); i++) {
        const toy_gguf_tensor *ta = toy_gguf_tensor_at(a, i), *tb = toy_gguf_tensor_at(b, i);
        CHECK_MSG(ta->size == tb->size && !memcmp(ta->data, tb->data, ta->size), "%s differs", ta->name);
    }
    toy_gguf_close(a);
    toy_gguf_close(b);
    remove(out[0]);
    remove(out[1]);
}

/* A fixture model by name; NULL (and a failed check) if it does not load. */
static toy_model *load_fixture(const char *fix, const char *name) {
    char path[4400];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, name);
    toy_model *m = NULL;
    if (toy_model_load(path, &m)) CHECK_MSG(0, "%s", toy_last_error());
    return m;
}

/* The loss and gradients of a 3 x 8 micro-batch, run in parts of part_B sequences. */
static double parts_step(train_model *tm, int part_B, float *grads_out) {
    enum { B = 3, T = 8 };
    int32_t tok[B * T], targets[B * T];
    float weights[B * T];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 7919 + 13) % 1000;
        targets[i] = i % 5 == 4 ? -1 : (i * 104729 + 7) % 1000;
        weights[i] = 1.0f / (float)(i % 7 + 3);
    }
    if (ty_train_model_reserve_parts(tm, B, T, part_B)) return NAN;
    ty_train_model_zero_grads(tm);
    const train_batch b = {B, T, 42, tok, targets, weights};
    const double loss = ty_train_model_step(tm, &b, true);
    memcpy(grads_out, ty_train_model_grads(tm), (size_t)ty_train_model_n_floats(tm) * sizeof(float));
    return loss;
}

/* Parts give the whole's bits: F32, and BF16 pairs, where a step with parts packs the
 * weights' panels once (the pair kernel of this CPU, or the portable one); a weight
 * changed between steps is packed again. */
static void check_parts(const char *fix) {
    toy_model *m = load_fixture(fix, "qwen3-f16");
    if (!m) return;
    ty_pool *pool = ty_pool_new(2);
    const ty_gemm_kernel *pairs = ty_cpu_gemm_bf16() ? ty_cpu_gemm_bf16() : ty_gemm_kernel_bf16_scalar();
    for (int run = 0; run < 3; run++) {
        const bool lora = run == 1, bf16 = run == 2;
        const char *what = bf16 ? "full, bf16 pairs" : lora ? "LoRA" : "full";
        train_model *tm = NULL;
        const train_lora_params lp = {.rank = 4, .alpha = 8, .targets = 0x7f, .dropout = 0.25f, .seed = 7};
        toy_status st = lora ? ty_train_model_new_lora(m, 8, pool, &lp, &tm) : ty_train_model_new(m, 8, pool, &tm);
        CHECK_MSG(st == TOY_OK, "%s", toy_last_error());
        if (st) continue;
        if (bf16) {
            ty_gemm_set_operand_type(ty_train_model_gemm(tm), TOY_TYPE_BF16);
            ty_gemm_set_bf16_dot(ty_train_model_gemm(tm), pairs);
        }
        const size_t n = (size_t)ty_train_model_n_floats(tm);
        float *whole = xmalloc(n * sizeof *whole), *part = xmalloc(n * sizeof *part);
        for (int changed = 0; changed < (bf16 ? 2 : 1); changed++) {
            if (changed) /* every trainable float a little larger: the panels of the last step are stale */
                for (int64_t i = 0; i < ty_train_model_n_params(tm); i++) ty_train_model_params(tm)[i] *= 1.0625f;
            const double want = parts_step(tm, 3, whole);
            CHECK_MSG(isfinite(want) && want > 0, "%s: loss %g", what, want);
            for (int part_B = 1; part_B <= 2; part_B++) {
                const double got = parts_step(tm, part_B, part);
                CHECK_MSG(got == want, "%s%s, parts of %d: loss %.17g, whole %.17g", what,
                          changed ? " (weights changed)" : "", part_B, got, want);
                for (int i = 0; i < ty_train_model_n_tensors(tm); i++) {
                    const train_tensor *t = ty_train_model_tensor(tm, i);
                    CHECK_MSG(!memcmp(part + t->offset, whole + t->offset, (size_t)t->n * sizeof *part),
                              "%s%s, parts of %d: the gradient of %s differs from the whole's", what,
                              changed ? " (weights changed)" : "", part_B, t->name);
                }
            }
        }
        free(whole);
        free(part);
        ty_train_model_free(tm);
    }
    ty_pool_free(pool);
    toy_model_free(m);
}

/* kB of the file pages this process holds ("RssFile" of /proc/self/status), -1: unknown */
static long rss_file_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "RssFile:", 8)) kb = strtol(line + 8, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* Training copies every tensor of a full model: the file's pages go (8.6 MB of F32 data
 * here), where before they stayed resident beside the copy all through training. */
static void check_pages_dropped(const char *fix) {
    toy_model *m = load_fixture(fix, "llama-spm-f32");
    if (!m) return;
    const long before = rss_file_kb();
    train_model *tm = NULL;
    CHECK_MSG(ty_train_model_new(m, 8, NULL, &tm) == TOY_OK, "%s", toy_last_error());
    const long after = rss_file_kb();
    if (before < 0) printf("SKIP: no RssFile in /proc/self/status\n");
    else CHECK_MSG(after - before < 2048, "RssFile grew by %ld kB while copying the tensors", after - before);
    ty_train_model_free(tm);
    toy_model_free(m);
}

int main(void) {
    const char *fix = test_fixtures_dir();
    if (!fix) {
        printf("SKIP: needs llama.cpp's reference logits of the fixture models (*.ref.gguf)\n");
        return TEST_SKIP_CODE;
    }
    test_each_fixture_model(fix, NULL, check_model);
    check_threads(fix);
    check_parts(fix);
    check_pages_dropped(fix);
    return test_finish("test_train_fixtures");
}
