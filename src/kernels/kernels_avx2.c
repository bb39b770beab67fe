/* kernels_avx2.c — AVX2 + FMA + F16C kernels (compiled with those instructions enabled;
 * called only after ty_cpu_isa() found them).
 *
 * Every function here returns the bits of the scalar reference in kernels.c: it follows
 * the REDUCTION SHAPE documented there. Inside a block the integer sum is exact, so any
 * order of integer adds will do; the float part is reproduced operation by operation:
 * the per-block value v_b from the same separate multiplies and adds (never an FMA),
 * eight blocks' v_b in one __m256 added to one accumulator (lane[b % 8] += v_b), the
 * lanes combined pairwise at the end. The activation quantizers are the scalar ones
 * (they run once per row, not per weight row).
 *
 * Integer dot products use vpmaddubsw (unsigned bytes x signed bytes, pairs summed into
 * int16 with saturation) and vpmaddwd (int16 pairs into int32). Saturation never
 * happens: the unsigned operand is a weight of at most 6 bits, or for signed weights
 * (Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS) |w| <= 128 with the activation carrying the sign,
 * as llama.cpp does. That relies on activation quants being in [-127, 127], which the
 * quantizers guarantee (kernels.c): 2 * 128 * 127 = 32512 < 32767, and negating an
 * activation never wraps.
 *
 * Each type has a section that decodes its block into bytes for vpmaddubsw; one driver
 * for all block types and one for the float rows take the type as a constant argument,
 * so after inlining their switches fold away. A block type's vec_dot is the 1 x 1 case
 * of its tile.
 */
#include "kernels.h"
#include "packed.h"

#if !defined(__x86_64__)
/* Not an x86-64 build: no kernels of this instruction set. */
const ty_kernel *ty_kernel_avx2(int type) {
    (void)type;
    return NULL;
}
ty_quantize_act_fn ty_quantize_act_avx2(int vec_dot_type) {
    (void)vec_dot_type;
    return NULL;
}
#else

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "simd.h"

/* The per-block values must round each multiply and add on its own (kernels.c). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

TOY_TARGET_BEGIN(TOY_FEATURES_AVX2)


/* Blocks are reduced eight at a time: one lane of the accumulator per block. */
#define GROUP 8

/* ================================================================ shared helpers */

/* Eight blocks' int32 partial sums (eight lanes each) to one vector of the eight block
 * totals, block k in lane k. Integer adds are exact, so the tree's order is free; this
 * replaces eight full horizontal sums by seven hadds, one lane swap and an add. */
static inline __m256i sum8_blocks(const __m256i p[GROUP]) {
    const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]);
    const __m256i h23 = _mm256_hadd_epi32(p[2], p[3]);
    const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]);
    const __m256i h67 = _mm256_hadd_epi32(p[6], p[7]);
    /* per 128-bit half: [block 0..3] and [block 4..7], each still split in two halves */
    const __m256i h0123 = _mm256_hadd_epi32(h01, h23);
    const __m256i h4567 = _mm256_hadd_epi32(h45, h67);
    const __m256i swapped = _mm256_permute2x128_si256(h0123, h4567, 0x21);
    const __m256i kept = _mm256_blend_epi32(h0123, h4567, 0xf0);
    return _mm256_add_epi32(swapped, kept);
}

/* The fp16 fields of up to eight consecutive blocks (`stride` bytes apart) as floats,
 * lanes from `count` on zero. Weight rows are only 2-byte aligned, hence memcpy. */
