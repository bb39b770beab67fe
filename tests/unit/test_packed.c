/* test_packed.c — packed weights (packed.h), Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS: every packed product, the scalar
 * reference and each instruction set's, must give exactly the bits of the row kernels'
 * scalar vec_dot for every (weight row, activation row) pair, and the packed activation
 * layouts must hold the Q8_0 / Q8_K quantizer's bytes.
 *
 * Inputs: Gaussian weights through toy's quantizer, random bits (quants of -128, which
 * no quantizer emits, random six-bit scales and mins, and random fp16 scales), extreme
 * scales (+-65504, subnormal halves); Gaussian, zero, +-1000 and tiny activations; row counts around a group of 16,
 * block counts that leave residue lanes empty or uneven, activation counts around the
 * tile of 8. */
#include "packed.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "quant.h"
#include "test.h"
#include "test_inputs.h"

typedef enum { W_GAUSSIAN, W_RANDOM, W_BIG_SCALE, W_TINY_SCALE, W_MODES } weight_mode;

static int64_t block_cols(int type) {
    return type == TOY_TYPE_Q8_0 || type == TOY_TYPE_Q4_0 || type == TOY_TYPE_Q4_1 || type == TOY_TYPE_IQ4_NL ? 32 : QK_K;
}

static size_t file_block(int type) {
    switch (type) {
    case TOY_TYPE_Q8_0: return sizeof(block_q8_0);
    case TOY_TYPE_Q4_0: return sizeof(block_q4_0);
    case TOY_TYPE_Q4_1: return sizeof(block_q4_1);
    case TOY_TYPE_IQ4_NL: return sizeof(block_iq4_nl);
    case TOY_TYPE_Q4_K: return sizeof(block_q4_K);
    case TOY_TYPE_Q5_K: return sizeof(block_q5_K);
    case TOY_TYPE_IQ4_XS: return sizeof(block_iq4_xs);
    default: return sizeof(block_q6_K);
    }
}

static ty_half random_scale(weight_mode mode, unsigned long long *rng) {
    const ty_half sign = (ty_half)((test_rand_u64(rng) & 1) << 15);
    switch (mode) {
    case W_BIG_SCALE: return sign | 0x7bff; /* 65504 */
    case W_TINY_SCALE: return sign | (ty_half)(1 + test_rand_u64(rng) % 0x3ff);
    default: return ty_fp32_to_fp16(0.01f * test_rand_normal(rng));
    }
}

/* Weights of `type`: random bytes, then each block's fp16 factors (d; Q4_K, Q5_K: and
 * dmin; Q4_1: and m) of random_scale. */
static void fill_weights(int type, void *w, int64_t n_rows, int64_t n_cols, weight_mode mode,
                         unsigned long long *rng) {
    const int64_t nb = n_cols / block_cols(type);
    if (mode == W_GAUSSIAN && type != TOY_TYPE_IQ4_XS) { /* no IQ4_XS quantizer: random bytes */
        float *f = xmalloc((size_t)(n_rows * n_cols) * sizeof *f);
        test_fill_normal(f, n_rows * n_cols, 0.05f, rng);
        CHECK(toy_quantize(type, f, w, n_rows * n_cols) == TOY_OK);
        free(f);
        return;
    }
    const size_t block = file_block(type);
    size_t off[2];
    const int n_factors = test_block_factors(type, off);
    for (int64_t b = 0; b < n_rows * nb; b++) {
        uint8_t *blk = (uint8_t *)w + (size_t)b * block;
        for (size_t j = 0; j < block; j++) blk[j] = (uint8_t)(test_rand_u64(rng) & 0xff);
        for (int f = 0; f < n_factors; f++) {
            const ty_half h = random_scale(mode, rng);
            memcpy(blk + off[f], &h, sizeof h);
        }
    }
}

