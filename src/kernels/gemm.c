/* gemm.c — the driver of the matrix products (gemm.h): blocks of C as tasks, operands
 * packed into micro-panels, the instruction set's micro-kernel on each tile.
 *
 * A task owns one block of C (up to GEMM_MC rows by GEMM_NC columns) and walks K in
 * slices of GEMM_KC: it packs the slice of op(B) for its columns (GEMM_NC x GEMM_KC,
 * nr-wide panels, k-major) and of op(A) for its rows (mr-tall panels, k-major), then
 * runs the micro-kernel over every mr x nr tile, loading C after the first slice. A
 * tile's chains therefore run k = 0..K-1 in order whatever the block sizes, which are
 * free to shrink so that every thread gets work.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "kernels.h"

#define GEMM_KC 256
#define GEMM_MC 192 /* a multiple of every kernel's mr (4, 6, 12) */
#define GEMM_NC 512 /* a multiple of every kernel's nr (4, 16, 32) */
#define GEMM_MAX_TILE (16 * 32)

struct toy_gemm {
    toy_pool *pool;
    const toy_gemm_kernel *kern;
    int n_threads;
    float *pack;            /* per thread: A slice, B slice, an edge tile */
    size_t pack_per_thread; /* floats */
};

/* ---------------------------------------------------------------- reference */

void toy_gemm_ref(const toy_gemm_args *p) {
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->n; j++) {
            float acc = p->accumulate ? p->c[i * p->ldc + j] : 0.0f;
            for (int64_t k = 0; k < p->k; k++) {
                const float a = p->trans_a ? p->a[k * p->lda + i] : p->a[i * p->lda + k];
                const float b = p->trans_b ? p->b[j * p->ldb + k] : p->b[k * p->ldb + j];
                acc = fmaf(a, b, acc);
            }
            p->c[i * p->ldc + j] = acc;
        }
}

/* A portable micro-kernel: 4 x 4 chains of fmaf. */
static void kernel_scalar(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                          bool load_c) {
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = load_c ? c[i * ldc + j] : 0.0f;
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[k * 4 + i], b[k * 4 + j], acc[i][j]);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) c[i * ldc + j] = acc[i][j];
}

const toy_gemm_kernel *toy_gemm_kernel_scalar(void) {
    static const toy_gemm_kernel k = {"scalar", 4, 4, kernel_scalar};
    return &k;
}

const toy_gemm_kernel *toy_gemm_kernel_best(void) {
    const toy_isa isa = toy_cpu_isa();
#if defined(__x86_64__)
    if (isa >= TOY_ISA_AVX512) return toy_gemm_kernel_avx512();
    if (isa >= TOY_ISA_AVX2) return toy_gemm_kernel_avx2();
#endif
    (void)isa;
    return toy_gemm_kernel_scalar();
}

/* ---------------------------------------------------------------- engine */

toy_gemm *toy_gemm_new_with(toy_pool *pool, const toy_gemm_kernel *kernel) {
    toy_gemm *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->pool = pool;
    g->kern = kernel;
    g->n_threads = pool ? toy_pool_size(pool) : 1;
    g->pack_per_thread = (size_t)(GEMM_MC + GEMM_NC) * GEMM_KC + GEMM_MAX_TILE + 16;
    g->pack = aligned_alloc(64, g->pack_per_thread * (size_t)g->n_threads * sizeof(float));
    if (!g->pack) {
        free(g);
        return NULL;
    }
    return g;
}

toy_gemm *toy_gemm_new(toy_pool *pool) { return toy_gemm_new_with(pool, toy_gemm_kernel_best()); }

void toy_gemm_free(toy_gemm *g) {
    if (!g) return;
    free(g->pack);
    free(g);
}

toy_pool *toy_gemm_pool(const toy_gemm *g) { return g->pool; }

/* ---------------------------------------------------------------- packing */

/* op(A) rows [m0, m0 + mc), columns [k0, k0 + kc) as mr-tall panels: panel p holds
 * dst[p * kc * mr + k * mr + i] = op(A)[m0 + p * mr + i][k0 + k], zero past row m. */
static void pack_a(const toy_gemm_args *p, int mr, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                   float *dst) {
    for (int64_t r0 = 0; r0 < mc; r0 += mr, dst += kc * mr) {
        const int rows = mc - r0 < mr ? (int)(mc - r0) : mr;
        if (p->trans_a) {
            /* A is K x M: a panel's k-th column is contiguous in A's row k */
            const float *src = p->a + k0 * p->lda + m0 + r0;
            for (int64_t k = 0; k < kc; k++, src += p->lda) {
                float *d = dst + k * mr;
                memcpy(d, src, (size_t)rows * sizeof *d);
                for (int i = rows; i < mr; i++) d[i] = 0.0f;
            }
        } else {
            for (int i = 0; i < mr; i++) {
                if (i >= rows) {
                    for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = 0.0f;
                    continue;
                }
                const float *src = p->a + (m0 + r0 + i) * p->lda + k0;
                for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = src[k];
            }
        }
    }
}

/* op(B) rows [k0, k0 + kc), columns [n0, n0 + nc) as nr-wide panels: panel q holds
 * dst[q * kc * nr + k * nr + j] = op(B)[k0 + k][n0 + q * nr + j], zero past column n. */
