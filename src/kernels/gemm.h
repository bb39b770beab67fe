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
 *
 * BF16 DOT PRODUCTS: A SECOND DEFINITION. An engine given a pair kernel
 * (ty_gemm_set_bf16_dot; cpu.c's ty_cpu_gemm_bf16() where the CPU has AVX-512 BF16's
 * vdpbf16ps and the instruction passed its probe) runs its products with TOY_TYPE_BF16
 * operands as that instruction computes, not as the rounding mode below. Each operand
 * element x becomes bf(x): x rounded to bf16 (nearest even, NaN kept: ty_fp32_to_bf16),
 * then a bf16 subnormal replaced by the zero of its sign (the instruction reads its
 * inputs with DAZ). ftz(x) is x, or the zero of x's sign where |x| < FLT_MIN. Each
 * C[i][j] is one chain over pairs of k, odd element first (Intel SDM, VDPBF16PS: two
 * FP32 FMAs per pair, each rounded to nearest even with its result flushed):
 *
 *     acc = accumulate ? ftz(C[i][j]) : +0.0f       (K = 0: C is left as it is)
 *     for p = 0, 1, ..., ceil(K/2) - 1:   (a1 = b1 = 0 where 2p + 1 == K)
 *         a0 = bf(opA[i][2p]), a1 = bf(opA[i][2p+1]), b0 = bf(opB[2p][j]), b1 = bf(opB[2p+1][j])
 *         acc = ftz(fmaf(a1, b1, acc));  acc = ftz(fmaf(a0, b0, acc))
 *
 * C's own subnormals are flushed as it is loaded (the definition does not leave the
 * instruction's treatment of its accumulator to chance). ftz looks at fmaf's rounded
 * result: an exact sum just below FLT_MIN that rounds up to it is kept, where hardware
 * judging tininess before rounding would flush it; the probe does not test that
 * window (2^-150 wide), which sums of training-sized values hardly reach. Threads and
 * blocking still only decide where chains run (K slices are even, so pairs never
 * straddle them). A product split over K into calls with accumulate equals the product
 * in one call only where every split point is even: an odd split pairs k differently.
 * ty_gemm_ref_dpbf16 is the definition, ty_gemm_dpbf16_pair one step of it. Without a
 * pair kernel (no AVX512_BF16, TOY_ISA below avx512, a probe that differs), BF16
 * operands take the rounding mode.
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
    const float *b_packed; /* op(B) already packed by ty_gemm_pack_b (then b is not read), or NULL */
    const float *a_packed; /* op(A) already packed by ty_gemm_pack_a (then a is not read), or NULL */
} ty_gemm_args;

/* Packing space of one thread, and the instruction set's micro-kernel. */
typedef struct ty_gemm ty_gemm;

void ty_gemm_free(ty_gemm *g);
/* Whether its products run a pair kernel now (BF16 operands and ty_gemm_set_bf16_dot). */
bool ty_gemm_runs_pairs(const ty_gemm *g);
ty_pool *ty_gemm_pool(const ty_gemm *g);

/* C = ..., split over the pool's threads. */
void ty_gemm_run(ty_gemm *g, const ty_gemm_args *p);
/* The same on the calling thread only, with thread `thread`'s packing space: for tasks
 * that run many small products (attention heads) inside a pool job. */
void ty_gemm_run_1(ty_gemm *g, int thread, const ty_gemm_args *p);

/* op(B) of products that share it (a weight, across the micro-batches of a training
 * step) packed once, as ty_gemm_run would pack it in each: the panels of every slice of
 * K, over all of N. ty_gemm_packed_b_floats: the floats it takes (0 on overflow);
 * ty_gemm_pack_b: packs p's op(B) (p->k, p->n, b, ldb, trans_b) there (64-byte aligned,
 * as the kernels load panels), on the pool. A
 * product reads them where its b_packed points there; they hold while op(B) and the
 * engine's kernel and operand type stay as they were. */
