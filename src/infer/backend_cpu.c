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

#include "backend_cpu.h"
#include "error.h"
#include "threadpool.h"
#include "vec_exp.h"

/* ---------------------------------------------------------------- ranges
 * The elementwise and per-token operations of a prompt run on the pool in ranges of
 * elements or tokens. Each element (token) is computed alone, by the same code whatever
 * the range, so the results do not depend on where the ranges split or on the threads. */

static toy_status cpu_reserve(ty_backend *be, int64_t n_tok, int64_t max_cols, int64_t n_head,
                              int64_t head_dim) {
    cpu_backend *c = (cpu_backend *)be;
    /* floats (F32, F16, BF16) are the widest activations: 4 bytes per element; on whole
     * cache lines, so that float rows of a multiple of 16 elements load aligned */
    size_t act;
    if (__builtin_mul_overflow((size_t)n_tok, (size_t)max_cols, &act) ||
        __builtin_mul_overflow(act, sizeof(float), &act) || act > SIZE_MAX - 64)
        return ty_error(TOY_ERR_NOMEM, "scratch of %lld x %lld floats is too large", (long long)n_tok,
                        (long long)max_cols);
    free(c->act);
    c->act = aligned_alloc(64, (act + 64) / 64 * 64);
    if (!c->act) return ty_error(TOY_ERR_NOMEM, "cannot allocate %zu bytes of scratch", act);
    /* the tiled Q8_0 activations take 36 bytes for 32 columns (9/8 of a byte each) */
    free(c->tiled);
    c->tiled_size = act / sizeof(float) / 8 * 9;
    c->tiled = aligned_alloc(64, (c->tiled_size + 64) / 64 * 64);
    if (!c->tiled) return ty_error(TOY_ERR_NOMEM, "cannot allocate %zu bytes of scratch", c->tiled_size);
    return ty_cpu_attention_reserve(c, n_tok, n_head, head_dim);
}

/* ---------------------------------------------------------------- rms_norm */

typedef struct {
    float *y;
    const float *x, *w;
    int64_t n;
    float eps;
} rms_norm_job;

static void rms_norm_range(const void *ctx, int64_t t0, int64_t t1) {
    const rms_norm_job *j = ctx;
    float *y = j->y;
    const float *x = j->x, *w = j->w;
    const int64_t n = j->n;
    const float eps = j->eps;
    for (int64_t t = t0; t < t1; t++) {
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

static void cpu_rms_norm(ty_backend *be, float *y, const float *x, const float *w, int64_t n_tok,
                         int64_t n, float eps) {
    rms_norm_job j = {y, x, w, n, eps};
    ty_pool_for(((cpu_backend *)be)->pool, n_tok, ty_pool_grain_rows(n), rms_norm_range, &j);
}

typedef struct {
    float *y;
    const float *x, *w, *b;
    int64_t n;
    float eps;
} layer_norm_job;

static void layer_norm_range(const void *ctx, int64_t t0, int64_t t1) {
    const layer_norm_job *j = ctx;
    const int64_t n = j->n;
    for (int64_t t = t0; t < t1; t++) {
        const float *xr = j->x + t * n;
        float *yr = j->y + t * n;
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double)xr[i];
        const float mean = (float)sum / (float)n;
        double sum2 = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float v = xr[i] - mean;
            yr[i] = v;
            sum2 += (double)(v * v);
        }
        const float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + j->eps);
        for (int64_t i = 0; i < n; i++) yr[i] = (yr[i] * scale) * j->w[i] + j->b[i];
    }
}

static void cpu_layer_norm(ty_backend *be, float *y, const float *x, const float *w, const float *b,
                           int64_t n_tok, int64_t n, float eps) {
    layer_norm_job j = {y, x, w, b, n, eps};
    ty_pool_for(((cpu_backend *)be)->pool, n_tok, ty_pool_grain_rows(n), layer_norm_range, &j);
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
    const ty_weight *w[MATMUL_MAX];
    const ty_kernel *k[MATMUL_MAX];
    const ty_packed_kernel *pk; /* the packed kernel, or NULL */
    const uint8_t *packed[MATMUL_MAX]; /* each matrix's packed groups (pk) */
    float *y[MATMUL_MAX];
    /* where each matrix starts in the joint row range (packed: rows rounded up to whole
     * groups, so that tasks split at group boundaries) */
    int64_t row0[MATMUL_MAX + 1];
    const float *x;
    int64_t n_cols, n_tok;
    const uint8_t *act;
    size_t act_row;
    void *tiled; /* the activations in the packed kernel's tile layout, or NULL */
    int64_t rows_per_task;
} matmul_job;

