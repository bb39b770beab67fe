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
 * called only after ty_cpu_isa() found them. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "packed.h"
#include "simd.h"

#if defined(__x86_64__)

TOY_TARGET_BEGIN(TOY_FEATURES_AVX512)
#include "packed_avx512.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define TILE 8 /* activation rows per pass */
/* the packed type a product is compiled for (a constant in every caller) */
typedef int kind;

#ifndef DECODE_STREAMS
#define DECODE_STREAMS 4 /* groups read side by side in decode where ty_packed_decode_streams() says so */
#endif

/* Eight weight registers of 16 rows times 32 activation bytes, register k against bytes
 * 4k.. broadcast: start plus the rows' exact integer sums (wrapping int32 adds, so the
 * order of the terms does not matter). Two chains of four, so that a lone row is not one
 * long latency chain. */
INLINE __m512i dot32(const __m512i start, const __m512i w[8], const int8_t *qs) {
    __m512i z0 = start, z1 = _mm512_setzero_si512();
    TOY_UNROLL8
    for (int k = 0; k < 8; k += 2) {
        z0 = _mm512_dpbusd_epi32(z0, w[k], _mm512_set1_epi32(rd32(qs + 4 * k)));
        z1 = _mm512_dpbusd_epi32(z1, w[k + 1], _mm512_set1_epi32(rd32(qs + 4 * k + 4)));
    }
    return _mm512_add_epi32(z0, z1);
}

/* A packed block's 16 rows times one activation block: the exact integer sums.
 * Q8_0: eight weight registers, each against four broadcast activation bytes.
 * Q4_0: four registers of file bytes, whose low nibbles (weights + 8) meet activation
 * bytes 4g.. and high nibbles bytes 16 + 4g..; the start is then -8 * sum a. */
INLINE __m512i block_sums(const __m512i *w, const ty_act_q8_0x *x, const bool q4) {
    const __m512i start = _mm512_set1_epi32(x->start);
    if (!q4) return dot32(start, w, x->qs);
    /* Q4_0's start -8 * sum a is the Q8_0 start / 16, exact: an arithmetic shift */
    __m512i z0 = _mm512_srai_epi32(start, 4), z1 = _mm512_setzero_si512();
    const __m512i low = _mm512_set1_epi8(0x0f);
    TOY_UNROLL8
    for (int g = 0; g < 4; g++) {
        const __m512i lo = _mm512_and_si512(w[g], low);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w[g], 4), low);
        z0 = _mm512_dpbusd_epi32(z0, lo, _mm512_set1_epi32(rd32(x->qs + 4 * g)));
        z1 = _mm512_dpbusd_epi32(z1, hi, _mm512_set1_epi32(rd32(x->qs + 16 + 4 * g)));
    }
    return _mm512_add_epi32(z0, z1);
}

/* The 8 lanes of each activation row combined pairwise, as in the reference, and the
 * group's first `rows` results stored. */
INLINE void store_lanes(__m512 lane[LANES][TILE], int rows, const int n_a, float *y, size_t y_stride) {
    const __mmask16 keep = (__mmask16)((1u << rows) - 1u);
    TOY_UNROLL8
    for (int j = 0; j < n_a; j++) {
        __m512 l0 = _mm512_add_ps(lane[0][j], lane[4][j]), l1 = _mm512_add_ps(lane[1][j], lane[5][j]);
        __m512 l2 = _mm512_add_ps(lane[2][j], lane[6][j]), l3 = _mm512_add_ps(lane[3][j], lane[7][j]);
        l0 = _mm512_add_ps(l0, l2);
        l1 = _mm512_add_ps(l1, l3);
        _mm512_mask_storeu_ps(y + (size_t)j * y_stride, keep, _mm512_add_ps(l0, l1));
    }
}

/* Block b of a group of Q8_0, Q4_0 or IQ4_NL (its bytes at blk) times n_a activation rows,
 * into acc. nl: IQ4_NL, Q4_0's layout whose nibbles become levels + 128 (vpshufb), as many
 * bytes as Q8_0's and summed as those, from the same start. */
