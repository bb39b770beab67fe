/* test_gguf_malformed.c — the GGUF reader against a valid file built byte by byte,
 * every malformed variant of it we could think of, and the writer's round trip.
 *
 * Every malformed input must be refused by both toy_gguf_open_memory and toy_gguf_open
 * with a one-line message that names the file (and the key or tensor at fault), never a
 * crash, an over-read (the buffers are exactly the file's size, so ASan sees one) or a
 * huge allocation driven by a count or length read from the file.
 *
 * Modes:
 *   test_gguf_malformed                       run the tests
 *   test_gguf_malformed DIR                   write the malformed files into DIR (for
 *   test_gguf_malformed --write-malformed DIR   tests/cli/cli_malformed.sh) and exit
 *   test_gguf_malformed --write-seeds DIR     write the fuzz seed corpus into DIR
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "toy.h"

/* ---------------------------------------------------------------- byte builder */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            fprintf(stderr, "test_gguf_malformed: out of memory\n");
            exit(2);
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u8(bytes *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(bytes *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}
static void put_u32(bytes *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 4);
}
static void put_u64(bytes *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 8);
}
static void put_f32(bytes *b, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    put_u32(b, u);
}
static void put_f64(bytes *b, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    put_u64(b, u);
}
static void put_zeros(bytes *b, size_t n) {
    static const uint8_t z[64];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        put(b, z, k);
        n -= k;
    }
}
static void put_strn(bytes *b, const char *s, size_t n) {
    put_u64(b, n);
    put(b, s, n);
}
static void put_str(bytes *b, const char *s) { put_strn(b, s, strlen(s)); }
static void put_key(bytes *b, const char *key, uint32_t type) {
    put_str(b, key);
    put_u32(b, type);
}

/* IEEE binary16 bits of a small integer (|k| < 2048), exact. */
static uint16_t half_of_int(int k) {
    uint16_t sign = k < 0 ? 0x8000 : 0;
    unsigned a = (unsigned)(k < 0 ? -k : k);
    if (a == 0) return sign;
    int e = 0;
    while ((a >> (e + 1)) != 0) e++;
    uint16_t mant = (uint16_t)((a << (10 - e)) & 0x3FF);
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | mant);
}

/* ---------------------------------------------------------------- the file model */

#define MAX_T 8

typedef struct {
    char name[256];
    size_t name_len;
    uint32_t n_dims;
    int64_t ne[6];
    uint32_t type;
    bool set_offset;
    uint64_t offset;
    size_t data_size; /* bytes this tensor occupies in the built data section */
} tspec;

enum { ALIGN_NONE, ALIGN_U32, ALIGN_U64, ALIGN_STR };

typedef struct {
    uint8_t magic[4];
    uint32_t version;
    bool set_n_kv, set_n_tensors;
    uint64_t n_kv, n_tensors;
    bool base_kvs;
    int align_kind;
    uint64_t align_value;
    size_t layout_alignment; /* padding actually used in the file */
    bytes extra;             /* more encoded key/value pairs, after the others */
    uint64_t n_extra;
    tspec t[MAX_T];
    int n_t;
} gspec;

typedef struct {
    bytes b;
    size_t data_start;
    uint64_t offset[MAX_T]; /* where each tensor's data really is */
} built;

enum { N_BASE_KV = 19 };

static const char *const base_keys[N_BASE_KV] = {
    "general.architecture", "test.u8",       "test.i8",       "test.u16",
    "test.i16",             "test.u32",      "test.i32",      "test.f32",
    "test.bool",            "test.str",      "test.u64",      "test.i64",
    "test.f64",             "test.arr_i16",  "test.arr_f32",  "test.arr_bool",
    "test.arr_str",         "test.arr_empty", "test.nested",
};
static const char test_str[] = "hello\0world"; /* a NUL inside: values are bytes */
#define TEST_STR_LEN 11
#define TEST_U64 0x8000000000000005ULL
#define TEST_I64 (-(INT64_C(1) << 62) - 3)

static void put_base_kvs(bytes *b) {
    put_key(b, "general.architecture", TOY_GGUF_STRING);
    put_str(b, "toy");
    put_key(b, "test.u8", TOY_GGUF_UINT8);
    put_u8(b, 200);
    put_key(b, "test.i8", TOY_GGUF_INT8);
    put_u8(b, (uint8_t)(int8_t)-100);
    put_key(b, "test.u16", TOY_GGUF_UINT16);
    put_u16(b, 60000);
    put_key(b, "test.i16", TOY_GGUF_INT16);
    put_u16(b, (uint16_t)(int16_t)-30000);
    put_key(b, "test.u32", TOY_GGUF_UINT32);
    put_u32(b, 4000000000u);
    put_key(b, "test.i32", TOY_GGUF_INT32);
    put_u32(b, (uint32_t)(int32_t)-2000000000);
    put_key(b, "test.f32", TOY_GGUF_FLOAT32);
    put_f32(b, 1.5f);
    put_key(b, "test.bool", TOY_GGUF_BOOL);
    put_u8(b, 1);
    put_key(b, "test.str", TOY_GGUF_STRING);
    put_strn(b, test_str, TEST_STR_LEN);
    put_key(b, "test.u64", TOY_GGUF_UINT64);
    put_u64(b, TEST_U64);
    put_key(b, "test.i64", TOY_GGUF_INT64);
    put_u64(b, (uint64_t)TEST_I64);
    put_key(b, "test.f64", TOY_GGUF_FLOAT64);
    put_f64(b, -2.75);
    put_key(b, "test.arr_i16", TOY_GGUF_ARRAY);
    put_u32(b, TOY_GGUF_INT16);
    put_u64(b, 3);
    put_u16(b, (uint16_t)(int16_t)-1);
    put_u16(b, 2);
    put_u16(b, (uint16_t)(int16_t)-3);
    put_key(b, "test.arr_f32", TOY_GGUF_ARRAY);
    put_u32(b, TOY_GGUF_FLOAT32);
    put_u64(b, 2);
    put_f32(b, 0.5f);
    put_f32(b, -2.0f);
    put_key(b, "test.arr_bool", TOY_GGUF_ARRAY);
    put_u32(b, TOY_GGUF_BOOL);
    put_u64(b, 3);
    put_u8(b, 1);
    put_u8(b, 0);
    put_u8(b, 1);
    put_key(b, "test.arr_str", TOY_GGUF_ARRAY);
    put_u32(b, TOY_GGUF_STRING);
    put_u64(b, 3);
    put_str(b, "a");
    put_str(b, "");
    put_str(b, "ccc");
    put_key(b, "test.arr_empty", TOY_GGUF_ARRAY);
    put_u32(b, TOY_GGUF_UINT64);
    put_u64(b, 0);
    /* [[1, -2], ["x", "yz"], [[7]]]: an array of arrays of different element types */
    put_key(b, "test.nested", TOY_GGUF_ARRAY);
    put_u32(b, TOY_GGUF_ARRAY);
    put_u64(b, 3);
    put_u32(b, TOY_GGUF_INT32);
    put_u64(b, 2);
    put_u32(b, 1);
    put_u32(b, (uint32_t)(int32_t)-2);
    put_u32(b, TOY_GGUF_STRING);
    put_u64(b, 2);
    put_str(b, "x");
    put_str(b, "yz");
    put_u32(b, TOY_GGUF_ARRAY);
    put_u64(b, 1);
    put_u32(b, TOY_GGUF_UINT8);
    put_u64(b, 1);
    put_u8(b, 7);
}

static size_t tensor_bytes(uint32_t type, uint32_t n_dims, const int64_t *ne) {
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) n *= ne[d];
    return (size_t)(n / toy_type_block_size((int)type)) * toy_type_size((int)type);
}

static void set_tensor(tspec *t, const char *name, uint32_t type, uint32_t n_dims,
                       int64_t ne0, int64_t ne1) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->name_len = strlen(name);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < 6; d++) t->ne[d] = 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->data_size = tensor_bytes(type, n_dims, t->ne);
}

static const char *const tnames[3] = {"token_embd.weight", "blk.0.attn_norm.weight",
                                      "blk.0.ffn_down.weight"};

/* The valid file: version 3, 20 keys of every value type, alignment 32 (stated),
 * F32 [4,3] at 0, F16 [16] at 64, Q8_0 [64,2] at 96 — the layout llama.cpp writes,
 * except that the last tensor ends the file (no trailing padding), so that no proper
 * prefix of it is a valid file. */
static void valid_spec(gspec *s) {
    memset(s, 0, sizeof *s);
    memcpy(s->magic, "GGUF", 4);
    s->version = 3;
    s->base_kvs = true;
    s->align_kind = ALIGN_U32;
    s->align_value = 32;
    s->layout_alignment = 32;
    s->n_t = 3;
    set_tensor(&s->t[0], tnames[0], TOY_TYPE_F32, 2, 4, 3);
    set_tensor(&s->t[1], tnames[1], TOY_TYPE_F16, 1, 16, 1);
    set_tensor(&s->t[2], tnames[2], TOY_TYPE_Q8_0, 2, 64, 2);
}

