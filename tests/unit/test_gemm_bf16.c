/* test_gemm_bf16.c — BF16 dot products (gemm.h's second definition, vdpbf16ps):
 * ty_gemm_ref_dpbf16 against a literal transcription of gemm.h's text on zeros of both
 * signs, subnormals, NaN, infinities, huge and tiny values, odd and even K; one step on
 * the probe's inputs gives the values the SDM's pseudocode gives; the packing's rounding
 * on every kind of value; the driver's pair path (packing in pairs, an odd K's pad,
 * slices, edge tiles, threads, ty_gemm_run_1) with the portable pair kernel, bit for bit
 * against the reference, on any CPU; the AVX2 pair packing (the AVX-512 BF16 kernel's)
 * with the definition in that kernel's 12 x 32 tile, where the CPU has AVX2. Where cpu.c
 * chose vdpbf16ps, the same for the AVX-512 BF16 kernel, and the probe agrees; elsewhere
 * a line says why it is skipped. */
#include <float.h>
#include <math.h>

#include "cpu.h"
#include "gemm.h"
#include "test.h"

static uint64_t rng_state = 0x5eed5eedULL;
static uint32_t rand_u32(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 32);
}

static float frand(void) { /* [-1, 1) */
    return (float)((double)(rand_u32() >> 8) / (double)(1u << 24)) * 2.0f - 1.0f;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static bool same(float a, float b) {
    return float_bits(a) == float_bits(b) || (isnan(a) && isnan(b));
}

/* ---------------------------------------------------------------- the literal text */

/* bf(x): round to nearest even at bit 16 (NaN kept, quiet), then a bf16 subnormal to
 * the zero of its sign; as a float */
static float lit_bf(float x) {
    uint32_t u = float_bits(x), hi = u >> 16;
    const uint32_t lo = u & 0xffffu;
    if (isnan(x)) {
        hi |= 0x40u;
    } else if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) {
        hi++; /* carries into the exponent, up to infinity */
    }
    if ((hi & 0x7f80u) == 0) hi &= 0x8000u;
    return from_bits(hi << 16);
}

static float lit_ftz(float x) {
    if (fabsf(x) < FLT_MIN) return signbit(x) ? -0.0f : 0.0f;
    return x;
}

static float lit_op_a(const ty_gemm_args *p, int64_t i, int64_t k) {
    return p->trans_a ? p->a[k * p->lda + i] : p->a[i * p->lda + k];
}

static float lit_op_b(const ty_gemm_args *p, int64_t k, int64_t j) {
    return p->trans_b ? p->b[j * p->ldb + k] : p->b[k * p->ldb + j];
}

static void lit_gemm(const ty_gemm_args *p) {
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            float acc = p->accumulate ? p->c[i * p->ldc + j] : 0.0f;
            if (p->k > 0) acc = lit_ftz(acc);
            for (int64_t q = 0; q < (p->k + 1) / 2; q++) {
                const float a0 = lit_bf(lit_op_a(p, i, 2 * q)), b0 = lit_bf(lit_op_b(p, 2 * q, j));
                float a1 = 0.0f, b1 = 0.0f;
                if (2 * q + 1 < p->k) {
                    a1 = lit_bf(lit_op_a(p, i, 2 * q + 1));
                    b1 = lit_bf(lit_op_b(p, 2 * q + 1, j));
                }
                acc = lit_ftz(fmaf(a1, b1, acc));
                acc = lit_ftz(fmaf(a0, b0, acc));
            }
            p->c[i * p->ldc + j] = acc;
        }
}

/* ---------------------------------------------------------------- inputs */

