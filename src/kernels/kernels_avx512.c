/* kernels_avx512.c — AVX-512 (F, BW, VL, DQ, VNNI) dot products, bit-identical to the
 * scalar reference (kernels.c). Compiled with those instructions enabled; called only
 * after ty_cpu_isa() found them.
 *
 * Exactness. Integer sums inside a block are exact in any order, so they are free to use
 * VNNI; everything in float — the per-block epilogue and the REDUCTION SHAPE's lanes — is
 * done with the reference's operations in the reference's order, one vector lane per
 * scalar lane: 8 blocks per step, their values v_b in one __m256 added to one __m256
 * accumulator (lane b % 8), a short last step added under a mask, then the documented
 * pairwise combine. Multiplies and adds stay separate wherever the reference rounds
 * twice; the one FMA is F16's, whose products are exact (see the float rows).
 *
 * Signed times signed. vpdpbusd and vpmaddubsw multiply unsigned by signed bytes. Where
 * both weights and activations are signed, the activation is offset instead of the
 * weight: a ^ 0x80 is a + 128 as an unsigned byte, and
 *     sum (a + 128) * w  =  sum a * w  +  128 * sum w,
 * so the integer accumulator starts at -128 * sum w, a property of the weights alone:
 * computed once per weight block and shared by all activation rows of a tile. It is exact
 * for every byte (sign tricks with vpsignb-like negation wrap at -128), and it needs no
 * bsums, which the scalar code of those types does not read either.
 *
 * Layout. Eight 32-weight blocks sit in four zmm registers, register k holding block k in
 * its low 256 bits and block k + 4 in its high 256 bits; reduce8_blocks then turns the
 * four int32 vectors into the 8 block sums in block order with one transpose-style tree
 * (no per-block horizontal sums). A 256-weight super-block yields one zmm of int32
 * partial sums, eight of which fold into the same tree.
 *
 * Tiles (prefill) decode each weight block once — nibbles unpacked, high bits merged,
 * scales expanded, the -128 * sum w start computed — and apply it to every activation
 * row of the tile, each row with its own accumulators; the 32-weight block and float
 * types also take two weight rows per pass, so each activation vector is loaded once
 * for both. Every result is the same bits as vec_dot of that pair.
 */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "simd.h"

#if !defined(__x86_64__)
/* Not an x86-64 build: no kernels of this instruction set. */
const ty_kernel *ty_kernel_avx512(int type) {
    (void)type;
    return NULL;
}
#else

/* a*b + c must not become an FMA: the reference rounds the product first. (Intrinsics
 * are explicit already; this keeps any plain float code honest too.) */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

TOY_TARGET_BEGIN(TOY_FEATURES_AVX512)

#define GROUP 8 /* blocks per step: the BLOCK_LANES of the reduction shape */

/* Helpers pass decoded blocks in structs of registers: always inlined (TOY_ALWAYS_INLINE), as a
 * call that is not sends them through memory (and the big decoders exceed gcc's inlining
 * limits). */

/* ================================================================ shared helpers */

TOY_ALWAYS_INLINE uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

TOY_ALWAYS_INLINE float rdf32(const uint8_t *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

TOY_ALWAYS_INLINE __mmask8 first_lanes(int count) {
    return (__mmask8)((1u << count) - 1u);
}

/* Eight fp16 fields `stride` bytes apart (the d of 8 consecutive blocks), as floats:
 * the conversion is exact, as ty_fp16_to_fp32. */
TOY_ALWAYS_INLINE __m256 halves8(const void *p, size_t stride) {
    const uint8_t *b = p;
    return _mm256_cvtph_ps(_mm_setr_epi16(
        (short)rd16(b), (short)rd16(b + stride), (short)rd16(b + 2 * stride),
        (short)rd16(b + 3 * stride), (short)rd16(b + 4 * stride), (short)rd16(b + 5 * stride),
        (short)rd16(b + 6 * stride), (short)rd16(b + 7 * stride)));
}

/* As halves8 for blocks of 34 or 36 bytes (Q8_0, Q8_1 activations), where p .. p + 255
 * lies inside the 8 blocks: four zmm loads and two word permutes instead of eight scalar
 * inserts, which dominated the per-row cost of a tile. */
_Static_assert(8 * sizeof(block_q8_0) >= 256 && 8 * sizeof(block_q8_1) >= 256 + 2 &&
                   3 * sizeof(block_q8_1) + 2 <= 128,
               "halves8_wide reads 256 bytes from the first field, 4 fields per 128 bytes");
TOY_ALWAYS_INLINE __m256 halves8_wide(const void *p, size_t stride) {
    const uint8_t *b = p;
    const __m512i z0 = _mm512_loadu_si512(b), z1 = _mm512_loadu_si512(b + 64);
    const __m512i z2 = _mm512_loadu_si512(b + 128), z3 = _mm512_loadu_si512(b + 192);
    /* word indices into z0:z1 for fields 0-3 and into z2:z3 for fields 4-7 */
    const __m512i idx = _mm512_zextsi128_si512(_mm_setr_epi16(
        0, (short)(stride / 2), (short)(stride), (short)(3 * stride / 2),
        (short)((4 * stride - 128) / 2), (short)((5 * stride - 128) / 2),
        (short)((6 * stride - 128) / 2), (short)((7 * stride - 128) / 2)));
    const __m128i lo = _mm512_castsi512_si128(_mm512_permutex2var_epi16(z0, idx, z1));
    const __m128i hi = _mm512_castsi512_si128(_mm512_permutex2var_epi16(z2, idx, z3));
    return _mm256_cvtph_ps(_mm_mask_blend_epi16(0xf0, lo, hi));
}

/* The fp16 field at byte `off` of each of 8 consecutive blocks of `stride` <= 36 bytes, as
 * floats, reading only the 8 blocks [group, group + 8 * stride) with whole-register loads
 * and word permutes (eight scalar inserts cost more than a step's dot product). Fields
 * 0-3 come from the 128 bytes at group, fields 4-7 from the 128 bytes at hb, which ends
 * the step (blocks up to 32 bytes) or starts 128 bytes in (larger blocks, 8 * stride >=
 * 256). When all 8 fields lie in the first 128 bytes, one permute does. */
TOY_ALWAYS_INLINE __m256 halves8_group(const void *group, size_t off, size_t stride) {
    const uint8_t *g = group;
    const size_t hb = stride <= 32 ? 8 * stride - 128 : 128;
    const __m512i z0 = _mm512_loadu_si512(g), z1 = _mm512_loadu_si512(g + 64);
    if (off + 7 * stride + 2 <= 128) {
        const __m512i idx = _mm512_zextsi128_si512(_mm_setr_epi16(
            (short)(off / 2), (short)((off + stride) / 2), (short)((off + 2 * stride) / 2),
            (short)((off + 3 * stride) / 2), (short)((off + 4 * stride) / 2),
            (short)((off + 5 * stride) / 2), (short)((off + 6 * stride) / 2),
            (short)((off + 7 * stride) / 2)));
        return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(z0, idx, z1)));
    }
    const __m512i z2 = _mm512_loadu_si512(g + hb), z3 = _mm512_loadu_si512(g + hb + 64);
    const __m512i idx = _mm512_zextsi128_si512(_mm_setr_epi16(
        (short)(off / 2), (short)((off + stride) / 2), (short)((off + 2 * stride) / 2),
        (short)((off + 3 * stride) / 2), (short)((off + 4 * stride - hb) / 2),
        (short)((off + 5 * stride - hb) / 2), (short)((off + 6 * stride - hb) / 2),
        (short)((off + 7 * stride - hb) / 2)));
    const __m128i lo = _mm512_castsi512_si128(_mm512_permutex2var_epi16(z0, idx, z1));
    const __m128i hi = _mm512_castsi512_si128(_mm512_permutex2var_epi16(z2, idx, z3));
    return _mm256_cvtph_ps(_mm_mask_blend_epi16(0xf0, lo, hi));
}

/* Field k of a short step of count blocks: the last present one stands in for the
 * missing ones (their lanes are zeroed after), so nothing is read past the row and no
 * store-to-load round trip stalls. */
TOY_ALWAYS_INLINE const uint8_t *field_at(const void *p, size_t stride, int k, int count) {
    return (const uint8_t *)p + (size_t)(k < count ? k : count - 1) * stride;
}

/* The first `count` of 8 fp16 fields, zeros after: the last, short step of a row. */
TOY_ALWAYS_INLINE __m256 halves_n(const void *p, size_t stride, int count) {
    if (count == GROUP) return halves8(p, stride);
    const __m256 h = _mm256_cvtph_ps(_mm_setr_epi16(
        (short)rd16(field_at(p, stride, 0, count)), (short)rd16(field_at(p, stride, 1, count)),
        (short)rd16(field_at(p, stride, 2, count)), (short)rd16(field_at(p, stride, 3, count)),
        (short)rd16(field_at(p, stride, 4, count)), (short)rd16(field_at(p, stride, 5, count)),
        (short)rd16(field_at(p, stride, 6, count)), (short)rd16(field_at(p, stride, 7, count))));
    return _mm256_maskz_mov_ps(first_lanes(count), h);
}

TOY_ALWAYS_INLINE size_t field_offset(const void *block, const void *field) {
    return (size_t)((const uint8_t *)field - (const uint8_t *)block);
}

/* The fp16 field (field0: the first block's) of a step's weight blocks, stride bytes apart. */
TOY_ALWAYS_INLINE __m256 weight_halves(const void *w, const void *field0, size_t stride, int count) {
    return count == GROUP ? halves8_group(w, field_offset(w, field0), stride) : halves_n(field0, stride, count);
}