TOY_ALWAYS_INLINE __m256 load_halves(const uint8_t *p, size_t stride, int count) {
    uint16_t h[GROUP] = {0};
    TOY_UNROLL8
    for (int k = 0; k < count; k++) memcpy(&h[k], p + (size_t)k * stride, sizeof h[k]);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* The float fields of up to eight consecutive blocks (Q8_K's d), lanes past count zero. */
TOY_ALWAYS_INLINE __m256 load_floats(const uint8_t *p, size_t stride, int count) {
    float f[GROUP] = {0};
    TOY_UNROLL8
    for (int k = 0; k < count; k++) memcpy(&f[k], p + (size_t)k * stride, sizeof f[k]);
    return _mm256_loadu_ps(f);
}

static inline __m256i load256(const void *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}

static inline __m128i load128(const void *p) {
    return _mm_loadu_si128((const __m128i *)p);
}

/* 16 bytes of packed nibbles to 32 bytes: the low nibbles (weights 0-15) then the high
 * ones (weights 16-31), ggml's layout for 32-weight blocks. */
static inline __m256i nibbles32(const uint8_t *qs) {
    const __m128i packed = load128(qs);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* A 32-bit mask to 32 bytes: byte i is 0xff where bit i is set. */
static inline __m256i bits32_to_bytes(const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, sizeof bits); /* qh: a little-endian uint32, as x86 loads it */
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)bits),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2,
                         2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

/* IQ4_NL / IQ4_XS: nibbles (0..15) to their signed levels. */
static inline __m256i iq4nl_levels(__m256i nibbles) {
    const __m256i table = _mm256_broadcastsi128_si256(load128(ty_iq4nl_values));
    return _mm256_shuffle_epi8(table, nibbles);
}

/* The int32 lane sums of u * a over 32 byte pairs (u unsigned, a signed; see the top
 * comment for why vpmaddubsw cannot saturate here). */
static inline __m256i dot_u8_i8(__m256i u, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

/* ================================================================ decoded weights
 *
 * A weight block is decoded once into bytes ready for vpmaddubsw and then dotted with
 * each activation row of a tile. Chunk c holds the weights of activations 32c..32c+31
 * (a 32-weight block has one chunk, a 256-weight super-block eight). */

typedef struct {
    __m256i q[8];     /* chunk c, unsigned: the weight, or |w| for signed weights */
    __m256i sign[8];  /* signed weights: w itself, whose sign the activation takes */
    __m256i scale[8]; /* super-blocks: the int16 scale of each vpmaddubsw pair of chunk c */
    __m256i group16;  /* super-blocks: the int16 factor of each of the 16 bsums (see
                       * dot_superblock) */
} wdec;

/* Scales of sixteen 16-weight groups (int16, `sc16`) to the per-pair scale vectors of the
 * eight chunks: vpmaddubsw's lanes 0-7 cover a chunk's first 16 weights (group 2c),
 * lanes 8-15 the next 16 (group 2c + 1). */
static inline void chunk_scales(__m256i sc16, __m256i scale[8]) {
    static const uint8_t pick[4][32] = {
        {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
         2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
        {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5,
         6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
        {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9,
         10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
        {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13,
         14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15},
    };
    const __m256i low = _mm256_permute2x128_si256(sc16, sc16, 0x00);  /* groups 0-7 twice */
    const __m256i high = _mm256_permute2x128_si256(sc16, sc16, 0x11); /* groups 8-15 twice */
    TOY_UNROLL8
    for (int c = 0; c < 4; c++) {
        scale[c] = _mm256_shuffle_epi8(low, load256(pick[c]));
        scale[c + 4] = _mm256_shuffle_epi8(high, load256(pick[c]));
    }
}

/* Eight per-chunk scales (int16) repeated for the two 16-weight groups of each chunk. */
static inline __m256i per32_to_per16(__m128i sc8) {
    return _mm256_set_m128i(_mm_unpackhi_epi16(sc8, sc8), _mm_unpacklo_epi16(sc8, sc8));
}

/* Signed weights: vpmaddubsw gets |w| (|-128| is 0x80, read as the unsigned 128). */
static inline void take_abs(wdec *w, int chunks) {
    TOY_UNROLL8
    for (int c = 0; c < chunks; c++) w->q[c] = _mm256_abs_epi8(w->sign[c]);
}

/* ---------------------------------------------------------------- Q8_0 */

static inline void decode_q8_0(const uint8_t *blk, wdec *w) {
    w->sign[0] = load256(blk + offsetof(block_q8_0, qs));
    take_abs(w, 1);
}

/* ---------------------------------------------------------------- Q4_0 */

static inline void decode_q4_0(const uint8_t *blk, wdec *w) {
    w->sign[0] = _mm256_sub_epi8(nibbles32(blk + offsetof(block_q4_0, qs)), _mm256_set1_epi8(8));
    take_abs(w, 1);
}

/* ---------------------------------------------------------------- Q4_K */

/* The 12 scale bytes to 8 scales (bytes 0-7) and 8 mins (bytes 8-15): the packing is
 * described at k4_scale_min in kernels.c (this is llama.cpp's utmp shuffle). */
static inline __m128i k4_scales_mins(const uint8_t *packed) {
    uint32_t u[4];
    memcpy(u, packed, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
    const uint32_t mins_low = u[1] & 0x3f3f3f3f;
    u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    u[2] = mins_low;
    u[0] &= 0x3f3f3f3f;
    return _mm_setr_epi32((int)u[0], (int)u[1], (int)u[2], (int)u[3]);
}

/* Scales, mins (as bsums factors) and low nibbles, shared by Q4_K and Q5_K: weight
 * 32c + l is nibble c % 2 of qs[32 * (c / 2) + l]. */
static inline void decode_k4(const uint8_t *scales, const uint8_t *qs, wdec *w) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m128i sm = k4_scales_mins(scales);
    chunk_scales(per32_to_per16(_mm_cvtepu8_epi16(sm)), w->scale);
    w->group16 = per32_to_per16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)));
    TOY_UNROLL8
    for (int p = 0; p < 4; p++) {
        const __m256i bits = load256(qs + 32 * p);
        w->q[2 * p] = _mm256_and_si256(bits, low4);
        w->q[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
    }
}

static inline void decode_q4_K(const uint8_t *blk, wdec *w) {
    decode_k4(blk + offsetof(block_q4_K, scales), blk + offsetof(block_q4_K, qs), w);
}

/* ---------------------------------------------------------------- Q6_K */

/* Per 128-weight half h: chunk 4h + k takes nibble k / 2 of ql[64h + 32 (k % 2) + l]
 * and bits 2k, 2k + 1 of qh[32h + l] on top. The quants are stored + 32 (0..63), kept
 * that way: dot_superblock takes 32 * scale * bsum back out. */
static inline void decode_q6_K(const uint8_t *blk, wdec *w) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(0x03);
    w->group16 = _mm256_cvtepi8_epi16(load128(blk + offsetof(block_q6_K, scales)));
    chunk_scales(w->group16, w->scale);
    TOY_UNROLL8
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = blk + offsetof(block_q6_K, ql) + 64 * h;
        const __m256i low_bits[2] = {load256(ql), load256(ql + 32)};
        const __m256i high_bits = load256(blk + offsetof(block_q6_K, qh) + 32 * h);
        TOY_UNROLL8
        for (int k = 0; k < 4; k++) {
            const __m256i low = _mm256_and_si256(_mm256_srli_epi16(low_bits[k % 2], 4 * (k / 2)), low4);
            const __m256i top = _mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * k), low2);
            w->q[4 * h + k] = _mm256_or_si256(low, _mm256_slli_epi16(top, 4));
        }
    }
}

/* ---------------------------------------------------------------- Q5_K */

/* Q4_K's layout plus a fifth bit: bit c of qh[l] for weight 32c + l. */
static inline void decode_q5_K(const uint8_t *blk, wdec *w) {
    decode_k4(blk + offsetof(block_q5_K, scales), blk + offsetof(block_q5_K, qs), w);
    const __m256i high = load256(blk + offsetof(block_q5_K, qh));
    TOY_UNROLL8
    for (int c = 0; c < 8; c++) {
        const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(high, c), _mm256_set1_epi8(1));
        w->q[c] = _mm256_or_si256(w->q[c], _mm256_slli_epi16(bit, 4));
    }
}

/* ---------------------------------------------------------------- Q5_0 */

/* (nibble | bit << 4) - 16: where the bit is clear the byte is nibble - 16, which as an
 * int8 is nibble | 0xf0. */
static inline void decode_q5_0(const uint8_t *blk, wdec *w) {
    const __m256i bits = bits32_to_bytes(blk + offsetof(block_q5_0, qh));
    w->sign[0] = _mm256_or_si256(nibbles32(blk + offsetof(block_q5_0, qs)),
                                 _mm256_andnot_si256(bits, _mm256_set1_epi8((char)0xf0)));
    take_abs(w, 1);
}

/* ---------------------------------------------------------------- Q4_1 */

static inline void decode_q4_1(const uint8_t *blk, wdec *w) {
    w->q[0] = nibbles32(blk + offsetof(block_q4_1, qs));
}

