/* optimizer.c — AdamW (optimizer.h), as PyTorch's torch.optim.AdamW computes it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer.h"

float ty_adamw_lr(const adamw_params *p, int64_t step) {
    if (step < p->warmup) return p->lr * (float)(step + 1) / (float)p->warmup;
    const int64_t span = p->steps - p->warmup;
    if (span <= 1) return p->lr;
    double progress = (double)(step - p->warmup) / (double)(span - 1);
    if (progress > 1) progress = 1;
    return (float)(p->min_lr + 0.5 * (p->lr - p->min_lr) * (1.0 + cos(M_PI * progress)));
}

#define NORM_BLOCK 65536

typedef struct {
    const float *g;
    int64_t n;
    double *partial;
} norm_job;

static void norm_task(void *ctx, int64_t b, int thread) {
    (void)thread;
    const norm_job *j = ctx;
    const int64_t i0 = b * NORM_BLOCK, i1 = i0 + NORM_BLOCK < j->n ? i0 + NORM_BLOCK : j->n;
    double s = 0;
    for (int64_t i = i0; i < i1; i++) s += (double)j->g[i] * j->g[i];
    j->partial[b] = s;
}

double ty_grad_norm(ty_pool *pool, const float *g, int64_t n) {
    const int64_t blocks = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    double *partial = malloc((size_t)(blocks ? blocks : 1) * sizeof *partial);
    if (!partial) { /* no memory for the partial sums: the same sums, one thread */
        double s = 0;
        for (int64_t b = 0; b < blocks; b++) {
            double t = 0;
            for (int64_t i = b * NORM_BLOCK; i < n && i < (b + 1) * NORM_BLOCK; i++) t += (double)g[i] * g[i];
            s += t;
        }
        return sqrt(s);
    }
    norm_job j = {g, n, partial};
    if (pool) ty_pool_run(pool, blocks, norm_task, &j);
    else
        for (int64_t b = 0; b < blocks; b++) norm_task(&j, b, 0);
    double s = 0;
    for (int64_t b = 0; b < blocks; b++) s += partial[b];
    free(partial);
    return sqrt(s);
}

typedef struct {
    float *p, *m, *v;
    const float *g;
    int64_t n;
    float lr, b1, b2, eps, decay, gs, c1, c2;
} adamw_job;

#define UPDATE_BLOCK 16384

static void adamw_task(void *ctx, int64_t b, int thread) {
    (void)thread;
    const adamw_job *j = ctx;
    const int64_t i0 = b * UPDATE_BLOCK, i1 = i0 + UPDATE_BLOCK < j->n ? i0 + UPDATE_BLOCK : j->n;
    for (int64_t i = i0; i < i1; i++) {
        const float g = j->g[i] * j->gs;
        j->p[i] *= j->decay;
        j->m[i] = j->b1 * j->m[i] + (1.0f - j->b1) * g;
        j->v[i] = j->b2 * j->v[i] + (1.0f - j->b2) * g * g;
        const float mhat = j->m[i] / j->c1, vhat = j->v[i] / j->c2;
        j->p[i] -= j->lr * mhat / (sqrtf(vhat) + j->eps);
    }
}

void ty_adamw_update(ty_pool *pool, float *p, const float *g, float *m, float *v, int64_t n,
                  const adamw_params *ap, float lr, int64_t t, float grad_scale, bool decay) {
    adamw_job j = {p, m, v, g, n, lr, ap->beta1, ap->beta2, ap->eps,
                   decay ? 1.0f - lr * ap->weight_decay : 1.0f, grad_scale,
                   (float)(1.0 - pow(ap->beta1, (double)t)), (float)(1.0 - pow(ap->beta2, (double)t))};
    const int64_t blocks = (n + UPDATE_BLOCK - 1) / UPDATE_BLOCK;
    if (pool) ty_pool_run(pool, blocks, adamw_task, &j);
    else
        for (int64_t b = 0; b < blocks; b++) adamw_task(&j, b, 0);
}

double ty_adamw_step(ty_pool *pool, train_model *tm, float *m, float *v, const adamw_params *ap, float lr, int64_t t) {
    float *g = ty_train_model_grads(tm), *params = ty_train_model_params(tm);
    for (int i = 0; i < ty_train_model_n_tensors(tm); i++) { /* the untrained (RoPE factors) take no part */
        const train_tensor *x = ty_train_model_tensor(tm, i);
        if (!x->trainable) memset(g + x->offset, 0, (size_t)x->n * sizeof *g);
    }
    const double gnorm = ty_grad_norm(pool, g, ty_train_model_n_floats(tm));
    const float scale = ap->clip > 0 && gnorm > ap->clip ? (float)(ap->clip / gnorm) : 1.0f;
    for (int i = 0; i < ty_train_model_n_tensors(tm); i++) {
        const train_tensor *x = ty_train_model_tensor(tm, i);
        if (x->trainable)
            ty_adamw_update(pool, params + x->offset, g + x->offset, m + x->offset, v + x->offset, x->n, ap, lr, t,
                            scale, x->decay);
    }
    return gnorm;
}
