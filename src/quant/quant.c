/* quant.c — the table of GGUF weight types, half-precision conversions and the
 * float rows (F32, F16, BF16). The block types live in quant_legacy.c (Q4_0..Q8_0),
 * quant_k.c (K-quants) and quant_iq.c (IQ4_NL, IQ4_XS). */
#include "quant.h"

#include <strings.h>
#include <string.h>

#include "error.h"

/* ---------------------------------------------------------------- half precision */

float toy_fp16_to_fp32(toy_half h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) { /* inf / nan */
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do {
            mant <<= 1;
            e++;
        } while (!(mant & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

toy_half toy_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) /* nan: keep it quiet */
        return (toy_half)(sign | 0x7e00 | ((abs >> 13) & 0x3ff));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (toy_half)(sign | 0x7c00);
    if (abs < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (abs < 0x33000000u) /* < 2^-25 rounds to zero */
            return (toy_half)sign;
        uint32_t e = abs >> 23;
        uint32_t m = (abs & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (toy_half)(sign | q);
    }
    uint32_t e = (abs >> 23) - 112;
    uint32_t m = abs & 0x7fffff;
    uint32_t h = (e << 10) | (m >> 13);
    uint32_t rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* carries into the exponent */
    return (toy_half)(sign | h);
}

float toy_bf16_to_fp32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t toy_fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64);
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1))) >> 16);
}

/* ---------------------------------------------------------------- float rows */

void toy_dequantize_row_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void toy_dequantize_row_f16(const void *src, float *dst, int64_t n) {
    const toy_half *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = toy_fp16_to_fp32(x[i]);
}

void toy_dequantize_row_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = toy_bf16_to_fp32(x[i]);
}

void toy_quantize_row_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void toy_quantize_row_f16(const float *src, void *dst, int64_t n) {
    toy_half *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = toy_fp32_to_fp16(src[i]);
}

void toy_quantize_row_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = toy_fp32_to_bf16(src[i]);
}

/* ---------------------------------------------------------------- the type table
 * Every type a GGUF file may hold is listed so that files with types toy cannot
 * convert can still be read and described; the sizes are ggml's. */

#define T(id, nm, bs, ts, to, from) [id] = {nm, bs, ts, to, from}

static const toy_type_traits type_traits[TOY_TYPE_COUNT] = {
    T(TOY_TYPE_F32, "F32", 1, 4, toy_dequantize_row_f32, toy_quantize_row_f32),
    T(TOY_TYPE_F16, "F16", 1, 2, toy_dequantize_row_f16, toy_quantize_row_f16),
    T(TOY_TYPE_Q4_0, "Q4_0", QK4_0, sizeof(block_q4_0), toy_dequantize_row_q4_0,
      toy_quantize_row_q4_0),
    T(TOY_TYPE_Q4_1, "Q4_1", QK4_1, sizeof(block_q4_1), toy_dequantize_row_q4_1,
      toy_quantize_row_q4_1),
    T(TOY_TYPE_Q5_0, "Q5_0", QK5_0, sizeof(block_q5_0), toy_dequantize_row_q5_0,
      toy_quantize_row_q5_0),
    T(TOY_TYPE_Q5_1, "Q5_1", QK5_1, sizeof(block_q5_1), toy_dequantize_row_q5_1,
      toy_quantize_row_q5_1),
    T(TOY_TYPE_Q8_0, "Q8_0", QK8_0, sizeof(block_q8_0), toy_dequantize_row_q8_0,
      toy_quantize_row_q8_0),
    T(TOY_TYPE_Q8_1, "Q8_1", QK8_1, sizeof(block_q8_1), NULL, NULL),
    T(TOY_TYPE_Q2_K, "Q2_K", QK_K, sizeof(block_q2_K), toy_dequantize_row_q2_K,
      toy_quantize_row_q2_K),
    T(TOY_TYPE_Q3_K, "Q3_K", QK_K, sizeof(block_q3_K), toy_dequantize_row_q3_K,
      toy_quantize_row_q3_K),
    T(TOY_TYPE_Q4_K, "Q4_K", QK_K, sizeof(block_q4_K), toy_dequantize_row_q4_K,
      toy_quantize_row_q4_K),
    T(TOY_TYPE_Q5_K, "Q5_K", QK_K, sizeof(block_q5_K), toy_dequantize_row_q5_K,
      toy_quantize_row_q5_K),
    T(TOY_TYPE_Q6_K, "Q6_K", QK_K, sizeof(block_q6_K), toy_dequantize_row_q6_K,
      toy_quantize_row_q6_K),
    T(TOY_TYPE_Q8_K, "Q8_K", QK_K, sizeof(block_q8_K), NULL, NULL),
    T(TOY_TYPE_IQ2_XXS, "IQ2_XXS", QK_K, 66, NULL, NULL),
    T(TOY_TYPE_IQ2_XS, "IQ2_XS", QK_K, 74, NULL, NULL),
    T(TOY_TYPE_IQ3_XXS, "IQ3_XXS", QK_K, 98, NULL, NULL),
    T(TOY_TYPE_IQ1_S, "IQ1_S", QK_K, 50, NULL, NULL),
    T(TOY_TYPE_IQ4_NL, "IQ4_NL", QK4_NL, sizeof(block_iq4_nl), toy_dequantize_row_iq4_nl,
      toy_quantize_row_iq4_nl),
    T(TOY_TYPE_IQ3_S, "IQ3_S", QK_K, 110, NULL, NULL),
    T(TOY_TYPE_IQ2_S, "IQ2_S", QK_K, 82, NULL, NULL),
    T(TOY_TYPE_IQ4_XS, "IQ4_XS", QK_K, sizeof(block_iq4_xs), toy_dequantize_row_iq4_xs,
      NULL),
    T(TOY_TYPE_I8, "I8", 1, 1, NULL, NULL),
    T(TOY_TYPE_I16, "I16", 1, 2, NULL, NULL),
    T(TOY_TYPE_I32, "I32", 1, 4, NULL, NULL),
    T(TOY_TYPE_I64, "I64", 1, 8, NULL, NULL),
    T(TOY_TYPE_F64, "F64", 1, 8, NULL, NULL),
    T(TOY_TYPE_IQ1_M, "IQ1_M", QK_K, 56, NULL, NULL),
    T(TOY_TYPE_BF16, "BF16", 1, 2, toy_dequantize_row_bf16, toy_quantize_row_bf16),
    T(TOY_TYPE_TQ1_0, "TQ1_0", QK_K, 54, NULL, NULL),
    T(TOY_TYPE_TQ2_0, "TQ2_0", QK_K, 66, NULL, NULL),
    T(TOY_TYPE_MXFP4, "MXFP4", 32, 17, NULL, NULL),
};

