/* gguf.c — reading GGUF files (versions 2 and 3).
 *
 * The file is memory-mapped and validated once, up front: every count, length,
 * dimension and offset is checked against what is left of the file before anything is
 * allocated or read, so a malformed file gives an error naming the file and the byte
 * offset, key or tensor, never an out-of-bounds read. Tensor data is used in place.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

/* Nesting of arrays of arrays; deeper files are refused rather than recursed into. */
#define GGUF_MAX_ARRAY_DEPTH 8
/* llama.cpp's GGML_MAX_NAME: tensor names are shorter than this. */
#define GGUF_MAX_TENSOR_NAME 64

struct toy_gguf_value {
    toy_gguf_type type;
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        bool b;
        struct {
            const char *ptr; /* into the file, not NUL-terminated */
            uint64_t len;
        } str;
        struct {
            toy_gguf_type type;
            uint64_t n;
            const uint8_t *raw;    /* numbers and bools: the elements in the file */
            toy_gguf_value *items; /* strings and arrays: n parsed values */
        } arr;
    };
};

struct toy_gguf {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped; /* base is an mmap of the file */
    bool owned;  /* base is a malloc'd copy of the file (toy_gguf_open_read) */
    uint32_t version;
    size_t alignment;
    size_t data_offset;

    int64_t n_kv;
    char **keys;
    toy_gguf_value *values;
    int64_t *keys_sorted; /* indices ordered by key, for lookup */

    int64_t n_tensors;
    toy_gguf_tensor *tensors;
    int64_t *tensors_sorted; /* indices ordered by name */
};

/* ---------------------------------------------------------------- value types */

static const struct {
    const char *name;
    size_t size; /* bytes of a scalar; for strings and arrays the smallest encoding */
} value_types[TOY_GGUF_TYPE_COUNT] = {
    [TOY_GGUF_UINT8] = {"u8", 1},     [TOY_GGUF_INT8] = {"i8", 1},
    [TOY_GGUF_UINT16] = {"u16", 2},   [TOY_GGUF_INT16] = {"i16", 2},
    [TOY_GGUF_UINT32] = {"u32", 4},   [TOY_GGUF_INT32] = {"i32", 4},
    [TOY_GGUF_FLOAT32] = {"f32", 4},  [TOY_GGUF_BOOL] = {"bool", 1},
    [TOY_GGUF_STRING] = {"str", 8},   [TOY_GGUF_ARRAY] = {"arr", 12},
    [TOY_GGUF_UINT64] = {"u64", 8},   [TOY_GGUF_INT64] = {"i64", 8},
    [TOY_GGUF_FLOAT64] = {"f64", 8},
};

const char *toy_gguf_type_name(toy_gguf_type type) {
    if ((unsigned)type >= TOY_GGUF_TYPE_COUNT) return "unknown";
    return value_types[type].name;
}

size_t ty_gguf_type_size(toy_gguf_type type) {
    return (unsigned)type < TOY_GGUF_TYPE_COUNT ? value_types[type].size : 0;
}

static bool is_scalar(toy_gguf_type t) {
    return (unsigned)t < TOY_GGUF_TYPE_COUNT && t != TOY_GGUF_STRING && t != TOY_GGUF_ARRAY;
}

/* ---------------------------------------------------------------- the cursor */

typedef struct {
    const toy_gguf *g;
    size_t pos;
} cursor;

static size_t cursor_left(const cursor *c) { return c->g->size - c->pos; }

static toy_status need(const cursor *c, size_t n, const char *what) {
    if (cursor_left(c) < n)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: truncated at byte %zu reading %s (need %zu bytes, %zu left)",
                        c->g->path, c->pos, what, n, cursor_left(c));
    return TOY_OK;
}

static toy_status read_raw(cursor *c, void *dst, size_t n, const char *what) {
    toy_status st = need(c, n, what);
    if (st) return st;
    memcpy(dst, c->g->base + c->pos, n);
    c->pos += n;
    return TOY_OK;
}

static toy_status read_u32(cursor *c, uint32_t *v, const char *what) {
    return read_raw(c, v, sizeof *v, what);
}

static toy_status read_u64(cursor *c, uint64_t *v, const char *what) {
    return read_raw(c, v, sizeof *v, what);
}

