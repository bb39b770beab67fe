/* openai.c — see openai.h. Field names, ranges and objects follow OpenAI's API
 * reference; ignore_eos, top_k, min_p and repeat_penalty are llama-server's.
 *
 * Every check a request's body gets is here, before it is queued: a request the engine
 * is given has a prompt of 1..n_ctx tokens in the vocabulary's range, stop strings it
 * can match, and settings in range. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema.h"
#include "openai.h"
#include "piece.h"
#include "utf8.h"

/* ---------------------------------------------------------------- errors */

bool oai_fail(oai_error *err, int status, const char *param, const char *fmt, ...) {
    err->status = status;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    err->type = status >= 500 ? "server_error" : "invalid_request_error";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    /* one line, whatever a client put in the names it quotes */
    for (char *c = err->message; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    for (char *c = err->param; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return false;
}
#define fail oai_fail

static json_t *error_object(const oai_error *err) {
    return json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", oai_json_text(err->message, strlen(err->message)),
                     "type", err->type ? err->type : "server_error", "param",
                     err->param[0] ? oai_json_text(err->param, strlen(err->param)) : json_null(), "code", json_null());
}

char *oai_error_json(const oai_error *err) {
    json_t *e = error_object(err);
    char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return s;
}

char *oai_error_sse(const oai_error *err) {
    char *j = oai_error_json(err);
    if (!j) return NULL;
    const size_t n = strlen(j) + sizeof "event: error\ndata: \n\n";
    char *s = malloc(n);
    if (s) snprintf(s, n, "event: error\ndata: %s\n\n", j);
    free(j);
    return s;
}

/* ---------------------------------------------------------------- UTF-8 */

json_t *oai_json_text(const char *s, size_t len) {
    char *buf = malloc(3 * len + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t k = ty_utf8_valid_len((const unsigned char *)s + i, len - i);
        if (k == 0) {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(buf + o, s + i, k);
            o += k;
            i += k;
        }
    }
    json_t *j = json_stringn(buf, o);
    free(buf);
    return j;
}

/* ---------------------------------------------------------------- parsing */

size_t oai_max_text_bytes(const toy_vocab *v, int32_t n_ctx) {
    size_t longest = 4;
    for (int32_t t = 0; t < toy_vocab_n_tokens(v); t++) {
        const char *text = toy_vocab_token_text(v, t);
        const size_t n = text ? strlen(text) : 0;
        if (n > longest) longest = n;
    }
    size_t bytes;
    return __builtin_mul_overflow(longest, (size_t)(n_ctx > 0 ? n_ctx : 0), &bytes) ? SIZE_MAX : bytes;
}

/* The fields a request may have. Those toy does not implement are refused unless their
 * value asks for nothing (null, false, {}, [], "none"): a client relying on one must
 * learn that it has no effect. Harmless ones (user, metadata, ...) are accepted. */
enum { F_CHAT = 1, F_COMPLETION = 2, F_BOTH = 3 };
static const struct {
    const char *key;
    int where;
} known_fields[] = {
    {"model", F_BOTH}, {"messages", F_CHAT}, {"prompt", F_COMPLETION}, {"max_tokens", F_BOTH},
    {"max_completion_tokens", F_BOTH}, {"temperature", F_BOTH}, {"top_p", F_BOTH}, {"top_k", F_BOTH},
    {"min_p", F_BOTH}, {"presence_penalty", F_BOTH}, {"frequency_penalty", F_BOTH}, {"repeat_penalty", F_BOTH},
    {"seed", F_BOTH}, {"stop", F_BOTH}, {"n", F_BOTH}, {"stream", F_BOTH}, {"stream_options", F_BOTH},
    {"ignore_eos", F_BOTH}, {"logprobs", F_BOTH}, {"top_logprobs", F_CHAT},
    /* accepted and without effect here */
    {"user", F_BOTH}, {"metadata", F_BOTH}, {"store", F_BOTH}, {"service_tier", F_BOTH},
    {"prompt_cache_key", F_BOTH}, {"safety_identifier", F_BOTH},
    /* llama-server's: false reads the prompt anew, reusing no cached cells */
    {"cache_prompt", F_BOTH},
    /* checked by tool_requests.c */
    {"tools", F_CHAT}, {"tool_choice", F_CHAT}, {"parallel_tool_calls", F_CHAT},
    /* variables for the chat template (llama-server's and vLLM's), and whether a thinking
     * model's reasoning comes apart from its content (llama-server's) */
    {"chat_template_kwargs", F_CHAT}, {"reasoning_format", F_CHAT},
    /* constraints: OpenAI's response_format and logit_bias, llama-server's grammar and json_schema */
    {"response_format", F_BOTH}, {"grammar", F_BOTH}, {"json_schema", F_BOTH}, {"logit_bias", F_BOTH},
};
static const char *const unsupported_fields[] = {
    "tools", "tool_choice", "functions", "function_call", "suffix", "echo", "best_of", "audio", "modalities", "prediction", "reasoning_effort",
    "web_search_options", "n_probs",
};

static bool empty_value(const json_t *v) {
    return json_is_null(v) || json_is_false(v) || (json_is_object(v) && json_object_size(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0);
}

static bool asks_nothing(const char *key, const json_t *v) {
    if (empty_value(v)) return true;
    if (!strcmp(key, "tool_choice")) /* with no tools, "auto" is "none" */
        return json_is_string(v) && (!strcmp(json_string_value(v), "none") || !strcmp(json_string_value(v), "auto"));
    return !strcmp(key, "best_of") && json_is_integer(v) && json_integer_value(v) == 1;
}

static bool check_fields(const json_t *body, bool chat, oai_error *err) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        bool known = false;
        for (size_t i = 0; i < sizeof known_fields / sizeof *known_fields && !known; i++)
            known = !strcmp(key, known_fields[i].key) && (known_fields[i].where & (chat ? F_CHAT : F_COMPLETION));
        if (known) continue;
        bool unsupported = false;
        for (size_t i = 0; i < sizeof unsupported_fields / sizeof *unsupported_fields && !unsupported; i++)
            unsupported = !strcmp(key, unsupported_fields[i]);
        if (unsupported && asks_nothing(key, v)) continue;
        if (unsupported) return fail(err, 400, key, "%s is not supported by toy serve", key);
        return fail(err, 400, key, "unknown field '%.64s' for %s", key, chat ? "/v1/chat/completions" : "/v1/completions");
    }
    return true;
}

static bool get_number(const json_t *body, const char *key, double lo, double hi, double *out,
                       oai_error *err) {
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) return fail(err, 400, key, "%s must be a number", key);
    const double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) return fail(err, 400, key, "%s must be in %g..%g, got %g", key, lo, hi, x);
    *out = x;
    return true;
}

