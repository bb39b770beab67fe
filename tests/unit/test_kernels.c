/* test_kernels.c — the scalar reference kernels (kernels.h): the kernel table, the
 * activation quantizers byte for byte, dot products against a double-precision dot of the
 * dequantized rows, the documented reduction shape bit for bit, and determinism. */
#include "kernels.h"

#include <stdint.h>

#include "quant.h"
#include "test.h"
#include "test_inputs.h"

static const int weight_types[] = {
    TOY_TYPE_F32,  TOY_TYPE_F16,  TOY_TYPE_BF16,   TOY_TYPE_Q4_0,  TOY_TYPE_Q4_1,
    TOY_TYPE_Q5_0, TOY_TYPE_Q5_1, TOY_TYPE_Q8_0,   TOY_TYPE_Q2_K,  TOY_TYPE_Q3_K,
    TOY_TYPE_Q4_K, TOY_TYPE_Q5_K, TOY_TYPE_Q6_K,   TOY_TYPE_IQ4_NL, TOY_TYPE_IQ4_XS,
};
#define N_WEIGHT_TYPES (int)(sizeof weight_types / sizeof weight_types[0])

#define MAX_N 4096

/* Blocks of random bits, every bit pattern of the quants and scales allowed (IQ4_XS, which
 * toy cannot quantize to, and extremes a quantizer never emits: Q8_0 -128, Q6_K scale
 * -128, Q3_K scale -32, all mins at 63); only the fp16 factors are kept small and finite. */
static void random_blocks(int type, void *row, int64_t n, unsigned long long *rng) {
    uint8_t *bytes = row;
    const size_t size = test_row_bytes(type, n);
    for (size_t i = 0; i < size; i++) bytes[i] = (uint8_t)test_rand_u64(rng);
    const int64_t nb = n / toy_type_block_size(type);
    for (int64_t b = 0; b < nb; b++) {
        switch (type) {
        case TOY_TYPE_Q4_0: ((block_q4_0 *)row)[b].d = test_rand_half(rng, 0.1f); break;
        case TOY_TYPE_Q4_1:
            ((block_q4_1 *)row)[b].d = test_rand_half(rng, 0.1f);
            ((block_q4_1 *)row)[b].m = test_rand_half(rng, 1.0f);
            break;
        case TOY_TYPE_Q5_0: ((block_q5_0 *)row)[b].d = test_rand_half(rng, 0.1f); break;
        case TOY_TYPE_Q5_1:
            ((block_q5_1 *)row)[b].d = test_rand_half(rng, 0.1f);
            ((block_q5_1 *)row)[b].m = test_rand_half(rng, 1.0f);
            break;
        case TOY_TYPE_Q8_0: ((block_q8_0 *)row)[b].d = test_rand_half(rng, 0.01f); break;
        case TOY_TYPE_Q2_K:
            ((block_q2_K *)row)[b].d = test_rand_half(rng, 0.1f);
            ((block_q2_K *)row)[b].dmin = test_rand_half(rng, 0.1f);
            break;
        case TOY_TYPE_Q3_K: ((block_q3_K *)row)[b].d = test_rand_half(rng, 0.1f); break;
        case TOY_TYPE_Q4_K:
            ((block_q4_K *)row)[b].d = test_rand_half(rng, 0.01f);
            ((block_q4_K *)row)[b].dmin = test_rand_half(rng, 0.01f);
            break;
        case TOY_TYPE_Q5_K:
            ((block_q5_K *)row)[b].d = test_rand_half(rng, 0.01f);
            ((block_q5_K *)row)[b].dmin = test_rand_half(rng, 0.01f);
            break;
        case TOY_TYPE_Q6_K: ((block_q6_K *)row)[b].d = test_rand_half(rng, 0.001f); break;
        case TOY_TYPE_IQ4_NL: ((block_iq4_nl *)row)[b].d = test_rand_half(rng, 0.01f); break;
        case TOY_TYPE_IQ4_XS: ((block_iq4_xs *)row)[b].d = test_rand_half(rng, 0.001f); break;
        default: abort();
        }
    }
}

