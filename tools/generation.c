/* generation.c — see generation.h. */
#include "generation.h"

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
    "  --sliding-window        use attention.sliding_window where llama.cpp ignores it (phi3)\n"
    "  --cache-type-k T        KV cache type of keys: f32 (default), f16, bf16, q8_0\n"
    "  --cache-type-v T        the same for values\n"
    "  --attn fused|plain      attention in one fused pass (default), or plain: the scores,\n"
    "                          their softmax and the product with V, each kept (traced\n"
    "                          as Ln.kq and Ln.kq_soft)\n"
    "  --mlock                 lock the weights in RAM\n"
    "  --no-mmap               read the model into memory instead of mapping it\n"
    "  --split A,B,...         under mpirun -np N: the layers of each of the N pipeline stages\n"
    "                          (default: balanced by bytes; docs/pipeline.md)\n"
    "  --grammar GBNF          generate only text of this grammar (GBNF; docs/grammars.md)\n"
    "  --grammar-file FILE     the same, the grammar read from FILE\n"
    "  --json-schema SCHEMA    generate only JSON that a JSON Schema allows: SCHEMA is a file,\n"
    "                          or the schema itself when it starts with '{' (docs/json-schema.md)\n"
    "                          (at most one of --grammar, --grammar-file, --json-schema)\n"
    "  --json-schema-strict    schema keywords toy does not support are errors, not ignored\n"
    "  --logit-bias T+B, T-B   add B to token T's logit, or subtract it; T-inf bans T\n"
    "                          (repeatable; a bias of -100 or less bans too)\n";

void gen_options_default(gen_options *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->n_batch = 512;
    o->model.n_threads = default_threads();
    o->sampling = toy_sampler_default_params();
    o->sampling.seed = (uint64_t)time(NULL);
    o->cache_type_k = o->cache_type_v = TOY_TYPE_F32;
    o->trace = (trace_options)TRACE_OPTIONS_INIT;
}

/* TOKEN+BIAS or TOKEN-BIAS, as llama.cpp's --logit-bias: "15043+1", "15043-inf" */
static bool parse_logit_bias(const char *cmd, const char *v, gen_options *o) {
    if (!v) {
        fprintf(stderr, "toy %s: --logit-bias needs TOKEN+BIAS or TOKEN-BIAS\n", cmd);
        return false;
    }
    char *end;
    const long token = (*v >= '0' && *v <= '9') ? strtol(v, &end, 10) : -1;
    const char sign = token >= 0 ? *end : 0;
    if (token < 0 || token > INT32_MAX || (sign != '+' && sign != '-') || !end[1]) {
        fprintf(stderr, "toy %s: --logit-bias '%s': expected TOKEN+BIAS or TOKEN-BIAS (15043+1, 15043-inf)\n", cmd,
                v);
        return false;
    }
    const char *num = end + 1;
    float bias = strtof(num, &end);
    if (*end || *num == '+' || *num == '-' || isnan(bias) || (sign == '+' && isinf(bias))) {
        fprintf(stderr, "toy %s: --logit-bias '%s': the bias must be a number (or inf after '-')\n", cmd, v);
        return false;
    }
    if (o->n_logit_bias == GEN_MAX_LOGIT_BIAS) {
        fprintf(stderr, "toy %s: at most %d --logit-bias\n", cmd, GEN_MAX_LOGIT_BIAS);
        return false;
    }
    o->logit_bias[o->n_logit_bias++] = (toy_logit_bias){(int32_t)token, sign == '-' ? -bias : bias};
    return true;
}

/* --grammar, --grammar-file, --json-schema: one of them */
static bool set_constraint(const char *cmd, const char *flag, const char *v, const char **dst, gen_options *o) {
    if (!v) {
        fprintf(stderr, "toy %s: %s needs a value\n", cmd, flag);
        return false;
    }
    if (o->constraint_flag && !strcmp(o->constraint_flag, flag)) {
        fprintf(stderr, "toy %s: %s is given twice: one grammar at most\n", cmd, flag);
        return false;
    }
    if (o->constraint_flag) {
        fprintf(stderr, "toy %s: %s cannot be combined with %s: one grammar at most\n", cmd, flag,
                o->constraint_flag);
        return false;
    }
    o->constraint_flag = flag;
    *dst = v;
    return true;
}