/* ---------------------------------------------------------------- Q5_1 */

static inline void decode_q5_1(const uint8_t *blk, wdec *w) {
    const __m256i bits = bits32_to_bytes(blk + offsetof(block_q5_1, qh));
    w->q[0] = _mm256_or_si256(nibbles32(blk + offsetof(block_q5_1, qs)),
                              _mm256_and_si256(bits, _mm256_set1_epi8(0x10)));
}

/* ---------------------------------------------------------------- Q2_K */

/* Per 128-weight half h: chunk 4h + k is bits 2k, 2k + 1 of qs[32h + l]. Each scales
 * byte holds a 4-bit scale (low) and a 4-bit min (high) of a 16-weight group. */
static inline void decode_q2_K(const uint8_t *blk, wdec *w) {
    const __m128i sc = load128(blk + offsetof(block_q2_K, scales));
    const __m128i nibble = _mm_set1_epi8(0x0f);
    chunk_scales(_mm256_cvtepu8_epi16(_mm_and_si128(sc, nibble)), w->scale);
    w->group16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), nibble));
    TOY_UNROLL8
    for (int h = 0; h < 2; h++) {
        const __m256i bits = load256(blk + offsetof(block_q2_K, qs) + 32 * h);
        TOY_UNROLL8
        for (int k = 0; k < 4; k++)
            w->q[4 * h + k] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), _mm256_set1_epi8(3));
    }
}

/* ---------------------------------------------------------------- Q3_K */

/* The 12 scale bytes to 16 signed scales (see q3_scale in kernels.c). */
static inline __m128i q3_scales(const uint8_t *packed) {
    uint32_t a[3];
    memcpy(a, packed, 12);
    const uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303;
    const __m128i biased = _mm_setr_epi32(
        (int)((a[0] & low4) | ((a[2] & low2) << 4)),
        (int)((a[1] & low4) | (((a[2] >> 2) & low2) << 4)),
        (int)(((a[0] >> 4) & low4) | (((a[2] >> 4) & low2) << 4)),
        (int)(((a[1] >> 4) & low4) | (((a[2] >> 6) & low2) << 4)));
    return _mm_sub_epi8(biased, _mm_set1_epi8(32));
}

/* Q2_K's 2-bit fields plus bit c of hmask[l]; a clear bit means q - 4. Decoded as
 * q + 4 = field + 4 * bit (0..7), unsigned: dot_superblock takes 4 * scale * bsum back
 * out. */
static inline void decode_q3_K(const uint8_t *blk, wdec *w) {
    w->group16 = _mm256_cvtepi8_epi16(q3_scales(blk + offsetof(block_q3_K, scales)));
    chunk_scales(w->group16, w->scale);
    const __m256i hmask = load256(blk + offsetof(block_q3_K, hmask));
    TOY_UNROLL8
    for (int h = 0; h < 2; h++) {
        const __m256i bits = load256(blk + offsetof(block_q3_K, qs) + 32 * h);
        TOY_UNROLL8
        for (int k = 0; k < 4; k++) {
            const int c = 4 * h + k;
            const __m256i field = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), _mm256_set1_epi8(3));
            const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(hmask, c), _mm256_set1_epi8(1));
            w->q[c] = _mm256_or_si256(field, _mm256_slli_epi16(bit, 2));
        }
    }
}

/* ---------------------------------------------------------------- IQ4_NL */

static inline void decode_iq4_nl(const uint8_t *blk, wdec *w) {
    w->sign[0] = iq4nl_levels(nibbles32(blk + offsetof(block_iq4_nl, qs)));
    take_abs(w, 1);
}

/* ---------------------------------------------------------------- IQ4_XS */

/* Eight IQ4_NL-like 32-weight chunks with 6-bit scales stored + 32: the low nibble of
 * chunk c's in scales_l[c / 2] (even c low), its top two bits at bit 2c of scales_h. */
static inline void decode_iq4_xs(const uint8_t *blk, wdec *w) {
    uint16_t scales_h;
    memcpy(&scales_h, blk + offsetof(block_iq4_xs, scales_h), sizeof scales_h);
    const uint8_t *scales_l = blk + offsetof(block_iq4_xs, scales_l);
    int16_t sc[8];
    TOY_UNROLL8
    for (int c = 0; c < 8; c++) {
        const int low = (scales_l[c / 2] >> (4 * (c % 2))) & 0x0f;
        const int high = (scales_h >> (2 * c)) & 3;
        sc[c] = (int16_t)((low | high << 4) - 32);
    }
    chunk_scales(per32_to_per16(load128(sc)), w->scale);
    TOY_UNROLL8
    for (int c = 0; c < 8; c++)
        w->sign[c] = iq4nl_levels(nibbles32(blk + offsetof(block_iq4_xs, qs) + 16 * c));
    take_abs(w, 8);
}

/* ================================================================ the block driver
 *
 * Legacy and IQ4_NL blocks (32 weights, one int32 sumi each) and K-quant / IQ4_XS
 * super-blocks (256 weights: an int32 isum, and for Q2_K/Q4_K/Q5_K an int32 summs for
 * the mins) share one driver, specialised by its constant `type`. */

static inline int is_k_family(int type) {
    return type == TOY_TYPE_Q2_K || type == TOY_TYPE_Q3_K || type == TOY_TYPE_Q4_K ||
           type == TOY_TYPE_Q5_K || type == TOY_TYPE_Q6_K || type == TOY_TYPE_IQ4_XS;
}

static inline int is_signed_weight(int type) {
    return type == TOY_TYPE_Q4_0 || type == TOY_TYPE_Q5_0 || type == TOY_TYPE_Q8_0 ||
           type == TOY_TYPE_IQ4_NL || type == TOY_TYPE_IQ4_XS;
}

/* The types whose v_b subtracts a mins term dm * summs. */
static inline int has_mins(int type) {
    return type == TOY_TYPE_Q2_K || type == TOY_TYPE_Q4_K || type == TOY_TYPE_Q5_K;
}

/* The types whose v_b adds an offset term m * s (s from the Q8_1 activation). */
static inline int has_offset(int type) {
    return type == TOY_TYPE_Q4_1 || type == TOY_TYPE_Q5_1;
}

