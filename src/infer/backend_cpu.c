/* backend_cpu.c — the CPU implementation of the forward pass's operations.
 *
 * The arithmetic follows ggml's CPU backend where llama.cpp's numbers depend on it:
 * RMSNorm sums squares in double, RoPE builds its angles by repeated multiplication in
 * float, softmax sums exponentials in double, matmuls round activations to the
 * weight's vec_dot type first (kernels.h). Work is split across threads by output rows
 * or by (token, head), never inside a reduction, so results do not depend on threads.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"
#include "kernels.h"
#include "packed.h"
#include "threadpool.h"
#include "vec_exp.h"

typedef struct {
    toy_backend base;
    toy_pool *pool;
    uint8_t *act;        /* quantized activation rows */
    float *attn_ws;      /* per thread: accumulators of one query group (attention_task) */
    size_t attn_ws_per_thread;
    float *attn_slots;   /* decode: the state of each (token, segment) of a split job */
    size_t attn_n_slots, attn_slot_cap; /* how many, floats each */
    toy_isa isa; /* which attention task runs */
} cpu_backend;

/* Cells whose scores attention_task computes before it exponentiates them. */
#define ATTN_CHUNK 32
/* Cells of a segment: a fresh online softmax, folded into the others after (whole
 * chunks, so the chunks fall where they would without segments). */
#define ATTN_SEGMENT_CELLS 256
_Static_assert(ATTN_SEGMENT_CELLS % ATTN_CHUNK == 0, "segments are whole chunks");
/* (token, segment) states a split decode job may hold, per thread */
#define ATTN_SLOTS_PER_THREAD 64

static toy_status cpu_reserve(toy_backend *be, int64_t n_tok, int64_t max_cols, int64_t n_head,
                              int64_t head_dim) {
    cpu_backend *c = (cpu_backend *)be;
    /* F32 is the widest vec_dot type: 4 bytes per element */
    size_t act = (size_t)n_tok * (size_t)max_cols * sizeof(float);
    /* attention, per thread: a segment's and the running fold's accumulators of a query
     * group (at most n_head * head_dim floats each), maxima and sums, the scores of a
     * chunk of cells, its K and V rows */
    const int64_t q_cols = n_head * head_dim;
    c->attn_ws_per_thread = (size_t)(2 * (q_cols + 2 * n_head) + n_head * ATTN_CHUNK +
                                     2 * ATTN_CHUNK * head_dim + 64);
    size_t ws = c->attn_ws_per_thread * (size_t)toy_pool_size(c->pool) * sizeof(float);
    /* a slot holds every head's sums, maximum and sum: n_head * (head_dim + 2) floats */
    c->attn_slot_cap = (size_t)(q_cols + 2 * n_head);
    c->attn_n_slots = (size_t)ATTN_SLOTS_PER_THREAD * (size_t)toy_pool_size(c->pool);
    size_t slots = c->attn_n_slots * c->attn_slot_cap * sizeof(float);
    free(c->act);
    free(c->attn_ws);
    free(c->attn_slots);
    c->act = malloc(act ? act : 1);
    c->attn_ws = malloc(ws);
    c->attn_slots = malloc(slots);
    if (!c->act || !c->attn_ws || !c->attn_slots)
        return toy_error(TOY_ERR_NOMEM, "cannot allocate %zu bytes of scratch", act + ws + slots);
    return TOY_OK;
}

/* ---------------------------------------------------------------- rms_norm */

static void cpu_rms_norm(toy_backend *be, float *y, const float *x, const float *w, int64_t n_tok,
                         int64_t n, float eps) {
    (void)be;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *xr = x + t * n;
        float *yr = y + t * n;
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / (double)n);
        const float scale = 1.0f / sqrtf(mean + eps);
        /* two roundings, as ggml's rms_norm followed by mul */
        for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}

/* ---------------------------------------------------------------- matmul */

#ifndef MATMUL_TASKS_PER_THREAD
#define MATMUL_TASKS_PER_THREAD 16
#endif

#define MATMUL_MAX 3

/* Up to MATMUL_MAX matrices with the same input (Q, K and V; gate and up) in one job:
 * the input is quantized once and the threads split the rows of all of them. A job is
 * either all packed matrices (packed.h) of one packed kernel or all row-kernel ones. */
typedef struct {
    int n_w;
    const toy_weight *w[MATMUL_MAX];
    const toy_kernel *k[MATMUL_MAX];
    const toy_packed_kernel *pk; /* the packed kernel, or NULL */
    float *y[MATMUL_MAX];
    /* where each matrix starts in the joint row range (packed: rows rounded up to whole
     * groups, so that tasks split at group boundaries) */
    int64_t row0[MATMUL_MAX + 1];
    const float *x;
    int64_t n_cols, n_tok;
    const uint8_t *act;
    size_t act_row;
    int64_t rows_per_task;
} matmul_job;