/* A length-prefixed string, left in place. */
static toy_status read_str(cursor *c, const char **ptr, uint64_t *len, const char *what) {
    size_t at = c->pos;
    toy_status st = read_u64(c, len, what);
    if (st) return st;
    if (*len > cursor_left(c))
        return ty_error(TOY_ERR_FORMAT,
                        "%s: %s at byte %zu has length %llu but only %zu bytes are left",
                        c->g->path, what, at, (unsigned long long)*len, cursor_left(c));
    *ptr = (const char *)c->g->base + c->pos;
    c->pos += (size_t)*len;
    return TOY_OK;
}

/* ---------------------------------------------------------------- values */

static void value_free(toy_gguf_value *v) {
    if (v->type != TOY_GGUF_ARRAY || !v->arr.items) return;
    for (uint64_t j = 0; j < v->arr.n; j++) value_free(&v->arr.items[j]);
    free(v->arr.items);
}

/* A number or bool of the given type from its bytes in the file (of value_types' size,
 * unaligned); sets the member of v that the type reads. */
static void decode_scalar(toy_gguf_type type, const uint8_t *p, toy_gguf_value *v) {
    switch (type) {
    case TOY_GGUF_UINT8: v->u64 = p[0]; break;
    case TOY_GGUF_INT8: v->i64 = (int8_t)p[0]; break;
    case TOY_GGUF_BOOL: v->b = p[0] != 0; break;
    case TOY_GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); v->u64 = x; break; }
    case TOY_GGUF_INT16: { int16_t x; memcpy(&x, p, 2); v->i64 = x; break; }
    case TOY_GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); v->u64 = x; break; }
    case TOY_GGUF_INT32: { int32_t x; memcpy(&x, p, 4); v->i64 = x; break; }
    case TOY_GGUF_FLOAT32: { float x; memcpy(&x, p, 4); v->f64 = x; break; }
    case TOY_GGUF_UINT64: memcpy(&v->u64, p, 8); break;
    case TOY_GGUF_INT64: memcpy(&v->i64, p, 8); break;
    case TOY_GGUF_FLOAT64: memcpy(&v->f64, p, 8); break;
    default: break;
    }
}

static toy_status read_value(cursor *c, toy_gguf_type type, toy_gguf_value *v, const char *key,
                             int depth) {
    memset(v, 0, sizeof *v);
    v->type = type;
    if ((unsigned)type >= TOY_GGUF_TYPE_COUNT)
        return ty_error(TOY_ERR_FORMAT, "%s: key '%s' has unknown value type %u at byte %zu",
                        c->g->path, key, (unsigned)type, c->pos);
    if (is_scalar(type)) {
        uint8_t buf[8];
        toy_status st = read_raw(c, buf, value_types[type].size, key);
        if (!st) decode_scalar(type, buf, v);
        return st;
    }
    if (type == TOY_GGUF_STRING) return read_str(c, &v->str.ptr, &v->str.len, key);

    /* an array */
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return ty_error(TOY_ERR_FORMAT, "%s: key '%s' nests arrays deeper than %d at byte %zu",
                        c->g->path, key, GGUF_MAX_ARRAY_DEPTH, c->pos);
    uint32_t elem;
    size_t at = c->pos;
    toy_status st = read_u32(c, &elem, key);
    if (st) return st;
    if (elem >= TOY_GGUF_TYPE_COUNT)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: key '%s' is an array of unknown type %u at byte %zu",
                        c->g->path, key, elem, at);
    v->arr.type = (toy_gguf_type)elem;
    at = c->pos;
    if ((st = read_u64(c, &v->arr.n, key))) return st;
    /* Every element takes at least this many bytes, which bounds n before any
     * allocation. */
    if (v->arr.n > cursor_left(c) / value_types[elem].size)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: key '%s' at byte %zu claims %llu elements of type %s, more than "
                        "the %zu bytes left can hold",
                        c->g->path, key, at, (unsigned long long)v->arr.n,
                        value_types[elem].name, cursor_left(c));
    if (is_scalar(v->arr.type)) {
        v->arr.raw = c->g->base + c->pos;
        c->pos += (size_t)v->arr.n * value_types[elem].size;
        return TOY_OK;
    }
    v->arr.items = calloc(v->arr.n ? v->arr.n : 1, sizeof *v->arr.items);
    if (!v->arr.items)
        return ty_error(TOY_ERR_NOMEM, "%s: key '%s': no memory for %llu elements", c->g->path,
                        key, (unsigned long long)v->arr.n);
    for (uint64_t j = 0; j < v->arr.n; j++) {
        st = read_value(c, v->arr.type, &v->arr.items[j], key, depth + 1);
        if (st) return st;
    }
    return TOY_OK;
}

/* ---------------------------------------------------------------- sorted lookup */

typedef struct {
    const char *name;
    int64_t index;
} named_index;

