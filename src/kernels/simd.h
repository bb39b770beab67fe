/* simd.h — how toy enables an instruction set, and the SIMD helpers its kernels share.
 *
 * One way to enable instructions: the target attribute. A function that uses an
 * instruction set is marked TOY_AVX2 (TOY_AVX512); a file of one
 * set's kernels puts all its functions under TOY_TARGET_BEGIN_xxx ... TOY_TARGET_END,
 * after its #includes. Each set's feature string is written here once. cpu.c runs them
 * only where the CPU has the set, so the binary still runs on any x86-64.
 *
 * One technique for variants: always-inline functions taking the type, width or
 * instruction set as a constant argument, so that the compiler folds their switches.
 */
#ifndef TOY_SIMD_H
#define TOY_SIMD_H

#define TOY_ALWAYS_INLINE static inline __attribute__((always_inline))
/* Loops over registers (blocks of a group, rows of a tile) are unrolled so that their
 * vectors stay in registers: gcc -O2 does not unroll them by itself; clang accepts the
 * gcc spelling. */
#define TOY_UNROLL8 _Pragma("GCC unroll 8")
#define TOY_UNROLL16 _Pragma("GCC unroll 16")

#if defined(__x86_64__)
#include <immintrin.h>

#define TOY_FEATURES_AVX2 "avx2,fma,f16c"
#define TOY_FEATURES_AVXVNNI "avxvnni,avx2,fma,f16c"
#define TOY_FEATURES_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TOY_FEATURES_AVX512_BF16 "avx512bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TOY_FEATURES_AMX "amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"

#define TOY_AVX2 __attribute__((target(TOY_FEATURES_AVX2)))
#define TOY_AVX512 __attribute__((target(TOY_FEATURES_AVX512)))

/* The target attribute on every function defined up to TOY_TARGET_END. */
#define TOY_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define TOY_TARGET_BEGIN(features) TOY_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define TOY_TARGET_END TOY_PRAGMA(clang attribute pop)
#else
#define TOY_TARGET_BEGIN(features) TOY_PRAGMA(GCC push_options) TOY_PRAGMA(GCC target(features))
#define TOY_TARGET_END TOY_PRAGMA(GCC pop_options)
#endif

/* The fixed pairwise combination of 8 float lanes (kernels.c, REDUCTION SHAPE): lane k
 * += lane k + 4, then k += k + 2, then 0 += 1; the result is lane 0. */
TOY_AVX2 TOY_ALWAYS_INLINE float ty_combine8(__m256 lane) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(lane), _mm256_extractf128_ps(lane, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The same after a first step k += k + 8 over 16 lanes. */
TOY_AVX512 TOY_ALWAYS_INLINE float ty_combine16(__m512 lane) {
    return ty_combine8(_mm256_add_ps(_mm512_castps512_ps256(lane), _mm512_extractf32x8_ps(lane, 1)));
}
#endif

#endif
