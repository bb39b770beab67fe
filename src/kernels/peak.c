/* peak.c — the F32 fused multiply-add peak of this CPU: every thread runs chains of
 * independent FMAs in registers (enough of them to cover the latency of every FMA
 * unit) for a fixed count, all threads started together; peak = FLOPs / wall time.
 * It is the denominator of toy train --bench's utilisation. */
#include <pthread.h>
#include <time.h>

#include "cpu.h"
#include "toy.h"

#define PEAK_ITERS 20000000L

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    double gflops; /* this thread's rate */
} peak_thread;

static void *peak_run(void *arg) {
    peak_thread *t = arg;
    const double t0 = now_s();
    const double flops = ty_cpu()->fma_peak(PEAK_ITERS);
    t->gflops = flops / (now_s() - t0) / 1e9;
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
