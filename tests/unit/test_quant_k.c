/* test_quant_k.c — the K-quants (Q2_K..Q6_K): hand-built blocks decode to known
 * values, quantization round trips stay within measured error bounds, edge rows stay
 * finite, and a checksum pins the quantizers to their llama.cpp-identical output. */
#include "quant.h"
#include "test.h"

#include <stdint.h>

typedef struct {
    const char *name;
    ty_from_float_fn quantize;
    ty_to_float_fn dequantize;
    size_t block_bytes;
    /* Upper bound on RMSE / std of a round trip of N(0, 1) data. Measured over five
     * seeds of 64 super-blocks each (Q2_K 0.295-0.301, Q3_K 0.149-0.152, Q4_K
     * 0.0705-0.0724, Q5_K 0.0357-0.0363, Q6_K 0.0176-0.0178), then ~5% of headroom:
     * roughly halving with each extra bit, as a uniform quantizer should. */
    double gauss_bound;
    /* The same for -|N(0, 1)| - 0.5, a row with no positive value (measured Q2_K
     * 0.274-0.280, Q3_K 0.276-0.279, Q4_K 0.067-0.068, Q5_K 0.035-0.036, Q6_K
     * 0.035-0.036, relative to that row's std of ~0.6). Q3_K and Q6_K are symmetric
     * around 0, so a one-sided row wastes half their levels: Q3_K drops to Q2_K's
     * quality and Q6_K to Q5_K's. */
    double negative_bound;
    /* Upper bound on RMSE(quantize(dequantize(q))) / RMSE(q) on the Gaussian row. The
     * requantized row is already on a grid, but the searches need not find that grid
     * again: Q2_K's mean-absolute-error fit, Q3_K's greedy refinement and Q5_K's
     * shifting grid sometimes settle on a neighbouring scale (measured up to 0.05,
     * 0.24 and 0.13 of the first round trip's error). Q4_K and Q6_K came back
     * unchanged in every measurement. llama.cpp's reference quantizers, which these
     * match bit for bit, behave the same. */
    double requant_bound;
} kquant;

static const kquant kquants[] = {
    {"Q2_K", ty_quantize_row_q2_K, ty_dequantize_row_q2_K, sizeof(block_q2_K), 0.32, 0.30,
     0.10},
    {"Q3_K", ty_quantize_row_q3_K, ty_dequantize_row_q3_K, sizeof(block_q3_K), 0.16, 0.30,
     0.30},
    {"Q4_K", ty_quantize_row_q4_K, ty_dequantize_row_q4_K, sizeof(block_q4_K), 0.076,
     0.072, 0.01},
    {"Q5_K", ty_quantize_row_q5_K, ty_dequantize_row_q5_K, sizeof(block_q5_K), 0.038,
     0.038, 0.20},
    {"Q6_K", ty_quantize_row_q6_K, ty_dequantize_row_q6_K, sizeof(block_q6_K), 0.019,
     0.038, 0.01},
};
#define N_KQUANTS ((int)(sizeof kquants / sizeof kquants[0]))

#define HALF_0_25 0x3400
#define HALF_0_5 0x3800
#define HALF_1 0x3C00
#define HALF_2 0x4000

static double rmse(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / n);
}

static double stddev(const float *x, int n) {
    double mean = 0, s = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) s += (x[i] - mean) * (x[i] - mean);
    return sqrt(s / n);
}

static int count_nonfinite(const float *y, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !isfinite(y[i]);
    return bad;
}

static void check_decodes_to(const char *name, const float *got, const float *want) {
    for (int e = 0; e < QK_K; e++)
        CHECK_MSG(got[e] == want[e], "%s weight %d: got %.9g, want %.9g", name, e, got[e],
                  want[e]);
}

static void fill(float *v, int from, int to, float value) {
    for (int i = from; i < to; i++) v[i] = value;
}

/* ---------------------------------------------------------------- hand-built blocks
 * Each block sets a few scales and quants by hand; every other scale is zero, so those
 * groups decode to exactly zero. The expected values are small integers times powers
 * of two: exact in float. */

