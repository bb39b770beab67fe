/* cmd_quantize.c — `toy quantize IN.gguf OUT.gguf TYPE [-t N] [--pure]`. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "toy.h"

static const char *const quantize_usage =
    "usage: toy quantize IN.gguf OUT.gguf TYPE [-t N] [--pure]\n"
    "\n"
    "Writes a copy of IN.gguf with its weights converted to TYPE, a single type or one\n"
    "of llama.cpp's mixes, which give some tensors more bits (output.weight at Q6_K,\n"
    "attn_v and ffn_down of selected layers higher in the _M mixes). Norms, biases and\n"
    "other 1-D tensors stay as they are; metadata is copied and general.file_type set.\n"
    "\n"
    "TYPE: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL Q2_K Q3_K_S Q3_K_M Q3_K_L\n"
    "      Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K (Q3_K, Q4_K, Q5_K mean the _M mixes)\n"
    "\n"
    "  -t, --threads N   threads (default: the CPUs available)\n"
    "  --pure            no mix: every quantizable tensor gets TYPE itself\n"
    "  --no-mmap         read IN into memory instead of mapping it\n"
    "  -h, --help        this message\n";

static void progress(void *user, int64_t index, int64_t count, const char *name, toy_type type_in,
                     toy_type type_out, size_t bytes_in, size_t bytes_out) {
    (void)user;
    fprintf(stderr, "[%4lld/%4lld] %-40s %-6s -> %-6s %10.1f KiB -> %10.1f KiB\n",
            (long long)index + 1, (long long)count, name, toy_type_name(type_in),
            toy_type_name(type_out), (double)bytes_in / 1024.0, (double)bytes_out / 1024.0);
}

typedef struct {
    const char *in, *out;
    int ftype;
    toy_quantize_params params;
} quantize_options;

static int parse_quantize_options(int argc, char **argv, quantize_options *o) {
    const char *pos[3];
    int n_pos = 0;
    *o = (quantize_options){.params = toy_quantize_default_params()};
    o->params.n_threads = default_threads();
    o->params.progress = progress;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(quantize_usage, stdout);
            return 0;
        } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
            if (!parse_int_arg("quantize", a, i + 1 < argc ? argv[++i] : NULL, 1, 256,
                               &o->params.n_threads))
                return 2;
        } else if (strcmp(a, "--pure") == 0) {
            o->params.pure = true;
        } else if (strcmp(a, "--no-mmap") == 0) {
            o->params.no_mmap = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "toy quantize: unknown option '%s' (see toy quantize --help)\n", a);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "toy quantize: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (n_pos != 3) {
        fprintf(stderr, "toy quantize: needs IN.gguf OUT.gguf TYPE (see toy quantize --help)\n");
        return 2;
    }
    o->in = pos[0];
    o->out = pos[1];
    o->ftype = toy_ftype_from_name(pos[2]);
    if (o->ftype < 0) {
        fprintf(stderr, "toy quantize: unknown type '%s' (see toy quantize --help)\n", pos[2]);
        return 2;
    }
    if (strcmp(o->in, o->out) == 0) {
        fprintf(stderr, "toy quantize: input and output are the same file '%s'\n", o->in);
        return 2;
    }
    return GO_ON;
}

static int run_quantize(const quantize_options *o) {
    if (toy_quantize_file(o->in, o->out, o->ftype, &o->params) != TOY_OK) {
        fprintf(stderr, "toy quantize: %s\n", toy_last_error());
        return 1;
    }
    fprintf(stderr, "toy quantize: wrote %s (%s)\n", o->out, toy_ftype_name(o->ftype));
    return 0;
}

int cmd_quantize(int argc, char **argv) {
    quantize_options o;
    const int rc = parse_quantize_options(argc, argv, &o);
    return rc == GO_ON ? run_quantize(&o) : rc;
}
