/* packed_amx.c — AMX products of packed Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS weights (packed.h) with 16
 * activation rows at a time, bit-identical to the scalar reference (packed.c).
 *
 * A group of 16 weight rows is first unpacked (the panel, below) into the B operands of
 * the tile products, once for all the chunks of 16 activation rows of the call: for K =
 * 32 quants, 8 tile rows of 64 bytes, each the 4 quants k..k+3 of the 16 weight rows, the
 * packed Q8_0 layout's order. Q8_0, Q4_0 and IQ4_NL become signed weights (TDPBSSD against
 * the signed activation quants gives sum w * a with no correction); Q4_1, Q4_K and Q5_K
 * stay unsigned nibbles (TDPBSUD; their mins take care of the offset); Q6_K's 16-quant
 * sub-blocks (K = 16) and IQ4_XS's levels are signed. The A operand is block b of 16
 * activation rows, loaded from the activation layout with its row stride or, for the Q8_0
 * activations of Q8_0, Q4_0 and IQ4_NL, from their tiled copy (q8_tile_act: each A tile's
 * 16 rows of 32 bytes in 8 whole lines, in the packed order, with the 16 scales beside),
 * made once per product by the backend's threads together. Q4_K's
 * 8 sub-blocks of a super-block each give a C tile, multiplied by their six-bit scales in
 * 32-bit lanes, and the mins meet the activation's sub-block sums through vpdpwssd; Q6_K
 * and IQ4_XS multiply each sub-block's sums by its signed scale.
 *
 * The integer sums are exact whatever computes them, so from there on each block's
 * float epilogue, d = w.d * a.d and v = d * (float)sumi, is the reference's, on 16 weight
 * rows at once in a zmm per activation row; v goes into the accumulator of the block's
 * lane (b % 8), and the 8 lanes are combined pairwise (packed.h, REDUCTION SHAPE). The
 * products of the next step are issued before the epilogue of this one, whose sums were
 * stored a step earlier. The 32-column forms take two groups of weight rows at a time
 * (q8_chunk_pair): one A tile for two products, and two pairs of C tiles in turn, so
 * that a product (about 20 ns from issue to result here, one issued every 5 ns) is not
 * waited for by the store behind it. The tile unit and the vector units work side by
 * side, and the float epilogue (four vector operations for 16 results of a block) is
 * what the time goes to.
 *
 * Tiles are configured per call (the configuration is per thread) and released at the
 * end. Fewer than 16 activation rows (decode, the last rows of a prompt) go to the
 * AVX-512 VNNI kernels, which compute the same bits. Compiled with AVX-512 and AMX
 * tile/int8 enabled; called only after ty_cpu_isa() found AMX and Linux granted the
 * tile state (kernels.c). tests/amx_emulated.c compiles this file over a C model of the
 * tile instructions, so that test_packed checks it on every AVX-512 machine. */
#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "packed.h"
#include "simd.h"

#if defined(__x86_64__)

TOY_TARGET_BEGIN(TOY_FEATURES_AMX)
#include "packed_avx512.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#ifndef TOY_AMX_EMULATE
#define AMX_ENTRY ty_packed_amx
#define tile_config(cfg) _tile_loadconfig(cfg)
#define tile_release() _tile_release()
#define tile_load(t, p, stride) _tile_loadd(t, p, stride)
#define tile_store(t, p, stride) _tile_stored(t, p, stride)
#define tile_zero(t) _tile_zero(t)
#define tile_dpbsud(c, a, b) _tile_dpbsud(c, a, b)
#define tile_dpbssd(c, a, b) _tile_dpbssd(c, a, b)
#endif

#define CHUNK 16 /* activation rows per pass: the rows of an A and a C tile */
/* loops over a chunk's rows unrolled whole, so that their accumulators stay in registers */
#define UNROLLED_CHUNK _Pragma("GCC unroll 16")

/* Two products a step: C0 = A0 x B0 and C1 = A1 x B1; q8_chunk_pair's odd steps use
 * C2 and C3. */
#define C0 0 /* 16 activation rows x 16 weight rows of int32 */
#define C1 1
#define C2 2 /* the pair of the odd steps of a two-group chunk (q8_chunk_pair) */
#define C3 3
#define A0 4 /* 16 activation rows x 32 quants */
#define A1 5
#define B0 6 /* 8 rows of 16 weight rows x 4 quants (the packed layout) */
#define B1 7

