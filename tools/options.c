/* options.c — what the subcommands share (commands.h): parsing option values, the
 * default thread count and model, reading text files and loading models. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "toy.h"

bool parse_int_arg(const char *cmd, const char *flag, const char *value, int min, int max,
                   int *out) {
    if (!value) {
        fprintf(stderr, "toy %s: %s needs a value\n", cmd, flag);
        return false;
    }
    char *end;
    long v = strtol(value, &end, 10);
    if (*value == 0 || *end != 0 || v < min || v > max) {
        fprintf(stderr, "toy %s: %s must be an integer in %d..%d, got '%s'\n", cmd, flag, min,
                max, value);
        return false;
    }
    *out = (int)v;
    return true;
}

int unknown_option(const char *cmd, const char *arg) {
    fprintf(stderr, "toy %s: unknown or incomplete option '%s' (see toy %s --help)\n", cmd, arg, cmd);
    return 2;
}

bool parse_float_arg(const char *cmd, const char *flag, const char *value, float *out) {
    char *end;
    if (!value) {
        fprintf(stderr, "toy %s: %s needs a value\n", cmd, flag);
        return false;
    }
    const float x = strtof(value, &end);
    if (*value == 0 || *end != 0 || !isfinite(x)) {
        fprintf(stderr, "toy %s: %s must be a number, got '%s'\n", cmd, flag, value);
        return false;
    }
    *out = x;
    return true;
}

/* --split A,B,...: the layers of each pipeline stage, for every model this process loads */
static int32_t split[64];
static int n_split;

static bool parse_split(const char *cmd, const char *list) {
    n_split = 0;
    for (const char *s = list; *s;) {
        char *end;
        const long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20 || (*end && (*end != ',' || !end[1])) || n_split == 64) {
            fprintf(stderr, "toy %s: --split must be layer counts, one per process ('10,12'), got '%s'\n", cmd, list);
            return false;
        }
        split[n_split++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    if (!n_split) fprintf(stderr, "toy %s: --split is empty\n", cmd);
    return n_split > 0;
}

int parse_model_option(const char *cmd, int argc, char **argv, int *i, model_options *o) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) {
        o->path = v;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (!parse_int_arg(cmd, a, v, 1, 256, &o->n_threads)) return -1;
    } else if (!strcmp(a, "--no-mmap")) {
        o->no_mmap = true;
        return 1;
    } else if (!strcmp(a, "--split") && v) {
        if (!parse_split(cmd, v)) return -1;
    } else {
        return 0;
    }
    ++*i;
    return 1;
}

int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    /* a cgroup v2 CPU quota ("QUOTA PERIOD"; "max" for none) caps what a container gets */
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        long long quota, period;
        if (fscanf(f, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0) {
            const long long cap = (quota + period - 1) / period;
            if (cap < n) n = (long)cap;
        }
        fclose(f);
    }
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

bool parse_cache_type(const char *cmd, const char *flag, const char *value, int *out) {
    const int t = value ? toy_type_from_name(value) : -1;
    if (t != TOY_TYPE_F32 && t != TOY_TYPE_F16 && t != TOY_TYPE_BF16 && t != TOY_TYPE_Q8_0) {
        fprintf(stderr, "toy %s: %s must be f32, f16, bf16 or q8_0, got '%s'\n", cmd, flag,
                value ? value : "");
        return false;
    }
    *out = t;
    return true;
}

bool parse_attn(const char *cmd, const char *value, toy_attn *out) {
    if (value && !strcmp(value, "fused")) *out = TOY_ATTN_FUSED;
    else if (value && !strcmp(value, "plain")) *out = TOY_ATTN_PLAIN;
    else {
        fprintf(stderr, "toy %s: --attn must be fused or plain, got '%s'\n", cmd, value ? value : "");
        return false;
    }
    return true;
}

