/* threadpool.h — a persistent pool of worker threads. A job is a number of tasks, cut
 * into one contiguous range per thread: each thread runs its own range in order (a
 * stream the hardware prefetcher can follow), then takes tasks from the far end of the
 * others' ranges, so a thread that started late or runs slower is helped out. The
 * caller works too and returns when all are done. Workers sleep on a condition
 * variable between jobs: no spinning once work ends. */
#ifndef TOY_THREADPOOL_H
#define TOY_THREADPOOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ty_pool ty_pool;

/* Runs task `task` (0..n_tasks-1) on thread `thread` (0..n_threads-1). Which thread runs
 * which task varies from run to run: a task's result must not depend on it. */
typedef void (*ty_task_fn)(void *ctx, int64_t task, int thread);

/* n_threads counts the caller: 1 means no worker threads. NULL on failure. */
ty_pool *ty_pool_new(int n_threads);
void ty_pool_free(ty_pool *pool);
int ty_pool_size(const ty_pool *pool);
/* Whether its threads spin between jobs: not when there are more of them than CPUs the
 * process may run on (they sleep and wake instead). */
bool ty_pool_spins(const ty_pool *pool);
void ty_pool_run(ty_pool *pool, int64_t n_tasks, ty_task_fn fn, void *ctx);

/* Elements (64 KB of floats) a range of an elementwise job should touch at least: fewer
 * are not worth a thread's wake-up. */
#define TY_POOL_GRAIN 16384

/* That grain in rows of row_elements elements each (at least one row). */
static inline int64_t ty_pool_grain_rows(int64_t row_elements) {
    if (row_elements <= 0) row_elements = 1;
    return row_elements >= TY_POOL_GRAIN ? 1 : (TY_POOL_GRAIN + row_elements - 1) / row_elements;
}

/* Runs fn over [0, n) cut into ranges [i0, i1). */
typedef void (*ty_range_fn)(const void *ctx, int64_t i0, int64_t i1);

/* fn over [0, n) in about four ranges per thread, each of at least `grain` (smaller ones
 * are not worth a wake-up; under two grains runs on the caller alone). fn must compute
 * each index alone, so that where the ranges split never changes a result. A NULL pool
 * is one thread. */
void ty_pool_for(ty_pool *pool, int64_t n, int64_t grain, ty_range_fn fn, const void *ctx);

#endif
