/* template.c — a chat template: a model's own, its Jinja text (tokenizer.chat_template, or
 * a named variant such as tokenizer.chat_template.tool_use) run over a conversation the
 * way transformers' apply_chat_template runs it; or one of the built-in families of
 * families.c (--chat-template NAME, and the fallback of a model without a template).
 *
 * Jinja's variables are those transformers passes: messages, tools (None without any),
 * documents (None), add_generation_prompt, bos_token and eos_token, then the caller's
 * chat_template_kwargs over them. Messages come as OpenAI's JSON; an assistant's tool
 * call arguments, a JSON string there, reach the template as an object, as transformers
 * expects them. A family takes each message's role and text (text parts joined). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "jinja.h"
#include "tool_calls.h"
#include "toy.h"

struct toy_chat_template {
    jinja_template *jinja; /* NULL for a family */
    const char *family;    /* a built-in family's name (static), NULL for Jinja */
    char *bos, *eos;
    ty_chat_syntax syntax; /* how its model writes calls and reasoning */
};

/* A family's tool syntax: the forms of toy serve's renderer (tools.c) for the families it
 * knows, else the generic one; the families that think. */
static ty_chat_syntax family_syntax(const char *family) {
    ty_chat_syntax s = {TY_TOOLS_GENERIC, TY_REASONING_NONE};
    if (!strcmp(family, "chatml")) s.tools = TY_TOOLS_HERMES;
    else if (!strcmp(family, "llama3")) s.tools = TY_TOOLS_LLAMA3;
    else if (!strncmp(family, "mistral-", 8)) s.tools = TY_TOOLS_MISTRAL_NEMO;
    if (!strcmp(family, "deepseek3") || !strcmp(family, "hunyuan-dense")) s.reasoning = TY_REASONING_THINK;
    else if (!strcmp(family, "seed_oss")) s.reasoning = TY_REASONING_SEED;
    else if (!strcmp(family, "gpt-oss")) s.reasoning = TY_REASONING_GPT_OSS;
    return s;
}

ty_chat_syntax ty_chat_template_syntax(const toy_chat_template *t) {
    return t ? t->syntax : (ty_chat_syntax){TY_TOOLS_GENERIC, TY_REASONING_NONE};
}

toy_status toy_chat_template_builtin(const char *name, toy_chat_template **out) {
    if (!out) return ty_error(TOY_ERR_INVALID, "toy_chat_template_builtin: out is NULL");
    *out = NULL;
    const char *family = name ? toy_chat_template_detect(name) : NULL;
    if (!family)
        return ty_error(TOY_ERR_INVALID, "'%s' is not a chat template family toy knows (chatml, llama2, llama3, "
                                         "gemma, phi3, mistral-v7, zephyr, ...)", name ? name : "(null)");
    toy_chat_template *t = calloc(1, sizeof *t);
    if (!t || !(t->bos = strdup("")) || !(t->eos = strdup(""))) {
        toy_chat_template_free(t);
        return ty_error(TOY_ERR_NOMEM, "no memory");
    }
    t->family = family;
    t->syntax = family_syntax(family);
    *out = t;
    return TOY_OK;
}

const char *toy_chat_template_family(const toy_chat_template *t) { return t ? t->family : NULL; }

toy_status toy_chat_template_new(const char *text, const char *bos_token, const char *eos_token,
                                 toy_chat_template **out) {
    if (!out) return ty_error(TOY_ERR_INVALID, "toy_chat_template_new: out is NULL");
    *out = NULL;
    if (!text) return ty_error(TOY_ERR_INVALID, "toy_chat_template_new: no template text");
    toy_chat_template *t = calloc(1, sizeof *t);
    if (!t || !(t->bos = strdup(bos_token ? bos_token : "")) || !(t->eos = strdup(eos_token ? eos_token : ""))) {
        toy_chat_template_free(t);
        return ty_error(TOY_ERR_NOMEM, "no memory");
    }
    char err[512];
    t->jinja = ty_jinja_parse(text, strlen(text), err, sizeof err);
    if (!t->jinja) {
        toy_chat_template_free(t);
        return ty_error(TOY_ERR_INVALID, "chat template: %s", err);
    }
    t->syntax = ty_chat_syntax_of(text);
    *out = t;
    return TOY_OK;
}