static inline size_t weight_block_bytes(int type) {
    switch (type) {
    case TOY_TYPE_Q4_0: return sizeof(block_q4_0);
    case TOY_TYPE_Q4_1: return sizeof(block_q4_1);
    case TOY_TYPE_Q5_0: return sizeof(block_q5_0);
    case TOY_TYPE_Q5_1: return sizeof(block_q5_1);
    case TOY_TYPE_Q8_0: return sizeof(block_q8_0);
    case TOY_TYPE_IQ4_NL: return sizeof(block_iq4_nl);
    case TOY_TYPE_Q2_K: return sizeof(block_q2_K);
    case TOY_TYPE_Q3_K: return sizeof(block_q3_K);
    case TOY_TYPE_Q4_K: return sizeof(block_q4_K);
    case TOY_TYPE_Q5_K: return sizeof(block_q5_K);
    case TOY_TYPE_Q6_K: return sizeof(block_q6_K);
    default: return sizeof(block_iq4_xs);
    }
}

static inline size_t act_block_bytes(int type) {
    return is_k_family(type) ? sizeof(block_q8_K)
           : has_offset(type) ? sizeof(block_q8_1)
                              : sizeof(block_q8_0);
}

/* Where the activation quants start in their block. */
static inline size_t act_qs_offset(int type) {
    return is_k_family(type) ? offsetof(block_q8_K, qs)
           : has_offset(type) ? offsetof(block_q8_1, qs)
                              : offsetof(block_q8_0, qs);
}

/* Offsets of the fp16 d and of dmin (or m) in a weight block. */
static inline size_t weight_d_offset(int type) {
    switch (type) {
    case TOY_TYPE_Q2_K: return offsetof(block_q2_K, d);
    case TOY_TYPE_Q3_K: return offsetof(block_q3_K, d);
    case TOY_TYPE_Q6_K: return offsetof(block_q6_K, d);
    default: return 0; /* every other block starts with d */
    }
}

static inline size_t weight_m_offset(int type) {
    switch (type) {
    case TOY_TYPE_Q2_K: return offsetof(block_q2_K, dmin);
    case TOY_TYPE_Q4_K: return offsetof(block_q4_K, dmin);
    case TOY_TYPE_Q5_K: return offsetof(block_q5_K, dmin);
    default: return offsetof(block_q4_1, m); /* Q4_1 and Q5_1 */
    }
}

TOY_ALWAYS_INLINE void decode_block(int type, const uint8_t *blk, wdec *w) {
    switch (type) {
    case TOY_TYPE_Q8_0: decode_q8_0(blk, w); break;
    case TOY_TYPE_Q4_0: decode_q4_0(blk, w); break;
    case TOY_TYPE_Q4_K: decode_q4_K(blk, w); break;
    case TOY_TYPE_Q6_K: decode_q6_K(blk, w); break;
    case TOY_TYPE_Q5_K: decode_q5_K(blk, w); break;
    case TOY_TYPE_Q5_0: decode_q5_0(blk, w); break;
    case TOY_TYPE_Q4_1: decode_q4_1(blk, w); break;
    case TOY_TYPE_Q5_1: decode_q5_1(blk, w); break;
    case TOY_TYPE_Q2_K: decode_q2_K(blk, w); break;
    case TOY_TYPE_Q3_K: decode_q3_K(blk, w); break;
    case TOY_TYPE_IQ4_NL: decode_iq4_nl(blk, w); break;
    default: decode_iq4_xs(blk, w); break;
    }
}

/* A decoded 32-weight block times one activation block: int32 lanes summing to sumi. */
TOY_ALWAYS_INLINE __m256i dot_block32(int type, __m256i u, __m256i sign, const uint8_t *act) {
    __m256i a = load256(act + act_qs_offset(type));
    if (is_signed_weight(type)) a = _mm256_sign_epi8(a, sign);
    return dot_u8_i8(u, a);
}

/* A decoded super-block times one activation block: int32 lanes summing to isum, and
 * for the mins types lanes summing to summs. */
TOY_ALWAYS_INLINE void dot_superblock(int type, const wdec *w, const uint8_t *act, __m256i *isum,
                                  __m256i *summs) {
    const int8_t *q8 = (const int8_t *)(act + act_qs_offset(type));
    __m256i s = _mm256_setzero_si256();
    TOY_UNROLL8
    for (int c = 0; c < 8; c++) {
        __m256i a = load256(q8 + 32 * c);
        if (is_signed_weight(type)) a = _mm256_sign_epi8(a, w->sign[c]);
        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(w->q[c], a), w->scale[c]));
    }
    if (type == TOY_TYPE_IQ4_XS) {
        *isum = s;
        return;
    }
    /* bsums[g] * group16[g], exact in int32: the mins, or the offset that made Q3_K and
     * Q6_K's quants unsigned (sum over the group of scale * offset * q8) */
    const __m256i g = _mm256_madd_epi16(w->group16, load256(act + offsetof(block_q8_K, bsums)));
    if (type == TOY_TYPE_Q3_K) s = _mm256_sub_epi32(s, _mm256_slli_epi32(g, 2));
    if (type == TOY_TYPE_Q6_K) s = _mm256_sub_epi32(s, _mm256_slli_epi32(g, 5));
    *isum = s;
    if (has_mins(type)) *summs = g;
}

/* The weight factors of a group of blocks: fp16 d and dmin/m as floats. */
typedef struct {
    __m256 d, m;
} wscales;

TOY_ALWAYS_INLINE wscales load_weight_scales(int type, const uint8_t *w, int count) {
    const size_t wsz = weight_block_bytes(type);
    wscales s;
    s.d = load_halves(w + weight_d_offset(type), wsz, count);
    s.m = has_mins(type) || has_offset(type) ? load_halves(w + weight_m_offset(type), wsz, count)
                                             : _mm256_setzero_ps();
    return s;
}

