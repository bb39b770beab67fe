/* quant_k.c — the K-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K: scalar reference.
 *
 * A super-block holds QK_K = 256 weights in sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or
 * 32 (Q4_K, Q5_K). Each sub-block has its own small integer scale (and, for the
 * "affine" types Q2_K/Q4_K/Q5_K, a min), and those are themselves quantized against
 * one or two fp16 super-block factors d (and dmin):
 *
 *   Q2_K, Q4_K, Q5_K:  x = d * sc * q - dmin * m     q in [0, 2^bits)
 *   Q3_K, Q6_K:        x = d * sc * (q - 2^(bits-1))  sc signed
 *
 * The quantizers reproduce llama.cpp's reference quantizers (quantize_row_qX_K_ref,
 * the path llama-quantize takes without an importance matrix) operation by operation,
 * so that a tensor quantized here is byte-identical to one quantized there: the order
 * of every float operation below is the one ggml uses, and the quirks it has are kept
 * (each is pointed out where it happens). The dequantizers likewise round exactly as
 * ggml's dequantize_row_qX_K do.
 */
#include "quant.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* ggml's quantizers run unfused on baseline x86-64; a contracted a*b + c rounds once
 * instead of twice and changes which candidate scale wins a search. gcc in ISO C mode
 * (-std=c11, as CMakeLists.txt sets) never contracts, but with -std=gnu11 and an FMA
 * target it does (test_quant_k's checksums then fail); clang contracts unless told. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* A group whose largest magnitude is below this is stored as all zeros (ggml's
 * GROUP_MAX_EPS): the weighted sums of its squares would underflow to nothing. */
#define GROUP_MAX_EPS 1e-15f

static inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* ================================================================ scale searches */

/* Fits x[i] ~= scale * L[i] - neg_min with L[i] in [0, nmax] and neg_min >= 0,
 * minimising sum w[i] * err(x[i]) where err is |.| (abs_err) or squared.
 * (ggml's make_qkx2_quants.)
 *
 * Start from the plain min/max grid, then try nstep + 1 other grids whose top level is
 * nmax + rmin + rdelta * k, fitting scale and min to each by weighted least squares
 * (the min is pinned to 0 when the fit wants it positive) and keeping the fit with the
 * lowest error. As in ggml, once a candidate wins, the later grids are laid from the
 * winner's min rather than from the data's minimum. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *neg_min, float rmin, float rdelta, int nstep, bool abs_err) {
    float lo = x[0];
    float hi = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0; /* the min only ever moves values down */
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.0f;
    }

    float iscale = nmax / (hi - lo);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(ty_nearest_int(iscale * (x[i] - lo)), 0, nmax);
        L[i] = (uint8_t)l;
        float diff = scale * l + lo - x[i];
        best_err += w[i] * (abs_err ? fabsf(diff) : diff * diff);
    }

    uint8_t trial[QK_K / 8]; /* groups are 16 or 32 weights */
    for (int step = 0; step <= nstep; step++) {
        iscale = (rmin + rdelta * step + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(ty_nearest_int(iscale * (x[i] - lo)), 0, nmax);
            trial[i] = (uint8_t)l;
            float wl = w[i] * l;
            sum_l += wl;
            sum_l2 += wl * l;
            sum_xl += wl * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * trial[i] + this_min - x[i];
            err += w[i] * (abs_err ? fabsf(diff) : diff * diff);
        }
        if (err < best_err) {
            memcpy(L, trial, (size_t)n);
            best_err = err;
            scale = this_scale;
            lo = this_min;
        }
    }
    *neg_min = -lo;
    return scale;
}

/* Largest-magnitude element of x, with its sign, where a symmetric fit starts; 0 for a
 * group below GROUP_MAX_EPS, which has nothing to fit and gets all-zero levels in L. */
static float group_signed_max(int n, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    return max;
}

/* Rounds x to the symmetric grid of step 1/iscale (levels -nmax .. nmax-1, stored plus
 * `offset`) and returns the x^2-weighted sums the fits compare: sum w x l and sum w l^2. */
