/* cpu.c — the instruction set of this process and its table of operations (cpu.h). */
#include "cpu.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

#include "error.h"
#include "quant.h"

/* ---------------------------------------------------------------- the table */

static const ty_cpu_ops ops_of[] = {
    [TY_ISA_SCALAR] = {.isa = TY_ISA_SCALAR, .gemm = ty_gemm_kernel_scalar, .attention = TY_ISA_SCALAR,
                        .row_exp = ty_row_exp_scalar, .swiglu = ty_swiglu_scalar,
                        .swiglu_bwd = ty_swiglu_bwd_scalar, .fma_peak = ty_fma_peak_scalar,
                        .read_sum = ty_read_sum_scalar},
#if defined(__x86_64__)
    [TY_ISA_AVX2] = {.isa = TY_ISA_AVX2, .row = {ty_kernel_avx2}, .quantize_act = ty_quantize_act_avx2,
                      .packed = {ty_packed_avx2}, .gemm = ty_gemm_kernel_avx2, .attention = TY_ISA_AVX2,
                      .row_exp = ty_row_exp_avx2, .swiglu = ty_swiglu_avx2, .swiglu_bwd = ty_swiglu_bwd_avx2,
                      .fma_peak = ty_fma_peak_avx2, .read_sum = ty_read_sum_avx2},
    [TY_ISA_AVXVNNI] = {.isa = TY_ISA_AVXVNNI, .row = {ty_kernel_avx2}, .quantize_act = ty_quantize_act_avx2,
                         .packed = {ty_packed_avxvnni}, .gemm = ty_gemm_kernel_avx2, .attention = TY_ISA_AVX2,
                         .row_exp = ty_row_exp_avx2, .swiglu = ty_swiglu_avx2,
                         .swiglu_bwd = ty_swiglu_bwd_avx2, .fma_peak = ty_fma_peak_avx2, .read_sum = ty_read_sum_avx2},
    [TY_ISA_AVX512] = {.isa = TY_ISA_AVX512, .row = {ty_kernel_avx512, ty_kernel_avx2},
                        .quantize_act = ty_quantize_act_avx2, .packed = {ty_packed_avx512},
                        .gemm = ty_gemm_kernel_avx512, .gemm_bf16 = ty_gemm_kernel_avx512_bf16,
                        .attention = TY_ISA_AVX512, .row_exp = ty_row_exp_avx512,
                        .swiglu = ty_swiglu_avx512, .swiglu_bwd = ty_swiglu_bwd_avx512,
                        .fma_peak = ty_fma_peak_avx512, .read_sum = ty_read_sum_avx2},
    [TY_ISA_AMX] = {.isa = TY_ISA_AMX, .row = {ty_kernel_avx512, ty_kernel_avx2},
                     .quantize_act = ty_quantize_act_avx2, .packed = {ty_packed_amx, ty_packed_avx512},
                     .gemm = ty_gemm_kernel_avx512, .gemm_bf16 = ty_gemm_kernel_avx512_bf16,
                     .attention = TY_ISA_AVX512, .row_exp = ty_row_exp_avx512,
                     .swiglu = ty_swiglu_avx512, .swiglu_bwd = ty_swiglu_bwd_avx512,
                     .fma_peak = ty_fma_peak_avx512, .read_sum = ty_read_sum_avx2},
#endif
};

static const char *const isa_names[] = {"scalar", "avx2", "avxvnni", "avx512", "amx"};

const char *ty_isa_name(ty_isa isa) {
    return isa >= TY_ISA_SCALAR && isa <= TY_ISA_AMX ? isa_names[isa] : "scalar";
}

/* ---------------------------------------------------------------- detection */

static ty_isa detected_isa(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    /* clang 14's __builtin_cpu_supports does not know "f16c": ask cpuid (leaf 1, ECX
     * bit 29) */
    unsigned eax, ebx, ecx = 0, edx;
    bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") && f16c)
        return TY_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
        return TY_ISA_AVX2;
#endif
    return TY_ISA_SCALAR;
}

#if defined(__x86_64__) && defined(__linux__)
#define ARCH_REQ_XCOMP_PERM 0x1023 /* arch_prctl: ask for an XSAVE feature's state */
#define XFEATURE_XTILEDATA 18
#endif

/* AMX int8 tiles usable by this process: the CPU has them (CPUID 7.0 EDX bits 24, 25),
 * the OS saves their state (XCR0 bits 17 and 18), and Linux (5.16 on) granted this
 * process the tile data it allocates per thread on first use. Asked once, process-wide. */