/* A weight row of `type`: Gaussian weights through toy's quantizer where it has one,
 * otherwise (or when `raw`) random blocks. */
static void make_weights(int type, void *row, int64_t n, int raw, unsigned long long *rng) {
    if (!raw && toy_type_can_quantize(type)) {
        float *x = xmalloc((size_t)n * sizeof *x);
        test_fill_normal(x, n, 0.05f, rng);
        CHECK(toy_quantize(type, x, row, n) == TOY_OK);
        free(x);
    } else {
        random_blocks(type, row, n, rng);
    }
}

/* An activation row of the vec_dot type, read back by hand as d * q (exact in double). */
static void act_to_double(int vdt, const void *a, double *out, int64_t n) {
    switch (vdt) {
    case TOY_TYPE_F32:
        for (int64_t i = 0; i < n; i++) out[i] = ((const float *)a)[i];
        break;
    case TOY_TYPE_F16: /* F16 and BF16 activations are floats (kernels.h) */
    case TOY_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = ((const float *)a)[i];
        break;
    case TOY_TYPE_Q8_0:
        for (int64_t i = 0; i < n; i++) {
            const block_q8_0 *blk = (const block_q8_0 *)a + i / QK8_0;
            out[i] = (double)ty_fp16_to_fp32(blk->d) * blk->qs[i % QK8_0];
        }
        break;
    case TOY_TYPE_Q8_1:
        for (int64_t i = 0; i < n; i++) {
            const block_q8_1 *blk = (const block_q8_1 *)a + i / QK8_1;
            out[i] = (double)ty_fp16_to_fp32(blk->d) * blk->qs[i % QK8_1];
        }
        break;
    case TOY_TYPE_Q8_K:
        for (int64_t i = 0; i < n; i++) {
            const block_q8_K *blk = (const block_q8_K *)a + i / QK_K;
            out[i] = (double)blk->d * blk->qs[i % QK_K];
        }
        break;
    default: abort();
    }
}

/* ---------------------------------------------------------------- the table */

static void test_table(void) {
    static const struct {
        int type, vdt;
    } expect[] = {
        {TOY_TYPE_F32, TOY_TYPE_F32},     {TOY_TYPE_F16, TOY_TYPE_F16},
        {TOY_TYPE_BF16, TOY_TYPE_BF16},   {TOY_TYPE_Q4_0, TOY_TYPE_Q8_0},
        {TOY_TYPE_Q4_1, TOY_TYPE_Q8_1},   {TOY_TYPE_Q5_0, TOY_TYPE_Q8_0},
        {TOY_TYPE_Q5_1, TOY_TYPE_Q8_1},   {TOY_TYPE_Q8_0, TOY_TYPE_Q8_0},
        {TOY_TYPE_Q2_K, TOY_TYPE_Q8_K},   {TOY_TYPE_Q3_K, TOY_TYPE_Q8_K},
        {TOY_TYPE_Q4_K, TOY_TYPE_Q8_K},   {TOY_TYPE_Q5_K, TOY_TYPE_Q8_K},
        {TOY_TYPE_Q6_K, TOY_TYPE_Q8_K},   {TOY_TYPE_IQ4_NL, TOY_TYPE_Q8_0},
        {TOY_TYPE_IQ4_XS, TOY_TYPE_Q8_K},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        const ty_kernel *k = ty_kernel_scalar(expect[i].type);
        CHECK_MSG(k != NULL, "no kernel for %s", toy_type_name(expect[i].type));
        if (!k) continue;
        CHECK_EQ(k->type, expect[i].type);
        CHECK_EQ(k->vec_dot_type, expect[i].vdt);
        CHECK(k->quantize_act != NULL && k->vec_dot != NULL);
    }
    const int none[] = {-1, TOY_TYPE_Q8_1, TOY_TYPE_Q8_K, TOY_TYPE_IQ2_XXS, TOY_TYPE_I32,
                        TOY_TYPE_F64, TOY_TYPE_MXFP4, TOY_TYPE_COUNT, 1000};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        CHECK_MSG(ty_kernel_scalar(none[i]) == NULL, "type %d has a kernel", none[i]);
}