static bool get_int(const json_t *body, const char *key, long long lo, long long hi, long long *out,
                    oai_error *err) {
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v)) return fail(err, 400, key, "%s must be an integer", key);
    const long long x = json_integer_value(v);
    if (x < lo || x > hi) return fail(err, 400, key, "%s must be in %lld..%lld, got %lld", key, lo, hi, x);
    *out = x;
    return true;
}

static bool get_bool(const json_t *body, const char *key, bool *out, oai_error *err) {
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return fail(err, 400, key, "%s must be true or false", key);
    *out = json_is_true(v);
    return true;
}

/* a message's content: a string, or an array of {"type": "text", "text": ...} parts.
 * (Strings hold no NUL: Jansson refuses \u0000 unless asked not to.) */
static char *message_content(const json_t *content, size_t i, oai_error *err) {
    if (json_is_string(content)) {
        char *s = strdup(json_string_value(content));
        if (!s) fail(err, 500, NULL, "no memory");
        return s;
    }
    if (!json_is_array(content)) {
        fail(err, 400, "messages", "messages[%zu].content must be a string or an array of text parts", i);
        return NULL;
    }
    size_t total = 1;
    for (size_t k = 0; k < json_array_size(content); k++) {
        const json_t *part = json_array_get(content, k);
        const json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text)) {
            fail(err, 400, "messages", "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": ...}", i, k);
            return NULL;
        }
        total += json_string_length(text);
    }
    char *s = malloc(total);
    if (!s) {
        fail(err, 500, NULL, "no memory");
        return NULL;
    }
    size_t at = 0;
    for (size_t k = 0; k < json_array_size(content); k++) {
        const json_t *text = json_object_get(json_array_get(content, k), "text");
        memcpy(s + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    s[at] = 0;
    return s;
}

/* Text to at most n_ctx tokens; a longer text is refused, the tokenizer not even run when
 * the text is longer than any that fits. */
static bool tokenize_text(const oai_context *c, const char *text, size_t len, bool add_special, bool parse_special,
                          int32_t **out, int32_t *n, oai_error *err, const char *param) {
    if (len > c->max_text_bytes)
        return fail(err, 400, param,
                    "%s is %zu bytes: more than the %d tokens of a slot's context can hold (at most %zu bytes)", param,
                    len, c->n_ctx, c->max_text_bytes);
    *out = malloc((size_t)c->n_ctx * sizeof **out);
    if (!*out) return fail(err, 500, param, "no memory");
    const toy_status st = toy_tokenize(c->vocab, text, len, add_special, parse_special, *out, c->n_ctx, n);
    if (st == TOY_ERR_BUFFER)
        return fail(err, 400, param, "the prompt is %d tokens, over the context of %d", *n, c->n_ctx);
    if (st) return fail(err, 400, param, "%s: %s", param, toy_last_error());
    return true;
}

/* The message keys besides role and content: name and reasoning_content (given to the
 * template) are accepted, and so are the fields the OpenAI SDKs put on the messages they
 * hand back, whatever they hold (parsed, refusal, annotations, audio: never used). */
static bool check_message_keys(const json_t *msg, size_t i, oai_error *err) {
    static const char *const sdk_fields[] = {"parsed", "refusal", "annotations", "audio", NULL};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)msg, key, v) {
        if (!strcmp(key, "role") || !strcmp(key, "content") || !strcmp(key, "tool_calls") ||
            !strcmp(key, "tool_call_id")) /* the last two checked by tools_message_check */
            continue;
        bool sdk = false;
        for (const char *const *f = sdk_fields; *f && !sdk; f++) sdk = !strcmp(key, *f);
        if (sdk) continue;
        if (!strcmp(key, "name") || !strcmp(key, "reasoning_content")) {
            if (!json_is_string(v) && !json_is_null(v))
                return fail(err, 400, "messages", "messages[%zu].%s must be a string", i, key);
            continue;
        }
        if (!empty_value(v))
            return fail(err, 400, "messages", "messages[%zu].%.64s is not supported by toy serve", i, key);
    }
    return true;
}

static char *dump_and_free(json_t *o, oai_error *err);

/* The request's chat_template_kwargs (an object), or the server's; NULL for none. A
 * built-in family reads no variables: kwargs for one are an error, not ignored. */
static bool template_kwargs(const oai_context *c, const json_t *body, const json_t **out, oai_error *err) {
    *out = NULL;
    const json_t *kw = json_object_get(body, "chat_template_kwargs");
    if (kw && json_is_null(kw)) kw = NULL;
    if (kw && !json_is_object(kw)) return fail(err, 400, "chat_template_kwargs", "chat_template_kwargs must be an object");
    if (kw && c->chat_family && json_object_size(kw))
        return fail(err, 400, "chat_template_kwargs",
                    "chat_template_kwargs: the chat template is the built-in %s family, which reads no variables",
                    c->chat_family);
    *out = kw ? kw : c->chat_template_kwargs;
    return true;
}

/* The model's template for this request: its tool_use variant when the request has tools. */
static const toy_chat_template *chat_template_of(const oai_context *c, const json_t *body) {
    return ty_chat_template_for(c->chat_template, json_object_get(body, "tools"));
}

/* The conversation's prompt through the library's ty_chat_prompt: the messages as the
 * request gives them (developer as system), the tools unless tool_choice is "none". */
static bool render_chat(const oai_context *c, const json_t *msgs, const ty_chat_turn *m, size_t n,
                        const tools_request *t, const json_t *kwargs, bool add_generation_prompt, char **prompt,
                        oai_error *err) {
    json_t *messages = json_array();
    bool ok = messages != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *msg = json_deep_copy(json_array_get(msgs, i));
        ok = msg && !json_object_set_new(msg, "role", json_string(m[i].role)) && !json_array_append_new(messages, msg);
    }
    const ty_chat_tools tools = {t ? t->json : NULL, t ? t->parallel : true, t && t->choice == TOOL_CHOICE_NONE};
    toy_status st = ok ? ty_chat_prompt(c->chat_template, messages, &tools, kwargs, add_generation_prompt, prompt)
                       : TOY_ERR_NOMEM;
    json_decref(messages);
    if (st == TOY_ERR_NOMEM) return fail(err, 500, NULL, "no memory");
    if (st) return fail(err, 400, strncmp(toy_last_error(), "chat_template_kwargs", 20) ? "messages"
                                                                                       : "chat_template_kwargs",
                        "%s", toy_last_error());
    return true;
}

/* The messages checked one by one (m: what the renderers need of each; the texts in
 * *content, owned), then rendered. */
