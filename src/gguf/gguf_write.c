/* gguf_write.c — writing GGUF version 3 files the way llama.cpp's gguf writer does:
 * metadata in insertion order, tensor infos, zero padding to `general.alignment`
 * (32 unless set), and each tensor's data padded to the alignment.
 *
 * Values are serialised when they are set, so the writer holds bytes, not a tree. The
 * file is written to PATH.tmp.XXXXXX beside PATH and renamed over it only once it is
 * complete and synced, so a crash never leaves half a model under the real name.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "buffer.h"
#include "error.h"
#include "gguf.h"

#define GGUF_MAX_TENSOR_NAME 64

typedef struct {
    char *key;
    char *bytes; /* value type (u32) followed by the encoded value */
    size_t len;
} writer_kv;

typedef struct {
    char *name;
    int type;
    int n_dims;
    int64_t ne[TOY_MAX_DIMS];
    const void *data;
    size_t size;
    uint64_t offset;
} writer_tensor;

struct toy_gguf_writer {
    writer_kv *kvs;
    int64_t n_kv, cap_kv;
    writer_tensor *tensors;
    int64_t n_tensors, cap_tensors;

    /* while streaming */
    ty_atomic_file out;
    FILE *file; /* out.f */
    char *path; /* out.path */
    size_t alignment;
    int64_t next_tensor;
    /* ty_gguf_writer_to_memory: the file goes to a memory stream, then to *mem_data */
    void **mem_data;
    size_t *mem_size;
    char *stream_buf;
    size_t stream_len;
};

/* ---------------------------------------------------------------- byte buffers */

static void buf_u32(ty_buf *b, uint32_t v) { ty_buf_append(b, &v, 4); }
static void buf_u64(ty_buf *b, uint64_t v) { ty_buf_append(b, &v, 8); }
static void buf_str(ty_buf *b, const char *s, size_t n) {
    buf_u64(b, n);
    ty_buf_append(b, s, n);
}

/* ---------------------------------------------------------------- metadata */

toy_gguf_writer *toy_gguf_writer_new(void) { return calloc(1, sizeof(toy_gguf_writer)); }

static void writer_close_file(toy_gguf_writer *w) {
    if (w->mem_data && w->file) fclose(w->file);
    free(w->stream_buf);
    w->stream_buf = NULL;
    ty_atomic_abort(&w->out);
    w->file = NULL;
    w->path = NULL;
}

void ty_gguf_writer_to_memory(toy_gguf_writer *w, void **data, size_t *size) {
    w->mem_data = data;
    w->mem_size = size;
}

void toy_gguf_writer_free(toy_gguf_writer *w) {
    if (!w) return;
    writer_close_file(w);
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].bytes);
    }
    free(w->kvs);
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w);
}

static int64_t find_kv(const toy_gguf_writer *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kvs[i].key, key) == 0) return i;
    return -1;
}

/* Takes ownership of the buffer's bytes. */
static toy_status set_encoded(toy_gguf_writer *w, const char *key, ty_buf *b) {
    if (b->oom) {
        free(b->v);
        return ty_error(TOY_ERR_NOMEM, "gguf writer: no memory for key '%s'", key);
    }
    int64_t i = find_kv(w, key);
    if (i >= 0) {
        free(w->kvs[i].bytes);
        w->kvs[i].bytes = b->v;
        w->kvs[i].len = b->n;
        return TOY_OK;
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        writer_kv *kvs = realloc(w->kvs, (size_t)cap * sizeof *kvs);
        if (!kvs) {
            free(b->v);
            return ty_error(TOY_ERR_NOMEM, "gguf writer: no memory for key '%s'", key);
        }
        w->kvs = kvs;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(b->v);
        return ty_error(TOY_ERR_NOMEM, "gguf writer: no memory for key '%s'", key);
    }
    w->kvs[w->n_kv++] = (writer_kv){k, b->v, b->n};
    return TOY_OK;
}

