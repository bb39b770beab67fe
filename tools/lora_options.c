/* lora_options.c — --lora FILE [--lora-scale S], shared by the commands that run a model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

const char *const lora_options_help =
    "  --lora FILE             apply a LoRA adapter (llama.cpp's GGUF format) on the fly;\n"
    "                          repeatable: several adapters at once\n"
    "  --lora-scale S          the scale of the --lora before it (default 1)\n";

int lora_parse_option(const char *cmd, int argc, char **argv, int *i, lora_options *o) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--lora")) {
        if (!v || !*v) {
            fprintf(stderr, "toy %s: --lora needs an adapter file\n", cmd);
            return -1;
        }
        if (o->n == LORA_MAX) {
            fprintf(stderr, "toy %s: at most %d adapters (--lora)\n", cmd, LORA_MAX);
            return -1;
        }
        o->path[o->n] = v;
        o->scale[o->n++] = 1.0f;
    } else if (!strcmp(a, "--lora-scale")) {
        char *end;
        const float s = v ? strtof(v, &end) : 0.0f;
        if (!v || !*v || *end || !isfinite(s)) {
            fprintf(stderr, "toy %s: --lora-scale must be a number, got '%s'\n", cmd, v ? v : "");
            return -1;
        }
        if (!o->n) {
            fprintf(stderr, "toy %s: --lora-scale %s comes before any --lora FILE\n", cmd, v);
            return -1;
        }
        o->scale[o->n - 1] = s;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

bool lora_options_apply(const char *cmd, lora_options *o, const toy_model *m, toy_context *ctx) {
    for (int i = 0; i < o->n; i++)
        if (!o->lora[i] && toy_lora_load(m, o->path[i], &o->lora[i])) {
            fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
            return false;
        }
    if (o->n && toy_context_set_lora(ctx, o->lora, o->scale, o->n)) {
        fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
        return false;
    }
    return true;
}

void lora_options_free(lora_options *o) {
    for (int i = 0; i < o->n; i++) toy_lora_free(o->lora[i]);
    memset(o->lora, 0, sizeof o->lora);
}