static void test_hand_q2_K(void) {
    block_q2_K b;
    memset(&b, 0, sizeof b);
    b.d = HALF_2;
    b.dmin = HALF_1;
    b.scales[0] = 0x13;  /* scale 3, min 1 */
    b.scales[2] = 0x05;  /* scale 5, min 0 */
    b.scales[4] = 0x22;  /* scale 2, min 2 */
    b.scales[15] = 0xF1; /* scale 1, min 15 */
    b.qs[0] = 0xE4;      /* weights 0, 32, 64, 96 get q = 0, 1, 2, 3 */
    b.qs[63] = 0xC0;     /* weight 128 + 96 + 31 = 255 gets q = 3 */

    float want[QK_K] = {0};
    fill(want, 0, 16, -1.0f);   /* 2*3*0 - 1*1 */
    want[32] = 10.0f;           /* 2*5*1 - 0 */
    fill(want, 64, 80, -2.0f);  /* 2*2*0 - 1*2 */
    want[64] = 6.0f;            /* 2*2*2 - 2 */
    fill(want, 240, 256, -15.0f);
    want[255] = -9.0f;          /* 2*1*3 - 15 */

    float got[QK_K];
    ty_dequantize_row_q2_K(&b, got, QK_K);
    check_decodes_to("Q2_K", got, want);
}

static void test_hand_q3_K(void) {
    block_q3_K b;
    memset(&b, 0, sizeof b);
    b.d = HALF_0_5;
    /* Every scale at its bias 32 (= 0): low nibbles 0, top bits 10 in bytes 8-11. */
    memset(b.scales + 8, 0xAA, 4);
    /* Scale 0 = +2 (34 = 10'0010): low nibble 2 in byte 0, top bits already 10. */
    b.scales[0] = 0x02;
    /* Scale 13 = -3 (29 = 01'1101): low nibble in byte 5's high half, top bits 01 in
     * byte 8 + 13 % 4 = 9 at bit 2 * (13 / 4) = 6. */
    b.scales[5] = 0xD0;
    b.scales[9] = 0x6A;
    /* Weight 0: low bits 3 (qs[0] bits 0-1), high bit set (hmask[0] bit 0): q = 3. */
    b.qs[0] = 0x03;
    b.hmask[0] = 0x01;
    /* Weight 210 = 128 + 2*32 + 18: qs[32 + 18] bits 4-5 = 1, hmask[18] bit 6: q = 1. */
    b.qs[50] = 0x10;
    b.hmask[18] = 0x40;

    float want[QK_K] = {0};
    fill(want, 0, 16, -4.0f); /* 0.5 * 2 * (0 - 4) */
    want[0] = 3.0f;           /* 0.5 * 2 * 3 */
    fill(want, 208, 224, 6.0f); /* 0.5 * -3 * (0 - 4) */
    want[210] = -1.5f;          /* 0.5 * -3 * 1 */

    float got[QK_K];
    ty_dequantize_row_q3_K(&b, got, QK_K);
    check_decodes_to("Q3_K", got, want);
}

/* Q4_K and Q5_K share the scale packing: sub-block 0 gets scale 1, min 2; sub-block 5
 * gets scale 33 and min 18, both needing the top bits kept in bytes 1 and 5. */
static void set_k4_scales(uint8_t *s) {
    s[0] = 1;                       /* sub-block 0 scale */
    s[4] = 2;                       /* sub-block 0 min */
    s[9] = 0x21;                    /* sub-block 5: scale low nibble 1, min low nibble 2 */
    s[1] = 2 << 6;                  /* sub-block 5 scale top bits: 33 = 10'0001 */
    s[5] = 1 << 6;                  /* sub-block 5 min top bits: 18 = 01'0010 */
}

