/* packed_avx2.c — AVX2 products of packed Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS weights (packed.h) with up to 4
 * activation rows at a time, for CPUs without AVX-512 VNNI, and their AVX-VNNI variant
 * (ty_packed_avxvnni: Q8_0 and Q4_0 by vpdpbusd on ymm); bit-identical to the scalar
 * reference (packed.c).
 *
 * The layout is the AVX-512 one: a group of 16 rows is taken as two halves of 8, each
 * 32-byte half of a 64-byte row vector holding four bytes of each of 8 rows per 32-bit
 * lane. Without vpdpbusd the bytes go through vpmaddubsw (unsigned times signed bytes,
 * adjacent pairs summed into 16 bits, saturating), which must never saturate. So every
 * weight byte is split into nibbles, at most 15: a pair of products is then at most
 * 2 * 15 * 128 = 3840 and eight of them add up in 16 bits without overflow (30720).
 *   Q4_0: the nibbles are the file's (weights + 8); eight vpmaddubsw (low nibbles
 *         against activation bytes 4g.., high against 16 + 4g..) summed in 16 bits,
 *         one vpmaddwd by ones, plus the start -8 * sum a.
 *   Q8_0: the stored byte is weight + 128; flipped back to the signed weight w, the
 *         product goes through vpmaddubsw as |w| (at most 128, unsigned) times a sign(w)
 *         (vpsignb; activations are within +-127), a pair at most 2 * 128 * 127 = 32512,
 *         then vpmaddwd by ones. |w| and w are made once per weight vector for all the
 *         activation rows of a tile: four operations a vector and row, against seven
 *         for splitting the byte into nibbles.
 *   Q4_K, Q5_K, Q6_K: nibbles (Q5_K: five-bit, Q6_K: six-bit bytes) summed per
 *         sub-block, then vpmaddwd by the scale (the sections below).
 *   IQ4_NL, IQ4_XS: the levels (vpshufb on the nibbles, within -127..113) as Q8_0's
 *         weights are.
 * The integer sums are exact, so they equal vpdpbusd's; the float epilogue and the lane
 * order are the reference's. Compiled with AVX2, FMA and F16C enabled (the AVX-VNNI
 * products with AVX-VNNI too); called only after ty_cpu_isa() found them. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "packed.h"
#include "simd.h"

#if defined(__x86_64__)

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define LANES 8 /* the reduction shape's block lanes */
#define TILE 4  /* activation rows per pass: sixteen ymm registers */
/* Q8_0's sums take fewer registers: five rows a pass share each |w| and w (faster on
 * prompts than four) */
#define TILE_Q8 5
#define TILE_MAX 5
#define Q8_BLOCK_BYTES 544
#define Q4_BLOCK_BYTES 288
/* Q8_0 / Q4_0 weights are read 2 KB ahead: the vpmaddubsw products take more
 * instructions per byte than vpdpbusd, and without it the out-of-order window held too
 * few loads to keep memory busy in decode. */
#define PREFETCH_BYTES 2048
#ifndef DECODE_STREAMS
#define DECODE_STREAMS 4 /* groups read side by side in decode where ty_packed_decode_streams() says so */
#endif

TOY_ALWAYS_INLINE int32_t rd32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The low and high nibbles of vector g of half h of a packed Q4_0 block */
TOY_TARGET_BEGIN(TOY_FEATURES_AVX2)
TOY_ALWAYS_INLINE void q4_nibbles(const uint8_t *blk, int g, int h, __m256i *lo, __m256i *hi) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * g + 32 * h));
    *lo = _mm256_and_si256(v, low);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
}
TOY_TARGET_END

/* AVX-VNNI (ty_packed_avxvnni): the Q8_0 and Q4_0 sums take one vpdpbusd (VEX, on ymm)
 * per weight vector and row instead of vpmaddubsw's detour, as the AVX-512 kernels do on
 * zmm. Only these leaves and the functions that instantiate the products with them are
 * compiled with AVX-VNNI, so that no compiler fuses the AVX2 products' vpmaddwd + vpaddd
 * into vpdpwssd. The leaves are static inline, not always-inline: an always-inline
 * function of a wider target is refused in the AVX2 bodies that call it, even in the
 * branch that the AVX2 products drop; the VNNI products inline them (flatten). */
TOY_TARGET_BEGIN(TOY_FEATURES_AVXVNNI)

/* The exact sums of 8 rows (half h of a packed Q4_0 or Q8_0 block) against n_a
 * activation rows (block b of each), by vpdpbusd from the activation's start, as the
 * AVX-512 kernel: Q8_0's stored bytes (weight + 128) against the activation bytes;
 * Q4_0's nibbles (weight + 8) against bytes 4g.. and 16 + 4g.., from start / 16. */
static inline void q4_half_sums_vnni(const uint8_t *blk, int h, const uint8_t *a, size_t a_stride, int64_t b, const int n_a,
                                     __m256i *sumi) {
    TOY_UNROLL8
    for (int j = 0; j < n_a; j++) {
        const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
        sumi[j] = _mm256_set1_epi32(x->start / 16);
    }
    TOY_UNROLL8
    for (int g = 0; g < 4; g++) {
        __m256i lo, hi;
        q4_nibbles(blk, g, h, &lo, &hi);
        TOY_UNROLL8
        for (int j = 0; j < n_a; j++) {
            const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
            sumi[j] = _mm256_dpbusd_avx_epi32(sumi[j], lo, _mm256_set1_epi32(rd32(x->qs + 4 * g)));
            sumi[j] = _mm256_dpbusd_avx_epi32(sumi[j], hi, _mm256_set1_epi32(rd32(x->qs + 16 + 4 * g)));
        }
    }
}