/* The LDTILECFG operand (palette 1): bytes per row and rows of each tile. */
typedef struct {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config_t;

/* Q8_0, Q4_0, Q4_K: K = 32 quants a product */
static const tile_config_t tile_shapes = {
    .palette_id = 1,
    .colsb = {[C0] = 64, [C1] = 64, [C2] = 64, [C3] = 64, [A0] = 32, [A1] = 32, [B0] = 64, [B1] = 64},
    .rows = {[C0] = 16, [C1] = 16, [C2] = 16, [C3] = 16, [A0] = 16, [A1] = 16, [B0] = 8, [B1] = 8},
};

/* Q6_K: K = 16, its sub-blocks */
static const tile_config_t tile_shapes_q6_K = {
    .palette_id = 1,
    .colsb = {[C0] = 64, [C1] = 64, [A0] = 16, [A1] = 16, [B0] = 64, [B1] = 64},
    .rows = {[C0] = 16, [C1] = 16, [A0] = 16, [A1] = 16, [B0] = 4, [B1] = 4},
};

_Static_assert(sizeof(tile_config_t) == 64, "LDTILECFG takes 64 bytes");

typedef struct {
    int32_t v[CHUNK][16] __attribute__((aligned(64)));
} chunk_sums;

/* the packed type a product is compiled for (a constant in every caller) */
typedef int kind;

/* ------------------------------------------------------------ the unpacked group (panel)
 * A group's weights are unpacked once, before its first chunk of activation rows, into B
 * tiles in the packed order of its blocks: K = 32 quants of 16 rows take 512 bytes (8
 * tile rows of 16 weight rows x 4 quants), so the panel is 16 bytes a column. Every
 * chunk of the call then loads its B tiles from there: the nibbles are split (and Q6_K's
 * bits joined) once per group, not once per chunk, and a tile is never loaded from
 * bytes stored just before (a tile load does not take data from the store buffer; it
 * waits for the stores). Weights are unpacked as signed values where that is exact
 * (Q8_0, Q4_0, IQ4_NL, Q6_K, IQ4_XS: TDPBSSD, so no correction for an offset is left
 * to the epilogue) and as unsigned nibbles where the format's mins take care of it (Q4_1,
 * Q4_K, Q5_K: TDPBSUD). */
#define PANEL_TILE 512 /* bytes of a K = 32 B tile of 16 rows */

static pthread_key_t panel_key;
static pthread_once_t panel_once = PTHREAD_ONCE_INIT;
static bool panel_key_made;

static void panel_free(void *p) {
    free(p);
}

static void panel_make_key(void) {
    panel_key_made = pthread_key_create(&panel_key, panel_free) == 0;
}

/* The calling thread's panel of at least `bytes` (64-byte aligned; its first 64 bytes
 * hold its size), kept for the thread's next calls; NULL where memory is short, and then
 * the caller takes the VNNI kernel (the same bits). */
static uint8_t *panel_get(size_t bytes) {
    pthread_once(&panel_once, panel_make_key);
    if (!panel_key_made || bytes > SIZE_MAX - 64) return NULL;
    uint8_t *old = pthread_getspecific(panel_key);
    size_t have;
    if (old) {
        memcpy(&have, old, sizeof have);
        if (have >= bytes) return old + 64;
    }
    void *p;
    if (posix_memalign(&p, 64, 64 + bytes)) return NULL;
    if (pthread_setspecific(panel_key, p)) {
        free(p);
        return NULL;
    }
    free(old);
    memcpy(p, &bytes, sizeof bytes);
    return (uint8_t *)p + 64;
}

/* Q8_0, Q4_0, IQ4_NL (signed) and Q4_1 (unsigned nibbles): one tile a block. */
INLINE void unpack_q8_form(const kind k, const uint8_t *group, int64_t nb, uint8_t *panel) {
    const size_t block_bytes = k == TOY_TYPE_Q8_0 ? BLOCK_BYTES : k == TOY_TYPE_Q4_1 ? Q41_BLOCK_BYTES : Q4_BLOCK_BYTES;
    const size_t quants = k == TOY_TYPE_Q4_1 ? 64 : 32;
    const __m512i low = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8), sign = _mm512_set1_epi8((char)0x80);
    const __m512i table = iq4xs_table();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *q = group + (size_t)i * block_bytes + quants;
        uint8_t *p = panel + (size_t)i * PANEL_TILE;
        if (k == TOY_TYPE_Q8_0) { /* the packed bytes are weight + 128 */
            TOY_UNROLL8
            for (int v = 0; v < 8; v++) _mm512_store_si512(p + 64 * v, _mm512_xor_si512(_mm512_loadu_si512(q + 64 * v), sign));
            continue;
        }
        /* B rows 0-3: the low nibbles (weights 0-15), rows 4-7 the high ones */
        TOY_UNROLL8
        for (int v = 0; v < 4; v++) {
            const __m512i n = _mm512_loadu_si512(q + 64 * v);
            __m512i lo = _mm512_and_si512(n, low), hi = _mm512_and_si512(_mm512_srli_epi16(n, 4), low);
            if (k == TOY_TYPE_Q4_0) { /* the nibbles are weight + 8 */
                lo = _mm512_sub_epi8(lo, eight);
                hi = _mm512_sub_epi8(hi, eight);
            } else if (k == TOY_TYPE_IQ4_NL) { /* the table gives level + 128 */
                lo = _mm512_xor_si512(_mm512_shuffle_epi8(table, lo), sign);
                hi = _mm512_xor_si512(_mm512_shuffle_epi8(table, hi), sign);
            }
            _mm512_store_si512(p + 64 * v, lo);
            _mm512_store_si512(p + 256 + 64 * v, hi);
        }
    }
}

/* Q4_K, Q5_K, Q6_K, IQ4_XS: 4096 bytes a super-block, sub-block j's tile at 512 j
 * (Q6_K: its 16 sub-blocks of 16, K = 16 tiles of 256 bytes, at 256 g). */
