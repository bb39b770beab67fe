/* cmd_perplexity.c — `toy perplexity`: the perplexity of a model over a text file, by
 * llama.cpp's method (llama-perplexity's default mode), so the two numbers can be
 * compared directly.
 *
 * The text is tokenized whole and cut into non-overlapping windows of n_ctx tokens; each
 * window is evaluated from an empty KV cache and only its second half is scored, so every
 * scored token sees at least n_ctx/2 tokens of context. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "toy.h"
#include "clock.h"

static const char *const perplexity_usage =
    "usage: toy perplexity -m MODEL -f FILE [-c N] [-b N] [-t N] [--chunks N] [--lora FILE]...\n"
    "\n"
    "Prints the perplexity of MODEL over the text of FILE as llama.cpp's llama-perplexity\n"
    "computes it: the text is tokenized (with BOS when the vocabulary adds one) and cut\n"
    "into windows of N tokens; each window is evaluated on its own and the second half of\n"
    "its tokens is scored. The running perplexity after each window goes to stdout, then\n"
    "\"Final estimate: PPL = x +/- y\".\n"
    "\n"
    "  -m, --model FILE       the GGUF model\n"
    "  -f, --file FILE        the text (one trailing newline is dropped, as llama.cpp does)\n"
    "  -c, --ctx-size N       tokens per window (default 512); the text needs at least 2N\n"
    "  -b, --batch-size N     tokens per forward pass (default 2048); from 2N up, whole\n"
    "                         windows share a pass as separate sequences\n"
    "  -t, --threads N        threads (default: the CPUs available)\n"
    "  --no-mmap              read the model into memory instead of mapping it\n"
    "  --split A,B,...        under mpirun -np N: the layers of each of the N pipeline stages\n"
    "                         (default: balanced by bytes; docs/pipeline.md)\n"
    "  --chunks N             score at most N windows (default -1: all)\n"
    "  --cache-type-k T       KV cache type of keys: f16 (default, as llama-perplexity's),\n"
    "                         f32, bf16, q8_0\n"
    "  --cache-type-v T       the same for values\n"
    "  --attn fused|plain     attention fused (default), or plain: scores, softmax and product\n"
    "                         with V each kept\n"
    "  --lora FILE            apply a LoRA adapter on the fly (repeatable)\n"
    "  --lora-scale S         the scale of the --lora before it (default 1)\n"
    "  -h, --help             this message\n";

/* Token ids of the text with add_special (BOS/EOS as the vocabulary asks) and no
 * special-token parsing, as llama-perplexity tokenizes; malloc'd. */
static int32_t *tokenize_text(const toy_vocab *vocab, const char *path, const char *text,
                              size_t len, int32_t *n_out) {
    if (len > (size_t)INT32_MAX - 64) {
        fprintf(stderr, "toy perplexity: %s: %zu bytes is more than toy tokenizes at once\n", path, len);
        return NULL;
    }
    int32_t *ids = NULL, n = 0;
    if (toy_tokenize_alloc(vocab, text, len, true, false, &ids, &n)) {
        fprintf(stderr, "toy perplexity: %s: %s\n", path, toy_last_error());
        return NULL;
    }
    *n_out = n;
    return ids;
}

/* -log p(token | logits): log-softmax in double, over the maximum for range. */
static double token_nll(const float *logits, int32_t n_vocab, int32_t token) {
    float max = logits[0];
    for (int32_t v = 1; v < n_vocab; v++)
        if (logits[v] > max) max = logits[v];
    double sum_exp = 0;
    for (int32_t v = 0; v < n_vocab; v++) sum_exp += exp((double)logits[v] - max);
    return log(sum_exp) - ((double)logits[token] - max);
}

typedef struct {
    model_options model;
    const char *text_path;
    int n_ctx, n_batch, max_chunks; /* max_chunks -1: all */
    int cache_k, cache_v;
    toy_attn attn;
    lora_options lora;
    trace_options trace;
} perplexity_options;

