/* elementwise.c — the operations of elementwise.h, scalar and SIMD. */
#include "elementwise.h"

#include <math.h>

#include "simd.h"
#include "vec_exp.h"

float ty_row_exp_scalar(const float *x, float *y, int64_t n, float m, float scale) {
    float l[16] = {0};
    for (int64_t i = 0; i < n; i++) {
        const float e = ty_exp_nonpos(x[i] - m);
        l[i % 16] += e;
        if (y) y[i] = e * scale;
    }
    return ty_lanes16_sum(l);
}

/* Every SwiGLU goes through exp_nonpos, so that every instruction set computes the same
 * bits: with e = exp(-|g|), silu(g) = g / (1 + exp(-g)) = (g >= 0 ? g : g e) / (1 + e) and
 * sigmoid(g) = (g >= 0 ? 1 : e) / (1 + e). */
static inline float silu_mul(float g, float u) {
    const float e = ty_exp_nonpos(-fabsf(g));
    return ((g >= 0.0f ? g : g * e) / (1.0f + e)) * u;
}

static inline float sigmoid_of(float g) {
    const float e = ty_exp_nonpos(-fabsf(g));
    return (g >= 0.0f ? 1.0f : e) / (1.0f + e);
}

void ty_swiglu_scalar(float *y, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = silu_mul(gate[i], up[i]);
}

void ty_swiglu_bwd_scalar(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                          int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i], sg = sigmoid_of(g), dy = dout[i];
        dgate[i] += (dy * up[i]) * (sg * (1.0f + g * (1.0f - sg)));
        dup[i] += dy * (g * sg);
    }
}

/* The portable FMA loop: plain multiply-adds the compiler may or may not fuse. */
static volatile float peak_sink;

double ty_fma_peak_scalar(long iters) {
    float a[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (long k = 0; k < iters / 8; k++)
        for (int i = 0; i < 8; i++) a[i] = a[i] * 0.999999f + 1e-7f;
    peak_sink = a[0] + a[7];
    return (double)(iters / 8) * 8 * 2;
}

/* four independent sums keep several loads in flight */
uint64_t ty_read_sum_scalar(const uint64_t *p, size_t n, int streams) {
    (void)streams;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

#if defined(__x86_64__)
/* Decode reads four groups of weight rows side by side on Intel (one stream per core
 * reads below the memory's bandwidth there) and one elsewhere (four read slower on AMD),
 * so the probe takes both (the figures: docs/performance.md, "Kernel choices"). */
TOY_AVX2 uint64_t ty_read_sum_avx2(const uint64_t *p, size_t n, int streams) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    const size_t per = n / (size_t)streams / 64 * 64; /* 64 words: 512 bytes */
    for (size_t i = 0; i < per; i += 64)
        for (int s = 0; s < streams; s++) {
            const uint64_t *q = p + (size_t)s * per + i;
            for (int k = 0; k < 64; k += 16) {
                a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(q + k)));
                a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(q + k + 4)));
                a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(q + k + 8)));
                a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(q + k + 12)));
            }
        }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, a);
    return out[0] ^ out[1] ^ out[2] ^ out[3];
}

/* 16 chains of 16 lanes (a quarter of the iterations: as many FLOPs as 4 x 8 x 2) */
TOY_AVX512 double ty_fma_peak_avx512(long iters) {
    iters /= 4;
    __m512 a[16], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps((float)i);
    for (long k = 0; k < iters; k++) {
        TOY_UNROLL16
        for (int i = 0; i < 16; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
    }
    __m512 s = a[0];
    for (int i = 1; i < 16; i++) s = _mm512_add_ps(s, a[i]);
    peak_sink = _mm512_reduce_add_ps(s);
    return (double)iters * 16 * 16 * 2;
}

/* 12 chains of 8 lanes, half the iterations */
TOY_AVX2 double ty_fma_peak_avx2(long iters) {
    iters /= 2;
    __m256 a[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], x, y);
    }
    __m256 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
    peak_sink = _mm256_cvtss_f32(s);
    return (double)iters * 12 * 8 * 2;
}

TOY_AVX512 float ty_row_exp_avx512(const float *x, float *y, int64_t n, float m, float scale) {
    __m512 acc = _mm512_setzero_ps();
    const __m512 vm = _mm512_set1_ps(m), vs = _mm512_set1_ps(scale);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = ty_exp16_nonpos(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        acc = _mm512_add_ps(acc, e);
        if (y) _mm512_storeu_ps(y + i, _mm512_mul_ps(e, vs));
    }
    float l[16];
    _mm512_storeu_ps(l, acc);
    for (; i < n; i++) {
        const float e = ty_exp_nonpos(x[i] - m);
        l[i % 16] += e;
        if (y) y[i] = e * scale;
    }
    return ty_lanes16_sum(l);
}

