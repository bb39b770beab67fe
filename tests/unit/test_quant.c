/* test_quant.c — the scalar reference conversions: half and bfloat16 (quant.c), the legacy
 * block types Q4_0..Q8_0 (quant_legacy.c), IQ4_NL and IQ4_XS (quant_iq.c).
 *
 * Dequantization is checked exactly on hand-built blocks; quantization exactly on small
 * cases whose answer follows from ggml's rounding rules and on blocks that llama.cpp's
 * llama-quantize produced, and statistically on Gaussian data and edge rows. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "test.h"

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int half_is_nan(ty_half h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}

static int bf16_is_nan(uint16_t h) {
    return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0;
}

/* ================================================================ half precision */

/* Every half decodes to the value IEEE binary16 gives it, and encodes back to itself. NaNs
 * stay NaN with their sign; quiet ones keep their payload bit for bit (a signalling one
 * comes back quieted, as F16C's vcvtps2ph does). */
static void test_fp16_every_half(void) {
    int bad = 0;
    unsigned first_bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = ty_fp16_to_fp32((ty_half)h);
        const ty_half back = ty_fp32_to_fp16(f);
        const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
        const int negative = (h & 0x8000) != 0;
        int ok;
        if (exp == 0x1f && mant != 0) {
            ok = isnan(f) && !!signbit(f) == negative && half_is_nan(back) &&
                 (back & 0x8000) == (h & 0x8000) && (!(mant & 0x200) || back == h);
        } else {
            double v = exp == 0x1f ? INFINITY
                       : exp ? ldexp(1024.0 + mant, (int)exp - 25)
                             : ldexp((double)mant, -24);
            if (negative) v = -v;
            ok = (double)f == v && !!signbit(f) == negative && back == h;
        }
        if (!ok && bad++ == 0) first_bad = h;
    }
    CHECK_MSG(bad == 0, "%d halves fail the round trip, first 0x%04x", bad, first_bad);
}

/* Float -> half rounds to nearest, ties to even, everywhere: at the exact midpoint between
 * every pair of neighbouring halves (subnormal, across binades, into infinity) the even
 * one wins, and one float ulp either side goes to the nearer one. */
static void test_fp16_rounding(void) {
    int bad = 0;
    unsigned first_bad = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        for (uint32_t sign = 0; sign <= 0x8000; sign += 0x8000) {
            const double lo = ty_fp16_to_fp32((ty_half)h);
            /* The step above 65504 would be to 65536, which only exists as infinity. */
            const double hi = h == 0x7bff ? 65536.0 : ty_fp16_to_fp32((ty_half)(h + 1));
            const float mid = (float)((lo + hi) / 2); /* exact: halves have 11 bits */
            const float s = sign ? -1.0f : 1.0f;
            const ty_half even = (ty_half)(sign | ((h & 1) ? h + 1 : h));
            const int ok = (double)mid == (lo + hi) / 2 && ty_fp32_to_fp16(s * mid) == even &&
                           ty_fp32_to_fp16(s * nextafterf(mid, 0.0f)) == (sign | h) &&
                           ty_fp32_to_fp16(s * nextafterf(mid, INFINITY)) == (sign | (h + 1));
            if (!ok && bad++ == 0) first_bad = sign | h;
        }
    }
    CHECK_MSG(bad == 0, "%d rounding boundaries wrong, first above half 0x%04x", bad, first_bad);
}

static void test_fp16_special_values(void) {
    CHECK_EQ(ty_fp32_to_fp16(1.0f), 0x3c00);
    CHECK_EQ(ty_fp32_to_fp16(-2.0f), 0xc000);
    CHECK_EQ(ty_fp32_to_fp16(0.0f), 0x0000);
    CHECK_EQ(ty_fp32_to_fp16(-0.0f), 0x8000);
    CHECK_EQ(ty_fp32_to_fp16(65504.0f), 0x7bff);
    CHECK_EQ(ty_fp32_to_fp16(65519.996f), 0x7bff); /* just below the midpoint to 65536 */
    CHECK_EQ(ty_fp32_to_fp16(65520.0f), 0x7c00);   /* the midpoint: 0x7bff is odd */
    CHECK_EQ(ty_fp32_to_fp16(1e10f), 0x7c00);
    CHECK_EQ(ty_fp32_to_fp16(FLT_MAX), 0x7c00);
    CHECK_EQ(ty_fp32_to_fp16(-FLT_MAX), 0xfc00);
    CHECK_EQ(ty_fp32_to_fp16(INFINITY), 0x7c00);
    CHECK_EQ(ty_fp32_to_fp16(-INFINITY), 0xfc00);
    /* Subnormals: 2^-24 is the smallest; 2^-25 is the tie between it and 0 (0 is even). */
    CHECK_EQ(ty_fp32_to_fp16(ldexpf(1.0f, -24)), 0x0001);
    CHECK_EQ(ty_fp32_to_fp16(ldexpf(1.0f, -25)), 0x0000);
    CHECK_EQ(ty_fp32_to_fp16(nextafterf(ldexpf(1.0f, -25), 1.0f)), 0x0001);
    CHECK_EQ(ty_fp32_to_fp16(ldexpf(3.0f, -25)), 0x0002); /* 1.5 ulp: tie, to even 2 */
    CHECK_EQ(ty_fp32_to_fp16(ldexpf(1023.0f, -24)), 0x03ff);
    CHECK_EQ(ty_fp32_to_fp16(ldexpf(1023.5f, -24)), 0x0400); /* carries into the normals */
    CHECK_EQ(ty_fp32_to_fp16(1e-30f), 0x0000);
    CHECK_EQ(ty_fp32_to_fp16(-1e-30f), 0x8000);
    CHECK_EQ(ty_fp32_to_fp16(FLT_TRUE_MIN), 0x0000);
    CHECK_EQ(ty_fp32_to_fp16(1.0f + ldexpf(1.0f, -11)), 0x3c00); /* tie: 0x3c00 is even */
    CHECK_EQ(ty_fp32_to_fp16(1.0f + ldexpf(3.0f, -11)), 0x3c02); /* tie: to even 0x3c02 */
    CHECK(ty_fp16_to_fp32(0x8000) == 0.0f && signbit(ty_fp16_to_fp32(0x8000)));
    CHECK(ty_fp16_to_fp32(0x0001) == ldexpf(1.0f, -24));
    /* NaN stays NaN whatever its payload: one only in the low float bits must not become
     * infinity, and the sign is kept. */
    CHECK(half_is_nan(ty_fp32_to_fp16(NAN)));
    CHECK(half_is_nan(ty_fp32_to_fp16(f32_from_bits(0x7f800001))));
    CHECK(half_is_nan(ty_fp32_to_fp16(f32_from_bits(0x7fc00000))));
    CHECK_EQ(ty_fp32_to_fp16(f32_from_bits(0xffc00000)) & 0x8000, 0x8000);
    CHECK(half_is_nan(ty_fp32_to_fp16(f32_from_bits(0xffc00000))));
    CHECK(isnan(ty_fp16_to_fp32(0x7e00)));
    CHECK(isinf(ty_fp16_to_fp32(0x7c00)) && ty_fp16_to_fp32(0x7c00) > 0);
    CHECK(isinf(ty_fp16_to_fp32(0xfc00)) && ty_fp16_to_fp32(0xfc00) < 0);
}

