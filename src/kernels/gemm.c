/* gemm.c — the driver of the matrix products (gemm.h): operands packed into
 * micro-panels, the instruction set's micro-kernel on every mr x nr tile of C.
 *
 * The threaded product packs op(A) (mr-tall panels, k-major) and op(B) (nr-wide panels)
 * over all of K in slices of GEMM_KC, each panel once, in one job of the pool, into a
 * buffer all threads share; a second job runs the micro-kernels over tiles of
 * GEMM_TM x GEMM_TN, each tile through every slice in order, loading C after the first.
 * Operands too large for that buffer (GEMM_WHOLE_MAX) go in chunks of C (up to
 * GEMM_CHUNK rows by GEMM_CHUNK columns) and one slice at a time, two jobs each. The
 * single-thread product (ty_gemm_run_1) goes by blocks with its thread's own buffers.
 * Either way a tile's chains run k = 0..K-1 in order, whatever the sizes, threads or
 * ISA.
 *
 * A pair kernel (BF16 dot products) goes through the same driver: its panels hold one
 * 32-bit slot per pair of k instead of one float per k, so a slice of kc takes
 * ceil(kc / 2) slots per row (panel_steps), packed here with the definition's bf().
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "quant.h"

#define GEMM_KC 256    /* even: a slice never splits a pair of k */
#define GEMM_MC 192    /* rows of a single-thread block: a multiple of every mr (4, 6, 12) */
#define GEMM_NC 512    /* its columns: a multiple of every nr (4, 16, 32) */
#define GEMM_CHUNK 3072 /* rows and columns of a threaded chunk: a multiple of both */
#define GEMM_TM 96     /* a threaded tile: GEMM_TM rows (multiple of every mr) */
#define GEMM_TN 256    /* by GEMM_TN columns (multiple of every nr) */
#define GEMM_MAX_TILE (16 * 32)
#define GEMM_MAX_WIDTH 32 /* the widest panel: every mr and nr */
#define PANELS_PER_TASK 8
/* The most floats a threaded product packs at once to run as one job of tiles over all
 * of K (16 MiB: a training part's operands; the output matrix's gradient is chunked). */
#define GEMM_WHOLE_MAX ((size_t)4 << 20)

struct ty_gemm {
    ty_pool *pool;
    const ty_gemm_kernel *kern; /* the one products run: f32's, or bf16_dot's */
    const ty_gemm_kernel *f32, *bf16_dot;
    int operand_type;       /* TOY_TYPE_F32, or BF16 / F16: operands rounded when packed */
    int n_threads;
    float *pack;            /* per thread: A slice, B slice, an edge tile */
    size_t pack_per_thread; /* floats */
    float *shared_a, *shared_b; /* the chunked product's packed slices */
    float *whole;               /* the whole product's panels (grown on demand) */
    size_t whole_floats, whole_max;
};

/* ---------------------------------------------------------------- rounding */

/* x rounded to the operand type and back (F32: x), the conversions toy's type table
 * defines: round to nearest even, NaN kept. */
static inline float round_operand(float x, int type) {
    if (type == TOY_TYPE_BF16) return ty_bf16_to_fp32(ty_fp32_to_bf16(x));
    if (type == TOY_TYPE_F16) return ty_fp16_to_fp32(ty_fp32_to_fp16(x));
    return x;
}

/* The same results, fast and branch-free (so that the loops vectorize): on the bits,
 * round to nearest even at the type's last mantissa bit (BF16: 16 bits dropped; F16 in
 * its normal range: 13), F16's subnormals on their fixed step of 2^-24 (by adding and
 * subtracting 2^23 * 2^-24 in float, which rounds to nearest even), F16's overflow to
 * infinity; NaN and infinity kept. test_gemm checks them against round_operand on
 * every kind of value. */
static void round_panel_bf16(float *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &d[i], sizeof u);
        const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        u = (u & 0x7fffffffu) >= 0x7f800000u ? u : r;
        memcpy(&d[i], &u, sizeof u);
    }
}