/* The first `count` of 8 float fields (Q8_K's d), zeros after. */
TOY_ALWAYS_INLINE __m256 floats_n(const void *p, size_t stride, int count) {
    const int c = count;
    const __m256 f = _mm256_setr_ps(
        rdf32(field_at(p, stride, 0, c)), rdf32(field_at(p, stride, 1, c)),
        rdf32(field_at(p, stride, 2, c)), rdf32(field_at(p, stride, 3, c)),
        rdf32(field_at(p, stride, 4, c)), rdf32(field_at(p, stride, 5, c)),
        rdf32(field_at(p, stride, 6, c)), rdf32(field_at(p, stride, 7, c)));
    return count == GROUP ? f : _mm256_maskz_mov_ps(first_lanes(count), f);
}

/* The 32 element lanes: p0 holds lanes 0-15, p1 lanes 16-31; strides 16, 8, 4, 2, 1. */
TOY_ALWAYS_INLINE float combine32(__m512 p0, __m512 p1) {
    return ty_combine16(_mm512_add_ps(p0, p1));
}

/* The reduction tree. zk holds int32 partial sums of block k (low 256 bits) and block
 * k + 4 (high 256 bits). Levels 1 and 2 (reduce_lanes) pair dwords across z0/z1 and
 * z2/z3, then across those, leaving in 128-bit lane L the lane sums [z0_L, z1_L, z2_L,
 * z3_L]; level 3 (reduce_halves) adds lanes 0+1 (blocks 0-3) and 2+3 (blocks 4-7), for
 * two trees at once: [r0's 8 block sums | r1's 8 block sums], in block order. */
TOY_ALWAYS_INLINE __m512i reduce_lanes(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
    const __m512i p =
        _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
    const __m512i q =
        _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(p, q), _mm512_unpackhi_epi64(p, q));
}

TOY_ALWAYS_INLINE __m512i reduce_halves(__m512i r0, __m512i r1) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(r0, r1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i64x2(r0, r1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The 8 block sums of each of two trees: [z's | y's]. */
TOY_ALWAYS_INLINE __m512i reduce8_blocks_x2(const __m512i z[4], const __m512i y[4]) {
    const __m512i rz = reduce_lanes(z[0], z[1], z[2], z[3]);
    return reduce_halves(rz, reduce_lanes(y[0], y[1], y[2], y[3]));
}

/* The 8 block sums of one tree. */
TOY_ALWAYS_INLINE __m256i reduce8_blocks(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
    const __m512i r = reduce_lanes(z0, z1, z2, z3);
    return _mm512_castsi512_si256(reduce_halves(r, r));
}

/* s[b] holds 16 int32 partial sums of super-block b; returns the 8 totals in order. */
TOY_ALWAYS_INLINE __m256i reduce8_superblocks(const __m512i s[GROUP]) {
    __m512i t[4];
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        t[k] = _mm512_add_epi32(_mm512_shuffle_i64x2(s[k], s[k + 4], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_i64x2(s[k], s[k + 4], _MM_SHUFFLE(3, 2, 3, 2)));
    return reduce8_blocks(t[0], t[1], t[2], t[3]);
}

/* m[b] holds 8 int32 partial sums of super-block b; returns the 8 totals in order. */
TOY_ALWAYS_INLINE __m256i reduce8_ymm(const __m256i m[GROUP]) {
    __m512i t[4];
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        t[k] = _mm512_inserti64x4(_mm512_castsi256_si512(m[k]), m[k + 4], 1);
    return reduce8_blocks(t[0], t[1], t[2], t[3]);
}

/* 32 bytes at p0 in the low half, 32 at p4 in the high half. */
TOY_ALWAYS_INLINE __m512i load_pair(const void *p0, const void *p4) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p4), 1);
}

/* The 32-weight nibble layout of Q4_0..Q5_1 and IQ4_NL: 16 bytes, low nibble weight j,
 * high nibble weight j + 16. Returns the 32 four-bit values of the block at p0 in order
 * in the low half and those of p4 in the high half: each 16 bytes are broadcast to two
 * 128-bit lanes and the second lane takes the high nibbles. */
TOY_ALWAYS_INLINE __m512i nibbles_pair(const uint8_t *p0, const uint8_t *p4) {
    /* a broadcast from memory is a plain load; the masked one merges in one more uop */
    __m512i t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p0));
    t = _mm512_mask_broadcast_i32x4(t, 0xff00, _mm_loadu_si128((const __m128i *)p4));
    t = _mm512_srlv_epi16(t, _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0,
                                                0, 0x0004000400040004, 0x0004000400040004));
    return _mm512_and_si512(t, _mm512_set1_epi8(0x0f));
}

/* 64 weights as nibbles in 32 bytes, low nibbles first (Q4_K/Q5_K: sub-block 2k in the
 * low nibbles of 32 bytes, sub-block 2k + 1 in their high nibbles). */
TOY_ALWAYS_INLINE __m512i nibbles_lohi(const uint8_t *p) {
    __m512i t = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    t = _mm512_mask_srli_epi16(t, 0xFFFF0000u, t, 4);
    return _mm512_and_si512(t, _mm512_set1_epi8(0x0f));
}

/* The offset activation bytes a + 128 (see the top of the file). */
TOY_ALWAYS_INLINE __m512i offset_act(__m512i a) {
    return _mm512_xor_si512(a, _mm512_set1_epi8((char)0x80));
}

/* -128 * (sum of each 4 signed weights), the dpbusd start that cancels offset_act. */
TOY_ALWAYS_INLINE __m512i offset_start(__m512i q) {
    const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), q);
    return _mm512_sub_epi32(_mm512_setzero_si512(), s);
}

#ifndef PREFETCH_DIST
#define PREFETCH_DIST 8192
#endif
/* Decode streams weight rows from memory; asking for the lines PREFETCH_DIST bytes ahead
 * of the block being decoded keeps more of them in flight than the hardware prefetcher
 * alone does. A prefetch never faults, so running past the row end is harmless. */
TOY_ALWAYS_INLINE void prefetch_ahead(const void *p, size_t bytes) {
    if (PREFETCH_DIST == 0) return;
    const char *c = (const char *)p + PREFETCH_DIST;
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
}

TOY_ALWAYS_INLINE const void *row_at(const void *base, size_t stride, int64_t i) {
    return (const uint8_t *)base + (size_t)i * stride;
}

/* ================================================================ 32-weight blocks
 * Q4_0, Q5_0, Q8_0, IQ4_NL (signed weights, Q8_0 activations) and Q4_1, Q5_1 (unsigned
 * weights, Q8_1 activations). A decoder turns a step of up to 8 weight blocks into a
 * group8; a dot function applies it to the step's activation blocks and returns the 8
 * block values v_b, computed as the reference's per-block epilogue. A short last step
 * (count < 8) repeats its last block in the missing places — nothing is read past the
 * row — and its extra lanes are masked off when accumulated; for whole steps count is
 * the constant GROUP and the clamping folds away.
 *
 * Tiles take two weight rows per pass (pair8): each activation step is loaded, offset
 * and its scales converted once for both, and the last level of the reduction tree and
 * the float epilogue run on one zmm holding both rows' 8 block values. The weight-only
 * start (-128 * sum w) is reduced once per step and added after the tree. */

/* Block k of a step of count blocks at p. */
#define BLOCK_AT(p, k, count) ((p) + ((k) < (count) ? (k) : (count) - 1))

typedef struct {
    __m512i q[4]; /* weight values, blocks k | k + 4 in q[k] */
    __m256 d;     /* weight scales */
    __m256 m;     /* Q4_1/Q5_1 weight offsets */
} group8;

typedef struct {
    group8 g[2];   /* two weight rows */
    __m512i start; /* signed weights: -128 * (sum of each block's weights), row 0 | row 1 */
    __m512 d, m;   /* row 0 | row 1 */
} pair8;

TOY_ALWAYS_INLINE __m512 join_ps(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

/* The activation blocks' fp16 fields of a step. */
TOY_ALWAYS_INLINE __m256 act_halves(const void *p, size_t stride, int count) {
    return count == GROUP ? halves8_wide(p, stride) : halves_n(p, stride, count);
}

/* Signed weights against Q8_0: v = (w.d * a.d) * (float)sumi. */
TOY_ALWAYS_INLINE __m256 dot8_signed(const group8 *g, const block_q8_0 *a, int count) {
    __m512i z[4];
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i av = load_pair(BLOCK_AT(a, k, count)->qs, BLOCK_AT(a, k + 4, count)->qs);
        const __m512i au = offset_act(av);
        z[k] = _mm512_dpbusd_epi32(offset_start(g->q[k]), au, g->q[k]);
    }
    const __m256i sumi = reduce8_blocks(z[0], z[1], z[2], z[3]);
    const __m256 d = _mm256_mul_ps(g->d, act_halves(&a[0].d, sizeof *a, count));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi));
}

/* Weights stored as unsigned u = w + bias (Q4_0: nibble = w + 8, Q5_0: five bits = w + 16)
 * against Q8_0, for vec_dot: sum w * a = sum u * a - bias * sum a, both sums straight
 * from vpdpbusd (u unsigned, a signed): exact for every byte and cheaper than offsetting
 * the activations, whose start term a single row cannot share. */
TOY_ALWAYS_INLINE __m256 dot8_biased(const group8 *g, const block_q8_0 *a, int count, char bias) {
    __m512i z[4];
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i av = load_pair(BLOCK_AT(a, k, count)->qs, BLOCK_AT(a, k + 4, count)->qs);
        const __m512i ua = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g->q[k], av);
        const __m512i ba = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(bias), av);
        z[k] = _mm512_sub_epi32(ua, ba);
    }
    const __m256i sumi = reduce8_blocks(z[0], z[1], z[2], z[3]);
    const __m256 d = _mm256_mul_ps(g->d, act_halves(&a[0].d, sizeof *a, count));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi));
}

TOY_ALWAYS_INLINE __m256 dot8_bias8(const group8 *g, const block_q8_0 *a, int count) {
    return dot8_biased(g, a, count, 8);
}

