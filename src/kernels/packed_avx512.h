/* packed_avx512.h — the AVX-512 pieces shared by the AVX-512 VNNI (packed_avx512.c) and
 * AMX (packed_amx.c) products of packed weights: both read the same layouts (packed.h).
 * Include only from files compiled with AVX-512 F/BW/VL/DQ and VNNI enabled. */
#ifndef TOY_PACKED_AVX512_H
#define TOY_PACKED_AVX512_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "packed.h"
#include "quant.h"

/* UBSan is off in these kernels: their arithmetic is vector intrinsics, where it has
 * nothing to check (the loads are still checked by ASan), and its instrumentation of the
 * unrolled tiles made one file take four minutes to compile in the fuzzing build. */
#if defined(__clang__)
#define NO_UBSAN __attribute__((no_sanitize("undefined")))
#else
#define NO_UBSAN __attribute__((no_sanitize_undefined))
#endif
#define INLINE static inline __attribute__((always_inline)) NO_UBSAN
#define LANES 8             /* the reduction shape's block lanes */
#define BLOCK_BYTES 544     /* a packed Q8_0 block: 16 fp16 scales, 8 x 16 x 4 weight bytes */
#define Q4_BLOCK_BYTES 288  /* a packed Q4_0 block: 16 fp16 scales, 4 x 16 x 4 nibble pairs */
/* Q4_1: fp16 d[16] at 0, m[16] at 32, then Q4_0's 4 x 16 x 4 nibble pairs at 64. */
#define Q41_BLOCK_BYTES 320
/* Q4_K: a packed block is one super-block of 16 rows (packed.h), 2304 bytes:
 * fp16 d[16] at 0, dmin[16] at 32, the scale dwords at 64 (three zmm: bytes 0-3, 4-7,
 * 8-11 of each row's 12 scale bytes), then the nibbles of sub-block pairs at 256. */
#define Q4K_BLOCK_BYTES 2304
/* Q5_K: the Q4_K block, then the fifth bits at 2304 ([k] zmm); 2816 bytes. */
#define Q5K_BLOCK_BYTES 2816
#define Q5K_HIGH_BITS 2304
/* Q6_K: fp16 d[16] at 0, the int8 scales [16 sub-blocks][16 rows] at 32, the ql bytes
 * at 288 ([h][s][k] zmm), the qh bytes at 2336 ([h][k] zmm); 3360 bytes (packed.h). */
#define Q6K_BLOCK_BYTES 3360
/* IQ4_XS: fp16 d[16] at 0, scales_h[16] at 32, the scale dwords at 64, the nibbles of
 * sub-block j, vector g at 128 + 256 j + 64 g; 2176 bytes (packed.h). */
#define IQ4XS_BLOCK_BYTES 2176

INLINE int32_t rd32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* An fp16 field in every lane as float, exactly (vcvtph2ps; no library call per block) */
INLINE __m512 half_lanes(uint16_t h) {
    return _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
}

INLINE __m512i srl32(__m512i v, int n) {
    return _mm512_srl_epi32(v, _mm_cvtsi32_si128(n));
}

/* The six-bit scale (or min: lo = the min dword) of sub-block j of 16 rows, per 32-bit
 * lane, from the three scale dwords (kernels.c k4_scale_min). */
INLINE __m512i q4k_field(__m512i lo, __m512i s0, __m512i s2, int j, bool min) {
    if (j < 4) return _mm512_and_si512(srl32(lo, 8 * j), _mm512_set1_epi32(63));
    const __m512i top = _mm512_and_si512(srl32(min ? lo : s0, 8 * (j - 4) + 6), _mm512_set1_epi32(3));
    const __m512i low = _mm512_and_si512(srl32(s2, 8 * (j - 4) + (min ? 4 : 0)), _mm512_set1_epi32(15));
    return _mm512_or_si512(low, _mm512_slli_epi32(top, 4));
}

/* Q5_K's fifth bits of sub-block j: bit j of each byte of qh moved to bit 4, the other
 * bits cleared (a 16-bit shift never carries another byte's bit j there). */
INLINE __m512i q5k_high(__m512i qh, int j) {
    const __m512i v = j <= 4 ? _mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - j)) : _mm512_srl_epi16(qh, _mm_cvtsi32_si128(j - 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x10));
}

/* IQ4_NL and IQ4_XS: the 16 levels plus 128 (1..241, the unsigned operand of vpdpbusd)
 * in each 128-bit lane, for vpshufb on nibbles. */
INLINE __m512i iq4xs_table(void) {
    const __m128i levels = _mm_loadu_si128((const __m128i *)ty_iq4nl_values);
    return _mm512_broadcast_i32x4(_mm_xor_si128(levels, _mm_set1_epi8((char)0x80)));
}

/* The signed scale (six bits less 32) of sub-block j of 16 rows per 32-bit lane, from
 * the scale dwords sl and the scales_h widened to 32 bits (kernels.c vec_dot_iq4_xs). */
INLINE __m512i iq4xs_scale(__m512i sl, __m512i sh, int j) {
    const __m512i low = _mm512_and_si512(srl32(sl, 4 * j), _mm512_set1_epi32(15));
    const __m512i high = _mm512_and_si512(srl32(sh, 2 * j), _mm512_set1_epi32(3));
    return _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), _mm512_set1_epi32(32));
}

