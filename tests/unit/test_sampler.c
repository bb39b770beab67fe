/* test_sampler.c — the sampler chain (sampler.c) and stop strings (stop.c).
 *
 * Each stage is checked exactly on crafted logits through ty_sampler_candidates (the
 * chain without the random pick); the pick is checked for determinism and, statistically,
 * against the distribution it should draw from. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sampler.h"
#include "test.h"
#include "toy.h"

/* A sampler with every stage off (temperature 1): the plain softmax of the logits. */
static toy_sampler_params plain_params(void) {
    toy_sampler_params p = toy_sampler_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

static toy_sampler *make(const toy_sampler_params *p, int32_t n_vocab) {
    toy_sampler *s = NULL;
    const toy_status st = toy_sampler_new(p, n_vocab, &s);
    CHECK_MSG(st == TOY_OK, "toy_sampler_new: %s", toy_last_error());
    return s;
}

/* The ids the chain keeps, in its order, as a string like "1 3 0" for easy comparison. */
static const char *kept_ids(toy_sampler *s, const float *logits) {
    static char buf[512];
    const ty_sampler_candidate *c;
    const size_t n = ty_sampler_candidates(s, logits, &c);
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && used < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%d", i ? " " : "",
                                 (int)c[i].id);
    return buf;
}

#define CHECK_KEPT(s, logits, expected)                                                 \
    do {                                                                                \
        const char *got_ = kept_ids(s, logits);                                         \
        CHECK_MSG(strcmp(got_, expected) == 0, "kept \"%s\", expected \"%s\"", got_,    \
                  expected);                                                            \
    } while (0)

/* ================================================================ defaults, errors */

static void test_defaults_and_errors(void) {
    const toy_sampler_params d = toy_sampler_default_params();
    CHECK(d.temperature == 0.8f && d.top_k == 40 && d.top_p == 0.95f && d.min_p == 0.05f);
    CHECK(d.repeat_penalty == 1.0f && d.repeat_last_n == 64);
    CHECK(d.frequency_penalty == 0.0f && d.presence_penalty == 0.0f && d.seed == 0);

    toy_sampler *s = (toy_sampler *)1;
    CHECK_EQ(toy_sampler_new(&d, 0, &s), TOY_ERR_INVALID);
    CHECK(s == NULL);
    CHECK_STR_CONTAINS(toy_last_error(), "n_vocab");
    toy_sampler_params p = d;
    p.repeat_penalty = 0;
    CHECK_EQ(toy_sampler_new(&p, 10, &s), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "repeat_penalty");
    p = d;
    p.top_p = NAN;
    CHECK_EQ(toy_sampler_new(&p, 10, &s), TOY_ERR_INVALID);
    p = d;
    p.repeat_last_n = -2;
    CHECK_EQ(toy_sampler_new(&p, 10, &s), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "repeat_last_n");
    /* NULL params are the defaults */
    CHECK_EQ(toy_sampler_new(NULL, 10, &s), TOY_OK);
    toy_sampler_free(s);
    toy_sampler_free(NULL);
}

/* ================================================================ greedy */

