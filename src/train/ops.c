/* ops.c — the forward/backward pairs of ops.h.
 *
 * Products go through gemm.h; everything else is a loop over rows (or, for sums over
 * rows, over columns) cut into tasks for the thread pool. The exponentials of the
 * softmaxes and gates are vec_exp.h's, and sums along a row go into 16 float lanes
 * (element i into lane i % 16, combined pairwise at the end), in the scalar, AVX2 and
 * AVX-512 versions alike: training gives the same bits on every instruction set.
 */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "ops.h"
#include "vec_exp.h"

/* ---------------------------------------------------------------- row kernels */

static float row_max(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* the sum of x[i] * y[i] in 16 lanes, each product rounded first */
static float row_dot(const float *x, const float *y, int64_t n) {
    float l[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) l[k] += x[i + k] * y[i + k];
    for (; i < n; i++) l[i % 16] += x[i] * y[i];
    return ty_lanes16_sum(l);
}

/* ---------------------------------------------------------------- embedding */

void ty_embedding_forward(float *out, const int32_t *tok, const float *wte, int64_t n, int64_t C,
                       float scale) {
    for (int64_t i = 0; i < n; i++) {
        const float *src = wte + (int64_t)tok[i] * C;
        float *dst = out + i * C;
        if (scale == 1.0f) memcpy(dst, src, (size_t)C * sizeof *dst);
        else
            for (int64_t c = 0; c < C; c++) dst[c] = src[c] * scale;
    }
}

/* in token order: a row several tokens share gets their gradients in a fixed order */
void ty_embedding_backward(float *dwte, const float *dout, const int32_t *tok, int64_t n, int64_t C,
                        float scale) {
    for (int64_t i = 0; i < n; i++) {
        float *dst = dwte + (int64_t)tok[i] * C;
        const float *src = dout + i * C;
        for (int64_t c = 0; c < C; c++) dst[c] += src[c] * scale;
    }
}

/* ---------------------------------------------------------------- positions */

void ty_position_forward(float *out, const float *wpe, int64_t n, int64_t T, int64_t C) {
    for (int64_t r = 0; r < n; r++) {
        const float *p = wpe + (r % T) * C;
        float *y = out + r * C;
        for (int64_t c = 0; c < C; c++) y[c] += p[c];
    }
}

typedef struct {
    float *dwpe;
    const float *dout;
    int64_t n, T, C;
} position_args;

/* one position's row per task, its rows (one per sequence) in order */
static void position_bwd_rows(const void *args, int64_t t0, int64_t t1) {
    const position_args *a = args;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t r = t; r < a->n; r += a->T)
            for (int64_t c = 0; c < a->C; c++) a->dwpe[t * a->C + c] += a->dout[r * a->C + c];
}

void ty_position_backward(ty_pool *pool, float *dwpe, const float *dout, int64_t n, int64_t T, int64_t C) {
    position_args a = {dwpe, dout, n, T, C};
    ty_pool_for(pool, T < n ? T : n, ty_pool_grain_rows(C), position_bwd_rows, &a);
}

/* ---------------------------------------------------------------- norms */

typedef struct {
    float *out, *mean, *rstd, *dx, *dw, *db;
    const float *x, *w, *b, *dout, *mean_in, *rstd_in;
    int64_t n, C;
    float eps;
} norm_args;

/* the sum of x[i] in 16 lanes */
static float row_sum(const float *x, int64_t n) {
    float l[16] = {0};
    for (int64_t i = 0; i < n; i++) l[i % 16] += x[i];
    return ty_lanes16_sum(l);
}

static void layernorm_fwd_rows(const void *args, int64_t r0, int64_t r1) {
    const norm_args *a = args;
    const int64_t C = a->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * C;
        float *y = a->out + r * C;
        const float mu = row_sum(x, C) / (float)C;
        float l[16] = {0};
        for (int64_t i = 0; i < C; i++) l[i % 16] += (x[i] - mu) * (x[i] - mu);
        const float rs = 1.0f / sqrtf(ty_lanes16_sum(l) / (float)C + a->eps);
        if (a->mean) a->mean[r] = mu;
        if (a->rstd) a->rstd[r] = rs;
        for (int64_t i = 0; i < C; i++) y[i] = (x[i] - mu) * rs * a->w[i] + a->b[i];
    }
}

void ty_layernorm_forward(ty_pool *pool, float *out, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int64_t n, int64_t C, float eps) {
    norm_args a = {.out = out, .mean = mean, .rstd = rstd, .x = x, .w = w, .b = b, .n = n, .C = C, .eps = eps};
    ty_pool_for(pool, n, ty_pool_grain_rows(C), layernorm_fwd_rows, &a);
}