static int cmp_named(const void *a, const void *b) {
    return strcmp(((const named_index *)a)->name, ((const named_index *)b)->name);
}

/* Indices of `names` in name order, so lookups are binary searches and duplicates are
 * neighbours. Fails with `what` and the duplicated name if two names are equal. */
static toy_status sort_names(const toy_gguf *g, const char *const *names, size_t stride,
                             int64_t n, const char *what, int64_t **out) {
    named_index *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    if (!tmp || !*out) {
        free(tmp);
        return ty_error(TOY_ERR_NOMEM, "%s: no memory", g->path);
    }
    for (int64_t i = 0; i < n; i++) {
        tmp[i].name = *(const char *const *)((const char *)names + (size_t)i * stride);
        tmp[i].index = i;
    }
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_named);
    toy_status st = TOY_OK;
    for (int64_t i = 0; i < n; i++) {
        (*out)[i] = tmp[i].index;
        if (!st && i > 0 && strcmp(tmp[i - 1].name, tmp[i].name) == 0)
            st = ty_error(TOY_ERR_FORMAT, "%s: duplicate %s '%s'", g->path, what, tmp[i].name);
    }
    free(tmp);
    return st;
}

typedef struct {
    uint64_t offset;
    int64_t index;
} offset_index;

static int cmp_offset(const void *a, const void *b) {
    uint64_t x = ((const offset_index *)a)->offset, y = ((const offset_index *)b)->offset;
    return (x > y) - (x < y);
}

static int64_t find_sorted(const char *const *names, size_t stride, const int64_t *sorted,
                           int64_t n, const char *name) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const char *m = *(const char *const *)((const char *)names + (size_t)sorted[mid] * stride);
        int c = strcmp(m, name);
        if (c == 0) return sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* ---------------------------------------------------------------- parsing */

static toy_status parse_header(toy_gguf *g, cursor *c, uint64_t *n_tensors, uint64_t *n_kv) {
    char magic[4];
    toy_status st = read_raw(c, magic, 4, "the magic");
    if (st) return st;
    if (memcmp(magic, "GGUF", 4) != 0)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: bad magic %02x %02x %02x %02x at byte 0 (not a GGUF file)",
                        g->path, (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2],
                        (uint8_t)magic[3]);
    if ((st = read_u32(c, &g->version, "the version"))) return st;
    if (g->version != 2 && g->version != 3) {
        if (g->version != 0 && (g->version & 0xffff) == 0)
            return ty_error(TOY_ERR_UNSUPPORTED,
                            "%s: version field 0x%08x at byte 4 looks byte-swapped: "
                            "big-endian GGUF files are not supported",
                            g->path, g->version);
        return ty_error(TOY_ERR_UNSUPPORTED,
                        "%s: GGUF version %u at byte 4 is not supported (only 2 and 3)",
                        g->path, g->version);
    }
    if ((st = read_u64(c, n_tensors, "the tensor count"))) return st;
    if ((st = read_u64(c, n_kv, "the metadata count"))) return st;
    /* The smallest key-value pair is 13 bytes (length, empty key, type, one byte) and
     * the smallest tensor info 24; counts beyond that cannot be right. */
    if (*n_kv > cursor_left(c) / 13)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: metadata count %llu at byte 16 is more than the file can hold",
                        g->path, (unsigned long long)*n_kv);
    if (*n_tensors > cursor_left(c) / 24)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: tensor count %llu at byte 8 is more than the file can hold",
                        g->path, (unsigned long long)*n_tensors);
    return TOY_OK;
}

static toy_status parse_kv(toy_gguf *g, cursor *c, uint64_t n_kv) {
    g->keys = calloc(n_kv ? n_kv : 1, sizeof *g->keys);
    g->values = calloc(n_kv ? n_kv : 1, sizeof *g->values);
    if (!g->keys || !g->values) return ty_error(TOY_ERR_NOMEM, "%s: no memory for metadata", g->path);
    for (uint64_t i = 0; i < n_kv; i++) {
        const char *kp;
        uint64_t klen;
        size_t at = c->pos;
        toy_status st = read_str(c, &kp, &klen, "a metadata key");
        if (st) return st;
        if (memchr(kp, 0, (size_t)klen))
            return ty_error(TOY_ERR_FORMAT, "%s: metadata key at byte %zu contains a NUL byte",
                            g->path, at);
        g->keys[i] = strndup(kp, (size_t)klen);
        if (!g->keys[i]) return ty_error(TOY_ERR_NOMEM, "%s: no memory for a key", g->path);
        g->n_kv = (int64_t)i + 1;
        uint32_t type;
        if ((st = read_u32(c, &type, g->keys[i]))) return st;
        if ((st = read_value(c, (toy_gguf_type)type, &g->values[i], g->keys[i], 0))) return st;
    }
    return sort_names(g, (const char *const *)g->keys, sizeof *g->keys, g->n_kv,
                      "metadata key", &g->keys_sorted);
}

