/* optimizer.h — AdamW with decoupled weight decay, clipping by the global gradient norm,
 * and the learning-rate schedule (linear warmup, then cosine decay to a floor). */
#ifndef TOY_TRAIN_OPTIMIZER_H
#define TOY_TRAIN_OPTIMIZER_H

#include <stdbool.h>
#include <stdint.h>

#include "threadpool.h"
#include "train_model.h"

typedef struct {
    float lr, min_lr;    /* peak and final learning rate */
    int64_t warmup;      /* steps of linear warmup from lr / warmup to lr */
    int64_t steps;       /* total steps: cosine decay from lr to min_lr after the warmup */
    float beta1, beta2, eps;
    float weight_decay;  /* decoupled (AdamW), on parameters that decay */
    float clip;          /* global gradient norm limit; 0: none */
} adamw_params;

/* The learning rate of step `step` (0-based). */
float ty_adamw_lr(const adamw_params *p, int64_t step);

/* The L2 norm of the n gradients, summed in double in fixed blocks: the same bits
 * whatever the threads. */
double ty_grad_norm(ty_pool *pool, const float *g, int64_t n);

/* One update of n parameters: p -= lr * wd * p (where decay), then the Adam step with
 * bias correction for step t (1-based). m and v are the moments; g is scaled by
 * grad_scale first (clipping). Elementwise, so any split over threads gives the same. */
void ty_adamw_update(ty_pool *pool, float *p, const float *g, float *m, float *v, int64_t n,
                  const adamw_params *ap, float lr, int64_t t, float grad_scale, bool decay);

/* One optimizer step of a model being trained, its gradients summed: the gradients of
 * tensors not trained are zeroed, the global norm is clipped to ap->clip (0: not), and
 * each trainable tensor takes ty_adamw_update's step t at rate lr. Returns the norm
 * before clipping. */
double ty_adamw_step(ty_pool *pool, train_model *tm, float *m, float *v, const adamw_params *ap, float lr, int64_t t);

#endif
