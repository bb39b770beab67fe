/* kernels.c — the scalar reference kernels: activation quantizers (Q8_0, Q8_1, Q8_K) and
 * the dot product of one weight row with one vec_dot-type activation row, per type.
 *
 * The activation quantizers are llama.cpp's reference ones (quantize_row_q8_0_ref,
 * _q8_1_ref, _q8_K_ref) byte for byte. The dot products follow ggml-cpu's generic
 * vec_dot functions block by block: exact integer sums inside a block, then a few float
 * products per block. Where ggml's generic code adds the block results one after the
 * other into a single float, toy fixes a different, SIMD-friendly reduction shape,
 * described below. It is part of the definition: every SIMD kernel has to produce the
 * same bits, so results depend neither on the CPU's vector width nor on threads or batch
 * composition. (ggml's own x86 kernels use yet other orders; the difference from any of
 * them is at the level of float rounding, about 1e-7 relative to the sum of |terms|.)
 *
 * REDUCTION SHAPE
 *
 * Block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL: blocks of 32; Q2_K..Q6_K, IQ4_XS:
 * super-blocks of 256). Block b contributes one float v_b, computed as listed per type
 * below from an exact int32 sum (never overflows, see the bounds there). The v_b go into
 * BLOCK_LANES = 8 float accumulators, all starting at +0.0f:
 *
 *     lane[b % 8] += v_b          for b = 0, 1, 2, ... in order
 *
 * and the lanes are combined pairwise: lane[k] += lane[k + 4] (k < 4), then
 * lane[k] += lane[k + 2] (k < 2), then lane[0] += lane[1]; the result is lane[0].
 * In AVX2 terms: 8 blocks per step, their v_b in one __m256, one add into the
 * accumulator, then the usual high-half/movehl/movehdup horizontal sum (AVX-512 adds its
 * two 8-block halves into the same 8-lane accumulator one after the other).
 *
 * Per-block values (fp16 fields converted exactly to float; each '*', '+', '-' rounds to
 * float on its own; SIMD code must use separate multiplies and adds here, not FMA):
 *   Q4_0, Q5_0, Q8_0, IQ4_NL:  d = w.d * a.d;  v = d * (float)sumi
 *   Q4_1, Q5_1:                d = w.d * a.d;  v = d * (float)sumi + w.m * a.s
 *   Q2_K, Q4_K, Q5_K:          d = w.d * a.d;  dm = w.dmin * a.d;
 *                              v = d * (float)isum - dm * (float)summs
 *                              isum = sum over sub-blocks of scale * (sum q8 * q),
 *                              summs = sum over the 16 bsums of bsum * min
 *   Q3_K, Q6_K, IQ4_XS:        d = w.d * a.d;  v = d * (float)isum
 *                              isum = sum over sub-blocks of scale * (sum q8 * q)
 * (a.d of Q8_K is a float already.) The int-to-float conversion rounds to nearest even
 * once |isum| > 2^24 (possible for Q4_K..Q6_K), as cvtdq2ps does.
 * ggml's generic code differs only in grouping inside a block for some types (q4_0 forms
 * (sumi * w.d) * a.d; Q3_K..Q6_K scale eight int lanes separately; IQ4_XS scales each
 * 32-weight sub-block in float); one integer per super-block is exact and cheaper.
 *
 * Element types (F32, F16, BF16). ELEM_LANES = 32 float partial sums:
 *
 *     p[i % 32] += w_i * a_i      for i = 0, 1, ..., n-1 in order (any n)
 *
 * then combined pairwise with strides 16, 8, 4, 2, 1 as above (p[k] += p[k + s] for
 * k < s); the result is p[0]. That is four 8-lane AVX2 accumulators over elements
 * i..i+31 (two AVX-512 ones), an element tail going to lane i % 32. F16 and BF16 add
 * w_i * a_i with one rounding (FMA): the product of two halves is exact in float, and so
 * is that of two bf16s unless it underflows (FMA keeps it exact there too). F32's
 * product is rounded to float before the add. The activations of F16 and BF16 are
 * floats rounded to the type (kernels.h). ggml's scalar code accumulates these in
 * double; float lanes are what vector code can reproduce at full speed.
 */
#include "kernels.h"
#include "toy.h"

#include <math.h>
#include <string.h>

