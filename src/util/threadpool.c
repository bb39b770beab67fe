/* threadpool.c — see threadpool.h.
 *
 * A forward pass hands out a few hundred jobs per token, microseconds apart; waking a
 * sleeping thread costs about as much as a small job. So a worker that finishes a job
 * spins for up to SPIN_SECONDS waiting for the next one, and only then sleeps on the
 * condition variable: spinning while a pass runs, nothing once generation stops. The
 * caller, done with its share, likewise spins for the workers, then sleeps until the
 * last one wakes it.
 *
 * A pool of more threads than the CPUs it may run on (-t 2 under taskset -c 0) never
 * spins: a spinning thread there holds the only CPU while the thread it waits for cannot
 * run, and a pass of hundreds of jobs took a time slice each (7 tokens/s, not 1,000). */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

/* the spin's pause (the compiler's builtin: instruction sets' intrinsics live in
 * src/kernels/) */
#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_SECONDS 0.002

/* Spinning threads give their core away now and then: with more threads than free cores
 * (-t above the core count, or a busy machine) the thread being waited for may be the
 * one that is not running, and a pure spin would hold its core for a whole time slice. */
#define SPINS_PER_YIELD 256

static void spin_once(unsigned i) {
    cpu_relax();
    if (i % SPINS_PER_YIELD == 0) sched_yield();
}

/* A thread's range of tasks: [lo, hi) packed as lo | hi << 32, so that the owner taking
 * from the front and a helper taking from the back cannot both get the same task. On
 * a cache line of its own: the owner updates it at every task. */
typedef struct {
    _Alignas(64) atomic_uint_fast64_t span;
} task_range;

#define RANGE_MAX_TASKS 0x7fffffffLL /* a job of more runs in slices of this many */

struct ty_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_uint_fast64_t generation; /* one more for every job */
    atomic_int busy;                 /* workers still in the current job */
    atomic_int sleepers;             /* workers waiting on `wake` */
    atomic_bool shutdown;
    pthread_cond_t done;             /* the last worker of a job to the caller */
    atomic_bool caller_waits;        /* the caller sleeps on `done` */
    double spin_seconds;             /* SPIN_SECONDS, or 0 with more threads than CPUs */

    /* the current job */
    ty_task_fn fn;
    void *ctx;
    int64_t first; /* task index of range position 0 */
    task_range *ranges; /* one per thread */
};

typedef struct {
    ty_pool *pool;
    int index;
} worker_arg;

static uint64_t span_of(uint64_t lo, uint64_t hi) { return lo | hi << 32; }

/* Takes the first (front) or last task of a range; false when it is empty. */
static bool take(task_range *r, bool front, int64_t *task) {
    uint64_t s = atomic_load_explicit(&r->span, memory_order_relaxed);
    for (;;) {
        const uint64_t lo = s & 0xffffffffu, hi = s >> 32;
        if (lo >= hi) return false;
        const uint64_t next = front ? span_of(lo + 1, hi) : span_of(lo, hi - 1);
        if (atomic_compare_exchange_weak_explicit(&r->span, &s, next, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *task = (int64_t)(front ? lo : hi - 1);
            return true;
        }
    }
}

static void work(ty_pool *p, int thread) {
    int64_t t;
    while (take(&p->ranges[thread], true, &t)) p->fn(p->ctx, p->first + t, thread);
    for (int k = 1; k < p->n_threads; k++) {
        task_range *other = &p->ranges[(thread + k) % p->n_threads];
        while (take(other, false, &t)) p->fn(p->ctx, p->first + t, thread);
    }
}

/* Waits until the generation differs from `seen`; returns false on shutdown. */
static bool wait_for_job(ty_pool *p, uint64_t seen) {
    const double deadline = ty_now_s() + p->spin_seconds;
    for (unsigned i = 1; p->spin_seconds > 0; i++) {
        if (atomic_load(&p->generation) != seen) return true;
        if (atomic_load(&p->shutdown)) return false;
        spin_once(i);
        if (i % 1024 == 0 && ty_now_s() > deadline) break;
    }
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1);
    /* the dispatcher bumps the generation, then looks at sleepers; this thread counts
     * itself, then looks at the generation: one of the two sees the other */
    while (atomic_load(&p->generation) == seen && !atomic_load(&p->shutdown))
        pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->lock);
    return !atomic_load(&p->shutdown);
}

