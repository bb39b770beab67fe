/* test_lora.c — LoRA adapters at inference (lora.h, toy_context_set_lora, toy_lora_merge).
 *
 * On fixture models of several layouts (separate and fused Q/K/V, fused gate/up, biases,
 * untied output, quantized and float weights), with an adapter on every matrix toy can
 * adapt, the token embedding included:
 *   - B = 0 (a fresh adapter) gives the base model's logits bit for bit;
 *   - an adapter with random A and B gives the logits of the model toy lora merge
 *     writes (F32 merged matrices): the same function, associated differently. F32 bases
 *     agree to rounding (max relRMS <= 1e-3: (W + sBA)x and Wx + sB(Ax) round apart,
 *     and the layers, softcaps included, carry it on; measured <= 2e-4); F16 bases
 *     within the fixtures' F16 tolerance (their products round activations to F16, the
 *     merged F32 matrices do not); quantized ones within the fixtures' quantized
 *     tolerance (median relRMS <= 0.1: activations rounded to 8 bits);
 *   - on a tied model an embedding adapter changes the output projection as well (the
 *     merged model has one matrix for both);
 *   - two adapters apply as their sum (an adapter with scale s and the same with -s
 *     cancel to rounding: relRMS <= 2e-4 on float bases);
 *   - the logits do not depend on the batch (one batch or token by token, bit for bit);
 *   - an F16 adapter (as llama.cpp's converter writes) gives the F32 one's logits;
 *   - bad adapters are refused with messages naming the file and tensor;
 *   - toy's design's per-head LoRA-Q adapter (one pair per query head, with moments and
 *     no general.type) gives the logits of the same adapter written as one pair with a
 *     block-diagonal B, bit for bit.
 * Without the fixtures: llama (F32, Q4_K_M) and qwen2 (F16, biases) models of
 * toy_init_model and the bundled model.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "lora.h"
#include "quant.h"
#include "test.h"
#include "toy.h"
#include "init_models.h"

enum { N_TOK = 12, RANK = 4 };

static char tmp_dir[256];

static toy_model *load(const char *path) {
    toy_model *m = NULL;
    CHECK_MSG(toy_model_load(path, &m) == TOY_OK, "%s", toy_last_error());
    return m;
}

/* Logits of N_TOK tokens, in one batch or one at a time, with these adapters. */
static float *logits(toy_model *m, toy_lora **loras, const float *scales, int n_lora, bool one_by_one) {
    toy_context_params p = toy_context_default_params();
    p.n_ctx = 64;
    p.n_batch = N_TOK;
    p.n_outputs = N_TOK;
    p.n_threads = 2;
    toy_context *ctx = NULL;
    if (toy_context_new(m, &p, &ctx) || (n_lora && toy_context_set_lora(ctx, loras, scales, n_lora))) {
        CHECK_MSG(0, "%s", toy_last_error());
        toy_context_free(ctx);
        return NULL;
    }
    const int32_t n_vocab = toy_model_n_vocab(m);
    float *out = xmalloc((size_t)N_TOK * (size_t)n_vocab * sizeof *out);
    int32_t tok[N_TOK], pos[N_TOK], seq[N_TOK] = {0};
    int8_t want[N_TOK];
    for (int i = 0; i < N_TOK; i++) tok[i] = (i * 37 + 5) % n_vocab, pos[i] = i, want[i] = 1;
    const int step = one_by_one ? 1 : N_TOK;
    for (int i = 0; i < N_TOK; i += step) {
        toy_batch b = {step, tok + i, pos + i, seq + i, want};
        CHECK_MSG(toy_decode(ctx, &b) == TOY_OK, "%s", toy_last_error());
        for (int j = 0; j < step; j++)
            memcpy(out + (size_t)(i + j) * (size_t)n_vocab, toy_get_logits(ctx, j), (size_t)n_vocab * sizeof *out);
    }
    toy_context_free(ctx);
    return out;
}

