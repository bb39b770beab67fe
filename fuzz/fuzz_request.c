/* fuzz_request.c — libFuzzer target for what toy serve does with a request before the
 * engine sees it: the gate on its request line and headers (gate.c), then the checks of
 * its body, the chat template and the tokenizer (openai.c, embeddings.c), called as server.c
 * calls them.
 *
 * Input: "METHOD PATH" on the first line, "Name: value" header lines, an empty line, then
 * the body's bytes. The first byte also picks the vocabulary (fuzz_common.h), the chat
 * template and the context size. Beyond what ASan and UBSan catch, everything accepted
 * must keep the promises the rest of the server relies on, and the target traps when one
 * is broken: a request the engine is given has 1..n_ctx prompt tokens inside the
 * vocabulary, room for max_tokens, and stop strings and sampling settings the engine's
 * matcher and sampler accept (a request that passed the checks and failed there once
 * wedged the queue); an embeddings request has 1..EMB_MAX_INPUTS inputs of 1..n_ctx tokens
 * each, inside the vocabulary; an error is a 4xx/5xx with a one-line message.
 *
 * tests/unit/test_fuzz_corpus.c includes this file to run the target over fuzz/corpus_request.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "embeddings.h"
#include "fuzz_common.h"
#include "gate.h"
#include "openai.h"
#include "toy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char *const fuzz_families[] = {"chatml", "llama2", "llama3", "gemma", "phi3", "mistral-v7", "zephyr",
                                            "deepseek3", "command-r", "granite"};
enum { N_FAMILIES = sizeof fuzz_families / sizeof *fuzz_families };
/* the families, then two Jinja templates: one that writes tools, and one that does not */
static toy_chat_template *fuzz_templates[N_FAMILIES + 2];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_load_vocabs();
    for (size_t i = 0; i < N_FAMILIES; i++) FUZZ_PROMISE(!toy_chat_template_builtin(fuzz_families[i], &fuzz_templates[i]));
    FUZZ_PROMISE(!toy_chat_template_new(
        "{{ bos_token }}{% if tools %}<tools>{{ tools|tojson }}</tools>{% endif %}{% for m in messages %}"
        "<|{{ m.role }}|>{{ m.content if m.content is string else m.content|map(attribute='text')|join }}"
        "{% for c in m.tool_calls or [] %}<call>{{ c.function.name }} {{ c.function.arguments|tojson }}</call>{% endfor %}"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
        "<s>", "</s>", &fuzz_templates[N_FAMILIES]));
    FUZZ_PROMISE(!toy_chat_template_new(
        "{% for m in messages %}{% if m.role == 'user' %}[INST]{{ m.content }}[/INST]{% else %}{{ m.content }}{% endif %}"
        "{% endfor %}", "", "", &fuzz_templates[N_FAMILIES + 1]));
    return 0;
}

/* One line of the input as a NUL-terminated copy; *at moves past it. */
static char *take_line(const uint8_t *data, size_t size, size_t *at) {
    size_t end = *at;
    while (end < size && data[end] != '\n') end++;
    size_t n = end - *at;
    if (n && data[*at + n - 1] == '\r') n--;
    char *line = malloc(n + 1);
    memcpy(line, data + *at, n);
    line[n] = 0;
    *at = end < size ? end + 1 : end;
    return line;
}

static void check_error(const oai_error *err) {
    FUZZ_PROMISE(err->status >= 400 && err->status < 600);
    FUZZ_PROMISE(err->message[0] && !strchr(err->message, '\n'));
    char *json = oai_error_json(err);
    FUZZ_PROMISE(json != NULL);
    free(json);
}