static void round_panel_f16(float *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u, sub;
        memcpy(&u, &d[i], sizeof u);
        const uint32_t mag = u & 0x7fffffffu, sign = u & 0x80000000u;
        float a;
        memcpy(&a, &mag, sizeof a);
        const float s = (a * 16777216.0f + 8388608.0f) - 8388608.0f; /* |x| * 2^24, to an integer */
        const float y = s * (1.0f / 16777216.0f);
        memcpy(&sub, &y, sizeof sub);
        uint32_t m = (mag + 0xfffu + ((mag >> 13) & 1u)) & ~0x1fffu;
        m = m > 0x477fe000u ? 0x7f800000u : m;
        m = mag < 0x38800000u ? sub : m;
        u = mag >= 0x7f800000u ? u : (m | sign);
        memcpy(&d[i], &u, sizeof u);
    }
}

static void round_panel(float *d, int64_t n, int type) {
    if (type == TOY_TYPE_BF16) round_panel_bf16(d, n);
    else if (type == TOY_TYPE_F16) round_panel_f16(d, n);
}

static void choose_kernel(ty_gemm *g) {
    g->kern = g->operand_type == TOY_TYPE_BF16 && g->bf16_dot ? g->bf16_dot : g->f32;
}

void ty_gemm_set_operand_type(ty_gemm *g, int type) {
    g->operand_type = type == TOY_TYPE_BF16 || type == TOY_TYPE_F16 ? type : TOY_TYPE_F32;
    choose_kernel(g);
}

void ty_gemm_set_bf16_dot(ty_gemm *g, const ty_gemm_kernel *pairs) {
    g->bf16_dot = pairs && pairs->bf16_pairs ? pairs : NULL;
    choose_kernel(g);
}

void ty_gemm_ref_rounded(const ty_gemm_args *p, int type) {
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            float acc = p->accumulate ? p->c[i * p->ldc + j] : 0.0f;
            for (int64_t k = 0; k < p->k; k++) {
                const float a = p->trans_a ? p->a[k * p->lda + i] : p->a[i * p->lda + k];
                const float b = p->trans_b ? p->b[j * p->ldb + k] : p->b[k * p->ldb + j];
                acc = fmaf(round_operand(a, type), round_operand(b, type), acc);
            }
            p->c[i * p->ldc + j] = acc;
        }
}

/* ---------------------------------------------------------------- BF16 dot products */

uint16_t ty_gemm_bf16_daz(float x) {
    const uint16_t h = ty_fp32_to_bf16(x);
    return h & 0x7f80u ? h : (uint16_t)(h & 0x8000u);
}

/* bf16 bits to float, subnormals read as zero (DAZ) */
static float bf16_daz_to_fp32(uint32_t h) {
    const uint32_t u = (h & 0x7f80u ? h : h & 0x8000u) << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static float ftz(float x) {
    return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}

float ty_gemm_dpbf16_pair(float acc, uint32_t a, uint32_t b) {
    acc = ftz(fmaf(bf16_daz_to_fp32(a >> 16), bf16_daz_to_fp32(b >> 16), acc));
    return ftz(fmaf(bf16_daz_to_fp32(a & 0xffffu), bf16_daz_to_fp32(b & 0xffffu), acc));
}

/* opA[i][k] and opB[k][j] as bf(), zero at k == K (the pad of an odd K) */
static uint32_t ref_bf16_a(const ty_gemm_args *p, int64_t i, int64_t k) {
    return k == p->k ? 0 : ty_gemm_bf16_daz(p->trans_a ? p->a[k * p->lda + i] : p->a[i * p->lda + k]);
}

static uint32_t ref_bf16_b(const ty_gemm_args *p, int64_t k, int64_t j) {
    return k == p->k ? 0 : ty_gemm_bf16_daz(p->trans_b ? p->b[j * p->ldb + k] : p->b[k * p->ldb + j]);
}

void ty_gemm_ref_dpbf16(const ty_gemm_args *p) {
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            float acc = p->accumulate ? p->c[i * p->ldc + j] : 0.0f;
            if (p->k > 0) acc = ftz(acc); /* read with DAZ by the first step */
            for (int64_t k = 0; k < p->k; k += 2)
                acc = ty_gemm_dpbf16_pair(acc, ref_bf16_a(p, i, k) | ref_bf16_a(p, i, k + 1) << 16,
                                          ref_bf16_b(p, k, j) | ref_bf16_b(p, k + 1, j) << 16);
            p->c[i * p->ldc + j] = acc;
        }
}