bool gen_options_check(const char *cmd, const gen_options *o) {
    if (o->json_schema_strict && !o->json_schema) {
        fprintf(stderr, "toy %s: --json-schema-strict needs --json-schema\n", cmd);
        return false;
    }
    return true;
}

int gen_parse_option(const char *cmd, int argc, char **argv, int *i, gen_options *o) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int x;
    bool ok;
#define IS(s) (strcmp(a, s) == 0)
    if ((IS("-m") || IS("--model")) && !v) {
        fprintf(stderr, "toy %s: %s needs a value\n", cmd, a);
        return -1;
    }
    const int lora = lora_parse_option(cmd, argc, argv, i, &o->lora);
    if (lora) return lora;
    const int trace = trace_parse_option(cmd, argc, argv, i, &o->trace);
    if (trace) return trace;
    const int model = parse_model_option(cmd, argc, argv, i, &o->model);
    if (model) return model;
    if (IS("-n") || IS("--n-predict")) {
        ok = parse_int_arg(cmd, a, v, -1, INT32_MAX, &x);
        o->n_predict = x;
    } else if (IS("-c") || IS("--ctx-size")) {
        ok = parse_int_arg(cmd, a, v, 0, 1 << 24, &x);
        o->n_ctx = x;
    } else if (IS("-b") || IS("--batch-size")) {
        ok = parse_int_arg(cmd, a, v, 1, 1 << 16, &x);
        o->n_batch = x;
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
    } else if (IS("--attn")) {
        ok = parse_attn(cmd, v, &o->attn);
    } else if (IS("--cache-type-k") || IS("--cache-type-v")) {
        ok = parse_cache_type(cmd, a, v, IS("--cache-type-k") ? &o->cache_type_k : &o->cache_type_v);
    } else if (IS("--mlock")) {
        o->mlock = true;
        return 1;
    } else if (IS("--sliding-window")) {
        o->sliding_window = true;
        return 1;
    } else if (IS("--grammar")) {
        ok = set_constraint(cmd, "--grammar", v, &o->grammar, o);
    } else if (IS("--grammar-file")) {
        ok = set_constraint(cmd, "--grammar-file", v, &o->grammar_file, o);
    } else if (IS("--json-schema")) {
        ok = set_constraint(cmd, "--json-schema", v, &o->json_schema, o);
    } else if (IS("--json-schema-strict")) {
        o->json_schema_strict = true;
        return 1;
    } else if (IS("--logit-bias")) {
        ok = parse_logit_bias(cmd, v, o);
    } else {
        return 0;
    }
#undef IS
    if (!ok) return -1;
    (*i)++;
    return 1;
}

/* ---------------------------------------------------------------- session */

/* The constraint's text, read before the model loads so that a missing file fails
 * fast: GBNF (*is_schema false) or a JSON Schema; *what names it in messages
 * ("--grammar", "--grammar-file FILE"). NULL without a constraint, or after a message
 * (*failed set). */
static char *constraint_text(const char *cmd, const gen_options *o, bool *is_schema, char *what, size_t what_size,
                             bool *failed) {
    *failed = false;
    *is_schema = o->json_schema != NULL;
    const char *file = o->grammar_file;
    if (o->json_schema) {
        const char *p = o->json_schema;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (*p != '{') file = o->json_schema;
    }
    if (file) snprintf(what, what_size, "%s %s", o->constraint_flag, file);
    else snprintf(what, what_size, "%s", o->constraint_flag ? o->constraint_flag : "");
    if (!o->constraint_flag) return NULL;
    size_t len;
    char *text = file ? read_text_file(cmd, file, &len) : strdup(o->grammar ? o->grammar : o->json_schema);
    if (!text) {
        if (!file) fprintf(stderr, "toy %s: no memory\n", cmd);
        *failed = true;
        return NULL;
    }
    if (!file) len = strlen(text);
    if (strlen(text) != len) {
        fprintf(stderr, "toy %s: %s: holds a NUL byte\n", cmd, what);
        free(text);
        *failed = true;
        return NULL;
    }
    return text;
}

