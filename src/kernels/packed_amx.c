/* packed_amx.c — AMX products of packed Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS weights (packed.h) with 16
 * activation rows at a time, bit-identical to the scalar reference (packed.c).
 *
 * The packed layouts are already what the tile instructions read. A packed Q8_0 block's
 * weight bytes, q[k][r][i] (four bytes of each of 16 rows per 64-byte row, weight + 128),
 * are the B operand of tdpbsud as they lie: 8 rows of 64 bytes, K = 32, N = 16. The A
 * operand is block b of 16 activation rows, their 32 quants loaded straight from the
 * activation layout with its row stride. One tdpbsud gives the 16 x 16 exact sums of
 * (w + 128) * a; the activation's start (-128 * sum a) makes them sum w * a, as in the
 * VNNI kernels. Q4_0, Q4_1 and Q4_K nibbles are first split into bytes (a mask and a shift,
 * once per block for all 16 activation rows) in a scratch B tile; Q4_K's 8 sub-blocks
 * of a super-block each give a C tile, multiplied by their six-bit scales in 32-bit
 * lanes, and the mins meet the activation's sub-block sums through vpdpwssd (Q5_K: the
 * same, each byte with its fifth bit added before the product); Q6_K's 16
 * sub-blocks of 16 are products with K = 16 on their six-bit values (weight + 32);
 * IQ4_XS's 8 sub-blocks of 32 are products on their levels + 128 (looked up once per
 * block), each multiplied by its signed scale, the 128 taken back through vpdpwssd.
 *
 * The integer sums are exact whatever computes them, so from there on each block's
 * float epilogue, d = w.d * a.d and v = d * (float)sumi, is the reference's, on 16 weight
 * rows at once in a zmm per activation row; v goes into the accumulator of the block's
 * lane (b % 8), and the 8 lanes are combined pairwise (packed.h, REDUCTION SHAPE).
 *
 * Tiles are configured per call (the configuration is per thread) and released at the
 * end. Fewer than 16 activation rows (decode, the last rows of a prompt) go to the
 * AVX-512 VNNI kernels, which compute the same bits. Compiled with AVX-512 and AMX
 * tile/int8 enabled; called only after toy_cpu_isa() found AMX and Linux granted the
 * tile state (kernels.c). tests/amx_emulated.c compiles this file over a C model of the
 * tile instructions, so that test_packed checks it on every AVX-512 machine. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "packed.h"

#if !defined(__x86_64__)
const toy_packed_kernel *toy_packed_amx(int type) {
    (void)type;
    return NULL;
}
#else

#include "packed_avx512.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#ifndef TOY_AMX_EMULATE
#define AMX_ENTRY toy_packed_amx
#define tile_config(cfg) _tile_loadconfig(cfg)
#define tile_release() _tile_release()
#define tile_load(t, p, stride) _tile_loadd(t, p, stride)
#define tile_store(t, p, stride) _tile_stored(t, p, stride)
#define tile_zero(t) _tile_zero(t)
#define tile_dpbsud(c, a, b) _tile_dpbsud(c, a, b)
#endif

#define CHUNK 16 /* activation rows per pass: the rows of an A and a C tile */

/* Two sets of tiles, so that one block's product runs while the other's epilogue does. */
#define C0 0 /* 16 activation rows x 16 weight rows of int32 */
#define A0 1 /* 16 activation rows x 32 quants */
#define B0 2 /* 8 rows of 16 weight rows x 4 quants (the packed layout) */
#define C1 3
#define A1 4
#define B1 5