static toy_status set_scalar(toy_gguf_writer *w, const char *key, toy_gguf_type type,
                             const void *v) {
    ty_buf b = {0};
    buf_u32(&b, type);
    ty_buf_append(&b, v, ty_gguf_type_size(type));
    return set_encoded(w, key, &b);
}

toy_status toy_gguf_writer_set_u8(toy_gguf_writer *w, const char *k, uint8_t v) {
    return set_scalar(w, k, TOY_GGUF_UINT8, &v);
}
toy_status toy_gguf_writer_set_i8(toy_gguf_writer *w, const char *k, int8_t v) {
    return set_scalar(w, k, TOY_GGUF_INT8, &v);
}
toy_status toy_gguf_writer_set_u16(toy_gguf_writer *w, const char *k, uint16_t v) {
    return set_scalar(w, k, TOY_GGUF_UINT16, &v);
}
toy_status toy_gguf_writer_set_i16(toy_gguf_writer *w, const char *k, int16_t v) {
    return set_scalar(w, k, TOY_GGUF_INT16, &v);
}
toy_status toy_gguf_writer_set_u32(toy_gguf_writer *w, const char *k, uint32_t v) {
    return set_scalar(w, k, TOY_GGUF_UINT32, &v);
}
toy_status toy_gguf_writer_set_i32(toy_gguf_writer *w, const char *k, int32_t v) {
    return set_scalar(w, k, TOY_GGUF_INT32, &v);
}
toy_status toy_gguf_writer_set_u64(toy_gguf_writer *w, const char *k, uint64_t v) {
    return set_scalar(w, k, TOY_GGUF_UINT64, &v);
}
toy_status toy_gguf_writer_set_i64(toy_gguf_writer *w, const char *k, int64_t v) {
    return set_scalar(w, k, TOY_GGUF_INT64, &v);
}
toy_status toy_gguf_writer_set_f32(toy_gguf_writer *w, const char *k, float v) {
    return set_scalar(w, k, TOY_GGUF_FLOAT32, &v);
}
toy_status toy_gguf_writer_set_f64(toy_gguf_writer *w, const char *k, double v) {
    return set_scalar(w, k, TOY_GGUF_FLOAT64, &v);
}
toy_status toy_gguf_writer_set_bool(toy_gguf_writer *w, const char *k, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, k, TOY_GGUF_BOOL, &b);
}

toy_status toy_gguf_writer_set_str(toy_gguf_writer *w, const char *key, const char *s,
                                   size_t len) {
    ty_buf b = {0};
    buf_u32(&b, TOY_GGUF_STRING);
    buf_str(&b, s, len);
    return set_encoded(w, key, &b);
}

toy_status toy_gguf_writer_set_array(toy_gguf_writer *w, const char *key,
                                     toy_gguf_type elem_type, const void *data, uint64_t n) {
    if (elem_type == TOY_GGUF_STRING || elem_type == TOY_GGUF_ARRAY ||
        !ty_gguf_type_size(elem_type))
        return ty_error(TOY_ERR_INVALID, "gguf writer: key '%s': bad array element type %d",
                        key, (int)elem_type);
    size_t bytes;
    if (ty_mul_overflows((size_t)n, ty_gguf_type_size(elem_type), &bytes))
        return ty_error(TOY_ERR_INVALID, "gguf writer: key '%s': array too large", key);
    ty_buf b = {0};
    buf_u32(&b, TOY_GGUF_ARRAY);
    buf_u32(&b, elem_type);
    buf_u64(&b, n);
    ty_buf_append(&b, data, bytes);
    return set_encoded(w, key, &b);
}