size_t ty_gemm_packed_b_floats(const ty_gemm *g, int64_t k, int64_t n);
void ty_gemm_pack_b(ty_gemm *g, const ty_gemm_args *p, float *dst);
/* The same for op(A) of products that share it (one input through several weights):
 * p's op(A) (p->m, p->k, a, lda, trans_a), read where a product's a_packed points. */
size_t ty_gemm_packed_a_floats(const ty_gemm *g, int64_t m, int64_t k);
void ty_gemm_pack_a(ty_gemm *g, const ty_gemm_args *p, float *dst);
/* Tests: the most floats a threaded product packs at once to run whole (default 4 Mi);
 * past it, and at 0, products run in chunks of GEMM_CHUNK, one slice of K at a time.
 * The same bits either way. */
void ty_gemm_set_whole_max(ty_gemm *g, size_t floats);

/* The definition above, as plain loops (fmaf). */
void ty_gemm_ref(const ty_gemm_args *p);

/* Mixed precision: with TOY_TYPE_BF16 or TOY_TYPE_F16, every later product of the engine
 * rounds each operand element to that type (round to nearest even) before the chains,
 * which stay F32: C[i][j] = chain of fmaf(round(opA[i][k]), round(opB[k][j]), acc).
 * The rounding is done as the operands are packed, so it costs O(mk + kn), not O(mnk).
 * TOY_TYPE_F32 (the default) turns it off. ty_gemm_ref_rounded is the definition. With
 * a pair kernel set (ty_gemm_set_bf16_dot), BF16 follows the BF16 dot definition instead. */
void ty_gemm_set_operand_type(ty_gemm *g, int type);
void ty_gemm_ref_rounded(const ty_gemm_args *p, int type);

/* The BF16 dot definition, as plain loops. */
void ty_gemm_ref_dpbf16(const ty_gemm_args *p);
/* One step of it, one lane of vdpbf16ps: acc after the pair a (two bf16, k = 2p in the
 * low 16 bits, 2p + 1 in the high) times the pair b, inputs read with DAZ. */
float ty_gemm_dpbf16_pair(float acc, uint32_t a, uint32_t b);
/* bf(x) above: x to bf16 bits, nearest even, NaN kept, subnormals to signed zero. */
uint16_t ty_gemm_bf16_daz(float x);

/* ---- micro-kernels (gemm_avx2.c, gemm_avx512.c, gemm_avx512_bf16.c) ----
 * A tile of mr x nr results: c[i * ldc + j] (+)= sum over k < kc of a[k * mr + i] *
 * b[k * nr + j], as fused multiply-adds in k order, starting from c (load_c) or 0. */
typedef void (*ty_gemm_kernel_fn)(int64_t kc, const float *a, const float *b, float *c,
                                  int64_t ldc, bool load_c);
/* Transposing packs (NULL: the portable loops): an A panel from `rows` <= mr rows of A
 * stored M x K, dst[k * mr + i] = a[i * lda + k]; a B panel from `cols` <= nr rows of B
 * stored N x K, dst[k * nr + j] = b[j * ldb + k]; zeros past rows / cols. */
typedef void (*ty_gemm_pack_fn)(const float *src, int64_t ld, int n, int64_t kc, float *dst);
/* A pair kernel (bf16_pairs) reads panels of bf16 pairs: each 32-bit slot holds k = 2p
 * in its low half and 2p + 1 in its high half (bf() of the operands, a zero pad past an
 * odd K), a[p * mr + i] and b[p * nr + j]; its kc counts pairs, and its chains are the
 * BF16 dot definition's (pack_*_rows NULL). Its panels are packed by pack_pairs (NULL:
 * the portable loops): one panel of `width` rows of X, `rows` of them real (zeros past),
 * from X[i][k] = x[k * ld + i] where k_major, else x[i * ld + k], k < kc:
 * dst[s * width + i] = bf(X[i][2s]) | bf(X[i][2s + 1]) << 16, zero past kc. */
