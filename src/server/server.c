/* server.c — toy serve's HTTP side: routes, authentication, limits, responses and
 * server-sent events, over libmicrohttpd with a thread per connection.
 *
 * A request's body is read whole (up to max_body), checked (openai.c) and handed to the
 * engine; a streaming response is a reader that turns each engine event into one
 * server-sent event, and notices between events when its client has gone, which frees
 * the client's slots at the engine's next step.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chat_page.h"
#include "engine.h"
#include "openai.h"
#include "server.h"

enum { N_STATUS = 8 };
static const int counted_status[N_STATUS] = {200, 400, 401, 404, 405, 413, 500, 503};

typedef struct {
    toy_server_params p;
    toy_model *model;
    toy_lora *loras[16];
    srv_engine *engine;
    oai_context oai;
    char model_id[256];
    long started;
    atomic_int in_flight;
    atomic_uint_fast64_t next_id;
    atomic_uint_fast64_t status_count[N_STATUS + 1]; /* the last: any other */
} server;

typedef struct {
    char *body;
    size_t len, cap;
    bool too_big;
    bool counted; /* in in_flight */
    struct timespec t0;
} conn_state;

static long unix_now(void) { return (long)time(NULL); }

static void count_status(server *s, int status) {
    int i = 0;
    while (i < N_STATUS && counted_status[i] != status) i++;
    atomic_fetch_add(&s->status_count[i], 1);
}

/* ---------------------------------------------------------------- replies */

static enum MHD_Result reply(server *s, struct MHD_Connection *con, int status, const char *type, const char *body,
                             size_t len, const char *allow) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    const enum MHD_Result ok = MHD_queue_response(con, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(s, status);
    return ok;
}

static enum MHD_Result reply_json(server *s, struct MHD_Connection *con, int status, char *json) {
    if (!json) return reply(s, con, 500, "application/json", "{}", 2, NULL);
    const enum MHD_Result ok = reply(s, con, status, "application/json", json, strlen(json), NULL);
    free(json);
    return ok;
}

static enum MHD_Result reply_error(server *s, struct MHD_Connection *con, const oai_error *err, const char *allow) {
    char *json = oai_error_json(err);
    const char *body = json ? json : "{\"error\":{\"message\":\"error\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
    const enum MHD_Result ok = reply(s, con, err->status, "application/json", body, strlen(body), allow);
    free(json);
    return ok;
}

static enum MHD_Result error(server *s, struct MHD_Connection *con, int status, const char *type, const char *param,
                             const char *msg, const char *allow) {
    oai_error e = {.status = status, .param = param, .type = type};
    snprintf(e.message, sizeof e.message, "%s", msg);
    return reply_error(s, con, &e, allow);
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
    int stage;        /* 0: events, 1: usage sent, 2: [DONE] sent */
} stream_state;

