/* generate.c — see generate.h. */
#include "generate.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"

const char *const gen_options_help =
    "  -m, --model FILE        the GGUF model (default: the bundled models/" TOY_DEFAULT_MODEL ")\n"
    "  -n, --n-predict N       tokens to generate (default -1: until end of text or context)\n"
    "  -c, --ctx-size N        context length (default: the model's)\n"
    "  -b, --batch-size N      tokens per forward pass of the prompt (default 512)\n"
    "  -t, --threads N         threads (default: the CPUs available)\n"
    "  --temp T                temperature (default 0.8; 0 = greedy)\n"
    "  --top-k K               keep the K most likely tokens (default 40; 0 = off)\n"
    "  --top-p P               nucleus sampling (default 0.95; 1 = off)\n"
    "  --min-p P               drop tokens below P x the most likely (default 0.05; 0 = off)\n"
    "  --repeat-penalty F      penalty for repeated tokens (default 1.0 = off)\n"
    "  --repeat-last-n N       tokens the penalties look back over (default 64)\n"
    "  --frequency-penalty F   (default 0)\n"
    "  --presence-penalty F    (default 0)\n"
    "  --seed S                random seed (default: from the clock)\n"
    "  --stop TEXT             stop when TEXT is generated (repeatable)\n"
    "  --context-shift         when the context is full, drop the oldest tokens and go on\n"
    "  --keep N                tokens kept at the start on a context shift (default 0)\n"
    "  --trace                 min/max/mean|x|/NaNs of intermediate tensors to stderr\n"
    "  --sliding-window        use attention.sliding_window where llama.cpp ignores it (phi3)\n"
    "  --cache-type-k T        KV cache type of keys: f32 (default), f16, bf16, q8_0\n"
    "  --cache-type-v T        the same for values\n"
    "  --mlock                 lock the weights in RAM\n";

void gen_options_default(gen_options *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->n_batch = 512;
    o->n_threads = default_threads();
    o->sampling = toy_sampler_default_params();
    o->sampling.seed = (uint64_t)time(NULL);
    o->cache_type_k = o->cache_type_v = TOY_TYPE_F32;
}

static bool parse_float_arg(const char *cmd, const char *flag, const char *v, float *out) {
    char *end;
    if (!v) {
        fprintf(stderr, "toy %s: %s needs a value\n", cmd, flag);
        return false;
    }
    float x = strtof(v, &end);
    if (*v == 0 || *end != 0 || !isfinite(x)) {
        fprintf(stderr, "toy %s: %s must be a number, got '%s'\n", cmd, flag, v);
        return false;
    }
    *out = x;
    return true;
}

int gen_parse_option(const char *cmd, int argc, char **argv, int *i, gen_options *o) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int x;
    bool ok;
    const int lora = lora_parse_option(cmd, argc, argv, i, &o->lora);
    if (lora) return lora;
#define IS(s) (strcmp(a, s) == 0)
    if (IS("-m") || IS("--model")) {
        if (!v) {
            fprintf(stderr, "toy %s: %s needs a value\n", cmd, a);
            return -1;
        }
        o->model_path = v;
        ok = true;
    } else if (IS("-n") || IS("--n-predict")) {
        ok = parse_int_arg(cmd, a, v, -1, INT32_MAX, &x);
        o->n_predict = x;
    } else if (IS("-c") || IS("--ctx-size")) {
        ok = parse_int_arg(cmd, a, v, 0, 1 << 24, &x);
        o->n_ctx = x;
    } else if (IS("-b") || IS("--batch-size")) {
        ok = parse_int_arg(cmd, a, v, 1, 1 << 16, &x);
        o->n_batch = x;
    } else if (IS("-t") || IS("--threads")) {
        ok = parse_int_arg(cmd, a, v, 1, 256, &o->n_threads);
    } else if (IS("--temp")) {
        ok = parse_float_arg(cmd, a, v, &o->sampling.temperature);
    } else if (IS("--top-k")) {
        ok = parse_int_arg(cmd, a, v, 0, INT32_MAX, &x);
        o->sampling.top_k = x;
    } else if (IS("--top-p")) {
        ok = parse_float_arg(cmd, a, v, &o->sampling.top_p);
    } else if (IS("--min-p")) {
        ok = parse_float_arg(cmd, a, v, &o->sampling.min_p);
    } else if (IS("--repeat-penalty")) {
        ok = parse_float_arg(cmd, a, v, &o->sampling.repeat_penalty);
    } else if (IS("--repeat-last-n")) {
        ok = parse_int_arg(cmd, a, v, -1, INT32_MAX, &x);
        o->sampling.repeat_last_n = x;
    } else if (IS("--frequency-penalty")) {
        ok = parse_float_arg(cmd, a, v, &o->sampling.frequency_penalty);
    } else if (IS("--presence-penalty")) {
        ok = parse_float_arg(cmd, a, v, &o->sampling.presence_penalty);
    } else if (IS("--seed")) {
        char *end;
        ok = v && *v && (o->sampling.seed = strtoull(v, &end, 10), *end == 0);
        if (!ok) fprintf(stderr, "toy %s: --seed must be a non-negative integer\n", cmd);
    } else if (IS("--stop")) {
        ok = v && o->n_stops < GEN_MAX_STOPS && *v;
        if (ok) o->stops[o->n_stops++] = v;
        else fprintf(stderr, "toy %s: --stop needs a non-empty value (at most %d)\n", cmd, GEN_MAX_STOPS);
    } else if (IS("--keep")) {
        ok = parse_int_arg(cmd, a, v, 0, INT32_MAX, &x);
        o->n_keep = x;
    } else if (IS("--context-shift")) {
        o->context_shift = true;
        return 1;
    } else if (IS("--trace")) {
        o->trace = true;
        return 1;
    } else if (IS("--cache-type-k") || IS("--cache-type-v")) {
        ok = parse_cache_type(cmd, a, v, IS("--cache-type-k") ? &o->cache_type_k : &o->cache_type_v);
    } else if (IS("--mlock")) {
        o->mlock = true;
        return 1;
    } else if (IS("--sliding-window")) {
        o->sliding_window = true;
        return 1;
    } else {
        return 0;
    }