static inline void q8_half_sums_vnni(const uint8_t *blk, int h, const uint8_t *a, size_t a_stride, int64_t b, const int n_a,
                                     __m256i *sumi) {
    TOY_UNROLL8
    for (int j = 0; j < n_a; j++) {
        const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
        sumi[j] = _mm256_set1_epi32(x->start);
    }
    TOY_UNROLL8
    for (int k = 0; k < 8; k++) {
        const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * k + 32 * h));
        TOY_UNROLL8
        for (int j = 0; j < n_a; j++) {
            const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
            sumi[j] = _mm256_dpbusd_avx_epi32(sumi[j], w, _mm256_set1_epi32(rd32(x->qs + 4 * k)));
        }
    }
}
TOY_TARGET_END

TOY_TARGET_BEGIN(TOY_FEATURES_AVX2)

/* Decode's fetch of the block two ahead of blk, spread over the n_steps steps of a
 * block: step s takes its s-th share of the lines. A block's many instructions leave
 * time to fetch it, and all its lines at once at a block's start queued behind each
 * other (streaming Q6_K and Q4_K from memory was slower that way). */
TOY_ALWAYS_INLINE void prefetch_share(const uint8_t *blk, size_t block_bytes, int step, int n_steps) {
    const size_t per = (block_bytes / 64 + (size_t)n_steps - 1) / (size_t)n_steps * 64;
    for (size_t c = per * (size_t)step; c < per * (size_t)(step + 1) && c < block_bytes; c += 64)
        _mm_prefetch((const char *)blk + 2 * block_bytes + c, _MM_HINT_T0);
}
/* The exact sums of 8 rows (half h of a packed Q4_0 block) against n_a activation rows
 * (block b of each): each vector's nibbles once, against every row. */
TOY_ALWAYS_INLINE void q4_half_sums(const uint8_t *blk, int h, const uint8_t *a, size_t a_stride, int64_t b, const int n_a,
                         __m256i *sumi) {
    __m256i s[TILE_MAX];
    TOY_UNROLL8
    for (int j = 0; j < n_a; j++) s[j] = _mm256_setzero_si256();
    _Pragma("GCC unroll 1")
    for (int g = 0; g < 4; g++) {
        __m256i lo, hi;
        q4_nibbles(blk, g, h, &lo, &hi);
        TOY_UNROLL8
        for (int j = 0; j < n_a; j++) {
            const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
            s[j] = _mm256_add_epi16(s[j], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(rd32(x->qs + 4 * g))));
            s[j] = _mm256_add_epi16(s[j], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(rd32(x->qs + 16 + 4 * g))));
        }
    }
    /* -8 * sum a is the Q8_0 start / 16, exact: an arithmetic shift */
    TOY_UNROLL8
    for (int j = 0; j < n_a; j++) {
        const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
        sumi[j] = _mm256_add_epi32(_mm256_madd_epi16(s[j], _mm256_set1_epi16(1)), _mm256_srai_epi32(_mm256_set1_epi32(x->start), 4));
    }
}

/* The same for half h of a packed Q8_0 block against n_a activation rows (block b of
 * each): the weights' sign and magnitude once per vector, then per row vpsignb,
 * vpmaddubsw, vpmaddwd and an add. */
TOY_ALWAYS_INLINE void q8_half_sums(const uint8_t *blk, int h, const uint8_t *a, size_t a_stride, int64_t b, const int n_a,
                         __m256i *sumi) {
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    { /* the first vector's products are the sums, not added to zeros */
        const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * h)), flip);
        const __m256i w_abs = _mm256_abs_epi8(w);
        TOY_UNROLL8
        for (int j = 0; j < n_a; j++) {
            const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
            const __m256i as = _mm256_sign_epi8(_mm256_set1_epi32(rd32(x->qs)), w);
            sumi[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, as), ones);
        }
    }
    /* not unrolled: with all eight vectors' |w| and w live, the tile's sums spill */
    _Pragma("GCC unroll 1")
    for (int k = 1; k < 8; k++) {
        const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * k + 32 * h)), flip);
        const __m256i w_abs = _mm256_abs_epi8(w);
        TOY_UNROLL8
        for (int j = 0; j < n_a; j++) {
            const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
            const __m256i as = _mm256_sign_epi8(_mm256_set1_epi32(rd32(x->qs + 4 * k)), w);
            sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, as), ones));
        }
    }
}

/* IQ4_NL (Q4_0's layout): the levels of half h's nibbles (vpshufb) as signed weights
 * through vpmaddubsw as Q8_0's without VNNI, |level| against the activation times the
 * level's sign: a pair at most 2 * 127 * 127 (activations within +-127). Weight k of
 * each row's four is the low nibbles of vector k for k < 4, the high ones of k - 4. */
TOY_ALWAYS_INLINE void nl_half_sums(const uint8_t *blk, int h, const uint8_t *a, size_t a_stride, int64_t b, const int n_a,
                         __m256i *sumi) {
    const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ty_iq4nl_values));
    TOY_UNROLL8
    for (int j = 0; j < n_a; j++) sumi[j] = _mm256_setzero_si256();
    _Pragma("GCC unroll 1")
    for (int g = 0; g < 4; g++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * g + 32 * h));
        const __m256i w0 = _mm256_shuffle_epi8(table, _mm256_and_si256(v, low));
        const __m256i w1 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
        const __m256i u0 = _mm256_abs_epi8(w0), u1 = _mm256_abs_epi8(w1);
        TOY_UNROLL8
        for (int j = 0; j < n_a; j++) {
            const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
            const __m256i a0 = _mm256_sign_epi8(_mm256_set1_epi32(rd32(x->qs + 4 * g)), w0);
            const __m256i a1 = _mm256_sign_epi8(_mm256_set1_epi32(rd32(x->qs + 16 + 4 * g)), w1);
            sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u0, a0), ones),
                                                                 _mm256_madd_epi16(_mm256_maddubs_epi16(u1, a1), ones)));
        }
    }
}