static size_t pad_to(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Deterministic contents: F32 k/4 - 1, F16 k - 8, Q8_0 d = 0.5 and qs = j - 16 + block,
 * anything else a byte pattern. */
static void fill_tensor(uint8_t *dst, const tspec *t, int index) {
    if (t->type == TOY_TYPE_F32) {
        for (size_t k = 0; k < t->data_size / 4; k++) {
            float v = (float)k * 0.25f - 1.0f;
            memcpy(dst + 4 * k, &v, 4);
        }
    } else if (t->type == TOY_TYPE_F16) {
        for (size_t k = 0; k < t->data_size / 2; k++) {
            uint16_t h = half_of_int((int)k - 8);
            dst[2 * k] = (uint8_t)h;
            dst[2 * k + 1] = (uint8_t)(h >> 8);
        }
    } else if (t->type == TOY_TYPE_Q8_0) {
        for (size_t blk = 0; blk < t->data_size / 34; blk++) {
            uint8_t *p = dst + 34 * blk;
            p[0] = 0x00; /* d = 0.5 = 0x3800 */
            p[1] = 0x38;
            for (int j = 0; j < 32; j++) p[2 + j] = (uint8_t)(int8_t)(j - 16 + (int)blk);
        }
    } else {
        for (size_t k = 0; k < t->data_size; k++)
            dst[k] = (uint8_t)(k * 37 + (size_t)index * 11 + 5);
    }
}

static void build(const gspec *s, built *out) {
    memset(out, 0, sizeof *out);
    bytes *b = &out->b;
    uint64_t n_kv = (s->base_kvs ? N_BASE_KV : 0) + (s->align_kind != ALIGN_NONE) + s->n_extra;
    put(b, s->magic, 4);
    put_u32(b, s->version);
    put_u64(b, s->set_n_tensors ? s->n_tensors : (uint64_t)s->n_t);
    put_u64(b, s->set_n_kv ? s->n_kv : n_kv);
    if (s->base_kvs) put_base_kvs(b);
    switch (s->align_kind) {
    case ALIGN_U32:
        put_key(b, "general.alignment", TOY_GGUF_UINT32);
        put_u32(b, (uint32_t)s->align_value);
        break;
    case ALIGN_U64:
        put_key(b, "general.alignment", TOY_GGUF_UINT64);
        put_u64(b, s->align_value);
        break;
    case ALIGN_STR:
        put_key(b, "general.alignment", TOY_GGUF_STRING);
        put_str(b, "32");
        break;
    default: break;
    }
    put(b, s->extra.p, s->extra.n);

    uint64_t natural = 0;
    for (int i = 0; i < s->n_t; i++) {
        const tspec *t = &s->t[i];
        out->offset[i] = natural;
        natural = pad_to(natural + t->data_size, s->layout_alignment);
        put_strn(b, t->name, t->name_len);
        put_u32(b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < 6; d++) put_u64(b, (uint64_t)t->ne[d]);
        put_u32(b, t->type);
        put_u64(b, t->set_offset ? t->offset : out->offset[i]);
    }
    put_zeros(b, pad_to(b->n, s->layout_alignment) - b->n);
    out->data_start = b->n;
    for (int i = 0; i < s->n_t; i++) {
        const tspec *t = &s->t[i];
        put_zeros(b, out->data_start + out->offset[i] - b->n);
        uint8_t *tmp = calloc(1, t->data_size + 1);
        fill_tensor(tmp, t, i);
        put(b, tmp, t->data_size);
        free(tmp);
    }
}

static void built_free(built *x) { free(x->b.p); }

/* ---------------------------------------------------------------- the malformed variants */

enum kind {
    K_MAGIC,       /* a: the four magic bytes, little-endian */
    K_VERSION,     /* a */
    K_N_KV,        /* a */
    K_N_TENSORS,   /* a */
    K_KEY_LEN,     /* an extra key whose length field is a */
    K_STR_LEN,     /* "bad.str": STRING whose length field is a */
    K_ARR_COUNT,   /* "bad.arr": ARRAY of element type a, count b */
    K_NESTED,      /* "deep": arrays nested a + 1 levels */
    K_VALUE_TYPE,  /* "bad.type": value type a */
    K_ARR_TYPE,    /* "bad.arrtype": ARRAY of element type a */
    K_DUP_KEY,     /* "test.u32" a second time */
    K_ALIGN,       /* general.alignment of kind a, value b */
    K_KEY_NUL,     /* a key with a NUL byte inside */
    K_TTYPE,       /* tensor a: type b */
    K_NDIMS,       /* tensor a: n_dims b */
    K_NE,          /* tensor a: ne[b] = c */
    K_NE01,        /* tensor a: ne[0] = b, ne[1] = c */
    K_OFFSET,      /* tensor a: offset b */
    K_TNAME_LEN,   /* tensor a: a name of b 'x's */
    K_TNAME_DUP,   /* tensor a: the name of tensor b */
};

typedef struct {
    const char *name;
    enum kind kind;
    uint64_t a, b, c;
    const char *must;  /* a key or tensor name the message must contain, or NULL */
    const char *words; /* '|'-separated alternatives, case-insensitive, one must appear */
    bool huge;         /* a count or length that must not become an allocation */
} variant;

#define W_KEYLEN "key|string|length|truncat|end|large|size|exceed|long"
#define W_COUNT "truncat|end|large|many|exceed|count|too|size"
#define W_TYPE "type"
#define W_DUP "duplicate|twice|again|already|more than once|repeat"
#define W_PAST "offset|end|past|beyond|bound|truncat|size|exceed|outside|overflow"
#define W_SHAPE "ne|dim|negative|shape|size|element|overflow|large"

static const variant variants[] = {
    {"magic-GGML", K_MAGIC, 0x4C4D4747u, 0, 0, NULL, "magic|gguf", false},
    {"magic-zero", K_MAGIC, 0, 0, 0, NULL, "magic|gguf", false},
    {"magic-lowercase", K_MAGIC, 0x66756767u, 0, 0, NULL, "magic|gguf", false},
    {"version-0", K_VERSION, 0, 0, 0, NULL, "version", false},
    {"version-1", K_VERSION, 1, 0, 0, NULL, "version", false},
    {"version-4", K_VERSION, 4, 0, 0, NULL, "version", false},
    {"version-3-big-endian", K_VERSION, 0x03000000u, 0, 0, NULL, "version|endian", false},
    {"version-max", K_VERSION, 0xFFFFFFFFu, 0, 0, NULL, "version", false},
    {"n_kv-2e28", K_N_KV, 1ULL << 28, 0, 0, NULL, "kv|key|metadata|" W_COUNT, true},
    {"n_kv-2e62", K_N_KV, 1ULL << 62, 0, 0, NULL, "kv|key|metadata|" W_COUNT, true},
    {"n_kv-2e63+1", K_N_KV, (1ULL << 63) + 1, 0, 0, NULL, "kv|key|metadata|" W_COUNT, true},
    {"n_kv-max", K_N_KV, UINT64_MAX, 0, 0, NULL, "kv|key|metadata|" W_COUNT, true},
    {"n_tensors-2e28", K_N_TENSORS, 1ULL << 28, 0, 0, NULL, "tensor|" W_COUNT, true},
    {"n_tensors-2e62", K_N_TENSORS, 1ULL << 62, 0, 0, NULL, "tensor|" W_COUNT, true},
    {"n_tensors-2e63+1", K_N_TENSORS, (1ULL << 63) + 1, 0, 0, NULL, "tensor|" W_COUNT, true},
    {"n_tensors-max", K_N_TENSORS, UINT64_MAX, 0, 0, NULL, "tensor|" W_COUNT, true},
    {"key-len-2e62", K_KEY_LEN, 1ULL << 62, 0, 0, NULL, W_KEYLEN, true},
    {"key-len-max", K_KEY_LEN, UINT64_MAX, 0, 0, NULL, W_KEYLEN, true},
    {"str-len-2e62", K_STR_LEN, 1ULL << 62, 0, 0, "bad.str", NULL, true},
    {"str-len-max", K_STR_LEN, UINT64_MAX, 0, 0, "bad.str", NULL, true},
    {"arr-u32-count-2e62", K_ARR_COUNT, TOY_GGUF_UINT32, 1ULL << 62, 0, "bad.arr", NULL, true},
    /* 2^61 eight-byte elements: the byte count wraps to 0 */
    {"arr-u64-count-2e61", K_ARR_COUNT, TOY_GGUF_UINT64, 1ULL << 61, 0, "bad.arr", NULL, true},
    {"arr-u8-count-max", K_ARR_COUNT, TOY_GGUF_UINT8, UINT64_MAX, 0, "bad.arr", NULL, true},
    {"arr-str-count-2e62", K_ARR_COUNT, TOY_GGUF_STRING, 1ULL << 62, 0, "bad.arr", NULL, true},
    {"arr-arr-count-max", K_ARR_COUNT, TOY_GGUF_ARRAY, UINT64_MAX, 0, "bad.arr", NULL, true},
    {"nested-1000", K_NESTED, 1000, 0, 0, "deep", NULL, false},
    {"nested-200000", K_NESTED, 200000, 0, 0, "deep", NULL, false},
    {"value-type-13", K_VALUE_TYPE, 13, 0, 0, "bad.type", W_TYPE, false},
    {"value-type-max", K_VALUE_TYPE, 0xFFFFFFFFu, 0, 0, "bad.type", W_TYPE, false},
    {"arr-type-13", K_ARR_TYPE, 13, 0, 0, "bad.arrtype", W_TYPE, false},
    {"arr-type-max", K_ARR_TYPE, 0xFFFFFFFFu, 0, 0, "bad.arrtype", W_TYPE, false},
    {"dup-key", K_DUP_KEY, 0, 0, 0, "test.u32", W_DUP, false},
    {"alignment-0", K_ALIGN, ALIGN_U32, 0, 0, "alignment", NULL, false},
    {"alignment-3", K_ALIGN, ALIGN_U32, 3, 0, "alignment", NULL, false},
    {"alignment-string", K_ALIGN, ALIGN_STR, 0, 0, "alignment", NULL, false},
    /* llama.cpp reads general.alignment with gguf_get_val_u32, which requires UINT32 */
    {"alignment-u64", K_ALIGN, ALIGN_U64, 32, 0, "alignment", NULL, false},
    {"key-nul", K_KEY_NUL, 0, 0, 0, NULL, "key|nul|bad", false},
    {"ttype-4-removed-q4_2", K_TTYPE, 1, 4, 0, "blk.0.attn_norm.weight", W_TYPE, false},
    {"ttype-5-removed-q4_3", K_TTYPE, 1, 5, 0, "blk.0.attn_norm.weight", W_TYPE, false},
    {"ttype-31-removed-q4_0_4_4", K_TTYPE, 1, 31, 0, "blk.0.attn_norm.weight", W_TYPE, false},
    {"ttype-33-removed-q4_0_8_8", K_TTYPE, 1, 33, 0, "blk.0.attn_norm.weight", W_TYPE, false},
    {"ttype-36-removed-iq4_nl_4_4", K_TTYPE, 1, 36, 0, "blk.0.attn_norm.weight", W_TYPE, false},
    {"ttype-40", K_TTYPE, 1, 40, 0, "blk.0.attn_norm.weight", W_TYPE, false},
    {"ttype-1000", K_TTYPE, 1, 1000, 0, "blk.0.attn_norm.weight", W_TYPE, false},
    {"ttype-max", K_TTYPE, 1, 0xFFFFFFFFu, 0, "blk.0.attn_norm.weight", W_TYPE, false},
    {"ndims-5", K_NDIMS, 0, 5, 0, "token_embd.weight", "dim", false},
    {"ndims-max", K_NDIMS, 0, 0xFFFFFFFFu, 0, "token_embd.weight", "dim", false},
    {"ne0-negative", K_NE, 0, 0, (uint64_t)-4, "token_embd.weight", W_SHAPE, false},
    {"ne1-negative", K_NE, 0, 1, (uint64_t)-3, "token_embd.weight", W_SHAPE, false},
    {"ne-product-overflow", K_NE01, 0, 1ULL << 32, 1ULL << 32, "token_embd.weight", W_SHAPE,
     true},
    {"ne-int64-max", K_NE01, 0, (uint64_t)INT64_MAX, 2, "token_embd.weight", W_SHAPE, true},
    /* 2^62 F32 elements fit int64, their 2^64 bytes do not fit size_t */
    {"ne-bytes-overflow", K_NE01, 0, 1ULL << 62, 1, "token_embd.weight", W_SHAPE, true},
    {"q8_0-ne0-33", K_NE01, 2, 33, 2, "blk.0.ffn_down.weight",
     "block|32|multiple|ne0|ne[0]|divisib|row", false},
    {"offset-misaligned", K_OFFSET, 1, 48, 0, "blk.0.attn_norm.weight", "align|offset", false},
    {"offset-past-eof", K_OFFSET, 2, 1ULL << 20, 0, "blk.0.ffn_down.weight", W_PAST, false},
    {"offset-size-past-eof", K_OFFSET, 2, 128, 0, "blk.0.ffn_down.weight", W_PAST, false},
    {"offset-size-overflow", K_OFFSET, 2, 0xFFFFFFFFFFFFFFE0ULL, 0, "blk.0.ffn_down.weight",
     W_PAST, false},
    {"overlap", K_OFFSET, 1, 32, 0, "blk.0.attn_norm.weight", "overlap|offset", false},
    {"dup-tensor", K_TNAME_DUP, 2, 0, 0, "token_embd.weight", W_DUP, false},
    /* llama.cpp's GGML_MAX_NAME is 64 bytes including the NUL */
    {"tname-64", K_TNAME_LEN, 0, 64, 0, NULL, "name|long", false},
    {"tname-200", K_TNAME_LEN, 0, 200, 0, NULL, "name|long", false},
};
enum { N_VARIANTS = (int)(sizeof variants / sizeof variants[0]) };

static void apply(gspec *s, const variant *v) {
    bytes *x = &s->extra;
    switch (v->kind) {
    case K_MAGIC:
        for (int i = 0; i < 4; i++) s->magic[i] = (uint8_t)(v->a >> (8 * i));
        break;
    case K_VERSION: s->version = (uint32_t)v->a; break;
    case K_N_KV:
        s->set_n_kv = true;
        s->n_kv = v->a;
        break;
    case K_N_TENSORS:
        s->set_n_tensors = true;
        s->n_tensors = v->a;
        break;
    case K_KEY_LEN:
        put_u64(x, v->a);
        put(x, "bad.key", 7);
        put_u32(x, TOY_GGUF_UINT32);
        put_u32(x, 1);
        s->n_extra++;
        break;
    case K_STR_LEN:
        put_key(x, "bad.str", TOY_GGUF_STRING);
        put_u64(x, v->a);
        put(x, "abc", 3);
        s->n_extra++;
        break;
    case K_ARR_COUNT:
        put_key(x, "bad.arr", TOY_GGUF_ARRAY);
        put_u32(x, (uint32_t)v->a);
        put_u64(x, v->b);
        put_zeros(x, 16);
        s->n_extra++;
        break;
    case K_NESTED:
        put_key(x, "deep", TOY_GGUF_ARRAY);
        for (uint64_t i = 0; i < v->a; i++) {
            put_u32(x, TOY_GGUF_ARRAY);
            put_u64(x, 1);
        }
        put_u32(x, TOY_GGUF_UINT8);
        put_u64(x, 1);
        put_u8(x, 7);
        s->n_extra++;
        break;
    case K_VALUE_TYPE:
        put_key(x, "bad.type", (uint32_t)v->a);
        put_u64(x, 0);
        s->n_extra++;
        break;
    case K_ARR_TYPE:
        put_key(x, "bad.arrtype", TOY_GGUF_ARRAY);
        put_u32(x, (uint32_t)v->a);
        put_u64(x, 1);
        put_u64(x, 0);
        s->n_extra++;
        break;
    case K_DUP_KEY:
        put_key(x, "test.u32", TOY_GGUF_UINT32);
        put_u32(x, 5);
        s->n_extra++;
        break;
    case K_ALIGN:
        s->align_kind = (int)v->a;
        s->align_value = v->b;
        break;
    case K_KEY_NUL:
        put_strn(x, "bad\0key", 7);
        put_u32(x, TOY_GGUF_UINT32);
        put_u32(x, 1);
        s->n_extra++;
        break;
    case K_TTYPE: s->t[v->a].type = (uint32_t)v->b; break;
    case K_NDIMS: s->t[v->a].n_dims = (uint32_t)v->b; break;
    case K_NE: s->t[v->a].ne[v->b] = (int64_t)v->c; break;
    case K_NE01:
        s->t[v->a].ne[0] = (int64_t)v->b;
        s->t[v->a].ne[1] = (int64_t)v->c;
        break;
    case K_OFFSET:
        s->t[v->a].set_offset = true;
        s->t[v->a].offset = v->b;
        break;
    case K_TNAME_LEN:
        memset(s->t[v->a].name, 'x', v->b);
        s->t[v->a].name[v->b] = 0;
        s->t[v->a].name_len = v->b;
        break;
    case K_TNAME_DUP:
        memcpy(s->t[v->a].name, s->t[v->b].name, sizeof s->t[v->a].name);
        s->t[v->a].name_len = s->t[v->b].name_len;
        break;
    }
}

static void build_variant(const variant *v, built *out) {
    gspec s;
    valid_spec(&s);
    apply(&s, v);
    build(&s, out);
    free(s.extra.p);
}

/* ---------------------------------------------------------------- checks */

static bool contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return true;
    }
    return n == 0;
}