/* The LDTILECFG operand (palette 1): bytes per row and rows of each tile. */
typedef struct {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config_t;

/* Q8_0, Q4_0, Q4_K: K = 32 quants a product */
static const tile_config_t tile_shapes = {
    .palette_id = 1,
    .colsb = {[C0] = 64, [A0] = 32, [B0] = 64, [C1] = 64, [A1] = 32, [B1] = 64},
    .rows = {[C0] = 16, [A0] = 16, [B0] = 8, [C1] = 16, [A1] = 16, [B1] = 8},
};

/* Q6_K: K = 16, its sub-blocks */
static const tile_config_t tile_shapes_q6_K = {
    .palette_id = 1,
    .colsb = {[C0] = 64, [A0] = 16, [B0] = 64, [C1] = 64, [A1] = 16, [B1] = 64},
    .rows = {[C0] = 16, [A0] = 16, [B0] = 4, [C1] = 16, [A1] = 16, [B1] = 4},
};

_Static_assert(sizeof(tile_config_t) == 64, "LDTILECFG takes 64 bytes");

typedef struct {
    int32_t v[CHUNK][16] __attribute__((aligned(64)));
} chunk_sums;

typedef struct {
    uint8_t q[2][8][64] __attribute__((aligned(64))); /* low nibbles, high nibbles */
} unpacked_nibbles;

/* n_vec zmm of nibbles at q to bytes: the low nibbles of vector k to lo + 64 k, the high
 * ones to hi + 64 k (64-byte aligned). */
INLINE void split_nibbles(const uint8_t *q, int n_vec, uint8_t *lo, uint8_t *hi) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    UNROLLED
    for (int k = 0; k < n_vec; k++) {
        const __m512i v = _mm512_loadu_si512(q + 64 * k);
        _mm512_store_si512(lo + 64 * k, _mm512_and_si512(v, low));
        _mm512_store_si512(hi + 64 * k, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
    }
}

/* IQ4_NL: split_nibbles with each nibble looked up as its level + 128 */
INLINE void split_levels(const uint8_t *q, uint8_t *lo, uint8_t *hi) {
    const __m512i low = _mm512_set1_epi8(0x0f), table = iq4xs_table();
    UNROLLED
    for (int k = 0; k < 4; k++) {
        const __m512i v = _mm512_loadu_si512(q + 64 * k);
        _mm512_store_si512(lo + 64 * k, _mm512_shuffle_epi8(table, _mm512_and_si512(v, low)));
        _mm512_store_si512(hi + 64 * k, _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), low)));
    }
}

/* Q5_K: split_nibbles of sub-blocks 2p (low nibbles) and 2p + 1 (high) with their fifth
 * bits from the 8 qh vectors at qh. */
INLINE void split_nibbles_q5(const uint8_t *q, const uint8_t *qh, int p, uint8_t *lo, uint8_t *hi) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    UNROLLED
    for (int k = 0; k < 8; k++) {
        const __m512i v = _mm512_loadu_si512(q + 64 * k), h = _mm512_loadu_si512(qh + 64 * k);
        _mm512_store_si512(lo + 64 * k, _mm512_or_si512(_mm512_and_si512(v, low), q5k_high(h, 2 * p)));
        _mm512_store_si512(hi + 64 * k, _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), low),
                                                        q5k_high(h, 2 * p + 1)));
    }
}

/* Two products side by side: C0 = A0 x B0 and C1 = A1 x B1, the A tiles at a0 and a1
 * (rows a_stride apart), the B tiles at b0 and b1 (64 bytes a row), stored to s[0], s[1]. */
INLINE void two_products(const uint8_t *a0, const uint8_t *a1, size_t a_stride, const void *b0, const void *b1,
                         chunk_sums s[2]) {
    tile_load(A0, a0, a_stride);
    tile_load(A1, a1, a_stride);
    tile_load(B0, b0, 64);
    tile_load(B1, b1, 64);
    tile_zero(C0);
    tile_zero(C1);
    tile_dpbsud(C0, A0, B0);
    tile_dpbsud(C1, A1, B1);
    tile_store(C0, s[0].v, 64);
    tile_store(C1, s[1].v, 64);
}

/* The 8 lanes of each of the 16 activation rows combined pairwise, as in the reference,
 * and the group's first `rows` results stored. */
INLINE void store_chunk(__m512 lane[LANES][CHUNK], int rows, float *y, size_t y_stride) {
    const __mmask16 keep = (__mmask16)((1u << rows) - 1u);
    for (int t = 0; t < CHUNK; t++) {
        __m512 l0 = _mm512_add_ps(lane[0][t], lane[4][t]), l1 = _mm512_add_ps(lane[1][t], lane[5][t]);
        __m512 l2 = _mm512_add_ps(lane[2][t], lane[6][t]), l3 = _mm512_add_ps(lane[3][t], lane[7][t]);
        l0 = _mm512_add_ps(l0, l2);
        l1 = _mm512_add_ps(l1, l3);
        _mm512_mask_storeu_ps(y + (size_t)t * y_stride, keep, _mm512_add_ps(l0, l1));
    }
}