/* The 8 lanes of each (half, activation row) combined pairwise, as in the reference,
 * and the rows of each half stored (rows counted from the first half's first). */
TOY_ALWAYS_INLINE void store_halves(__m256 lane[LANES][2][TILE_MAX], const int n_h, int rows, const int n_a, float *y,
                         size_t y_stride) {
    TOY_UNROLL8
    for (int i = 0; i < n_h; i++) {
        const int r = rows - 8 * i; /* rows of this half, when positive */
        if (r <= 0) break;
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        TOY_UNROLL8
        for (int j = 0; j < n_a; j++) {
            __m256 l0 = _mm256_add_ps(lane[0][i][j], lane[4][i][j]), l1 = _mm256_add_ps(lane[1][i][j], lane[5][i][j]);
            __m256 l2 = _mm256_add_ps(lane[2][i][j], lane[6][i][j]), l3 = _mm256_add_ps(lane[3][i][j], lane[7][i][j]);
            l0 = _mm256_add_ps(l0, l2);
            l1 = _mm256_add_ps(l1, l3);
            _mm256_maskstore_ps(y + (size_t)j * y_stride + 8 * i, keep, _mm256_add_ps(l0, l1));
        }
    }
}

/* Block b of a group (its bytes at blk), halves [h0, h0 + n_h), times n_a activation
 * rows, into acc; with vpdpbusd where vnni. */
TOY_ALWAYS_INLINE void q8_halves_block(const bool vnni, const uint8_t *blk, int64_t b, const int h0, const int n_h,
                                       const uint8_t *a, size_t a_stride, const int n_a, const bool q4, const bool nl,
                                       __m256 acc[2][TILE_MAX]) {
    const size_t block_bytes = q4 || nl ? Q4_BLOCK_BYTES : Q8_BLOCK_BYTES;
    if (n_h == 2) /* decode: from memory */
        for (size_t c = 0; c < block_bytes; c += 64) _mm_prefetch((const char *)blk + c + PREFETCH_BYTES, _MM_HINT_T0);
    TOY_UNROLL8
    for (int i = 0; i < n_h; i++) {
        const int h = h0 + i;
        const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
        __m256i sumi[TILE_MAX];
        if (q4 && vnni) q4_half_sums_vnni(blk, h, a, a_stride, b, n_a, sumi);
        else if (q4) q4_half_sums(blk, h, a, a_stride, b, n_a, sumi);
        else if (nl) nl_half_sums(blk, h, a, a_stride, b, n_a, sumi);
        else if (vnni) q8_half_sums_vnni(blk, h, a, a_stride, b, n_a, sumi);
        else q8_half_sums(blk, h, a, a_stride, b, n_a, sumi);
        TOY_UNROLL8
        for (int j = 0; j < n_a; j++) {
            const ty_act_q8_0x *x = ty_act_q8_0x_at(a, a_stride, j, b);
            const __m256 d = _mm256_mul_ps(wd, _mm256_set1_ps(x->d));
            acc[i][j] = _mm256_add_ps(acc[i][j], _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[j])));
        }
    }
}

/* Q4_K (packed.h): half h of a block has its 8 d at 16 h, dmin at 32 + 16 h, scale dwords
 * at 64 + 64 s + 32 h, nibbles of sub-block pair p, vector k at 256 + 512 p + 64 k + 32 h.
 * The nibbles (at most 15) go through vpmaddubsw, the eight vectors of a sub-block
 * summed in 16 bits (at most 30720), and vpmaddwd by the sub-block's scale in both
 * 16-bit halves of each row's lane gives scale * sum in 32 bits at once. */
#define Q4K_BLOCK_BYTES 2304
/* Q5_K: the Q4_K block, then the fifth bits, vector k at 2304 + 64 k + 32 h. Its bytes
 * reach 31, so a pair of products reaches 7936 and only four vectors add up in 16 bits
 * (31744) before vpmaddwd. */
#define Q5K_BLOCK_BYTES 2816
#define Q5K_HIGH_BITS 2304

/* Bit j of each byte of qh moved to bit 4, the other bits cleared (Q5_K's fifth bits of
 * sub-block j; a 16-bit shift never carries another byte's bit j there). */