char *read_text_file(const char *cmd, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "toy %s: %s: cannot open: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int err = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (ferror(f)) err = errno;
        if (n < cap - 1) break;
        char *bigger = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "toy %s: %s: %s\n", cmd, path, buf ? strerror(err) : "no memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

bool load_model(const char *cmd, const char *path, bool no_mmap, toy_model **out) {
    toy_model_params p = toy_model_default_params();
    p.use_mmap = !no_mmap;
    p.split = n_split ? split : NULL;
    p.n_split = n_split;
    if (toy_model_load_with(path, &p, out) == TOY_OK) return true;
    fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
    return false;
}

/* "1,2,3" to ids; an error names the bad item. */
int32_t *parse_token_list(const char *cmd, const char *s, int32_t *n_out) {
    int32_t n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) return NULL;
    const char *p = s;
    for (int32_t i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end != ',' && *end != 0)) {
            fprintf(stderr, "toy %s: --tokens item %d ('%.*s') is not a token id\n", cmd, i + 1,
                    (int)strcspn(p, ","), p);
            free(ids);
            return NULL;
        }
        ids[i] = (int32_t)v;
        p = end + (*end == ',');
    }
    *n_out = n;
    return ids;
}

int parse_shape_option(const char *cmd, int argc, char **argv, int *i, toy_init_params *p) {
    static const char *const dims[6] = {"--n-embd", "--n-layer", "--n-head", "--n-head-kv", "--n-ff", "--ctx"};
    int32_t *const dst[6] = {&p->n_embd, &p->n_layer, &p->n_head, &p->n_head_kv, &p->n_ff, &p->n_ctx};
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    for (int k = 0; k < 6; k++)
        if (!strcmp(a, dims[k])) {
            int x;
            if (!parse_int_arg(cmd, a, v, 1, 1 << 24, &x)) return -1;
            *dst[k] = x;
            ++*i;
            return 1;
        }
    if (!strcmp(a, "--untied")) {
        p->tied = -1;
        return 1;
    }
    if ((!strcmp(a, "--arch") || !strcmp(a, "--preset") || !strcmp(a, "--vocab-from") || !strcmp(a, "--name")) && v) {
        const char **field = !strcmp(a, "--arch") ? &p->arch : !strcmp(a, "--preset") ? &p->preset
                           : !strcmp(a, "--vocab-from") ? &p->vocab_path : &p->name;
        *field = argv[++*i];
        return 1;
    }
    return 0;
}

const char *const shape_options_help =
    "  --arch ARCH            llama (default for toy train), qwen2 or gpt2\n"
    "  --preset NAME          a published shape (toy init --help lists them), or the dimensions:\n"
    "  --n-embd N --n-layer N --n-head N --n-head-kv N --n-ff N --ctx N\n"
    "                         (each replaces the preset's; without a preset give them all but\n"
    "                         --n-head-kv, which defaults to --n-head)\n"
    "  --untied               a separate output matrix (default: tied to the embedding)\n"
    "  --name NAME            general.name of the model (default: the preset's, or custom)\n"
    "  --vocab-from FILE      the tokenizer: any GGUF with one (toy tokenizer train writes them)\n";

/* The model that ships with toy, for run and chat without -m: $TOY_MODEL, else
 * models/toy-kjv.gguf beside the binary's folder (build/toy in the source tree), else
 * share/toy/toy-kjv.gguf beside it (an installed bin/toy), else in the source tree the
 * binary was built from. */
const char *default_model_path(void) {
    static char path[4096];
    const char *env = getenv("TOY_MODEL");
    if (env && *env) return env;
    char exe[2048];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            static const char *const beside[] = {"models", "share/toy"};
            for (int i = 0; i < 2; i++) {
                snprintf(path, sizeof path, "%s/../%s/" TOY_DEFAULT_MODEL, exe, beside[i]);
                if (access(path, R_OK) == 0) return path;
            }
        }
    }
    snprintf(path, sizeof path, "%s/" TOY_DEFAULT_MODEL, TOY_MODELS_DIR);
    return access(path, R_OK) == 0 ? path : NULL;
}