static bool contains_any_ci(const char *hay, const char *words) {
    char w[64];
    const char *p = words;
    while (*p) {
        size_t n = strcspn(p, "|");
        if (n >= sizeof w) n = sizeof w - 1;
        memcpy(w, p, n);
        w[n] = 0;
        if (n && contains_ci(hay, w)) return true;
        p += n;
        if (*p == '|') p++;
    }
    return false;
}

static int quiet_after = 40;
static bool verbose; /* TOY_TEST_VERBOSE=1: print every refusal's message */ /* stop printing after this many failed expectations */

/* A failed open: not OK, not an allocation failure, and a one-line message that names
 * `who` (the file) and `must`, and contains one of `words`. */
static bool expect_refused(const char *what, toy_status st, toy_gguf *g, const char *who,
                           const char *must, const char *words) {
    const char *msg = toy_last_error();
    const char *problem = NULL;
    if (st == TOY_OK) {
        problem = "opened successfully";
        toy_gguf_close(g);
    } else if (st == TOY_ERR_NOMEM) {
        problem = "failed with TOY_ERR_NOMEM (an allocation sized from the file?)";
    } else if (!msg || !*msg) {
        problem = "empty toy_last_error()";
    } else if (strchr(msg, '\n') || strchr(msg, '\r')) {
        problem = "message is more than one line";
    } else if (!strstr(msg, who)) {
        problem = "message does not name the file";
    } else if (must && !strstr(msg, must)) {
        problem = "message does not name the key/tensor at fault";
    } else if (words && !contains_any_ci(msg, words)) {
        problem = "message has none of the expected words";
    }
    if (!problem) {
        if (verbose) printf("%-40s %s\n", what, msg);
        return true;
    }
    test_failures++;
    if (quiet_after > 0) {
        quiet_after--;
        fprintf(stderr, "FAIL %s: %s (status %s, expected%s%s%s%s): \"%s\"\n", what, problem,
                toy_status_str(st), must ? " name \"" : "", must ? must : "",
                must ? "\"" : "", words ? ", a word of the set" : "", msg ? msg : "(null)");
        if (words && problem[0] == 'm' && strstr(problem, "words"))
            fprintf(stderr, "     words: %s\n", words);
    }
    return false;
}

