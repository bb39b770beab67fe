/* plot.h — training's loss curve as SVG. */
#ifndef TOY_TRAIN_PLOT_H
#define TOY_TRAIN_PLOT_H

#include <stddef.h>
#include <stdint.h>

/* The SVG text (malloc'd, *len bytes; NULL: no memory) of n training losses (one per
 * step, step i + 1) and n_eval evaluation losses at the given steps. */
char *ty_loss_curve_svg(const char *title, const float *train, int64_t n, const int64_t *eval_step,
                     const float *eval, int64_t n_eval, size_t *len);

#endif
