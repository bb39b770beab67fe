/* quant_iq.c — the non-linear 4-bit types IQ4_NL and IQ4_XS.
 *
 * Both store 4-bit indices into one fixed codebook of 16 signed levels, packed like Q4_0
 * (low nibble of qs[j] is weight j of a 32-weight group, high nibble weight j + 16).
 * IQ4_NL gives every 32 weights their own fp16 scale. IQ4_XS groups 8 such sub-blocks in
 * a 256-weight super-block with one fp16 scale d and a 6-bit signed scale per sub-block:
 * its low 4 bits in scales_l (two per byte, even sub-block in the low nibble), its high 2
 * bits in scales_h (bits 2*ib, 2*ib+1), stored with a bias of 32.
 *
 * Quantizing to IQ4_NL reproduces llama.cpp's quantize_iq4_nl without an importance
 * matrix (what llama-quantize runs), block by block; toy does not quantize to IQ4_XS.
 */
#include "quant.h"

#include <math.h>

/* ggml's kvalues_iq4nl: denser near zero, where most weights of a Gaussian-like block
 * lie, and one level further out on the negative side (-127 vs 113). */
const int8_t ty_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

/* ---------------------------------------------------------------- shared helpers */

/* Index of the codebook level nearest to x; an exact midpoint goes to the upper level, as
 * in ggml. Comparing 2x with the sum of two neighbours keeps the midpoint exact. NaN lands
 * on level 0. */
static int iq4nl_nearest(float x) {
    const float twice = x + x;
    int i = 0;
    while (i < 15 && twice >= (float)(ty_iq4nl_values[i] + ty_iq4nl_values[i + 1])) i++;
    return i;
}

/* Unpacks one 32-weight group: 16 bytes of index pairs times one scale. */
static void iq4_dequantize_group(const uint8_t qs[16], float scale, float *dst) {
    for (int j = 0; j < 16; j++) {
        dst[j] = scale * (float)ty_iq4nl_values[qs[j] & 0x0f];
        dst[j + 16] = scale * (float)ty_iq4nl_values[qs[j] >> 4];
    }
}

/* ---------------------------------------------------------------- IQ4_NL */

void ty_dequantize_row_iq4_nl(const void *src, float *dst, int64_t n) {
    const block_iq4_nl *blocks = src;
    for (int64_t b = 0; b < n / QK4_NL; b++, dst += QK4_NL)
        iq4_dequantize_group(blocks[b].qs, ty_fp16_to_fp32(blocks[b].d), dst);
}

/* Maps the group with inverse scale `inv_scale` onto the codebook and returns the sums
 * that fix the best scale for that mapping: with s = sum w*q*x and t = sum w*q*q, the
 * weighted squared error is least at scale s/t, where it is sum w*x*x - s*s/t. So the
 * mapping with the largest s*s/t wins. Terms are summed in ggml's order and grouping. */
static void iq4nl_fit(const float *x, const float *weight, float inv_scale, float *sum_qx,
                      float *sum_q2) {
    float s = 0.0f, t = 0.0f;
    for (int j = 0; j < QK4_NL; j++) {
        const float q = (float)ty_iq4nl_values[iq4nl_nearest(inv_scale * x[j])];
        const float wq = weight[j] * q;
        s += wq * x[j];
        t += wq * q;
    }
    *sum_qx = s;
    *sum_q2 = t;
}

/* ggml treats a group whose largest magnitude is below this as all zero (GROUP_MAX_EPS). */
#define IQ4NL_ZERO_EPS 1e-15f
/* Candidate inverse scales tried on either side of the one that maps the extreme onto
 * the outermost level; ggml's quantize_iq4_nl passes 7. */
#define IQ4NL_NTRY 7

/* The block scale, chosen as ggml does: first the inverse scale 127/max (the extreme
 * lands beyond the top level 113), then the 2*NTRY+1 inverse scales (k - 127)/max for
 * k = -NTRY..NTRY (the extreme lands on or near the bottom level -127, the scale takes the
 * other sign); each mapping gets its least-squares scale and the one with the smallest
 * weighted error wins, the earlier one on a tie. Weights are x^2, ggml's choice without an
 * importance matrix: the error on large weights matters most. */
static float iq4nl_best_scale(const float *x, const float *weight, float max) {
    float sum_qx, sum_q2;
    iq4nl_fit(x, weight, 1.0f / (max / 127.0f), &sum_qx, &sum_q2);
    float scale = sum_q2 > 0.0f ? sum_qx / sum_q2 : 0.0f;
    float best = scale * sum_qx;
    for (int k = -IQ4NL_NTRY; k <= IQ4NL_NTRY; k++) {
        const float inv = (float)(k + ty_iq4nl_values[0]) / max;
        iq4nl_fit(x, weight, inv, &sum_qx, &sum_q2);
        if (sum_q2 > 0.0f && sum_qx * sum_qx > best * sum_q2) {
            scale = sum_qx / sum_q2;
            best = scale * sum_qx;
        }
    }
    return scale;
}

static void iq4nl_quantize_block(const float *x, block_iq4_nl *out) {
    float weight[QK4_NL];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_NL; j++) {
        weight[j] = x[j] * x[j];
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    const float scale = amax < IQ4NL_ZERO_EPS ? 0.0f : iq4nl_best_scale(x, weight, max);
    out->d = ty_fp32_to_fp16(scale);
    /* The indices are picked again with the unrounded scale (ggml does not refit them to
     * the fp16 one). With scale 0 every weight maps to 0, whose nearest level is 1 (index
     * 8): an all-zero block is stored as d = 0, every nibble 8. */
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int j = 0; j < QK4_NL / 2; j++) {
        const int lo = iq4nl_nearest(inv * x[j]);
        const int hi = iq4nl_nearest(inv * x[j + QK4_NL / 2]);
        out->qs[j] = (uint8_t)(lo | hi << 4);
    }
}

void ty_quantize_row_iq4_nl(const float *src, void *dst, int64_t n) {
    block_iq4_nl *blocks = dst;
    for (int64_t b = 0; b < n / QK4_NL; b++) iq4nl_quantize_block(src + b * QK4_NL, &blocks[b]);
}

/* ---------------------------------------------------------------- IQ4_XS */

void ty_dequantize_row_iq4_xs(const void *src, float *dst, int64_t n) {
    const block_iq4_xs *blocks = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = ty_fp16_to_fp32(blocks[b].d);
        for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
            const int low = (blocks[b].scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
            const int high = (blocks[b].scales_h >> (2 * ib)) & 3;
            const float scale = d * (float)((low | high << 4) - 32);
            iq4_dequantize_group(blocks[b].qs + 16 * ib, scale, dst);
        }
    }
}
