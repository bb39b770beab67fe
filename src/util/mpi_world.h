/* mpi_world.h — the processes `mpirun -np N` started, joined once per process: shared by
 * data-parallel training (src/train/dist.c) and pipeline-parallel inference
 * (src/infer/pipeline.c). Without MPI in the build, or when mpirun did not start the
 * process, there is one process of rank 0. */
#ifndef TOY_MPI_WORLD_H
#define TOY_MPI_WORLD_H

#include <stdbool.h>

#include "toy.h"

/* Whether mpirun started this process as one of several (its launchers say so in the
 * environment: Open MPI, PMIx, MPICH's Hydra). */
bool ty_mpi_launched(void);

/* MPI_Init (serialized threads: one thread at a time calls MPI) on the first call; this
 * process's rank and the number of processes. Under mpirun without MPI in the build:
 * an error that says so. */
toy_status ty_mpi_join(int *rank, int *size);

#endif
