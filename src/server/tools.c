/* tools.c — see tools.h. The chatml, llama3 and mistral forms follow the models' own
 * templates (Qwen 2.5's, Llama 3.1's, Mistral 7B v0.3's and Nemo's tool branches) as
 * llama.cpp's common/chat.cpp renders them; the generic form is toy's. A conversation
 * is turned into a list of messages for the family's template (toy_chat_apply), with
 * the tool text inside them, and, for Mistral's tool blocks that sit outside any turn,
 * raw text between the templated runs. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "json_schema.h"
#include "tools.h"
#include "toy.h"

#define TOOLS_MAX 128 /* functions in one request */

tools_syntax tools_syntax_of(const char *family) {
    if (!family) return TOOLS_GENERIC;
    if (!strcmp(family, "chatml")) return TOOLS_HERMES;
    if (!strcmp(family, "llama3")) return TOOLS_LLAMA3;
    if (!strncmp(family, "mistral-", 8)) return TOOLS_MISTRAL;
    return TOOLS_GENERIC;
}

static bool tfail(tools_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool tfail(tools_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}


/* JSON as the models' templates write it (Jinja's tojson, Python's json.dumps):
 * ", " and ": " between items (or indent spaces a level), non-ASCII as is, reals in
 * their short form. */
static void put_json(ty_buf *b, const json_t *v, int indent) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_INDENT(indent) | JSON_REAL_PRECISION(15));
    if (!s) {
        b->oom = true;
        return;
    }
    ty_buf_append(b, s, strlen(s));
    free(s);
}

/* ---------------------------------------------------------------- requests */

static bool valid_name(const char *s) {
    const size_t n = strlen(s);
    if (n < 1 || n > 64) return false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Only these keys; the first other one is named. */
static const char *unknown_key(const json_t *o, const char *const *keys) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        bool known = false;
        for (const char *const *k = keys; *k && !known; k++) known = !strcmp(key, *k);
        if (!known) return key;
    }
    return NULL;
}

/* tools[i] checked and added to t->json in the prompt's form. */
static bool parse_tool(const json_t *tool, size_t i, tools_request *t, tools_error *err) {
    static const char *const tool_keys[] = {"type", "function", NULL};
    static const char *const function_keys[] = {"name", "description", "parameters", "strict", NULL};
    if (!json_is_object(tool)) return tfail(err, 400, "tools", "tools[%zu] must be an object", i);
    const char *bad = unknown_key(tool, tool_keys);
    if (bad) return tfail(err, 400, "tools", "tools[%zu].%.64s is not supported by toy serve", i, bad);
    const json_t *type = json_object_get(tool, "type"), *fn = json_object_get(tool, "function");
    if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
        return tfail(err, 400, "tools", "tools[%zu].type must be \"function\"", i);
    if (!json_is_object(fn)) return tfail(err, 400, "tools", "tools[%zu].function must be an object", i);
    if ((bad = unknown_key(fn, function_keys)))
        return tfail(err, 400, "tools", "tools[%zu].function.%.64s is not supported by toy serve", i, bad);
    const json_t *name = json_object_get(fn, "name"), *desc = json_object_get(fn, "description");
    const json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict");
    if (!json_is_string(name) || !valid_name(json_string_value(name)))
        return tfail(err, 400, "tools", "tools[%zu].function.name must be 1 to 64 letters, digits, _ or -", i);
    for (size_t k = 0; k < t->n_functions; k++)
        if (!strcmp(t->functions[k].name, json_string_value(name)))
            return tfail(err, 400, "tools", "tools[%zu].function.name '%s' is tools[%zu]'s too", i,
                         json_string_value(name), k);
    if (desc && !json_is_null(desc) && !json_is_string(desc))
        return tfail(err, 400, "tools", "tools[%zu].function.description must be a string", i);
    if (params && !json_is_null(params) && !json_is_object(params))
        return tfail(err, 400, "tools", "tools[%zu].function.parameters must be a JSON Schema object", i);
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return tfail(err, 400, "tools", "tools[%zu].function.strict must be true or false", i);

    json_t *f = json_object();
    json_object_set(f, "name", (json_t *)name);
    if (json_is_string(desc)) json_object_set(f, "description", (json_t *)desc);
    if (json_is_object(params))
        json_object_set(f, "parameters", (json_t *)params);
    else
        json_object_set_new(f, "parameters", json_pack("{s:s,s:{}}", "type", "object", "properties"));
    json_t *entry = json_pack("{s:s,s:o}", "type", "function", "function", f);
    if (!entry || json_array_append_new(t->json, entry) || json_object_size(f) < 2)
        return tfail(err, 500, "tools", "no memory");
    t->functions[t->n_functions++] = (tool_function){
        json_string_value(json_object_get(f, "name")),
        json_is_string(desc) ? json_string_value(json_object_get(f, "description")) : NULL,
        json_object_get(f, "parameters"), json_is_true(strict)};
    return true;
}