/* relRMS of each row; returns the median and writes the max. */
static double rel_rms(const float *got, const float *want, int32_t n_vocab, double *max) {
    double r[N_TOK];
    *max = 0;
    for (int t = 0; t < N_TOK; t++) {
        double d = 0, w = 0;
        for (int32_t v = 0; v < n_vocab; v++) {
            const double x = got[(size_t)t * n_vocab + v], y = want[(size_t)t * n_vocab + v];
            d += (x - y) * (x - y);
            w += y * y;
        }
        r[t] = sqrt(d / (w > 0 ? w : 1));
        if (r[t] > *max) *max = r[t];
    }
    for (int i = 1; i < N_TOK; i++)
        for (int j = i; j > 0 && r[j] < r[j - 1]; j--) {
            const double x = r[j];
            r[j] = r[j - 1];
            r[j - 1] = x;
        }
    return r[N_TOK / 2];
}

static bool is_adaptable(const char *name) {
    static const char *const kinds[] = {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_qkv.weight",
                                        ".attn_output.weight", ".ffn_gate.weight", ".ffn_up.weight",
                                        ".ffn_down.weight"};
    if (!strcmp(name, "output.weight") || !strcmp(name, "token_embd.weight")) return true;
    if (strncmp(name, "blk.", 4)) return false;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const size_t n = strlen(name), k = strlen(kinds[i]);
        if (n > k && !strcmp(name + n - k, kinds[i])) return true;
    }
    return false;
}

/* An adapter on every adaptable matrix of m: A ~ N(0, a_sd^2), B ~ N(0, b_sd^2). */
static void write_adapter(const toy_model *m, const char *path, float a_sd, float b_sd, unsigned long long seed) {
    const toy_gguf *g = toy_model_gguf(m);
    ty_lora_pair *pairs = calloc((size_t)toy_gguf_n_tensors(g), sizeof *pairs);
    int n = 0;
    unsigned long long rng = seed;
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        if (!is_adaptable(t->name)) continue;
        ty_lora_pair *p = &pairs[n++];
        snprintf(p->name, sizeof p->name, "%s", t->name);
        p->n_in = t->ne[0];
        p->n_out = t->ne[1];
        p->rank = RANK;
        const bool embd = !strcmp(t->name, "token_embd.weight");
        const int64_t na = RANK * (embd ? p->n_out : p->n_in), nb = RANK * (embd ? p->n_in : p->n_out);
        p->a = xmalloc((size_t)na * sizeof *p->a);
        p->b = xmalloc((size_t)nb * sizeof *p->b);
        for (int64_t j = 0; j < na; j++) p->a[j] = a_sd * test_rand_normal(&rng);
        for (int64_t j = 0; j < nb; j++) p->b[j] = b_sd * test_rand_normal(&rng);
    }
    const char *arch;
    size_t len;
    char arch_buf[64];
    CHECK(toy_gguf_get_str(g, "general.architecture", &arch, &len) == TOY_OK);
    snprintf(arch_buf, sizeof arch_buf, "%.*s", (int)len, arch);
    CHECK_MSG(ty_lora_write(path, arch_buf, 2.0f * RANK, pairs, n) == TOY_OK, "%s", toy_last_error());
    for (int i = 0; i < n; i++) {
        free(pairs[i].a);
        free(pairs[i].b);
    }
    free(pairs);
}

static toy_lora *load_lora(const toy_model *m, const char *path) {
    toy_lora *l = NULL;
    CHECK_MSG(toy_lora_load(m, path, &l) == TOY_OK, "%s", toy_last_error());
    return l;
}

typedef enum { BASE_F32, BASE_HALF, BASE_QUANT } base_kind;