/* The weights of a block against Q8_0 activations: Q8_0's bytes, Q4_0's nibbles, or
 * IQ4_NL's nibbles looked up as levels + 128 (whose start is Q8_0's). */
enum { FORM_Q8_0, FORM_Q4_0, FORM_IQ4_NL };

/* One Q8_0 / Q4_0 / IQ4_NL block's exact sums into s, on tiles (c, a, b): c and b name
 * tiles, so these are macros (the tile instructions take them as immediates). */
#define Q8_BLOCK_SUMS(c, at, bt, blk, b, form, u, s)                                                  \
    do {                                                                                          \
        tile_load(at, act + (size_t)(b) * sizeof(toy_act_q8_0x) + offsetof(toy_act_q8_0x, qs), a_stride); \
        if (form != FORM_Q8_0) {                                                                  \
            /* B rows 0-3: the low nibbles (weights 0-15), rows 4-7 the high ones */              \
            if (form == FORM_IQ4_NL) split_levels((blk) + 32, (u)->q[0][0], (u)->q[0][4]);        \
            else split_nibbles((blk) + 32, 4, (u)->q[0][0], (u)->q[0][4]);                        \
            tile_load(bt, (u)->q[0], 64);                                                         \
        } else {                                                                                  \
            tile_load(bt, (blk) + 32, 64);                                                        \
        }                                                                                         \
        tile_zero(c);                                                                             \
        tile_dpbsud(c, at, bt);                                                                   \
        tile_store(c, (s)->v, 64);                                                                \
    } while (0)

/* The epilogue of block b: acc[t] += (w.d * a.d) * (float)(sums + start). */
INLINE void q8_block_epilogue(const uint8_t *blk, const uint8_t *act, size_t a_stride, int64_t b, const int form,
                              const chunk_sums *s, __m512 acc[CHUNK]) {
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    UNROLLED
    for (int t = 0; t < CHUNK; t++) {
        const toy_act_q8_0x *x = (const toy_act_q8_0x *)(act + (size_t)t * a_stride) + b;
        /* Q4_0: the nibbles are weights + 8, the start -8 * sum a (exact: -128 * sum / 16) */
        const __m512i start = _mm512_set1_epi32(form == FORM_Q4_0 ? x->start / 16 : x->start);
        const __m512i sumi = _mm512_add_epi32(_mm512_load_si512(s->v[t]), start);
        const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(x->d));
        acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
    }
}

/* Rows [0, rows) of one Q8_0 / Q4_0 / IQ4_NL group times the 16 activation rows at act. */
INLINE void q8_chunk(int64_t nb, const uint8_t *group, int rows, const uint8_t *act, size_t a_stride, const int form,
                     float *y, size_t y_stride) {
    const size_t block_bytes = form == FORM_Q8_0 ? BLOCK_BYTES : Q4_BLOCK_BYTES;
    __m512 lane[LANES][CHUNK];
    chunk_sums s[2];
    unpacked_nibbles u[2];
    const uint8_t *blk = group;
    for (int l = 0; l < LANES; l++) {
        __m512 acc[CHUNK];
        UNROLLED
        for (int t = 0; t < CHUNK; t++) acc[t] = _mm512_setzero_ps();
        int64_t b = l;
        /* the lane's blocks b and b + 8 lie side by side */
        for (; b + LANES < nb; b += 2 * LANES, blk += 2 * block_bytes) {
            Q8_BLOCK_SUMS(C0, A0, B0, blk, b, form, &u[0], &s[0]);
            Q8_BLOCK_SUMS(C1, A1, B1, blk + block_bytes, b + LANES, form, &u[1], &s[1]);
            q8_block_epilogue(blk, act, a_stride, b, form, &s[0], acc);
            q8_block_epilogue(blk + block_bytes, act, a_stride, b + LANES, form, &s[1], acc);
        }
        if (b < nb) {
            Q8_BLOCK_SUMS(C0, A0, B0, blk, b, form, &u[0], &s[0]);
            q8_block_epilogue(blk, act, a_stride, b, form, &s[0], acc);
            blk += block_bytes;
        }
        UNROLLED
        for (int t = 0; t < CHUNK; t++) lane[l][t] = acc[t];
    }
    store_chunk(lane, rows, y, y_stride);
}

