/* peak.c — this machine's peaks (toy.h). The F32 fused multiply-add peak: every thread
 * runs chains of independent FMAs in registers (enough of them to cover the latency of
 * every FMA unit) for a fixed count, all threads started together; peak = FLOPs / wall
 * time, the denominator of toy train --bench's utilisation. The memory's read
 * bandwidth: threads read their shares of a probe far larger than the caches, the
 * denominator of toy bench's roofline. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "cpu.h"
#include "elementwise.h"
#include "error.h"
#include "toy.h"

#define PEAK_ITERS 20000000L

typedef struct {
    double gflops; /* this thread's rate */
} peak_thread;

static void *peak_run(void *arg) {
    peak_thread *t = arg;
    const double t0 = ty_now_s();
    const double flops = ty_cpu()->fma_peak(PEAK_ITERS);
    t->gflops = flops / (ty_now_s() - t0) / 1e9;
    return NULL;
}

/* The threads' rates summed: they start within microseconds of each other and run for
 * a few hundred milliseconds, so they overlap almost entirely. */
double toy_cpu_peak_gflops(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    peak_thread t[256];
    pthread_t th[256];
    double best = 0;
    for (int rep = 0; rep < 3; rep++) { /* the best of three: the clock may ramp up first */
        int started = 1;
        for (int i = 0; i < n_threads; i++) t[i] = (peak_thread){0};
        for (int i = 1; i < n_threads && pthread_create(&th[i], NULL, peak_run, &t[i]) == 0; i++) started++;
        peak_run(&t[0]);
        double sum = t[0].gflops;
        for (int i = 1; i < started; i++) {
            pthread_join(th[i], NULL);
            sum += t[i].gflops;
        }
        if (sum > best) best = sum;
    }
    return best;
}

/* ---------------------------------------------------------------- read bandwidth */

#define PROBE_BYTES ((size_t)512 << 20)

struct toy_bandwidth_probe {
    uint64_t *words;
};

toy_status toy_bandwidth_probe_new(toy_bandwidth_probe **out) {
    *out = NULL;
    toy_bandwidth_probe *p = calloc(1, sizeof *p);
    if (!p || !(p->words = malloc(PROBE_BYTES))) {
        free(p);
        return ty_error(TOY_ERR_NOMEM, "no memory for a bandwidth probe of %zu MiB", PROBE_BYTES >> 20);
    }
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < PROBE_BYTES / sizeof(uint64_t); i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p->words[i] = x;
    }
    *out = p;
    return TOY_OK;
}

void toy_bandwidth_probe_free(toy_bandwidth_probe *p) {
    if (!p) return;
    free(p->words);
    free(p);
}

typedef struct {
    const uint64_t *p;
    size_t n;
    int streams;
    uint64_t sum;
} read_job;

static void *read_slice(void *arg) {
    read_job *j = arg;
    j->sum = ty_cpu()->read_sum(j->p, j->n, j->streams);
    return NULL;
}

/* One pass over the probe by n_threads threads, each reading its share as `streams`
 * streams: bytes/s. */
static double read_pass(const uint64_t *words, int n_threads, int streams, volatile uint64_t *sink) {
    const size_t n = PROBE_BYTES / sizeof(uint64_t), per = n / (size_t)n_threads;
    read_job jobs[256];
    pthread_t th[256];
    bool started[256] = {false};
    const double t0 = ty_now_s();
    for (int t = 0; t < n_threads; t++) {
        jobs[t] = (read_job){words + per * (size_t)t, per, streams, 0};
        if (t) started[t] = pthread_create(&th[t], NULL, read_slice, &jobs[t]) == 0;
        if (t && !started[t]) read_slice(&jobs[t]);
    }
    read_slice(&jobs[0]);
    for (int t = 1; t < n_threads; t++)
        if (started[t]) pthread_join(th[t], NULL);
    const double dt = ty_now_s() - t0;
    for (int t = 0; t < n_threads; t++) *sink += jobs[t].sum;
    return (double)(per * (size_t)n_threads * sizeof(uint64_t)) / dt;
}

double toy_bandwidth_probe_measure(toy_bandwidth_probe *probe, int n_threads) {
    if (!probe) return 0;
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    double rates[3];
    volatile uint64_t sink = 0;
    for (int pass = 0; pass < 3; pass++) {
        const double one = read_pass(probe->words, n_threads, 1, &sink);
        const double four = read_pass(probe->words, n_threads, 4, &sink);
        rates[pass] = one > four ? one : four;
    }
    const double lo = rates[0] < rates[1] ? rates[0] : rates[1], hi = rates[0] < rates[1] ? rates[1] : rates[0];
    return rates[2] < lo ? lo : rates[2] > hi ? hi : rates[2]; /* the median */
}