/* The definition in a 4 x 4 tile of pairs: the driver's pair path on any CPU. */
static void kernel_bf16_scalar(int64_t kp, const float *a, const float *b, float *c, int64_t ldc,
                               bool load_c) {
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = load_c ? ftz(c[i * ldc + j]) : 0.0f;
    for (int64_t q = 0; q < kp; q++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                uint32_t ap, bp;
                memcpy(&ap, &a[q * 4 + i], sizeof ap);
                memcpy(&bp, &b[q * 4 + j], sizeof bp);
                acc[i][j] = ty_gemm_dpbf16_pair(acc[i][j], ap, bp);
            }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) c[i * ldc + j] = acc[i][j];
}

const ty_gemm_kernel *ty_gemm_kernel_bf16_scalar(void) {
    static const ty_gemm_kernel k = {"bf16 scalar", 4, 4, kernel_bf16_scalar, NULL, NULL, true, NULL};
    return &k;
}

/* ---------------------------------------------------------------- reference */

void ty_gemm_ref(const ty_gemm_args *p) {
    ty_gemm_ref_rounded(p, TOY_TYPE_F32); /* round_operand leaves F32 as it is */
}

/* A portable micro-kernel: 4 x 4 chains of fmaf. Compiled twice: as it is, and for CPUs
 * with FMA, where fmaf is one instruction rather than a call into libm (measured in
 * docs/performance.md). fmaf rounds once either way, so the bits are the same; cpu.c
 * chooses. */
static inline __attribute__((always_inline)) void kernel_4x4(int64_t kc, const float *a, const float *b,
                                                             float *c, int64_t ldc, bool load_c) {
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = load_c ? c[i * ldc + j] : 0.0f;
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[k * 4 + i], b[k * 4 + j], acc[i][j]);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) c[i * ldc + j] = acc[i][j];
}

static void kernel_scalar(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool load_c) {
    kernel_4x4(kc, a, b, c, ldc, load_c);
}

const ty_gemm_kernel *ty_gemm_kernel_scalar(void) {
    static const ty_gemm_kernel k = {"scalar", 4, 4, kernel_scalar, NULL, NULL, false, NULL};
    return &k;
}

#if defined(__x86_64__)
__attribute__((target("fma"))) static void kernel_scalar_fma(int64_t kc, const float *a, const float *b,
                                                             float *c, int64_t ldc, bool load_c) {
    kernel_4x4(kc, a, b, c, ldc, load_c);
}

const ty_gemm_kernel *ty_gemm_kernel_scalar_fma(void) {
    static const ty_gemm_kernel k = {"scalar", 4, 4, kernel_scalar_fma, NULL, NULL, false, NULL};
    return &k;
}
#endif

/* ---------------------------------------------------------------- engine */

ty_gemm *ty_gemm_new(ty_pool *pool, const ty_gemm_kernel *kernel) {
    ty_gemm *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->pool = pool;
    g->kern = g->f32 = kernel;
    g->operand_type = TOY_TYPE_F32;
    g->n_threads = pool ? ty_pool_size(pool) : 1;
    g->whole_max = GEMM_WHOLE_MAX;
    g->pack_per_thread = (size_t)(GEMM_MC + GEMM_NC) * GEMM_KC + GEMM_MAX_TILE + 16;
    g->pack = aligned_alloc(64, g->pack_per_thread * (size_t)g->n_threads * sizeof(float));
    const size_t shared = (size_t)GEMM_CHUNK * GEMM_KC * sizeof(float);
    g->shared_a = g->n_threads > 1 ? aligned_alloc(64, shared) : NULL;
    g->shared_b = g->n_threads > 1 ? aligned_alloc(64, shared) : NULL;
    if (!g->pack || (g->n_threads > 1 && (!g->shared_a || !g->shared_b))) {
        ty_gemm_free(g);
        return NULL;
    }
    return g;
}

void ty_gemm_free(ty_gemm *g) {
    if (!g) return;
    free(g->pack);
    free(g->shared_a);
    free(g->shared_b);
    free(g->whole);
    free(g);
}

ty_pool *ty_gemm_pool(const ty_gemm *g) { return g->pool; }
bool ty_gemm_runs_pairs(const ty_gemm *g) { return g->kern->bf16_pairs; }

/* ---------------------------------------------------------------- packing */