static void quantize_act_task(void *ctx, int64_t t, int thread) {
    (void)thread;
    matmul_job *j = ctx;
    uint8_t *row = (uint8_t *)j->act + (size_t)t * j->act_row;
    if (j->pk) j->pk->quantize_act(j->x + t * j->n_cols, row, j->n_cols);
    else j->k[0]->quantize_act(j->x + t * j->n_cols, row, j->n_cols);
}

static void tile_act_task(void *ctx, int64_t chunk, int thread) {
    (void)thread;
    matmul_job *j = ctx;
    j->pk->tile_act(j->n_cols, j->act, j->act_row, chunk, j->tiled);
}

/* Rows [r0, r1) of one matrix (packed: r0 a multiple of 16). */
static void matmul_rows(const matmul_job *j, int i, int64_t r0, int64_t r1) {
    const ty_weight *w = j->w[i];
    const ty_kernel *k = j->k[i];
    float *y = j->y[i];
    if (j->pk) {
        if (r1 > w->n_rows) r1 = w->n_rows;
        if (j->tiled) {
            j->pk->gemm_tiled(w->n_cols, j->packed[i] + (size_t)(r0 / TOY_PACK_ROWS) * w->packed_group, r1 - r0,
                              j->act, j->act_row, j->n_tok, j->tiled, y + r0, (size_t)w->n_rows);
            return;
        }
        j->pk->gemm(w->n_cols, j->packed[i] + (size_t)(r0 / TOY_PACK_ROWS) * w->packed_group, r1 - r0, j->act,
                    j->act_row, j->n_tok, y + r0, (size_t)w->n_rows);
        return;
    }
    if (k->vec_dot_tile && j->n_tok > 1 && w->n_parts <= 1) {
        /* prefill: each weight block is decoded once for a tile of tokens */
        for (int64_t t0 = 0; t0 < j->n_tok; t0 += TOY_TILE_MAX) {
            int n_a = j->n_tok - t0 < TOY_TILE_MAX ? (int)(j->n_tok - t0) : TOY_TILE_MAX;
            k->vec_dot_tile(w->n_cols, ty_weight_row(w, r0), w->row_size, (int)(r1 - r0),
                            j->act + (size_t)t0 * j->act_row, j->act_row, n_a,
                            y + t0 * w->n_rows + r0, (size_t)w->n_rows);
        }
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const void *row = ty_weight_row(w, r);
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

static void cpu_matmul_multi(ty_backend *be, int n_w, const ty_weight *const *w, const float *x,
                             int64_t n_tok, float *const *y) {
    cpu_backend *c = (cpu_backend *)be;
    matmul_job j = {.x = x, .n_cols = w[0]->n_cols, .n_tok = n_tok};
    for (int i = 0; i < n_w; i++) {
        const ty_kernel *k = ty_kernel_get(w[i]->type);
        const uint8_t *packed = ty_weight_packed(w[i]); /* once: it may appear meanwhile */
        const ty_packed_kernel *pk = packed ? ty_packed_get(w[i]->type) : NULL;
        /* matrices whose inputs are rounded differently run as jobs of their own */
        if (j.n_w == MATMUL_MAX ||
            (j.n_w && (k->vec_dot_type != j.k[0]->vec_dot_type || pk != j.pk))) {
            cpu_matmul_multi(be, n_w - i, w + i, x, n_tok, y + i);
            break;
        }
        j.w[j.n_w] = w[i];
        j.k[j.n_w] = k;
        j.pk = pk;
        j.packed[j.n_w] = packed;
        j.y[j.n_w] = y[i];
        const int64_t rows = pk ? (w[i]->n_rows + TOY_PACK_ROWS - 1) / TOY_PACK_ROWS * TOY_PACK_ROWS : w[i]->n_rows;
        j.row0[j.n_w + 1] = j.row0[j.n_w] + rows;
        j.n_w++;
    }
    /* the model loader refuses types without a kernel and rows that are not whole
     * blocks, so this cannot fail here */
    if (j.pk) j.act_row = (size_t)(j.n_cols / j.pk->block_cols) * j.pk->act_block;
    else ty_kernel_act_row_size(j.k[0], j.n_cols, &j.act_row);
    j.act = c->act; /* sized by reserve() */
    ty_pool_run(c->pool, n_tok, quantize_act_task, &j);
    /* a prompt's activations, for a kernel that reads them as tiles, laid out once */
    if (j.pk && j.pk->tile_act && n_tok >= TOY_PACK_ROWS && j.pk->tiled_bytes(j.n_cols, n_tok) <= c->tiled_size) {
        j.tiled = c->tiled;
        ty_pool_run(c->pool, n_tok / TOY_PACK_ROWS, tile_act_task, &j);
    }
    /* Each thread runs a contiguous range of the tasks, long streams for the hardware
     * prefetcher, then helps with the ends of the others' ranges (threadpool.h): many
     * tasks per thread let the threads finish together. */
    const int64_t rows = j.row0[j.n_w];
    int64_t n_tasks = (int64_t)ty_pool_size(c->pool) * MATMUL_TASKS_PER_THREAD;
    j.rows_per_task = (rows + n_tasks - 1) / n_tasks;
    if (j.rows_per_task < 4) j.rows_per_task = 4;
    if (j.pk) j.rows_per_task = (j.rows_per_task + TOY_PACK_ROWS - 1) / TOY_PACK_ROWS * TOY_PACK_ROWS;
    ty_pool_run(c->pool, (rows + j.rows_per_task - 1) / j.rows_per_task, matmul_task, &j);
}

static void cpu_matmul(ty_backend *be, const ty_weight *w, const float *x, int64_t n_tok,
                       float *y) {
    cpu_matmul_multi(be, 1, &w, x, n_tok, &y);
}

static void cpu_get_rows(ty_backend *be, const ty_weight *w, const int32_t *ids, int64_t n,
                         float *y) {
    (void)be;
    const ty_type_traits *tr = ty_type_traits_get(w->type);
    for (int64_t i = 0; i < n; i++) tr->to_float(ty_weight_row(w, ids[i]), y + i * w->n_cols, w->n_cols);
}

/* ---------------------------------------------------------------- rope */

typedef struct {
    float *x;
    int32_t n_heads, head_dim;
    const int32_t *pos;
    const ty_rope_params *p;
} rope_job;

static void rope_range(const void *ctx, int64_t t0, int64_t t1) {
    const rope_job *j = ctx;
    float *x = j->x;
    const int32_t n_heads = j->n_heads, head_dim = j->head_dim;
    const int32_t *pos = j->pos;
    const ty_rope_params *p = j->p;
    const int32_t n_rot = p->n_rot;
    float cs[TOY_MAX_HEAD_DIM];
    for (int64_t t = t0; t < t1; t++) {
        ty_rope_cos_sin(p, pos[t], cs);
        for (int32_t h = 0; h < n_heads; h++) {
            float *v = x + (t * n_heads + h) * head_dim;
            for (int32_t i0 = 0; i0 < n_rot; i0 += 2) {
                const float c = cs[i0], s = cs[i0 + 1];
                int32_t a, b;
                if (p->type == TY_ROPE_NEOX) {
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

static void cpu_rope(ty_backend *be, float *x, int64_t n_tok, int32_t n_heads, int32_t head_dim,
                     const int32_t *pos, const ty_rope_params *p) {
    rope_job j = {x, n_heads, head_dim, pos, p};
    const int64_t per_token = (int64_t)n_heads * head_dim;
    ty_pool_for(((cpu_backend *)be)->pool, n_tok, ty_pool_grain_rows(per_token), rope_range, &j);
}


/* ---------------------------------------------------------------- elementwise */

typedef struct {
    float *y;
    const float *gate, *up;
    const ty_cpu_ops *cpu;
} glu_job;

static void swiglu_range(const void *ctx, int64_t i0, int64_t i1) {
    const glu_job *j = ctx;
    j->cpu->swiglu(j->y + i0, j->gate + i0, j->up + i0, i1 - i0);
}

static void cpu_swiglu(ty_backend *be, float *y, const float *gate, const float *up, int64_t n) {
    glu_job j = {y, gate, up, ((cpu_backend *)be)->cpu};
    ty_pool_for(((cpu_backend *)be)->pool, n, TY_POOL_GRAIN, swiglu_range, &j);
}

/* ggml evaluates GELU through a table of all 65536 halves: the input is rounded to
 * fp16 and so is the output (ggml_vec_gelu_f32 with GGML_GELU_FP16). */
static float gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) {
        const float x = ty_fp16_to_fp32((ty_half)i);
        const float g = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x *
                                                 (1.0f + 0.044715f * x * x)));
        gelu_table[i] = ty_fp16_to_fp32(ty_fp32_to_fp16(g));
    }
}

static float gelu(float g) {
    if (g <= -10.0f) return 0.0f;
    if (g >= 10.0f) return g;
    return gelu_table[ty_fp32_to_fp16(g)];
}

static void geglu_range(const void *ctx, int64_t i0, int64_t i1) {
    const glu_job *j = ctx;
    for (int64_t i = i0; i < i1; i++) j->y[i] = gelu(j->gate[i]) * j->up[i];
}

static void gelu_range(const void *ctx, int64_t i0, int64_t i1) {
    const glu_job *j = ctx;
    for (int64_t i = i0; i < i1; i++) j->y[i] = gelu(j->gate[i]);
}

static void cpu_geglu(ty_backend *be, float *y, const float *gate, const float *up, int64_t n) {
    glu_job j = {y, gate, up, ((cpu_backend *)be)->cpu};
    ty_pool_for(((cpu_backend *)be)->pool, n, TY_POOL_GRAIN, geglu_range, &j);
}

static void cpu_gelu(ty_backend *be, float *y, const float *x, int64_t n) {
    glu_job j = {y, x, NULL, ((cpu_backend *)be)->cpu};
    ty_pool_for(((cpu_backend *)be)->pool, n, TY_POOL_GRAIN, gelu_range, &j);
}

typedef struct {
    float *y;
    const float *x;
} add_job;

static void add_range(const void *ctx, int64_t i0, int64_t i1) {
    const add_job *j = ctx;
    for (int64_t i = i0; i < i1; i++) j->y[i] += j->x[i];
}

static void cpu_add(ty_backend *be, float *y, const float *x, int64_t n) {
    add_job j = {y, x};
    ty_pool_for(((cpu_backend *)be)->pool, n, TY_POOL_GRAIN, add_range, &j);
}

static void cpu_add_bias(ty_backend *be, float *y, const float *b, int64_t n_tok, int64_t n) {
    (void)be;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++) y[t * n + i] += b[i];
}

static void cpu_scale(ty_backend *be, float *y, float s, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

/* three roundings, as ggml's scale, tanh, scale */
static void cpu_softcap(ty_backend *be, float *y, float cap, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(y[i] * (1.0f / cap)) * cap;
}

static void cpu_sigmoid(ty_backend *be, float *y, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-y[i]));
}

static void cpu_free(ty_backend *be) {
    cpu_backend *c = (cpu_backend *)be;
    if (!c) return;
    ty_pool_free(c->pool);
    free(c->act);
    free(c->tiled);
    ty_cpu_attention_free(c);
    free(c);
}

ty_backend *ty_backend_cpu_new(int n_threads) {
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->base = (ty_backend){
        .name = "cpu",
        .reserve = cpu_reserve,
        .rms_norm = cpu_rms_norm,
        .layer_norm = cpu_layer_norm,
        .matmul = cpu_matmul,
        .matmul_multi = cpu_matmul_multi,
        .get_rows = cpu_get_rows,
        .rope = cpu_rope,
        .attention = ty_cpu_attention,
        .attn_scores = ty_cpu_attn_scores,
        .softmax_rows = ty_cpu_softmax_rows,
        .attn_mix = ty_cpu_attn_mix,
        .swiglu = cpu_swiglu,
        .geglu = cpu_geglu,
        .gelu = cpu_gelu,
        .add = cpu_add,
        .add_bias = cpu_add_bias,
        .scale = cpu_scale,
        .softcap = cpu_softcap,
        .sigmoid = cpu_sigmoid,
        .free = cpu_free,
    };
    pthread_once(&gelu_once, gelu_table_init);
    c->cpu = ty_cpu();
    c->pool = ty_pool_new(n_threads);
    if (!c->pool) {
        free(c);
        return NULL;
    }
    return &c->base;
}