/* The packed activation row holds the Q8_0 (Q8_K) quantizer's scale and quants. */
static void check_act_layout(int type, const float *x, int64_t n) {
    if (type == TOY_TYPE_Q6_K || type == TOY_TYPE_Q4_1) return; /* the Q8_K (Q8_1) quantizer itself */
    if (type == TOY_TYPE_Q4_K || type == TOY_TYPE_Q5_K || type == TOY_TYPE_IQ4_XS) {
        const int64_t nb = n / QK_K;
        block_q8_K *q = xmalloc((size_t)nb * sizeof *q);
        ty_act_q8_Kx *p = xmalloc((size_t)nb * sizeof *p);
        ty_quantize_act_q8_K(x, q, n);
        ty_quantize_act_q8_Kx(x, p, n);
        for (int64_t b = 0; b < nb; b++) {
            int same = float_bits(p[b].d) == float_bits(q[b].d) && !memcmp(p[b].qs, q[b].qs, sizeof q[b].qs);
            for (int j = 0; j < 8; j++) same &= p[b].msum[j] == q[b].bsums[2 * j] + q[b].bsums[2 * j + 1];
            CHECK_MSG(same, "packed activation block %lld of %lld differs from Q8_K", (long long)b, (long long)nb);
        }
        free(q);
        free(p);
        return;
    }
    const int64_t nb = n / 32;
    block_q8_0 *q = xmalloc((size_t)nb * sizeof *q);
    ty_act_q8_0x *p = xmalloc((size_t)nb * sizeof *p);
    ty_quantize_act_q8_0(x, q, n);
    ty_quantize_act_q8_0x(x, p, n);
    for (int64_t b = 0; b < nb; b++) {
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) sum += q[b].qs[j];
        CHECK_MSG(float_bits(p[b].d) == float_bits(ty_fp16_to_fp32(q[b].d)) &&
                      !memcmp(p[b].qs, q[b].qs, sizeof q[b].qs) && p[b].start == -128 * sum,
                  "packed activation block %lld of %lld differs from Q8_0", (long long)b, (long long)nb);
    }
    free(q);
    free(p);
}