static void grid_sums(int n, int nmax, const float *x, float iscale, int offset, int8_t *L,
                      float *sumlx, float *suml2) {
    float slx = 0, sl2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(ty_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + offset);
        float w = x[i] * x[i];
        slx += w * x[i] * l;
        sl2 += w * l * l;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

/* Symmetric fit x[i] ~= scale * (L[i] - nmax), L[i] in [0, 2*nmax), weighted by x^2.
 * The largest-magnitude element is mapped to -nmax (so the scale carries its sign),
 * then 18 nearby grids (nmax +- 0.1 .. 0.9) are tried and the one whose least-squares
 * scale explains the most weighted energy (sumlx^2 / suml2) wins. (ggml's
 * make_qx_quants with rmse_type 1 and no importance weights.) */
static float fit_symmetric_grid(int n, int nmax, const float *x, int8_t *L) {
    float max = group_signed_max(n, x, L);
    if (!max) return 0.0f;

    float sumlx, suml2;
    grid_sums(n, nmax, x, -nmax / max, nmax, L, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;

    int8_t trial[16]; /* Q6_K's groups of 16 are the only caller */
    for (int step = -9; step <= 9; step++) {
        if (step == 0) continue;
        grid_sums(n, nmax, x, -(nmax + 0.1f * step) / max, nmax, trial, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            memcpy(L, trial, (size_t)n);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric fit as above, but instead of trying other grids, start from the max grid
 * and move single quants to the level the least-squares scale of the others asks for,
 * keeping a move when it raises sumlx^2 / suml2; at most 5 sweeps. Weighted by x^2.
 * L[i] in [0, 2*nmax). (ggml's make_q3_quants with do_rmse.) */
static float fit_symmetric_refine(int n, int nmax, const float *x, int8_t *L) {
    float max = group_signed_max(n, x, L);
    if (!max) return 0.0f;

    float sumlx, suml2;
    grid_sums(n, nmax, x, -nmax / max, 0, L, &sumlx, &suml2);
    for (int sweep = 0; sweep < 5; sweep++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            int l = clamp_int(ty_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (l == L[i]) continue;
            slx += w * x[i] * l;
            sl2 += w * l * l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)l;
                sumlx = slx;
                suml2 = sl2;
                n_changed++;
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ================================================================ bit packing */

/* Q2_K and Q3_K keep 2 bits per weight in qs: each 128-weight half uses 32 bytes, and
 * byte l holds weights l, l+32, l+64, l+96 of that half in bits 0-1, 2-3, 4-5, 6-7. */
static void pack_2bit(const uint8_t L[QK_K], uint8_t qs[QK_K / 4]) {
    for (int half = 0; half < 2; half++) {
        const uint8_t *l4 = L + 128 * half;
        for (int l = 0; l < 32; l++)
            qs[32 * half + l] = (uint8_t)(l4[l] | l4[l + 32] << 2 | l4[l + 64] << 4 |
                                          l4[l + 96] << 6);
    }
}

/* The 2 bits of weight e in that layout. */
static inline int q2_bits(const uint8_t *qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

/* Q4_K and Q5_K: 8 six-bit scales and 8 six-bit mins in 12 bytes. Sub-blocks 0-3 keep
 * scale and min whole in bytes 0-3 and 4-7; sub-blocks 4-7 keep their low 4 bits in
 * bytes 8-11 (scale low nibble, min high nibble) and their top 2 bits in the top 2 bits
 * of bytes 0-3 (scale) and 4-7 (min). (ggml's get_scale_min_k4.) */
static void get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void put_scale_min_k4(int j, uint8_t *q, uint8_t sc, uint8_t m) {
    if (j < 4) {
        q[j] = (uint8_t)((q[j] & 0xC0) | sc);
        q[j + 4] = (uint8_t)((q[j + 4] & 0xC0) | m);
    } else {
        q[j + 4] = (uint8_t)((sc & 0xF) | (m & 0xF) << 4);
        q[j - 4] = (uint8_t)((q[j - 4] & 63) | (sc >> 4) << 6);
        q[j] = (uint8_t)((q[j] & 63) | (m >> 4) << 6);
    }
}

/* Q3_K: 16 six-bit scales (stored +32) in 12 bytes. Low nibbles: scales 0-7 in the low
 * nibbles of bytes 0-7, scales 8-15 in their high nibbles; top 2 bits: scale j in
 * byte 8 + j%4 at bit 2*(j/4). */
static int q3_scale(const uint8_t *scales, int j) {
    int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
    int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | high << 4) - 32;
}

static void put_q3_scale(uint8_t *scales, int j, int biased) {
    if (j < 8)
        scales[j] = (uint8_t)((scales[j] & 0xF0) | (biased & 0xF));
    else
        scales[j - 8] = (uint8_t)((scales[j - 8] & 0x0F) | (biased & 0xF) << 4);
    int shift = 2 * (j / 4);
    scales[8 + j % 4] = (uint8_t)((scales[8 + j % 4] & ~(3 << shift)) | (biased >> 4) << shift);
}

/* ================================================================ Q2_K
 * 16 sub-blocks of 16, q in [0, 3]; each scales byte has the 4-bit scale low and the
 * 4-bit min high. 2.625 bits per weight. */

void ty_dequantize_row_q2_K(const void *src, float *dst, int64_t n) {
    const block_q2_K *blocks = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q2_K *blk = &blocks[b];
        float d = ty_fp16_to_fp32(blk->d);
        float dmin = ty_fp16_to_fp32(blk->dmin);
        float *y = dst + b * QK_K;
        for (int g = 0; g < QK_K / 16; g++) {
            float dl = d * (blk->scales[g] & 0xF);
            float ml = dmin * (blk->scales[g] >> 4);
            for (int e = 16 * g; e < 16 * g + 16; e++) y[e] = dl * q2_bits(blk->qs, e) - ml;
        }
    }
}

void ty_quantize_row_q2_K(const float *src, void *dst, int64_t n) {
    block_q2_K *blocks = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        block_q2_K *y = &blocks[b];
        uint8_t L[QK_K];
        float scales[QK_K / 16], mins[QK_K / 16], w[16];
        float max_scale = 0, max_min = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * g + l]);
            scales[g] = fit_scale_min(16, 3, x + 16 * g, w, L + 16 * g, &mins[g], -0.5f, 0.1f,
                                      15, true);
            if (scales[g] > max_scale) max_scale = scales[g];
            if (mins[g] > max_min) max_min = mins[g];
        }

        /* The 4-bit scales are plain roundings of scale / (max / 15), no search. */
        memset(y->scales, 0, sizeof y->scales);
        y->d = ty_fp32_to_fp16(0.0f);
        y->dmin = ty_fp32_to_fp16(0.0f);
        if (max_scale > 0) {
            float iscale = 15.0f / max_scale;
            for (int g = 0; g < QK_K / 16; g++)
                y->scales[g] = (uint8_t)ty_nearest_int(iscale * scales[g]);
            y->d = ty_fp32_to_fp16(max_scale / 15.0f);
        }
        if (max_min > 0) {
            float iscale = 15.0f / max_min;
            for (int g = 0; g < QK_K / 16; g++)
                y->scales[g] |= (uint8_t)(ty_nearest_int(iscale * mins[g]) << 4);
            y->dmin = ty_fp32_to_fp16(max_min / 15.0f);
        }

        /* Requantize against the scales as stored. A sub-block whose scale rounded to
         * zero keeps the levels of its own search (ggml does the same; they then
         * dequantize to -min whatever they are). */
        for (int g = 0; g < QK_K / 16; g++) {
            float d = ty_fp16_to_fp32(y->d) * (y->scales[g] & 0xF);
            if (!d) continue;
            float dm = ty_fp16_to_fp32(y->dmin) * (y->scales[g] >> 4);
            for (int e = 16 * g; e < 16 * g + 16; e++)
                L[e] = (uint8_t)clamp_int(ty_nearest_int((x[e] + dm) / d), 0, 3);
        }
        pack_2bit(L, y->qs);
    }
}

/* ================================================================ Q3_K
 * 16 sub-blocks of 16, q - 4 in [-4, 3]: the low 2 bits in qs (Q2_K's layout), the
 * third in hmask (weight e at bit e/32 of byte e%32). 3.4375 bits per weight. */

void ty_dequantize_row_q3_K(const void *src, float *dst, int64_t n) {
    const block_q3_K *blocks = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q3_K *blk = &blocks[b];
        float d = ty_fp16_to_fp32(blk->d);
        float *y = dst + b * QK_K;
        for (int g = 0; g < QK_K / 16; g++) {
            float dl = d * q3_scale(blk->scales, g);
            for (int e = 16 * g; e < 16 * g + 16; e++) {
                int high = (blk->hmask[e % 32] >> (e / 32)) & 1;
                y[e] = dl * (q2_bits(blk->qs, e) - (high ? 0 : 4));
            }
        }
    }
}

void ty_quantize_row_q3_K(const float *src, void *dst, int64_t n) {
    block_q3_K *blocks = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        block_q3_K *y = &blocks[b];
        int8_t L[QK_K];
        float scales[QK_K / 16];
        float max_scale = 0, amax = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            scales[g] = fit_symmetric_refine(16, 4, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > amax) {
                amax = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }

        /* The 6-bit scales map the largest-magnitude one to -32, like the quants. */
        memset(y->scales, 0, sizeof y->scales);
        y->d = ty_fp32_to_fp16(0.0f);
        if (max_scale) {
            float iscale = -32.0f / max_scale;
            for (int g = 0; g < QK_K / 16; g++) {
                int l = clamp_int(ty_nearest_int(iscale * scales[g]), -32, 31);
                put_q3_scale(y->scales, g, l + 32);
            }
            y->d = ty_fp32_to_fp16(1 / iscale);
        }

        for (int g = 0; g < QK_K / 16; g++) {
            float d = ty_fp16_to_fp32(y->d) * q3_scale(y->scales, g);
            if (!d) continue;
            for (int e = 16 * g; e < 16 * g + 16; e++)
                L[e] = (int8_t)(clamp_int(ty_nearest_int(x[e] / d), -4, 3) + 4);
        }

        uint8_t low[QK_K];
        memset(y->hmask, 0, sizeof y->hmask);
        for (int e = 0; e < QK_K; e++) {
            if (L[e] > 3) y->hmask[e % 32] |= (uint8_t)(1 << (e / 32));
            low[e] = (uint8_t)(L[e] & 3);
        }
        pack_2bit(low, y->qs);
    }
}

/* ================================================================ Q4_K and Q5_K
 * 8 sub-blocks of 32 with a 6-bit scale and a 6-bit min each; q in [0, 15] or [0, 31].
 * The two types quantize identically up to the width of q and the search grid. */

/* Fills d, dmin and the packed scales of one super-block and leaves its levels in L.
 * Weights are sqrt(mean x^2 of the sub-block) + |x|: ggml's choice, which values every
 * weight a little and large ones more. */
static void quantize_scale_min_super_block(const float *x, int nmax, float rmin, int nstep,
                                           uint8_t L[QK_K], ty_half *d_out,
                                           ty_half *dmin_out, uint8_t packed[K_SCALE_SIZE]) {
    float scales[QK_K / 32], mins[QK_K / 32], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep,
                                  false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }

    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    memset(packed, 0, K_SCALE_SIZE);
    for (int j = 0; j < QK_K / 32; j++) {
        /* ggml stores nearest_int into a uint8_t before clamping to 63. */
        uint8_t ls = (uint8_t)ty_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)ty_nearest_int(inv_min * mins[j]);
        put_scale_min_k4(j, packed, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d_out = ty_fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = ty_fp32_to_fp16(max_min / 63.0f);

    float d_all = ty_fp16_to_fp32(*d_out);
    float dmin_all = ty_fp16_to_fp32(*dmin_out);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, packed, &sc, &m);
        float d = d_all * sc;
        if (!d) continue; /* keeps the search's levels, as in Q2_K */
        float dm = dmin_all * m;
        for (int e = 32 * j; e < 32 * j + 32; e++)
            L[e] = (uint8_t)clamp_int(ty_nearest_int((x[e] + dm) / d), 0, nmax);
    }
}