bool gen_session_open(gen_session *s, const char *cmd, const gen_options *o) {
    memset(s, 0, sizeof *s);
    s->feed_last = true;
    s->opt = *o;
    if (!s->opt.model.path && !(s->opt.model.path = default_model_path())) {
        fprintf(stderr, "toy %s: no model given (-m MODEL), and the bundled models/%s is not there\n", cmd,
                TOY_DEFAULT_MODEL);
        return false;
    }
    bool is_schema, failed;
    char what[4200];
    char *constraint = constraint_text(cmd, o, &is_schema, what, sizeof what, &failed);
    if (failed) return false;
    if (!load_model(cmd, s->opt.model.path, o->model.no_mmap, &s->model)) {
        free(constraint);
        return false;
    }
    s->vocab = toy_model_vocab(s->model);
    if (constraint) {
        const toy_status st = is_schema ? toy_grammar_from_json_schema(s->vocab, constraint, o->json_schema_strict,
                                                                       &s->grammar)
                                        : toy_grammar_new(s->vocab, constraint, &s->grammar);
        free(constraint);
        if (st) {
            fprintf(stderr, "toy %s: %s: %s\n", cmd, what, toy_last_error());
            gen_session_close(s);
            return false;
        }
        s->opt.sampling.grammar = s->grammar;
    }
    const int32_t n_vocab = toy_model_n_vocab(s->model);
    for (size_t i = 0; i < o->n_logit_bias; i++)
        if (o->logit_bias[i].token >= n_vocab) {
            fprintf(stderr, "toy %s: --logit-bias: token %d is not in the vocabulary (%d tokens)\n", cmd,
                    (int)o->logit_bias[i].token, (int)n_vocab);
            gen_session_close(s);
            return false;
        }
    s->opt.sampling.logit_bias = s->opt.logit_bias;
    s->opt.sampling.n_logit_bias = s->opt.n_logit_bias;
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = o->n_ctx;
    cp.n_batch = o->n_batch;
    cp.n_threads = o->model.n_threads;
    cp.honor_sliding_window = o->sliding_window;
    cp.cache_type_k = o->cache_type_k;
    cp.attn = o->attn;
    cp.cache_type_v = o->cache_type_v;
    if (o->mlock && toy_model_mlock(s->model)) fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
    if (!trace_options_begin(cmd, &s->opt.trace, s->model)) {
        gen_session_close(s);
        return false;
    }
    trace_options_apply(&s->opt.trace, &cp);
    if (toy_context_new(s->model, &cp, &s->ctx) ||
        toy_sampler_new(&s->opt.sampling, n_vocab, &s->sampler)) {
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
    trace_options_end(&s->opt.trace);
    toy_sampler_free(s->sampler);
    toy_grammar_free(s->grammar); /* after the sampler, which reads it */
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
}

typedef struct {
    gen_session *s;
    const gen_view *view;
    volatile sig_atomic_t *interrupt;
    char *text; /* the reply, when asked for or viewed */
    size_t len, cap;
    bool want_text;
    bool oom;     /* the reply's text did not fit in memory */
    bool printed; /* some text went to stdout */
} gen_sink;

static void sink_append(gen_sink *k, const char *t, size_t n) {
    if (k->len + n + 1 > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 256;
        while (cap < k->len + n + 1) cap *= 2;
        char *p = realloc(k->text, cap);
        if (!p) {
            k->oom = true;
            return;
        }
        k->text = p;
        k->cap = cap;
    }
    memcpy(k->text + k->len, t, n);
    k->len += n;
    k->text[k->len] = 0;
}

/* toy_generate's callback: the text to stdout or the view (and the reply), the token to
 * the list */
static bool on_text(void *user, int32_t token, const char *text, size_t len) {
    gen_sink *k = user;
    if (k->want_text) sink_append(k, text, len);
    if (k->view && !k->oom) {
        k->printed |= k->view->show(k->view->user, k->text ? k->text : "", k->len, false);
    } else if (!k->view) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        k->printed |= len > 0;
    }
    if (token >= 0 && k->s->n_tokens < k->s->n_ctx) k->s->tokens[k->s->n_tokens++] = token;
    return !(k->interrupt && *k->interrupt);
}

