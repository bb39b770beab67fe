/* dist.c — see dist.h. */
#include "dist.h"

#include <stdbool.h>

#include <stdlib.h>

#include "error.h"
#include "mpi_world.h"

#ifdef TOY_HAVE_MPI
#include <mpi.h>

int ty_train_dist_available(void) { return 1; }

/* Chunks of at most 2^24 floats, within MPI's int counts. */
#define CHUNK (1 << 24)

toy_status ty_train_dist_sum_floats(const train_dist *d, float *x, int64_t n) {
    if (d->size == 1) return TOY_OK;
    float *buf = malloc((size_t)(n < CHUNK ? n : CHUNK) * sizeof *buf);
    if (!buf) return ty_error(TOY_ERR_NOMEM, "no memory for the gradient sum");
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        const int m = (int)(n - i0 < CHUNK ? n - i0 : CHUNK);
        float *xs = x + i0;
        if (d->rank > 0) { /* the sum of the ranks before, then ours added */
            MPI_Recv(buf, m, MPI_FLOAT, d->rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < m; i++) xs[i] = buf[i] + xs[i];
        }
        if (d->rank + 1 < d->size) MPI_Send(xs, m, MPI_FLOAT, d->rank + 1, 0, MPI_COMM_WORLD);
        MPI_Bcast(xs, m, MPI_FLOAT, d->size - 1, MPI_COMM_WORLD);
    }
    free(buf);
    return TOY_OK;
}

toy_status ty_train_dist_sum_double(const train_dist *d, double *x) {
    if (d->size == 1) return TOY_OK;
    if (d->rank > 0) {
        double before;
        MPI_Recv(&before, 1, MPI_DOUBLE, d->rank - 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        *x = before + *x;
    }
    if (d->rank + 1 < d->size) MPI_Send(x, 1, MPI_DOUBLE, d->rank + 1, 1, MPI_COMM_WORLD);
    MPI_Bcast(x, 1, MPI_DOUBLE, d->size - 1, MPI_COMM_WORLD);
    return TOY_OK;
}

#else

int ty_train_dist_available(void) { return 0; }

toy_status ty_train_dist_sum_floats(const train_dist *d, float *x, int64_t n) {
    (void)d, (void)x, (void)n;
    return TOY_OK;
}

toy_status ty_train_dist_sum_double(const train_dist *d, double *x) {
    (void)d, (void)x;
    return TOY_OK;
}

#endif

toy_status ty_train_dist_init(train_dist *d) { return ty_mpi_join(&d->rank, &d->size); }

bool toy_have_mpi(void) { return ty_train_dist_available() != 0; }

void toy_mpi_abort(int code) {
#ifdef TOY_HAVE_MPI
    int inited = 0, finalized = 0, size = 1;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    (void)code;
}