/* with xh = (x - mean) rstd and g = w dy: dx = rstd (g - mean(g) - xh mean(g xh)) */
static void layernorm_bwd_rows(const void *args, int64_t r0, int64_t r1) {
    const norm_args *a = args;
    const int64_t C = a->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * C, *dy = a->dout + r * C;
        float *dx = a->dx + r * C;
        const float mu = a->mean_in[r], rs = a->rstd_in[r];
        float lg[16] = {0}, lgx[16] = {0};
        for (int64_t i = 0; i < C; i++) {
            const float g = a->w[i] * dy[i];
            lg[i % 16] += g;
            lgx[i % 16] += g * ((x[i] - mu) * rs);
        }
        const float mg = ty_lanes16_sum(lg) / (float)C, mgx = ty_lanes16_sum(lgx) / (float)C;
        for (int64_t i = 0; i < C; i++) dx[i] += rs * (a->w[i] * dy[i] - mg - ((x[i] - mu) * rs) * mgx);
    }
}

/* dw_i += sum over rows of dy_i xh_i, db_i += sum of dy_i: one column range per task */
static void layernorm_bwd_cols(const void *args, int64_t c0, int64_t c1) {
    const norm_args *a = args;
    for (int64_t r = 0; r < a->n; r++) {
        const float *x = a->x + r * a->C, *dy = a->dout + r * a->C;
        const float mu = a->mean_in[r], rs = a->rstd_in[r];
        for (int64_t i = c0; i < c1; i++) {
            if (a->dw) a->dw[i] += dy[i] * ((x[i] - mu) * rs);
            if (a->db) a->db[i] += dy[i];
        }
    }
}

void ty_layernorm_backward(ty_pool *pool, float *dx, float *dw, float *db, const float *dout, const float *x,
                        const float *w, const float *mean, const float *rstd, int64_t n, int64_t C) {
    norm_args a = {.dx = dx, .dw = dw, .db = db, .x = x, .w = w, .dout = dout, .mean_in = mean, .rstd_in = rstd,
                   .n = n, .C = C};
    if (dx) ty_pool_for(pool, n, ty_pool_grain_rows(C), layernorm_bwd_rows, &a);
    if (dw || db) ty_pool_for(pool, C, 16, layernorm_bwd_cols, &a);
}

static void rmsnorm_fwd_rows(const void *args, int64_t r0, int64_t r1) {
    const norm_args *a = args;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * a->C;
        float *y = a->out + r * a->C;
        const float ss = row_dot(x, x, a->C);
        const float rs = 1.0f / sqrtf(ss / (float)a->C + a->eps);
        if (a->rstd) a->rstd[r] = rs;
        for (int64_t i = 0; i < a->C; i++) y[i] = x[i] * rs * a->w[i];
    }
}

void ty_rmsnorm_forward(ty_pool *pool, float *out, float *rstd, const float *x, const float *w,
                     int64_t n, int64_t C, float eps) {
    norm_args a = {.out = out, .rstd = rstd, .x = x, .w = w, .n = n, .C = C, .eps = eps};
    ty_pool_for(pool, n, ty_pool_grain_rows(C), rmsnorm_fwd_rows, &a);
}

/* dx_i = rstd * (w_i dy_i - x_i rstd^2 mean_j(w_j dy_j x_j)) */
static void rmsnorm_bwd_rows(const void *args, int64_t r0, int64_t r1) {
    const norm_args *a = args;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * a->C, *dy = a->dout + r * a->C;
        float *dx = a->dx + r * a->C;
        const float rs = a->rstd_in[r];
        float l[16] = {0};
        for (int64_t i = 0; i < a->C; i++) l[i % 16] += (a->w[i] * dy[i]) * x[i];
        const float k = rs * rs * rs * ty_lanes16_sum(l) / (float)a->C;
        for (int64_t i = 0; i < a->C; i++) dx[i] += rs * (a->w[i] * dy[i]) - k * x[i];
    }
}

/* dw_i += sum over rows of dy_i x_i rstd, one column range per task, rows in order */
static void rmsnorm_bwd_cols(const void *args, int64_t c0, int64_t c1) {
    const norm_args *a = args;
    for (int64_t r = 0; r < a->n; r++) {
        const float *x = a->x + r * a->C, *dy = a->dout + r * a->C;
        const float rs = a->rstd_in[r];
        for (int64_t i = c0; i < c1; i++) a->dw[i] += dy[i] * (x[i] * rs);
    }
}

void ty_rmsnorm_backward(ty_pool *pool, float *dx, float *dw, const float *dout, const float *x,
                      const float *w, const float *rstd, int64_t n, int64_t C) {
    norm_args a = {.dx = dx, .dw = dw, .x = x, .w = w, .dout = dout, .rstd_in = rstd, .n = n, .C = C};
    if (dx) ty_pool_for(pool, n, ty_pool_grain_rows(C), rmsnorm_bwd_rows, &a);
    if (dw) ty_pool_for(pool, C, 16, rmsnorm_bwd_cols, &a);
}

/* ---------------------------------------------------------------- matmul */

typedef struct {
    float *y;
    float *db;
    const float *b, *dy;
    int64_t n, C;
} bias_args;

static void bias_fwd_rows(const void *args, int64_t r0, int64_t r1) {
    const bias_args *a = args;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t i = 0; i < a->C; i++) a->y[r * a->C + i] += a->b[i];
}