static void quantize_act_task(void *ctx, int64_t t, int thread) {
    (void)thread;
    matmul_job *j = ctx;
    uint8_t *row = (uint8_t *)j->act + (size_t)t * j->act_row;
    if (j->pk) j->pk->quantize_act(j->x + t * j->n_cols, row, j->n_cols);
    else j->k[0]->quantize_act(j->x + t * j->n_cols, row, j->n_cols);
}

/* Rows [r0, r1) of one matrix (packed: r0 a multiple of 16). */
static void matmul_rows(const matmul_job *j, int i, int64_t r0, int64_t r1) {
    const toy_weight *w = j->w[i];
    const toy_kernel *k = j->k[i];
    float *y = j->y[i];
    if (j->pk) {
        if (r1 > w->n_rows) r1 = w->n_rows;
        j->pk->gemm(w->n_cols, w->packed + (size_t)(r0 / TOY_PACK_ROWS) * w->packed_group, r1 - r0, j->act,
                    j->act_row, j->n_tok, y + r0, (size_t)w->n_rows);
        return;
    }
    if (k->vec_dot_tile && j->n_tok > 1 && w->n_parts <= 1) {
        /* prefill: each weight block is decoded once for a tile of tokens */
        for (int64_t t0 = 0; t0 < j->n_tok; t0 += TOY_TILE_MAX) {
            int n_a = j->n_tok - t0 < TOY_TILE_MAX ? (int)(j->n_tok - t0) : TOY_TILE_MAX;
            k->vec_dot_tile(w->n_cols, toy_weight_row(w, r0), w->row_size, (int)(r1 - r0),
                            j->act + (size_t)t0 * j->act_row, j->act_row, n_a,
                            y + t0 * w->n_rows + r0, (size_t)w->n_rows);
        }
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const void *row = toy_weight_row(w, r);
        for (int64_t t = 0; t < j->n_tok; t++)
            y[t * w->n_rows + r] = k->vec_dot(w->n_cols, row, j->act + (size_t)t * j->act_row);
    }
}

static void matmul_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const matmul_job *j = ctx;
    const int64_t r0 = task * j->rows_per_task, end = j->row0[j->n_w];
    const int64_t r1 = r0 + j->rows_per_task < end ? r0 + j->rows_per_task : end;
    for (int i = 0; i < j->n_w; i++) {
        int64_t a = r0 > j->row0[i] ? r0 : j->row0[i];
        int64_t b = r1 < j->row0[i + 1] ? r1 : j->row0[i + 1];
        if (a < b) matmul_rows(j, i, a - j->row0[i], b - j->row0[i]);
    }
}

static void cpu_matmul_multi(toy_backend *be, int n_w, const toy_weight *const *w, const float *x,
                             int64_t n_tok, float *const *y) {
    cpu_backend *c = (cpu_backend *)be;
    matmul_job j = {.x = x, .n_cols = w[0]->n_cols, .n_tok = n_tok};
    for (int i = 0; i < n_w; i++) {
        const toy_kernel *k = toy_kernel_get(w[i]->type);
        const toy_packed_kernel *pk = w[i]->packed ? toy_packed_get(w[i]->type) : NULL;
        /* matrices whose inputs are rounded differently run as jobs of their own */
        if (j.n_w == MATMUL_MAX ||
            (j.n_w && (k->vec_dot_type != j.k[0]->vec_dot_type || pk != j.pk))) {
            cpu_matmul_multi(be, n_w - i, w + i, x, n_tok, y + i);
            break;
        }
        j.w[j.n_w] = w[i];
        j.k[j.n_w] = k;
        j.pk = pk;
        j.y[j.n_w] = y[i];
        const int64_t rows = pk ? (w[i]->n_rows + TOY_PACK_ROWS - 1) / TOY_PACK_ROWS * TOY_PACK_ROWS : w[i]->n_rows;
        j.row0[j.n_w + 1] = j.row0[j.n_w] + rows;
        j.n_w++;
    }
    /* the model loader refuses types without a kernel and rows that are not whole
     * blocks, so this cannot fail here */
    if (j.pk) j.act_row = (size_t)(j.n_cols / j.pk->block_cols) * j.pk->act_block;
    else toy_type_row_size(j.k[0]->vec_dot_type, j.n_cols, &j.act_row);
    j.act = c->act; /* sized by reserve() */
    toy_pool_run(c->pool, n_tok, quantize_act_task, &j);
    /* Each thread runs a contiguous range of the tasks, long streams for the hardware
     * prefetcher, then helps with the ends of the others' ranges (threadpool.h): many
     * tasks per thread let the threads finish together. */
    const int64_t rows = j.row0[j.n_w];
    int64_t n_tasks = (int64_t)toy_pool_size(c->pool) * MATMUL_TASKS_PER_THREAD;
    j.rows_per_task = (rows + n_tasks - 1) / n_tasks;
    if (j.rows_per_task < 4) j.rows_per_task = 4;
    if (j.pk) j.rows_per_task = (j.rows_per_task + TOY_PACK_ROWS - 1) / TOY_PACK_ROWS * TOY_PACK_ROWS;
    toy_pool_run(c->pool, (rows + j.rows_per_task - 1) / j.rows_per_task, matmul_task, &j);
}

