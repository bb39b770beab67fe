/* test_attention_isa.c — the CPU attention gives the same bits under every instruction
 * set, and for every way a batch can be cut, also for inputs the fixtures never produce:
 * scores that are NaN (a K row holding +inf and -inf) or infinite, next to ordinary ones,
 * over more cells than one segment.
 *
 * Within one process (one instruction set) each token's output must be the same bits
 * when it is attended alone (the split decode path) as in a batch of two sequences whose
 * stretches of tokens go in blocks (the prefill path, K transposed), with tokens that see
 * whole chunks, part of one (the diagonal) or none, for f32, f16 and q8_0 caches, with a
 * soft-cap and with a sliding window. The instruction set is chosen once per process
 * (TOY_ISA), so the test runs itself once per set ("child" mode prints the output bits)
 * and compares the printouts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "quant.h"
#include "test.h"

enum { CELLS = 300, TOKENS = 20, SEQ1_CELLS = 100 };

/* Query heads, KV heads, head size: groups of 2, of 6 (the vector kernels take heads four
 * at a time, then the rest), of 8 with 128-wide heads, and 80-wide heads (not whole
 * blocks of 64). */
static const int32_t shapes[][3] = {{4, 2, 64}, {18, 3, 64}, {8, 1, 128}, {6, 2, 80}};

/* The batch: a stretch of 8 tokens of sequence 0 (positions on both sides of chunk and
 * segment boundaries, out of order too), one of sequence 1, 6 more of sequence 0 in order,
 * 5 of sequence 1. */
static const int32_t tok_seq[TOKENS] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
static const int32_t tok_pos[TOKENS] = {299, 150, 40, 31, 32, 33, 255, 256, 99, 100,
                                        101, 102, 103, 104, 105, 10, 60, 61, 62, 63};

/* Bytes of a row of hd elements of type */
static size_t row_size(int type, int32_t hd) {
    const ty_type_traits *tr = ty_type_traits_get(type);
    return (size_t)hd / (size_t)tr->block_size * tr->type_size;
}

/* Writes n floats as cache rows of type (rows of hd) */
static void to_cache(int type, const float *src, uint8_t *dst, size_t n_rows, int32_t hd) {
    const ty_type_traits *tr = ty_type_traits_get(type);
    const size_t row_bytes = row_size(type, hd);
    for (size_t r = 0; r < n_rows; r++) {
        if (type == TOY_TYPE_F32) memcpy(dst + r * row_bytes, src + r * (size_t)hd, row_bytes);
        else tr->from_float(src + r * (size_t)hd, dst + r * row_bytes, hd);
    }
}

/* One case: the batch, then every token alone; prints a hash of the batch's output bits
 * and returns the number of tokens whose output alone differs from the batch's. */
static int run_case(ty_backend *be, const ty_kv_view *kv, const ty_attn_params *p, const float *q,
                    float *out, float *alone) {
    const size_t row = (size_t)p->n_head * (size_t)p->head_dim;
    be->attention(be, out, q, TOKENS, tok_pos, tok_seq, kv, p);
    int differ = 0;
    for (int t = 0; t < TOKENS; t++) {
        be->attention(be, alone, q + t * row, 1, tok_pos + t, tok_seq + t, kv, p);
        if (memcmp(alone, out + t * row, row * sizeof *out)) {
            if (!differ) fprintf(stderr, "token %d (seq %d, pos %d): alone != in the batch\n", t, tok_seq[t], tok_pos[t]);
            differ++;
        }
    }
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < TOKENS * row; i++) h = (h ^ float_bits(out[i])) * 1099511628211ULL;
    printf("%016llx\n", (unsigned long long)h);
    return differ;
}