/* Rows [0, rows) of one Q4_1 group times the 16 activation rows (plain Q8_1) at act: the
 * nibbles are the quants, so the sums need no start; then the reference's
 * (w.d * a.d) * (float)sumi + w.m * a.s. */
INLINE void q41_chunk(int64_t nb, const uint8_t *group, int rows, const uint8_t *act, size_t a_stride, float *y,
                      size_t y_stride) {
    __m512 lane[LANES][CHUNK];
    chunk_sums s;
    unpacked_nibbles u;
    const uint8_t *blk = group;
    for (int l = 0; l < LANES; l++) {
        UNROLLED
        for (int t = 0; t < CHUNK; t++) lane[l][t] = _mm512_setzero_ps();
        for (int64_t b = l; b < nb; b += LANES, blk += Q41_BLOCK_BYTES) {
            tile_load(A0, act + (size_t)b * sizeof(block_q8_1) + offsetof(block_q8_1, qs), a_stride);
            split_nibbles(blk + 64, 4, u.q[0][0], u.q[0][4]); /* B rows 0-3 weights 0-15, 4-7 the rest */
            tile_load(B0, u.q[0], 64);
            tile_zero(C0);
            tile_dpbsud(C0, A0, B0);
            tile_store(C0, s.v, 64);
            const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            const __m512 wm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
            UNROLLED
            for (int t = 0; t < CHUNK; t++) {
                const block_q8_1 *x = (const block_q8_1 *)(act + (size_t)t * a_stride) + b;
                const __m512 d = _mm512_mul_ps(wd, half_lanes(x->d));
                const __m512 scaled = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_load_si512(s.v[t])));
                const __m512 offset = _mm512_mul_ps(wm, half_lanes(x->s));
                lane[l][t] = _mm512_add_ps(lane[l][t], _mm512_add_ps(scaled, offset));
            }
        }
    }
    store_chunk(lane, rows, y, y_stride);
}

/* Rows [0, rows) of one Q4_K (q5: Q5_K) group times the 16 activation rows at act. Per
 * super-block and activation row: isum = sum over sub-blocks j of scale_j * (exact sum
 * j), summs = sum of min_j * msum_j, then the reference's d * isum - dmin * summs. */