void toy_chat_template_free(toy_chat_template *t) {
    if (!t) return;
    ty_jinja_free(t->jinja);
    free(t->bos);
    free(t->eos);
    free(t);
}

bool toy_chat_template_reads(const toy_chat_template *t, const char *variable) {
    return t && t->jinja && variable && ty_jinja_reads(t->jinja, variable);
}

const char *toy_chat_template_bos(const toy_chat_template *t) { return t ? t->bos : ""; }

/* The functions of a tools array: names and parameters, pointing into tools (which must
 * outlive them); function: only that one. NULL with the error recorded. */
static ty_tool_function *tool_functions(const json_t *tools, const char *function, size_t *n) {
    *n = 0;
    if (!json_is_array(tools)) {
        ty_error(TOY_ERR_INVALID, "tools: expected a JSON array of tools");
        return NULL;
    }
    ty_tool_function *fns = calloc(json_array_size(tools) + 1, sizeof *fns);
    if (!fns) {
        ty_error(TOY_ERR_NOMEM, "no memory");
        return NULL;
    }
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name) {
            free(fns);
            ty_error(TOY_ERR_INVALID, "tools[%zu]: expected {\"type\": \"function\", \"function\": {\"name\", ...}}", i);
            return NULL;
        }
        if (function && strcmp(function, name)) continue;
        const json_t *params = json_object_get(fn, "parameters");
        fns[(*n)++] = (ty_tool_function){name, params, false};
    }
    return fns;
}

/* Fields the OpenAI SDKs put on the messages they hand back: accepted, never shown to
 * the template. */
static const char *const sdk_fields[] = {"parsed", "parsed_arguments", "refusal", "annotations", "audio", NULL};

/* The messages as the template takes them: each an object with a string role, tool
 * call arguments parsed into objects. NULL with the error recorded. */
static json_t *template_messages(const char *messages_json) {
    json_error_t je;
    json_t *m = json_loads(messages_json, JSON_DECODE_ANY, &je);
    if (!m) {
        ty_error(TOY_ERR_INVALID, "messages: invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_array(m)) {
        json_decref(m);
        ty_error(TOY_ERR_INVALID, "messages: expected an array of messages");
        return NULL;
    }
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "role"))) {
            json_decref(m);
            ty_error(TOY_ERR_INVALID, "messages[%zu]: expected an object with a string role", i);
            return NULL;
        }
        for (const char *const *f = sdk_fields; *f; f++) json_object_del(msg, *f);
        size_t k;
        json_t *call;
        json_array_foreach(json_object_get(msg, "tool_calls"), k, call) {
            for (const char *const *f = sdk_fields; *f; f++) json_object_del(call, *f);
            json_t *fn = json_object_get(call, "function");
            if (!json_is_object(fn)) continue;
            for (const char *const *f = sdk_fields; *f; f++) json_object_del(fn, *f);
            json_t *args = json_object_get(fn, "arguments");
            if (!json_is_string(args)) continue;
            json_t *parsed = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
            if (parsed) json_object_set_new(fn, "arguments", parsed);
        }
    }
    return m;
}