static char tmpdir[4096];

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static bool read_file(const char *path, bytes *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    uint8_t chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) put(out, chunk, k);
    fclose(f);
    return true;
}

/* The time of walking 2^24 items one by one on this machine, now (the fastest of three
 * tries): the yardstick of the huge counts, measured in the same run so that no machine
 * is too slow or too fast for it. A reader that walked a count of 2^28 or more item by
 * item would take 16 times this at least; a refusal takes microseconds. */
static double walk_cost_s(void) {
    static double best = -1;
    if (best >= 0) return best;
    for (int k = 0; k < 3; k++) {
        volatile uint64_t items = 0;
        const double t0 = test_now_s();
        for (uint64_t i = 0; i < (1u << 24); i++) items = items + 1;
        const double dt = test_now_s() - t0;
        if (k == 0 || dt < best) best = dt;
    }
    return best;
}

/* Outside the sanitizers (which reserve terabytes of shadow), cap the address space
 * while malformed files are read: a reader that sizes an allocation by a count from the
 * file then fails with TOY_ERR_NOMEM instead of quietly committing gigabytes. */
static void cap_address_space(bool on) {
#ifndef TEST_UNDER_ASAN
    static struct rlimit saved_as;
    if (on) {
        getrlimit(RLIMIT_AS, &saved_as);
        struct rlimit r = saved_as;
        rlim_t cap = (rlim_t)4 << 30;
        if (r.rlim_max == RLIM_INFINITY || r.rlim_max > cap) r.rlim_cur = cap;
        setrlimit(RLIMIT_AS, &r);
    } else {
        setrlimit(RLIMIT_AS, &saved_as);
    }
#else
    (void)on;
#endif
}

/* Opens `data` from an exactly-sized heap copy and from a file, expecting refusal. */
static void check_refused_both(const char *label, const uint8_t *data, size_t n,
                               const char *must, const char *words, bool huge) {
    char name[512], path[4600];
    snprintf(name, sizeof name, "mem-%s.gguf", label);
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    toy_gguf *g = NULL;
    double t0 = test_now_s();
    toy_status st = toy_gguf_open_memory(copy, n, name, &g);
    double dt = test_now_s() - t0;
    char what[600];
    snprintf(what, sizeof what, "%s (memory)", label);
    expect_refused(what, st, g, name, must, words);
    /* a reader that walks a huge count item by item takes far longer than the yardstick
     * (the fastest of three tries: a try the machine's load delayed does not count) */
    for (int t = 0; huge && t < 2 && dt >= walk_cost_s(); t++) {
        toy_gguf *again = NULL;
        t0 = test_now_s();
        if (toy_gguf_open_memory(copy, n, name, &again) == TOY_OK) toy_gguf_close(again);
        const double dt2 = test_now_s() - t0;
        if (dt2 < dt) dt = dt2;
    }
    if (huge) CHECK_MSG(dt < walk_cost_s(), "%s took %.4f s, walking 2^24 items %.4f s", what, dt, walk_cost_s());
    free(copy);

    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, label);
    if (!write_file(path, data, n)) {
        fprintf(stderr, "cannot write %s\n", path);
        test_failures++;
        return;
    }
    g = NULL;
    st = toy_gguf_open(path, &g);
    snprintf(what, sizeof what, "%s (file)", label);
    expect_refused(what, st, g, path, must, words);
    unlink(path);
}

/* ---------------------------------------------------------------- the valid file */

static void check_str(const toy_gguf_value *v, const char *want, size_t want_len) {
    const char *s = NULL;
    size_t len = 0;
    CHECK(v && toy_gguf_value_str(v, &s, &len) == TOY_OK);
    CHECK_EQ(len, want_len);
    CHECK(s && len == want_len && memcmp(s, want, want_len) == 0);
}

/* The values put_base_kvs wrote (or the writer round trip copied). */
static void check_nested(const toy_gguf_value *v) {
    CHECK(v != NULL);
    if (!v) return;
    CHECK_EQ(toy_gguf_value_type(v), TOY_GGUF_ARRAY);
    CHECK_EQ(toy_gguf_array_type(v), TOY_GGUF_ARRAY);
    CHECK_EQ(toy_gguf_array_len(v), 3);
    CHECK(toy_gguf_array_data(v) == NULL);
    const toy_gguf_value *a0 = toy_gguf_array_get(v, 0), *a1 = toy_gguf_array_get(v, 1),
                         *a2 = toy_gguf_array_get(v, 2);
    CHECK(a0 && a1 && a2);
    if (!a0 || !a1 || !a2) return;
    int64_t i = 0;
    CHECK_EQ(toy_gguf_array_type(a0), TOY_GGUF_INT32);
    CHECK_EQ(toy_gguf_array_len(a0), 2);
    CHECK(toy_gguf_array_i64(a0, 0, &i) == TOY_OK && i == 1);
    CHECK(toy_gguf_array_i64(a0, 1, &i) == TOY_OK && i == -2);
    CHECK_EQ(toy_gguf_array_type(a1), TOY_GGUF_STRING);
    CHECK_EQ(toy_gguf_array_len(a1), 2);
    const char *s = NULL;
    size_t len = 0;
    CHECK(toy_gguf_array_str(a1, 1, &s, &len) == TOY_OK && len == 2 && memcmp(s, "yz", 2) == 0);
    check_str(toy_gguf_array_get(a1, 0), "x", 1);
    CHECK_EQ(toy_gguf_array_type(a2), TOY_GGUF_ARRAY);
    CHECK_EQ(toy_gguf_array_len(a2), 1);
    const toy_gguf_value *a20 = toy_gguf_array_get(a2, 0);
    CHECK(a20 != NULL);
    uint64_t u = 0;
    if (a20) {
        CHECK_EQ(toy_gguf_array_type(a20), TOY_GGUF_UINT8);
        CHECK_EQ(toy_gguf_array_len(a20), 1);
        CHECK(toy_gguf_array_u64(a20, 0, &u) == TOY_OK && u == 7);
    }
}