INLINE void q4k_chunk(int64_t nb, const uint8_t *group, int rows, const uint8_t *act, size_t a_stride, const bool q5,
                      float *y, size_t y_stride) {
    const size_t block_bytes = q5 ? Q5K_BLOCK_BYTES : Q4K_BLOCK_BYTES;
    __m512 lane[LANES][CHUNK];
    chunk_sums s[2];
    unpacked_nibbles u;
    const uint8_t *blk = group;
    const size_t qs = offsetof(toy_act_q8_Kx, qs);
    for (int l = 0; l < LANES; l++) {
        UNROLLED
        for (int t = 0; t < CHUNK; t++) lane[l][t] = _mm512_setzero_ps();
        for (int64_t b = l; b < nb; b += LANES, blk += block_bytes) {
            const uint8_t *xb = act + (size_t)b * sizeof(toy_act_q8_Kx);
            const __m512i s0 = _mm512_loadu_si512(blk + 64), s2 = _mm512_loadu_si512(blk + 192);
            __m512i isum[CHUNK];
            UNROLLED
            for (int t = 0; t < CHUNK; t++) isum[t] = _mm512_setzero_si512();
            /* sub-blocks 2p (low nibbles) and 2p + 1 (high) share their bytes */
            for (int p = 0; p < 4; p++) {
                if (q5) split_nibbles_q5(blk + 256 + 512 * p, blk + Q5K_HIGH_BITS, p, u.q[0][0], u.q[1][0]);
                else split_nibbles(blk + 256 + 512 * p, 8, u.q[0][0], u.q[1][0]);
                two_products(xb + qs + 64 * p, xb + qs + 64 * p + 32, a_stride, u.q[0], u.q[1], s);
                const __m512i sc0 = q4k_field(s0, s0, s2, 2 * p, false);
                const __m512i sc1 = q4k_field(s0, s0, s2, 2 * p + 1, false);
                UNROLLED
                for (int t = 0; t < CHUNK; t++) {
                    const __m512i v0 = _mm512_mullo_epi32(_mm512_load_si512(s[0].v[t]), sc0);
                    const __m512i v1 = _mm512_mullo_epi32(_mm512_load_si512(s[1].v[t]), sc1);
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(v0, v1));
                }
            }
            __m512i mp[4];
            q4k_min_pairs(blk, mp);
            const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            const __m512 wdm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
            UNROLLED
            for (int t = 0; t < CHUNK; t++) {
                const toy_act_q8_Kx *x = (const toy_act_q8_Kx *)(xb + (size_t)t * a_stride);
                __m512i summs = _mm512_setzero_si512();
                UNROLLED
                for (int p = 0; p < 4; p++) summs = _mm512_dpwssd_epi32(summs, mp[p], _mm512_set1_epi32(rd32(x->msum + 2 * p)));
                const __m512 ad = _mm512_set1_ps(x->d);
                const __m512 d = _mm512_mul_ps(wd, ad), dm = _mm512_mul_ps(wdm, ad);
                const __m512 scaled = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[t]));
                const __m512 mins = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(summs));
                lane[l][t] = _mm512_add_ps(lane[l][t], _mm512_sub_ps(scaled, mins));
            }
        }
    }
    store_chunk(lane, rows, y, y_stride);
}

/* Rows [0, rows) of one Q6_K group times the 16 activation rows (plain Q8_K) at act.
 * Each 16-weight sub-block g is a product with K = 16: its six-bit values u = weight +
 * 32 (the VNNI kernel's) in a scratch B tile; isum = sum over g of scale_g * (exact sum
 * g), less the 32 * sum of scale_g * bsum_g, then the reference's d * isum. */
INLINE void q6k_chunk(int64_t nb, const uint8_t *group, int rows, const uint8_t *act, size_t a_stride, float *y,
                      size_t y_stride) {
    __m512 lane[LANES][CHUNK];
    chunk_sums s[2];
    struct {
        uint8_t q[2][4][64] __attribute__((aligned(64)));
    } u;
    const uint8_t *blk = group;
    const size_t qs = offsetof(block_q8_K, qs);
    for (int l = 0; l < LANES; l++) {
        UNROLLED
        for (int t = 0; t < CHUNK; t++) lane[l][t] = _mm512_setzero_ps();
        for (int64_t b = l; b < nb; b += LANES, blk += Q6K_BLOCK_BYTES) {
            const uint8_t *xb = act + (size_t)b * sizeof(block_q8_K);
            __m512i isum[CHUNK];
            UNROLLED
            for (int t = 0; t < CHUNK; t++) isum[t] = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = blk + 288 + 1024 * h, *qh = blk + 2336 + 512 * h;
                for (int m = 0; m < 4; m++) {
                    const __m128i lo_shift = q6k_low_shift(m), hi_shift = q6k_high_shift(m);
                    /* sub-blocks g = 8h + 2m and g + 1 */
                    for (int kk = 0; kk < 2; kk++) {
                        __m512i v[4];
                        q6k_sub_block(ql, qh, m, kk, lo_shift, hi_shift, v);
                        UNROLLED
                        for (int i = 0; i < 4; i++) _mm512_store_si512(u.q[kk][i], v[i]);
                    }
                    const size_t first = qs + 128 * (size_t)h + 32 * (size_t)m;
                    two_products(xb + first, xb + first + 16, a_stride, u.q[0], u.q[1], s);
                    const int g = 8 * h + 2 * m;
                    const __m512i sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * g)));
                    const __m512i sc1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 48 + 16 * g)));
                    UNROLLED
                    for (int t = 0; t < CHUNK; t++) {
                        const __m512i v0 = _mm512_mullo_epi32(_mm512_load_si512(s[0].v[t]), sc0);
                        const __m512i v1 = _mm512_mullo_epi32(_mm512_load_si512(s[1].v[t]), sc1);
                        isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(v0, v1));
                    }
                }
            }
            /* the -32 of every weight: 32 * sum over g of scale * bsum, by pairs of g */
            __m512i pair[8];
            UNROLLED
            for (int p = 0; p < 8; p++) pair[p] = q6k_scale_pair(blk, p);
            const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            UNROLLED
            for (int t = 0; t < CHUNK; t++) {
                const block_q8_K *x = (const block_q8_K *)(xb + (size_t)t * a_stride);
                __m512i corr = _mm512_setzero_si512();
                UNROLLED
                for (int p = 0; p < 8; p++) corr = _mm512_dpwssd_epi32(corr, pair[p], _mm512_set1_epi32(rd32(x->bsums + 2 * p)));
                const __m512i sumi = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(corr, 5));
                const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(x->d));
                lane[l][t] = _mm512_add_ps(lane[l][t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
            }
        }
    }
    store_chunk(lane, rows, y, y_stride);
}

