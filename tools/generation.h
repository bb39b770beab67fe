/* generation.h — text generation shared by `toy run` and `toy chat`: options, a session
 * (model, context, sampler, the tokens in the cache) and the streaming loop. */
#ifndef TOY_TOOLS_GENERATION_H
#define TOY_TOOLS_GENERATION_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "commands.h"
#include "toy.h"

#define GEN_MAX_STOPS 16
#define GEN_MAX_LOGIT_BIAS 1024

typedef struct {
    model_options model;   /* path NULL: the bundled model */
    int32_t n_predict;     /* -1: until end of generation or context */
    int32_t n_ctx;         /* 0: the model's training context */
    int32_t n_batch;
    toy_sampler_params sampling;
    const char *stops[GEN_MAX_STOPS];
    size_t n_stops;
    bool context_shift;
    int32_t n_keep;        /* tokens kept at the start when the context shifts */
    trace_options trace;
    bool sliding_window; /* honour a sliding window llama.cpp ignores (phi3) */
    int cache_type_k, cache_type_v;
    toy_attn attn;
    bool mlock;
    lora_options lora;
    /* at most one constraint: --grammar (GBNF text), --grammar-file, --json-schema (a
     * file, or the schema's JSON text when it starts with '{') */
    const char *grammar, *grammar_file, *json_schema;
    const char *constraint_flag; /* the one given, for messages */
    bool json_schema_strict;
    toy_logit_bias logit_bias[GEN_MAX_LOGIT_BIAS];
    size_t n_logit_bias;
} gen_options;

void gen_options_default(gen_options *o);
/* Parses the option at argv[*i] if it is a generation option: returns 1 (consumed,
 * *i advanced past its value), 0 (not a generation option), -1 (bad value; message
 * printed). */
int gen_parse_option(const char *cmd, int argc, char **argv, int *i, gen_options *o);
/* After the last option: whether they make sense together (else false after a message). */
bool gen_options_check(const char *cmd, const gen_options *o);
extern const char *const gen_options_help;

typedef struct {
    gen_options opt;
    toy_model *model;
    toy_context *ctx;
    toy_sampler *sampler;
    toy_grammar *grammar; /* the constraint's, compiled for the vocabulary; NULL: none */
    const toy_vocab *vocab;
    int32_t n_ctx;
    bool feed_last; /* feed the last generated token back (toy_generate_params): chat's next turn reads it */
    /* the tokens in the cache (sequence 0), in order */
    int32_t *tokens;
    int32_t n_tokens;
    /* timing, for the speed report */
    double prompt_seconds, gen_seconds;
    int64_t prompt_count, gen_count;
} gen_session;

/* Loads the model, compiles the grammar (it needs the vocabulary) and creates the
 * context and sampler; messages go to stderr. */
bool gen_session_open(gen_session *s, const char *cmd, const gen_options *o);
void gen_session_close(gen_session *s);
/* Keeps the first n_keep tokens of the cache and drops the rest. */
void gen_session_truncate(gen_session *s, int32_t n_keep);
typedef enum {
    GEN_OK,
    GEN_NO_ROOM, /* the prompt does not fit beside what the cache holds; nothing was done */
    GEN_FAILED,  /* evaluating or sampling failed: the grammar allowed no token, say */
} gen_outcome;

/* How a reply is shown as it grows: show gets the whole reply so far after each piece,
 * and once more at the end with done; it returns whether it printed anything. */
typedef struct {
    bool (*show)(void *user, const char *reply, size_t len, bool done);
    void *user;
} gen_view;

/* Evaluates the prompt after the tokens in the cache, then samples, prints and feeds
 * back tokens (toy_generate) until end of generation, n_predict, a stop string, the end
 * of the context, or *interrupt. With a grammar, each call starts it (and the sampler)
 * anew, so every reply is a whole text of its language. The text goes to the view, or
 * with none to stdout as it comes; with `reply` it is also collected (malloc'd) there.
 * Other than GEN_OK after a message. */
gen_outcome gen_session_generate(gen_session *s, const char *cmd, const int32_t *prompt, int32_t n,
                                 const gen_view *view, volatile sig_atomic_t *interrupt, char **reply);
/* "prompt eval: N tokens, X tok/s; generation: ..." to stderr. */
void gen_session_report(const gen_session *s, const char *cmd);

#endif