/* A family's prompt: each message's role and text (parts joined, none ""). */
static toy_status render_family(const toy_chat_template *t, json_t *messages, bool add_generation_prompt, char **prompt) {
    const size_t n = json_array_size(messages);
    toy_chat_message *m = calloc(n ? n : 1, sizeof *m);
    char **text = calloc(n ? n : 1, sizeof *text);
    toy_status st = m && text ? TOY_OK : ty_error(TOY_ERR_NOMEM, "no memory");
    for (size_t i = 0; !st && i < n; i++) {
        const json_t *msg = json_array_get(messages, i), *c = json_object_get(msg, "content");
        m[i].role = json_string_value(json_object_get(msg, "role"));
        if (json_is_array(c)) {
            size_t k;
            json_t *part;
            size_t len = 0;
            json_array_foreach(c, k, part) len += json_string_length(json_object_get(part, "text"));
            if (!(text[i] = malloc(len + 1))) {
                st = ty_error(TOY_ERR_NOMEM, "no memory");
                break;
            }
            len = 0;
            json_array_foreach(c, k, part) {
                const json_t *s = json_object_get(part, "text");
                memcpy(text[i] + len, json_string_value(s) ? json_string_value(s) : "", json_string_length(s));
                len += json_string_length(s);
            }
            text[i][len] = 0;
            m[i].content = text[i];
        } else if (json_is_string(c)) {
            m[i].content = json_string_value(c);
        } else if (!c || json_is_null(c)) {
            m[i].content = "";
        } else {
            st = ty_error(TOY_ERR_INVALID, "messages[%zu].content must be a string or an array of text parts", i);
        }
    }
    if (!st) st = toy_chat_apply(t->family, m, n, add_generation_prompt, prompt);
    for (size_t i = 0; text && i < n; i++) free(text[i]);
    free(text);
    free(m);
    return st;
}

toy_status toy_chat_template_render(const toy_chat_template *t, const char *messages_json, const char *tools_json,
                                    const char *kwargs_json, bool add_generation_prompt, char **prompt) {
    if (!prompt) return ty_error(TOY_ERR_INVALID, "toy_chat_template_render: prompt is NULL");
    *prompt = NULL;
    if (!t || !messages_json) return ty_error(TOY_ERR_INVALID, "toy_chat_template_render: no template or no messages");
    if (t->family) {
        json_t *messages = template_messages(messages_json);
        if (!messages) return TOY_ERR_INVALID;
        const toy_status st = render_family(t, messages, add_generation_prompt, prompt);
        json_decref(messages);
        return st;
    }
    json_t *vars = json_object();
    json_t *messages = template_messages(messages_json);
    if (!vars || !messages) {
        json_decref(vars);
        return messages ? ty_error(TOY_ERR_NOMEM, "no memory") : TOY_ERR_INVALID;
    }
    json_object_set_new(vars, "messages", messages);
    json_t *tools = json_null();
    if (tools_json) {
        json_error_t je;
        tools = json_loads(tools_json, JSON_DECODE_ANY, &je);
        if (!tools || !(json_is_array(tools) || json_is_null(tools))) {
            json_decref(tools);
            json_decref(vars);
            return ty_error(TOY_ERR_INVALID, "tools: expected a JSON array of tools");
        }
    }
    json_object_set_new(vars, "tools", tools);
    json_object_set_new(vars, "documents", json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(add_generation_prompt));
    json_object_set_new(vars, "bos_token", json_string(t->bos));
    json_object_set_new(vars, "eos_token", json_string(t->eos));
    if (kwargs_json) {
        json_error_t je;
        json_t *kw = json_loads(kwargs_json, JSON_DECODE_ANY, &je);
        if (!json_is_object(kw)) {
            json_decref(kw);
            json_decref(vars);
            return ty_error(TOY_ERR_INVALID, "chat_template_kwargs: expected a JSON object");
        }
        static const char *const taken[] = {"messages", "tools", "documents", "add_generation_prompt", NULL};
        for (const char *const *k = taken; *k; k++)
            if (json_object_get(kw, *k)) {
                json_decref(kw);
                json_decref(vars);
                return ty_error(TOY_ERR_INVALID, "chat_template_kwargs: '%s' is given by the request itself", *k);
            }
        json_object_update(vars, kw);
        json_decref(kw);
    }
    char err[600];
    bool raised = false;
    size_t len;
    const jinja_limits lim = ty_jinja_default_limits();
    char *text = ty_jinja_render(t->jinja, vars, &lim, &len, &raised, err, sizeof err);
    json_decref(vars);
    if (!text) {
        if (raised) return ty_error(TOY_ERR_INVALID, "the chat template refused the conversation: %s", err);
        return ty_error(TOY_ERR_INVALID, "chat template: %s", err);
    }
    if (strlen(text) != len) {
        free(text);
        return ty_error(TOY_ERR_INVALID, "chat template: the prompt holds a NUL character");
    }
    *prompt = text;
    return TOY_OK;
}

