/* test_gemm.c — the matrix products (gemm.h): every micro-kernel this CPU can run, on
 * 1-3 threads, gives exactly the bits of ty_gemm_ref (one fused multiply-add chain per
 * element, in k order) for every transpose combination, with and without accumulation,
 * on shapes that are not multiples of any tile or block size; a product split over K
 * into accumulating calls equals the product in one call. The same with the operands
 * rounded to BF16 or F16 (mixed precision), against ty_gemm_ref_rounded; rounding
 * changes the result (it is not silently skipped). */
#include <math.h>

#include "cpu.h"
#include "gemm.h"
#include "quant.h"
#include "test.h"

static uint64_t rng_state = 0x1234567;
static float frand(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng_state >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
}

static void fill(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = frand();
}

/* the first element whose bits differ, or -1 */
static int64_t first_diff(const float *a, const float *b, int64_t m, int64_t n, int64_t ld) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            if (float_bits(a[i * ld + j]) != float_bits(b[i * ld + j])) return i * ld + j;
    return -1;
}

static void check_shape(ty_gemm *g, const char *isa, int round, int64_t m, int64_t n, int64_t k, bool ta,
                        bool tb, bool acc) {
    /* leading dimensions larger than the rows, so strides are exercised */
    const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
    const int64_t rows_a = ta ? k : m, rows_b = tb ? n : k;
    float *a = xmalloc((size_t)(rows_a * lda) * sizeof *a);
    float *b = xmalloc((size_t)(rows_b * ldb) * sizeof *b);
    float *c = xmalloc((size_t)(m * ldc) * sizeof *c);
    float *ref = xmalloc((size_t)(m * ldc) * sizeof *ref);
    fill(a, rows_a * lda);
    fill(b, rows_b * ldb);
    fill(c, m * ldc);
    memcpy(ref, c, (size_t)(m * ldc) * sizeof *c);
    float *c_start = xmalloc((size_t)(m * ldc) * sizeof *c_start);
    memcpy(c_start, c, (size_t)(m * ldc) * sizeof *c);
    ty_gemm_args p = {ta, tb, acc, m, n, k, a, lda, b, ldb, c, ldc, NULL, NULL};
    ty_gemm_run(g, &p);
    p.c = ref;
    ty_gemm_ref_rounded(&p, round);
    int64_t d = first_diff(c, ref, m, n, ldc);
    CHECK_MSG(d < 0, "%s (operands %d) m=%lld n=%lld k=%lld ta=%d tb=%d acc=%d: element %lld is %.9g, ref %.9g",
              isa, round, (long long)m, (long long)n, (long long)k, ta, tb, acc, (long long)d,
              d < 0 ? 0.0 : c[d], d < 0 ? 0.0 : ref[d]);
    /* the padding columns of C are never written */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < ldc; j++) CHECK(float_bits(c[i * ldc + j]) == float_bits(ref[i * ldc + j]));
    /* op(B) packed once beforehand, then read by a product on the pool and by one on a
     * single thread, from the same C: the same bits as the product above */
    const size_t packed_floats = ty_gemm_packed_b_floats(g, k, n);
    if (k > 0 && packed_floats) {
        float *packed = aligned_alloc(64, (packed_floats * sizeof(float) + 63) / 64 * 64);
        float *c2 = xmalloc((size_t)(m * ldc) * sizeof *c2);
        ty_gemm_pack_b(g, &p, packed);
        for (int one = 0; one < 2; one++) {
            memcpy(c2, c_start, (size_t)(m * ldc) * sizeof *c2);
            ty_gemm_args pp = p;
            pp.c = c2;
            pp.b = NULL;
            pp.b_packed = packed;
            if (one) ty_gemm_run_1(g, 0, &pp);
            else ty_gemm_run(g, &pp);
            CHECK_MSG(first_diff(c2, c, m, n, ldc) < 0, "%s op(B) packed once%s m=%lld n=%lld k=%lld ta=%d tb=%d",
                      isa, one ? " (run_1)" : "", (long long)m, (long long)n, (long long)k, ta, tb);
        }
        /* op(A) packed once too (one input through several weights): alone, and with
         * op(B)'s panels */
        const size_t a_floats = ty_gemm_packed_a_floats(g, m, k);
        float *a_packed = a_floats ? aligned_alloc(64, (a_floats * sizeof(float) + 63) / 64 * 64) : NULL;
        CHECK_MSG(a_packed != NULL, "ty_gemm_packed_a_floats(%lld, %lld) = %zu", (long long)m, (long long)k, a_floats);
        if (a_packed) ty_gemm_pack_a(g, &p, a_packed);
        for (int v = 0; a_packed && v < 4; v++) {
            memcpy(c2, c_start, (size_t)(m * ldc) * sizeof *c2);
            ty_gemm_args pp = p;
            pp.c = c2;
            pp.a = NULL;
            pp.a_packed = a_packed;
            if (v & 1) {
                pp.b = NULL;
                pp.b_packed = packed;
            }
            if (v & 2) ty_gemm_run_1(g, 0, &pp);
            else ty_gemm_run(g, &pp);
            CHECK_MSG(first_diff(c2, c, m, n, ldc) < 0, "%s op(A)%s packed once%s m=%lld n=%lld k=%lld ta=%d tb=%d",
                      isa, v & 1 ? " and op(B)" : "", v & 2 ? " (run_1)" : "", (long long)m, (long long)n,
                      (long long)k, ta, tb);
        }
        /* the chunked product (operands past the whole product's buffer) */
        memcpy(c2, c_start, (size_t)(m * ldc) * sizeof *c2);
        ty_gemm_set_whole_max(g, 0);
        ty_gemm_args pc = p;
        pc.c = c2;
        ty_gemm_run(g, &pc);
        ty_gemm_set_whole_max(g, (size_t)4 << 20);
        CHECK_MSG(first_diff(c2, c, m, n, ldc) < 0, "%s chunked m=%lld n=%lld k=%lld ta=%d tb=%d", isa,
                  (long long)m, (long long)n, (long long)k, ta, tb);
        free(a_packed);
        free(c2);
        free(packed);
    }
    /* K in two accumulating calls: the same chains */
    if (k >= 2) {
        const int64_t k1 = k / 3 + 1;
        fill(c, m * ldc);
        memcpy(ref, c, (size_t)(m * ldc) * sizeof *c);
        ty_gemm_args p1 = {ta, tb, acc, m, n, k1, a, lda, b, ldb, c, ldc, NULL, NULL};
        ty_gemm_run(g, &p1);
        ty_gemm_args p2 = {ta, tb, true, m, n, k - k1, ta ? a + k1 * lda : a + k1, lda,
                            tb ? b + k1 : b + k1 * ldb, ldb, c, ldc, NULL, NULL};
        ty_gemm_run(g, &p2);
        p.c = ref;
        ty_gemm_run(g, &p);
        CHECK_MSG(first_diff(c, ref, m, n, ldc) < 0, "%s split K m=%lld n=%lld k=%lld", isa,
                  (long long)m, (long long)n, (long long)k);
    }
    free(a);
    free(b);
    free(c);
    free(c_start);
    free(ref);
}