/* Rows [r0, r0 + rc) and columns [k0, k0 + kc) of a matrix X as panels of `width` rows,
 * panel q holding dst[q * kc * width + k * width + i] = X[r0 + q * width + i][k0 + k],
 * zero past row rc. X[i][k] is x[k * ld + i] where k_major, else x[i * ld + k] (then
 * pack_rows, where the kernel has one, transposes). op(A) is X for A's panels, op(B)^T
 * for B's. */
static void pack_panels(const float *x, int64_t ld, bool k_major, int width, ty_gemm_pack_fn pack_rows, int64_t r0,
                        int64_t rc, int64_t k0, int64_t kc, float *dst, int round) {
    float *const start = dst;
    for (int64_t q0 = 0; q0 < rc; q0 += width, dst += kc * width) {
        const int rows = rc - q0 < width ? (int)(rc - q0) : width;
        if (!k_major && pack_rows) {
            pack_rows(x + (r0 + q0) * ld + k0, ld, rows, kc, dst);
        } else if (k_major) {
            /* a panel's k-th column is contiguous in X's storage row k */
            const float *src = x + k0 * ld + r0 + q0;
            for (int64_t k = 0; k < kc; k++, src += ld) {
                float *d = dst + k * width;
                memcpy(d, src, (size_t)rows * sizeof *d);
                for (int i = rows; i < width; i++) d[i] = 0.0f;
            }
        } else {
            for (int i = 0; i < width; i++) {
                if (i >= rows) {
                    for (int64_t k = 0; k < kc; k++) dst[k * width + i] = 0.0f;
                    continue;
                }
                const float *src = x + (r0 + q0 + i) * ld + k0;
                for (int64_t k = 0; k < kc; k++) dst[k * width + i] = src[k];
            }
        }
    }
    round_panel(start, (dst - start), round);
}

/* ty_gemm_bf16_daz, inline for the packing loops (test_gemm checks them equal on every
 * kind of value) */
static inline uint32_t bf16_pack(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t h = (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 64u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return h & 0x7f80u ? h : h & 0x8000u;
}

/* The slots a panel row takes for a slice of kc: one per k, or one per pair of k. */
static int64_t panel_steps(const ty_gemm_kernel *kern, int64_t kc) {
    return kern->bf16_pairs ? (kc + 1) / 2 : kc;
}

/* pack_panels for a pair kernel: panel q holding, in slot dst[q * kp * width + s * width
 * + i] (kp = ceil(kc / 2)), bf(X[r][k0 + 2s]) | bf(X[r][k0 + 2s + 1]) << 16 for row r =
 * r0 + q * width + i; zero past row rc and past column kc. Each panel by the kernel's
 * `pack` where it has one, else by these loops (the definition of the slots). */
static void pack_pairs(const float *x, int64_t ld, bool k_major, int width, ty_gemm_pack_pairs_fn pack,
                       int64_t r0, int64_t rc, int64_t k0, int64_t kc, float *dst) {
    const int64_t kp = (kc + 1) / 2;
    for (int64_t q0 = 0; q0 < rc; q0 += width, dst += kp * width) {
        const int rows = rc - q0 < width ? (int)(rc - q0) : width;
        if (pack) {
            pack(k_major ? x + k0 * ld + r0 + q0 : x + (r0 + q0) * ld + k0, ld, k_major, width, rows, kc, dst);
            continue;
        }
        if (k_major) {
            /* the pair's two columns are contiguous in X's storage rows k and k + 1 */
            for (int64_t s = 0; s < kp; s++) {
                const bool has_odd = 2 * s + 1 < kc;
                const float *even = x + (k0 + 2 * s) * ld + r0 + q0, *odd = has_odd ? even + ld : even;
                uint32_t w[GEMM_MAX_WIDTH] = {0};
                for (int i = 0; i < rows; i++) w[i] = bf16_pack(even[i]) | (has_odd ? bf16_pack(odd[i]) << 16 : 0);
                memcpy(dst + s * width, w, (size_t)width * sizeof *w);
            }
            continue;
        }
        for (int i = 0; i < width; i++) {
            const float *src = i < rows ? x + (r0 + q0 + i) * ld + k0 : NULL;
            for (int64_t s = 0; s < kp; s++) {
                uint32_t w = 0;
                if (src) w = bf16_pack(src[2 * s]) | (2 * s + 1 < kc ? bf16_pack(src[2 * s + 1]) << 16 : 0);
                memcpy(dst + s * width + i, &w, sizeof w);
            }
        }
    }
}

/* op(A) rows [m0, m0 + mc), columns [k0, k0 + kc) as mr-tall panels */
static void pack_a(const ty_gemm *g, const ty_gemm_args *p, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                   float *dst) {
    if (g->kern->bf16_pairs)
        pack_pairs(p->a, p->lda, p->trans_a, g->kern->mr, g->kern->pack_pairs, m0, mc, k0, kc, dst);
    else pack_panels(p->a, p->lda, p->trans_a, g->kern->mr, g->kern->pack_a_rows, m0, mc, k0, kc, dst,
                     g->operand_type);
}

/* op(B) rows [k0, k0 + kc), columns [n0, n0 + nc) as nr-wide panels (of op(B)^T's rows) */
static void pack_b(const ty_gemm *g, const ty_gemm_args *p, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                   float *dst) {
    if (g->kern->bf16_pairs)
        pack_pairs(p->b, p->ldb, !p->trans_b, g->kern->nr, g->kern->pack_pairs, n0, nc, k0, kc, dst);
    else pack_panels(p->b, p->ldb, !p->trans_b, g->kern->nr, g->kern->pack_b_rows, n0, nc, k0, kc, dst,
                     g->operand_type);
}

/* ---------------------------------------------------------------- packed once */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* An operand's panels over all of K (ty_gemm_pack_a / ty_gemm_pack_b, and the whole
 * product below): the slices of GEMM_KC one after another, each all of the operand's
 * `rows` (op(A)'s M or op(B)'s N) in panels of `width` (mr or nr). Where the panel of
 * row r0 (a multiple of width) in slice k0 starts, from base: */
