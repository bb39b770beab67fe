/* server.c — toy serve's HTTP side: the gate (gate.c) on a request's headers, its body,
 * routes and responses, server-sent events, shutdown; libmicrohttpd with a thread per
 * connection, polling with poll() (no limit on descriptor numbers).
 *
 * A request is checked when its headers arrive, and anything the gate refuses is answered
 * then, its body unread. A body is read into a buffer of its Content-Length, checked
 * (openai.c) and handed to the engine. A client that goes away is noticed within 100 ms
 * whether it streams or waits for a whole answer, and its slots are freed at the engine's
 * next step. A request the engine ends with an error gets that error: an error object,
 * or, once a stream has begun, an "error" event and [DONE].
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "chat_page.h"
#include "embeddings.h"
#include "engine.h"
#include "gate.h"
#include "openai.h"
#include "server.h"

enum { N_STATUS = 11 };
static const int counted_status[N_STATUS] = {200, 204, 400, 401, 403, 404, 405, 413, 415, 500, 503};

/* Request bodies parsed and tokenized at once, at most: JSON of 8 MiB can take hundreds of
 * MB as Jansson values, and the tokenizer's scratch is many bytes per input byte. */
enum { PARSE_PERMITS = 2 };

typedef struct {
    ty_server_params p;
    gate_config gate;
    toy_model *model;
    toy_lora *loras[16];
    toy_chat_template *chat_template;
    json_t *chat_template_kwargs; /* --chat-template-kwargs, or NULL */
    srv_engine *engine;
    oai_context oai;
    emb_context emb;
    char model_id[256];
    long started;
    sem_t parse_permits;
    atomic_int in_flight;   /* requests whose headers have arrived and that are not answered */
    atomic_int connections; /* open connections */
    atomic_bool stopping;
    atomic_bool loading; /* listening, the weights not yet packed: 503 */
    atomic_uint_fast64_t next_id;
    atomic_uint_fast64_t status_count[N_STATUS + 1]; /* the last: any other */
} server;

typedef struct {
    gate_verdict v;
    char *body;
    size_t len, cap;
    size_t discarded; /* a chunked body past --max-body: read, not kept */
    struct timespec t0;
} conn_state;

static long unix_now(void) { return (long)time(NULL); }

static double mono_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void count_status(server *s, int status) {
    int i = 0;
    while (i < N_STATUS && counted_status[i] != status) i++;
    atomic_fetch_add(&s->status_count[i], 1);
}

/* ---------------------------------------------------------------- replies */

/* The headers every answer to this request carries: CORS for an allowed origin, Allow,
 * Retry-After, WWW-Authenticate. */
static void add_headers(struct MHD_Connection *con, struct MHD_Response *r, const conn_state *cs, int status) {
    const gate_verdict *v = &cs->v;
    if (v->cors) {
        const char *origin = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
        if (origin) {
            MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Origin");
        }
        if (status == 204) {
            MHD_add_response_header(r, "Access-Control-Allow-Methods", v->allow);
            MHD_add_response_header(r, "Access-Control-Allow-Headers", GATE_CORS_ALLOW_HEADERS);
            MHD_add_response_header(r, "Access-Control-Max-Age", GATE_CORS_MAX_AGE);
        }
    }
    if ((status == 405 || status == 204) && v->allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, v->allow);
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
}

