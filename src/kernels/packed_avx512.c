/* packed_avx512.c — AVX-512 VNNI products of packed weights (packed.h) with up to 8
 * activation rows at a time, bit-identical to the scalar reference (packed.c).
 *
 * One packed block is eight zmm of weights (four bytes of each of 16 rows per 32-bit
 * lane) and one zmm of the rows' scales. For each activation row, eight vpdpbusd with
 * the row's four-byte groups broadcast give the 16 rows' exact block sums, starting from
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
#define BLOCK_BYTES 576  /* a packed Q8_0 block: 16 scales, 8 x 16 x 4 weight bytes */

INLINE int32_t rd32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Rows [0, rows) of one group (rows <= 16) times n_a <= TILE activation rows; n_a is a
 * constant in each instantiation, so the accumulators live in registers. */
INLINE void q8_0x_group(int64_t nb, const uint8_t *group, int rows, const uint8_t *a,
                        size_t a_stride, const int n_a, float *y, size_t y_stride) {
    __m512 lane[LANES][TILE];
    const uint8_t *blk = group;
    for (int l = 0; l < LANES; l++) {
        __m512 acc[TILE];
        UNROLLED
        for (int j = 0; j < n_a; j++) acc[j] = _mm512_setzero_ps();
        for (int64_t b = l; b < nb; b += LANES, blk += BLOCK_BYTES) {
            const __m512 wd = _mm512_loadu_ps(blk);
            __m512i w[8];
            UNROLLED
            for (int k = 0; k < 8; k++) w[k] = _mm512_loadu_si512(blk + 64 + 64 * k);
            UNROLLED
            for (int j = 0; j < n_a; j++) {
                const toy_act_q8_0x *x = (const toy_act_q8_0x *)(a + (size_t)j * a_stride) + b;
                /* two chains of four, so that a lone row is not one long latency chain */
                __m512i z0 = _mm512_set1_epi32(x->start), z1 = _mm512_setzero_si512();
                UNROLLED
                for (int k = 0; k < 8; k += 2) {
                    z0 = _mm512_dpbusd_epi32(z0, w[k], _mm512_set1_epi32(rd32(x->qs + 4 * k)));
                    z1 = _mm512_dpbusd_epi32(z1, w[k + 1], _mm512_set1_epi32(rd32(x->qs + 4 * k + 4)));
                }
                const __m512i sumi = _mm512_add_epi32(z0, z1);
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

static void gemm_q8_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a,
                       size_t a_stride, int64_t n_a, float *y, size_t y_stride) {
    const int64_t nb = n_cols / 32;
    const size_t group_bytes = (size_t)nb * BLOCK_BYTES;
    const uint8_t *group = w, *act = a;
    /* group outer, activation tiles inner: a group's weights stay in L1 for all rows */
    for (int64_t r0 = 0; r0 < n_rows; r0 += 16, group += group_bytes) {
        const int rows = n_rows - r0 < 16 ? (int)(n_rows - r0) : 16;
        for (int64_t j0 = 0; j0 < n_a; j0 += TILE) {
            const uint8_t *aj = act + (size_t)j0 * a_stride;
            float *yj = y + (size_t)j0 * y_stride + (size_t)r0;
            switch (n_a - j0 < TILE ? (int)(n_a - j0) : TILE) {
            case 1: q8_0x_group(nb, group, rows, aj, a_stride, 1, yj, y_stride); break;
            case 2: q8_0x_group(nb, group, rows, aj, a_stride, 2, yj, y_stride); break;
            case 3: q8_0x_group(nb, group, rows, aj, a_stride, 3, yj, y_stride); break;
            case 4: q8_0x_group(nb, group, rows, aj, a_stride, 4, yj, y_stride); break;
            case 5: q8_0x_group(nb, group, rows, aj, a_stride, 5, yj, y_stride); break;
            case 6: q8_0x_group(nb, group, rows, aj, a_stride, 6, yj, y_stride); break;
            case 7: q8_0x_group(nb, group, rows, aj, a_stride, 7, yj, y_stride); break;
            default: q8_0x_group(nb, group, rows, aj, a_stride, 8, yj, y_stride); break;
            }
        }
    }
}

static const toy_packed_kernel packed_q8_0_avx512 = {
    .type = TOY_TYPE_Q8_0,
    .act_block = sizeof(toy_act_q8_0x),
    .quantize_act = toy_quantize_act_q8_0x,
    .gemm = gemm_q8_0x,
};

const toy_packed_kernel *toy_packed_avx512(int type) {
    return type == TOY_TYPE_Q8_0 ? &packed_q8_0_avx512 : NULL;
}

#endif /* __x86_64__ */
