/* threadpool.c — see threadpool.h. */
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

struct toy_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a new job, or shutdown */
    pthread_cond_t done; /* the last worker left the job */
    uint64_t generation;
    bool shutdown;
    int busy; /* workers still in the current job */

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

static void *worker(void *arg) {
    worker_arg *a = arg;
    toy_pool *p = a->pool;
    int index = a->index;
    free(a);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->shutdown && p->generation == seen) pthread_cond_wait(&p->wake, &p->lock);
        if (p->shutdown) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        work(p, index);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

toy_pool *toy_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    toy_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
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
    p->shutdown = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
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
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    p->busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    work(p, 0);

    pthread_mutex_lock(&p->lock);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}