TOY_ALWAYS_INLINE __m256 dot8_bias16(const group8 *g, const block_q8_0 *a, int count) {
    return dot8_biased(g, a, count, 16);
}

TOY_ALWAYS_INLINE void pair8_signed(pair8 *p) {
    __m512i r[2];
    TOY_UNROLL8
    for (int i = 0; i < 2; i++)
        r[i] = reduce_lanes(offset_start(p->g[i].q[0]), offset_start(p->g[i].q[1]),
                            offset_start(p->g[i].q[2]), offset_start(p->g[i].q[3]));
    p->start = reduce_halves(r[0], r[1]);
    p->d = join_ps(p->g[0].d, p->g[1].d);
}

TOY_ALWAYS_INLINE __m512 dot8x2_signed(const pair8 *p, const block_q8_0 *a, int count) {
    __m512i z0[4], z1[4];
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i av = load_pair(BLOCK_AT(a, k, count)->qs, BLOCK_AT(a, k + 4, count)->qs);
        const __m512i au = offset_act(av);
        z0[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), au, p->g[0].q[k]);
        z1[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), au, p->g[1].q[k]);
    }
    const __m512i sumi = _mm512_add_epi32(reduce8_blocks_x2(z0, z1), p->start);
    const __m256 ad = act_halves(&a[0].d, sizeof *a, count);
    const __m512 d = _mm512_mul_ps(p->d, join_ps(ad, ad));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi));
}

/* Unsigned weights against Q8_1: v = (w.d * a.d) * (float)sumi + w.m * a.s. */
TOY_ALWAYS_INLINE __m256 dot8_unsigned(const group8 *g, const block_q8_1 *a, int count) {
    __m512i z[4];
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i av = load_pair(BLOCK_AT(a, k, count)->qs, BLOCK_AT(a, k + 4, count)->qs);
        z[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g->q[k], av);
    }
    const __m256i sumi = reduce8_blocks(z[0], z[1], z[2], z[3]);
    const __m256 d = _mm256_mul_ps(g->d, act_halves(&a[0].d, sizeof *a, count));
    const __m256 scaled = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi));
    const __m256 offset = _mm256_mul_ps(g->m, act_halves(&a[0].s, sizeof *a, count));
    return _mm256_add_ps(scaled, offset);
}

TOY_ALWAYS_INLINE void pair8_unsigned(pair8 *p) {
    p->d = join_ps(p->g[0].d, p->g[1].d);
    p->m = join_ps(p->g[0].m, p->g[1].m);
}

TOY_ALWAYS_INLINE __m512 dot8x2_unsigned(const pair8 *p, const block_q8_1 *a, int count) {
    __m512i z0[4], z1[4];
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i av = load_pair(BLOCK_AT(a, k, count)->qs, BLOCK_AT(a, k + 4, count)->qs);
        z0[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p->g[0].q[k], av);
        z1[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p->g[1].q[k], av);
    }
    const __m512i sumi = reduce8_blocks_x2(z0, z1);
    const __m256 ad = act_halves(&a[0].d, sizeof *a, count);
    const __m256 as = act_halves(&a[0].s, sizeof *a, count);
    const __m512 d = _mm512_mul_ps(p->d, join_ps(ad, ad));
    const __m512 scaled = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi));
    const __m512 offset = _mm512_mul_ps(p->m, join_ps(as, as));
    return _mm512_add_ps(scaled, offset);
}

/* The 32-bit qh of Q5_0/Q5_1 blocks k and k + 4: bit j is the fifth bit of weight j,
 * which is byte j of the block's half of the register. */
TOY_ALWAYS_INLINE __mmask64 qh_pair(const uint8_t *qh0, const uint8_t *qh4) {
    uint32_t lo, hi;
    memcpy(&lo, qh0, 4);
    memcpy(&hi, qh4, 4);
    return _cvtu64_mask64((uint64_t)lo | (uint64_t)hi << 32);
}

/* ---------------------------------------------------------------- Q8_0 */

TOY_ALWAYS_INLINE void decode8_q8_0(const block_q8_0 *w, int count, group8 *g) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        g->q[k] = load_pair(BLOCK_AT(w, k, count)->qs, BLOCK_AT(w, k + 4, count)->qs);
    g->d = weight_halves(w, &w->d, sizeof *w, count);
}

/* ---------------------------------------------------------------- Q4_0 */

/* The nibbles as stored (w + 8), for dot8_bias8. */
TOY_ALWAYS_INLINE void decode8_q4_0_biased(const block_q4_0 *w, int count, group8 *g) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        g->q[k] = nibbles_pair(BLOCK_AT(w, k, count)->qs, BLOCK_AT(w, k + 4, count)->qs);
    g->d = weight_halves(w, &w->d, sizeof *w, count);
}

/* The signed weights w, for the tiles. */
TOY_ALWAYS_INLINE void decode8_q4_0(const block_q4_0 *w, int count, group8 *g) {
    decode8_q4_0_biased(w, count, g);
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) g->q[k] = _mm512_sub_epi8(g->q[k], _mm512_set1_epi8(8));
}

/* ---------------------------------------------------------------- Q5_0 */

/* The five bits as stored (w + 16), for dot8_bias16. */
TOY_ALWAYS_INLINE void decode8_q5_0_biased(const block_q5_0 *w, int count, group8 *g) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const block_q5_0 *b0 = BLOCK_AT(w, k, count), *b4 = BLOCK_AT(w, k + 4, count);
        const __m512i nib = nibbles_pair(b0->qs, b4->qs);
        g->q[k] = _mm512_mask_add_epi8(nib, qh_pair(b0->qh, b4->qh), nib, _mm512_set1_epi8(16));
    }
    g->d = weight_halves(w, &w->d, sizeof *w, count);
}

/* A clear fifth bit means the nibble minus 16, a set one the nibble itself. */
TOY_ALWAYS_INLINE void decode8_q5_0(const block_q5_0 *w, int count, group8 *g) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const block_q5_0 *b0 = BLOCK_AT(w, k, count), *b4 = BLOCK_AT(w, k + 4, count);
        const __m512i nib = nibbles_pair(b0->qs, b4->qs);
        const __mmask64 clear = _knot_mask64(qh_pair(b0->qh, b4->qh));
        g->q[k] = _mm512_mask_sub_epi8(nib, clear, nib, _mm512_set1_epi8(16));
    }
    g->d = weight_halves(w, &w->d, sizeof *w, count);
}

/* ---------------------------------------------------------------- IQ4_NL */

/* The 16 levels in every 128-bit lane, for vpshufb. */
TOY_ALWAYS_INLINE __m512i iq4nl_table(void) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ty_iq4nl_values));
}

TOY_ALWAYS_INLINE void decode8_iq4_nl(const block_iq4_nl *w, int count, group8 *g) {
    const __m512i table = iq4nl_table();
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        g->q[k] = _mm512_shuffle_epi8(
            table, nibbles_pair(BLOCK_AT(w, k, count)->qs, BLOCK_AT(w, k + 4, count)->qs));
    g->d = weight_halves(w, &w->d, sizeof *w, count);
}

/* ---------------------------------------------------------------- Q4_1 */

TOY_ALWAYS_INLINE void decode8_q4_1(const block_q4_1 *w, int count, group8 *g) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        g->q[k] = nibbles_pair(BLOCK_AT(w, k, count)->qs, BLOCK_AT(w, k + 4, count)->qs);
    g->d = weight_halves(w, &w->d, sizeof *w, count);
    g->m = weight_halves(w, &w->m, sizeof *w, count);
}

/* ---------------------------------------------------------------- Q5_1 */

TOY_ALWAYS_INLINE void decode8_q5_1(const block_q5_1 *w, int count, group8 *g) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const block_q5_1 *b0 = BLOCK_AT(w, k, count), *b4 = BLOCK_AT(w, k + 4, count);
        const __m512i nib = nibbles_pair(b0->qs, b4->qs);
        const __mmask64 set = qh_pair(b0->qh, b4->qh);
        g->q[k] = _mm512_mask_add_epi8(nib, set, nib, _mm512_set1_epi8(16));
    }
    g->d = weight_halves(w, &w->d, sizeof *w, count);
    g->m = weight_halves(w, &w->m, sizeof *w, count);
}

/* ---------------------------------------------------------------- block drivers */

typedef enum { BK_Q8_0, BK_Q4_0, BK_Q5_0, BK_IQ4_NL, BK_Q4_1, BK_Q5_1 } block32;

static const size_t bk_size[] = {sizeof(block_q8_0), sizeof(block_q4_0), sizeof(block_q5_0),
                                 sizeof(block_iq4_nl), sizeof(block_q4_1), sizeof(block_q5_1)};

/* Q4_1 and Q5_1 take Q8_1 activations (unsigned weights), the others Q8_0 (signed). */
TOY_ALWAYS_INLINE bool bk_unsigned(const block32 t) {
    return t == BK_Q4_1 || t == BK_Q5_1;
}


TOY_ALWAYS_INLINE __m256 bk_dot8_row(const block32 t, const group8 *g, const void *y, int count) {
    switch (t) {
    case BK_Q4_0: return dot8_bias8(g, y, count);
    case BK_Q5_0: return dot8_bias16(g, y, count);
    case BK_Q4_1: case BK_Q5_1: return dot8_unsigned(g, y, count);
    default: return dot8_signed(g, y, count);
    }
}

/* count blocks decoded: for the row kernel Q4_0 and Q5_0 biased (as dot8_bias8/16
 * want), for the tile's pairs signed */
TOY_ALWAYS_INLINE void bk_decode8(const block32 t, const void *x, int count, group8 *g, const bool biased) {
    switch (t) {
    case BK_Q8_0: decode8_q8_0(x, count, g); break;
    case BK_Q4_0: biased ? decode8_q4_0_biased(x, count, g) : decode8_q4_0(x, count, g); break;
    case BK_Q5_0: biased ? decode8_q5_0_biased(x, count, g) : decode8_q5_0(x, count, g); break;
    case BK_IQ4_NL: decode8_iq4_nl(x, count, g); break;
    case BK_Q4_1: decode8_q4_1(x, count, g); break;
    case BK_Q5_1: decode8_q5_1(x, count, g); break;
    }
}