INLINE void q8_block(const uint8_t *blk, int64_t b, const uint8_t *a, size_t a_stride, const int n_a, const bool q4,
                     const bool nl, __m512 acc[TILE]) {
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    __m512i w[8];
    if (q4) {
        TOY_UNROLL8
        for (int k = 0; k < 4; k++) w[k] = _mm512_loadu_si512(blk + 32 + 64 * k);
    } else if (nl) {
        const __m512i table = iq4xs_table(), low = _mm512_set1_epi8(0x0f);
        TOY_UNROLL8
        for (int k = 0; k < 4; k++) {
            const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * k);
            w[k] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, low));
            w[4 + k] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
        }
    } else {
        TOY_UNROLL8
        for (int k = 0; k < 8; k++) w[k] = _mm512_loadu_si512(blk + 32 + 64 * k);
    }
    TOY_UNROLL8
    for (int j = 0; j < n_a; j++) {
        const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
        const __m512i sumi = block_sums(w, x, q4);
        const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(x->d));
        acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
    }
}

/* Q4_1: Q4_0's sums with no start (the nibbles are the quants), then the reference's
 * (w.d * a.d) * (float)sumi + w.m * a.s. */
INLINE void q41_block(const uint8_t *blk, int64_t b, const uint8_t *a, size_t a_stride, const int n_a,
                      const __m512i low, __m512 acc[TILE]) {
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    const __m512 wm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
    __m512i lo[4], hi[4];
    TOY_UNROLL8
    for (int g = 0; g < 4; g++) {
        const __m512i v = _mm512_loadu_si512(blk + 64 + 64 * g);
        lo[g] = _mm512_and_si512(v, low);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    }
    TOY_UNROLL8
    for (int j = 0; j < n_a; j++) {
        const block_q8_1 *x = (const block_q8_1 *)(a + (size_t)j * a_stride) + b;
        __m512i z0 = _mm512_setzero_si512(), z1 = _mm512_setzero_si512();
        TOY_UNROLL8
        for (int g = 0; g < 4; g++) {
            z0 = _mm512_dpbusd_epi32(z0, lo[g], _mm512_set1_epi32(rd32(x->qs + 4 * g)));
            z1 = _mm512_dpbusd_epi32(z1, hi[g], _mm512_set1_epi32(rd32(x->qs + 16 + 4 * g)));
        }
        const __m512 d = _mm512_mul_ps(wd, half_lanes(x->d));
        const __m512 scaled = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(z0, z1)));
        const __m512 offset = _mm512_mul_ps(wm, half_lanes(x->s));
        acc[j] = _mm512_add_ps(acc[j], _mm512_add_ps(scaled, offset));
    }
}

/* Q4_K reads each block with many instructions, so decode from DRAM falls well short of
 * the bandwidth unless blocks are fetched ahead; four blocks ahead (9 KiB) came closest
 * to it (Q6_K likewise; the measurements are in docs/performance.md and the history). */
#define PREFETCH (4 * Q4K_BLOCK_BYTES)