static void test_hand_q4_K(void) {
    block_q4_K b;
    memset(&b, 0, sizeof b);
    b.d = HALF_1;
    b.dmin = HALF_0_5;
    set_k4_scales(b.scales);
    b.qs[0] = 0x0F;  /* weight 0 (sub-block 0, low nibble): q = 15 */
    b.qs[67] = 0x70; /* weight 160 + 3 (sub-block 5, high nibble of qs[64 + 3]): q = 7 */

    float want[QK_K] = {0};
    fill(want, 0, 32, -1.0f);     /* 1*1*0 - 0.5*2 */
    want[0] = 14.0f;              /* 1*1*15 - 1 */
    fill(want, 160, 192, -9.0f);  /* 1*33*0 - 0.5*18 */
    want[163] = 222.0f;           /* 33*7 - 9 */

    float got[QK_K];
    ty_dequantize_row_q4_K(&b, got, QK_K);
    check_decodes_to("Q4_K", got, want);
}

static void test_hand_q5_K(void) {
    block_q5_K b;
    memset(&b, 0, sizeof b);
    b.d = HALF_1;
    b.dmin = HALF_0_5;
    set_k4_scales(b.scales);
    b.qs[0] = 0x0F;
    b.qh[0] = 0x01;  /* weight 0: fifth bit (sub-block 0 = bit 0): q = 31 */
    b.qh[1] = 0x01;  /* weight 1: q = 16 */
    b.qs[67] = 0x70;
    b.qh[3] = 0x20;  /* weight 163: sub-block 5 = bit 5: q = 7 + 16 */

    float want[QK_K] = {0};
    fill(want, 0, 32, -1.0f);
    want[0] = 30.0f;             /* 31 - 1 */
    want[1] = 15.0f;             /* 16 - 1 */
    fill(want, 160, 192, -9.0f);
    want[163] = 750.0f;          /* 33*23 - 9 */

    float got[QK_K];
    ty_dequantize_row_q5_K(&b, got, QK_K);
    check_decodes_to("Q5_K", got, want);
}

static void test_hand_q6_K(void) {
    block_q6_K b;
    memset(&b, 0, sizeof b);
    b.d = HALF_0_25;
    b.scales[0] = 4;
    b.scales[6] = 1;
    b.scales[15] = -2;
    /* Weight 0: low nibble of ql[0] = 15, bits 0-1 of qh[0] = 3: q = 63. */
    b.ql[0] = 0x0F;
    /* Weight 96 (k = 3 of the first half): high nibble of ql[32] = 2, bits 6-7 of
     * qh[0] = 1: q = 18. */
    b.ql[32] = 0x20;
    b.qh[0] = 0x43;
    /* Weight 255 (second half, k = 3, l = 31): high nibble of ql[127] = 5, bits 6-7
     * of qh[63] = 2: q = 37. */
    b.ql[127] = 0x50;
    b.qh[63] = 0x80;

    float want[QK_K] = {0};
    fill(want, 0, 16, -32.0f);    /* 0.25 * 4 * (0 - 32) */
    want[0] = 31.0f;              /* 0.25 * 4 * 31 */
    fill(want, 96, 112, -8.0f);   /* 0.25 * 1 * -32 */
    want[96] = -3.5f;             /* 0.25 * 1 * (18 - 32) */
    fill(want, 240, 256, 16.0f);  /* 0.25 * -2 * -32 */
    want[255] = -2.5f;            /* 0.25 * -2 * 5 */

    float got[QK_K];
    ty_dequantize_row_q6_K(&b, got, QK_K);
    check_decodes_to("Q6_K", got, want);
}

/* ---------------------------------------------------------------- round trips */

enum { N_BLOCKS = 64, N = N_BLOCKS * QK_K };

static float xs[N], ys[N], ys2[N];
static unsigned char qbuf[N_BLOCKS * sizeof(block_q6_K)], qbuf2[N_BLOCKS * sizeof(block_q6_K)];

static void round_trip(const kquant *t, const float *x, float *y, unsigned char *q, int n) {
    t->quantize(x, q, n);
    t->dequantize(q, y, n);
}