static void cpu_matmul(toy_backend *be, const toy_weight *w, const float *x, int64_t n_tok,
                       float *y) {
    cpu_matmul_multi(be, 1, &w, x, n_tok, &y);
}

static void cpu_get_rows(toy_backend *be, const toy_weight *w, const int32_t *ids, int64_t n,
                         float *y) {
    (void)be;
    const toy_type_traits *tr = toy_type_traits_get(w->type);
    for (int64_t i = 0; i < n; i++) tr->to_float(toy_weight_row(w, ids[i]), y + i * w->n_cols, w->n_cols);
}

/* ---------------------------------------------------------------- rope */

static void cpu_rope(toy_backend *be, float *x, int64_t n_tok, int32_t n_heads, int32_t head_dim,
                     const int32_t *pos, const toy_rope_params *p) {
    (void)be;
    const int32_t n_rot = p->n_rot;
    float cs[TOY_MAX_HEAD_DIM];
    for (int64_t t = 0; t < n_tok; t++) {
        toy_rope_cos_sin(p, pos[t], cs);
        for (int32_t h = 0; h < n_heads; h++) {
            float *v = x + (t * n_heads + h) * head_dim;
            for (int32_t i0 = 0; i0 < n_rot; i0 += 2) {
                const float c = cs[i0], s = cs[i0 + 1];
                int32_t a, b;
                if (p->type == TOY_ROPE_NEOX) {
                    a = i0 / 2;
                    b = i0 / 2 + n_rot / 2;
                } else {
                    a = i0;
                    b = i0 + 1;
                }
                const float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            }
        }
    }
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    cpu_backend *c;
    float *out;
    const float *q;
    const int32_t *pos;
    const int32_t *seq_id;
    const toy_kv_view *kv;
    const toy_attn_params *p;
    const toy_type_traits *tk, *tv; /* K and V rows to float */
    int32_t group_split; /* query heads of a group are split over this many tasks */
    bool seg_split;      /* one task per segment, folded after (else in the task) */
    int32_t n_seg;       /* with seg_split: segments of the longest sequence */
    size_t slot_floats;  /* floats of one (token, segment) slot: n_head x (head_dim + 2) */
} attn_job;

/* The state of token t's segment s, with seg_split, laid out as ATTN_SEGMENT writes it
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
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define UNROLL16 _Pragma("GCC unroll 16")

ALWAYS_INLINE float lanes16_sum(float *l) {
    for (int s = 8; s >= 1; s /= 2)
        for (int k = 0; k < s; k++) l[k] += l[k + s];
    return l[0];
}

/* x[i] = exp(x[i] - m) for i < n */
ALWAYS_INLINE void exps_scalar(int32_t n, float *x, float m) {
    for (int32_t i = 0; i < n; i++) x[i] = toy_exp_nonpos(x[i] - m);
}

ALWAYS_INLINE float dot_scalar(int32_t n, const float *a, const float *b) {
    float l[16] = {0};
    for (int32_t d = 0; d < n; d++) l[d % 16] = fmaf(a[d], b[d], l[d % 16]);
    return lanes16_sum(l);
}
/* The largest of n scores: a comparison, not fmaxf, which is a library call on baseline
 * x86-64 (scores are never NaN: masked cells hold -inf). Any order gives the same. */