/* Q4_K, or Q5_K (q5): its nibbles plus the fifth bits (q5k_high), 0..31, the same sums. */
INLINE void q4k_block(const uint8_t *blk, int64_t b, const uint8_t *a, size_t a_stride, const int n_a, const bool q5,
                      __m512 acc[TILE]) {
    const __m512i s0 = _mm512_loadu_si512(blk + 64);
    const __m512i s2 = _mm512_loadu_si512(blk + 192);
    for (int c = 0; c < 256; c += 64) _mm_prefetch((const char *)blk + c + PREFETCH, _MM_HINT_T0);
    if (q5)
        for (int c = Q5K_HIGH_BITS; c < Q5K_BLOCK_BYTES; c += 64)
            _mm_prefetch((const char *)blk + c + PREFETCH, _MM_HINT_T0);
    __m512i isum[TILE];
    TOY_UNROLL8
    for (int t = 0; t < n_a; t++) isum[t] = _mm512_setzero_si512();
    if (q5 && n_a <= 2) {
        /* Q5_K decode: sub-blocks 2p (low nibbles) and 2p + 1 (high) from one load
         * of their bytes and fifth bits, shifted by constants (no slower than by
         * sub-blocks; Q4_K gained nothing measurable) */
        TOY_UNROLL8
        for (int p = 0; p < 4; p++) {
            const __m512i sc0 = q4k_field(s0, s0, s2, 2 * p, false);
            const __m512i sc1 = q4k_field(s0, s0, s2, 2 * p + 1, false);
            const uint8_t *q = blk + 256 + 512 * p;
            __m512i z[TILE][4];
            TOY_UNROLL8
            for (int t = 0; t < n_a; t++) z[t][0] = z[t][1] = z[t][2] = z[t][3] = _mm512_setzero_si512();
            TOY_UNROLL8
            for (int k = 0; k < 8; k++) {
                const __m512i v = _mm512_loadu_si512(q + 64 * k);
                _mm_prefetch((const char *)q + 64 * k + PREFETCH, _MM_HINT_T0);
                __m512i w0 = _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
                __m512i w1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f));
                if (q5) {
                    const __m512i h = _mm512_loadu_si512(blk + Q5K_HIGH_BITS + 64 * k);
                    w0 = _mm512_or_si512(w0, q5k_high(h, 2 * p));
                    w1 = _mm512_or_si512(w1, q5k_high(h, 2 * p + 1));
                }
                TOY_UNROLL8
                for (int t = 0; t < n_a; t++) {
                    const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
                    const int8_t *qs = x->qs + 64 * p + 4 * k;
                    /* two chains per sub-block, k even and odd */
                    z[t][k % 2] = _mm512_dpbusd_epi32(z[t][k % 2], w0, _mm512_set1_epi32(rd32(qs)));
                    z[t][2 + k % 2] = _mm512_dpbusd_epi32(z[t][2 + k % 2], w1, _mm512_set1_epi32(rd32(qs + 32)));
                }
            }
            TOY_UNROLL8
            for (int t = 0; t < n_a; t++) {
                const __m512i v0 = _mm512_mullo_epi32(_mm512_add_epi32(z[t][0], z[t][1]), sc0);
                const __m512i v1 = _mm512_mullo_epi32(_mm512_add_epi32(z[t][2], z[t][3]), sc1);
                isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(v0, v1));
            }
        }
    } else
    /* not unrolled (shifts by counts): a copy per sub-block, for each of the
     * eight tile sizes, made this file slow to compile */
    for (int j = 0; j < 8; j++) {
        const __m512i sc = q4k_field(s0, s0, s2, j, false);
        const uint8_t *q = blk + 256 + 512 * (j / 2);
        const __m128i nibble = _mm_cvtsi32_si128(4 * (j % 2));
        __m512i w[8];
        TOY_UNROLL8
        for (int k = 0; k < 8; k++) {
            const __m512i v = _mm512_loadu_si512(q + 64 * k);
            if (j % 2) _mm_prefetch((const char *)q + 64 * k + PREFETCH, _MM_HINT_T0);
            w[k] = _mm512_and_si512(_mm512_srl_epi16(v, nibble), _mm512_set1_epi8(0x0f));
            if (q5) w[k] = _mm512_or_si512(w[k], q5k_high(_mm512_loadu_si512(blk + Q5K_HIGH_BITS + 64 * k), j));
        }
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) {
            const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
            const __m512i z = dot32(_mm512_setzero_si512(), w, x->qs + 32 * j);
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(z, sc));
        }
    }
    __m512i mp[4];
    q4k_min_pairs(blk, mp);
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    const __m512 wdm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
    TOY_UNROLL8
    for (int t = 0; t < n_a; t++) {
        const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
        acc[t] = _mm512_add_ps(acc[t], q4k_row_value(wd, wdm, mp, x, isum[t]));
    }
}

#define Q6K_PREFETCH (4 * Q6K_BLOCK_BYTES)