/* v_b of a group of blocks, exactly as the scalar kernels form it (kernels.c). */
TOY_ALWAYS_INLINE __m256 block_values(int type, wscales ws, __m256i isum, __m256i summs,
                                  const uint8_t *act, int count) {
    const size_t asz = act_block_bytes(type);
    const __m256 ad = is_k_family(type) ? load_floats(act + offsetof(block_q8_K, d), asz, count)
                                        : load_halves(act, asz, count);
    const __m256 d = _mm256_mul_ps(ws.d, ad);
    const __m256 scaled = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum));
    if (has_mins(type)) {
        const __m256 dm = _mm256_mul_ps(ws.m, ad);
        const __m256 mins = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(summs));
        return _mm256_sub_ps(scaled, mins);
    }
    if (has_offset(type)) {
        const __m256 s = load_halves(act + offsetof(block_q8_1, s), asz, count);
        return _mm256_add_ps(scaled, _mm256_mul_ps(ws.m, s));
    }
    return scaled;
}

/* Blocks b0 .. b0 + count - 1 (count <= 8) of one weight row against n_a activation
 * rows: each block decoded once, its lane b % 8 added to every row's accumulator. Lanes
 * from count on add +0.0f, which leaves an accumulator unchanged (a lane that starts at
 * +0 and only ever adds is never -0).
 *
 * The loop order differs by family. A 32-weight block is a handful of instructions per
 * activation row, so the group's eight decoded blocks are kept (in L1) and each row's
 * eight block sums stay in registers through the reduction. A super-block decodes into
 * far more than the registers hold, so it is decoded once and dotted with every row
 * before the next; the rows' partial sums wait on the stack for the group's reduction. */
TOY_ALWAYS_INLINE void dot_group(int type, int count, const uint8_t *wrow, int64_t b0,
                             const uint8_t *a, size_t a_stride, int n_a, __m256 *acc) {
    const size_t wsz = weight_block_bytes(type), asz = act_block_bytes(type);
    const uint8_t *w = wrow + (size_t)b0 * wsz;
    const wscales ws = load_weight_scales(type, w, count);
    if (!is_k_family(type)) {
        __m256i u[GROUP], sign[GROUP];
        TOY_UNROLL8
        for (int k = 0; k < GROUP; k++) {
            u[k] = sign[k] = _mm256_setzero_si256();
            if (k < count) {
                wdec dec;
                decode_block(type, w + (size_t)k * wsz, &dec);
                u[k] = dec.q[0];
                if (is_signed_weight(type)) sign[k] = dec.sign[0];
            }
        }
        for (int j = 0; j < n_a; j++) {
            const uint8_t *act = a + (size_t)j * a_stride + (size_t)b0 * asz;
            __m256i isum[GROUP];
            TOY_UNROLL8
            for (int k = 0; k < GROUP; k++)
                isum[k] = k < count ? dot_block32(type, u[k], sign[k], act + (size_t)k * asz)
                                    : _mm256_setzero_si256();
            const __m256i sumi = sum8_blocks(isum);
            acc[j] = _mm256_add_ps(acc[j], block_values(type, ws, sumi, sumi, act, count));
        }
        return;
    }
    __m256i isum[TOY_TILE_MAX][GROUP], summs[TOY_TILE_MAX][GROUP];
    TOY_UNROLL8
    for (int k = 0; k < GROUP; k++) {
        if (k < count) {
            wdec dec;
            decode_block(type, w + (size_t)k * wsz, &dec);
            for (int j = 0; j < n_a; j++) {
                const uint8_t *act = a + (size_t)j * a_stride + (size_t)(b0 + k) * asz;
                summs[j][k] = _mm256_setzero_si256();
                dot_superblock(type, &dec, act, &isum[j][k], &summs[j][k]);
            }
        } else {
            for (int j = 0; j < n_a; j++) isum[j][k] = summs[j][k] = _mm256_setzero_si256();
        }
    }
    for (int j = 0; j < n_a; j++) {
        const uint8_t *act = a + (size_t)j * a_stride + (size_t)b0 * asz;
        const __m256i sumi = sum8_blocks(isum[j]);
        const __m256i summ = has_mins(type) ? sum8_blocks(summs[j]) : _mm256_setzero_si256();
        acc[j] = _mm256_add_ps(acc[j], block_values(type, ws, sumi, summ, act, count));
    }
}

TOY_ALWAYS_INLINE void tile_blocks(int type, int64_t n, const void *w, size_t w_stride, int n_w,
                               const void *a, size_t a_stride, int n_a, float *y,
                               size_t y_stride) {
    const int64_t nb = n / (is_k_family(type) ? QK_K : 32);
    for (int i = 0; i < n_w; i++) {
        const uint8_t *wrow = (const uint8_t *)w + (size_t)i * w_stride;
        __m256 acc[TOY_TILE_MAX];
        for (int j = 0; j < n_a; j++) acc[j] = _mm256_setzero_ps();
        int64_t b0 = 0;
        for (; b0 + GROUP <= nb; b0 += GROUP) dot_group(type, GROUP, wrow, b0, a, a_stride, n_a, acc);
        if (b0 < nb) dot_group(type, (int)(nb - b0), wrow, b0, a, a_stride, n_a, acc);
        for (int j = 0; j < n_a; j++) y[(size_t)j * y_stride + (size_t)i] = ty_combine8(acc[j]);
    }
}

/* vec_dot is the 1 x 1 tile: with n_w = n_a = 1 known, the compiler keeps everything in
 * registers. */
