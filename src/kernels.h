/* kernels.h — the compute leaves under every matmul: activation quantization and the dot
 * product of one weight row with one activation row, per weight type.
 *
 * As in llama.cpp, a matmul first rounds each activation row to the weight type's
 * "vec_dot type" (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for the
 * K-quants and IQ4_XS, F16 for F16, BF16 for BF16, F32 for F32), once per row, then
 * takes integer (or half-precision) dot products block by block. The scalar functions
 * here are the reference; SIMD versions must reduce in the same block order and are
 * tested against them.
 */
#ifndef TOY_KERNELS_H
#define TOY_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

typedef struct {
    int type;          /* the weight type */
    int vec_dot_type;  /* what activations are rounded to */
    /* One activation row of n floats to the vec_dot type (n a multiple of its block). */
    void (*quantize_act)(const float *x, void *y, int64_t n);
    /* Dot product of a weight row and a vec_dot-type activation row, n elements. */
    float (*vec_dot)(int64_t n, const void *w, const void *a);
} toy_kernel;

/* The scalar reference kernel of a weight type, NULL if toy has none. */
const toy_kernel *toy_kernel_scalar(int type);

/* Activation quantizers (llama.cpp's quantize_row_q8_0/q8_1/q8_K reference code). */
void toy_quantize_act_q8_0(const float *x, void *y, int64_t n);
void toy_quantize_act_q8_1(const float *x, void *y, int64_t n);
void toy_quantize_act_q8_K(const float *x, void *y, int64_t n);

#endif