/* What the engine relies on in a request it is given. */
static void check_request(const oai_context *c, const oai_request *req) {
    const srv_params *g = &req->gen;
    const int32_t n_vocab = toy_vocab_n_tokens(c->vocab);
    FUZZ_PROMISE(g->n_prompt >= 1 && g->n_prompt <= c->n_ctx);
    for (int32_t i = 0; i < g->n_prompt; i++) FUZZ_PROMISE(g->prompt[i] >= 0 && g->prompt[i] < n_vocab);
    FUZZ_PROMISE((int64_t)g->n_prompt + (g->max_tokens > 0 ? g->max_tokens : 0) <= c->n_ctx);
    FUZZ_PROMISE(g->n_choices >= 1 && g->n_choices <= 16);
    FUZZ_PROMISE(g->top_logprobs >= -1 && g->top_logprobs <= SRV_MAX_TOP_LOGPROBS);
    FUZZ_PROMISE(g->n_stops <= SRV_MAX_STOPS);
    toy_stop *stop = NULL;
    FUZZ_PROMISE(toy_stop_new((const char *const *)g->stops, g->n_stops, &stop) == TOY_OK);
    toy_stop_free(stop);
    toy_sampler *sampler = NULL;
    FUZZ_PROMISE(toy_sampler_new(&g->sampling, n_vocab, &sampler) == TOY_OK);
    toy_sampler_free(sampler);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t pick = data[0];
    size_t at = 1;
    char *request_line = take_line(data, size, &at);
    char *space = strchr(request_line, ' ');
    const char *method = request_line, *url = space ? space + 1 : "/";
    if (space) *space = 0;

    enum { MAX_HEADERS = 16 };
    char *lines[MAX_HEADERS];
    int n_lines = 0;
    gate_request gr = {.method = method, .url = url, .open_connections = 1 + (pick >> 6), .stopping = pick == 0xff};
    while (at < size && n_lines < MAX_HEADERS) {
        char *line = take_line(data, size, &at);
        if (!*line) {
            free(line);
            break;
        }
        lines[n_lines++] = line;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        *colon = 0;
        const char *value = colon + 1;
        while (*value == ' ') value++;
        if (!strcasecmp(line, "Host")) gr.host = value;
        else if (!strcasecmp(line, "Origin")) gr.origin = value;
        else if (!strcasecmp(line, "Authorization")) gr.authorization = value;
        else if (!strcasecmp(line, "Content-Type")) gr.content_type = value;
        else if (!strcasecmp(line, "Content-Length")) gr.content_length = value;
        else if (!strcasecmp(line, "Access-Control-Request-Method")) gr.preflight_method = value;
    }
    const char *aliases[] = {"toy.internal"}, *origins[] = {"http://app.example"};
    const gate_config gc = {(pick & 1) ? "sesame" : NULL, (pick & 2) ? "::1" : "127.0.0.1", aliases, 1, origins, 1,
                            1 << 16, 2};
    gate_verdict v;
    gate_check(&gc, &gr, &v);
    if (v.status >= 400) check_error(&v.err);
    if (v.status == 0) FUZZ_PROMISE(v.route != ROUTE_NONE);
    if (v.status == 0 && v.body_length != SIZE_MAX) FUZZ_PROMISE(v.body_length <= gc.max_body);

    const int which = (pick >> 2) % fuzz_n_vocabs, big = (pick & 0x40) != 0;
    const int32_t n_ctx = big ? 512 : 48;
    static size_t max_text[FUZZ_MAX_VOCABS][2]; /* a walk over the vocabulary: once each */
    if (!max_text[which][big]) max_text[which][big] = oai_max_text_bytes(fuzz_vocab[which], n_ctx);
    const toy_chat_template *tmpl = fuzz_templates[(pick >> 3) % (N_FAMILIES + 2)];
    const oai_context cc = {"toy-kjv", fuzz_vocab[which], tmpl, toy_chat_template_family(tmpl), NULL, n_ctx,
                            max_text[which][big], (uint64_t)pick};
    /* the body goes through every route's checks, whatever the gate said, to reach them more often */
    const char *body = (const char *)data + at;
    const size_t len = size - at;
    oai_request req;
    oai_error err;
    for (int chat = 0; chat < 2; chat++) {
        if (oai_parse(&cc, body, len, chat, &req, &err)) {
            check_request(&cc, &req);
            oai_request_free(&req);
        } else {
            check_error(&err);
        }
    }
    const emb_context ec = {&cc, 64, (pick & 0x20) ? TOY_POOLING_LAST : TOY_POOLING_MEAN, 2};
    emb_request er;
    if (emb_parse(&ec, body, len, &er, &err)) {
        FUZZ_PROMISE(er.n_inputs >= 1 && er.n_inputs <= EMB_MAX_INPUTS);
        for (size_t i = 0; i < er.n_inputs; i++) {
            FUZZ_PROMISE(er.n_tokens[i] >= 1 && er.n_tokens[i] <= n_ctx);
            for (int32_t k = 0; k < er.n_tokens[i]; k++)
                FUZZ_PROMISE(er.tokens[i][k] >= 0 && er.tokens[i][k] < toy_vocab_n_tokens(cc.vocab));
        }
        emb_request_free(&er);
    } else {
        check_error(&err);
    }
    char *out = oai_tokenize(&cc, body, len, &err);
    if (!out) check_error(&err);
    free(out);
    out = oai_apply_template(&cc, body, len, &err);
    if (!out) check_error(&err);
    free(out);
    out = oai_detokenize(&cc, body, len, &err);
    if (!out) check_error(&err);
    free(out);

    for (int i = 0; i < n_lines; i++) free(lines[i]);
    free(request_line);
    return 0;
}