toy_status toy_gguf_writer_set_str_array(toy_gguf_writer *w, const char *key,
                                         const char *const *strs, const size_t *lens,
                                         uint64_t n) {
    ty_buf b = {0};
    buf_u32(&b, TOY_GGUF_ARRAY);
    buf_u32(&b, TOY_GGUF_STRING);
    buf_u64(&b, n);
    for (uint64_t i = 0; i < n; i++) buf_str(&b, strs[i], lens ? lens[i] : strlen(strs[i]));
    return set_encoded(w, key, &b);
}

/* Encodes a value read from a file (without its type tag). */
static void encode_value(ty_buf *b, const toy_gguf_value *v) {
    toy_gguf_type t = toy_gguf_value_type(v);
    switch (t) {
    case TOY_GGUF_STRING: {
        const char *s;
        size_t n;
        toy_gguf_value_str(v, &s, &n);
        buf_str(b, s, n);
        return;
    }
    case TOY_GGUF_ARRAY: {
        toy_gguf_type et = toy_gguf_array_type(v);
        uint64_t n = toy_gguf_array_len(v);
        buf_u32(b, et);
        buf_u64(b, n);
        if (et == TOY_GGUF_STRING || et == TOY_GGUF_ARRAY) {
            for (uint64_t j = 0; j < n; j++) encode_value(b, toy_gguf_array_get(v, j));
        } else {
            ty_buf_append(b, toy_gguf_array_data(v), (size_t)n * ty_gguf_type_size(et));
        }
        return;
    }
    case TOY_GGUF_BOOL: {
        bool x = false;
        toy_gguf_value_bool(v, &x);
        uint8_t u = x;
        ty_buf_append(b, &u, 1);
        return;
    }
    case TOY_GGUF_FLOAT32: {
        double d = 0;
        toy_gguf_value_f64(v, &d);
        float f = (float)d; /* exact: it was a float */
        ty_buf_append(b, &f, 4);
        return;
    }
    case TOY_GGUF_FLOAT64: {
        double d = 0;
        toy_gguf_value_f64(v, &d);
        ty_buf_append(b, &d, 8);
        return;
    }
    default: { /* integers: the low bytes of the 64-bit value, little-endian */
        int64_t i = 0;
        uint64_t u = 0;
        if (toy_gguf_value_u64(v, &u) != TOY_OK) {
            toy_gguf_value_i64(v, &i);
            u = (uint64_t)i;
        }
        ty_buf_append(b, &u, ty_gguf_type_size(t));
        return;
    }
    }
}

toy_status toy_gguf_writer_set_value(toy_gguf_writer *w, const char *key,
                                     const toy_gguf_value *v) {
    ty_buf b = {0};
    buf_u32(&b, toy_gguf_value_type(v));
    encode_value(&b, v);
    return set_encoded(w, key, &b);
}