/* Contracting a*b + c into an FMA rounds once instead of twice and would change the
 * per-block values above; CMakeLists.txt also passes -ffp-contract=off. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define BLOCK_LANES 8
#define ELEM_LANES 32

/* The fixed pairwise combination of n_lanes (a power of two) partial sums. */
static float combine_lanes(float *lane, int n_lanes) {
    for (int s = n_lanes / 2; s > 0; s /= 2)
        for (int k = 0; k < s; k++) lane[k] += lane[k + s];
    return lane[0];
}

/* The reduction shape of block types: value(w, a, b), block b's v_b, into lane b % 8. */
static inline float dot_blocks(int64_t nb, const void *w, const void *a,
                               float (*value)(const void *w, const void *a, int64_t b)) {
    float lane[BLOCK_LANES] = {0};
    for (int64_t b = 0; b < nb; b++) lane[b % BLOCK_LANES] += value(w, a, b);
    return combine_lanes(lane, BLOCK_LANES);
}

static inline float half(ty_half h) {
    return ty_fp16_to_fp32(h);
}

/* qh is four bytes in the file, a little-endian uint32 for ggml. */
static inline uint32_t load_u32le(const uint8_t b[4]) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* ================================================================ activations */

/* ggml stores roundf(x * id) into an int8 (halfway cases away from zero). For finite rows
 * the value is within [-127, 127] up to an ulp; the clamp only keeps NaN, inf and a
 * subnormal block maximum (whose inverse scale overflows) away from an undefined
 * float-to-int8 conversion. */
static inline int8_t q8_round(float v) {
    const float r = roundf(v);
    if (r >= 127.0f) return 127;
    if (r <= -127.0f) return -127;
    return r == r ? (int8_t)r : 0;
}

static float absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    return amax;
}

void ty_quantize_act_q8_0(const float *x, void *y, int64_t n) {
    block_q8_0 *blocks = y;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        const float d = absmax(x, QK8_0) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = ty_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) {
            const float v = x[j] * id;
            blocks[b].qs[j] = q8_round(v);
        }
    }
}

/* As Q8_0, plus s = d * (sum of the quants): the integer sum times the unrounded float d,
 * rounded once to fp16 (not the sum of the inputs, which some other ports use). */
void ty_quantize_act_q8_1(const float *x, void *y, int64_t n) {
    block_q8_1 *blocks = y;
    for (int64_t b = 0; b < n / QK8_1; b++, x += QK8_1) {
        const float d = absmax(x, QK8_1) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = ty_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            const float v = x[j] * id;
            blocks[b].qs[j] = q8_round(v);
            sum += blocks[b].qs[j];
        }
        const float s = (float)sum * d;
        blocks[b].s = ty_fp32_to_fp16(s);
    }
}

/* Q8_K keeps the sign of the extreme: the element of largest magnitude (the first one on
 * a tie) maps to -127, so d = max/-127 is negative when that element is positive. Levels
 * round to nearest even (nearest_int) and are capped at 127 as in ggml (no finite row goes
 * past it: only an element of the extreme's magnitude and opposite sign reaches +127);
 * d is stored as the float 1/iscale, not rounded to fp16. An all-zero block has d = 0 and zero quants; ggml leaves
 * its bsums unwritten, toy writes the zeros they would sum to. */
void ty_quantize_act_q8_K(const float *x, void *y, int64_t n) {
    block_q8_K *blocks = y;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        block_q8_K *blk = &blocks[b];
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(blk, 0, sizeof *blk);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            const float v = iscale * x[j];
            int q = ty_nearest_int(v);
            if (q > 127) q = 127;
            if (q < -128) q = -128; /* not reached by finite rows */
            blk->qs[j] = (int8_t)q;
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += blk->qs[16 * g + j];
            blk->bsums[g] = (int16_t)sum;
        }
        blk->d = 1.0f / iscale;
    }
}

/* ================================================================ float rows */

void ty_quantize_act_f16(const float *x, void *y, int64_t n) {
    float *out = y;
    for (int64_t i = 0; i < n; i++) out[i] = half(ty_fp32_to_fp16(x[i]));
}

void ty_quantize_act_bf16(const float *x, void *y, int64_t n) {
    float *out = y;
    for (int64_t i = 0; i < n; i++) out[i] = ty_bf16_to_fp32(ty_fp32_to_bf16(x[i]));
}

toy_status ty_kernel_act_row_size(const ty_kernel *k, int64_t n, size_t *out) {
    const int t = k->vec_dot_type;
    return toy_type_row_size(t == TOY_TYPE_F16 || t == TOY_TYPE_BF16 ? TOY_TYPE_F32 : t, n, out);
}