static void bias_bwd_cols(const void *args, int64_t c0, int64_t c1) {
    const bias_args *a = args;
    for (int64_t r = 0; r < a->n; r++)
        for (int64_t i = c0; i < c1; i++) a->db[i] += a->dy[r * a->C + i];
}

void ty_matmul_forward(ty_gemm *g, float *out, const float *in, const float *w, const ty_matmul_panels *panels,
                       const float *bias, int64_t n, int64_t C, int64_t OC) {
    ty_gemm_args p = {false, true, false, n, OC, C, in, C, w, C, out, OC, panels ? panels->w : NULL,
                      panels ? panels->in : NULL};
    ty_gemm_run(g, &p);
    if (bias) {
        bias_args a = {.y = out, .b = bias, .n = n, .C = OC};
        ty_pool_for(ty_gemm_pool(g), n, ty_pool_grain_rows(OC), bias_fwd_rows, &a);
    }
}

void ty_matmul_backward(ty_gemm *g, float *din, float *dw, float *dbias, const float *dout, const float *in,
                        const float *w, const ty_matmul_panels *panels, int64_t n, int64_t C, int64_t OC) {
    if (din) { /* din[n x C] += dout[n x OC] W[OC x C] */
        ty_gemm_args p = {false, false, true, n, C, OC, dout, OC, w, C, din, C, panels ? panels->w : NULL, NULL};
        ty_gemm_run(g, &p);
    }
    if (dw) { /* dW[OC x C] += dout^T in */
        ty_gemm_args p = {true, false, true, OC, C, n, dout, OC, in, C, dw, C, panels ? panels->in : NULL, NULL};
        ty_gemm_run(g, &p);
    }
    if (dbias) {
        bias_args a = {.db = dbias, .dy = dout, .n = n, .C = OC};
        ty_pool_for(ty_gemm_pool(g), OC, 16, bias_bwd_cols, &a);
    }
}

/* ---------------------------------------------------------------- rope */

typedef struct {
    float *x;
    int64_t T;
    int n_heads, head_dim;
    const ty_rope_params *p;
    const float *cs;
    float sign; /* +1 forward, -1 backward (the transposed rotation) */
} rope_args;

static void rope_rows(const void *args, int64_t r0, int64_t r1) {
    const rope_args *a = args;
    const int32_t n_rot = a->p->n_rot;
    for (int64_t r = r0; r < r1; r++) {
        const float *cs = a->cs + (r % a->T) * n_rot;
        for (int h = 0; h < a->n_heads; h++) {
            float *v = a->x + (r * a->n_heads + h) * a->head_dim;
            for (int32_t i0 = 0; i0 < n_rot; i0 += 2) {
                const float c = cs[i0], s = a->sign * cs[i0 + 1];
                const int32_t i = a->p->type == TY_ROPE_NEOX ? i0 / 2 : i0;
                const int32_t j = a->p->type == TY_ROPE_NEOX ? i0 / 2 + n_rot / 2 : i0 + 1;
                const float x0 = v[i], x1 = v[j];
                v[i] = x0 * c - x1 * s;
                v[j] = x0 * s + x1 * c;
            }
        }
    }
}

void ty_rope_forward(ty_pool *pool, float *x, int64_t n, int64_t T, int n_heads, int head_dim,
                  const ty_rope_params *p, const float *cs) {
    rope_args a = {x, T, n_heads, head_dim, p, cs, 1.0f};
    ty_pool_for(pool, n, ty_pool_grain_rows((int64_t)n_heads * head_dim), rope_rows, &a);
}

/* y0 = c x0 - s x1, y1 = s x0 + c x1: dx0 = c dy0 + s dy1, dx1 = -s dy0 + c dy1 */
void ty_rope_backward(ty_pool *pool, float *dx, int64_t n, int64_t T, int n_heads, int head_dim,
                   const ty_rope_params *p, const float *cs) {
    rope_args a = {dx, T, n_heads, head_dim, p, cs, -1.0f};
    ty_pool_for(pool, n, ty_pool_grain_rows((int64_t)n_heads * head_dim), rope_rows, &a);
}

/* one pass in row order: the sums do not depend on threads */
void ty_rope_freq_backward(float *dff, const float *y, const float *dy, int64_t n, int64_t T,
                        int n_heads, int head_dim, const ty_rope_params *p, const float *theta) {
    const int32_t n_rot = p->n_rot;
    for (int64_t r = 0; r < n; r++) {
        const float *th = theta + (r % T) * (n_rot / 2);
        for (int32_t i0 = 0; i0 < n_rot; i0 += 2) {
            const int32_t i = p->type == TY_ROPE_NEOX ? i0 / 2 : i0;
            const int32_t j = p->type == TY_ROPE_NEOX ? i0 / 2 + n_rot / 2 : i0 + 1;
            double dangle = 0;
            for (int h = 0; h < n_heads; h++) {
                const float *yv = y + (r * n_heads + h) * head_dim, *dv = dy + (r * n_heads + h) * head_dim;
                dangle += (double)dv[j] * yv[i] - (double)dv[i] * yv[j];
            }
            dff[i0 / 2] += (float)(-dangle * th[i0 / 2] / p->freq_factors[i0 / 2]);
        }
    }
}