TOY_ALWAYS_INLINE __m256i q5k_high(__m256i qh, int j) {
    const __m256i v = j <= 4 ? _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - j)) : _mm256_srl_epi16(qh, _mm_cvtsi32_si128(j - 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

TOY_ALWAYS_INLINE __m256i srl32(__m256i v, int n) {
    return _mm256_srl_epi32(v, _mm_cvtsi32_si128(n));
}

/* The six-bit scale (min: lo = the min dword) of sub-block j of 8 rows (kernels.c
 * k4_scale_min). */
TOY_ALWAYS_INLINE __m256i q4k_field(__m256i lo, __m256i s0, __m256i s2, int j, bool min) {
    if (j < 4) return _mm256_and_si256(srl32(lo, 8 * j), _mm256_set1_epi32(63));
    const __m256i top = _mm256_and_si256(srl32(min ? lo : s0, 8 * (j - 4) + 6), _mm256_set1_epi32(3));
    const __m256i low = _mm256_and_si256(srl32(s2, 8 * (j - 4) + (min ? 4 : 0)), _mm256_set1_epi32(15));
    return _mm256_or_si256(low, _mm256_slli_epi32(top, 4));
}

/* Block b of a group (its bytes at blk), halves [h0, h0 + n_h), times n_a activation
 * rows, into acc: the body of q4k_halves. */
TOY_ALWAYS_INLINE void q4k_halves_block(const uint8_t *blk, int64_t b, const int h0, const int n_h, const uint8_t *a,
                             size_t a_stride, const int n_a, const bool q5, __m256 acc[2][TILE_MAX]) {
    const size_t block_bytes = q5 ? Q5K_BLOCK_BYTES : Q4K_BLOCK_BYTES;
    const int span = q5 ? 4 : 8; /* weight vectors summed in 16 bits */
    const __m256i low = _mm256_set1_epi8(0x0f);
    TOY_UNROLL8
    for (int i = 0; i < n_h; i++) {
        if (i == 0 && n_a > 2) /* many instructions a block: fetch two blocks ahead */
            for (size_t c = 0; c < block_bytes; c += 64) _mm_prefetch((const char *)blk + c + 2 * block_bytes, _MM_HINT_T0);
        const int h = h0 + i;
        const __m256i s0 = _mm256_loadu_si256((const __m256i *)(blk + 64 + 32 * h));
        const __m256i s1 = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
        const __m256i s2 = _mm256_loadu_si256((const __m256i *)(blk + 192 + 32 * h));
        __m256i isum[TILE_MAX];
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) isum[t] = _mm256_setzero_si256();
        if (n_a <= 2) {
            /* decode: sub-blocks 2p (low nibbles) and 2p + 1 (high) from one load of
             * their bytes, a quarter fewer instructions; a prefill tile's doubled sums
             * would spill */
            for (int p = 0; p < 4; p++) {
                prefetch_share(blk, block_bytes, 4 * i + p, 8);
                const uint8_t *q = blk + 256 + 512 * p + 32 * h, *qh = blk + Q5K_HIGH_BITS + 32 * h;
                __m256i sc16[2];
                TOY_UNROLL8
                for (int e = 0; e < 2; e++) {
                    const __m256i sc = q4k_field(s0, s0, s2, 2 * p + e, false);
                    sc16[e] = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
                }
                for (int k0 = 0; k0 < 8; k0 += span) {
                    __m256i s16[2][TILE_MAX];
                    TOY_UNROLL8
                    for (int t = 0; t < n_a; t++) s16[0][t] = s16[1][t] = _mm256_setzero_si256();
                    _Pragma("GCC unroll 2")
                    for (int k = k0; k < k0 + span; k++) {
                        const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * k));
                        __m256i w0 = _mm256_and_si256(v, low), w1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                        if (q5) {
                            const __m256i vh = _mm256_loadu_si256((const __m256i *)(qh + 64 * k));
                            w0 = _mm256_or_si256(w0, q5k_high(vh, 2 * p));
                            w1 = _mm256_or_si256(w1, q5k_high(vh, 2 * p + 1));
                        }
                        TOY_UNROLL8
                        for (int t = 0; t < n_a; t++) {
                            const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
                            const int8_t *qs = x->qs + 64 * p + 4 * k;
                            s16[0][t] = _mm256_add_epi16(s16[0][t], _mm256_maddubs_epi16(w0, _mm256_set1_epi32(rd32(qs))));
                            s16[1][t] = _mm256_add_epi16(s16[1][t], _mm256_maddubs_epi16(w1, _mm256_set1_epi32(rd32(qs + 32))));
                        }
                    }
                    TOY_UNROLL8
                    for (int e = 0; e < 2; e++)
                        TOY_UNROLL8
                        for (int t = 0; t < n_a; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[e][t], sc16[e]));
                }
            }
        } else {
            /* sub-blocks in pairs: the low nibbles (even j) need no shift */
            for (int j0 = 0; j0 < 8; j0 += 2) {
                TOY_UNROLL8
                for (int j = j0; j < j0 + 2; j++) {
                    const __m256i sc = q4k_field(s0, s0, s2, j, false);
                    const __m256i sc16 = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
                    const uint8_t *q = blk + 256 + 512 * (j / 2) + 32 * h, *qh = blk + Q5K_HIGH_BITS + 32 * h;
                    for (int k0 = 0; k0 < 8; k0 += span) {
                        /* two vectors at a time, each against the tile's rows: all eight live beside
                         * the tile's sums spill, one at a time pays the loop's overhead */
                        __m256i s16[TILE_MAX];
                        TOY_UNROLL8
                        for (int t = 0; t < n_a; t++) s16[t] = _mm256_setzero_si256();
                        _Pragma("GCC unroll 2")
                        for (int k = k0; k < k0 + span; k++) {
                            const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 64 * k));
                            __m256i w = _mm256_and_si256(j > j0 ? _mm256_srli_epi16(v, 4) : v, low);
                            if (q5) w = _mm256_or_si256(w, q5k_high(_mm256_loadu_si256((const __m256i *)(qh + 64 * k)), j));
                            TOY_UNROLL8
                            for (int t = 0; t < n_a; t++) {
                                const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
                                const __m256i as = _mm256_set1_epi32(rd32(x->qs + 32 * j + 4 * k));
                                s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(w, as));
                            }
                        }
                        TOY_UNROLL8
                        for (int t = 0; t < n_a; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc16));
                    }
                }
            }
        }
        __m256i mp[4];
        TOY_UNROLL8
        for (int p = 0; p < 4; p++)
            mp[p] = _mm256_or_si256(q4k_field(s1, s0, s2, 2 * p, true),
                                    _mm256_slli_epi32(q4k_field(s1, s0, s2, 2 * p + 1, true), 16));
        const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
        const __m256 wdm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) {
            const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
            __m256i summs = _mm256_madd_epi16(mp[0], _mm256_set1_epi32(rd32(x->msum)));
            TOY_UNROLL8
            for (int p = 1; p < 4; p++)
                summs = _mm256_add_epi32(summs, _mm256_madd_epi16(mp[p], _mm256_set1_epi32(rd32(x->msum + 2 * p))));
            const __m256 ad = _mm256_set1_ps(x->d);
            const __m256 d = _mm256_mul_ps(wd, ad), dm = _mm256_mul_ps(wdm, ad);
            const __m256 scaled = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[t]));
            const __m256 mins = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(summs));
            acc[i][t] = _mm256_add_ps(acc[i][t], _mm256_sub_ps(scaled, mins));
        }
    }
}

