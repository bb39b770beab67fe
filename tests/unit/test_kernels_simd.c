/* test_kernels_simd.c — every SIMD kernel (AVX2, AVX-512) against the scalar reference,
 * bit for bit: kernels.c fixes one reduction shape, so vec_dot must return exactly the
 * scalar float (memcmp of the bits), vec_dot_tile exactly the scalar vec_dot of every
 * (weight row, activation row) pair, and quantize_act the scalar bytes.
 *
 * Inputs: Gaussian weights through toy's quantizer, random blocks (every bit pattern of
 * the quants, which reaches extremes no quantizer emits: Q8_0 -128, Q6_K scale -128,
 * IQ4_XS, which toy cannot quantize to), all-zero blocks, extreme fp16 scales (65504,
 * subnormal), max-magnitude quant bytes against max-magnitude activations (the
 * vpmaddubsw saturation corner), on rows of one block, of block counts that leave a
 * partial group of 8, and of the model widths 4096, 11008 and 14336.
 *
 * Only the instruction sets this CPU has (or TOY_ISA allows) are run; exit 77 when that
 * is none. */
#include "cpu.h"

#include <stdint.h>
#include <time.h>

#include "quant.h"
#include "test.h"
#include "test_inputs.h"
#include "vec_exp.h"

static const int weight_types[] = {
    TOY_TYPE_Q8_0, TOY_TYPE_Q4_0, TOY_TYPE_Q4_K, TOY_TYPE_Q6_K,   TOY_TYPE_Q5_K,
    TOY_TYPE_F16,  TOY_TYPE_BF16, TOY_TYPE_F32,  TOY_TYPE_Q5_0,   TOY_TYPE_Q4_1,
    TOY_TYPE_Q5_1, TOY_TYPE_Q2_K, TOY_TYPE_Q3_K, TOY_TYPE_IQ4_NL, TOY_TYPE_IQ4_XS,
};
#define N_TYPES (int)(sizeof weight_types / sizeof weight_types[0])

/* ---------------------------------------------------------------- inputs */

typedef enum {
    W_GAUSSIAN,   /* toy_quantize of N(0, 0.05^2) where toy can; random blocks otherwise */
    W_RANDOM,     /* random bits, small random fp16 factors */
    W_ZERO,       /* all-zero blocks / elements */
    W_BIG_SCALE,  /* random bits, every fp16 factor +-65504 */
    W_TINY_SCALE, /* random bits, every fp16 factor a subnormal half */
    W_MAX_QUANTS, /* every quant byte 0x00, 0xff, 0x80 or 0x7f: the extreme of each field */
    W_MODES
} weight_mode;

static const char *const weight_mode_name[W_MODES] = {"gaussian", "random",     "zero",
                                                      "big-scale", "tiny-scale", "max-quants"};

static ty_half factor(weight_mode mode, unsigned long long *rng) {
    const uint64_t r = test_rand_u64(rng);
    const uint16_t sign = (r & 1) ? 0x8000 : 0;
    switch (mode) {
    case W_BIG_SCALE: return (ty_half)(sign | 0x7bff); /* 65504 */
    case W_TINY_SCALE: return (ty_half)(sign | (1 + (r >> 8) % 0x3ff));
    default: return test_rand_half(rng, 0.02f);
    }
}

