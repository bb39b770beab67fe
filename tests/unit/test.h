/* test.h — the few macros every test uses. A test is a program: exit 0 passes,
 * 77 skips (ctest's SKIP_RETURN_CODE), anything else fails. */
#ifndef TOY_TEST_H
#define TOY_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int test_failures;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
            test_failures++;                                                            \
        }                                                                               \
    } while (0)

#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
            test_failures++;                                                            \
        }                                                                               \
    } while (0)

#define CHECK_EQ(a, b)                                                                  \
    do {                                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);                             \
        if (a_ != b_) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s = %lld, %s = %lld\n", __FILE__,  \
                    __LINE__, #a, a_, #b, b_);                                          \
            test_failures++;                                                            \
        }                                                                               \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                           \
    do {                                                                                \
        double a_ = (double)(a), b_ = (double)(b);                                      \
        if (!(fabs(a_ - b_) <= (tol))) {                                                \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g (tol %g)\n", \
                    __FILE__, __LINE__, #a, a_, #b, b_, (double)(tol));                 \
            test_failures++;                                                            \
        }                                                                               \
    } while (0)

#define CHECK_STR_CONTAINS(s, sub)                                                      \
    do {                                                                                \
        const char *s_ = (s);                                                           \
        if (!s_ || !strstr(s_, (sub))) {                                                \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__,         \
                    __LINE__, s_ ? s_ : "(null)", (sub));                               \
            test_failures++;                                                            \
        }                                                                               \
    } while (0)

#define TEST_SKIP_CODE 77

/* TEST_UNDER_ASAN: built with AddressSanitizer (make test-sanitize), where a test may thin
 * out repetitions that check numbers the plain build checks, never a code path */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif

static inline int test_finish(const char *name) {
    if (test_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

/* ---------------------------------------------------------------- waiting
 * No check may depend on how fast the machine is: a test waits for an event by polling it
 * with a generous deadline (test_now_s), never by sleeping a fixed time and assuming the
 * work is done. Every pause between polls is a test_nap, which TOY_TEST_SLEEP_SCALE=10
 * makes ten times as long (a fast machine, relatively). */

/* Seconds on the monotonic clock. */
static inline double test_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleeps `seconds` times TOY_TEST_SLEEP_SCALE (default 1). */
static inline void test_nap(double seconds) {
    const char *k = getenv("TOY_TEST_SLEEP_SCALE");
    const double scale = k && *k ? atof(k) : 1.0;
    const double s = seconds * (scale > 0 ? scale : 1.0);
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The fixtures folder: $TOY_FIXTURES, else ../shared/fixtures beside the repo. NULL
 * (after printing why) when it is absent, so the caller can skip. */
static inline const char *test_fixtures_dir(void) {
    static char buf[4096];
    const char *env = getenv("TOY_FIXTURES");
    if (env && *env)
        snprintf(buf, sizeof buf, "%s", env);
    else
        snprintf(buf, sizeof buf, "%s/../shared/fixtures", TOY_SOURCE_DIR);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/README.md", buf);
    FILE *f = fopen(probe, "rb");
    if (!f) {
        printf("no fixtures at %s (set TOY_FIXTURES to the fixtures folder)\n",
               buf);
        return NULL;
    }
    fclose(f);
    return buf;
}

/* The bits of a float, to compare results exactly. */
static inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* malloc that aborts on failure (and never returns NULL for 0 bytes). */
static inline void *xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) abort();
    return p;
}

/* A whole file's bytes (malloc'd, NUL-terminated; *len without the NUL), NULL if it
 * cannot be read. */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = xmalloc((size_t)(n > 0 ? n : 0) + 1);
    *len = fread(buf, 1, (size_t)(n > 0 ? n : 0), f);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

/* Writes len bytes to path; aborts on failure (a test's own scratch file). */
static inline void test_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len)) abort();
    fclose(f);
}

/* Calls fn(fix, name) for every model listed in the fixtures' models/manifest.tsv whose
 * name contains filter (NULL: every one); returns how many (0 counts as a failure). */
static inline int test_each_fixture_model(const char *fix, const char *filter,
                                          void (*fn)(const char *fix, const char *name)) {
    char path[4400];
    snprintf(path, sizeof path, "%s/models/manifest.tsv", fix);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        if (filter && !strstr(line, filter)) continue;
        fn(fix, line);
        n++;
    }
    fclose(f);
    CHECK_MSG(n > 0, "no model of %s was checked", path);
    return n;
}

/* Deterministic pseudo-random numbers for tests (xorshift64*). */
static inline unsigned long long test_rand_u64(unsigned long long *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}
static inline float test_rand_uniform(unsigned long long *s) { /* [0, 1) */
    return (float)(test_rand_u64(s) >> 40) / (float)(1ULL << 24);
}
static inline float test_rand_normal(unsigned long long *s) {
    float u1 = test_rand_uniform(s), u2 = test_rand_uniform(s);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

#endif
