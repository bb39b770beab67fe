/* attention_cpu.c — the CPU backend's attention: softmax(q K^T * scale) V over the cells of
 * each token's sequence in the KV cache, with causal and sliding-window masks and
 * grouped query heads, in one fixed order whatever the batch, the threads or the
 * instruction set (the tasks are written once, for every instruction set). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_simd.h"
#include "backend_cpu.h"
#include "elementwise.h"
#include "error.h"
#include "model.h"
#include "quant.h"
#include "simd.h"
#include "vec_exp.h"

/* Cells of a segment: a fresh online softmax, folded into the others after (whole
 * chunks, so the chunks fall where they would without segments). */
#define ATTN_SEGMENT_CELLS 256
_Static_assert(ATTN_SEGMENT_CELLS % ATTN_CHUNK == 0, "segments are whole chunks");
/* (token, segment) states a split decode job may hold, per thread */
#define ATTN_SLOTS_PER_THREAD 64
/* A prefill's blocks: at most this many tokens of a sequence, about ATTN_BLOCK_ROWS
 * query rows (tokens x the query heads of a KV head); a sequence with fewer than
 * ATTN_BLOCK_MIN tokens in a row in the batch is attended token by token. */
#define ATTN_BLOCK_TOKENS 16
#define ATTN_BLOCK_ROWS 32
#define ATTN_BLOCK_MIN 2

/* the query rows of a block task: at most max(ATTN_BLOCK_ROWS, 2 group) */
static int32_t block_tokens(int32_t group) {
    const int32_t b = ATTN_BLOCK_ROWS / group;
    return b < 2 ? 2 : b > ATTN_BLOCK_TOKENS ? ATTN_BLOCK_TOKENS : b;
}

toy_status ty_cpu_attention_reserve(cpu_backend *c, int64_t n_tok, int64_t n_head, int64_t head_dim) {
    /* per thread: a segment's and the running fold's accumulators of a query group (at
     * most n_head * head_dim floats each), maxima and sums, the scores of a chunk of
     * cells, its K and V rows; or those of a block's rows (at most max(ATTN_BLOCK_ROWS,
     * 2 n_head) of them, block_tokens) */
    const int64_t q_cols = n_head * head_dim;
    const int64_t rows = 2 * n_head > ATTN_BLOCK_ROWS ? 2 * n_head : ATTN_BLOCK_ROWS;
    const int64_t one = 2 * (q_cols + 2 * n_head) + n_head * ATTN_CHUNK + 2 * ATTN_CHUNK * head_dim;
    const int64_t block = rows * (2 * head_dim + 4 + ATTN_CHUNK);
    c->attn_ws_per_thread = (size_t)((one > block ? one : block) + 64);
    size_t ws = c->attn_ws_per_thread * (size_t)ty_pool_size(c->pool) * sizeof(float);
    /* a slot holds every head's sums, maximum and sum: n_head * (head_dim + 2) floats */
    c->attn_slot_cap = (size_t)(q_cols + 2 * n_head);
    c->attn_n_slots = (size_t)ATTN_SLOTS_PER_THREAD * (size_t)ty_pool_size(c->pool);
    size_t slots = c->attn_n_slots * c->attn_slot_cap * sizeof(float);
    size_t lists = 3 * (size_t)(n_tok > 0 ? n_tok : 1) * sizeof(int32_t);
    ty_cpu_attention_free(c);
    c->attn_ws = malloc(ws);
    c->attn_slots = malloc(slots);
    c->attn_runs = malloc(lists);
    if (!c->attn_ws || !c->attn_slots || !c->attn_runs)
        return ty_error(TOY_ERR_NOMEM, "cannot allocate %zu bytes of scratch", ws + slots + lists);
    c->attn_tok = c->attn_runs + 2 * (n_tok > 0 ? n_tok : 1);
    return TOY_OK;
}

void ty_cpu_attention_free(cpu_backend *c) {
    free(c->attn_ws);
    free(c->attn_slots);
    free(c->attn_runs);
    free(c->attn_kv);
    c->attn_ws = c->attn_slots = c->attn_kv = NULL;
    c->attn_runs = c->attn_tok = NULL;
    c->attn_kv_cap = 0;
}

typedef struct {
    cpu_backend *c;
    float *out;
    const float *q;
    const int32_t *pos;
    const int32_t *seq_id;
    const ty_kv_view *kv;
    const ty_attn_params *p;
    const ty_type_traits *tk, *tv; /* K and V rows to float */
    int32_t group_split; /* query heads of a group are split over this many tasks */
    bool seg_split;      /* one task per segment, folded after (else in the task) */
    int32_t n_seg;       /* with seg_split: segments of the longest sequence */
    size_t slot_floats;  /* floats of one (token, segment) slot: n_head x (head_dim + 2) */
    const int32_t *tok;  /* one-token tasks: their tokens (NULL: the batch's, in order) */
    /* block tasks (ATTN_BLOCK_TASK): the runs of one sequence, its K and V converted */
    const int32_t *runs; /* (first token, tokens) of each */
    int32_t n_runs;
    int32_t kv_seq;      /* the sequence */
    int32_t kv_chunks;   /* its chunks of cells */
    const float *kt;     /* [n_head_kv][kv_chunks][head_dim][ATTN_CHUNK] */
    const float *vf;     /* [n_head_kv][kv_chunks * ATTN_CHUNK][head_dim]; NULL: the cache's f32 rows */
} attn_job;

/* The state of token t's segment s, with seg_split, laid out as attn_segment writes it
 * for all n_head heads: the weighted sums (n_head rows of head_dim), the maxima, the sums
 * of weights. */
typedef struct {
    float *acc, *m, *l;
} attn_state;

static attn_state attn_slot(const attn_job *j, int64_t t, int32_t s) {
    float *slot = j->c->attn_slots + ((size_t)t * (size_t)j->n_seg + (size_t)s) * j->slot_floats;
    const size_t sums = (size_t)j->p->n_head * (size_t)j->p->head_dim;
    return (attn_state){slot, slot + sums, slot + sums + j->p->n_head};
}

/* The attention helpers, inlined into the attention task of each instruction set. All
 * versions give the same bits: the dot product keeps 16 float lanes (element d goes to
 * lane d % 16 by a fused multiply-add, one rounding) combined pairwise (k + 8, k + 4,
 * k + 2, 1): one AVX-512 vector or two AVX2 ones; accum (fused multiply-adds) and scal
 * are elementwise. The scalar version calls fmaf, exact everywhere (a library call where
 * the CPU has no FMA, which only the portable fallback meets). */

/* x[i] = exp(x[i] - m) for i < n */
TOY_ALWAYS_INLINE void exps_scalar(int32_t n, float *x, float m) {
    for (int32_t i = 0; i < n; i++) x[i] = ty_exp_nonpos(x[i] - m);
}