static void check_model(const char *fix, const char *name, base_kind kind) {
    const bool quantized = kind == BASE_QUANT;
    char path[4400], zero_path[512], rand_path[512], merged_path[512];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, name);
    snprintf(zero_path, sizeof zero_path, "%s/%s.zero.gguf", tmp_dir, name);
    snprintf(rand_path, sizeof rand_path, "%s/%s.rand.gguf", tmp_dir, name);
    snprintf(merged_path, sizeof merged_path, "%s/%s.merged.gguf", tmp_dir, name);
    toy_model *m = load(path);
    if (!m) return;
    const int32_t n_vocab = toy_model_n_vocab(m);
    write_adapter(m, zero_path, 0.1f, 0.0f, 1);
    write_adapter(m, rand_path, 0.1f, 0.03f, 2);
    toy_lora *zero = load_lora(m, zero_path), *rnd = load_lora(m, rand_path);
    if (!zero || !rnd) goto out;
    CHECK_MSG(rnd->n_pairs >= 7, "%s: only %d pairs", name, rnd->n_pairs);

    float *base = logits(m, NULL, NULL, 0, false);
    float *with_zero = logits(m, &zero, (float[]){1.0f}, 1, false);
    CHECK_MSG(base && with_zero && !memcmp(base, with_zero, (size_t)N_TOK * n_vocab * sizeof(float)),
              "%s: an adapter with B = 0 changes the logits", name);

    float *adapted = logits(m, &rnd, (float[]){0.5f}, 1, false);
    float *adapted_seq = logits(m, &rnd, (float[]){0.5f}, 1, true);
    CHECK_MSG(adapted && adapted_seq && !memcmp(adapted, adapted_seq, (size_t)N_TOK * n_vocab * sizeof(float)),
              "%s: adapted logits depend on the batch", name);
    double mx;
    const double moved = rel_rms(adapted, base, n_vocab, &mx);
    CHECK_MSG(moved > 1e-2, "%s: the adapter barely moves the logits (relRMS %.3g)", name, moved);

    toy_lora *pair[2] = {rnd, rnd};
    float *cancel = logits(m, pair, (float[]){0.7f, -0.7f}, 2, false);
    const double cancelled = rel_rms(cancel, base, n_vocab, &mx);
    CHECK_MSG(mx < (quantized ? 5e-3 : 2e-4), "%s: an adapter and its negative leave relRMS %.3g (max %.3g)", name,
              cancelled, mx);

    CHECK_MSG(toy_lora_merge(m, &rnd, (float[]){0.5f}, 1, TOY_TYPE_F32, 2, merged_path) == TOY_OK, "%s",
              toy_last_error());
    toy_model *merged = load(merged_path);
    if (merged) {
        float *ml = logits(merged, NULL, NULL, 0, false);
        const double med = rel_rms(adapted, ml, n_vocab, &mx);
        if (kind == BASE_QUANT) CHECK_MSG(med <= 0.1, "%s: merged vs adapted relRMS median %.3g", name, med);
        else if (kind == BASE_HALF)
            CHECK_MSG(med <= 3e-3 && mx <= 2e-2, "%s: merged vs adapted relRMS median %.3g, max %.3g", name, med, mx);
        else CHECK_MSG(mx <= 1e-3, "%s: merged vs adapted relRMS max %.3g (median %.3g)", name, mx, med);
        printf("%s: adapter moves logits by relRMS %.3g; merged vs applied: median %.2g, max %.2g\n", name, moved,
               med, mx);
        free(ml);
        toy_model_free(merged);
    }
    free(base);
    free(with_zero);
    free(adapted);
    free(adapted_seq);
    free(cancel);
out:
    toy_lora_free(zero);
    toy_lora_free(rnd);
    toy_model_free(m);
    unlink(zero_path);
    unlink(rand_path);
    unlink(merged_path);
}

/* llama.cpp's converter writes F16 adapters as often as F32 ones: an F16 adapter gives
 * the logits of the F32 adapter holding the same (F16-rounded) values, bit for bit. */