static void check_valid_metadata(const toy_gguf *g) {
    CHECK_EQ(toy_gguf_n_kv(g), N_BASE_KV + 1);
    for (int i = 0; i < N_BASE_KV; i++) {
        const char *k = toy_gguf_key(g, i);
        CHECK_MSG(k && strcmp(k, base_keys[i]) == 0, "key %d is %s, want %s", i,
                  k ? k : "(null)", base_keys[i]);
        CHECK_EQ(toy_gguf_find_key(g, base_keys[i]), i);
        CHECK(toy_gguf_get(g, base_keys[i]) == toy_gguf_kv(g, i));
    }
    CHECK(toy_gguf_key(g, N_BASE_KV) && strcmp(toy_gguf_key(g, N_BASE_KV), "general.alignment") == 0);
    CHECK_EQ(toy_gguf_find_key(g, "no.such.key"), -1);
    CHECK(toy_gguf_get(g, "no.such.key") == NULL);

    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    bool b = false;
    const char *s = NULL;
    size_t len = 0;
    const toy_gguf_value *v;

    CHECK(toy_gguf_get_str(g, "general.architecture", &s, &len) == TOY_OK && len == 3 &&
          memcmp(s, "toy", 3) == 0);
    CHECK(toy_gguf_get_u64(g, "general.alignment", &u) == TOY_OK && u == 32);
    CHECK_EQ(toy_gguf_value_type(toy_gguf_get(g, "general.alignment")), TOY_GGUF_UINT32);

    v = toy_gguf_get(g, "test.u8");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_UINT8);
    CHECK(toy_gguf_value_u64(v, &u) == TOY_OK && u == 200);
    CHECK(toy_gguf_value_i64(v, &i) == TOY_OK && i == 200);
    CHECK(toy_gguf_value_f64(v, &d) == TOY_OK && d == 200.0);
    v = toy_gguf_get(g, "test.i8");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_INT8);
    CHECK(toy_gguf_value_i64(v, &i) == TOY_OK && i == -100);
    CHECK_MSG(toy_gguf_value_u64(v, &u) != TOY_OK, "-100 read as uint64 %llu",
              (unsigned long long)u);
    v = toy_gguf_get(g, "test.u16");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_UINT16);
    CHECK(toy_gguf_value_u64(v, &u) == TOY_OK && u == 60000);
    v = toy_gguf_get(g, "test.i16");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_INT16);
    CHECK(toy_gguf_value_i64(v, &i) == TOY_OK && i == -30000);
    v = toy_gguf_get(g, "test.u32");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_UINT32);
    CHECK(toy_gguf_value_u64(v, &u) == TOY_OK && u == 4000000000u);
    CHECK(toy_gguf_value_i64(v, &i) == TOY_OK && i == 4000000000LL);
    v = toy_gguf_get(g, "test.i32");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_INT32);
    CHECK(toy_gguf_value_i64(v, &i) == TOY_OK && i == -2000000000LL);
    v = toy_gguf_get(g, "test.f32");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_FLOAT32);
    CHECK(toy_gguf_value_f64(v, &d) == TOY_OK && d == 1.5);
    CHECK(toy_gguf_value_u64(v, &u) != TOY_OK);
    CHECK(toy_gguf_get_f64(g, "test.f32", &d) == TOY_OK && d == 1.5);
    v = toy_gguf_get(g, "test.bool");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_BOOL);
    CHECK(toy_gguf_value_bool(v, &b) == TOY_OK && b);
    CHECK(toy_gguf_get_bool(g, "test.bool", &b) == TOY_OK && b);
    v = toy_gguf_get(g, "test.str");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_STRING);
    check_str(v, test_str, TEST_STR_LEN);
    v = toy_gguf_get(g, "test.u64");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_UINT64);
    CHECK(toy_gguf_value_u64(v, &u) == TOY_OK && u == TEST_U64);
    CHECK_MSG(toy_gguf_value_i64(v, &i) != TOY_OK, "2^63+5 read as int64 %lld", (long long)i);
    v = toy_gguf_get(g, "test.i64");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_INT64);
    CHECK(toy_gguf_value_i64(v, &i) == TOY_OK && i == TEST_I64);
    v = toy_gguf_get(g, "test.f64");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_FLOAT64);
    CHECK(toy_gguf_value_f64(v, &d) == TOY_OK && d == -2.75);

    v = toy_gguf_get(g, "test.arr_i16");
    CHECK(v && toy_gguf_value_type(v) == TOY_GGUF_ARRAY);
    CHECK_EQ(toy_gguf_array_type(v), TOY_GGUF_INT16);
    CHECK_EQ(toy_gguf_array_len(v), 3);
    CHECK(toy_gguf_array_i64(v, 0, &i) == TOY_OK && i == -1);
    CHECK(toy_gguf_array_i64(v, 1, &i) == TOY_OK && i == 2);
    CHECK(toy_gguf_array_i64(v, 2, &i) == TOY_OK && i == -3);
    CHECK(toy_gguf_array_u64(v, 0, &u) != TOY_OK);
    CHECK(toy_gguf_array_get(v, 0) == NULL);
    const uint8_t *raw = toy_gguf_array_data(v);
    CHECK(raw && raw[0] == 0xFF && raw[1] == 0xFF && raw[2] == 2 && raw[3] == 0);
    v = toy_gguf_get(g, "test.arr_f32");
    CHECK_EQ(toy_gguf_array_type(v), TOY_GGUF_FLOAT32);
    CHECK(toy_gguf_array_f64(v, 0, &d) == TOY_OK && d == 0.5);
    CHECK(toy_gguf_array_f64(v, 1, &d) == TOY_OK && d == -2.0);
    v = toy_gguf_get(g, "test.arr_bool");
    CHECK_EQ(toy_gguf_array_type(v), TOY_GGUF_BOOL);
    CHECK_EQ(toy_gguf_array_len(v), 3);
    raw = toy_gguf_array_data(v);
    CHECK(raw && raw[0] == 1 && raw[1] == 0 && raw[2] == 1);
    v = toy_gguf_get(g, "test.arr_str");
    CHECK_EQ(toy_gguf_array_type(v), TOY_GGUF_STRING);
    CHECK_EQ(toy_gguf_array_len(v), 3);
    CHECK(toy_gguf_array_data(v) == NULL);
    CHECK(toy_gguf_array_str(v, 0, &s, &len) == TOY_OK && len == 1 && s[0] == 'a');
    CHECK(toy_gguf_array_str(v, 1, &s, &len) == TOY_OK && len == 0);
    CHECK(toy_gguf_array_str(v, 2, &s, &len) == TOY_OK && len == 3 && memcmp(s, "ccc", 3) == 0);
    check_str(toy_gguf_array_get(v, 2), "ccc", 3);
    v = toy_gguf_get(g, "test.arr_empty");
    CHECK_EQ(toy_gguf_array_type(v), TOY_GGUF_UINT64);
    CHECK_EQ(toy_gguf_array_len(v), 0);
    check_nested(toy_gguf_get(g, "test.nested"));

    /* the convenience getters name the key when its type is wrong */
    CHECK_EQ(toy_gguf_get_u64(g, "no.such.key", &u), TOY_ERR_NOT_FOUND);
    CHECK_EQ(toy_gguf_get_str(g, "test.u32", &s, &len), TOY_ERR_FORMAT);
    CHECK_STR_CONTAINS(toy_last_error(), "test.u32");
}

static void check_valid_tensors(const toy_gguf *g, const built *x, const uint8_t *base) {
    static const int64_t want_ne[3][4] = {{4, 3, 1, 1}, {16, 1, 1, 1}, {64, 2, 1, 1}};
    static const int want_dims[3] = {2, 1, 2};
    static const int want_type[3] = {TOY_TYPE_F32, TOY_TYPE_F16, TOY_TYPE_Q8_0};
    static const size_t want_size[3] = {48, 32, 136};
    static const uint64_t want_off[3] = {0, 64, 96};
    CHECK_EQ(toy_gguf_n_tensors(g), 3);
    CHECK_EQ(toy_gguf_data_offset(g), x->data_start);
    CHECK_EQ(toy_gguf_data_offset(g) % 32, 0);
    CHECK_EQ(toy_gguf_file_size(g), x->b.n);
    CHECK_EQ(toy_gguf_alignment(g), 32);
    for (int i = 0; i < 3; i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK(t->name && strcmp(t->name, tnames[i]) == 0);
        CHECK(toy_gguf_find_tensor(g, tnames[i]) == t);
        CHECK_EQ(t->type, want_type[i]);
        CHECK_EQ(t->n_dims, want_dims[i]);
        for (int d = 0; d < 4; d++) CHECK_EQ(t->ne[d], want_ne[i][d]);
        CHECK_EQ(t->offset, want_off[i]);
        CHECK_EQ(t->size, want_size[i]);
        CHECK_EQ(toy_tensor_nelements(t), want_ne[i][0] * want_ne[i][1]);
        if (base) CHECK(t->data == base + x->data_start + want_off[i]);
        CHECK(t->data && memcmp(t->data, x->b.p + x->data_start + want_off[i], want_size[i]) == 0);
    }
    CHECK(toy_gguf_find_tensor(g, "no.such.tensor") == NULL);
    /* the data is what fill_tensor wrote */
    const toy_gguf_tensor *t0 = toy_gguf_tensor_at(g, 0), *t2 = toy_gguf_tensor_at(g, 2);
    if (t0 && t0->data) {
        float f;
        memcpy(&f, (const uint8_t *)t0->data + 4 * 5, 4);
        CHECK(f == 0.25f);
    }
    if (t2 && t2->data) {
        float row[128];
        CHECK(toy_dequantize(TOY_TYPE_Q8_0, t2->data, row, 128) == TOY_OK);
        CHECK(row[0] == -8.0f);           /* 0.5 * (0 - 16) */
        CHECK(row[32 + 31] == 8.0f);      /* block 1: 0.5 * (31 - 16 + 1) */
        CHECK(row[96 + 5] == 0.5f * -8);  /* block 3: 0.5 * (5 - 16 + 3) */
    }
}