static bool parse_tool_choice(const json_t *tc, tools_request *t, tools_error *err) {
    if (!tc || json_is_null(tc)) return true;
    if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (!strcmp(s, "none")) t->choice = TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto")) t->choice = TOOL_CHOICE_AUTO;
        else if (!strcmp(s, "required")) t->choice = TOOL_CHOICE_REQUIRED;
        else goto bad;
    } else if (json_is_object(tc)) {
        static const char *const keys[] = {"type", "function", NULL};
        const json_t *type = json_object_get(tc, "type"), *fn = json_object_get(tc, "function");
        const json_t *name = json_object_get(fn, "name");
        if (unknown_key(tc, keys) || !json_is_string(type) || strcmp(json_string_value(type), "function") ||
            !json_is_object(fn) || !json_is_string(name) || json_object_size(fn) != 1)
            goto bad;
        for (size_t k = 0; k < t->n_functions; k++)
            if (!strcmp(t->functions[k].name, json_string_value(name))) {
                t->choice = TOOL_CHOICE_NAMED;
                t->named = k;
                return true;
            }
        return tfail(err, 400, "tool_choice", "tool_choice names the function '%.64s', which tools does not declare",
                     json_string_value(name));
    } else {
        goto bad;
    }
    if (t->choice == TOOL_CHOICE_REQUIRED && t->n_functions == 0)
        return tfail(err, 400, "tool_choice", "tool_choice \"required\" needs tools");
    return true;
bad:
    return tfail(err, 400, "tool_choice",
                 "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
                 "{\"name\": NAME}}");
}

bool tools_request_parse(const json_t *body, const char *family, ty_chat_syntax syntax, tools_request *t,
                         tools_error *err) {
    memset(t, 0, sizeof *t);
    t->choice = TOOL_CHOICE_AUTO;
    t->parallel = true;
    t->syntax = syntax;
    t->family = family;
    const json_t *tools = json_object_get(body, "tools"), *pc = json_object_get(body, "parallel_tool_calls");
    if (pc && !json_is_null(pc)) {
        if (!json_is_boolean(pc))
            return tfail(err, 400, "parallel_tool_calls", "parallel_tool_calls must be true or false");
        t->parallel = json_is_true(pc);
    }
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools))
            return tfail(err, 400, "tools", "tools must be an array of {\"type\": \"function\", \"function\": {...}}");
        const size_t n = json_array_size(tools);
        if (n > TOOLS_MAX) return tfail(err, 400, "tools", "tools holds %zu functions, at most %d", n, TOOLS_MAX);
        t->json = json_array();
        t->functions = calloc(n ? n : 1, sizeof *t->functions);
        if (!t->json || !t->functions) return tfail(err, 500, "tools", "no memory");
        for (size_t i = 0; i < n; i++)
            if (!parse_tool(json_array_get(tools, i), i, t, err)) return false;
    }
    return parse_tool_choice(json_object_get(body, "tool_choice"), t, err);
}