/* Rows [0, rows) of one IQ4_XS group times the 16 activation rows at act: per sub-block
 * j, B rows 0-3 the levels + 128 of the low nibbles (weights 0-15), rows 4-7 of the high
 * ones; isum = sum of scale_j * (exact sum j), less 128 * sum of scale_j * msum_j, then
 * the reference's d * isum. */
INLINE void iq4xs_chunk(int64_t nb, const uint8_t *group, int rows, const uint8_t *act, size_t a_stride, float *y,
                        size_t y_stride) {
    __m512 lane[LANES][CHUNK];
    chunk_sums s[2];
    unpacked_nibbles u;
    const uint8_t *blk = group;
    const size_t qs = offsetof(toy_act_q8_Kx, qs);
    const __m512i table = iq4xs_table();
    for (int l = 0; l < LANES; l++) {
        UNROLLED
        for (int t = 0; t < CHUNK; t++) lane[l][t] = _mm512_setzero_ps();
        for (int64_t b = l; b < nb; b += LANES, blk += IQ4XS_BLOCK_BYTES) {
            const uint8_t *xb = act + (size_t)b * sizeof(toy_act_q8_Kx);
            const __m512i sl = _mm512_loadu_si512(blk + 64);
            const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(blk + 32)));
            __m512i isum[CHUNK];
            UNROLLED
            for (int t = 0; t < CHUNK; t++) isum[t] = _mm512_setzero_si512();
            for (int p = 0; p < 4; p++) { /* sub-blocks 2p and 2p + 1 */
                UNROLLED
                for (int e = 0; e < 2; e++) {
                    __m512i w[8];
                    iq4xs_sub_block(blk, 2 * p + e, table, w);
                    UNROLLED
                    for (int k = 0; k < 8; k++) _mm512_store_si512(u.q[e][k], w[k]);
                }
                two_products(xb + qs + 64 * p, xb + qs + 64 * p + 32, a_stride, u.q[0], u.q[1], s);
                const __m512i sc0 = iq4xs_scale(sl, sh, 2 * p), sc1 = iq4xs_scale(sl, sh, 2 * p + 1);
                UNROLLED
                for (int t = 0; t < CHUNK; t++) {
                    const __m512i v0 = _mm512_mullo_epi32(_mm512_load_si512(s[0].v[t]), sc0);
                    const __m512i v1 = _mm512_mullo_epi32(_mm512_load_si512(s[1].v[t]), sc1);
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(v0, v1));
                }
            }
            __m512i sc_pair[4];
            iq4xs_scale_pairs(blk, sc_pair);
            const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            UNROLLED
            for (int t = 0; t < CHUNK; t++) {
                const toy_act_q8_Kx *x = (const toy_act_q8_Kx *)(xb + (size_t)t * a_stride);
                __m512i corr = _mm512_setzero_si512();
                UNROLLED
                for (int p = 0; p < 4; p++) corr = _mm512_dpwssd_epi32(corr, sc_pair[p], _mm512_set1_epi32(rd32(x->msum + 2 * p)));
                const __m512i sumi = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(corr, 7));
                const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(x->d));
                lane[l][t] = _mm512_add_ps(lane[l][t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
            }
        }
    }
    store_chunk(lane, rows, y, y_stride);
}