static float *panels_at(const ty_gemm *g, int width, int64_t rows, int64_t k, const float *base, int64_t r0,
                        int64_t k0) {
    const int64_t kc = k - k0 < GEMM_KC ? k - k0 : GEMM_KC;
    const int64_t slice = ceil_div(rows, width) * width * panel_steps(g->kern, GEMM_KC);
    return (float *)base + (k0 / GEMM_KC) * slice + (r0 / width) * panel_steps(g->kern, kc) * width;
}

/* Their floats, 0 on overflow. */
static size_t panels_floats(const ty_gemm *g, int width, int64_t rows, int64_t k) {
    if (k <= 0 || rows <= 0 || rows > INT64_MAX / 2 - width || k > INT64_MAX / 2 - GEMM_KC) return 0;
    const int64_t slices = ceil_div(k, GEMM_KC), last = k - (slices - 1) * GEMM_KC;
    int64_t per_full, total;
    if (__builtin_mul_overflow(ceil_div(rows, width) * width, panel_steps(g->kern, GEMM_KC), &per_full) ||
        __builtin_mul_overflow(per_full, slices - 1, &total) ||
        __builtin_add_overflow(total, ceil_div(rows, width) * width * panel_steps(g->kern, last), &total) ||
        (uint64_t)total > SIZE_MAX / sizeof(float))
        return 0;
    return (size_t)total;
}

size_t ty_gemm_packed_a_floats(const ty_gemm *g, int64_t m, int64_t k) { return panels_floats(g, g->kern->mr, m, k); }
size_t ty_gemm_packed_b_floats(const ty_gemm *g, int64_t k, int64_t n) { return panels_floats(g, g->kern->nr, n, k); }

/* Packing op(A) into pa and op(B) into pb (either NULL: not packed), all of K, as pool
 * tasks of PANELS_PER_TASK panels each. */
typedef struct {
    const ty_gemm *g;
    const ty_gemm_args *p;
    float *pa, *pb;
    int64_t a_panels, b_panels, groups; /* per slice; groups of PANELS_PER_TASK */
} pack_job;

