/* test_attention_isa.c — the CPU attention gives the same bits under every instruction
 * set, also for inputs the fixtures never produce: scores that are NaN (a K row holding
 * +inf and -inf) or infinite, next to ordinary ones, over more cells than one segment,
 * for one token (the split decode path) and for a batch. The instruction set is chosen
 * once per process (TOY_ISA), so the test runs itself once per set ("child" mode prints
 * the output bits) and compares the printouts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "quant.h"
#include "test.h"

enum { CELLS = 300, TOKENS = 3 };

/* Query heads, KV heads, head size: groups of 2, of 6 (the vector kernels take heads four
 * at a time, then the rest), of 8 with 128-wide heads, and 80-wide heads (not whole
 * blocks of 64). */
static const int32_t shapes[][3] = {{4, 2, 64}, {18, 3, 64}, {8, 1, 128}, {6, 2, 80}};

/* Prints a hash of the outputs of two cases per shape: ordinary values, then the same
 * with infinities in K rows (NaN and infinite scores). */
static int child(void) {
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int32_t heads = shapes[sh][0], kv_heads = shapes[sh][1], hd = shapes[sh][2];
        toy_backend *be = toy_backend_cpu_new(2);
        if (!be || be->reserve(be, TOKENS, heads * hd, heads, hd) != TOY_OK) return 1;
        const size_t n_kv = (size_t)kv_heads * CELLS * hd, n_q = (size_t)TOKENS * heads * hd;
        float *k = xmalloc(n_kv * sizeof *k), *v = xmalloc(n_kv * sizeof *v);
        float *q = xmalloc(n_q * sizeof *q), *out = xmalloc(n_q * sizeof *out);
        int32_t pos[CELLS], n_used = CELLS;
        unsigned long long rng = 5;
        for (int i = 0; i < CELLS; i++) pos[i] = i;
        for (size_t i = 0; i < n_kv; i++) {
            k[i] = (float)(test_rand_u64(&rng) % 2001) / 1000.0f - 1.0f;
            v[i] = (float)(test_rand_u64(&rng) % 2001) / 1000.0f - 1.0f;
        }
        for (size_t i = 0; i < n_q; i++) q[i] = (float)(test_rand_u64(&rng) % 2001) / 1000.0f - 1.0f;
        const toy_kv_view kv = {(const uint8_t *)k, (const uint8_t *)v, TOY_TYPE_F32, TOY_TYPE_F32,
                                hd * sizeof(float), hd * sizeof(float), pos, CELLS, &n_used};
        const toy_attn_params p = {heads, kv_heads, hd, 0.125f, 0.0f, 0};
        const int32_t qpos[TOKENS] = {CELLS - 1, 150, 40}, seq[TOKENS] = {0, 0, 0};
        for (int special = 0; special < 2; special++) {
            if (special) { /* KV head 0: cell 19 gives NaN scores, cell 200 +inf; the last: -inf */
                k[19 * hd + 0] = INFINITY;
                k[19 * hd + 1] = -INFINITY;
                k[200 * hd + 5] = INFINITY;
                k[((size_t)(kv_heads - 1) * CELLS + 7) * hd + 3] = -INFINITY; /* the last KV head */
            }
            uint64_t h = 1469598103934665603ULL;
            for (int n_tok = 1; n_tok <= TOKENS; n_tok += TOKENS - 1) { /* decode, then a batch */
                be->attention(be, out, q, n_tok, qpos, seq, &kv, &p);
                for (int i = 0; i < n_tok * heads * hd; i++) h = (h ^ float_bits(out[i])) * 1099511628211ULL;
            }
            printf("%016llx\n", (unsigned long long)h);
        }
        be->free(be);
        free(k);
        free(v);
        free(q);
        free(out);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child")) return child();
    const char *isas[] = {"scalar", "avx2", "avx512"};
    char ref[1024] = "", got[1024];
    for (int i = 0; i < 3; i++) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "TOY_ISA=%s '%s' child", isas[i], argv[0]);
        FILE *f = popen(cmd, "r");
        CHECK(f != NULL);
        if (!f) break;
        const size_t n = fread(got, 1, sizeof got - 1, f);
        got[n] = 0;
        CHECK_MSG(pclose(f) == 0 && n > 0, "%s: the child failed", isas[i]);
        if (i == 0) memcpy(ref, got, sizeof ref);
        else CHECK_MSG(!strcmp(ref, got), "attention under %s differs from scalar:\n%s vs\n%s", isas[i], got, ref);
    }
    return test_finish("test_attention_isa");
}
