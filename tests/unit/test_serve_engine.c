/* test_serve_engine.c — toy serve's engine and request checks without HTTP, on the bundled
 * model: a request that fails (a choice that cannot start, a forward pass its own tokens
 * break, shutdown) ends with its error and nothing else changes — the queue moves on and
 * a request beside it gets the tokens it gets alone; a cancel frees the slot at once;
 * max_tokens 0 generates nothing; a prompt cached in another slot, busy or a sibling
 * choice's, is copied and answers as cold; the field checks of openai.c and the gate's order;
 * token text longer than any fixed buffer. */
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "gate.h"
#include "openai.h"
#include "piece.h"
#include "serve_outcome.h"
#include "test.h"
#include "toy.h"

static toy_model *model;
static srv_engine *engine;

static const int32_t prompt_a[] = {100, 200, 300, 400, 500};
static const int32_t prompt_b[] = {7, 8, 9};

/* Every slot free and the queue empty, waiting up to `seconds` of wall time (generous: a
 * hang fails, a slow or sanitized machine does not). */
static bool idle_within(double seconds) {
    for (const double t0 = test_now_s();; test_nap(0.01)) {
        srv_metrics m;
        srv_engine_metrics(engine, &m);
        if (m.busy_slots == 0 && m.queue_depth == 0) return true;
        if (test_now_s() - t0 > seconds) return false;
    }
}

/* A choice whose stop strings the matcher refuses (an empty one, which the request checks
 * let through before) ends with a 400 at once, and the queue goes on: the request behind
 * it is answered. Before, the job stayed at the queue's head and every later request
 * waited behind it for ever. */
static void test_start_failure(const outcome *alone) {
    srv_params bad = serve_params(prompt_a, 5, 8);
    bad.stops[0] = strdup("");
    bad.n_stops = 1;
    srv_request *rb, *ra;
    CHECK(!srv_submit(engine, &bad, &rb));
    srv_params good = serve_params(prompt_a, 5, 16);
    CHECK(!srv_submit(engine, &good, &ra));
    outcome ob, oa;
    serve_collect(rb, &ob);
    serve_collect(ra, &oa);
    CHECK_EQ(ob.error_status, 400);
    CHECK_STR_CONTAINS(ob.error, "cannot start");
    CHECK_EQ(oa.error_status, 0);
    CHECK_EQ(oa.n_tokens, alone->n_tokens);
    CHECK(!memcmp(oa.tokens, alone->tokens, sizeof oa.tokens));
    CHECK(idle_within(120));
}

/* A request whose prompt holds a token id past the vocabulary makes the step it is in
 * fail. Only it ends (500, naming the token); the request beside it in the same steps
 * gets exactly its lone tokens. Before, every request of the step ended "length". */
static void test_decode_failure(const outcome *alone) {
    const int32_t broken[] = {100, 200, toy_model_n_vocab(model) + 5};
    srv_params good = serve_params(prompt_a, 5, 16), bad = serve_params(broken, 3, 8);
    srv_request *ra, *rb;
    CHECK(!srv_submit(engine, &good, &ra));
    CHECK(!srv_submit(engine, &bad, &rb));
    outcome oa, ob;
    serve_collect(rb, &ob);
    serve_collect(ra, &oa);
    CHECK_EQ(ob.error_status, 500);
    CHECK_STR_CONTAINS(ob.error, "out of range");
    CHECK_EQ(oa.error_status, 0);
    CHECK(oa.finish && !strcmp(oa.finish, "length"));
    CHECK_EQ(oa.n_tokens, alone->n_tokens);
    CHECK(!memcmp(oa.tokens, alone->tokens, sizeof oa.tokens));
    CHECK(idle_within(120));
}

/* A cancelled request leaves its slot, and a cancelled request still queued leaves the
 * queue, within a step; the engine then idles. */
static void test_cancel(void) {
    srv_params a = serve_params(prompt_a, 5, 400), b = serve_params(prompt_b, 3, 400), c = serve_params(prompt_b, 3, 400);
    srv_request *ra, *rb, *rc;
    const double t_submit = test_now_s();
    CHECK(!srv_submit(engine, &a, &ra));
    CHECK(!srv_submit(engine, &b, &rb));
    CHECK(!srv_submit(engine, &c, &rc)); /* two slots: this one waits */
    srv_event ev;
    for (int k = 0; k < 2; k++) {
        CHECK(srv_next_event(ra, &ev, 300000));
        srv_event_clear(&ev);
    }
    /* the watchdog's measure: working, the last step ended after the submission (the step
     * of the first token did, before the second's began); idle, nothing */
    const double stalled = srv_engine_stalled_for(engine);
    CHECK_MSG(stalled <= test_now_s() - t_submit, "stalled for %.3f s", stalled);
    srv_cancel(rc);
    srv_cancel(ra);
    srv_cancel(rb);
    CHECK(idle_within(120));
    CHECK(srv_engine_stalled_for(engine) == 0);
    srv_request_release(ra);
    srv_request_release(rb);
    srv_request_release(rc);
}