static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
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
        if (st->done == st->n_choices) {
            if (st->stage == 0 && st->req.include_usage) {
                int32_t prompt, completion, cached;
                srv_request_usage(st->r, &prompt, &completion, &cached);
                st->pending = oai_usage_chunk_sse(&st->s->oai, st->req.chat, st->id, st->created, prompt, completion);
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
        srv_event ev;
        if (!srv_next_event(st->r, &ev, 100)) {
            if (client_gone(st->fd)) {
                srv_cancel(st->r);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            continue;
        }
        const bool first = !(st->started & (1u << ev.choice));
        st->started |= 1u << ev.choice;
        if (ev.kind == SRV_EV_DONE) st->done++;
        /* a token whose text is held back (a possible stop string) shows nothing yet */
        if (ev.kind == SRV_EV_DONE || ev.len > 0 || first || st->req.logprobs) {
            st->pending = oai_chunk_sse(&st->s->oai, st->req.chat, st->req.logprobs, st->id, st->created, &ev, first);
            st->pending_len = st->pending ? strlen(st->pending) : 0;
        }
        srv_event_clear(&ev);
    }
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    if (st->done < st->n_choices) srv_cancel(st->r);
    srv_request_release(st->r);
    free(st->pending);
    free(st);
}

static enum MHD_Result completions(server *s, struct MHD_Connection *con, conn_state *cs, bool chat) {
    oai_request req;
    oai_error err;
    oai_context oc = s->oai;
    oc.seed = (uint64_t)time(NULL) ^ atomic_fetch_add(&s->next_id, 1) * 0x9e3779b97f4a7c15ULL;
    if (!oai_parse(&oc, cs->body ? cs->body : "", cs->len, chat, &req, &err)) return reply_error(s, con, &err, NULL);
    const int n_choices = req.gen.n_choices;
    srv_request *r;
    if (srv_submit(s->engine, &req.gen, &r))
        return error(s, con, 503, "server_error", NULL, "the server is busy (every slot taken, the queue full): try again", NULL);
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    const long created = unix_now();
    if (req.stream) {
        stream_state *st = calloc(1, sizeof *st);
        if (!st) {
            srv_cancel(r);
            srv_request_release(r);
            return error(s, con, 500, "server_error", NULL, "no memory", NULL);
        }
        /* req's prompt and stops now belong to the engine: only its flags are used */
        *st = (stream_state){.s = s, .r = r, .req = req, .created = created, .fd = -1, .n_choices = n_choices};
        memcpy(st->id, id, sizeof id);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) st->fd = ci->connect_fd;
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
        if (!resp) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        const enum MHD_Result ok = MHD_queue_response(con, 200, resp);
        MHD_destroy_response(resp);
        count_status(s, 200);
        return ok;
    }
    oai_choice *choices = calloc((size_t)n_choices, sizeof *choices);
    int done = 0;
    while (done < n_choices) {
        srv_event ev;
        if (!srv_next_event(r, &ev, -1)) break;
        if (choices) oai_choice_add(s->oai.vocab, chat, req.logprobs, &choices[ev.choice], &ev);
        done += ev.kind == SRV_EV_DONE;
        srv_event_clear(&ev);
    }
    int32_t prompt, completion, cached;
    srv_request_usage(r, &prompt, &completion, &cached);
    srv_request_release(r);
    char *json = choices ? oai_response_json(&s->oai, chat, id, created, choices, n_choices, prompt, completion) : NULL;
    for (int i = 0; choices && i < n_choices; i++) oai_choice_free(&choices[i]);
    free(choices);
    return reply_json(s, con, 200, json);
}

/* ---------------------------------------------------------------- other routes */