gen_outcome gen_session_generate(gen_session *s, const char *cmd, const int32_t *prompt, int32_t n,
                                 const gen_view *view, volatile sig_atomic_t *interrupt, char **reply) {
    const int32_t in_use = toy_kv_seq_pos_max(s->ctx, 0) + 1;
    if (in_use + n > s->n_ctx) {
        fprintf(stderr, "toy %s: the prompt is %d tokens but the context holds %d (%d in use)\n", cmd, n, s->n_ctx,
                in_use);
        return GEN_NO_ROOM;
    }
    /* a grammar's text starts over with each reply (the sampler with it, as llama.cpp's
     * does on each new input) */
    if (s->grammar) toy_sampler_reset(s->sampler);
    if (s->n_tokens + n <= s->n_ctx) {
        memcpy(s->tokens + s->n_tokens, prompt, (size_t)n * sizeof *prompt);
        s->n_tokens += n;
    }
    gen_sink sink = {.s = s, .view = view, .interrupt = interrupt, .want_text = reply != NULL || view != NULL};
    toy_generate_params gp = toy_generate_default_params();
    gp.max_tokens = s->opt.n_predict;
    gp.stops = s->opt.stops;
    gp.n_stops = s->opt.n_stops;
    gp.context_shift = s->opt.context_shift;
    gp.n_keep = s->opt.n_keep;
    gp.on_text = on_text;
    gp.user = &sink;
    gp.feed_last = s->feed_last;
    toy_generate_result r = {.size = sizeof r};
    const toy_status st = toy_generate(s->ctx, s->sampler, prompt, n, &gp, &r);
    /* the list holds what the cache holds: the prompt and the tokens fed back; after a
     * context shift, whose middle is gone, nothing is known to match a later prompt */
    const int32_t held = toy_kv_seq_pos_max(s->ctx, 0) + 1;
    if (r.n_discarded > 0) gen_session_truncate(s, 0);
    else if (held < s->n_tokens) s->n_tokens = held;
    if (view && !sink.oom) sink.printed |= view->show(view->user, sink.text ? sink.text : "", sink.len, true);
    if (st || sink.oom) {
        fprintf(stderr, "%stoy %s: %s\n", sink.printed ? "\n" : "", cmd, st ? toy_last_error() : "no memory for the reply");
        free(sink.text);
        return GEN_FAILED;
    }
    if (r.finish == TOY_FINISH_CONTEXT)
        fprintf(stderr, "\ntoy %s: context full (%d tokens); stopping (--context-shift goes on)\n", cmd,
                s->n_ctx);
    if (reply) *reply = sink.text ? sink.text : calloc(1, 1);
    else free(sink.text); /* collected only for the view */
    s->prompt_seconds += r.prompt_seconds;
    s->prompt_count += r.n_prompt;
    s->gen_seconds += r.gen_seconds;
    s->gen_count += r.n_generated;
    return GEN_OK;
}

void gen_session_report(const gen_session *s, const char *cmd) {
    fprintf(stderr, "\ntoy %s: prompt %lld tokens, %.2f tok/s; generation %lld tokens, %.2f tok/s\n", cmd,
            (long long)s->prompt_count,
            s->prompt_seconds > 0 ? (double)s->prompt_count / s->prompt_seconds : 0.0,
            (long long)s->gen_count, s->gen_seconds > 0 ? (double)s->gen_count / s->gen_seconds : 0.0);
}