static void pack_panels_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const pack_job *j = ctx;
    const ty_gemm_args *p = j->p;
    const int mr = j->g->kern->mr, nr = j->g->kern->nr;
    const int64_t k0 = task / j->groups * GEMM_KC, kc = p->k - k0 < GEMM_KC ? p->k - k0 : GEMM_KC;
    const int64_t q0 = task % j->groups * PANELS_PER_TASK;
    for (int64_t q = q0; q < q0 + PANELS_PER_TASK && q < j->a_panels + j->b_panels; q++) {
        if (q < j->a_panels) {
            const int64_t r0 = q * mr;
            pack_a(j->g, p, r0, p->m - r0 < mr ? p->m - r0 : mr, k0, kc, panels_at(j->g, mr, p->m, p->k, j->pa, r0, k0));
        } else {
            const int64_t c0 = (q - j->a_panels) * nr;
            pack_b(j->g, p, c0, p->n - c0 < nr ? p->n - c0 : nr, k0, kc, panels_at(j->g, nr, p->n, p->k, j->pb, c0, k0));
        }
    }
}

static void pack_whole(ty_gemm *g, const ty_gemm_args *p, float *pa, float *pb) {
    pack_job j = {g, p, pa, pb, pa ? ceil_div(p->m, g->kern->mr) : 0, pb ? ceil_div(p->n, g->kern->nr) : 0, 0};
    j.groups = ceil_div(j.a_panels + j.b_panels, PANELS_PER_TASK);
    const int64_t tasks = ceil_div(p->k, GEMM_KC) * j.groups;
    if (g->pool) ty_pool_run(g->pool, tasks, pack_panels_task, &j);
    else
        for (int64_t t = 0; t < tasks; t++) pack_panels_task(&j, t, 0);
}

void ty_gemm_pack_a(ty_gemm *g, const ty_gemm_args *p, float *dst) {
    if (p->k > 0 && p->m > 0) pack_whole(g, p, dst, NULL);
}

void ty_gemm_pack_b(ty_gemm *g, const ty_gemm_args *p, float *dst) {
    if (p->k > 0 && p->n > 0) pack_whole(g, p, NULL, dst);
}

void ty_gemm_set_whole_max(ty_gemm *g, size_t floats) { g->whole_max = floats; }

/* ---------------------------------------------------------------- blocks */

/* The tiles of C rows [m0, m0 + mc), columns [n0, n0 + nc) for one slice of kc, from
 * packed panels (pa: the panels of those rows, pb: of those columns). */
static void gemm_tiles(const ty_gemm *g, const ty_gemm_args *p, const float *pa, const float *pb,
                       float *tile, int64_t m0, int64_t mc, int64_t n0, int64_t nc, int64_t kc, bool load_c) {
    const int mr = g->kern->mr, nr = g->kern->nr;
    const int64_t steps = panel_steps(g->kern, kc);
    for (int64_t c0 = 0; c0 < nc; c0 += nr) {
        const float *b = pb + (c0 / nr) * steps * nr;
        const int cols = nc - c0 < nr ? (int)(nc - c0) : nr;
        for (int64_t r0 = 0; r0 < mc; r0 += mr) {
            const float *a = pa + (r0 / mr) * steps * mr;
            const int rows = mc - r0 < mr ? (int)(mc - r0) : mr;
            float *c = p->c + (m0 + r0) * p->ldc + n0 + c0;
            if (rows == mr && cols == nr) {
                g->kern->kernel(steps, a, b, c, p->ldc, load_c);
                continue;
            }
            /* an edge tile: through a full-size copy (zeros start the same chains) */
            for (int i = 0; i < mr; i++)
                for (int j = 0; j < nr; j++)
                    tile[i * nr + j] = load_c && i < rows && j < cols ? c[i * p->ldc + j] : 0.0f;
            g->kern->kernel(steps, a, b, tile, nr, true);
            for (int i = 0; i < rows; i++) memcpy(c + i * p->ldc, tile + i * nr, (size_t)cols * sizeof *c);
        }
    }
}

static float *edge_tile(const ty_gemm *g, int thread) {
    return g->pack + (size_t)thread * g->pack_per_thread + (size_t)(GEMM_MC + GEMM_NC) * GEMM_KC;
}

