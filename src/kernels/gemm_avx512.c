/* gemm_avx512.c — the AVX-512 micro-kernel of gemm.h: a 12 x 32 tile of C in 24
 * registers, two vectors of B and twelve broadcasts of A per step of k. Compiled with
 * AVX-512 enabled; called only where the CPU has it (cpu.c). */
#include "gemm.h"

#if defined(__x86_64__)
#include "simd.h"

TOY_TARGET_BEGIN(TOY_FEATURES_AVX512)

#define MR 12
#define NR 32

/* GCC keeps the 16 rows of a transpose in registers only when told to unroll; clang
 * unrolls by itself, and with the pragma takes minutes on this file under ASan. */
#if defined(__clang__)
#define UNROLL16
#else
#define UNROLL16 _Pragma("GCC unroll 16")
#endif

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

/* r[i] holds row i (16 floats); afterwards r[j] holds column j. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16];
    UNROLL16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    UNROLL16
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* r[4q + s] now holds, in each 128-bit lane L, element s of rows 4q..4q+3 at column
     * 4L + (0..3) order; gather the lanes */
    UNROLL16
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], _MM_SHUFFLE(2, 0, 2, 0));
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], _MM_SHUFFLE(3, 1, 3, 1));
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], _MM_SHUFFLE(2, 0, 2, 0));
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], _MM_SHUFFLE(3, 1, 3, 1));
    }
    UNROLL16
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], _MM_SHUFFLE(3, 1, 3, 1));
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* dst[k * width + off + i] = src[i * ld + k] for i < rows (zeros up to 16 rows), k < kc;
 * `store` lanes of each column written (12 for A panels, 16 for B half-panels). */
static inline __attribute__((always_inline)) void pack_rows16(const float *src, int64_t ld, int rows, int64_t kc, float *dst, int width,
                               __mmask16 store) {
    __m512 r[16];
    UNROLL16
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
        const int nk = kc - k0 < 16 ? (int)(kc - k0) : 16;
        const __mmask16 in = (__mmask16)(nk == 16 ? 0xffff : (1u << nk) - 1u);
        UNROLL16
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(in, src + i * ld + k0) : _mm512_setzero_ps();
        transpose16(r);
        UNROLL16
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

const ty_gemm_kernel *ty_gemm_kernel_avx512(void) {
    static const ty_gemm_kernel k = {"avx512", MR, NR, kernel_12x32, pack_a_rows, pack_b_rows, false, NULL};
    return &k;
}
TOY_TARGET_END
#endif
