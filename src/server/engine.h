/* engine.h — continuous batching over one context, for toy serve.
 *
 * Requests wait in a queue; up to n_parallel run at once, each choice of a request in a
 * slot of its own (a sequence of the KV cache). One thread runs the steps: every step is
 * one toy_decode holding the next token of every slot that is generating and chunks of
 * the prompts being read (so a long prompt never stalls the streams), after which each
 * slot that got logits samples its next token. A slot keeps its tokens when its request
 * ends; a later prompt that begins with them (a conversation going on) reuses them, its
 * slot copying the cells of whichever slot, idle or busy, holds the longest prefix.
 *
 * The same answer under any load: toy's logits of a token do not depend on what else is
 * in the batch, and every choice samples with a sampler of its own, seeded as `toy run
 * --seed` would be and fed the same tokens in the same order. So a completion's tokens
 * are those of `toy run` for the same prompt and settings, alone or beside any others.
 */
#ifndef TOY_SERVER_ENGINE_H
#define TOY_SERVER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "toy.h"

#define SRV_MAX_STOPS 16
#define SRV_MAX_STOP_BYTES 1024 /* of one stop string */
#define SRV_MAX_TOP_LOGPROBS 20

typedef struct {
    int32_t *prompt; /* tokens (owned by the engine once submitted) */
    int32_t n_prompt;
    int n_choices;
    toy_sampler_params sampling; /* choice i samples with seed + i */
    int32_t max_tokens;          /* < 0: until end of generation or of the context */
    bool ignore_eos;             /* end-of-generation tokens are never sampled */
    char *stops[SRV_MAX_STOPS];  /* owned */
    size_t n_stops;
    int top_logprobs;            /* < 0: no log-probabilities; else the alternatives per token */
    toy_grammar *grammar;        /* owned; sampling.grammar points at it (NULL: none) */
    toy_logit_bias *logit_bias;  /* owned; sampling.logit_bias points at it */
    bool no_cache_prompt;        /* cache_prompt false: the prompt is read anew, no cells reused */
    /* An embedding job (one choice, an engine made with `embeddings`): the prompt's
     * final-norm token states are pooled as `pooling` says (MEAN, CLS or LAST), across
     * however many steps its chunks take, and L2-normalised; nothing is sampled. Its DONE
     * event's text holds the vector, n_embd floats (len 4 n_embd bytes). Every token is
     * evaluated (no cached prefix is reused), and the slot keeps them after, as any
     * prompt's. */
    bool embedding;
    toy_pooling pooling;
} srv_params;

/* SRV_EV_ERROR: the request failed (a choice could not start, the forward pass failed,
 * no memory, the server is stopping); it is the request's last event, whatever its
 * choices had sent before. */
typedef enum { SRV_EV_TOKEN, SRV_EV_DONE, SRV_EV_ERROR } srv_event_kind;

typedef struct {
    srv_event_kind kind;
    int choice;
    char *text; /* the bytes to show now (complete UTF-8, stop strings held back), or
                 * SRV_EV_ERROR's message; malloc'd (NULL if there was no memory) */
    size_t len;
    /* SRV_EV_TOKEN: the token and, with top_logprobs >= 0, its log-probability and the
     * most likely alternatives */
    int32_t token;
    float logprob;
    int n_top;
    int32_t top_token[SRV_MAX_TOP_LOGPROBS];
    float top_logprob[SRV_MAX_TOP_LOGPROBS];
    /* SRV_EV_DONE */
    const char *finish_reason; /* "stop" or "length" */
    /* SRV_EV_ERROR: the HTTP status it stands for (4xx: the request's fault, 5xx: the
     * server's) */
    int status;
} srv_event;

typedef struct srv_engine srv_engine;
typedef struct srv_request srv_request;

typedef struct {
    int n_parallel;     /* slots */
    int32_t n_ctx;      /* KV cells per slot (0: the model's training context) */
    int32_t n_batch;    /* tokens per step, at most */
    int32_t prefill_chunk; /* prompt tokens of one slot per step, at most */
    int n_threads;
    int cache_type_k, cache_type_v;
    int queue_max;      /* choices waiting for a slot, at most */
    bool embeddings;    /* the context keeps every token's final-norm state, for embedding jobs */
    toy_attn attn;
    toy_trace_fn trace; /* the context's (toy_context_params) */
    void *trace_user;
} srv_engine_params;

toy_status srv_engine_new(toy_model *model, const srv_engine_params *p, srv_engine **out);
/* Stops taking requests, finishes those in flight, joins the thread, frees. */
void srv_engine_free(srv_engine *e);
int32_t srv_engine_n_ctx(const srv_engine *e);
const toy_vocab *srv_engine_vocab(const srv_engine *e);
/* Adapters for every request (before serving starts). */
toy_status srv_engine_set_lora(srv_engine *e, toy_lora *const *loras, const float *scales, int n);

/* Queues a request (taking ownership of p's prompt and stops, even on failure).
 * TOY_ERR_UNSUPPORTED with *out NULL: the queue is full or the server is stopping, try
 * later. */
toy_status srv_submit(srv_engine *e, srv_params *p, srv_request **out);
/* The next event of the request, waiting up to timeout_ms (< 0: for ever); false on
 * timeout. After every choice's SRV_EV_DONE, or after an SRV_EV_ERROR, there are no
 * more. */
bool srv_next_event(srv_request *r, srv_event *ev, int timeout_ms);
void srv_event_clear(srv_event *ev);
/* The client is gone: the request leaves the queue, and its slots are freed, at the
 * engine's next step (the engine is woken for it). */
void srv_cancel(srv_request *r);
/* The client's reference is dropped (the engine keeps its own until the slots finish). */
void srv_request_release(srv_request *r);
/* Token counts for usage: the prompt, the tokens generated by all choices so far, and
 * the prompt tokens the first choice found in the cache (not evaluated again). */
void srv_request_usage(srv_request *r, int32_t *prompt, int32_t *completion, int32_t *cached);

typedef struct {
    int64_t prompt_tokens, generated_tokens, cached_tokens;
    int queue_depth, busy_slots, n_slots;
    double busy_seconds; /* time spent in steps */
} srv_metrics;

void srv_engine_metrics(srv_engine *e, srv_metrics *m);

/* Ends every request, queued or running, with an SRV_EV_ERROR of this status and
 * message at the engine's next step, and refuses new ones (shutdown). */
void srv_engine_abort(srv_engine *e, int status, const char *message);
/* Seconds since the engine last finished a step while it had work (queued or running);
 * 0 when it has none. */
double srv_engine_stalled_for(srv_engine *e);

#endif