void tools_request_free(tools_request *t) {
    json_decref(t->json);
    free(t->functions);
    memset(t, 0, sizeof *t);
}

bool tools_parse_calls(const tools_request *t) {
    return t && t->n_functions > 0 && t->choice != TOOL_CHOICE_NONE;
}

/* ---------------------------------------------------------------- messages */

bool tools_message_check(const json_t *msg, size_t i, const char *role, const json_t **calls,
                         const char **call_id, tools_error *err) {
    *calls = NULL;
    *call_id = NULL;
    const json_t *tc = json_object_get(msg, "tool_calls"), *id = json_object_get(msg, "tool_call_id");
    if (tc && !json_is_null(tc) && !(json_is_array(tc) && json_array_size(tc) == 0)) {
        if (strcmp(role, "assistant"))
            return tfail(err, 400, "messages", "messages[%zu].tool_calls: only an assistant's message has them", i);
        if (!json_is_array(tc)) return tfail(err, 400, "messages", "messages[%zu].tool_calls must be an array", i);
        /* (index, as a stream's deltas carry it, and parsed_arguments, which the OpenAI SDKs'
         * parse() adds, come back in messages a client echoes: accepted, not used) */
        static const char *const call_keys[] = {"id", "type", "function", "index", NULL};
        static const char *const fn_keys[] = {"name", "arguments", "parsed_arguments", NULL};
        for (size_t k = 0; k < json_array_size(tc); k++) {
            const json_t *c = json_array_get(tc, k);
            const json_t *cid = json_object_get(c, "id"), *type = json_object_get(c, "type");
            const json_t *fn = json_object_get(c, "function");
            const json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
            const char *bad = json_is_object(c) ? unknown_key(c, call_keys) : NULL;
            if (!bad && json_is_object(fn)) bad = unknown_key(fn, fn_keys);
            if (bad)
                return tfail(err, 400, "messages", "messages[%zu].tool_calls[%zu]: %.64s is not supported by toy serve",
                             i, k, bad);
            if (!json_is_object(c) || !json_is_string(cid) || json_string_length(cid) == 0 || !json_is_string(type) ||
                strcmp(json_string_value(type), "function") || !json_is_object(fn) || !json_is_string(name) ||
                !valid_name(json_string_value(name)) || !json_is_string(args))
                return tfail(err, 400, "messages",
                             "messages[%zu].tool_calls[%zu] must be {\"id\": ID, \"type\": \"function\", \"function\": "
                             "{\"name\": NAME, \"arguments\": TEXT}}",
                             i, k);
            json_t *a = json_loads(json_string_value(args), 0, NULL);
            const bool object = json_is_object(a);
            json_decref(a);
            if (!object)
                return tfail(err, 400, "messages",
                             "messages[%zu].tool_calls[%zu].function.arguments must be the text of a JSON object", i, k);
        }
        *calls = tc;
    }
    if (id && !json_is_null(id)) {
        if (strcmp(role, "tool"))
            return tfail(err, 400, "messages", "messages[%zu].tool_call_id: only a tool message has one", i);
        if (!json_is_string(id) || json_string_length(id) == 0)
            return tfail(err, 400, "messages", "messages[%zu].tool_call_id must be a non-empty string", i);
        *call_id = json_string_value(id);
    }
    if (!strcmp(role, "tool") && !*call_id)
        return tfail(err, 400, "messages", "messages[%zu] (role tool) needs a tool_call_id", i);
    return true;
}

/* ---------------------------------------------------------------- rendering */

/* A message for the template, or raw text written between the templated runs. */
typedef struct {
    const char *role;
    char *content; /* owned */
    bool raw;
} item;

typedef struct {
    item *v;
    size_t n;
    bool oom;
} item_list;