static enum MHD_Result reply(server *s, struct MHD_Connection *con, const conn_state *cs, int status,
                             const char *type, const char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    if (type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    add_headers(con, r, cs, status);
    const enum MHD_Result ok = MHD_queue_response(con, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(s, status);
    return ok;
}

static enum MHD_Result reply_json(server *s, struct MHD_Connection *con, const conn_state *cs, int status,
                                  char *json) {
    static const char no_memory[] =
        "{\"error\":{\"message\":\"no memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
    if (!json) return reply(s, con, cs, 500, "application/json", no_memory, sizeof no_memory - 1);
    const enum MHD_Result ok = reply(s, con, cs, status, "application/json", json, strlen(json));
    free(json);
    return ok;
}

static enum MHD_Result reply_error(server *s, struct MHD_Connection *con, const conn_state *cs,
                                   const oai_error *err) {
    return reply_json(s, con, cs, err->status, oai_error_json(err));
}

/* ---------------------------------------------------------------- completions */

typedef struct {
    server *s;
    srv_request *r;
    oai_request req;
    char id[48];
    long created;
    int fd;
    char *pending;
    size_t pending_len, pending_pos;
    uint32_t started; /* choices that have sent their first chunk */
    int n_choices;
    int done;         /* choices finished */
    bool failed;      /* the error event is out: [DONE] and the end follow */
    double next_check; /* when to look for the client next */
    int stage;        /* 0: events, 1: usage sent, 2: [DONE] sent */
    oai_parsed_stream *parsed; /* per choice, when the answers are parsed (calls, reasoning) */
} stream_state;

static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Whether the client has gone, asked at most every 100 ms (*next: when next to ask).
 * Asked by the clock, not only when no event came for 100 ms: while tokens flow there
 * is never such a pause. */
static bool client_gone_lately(int fd, double *next) {
    const double now = mono_now();
    if (now < *next) return false;
    *next = now + 0.1;
    return client_gone(fd);
}

static int connection_fd(struct MHD_Connection *con) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static void error_of_event(const srv_event *ev, oai_error *err) {
    memset(err, 0, sizeof *err);
    oai_fail(err, ev->status, NULL, "%s", ev->text ? ev->text : "the request failed");
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_state *st = cls;
    for (;;) {
        if (st->pending_pos < st->pending_len) {
            const size_t n = st->pending_len - st->pending_pos < max ? st->pending_len - st->pending_pos : max;
            memcpy(buf, st->pending + st->pending_pos, n);
            st->pending_pos += n;
            return (ssize_t)n;
        }
        free(st->pending);
        st->pending = NULL;
        st->pending_len = st->pending_pos = 0;
        if (st->done == st->n_choices || st->failed) {
            if (st->stage == 0 && st->req.include_usage && !st->failed) {
                int32_t prompt, completion, cached;
                srv_request_usage(st->r, &prompt, &completion, &cached);
                st->pending =
                    oai_usage_chunk_sse(&st->s->oai, st->req.chat, st->id, st->created, prompt, completion, cached);
                st->stage = 1;
            } else if (st->stage < 2) {
                st->pending = strdup("data: [DONE]\n\n");
                st->stage = 2;
            } else {
                return MHD_CONTENT_READER_END_OF_STREAM;
            }
            if (!st->pending) return MHD_CONTENT_READER_END_WITH_ERROR;
            st->pending_len = strlen(st->pending);
            continue;
        }
        if (client_gone_lately(st->fd, &st->next_check)) {
            srv_cancel(st->r);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        srv_event ev;
        if (!srv_next_event(st->r, &ev, 100)) continue;
        if (ev.kind == SRV_EV_ERROR) {
            oai_error err;
            error_of_event(&ev, &err);
            st->pending = oai_error_sse(&err);
            st->failed = true;
        } else {
            const bool first = !(st->started & (1u << ev.choice));
            st->started |= 1u << ev.choice;
            if (ev.kind == SRV_EV_DONE) st->done++;
            /* a token whose text is held back (a possible stop string) shows nothing yet */
            const bool show = st->parsed || ev.kind == SRV_EV_DONE || ev.len > 0 || first || st->req.logprobs;
            if (st->parsed)
                st->pending = oai_parsed_chunks_sse(&st->s->oai, &st->req, &st->parsed[ev.choice], st->id,
                                                  st->created, &ev, first);
            else if (show)
                st->pending = oai_chunk_sse(&st->s->oai, st->req.chat, st->req.logprobs, st->id, st->created, &ev, first);
            if (show && !st->pending) {
                srv_cancel(st->r); /* no memory for the chunk: the stream cannot go on whole */
                srv_event_clear(&ev);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        st->pending_len = st->pending ? strlen(st->pending) : 0;
        srv_event_clear(&ev);
    }
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    if (st->done < st->n_choices) srv_cancel(st->r);
    srv_request_release(st->r);
    for (int i = 0; st->parsed && i < st->n_choices; i++) free(st->parsed[i].text);
    free(st->parsed);
    oai_request_answer_free(&st->req);
    free(st->pending);
    free(st);
}

/* (req's prompt and stops belong to the engine once submitted: only its flags are read,
 * and the count of choices is given; its tools are the stream's from here) */
static enum MHD_Result stream_reply(server *s, struct MHD_Connection *con, const conn_state *cs, srv_request *r,
                                    oai_request *req, int n_choices, const char *id, long created) {
    stream_state *st = calloc(1, sizeof *st);
    oai_parsed_stream *ps = req->parse_output ? calloc((size_t)n_choices, sizeof *ps) : NULL;
    if (!st || (req->parse_output && !ps)) {
        free(st);
        free(ps);
        oai_request_answer_free(req);
        srv_cancel(r);
        srv_request_release(r);
        return reply_json(s, con, cs, 500, NULL);
    }
    *st = (stream_state){.s = s, .r = r, .req = *req, .created = created, .fd = connection_fd(con),
                         .n_choices = n_choices, .parsed = ps};
    snprintf(st->id, sizeof st->id, "%s", id);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!resp) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    add_headers(con, resp, cs, 200);
    const enum MHD_Result ok = MHD_queue_response(con, 200, resp);
    MHD_destroy_response(resp);
    count_status(s, 200);
    return ok;
}

/* The whole answer at once: the events are gathered, the client watched meanwhile. */
static enum MHD_Result whole_reply(server *s, struct MHD_Connection *con, const conn_state *cs, srv_request *r,
                                   const oai_request *req, int n_choices, const char *id, long created) {
    const int fd = connection_fd(con);
    oai_choice *choices = calloc((size_t)n_choices, sizeof *choices);
    bool ok = choices != NULL, failed = false;
    oai_error err = {0};
    double next_check = 0;
    for (int done = 0; done < n_choices && !failed;) {
        if (client_gone_lately(fd, &next_check)) {
            srv_cancel(r);
            srv_request_release(r);
            for (int i = 0; choices && i < n_choices; i++) oai_choice_free(&choices[i]);
            free(choices);
            return MHD_NO; /* nobody to answer */
        }
        srv_event ev;
        if (!srv_next_event(r, &ev, 100)) continue;
        if (ev.kind == SRV_EV_ERROR) {
            error_of_event(&ev, &err);
            failed = true;
        } else {
            if (ok) ok = oai_choice_add(s->oai.vocab, req->chat, req->logprobs, &choices[ev.choice], &ev);
            done += ev.kind == SRV_EV_DONE;
        }
        srv_event_clear(&ev);
    }
    for (int i = 0; ok && !failed && req->chat && i < n_choices; i++) ok = oai_choice_parse(req, &choices[i]);
    int32_t prompt, completion, cached;
    srv_request_usage(r, &prompt, &completion, &cached);
    srv_request_release(r);
    char *json = ok && !failed ? oai_response_json(&s->oai, req->chat, id, created, choices, n_choices, prompt,
                                                   completion, cached)
                               : NULL;
    for (int i = 0; choices && i < n_choices; i++) oai_choice_free(&choices[i]);
    free(choices);
    if (failed) return reply_error(s, con, cs, &err);
    return reply_json(s, con, cs, 200, json);
}

static enum MHD_Result chat_or_completions(server *s, struct MHD_Connection *con, conn_state *cs, bool chat) {
    oai_request req;
    oai_error err;
    oai_context oc = s->oai;
    oc.seed = (uint64_t)time(NULL) ^ atomic_fetch_add(&s->next_id, 1) * 0x9e3779b97f4a7c15ULL;
    sem_wait(&s->parse_permits);
    const bool parsed = oai_parse(&oc, cs->body ? cs->body : "", cs->len, chat, &req, &err);
    sem_post(&s->parse_permits);
    if (!parsed) return reply_error(s, con, cs, &err);
    const int n_choices = req.gen.n_choices;
    srv_request *r;
    if (srv_submit(s->engine, &req.gen, &r)) {
        oai_request_answer_free(&req);
        oai_fail(&err, 503, NULL, "%s",
                 atomic_load(&s->stopping) ? "the server is shutting down"
                                           : "the server is busy (every slot taken, the queue full): try again");
        return reply_error(s, con, cs, &err);
    }
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    const long created = unix_now();
    if (req.stream) return stream_reply(s, con, cs, r, &req, n_choices, id, created);
    const enum MHD_Result res = whole_reply(s, con, cs, r, &req, n_choices, id, created);
    oai_request_answer_free(&req);
    return res;
}

/* ---------------------------------------------------------------- embeddings */

/* An input's embedding job in flight. */
typedef struct {
    srv_request *r;
    size_t input;
} emb_job;

/* An event of a job: its vector, DONE's text, goes to the input's place in vectors. true
 * when the job is over, with *err set if it failed. */
static bool emb_job_event(const srv_event *ev, const emb_job *job, float *vectors, int32_t n_embd, oai_error *err) {
    if (ev->kind == SRV_EV_ERROR) {
        oai_fail(err, ev->status ? ev->status : 500, "input", "input[%zu]: %s", job->input,
                 ev->text ? ev->text : "the job failed");
        return true;
    }
    if (ev->kind != SRV_EV_DONE) return false;
    if (!ev->text || ev->len != (size_t)n_embd * sizeof *vectors) {
        oai_fail(err, 500, NULL, "input[%zu]: the engine gave no embedding", job->input);
        return true;
    }
    memcpy(vectors + job->input * (size_t)n_embd, ev->text, ev->len);
    return true;
}

/* Each input is a job of its own, at most --parallel of them queued or running at once
 * (a long list neither fills the queue nor waits behind itself), the client watched
 * meanwhile; the vectors are gathered in input order. */
static enum MHD_Result embeddings(server *s, struct MHD_Connection *con, conn_state *cs) {
    emb_request req;
    oai_error err;
    sem_wait(&s->parse_permits);
    const bool parsed = emb_parse(&s->emb, cs->body ? cs->body : "", cs->len, &req, &err);
    sem_post(&s->parse_permits);
    if (!parsed) return reply_error(s, con, cs, &err);
    const int32_t n_embd = s->emb.n_embd;
    const int window = s->emb.window > 0 ? s->emb.window : 1;
    size_t n_floats;
    float *vectors = __builtin_mul_overflow(req.n_inputs, (size_t)n_embd, &n_floats)
                         ? NULL
                         : malloc(n_floats * sizeof *vectors);
    emb_job *flight = calloc((size_t)window, sizeof *flight);
    bool failed = !vectors || !flight, gone = false;
    if (failed) oai_fail(&err, 500, NULL, "no memory");
    const int fd = connection_fd(con);
    double next_check = 0;
    size_t next = 0, done = 0;
    int n_flight = 0;
    while (done < req.n_inputs && !failed && !gone) {
        while (n_flight < window && next < req.n_inputs && !failed) {
            srv_params p = {.prompt = req.tokens[next], .n_prompt = req.n_tokens[next], .n_choices = 1,
                            .sampling = toy_sampler_default_params(), .max_tokens = 0, .top_logprobs = -1,
                            .embedding = true, .pooling = s->emb.pooling};
            req.tokens[next] = NULL; /* the engine's now, even if it refuses the job */
            if (srv_submit(s->engine, &p, &flight[n_flight].r)) {
                const bool stopping = atomic_load(&s->stopping);
                oai_fail(&err, 503, NULL, "%s",
                         stopping ? "the server is shutting down"
                                  : "the server is busy (every slot taken, the queue full): try again");
                failed = true;
            } else {
                flight[n_flight++].input = next++;
            }
        }
        /* the jobs' news, waiting a little on the first */
        for (int k = 0; k < n_flight && !failed;) {
            srv_event ev;
            if (!srv_next_event(flight[k].r, &ev, k == 0 ? 20 : 0)) {
                k++;
                continue;
            }
            const bool over = emb_job_event(&ev, &flight[k], vectors, n_embd, &err);
            srv_event_clear(&ev);
            if (!over) continue;
            if (err.status) {
                failed = true;
                break;
            }
            srv_request_release(flight[k].r);
            flight[k] = flight[--n_flight];
            done++;
        }
        gone = !failed && client_gone_lately(fd, &next_check);
    }
    /* what the engine may still evaluate for a client that left: the jobs in flight */
    if (gone)
        fprintf(stderr, "toy serve: the client left /v1/embeddings after %zu of %zu inputs; %d in flight cancelled\n",
                done, req.n_inputs, n_flight);
    for (int k = 0; k < n_flight; k++) {
        srv_cancel(flight[k].r);
        srv_request_release(flight[k].r);
    }
    free(flight);
    char *json = failed || gone ? NULL : emb_response_json(&s->emb, &req, vectors, &err);
    free(vectors);
    emb_request_free(&req);
    if (gone) return MHD_NO; /* nobody to answer */
    return json ? reply_json(s, con, cs, 200, json) : reply_error(s, con, cs, &err);
}

/* ---------------------------------------------------------------- other routes */

static enum MHD_Result chat_completions(server *s, struct MHD_Connection *con, conn_state *cs) {
    return chat_or_completions(s, con, cs, true);
}

static enum MHD_Result completions(server *s, struct MHD_Connection *con, conn_state *cs) {
    return chat_or_completions(s, con, cs, false);
}

static enum MHD_Result tokens_route(server *s, struct MHD_Connection *con, conn_state *cs, bool detokenize) {
    oai_error err;
    sem_wait(&s->parse_permits);
    char *json = detokenize ? oai_detokenize(&s->oai, cs->body ? cs->body : "", cs->len, &err)
                            : oai_tokenize(&s->oai, cs->body ? cs->body : "", cs->len, &err);
    sem_post(&s->parse_permits);
    return json ? reply_json(s, con, cs, 200, json) : reply_error(s, con, cs, &err);
}

static enum MHD_Result tokenize(server *s, struct MHD_Connection *con, conn_state *cs) {
    return tokens_route(s, con, cs, false);
}

static enum MHD_Result detokenize(server *s, struct MHD_Connection *con, conn_state *cs) {
    return tokens_route(s, con, cs, true);
}

static enum MHD_Result apply_template(server *s, struct MHD_Connection *con, conn_state *cs) {
    oai_error err;
    sem_wait(&s->parse_permits);
    char *json = oai_apply_template(&s->oai, cs->body ? cs->body : "", cs->len, &err);
    sem_post(&s->parse_permits);
    return json ? reply_json(s, con, cs, 200, json) : reply_error(s, con, cs, &err);
}

static enum MHD_Result page(server *s, struct MHD_Connection *con, conn_state *cs) {
    return reply(s, con, cs, 200, "text/html; charset=utf-8", ty_chat_page, ty_chat_page_len);
}

static enum MHD_Result health(server *s, struct MHD_Connection *con, conn_state *cs) {
    const double stalled = srv_engine_stalled_for(s->engine);
    char body[160];
    int status = 200;
    if (atomic_load(&s->stopping)) {
        status = 503;
        snprintf(body, sizeof body, "{\"status\":\"shutting down\"}");
    } else if (atomic_load(&s->loading)) {
        status = 503;
        snprintf(body, sizeof body, "{\"status\":\"loading\"}");
    } else if (s->p.watchdog_s > 0 && stalled > s->p.watchdog_s) {
        status = 503;
        snprintf(body, sizeof body, "{\"status\":\"stalled\",\"seconds_since_progress\":%.1f}", stalled);
    } else {
        snprintf(body, sizeof body, "{\"status\":\"ok\"}");
    }
    return reply(s, con, cs, status, "application/json", body, strlen(body));
}

static enum MHD_Result models(server *s, struct MHD_Connection *con, conn_state *cs) {
    json_t *o = json_pack("{s:s,s:[{s:s,s:s,s:i,s:s,s:{s:i,s:i,s:i}}]}", "object", "list", "data", "id", s->model_id,
                          "object", "model", "created", (json_int_t)s->started, "owned_by", "toy", "meta", "n_ctx",
                          srv_engine_n_ctx(s->engine), "n_vocab", toy_model_n_vocab(s->model), "n_slots",
                          s->p.n_parallel);
    enum MHD_Result ok = reply_json(s, con, cs, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
    return ok;
}

static enum MHD_Result metrics(server *s, struct MHD_Connection *con, conn_state *cs) {
    srv_metrics m;
    srv_engine_metrics(s->engine, &m);
    char buf[4096];
    int n = snprintf(buf, sizeof buf,
                     "# HELP toy_requests_total HTTP requests answered, by status.\n"
                     "# TYPE toy_requests_total counter\n");
    for (int i = 0; i <= N_STATUS; i++) {
        const uint64_t c = atomic_load(&s->status_count[i]);
        if (i < N_STATUS)
            n += snprintf(buf + n, sizeof buf - (size_t)n, "toy_requests_total{status=\"%d\"} %llu\n",
                          counted_status[i], (unsigned long long)c);
        else
            n += snprintf(buf + n, sizeof buf - (size_t)n, "toy_requests_total{status=\"other\"} %llu\n",
                          (unsigned long long)c);
    }
    n += snprintf(buf + n, sizeof buf - (size_t)n,
                  "# HELP toy_prompt_tokens_total Prompt tokens evaluated.\n"
                  "# TYPE toy_prompt_tokens_total counter\n"
                  "toy_prompt_tokens_total %lld\n"
                  "# HELP toy_prompt_tokens_cached_total Prompt tokens reused from a slot's cache.\n"
                  "# TYPE toy_prompt_tokens_cached_total counter\n"
                  "toy_prompt_tokens_cached_total %lld\n"
                  "# HELP toy_generated_tokens_total Tokens generated.\n"
                  "# TYPE toy_generated_tokens_total counter\n"
                  "toy_generated_tokens_total %lld\n"
                  "# HELP toy_queue_depth Choices waiting for a slot.\n"
                  "# TYPE toy_queue_depth gauge\n"
                  "toy_queue_depth %d\n"
                  "# HELP toy_busy_slots Slots serving a request.\n"
                  "# TYPE toy_busy_slots gauge\n"
                  "toy_busy_slots %d\n"
                  "# HELP toy_slots Slots in all (--parallel).\n"
                  "# TYPE toy_slots gauge\n"
                  "toy_slots %d\n"
                  "# HELP toy_busy_seconds_total Time spent in forward passes.\n"
                  "# TYPE toy_busy_seconds_total counter\n"
                  "toy_busy_seconds_total %.3f\n"
                  "# HELP toy_tokens_per_second Tokens (prompt and generated) per second of forward passes.\n"
                  "# TYPE toy_tokens_per_second gauge\n"
                  "toy_tokens_per_second %.1f\n",
                  (long long)m.prompt_tokens, (long long)m.cached_tokens, (long long)m.generated_tokens,
                  m.queue_depth, m.busy_slots, m.n_slots, m.busy_seconds,
                  m.busy_seconds > 0 ? (double)(m.prompt_tokens + m.generated_tokens) / m.busy_seconds : 0.0);
    return reply(s, con, cs, 200, "text/plain; version=0.0.4", buf, (size_t)n);
}

/* ---------------------------------------------------------------- requests */

/* routes.h's handlers, by route */
static enum MHD_Result (*const route_handlers[ROUTE_COUNT])(server *, struct MHD_Connection *, conn_state *) = {
#define SERVER_ROUTE_HANDLER(id, method, path, handler, rules) [ROUTE_##id] = handler,
    SRV_ROUTES(SERVER_ROUTE_HANDLER)
#undef SERVER_ROUTE_HANDLER
};

static enum MHD_Result route(server *s, struct MHD_Connection *con, conn_state *cs) {
    if (cs->discarded) {
        oai_error err;
        oai_fail(&err, 413, NULL, "the request body is over the limit of %zu bytes (--max-body)", s->p.max_body);
        return reply_error(s, con, cs, &err);
    }
    return cs->v.route == ROUTE_NONE ? MHD_NO : route_handlers[cs->v.route](s, con, cs);
}

/* The headers have arrived: the gate decides, and a request it lets through gets a body
 * buffer of its Content-Length (or one that grows up to --max-body, for a chunked body). */
static enum MHD_Result begin(server *s, struct MHD_Connection *con, const char *url, const char *method,
                             conn_state *cs) {
    const gate_request gr = {
        .method = method,
        .url = url,
        .host = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
        .origin = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN),
        .authorization = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
        .content_type = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
        .content_length = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH),
        .preflight_method = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Access-Control-Request-Method"),
        .open_connections = atomic_load(&s->connections),
        .stopping = atomic_load(&s->stopping),
        .loading = atomic_load(&s->loading),
    };
    gate_check(&s->gate, &gr, &cs->v);
    if (cs->v.status == 204) return reply(s, con, cs, 204, NULL, "", 0);
    if (cs->v.status) return reply_error(s, con, cs, &cs->v.err);
    if (cs->v.body_length != SIZE_MAX && cs->v.body_length > 0) {
        if (!(cs->body = malloc(cs->v.body_length + 1))) return MHD_NO;
        cs->cap = cs->v.body_length + 1;
    }
    return MHD_YES;
}

/* Body bytes: kept up to --max-body; a chunked body past it is read and dropped (413 at
 * its end), and one that goes on past 16 times the limit ends the connection. */
static enum MHD_Result body_bytes(server *s, conn_state *cs, const char *data, size_t n) {
    if (cs->discarded || cs->len + n > s->p.max_body) {
        cs->discarded += n;
        free(cs->body);
        cs->body = NULL;
        cs->len = cs->cap = 0;
        return cs->discarded / 16 > s->p.max_body ? MHD_NO : MHD_YES;
    }
    if (cs->len + n + 1 > cs->cap) {
        size_t cap = cs->cap ? cs->cap : 4096;
        while (cap < cs->len + n + 1) cap *= 2;
        if (cap > s->p.max_body + 1) cap = s->p.max_body + 1;
        char *b = realloc(cs->body, cap);
        if (!b) return MHD_NO;
        cs->body = b;
        cs->cap = cap;
    }
    memcpy(cs->body + cs->len, data, n);
    cs->len += n;
    cs->body[cs->len] = 0;
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    server *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        clock_gettime(CLOCK_MONOTONIC, &cs->t0);
        *con_cls = cs;
        atomic_fetch_add(&s->in_flight, 1);
        return begin(s, con, url, method, cs);
    }
    if (*upload_size) {
        const enum MHD_Result ok = body_bytes(s, cs, upload, *upload_size);
        *upload_size = 0;
        return ok;
    }
    return route(s, con, cs);
}

static void completed(void *cls, struct MHD_Connection *con, void **con_cls, enum MHD_RequestTerminationCode why) {
    server *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_HTTP_STATUS);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double ms = 1e3 * (double)(t1.tv_sec - cs->t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - cs->t0.tv_nsec);
    fprintf(stderr, "toy serve: %u %.1f ms%s\n", ci ? ci->http_status : 0, ms,
            why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed)");
    atomic_fetch_sub(&s->in_flight, 1);
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

/* The request path decoded as MHD does, except that a path holding %00 is left as it
 * came: decoded, "/health%00x" would read as "/health". */
static size_t unescape(void *cls, struct MHD_Connection *con, char *s) {
    (void)cls;
    (void)con;
    return strstr(s, "%00") ? strlen(s) : MHD_http_unescape(s);
}

static void connection_event(void *cls, struct MHD_Connection *con, void **socket_context,
                             enum MHD_ConnectionNotificationCode code) {
    (void)con;
    (void)socket_context;
    server *s = cls;
    atomic_fetch_add(&s->connections, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

/* ---------------------------------------------------------------- the server */

static void model_id_of(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && !strcmp(base + len - 5, ".gguf")) len -= 5;
    snprintf(out, n, "%.*s", (int)(len < n - 1 ? len : n - 1), base);
}

/* Connections beyond --max-connections are answered 503, which takes a descriptor and a
 * thread each for a moment; beyond this many more the listening socket stops accepting. */
enum { CONNECTIONS_OVER_LIMIT = 1024 };

/* The descriptors the connections need: the soft limit raised to the hard one. */
static unsigned connection_limit(int max_connections) {
    struct rlimit rl;
    unsigned want = (unsigned)max_connections + CONNECTIONS_OVER_LIMIT;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return want;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    /* some for the model, the log and the listening socket */
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)want + 64)
        want = rl.rlim_cur > 128 ? (unsigned)rl.rlim_cur - 64 : 64;
    return want;
}

/* SIGTERM: stop taking requests (503, /health too), give those in flight --shutdown-grace
 * seconds (a second signal ends the grace), then end them with an error. */
static void shut_down(server *s, const volatile sig_atomic_t *stop) {
    atomic_store(&s->stopping, true);
    const double deadline = mono_now() + s->p.shutdown_grace_s;
    fprintf(stderr, "toy serve: stopping: %d request(s) in flight, %d s for them to finish\n",
            atomic_load(&s->in_flight), s->p.shutdown_grace_s);
    while (atomic_load(&s->in_flight) > 0 && mono_now() < deadline && *stop < 2) usleep(10000);
    if (atomic_load(&s->in_flight) == 0) return;
    fprintf(stderr, "toy serve: ending %d request(s) still in flight\n", atomic_load(&s->in_flight));
    srv_engine_abort(s->engine, 503, "the server is shutting down");
    const double end = mono_now() + 0.5; /* for their error events to go out */
    while (atomic_load(&s->in_flight) > 0 && mono_now() < end) usleep(10000);
}

int ty_server_run(const ty_server_params *p, const volatile sig_atomic_t *stop) {
    server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->p = *p;
    s->started = unix_now();
    sem_init(&s->parse_permits, 0, PARSE_PERMITS);
    int rc = 1;
    struct MHD_Daemon *d = NULL;
    toy_model_params mp = toy_model_default_params();
    mp.use_mmap = !p->no_mmap;
    if (toy_model_load_with(p->model_path, &mp, &s->model)) {
        fprintf(stderr, "toy serve: %s\n", toy_last_error());
        goto done;
    }
    model_id_of(p->model_path, s->model_id, sizeof s->model_id);
    /* by default the model's context, but not 128k cells a slot */
    const int32_t n_train = toy_model_n_ctx_train(s->model);
    const int32_t n_ctx = p->n_ctx ? p->n_ctx : n_train < 4096 ? n_train : 4096;
    if (p->trace_model && !p->trace_model(p->trace_user, s->model)) goto done;
    const srv_engine_params ep = {p->n_parallel, n_ctx, 512, 128, p->n_threads, p->cache_type_k,
                                  p->cache_type_v, p->queue_max, true, p->attn, p->trace, p->trace_user};
    if (srv_engine_new(s->model, &ep, &s->engine)) {
        fprintf(stderr, "toy serve: %s\n", toy_last_error());
        goto done;
    }
    for (int i = 0; i < p->n_lora; i++)
        if (toy_lora_load(s->model, p->lora_paths[i], &s->loras[i])) {
            fprintf(stderr, "toy serve: %s\n", toy_last_error());
            goto done;
        }
    if (p->n_lora && srv_engine_set_lora(s->engine, s->loras, p->lora_scales, p->n_lora)) {
        fprintf(stderr, "toy serve: %s\n", toy_last_error());
        goto done;
    }
    if (!(s->chat_template = p->open_chat_template(p->open_chat_template_user, s->model))) goto done;
    if (p->chat_template_kwargs && !(s->chat_template_kwargs = json_loads(p->chat_template_kwargs, 0, NULL))) {
        fprintf(stderr, "toy serve: --chat-template-kwargs is not JSON\n"); /* (checked by the command) */
        goto done;
    }
    const toy_vocab *vocab = srv_engine_vocab(s->engine);
    s->oai = (oai_context){s->model_id, vocab, s->chat_template, toy_chat_template_family(s->chat_template),
                           s->chat_template_kwargs, srv_engine_n_ctx(s->engine), oai_max_text_bytes(vocab, srv_engine_n_ctx(s->engine)), 0};
    /* as llama-server: --pooling, else the file's pooling_type, else the mean */
    const toy_pooling pooling = p->pooling != TOY_POOLING_UNSPECIFIED ? (toy_pooling)p->pooling
                                : toy_model_pooling(s->model) != TOY_POOLING_UNSPECIFIED ? toy_model_pooling(s->model)
                                                                                        : TOY_POOLING_MEAN;
    s->emb = (emb_context){&s->oai, toy_model_n_embd(s->model), pooling, p->n_parallel};
    s->gate = (gate_config){p->api_key, p->host, p->host_aliases, p->n_host_aliases, p->cors_origins,
                            p->n_cors_origins, p->max_body, p->max_connections};

    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)p->port)};
    const bool v6 = strchr(p->host, ':') != NULL;
    if ((v6 ? inet_pton(AF_INET6, p->host, &a6.sin6_addr) : inet_pton(AF_INET, p->host, &a4.sin_addr)) != 1) {
        fprintf(stderr, "toy serve: --host '%s' is not an IPv4 or IPv6 address\n", p->host);
        goto done;
    }
    atomic_store(&s->loading, true);
    const unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                           MHD_USE_ERROR_LOG | MHD_USE_ITC | (v6 ? MHD_USE_IPv6 : 0);
    d = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR,
                         v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4, MHD_OPTION_CONNECTION_TIMEOUT,
                         (unsigned)p->timeout_s, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                         MHD_OPTION_NOTIFY_CONNECTION, connection_event, s, MHD_OPTION_CONNECTION_LIMIT,
                         connection_limit(p->max_connections), MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                         MHD_OPTION_END); /* SO_REUSEADDR as MHD sets it, never SO_REUSEPORT: a port in use is an error */
    if (!d) {
        fprintf(stderr, "toy serve: cannot listen on %s port %d: %s\n", p->host, p->port, strerror(errno));
        goto done;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    const unsigned port = di ? di->port : (unsigned)p->port;
    /* the products' packed weights, before the first request rather than in it: /health
     * says 503 "loading" meanwhile (the address is logged when ready) */
    fprintf(stderr, "toy serve: port %u answers 503 until the weights are packed\n", port);
    const double pack_t0 = mono_now();
    if (toy_model_pack(s->model, p->n_threads)) {
        fprintf(stderr, "toy serve: %s\n", toy_last_error());
        goto done;
    }
    atomic_store(&s->loading, false);
    fprintf(stderr, "toy serve: %s on http://%s%s%s:%u/ (%d slots of %d tokens, %d threads; packed in %.2f s)\n",
            s->model_id, v6 ? "[" : "", p->host, v6 ? "]" : "", port, p->n_parallel, srv_engine_n_ctx(s->engine),
            p->n_threads, mono_now() - pack_t0);
    while (!*stop) usleep(20000);
    shut_down(s, stop);
    rc = 0;
done:
    if (d) MHD_stop_daemon(d);
    srv_engine_free(s->engine);
    for (int i = 0; i < p->n_lora; i++) toy_lora_free(s->loras[i]);
    toy_chat_template_free(s->chat_template);
    json_decref(s->chat_template_kwargs);
    toy_model_free(s->model);
    sem_destroy(&s->parse_permits);
    free(s);
    return rc;
}