/* IQ4_XS: the scales of sub-blocks 2p and 2p + 1 as 16-bit pairs, for vpdpwssd against
 * the activation's sub-block sums (the 128 added to every level). */
INLINE void iq4xs_scale_pairs(const uint8_t *blk, __m512i sc_pair[4]) {
    const __m512i sl = _mm512_loadu_si512(blk + 64);
    const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(blk + 32)));
    TOY_UNROLL8
    for (int p = 0; p < 4; p++)
        sc_pair[p] = _mm512_or_si512(_mm512_and_si512(iq4xs_scale(sl, sh, 2 * p), _mm512_set1_epi32(0xffff)),
                                     _mm512_slli_epi32(iq4xs_scale(sl, sh, 2 * p + 1), 16));
}

/* IQ4_XS sub-block j of 16 rows as level + 128 bytes: w[g] the low nibbles of vector g
 * (weights 4g..), w[4 + g] the high ones (weights 16 + 4g..). */
INLINE void iq4xs_sub_block(const uint8_t *blk, int j, __m512i table, __m512i w[8]) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    TOY_UNROLL8
    for (int g = 0; g < 4; g++) {
        const __m512i v = _mm512_loadu_si512(blk + 128 + 256 * j + 64 * g);
        w[g] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, low));
        w[4 + g] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
    }
}

/* The mins of sub-blocks 2p and 2p + 1 of 16 rows as 16-bit pairs, for vpdpwssd against
 * the pairs of activation sub-block sums (ty_act_q8_Kx.msum). */
INLINE void q4k_min_pairs(const uint8_t *blk, __m512i mp[4]) {
    const __m512i s0 = _mm512_loadu_si512(blk + 64), s1 = _mm512_loadu_si512(blk + 128);
    const __m512i s2 = _mm512_loadu_si512(blk + 192);
    TOY_UNROLL8
    for (int p = 0; p < 4; p++)
        mp[p] = _mm512_or_si512(q4k_field(s1, s0, s2, 2 * p, true),
                                _mm512_slli_epi32(q4k_field(s1, s0, s2, 2 * p + 1, true), 16));
}

/* Q6_K sub-block g = 8h + 2m + kk of 16 rows, as the unsigned six-bit values u (weights
 * + 32) of its 16 weights, four of each row per 32-bit lane: u[i] holds weights 4i..4i+3
 * of the sub-block, from the ql and qh bytes of half h. The shifts are those of m. */
INLINE __m128i q6k_low_shift(int m) {
    return _mm_cvtsi32_si128(4 * (m / 2));
}

INLINE __m128i q6k_high_shift(int m) {
    return _mm_cvtsi32_si128(m < 2 ? 4 - 2 * m : 2 * m - 4);
}

INLINE void q6k_sub_block(const uint8_t *ql, const uint8_t *qh, int m, int kk, __m128i lo_shift, __m128i hi_shift,
                          __m512i u[4]) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), high2 = _mm512_set1_epi8(0x30);
    TOY_UNROLL8
    for (int i = 0; i < 4; i++) {
        const int k = 4 * kk + i;
        const __m512i vl = _mm512_loadu_si512(ql + 512 * (m % 2) + 64 * k);
        const __m512i vh = _mm512_loadu_si512(qh + 64 * k);
        const __m512i lo = _mm512_srl_epi16(vl, lo_shift);
        /* bits 2m, 2m + 1 to bits 4, 5 */
        const __m512i hi = m < 2 ? _mm512_sll_epi16(vh, hi_shift) : _mm512_srl_epi16(vh, hi_shift);
        /* (lo & 0x0f) | (hi & 0x30) */
        u[i] = _mm512_ternarylogic_epi32(_mm512_and_si512(lo, low4), hi, high2, 0xf8);
    }
}

/* Q4_K / Q5_K: one activation row's value of a super-block for 16 weight rows, the
 * reference's d * isum - dmin * summs, summs = sum of min_j * msum_j (mp: q4k_min_pairs;
 * wd, wdm: the rows' d and dmin). */
INLINE __m512 q4k_row_value(__m512 wd, __m512 wdm, const __m512i mp[4], const ty_act_q8_Kx *x, __m512i isum) {
    __m512i summs = _mm512_setzero_si512();
    TOY_UNROLL8
    for (int p = 0; p < 4; p++) summs = _mm512_dpwssd_epi32(summs, mp[p], _mm512_set1_epi32(rd32(x->msum + 2 * p)));
    const __m512 ad = _mm512_set1_ps(x->d);
    const __m512 d = _mm512_mul_ps(wd, ad), dm = _mm512_mul_ps(wdm, ad);
    const __m512 scaled = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum));
    return _mm512_sub_ps(scaled, _mm512_mul_ps(dm, _mm512_cvtepi32_ps(summs)));
}

/* The scales of sub-blocks 2p and 2p + 1 of 16 rows as 16-bit pairs, for vpdpwssd
 * against the pairs of the activation's 16-quant sums (block_q8_K.bsums). */
INLINE __m512i q6k_scale_pair(const uint8_t *blk, int p) {
    const __m512i s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 32 * p)));
    const __m512i s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 48 + 32 * p)));
    return _mm512_or_si512(_mm512_and_si512(s0, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(s1, 16));
}

#endif