/* ---------------------------------------------------------------- activation quantizers */

static void test_q8_0_bytes(void) {
    /* Block 0: max 127, so d = 1 and id = 1 exactly: the levels are roundf(x), halfway
     * cases away from zero. Block 1: all zero. Block 2: max 1, d = 1/127. */
    float x[3 * QK8_0] = {0};
    const float in0[12] = {127.0f, 0.5f, -0.5f, 2.5f, -2.5f, -63.5f, 1.4999999f, -127.0f,
                           -0.0f,  3.5f, 126.5f, 0.49999997f};
    const int8_t out0[12] = {127, 1, -1, 3, -3, -64, 1, -127, 0, 4, 127, 0};
    memcpy(x, in0, sizeof in0);
    x[2 * QK8_0] = 1.0f;
    x[2 * QK8_0 + 1] = -1.0f;
    block_q8_0 y[3];
    memset(y, 0xAA, sizeof y);
    ty_quantize_act_q8_0(x, y, 3 * QK8_0);
    CHECK_EQ(y[0].d, 0x3C00); /* 1.0 */
    for (int j = 0; j < 12; j++) CHECK_MSG(y[0].qs[j] == out0[j], "j=%d: %d", j, y[0].qs[j]);
    for (int j = 12; j < QK8_0; j++) CHECK_EQ(y[0].qs[j], 0);
    CHECK_EQ(y[1].d, 0x0000);
    for (int j = 0; j < QK8_0; j++) CHECK_EQ(y[1].qs[j], 0);
    CHECK_EQ(y[2].d, 0x2008); /* fp16(1/127) = 2^-7 * (1 + 8/1024) */
    CHECK_EQ(y[2].qs[0], 127);
    CHECK_EQ(y[2].qs[1], -127);
    for (int j = 2; j < QK8_0; j++) CHECK_EQ(y[2].qs[j], 0);
}

static void test_q8_1_bytes(void) {
    /* s is fp16(d * sum of the quants), with the float d: block 0 has quants
     * 127 + 31 * 0 (the 0.4s round to 0), so s = 127, not d * sum(x) = 139.4. */
    float x[2 * QK8_1] = {0};
    x[0] = 127.0f;
    for (int j = 1; j < QK8_1; j++) x[j] = 0.4f;
    /* block 1: d = 1; quants 64, -3 (from -2.5), 3, 1 (0.5), 100: sum 165 */
    const float in1[6] = {64.0f, -2.5f, 2.5f, 0.5f, 100.0f, -127.0f};
    memcpy(x + QK8_1, in1, sizeof in1);
    block_q8_1 y[2];
    memset(y, 0xAA, sizeof y);
    ty_quantize_act_q8_1(x, y, 2 * QK8_1);
    CHECK_EQ(y[0].d, 0x3C00);
    CHECK_EQ(y[0].s, 0x57F0); /* 127.0 */
    CHECK_EQ(y[0].qs[0], 127);
    for (int j = 1; j < QK8_1; j++) CHECK_EQ(y[0].qs[j], 0);
    const int8_t out1[6] = {64, -3, 3, 1, 100, -127};
    CHECK_EQ(y[1].d, 0x3C00);
    for (int j = 0; j < 6; j++) CHECK_MSG(y[1].qs[j] == out1[j], "j=%d: %d", j, y[1].qs[j]);
    CHECK_EQ(y[1].s, 0x50C0); /* 64 - 3 + 3 + 1 + 100 - 127 = 38 */

    /* All zero: d = s = 0. */
    float z[QK8_1] = {0};
    block_q8_1 yz;
    memset(&yz, 0xAA, sizeof yz);
    ty_quantize_act_q8_1(z, &yz, QK8_1);
    CHECK_EQ(yz.d, 0);
    CHECK_EQ(yz.s, 0);
    for (int j = 0; j < QK8_1; j++) CHECK_EQ(yz.qs[j], 0);

    /* On random rows s agrees with the stored quants and the block's float scale. */
    unsigned long long rng = 77;
    float r[8 * QK8_1];
    block_q8_1 yr[8];
    test_fill_normal(r, 8 * QK8_1, 3.0f, &rng);
    ty_quantize_act_q8_1(r, yr, 8 * QK8_1);
    for (int b = 0; b < 8; b++) {
        float amax = 0.0f;
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            amax = fmaxf(amax, fabsf(r[b * QK8_1 + j]));
            sum += yr[b].qs[j];
        }
        const float d = amax / 127;
        CHECK_EQ(yr[b].s, ty_fp32_to_fp16((float)sum * d));
        CHECK_EQ(yr[b].d, ty_fp32_to_fp16(d));
    }
}