INLINE void unpack_super_blocks(const kind k, const uint8_t *group, int64_t nb, uint8_t *panel) {
    const size_t block_bytes = k == TOY_TYPE_Q4_K   ? Q4K_BLOCK_BYTES
                               : k == TOY_TYPE_Q5_K ? Q5K_BLOCK_BYTES
                               : k == TOY_TYPE_Q6_K ? Q6K_BLOCK_BYTES
                                                : IQ4XS_BLOCK_BYTES;
    const __m512i low = _mm512_set1_epi8(0x0f), sign = _mm512_set1_epi8((char)0x80);
    const __m512i table = iq4xs_table(), thirty_two = _mm512_set1_epi8(32);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = group + (size_t)i * block_bytes;
        uint8_t *p = panel + (size_t)i * 8 * PANEL_TILE;
        if (k == TOY_TYPE_Q4_K || k == TOY_TYPE_Q5_K) {
            /* sub-blocks 2s (low nibbles) and 2s + 1 (high) share their bytes */
            for (int s = 0; s < 4; s++) {
                uint8_t *lo = p + 2 * s * PANEL_TILE, *hi = lo + PANEL_TILE;
                TOY_UNROLL8
                for (int v = 0; v < 8; v++) {
                    const __m512i n = _mm512_loadu_si512(blk + 256 + 512 * s + 64 * v);
                    __m512i l = _mm512_and_si512(n, low), h = _mm512_and_si512(_mm512_srli_epi16(n, 4), low);
                    if (k == TOY_TYPE_Q5_K) {
                        const __m512i qh = _mm512_loadu_si512(blk + Q5K_HIGH_BITS + 64 * v);
                        l = _mm512_or_si512(l, q5k_high(qh, 2 * s));
                        h = _mm512_or_si512(h, q5k_high(qh, 2 * s + 1));
                    }
                    _mm512_store_si512(lo + 64 * v, l);
                    _mm512_store_si512(hi + 64 * v, h);
                }
            }
        } else if (k == TOY_TYPE_Q6_K) {
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = blk + 288 + 1024 * h, *qh = blk + 2336 + 512 * h;
                for (int m = 0; m < 4; m++) {
                    const __m128i lo_shift = q6k_low_shift(m), hi_shift = q6k_high_shift(m);
                    for (int kk = 0; kk < 2; kk++) {
                        __m512i u[4];
                        q6k_sub_block(ql, qh, m, kk, lo_shift, hi_shift, u);
                        uint8_t *g = p + 256 * (8 * h + 2 * m + kk);
                        TOY_UNROLL8
                        for (int v = 0; v < 4; v++) _mm512_store_si512(g + 64 * v, _mm512_sub_epi8(u[v], thirty_two));
                    }
                }
            }
        } else {
            for (int j = 0; j < 8; j++) {
                __m512i w[8];
                iq4xs_sub_block(blk, j, table, w);
                TOY_UNROLL8
                for (int v = 0; v < 8; v++) _mm512_store_si512(p + PANEL_TILE * j + 64 * v, _mm512_xor_si512(w[v], sign));
            }
        }
    }
}

/* ------------------------------------------------------------ the chunk kernels
 * A chunk runs through the group's blocks in their packed order (lane by lane: lane l's
 * blocks l, l + 8, ...), one step ahead: the products of the next step are issued before
 * the epilogue of this one, which reads sums stored a step earlier. */

/* A step's products into ca = A0 x B0 and cb = A1 x B1 (b1 NULL: only the first), the A
 * tiles at a0, a1 with rows a_stride apart, the B tiles at b0, b1; then, after the
 * epilogue of the step before, STEP_STORE puts them to s[0], s[1]. These stay macros, not
 * simd.h's always-inline functions: the tile instructions take their tile numbers as
 * compile-time immediates, and the intrinsics reject a function parameter there. */
#define TILE_DP(c, a, b, b_signed)              \
    do {                                        \
        if (b_signed) tile_dpbssd(c, a, b);     \
        else tile_dpbsud(c, a, b);              \
    } while (0)
#define STEP_ISSUE(ca, cb, b_signed, a0, a1, a_stride, b0, b1) \
    do {                                                       \
        tile_load(A0, a0, a_stride);                           \
        tile_load(B0, b0, 64);                                 \
        tile_zero(ca);                                         \
        TILE_DP(ca, A0, B0, b_signed);                         \
        if (b1) {                                              \
            tile_load(A1, a1, a_stride);                       \
            tile_load(B1, b1, 64);                             \
            tile_zero(cb);                                     \
            TILE_DP(cb, A1, B1, b_signed);                     \
        }                                                      \
    } while (0)
#define STEP_STORE(ca, cb, two, s)                   \
    do {                                             \
        tile_store(ca, (s)[0].v, 64);                \
        if (two) tile_store(cb, (s)[1].v, 64);       \
    } while (0)

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

/* A chunk's lane sums: acc is the current lane's (in registers), moved to lane[l] after the
 * lane's last block; lanes without blocks (a row of fewer than 8) stay zero. */
