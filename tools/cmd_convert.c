/* cmd_convert.c — `toy convert`: a model's tensors between llama.cpp's layout and the
 * per-head layout of toy's design (blk.N.attn_q.head_H.weight ...), the bytes of each row
 * unchanged. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"

static const char *const convert_usage =
    "usage: toy convert IN.gguf OUT.gguf --layout per-head|ggml [--no-mmap]\n"
    "\n"
    "Writes IN with its attention's Q, K and V matrices (and biases) in the other layout:\n"
    "per-head, as toy's design wrote them (one tensor per head, blk.N.attn_q.head_H.weight\n"
    "and .bias), or ggml, llama.cpp's (blk.N.attn_q.weight, its rows the heads' rows in\n"
    "order; the key toy.ggml_native set, as the design does). Rows are copied as they are,\n"
    "so every weight type converts and the logits stay the same bits.\n"
    "\n"
    "  --layout L           per-head or ggml\n"
    "  --no-mmap            read the model into memory instead of mapping it\n"
    "  -h, --help           this message\n";

/* "blk.N.attn_X." with X in q, k, v: the length of that prefix, else 0 */
static size_t qkv_prefix(const char *name) {
    int layer, len = 0;
    char x;
    if (sscanf(name, "blk.%d.attn_%c.%n", &layer, &x, &len) != 2 || !len || !strchr("qkv", x)) return 0;
    return (size_t)len;
}

typedef struct {
    void **bufs;
    int n, cap;
} buffers;

static void *keep(buffers *b, size_t size) {
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        void **p = realloc(b->bufs, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        b->bufs = p;
        b->cap = cap;
    }
    void *x = malloc(size ? size : 1);
    if (x) b->bufs[b->n++] = x;
    return x;
}

/* Bytes of `rows` rows (or, for a vector, elements) of a tensor */
static bool span(const toy_gguf_tensor *t, int64_t rows, size_t *out) {
    size_t row;
    if (toy_type_row_size(t->type, t->n_dims == 1 ? 1 : t->ne[0], &row)) return false;
    *out = row * (size_t)rows;
    return true;
}