static bool amx_usable(void) {
#if defined(__x86_64__) && defined(__linux__)
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24)) || !(edx & (1u << 25))) return false;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false; /* OSXSAVE */
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

/* a feature bit of CPUID leaf 7, subleaf 1, EAX */
static bool cpuid_7_1_eax(unsigned bit) {
#if defined(__x86_64__)
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << bit));
#else
    (void)bit;
    return false;
#endif
}

/* AVX-VNNI: vpdpbusd with a VEX encoding, on ymm */
static bool avx_vnni(void) { return cpuid_7_1_eax(4); }

/* AVX512_BF16: vdpbf16ps and the conversions */
static bool avx512_bf16(void) { return cpuid_7_1_eax(5); }

bool ty_cpu_intel(void) {
#if defined(__x86_64__)
    unsigned max_leaf, ebx, ecx, edx;
    return __get_cpuid(0, &max_leaf, &ebx, &ecx, &edx) && ebx == 0x756e6547u && edx == 0x49656e69u &&
           ecx == 0x6c65746eu; /* "Genu" "ineI" "ntel" */
#else
    return false;
#endif
}

/* ---------------------------------------------------------------- AMX self-test */

#if defined(__x86_64__)
static sigjmp_buf amx_probe_jump;

static void amx_probe_fault(int sig) {
    siglongjmp(amx_probe_jump, sig);
}

/* Every AMX product on 32 rows x 512 columns of pseudo-random weights and 16 activation
 * rows, against the VNNI kernel's bits. Only scalar quantizers: this runs inside the
 * choice of kernels. Static buffers: a fault jumps out of it. */
static bool amx_products_match(const ty_packed_kernel *(*get_amx)(int type)) {
    enum { ROWS = 32, COLS = 512, ACTS = 16 }; /* two groups: the q8 forms' products of a pair */
    static float w_f32[ROWS * COLS], x_f32[COLS];
    static uint8_t w_file[ROWS * COLS * 2], w_packed[ROWS * COLS * 2];
    static uint8_t act_q[sizeof(block_q8_K) * (COLS / QK_K)], acts[ACTS][sizeof(block_q8_K) * (COLS / 32)];
    static float y_amx[ACTS * ROWS], y_vnni[ACTS * ROWS];
    static const int types[] = {TOY_TYPE_Q8_0, TOY_TYPE_Q4_0, TOY_TYPE_Q4_1,  TOY_TYPE_Q4_K,
                                TOY_TYPE_Q5_K, TOY_TYPE_Q6_K, TOY_TYPE_IQ4_NL, TOY_TYPE_IQ4_XS};
    uint32_t rng = 0x2545f491u;
    for (int i = 0; i < ROWS * COLS; i++) {
        rng = rng * 1664525u + 1013904223u;
        w_f32[i] = (float)(int32_t)(rng >> 8) / (float)(1 << 24) - 0.25f;
    }
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int type = types[t];
        const ty_packed_kernel *amx = get_amx(type), *vnni = ty_packed_avx512(type);
        if (!amx) continue;
        size_t row_size;
        if (toy_type_row_size(type, COLS, &row_size) != TOY_OK) return false;
        if (type == TOY_TYPE_IQ4_XS) {
            /* no IQ4_XS quantizer: random bytes, each block's fp16 d a modest 2^-10 */
            for (size_t i = 0; i < ROWS * row_size; i++) {
                rng = rng * 1664525u + 1013904223u;
                w_file[i] = (uint8_t)(rng >> 24);
            }
            for (size_t i = 0; i < ROWS * row_size; i += sizeof(block_iq4_xs)) {
                const ty_half d = 0x1400;
                memcpy(w_file + i, &d, sizeof d);
            }
        } else if (toy_quantize(type, w_f32, w_file, ROWS * COLS) != TOY_OK) {
            return false;
        }
        ty_pack_rows(type, w_file, row_size, ROWS, COLS, w_packed);
        for (int j = 0; j < ACTS; j++) {
            for (int i = 0; i < COLS; i++) {
                rng = rng * 1664525u + 1013904223u;
                x_f32[i] = (float)(int32_t)(rng >> 8) / (float)(1 << 22) - 2.0f;
            }
            if (type == TOY_TYPE_Q8_0 || type == TOY_TYPE_Q4_0 || type == TOY_TYPE_IQ4_NL) {
                ty_quantize_act_q8_0(x_f32, act_q, COLS);
                for (int b = 0; b < COLS / QK8_0; b++)
                    ty_widen_q8_0((const block_q8_0 *)act_q + b, (ty_act_q8_0x *)acts[j] + b);
            } else if (type == TOY_TYPE_Q4_1) {
                ty_quantize_act_q8_1(x_f32, acts[j], COLS);
            } else if (type != TOY_TYPE_Q6_K) { /* Q4_K, Q5_K, IQ4_XS */
                ty_quantize_act_q8_K(x_f32, act_q, COLS);
                for (int b = 0; b < COLS / QK_K; b++)
                    ty_widen_q8_K((const block_q8_K *)act_q + b, (ty_act_q8_Kx *)acts[j] + b);
            } else {
                ty_quantize_act_q8_K(x_f32, acts[j], COLS);
            }
        }
        amx->gemm(COLS, w_packed, ROWS, acts, sizeof acts[0], ACTS, y_amx, ROWS);
        vnni->gemm(COLS, w_packed, ROWS, acts, sizeof acts[0], ACTS, y_vnni, ROWS);
        if (memcmp(y_amx, y_vnni, sizeof y_amx)) return false;
        if (amx->tile_act) { /* and from the tiled activations */
            static uint8_t tiled[(ACTS / 16) * (COLS / 32) * (512 + 64)] __attribute__((aligned(64)));
            if (amx->tiled_bytes(COLS, ACTS) > sizeof tiled) return false;
            amx->tile_act(COLS, acts, sizeof acts[0], 0, tiled);
            amx->gemm_tiled(COLS, w_packed, ROWS, acts, sizeof acts[0], ACTS, tiled, y_amx, ROWS);
            if (memcmp(y_amx, y_vnni, sizeof y_amx)) return false;
        }
    }
    return true;
}

