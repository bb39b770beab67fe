/* cmd_grad.c — `toy grad`: the loss of a token sequence and the gradient of every weight
 * tensor, as a GGUF file. The interface gradients are checked through: keep it stable. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "toy.h"

static const char *const grad_usage =
    "usage: toy grad -m MODEL [--lora ADAPTER] --tokens ID,ID,... --out GRADS.gguf [-t N]\n"
    "\n"
    "Evaluates the tokens as one causal sequence from position 0 and writes the gradient of\n"
    "the next-token loss (cross-entropy, the mean over the n - 1 predicted tokens) with\n"
    "respect to every tensor of the model: a GGUF of F32 tensors with the model's tensor\n"
    "names and shapes, and the loss as the float key toy.loss. Quantized weights are\n"
    "differentiated as their dequantized values, GELU as the smooth tanh-GELU.\n"
    "\n"
    "  -m, --model FILE     the GGUF model (a dense architecture)\n"
    "  --lora FILE          a LoRA adapter on it: the gradients of the adapter's tensors\n"
    "                       (W.lora_a, W.lora_b), the model frozen in its own type\n"
    "  --tokens LIST        comma-separated token ids (at least 2)\n"
    "  --out FILE           where the gradients go\n"
    "  -t, --threads N      threads (default: the CPUs available; the result is the same)\n"
    "  --no-mmap            read the model into memory instead of mapping it\n"
    "  -h, --help           this message\n";

typedef struct {
    model_options model;
    const char *lora, *token_list, *out;
    int32_t *tokens, n_tokens; /* --tokens, malloc'd: run_grad frees them */
} grad_options;

static int parse_grad_options(int argc, char **argv, grad_options *o) {
    *o = (grad_options){.model = {.n_threads = default_threads()}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(grad_usage, stdout);
            return 0;
        } else if ((r = parse_model_option("grad", argc, argv, &i, &o->model))) {
            if (r < 0) return 2;
        } else if (!strcmp(a, "--lora") && next) {
            o->lora = argv[++i];
        } else if (!strcmp(a, "--tokens") && next) {
            o->token_list = argv[++i];
        } else if (!strcmp(a, "--out") && next) {
            o->out = argv[++i];
        } else {
            return unknown_option("grad", a);
        }
    }
    if (!o->model.path || !o->token_list || !o->out) {
        fprintf(stderr, "toy grad: needs -m MODEL, --tokens and --out (see toy grad --help)\n");
        return 2;
    }
    o->tokens = parse_token_list("grad", o->token_list, &o->n_tokens);
    return o->tokens ? GO_ON : 2;
}

static int run_grad(grad_options *o) {
    int32_t *tokens = o->tokens, n = o->n_tokens;
    double loss;
    toy_model *m = NULL;
    if (!load_model("grad", o->model.path, o->model.no_mmap, &m)) {
        free(tokens);
        return 1;
    }
    toy_grad_params gp = toy_grad_default_params();
    gp.model = m;
    gp.lora_path = o->lora;
    gp.n_threads = o->model.n_threads;
    toy_status st = toy_grad(&gp, tokens, n, o->out, &loss);
    free(tokens);
    toy_model_free(m);
    if (st) {
        fprintf(stderr, "toy grad: %s\n", toy_last_error());
        return 1;
    }
    printf("loss %.7f over %d predicted tokens; gradients written to %s\n", loss, n - 1, o->out);
    return 0;
}

int cmd_grad(int argc, char **argv) {
    grad_options o;
    const int rc = parse_grad_options(argc, argv, &o);
    return rc == GO_ON ? run_grad(&o) : rc;
}