/* max_tokens 0: the prompt is read, nothing generated, finish "length". Before, one
 * token came back. */
static void test_max_tokens_zero(void) {
    srv_params p = serve_params(prompt_a, 5, 0);
    outcome o;
    serve_run(engine, &p, &o);
    CHECK_EQ(o.n_tokens, 0);
    CHECK(o.finish && !strcmp(o.finish, "length"));
}

/* Shutdown: every request, running or queued, ends with the abort's status; no new one
 * is taken. */
static void test_abort(void) {
    srv_params p = serve_params(prompt_a, 5, 400);
    p.n_choices = 3; /* two run, one waits */
    srv_request *r;
    CHECK(!srv_submit(engine, &p, &r));
    srv_event ev;
    CHECK(srv_next_event(r, &ev, 300000));
    srv_event_clear(&ev);
    srv_engine_abort(engine, 503, "the server is shutting down");
    bool got_error = false;
    for (const double t0 = test_now_s(); !got_error && test_now_s() - t0 < 300;) {
        if (!srv_next_event(r, &ev, 100)) continue;
        if (ev.kind == SRV_EV_ERROR) {
            got_error = true;
            CHECK_EQ(ev.status, 503);
            CHECK_STR_CONTAINS(ev.text, "shutting down");
        }
        srv_event_clear(&ev);
    }
    CHECK(got_error);
    CHECK(!srv_next_event(r, &ev, 0)); /* nothing after the error */
    srv_request_release(r);
    CHECK(idle_within(120));
    srv_params q = serve_params(prompt_a, 5, 4);
    CHECK_EQ(srv_submit(engine, &q, &r), TOY_ERR_UNSUPPORTED);
    CHECK(r == NULL);
}

/* A prompt whose first 40 tokens a busy slot holds: the request starting beside it
 * copies those cells (cached 40) and gets exactly the tokens it gets read cold
 * (cache_prompt false, cached 0), while the busy request goes on. */
static void test_prompt_cache_busy(void) {
    int32_t held[48], asked[44];
    for (int i = 0; i < 40; i++) held[i] = asked[i] = 1000 + 7 * i;
    for (int i = 40; i < 48; i++) held[i] = 2000 + i;
    for (int i = 40; i < 44; i++) asked[i] = 3000 + i;
    srv_params p = serve_params(asked, 44, 16);
    p.no_cache_prompt = true;
    outcome cold, warm;
    serve_run(engine, &p, &cold);
    CHECK_EQ(cold.n_tokens, 16);
    CHECK_EQ(cold.cached, 0);
    /* the holder takes the slot of the cold run (it holds 40 tokens of its prompt) and
     * runs until the context (128) is full, 80 steps; the request behind it takes the
     * other slot and copies the holder's cells */
    srv_params h = serve_params(held, 48, 400);
    srv_request *rh;
    CHECK(!srv_submit(engine, &h, &rh));
    p = serve_params(asked, 44, 16);
    serve_run(engine, &p, &warm);
    srv_metrics m;
    srv_engine_metrics(engine, &m);
    CHECK_EQ(m.busy_slots, 1); /* the holder still generates */
    CHECK_EQ(warm.cached, 40);
    CHECK_EQ(warm.n_tokens, cold.n_tokens);
    CHECK(!memcmp(warm.tokens, cold.tokens, sizeof warm.tokens));
    srv_cancel(rh);
    srv_request_release(rh);
    CHECK(idle_within(120));
}

/* The choices of one request read the prompt once: the second copies the first's cells
 * (the engine's cached count grows by all but the prompt's last token) and samples the
 * tokens a lone request with its seed gets cold. */