/* the values where the definition has something to say */
static float tricky(void) {
    static const float pool[] = {
        0.0f, -0.0f, 1e-40f, -3e-41f, 0x1p-126f, -0x1p-126f, 0x1.fffffep-127f /* rounds up to FLT_MIN */,
        0x1.01p-127f /* a bf16 subnormal after rounding */, 1.0f + 0x1p-8f /* a tie: to 1 */,
        1.0f + 0x3p-8f /* a tie: up */, 0x1p-64f, -0x1.8p-63f, 0x1p-70f, 3.4e38f /* rounds to infinity */,
        -1e38f, INFINITY, -INFINITY, NAN, 1.0f, -2.5f, 0x1p100f};
    const uint32_t r = rand_u32();
    return r % 3 ? pool[r / 3 % (sizeof pool / sizeof pool[0])] : frand();
}

/* mostly [-1, 1), with tiny products (FTZ), subnormals (DAZ) and zeros, no NaN or
 * infinity: every output element stays informative */
static float mixed(void) {
    const uint32_t r = rand_u32() % 16;
    if (r == 0) return frand() * 0x1p-63f;
    if (r == 1) return frand() * 0x1p-128f;
    if (r == 2) return 0.0f;
    if (r == 3) return -0.0f;
    return frand();
}

typedef struct {
    float *a, *b, *c, *want;
    int64_t lda, ldb, ldc;
} operands;

static operands make(int64_t m, int64_t n, int64_t k, bool ta, bool tb, float (*gen)(void)) {
    operands o = {NULL, NULL, NULL, NULL, (ta ? m : k) + 3, (tb ? k : n) + 5, n + 7};
    const int64_t na = (ta ? k : m) * o.lda, nb = (tb ? n : k) * o.ldb, nc = m * o.ldc;
    o.a = xmalloc((size_t)(na + 1) * sizeof *o.a);
    o.b = xmalloc((size_t)(nb + 1) * sizeof *o.b);
    o.c = xmalloc((size_t)(nc + 1) * sizeof *o.c);
    o.want = xmalloc((size_t)(nc + 1) * sizeof *o.want);
    for (int64_t i = 0; i < na; i++) o.a[i] = gen();
    for (int64_t i = 0; i < nb; i++) o.b[i] = gen();
    for (int64_t i = 0; i < nc; i++) o.c[i] = gen();
    memcpy(o.want, o.c, (size_t)nc * sizeof *o.c);
    return o;
}

static void release(operands *o) {
    free(o->a);
    free(o->b);
    free(o->c);
    free(o->want);
}

/* the first element of C (padding columns included) whose bits differ, or -1 */
static int64_t first_diff(const float *got, const float *want, int64_t m, int64_t ldc) {
    for (int64_t i = 0; i < m * ldc; i++)
        if (!same(got[i], want[i])) return i;
    return -1;
}

/* ---------------------------------------------------------------- checks */

/* ty_gemm_ref_dpbf16 is the text of gemm.h */
static void check_reference(void) {
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 2, 2}, {4, 5, 7}, {2, 3, 8}, {5, 4, 33}, {1, 1, 0}};
    int n = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 8; t++)
            for (int rep = 0; rep < 20; rep++) {
                const int64_t m = shapes[s][0], nn = shapes[s][1], k = shapes[s][2];
                operands o = make(m, nn, k, t & 1, t & 2, tricky);
                ty_gemm_args p = {t & 1, t & 2, t & 4, m, nn, k, o.a, o.lda, o.b, o.ldb, o.c, o.ldc, NULL, NULL};
                ty_gemm_ref_dpbf16(&p);
                p.c = o.want;
                lit_gemm(&p);
                const int64_t d = first_diff(o.c, o.want, m, o.ldc);
                CHECK_MSG(d < 0, "ref_dpbf16 m=%lld n=%lld k=%lld t=%d: element %lld is %a, the text gives %a",
                          (long long)m, (long long)nn, (long long)k, t, (long long)d, d < 0 ? 0.0 : o.c[d],
                          d < 0 ? 0.0 : o.want[d]);
                release(&o);
                n++;
            }
    CHECK(n == 6 * 8 * 20);
}

/* One step on the probe's lanes (gemm_avx512_bf16.c) gives what the SDM's pseudocode
 * gives: the odd product first, two roundings, FTZ out, DAZ in. */