ALWAYS_INLINE float max_scalar(int32_t n, const float *x) {
    float m = -INFINITY;
    for (int32_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}
/* The sum of a chunk's n <= 32 weights: x[i] into lane i % 16, the lanes pairwise. */
ALWAYS_INLINE float chunk_sum_scalar(int32_t n, const float *x) {
    float l[16] = {0};
    for (int32_t i = 0; i < n; i++) l[i % 16] += x[i];
    return lanes16_sum(l);
}
/* The cells of a chunk a query at qpos sees (kpos <= qpos, and within the sliding window
 * when n_swa > 0), as indices in order; returns how many. */
ALWAYS_INLINE int32_t live_scalar(int32_t nc, const int32_t *kpos, int32_t qpos, int32_t n_swa,
                                  int32_t *live) {
    int32_t n = 0;
    for (int32_t i = 0; i < nc; i++)
        if (kpos[i] <= qpos && !(n_swa > 0 && qpos - kpos[i] >= n_swa)) live[n++] = i;
    return n;
}
/* out[r] = dot(rows[r], q) for r < n_rows */
ALWAYS_INLINE void dots_scalar(int32_t n, int32_t n_rows, const float *const *rows, const float *q,
                               float *out) {
    for (int32_t r = 0; r < n_rows; r++) out[r] = dot_scalar(n, rows[r], q);
}
/* acc[d] += w[live[r]] * rows[r][d] for r = 0 .. n_live - 1, in that order, one rounding each */
ALWAYS_INLINE void accum1_scalar(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                 const float *const *rows, float *acc) {
    for (int32_t r = 0; r < n_live; r++)
        for (int32_t d = 0; d < n; d++) acc[d] = fmaf(w[live[r]], rows[r][d], acc[d]);
}
/* accum1 for each of n_heads heads: weights ATTN_CHUNK apart, sums n apart */
ALWAYS_INLINE void accum_scalar(int32_t n, int32_t n_live, const int32_t *live, const float *w, int32_t n_heads,
                                const float *const *rows, float *acc) {
    for (int32_t h = 0; h < n_heads; h++)
        accum1_scalar(n, n_live, live, w + (size_t)h * ATTN_CHUNK, rows, acc + (size_t)h * n);
}
ALWAYS_INLINE void scal_scalar(int32_t n, float s, float *acc) {
    for (int32_t d = 0; d < n; d++) acc[d] *= s;
}

/* A K or V row of the cache as floats: in place for f32, else converted into buf. Every
 * conversion is exact or one rounded multiply (q8_0: q * d), so all versions agree. */
ALWAYS_INLINE const float *row_scalar(int type, const toy_type_traits *tr, const uint8_t *src,
                                      float *buf, int32_t n) {
    if (type == TOY_TYPE_F32) return (const float *)src;
    tr->to_float(src, buf, n);
    return buf;
}

/* Folds a segment's state (sums as, maximum ms, weights ls) into the running one (acc,
 * *m, *l) of one head; the running state starts with *l = 0. The same plain C for every
 * instruction set, and for the fold inside a task and after a split job. */
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
    const float ca = toy_exp_nonpos(*m - mx), cs = toy_exp_nonpos(ms - mx); /* one of them is 1 */
    for (int32_t d = 0; d < hd; d++) acc[d] = acc[d] * ca + as[d] * cs;
    *l = *l * ca + ls * cs;
    *m = mx;
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

#define ATTN_TASK attention_task_scalar
#define ATTN_SEGMENT attention_segment_scalar
#define ATTN_TARGET
#define ATTN_DOTS dots_scalar
#define ATTN_ACCUM accum_scalar
#define ATTN_SCAL scal_scalar
#define ATTN_EXPS exps_scalar
#define ATTN_MAX max_scalar
#define ATTN_SUM chunk_sum_scalar
#define ATTN_ROW row_scalar
#define ATTN_LIVE live_scalar
#include "attention_cpu.h"
#undef ATTN_TASK
#undef ATTN_SEGMENT
#undef ATTN_TARGET
#undef ATTN_DOTS
#undef ATTN_MAX
#undef ATTN_SUM
#undef ATTN_ACCUM
#undef ATTN_SCAL
#undef ATTN_EXPS
#undef ATTN_ROW
#undef ATTN_LIVE

#if defined(__x86_64__)
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma,f16c")))

/* The pairwise combine of 8 lanes in registers: k + 4, k + 2, k + 1, as lanes16_sum's
 * last three steps. */
AVX2 ALWAYS_INLINE float combine8_avx2(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* head_dim % 16 == 0 only (the dispatcher checks) */
AVX2 ALWAYS_INLINE float dot_avx2(int32_t n, const float *a, const float *b) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int32_t d = 0; d < n; d += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8), hi);
    }
    return combine8_avx2(_mm256_add_ps(lo, hi)); /* lanes k and k + 8 first */
}
AVX2 ALWAYS_INLINE void dots_avx2(int32_t n, int32_t n_rows, const float *const *rows, const float *q,
                                  float *out) {
    for (int32_t r = 0; r < n_rows; r++) out[r] = dot_avx2(n, rows[r], q);
}