static void test_prompt_cache_choices(void) {
    int32_t prompt[30];
    for (int i = 0; i < 30; i++) prompt[i] = 4000 + 3 * i;
    srv_params p = serve_params(prompt, 30, 12);
    p.sampling.temperature = 0.8f;
    p.sampling.seed = 77;
    p.n_choices = 2;
    srv_metrics before, after;
    srv_engine_metrics(engine, &before);
    srv_request *r;
    CHECK(!srv_submit(engine, &p, &r));
    int32_t tokens[2][16];
    int n[2] = {0, 0}, done = 0;
    for (const double t0 = test_now_s(); done < 2 && test_now_s() - t0 < 300;) {
        srv_event ev;
        if (!srv_next_event(r, &ev, 100)) continue;
        if (ev.kind == SRV_EV_TOKEN && n[ev.choice] < 16) tokens[ev.choice][n[ev.choice]++] = ev.token;
        done += ev.kind == SRV_EV_DONE;
        CHECK(ev.kind != SRV_EV_ERROR);
        if (ev.kind == SRV_EV_ERROR) done = 2;
        srv_event_clear(&ev);
    }
    srv_request_release(r);
    srv_engine_metrics(engine, &after);
    CHECK_EQ(after.cached_tokens - before.cached_tokens, 29);
    CHECK_EQ(after.prompt_tokens - before.prompt_tokens, 30 + 1);
    for (int c = 0; c < 2; c++) {
        srv_params q = serve_params(prompt, 30, 12);
        q.sampling.temperature = 0.8f;
        q.sampling.seed = 77 + (uint64_t)c;
        q.no_cache_prompt = true;
        outcome alone;
        serve_run(engine, &q, &alone);
        CHECK_EQ(n[c], alone.n_tokens);
        CHECK_MSG(!memcmp(tokens[c], alone.tokens, (size_t)n[c] * sizeof *alone.tokens),
                  "choice %d differs from a lone request with its seed", c);
    }
}

/* ---------------------------------------------------------------- openai.c and gate.c */

static oai_context context(void) {
    const toy_vocab *v = toy_model_vocab(model);
    return (oai_context){"toy-kjv", v, serve_chatml(), "chatml", NULL, 64, oai_max_text_bytes(v, 64), 1};
}

static void expect_400(const char *body, bool chat, const char *param, const char *message) {
    const oai_context c = context();
    oai_request req;
    oai_error err;
    const bool ok = oai_parse(&c, body, strlen(body), chat, &req, &err);
    check_refused(body, ok, &err, param, message);
    if (ok) oai_request_free(&req);
}

static void test_parse(void) {
    /* the string form of stop, which passed before and wedged the queue */
    expect_400("{\"prompt\":\"x\",\"stop\":\"\"}", false, "stop", "non-empty");
    /* Jansson refuses \u0000 itself (a C string would end there) */
    expect_400("{\"prompt\":\"x\",\"stop\":\"a\\u0000b\"}", false, "", "u0000");
    expect_400("{\"prompt\":\"x\",\"stop\":[\"a\",\"\"]}", false, "stop", "stop[1]");
    expect_400("{\"prompt\":\"x\",\"response_format\":{\"type\":\"xml\"}}", false, "response_format",
               "type 'xml' is not supported");
    expect_400("{\"prompt\":\"x\",\"grammar\":\"root ::= [a-z\"}", false, "grammar",
               "grammar: line 1, column 10: unterminated character class");
    expect_400("{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{}}", false, "json_schema",
               "cannot be combined");
    expect_400("{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
               "\"strict\":true,\"schema\":{\"type\":\"string\",\"contentMediaType\":\"a/b\"}}}}",
               false, "response_format", "contentMediaType");
    expect_400("{\"prompt\":\"x\",\"logit_bias\":{\"abc\":1}}", false, "logit_bias", "'abc' is not a token id");
    expect_400("{\"prompt\":\"x\",\"logit_bias\":{\"1\":101}}", false, "logit_bias", "-100..100");
    expect_400("{\"prompt\":\"x\",\"frobnicate\":1}", false, "frobnicate", "unknown field");
    expect_400("{\"prompt\":\"x\",\"top_logprobs\":2}", false, "top_logprobs", "unknown field");
    expect_400("{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", true, "", "u0000");
    expect_400("{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[{}]}]}", true, "messages",
               "messages[0].tool_calls: only an assistant's message has them");
    expect_400("{\"prompt\":\"x\",\"max_completion_tokens\":100}", false, "max_completion_tokens", "over the context");
    /* a text longer than any that fits 64 tokens is refused before it is tokenized */
    const oai_context c = context();
    const size_t n = c.max_text_bytes + 1;
    char *big = malloc(n + 32);
    memcpy(big, "{\"prompt\":\"", 11);
    memset(big + 11, 'a', n);
    strcpy(big + 11 + n, "\"}");
    expect_400(big, false, "prompt", "bytes");
    free(big);
    /* what asks for nothing is accepted */
    const char *fine = "{\"prompt\":\"And\",\"user\":\"u\",\"logit_bias\":{},\"tools\":[],\"echo\":false,"
                       "\"temperature\":null,\"max_tokens\":0}";
    oai_request req;
    oai_error err;
    CHECK_MSG(oai_parse(&c, fine, strlen(fine), false, &req, &err), "%s", err.message);
    CHECK_EQ(req.gen.max_tokens, 0);
    oai_request_free(&req);
}