static void check_q8_K(const block_q8_K *y, float d, const int8_t *qs, const char *what) {
    CHECK_MSG(float_bits(y->d) == float_bits(d), "%s: d = %.9g, want %.9g", what, y->d, d);
    for (int j = 0; j < QK_K; j++)
        CHECK_MSG(y->qs[j] == qs[j], "%s: qs[%d] = %d, want %d", what, j, y->qs[j], qs[j]);
    for (int g = 0; g < QK_K / 16; g++) {
        int sum = 0;
        for (int j = 0; j < 16; j++) sum += qs[16 * g + j];
        CHECK_MSG(y->bsums[g] == sum, "%s: bsums[%d] = %d, want %d", what, g, y->bsums[g], sum);
    }
}

static void test_q8_K_bytes(void) {
    float x[QK_K];
    int8_t qs[QK_K];
    block_q8_K y;

    /* A negative extreme: iscale = -127 / -127 = 1, d = 1. Levels are nearest-even;
     * a later +127 of the same magnitude does not displace the first extreme. */
    memset(x, 0, sizeof x);
    memset(qs, 0, sizeof qs);
    const float in_a[10] = {-127.0f, 2.5f, 3.5f, -2.5f, 0.5f, 1.5f, 127.0f, -0.5f, 100.4f, -99.6f};
    const int8_t out_a[10] = {-127, 2, 4, -2, 0, 2, 127, 0, 100, -100};
    memcpy(x + 20, in_a, sizeof in_a); /* inside bsums group 1 */
    memcpy(qs + 20, out_a, sizeof out_a);
    memset(&y, 0xAA, sizeof y);
    ty_quantize_act_q8_K(x, &y, QK_K);
    check_q8_K(&y, 1.0f, qs, "negative max");

    /* A positive extreme: iscale = -127 / 63.5 = -2, d = -0.5; every level flips sign. */
    memset(x, 0, sizeof x);
    memset(qs, 0, sizeof qs);
    const float in_b[6] = {1.25f, 63.5f, -1.75f, 0.25f, -63.5f, 10.0f};
    const int8_t out_b[6] = {-2, -127, 4, 0, 127, -20};
    memcpy(x + 250, in_b, sizeof in_b);
    memcpy(qs + 250, out_b, sizeof out_b);
    memset(&y, 0x55, sizeof y);
    ty_quantize_act_q8_K(x, &y, QK_K);
    check_q8_K(&y, -0.5f, qs, "positive max");

    /* All zero: d = 0, zero quants and zero bsums written over whatever was there. */
    memset(x, 0, sizeof x);
    memset(qs, 0, sizeof qs);
    memset(&y, 0xAA, sizeof y);
    ty_quantize_act_q8_K(x, &y, QK_K);
    check_q8_K(&y, 0.0f, qs, "zero");

    /* A non-trivial scale: max -3, iscale = 127/3, d = 1/iscale as a float (not fp16). */
    memset(x, 0, sizeof x);
    memset(qs, 0, sizeof qs);
    x[0] = 1.0f;
    x[1] = -3.0f;
    x[2] = 3.0f;
    qs[0] = (int8_t)ty_nearest_int(-127.0f / -3.0f * 1.0f); /* 42.33 -> 42 */
    qs[1] = -127;
    qs[2] = 127;
    CHECK_EQ(qs[0], 42);
    ty_quantize_act_q8_K(x, &y, QK_K);
    check_q8_K(&y, 1.0f / (-127.0f / -3.0f), qs, "max -3");
}