static void check_f16_adapter(const char *fix, const char *model) {
    char path[4400], p16[512], p32[512];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, model);
    snprintf(p16, sizeof p16, "%s/f16.gguf", tmp_dir);
    snprintf(p32, sizeof p32, "%s/f32.gguf", tmp_dir);
    toy_model *m = load(path);
    if (!m) return;
    write_adapter(m, p32, 0.1f, 0.03f, 4);
    toy_lora *l = load_lora(m, p32);
    toy_gguf_writer *w = toy_gguf_writer_new();
    CHECK(w && toy_gguf_writer_set_str(w, "general.type", "adapter", 7) == TOY_OK);
    toy_gguf_writer_set_str(w, "general.architecture", "llama", 5);
    toy_gguf_writer_set_str(w, "adapter.type", "lora", 4);
    toy_gguf_writer_set_f32(w, "adapter.lora.alpha", l->alpha);
    ty_half **halves = calloc((size_t)l->n_pairs * 2, sizeof *halves);
    for (int i = 0; i < l->n_pairs; i++) {
        ty_lora_pair *p = &l->pairs[i];
        const bool embd = !strcmp(p->name, "token_embd.weight");
        const int64_t na = p->rank * (embd ? p->n_out : p->n_in), nb = p->rank * (embd ? p->n_in : p->n_out);
        float *src[2] = {p->a, p->b};
        const int64_t cnt[2] = {na, nb};
        const int64_t ne[2][2] = {{embd ? p->rank : p->n_in, embd ? p->n_out : p->rank},
                                  {p->rank, embd ? p->n_in : p->n_out}};
        for (int k = 0; k < 2; k++) {
            ty_half *h = halves[2 * i + k] = xmalloc((size_t)cnt[k] * sizeof *h);
            CHECK(toy_quantize(TOY_TYPE_F16, src[k], h, cnt[k]) == TOY_OK);
            for (int64_t j = 0; j < cnt[k]; j++) src[k][j] = ty_fp16_to_fp32(h[j]); /* the same values */
            char name[128];
            snprintf(name, sizeof name, "%s.lora_%c", p->name, k ? 'b' : 'a');
            CHECK(toy_gguf_writer_add_tensor(w, name, TOY_TYPE_F16, 2, ne[k], h) == TOY_OK);
        }
    }
    CHECK_MSG(toy_gguf_writer_write(w, p16) == TOY_OK, "%s", toy_last_error());
    toy_gguf_writer_free(w);
    toy_lora *h16 = load_lora(m, p16);
    if (h16) {
        float *a = logits(m, &l, (float[]){1.0f}, 1, false), *b = logits(m, &h16, (float[]){1.0f}, 1, false);
        CHECK_MSG(a && b && !memcmp(a, b, (size_t)N_TOK * toy_model_n_vocab(m) * sizeof(float)),
                  "an F16 adapter differs from the F32 one with its values");
        free(a);
        free(b);
    }
    for (int i = 0; i < 2 * l->n_pairs; i++) free(halves[i]);
    free(halves);
    toy_lora_free(l);
    toy_lora_free(h16);
    toy_model_free(m);
    unlink(p16);
    unlink(p32);
}

/* name: a llama model; other: one of other_arch */
static void check_errors(const char *fix, const char *name, const char *other_name, const char *other_arch) {
    char path[4400], other[4400], bad[512], want[128];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, name);
    snprintf(other, sizeof other, "%s/models/%s.gguf", fix, other_name);
    toy_model *m = load(path), *g = load(other);
    toy_lora *l = NULL;
    if (!m || !g) goto out;
    /* a model is not an adapter */
    CHECK(toy_lora_load(m, path, &l) != TOY_OK && !l);
    CHECK_STR_CONTAINS(toy_last_error(), "not \"adapter\"");
    /* an adapter of another architecture */
    snprintf(bad, sizeof bad, "%s/gemma.gguf", tmp_dir);
    write_adapter(g, bad, 0.1f, 0.1f, 3);
    CHECK(toy_lora_load(m, bad, &l) != TOY_OK);
    snprintf(want, sizeof want, "architecture \"%s\", the base model is \"llama\"", other_arch);
    CHECK_STR_CONTAINS(toy_last_error(), want);
    /* the right architecture, the wrong shapes */
    ty_lora_pair p = {.name = "blk.0.attn_q.weight", .n_in = 7, .n_out = 64, .rank = 2};
    p.a = calloc(14, sizeof(float));
    p.b = calloc(128, sizeof(float));
    snprintf(bad, sizeof bad, "%s/shape.gguf", tmp_dir);
    CHECK(ty_lora_write(bad, "llama", 4, &p, 1) == TOY_OK);
    CHECK(toy_lora_load(m, bad, &l) != TOY_OK);
    CHECK_STR_CONTAINS(toy_last_error(), "blk.0.attn_q.weight.lora_a is [7, 2]");
    /* a tensor the base does not have */
    snprintf(p.name, sizeof p.name, "blk.99.attn_q.weight");
    CHECK(ty_lora_write(bad, "llama", 4, &p, 1) == TOY_OK);
    CHECK(toy_lora_load(m, bad, &l) != TOY_OK);
    CHECK_STR_CONTAINS(toy_last_error(), "has no tensor blk.99.attn_q.weight");
    free(p.a);
    free(p.b);
    unlink(bad);
    snprintf(bad, sizeof bad, "%s/gemma.gguf", tmp_dir);
    unlink(bad);
out:
    toy_model_free(m);
    toy_model_free(g);
}

/* ---------------------------------------------------------------- the design's per-head LoRA-Q */