/* accum_scalar with 32 elements of acc in four registers through all the cells */
AVX2 ALWAYS_INLINE void accum1_avx2(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                    const float *const *rows, float *acc) {
    int32_t d = 0;
    for (; d + 32 <= n; d += 32) {
        __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);
        __m256 a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
        for (int32_t r = 0; r < n_live; r++) {
            const __m256 vw = _mm256_set1_ps(w[live[r]]);
            const float *v = rows[r] + d;
            a0 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(v), a0);
            a1 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(v + 8), a1);
            a2 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(v + 16), a2);
            a3 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(v + 24), a3);
        }
        _mm256_storeu_ps(acc + d, a0);
        _mm256_storeu_ps(acc + d + 8, a1);
        _mm256_storeu_ps(acc + d + 16, a2);
        _mm256_storeu_ps(acc + d + 24, a3);
    }
    for (; d < n; d += 8) {
        __m256 a = _mm256_loadu_ps(acc + d);
        for (int32_t r = 0; r < n_live; r++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(w[live[r]]), _mm256_loadu_ps(rows[r] + d), a);
        _mm256_storeu_ps(acc + d, a);
    }
}
AVX2 ALWAYS_INLINE void accum_avx2(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                   int32_t n_heads, const float *const *rows, float *acc) {
    for (int32_t h = 0; h < n_heads; h++)
        accum1_avx2(n, n_live, live, w + (size_t)h * ATTN_CHUNK, rows, acc + (size_t)h * n);
}
AVX2 ALWAYS_INLINE void exps_avx2(int32_t n, float *x, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, toy_exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    for (; i < n; i++) x[i] = toy_exp_nonpos(x[i] - m);
}
/* head_dim % 16 == 0; a q8_0 cache also has head_dim % 32 == 0 (toy_kv_cache_init) */
AVX2 ALWAYS_INLINE const float *row_avx2(int type, const toy_type_traits *tr, const uint8_t *src,
                                         float *buf, int32_t n) {
    switch (type) {
    case TOY_TYPE_F32:
        return (const float *)src;
    case TOY_TYPE_F16:
        for (int32_t d = 0; d < n; d += 8)
            _mm256_storeu_ps(buf + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * d))));
        return buf;
    case TOY_TYPE_BF16:
        for (int32_t d = 0; d < n; d += 8) {
            const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + 2 * d)));
            _mm256_storeu_ps(buf + d, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
        }
        return buf;
    case TOY_TYPE_Q8_0:
        for (int32_t b = 0; b < n / QK8_0; b++) {
            const block_q8_0 *blk = (const block_q8_0 *)src + b;
            const __m256 d = _mm256_set1_ps(toy_fp16_to_fp32(blk->d));
            for (int32_t k = 0; k < QK8_0; k += 8) {
                const __m128i q = _mm_loadl_epi64((const __m128i *)(blk->qs + k));
                const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
                _mm256_storeu_ps(buf + b * QK8_0 + k, _mm256_mul_ps(f, d));
            }
        }
        return buf;
    default:
        return row_scalar(type, tr, src, buf, n);
    }
}
AVX2 ALWAYS_INLINE void scal_avx2(int32_t n, float s, float *acc) {
    const __m256 vs = _mm256_set1_ps(s);
    for (int32_t d = 0; d < n; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vs));
}

AVX512 ALWAYS_INLINE float dot_avx512(int32_t n, const float *a, const float *b) {
    __m512 acc = _mm512_setzero_ps();
    for (int32_t d = 0; d < n; d += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc);
    const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
    return combine8_avx2(v);
}
/* dots_scalar for 16 rows at once: 16 lane accumulators, then the combine of all 16
 * transposed, one level per step (k + 8, k + 4, k + 2, k + 1), each step adding the
 * same pairs of lanes as lanes16_sum. After the last step row L + 4p sits in element
 * 4L + p. */