static int parse_perplexity_options(int argc, char **argv, perplexity_options *o) {
    /* llama-perplexity's defaults: -c 512, -b 2048 */
    *o = (perplexity_options){.model = {.n_threads = default_threads()}, .n_ctx = 512, .n_batch = 2048,
                              .max_chunks = -1, .cache_k = TOY_TYPE_F16, .cache_v = TOY_TYPE_F16,
                              .trace = TRACE_OPTIONS_INIT};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(perplexity_usage, stdout);
            fputs(trace_options_help, stdout);
            return 0;
        } else if ((r = lora_parse_option("perplexity", argc, argv, &i, &o->lora)) ||
                   (r = trace_parse_option("perplexity", argc, argv, &i, &o->trace)) ||
                   (r = parse_model_option("perplexity", argc, argv, &i, &o->model))) {
            if (r < 0) return 2;
        } else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && next) {
            o->text_path = argv[++i];
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            /* 3 is the least window with a scored token: positions n_ctx/2 .. n_ctx-2 */
            if (!parse_int_arg("perplexity", a, next, 3, 1 << 24, &o->n_ctx)) return 2;
            i++;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            if (!parse_int_arg("perplexity", a, next, 1, 1 << 16, &o->n_batch)) return 2;
            i++;
        } else if (!strcmp(a, "--attn") && next) {
            if (!parse_attn("perplexity", argv[++i], &o->attn)) return 2;
        } else if (!strcmp(a, "--cache-type-k") || !strcmp(a, "--cache-type-v")) {
            if (!parse_cache_type("perplexity", a, next, a[13] == 'k' ? &o->cache_k : &o->cache_v)) return 2;
            i++;
        } else if (!strcmp(a, "--chunks")) {
            if (!parse_int_arg("perplexity", a, next, -1, INT32_MAX, &o->max_chunks)) return 2;
            if (o->max_chunks == 0) {
                fprintf(stderr, "toy perplexity: --chunks must be -1 (all) or at least 1, got '0'\n");
                return 2;
            }
            i++;
        } else {
            return unknown_option("perplexity", a);
        }
    }
    if (!o->model.path || !o->text_path) {
        fprintf(stderr, "toy perplexity: needs -m MODEL and -f FILE (see toy perplexity --help)\n");
        return 2;
    }
    return GO_ON;
}