static bool chat_prompt_text(const oai_context *c, const json_t *body, const tools_request *t,
                             bool add_generation_prompt, char **prompt, oai_error *err) {
    *prompt = NULL;
    const json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return fail(err, 400, "messages", "messages must be a non-empty array");
    const size_t n = json_array_size(msgs);
    ty_chat_turn *m = calloc(n, sizeof *m);
    char **content = calloc(n, sizeof *content);
    const json_t *kwargs = NULL;
    bool ok = m && content;
    if (!ok) fail(err, 500, NULL, "no memory");
    size_t total = 0;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *msg = json_array_get(msgs, i);
        const json_t *role = json_object_get(msg, "role");
        if (!json_is_object(msg) || !json_is_string(role)) {
            ok = fail(err, 400, "messages", "messages[%zu] needs a string \"role\"", i);
            break;
        }
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer")) r = "system"; /* OpenAI's newer name for it */
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            ok = fail(err, 400, "messages", "messages[%zu].role '%.64s' is not system, user, assistant or tool", i, r);
            break;
        }
        if (!(ok = check_message_keys(msg, i, err))) break;
        tools_error te;
        const json_t *calls, *cj = json_object_get(msg, "content");
        const char *call_id;
        if (!tools_message_check(msg, i, r, &calls, &call_id, &te)) {
            ok = fail(err, te.status, te.param, "%s", te.message);
            break;
        }
        if (calls && (!cj || json_is_null(cj))) { /* an assistant's calls without text */
            if (!(content[i] = strdup(""))) ok = fail(err, 500, NULL, "no memory");
        } else if (!(content[i] = message_content(cj, i, err))) {
            ok = false;
        }
        if (!ok) break;
        total += strlen(content[i]);
        if (total > c->max_text_bytes) { /* the template only adds to it */
            ok = fail(err, 400, "messages",
                      "the messages are over %zu bytes: more than the %d tokens of a slot's context can hold",
                      c->max_text_bytes, c->n_ctx);
            break;
        }
        m[i] = (ty_chat_turn){r, content[i], calls, call_id ? call_id : ""};
    }
    if (ok) ok = template_kwargs(c, body, &kwargs, err);
    if (ok) ok = render_chat(c, msgs, m, n, t, kwargs, add_generation_prompt, prompt, err);
    for (size_t i = 0; content && i < n; i++) free(content[i]);
    free(content);
    free(m);
    return ok;
}

static bool parse_chat_prompt(const oai_context *c, const json_t *body, oai_request *out, oai_error *err) {
    char *prompt = NULL;
    bool ok = chat_prompt_text(c, body, &out->tools, true, &prompt, err);
    if (ok) out->thinking = ty_chat_prompt_thinking(out->tools.syntax, prompt, strlen(prompt));
    /* as toy chat: the template's special-token text becomes those tokens, and a BOS it
     * wrote is not added again */
    if (ok) {
        const char *bos = toy_chat_template_bos(c->chat_template);
        const bool add_bos = !*bos || strncmp(prompt, bos, strlen(bos)) != 0;
        ok = tokenize_text(c, prompt, strlen(prompt), add_bos, true, &out->gen.prompt, &out->gen.n_prompt, err,
                           "messages");
    }
    free(prompt);
    return ok;
}

char *oai_apply_template(const oai_context *c, const char *body, size_t len, oai_error *err) {
    memset(err, 0, sizeof *err);
    json_t *j = oai_load_object(body, len, err);
    if (!j) return NULL;
    static const char *const fields[] = {"messages", "tools", "tool_choice", "parallel_tool_calls",
                                         "chat_template_kwargs", "add_generation_prompt", "model", NULL};
    const char *key;
    json_t *v;
    bool ok = true;
    json_object_foreach(j, key, v) {
        bool known = false;
        for (const char *const *f = fields; *f && !known; f++) known = !strcmp(key, *f);
        if (ok && !known) ok = fail(err, 400, key, "unknown field '%.64s' for /apply-template", key);
    }
    bool agp = true;
    if (ok) ok = get_bool(j, "add_generation_prompt", &agp, err);
    tools_request t = {0};
    tools_error te;
    if (ok && !tools_request_parse(j, ty_chat_template_syntax(chat_template_of(c, j)), &t, &te))
        ok = fail(err, te.status, te.param, "%s", te.message);
    char *prompt = NULL;
    if (ok) ok = chat_prompt_text(c, j, &t, agp, &prompt, err);
    tools_request_free(&t);
    json_decref(j);
    if (!ok) return NULL;
    json_t *text = oai_json_text(prompt, strlen(prompt)), *o = text ? json_object() : NULL;
    if (o && json_object_set_new(o, "prompt", text)) json_decref(o), o = NULL;
    else if (!o) json_decref(text);
    free(prompt);
    return dump_and_free(o, err);
}

static bool parse_completion_prompt(const oai_context *c, const json_t *body, oai_request *out, oai_error *err) {
    const json_t *p = json_object_get(body, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) /* as toy run -p: BOS as the vocabulary says, no special-token text */
        return tokenize_text(c, json_string_value(p), json_string_length(p), true, false, &out->gen.prompt,
                             &out->gen.n_prompt, err, "prompt");
    if (!json_is_array(p) || json_array_size(p) == 0)
        return fail(err, 400, "prompt", "prompt must be a string or a non-empty array of token ids");
    const size_t n = json_array_size(p);
    if (n > (size_t)c->n_ctx)
        return fail(err, 400, "prompt", "the prompt is %zu tokens, over the context of %d", n, c->n_ctx);
    out->gen.prompt = malloc(n * sizeof *out->gen.prompt);
    if (!out->gen.prompt) return fail(err, 500, "prompt", "no memory");
    const int32_t n_vocab = toy_vocab_n_tokens(c->vocab);
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(p, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= n_vocab)
            return fail(err, 400, "prompt", "prompt[%zu] is not a token id (0..%d)", i, n_vocab - 1);
        out->gen.prompt[i] = (int32_t)json_integer_value(t);
    }
    out->gen.n_prompt = (int32_t)n;
    return true;
}

/* One stop string: 1..SRV_MAX_STOP_BYTES bytes. */
static bool add_stop(const json_t *s, const char *what, srv_params *g, oai_error *err) {
    if (!json_is_string(s) || json_string_length(s) == 0)
        return fail(err, 400, "stop", "%s must be a non-empty string", what);
    if (json_string_length(s) > SRV_MAX_STOP_BYTES)
        return fail(err, 400, "stop", "%s is %zu bytes, at most %d", what, json_string_length(s), SRV_MAX_STOP_BYTES);
    if (!(g->stops[g->n_stops] = strdup(json_string_value(s)))) return fail(err, 500, "stop", "no memory");
    g->n_stops++;
    return true;
}

static bool parse_stops(const json_t *body, srv_params *g, oai_error *err) {
    const json_t *v = json_object_get(body, "stop");
    if (!v || json_is_null(v)) return true;
    if (json_is_string(v)) return add_stop(v, "stop", g, err);
    if (!json_is_array(v)) return fail(err, 400, "stop", "stop must be a string or an array of strings");
    if (json_array_size(v) > SRV_MAX_STOPS)
        return fail(err, 400, "stop", "stop holds %zu strings, at most %d", json_array_size(v), SRV_MAX_STOPS);
    for (size_t i = 0; i < json_array_size(v); i++) {
        char what[32];
        snprintf(what, sizeof what, "stop[%zu]", i);
        if (!add_stop(json_array_get(v, i), what, g, err)) return false;
    }
    return true;
}