#undef IS
    if (!ok) return -1;
    (*i)++;
    return 1;
}

/* ---------------------------------------------------------------- tracing */

static void trace_print(void *user, const char *name, const float *x, int64_t n_tok, int64_t n) {
    (void)user;
    float mn = FLT_MAX, mx = -FLT_MAX;
    double sum_abs = 0;
    int64_t nan = 0, total = n_tok * n;
    for (int64_t i = 0; i < total; i++) {
        float v = x[i];
        if (isnan(v)) {
            nan++;
            continue;
        }
        if (v < mn) mn = v;
        if (v > mx) mx = v;
        sum_abs += fabs(v);
    }
    fprintf(stderr, "trace %-16s [%lld x %lld] min %11.4g max %11.4g mean|x| %10.4g nan %lld\n", name,
            (long long)n_tok, (long long)n, mn, mx, total > nan ? sum_abs / (double)(total - nan) : 0.0,
            (long long)nan);
}

/* ---------------------------------------------------------------- session */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool gen_session_open(gen_session *s, const char *cmd, const gen_options *o) {
    memset(s, 0, sizeof *s);
    s->opt = *o;
    if (!s->opt.model_path && !(s->opt.model_path = default_model_path())) {
        fprintf(stderr, "toy %s: no model given (-m MODEL), and the bundled models/%s is not there\n", cmd,
                TOY_DEFAULT_MODEL);
        return false;
    }
    if (toy_model_load(s->opt.model_path, &s->model)) {
        fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
        return false;
    }
    s->vocab = toy_model_vocab(s->model);
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = o->n_ctx;
    cp.n_batch = o->n_batch;
    cp.n_threads = o->n_threads;
    cp.honor_sliding_window = o->sliding_window;
    cp.cache_type_k = o->cache_type_k;
    cp.cache_type_v = o->cache_type_v;
    if (o->mlock && toy_model_mlock(s->model)) fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
    if (o->trace) cp.trace = trace_print;
    if (toy_context_new(s->model, &cp, &s->ctx) ||
        toy_sampler_new(&o->sampling, toy_model_n_vocab(s->model), &s->sampler)) {
        fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
        gen_session_close(s);
        return false;
    }
    if (!lora_options_apply(cmd, &s->opt.lora, s->model, s->ctx)) {
        gen_session_close(s);
        return false;
    }
    s->n_ctx = toy_n_ctx(s->ctx);
    s->tokens = malloc((size_t)s->n_ctx * sizeof *s->tokens);
    if (!s->tokens) {
        fprintf(stderr, "toy %s: no memory\n", cmd);
        gen_session_close(s);
        return false;
    }
    return true;
}

