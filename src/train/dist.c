/* dist.c — see dist.h. */
#include "dist.h"

#include <stdbool.h>

#include <stdlib.h>

#include "error.h"

#ifdef TOY_HAVE_MPI
#include <mpi.h>

/* mpirun's launchers (Open MPI, PMIx, MPICH's Hydra) say so in the environment. */
static int launched_by_mpirun(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    return v && atoi(v) > 1;
}

static void finalize(void) { MPI_Finalize(); }

int ty_train_dist_available(void) { return 1; }

toy_status ty_train_dist_init(train_dist *d) {
    *d = (train_dist){0, 1};
    if (!launched_by_mpirun()) return TOY_OK;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return ty_error(TOY_ERR_IO, "MPI_Init failed");
        atexit(finalize);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    return TOY_OK;
}

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

toy_status ty_train_dist_init(train_dist *d) {
    *d = (train_dist){0, 1};
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (v && atoi(v) > 1)
        return ty_error(TOY_ERR_UNSUPPORTED, "started by mpirun with %s processes, but this toy was built without "
                        "MPI (install libopenmpi-dev and rebuild)", v);
    return TOY_OK;
}

toy_status ty_train_dist_sum_floats(const train_dist *d, float *x, int64_t n) {
    (void)d, (void)x, (void)n;
    return TOY_OK;
}

toy_status ty_train_dist_sum_double(const train_dist *d, double *x) {
    (void)d, (void)x;
    return TOY_OK;
}

#endif

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