enum { HEAD_RANK = 2 };
typedef enum { PH_GOOD, PH_MISSING_B, PH_BAD_SHAPE } per_head_edit;

/* toy's design's adapter on every layer's Q (lora.h), written as the design names it: one
 * pair per head "blk.N.attn_q.head_H.lora_a.weight" [n_embd, r] and "...lora_b.weight"
 * [r, head_dim], with ".m" / ".v" moments, no general.type, and a base tensor beside them
 * (a checkpoint's); `plain` gets the same adapter in llama.cpp's format: one pair of rank
 * n_head r whose B is block-diagonal. Neither has an alpha: the scale is 1 for both. */
static void write_per_head(const toy_model *m, const char *path, const char *plain, per_head_edit edit) {
    const toy_gguf *g = toy_model_gguf(m);
    const int64_t G = toy_model_n_head(m), C = toy_gguf_find_tensor(g, "blk.0.attn_q.weight")->ne[0];
    const int64_t qd = toy_gguf_find_tensor(g, "blk.0.attn_q.weight")->ne[1], hd = qd / G, r = HEAD_RANK;
    int n_layer = 0;
    char name[128];
    while (snprintf(name, sizeof name, "blk.%d.attn_q.weight", n_layer), toy_gguf_find_tensor(g, name)) n_layer++;
    toy_gguf_writer *w = toy_gguf_writer_new();
    CHECK(toy_gguf_writer_set_str(w, "general.architecture", "llama", 5) == TOY_OK);
    const toy_gguf_tensor *norm = toy_gguf_find_tensor(g, "output_norm.weight");
    CHECK(toy_gguf_writer_add_tensor(w, norm->name, norm->type, 1, norm->ne, norm->data) == TOY_OK);
    ty_lora_pair *pairs = calloc((size_t)n_layer, sizeof *pairs);
    float *a = xmalloc((size_t)(n_layer * G * r * C) * sizeof *a), *b = xmalloc((size_t)(n_layer * qd * r) * sizeof *b);
    float *moment = xmalloc((size_t)(r * (C > hd ? C : hd)) * sizeof *moment);
    for (int64_t i = 0; i < r * (C > hd ? C : hd); i++) moment[i] = 0.5f;
    unsigned long long rng = 11;
    for (int il = 0; il < n_layer; il++) {
        ty_lora_pair *p = &pairs[il];
        *p = (ty_lora_pair){.n_in = C, .n_out = qd, .rank = G * r, .n_groups = 1};
        snprintf(p->name, sizeof p->name, "blk.%d.attn_q.weight", il);
        p->a = a + il * G * r * C;
        p->b = calloc((size_t)(qd * G * r), sizeof *p->b);
        for (int64_t h = 0; h < G; h++) {
            float *ah = p->a + h * r * C, *bh = b + (il * G + h) * hd * r;
            for (int64_t j = 0; j < r * C; j++) ah[j] = 0.2f * test_rand_normal(&rng);
            for (int64_t j = 0; j < hd * r; j++) bh[j] = 0.2f * test_rand_normal(&rng);
            for (int64_t o = 0; o < hd; o++)
                for (int64_t k = 0; k < r; k++) p->b[(h * hd + o) * G * r + h * r + k] = bh[o * r + k];
            const int64_t ne_a[2] = {edit == PH_BAD_SHAPE && il == 0 && h == 0 ? C - 1 : C, r}, ne_b[2] = {r, hd};
            for (int ab = 0; ab < 2; ab++) {
                if (edit == PH_MISSING_B && il == 0 && h == 1 && ab) continue;
                snprintf(name, sizeof name, "blk.%d.attn_q.head_%lld.lora_%c.weight", il, (long long)h, ab ? 'b' : 'a');
                CHECK(toy_gguf_writer_add_tensor(w, name, TOY_TYPE_F32, 2, ab ? ne_b : ne_a, ab ? bh : ah) == TOY_OK);
                for (int mv = 0; mv < 2; mv++) {
                    snprintf(name, sizeof name, "blk.%d.attn_q.head_%lld.lora_%c.weight.%c", il, (long long)h,
                             ab ? 'b' : 'a', mv ? 'v' : 'm');
                    CHECK(toy_gguf_writer_add_tensor(w, name, TOY_TYPE_F32, 2, ab ? ne_b : ne_a, moment) == TOY_OK);
                }
            }
        }
    }
    CHECK_MSG(toy_gguf_writer_write(w, path) == TOY_OK, "%s", toy_last_error());
    toy_gguf_writer_free(w);
    if (plain) CHECK_MSG(ty_lora_write(plain, "llama", 0.0f, pairs, n_layer) == TOY_OK, "%s", toy_last_error());
    for (int il = 0; il < n_layer; il++) free(pairs[il].b);
    free(pairs), free(a), free(b), free(moment);
}