static float vec_dot_f32(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    float p[ELEM_LANES] = {0};
    for (int64_t i = 0; i < n; i++) {
        const float prod = x[i] * y[i];
        p[i % ELEM_LANES] += prod;
    }
    return combine_lanes(p, ELEM_LANES);
}

static float vec_dot_f16(int64_t n, const void *w, const void *a) {
    const ty_half *x = w;
    const float *y = a;
    float p[ELEM_LANES] = {0};
    for (int64_t i = 0; i < n; i++) p[i % ELEM_LANES] = fmaf(half(x[i]), y[i], p[i % ELEM_LANES]);
    return combine_lanes(p, ELEM_LANES);
}

static float vec_dot_bf16(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w;
    const float *y = a;
    float p[ELEM_LANES] = {0};
    for (int64_t i = 0; i < n; i++) p[i % ELEM_LANES] = fmaf(ty_bf16_to_fp32(x[i]), y[i], p[i % ELEM_LANES]);
    return combine_lanes(p, ELEM_LANES);
}

/* ================================================================ legacy blocks
 * Nibble layout: the low nibble of qs[j] is weight j, the high nibble weight j + 16.
 * |sumi| <= 32 * 128 * 127 for every type here, far from int32 limits. */

static float value_q4_0(const void *w, const void *a, int64_t b) {
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    int32_t sumi = 0;
    for (int j = 0; j < QK4_0 / 2; j++) {
        sumi += ((x[b].qs[j] & 0x0f) - 8) * y[b].qs[j];
        sumi += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + QK4_0 / 2];
    }
    const float d = half(x[b].d) * half(y[b].d);
    return d * (float)sumi;
}
static float vec_dot_q4_0(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK4_0, w, a, value_q4_0); }

/* The offset m enters through the activation block's s = d_a * sum(q_a): m * s stands for
 * sum(m * a_i) without touching the quants. */
static float value_q4_1(const void *w, const void *a, int64_t b) {
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    int32_t sumi = 0;
    for (int j = 0; j < QK4_1 / 2; j++) {
        sumi += (x[b].qs[j] & 0x0f) * y[b].qs[j];
        sumi += (x[b].qs[j] >> 4) * y[b].qs[j + QK4_1 / 2];
    }
    const float d = half(x[b].d) * half(y[b].d);
    const float scaled = d * (float)sumi;
    const float offset = half(x[b].m) * half(y[b].s);
    return scaled + offset;
}
static float vec_dot_q4_1(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK4_1, w, a, value_q4_1); }

static float value_q5_0(const void *w, const void *a, int64_t b) {
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    const uint32_t qh = load_u32le(x[b].qh);
    int32_t sumi = 0;
    for (int j = 0; j < QK5_0 / 2; j++) {
        const int lo = ((x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4) - 16;
        const int hi = ((x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16;
        sumi += lo * y[b].qs[j];
        sumi += hi * y[b].qs[j + QK5_0 / 2];
    }
    const float d = half(x[b].d) * half(y[b].d);
    return d * (float)sumi;
}
static float vec_dot_q5_0(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK5_0, w, a, value_q5_0); }

static float value_q5_1(const void *w, const void *a, int64_t b) {
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    const uint32_t qh = load_u32le(x[b].qh);
    int32_t sumi = 0;
    for (int j = 0; j < QK5_1 / 2; j++) {
        const int lo = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
        const int hi = (x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        sumi += lo * y[b].qs[j];
        sumi += hi * y[b].qs[j + QK5_1 / 2];
    }
    const float d = half(x[b].d) * half(y[b].d);
    const float scaled = d * (float)sumi;
    const float offset = half(x[b].m) * half(y[b].s);
    return scaled + offset;
}
static float vec_dot_q5_1(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK5_1, w, a, value_q5_1); }

static float value_q8_0(const void *w, const void *a, int64_t b) {
    const block_q8_0 *x = w;
    const block_q8_0 *y = a;
    int32_t sumi = 0;
    for (int j = 0; j < QK8_0; j++) sumi += x[b].qs[j] * y[b].qs[j];
    const float d = half(x[b].d) * half(y[b].d);
    return d * (float)sumi;
}
static float vec_dot_q8_0(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK8_0, w, a, value_q8_0); }

static float value_iq4_nl(const void *w, const void *a, int64_t b) {
    const block_iq4_nl *x = w;
    const block_q8_0 *y = a;
    int32_t sumi = 0;
    for (int j = 0; j < QK4_NL / 2; j++) {
        sumi += ty_iq4nl_values[x[b].qs[j] & 0x0f] * y[b].qs[j];
        sumi += ty_iq4nl_values[x[b].qs[j] >> 4] * y[b].qs[j + QK4_NL / 2];
    }
    const float d = half(x[b].d) * half(y[b].d);
    return d * (float)sumi;
}
static float vec_dot_iq4_nl(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK4_NL, w, a, value_iq4_nl); }