/* ---------------------------------------------------------------- accuracy */

/* |vec_dot - exact| <= ACC_TOL * sum |w_i * a_i|, the exact dot taken in double over the
 * dequantized weights and the activations read back as d * q. Why 1e-5: every term
 * passes through at most a few float roundings inside its block (dequantizer and kernel
 * each round d*scale*q, the min term, int-to-float) and then through one lane chain of
 * nb/8 adds plus the 3-5 adds of the final tree: for n = 4096 at most ~25 roundings of
 * 2^-24 = 6e-8 each, 1.5e-6 of the magnitude sum; affine types (x = d*q - m) can have
 * terms a few times |x|. 1e-5 leaves a margin of several over that, while a wrong nibble,
 * scale or min anywhere shifts the result by orders of magnitude more. (Measured worst
 * case over these rows: 6e-8.) */
#define ACC_TOL 1e-5

static double worst_ratio[TOY_TYPE_COUNT];

static void check_accuracy(int type, int64_t n, int raw, unsigned long long *rng) {
    const ty_kernel *k = ty_kernel_scalar(type);
    void *w = xmalloc(test_row_bytes(type, n));
    void *a = xmalloc(test_act_bytes(k, n));
    float *x = xmalloc((size_t)n * sizeof *x);
    float *wf = xmalloc((size_t)n * sizeof *wf);
    double *ad = xmalloc((size_t)n * sizeof *ad);

    make_weights(type, w, n, raw, rng);
    test_fill_normal(x, n, 1.0f, rng);
    k->quantize_act(x, a, n);
    CHECK(toy_dequantize(type, w, wf, n) == TOY_OK);
    act_to_double(k->vec_dot_type, a, ad, n);

    double exact = 0.0, mag = 0.0;
    if (k->vec_dot_type == TOY_TYPE_Q8_1) {
        /* Q4_1/Q5_1: as in llama.cpp the offset m meets the activations only through the
         * block's s, an fp16 rounding of d * sum(q) (0.05% off sum(a_i)); the exact value
         * of what the kernel is asked is sum (w_i - m) * a_i + m * s. */
        for (int64_t b = 0; b < n / 32; b++) {
            const ty_half mh = type == TOY_TYPE_Q4_1 ? ((const block_q4_1 *)w)[b].m
                                                      : ((const block_q5_1 *)w)[b].m;
            const double m = ty_fp16_to_fp32(mh);
            const double s = ty_fp16_to_fp32(((const block_q8_1 *)a)[b].s);
            for (int64_t i = 32 * b; i < 32 * b + 32; i++) {
                exact += ((double)wf[i] - m) * ad[i];
                mag += fabs(((double)wf[i] - m) * ad[i]);
            }
            exact += m * s;
            mag += fabs(m * s);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            exact += (double)wf[i] * ad[i];
            mag += fabs((double)wf[i] * ad[i]);
        }
    }
    const float got = k->vec_dot(n, w, a);
    const double err = fabs((double)got - exact);
    CHECK_MSG(err <= ACC_TOL * mag, "%s n=%lld raw=%d: got %.9g, exact %.9g, |terms| %.6g",
              toy_type_name(type), (long long)n, raw, got, exact, mag);
    if (mag > 0 && err / mag > worst_ratio[type]) worst_ratio[type] = err / mag;
    CHECK_MSG(mag > 0, "%s n=%lld: an all-zero test row", toy_type_name(type), (long long)n);

    free(w);
    free(a);
    free(x);
    free(wf);
    free(ad);
}