INLINE void lanes_start(__m512 lane[LANES][CHUNK], __m512 acc[CHUNK]) {
    for (int l = 0; l < LANES; l++)
        UNROLLED_CHUNK
        for (int t = 0; t < CHUNK; t++) lane[l][t] = _mm512_setzero_ps();
    UNROLLED_CHUNK
    for (int t = 0; t < CHUNK; t++) acc[t] = _mm512_setzero_ps();
}

INLINE void lanes_move(__m512 lane[CHUNK], __m512 acc[CHUNK]) {
    UNROLLED_CHUNK
    for (int t = 0; t < CHUNK; t++) {
        lane[t] = acc[t];
        acc[t] = _mm512_setzero_ps();
    }
}

/* Q8_0 / Q4_0 / IQ4_NL (Q8_0 activations, signed weights: the sums are sum w * a) and
 * Q4_1 (Q8_1 activations, the nibbles the quants): block i's epilogue, the reference's
 * acc += (w.d * a.d) * (float)sumi (Q4_1: + w.m * a.s). */
INLINE void q8_block_epilogue(const kind k, const uint8_t *blk, const uint8_t *act, size_t a_stride, int64_t b,
                              const float *ad, const chunk_sums *s, __m512 acc[CHUNK]) {
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    if (k == TOY_TYPE_Q4_1) {
        const __m512 wm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
        UNROLLED_CHUNK
        for (int t = 0; t < CHUNK; t++) {
            const block_q8_1 *x = (const block_q8_1 *)(act + (size_t)t * a_stride) + b;
            const __m512 d = _mm512_mul_ps(wd, half_lanes(x->d));
            const __m512 scaled = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_load_si512(s->v[t])));
            const __m512 offset = _mm512_mul_ps(wm, half_lanes(x->s));
            acc[t] = _mm512_add_ps(acc[t], _mm512_add_ps(scaled, offset));
        }
        return;
    }
    UNROLLED_CHUNK
    for (int t = 0; t < CHUNK; t++) {
        const ty_act_q8_0x *x = (const ty_act_q8_0x *)(act + (size_t)t * a_stride) + b;
        const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(ad ? ad[t] : x->d));
        acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_load_si512(s->v[t]))));
    }
}

/* The A tile of the block at position e of the packed order: from the tiled layout
 * (q8_tile_act) where there is one, else from the activation rows. */
#define A_TILE(e) (tiles ? tiles + (size_t)(e)*PANEL_TILE : act + (size_t)order[e] * act_block + qs)

/* Rows [0, rows) of one group of the 32-column block types times the 16 activation rows
 * at act (or their tiles); a step is two blocks. */
INLINE void q8_chunk(const kind k, int64_t nb, const uint8_t *group, const uint8_t *panel, const int64_t *order,
                     const int64_t *lane_end, int rows, const uint8_t *act, size_t a_stride, const uint8_t *tiles,
                     const float *ads, float *y, size_t y_stride) {
    const size_t block_bytes = k == TOY_TYPE_Q8_0 ? BLOCK_BYTES : k == TOY_TYPE_Q4_1 ? Q41_BLOCK_BYTES : Q4_BLOCK_BYTES;
    const size_t act_block = k == TOY_TYPE_Q4_1 ? sizeof(block_q8_1) : sizeof(ty_act_q8_0x);
    const size_t qs = k == TOY_TYPE_Q4_1 ? offsetof(block_q8_1, qs) : offsetof(ty_act_q8_0x, qs);
    const bool b_signed = k != TOY_TYPE_Q4_1;
    __m512 lane[LANES][CHUNK], acc[CHUNK];
    chunk_sums s[2][2];
    lanes_start(lane, acc);
    int l = 0;
    /* step n: blocks 2n and 2n + 1 */
    const int64_t n_steps = (nb + 1) / 2;
#define Q8_ISSUE(n, ca, cb)                                                                                        \
    STEP_ISSUE(ca, cb, b_signed, A_TILE(2 * (n)), 2 * (n) + 1 < nb ? A_TILE(2 * (n) + 1) : NULL, tiles ? 32 : a_stride, \
               panel + (size_t)(2 * (n)) * PANEL_TILE, 2 * (n) + 1 < nb ? panel + (size_t)(2 * (n) + 1) * PANEL_TILE : NULL)
#define Q8_STORE(n, ca, cb) STEP_STORE(ca, cb, 2 * (n) + 1 < nb, s[(n)&1])
#define Q8_EPILOGUE(n)                                                                                             \
    for (int64_t e = 2 * (n); e < 2 * (n) + 2 && e < nb; e++) {                                                    \
        q8_block_epilogue(k, group + (size_t)e * block_bytes, act, a_stride, order[e], ads ? ads + (size_t)e * CHUNK : NULL, \
                          &s[(n)&1][e - 2 * (n)], acc);                                                           \
        if (e + 1 == lane_end[l]) lanes_move(lane[l++], acc);                                                      \
    }
    Q8_ISSUE(0, C0, C1);
    Q8_STORE(0, C0, C1);
    for (int64_t n = 0; n < n_steps; n++) {
        if (n + 1 < n_steps) {
            Q8_ISSUE(n + 1, C0, C1);
            Q8_STORE(n + 1, C0, C1);
        }
        Q8_EPILOGUE(n);
    }
#undef Q8_ISSUE
#undef Q8_STORE
#undef Q8_EPILOGUE
    store_chunk(lane, rows, y, y_stride);
}

