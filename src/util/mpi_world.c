/* mpi_world.c — see mpi_world.h. */
#include "mpi_world.h"

#include <stdlib.h>

#include "error.h"

#ifdef TOY_HAVE_MPI
#include <mpi.h>
#endif

static int launched_size(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    return v ? atoi(v) : 0;
}

bool ty_mpi_launched(void) { return launched_size() > 1; }

#ifdef TOY_HAVE_MPI
static void finalize(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

toy_status ty_mpi_join(int *rank, int *size) {
    *rank = 0;
    *size = 1;
    if (!ty_mpi_launched()) return TOY_OK;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return ty_error(TOY_ERR_IO, "MPI_Init failed");
        if (provided < MPI_THREAD_SERIALIZED)
            return ty_error(TOY_ERR_UNSUPPORTED, "this MPI gives no serialized threads (level %d)", provided);
        atexit(finalize);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return TOY_OK;
}
#else
toy_status ty_mpi_join(int *rank, int *size) {
    *rank = 0;
    *size = 1;
    if (ty_mpi_launched())
        return ty_error(TOY_ERR_UNSUPPORTED, "started by mpirun with %d processes, but this toy was built without "
                        "MPI (install libopenmpi-dev and rebuild)", launched_size());
    return TOY_OK;
}
#endif
