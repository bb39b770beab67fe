/* test_train_ops.c — every training op's backward (src/train/ops.c) against central
 * finite differences of its forward: for a random upstream gradient dy, the analytic
 * gradient of L = sum(dy * forward(x)) must match (L(x + h) - L(x - h)) / 2h for every
 * input and weight. The forward runs in float, so the differences carry about
 * 1e-7 |L| / h of rounding noise and O(h^2) truncation: with h = 1e-3 on O(1) values the
 * two agree to about 1e-4 relative RMS, and the bound is 2e-3. Also: results do not
 * depend on the number of threads (bit for bit). */
#include "cpu.h"
#include "ops.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static float frand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng >> 40) / (double)(1ULL << 23)) - 1.0f;
}
static float *rand_array(int64_t n, float scale, float offset) {
    float *x = xmalloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = offset + scale * frand();
    return x;
}
static float *zeros(int64_t n) {
    float *x = xmalloc((size_t)n * sizeof *x);
    memset(x, 0, (size_t)n * sizeof *x);
    return x;
}

/* An op under test: forward() fills the outputs from the current inputs; loss() is
 * sum(dy * outputs) in double. */
typedef struct op_case op_case;
struct op_case {
    const char *name;
    double (*loss)(op_case *c);
    void *state;
};

/* relative RMS of numeric vs analytic gradient for the n values of x */
static float fd_step = 1e-3f;

static double fd_check(op_case *c, float *x, const float *grad, int64_t n, const char *what) {
    const float h = fd_step;
    double num2 = 0, err2 = 0;
    for (int64_t i = 0; i < n; i++) {
        const float x0 = x[i];
        x[i] = x0 + h;
        const double lp = c->loss(c);
        x[i] = x0 - h;
        const double lm = c->loss(c);
        x[i] = x0;
        const double g = (lp - lm) / (2.0 * (double)h);
        num2 += g * g;
        err2 += (g - grad[i]) * (g - grad[i]);
    }
    const double rel = sqrt(err2 / (num2 > 0 ? num2 : 1e-30));
    CHECK_MSG(rel < 2e-3 && num2 > 0, "%s: d%s relative RMS error %.3g (|g| %.3g)", c->name, what, rel,
              sqrt(num2));
    if (getenv("TOY_TEST_VERBOSE")) printf("%-40s d%-5s rel RMS %.2e\n", c->name, what, rel);
    return rel;
}

static double dot_dy(const float *dy, const float *y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)dy[i] * y[i];
    return s;
}

/* ---------------------------------------------------------------- rmsnorm */

typedef struct {
    ty_pool *pool;
    int64_t n, C;
    float *x, *w, *y, *dy, *rstd;
} norm_t;

static double norm_loss(op_case *c) {
    norm_t *t = c->state;
    ty_rmsnorm_forward(t->pool, t->y, t->rstd, t->x, t->w, t->n, t->C, 1e-5f);
    return dot_dy(t->dy, t->y, t->n * t->C);
}

static void test_rmsnorm(ty_pool *pool) {
    norm_t t = {pool, 5, 37, rand_array(5 * 37, 1, 0), rand_array(37, 0.3f, 1), zeros(5 * 37),
                rand_array(5 * 37, 1, 0), zeros(5)};
    op_case c = {"rmsnorm", norm_loss, &t};
    float *dx = zeros(t.n * t.C), *dw = zeros(t.C);
    norm_loss(&c);
    ty_rmsnorm_backward(pool, dx, dw, t.dy, t.x, t.w, t.rstd, t.n, t.C);
    fd_check(&c, t.x, dx, t.n * t.C, "x");
    fd_check(&c, t.w, dw, t.C, "w");
    free(t.x), free(t.w), free(t.y), free(t.dy), free(t.rstd), free(dx), free(dw);
}

/* ---------------------------------------------------------------- layernorm */

typedef struct {
    ty_pool *pool;
    int64_t n, C;
    float *x, *w, *b, *y, *dy, *mean, *rstd;
} layernorm_t;