static float vec_dot_q4_0(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q4_0, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q4_0(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q4_0, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q4_1(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q4_1, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q4_1(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q4_1, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q5_0(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q5_0, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q5_0(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q5_0, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q5_1(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q5_1, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q5_1(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q5_1, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q8_0(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q8_0, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q8_0(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q8_0, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_iq4_nl(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_IQ4_NL, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_iq4_nl(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                                float *y, size_t ys) {
    tile_blocks(TOY_TYPE_IQ4_NL, n, w, ws, n_w, a, as, n_a, y, ys);
}
static float vec_dot_q2_K(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q2_K, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q2_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q2_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q3_K(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q3_K, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q3_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q3_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q4_K(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q4_K, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q4_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q4_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q5_K(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q5_K, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q5_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q5_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q6_K(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_Q6_K, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_q6_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_blocks(TOY_TYPE_Q6_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_iq4_xs(int64_t n, const void *w, const void *a) {
    float y;
    tile_blocks(TOY_TYPE_IQ4_XS, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}
static void vec_dot_tile_iq4_xs(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                                float *y, size_t ys) {
    tile_blocks(TOY_TYPE_IQ4_XS, n, w, ws, n_w, a, as, n_a, y, ys);
}

/* ================================================================ float rows
 * p[i % 32] += w_i * a_i: four 8-lane accumulators over each 32 elements, an element
 * tail finished in scalar code on the stored lanes, then the pairwise combine with
 * strides 16, 8, 4, 2, 1. */

static inline size_t elem_bytes(int type) {
    return type == TOY_TYPE_F32 ? 4 : 2;
}

/* How a type's activations are held: F16's and BF16's as floats (kernels.h). */
static inline int act_elem_type(int type) {
    return type == TOY_TYPE_F16 || type == TOY_TYPE_BF16 ? TOY_TYPE_F32 : type;
}

/* 8 F16 or BF16 elements as floats. A bf16 is the top half of a float: zero-extended to
 * 32 bits and shifted. */
TOY_ALWAYS_INLINE __m256 load8_half(int type, const uint8_t *p) {
    return type == TOY_TYPE_F16 ? _mm256_cvtph_ps(load128(p))
                                : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}

/* Elements i..i+31 as four float vectors, in order: vector k holds lanes p[8k..8k+7]. */
TOY_ALWAYS_INLINE void load32_elems(int type, const uint8_t *p, __m256 v[4]) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        v[k] = type == TOY_TYPE_F32 ? _mm256_loadu_ps((const float *)(p + 32 * k)) : load8_half(type, p + 16 * k);
}

TOY_ALWAYS_INLINE void store_lanes(const __m256 v[4], float p[32]) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) _mm256_storeu_ps(p + 8 * k, v[k]);
}

TOY_ALWAYS_INLINE float load1_elem(int type, const uint8_t *p) {
    if (type == TOY_TYPE_F32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return type == TOY_TYPE_F16 ? _cvtsh_ss(h) : ty_bf16_to_fp32(h);
}

/* The pairwise combine of 32 lanes, strides 16, 8, 4, 2, 1, on vectors: each step adds
 * the pairs (k, k + s) the scalar loop adds (a loop through memory was as slow as a
 * 2048-column product's FMAs). */
static inline float combine32(const float *p) {
    const __m256 lo = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 16));
    const __m256 hi = _mm256_add_ps(_mm256_loadu_ps(p + 8), _mm256_loadu_ps(p + 24));
    return ty_combine8(_mm256_add_ps(lo, hi));
}

/* The 32 lanes p[0..31] of one (weight row, activation row) pair. */
typedef struct {
    __m256 v[4];
} lanes32;

/* Elements [i0, i1) (whole 32-element steps) of one weight row against one activation
 * row, continuing its lanes. */
TOY_ALWAYS_INLINE void accumulate_elems(int type, const uint8_t *w, const uint8_t *a, int64_t i0, int64_t i1,
                                    lanes32 *lanes) {
    const size_t es = elem_bytes(type), as = elem_bytes(act_elem_type(type));
    __m256 acc[4];
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) acc[k] = lanes->v[k];
    for (int64_t i = i0; i < i1; i += 32) {
        /* decode streams the weights from memory: ask for them 2 KiB ahead */
        for (size_t o = 0; o < 32 * es; o += 64)
            _mm_prefetch((const char *)w + (size_t)i * es + 2048 + o, _MM_HINT_T0);
        __m256 wv[4], av[4];
        load32_elems(type, w + (size_t)i * es, wv);
        load32_elems(act_elem_type(type), a + (size_t)i * as, av);
        TOY_UNROLL8
        for (int k = 0; k < 4; k++)
            /* F16 and BF16 round once (FMA), F32's product rounds first (kernels.c) */
            acc[k] = type == TOY_TYPE_F32 ? _mm256_add_ps(acc[k], _mm256_mul_ps(wv[k], av[k]))
                                          : _mm256_fmadd_ps(wv[k], av[k], acc[k]);
    }
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) lanes->v[k] = acc[k];
}

/* The element tail from i (a multiple of 32) on, in scalar code on the lanes p, and the
 * pairwise combine. */
TOY_ALWAYS_INLINE float finish_lanes(int type, int64_t n, int64_t i, const uint8_t *w, const uint8_t *a, float p[32]) {
    const size_t es = elem_bytes(type), as = elem_bytes(act_elem_type(type));
    for (int64_t t = i; t < n; t++) {
        const float wt = load1_elem(type, w + (size_t)t * es);
        const float at = load1_elem(act_elem_type(type), a + (size_t)t * as);
        p[t - i] = type == TOY_TYPE_F32 ? p[t - i] + wt * at : fmaf(wt, at, p[t - i]);
    }
    return combine32(p);
}

/* finish_lanes on the lanes in registers */
TOY_ALWAYS_INLINE float finish_elems(int type, int64_t n, int64_t i, const uint8_t *w,
                                 const uint8_t *a, const lanes32 *lanes) {
    float p[32];
    store_lanes(lanes->v, p);
    return finish_lanes(type, n, i, w, a, p);
}

TOY_ALWAYS_INLINE float dot_elems(int type, int64_t n, const uint8_t *w, const uint8_t *a) {
    const int64_t n32 = n / 32 * 32;
    lanes32 lanes = {{_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps()}};
    accumulate_elems(type, w, a, 0, n32, &lanes);
    return finish_elems(type, n, n32, w, a, &lanes);
}

/* F16 and BF16 tiles by slices. A pair's 32 lanes are four slices of 8 (lanes 8k..8k+7:
 * the elements 32s + 8k..), each summed on its own, so one slice at a time of SLICE_W
 * weight rows by SLICE_A activation rows keeps 12 accumulators in registers beside 3
 * converted weight vectors and an activation vector: 12 FMAs for 7 loads, where one
 * weight row against two activation rows with all four slices has 8 for 12 (load-bound:
 * TinyLlama-1.1B F16 prompts ran at half llama.cpp's speed). Between column chunks and
 * slices the lanes wait in `park`; every lane still adds its products in column order,
 * one rounding each, so the bits are vec_dot's (accumulate_elems). */
#define SLICE_W 3
#define SLICE_A 4
#define SLICE_CHUNK 512 /* columns: 3 weight rows and 8 activation rows of them in L1 */

typedef float parked_lanes[SLICE_W][TOY_TILE_MAX][32];

/* Slice k of columns [i0, i1) for weight rows w[0..nw) and activation rows a0..a0 + na */
TOY_ALWAYS_INLINE void tile_slice(int type, const uint8_t *const *w, const int nw, const float *const *a, int a0,
                              const int na, int64_t i0, int64_t i1, int k, parked_lanes park) {
    __m256 acc[SLICE_W][SLICE_A];
    TOY_UNROLL8
    for (int r = 0; r < nw; r++)
        TOY_UNROLL8
        for (int j = 0; j < na; j++) acc[r][j] = _mm256_load_ps(park[r][a0 + j] + 8 * k);
    for (int64_t i = i0 + 8 * k; i < i1; i += 32) {
        __m256 wv[SLICE_W];
        TOY_UNROLL8
        for (int r = 0; r < nw; r++) wv[r] = load8_half(type, w[r] + 2 * i);
        TOY_UNROLL8
        for (int j = 0; j < na; j++) {
            const __m256 av = _mm256_loadu_ps(a[a0 + j] + i);
            TOY_UNROLL8
            for (int r = 0; r < nw; r++) acc[r][j] = _mm256_fmadd_ps(wv[r], av, acc[r][j]);
        }
    }
    TOY_UNROLL8
    for (int r = 0; r < nw; r++)
        TOY_UNROLL8
        for (int j = 0; j < na; j++) _mm256_store_ps(park[r][a0 + j] + 8 * k, acc[r][j]);
}

/* tile_slice with the row counts as constants */
TOY_ALWAYS_INLINE void tile_slice_any(int type, const uint8_t *const *w, int nw, const float *const *a, int a0, int na,
                                  int64_t i0, int64_t i1, int k, parked_lanes park) {
    switch (nw) {
    case 1:
        switch (na) {
        case 1: tile_slice(type, w, 1, a, a0, 1, i0, i1, k, park); break;
        case 2: tile_slice(type, w, 1, a, a0, 2, i0, i1, k, park); break;
        case 3: tile_slice(type, w, 1, a, a0, 3, i0, i1, k, park); break;
        default: tile_slice(type, w, 1, a, a0, 4, i0, i1, k, park); break;
        }
        break;
    case 2:
        switch (na) {
        case 1: tile_slice(type, w, 2, a, a0, 1, i0, i1, k, park); break;
        case 2: tile_slice(type, w, 2, a, a0, 2, i0, i1, k, park); break;
        case 3: tile_slice(type, w, 2, a, a0, 3, i0, i1, k, park); break;
        default: tile_slice(type, w, 2, a, a0, 4, i0, i1, k, park); break;
        }
        break;
    default:
        switch (na) {
        case 1: tile_slice(type, w, 3, a, a0, 1, i0, i1, k, park); break;
        case 2: tile_slice(type, w, 3, a, a0, 2, i0, i1, k, park); break;
        case 3: tile_slice(type, w, 3, a, a0, 3, i0, i1, k, park); break;
        default: tile_slice(type, w, 3, a, a0, 4, i0, i1, k, park); break;
        }
        break;
    }
}

TOY_ALWAYS_INLINE void tile_sliced(int type, int64_t n, const void *w, size_t w_stride, int n_w, const void *a,
                               size_t a_stride, int n_a, float *y, size_t y_stride) {
    const int64_t n32 = n / 32 * 32;
    const float *arow[TOY_TILE_MAX];
    for (int j = 0; j < n_a; j++) arow[j] = (const float *)((const uint8_t *)a + (size_t)j * a_stride);
    _Static_assert(SLICE_CHUNK % 32 == 0, "chunks of whole 32-element steps");
    for (int i = 0; i < n_w; i += SLICE_W) {
        const int nw = n_w - i < SLICE_W ? n_w - i : SLICE_W;
        const uint8_t *wrow[SLICE_W];
        for (int r = 0; r < nw; r++) wrow[r] = (const uint8_t *)w + (size_t)(i + r) * w_stride;
        parked_lanes park __attribute__((aligned(32)));
        memset(park, 0, sizeof park);
        for (int64_t i0 = 0; i0 < n32; i0 += SLICE_CHUNK) {
            const int64_t i1 = n32 - i0 < SLICE_CHUNK ? n32 : i0 + SLICE_CHUNK;
            for (int a0 = 0; a0 < n_a; a0 += SLICE_A)
                for (int k = 0; k < 4; k++)
                    tile_slice_any(type, wrow, nw, arow, a0, n_a - a0 < SLICE_A ? n_a - a0 : SLICE_A, i0, i1, k, park);
        }
        for (int r = 0; r < nw; r++)
            for (int j = 0; j < n_a; j++)
                y[(size_t)j * y_stride + (size_t)(i + r)] =
                    finish_lanes(type, n, n32, wrow[r], (const uint8_t *)arow[j], park[r][j]);
    }
}

static float vec_dot_f16(int64_t n, const void *w, const void *a) { return dot_elems(TOY_TYPE_F16, n, w, a); }
static void vec_dot_tile_f16(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                             float *y, size_t ys) { tile_sliced(TOY_TYPE_F16, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_bf16(int64_t n, const void *w, const void *a) { return dot_elems(TOY_TYPE_BF16, n, w, a); }
static void vec_dot_tile_bf16(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { tile_sliced(TOY_TYPE_BF16, n, w, ws, n_w, a, as, n_a, y, ys); }

/* F32 has no tile: there is no conversion to share, and the tile measured slower than
 * the matmul's own loop of vec_dot (the compiler reloads the weights per row anyway). */
static float vec_dot_f32(int64_t n, const void *w, const void *a) {
    return dot_elems(TOY_TYPE_F32, n, w, a);
}

/* ================================================================ the table */

#define vec_dot_tile_f32 NULL /* none, as said above */
static const ty_kernel avx2_kernels[TOY_TYPE_COUNT] = {TY_ROW_KERNEL_TYPES(TY_ROW_KERNEL)};

const ty_kernel *ty_kernel_avx2(int type) {
    if (type < 0 || type >= TOY_TYPE_COUNT || !avx2_kernels[type].vec_dot) return NULL;
    return &avx2_kernels[type];
}

/* ---------------------------------------------------------------- activation rows
 * The Q8 activation quantizers, byte for byte the scalar ones of kernels.c (those call
 * roundf and fmaxf per element, which on baseline x86-64 are library calls: 20% of a
 * small model's prefill). The dispatcher uses these for every kernel on AVX2 CPUs. */

/* roundf (halves away from zero) of |v| <= 2^23, exactly: trunc, then one step away
 * from zero where the dropped fraction is at least one half. */
TOY_ALWAYS_INLINE __m256 round_half_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_sub_ps(v, t); /* exact */
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 step = _mm256_and_ps(_mm256_cmp_ps(_mm256_and_ps(frac, abs_mask), _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                      _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_andnot_ps(abs_mask, v)));
    return _mm256_add_ps(t, step);
}

/* 32 floats to int8 levels as kernels.c's q8_round: roundf, clamp to [-127, 127], NaN 0;
 * returns their sum. */
TOY_ALWAYS_INLINE int quantize32(const float *x, float id, int8_t *q) {
    const __m256 vid = _mm256_set1_ps(id);
    __m256i out[4];
    for (int k = 0; k < 4; k++) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid);
        __m256 r = round_half_away(v);
        r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
        r = _mm256_and_ps(r, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); /* NaN -> 0 */
        out[k] = _mm256_cvttps_epi32(r);
    }
    /* pack 32 int32 to int8 in order (packs work within 128-bit lanes: fix with a permute) */
    __m256i p01 = _mm256_packs_epi32(out[0], out[1]), p23 = _mm256_packs_epi32(out[2], out[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, p);
    __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), p);
    __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

TOY_ALWAYS_INLINE float absmax32(const float *x) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    /* max_ps returns its second operand when one is NaN: keep the running max there,
     * so a NaN element is skipped as fmaxf skips it */
    for (int k = 0; k < 4; k++) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs_mask), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

static ty_half half_of(float f) { return (ty_half)_cvtss_sh(f, 0); }

static void quantize_act_q8_0_avx2(const float *x, void *y, int64_t n) {
    block_q8_0 *blocks = y;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        const float d = absmax32(x) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = half_of(d);
        quantize32(x, id, blocks[b].qs);
    }
}

/* The packed activation layout (packed.h) in one pass: quantize32's sum is the start. */
void ty_quantize_act_q8_0x_avx2(const float *x, void *y, int64_t n) {
    ty_act_q8_0x *blocks = y;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        const float d = absmax32(x) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        ty_act_q8_0x *blk = &blocks[b];
        blk->d = ty_fp16_to_fp32(half_of(d));
        blk->start = -128 * quantize32(x, id, blk->qs);
    }
}

void ty_quantize_act_q8_1_avx2(const float *x, void *y, int64_t n) {
    block_q8_1 *blocks = y;
    for (int64_t b = 0; b < n / QK8_1; b++, x += QK8_1) {
        const float d = absmax32(x) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = half_of(d);
        const int sum = quantize32(x, id, blocks[b].qs);
        blocks[b].s = half_of((float)sum * d);
    }
}

void ty_quantize_act_q8_K_avx2(const float *x, void *y, int64_t n) {
    block_q8_K *blocks = y;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        block_q8_K *blk = &blocks[b];
        float amax = 0.0f;
        for (int c = 0; c < QK_K / 32; c++) {
            const float a = absmax32(x + 32 * c);
            amax = a > amax ? a : amax;
        }
        if (amax == 0.0f) {
            memset(blk, 0, sizeof *blk);
            continue;
        }
        /* the first element of that magnitude gives the sign, as in the scalar loop */
        float max = 0.0f;
        const __m256 va = _mm256_set1_ps(amax);
        for (int c = 0; c < QK_K; c += 8) {
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + c), abs_mask), va, _CMP_EQ_OQ));
            if (hit) {
                max = x[c + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int c = 0; c < QK_K; c += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                /* nearest, ties to even: cvtps under the default rounding mode, as
                 * ggml's nearest_int; that one turns NaN into 0 (cvtps: INT_MIN) */
                __m256 f = _mm256_mul_ps(vs, _mm256_loadu_ps(x + c + 8 * k));
                f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));
                __m256i v = _mm256_cvtps_epi32(f);
                q[k] = _mm256_min_epi32(v, _mm256_set1_epi32(127));
            }
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(blk->qs + c), p);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += blk->qs[16 * g + j];
            blk->bsums[g] = (int16_t)sum;
        }
        blk->d = 1.0f / iscale;
    }
}

/* F16 activations (ty_quantize_act_f16): F16C rounds to nearest even, keeps a NaN's
 * sign and top payload bits with the quiet bit set, and makes subnormal halves, as
 * ty_fp32_to_fp16 does; the way back is exact. */
static void quantize_act_f16_avx2(const float *x, void *y, int64_t n) {
    float *out = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
    ty_quantize_act_f16(x + i, out + i, n - i);
}

/* BF16 activations (ty_quantize_act_bf16): ty_fp32_to_bf16 on 8 lanes (round to
 * nearest even by adding 0x7fff plus the kept low bit; a NaN keeps its top bits and
 * becomes quiet), then the float the bf16 is. */
static void quantize_act_bf16_avx2(const float *x, void *y, int64_t n) {
    float *out = y;
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i top = _mm256_set1_epi32((int)0xffff0000u), quiet = _mm256_set1_epi32(0x00400000);
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(v, 16), one);
        const __m256i rounded = _mm256_and_si256(_mm256_add_epi32(v, _mm256_add_epi32(bias, odd)), top);
        const __m256i quieted = _mm256_or_si256(_mm256_and_si256(v, top), quiet);
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_blendv_epi8(rounded, quieted, nan)));
    }
    ty_quantize_act_bf16(x + i, out + i, n - i);
}

void ty_quantize_act_q8_Kx_avx2(const float *x, void *y, int64_t n) {
    ty_quantize_act_q8_Kx_with(ty_quantize_act_q8_K_avx2, x, y, n);
}

ty_quantize_act_fn ty_quantize_act_avx2(int vec_dot_type) {
    switch (vec_dot_type) {
    case TOY_TYPE_F16: return quantize_act_f16_avx2;
    case TOY_TYPE_BF16: return quantize_act_bf16_avx2;
    case TOY_TYPE_Q8_0: return quantize_act_q8_0_avx2;
    case TOY_TYPE_Q8_1: return ty_quantize_act_q8_1_avx2;
    case TOY_TYPE_Q8_K: return ty_quantize_act_q8_K_avx2;
    default: return NULL;
    }
}

TOY_TARGET_END
#endif /* __x86_64__ */