typedef enum { KIND_Q8_0, KIND_Q4_0, KIND_Q4_K, KIND_Q5_K, KIND_Q6_K, KIND_IQ4_XS, KIND_Q4_1, KIND_IQ4_NL } kind;

/* Groups outer, chunks of 16 activation rows inner: a group's weights stay in cache for
 * all of them; the rows past the last whole chunk go to the VNNI kernel. */
INLINE void amx_gemm(const kind k, int type, int64_t n_cols, const void *w, int64_t n_rows, const void *a,
                     size_t a_stride, int64_t n_a, float *y, size_t y_stride) {
    static const int64_t block_cols[] = {32, 32, 256, 256, 256, 256, 32, 32};
    static const size_t block_bytes[] = {BLOCK_BYTES,     Q4_BLOCK_BYTES,    Q4K_BLOCK_BYTES, Q5K_BLOCK_BYTES,
                                         Q6K_BLOCK_BYTES, IQ4XS_BLOCK_BYTES, Q41_BLOCK_BYTES, Q4_BLOCK_BYTES};
    const int64_t nb = n_cols / block_cols[k], n_chunked = n_a / CHUNK * CHUNK;
    if (n_chunked > 0) {
        tile_config(k == KIND_Q6_K ? &tile_shapes_q6_K : &tile_shapes);
        const uint8_t *group = w;
        for (int64_t r0 = 0; r0 < n_rows; r0 += 16, group += (size_t)nb * block_bytes[k]) {
            const int rows = n_rows - r0 < 16 ? (int)(n_rows - r0) : 16;
            for (int64_t j0 = 0; j0 < n_chunked; j0 += CHUNK) {
                const uint8_t *aj = (const uint8_t *)a + (size_t)j0 * a_stride;
                float *yj = y + (size_t)j0 * y_stride + (size_t)r0;
                switch (k) {
                case KIND_Q8_0: q8_chunk(nb, group, rows, aj, a_stride, FORM_Q8_0, yj, y_stride); break;
                case KIND_Q4_0: q8_chunk(nb, group, rows, aj, a_stride, FORM_Q4_0, yj, y_stride); break;
                case KIND_IQ4_NL: q8_chunk(nb, group, rows, aj, a_stride, FORM_IQ4_NL, yj, y_stride); break;
                case KIND_Q4_K: q4k_chunk(nb, group, rows, aj, a_stride, false, yj, y_stride); break;
                case KIND_Q5_K: q4k_chunk(nb, group, rows, aj, a_stride, true, yj, y_stride); break;
                case KIND_Q6_K: q6k_chunk(nb, group, rows, aj, a_stride, yj, y_stride); break;
                case KIND_IQ4_XS: iq4xs_chunk(nb, group, rows, aj, a_stride, yj, y_stride); break;
                case KIND_Q4_1: q41_chunk(nb, group, rows, aj, a_stride, yj, y_stride); break;
                }
            }
        }
        tile_release();
    }
    if (n_a > n_chunked)
        toy_packed_avx512(type)->gemm(n_cols, w, n_rows, (const uint8_t *)a + (size_t)n_chunked * a_stride, a_stride,
                                      n_a - n_chunked, y + (size_t)n_chunked * y_stride, y_stride);
}

#define GEMM(name, k, type)                                                                                    \
    NO_UBSAN static void name(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride,   \
                              int64_t n_a, float *y, size_t y_stride) {                                        \
        amx_gemm(k, type, n_cols, w, n_rows, a, a_stride, n_a, y, y_stride);                                   \
    }