/* Q6_K (packed.h): half hf of a block has its 8 d at 16 hf, the int8 scales of sub-block g
 * at 32 + 16 g + 8 hf, ql vector [h][s][k] at 288 + 1024 h + 512 s + 64 k + 32 hf, qh
 * vector [h][k] at 2336 + 512 h + 64 k + 32 hf. A weight plus 32 is at most 63: a pair of
 * products is at most 16128 and two pairs add up in 16 bits (32256), so each 16-weight
 * sub-block is two vpmaddwd by its scale; the 32 comes back as 32 * sum scale * bsum. */
#define Q6K_BLOCK_BYTES 3360

/* The scale of sub-block g of half hf's 8 rows in both 16-bit halves of each row's lane,
 * for vpmaddwd against the rows' 16-bit pair sums. */
TOY_ALWAYS_INLINE __m256i q6k_scale16(const uint8_t *blk, int g, int hf) {
    const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * g + 8 * hf)));
    return _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(sc, 16));
}

/* Block b of a group (its bytes at blk), halves [h0, h0 + n_h), times n_a activation
 * rows, into acc: the body of q6k_halves. */
TOY_ALWAYS_INLINE void q6k_halves_block(const uint8_t *blk, int64_t b, const int h0, const int n_h, const uint8_t *a,
                             size_t a_stride, const int n_a, __m256 acc[2][TILE_MAX]) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), high2 = _mm256_set1_epi8(0x30);
    TOY_UNROLL8
    for (int i = 0; i < n_h; i++) {
        if (i == 0 && n_a > 2) /* many instructions a block: fetch two blocks ahead */
            for (int c = 0; c < Q6K_BLOCK_BYTES; c += 64) _mm_prefetch((const char *)blk + c + 2 * Q6K_BLOCK_BYTES, _MM_HINT_T0);
        const int hf = h0 + i;
        __m256i isum[TILE_MAX];
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) isum[t] = _mm256_setzero_si256();
        if (n_a <= 2) {
            /* decode: each 32-byte ql and qh vector loaded once for the four weight
             * vectors it holds, with shifts by constants; the block two ahead fetched a
             * share a step (prefetch_share) */
            TOY_UNROLL8
            for (int h = 0; h < 2; h++)
                TOY_UNROLL8
                for (int kk = 0; kk < 2; kk++) {
                    __m256i sc16[4];
                    TOY_UNROLL8
                    for (int m = 0; m < 4; m++) {
                        sc16[m] = q6k_scale16(blk, 8 * h + 2 * m + kk, hf);
                    }
                    const uint8_t *ql = blk + 288 + 1024 * h + 32 * hf, *qh = blk + 2336 + 512 * h + 32 * hf;
                    TOY_UNROLL8
                    for (int k = 4 * kk; k < 4 * kk + 4; k += 2) {
                        const int step = 8 * i + 4 * h + 2 * kk + (k - 4 * kk) / 2; /* of 16 a block */
                        prefetch_share(blk, Q6K_BLOCK_BYTES, step, 16);
                        __m256i l0[2], l1[2], vh[2];
                        TOY_UNROLL8
                        for (int e = 0; e < 2; e++) {
                            l0[e] = _mm256_loadu_si256((const __m256i *)(ql + 64 * (k + e)));
                            l1[e] = _mm256_loadu_si256((const __m256i *)(ql + 512 + 64 * (k + e)));
                            vh[e] = _mm256_loadu_si256((const __m256i *)(qh + 64 * (k + e)));
                        }
                        TOY_UNROLL8
                        for (int m = 0; m < 4; m++) {
                            __m256i u[2];
                            TOY_UNROLL8
                            for (int e = 0; e < 2; e++) {
                                const __m256i qv = m % 2 ? l1[e] : l0[e];
                                const __m256i lo = m < 2 ? qv : _mm256_srli_epi16(qv, 4);
                                const __m256i hi = m == 0   ? _mm256_slli_epi16(vh[e], 4)
                                                   : m == 1 ? _mm256_slli_epi16(vh[e], 2)
                                                   : m == 2 ? vh[e]
                                                            : _mm256_srli_epi16(vh[e], 2);
                                u[e] = _mm256_or_si256(_mm256_and_si256(lo, low4), _mm256_and_si256(hi, high2));
                            }
                            TOY_UNROLL8
                            for (int t = 0; t < n_a; t++) {
                                const block_q8_K *x = (const block_q8_K *)(a + (size_t)t * a_stride) + b;
                                const int8_t *qs = x->qs + 128 * h + 32 * m + 4 * k;
                                const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(u[0], _mm256_set1_epi32(rd32(qs))),
                                                                   _mm256_maddubs_epi16(u[1], _mm256_set1_epi32(rd32(qs + 4))));
                                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, sc16[m]));
                            }
                        }
                    }
                }
        } else {
            for (int g = 0; g < 16; g++) {
                const int h = g / 8, m = g % 8 / 2, kk = g % 2;
                const __m256i sc16 = q6k_scale16(blk, g, hf);
                const __m128i lo_shift = _mm_cvtsi32_si128(4 * (m / 2));
                const __m128i hi_shift = _mm_cvtsi32_si128(m < 2 ? 4 - 2 * m : 2 * m - 4);
                const uint8_t *ql = blk + 288 + 1024 * h + 512 * (m % 2) + 32 * hf, *qh = blk + 2336 + 512 * h + 32 * hf;
                __m256i u[4];
                TOY_UNROLL8
                for (int k = 0; k < 4; k++) {
                    const int kv = 4 * kk + k;
                    const __m256i vl = _mm256_loadu_si256((const __m256i *)(ql + 64 * kv));
                    const __m256i vh = _mm256_loadu_si256((const __m256i *)(qh + 64 * kv));
                    const __m256i hi = m < 2 ? _mm256_sll_epi16(vh, hi_shift) : _mm256_srl_epi16(vh, hi_shift);
                    u[k] = _mm256_or_si256(_mm256_and_si256(_mm256_srl_epi16(vl, lo_shift), low4), _mm256_and_si256(hi, high2));
                }
                TOY_UNROLL8
                for (int t = 0; t < n_a; t++) {
                    const block_q8_K *x = (const block_q8_K *)(a + (size_t)t * a_stride) + b;
                    const int8_t *qs = x->qs + 16 * g;
                    const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(u[0], _mm256_set1_epi32(rd32(qs))),
                                                         _mm256_maddubs_epi16(u[1], _mm256_set1_epi32(rd32(qs + 4))));
                    const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(u[2], _mm256_set1_epi32(rd32(qs + 8))),
                                                         _mm256_maddubs_epi16(u[3], _mm256_set1_epi32(rd32(qs + 12))));
                    isum[t] = _mm256_add_epi32(isum[t],
                                               _mm256_add_epi32(_mm256_madd_epi16(p01, sc16), _mm256_madd_epi16(p23, sc16)));
                }
            }
        }
        /* the -32 of every weight: 32 * sum over g of scale * bsum, by pairs of g */
        __m256i corr[TILE_MAX];
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) corr[t] = _mm256_setzero_si256();
        for (int p = 0; p < 8; p++) {
            const __m256i s0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 32 * p + 8 * hf)));
            const __m256i s1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 48 + 32 * p + 8 * hf)));
            const __m256i pair = _mm256_or_si256(_mm256_and_si256(s0, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s1, 16));
            TOY_UNROLL8
            for (int t = 0; t < n_a; t++) {
                const block_q8_K *x = (const block_q8_K *)(a + (size_t)t * a_stride) + b;
                corr[t] = _mm256_add_epi32(corr[t], _mm256_madd_epi16(pair, _mm256_set1_epi32(rd32(x->bsums + 2 * p))));
            }
        }
        const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * hf)));
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) {
            const block_q8_K *x = (const block_q8_K *)(a + (size_t)t * a_stride) + b;
            const __m256i sumi = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr[t], 5));
            const __m256 d = _mm256_mul_ps(wd, _mm256_set1_ps(x->d));
            acc[i][t] = _mm256_add_ps(acc[i][t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi)));
        }
    }
}