/* Compiles the request's grammar onto its sampling; a grammar the parser refuses is the
 * field's fault (its message names line and column). */
static bool attach_grammar(const oai_context *c, const char *gbnf, const char *param, oai_request *out,
                           oai_error *err) {
    if (out->gen.grammar) return fail(err, 400, param, "%s cannot be combined with another constraint (%s)", param,
                                      out->grammar_param);
    if (toy_grammar_new(c->vocab, gbnf, &out->gen.grammar))
        return fail(err, 400, param, "%s: %s", param, toy_last_error());
    out->gen.sampling.grammar = out->gen.grammar;
    snprintf(out->grammar_param, sizeof out->grammar_param, "%s", param);
    return true;
}

/* A JSON Schema's grammar: root matches the schema. */
static bool attach_schema(const oai_context *c, const json_t *schema, bool strict, const char *param,
                          oai_request *out, oai_error *err) {
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return fail(err, 400, param, "%s must be a JSON Schema (an object)", param);
    ty_buf gbnf = {0};
    char msg[256];
    bool ok = ty_json_schema_gbnf(schema, strict, "root", &gbnf, msg, sizeof msg);
    if (!ok) ok = fail(err, gbnf.oom ? 500 : 400, param, "%s: %s", param, msg);
    else if (gbnf.oom) ok = fail(err, 500, param, "no memory");
    if (ok) ok = attach_grammar(c, gbnf.v, param, out, err);
    free(gbnf.v);
    return ok;
}

/* response_format {"type": "text" | "json_object" | "json_schema"}, llama-server's grammar
 * (GBNF text) and json_schema (a schema): at most one. */
static bool parse_constraints(const oai_context *c, const json_t *body, oai_request *out, oai_error *err) {
    const json_t *rf = json_object_get(body, "response_format");
    if (rf && !json_is_null(rf)) {
        const json_t *type = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!json_is_string(type))
            return fail(err, 400, "response_format", "response_format must be an object with a string \"type\"");
        const char *t = json_string_value(type), *key;
        json_t *v;
        json_object_foreach((json_t *)rf, key, v) {
            const bool known = !strcmp(key, "type") || (!strcmp(t, "json_schema") && !strcmp(key, "json_schema")) ||
                               (!strcmp(t, "json_object") && !strcmp(key, "schema"));
            if (!known)
                return fail(err, 400, "response_format", "unknown field response_format.%.64s for type '%.64s'", key, t);
        }
        if (!strcmp(t, "json_object")) {
            const json_t *schema = json_object_get(rf, "schema"); /* llama-server's extension */
            if (schema && !json_is_null(schema)) {
                if (!attach_schema(c, schema, false, "response_format", out, err)) return false;
            } else {
                ty_buf gbnf = {0};
                const bool made = ty_json_schema_gbnf_any_object("root", &gbnf) && !gbnf.oom;
                const bool ok = made ? attach_grammar(c, gbnf.v, "response_format", out, err)
                                     : fail(err, 500, "response_format", "no memory");
                free(gbnf.v);
                if (!ok) return false;
            }
        } else if (!strcmp(t, "json_schema")) {
            const json_t *js = json_object_get(rf, "json_schema");
            if (!json_is_object(js))
                return fail(err, 400, "response_format", "response_format.json_schema must be an object {name, schema, strict}");
            json_object_foreach((json_t *)js, key, v) {
                if (strcmp(key, "name") && strcmp(key, "schema") && strcmp(key, "strict") && strcmp(key, "description"))
                    return fail(err, 400, "response_format", "unknown field response_format.json_schema.%.64s", key);
            }
            const json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict");
            if (!json_is_string(name) || !json_string_length(name) || json_string_length(name) > 64)
                return fail(err, 400, "response_format", "response_format.json_schema.name must be a string of 1..64 characters");
            if (strict && !json_is_null(strict) && !json_is_boolean(strict))
                return fail(err, 400, "response_format", "response_format.json_schema.strict must be true or false");
            const json_t *schema = json_object_get(js, "schema");
            if (!schema || json_is_null(schema)) schema = NULL;
            json_t *any = schema ? NULL : json_object(); /* no schema: any JSON value, as OpenAI */
            const bool ok = attach_schema(c, schema ? schema : any, json_is_true(strict), "response_format", out, err);
            json_decref(any);
            if (!ok) return false;
        } else if (strcmp(t, "text")) {
            return fail(err, 400, "response_format",
                        "response_format type '%.64s' is not supported: text, json_object or json_schema", t);
        }
    }
    const json_t *g = json_object_get(body, "grammar");
    if (g && !json_is_null(g)) {
        if (!json_is_string(g)) return fail(err, 400, "grammar", "grammar must be a string of GBNF rules");
        if (json_string_length(g) && !attach_grammar(c, json_string_value(g), "grammar", out, err)) return false;
    }
    const json_t *schema = json_object_get(body, "json_schema");
    if (schema && !json_is_null(schema) && !attach_schema(c, schema, false, "json_schema", out, err)) return false;
    return true;
}

/* logit_bias: OpenAI's {"token id": bias} or llama-server's [[token id, bias or false]];
 * a bias of -100 (or false) bans the token. */
static bool parse_logit_bias(const oai_context *c, const json_t *body, oai_request *out, oai_error *err) {
    const json_t *lb = json_object_get(body, "logit_bias");
    if (!lb || json_is_null(lb)) return true;
    const int32_t n_vocab = toy_vocab_n_tokens(c->vocab);
    size_t n = json_is_object(lb) ? json_object_size(lb) : json_is_array(lb) ? json_array_size(lb) : 0;
    if (!json_is_object(lb) && !json_is_array(lb))
        return fail(err, 400, "logit_bias", "logit_bias must be an object of token ids to biases");
    if (!n) return true;
    if (n > (size_t)n_vocab) return fail(err, 400, "logit_bias", "logit_bias has %zu entries, more than the %d tokens", n, n_vocab);
    toy_logit_bias *b = calloc(n, sizeof *b);
    if (!b) return fail(err, 500, "logit_bias", "no memory");
    out->gen.logit_bias = b;
    size_t i = 0;
    const char *key;
    json_t *v;
    if (json_is_object(lb)) {
        json_object_foreach((json_t *)lb, key, v) {
            char *end;
            const long long id = strtoll(key, &end, 10);
            if (!*key || *end || id < 0 || id >= n_vocab)
                return fail(err, 400, "logit_bias", "logit_bias: '%.64s' is not a token id (0..%d)", key, n_vocab - 1);
            if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
                return fail(err, 400, "logit_bias", "logit_bias[\"%.64s\"] must be a number in -100..100", key);
            b[i++] = (toy_logit_bias){(int32_t)id, (float)json_number_value(v)};
        }
    } else {
        size_t k;
        json_array_foreach((json_t *)lb, k, v) {
            const json_t *id = json_array_get(v, 0), *bias = json_array_get(v, 1);
            if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(id))
                return fail(err, 400, "logit_bias", "logit_bias[%zu] must be [token id, bias]", k);
            if (json_integer_value(id) < 0 || json_integer_value(id) >= n_vocab)
                return fail(err, 400, "logit_bias", "logit_bias[%zu]: token %lld is out of range (0..%d)", k,
                            (long long)json_integer_value(id), n_vocab - 1);
            if (!json_is_false(bias) && (!json_is_number(bias) || !(json_number_value(bias) >= -100 && json_number_value(bias) <= 100)))
                return fail(err, 400, "logit_bias", "logit_bias[%zu]: the bias must be a number in -100..100 or false", k);
            b[i++] = (toy_logit_bias){(int32_t)json_integer_value(id),
                                      json_is_false(bias) ? -100.0f : (float)json_number_value(bias)};
        }
    }
    out->gen.sampling.logit_bias = b;
    out->gen.sampling.n_logit_bias = i;
    return true;
}