static void make_weights(int type, void *row, int64_t n, weight_mode mode,
                         unsigned long long *rng) {
    const size_t size = test_row_bytes(type, n);
    uint8_t *bytes = row;
    if (toy_type_block_size(type) == 1) {
        /* float rows: values through the type's own rounding; the extremes are large
         * (F16 65504, F32/BF16 1e18: products near 1e36, still finite) and tiny (BF16
         * products that underflow, where an FMA would differ from multiply-then-add) */
        float *x = xmalloc((size_t)n * sizeof *x);
        const float big = type == TOY_TYPE_F16 ? 65504.0f : 1e18f;
        const float tiny = type == TOY_TYPE_F16 ? 6e-8f : 1e-25f;
        for (int64_t i = 0; i < n; i++) {
            const float g = test_rand_normal(rng);
            switch (mode) {
            case W_ZERO: x[i] = 0.0f; break;
            case W_BIG_SCALE:
            case W_MAX_QUANTS: x[i] = g < 0 ? -big : big; break;
            case W_TINY_SCALE: x[i] = tiny * g; break;
            default: x[i] = 0.05f * g; break;
            }
        }
        CHECK(toy_quantize(type, x, row, n) == TOY_OK);
        free(x);
        return;
    }
    if (mode == W_ZERO) {
        memset(row, 0, size);
        return;
    }
    if (mode == W_GAUSSIAN && toy_type_can_quantize(type)) {
        float *x = xmalloc((size_t)n * sizeof *x);
        test_fill_normal(x, n, 0.05f, rng);
        CHECK(toy_quantize(type, x, row, n) == TOY_OK);
        free(x);
        return;
    }
    static const uint8_t extremes[4] = {0x00, 0xff, 0x80, 0x7f};
    for (size_t i = 0; i < size; i++) {
        const uint64_t r = test_rand_u64(rng);
        bytes[i] = mode == W_MAX_QUANTS ? extremes[r >> 62] : (uint8_t)(r >> 32);
    }
    size_t off[2];
    const int n_factors = test_block_factors(type, off);
    const size_t bsize = toy_type_size(type);
    for (int64_t b = 0; b < n / toy_type_block_size(type); b++)
        for (int f = 0; f < n_factors; f++) {
            const ty_half h = factor(mode == W_MAX_QUANTS ? W_RANDOM : mode, rng);
            memcpy(bytes + (size_t)b * bsize + off[f], &h, sizeof h);
        }
}

/* ---------------------------------------------------------------- checks */

typedef struct {
    const char *name;
    ty_isa isa;
    const ty_kernel *(*get)(int type);
} isa_entry;

typedef struct {
    int dots, tiles, acts; /* comparisons made */
    int failures;
} tally;

/* The activation bytes of the SIMD kernel's quantizer equal the scalar one's, over
 * buffers prefilled differently so that no byte is left unwritten. */
static void check_act(const isa_entry *isa, const ty_kernel *k, const ty_kernel *ref,
                      const float *x, int64_t n, const void *want, tally *t) {
    const size_t size = test_act_bytes(ref, n);
    uint8_t *got = xmalloc(size);
    for (int fill = 0; fill < 2; fill++) {
        memset(got, fill ? 0xff : 0x00, size);
        k->quantize_act(x, got, n);
        t->acts++;
        if (memcmp(got, want, size) != 0) {
            t->failures++;
            CHECK_MSG(0, "%s %s quantize_act n=%lld: bytes differ from scalar", isa->name,
                      toy_type_name(k->type), (long long)n);
        }
    }
    free(got);
}

static void check_dot(const isa_entry *isa, const ty_kernel *k, const ty_kernel *ref,
                      int64_t n, const void *w, const void *a, const char *what, tally *t) {
    const float want = ref->vec_dot(n, w, a);
    const float got = k->vec_dot(n, w, a);
    t->dots++;
    if (float_bits(got) != float_bits(want)) {
        t->failures++;
        CHECK_MSG(0, "%s %s vec_dot n=%lld %s: %.9g (0x%08x), scalar %.9g (0x%08x)", isa->name,
                  toy_type_name(k->type), (long long)n, what, got, float_bits(got), want,
                  float_bits(want));
    }
}

