/* gemm_avx2.c — the AVX2 micro-kernel of gemm.h: a 6 x 16 tile of C in 12 registers,
 * two vectors of B and six broadcasts of A per step of k; and the packing of bf16 pair
 * panels, which the AVX-512 BF16 kernel uses. Compiled with AVX2 and FMA enabled;
 * called only where the CPU has them (cpu.c). */
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

/* bf() of gemm.h on 8 floats (their bits), in the low 16 bits of each lane: nearest
 * even, NaN kept and quieted, bf16 subnormals to the zero of their sign */
static inline __attribute__((always_inline)) __m256i bf16_daz8(__m256i u) {
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    const __m256i rounded = _mm256_srli_epi32(biased, 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i h = _mm256_blendv_epi8(rounded, quiet, nan);
    const __m256i exponent = _mm256_and_si256(h, _mm256_set1_epi32(0x7f80));
    const __m256i subnormal = _mm256_cmpeq_epi32(exponent, _mm256_setzero_si256());
    return _mm256_blendv_epi8(h, _mm256_and_si256(h, _mm256_set1_epi32(0x8000)), subnormal);
}

/* lanes [0, n) set */
static inline __attribute__((always_inline)) __m256i lanes8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __attribute__((always_inline)) __m256i load8(const float *x, int n) {
    return n >= 8 ? _mm256_loadu_si256((const __m256i *)x) : _mm256_castps_si256(_mm256_maskload_ps(x, lanes8(n)));
}

static inline __attribute__((always_inline)) void store8(float *dst, __m256i v, int n) {
    if (n >= 8) _mm256_storeu_si256((__m256i *)dst, v);
    else _mm256_maskstore_ps(dst, lanes8(n), _mm256_castsi256_ps(v));
}

/* r[i] holds row i (8 lanes); afterwards r[j] holds column j */
static inline __attribute__((always_inline)) void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    TOY_UNROLL8
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    TOY_UNROLL8
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* u[4q + s] holds, in each 128-bit lane L, element s of rows 4q..4q+3 at column 4L + s */
    TOY_UNROLL8
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}

/* The pair panel of gemm.h's pack_pairs (gemm.c), the same slots: X's rows [0, rows) of
 * width, k in [0, kc), X[i][k] = x[k * ld + i] where k_major, else x[i * ld + k]. */
void ty_gemm_pack_pairs_avx2(const float *x, int64_t ld, bool k_major, int width, int rows, int64_t kc,
                             float *dst) {
    const int64_t kp = (kc + 1) / 2;
    if (k_major) {
        /* a pair's two k are two storage rows: one lane per row of X */
        for (int64_t s = 0; s < kp; s++) {
            const float *even = x + 2 * s * ld;
            const bool has_odd = 2 * s + 1 < kc;
            for (int i0 = 0; i0 < width; i0 += 8) {
                const int n = rows - i0 < 0 ? 0 : rows - i0;
                const __m256i e = n ? bf16_daz8(load8(even + i0, n)) : _mm256_setzero_si256();
                const __m256i o = n && has_odd ? bf16_daz8(load8(even + ld + i0, n)) : _mm256_setzero_si256();
                store8(dst + s * width + i0, _mm256_or_si256(e, _mm256_slli_epi32(o, 16)), width - i0);
            }
        }
        return;
    }
    /* 8 rows by 8 pairs at a time: each row's 16 floats to 8 pairs, then an 8 x 8
     * transpose puts each pair's 8 rows in one vector */
    for (int i0 = 0; i0 < width; i0 += 8)
        for (int64_t s0 = 0; s0 < kp; s0 += 8) {
            const int nk = kc - 2 * s0 < 16 ? (int)(kc - 2 * s0) : 16;
            __m256 r[8];
            TOY_UNROLL8
            for (int i = 0; i < 8; i++) {
                if (i0 + i >= rows) {
                    r[i] = _mm256_setzero_ps();
                    continue;
                }
                const float *src = x + (i0 + i) * ld + 2 * s0;
                const __m256i lo = bf16_daz8(load8(src, nk));
                const __m256i hi = nk > 8 ? bf16_daz8(load8(src + 8, nk - 8)) : _mm256_setzero_si256();
                /* packus leaves lo's pairs of a 128-bit lane, then hi's; the permute puts
                 * the pairs in k order */
                const __m256i pairs = _mm256_packus_epi32(lo, hi);
                r[i] = _mm256_castsi256_ps(_mm256_permute4x64_epi64(pairs, _MM_SHUFFLE(3, 1, 2, 0)));
            }
            transpose8(r);
            const int ns = kp - s0 < 8 ? (int)(kp - s0) : 8;
            for (int s = 0; s < ns; s++) store8(dst + (s0 + s) * width + i0, _mm256_castps_si256(r[s]), width - i0);
        }
}

const ty_gemm_kernel *ty_gemm_kernel_avx2(void) {
    static const ty_gemm_kernel k = {"avx2", MR, NR, kernel_6x16, NULL, NULL, false, NULL};
    return &k;
}
TOY_TARGET_END
#endif