AVX512 ALWAYS_INLINE __m512 dots16_avx512(int32_t n, const float *const *rows, const float *q) {
    __m512 acc[16];
    UNROLL16
    for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
    for (int32_t d = 0; d < n; d += 16) {
        const __m512 qv = _mm512_loadu_ps(q + d);
        UNROLL16
        for (int r = 0; r < 16; r++) acc[r] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(rows[r] + d), acc[r]);
    }
    __m512 c[8], e[4], g[2];
    UNROLL16
    for (int j = 0; j < 8; j++) /* k + 8: [row 2j's 8 | row 2j + 1's 8] */
        c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * j], acc[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(acc[2 * j], acc[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    UNROLL16
    for (int i = 0; i < 4; i++) /* k + 4: 128-bit lane L holds row 4i + L's 4 */
        e[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    UNROLL16
    for (int u = 0; u < 2; u++) /* k + 2: lane L holds rows 8u + L and 8u + 4 + L, 2 each */
        g[u] = _mm512_add_ps(_mm512_shuffle_ps(e[2 * u], e[2 * u + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(e[2 * u], e[2 * u + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* k + 1: lane L holds rows L, 4 + L, 8 + L, 12 + L */
    return _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
AVX512 ALWAYS_INLINE void dots_avx512(int32_t n, int32_t n_rows, const float *const *rows,
                                      const float *q, float *out) {
    /* element 4L + p holds row L + 4p: gather row r from element 4 (r % 4) + r / 4 */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    int32_t r = 0;
    for (; r + 16 <= n_rows; r += 16)
        _mm512_storeu_ps(out + r, _mm512_permutexvar_ps(order, dots16_avx512(n, rows + r, q)));
    for (; r < n_rows; r++) out[r] = dot_avx512(n, rows[r], q);
}

AVX512 ALWAYS_INLINE __mmask16 lanes_below(int32_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}
AVX512 ALWAYS_INLINE float max_avx512(int32_t n, const float *x) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int32_t i = 0; i < n; i += 16) {
        const __mmask16 k = lanes_below(n - i);
        /* max(x, m) returns m when x is NaN, as max_scalar's x > m ? x : m does */
        m = _mm512_mask_max_ps(m, k, _mm512_maskz_loadu_ps(k, x + i), m);
    }
    return _mm512_reduce_max_ps(m);
}
AVX512 ALWAYS_INLINE int32_t live_avx512(int32_t nc, const int32_t *kpos, int32_t qpos,
                                         int32_t n_swa, int32_t *live) {
    const __m512i q = _mm512_set1_epi32(qpos);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int32_t n = 0;
    for (int32_t i = 0; i < nc; i += 16) {
        const __mmask16 in = lanes_below(nc - i);
        const __m512i k = _mm512_maskz_loadu_epi32(in, kpos + i);
        __mmask16 ok = _mm512_mask_cmple_epi32_mask(in, k, q);
        if (n_swa > 0) ok &= _mm512_cmplt_epi32_mask(_mm512_sub_epi32(q, k), _mm512_set1_epi32(n_swa));
        _mm512_mask_compressstoreu_epi32(live + n, ok, _mm512_add_epi32(lane, _mm512_set1_epi32(i)));
        n += __builtin_popcount(ok);
    }
    return n;
}
_Static_assert(ATTN_CHUNK == 32, "chunk_sum_avx512 adds two vectors of 16");
AVX512 ALWAYS_INLINE float chunk_sum_avx512(int32_t n, const float *x) {
    const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes_below(n), x),
                                   _mm512_maskz_loadu_ps(lanes_below(n - 16), x + 16));
    return combine8_avx2(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* Elements [d, d + 64) of the sums of H heads (n apart; weights ATTN_CHUNK apart) in
 * 4 H registers through all the cells: each V row is loaded once for the H heads. */
AVX512 ALWAYS_INLINE void accum64_heads_avx512(int32_t n, int32_t d, const int H, int32_t n_live, const int32_t *live,
                                               const float *w, const float *const *rows, float *acc) {
    __m512 a[4][4];
    UNROLL16
    for (int h = 0; h < H; h++)
        UNROLL16
        for (int i = 0; i < 4; i++) a[h][i] = _mm512_loadu_ps(acc + (size_t)h * n + d + 16 * i);
    for (int32_t r = 0; r < n_live; r++) {
        const float *v = rows[r] + d;
        const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
        const __m512 v2 = _mm512_loadu_ps(v + 32), v3 = _mm512_loadu_ps(v + 48);
        UNROLL16
        for (int h = 0; h < H; h++) {
            const __m512 vw = _mm512_set1_ps(w[h * ATTN_CHUNK + live[r]]);
            a[h][0] = _mm512_fmadd_ps(vw, v0, a[h][0]);
            a[h][1] = _mm512_fmadd_ps(vw, v1, a[h][1]);
            a[h][2] = _mm512_fmadd_ps(vw, v2, a[h][2]);
            a[h][3] = _mm512_fmadd_ps(vw, v3, a[h][3]);
        }
    }
    UNROLL16
    for (int h = 0; h < H; h++)
        UNROLL16
        for (int i = 0; i < 4; i++) _mm512_storeu_ps(acc + (size_t)h * n + d + 16 * i, a[h][i]);
}
/* accum1 (one head) with 64 elements of acc in four registers through all the cells */
AVX512 ALWAYS_INLINE void accum1_avx512(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                        const float *const *rows, float *acc) {
    int32_t d = 0;
    for (; d + 64 <= n; d += 64) {
        __m512 a0 = _mm512_loadu_ps(acc + d), a1 = _mm512_loadu_ps(acc + d + 16);
        __m512 a2 = _mm512_loadu_ps(acc + d + 32), a3 = _mm512_loadu_ps(acc + d + 48);
        for (int32_t r = 0; r < n_live; r++) {
            const __m512 vw = _mm512_set1_ps(w[live[r]]);
            const float *v = rows[r] + d;
            a0 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(v + 16), a1);
            a2 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(v + 32), a2);
            a3 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(v + 48), a3);
        }
        _mm512_storeu_ps(acc + d, a0);
        _mm512_storeu_ps(acc + d + 16, a1);
        _mm512_storeu_ps(acc + d + 32, a2);
        _mm512_storeu_ps(acc + d + 48, a3);
    }
    for (; d < n; d += 16) {
        __m512 a = _mm512_loadu_ps(acc + d);
        for (int32_t r = 0; r < n_live; r++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[live[r]]), _mm512_loadu_ps(rows[r] + d), a);
        _mm512_storeu_ps(acc + d, a);
    }
}
/* The heads four at a time where head_dim is whole blocks of 64, else one by one. */
AVX512 ALWAYS_INLINE void accum_avx512(int32_t n, int32_t n_live, const int32_t *live, const float *w,
                                       int32_t n_heads, const float *const *rows, float *acc) {
    int32_t h = 0;
    if (n % 64 == 0)
        for (; h < n_heads; h += 4) {
            const float *wh = w + (size_t)h * ATTN_CHUNK;
            float *ah = acc + (size_t)h * n;
            for (int32_t d = 0; d < n; d += 64) switch (n_heads - h < 4 ? n_heads - h : 4) {
                case 1: accum64_heads_avx512(n, d, 1, n_live, live, wh, rows, ah); break;
                case 2: accum64_heads_avx512(n, d, 2, n_live, live, wh, rows, ah); break;
                case 3: accum64_heads_avx512(n, d, 3, n_live, live, wh, rows, ah); break;
                default: accum64_heads_avx512(n, d, 4, n_live, live, wh, rows, ah); break;
                }
        }
    for (; h < n_heads; h++) accum1_avx512(n, n_live, live, w + (size_t)h * ATTN_CHUNK, rows, acc + (size_t)h * n);
}
AVX512 ALWAYS_INLINE const float *row_avx512(int type, const toy_type_traits *tr, const uint8_t *src,
                                           float *buf, int32_t n) {
    if (type != TOY_TYPE_F16) return row_avx2(type, tr, src, buf, n);
    for (int32_t d = 0; d < n; d += 16)
        _mm512_storeu_ps(buf + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 2 * d))));
    return buf;
}
AVX512 ALWAYS_INLINE void scal_avx512(int32_t n, float s, float *acc) {
    const __m512 vs = _mm512_set1_ps(s);
    for (int32_t d = 0; d < n; d += 16) _mm512_storeu_ps(acc + d, _mm512_mul_ps(_mm512_loadu_ps(acc + d), vs));
}