void gen_session_close(gen_session *s) {
    toy_sampler_free(s->sampler);
    toy_context_free(s->ctx);
    lora_options_free(&s->opt.lora);
    toy_model_free(s->model);
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

void gen_session_truncate(gen_session *s, int32_t n_keep) {
    if (n_keep >= s->n_tokens) return;
    toy_kv_seq_rm(s->ctx, 0, n_keep, -1);
    s->n_tokens = n_keep;
    s->have_logits = false;
}

static bool decode(gen_session *s, const char *cmd, const int32_t *tokens, int32_t n) {
    int32_t pos[512], seq[512] = {0};
    for (int32_t i = 0; i < n; i++) pos[i] = s->n_tokens + i;
    toy_batch b = {n, tokens, pos, seq, NULL};
    if (toy_decode(s->ctx, &b)) {
        fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
        return false;
    }
    memcpy(s->tokens + s->n_tokens, tokens, (size_t)n * sizeof *tokens);
    s->n_tokens += n;
    s->have_logits = true;
    s->logits_index = n - 1;
    return true;
}

bool gen_session_feed(gen_session *s, const char *cmd, const int32_t *tokens, int32_t n) {
    if (s->n_tokens + n > s->n_ctx) {
        fprintf(stderr, "toy %s: the prompt is %d tokens but the context holds %d (%d in use); "
                        "use a larger -c\n", cmd, n, s->n_ctx, s->n_tokens);
        return false;
    }
    double t0 = now();
    int32_t step = toy_n_batch(s->ctx) < 512 ? toy_n_batch(s->ctx) : 512;
    for (int32_t i = 0; i < n; i += step) {
        int32_t k = n - i < step ? n - i : step;
        if (!decode(s, cmd, tokens + i, k)) return false;
    }
    for (int32_t i = 0; i < n; i++) toy_sampler_accept(s->sampler, tokens[i]);
    s->prompt_seconds += now() - t0;
    s->prompt_count += n;
    return true;
}

/* Makes room for one more token: drops half of what follows the kept prefix, as
 * llama.cpp's main does, and moves the rest down. */
static bool shift_context(gen_session *s) {
    int32_t keep = s->opt.n_keep < s->n_tokens ? s->opt.n_keep : 0;
    int32_t discard = (s->n_tokens - keep) / 2;
    if (discard <= 0) return false;
    toy_kv_seq_rm(s->ctx, 0, keep, keep + discard);
    toy_kv_seq_add(s->ctx, 0, keep + discard, s->n_tokens, -discard);
    memmove(s->tokens + keep, s->tokens + keep + discard,
            (size_t)(s->n_tokens - keep - discard) * sizeof *s->tokens);
    s->n_tokens -= discard;
    return true;
}

typedef struct {
    char *p;
    size_t len, cap;
} text_buf;

static void text_append(text_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

bool gen_session_generate(gen_session *s, const char *cmd, FILE *out,
                          volatile sig_atomic_t *interrupt, char **reply) {
    toy_stop *stop;
    if (toy_stop_new(s->opt.stops, s->opt.n_stops, &stop)) {
        fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
        return false;
    }
    text_buf text = {0};
    const int32_t n_vocab = toy_model_n_vocab(s->model);
    double t0 = now();
    bool ok = true;
    for (int32_t produced = 0; s->opt.n_predict < 0 || produced < s->opt.n_predict; produced++) {
        if (interrupt && *interrupt) break;
        if (!s->have_logits) break;
        const float *logits = toy_get_logits(s->ctx, s->logits_index);
        (void)n_vocab;
        int32_t tok = toy_sampler_sample(s->sampler, logits);
        toy_sampler_accept(s->sampler, tok);
        if (toy_vocab_is_eog(s->vocab, tok)) break;
        char piece[256];
        size_t len = 0;
        toy_token_to_piece(s->vocab, tok, false, piece, sizeof piece, &len);
        const char *emit;
        size_t emit_len;
        bool stopped = toy_stop_feed(stop, piece, len < sizeof piece ? len : sizeof piece, &emit, &emit_len);
        fwrite(emit, 1, emit_len, out);
        fflush(out);
        if (reply) text_append(&text, emit, emit_len);
        s->gen_count++;
        if (stopped) break;
        if (s->n_tokens >= s->n_ctx) {
            if (!s->opt.context_shift || !shift_context(s)) {
                fprintf(stderr, "\ntoy %s: context full (%d tokens); stopping (--context-shift "
                                "goes on)\n", cmd, s->n_ctx);
                break;
            }
        }
        if (!decode(s, cmd, &tok, 1)) {
            ok = false;
            break;
        }
    }
    const char *rest;
    size_t rest_len;
    toy_stop_flush(stop, &rest, &rest_len);
    fwrite(rest, 1, rest_len, out);
    fflush(out);
    if (reply) {
        text_append(&text, rest, rest_len);
        *reply = text.p ? text.p : calloc(1, 1);
    } else {
        free(text.p);
    }
    toy_stop_free(stop);
    s->gen_seconds += now() - t0;
    return ok;
}

void gen_session_report(const gen_session *s, const char *cmd) {
    fprintf(stderr, "\ntoy %s: prompt %lld tokens, %.2f tok/s; generation %lld tokens, %.2f tok/s\n", cmd,
            (long long)s->prompt_count,
            s->prompt_seconds > 0 ? (double)s->prompt_count / s->prompt_seconds : 0.0,
            (long long)s->gen_count, s->gen_seconds > 0 ? (double)s->gen_count / s->gen_seconds : 0.0);
}
