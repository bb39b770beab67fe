/* cpu.h — the one place that decides what this CPU runs: CPUID, Linux's AMX permission,
 * the environment variable TOY_ISA, the AMX self-test, and one table of operations per
 * instruction set, chosen once per process. Every kernel family asks that table; none
 * detects the CPU or reads TOY_ISA itself.
 *
 * Fast paths per instruction set (x: its own; "<": the one of the set to its left;
 * ref: the scalar reference, which every other column reproduces bit for bit):
 *
 *                               scalar  avx2   avxvnni  avx512        amx
 *   row dot products (kernels.h)  ref    x      <        x (else avx2) <
 *   activation quantizers         ref    x      <        <             <
 *   packed products (packed.h)    -      x      x Q8_0,  x             x (16+ rows;
 *                                               Q4_0                     else avx512)
 *   GEMM micro-kernel (gemm.h)    4x4    6x16   <        12x32         <
 *   BF16 dot kernel (gemm.h)      -      -      -        12x32 pairs   <
 *     (vdpbf16ps: only where the CPU has AVX512_BF16 and ty_gemm_bf16_probe agrees;
 *     else --compute bf16 rounds operands for the F32 kernel)
 *   attention tasks               ref    x      <        x             <
 *   row_exp (softmax rows)        ref    x      <        x             <
 *   SwiGLU and its backward       ref    x      <        x             <
 *   FMA peak (peak.c)             ref    x      <        x             <
 */
#ifndef TOY_CPU_H
#define TOY_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "elementwise.h"
#include "gemm.h"
#include "kernels.h"
#include "packed.h"

typedef enum {
    TY_ISA_SCALAR = 0,
    TY_ISA_AVX2 = 1,
    TY_ISA_AVXVNNI = 2, /* AVX2 plus AVX-VNNI (vpdpbusd on ymm), without AVX-512 */
    TY_ISA_AVX512 = 3,
    TY_ISA_AMX = 4, /* AVX-512 VNNI plus AMX int8 tiles, granted by the OS */
} ty_isa;

/* The operations of one instruction set: a row of the matrix above. A getter returns
 * NULL for a type it has no kernel for; the next getter, then the scalar one, is asked. */
typedef struct {
    ty_isa isa;
    const ty_kernel *(*row[2])(int type);
    ty_quantize_act_fn (*quantize_act)(int vec_dot_type); /* NULL: the kernel's own */
    const ty_packed_kernel *(*packed[2])(int type);      /* none: the row kernels */
    const ty_gemm_kernel *(*gemm)(void);
    const ty_gemm_kernel *(*gemm_bf16)(void); /* a pair kernel; ty_cpu_gemm_bf16 decides */
    ty_isa attention; /* the attention tasks (attention_cpu.c): scalar, avx2 or avx512 */
    ty_row_exp_fn row_exp;
    ty_swiglu_fn swiglu; /* inference's and training's */
    ty_swiglu_bwd_fn swiglu_bwd;
    double (*fma_peak)(long iters); /* FLOPs of a fixed run of independent FMA chains */
    uint64_t (*read_sum)(const uint64_t *p, size_t n, int streams); /* the bandwidth probe's reads */
} ty_cpu_ops;

/* The instruction set is chosen once: the best of this CPU, or the one named by
 * TOY_ISA=scalar|avx2|avxvnni|avx512|amx (never above what the CPU has; avxvnni only
 * where the CPU has AVX-VNNI, which some AVX-512 CPUs lack: avx2 there). Any other
 * TOY_ISA makes toy_kernel_init (toy.h) fail, every time it is asked; model contexts,
 * training and toy --version ask before they compute. */

/* The chosen row of operations (the scalar one while TOY_ISA is invalid). */
const ty_cpu_ops *ty_cpu(void);
ty_isa ty_cpu_isa(void);
const char *ty_isa_name(ty_isa isa);

/* The fastest row kernel of a type on this CPU, with the fastest activation quantizer. */
const ty_kernel *ty_kernel_get(int type);
/* The packed kernel worth loading weights for on this CPU, NULL where the row kernels
 * are as good, or where TOY_REPACK=0. */
const ty_packed_kernel *ty_packed_get(int type);

/* The CPU has AVX-VNNI and TOY_ISA allows it (avxvnni or above): the AVX-VNNI kernels
 * may run, even where AVX-512 ones are chosen. */
bool ty_cpu_avx_vnni(void);
/* True where the CPU and the OS allow AMX but its products failed the self-test run
 * before it is chosen: toy then runs the AVX-512 kernels. */
bool ty_amx_self_test_failed(void);
/* The AMX products of every type checked against the VNNI kernels' bits on a small
 * matrix, with SIGILL, SIGSEGV and SIGBUS caught meanwhile: false if any differs or
 * faults. Run once before AMX is chosen, so that a tile instruction that misbehaves on
 * some CPU or kernel costs speed, never a crash or a wrong logit. get_amx: ty_packed_amx,
 * or for tests the tile model, a broken kernel. */
bool ty_packed_amx_self_test_with(const ty_packed_kernel *(*get_amx)(int type));
/* The pair kernel that BF16 products run (gemm.h's BF16 dot definition): the table's,
 * where the CPU has AVX512_BF16 (CPUID 7.1 EAX bit 5) and its vdpbf16ps passed
 * ty_gemm_bf16_probe, run once when the table is chosen; else NULL (the rounding mode).
 * toy_kernel_bf16_dot (toy.h) says which, and why not. */
const ty_gemm_kernel *ty_cpu_gemm_bf16(void);
/* The CPU says it is Intel's (CPUID leaf 0: "GenuineIntel"). */
bool ty_cpu_intel(void);

#endif