/* C rows [m0, m0 + mc), columns [n0, n0 + nc), over all of K, on one thread. */
static void gemm_block(const ty_gemm *g, const ty_gemm_args *p, int thread, int64_t m0,
                       int64_t mc, int64_t n0, int64_t nc) {
    float *pa = g->pack + (size_t)thread * g->pack_per_thread;
    float *pb = pa + (size_t)GEMM_MC * GEMM_KC;
    for (int64_t k0 = 0; k0 < p->k; k0 += GEMM_KC) {
        const int64_t kc = p->k - k0 < GEMM_KC ? p->k - k0 : GEMM_KC;
        const float *a = p->a_packed ? panels_at(g, g->kern->mr, p->m, p->k, p->a_packed, m0, k0) : pa;
        const float *b = p->b_packed ? panels_at(g, g->kern->nr, p->n, p->k, p->b_packed, n0, k0) : pb;
        if (!p->b_packed) pack_b(g, p, n0, nc, k0, kc, pb);
        if (!p->a_packed) pack_a(g, p, m0, mc, k0, kc, pa);
        gemm_tiles(g, p, a, b, edge_tile(g, thread), m0, mc, n0, nc, kc, p->accumulate || k0 > 0);
    }
}

static bool gemm_trivial(const ty_gemm_args *p) {
    if (p->m <= 0 || p->n <= 0) return true;
    if (p->k > 0) return false;
    if (!p->accumulate)
        for (int64_t i = 0; i < p->m; i++) memset(p->c + i * p->ldc, 0, (size_t)p->n * sizeof(float));
    return true;
}

void ty_gemm_run_1(ty_gemm *g, int thread, const ty_gemm_args *p) {
    if (gemm_trivial(p)) return;
    for (int64_t n0 = 0; n0 < p->n; n0 += GEMM_NC)
        for (int64_t m0 = 0; m0 < p->m; m0 += GEMM_MC)
            gemm_block(g, p, thread, m0, p->m - m0 < GEMM_MC ? p->m - m0 : GEMM_MC, n0,
                       p->n - n0 < GEMM_NC ? p->n - n0 : GEMM_NC);
}

/* ---------------------------------------------------------------- threaded: whole
 * Both operands' panels over all of K at once (those not packed already, in one job),
 * then one job of tiles, each tile over every slice of K in order: two waits for the
 * pool a product. Where the panels would take more than whole_max floats, the chunked
 * product below runs instead. */

typedef struct {
    const ty_gemm *g;
    const ty_gemm_args *p;
    const float *pa, *pb;
    int64_t tiles_n;
} whole_job;

static void whole_tile_task(void *ctx, int64_t task, int thread) {
    const whole_job *j = ctx;
    const ty_gemm_args *p = j->p;
    const int64_t r0 = (task / j->tiles_n) * GEMM_TM, c0 = (task % j->tiles_n) * GEMM_TN;
    const int64_t mc = p->m - r0 < GEMM_TM ? p->m - r0 : GEMM_TM, nc = p->n - c0 < GEMM_TN ? p->n - c0 : GEMM_TN;
    for (int64_t k0 = 0; k0 < p->k; k0 += GEMM_KC)
        gemm_tiles(j->g, p, panels_at(j->g, j->g->kern->mr, p->m, p->k, j->pa, r0, k0),
                   panels_at(j->g, j->g->kern->nr, p->n, p->k, j->pb, c0, k0), edge_tile(j->g, thread), r0, mc, c0,
                   nc, p->k - k0 < GEMM_KC ? p->k - k0 : GEMM_KC, p->accumulate || k0 > 0);
}

static bool run_whole(ty_gemm *g, const ty_gemm_args *p) {
    size_t fa = p->a_packed ? 0 : ty_gemm_packed_a_floats(g, p->m, p->k);
    const size_t fb = p->b_packed ? 0 : ty_gemm_packed_b_floats(g, p->k, p->n);
    if ((!p->a_packed && !fa) || (!p->b_packed && !fb) || fa > g->whole_max || fb > g->whole_max - fa) return false;
    fa = (fa + 15) / 16 * 16; /* B's panels from a 64-byte boundary, as the kernels load them */
    if (fa + fb > g->whole_floats) {
        free(g->whole);
        g->whole_floats = 0;
        if (!(g->whole = aligned_alloc(64, ((fa + fb) * sizeof(float) + 63) / 64 * 64))) return false;
        g->whole_floats = fa + fb;
    }
    float *pa = p->a_packed ? NULL : g->whole, *pb = p->b_packed ? NULL : g->whole + fa;
    if (pa || pb) pack_whole(g, p, pa, pb);
    whole_job j = {g, p, pa ? pa : p->a_packed, pb ? pb : p->b_packed, ceil_div(p->n, GEMM_TN)};
    ty_pool_run(g->pool, ceil_div(p->m, GEMM_TM) * j.tiles_n, whole_tile_task, &j);
    return true;
}