#if defined(__FLT16_MANT_DIG__)
/* The compiler's own binary16 (gcc >= 12 on x86-64; libgcc or F16C converts) as a second
 * opinion on a spread of float bit patterns covering every exponent. */
static void test_fp16_against_compiler(void) {
    int bad = 0;
    uint32_t first_bad = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
        const float f = f32_from_bits((uint32_t)u);
        const _Float16 c = (_Float16)f;
        uint16_t want;
        memcpy(&want, &c, sizeof want);
        const ty_half got = ty_fp32_to_fp16(f);
        const int ok = isnan(f) ? half_is_nan(got) && half_is_nan(want) : got == want;
        if (!ok && bad++ == 0) first_bad = (uint32_t)u;
    }
    CHECK_MSG(bad == 0, "%d floats convert unlike _Float16, first 0x%08x", bad, first_bad);
    for (uint32_t h = 0; h < 0x10000; h++) {
        const uint16_t bits = (uint16_t)h;
        _Float16 c;
        memcpy(&c, &bits, sizeof c);
        const float want = (float)c, got = ty_fp16_to_fp32((ty_half)h);
        if (isnan(want) ? !isnan(got) : float_bits(want) != float_bits(got)) {
            CHECK_MSG(0, "half 0x%04x decodes to %a, _Float16 gives %a", h, got, want);
            break;
        }
    }
}
#endif

/* ================================================================ bfloat16 */

static void test_bf16(void) {
    int bad = 0;
    unsigned first_bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = ty_bf16_to_fp32((uint16_t)h);
        const uint16_t back = ty_fp32_to_bf16(f);
        int ok = float_bits(f) == h << 16; /* bf16 is the top half of a float */
        if (bf16_is_nan((uint16_t)h))
            ok = ok && bf16_is_nan(back) && (back & 0x8040) == ((h & 0x8000) | 0x40);
        else
            ok = ok && back == h;
        if (!ok && bad++ == 0) first_bad = h;
    }
    CHECK_MSG(bad == 0, "%d bf16 values fail the round trip, first 0x%04x", bad, first_bad);

    /* Ties to even at every midpoint (the low 16 float bits 0x8000), including the one
     * between the largest finite bf16 and infinity; one float ulp either side rounds to
     * the nearer value. */
    bad = 0;
    for (uint32_t h = 0; h < 0x7f80; h++) {
        for (uint32_t sign = 0; sign <= 0x8000; sign += 0x8000) {
            const uint32_t mid = (sign | h) << 16 | 0x8000;
            const uint16_t even = (uint16_t)(sign | ((h & 1) ? h + 1 : h));
            const int ok = ty_fp32_to_bf16(f32_from_bits(mid)) == even &&
                           ty_fp32_to_bf16(f32_from_bits(mid - 1)) == (sign | h) &&
                           ty_fp32_to_bf16(f32_from_bits(mid + 1)) == (sign | (h + 1));
            if (!ok && bad++ == 0) first_bad = sign | h;
        }
    }
    CHECK_MSG(bad == 0, "%d bf16 rounding boundaries wrong, first above 0x%04x", bad, first_bad);

    CHECK_EQ(ty_fp32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ(ty_fp32_to_bf16(FLT_MAX), 0x7f80); /* above the last midpoint: infinity */
    CHECK_EQ(ty_fp32_to_bf16(-INFINITY), 0xff80);
    CHECK_EQ(ty_fp32_to_bf16(FLT_TRUE_MIN), 0x0000);
    /* A NaN whose payload is only in the dropped bits must stay NaN (quieted). */
    CHECK_EQ(ty_fp32_to_bf16(f32_from_bits(0x7f800001)), 0x7fc0);
    CHECK_EQ(ty_fp32_to_bf16(f32_from_bits(0xff800001)), 0xffc0);
    CHECK_EQ(ty_fp32_to_bf16(f32_from_bits(0x7fc00000)), 0x7fc0);
    CHECK(bf16_is_nan(ty_fp32_to_bf16(NAN)));
}

/* ================================================================ hand-built blocks
 * Dequantization is the definition of each type: the expected floats are written out
 * from the layout alone (products of small integers and powers of two, so exact). */

static void test_dequant_q4_0(void) {
    block_q4_0 b = {.d = 0x3800}; /* 0.5 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    ty_dequantize_row_q4_0(&b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.5f * (float)(j - 8));       /* low nibble: element j */
        CHECK(y[j + 16] == 0.5f * (float)(7 - j));  /* high nibble: element j + 16 */
    }
}

static void test_dequant_q4_1(void) {
    block_q4_1 b = {.d = 0x3400, .m = 0xbc00}; /* 0.25, -1 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((7 * j) & 15) << 4);
    float y[32];
    ty_dequantize_row_q4_1(&b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.25f * (float)j - 1.0f);
        CHECK(y[j + 16] == 0.25f * (float)((7 * j) & 15) - 1.0f);
    }
}

/* qh bytes 01 80 00 80 are the little-endian uint32 0x80008001: fifth bits for elements
 * 0, 15 and 31 only. */
static void test_dequant_q5_0(void) {
    block_q5_0 b = {.d = 0x4000, .qh = {0x01, 0x80, 0x00, 0x80}}; /* d = 2 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    ty_dequantize_row_q5_0(&b, y, 32);
    for (int j = 0; j < 16; j++) {
        const int high_lo = j == 0 || j == 15, high_hi = j == 15;
        CHECK(y[j] == 2.0f * (float)(j + 16 * high_lo - 16));
        CHECK(y[j + 16] == 2.0f * (float)(15 - j + 16 * high_hi - 16));
    }
    CHECK(y[0] == 0.0f && y[15] == 30.0f && y[31] == 0.0f && y[16] == -2.0f);
}

static void test_dequant_q5_1(void) {
    block_q5_1 b = {.d = 0x3800, .m = 0x4200, .qh = {0xff, 0x00, 0x0f, 0x00}}; /* 0.5, 3 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)((15 - j) | j << 4);
    float y[32];
    ty_dequantize_row_q5_1(&b, y, 32);
    for (int j = 0; j < 16; j++) {
        const int high_lo = j < 8, high_hi = j < 4; /* bits 0..7 and 16..19 */
        CHECK(y[j] == 0.5f * (float)(15 - j + 16 * high_lo) + 3.0f);
        CHECK(y[j + 16] == 0.5f * (float)(j + 16 * high_hi) + 3.0f);
    }
    CHECK(y[0] == 18.5f && y[16] == 11.0f);
}