/* ---------------------------------------------------------------- attention */

/* Query rows are taken in blocks: a block's scores cover only the keys some row of it
 * sees (causal, sliding window), so about half of T x T is computed. */
#define ATT_ROWS 64

/* the keys [lo, hi) that some query of rows [i0, i1) sees */
static void att_key_range(const attention_shape *s, int64_t i0, int64_t i1, int64_t *lo, int64_t *hi) {
    *lo = s->n_swa > 0 && i0 - s->n_swa + 1 > 0 ? i0 - s->n_swa + 1 : 0;
    *hi = i1;
}

/* the keys query i sees, as columns [c0, c1) of a block whose first key is lo */
static void att_visible_range(const attention_shape *s, int64_t i, int64_t lo, int64_t *c0, int64_t *c1) {
    const int64_t first = s->n_swa > 0 && i - s->n_swa + 1 > 0 ? i - s->n_swa + 1 : 0;
    *c0 = first - lo > 0 ? first - lo : 0;
    *c1 = i + 1 - lo;
}

/* score of a raw dot product, and its derivative */
static float att_score(const attention_shape *s, float dot, float *dscore_ddot) {
    if (s->softcap > 0.0f) {
        const float t = tanhf(dot / s->softcap);
        if (dscore_ddot) *dscore_ddot = (1.0f - t * t) * s->scale;
        return s->softcap * t * s->scale;
    }
    if (dscore_ddot) *dscore_ddot = s->scale;
    return dot * s->scale;
}

int64_t ty_attention_scratch_floats(const attention_shape *s, int n_threads) {
    return 2 * (int64_t)ATT_ROWS * s->T * n_threads;
}

typedef struct {
    ty_gemm *g;
    const attention_shape *s;
    float *out, *lse, *dq, *dk, *dv;
    const float *q, *k, *v, *dout, *out_in, *lse_in;
    float *scratch;
} att_job;

/* S[i][j] = q_i . k_j for query rows [i0, i1) and keys [lo, hi) of one head pair */
static void att_dots(const att_job *j, int thread, const float *q, const float *k, int64_t i0,
                     int64_t i1, int64_t lo, int64_t hi, float *S) {
    const attention_shape *s = j->s;
    const int64_t qd = (int64_t)s->n_head * s->head_dim, kvd = (int64_t)s->n_head_kv * s->head_dim;
    ty_gemm_args p = {false, true, false, i1 - i0, hi - lo, s->head_dim, q + i0 * qd, qd,
                       k + lo * kvd, kvd, S, hi - lo, NULL, NULL};
    ty_gemm_run_1(j->g, thread, &p);
}

static void att_fwd_task(void *ctx, int64_t task, int thread) {
    const att_job *j = ctx;
    const attention_shape *s = j->s;
    const int64_t b = task / s->n_head, h = task % s->n_head, g = h / (s->n_head / s->n_head_kv);
    const int64_t qd = (int64_t)s->n_head * s->head_dim, kvd = (int64_t)s->n_head_kv * s->head_dim;
    const float *q = j->q + b * s->T * qd + h * s->head_dim;
    const float *k = j->k + b * s->T * kvd + g * s->head_dim;
    const float *v = j->v + b * s->T * kvd + g * s->head_dim;
    float *out = j->out + b * s->T * qd + h * s->head_dim;
    float *lse = j->lse + (b * s->n_head + h) * s->T;
    float *S = j->scratch + (size_t)thread * 2 * ATT_ROWS * s->T;
    for (int64_t i0 = 0; i0 < s->T; i0 += ATT_ROWS) {
        const int64_t i1 = i0 + ATT_ROWS < s->T ? i0 + ATT_ROWS : s->T;
        int64_t lo, hi;
        att_key_range(s, i0, i1, &lo, &hi);
        const int64_t nk = hi - lo;
        att_dots(j, thread, q, k, i0, i1, lo, hi, S);
        for (int64_t i = i0; i < i1; i++) {
            float *row = S + (i - i0) * nk;
            int64_t c0, c1; /* the keys row i sees: [c0, c1) of the block */
            att_visible_range(s, i, lo, &c0, &c1);
            for (int64_t c = c0; c < c1; c++) row[c] = att_score(s, row[c], NULL);
            const float mx = row_max(row + c0, c1 - c0);
            const float sum = ty_cpu()->row_exp(row + c0, row + c0, c1 - c0, mx, 1.0f);
            const float inv = 1.0f / sum;
            for (int64_t c = c0; c < c1; c++) row[c] *= inv;
            memset(row, 0, (size_t)c0 * sizeof *row);
            memset(row + c1, 0, (size_t)(nk - c1) * sizeof *row);
            lse[i] = mx + logf(sum);
        }
        /* out rows [i0, i1) = P V */
        ty_gemm_args p = {false, false, false, i1 - i0, s->head_dim, nk, S, nk, v + lo * kvd, kvd,
                           out + i0 * qd, qd, NULL, NULL};
        ty_gemm_run_1(j->g, thread, &p);
    }
}

