/* tool_requests.c — see tool_requests.h. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema.h"
#include "tool_requests.h"
#include "toy.h"

#define TOOLS_MAX 128 /* functions in one request */

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

bool tools_request_parse(const json_t *body, ty_chat_syntax syntax, tools_request *t, tools_error *err) {
    memset(t, 0, sizeof *t);
    t->choice = TOOL_CHOICE_AUTO;
    t->parallel = true;
    t->syntax = syntax;
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

/* ---------------------------------------------------------------- answers */

/* ---------------------------------------------------------------- forcing */

bool tools_grammar(const tools_request *t, ty_prompt_thinking thinking, char **gbnf, tools_error *err) {
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
    *gbnf = ty_chat_grammar(t->syntax, thinking, fns, n, t->parallel, &bad, msg, sizeof msg);
    bool ok = *gbnf != NULL;
    if (!ok && !strcmp(msg, "out of memory")) tfail(err, 500, "tools", "no memory");
    else if (!ok) tfail(err, 400, "tools", "tools[%zu].function.parameters: %s", bad < n ? index[bad] : 0, msg);
    free(fns);
    free(index);
    return ok;
}