/* Rows [0, 16) of group g and [0, rows1) of group g + 1 of the 32-column block types
 * times the 16 activation rows at act: a step is one block of both groups, whose A tile
 * is loaded once for the two products C = A x B(g), A x B(g + 1). The steps alternate
 * between the tile pairs C0/C1 and C2/C3, so that a pair's products have a step to
 * finish before they are stored, and the stored sums a step to land before the
 * epilogue reads them: the epilogue of block n - 2 runs beside the products of block n. */
INLINE void q8_chunk_pair(const kind k, int64_t nb, const uint8_t *group0, const uint8_t *group1, const uint8_t *panel0,
                          const uint8_t *panel1, const int64_t *order, const int64_t *lane_end, int rows1,
                          const uint8_t *act, size_t a_stride, const uint8_t *tiles, const float *ads, float *y,
                          size_t y_stride) {
    const size_t block_bytes = k == TOY_TYPE_Q8_0 ? BLOCK_BYTES : k == TOY_TYPE_Q4_1 ? Q41_BLOCK_BYTES : Q4_BLOCK_BYTES;
    const size_t act_block = k == TOY_TYPE_Q4_1 ? sizeof(block_q8_1) : sizeof(ty_act_q8_0x);
    const size_t qs = k == TOY_TYPE_Q4_1 ? offsetof(block_q8_1, qs) : offsetof(ty_act_q8_0x, qs);
    const bool b_signed = k != TOY_TYPE_Q4_1;
    __m512 lane0[LANES][CHUNK], lane1[LANES][CHUNK], acc0[CHUNK], acc1[CHUNK];
    chunk_sums s[2][2];
    lanes_start(lane0, acc0);
    lanes_start(lane1, acc1);
    int l = 0;
#define PAIR_ISSUE(n, ca, cb)                                                                 \
    do {                                                                                      \
        tile_load(A0, A_TILE(n), tiles ? 32 : a_stride);                                      \
        tile_load(B0, panel0 + (size_t)(n)*PANEL_TILE, 64);                                   \
        tile_load(B1, panel1 + (size_t)(n)*PANEL_TILE, 64);                                   \
        tile_zero(ca);                                                                        \
        TILE_DP(ca, A0, B0, b_signed);                                                        \
        tile_zero(cb);                                                                        \
        TILE_DP(cb, A0, B1, b_signed);                                                        \
    } while (0)
#define PAIR_EPILOGUE(e)                                                                                         \
    do {                                                                                                         \
        const float *ad = ads ? ads + (size_t)(e)*CHUNK : NULL;                                                 \
        q8_block_epilogue(k, group0 + (size_t)(e)*block_bytes, act, a_stride, order[e], ad, &s[(e)&1][0], acc0); \
        q8_block_epilogue(k, group1 + (size_t)(e)*block_bytes, act, a_stride, order[e], ad, &s[(e)&1][1], acc1); \
        if ((e) + 1 == lane_end[l]) {                                                                            \
            lanes_move(lane0[l], acc0);                                                                          \
            lanes_move(lane1[l++], acc1);                                                                        \
        }                                                                                                        \
    } while (0)
    PAIR_ISSUE(0, C0, C1);
    for (int64_t n = 0; n < nb; n++) {
        /* issue n + 1, store n, then the epilogue of n - 1 (stored a step ago) */
        if (n & 1) {
            if (n + 1 < nb) PAIR_ISSUE(n + 1, C0, C1);
            STEP_STORE(C2, C3, true, s[1]);
        } else {
            if (n + 1 < nb) PAIR_ISSUE(n + 1, C2, C3);
            STEP_STORE(C0, C1, true, s[0]);
        }
        if (n > 0) PAIR_EPILOGUE(n - 1);
    }
    PAIR_EPILOGUE(nb - 1);
#undef PAIR_ISSUE
#undef PAIR_EPILOGUE
    store_chunk(lane0, 16, y, y_stride);
    store_chunk(lane1, rows1, y + 16, y_stride);
}

/* The integer scales of the two sub-blocks of step p of a super-block, per weight row. */
INLINE void step_scales(const kind k, const uint8_t *blk, int p, __m512i sc[2]) {
    if (k == TOY_TYPE_Q6_K) {
        TOY_UNROLL8
        for (int e = 0; e < 2; e++)
            sc[e] = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * (2 * p + e))));
    } else if (k == TOY_TYPE_IQ4_XS) {
        const __m512i sl = _mm512_loadu_si512(blk + 64);
        const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(blk + 32)));
        sc[0] = iq4xs_scale(sl, sh, 2 * p);
        sc[1] = iq4xs_scale(sl, sh, 2 * p + 1);
    } else {
        const __m512i s0 = _mm512_loadu_si512(blk + 64), s2 = _mm512_loadu_si512(blk + 192);
        sc[0] = q4k_field(s0, s0, s2, 2 * p, false);
        sc[1] = q4k_field(s0, s0, s2, 2 * p + 1, false);
    }
}