static double layernorm_loss(op_case *c) {
    layernorm_t *t = c->state;
    ty_layernorm_forward(t->pool, t->y, t->mean, t->rstd, t->x, t->w, t->b, t->n, t->C, 1e-5f);
    return dot_dy(t->dy, t->y, t->n * t->C);
}

static void test_layernorm(ty_pool *pool) {
    layernorm_t t = {pool, 5, 37, rand_array(5 * 37, 1, 0.5f), rand_array(37, 0.3f, 1), rand_array(37, 0.3f, 0),
                     zeros(5 * 37), rand_array(5 * 37, 1, 0), zeros(5), zeros(5)};
    op_case c = {"layernorm", layernorm_loss, &t};
    float *dx = zeros(t.n * t.C), *dw = zeros(t.C), *db = zeros(t.C);
    layernorm_loss(&c);
    ty_layernorm_backward(pool, dx, dw, db, t.dy, t.x, t.w, t.mean, t.rstd, t.n, t.C);
    fd_check(&c, t.x, dx, t.n * t.C, "x");
    fd_check(&c, t.w, dw, t.C, "w");
    fd_check(&c, t.b, db, t.C, "bias");
    free(t.x), free(t.w), free(t.b), free(t.y), free(t.dy), free(t.mean), free(t.rstd), free(dx), free(dw), free(db);
}

/* ---------------------------------------------------------------- positions */

/* out[r] += wpe[r % T]; the gradient of a position sums its rows in row order */
static void test_positions(ty_pool *pool) {
    const int64_t n = 6, T = 3, C = 5;
    float *wpe = rand_array(4 * C, 1, 0), *out = rand_array(n * C, 1, 0), *dy = rand_array(n * C, 1, 0);
    float *before = xmalloc((size_t)(n * C) * sizeof *before), *dw = zeros(4 * C);
    memcpy(before, out, (size_t)(n * C) * sizeof *out);
    ty_position_forward(out, wpe, n, T, C);
    CHECK(out[4 * C + 2] == before[4 * C + 2] + wpe[1 * C + 2]);
    ty_position_backward(pool, dw, dy, n, T, C);
    CHECK(dw[2 * C + 3] == (0.0f + dy[2 * C + 3]) + dy[5 * C + 3]);
    CHECK(dw[3 * C] == 0.0f); /* a position no row is at */
    free(wpe), free(out), free(dy), free(before), free(dw);
}

/* ---------------------------------------------------------------- matmul */

typedef struct {
    ty_gemm *g;
    int64_t n, C, OC;
    float *x, *w, *b, *y, *dy;
} mm_t;

static double mm_loss(op_case *c) {
    mm_t *t = c->state;
    ty_matmul_forward(t->g, t->y, t->x, t->w, NULL, t->b, t->n, t->C, t->OC);
    return dot_dy(t->dy, t->y, t->n * t->OC);
}

static void test_matmul(ty_gemm *g) {
    mm_t t = {g, 7, 19, 23, rand_array(7 * 19, 1, 0), rand_array(23 * 19, 0.5f, 0),
              rand_array(23, 0.5f, 0), zeros(7 * 23), rand_array(7 * 23, 1, 0)};
    op_case c = {"matmul", mm_loss, &t};
    float *dx = zeros(t.n * t.C), *dw = zeros(t.OC * t.C), *db = zeros(t.OC);
    mm_loss(&c);
    ty_matmul_backward(g, dx, dw, db, t.dy, t.x, t.w, NULL, t.n, t.C, t.OC);
    fd_check(&c, t.x, dx, t.n * t.C, "x");
    fd_check(&c, t.w, dw, t.OC * t.C, "w");
    fd_check(&c, t.b, db, t.OC, "bias");
    free(t.x), free(t.w), free(t.b), free(t.y), free(t.dy), free(dx), free(dw), free(db);
}

/* ---------------------------------------------------------------- rope */

