/* serve_outcome.h — what the engine tests (test_serve_engine, test_serve_embeddings) do
 * with a request: its parameters, and every event of it collected into an outcome; and
 * what they share besides: the bundled model they serve, a refused request body. */
#ifndef TOY_TEST_SERVE_OUTCOME_H
#define TOY_TEST_SERVE_OUTCOME_H

#include "engine.h"
#include "openai.h"
#include "test.h"

typedef struct {
    int32_t tokens[256];
    int n_tokens;
    const char *finish;
    float *vector; /* an embedding job's DONE event, malloc'd (free it) */
    size_t vector_len;
    int error_status;
    char error[256];
    int32_t cached; /* srv_request_usage's */
} outcome;

/* A greedy one-choice request of max_tokens (ignore_eos), the prompt copied. */
static inline srv_params serve_params(const int32_t *prompt, int32_t n_prompt, int32_t max_tokens) {
    srv_params p = {0};
    p.prompt = malloc((size_t)n_prompt * sizeof *p.prompt);
    memcpy(p.prompt, prompt, (size_t)n_prompt * sizeof *p.prompt);
    p.n_prompt = n_prompt;
    p.n_choices = 1;
    p.sampling = toy_sampler_default_params();
    p.sampling.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.top_logprobs = -1;
    return p;
}

/* Every event of a one-choice request, until its DONE or ERROR (a generous 300 s at most:
 * a hang fails, a slow or sanitized machine does not). */
static inline void serve_collect(srv_request *r, outcome *o) {
    memset(o, 0, sizeof *o);
    for (const double t0 = test_now_s(); test_now_s() - t0 < 300;) {
        srv_event ev;
        if (!srv_next_event(r, &ev, 100)) continue;
        if (ev.kind == SRV_EV_TOKEN && o->n_tokens < 256) o->tokens[o->n_tokens++] = ev.token;
        if (ev.kind == SRV_EV_DONE) {
            o->finish = ev.finish_reason;
            if (ev.len && (o->vector = malloc(ev.len))) {
                memcpy(o->vector, ev.text, ev.len);
                o->vector_len = ev.len;
            }
        }
        if (ev.kind == SRV_EV_ERROR) {
            o->error_status = ev.status;
            snprintf(o->error, sizeof o->error, "%s", ev.text ? ev.text : "");
        }
        const bool last = ev.kind != SRV_EV_TOKEN;
        srv_event_clear(&ev);
        if (last) break;
    }
    int32_t prompt, completion;
    srv_request_usage(r, &prompt, &completion, &o->cached);
    srv_request_release(r);
}

static inline void serve_run(srv_engine *e, srv_params *p, outcome *o) {
    srv_request *r;
    CHECK(!srv_submit(e, p, &r));
    serve_collect(r, o);
}

/* The built-in ChatML family, the chat template of the requests these tests parse. */
static inline const toy_chat_template *serve_chatml(void) {
    static toy_chat_template *t;
    if (!t && toy_chat_template_builtin("chatml", &t)) abort();
    return t;
}

/* The bundled model, or NULL after printing why. */
static inline toy_model *serve_load_model(void) {
    toy_model *m = NULL;
    if (toy_model_load(TOY_SOURCE_DIR "/models/toy-kjv.gguf", &m)) {
        fprintf(stderr, "%s\n", toy_last_error());
        return NULL;
    }
    return m;
}

/* A parser's answer to a body it must refuse (accepted: what it returned): a 400 naming
 * param, its message containing message. */
static inline void check_refused(const char *body, bool accepted, const oai_error *err, const char *param,
                                 const char *message) {
    CHECK_MSG(!accepted, "accepted: %s", body);
    if (accepted) return;
    CHECK_EQ(err->status, 400);
    CHECK_MSG(!strcmp(err->param, param), "%s: param '%s', expected '%s'", body, err->param, param);
    CHECK_STR_CONTAINS(err->message, message);
}

#endif
