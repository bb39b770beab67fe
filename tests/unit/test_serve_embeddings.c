/* test_serve_embeddings.c — toy serve's embedding jobs without HTTP, on the bundled model:
 *
 * - an embedding job's vector is the prompt's final-norm states (toy_get_embeddings of one
 *   batch) pooled (mean, first, last) and L2-normalised, the same bits when its prompt is
 *   read in chunks over several steps beside a generating request, whose tokens are its
 *   lone ones;
 * - the slot keeps the job's tokens: a completion of the same prompt reuses them and gets
 *   the tokens it gets on a fresh slot;
 * - a job the engine cannot pool (no embeddings, pooling none) ends with its error;
 * - embeddings.c: the request's fields and inputs, each refusal naming the field or
 *   input[i]; the response's JSON and base64; the gate's route.
 */
#include <unistd.h>

#include "embeddings.h"
#include "engine.h"
#include "gate.h"
#include "serve_outcome.h"
#include "test.h"
#include "toy.h"

static toy_model *model;
static int32_t n_embd;

static srv_params embd_params(const int32_t *prompt, int32_t n_prompt, toy_pooling pooling) {
    srv_params p = serve_params(prompt, n_prompt, 0);
    p.embedding = true;
    p.pooling = pooling;
    return p;
}

/* The expected vector: the states of one batch, pooled in position order in double,
 * normalised (the engine's arithmetic, so the same bits). */
static void reference(const int32_t *tok, int32_t n, toy_pooling pooling, float *out) {
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = n;
    cp.n_batch = n;
    cp.embeddings = true;
    toy_context *ctx;
    CHECK(toy_context_new(model, &cp, &ctx) == TOY_OK);
    int32_t *pos = xmalloc((size_t)n * sizeof *pos), *seq = calloc((size_t)n, sizeof *seq);
    for (int32_t i = 0; i < n; i++) pos[i] = i;
    const toy_batch b = {n, tok, pos, seq, NULL};
    CHECK(toy_decode(ctx, &b) == TOY_OK);
    double *pool = calloc((size_t)n_embd, sizeof *pool);
    for (int32_t i = 0; i < n; i++) {
        const float *h = toy_get_embeddings(ctx, i);
        for (int32_t d = 0; d < n_embd; d++) {
            if (pooling == TOY_POOLING_MEAN) pool[d] += h[d];
            else if ((pooling == TOY_POOLING_CLS && i == 0) || (pooling == TOY_POOLING_LAST && i == n - 1))
                pool[d] = h[d];
        }
    }
    const double scale = pooling == TOY_POOLING_MEAN ? 1.0 / n : 1.0;
    double sum = 0;
    for (int32_t d = 0; d < n_embd; d++) sum += (pool[d] * scale) * (pool[d] * scale);
    for (int32_t d = 0; d < n_embd; d++) out[d] = (float)(pool[d] * scale / sqrt(sum));
    free(pool);
    free(pos);
    free(seq);
    toy_context_free(ctx);
}

static bool same_vector(const outcome *o, const float *want) {
    return o->vector && o->vector_len == (size_t)n_embd * sizeof(float) && !memcmp(o->vector, want, o->vector_len);
}