void ty_attention_forward(ty_gemm *g, float *out, float *lse, const float *q, const float *k,
                       const float *v, const attention_shape *s, float *scratch) {
    att_job j = {.g = g, .s = s, .out = out, .lse = lse, .q = q, .k = k, .v = v, .scratch = scratch};
    ty_pool *pool = ty_gemm_pool(g);
    const int64_t tasks = s->B * s->n_head;
    if (pool) ty_pool_run(pool, tasks, att_fwd_task, &j);
    else
        for (int64_t t = 0; t < tasks; t++) att_fwd_task(&j, t, 0);
}

/* One task per (sequence, KV head): the query heads of its group in order, so the
 * gradients of the shared K and V rows are summed in a fixed order. */
static void att_bwd_task(void *ctx, int64_t task, int thread) {
    const att_job *j = ctx;
    const attention_shape *s = j->s;
    const int64_t b = task / s->n_head_kv, g = task % s->n_head_kv, group = s->n_head / s->n_head_kv;
    const int64_t qd = (int64_t)s->n_head * s->head_dim, kvd = (int64_t)s->n_head_kv * s->head_dim;
    const float *k = j->k + b * s->T * kvd + g * s->head_dim;
    const float *v = j->v + b * s->T * kvd + g * s->head_dim;
    float *dk = j->dk + b * s->T * kvd + g * s->head_dim;
    float *dv = j->dv + b * s->T * kvd + g * s->head_dim;
    float *S = j->scratch + (size_t)thread * 2 * ATT_ROWS * s->T;
    float *dP = S + ATT_ROWS * s->T;
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
        const float *q = j->q + b * s->T * qd + h * s->head_dim;
        const float *o = j->out_in + b * s->T * qd + h * s->head_dim;
        const float *dout = j->dout + b * s->T * qd + h * s->head_dim;
        float *dq = j->dq + b * s->T * qd + h * s->head_dim;
        const float *lse = j->lse_in + (b * s->n_head + h) * s->T;
        for (int64_t i0 = 0; i0 < s->T; i0 += ATT_ROWS) {
            const int64_t i1 = i0 + ATT_ROWS < s->T ? i0 + ATT_ROWS : s->T, m = i1 - i0;
            int64_t lo, hi;
            att_key_range(s, i0, i1, &lo, &hi);
            const int64_t nk = hi - lo;
            att_dots(j, thread, q, k, i0, i1, lo, hi, S);
            /* dP = dO V^T */
            ty_gemm_args pdp = {false, true, false, m, nk, s->head_dim, dout + i0 * qd, qd,
                                 v + lo * kvd, kvd, dP, nk, NULL, NULL};
            ty_gemm_run_1(j->g, thread, &pdp);
            for (int64_t i = i0; i < i1; i++) {
                float *srow = S + (i - i0) * nk, *drow = dP + (i - i0) * nk;
                /* dO_i . O_i = sum_j P_ij dP_ij */
                const float D = row_dot(dout + i * qd, o + i * qd, s->head_dim);
                int64_t c0, c1;
                att_visible_range(s, i, lo, &c0, &c1);
                if (s->softcap > 0.0f) {
                    for (int64_t c = c0; c < c1; c++) {
                        float dsc;
                        const float p = ty_exp_nonpos(att_score(s, srow[c], &dsc) - lse[i]);
                        srow[c] = p;
                        drow[c] = p * (drow[c] - D) * dsc;
                    }
                } else {
                    for (int64_t c = c0; c < c1; c++) srow[c] *= s->scale;
                    ty_cpu()->row_exp(srow + c0, srow + c0, c1 - c0, lse[i], 1.0f); /* P, for dV */
                    for (int64_t c = c0; c < c1; c++) drow[c] = srow[c] * (drow[c] - D) * s->scale; /* d(raw dot) */
                }
                memset(srow, 0, (size_t)c0 * sizeof *srow);
                memset(srow + c1, 0, (size_t)(nk - c1) * sizeof *srow);
                memset(drow, 0, (size_t)c0 * sizeof *drow);
                memset(drow + c1, 0, (size_t)(nk - c1) * sizeof *drow);
            }
            /* dV[lo, hi) += P^T dO;  dQ[i0, i1) += dS K;  dK[lo, hi) += dS^T Q */
            ty_gemm_args pdv = {true, false, true, nk, s->head_dim, m, S, nk, dout + i0 * qd, qd,
                                 dv + lo * kvd, kvd, NULL, NULL};
            ty_gemm_run_1(j->g, thread, &pdv);
            ty_gemm_args pdq = {false, false, true, m, s->head_dim, nk, dP, nk, k + lo * kvd, kvd,
                                 dq + i0 * qd, qd, NULL, NULL};
            ty_gemm_run_1(j->g, thread, &pdq);
            ty_gemm_args pdk = {true, false, true, nk, s->head_dim, m, dP, nk, q + i0 * qd, qd,
                                 dk + lo * kvd, kvd, NULL, NULL};
            ty_gemm_run_1(j->g, thread, &pdk);
        }
    }
}

