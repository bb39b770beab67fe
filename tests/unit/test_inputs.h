/* test_inputs.h — the random inputs of the kernel tests (test_kernels, test_kernels_simd,
 * test_packed): Gaussian rows, small random fp16 factors, where a block keeps its fp16
 * factors, and the kinds of activation rows. Deterministic: the same generator state
 * (test_rand_* of test.h) gives the same values, so a failure reproduces. */
#ifndef TOY_TEST_INPUTS_H
#define TOY_TEST_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "quant.h"
#include "test.h"

/* The bytes of a row of n weights of `type`. */
static inline size_t test_row_bytes(int type, int64_t n) {
    size_t size = 0;
    if (toy_type_row_size(type, n, &size) != TOY_OK) abort();
    return size;
}

/* The bytes of an activation row of n values for kernel k (F16's are floats). */
static inline size_t test_act_bytes(const ty_kernel *k, int64_t n) {
    size_t size = 0;
    if (ty_kernel_act_row_size(k, n, &size) != TOY_OK) abort();
    return size;
}

/* n values of N(0, scale^2). */
static inline void test_fill_normal(float *x, int64_t n, float scale, unsigned long long *rng) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * test_rand_normal(rng);
}

/* A fp16 factor uniform in [-scale, scale). */
static inline ty_half test_rand_half(unsigned long long *rng, float scale) {
    return ty_fp32_to_fp16(scale * (2.0f * test_rand_uniform(rng) - 1.0f));
}

/* The offsets of a block's fp16 factors: d, and then dmin or m where the type has one
 * (the count). A test that writes random bytes over a block sets these after. */
static inline int test_block_factors(int type, size_t off[2]) {
    switch (type) {
    case TOY_TYPE_Q4_0: off[0] = offsetof(block_q4_0, d); return 1;
    case TOY_TYPE_Q4_1: off[0] = offsetof(block_q4_1, d), off[1] = offsetof(block_q4_1, m); return 2;
    case TOY_TYPE_Q5_0: off[0] = offsetof(block_q5_0, d); return 1;
    case TOY_TYPE_Q5_1: off[0] = offsetof(block_q5_1, d), off[1] = offsetof(block_q5_1, m); return 2;
    case TOY_TYPE_Q8_0: off[0] = offsetof(block_q8_0, d); return 1;
    case TOY_TYPE_Q2_K: off[0] = offsetof(block_q2_K, d), off[1] = offsetof(block_q2_K, dmin); return 2;
    case TOY_TYPE_Q3_K: off[0] = offsetof(block_q3_K, d); return 1;
    case TOY_TYPE_Q4_K: off[0] = offsetof(block_q4_K, d), off[1] = offsetof(block_q4_K, dmin); return 2;
    case TOY_TYPE_Q5_K: off[0] = offsetof(block_q5_K, d), off[1] = offsetof(block_q5_K, dmin); return 2;
    case TOY_TYPE_Q6_K: off[0] = offsetof(block_q6_K, d); return 1;
    case TOY_TYPE_IQ4_NL: off[0] = offsetof(block_iq4_nl, d); return 1;
    case TOY_TYPE_IQ4_XS: off[0] = offsetof(block_iq4_xs, d); return 1;
    default: abort();
    }
}

/* Activation rows: the ordinary case and the corners of the activation quantizers. */
typedef enum {
    A_GAUSSIAN, /* N(0, 1) */
    A_ZERO,
    A_MAX,      /* +-1000 with random signs: every quant +-127 */
    A_TINY,     /* N(0, (1e-18)^2): against tiny float weights, products that underflow */
    A_MODES
} act_mode;

static inline const char *test_act_mode_name(act_mode mode) {
    static const char *const names[A_MODES] = {"gaussian", "zero", "max", "tiny"};
    return names[mode];
}

static inline void test_fill_acts(float *x, int64_t n, act_mode mode, unsigned long long *rng) {
    for (int64_t i = 0; i < n; i++) {
        switch (mode) {
        case A_ZERO: x[i] = 0.0f; break;
        case A_MAX: x[i] = (test_rand_u64(rng) >> 63) ? 1000.0f : -1000.0f; break;
        case A_TINY: x[i] = 1e-18f * test_rand_normal(rng); break;
        default: x[i] = test_rand_normal(rng); break;
        }
    }
}

#endif