/* Adds an item holding the buffer's text (taken over). */
static void push(item_list *l, const char *role, ty_buf *b, bool raw) {
    ty_buf_append(b, "", 0);
    if (b->oom) {
        l->oom = true;
        free(b->v);
    } else {
        l->v[l->n++] = (item){role, b->v, raw};
    }
    *b = (ty_buf){0};
}

static void push_text(item_list *l, const char *role, const char *text, bool raw) {
    ty_buf b = {0};
    TOY_BUF_PUT(&b, text);
    push(l, role, &b, raw);
}

static const char *call_name(const json_t *call) {
    return json_string_value(json_object_get(json_object_get(call, "function"), "name"));
}

/* A call's arguments as JSON (checked to be an object's text by tools_message_check). */
static void put_arguments(ty_buf *b, const json_t *call) {
    json_t *a = json_loads(json_string_value(json_object_get(json_object_get(call, "function"), "arguments")), 0, NULL);
    if (!a) b->oom = true;
    else put_json(b, a, 0);
    json_decref(a);
}

/* [{"name": N, "arguments": A, "id": I}, ...]: Mistral's and the generic form's calls. */
static void put_call_list(ty_buf *b, const json_t *calls) {
    TOY_BUF_PUT(b, "[");
    for (size_t k = 0; k < json_array_size(calls); k++) {
        const json_t *c = json_array_get(calls, k);
        json_t *name = json_string(call_name(c));
        TOY_BUF_PUT(b, k ? ", " : "", "{\"name\": ");
        put_json(b, name, 0);
        TOY_BUF_PUT(b, ", \"arguments\": ");
        put_arguments(b, c);
        TOY_BUF_PUT(b, ", \"id\": ");
        put_json(b, json_object_get(c, "id"), 0);
        TOY_BUF_PUT(b, "}");
        json_decref(name);
    }
    TOY_BUF_PUT(b, "]");
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

static bool is_role(const tools_message *m, const char *role) { return !strcmp(m->role, role); }

/* The end of the run of tool messages that begins at i. */
static size_t tool_run_end(const tools_message *m, size_t n, size_t i) {
    while (i < n && is_role(&m[i], "tool")) i++;
    return i;
}

/* Qwen 2.5's template without its default system message (as Qwen 3's). */
static void render_hermes(const tools_request *t, const tools_message *m, size_t n, item_list *l) {
    size_t i = 0;
    if (t && t->n_functions) {
        ty_buf s = {0};
        if (n > 0 && is_role(&m[0], "system")) TOY_BUF_PUT(&s, m[i++].content, "\n\n");
        TOY_BUF_PUT(&s, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
        for (size_t k = 0; k < json_array_size(t->json); k++) {
            TOY_BUF_PUT(&s, "\n");
            put_json(&s, json_array_get(t->json, k), 0);
        }
        TOY_BUF_PUT(&s, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                "\"arguments\": <args-json-object>}\n</tool_call>");
        push(l, "system", &s, false);
    }
    for (; i < n; i++) {
        ty_buf b = {0};
        if (is_role(&m[i], "tool")) { /* a run of results is one user turn */
            const size_t end = tool_run_end(m, n, i);
            for (size_t k = i; k < end; k++)
                TOY_BUF_PUT(&b, k > i ? "\n" : "", "<tool_response>\n", m[k].content, "\n</tool_response>");
            push(l, "user", &b, false);
            i = end - 1;
        } else if (m[i].tool_calls) {
            if (m[i].content[0]) TOY_BUF_PUT(&b, m[i].content, "\n");
            for (size_t k = 0; k < json_array_size(m[i].tool_calls); k++) {
                const json_t *c = json_array_get(m[i].tool_calls, k);
                TOY_BUF_PUT(&b, k ? "\n" : "", "<tool_call>\n{\"name\": \"", call_name(c), "\", \"arguments\": ");
                put_arguments(&b, c);
                TOY_BUF_PUT(&b, "}\n</tool_call>");
            }
            push(l, "assistant", &b, false);
        } else {
            push_text(l, m[i].role, m[i].content, false);
        }
    }
}

/* Llama 3.1's template with tools_in_user_message false (as llama.cpp renders it) and
 * the template's own default date: prompts do not change with the day. An assistant's
 * several calls are one object a line (the template takes one a turn). */
static void render_llama3(const tools_request *t, const tools_message *m, size_t n, item_list *l) {
    size_t i = 0;
    if (t && t->n_functions) {
        ty_buf s = {0};
        TOY_BUF_PUT(&s, "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                "You have access to the following functions. To call a function, please respond with JSON for a "
                "function call.Respond in the format {\"name\": function name, \"parameters\": dictionary of "
                "argument name and its value}.Do not use variables.\n\n");
        for (size_t k = 0; k < json_array_size(t->json); k++) {
            put_json(&s, json_array_get(t->json, k), 4);
            TOY_BUF_PUT(&s, "\n\n");
        }
        if (n > 0 && is_role(&m[0], "system")) TOY_BUF_PUT(&s, m[i++].content);
        push(l, "system", &s, false);
    }
    for (; i < n; i++) {
        ty_buf b = {0};
        if (is_role(&m[i], "tool")) {
            push_text(l, "ipython", m[i].content, false);
        } else if (m[i].tool_calls) {
            for (size_t k = 0; k < json_array_size(m[i].tool_calls); k++) {
                const json_t *c = json_array_get(m[i].tool_calls, k);
                TOY_BUF_PUT(&b, k ? "\n" : "", "{\"name\": \"", call_name(c), "\", \"parameters\": ");
                put_arguments(&b, c);
                TOY_BUF_PUT(&b, "}");
            }
            push(l, "assistant", &b, false);
        } else {
            push_text(l, m[i].role, m[i].content, false);
        }
    }
}

/* Mistral 7B v0.3's template (v1 and v3: a space after each tool tag) and Nemo's
 * (v3-tekken, v7: none). The tool blocks stand outside the [INST] turns, so they are raw
 * text; so is an assistant's answer after tool results in the families whose template
 * writes the assistant only after a user turn (v1, v3, v3-tekken). */
static void render_mistral(const tools_request *t, const tools_message *m, size_t n, item_list *l) {
    const char *f = t ? t->family : "mistral-v3";
    const bool turns = !strncmp(f, "mistral-v1", 10) || !strncmp(f, "mistral-v3", 10);
    const bool tekken = strstr(f, "tekken") != NULL;
    const char *sp = turns && !tekken ? " " : "";
    /* the tools go before the turn of the last user message */
    size_t at = n;
    for (size_t i = n; i-- > 0 && at == n;)
        if (is_role(&m[i], "user")) at = i;
    if (at == n) at = 0;
    while (turns && at > 0 && is_role(&m[at - 1], "system")) at--;
    const bool with_tools = t && t->n_functions;
    bool after_raw = false;
    for (size_t i = 0; i <= n; i++) {
        ty_buf b = {0};
        if (with_tools && i == at) {
            TOY_BUF_PUT(&b, "[AVAILABLE_TOOLS]", sp);
            put_json(&b, t->json, 0);
            TOY_BUF_PUT(&b, "[/AVAILABLE_TOOLS]");
            push(l, NULL, &b, true);
        }
        if (i == n) break;
        if (is_role(&m[i], "tool")) {
            json_t *r = json_pack("{s:s,s:s}", "content", m[i].content, "call_id", m[i].tool_call_id);
            TOY_BUF_PUT(&b, "[TOOL_RESULTS]", sp);
            if (r) put_json(&b, r, 0);
            else b.oom = true;
            TOY_BUF_PUT(&b, "[/TOOL_RESULTS]");
            json_decref(r);
            push(l, NULL, &b, true);
            after_raw = true;
        } else if (m[i].tool_calls) {
            TOY_BUF_PUT(&b, "[TOOL_CALLS]", sp);
            put_call_list(&b, m[i].tool_calls);
            TOY_BUF_PUT(&b, "</s>");
            push(l, NULL, &b, true);
            after_raw = true;
        } else if (turns && after_raw && is_role(&m[i], "assistant")) {
            const char *c = m[i].content;
            size_t len = strlen(c);
            if (!strcmp(f, "mistral-v3")) { /* the one that trims, as its family does */
                while (len > 0 && is_space(*c)) c++, len--;
                while (len > 0 && is_space(c[len - 1])) len--;
            }
            TOY_BUF_PUT(&b, tekken ? "" : " ");
            ty_buf_append(&b, c, len);
            TOY_BUF_PUT(&b, "</s>");
            push(l, NULL, &b, true);
        } else {
            push_text(l, m[i].role, m[i].content, false);
            after_raw = false;
        }
    }
}

/* toy's form for the families without a tool syntax of their own. */
static void render_generic(const tools_request *t, const tools_message *m, size_t n, item_list *l) {
    size_t i = 0;
    if (t && t->n_functions && t->choice != TOOL_CHOICE_NONE) {
        ty_buf s = {0};
        if (n > 0 && is_role(&m[0], "system")) TOY_BUF_PUT(&s, m[i++].content, "\n\n");
        TOY_BUF_PUT(&s, "You can call functions (tools). They are, one JSON object a line:\n");
        for (size_t k = 0; k < json_array_size(t->json); k++) {
            put_json(&s, json_array_get(t->json, k), 0);
            TOY_BUF_PUT(&s, "\n");
        }
        TOY_BUF_PUT(&s, "\nTo call ", t->parallel ? "one or more of them" : "one of them",
            ", answer with only a JSON object of this form:\n"
            "{\"tool_calls\": [{\"name\": <function name>, \"arguments\": <its arguments as a JSON object>}]}\n"
            "The results come back as {\"tool_results\": [{\"tool_call_id\": <id>, \"content\": <result>}]}. "
            "To answer without calling a function, reply in plain text.");
        push(l, "system", &s, false);
    }
    for (; i < n; i++) {
        ty_buf b = {0};
        if (is_role(&m[i], "tool")) {
            const size_t end = tool_run_end(m, n, i);
            TOY_BUF_PUT(&b, "{\"tool_results\": [");
            for (size_t k = i; k < end; k++) {
                json_t *r = json_pack("{s:s,s:s}", "tool_call_id", m[k].tool_call_id, "content", m[k].content);
                TOY_BUF_PUT(&b, k > i ? ", " : "");
                if (r) put_json(&b, r, 0);
                else b.oom = true;
                json_decref(r);
            }
            TOY_BUF_PUT(&b, "]}");
            push(l, "user", &b, false);
            i = end - 1;
        } else if (m[i].tool_calls) {
            TOY_BUF_PUT(&b, "{\"tool_calls\": ");
            put_call_list(&b, m[i].tool_calls);
            TOY_BUF_PUT(&b, "}");
            push(l, "assistant", &b, false);
        } else {
            push_text(l, m[i].role, m[i].content, false);
        }
    }
}

/* The items through the template, run by run; the generation prompt after the last. */
static bool apply_items(const char *family, const item_list *l, bool add_assistant, char **out, tools_error *err) {
    ty_buf b = {0};
    ty_buf_append(&b, "", 0);
    toy_chat_message *run = malloc((l->n ? l->n : 1) * sizeof *run);
    bool ok = run != NULL || tfail(err, 500, "messages", "no memory");
    for (size_t i = 0; ok && i <= l->n;) {
        if (i < l->n && l->v[i].raw) {
            TOY_BUF_PUT(&b, l->v[i++].content);
            continue;
        }
        size_t k = 0;
        while (i < l->n && !l->v[i].raw) run[k++] = (toy_chat_message){l->v[i].role, l->v[i].content}, i++;
        const bool last = i == l->n;
        if (k == 0 && !(last && add_assistant)) {
            if (last) break;
            continue;
        }
        char *s = NULL;
        if (toy_chat_apply(family, run, k, last && add_assistant, &s))
            ok = tfail(err, 400, "messages", "messages: %s", toy_last_error());
        else
            TOY_BUF_PUT(&b, s);
        toy_free(s);
        if (last) break;
    }
    free(run);
    if (ok && b.oom) ok = tfail(err, 500, "messages", "no memory");
    if (!ok) {
        free(b.v);
        return false;
    }
    *out = b.v;
    return true;
}

bool tools_messages_have_tools(const tools_message *m, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (m[i].tool_calls || is_role(&m[i], "tool")) return true;
    return false;
}

json_t *tools_generic_messages(const tools_request *t, const tools_message *m, size_t n, tools_error *err) {
    item_list l = {calloc(2 * n + 2, sizeof(item)), 0, false};
    json_t *out = l.v ? json_array() : NULL;
    if (out) render_generic(t, m, n, &l);
    for (size_t i = 0; out && i < l.n; i++) /* (the generic form writes no raw text) */
        if (json_array_append_new(out, json_pack("{s:s, s:s}", "role", l.v[i].role, "content", l.v[i].content))) {
            json_decref(out);
            out = NULL;
        }
    if (!out || l.oom) {
        json_decref(out);
        out = NULL;
        tfail(err, 500, "messages", "no memory");
    }
    for (size_t i = 0; i < l.n; i++) free(l.v[i].content);
    free(l.v);
    return out;
}

bool tools_render(const tools_request *t, const char *family, const tools_message *m, size_t n,
                  bool add_assistant, char **prompt, tools_error *err) {
    *prompt = NULL;
    item_list l = {calloc(2 * n + 2, sizeof(item)), 0, false};
    if (!l.v) return tfail(err, 500, "messages", "no memory");
    switch (tools_syntax_of(family)) {
    case TOOLS_HERMES: render_hermes(t, m, n, &l); break;
    case TOOLS_LLAMA3: render_llama3(t, m, n, &l); break;
    case TOOLS_MISTRAL: render_mistral(t, m, n, &l); break;
    case TOOLS_GENERIC: render_generic(t, m, n, &l); break;
    }
    bool ok = !l.oom || tfail(err, 500, "messages", "no memory");
    if (ok) ok = apply_items(family, &l, add_assistant, prompt, err);
    for (size_t i = 0; i < l.n; i++) free(l.v[i].content);
    free(l.v);
    return ok;
}

/* ---------------------------------------------------------------- answers */

/* ---------------------------------------------------------------- forcing */

bool tools_grammar(const tools_request *t, bool starts_in_reasoning, char **gbnf, tools_error *err) {
    *gbnf = NULL;
    if (t->n_functions == 0 || (t->choice != TOOL_CHOICE_REQUIRED && t->choice != TOOL_CHOICE_NAMED)) return true;
    ty_tool_function *fns = calloc(t->n_functions, sizeof *fns);
    size_t *index = calloc(t->n_functions, sizeof *index), n = 0;
    if (!fns || !index) {
        free(fns);
        free(index);
        return tfail(err, 500, "tools", "no memory");
    }
    for (size_t k = 0; k < t->n_functions; k++) {
        if (t->choice == TOOL_CHOICE_NAMED && k != t->named) continue;
        fns[n] = (ty_tool_function){t->functions[k].name, t->functions[k].parameters, t->functions[k].strict};
        index[n++] = k;
    }
    size_t bad = 0;
    char msg[300];
    *gbnf = ty_chat_grammar(t->syntax, starts_in_reasoning, fns, n, t->parallel, &bad, msg, sizeof msg);
    bool ok = *gbnf != NULL;
    if (!ok && !strcmp(msg, "out of memory")) tfail(err, 500, "tools", "no memory");
    else if (!ok) tfail(err, 400, "tools", "tools[%zu].function.parameters: %s", bad < n ? index[bad] : 0, msg);
    free(fns);
    free(index);
    return ok;
}