/* tools, tool_choice, parallel_tool_calls; the grammar that forces a call. */
static bool parse_tools(const oai_context *c, const json_t *body, oai_request *out, oai_error *err) {
    tools_error te;
    if (!tools_request_parse(body, ty_chat_template_syntax(chat_template_of(c, body)), &out->tools, &te))
        return fail(err, te.status, te.param, "%s", te.message);
    if (tools_parse_calls(&out->tools) && out->stream && out->logprobs)
        return fail(err, 400, "logprobs", "logprobs cannot be streamed with tools (the text of a call is held back)");
    const json_t *rf = json_object_get(body, "reasoning_format");
    out->reasoning = true;
    if (rf && !json_is_null(rf)) { /* llama-server's: none keeps the thinking in the content */
        const char *v = json_string_value(rf);
        if (!v || (strcmp(v, "none") && strcmp(v, "auto") && strcmp(v, "deepseek")))
            return fail(err, 400, "reasoning_format", "reasoning_format must be \"none\", \"auto\" or \"deepseek\"");
        out->reasoning = strcmp(v, "none") != 0;
    }
    const tools_request *t = &out->tools;
    out->parse_output =
        tools_parse_calls(t) || (out->reasoning && t->syntax.reasoning != TY_REASONING_NONE);
    if (out->parse_output && tools_parse_calls(t)) {
        if (!(out->fn_names = calloc(t->n_functions, sizeof *out->fn_names))) return fail(err, 500, NULL, "no memory");
        for (size_t k = 0; k < t->n_functions; k++) out->fn_names[k] = t->functions[k].name;
    }
    return true;
}

/* A forced call's grammar, once the prompt says whether the answer starts inside the
 * model's thinking. */
static bool attach_tools_grammar(const oai_context *c, oai_request *out, oai_error *err) {
    tools_error te;
    char *gbnf = NULL;
    if (!tools_grammar(&out->tools, out->thinking, &gbnf, &te))
        return fail(err, te.status, te.param, "%s", te.message);
    bool ok = true;
    if (gbnf) ok = attach_grammar(c, gbnf, "tool_choice", out, err);
    free(gbnf);
    return ok;
}