static toy_status parse_alignment(toy_gguf *g) {
    g->alignment = TOY_GGUF_DEFAULT_ALIGNMENT;
    const toy_gguf_value *v = toy_gguf_get(g, "general.alignment");
    if (!v) return TOY_OK;
    if (v->type != TOY_GGUF_UINT32)
        return ty_error(TOY_ERR_FORMAT, "%s: general.alignment has type %s, expected u32",
                        g->path, toy_gguf_type_name(v->type));
    if (v->u64 == 0 || (v->u64 & (v->u64 - 1)) != 0)
        return ty_error(TOY_ERR_FORMAT, "%s: general.alignment %llu is not a power of two",
                        g->path, (unsigned long long)v->u64);
    g->alignment = (size_t)v->u64;
    return TOY_OK;
}

static toy_status parse_tensor_info(toy_gguf *g, cursor *c, toy_gguf_tensor *t, char **name_out) {
    const char *np;
    uint64_t nlen;
    size_t at = c->pos;
    toy_status st = read_str(c, &np, &nlen, "a tensor name");
    if (st) return st;
    if (nlen >= GGUF_MAX_TENSOR_NAME)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: tensor name at byte %zu is %llu bytes long (the limit is %d): "
                        "'%.40s...'",
                        g->path, at, (unsigned long long)nlen, GGUF_MAX_TENSOR_NAME - 1, np);
    if (memchr(np, 0, (size_t)nlen))
        return ty_error(TOY_ERR_FORMAT, "%s: tensor name at byte %zu contains a NUL byte",
                        g->path, at);
    char *name = strndup(np, (size_t)nlen);
    if (!name) return ty_error(TOY_ERR_NOMEM, "%s: no memory", g->path);
    *name_out = name;
    t->name = name;

    uint32_t n_dims;
    if ((st = read_u32(c, &n_dims, name))) return st;
    if (n_dims > TOY_MAX_DIMS)
        return ty_error(TOY_ERR_FORMAT, "%s: tensor '%s' has %u dimensions (at most %d)",
                        g->path, name, n_dims, TOY_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t nelements = 1;
    for (int d = 0; d < TOY_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        if ((st = read_raw(c, &t->ne[d], sizeof t->ne[d], name))) return st;
        if (t->ne[d] < 0)
            return ty_error(TOY_ERR_FORMAT, "%s: tensor '%s' has negative dimension %d: %lld",
                            g->path, name, d, (long long)t->ne[d]);
        if (__builtin_mul_overflow(nelements, t->ne[d], &nelements))
            return ty_error(TOY_ERR_FORMAT, "%s: tensor '%s': element count overflows",
                            g->path, name);
    }
    uint32_t type;
    if ((st = read_u32(c, &type, name))) return st;
    const char *tname = toy_type_name((int)type);
    if (!tname)
        return ty_error(TOY_ERR_FORMAT, "%s: tensor '%s' has unknown type %u", g->path, name,
                        type);
    t->type = (int)type;
    int64_t bs = toy_type_block_size(t->type);
    if (t->ne[0] % bs != 0)
        return ty_error(TOY_ERR_FORMAT,
                        "%s: tensor '%s': type %s needs ne[0] %% %lld == 0, got %lld", g->path,
                        name, tname, (long long)bs, (long long)t->ne[0]);
    size_t row, size = 0;
    if (toy_type_row_size(t->type, t->ne[0], &row) ||
        ty_mul_overflows(row, (size_t)(nelements / (t->ne[0] ? t->ne[0] : 1)), &size))
        return ty_error(TOY_ERR_FORMAT, "%s: tensor '%s': byte size overflows", g->path, name);
    if (t->ne[0] == 0) size = 0;
    t->size = size;
    if ((st = read_u64(c, &t->offset, name))) return st;
    return TOY_OK;
}

