/* gemm_avx512_bf16.c — the pair kernel of gemm.h for CPUs with AVX512_BF16: a 12 x 32
 * tile of C in 24 registers, per pair of k two vectors of B's pairs, twelve broadcasts of
 * A's pairs and 24 vdpbf16ps (each lane: acc += a1 * b1, then += a0 * b0, FP32, DAZ in
 * and FTZ out). Its results are the BF16 dot definition of gemm.h only where the
 * instruction computes what Intel's SDM documents; hardware is reported to differ
 * (simd-everywhere/simde#1095: results generated on AMD EPYC 9454 fail under Intel SDE
 * and back), so cpu.c runs ty_gemm_bf16_probe first and chooses this kernel only where
 * it agrees. Compiled with AVX-512 BF16 enabled; called only where the CPU has it. */
#include <stdio.h>
#include <string.h>

#include "gemm.h"

#if defined(__x86_64__)
#include "simd.h"

TOY_TARGET_BEGIN(TOY_FEATURES_AVX512_BF16)

#define PAIRS_CONVERT_BF16 /* bf() by vcvtne2ps2bf16 */
#include "gemm_pairs_avx512.h"

#define MR 12
#define NR 32

/* 16 floats of C with their subnormals replaced by the zero of their sign: the
 * definition's ftz(C), whatever the instruction does with a subnormal accumulator */
static inline __attribute__((always_inline)) __m512 load_c_ftz(const float *c) {
    const __m512 x = _mm512_loadu_ps(c);
    const __mmask16 subnormal = _mm512_fpclass_ps_mask(x, 0x20);
    return _mm512_mask_and_ps(x, subnormal, x, _mm512_set1_ps(-0.0f));
}

/* A slot of a panel (two bf16) as a vector of 16 lanes of pairs. */
static inline __attribute__((always_inline)) __m512bh pairs16(__m512 x) {
    return (__m512bh)_mm512_castps_si512(x);
}

static void kernel_12x32_bf16(int64_t kp, const float *a, const float *b, float *c, int64_t ldc, bool load_c) {
    __m512 acc[MR][2];
    if (load_c) {
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            acc[i][0] = load_c_ftz(c + i * ldc);
            acc[i][1] = load_c_ftz(c + i * ldc + 16);
        }
    } else {
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < kp; p++, a += MR, b += NR) {
        const __m512bh b0 = pairs16(_mm512_load_ps(b)), b1 = pairs16(_mm512_load_ps(b + 16));
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            const __m512bh ai = pairs16(_mm512_set1_ps(a[i]));
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
}

void ty_gemm_pack_pairs_avx512_bf16(const float *x, int64_t ld, bool k_major, int width, int rows, int64_t kc,
                                    float *dst) {
    pack_pairs_avx512(x, ld, k_major, width, rows, kc, dst);
}

/* Floats of every kind that bf() treats apart: zeros, the subnormals below, in and above
 * the window that rounds up to FLT_MIN, FLT_MIN itself, ties to even either way,
 * values that round up to a new exponent and to infinity, infinities, quiet and
 * signalling NaNs with payloads high and low; each of either sign. */
static const uint32_t convert_probe[] = {
    0x00000000u, 0x00000001u, 0x00007fffu, 0x00008000u, 0x0000ffffu, 0x00400000u, 0x007f7fffu,
    0x007f8000u, 0x007fc000u, 0x007fffffu, 0x00800000u, 0x00808000u, 0x00818000u, 0x3f808000u,
    0x3f818000u, 0x3f80ffffu, 0x3fffffffu, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0x7f800000u,
    0x7f800001u, 0x7f810000u, 0x7fc00000u, 0x7fffffffu, 0x3f800000u, 0x40490fdbu, 0x0d800000u,
};

const char *ty_gemm_pack_pairs_probe(void) {
    enum { N = sizeof convert_probe / sizeof convert_probe[0], K = 2 * N };
    /* one row of K floats and its mirror with the signs flipped, packed across (rows) and
     * along (k_major) K, against bf() slot by slot */
    float x[2][K], t[K][2], packed[(K / 2) * 32], along[(K / 2) * 12];
    for (int k = 0; k < K; k++) {
        const uint32_t u = convert_probe[k % N] ^ (k >= N ? 0x80000000u : 0);
        memcpy(&x[0][k], &u, sizeof u);
        const uint32_t v = u ^ 0x80000000u;
        memcpy(&x[1][k], &v, sizeof v);
        t[k][0] = x[0][k], t[k][1] = x[1][k];
    }
    __asm__ volatile("" ::"r"(x), "r"(t) : "memory"); /* computed by the CPU, never folded */
    ty_gemm_pack_pairs_avx512_bf16(&x[0][0], K, false, 32, 2, K, packed);
    ty_gemm_pack_pairs_avx512_bf16(&t[0][0], 2, true, 12, 2, K, along);
    for (int s = 0; s < K / 2; s++)
        for (int i = 0; i < 2; i++) {
            const uint32_t want = ty_gemm_bf16_daz(x[i][2 * s]) | (uint32_t)ty_gemm_bf16_daz(x[i][2 * s + 1]) << 16;
            uint32_t got_rows, got_along;
            memcpy(&got_rows, &packed[s * 32 + i], sizeof got_rows);
            memcpy(&got_along, &along[s * 12 + i], sizeof got_along);
            if (got_rows != want || got_along != want) {
                static char differs[96];
                snprintf(differs, sizeof differs, "vcvtne2ps2bf16 of %08x gives %08x, not %08x",
                         convert_probe[(2 * s) % N], got_rows != want ? got_rows : got_along, want);
                return differs;
            }
        }
    return NULL;
}