json_t *oai_load_object(const char *body, size_t len, oai_error *err) {
    json_error_t jerr;
    json_t *j = json_loadb(body, len, 0, &jerr);
    if (!j) fail(err, 400, NULL, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    else if (!json_is_object(j)) fail(err, 400, NULL, "the request body must be a JSON object");
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

bool oai_check_model(const oai_context *c, const json_t *j, oai_error *err) {
    const json_t *model = json_object_get(j, "model");
    if (!model || json_is_null(model)) return true;
    if (!json_is_string(model)) return fail(err, 400, "model", "model must be a string");
    if (strcmp(json_string_value(model), c->model_id))
        return fail(err, 400, "model", "the model '%.200s' does not exist: this server has '%s'",
                    json_string_value(model), c->model_id);
    return true;
}

bool oai_parse(const oai_context *c, const char *body, size_t len, bool chat, oai_request *out, oai_error *err) {
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->chat = chat;
    out->gen.sampling = toy_sampler_default_params();
    out->gen.sampling.seed = c->seed;
    out->gen.max_tokens = -1;
    out->gen.n_choices = 1;
    out->gen.top_logprobs = -1;
    json_t *j = oai_load_object(body, len, err);
    if (!j) return false;
    bool ok = check_fields(j, chat, err) && oai_check_model(c, j, err);
    double x;
    long long k;
    toy_sampler_params *sp = &out->gen.sampling;
#define NUM(key, lo, hi, dst) \
    x = (double)(dst);           \
    if (ok && (ok = get_number(j, key, lo, hi, &x, err))) dst = (float)x
    NUM("temperature", 0, 2, sp->temperature);
    NUM("top_p", 0, 1, sp->top_p);
    NUM("min_p", 0, 1, sp->min_p);
    NUM("presence_penalty", -2, 2, sp->presence_penalty);
    NUM("frequency_penalty", -2, 2, sp->frequency_penalty);
    NUM("repeat_penalty", 0.0001, 100, sp->repeat_penalty);
#undef NUM
    k = sp->top_k;
    if (ok && (ok = get_int(j, "top_k", 0, INT32_MAX, &k, err))) sp->top_k = (int32_t)k;
    k = (long long)sp->seed;
    if (ok && (ok = get_int(j, "seed", 0, INT64_MAX, &k, err))) sp->seed = (uint64_t)k;
    /* max_completion_tokens, OpenAI's newer name, wins when both are given */
    const char *max_key = json_object_get(j, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    k = -1;
    if (ok) ok = get_int(j, "max_tokens", 0, INT32_MAX, &k, err);
    if (ok && (ok = get_int(j, "max_completion_tokens", 0, INT32_MAX, &k, err))) out->gen.max_tokens = (int32_t)k;
    k = 1;
    if (ok && (ok = get_int(j, "n", 1, 16, &k, err))) out->gen.n_choices = (int)k;
    if (ok) ok = get_bool(j, "stream", &out->stream, err);
    if (ok) ok = get_bool(j, "ignore_eos", &out->gen.ignore_eos, err);
    bool cache_prompt = true;
    if (ok) ok = get_bool(j, "cache_prompt", &cache_prompt, err);
    out->gen.no_cache_prompt = !cache_prompt;
    const json_t *so = ok ? json_object_get(j, "stream_options") : NULL;
    if (ok && so && !json_is_null(so)) {
        const char *key;
        json_t *v;
        if (!json_is_object(so)) ok = fail(err, 400, "stream_options", "stream_options must be an object");
        json_object_foreach((json_t *)so, key, v) {
            if (ok && strcmp(key, "include_usage"))
                ok = fail(err, 400, "stream_options", "stream_options.%.64s is not supported by toy serve", key);
        }
        if (ok) ok = get_bool(so, "include_usage", &out->include_usage, err);
    }
    /* log-probabilities: chat takes logprobs (bool) and top_logprobs (0..20); the legacy
     * completions take logprobs as the number of alternatives */
    if (ok && chat) {
        ok = get_bool(j, "logprobs", &out->logprobs, err);
        k = 0;
        if (ok && (ok = get_int(j, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &k, err)) && json_object_get(j, "top_logprobs") &&
            !json_is_null(json_object_get(j, "top_logprobs")) && !out->logprobs)
            ok = fail(err, 400, "top_logprobs", "top_logprobs needs logprobs: true");
        if (ok && out->logprobs) out->gen.top_logprobs = (int)k;
    } else if (ok) {
        k = -1;
        if ((ok = get_int(j, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &k, err)) && k >= 0) {
            out->logprobs = true;
            out->gen.top_logprobs = (int)k;
        }
    }
    if (ok) ok = parse_stops(j, &out->gen, err);
    if (ok) ok = parse_logit_bias(c, j, out, err);
    if (ok) ok = parse_constraints(c, j, out, err);
    if (ok && chat) ok = parse_tools(c, j, out, err);
    if (ok) ok = chat ? parse_chat_prompt(c, j, out, err) : parse_completion_prompt(c, j, out, err);
    if (ok && chat) ok = attach_tools_grammar(c, out, err);
    if (ok && out->gen.n_prompt == 0) ok = fail(err, 400, chat ? "messages" : "prompt", "the prompt has no tokens");
    if (ok) {
        const int64_t need = (int64_t)out->gen.n_prompt + (out->gen.max_tokens > 0 ? out->gen.max_tokens : 0);
        if (need > c->n_ctx)
            ok = fail(err, 400, out->gen.max_tokens > 0 ? max_key : (chat ? "messages" : "prompt"),
                      "the prompt is %d tokens and max_tokens %d: %lld in all, %lld over the context of %d",
                      out->gen.n_prompt, out->gen.max_tokens > 0 ? out->gen.max_tokens : 0, (long long)need,
                      (long long)(need - c->n_ctx), c->n_ctx);
    }
    json_decref(j);
    if (!ok) oai_request_free(out);
    return ok;
}

void oai_request_answer_free(oai_request *r) {
    tools_request_free(&r->tools);
    free(r->fn_names);
    r->fn_names = NULL;
}

void oai_request_free(oai_request *r) {
    oai_request_answer_free(r);
    free(r->gen.prompt);
    for (size_t i = 0; i < r->gen.n_stops; i++) free(r->gen.stops[i]);
    toy_grammar_free(r->gen.grammar);
    free(r->gen.logit_bias);
    memset(&r->gen, 0, sizeof r->gen);
}

/* ---------------------------------------------------------------- /tokenize, /detokenize */


static char *dump_and_free(json_t *o, oai_error *err) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) fail(err, 500, NULL, "no memory");
    return s;
}

char *oai_tokenize(const oai_context *c, const char *body, size_t len, oai_error *err) {
    memset(err, 0, sizeof *err);
    json_t *j = oai_load_object(body, len, err);
    if (!j) return NULL;
    const json_t *content = json_object_get(j, "content");
    bool add = true, parse = false, ok = true;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        if (ok && strcmp(key, "content") && strcmp(key, "add_special") && strcmp(key, "parse_special") &&
            strcmp(key, "with_pieces"))
            ok = fail(err, 400, key, "unknown field '%.64s' for /tokenize", key);
    }
    if (ok && !json_is_string(content)) ok = fail(err, 400, "content", "content must be a string");
    bool pieces = false;
    if (ok) ok = get_bool(j, "add_special", &add, err) && get_bool(j, "parse_special", &parse, err) &&
                 get_bool(j, "with_pieces", &pieces, err);
    if (ok && pieces) ok = fail(err, 400, "with_pieces", "with_pieces is not supported by toy serve");
    const size_t n_bytes = ok ? json_string_length(content) : 0;
    if (ok && n_bytes > c->max_text_bytes)
        ok = fail(err, 400, "content", "content is %zu bytes, over the limit of %zu (the longest text a slot's %d tokens can hold)",
                  n_bytes, c->max_text_bytes, c->n_ctx);
    int32_t *t = NULL, n = 0;
    if (ok && toy_tokenize_alloc(c->vocab, json_string_value(content), n_bytes, add, parse, &t, &n))
        ok = fail(err, 400, "content", "content: %s", toy_last_error());
    char *out = NULL;
    if (ok) {
        json_t *arr = json_array();
        for (int32_t i = 0; arr && i < n; i++) json_array_append_new(arr, json_integer(t[i]));
        out = dump_and_free(json_pack("{s:o}", "tokens", arr), err);
    }
    toy_free(t);
    json_decref(j);
    return out;
}

char *oai_detokenize(const oai_context *c, const char *body, size_t len, oai_error *err) {
    memset(err, 0, sizeof *err);
    json_t *j = oai_load_object(body, len, err);
    if (!j) return NULL;
    const json_t *tokens = json_object_get(j, "tokens");
    const char *key;
    json_t *v;
    bool ok = true;
    json_object_foreach(j, key, v) {
        if (ok && strcmp(key, "tokens")) ok = fail(err, 400, key, "unknown field '%.64s' for /detokenize", key);
    }
    if (ok && !json_is_array(tokens)) ok = fail(err, 400, "tokens", "tokens must be an array of token ids");
    const size_t n = ok ? json_array_size(tokens) : 0;
    if (ok && n > INT32_MAX) ok = fail(err, 400, "tokens", "too many tokens");
    int32_t *t = ok ? malloc((n ? n : 1) * sizeof *t) : NULL;
    if (ok && !t) ok = fail(err, 500, NULL, "no memory");
    const int32_t n_vocab = toy_vocab_n_tokens(c->vocab);
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *x = json_array_get(tokens, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= n_vocab)
            ok = fail(err, 400, "tokens", "tokens[%zu] is not a token id (0..%d)", i, n_vocab - 1);
        else t[i] = (int32_t)json_integer_value(x);
    }
    char *text = NULL, *out = NULL;
    size_t text_len = 0;
    if (ok && toy_detokenize(c->vocab, t, (int32_t)n, false, &text, &text_len))
        ok = fail(err, 500, NULL, "cannot detokenize: %s", toy_last_error());
    if (ok) out = dump_and_free(json_pack("{s:o}", "content", oai_json_text(text, text_len)), err);
    toy_free(text);
    free(t);
    json_decref(j);
    return out;
}

/* ---------------------------------------------------------------- responses */