INLINE void q6k_block(const uint8_t *blk, int64_t b, const uint8_t *a, size_t a_stride, const int n_a,
                      __m512 acc[TILE]) {
    __m512i isum[TILE], corr[TILE];
    TOY_UNROLL8
    for (int t = 0; t < n_a; t++) isum[t] = corr[t] = _mm512_setzero_si512();
    for (int c = 0; c < 320; c += 64) _mm_prefetch((const char *)blk + c + Q6K_PREFETCH, _MM_HINT_T0);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = blk + 288 + 1024 * h, *qh = blk + 2336 + 512 * h;
        for (int c = 0; c < 1024; c += 64) _mm_prefetch((const char *)ql + c + Q6K_PREFETCH, _MM_HINT_T0);
        for (int c = 0; c < 512; c += 64) _mm_prefetch((const char *)qh + c + Q6K_PREFETCH, _MM_HINT_T0);
        /* not unrolled (the shifts take counts): eight copies of the body, for
         * each of the eight tile sizes, made this file slow to compile */
        for (int m = 0; m < 4; m++) {
            const __m128i lo_shift = q6k_low_shift(m), hi_shift = q6k_high_shift(m);
            for (int kk = 0; kk < 2; kk++) {
                const int g = 8 * h + 2 * m + kk;
                const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * g)));
                __m512i u[4];
                q6k_sub_block(ql, qh, m, kk, lo_shift, hi_shift, u);
                TOY_UNROLL8
                for (int t = 0; t < n_a; t++) {
                    const block_q8_K *x = (const block_q8_K *)(a + (size_t)t * a_stride) + b;
                    const int8_t *qs = x->qs + 128 * h + 32 * m + 16 * kk;
                    __m512i z0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], _mm512_set1_epi32(rd32(qs)));
                    __m512i z1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[1], _mm512_set1_epi32(rd32(qs + 4)));
                    z0 = _mm512_dpbusd_epi32(z0, u[2], _mm512_set1_epi32(rd32(qs + 8)));
                    z1 = _mm512_dpbusd_epi32(z1, u[3], _mm512_set1_epi32(rd32(qs + 12)));
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(z0, z1), sc));
                }
            }
        }
    }
    /* the -32 of every weight: 32 * sum over g of scale * bsum, by pairs of g */
    TOY_UNROLL8
    for (int p = 0; p < 8; p++) {
        const __m512i pair = q6k_scale_pair(blk, p);
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) {
            const block_q8_K *x = (const block_q8_K *)(a + (size_t)t * a_stride) + b;
            corr[t] = _mm512_dpwssd_epi32(corr[t], pair, _mm512_set1_epi32(rd32(x->bsums + 2 * p)));
        }
    }
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    TOY_UNROLL8
    for (int t = 0; t < n_a; t++) {
        const block_q8_K *x = (const block_q8_K *)(a + (size_t)t * a_stride) + b;
        const __m512i sumi = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(corr[t], 5));
        const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(x->d));
        acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
    }
}

/* IQ4_XS: per sub-block, the nibbles looked up as level + 128 (vpshufb), the exact sum
 * times the signed scale; less 128 * sum of scale * sub-block sum of the activation. */
INLINE void iq4xs_block(const uint8_t *blk, int64_t b, const uint8_t *a, size_t a_stride, const int n_a,
                        const __m512i table, __m512 acc[TILE]) {
    for (int c = 0; c < IQ4XS_BLOCK_BYTES; c += 64)
        _mm_prefetch((const char *)blk + c + 2 * IQ4XS_BLOCK_BYTES, _MM_HINT_T0);
    const __m512i sl = _mm512_loadu_si512(blk + 64);
    const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(blk + 32)));
    __m512i isum[TILE];
    TOY_UNROLL8
    for (int t = 0; t < n_a; t++) isum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; j++) {
        const __m512i sc = iq4xs_scale(sl, sh, j);
        __m512i w[8];
        iq4xs_sub_block(blk, j, table, w);
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) {
            const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
            const __m512i z = dot32(_mm512_setzero_si512(), w, x->qs + 32 * j);
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(z, sc));
        }
    }
    __m512i sc_pair[4];
    iq4xs_scale_pairs(blk, sc_pair);
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    TOY_UNROLL8
    for (int t = 0; t < n_a; t++) {
        const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
        __m512i corr = _mm512_setzero_si512();
        TOY_UNROLL8
        for (int p = 0; p < 4; p++)
            corr = _mm512_dpwssd_epi32(corr, sc_pair[p], _mm512_set1_epi32(rd32(x->msum + 2 * p)));
        const __m512i sumi = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(corr, 7));
        const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(x->d));
        acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
    }
}