/* vec_dot over every length, weight mode and activation mode. */
static void test_vec_dot(const isa_entry *isa, const ty_kernel *k, const ty_kernel *ref,
                         unsigned long long *rng, tally *t) {
    static const int64_t lens_elem[] = {1, 7, 31, 32, 33, 100, 4096, 11008, 14336};
    static const int64_t blocks[] = {1, 7, 8, 9, 15, 17};
    static const int64_t widths[] = {4096, 11008, 14336};
    const int64_t bs = toy_type_block_size(k->type);
    int64_t lens[16];
    int n_lens = 0;
    if (bs == 1) {
        for (size_t i = 0; i < sizeof lens_elem / sizeof *lens_elem; i++) lens[n_lens++] = lens_elem[i];
    } else {
        for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++) lens[n_lens++] = blocks[i] * bs;
        for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) lens[n_lens++] = widths[i];
    }
    for (int l = 0; l < n_lens; l++) {
        const int64_t n = lens[l];
        void *w = xmalloc(test_row_bytes(k->type, n));
        void *a = xmalloc(test_act_bytes(ref, n));
        float *x = xmalloc((size_t)n * sizeof *x);
        for (int am = 0; am < A_MODES; am++) {
            test_fill_acts(x, n, (act_mode)am, rng);
            ref->quantize_act(x, a, n);
            check_act(isa, k, ref, x, n, a, t);
            for (int wm = 0; wm < W_MODES; wm++) {
                make_weights(k->type, w, n, (weight_mode)wm, rng);
                char what[64];
                snprintf(what, sizeof what, "weights %s, acts %s", weight_mode_name[wm],
                         test_act_mode_name((act_mode)am));
                check_dot(isa, k, ref, n, w, a, what, t);
            }
        }
        free(w);
        free(a);
        free(x);
    }
    /* n = 0 is an empty sum: +0.0f */
    char dummy[512] = {0};
    check_dot(isa, k, ref, 0, dummy, dummy, "empty row", t);
}

#define TILE_ROWS 26 /* weight rows: every n_w in 1..26 (AVX-512 F16: blocks of 24 rows, groups of 3) */

/* vec_dot_tile for every n_w in 1..26 and n_a in 1..TOY_TILE_MAX, with strides that are
 * not the row size: weight and activation rows padded by three times their field
 * alignment (rows stay as aligned as a GGUF row of that type may be: 2 bytes, 4 for
 * F32 and Q8_K's float d), an odd output stride. Every result must be the scalar
 * vec_dot of its pair, and no other output element may be written. */