static void test_gaussian(const kquant *t) {
    unsigned long long s = 0x5eed0001;
    for (int i = 0; i < N; i++) xs[i] = test_rand_normal(&s);
    round_trip(t, xs, ys, qbuf, N);
    CHECK_EQ(count_nonfinite(ys, N), 0);
    double err = rmse(xs, ys, N);
    double rel = err / stddev(xs, N);
    CHECK_MSG(rel <= t->gauss_bound, "%s: Gaussian RMSE/std %.5f > %.5f", t->name, rel,
              t->gauss_bound);

    /* Requantizing the dequantized row: see requant_bound. */
    round_trip(t, ys, ys2, qbuf2, N);
    double again = rmse(ys, ys2, N) / err;
    CHECK_MSG(again <= t->requant_bound, "%s: requantized RMSE is %.4f of the first (> %.4f)",
              t->name, again, t->requant_bound);
}

static void test_negative_only(const kquant *t) {
    unsigned long long s = 0x5eed0002;
    for (int i = 0; i < N; i++) xs[i] = -fabsf(test_rand_normal(&s)) - 0.5f;
    round_trip(t, xs, ys, qbuf, N);
    CHECK_EQ(count_nonfinite(ys, N), 0);
    double rel = rmse(xs, ys, N) / stddev(xs, N);
    CHECK_MSG(rel <= t->negative_bound, "%s: negative-only RMSE/std %.5f > %.5f", t->name,
              rel, t->negative_bound);
    int positive = 0;
    for (int i = 0; i < N; i++) positive += ys[i] > 0;
    CHECK_MSG(positive == 0, "%s: %d weights of a negative row came back positive", t->name,
              positive);
}

static void test_zeros(const kquant *t) {
    memset(xs, 0, 4 * QK_K * sizeof(float));
    memset(qbuf, 0x55, sizeof qbuf);
    round_trip(t, xs, ys, qbuf, 4 * QK_K);
    /* ggml stores a zero row as an all-zero block (d = 0, every quant 0). */
    size_t nonzero = 0;
    for (size_t i = 0; i < 4 * t->block_bytes; i++) nonzero += qbuf[i] != 0;
    CHECK_MSG(nonzero == 0, "%s: zero row left %zu nonzero bytes", t->name, nonzero);
    for (int i = 0; i < 4 * QK_K; i++)
        CHECK_MSG(ys[i] == 0.0f, "%s: zero weight %d came back %g", t->name, i, ys[i]);
}

static void test_constant(const kquant *t) {
    /* A constant row is one level of every type's grid, so the only error left is the
     * fp16 rounding of d (and dmin): 2^-11 relative each, bounded here by 1e-3. (Much
     * smaller constants lose more: d then falls into fp16's subnormal range.) */
    static const float values[] = {0.37f, -0.37f, -7.5f, 1000.0f};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        fill(xs, 0, 2 * QK_K, values[v]);
        round_trip(t, xs, ys, qbuf, 2 * QK_K);
        double worst = 0;
        for (int i = 0; i < 2 * QK_K; i++) {
            double rel = fabs(ys[i] - values[v]) / fabs(values[v]);
            if (!(rel <= worst)) worst = rel;
        }
        CHECK_MSG(worst <= 1e-3, "%s: constant %g comes back off by %.3g relative", t->name,
                  values[v], worst);
    }
}

