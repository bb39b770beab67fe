/* cmd_run.c — `toy run`: generate text from a prompt, streamed to stdout. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "generation.h"

static const char *const run_usage_head =
    "usage: toy run [-m MODEL] -p PROMPT [options]\n"
    "\n"
    "Generates a continuation of PROMPT and streams it to stdout; prompt-processing and\n"
    "generation speed go to stderr.\n"
    "\n"
    "  -p, --prompt TEXT       the prompt\n"
    "  --parse-special         turn special-token text in the prompt into those tokens\n"
    "  --no-bos                add no BOS/EOS to the prompt\n";

typedef struct {
    gen_options gen;
    const char *prompt;
    bool parse_special, add_special;
} run_options;

static int parse_run_options(int argc, char **argv, run_options *o) {
    *o = (run_options){.add_special = true};
    gen_options_default(&o->gen);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(run_usage_head, stdout);
            fputs(gen_options_help, stdout);
            fputs(lora_options_help, stdout);
            fputs(trace_options_help, stdout);
            fputs("  -h, --help              this message\n", stdout);
            return 0;
        }
        int r = gen_parse_option("run", argc, argv, &i, &o->gen);
        if (r < 0) return 2;
        if (r > 0) continue;
        if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc) {
            o->prompt = argv[++i];
        } else if (!strcmp(a, "--parse-special")) {
            o->parse_special = true;
        } else if (!strcmp(a, "--no-bos")) {
            o->add_special = false;
        } else {
            return unknown_option("run", a);
        }
    }
    if (!o->prompt) {
        fprintf(stderr, "toy run: needs -p PROMPT (see toy run --help)\n");
        return 2;
    }
    return gen_options_check("run", &o->gen) ? GO_ON : 2;
}

static int run_run(const run_options *o) {
    gen_session s;
    if (!gen_session_open(&s, "run", &o->gen)) return 1;
    s.feed_last = false; /* nothing follows the last token: no forward pass for it */
    size_t len = strlen(o->prompt);
    int32_t *tokens = NULL, n = 0;
    int rc = 1;
    if (toy_tokenize_alloc(s.vocab, o->prompt, len, o->add_special, o->parse_special, &tokens, &n)) {
        fprintf(stderr, "toy run: %s\n", toy_last_error());
        goto done;
    }
    if (n == 0) {
        fprintf(stderr, "toy run: the prompt gives no tokens\n");
        goto done;
    }
    fwrite(o->prompt, 1, len, stdout);
    fflush(stdout);
    if (gen_session_generate(&s, "run", tokens, n, NULL, NULL, NULL) != GEN_OK) goto done;
    putchar('\n');
    gen_session_report(&s, "run");
    rc = 0;
done:
    free(tokens);
    gen_session_close(&s);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_options o;
    const int rc = parse_run_options(argc, argv, &o);
    return rc == GO_ON ? run_run(&o) : rc;
}
