/* trace_options.c — --trace [PATTERN], --trace-head H, --trace-format text|json and
 * --trace-file FILE, shared by the commands that run a forward pass: which taps of
 * toy_trace_fn to show, and how. */
#include <errno.h>
#include <float.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

const char *const trace_options_help =
    "  --trace [PATTERN]       intermediate tensors (taps) of the forward pass: all, or those\n"
    "                          whose names match PATTERN (comma-separated globs: 'L0.*',\n"
    "                          '*.kq_soft,final_norm'; docs/commands.md lists the taps)\n"
    "  --trace-head H          of per-head taps (q, k, v, their _pre, attn, kq, kq_soft) only\n"
    "                          query head H (K and V: the KV head it reads)\n"
    "  --trace-format F        text (default: min/max/mean|x|/NaNs a line) or json (a JSON\n"
    "                          object a line, with the values)\n"
    "  --trace-file FILE       write the trace to FILE instead of stderr\n";

int trace_parse_option(const char *cmd, int argc, char **argv, int *i, trace_options *o) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--trace")) {
        /* the pattern is optional: the next word is one unless it is an option */
        if (v && *v && v[0] != '-') {
            if (strlen(v) >= TRACE_PATTERN_MAX) {
                fprintf(stderr, "toy %s: --trace: a pattern of %zu characters, more than %d\n", cmd, strlen(v),
                        TRACE_PATTERN_MAX - 1);
                return -1;
            }
            o->pattern = v;
            (*i)++;
        } else {
            o->pattern = "*";
        }
        return 1;
    }
    if (!strcmp(a, "--trace-head")) {
        char *end;
        errno = 0;
        const long h = v ? strtol(v, &end, 10) : -1;
        if (!v || !*v || *end || errno || h < 0 || h > 1 << 20) {
            fprintf(stderr, "toy %s: --trace-head must be a head number, got '%s'\n", cmd, v ? v : "");
            return -1;
        }
        o->head = (int32_t)h;
    } else if (!strcmp(a, "--trace-format")) {
        if (v && !strcmp(v, "text")) o->json = false;
        else if (v && !strcmp(v, "json")) o->json = true;
        else {
            fprintf(stderr, "toy %s: --trace-format must be text or json, got '%s'\n", cmd, v ? v : "");
            return -1;
        }
    } else if (!strcmp(a, "--trace-file")) {
        if (!v || !*v) {
            fprintf(stderr, "toy %s: --trace-file needs a file\n", cmd);
            return -1;
        }
        o->path = v;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

bool trace_options_check(const char *cmd, const trace_options *o) {
    if (!o->pattern && (o->path || o->head >= 0 || o->json)) {
        fprintf(stderr, "toy %s: --trace-head, --trace-format and --trace-file need --trace\n", cmd);
        return false;
    }
    return true;
}

bool trace_options_begin(const char *cmd, trace_options *o, const toy_model *m) {
    o->cmd = cmd;
    if (!trace_options_check(cmd, o)) return false;
    if (!o->pattern) return true;
    o->n_head = toy_model_n_head(m);
    o->n_head_kv = toy_model_n_head_kv(m);
    if (o->head >= 0 && o->head >= o->n_head) {
        fprintf(stderr, "toy %s: --trace-head %d: the model has %d heads\n", cmd, o->head, o->n_head);
        return false;
    }
    o->out = stderr;
    if (o->path && !(o->out = fopen(o->path, "w"))) {
        fprintf(stderr, "toy %s: --trace-file %s: %s\n", cmd, o->path, strerror(errno));
        return false;
    }
    return true;
}

bool trace_options_end(trace_options *o) {
    if (!o->out || o->out == stderr) return true;
    const bool written = !ferror(o->out), closed = fclose(o->out) == 0;
    const bool ok = written && closed;
    o->out = NULL;
    if (!ok) fprintf(stderr, "toy %s: --trace-file %s: %s\n", o->cmd, o->path, strerror(errno));
    return ok;
}

static bool selected(const trace_options *o, const char *name) {
    char buf[TRACE_PATTERN_MAX];
    snprintf(buf, sizeof buf, "%s", o->pattern);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (!fnmatch(p, name, 0)) return true;
    return false;
}

/* The columns of query head h in a row of n of a per-head tap, or false */
static bool head_columns(const trace_options *o, const char *name, int64_t n, int64_t *c0, int64_t *c1) {
    const char *tap = strchr(name, '.');
    tap = tap ? tap + 1 : name;
    static const char *const query[] = {"q_pre", "q", "attn", "kq", "kq_soft"};
    static const char *const kv[] = {"k_pre", "k", "v"};
    for (size_t i = 0; i < sizeof query / sizeof *query; i++)
        if (!strcmp(tap, query[i])) {
            *c0 = n / o->n_head * o->head;
            *c1 = *c0 + n / o->n_head;
            return true;
        }
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++)
        if (!strcmp(tap, kv[i])) {
            const int32_t kh = o->head / (o->n_head / o->n_head_kv);
            *c0 = n / o->n_head_kv * kh;
            *c1 = *c0 + n / o->n_head_kv;
            return true;
        }
    return false;
}