static void test_valid(void) {
    gspec s;
    valid_spec(&s);
    built x;
    build(&s, &x);

    uint8_t *copy = malloc(x.b.n);
    memcpy(copy, x.b.p, x.b.n);
    toy_gguf *g = NULL;
    toy_status st = toy_gguf_open_memory(copy, x.b.n, "valid.gguf", &g);
    CHECK_MSG(st == TOY_OK, "valid file refused: %s", toy_last_error());
    if (st == TOY_OK) {
        CHECK_EQ(toy_gguf_version(g), 3);
        const char *p = toy_gguf_path(g);
        CHECK(p && strcmp(p, "valid.gguf") == 0);
        check_valid_metadata(g);
        check_valid_tensors(g, &x, copy);
        toy_gguf_close(g);
    }
    free(copy);

    char path[4600];
    snprintf(path, sizeof path, "%s/valid.gguf", tmpdir);
    CHECK(write_file(path, x.b.p, x.b.n));
    g = NULL;
    st = toy_gguf_open(path, &g);
    CHECK_MSG(st == TOY_OK, "valid file refused: %s", toy_last_error());
    if (st == TOY_OK) {
        CHECK(toy_gguf_path(g) && strcmp(toy_gguf_path(g), path) == 0);
        check_valid_metadata(g);
        check_valid_tensors(g, &x, NULL);
        toy_gguf_close(g);
    }
    unlink(path);

    /* version 2 has the same layout */
    x.b.p[4] = 2;
    g = NULL;
    st = toy_gguf_open_memory(x.b.p, x.b.n, "valid-v2.gguf", &g);
    CHECK_MSG(st == TOY_OK, "version 2 refused: %s", toy_last_error());
    if (st == TOY_OK) {
        CHECK_EQ(toy_gguf_version(g), 2);
        toy_gguf_close(g);
    }
    built_free(&x);

    /* without general.alignment the default 32 applies */
    valid_spec(&s);
    s.align_kind = ALIGN_NONE;
    build(&s, &x);
    g = NULL;
    st = toy_gguf_open_memory(x.b.p, x.b.n, "no-alignment-key.gguf", &g);
    CHECK_MSG(st == TOY_OK, "file without general.alignment refused: %s", toy_last_error());
    if (st == TOY_OK) {
        CHECK_EQ(toy_gguf_alignment(g), TOY_GGUF_DEFAULT_ALIGNMENT);
        CHECK_EQ(toy_gguf_data_offset(g), x.data_start);
        toy_gguf_close(g);
    }
    built_free(&x);

    /* general.alignment 64 moves the data section and the offsets */
    valid_spec(&s);
    s.align_value = 64;
    s.layout_alignment = 64;
    build(&s, &x);
    g = NULL;
    st = toy_gguf_open_memory(x.b.p, x.b.n, "alignment-64.gguf", &g);
    CHECK_MSG(st == TOY_OK, "alignment 64 refused: %s", toy_last_error());
    if (st == TOY_OK) {
        CHECK_EQ(toy_gguf_alignment(g), 64);
        CHECK_EQ(toy_gguf_data_offset(g), x.data_start);
        CHECK_EQ(toy_gguf_data_offset(g) % 64, 0);
        const toy_gguf_tensor *t2 = toy_gguf_tensor_at(g, 2);
        CHECK(t2 && t2->offset == 128);
        toy_gguf_close(g);
    }
    built_free(&x);
}

/* ---------------------------------------------------------------- malformed files */

static void test_truncations(void) {
    gspec s;
    valid_spec(&s);
    built x;
    build(&s, &x);
    int before = test_failures;
    for (size_t n = 0; n < x.b.n; n++) {
        char label[64];
        snprintf(label, sizeof label, "truncated-%zu", n);
        check_refused_both(label, x.b.p, n, NULL,
                           "truncat|end|eof|short|small|beyond|past|exceed|bound|size|"
                           "overflow|incomplete|missing|offset|magic|header|empty",
                           false);
    }
    if (test_failures != before)
        fprintf(stderr, "truncation: %d of %zu prefixes x 2 failed\n", test_failures - before,
                x.b.n);
    built_free(&x);
}

static void test_variants(void) {
    for (int i = 0; i < N_VARIANTS; i++) {
        const variant *v = &variants[i];
        built x;
        build_variant(v, &x);
        check_refused_both(v->name, x.b.p, x.b.n, v->must, v->words, v->huge);
        built_free(&x);
    }
}

static void test_paths(void) {
    char path[4600];
    toy_gguf *g = NULL;
    snprintf(path, sizeof path, "%s/does-not-exist.gguf", tmpdir);
    expect_refused("nonexistent path", toy_gguf_open(path, &g), g, path, NULL, NULL);
    g = NULL;
    expect_refused("directory", toy_gguf_open(tmpdir, &g), g, tmpdir, NULL, NULL);
    snprintf(path, sizeof path, "%s/empty.gguf", tmpdir);
    CHECK(write_file(path, "", 0));
    g = NULL;
    expect_refused("empty file", toy_gguf_open(path, &g), g, path, NULL,
                   "empty|small|truncat|magic|short|size|end");
    unlink(path);
    g = NULL;
    expect_refused("empty buffer", toy_gguf_open_memory("", 0, "empty-buffer", &g), g,
                   "empty-buffer", NULL, "empty|small|truncat|magic|short|size|end");
}

/* ---------------------------------------------------------------- the writer */

typedef struct {
    float f32[12];
    uint16_t f16[16];
    uint8_t q8[136];
} writer_data;

static const char *const w_str_array[3] = {"alpha", "", "z\0z"};
static const size_t w_str_lens[3] = {5, 0, 3};

static const uint8_t a_u8[3] = {0, 128, 255};
static const int8_t a_i8[2] = {-1, 127};
static const uint16_t a_u16[2] = {1, 65535};
static const int16_t a_i16[2] = {-300, 300};
static const uint32_t a_u32[2] = {7, 4294967295u};
static const int32_t a_i32[3] = {-5, 0, 5};
static const float a_f32[2] = {0.25f, -1e20f};
static const uint8_t a_bool[4] = {1, 0, 0, 1};
static const uint64_t a_u64[1] = {1ULL << 60};
static const int64_t a_i64[2] = {INT64_MIN, INT64_MAX};
static const double a_f64[2] = {-0.5, 1e-300};

/* Every value type once; the u32 is set twice (replaced in place) and one key removed. */
static toy_gguf_writer *make_writer(const toy_gguf_value *nested, const toy_gguf_value *str,
                                    const writer_data *wd) {
    toy_gguf_writer *w = toy_gguf_writer_new();
    CHECK(w != NULL);
    if (!w) return NULL;
    toy_status st = TOY_OK;
#define W(call) (st = (st == TOY_OK ? (call) : st))
    W(toy_gguf_writer_set_u8(w, "w.u8", 250));
    W(toy_gguf_writer_set_i8(w, "w.i8", -128));
    W(toy_gguf_writer_set_u16(w, "w.u16", 65535));
    W(toy_gguf_writer_set_u32(w, "w.u32", 1));
    W(toy_gguf_writer_set_i16(w, "w.i16", -32768));
    W(toy_gguf_writer_set_i32(w, "w.i32", INT32_MIN));
    W(toy_gguf_writer_set_u64(w, "w.u64", UINT64_MAX));
    W(toy_gguf_writer_set_i64(w, "w.i64", INT64_MIN));
    W(toy_gguf_writer_set_f32(w, "w.f32", -0.125f));
    W(toy_gguf_writer_set_f64(w, "w.f64", 1e300));
    W(toy_gguf_writer_set_bool(w, "w.bool", true));
    W(toy_gguf_writer_set_str(w, "w.str", "hi\0there", 8));
    W(toy_gguf_writer_set_str(w, "w.removed", "gone", 4));
    W(toy_gguf_writer_set_u32(w, "w.u32", 3000000000u));
    W(toy_gguf_writer_set_array(w, "w.a_u8", TOY_GGUF_UINT8, a_u8, 3));
    W(toy_gguf_writer_set_array(w, "w.a_i8", TOY_GGUF_INT8, a_i8, 2));
    W(toy_gguf_writer_set_array(w, "w.a_u16", TOY_GGUF_UINT16, a_u16, 2));
    W(toy_gguf_writer_set_array(w, "w.a_i16", TOY_GGUF_INT16, a_i16, 2));
    W(toy_gguf_writer_set_array(w, "w.a_u32", TOY_GGUF_UINT32, a_u32, 2));
    W(toy_gguf_writer_set_array(w, "w.a_i32", TOY_GGUF_INT32, a_i32, 3));
    W(toy_gguf_writer_set_array(w, "w.a_f32", TOY_GGUF_FLOAT32, a_f32, 2));
    W(toy_gguf_writer_set_array(w, "w.a_bool", TOY_GGUF_BOOL, a_bool, 4));
    W(toy_gguf_writer_set_array(w, "w.a_u64", TOY_GGUF_UINT64, a_u64, 1));
    W(toy_gguf_writer_set_array(w, "w.a_i64", TOY_GGUF_INT64, a_i64, 2));
    W(toy_gguf_writer_set_array(w, "w.a_f64", TOY_GGUF_FLOAT64, a_f64, 2));
    W(toy_gguf_writer_set_array(w, "w.a_empty", TOY_GGUF_INT32, NULL, 0));
    W(toy_gguf_writer_set_str_array(w, "w.a_str", w_str_array, w_str_lens, 3));
    W(toy_gguf_writer_set_value(w, "w.nested", nested));
    W(toy_gguf_writer_set_value(w, "w.copied_str", str));
    W(toy_gguf_writer_remove(w, "w.removed"));
    const int64_t ne0[2] = {4, 3}, ne1[1] = {16}, ne2[2] = {64, 2};
    W(toy_gguf_writer_add_tensor(w, "a", TOY_TYPE_F32, 2, ne0, wd ? wd->f32 : NULL));
    W(toy_gguf_writer_add_tensor(w, "b", TOY_TYPE_F16, 1, ne1, wd ? wd->f16 : NULL));
    W(toy_gguf_writer_add_tensor(w, "c", TOY_TYPE_Q8_0, 2, ne2, wd ? wd->q8 : NULL));
#undef W
    CHECK_MSG(st == TOY_OK, "writer set-up failed: %s", toy_last_error());
    return w;
}

