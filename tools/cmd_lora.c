/* cmd_lora.c — `toy lora merge`: a base model with LoRA adapters folded into its weights. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"

static const char *const lora_usage =
    "usage: toy lora merge -m BASE --lora FILE [--lora-scale S] [--lora FILE ...] --out MODEL.gguf\n"
    "                      [--type T] [-t N]\n"
    "\n"
    "Writes BASE with each matrix an adapter changes replaced by W + scale * alpha / rank * B A\n"
    "(every adapter given, in order); the other tensors are copied as they are.\n"
    "\n"
    "  -m, --model FILE     the base model\n"
    "  --lora FILE          an adapter (llama.cpp's LoRA GGUF format); repeatable\n"
    "  --lora-scale S       the scale of the --lora before it (default 1)\n"
    "  --out FILE           the merged model (written atomically)\n"
    "  --type T             the type of the merged matrices: f32 (default), f16, bf16, q8_0,\n"
    "                       q4_k, ... (any type toy quantizes to)\n"
    "  -t, --threads N      threads (default: the CPUs available)\n"
    "  --no-mmap            read the model into memory instead of mapping it\n"
    "  -h, --help           this message\n";

typedef struct {
    model_options model;
    const char *out;
    int type; /* of the merged matrices */
    lora_options lora;
} lora_merge_options;

static int parse_lora_merge_options(int argc, char **argv, lora_merge_options *o) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(lora_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "merge")) {
        fprintf(stderr, "toy lora: unknown subcommand '%s' (toy lora merge; see toy lora --help)\n", argv[1]);
        return 2;
    }
    *o = (lora_merge_options){.model = {.n_threads = default_threads()}, .type = TOY_TYPE_F32};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(lora_usage, stdout);
            return 0;
        } else if ((r = lora_parse_option("lora merge", argc, argv, &i, &o->lora)) ||
                   (r = parse_model_option("lora merge", argc, argv, &i, &o->model))) {
            if (r < 0) return 2;
        } else if (!strcmp(a, "--out") && v) {
            o->out = argv[++i];
        } else if (!strcmp(a, "--type") && v) {
            o->type = toy_type_from_name(v);
            if (o->type < 0 || !toy_type_can_quantize(o->type)) {
                fprintf(stderr, "toy lora merge: --type '%s' is not a type toy can write\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "toy lora merge: unknown or incomplete option '%s' (see toy lora --help)\n", a);
            return 2;
        }
    }
    if (!o->model.path || !o->out || !o->lora.n) {
        fprintf(stderr, "toy lora merge: needs -m BASE, --lora FILE and --out FILE (see toy lora --help)\n");
        return 2;
    }
    return GO_ON;
}

static int run_lora_merge(lora_merge_options *o) {
    toy_model *m = NULL;
    int rc = 1;
    lora_options *lora = &o->lora;
    if (!load_model("lora merge", o->model.path, o->model.no_mmap, &m)) return 1;
    for (int i = 0; i < lora->n; i++)
        if (toy_lora_load(m, lora->path[i], &lora->lora[i])) {
            fprintf(stderr, "toy lora merge: %s\n", toy_last_error());
            goto done;
        }
    if (toy_lora_merge(m, lora->lora, lora->scale, lora->n, o->type, o->model.n_threads, o->out)) {
        fprintf(stderr, "toy lora merge: %s\n", toy_last_error());
        goto done;
    }
    fprintf(stderr, "toy lora merge: wrote %s (%d adapter%s)\n", o->out, lora->n, lora->n == 1 ? "" : "s");
    rc = 0;
done:
    lora_options_free(lora);
    toy_model_free(m);
    return rc;
}

int cmd_lora(int argc, char **argv) {
    lora_merge_options o;
    const int rc = parse_lora_merge_options(argc, argv, &o);
    return rc == GO_ON ? run_lora_merge(&o) : rc;
}