#define ATTN_TASK attention_task_avx2
#define ATTN_SEGMENT attention_segment_avx2
#define ATTN_TARGET AVX2
#define ATTN_DOTS dots_avx2
#define ATTN_MAX max_scalar
#define ATTN_SUM chunk_sum_scalar
#define ATTN_ACCUM accum_avx2
#define ATTN_SCAL scal_avx2
#define ATTN_EXPS exps_avx2
#define ATTN_ROW row_avx2
#define ATTN_LIVE live_scalar
#include "attention_cpu.h"
#undef ATTN_ROW
#undef ATTN_LIVE
#undef ATTN_EXPS
#undef ATTN_TASK
#undef ATTN_SEGMENT
#undef ATTN_TARGET
#undef ATTN_DOTS
#undef ATTN_MAX
#undef ATTN_SUM
#undef ATTN_ACCUM
#undef ATTN_SCAL

#define ATTN_TASK attention_task_avx512
#define ATTN_SEGMENT attention_segment_avx512
#define ATTN_TARGET AVX512
#define ATTN_DOTS dots_avx512
#define ATTN_MAX max_avx512
#define ATTN_SUM chunk_sum_avx512
#define ATTN_ACCUM accum_avx512
#define ATTN_SCAL scal_avx512
#define ATTN_EXPS exps_avx2
#define ATTN_ROW row_avx512
#define ATTN_LIVE live_avx512
#include "attention_cpu.h"
#undef ATTN_ROW
#undef ATTN_LIVE
#undef ATTN_EXPS
#undef ATTN_TASK
#undef ATTN_SEGMENT
#undef ATTN_TARGET
#undef ATTN_DOTS
#undef ATTN_MAX
#undef ATTN_SUM
#undef ATTN_ACCUM
#undef ATTN_SCAL
#endif