TOY_ALWAYS_INLINE void bk_decode_pair(const block32 t, const void *x0, const void *x1, int count, pair8 *p) {
    bk_decode8(t, x0, count, &p->g[0], false);
    bk_decode8(t, x1, count, &p->g[1], false);
    if (bk_unsigned(t)) pair8_unsigned(p);
    else pair8_signed(p);
}

TOY_ALWAYS_INLINE __m512 bk_dot8x2(const block32 t, const pair8 *p, const void *y, int count) {
    return bk_unsigned(t) ? dot8x2_unsigned(p, y, count) : dot8x2_signed(p, y, count);
}

/* vec_dot of a 32-weight block type */
TOY_ALWAYS_INLINE float bk_vec_dot(const block32 t, int64_t n, const void *w, const void *a) {
    const uint8_t *x = w, *y = a;
    const size_t wb = bk_size[t], ab = bk_unsigned(t) ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const int64_t nb = n / 32;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + GROUP <= nb; b += GROUP) {
        prefetch_ahead(x + (size_t)b * wb, GROUP * wb);
        group8 g;
        bk_decode8(t, x + (size_t)b * wb, GROUP, &g, true);
        acc = _mm256_add_ps(acc, bk_dot8_row(t, &g, y + (size_t)b * ab, GROUP));
    }
    if (b < nb) {
        const int count = (int)(nb - b);
        group8 g;
        bk_decode8(t, x + (size_t)b * wb, count, &g, true);
        acc = _mm256_mask_add_ps(acc, first_lanes(count), acc, bk_dot8_row(t, &g, y + (size_t)b * ab, count));
    }
    return ty_combine8(acc);
}

/* vec_dot_tile of a 32-weight block type. An odd last weight row of a tile is paired
 * with itself and the copy's results dropped. */
TOY_ALWAYS_INLINE void bk_vec_dot_tile(const block32 t, int64_t n, const void *w, size_t w_stride, int n_w,
                                       const void *a, size_t a_stride, int n_a, float *out, size_t out_stride) {
    const size_t wb = bk_size[t], ab = bk_unsigned(t) ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const int64_t nb = n / 32, nfull = nb - nb % GROUP;
    const int count = (int)(nb % GROUP);
    const __mmask16 tail = (__mmask16)(first_lanes(count) * 0x101u);
    for (int i = 0; i < n_w; i += 2) {
        const uint8_t *x0 = row_at(w, w_stride, i);
        const uint8_t *x1 = row_at(w, w_stride, i + 1 < n_w ? i + 1 : i);
        __m512 acc[TOY_TILE_MAX];
        for (int j = 0; j < n_a; j++) acc[j] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nfull; b += GROUP) {
            pair8 p;
            bk_decode_pair(t, x0 + (size_t)b * wb, x1 + (size_t)b * wb, GROUP, &p);
            for (int j = 0; j < n_a; j++) {
                const uint8_t *y = row_at(a, a_stride, j);
                acc[j] = _mm512_add_ps(acc[j], bk_dot8x2(t, &p, y + (size_t)b * ab, GROUP));
            }
        }
        if (count) {
            pair8 p;
            bk_decode_pair(t, x0 + (size_t)nfull * wb, x1 + (size_t)nfull * wb, count, &p);
            for (int j = 0; j < n_a; j++) {
                const uint8_t *y = row_at(a, a_stride, j);
                const __m512 v = bk_dot8x2(t, &p, y + (size_t)nfull * ab, count);
                acc[j] = _mm512_mask_add_ps(acc[j], tail, acc[j], v);
            }
        }
        for (int j = 0; j < n_a; j++) {
            out[(size_t)j * out_stride + i] = ty_combine8(_mm512_castps512_ps256(acc[j]));
            if (i + 1 < n_w) out[(size_t)j * out_stride + i + 1] = ty_combine8(_mm512_extractf32x8_ps(acc[j], 1));
        }
    }
}

static float vec_dot_q8_0(int64_t n, const void *w, const void *a) { return bk_vec_dot(BK_Q8_0, n, w, a); }
static void vec_dot_tile_q8_0(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { bk_vec_dot_tile(BK_Q8_0, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q4_0(int64_t n, const void *w, const void *a) { return bk_vec_dot(BK_Q4_0, n, w, a); }
static void vec_dot_tile_q4_0(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { bk_vec_dot_tile(BK_Q4_0, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q5_0(int64_t n, const void *w, const void *a) { return bk_vec_dot(BK_Q5_0, n, w, a); }
static void vec_dot_tile_q5_0(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { bk_vec_dot_tile(BK_Q5_0, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_iq4_nl(int64_t n, const void *w, const void *a) { return bk_vec_dot(BK_IQ4_NL, n, w, a); }
static void vec_dot_tile_iq4_nl(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                                float *y, size_t ys) { bk_vec_dot_tile(BK_IQ4_NL, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q4_1(int64_t n, const void *w, const void *a) { return bk_vec_dot(BK_Q4_1, n, w, a); }
static void vec_dot_tile_q4_1(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { bk_vec_dot_tile(BK_Q4_1, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q5_1(int64_t n, const void *w, const void *a) { return bk_vec_dot(BK_Q5_1, n, w, a); }
static void vec_dot_tile_q5_1(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { bk_vec_dot_tile(BK_Q5_1, n, w, ws, n_w, a, as, n_a, y, ys); }


/* ================================================================ K-quants
 * One super-block of 256 weights per v_b. A decoder expands one weight super-block; a dot
 * function applies it to one Q8_K block and leaves 16 int32 partial sums of isum (and,
 * for types with mins, 8 of summs); after 8 super-blocks the partial sums are reduced
 * together and turned into the 8 values v_b by the type's epilogue.
 *
 * Scales multiply 16-bit pair sums: vpmaddubsw forms (q * a) pairs without saturating
 * (|q| <= 63 unsigned, or <= 32 signed against a + 128 <= 255: at most 16320), then
 * vpdpwssd multiplies them by the scale repeated in both halves of a dword and adds. */

/* Per-16-weight scales (Q2_K, Q3_K, Q6_K): from the 16 scales as int32, the four zmm
 * of vpdpwssd scales, out[k] for weights 64k..64k+63: scale 4k + L in every word of
 * 128-bit lane L. */
TOY_ALWAYS_INLINE void scales_quad_w16(__m512i sc, __m512i out[4]) {
    const __m512i words =
        _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(sc, 16));
    const __m512i lane = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        out[k] = _mm512_permutexvar_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(4 * k)), words);
}

/* Q2_K/Q3_K 2-bit fields of one 128-weight half: byte l of qs32 holds weights l, l + 32,
 * l + 64, l + 96 in bits 0-1, 2-3, 4-5, 6-7. Returns weights 64*part .. 64*part + 63. */
TOY_ALWAYS_INLINE __m512i crumbs_half(const uint8_t *qs32, int part) {
    const __m512i t = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qs32));
    const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * part)),
                                             _mm256_set1_epi16((short)(4 * part + 2)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(t, shift), _mm512_set1_epi8(3));
}

/* For the zmm of weights 64k..64k+63 in the hmask/qh layout (bit e/32 of byte e%32), the
 * byte mask selecting bit 2k in the low half and bit 2k + 1 in the high half. */
TOY_ALWAYS_INLINE __m512i bit_pair_select(int k) {
    return _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * k))),
                              _mm256_set1_epi8((char)(1 << (2 * k + 1))), 1);
}

/* The epilogue of a step of count super-blocks. wf holds the weights' d (and dmin) of
 * the step as floats, converted once per weight row and shared by a tile's activation
 * rows. With mins (Q2_K, Q4_K, Q5_K):
 *     v = (w.d * a.d) * (float)isum - (w.dmin * a.d) * (float)summs */
TOY_ALWAYS_INLINE __m256 values8_dmin(const __m256 wf[2], const block_q8_K *a, const __m512i s[GROUP],
                           const __m256i m[GROUP], int count) {
    const __m256i isum = reduce8_superblocks(s), summs = reduce8_ymm(m);
    const __m256 ad = floats_n(&a[0].d, sizeof *a, count);
    const __m256 d = _mm256_mul_ps(wf[0], ad);
    const __m256 dm = _mm256_mul_ps(wf[1], ad);
    const __m256 scaled = _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum));
    const __m256 mins = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(summs));
    return _mm256_sub_ps(scaled, mins);
}

/* Without (Q3_K, Q6_K, IQ4_XS): v = (w.d * a.d) * (float)isum. */
TOY_ALWAYS_INLINE __m256 values8_d(const __m256 wf[2], const block_q8_K *a, const __m512i s[GROUP],
                        const __m256i m[GROUP], int count) {
    (void)m;
    const __m256i isum = reduce8_superblocks(s);
    const __m256 d = _mm256_mul_ps(wf[0], floats_n(&a[0].d, sizeof *a, count));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum));
}

/* ---------------------------------------------------------------- Q4_K, Q5_K */

typedef struct {
    __m512i q[4];  /* sub-blocks 2k | 2k + 1 as unsigned bytes */
    __m512i sc[4]; /* their scales for vpdpwssd */
    __m256i mins;  /* min of sub-block j in words 2j, 2j + 1: the pairing of bsums */
} k4_dec;

