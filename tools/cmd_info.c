/* cmd_info.c — `toy info FILE.gguf [--json]`: what a GGUF file holds. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "toy.h"

static const char *const info_usage =
    "usage: toy info FILE.gguf [--json]\n"
    "\n"
    "Describes a GGUF file: architecture and hyperparameters, tokenizer, every other\n"
    "metadata key, and a table of tensors (name, type, shape, bytes), with the\n"
    "parameter count, bits per weight and file size.\n"
    "\n"
    "  --json       print one JSON object instead of text\n"
    "  -h, --help   this message\n";

/* The name of a hyperparameter of the architecture ("block_count" for
 * "llama.block_count" when arch is "llama"); NULL for any other key. */
static const char *arch_param(const char *key, const char *arch) {
    size_t n = strlen(arch);
    return n && strncmp(key, arch, n) == 0 && key[n] == '.' ? key + n + 1 : NULL;
}

/* Prefixes toy knows; other keys are listed as unrecognised. */
static bool key_is_known(const char *key, const char *arch) {
    static const char *const prefixes[] = {"general.", "tokenizer.", "split.", "quantize.",
                                           "adapter.", "training.", "toy.", "ref."};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0) return true;
    return arch_param(key, arch) != NULL;
}

/* ---------------------------------------------------------------- values */

/* A number or bool, as JSON or text: the scalar v itself (j < 0) or element j of v, an
 * array of them (whose elements the API reads through the array, not as values). */
static void print_number(FILE *f, const toy_gguf_value *v, int64_t j, bool json) {
    const toy_gguf_type t = j < 0 ? toy_gguf_value_type(v) : toy_gguf_array_type(v);
    const uint64_t k = (uint64_t)j;
    bool b = false;
    double d = 0;
    int64_t i;
    uint64_t u = 0;
    if (t == TOY_GGUF_BOOL) {
        if (j < 0) toy_gguf_value_bool(v, &b);
        else b = ((const uint8_t *)toy_gguf_array_data(v))[k] != 0;
        fputs(b ? "true" : "false", f);
    } else if (t == TOY_GGUF_FLOAT32 || t == TOY_GGUF_FLOAT64) {
        if (j < 0) toy_gguf_value_f64(v, &d);
        else toy_gguf_array_f64(v, k, &d);
        if (json) print_json_number(f, d);
        else fprintf(f, "%g", d);
    } else if ((j < 0 ? toy_gguf_value_i64(v, &i) : toy_gguf_array_i64(v, k, &i)) == TOY_OK) {
        fprintf(f, "%" PRId64, i);
    } else { /* a u64 past INT64_MAX */
        if (j < 0) toy_gguf_value_u64(v, &u);
        else toy_gguf_array_u64(v, k, &u);
        fprintf(f, "%" PRIu64, u);
    }
}

static void print_value_text(FILE *f, const toy_gguf_value *v) {
    if (toy_gguf_value_type(v) == TOY_GGUF_STRING) {
        const char *s;
        size_t n;
        toy_gguf_value_str(v, &s, &n);
        /* one line: long or multi-line strings (chat templates) are cut */
        size_t shown = 0;
        while (shown < n && shown < 60 && s[shown] != '\n') shown++;
        fputc('"', f);
        fwrite(s, 1, shown, f);
        fputc('"', f);
        if (shown < n) fprintf(f, "... (%zu bytes)", n);
        return;
    }
    if (toy_gguf_value_type(v) != TOY_GGUF_ARRAY) {
        print_number(f, v, -1, false);
        return;
    }
    toy_gguf_type et = toy_gguf_array_type(v);
    uint64_t n = toy_gguf_array_len(v);
    fprintf(f, "[%s x %" PRIu64 "]", toy_gguf_type_name(et), n);
    if (et == TOY_GGUF_ARRAY || n == 0) return;
    fputs(" ", f);
    uint64_t shown = n < 6 ? n : 6;
    for (uint64_t j = 0; j < shown; j++) {
        if (j) fputs(", ", f);
        if (et == TOY_GGUF_STRING) print_value_text(f, toy_gguf_array_get(v, j));
        else print_number(f, v, (int64_t)j, false);
    }
    if (shown < n) fputs(", ...", f);
}