static void test_gate(void) {
    const char *aliases[] = {"toy.internal"}, *origins[] = {"http://app.example"};
    const gate_config c = {"sesame", "127.0.0.1", aliases, 1, origins, 1, 1000, 4};
    gate_request r = {.method = "POST", .url = "/v1/completions", .host = "127.0.0.1:8080",
                      .authorization = "Bearer sesame", .content_type = "application/json; charset=utf-8",
                      .content_length = "10", .open_connections = 1};
    gate_verdict v;
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 0);
    CHECK_EQ(v.route, ROUTE_COMPLETIONS);
    CHECK_EQ(v.body_length, 10);
    r.content_length = "1001";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 413);
    r.content_type = "text/plain";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 415);
    r.authorization = NULL; /* the key is checked before the body's type and length */
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 401);
    r.host = "evil.example:8080";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 403);
    CHECK_STR_CONTAINS(v.err.message, "evil.example");
    r.host = "TOY.internal";
    r.authorization = "Bearer sesame";
    r.content_type = NULL;
    r.content_length = NULL;
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 0);
    r.host = "[::1]:8080";
    r.origin = "http://evil.example";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 403);
    r.origin = "http://[::1]:8080"; /* the server's own page */
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 0);
    CHECK(!v.cors);
    r.origin = "http://app.example";
    r.method = "OPTIONS";
    r.preflight_method = "POST";
    r.authorization = NULL; /* a preflight never carries the key */
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 204);
    CHECK(v.cors);
    CHECK_STR_CONTAINS(v.allow, "POST");
    r.method = "PUT";
    r.authorization = "Bearer sesame";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 405);
    r.method = "GET";
    r.url = "/health";
    r.open_connections = 5;
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 503);
    CHECK(v.retry_after);
    r.open_connections = 1;
    r.stopping = true;
    gate_check(&c, &r, &v); /* /health answers while stopping (and says so) */
    CHECK_EQ(v.status, 0);
    r.url = "/v1/models";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 503);
    /* while the weights are packed: /health (which says "loading"), the page and the
     * metrics answer; the API says 503 with Retry-After */
    r.stopping = false;
    r.loading = true;
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 503);
    CHECK(v.retry_after);
    CHECK_STR_CONTAINS(v.err.message, "loading");
    const char *answered[] = {"/health", "/", "/metrics"};
    for (int i = 0; i < 3; i++) {
        r.url = answered[i];
        gate_check(&c, &r, &v);
        CHECK_EQ(v.status, 0);
    }
    r.loading = false;
    r.url = "/v1/models";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 0);
    /* every row of routes.h: found by its method and path (HEAD for GET), the key asked
     * unless the row is ROUTE_OPEN, a JSON body checked where it is ROUTE_BODY */
    static const struct {
        const char *method, *path;
        int rules;
        gate_route id;
    } rows[] = {
#define TEST_ROUTE_ROW(id, method, path, handler, rules) {method, path, rules, ROUTE_##id},
        SRV_ROUTES(TEST_ROUTE_ROW)
#undef TEST_ROUTE_ROW
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        gate_request q = {.method = rows[i].method, .url = rows[i].path, .host = "127.0.0.1:8080",
                          .content_type = "text/plain", .open_connections = 1};
        gate_check(&c, &q, &v);
        const int want = !(rows[i].rules & ROUTE_OPEN) ? 401 : rows[i].rules & ROUTE_BODY ? 415 : 0;
        CHECK_MSG(v.status == want, "%s %s: %d, not %d", rows[i].method, rows[i].path, v.status, want);
        q.authorization = "Bearer sesame";
        gate_check(&c, &q, &v);
        CHECK_MSG(v.status == (rows[i].rules & ROUTE_BODY ? 415 : 0), "%s %s with the key: %d", rows[i].method,
                  rows[i].path, v.status);
        q.content_type = "application/json";
        gate_check(&c, &q, &v);
        CHECK_MSG(v.status == 0 && v.route == rows[i].id, "%s %s: %d, route %d", rows[i].method, rows[i].path,
                  v.status, (int)v.route);
        if (!strcmp(rows[i].method, "GET")) {
            q.method = "HEAD";
            gate_check(&c, &q, &v);
            CHECK_MSG(v.status == 0 && v.route == rows[i].id, "HEAD %s: %d", rows[i].path, v.status);
        }
        q.method = "DELETE";
        gate_check(&c, &q, &v);
        CHECK_MSG(v.status == 405, "DELETE %s: %d", rows[i].path, v.status);
        q.loading = true;
        q.method = rows[i].method;
        gate_check(&c, &q, &v);
        CHECK_MSG(v.status == (rows[i].rules & ROUTE_LOADING ? 0 : 503), "%s %s while loading: %d", rows[i].method,
                  rows[i].path, v.status);
        q.loading = false;
        q.stopping = true;
        gate_check(&c, &q, &v);
        CHECK_MSG(v.status == (rows[i].rules & ROUTE_STOPPING ? 0 : 503), "%s %s while stopping: %d", rows[i].method,
                  rows[i].path, v.status);
    }
    r.url = "/v1/nothing";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 404);
}