static void test_tile(const isa_entry *isa, const ty_kernel *k, const ty_kernel *ref,
                      int64_t n, unsigned long long *rng, tally *t) {
    const size_t wrow = test_row_bytes(k->type, n), arow = test_act_bytes(ref, n);
    const size_t w_align = k->type == TOY_TYPE_F32 ? 4 : 2;
    const size_t a_align = ref->vec_dot_type == TOY_TYPE_F32 || ref->vec_dot_type == TOY_TYPE_F16 ||
                                   ref->vec_dot_type == TOY_TYPE_BF16 || ref->vec_dot_type == TOY_TYPE_Q8_K
                               ? 4
                               : 2;
    const size_t w_stride = wrow + 3 * w_align, a_stride = arow + 3 * a_align;
    const size_t y_stride = TILE_ROWS + 5; /* odd */
    uint8_t *w_rows[TILE_ROWS], *a_rows[TOY_TILE_MAX];
    uint8_t *w_tile = xmalloc(w_stride * TILE_ROWS), *a_tile = xmalloc(a_stride * TOY_TILE_MAX);
    float *x = xmalloc((size_t)n * sizeof *x);
    float want[TOY_TILE_MAX][TILE_ROWS];
    float y[TOY_TILE_MAX * (TILE_ROWS + 5)];

    for (int i = 0; i < TILE_ROWS; i++) {
        w_rows[i] = xmalloc(wrow);
        make_weights(k->type, w_rows[i], n, (weight_mode)(i % W_MODES), rng);
        memcpy(w_tile + (size_t)i * w_stride, w_rows[i], wrow);
    }
    for (int j = 0; j < TOY_TILE_MAX; j++) {
        a_rows[j] = xmalloc(arow);
        test_fill_acts(x, n, j == 5 ? A_MAX : j == 6 ? A_ZERO : j == 7 ? A_TINY : A_GAUSSIAN, rng);
        ref->quantize_act(x, a_rows[j], n);
        memcpy(a_tile + (size_t)j * a_stride, a_rows[j], arow);
    }
    for (int j = 0; j < TOY_TILE_MAX; j++)
        for (int i = 0; i < TILE_ROWS; i++) want[j][i] = ref->vec_dot(n, w_rows[i], a_rows[j]);

    const uint32_t sentinel = 0x7fc0dead; /* a NaN no kernel computes */
    int bad_shapes = 0;
    for (int n_w = 1; n_w <= TILE_ROWS; n_w++) {
        for (int n_a = 1; n_a <= TOY_TILE_MAX; n_a++) {
            for (size_t e = 0; e < sizeof y / sizeof *y; e++) memcpy(&y[e], &sentinel, 4);
            k->vec_dot_tile(n, w_tile, w_stride, n_w, a_tile, a_stride, n_a, y, y_stride);
            t->tiles++;
            int bad = 0;
            for (int j = 0; j < TOY_TILE_MAX; j++)
                for (size_t i = 0; i < y_stride; i++) {
                    const uint32_t got = float_bits(y[(size_t)j * y_stride + i]);
                    const int inside = j < n_a && i < (size_t)n_w;
                    const uint32_t expect = inside ? float_bits(want[j][i]) : sentinel;
                    if (got != expect) {
                        if (!bad && bad_shapes < 5)
                            fprintf(stderr,
                                    "%s %s tile n=%lld n_w=%d n_a=%d: y[%d][%zu] = 0x%08x, "
                                    "want 0x%08x (%s)\n",
                                    isa->name, toy_type_name(k->type), (long long)n, n_w, n_a,
                                    j, i, got, expect, inside ? "scalar vec_dot" : "untouched");
                        bad = 1;
                    }
                }
            bad_shapes += bad;
        }
    }
    if (bad_shapes) {
        t->failures += bad_shapes;
        CHECK_MSG(0, "%s %s tile n=%lld: %d of %d shapes wrong", isa->name,
                  toy_type_name(k->type), (long long)n, bad_shapes, TILE_ROWS * TOY_TILE_MAX);
    }
    for (int i = 0; i < TILE_ROWS; i++) free(w_rows[i]);
    for (int j = 0; j < TOY_TILE_MAX; j++) free(a_rows[j]);
    free(w_tile);
    free(a_tile);
    free(x);
}

/* The dispatched kernels carry the fastest activation quantizer of the CPU; its bytes
 * must be the scalar quantizer's for every row: Gaussian, exact halves after scaling
 * (the rounding-mode edge), zeros, a NaN and an infinity, ties for the largest |x|. */