static int run_shape(int type, const ty_packed_kernel *const *kernels, const char *const *names, int n_kernels,
                     int64_t n_rows, int64_t n_cols, int64_t n_a, weight_mode wm, act_mode am,
                     unsigned long long *rng) {
    const int64_t nb = n_cols / block_cols(type);
    const ty_kernel *ref = ty_kernel_scalar(type);
    const ty_packed_kernel *pk = kernels[0];
    const size_t wblock = file_block(type);
    uint8_t *w = xmalloc((size_t)(n_rows * nb) * wblock);
    fill_weights(type, w, n_rows, n_cols, wm, rng);
    float *x = xmalloc((size_t)(n_a * n_cols) * sizeof *x);
    test_fill_acts(x, n_a * n_cols, am, rng);

    const size_t group = ty_packed_group_size(type, n_cols);
    const int64_t n_groups = (n_rows + 15) / 16;
    uint8_t *packed = xmalloc(group * (size_t)n_groups);
    ty_pack_rows(type, w, (size_t)nb * wblock, n_rows, n_cols, packed);
    /* packed in ranges of groups (as threads do at load): the same bytes */
    uint8_t *ranged = xmalloc(group * (size_t)n_groups);
    memset(ranged, 0xa5, group * (size_t)n_groups);
    for (int64_t g0 = 0, step = 1; g0 < n_groups; g0 += step, step++)
        ty_pack_groups(type, w, (size_t)nb * wblock, n_rows, n_cols, g0, g0 + step < n_groups ? g0 + step : n_groups,
                       ranged);
    CHECK_MSG(!memcmp(ranged, packed, group * (size_t)n_groups), "%s %lldx%lld: packing by ranges of groups differs",
              toy_type_name(type), (long long)n_rows, (long long)n_cols);
    free(ranged);

    size_t qa_row;
    CHECK(toy_type_row_size(ref->vec_dot_type, n_cols, &qa_row) == TOY_OK);
    uint8_t *qa = xmalloc((size_t)n_a * qa_row);
    const size_t a_stride = (size_t)nb * pk->act_block;
    uint8_t *pa = xmalloc(a_stride * (size_t)n_a);
    for (int64_t j = 0; j < n_a; j++) {
        ref->quantize_act(x + j * n_cols, qa + (size_t)j * qa_row, n_cols);
        pk->quantize_act(x + j * n_cols, pa + (size_t)j * a_stride, n_cols);
    }
    check_act_layout(type, x, n_cols);
    /* every kernel's activation quantizer writes the reference bytes */
    uint8_t *pa_k = xmalloc(a_stride);
    for (int k = 1; k < n_kernels; k++) {
        kernels[k]->quantize_act(x, pa_k, n_cols);
        CHECK_MSG(!memcmp(pa_k, pa, a_stride), "%s %s: activation bytes differ from the scalar quantizer's",
                  toy_type_name(type), names[k]);
    }
    free(pa_k);

    /* y has a spare column per row, which no kernel may write */
    const size_t y_stride = (size_t)n_rows + 1;
    float *want = xmalloc(y_stride * (size_t)n_a * sizeof *want);
    float *got = xmalloc(y_stride * (size_t)n_a * sizeof *got);
    for (int64_t j = 0; j < n_a; j++)
        for (int64_t r = 0; r < n_rows; r++)
            want[(size_t)j * y_stride + (size_t)r] = ref->vec_dot(n_cols, w + (size_t)(r * nb) * wblock, qa + (size_t)j * qa_row);
    int bad = 0;
    /* each kernel's gemm, then (pass 1) its gemm_tiled where it has one */
    for (int pass = 0; pass < 2 * n_kernels; pass++) {
        const int k = pass / 2, tiled = pass % 2;
        if (tiled && !kernels[k]->tile_act) continue;
        for (size_t i = 0; i < y_stride * (size_t)n_a; i++) got[i] = -7.0f;
        if (tiled) {
            void *t = xmalloc(kernels[k]->tiled_bytes(n_cols, n_a) + 64);
            void *t64 = (void *)(((uintptr_t)t + 63) & ~(uintptr_t)63);
            for (int64_t c = 0; c < n_a / 16; c++) kernels[k]->tile_act(n_cols, pa, a_stride, c, t64);
            kernels[k]->gemm_tiled(n_cols, packed, n_rows, pa, a_stride, n_a, t64, got, y_stride);
            free(t);
        } else {
            kernels[k]->gemm(n_cols, packed, n_rows, pa, a_stride, n_a, got, y_stride);
        }
        for (int64_t j = 0; j < n_a && !bad; j++) {
            for (int64_t r = 0; r < n_rows; r++) {
                const size_t i = (size_t)j * y_stride + (size_t)r;
                if (float_bits(got[i]) != float_bits(want[i])) {
                    CHECK_MSG(0, "%s %s%s: rows %lld cols %lld acts %lld (weights %d, acts %d): row %lld act %lld: %.9g, want %.9g",
                              toy_type_name(type), names[k], tiled ? " (tiled)" : "", (long long)n_rows, (long long)n_cols, (long long)n_a, wm, am,
                              (long long)r, (long long)j, got[i], want[i]);
                    bad = 1;
                    break;
                }
            }
            CHECK_MSG(bad || float_bits(got[(size_t)j * y_stride + (size_t)n_rows]) == float_bits(-7.0f),
                      "%s: wrote past row %lld", names[k], (long long)n_rows);
        }
    }
    free(w);
    free(x);
    free(packed);
    free(qa);
    free(pa);
    free(want);
    free(got);
    return bad;
}

#if defined(__x86_64__)
/* packed_amx.c over the C model of the tile instructions (amx_emulated.c) */
const ty_packed_kernel *ty_packed_amx_emulated(int type);
extern const char *ty_amx_emulator_fault;
#endif

#if defined(__x86_64__)
/* Kernels the AMX self-test must refuse: one that faults, one with wrong sums. */
static void gemm_trapping(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride, int64_t n_a,
                          float *y, size_t y_stride) {
    (void)n_cols, (void)w, (void)n_rows, (void)a, (void)a_stride, (void)n_a, (void)y, (void)y_stride;
    __builtin_trap(); /* ud2: SIGILL, as an instruction the CPU lacks */
}

