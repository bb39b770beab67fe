/* generate.c — text from a prompt with libtoy: load a model, make a context and a
 * sampler, and stream the continuation to stdout as toy_generate produces it.
 *
 *   cc generate.c $(pkg-config --cflags --libs toy) -o generate
 *   ./generate model.gguf "And it came to pass" 40
 *
 * Greedy sampling, so the text is the same on every run (and the same as
 * `toy run -m model.gguf -p "And it came to pass" -n 40 --temp 0`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <toy.h>

/* toy_generate calls this with the text of each new token that is safe to print */
static bool print_text(void *user, int32_t token, const char *text, size_t len) {
    (void)user;
    (void)token;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true; /* false would stop the generation */
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_TOKENS]\n", argv[0]);
        return 2;
    }
    const char *prompt = argv[2];
    const int n_tokens = argc > 3 ? atoi(argv[3]) : 64;

    toy_model *model = NULL;
    toy_context *ctx = NULL;
    toy_sampler *sampler = NULL;
    int32_t *tokens = NULL;
    int rc = 1;

    if (toy_model_load(argv[1], &model) != TOY_OK) goto done;

    toy_context_params cp = toy_context_default_params(); /* the model's context length */
    cp.n_threads = 2;
    if (toy_context_new(model, &cp, &ctx) != TOY_OK) goto done;

    toy_sampler_params sp = toy_sampler_default_params();
    sp.temperature = 0.0f; /* greedy: the most likely token every time */
    if (toy_sampler_new(&sp, toy_model_n_vocab(model), &sampler) != TOY_OK) goto done;

    /* the prompt's token ids, with BOS first where the model's tokenizer asks for it */
    int32_t n = 0;
    if (toy_tokenize_alloc(toy_model_vocab(model), prompt, strlen(prompt), true, false, &tokens, &n) != TOY_OK)
        goto done;

    toy_generate_params gp = toy_generate_default_params();
    gp.max_tokens = n_tokens;
    gp.on_text = print_text;
    toy_generate_result result = {.size = sizeof result};
    fputs(prompt, stdout);
    if (toy_generate(ctx, sampler, tokens, n, &gp, &result) != TOY_OK) goto done;
    putchar('\n');
    fprintf(stderr, "%d prompt tokens, %d generated at %.1f tokens/s\n", result.n_prompt,
            result.n_generated, result.gen_seconds > 0 ? result.n_generated / result.gen_seconds : 0.0);
    rc = 0;
done:
    if (rc) fprintf(stderr, "generate: %s\n", toy_last_error());
    toy_free(tokens);
    toy_sampler_free(sampler);
    toy_context_free(ctx);
    toy_model_free(model);
    return rc;
}