bool ty_packed_amx_self_test_with(const ty_packed_kernel *(*get_amx)(int type)) {
    struct sigaction fault = {.sa_handler = amx_probe_fault}, old_ill, old_segv, old_bus;
    sigemptyset(&fault.sa_mask);
    sigaction(SIGILL, &fault, &old_ill);
    sigaction(SIGSEGV, &fault, &old_segv);
    sigaction(SIGBUS, &fault, &old_bus);
    volatile bool ok = false;
    if (!sigsetjmp(amx_probe_jump, 1)) ok = amx_products_match(get_amx);
    sigaction(SIGILL, &old_ill, NULL);
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return ok;
}

#endif

/* ---------------------------------------------------------------- the choice */

static struct {
    const char *bad_isa; /* TOY_ISA's value when it names no instruction set */
    bool amx_failed;     /* AMX present and granted, but its products failed the self-test */
    const ty_cpu_ops *ops;
    ty_cpu_ops ops_copy; /* the table's row, with the scalar GEMM kernel's FMA build where it runs */
    const ty_kernel *kernel[TOY_TYPE_COUNT];
    ty_kernel kernel_copy[TOY_TYPE_COUNT]; /* with the fastest activation quantizer */
    const ty_packed_kernel *packed[TOY_TYPE_COUNT];
    const ty_gemm_kernel *gemm_bf16; /* NULL: BF16 products round operands for the F32 kernel */
    const char *bf16_dot;            /* toy_kernel_bf16_dot's answer */
    char bf16_dot_off[300];          /* "off (probe differs: ...)" */
} chosen;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    ty_isa isa = detected_isa(), want = TY_ISA_AMX;
    const char *env = getenv("TOY_ISA");
    if (env) {
        want = (ty_isa)-1;
        for (int i = TY_ISA_SCALAR; i <= TY_ISA_AMX; i++)
            if (!strcmp(env, isa_names[i])) want = (ty_isa)i;
        if (want == (ty_isa)-1) {
            chosen.bad_isa = env;
            want = TY_ISA_SCALAR;
        }
    }
    if (isa == TY_ISA_AVX2 && avx_vnni()) isa = TY_ISA_AVXVNNI;
#if defined(__x86_64__)
    /* the tile permission is asked for only where AMX would be used */
    if (isa == TY_ISA_AVX512 && want == TY_ISA_AMX && amx_usable()) {
        chosen.amx_failed = !ty_packed_amx_self_test_with(ty_packed_amx);
        if (!chosen.amx_failed) isa = TY_ISA_AMX;
    }