static int convert(const char *in, const char *out, bool per_head, bool no_mmap) {
    toy_model *m = NULL;
    if (!load_model("convert", in, no_mmap, &m)) return 1;
    const toy_gguf *g = toy_model_gguf(m);
    const int32_t n_head = toy_model_n_head(m), n_head_kv = toy_model_n_head_kv(m);
    const bool is_per_head = toy_gguf_find_tensor(g, "blk.0.attn_q.head_0.weight") != NULL;
    int rc = 1;
    buffers keep_bufs = {0};
    toy_gguf_writer *w = toy_gguf_writer_new();
    if (!w) goto nomem;
    if (is_per_head == per_head) {
        fprintf(stderr, "toy convert: %s is already in the %s layout\n", in, per_head ? "per-head" : "ggml");
        goto done;
    }
    for (int64_t i = 0; i < toy_gguf_n_kv(g); i++) {
        const char *key = toy_gguf_key(g, i);
        if (!strcmp(key, "toy.ggml_native")) continue;
        if (toy_gguf_writer_set_value(w, key, toy_gguf_kv(g, i))) goto error;
    }
    if (!per_head && toy_gguf_writer_set_bool(w, "toy.ggml_native", true)) goto error;
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        const size_t pre = qkv_prefix(t->name);
        const char *rest = t->name + pre;
        const bool weight = pre && !strcmp(rest, "weight"), bias = pre && !strcmp(rest, "bias");
        const int32_t heads = pre && t->name[pre - 2] == 'q' ? n_head : n_head_kv;
        if (per_head && (weight || bias)) { /* one tensor per head */
            const int64_t rows = (bias ? t->ne[0] : t->ne[1]) / heads;
            size_t bytes;
            if (!span(t, rows, &bytes)) goto error;
            for (int32_t h = 0; h < heads; h++) {
                char name[160];
                snprintf(name, sizeof name, "%.*shead_%d.%s", (int)pre, t->name, h, rest);
                const int64_t ne[2] = {bias ? rows : t->ne[0], rows};
                if (toy_gguf_writer_add_tensor(w, name, t->type, bias ? 1 : 2, ne,
                                               (const uint8_t *)t->data + (size_t)h * bytes))
                    goto error;
            }
            continue;
        }
        int32_t h = -1, len = 0;
        char kind[16] = "";
        if (!per_head && pre && sscanf(rest, "head_%d.%15[a-z]%n", &h, kind, &len) == 2 && !rest[len]) {
            if (h > 0) continue; /* joined at head 0 */
            /* the heads' rows, in order, as one tensor */
            const bool is_bias = !strcmp(kind, "bias");
            const int64_t rows = is_bias ? t->ne[0] : t->ne[1];
            size_t bytes;
            if (!span(t, rows, &bytes)) goto error;
            uint8_t *all = keep(&keep_bufs, bytes * (size_t)heads);
            if (!all) goto nomem;
            for (int32_t k = 0; k < heads; k++) {
                char name[160];
                snprintf(name, sizeof name, "%.*shead_%d.%s", (int)pre, t->name, k, kind);
                const toy_gguf_tensor *part = toy_gguf_find_tensor(g, name);
                if (!part || part->type != t->type || part->ne[0] != t->ne[0] || part->ne[1] != t->ne[1]) {
                    fprintf(stderr, "toy convert: %s: tensor %s is missing or not shaped as head 0's\n", in, name);
                    goto done;
                }
                memcpy(all + (size_t)k * bytes, part->data, bytes);
            }
            char name[160];
            snprintf(name, sizeof name, "%.*s%s", (int)pre, t->name, kind);
            const int64_t ne[2] = {is_bias ? rows * heads : t->ne[0], rows * heads};
            if (toy_gguf_writer_add_tensor(w, name, t->type, is_bias ? 1 : 2, ne, all)) goto error;
            continue;
        }
        if (toy_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data)) goto error;
    }
    if (toy_gguf_writer_write(w, out)) goto error;
    fprintf(stderr, "toy convert: wrote %s (%s layout)\n", out, per_head ? "per-head" : "ggml");
    rc = 0;
    goto done;
nomem:
    fprintf(stderr, "toy convert: no memory\n");
    goto done;
error:
    fprintf(stderr, "toy convert: %s\n", toy_last_error());
done:
    toy_gguf_writer_free(w);
    for (int i = 0; i < keep_bufs.n; i++) free(keep_bufs.bufs[i]);
    free(keep_bufs.bufs);
    toy_model_free(m);
    return rc;
}

int cmd_convert(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL}, *layout = NULL;
    bool no_mmap = false;
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(convert_usage, stdout);
            return 0;
        } else if (!strcmp(a, "--layout") && i + 1 < argc) {
            layout = argv[++i];
        } else if (!strcmp(a, "--no-mmap")) {
            no_mmap = true;
        } else if (a[0] == '-' && a[1]) {
            return unknown_option("convert", a);
        } else if (n_paths < 2) {
            paths[n_paths++] = a;
        } else {
            fprintf(stderr, "toy convert: one input and one output, not '%s' too\n", a);
            return 2;
        }
    }
    if (n_paths != 2 || !layout) {
        fprintf(stderr, "toy convert: needs IN.gguf OUT.gguf --layout per-head|ggml (see toy convert --help)\n");
        return 2;
    }
    if (strcmp(layout, "per-head") && strcmp(layout, "ggml")) {
        fprintf(stderr, "toy convert: --layout must be per-head or ggml, got '%s'\n", layout);
        return 2;
    }
    return convert(paths[0], paths[1], !strcmp(layout, "per-head"), no_mmap);
}