/* The 8 six-bit scales and mins (kernels.c k4_scale_min), as ggml's kmask unpacking, in
 * vector registers (moving them through general registers cost more than the dot
 * product). head is the block's first 16 bytes: d and dmin, then the 12 packed bytes
 * u0 u1 u2 (dwords 1-3). Bytes 0-7 of the result are the scales of sub-blocks 0-7,
 * bytes 8-15 their mins:
 *     scales 0-3 = u0 & 0x3f, scales 4-7 = (u2 & 0x0f) | (u0 >> 6) << 4,
 *     mins 0-3   = u1 & 0x3f, mins 4-7   = (u2 >> 4)  | (u1 >> 6) << 4. */
TOY_ALWAYS_INLINE __m128i k4_unpack_scales(const void *head) {
    const __m128i x = _mm_loadu_si128((const __m128i *)head);
    const __m128i p = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 2, 1, 1));            /* u0 u0 u1 u1 */
    const __m128i q = _mm_srlv_epi32(_mm_shuffle_epi32(x, _MM_SHUFFLE(3, 3, 3, 3)),
                                     _mm_setr_epi32(0, 0, 0, 4));               /* - u2 - u2>>4 */
    /* low nibble from q, bits 4-5 from p >> 2 (bits 6-7 cleared below) */
    const __m128i high = _mm_ternarylogic_epi32(_mm_set1_epi8(0x0f), q, _mm_srli_epi32(p, 2), 0xca);
    return _mm_and_si128(_mm_mask_blend_epi32(0xa, p, high), _mm_set1_epi8(0x3f));
}

/* dec->sc[k]: scale 2k in every word of the low half, 2k + 1 in the high half; dec->mins:
 * min j in words 2j and 2j + 1. */
TOY_ALWAYS_INLINE void k4_scales(const void *head, k4_dec *dec) {
    const __m512i b = _mm512_broadcast_i32x4(k4_unpack_scales(head));
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const char lo = (char)(2 * k), hi = (char)(2 * k + 1), z = (char)0x80;
        const __m256i l = _mm256_setr_epi8(lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z,
                                           lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z);
        const __m256i h = _mm256_setr_epi8(hi, z, hi, z, hi, z, hi, z, hi, z, hi, z, hi, z, hi, z,
                                           hi, z, hi, z, hi, z, hi, z, hi, z, hi, z, hi, z, hi, z);
        dec->sc[k] = _mm512_shuffle_epi8(b, _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1));
    }
    const char z = (char)0x80;
    const __m256i mins_words = _mm256_setr_epi8(8, z, 8, z, 9, z, 9, z, 10, z, 10, z, 11, z, 11, z,
                                                12, z, 12, z, 13, z, 13, z, 14, z, 14, z, 15, z, 15, z);
    dec->mins = _mm256_shuffle_epi8(_mm512_castsi512_si256(b), mins_words);
}

TOY_ALWAYS_INLINE void decode_q4_K(const block_q4_K *w, k4_dec *dec) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) dec->q[k] = nibbles_lohi(w->qs + 32 * k);
    k4_scales(w, dec);
}

/* The fifth bit of weight 32j + l is bit j of qh[l]. */
TOY_ALWAYS_INLINE void decode_q5_K(const block_q5_K *w, k4_dec *dec) {
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w->qh));
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i nib = nibbles_lohi(w->qs + 32 * k);
        const __mmask64 set = _mm512_test_epi8_mask(qh, bit_pair_select(k));
        dec->q[k] = _mm512_mask_add_epi8(nib, set, nib, _mm512_set1_epi8(16));
    }
    k4_scales(w, dec);
}

TOY_ALWAYS_INLINE void dot_k4(const k4_dec *dec, const block_q8_K *a, __m512i *s, __m256i *m) {
    __m512i acc = _mm512_setzero_si512();
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i prod = _mm512_maddubs_epi16(dec->q[k], _mm512_loadu_si512(a->qs + 64 * k));
        acc = _mm512_dpwssd_epi32(acc, prod, dec->sc[k]);
    }
    *s = acc;
    *m = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), dec->mins);
}

/* ---------------------------------------------------------------- Q2_K */

/* Q4_K's decoded form and dot: weights 64k..64k+63 unsigned 0..3, per-16 scales (low
 * nibbles), per-16 mins (high nibbles) matching the 16 bsums. */
TOY_ALWAYS_INLINE void decode_q2_K(const block_q2_K *w, k4_dec *dec) {
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) dec->q[k] = crumbs_half(w->qs + 32 * (k / 2), k % 2);
    const __m128i packed = _mm_loadu_si128((const __m128i *)w->scales);
    const __m512i sc =
        _mm512_cvtepu8_epi32(_mm_and_si128(packed, _mm_set1_epi8(0x0f)));
    scales_quad_w16(sc, dec->sc);
    dec->mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f)));
}

/* ---------------------------------------------------------------- signed K-types
 * Q3_K, Q6_K and IQ4_XS weights are signed: the activations are offset (a + 128) and
 * `start` holds -128 * sum(scale * w) of the super-block (see the top of the file). */

typedef struct {
    __m512i q[4];  /* weights 64k..64k+63, signed */
    __m512i sc[4]; /* scales for vpdpwssd (Q3_K, Q6_K) or vpmulld (IQ4_XS) */
    __m512i start;
} ks_dec;

TOY_ALWAYS_INLINE void finish_signed_k(ks_dec *dec) {
    __m512i s = _mm512_setzero_si512();
    TOY_UNROLL8
    for (int k = 0; k < 4; k++)
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(_mm512_set1_epi8((char)0x80), dec->q[k]),
                                dec->sc[k]);
    dec->start = _mm512_sub_epi32(_mm512_setzero_si512(), s);
}

/* Q3_K, Q6_K: per-16 scales applied to vpmaddubsw pair sums. */
TOY_ALWAYS_INLINE void dot_ks16(const ks_dec *dec, const block_q8_K *a, __m512i *s, __m256i *m) {
    (void)m;
    __m512i acc = dec->start;
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i au = offset_act(_mm512_loadu_si512(a->qs + 64 * k));
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(au, dec->q[k]), dec->sc[k]);
    }
    *s = acc;
}

/* ---------------------------------------------------------------- Q3_K */

/* The 16 six-bit scales stored +32 (kernels.c q3_scale), unpacked as ggml does. */
TOY_ALWAYS_INLINE __m512i q3_scales(const uint8_t *packed) {
    uint32_t u[3];
    memcpy(u, packed, sizeof u);
    const uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303, top = u[2];
    const __m128i biased = _mm_setr_epi32((int)((u[0] & low4) | (top & low2) << 4),
                                          (int)((u[1] & low4) | ((top >> 2) & low2) << 4),
                                          (int)(((u[0] >> 4) & low4) | ((top >> 4) & low2) << 4),
                                          (int)(((u[1] >> 4) & low4) | ((top >> 6) & low2) << 4));
    const __m128i s = _mm_sub_epi8(biased, _mm_set1_epi8(32));
    return _mm512_cvtepi8_epi32(s);
}

/* A clear hmask bit means the 2-bit value minus 4. */
TOY_ALWAYS_INLINE void decode_q3_K(const block_q3_K *w, ks_dec *dec) {
    const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w->hmask));
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i q2 = crumbs_half(w->qs + 32 * (k / 2), k % 2);
        const __mmask64 clear = _mm512_testn_epi8_mask(hm, bit_pair_select(k));
        dec->q[k] = _mm512_mask_sub_epi8(q2, clear, q2, _mm512_set1_epi8(4));
    }
    const __m512i sc = q3_scales(w->scales);
    scales_quad_w16(sc, dec->sc);
    finish_signed_k(dec);
}

/* ---------------------------------------------------------------- Q6_K */

/* Per 128-weight half: ql[0..63] holds weights 0-63 in its low nibbles and 64-127 in its
 * high nibbles; qh[l] holds the top two bits of weights l, l+32, l+64, l+96. Shifting
 * each 16-bit word of qh by 4, 2 (low zmm) or 0, -2 (high zmm) puts the right pair at
 * bits 4-5 of every byte; bits crossing into the neighbouring byte are masked off. */
TOY_ALWAYS_INLINE void decode_q6_K(const block_q6_K *w, ks_dec *dec) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    TOY_UNROLL8
    for (int h = 0; h < 2; h++) {
        const __m512i ql = load_pair(w->ql + 64 * h, w->ql + 64 * h + 32);
        const __m512i qh =
            _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qh + 32 * h)));
        const __m512i hi_lo = _mm512_and_si512(_mm512_sllv_epi16(qh, shl), bits45);
        const __m512i hi_hi = _mm512_and_si512(_mm512_srlv_epi16(qh, shr), bits45);
        const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, low4), hi_lo);
        const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), hi_hi);
        dec->q[2 * h] = _mm512_sub_epi8(lo, _mm512_set1_epi8(32));
        dec->q[2 * h + 1] = _mm512_sub_epi8(hi, _mm512_set1_epi8(32));
    }
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)w->scales));
    scales_quad_w16(sc, dec->sc);
    finish_signed_k(dec);
}

/* ---------------------------------------------------------------- IQ4_XS */

/* Levels up to 127 against a + 128 overflow vpmaddubsw's 16-bit pairs, so the sums stay
 * int32 (vpdpbusd) and the per-32 scales multiply dwords. start = -128 * sum(scale * w)
 * per dword, added after the multiply. */
TOY_ALWAYS_INLINE void decode_iq4_xs(const block_iq4_xs *w, ks_dec *dec) {
    const __m512i table = iq4nl_table();
    __m512i s = _mm512_setzero_si512();
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        /* groups 2k and 2k + 1: 16 bytes each, laid out like an IQ4_NL block */
        const uint8_t *qs = w->qs + 32 * k;
        dec->q[k] = _mm512_shuffle_epi8(table, nibbles_pair(qs, qs + 16));
        const int ib = 2 * k;
        const int lo = ((w->scales_l[k] & 0x0f) | ((w->scales_h >> (2 * ib)) & 3) << 4) - 32;
        const int hi = ((w->scales_l[k] >> 4) | ((w->scales_h >> (2 * ib + 2)) & 3) << 4) - 32;
        dec->sc[k] = _mm512_inserti64x4(_mm512_set1_epi32(lo), _mm256_set1_epi32(hi), 1);
        s = _mm512_add_epi32(s, _mm512_mullo_epi32(offset_start(dec->q[k]), dec->sc[k]));
    }
    dec->start = s;
}