/* A token longer than the 255 bytes toy serve's buffers held before (they cut it) comes
 * out whole. */
static void test_long_piece(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/toy_test_serve_%d.gguf", (int)getpid());
    char long_token[301];
    memset(long_token, 'z', 300);
    long_token[300] = 0;
    const char *tokens[] = {"a", "b", long_token};
    const size_t lens[] = {1, 1, 300};
    const float scores[] = {0, 0, 0};
    const int32_t types[] = {1, 1, 1};
    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    toy_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, lens, 3);
    toy_gguf_writer_set_array(w, "tokenizer.ggml.scores", TOY_GGUF_FLOAT32, scores, 3);
    toy_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TOY_GGUF_INT32, types, 3);
    const char *merges[] = {"a b"};
    const size_t merge_lens[] = {3};
    toy_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, merge_lens, 1);
    CHECK(!toy_gguf_writer_write(w, path));
    toy_gguf_writer_free(w);
    toy_gguf *g = NULL;
    toy_vocab *v = NULL;
    CHECK(!toy_gguf_open(path, &g));
    CHECK_MSG(g && !toy_vocab_load(g, &v), "%s", toy_last_error());
    toy_gguf_close(g);
    unlink(path);
    if (!v) return;
    srv_piece p;
    CHECK(srv_piece_of(v, 2, &p));
    CHECK_EQ(p.len, 300);
    CHECK(p.text && p.text[0] == 'z' && p.text[299] == 'z');
    srv_piece_free(&p);
    CHECK(!srv_piece_of(v, 3, &p)); /* out of range */
    srv_event ev = {.kind = SRV_EV_TOKEN, .token = 2, .n_top = 1, .top_token = {2}};
    json_t *lp = oai_token_logprob(v, &ev);
    CHECK(lp && json_string_length(json_object_get(lp, "token")) == 300);
    CHECK(lp && json_array_size(json_object_get(lp, "bytes")) == 300);
    json_decref(lp);
    CHECK_EQ(oai_max_text_bytes(v, 10), 3000);
    toy_vocab_free(v);
}

int main(void) {
    model = serve_load_model();
    if (!model) return 1;
    const srv_engine_params ep = {2, 128, 64, 16, 2, TOY_TYPE_F32, TOY_TYPE_F32, 8, false, TOY_ATTN_FUSED, NULL, NULL};
    CHECK(!srv_engine_new(model, &ep, &engine));
    outcome alone;
    srv_params p = serve_params(prompt_a, 5, 16);
    serve_run(engine, &p, &alone);
    CHECK_EQ(alone.n_tokens, 16);
    test_start_failure(&alone);
    test_decode_failure(&alone);
    test_cancel();
    test_max_tokens_zero();
    test_prompt_cache_busy();
    test_prompt_cache_choices();
    test_parse();
    test_gate();
    test_long_piece();
    test_abort();
    srv_engine_free(engine);
    toy_model_free(model);
    return test_finish("test_serve_engine");
}