typedef struct {
    const ty_gemm_kernel *k;
    int threads;
} tested_kernel;

int main(void) {
    /* each kernel on 1-3 threads; the scalar kernel's FMA build (the same source) on one */
    tested_kernel kernels[4] = {{ty_gemm_kernel_scalar(), 3}};
    int n_kernels = 1;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("fma")) kernels[n_kernels++] = (tested_kernel){ty_gemm_kernel_scalar_fma(), 1};
    if (ty_cpu_isa() >= TY_ISA_AVX2) kernels[n_kernels++] = (tested_kernel){ty_gemm_kernel_avx2(), 3};
    if (ty_cpu_isa() >= TY_ISA_AVX512) kernels[n_kernels++] = (tested_kernel){ty_gemm_kernel_avx512(), 3};
#endif
    if (strcmp(kernels[n_kernels - 1].k->isa, "avx512"))
        printf("kernels above %s are not tested: this CPU (or TOY_ISA) lacks them\n", kernels[n_kernels - 1].k->isa);
    static const int64_t shapes[][3] = {
        {1, 1, 1}, {1, 37, 5}, {13, 1, 9}, {12, 32, 256}, {25, 65, 257}, {7, 100, 600},
        {200, 33, 70}, {193, 515, 31}, {64, 64, 0}, {50, 1030, 3},
    };
    for (int ki = 0; ki < n_kernels; ki++)
        for (int nt = 1; nt <= kernels[ki].threads; nt++) {
            ty_pool *pool = ty_pool_new(nt);
            ty_gemm *g = ty_gemm_new(pool, kernels[ki].k);
            CHECK(pool && g);
            if (!pool || !g) return 1;
            static const int rounds[] = {TOY_TYPE_F32, TOY_TYPE_BF16, TOY_TYPE_F16};
            for (int r = 0; r < 3; r++) {
                ty_gemm_set_operand_type(g, rounds[r]);
                for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
                    for (int t = 0; t < 8; t++)
                        check_shape(g, kernels[ki].k->isa, rounds[r], shapes[s][0], shapes[s][1], shapes[s][2],
                                    t & 1, t & 2, t & 4);
            }
            ty_gemm_free(g);
            ty_pool_free(pool);
        }
    /* K = 0 without accumulation writes zeros */
    ty_gemm *g = ty_gemm_new(NULL, ty_cpu()->gemm());
    float c[6] = {1, 2, 3, 4, 5, 6}, a[1] = {0}, b[1] = {0};
    ty_gemm_args p = {false, false, false, 2, 3, 0, a, 1, b, 3, c, 3, NULL, NULL};
    ty_gemm_run(g, &p);
    for (int i = 0; i < 6; i++) CHECK(c[i] == 0.0f);
    /* BF16 operands: 1 + 2^-10 rounds to 1, so the product is 1, not 1 + 2^-10 */
    float one_plus[1] = {1.0f + 1.0f / 1024}, one[1] = {1.0f}, out[1];
    ty_gemm_args q = {false, false, false, 1, 1, 1, one_plus, 1, one, 1, out, 1, NULL, NULL};
    ty_gemm_set_operand_type(g, TOY_TYPE_BF16);
    ty_gemm_run(g, &q);
    CHECK(out[0] == 1.0f);
    ty_gemm_set_operand_type(g, TOY_TYPE_F16);
    ty_gemm_run(g, &q);
    CHECK(out[0] == one_plus[0]); /* F16 holds 10 mantissa bits */
    /* the fast rounding on every kind of value: random bit patterns (subnormals, F16's
     * subnormal range and overflow, ties), each multiplied by 1 against the definition */
    enum { NV = 1 << 16 };
    float *av = xmalloc(NV * sizeof *av), *got = xmalloc(NV * sizeof *got), *want = xmalloc(NV * sizeof *want);
    for (int i = 0; i < NV; i++) {
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t u = (uint32_t)(rng_state >> 32);
        if (i % 4 == 1) u = (u & 0x807fffffu) | (uint32_t)(0x33 + (i / 4) % 0x16) << 23; /* 2^-25 .. 2^-4 */
        if (i % 4 == 2) u = (u & 0x807fffffu) | (uint32_t)(0x8c + (i / 4) % 6) << 23;  /* 2^13 .. 2^18 */
        if (i % 4 == 3) u &= 0xffffe000u | (1u << 12);                                   /* F16 ties */
        memcpy(&av[i], &u, sizeof u);
    }
    for (int r = 0; r < 2; r++) {
        const int type = r ? TOY_TYPE_F16 : TOY_TYPE_BF16;
        ty_gemm_args q2 = {false, false, false, NV, 1, 1, av, 1, one, 1, got, 1, NULL, NULL};
        ty_gemm_set_operand_type(g, type);
        ty_gemm_run(g, &q2);
        q2.c = want;
        ty_gemm_ref_rounded(&q2, type);
        int bad = 0;
        for (int i = 0; i < NV && !bad; i++)
            if (float_bits(got[i]) != float_bits(want[i]) && !(isnan(got[i]) && isnan(want[i]))) {
                CHECK_MSG(0, "rounding %s of %a (bits %08x): %a, want %a", r ? "f16" : "bf16", av[i],
                          float_bits(av[i]), got[i], want[i]);
                bad = 1;
            }
    }
    free(av);
    free(got);
    free(want);
    ty_gemm_free(g);
    return test_finish("test_gemm");
}
