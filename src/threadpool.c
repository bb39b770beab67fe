/* threadpool.c — see threadpool.h.
 *
 * A forward pass hands out a few hundred jobs per token, microseconds apart; waking a
 * sleeping thread costs about as much as a small job. So a worker that finishes a job
 * spins for up to SPIN_SECONDS waiting for the next one, and only then sleeps on the
 * condition variable: spinning while a pass runs, nothing once generation stops. */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_SECONDS 0.002

struct toy_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_uint_fast64_t generation; /* one more for every job */
    atomic_int busy;                 /* workers still in the current job */
    atomic_int sleepers;             /* workers waiting on `wake` */
    atomic_bool shutdown;

    /* the current job */
    toy_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_int_fast64_t next;
};

typedef struct {
    toy_pool *pool;
    int index;
} worker_arg;

static void work(toy_pool *p, int thread) {
    for (;;) {
        int64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->n_tasks) return;
        p->fn(p->ctx, t, thread);
    }
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits until the generation differs from `seen`; returns false on shutdown. */
static bool wait_for_job(toy_pool *p, uint64_t seen) {
    double deadline = seconds() + SPIN_SECONDS;
    for (int i = 1;; i++) {
        if (atomic_load(&p->generation) != seen) return true;
        if (atomic_load(&p->shutdown)) return false;
        cpu_relax();
        if (i % 1024 == 0 && seconds() > deadline) break;
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
    toy_pool *p = a->pool;
    int index = a->index;
    free(a);
    uint64_t seen = 0;
    while (wait_for_job(p, seen)) {
        seen = atomic_load(&p->generation);
        work(p, index);
        atomic_fetch_sub_explicit(&p->busy, 1, memory_order_release);
    }
    return NULL;
}

toy_pool *toy_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    toy_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        toy_pool_free(p);
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

void toy_pool_free(toy_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->shutdown, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}

int toy_pool_size(const toy_pool *p) { return p->n_threads; }

void toy_pool_run(toy_pool *p, int64_t n_tasks, toy_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    atomic_store(&p->busy, p->n_threads - 1);
    atomic_fetch_add(&p->generation, 1); /* publishes the job (seq_cst) */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    work(p, 0);
    while (atomic_load_explicit(&p->busy, memory_order_acquire) > 0) cpu_relax();
}