static json_t *token_bytes(const char *s, size_t len) {
    json_t *a = json_array();
    for (size_t i = 0; i < len; i++) json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

/* A token's text as JSON, and its bytes as an array if `bytes` is not NULL; NULL when
 * there is no memory (the response that would hold it then fails as a whole). */
static json_t *token_text(const toy_vocab *v, int32_t tok, json_t **bytes) {
    srv_piece p;
    if (!srv_piece_of(v, tok, &p)) return NULL;
    json_t *t = oai_json_text(p.text, p.len);
    if (bytes) *bytes = token_bytes(p.text, p.len);
    srv_piece_free(&p);
    return t;
}

/* The completions API's alternatives: {"token text": logprob, ...} */
static json_t *top_object(const toy_vocab *v, const srv_event *ev) {
    json_t *top = json_object();
    for (int i = 0; top && i < ev->n_top; i++) {
        json_t *key = token_text(v, ev->top_token[i], NULL);
        if (!key || json_object_set_new(top, json_string_value(key), json_real(ev->top_logprob[i]))) {
            json_decref(key);
            json_decref(top);
            return NULL;
        }
        json_decref(key);
    }
    return top;
}

json_t *oai_token_logprob(const toy_vocab *v, const srv_event *ev) {
    json_t *top = json_array();
    for (int i = 0; top && i < ev->n_top; i++) {
        json_t *bytes = NULL, *text = token_text(v, ev->top_token[i], &bytes);
        if (json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", text, "logprob", (double)ev->top_logprob[i],
                                                 "bytes", bytes))) {
            json_decref(top);
            top = NULL;
        }
    }
    json_t *bytes = NULL, *text = token_text(v, ev->token, &bytes);
    return json_pack("{s:o,s:f,s:o,s:o}", "token", text, "logprob", (double)ev->logprob, "bytes", bytes,
                     "top_logprobs", top);
}

static bool text_add(oai_choice *c, const char *s, size_t n) {
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        while (cap < c->len + n + 1) cap *= 2;
        char *t = realloc(c->text, cap);
        if (!t) return false;
        c->text = t;
        c->cap = cap;
    }
    memcpy(c->text + c->len, s, n);
    c->len += n;
    c->text[c->len] = 0;
    return true;
}

bool oai_choice_add(const toy_vocab *v, bool chat, bool logprobs, oai_choice *c, const srv_event *ev) {
    const size_t before = c->len;
    if (!text_add(c, ev->text ? ev->text : "", ev->len)) return false;
    if (ev->kind == SRV_EV_DONE) {
        c->finish_reason = ev->finish_reason;
        return true;
    }
    if (!logprobs) return true;
    if (chat) {
        if (!c->logprobs) c->logprobs = json_array();
        return c->logprobs && !json_array_append_new(c->logprobs, oai_token_logprob(v, ev));
    }
    if (!c->lp_tokens) {
        c->lp_tokens = json_array();
        c->lp_token_logprobs = json_array();
        c->lp_top = json_array();
        c->lp_offsets = json_array();
    }
    return c->lp_tokens && c->lp_token_logprobs && c->lp_top && c->lp_offsets &&
           !json_array_append_new(c->lp_tokens, token_text(v, ev->token, NULL)) &&
           !json_array_append_new(c->lp_token_logprobs, json_real(ev->logprob)) &&
           !json_array_append_new(c->lp_top, top_object(v, ev)) &&
           !json_array_append_new(c->lp_offsets, json_integer((json_int_t)before));
}

void oai_choice_free(oai_choice *c) {
    free(c->text);
    json_decref(c->logprobs);
    json_decref(c->lp_tokens);
    json_decref(c->lp_token_logprobs);
    json_decref(c->lp_top);
    json_decref(c->lp_offsets);
    json_decref(c->tool_calls);
    free(c->reasoning);
    memset(c, 0, sizeof *c);
}

static json_t *usage_json(int32_t prompt, int32_t completion, int32_t cached) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", prompt, "completion_tokens", completion,
                     "total_tokens", prompt + completion, "prompt_tokens_details", "cached_tokens", cached);
}

char *oai_response_json(const oai_context *c, bool chat, const char *id, long created, oai_choice *choices, int n,
                        int32_t prompt_tokens, int32_t completion_tokens, int32_t cached_tokens) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        oai_choice *ch = &choices[i];
        json_t *text = oai_json_text(ch->text ? ch->text : "", ch->len);
        json_t *o;
        if (chat) {
            json_t *lp = ch->logprobs ? json_pack("{s:O}", "content", ch->logprobs) : json_null();
            if (ch->tool_calls && ch->len == 0) { /* calls only: content null */
                json_decref(text);
                text = json_null();
            }
            o = json_pack("{s:i,s:{s:s,s:o},s:o,s:s}", "index", i, "message", "role", "assistant", "content", text,
                          "logprobs", lp, "finish_reason", ch->finish_reason ? ch->finish_reason : "stop");
            if (o && ch->tool_calls) json_object_set(json_object_get(o, "message"), "tool_calls", ch->tool_calls);
            if (o && ch->reasoning)
                json_object_set_new(json_object_get(o, "message"), "reasoning_content",
                                    oai_json_text(ch->reasoning, strlen(ch->reasoning)));
        } else {
            json_t *lp = ch->lp_tokens ? json_pack("{s:O,s:O,s:O,s:O}", "tokens", ch->lp_tokens, "token_logprobs",
                                                   ch->lp_token_logprobs, "top_logprobs", ch->lp_top,
                                                   "text_offset", ch->lp_offsets)
                                       : json_null();
            o = json_pack("{s:i,s:o,s:o,s:s}", "index", i, "text", text, "logprobs", lp, "finish_reason",
                          ch->finish_reason ? ch->finish_reason : "stop");
        }
        json_array_append_new(arr, o);
    }
    json_t *r = json_pack("{s:s,s:s,s:i,s:s,s:o,s:o}", "id", id, "object", chat ? "chat.completion" : "text_completion",
                          "created", (json_int_t)created, "model", c->model_id, "choices", arr, "usage",
                          usage_json(prompt_tokens, completion_tokens, cached_tokens));
    char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    return s;
}

static char *sse(json_t *obj) {
    char *j = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!j) return NULL;
    const size_t n = strlen(j);
    char *s = malloc(n + 9);
    if (s) snprintf(s, n + 9, "data: %s\n\n", j);
    free(j);
    return s;
}

