/* quant_float.c — the float types: IEEE half and bfloat16 conversions, and the rows of
 * F32, F16 and BF16 weights. */
#include <string.h>

#include "quant.h"

/* ---------------------------------------------------------------- half precision */

float ty_fp16_to_fp32(ty_half h) {
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

ty_half ty_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) /* nan: keep it quiet */
        return (ty_half)(sign | 0x7e00 | ((abs >> 13) & 0x3ff));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (ty_half)(sign | 0x7c00);
    if (abs < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (abs < 0x33000000u) /* < 2^-25 rounds to zero */
            return (ty_half)sign;
        uint32_t e = abs >> 23;
        uint32_t m = (abs & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (ty_half)(sign | q);
    }
    uint32_t e = (abs >> 23) - 112;
    uint32_t m = abs & 0x7fffff;
    uint32_t h = (e << 10) | (m >> 13);
    uint32_t rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* carries into the exponent */
    return (ty_half)(sign | h);
}

float ty_bf16_to_fp32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t ty_fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64);
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1))) >> 16);
}

/* ---------------------------------------------------------------- float rows */

void ty_dequantize_row_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void ty_dequantize_row_f16(const void *src, float *dst, int64_t n) {
    const ty_half *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = ty_fp16_to_fp32(x[i]);
}

void ty_dequantize_row_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = ty_bf16_to_fp32(x[i]);
}

void ty_quantize_row_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void ty_quantize_row_f16(const float *src, void *dst, int64_t n) {
    ty_half *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = ty_fp32_to_fp16(src[i]);
}

void ty_quantize_row_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = ty_fp32_to_bf16(src[i]);
}