void ty_attention_backward(ty_gemm *g, float *dq, float *dk, float *dv, const float *dout,
                        const float *out, const float *lse, const float *q, const float *k,
                        const float *v, const attention_shape *s, float *scratch) {
    att_job j = {.g = g, .s = s, .dq = dq, .dk = dk, .dv = dv, .dout = dout, .out_in = out,
                 .lse_in = lse, .q = q, .k = k, .v = v, .scratch = scratch};
    ty_pool *pool = ty_gemm_pool(g);
    const int64_t tasks = s->B * s->n_head_kv;
    if (pool) ty_pool_run(pool, tasks, att_bwd_task, &j);
    else
        for (int64_t t = 0; t < tasks; t++) att_bwd_task(&j, t, 0);
}

/* ---------------------------------------------------------------- gated activations */

typedef struct {
    float *out, *dgate, *dup;
    const float *gate, *up, *dout;
} glu_args;

static void swiglu_fwd_range(const void *args, int64_t i0, int64_t i1) {
    const glu_args *a = args;
    ty_cpu()->swiglu(a->out + i0, a->gate + i0, a->up + i0, i1 - i0);
}

static void swiglu_bwd_range(const void *args, int64_t i0, int64_t i1) {
    const glu_args *a = args;
    ty_cpu()->swiglu_bwd(a->dgate + i0, a->dup + i0, a->dout + i0, a->gate + i0, a->up + i0, i1 - i0);
}

#define GELU_C 0.79788456080286535588f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

static float gelu(float x, float *dgelu) {
    const float u = GELU_C * (x + GELU_A * x * x * x), t = tanhf(u);
    if (dgelu)
        *dgelu = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * x * x);
    return 0.5f * x * (1.0f + t);
}

static void geglu_fwd_range(const void *args, int64_t i0, int64_t i1) {
    const glu_args *a = args;
    for (int64_t i = i0; i < i1; i++) a->out[i] = gelu(a->gate[i], NULL) * a->up[i];
}

static void geglu_bwd_range(const void *args, int64_t i0, int64_t i1) {
    const glu_args *a = args;
    for (int64_t i = i0; i < i1; i++) {
        float dg;
        const float g = gelu(a->gate[i], &dg), dy = a->dout[i];
        a->dgate[i] += dy * a->up[i] * dg;
        a->dup[i] += dy * g;
    }
}

static void gelu_fwd_range(const void *args, int64_t i0, int64_t i1) {
    const glu_args *a = args;
    for (int64_t i = i0; i < i1; i++) a->out[i] = gelu(a->gate[i], NULL);
}

static void gelu_bwd_range(const void *args, int64_t i0, int64_t i1) {
    const glu_args *a = args;
    for (int64_t i = i0; i < i1; i++) {
        float dg;
        gelu(a->gate[i], &dg);
        a->dgate[i] += a->dout[i] * dg;
    }
}

void ty_gelu_forward(ty_pool *pool, float *out, const float *x, int64_t n) {
    glu_args a = {.out = out, .gate = x};
    ty_pool_for(pool, n, TY_POOL_GRAIN, gelu_fwd_range, &a);
}

void ty_gelu_backward(ty_pool *pool, float *dx, const float *dout, const float *x, int64_t n) {
    glu_args a = {.dgate = dx, .dout = dout, .gate = x};
    ty_pool_for(pool, n, TY_POOL_GRAIN, gelu_bwd_range, &a);
}

void ty_swiglu_forward(ty_pool *pool, float *out, const float *gate, const float *up, int64_t n) {
    glu_args a = {.out = out, .gate = gate, .up = up};
    ty_pool_for(pool, n, TY_POOL_GRAIN, swiglu_fwd_range, &a);
}

void ty_swiglu_backward(ty_pool *pool, float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, int64_t n) {
    glu_args a = {.dgate = dgate, .dup = dup, .dout = dout, .gate = gate, .up = up};
    ty_pool_for(pool, n, TY_POOL_GRAIN, swiglu_bwd_range, &a);
}

void ty_geglu_forward(ty_pool *pool, float *out, const float *gate, const float *up, int64_t n) {
    glu_args a = {.out = out, .gate = gate, .up = up};
    ty_pool_for(pool, n, TY_POOL_GRAIN, geglu_fwd_range, &a);
}

void ty_geglu_backward(ty_pool *pool, float *dgate, float *dup, const float *dout, const float *gate,
                    const float *up, int64_t n) {
    glu_args a = {.dgate = dgate, .dup = dup, .dout = dout, .gate = gate, .up = up};
    ty_pool_for(pool, n, TY_POOL_GRAIN, geglu_bwd_range, &a);
}

/* ---------------------------------------------------------------- loss */

typedef struct {
    float *y, *loss, *lse, *dy;
    const float *z, *lse_in, *dloss;
    const int32_t *target;
    int64_t V;
    float s, c;
} loss_args;