/* IQ4_XS (packed.h): half h of a block has its 8 d at 16 h, scales_h at 32 + 16 h, scale
 * dwords at 64 + 32 h, nibbles of sub-block j, vector g at 128 + 256 j + 64 g + 32 h. The
 * levels (vpshufb) go through vpmaddubsw as Q8_0's weights do, |level| against the
 * activation times the level's sign (activations are within +-127, levels within
 * -127..113: a pair is at most 2 * 127 * 127), and vpmaddwd by the sub-block's signed
 * scale in both 16-bit halves of each lane gives scale * sum in 32 bits. */
#define IQ4XS_BLOCK_BYTES 2176

/* Block b of a group (its bytes at blk), halves [h0, h0 + n_h), times n_a activation
 * rows, into acc: the body of iq4xs_halves. */
TOY_ALWAYS_INLINE void iq4xs_halves_block(const uint8_t *blk, int64_t b, const int h0, const int n_h, const uint8_t *a,
                               size_t a_stride, const int n_a, __m256 acc[2][TILE_MAX]) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ty_iq4nl_values));
    TOY_UNROLL8
    for (int i = 0; i < n_h; i++) {
        if (i == 0 && n_a > 2)
            for (int c = 0; c < IQ4XS_BLOCK_BYTES; c += 64)
                _mm_prefetch((const char *)blk + c + 2 * IQ4XS_BLOCK_BYTES, _MM_HINT_T0);
        const int h = h0 + i;
        const __m256i sl = _mm256_loadu_si256((const __m256i *)(blk + 64 + 32 * h));
        const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
        __m256i isum[TILE_MAX];
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) isum[t] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            if (n_a <= 2) prefetch_share(blk, IQ4XS_BLOCK_BYTES, 8 * i + j, 16);
            const __m256i sc_low = _mm256_and_si256(srl32(sl, 4 * j), _mm256_set1_epi32(15));
            const __m256i sc_high = _mm256_and_si256(srl32(sh, 2 * j), _mm256_set1_epi32(3));
            const __m256i sc = _mm256_sub_epi32(_mm256_or_si256(sc_low, _mm256_slli_epi32(sc_high, 4)),
                                                _mm256_set1_epi32(32));
            const __m256i sc16 = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xffff)),
                                                 _mm256_slli_epi32(sc, 16));
            _Pragma("GCC unroll 2")
            for (int g = 0; g < 4; g++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 128 + 256 * j + 64 * g + 32 * h));
                const __m256i w0 = _mm256_shuffle_epi8(table, _mm256_and_si256(v, low));
                const __m256i w1 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
                const __m256i u0 = _mm256_abs_epi8(w0), u1 = _mm256_abs_epi8(w1);
                TOY_UNROLL8
                for (int t = 0; t < n_a; t++) {
                    const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
                    const int8_t *qs = x->qs + 32 * j + 4 * g;
                    const __m256i a0 = _mm256_sign_epi8(_mm256_set1_epi32(rd32(qs)), w0);
                    const __m256i a1 = _mm256_sign_epi8(_mm256_set1_epi32(rd32(qs + 16)), w1);
                    const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u0, a0), sc16),
                                                       _mm256_madd_epi16(_mm256_maddubs_epi16(u1, a1), sc16));
                    isum[t] = _mm256_add_epi32(isum[t], p);
                }
            }
        }
        const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
        TOY_UNROLL8
        for (int t = 0; t < n_a; t++) {
            const ty_act_q8_Kx *x = ty_act_q8_Kx_at(a, a_stride, t, b);
            const __m256 d = _mm256_mul_ps(wd, _mm256_set1_ps(x->d));
            acc[i][t] = _mm256_add_ps(acc[i][t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[t])));
        }
    }
}

