/* gemm_avx512.c — the AVX-512 micro-kernel of gemm.h: a 12 x 32 tile of C in 24
 * registers, two vectors of B and twelve broadcasts of A per step of k. Compiled with
 * AVX-512 enabled; called only where the CPU has it (toy_gemm_kernel_best). */
#include "gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define MR 12
#define NR 32

static void kernel_12x32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                         bool load_c) {
    __m512 acc[MR][2];
    if (load_c) {
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            acc[i][0] = _mm512_loadu_ps(c + i * ldc);
            acc[i][1] = _mm512_loadu_ps(c + i * ldc + 16);
        }
    } else {
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
        const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            const __m512 ai = _mm512_set1_ps(a[i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
}

const toy_gemm_kernel *toy_gemm_kernel_avx512(void) {
    static const toy_gemm_kernel k = {"avx512", MR, NR, kernel_12x32};
    return &k;
}
#endif