/* Super-block i's epilogue from isum = sum over sub-blocks of scale * (exact sum):
 * Q4_K / Q5_K the reference's d * isum - dmin * summs (summs = sum of min_j * msum_j),
 * Q6_K and IQ4_XS d * isum. */
INLINE void super_block_epilogue(const kind k, const uint8_t *blk, const uint8_t *xb, size_t a_stride,
                                 const __m512i isum[CHUNK], __m512 acc[CHUNK]) {
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    if (k == TOY_TYPE_Q4_K || k == TOY_TYPE_Q5_K) {
        __m512i mp[4];
        q4k_min_pairs(blk, mp);
        const __m512 wdm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
        UNROLLED_CHUNK
        for (int t = 0; t < CHUNK; t++) {
            const ty_act_q8_Kx *x = (const ty_act_q8_Kx *)(xb + (size_t)t * a_stride);
            acc[t] = _mm512_add_ps(acc[t], q4k_row_value(wd, wdm, mp, x, isum[t]));
        }
        return;
    }
    UNROLLED_CHUNK
    for (int t = 0; t < CHUNK; t++) {
        /* block_q8_K and ty_act_q8_Kx both start with the float d */
        const float ad = *(const float *)(xb + (size_t)t * a_stride);
        const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(ad));
        acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[t])));
    }
}

/* Rows [0, rows) of one group of the super-block types times the 16 activation rows at
 * act; a step is two sub-blocks (4 steps a super-block, Q6_K 8). */
INLINE void super_chunk(const kind k, int64_t nb, const uint8_t *group, const uint8_t *panel, const int64_t *order,
                        const int64_t *lane_end, int rows, const uint8_t *act, size_t a_stride, float *y,
                        size_t y_stride) {
    const size_t block_bytes = k == TOY_TYPE_Q4_K   ? Q4K_BLOCK_BYTES
                               : k == TOY_TYPE_Q5_K ? Q5K_BLOCK_BYTES
                               : k == TOY_TYPE_Q6_K ? Q6K_BLOCK_BYTES
                                                : IQ4XS_BLOCK_BYTES;
    const size_t act_block = k == TOY_TYPE_Q6_K ? sizeof(block_q8_K) : sizeof(ty_act_q8_Kx);
    const size_t qs = k == TOY_TYPE_Q6_K ? offsetof(block_q8_K, qs) : offsetof(ty_act_q8_Kx, qs);
    const int steps = k == TOY_TYPE_Q6_K ? 8 : 4, quants = k == TOY_TYPE_Q6_K ? 16 : 32; /* a sub-block's */
    const bool b_signed = k == TOY_TYPE_Q6_K || k == TOY_TYPE_IQ4_XS;
    const int64_t n_steps = nb * steps;
    __m512 lane[LANES][CHUNK], acc[CHUNK];
    chunk_sums s[2][2];
    lanes_start(lane, acc);
    int l = 0;
#define SUPER_STEP(n)                                                                                         \
    do {                                                                                                      \
        const uint8_t *a0 = act + (size_t)order[(n) / steps] * act_block + qs + 2 * quants * ((n) % steps);   \
        const uint8_t *b0 = panel + (size_t)(n)*2 * 16 * quants;                                              \
        STEP_ISSUE(C0, C1, b_signed, a0, a0 + quants, a_stride, b0, b0 + 16 * quants);                       \
        STEP_STORE(C0, C1, true, s[(n) & 1]);                                                                 \
    } while (0)
    SUPER_STEP(0);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = group + (size_t)i * block_bytes;
        __m512i isum[CHUNK];
        UNROLLED_CHUNK
        for (int t = 0; t < CHUNK; t++) isum[t] = _mm512_setzero_si512();
        for (int p = 0; p < steps; p++) {
            const int64_t n = i * steps + p;
            if (n + 1 < n_steps) SUPER_STEP(n + 1);
            __m512i sc[2];
            step_scales(k, blk, p, sc);
            const chunk_sums *sn = s[n & 1];
            UNROLLED_CHUNK
            for (int t = 0; t < CHUNK; t++) {
                const __m512i v0 = _mm512_mullo_epi32(_mm512_load_si512(sn[0].v[t]), sc[0]);
                const __m512i v1 = _mm512_mullo_epi32(_mm512_load_si512(sn[1].v[t]), sc[1]);
                isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(v0, v1));
            }
        }
        super_block_epilogue(k, blk, act + (size_t)order[i] * act_block, a_stride, isum, acc);
        if (i + 1 == lane_end[l]) lanes_move(lane[l++], acc);
    }
#undef SUPER_STEP
    store_chunk(lane, rows, y, y_stride);
}

/* The tiled layout of the q8 forms: chunk j0 / 16 at nb * TILED_BLOCK j0 / 16, its A
 * tiles in the packed order (PANEL_TILE bytes each), then their activation scales, 16
 * floats a block. */
#define TILED_BLOCK (PANEL_TILE + CHUNK * sizeof(float))
#define TILED_QS(j0) (tiled ? tiled + (size_t)((j0) / CHUNK) * (size_t)nb * TILED_BLOCK : NULL)
#define TILED_D(j0) (tiled ? (const float *)(TILED_QS(j0) + (size_t)nb * PANEL_TILE) : NULL)