TOY_ALWAYS_INLINE void dot_iq4_xs(const ks_dec *dec, const block_q8_K *a, __m512i *s, __m256i *m) {
    (void)m;
    __m512i acc = dec->start;
    TOY_UNROLL8
    for (int k = 0; k < 4; k++) {
        const __m512i au = offset_act(_mm512_loadu_si512(a->qs + 64 * k));
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), au, dec->q[k]);
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(dot, dec->sc[k]));
    }
    *s = acc;
}

/* ---------------------------------------------------------------- super-block drivers */

typedef enum { SB_Q2_K, SB_Q3_K, SB_Q4_K, SB_Q5_K, SB_Q6_K, SB_IQ4_XS } superblock;

/* Each type's block size and the offsets of its d and dmin (0: none) */
static const size_t sb_size[] = {sizeof(block_q2_K), sizeof(block_q3_K), sizeof(block_q4_K),
                                 sizeof(block_q5_K), sizeof(block_q6_K), sizeof(block_iq4_xs)};
static const size_t sb_d[] = {offsetof(block_q2_K, d), offsetof(block_q3_K, d), offsetof(block_q4_K, d),
                              offsetof(block_q5_K, d), offsetof(block_q6_K, d), offsetof(block_iq4_xs, d)};
static const size_t sb_dmin[] = {offsetof(block_q2_K, dmin), 0, offsetof(block_q4_K, dmin),
                                 offsetof(block_q5_K, dmin), 0, 0};

/* Weight super-block x decoded once and applied to n_a activation blocks (y_stride bytes
 * apart): the partial sums of row j into s[j * sm_stride], m[j * sm_stride]. */
TOY_ALWAYS_INLINE void sb_sums(const superblock t, const void *x, const uint8_t *y, size_t y_stride, const int n_a,
                               __m512i *s, __m256i *m, const int sm_stride) {
    k4_dec k4;
    ks_dec ks;
    switch (t) {
    case SB_Q4_K: decode_q4_K(x, &k4); break;
    case SB_Q5_K: decode_q5_K(x, &k4); break;
    case SB_Q6_K: decode_q6_K(x, &ks); break;
    case SB_Q2_K: decode_q2_K(x, &k4); break;
    case SB_Q3_K: decode_q3_K(x, &ks); break;
    case SB_IQ4_XS: decode_iq4_xs(x, &ks); break;
    }
    for (int j = 0; j < n_a; j++) {
        const block_q8_K *a = (const block_q8_K *)(y + (size_t)j * y_stride);
        __m512i *sj = s + j * sm_stride;
        __m256i *mj = m + j * sm_stride;
        switch (t) {
        case SB_Q4_K: case SB_Q5_K: case SB_Q2_K: dot_k4(&k4, a, sj, mj); break;
        case SB_Q6_K: case SB_Q3_K: dot_ks16(&ks, a, sj, mj); break;
        case SB_IQ4_XS: dot_iq4_xs(&ks, a, sj, mj); break;
        }
    }
}

/* The weight factors of a step: d, and dmin where the type has one. */
TOY_ALWAYS_INLINE void sb_wfactors(const superblock t, const uint8_t *x, int count, __m256 wf[2]) {
    wf[0] = halves_n(x + sb_d[t], sb_size[t], count);
    wf[1] = sb_dmin[t] ? halves_n(x + sb_dmin[t], sb_size[t], count) : _mm256_setzero_ps();
}

TOY_ALWAYS_INLINE __m256 sb_values8(const superblock t, const __m256 wf[2], const block_q8_K *a, const __m512i s[GROUP],
                                    const __m256i m[GROUP], int count) {
    return sb_dmin[t] ? values8_dmin(wf, a, s, m, count) : values8_d(wf, a, s, m, count);
}

/* vec_dot of a super-block type. Each step covers up to 8 super-blocks (fewer at the end
 * of a row: missing ones contribute zero sums and masked lanes). */
TOY_ALWAYS_INLINE float sb_vec_dot(const superblock t, int64_t n, const void *w, const void *a) {
    const uint8_t *x = w;
    const block_q8_K *y = a;
    const size_t bytes = sb_size[t];
    const int64_t nb = n / QK_K;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + GROUP <= nb; b += GROUP) {
        __m512i s[GROUP];
        __m256i m[GROUP];
        TOY_UNROLL8
        for (int k = 0; k < GROUP; k++) {
            prefetch_ahead(x + (size_t)(b + k) * bytes, bytes);
            sb_sums(t, x + (size_t)(b + k) * bytes, (const uint8_t *)(y + b + k), 0, 1, &s[k], &m[k], 0);
        }
        __m256 wf[2];
        sb_wfactors(t, x + (size_t)b * bytes, GROUP, wf);
        acc = _mm256_add_ps(acc, sb_values8(t, wf, y + b, s, m, GROUP));
    }
    if (b < nb) {
        const int count = (int)(nb - b);
        __m512i s[GROUP];
        __m256i m[GROUP];
        /* unrolled with a test per block, so s and m stay in registers */
        TOY_UNROLL8
        for (int k = 0; k < GROUP; k++) {
            s[k] = _mm512_setzero_si512();
            m[k] = _mm256_setzero_si256();
            if (k < count) {
                prefetch_ahead(x + (size_t)(b + k) * bytes, bytes);
                sb_sums(t, x + (size_t)(b + k) * bytes, (const uint8_t *)(y + b + k), 0, 1, &s[k], &m[k], 0);
            }
        }
        __m256 wf[2];
        sb_wfactors(t, x + (size_t)b * bytes, count, wf);
        const __m256 v = sb_values8(t, wf, y + b, s, m, count);
        acc = _mm256_mask_add_ps(acc, first_lanes(count), acc, v);
    }
    return ty_combine8(acc);
}

/* The tile decodes each weight super-block once, keeps every activation row's partial
 * sums in s/m until the step's epilogue, and converts the step's weight factors once. */
TOY_ALWAYS_INLINE void sb_vec_dot_tile(const superblock t, int64_t n, const void *w, size_t w_stride, int n_w,
                                       const void *a, size_t a_stride, int n_a, float *out, size_t out_stride) {
    const size_t bytes = sb_size[t];
    const int64_t nb = n / QK_K;
    __m512i s[TOY_TILE_MAX][GROUP];
    __m256i m[TOY_TILE_MAX][GROUP];
    for (int i = 0; i < n_w; i++) {
        const uint8_t *x = row_at(w, w_stride, i);
        __m256 acc[TOY_TILE_MAX];
        for (int j = 0; j < n_a; j++) acc[j] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b += GROUP) {
            const int count = nb - b < GROUP ? (int)(nb - b) : GROUP;
            for (int k = 0; k < count; k++)
                sb_sums(t, x + (size_t)(b + k) * bytes, (const uint8_t *)a + (size_t)(b + k) * sizeof(block_q8_K),
                        a_stride, n_a, &s[0][k], &m[0][k], GROUP);
            __m256 wf[2];
            sb_wfactors(t, x + (size_t)b * bytes, count, wf);
            for (int j = 0; j < n_a; j++) {
                for (int k = count; k < GROUP; k++) {
                    s[j][k] = _mm512_setzero_si512();
                    m[j][k] = _mm256_setzero_si256();
                }
                const block_q8_K *y = row_at(a, a_stride, j);
                acc[j] = _mm256_mask_add_ps(acc[j], first_lanes(count), acc[j],
                                            sb_values8(t, wf, y + b, s[j], m[j], count));
            }
        }
        for (int j = 0; j < n_a; j++) out[(size_t)j * out_stride + i] = ty_combine8(acc[j]);
    }
}