static enum MHD_Result tokenize(server *s, struct MHD_Connection *con, conn_state *cs) {
    json_error_t jerr;
    json_t *j = json_loadb(cs->body ? cs->body : "", cs->len, 0, &jerr);
    const json_t *content = j ? json_object_get(j, "content") : NULL;
    const json_t *add = j ? json_object_get(j, "add_special") : NULL;
    const json_t *parse = j ? json_object_get(j, "parse_special") : NULL;
    if (!j) {
        char msg[300];
        snprintf(msg, sizeof msg, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        return error(s, con, 400, "invalid_request_error", NULL, msg, NULL);
    }
    enum MHD_Result ok;
    if (!json_is_string(content)) {
        ok = error(s, con, 400, "invalid_request_error", "content", "content must be a string", NULL);
    } else if ((add && !json_is_boolean(add)) || (parse && !json_is_boolean(parse))) {
        ok = error(s, con, 400, "invalid_request_error", add && !json_is_boolean(add) ? "add_special" : "parse_special",
                   "add_special and parse_special must be true or false", NULL);
    } else {
        const size_t len = json_string_length(content);
        int32_t cap = len > (size_t)INT32_MAX - 8 ? 0 : (int32_t)len + 8, n = 0;
        int32_t *t = cap ? malloc((size_t)cap * sizeof *t) : NULL;
        if (!t || toy_tokenize(s->oai.vocab, json_string_value(content), len, add ? json_is_true(add) : true,
                               parse && json_is_true(parse), t, cap, &n)) {
            ok = error(s, con, 400, "invalid_request_error", "content", t ? toy_last_error() : "too long", NULL);
        } else {
            json_t *arr = json_array();
            for (int32_t i = 0; i < n; i++) json_array_append_new(arr, json_integer(t[i]));
            json_t *o = json_pack("{s:o}", "tokens", arr);
            ok = reply_json(s, con, 200, json_dumps(o, JSON_COMPACT));
            json_decref(o);
        }
        free(t);
    }
    json_decref(j);
    return ok;
}

static enum MHD_Result detokenize(server *s, struct MHD_Connection *con, conn_state *cs) {
    json_error_t jerr;
    json_t *j = json_loadb(cs->body ? cs->body : "", cs->len, 0, &jerr);
    if (!j) {
        char msg[300];
        snprintf(msg, sizeof msg, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        return error(s, con, 400, "invalid_request_error", NULL, msg, NULL);
    }
    const json_t *tokens = json_object_get(j, "tokens");
    enum MHD_Result ok;
    const int32_t n_vocab = toy_vocab_n_tokens(s->oai.vocab);
    const size_t n = json_is_array(tokens) ? json_array_size(tokens) : 0;
    int32_t *t = malloc((n ? n : 1) * sizeof *t);
    size_t bad = n;
    for (size_t i = 0; t && i < n; i++) {
        const json_t *v = json_array_get(tokens, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
            bad = i;
            break;
        }
        t[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    size_t len = 0;
    if (!json_is_array(tokens)) {
        ok = error(s, con, 400, "invalid_request_error", "tokens", "tokens must be an array of token ids", NULL);
    } else if (bad < n) {
        char msg[200];
        snprintf(msg, sizeof msg, "tokens[%zu] is not a token id (0..%d)", bad, n_vocab - 1);
        ok = error(s, con, 400, "invalid_request_error", "tokens", msg, NULL);
    } else if (!t || n > (size_t)INT32_MAX || toy_detokenize(s->oai.vocab, t, (int32_t)n, false, &text, &len)) {
        ok = error(s, con, 500, "server_error", NULL, "cannot detokenize", NULL);
    } else {
        json_t *o = json_pack("{s:o}", "content", oai_json_text(text, len));
        ok = reply_json(s, con, 200, json_dumps(o, JSON_COMPACT));
        json_decref(o);
    }
    free(text);
    free(t);
    json_decref(j);
    return ok;
}

static enum MHD_Result models(server *s, struct MHD_Connection *con) {
    json_t *o = json_pack("{s:s,s:[{s:s,s:s,s:i,s:s,s:{s:i,s:i,s:i}}]}", "object", "list", "data", "id", s->model_id,
                          "object", "model", "created", (json_int_t)s->started, "owned_by", "toy", "meta", "n_ctx",
                          srv_engine_n_ctx(s->engine), "n_vocab", toy_model_n_vocab(s->model), "n_slots",
                          s->p.n_parallel);
    enum MHD_Result ok = reply_json(s, con, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
    return ok;
}

static enum MHD_Result metrics(server *s, struct MHD_Connection *con) {
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
    return reply(s, con, 200, "text/plain; version=0.0.4", buf, (size_t)n, NULL);
}

/* ---------------------------------------------------------------- routing */

typedef enum { R_PAGE, R_HEALTH, R_METRICS, R_MODELS, R_CHAT, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE } route_id;

static const struct {
    const char *path;
    const char *method;
    route_id id;
} routes[] = {
    {"/", "GET", R_PAGE},
    {"/health", "GET", R_HEALTH},
    {"/metrics", "GET", R_METRICS},
    {"/v1/models", "GET", R_MODELS},
    {"/v1/chat/completions", "POST", R_CHAT},
    {"/v1/completions", "POST", R_COMPLETIONS},
    {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE},
};

static bool authorized(const server *s, struct MHD_Connection *con) {
    if (!s->p.api_key) return true;
    const char *h = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    /* the same time whatever the key's first wrong byte */
    const char *k = s->p.api_key, *g = h + 7;
    const size_t lk = strlen(k), lg = strlen(g);
    unsigned diff = lk != lg;
    for (size_t i = 0; i < lk; i++) diff |= (unsigned)(k[i] ^ (i < lg ? g[i] : 0));
    return diff == 0;
}

static enum MHD_Result route(server *s, struct MHD_Connection *con, const char *url, const char *method,
                             conn_state *cs) {
    int match = -1;
    bool path_known = false;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        if (strcmp(url, routes[i].path)) continue;
        path_known = true;
        if (!strcmp(method, routes[i].method) || (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET")))
            match = (int)i;
    }
    if (!path_known || strcmp(url, "/health")) {
        if (!authorized(s, con))
            return error(s, con, 401, "invalid_request_error", NULL,
                         "a valid API key is needed: Authorization: Bearer KEY", NULL);
    }
    if (!path_known) {
        char msg[600];
        snprintf(msg, sizeof msg, "no route %s %.500s", method, url);
        return error(s, con, 404, "invalid_request_error", NULL, msg, NULL);
    }
    if (match < 0) {
        const char *allow = "GET, HEAD";
        for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
            if (!strcmp(url, routes[i].path) && !strcmp(routes[i].method, "POST")) allow = "POST";
        char msg[600];
        snprintf(msg, sizeof msg, "%s does not take %s (only %s)", url, method, allow);
        return error(s, con, 405, "invalid_request_error", NULL, msg, allow);
    }
    if (cs->too_big) {
        char msg[200];
        snprintf(msg, sizeof msg, "the request body is over the limit of %zu bytes", s->p.max_body);
        return error(s, con, 413, "invalid_request_error", NULL, msg, NULL);
    }
    switch (routes[match].id) {
    case R_PAGE:
        return reply(s, con, 200, "text/html; charset=utf-8", toy_chat_page, toy_chat_page_len, NULL);
    case R_HEALTH:
        return reply(s, con, 200, "application/json", "{\"status\":\"ok\"}", 15, NULL);
    case R_METRICS:
        return metrics(s, con);
    case R_MODELS:
        return models(s, con);
    case R_CHAT:
        return completions(s, con, cs, true);
    case R_COMPLETIONS:
        return completions(s, con, cs, false);
    case R_TOKENIZE:
        return tokenize(s, con, cs);
    case R_DETOKENIZE:
        return detokenize(s, con, cs);
    }
    return MHD_NO;
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
        const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->p.max_body) cs->too_big = true;
        atomic_fetch_add(&s->in_flight, 1);
        cs->counted = true;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cs->too_big) {
            if (cs->len + *upload_size > s->p.max_body) {
                cs->too_big = true;
                free(cs->body);
                cs->body = NULL;
                cs->len = cs->cap = 0;
            } else {
                if (cs->len + *upload_size + 1 > cs->cap) {
                    size_t cap = cs->cap ? cs->cap : 4096;
                    while (cap < cs->len + *upload_size + 1) cap *= 2;
                    char *b = realloc(cs->body, cap);
                    if (!b) return MHD_NO;
                    cs->body = b;
                    cs->cap = cap;
                }
                memcpy(cs->body + cs->len, upload, *upload_size);
                cs->len += *upload_size;
                cs->body[cs->len] = 0;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return route(s, con, url, method, cs);
}

static void completed(void *cls, struct MHD_Connection *con, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)why;
    server *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_HTTP_STATUS);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double ms = 1e3 * (double)(t1.tv_sec - cs->t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - cs->t0.tv_nsec);
    fprintf(stderr, "toy serve: %u %.1f ms%s\n", ci ? ci->http_status : 0, ms,
            why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed)");
    if (cs->counted) atomic_fetch_sub(&s->in_flight, 1);
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

/* ---------------------------------------------------------------- the server */

static void model_id_of(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && !strcmp(base + len - 5, ".gguf")) len -= 5;
    snprintf(out, n, "%.*s", (int)(len < n - 1 ? len : n - 1), base);
}

int toy_server_run(const toy_server_params *p, const volatile sig_atomic_t *stop) {
    server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->p = *p;
    s->started = unix_now();
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
    const srv_engine_params ep = {p->n_parallel, n_ctx, 512, 128, p->n_threads, p->cache_type_k,
                                  p->cache_type_v, p->queue_max};
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
    const char *family;
    toy_chat_template_of(toy_model_gguf(s->model), &family);
    s->oai = (oai_context){s->model_id, srv_engine_vocab(s->engine), family, srv_engine_n_ctx(s->engine), 0};

    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)p->port)};
    const bool v6 = strchr(p->host, ':') != NULL;
    if ((v6 ? inet_pton(AF_INET6, p->host, &a6.sin6_addr) : inet_pton(AF_INET, p->host, &a4.sin_addr)) != 1) {
        fprintf(stderr, "toy serve: --host '%s' is not an IPv4 or IPv6 address\n", p->host);
        goto done;
    }
    const unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC |
                           (v6 ? MHD_USE_IPv6 : 0);
    d = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR,
                         v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4, MHD_OPTION_CONNECTION_TIMEOUT,
                         (unsigned)p->timeout_s, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                         MHD_OPTION_LISTENING_ADDRESS_REUSE, 1U, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "toy serve: cannot listen on %s port %d: %s\n", p->host, p->port, strerror(errno));
        goto done;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "toy serve: %s on http://%s%s%s:%u/ (%d slots of %d tokens, %d threads)\n", s->model_id,
            v6 ? "[" : "", p->host, v6 ? "]" : "", di ? di->port : (unsigned)p->port, p->n_parallel,
            srv_engine_n_ctx(s->engine), p->n_threads);
    while (!*stop) usleep(50000);
    /* stop accepting, let the requests in flight finish */
    const MHD_socket listen = MHD_quiesce_daemon(d);
    if (listen != MHD_INVALID_SOCKET) close(listen);
    fprintf(stderr, "toy serve: stopping: %d request(s) in flight\n", atomic_load(&s->in_flight));
    while (atomic_load(&s->in_flight) > 0) usleep(20000);
    rc = 0;
done:
    if (d) MHD_stop_daemon(d);
    srv_engine_free(s->engine);
    for (int i = 0; i < p->n_lora; i++) toy_lora_free(s->loras[i]);
    toy_model_free(s->model);
    free(s);
    return rc;
}