typedef struct {
    ty_pool *pool;
    int64_t n, T;
    int heads, hd;
    ty_rope_params p;
    float *cs, *x, *y, *dy;
} rope_t;

static double rope_loss(op_case *c) {
    rope_t *t = c->state;
    memcpy(t->y, t->x, (size_t)(t->n * t->heads * t->hd) * sizeof(float));
    ty_rope_forward(t->pool, t->y, t->n, t->T, t->heads, t->hd, &t->p, t->cs);
    return dot_dy(t->dy, t->y, t->n * t->heads * t->hd);
}

static float rope_factors[4] = {1.0f, 2.0f, 4.0f, 8.0f};

static double rope_factor_loss(op_case *c) {
    rope_t *t = c->state;
    for (int64_t p = 0; p < t->T; p++) ty_rope_cos_sin(&t->p, (int32_t)(p + 5), t->cs + p * t->p.n_rot);
    return rope_loss(c);
}

static void test_rope(ty_pool *pool, ty_rope_type type) {
    const float *factors = rope_factors;
    rope_t t = {pool, 6, 3, 2, 10, {0}, NULL, NULL, NULL, NULL};
    t.p = (ty_rope_params){.type = type, .n_rot = 8, .freq_base = 10000.0f, .freq_scale = 0.5f,
                            .freq_factors = factors, .attn_factor = 1.19f, .ext_factor = 1.0f,
                            .corr_dims = {1.0f, 3.0f}};
    const int64_t nx = t.n * t.heads * t.hd;
    t.cs = zeros(t.T * t.p.n_rot);
    for (int64_t p = 0; p < t.T; p++) ty_rope_cos_sin(&t.p, (int32_t)(p + 5), t.cs + p * t.p.n_rot);
    t.x = rand_array(nx, 1, 0);
    t.y = zeros(nx);
    t.dy = rand_array(nx, 1, 0);
    op_case c = {type == TY_ROPE_NEOX ? "rope neox" : "rope norm", rope_loss, &t};
    float *dx = zeros(nx);
    memcpy(dx, t.dy, (size_t)nx * sizeof *dx);
    ty_rope_backward(pool, dx, t.n, t.T, t.heads, t.hd, &t.p, t.cs);
    fd_check(&c, t.x, dx, nx, "x");
    /* the frequency factors, through the angles */
    float theta[3 * 4], dff[4] = {0};
    for (int64_t p = 0; p < t.T; p++) ty_rope_angles(&t.p, (int32_t)(p + 5), theta + p * 4);
    rope_loss(&c);
    ty_rope_freq_backward(dff, t.y, t.dy, t.n, t.T, t.heads, t.hd, &t.p, theta);
    op_case cf = {c.name, rope_factor_loss, &t};
    fd_check(&cf, rope_factors, dff, 4, "freq_factors");
    free(t.cs), free(t.x), free(t.y), free(t.dy), free(dx);
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    ty_gemm *g;
    attention_shape s;
    float *q, *k, *v, *out, *lse, *dy, *scratch;
} att_t;

static double att_loss(op_case *c) {
    att_t *t = c->state;
    ty_attention_forward(t->g, t->out, t->lse, t->q, t->k, t->v, &t->s, t->scratch);
    return dot_dy(t->dy, t->out, t->s.B * t->s.T * t->s.n_head * t->s.head_dim);
}