char *oai_chunk_sse(const oai_context *c, bool chat, bool logprobs, const char *id, long created,
                    const srv_event *ev, bool first) {
    json_t *text = oai_json_text(ev->text ? ev->text : "", ev->len);
    if (!text) return NULL;
    json_t *fin = ev->kind == SRV_EV_DONE ? json_string(ev->finish_reason) : json_null();
    json_t *lp = json_null();
    if (logprobs && ev->kind == SRV_EV_TOKEN) {
        json_decref(lp);
        if (chat) {
            lp = json_pack("{s:[o]}", "content", oai_token_logprob(c->vocab, ev));
        } else {
            lp = json_pack("{s:[o],s:[f],s:[o]}", "tokens", token_text(c->vocab, ev->token, NULL), "token_logprobs",
                           (double)ev->logprob, "top_logprobs", top_object(c->vocab, ev));
        }
    }
    json_t *choice;
    if (chat) {
        json_t *delta = json_object();
        if (first) json_object_set_new(delta, "role", json_string("assistant"));
        if (ev->len || ev->kind == SRV_EV_TOKEN) json_object_set(delta, "content", text);
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", ev->choice, "delta", delta, "logprobs", lp,
                           "finish_reason", fin);
    } else {
        choice = json_pack("{s:i,s:O,s:o,s:o}", "index", ev->choice, "text", text, "logprobs", lp,
                           "finish_reason", fin);
    }
    json_decref(text);
    return sse(json_pack("{s:s,s:s,s:i,s:s,s:[o]}", "id", id, "object",
                         chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)created,
                         "model", c->model_id, "choices", choice));
}

static bool parse_answer(const oai_request *req, const char *text, size_t len, bool partial, ty_chat_output *o) {
    const tools_request *t = &req->tools;
    return ty_chat_output_parse(t->syntax, req->thinking == TY_THINK_OPEN, req->reasoning, req->fn_names,
                                tools_parse_calls(t) ? t->n_functions : 0, t->parallel, text, len, partial, o);
}

bool oai_choice_parse(const oai_request *req, oai_choice *c) {
    if (!req->parse_output) return true;
    ty_chat_output o;
    if (!parse_answer(req, c->text ? c->text : "", c->len, false, &o)) return false;
    json_t *calls = o.n_calls ? ty_tool_calls_json(&o, 0, false, req->tools.syntax.tools) : NULL;
    const bool ok = !o.n_calls || calls;
    free(c->text);
    c->text = o.content;
    c->len = o.content ? strlen(o.content) : 0;
    c->cap = o.content ? c->len + 1 : 0;
    o.content = NULL;
    c->reasoning = o.reasoning;
    o.reasoning = NULL;
    if (calls) {
        c->tool_calls = calls;
        c->finish_reason = "tool_calls";
    }
    ty_chat_output_free(&o);
    return ok;
}

/* A chunk whose delta is the calls (taken over). */
static char *tool_calls_chunk_sse(const oai_context *c, const char *id, long created, int choice, json_t *calls) {
    return sse(json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:{s:o},s:n,s:n}]}", "id", id, "object", "chat.completion.chunk",
                         "created", (json_int_t)created, "model", c->model_id, "choices", "index", choice, "delta",
                         "tool_calls", calls, "logprobs", "finish_reason"));
}

/* A chunk whose delta is reasoning text. */
static char *reasoning_chunk_sse(const oai_context *c, const char *id, long created, int choice, const char *text,
                                 size_t len, bool first) {
    json_t *delta = json_object(), *t = oai_json_text(text, len);
    if (!delta || !t) {
        json_decref(delta);
        json_decref(t);
        return NULL;
    }
    if (first) json_object_set_new(delta, "role", json_string("assistant"));
    json_object_set_new(delta, "reasoning_content", t);
    return sse(json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:n,s:n}]}", "id", id, "object", "chat.completion.chunk",
                         "created", (json_int_t)created, "model", c->model_id, "choices", "index", choice, "delta",
                         delta, "logprobs", "finish_reason"));
}

char *oai_parsed_chunks_sse(const oai_context *c, const oai_request *req, oai_parsed_stream *ps, const char *id,
                            long created, const srv_event *ev, bool first) {
    if (ev->len && ps->len + ev->len + 1 > ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 256;
        while (cap < ps->len + ev->len + 1) cap *= 2;
        char *v = realloc(ps->text, cap);
        if (!v) return NULL;
        ps->text = v;
        ps->cap = cap;
    }
    if (ev->len) {
        memcpy(ps->text + ps->len, ev->text, ev->len);
        ps->len += ev->len;
        ps->text[ps->len] = 0;
    }
    const bool done = ev->kind != SRV_EV_TOKEN;
    ty_chat_output o;
    if (!parse_answer(req, ps->text ? ps->text : "", ps->len, !done, &o)) return NULL;
    /* what this parse adds: its texts and calls grow those of the last (tool_calls.h) */
    char *part[4] = {NULL, NULL, NULL, NULL};
    bool ok = true;
    const size_t r_len = o.reasoning ? strlen(o.reasoning) : 0, c_len = o.content ? strlen(o.content) : 0;
    if (r_len > ps->sent_reasoning) {
        ok = (part[0] = reasoning_chunk_sse(c, id, created, ev->choice, o.reasoning + ps->sent_reasoning,
                                            r_len - ps->sent_reasoning, first)) != NULL;
        ps->sent_reasoning = r_len;
        first = false;
    }
    if (ok && (c_len > ps->sent_content || (first && !done))) {
        srv_event e = *ev;
        e.kind = SRV_EV_TOKEN;
        e.text = o.content ? o.content + ps->sent_content : (char *)"";
        e.len = c_len > ps->sent_content ? c_len - ps->sent_content : 0;
        ok = (part[1] = oai_chunk_sse(c, true, req->logprobs, id, created, &e, first)) != NULL;
        ps->sent_content = c_len > ps->sent_content ? c_len : ps->sent_content;
        first = false;
    }
    if (ok && o.n_calls > ps->sent_calls) {
        json_t *calls = ty_tool_calls_json(&o, ps->sent_calls, true, req->tools.syntax.tools);
        ok = calls && (part[2] = tool_calls_chunk_sse(c, id, created, ev->choice, calls));
        ps->sent_calls = o.n_calls;
    }
    if (ok && done) {
        srv_event e = *ev;
        e.text = NULL;
        e.len = 0;
        if (ps->sent_calls) e.finish_reason = "tool_calls";
        ok = (part[3] = oai_chunk_sse(c, true, false, id, created, &e, first)) != NULL;
    }
    ty_chat_output_free(&o);
    size_t total = 1;
    for (int i = 0; i < 4; i++) total += part[i] ? strlen(part[i]) : 0;
    char *out = ok ? malloc(total) : NULL;
    if (out) {
        out[0] = 0;
        for (int i = 0; i < 4; i++)
            if (part[i]) strcat(out, part[i]);
    }
    for (int i = 0; i < 4; i++) free(part[i]);
    return out;
}

char *oai_usage_chunk_sse(const oai_context *c, bool chat, const char *id, long created, int32_t prompt_tokens,
                          int32_t completion_tokens, int32_t cached_tokens) {
    return sse(json_pack("{s:s,s:s,s:i,s:s,s:[],s:o}", "id", id, "object",
                         chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)created,
                         "model", c->model_id, "choices", "usage",
                         usage_json(prompt_tokens, completion_tokens, cached_tokens)));
}