static void test_dispatched_act(void) {
    static const int vdts[] = {TOY_TYPE_Q8_0, TOY_TYPE_Q8_1, TOY_TYPE_Q8_K, TOY_TYPE_F16, TOY_TYPE_BF16};
    static const int weights_of[] = {TOY_TYPE_Q8_0, TOY_TYPE_Q4_1, TOY_TYPE_Q4_K, TOY_TYPE_F16, TOY_TYPE_BF16};
    const int64_t n = 1024;
    float *x = xmalloc((size_t)n * sizeof *x);
    unsigned long long rng = 77;
    int rows = 0;
    for (size_t v = 0; v < sizeof vdts / sizeof *vdts; v++) {
        const ty_kernel *k = ty_kernel_get(weights_of[v]), *ref = ty_kernel_scalar(weights_of[v]);
        CHECK_EQ(k->vec_dot_type, vdts[v]);
        size_t bytes = test_act_bytes(ref, n);
        uint8_t *a = xmalloc(bytes), *b = xmalloc(bytes);
        const int modes = vdts[v] == TOY_TYPE_F16 || vdts[v] == TOY_TYPE_BF16 ? 7 : 6;
        for (int mode = 0; mode < modes; mode++) {
            for (int rep = 0; rep < 50; rep++) {
                test_fill_normal(x, n, 3.0f, &rng);
                if (mode == 1) /* halves: amax 127 gives id 1 (Q8_0/Q8_1) */
                    for (int64_t i = 0; i < n; i++) x[i] = (i % 32 == 0) ? 127.0f : (float)((int)(test_rand_u64(&rng) % 254) - 127) * 0.5f;
                if (mode == 2) memset(x, 0, (size_t)n * sizeof *x);
                if (mode == 3) x[test_rand_u64(&rng) % n] = NAN;
                if (mode == 4) x[test_rand_u64(&rng) % n] = INFINITY;
                if (mode == 5) /* equal magnitudes of both signs: the first one's sign wins */
                    for (int64_t i = 0; i < n; i += 7) x[i] = (i / 7) % 2 ? 9.0f : -9.0f;
                if (mode == 6) { /* F16's and BF16's edges: subnormals, ties, overflow, NaN payloads */
                    static const uint32_t edges[] = {0x33000000, 0x33000001, 0x33c00000, 0x38800000, 0x387fe000,
                                                     0x477fe000, 0x477fefff, 0x477ff000, 0x3f801000, 0x3f803000,
                                                     0x7f800001, 0xffc12345, 0x80000000, 0x00000001,
                                                     0x3f808000, 0x3f818000, 0x7f7fffff, 0x7f7f8000,
                                                     0x00008000, 0x7fbfffff};
                    for (size_t e = 0; e < sizeof edges / sizeof *edges; e++) {
                        const uint32_t bits = edges[e] ^ (rep % 2 ? 0x80000000u : 0);
                        memcpy(&x[test_rand_u64(&rng) % n], &bits, sizeof bits);
                    }
                }
                memset(a, 0xAA, bytes);
                memset(b, 0x55, bytes);
                k->quantize_act(x, a, n);
                ref->quantize_act(x, b, n);
                CHECK_MSG(!memcmp(a, b, bytes), "dispatched %s quantizer differs (mode %d)",
                          toy_type_name(vdts[v]), mode);
                rows++;
            }
        }
        free(a);
        free(b);
    }
    printf("dispatched activation quantizers (%s): %d rows byte-identical to scalar\n",
           ty_isa_name(ty_cpu_isa()), rows);
    free(x);
}

#if defined(__x86_64__)
/* The vector exponentials (vec_exp.h) give ty_exp_nonpos's bits: one vector at a time,
 * N at once (5, every lane different), and on 16 lanes, over -inf, NaN, 0, the -87 edge
 * and values spread over [-100, 0]: EXP_INPUTS in all, whole groups of 40 and of 16. */