static void print_number(FILE *f, float v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f); /* JSON has no infinities: the masked scores of kq, NaNs */
}

void trace_tap(void *user, const char *name, const float *x, int64_t n_tok, int64_t n) {
    const trace_options *o = user;
    if (!selected(o, name)) return;
    int64_t c0 = 0, c1 = n;
    const bool one_head = o->head >= 0 && head_columns(o, name, n, &c0, &c1);
    float mn = FLT_MAX, mx = -FLT_MAX;
    double sum_abs = 0;
    int64_t nan = 0, counted = 0;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t c = c0; c < c1; c++) {
            const float v = x[t * n + c];
            if (isnan(v)) {
                nan++;
                continue;
            }
            if (v < mn) mn = v;
            if (v > mx) mx = v;
            sum_abs += fabs(v);
            counted++;
        }
    const double mean = counted ? sum_abs / (double)counted : 0.0;
    FILE *f = o->out;
    if (!o->json) {
        char label[96];
        snprintf(label, sizeof label, one_head ? "%s.h%d" : "%s", name, o->head);
        fprintf(f, "trace %-16s [%lld x %lld] min %11.4g max %11.4g mean|x| %10.4g nan %lld\n", label,
                (long long)n_tok, (long long)(c1 - c0), mn, mx, mean, (long long)nan);
        return;
    }
    int layer = -1;
    if (name[0] == 'L') layer = atoi(name + 1);
    const char *tap = layer >= 0 && strchr(name, '.') ? strchr(name, '.') + 1 : name;
    fprintf(f, "{\"name\": \"%s\", \"tap\": \"%s\", \"layer\": ", name, tap);
    if (layer >= 0) fprintf(f, "%d", layer);
    else fputs("null", f);
    fputs(", \"head\": ", f);
    if (one_head) fprintf(f, "%d", o->head);
    else fputs("null", f);
    fprintf(f, ", \"tokens\": %lld, \"n\": %lld, \"min\": ", (long long)n_tok, (long long)(c1 - c0));
    print_number(f, counted ? mn : NAN);
    fputs(", \"max\": ", f);
    print_number(f, counted ? mx : NAN);
    fprintf(f, ", \"mean_abs\": %.9g, \"nan\": %lld, \"values\": [", mean, (long long)nan);
    for (int64_t t = 0; t < n_tok; t++) {
        fputs(t ? ", [" : "[", f);
        for (int64_t c = c0; c < c1; c++) {
            if (c > c0) fputs(", ", f);
            print_number(f, x[t * n + c]);
        }
        fputc(']', f);
    }
    fputs("]}\n", f);
}

void trace_options_apply(trace_options *o, toy_context_params *cp) {
    if (!o->pattern) return;
    cp->trace = trace_tap;
    cp->trace_user = o;
}