static void pack_b(const toy_gemm_args *p, int nr, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                   float *dst) {
    for (int64_t c0 = 0; c0 < nc; c0 += nr, dst += kc * nr) {
        const int cols = nc - c0 < nr ? (int)(nc - c0) : nr;
        if (!p->trans_b) {
            const float *src = p->b + k0 * p->ldb + n0 + c0;
            for (int64_t k = 0; k < kc; k++, src += p->ldb) {
                float *d = dst + k * nr;
                memcpy(d, src, (size_t)cols * sizeof *d);
                for (int j = cols; j < nr; j++) d[j] = 0.0f;
            }
        } else {
            /* B is N x K: column j of op(B) is row n0 + c0 + j of B */
            for (int j = 0; j < nr; j++) {
                if (j >= cols) {
                    for (int64_t k = 0; k < kc; k++) dst[k * nr + j] = 0.0f;
                    continue;
                }
                const float *src = p->b + (n0 + c0 + j) * p->ldb + k0;
                for (int64_t k = 0; k < kc; k++) dst[k * nr + j] = src[k];
            }
        }
    }
}

/* ---------------------------------------------------------------- blocks */

/* C rows [m0, m0 + mc), columns [n0, n0 + nc), over all of K. */
static void gemm_block(const toy_gemm *g, const toy_gemm_args *p, int thread, int64_t m0,
                       int64_t mc, int64_t n0, int64_t nc) {
    const int mr = g->kern->mr, nr = g->kern->nr;
    float *pa = g->pack + (size_t)thread * g->pack_per_thread;
    float *pb = pa + (size_t)GEMM_MC * GEMM_KC;
    float *tile = pb + (size_t)GEMM_NC * GEMM_KC;
    for (int64_t k0 = 0; k0 < p->k; k0 += GEMM_KC) {
        const int64_t kc = p->k - k0 < GEMM_KC ? p->k - k0 : GEMM_KC;
        const bool load_c = p->accumulate || k0 > 0;
        pack_b(p, nr, n0, nc, k0, kc, pb);
        pack_a(p, mr, m0, mc, k0, kc, pa);
        for (int64_t c0 = 0; c0 < nc; c0 += nr) {
            const float *b = pb + (c0 / nr) * kc * nr;
            const int cols = nc - c0 < nr ? (int)(nc - c0) : nr;
            for (int64_t r0 = 0; r0 < mc; r0 += mr) {
                const float *a = pa + (r0 / mr) * kc * mr;
                const int rows = mc - r0 < mr ? (int)(mc - r0) : mr;
                float *c = p->c + (m0 + r0) * p->ldc + n0 + c0;
                if (rows == mr && cols == nr) {
                    g->kern->kernel(kc, a, b, c, p->ldc, load_c);
                    continue;
                }
                /* an edge tile: through a full-size copy (zeros start the same chains) */
                for (int i = 0; i < mr; i++)
                    for (int j = 0; j < nr; j++)
                        tile[i * nr + j] = load_c && i < rows && j < cols ? c[i * p->ldc + j] : 0.0f;
                g->kern->kernel(kc, a, b, tile, nr, true);
                for (int i = 0; i < rows; i++)
                    memcpy(c + i * p->ldc, tile + i * nr, (size_t)cols * sizeof *c);
            }
        }
    }
}

static bool gemm_trivial(const toy_gemm_args *p) {
    if (p->m <= 0 || p->n <= 0) return true;
    if (p->k > 0) return false;
    if (!p->accumulate)
        for (int64_t i = 0; i < p->m; i++) memset(p->c + i * p->ldc, 0, (size_t)p->n * sizeof(float));
    return true;
}

void toy_gemm_run_1(toy_gemm *g, int thread, const toy_gemm_args *p) {
    if (gemm_trivial(p)) return;
    for (int64_t n0 = 0; n0 < p->n; n0 += GEMM_NC)
        for (int64_t m0 = 0; m0 < p->m; m0 += GEMM_MC)
            gemm_block(g, p, thread, m0, p->m - m0 < GEMM_MC ? p->m - m0 : GEMM_MC, n0,
                       p->n - n0 < GEMM_NC ? p->n - n0 : GEMM_NC);
}

typedef struct {
    const toy_gemm *g;
    const toy_gemm_args *p;
    int64_t mc, nc, n_mb; /* block sizes, blocks along M */
} gemm_job;

static void gemm_task(void *ctx, int64_t task, int thread) {
    const gemm_job *j = ctx;
    const int64_t m0 = (task % j->n_mb) * j->mc, n0 = (task / j->n_mb) * j->nc;
    const int64_t mc = j->p->m - m0 < j->mc ? j->p->m - m0 : j->mc;
    const int64_t nc = j->p->n - n0 < j->nc ? j->p->n - n0 : j->nc;
    gemm_block(j->g, j->p, thread, m0, mc, n0, nc);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void toy_gemm_run(toy_gemm *g, const toy_gemm_args *p) {
    if (gemm_trivial(p)) return;
    if (g->n_threads == 1) {
        toy_gemm_run_1(g, 0, p);
        return;
    }
    const int mr = g->kern->mr, nr = g->kern->nr;
    gemm_job j = {g, p, GEMM_MC, GEMM_NC, 0};
    /* smaller blocks until each thread has a few (the result does not change) */
    const int64_t want = 3 * (int64_t)g->n_threads;
    while (ceil_div(p->m, j.mc) * ceil_div(p->n, j.nc) < want) {
        if (j.nc > 4 * nr && j.nc >= j.mc) j.nc = ceil_div(j.nc / 2, nr) * nr;
        else if (j.mc > 2 * mr) j.mc = ceil_div(j.mc / 2, mr) * mr;
        else if (j.nc > nr) j.nc = ceil_div(j.nc / 2, nr) * nr;
        else break;
    }
    j.n_mb = ceil_div(p->m, j.mc);
    toy_pool_run(g->pool, j.n_mb * ceil_div(p->n, j.nc), gemm_task, &j);
}