/* The pair kernel, its panels packed by vcvtne2ps2bf16 where that instruction passes
 * ty_gemm_pack_pairs_probe, else in AVX2 integer arithmetic. */
const ty_gemm_kernel *ty_gemm_kernel_avx512_bf16(void) {
    static const ty_gemm_kernel k = {"avx512 bf16", MR, NR, kernel_12x32_bf16, NULL, NULL, true,
                                     ty_gemm_pack_pairs_avx512_bf16};
    static const ty_gemm_kernel k_avx2_packing = {"avx512 bf16 (avx2 packing)", MR, NR, kernel_12x32_bf16, NULL,
                                                  NULL, true, ty_gemm_pack_pairs_avx2};
    return ty_gemm_pack_pairs_probe() ? &k_avx2_packing : &k;
}

/* The probe's lanes: accumulator, A's pair, B's pair (odd element in the high half). */
#define PAIR(odd, even) ((uint32_t)(odd) << 16 | (uint32_t)(even))
#define BF_1 0x3f80u
#define BF_M1 0xbf80u
#define BF_2M30 0x3080u  /* 2^-30 */
#define BF_2M63 0x2000u
#define BF_2M64 0x1f80u
#define BF_2M70 0x1c80u
#define BF_2P100 0x7180u
#define BF_2P127 0x7f00u
#define BF_INF 0x7f80u
#define BF_M0 0x8000u

const char *ty_gemm_bf16_probe(void) {
    static const struct {
        float acc;
        uint32_t a, b;
        const char *tells; /* what a difference in this lane shows */
    } fixed[] = {
        /* order and rounding: odd first, each product rounded into acc: (1 - 1) + 2^-30 =
         * 2^-30 and (1 + 2^-30) - 1 = 0; even first gives 0 and 2^-30, one rounding of
         * the three terms 2^-30 twice, the products summed first 0 and 0 */
        {1.0f, PAIR(BF_M1, BF_2M30), PAIR(BF_1, BF_1), "order or products summed first"},
        {1.0f, PAIR(BF_2M30, BF_M1), PAIR(BF_1, BF_1), "order or one rounding"},
        /* FTZ: -2^-140 flushed to -0, and -0 + (-0 * 1) stays -0 */
        {0.0f, PAIR(BF_2M70 | 0x8000u, BF_M0), PAIR(BF_2M70, BF_1), "FTZ"},
        /* FTZ between the two steps: 2^-126 - 2^-127 is flushed, then + 2^-126 (unflushed:
         * 1.5 * 2^-126, as one rounding also gives) */
        {0x1p-126f, PAIR(BF_2M63 | 0x8000u, BF_2M63), PAIR(BF_2M64, BF_2M63), "FTZ between the products"},
        /* DAZ: subnormal bf16 inputs read as zero (else 2^-127 * 2^100 + 2^-133 * 2^127) */
        {0.0f, PAIR(0x0040u, 0x0001u), PAIR(BF_2P100, BF_2P127), "DAZ"},
        {0.0f, PAIR(BF_2P100, BF_1), PAIR(0x8040u, 0x0001u), "DAZ"},
        /* +0 * +0 into -0 is +0; infinity * 0 is NaN */
        {-0.0f, PAIR(0, 0), PAIR(0, 0), "signed zero"},
        {1.0f, PAIR(BF_INF, BF_1), PAIR(0, BF_1), "NaN"},
    };
    enum { LANES = 16, FIXED = sizeof fixed / sizeof fixed[0] };
    float acc[LANES], got[LANES];
    uint32_t a[LANES], b[LANES];
    uint32_t rng = 0x9e3779b9u;
    for (int i = 0; i < LANES; i++) {
        if (i < FIXED) {
            acc[i] = fixed[i].acc, a[i] = fixed[i].a, b[i] = fixed[i].b;
            continue;
        }
        /* the rest: bf16 values of either sign in [0.5, 2), acc in (-2, 2) */
        uint32_t r[3];
        for (int j = 0; j < 3; j++) r[j] = rng = rng * 1664525u + 1013904223u;
        a[i] = (r[0] & 0x80ff80ffu) | 0x3f003f00u;
        b[i] = (r[1] & 0x80ff80ffu) | 0x3f003f00u;
        acc[i] = (float)(int32_t)r[2] * 0x1p-30f;
    }
    __m512 v = _mm512_loadu_ps(acc);
    __m512i va = _mm512_loadu_si512(a), vb = _mm512_loadu_si512(b);
    __asm__ volatile("" : "+v"(v), "+v"(va), "+v"(vb)); /* computed by the CPU, never folded */
    v = _mm512_dpbf16_ps(v, (__m512bh)va, (__m512bh)vb);
    _mm512_storeu_ps(got, v);
    static char differs[256]; /* run once, inside cpu.c's choice */
    differs[0] = '\0';
    for (int i = 0; i < LANES; i++) {
        const float want = ty_gemm_dpbf16_pair(acc[i], a[i], b[i]);
        uint32_t gu, wu;
        memcpy(&gu, &got[i], sizeof gu);
        memcpy(&wu, &want, sizeof wu);
        const char *tells = i < FIXED ? fixed[i].tells : "random values";
        if (gu == wu || (got[i] != got[i] && want != want) || strstr(differs, tells)) continue;
        const size_t n = strlen(differs);
        snprintf(differs + n, sizeof differs - n, "%s%s", n ? ", " : "", tells);
    }
    return differs[0] ? differs : NULL;
}

TOY_TARGET_END
#endif