/* Block b of a group of the type (its bytes at blk) times n_a activation rows, into acc:
 * kind and n_a are constants in each caller, so the accumulators live in registers. */
INLINE void kind_block(const kind k, const uint8_t *blk, int64_t b, const uint8_t *a, size_t a_stride, const int n_a,
                       __m512 acc[TILE]) {
    switch (k) {
    case TOY_TYPE_Q8_0: q8_block(blk, b, a, a_stride, n_a, false, false, acc); break;
    case TOY_TYPE_Q4_0: q8_block(blk, b, a, a_stride, n_a, true, false, acc); break;
    case TOY_TYPE_IQ4_NL: q8_block(blk, b, a, a_stride, n_a, false, true, acc); break;
    case TOY_TYPE_Q4_K: q4k_block(blk, b, a, a_stride, n_a, false, acc); break;
    case TOY_TYPE_Q5_K: q4k_block(blk, b, a, a_stride, n_a, true, acc); break;
    case TOY_TYPE_Q6_K: q6k_block(blk, b, a, a_stride, n_a, acc); break;
    case TOY_TYPE_IQ4_XS: iq4xs_block(blk, b, a, a_stride, n_a, iq4xs_table(), acc); break;
    case TOY_TYPE_Q4_1: q41_block(blk, b, a, a_stride, n_a, _mm512_set1_epi8(0x0f), acc); break;
    }
}

/* n_groups groups (rows of the last one: rows <= 16) times n_a <= TILE activation rows:
 * lane l's blocks l, l + 8, ... in the packed order, then the lanes combined. Several
 * groups go side by side in decode (one activation row) where ty_packed_decode_streams()
 * is 4, their blocks taken in turn: n_groups streams of weights, which the hardware
 * prefetchers fetch side by side (packed.h says where that pays), each group's
 * operations the same as alone. kind, n_groups and n_a are
 * constants in each caller, so the accumulators live in registers. */
INLINE void groups_tile(const kind k, int64_t nb, const uint8_t *group, size_t group_bytes, const int n_groups,
                        int rows, const uint8_t *a, size_t a_stride, const int n_a, float *y, size_t y_stride) {
    const size_t block_bytes = ty_packed_block_bytes(k);
    __m512 lane[DECODE_STREAMS][LANES][TILE];
    const uint8_t *blk = group;
    for (int l = 0; l < LANES; l++) {
        __m512 acc[DECODE_STREAMS][TILE];
        TOY_UNROLL8
        for (int g = 0; g < n_groups; g++)
            TOY_UNROLL8
            for (int j = 0; j < n_a; j++) acc[g][j] = _mm512_setzero_ps();
        for (int64_t b = l; b < nb; b += LANES, blk += block_bytes)
            TOY_UNROLL8
            for (int g = 0; g < n_groups; g++)
                kind_block(k, blk + (size_t)g * group_bytes, b, a, a_stride, n_a, acc[g]);
        TOY_UNROLL8
        for (int g = 0; g < n_groups; g++)
            TOY_UNROLL8
            for (int j = 0; j < n_a; j++) lane[g][l][j] = acc[g][j];
    }
    TOY_UNROLL8
    for (int g = 0; g < n_groups; g++) store_lanes(lane[g], g + 1 < n_groups ? 16 : rows, n_a, y + 16 * g, y_stride);
}

