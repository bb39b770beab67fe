/* elementwise.h — the elementwise and row operations of inference and training that have
 * SIMD versions, and the FMA peak loop (cpu.h chooses one per instruction set). Every version gives the bits of
 * the scalar one: the exponentials are vec_exp.h's, the other operations the same
 * separate multiplies, adds and divisions lane by lane, and a row's sum goes into 16
 * float lanes (element i into lane i % 16) combined pairwise at the end.
 */
#ifndef TOY_ELEMENTWISE_H
#define TOY_ELEMENTWISE_H

#include <stdint.h>

#include "simd.h"

/* y[i] = exp(x[i] - m) * scale (when y is not NULL); returns the sum of exp(x[i] - m). */
typedef float (*ty_row_exp_fn)(const float *x, float *y, int64_t n, float m, float scale);
/* SwiGLU, the one of inference and training: y[i] = silu(gate[i]) up[i] with
 * silu(g) = (g >= 0 ? g : g e) / (1 + e), e = exp(-|g|); and its backward, which adds into
 * dgate and dup: silu'(g) = s (1 + g (1 - s)), dup = dy g s, with s = sigmoid(g) =
 * (g >= 0 ? 1 : e) / (1 + e). */
typedef void (*ty_swiglu_fn)(float *y, const float *gate, const float *up, int64_t n);
typedef void (*ty_swiglu_bwd_fn)(float *dgate, float *dup, const float *dout, const float *gate,
                                 const float *up, int64_t n);

float ty_row_exp_scalar(const float *x, float *y, int64_t n, float m, float scale);
float ty_row_exp_avx2(const float *x, float *y, int64_t n, float m, float scale);
float ty_row_exp_avx512(const float *x, float *y, int64_t n, float m, float scale);
void ty_swiglu_scalar(float *y, const float *gate, const float *up, int64_t n);
void ty_swiglu_avx2(float *y, const float *gate, const float *up, int64_t n);
void ty_swiglu_avx512(float *y, const float *gate, const float *up, int64_t n);
void ty_swiglu_bwd_scalar(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                          int64_t n);
void ty_swiglu_bwd_avx2(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                        int64_t n);
void ty_swiglu_bwd_avx512(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                          int64_t n);

/* FLOPs of a run of independent FMA chains in registers, `iters` scaled to a similar time
 * (peak.c: the denominator of toy train --bench's utilisation). */
double ty_fma_peak_scalar(long iters);
double ty_fma_peak_avx2(long iters);
double ty_fma_peak_avx512(long iters);
/* The memory read probe's loop (peak.c): the n words at p read as `streams` streams in
 * turn, 512 bytes of each (AVX2: 32-byte loads; the scalar loop reads one stream), their
 * XOR or sum returned so that the loads are not dropped. */
uint64_t ty_read_sum_scalar(const uint64_t *p, size_t n, int streams);
uint64_t ty_read_sum_avx2(const uint64_t *p, size_t n, int streams);

/* The 16-lane pairwise sum: l[k] += l[k + s] for s = 8, 4, 2, 1; the result is l[0]. */
TOY_ALWAYS_INLINE float ty_lanes16_sum(float *l) {
    for (int s = 8; s >= 1; s /= 2)
        for (int k = 0; k < s; k++) l[k] += l[k + s];
    return l[0];
}

#endif