static void test_engine(void) {
    /* 2 slots, 16 prompt tokens a step: a 50-token prompt takes 4 steps */
    const srv_engine_params ep = {2, 128, 64, 16, 2, TOY_TYPE_F32, TOY_TYPE_F32, 8, true, TOY_ATTN_FUSED, NULL, NULL};
    srv_engine *e;
    CHECK(!srv_engine_new(model, &ep, &e));
    int32_t prompt[50];
    for (int i = 0; i < 50; i++) prompt[i] = 100 + 37 * i % 900;
    const int32_t gen_prompt[] = {100, 200, 300, 400, 500};
    float *want[4];
    const toy_pooling poolings[] = {TOY_POOLING_MEAN, TOY_POOLING_CLS, TOY_POOLING_LAST};
    for (int k = 0; k < 3; k++) {
        want[k] = xmalloc((size_t)n_embd * sizeof(float));
        reference(prompt, 50, poolings[k], want[k]);
    }
    /* alone, each pooling */
    outcome o;
    for (int k = 0; k < 3; k++) {
        srv_params p = embd_params(prompt, 50, poolings[k]);
        serve_run(e, &p, &o);
        CHECK_MSG(same_vector(&o, want[k]), "pooling %d: the vector differs from one batch's states pooled",
                  poolings[k]);
        CHECK_EQ(o.n_tokens, 0);
        free(o.vector);
    }
    double norm = 0;
    for (int32_t d = 0; d < n_embd; d++) norm += (double)want[0][d] * want[0][d];
    CHECK_NEAR(norm, 1.0, 1e-6);

    /* a completion alone, on a fresh slot... */
    outcome gen_alone;
    srv_params g = serve_params(gen_prompt, 5, 24);
    serve_run(e, &g, &gen_alone);
    CHECK_EQ(gen_alone.n_tokens, 24);
    /* ...and beside an embedding job in chunks: both as alone */
    srv_params gp = serve_params(gen_prompt, 5, 24), ej = embd_params(prompt, 50, TOY_POOLING_MEAN);
    srv_request *rg, *re;
    CHECK(!srv_submit(e, &gp, &rg));
    CHECK(!srv_submit(e, &ej, &re));
    outcome og, oe;
    serve_collect(re, &oe);
    serve_collect(rg, &og);
    CHECK_MSG(same_vector(&oe, want[0]), "the vector beside a generating request differs");
    CHECK(og.n_tokens == gen_alone.n_tokens && !memcmp(og.tokens, gen_alone.tokens, sizeof og.tokens));
    free(oe.vector);

    /* a completion of the embedded prompt reuses the slot's 49 first tokens and gets the
     * tokens of a fresh slot */
    srv_params fresh = serve_params(prompt, 50, 8);
    srv_engine *e2;
    CHECK(!srv_engine_new(model, &ep, &e2));
    outcome o_fresh, o_reuse;
    serve_run(e2, &fresh, &o_fresh);
    srv_engine_free(e2);
    srv_params again = embd_params(prompt, 50, TOY_POOLING_LAST);
    serve_run(e, &again, &o);
    free(o.vector);
    srv_params reuse = serve_params(prompt, 50, 8);
    serve_run(e, &reuse, &o_reuse);
    CHECK_EQ(o_reuse.cached, 49);
    CHECK_EQ(o_fresh.cached, 0);
    CHECK(o_reuse.n_tokens == 8 && !memcmp(o_reuse.tokens, o_fresh.tokens, sizeof o_fresh.tokens));

    /* pooling none: no one vector, the job refused */
    srv_params none = embd_params(prompt, 10, TOY_POOLING_NONE);
    serve_run(e, &none, &o);
    CHECK_EQ(o.error_status, 400);
    CHECK_STR_CONTAINS(o.error, "not mean, cls or last");
    CHECK(o.vector == NULL);
    srv_engine_free(e);

    /* an engine made without embeddings refuses the job */
    const srv_engine_params off = {1, 64, 64, 16, 2, TOY_TYPE_F32, TOY_TYPE_F32, 8, false, TOY_ATTN_FUSED, NULL, NULL};
    CHECK(!srv_engine_new(model, &off, &e));
    srv_params p = embd_params(prompt, 10, TOY_POOLING_MEAN);
    serve_run(e, &p, &o);
    CHECK_EQ(o.error_status, 500);
    CHECK_STR_CONTAINS(o.error, "embeddings are off");
    srv_engine_free(e);
    for (int k = 0; k < 3; k++) free(want[k]);
}

/* ---------------------------------------------------------------- embeddings.c */

static emb_context context(const oai_context *oc) { return (emb_context){oc, n_embd, TOY_POOLING_MEAN, 2}; }