/* Groups outer (the q8 forms two at a time), chunks inner. */
INLINE void amx_pass(const kind k, const bool super, int64_t nb, size_t group_bytes, const uint8_t *w, int64_t n_rows,
                     const uint8_t *a, size_t a_stride, int64_t n_chunked, float *y, size_t y_stride, uint8_t *panel,
                     const int64_t *order, const int64_t *lane_end, const uint8_t *tiled) {
    tile_config(k == TOY_TYPE_Q6_K ? &tile_shapes_q6_K : &tile_shapes);
    int64_t r0 = 0;
    if (!super)
        for (; r0 + 16 < n_rows; r0 += 32) {
            const uint8_t *group = w + (size_t)(r0 / 16) * group_bytes;
            const int rows1 = n_rows - r0 - 16 < 16 ? (int)(n_rows - r0 - 16) : 16;
            uint8_t *panel1 = panel + (size_t)nb * PANEL_TILE;
            unpack_q8_form(k, group, nb, panel);
            unpack_q8_form(k, group + group_bytes, nb, panel1);
            for (int64_t j0 = 0; j0 < n_chunked; j0 += CHUNK)
                q8_chunk_pair(k, nb, group, group + group_bytes, panel, panel1, order, lane_end, rows1,
                              a + (size_t)j0 * a_stride, a_stride, TILED_QS(j0), TILED_D(j0),
                              y + (size_t)j0 * y_stride + (size_t)r0, y_stride);
        }
    for (; r0 < n_rows; r0 += 16) {
        const uint8_t *group = w + (size_t)(r0 / 16) * group_bytes;
        const int rows = n_rows - r0 < 16 ? (int)(n_rows - r0) : 16;
        if (super) unpack_super_blocks(k, group, nb, panel);
        else unpack_q8_form(k, group, nb, panel);
        for (int64_t j0 = 0; j0 < n_chunked; j0 += CHUNK) {
            const uint8_t *aj = a + (size_t)j0 * a_stride;
            float *yj = y + (size_t)j0 * y_stride + (size_t)r0;
            if (super) super_chunk(k, nb, group, panel, order, lane_end, rows, aj, a_stride, yj, y_stride);
            else
                q8_chunk(k, nb, group, panel, order, lane_end, rows, aj, a_stride, TILED_QS(j0), TILED_D(j0), yj,
                         y_stride);
        }
    }
    tile_release();
}

/* A group is unpacked once and stays in cache for all the chunks; the rows past the last
 * whole chunk go to the VNNI kernel, and so does everything where the panel cannot be had. */
INLINE void amx_gemm(const kind k, int type, int64_t n_cols, const void *w, int64_t n_rows, const void *a,
                     size_t a_stride, int64_t n_a, const uint8_t *tiled, float *y, size_t y_stride) {
    const bool super = k == TOY_TYPE_Q4_K || k == TOY_TYPE_Q5_K || k == TOY_TYPE_Q6_K || k == TOY_TYPE_IQ4_XS;
    const int64_t nb = n_cols / ty_packed_block_cols(k);
    int64_t n_chunked = n_a / CHUNK * CHUNK;
    /* the panel (16 bytes a column), then the packed order's block numbers */
    uint8_t *panel = NULL;
    const size_t panel_bytes = (size_t)nb * (size_t)ty_packed_block_cols(k) * 16 * (super ? 1 : 2); /* q8 forms: two groups */
    if (n_chunked > 0 && nb > 0 && (uint64_t)nb <= SIZE_MAX / 64 / (uint64_t)ty_packed_block_cols(k))
        panel = panel_get(panel_bytes + (size_t)nb * sizeof(int64_t));
    if (!panel) n_chunked = 0;
    if (n_chunked > 0) {
        int64_t *order = (int64_t *)(panel + panel_bytes), lane_end[LANES], i = 0;
        for (int l = 0; l < LANES; l++) {
            for (int64_t b = l; b < nb; b += LANES) order[i++] = b;
            lane_end[l] = i;
        }
        amx_pass(k, super, nb, (size_t)nb * ty_packed_block_bytes(k), w, n_rows, a, a_stride, n_chunked, y, y_stride, panel, order,
                 lane_end, tiled);
    }
    if (n_a > n_chunked)
        ty_packed_avx512(type)->gemm(n_cols, w, n_rows, (const uint8_t *)a + (size_t)n_chunked * a_stride, a_stride,
                                     n_a - n_chunked, y + (size_t)n_chunked * y_stride, y_stride);
}

/* The tiled layout (TILED_BLOCK) of Q8_0 activations (ty_act_q8_0x), for Q8_0, Q4_0
 * and IQ4_NL: the same order of blocks as the packed weights (packed.h). */
static size_t q8_tiled_bytes(int64_t n_cols, int64_t n_a) {
    return (size_t)(n_a / CHUNK) * (size_t)(n_cols / 32) * TILED_BLOCK;
}