/* a[d * stride] . b[d] over d < n */
TOY_ALWAYS_INLINE float dot_strided_scalar(int32_t n, const float *a, size_t stride, const float *b) {
    float l[16] = {0};
    for (int32_t d = 0; d < n; d++) l[d % 16] = fmaf(a[(size_t)d * stride], b[d], l[d % 16]);
    return ty_lanes16_sum(l);
}
TOY_ALWAYS_INLINE float dot_scalar(int32_t n, const float *a, const float *b) {
    return dot_strided_scalar(n, a, 1, b);
}
/* The largest of n scores: a comparison, not fmaxf, which is a library call on baseline
 * x86-64 (scores are never NaN: masked cells hold -inf). Any order gives the same. */
TOY_ALWAYS_INLINE float max_scalar(int32_t n, const float *x) {
    float m = -INFINITY;
    for (int32_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}
/* The sum of a chunk's n <= 32 weights: x[i] into lane i % 16, the lanes pairwise. */
TOY_ALWAYS_INLINE float chunk_sum_scalar(int32_t n, const float *x) {
    float l[16] = {0};
    for (int32_t i = 0; i < n; i++) l[i % 16] += x[i];
    return ty_lanes16_sum(l);
}
/* The cells of a chunk a query at qpos sees (kpos <= qpos, and within the sliding window
 * when n_swa > 0), as indices in order; returns how many. */
TOY_ALWAYS_INLINE int32_t live_scalar(int32_t nc, const int32_t *kpos, int32_t qpos, int32_t n_swa,
                                  int32_t *live) {
    int32_t n = 0;
    for (int32_t i = 0; i < nc; i++)
        if (kpos[i] <= qpos && !(n_swa > 0 && qpos - kpos[i] >= n_swa)) live[n++] = i;
    return n;
}
/* out[r] = dot(rows[r], q) for r < n_rows */
TOY_ALWAYS_INLINE void dots_scalar(int32_t n, int32_t n_rows, const float *const *rows, const float *q,
                               float *out) {
    for (int32_t r = 0; r < n_rows; r++) out[r] = dot_scalar(n, rows[r], q);
}
/* The scores of R query rows against the ATTN_CHUNK cells of a transposed chunk (kt[d *
 * ATTN_CHUNK + i] is element d of cell i's K row): out[r * ATTN_CHUNK + i] = dot_scalar of
 * cell i's row and query row r, which is query head r % G of the block's token r / G
 * (q0 + (r / G) tok_stride + (r % G) n). */
TOY_ALWAYS_INLINE void ktdots_scalar(int32_t n, const float *kt, int32_t R, int32_t G, const float *q0,
                                 size_t tok_stride, float *out) {
    for (int32_t r = 0; r < R; r++) {
        const float *q = q0 + (size_t)(r / G) * tok_stride + (size_t)(r % G) * (size_t)n;
        for (int32_t i = 0; i < ATTN_CHUNK; i++)
            out[(size_t)r * ATTN_CHUNK + i] = dot_strided_scalar(n, kt + i, ATTN_CHUNK, q);
    }
}
/* Every cell of a chunk, in order: the live list of a token that sees them all */
static const int32_t attn_all_cells[ATTN_CHUNK] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                                   11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                                   22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
_Static_assert(ATTN_CHUNK == 32, "attn_all_cells lists 32 cells");
/* acc[d] += w[live[r]] * rows[r][d] for r = 0 .. n_live - 1, in that order, one rounding each */
TOY_ALWAYS_INLINE void accum1_scalar(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                 const float *const *rows, float *acc) {
    for (int32_t r = 0; r < n_live; r++)
        for (int32_t d = 0; d < n; d++) acc[d] = fmaf(w[live[r]], rows[r][d], acc[d]);
}
/* accum1 for each of n_heads heads: weights ATTN_CHUNK apart, sums n apart */
TOY_ALWAYS_INLINE void accum_scalar(int32_t n, int32_t n_live, const int32_t *live, const float *w, int32_t n_heads,
                                const float *const *rows, float *acc) {
    for (int32_t h = 0; h < n_heads; h++)
        accum1_scalar(n, n_live, live, w + (size_t)h * ATTN_CHUNK, rows, acc + (size_t)h * n);
}
TOY_ALWAYS_INLINE void scal_scalar(int32_t n, float s, float *acc) {
    for (int32_t d = 0; d < n; d++) acc[d] *= s;
}

/* attn_weights for NR rows after the soft-cap: scaled, masked, the
 * maximum, the rescale, the exps and their sum as a token alone has always had them */
TOY_ALWAYS_INLINE void weights4_scalar(int32_t hd, int32_t nc, uint32_t visible, float scale, const int NR, float *w,
                                   float *m, float *l, float *acc) {
    for (int r = 0; r < NR; r++, w += ATTN_CHUNK, acc += hd) {
        for (int32_t i = 0; i < nc; i++) w[i] = visible >> i & 1u ? w[i] * scale : -INFINITY;
        const float cmax = max_scalar(nc, w);
        if (cmax > m[r]) {
            const float corr = ty_exp_nonpos(m[r] - cmax);
            scal_scalar(hd, corr, acc);
            l[r] *= corr;
            m[r] = cmax;
        }
        exps_scalar(nc, w, m[r]);
        l[r] += chunk_sum_scalar(nc, w);
    }
}
/* Bit i set for each cell i of a live list */
static inline uint32_t attn_live_bits(int32_t n_live, const int32_t *live) {
    uint32_t bits = 0;
    for (int32_t r = 0; r < n_live; r++) bits |= 1u << live[r];
    return bits;
}


/* Folds a segment's state (sums as, maximum ms, weights ls) into the running one (acc,
 * *m, *l) of one head; the running state starts with *l = 0. The reference: the tasks of
 * the vector instruction sets fold their rows with fold_rows, the same
 * operations on vectors; after a split job every set folds with this. */
static void attn_fold(int32_t hd, float *acc, float *m, float *l, const float *as, float ms,
                      float ls) {
    if (ls == 0.0f) return; /* no visible cell in the segment */
    if (*l == 0.0f) {
        memcpy(acc, as, (size_t)hd * sizeof *acc);
        *m = ms;
        *l = ls;
        return;
    }
    const float mx = ms > *m ? ms : *m;
    const float ca = ty_exp_nonpos(*m - mx), cs = ty_exp_nonpos(ms - mx); /* one of them is 1 */
    for (int32_t d = 0; d < hd; d++) acc[d] = acc[d] * ca + as[d] * cs;
    *l = *l * ca + ls * cs;
    *m = mx;
}

/* attn_fold of R rows (hd apart, each state's maximum and sum in m[r], l[r]) */
TOY_ALWAYS_INLINE void fold_scalar(int32_t hd, int32_t R, float *run_acc, float *run_m, float *run_l, const float *acc,
                               const float *m, const float *l) {
    for (int32_t r = 0; r < R; r++)
        attn_fold(hd, run_acc + (size_t)r * hd, &run_m[r], &run_l[r], acc + (size_t)r * hd, m[r], l[r]);
}

/* The exponents attn_fold takes for rows [r0, r0 + nr) into da (the running state's) and
 * ds (the segment's), 0 for a row that it copies or leaves as it is. */
TOY_ALWAYS_INLINE void fold_exponents(int32_t r0, int32_t nr, const float *run_m, const float *run_l, const float *m,
                                  const float *l, float *da, float *ds) {
    for (int32_t i = 0; i < nr; i++) {
        const int32_t r = r0 + i;
        da[i] = ds[i] = 0.0f;
        if (l[r] == 0.0f || run_l[r] == 0.0f) continue;
        const float mx = m[r] > run_m[r] ? m[r] : run_m[r];
        da[i] = run_m[r] - mx;
        ds[i] = m[r] - mx;
    }
}

/* out = acc / l; zeros where no cell was visible (acc was never written then) */
static void attn_finish(int32_t hd, const float *acc, float l, float *out) {
    if (!(l > 0.0f)) {
        memset(out, 0, (size_t)hd * sizeof *out);
        return;
    }
    const float inv = 1.0f / l;
    for (int32_t d = 0; d < hd; d++) out[d] = acc[d] * inv;
}

#if defined(__x86_64__)
/* fold_scalar with the rows' exponentials V (8: AVX2, 16: AVX-512) at a time and each
 * row's products acc * ca + as * cs on vectors of V: the same bits. */
TOY_ALWAYS_INLINE void fold_rows(const int V, int32_t hd, int32_t R, float *run_acc, float *run_m, float *run_l,
                                 const float *acc, const float *m, const float *l) {
    for (int32_t r0 = 0; r0 < R; r0 += V) {
        const int32_t nr = R - r0 < V ? R - r0 : V;
        float da[16], ds[16], ca[16], cs[16];
        fold_exponents(r0, nr, run_m, run_l, m, l, da, ds);
        for (int32_t i = nr; i < V; i++) da[i] = ds[i] = 0.0f;
        if (V == 16) {
            exps16_avx512(da, ca);
            exps16_avx512(ds, cs);
        } else {
            exps8_avx2(da, ca);
            exps8_avx2(ds, cs);
        }
        for (int32_t i = 0; i < nr; i++) {
            const int32_t r = r0 + i;
            float *ra = run_acc + (size_t)r * hd;
            const float *as = acc + (size_t)r * hd;
            if (l[r] == 0.0f) continue; /* no visible cell in the segment */
            if (run_l[r] == 0.0f) {
                memcpy(ra, as, (size_t)hd * sizeof *ra);
                run_m[r] = m[r];
                run_l[r] = l[r];
                continue;
            }
            if (V == 16) fold_row_avx512(hd, ra, as, ca[i], cs[i]);
            else fold_row_avx2(hd, ra, as, ca[i], cs[i]);
            run_l[r] = run_l[r] * ca[i] + l[r] * cs[i];
            run_m[r] = m[r] > run_m[r] ? m[r] : run_m[r];
        }
    }
}
#endif

/* ---------------------------------------------------------------- one text, three sets
 *
 * The tasks below are written once, as always-inline functions of the instruction set
 * (isa, a constant: TY_ISA_SCALAR, _AVX2 or _AVX512), and instantiated per set at the
 * end. The helpers they call pick that set's version; the vector versions are static
 * inline with their target attribute, not always-inline: an always-inline function of
 * a wider target is refused in a caller without it, even in a branch the constant
 * drops. The instances are flattened so that every helper is inlined all the same, and
 * so are these functions: clang's flatten reaches only the calls written in the
 * flattened function itself. */
#define ATTN_FLATTEN __attribute__((flatten))
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_dots(const int isa, int32_t n, int32_t n_rows, const float *const *rows, const float *q,
                                 float *out) {
    if (isa == TY_ISA_SCALAR) dots_scalar(n, n_rows, rows, q, out);
#if defined(__x86_64__)
    else if (isa == TY_ISA_AVX2) dots_avx2(n, n_rows, rows, q, out);
    else dots_avx512(n, n_rows, rows, q, out);
#endif
}
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_ktdots(const int isa, int32_t n, const float *kt, int32_t R, int32_t G, const float *q0,
                                   size_t tok_stride, float *out) {
    if (isa == TY_ISA_SCALAR) ktdots_scalar(n, kt, R, G, q0, tok_stride, out);
#if defined(__x86_64__)
    else if (isa == TY_ISA_AVX2) ktdots_avx2(n, kt, R, G, q0, tok_stride, out);
    else ktdots_avx512(n, kt, R, G, q0, tok_stride, out);
#endif
}
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_weights4(const int isa, int32_t hd, int32_t nc, uint32_t visible, float scale,
                                     const int NR, float *w, float *m, float *l, float *acc) {
    if (isa == TY_ISA_SCALAR) weights4_scalar(hd, nc, visible, scale, NR, w, m, l, acc);
#if defined(__x86_64__)
    else if (isa == TY_ISA_AVX2) weights4_avx2(hd, nc, visible, scale, NR, w, m, l, acc);
    else weights4_avx512(hd, nc, visible, scale, NR, w, m, l, acc);
#endif
}
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_accum(const int isa, int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                  int32_t n_heads, const float *const *rows, float *acc) {
    if (isa == TY_ISA_SCALAR) accum_scalar(n, n_live, live, w, n_heads, rows, acc);
#if defined(__x86_64__)
    else if (isa == TY_ISA_AVX2) accum_avx2(n, n_live, live, w, n_heads, rows, acc);
    else accum_avx512(n, n_live, live, w, n_heads, rows, acc);
#endif
}
/* attn_accum of n_rows rows that see all nc cells of the chunk */
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_accum_all(const int isa, int32_t n, int32_t nc, const float *w, int32_t n_rows,
                                      const float *const *rows, float *acc) {
    if (isa == TY_ISA_SCALAR) accum_scalar(n, nc, attn_all_cells, w, n_rows, rows, acc);
#if defined(__x86_64__)
    else if (isa == TY_ISA_AVX2) accum_all_avx2(n, nc, w, n_rows, rows, acc);
    else accum_avx512(n, nc, attn_all_cells, w, n_rows, rows, acc);
#endif
}
ATTN_FLATTEN TOY_ALWAYS_INLINE const float *attn_row(const int isa, int type, const ty_type_traits *tr, const uint8_t *src,
                                        float *buf, int32_t n) {
#if defined(__x86_64__)
    if (isa == TY_ISA_AVX512) return row_avx512(type, tr, src, buf, n);
    if (isa == TY_ISA_AVX2) return row_avx2(type, tr, src, buf, n);
#endif
    return row_scalar(type, tr, src, buf, n);
}
/* AVX2 lists the live cells as the scalar version does */
ATTN_FLATTEN TOY_ALWAYS_INLINE int32_t attn_live(const int isa, int32_t nc, const int32_t *kpos, int32_t qpos, int32_t n_swa,
                                    int32_t *live) {
#if defined(__x86_64__)
    if (isa == TY_ISA_AVX512) return live_avx512(nc, kpos, qpos, n_swa, live);
#endif
    return live_scalar(nc, kpos, qpos, n_swa, live);
}
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_fold_rows(const int isa, int32_t hd, int32_t R, float *run_acc, float *run_m,
                                      float *run_l, const float *acc, const float *m, const float *l) {
    if (isa == TY_ISA_SCALAR) fold_scalar(hd, R, run_acc, run_m, run_l, acc, m, l);
#if defined(__x86_64__)
    else if (isa == TY_ISA_AVX2) fold_rows(8, hd, R, run_acc, run_m, run_l, acc, m, l);
    else fold_rows(16, hd, R, run_acc, run_m, run_l, acc, m, l);
#endif
}

/* The scores of a chunk (w, nc of them) of n_rows query rows of one token become their
 * weights: soft-capped, scaled, -inf where the token does not see the cell (bit i of
 * visible clear); each row's maximum m[r], sum of weights l[r] and sums acc (rows hd
 * apart) rescaled if its maximum grew; w[i] = exp(w[i] - m[r]); l[r] += their sum. Rows
 * are ATTN_CHUNK scores apart; attn_weights4 takes them four at a time. */
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_weights(const int isa, int32_t hd, int32_t nc, uint32_t visible, float scale, float cap,
                                            int32_t n_rows, float *w, float *m, float *l, float *acc) {
    if (cap > 0.0f)
        for (int32_t r = 0; r < n_rows; r++)
            for (int32_t i = 0; i < nc; i++)
                w[(size_t)r * ATTN_CHUNK + i] = tanhf(w[(size_t)r * ATTN_CHUNK + i] * (1.0f / cap)) * cap;
    for (int32_t r = 0; r < n_rows; r += 4) {
        float *wr = w + (size_t)r * ATTN_CHUNK, *ar = acc + (size_t)r * hd;
        switch (n_rows - r < 4 ? n_rows - r : 4) {
        case 1: attn_weights4(isa, hd, nc, visible, scale, 1, wr, m + r, l + r, ar); break;
        case 2: attn_weights4(isa, hd, nc, visible, scale, 2, wr, m + r, l + r, ar); break;
        case 3: attn_weights4(isa, hd, nc, visible, scale, 3, wr, m + r, l + r, ar); break;
        default: attn_weights4(isa, hd, nc, visible, scale, 4, wr, m + r, l + r, ar); break;
        }
    }
}

/* One token and one KV head: the query heads sharing that KV head go through the cells
 * together, so each K and V row is read (and converted to float) once for the group. A
 * half or 8-bit cache rounds only K and V, not the queries: ggml would round the queries
 * to K's type too, which doubles the error of a q8_0 cache on models with large scores
 * (the gemma2 fixture: median relRMS 0.102 against 0.072).
 *
 * The cells of a sequence are cut into segments of ATTN_SEGMENT_CELLS, each a fresh
 * online (flash-style) softmax over chunks of ATTN_CHUNK cells: the chunk's K and V rows
 * as floats and its scores first, then per head one rescale of the running sum if the
 * maximum grew, the weighted V rows, accumulated in registers, and the chunk's sum of
 * weights (16 lanes combined pairwise) added to the running sum. The segments are then
 * folded in order (attn_fold). The cut depends only on the cell index, so the result
 * does not depend on the batch or the threads; in decode, the segments of one token can
 * run on different threads. */
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_segment(const int isa, const attn_job *j, int64_t t, int32_t g, int32_t head0,
                                            int32_t group, int32_t c_begin, int32_t c_end,
                                            float *acc, float *m, float *l, float *ws) {
    const ty_attn_params *p = j->p;
    const ty_kv_view *kv = j->kv;
    const int32_t hd = p->head_dim;
    float *scores = ws, *kbuf = scores + (size_t)group * ATTN_CHUNK;
    float *vbuf = kbuf + (size_t)ATTN_CHUNK * hd;
    const float *q = j->q + (t * p->n_head + head0) * hd;
    for (int32_t h = 0; h < group; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
    }
    memset(acc, 0, (size_t)group * hd * sizeof *acc);
    const int32_t seq = j->seq_id[t], qpos = j->pos[t];
    const int64_t base = (int64_t)seq * kv->cells_per_seq;
    /* the sequence's rows of KV head g follow each other from here */
    const size_t head_row = ((size_t)seq * (size_t)p->n_head_kv + (size_t)g) * (size_t)kv->cells_per_seq;
    for (int32_t c0 = c_begin; c0 < c_end; c0 += ATTN_CHUNK) {
        const int32_t nc = c_end - c0 < ATTN_CHUNK ? c_end - c0 : ATTN_CHUNK;
        /* the cells this query sees, in order */
        int32_t live[ATTN_CHUNK];
        const int32_t n_live = attn_live(isa, nc, kv->pos + base + c0, qpos, p->n_swa, live);
        if (!n_live) continue;
        /* all rows converted before any is read back: a load right after the stores
         * that wrote it waits for them */
        const float *krows[ATTN_CHUNK], *vrows[ATTN_CHUNK];
        for (int32_t r = 0; r < n_live; r++) {
            const size_t row = head_row + (size_t)(c0 + live[r]);
            krows[r] = attn_row(isa, kv->type_k, j->tk, kv->k + row * kv->head_bytes_k,
                                kbuf + (size_t)r * hd, hd);
            vrows[r] = attn_row(isa, kv->type_v, j->tv, kv->v + row * kv->head_bytes_v,
                                vbuf + (size_t)r * hd, hd);
        }
        /* each head's scores of the chunk's cells, the seen ones (the others are never read) */
        for (int32_t h = 0; h < group; h++) {
            float *w = scores + (size_t)h * ATTN_CHUNK;
            if (n_live == nc) {
                attn_dots(isa, hd, n_live, krows, q + (size_t)h * hd, w);
                continue;
            }
            float dots[ATTN_CHUNK];
            attn_dots(isa, hd, n_live, krows, q + (size_t)h * hd, dots);
            memset(w, 0, ATTN_CHUNK * sizeof *w);
            for (int32_t r = 0; r < n_live; r++) w[live[r]] = dots[r];
        }
        attn_weights(isa, hd, nc, attn_live_bits(n_live, live), p->scale, p->softcap, group, scores, m, l, acc);
        /* acc += w_i * v_i over the live cells in order, each element on its own; the
         * group's heads together, so that each V row is loaded once for all of them */
        attn_accum(isa, hd, n_live, live, scores, group, vrows, acc);
    }
}

/* A task is one token (of j->tok when the job has a list, else the batch's t-th), one KV head and a share of the query heads using it (all of them
 * in a batch, fewer in decode so the threads have enough tasks), and, when the job
 * splits the cells (seg_split), one segment of ATTN_SEGMENT_CELLS cells; otherwise the
 * task folds its segments in order itself. Either way each segment is computed alone and
 * the segments are folded in order by attn_fold, so the result is the same. */
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_token_task(const int isa, void *ctx, int64_t task, int thread) {
    attn_job *j = ctx;
    const ty_attn_params *p = j->p;
    const int32_t hd = p->head_dim, n_split = j->group_split, n_seg = j->seg_split ? j->n_seg : 1;
    const int32_t s = (int32_t)(task % n_seg);
    const int64_t rest = task / n_seg;
    const int64_t i = rest / ((int64_t)p->n_head_kv * n_split), t = j->tok ? j->tok[i] : i;
    const int32_t g = (int32_t)(rest / n_split % p->n_head_kv), share = (int32_t)(rest % n_split);
    /* share k of n_split takes heads [k G / n_split, (k + 1) G / n_split) of the group of
     * G: never empty, since n_split <= G */
    const int32_t G = p->n_head / p->n_head_kv;
    const int32_t h0 = share * G / n_split, group = (share + 1) * G / n_split - h0;
    const int32_t head0 = g * G + h0; /* the group's heads are adjacent */
    const int32_t n = j->kv->n_used[j->seq_id[t]];
    /* the thread's workspace: one segment's sums, maxima and weights, the running fold
     * of the segments so far, then attn_segment's scratch (a split job's segment goes
     * straight to its slot instead) */
    float *acc = j->c->attn_ws + (size_t)thread * j->c->attn_ws_per_thread;
    float *m = acc + (size_t)group * hd, *l = m + group;
    float *run_acc = l + group, *run_m = run_acc + (size_t)group * hd, *run_l = run_m + group;
    float *ws = run_l + group;
    if (j->seg_split) {
        /* this segment only: into its slot, folded by cpu_attention */
        const int32_t c_begin = s * ATTN_SEGMENT_CELLS;
        const int32_t c_end = n - c_begin < ATTN_SEGMENT_CELLS ? n : c_begin + ATTN_SEGMENT_CELLS;
        const attn_state st = attn_slot(j, t, s);
        float *st_m = st.m + head0, *st_l = st.l + head0;
        if (c_begin >= c_end) { /* past this token's cells: an empty segment */
            for (int32_t h = 0; h < group; h++) st_m[h] = -INFINITY, st_l[h] = 0.0f;
            return;
        }
        attn_segment(isa, j, t, g, head0, group, c_begin, c_end, st.acc + (size_t)head0 * hd, st_m,
                     st_l, ws);
        return;
    }
    for (int32_t h = 0; h < group; h++) run_l[h] = 0.0f;
    for (int32_t c_begin = 0; c_begin < n; c_begin += ATTN_SEGMENT_CELLS) {
        const int32_t c_end = n - c_begin < ATTN_SEGMENT_CELLS ? n : c_begin + ATTN_SEGMENT_CELLS;
        attn_segment(isa, j, t, g, head0, group, c_begin, c_end, acc, m, l, ws);
        attn_fold_rows(isa, hd, group, run_acc, run_m, run_l, acc, m, l);
    }
    for (int32_t h = 0; h < group; h++)
        attn_finish(hd, run_acc + (size_t)h * hd, run_l[h], j->out + (t * p->n_head + head0 + h) * hd);
}

/* ---------------------------------------------------------------- blocks of tokens */

/* A prefill's tokens go in blocks: up to ATTN_BLOCK_TOKENS tokens of one sequence and
 * one KV head, so nt x group query rows, share each chunk's K and V rows. K comes
 * transposed (attn_convert_task wrote it once for the whole call: [d][cell of the chunk]),
 * so that attn_ktdots computes 16 cells' scores in a vector with no horizontal sums; V
 * comes as float rows. Every row's arithmetic is the one attn_segment does for its token
 * alone, in the same order: its scores have the same bits (the same 16 lanes combined
 * pairwise, see attention_cpu.c), and its softmax and V sums are the same calls. Only
 * where a token sees part of a chunk (the diagonal, a window's edge) does it take its
 * own cells, as attn_segment would. */
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_block_segment(const int isa, const attn_job *j, int32_t t0, int32_t nt, int32_t g,
                                                  int32_t c_begin, int32_t c_end, float *acc, float *m,
                                                  float *l, float *scores) {
    const ty_attn_params *p = j->p;
    const ty_kv_view *kv = j->kv;
    const int32_t hd = p->head_dim, G = p->n_head / p->n_head_kv, R = nt * G;
    const size_t tok_stride = (size_t)p->n_head * (size_t)hd;
    const float *q0 = j->q + ((size_t)t0 * (size_t)p->n_head + (size_t)g * (size_t)G) * (size_t)hd;
    for (int32_t r = 0; r < R; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    memset(acc, 0, (size_t)R * (size_t)hd * sizeof *acc);
    const int64_t base = (int64_t)j->kv_seq * kv->cells_per_seq;
    const size_t head_row = ((size_t)j->kv_seq * (size_t)p->n_head_kv + (size_t)g) * (size_t)kv->cells_per_seq;
    const float *kt_head = j->kt + (size_t)g * (size_t)j->kv_chunks * ATTN_CHUNK * (size_t)hd;
    const float *vf_head = j->vf ? j->vf + (size_t)g * (size_t)j->kv_chunks * ATTN_CHUNK * (size_t)hd : NULL;
    for (int32_t c0 = c_begin; c0 < c_end; c0 += ATTN_CHUNK) {
        const int32_t nc = c_end - c0 < ATTN_CHUNK ? c_end - c0 : ATTN_CHUNK;
        /* the cells each token sees: all of them or none where the chunk's positions lie
         * on one side of the token's (most chunks), else listed */
        const int32_t *kpos = kv->pos + base + c0;
        int32_t kmin = kpos[0], kmax = kpos[0];
        for (int32_t i = 1; i < nc; i++) {
            kmin = kpos[i] < kmin ? kpos[i] : kmin;
            kmax = kpos[i] > kmax ? kpos[i] : kmax;
        }
        const uint32_t all = nc == ATTN_CHUNK ? ~0u : (1u << nc) - 1u;
        int32_t live[ATTN_BLOCK_TOKENS][ATTN_CHUNK], n_live[ATTN_BLOCK_TOKENS], seen = 0;
        uint32_t visible[ATTN_BLOCK_TOKENS];
        for (int32_t tt = 0; tt < nt; tt++) {
            const int32_t qpos = j->pos[t0 + tt];
            if (qpos >= kmax && !(p->n_swa > 0 && qpos - kmin >= p->n_swa)) {
                n_live[tt] = nc;
                visible[tt] = all;
            } else if (qpos < kmin || (p->n_swa > 0 && qpos - kmax >= p->n_swa)) {
                n_live[tt] = 0;
                visible[tt] = 0;
            } else {
                n_live[tt] = attn_live(isa, nc, kpos, qpos, p->n_swa, live[tt]);
                visible[tt] = attn_live_bits(n_live[tt], live[tt]);
            }
            seen |= n_live[tt];
        }
        if (!seen) continue;
        /* the K and V of the chunk after next towards the cache in L2: for a long
         * sequence they come from L3, in an order the hardware prefetcher misses */
        const int32_t ahead = c0 / ATTN_CHUNK + 2;
        if (ahead < j->kv_chunks) {
            const char *kn = (const char *)(kt_head + (size_t)ahead * ATTN_CHUNK * (size_t)hd);
            const char *vn = vf_head ? (const char *)(vf_head + (size_t)ahead * ATTN_CHUNK * (size_t)hd)
                                     : (const char *)(kv->v + (head_row + (size_t)ahead * ATTN_CHUNK) * kv->head_bytes_v);
            const size_t k_bytes = ATTN_CHUNK * (size_t)hd * sizeof(float);
            const size_t v_bytes = vf_head ? k_bytes : ATTN_CHUNK * kv->head_bytes_v;
            for (size_t o = 0; o < k_bytes; o += 64) __builtin_prefetch(kn + o, 0, 2);
            for (size_t o = 0; o < v_bytes; o += 64) __builtin_prefetch(vn + o, 0, 2);
        }
        const float *vrows[ATTN_CHUNK];
        for (int32_t i = 0; i < nc; i++)
            vrows[i] = vf_head ? vf_head + (size_t)(c0 + i) * (size_t)hd
                               : (const float *)(kv->v + (head_row + (size_t)(c0 + i)) * kv->head_bytes_v);
        /* every row's scores of all ATTN_CHUNK cells (cells past nc are zeros) */
        attn_ktdots(isa, hd, kt_head + (size_t)(c0 / ATTN_CHUNK) * ATTN_CHUNK * (size_t)hd, R, G, q0, tok_stride,
                    scores);
        /* the weights: tokens that see the whole chunk together (their rows four at a
         * time whatever G), the others with their own cells */
        for (int32_t tt = 0; tt < nt;) {
            int32_t te = tt + 1;
            if (n_live[tt] == nc)
                while (te < nt && n_live[te] == nc) te++;
            if (n_live[tt]) {
                const int32_t r = tt * G;
                attn_weights(isa, hd, nc, visible[tt], p->scale, p->softcap, (te - tt) * G,
                             scores + (size_t)r * ATTN_CHUNK, m + r, l + r, acc + (size_t)r * hd);
            }
            tt = te;
        }
        /* the V rows: tokens that see the whole chunk together (each row loaded once for
         * all their query rows), the others over their own cells */
        for (int32_t tt = 0; tt < nt;) {
            if (n_live[tt] == nc) {
                int32_t te = tt + 1;
                while (te < nt && n_live[te] == nc) te++;
                attn_accum_all(isa, hd, nc, scores + (size_t)tt * G * ATTN_CHUNK, (te - tt) * G, vrows,
                               acc + (size_t)tt * G * hd);
                tt = te;
                continue;
            }
            if (n_live[tt]) {
                const float *own[ATTN_CHUNK];
                for (int32_t r = 0; r < n_live[tt]; r++) own[r] = vrows[live[tt][r]];
                attn_accum(isa, hd, n_live[tt], live[tt], scores + (size_t)tt * G * ATTN_CHUNK, G, own,
                           acc + (size_t)tt * G * hd);
            }
            tt++;
        }
    }
}

/* A block task: one run of tokens (j->runs, the last run first: the later a token, the
 * more cells it sees, so the longest tasks start first) and one KV head, its segments
 * folded in order as attn_token_task folds a token's. */
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_block_task(const int isa, void *ctx, int64_t task, int thread) {
    attn_job *j = ctx;
    const ty_attn_params *p = j->p;
    const int32_t hd = p->head_dim, G = p->n_head / p->n_head_kv;
    const int32_t run = j->n_runs - 1 - (int32_t)(task / p->n_head_kv), g = (int32_t)(task % p->n_head_kv);
    const int32_t t0 = j->runs[2 * run], nt = j->runs[2 * run + 1], R = nt * G;
    const int32_t n = j->kv->n_used[j->kv_seq];
    float *acc = j->c->attn_ws + (size_t)thread * j->c->attn_ws_per_thread;
    float *m = acc + (size_t)R * hd, *l = m + R;
    float *run_acc = l + R, *run_m = run_acc + (size_t)R * hd, *run_l = run_m + R;
    float *scores = run_l + R;
    for (int32_t r = 0; r < R; r++) run_l[r] = 0.0f;
    for (int32_t c_begin = 0; c_begin < n; c_begin += ATTN_SEGMENT_CELLS) {
        const int32_t c_end = n - c_begin < ATTN_SEGMENT_CELLS ? n : c_begin + ATTN_SEGMENT_CELLS;
        attn_block_segment(isa, j, t0, nt, g, c_begin, c_end, acc, m, l, scores);
        attn_fold_rows(isa, hd, R, run_acc, run_m, run_l, acc, m, l);
    }
    for (int32_t r = 0; r < R; r++) {
        const int32_t tt = r / G, h = r % G;
        attn_finish(hd, run_acc + (size_t)r * hd, run_l[r],
                    j->out + ((size_t)(t0 + tt) * (size_t)p->n_head + (size_t)(g * G + h)) * (size_t)hd);
    }
}

/* One chunk of one KV head of j->kv_seq: its K rows as floats, transposed into kt
 * ([d][cell], cells past the sequence's end zero), and, when the cache's V is not f32,
 * its V rows as floats into vf. */
ATTN_FLATTEN TOY_ALWAYS_INLINE void attn_convert_task(const int isa, void *ctx, int64_t task, int thread) {
    attn_job *j = ctx;
    const ty_attn_params *p = j->p;
    const ty_kv_view *kv = j->kv;
    const int32_t hd = p->head_dim, g = (int32_t)(task / j->kv_chunks), ch = (int32_t)(task % j->kv_chunks);
    const int32_t n = kv->n_used[j->kv_seq];
    const size_t head_row = ((size_t)j->kv_seq * (size_t)p->n_head_kv + (size_t)g) * (size_t)kv->cells_per_seq;
    const size_t first = (size_t)g * (size_t)j->kv_chunks * ATTN_CHUNK + (size_t)ch * ATTN_CHUNK;
    float *kt = (float *)j->kt + first * (size_t)hd;
    float *row = j->c->attn_ws + (size_t)thread * j->c->attn_ws_per_thread;
    for (int32_t i = 0; i < ATTN_CHUNK; i++) {
        const int32_t cell = ch * ATTN_CHUNK + i;
        if (cell >= n) {
            for (int32_t d = 0; d < hd; d++) kt[(size_t)d * ATTN_CHUNK + i] = 0.0f;
            continue;
        }
        const float *k = attn_row(isa, kv->type_k, j->tk, kv->k + (head_row + (size_t)cell) * kv->head_bytes_k, row, hd);
        for (int32_t d = 0; d < hd; d++) kt[(size_t)d * ATTN_CHUNK + i] = k[d];
        if (j->vf)
            attn_row(isa, kv->type_v, j->tv, kv->v + (head_row + (size_t)cell) * kv->head_bytes_v,
                     (float *)j->vf + (first + (size_t)i) * (size_t)hd, hd);
    }
}

/* The tasks of each instruction set */
ATTN_FLATTEN static void attention_task_scalar(void *ctx, int64_t task, int thread) { attn_token_task(TY_ISA_SCALAR, ctx, task, thread); }
ATTN_FLATTEN static void attention_block_task_scalar(void *ctx, int64_t task, int thread) { attn_block_task(TY_ISA_SCALAR, ctx, task, thread); }
ATTN_FLATTEN static void attention_convert_task_scalar(void *ctx, int64_t task, int thread) { attn_convert_task(TY_ISA_SCALAR, ctx, task, thread); }
#if defined(__x86_64__)
TOY_AVX2 ATTN_FLATTEN static void attention_task_avx2(void *ctx, int64_t task, int thread) { attn_token_task(TY_ISA_AVX2, ctx, task, thread); }
TOY_AVX2 ATTN_FLATTEN static void attention_block_task_avx2(void *ctx, int64_t task, int thread) { attn_block_task(TY_ISA_AVX2, ctx, task, thread); }
TOY_AVX2 ATTN_FLATTEN static void attention_convert_task_avx2(void *ctx, int64_t task, int thread) { attn_convert_task(TY_ISA_AVX2, ctx, task, thread); }
TOY_AVX512 ATTN_FLATTEN static void attention_task_avx512(void *ctx, int64_t task, int thread) { attn_token_task(TY_ISA_AVX512, ctx, task, thread); }
TOY_AVX512 ATTN_FLATTEN static void attention_block_task_avx512(void *ctx, int64_t task, int thread) { attn_block_task(TY_ISA_AVX512, ctx, task, thread); }
TOY_AVX512 ATTN_FLATTEN static void attention_convert_task_avx512(void *ctx, int64_t task, int thread) { attn_convert_task(TY_ISA_AVX512, ctx, task, thread); }
#endif

/* The tasks of one instruction set, by the set cpu.h's table names */
typedef struct {
    ty_task_fn token, block, convert;
} attn_tasks;

static const attn_tasks tasks_of[] = {
    [TY_ISA_SCALAR] = {attention_task_scalar, attention_block_task_scalar, attention_convert_task_scalar},
#if defined(__x86_64__)
    [TY_ISA_AVX2] = {attention_task_avx2, attention_block_task_avx2, attention_convert_task_avx2},
    [TY_ISA_AVX512] = {attention_task_avx512, attention_block_task_avx512, attention_convert_task_avx512},
#endif
};

/* Converts sequence seq's K and V rows for block tasks into c->attn_kv (grown as
 * needed); false when there is no memory for them (the tokens then go one by one). */
static bool attn_convert(cpu_backend *c, attn_job *j, const attn_tasks *tasks, int32_t seq) {
    const ty_attn_params *p = j->p;
    const int32_t n = j->kv->n_used[seq];
    const size_t chunks = ((size_t)n + ATTN_CHUNK - 1) / ATTN_CHUNK;
    const size_t per_head = chunks * ATTN_CHUNK * (size_t)p->head_dim;
    const size_t copies = j->kv->type_v == TOY_TYPE_F32 ? 1 : 2; /* K, and V unless f32 */
    if (per_head > SIZE_MAX / sizeof(float) / copies / (size_t)p->n_head_kv) return false;
    const size_t floats = per_head * (size_t)p->n_head_kv * copies;
    if (floats > c->attn_kv_cap) {
        free(c->attn_kv);
        c->attn_kv_cap = 0;
        c->attn_kv = malloc(floats * sizeof(float));
        if (!c->attn_kv) return false;
        c->attn_kv_cap = floats;
    }
    j->kv_seq = seq;
    j->kv_chunks = (int32_t)chunks;
    j->kt = c->attn_kv;
    j->vf = copies == 2 ? c->attn_kv + per_head * (size_t)p->n_head_kv : NULL;
    ty_pool_run(c->pool, (int64_t)p->n_head_kv * (int64_t)chunks, tasks->convert, j);
    return true;
}

/* Prefill: each stretch of at least ATTN_BLOCK_MIN tokens of one sequence in a row goes
 * in block tasks (its K and V converted first); returns the tokens left to one-token
 * tasks, listed in c->attn_tok. */
static int64_t attn_blocks(cpu_backend *c, attn_job *j, const attn_tasks *tasks, int64_t n_tok, int64_t want) {
    const ty_attn_params *p = j->p;
    const int32_t group = p->n_head / p->n_head_kv;
    int64_t n_single = 0;
    for (int64_t t = 0; t < n_tok;) {
        const int32_t seq = j->seq_id[t];
        int64_t end = t + 1;
        while (end < n_tok && j->seq_id[end] == seq) end++;
        if (end - t < ATTN_BLOCK_MIN || !attn_convert(c, j, tasks, seq)) {
            for (; t < end; t++) c->attn_tok[n_single++] = (int32_t)t;
            continue;
        }
        /* blocks small enough to give the threads enough tasks */
        int64_t nb = block_tokens(group);
        const int64_t fit = (end - t) * p->n_head_kv / want;
        if (fit < nb) nb = fit < 2 ? 2 : fit;
        int32_t n_runs = 0;
        while (t < end) {
            const int64_t len = end - t < nb ? end - t : nb;
            if (len == 1) {
                c->attn_tok[n_single++] = (int32_t)t;
            } else {
                c->attn_runs[2 * n_runs] = (int32_t)t;
                c->attn_runs[2 * n_runs + 1] = (int32_t)len;
                n_runs++;
            }
            t += len;
        }
        j->runs = c->attn_runs;
        j->n_runs = n_runs;
        ty_pool_run(c->pool, (int64_t)n_runs * p->n_head_kv, tasks->block, j);
    }
    return n_single;
}

void ty_cpu_attention(ty_backend *be, float *out, const float *q, int64_t n_tok,
                      const int32_t *pos, const int32_t *seq_id, const ty_kv_view *kv,
                      const ty_attn_params *p) {
    cpu_backend *c = (cpu_backend *)be;
    attn_job j = {.c = c, .out = out, .q = q, .pos = pos, .seq_id = seq_id, .kv = kv, .p = p,
                  .tk = ty_type_traits_get(kv->type_k), .tv = ty_type_traits_get(kv->type_v),
                  .group_split = 1, .n_seg = 1};
    const int32_t hd = p->head_dim, group = p->n_head / p->n_head_kv;
    const int64_t want = 4 * (int64_t)ty_pool_size(c->pool); /* tasks for the threads */
    /* the SIMD tasks take whole vectors of head_dim */
    attn_tasks tasks = tasks_of[hd % 16 == 0 ? c->cpu->attention : TY_ISA_SCALAR];
    /* Few tokens (decode): first one task per segment of cells (each K and V row still
     * read once), then, if that is not enough, split each group's query heads (their K
     * and V rows are then read once per share). */
    if (n_tok * p->n_head_kv < want) {
        int32_t longest = 0;
        for (int64_t t = 0; t < n_tok; t++)
            if (kv->n_used[seq_id[t]] > longest) longest = kv->n_used[seq_id[t]];
        const int32_t n_seg = (longest + ATTN_SEGMENT_CELLS - 1) / ATTN_SEGMENT_CELLS;
        j.slot_floats = (size_t)p->n_head * (size_t)(hd + 2);
        if (n_seg > 1 && (size_t)n_tok * (size_t)n_seg <= c->attn_n_slots &&
            j.slot_floats <= c->attn_slot_cap) {
            j.seg_split = true;
            j.n_seg = n_seg;
        }
    }
    /* the rest: blocks of a sequence's tokens where there are enough of them in a row */
    int64_t n_single = n_tok;
    if (!j.seg_split) {
        n_single = attn_blocks(c, &j, &tasks, n_tok, want);
        j.tok = c->attn_tok;
    }
    const int64_t n_tasks = n_single * p->n_head_kv * j.n_seg;
    while (j.group_split < group && n_tasks * j.group_split < want) j.group_split++;
    ty_pool_run(c->pool, n_tasks * j.group_split, tasks.token, &j);
    if (!j.seg_split) return;
    /* the segments of each token and head, folded in order as a task would */
    float *acc = c->attn_ws, m = 0.0f, l;
    for (int64_t t = 0; t < n_tok; t++)
        for (int32_t h = 0; h < p->n_head; h++) {
            l = 0.0f;
            for (int32_t s = 0; s < j.n_seg; s++) {
                const attn_state st = attn_slot(&j, t, s);
                attn_fold(hd, acc, &m, &l, st.acc + (size_t)h * hd, st.m[h], st.l[h]);
            }
            attn_finish(hd, acc, l, out + (t * p->n_head + h) * hd);
        }
}

/* ---------------------------------------------------------------- the plain path
 * toy_attn's TOY_ATTN_PLAIN: scores, softmax and the product with V, each over all of
 * kq [n_tok][n_head][n_kv] (backend.h). Plain loops, one token per task. */

typedef struct {
    float *out, *kq;
    const float *q;
    const int32_t *pos, *seq_id;
    const ty_kv_view *kv;
    const ty_attn_params *p;
    int32_t n_kv;
} plain_job;

/* K or V row of KV head kh, cell c of sequence s, as floats */
static void plain_row(const ty_kv_view *kv, bool v, int32_t s, int32_t kh, int32_t c, int32_t n_head_kv,
                      int32_t hd, float *row) {
    const size_t i = ((size_t)s * (size_t)n_head_kv + (size_t)kh) * (size_t)kv->cells_per_seq + (size_t)c;
    const uint8_t *src = v ? kv->v + i * kv->head_bytes_v : kv->k + i * kv->head_bytes_k;
    ty_type_traits_get(v ? kv->type_v : kv->type_k)->to_float(src, row, hd);
}

static void plain_scores_range(const void *ctx, int64_t t0, int64_t t1) {
    const plain_job *j = ctx;
    const ty_attn_params *p = j->p;
    const int32_t hd = p->head_dim, group = p->n_head / p->n_head_kv;
    float row[TOY_MAX_HEAD_DIM];
    for (int64_t t = t0; t < t1; t++) {
        const int32_t s = j->seq_id[t], n_used = j->kv->n_used[s];
        const int32_t *cell_pos = j->kv->pos + (size_t)s * (size_t)j->kv->cells_per_seq;
        for (int32_t kh = 0; kh < p->n_head_kv; kh++)
            for (int32_t c = 0; c < j->n_kv; c++) {
                const int32_t d = c < n_used ? j->pos[t] - cell_pos[c] : -1;
                const bool seen = d >= 0 && (!p->n_swa || d < p->n_swa);
                if (seen) plain_row(j->kv, false, s, kh, c, p->n_head_kv, hd, row);
                for (int32_t h = kh * group; h < (kh + 1) * group; h++) {
                    float *score = j->kq + ((size_t)t * (size_t)p->n_head + (size_t)h) * (size_t)j->n_kv + (size_t)c;
                    if (!seen) {
                        *score = -INFINITY;
                        continue;
                    }
                    const float *q = j->q + ((size_t)t * (size_t)p->n_head + (size_t)h) * (size_t)hd;
                    float l[16] = {0};
                    for (int32_t i = 0; i < hd; i++) l[i % 16] += q[i] * row[i];
                    float x = ty_lanes16_sum(l);
                    if (p->softcap > 0.0f) x = tanhf(x * (1.0f / p->softcap)) * p->softcap;
                    *score = x * p->scale;
                }
            }
    }
}

void ty_cpu_attn_scores(ty_backend *be, float *kq, const float *q, int64_t n_tok, const int32_t *pos,
                            const int32_t *seq_id, const ty_kv_view *kv, const ty_attn_params *p, int32_t n_kv) {
    plain_job j = {.kq = kq, .q = q, .pos = pos, .seq_id = seq_id, .kv = kv, .p = p, .n_kv = n_kv};
    ty_pool_for(((cpu_backend *)be)->pool, n_tok, 1, plain_scores_range, &j);
}

typedef struct {
    float *x;
    int64_t n;
} softmax_job;

static void softmax_range(const void *ctx, int64_t r0, int64_t r1) {
    const softmax_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        float *x = j->x + r * j->n, m = -INFINITY, l[16] = {0};
        for (int64_t i = 0; i < j->n; i++) m = x[i] > m ? x[i] : m;
        for (int64_t i = 0; i < j->n; i++) {
            x[i] = m == -INFINITY ? 0.0f : expf(x[i] - m);
            l[i % 16] += x[i];
        }
        const float sum = ty_lanes16_sum(l), inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (int64_t i = 0; i < j->n; i++) x[i] *= inv;
    }
}

void ty_cpu_softmax_rows(ty_backend *be, float *x, int64_t n_rows, int64_t n) {
    softmax_job j = {x, n};
    ty_pool_for(((cpu_backend *)be)->pool, n_rows, ty_pool_grain_rows(n), softmax_range, &j);
}

static void plain_mix_range(const void *ctx, int64_t t0, int64_t t1) {
    const plain_job *j = ctx;
    const ty_attn_params *p = j->p;
    const int32_t hd = p->head_dim, group = p->n_head / p->n_head_kv;
    float row[TOY_MAX_HEAD_DIM];
    for (int64_t t = t0; t < t1; t++) {
        const int32_t s = j->seq_id[t];
        float *out = j->out + (size_t)t * (size_t)p->n_head * (size_t)hd;
        memset(out, 0, (size_t)p->n_head * (size_t)hd * sizeof *out);
        for (int32_t kh = 0; kh < p->n_head_kv; kh++)
            for (int32_t c = 0; c < j->n_kv && c < j->kv->n_used[s]; c++) {
                bool any = false;
                for (int32_t h = kh * group; h < (kh + 1) * group; h++)
                    any |= j->kq[((size_t)t * (size_t)p->n_head + (size_t)h) * (size_t)j->n_kv + (size_t)c] != 0.0f;
                if (!any) continue;
                plain_row(j->kv, true, s, kh, c, p->n_head_kv, hd, row);
                for (int32_t h = kh * group; h < (kh + 1) * group; h++) {
                    const float w = j->kq[((size_t)t * (size_t)p->n_head + (size_t)h) * (size_t)j->n_kv + (size_t)c];
                    float *o = out + (size_t)h * (size_t)hd;
                    for (int32_t i = 0; i < hd; i++) o[i] += w * row[i];
                }
            }
    }
}

void ty_cpu_attn_mix(ty_backend *be, float *out, const float *kq, int64_t n_tok, const int32_t *seq_id,
                         const ty_kv_view *kv, const ty_attn_params *p, int32_t n_kv) {
    plain_job j = {.out = out, .kq = (float *)kq, .seq_id = seq_id, .kv = kv, .p = p, .n_kv = n_kv};
    ty_pool_for(((cpu_backend *)be)->pool, n_tok, 1, plain_mix_range, &j);
}
