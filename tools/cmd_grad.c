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

int cmd_grad(int argc, char **argv) {
    const char *model_path = NULL, *tokens_arg = NULL, *out_path = NULL, *lora_path = NULL;
    int n_threads = default_threads();
    bool no_mmap = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(grad_usage, stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && next) {
            model_path = argv[++i];
        } else if (!strcmp(a, "--lora") && next) {
            lora_path = argv[++i];
        } else if (!strcmp(a, "--tokens") && next) {
            tokens_arg = argv[++i];
        } else if (!strcmp(a, "--out") && next) {
            out_path = argv[++i];
        } else if (!strcmp(a, "--no-mmap")) {
            no_mmap = true;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!parse_int_arg("grad", a, next, 1, 256, &n_threads)) return 2;
            i++;
        } else {
            fprintf(stderr, "toy grad: unknown or incomplete option '%s' (see toy grad --help)\n", a);
            return 2;
        }
    }
    if (!model_path || !tokens_arg || !out_path) {
        fprintf(stderr, "toy grad: needs -m MODEL, --tokens and --out (see toy grad --help)\n");
        return 2;
    }
    int32_t n = 0;
    int32_t *tokens = parse_token_list("grad", tokens_arg, &n);
    if (!tokens) return 2;
    double loss;
    toy_model *m = NULL;
    if (!load_model("grad", model_path, no_mmap, &m)) {
        free(tokens);
        return 1;
    }
    toy_grad_params gp = toy_grad_default_params();
    gp.model = m;
    gp.lora_path = lora_path;
    gp.n_threads = n_threads;
    toy_status st = toy_grad(&gp, tokens, n, out_path, &loss);
    free(tokens);
    toy_model_free(m);
    if (st) {
        fprintf(stderr, "toy grad: %s\n", toy_last_error());
        return 1;
    }
    printf("loss %.7f over %d predicted tokens; gradients written to %s\n", loss, n - 1, out_path);
    return 0;
}