static int run_perplexity(perplexity_options *o) {
    const int32_t n_ctx = o->n_ctx, n_batch = o->n_batch;
    int rc = 1;
    size_t text_len = 0;
    char *text = NULL;
    int32_t *tokens = NULL, *win_tokens = NULL, *win_pos = NULL, *win_seq = NULL;
    int8_t *win_want = NULL;
    toy_model *m = NULL;
    toy_context *ctx = NULL;

    if (!(text = read_text_file("perplexity", o->text_path, &text_len))) goto done;
    if (text_len > 0 && text[text_len - 1] == '\n') text_len--; /* llama.cpp's -f drops exactly one */
    if (!load_model("perplexity", o->model.path, o->model.no_mmap, &m)) goto done;
    const toy_vocab *vocab = toy_model_vocab(m);
    int32_t n_tokens = 0;
    if (!(tokens = tokenize_text(vocab, o->text_path, text, text_len, &n_tokens))) goto done;
    if (n_tokens < 2LL * n_ctx) {
        fprintf(stderr, "toy perplexity: %s tokenizes to only %d tokens; -c %d needs at least %lld "
                        "(two windows)\n", o->text_path, n_tokens, n_ctx, 2LL * n_ctx);
        goto done;
    }
    if (toy_model_n_ctx_train(m) > 0 && n_ctx > toy_model_n_ctx_train(m))
        fprintf(stderr, "toy perplexity: warning: -c %d exceeds the context %s was trained on (%d)\n",
                n_ctx, o->model.path, toy_model_n_ctx_train(m));

    const int32_t n_chunk_max = n_tokens / n_ctx;
    const int32_t n_chunk = o->max_chunks < 0 || o->max_chunks > n_chunk_max ? n_chunk_max : o->max_chunks;
    /* As llama-perplexity: a batch of at least two windows holds whole windows, each its own
     * sequence; a smaller one is a slice of one window. (More sequences than windows would
     * only cost memory.) */
    int32_t n_seq = n_batch / n_ctx > 1 ? n_batch / n_ctx : 1;
    if (n_seq > n_chunk) n_seq = n_chunk;
    const int32_t step = n_batch < n_ctx ? n_batch : n_seq * n_ctx;
    /* Only the second half is scored: the logits at positions first .. n_ctx-2 predict
     * the tokens at first+1 .. n_ctx-1. */
    const int32_t first = n_ctx / 2, n_scored = n_ctx - 1 - first;
    const bool add_bos = toy_vocab_add_bos(vocab) && toy_vocab_bos(vocab) >= 0;
    const int32_t n_vocab = toy_model_n_vocab(m);

    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_seq_max = n_seq;
    cp.n_batch = step;
    cp.n_outputs = step < n_seq * n_scored ? step : n_seq * n_scored;
    cp.n_threads = o->model.n_threads;
    cp.cache_type_k = o->cache_k;
    cp.attn = o->attn;
    cp.cache_type_v = o->cache_v;
    if (!trace_options_begin("perplexity", &o->trace, m)) goto done;
    trace_options_apply(&o->trace, &cp);
    if (toy_context_new(m, &cp, &ctx)) {
        fprintf(stderr, "toy perplexity: %s\n", toy_last_error());
        goto done;
    }
    if (!lora_options_apply("perplexity", &o->lora, m, ctx)) goto done;
    const size_t n_win = (size_t)n_seq * (size_t)n_ctx;
    win_tokens = malloc(n_win * sizeof *win_tokens);
    win_pos = malloc(n_win * sizeof *win_pos);
    win_seq = malloc(n_win * sizeof *win_seq);
    win_want = malloc(n_win);
    if (!win_tokens || !win_pos || !win_seq || !win_want) {
        fprintf(stderr, "toy perplexity: no memory for %d windows of %d tokens\n", n_seq, n_ctx);
        goto done;
    }
    for (size_t j = 0; j < n_win; j++) {
        win_pos[j] = (int32_t)(j % (size_t)n_ctx);
        win_seq[j] = (int32_t)(j / (size_t)n_ctx);
        win_want[j] = win_pos[j] >= first && win_pos[j] < n_ctx - 1;
    }
    fprintf(stderr, "toy perplexity: %d tokens, %d chunks of %d, batch %d (%d sequences), %d threads\n",
            n_tokens, n_chunk, n_ctx, step, n_seq, o->model.n_threads);

    double nll = 0, nll2 = 0, t0 = ty_now_s();
    int64_t count = 0;
    for (int32_t c0 = 0; c0 < n_chunk; c0 += n_seq) {
        const int32_t ns = n_chunk - c0 < n_seq ? n_chunk - c0 : n_seq;
        const int32_t n = ns * n_ctx;
        memcpy(win_tokens, tokens + (size_t)c0 * (size_t)n_ctx, (size_t)n * sizeof *win_tokens);
        for (int32_t s = 0; s < ns; s++) {
            /* llama.cpp starts every window with BOS, whatever token was there */
            if (add_bos) win_tokens[(size_t)s * (size_t)n_ctx] = toy_vocab_bos(vocab);
            toy_kv_seq_rm(ctx, s, 0, -1);
        }
        for (int32_t b0 = 0; b0 < n; b0 += step) {
            const int32_t nb = n - b0 < step ? n - b0 : step;
            toy_batch batch = {nb, win_tokens + b0, win_pos + b0, win_seq + b0, win_want + b0};
            if (toy_decode(ctx, &batch)) {
                fprintf(stderr, "toy perplexity: %s\n", toy_last_error());
                goto done;
            }
            for (int32_t j = 0; j < nb; j++) {
                if (!win_want[b0 + j]) continue;
                /* the original next token: only a window's first token was replaced */
                double x = token_nll(toy_get_logits(ctx, j), n_vocab, win_tokens[b0 + j + 1]);
                nll += x;
                nll2 += x * x;
                count++;
                /* the running figure after each window, as llama.cpp prints it */
                if (win_pos[b0 + j] == n_ctx - 2)
                    printf("[%d]%.4f,", c0 + win_seq[b0 + j] + 1, exp(nll / (double)count));
            }
        }
        fflush(stdout);
    }
    double seconds = ty_now_s() - t0;

    /* llama.cpp's uncertainty: the standard error of the mean NLL, times the perplexity */
    double mean = nll / (double)count, var = nll2 / (double)count - mean * mean, ppl = exp(mean);
    double err = var > 0 ? sqrt(var / (double)(count - 1)) : 0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err * ppl);
    fflush(stdout);
    fprintf(stderr, "toy perplexity: %d chunks in %.2f s (%.1f tokens/s)\n", n_chunk, seconds,
            seconds > 0 ? (double)n_chunk * n_ctx / seconds : 0.0);
    rc = 0;
done:
    if (!trace_options_end(&o->trace)) rc = 1;
    toy_context_free(ctx);
    lora_options_free(&o->lora);
    toy_model_free(m);
    free(text);
    free(tokens);
    free(win_tokens);
    free(win_pos);
    free(win_seq);
    free(win_want);
    return rc;
}

int cmd_perplexity(int argc, char **argv) {
    perplexity_options o;
    const int rc = parse_perplexity_options(argc, argv, &o);
    return rc == GO_ON ? run_perplexity(&o) : rc;
}