static void test_outlier(const kquant *t) {
    /* One weight 10^4 standard deviations out. It takes its super-block's whole range
     * and comes back within the fp16 rounding of d (1e-3); the rest of that block is
     * crushed (llama.cpp's result too), but no value becomes NaN or Inf and the other
     * super-blocks are untouched: blocks are quantized independently. */
    enum { NB = 4, AT = QK_K + 44 };
    unsigned long long s = 0x5eed0003;
    for (int i = 0; i < NB * QK_K; i++) xs[i] = test_rand_normal(&s);
    t->quantize(xs, qbuf2, NB * QK_K);
    xs[AT] = 1e4f;
    round_trip(t, xs, ys, qbuf, NB * QK_K);
    CHECK_EQ(count_nonfinite(ys, NB * QK_K), 0);
    CHECK_MSG(fabs(ys[AT] - 1e4) <= 1e-3 * 1e4, "%s: outlier 1e4 came back %g", t->name,
              ys[AT]);
    for (int b = 0; b < NB; b++) {
        if (b == AT / QK_K) continue;
        CHECK_MSG(!memcmp(qbuf + b * t->block_bytes, qbuf2 + b * t->block_bytes,
                          t->block_bytes),
                  "%s: outlier in block %d changed block %d", t->name, AT / QK_K, b);
    }
}

static void test_tiny(const kquant *t) {
    /* Weights ~1e-30: far below fp16's smallest subnormal once divided into a scale, so
     * they come back as zero (the groups fall under ggml's 1e-15 all-zero threshold or
     * d rounds to 0) — and, above all, not as NaN from a 0/0 in a search. */
    unsigned long long s = 0x5eed0004;
    for (int i = 0; i < 2 * QK_K; i++) xs[i] = 1e-30f * test_rand_normal(&s);
    round_trip(t, xs, ys, qbuf, 2 * QK_K);
    CHECK_EQ(count_nonfinite(ys, 2 * QK_K), 0);
    double worst = 0;
    for (int i = 0; i < 2 * QK_K; i++)
        if (fabs(ys[i]) > worst) worst = fabs(ys[i]);
    CHECK_MSG(worst <= 1e-29, "%s: tiny row came back as large as %g", t->name, worst);
}

/* ---------------------------------------------------------------- bit-identity guard
 * These quantizers reproduce llama.cpp's quantize_row_qX_K_ref byte for byte: every
 * K-quant tensor of the fixture models (llama-spm-q2_k .. -q6_k, made by llama-quantize
 * without an imatrix from llama-spm-f32), 32,896 super-blocks in all, came out
 * identical when this checksum was recorded. A changed checksum means a change in
 * rounding or search order: recheck against those fixtures before updating it. The
 * data avoid libm (sums of uniforms, exact in float) so that the input is the same
 * on every platform. */

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static void test_checksums(void) {
    static const uint64_t want[N_KQUANTS] = {
        0xc990ac31b414d185ULL, 0x09c1b5957db9cf33ULL, 0x12d0ba1f433903c3ULL,
        0xc9a5f93b443697a1ULL, 0x13ce19b02aa2f874ULL,
    };
    enum { NB = 16 };
    unsigned long long s = 0x5eed0005;
    for (int i = 0; i < NB * QK_K; i++) {
        float v = test_rand_uniform(&s) + test_rand_uniform(&s) + test_rand_uniform(&s) +
                  test_rand_uniform(&s) - 2.0f;
        xs[i] = v * (i % 97 == 0 ? 6.0f : 1.0f) + (i / QK_K % 3 == 0 ? 0.25f : 0.0f);
    }
    for (int t = 0; t < N_KQUANTS; t++) {
        kquants[t].quantize(xs, qbuf, NB * QK_K);
        uint64_t h = fnv1a(qbuf, NB * kquants[t].block_bytes);
        CHECK_MSG(h == want[t], "%s: checksum 0x%016llxULL, want 0x%016llxULL", kquants[t].name,
                  (unsigned long long)h, (unsigned long long)want[t]);
    }
}

int main(void) {
    test_hand_q2_K();
    test_hand_q3_K();
    test_hand_q4_K();
    test_hand_q5_K();
    test_hand_q6_K();
    for (int t = 0; t < N_KQUANTS; t++) {
        test_gaussian(&kquants[t]);
        test_negative_only(&kquants[t]);
        test_zeros(&kquants[t]);
        test_constant(&kquants[t]);
        test_outlier(&kquants[t]);
        test_tiny(&kquants[t]);
    }
    test_checksums();
    return test_finish("test_quant_k");
}
