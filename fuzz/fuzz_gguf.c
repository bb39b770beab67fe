/* fuzz_gguf.c — libFuzzer target for the GGUF reader.
 *
 * Opens the input with toy_gguf_open_memory and, when it is accepted, reads everything
 * the API exposes: every key through every accessor, every array element (nested
 * arrays included), every tensor (found again by name), and the first row of each
 * tensor whose type can be dequantized. Under ASan any over-read shows; beyond that the
 * walk checks the promises an accepted file makes (tensor data inside the buffer,
 * aligned, sized by its shape) and traps when one is broken.
 *
 * tests/unit/test_fuzz_corpus.c includes this file to run the same walk over fuzz/corpus.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Recursion bound for walking nested arrays; deeper levels are not visited. */
#define FUZZ_MAX_DEPTH 256
/* Rows longer than this are not dequantized (the buffer would be too large). */
#define FUZZ_MAX_ROW (1 << 20)

typedef struct {
    const char *problem; /* the first broken promise, or NULL */
    unsigned sink;       /* folds the bytes read so that the reads are not optimized out */
} fuzz_walk;

#define FUZZ_REQUIRE(w, cond)                                                           \
    do {                                                                                \
        if (!(cond) && !(w)->problem) (w)->problem = #cond;                             \
    } while (0)

static void fuzz_touch(fuzz_walk *w, const void *p, size_t n) {
    const volatile uint8_t *b = p;
    for (size_t i = 0; i < n; i++) w->sink += b[i];
}