toy_status toy_chat_template_parse(const toy_chat_template *t, const char *prompt, const char *reply,
                                   const char *tools_json, bool reasoning, char **message_json) {
    if (!message_json) return ty_error(TOY_ERR_INVALID, "toy_chat_template_parse: message_json is NULL");
    *message_json = NULL;
    if (!t || !reply) return ty_error(TOY_ERR_INVALID, "toy_chat_template_parse: no template or no reply");
    json_t *tools = tools_json ? json_loads(tools_json, JSON_DECODE_ANY, NULL) : NULL;
    if (tools_json && !tools) return ty_error(TOY_ERR_INVALID, "tools: invalid JSON");
    size_t n = 0;
    ty_tool_function *fns = tools ? tool_functions(tools, NULL, &n) : NULL;
    const char **names = calloc(n + 1, sizeof *names);
    toy_status st = (tools && !fns) ? TOY_ERR_INVALID : names ? TOY_OK : ty_error(TOY_ERR_NOMEM, "no memory");
    for (size_t i = 0; !st && i < n; i++) names[i] = fns[i].name;
    const ty_chat_syntax syn = t->syntax;
    ty_chat_output o = {0};
    if (!st && !ty_chat_output_parse(syn, prompt && ty_chat_prompt_opens_reasoning(syn, prompt, strlen(prompt)),
                                     reasoning, names, n, true, reply, strlen(reply), false, &o))
        st = ty_error(TOY_ERR_NOMEM, "no memory");
    json_t *msg = st ? NULL : json_pack("{s:s}", "role", "assistant");
    if (msg) {
        json_object_set_new(msg, "content", o.content ? json_string(o.content) : json_null());
        if (o.reasoning) json_object_set_new(msg, "reasoning_content", json_string(o.reasoning));
        if (o.n_calls) json_object_set_new(msg, "tool_calls", ty_tool_calls_json(&o, 0, false, syn.tools));
        if (!(*message_json = json_dumps(msg, JSON_COMPACT))) st = ty_error(TOY_ERR_NOMEM, "no memory");
    } else if (!st) {
        st = ty_error(TOY_ERR_NOMEM, "no memory");
    }
    json_decref(msg);
    ty_chat_output_free(&o);
    free(names);
    free(fns);
    json_decref(tools);
    return st;
}

toy_status toy_chat_template_tool_grammar(const toy_chat_template *t, const char *prompt, const char *tools_json,
                                          const char *function, bool parallel, char **gbnf) {
    if (!gbnf) return ty_error(TOY_ERR_INVALID, "toy_chat_template_tool_grammar: gbnf is NULL");
    *gbnf = NULL;
    if (!t || !tools_json) return ty_error(TOY_ERR_INVALID, "toy_chat_template_tool_grammar: no template or no tools");
    json_t *tools = json_loads(tools_json, JSON_DECODE_ANY, NULL);
    if (!tools) return ty_error(TOY_ERR_INVALID, "tools: invalid JSON");
    size_t n = 0;
    ty_tool_function *fns = tool_functions(tools, function, &n);
    toy_status st = fns ? TOY_OK : TOY_ERR_INVALID;
    if (!st && n == 0)
        st = ty_error(TOY_ERR_INVALID, function ? "tools: no function named '%s'" : "tools: no function%s",
                      function ? function : "");
    if (!st) {
        size_t bad = 0;
        char err[300];
        const bool in_reasoning = prompt && ty_chat_prompt_opens_reasoning(t->syntax, prompt, strlen(prompt));
        *gbnf = ty_chat_grammar(t->syntax, in_reasoning, fns, n, parallel, &bad, err, sizeof err);
        if (!*gbnf)
            st = !strcmp(err, "out of memory") ? ty_error(TOY_ERR_NOMEM, "no memory")
                                               : ty_error(TOY_ERR_INVALID, "tools: %s: %s", bad < n ? fns[bad].name : "?", err);
    }
    free(fns);
    json_decref(tools);
    return st;
}