static void test_attention(ty_gemm *g, int n_threads, float softcap, int32_t n_swa, int64_t T) {
    att_t t = {.g = g, .s = {2, T, 4, 2, 8, 0.35f, softcap, n_swa}};
    const int64_t n = t.s.B * t.s.T, qd = 4 * 8, kvd = 2 * 8;
    t.q = rand_array(n * qd, 1, 0), t.k = rand_array(n * kvd, 1, 0), t.v = rand_array(n * kvd, 1, 0);
    t.out = zeros(n * qd), t.lse = zeros(t.s.B * 4 * T), t.dy = rand_array(n * qd, 1, 0);
    t.scratch = zeros(ty_attention_scratch_floats(&t.s, n_threads));
    char name[96];
    snprintf(name, sizeof name, "attention T=%lld softcap=%g swa=%d", (long long)T, softcap, n_swa);
    op_case c = {name, att_loss, &t};
    float *dq = zeros(n * qd), *dk = zeros(n * kvd), *dv = zeros(n * kvd);
    att_loss(&c);
    ty_attention_backward(g, dq, dk, dv, t.dy, t.out, t.lse, t.q, t.k, t.v, &t.s, t.scratch);
    /* L sums thousands of outputs: a larger step keeps its rounding noise below the
     * gradients of K (small: a row's weights sum to 1 whatever the keys) */
    fd_step = 1e-2f;
    fd_check(&c, t.q, dq, n * qd, "q");
    fd_check(&c, t.k, dk, n * kvd, "k");
    fd_check(&c, t.v, dv, n * kvd, "v");
    fd_step = 1e-3f;
    free(t.q), free(t.k), free(t.v), free(t.out), free(t.lse), free(t.dy), free(t.scratch);
    free(dq), free(dk), free(dv);
}

/* ---------------------------------------------------------------- gated activations */

typedef struct {
    ty_pool *pool;
    bool gelu;
    int64_t n;
    float *g, *u, *y, *dy;
} glu_t;

static double glu_loss(op_case *c) {
    glu_t *t = c->state;
    if (!t->u) ty_gelu_forward(t->pool, t->y, t->g, t->n);
    else if (t->gelu) ty_geglu_forward(t->pool, t->y, t->g, t->u, t->n);
    else ty_swiglu_forward(t->pool, t->y, t->g, t->u, t->n);
    return dot_dy(t->dy, t->y, t->n);
}

static void test_glu(ty_pool *pool, bool gelu) {
    glu_t t = {pool, gelu, 200, rand_array(200, 4, 0), rand_array(200, 1, 0), zeros(200),
               rand_array(200, 1, 0)};
    op_case c = {gelu ? "geglu" : "swiglu", glu_loss, &t};
    float *dg = zeros(t.n), *du = zeros(t.n);
    if (gelu) ty_geglu_backward(pool, dg, du, t.dy, t.g, t.u, t.n);
    else ty_swiglu_backward(pool, dg, du, t.dy, t.g, t.u, t.n);
    fd_check(&c, t.g, dg, t.n, "gate");
    fd_check(&c, t.u, du, t.n, "up");
    free(t.g), free(t.u), free(t.y), free(t.dy), free(dg), free(du);
}

/* GELU without a gate (gpt2): its forward is geglu's with up = 1 */
static void test_gelu(ty_pool *pool) {
    glu_t t = {pool, true, 200, rand_array(200, 4, 0), NULL, zeros(200), rand_array(200, 1, 0)};
    op_case c = {"gelu", glu_loss, &t};
    float *dx = zeros(t.n), *ones = rand_array(t.n, 0, 1), *y1 = zeros(t.n);
    ty_gelu_backward(pool, dx, t.dy, t.g, t.n);
    fd_check(&c, t.g, dx, t.n, "x");
    glu_loss(&c);
    ty_geglu_forward(pool, y1, t.g, ones, t.n);
    CHECK(memcmp(y1, t.y, (size_t)t.n * sizeof *y1) == 0);
    free(t.g), free(t.y), free(t.dy), free(dx), free(ones), free(y1);
}

/* ---------------------------------------------------------------- loss */

typedef struct {
    ty_pool *pool;
    int64_t n, V;
    float s, cap;
    int32_t *target;
    float *y, *z, *loss, *lse, *w;
} loss_t;

static double lm_loss(op_case *c) {
    loss_t *t = c->state;
    memcpy(t->z, t->y, (size_t)(t->n * t->V) * sizeof(float));
    ty_lm_loss_forward(t->pool, t->z, t->loss, t->lse, t->target, t->n, t->V, t->s, t->cap);
    double l = 0;
    for (int64_t i = 0; i < t->n; i++) l += (double)t->w[i] * t->loss[i];
    return l;
}

