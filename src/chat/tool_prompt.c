/* tool_prompt.c — see tool_prompt.h. The chatml, llama3 and mistral forms follow the
 * models' own templates (Qwen 2.5's, Llama 3.1's, Mistral 7B v0.3's and Nemo's tool
 * branches) as llama.cpp's common/chat.cpp renders them; the generic form is toy's. A
 * conversation is turned into a list of messages for the family's template
 * (toy_chat_apply), with the tool text inside them, and, for Mistral's tool blocks that
 * sit outside any turn, raw text between the templated runs. */
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "error.h"
#include "tool_prompt.h"

static bool has_tools(const ty_chat_tools *t) { return t && json_array_size(t->json) > 0; }

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

/* A call's arguments as JSON: the text of an object, or the object. */
static void put_arguments(ty_buf *b, const json_t *call) {
    const json_t *args = json_object_get(json_object_get(call, "function"), "arguments");
    json_t *a = json_is_string(args) ? json_loads(json_string_value(args), 0, NULL) : json_incref((json_t *)args);
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

static bool is_role(const ty_chat_turn *m, const char *role) { return !strcmp(m->role, role); }

/* The end of the run of tool messages that begins at i. */
static size_t tool_run_end(const ty_chat_turn *m, size_t n, size_t i) {
    while (i < n && is_role(&m[i], "tool")) i++;
    return i;
}

/* Qwen 2.5's template without its default system message (as Qwen 3's). */
static void render_hermes(const ty_chat_tools *t, const ty_chat_turn *m, size_t n, item_list *l) {
    size_t i = 0;
    if (has_tools(t)) {
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
static void render_llama3(const ty_chat_tools *t, const ty_chat_turn *m, size_t n, item_list *l) {
    size_t i = 0;
    if (has_tools(t)) {
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
static void render_mistral(const ty_chat_tools *t, const char *family, const ty_chat_turn *m, size_t n, item_list *l) {
    const char *f = family;
    const bool turns = !strncmp(f, "mistral-v1", 10) || !strncmp(f, "mistral-v3", 10);
    const bool tekken = strstr(f, "tekken") != NULL;
    const char *sp = turns && !tekken ? " " : "";
    /* the tools go before the turn of the last user message */
    size_t at = n;
    for (size_t i = n; i-- > 0 && at == n;)
        if (is_role(&m[i], "user")) at = i;
    if (at == n) at = 0;
    while (turns && at > 0 && is_role(&m[at - 1], "system")) at--;
    const bool with_tools = has_tools(t);
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
static void render_generic(const ty_chat_tools *t, const ty_chat_turn *m, size_t n, item_list *l) {
    size_t i = 0;
    if (has_tools(t) && !t->choice_none) {
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
static toy_status apply_items(const char *family, const item_list *l, bool add_assistant, char **out) {
    ty_buf b = {0};
    ty_buf_append(&b, "", 0);
    toy_chat_message *run = malloc((l->n ? l->n : 1) * sizeof *run);
    toy_status st = run ? TOY_OK : TOY_ERR_NOMEM;
    for (size_t i = 0; !st && i <= l->n;) {
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
        st = toy_chat_apply(family, run, k, last && add_assistant, &s);
        if (!st) TOY_BUF_PUT(&b, s);
        toy_free(s);
        if (last) break;
    }
    free(run);
    if (!st && b.oom) st = TOY_ERR_NOMEM;
    if (st) {
        free(b.v);
        return st == TOY_ERR_NOMEM ? ty_error(TOY_ERR_NOMEM, "no memory") : st;
    }
    *out = b.v;
    return TOY_OK;
}

bool ty_chat_turns_have_tools(const ty_chat_turn *m, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (m[i].tool_calls || is_role(&m[i], "tool")) return true;
    return false;
}

json_t *ty_tool_prompt_generic(const ty_chat_tools *t, const ty_chat_turn *m, size_t n) {
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
        ty_error(TOY_ERR_NOMEM, "no memory");
    }
    for (size_t i = 0; i < l.n; i++) free(l.v[i].content);
    free(l.v);
    return out;
}

toy_status ty_tool_prompt_family(const ty_chat_tools *t, const char *family, const ty_chat_turn *m, size_t n,
                                 bool add_assistant, char **prompt) {
    *prompt = NULL;
    item_list l = {calloc(2 * n + 2, sizeof(item)), 0, false};
    if (!l.v) return ty_error(TOY_ERR_NOMEM, "no memory");
    if (!strcmp(family, "chatml")) render_hermes(t, m, n, &l);
    else if (!strcmp(family, "llama3")) render_llama3(t, m, n, &l);
    else if (!strncmp(family, "mistral-", 8)) render_mistral(t, family, m, n, &l);
    else render_generic(t, m, n, &l);
    toy_status st = l.oom ? ty_error(TOY_ERR_NOMEM, "no memory") : TOY_OK;
    if (!st) st = apply_items(family, &l, add_assistant, prompt);
    for (size_t i = 0; i < l.n; i++) free(l.v[i].content);
    free(l.v);
    return st;
}