/* ================================================================ K-quants
 * One super-block of 256 per v_b. Bounds on the int32 sums (q8 in [-127, 127] from the
 * quantizer, 128 allowed): Q2_K |isum| <= 256*15*3*128; Q3_K 256*32*4*128; Q4_K
 * 256*63*15*128; Q5_K 256*63*31*128 (6.4e7); Q6_K 256*128*32*128 (1.3e8); IQ4_XS
 * 256*32*127*128 (1.3e8): all below 2^31. */

/* The value of a super-block with mins (Q2_K, Q4_K, Q5_K): the scaled sum less the mins'. */
static inline float value_dmin(ty_half wd, ty_half wdmin, float ad, int32_t isum, int32_t summs) {
    const float d = half(wd) * ad;
    const float dm = half(wdmin) * ad;
    const float scaled = d * (float)isum;
    const float mins = dm * (float)summs;
    return scaled - mins;
}

/* Q2_K/Q3_K 2-bit field of weight e: byte 32*(e/128) + e%32, bits 2*((e/32)%4). */
static inline int q2_field(const uint8_t *qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

static float value_q2_K(const void *w, const void *a, int64_t b) {
    const block_q2_K *x = w;
    const block_q8_K *y = a;
    const block_q2_K *blk = &x[b];
    int32_t isum = 0, summs = 0;
    for (int g = 0; g < QK_K / 16; g++) {
        int32_t s = 0;
        for (int e = 16 * g; e < 16 * g + 16; e++) s += y[b].qs[e] * q2_field(blk->qs, e);
        isum += (blk->scales[g] & 0x0f) * s;
        summs += (blk->scales[g] >> 4) * y[b].bsums[g];
    }
    return value_dmin(blk->d, blk->dmin, y[b].d, isum, summs);
}
static float vec_dot_q2_K(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK_K, w, a, value_q2_K); }

/* Q3_K: 16 six-bit scales stored +32 in 12 bytes: the low nibbles of bytes 0-7 hold
 * scales 0-7, their high nibbles scales 8-15; scale j's top two bits sit in byte
 * 8 + j%4 at bit 2*(j/4). The third bit of weight e is bit e/32 of hmask[e%32]; a clear
 * bit means q - 4. */
static inline int q3_scale(const uint8_t *scales, int j) {
    const int low = j < 8 ? scales[j] & 0x0f : scales[j - 8] >> 4;
    const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | high << 4) - 32;
}

static float value_q3_K(const void *w, const void *a, int64_t b) {
    const block_q3_K *x = w;
    const block_q8_K *y = a;
    const block_q3_K *blk = &x[b];
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; g++) {
        int32_t s = 0;
        for (int e = 16 * g; e < 16 * g + 16; e++) {
            const int high = (blk->hmask[e % 32] >> (e / 32)) & 1;
            const int q = q2_field(blk->qs, e) - (high ? 0 : 4);
            s += y[b].qs[e] * q;
        }
        isum += q3_scale(blk->scales, g) * s;
    }
    const float d = half(blk->d) * y[b].d;
    return d * (float)isum;
}
static float vec_dot_q3_K(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK_K, w, a, value_q3_K); }

/* Q4_K/Q5_K: 8 six-bit scales and mins in 12 bytes. Sub-blocks 0-3 keep them whole in
 * the low 6 bits of bytes 0-3 (scale) and 4-7 (min); sub-blocks 4-7 keep their low
 * nibbles in bytes 8-11 (scale low, min high) and their top 2 bits in the top bits of
 * bytes 0-3 (scale) and 4-7 (min). */