static void *worker(void *arg) {
    worker_arg *a = arg;
    ty_pool *p = a->pool;
    int index = a->index;
    free(a);
    uint64_t seen = 0;
    while (wait_for_job(p, seen)) {
        seen = atomic_load(&p->generation);
        work(p, index);
        /* the last worker out wakes a caller that sleeps: it counts down, then looks at
         * caller_waits; the caller sets that, then looks at busy (both seq_cst) */
        if (atomic_fetch_sub(&p->busy, 1) == 1 && atomic_load(&p->caller_waits)) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_broadcast(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

/* The caller's wait for the job's workers: a spin, then sleep. */
static void wait_for_workers(ty_pool *p) {
    const double deadline = ty_now_s() + p->spin_seconds;
    for (unsigned i = 1; p->spin_seconds > 0; i++) {
        if (atomic_load_explicit(&p->busy, memory_order_acquire) == 0) return;
        spin_once(i);
        if (i % 1024 == 0 && ty_now_s() > deadline) break;
    }
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->caller_waits, true);
    while (atomic_load(&p->busy) > 0) pthread_cond_wait(&p->done, &p->lock);
    atomic_store(&p->caller_waits, false);
    pthread_mutex_unlock(&p->lock);
}

/* The CPUs this process may run on (its affinity mask), 0 if unknown. */
static int usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}

ty_pool *ty_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    ty_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    const int cpus = usable_cpus();
    p->spin_seconds = cpus > 0 && n_threads > cpus ? 0 : SPIN_SECONDS;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->ranges = aligned_alloc(_Alignof(task_range), (size_t)n_threads * sizeof *p->ranges);
    if (!p->threads || !p->ranges) {
        p->n_threads = 1; /* no workers to join */
        ty_pool_free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) {
            p->n_threads = i;
            break;
        }
        *a = (worker_arg){p, i};
        if (pthread_create(&p->threads[i], NULL, worker, a) != 0) {
            free(a);
            p->n_threads = i; /* fewer threads: still correct */
            break;
        }
    }
    return p;
}

void ty_pool_free(ty_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->shutdown, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p->ranges);
    free(p);
}

int ty_pool_size(const ty_pool *p) { return p->n_threads; }

bool ty_pool_spins(const ty_pool *p) { return p->spin_seconds > 0; }

void ty_pool_run(ty_pool *p, int64_t n_tasks, ty_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    for (int64_t first = 0; first < n_tasks; first += RANGE_MAX_TASKS) {
        const int64_t n = n_tasks - first < RANGE_MAX_TASKS ? n_tasks - first : RANGE_MAX_TASKS;
        p->fn = fn;
        p->ctx = ctx;
        p->first = first;
        for (int i = 0; i < p->n_threads; i++)
            atomic_store_explicit(&p->ranges[i].span,
                                  span_of((uint64_t)(n * i / p->n_threads),
                                          (uint64_t)(n * (i + 1) / p->n_threads)),
                                  memory_order_relaxed);
        atomic_store(&p->busy, p->n_threads - 1);
        atomic_fetch_add(&p->generation, 1); /* publishes the job (seq_cst) */
        if (atomic_load(&p->sleepers) > 0) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_broadcast(&p->wake);
            pthread_mutex_unlock(&p->lock);
        }
        work(p, 0);
        wait_for_workers(p);
    }
}

typedef struct {
    ty_range_fn fn;
    const void *ctx;
    int64_t n, per_task;
} range_job;

static void range_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const range_job *r = ctx;
    const int64_t i0 = task * r->per_task, i1 = i0 + r->per_task < r->n ? i0 + r->per_task : r->n;
    r->fn(r->ctx, i0, i1);
}

void ty_pool_for(ty_pool *pool, int64_t n, int64_t grain, ty_range_fn fn, const void *ctx) {
    if (n <= 0) return;
    const int threads = pool ? ty_pool_size(pool) : 1;
    if (threads <= 1 || n < 2 * grain) {
        fn(ctx, 0, n);
        return;
    }
    const int64_t tasks = (int64_t)threads * 4;
    int64_t per = (n + tasks - 1) / tasks;
    if (per < grain) per = grain;
    range_job r = {fn, ctx, n, per};
    ty_pool_run(pool, (n + per - 1) / per, range_task, &r);
}