/* the packed type a product is compiled for (a constant in every caller) */
typedef int kind;

/* Block b of a group of the type, halves [h0, h0 + n_h), times n_a activation rows, into
 * acc: vnni, kind, n_h and n_a are constants in each caller. */
TOY_ALWAYS_INLINE void kind_halves_block(const bool vnni, const kind k, const uint8_t *blk, int64_t b, const int h0, const int n_h,
                              const uint8_t *a, size_t a_stride, const int n_a, __m256 acc[2][TILE_MAX]) {
    switch (k) {
    case TOY_TYPE_Q8_0: q8_halves_block(vnni, blk, b, h0, n_h, a, a_stride, n_a, false, false, acc); break;
    case TOY_TYPE_Q4_0: q8_halves_block(vnni, blk, b, h0, n_h, a, a_stride, n_a, true, false, acc); break;
    case TOY_TYPE_IQ4_NL: q8_halves_block(vnni, blk, b, h0, n_h, a, a_stride, n_a, false, true, acc); break;
    case TOY_TYPE_Q4_K: q4k_halves_block(blk, b, h0, n_h, a, a_stride, n_a, false, acc); break;
    case TOY_TYPE_Q5_K: q4k_halves_block(blk, b, h0, n_h, a, a_stride, n_a, true, acc); break;
    case TOY_TYPE_Q6_K: q6k_halves_block(blk, b, h0, n_h, a, a_stride, n_a, acc); break;
    case TOY_TYPE_IQ4_XS: iq4xs_halves_block(blk, b, h0, n_h, a, a_stride, n_a, acc); break;
    }
}

/* Halves [h0, h0 + n_h) of one group (rows of them: rows <= 8 n_h, from row 8 h0) times
 * n_a <= TILE activation rows. Decode takes both halves in one pass (n_h = 2, n_a <= 2),
 * so that each cache line is used whole when it arrives from memory; a tile of more
 * activation rows takes one half at a time, to keep its accumulators in registers.
 * Several groups (n_groups, whole ones but for the last: rows) go side by side in decode,
 * their blocks taken in turn: n_groups streams for the hardware prefetchers (as the
 * AVX-512 groups_tile), each group's operations the same as alone. */
TOY_ALWAYS_INLINE void halves(const bool vnni, const kind k, int64_t nb, const uint8_t *group, size_t group_bytes, const int n_groups,
                   const int h0, const int n_h, int rows, const uint8_t *a, size_t a_stride, const int n_a, float *y,
                   size_t y_stride) {
    const size_t block_bytes = ty_packed_block_bytes(k);
    __m256 lane[DECODE_STREAMS][LANES][2][TILE_MAX];
    const uint8_t *blk = group;
    for (int l = 0; l < LANES; l++) {
        __m256 acc[DECODE_STREAMS][2][TILE_MAX];
        TOY_UNROLL8
        for (int g = 0; g < n_groups; g++)
            TOY_UNROLL8
            for (int i = 0; i < n_h; i++)
                TOY_UNROLL8
                for (int j = 0; j < n_a; j++) acc[g][i][j] = _mm256_setzero_ps();
        for (int64_t b = l; b < nb; b += LANES, blk += block_bytes)
            TOY_UNROLL8
            for (int g = 0; g < n_groups; g++)
                kind_halves_block(vnni, k, blk + (size_t)g * group_bytes, b, h0, n_h, a, a_stride, n_a, acc[g]);
        TOY_UNROLL8
        for (int g = 0; g < n_groups; g++)
            TOY_UNROLL8
            for (int i = 0; i < n_h; i++)
                TOY_UNROLL8
                for (int j = 0; j < n_a; j++) lane[g][l][i][j] = acc[g][i][j];
    }
    TOY_UNROLL8
    for (int g = 0; g < n_groups; g++)
        store_halves(lane[g], n_h, g + 1 < n_groups ? 16 : rows, n_a, y + 16 * g, y_stride);
}

/* The product of one packed type, with vpdpbusd where vnni (Q8_0 and Q4_0): per group,
 * decode (one or two activation rows) in one pass over both halves, larger tiles half by
 * half. */
