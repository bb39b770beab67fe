/* gemm.h — single-precision matrix products, the bulk of training's work.
 *
 *     C[M x N] = (accumulate ? C : 0) + op(A)[M x K] . op(B)[K x N]
 *
 * All matrices are row-major. op(A) is A (M rows of K, lda apart) or, with trans_a, the
 * transpose of A stored as K rows of M; op(B) is B (K rows of N) or, with trans_b, the
 * transpose of B stored as N rows of K. So a linear layer y = x W^T with W [out][in] is
 * gemm(x, W, trans_b) forward, dx = dy W backward, and dW += dy^T x is gemm(dy, x,
 * trans_a, accumulate).
 *
 * THE RESULT IS DEFINED ELEMENT BY ELEMENT: each C[i][j] is one chain of fused
 * multiply-adds over k = 0, 1, ..., K-1 in order, starting from C[i][j] (accumulate) or
 * +0.0f:
 *
 *     acc = accumulate ? C[i][j] : 0;  for k: acc = fmaf(opA[i][k], opB[k][j], acc)
 *
 * Blocking, packing, threads and instruction set only decide which chains run where, so
 * every version gives the same bits as ty_gemm_ref, and a product split over K into
 * calls with accumulate (micro-batches, chunks of tokens) equals the product in one call.
 */
#ifndef TOY_GEMM_H
#define TOY_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "threadpool.h"
#include "toy.h"

typedef struct {
    bool trans_a, trans_b, accumulate;
    int64_t m, n, k;
    const float *a;
    int64_t lda;
    const float *b;
    int64_t ldb;
    float *c;
    int64_t ldc;
} ty_gemm_args;

/* Packing space of one thread, and the instruction set's micro-kernel. */
typedef struct ty_gemm ty_gemm;

void ty_gemm_free(ty_gemm *g);
ty_pool *ty_gemm_pool(const ty_gemm *g);

/* C = ..., split over the pool's threads. */
void ty_gemm_run(ty_gemm *g, const ty_gemm_args *p);
/* The same on the calling thread only, with thread `thread`'s packing space: for tasks
 * that run many small products (attention heads) inside a pool job. */
void ty_gemm_run_1(ty_gemm *g, int thread, const ty_gemm_args *p);

/* The definition above, as plain loops (fmaf). */
void ty_gemm_ref(const ty_gemm_args *p);

/* Mixed precision: with TOY_TYPE_BF16 or TOY_TYPE_F16, every later product of the engine
 * rounds each operand element to that type (round to nearest even) before the chains,
 * which stay F32: C[i][j] = chain of fmaf(round(opA[i][k]), round(opB[k][j]), acc).
 * The rounding is done as the operands are packed, so it costs O(mk + kn), not O(mnk).
 * TOY_TYPE_F32 (the default) turns it off. ty_gemm_ref_rounded is the definition. */
void ty_gemm_set_operand_type(ty_gemm *g, int type);
void ty_gemm_ref_rounded(const ty_gemm_args *p, int type);

/* ---- micro-kernels (gemm_avx2.c, gemm_avx512.c) ----
 * A tile of mr x nr results: c[i * ldc + j] (+)= sum over k < kc of a[k * mr + i] *
 * b[k * nr + j], as fused multiply-adds in k order, starting from c (load_c) or 0. */
typedef void (*ty_gemm_kernel_fn)(int64_t kc, const float *a, const float *b, float *c,
                                  int64_t ldc, bool load_c);
/* Transposing packs (NULL: the portable loops): an A panel from `rows` <= mr rows of A
 * stored M x K, dst[k * mr + i] = a[i * lda + k]; a B panel from `cols` <= nr rows of B
 * stored N x K, dst[k * nr + j] = b[j * ldb + k]; zeros past rows / cols. */
typedef void (*ty_gemm_pack_fn)(const float *src, int64_t ld, int n, int64_t kc, float *dst);
typedef struct {
    const char *isa;
    int mr, nr;
    ty_gemm_kernel_fn kernel;
    ty_gemm_pack_fn pack_a_rows, pack_b_rows;
} ty_gemm_kernel;

const ty_gemm_kernel *ty_gemm_kernel_avx2(void);   /* AVX2 + FMA */
const ty_gemm_kernel *ty_gemm_kernel_avx512(void); /* AVX-512 F */
const ty_gemm_kernel *ty_gemm_kernel_scalar(void);

/* A product engine for the pool's threads (pool may be NULL: the caller alone) with a
 * micro-kernel: this CPU's is ty_cpu()->gemm() (cpu.h). NULL: no memory. */
ty_gemm *ty_gemm_new(ty_pool *pool, const ty_gemm_kernel *kernel);

#endif