static void cpu_attention(toy_backend *be, float *out, const float *q, int64_t n_tok,
                          const int32_t *pos, const int32_t *seq_id, const toy_kv_view *kv,
                          const toy_attn_params *p) {
    cpu_backend *c = (cpu_backend *)be;
    attn_job j = {c, out, q, pos, seq_id, kv, p, toy_type_traits_get(kv->type_k),
                  toy_type_traits_get(kv->type_v), 1, false, 1, 0};
    const int32_t hd = p->head_dim, group = p->n_head / p->n_head_kv;
    const int64_t want = 4 * (int64_t)toy_pool_size(c->pool); /* tasks for the threads */
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
    const int64_t tasks = n_tok * p->n_head_kv * j.n_seg;
    while (j.group_split < group && tasks * j.group_split < want) j.group_split++;
    toy_task_fn task = attention_task_scalar;
#if defined(__x86_64__)
    if (c->isa >= TOY_ISA_AVX512 && hd % 16 == 0) task = attention_task_avx512;
    else if (c->isa >= TOY_ISA_AVX2 && hd % 16 == 0) task = attention_task_avx2;
#endif
    toy_pool_run(c->pool, tasks * j.group_split, task, &j);
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

/* ---------------------------------------------------------------- elementwise */

/* silu(g) * u through exp_nonpos, so that every instruction set computes the same bits:
 * with e = exp(-|g|), silu(g) = g / (1 + exp(-g)) = (g >= 0 ? g : g * e) / (1 + e). */
static inline float silu_mul(float g, float u) {
    const float e = toy_exp_nonpos(-fabsf(g));
    return ((g >= 0.0f ? g : g * e) / (1.0f + e)) * u;
}

#if defined(__x86_64__)
/* silu_mul on 8 lanes: the same operations */
AVX2 static void swiglu_avx2(float *y, const float *gate, const float *up, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = toy_exp8_nonpos(_mm256_or_ps(g, sign)); /* -|g| */
        const __m256 num = _mm256_blendv_ps(_mm256_mul_ps(g, e), g,
                                            _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_GE_OQ));
        const __m256 s = _mm256_div_ps(num, _mm256_add_ps(one, e));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++) y[i] = silu_mul(gate[i], up[i]);
}
#endif

static void cpu_swiglu(toy_backend *be, float *y, const float *gate, const float *up, int64_t n) {
#if defined(__x86_64__)
    if (((cpu_backend *)be)->isa >= TOY_ISA_AVX2) {
        swiglu_avx2(y, gate, up, n);
        return;
    }
#endif
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] = silu_mul(gate[i], up[i]);
}

/* ggml evaluates GELU through a table of all 65536 halves: the input is rounded to
 * fp16 and so is the output (ggml_vec_gelu_f32 with GGML_GELU_FP16). */
static float gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) {
        const float x = toy_fp16_to_fp32((toy_half)i);
        const float g = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x *
                                                 (1.0f + 0.044715f * x * x)));
        gelu_table[i] = toy_fp16_to_fp32(toy_fp32_to_fp16(g));
    }
}

static void cpu_geglu(toy_backend *be, float *y, const float *gate, const float *up, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        float a;
        if (g <= -10.0f) a = 0.0f;
        else if (g >= 10.0f) a = g;
        else a = gelu_table[toy_fp32_to_fp16(g)];
        y[i] = a * up[i];
    }
}

static void cpu_add(toy_backend *be, float *y, const float *x, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

static void cpu_add_bias(toy_backend *be, float *y, const float *b, int64_t n_tok, int64_t n) {
    (void)be;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++) y[t * n + i] += b[i];
}

static void cpu_scale(toy_backend *be, float *y, float s, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

/* three roundings, as ggml's scale, tanh, scale */
static void cpu_softcap(toy_backend *be, float *y, float cap, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(y[i] * (1.0f / cap)) * cap;
}

static void cpu_sigmoid(toy_backend *be, float *y, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-y[i]));
}

static void cpu_free(toy_backend *be) {
    cpu_backend *c = (cpu_backend *)be;
    if (!c) return;
    toy_pool_free(c->pool);
    free(c->act);
    free(c->attn_ws);
    free(c->attn_slots);
    free(c);
}

toy_backend *toy_backend_cpu_new(int n_threads) {
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->base = (toy_backend){
        .name = "cpu",
        .reserve = cpu_reserve,
        .rms_norm = cpu_rms_norm,
        .matmul = cpu_matmul,
        .matmul_multi = cpu_matmul_multi,
        .get_rows = cpu_get_rows,
        .rope = cpu_rope,
        .attention = cpu_attention,
        .swiglu = cpu_swiglu,
        .geglu = cpu_geglu,
        .add = cpu_add,
        .add_bias = cpu_add_bias,
        .scale = cpu_scale,
        .softcap = cpu_softcap,
        .sigmoid = cpu_sigmoid,
        .free = cpu_free,
    };
    pthread_once(&gelu_once, gelu_table_init);
    c->isa = toy_cpu_isa();
    c->pool = toy_pool_new(n_threads);
    if (!c->pool) {
        free(c);
        return NULL;
    }
    return &c->base;
}