TOY_ALWAYS_INLINE void packed_gemm(const bool vnni, const kind k, int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride,
                        int64_t n_a, float *y, size_t y_stride) {
    const int64_t nb = n_cols / ty_packed_block_cols(k);
    const int64_t tile = k == TOY_TYPE_Q8_0 ? TILE_Q8 : TILE;
    const uint8_t *group = w, *act = a;
    int64_t r0 = 0;
    if (n_a == 1 && ty_packed_decode_streams() == DECODE_STREAMS) {
        const size_t group_bytes = (size_t)nb * ty_packed_block_bytes(k);
        for (; r0 + 16 * DECODE_STREAMS <= n_rows; r0 += 16 * DECODE_STREAMS, group += DECODE_STREAMS * group_bytes)
            halves(vnni, k, nb, group, group_bytes, DECODE_STREAMS, 0, 2, 16, act, a_stride, 1, y + r0, y_stride);
    }
    for (; r0 < n_rows; r0 += 16, group += (size_t)nb * ty_packed_block_bytes(k)) {
        const int rows = n_rows - r0 < 16 ? (int)(n_rows - r0) : 16;
        if (n_a <= 2) {
            if (n_a == 1) halves(vnni, k, nb, group, 0, 1, 0, 2, rows, act, a_stride, 1, y + r0, y_stride);
            else halves(vnni, k, nb, group, 0, 1, 0, 2, rows, act, a_stride, 2, y + r0, y_stride);
            continue;
        }
        for (int h = 0; h < 2 && 8 * h < rows; h++)
            for (int64_t j0 = 0; j0 < n_a; j0 += tile) {
                const uint8_t *aj = act + (size_t)j0 * a_stride;
                float *yj = y + (size_t)j0 * y_stride + (size_t)(r0 + 8 * h);
                const int rh = rows - 8 * h;
                switch (n_a - j0 < tile ? (int)(n_a - j0) : (int)tile) {
                case 1: halves(vnni, k, nb, group, 0, 1, h, 1, rh, aj, a_stride, 1, yj, y_stride); break;
                case 2: halves(vnni, k, nb, group, 0, 1, h, 1, rh, aj, a_stride, 2, yj, y_stride); break;
                case 3: halves(vnni, k, nb, group, 0, 1, h, 1, rh, aj, a_stride, 3, yj, y_stride); break;
                case 4: halves(vnni, k, nb, group, 0, 1, h, 1, rh, aj, a_stride, 4, yj, y_stride); break;
                default:
                    if (k == TOY_TYPE_Q8_0) halves(vnni, k, nb, group, 0, 1, h, 1, rh, aj, a_stride, TILE_Q8, yj, y_stride);
                    break;
                }
            }
    }
}

static void gemm_q8_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                       float *y, size_t ys) { packed_gemm(false, TOY_TYPE_Q8_0, n_cols, w, n_rows, a, as, n_a, y, ys); }
static void gemm_q4_0x(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                       float *y, size_t ys) { packed_gemm(false, TOY_TYPE_Q4_0, n_cols, w, n_rows, a, as, n_a, y, ys); }
static void gemm_q4_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                       float *y, size_t ys) { packed_gemm(false, TOY_TYPE_Q4_K, n_cols, w, n_rows, a, as, n_a, y, ys); }
static void gemm_q5_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                       float *y, size_t ys) { packed_gemm(false, TOY_TYPE_Q5_K, n_cols, w, n_rows, a, as, n_a, y, ys); }
static void gemm_q6_Kx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                       float *y, size_t ys) { packed_gemm(false, TOY_TYPE_Q6_K, n_cols, w, n_rows, a, as, n_a, y, ys); }
static void gemm_iq4_xsx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                         float *y, size_t ys) { packed_gemm(false, TOY_TYPE_IQ4_XS, n_cols, w, n_rows, a, as, n_a, y, ys); }
static void gemm_iq4_nlx(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t as, int64_t n_a,
                         float *y, size_t ys) { packed_gemm(false, TOY_TYPE_IQ4_NL, n_cols, w, n_rows, a, as, n_a, y, ys); }

static const ty_packed_kernel kernels[] = {
    TY_PACKED(Q8_0, gemm_q8_0x),
    TY_PACKED(Q4_0, gemm_q4_0x),
    TY_PACKED(Q4_K, gemm_q4_Kx),
    TY_PACKED(Q5_K, gemm_q5_Kx),
    TY_PACKED(IQ4_NL, gemm_iq4_nlx),
    TY_PACKED(IQ4_XS, gemm_iq4_xsx),
    TY_PACKED(Q6_K, gemm_q6_Kx),
};

const ty_packed_kernel *ty_packed_avx2(int type) {
    return ty_packed_find(kernels, sizeof kernels / sizeof kernels[0], type);
}

TOY_TARGET_END

/* The AVX-VNNI products: the AVX2 bodies with the vpdpbusd leaves, compiled with AVX-VNNI
 * and flattened so that the leaves are inlined into the loops. */
TOY_TARGET_BEGIN(TOY_FEATURES_AVXVNNI)

__attribute__((flatten)) static void gemm_q8_0x_vnni(int64_t n_cols, const void *w, int64_t n_rows, const void *a,
                                                     size_t as, int64_t n_a, float *y, size_t ys) {
    packed_gemm(true, TOY_TYPE_Q8_0, n_cols, w, n_rows, a, as, n_a, y, ys);
}
__attribute__((flatten)) static void gemm_q4_0x_vnni(int64_t n_cols, const void *w, int64_t n_rows, const void *a,
                                                     size_t as, int64_t n_a, float *y, size_t ys) {
    packed_gemm(true, TOY_TYPE_Q4_0, n_cols, w, n_rows, a, as, n_a, y, ys);
}

static const ty_packed_kernel kernels_vnni[] = {
    TY_PACKED(Q8_0, gemm_q8_0x_vnni),
    TY_PACKED(Q4_0, gemm_q4_0x_vnni),
};

const ty_packed_kernel *ty_packed_avxvnni(int type) {
    const ty_packed_kernel *k = ty_packed_find(kernels_vnni, sizeof kernels_vnni / sizeof kernels_vnni[0], type);
    /* vpdpbusd gains nothing on nibbles, which vpmaddubsw sums eight vectors at a time
     * in 16 bits (TinyLlama-1.1B Q4_K_M prompts: the same speed within noise) */
    return k ? k : ty_packed_avx2(type);
}

TOY_TARGET_END
#endif /* __x86_64__ */