static toy_status parse_tensors(toy_gguf *g, cursor *c, uint64_t n_tensors) {
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return ty_error(TOY_ERR_NOMEM, "%s: no memory for tensor infos", g->path);
    for (uint64_t i = 0; i < n_tensors; i++) {
        char *name = NULL;
        toy_status st = parse_tensor_info(g, c, &g->tensors[i], &name);
        if (name) g->n_tensors = (int64_t)i + 1; /* so close() frees the name */
        if (st) return st;
    }

    /* The data section starts at the next multiple of the alignment. */
    size_t data = c->pos + (g->alignment - c->pos % g->alignment) % g->alignment;
    g->data_offset = data;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        toy_gguf_tensor *t = &g->tensors[i];
        size_t begin, end;
        if (t->offset % g->alignment != 0)
            return ty_error(TOY_ERR_FORMAT,
                            "%s: tensor '%s' has offset %llu, not a multiple of the alignment %zu",
                            g->path, t->name, (unsigned long long)t->offset, g->alignment);
        if (t->offset > SIZE_MAX || ty_add_overflows(data, (size_t)t->offset, &begin) ||
            ty_add_overflows(begin, t->size, &end) || end > g->size)
            return ty_error(TOY_ERR_FORMAT,
                            "%s: tensor '%s' data (offset %llu, %zu bytes) lies outside the "
                            "file (data section at byte %zu, file size %zu)",
                            g->path, t->name, (unsigned long long)t->offset, t->size, data,
                            g->size);
        t->data = g->base + begin;
        /* blocks are read in place as structs of halves and floats: refuse data that
         * is not aligned for them (only files with general.alignment below 8 can) */
        size_t ts = toy_type_size(t->type);
        uintptr_t need = ts % 8 == 0 ? 8 : ts % 4 == 0 ? 4 : ts % 2 == 0 ? 2 : 1;
        if ((uintptr_t)t->data % need != 0)
            return ty_error(TOY_ERR_UNSUPPORTED,
                            "%s: tensor '%s' data at byte %zu is not %zu-byte aligned, as type "
                            "%s needs (general.alignment is %zu)",
                            g->path, t->name, begin, (size_t)need, toy_type_name(t->type),
                            g->alignment);
    }

    toy_status st = sort_names(g, &g->tensors[0].name, sizeof *g->tensors, g->n_tensors,
                               "tensor name", &g->tensors_sorted);
    if (st) return st;

    /* No two tensors may share bytes: ordered by offset, each ends before the next. */
    offset_index *by_offset = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof *by_offset);
    if (!by_offset) return ty_error(TOY_ERR_NOMEM, "%s: no memory", g->path);
    int64_t n = 0;
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].size) by_offset[n++] = (offset_index){g->tensors[i].offset, i};
    qsort(by_offset, (size_t)n, sizeof *by_offset, cmp_offset);
    for (int64_t i = 1; i < n && !st; i++) {
        const toy_gguf_tensor *p = &g->tensors[by_offset[i - 1].index];
        const toy_gguf_tensor *t = &g->tensors[by_offset[i].index];
        if (p->offset + p->size > t->offset)
            st = ty_error(TOY_ERR_FORMAT,
                          "%s: tensors '%s' and '%s' overlap (offsets %llu and %llu)", g->path,
                          p->name, t->name, (unsigned long long)p->offset,
                          (unsigned long long)t->offset);
    }
    free(by_offset);
    return st;
}

static toy_status parse(toy_gguf *g) {
    cursor c = {g, 0};
    uint64_t n_tensors, n_kv;
    toy_status st = parse_header(g, &c, &n_tensors, &n_kv);
    if (!st) st = parse_kv(g, &c, n_kv);
    if (!st) st = parse_alignment(g);
    if (!st) st = parse_tensors(g, &c, n_tensors);
    return st;
}

/* ---------------------------------------------------------------- open / close */

static toy_gguf *gguf_new(const char *name) {
    toy_gguf *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->path = strdup(name ? name : "(memory)");
    if (!g->path) {
        free(g);
        return NULL;
    }
    return g;
}

/* Parses the bytes g holds into *out; on failure g is closed. */
static toy_status parse_or_close(toy_gguf *g, toy_gguf **out) {
    toy_status st = parse(g);
    if (st) {
        toy_gguf_close(g);
        return st;
    }
    *out = g;
    return TOY_OK;
}

toy_status toy_gguf_open_memory(const void *data, size_t size, const char *name, toy_gguf **out) {
    *out = NULL;
    toy_gguf *g = gguf_new(name);
    if (!g) return ty_error(TOY_ERR_NOMEM, "%s: no memory", name ? name : "(memory)");
    g->base = data;
    g->size = size;
    return parse_or_close(g, out);
}