static void test_dequant_q8_0(void) {
    block_q8_0 b = {.d = 0x2000}; /* 2^-7 */
    for (int j = 0; j < 32; j++) b.qs[j] = (int8_t)(8 * j - 128);
    b.qs[31] = 127;
    float y[32];
    ty_dequantize_row_q8_0(&b, y, 32);
    for (int j = 0; j < 32; j++) CHECK(y[j] == ldexpf((float)b.qs[j], -7));
    CHECK(y[0] == -1.0f);
}

static void test_iq4nl_codebook(void) {
    static const int8_t ggml_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                           1,    13,   25,  38,  53,  69,  89,  113};
    CHECK(memcmp(ty_iq4nl_values, ggml_levels, sizeof ggml_levels) == 0);
}

static void test_dequant_iq4_nl(void) {
    block_iq4_nl b = {.d = 0x3800}; /* 0.5 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[64];
    ty_dequantize_row_iq4_nl(&b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.5f * (float)ty_iq4nl_values[j]);
        CHECK(y[j + 16] == 0.5f * (float)ty_iq4nl_values[15 - j]);
    }
    CHECK(y[0] == -63.5f && y[16] == 56.5f);
}

/* Sub-block scales 0, 1, 31, 32, 33, 63, 17, 48 (i.e. -32, -31, -1, 0, 1, 31, -15, 16 once
 * the bias of 32 is removed), written out by hand: low nibbles 0,1,15,0,1,15,1,0 pair into
 * scales_l = 10 0f f1 01; high bits 0,0,1,2,2,3,1,3 at bit 2*ib make scales_h 0xde90. */
static void test_dequant_iq4_xs(void) {
    static const int scale[8] = {-32, -31, -1, 0, 1, 31, -15, 16};
    block_iq4_xs b = {.d = 0x3400, .scales_h = 0xde90, .scales_l = {0x10, 0x0f, 0xf1, 0x01}};
    for (int ib = 0; ib < 8; ib++)
        for (int j = 0; j < 16; j++)
            b.qs[16 * ib + j] = (uint8_t)(((j + ib) & 15) | ((3 * j + ib) & 15) << 4);
    float y[256], want[256];
    ty_dequantize_row_iq4_xs(&b, y, 256);
    for (int ib = 0; ib < 8; ib++) {
        const float dl = 0.25f * (float)scale[ib];
        for (int j = 0; j < 16; j++) {
            want[32 * ib + j] = dl * (float)ty_iq4nl_values[(j + ib) & 15];
            want[32 * ib + 16 + j] = dl * (float)ty_iq4nl_values[(3 * j + ib) & 15];
        }
    }
    int bad = 0;
    for (int i = 0; i < 256; i++) bad += y[i] != want[i];
    CHECK_EQ(bad, 0);
    CHECK(y[0] == 0.25f * -32 * -127 && y[32 * 5] == 0.25f * 31 * -35);
}

/* ================================================================ quantizing known cases */

/* Q4_0's scale is the signed extreme over -8, so an extreme of -8 gives d = 1 and every
 * integer in [-8, 7] is a level. Halfway values round up (x + 8.5 truncated): 0.5 -> 1,
 * -0.5 -> 0, -1.5 -> -1. A positive extreme gives d < 0, and its mirror image -8*|d|
 * would need level 16, so it is clamped to 15: -8 comes back as -7. */
static void test_quantize_q4_0_rules(void) {
    float x[32], y[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j % 16 - 8);
    for (int half = 0; half < 32; half += 16) { /* in the low and the high nibbles */
        x[half + 1] = 0.5f;
        x[half + 2] = -0.5f;
        x[half + 3] = -1.5f;
    }
    block_q4_0 b;
    ty_quantize_row_q4_0(x, &b, 32);
    CHECK_EQ(b.d, 0x3c00);
    ty_dequantize_row_q4_0(&b, y, 32);
    for (int j = 0; j < 32; j++) {
        const float want = j % 16 == 1 ? 1.0f : j % 16 == 2 ? 0.0f : j % 16 == 3 ? -1.0f : x[j];
        CHECK(y[j] == want);
    }

    for (int j = 0; j < 32; j++) x[j] = 0.0f;
    x[3] = 8.0f;
    x[4] = -8.0f;
    x[5] = 3.0f;
    ty_quantize_row_q4_0(x, &b, 32);
    CHECK_EQ(b.d, 0xbc00); /* -1 */
    ty_dequantize_row_q4_0(&b, y, 32);
    CHECK(y[3] == 8.0f && y[4] == -7.0f && y[5] == 3.0f && y[0] == 0.0f);
}

/* On a grid that fits the type exactly the round trip is exact: min and step are
 * representable in fp16 and every value sits on a level. */
static void test_quantize_exact_grids(void) {
    float x[32], y[32];
    block_q4_1 b41;
    for (int j = 0; j < 32; j++) x[j] = -2.0f + 0.5f * (float)(j < 16 ? j : 31 - j);
    ty_quantize_row_q4_1(x, &b41, 32);
    CHECK_EQ(b41.d, 0x3800);
    CHECK_EQ(b41.m, 0xc000);
    ty_dequantize_row_q4_1(&b41, y, 32);
    CHECK(memcmp(x, y, sizeof x) == 0);

    block_q5_0 b50;
    for (int j = 0; j < 32; j++) x[j] = (float)((j * 7) % 32 - 16); /* -16..15, each once */
    ty_quantize_row_q5_0(x, &b50, 32);
    CHECK_EQ(b50.d, 0x3c00);
    ty_dequantize_row_q5_0(&b50, y, 32);
    CHECK(memcmp(x, y, sizeof x) == 0);

    block_q5_1 b51;
    for (int j = 0; j < 32; j++) x[j] = -3.0f + 0.25f * (float)((j * 5) % 32);
    ty_quantize_row_q5_1(x, &b51, 32);
    CHECK_EQ(b51.d, 0x3400);
    CHECK_EQ(b51.m, 0xc200);
    ty_dequantize_row_q5_1(&b51, y, 32);
    CHECK(memcmp(x, y, sizeof x) == 0);

    /* IQ4_NL: a block that is exactly half the codebook is found at scale 0.5 (the search
     * tries the inverse scale that maps the extreme -63.5 onto -127). */
    block_iq4_nl bnl;
    for (int j = 0; j < 32; j++) x[j] = 0.5f * (float)ty_iq4nl_values[(j * 3) % 16];
    ty_quantize_row_iq4_nl(x, &bnl, 32);
    CHECK_EQ(bnl.d, 0x3800);
    ty_dequantize_row_iq4_nl(&bnl, y, 32);
    CHECK(memcmp(x, y, sizeof x) == 0);
}

/* Q8_0 rounds with roundf: halfway goes away from zero (62.5 -> 63, -2.5 -> -3, 0.5 -> 1),
 * where round-to-even would give 62, -2, 0. amax 127 makes d = 1 exactly. */
static void test_quantize_q8_0_rules(void) {
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    x[0] = 127.0f;
    x[1] = 62.5f;
    x[2] = -2.5f;
    x[3] = 0.5f;
    block_q8_0 b;
    ty_quantize_row_q8_0(x, &b, 32);
    CHECK_EQ(b.d, 0x3c00);
    CHECK_EQ(b.qs[0], 127);
    CHECK_EQ(b.qs[1], 63);
    CHECK_EQ(b.qs[2], -3);
    CHECK_EQ(b.qs[3], 1);
    for (int j = 4; j < 32; j++) CHECK_EQ(b.qs[j], j - 16);
}

/* ================================================================ llama.cpp's own bytes
 * Blocks 5, 7, 10, 20, 38, 74 and 264 of token_embd.weight (N(0,1) values) of the fixture
 * llama-spm-f32.gguf, and the blocks llama-quantize (llama.cpp, September 2025, no
 * importance matrix) wrote for them in llama-spm-{q4_0,...,iq4_nl}.gguf. Over the whole
 * fixture toy's quantizers give the same bytes for every block of these types; these
 * blocks were picked because each comes out differently under some near miss: Q4_1/Q5_1
 * levels taken from the fp16-rounded minimum, or for IQ4_NL 6 or 8 candidate scales
 * instead of 7, a tie in the search going to the later candidate, another order of the
 * sums, the final indices taken with the fp16 scale. Their extremes have both signs. */
static const uint32_t golden_x[7 * 32] = {
    0xbff12f47, 0xbf27c680, 0x3eadfda8, 0x3ea5a880, 0x3d77d415, 0x3fa248aa, 0xbd870e2c,
    0x3ed3132e, 0xbe785d12, 0x3f83fed6, 0x3f6e264d, 0x3f88e568, 0x3f93ed0f, 0x3fae6606,
    0x3e7ed12f, 0xbf5bd62f, 0xbf717679, 0xbe83ef2e, 0xbefc876d, 0x3fc993ba, 0x3e9a548b,
    0xbf93119e, 0x3f3e17f2, 0xbe0b4106, 0x3ff44110, 0x3f8af90a, 0x3f5cde39, 0x3e12cf54,
    0x3ebef75d, 0x3f224b25, 0xbfdf53bb, 0xbd8605b7,
    0x3e6d3338, 0xbdb781a4, 0xbf57f600, 0xc020485f, 0xbf1ddaf6, 0x3f30c442, 0x3efd7fa1,
    0xbd0ad7b9, 0x3fd2df62, 0xbf365534, 0xbe1bc042, 0x3fc3979d, 0x3e840a6d, 0x3ef6af4a,
    0x3eafb3cf, 0x401dfb61, 0xbef24451, 0x3ef7d11b, 0x3f0dedad, 0xbfbbbd94, 0x3ffbf83e,
    0x3f8c59d0, 0x3f5406b3, 0x3eab481d, 0xbf9df608, 0xbcfd9c76, 0x3f279500, 0xbe3a820c,
    0x3dbd42cd, 0x3f33c149, 0x3e4e31ff, 0x3d5e7b80,
    0xc06ef6e8, 0xbf2020cf, 0xbfa6f5da, 0x3e4d1071, 0xbfa73a0e, 0x3f939fcf, 0xbe677f33,
    0xbfaf3c42, 0xbead7f08, 0xbc8ea3aa, 0xbfa9e3f9, 0x3f0a7ef9, 0x3fb5bbae, 0x3f983789,
    0x3e19bd88, 0xbd6633d7, 0xbfb56431, 0x3ee577cf, 0xbf863b56, 0x3f86a656, 0xbfb36879,
    0x3f61c740, 0x3f0430fd, 0x3ef8625f, 0x3fa77388, 0x3fbc1c8c, 0xbf443e06, 0x3eb347e9,
    0x3e27917c, 0x3f1cef5b, 0xbe92b141, 0x3fb914e0,
    0x3fa31691, 0xbf8c6b65, 0xbf72bf30, 0xbec5133b, 0x3edbad3e, 0x3fc43eba, 0xbed995e9,
    0xbed1d417, 0x3fb1fe36, 0xbf69316b, 0x3fd1c648, 0xc028bc46, 0x3f6fd0c6, 0xbea618e7,
    0x3f578cda, 0x3cc53e41, 0xbf15b1f5, 0xbf620001, 0xbfb77dc2, 0xbf813e16, 0xbd198163,
    0x3f9368fc, 0x3fdb8d10, 0x3f844481, 0x3d5589ca, 0xbd441823, 0xbe858aa2, 0x3c92ff52,
    0x3eefad9b, 0x3d74d5ba, 0x3f39d711, 0xbeb4daff,
    0xbf85b685, 0xc0174e3c, 0x3f0c6647, 0x3dcfd04d, 0x3db96e71, 0x3e9ce66f, 0x3c9559f9,
    0xbf1c2392, 0xbbb274eb, 0xbf6e7b39, 0xbfaf0a49, 0x3d236432, 0xbf8ce2d1, 0xbe847a4a,
    0xbfaedb65, 0x40170190, 0x40120fe7, 0xbee80ee4, 0x3db0e484, 0xbfd8ce61, 0xbd4c8d71,
    0xbfedc351, 0x3f67d504, 0x3de67c6b, 0x3f14946f, 0x3f4e5507, 0x3e27f8fb, 0xbf4cd2ef,
    0x3f1c2e63, 0x3efcf19e, 0x3f716bd9, 0x3e82597a,
    0x3e21af8e, 0x3d4df7b7, 0x3cd469a6, 0x3f281a4c, 0x3e928d77, 0x3e68ecc8, 0x3f2f3ea0,
    0xbe8cc903, 0xbd64e4e7, 0xbe48e89d, 0x400e02e0, 0x3c655ba6, 0x3e2dbe4d, 0xbf74dbad,
    0x3f4ceade, 0x401927ef, 0xbf6c5696, 0xbf187a12, 0x3fe0ca6c, 0x3fb704a8, 0xbecf4361,
    0xbed86f49, 0x3f2b6b1d, 0xbfb23d81, 0x3fd662c5, 0x3eb61585, 0xbdead5bd, 0xbf4e7692,
    0xbdedb5e4, 0xbf7a14b0, 0xbfd31a99, 0x3ec8ab4f,
    0x3e0ae77d, 0xbfef0856, 0x3e583d22, 0x3f96a3c0, 0x3fca1c3f, 0x403553c2, 0x3fa33726,
    0x3fc771fd, 0xbf8184b5, 0x3fd505ac, 0x3e754bff, 0x4005407e, 0x40276601, 0x3f1f5eed,
    0x3fa61f6c, 0xbe2f8bcc, 0xbf05393b, 0xbfb76328, 0xbea85371, 0xbfcbe9e1, 0x3ee02950,
    0xbb7b6fd2, 0x3e493236, 0xbeb625ea, 0xbde22ed9, 0xbd83adfb, 0x3f55a69c, 0xbeb3276c,
    0xbf1cbf3a, 0xbdda6dc1, 0xbfb11764, 0xbe32fc88,
};
static const uint8_t golden_q4_0[7 * 18] = {
    0xa2, 0xb3, 0xcf, 0x9b, 0xa7, 0x17, 0x78, 0xd3, 0x58,
    0x96, 0x09, 0x34, 0x44, 0x74, 0x63, 0x52, 0xf7, 0x8c,
    0x02, 0x35, 0x69, 0xa8, 0xa5, 0x30, 0xe6, 0xca, 0xba,
    0x98, 0x4d, 0x86, 0xa8, 0x7d, 0x89, 0xaa, 0x99, 0x8f,
    0x78, 0x37, 0x50, 0x97, 0x65, 0xa8, 0x55, 0xaa, 0x98,
    0x95, 0xb7, 0xb8, 0x65, 0x99, 0x8b, 0x9b, 0x78, 0xb8,
    0x46, 0x35, 0x6c, 0x55, 0x45, 0x57, 0x89, 0xbd, 0xd7,
    0xb7, 0x8c, 0x85, 0x7d, 0x80, 0x9b, 0x87, 0xab, 0x78,
    0xba, 0x34, 0xf4, 0x60, 0x8a, 0x28, 0x88, 0x29, 0xb8,
    0x86, 0xa8, 0xb5, 0x93, 0x58, 0xa4, 0xa7, 0xb3, 0x9f,
    0xc9, 0xb4, 0xb7, 0xa8, 0x28, 0x36, 0x97, 0x97, 0x66,
    0xd9, 0x28, 0x79, 0x81, 0xb8, 0x87, 0xbb, 0xe5, 0x70,
    0xab, 0xb5, 0x98, 0xcd, 0x97, 0xc5, 0x74, 0x80, 0x74,
    0x94, 0x8b, 0x83, 0x67, 0x92, 0xa1, 0x86, 0xc4, 0x88,
};
static const uint8_t golden_q4_1[7 * 20] = {
    0x0c, 0x34, 0x89, 0xbf, 0x40, 0x65, 0x69, 0xe9, 0x98, 0x3c,
    0xa7, 0x79, 0xf6, 0xcc, 0xbb, 0x8c, 0x9c, 0xad, 0x18, 0x74,
    0x4e, 0x35, 0x02, 0xc1, 0x68, 0x97, 0x95, 0x30, 0xd6, 0xba,
    0xa9, 0x97, 0x4d, 0x75, 0xa7, 0x7c, 0x88, 0xa9, 0x89, 0x8f,
    0x8d, 0x35, 0x78, 0xc3, 0x70, 0xc9, 0x87, 0xeb, 0x77, 0xde,
    0xca, 0xc7, 0xfa, 0xfb, 0x97, 0xcc, 0xbf, 0xde, 0xab, 0xfb,
    0xa4, 0x34, 0x46, 0xc1, 0x7d, 0x65, 0x46, 0x68, 0x9b, 0xde,
    0xf8, 0xd8, 0x9e, 0x96, 0x8f, 0x90, 0xbc, 0x98, 0xcc, 0x89,
    0x0a, 0x35, 0xba, 0xc0, 0xf4, 0x60, 0x89, 0x28, 0x78, 0x28,
    0xa8, 0x86, 0x97, 0xa5, 0x83, 0x58, 0x94, 0x97, 0xb3, 0x8f,
    0x50, 0x34, 0x99, 0xbe, 0x37, 0x46, 0xd6, 0xb9, 0x57, 0x57,
    0x99, 0x15, 0xc6, 0x75, 0x6e, 0x36, 0x67, 0x23, 0x09, 0x8f,
    0x04, 0x35, 0x78, 0xbf, 0x46, 0x10, 0x57, 0x1a, 0x7b, 0x6f,
    0x7a, 0x5b, 0x63, 0x6b, 0x97, 0x5d, 0x4e, 0x68, 0x2a, 0x55,
};
static const uint8_t golden_q5_0[7 * 22] = {
    0xa2, 0xaf, 0x43, 0x81, 0xa7, 0xc0, 0x8f, 0x25, 0x4d, 0x3d, 0xdf,
    0xa5, 0xa1, 0x1d, 0x02, 0x77, 0x98, 0xf7, 0xd6, 0xb5, 0xfe, 0x17,
    0x02, 0x31, 0xe1, 0xf9, 0xf6, 0xf6, 0xd1, 0x3f, 0x4b, 0x70, 0xdc,
    0x74, 0x53, 0x20, 0x8b, 0x0b, 0x4f, 0xfa, 0x12, 0x43, 0x12, 0x0f,
    0x78, 0x33, 0x28, 0xfa, 0xea, 0xbb, 0xa0, 0x2d, 0xca, 0x51, 0xaa,
    0x45, 0x2f, 0x2a, 0x6f, 0x60, 0xda, 0x22, 0x16, 0x35, 0xf1, 0x60,
    0x46, 0x31, 0x31, 0xd5, 0xf0, 0x7b, 0xc8, 0xb9, 0x7a, 0xae, 0x03,
    0x79, 0xad, 0x6e, 0x08, 0x0a, 0xea, 0x00, 0x36, 0x0e, 0x45, 0xe0,
    0xba, 0x30, 0x7c, 0x89, 0xd5, 0xf7, 0xf9, 0xd0, 0x14, 0x51, 0x01,
    0x32, 0x60, 0x1c, 0x40, 0x5a, 0x17, 0xb0, 0x49, 0x3e, 0x67, 0x2f,
    0xc9, 0xb0, 0x86, 0x2b, 0xb3, 0x7c, 0x6f, 0x40, 0x40, 0x6c, 0x3e,
    0x3e, 0xcb, 0x92, 0x50, 0xe1, 0x11, 0x50, 0x1f, 0x76, 0xbb, 0xd0,
    0xab, 0xb1, 0x02, 0x81, 0xaf, 0xfb, 0x3f, 0x8b, 0x2f, 0x99, 0xe7,
    0x00, 0xf9, 0x27, 0x16, 0x07, 0xbf, 0x24, 0x31, 0x1c, 0x89, 0x11,
};
static const uint8_t golden_q5_1[7 * 24] = {
    0xd4, 0x2f, 0x89, 0xbf, 0xbc, 0x7e, 0x58, 0x3f, 0x80, 0xda, 0xb2, 0xc2,
    0x20, 0x6a, 0x5f, 0xe3, 0xfd, 0x88, 0x67, 0x18, 0x29, 0x5b, 0x11, 0xf8,
    0x22, 0x31, 0x02, 0xc1, 0x61, 0xf9, 0xf6, 0xf4, 0xd1, 0x3f, 0x3a, 0x60,
    0xcc, 0x64, 0x53, 0x2f, 0x8a, 0xfb, 0x4f, 0xe9, 0x01, 0x43, 0x12, 0x0f,
    0x5f, 0x31, 0x78, 0xc3, 0x6a, 0xfb, 0xee, 0xff, 0xe0, 0x93, 0x0e, 0xd7,
    0xee, 0xbd, 0x95, 0x9e, 0xe4, 0xf6, 0x2e, 0x89, 0x7f, 0xad, 0x57, 0xf6,
    0x7e, 0x30, 0x46, 0xc1, 0xf9, 0xf5, 0xf0, 0xff, 0xfc, 0xcb, 0x9c, 0xc0,
    0x36, 0xbe, 0xf0, 0xa0, 0x3d, 0x2c, 0x1e, 0x30, 0x69, 0x30, 0x89, 0x03,
    0xe0, 0x30, 0xba, 0xc0, 0x7c, 0x88, 0xc5, 0xf7, 0xe9, 0xd0, 0x03, 0x40,
    0xf0, 0x32, 0x50, 0x0c, 0x3f, 0x59, 0x17, 0xa0, 0x48, 0x3e, 0x67, 0x1f,
    0x2c, 0x30, 0x99, 0xbe, 0x48, 0xc4, 0x4c, 0x81, 0x6e, 0x8d, 0xad, 0x82,
    0xaf, 0x9e, 0x22, 0x2b, 0x9c, 0xfb, 0xce, 0x6d, 0xce, 0x55, 0x03, 0x0f,
    0xda, 0x30, 0x78, 0xbf, 0xf8, 0x7a, 0x00, 0x04, 0x9d, 0x30, 0xae, 0x24,
    0xf7, 0xcf, 0xe5, 0xa7, 0xc6, 0xc7, 0x2e, 0xaa, 0x8e, 0xc0, 0x35, 0xbb,
};
static const uint8_t golden_q8_0[7 * 34] = {
    0xb1, 0x23, 0x83, 0xd4, 0x17, 0x16, 0x04, 0x54, 0xfc, 0x1b, 0xf0, 0x45,
    0x3e, 0x47, 0x4d, 0x5b, 0x11, 0xc7, 0xc1, 0xef, 0xdf, 0x69, 0x14, 0xb4,
    0x31, 0xf7, 0x7f, 0x48, 0x39, 0x0a, 0x19, 0x2a, 0x8c, 0xfc,
    0x0c, 0x25, 0x0c, 0xfb, 0xd5, 0x81, 0xe1, 0x23, 0x19, 0xfe, 0x54, 0xdc,
    0xf8, 0x4d, 0x0d, 0x18, 0x11, 0x7d, 0xe8, 0x19, 0x1c, 0xb6, 0x64, 0x38,
    0x2a, 0x11, 0xc1, 0xfe, 0x21, 0xf7, 0x05, 0x24, 0x0a, 0x03,
    0x87, 0x27, 0x81, 0xeb, 0xd4, 0x07, 0xd4, 0x27, 0xf8, 0xd1, 0xf4, 0xff,
    0xd3, 0x12, 0x30, 0x28, 0x05, 0xfe, 0xd0, 0x0f, 0xdc, 0x24, 0xd0, 0x1e,
    0x12, 0x11, 0x2c, 0x32, 0xe6, 0x0c, 0x06, 0x15, 0xf6, 0x31,
    0x51, 0x25, 0x3d, 0xcb, 0xd2, 0xed, 0x15, 0x4a, 0xec, 0xec, 0x43, 0xd4,
    0x4f, 0x81, 0x2d, 0xf0, 0x29, 0x01, 0xe4, 0xd5, 0xbb, 0xcf, 0xfe, 0x37,
    0x53, 0x32, 0x03, 0xfe, 0xf3, 0x01, 0x17, 0x03, 0x23, 0xef,
    0xc4, 0x24, 0xc8, 0x81, 0x1d, 0x05, 0x05, 0x10, 0x01, 0xdf, 0x00, 0xce,
    0xb7, 0x02, 0xc5, 0xf2, 0xb7, 0x7f, 0x7b, 0xe8, 0x05, 0xa5, 0xfd, 0x9c,
    0x31, 0x06, 0x1f, 0x2b, 0x09, 0xd5, 0x21, 0x1b, 0x33, 0x0e,
    0xd3, 0x24, 0x08, 0x03, 0x01, 0x23, 0x0f, 0x0c, 0x24, 0xf1, 0xfd, 0xf6,
    0x76, 0x01, 0x09, 0xcd, 0x2a, 0x7f, 0xcf, 0xe0, 0x5d, 0x4c, 0xeb, 0xea,
    0x24, 0xb6, 0x59, 0x13, 0xfa, 0xd5, 0xfa, 0xcc, 0xa8, 0x15,
    0xb6, 0x25, 0x06, 0xac, 0x09, 0x35, 0x47, 0x7f, 0x39, 0x46, 0xd3, 0x4b,
    0x0b, 0x5d, 0x75, 0x1c, 0x3a, 0xf8, 0xe9, 0xc0, 0xf1, 0xb9, 0x14, 0x00,
    0x09, 0xf0, 0xfb, 0xfd, 0x25, 0xf0, 0xe5, 0xfb, 0xc2, 0xf8,
};
static const uint8_t golden_iq4_nl[7 * 18] = {
    0x0a, 0xa4, 0xcf, 0x9b, 0xa6, 0x16, 0x68, 0xd2, 0x48,
    0x96, 0x09, 0x33, 0x43, 0x73, 0x63, 0x52, 0xf7, 0x8c,
    0x65, 0x25, 0x69, 0xa8, 0xa5, 0x30, 0xe5, 0xcb, 0xba,
    0x98, 0x3d, 0x85, 0xa7, 0x7d, 0x89, 0xba, 0x99, 0x8f,
    0x78, 0x27, 0x40, 0x96, 0x54, 0xb8, 0x44, 0xab, 0x97,
    0x94, 0xb7, 0xc8, 0x64, 0x99, 0x8c, 0xab, 0x78, 0xc8,
    0x32, 0x25, 0x5d, 0x44, 0x34, 0x46, 0x8a, 0xcd, 0xe6,
    0xc6, 0x8d, 0x84, 0x7e, 0x80, 0xac, 0x87, 0xbb, 0x68,
    0x09, 0x25, 0xf4, 0x60, 0x8a, 0x28, 0x88, 0x19, 0xc8,
    0x85, 0xa8, 0xb4, 0x93, 0x58, 0xa4, 0xa7, 0xc3, 0x9f,
    0x28, 0x25, 0x49, 0x58, 0xe8, 0xdb, 0x69, 0x69, 0xbb,
    0x37, 0xe8, 0x97, 0x7f, 0x58, 0x79, 0x44, 0x2b, 0xaf,
    0x11, 0x26, 0x68, 0x32, 0x79, 0x3c, 0x9d, 0x8f, 0x9c,
    0x7d, 0x74, 0x8d, 0xb9, 0x7e, 0x6f, 0x8a, 0x3c, 0x77,
};

/* ================================================================ per-type table */

typedef struct {
    const char *name;
    int type;
    int block_size;
    size_t block_bytes;
    ty_from_float_fn quantize; /* NULL: dequantize only */
    ty_to_float_fn dequantize;
    const uint8_t *golden; /* llama.cpp's blocks for golden_x, or NULL */
    /* Bound on RMSE/std for N(0,1) data, measured on the 65536 values used below:
     * Q4_0 0.0864, Q4_1 0.0789, Q5_0 0.0427, Q5_1 0.0381, Q8_0 0.00538, IQ4_NL 0.0764.
     * They agree with the uniform-error estimate step/sqrt(12), the step of a block of 32
     * normals (amax about 2.15, max - min about 4.1) being amax/8, (max-min)/15, amax/16,
     * (max-min)/31, amax/127: 0.078, 0.079, 0.039, 0.038, 0.0049 (the symmetric types
     * lose a little more where the extreme's mirror image is clamped); IQ4_NL beats Q4_0
     * with its levels packed near zero. The bounds are the measurements plus 5%: the data
     * are fixed, so only a change of the algorithm can move them. */
    double gauss_bound;
    /* All-zero block as ggml stores it: Q4_0/Q5_0 take d = 0/-8 = -0 and level 8/16;
     * IQ4_NL maps 0 to its nearest level, 1 (index 8). */
    uint8_t zero_block[40];
} type_case;

static const type_case cases[] = {
    {"Q4_0", TOY_TYPE_Q4_0, 32, sizeof(block_q4_0), ty_quantize_row_q4_0,
     ty_dequantize_row_q4_0, golden_q4_0, 0.0907,
     {0x00, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
      0x88, 0x88, 0x88}},
    {"Q4_1", TOY_TYPE_Q4_1, 32, sizeof(block_q4_1), ty_quantize_row_q4_1,
     ty_dequantize_row_q4_1, golden_q4_1, 0.0828, {0}},
    {"Q5_0", TOY_TYPE_Q5_0, 32, sizeof(block_q5_0), ty_quantize_row_q5_0,
     ty_dequantize_row_q5_0, golden_q5_0, 0.0449, {0x00, 0x80, 0xff, 0xff, 0xff, 0xff}},
    {"Q5_1", TOY_TYPE_Q5_1, 32, sizeof(block_q5_1), ty_quantize_row_q5_1,
     ty_dequantize_row_q5_1, golden_q5_1, 0.0400, {0}},
    {"Q8_0", TOY_TYPE_Q8_0, 32, sizeof(block_q8_0), ty_quantize_row_q8_0,
     ty_dequantize_row_q8_0, golden_q8_0, 0.00565, {0}},
    {"IQ4_NL", TOY_TYPE_IQ4_NL, 32, sizeof(block_iq4_nl), ty_quantize_row_iq4_nl,
     ty_dequantize_row_iq4_nl, golden_iq4_nl, 0.0802,
     {0x00, 0x00, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
      0x88, 0x88, 0x88}},
    {"IQ4_XS", TOY_TYPE_IQ4_XS, 256, sizeof(block_iq4_xs), NULL, ty_dequantize_row_iq4_xs,
     NULL, 0, {0}},
};

#define N_CASES (int)(sizeof cases / sizeof cases[0])

/* The type table hands out these functions and sizes. */
static void test_type_table(void) {
    for (int c = 0; c < N_CASES; c++) {
        const ty_type_traits *t = ty_type_traits_get(cases[c].type);
        CHECK_MSG(t && t->block_size == cases[c].block_size &&
                      t->type_size == cases[c].block_bytes && t->to_float == cases[c].dequantize &&
                      t->from_float == cases[c].quantize,
                  "type table entry of %s", cases[c].name);
    }
}

static void test_golden_blocks(void) {
    float x[7 * 32];
    for (int j = 0; j < 7 * 32; j++) x[j] = f32_from_bits(golden_x[j]);
    for (int c = 0; c < N_CASES; c++) {
        if (!cases[c].golden) continue;
        for (int b = 0; b < 7; b++) {
            uint8_t q[40];
            cases[c].quantize(x + 32 * b, q, 32);
            const uint8_t *want = cases[c].golden + b * cases[c].block_bytes;
            CHECK_MSG(memcmp(q, want, cases[c].block_bytes) == 0,
                      "%s: golden block %d differs from llama.cpp's", cases[c].name, b);
        }
    }
}

/* ================================================================ statistics */

#define N_GAUSS 65536

static double rmse(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / n);
}