typedef void (*ty_gemm_pack_pairs_fn)(const float *x, int64_t ld, bool k_major, int width, int rows, int64_t kc,
                                      float *dst);
typedef struct {
    const char *isa;
    int mr, nr;
    ty_gemm_kernel_fn kernel;
    ty_gemm_pack_fn pack_a_rows, pack_b_rows;
    bool bf16_pairs;
    ty_gemm_pack_pairs_fn pack_pairs;
} ty_gemm_kernel;

const ty_gemm_kernel *ty_gemm_kernel_avx2(void);   /* AVX2 + FMA */
const ty_gemm_kernel *ty_gemm_kernel_avx512(void); /* AVX-512 F */
const ty_gemm_kernel *ty_gemm_kernel_scalar(void);
const ty_gemm_kernel *ty_gemm_kernel_scalar_fma(void); /* the same bits, on a CPU with FMA */
/* Pair kernels: vdpbf16ps on a 12 x 32 tile (gemm_avx512_bf16.c; only where the CPU has
 * AVX512_BF16), and the definition in a 4 x 4 tile, which runs the driver's pair path
 * on any CPU (tests). */
const ty_gemm_kernel *ty_gemm_kernel_avx512_bf16(void);
const ty_gemm_kernel *ty_gemm_kernel_bf16_scalar(void);
/* The pair packing: in AVX2 (gemm_avx2.c), the AVX-512 BF16 kernel's where
 * ty_gemm_pack_pairs_probe differs; by vcvtne2ps2bf16 (gemm_avx512_bf16.c, only where the
 * CPU has AVX512_BF16), the kernel's otherwise; the same AVX-512 code with bf() in integer
 * instructions (gemm_avx512.c, any AVX-512 CPU: what tests check where no BF16 runs). */
void ty_gemm_pack_pairs_avx2(const float *x, int64_t ld, bool k_major, int width, int rows, int64_t kc, float *dst);
void ty_gemm_pack_pairs_avx512_bf16(const float *x, int64_t ld, bool k_major, int width, int rows, int64_t kc,
                                    float *dst);
void ty_gemm_pack_pairs_avx512(const float *x, int64_t ld, bool k_major, int width, int rows, int64_t kc, float *dst);
/* vcvtne2ps2bf16 in ty_gemm_pack_pairs_avx512_bf16 on floats of every kind, both ways of
 * packing, against bf(): NULL where every slot agrees, else the first that differs
 * (static). Run only where the CPU has AVX512_BF16. */
const char *ty_gemm_pack_pairs_probe(void);
/* vdpbf16ps on fixed inputs that tell apart the order of a pair's products (odd first),
 * one rounding against two, FTZ of tiny results and DAZ of subnormal inputs, each lane
 * compared with ty_gemm_dpbf16_pair: NULL where every lane agrees (NaN with NaN), else
 * what the lanes that differ show ("FTZ, DAZ"; static, overwritten by the next call).
 * Run only where the CPU has AVX512_BF16. */
const char *ty_gemm_bf16_probe(void);

/* A product engine for the pool's threads (pool may be NULL: the caller alone) with a
 * micro-kernel: this CPU's is ty_cpu()->gemm() (cpu.h). NULL: no memory. */
ty_gemm *ty_gemm_new(ty_pool *pool, const ty_gemm_kernel *kernel);

/* The pair kernel (bf16_pairs) that products with TOY_TYPE_BF16 operands run, under the
 * BF16 dot definition above, in ty_gemm_run and ty_gemm_run_1 alike (attention's
 * products follow the rest of training): this CPU's is ty_cpu_gemm_bf16() (cpu.h).
 * NULL (the default): the rounding mode. */
void ty_gemm_set_bf16_dot(ty_gemm *g, const ty_gemm_kernel *pairs);

#endif