static const char *const w_keys[] = {
    "w.u8",    "w.i8",    "w.u16",   "w.u32",    "w.i16",   "w.i32",    "w.u64",
    "w.i64",   "w.f32",   "w.f64",   "w.bool",   "w.str",   "w.a_u8",   "w.a_i8",
    "w.a_u16", "w.a_i16", "w.a_u32", "w.a_i32",  "w.a_f32", "w.a_bool", "w.a_u64",
    "w.a_i64", "w.a_f64", "w.a_empty", "w.a_str", "w.nested", "w.copied_str",
};
enum { N_W_KEYS = (int)(sizeof w_keys / sizeof w_keys[0]) };

static void check_written(const toy_gguf *g, const writer_data *wd) {
    /* the writer may add general.alignment; it adds nothing else */
    int64_t n_kv = toy_gguf_n_kv(g);
    int64_t extra = toy_gguf_find_key(g, "general.alignment") >= 0 ? 1 : 0;
    CHECK_EQ(n_kv, N_W_KEYS + extra);
    int64_t j = 0;
    for (int64_t i = 0; i < n_kv && j < N_W_KEYS; i++) {
        const char *k = toy_gguf_key(g, i);
        if (k && strcmp(k, "general.alignment") == 0) continue;
        CHECK_MSG(k && strcmp(k, w_keys[j]) == 0, "written key %lld is %s, want %s",
                  (long long)i, k ? k : "(null)", w_keys[j]);
        j++;
    }
    CHECK_EQ(toy_gguf_find_key(g, "w.removed"), -1);

    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
#define TYPE_OF(key) toy_gguf_value_type(toy_gguf_get(g, key))
    CHECK_EQ(TYPE_OF("w.u8"), TOY_GGUF_UINT8);
    CHECK(toy_gguf_get_u64(g, "w.u8", &u) == TOY_OK && u == 250);
    CHECK_EQ(TYPE_OF("w.i8"), TOY_GGUF_INT8);
    CHECK(toy_gguf_value_i64(toy_gguf_get(g, "w.i8"), &i) == TOY_OK && i == -128);
    CHECK_EQ(TYPE_OF("w.u16"), TOY_GGUF_UINT16);
    CHECK(toy_gguf_get_u64(g, "w.u16", &u) == TOY_OK && u == 65535);
    CHECK_EQ(TYPE_OF("w.u32"), TOY_GGUF_UINT32);
    CHECK(toy_gguf_get_u64(g, "w.u32", &u) == TOY_OK && u == 3000000000u);
    CHECK_EQ(TYPE_OF("w.i16"), TOY_GGUF_INT16);
    CHECK(toy_gguf_value_i64(toy_gguf_get(g, "w.i16"), &i) == TOY_OK && i == -32768);
    CHECK_EQ(TYPE_OF("w.i32"), TOY_GGUF_INT32);
    CHECK(toy_gguf_value_i64(toy_gguf_get(g, "w.i32"), &i) == TOY_OK && i == INT32_MIN);
    CHECK_EQ(TYPE_OF("w.u64"), TOY_GGUF_UINT64);
    CHECK(toy_gguf_get_u64(g, "w.u64", &u) == TOY_OK && u == UINT64_MAX);
    CHECK_EQ(TYPE_OF("w.i64"), TOY_GGUF_INT64);
    CHECK(toy_gguf_value_i64(toy_gguf_get(g, "w.i64"), &i) == TOY_OK && i == INT64_MIN);
    CHECK_EQ(TYPE_OF("w.f32"), TOY_GGUF_FLOAT32);
    CHECK(toy_gguf_get_f64(g, "w.f32", &d) == TOY_OK && d == -0.125);
    CHECK_EQ(TYPE_OF("w.f64"), TOY_GGUF_FLOAT64);
    CHECK(toy_gguf_get_f64(g, "w.f64", &d) == TOY_OK && d == 1e300);
    CHECK_EQ(TYPE_OF("w.bool"), TOY_GGUF_BOOL);
    bool b = false;
    CHECK(toy_gguf_get_bool(g, "w.bool", &b) == TOY_OK && b);
    CHECK_EQ(TYPE_OF("w.str"), TOY_GGUF_STRING);
    check_str(toy_gguf_get(g, "w.str"), "hi\0there", 8);
    check_str(toy_gguf_get(g, "w.copied_str"), test_str, TEST_STR_LEN);
#undef TYPE_OF

    /* the host is little-endian (x86-64, aarch64), like the file */
    static const struct {
        const char *key;
        toy_gguf_type type;
        uint64_t n;
        size_t elem;
        const void *want;
    } arrays[] = {
        {"w.a_u8", TOY_GGUF_UINT8, 3, 1, a_u8},     {"w.a_i8", TOY_GGUF_INT8, 2, 1, a_i8},
        {"w.a_u16", TOY_GGUF_UINT16, 2, 2, a_u16},  {"w.a_i16", TOY_GGUF_INT16, 2, 2, a_i16},
        {"w.a_u32", TOY_GGUF_UINT32, 2, 4, a_u32},  {"w.a_i32", TOY_GGUF_INT32, 3, 4, a_i32},
        {"w.a_f32", TOY_GGUF_FLOAT32, 2, 4, a_f32}, {"w.a_bool", TOY_GGUF_BOOL, 4, 1, a_bool},
        {"w.a_u64", TOY_GGUF_UINT64, 1, 8, a_u64},  {"w.a_i64", TOY_GGUF_INT64, 2, 8, a_i64},
        {"w.a_f64", TOY_GGUF_FLOAT64, 2, 8, a_f64}, {"w.a_empty", TOY_GGUF_INT32, 0, 4, NULL},
    };
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
        const toy_gguf_value *v = toy_gguf_get(g, arrays[k].key);
        CHECK_MSG(v != NULL, "%s missing", arrays[k].key);
        if (!v) continue;
        CHECK_EQ(toy_gguf_value_type(v), TOY_GGUF_ARRAY);
        CHECK_EQ(toy_gguf_array_type(v), arrays[k].type);
        CHECK_EQ(toy_gguf_array_len(v), arrays[k].n);
        const uint8_t *raw = toy_gguf_array_data(v);
        size_t nb = (size_t)arrays[k].n * arrays[k].elem;
        if (nb)
            CHECK_MSG(raw && memcmp(raw, arrays[k].want, nb) == 0, "%s bytes differ",
                      arrays[k].key);
    }
    CHECK(toy_gguf_array_i64(toy_gguf_get(g, "w.a_i64"), 0, &i) == TOY_OK && i == INT64_MIN);
    CHECK(toy_gguf_array_u64(toy_gguf_get(g, "w.a_u32"), 1, &u) == TOY_OK && u == 4294967295u);
    CHECK(toy_gguf_array_i64(toy_gguf_get(g, "w.a_i8"), 0, &i) == TOY_OK && i == -1);
    CHECK(toy_gguf_array_f64(toy_gguf_get(g, "w.a_f64"), 0, &d) == TOY_OK && d == -0.5);
    CHECK(toy_gguf_array_f64(toy_gguf_get(g, "w.a_f64"), 1, &d) == TOY_OK && d == 1e-300);
    const toy_gguf_value *v = toy_gguf_get(g, "w.a_str");
    CHECK_EQ(toy_gguf_array_type(v), TOY_GGUF_STRING);
    CHECK_EQ(toy_gguf_array_len(v), 3);
    for (uint64_t k = 0; k < 3; k++) {
        const char *s = NULL;
        size_t len = 0;
        CHECK(toy_gguf_array_str(v, k, &s, &len) == TOY_OK && len == w_str_lens[k] &&
              memcmp(s, w_str_array[k], len) == 0);
    }
    check_nested(toy_gguf_get(g, "w.nested"));

    static const char *const names[3] = {"a", "b", "c"};
    static const int types[3] = {TOY_TYPE_F32, TOY_TYPE_F16, TOY_TYPE_Q8_0};
    static const int dims[3] = {2, 1, 2};
    static const int64_t ne[3][4] = {{4, 3, 1, 1}, {16, 1, 1, 1}, {64, 2, 1, 1}};
    const void *data[3] = {wd->f32, wd->f16, wd->q8};
    static const size_t sizes[3] = {48, 32, 136};
    CHECK_EQ(toy_gguf_n_tensors(g), 3);
    CHECK_EQ(toy_gguf_alignment(g), 32);
    CHECK_EQ(toy_gguf_data_offset(g) % 32, 0);
    for (int k = 0; k < 3; k++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, k);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK(t->name && strcmp(t->name, names[k]) == 0);
        CHECK_EQ(t->type, types[k]);
        CHECK_EQ(t->n_dims, dims[k]);
        for (int dd = 0; dd < 4; dd++) CHECK_EQ(t->ne[dd], ne[k][dd]);
        CHECK_EQ(t->size, sizes[k]);
        CHECK_EQ(t->offset % 32, 0);
        CHECK(t->data && memcmp(t->data, data[k], sizes[k]) == 0);
    }
}

