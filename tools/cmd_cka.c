/* cmd_cka.c — `toy cka`: two models compared layer by layer by linear CKA. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"

static const char *const cka_usage =
    "usage: toy cka -m A.gguf -m B.gguf --data FILE [--tap NAME] [--tokens N] [--window N] [-t N]\n"
    "                [--json]\n"
    "\n"
    "Feeds the first N tokens of FILE (tokenized once: the models must share the tokenizer)\n"
    "to both models and prints the linear CKA between a tap of each block of A (rows) and\n"
    "the same tap of each block of B (columns), by default the residual stream after the\n"
    "block: 1 for representations equal up to a rotation and a scale, near 0 for unrelated\n"
    "ones. Models may differ in architecture, width and depth.\n"
    "\n"
    "  -m, --model FILE     model A, then model B (the same file twice: a self-comparison)\n"
    "  --data FILE          the text\n"
    "  --tap NAME           the per-layer tap (toy run --help, --trace): resid (default: the\n"
    "                       residual stream after the block), attn_norm, ffn_out, q, ...\n"
    "  --tokens N           tokens compared (default 512)\n"
    "  --window N           tokens per forward pass, each from position 0 (default 512)\n"
    "  -t, --threads N      threads (default: the CPUs available)\n"
    "  --no-mmap            read the model into memory instead of mapping it\n"
    "  --json               {\"tap\", \"layers_a\", \"layers_b\", \"tokens\", \"cka\": [[...], ...]}\n"
    "  -h, --help           this message\n";

typedef struct {
    const char *paths[2], *data, *tap;
    model_options model; /* -t and --no-mmap (-m is given twice) */
    int n_tokens, window;
    bool json;
} cka_options;

static int parse_cka_options(int argc, char **argv, cka_options *o) {
    *o = (cka_options){.model = {.n_threads = default_threads()}, .n_tokens = 512, .window = 512, .tap = "resid"};
    int n_models = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(cka_usage, stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) {
            if (n_models == 2) {
                fprintf(stderr, "toy cka: two models (-m A -m B), not more\n");
                return 2;
            }
            o->paths[n_models++] = argv[++i];
        } else if (!strcmp(a, "--data") && v) {
            o->data = argv[++i];
        } else if (!strcmp(a, "--tap") && v) {
            o->tap = argv[++i];
        } else if ((r = parse_model_option("cka", argc, argv, &i, &o->model))) {
            if (r < 0) return 2;
        } else if (!strcmp(a, "--tokens") || !strcmp(a, "--window")) {
            if (!parse_int_arg("cka", a, v, 2, 1 << 20, !strcmp(a, "--tokens") ? &o->n_tokens : &o->window)) return 2;
            i++;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else {
            return unknown_option("cka", a);
        }
    }
    if (n_models != 2 || !o->data) {
        fprintf(stderr, "toy cka: needs -m A -m B and --data FILE (see toy cka --help)\n");
        return 2;
    }
    return GO_ON;
}

static int run_cka(const cka_options *o) {
    int rc = 1;
    toy_model *m[2] = {NULL, NULL};
    char *text = NULL;
    int32_t *tokens = NULL;
    double *cka = NULL;
    for (int k = 0; k < 2; k++)
        if (!load_model("cka", o->paths[k], o->model.no_mmap, &m[k])) goto done;
    size_t len = 0;
    if (!(text = read_text_file("cka", o->data, &len))) goto done;
    int32_t need = 0;
    if (toy_tokenize_alloc(toy_model_vocab(m[0]), text, len, true, false, &tokens, &need)) {
        fprintf(stderr, "toy cka: %s: %s\n", o->data, toy_last_error());
        goto done;
    }
    if (need < o->n_tokens) {
        fprintf(stderr, "toy cka: %s holds %d tokens, fewer than --tokens %d\n", o->data, need, o->n_tokens);
        goto done;
    }
    int la, lb;
    if (toy_cka_models_tap(m[0], m[1], o->tap, tokens, o->n_tokens, o->window, o->model.n_threads, &cka, &la, &lb)) {
        fprintf(stderr, "toy cka: %s\n", toy_last_error());
        goto done;
    }
    if (o->json) {
        printf("{\"model_a\": ");
        print_json_string(stdout, o->paths[0], strlen(o->paths[0]));
        printf(", \"model_b\": ");
        print_json_string(stdout, o->paths[1], strlen(o->paths[1]));
        printf(", \"tap\": ");
        print_json_string(stdout, o->tap, strlen(o->tap));
        printf(", \"layers_a\": %d, \"layers_b\": %d, \"tokens\": %d, \"cka\": [", la, lb, o->n_tokens);
        for (int i = 0; i < la; i++) {
            printf("%s[", i ? ", " : "");
            for (int j = 0; j < lb; j++) printf("%s%.6f", j ? ", " : "", cka[i * lb + j]);
            printf("]");
        }
        printf("]}\n");
    } else {
        printf("linear CKA of tap %s over %d tokens: rows are the blocks of %s, columns those of %s\n", o->tap,
               o->n_tokens, o->paths[0], o->paths[1]);
        printf("     ");
        for (int j = 0; j < lb; j++) printf(" B%-4d", j);
        printf("\n");
        for (int i = 0; i < la; i++) {
            printf("A%-4d", i);
            for (int j = 0; j < lb; j++) printf(" %.3f", cka[i * lb + j]);
            printf("\n");
        }
    }
    rc = 0;
done:
    free(cka);
    free(tokens);
    free(text);
    toy_model_free(m[0]);
    toy_model_free(m[1]);
    return rc;
}

int cmd_cka(int argc, char **argv) {
    cka_options o;
    const int rc = parse_cka_options(argc, argv, &o);
    return rc == GO_ON ? run_cka(&o) : rc;
}