static int child(void) {
    int differ = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int32_t heads = shapes[sh][0], kv_heads = shapes[sh][1], hd = shapes[sh][2];
        ty_backend *be = ty_backend_cpu_new(2);
        if (!be || be->reserve(be, TOKENS, heads * hd, heads, hd) != TOY_OK) return 1;
        /* [seq][kv head][cell][hd], two sequences */
        const size_t n_rows = 2 * (size_t)kv_heads * CELLS, n_kv = n_rows * (size_t)hd;
        const size_t n_q = (size_t)TOKENS * heads * hd;
        float *k = xmalloc(n_kv * sizeof *k), *v = xmalloc(n_kv * sizeof *v);
        float *q = xmalloc(n_q * sizeof *q), *out = xmalloc(n_q * sizeof *out);
        float *alone = xmalloc((size_t)heads * hd * sizeof *alone);
        uint8_t *kc = xmalloc(n_kv * sizeof(float)), *vc = xmalloc(n_kv * sizeof(float));
        int32_t pos[2 * CELLS], n_used[2] = {CELLS, SEQ1_CELLS};
        unsigned long long rng = 5;
        for (int i = 0; i < 2 * CELLS; i++) pos[i] = i % CELLS;
        for (size_t i = 0; i < n_kv; i++) {
            k[i] = (float)(test_rand_u64(&rng) % 2001) / 1000.0f - 1.0f;
            v[i] = (float)(test_rand_u64(&rng) % 2001) / 1000.0f - 1.0f;
        }
        for (size_t i = 0; i < n_q; i++) q[i] = (float)(test_rand_u64(&rng) % 2001) / 1000.0f - 1.0f;
        const int types[] = {TOY_TYPE_F32, TOY_TYPE_F16, TOY_TYPE_Q8_0};
        for (int special = 0; special < 2; special++) {
            if (special) { /* KV head 0: cell 19 gives NaN scores, cell 200 +inf; the last: -inf */
                k[19 * hd + 0] = INFINITY;
                k[19 * hd + 1] = -INFINITY;
                k[200 * hd + 5] = INFINITY;
                k[((size_t)(kv_heads - 1) * CELLS + 7) * hd + 3] = -INFINITY; /* the last KV head */
            }
            for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++) {
                const int type = types[ty];
                if (type == TOY_TYPE_Q8_0 && hd % QK8_0) continue;
                to_cache(type, k, kc, n_rows, hd);
                to_cache(type, v, vc, n_rows, hd);
                const size_t row_bytes = row_size(type, hd);
                const ty_kv_view kv = {kc, vc, type, type, row_bytes, row_bytes, pos, CELLS, n_used};
                /* plain, soft-capped, a sliding window of 64 */
                const ty_attn_params ps[] = {{heads, kv_heads, hd, 0.125f, 0.0f, 0},
                                              {heads, kv_heads, hd, 0.125f, 3.0f, 0},
                                              {heads, kv_heads, hd, 0.125f, 0.0f, 64}};
                for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
                    const int d = run_case(be, &kv, &ps[pi], q, out, alone);
                    if (d) fprintf(stderr, "shape %zu, type %d, case %zu/%d: %d tokens differ\n", sh, type, pi, special, d);
                    differ += d;
                }
            }
        }
        be->free(be);
        free(k);
        free(v);
        free(kc);
        free(vc);
        free(q);
        free(out);
        free(alone);
    }
    return differ ? 2 : 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child")) return child();
    const char *isas[] = {"scalar", "avx2", "avx512"};
    static char ref[16384], got[16384];
    for (int i = 0; i < 3; i++) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "TOY_ISA=%s '%s' child", isas[i], argv[0]);
        FILE *f = popen(cmd, "r");
        CHECK(f != NULL);
        if (!f) break;
        const size_t n = fread(got, 1, sizeof got - 1, f);
        got[n] = 0;
        CHECK_MSG(pclose(f) == 0 && n > 0, "%s: the child failed (a token's output alone differs from the batch's, see above)",
                  isas[i]);
        if (i == 0) memcpy(ref, got, sizeof ref);
        else CHECK_MSG(!strcmp(ref, got), "attention under %s differs from scalar:\n%s vs\n%s", isas[i], got, ref);
    }
    return test_finish("test_attention_isa");
}