static void check_pair_step(void) {
    const uint32_t one = 0x3f80u, m_one = 0xbf80u, p2m30 = 0x3080u;
#define PAIR(odd, even) ((uint32_t)(odd) << 16 | (uint32_t)(even))
    CHECK(same(ty_gemm_dpbf16_pair(1.0f, PAIR(m_one, p2m30), PAIR(one, one)), 0x1p-30f)); /* (1 - 1) + 2^-30 */
    CHECK(same(ty_gemm_dpbf16_pair(1.0f, PAIR(p2m30, m_one), PAIR(one, one)), 0.0f));     /* (1 + 2^-30) - 1 */
    CHECK(same(ty_gemm_dpbf16_pair(0.0f, PAIR(0x9c80u, 0x8000u), PAIR(0x1c80u, one)), -0.0f)); /* -2^-140: FTZ */
    CHECK(same(ty_gemm_dpbf16_pair(0x1p-126f, PAIR(0xa000u, 0x2000u), PAIR(0x1f80u, 0x2000u)), 0x1p-126f));
    CHECK(same(ty_gemm_dpbf16_pair(0.0f, PAIR(0x0040u, 0x0001u), PAIR(0x7180u, 0x7f00u)), 0.0f)); /* DAZ */
    CHECK(same(ty_gemm_dpbf16_pair(-0.0f, 0, 0), 0.0f));
    CHECK(isnan(ty_gemm_dpbf16_pair(1.0f, PAIR(0x7f80u, one), PAIR(0, one))));
    CHECK(same(ty_gemm_dpbf16_pair(2.0f, PAIR(0x4040u, 0x3fc0u), PAIR(one, 0x4000u)), 8.0f)); /* 2 + 3 + 1.5 * 2 */
#undef PAIR
}

/* bf() of the definition and of the packing loops, on random bit patterns of every kind
 * (subnormals, values that round to them or to FLT_MIN, ties, overflow, NaN): the
 * packing through a product by 1 with the portable pair kernel */
static void check_rounding(void) {
    enum { NV = 1 << 16 };
    float *av = xmalloc(NV * sizeof *av), *got = xmalloc(NV * sizeof *got), *want = xmalloc(NV * sizeof *want);
    for (int i = 0; i < NV; i++) {
        uint32_t u = rand_u32();
        if (i % 4 == 1) u = (u & 0x807fffffu) | (uint32_t)(i / 4 % 3) << 23; /* 0, 2^-126, 2^-125 exponents */
        if (i % 4 == 2) u = (u & 0x807fffffu) | (uint32_t)(0xfe + i / 4 % 2) << 23; /* overflow, NaN */
        if (i % 4 == 3) u = (u & 0xffff0000u) | 0x8000u;                               /* ties */
        av[i] = from_bits(u);
    }
    int bad = 0;
    for (int i = 0; i < NV && bad < 3; i++) {
        const float def = from_bits((uint32_t)ty_gemm_bf16_daz(av[i]) << 16);
        if (!same(def, lit_bf(av[i]))) {
            CHECK_MSG(0, "bf(%a) (bits %08x) is %a, the text gives %a", av[i], float_bits(av[i]), def, lit_bf(av[i]));
            bad++;
        }
    }
    float one[1] = {1.0f};
    ty_gemm *g = ty_gemm_new(NULL, ty_gemm_kernel_scalar());
    /* A packed along K (a column) and across it (a row), by the loops, by AVX2, by
     * AVX-512 with bf() in integers and with vcvtne2ps2bf16, each where the CPU runs it */
    const struct {
        const char *name;
        ty_gemm_pack_pairs_fn pack;
        bool runs;
    } packers[] = {
        {"loops", NULL, true},
#if defined(__x86_64__)
        {"avx2", ty_gemm_pack_pairs_avx2, ty_cpu_isa() >= TY_ISA_AVX2},
        {"avx512", ty_gemm_pack_pairs_avx512, ty_cpu_isa() >= TY_ISA_AVX512},
        {"avx512 bf16", ty_gemm_pack_pairs_avx512_bf16, ty_cpu_gemm_bf16() != NULL},
#endif
    };
    ty_gemm_set_operand_type(g, TOY_TYPE_BF16);
    for (int t = 0; t < 2 * (int)(sizeof packers / sizeof packers[0]); t++) {
        if (!packers[t / 2].runs) continue;
        ty_gemm_kernel packing = *ty_gemm_kernel_bf16_scalar();
        packing.pack_pairs = packers[t / 2].pack;
        ty_gemm_set_bf16_dot(g, &packing);
        ty_gemm_args p = {t % 2, false, false, NV, 1, 1, av, t % 2 ? NV : 1, one, 1, got, 1, NULL, NULL};
        ty_gemm_run(g, &p);
        p.c = want;
        ty_gemm_ref_dpbf16(&p);
        for (int i = 0; i < NV && bad < 6; i++)
            if (!same(got[i], want[i]) || !same(want[i], lit_bf(av[i]) + 0.0f)) { /* -0 * 1 + 0 is +0 */
                CHECK_MSG(0, "packed bf(%a) (bits %08x, %s): product %a, ref %a", av[i], float_bits(av[i]),
                          packers[t / 2].name, got[i], want[i]);
                bad++;
            }
    }
    ty_gemm_free(g);
    free(av);
    free(got);
    free(want);
}