static void test_accuracy(void) {
    static const int64_t lens_elem[] = {1, 5, 31, 32, 33, 100, 1000, 4096};
    static const int64_t lens_32[] = {32, 64, 96, 256, 288, 1024, 2080, 4096};
    static const int64_t lens_256[] = {256, 512, 768, 2304, 4096};
    unsigned long long rng = 0x5eed;
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        const int type = weight_types[t];
        const int64_t bs = toy_type_block_size(type);
        const int64_t *lens = bs == 1 ? lens_elem : bs == 32 ? lens_32 : lens_256;
        const int n_lens = bs == 1    ? (int)(sizeof lens_elem / sizeof *lens_elem)
                           : bs == 32 ? (int)(sizeof lens_32 / sizeof *lens_32)
                                      : (int)(sizeof lens_256 / sizeof *lens_256);
        for (int l = 0; l < n_lens; l++)
            for (int rep = 0; rep < 3; rep++) {
                check_accuracy(type, lens[l], 0, &rng);
                if (bs > 1) check_accuracy(type, lens[l], 1, &rng);
            }
    }
}

/* ---------------------------------------------------------------- reduction shape */

/* The documented shape, rebuilt from per-block (per-element) values that the kernel
 * itself returns for one block (element) at a time: a one-block row leaves that value in
 * lane 0 and adds only zeros to it. The whole row must then come out bit for bit as
 * lane[b % L] += v_b, then pairwise halving. */
static void test_reduction_shape(void) {
    unsigned long long rng = 0xfeed;
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        const int type = weight_types[t];
        const ty_kernel *k = ty_kernel_scalar(type);
        const int64_t bs = toy_type_block_size(type);
        const int lanes = bs == 1 ? 32 : 8;
        const int64_t nb = bs == 1 ? 101 : bs == 32 ? 75 : 19;
        const int64_t n = nb * bs;
        const size_t wbs = toy_type_size(type), abs_ = test_act_bytes(k, bs);
        uint8_t *w = xmalloc(test_row_bytes(type, n));
        uint8_t *a = xmalloc(test_act_bytes(k, n));
        float *x = xmalloc((size_t)n * sizeof *x);
        make_weights(type, w, n, 0, &rng);
        test_fill_normal(x, n, 1.0f, &rng);
        k->quantize_act(x, a, n);

        float lane[32] = {0};
        for (int64_t b = 0; b < nb; b++)
            lane[b % lanes] += k->vec_dot(bs, w + b * wbs, a + b * abs_);
        for (int s = lanes / 2; s > 0; s /= 2)
            for (int j = 0; j < s; j++) lane[j] += lane[j + s];
        const float got = k->vec_dot(n, w, a);
        CHECK_MSG(float_bits(got) == float_bits(lane[0]), "%s: %.9g, shape says %.9g",
                  toy_type_name(type), got, lane[0]);
        free(w);
        free(a);
        free(x);
    }

    /* Pinned values that tell the shape from its alternatives. Float elements: one 2^24
     * and 31 ones. One float in order gives 2^24 (each +1 is a tie to even), double
     * 2^24 + 31; 32 lanes halved 16, 8, 4, 2, 1 give 2^24 + 30. */
    {
        float xf[32], yf[32];
        ty_half xh[32]; /* F16's and BF16's activations are floats */
        uint16_t xb[32];
        for (int i = 0; i < 32; i++) {
            xf[i] = i == 0 ? 4096.0f : 1.0f;
            yf[i] = xf[i];
        }
        ty_quantize_row_f16(xf, xh, 32);
        ty_quantize_row_bf16(xf, xb, 32);
        CHECK_EQ(float_bits(ty_kernel_scalar(TOY_TYPE_F32)->vec_dot(32, xf, yf)),
                 float_bits(16777246.0f));
        CHECK_EQ(float_bits(ty_kernel_scalar(TOY_TYPE_F16)->vec_dot(32, xh, yf)),
                 float_bits(16777246.0f));
        CHECK_EQ(float_bits(ty_kernel_scalar(TOY_TYPE_BF16)->vec_dot(32, xb, yf)),
                 float_bits(16777246.0f));
    }
    /* BF16 adds its products with one rounding (FMA), also where a product underflows:
     * lane 0 holds 2^-125 (element 0), then element 32 adds 1.40625 * 2^-149. Rounded
     * first, that product is 2^-149, and 2^-125 + 2^-149 is a tie that goes to even,
     * 2^-125; added exactly, the sum rounds up to 2^-125 + 2^-148. */
    {
        uint16_t w[33] = {0};
        float a[33] = {0};
        w[0] = ty_fp32_to_bf16(ldexpf(1.0f, -62));
        a[0] = ldexpf(1.0f, -63);
        w[32] = ty_fp32_to_bf16(ldexpf(1.40625f, -75));
        a[32] = ldexpf(1.0f, -74);
        CHECK_EQ(float_bits(ty_kernel_scalar(TOY_TYPE_BF16)->vec_dot(33, w, a)),
                 float_bits(ldexpf(1.0f, -125) + ldexpf(1.0f, -148)));
    }
    /* Blocks: Q8_0 x Q8_0, block 0 worth 2^24 (d = 32 * 32, sumi = 4 * 64 * 64), blocks
     * 1..8 worth 1. In order: 2^24; double: 2^24 + 8; 8 lanes halved: 2^24 + 6. */
    {
        block_q8_0 w[9], a[9];
        memset(w, 0, sizeof w);
        memset(a, 0, sizeof a);
        w[0].d = a[0].d = ty_fp32_to_fp16(32.0f);
        for (int j = 0; j < 4; j++) w[0].qs[j] = a[0].qs[j] = 64;
        for (int b = 1; b < 9; b++) {
            w[b].d = a[b].d = ty_fp32_to_fp16(1.0f);
            w[b].qs[b] = a[b].qs[b] = 1;
        }
        CHECK_EQ(float_bits(ty_kernel_scalar(TOY_TYPE_Q8_0)->vec_dot(9 * QK8_0, w, a)),
                 float_bits(16777222.0f));
    }
}