static size_t fuzz_gguf_elem_size(toy_gguf_type t) {
    switch (t) {
    case TOY_GGUF_UINT8: case TOY_GGUF_INT8: case TOY_GGUF_BOOL: return 1;
    case TOY_GGUF_UINT16: case TOY_GGUF_INT16: return 2;
    case TOY_GGUF_UINT32: case TOY_GGUF_INT32: case TOY_GGUF_FLOAT32: return 4;
    case TOY_GGUF_UINT64: case TOY_GGUF_INT64: case TOY_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static void fuzz_walk_value(fuzz_walk *w, const toy_gguf_value *v, int depth) {
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    const char *s;
    size_t len;
    toy_gguf_type type = toy_gguf_value_type(v);
    FUZZ_REQUIRE(w, (int)type >= 0 && type < TOY_GGUF_TYPE_COUNT);
    FUZZ_REQUIRE(w, toy_gguf_type_name(type) != NULL);
    if (toy_gguf_value_u64(v, &u) == TOY_OK) w->sink += (unsigned)u;
    if (toy_gguf_value_i64(v, &i) == TOY_OK) w->sink += (unsigned)i;
    if (toy_gguf_value_f64(v, &d) == TOY_OK) w->sink += d == d;
    if (toy_gguf_value_bool(v, &b) == TOY_OK) w->sink += b;
    if (toy_gguf_value_str(v, &s, &len) == TOY_OK) {
        FUZZ_REQUIRE(w, type == TOY_GGUF_STRING);
        FUZZ_REQUIRE(w, s != NULL || len == 0);
        if (s) fuzz_touch(w, s, len);
    }
    if (type != TOY_GGUF_ARRAY || depth >= FUZZ_MAX_DEPTH) return;

    toy_gguf_type et = toy_gguf_array_type(v);
    uint64_t n = toy_gguf_array_len(v);
    FUZZ_REQUIRE(w, (int)et >= 0 && et < TOY_GGUF_TYPE_COUNT);
    if (et == TOY_GGUF_STRING || et == TOY_GGUF_ARRAY) {
        FUZZ_REQUIRE(w, toy_gguf_array_data(v) == NULL);
        for (uint64_t j = 0; j < n; j++) {
            const toy_gguf_value *e = toy_gguf_array_get(v, j);
            FUZZ_REQUIRE(w, e != NULL);
            if (!e) break;
            FUZZ_REQUIRE(w, toy_gguf_value_type(e) == et);
            if (et == TOY_GGUF_STRING) {
                FUZZ_REQUIRE(w, toy_gguf_array_str(v, j, &s, &len) == TOY_OK);
                if (s) fuzz_touch(w, s, len);
            }
            fuzz_walk_value(w, e, depth + 1);
        }
    } else {
        const void *raw = toy_gguf_array_data(v);
        size_t es = fuzz_gguf_elem_size(et);
        FUZZ_REQUIRE(w, es > 0);
        FUZZ_REQUIRE(w, raw != NULL || n == 0);
        if (raw && es && n <= SIZE_MAX / es) fuzz_touch(w, raw, (size_t)n * es);
        for (uint64_t j = 0; j < n; j++) {
            FUZZ_REQUIRE(w, toy_gguf_array_get(v, j) == NULL);
            if (toy_gguf_array_u64(v, j, &u) == TOY_OK) w->sink += (unsigned)u;
            if (toy_gguf_array_i64(v, j, &i) == TOY_OK) w->sink += (unsigned)i;
            if (toy_gguf_array_f64(v, j, &d) == TOY_OK) w->sink += d == d;
            FUZZ_REQUIRE(w, toy_gguf_array_str(v, j, &s, &len) != TOY_OK);
        }
    }
    /* one past the end is refused, not read */
    FUZZ_REQUIRE(w, toy_gguf_array_get(v, n) == NULL);
    FUZZ_REQUIRE(w, toy_gguf_array_u64(v, n, &u) != TOY_OK);
    FUZZ_REQUIRE(w, toy_gguf_array_str(v, n, &s, &len) != TOY_OK);
}

static void fuzz_walk_tensor(fuzz_walk *w, const toy_gguf *g, const toy_gguf_tensor *t,
                             const uint8_t *base, size_t size) {
    FUZZ_REQUIRE(w, t->name != NULL);
    if (!t->name) return;
    fuzz_touch(w, t->name, strlen(t->name));
    const toy_gguf_tensor *f = toy_gguf_find_tensor(g, t->name);
    FUZZ_REQUIRE(w, f == t);
    FUZZ_REQUIRE(w, toy_type_name(t->type) != NULL);
    FUZZ_REQUIRE(w, t->n_dims >= 0 && t->n_dims <= TOY_MAX_DIMS);
    for (int d = 0; d < TOY_MAX_DIMS; d++) {
        FUZZ_REQUIRE(w, t->ne[d] >= 0);
        if (d >= t->n_dims) FUZZ_REQUIRE(w, t->ne[d] == 1);
    }
    if (w->problem) return;

    /* size is the shape's: row size times the number of rows, with no overflow (a
     * tensor with a zero dimension has no bytes, whatever the others are) */
    size_t row = 0, bytes = 0;
    bool overflow = false, empty = false;
    int64_t nel = 1;
    for (int d = 0; d < TOY_MAX_DIMS; d++) {
        overflow |= __builtin_mul_overflow(nel, t->ne[d], &nel);
        empty |= t->ne[d] == 0;
    }
    FUZZ_REQUIRE(w, !overflow && toy_tensor_nelements(t) == nel);
    FUZZ_REQUIRE(w, toy_type_row_size(t->type, t->ne[0], &row) == TOY_OK);
    bytes = row;
    for (int d = 1; d < TOY_MAX_DIMS && !empty; d++)
        overflow |= __builtin_mul_overflow(bytes, (size_t)t->ne[d], &bytes);
    if (empty) bytes = 0;
    FUZZ_REQUIRE(w, !overflow);
    FUZZ_REQUIRE(w, t->size == bytes);
    if (w->problem) return;

    /* in place, aligned, inside the file */
    size_t align = toy_gguf_alignment(g);
    FUZZ_REQUIRE(w, align > 0 && t->offset % align == 0);
    FUZZ_REQUIRE(w, t->data != NULL || t->size == 0);
    /* a tensor of no bytes may point anywhere: nothing is read through it */
    if (base && t->data && t->size) {
        const uint8_t *p = t->data;
        FUZZ_REQUIRE(w, p == base + toy_gguf_data_offset(g) + t->offset);
        FUZZ_REQUIRE(w, p >= base && t->size <= size && (size_t)(p - base) <= size - t->size);
    }
    if (w->problem) return;
    if (t->size) {
        fuzz_touch(w, t->data, 1);
        fuzz_touch(w, (const uint8_t *)t->data + t->size - 1, 1);
    }

    if (toy_type_can_dequantize(t->type) && t->ne[0] > 0 && t->ne[0] <= FUZZ_MAX_ROW &&
        nel > 0) {
        float *out = malloc((size_t)t->ne[0] * sizeof *out);
        if (out) {
            FUZZ_REQUIRE(w, toy_dequantize(t->type, t->data, out, t->ne[0]) == TOY_OK);
            w->sink += out[0] == out[0];
            free(out);
        }
    }
}

/* Reads all of an accepted file. `base`/`size` are the bytes it was opened from (NULL
 * for a mapped file: the range checks are skipped). Returns the first broken promise,
 * or NULL. */
static const char *fuzz_check_gguf(const toy_gguf *g, const uint8_t *base, size_t size) {
    fuzz_walk w = {NULL, 0};
    uint32_t version = toy_gguf_version(g);
    FUZZ_REQUIRE(&w, version == 2 || version == 3);
    size_t align = toy_gguf_alignment(g);
    FUZZ_REQUIRE(&w, align > 0 && (align & (align - 1)) == 0);
    /* No check that data_offset <= file_size: like llama.cpp (which fseeks past the
     * end), a file whose tensors hold no bytes may end inside the padding before its
     * data section. Each tensor's bytes are checked against the file below. */
    FUZZ_REQUIRE(&w, align == 0 || toy_gguf_data_offset(g) % align == 0);
    if (base) FUZZ_REQUIRE(&w, toy_gguf_file_size(g) == size);
    FUZZ_REQUIRE(&w, toy_gguf_path(g) != NULL);

    int64_t n_kv = toy_gguf_n_kv(g);
    FUZZ_REQUIRE(&w, n_kv >= 0);
    for (int64_t i = 0; i < n_kv && !w.problem; i++) {
        const char *key = toy_gguf_key(g, i);
        const toy_gguf_value *v = toy_gguf_kv(g, i);
        FUZZ_REQUIRE(&w, key != NULL && v != NULL);
        if (!key || !v) break;
        /* keys are unique and free of NUL bytes, so each finds itself */
        FUZZ_REQUIRE(&w, toy_gguf_find_key(g, key) == i);
        FUZZ_REQUIRE(&w, toy_gguf_get(g, key) == v);
        uint64_t u;
        double d;
        bool b;
        const char *s;
        size_t len;
        if (toy_gguf_get_u64(g, key, &u) == TOY_OK) w.sink += (unsigned)u;
        if (toy_gguf_get_f64(g, key, &d) == TOY_OK) w.sink += d == d;
        if (toy_gguf_get_bool(g, key, &b) == TOY_OK) w.sink += b;
        if (toy_gguf_get_str(g, key, &s, &len) == TOY_OK && s) fuzz_touch(&w, s, len);
        fuzz_walk_value(&w, v, 0);
    }
    FUZZ_REQUIRE(&w, toy_gguf_key(g, n_kv) == NULL);

    int64_t n_t = toy_gguf_n_tensors(g);
    FUZZ_REQUIRE(&w, n_t >= 0);
    for (int64_t i = 0; i < n_t && !w.problem; i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        FUZZ_REQUIRE(&w, t != NULL);
        if (!t) break;
        fuzz_walk_tensor(&w, g, t, base, size);
    }
    FUZZ_REQUIRE(&w, toy_gguf_tensor_at(g, n_t) == NULL);
    return w.problem;
}

/* A refusal must leave a one-line message. */
static const char *fuzz_check_refusal(toy_status st) {
    const char *msg = toy_last_error();
    if (st == TOY_OK) return NULL;
    if (!msg || !*msg) return "refused with an empty toy_last_error()";
    if (strchr(msg, '\n')) return "refused with a message of more than one line";
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    toy_gguf *g = NULL;
    toy_status st = toy_gguf_open_memory(data, size, "fuzz-input", &g);
    const char *problem = fuzz_check_refusal(st);
    if (st == TOY_OK) {
        problem = fuzz_check_gguf(g, data, size);
        toy_gguf_close(g);
    }
    if (problem) {
        fprintf(stderr, "fuzz_gguf: %s\n", problem);
        __builtin_trap();
    }
    return 0;
}