static int count_nonfinite(const float *y, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !isfinite(y[i]);
    return bad;
}

static void round_trip(const type_case *tc, const float *x, float *y, uint8_t *q, int n) {
    tc->quantize(x, q, n);
    tc->dequantize(q, y, n);
}

static void test_gaussian(const type_case *tc, const float *x, float *y, uint8_t *q) {
    round_trip(tc, x, y, q, N_GAUSS);
    double mean = 0, var = 0;
    for (int i = 0; i < N_GAUSS; i++) mean += x[i];
    mean /= N_GAUSS;
    for (int i = 0; i < N_GAUSS; i++) var += (x[i] - mean) * (x[i] - mean);
    const double rel = rmse(x, y, N_GAUSS) / sqrt(var / N_GAUSS);
    CHECK_MSG(rel <= tc->gauss_bound, "%s: RMSE/std %.5f > %.5f", tc->name, rel, tc->gauss_bound);
    CHECK_EQ(count_nonfinite(y, N_GAUSS), 0);
    if (getenv("TOY_TEST_VERBOSE")) printf("%-7s gaussian RMSE/std %.5f\n", tc->name, rel);

    /* For the linear types, re-quantizing a dequantized row reproduces it: a block's
     * extremes are levels, so the same scale comes back and every value lands on its own
     * level again. (IQ4_NL's weighted scale search may settle on another scale.) */
    if (tc->type == TOY_TYPE_IQ4_NL) return;
    float *y2 = malloc(N_GAUSS * sizeof *y2);
    uint8_t *q2 = malloc((size_t)N_GAUSS / 32 * tc->block_bytes);
    if (!y2 || !q2) abort();
    round_trip(tc, y, y2, q2, N_GAUSS);
    CHECK_MSG(memcmp(y, y2, N_GAUSS * sizeof *y) == 0, "%s: not a fixed point", tc->name);
    free(y2);
    free(q2);
}