toy_status toy_gguf_writer_remove(toy_gguf_writer *w, const char *key) {
    int64_t i = find_kv(w, key);
    if (i < 0) return ty_error(TOY_ERR_NOT_FOUND, "gguf writer: key '%s' not set", key);
    free(w->kvs[i].key);
    free(w->kvs[i].bytes);
    memmove(&w->kvs[i], &w->kvs[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kvs);
    w->n_kv--;
    return TOY_OK;
}

/* ---------------------------------------------------------------- tensors */

toy_status toy_gguf_writer_add_tensor(toy_gguf_writer *w, const char *name, toy_type type,
                                      int n_dims, const int64_t *ne, const void *data) {
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen >= GGUF_MAX_TENSOR_NAME)
        return ty_error(TOY_ERR_INVALID, "gguf writer: tensor name '%s' must be 1..%d bytes",
                        name, GGUF_MAX_TENSOR_NAME - 1);
    if (n_dims < 1 || n_dims > TOY_MAX_DIMS)
        return ty_error(TOY_ERR_INVALID, "gguf writer: tensor '%s' has %d dimensions", name,
                        n_dims);
    if (!toy_type_name(type))
        return ty_error(TOY_ERR_INVALID, "gguf writer: tensor '%s' has unknown type %d", name,
                        type);
    if (w->file)
        return ty_error(TOY_ERR_INVALID, "gguf writer: tensor '%s' added after begin", name);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return ty_error(TOY_ERR_INVALID, "gguf writer: duplicate tensor name '%s'", name);

    writer_tensor t = {.type = type, .n_dims = n_dims, .data = data};
    size_t rows = 1;
    for (int d = 0; d < TOY_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0 || (d > 0 && ty_mul_overflows(rows, (size_t)t.ne[d], &rows)))
            return ty_error(TOY_ERR_INVALID, "gguf writer: tensor '%s': bad dimension %d", name,
                            d);
    }
    size_t row;
    toy_status st = toy_type_row_size(type, t.ne[0], &row);
    if (st) return ty_error_wrap(st, "gguf writer: tensor '%s'", name);
    if (ty_mul_overflows(row, rows, &t.size))
        return ty_error(TOY_ERR_INVALID, "gguf writer: tensor '%s' is too large", name);

    if (w->n_tensors == w->cap_tensors) {
        int64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
        writer_tensor *ts = realloc(w->tensors, (size_t)cap * sizeof *ts);
        if (!ts) return ty_error(TOY_ERR_NOMEM, "gguf writer: no memory");
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    if (!(t.name = strdup(name))) return ty_error(TOY_ERR_NOMEM, "gguf writer: no memory");
    w->tensors[w->n_tensors++] = t;
    return TOY_OK;
}

/* ---------------------------------------------------------------- the file */

static size_t writer_alignment(const toy_gguf_writer *w) {
    int64_t i = find_kv(w, "general.alignment");
    if (i < 0 || w->kvs[i].len != 8) return TOY_GGUF_DEFAULT_ALIGNMENT;
    uint32_t type, v;
    memcpy(&type, w->kvs[i].bytes, 4);
    memcpy(&v, w->kvs[i].bytes + 4, 4);
    return type == TOY_GGUF_UINT32 ? v : TOY_GGUF_DEFAULT_ALIGNMENT;
}

static toy_status write_bytes(toy_gguf_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->file) != n) {
        /* bytes from a mapped file that shrank meanwhile: the kernel refuses to read them */
        const char *source = errno == EFAULT ? toy_gguf_mapped_file(p) : NULL;
        if (source)
            return ty_error(TOY_ERR_IO, "%s: write failed: %s changed while it was read (it is memory-mapped)",
                            w->path, source);
        return ty_error(TOY_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    }
    return TOY_OK;
}

static toy_status write_padding(toy_gguf_writer *w, size_t n) {
    static const uint8_t zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        toy_status st = write_bytes(w, zeros, k);
        if (st) return st;
        n -= k;
    }
    return TOY_OK;
}

static size_t pad_to(size_t x, size_t a) { return (a - x % a) % a; }

