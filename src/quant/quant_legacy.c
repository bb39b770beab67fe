/* quant_legacy.c — the first GGUF block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
 *
 * Every block holds 32 weights and an fp16 scale d; the "_1" types add an fp16 offset m
 * (weight = q*d + m with q >= 0), the "_0" types are symmetric (weight = (q - bias)*d).
 * The 4- and 5-bit types pack two weights per byte: the low nibble of qs[j] is weight j,
 * the high nibble weight j + 16. Q5 keeps the fifth bit of weight i in bit i of qh, read
 * as a little-endian uint32.
 *
 * The quantizers reproduce llama.cpp's reference ones (quantize_row_*_ref, which is what
 * llama-quantize runs when it has no importance matrix) byte for byte:
 *   - the scale comes from the block's extremes, and the inverse scale used to pick the
 *     levels is taken before d is rounded to fp16 (so a level is the nearest one for the
 *     exact scale, not always for the stored one; matching ggml needs the same);
 *   - Q4/Q5 levels are found by adding a bias plus 0.5 and truncating, so halfway cases
 *     round up (towards +inf), not to even and not away from zero; Q8_0 uses roundf.
 * Each product and each sum ggml forms as a separate step is a separate statement here,
 * so a compiler that contracts a*b+c into an FMA within one expression (clang with FMA
 * enabled) still forms ggml's roundings.
 */
#include "quant.h"

#include <float.h>
#include <math.h>

/* ---------------------------------------------------------------- shared helpers */

/* ggml turns a biased value into a level with an (int8_t) cast and, for most types,
 * MIN(top, ...). Every value it casts there lies in [0, top + 1), where clamping in float
 * first gives the same level; the clamp also keeps NaN or inf (a scale so small that its
 * inverse overflows) away from an undefined float-to-int conversion. */
static inline int biased_level(float v, int top) {
    if (!(v >= 1.0f)) return 0; /* also NaN */
    if (v >= (float)top) return top;
    return (int)v;
}

/* The value of largest magnitude, keeping its sign; the first one wins a tie, as in ggml.
 * The symmetric types map it to their lowest level (-8, -16), which exists once more on the
 * negative side than on the positive one, so the extreme is always represented exactly. */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (amax < fabsf(x[i])) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *min_out, float *max_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int i = 0; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
    }
    *min_out = min;
    *max_out = max;
}

/* qh is four bytes in the file; ggml memcpy's it into a uint32 on little-endian hosts. */
static inline uint32_t load_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static inline void store_qh(uint8_t qh[4], uint32_t bits) {
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(bits >> (8 * i));
}

static inline float inverse_or_zero(float d) {
    return d != 0.0f ? 1.0f / d : 0.0f;
}

/* ---------------------------------------------------------------- Q4_0
 * 4-bit levels 0..15 standing for -8..7 times d. */

void ty_dequantize_row_q4_0(const void *src, float *dst, int64_t n) {
    const block_q4_0 *blocks = src;
    for (int64_t b = 0; b < n / QK4_0; b++, dst += QK4_0) {
        const float d = ty_fp16_to_fp32(blocks[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const uint8_t byte = blocks[b].qs[j];
            dst[j] = (float)((byte & 0x0f) - 8) * d;
            dst[j + QK4_0 / 2] = (float)((byte >> 4) - 8) * d;
        }
    }
}

void ty_quantize_row_q4_0(const float *src, void *dst, int64_t n) {
    block_q4_0 *blocks = dst;
    for (int64_t b = 0; b < n / QK4_0; b++, src += QK4_0) {
        const float d = signed_absmax(src, QK4_0) / -8;
        const float id = inverse_or_zero(d);
        blocks[b].d = ty_fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float lo = src[j] * id;
            const float hi = src[j + QK4_0 / 2] * id;
            const int q_lo = biased_level(lo + 8.5f, 15);
            const int q_hi = biased_level(hi + 8.5f, 15);
            blocks[b].qs[j] = (uint8_t)(q_lo | q_hi << 4);
        }
    }
}

/* ---------------------------------------------------------------- Q4_1
 * 4-bit levels 0..15 standing for m + q*d, with m the block minimum. */

void ty_dequantize_row_q4_1(const void *src, float *dst, int64_t n) {
    const block_q4_1 *blocks = src;
    for (int64_t b = 0; b < n / QK4_1; b++, dst += QK4_1) {
        const float d = ty_fp16_to_fp32(blocks[b].d);
        const float m = ty_fp16_to_fp32(blocks[b].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const uint8_t byte = blocks[b].qs[j];
            const float lo = (float)(byte & 0x0f) * d;
            const float hi = (float)(byte >> 4) * d;
            dst[j] = lo + m;
            dst[j + QK4_1 / 2] = hi + m;
        }
    }
}

void ty_quantize_row_q4_1(const float *src, void *dst, int64_t n) {
    block_q4_1 *blocks = dst;
    for (int64_t b = 0; b < n / QK4_1; b++, src += QK4_1) {
        float min, max;
        min_max(src, QK4_1, &min, &max);
        const float d = (max - min) / 15;
        const float id = inverse_or_zero(d);
        blocks[b].d = ty_fp32_to_fp16(d);
        blocks[b].m = ty_fp32_to_fp16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const float lo = (src[j] - min) * id;
            const float hi = (src[j + QK4_1 / 2] - min) * id;
            const int q_lo = biased_level(lo + 0.5f, 15);
            const int q_hi = biased_level(hi + 0.5f, 15);
            blocks[b].qs[j] = (uint8_t)(q_lo | q_hi << 4);
        }
    }
}