TOY_AVX2 float ty_row_exp_avx2(const float *x, float *y, int64_t n, float m, float scale) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    const __m256 vm = _mm256_set1_ps(m), vs = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 e0 = ty_exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        const __m256 e1 = ty_exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
        lo = _mm256_add_ps(lo, e0);
        hi = _mm256_add_ps(hi, e1);
        if (y) {
            _mm256_storeu_ps(y + i, _mm256_mul_ps(e0, vs));
            _mm256_storeu_ps(y + i + 8, _mm256_mul_ps(e1, vs));
        }
    }
    float l[16];
    _mm256_storeu_ps(l, lo);
    _mm256_storeu_ps(l + 8, hi);
    for (; i < n; i++) {
        const float e = ty_exp_nonpos(x[i] - m);
        l[i % 16] += e;
        if (y) y[i] = e * scale;
    }
    return ty_lanes16_sum(l);
}

/* The SwiGLUs on 8 and 16 lanes: the same operations */
TOY_AVX2 TOY_ALWAYS_INLINE __m256 silu8(__m256 g, __m256 *sigmoid) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = ty_exp8_nonpos(_mm256_or_ps(g, _mm256_set1_ps(-0.0f))); /* -|g| */
    const __m256 pos = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_GE_OQ);
    const __m256 den = _mm256_add_ps(one, e);
    if (sigmoid) *sigmoid = _mm256_div_ps(_mm256_blendv_ps(e, one, pos), den);
    return _mm256_div_ps(_mm256_blendv_ps(_mm256_mul_ps(g, e), g, pos), den);
}

TOY_AVX512 TOY_ALWAYS_INLINE __m512 silu16(__m512 g, __m512 *sigmoid) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 e = ty_exp16_nonpos(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));
    const __mmask16 pos = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_GE_OQ);
    const __m512 den = _mm512_add_ps(one, e);
    if (sigmoid) *sigmoid = _mm512_div_ps(_mm512_mask_mov_ps(e, pos, one), den);
    return _mm512_div_ps(_mm512_mask_mov_ps(_mm512_mul_ps(g, e), pos, g), den);
}

TOY_AVX2 void ty_swiglu_avx2(float *y, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i), NULL), _mm256_loadu_ps(up + i)));
    ty_swiglu_scalar(y + i, gate + i, up + i, n - i);
}

TOY_AVX512 void ty_swiglu_avx512(float *y, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(silu16(_mm512_loadu_ps(gate + i), NULL), _mm512_loadu_ps(up + i)));
    ty_swiglu_scalar(y + i, gate + i, up + i, n - i);
}

/* silu'(g) = s (1 + g (1 - s)); g s is computed as g * s, as in the scalar loop */
TOY_AVX2 void ty_swiglu_bwd_avx2(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                 int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 sg;
        const __m256 g = _mm256_loadu_ps(gate + i), dy = _mm256_loadu_ps(dout + i);
        (void)silu8(g, &sg);
        const __m256 d = _mm256_mul_ps(sg, _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, sg))));
        _mm256_storeu_ps(dgate + i, _mm256_add_ps(_mm256_loadu_ps(dgate + i),
                                                  _mm256_mul_ps(_mm256_mul_ps(dy, _mm256_loadu_ps(up + i)), d)));
        _mm256_storeu_ps(dup + i, _mm256_add_ps(_mm256_loadu_ps(dup + i), _mm256_mul_ps(dy, _mm256_mul_ps(g, sg))));
    }
    ty_swiglu_bwd_scalar(dgate + i, dup + i, dout + i, gate + i, up + i, n - i);
}

TOY_AVX512 void ty_swiglu_bwd_avx512(float *dgate, float *dup, const float *dout, const float *gate,
                                     const float *up, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 sg;
        const __m512 g = _mm512_loadu_ps(gate + i), dy = _mm512_loadu_ps(dout + i);
        (void)silu16(g, &sg);
        const __m512 d = _mm512_mul_ps(sg, _mm512_add_ps(one, _mm512_mul_ps(g, _mm512_sub_ps(one, sg))));
        _mm512_storeu_ps(dgate + i, _mm512_add_ps(_mm512_loadu_ps(dgate + i),
                                                  _mm512_mul_ps(_mm512_mul_ps(dy, _mm512_loadu_ps(up + i)), d)));
        _mm512_storeu_ps(dup + i, _mm512_add_ps(_mm512_loadu_ps(dup + i), _mm512_mul_ps(dy, _mm512_mul_ps(g, sg))));
    }
    ty_swiglu_bwd_scalar(dgate + i, dup + i, dout + i, gate + i, up + i, n - i);
}
#endif