static inline void k4_scale_min(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

/* Weight 32*j + l of a Q4_K/Q5_K super-block has its low 4 bits in qs[32*(j/2) + l],
 * low nibble for even j, high nibble for odd j; Q5_K's fifth bit is bit j of qh[l] (qh
 * NULL for Q4_K, a constant once inlined). The min of sub-block j applies to its 32
 * activations, i.e. bsums 2j and 2j + 1. */
static inline __attribute__((always_inline)) float
value_k4(ty_half d, ty_half dmin, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
         const block_q8_K *y) {
    const int8_t *q8 = y->qs;
    int32_t isum = 0, summs = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        int sc, m;
        k4_scale_min(scales, j, &sc, &m);
        const uint8_t *q4 = qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        int32_t s = 0;
        for (int l = 0; l < 32; l++) {
            const int q = ((q4[l] >> shift) & 0x0f) | (qh ? ((qh[l] >> j) & 1) << 4 : 0);
            s += q8[32 * j + l] * q;
        }
        isum += sc * s;
        summs += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
    return value_dmin(d, dmin, y->d, isum, summs);
}

static float value_q4_K(const void *w, const void *a, int64_t b) {
    const block_q4_K *blk = (const block_q4_K *)w + b;
    return value_k4(blk->d, blk->dmin, blk->scales, blk->qs, NULL, (const block_q8_K *)a + b);
}
static float vec_dot_q4_K(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK_K, w, a, value_q4_K); }

static float value_q5_K(const void *w, const void *a, int64_t b) {
    const block_q5_K *blk = (const block_q5_K *)w + b;
    return value_k4(blk->d, blk->dmin, blk->scales, blk->qs, blk->qh, (const block_q8_K *)a + b);
}
static float vec_dot_q5_K(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK_K, w, a, value_q5_K); }

/* Q6_K: per 128-weight half, ql (64 bytes) holds low nibbles — weights l and l+64 in
 * byte l, l+32 and l+96 in byte l+32 (low, high nibble) — and qh (32 bytes) the top two
 * bits of weights l, l+32, l+64, l+96 in bits 0-1, 2-3, 4-5, 6-7 of byte l. */
static inline int q6_value(const block_q6_K *blk, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int low = (blk->ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f;
    const int high = (blk->qh[32 * h + l] >> (2 * k)) & 3;
    return (low | high << 4) - 32;
}

static float value_q6_K(const void *w, const void *a, int64_t b) {
    const block_q6_K *x = w;
    const block_q8_K *y = a;
    const block_q6_K *blk = &x[b];
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; g++) {
        int32_t s = 0;
        for (int e = 16 * g; e < 16 * g + 16; e++) s += y[b].qs[e] * q6_value(blk, e);
        isum += blk->scales[g] * s;
    }
    const float d = half(blk->d) * y[b].d;
    return d * (float)isum;
}
static float vec_dot_q6_K(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK_K, w, a, value_q6_K); }

/* IQ4_XS: eight 32-weight groups laid out like IQ4_NL blocks, each with a 6-bit scale
 * stored +32: low nibble in scales_l[ib/2] (even ib low), top two bits at bit 2*ib of
 * scales_h. */
static float value_iq4_xs(const void *w, const void *a, int64_t b) {
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    const block_iq4_xs *blk = &x[b];
    int32_t isum = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const int low = (blk->scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
        const int high = (blk->scales_h >> (2 * ib)) & 3;
        const uint8_t *qs = blk->qs + 16 * ib;
        const int8_t *q8 = y[b].qs + 32 * ib;
        int32_t s = 0;
        for (int j = 0; j < 16; j++) {
            s += ty_iq4nl_values[qs[j] & 0x0f] * q8[j];
            s += ty_iq4nl_values[qs[j] >> 4] * q8[j + 16];
        }
        isum += ((low | high << 4) - 32) * s;
    }
    const float d = half(blk->d) * y[b].d;
    return d * (float)isum;
}
static float vec_dot_iq4_xs(int64_t n, const void *w, const void *a) { return dot_blocks(n / QK_K, w, a, value_iq4_xs); }

/* ================================================================ the table */

/* TY_ROW_KERNEL without tiles: the matmul loops the reference's vec_dot */
#define SCALAR_KERNEL(T, name, VDT, quantize_act) \
    [TOY_TYPE_##T] = {TOY_TYPE_##T, TOY_TYPE_##VDT, quantize_act, vec_dot_##name, NULL},
static const ty_kernel scalar_kernels[TOY_TYPE_COUNT] = {TY_ROW_KERNEL_TYPES(SCALAR_KERNEL)};

const ty_kernel *ty_kernel_scalar(int type) {
    if (type < 0 || type >= TOY_TYPE_COUNT || !scalar_kernels[type].vec_dot) return NULL;
    return &scalar_kernels[type];
}