/* ---------------------------------------------------------------- Q5_0
 * 5-bit levels 0..31 standing for -16..15 times d; the low four bits in qs, the fifth in
 * qh. */

void ty_dequantize_row_q5_0(const void *src, float *dst, int64_t n) {
    const block_q5_0 *blocks = src;
    for (int64_t b = 0; b < n / QK5_0; b++, dst += QK5_0) {
        const float d = ty_fp16_to_fp32(blocks[b].d);
        const uint32_t qh = load_qh(blocks[b].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const uint8_t byte = blocks[b].qs[j];
            const int lo = (byte & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int hi = (byte >> 4) | (int)((qh >> (j + QK5_0 / 2)) & 1) << 4;
            dst[j] = (float)(lo - 16) * d;
            dst[j + QK5_0 / 2] = (float)(hi - 16) * d;
        }
    }
}

void ty_quantize_row_q5_0(const float *src, void *dst, int64_t n) {
    block_q5_0 *blocks = dst;
    for (int64_t b = 0; b < n / QK5_0; b++, src += QK5_0) {
        const float d = signed_absmax(src, QK5_0) / -16;
        const float id = inverse_or_zero(d);
        blocks[b].d = ty_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float lo = src[j] * id;
            const float hi = src[j + QK5_0 / 2] * id;
            const int q_lo = biased_level(lo + 16.5f, 31);
            const int q_hi = biased_level(hi + 16.5f, 31);
            blocks[b].qs[j] = (uint8_t)((q_lo & 0x0f) | (q_hi & 0x0f) << 4);
            qh |= (uint32_t)(q_lo >> 4) << j;
            qh |= (uint32_t)(q_hi >> 4) << (j + QK5_0 / 2);
        }
        store_qh(blocks[b].qh, qh);
    }
}

/* ---------------------------------------------------------------- Q5_1
 * 5-bit levels 0..31 standing for m + q*d. */

void ty_dequantize_row_q5_1(const void *src, float *dst, int64_t n) {
    const block_q5_1 *blocks = src;
    for (int64_t b = 0; b < n / QK5_1; b++, dst += QK5_1) {
        const float d = ty_fp16_to_fp32(blocks[b].d);
        const float m = ty_fp16_to_fp32(blocks[b].m);
        const uint32_t qh = load_qh(blocks[b].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const uint8_t byte = blocks[b].qs[j];
            const int q_lo = (byte & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int q_hi = (byte >> 4) | (int)((qh >> (j + QK5_1 / 2)) & 1) << 4;
            const float lo = (float)q_lo * d;
            const float hi = (float)q_hi * d;
            dst[j] = lo + m;
            dst[j + QK5_1 / 2] = hi + m;
        }
    }
}

void ty_quantize_row_q5_1(const float *src, void *dst, int64_t n) {
    block_q5_1 *blocks = dst;
    for (int64_t b = 0; b < n / QK5_1; b++, src += QK5_1) {
        float min, max;
        min_max(src, QK5_1, &min, &max);
        const float d = (max - min) / 31;
        const float id = inverse_or_zero(d);
        blocks[b].d = ty_fp32_to_fp16(d);
        blocks[b].m = ty_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const float lo = (src[j] - min) * id;
            const float hi = (src[j + QK5_1 / 2] - min) * id;
            /* ggml has no MIN(31, ...) here: (max - min)*id + 0.5 stays below 32. */
            const int q_lo = biased_level(lo + 0.5f, 31);
            const int q_hi = biased_level(hi + 0.5f, 31);
            blocks[b].qs[j] = (uint8_t)((q_lo & 0x0f) | (q_hi & 0x0f) << 4);
            qh |= (uint32_t)(q_lo >> 4) << j;
            qh |= (uint32_t)(q_hi >> 4) << (j + QK5_1 / 2);
        }
        store_qh(blocks[b].qh, qh);
    }
}

/* ---------------------------------------------------------------- Q8_0
 * Signed bytes -127..127 times d = amax/127 (-128 never comes out of the quantizer, but
 * a file may hold it and it dequantizes as -128*d). */

void ty_dequantize_row_q8_0(const void *src, float *dst, int64_t n) {
    const block_q8_0 *blocks = src;
    for (int64_t b = 0; b < n / QK8_0; b++, dst += QK8_0) {
        const float d = ty_fp16_to_fp32(blocks[b].d);
        for (int j = 0; j < QK8_0; j++) dst[j] = (float)blocks[b].qs[j] * d;
    }
}

/* roundf: halfway cases go away from zero, unlike the K-quants' nearest_int. |v| <= 127
 * up to an ulp, so the clamp changes nothing there and only keeps NaN/inf defined. */
static inline int8_t q8_level(float v) {
    const float r = roundf(v);
    if (r >= 127.0f) return 127;
    if (r <= -127.0f) return -127;
    return r == r ? (int8_t)r : 0;
}

void ty_quantize_row_q8_0(const float *src, void *dst, int64_t n) {
    block_q8_0 *blocks = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127;
        const float id = inverse_or_zero(d);
        blocks[b].d = ty_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) blocks[b].qs[j] = q8_level(src[j] * id);
    }
}