static void gemm_off_by_one(int64_t n_cols, const void *w, int64_t n_rows, const void *a, size_t a_stride,
                            int64_t n_a, float *y, size_t y_stride) {
    ty_packed_avx512(TOY_TYPE_Q4_K)->gemm(n_cols, w, n_rows, a, a_stride, n_a, y, y_stride);
    y[(size_t)(n_a - 1) * y_stride + (size_t)(n_rows - 1)] += 1.0f;
}

static const ty_packed_kernel *get_trapping(int type) {
    static ty_packed_kernel k;
    k = *ty_packed_avx512(type);
    k.gemm = gemm_trapping;
    return &k;
}

static const ty_packed_kernel *get_off_by_one(int type) {
    static ty_packed_kernel k;
    if (type != TOY_TYPE_Q4_K) return ty_packed_avx512(type);
    k = *ty_packed_avx512(type);
    k.gemm = gemm_off_by_one;
    return &k;
}

/* The self-test that guards AMX: the tile model passes; a faulting kernel and one with a
 * wrong bit fail it, without a crash, and the signal handlers are given back. */
static void check_amx_self_test(void) {
    if (ty_cpu_isa() < TY_ISA_AVX512) {
        printf("amx self-test: skipped (the CPU or TOY_ISA=%s does not allow AVX-512)\n", ty_isa_name(ty_cpu_isa()));
        return;
    }
    struct sigaction before, after;
    sigaction(SIGILL, NULL, &before);
    CHECK_MSG(ty_packed_amx_self_test_with(ty_packed_amx_emulated), "the tile model's products failed the self-test");
    CHECK_MSG(!ty_packed_amx_self_test_with(get_trapping), "a kernel that raises SIGILL passed the self-test");
    CHECK_MSG(!ty_packed_amx_self_test_with(get_off_by_one), "a kernel with a wrong result passed the self-test");
    sigaction(SIGILL, NULL, &after);
    CHECK_MSG(after.sa_handler == before.sa_handler, "the self-test left its SIGILL handler behind");
}
#endif

static void run_type(int type) {
    const ty_packed_kernel *kernels[6] = {ty_packed_scalar(type)};
    const char *names[6] = {"scalar"};
    int n_kernels = 1;
#if defined(__x86_64__)
    if (ty_cpu_isa() >= TY_ISA_AVX2) {
        if ((kernels[n_kernels] = ty_packed_avx2(type))) names[n_kernels++] = "avx2";
    } else {
        printf("packed avx2 %s: skipped (the CPU or TOY_ISA=%s does not allow AVX2)\n", toy_type_name(type),
               ty_isa_name(ty_cpu_isa()));
    }
    if (ty_cpu_avx_vnni()) {
        if ((kernels[n_kernels] = ty_packed_avxvnni(type))) names[n_kernels++] = "avxvnni";
    } else {
        printf("packed avxvnni %s: skipped (the CPU or TOY_ISA=%s does not allow AVX-VNNI)\n", toy_type_name(type),
               ty_isa_name(ty_cpu_isa()));
    }
    if (ty_cpu_isa() >= TY_ISA_AVX512) {
        kernels[n_kernels] = ty_packed_avx512(type);
        names[n_kernels++] = "avx512";
    } else {
        printf("packed avx512 %s: skipped (the CPU or TOY_ISA=%s does not allow AVX-512 VNNI)\n", toy_type_name(type),
               ty_isa_name(ty_cpu_isa()));
    }
    /* the AMX kernels' epilogues are AVX-512: their model runs wherever that does */
    if (ty_cpu_isa() >= TY_ISA_AVX512 && ty_packed_amx_emulated(type)) {
        kernels[n_kernels] = ty_packed_amx_emulated(type);
        names[n_kernels++] = "amx (emulated tiles)";
    }
    if (ty_cpu_isa() >= TY_ISA_AMX) {
        if ((kernels[n_kernels] = ty_packed_amx(type))) names[n_kernels++] = "amx";
    } else if (ty_packed_amx_emulated(type)) {
        printf("packed amx %s: skipped (the CPU or TOY_ISA=%s does not allow AMX)\n", toy_type_name(type),
               ty_isa_name(ty_cpu_isa()));
    }
#endif
    unsigned long long rng = 0x9e3779b97f4a7c15ull;
    static const int64_t rows[] = {1, 15, 16, 17, 40};
    /* in blocks: one, three, eight, nine, eighteen, forty-eight */
    static const int64_t col_blocks[] = {1, 3, 8, 9, 18, 48};
    /* around the VNNI tile of 8, the AVX2 tiles of 4 and 5 and the AMX chunk of 16 */
    static const int64_t acts[] = {1, 2, 6, 7, 8, 9, 16, 19, 35};
    const int64_t bc = block_cols(type);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (size_t c = 0; c < sizeof col_blocks / sizeof col_blocks[0]; c++)
            for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
                const weight_mode wm = (weight_mode)((r + c + a) % W_MODES);
                const act_mode am = (act_mode)((r * 3 + c + a * 2) % A_MODES);
                run_shape(type, kernels, names, n_kernels, rows[r], col_blocks[c] * bc, acts[a], wm, am, &rng);
            }
    /* every mode on a model's shape */
    for (int wm = 0; wm < W_MODES; wm++)
        for (int am = 0; am < A_MODES; am++)
            run_shape(type, kernels, names, n_kernels, 48, 2048, 8, (weight_mode)wm, (act_mode)am, &rng);
    run_shape(type, kernels, names, n_kernels, 40, 2048, 48, W_GAUSSIAN, A_GAUSSIAN, &rng);
    /* decode over one group at a time and over four side by side (groups_tile, halves),
     * with groups left over, whole and partial */
    for (int streams = 1; streams <= 4; streams += 3) {
        ty_packed_set_decode_streams(streams);
        run_shape(type, kernels, names, n_kernels, 64, 9 * bc, 1, W_GAUSSIAN, A_GAUSSIAN, &rng);
        run_shape(type, kernels, names, n_kernels, 150, 18 * bc, 1, W_GAUSSIAN, A_GAUSSIAN, &rng);
    }
    ty_packed_set_decode_streams(0);