/* Opens a non-empty regular file for reading: its descriptor and size. */
static toy_status open_file(const char *path, int *fd_out, size_t *size_out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ty_error(TOY_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ty_error(TOY_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ty_error(TOY_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return ty_error(TOY_ERR_FORMAT, "%s: the file is empty (truncated at byte 0)", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return ty_error(TOY_ERR_IO, "%s: %lld bytes do not fit in memory", path, (long long)sb.st_size);
    }
    *fd_out = fd;
    *size_out = (size_t)sb.st_size;
    return TOY_OK;
}

/* ---------------------------------------------------------------- mapped files
 * Which file each mapping holds, for toy_gguf_mapped_file in a signal handler: a fixed
 * table of the open mapped handles, changed and read with atomic operations only (a
 * handle past the table's size still works; its faults are just not named). */
enum { MAPPED_MAX = 256 };
static const toy_gguf *mapped_files[MAPPED_MAX];

static void mapped_add(const toy_gguf *g) {
    for (int i = 0; i < MAPPED_MAX; i++) {
        const toy_gguf *none = NULL;
        if (__atomic_compare_exchange_n(&mapped_files[i], &none, g, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) return;
    }
}

static void mapped_remove(const toy_gguf *g) {
    for (int i = 0; i < MAPPED_MAX; i++)
        if (__atomic_load_n(&mapped_files[i], __ATOMIC_ACQUIRE) == g) __atomic_store_n(&mapped_files[i], NULL, __ATOMIC_RELEASE);
}

const char *toy_gguf_mapped_file(const void *addr) {
    const uint8_t *p = addr;
    for (int i = 0; i < MAPPED_MAX; i++) {
        const toy_gguf *g = __atomic_load_n(&mapped_files[i], __ATOMIC_ACQUIRE);
        if (g && p >= g->base && p < g->base + g->size) return g->path;
    }
    return NULL;
}

toy_status toy_gguf_open(const char *path, toy_gguf **out) {
    *out = NULL;
    int fd;
    size_t size;
    toy_status st = open_file(path, &fd, &size);
    if (st) return st;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return ty_error(TOY_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));

    toy_gguf *g = gguf_new(path);
    if (!g) {
        munmap(map, size);
        return ty_error(TOY_ERR_NOMEM, "%s: no memory", path);
    }
    g->base = map;
    g->size = size;
    g->mapped = true;
    mapped_add(g); /* before parsing: the header is read from the mapping too */
    return parse_or_close(g, out);
}

/* The copy path: the file read into memory aligned as a map would be (64 bytes covers
 * every kernel's loads; tensor offsets keep their alignment within the file). */
toy_status toy_gguf_open_read(const char *path, toy_gguf **out) {
    *out = NULL;
    int fd;
    size_t size;
    toy_status st = open_file(path, &fd, &size);
    if (st) return st;
    void *buf = NULL;
    if (size > SIZE_MAX - 63 || posix_memalign(&buf, 64, (size + 63) & ~(size_t)63) != 0) {
        close(fd);
        return ty_error(TOY_ERR_NOMEM, "%s: no memory to read its %zu bytes (without mmap)", path, size);
    }
    for (size_t done = 0; done < size;) {
        const ssize_t n = read(fd, (char *)buf + done, size - done > (1u << 30) ? (1u << 30) : size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int e = n < 0 ? errno : 0;
            close(fd);
            free(buf);
            return ty_error(TOY_ERR_IO, "%s: read failed at byte %zu of %zu: %s", path, done, size,
                            e ? strerror(e) : "the file shrank");
        }
        done += (size_t)n;
    }
    close(fd);
    toy_gguf *g = gguf_new(path);
    if (!g) {
        free(buf);
        return ty_error(TOY_ERR_NOMEM, "%s: no memory", path);
    }
    g->base = buf;
    g->size = size;
    g->owned = true;
    return parse_or_close(g, out);
}

void toy_gguf_close(toy_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->keys[i]);
        value_free(&g->values[i]);
    }
    free(g->keys);
    free(g->values);
    free(g->keys_sorted);
    for (int64_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->tensors);
    free(g->tensors_sorted);
    if (g->mapped) {
        mapped_remove(g);
        munmap((void *)g->base, g->size);
    }
    if (g->owned) free((void *)g->base);
    free(g->path);
    free(g);
}

/* ---------------------------------------------------------------- accessors */

const char *toy_gguf_path(const toy_gguf *g) { return g->path; }
bool ty_gguf_is_mapped(const toy_gguf *g) { return g->mapped; }

void ty_gguf_drop_pages(const toy_gguf *g, const void *p, size_t n) {
    if (!g->mapped) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
uint32_t toy_gguf_version(const toy_gguf *g) { return g->version; }
size_t toy_gguf_alignment(const toy_gguf *g) { return g->alignment; }
size_t toy_gguf_file_size(const toy_gguf *g) { return g->size; }
size_t toy_gguf_data_offset(const toy_gguf *g) { return g->data_offset; }
int64_t toy_gguf_n_kv(const toy_gguf *g) { return g->n_kv; }

const char *toy_gguf_key(const toy_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? g->keys[i] : NULL;
}

const toy_gguf_value *toy_gguf_kv(const toy_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->values[i] : NULL;
}

int64_t toy_gguf_find_key(const toy_gguf *g, const char *key) {
    return find_sorted((const char *const *)g->keys, sizeof *g->keys, g->keys_sorted, g->n_kv,
                       key);
}

const toy_gguf_value *toy_gguf_get(const toy_gguf *g, const char *key) {
    return toy_gguf_kv(g, toy_gguf_find_key(g, key));
}

toy_gguf_type toy_gguf_value_type(const toy_gguf_value *v) { return v->type; }

static bool is_unsigned(toy_gguf_type t) {
    return t == TOY_GGUF_UINT8 || t == TOY_GGUF_UINT16 || t == TOY_GGUF_UINT32 ||
           t == TOY_GGUF_UINT64;
}
static bool is_signed(toy_gguf_type t) {
    return t == TOY_GGUF_INT8 || t == TOY_GGUF_INT16 || t == TOY_GGUF_INT32 ||
           t == TOY_GGUF_INT64;
}

toy_status toy_gguf_value_u64(const toy_gguf_value *v, uint64_t *out) {
    if (is_unsigned(v->type)) {
        *out = v->u64;
        return TOY_OK;
    }
    if (is_signed(v->type) && v->i64 >= 0) {
        *out = (uint64_t)v->i64;
        return TOY_OK;
    }
    return ty_error(TOY_ERR_FORMAT, "value of type %s is not a non-negative integer",
                    toy_gguf_type_name(v->type));
}

toy_status toy_gguf_value_i64(const toy_gguf_value *v, int64_t *out) {
    if (is_signed(v->type)) {
        *out = v->i64;
        return TOY_OK;
    }
    if (is_unsigned(v->type) && v->u64 <= INT64_MAX) {
        *out = (int64_t)v->u64;
        return TOY_OK;
    }
    return ty_error(TOY_ERR_FORMAT, "value of type %s is not an int64",
                    toy_gguf_type_name(v->type));
}

toy_status toy_gguf_value_f64(const toy_gguf_value *v, double *out) {
    if (v->type == TOY_GGUF_FLOAT32 || v->type == TOY_GGUF_FLOAT64) *out = v->f64;
    else if (is_signed(v->type)) *out = (double)v->i64;
    else if (is_unsigned(v->type)) *out = (double)v->u64;
    else
        return ty_error(TOY_ERR_FORMAT, "value of type %s is not a number",
                        toy_gguf_type_name(v->type));
    return TOY_OK;
}

toy_status toy_gguf_value_bool(const toy_gguf_value *v, bool *out) {
    if (v->type != TOY_GGUF_BOOL)
        return ty_error(TOY_ERR_FORMAT, "value of type %s is not a bool",
                        toy_gguf_type_name(v->type));
    *out = v->b;
    return TOY_OK;
}

toy_status toy_gguf_value_str(const toy_gguf_value *v, const char **s, size_t *len) {
    if (v->type != TOY_GGUF_STRING)
        return ty_error(TOY_ERR_FORMAT, "value of type %s is not a string",
                        toy_gguf_type_name(v->type));
    *s = v->str.ptr;
    if (len) *len = (size_t)v->str.len;
    return TOY_OK;
}

toy_gguf_type toy_gguf_array_type(const toy_gguf_value *v) {
    return v->type == TOY_GGUF_ARRAY ? v->arr.type : TOY_GGUF_TYPE_COUNT;
}

uint64_t toy_gguf_array_len(const toy_gguf_value *v) {
    return v->type == TOY_GGUF_ARRAY ? v->arr.n : 0;
}

const toy_gguf_value *toy_gguf_array_get(const toy_gguf_value *v, uint64_t j) {
    if (v->type != TOY_GGUF_ARRAY || !v->arr.items || j >= v->arr.n) return NULL;
    return &v->arr.items[j];
}

const void *toy_gguf_array_data(const toy_gguf_value *v) {
    return v->type == TOY_GGUF_ARRAY ? v->arr.raw : NULL;
}

/* Reads element j of an array of numbers or bools as a scalar value. */
static toy_status array_elem(const toy_gguf_value *v, uint64_t j, toy_gguf_value *out) {
    if (v->type != TOY_GGUF_ARRAY || !is_scalar(v->arr.type))
        return ty_error(TOY_ERR_FORMAT, "value is not an array of numbers");
    if (j >= v->arr.n)
        return ty_error(TOY_ERR_INVALID, "array index %llu out of range (%llu elements)",
                        (unsigned long long)j, (unsigned long long)v->arr.n);
    memset(out, 0, sizeof *out);
    out->type = v->arr.type;
    decode_scalar(v->arr.type, v->arr.raw + j * value_types[v->arr.type].size, out);
    return TOY_OK;
}

toy_status toy_gguf_array_u64(const toy_gguf_value *v, uint64_t j, uint64_t *out) {
    toy_gguf_value e;
    toy_status st = array_elem(v, j, &e);
    return st ? st : toy_gguf_value_u64(&e, out);
}

toy_status toy_gguf_array_i64(const toy_gguf_value *v, uint64_t j, int64_t *out) {
    toy_gguf_value e;
    toy_status st = array_elem(v, j, &e);
    return st ? st : toy_gguf_value_i64(&e, out);
}

toy_status toy_gguf_array_f64(const toy_gguf_value *v, uint64_t j, double *out) {
    toy_gguf_value e;
    toy_status st = array_elem(v, j, &e);
    return st ? st : toy_gguf_value_f64(&e, out);
}

toy_status toy_gguf_array_str(const toy_gguf_value *v, uint64_t j, const char **s, size_t *len) {
    const toy_gguf_value *e = toy_gguf_array_get(v, j);
    if (!e) return ty_error(TOY_ERR_FORMAT, "array element %llu is not a string",
                            (unsigned long long)j);
    return toy_gguf_value_str(e, s, len);
}

/* Lookups by key name, with the key in the error message. */
static toy_status get_checked(const toy_gguf *g, const char *key, const toy_gguf_value **v) {
    *v = toy_gguf_get(g, key);
    if (!*v) return ty_error(TOY_ERR_NOT_FOUND, "%s: key '%s' not found", g->path, key);
    return TOY_OK;
}

toy_status toy_gguf_get_u64(const toy_gguf *g, const char *key, uint64_t *out) {
    const toy_gguf_value *v;
    toy_status st = get_checked(g, key, &v);
    if (!st && (st = toy_gguf_value_u64(v, out))) ty_error_wrap(st, "%s: key '%s'", g->path, key);
    return st;
}

toy_status toy_gguf_get_f64(const toy_gguf *g, const char *key, double *out) {
    const toy_gguf_value *v;
    toy_status st = get_checked(g, key, &v);
    if (!st && (st = toy_gguf_value_f64(v, out))) ty_error_wrap(st, "%s: key '%s'", g->path, key);
    return st;
}

toy_status toy_gguf_get_bool(const toy_gguf *g, const char *key, bool *out) {
    const toy_gguf_value *v;
    toy_status st = get_checked(g, key, &v);
    if (!st && (st = toy_gguf_value_bool(v, out))) ty_error_wrap(st, "%s: key '%s'", g->path, key);
    return st;
}

toy_status toy_gguf_get_str(const toy_gguf *g, const char *key, const char **s, size_t *len) {
    const toy_gguf_value *v;
    toy_status st = get_checked(g, key, &v);
    if (!st && (st = toy_gguf_value_str(v, s, len)))
        ty_error_wrap(st, "%s: key '%s'", g->path, key);
    return st;
}

int64_t toy_gguf_n_tensors(const toy_gguf *g) { return g->n_tensors; }

toy_status toy_gguf_mlock(toy_gguf *g) {
    if ((g->mapped || g->owned) && mlock(g->base, g->size) != 0)
        return ty_error(TOY_ERR_IO, "%s: cannot lock %zu bytes in memory: %s (see ulimit -l)",
                        g->path, g->size, strerror(errno));
    return TOY_OK;
}

const toy_gguf_tensor *toy_gguf_tensor_at(const toy_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const toy_gguf_tensor *toy_gguf_find_tensor(const toy_gguf *g, const char *name) {
    if (!g->n_tensors) return NULL;
    int64_t i = find_sorted(&g->tensors[0].name, sizeof *g->tensors, g->tensors_sorted,
                            g->n_tensors, name);
    return i >= 0 ? &g->tensors[i] : NULL;
}

int64_t toy_tensor_nelements(const toy_gguf_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}