static void print_value_json(FILE *f, const toy_gguf_value *v) {
    if (toy_gguf_value_type(v) == TOY_GGUF_STRING) {
        const char *s;
        size_t n;
        toy_gguf_value_str(v, &s, &n);
        print_json_string(f, s, n);
        return;
    }
    if (toy_gguf_value_type(v) != TOY_GGUF_ARRAY) {
        print_number(f, v, -1, true);
        return;
    }
    toy_gguf_type et = toy_gguf_array_type(v);
    uint64_t len = toy_gguf_array_len(v);
    /* vocabularies are large: arrays longer than this are summarised */
    if (len > 64) {
        fprintf(f, "{\"array_type\": \"%s\", \"length\": %" PRIu64 "}", toy_gguf_type_name(et),
                len);
        return;
    }
    fputc('[', f);
    for (uint64_t j = 0; j < len; j++) {
        if (j) fputs(", ", f);
        if (et == TOY_GGUF_STRING || et == TOY_GGUF_ARRAY)
            print_value_json(f, toy_gguf_array_get(v, j));
        else
            print_number(f, v, (int64_t)j, true);
    }
    fputc(']', f);
}

/* ---------------------------------------------------------------- the summary */

typedef struct {
    char arch[128];
    int64_t n_params;
    uint64_t tensor_bytes;
    /* tokenizer */
    const char *tok_model;
    size_t tok_model_len;
    int64_t n_vocab;
    int64_t n_merges;
    bool has_chat_template;
} file_summary;

static void summarise(const toy_gguf *g, file_summary *s) {
    memset(s, 0, sizeof *s);
    const char *a;
    size_t n;
    if (!toy_gguf_get_str(g, "general.architecture", &a, &n)) {
        if (n >= sizeof s->arch) n = sizeof s->arch - 1;
        memcpy(s->arch, a, n);
    }
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        s->n_params += toy_tensor_nelements(t);
        s->tensor_bytes += t->size;
    }
    if (toy_gguf_get_str(g, "tokenizer.ggml.model", &s->tok_model, &s->tok_model_len))
        s->tok_model = NULL;
    const toy_gguf_value *v = toy_gguf_get(g, "tokenizer.ggml.tokens");
    s->n_vocab = v ? (int64_t)toy_gguf_array_len(v) : 0;
    v = toy_gguf_get(g, "tokenizer.ggml.merges");
    s->n_merges = v ? (int64_t)toy_gguf_array_len(v) : 0;
    s->has_chat_template = toy_gguf_get(g, "tokenizer.chat_template") != NULL;
}

/* The special token ids the tokenizer section names. */
static const char *const special_keys[] = {"bos", "eos", "unk", "sep", "pad", "eot", "eom", "mask"};

static bool special_id(const toy_gguf *g, const char *which, int64_t *id) {
    char key[64];
    snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", which);
    const toy_gguf_value *v = toy_gguf_get(g, key);
    return v && toy_gguf_value_i64(v, id) == TOY_OK;
}

static bool token_text(const toy_gguf *g, int64_t id, const char **s, size_t *n) {
    const toy_gguf_value *v = toy_gguf_get(g, "tokenizer.ggml.tokens");
    return v && id >= 0 && (uint64_t)id < toy_gguf_array_len(v) &&
           toy_gguf_array_str(v, (uint64_t)id, s, n) == TOY_OK;
}

/* "[ne0, ne1, ...]" (a scalar as one dimension) in shape[0..size), cut if too long. */
static const char *shape_text(const toy_gguf_tensor *t, char *shape, size_t size) {
    int len = 0, dims = t->n_dims ? t->n_dims : 1;
    for (int d = 0; d < dims && len < (int)size; d++)
        len += snprintf(shape + len, size - (size_t)len, d ? ", %" PRId64 : "[%" PRId64,
                        t->ne[d]);
    if (len < (int)size - 1) snprintf(shape + len, size - (size_t)len, "]");
    return shape;
}

