/* test_threadpool.c — the thread pool (threadpool.c): every task of a job runs exactly
 * once, on a valid thread, whatever the number of tasks and threads, including tasks of
 * very different lengths (so threads finish their own ranges at different times and
 * take tasks from the ends of the others'), and back-to-back jobs do not mix. Then all
 * again on one CPU, where a pool of more threads than that never spins (it took a time
 * slice a job there: `toy run -t 2` under taskset -c 0 made 22 tokens/s, not 770) and
 * its caller sleeps until the last worker wakes it. */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "test.h"
#include "threadpool.h"

typedef struct {
    atomic_int *runs;   /* per task: how often it ran */
    int n_threads;
    atomic_int bad_thread;
    int uneven;         /* spin longer on some tasks */
} job;

static _Thread_local volatile int64_t busy_work; /* per thread: no data race */

static void task(void *ctx, int64_t t, int thread) {
    job *j = ctx;
    if (thread < 0 || thread >= j->n_threads) atomic_fetch_add(&j->bad_thread, 1);
    if (j->uneven && t % 7 == 0)
        for (int i = 0; i < 20000; i++) busy_work = busy_work + i;
    atomic_fetch_add(&j->runs[t], 1);
}

static void run_jobs(bool one_cpu) {
    static const int64_t sizes[] = {1, 2, 3, 5, 16, 17, 100, 1000, 4097};
    for (int n_threads = 1; n_threads <= 4; n_threads++) {
        ty_pool *pool = ty_pool_new(n_threads);
        CHECK(pool != NULL);
        if (!pool) continue;
        CHECK_EQ(ty_pool_size(pool), n_threads);
        if (one_cpu) CHECK_MSG(ty_pool_spins(pool) == (n_threads == 1), "%d threads on one CPU", n_threads);
        for (int uneven = 0; uneven < 2; uneven++)
            for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
                for (int rep = 0; rep < 20; rep++) {
                    const int64_t n = sizes[s];
                    atomic_int *runs = calloc((size_t)n, sizeof *runs);
                    job j = {runs, n_threads, 0, uneven};
                    ty_pool_run(pool, n, task, &j);
                    int64_t wrong = 0;
                    for (int64_t t = 0; t < n; t++) wrong += atomic_load(&runs[t]) != 1;
                    CHECK_MSG(wrong == 0, "%d threads, %lld tasks: %lld tasks did not run once",
                              n_threads, (long long)n, (long long)wrong);
                    CHECK_EQ(atomic_load(&j.bad_thread), 0);
                    free(runs);
                }
        ty_pool_run(pool, 0, task, NULL); /* no tasks: returns at once */
        ty_pool_free(pool);
    }
}

int main(void) {
    run_jobs(false);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) run_jobs(true);
    else printf("no affinity to one CPU here: the oversubscribed pool is not checked\n");
    return test_finish("test_threadpool");
}
