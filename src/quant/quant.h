/* quant.h — GGUF weight types: block layouts and the scalar reference conversions.
 *
 * Every block struct here is byte-for-byte the layout GGUF files store (ggml's
 * ggml-common.h); sizes are checked at compile time. Halves are IEEE binary16 bit
 * patterns. The scalar functions are the definition of each type: SIMD kernels are
 * tested against them.
 *
 * Row functions take n = number of elements, always a multiple of the block size.
 */
#ifndef TOY_QUANT_H
#define TOY_QUANT_H

#include <stdint.h>
#include <string.h>

#include "toy.h"

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12
#define QK4_NL 32

typedef uint16_t ty_half;

typedef struct {
    ty_half d;
    uint8_t qs[QK4_0 / 2]; /* low nibble: element j, high nibble: element j + 16 */
} block_q4_0;

typedef struct {
    ty_half d;
    ty_half m;
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

typedef struct {
    ty_half d;
    uint8_t qh[4]; /* 5th bit of each of the 32 quants, little-endian uint32 */
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

typedef struct {
    ty_half d;
    ty_half m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

typedef struct {
    ty_half d;
    int8_t qs[QK8_0];
} block_q8_0;

typedef struct {
    ty_half d;
    ty_half s; /* d * sum(qs) */
    int8_t qs[QK8_1];
} block_q8_1;

typedef struct {
    uint8_t scales[QK_K / 16]; /* low 4 bits scale, high 4 bits min, per 16 */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    ty_half d;
    ty_half dmin;
} block_q2_K;

typedef struct {
    uint8_t hmask[QK_K / 8]; /* high bit of the 3-bit quants */
    uint8_t qs[QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];      /* 16 6-bit scales, packed */
    ty_half d;
} block_q3_K;

typedef struct {
    ty_half d;
    ty_half dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins, packed */
    uint8_t qs[QK_K / 2];
} block_q4_K;

typedef struct {
    ty_half d;
    ty_half dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

typedef struct {
    uint8_t ql[QK_K / 2];     /* low 4 bits */
    uint8_t qh[QK_K / 4];     /* high 2 bits */
    int8_t scales[QK_K / 16]; /* 8-bit scales */
    ty_half d;
} block_q6_K;

typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sum of qs per 16 */
} block_q8_K;

typedef struct {
    ty_half d;
    uint8_t qs[QK4_NL / 2];
} block_iq4_nl;

typedef struct {
    ty_half d;
    uint16_t scales_h;         /* high 2 bits of the 8 6-bit block scales */
    uint8_t scales_l[QK_K / 64]; /* low 4 bits */
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");

/* The 16 non-uniform levels of IQ4_NL / IQ4_XS. */
extern const int8_t ty_iq4nl_values[16];

/* ---------------------------------------------------------------- half precision */

/* IEEE binary16 <-> binary32, round to nearest even (what F16C's vcvtps2ph with
 * rounding mode 0 and ggml's scalar fallback both do). */
float ty_fp16_to_fp32(ty_half h);
ty_half ty_fp32_to_fp16(float f);
/* bfloat16: round to nearest even; NaN stays a quiet NaN (ggml_compute_fp32_to_bf16). */
float ty_bf16_to_fp32(uint16_t h);
uint16_t ty_fp32_to_bf16(float f);

/* ---------------------------------------------------------------- per-type rows */

typedef void (*ty_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*ty_from_float_fn)(const float *src, void *dst, int64_t n);

typedef struct {
    const char *name;
    int64_t block_size;
    size_t type_size;
    ty_to_float_fn to_float;     /* NULL: toy cannot dequantize this type */
    ty_from_float_fn from_float; /* NULL: toy cannot quantize to this type */
} ty_type_traits;

/* NULL for a number that is no known type. */
const ty_type_traits *ty_type_traits_get(int type);

void ty_dequantize_row_f32(const void *src, float *dst, int64_t n);
void ty_dequantize_row_f16(const void *src, float *dst, int64_t n);
void ty_dequantize_row_bf16(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q4_0(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q4_1(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q5_0(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q5_1(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q8_0(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q2_K(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q3_K(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q4_K(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q5_K(const void *src, float *dst, int64_t n);
void ty_dequantize_row_q6_K(const void *src, float *dst, int64_t n);
void ty_dequantize_row_iq4_nl(const void *src, float *dst, int64_t n);
void ty_dequantize_row_iq4_xs(const void *src, float *dst, int64_t n);

void ty_quantize_row_f32(const float *src, void *dst, int64_t n);
void ty_quantize_row_f16(const float *src, void *dst, int64_t n);
void ty_quantize_row_bf16(const float *src, void *dst, int64_t n);
void ty_quantize_row_q4_0(const float *src, void *dst, int64_t n);
void ty_quantize_row_q4_1(const float *src, void *dst, int64_t n);
void ty_quantize_row_q5_0(const float *src, void *dst, int64_t n);
void ty_quantize_row_q5_1(const float *src, void *dst, int64_t n);
void ty_quantize_row_q8_0(const float *src, void *dst, int64_t n);
void ty_quantize_row_q2_K(const float *src, void *dst, int64_t n);
void ty_quantize_row_q3_K(const float *src, void *dst, int64_t n);
void ty_quantize_row_q4_K(const float *src, void *dst, int64_t n);
void ty_quantize_row_q5_K(const float *src, void *dst, int64_t n);
void ty_quantize_row_q6_K(const float *src, void *dst, int64_t n);
void ty_quantize_row_iq4_nl(const float *src, void *dst, int64_t n);

/* Rounds to the nearest integer, ties to even, for |x| < 2^22: ggml's nearest_int,
 * which the K-quant and IQ4 searches use (legacy types use roundf, ties away). */
static inline int ty_nearest_int(float x) {
    float v = x + 12582912.0f; /* 1.5 * 2^23: the mantissa now holds the integer */
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

#endif