#define N_EDGE 256

static void test_edge_rows(const type_case *tc, unsigned long long *rng) {
    float x[N_EDGE], y[N_EDGE];
    uint8_t q[N_EDGE / 32 * 40];
    /* fp16 scales and offsets: a relative rounding of 2^-11 each, plus a float rounding
     * in the level-times-scale product. */
    const float fp16_rel = 1.0f / 2048 + 1.0f / (1 << 20);

    /* All zeros: ggml's exact encoding, and zeros back. */
    memset(x, 0, sizeof x);
    round_trip(tc, x, y, q, N_EDGE);
    CHECK_MSG(memcmp(q, tc->zero_block, tc->block_bytes) == 0, "%s: zero block", tc->name);
    for (int i = 0; i < N_EDGE; i++) CHECK(y[i] == 0.0f);

    /* A constant row: exact up to the fp16 rounding of the scale (or of the offset). */
    for (int i = 0; i < N_EDGE; i++) x[i] = 0.7f;
    round_trip(tc, x, y, q, N_EDGE);
    for (int i = 0; i < N_EDGE; i++) CHECK_NEAR(y[i], 0.7f, 0.7f * fp16_rel);

    /* One outlier: it is an extreme, so a level, and comes back to fp16 precision (the
     * _1 types round both d and m: twice that); blocks without it are untouched by it. */
    for (int i = 0; i < N_EDGE; i++) x[i] = 0.01f * test_rand_normal(rng);
    x[100] = 5.0f;
    round_trip(tc, x, y, q, N_EDGE);
    CHECK_NEAR(y[100], 5.0f, 5.0f * 2 * fp16_rel);
    float rest_x[N_EDGE - 32], rest_y[N_EDGE - 32];
    int n_rest = 0;
    for (int i = 0; i < N_EDGE; i++) {
        if (i / 32 == 100 / 32) continue;
        rest_x[n_rest] = x[i];
        rest_y[n_rest++] = y[i];
    }
    /* 224 values instead of 65536: allow 30% over the Gaussian bound for sampling. */
    CHECK_MSG(rmse(rest_x, rest_y, n_rest) / 0.01 <= 1.3 * tc->gauss_bound,
              "%s: outlier spoils other blocks", tc->name);

    /* Values far below fp16's range: every scale underflows to 0 and the row comes back as
     * zeros, never NaN or inf. */
    for (int i = 0; i < N_EDGE; i++) x[i] = 1e-30f * test_rand_normal(rng);
    round_trip(tc, x, y, q, N_EDGE);
    for (int i = 0; i < N_EDGE; i++) CHECK(y[i] == 0.0f);
    /* IQ4_NL, like ggml, stores a block whose largest magnitude is below 1e-15 exactly as
     * an all-zero one (the linear types keep their levels under a zero scale). */
    if (tc->type == TOY_TYPE_IQ4_NL) {
        for (int i = 0; i < N_EDGE; i++) x[i] = 9e-16f * (i % 2 ? 1.0f : -1.0f);
        tc->quantize(x, q, N_EDGE);
        CHECK(memcmp(q, tc->zero_block, tc->block_bytes) == 0);
    }

    /* Negative values only, in [-1 - 4.x, -1]: no value changes sign, and the error is
     * within the Gaussian bound measured against the row's spread (its RMS), with room
     * for the sample size: the symmetric types spend half their levels on the unused
     * positive side, so they get twice the bound. */
    double ms = 0;
    for (int i = 0; i < N_EDGE; i++) {
        x[i] = -1.0f - fabsf(test_rand_normal(rng));
        ms += (double)x[i] * x[i];
    }
    round_trip(tc, x, y, q, N_EDGE);
    int positive = 0;
    for (int i = 0; i < N_EDGE; i++) positive += y[i] > 0.0f;
    CHECK_EQ(positive, 0);
    const int symmetric = tc->type != TOY_TYPE_Q4_1 && tc->type != TOY_TYPE_Q5_1;
    const double rel = rmse(x, y, N_EDGE) / sqrt(ms / N_EDGE);
    CHECK_MSG(rel <= (symmetric ? 2.0 : 1.0) * tc->gauss_bound, "%s: negative row RMSE/RMS %.4f",
              tc->name, rel);
    if (getenv("TOY_TEST_VERBOSE")) printf("%-7s negative-only RMSE/RMS %.5f\n", tc->name, rel);
}