static void test_lm_loss(ty_pool *pool, float s, float cap) {
    int32_t target[4] = {3, -1, 0, 10};
    loss_t t = {pool, 4, 11, s, cap, target, rand_array(44, 3, 0), zeros(44), zeros(4), zeros(4),
                rand_array(4, 0.5f, 1)};
    char name[64];
    snprintf(name, sizeof name, "lm_loss s=%g softcap=%g", s, cap);
    op_case c = {name, lm_loss, &t};
    lm_loss(&c);
    CHECK(t.loss[1] == 0.0f);
    float *dy = zeros(44);
    ty_lm_loss_backward(pool, dy, t.z, t.lse, t.target, t.w, t.n, t.V, t.s, t.cap);
    /* the logits are y * s: a step of h on y is h * s on them */
    fd_step = 1e-3f / s;
    fd_check(&c, t.y, dy, 44, "y");
    fd_step = 1e-3f;
    /* the backward may write over z */
    lm_loss(&c);
    float *dz = xmalloc(44 * sizeof *dz);
    memcpy(dz, t.z, 44 * sizeof *dz);
    ty_lm_loss_backward(pool, dz, dz, t.lse, t.target, t.w, t.n, t.V, t.s, t.cap);
    CHECK(memcmp(dz, dy, 44 * sizeof *dz) == 0);
    free(t.y), free(t.z), free(t.loss), free(t.lse), free(t.w), free(dy), free(dz);
}

/* ---------------------------------------------------------------- embedding */

static void test_embedding(void) {
    const int32_t tok[5] = {2, 0, 2, 3, 2};
    float *wte = rand_array(4 * 6, 1, 0), *out = zeros(5 * 6), *dy = rand_array(5 * 6, 1, 0);
    float *dw = zeros(4 * 6);
    ty_embedding_forward(out, tok, wte, 5, 6, 3.0f);
    CHECK(out[6 + 1] == wte[1] * 3.0f);
    ty_embedding_backward(dw, dy, tok, 5, 6, 3.0f);
    /* row 2 is used by tokens 0, 2 and 4, in that order */
    CHECK(dw[2 * 6 + 4] == ((0.0f + dy[4] * 3.0f) + dy[2 * 6 + 4] * 3.0f) + dy[4 * 6 + 4] * 3.0f);
    CHECK(dw[1 * 6] == 0.0f);
    free(wte), free(out), free(dy), free(dw);
}

/* attention's gradients with 1 and 3 threads: the same bits */
/* ---------------------------------------------------------------- lora */

typedef struct {
    ty_gemm *g;
    int64_t n, C, OC, r, groups;
    float s;
    float *x, *a, *b, *y, *dy, *ts;
} lora_t;

static double lora_loss(op_case *c) {
    lora_t *t = c->state;
    memset(t->y, 0, (size_t)(t->n * t->OC) * sizeof(float));
    ty_lora_forward(t->g, t->y, t->ts, t->x, t->a, t->b, t->n, t->C, t->OC, t->r, t->groups, t->s);
    return dot_dy(t->dy, t->y, t->n * t->OC);
}

/* groups 1: the plain pair; groups 3: one pair per query head, which must also equal a
 * plain pair of rank 3 r whose B is block-diagonal (the form inference reads it in) */
