/* packed_avx512.c — AVX-512 VNNI products of packed weights (packed.h) with up to 8
 * activation rows at a time, bit-identical to the scalar reference (packed.c).
 *
 * One packed block is eight zmm of weights (four bytes of each of 16 rows per 32-bit
 * lane) and the rows' 16 fp16 scales, widened exactly by vcvtph2ps. For each activation
 * row, eight vpdpbusd with the row's four-byte groups broadcast give the 16 rows' exact block sums, starting from
 * the activation's -128 * sum; then the reference's epilogue, d = w.d * a.d and
 * v = d * (float)sumi, runs on 16 rows at once, and v goes into the accumulator of the
 * block's lane (b % 8). Blocks are stored lane by lane, so one pass over a lane keeps
 * one accumulator per activation row in a register; the 8 lanes are then combined
 * pairwise as in the reference. Compiled with AVX-512 F/BW/VL/DQ and VNNI enabled;
 * called only after toy_cpu_isa() found them. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "packed.h"

#if !defined(__x86_64__)
const toy_packed_kernel *toy_packed_avx512(int type) {
    (void)type;
    return NULL;
}
#else

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define INLINE static inline __attribute__((always_inline))
#define UNROLLED _Pragma("GCC unroll 8")
#define LANES 8          /* the reduction shape's block lanes */
#define TILE 8           /* activation rows per pass */
#define BLOCK_BYTES 544  /* a packed Q8_0 block: 16 fp16 scales, 8 x 16 x 4 weight bytes */
#define Q4_BLOCK_BYTES 288

INLINE int32_t rd32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A packed block's 16 rows times one activation block: the exact integer sums.
 * Q8_0: eight weight registers, each against four broadcast activation bytes.
 * Q4_0: four registers of file bytes, whose low nibbles (weights + 8) meet activation
 * bytes 4g.. and high nibbles bytes 16 + 4g..; the start is then -8 * sum a. */
INLINE __m512i block_sums(const __m512i *w, const toy_act_q8_0x *x, const bool q4) {
    __m512i z0 = _mm512_set1_epi32(q4 ? x->start / 16 : x->start), z1 = _mm512_setzero_si512();
    if (q4) {
        const __m512i low = _mm512_set1_epi8(0x0f);
        UNROLLED
        for (int g = 0; g < 4; g++) {
            const __m512i lo = _mm512_and_si512(w[g], low);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w[g], 4), low);
            z0 = _mm512_dpbusd_epi32(z0, lo, _mm512_set1_epi32(rd32(x->qs + 4 * g)));
            z1 = _mm512_dpbusd_epi32(z1, hi, _mm512_set1_epi32(rd32(x->qs + 16 + 4 * g)));
        }
    } else {
        /* two chains of four, so that a lone row is not one long latency chain */
        UNROLLED
        for (int k = 0; k < 8; k += 2) {
            z0 = _mm512_dpbusd_epi32(z0, w[k], _mm512_set1_epi32(rd32(x->qs + 4 * k)));
            z1 = _mm512_dpbusd_epi32(z1, w[k + 1], _mm512_set1_epi32(rd32(x->qs + 4 * k + 4)));
        }
    }
    return _mm512_add_epi32(z0, z1);
}

/* Rows [0, rows) of one group (rows <= 16) times n_a <= TILE activation rows; n_a and q4
 * are constants in each instantiation, so the accumulators live in registers. */
