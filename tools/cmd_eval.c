/* cmd_eval.c — `toy eval`: logits of every position of a token sequence, as raw float32.
 * The conformance interface: keep it stable. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "toy.h"

static const char *const eval_usage =
    "usage: toy eval -m MODEL --tokens ID,ID,... --dump-logits OUT [--mode batch|seq] [-t N]\n"
    "                [--cache-type-k T] [--cache-type-v T] [--lora FILE [--lora-scale S]]...\n"
    "\n"
    "Evaluates the token ids and writes the logits of every position to OUT as raw\n"
    "little-endian float32, one row of n_vocab per token.\n"
    "\n"
    "  -m, --model FILE     the GGUF model\n"
    "  --tokens LIST        comma-separated token ids\n"
    "  --dump-logits FILE   where the logits go\n"
    "  --mode batch         all tokens in one forward pass (default)\n"
    "  --mode seq           one token at a time through the KV cache\n"
    "  -t, --threads N      threads (default: the CPUs available)\n"
    "  --no-mmap            read the model into memory instead of mapping it\n"
    "  --split A,B,...      under mpirun -np N: the layers of each of the N pipeline stages\n"
    "                       (default: balanced by bytes; docs/pipeline.md)\n"
    "  --cache-type-k T     KV cache type of keys: f32 (default), f16, bf16, q8_0\n"
    "  --cache-type-v T     the same for values\n"
    "  --attn fused|plain   attention fused (default), or plain: scores, softmax and product\n"
    "                       with V each kept\n"
    "  --lora FILE          apply a LoRA adapter on the fly (repeatable)\n"
    "  --lora-scale S       the scale of the --lora before it (default 1)\n"
    "  -h, --help           this message\n";

typedef struct {
    model_options model;
    const char *token_list, *out;
    int32_t *tokens, n_tokens; /* --tokens, malloc'd: run_eval frees them */
    bool seq; /* --mode seq: one token at a time */
    int cache_k, cache_v;
    toy_attn attn;
    lora_options lora;
    trace_options trace;
} eval_options;

static int parse_eval_options(int argc, char **argv, eval_options *o) {
    *o = (eval_options){.model = {.n_threads = default_threads()}, .cache_k = TOY_TYPE_F32, .cache_v = TOY_TYPE_F32,
                        .trace = TRACE_OPTIONS_INIT};
    const char *mode = "batch";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(eval_usage, stdout);
            fputs(trace_options_help, stdout);
            return 0;
        } else if ((r = lora_parse_option("eval", argc, argv, &i, &o->lora)) ||
                   (r = trace_parse_option("eval", argc, argv, &i, &o->trace)) ||
                   (r = parse_model_option("eval", argc, argv, &i, &o->model))) {
            if (r < 0) return 2;
        } else if (!strcmp(a, "--tokens") && next) {
            o->token_list = argv[++i];
        } else if (!strcmp(a, "--dump-logits") && next) {
            o->out = argv[++i];
        } else if (!strcmp(a, "--mode") && next) {
            mode = argv[++i];
        } else if (!strcmp(a, "--attn") && next) {
            if (!parse_attn("eval", argv[++i], &o->attn)) return 2;
        } else if (!strcmp(a, "--cache-type-k") || !strcmp(a, "--cache-type-v")) {
            if (!parse_cache_type("eval", a, next, a[13] == 'k' ? &o->cache_k : &o->cache_v)) return 2;
            i++;
        } else {
            return unknown_option("eval", a);
        }
    }
    if (!o->model.path || !o->token_list || !o->out) {
        fprintf(stderr, "toy eval: needs -m MODEL, --tokens and --dump-logits (see toy eval --help)\n");
        return 2;
    }
    o->seq = !strcmp(mode, "seq");
    if (!o->seq && strcmp(mode, "batch")) {
        fprintf(stderr, "toy eval: --mode must be batch or seq, got '%s'\n", mode);
        return 2;
    }
    o->tokens = parse_token_list("eval", o->token_list, &o->n_tokens);
    return o->tokens ? GO_ON : 2;
}

static int run_eval(eval_options *o) {
    int32_t *tokens = o->tokens, n = o->n_tokens;
    int rc = 1;
    toy_model *m = NULL;
    toy_context *ctx = NULL;
    FILE *out = NULL;
    int32_t *pos = malloc((size_t)n * sizeof *pos), *seq_id = calloc((size_t)n, sizeof *seq_id);
    int8_t *want = malloc((size_t)n);
    if (!pos || !seq_id || !want) goto done;
    for (int32_t i = 0; i < n; i++) pos[i] = i, want[i] = 1;
    if (!load_model("eval", o->model.path, o->model.no_mmap, &m)) goto done;
    const int32_t n_vocab = toy_model_n_vocab(m);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] >= n_vocab) {
            fprintf(stderr, "toy eval: --tokens item %d (%d) is not a token id of %s (0..%d)\n",
                    i + 1, tokens[i], o->model.path, n_vocab - 1);
            goto done;
        }
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = n;
    cp.n_batch = o->seq ? 1 : n;
    cp.n_outputs = cp.n_batch;
    cp.n_threads = o->model.n_threads;
    cp.cache_type_k = o->cache_k;
    cp.attn = o->attn;
    cp.cache_type_v = o->cache_v;
    if (!trace_options_begin("eval", &o->trace, m)) goto done;
    trace_options_apply(&o->trace, &cp);
    if (toy_context_new(m, &cp, &ctx)) {
        fprintf(stderr, "toy eval: %s\n", toy_last_error());
        goto done;
    }
    if (!lora_options_apply("eval", &o->lora, m, ctx)) goto done;
    out = fopen(o->out, "wb");
    if (!out) {
        fprintf(stderr, "toy eval: %s: cannot open for writing: %s\n", o->out, strerror(errno));
        goto done;
    }
    int32_t step = o->seq ? 1 : n;
    for (int32_t i = 0; i < n; i += step) {
        toy_batch b = {step, tokens + i, pos + i, seq_id + i, want};
        if (toy_decode(ctx, &b)) {
            fprintf(stderr, "toy eval: %s\n", toy_last_error());
            goto done;
        }
        for (int32_t j = 0; j < step; j++)
            if (fwrite(toy_get_logits(ctx, j), sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab) {
                fprintf(stderr, "toy eval: %s: write failed\n", o->out);
                goto done;
            }
    }
    if (fclose(out) != 0) {
        out = NULL;
        fprintf(stderr, "toy eval: %s: write failed\n", o->out);
        goto done;
    }
    out = NULL;
    rc = 0;
done:
    if (out) fclose(out);
    if (!trace_options_end(&o->trace)) rc = 1;
    toy_context_free(ctx);
    lora_options_free(&o->lora);
    toy_model_free(m);
    free(tokens);
    free(pos);
    free(seq_id);
    free(want);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    eval_options o;
    const int rc = parse_eval_options(argc, argv, &o);
    return rc == GO_ON ? run_eval(&o) : rc;
}