#define EXP_INPUTS 4160
TOY_AVX2 static int exp_avx2_differs(const float *x, int n) {
    int bad = 0;
    for (int i = 0; i + 40 <= n; i += 40) {
        __m256 v[5];
        for (int k = 0; k < 5; k++) v[k] = _mm256_loadu_ps(x + i + 8 * k);
        float one[8], many[40];
        _mm256_storeu_ps(one, ty_exp8_nonpos(v[0]));
        ty_exp8x_nonpos(5, v);
        for (int k = 0; k < 5; k++) _mm256_storeu_ps(many + 8 * k, v[k]);
        for (int k = 0; k < 40; k++) {
            const uint32_t want = float_bits(ty_exp_nonpos(x[i + k]));
            bad += float_bits(many[k]) != want || (k < 8 && float_bits(one[k]) != want);
        }
    }
    return bad;
}
TOY_AVX512 static int exp_avx512_differs(const float *x, int n) {
    int bad = 0;
    for (int i = 0; i + 16 <= n; i += 16) {
        float got[16];
        _mm512_storeu_ps(got, ty_exp16_nonpos(_mm512_loadu_ps(x + i)));
        for (int k = 0; k < 16; k++) bad += float_bits(got[k]) != float_bits(ty_exp_nonpos(x[i + k]));
    }
    return bad;
}
static void test_exp(ty_isa have) {
    static float x[EXP_INPUTS];
    const float edge[] = {-INFINITY, NAN, 0.0f, -0.0f, -87.0f, -87.00001f, -86.99999f, -1e-30f, -88.7f, -1.0f};
    unsigned long long rng = 0xe8;
    for (int i = 0; i < EXP_INPUTS; i++)
        x[i] = i < 10 ? edge[i] : -100.0f * (float)(test_rand_u64(&rng) % 1000001) / 1e6f;
    const int n = EXP_INPUTS;
    const int bad2 = exp_avx2_differs(x, n);
    CHECK_MSG(bad2 == 0, "avx2 exp: %d lanes differ from ty_exp_nonpos", bad2);
    printf("exp     avx2: %d inputs, %d differ from scalar\n", n, bad2);
    if (have >= TY_ISA_AVX512) {
        const int bad5 = exp_avx512_differs(x, n);
        CHECK_MSG(bad5 == 0, "avx512 exp: %d lanes differ from ty_exp_nonpos", bad5);
        printf("exp     avx512: %d inputs, %d differ from scalar\n", n, bad5);
    } else {
        printf("exp     avx512 (not on this CPU: skipped)\n");
    }
}

/* The elementwise operations of each instruction set against the scalar ones, bit for
 * bit: n = 77 covers whole vectors of 8 and 16 and a tail. */
typedef struct {
    const char *name;
    ty_isa isa;
    float (*row_exp)(const float *x, float *y, int64_t n, float m, float scale);
    ty_swiglu_fn swiglu;
    ty_swiglu_bwd_fn swiglu_bwd;
} elementwise_entry;

static void test_elementwise(ty_isa have) {
    enum { N = 77 };
    float g[N], u[N], dy[N], ref[N], got[N], dg_ref[N], du_ref[N], dg[N], du[N];
    unsigned long long rng = 0x5e1;
    for (int i = 0; i < N; i++) {
        g[i] = 24.0f * ((float)(test_rand_u64(&rng) % 100001) / 1e5f - 0.5f);
        u[i] = (float)(test_rand_u64(&rng) % 2001) / 1e3f - 1.0f;
        dy[i] = (float)(test_rand_u64(&rng) % 2001) / 1e3f - 1.0f;
    }
    g[0] = 0.0f, g[1] = -0.0f, g[2] = -90.0f, g[3] = 90.0f;
    const elementwise_entry sets[] = {
        {"avx2", TY_ISA_AVX2, ty_row_exp_avx2, ty_swiglu_avx2, ty_swiglu_bwd_avx2},
        {"avx512", TY_ISA_AVX512, ty_row_exp_avx512, ty_swiglu_avx512, ty_swiglu_bwd_avx512},
    };
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        const elementwise_entry *e = &sets[s];
        if (have < e->isa) {
            printf("elementwise %s (not on this CPU: skipped)\n", e->name);
            continue;
        }
        int bad = 0;
        ty_swiglu_scalar(ref, g, u, N);
        e->swiglu(got, g, u, N);
        for (int i = 0; i < N; i++) bad += float_bits(got[i]) != float_bits(ref[i]);
        CHECK_MSG(bad == 0, "%s swiglu: %d of %d differ from scalar", e->name, bad, N);
        for (int i = 0; i < N; i++) dg_ref[i] = dg[i] = du_ref[i] = du[i] = 0.25f;
        ty_swiglu_bwd_scalar(dg_ref, du_ref, dy, g, u, N);
        e->swiglu_bwd(dg, du, dy, g, u, N);
        int bad_bwd = 0;
        for (int i = 0; i < N; i++)
            bad_bwd += float_bits(dg[i]) != float_bits(dg_ref[i]) || float_bits(du[i]) != float_bits(du_ref[i]);
        CHECK_MSG(bad_bwd == 0, "%s swiglu backward: %d of %d differ from scalar", e->name, bad_bwd, N);
        const float sum_ref = ty_row_exp_scalar(u, ref, N, 1.0f, 0.5f), sum = e->row_exp(u, got, N, 1.0f, 0.5f);
        int bad_exp = float_bits(sum) != float_bits(sum_ref);
        for (int i = 0; i < N; i++) bad_exp += float_bits(got[i]) != float_bits(ref[i]);
        CHECK_MSG(bad_exp == 0, "%s row_exp: %d values differ from scalar", e->name, bad_exp);
        printf("elementwise %s: swiglu %d, backward %d, row_exp %d of %d differ from scalar\n", e->name, bad,
               bad_bwd, bad_exp, N);
    }
}
#endif

