/* kernels.h — the compute leaves under every matmul: activation quantization and the dot
 * product of one weight row with one activation row, per weight type.
 *
 * As in llama.cpp, a matmul first rounds each activation row to the weight type's
 * "vec_dot type" (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for the
 * K-quants and IQ4_XS, F16 for F16, BF16 for BF16, F32 for F32), once per row, then
 * takes integer (or half-precision) dot products block by block. F16 and BF16
 * activations are rounded to the type but held as floats, so that a product converts
 * only its weights. The scalar functions here are the reference; SIMD versions must
 * reduce in the same block order and are tested against them.
 */
#ifndef TOY_KERNELS_H
#define TOY_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

typedef void (*ty_quantize_act_fn)(const float *x, void *y, int64_t n);

typedef struct {
    int type;          /* the weight type */
    int vec_dot_type;  /* what activations are rounded to */
    /* One activation row of n floats to the vec_dot type (n a multiple of its block):
     * ty_kernel_act_row_size bytes. */
    void (*quantize_act)(const float *x, void *y, int64_t n);
    /* Dot product of a weight row and a vec_dot-type activation row, n elements. */
    float (*vec_dot)(int64_t n, const void *w, const void *a);
    /* A tile of dot products for prefill: n_w weight rows (w_stride bytes apart) times
     * n_a activation rows (a_stride bytes apart, n_a <= TOY_TILE_MAX), written to
     * y[j * y_stride + i] for weight row i and activation row j. Each result is
     * bit-identical to vec_dot of that pair; the point is to decode each weight block
     * once for all n_a rows. NULL: the matmul loops vec_dot. */
    void (*vec_dot_tile)(int64_t n, const void *w, size_t w_stride, int n_w, const void *a,
                         size_t a_stride, int n_a, float *y, size_t y_stride);
} ty_kernel;

#define TOY_TILE_MAX 8

/* The weight types with row kernels, once: X(TYPE, name, VEC_DOT_TYPE, activation
 * quantizer) for each. Each instruction set's table is this list expanded over its own
 * vec_dot_name and vec_dot_tile_name, so that all of them pair a type with the same
 * activations. */
#define TY_ROW_KERNEL_TYPES(X)                                \
    X(F32, f32, F32, ty_quantize_row_f32)                     \
    X(F16, f16, F16, ty_quantize_act_f16)                     \
    X(BF16, bf16, BF16, ty_quantize_act_bf16)                 \
    X(Q4_0, q4_0, Q8_0, ty_quantize_act_q8_0)                 \
    X(Q4_1, q4_1, Q8_1, ty_quantize_act_q8_1)                 \
    X(Q5_0, q5_0, Q8_0, ty_quantize_act_q8_0)                 \
    X(Q5_1, q5_1, Q8_1, ty_quantize_act_q8_1)                 \
    X(Q8_0, q8_0, Q8_0, ty_quantize_act_q8_0)                 \
    X(Q2_K, q2_K, Q8_K, ty_quantize_act_q8_K)                 \
    X(Q3_K, q3_K, Q8_K, ty_quantize_act_q8_K)                 \
    X(Q4_K, q4_K, Q8_K, ty_quantize_act_q8_K)                 \
    X(Q5_K, q5_K, Q8_K, ty_quantize_act_q8_K)                 \
    X(Q6_K, q6_K, Q8_K, ty_quantize_act_q8_K)                 \
    X(IQ4_NL, iq4_nl, Q8_0, ty_quantize_act_q8_0)             \
    X(IQ4_XS, iq4_xs, Q8_K, ty_quantize_act_q8_K)

/* One entry of such a table */
#define TY_ROW_KERNEL(T, name, VDT, quantize_act) \
    [TOY_TYPE_##T] = {TOY_TYPE_##T, TOY_TYPE_##VDT, quantize_act, vec_dot_##name, vec_dot_tile_##name},

/* Bytes of one activation row of n elements of kernel k: the vec_dot type's row, but 4
 * an element for F16 and BF16 (floats rounded to the type). */
toy_status ty_kernel_act_row_size(const ty_kernel *k, int64_t n, size_t *out);

/* The scalar reference kernel of a weight type, NULL if toy has none. */
const ty_kernel *ty_kernel_scalar(int type);

/* The kernels of one instruction set, NULL for a type it has none for (cpu.c falls
 * back to the next). Only call them on a CPU that has the instructions. */
const ty_kernel *ty_kernel_avx2(int type);   /* AVX2 + FMA + F16C */
const ty_kernel *ty_kernel_avx512(int type); /* AVX-512 F/BW/VL/DQ + VNNI */
/* AVX2 activation quantizers of a vec_dot type (F16, BF16, Q8_0, Q8_1, Q8_K), byte-identical to
 * the scalar ones; NULL for other types. The dispatcher puts them in every kernel. */
ty_quantize_act_fn ty_quantize_act_avx2(int vec_dot_type);
void ty_quantize_act_q8_1_avx2(const float *x, void *y, int64_t n);
void ty_quantize_act_q8_K_avx2(const float *x, void *y, int64_t n);

/* Activation quantizers (llama.cpp's quantize_row_q8_0/q8_1/q8_K reference code). */
void ty_quantize_act_q8_0(const float *x, void *y, int64_t n);
void ty_quantize_act_q8_1(const float *x, void *y, int64_t n);
void ty_quantize_act_q8_K(const float *x, void *y, int64_t n);
/* F16 and BF16 activations: each float rounded to the type (ty_fp32_to_fp16,
 * ty_fp32_to_bf16) and back. */
void ty_quantize_act_f16(const float *x, void *y, int64_t n);
void ty_quantize_act_bf16(const float *x, void *y, int64_t n);

#endif