GEMM(gemm_q8_0x, KIND_Q8_0, TOY_TYPE_Q8_0)
GEMM(gemm_q4_0x, KIND_Q4_0, TOY_TYPE_Q4_0)
GEMM(gemm_q4_Kx, KIND_Q4_K, TOY_TYPE_Q4_K)
GEMM(gemm_q5_Kx, KIND_Q5_K, TOY_TYPE_Q5_K)
GEMM(gemm_q6_Kx, KIND_Q6_K, TOY_TYPE_Q6_K)
GEMM(gemm_iq4_xsx, KIND_IQ4_XS, TOY_TYPE_IQ4_XS)
GEMM(gemm_q4_1x, KIND_Q4_1, TOY_TYPE_Q4_1)
GEMM(gemm_iq4_nlx, KIND_IQ4_NL, TOY_TYPE_IQ4_NL)
#undef GEMM

/* The activation layouts and quantizers are the VNNI kernels' (the same packed weights). */
static const toy_packed_kernel packed_q8_0_amx = {
    .type = TOY_TYPE_Q8_0,
    .block_cols = 32,
    .act_block = sizeof(toy_act_q8_0x),
    .quantize_act = toy_quantize_act_q8_0x_avx2,
    .gemm = gemm_q8_0x,
};

static const toy_packed_kernel packed_q4_0_amx = {
    .type = TOY_TYPE_Q4_0,
    .block_cols = 32,
    .act_block = sizeof(toy_act_q8_0x),
    .quantize_act = toy_quantize_act_q8_0x_avx2,
    .gemm = gemm_q4_0x,
};

static const toy_packed_kernel packed_q4_K_amx = {
    .type = TOY_TYPE_Q4_K,
    .block_cols = 256,
    .act_block = sizeof(toy_act_q8_Kx),
    .quantize_act = toy_quantize_act_q8_Kx,
    .gemm = gemm_q4_Kx,
};

static const toy_packed_kernel packed_q5_K_amx = {
    .type = TOY_TYPE_Q5_K,
    .block_cols = 256,
    .act_block = sizeof(toy_act_q8_Kx),
    .quantize_act = toy_quantize_act_q8_Kx,
    .gemm = gemm_q5_Kx,
};

static const toy_packed_kernel packed_q6_K_amx = {
    .type = TOY_TYPE_Q6_K,
    .block_cols = 256,
    .act_block = sizeof(block_q8_K),
    .quantize_act = toy_quantize_act_q8_K_cpu,
    .gemm = gemm_q6_Kx,
};

static const toy_packed_kernel packed_iq4_nl_amx = {
    .type = TOY_TYPE_IQ4_NL,
    .block_cols = 32,
    .act_block = sizeof(toy_act_q8_0x),
    .quantize_act = toy_quantize_act_q8_0x_avx2,
    .gemm = gemm_iq4_nlx,
};

static const toy_packed_kernel packed_q4_1_amx = {
    .type = TOY_TYPE_Q4_1,
    .block_cols = 32,
    .act_block = sizeof(block_q8_1),
    .quantize_act = toy_quantize_act_q8_1_cpu,
    .gemm = gemm_q4_1x,
};

static const toy_packed_kernel packed_iq4_xs_amx = {
    .type = TOY_TYPE_IQ4_XS,
    .block_cols = 256,
    .act_block = sizeof(toy_act_q8_Kx),
    .quantize_act = toy_quantize_act_q8_Kx,
    .gemm = gemm_iq4_xsx,
};

/* NULL for a type without AMX products: toy_packed_get then takes the VNNI kernel. */
const toy_packed_kernel *AMX_ENTRY(int type) {
    switch (type) {
    case TOY_TYPE_Q8_0: return &packed_q8_0_amx;
    case TOY_TYPE_Q4_0: return &packed_q4_0_amx;
    case TOY_TYPE_Q4_K: return &packed_q4_K_amx;
    case TOY_TYPE_Q5_K: return &packed_q5_K_amx;
    case TOY_TYPE_Q6_K: return &packed_q6_K_amx;
    case TOY_TYPE_IQ4_XS: return &packed_iq4_xs_amx;
    case TOY_TYPE_Q4_1: return &packed_q4_1_amx;
    case TOY_TYPE_IQ4_NL: return &packed_iq4_nl_amx;
    default: return NULL;
    }
}

#endif /* __x86_64__ */