NO_UBSAN static void q8_tile_act(int64_t n_cols, const void *a, size_t a_stride, int64_t c, void *tiled) {
    const int64_t nb = n_cols / 32;
    uint8_t *qs = (uint8_t *)tiled + (size_t)c * (size_t)nb * TILED_BLOCK;
    float *d = (float *)(qs + (size_t)nb * PANEL_TILE);
    const uint8_t *rows = (const uint8_t *)a + (size_t)(c * CHUNK) * a_stride;
    int64_t e = 0;
    for (int l = 0; l < LANES; l++)
        for (int64_t b = l; b < nb; b += LANES, e++)
            for (int t = 0; t < CHUNK; t++) {
                const ty_act_q8_0x *x = (const ty_act_q8_0x *)(rows + (size_t)t * a_stride) + b;
                const __m256i q = _mm256_loadu_si256((const __m256i *)x->qs);
                _mm256_store_si256((__m256i *)(qs + (size_t)e * PANEL_TILE + 32 * t), q);
                d[e * CHUNK + t] = x->d;
            }
}

NO_UBSAN static void gemm_q8_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) {
    amx_gemm(TOY_TYPE_Q8_0, TOY_TYPE_Q8_0, n_cols, w, n_rows, a, as, n_a, NULL, y, ys);
}
NO_UBSAN static void gemm_q4_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) {
    amx_gemm(TOY_TYPE_Q4_0, TOY_TYPE_Q4_0, n_cols, w, n_rows, a, as, n_a, NULL, y, ys);
}
NO_UBSAN static void gemm_q4_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) {
    amx_gemm(TOY_TYPE_Q4_K, TOY_TYPE_Q4_K, n_cols, w, n_rows, a, as, n_a, NULL, y, ys);
}
NO_UBSAN static void gemm_q5_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) {
    amx_gemm(TOY_TYPE_Q5_K, TOY_TYPE_Q5_K, n_cols, w, n_rows, a, as, n_a, NULL, y, ys);
}
NO_UBSAN static void gemm_q6_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) {
    amx_gemm(TOY_TYPE_Q6_K, TOY_TYPE_Q6_K, n_cols, w, n_rows, a, as, n_a, NULL, y, ys);
}
NO_UBSAN static void gemm_iq4_xsx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as,
                                  int64_t n_a, float *y, size_t ys) {
    amx_gemm(TOY_TYPE_IQ4_XS, TOY_TYPE_IQ4_XS, n_cols, w, n_rows, a, as, n_a, NULL, y, ys);
}
NO_UBSAN static void gemm_q4_1x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                                float *y, size_t ys) {
    amx_gemm(TOY_TYPE_Q4_1, TOY_TYPE_Q4_1, n_cols, w, n_rows, a, as, n_a, NULL, y, ys);
}
NO_UBSAN static void gemm_iq4_nlx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as,
                                  int64_t n_a, float *y, size_t ys) {
    amx_gemm(TOY_TYPE_IQ4_NL, TOY_TYPE_IQ4_NL, n_cols, w, n_rows, a, as, n_a, NULL, y, ys);
}
NO_UBSAN static void gemm_q8_0x_tiled(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as,
                                      int64_t n_a, const void *tiled, float *y, size_t ys) {
    amx_gemm(TOY_TYPE_Q8_0, TOY_TYPE_Q8_0, n_cols, w, n_rows, a, as, n_a, tiled, y, ys);
}
NO_UBSAN static void gemm_q4_0x_tiled(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as,
                                      int64_t n_a, const void *tiled, float *y, size_t ys) {
    amx_gemm(TOY_TYPE_Q4_0, TOY_TYPE_Q4_0, n_cols, w, n_rows, a, as, n_a, tiled, y, ys);
}
NO_UBSAN static void gemm_iq4_nlx_tiled(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as,
                                        int64_t n_a, const void *tiled, float *y, size_t ys) {
    amx_gemm(TOY_TYPE_IQ4_NL, TOY_TYPE_IQ4_NL, n_cols, w, n_rows, a, as, n_a, tiled, y, ys);
}

/* The activation layouts and quantizers are the VNNI kernels' (the same packed weights). */
static const ty_packed_kernel kernels[] = {
    {TOY_TYPE_Q8_0, TY_PACKED_ACT_Q8_0, gemm_q8_0x, q8_tiled_bytes, q8_tile_act, gemm_q8_0x_tiled},
    {TOY_TYPE_Q4_0, TY_PACKED_ACT_Q4_0, gemm_q4_0x, q8_tiled_bytes, q8_tile_act, gemm_q4_0x_tiled},
    TY_PACKED(Q4_K, gemm_q4_Kx),
    TY_PACKED(Q5_K, gemm_q5_Kx),
    TY_PACKED(Q6_K, gemm_q6_Kx),
    {TOY_TYPE_IQ4_NL, TY_PACKED_ACT_IQ4_NL, gemm_iq4_nlx, q8_tiled_bytes, q8_tile_act, gemm_iq4_nlx_tiled},
    TY_PACKED(Q4_1, gemm_q4_1x),
    TY_PACKED(IQ4_XS, gemm_iq4_xsx),
};

/* NULL for a type without AMX products: cpu.c then takes the VNNI kernel. */
const ty_packed_kernel *AMX_ENTRY(int type) {
    return ty_packed_find(kernels, sizeof kernels / sizeof kernels[0], type);
}

TOY_TARGET_END
#endif /* __x86_64__ */
