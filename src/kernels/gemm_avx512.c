/* gemm_avx512.c — the AVX-512 micro-kernel of gemm.h: a 12 x 32 tile of C in 24
 * registers, two vectors of B and twelve broadcasts of A per step of k; and the pair
 * panels of gemm_pairs_avx512.h without BF16 instructions (tests run that code on any
 * AVX-512 CPU). Compiled with AVX-512 enabled; called only where the CPU has it (cpu.c). */
#include "gemm.h"

#if defined(__x86_64__)
#include "simd.h"

TOY_TARGET_BEGIN(TOY_FEATURES_AVX512)

#include "gemm_pairs_avx512.h" /* bf() in integer instructions */

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

/* dst[k * width + off + i] = src[i * ld + k] for i < rows (zeros up to 16 rows), k < kc;
 * `store` lanes of each column written (12 for A panels, 16 for B half-panels). */
static inline __attribute__((always_inline)) void pack_rows16(const float *src, int64_t ld, int rows, int64_t kc, float *dst, int width,
                               __mmask16 store) {
    __m512 r[16];
    PAIRS_UNROLL16
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
        const int nk = kc - k0 < 16 ? (int)(kc - k0) : 16;
        const __mmask16 in = (__mmask16)(nk == 16 ? 0xffff : (1u << nk) - 1u);
        PAIRS_UNROLL16
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(in, src + i * ld + k0) : _mm512_setzero_ps();
        transpose16(r);
        PAIRS_UNROLL16
        for (int k = 0; k < nk; k++) _mm512_mask_storeu_ps(dst + (k0 + k) * width, store, r[k]);
    }
}

/* an A panel from 12 rows of A (row-major, K contiguous) */
static void pack_a_rows(const float *a, int64_t lda, int rows, int64_t kc, float *dst) {
    pack_rows16(a, lda, rows, kc, dst, MR, 0x0fff);
}

/* a B panel from 32 rows of B stored N x K (op(B) = B^T) */
static void pack_b_rows(const float *b, int64_t ldb, int cols, int64_t kc, float *dst) {
    pack_rows16(b, ldb, cols < 16 ? cols : 16, kc, dst, NR, 0xffff);
    pack_rows16(b + 16 * ldb, ldb, cols > 16 ? cols - 16 : 0, kc, dst + 16, NR, 0xffff);
}

void ty_gemm_pack_pairs_avx512(const float *x, int64_t ld, bool k_major, int width, int rows, int64_t kc,
                               float *dst) {
    pack_pairs_avx512(x, ld, k_major, width, rows, kc, dst);
}

const ty_gemm_kernel *ty_gemm_kernel_avx512(void) {
    static const ty_gemm_kernel k = {"avx512", MR, NR, kernel_12x32, pack_a_rows, pack_b_rows, false, NULL};
    return &k;
}
TOY_TARGET_END
#endif
