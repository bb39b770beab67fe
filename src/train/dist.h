/* dist.h — data-parallel training over MPI: the processes of `mpirun -np N` each run
 * their share of a step's micro-batches and sum their gradients in a fixed order.
 *
 * Without MPI in the build, or when the process was not started by mpirun, there is one
 * process of rank 0 and the sums are the identity. */
#ifndef TOY_TRAIN_DIST_H
#define TOY_TRAIN_DIST_H

#include <stdint.h>

#include "toy.h"

typedef struct {
    int rank, size;
} train_dist;

/* Joins the processes mpirun started (MPI_Init once per process), or one alone. */
toy_status ty_train_dist_init(train_dist *d);

/* x[0..n) becomes the sum over the ranks, in rank order ((x_0 + x_1) + x_2) + ...: the
 * partial sums travel rank to rank, then the last rank's total goes to all, so every
 * rank has the same bits whatever the network does. */
toy_status ty_train_dist_sum_floats(const train_dist *d, float *x, int64_t n);
toy_status ty_train_dist_sum_double(const train_dist *d, double *x);

/* Whether this build can run under mpirun. */
int ty_train_dist_available(void);

#endif
