/* openai.c — see openai.h. Field names, ranges and objects follow OpenAI's API
 * reference; ignore_eos, top_k, min_p and repeat_penalty are llama-server's. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openai.h"

/* ---------------------------------------------------------------- errors */

static bool fail(oai_error *err, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail(oai_error *err, int status, const char *param, const char *fmt, ...) {
    err->status = status;
    err->param = param;
    err->type = "invalid_request_error";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

char *oai_error_json(const oai_error *err) {
    json_t *e = json_pack("{s:{s:s,s:s,s:o,s:o}}", "error", "message", err->message, "type", err->type,
                          "param", err->param ? json_string(err->param) : json_null(), "code",
                          json_null());
    char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return s;
}

/* ---------------------------------------------------------------- UTF-8 */

/* the length of the valid UTF-8 sequence at s (0 if invalid) */
static size_t utf8_valid(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if ((s[0] & 0xE0) == 0xC0) len = 2, cp = s[0] & 0x1F;
    else if ((s[0] & 0xF0) == 0xE0) len = 3, cp = s[0] & 0x0F;
    else if ((s[0] & 0xF8) == 0xF0) len = 4, cp = s[0] & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

json_t *oai_json_text(const char *s, size_t len) {
    char *buf = malloc(3 * len + 1);
    if (!buf) return json_string("");
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_valid((const unsigned char *)s + i, len - i);
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
    return j ? j : json_string("");
}

/* ---------------------------------------------------------------- parsing */

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

/* a message's content: a string, or an array of {"type": "text", "text": ...} parts */
static char *message_content(const json_t *content, size_t i, oai_error *err) {
    if (json_is_string(content)) return strdup(json_string_value(content));
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
    if (!s) return NULL;
    s[0] = 0;
    for (size_t k = 0; k < json_array_size(content); k++)
        strcat(s, json_string_value(json_object_get(json_array_get(content, k), "text")));
    return s;
}

static bool tokenize_text(const oai_context *c, const char *text, bool parse_special, int32_t **out,
                          int32_t *n, oai_error *err, const char *param) {
    const size_t len = strlen(text);
    if (len > (size_t)INT32_MAX - 8) return fail(err, 400, param, "%s is too long", param);
    int32_t cap = (int32_t)len + 8;
    *out = malloc((size_t)cap * sizeof **out);
    if (!*out) return fail(err, 500, param, "no memory");
    if (toy_tokenize(c->vocab, text, len, true, parse_special, *out, cap, n))
        return fail(err, 400, param, "%s: %s", param, toy_last_error());
    return true;
}

static bool parse_chat_prompt(const oai_context *c, const json_t *body, oai_request *out, oai_error *err) {
    const json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return fail(err, 400, "messages", "messages must be a non-empty array");
    const size_t n = json_array_size(msgs);
    toy_chat_message *m = calloc(n, sizeof *m);
    char **content = calloc(n, sizeof *content);
    bool ok = m && content;
    if (!ok) fail(err, 500, NULL, "no memory");
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *msg = json_array_get(msgs, i);
        const json_t *role = json_object_get(msg, "role");
        if (!json_is_object(msg) || !json_is_string(role)) {
            ok = fail(err, 400, "messages", "messages[%zu] needs a string \"role\"", i);
            break;
        }
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer")) r = "system"; /* OpenAI's newer name for it */
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            ok = fail(err, 400, "messages", "messages[%zu].role '%s' is not system, user or assistant", i, r);
            break;
        }
        if (!(content[i] = message_content(json_object_get(msg, "content"), i, err))) {
            ok = false;
            if (!err->status) fail(err, 500, NULL, "no memory");
            break;
        }
        m[i] = (toy_chat_message){r, content[i]};
    }
    char *prompt = NULL;
    if (ok && toy_chat_apply(c->chat_family, m, n, true, &prompt))
        ok = fail(err, 400, "messages", "messages: %s", toy_last_error());
    /* as toy chat: the template's special-token text becomes those tokens */
    if (ok) ok = tokenize_text(c, prompt, true, &out->gen.prompt, &out->gen.n_prompt, err, "messages");
    free(prompt);
    for (size_t i = 0; content && i < n; i++) free(content[i]);
    free(content);
    free(m);
    return ok;
}

static bool parse_completion_prompt(const oai_context *c, const json_t *body, oai_request *out, oai_error *err) {
    const json_t *p = json_object_get(body, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) /* as toy run -p: BOS as the vocabulary says, no special-token text */
        return tokenize_text(c, json_string_value(p), false, &out->gen.prompt, &out->gen.n_prompt, err, "prompt");
    if (!json_is_array(p) || json_array_size(p) == 0)
        return fail(err, 400, "prompt", "prompt must be a string or a non-empty array of token ids");
    const size_t n = json_array_size(p);
    if (n > (size_t)INT32_MAX) return fail(err, 400, "prompt", "prompt is too long");
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

static bool parse_stops(const json_t *body, srv_params *g, oai_error *err) {
    const json_t *v = json_object_get(body, "stop");
    if (!v || json_is_null(v)) return true;
    if (json_is_string(v)) {
        g->stops[g->n_stops++] = strdup(json_string_value(v));
        return true;
    }
    if (!json_is_array(v)) return fail(err, 400, "stop", "stop must be a string or an array of strings");
    if (json_array_size(v) > SRV_MAX_STOPS)
        return fail(err, 400, "stop", "stop holds %zu strings, at most %d", json_array_size(v), SRV_MAX_STOPS);
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *s = json_array_get(v, i);
        if (!json_is_string(s) || json_string_length(s) == 0)
            return fail(err, 400, "stop", "stop[%zu] must be a non-empty string", i);
        g->stops[g->n_stops++] = strdup(json_string_value(s));
    }
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
    json_error_t jerr;
    json_t *j = json_loadb(body, len, 0, &jerr);
    if (!j) return fail(err, 400, NULL, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    bool ok = json_is_object(j) || fail(err, 400, NULL, "the request body must be a JSON object");
    const json_t *model = ok ? json_object_get(j, "model") : NULL;
    if (ok && model && !json_is_null(model)) {
        if (!json_is_string(model)) ok = fail(err, 400, "model", "model must be a string");
        else if (strcmp(json_string_value(model), c->model_id))
            ok = fail(err, 400, "model", "the model '%s' does not exist: this server has '%s'",
                      json_string_value(model), c->model_id);
    }
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
    if (ok && json_object_get(j, "seed") && (ok = get_int(j, "seed", 0, INT64_MAX, &k, err))) sp->seed = (uint64_t)k;
    const char *max_key = json_object_get(j, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    k = -1;
    if (ok && (ok = get_int(j, max_key, 0, INT32_MAX, &k, err))) out->gen.max_tokens = (int32_t)k;
    k = 1;
    if (ok && (ok = get_int(j, "n", 1, 16, &k, err))) out->gen.n_choices = (int)k;
    if (ok) ok = get_bool(j, "stream", &out->stream, err);
    if (ok) ok = get_bool(j, "ignore_eos", &out->gen.ignore_eos, err);
    const json_t *so = ok ? json_object_get(j, "stream_options") : NULL;
    if (ok && so && !json_is_null(so)) {
        if (!json_is_object(so)) ok = fail(err, 400, "stream_options", "stream_options must be an object");
        else ok = get_bool(so, "include_usage", &out->include_usage, err);
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
    if (ok) ok = chat ? parse_chat_prompt(c, j, out, err) : parse_completion_prompt(c, j, out, err);
    if (ok && out->gen.n_prompt == 0) ok = fail(err, 400, chat ? "messages" : "prompt", "the prompt has no tokens");
    if (ok) {
        const int64_t need = (int64_t)out->gen.n_prompt + (out->gen.max_tokens > 0 ? out->gen.max_tokens : 0);
        if (need > c->n_ctx)
            ok = fail(err, 400, out->gen.max_tokens > 0 ? "max_tokens" : (chat ? "messages" : "prompt"),
                      "the prompt is %d tokens and max_tokens %d: %lld in all, %lld over the context of %d",
                      out->gen.n_prompt, out->gen.max_tokens > 0 ? out->gen.max_tokens : 0, (long long)need,
                      (long long)(need - c->n_ctx), c->n_ctx);
    }
    json_decref(j);
    if (!ok) oai_request_free(out);
    return ok;
}

void oai_request_free(oai_request *r) {
    free(r->gen.prompt);
    for (size_t i = 0; i < r->gen.n_stops; i++) free(r->gen.stops[i]);
    memset(&r->gen, 0, sizeof r->gen);
}

/* ---------------------------------------------------------------- responses */

static json_t *token_bytes(const char *s, size_t len) {
    json_t *a = json_array();
    for (size_t i = 0; i < len; i++) json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

static size_t piece(const toy_vocab *v, int32_t tok, char *buf, size_t cap) {
    size_t len = 0;
    toy_token_to_piece(v, tok, false, buf, cap, &len);
    return len < cap ? len : cap;
}

json_t *oai_token_logprob(const toy_vocab *v, const srv_event *ev) {
    char buf[256];
    size_t len = piece(v, ev->token, buf, sizeof buf);
    json_t *top = json_array();
    for (int i = 0; i < ev->n_top; i++) {
        char b2[256];
        size_t l2 = piece(v, ev->top_token[i], b2, sizeof b2);
        json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", oai_json_text(b2, l2), "logprob",
                                             (double)ev->top_logprob[i], "bytes", token_bytes(b2, l2)));
    }
    return json_pack("{s:o,s:f,s:o,s:o}", "token", oai_json_text(buf, len), "logprob", (double)ev->logprob,
                     "bytes", token_bytes(buf, len), "top_logprobs", top);
}

static void text_add(oai_choice *c, const char *s, size_t n) {
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        while (cap < c->len + n + 1) cap *= 2;
        char *t = realloc(c->text, cap);
        if (!t) return;
        c->text = t;
        c->cap = cap;
    }
    memcpy(c->text + c->len, s, n);
    c->len += n;
    c->text[c->len] = 0;
}

void oai_choice_add(const toy_vocab *v, bool chat, bool logprobs, oai_choice *c, const srv_event *ev) {
    const size_t before = c->len;
    text_add(c, ev->text ? ev->text : "", ev->len);
    if (ev->kind == SRV_EV_DONE) {
        c->finish_reason = ev->finish_reason;
        return;
    }
    if (!logprobs) return;
    if (chat) {
        if (!c->logprobs) c->logprobs = json_array();
        json_array_append_new(c->logprobs, oai_token_logprob(v, ev));
        return;
    }
    if (!c->lp_tokens) {
        c->lp_tokens = json_array();
        c->lp_token_logprobs = json_array();
        c->lp_top = json_array();
        c->lp_offsets = json_array();
    }
    char buf[256];
    const size_t len = piece(v, ev->token, buf, sizeof buf);
    json_array_append_new(c->lp_tokens, oai_json_text(buf, len));
    json_array_append_new(c->lp_token_logprobs, json_real(ev->logprob));
    json_t *top = json_object();
    for (int i = 0; i < ev->n_top; i++) {
        char b2[256];
        const size_t l2 = piece(v, ev->top_token[i], b2, sizeof b2);
        json_t *key = oai_json_text(b2, l2);
        json_object_set_new(top, json_string_value(key), json_real(ev->top_logprob[i]));
        json_decref(key);
    }
    json_array_append_new(c->lp_top, top);
    json_array_append_new(c->lp_offsets, json_integer((json_int_t)before));
}

void oai_choice_free(oai_choice *c) {
    free(c->text);
    json_decref(c->logprobs);
    json_decref(c->lp_tokens);
    json_decref(c->lp_token_logprobs);
    json_decref(c->lp_top);
    json_decref(c->lp_offsets);
    memset(c, 0, sizeof *c);
}

static json_t *usage_json(int32_t prompt, int32_t completion) {
    return json_pack("{s:i,s:i,s:i}", "prompt_tokens", prompt, "completion_tokens", completion, "total_tokens",
                     prompt + completion);
}

char *oai_response_json(const oai_context *c, bool chat, const char *id, long created, oai_choice *choices, int n,
                        int32_t prompt_tokens, int32_t completion_tokens) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        oai_choice *ch = &choices[i];
        json_t *text = oai_json_text(ch->text ? ch->text : "", ch->len);
        json_t *o;
        if (chat) {
            json_t *lp = ch->logprobs ? json_pack("{s:O}", "content", ch->logprobs) : json_null();
            o = json_pack("{s:i,s:{s:s,s:o},s:o,s:s}", "index", i, "message", "role", "assistant", "content", text,
                          "logprobs", lp, "finish_reason", ch->finish_reason ? ch->finish_reason : "stop");
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
                          usage_json(prompt_tokens, completion_tokens));
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
    json_t *fin = ev->kind == SRV_EV_DONE ? json_string(ev->finish_reason) : json_null();
    json_t *lp = json_null();
    if (logprobs && ev->kind == SRV_EV_TOKEN) {
        json_decref(lp);
        if (chat) {
            lp = json_pack("{s:[o]}", "content", oai_token_logprob(c->vocab, ev));
        } else {
            char buf[256];
            const size_t len = piece(c->vocab, ev->token, buf, sizeof buf);
            json_t *top = json_object();
            for (int i = 0; i < ev->n_top; i++) {
                char b2[256];
                const size_t l2 = piece(c->vocab, ev->top_token[i], b2, sizeof b2);
                json_t *key = oai_json_text(b2, l2);
                json_object_set_new(top, json_string_value(key), json_real(ev->top_logprob[i]));
                json_decref(key);
            }
            lp = json_pack("{s:[o],s:[f],s:[o]}", "tokens", oai_json_text(buf, len), "token_logprobs",
                           (double)ev->logprob, "top_logprobs", top);
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

char *oai_usage_chunk_sse(const oai_context *c, bool chat, const char *id, long created, int32_t prompt_tokens,
                          int32_t completion_tokens) {
    return sse(json_pack("{s:s,s:s,s:i,s:s,s:[],s:o}", "id", id, "object",
                         chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)created,
                         "model", c->model_id, "choices", "usage", usage_json(prompt_tokens, completion_tokens)));
}