static void expect_400(const char *body, const char *param, const char *message) {
    const toy_vocab *v = toy_model_vocab(model);
    const oai_context oc = {"toy-kjv", v, serve_chatml(), "chatml", NULL, 64, oai_max_text_bytes(v, 64), 1};
    const emb_context c = context(&oc);
    emb_request r;
    oai_error err;
    const bool ok = emb_parse(&c, body, strlen(body), &r, &err);
    check_refused(body, ok, &err, param, message);
    if (ok) emb_request_free(&r);
}

static void test_parse(void) {
    expect_400("{\"input\":[]}", "input", "empty array");
    expect_400("{\"input\":[[]]}", "input", "input[0] is an empty array");
    expect_400("{\"input\":[\"a\",3]}", "input", "input[1] must be a string");
    expect_400("{\"input\":[1,2,99999]}", "input", "input[2] is not a token id");
    expect_400("{\"input\":[[1],[2,-1]]}", "input", "input[1][1] is not a token id");
    expect_400("{\"input\":[[1],[2,2.5]]}", "input", "input[1][1] is not a token id");
    expect_400("{\"input\":true}", "input", "must be a string");
    expect_400("{\"model\":\"toy-kjv\"}", "input", "missing");
    expect_400("{\"input\":\"x\",\"encoding_format\":\"int8\"}", "encoding_format", "\"float\" or \"base64\"");
    expect_400("{\"input\":\"x\",\"dimensions\":12}", "dimensions", "does not shorten");
    expect_400("{\"input\":\"x\",\"dimensions\":\"all\"}", "dimensions", "integer");
    expect_400("{\"input\":\"x\",\"model\":\"ada\"}", "model", "does not exist");
    expect_400("{\"input\":\"x\",\"user\":{}}", "user", "string");
    expect_400("{\"input\":\"x\",\"truncate\":true}", "truncate", "unknown field");
    expect_400("[\"x\"]", "", "JSON object");
    /* over the 64 tokens of the context: counted, and as text before the tokenizer runs */
    char body[4096];
    int at = snprintf(body, sizeof body, "{\"input\":[\"ok\",[");
    for (int i = 0; i < 65; i++) at += snprintf(body + at, sizeof body - (size_t)at, i ? ",5" : "5");
    snprintf(body + at, sizeof body - (size_t)at, "]]}");
    expect_400(body, "input", "input[1] is 65 tokens, over the context of 64");
    at = snprintf(body, sizeof body, "{\"input\":\"");
    for (int i = 0; i < 80; i++) at += snprintf(body + at, sizeof body - (size_t)at, "the ");
    snprintf(body + at, sizeof body - (size_t)at, "\"}");
    expect_400(body, "input", "over the context of 64");
    const size_t big = oai_max_text_bytes(toy_model_vocab(model), 64) + 1;
    char *huge = xmalloc(big + 32);
    memcpy(huge, "{\"input\":[\"", 11);
    memset(huge + 11, 'a', big);
    strcpy(huge + 11 + big, "\"]}");
    expect_400(huge, "input", "input[0] is");
    free(huge);

    /* what is accepted, and how it is read */
    const toy_vocab *v = toy_model_vocab(model);
    const oai_context oc = {"toy-kjv", v, serve_chatml(), "chatml", NULL, 64, oai_max_text_bytes(v, 64), 1};
    emb_context c = context(&oc);
    emb_request r;
    oai_error err;
    const char *fine = "{\"input\":[\"And God said\",\"\"],\"model\":\"toy-kjv\",\"encoding_format\":\"base64\","
                       "\"dimensions\":%d,\"user\":\"u1\"}";
    char fine_body[256];
    snprintf(fine_body, sizeof fine_body, fine, n_embd);
    CHECK_MSG(emb_parse(&c, fine_body, strlen(fine_body), &r, &err), "%s", err.message);
    int32_t *tok, n;
    CHECK(toy_tokenize_alloc(v, "And God said", 12, true, true, &tok, &n) == TOY_OK);
    CHECK(r.n_inputs == 2 && r.base64);
    CHECK(r.n_tokens[0] == n && !memcmp(r.tokens[0], tok, (size_t)n * sizeof *tok));
    CHECK(toy_vocab_add_bos(v) && r.n_tokens[1] == 1 && r.tokens[1][0] == toy_vocab_bos(v)); /* "": BOS alone */
    toy_free(tok);
    emb_request_free(&r);
    const char *ids = "{\"input\":[3,4,5]}";
    CHECK(emb_parse(&c, ids, strlen(ids), &r, &err) && r.n_inputs == 1 && r.n_tokens[0] == 3 && r.tokens[0][2] == 5);
    emb_request_free(&r);
    /* a server whose pooling is none refuses every request */
    c.pooling = TOY_POOLING_NONE;
    CHECK(!emb_parse(&c, ids, strlen(ids), &r, &err) && err.status == 400);
    CHECK_STR_CONTAINS(err.message, "--pooling mean, cls or last");
}