static float vec_dot_q4_K(int64_t n, const void *w, const void *a) { return sb_vec_dot(SB_Q4_K, n, w, a); }
static void vec_dot_tile_q4_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { sb_vec_dot_tile(SB_Q4_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q5_K(int64_t n, const void *w, const void *a) { return sb_vec_dot(SB_Q5_K, n, w, a); }
static void vec_dot_tile_q5_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { sb_vec_dot_tile(SB_Q5_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q6_K(int64_t n, const void *w, const void *a) { return sb_vec_dot(SB_Q6_K, n, w, a); }
static void vec_dot_tile_q6_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { sb_vec_dot_tile(SB_Q6_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q2_K(int64_t n, const void *w, const void *a) { return sb_vec_dot(SB_Q2_K, n, w, a); }
static void vec_dot_tile_q2_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { sb_vec_dot_tile(SB_Q2_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_q3_K(int64_t n, const void *w, const void *a) { return sb_vec_dot(SB_Q3_K, n, w, a); }
static void vec_dot_tile_q3_K(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { sb_vec_dot_tile(SB_Q3_K, n, w, ws, n_w, a, as, n_a, y, ys); }
static float vec_dot_iq4_xs(int64_t n, const void *w, const void *a) { return sb_vec_dot(SB_IQ4_XS, n, w, a); }
static void vec_dot_tile_iq4_xs(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                                float *y, size_t ys) { sb_vec_dot_tile(SB_IQ4_XS, n, w, ws, n_w, a, as, n_a, y, ys); }

/* ================================================================ float rows
 * 32 lanes p[i % 32] += w_i * a_i, two zmm accumulators: elements 0-15 and 16-31 of each
 * 32 (F16 widened by vcvtph2ps, BF16 zero-extended and shifted into the top half). A
 * short tail loads under a mask (nothing read past the row) and accumulates under the
 * lanes' masks, leaving the lanes it does not reach untouched. F32 multiplies then adds
 * (its products round); F16 and BF16 use FMA, as their reference does (kernels.c). */

/* The two lane masks for the first `rest` (< 32) elements, elements 0-15 | 16-31. */
TOY_ALWAYS_INLINE void masks_split(int rest, __mmask16 *m0, __mmask16 *m1) {
    *m0 = rest >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rest) - 1u);
    *m1 = rest > 16 ? (__mmask16)((1u << (rest - 16)) - 1u) : (__mmask16)0;
}

/* The first `bytes` of 64 bytes at p, zeros after (nothing read past them). Weights
 * (stream) come from memory, where rows are only 32-byte aligned (GGUF) and a zmm load
 * straddling two cache lines costs about as much as two loads: two ymm loads instead. */
TOY_ALWAYS_INLINE __m512i load64(const void *p, int bytes, int stream) {
    if (bytes < 64) {
        const __mmask64 m = bytes <= 0 ? 0 : ((uint64_t)1 << bytes) - 1;
        return _mm512_maskz_loadu_epi8(m, p);
    }
    if (stream) return load_pair(p, (const uint8_t *)p + 32);
    return _mm512_loadu_si512(p);
}

TOY_ALWAYS_INLINE __m256i load32B(const void *p, int bytes) {
    if (bytes < 32)
        return _mm256_maskz_loadu_epi8(bytes <= 0 ? 0 : (__mmask32)((1u << bytes) - 1u), p);
    return _mm256_loadu_si256((const __m256i *)p);
}

/* 32 elements (rest of them present; 32 for a whole step, where the masks fold away).
 * F32 takes ymm pairs for activations too: its tile is load-bound, and activation rows
 * (malloc'd, 16-byte aligned) would straddle lines as often as weights. */
TOY_ALWAYS_INLINE void load32_f32(const void *p, int rest, int stream, __m512 *v0, __m512 *v1) {
    (void)stream;
    *v0 = _mm512_castsi512_ps(load64(p, 4 * rest, 1));
    *v1 = _mm512_castsi512_ps(load64((const uint8_t *)p + 64, 4 * rest - 64, 1));
}

/* fp16 -> float is exact (as ty_fp16_to_fp32). */
TOY_ALWAYS_INLINE void load32_f16(const void *p, int rest, int stream, __m512 *v0, __m512 *v1) {
    (void)stream;
    *v0 = _mm512_cvtph_ps(load32B(p, 2 * rest));
    *v1 = _mm512_cvtph_ps(load32B((const uint8_t *)p + 32, 2 * rest - 32));
}

/* bf16 is the top half of a float (ty_bf16_to_fp32): zero-extended and shifted. */
TOY_ALWAYS_INLINE __m512 bf16x16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

TOY_ALWAYS_INLINE void load32_bf16(const void *p, int rest, int stream, __m512 *v0, __m512 *v1) {
    (void)stream;
    *v0 = bf16x16(load32B(p, 2 * rest));
    *v1 = bf16x16(load32B((const uint8_t *)p + 32, 2 * rest - 32));
}

TOY_ALWAYS_INLINE __m512 madd_round2(__m512 p, __mmask16 m, __m512 w, __m512 a) {
    return _mm512_mask_add_ps(p, m, p, _mm512_mul_ps(w, a));
}

TOY_ALWAYS_INLINE __m512 madd_exact_product(__m512 p, __mmask16 m, __m512 w, __m512 a) {
    return _mm512_mask3_fmadd_ps(w, a, p, m);
}

TOY_ALWAYS_INLINE float lanes_split(__m512 p0, __m512 p1) {
    return combine32(p0, p1);
}

typedef enum { EL_F32, EL_F16, EL_BF16 } elem;

TOY_ALWAYS_INLINE size_t el_bytes(const elem t) {
    return t == EL_F32 ? 4 : 2;
}

TOY_ALWAYS_INLINE void el_load32(const elem t, const void *p, int rest, int stream, __m512 *v0, __m512 *v1) {
    switch (t) {
    case EL_F32: load32_f32(p, rest, stream, v0, v1); break;
    case EL_F16: load32_f16(p, rest, stream, v0, v1); break;
    case EL_BF16: load32_bf16(p, rest, stream, v0, v1); break;
    }
}

/* F32 rounds each product (kernels.c); F16's and BF16's products are exact: one FMA */
TOY_ALWAYS_INLINE __m512 el_madd(const elem t, __m512 p, __mmask16 m, __m512 w, __m512 a) {
    return t == EL_F32 ? madd_round2(p, m, w, a) : madd_exact_product(p, m, w, a);
}

/* vec_dot of an element type; its activations are floats (kernels.h). */
TOY_ALWAYS_INLINE float el_vec_dot(const elem t, int64_t n, const void *w, const void *a) {
    const uint8_t *x = w;
    const float *y = a;
    const size_t eb = el_bytes(t);
    __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        prefetch_ahead(x + (size_t)i * eb, 32 * eb);
        __m512 w0, w1, a0, a1;
        el_load32(t, x + (size_t)i * eb, 32, 1, &w0, &w1);
        load32_f32(y + i, 32, 0, &a0, &a1);
        p0 = el_madd(t, p0, 0xffff, w0, a0);
        p1 = el_madd(t, p1, 0xffff, w1, a1);
    }
    if (i < n) {
        const int rest = (int)(n - i);
        __m512 w0, w1, a0, a1;
        __mmask16 m0, m1;
        masks_split(rest, &m0, &m1);
        el_load32(t, x + (size_t)i * eb, rest, 1, &w0, &w1);
        load32_f32(y + i, rest, 0, &a0, &a1);
        p0 = el_madd(t, p0, m0, w0, a0);
        p1 = el_madd(t, p1, m1, w1, a1);
    }
    return lanes_split(p0, p1);
}

static float vec_dot_f32(int64_t n, const void *w, const void *a) { return el_vec_dot(EL_F32, n, w, a); }
static float vec_dot_f16(int64_t n, const void *w, const void *a) { return el_vec_dot(EL_F16, n, w, a); }
static float vec_dot_bf16(int64_t n, const void *w, const void *a) { return el_vec_dot(EL_BF16, n, w, a); }

/* vec_dot_tile of F32, whose activations are held as its weights are: a register-blocked
 * kernel over whole rows, 2 weight rows x up to 4 activation
 * rows, 16 zmm accumulators, each weight and activation vector loaded and converted once
 * per 32 elements for all pairs it meets. An odd last weight row is paired with itself
 * and the copy's results dropped. */

/* One step of 32 elements (rest of them present) for the 2 x na block. */
TOY_ALWAYS_INLINE void step_2x4_f32(const float *const x[2], const float *const y[4], int na, int64_t i, int rest,
                                    __m512 p[2][4][2]) {
    __mmask16 m0 = 0xffff, m1 = 0xffff;
    if (rest < 32) masks_split(rest, &m0, &m1);
    __m512 w[2][2];
    load32_f32(x[0] + i, rest, 1, &w[0][0], &w[0][1]);
    load32_f32(x[1] + i, rest, 1, &w[1][0], &w[1][1]);
    TOY_UNROLL8
    for (int j = 0; j < na; j++) {
        __m512 a0, a1;
        load32_f32(y[j] + i, rest, 0, &a0, &a1);
        TOY_UNROLL8
        for (int r = 0; r < 2; r++) {
            p[r][j][0] = madd_round2(p[r][j][0], m0, w[r][0], a0);
            p[r][j][1] = madd_round2(p[r][j][1], m1, w[r][1], a1);
        }
    }
}

/* res[r][j] = dot(x[r], y[j]) for r < 2, j < na (a constant once inlined) */
TOY_ALWAYS_INLINE void tile_2x4_f32(int64_t n, const float *const x[2], const float *const y[4], int na,
                                    float res[2][4]) {
    __m512 p[2][4][2];
    TOY_UNROLL8
    for (int r = 0; r < 2; r++)
        TOY_UNROLL8
        for (int j = 0; j < na; j++) p[r][j][0] = p[r][j][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) step_2x4_f32(x, y, na, i, 32, p);
    if (i < n) step_2x4_f32(x, y, na, i, (int)(n - i), p);
    TOY_UNROLL8
    for (int r = 0; r < 2; r++)
        TOY_UNROLL8
        for (int j = 0; j < na; j++) res[r][j] = lanes_split(p[r][j][0], p[r][j][1]);
}

static void vec_dot_tile_f32(int64_t n, const void *w, size_t w_stride, int n_w, const void *a, size_t a_stride,
                             int n_a, float *out, size_t out_stride) {
    for (int i = 0; i < n_w; i += 2) {
        const float *const x[2] = {row_at(w, w_stride, i), row_at(w, w_stride, i + 1 < n_w ? i + 1 : i)};
        for (int j0 = 0; j0 < n_a; j0 += 4) {
            const int na = n_a - j0 < 4 ? n_a - j0 : 4;
            const float *y[4];
            for (int j = 0; j < 4; j++) y[j] = row_at(a, a_stride, j0 + (j < na ? j : 0));
            float res[2][4];
            switch (na) {
            case 4: tile_2x4_f32(n, x, y, 4, res); break;
            case 3: tile_2x4_f32(n, x, y, 3, res); break;
            case 2: tile_2x4_f32(n, x, y, 2, res); break;
            default: tile_2x4_f32(n, x, y, 1, res); break;
            }
            for (int j = 0; j < na; j++) {
                out[(size_t)(j0 + j) * out_stride + i] = res[0][j];
                if (i + 1 < n_w) out[(size_t)(j0 + j) * out_stride + i + 1] = res[1][j];
            }
        }
    }
}

/* F16's and BF16's tiles: their activations are floats (kernels.h), so only the
 * weights need converting. A pair's 32 lanes are two slices of 16 (lanes 16s..: the
 * elements 32t + 16s + ..), each summed on its own, so one slice at a time of HALF_W
 * weight rows against all n_a activation rows keeps 3 x 8 accumulators in registers
 * beside 3 converted weight vectors and an activation vector: 24 FMAs for 11 loads,
 * where one weight row against the 8 activation rows with both slices had 16 for 18
 * (load-bound: TinyLlama F16 prompts at 0.77-0.88x of llama.cpp's on a Zen 5). The
 * columns go in chunks of HALF_CHUNK (16 KiB of activations stay in L1) and the rows in
 * blocks of HALF_ROWS, whose lanes wait in memory from one chunk to the next; the
 * columns past the last whole step of 32 take the masked step after all chunks. Each
 * pair still adds its elements to each lane in column order, one rounding each. */
#define HALF_CHUNK 512 /* a multiple of 32: chunks end where 32-element steps do */
#define HALF_W 3
#define HALF_ROWS 24 /* a multiple of HALF_W */

/* 16 F16 or BF16 weights as floats */
TOY_ALWAYS_INLINE __m512 el_load16(const elem t, const uint16_t *p) {
    const __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return t == EL_F16 ? _mm512_cvtph_ps(h) : bf16x16(h);
}

/* Slice s of columns [i0, i1) (whole steps of 32) of the nw weight rows x against the na
 * activation rows, continuing the pairs' lanes. */
TOY_ALWAYS_INLINE void tile_slice(const elem t, const uint16_t *const *xs, const int nw,
                                  const float *const ys[TOY_TILE_MAX], const int na, int64_t i0, int64_t i1,
                                  const int s, __m512 lanes[][TOY_TILE_MAX][2]) {
    /* local copies: through the callers' arrays the pointers were reloaded every step */
    const uint16_t *x[HALF_W];
    const float *y[TOY_TILE_MAX];
    TOY_UNROLL8
    for (int r = 0; r < nw; r++) x[r] = xs[r];
    TOY_UNROLL8
    for (int j = 0; j < na; j++) y[j] = ys[j];
    __m512 p[HALF_W][TOY_TILE_MAX];
    TOY_UNROLL8
    for (int r = 0; r < nw; r++)
        TOY_UNROLL8
        for (int j = 0; j < na; j++) p[r][j] = lanes[r][j][s];
    for (int64_t i = i0 + 16 * s; i < i1; i += 32) {
        __m512 wv[HALF_W];
        TOY_UNROLL8
        for (int r = 0; r < nw; r++) {
            if (s == 0) prefetch_ahead(x[r] + i, 32 * sizeof *x[r]);
            wv[r] = el_load16(t, x[r] + i);
        }
        TOY_UNROLL8
        for (int j = 0; j < na; j++) {
            __m512 av = _mm512_loadu_ps(y[j] + i);
            __asm__("" : "+v"(av)); /* one load for the nw FMAs, not one each */
            TOY_UNROLL8
            for (int r = 0; r < nw; r++) p[r][j] = _mm512_fmadd_ps(wv[r], av, p[r][j]);
        }
    }
    TOY_UNROLL8
    for (int r = 0; r < nw; r++)
        TOY_UNROLL8
        for (int j = 0; j < na; j++) lanes[r][j][s] = p[r][j];
}

/* tile_slice with the row counts as constants */
TOY_ALWAYS_INLINE void tile_slice_any(const elem t, const uint16_t *const *x, int nw,
                                      const float *const y[TOY_TILE_MAX], int na, int64_t i0, int64_t i1,
                                      const int s, __m512 lanes[][TOY_TILE_MAX][2]) {
    switch (nw * 16 + na) {
    case 1 * 16 + 1: tile_slice(t, x, 1, y, 1, i0, i1, s, lanes); break;
    case 1 * 16 + 2: tile_slice(t, x, 1, y, 2, i0, i1, s, lanes); break;
    case 1 * 16 + 3: tile_slice(t, x, 1, y, 3, i0, i1, s, lanes); break;
    case 1 * 16 + 4: tile_slice(t, x, 1, y, 4, i0, i1, s, lanes); break;
    case 1 * 16 + 5: tile_slice(t, x, 1, y, 5, i0, i1, s, lanes); break;
    case 1 * 16 + 6: tile_slice(t, x, 1, y, 6, i0, i1, s, lanes); break;
    case 1 * 16 + 7: tile_slice(t, x, 1, y, 7, i0, i1, s, lanes); break;
    case 1 * 16 + 8: tile_slice(t, x, 1, y, 8, i0, i1, s, lanes); break;
    case 2 * 16 + 1: tile_slice(t, x, 2, y, 1, i0, i1, s, lanes); break;
    case 2 * 16 + 2: tile_slice(t, x, 2, y, 2, i0, i1, s, lanes); break;
    case 2 * 16 + 3: tile_slice(t, x, 2, y, 3, i0, i1, s, lanes); break;
    case 2 * 16 + 4: tile_slice(t, x, 2, y, 4, i0, i1, s, lanes); break;
    case 2 * 16 + 5: tile_slice(t, x, 2, y, 5, i0, i1, s, lanes); break;
    case 2 * 16 + 6: tile_slice(t, x, 2, y, 6, i0, i1, s, lanes); break;
    case 2 * 16 + 7: tile_slice(t, x, 2, y, 7, i0, i1, s, lanes); break;
    case 2 * 16 + 8: tile_slice(t, x, 2, y, 8, i0, i1, s, lanes); break;
    case 3 * 16 + 1: tile_slice(t, x, 3, y, 1, i0, i1, s, lanes); break;
    case 3 * 16 + 2: tile_slice(t, x, 3, y, 2, i0, i1, s, lanes); break;
    case 3 * 16 + 3: tile_slice(t, x, 3, y, 3, i0, i1, s, lanes); break;
    case 3 * 16 + 4: tile_slice(t, x, 3, y, 4, i0, i1, s, lanes); break;
    case 3 * 16 + 5: tile_slice(t, x, 3, y, 5, i0, i1, s, lanes); break;
    case 3 * 16 + 6: tile_slice(t, x, 3, y, 6, i0, i1, s, lanes); break;
    case 3 * 16 + 7: tile_slice(t, x, 3, y, 7, i0, i1, s, lanes); break;
    case 3 * 16 + 8: tile_slice(t, x, 3, y, 8, i0, i1, s, lanes); break;
    }
}

/* The columns from i0 (past the last whole step) to n of weight row x, masked, as
 * el_vec_dot's last step. */
TOY_ALWAYS_INLINE void tile_tail(const elem t, const uint16_t *x, const float *const y[TOY_TILE_MAX], int na,
                                 int64_t i0, int64_t n, __m512 lanes[TOY_TILE_MAX][2]) {
    const int rest = (int)(n - i0);
    __mmask16 m0, m1;
    masks_split(rest, &m0, &m1);
    __m512 w0, w1;
    el_load32(t, x + i0, rest, 1, &w0, &w1);
    for (int j = 0; j < na; j++) {
        __m512 a0, a1;
        load32_f32(y[j] + i0, rest, 0, &a0, &a1);
        lanes[j][0] = madd_exact_product(lanes[j][0], m0, w0, a0);
        lanes[j][1] = madd_exact_product(lanes[j][1], m1, w1, a1);
    }
}

TOY_ALWAYS_INLINE void half_vec_dot_tile(const elem t, int64_t n, const void *w, size_t w_stride, int n_w,
                                         const void *a, size_t a_stride, int n_a, float *out, size_t out_stride) {
    const float *y[TOY_TILE_MAX];
    for (int j = 0; j < n_a; j++) y[j] = row_at(a, a_stride, j);
    const int64_t n32 = n / 32 * 32;
    __m512 lanes[HALF_ROWS][TOY_TILE_MAX][2];
    for (int r0 = 0; r0 < n_w; r0 += HALF_ROWS) {
        const int nr = n_w - r0 < HALF_ROWS ? n_w - r0 : HALF_ROWS;
        const uint16_t *x[HALF_ROWS];
        for (int r = 0; r < nr; r++) {
            x[r] = row_at(w, w_stride, r0 + r);
            for (int j = 0; j < n_a; j++) lanes[r][j][0] = lanes[r][j][1] = _mm512_setzero_ps();
        }
        for (int64_t i0 = 0; i0 < n32; i0 += HALF_CHUNK) {
            const int64_t i1 = n32 - i0 < HALF_CHUNK ? n32 : i0 + HALF_CHUNK;
            for (int g = 0; g < nr; g += HALF_W) {
                const int nw = nr - g < HALF_W ? nr - g : HALF_W;
                tile_slice_any(t, x + g, nw, y, n_a, i0, i1, 0, lanes + g);
                tile_slice_any(t, x + g, nw, y, n_a, i0, i1, 1, lanes + g);
            }
        }
        for (int r = 0; r < nr; r++) {
            if (n32 < n) tile_tail(t, x[r], y, n_a, n32, n, lanes[r]);
            for (int j = 0; j < n_a; j++)
                out[(size_t)j * out_stride + (size_t)(r0 + r)] = lanes_split(lanes[r][j][0], lanes[r][j][1]);
        }
    }
}

static void vec_dot_tile_f16(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                             float *y, size_t ys) { half_vec_dot_tile(EL_F16, n, w, ws, n_w, a, as, n_a, y, ys); }
static void vec_dot_tile_bf16(int64_t n, const void *w, size_t ws, int n_w, const void *a, size_t as, int n_a,
                              float *y, size_t ys) { half_vec_dot_tile(EL_BF16, n, w, ws, n_w, a, as, n_a, y, ys); }

/* ================================================================ the table */

static const ty_kernel avx512_kernels[TOY_TYPE_COUNT] = {TY_ROW_KERNEL_TYPES(TY_ROW_KERNEL)};

const ty_kernel *ty_kernel_avx512(int type) {
    if (type < 0 || type >= TOY_TYPE_COUNT || !avx512_kernels[type].vec_dot) return NULL;
    return &avx512_kernels[type];
}

TOY_TARGET_END
#endif /* __x86_64__ */