toy_status toy_gguf_writer_begin(toy_gguf_writer *w, const char *path) {
    if (w->file) return ty_error(TOY_ERR_INVALID, "%s: gguf writer already writing", path);
    w->alignment = writer_alignment(w);
    if (w->alignment == 0 || (w->alignment & (w->alignment - 1)))
        return ty_error(TOY_ERR_INVALID, "%s: general.alignment %zu is not a power of two", path,
                        w->alignment);

    /* Offsets: each tensor starts aligned, as llama.cpp's writer lays them out. */
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = offset;
        offset += w->tensors[i].size + pad_to(w->tensors[i].size, w->alignment);
    }

    ty_buf h = {0};
    ty_buf_append(&h, "GGUF", 4);
    buf_u32(&h, 3);
    buf_u64(&h, (uint64_t)w->n_tensors);
    buf_u64(&h, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        buf_str(&h, w->kvs[i].key, strlen(w->kvs[i].key));
        ty_buf_append(&h, w->kvs[i].bytes, w->kvs[i].len);
    }
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        buf_str(&h, t->name, strlen(t->name));
        buf_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) buf_u64(&h, (uint64_t)t->ne[d]);
        buf_u32(&h, (uint32_t)t->type);
        buf_u64(&h, t->offset);
    }
    if (h.oom) {
        free(h.v);
        return ty_error(TOY_ERR_NOMEM, "%s: no memory for the header", path);
    }

    toy_status st = TOY_OK;
    if (w->mem_data) {
        w->file = open_memstream(&w->stream_buf, &w->stream_len);
        w->path = (char *)path;
        if (!w->file) st = ty_error(TOY_ERR_NOMEM, "%s: no memory for the file", path);
    } else if (!(st = ty_atomic_open(&w->out, path))) {
        w->file = w->out.f;
        w->path = w->out.path;
    }
    if (st) {
        free(h.v);
        return st;
    }
    st = write_bytes(w, h.v, h.n);
    if (!st) st = write_padding(w, pad_to(h.n, w->alignment));
    free(h.v);
    w->next_tensor = 0;
    if (st) writer_close_file(w);
    return st;
}

toy_status toy_gguf_writer_write_tensor_data(toy_gguf_writer *w, const void *data, size_t size) {
    if (!w->file) return ty_error(TOY_ERR_INVALID, "gguf writer: write before begin");
    if (w->next_tensor >= w->n_tensors)
        return ty_error(TOY_ERR_INVALID, "%s: more tensor data than tensors", w->path);
    const writer_tensor *t = &w->tensors[w->next_tensor];
    if (size != t->size)
        return ty_error(TOY_ERR_INVALID, "%s: tensor '%s' needs %zu bytes, got %zu", w->path,
                        t->name, t->size, size);
    toy_status st = write_bytes(w, data, size);
    if (!st) st = write_padding(w, pad_to(size, w->alignment));
    if (st) return st;
    w->next_tensor++;
    return TOY_OK;
}

toy_status toy_gguf_writer_finish(toy_gguf_writer *w) {
    if (!w->file) return ty_error(TOY_ERR_INVALID, "gguf writer: finish before begin");
    if (w->next_tensor != w->n_tensors) {
        toy_status st = ty_error(TOY_ERR_INVALID, "%s: only %lld of %lld tensors written",
                                 w->path, (long long)w->next_tensor, (long long)w->n_tensors);
        writer_close_file(w);
        return st;
    }
    if (w->mem_data) { /* the stream's bytes, copied to memory aligned for any tensor */
        toy_status st = fclose(w->file) ? ty_error(TOY_ERR_NOMEM, "%s: no memory for the file", w->path) : TOY_OK;
        w->file = NULL;
        void *data = st ? NULL : aligned_alloc(64, (w->stream_len + 63) / 64 * 64 + 64);
        if (!st && !data) st = ty_error(TOY_ERR_NOMEM, "%s: no memory for %zu bytes", w->path, w->stream_len);
        if (!st) {
            memcpy(data, w->stream_buf, w->stream_len);
            *w->mem_data = data;
            *w->mem_size = w->stream_len;
        }
        writer_close_file(w);
        return st;
    }
    toy_status st = ty_atomic_commit(&w->out);
    w->file = NULL;
    w->path = NULL;
    return st;
}

toy_status toy_gguf_writer_write(toy_gguf_writer *w, const char *path) {
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (!w->tensors[i].data && w->tensors[i].size)
            return ty_error(TOY_ERR_INVALID, "%s: tensor '%s' has no data", path,
                            w->tensors[i].name);
    toy_status st = toy_gguf_writer_begin(w, path);
    for (int64_t i = 0; i < w->n_tensors && !st; i++)
        st = toy_gguf_writer_write_tensor_data(w, w->tensors[i].data, w->tensors[i].size);
    if (st) {
        writer_close_file(w);
        return st;
    }
    return toy_gguf_writer_finish(w);
}