static void test_lora(ty_gemm *g, int64_t groups) {
    const int64_t n = 5, C = 11, OC = 6 * groups, r = 2, R = r * groups, OG = OC / groups;
    lora_t t = {g, n, C, OC, r, groups, 0.75f, rand_array(n * C, 1, 0), rand_array(R * C, 0.5f, 0),
                rand_array(OC * r, 0.5f, 0), zeros(n * OC), rand_array(n * OC, 1, 0), zeros(n * R)};
    op_case c = {groups > 1 ? "lora (per head)" : "lora", lora_loss, &t};
    float *dx = zeros(n * C), *da = zeros(R * C), *db = zeros(OC * r), *dts = zeros(n * R);
    lora_loss(&c);
    ty_lora_backward(g, dx, da, db, dts, t.dy, t.x, t.ts, t.a, t.b, n, C, OC, r, groups, t.s);
    fd_check(&c, t.x, dx, n * C, "x");
    fd_check(&c, t.a, da, R * C, "A");
    fd_check(&c, t.b, db, OC * r, "B");
    if (groups > 1) {
        float *full = zeros(OC * R), *y = zeros(n * OC), *ts = zeros(n * R);
        for (int64_t o = 0; o < OC; o++)
            for (int64_t k = 0; k < r; k++) full[o * R + (o / OG) * r + k] = t.b[o * r + k];
        lora_loss(&c);
        ty_lora_forward(g, y, ts, t.x, t.a, full, n, C, OC, R, 1, t.s);
        double err = 0;
        for (int64_t i = 0; i < n * OC; i++) err = fmax(err, fabs(y[i] - t.y[i]));
        CHECK_MSG(err < 1e-5, "per-head LoRA differs from its block-diagonal form by %g", err);
        free(full), free(y), free(ts);
    }
    free(t.x), free(t.a), free(t.b), free(t.y), free(t.dy), free(t.ts), free(dx), free(da), free(db), free(dts);
}

static void test_attention_threads(void) {
    attention_shape s = {3, 150, 6, 2, 16, 0.25f, 0.0f, 0};
    const int64_t n = s.B * s.T, qd = 96, kvd = 32;
    float *q = rand_array(n * qd, 1, 0), *k = rand_array(n * kvd, 1, 0), *v = rand_array(n * kvd, 1, 0);
    float *dy = rand_array(n * qd, 1, 0);
    float *res[2][4];
    for (int r = 0; r < 2; r++) {
        const int nt = r ? 3 : 1;
        ty_pool *pool = ty_pool_new(nt);
        ty_gemm *g = ty_gemm_new(pool, ty_cpu()->gemm());
        float *scratch = zeros(ty_attention_scratch_floats(&s, nt)), *lse = zeros(s.B * s.n_head * s.T);
        res[r][0] = zeros(n * qd), res[r][1] = zeros(n * qd), res[r][2] = zeros(n * kvd);
        res[r][3] = zeros(n * kvd);
        ty_attention_forward(g, res[r][0], lse, q, k, v, &s, scratch);
        ty_attention_backward(g, res[r][1], res[r][2], res[r][3], dy, res[r][0], lse, q, k, v, &s, scratch);
        free(scratch), free(lse);
        ty_gemm_free(g);
        ty_pool_free(pool);
    }
    const int64_t sizes[4] = {n * qd, n * qd, n * kvd, n * kvd};
    for (int i = 0; i < 4; i++) {
        CHECK(memcmp(res[0][i], res[1][i], (size_t)sizes[i] * sizeof(float)) == 0);
        free(res[0][i]), free(res[1][i]);
    }
    free(q), free(k), free(v), free(dy);
}

int main(void) {
    ty_pool *pool = ty_pool_new(2);
    ty_gemm *g = ty_gemm_new(pool, ty_cpu()->gemm());
    test_embedding();
    test_rmsnorm(pool);
    test_layernorm(pool);
    test_positions(pool);
    test_matmul(g);
    test_rope(pool, TY_ROPE_NORM);
    test_rope(pool, TY_ROPE_NEOX);
    test_attention(g, 2, 0.0f, 0, 5);
    test_attention(g, 2, 0.0f, 0, 70);
    test_attention(g, 2, 3.0f, 0, 9);
    test_attention(g, 2, 0.0f, 4, 70);
    test_glu(pool, false);
    test_glu(pool, true);
    test_gelu(pool);
    test_lm_loss(pool, 1.0f, 0.0f);
    test_lm_loss(pool, 0.125f, 2.5f);
    test_lora(g, 1);
    test_lora(g, 3);
    test_attention_threads();
    ty_gemm_free(g);
    ty_pool_free(pool);
    return test_finish("test_train_ops");
}