/* Names in `dir` containing ".tmp." (the writer's temporary files). */
static int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static void test_writer(void) {
    /* the values to copy come from the hand-built valid file */
    gspec s;
    valid_spec(&s);
    built x;
    build(&s, &x);
    toy_gguf *src = NULL;
    if (toy_gguf_open_memory(x.b.p, x.b.n, "valid.gguf", &src) != TOY_OK) {
        fprintf(stderr, "FAIL writer: cannot open the valid file: %s\n", toy_last_error());
        test_failures++;
        built_free(&x);
        return;
    }
    const toy_gguf_value *nested = toy_gguf_get(src, "test.nested");
    const toy_gguf_value *str = toy_gguf_get(src, "test.str");

    writer_data wd;
    for (int k = 0; k < 12; k++) wd.f32[k] = (float)k * 0.5f - 2.0f;
    for (int k = 0; k < 16; k++) wd.f16[k] = half_of_int(k * 3 - 20);
    tspec q8;
    set_tensor(&q8, "c", TOY_TYPE_Q8_0, 2, 64, 2);
    fill_tensor(wd.q8, &q8, 2);

    char path1[4600], path2[4600];
    snprintf(path1, sizeof path1, "%s/written.gguf", tmpdir);
    snprintf(path2, sizeof path2, "%s/streamed.gguf", tmpdir);

    /* one shot */
    toy_gguf_writer *w = make_writer(nested, str, &wd);
    toy_status st = w ? toy_gguf_writer_write(w, path1) : TOY_ERR_INVALID;
    CHECK_MSG(st == TOY_OK, "write: %s", toy_last_error());
    toy_gguf_writer_free(w);
    toy_gguf *g = NULL;
    st = toy_gguf_open(path1, &g);
    CHECK_MSG(st == TOY_OK, "reading the written file: %s", toy_last_error());
    if (st == TOY_OK) {
        check_written(g, &wd);
        toy_gguf_close(g);
    }

    /* streamed: the same bytes */
    w = make_writer(nested, str, NULL);
    st = w ? toy_gguf_writer_begin(w, path2) : TOY_ERR_INVALID;
    CHECK_MSG(st == TOY_OK, "begin: %s", toy_last_error());
    if (st == TOY_OK) {
        CHECK(toy_gguf_writer_write_tensor_data(w, wd.f32, 48) == TOY_OK);
        CHECK(toy_gguf_writer_write_tensor_data(w, wd.f16, 32) == TOY_OK);
        CHECK(toy_gguf_writer_write_tensor_data(w, wd.q8, 136) == TOY_OK);
        CHECK_MSG(toy_gguf_writer_finish(w) == TOY_OK, "finish: %s", toy_last_error());
    }
    toy_gguf_writer_free(w);
    bytes f1, f2;
    CHECK(read_file(path1, &f1));
    CHECK(read_file(path2, &f2));
    CHECK_EQ(f1.n, f2.n);
    CHECK_MSG(f1.n == f2.n && f1.n > 0 && memcmp(f1.p, f2.p, f1.n) == 0,
              "streamed file differs from the one-shot file");
    free(f1.p);
    free(f2.p);
    unlink(path1);
    unlink(path2);
    CHECK_EQ(count_temp_files(tmpdir), 0);

    /* a directory that does not exist: a clean error naming the path */
    char bad[4600];
    snprintf(bad, sizeof bad, "%s/no-such-dir/out.gguf", tmpdir);
    w = make_writer(nested, str, &wd);
    if (w) {
        st = toy_gguf_writer_write(w, bad);
        CHECK(st != TOY_OK);
        if (st != TOY_OK) {
            CHECK_STR_CONTAINS(toy_last_error(), bad);
            CHECK(!strchr(toy_last_error(), '\n'));
        }
        st = toy_gguf_writer_begin(w, bad);
        CHECK(st != TOY_OK);
        if (st != TOY_OK) CHECK_STR_CONTAINS(toy_last_error(), bad);
        toy_gguf_writer_free(w);
    }

    /* the final rename fails (the target is a directory): the temp file goes away */
    char adir[4600];
    snprintf(adir, sizeof adir, "%s/a-directory", tmpdir);
    CHECK(mkdir(adir, 0700) == 0);
    w = make_writer(nested, str, &wd);
    if (w) {
        st = toy_gguf_writer_write(w, adir);
        CHECK(st != TOY_OK);
        if (st != TOY_OK) CHECK_STR_CONTAINS(toy_last_error(), adir);
        toy_gguf_writer_free(w);
    }
    CHECK_EQ(count_temp_files(tmpdir), 0);
    rmdir(adir);

    /* streaming with a wrong size, or stopping early, leaves neither file nor temp */
    w = make_writer(nested, str, NULL);
    if (w && toy_gguf_writer_begin(w, path2) == TOY_OK) {
        CHECK(toy_gguf_writer_write_tensor_data(w, wd.f32, 47) != TOY_OK);
    } else {
        CHECK(!"begin failed");
    }
    toy_gguf_writer_free(w);
    CHECK(access(path2, F_OK) != 0);
    CHECK_EQ(count_temp_files(tmpdir), 0);
    w = make_writer(nested, str, NULL);
    if (w && toy_gguf_writer_begin(w, path2) == TOY_OK) {
        CHECK(toy_gguf_writer_write_tensor_data(w, wd.f32, 48) == TOY_OK);
        CHECK(toy_gguf_writer_finish(w) != TOY_OK);
    } else {
        CHECK(!"begin failed");
    }
    toy_gguf_writer_free(w);
    CHECK(access(path2, F_OK) != 0);
    CHECK_EQ(count_temp_files(tmpdir), 0);

    toy_gguf_close(src);
    built_free(&x);
}

/* ---------------------------------------------------------------- file-writing modes */

static int write_malformed(const char *dir) {
    char path[4600];
    int n = 0;
    for (int i = 0; i < N_VARIANTS; i++) {
        built x;
        build_variant(&variants[i], &x);
        snprintf(path, sizeof path, "%s/%s.gguf", dir, variants[i].name);
        if (!write_file(path, x.b.p, x.b.n)) {
            fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
            built_free(&x);
            return 1;
        }
        built_free(&x);
        n++;
    }
    /* a sample of the truncations: each one costs a process start in the CLI test */
    gspec s;
    valid_spec(&s);
    built x;
    build(&s, &x);
    for (size_t len = 0; len < x.b.n; len += (len < 32 ? 1 : 29)) {
        snprintf(path, sizeof path, "%s/truncated-%zu.gguf", dir, len);
        if (!write_file(path, x.b.p, len)) return 1;
        n++;
    }
    snprintf(path, sizeof path, "%s/truncated-%zu.gguf", dir, x.b.n - 1);
    if (!write_file(path, x.b.p, x.b.n - 1)) return 1;
    built_free(&x);
    printf("wrote %d malformed files to %s\n", n + 1, dir);
    return 0;
}

static int write_seed(const char *dir, const char *name, const gspec *s) {
    char path[4600];
    built x;
    build(s, &x);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    bool ok = write_file(path, x.b.p, x.b.n);
    if (!ok) fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    built_free(&x);
    return ok ? 0 : 1;
}

/* Valid files only: the fuzzer mutates them into the malformed ones. */
static int write_seeds(const char *dir) {
    int rc = 0;
    gspec s;
    valid_spec(&s);
    rc |= write_seed(dir, "seed-valid.gguf", &s);
    s.version = 2;
    rc |= write_seed(dir, "seed-v2.gguf", &s);

    /* more weight types, general.alignment 64, a 3-d and a 4-d tensor */
    valid_spec(&s);
    s.base_kvs = false;
    s.align_value = 64;
    s.layout_alignment = 64;
    s.n_t = 6;
    set_tensor(&s.t[0], "q4_0", TOY_TYPE_Q4_0, 2, 32, 2);
    set_tensor(&s.t[1], "q4_k", TOY_TYPE_Q4_K, 1, 256, 1);
    set_tensor(&s.t[2], "q6_k", TOY_TYPE_Q6_K, 1, 256, 1);
    set_tensor(&s.t[3], "bf16", TOY_TYPE_BF16, 3, 2, 2);
    s.t[3].ne[2] = 2;
    s.t[3].data_size = 16;
    set_tensor(&s.t[4], "iq4_nl", TOY_TYPE_IQ4_NL, 4, 32, 1);
    set_tensor(&s.t[5], "scalar", TOY_TYPE_F32, 0, 1, 1);
    rc |= write_seed(dir, "seed-types-align64.gguf", &s);

    /* metadata only */
    valid_spec(&s);
    s.n_t = 0;
    rc |= write_seed(dir, "seed-metadata-only.gguf", &s);

    /* nothing at all */
    valid_spec(&s);
    s.base_kvs = false;
    s.align_kind = ALIGN_NONE;
    s.n_t = 0;
    rc |= write_seed(dir, "seed-empty.gguf", &s);
    if (!rc) printf("wrote the seed corpus to %s\n", dir);
    return rc;
}

static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        char path[4600];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(tmpdir);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) return write_seeds(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--write-malformed") == 0) return write_malformed(argv[2]);
    if (argc == 2 && argv[1][0] != '-') return write_malformed(argv[1]);
    if (argc != 1) {
        fprintf(stderr,
                "usage: %s [DIR | --write-malformed DIR | --write-seeds DIR]\n", argv[0]);
        return 2;
    }

    verbose = getenv("TOY_TEST_VERBOSE") && *getenv("TOY_TEST_VERBOSE") == '1';
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/toy-malformed-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", tmpdir, strerror(errno));
        return 1;
    }

    test_valid();
    cap_address_space(true);
    test_truncations();
    test_variants();
    test_paths();
    cap_address_space(false);
    test_writer();

    remove_tmpdir();
    return test_finish("test_gguf_malformed");
}