/* The AVX-512 BF16 kernel's tile, 12 x 32, computed as the definition: with AVX2
 * packing, everything of that kernel but its vdpbf16ps loop. */
static void kernel_12x32_definition(int64_t kp, const float *a, const float *b, float *c, int64_t ldc, bool load_c) {
    for (int i = 0; i < 12; i++)
        for (int j = 0; j < 32; j++) {
            float acc = load_c ? lit_ftz(c[i * ldc + j]) : 0.0f;
            for (int64_t q = 0; q < kp; q++) {
                uint32_t ap, bp;
                memcpy(&ap, &a[q * 12 + i], sizeof ap);
                memcpy(&bp, &b[q * 32 + j], sizeof bp);
                acc = ty_gemm_dpbf16_pair(acc, ap, bp);
            }
            c[i * ldc + j] = acc;
        }
}

static const int64_t shapes[][3] = {
    {1, 1, 1},    {1, 37, 5},    {13, 1, 9},   {12, 32, 256}, {25, 65, 257},  {7, 100, 600}, {11, 31, 2},
    {200, 33, 70}, {193, 515, 31}, {64, 64, 0}, {50, 1030, 3}, {24, 64, 512}, {97, 129, 301},
};

/* The product of `kernel` on pool threads (and with ty_gemm_run_1) against the
 * reference, for every shape, transpose and accumulate; a split over K at an even point
 * equals one call. Returns the number of products compared. */