/* Group outer, activation tiles inner: a group's weights stay in L1 for all rows. */
INLINE void packed_gemm(const kind k, int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride,
                        int64_t n_a, float *y, size_t y_stride) {
    const int64_t nb = n_cols / ty_packed_block_cols(k);
    const uint8_t *group = w, *act = a;
    int64_t r0 = 0;
    if (n_a == 1 && ty_packed_decode_streams() == DECODE_STREAMS) {
        const size_t group_bytes = (size_t)nb * ty_packed_block_bytes(k);
        for (; r0 + 16 * DECODE_STREAMS <= n_rows; r0 += 16 * DECODE_STREAMS, group += DECODE_STREAMS * group_bytes)
            groups_tile(k, nb, group, group_bytes, DECODE_STREAMS, 16, act, a_stride, 1, y + r0, y_stride);
    }
    for (; r0 < n_rows; r0 += 16, group += (size_t)nb * ty_packed_block_bytes(k)) {
        const int rows = n_rows - r0 < 16 ? (int)(n_rows - r0) : 16;
        for (int64_t j0 = 0; j0 < n_a; j0 += TILE) {
            const uint8_t *aj = act + (size_t)j0 * a_stride;
            float *yj = y + (size_t)j0 * y_stride + (size_t)r0;
            switch (n_a - j0 < TILE ? (int)(n_a - j0) : TILE) {
            case 1: groups_tile(k, nb, group, 0, 1, rows, aj, a_stride, 1, yj, y_stride); break;
            case 2: groups_tile(k, nb, group, 0, 1, rows, aj, a_stride, 2, yj, y_stride); break;
            case 3: groups_tile(k, nb, group, 0, 1, rows, aj, a_stride, 3, yj, y_stride); break;
            case 4: groups_tile(k, nb, group, 0, 1, rows, aj, a_stride, 4, yj, y_stride); break;
            case 5: groups_tile(k, nb, group, 0, 1, rows, aj, a_stride, 5, yj, y_stride); break;
            case 6: groups_tile(k, nb, group, 0, 1, rows, aj, a_stride, 6, yj, y_stride); break;
            case 7: groups_tile(k, nb, group, 0, 1, rows, aj, a_stride, 7, yj, y_stride); break;
            default: groups_tile(k, nb, group, 0, 1, rows, aj, a_stride, 8, yj, y_stride); break;
            }
        }
    }
}

NO_UBSAN static void gemm_q8_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) { packed_gemm(TOY_TYPE_Q8_0, n_cols, w, n_rows, a, as, n_a, y, ys); }
NO_UBSAN static void gemm_q4_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) { packed_gemm(TOY_TYPE_Q4_0, n_cols, w, n_rows, a, as, n_a, y, ys); }
NO_UBSAN static void gemm_q4_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) { packed_gemm(TOY_TYPE_Q4_K, n_cols, w, n_rows, a, as, n_a, y, ys); }
NO_UBSAN static void gemm_q5_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) { packed_gemm(TOY_TYPE_Q5_K, n_cols, w, n_rows, a, as, n_a, y, ys); }
NO_UBSAN static void gemm_q6_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) { packed_gemm(TOY_TYPE_Q6_K, n_cols, w, n_rows, a, as, n_a, y, ys); }
NO_UBSAN static void gemm_iq4_xsx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as,
                                  int64_t n_a, float *y, size_t ys) {
    packed_gemm(TOY_TYPE_IQ4_XS, n_cols, w, n_rows, a, as, n_a, y, ys);
}
NO_UBSAN static void gemm_q4_1x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) { packed_gemm(TOY_TYPE_Q4_1, n_cols, w, n_rows, a, as, n_a, y, ys); }
NO_UBSAN static void gemm_iq4_nlx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as,
                                  int64_t n_a, float *y, size_t ys) {
    packed_gemm(TOY_TYPE_IQ4_NL, n_cols, w, n_rows, a, as, n_a, y, ys);
}

static const ty_packed_kernel kernels[] = {
    TY_PACKED(Q4_0, gemm_q4_0x),
    TY_PACKED(Q8_0, gemm_q8_0x),
    TY_PACKED(Q4_K, gemm_q4_Kx),
    TY_PACKED(Q5_K, gemm_q5_Kx),
    TY_PACKED(Q6_K, gemm_q6_Kx),
    TY_PACKED(IQ4_NL, gemm_iq4_nlx),
    TY_PACKED(Q4_1, gemm_q4_1x),
    TY_PACKED(IQ4_XS, gemm_iq4_xsx),
};

const ty_packed_kernel *ty_packed_avx512(int type) {
    return ty_packed_find(kernels, sizeof kernels / sizeof kernels[0], type);
}

TOY_TARGET_END
#endif /* __x86_64__ */