/* The affine types' per-block value is two rounded products and one rounded add or
 * subtract (d * sumi + m * s, d * isum - dmin * summs): no FMA. Zeroing the block's m (or
 * dmin) leaves the kernel with the first product alone, zeroing d with the second (times
 * zero is exact), so the whole block must equal their float sum. A compiler contracting
 * the kernel into an FMA (-ffp-contract=fast) fails this. */
static void set_factor(int type, void *blk, int which, ty_half v) {
    switch (type) {
    case TOY_TYPE_Q4_1: *(which ? &((block_q4_1 *)blk)->m : &((block_q4_1 *)blk)->d) = v; break;
    case TOY_TYPE_Q5_1: *(which ? &((block_q5_1 *)blk)->m : &((block_q5_1 *)blk)->d) = v; break;
    case TOY_TYPE_Q2_K:
        *(which ? &((block_q2_K *)blk)->dmin : &((block_q2_K *)blk)->d) = v;
        break;
    case TOY_TYPE_Q4_K:
        *(which ? &((block_q4_K *)blk)->dmin : &((block_q4_K *)blk)->d) = v;
        break;
    case TOY_TYPE_Q5_K:
        *(which ? &((block_q5_K *)blk)->dmin : &((block_q5_K *)blk)->d) = v;
        break;
    default: abort();
    }
}