int main(void) {
    test_fp16_every_half();
    test_fp16_rounding();
    test_fp16_special_values();
#if defined(__FLT16_MANT_DIG__)
    test_fp16_against_compiler();
#endif
    test_bf16();

    test_dequant_q4_0();
    test_dequant_q4_1();
    test_dequant_q5_0();
    test_dequant_q5_1();
    test_dequant_q8_0();
    test_iq4nl_codebook();
    test_dequant_iq4_nl();
    test_dequant_iq4_xs();

    test_quantize_q4_0_rules();
    test_quantize_exact_grids();
    test_quantize_q8_0_rules();
    test_type_table();
    test_golden_blocks();

    float *x = malloc(N_GAUSS * sizeof *x), *y = malloc(N_GAUSS * sizeof *y);
    uint8_t *q = malloc((size_t)N_GAUSS / 32 * 40);
    if (!x || !y || !q) return 1;
    unsigned long long rng = 0x5eed0f7e57ULL;
    for (int i = 0; i < N_GAUSS; i++) x[i] = test_rand_normal(&rng);
    for (int c = 0; c < N_CASES; c++) {
        if (!cases[c].quantize) continue;
        test_gaussian(&cases[c], x, y, q);
        test_edge_rows(&cases[c], &rng);
    }
    free(x);
    free(y);
    free(q);
    return test_finish("test_quant");
}