/* Q4_K: each 64-weight pair of sub-blocks shares 32 bytes of qs, the first sub-block
 * in the low nibbles, the second in the high ones. 4.5 bits per weight. */

/* One Q4_K/Q5_K super-block: weight 32*j + l has its low 4 bits in the low (even j) or
 * high (odd j) nibble of qs[32*(j/2) + l]; Q5_K's fifth bit is bit j of qh[l] (qh NULL
 * for Q4_K, a constant once inlined). */
static inline __attribute__((always_inline)) void
dequantize_k4_block(ty_half d16, ty_half dmin16, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                    float *y) {
    float d = ty_fp16_to_fp32(d16);
    float dmin = ty_fp16_to_fp32(dmin16);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales, &sc, &m);
        float dl = d * sc;
        float ml = dmin * m;
        const uint8_t *q = qs + 32 * (j / 2);
        int shift = 4 * (j % 2);
        for (int l = 0; l < 32; l++) {
            int high = qh ? (qh[l] >> j) & 1 : 0;
            y[32 * j + l] = dl * (((q[l] >> shift) & 0xF) + (high ? 16 : 0)) - ml;
        }
    }
}

void ty_dequantize_row_q4_K(const void *src, float *dst, int64_t n) {
    const block_q4_K *blocks = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q4_K *blk = &blocks[b];
        dequantize_k4_block(blk->d, blk->dmin, blk->scales, blk->qs, NULL, dst + b * QK_K);
    }
}

