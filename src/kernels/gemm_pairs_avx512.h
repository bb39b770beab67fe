/* gemm_pairs_avx512.h — the pair panels of gemm.h's pack_pairs in AVX-512, and the 16 x
 * 16 transpose that the F32 packing shares with them. Included inside a TOY_TARGET region:
 * by gemm_avx512_bf16.c with PAIRS_CONVERT_BF16 set, where bf() of 32 floats is one
 * vcvtne2ps2bf16 (the panels its pair kernel reads), and by gemm_avx512.c without it,
 * where bf() is integer arithmetic (the same panels on any AVX-512 CPU: the tests check
 * this code there against the definition, where no BF16 instruction runs).
 *
 * vcvtne2ps2bf16 rounds to nearest even, keeps NaN (quieted) and reads subnormal floats
 * as zero (Intel SDM, "convert_fp32_to_bfloat16"). bf() rounds first and then replaces a
 * bf16 subnormal by the zero of its sign: the same, except for the floats just below
 * FLT_MIN, |x| in [0x1.fep-127, 2^-126), which round up to the smallest normal bf16.
 * Vectors holding one of those take the integer path. ty_gemm_pack_pairs_probe checks
 * the instruction on every kind of value before cpu.c uses it. */
#ifndef TOY_GEMM_PAIRS_AVX512_H
#define TOY_GEMM_PAIRS_AVX512_H

#include "simd.h"

/* GCC keeps the 16 rows of a transpose in registers only when told to unroll; clang
 * unrolls by itself, and with the pragma takes minutes on this file under ASan. */
#if defined(__clang__)
#define PAIRS_UNROLL16
#else
#define PAIRS_UNROLL16 _Pragma("GCC unroll 16")
#endif

/* r[i] holds row i (16 floats); afterwards r[j] holds column j. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16];
    PAIRS_UNROLL16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    PAIRS_UNROLL16
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* r[4q + s] now holds, in each 128-bit lane L, element s of rows 4q..4q+3 at column
     * 4L + (0..3) order; gather the lanes */
    PAIRS_UNROLL16
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], _MM_SHUFFLE(2, 0, 2, 0));
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], _MM_SHUFFLE(3, 1, 3, 1));
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], _MM_SHUFFLE(2, 0, 2, 0));
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], _MM_SHUFFLE(3, 1, 3, 1));
    }
    PAIRS_UNROLL16
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], _MM_SHUFFLE(3, 1, 3, 1));
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* bf() of gemm.h on 16 floats, in the low 16 bits of each lane: nearest even, NaN kept
 * and quieted, bf16 subnormals to the zero of their sign */
static inline __attribute__((always_inline)) __m512i bf16_daz16(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i h = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    const __mmask16 subnormal = _mm512_testn_epi32_mask(h, _mm512_set1_epi32(0x7f80));
    return _mm512_mask_and_epi32(h, subnormal, h, _mm512_set1_epi32(0x8000));
}

/* The lanes of x in the window the instruction reads as zero and bf() rounds up to
 * FLT_MIN: |x| - 0x1.fep-127 below 2^-133, unsigned */
static inline __attribute__((always_inline)) __mmask16 below_flt_min_window(__m512 x) {
    const __m512i abs = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(abs, _mm512_set1_epi32(0x007f8000)), _mm512_set1_epi32(0x8000));
}

/* 32 floats to 32 bf16 words, lo's 16 first: bf() of each */
static inline __attribute__((always_inline)) __m512i pairs_convert(__m512 lo, __m512 hi) {
#ifdef PAIRS_CONVERT_BF16
    if (__builtin_expect(!(below_flt_min_window(lo) | below_flt_min_window(hi)), 1))
        return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
#endif
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(bf16_daz16(lo))),
                              _mm512_cvtepi32_epi16(bf16_daz16(hi)), 1);
}

/* pairs of storage rows read ahead of the packing, along K */
#define PAIRS_AHEAD 8