INLINE void packed_group(int64_t nb, const uint8_t *group, int rows, const uint8_t *a, size_t a_stride,
                         const int n_a, const bool q4, float *y, size_t y_stride) {
    const size_t block_bytes = q4 ? Q4_BLOCK_BYTES : BLOCK_BYTES;
    __m512 lane[LANES][TILE];
    const uint8_t *blk = group;
    for (int l = 0; l < LANES; l++) {
        __m512 acc[TILE];
        UNROLLED
        for (int j = 0; j < n_a; j++) acc[j] = _mm512_setzero_ps();
        for (int64_t b = l; b < nb; b += LANES, blk += block_bytes) {
            const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            __m512i w[8];
            if (q4) {
                UNROLLED
                for (int k = 0; k < 4; k++) w[k] = _mm512_loadu_si512(blk + 32 + 64 * k);
            } else {
                UNROLLED
                for (int k = 0; k < 8; k++) w[k] = _mm512_loadu_si512(blk + 32 + 64 * k);
            }
            UNROLLED
            for (int j = 0; j < n_a; j++) {
                const toy_act_q8_0x *x = (const toy_act_q8_0x *)(a + (size_t)j * a_stride) + b;
                const __m512i sumi = block_sums(w, x, q4);
                const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(x->d));
                acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
            }
        }
        UNROLLED
        for (int j = 0; j < n_a; j++) lane[l][j] = acc[j];
    }
    const __mmask16 keep = (__mmask16)((1u << rows) - 1u);
    UNROLLED
    for (int j = 0; j < n_a; j++) {
        __m512 l0 = _mm512_add_ps(lane[0][j], lane[4][j]), l1 = _mm512_add_ps(lane[1][j], lane[5][j]);
        __m512 l2 = _mm512_add_ps(lane[2][j], lane[6][j]), l3 = _mm512_add_ps(lane[3][j], lane[7][j]);
        l0 = _mm512_add_ps(l0, l2);
        l1 = _mm512_add_ps(l1, l3);
        _mm512_mask_storeu_ps(y + (size_t)j * y_stride, keep, _mm512_add_ps(l0, l1));
    }
}

INLINE void packed_gemm(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride, int64_t n_a,
                        float *y, size_t y_stride, const bool q4) {
    const int64_t nb = n_cols / 32;
    const size_t group_bytes = (size_t)nb * (q4 ? Q4_BLOCK_BYTES : BLOCK_BYTES);
    const uint8_t *group = w, *act = a;
    /* group outer, activation tiles inner: a group's weights stay in L1 for all rows */
    for (int64_t r0 = 0; r0 < n_rows; r0 += 16, group += group_bytes) {
        const int rows = n_rows - r0 < 16 ? (int)(n_rows - r0) : 16;
        for (int64_t j0 = 0; j0 < n_a; j0 += TILE) {
            const uint8_t *aj = act + (size_t)j0 * a_stride;
            float *yj = y + (size_t)j0 * y_stride + (size_t)r0;
            switch (n_a - j0 < TILE ? (int)(n_a - j0) : TILE) {
            case 1: packed_group(nb, group, rows, aj, a_stride, 1, q4, yj, y_stride); break;
            case 2: packed_group(nb, group, rows, aj, a_stride, 2, q4, yj, y_stride); break;
            case 3: packed_group(nb, group, rows, aj, a_stride, 3, q4, yj, y_stride); break;
            case 4: packed_group(nb, group, rows, aj, a_stride, 4, q4, yj, y_stride); break;
            case 5: packed_group(nb, group, rows, aj, a_stride, 5, q4, yj, y_stride); break;
            case 6: packed_group(nb, group, rows, aj, a_stride, 6, q4, yj, y_stride); break;
            case 7: packed_group(nb, group, rows, aj, a_stride, 7, q4, yj, y_stride); break;
            default: packed_group(nb, group, rows, aj, a_stride, 8, q4, yj, y_stride); break;
            }
        }
    }
}

static void gemm_q8_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride, int64_t n_a,
                       float *y, size_t y_stride) {
    packed_gemm(n_cols, w, n_rows, a, a_stride, n_a, y, y_stride, false);
}

static void gemm_q4_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride, int64_t n_a,
                       float *y, size_t y_stride) {
    packed_gemm(n_cols, w, n_rows, a, a_stride, n_a, y, y_stride, true);
}

static const toy_packed_kernel packed_q4_0_avx512 = {
    .type = TOY_TYPE_Q4_0,
    .act_block = sizeof(toy_act_q8_0x),
    .quantize_act = toy_quantize_act_q8_0x,
    .gemm = gemm_q4_0x,
};

static const toy_packed_kernel packed_q8_0_avx512 = {
    .type = TOY_TYPE_Q8_0,
    .act_block = sizeof(toy_act_q8_0x),
    .quantize_act = toy_quantize_act_q8_0x,
    .gemm = gemm_q8_0x,
};

const toy_packed_kernel *toy_packed_avx512(int type) {
    return type == TOY_TYPE_Q8_0 ? &packed_q8_0_avx512 : type == TOY_TYPE_Q4_0 ? &packed_q4_0_avx512 : NULL;
}

#endif /* __x86_64__ */