static int check_kernel(const ty_gemm_kernel *kernel, int max_threads) {
    int n = 0;
    for (int nt = 1; nt <= max_threads; nt++) {
        ty_pool *pool = ty_pool_new(nt);
        ty_gemm *g = ty_gemm_new(pool, ty_gemm_kernel_scalar());
        CHECK(pool && g);
        if (!pool || !g) return n;
        ty_gemm_set_operand_type(g, TOY_TYPE_BF16);
        ty_gemm_set_bf16_dot(g, kernel);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int t = 0; t < 8; t++) {
                const int64_t m = shapes[s][0], nn = shapes[s][1], k = shapes[s][2];
                const bool ta = t & 1, tb = t & 2, acc = t & 4;
                operands o = make(m, nn, k, ta, tb, mixed);
                ty_gemm_args p = {ta, tb, acc, m, nn, k, o.a, o.lda, o.b, o.ldb, o.c, o.ldc, NULL, NULL};
                const bool single = (s + t) % 2 == 1;
                float *c0 = xmalloc((size_t)(m * o.ldc + 1) * sizeof *c0);
                memcpy(c0, o.c, (size_t)(m * o.ldc) * sizeof *c0);
                if (single) ty_gemm_run_1(g, 0, &p);
                else ty_gemm_run(g, &p);
                p.c = o.want;
                ty_gemm_ref_dpbf16(&p);
                int64_t d = first_diff(o.c, o.want, m, o.ldc);
                CHECK_MSG(d < 0,
                          "%s, %d threads%s, m=%lld n=%lld k=%lld ta=%d tb=%d acc=%d: element %lld is %a, ref %a",
                          kernel->isa, nt, single ? " (run_1)" : "", (long long)m, (long long)nn, (long long)k, ta, tb,
                          acc, (long long)d, d < 0 ? 0.0 : o.c[d], d < 0 ? 0.0 : o.want[d]);
                n++;
                /* op(B) packed once beforehand (a weight across micro-batches): the same bits */
                const size_t packed_floats = ty_gemm_packed_b_floats(g, k, nn);
                float *packed = packed_floats ? aligned_alloc(64, (packed_floats * sizeof *packed + 63) / 64 * 64) : NULL;
                if (k > 0 && packed) {
                    float *c2 = xmalloc((size_t)(m * o.ldc + 1) * sizeof *c2);
                    memcpy(c2, c0, (size_t)(m * o.ldc) * sizeof *c2);
                    ty_gemm_pack_b(g, &p, packed);
                    ty_gemm_args pp = p;
                    pp.c = c2;
                    pp.b = NULL; /* not read */
                    pp.b_packed = packed;
                    if (single) ty_gemm_run_1(g, 0, &pp);
                    else ty_gemm_run(g, &pp);
                    d = first_diff(c2, o.want, m, o.ldc);
                    CHECK_MSG(d < 0, "%s, op(B) packed once, m=%lld n=%lld k=%lld ta=%d tb=%d acc=%d: element %lld",
                              kernel->isa, (long long)m, (long long)nn, (long long)k, ta, tb, acc, (long long)d);
                    /* op(A) packed once too, with op(B)'s panels or without */
                    const size_t a_floats = ty_gemm_packed_a_floats(g, m, k);
                    float *a_packed = a_floats ? aligned_alloc(64, (a_floats * sizeof(float) + 63) / 64 * 64) : NULL;
                    CHECK(a_packed != NULL);
                    if (a_packed) ty_gemm_pack_a(g, &p, a_packed);
                    for (int v = 0; a_packed && v < 2; v++) {
                        memcpy(c2, c0, (size_t)(m * o.ldc) * sizeof *c2);
                        pp = p;
                        pp.c = c2;
                        pp.a = NULL;
                        pp.a_packed = a_packed;
                        if (v) {
                            pp.b = NULL;
                            pp.b_packed = packed;
                        }
                        if (single) ty_gemm_run_1(g, 0, &pp);
                        else ty_gemm_run(g, &pp);
                        d = first_diff(c2, o.want, m, o.ldc);
                        CHECK_MSG(d < 0, "%s, op(A)%s packed once, m=%lld n=%lld k=%lld ta=%d tb=%d acc=%d: element %lld",
                                  kernel->isa, v ? " and op(B)" : "", (long long)m, (long long)nn, (long long)k, ta, tb,
                                  acc, (long long)d);
                    }
                    free(a_packed);
                    /* the chunked product (operands past the whole product's buffer) */
                    memcpy(c2, c0, (size_t)(m * o.ldc) * sizeof *c2);
                    ty_gemm_set_whole_max(g, 0);
                    pp = p;
                    pp.c = c2;
                    ty_gemm_run(g, &pp);
                    ty_gemm_set_whole_max(g, (size_t)4 << 20);
                    d = first_diff(c2, o.want, m, o.ldc);
                    CHECK_MSG(d < 0, "%s, chunked, m=%lld n=%lld k=%lld ta=%d tb=%d acc=%d: element %lld", kernel->isa,
                              (long long)m, (long long)nn, (long long)k, ta, tb, acc, (long long)d);
                    free(c2);
                }
                free(c0);
                free(packed);
                /* K in two accumulating calls split at an even point: the same pairs */
                if (k >= 4) {
                    const int64_t k1 = (k / 3 + 1) & ~(int64_t)1;
                    for (int64_t i = 0; i < m * o.ldc; i++) o.c[i] = o.want[i] = mixed();
                    ty_gemm_args p1 = {ta, tb, acc, m, nn, k1, o.a, o.lda, o.b, o.ldb, o.c, o.ldc, NULL, NULL};
                    ty_gemm_run(g, &p1);
                    ty_gemm_args p2 = {ta, tb, true, m, nn, k - k1, ta ? o.a + k1 * o.lda : o.a + k1, o.lda,
                                       tb ? o.b + k1 : o.b + k1 * o.ldb, o.ldb, o.c, o.ldc, NULL, NULL};
                    ty_gemm_run(g, &p2);
                    p.c = o.want;
                    ty_gemm_ref_dpbf16(&p);
                    d = first_diff(o.c, o.want, m, o.ldc);
                    CHECK_MSG(d < 0, "%s split K at %lld, m=%lld n=%lld k=%lld: element %lld is %a, ref %a",
                              kernel->isa, (long long)k1, (long long)m, (long long)nn, (long long)k, (long long)d,
                              d < 0 ? 0.0 : o.c[d], d < 0 ? 0.0 : o.want[d]);
                }
                release(&o);
            }
        /* NaN and infinities where they land: each makes its row or column NaN or infinite */
        operands o = make(16, 40, 9, false, false, mixed);
        o.a[3 * o.lda + 4] = NAN;
        o.a[5 * o.lda + 8] = INFINITY; /* the odd K's last element: paired with the pad */
        o.b[2 * o.ldb + 7] = -INFINITY;
        o.b[6 * o.ldb + 33] = 3.4e38f; /* infinity as bf16 */
        o.a[0 * o.lda + 6] = 1.0f;   /* so C[0][33] is infinite, not 0 * infinity */
        ty_gemm_args p = {false, false, true, 16, 40, 9, o.a, o.lda, o.b, o.ldb, o.c, o.ldc, NULL, NULL};
        ty_gemm_run(g, &p);
        p.c = o.want;
        ty_gemm_ref_dpbf16(&p);
        const int64_t d = first_diff(o.c, o.want, 16, o.ldc);
        CHECK_MSG(d < 0, "%s with NaN and infinities: element %lld is %a, ref %a", kernel->isa, (long long)d,
                  d < 0 ? 0.0 : o.c[d], d < 0 ? 0.0 : o.want[d]);
        CHECK(isnan(o.c[3 * o.ldc + 0]) && isinf(o.c[0 * o.ldc + 33]));
        release(&o);
        /* the operand type still chooses: F32 and F16 products ignore the pair kernel */
        for (int r = 0; r < 2; r++) {
            const int type = r ? TOY_TYPE_F16 : TOY_TYPE_F32;
            operands q = make(30, 40, 21, false, true, frand);
            ty_gemm_args pq = {false, true, false, 30, 40, 21, q.a, q.lda, q.b, q.ldb, q.c, q.ldc, NULL, NULL};
            ty_gemm_set_operand_type(g, type);
            ty_gemm_run(g, &pq);
            pq.c = q.want;
            ty_gemm_ref_rounded(&pq, type);
            CHECK_MSG(first_diff(q.c, q.want, 30, q.ldc) < 0, "%s: operand type %d with a pair kernel set",
                      kernel->isa, type);
            release(&q);
        }
        ty_gemm_free(g);
        ty_pool_free(pool);
    }
    return n;
}