static void info_text(const toy_gguf *g, const file_summary *s) {
    FILE *f = stdout;
    size_t file_size = toy_gguf_file_size(g);
    fprintf(f, "file:          %s\n", toy_gguf_path(g));
    fprintf(f, "format:        GGUF v%u, alignment %zu, data at byte %zu\n", toy_gguf_version(g),
            toy_gguf_alignment(g), toy_gguf_data_offset(g));
    fprintf(f, "architecture:  %s\n", s->arch[0] ? s->arch : "(none)");
    const char *name;
    size_t n;
    if (!toy_gguf_get_str(g, "general.name", &name, &n)) fprintf(f, "name:          %.*s\n", (int)n, name);
    fprintf(f, "tensors:       %" PRId64 "\n", toy_gguf_n_tensors(g));
    fprintf(f, "parameters:    %" PRId64 " (%.2f M)\n", s->n_params, (double)s->n_params / 1e6);
    fprintf(f, "bits/weight:   %.3f\n",
            s->n_params ? 8.0 * (double)s->tensor_bytes / (double)s->n_params : 0.0);
    fprintf(f, "file size:     %zu bytes (%.2f MiB)\n", file_size, (double)file_size / 1048576.0);

    if (s->arch[0]) {
        fprintf(f, "\nhyperparameters:\n");
        for (int64_t i = 0; i < toy_gguf_n_kv(g); i++) {
            const char *param = arch_param(toy_gguf_key(g, i), s->arch);
            if (!param) continue;
            fprintf(f, "  %-40s ", param);
            print_value_text(f, toy_gguf_kv(g, i));
            fputc('\n', f);
        }
    }

    fprintf(f, "\ntokenizer:\n");
    if (s->tok_model) {
        fprintf(f, "  model          %.*s\n", (int)s->tok_model_len, s->tok_model);
        const char *pre;
        size_t pn;
        if (!toy_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pn))
            fprintf(f, "  pre-tokenizer  %.*s\n", (int)pn, pre);
        fprintf(f, "  vocab size     %" PRId64 "\n", s->n_vocab);
        if (s->n_merges) fprintf(f, "  merges         %" PRId64 "\n", s->n_merges);
        for (size_t k = 0; k < sizeof special_keys / sizeof special_keys[0]; k++) {
            int64_t id;
            if (!special_id(g, special_keys[k], &id)) continue;
            const char *txt;
            size_t tn;
            fprintf(f, "  %-4s token      %" PRId64, special_keys[k], id);
            if (token_text(g, id, &txt, &tn)) fprintf(f, " '%.*s'", (int)tn, txt);
            fputc('\n', f);
        }
        bool b;
        if (!toy_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b))
            fprintf(f, "  add bos        %s\n", b ? "yes" : "no");
        if (!toy_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b))
            fprintf(f, "  add eos        %s\n", b ? "yes" : "no");
        fprintf(f, "  chat template  %s\n", s->has_chat_template ? "present" : "absent");
    } else {
        fprintf(f, "  (none)\n");
    }

    fprintf(f, "\nmetadata:\n");
    for (int64_t i = 0; i < toy_gguf_n_kv(g); i++) {
        fprintf(f, "  %-45s %-5s ", toy_gguf_key(g, i),
                toy_gguf_type_name(toy_gguf_value_type(toy_gguf_kv(g, i))));
        print_value_text(f, toy_gguf_kv(g, i));
        fputc('\n', f);
    }
    bool header = false;
    for (int64_t i = 0; i < toy_gguf_n_kv(g); i++) {
        if (key_is_known(toy_gguf_key(g, i), s->arch)) continue;
        if (!header) fprintf(f, "\nunrecognised keys:\n");
        header = true;
        fprintf(f, "  %s\n", toy_gguf_key(g, i));
    }

    if (toy_gguf_n_tensors(g)) {
        fprintf(f, "\n%5s  %-40s %-7s %-24s %12s\n", "#", "tensor", "type", "shape", "bytes");
        for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
            const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
            char shape[96];
            fprintf(f, "%5" PRId64 "  %-40s %-7s %-24s %12zu%s\n", i, t->name,
                    toy_type_name(t->type), shape_text(t, shape, sizeof shape), t->size,
                    toy_type_can_dequantize(t->type) ? "" : "  (type not supported by toy)");
        }
    }
}

