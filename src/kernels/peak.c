/* peak.c — the F32 fused multiply-add peak of this CPU: every thread runs chains of
 * independent FMAs in registers (enough of them to cover the latency of every FMA
 * unit) for a fixed count, all threads started together; peak = FLOPs / wall time.
 * It is the denominator of toy train --bench's utilisation. */
#include <pthread.h>
#include <time.h>

#include "kernels.h"
#include "toy.h"

#define PEAK_ITERS 20000000L

static volatile float peak_sink;

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx512f"))) static double peak_avx512(long iters) {
    __m512 a[16], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps((float)i);
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
    }
    __m512 s = a[0];
    for (int i = 1; i < 16; i++) s = _mm512_add_ps(s, a[i]);
    peak_sink = _mm512_reduce_add_ps(s);
    return (double)iters * 16 * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double peak_avx2(long iters) {
    __m256 a[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], x, y);
    }
    __m256 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
    float v[8];
    _mm256_storeu_ps(v, s);
    peak_sink = v[0];
    return (double)iters * 12 * 8 * 2;
}
#endif

/* the portable kernel: plain multiply-adds the compiler may or may not fuse */
static double peak_scalar(long iters) {
    float a[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (long k = 0; k < iters / 8; k++)
        for (int i = 0; i < 8; i++) a[i] = a[i] * 0.999999f + 1e-7f;
    peak_sink = a[0] + a[7];
    return (double)(iters / 8) * 8 * 2;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    toy_isa isa;
    double gflops; /* this thread's rate */
} peak_thread;

static void *peak_run(void *arg) {
    peak_thread *t = arg;
    const double t0 = now_s();
    double flops;
#if defined(__x86_64__)
    if (t->isa >= TOY_ISA_AVX512) flops = peak_avx512(PEAK_ITERS / 4);
    else if (t->isa >= TOY_ISA_AVX2) flops = peak_avx2(PEAK_ITERS / 2);
    else
#endif
        flops = peak_scalar(PEAK_ITERS);
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
        for (int i = 0; i < n_threads; i++) t[i] = (peak_thread){toy_cpu_isa(), 0};
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