/* lanes [0, n) of 16 */
static inline __attribute__((always_inline)) __mmask16 pairs_lanes(int n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* The pair panel of gemm.h's pack_pairs (gemm.c), the same slots: X's rows [0, rows) of
 * width (12 or 32), k in [0, kc), X[i][k] = x[k * ld + i] where k_major, else
 * x[i * ld + k]. */
static void pack_pairs_avx512(const float *x, int64_t ld, bool k_major, int width, int rows, int64_t kc,
                              float *dst) {
    const int64_t kp = (kc + 1) / 2;
    if (k_major) {
        /* a pair's two k are two storage rows: 16 rows of X from each, converted together,
         * then each even word beside its odd one */
        const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                     23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        for (int64_t s = 0; s < kp; s++) {
            const float *even = x + 2 * s * ld;
            const bool has_odd = 2 * s + 1 < kc;
            if (s + PAIRS_AHEAD < kp) { /* rows far apart: no hardware prefetcher follows them */
                const float *ahead = even + 2 * PAIRS_AHEAD * ld;
                for (int i0 = 0; i0 < rows; i0 += 16) {
                    _mm_prefetch((const char *)(ahead + i0), _MM_HINT_T0);
                    _mm_prefetch((const char *)(ahead + ld + i0), _MM_HINT_T0);
                }
            }
            if (width == 12 && rows == 12 && has_odd) { /* A panels: without masks, which cost more */
                const __m512 e = _mm512_insertf32x4(_mm512_castps256_ps512(_mm256_loadu_ps(even)),
                                                    _mm_loadu_ps(even + 8), 2);
                const __m512 o = _mm512_insertf32x4(_mm512_castps256_ps512(_mm256_loadu_ps(even + ld)),
                                                    _mm_loadu_ps(even + ld + 8), 2);
                const __m512i w = _mm512_permutexvar_epi16(interleave, pairs_convert(e, o));
                _mm256_storeu_si256((__m256i *)(dst + s * 12), _mm512_castsi512_si256(w));
                _mm_storeu_si128((__m128i *)(dst + s * 12 + 8), _mm512_extracti32x4_epi32(w, 2));
                continue;
            }
            for (int i0 = 0; i0 < width; i0 += 16) {
                const __mmask16 in = pairs_lanes(rows - i0);
                const __m512 e = _mm512_maskz_loadu_ps(in, even + i0);
                const __m512 o = has_odd ? _mm512_maskz_loadu_ps(in, even + ld + i0) : _mm512_setzero_ps();
                const __m512i w = _mm512_permutexvar_epi16(interleave, pairs_convert(e, o));
                _mm512_mask_storeu_epi32(dst + s * width + i0, pairs_lanes(width - i0), w);
            }
        }
        return;
    }
    /* 16 rows by 16 pairs at a time: a row's 32 floats are 16 pair slots in k order, and a
     * 16 x 16 transpose puts each pair's rows in one vector */
    for (int i0 = 0; i0 < width; i0 += 16)
        for (int64_t s0 = 0; s0 < kp; s0 += 16) {
            const int nk = kc - 2 * s0 < 32 ? (int)(kc - 2 * s0) : 32;
            const __mmask16 lo_in = pairs_lanes(nk), hi_in = pairs_lanes(nk - 16);
            __m512 r[16];
            PAIRS_UNROLL16
            for (int i = 0; i < 16; i++) {
                if (i0 + i >= rows) {
                    r[i] = _mm512_setzero_ps();
                    continue;
                }
                const float *src = x + (i0 + i) * ld + 2 * s0;
                const __m512 lo = _mm512_maskz_loadu_ps(lo_in, src);
                const __m512 hi = _mm512_maskz_loadu_ps(hi_in, src + 16);
                r[i] = _mm512_castsi512_ps(pairs_convert(lo, hi));
            }
            transpose16(r);
            const int ns = kp - s0 < 16 ? (int)(kp - s0) : 16;
            const __mmask16 out = pairs_lanes(width - i0);
            for (int s = 0; s < ns; s++) _mm512_mask_storeu_ps(dst + (s0 + s) * width + i0, out, r[s]);
        }
}

#endif