static void info_json(const toy_gguf *g, const file_summary *s) {
    FILE *f = stdout;
    fputs("{\n  \"file\": ", f);
    print_json_string(f, toy_gguf_path(g), strlen(toy_gguf_path(g)));
    fprintf(f, ",\n  \"file_size\": %zu,\n  \"version\": %u,\n  \"alignment\": %zu,\n",
            toy_gguf_file_size(g), toy_gguf_version(g), toy_gguf_alignment(g));
    fprintf(f, "  \"data_offset\": %zu,\n  \"architecture\": ", toy_gguf_data_offset(g));
    if (s->arch[0]) print_json_string(f, s->arch, strlen(s->arch));
    else fputs("null", f);
    fprintf(f, ",\n  \"n_tensors\": %" PRId64 ",\n  \"n_params\": %" PRId64
               ",\n  \"tensor_bytes\": %" PRIu64 ",\n  \"bits_per_weight\": ",
            toy_gguf_n_tensors(g), s->n_params, s->tensor_bytes);
    print_json_number(f, s->n_params ? 8.0 * (double)s->tensor_bytes / (double)s->n_params : 0.0);

    fputs(",\n  \"hyperparameters\": {", f);
    bool first = true;
    for (int64_t i = 0; i < toy_gguf_n_kv(g); i++) {
        const char *param = arch_param(toy_gguf_key(g, i), s->arch);
        if (!param) continue;
        fputs(first ? "\n    " : ",\n    ", f);
        first = false;
        print_json_string(f, param, strlen(param));
        fputs(": ", f);
        print_value_json(f, toy_gguf_kv(g, i));
    }
    fputs(first ? "}" : "\n  }", f);

    fputs(",\n  \"tokenizer\": ", f);
    if (s->tok_model) {
        fputs("{\"model\": ", f);
        print_json_string(f, s->tok_model, s->tok_model_len);
        const char *pre;
        size_t pn;
        if (!toy_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pn)) {
            fputs(", \"pre\": ", f);
            print_json_string(f, pre, pn);
        }
        fprintf(f, ", \"vocab_size\": %" PRId64 ", \"n_merges\": %" PRId64, s->n_vocab,
                s->n_merges);
        for (size_t k = 0; k < sizeof special_keys / sizeof special_keys[0]; k++) {
            int64_t id;
            if (special_id(g, special_keys[k], &id))
                fprintf(f, ", \"%s_token_id\": %" PRId64, special_keys[k], id);
        }
        bool b;
        if (!toy_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b))
            fprintf(f, ", \"add_bos\": %s", b ? "true" : "false");
        if (!toy_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b))
            fprintf(f, ", \"add_eos\": %s", b ? "true" : "false");
        fprintf(f, ", \"has_chat_template\": %s}", s->has_chat_template ? "true" : "false");
    } else {
        fputs("null", f);
    }

    fputs(",\n  \"metadata\": {", f);
    for (int64_t i = 0; i < toy_gguf_n_kv(g); i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        print_json_string(f, toy_gguf_key(g, i), strlen(toy_gguf_key(g, i)));
        fputs(": {\"type\": \"", f);
        const toy_gguf_value *v = toy_gguf_kv(g, i);
        fputs(toy_gguf_type_name(toy_gguf_value_type(v)), f);
        fputs("\", \"value\": ", f);
        print_value_json(f, v);
        fputc('}', f);
    }
    fputs(toy_gguf_n_kv(g) ? "\n  }" : "}", f);

    fputs(",\n  \"unrecognised_keys\": [", f);
    first = true;
    for (int64_t i = 0; i < toy_gguf_n_kv(g); i++) {
        const char *key = toy_gguf_key(g, i);
        if (key_is_known(key, s->arch)) continue;
        if (!first) fputs(", ", f);
        first = false;
        print_json_string(f, key, strlen(key));
    }
    fputs("],\n  \"tensors\": [", f);
    for (int64_t i = 0; i < toy_gguf_n_tensors(g); i++) {
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        fputs(i ? ",\n    " : "\n    ", f);
        fputs("{\"name\": ", f);
        print_json_string(f, t->name, strlen(t->name));
        char shape[96];
        fprintf(f, ", \"type\": \"%s\", \"shape\": %s", toy_type_name(t->type),
                shape_text(t, shape, sizeof shape));
        fprintf(f, ", \"bytes\": %zu, \"offset\": %" PRIu64 ", \"supported\": %s}", t->size,
                t->offset, toy_type_can_dequantize(t->type) ? "true" : "false");
    }
    fputs(toy_gguf_n_tensors(g) ? "\n  ]\n}\n" : "]\n}\n", f);
}

typedef struct {
    const char *path;
    bool json;
} info_options;

static int parse_info_options(int argc, char **argv, info_options *o) {
    *o = (info_options){0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(info_usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            o->json = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "toy info: unknown option '%s' (see toy info --help)\n", argv[i]);
            return 2;
        } else if (!o->path) {
            o->path = argv[i];
        } else {
            fprintf(stderr, "toy info: more than one file given ('%s')\n", argv[i]);
            return 2;
        }
    }
    if (!o->path) {
        fprintf(stderr, "toy info: no file given (see toy info --help)\n");
        return 2;
    }
    return GO_ON;
}

static int run_info(const info_options *o) {
    toy_gguf *g;
    if (toy_gguf_open(o->path, &g) != TOY_OK) {
        fprintf(stderr, "toy info: %s\n", toy_last_error());
        return 1;
    }
    file_summary s;
    summarise(g, &s);
    if (o->json) info_json(g, &s);
    else info_text(g, &s);
    toy_gguf_close(g);
    return 0;
}

int cmd_info(int argc, char **argv) {
    info_options o;
    const int rc = parse_info_options(argc, argv, &o);
    return rc == GO_ON ? run_info(&o) : rc;
}