#undef T

const toy_type_traits *toy_type_traits_get(int type) {
    if (type < 0 || type >= TOY_TYPE_COUNT || !type_traits[type].name) return NULL;
    return &type_traits[type];
}

const char *toy_type_name(int type) {
    const toy_type_traits *t = toy_type_traits_get(type);
    return t ? t->name : NULL;
}

int toy_type_from_name(const char *name) {
    for (int i = 0; i < TOY_TYPE_COUNT; i++)
        if (type_traits[i].name && strcasecmp(type_traits[i].name, name) == 0) return i;
    return -1;
}

int64_t toy_type_block_size(int type) {
    const toy_type_traits *t = toy_type_traits_get(type);
    return t ? t->block_size : 0;
}

size_t toy_type_size(int type) {
    const toy_type_traits *t = toy_type_traits_get(type);
    return t ? t->type_size : 0;
}

toy_status toy_type_row_size(int type, int64_t n, size_t *out) {
    const toy_type_traits *t = toy_type_traits_get(type);
    if (!t) return toy_error(TOY_ERR_UNSUPPORTED, "unknown tensor type %d", type);
    if (n < 0 || n % t->block_size != 0)
        return toy_error(TOY_ERR_INVALID, "type %s needs a multiple of %lld elements, got %lld",
                         t->name, (long long)t->block_size, (long long)n);
    if (toy_mul_overflows((size_t)(n / t->block_size), t->type_size, out))
        return toy_error(TOY_ERR_INVALID, "row of %lld %s elements overflows size_t",
                         (long long)n, t->name);
    return TOY_OK;
}

bool toy_type_can_dequantize(int type) {
    const toy_type_traits *t = toy_type_traits_get(type);
    return t && t->to_float;
}

bool toy_type_can_quantize(int type) {
    const toy_type_traits *t = toy_type_traits_get(type);
    return t && t->from_float;
}

toy_status toy_dequantize(int type, const void *src, float *dst, int64_t n) {
    size_t size;
    toy_status st = toy_type_row_size(type, n, &size);
    if (st) return st;
    const toy_type_traits *t = toy_type_traits_get(type);
    if (!t->to_float)
        return toy_error(TOY_ERR_UNSUPPORTED, "cannot dequantize type %s", t->name);
    t->to_float(src, dst, n);
    return TOY_OK;
}

toy_status toy_quantize(int type, const float *src, void *dst, int64_t n) {
    size_t size;
    toy_status st = toy_type_row_size(type, n, &size);
    if (st) return st;
    const toy_type_traits *t = toy_type_traits_get(type);
    if (!t->from_float)
        return toy_error(TOY_ERR_UNSUPPORTED, "cannot quantize to type %s", t->name);
    t->from_float(src, dst, n);
    return TOY_OK;
}