static void loss_fwd_rows(const void *args, int64_t r0, int64_t r1) {
    const loss_args *a = args;
    for (int64_t r = r0; r < r1; r++) {
        float *z = a->y + r * a->V;
        if (a->s != 1.0f)
            for (int64_t v = 0; v < a->V; v++) z[v] *= a->s;
        if (a->c > 0.0f)
            for (int64_t v = 0; v < a->V; v++) z[v] = a->c * tanhf(z[v] / a->c);
        const float mx = row_max(z, a->V);
        const float lse = mx + logf(ty_cpu()->row_exp(z, NULL, a->V, mx, 1.0f));
        a->lse[r] = lse;
        a->loss[r] = a->target[r] >= 0 ? lse - z[a->target[r]] : 0.0f;
    }
}

void ty_lm_loss_forward(ty_pool *pool, float *y, float *loss, float *lse, const int32_t *target,
                     int64_t n, int64_t V, float s, float c) {
    loss_args a = {.y = y, .loss = loss, .lse = lse, .target = target, .V = V, .s = s, .c = c};
    ty_pool_for(pool, n, 1, loss_fwd_rows, &a);
}

/* dz_v = (softmax(z)_v - [v = target]) dloss; through the softcap dx = dz (1 - (z / c)^2),
 * through the scale dy = dx s */
static void loss_bwd_rows(const void *args, int64_t r0, int64_t r1) {
    const loss_args *a = args;
    for (int64_t r = r0; r < r1; r++) {
        const float *z = a->z + r * a->V;
        float *dy = a->dy + r * a->V;
        const int32_t t = a->target[r];
        const float w = t >= 0 ? a->dloss[r] : 0.0f, lse = a->lse_in[r];
        const float zt = t >= 0 ? z[t] : 0.0f;
        if (a->c > 0.0f) {
            for (int64_t v = 0; v < a->V; v++) {
                const float zv = z[v];
                dy[v] = (ty_exp_nonpos(zv - lse) * w) * (1.0f - (zv / a->c) * (zv / a->c)) * a->s;
            }
        } else {
            ty_cpu()->row_exp(z, dy, a->V, lse, w * a->s);
        }
        if (t >= 0) { /* the target's -1 */
            float d = (ty_exp_nonpos(zt - lse) - 1.0f) * w;
            if (a->c > 0.0f) d *= 1.0f - (zt / a->c) * (zt / a->c);
            dy[t] = d * a->s;
        }
    }
}

void ty_lm_loss_backward(ty_pool *pool, float *dy, const float *z, const float *lse,
                      const int32_t *target, const float *dloss, int64_t n, int64_t V, float s,
                      float c) {
    loss_args a = {.dy = dy, .z = z, .lse_in = lse, .dloss = dloss, .target = target, .V = V,
                   .s = s, .c = c};
    ty_pool_for(pool, n, 1, loss_bwd_rows, &a);
}

/* ---------------------------------------------------------------- helpers */

typedef struct {
    float *y;
    const float *a, *b;
    float s;
} axpy_args;

static void add_scaled_range(const void *args, int64_t i0, int64_t i1) {
    const axpy_args *a = args;
    for (int64_t i = i0; i < i1; i++) a->y[i] = a->a[i] + a->s * a->b[i];
}

static void scale_range(const void *args, int64_t i0, int64_t i1) {
    const axpy_args *a = args;
    for (int64_t i = i0; i < i1; i++) a->y[i] *= a->s;
}

void ty_add_scaled(ty_pool *pool, float *y, const float *a, const float *b, float s, int64_t n) {
    axpy_args x = {y, a, b, s};
    ty_pool_for(pool, n, 65536, add_scaled_range, &x);
}

void ty_scale_inplace(ty_pool *pool, float *y, float s, int64_t n) {
    axpy_args x = {y, NULL, NULL, s};
    ty_pool_for(pool, n, 65536, scale_range, &x);
}

/* ---------------------------------------------------------------- frozen matrices */

typedef struct {
    const ty_weight *w;
    int64_t row0;
    float *panel;
} dequant_args;

static void dequant_rows(const void *args, int64_t r0, int64_t r1) {
    const dequant_args *a = args;
    const ty_type_traits *tr = ty_type_traits_get(a->w->type);
    for (int64_t r = r0; r < r1; r++)
        tr->to_float(ty_weight_row(a->w, a->row0 + r), a->panel + r * a->w->n_cols, a->w->n_cols);
}

/* Rows [o0, o0 + rows) of w as floats into panel, split over the pool. */
static void dequant_panel(ty_pool *pool, const ty_weight *w, int64_t o0, int64_t rows, float *panel) {
    dequant_args a = {w, o0, panel};
    ty_pool_for(pool, rows, 4, dequant_rows, &a);
}

void ty_frozen_matmul_forward(ty_gemm *g, float *out, const float *in, const ty_weight *w, const float *bias,
                           int64_t n, float *panel, int64_t panel_rows) {
    const int64_t C = w->n_cols, OC = w->n_rows;
    for (int64_t o0 = 0; o0 < OC; o0 += panel_rows) {
        const int64_t rows = OC - o0 < panel_rows ? OC - o0 : panel_rows;
        dequant_panel(ty_gemm_pool(g), w, o0, rows, panel);
        ty_gemm_args p = {false, true, false, n, rows, C, in, C, panel, C, out + o0, OC, NULL, NULL};
        ty_gemm_run(g, &p);
    }
    if (bias) {
        bias_args a = {.y = out, .b = bias, .n = n, .C = OC};
        ty_pool_for(ty_gemm_pool(g), n, ty_pool_grain_rows(OC), bias_fwd_rows, &a);
    }
}

