/* vec_exp.h — exp(x) for x <= 0 (-inf included) in scalar, AVX2 and AVX-512 versions that
 * give the same bits: Cody-Waite reduction by ln 2 and a degree-6 polynomial, with
 * separate multiplies and adds. Within 2 ulp of expf; softmax weights need no more, and
 * libm's expf per element was a tenth of a long prompt's attention (and more of a
 * training step). Inputs below -87 give 0, as does NaN. */
#ifndef TOY_VEC_EXP_H
#define TOY_VEC_EXP_H

#include <stdint.h>
#include <string.h>

#include "simd.h"

#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693145751953125f
#define EXP_LN2_LO 1.428606765330187e-06f
#define EXP_MIN -87.0f /* below: 0 (the weights of such cells underflow anyway) */
#define EXP_ROUND 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer */
#define EXP_C6 1.3888889e-3f
#define EXP_C5 8.3333333e-3f
#define EXP_C4 4.1666667e-2f
#define EXP_C3 1.6666667e-1f
#define EXP_C2 0.5f

TOY_ALWAYS_INLINE float ty_exp_nonpos(float x) {
    if (!(x >= EXP_MIN)) return 0.0f;
    const float n = (x * EXP_LOG2E + EXP_ROUND) - EXP_ROUND;
    const float r = (x - n * EXP_LN2_HI) - n * EXP_LN2_LO;
    float p = EXP_C6;
    p = p * r + EXP_C5;
    p = p * r + EXP_C4;
    p = p * r + EXP_C3;
    p = p * r + EXP_C2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

#if defined(__x86_64__)
/* ty_exp_nonpos of N vectors of 8 lanes in place, step by step across them: the same
 * operations per lane, each step's N operations independent. One exponential is a chain of
 * about 25 dependent operations, and a loop of them one by one filled the scheduler
 * with waiting operations of two or three chains: the softmax of a long prompt's
 * attention ran at about one operation a cycle. */
#define EXP_STEP(expr) _Pragma("GCC unroll 16") for (int i = 0; i < N; i++) expr
TOY_AVX2 TOY_ALWAYS_INLINE void ty_exp8x_nonpos(const int N, __m256 *x) {
    __m256 ok[16], n[16], r[16], p[16];
    EXP_STEP(ok[i] = _mm256_cmp_ps(x[i], _mm256_set1_ps(EXP_MIN), _CMP_GE_OQ));
    EXP_STEP(x[i] = _mm256_max_ps(x[i], _mm256_set1_ps(EXP_MIN)));
    EXP_STEP(n[i] = _mm256_mul_ps(x[i], _mm256_set1_ps(EXP_LOG2E)));
    EXP_STEP(n[i] = _mm256_add_ps(n[i], _mm256_set1_ps(EXP_ROUND)));
    EXP_STEP(n[i] = _mm256_sub_ps(n[i], _mm256_set1_ps(EXP_ROUND)));
    EXP_STEP(r[i] = _mm256_sub_ps(x[i], _mm256_mul_ps(n[i], _mm256_set1_ps(EXP_LN2_HI))));
    EXP_STEP(r[i] = _mm256_sub_ps(r[i], _mm256_mul_ps(n[i], _mm256_set1_ps(EXP_LN2_LO))));
    EXP_STEP(p[i] = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(EXP_C6), r[i]), _mm256_set1_ps(EXP_C5)));
    EXP_STEP(p[i] = _mm256_add_ps(_mm256_mul_ps(p[i], r[i]), _mm256_set1_ps(EXP_C4)));
    EXP_STEP(p[i] = _mm256_add_ps(_mm256_mul_ps(p[i], r[i]), _mm256_set1_ps(EXP_C3)));
    EXP_STEP(p[i] = _mm256_add_ps(_mm256_mul_ps(p[i], r[i]), _mm256_set1_ps(EXP_C2)));
    EXP_STEP(p[i] = _mm256_add_ps(_mm256_mul_ps(p[i], r[i]), _mm256_set1_ps(1.0f)));
    EXP_STEP(p[i] = _mm256_add_ps(_mm256_mul_ps(p[i], r[i]), _mm256_set1_ps(1.0f)));
    EXP_STEP(x[i] = _mm256_castsi256_ps(
                 _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n[i]), _mm256_set1_epi32(127)), 23)));
    EXP_STEP(x[i] = _mm256_and_ps(_mm256_mul_ps(p[i], x[i]), ok[i]));
}
#undef EXP_STEP

/* ty_exp_nonpos of 8 lanes */
TOY_AVX2 TOY_ALWAYS_INLINE __m256 ty_exp8_nonpos(__m256 x) {
    ty_exp8x_nonpos(1, &x);
    return x;
}

/* the same on 16 lanes */
TOY_AVX512 TOY_ALWAYS_INLINE __m512 ty_exp16_nonpos(__m512 x) {
    const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_MIN), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(EXP_MIN));
    const __m512 rnd = _mm512_set1_ps(EXP_ROUND);
    const __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), rnd), rnd);
    const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(EXP_LN2_HI))),
                                   _mm512_mul_ps(n, _mm512_set1_ps(EXP_LN2_LO)));
    __m512 p = _mm512_set1_ps(EXP_C6);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(EXP_C5));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(EXP_C4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(EXP_C3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(EXP_C2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(ok, _mm512_mul_ps(p, _mm512_castsi512_ps(bits)));
}
#endif

#endif