/* ---------------------------------------------------------------- threaded: chunked */

/* One chunk of C and one slice of K, shared by the jobs that pack and multiply it. */
typedef struct {
    const ty_gemm *g;
    const ty_gemm_args *p;
    int64_t m0, mc, n0, nc, k0, kc;
    int64_t a_panels, b_panels, tiles_n; /* 0: that operand packed once */
    bool load_c;
    const float *pa, *pb; /* the chunk's panels: g->shared_a / shared_b, or in a_packed / b_packed */
} chunk_job;

static void pack_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const chunk_job *j = ctx;
    const int mr = j->g->kern->mr, nr = j->g->kern->nr;
    const int64_t steps = panel_steps(j->g->kern, j->kc);
    for (int64_t q = task * PANELS_PER_TASK; q < (task + 1) * PANELS_PER_TASK; q++) {
        if (q < j->a_panels) {
            const int64_t r0 = q * mr, rows = j->mc - r0 < mr ? j->mc - r0 : mr;
            pack_a(j->g, j->p, j->m0 + r0, rows, j->k0, j->kc, (float *)j->pa + r0 * steps);
        } else if (q < j->a_panels + j->b_panels) {
            const int64_t c0 = (q - j->a_panels) * nr, cols = j->nc - c0 < nr ? j->nc - c0 : nr;
            pack_b(j->g, j->p, j->n0 + c0, cols, j->k0, j->kc, (float *)j->pb + c0 * steps);
        }
    }
}

static void tile_task(void *ctx, int64_t task, int thread) {
    const chunk_job *j = ctx;
    const int64_t r0 = (task / j->tiles_n) * GEMM_TM, c0 = (task % j->tiles_n) * GEMM_TN;
    const int64_t mc = j->mc - r0 < GEMM_TM ? j->mc - r0 : GEMM_TM;
    const int64_t nc = j->nc - c0 < GEMM_TN ? j->nc - c0 : GEMM_TN;
    const int64_t steps = panel_steps(j->g->kern, j->kc);
    gemm_tiles(j->g, j->p, j->pa + r0 * steps, j->pb + c0 * steps, edge_tile(j->g, thread), j->m0 + r0, mc,
               j->n0 + c0, nc, j->kc, j->load_c);
}

void ty_gemm_run(ty_gemm *g, const ty_gemm_args *p) {
    if (gemm_trivial(p)) return;
    if (g->n_threads == 1) {
        ty_gemm_run_1(g, 0, p);
        return;
    }
    if (run_whole(g, p)) return;
    const int mr = g->kern->mr, nr = g->kern->nr;
    for (int64_t n0 = 0; n0 < p->n; n0 += GEMM_CHUNK)
        for (int64_t m0 = 0; m0 < p->m; m0 += GEMM_CHUNK)
            for (int64_t k0 = 0; k0 < p->k; k0 += GEMM_KC) {
                chunk_job j = {g, p, m0, p->m - m0 < GEMM_CHUNK ? p->m - m0 : GEMM_CHUNK,
                               n0, p->n - n0 < GEMM_CHUNK ? p->n - n0 : GEMM_CHUNK,
                               k0, p->k - k0 < GEMM_KC ? p->k - k0 : GEMM_KC, 0, 0, 0,
                               p->accumulate || k0 > 0, g->shared_a, g->shared_b};
                j.a_panels = p->a_packed ? 0 : ceil_div(j.mc, mr);
                j.b_panels = p->b_packed ? 0 : ceil_div(j.nc, nr);
                if (p->a_packed) j.pa = panels_at(g, mr, p->m, p->k, p->a_packed, m0, k0);
                if (p->b_packed) j.pb = panels_at(g, nr, p->n, p->k, p->b_packed, n0, k0);
                j.tiles_n = ceil_div(j.nc, GEMM_TN);
                if (j.a_panels + j.b_panels)
                    ty_pool_run(g->pool, ceil_div(j.a_panels + j.b_panels, PANELS_PER_TASK), pack_task, &j);
                ty_pool_run(g->pool, ceil_div(j.mc, GEMM_TM) * j.tiles_n, tile_task, &j);
            }
}