void ty_frozen_matmul_backward(ty_gemm *g, float *din, const float *dout, const ty_weight *w, int64_t n,
                            float *panel, int64_t panel_rows) {
    const int64_t C = w->n_cols, OC = w->n_rows;
    for (int64_t o0 = 0; o0 < OC; o0 += panel_rows) {
        const int64_t rows = OC - o0 < panel_rows ? OC - o0 : panel_rows;
        dequant_panel(ty_gemm_pool(g), w, o0, rows, panel);
        /* the k = o chain continues across panels (accumulate): the bits of one product */
        ty_gemm_args p = {false, false, true, n, C, rows, dout + o0, OC, panel, C, din, C, NULL, NULL};
        ty_gemm_run(g, &p);
    }
}

void ty_frozen_embedding_forward(float *out, const int32_t *tok, const ty_weight *w, int64_t n, float scale) {
    const ty_type_traits *tr = ty_type_traits_get(w->type);
    const int64_t C = w->n_cols;
    for (int64_t i = 0; i < n; i++) {
        float *o = out + i * C;
        tr->to_float(ty_weight_row(w, tok[i]), o, C);
        if (scale != 1.0f)
            for (int64_t c = 0; c < C; c++) o[c] *= scale;
    }
}

/* ---------------------------------------------------------------- LoRA */

/* splitmix64: a keyed stream of independent 64-bit values */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct {
    float *out;
    const float *in;
    int64_t C;
    uint32_t threshold; /* drop when the element's 32 random bits are below it */
    float keep_scale;
    uint64_t key;
    int64_t row0; /* the first row's index in the micro-batch */
} dropout_args;

static void dropout_rows(const void *args, int64_t r0, int64_t r1) {
    const dropout_args *a = args;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = 0; c < a->C; c++) {
            const uint32_t u = (uint32_t)(mix64(a->key ^ mix64((uint64_t)((a->row0 + r) * a->C + c))) >> 32);
            const float v = a->in[r * a->C + c];
            a->out[r * a->C + c] = u < a->threshold ? 0.0f : v * a->keep_scale;
        }
}

void ty_dropout_forward(ty_pool *pool, float *out, const float *in, int64_t n, int64_t C, float p, uint64_t key,
                        int64_t row0) {
    dropout_args a = {out, in, C, (uint32_t)((double)p * 4294967296.0 > 4294967295.0 ? 4294967295u
                                                                                        : (double)p * 4294967296.0),
                      1.0f / (1.0f - p), key, row0};
    ty_pool_for(pool, n, ty_pool_grain_rows(C), dropout_rows, &a);
}

void ty_lora_forward(ty_gemm *g, float *out, float *ts, const float *x, const float *a, const float *b, int64_t n,
                     int64_t C, int64_t OC, int64_t r, int64_t groups, float s) {
    const int64_t R = r * groups, OG = OC / groups;
    ty_gemm_args t = {false, true, false, n, R, C, x, C, a, C, ts, R, NULL, NULL};
    ty_gemm_run(g, &t);
    ty_scale_inplace(ty_gemm_pool(g), ts, s, n * R);
    for (int64_t q = 0; q < groups; q++) { /* out's group q += ts's group q B_q^T */
        ty_gemm_args o = {false, true, true, n, OG, r, ts + q * r, R, b + q * OG * r, r, out + q * OG, OC, NULL, NULL};
        ty_gemm_run(g, &o);
    }
}

void ty_lora_backward(ty_gemm *g, float *dx, float *da, float *db, float *dts, const float *dout, const float *x,
                      const float *ts, const float *a, const float *b, int64_t n, int64_t C, int64_t OC, int64_t r,
                      int64_t groups, float s) {
    const int64_t R = r * groups, OG = OC / groups;
    for (int64_t q = 0; q < groups; q++) {
        if (db) { /* dB_q[OG x r] += dout_q^T ts_q */
            ty_gemm_args p = {true, false, true, OG, r, n, dout + q * OG, OC, ts + q * r, R, db + q * OG * r, r, NULL, NULL};
            ty_gemm_run(g, &p);
        }
        /* dts_q = dout_q B_q [n x r] */
        ty_gemm_args p = {false, false, false, n, r, OG, dout + q * OG, OC, b + q * OG * r, r, dts + q * r, R, NULL, NULL};
        ty_gemm_run(g, &p);
    }
    ty_scale_inplace(ty_gemm_pool(g), dts, s, n * R); /* dt = s dts */
    if (da) { /* dA[R x C] += dt^T x */
        ty_gemm_args q = {true, false, true, R, C, n, dts, R, x, C, da, C, NULL, NULL};
        ty_gemm_run(g, &q);
    }
    if (dx) { /* dx[n x C] (+)= dt A */
        ty_gemm_args q = {false, false, true, n, C, R, dts, R, a, C, dx, C, NULL, NULL};
        ty_gemm_run(g, &q);
    }
}
