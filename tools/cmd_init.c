/* cmd_init.c — `toy init`: a random-weight model of a real shape. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "toy.h"

static void progress(void *user, int64_t index, int64_t count, const char *name, toy_type type_in,
                     toy_type type_out, size_t bytes_in, size_t bytes_out) {
    (void)user;
    (void)type_in;
    (void)bytes_in;
    fprintf(stderr, "[%4lld/%4lld] %-36s %-6s %10.1f KiB\n", (long long)index + 1, (long long)count,
            name, toy_type_name(type_out), (double)bytes_out / 1024.0);
}

typedef struct {
    toy_init_params params;
    const char *out, *type;
} init_options;

static int parse_init_options(int argc, char **argv, init_options *o) {
    *o = (init_options){.params = toy_init_default_params(), .type = "F32"};
    toy_init_params *p = &o->params;
    p->n_threads = default_threads();
    p->progress = progress;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int shaped;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: toy init --arch ARCH (--preset NAME | dimensions) --vocab-from FILE.gguf\n"
                   "                --out FILE.gguf [--type T] [--seed S] [-t N]\n"
                   "\n"
                   "Writes a model of a real shape with random weights (Gaussian, std 0.02) and the\n"
                   "tokenizer of FILE.gguf (any GGUF with tokenizer metadata; n_vocab is its size).\n"
                   "\n"
                   "presets:");
            for (int k = 0; toy_init_preset_name(k); k++)
                printf(" %s (%s)", toy_init_preset_name(k), toy_init_preset_arch(k));
            printf("\n\n");
            fputs(shape_options_help, stdout);
            printf("  --out FILE             the model to write\n"
                   "  --type T               F32 (default), F16, BF16, Q8_0, Q4_K_M, ... as toy quantize\n"
                   "  --seed S               random seed (default 42; same seed, same file)\n"
                   "  -t, --threads N        threads (default: the CPUs available)\n"
                   "  -h, --help             this message\n");
            return 0;
        } else if ((shaped = parse_shape_option("init", argc, argv, &i, p)) != 0) {
            if (shaped < 0) return 2;
        } else if (!strcmp(a, "--out") && v) {
            o->out = argv[++i];
        } else if (!strcmp(a, "--type") && v) {
            o->type = argv[++i];
        } else if (!strcmp(a, "--seed") && v) {
            char *end;
            p->seed = strtoull(argv[++i], &end, 10);
            if (*end) {
                fprintf(stderr, "toy init: --seed must be a non-negative integer\n");
                return 2;
            }
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!parse_int_arg("init", a, v, 1, 256, &p->n_threads)) return 2;
            i++;
        } else {
            return unknown_option("init", a);
        }
    }
    if (!p->arch || !p->vocab_path || !o->out) {
        fprintf(stderr, "toy init: needs --arch, --preset (or the dimensions), --vocab-from and --out (see toy init --help)\n");
        return 2;
    }
    p->ftype = toy_ftype_from_name(o->type);
    if (p->ftype < 0) {
        fprintf(stderr, "toy init: unknown type '%s' (see toy quantize --help)\n", o->type);
        return 2;
    }
    return GO_ON;
}

static int run_init(const init_options *o) {
    const toy_init_params *p = &o->params;
    if (toy_init_model(p, o->out)) {
        fprintf(stderr, "toy init: %s\n", toy_last_error());
        return 1;
    }
    fprintf(stderr, "toy init: wrote %s (%s, %s)\n", o->out, p->preset ? p->preset : p->name ? p->name : "custom", o->type);
    return 0;
}

int cmd_init(int argc, char **argv) {
    init_options o;
    const int rc = parse_init_options(argc, argv, &o);
    return rc == GO_ON ? run_init(&o) : rc;
}