int main(void) {
    const ty_isa have = ty_cpu_isa();
    if (have == TY_ISA_SCALAR) {
        printf("SKIP: no SIMD instruction set on this CPU (or TOY_ISA=scalar)\n");
        return TEST_SKIP_CODE;
    }
    const isa_entry isas[] = {
        {"avx2", TY_ISA_AVX2, ty_kernel_avx2},
        {"avx512", TY_ISA_AVX512, ty_kernel_avx512},
    };
#if defined(__x86_64__)
    test_exp(have);
    test_elementwise(have);
#endif
    const clock_t start = clock();
    printf("%-7s %-7s %8s %7s %6s  %s\n", "isa", "type", "vec_dot", "tile", "act", "result");
    for (size_t s = 0; s < sizeof isas / sizeof *isas; s++) {
        const isa_entry *isa = &isas[s];
        if (have < isa->isa) {
            printf("%-7s (not on this CPU: skipped)\n", isa->name);
            continue;
        }
        for (int ti = 0; ti < N_TYPES; ti++) {
            const int type = weight_types[ti];
            const ty_kernel *k = isa->get(type);
            const ty_kernel *ref = ty_kernel_scalar(type);
            if (!k) {
                printf("%-7s %-7s %8s %7s %6s  scalar fallback\n", isa->name, toy_type_name(type),
                       "-", "-", "-");
                continue;
            }
            tally t = {0};
            const int before = test_failures;
            CHECK_EQ(k->type, type);
            CHECK_EQ(k->vec_dot_type, ref->vec_dot_type);
            CHECK(k->quantize_act != NULL && k->vec_dot != NULL);
            unsigned long long rng = 0x51d0 + (unsigned long long)type;
            test_vec_dot(isa, k, ref, &rng, &t);
            if (k->vec_dot_tile) {
                const int64_t bs = toy_type_block_size(type);
                /* one block; and a full group of 8 plus a partial one */
                test_tile(isa, k, ref, bs == 1 ? 7 : bs, &rng, &t);
                test_tile(isa, k, ref, bs == 1 ? 77 : bs == 32 ? 11 * bs : 9 * bs, &rng, &t);
                /* element rows of several column chunks (AVX-512 F16: 512) and a tail */
                if (bs == 1) test_tile(isa, k, ref, 1111, &rng, &t);
            }
            char tiles[16];
            snprintf(tiles, sizeof tiles, "%d", t.tiles);
            printf("%-7s %-7s %8d %7s %6d  %s\n", isa->name, toy_type_name(type), t.dots,
                   k->vec_dot_tile ? tiles : "none", t.acts,
                   test_failures == before ? "bit-identical" : "MISMATCH");
        }
    }
    printf("(vec_dot: rows of 1, 7, 8, 9, 15, 17 blocks and 4096, 11008, 14336 weights, %d "
           "weight x %d activation modes; tile: every n_w 1..%d x n_a 1..%d, padded strides)\n",
           W_MODES, A_MODES, TILE_ROWS, TOY_TILE_MAX);
    test_dispatched_act();
    printf("time %.2f s\n", (double)(clock() - start) / CLOCKS_PER_SEC);
    return test_finish("test_kernels_simd");
}