#endif
    if (want < isa) isa = want;
    if (isa == TY_ISA_AVXVNNI && !avx_vnni()) isa = TY_ISA_AVX2; /* an AVX-512 CPU without it */
    chosen.ops_copy = ops_of[isa];
#if defined(__x86_64__)
    if (isa == TY_ISA_SCALAR && __builtin_cpu_supports("fma")) chosen.ops_copy.gemm = ty_gemm_kernel_scalar_fma;
#endif
    const ty_cpu_ops *ops = chosen.ops = &chosen.ops_copy;

    /* vdpbf16ps only where it computes gemm.h's BF16 dot definition */
    chosen.bf16_dot = "absent";
    if (avx512_bf16() && !ops->gemm_bf16) chosen.bf16_dot = "off (kernels below avx512)";
#if defined(__x86_64__)
    if (avx512_bf16() && ops->gemm_bf16) {
        const char *differs = ty_gemm_bf16_probe();
        chosen.gemm_bf16 = differs ? NULL : ops->gemm_bf16();
        snprintf(chosen.bf16_dot_off, sizeof chosen.bf16_dot_off, "off (probe differs: %s)", differs ? differs : "");
        chosen.bf16_dot = differs ? chosen.bf16_dot_off : "vdpbf16ps";
    }
#endif

    const char *streams = getenv("TOY_DECODE_STREAMS");
    const bool streams_set = streams && (!strcmp(streams, "1") || !strcmp(streams, "4"));
    ty_packed_choose_decode_streams(streams_set ? streams[0] - '0' : ty_cpu_intel() ? 4 : 1);
    const char *repack = getenv("TOY_REPACK");
    const bool repack_off = repack && !strcmp(repack, "0");
    for (int t = 0; t < TOY_TYPE_COUNT; t++) {
        const ty_kernel *k = NULL;
        for (int i = 0; i < 2 && !k && ops->row[i]; i++) k = ops->row[i](t);
        if (!k) k = ty_kernel_scalar(t);
        if (k) {
            chosen.kernel_copy[t] = *k;
            ty_quantize_act_fn q = ops->quantize_act ? ops->quantize_act(k->vec_dot_type) : NULL;
            if (q) chosen.kernel_copy[t].quantize_act = q;
            k = &chosen.kernel_copy[t];
        }
        chosen.kernel[t] = k;
        const ty_packed_kernel *p = NULL;
        for (int i = 0; i < 2 && !p && ops->packed[i] && !repack_off; i++) p = ops->packed[i](t);
        chosen.packed[t] = p;
    }
}

static void choose_once_only(void) {
    pthread_once(&choose_once, choose);
}

toy_status toy_kernel_init(void) {
    choose_once_only();
    if (chosen.bad_isa)
        return ty_error(TOY_ERR_INVALID, "TOY_ISA=%s: not an instruction set toy knows (scalar, avx2, avxvnni, "
                                          "avx512 or amx)", chosen.bad_isa);
    return TOY_OK;
}

const ty_cpu_ops *ty_cpu(void) {
    choose_once_only();
    return chosen.ops;
}

ty_isa ty_cpu_isa(void) {
    return ty_cpu()->isa;
}

const ty_kernel *ty_kernel_get(int type) {
    choose_once_only();
    return type >= 0 && type < TOY_TYPE_COUNT ? chosen.kernel[type] : NULL;
}

const ty_packed_kernel *ty_packed_get(int type) {
    choose_once_only();
    return type >= 0 && type < TOY_TYPE_COUNT ? chosen.packed[type] : NULL;
}

const char *toy_kernel_isa(void) {
    return ty_cpu_isa() == TY_ISA_AVX512 && chosen.amx_failed
               ? "avx512 (AMX off: its products failed the self-test)"
               : ty_isa_name(ty_cpu_isa());
}

const char *toy_kernel_bf16_dot(void) {
    choose_once_only();
    return chosen.bf16_dot;
}

const ty_gemm_kernel *ty_cpu_gemm_bf16(void) {
    choose_once_only();
    return chosen.gemm_bf16;
}

bool ty_cpu_avx_vnni(void) {
    return ty_cpu_isa() >= TY_ISA_AVXVNNI && avx_vnni();
}

bool ty_amx_self_test_failed(void) {
    choose_once_only();
    return chosen.amx_failed;
}