static void test_response(void) {
    const toy_vocab *v = toy_model_vocab(model);
    const oai_context oc = {"toy-kjv", v, serve_chatml(), "chatml", NULL, 64, oai_max_text_bytes(v, 64), 1};
    emb_context c = {&oc, 2, TOY_POOLING_MEAN, 1};
    int32_t t0[] = {1, 2, 3}, t1[] = {4};
    int32_t *tokens[] = {t0, t1}, n_tokens[] = {3, 1};
    emb_request r = {tokens, n_tokens, 2, false};
    const float vectors[] = {1.0f, -2.0f, 0.1f, 0.0f};
    oai_error err;
    char *json = emb_response_json(&c, &r, vectors, &err);
    const char *want = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,\"embedding\":[1,-2]},"
                       "{\"object\":\"embedding\",\"index\":1,\"embedding\":[0.100000001,0]}],"
                       "\"model\":\"toy-kjv\",\"usage\":{\"prompt_tokens\":4,\"total_tokens\":4}}";
    CHECK_MSG(json && !strcmp(json, want), "%s", json ? json : err.message);
    free(json);
    /* base64 of the little-endian bytes: 00 00 80 3f 00 00 00 c0, and 1 and 2 bytes left over */
    r.base64 = true;
    json = emb_response_json(&c, &r, vectors, &err);
    CHECK_STR_CONTAINS(json, "\"embedding\":\"AACAPwAAAMA=\"");
    CHECK_STR_CONTAINS(json, "\"embedding\":\"zczMPQAAAAA=\"");
    free(json);
    c.n_embd = 1;
    r.n_inputs = 1;
    json = emb_response_json(&c, &r, vectors + 1, &err); /* -2: 00 00 00 c0 */
    CHECK_STR_CONTAINS(json, "\"embedding\":\"AAAAwA==\"");
    free(json);
    const float inf[] = {INFINITY};
    CHECK(emb_response_json(&c, &r, inf, &err) == NULL && err.status == 500);
    CHECK_STR_CONTAINS(err.message, "not finite");
}

static void test_gate(void) {
    const gate_config c = {NULL, "127.0.0.1", NULL, 0, NULL, 0, 1000, 4};
    gate_request r = {.method = "POST", .url = "/v1/embeddings", .host = "127.0.0.1:8080",
                      .content_type = "application/json", .open_connections = 1};
    gate_verdict v;
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 0);
    CHECK_EQ(v.route, ROUTE_EMBEDDINGS);
    r.url = "/embeddings";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.route, ROUTE_EMBEDDINGS_UNVERSIONED);
    r.method = "GET";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 405);
    r.method = "POST";
    r.content_type = "text/plain";
    gate_check(&c, &r, &v);
    CHECK_EQ(v.status, 415);
}

int main(void) {
    model = serve_load_model();
    if (!model) return 1;
    n_embd = toy_model_n_embd(model);
    test_engine();
    test_parse();
    test_response();
    test_gate();
    toy_model_free(model);
    return test_finish("test_serve_embeddings");
}