static void test_greedy(void) {
    toy_sampler_params p = toy_sampler_default_params();
    p.temperature = 0;
    toy_sampler *s = make(&p, 5);
    const float tie[5] = {1, 3, 3, 2, -1};
    CHECK_EQ(toy_sampler_sample(s, tie), 1); /* the lower id of the two 3s */
    const float last[5] = {1, 2, 3, 4, 5};
    CHECK_EQ(toy_sampler_sample(s, last), 4);
    const float all_inf[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK_EQ(toy_sampler_sample(s, all_inf), 0);
    toy_sampler_free(s);

    /* temperature < 0 is greedy too */
    p.temperature = -1;
    s = make(&p, 5);
    CHECK_EQ(toy_sampler_sample(s, tie), 1);
    toy_sampler_free(s);
}

/* top-k = 1 leaves only the argmax, so it picks what greedy picks, on any row. */
static void test_top_k_1_is_greedy(void) {
    enum { N = 1000 };
    static float logits[N];
    toy_sampler_params pg = toy_sampler_default_params(), pk = pg;
    pg.temperature = 0;
    pk.top_k = 1;
    pk.seed = 7;
    toy_sampler *greedy = make(&pg, N), *k1 = make(&pk, N);
    unsigned long long r = 42;
    int agree = 0;
    for (int row = 0; row < 200; row++) {
        for (int i = 0; i < N; i++) logits[i] = 3 * test_rand_normal(&r);
        if (row % 10 == 0) logits[N - 1] = logits[N / 2] = 100; /* a tie at the top */
        agree += toy_sampler_sample(greedy, logits) == toy_sampler_sample(k1, logits);
    }
    CHECK_EQ(agree, 200);
    toy_sampler_free(greedy);
    toy_sampler_free(k1);
}

/* ================================================================ the stages */

static void test_top_k(void) {
    toy_sampler_params p = plain_params();
    p.top_k = 2;
    toy_sampler *s = make(&p, 5);
    const float logits[5] = {1, 5, 3, 4, 2};
    CHECK_KEPT(s, logits, "1 3");
    const ty_sampler_candidate *c;
    CHECK_EQ(ty_sampler_candidates(s, logits, &c), 2);
    /* the softmax over the survivors only: 1 / (1 + e^-1) */
    CHECK_NEAR(c[0].p, 1 / (1 + exp(-1.0)), 1e-12);
    CHECK_NEAR(c[1].p, 1 / (1 + exp(1.0)), 1e-12);
    /* equal logits: the lower ids go first */
    const float flat[5] = {2, 2, 2, 2, 2};
    CHECK_KEPT(s, flat, "0 1");
    toy_sampler_free(s);

    /* top_k >= n_vocab, or <= 0: off (every token, in id order) */
    p.top_k = 5;
    s = make(&p, 5);
    CHECK_KEPT(s, logits, "0 1 2 3 4");
    toy_sampler_free(s);
}

/* Probabilities 0.4, 0.3, 0.2, 0.1 (shuffled ids): top-p keeps the shortest best-first
 * prefix that reaches p, computed over the whole vocabulary (top-k off) or over top-k's
 * survivors. */
static void test_top_p(void) {
    const float logits[4] = {logf(0.2f), logf(0.4f), logf(0.1f), logf(0.3f)};
    const struct {
        float top_p;
        int top_k;
        const char *kept;
    } cases[] = {
        /* top-k off: the survivors in id order */
        {0.35f, 0, "1"},
        {0.65f, 0, "1 3"},
        {0.75f, 0, "0 1 3"},
        {0.95f, 0, "0 1 2 3"},
        {0.0f, 0, "1"},
        /* top-k on: best first */
        {0.65f, 3, "1 3"},
        {0.75f, 3, "1 3"},
        /* with top-k 3 the survivors are 4/9, 3/9, 2/9: 0.75 needs all three */
        {0.80f, 3, "1 3 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        toy_sampler_params p = plain_params();
        p.top_p = cases[i].top_p;
        p.top_k = cases[i].top_k;
        toy_sampler *s = make(&p, 4);
        const char *got = kept_ids(s, logits);
        CHECK_MSG(strcmp(got, cases[i].kept) == 0, "top_p %g top_k %d: kept \"%s\", expected \"%s\"",
                  (double)cases[i].top_p, cases[i].top_k, got, cases[i].kept);
        toy_sampler_free(s);
    }
}

/* Reaching p exactly is enough (llama.cpp compares cum >= p): four equal tokens have
 * probability 0.25 each, exactly, so top-p 0.5 keeps two. */
static void test_top_p_boundary(void) {
    const float four[4] = {0, 0, 0, 0};
    toy_sampler_params p = plain_params();
    p.top_p = 0.5f;
    toy_sampler *s = make(&p, 4); /* top-k off: probabilities over the vocabulary */
    CHECK_KEPT(s, four, "0 1");
    toy_sampler_free(s);
    const float five[5] = {0, 0, -100, 0, 0};
    p.top_k = 4; /* top-k's four survivors */
    s = make(&p, 5);
    CHECK_KEPT(s, five, "0 1");
    toy_sampler_free(s);
}

/* Top-p without top-k on a large vocabulary (the quickselect path), from a prefix of a
 * few tokens to nearly all of them, with and without many equal logits: the kept ids
 * must be exactly a brute-force sort's prefix (ties ranked by id), listed in id order. */
static const float *rank_logits;

static int cmp_rank(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const float lx = rank_logits[x], ly = rank_logits[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return (x > y) - (x < y);
}

static int cmp_id(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void test_top_p_large_vocab(void) {
    enum { N = 50000 };
    static float logits[N];
    static int32_t order[N];
    unsigned long long r = 9;
    for (int quantized = 0; quantized < 2; quantized++) {
        for (int i = 0; i < N; i++) {
            logits[i] = 1.5f * test_rand_normal(&r);
            if (quantized) logits[i] = roundf(logits[i] * 2) / 2; /* thousands of ties */
            order[i] = i;
        }
        rank_logits = logits;
        qsort(order, N, sizeof *order, cmp_rank);
        const float max = logits[order[0]];
        double total = 0;
        for (int i = 0; i < N; i++) total += exp((double)logits[i] - max);
        const float cases[] = {0.001f, 0.3f, 0.9f, 0.999f};
        for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
            size_t expect = 0;
            double cum = 0;
            while (expect < N) {
                cum += exp((double)logits[order[expect++]] - max) / total;
                if (cum >= cases[t]) break;
            }
            static int32_t want[N];
            memcpy(want, order, expect * sizeof *want);
            qsort(want, expect, sizeof *want, cmp_id);

            toy_sampler_params p = plain_params();
            p.top_p = cases[t];
            toy_sampler *s = make(&p, N);
            const ty_sampler_candidate *c;
            const size_t n = ty_sampler_candidates(s, logits, &c);
            int same = n == expect;
            for (size_t i = 0; i < n && same; i++) same = c[i].id == want[i];
            CHECK_MSG(same, "top_p %g%s: kept %zu tokens, brute force %zu (or other ids)",
                      (double)cases[t], quantized ? " (ties)" : "", n, expect);
            toy_sampler_free(s);
        }
    }
}

/* min-p keeps p >= min_p * p_max. Probabilities 0.5, 0.2, 0.04, 0.026, 0.234: with min_p
 * 0.1 the floor is 0.05, which 0.04 and 0.026 miss. */
static void test_min_p(void) {
    const float logits[5] = {logf(0.5f), logf(0.2f), logf(0.04f), logf(0.026f), logf(0.234f)};
    toy_sampler_params p = plain_params();
    p.min_p = 0.1f;
    toy_sampler *s = make(&p, 5);
    CHECK_KEPT(s, logits, "0 1 4"); /* unsorted path: id order */
    const ty_sampler_candidate *c;
    ty_sampler_candidates(s, logits, &c);
    CHECK_NEAR(c[0].p, 0.5 / 0.934, 1e-6);
    CHECK_NEAR(c[2].p, 0.234 / 0.934, 1e-6);
    toy_sampler_free(s);

    p.top_k = 4; /* sorted path */
    s = make(&p, 5);
    CHECK_KEPT(s, logits, "0 4 1");
    toy_sampler_free(s);

    p.top_k = 0;
    p.min_p = 0.45f; /* 0.234 / 0.5 = 0.468 stays, 0.4 goes */
    s = make(&p, 5);
    CHECK_KEPT(s, logits, "0 4");
    toy_sampler_free(s);

    p.min_p = 1.5f; /* nothing would pass: llama.cpp then keeps everything */
    s = make(&p, 5);
    CHECK_KEPT(s, logits, "0 1 2 3 4");
    toy_sampler_free(s);
}

/* The order of the stages: min-p sees top-p's survivors, temperature comes last. */
static void test_stage_order(void) {
    const float logits[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    toy_sampler_params p = plain_params();
    p.top_p = 0.85f; /* keeps 0.4, 0.3, 0.2 */
    p.min_p = 0.6f;  /* then 0.3 / 0.4 = 0.75 stays, 0.2 / 0.4 = 0.5 goes */
    p.temperature = 2.0f;
    toy_sampler *s = make(&p, 4);
    const ty_sampler_candidate *c;
    CHECK_EQ(ty_sampler_candidates(s, logits, &c), 2);
    /* temperature 2 on the two survivors: p ∝ sqrt(0.4), sqrt(0.3) */
    const double a = sqrt(0.4), b = sqrt(0.3);
    CHECK_NEAR(c[0].p, a / (a + b), 1e-6);
    CHECK_NEAR(c[1].p, b / (a + b), 1e-6);
    toy_sampler_free(s);
}

/* ================================================================ penalties */

static void test_penalties(void) {
    toy_sampler_params p = plain_params();
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    p.repeat_last_n = 3;
    toy_sampler *s = make(&p, 5);
    const float logits[5] = {1, 2, -2, 0, 4};
    float out[5];

    ty_sampler_apply_penalties(s, logits, out);
    CHECK(memcmp(out, logits, sizeof out) == 0); /* nothing accepted yet */

    /* the window (last 3) holds 2, 2, 3; token 1 has left it */
    toy_sampler_accept(s, 1);
    toy_sampler_accept(s, 2);
    toy_sampler_accept(s, 2);
    toy_sampler_accept(s, 3);
    ty_sampler_apply_penalties(s, logits, out);
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == 2.0f);
    CHECK(out[2] == -5.25f); /* -2 * 2 - (2 * 0.5 + 0.25) */
    CHECK(out[3] == -0.75f); /* 0 - (0.5 + 0.25) */
    CHECK(out[4] == 4.0f);

    toy_sampler_accept(s, 4); /* window 2, 3, 4 */
    ty_sampler_apply_penalties(s, logits, out);
    CHECK(out[2] == -4.75f); /* -2 * 2 - 0.75 */
    CHECK(out[4] == 1.25f);  /* 4 / 2 - 0.75: a positive logit is divided */

    toy_sampler_accept(s, 99); /* out of range: ignored */
    toy_sampler_accept(s, -1);
    ty_sampler_apply_penalties(s, logits, out);
    CHECK(out[2] == -4.75f && out[4] == 1.25f);

    toy_sampler_reset(s);
    ty_sampler_apply_penalties(s, logits, out);
    CHECK(memcmp(out, logits, sizeof out) == 0);
    toy_sampler_free(s);

    /* an unbounded window (-1) counts every token since the reset */
    p.repeat_last_n = -1;
    p.repeat_penalty = 1.0f;
    s = make(&p, 5);
    for (int i = 0; i < 100; i++) toy_sampler_accept(s, 1);
    ty_sampler_apply_penalties(s, logits, out);
    CHECK(out[1] == 2.0f - (100 * 0.5f + 0.25f));
    toy_sampler_free(s);

    /* repeat_last_n = 0: no penalties at all */
    p.repeat_last_n = 0;
    s = make(&p, 5);
    toy_sampler_accept(s, 1);
    ty_sampler_apply_penalties(s, logits, out);
    CHECK(memcmp(out, logits, sizeof out) == 0);
    toy_sampler_free(s);

    /* the penalty changes what greedy picks: 3 / 1.1 < 2.9 */
    p = toy_sampler_default_params();
    p.temperature = 0;
    p.repeat_penalty = 1.1f;
    s = make(&p, 2);
    const float close[2] = {3.0f, 2.9f};
    CHECK_EQ(toy_sampler_sample(s, close), 0);
    toy_sampler_accept(s, 0);
    CHECK_EQ(toy_sampler_sample(s, close), 1);
    toy_sampler_free(s);
}

/* ================================================================ the random pick */

/* Rows of random logits, the sampled token accepted into the history each step. */
static void run_sequence(uint64_t seed, int32_t *out, int n) {
    enum { V = 64 };
    float logits[V];
    toy_sampler_params p = toy_sampler_default_params();
    p.seed = seed;
    p.repeat_penalty = 1.1f;
    toy_sampler *s = make(&p, V);
    unsigned long long r = 1234;
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < V; i++) logits[i] = 2 * test_rand_normal(&r);
        out[t] = toy_sampler_sample(s, logits);
        toy_sampler_accept(s, out[t]);
    }
    toy_sampler_free(s);
}

static void test_determinism(void) {
    enum { N = 1000 };
    static int32_t a[N], b[N], c[N];
    run_sequence(1, a, N);
    run_sequence(1, b, N);
    run_sequence(2, c, N);
    CHECK(memcmp(a, b, sizeof a) == 0);
    int differ = 0;
    for (int i = 0; i < N; i++) differ += a[i] != c[i];
    CHECK_MSG(differ > 100, "seeds 1 and 2 differ in only %d of %d tokens", differ, N);

    /* the generator itself: the first draws for seed 0 (splitmix64 → xoshiro256**) are
     * fixed forever, so a platform that computes them differently fails here */
    toy_sampler_params p = plain_params();
    toy_sampler *s = make(&p, 3);
    const double u0 = ty_sampler_uniform(s), u1 = ty_sampler_uniform(s);
    CHECK(u0 >= 0 && u0 < 1 && u1 >= 0 && u1 < 1 && u0 != u1);
    toy_sampler_reset(s); /* starts the stream over */
    CHECK(ty_sampler_uniform(s) == u0);
    CHECK(ty_sampler_uniform(s) == u1);
    toy_sampler_free(s);
}

/* Temperature 1 over log(0.5, 0.3, 0.2): 20000 draws land within 2% of each probability
 * (the standard deviation of a frequency here is at most 0.0035, so 2% is over 5 sigma). */
static void test_distribution(void) {
    const float logits[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    toy_sampler_params p = plain_params();
    p.seed = 2024;
    toy_sampler *s = make(&p, 3);
    int counts[3] = {0, 0, 0};
    for (int i = 0; i < 20000; i++) {
        const int32_t t = toy_sampler_sample(s, logits);
        if (t >= 0 && t < 3) counts[t]++;
    }
    CHECK_NEAR(counts[0] / 20000.0, 0.5, 0.02);
    CHECK_NEAR(counts[1] / 20000.0, 0.3, 0.02);
    CHECK_NEAR(counts[2] / 20000.0, 0.2, 0.02);
    CHECK_EQ(counts[0] + counts[1] + counts[2], 20000);
    toy_sampler_free(s);
}

/* NaN is -inf: never picked, and it does not poison the softmax. +inf takes all the mass. */
static void test_nan_inf(void) {
    toy_sampler_params p = plain_params();
    toy_sampler *s = make(&p, 4);
    const float with_nan[4] = {NAN, 1.0f, NAN, 2.0f};
    int bad = 0;
    for (int i = 0; i < 500; i++) {
        const int32_t t = toy_sampler_sample(s, with_nan);
        bad += t != 1 && t != 3;
    }
    CHECK_EQ(bad, 0);
    CHECK_KEPT(s, with_nan, "1 3");

    const float with_inf[4] = {INFINITY, 0.0f, INFINITY, -INFINITY};
    const ty_sampler_candidate *c;
    const size_t n = ty_sampler_candidates(s, with_inf, &c);
    CHECK_EQ(n, 3);
    CHECK(c[0].p == 0.5 && c[1].p == 0 && c[2].p == 0.5);
    for (int i = 0; i < 200; i++) {
        const int32_t t = toy_sampler_sample(s, with_inf);
        bad += t != 0 && t != 2;
    }
    CHECK_EQ(bad, 0);

    const float all_nan[4] = {NAN, NAN, NAN, NAN};
    CHECK_EQ(toy_sampler_sample(s, all_nan), 0);
    toy_sampler_free(s);

    /* the same through top-k, top-p, min-p and greedy */
    p = toy_sampler_default_params();
    p.top_k = 2;
    s = make(&p, 4);
    CHECK_KEPT(s, with_nan, "3 1");
    CHECK_EQ(toy_sampler_sample(s, all_nan), 0);
    toy_sampler_free(s);
    p.top_k = 0;
    s = make(&p, 4);
    CHECK_EQ(toy_sampler_sample(s, all_nan), 0);
    CHECK_KEPT(s, with_inf, "0 2");
    toy_sampler_free(s);
    p.temperature = 0;
    s = make(&p, 4);
    CHECK_EQ(toy_sampler_sample(s, with_nan), 3);
    CHECK_EQ(toy_sampler_sample(s, all_nan), 0);
    toy_sampler_free(s);
}

static int cmp_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* A 256k vocabulary with the default chain: the pick is always one of the 40 best. */
static void test_large_vocab(void) {
    enum { N = 256000 };
    static float logits[N], sorted[N];
    unsigned long long r = 77;
    for (int i = 0; i < N; i++) sorted[i] = logits[i] = 4 * test_rand_normal(&r);
    qsort(sorted, N, sizeof *sorted, cmp_desc);
    toy_sampler *s = make(NULL, N);
    int outside = 0;
    for (int i = 0; i < 20; i++) outside += logits[toy_sampler_sample(s, logits)] < sorted[39];
    CHECK_EQ(outside, 0);
    toy_sampler_free(s);
}

/* ================================================================ stop strings */

typedef struct {
    char text[256];
    size_t len;
    bool stopped;
} stream_out;

/* Feeds pieces (NUL-terminated unless lens gives lengths) and gathers what is emitted;
 * flushes at the end unless a stop string appeared. */
static stream_out stream(const char *const *stops, size_t n_stops, const char *const *pieces,
                         const size_t *lens, size_t n_pieces) {
    stream_out o = {{0}, 0, false};
    toy_stop *st = NULL;
    CHECK_EQ(toy_stop_new(stops, n_stops, &st), TOY_OK);
    if (!st) return o;
    const char *emit;
    size_t emit_len;
    for (size_t i = 0; i < n_pieces && !o.stopped; i++) {
        const size_t len = lens ? lens[i] : strlen(pieces[i]);
        o.stopped = toy_stop_feed(st, pieces[i], len, &emit, &emit_len);
        if (o.len + emit_len <= sizeof o.text) memcpy(o.text + o.len, emit, emit_len);
        o.len += emit_len;
    }
    if (!o.stopped) {
        toy_stop_flush(st, &emit, &emit_len);
        if (o.len + emit_len <= sizeof o.text) memcpy(o.text + o.len, emit, emit_len);
        o.len += emit_len;
    }
    toy_stop_free(st);
    return o;
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

#define CHECK_STREAM(o, expected_text, expected_len, expected_stop)                     \
    do {                                                                                \
        CHECK_EQ((o).len, expected_len);                                                \
        CHECK((o).len == (expected_len) && memcmp((o).text, expected_text, expected_len) == 0); \
        CHECK_EQ((o).stopped, expected_stop);                                           \
    } while (0)

static void test_stop_strings(void) {
    /* overlapping stops: "ab" completes inside "aab" before "abc" could */
    const char *ab_abc[] = {"ab", "abc"};
    const char *aab[] = {"aab"};
    stream_out o = stream(ab_abc, 2, aab, NULL, 1);
    CHECK_STREAM(o, "a", 1, true);
    const char *a_a_b[] = {"a", "a", "b"};
    o = stream(ab_abc, 2, a_a_b, NULL, 3);
    CHECK_STREAM(o, "a", 1, true);

    /* a stop string across many pieces; the text after it is never emitted */
    const char *im_end[] = {"<|im_end|>"};
    const char *spread[] = {"Hello", " wor", "ld<|", "im", "_e", "", "nd|>", "junk"};
    o = stream(im_end, 1, spread, NULL, N_OF(spread));
    CHECK_STREAM(o, "Hello world", 11, true);
    const char *after[] = {"Hi<|im_end|>more"};
    o = stream(im_end, 1, after, NULL, 1);
    CHECK_STREAM(o, "Hi", 2, true);
    const char *at_start[] = {"<|im_end|>"};
    o = stream(im_end, 1, at_start, NULL, 1);
    CHECK_STREAM(o, "", 0, true);

    /* a false start is released once it cannot be a stop any more */
    const char *abc[] = {"abc"};
    const char *xab_d[] = {"xab", "d"};
    o = stream(abc, 1, xab_d, NULL, 2);
    CHECK_STREAM(o, "xabd", 4, false);
    /* a held prefix is released at the end */
    const char *xab[] = {"xab"};
    o = stream(abc, 1, xab, NULL, 1);
    CHECK_STREAM(o, "xab", 3, false);
    /* a suffix that restarts the stop: "ab" + "abc" → "ab" out, then the stop */
    const char *abcd[] = {"abcd"};
    const char *ab_abc_e[] = {"ab", "abc", "e"};
    o = stream(abcd, 1, ab_abc_e, NULL, 3);
    CHECK_STREAM(o, "ababce", 6, false);
    const char *ab_abcd[] = {"ab", "abc", "d"};
    o = stream(abcd, 1, ab_abcd, NULL, 3);
    CHECK_STREAM(o, "ab", 2, true);

    /* the earliest stop wins, whichever is listed first */
    const char *two[] = {"xyz", "b"};
    const char *abxyz[] = {"abxyz"};
    o = stream(two, 2, abxyz, NULL, 1);
    CHECK_STREAM(o, "a", 1, true);

    /* embedded NULs are bytes */
    const char *stop[] = {"STOP"};
    const char *nul_pieces[] = {"x\0yST", "OP"};
    const size_t nul_lens[] = {5, 2};
    o = stream(stop, 1, nul_pieces, nul_lens, 2);
    CHECK_STREAM(o, "x\0y", 3, true);
    const char *nul_only[] = {"\0\0"};
    const size_t two_lens[] = {2};
    o = stream(stop, 1, nul_only, two_lens, 1);
    CHECK_STREAM(o, "\0\0", 2, false);

    /* a character cut by a stop string can never complete: it is dropped */
    const char *cut[] = {"a\xE2\x82STOP"};
    o = stream(stop, 1, cut, NULL, 1);
    CHECK_STREAM(o, "a", 1, true);
    /* ... and a multi-byte stop string, split mid-character */
    const char *euro_stop[] = {"\xE2\x82\xAC!"};
    const char *euro_pieces[] = {"5\xE2", "\x82", "\xAC", "!tail"};
    o = stream(euro_stop, 1, euro_pieces, NULL, 4);
    CHECK_STREAM(o, "5", 1, true);
    const char *euro_no[] = {"5\xE2", "\x82", "\xAC", "?"};
    o = stream(euro_stop, 1, euro_no, NULL, 4);
    CHECK_STREAM(o, "5\xE2\x82\xAC?", 5, false);

    /* errors */
    toy_stop *st = (toy_stop *)1;
    const char *empty[] = {"ok", ""};
    CHECK_EQ(toy_stop_new(empty, 2, &st), TOY_ERR_INVALID);
    CHECK(st == NULL);
    CHECK_STR_CONTAINS(toy_last_error(), "stop string 1 is empty");
    const char *null_entry[] = {NULL};
    CHECK_EQ(toy_stop_new(null_entry, 1, &st), TOY_ERR_INVALID);
    toy_stop_free(NULL);
}

/* What each feed emits, step by step: held bytes come out as soon as they are safe. */
static void test_stop_steps(void) {
    const char *stops[] = {"ab", "abc"};
    toy_stop *st = NULL;
    CHECK_EQ(toy_stop_new(stops, 2, &st), TOY_OK);
    const char *emit;
    size_t n;
    CHECK(!toy_stop_feed(st, "xa", 2, &emit, &n));
    CHECK(n == 1 && emit[0] == 'x');
    CHECK(!toy_stop_feed(st, "a", 1, &emit, &n)); /* the first 'a' is safe now */
    CHECK(n == 1 && emit[0] == 'a');
    CHECK(!toy_stop_feed(st, NULL, 0, &emit, &n)); /* an empty piece changes nothing */
    CHECK_EQ(n, 0);
    CHECK(toy_stop_feed(st, "bc", 2, &emit, &n));
    CHECK_EQ(n, 0);
    /* after a stop: nothing more, even when fed */
    CHECK(toy_stop_feed(st, "zz", 2, &emit, &n));
    CHECK_EQ(n, 0);
    toy_stop_flush(st, &emit, &n);
    CHECK_EQ(n, 0);
    /* after a flush the matcher takes a new stream */
    CHECK(!toy_stop_feed(st, "zz", 2, &emit, &n));
    CHECK(n == 2 && memcmp(emit, "zz", 2) == 0);
    toy_stop_free(st);
}

/* With no stop strings the matcher only keeps UTF-8 characters whole. */
static void test_utf8_streaming(void) {
    const char *e_acute[] = {"caf\xC3", "\xA9!"};
    stream_out o = stream(NULL, 0, e_acute, NULL, 2);
    CHECK_STREAM(o, "caf\xC3\xA9!", 6, false);

    toy_stop *st = NULL;
    CHECK_EQ(toy_stop_new(NULL, 0, &st), TOY_OK);
    const char *emit;
    size_t n;
    /* € = E2 82 AC, one byte at a time */
    CHECK(!toy_stop_feed(st, "\xE2", 1, &emit, &n));
    CHECK_EQ(n, 0);
    CHECK(!toy_stop_feed(st, "\x82", 1, &emit, &n));
    CHECK_EQ(n, 0);
    CHECK(!toy_stop_feed(st, "\xAC", 1, &emit, &n));
    CHECK(n == 3 && memcmp(emit, "\xE2\x82\xAC", 3) == 0);
    /* 😀 = F0 9F 98 80, split 1 + 3 */
    CHECK(!toy_stop_feed(st, "a\xF0", 2, &emit, &n));
    CHECK(n == 1 && emit[0] == 'a');
    CHECK(!toy_stop_feed(st, "\x9F\x98\x80", 3, &emit, &n));
    CHECK(n == 4 && memcmp(emit, "\xF0\x9F\x98\x80", 4) == 0);
    /* bytes that can never start or continue a character are not held */
    CHECK(!toy_stop_feed(st, "\xFF", 1, &emit, &n));
    CHECK_EQ(n, 1);
    CHECK(!toy_stop_feed(st, "\x80", 1, &emit, &n));
    CHECK_EQ(n, 1);
    CHECK(!toy_stop_feed(st, "\xC0", 1, &emit, &n)); /* C0 only starts overlong forms */
    CHECK_EQ(n, 1);
    CHECK(!toy_stop_feed(st, "\xE0\x80", 2, &emit, &n)); /* E0 needs A0..BF next */
    CHECK_EQ(n, 2);
    /* a lead byte followed by ASCII: it will never complete, so out it goes */
    CHECK(!toy_stop_feed(st, "\xC3", 1, &emit, &n));
    CHECK_EQ(n, 0);
    CHECK(!toy_stop_feed(st, "z", 1, &emit, &n));
    CHECK(n == 2 && memcmp(emit, "\xC3z", 2) == 0);
    /* at the end, a partial character is dropped */
    CHECK(!toy_stop_feed(st, "x\xE2\x82", 3, &emit, &n));
    CHECK(n == 1 && emit[0] == 'x');
    toy_stop_flush(st, &emit, &n);
    CHECK_EQ(n, 0);
    toy_stop_free(st);
}

int main(void) {
    test_defaults_and_errors();
    test_greedy();
    test_top_k_1_is_greedy();
    test_top_k();
    test_top_p();
    test_top_p_boundary();
    test_top_p_large_vocab();
    test_min_p();
    test_stage_order();
    test_penalties();
    test_determinism();
    test_distribution();
    test_nan_inf();
    test_large_vocab();
    test_stop_strings();
    test_stop_steps();
    test_utf8_streaming();
    return test_finish("test_sampler");
}
