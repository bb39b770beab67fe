/* gemm_avx2.c — the AVX2 micro-kernel of gemm.h: a 6 x 16 tile of C in 12 registers,
 * two vectors of B and six broadcasts of A per step of k. Compiled with AVX2 and FMA
 * enabled; called only where the CPU has them (cpu.c). */
#include "gemm.h"

#if defined(__x86_64__)
#include "simd.h"

TOY_TARGET_BEGIN(TOY_FEATURES_AVX2)

#define MR 6
#define NR 16

static void kernel_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                        bool load_c) {
    __m256 acc[MR][2];
    if (load_c) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            acc[i][0] = _mm256_loadu_ps(c + i * ldc);
            acc[i][1] = _mm256_loadu_ps(c + i * ldc + 8);
        }
    } else {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            const __m256 ai = _mm256_broadcast_ss(a + i);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(c + i * ldc, acc[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
    }
}

const ty_gemm_kernel *ty_gemm_kernel_avx2(void) {
    static const ty_gemm_kernel k = {"avx2", MR, NR, kernel_6x16, NULL, NULL, false};
    return &k;
}
TOY_TARGET_END
#endif
