/* rope.c — the angles of rotary position embeddings, shared by inference and training.
 *
 * ggml's rope cache: theta_i = pos * base^(-2i / n_rot) built by repeated multiplication
 * in float, divided by the frequency factor of pair i (llama3, LongRoPE), scaled by
 * freq_scale (linear scaling) or blended with the unscaled angle by YaRN's ramp; cos and
 * sin are multiplied by attn_factor (and YaRN's magnitude correction).
 */
#include <math.h>

#include "model.h"

/* YaRN's blend between interpolated and extrapolated angles over the dimension pairs
 * between corr_dims[0] and corr_dims[1] (ggml's rope_yarn_ramp). */
static float rope_yarn_ramp(float low, float high, int32_t i0) {
    const float y = (float)(i0 / 2) - low;
    const float r = y / (high - low > 0.001f ? high - low : 0.001f);
    return 1.0f - (r < 0 ? 0.0f : r > 1 ? 1.0f : r);
}

/* The angle of pair i0 / 2 given theta = pos * base^(-i0 / n_rot), and the factor that
 * multiplies its cos and sin. */
static float rope_angle(const ty_rope_params *p, int32_t i0, float theta, float *mscale) {
    const float ff = p->freq_factors ? p->freq_factors[i0 / 2] : 1.0f;
    const float extrap = theta / ff;
    float th = p->freq_scale * extrap;
    *mscale = p->attn_factor;
    if (p->ext_factor != 0.0f) {
        const float mix = rope_yarn_ramp(p->corr_dims[0], p->corr_dims[1], i0) * p->ext_factor;
        th = th * (1 - mix) + extrap * mix;
        *mscale *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
    }
    return th;
}

void ty_rope_cos_sin(const ty_rope_params *p, int32_t pos, float *cs) {
    const float theta_scale = powf(p->freq_base, -2.0f / (float)p->n_rot);
    float theta = (float)pos, mscale;
    for (int32_t i0 = 0; i0 < p->n_rot; i0 += 2) {
        const float th = rope_angle(p, i0, theta, &mscale);
        cs[i0] = cosf(th) * mscale;
        cs[i0 + 1] = sinf(th) * mscale;
        theta *= theta_scale;
    }
}

void ty_rope_angles(const ty_rope_params *p, int32_t pos, float *th) {
    const float theta_scale = powf(p->freq_base, -2.0f / (float)p->n_rot);
    float theta = (float)pos, mscale;
    for (int32_t i0 = 0; i0 < p->n_rot; i0 += 2) {
        th[i0 / 2] = rope_angle(p, i0, theta, &mscale);
        theta *= theta_scale;
    }
}