#if defined(__x86_64__)
    CHECK_MSG(!ty_amx_emulator_fault, "%s: the AMX kernel misused a tile: %s", toy_type_name(type),
              ty_amx_emulator_fault ? ty_amx_emulator_fault : "");
#endif
}

int main(void) {
    /* where AMX is present and granted, its products must have passed the self-test */
    CHECK_MSG(!ty_amx_self_test_failed(), "AMX products differ from the VNNI ones (self-test): running AVX-512");
    CHECK(ty_packed_group_size(TOY_TYPE_Q8_0, 64) == 2 * 544);
    CHECK(ty_packed_group_size(TOY_TYPE_Q4_0, 64) == 2 * 288);
    CHECK(ty_packed_group_size(TOY_TYPE_Q4_1, 64) == 2 * 320);
    CHECK(ty_packed_group_size(TOY_TYPE_IQ4_NL, 64) == 2 * 288);
    CHECK(ty_packed_group_size(TOY_TYPE_Q8_0, 48) == 0);
    CHECK(ty_packed_group_size(TOY_TYPE_Q4_K, 512) == 2 * 2304);
    CHECK(ty_packed_group_size(TOY_TYPE_Q4_K, 288) == 0);
    CHECK(ty_packed_group_size(TOY_TYPE_Q6_K, 256) == 3360);
    CHECK(ty_packed_group_size(TOY_TYPE_Q5_K, 512) == 2 * 2816);
    CHECK(ty_packed_group_size(TOY_TYPE_IQ4_XS, 256) == 2176);
    CHECK(ty_packed_group_size(TOY_TYPE_Q3_K, 256) == 0);
#if defined(__x86_64__)
    check_amx_self_test();
#endif
    run_type(TOY_TYPE_Q8_0);
    run_type(TOY_TYPE_Q4_0);
    run_type(TOY_TYPE_Q4_1);
    run_type(TOY_TYPE_IQ4_NL);
    run_type(TOY_TYPE_Q4_K);
    run_type(TOY_TYPE_Q5_K);
    run_type(TOY_TYPE_Q6_K);
    run_type(TOY_TYPE_IQ4_XS);
    return test_finish("test_packed");
}