static void test_block_value_unfused(void) {
    static const int affine[] = {TOY_TYPE_Q4_1, TOY_TYPE_Q5_1, TOY_TYPE_Q2_K, TOY_TYPE_Q4_K,
                                 TOY_TYPE_Q5_K};
    unsigned long long rng = 0xfa5e;
    for (size_t t = 0; t < sizeof affine / sizeof affine[0]; t++) {
        const int type = affine[t];
        const ty_kernel *k = ty_kernel_scalar(type);
        const int64_t bs = toy_type_block_size(type);
        const size_t wbs = toy_type_size(type);
        uint16_t blk[128], only_first[128], only_second[128]; /* aligned for the halves */
        uint8_t *act = xmalloc(toy_type_size(k->vec_dot_type));
        float x[QK_K];
        int mismatches = 0;
        for (int rep = 0; rep < 200; rep++) {
            make_weights(type, blk, bs, rep % 2, &rng);
            test_fill_normal(x, bs, 1.0f, &rng);
            k->quantize_act(x, act, bs);
            memcpy(only_first, blk, wbs);
            memcpy(only_second, blk, wbs);
            set_factor(type, only_first, 1, 0);
            set_factor(type, only_second, 0, 0);
            const float first = k->vec_dot(bs, only_first, act);
            const float second = k->vec_dot(bs, only_second, act);
            const float sum = first + second;
            if (float_bits(k->vec_dot(bs, blk, act)) != float_bits(sum)) mismatches++;
        }
        CHECK_MSG(mismatches == 0, "%s: %d of 200 blocks differ from product + product",
                  toy_type_name(type), mismatches);
        free(act);
    }
}

/* ---------------------------------------------------------------- determinism */

/* Same inputs, same bits: quantizing into buffers prefilled differently (so no byte is
 * left unwritten), dot products from copies at other addresses, between other calls. */
static void test_determinism(void) {
    unsigned long long rng = 0xd0d0;
    const int64_t n = 2048;
    float *x = xmalloc(n * sizeof *x);
    test_fill_normal(x, n, 2.0f, &rng);
    x[5] = 0.0f;
    for (int i = 256; i < 512; i++) x[i] = 0.0f; /* a zero Q8_K block, zero Q8_0 blocks */
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        const int type = weight_types[t];
        const ty_kernel *k = ty_kernel_scalar(type);
        const size_t wsize = test_row_bytes(type, n), asize = test_act_bytes(k, n);
        uint8_t *w = xmalloc(wsize), *w2 = xmalloc(wsize + 64);
        uint8_t *a = xmalloc(asize), *a2 = xmalloc(asize + 64);
        make_weights(type, w, n, 0, &rng);
        memset(a, 0x00, asize);
        memset(a2, 0xFF, asize + 64);
        k->quantize_act(x, a, n);
        k->quantize_act(x, a2 + 16, n); /* 16: keeps Q8_K's float d aligned */
        CHECK_MSG(memcmp(a, a2 + 16, asize) == 0, "%s: activation bytes differ",
                  toy_type_name(type));
        memcpy(w2 + 32, w, wsize);
        const float r1 = k->vec_dot(n, w, a);
        k->quantize_act(x + 1, a2 + 16, n - 256); /* other work in between */
        k->quantize_act(x, a2 + 16, n);
        const float r2 = k->vec_dot(n, w2 + 32, a2 + 16);
        const float r3 = k->vec_dot(n, w, a);
        CHECK_MSG(float_bits(r1) == float_bits(r2) && float_bits(r1) == float_bits(r3),
                  "%s: %.9g %.9g %.9g", toy_type_name(type), r1, r2, r3);
        CHECK_MSG(isfinite(r1), "%s: %g", toy_type_name(type), r1);
        /* n = 0 is an empty sum. */
        CHECK_EQ(float_bits(k->vec_dot(0, w, a)), float_bits(0.0f));
        free(w);
        free(w2);
        free(a);
        free(a2);
    }
    free(x);
}

int main(void) {
    test_table();
    test_q8_0_bytes();
    test_q8_1_bytes();
    test_q8_K_bytes();
    test_accuracy();
    test_reduction_shape();
    test_block_value_unfused();
    test_determinism();
    for (int t = 0; t < N_WEIGHT_TYPES; t++)
        printf("  %-7s worst |err| / sum|terms| = %.2e\n", toy_type_name(weight_types[t]),
               worst_ratio[weight_types[t]]);
    return test_finish("test_kernels");
}