int main(void) {
    check_reference();
    check_pair_step();
    check_rounding();
    CHECK_EQ(check_kernel(ty_gemm_kernel_bf16_scalar(), 3), 3 * 13 * 8);
#if defined(__x86_64__)
    if (ty_cpu_isa() >= TY_ISA_AVX2) {
        const ty_gemm_kernel tile_12x32 = {"12x32 definition, avx2 packing", 12, 32, kernel_12x32_definition,
                                           NULL, NULL, true, ty_gemm_pack_pairs_avx2};
        CHECK_EQ(check_kernel(&tile_12x32, 2), 2 * 13 * 8);
    } else {
        printf("the AVX2 pair packing is not tested: this CPU (or TOY_ISA) lacks AVX2\n");
    }
    /* the AVX-512 pair packing with bf() in integer instructions: the code vcvtne2ps2bf16
     * packs with, checked on CPUs without that instruction too */
    if (ty_cpu_isa() >= TY_ISA_AVX512) {
        const ty_gemm_kernel tile_12x32 = {"12x32 definition, avx512 packing", 12, 32, kernel_12x32_definition,
                                           NULL, NULL, true, ty_gemm_pack_pairs_avx512};
        CHECK_EQ(check_kernel(&tile_12x32, 2), 2 * 13 * 8);
    } else {
        printf("the AVX-512 pair packing is not tested: this CPU (or TOY_ISA) lacks AVX-512\n");
    }
#endif

    /* where toy runs vdpbf16ps, the kernel it runs */
    const char *state = toy_kernel_bf16_dot();
    const ty_gemm_kernel *dot = ty_cpu_gemm_bf16();
    CHECK_MSG(!strcmp(state, "vdpbf16ps") == (dot != NULL), "bf16 dot: %s, yet the pair kernel is %s", state,
              dot ? dot->isa : "none");
    const bool probe_differs = !strncmp(state, "off (probe differs: ", 20);
    CHECK(!strcmp(state, "vdpbf16ps") || !strcmp(state, "absent") || !strcmp(state, "off (kernels below avx512)") ||
          probe_differs);
    if (dot) {
        CHECK(dot->bf16_pairs && ty_gemm_bf16_probe() == NULL);
        /* its panels by vcvtne2ps2bf16 where that agrees with bf() (on every CPU seen so far) */
        const char *convert = ty_gemm_pack_pairs_probe();
        CHECK_MSG(dot->pack_pairs == (convert ? ty_gemm_pack_pairs_avx2 : ty_gemm_pack_pairs_avx512_bf16),
                  "pair packing of %s: %s", dot->isa, convert ? convert : "the probe agrees");
        if (convert) printf("vcvtne2ps2bf16 is not used: %s\n", convert);
        CHECK_EQ(check_kernel(dot, 2), 2 * 13 * 8);
    } else if (probe_differs) {
#if defined(__x86_64__)
        /* for the record: how far the kernel toy does not use is from the definition */
        operands o = make(97, 129, 301, false, true, mixed);
        ty_gemm *g = ty_gemm_new(NULL, ty_gemm_kernel_scalar());
        ty_gemm_set_bf16_dot(g, ty_gemm_kernel_avx512_bf16());
        ty_gemm_set_operand_type(g, TOY_TYPE_BF16);
        ty_gemm_args p = {false, true, false, 97, 129, 301, o.a, o.lda, o.b, o.ldb, o.c, o.ldc, NULL, NULL};
        ty_gemm_run(g, &p);
        p.c = o.want;
        ty_gemm_ref_dpbf16(&p);
        int n_diff = 0;
        for (int64_t i = 0; i < 97 * o.ldc; i++) n_diff += !same(o.c[i], o.want[i]);
        printf("the AVX-512 BF16 kernel is not used: this CPU's vdpbf16ps differs from gemm.h's definition "
               "(bf16 dot: %s); on a 97 x 129 x 301 product %d of %d elements differ\n", state, n_diff, 97 * 129);
        ty_gemm_free(g);
        release(&o);
#endif
    } else {
        printf("the AVX-512 BF16 kernel is not tested: %s\n",
               !strcmp(state, "absent") ? "no AVX512_BF16 on this CPU" : "TOY_ISA asks for less than avx512");
    }
    return test_finish("test_gemm_bf16");
}