void ty_quantize_row_q4_K(const float *src, void *dst, int64_t n) {
    block_q4_K *blocks = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        block_q4_K *y = &blocks[b];
        uint8_t L[QK_K];
        quantize_scale_min_super_block(src + b * QK_K, 15, -1.0f, 20, L, &y->d, &y->dmin,
                                       y->scales);
        for (int j = 0; j < QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                y->qs[j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

/* Q5_K: Q4_K's nibbles plus a fifth bit, which for sub-block j sits at bit j of
 * qh[l] (l = position in the sub-block). 5.5 bits per weight. */

void ty_dequantize_row_q5_K(const void *src, float *dst, int64_t n) {
    const block_q5_K *blocks = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q5_K *blk = &blocks[b];
        dequantize_k4_block(blk->d, blk->dmin, blk->scales, blk->qs, blk->qh, dst + b * QK_K);
    }
}

void ty_quantize_row_q5_K(const float *src, void *dst, int64_t n) {
    block_q5_K *blocks = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        block_q5_K *y = &blocks[b];
        uint8_t L[QK_K];
        quantize_scale_min_super_block(src + b * QK_K, 31, -0.5f, 15, L, &y->d, &y->dmin,
                                       y->scales);
        memset(y->qh, 0, sizeof y->qh);
        for (int j = 0; j < QK_K / 32; j++)
            for (int l = 0; l < 32; l++)
                if (L[32 * j + l] > 15) y->qh[l] |= (uint8_t)(1 << j);
        for (int j = 0; j < QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                y->qs[j / 2 + l] = (uint8_t)((L[j + l] & 0xF) | (L[j + l + 32] & 0xF) << 4);
    }
}

/* ================================================================ Q6_K
 * 16 sub-blocks of 16 with signed 8-bit scales, q - 32 in [-32, 31]. Per 128-weight
 * half: ql (64 bytes) has the low nibbles, weights l and l+64 in byte l, l+32 and l+96
 * in byte l+32 (low nibble, high nibble); qh (32 bytes) has the top 2 bits of weights
 * l, l+32, l+64, l+96 in bits 0-1, 2-3, 4-5, 6-7 of byte l. 6.5625 bits per weight. */

static inline int q6_level(const block_q6_K *blk, int e) {
    int half = e / 128, k = (e % 128) / 32, l = e % 32;
    int low = (blk->ql[64 * half + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
    int high = (blk->qh[32 * half + l] >> (2 * k)) & 3;
    return low | high << 4;
}

void ty_dequantize_row_q6_K(const void *src, float *dst, int64_t n) {
    const block_q6_K *blocks = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q6_K *blk = &blocks[b];
        float d = ty_fp16_to_fp32(blk->d);
        float *y = dst + b * QK_K;
        for (int e = 0; e < QK_K; e++) y[e] = d * blk->scales[e / 16] * (q6_level(blk, e) - 32);
    }
}

void ty_quantize_row_q6_K(const float *src, void *dst, int64_t n) {
    block_q6_K *blocks = dst;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *x = src + b * QK_K;
        block_q6_K *y = &blocks[b];
        int8_t L[QK_K];
        float scales[QK_K / 16];
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            scales[g] = fit_symmetric_grid(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(y, 0, sizeof *y);
            continue;
        }

        /* The largest-magnitude scale maps to -128; one of the opposite sign could
         * round to +128, hence the clamp at 127. */
        float iscale = -128.0f / max_scale;
        y->d = ty_fp32_to_fp16(1 / iscale);
        for (int g = 0; g < QK_K / 16; g++) {
            int l = ty_nearest_int(iscale * scales[g]);
            y->scales[g] = (int8_t)(l < 127 ? l : 127);
        }

        for (int g = 0; g < QK_K / 16; g++) {
            float d = ty_fp16_to_fp32(y->d) * y->scales[g];
            if (!d) continue;
            for (int e = 16 * g; e < 16 * g + 16; e++)
                L[e] = (int8_t)(clamp_int(ty_nearest_int(x[e] / d), -32, 31) + 32);
        }

        memset(y->ql, 0, sizeof y->ql);
        memset(y->qh, 0, sizeof y->qh);
        for (int e = 0; e < QK_K; e++) {
            int half = e / 128, k = (e % 128) / 32, l = e % 32;
            y->ql[64 * half + 32 * (k % 2) + l] |= (uint8_t)((L[e] & 0xF) << (4 * (k / 2)));
            y->qh[32 * half + l] |= (uint8_t)((L[e] >> 4) << (2 * k));
        }
    }
}