/* The design's adapter gives the logits of its block-diagonal twin bit for bit, and
 * differs from the base; broken ones name what is wrong. */
static void check_per_head(const char *fix, const char *name) {
    char path[4400], ph[512], plain[512];
    snprintf(path, sizeof path, "%s/models/%s.gguf", fix, name);
    snprintf(ph, sizeof ph, "%s/per-head.gguf", tmp_dir);
    snprintf(plain, sizeof plain, "%s/plain.gguf", tmp_dir);
    toy_model *m = load(path);
    if (!m) return;
    write_per_head(m, ph, plain, PH_GOOD);
    toy_lora *l1 = load_lora(m, ph), *l2 = load_lora(m, plain);
    if (l1 && l2) {
        const int32_t nv = toy_model_n_vocab(m);
        float *base = logits(m, NULL, NULL, 0, false), *got = logits(m, &l1, NULL, 1, false);
        float *want = logits(m, &l2, NULL, 1, false);
        if (base && got && want) {
            CHECK_MSG(!memcmp(got, want, (size_t)N_TOK * nv * sizeof *got),
                      "%s: the per-head adapter's logits are not its block-diagonal twin's", name);
            double max;
            rel_rms(got, base, nv, &max);
            CHECK_MSG(max > 1e-2, "%s: the per-head adapter changes nothing (relRMS %g)", name, max);
        }
        free(base), free(got), free(want);
    }
    toy_lora_free(l1);
    toy_lora_free(l2);
    toy_lora *l = NULL;
    write_per_head(m, ph, NULL, PH_MISSING_B);
    CHECK(toy_lora_load(m, ph, &l) != TOY_OK && !l);
    CHECK_STR_CONTAINS(toy_last_error(), "tensor blk.0.attn_q.head_1.lora_b.weight is missing");
    write_per_head(m, ph, NULL, PH_BAD_SHAPE);
    CHECK(toy_lora_load(m, ph, &l) != TOY_OK && !l);
    CHECK_STR_CONTAINS(toy_last_error(), "head 0 of layer 0 needs");
    unlink(ph);
    unlink(plain);
    toy_model_free(m);
}

int main(void) {
    const char *fix = test_fixtures_dir();
    snprintf(tmp_dir, sizeof tmp_dir, "%s/toy-lora-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_dir)) return 1;
    if (!fix) {
        const char *dir = test_init_models_dir();
        if (dir) {
            check_model(dir, "init-llama-f32", BASE_F32);
            check_model(dir, "init-qwen2-f16", BASE_HALF); /* biases, tied */
            check_model(dir, "init-llama-q4_k_m", BASE_QUANT);
            check_f16_adapter(dir, "init-llama-f32");
            check_errors(dir, "init-llama-f32", "init-qwen2-f16", "qwen2");
            check_per_head(dir, "init-llama-f32");
        }
        rmdir(tmp_dir);
        return test_finish("test_lora");
    }
    check_model(fix, "llama-spm-f32", BASE_F32);
    check_model(fix, "phi3-f16", BASE_HALF);   /* fused attn_qkv and gate/up, tied */
    check_model(fix, "qwen2-f16", BASE_HALF);  /* biases, tied */
    check_model(fix, "gemma2-f32", BASE_F32);  /* embedding scale, post-norms, softcaps */
    check_model(fix, "llama-spm-q4_k_m", BASE_QUANT);
    check_model(fix, "llama-spm-q8_0", BASE_QUANT); /* packed weights where the CPU has them */
    check_f16_adapter(fix, "llama-spm-f32");
    check_errors(fix, "llama-spm-f32", "gemma2-f32", "gemma2");
    check_per_head(fix, "llama-spm-f32");
    check_per_head(fix, "llama-spm-q4_k_m");
    rmdir(tmp_dir);
    return test_finish("test_lora");
}
