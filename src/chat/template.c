/* template.c — a chat template: a model's own, its Jinja text (tokenizer.chat_template, or
 * a named variant such as tokenizer.chat_template.tool_use) run over a conversation the
 * way transformers' apply_chat_template runs it; or one of the built-in families of
 * families.c (--chat-template NAME, and the fallback of a model without a template).
 *
 * Jinja's variables are those transformers passes: messages, tools (None without any),
 * documents (None), add_generation_prompt, bos_token and eos_token, then the caller's
 * chat_template_kwargs over them. Messages come as OpenAI's JSON; an assistant's tool
 * call arguments, a JSON string there, reach the template as an object, as transformers
 * expects them. A family takes each message's role and text (text parts joined), and
 * writes tools, calls and results in its tool form (tool_prompt.h).
 *
 * A chat's prompt (ty_chat_prompt) is the rendering, but where a Jinja template writes no
 * tools of its own, the conversation's tools, calls and results are given to it in the
 * generic form, and the answers are read in that form (the template's syntax says so). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "jinja.h"
#include "tool_calls.h"
#include "tool_prompt.h"
#include "toy.h"

struct toy_chat_template {
    jinja_template *jinja; /* NULL for a family */
    const char *family;    /* a built-in family's name (static), NULL for Jinja */
    char *bos, *eos;
    ty_chat_syntax syntax; /* how its model writes calls and reasoning */
    bool native_tools;     /* the Jinja template writes tools: from `tools`, or firefunction's `functions` */
    bool content_parts;    /* the Jinja template writes a content given as text parts */
    bool text_arguments;   /* it writes a call's arguments given as JSON text, not as an object */
    bool system_role;      /* it writes a system message (Gemma's refuse one) */
    bool empty_for_null;   /* it fails on a null content (beside calls), so gets "" (Qwen 3's) */
    toy_chat_template *tool_use; /* the model's variant for requests with tools (owned), or NULL */
};

static bool takes_content_parts(const toy_chat_template *t);
static bool takes_text_arguments(const toy_chat_template *t);
static bool takes_system_role(const toy_chat_template *t);
static bool needs_content(const toy_chat_template *t);

/* A family's tool syntax: the forms of toy serve's renderer (src/server/tool_requests.c)
 * for the families it knows, else the generic one; the families that think. */
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
    /* a template that writes no tools gets them in the generic form, and answers in it */
    t->syntax = ty_chat_syntax_of(text);
    t->native_tools = ty_jinja_reads(t->jinja, "tools") ||
                      (t->syntax.tools == TY_TOOLS_FIREFUNCTION && ty_jinja_reads(t->jinja, "functions"));
    if (!t->native_tools) t->syntax.tools = TY_TOOLS_GENERIC;
    t->content_parts = takes_content_parts(t);
    t->text_arguments = takes_text_arguments(t);
    t->system_role = takes_system_role(t);
    t->empty_for_null = needs_content(t);
    *out = t;
    return TOY_OK;
}

void toy_chat_template_free(toy_chat_template *t) {
    if (!t) return;
    toy_chat_template_free(t->tool_use);
    ty_jinja_free(t->jinja);
    free(t->bos);
    free(t->eos);
    free(t);
}

void ty_chat_template_set_tool_use(toy_chat_template *t, toy_chat_template *tool_use) {
    toy_chat_template_free(t->tool_use);
    t->tool_use = tool_use;
}

const toy_chat_template *ty_chat_template_for(const toy_chat_template *t, const json_t *tools) {
    return t && t->tool_use && json_array_size(tools) ? t->tool_use : t;
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

/* ---------------------------------------------------------------- messages */

/* Fields the OpenAI SDKs put on the messages they hand back: accepted, never shown to
 * the template. */
static const char *const sdk_fields[] = {"parsed", "parsed_arguments", "refusal", "annotations", "audio", NULL};

/* The messages (an array) made ready for the template in place: each an object with a
 * string role, the SDKs' fields dropped, tool call arguments given as JSON text parsed
 * into objects, as transformers expects them (kept as text for a template that writes
 * only text, as functionary's do). */
static toy_status prepare_messages(const toy_chat_template *t, json_t *m) {
    if (!json_is_array(m)) return ty_error(TOY_ERR_INVALID, "messages: expected an array of messages");
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "role")))
            return ty_error(TOY_ERR_INVALID, "messages[%zu]: expected an object with a string role", i);
        for (const char *const *f = sdk_fields; *f; f++) json_object_del(msg, *f);
        size_t k;
        json_t *call;
        json_array_foreach(json_object_get(msg, "tool_calls"), k, call) {
            for (const char *const *f = sdk_fields; *f; f++) json_object_del(call, *f);
            json_t *fn = json_object_get(call, "function");
            if (!json_is_object(fn)) continue;
            for (const char *const *f = sdk_fields; *f; f++) json_object_del(fn, *f);
            json_t *args = json_object_get(fn, "arguments");
            if (!json_is_string(args) || t->text_arguments) continue;
            json_t *parsed = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
            if (parsed) json_object_set_new(fn, "arguments", parsed);
        }
    }
    return TOY_OK;
}

static json_t *load_messages(const toy_chat_template *t, const char *messages_json) {
    json_error_t je;
    json_t *m = json_loads(messages_json, JSON_DECODE_ANY, &je);
    if (!m) {
        ty_error(TOY_ERR_INVALID, "messages: invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    if (prepare_messages(t, m)) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* A message's content as text: a string, text parts joined, or "" for none. */
static toy_status content_text(const json_t *c, size_t i, char **out) {
    if (json_is_string(c)) *out = strdup(json_string_value(c));
    else if (!c || json_is_null(c)) *out = strdup("");
    else if (!json_is_array(c))
        return ty_error(TOY_ERR_INVALID, "messages[%zu].content must be a string or an array of text parts", i);
    else *out = NULL;
    if (!json_is_array(c)) return *out ? TOY_OK : ty_error(TOY_ERR_NOMEM, "no memory");
    size_t k, len = 0;
    json_t *part;
    json_array_foreach(c, k, part) len += json_string_length(json_object_get(part, "text"));
    char *text = malloc(len + 1);
    if (!text) return ty_error(TOY_ERR_NOMEM, "no memory");
    len = 0;
    json_array_foreach(c, k, part) {
        const json_t *s = json_object_get(part, "text");
        if (json_is_string(s)) memcpy(text + len, json_string_value(s), json_string_length(s));
        len += json_string_length(s);
    }
    text[len] = 0;
    *out = text;
    return TOY_OK;
}

/* The turns of prepared messages as tool_prompt.h takes them; the texts in *texts
 * (owned, n of them, freed by the caller either way). */
static toy_status turns_of(const json_t *messages, ty_chat_turn **turns, char ***texts) {
    const size_t n = json_array_size(messages);
    *turns = calloc(n ? n : 1, sizeof **turns);
    *texts = calloc(n ? n : 1, sizeof **texts);
    if (!*turns || !*texts) return ty_error(TOY_ERR_NOMEM, "no memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *msg = json_array_get(messages, i), *calls = json_object_get(msg, "tool_calls");
        const json_t *id = json_object_get(msg, "tool_call_id");
        const toy_status st = content_text(json_object_get(msg, "content"), i, &(*texts)[i]);
        if (st) return st;
        size_t k;
        const json_t *call;
        json_array_foreach(calls, k, call) {
            const json_t *fn = json_object_get(call, "function"), *args = json_object_get(fn, "arguments");
            if (!json_is_string(json_object_get(fn, "name")) || !(json_is_object(args) || json_is_string(args)))
                return ty_error(TOY_ERR_INVALID, "messages[%zu].tool_calls[%zu]: expected {\"function\": {\"name\": "
                                                 "NAME, \"arguments\": {...}}}", i, k);
        }
        (*turns)[i] = (ty_chat_turn){json_string_value(json_object_get(msg, "role")), (*texts)[i],
                                     json_array_size(calls) ? calls : NULL,
                                     json_is_string(id) ? json_string_value(id) : ""};
    }
    return TOY_OK;
}

static void free_texts(char **texts, size_t n) {
    for (size_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
}

/* ---------------------------------------------------------------- rendering */

static json_t *firefunction_kwargs(const json_t *tools, const json_t *kwargs);

/* The Jinja template over prepared messages (borrowed), tools (NULL: None) and kwargs
 * (an object or NULL), within lim (NULL: the defaults). */
static toy_status render_within(const toy_chat_template *t, json_t *messages, const json_t *tools, const json_t *kw,
                                bool add_generation_prompt, const jinja_limits *lim, char **prompt) {
    json_t *vars = json_object();
    if (!vars) return ty_error(TOY_ERR_NOMEM, "no memory");
    json_object_set(vars, "messages", messages);
    json_object_set_new(vars, "tools", tools ? json_incref((json_t *)tools) : json_null());
    json_object_set_new(vars, "documents", json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(add_generation_prompt));
    json_object_set_new(vars, "bos_token", json_string(t->bos));
    json_object_set_new(vars, "eos_token", json_string(t->eos));
    if (kw) {
        static const char *const taken[] = {"messages", "tools", "documents", "add_generation_prompt", NULL};
        for (const char *const *k = taken; *k; k++)
            if (json_object_get(kw, *k)) {
                json_decref(vars);
                return ty_error(TOY_ERR_INVALID, "chat_template_kwargs: '%s' is given by the request itself", *k);
            }
        json_object_update(vars, (json_t *)kw);
    }
    char err[600];
    bool raised = false;
    size_t len;
    const jinja_limits dflt = ty_jinja_default_limits();
    char *text = ty_jinja_render(t->jinja, vars, lim ? lim : &dflt, &len, &raised, err, sizeof err);
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

static toy_status render_jinja(const toy_chat_template *t, json_t *messages, const json_t *tools, const json_t *kw,
                               bool add_generation_prompt, char **prompt) {
    return render_within(t, messages, tools, kw, add_generation_prompt, NULL, prompt);
}

/* A probe of what the template takes, at its creation: a conversation of two messages,
 * which a real template renders in far fewer steps than these limits allow (a hostile
 * one's loop costs a second at most). */
static toy_status render_probe(const toy_chat_template *t, json_t *messages, bool add_generation_prompt,
                               char **prompt) {
    jinja_limits lim = ty_jinja_default_limits();
    lim.max_steps = 1000000;
    lim.max_seconds = 1;
    json_t *kw = t->syntax.tools == TY_TOOLS_FIREFUNCTION ? firefunction_kwargs(NULL, NULL) : NULL;
    const toy_status st = render_within(t, messages, NULL, kw, add_generation_prompt, &lim, prompt);
    json_decref(kw);
    return st;
}

/* A family's prompt, with its tool form. */
static toy_status render_family(const toy_chat_template *t, const json_t *messages, const ty_chat_tools *tools,
                                bool add_generation_prompt, char **prompt) {
    ty_chat_turn *turns = NULL;
    char **texts = NULL;
    toy_status st = turns_of(messages, &turns, &texts);
    if (!st) st = ty_tool_prompt_family(tools, t->family, turns, json_array_size(messages), add_generation_prompt, prompt);
    free_texts(texts, json_array_size(messages));
    free(turns);
    return st;
}

/* Whether the template writes a content given as a list of text parts (or only
 * strings, as most do: theirs are joined). */
static bool takes_content_parts(const toy_chat_template *t) {
    static const char probe[] = "toy-probe-7f3a";
    json_t *m = json_pack("[{s:s, s:[{s:s, s:s}]}]", "role", "user", "content", "type", "text", "text", probe);
    char *prompt = NULL;
    const bool takes = m && !render_probe(t, m, true, &prompt) && strstr(prompt, probe);
    free(prompt);
    json_decref(m);
    return takes;
}

/* The probe conversation of a user message and an assistant's call (content null) of a
 * function with these arguments (taken); *call_fn its "function", *call_msg its message. */
static json_t *call_probe(json_t *arguments, json_t **call_msg, json_t **call_fn) {
    json_t *m = json_pack("[{s:s, s:s}, {s:s, s:n, s:[{s:s, s:s, s:{s:s, s:o}}]}]", "role", "user", "content", "x",
                          "role", "assistant", "content", "tool_calls", "id", "call_1", "type", "function",
                          "function", "name", "toy_probe", "arguments", arguments);
    *call_msg = json_array_get(m, 1);
    *call_fn = json_object_get(json_array_get(json_object_get(*call_msg, "tool_calls"), 0), "function");
    return m;
}

/* Whether the template fails on the probe m but renders it with obj's key set to value
 * (taken). m is freed. */
static bool fails_but_takes(const toy_chat_template *t, json_t *m, json_t *obj, const char *key, json_t *value) {
    char *prompt = NULL;
    bool takes = false;
    if (obj && render_probe(t, m, false, &prompt)) {
        json_object_set(obj, key, value);
        takes = !render_probe(t, m, false, &prompt);
    }
    free(prompt);
    json_decref(value);
    json_decref(m);
    return takes;
}

/* Whether a call's arguments must reach the template as JSON text: it fails on an object
 * but writes text (functionary v3.1 adds them to a string). */
static bool takes_text_arguments(const toy_chat_template *t) {
    json_t *msg, *fn, *m = call_probe(json_pack("{s:s}", "toy_probe_arg", "v"), &msg, &fn);
    return fails_but_takes(t, m, fn, "arguments", json_string("{\"toy_probe_arg\": \"v\"}"));
}

/* Whether the template fails on an assistant's null content beside its calls (as
 * OpenAI's clients send it) but not on "": it then gets "", as llama-server gives it. */
static bool needs_content(const toy_chat_template *t) {
    json_t *msg, *fn, *m = call_probe(t->text_arguments ? json_string("{}") : json_object(), &msg, &fn);
    return fails_but_takes(t, m, msg, "content", json_string(""));
}

/* Whether the template writes a system message (and does not refuse it). */
static bool takes_system_role(const toy_chat_template *t) {
    static const char probe[] = "toy-probe-51c9";
    json_t *m = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", probe, "role", "user", "content", "x");
    char *prompt = NULL;
    const bool takes = m && !render_probe(t, m, true, &prompt) && strstr(prompt, probe);
    free(prompt);
    json_decref(m);
    return takes;
}

/* For a template without a system role, the first message's system text moves to the
 * start of the first user message (as llama-server's --jinja does), apart by a blank
 * line; with no user message it becomes one. */
static toy_status merge_system(json_t *messages) {
    json_t *sys = json_array_get(messages, 0);
    if (!sys || strcmp(json_string_value(json_object_get(sys, "role")), "system")) return TOY_OK;
    json_t *user = NULL;
    for (size_t i = 1; i < json_array_size(messages) && !user; i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(messages, i), "role")), "user"))
            user = json_array_get(messages, i);
    if (!user) return json_object_set_new(sys, "role", json_string("user")) ? ty_error(TOY_ERR_NOMEM, "no memory")
                                                                             : TOY_OK;
    char *text = NULL;
    toy_status st = content_text(json_object_get(sys, "content"), 0, &text);
    if (st) return st;
    json_t *content = json_object_get(user, "content");
    const size_t a = strlen(text), b = json_string_length(content);
    char *both = malloc(a + b + 3);
    if (!both) {
        st = TOY_ERR_NOMEM;
    } else if (json_is_array(content)) { /* text parts: the system text the first */
        snprintf(both, a + 3, "%s\n\n", text);
        if (json_array_insert_new(content, 0, json_pack("{s:s, s:s}", "type", "text", "text", both))) st = TOY_ERR_NOMEM;
    } else {
        snprintf(both, a + b + 3, "%s%s%s", text, a && b ? "\n\n" : "", b ? json_string_value(content) : "");
        if (json_object_set_new(user, "content", json_string(both))) st = TOY_ERR_NOMEM;
    }
    free(both);
    free(text);
    if (!st && json_array_remove(messages, 0)) st = TOY_ERR_NOMEM;
    return st == TOY_ERR_NOMEM ? ty_error(TOY_ERR_NOMEM, "no memory") : st;
}

/* The variables firefunction v2's template reads beside the conversation, as llama.cpp
 * gives them: `functions`, the tools as indented JSON, and `datetime`, now (UTC); kwargs
 * given win. A new reference. */
static json_t *firefunction_kwargs(const json_t *tools, const json_t *kwargs) {
    json_t *kw = kwargs ? json_deep_copy(kwargs) : json_object();
    char *fns = tools && json_array_size(tools) ? json_dumps(tools, JSON_INDENT(2)) : strdup("");
    char now[64];
    const time_t sec = time(NULL);
    struct tm tm;
    strftime(now, sizeof now, "%b %d %Y %H:%M:%S GMT", gmtime_r(&sec, &tm));
    if (kw && fns && !json_object_get(kw, "functions")) json_object_set_new(kw, "functions", json_string(fns));
    if (kw && !json_object_get(kw, "datetime")) json_object_set_new(kw, "datetime", json_string(now));
    free(fns);
    return kw;
}

toy_status ty_chat_prompt(const toy_chat_template *t, json_t *messages, const ty_chat_tools *tools,
                          const json_t *kwargs, bool add_generation_prompt, char **prompt) {
    *prompt = NULL;
    t = ty_chat_template_for(t, tools ? tools->json : NULL);
    toy_status st = prepare_messages(t, messages);
    if (st) return st;
    const bool with_tools = tools && json_array_size(tools->json) > 0;
    if (t->family) {
        if (kwargs && json_object_size(kwargs))
            return ty_error(TOY_ERR_INVALID,
                            "chat_template_kwargs: the chat template is the built-in %s family, which reads no "
                            "variables", t->family);
        return render_family(t, messages, tools, add_generation_prompt, prompt);
    }
    const size_t n = json_array_size(messages);
    ty_chat_turn *turns = NULL;
    char **texts = NULL;
    st = turns_of(messages, &turns, &texts);
    const bool native = t->native_tools;
    json_t *shown = NULL;
    if (!st && !native && ((with_tools && !tools->choice_none) || ty_chat_turns_have_tools(turns, n))) {
        if (!(shown = ty_tool_prompt_generic(tools, turns, n))) st = TOY_ERR_NOMEM;
    } else if (!st) {
        shown = json_deep_copy(messages);
        for (size_t i = 0; shown && i < n; i++)
            if (!t->content_parts && json_is_array(json_object_get(json_array_get(shown, i), "content")))
                json_object_set_new(json_array_get(shown, i), "content", json_string(texts[i]));
        if (!shown) st = ty_error(TOY_ERR_NOMEM, "no memory");
    }
    for (size_t i = 0; !st && t->empty_for_null && i < json_array_size(shown); i++)
        if (json_is_null(json_object_get(json_array_get(shown, i), "content")) &&
            json_object_set_new(json_array_get(shown, i), "content", json_string("")))
            st = ty_error(TOY_ERR_NOMEM, "no memory");
    if (!st && !t->system_role) st = merge_system(shown);
    json_t *kw = t->syntax.tools == TY_TOOLS_FIREFUNCTION
                     ? firefunction_kwargs(with_tools ? tools->json : NULL, kwargs)
                     : json_incref((json_t *)kwargs);
    if (!st && t->syntax.tools == TY_TOOLS_FIREFUNCTION && !kw) st = ty_error(TOY_ERR_NOMEM, "no memory");
    if (!st)
        st = render_jinja(t, shown, native && with_tools ? tools->json : NULL, kw, add_generation_prompt, prompt);
    json_decref(kw);
    json_decref(shown);
    free_texts(texts, n);
    free(turns);
    return st;
}

/* The JSON arguments of the public functions: tools (NULL: none) and kwargs. */
static toy_status load_tools_kwargs(const char *tools_json, const char *kwargs_json, json_t **tools, json_t **kw) {
    *tools = *kw = NULL;
    if (tools_json) {
        *tools = json_loads(tools_json, JSON_DECODE_ANY, NULL);
        if (!*tools || !(json_is_array(*tools) || json_is_null(*tools))) {
            json_decref(*tools);
            *tools = NULL;
            return ty_error(TOY_ERR_INVALID, "tools: expected a JSON array of tools");
        }
    }
    if (kwargs_json) {
        *kw = json_loads(kwargs_json, JSON_DECODE_ANY, NULL);
        if (!json_is_object(*kw)) {
            json_decref(*kw);
            json_decref(*tools);
            *tools = *kw = NULL;
            return ty_error(TOY_ERR_INVALID, "chat_template_kwargs: expected a JSON object");
        }
    }
    return TOY_OK;
}

toy_status toy_chat_template_render(const toy_chat_template *t, const char *messages_json, const char *tools_json,
                                    const char *kwargs_json, bool add_generation_prompt, char **prompt) {
    if (!prompt) return ty_error(TOY_ERR_INVALID, "toy_chat_template_render: prompt is NULL");
    *prompt = NULL;
    if (!t || !messages_json) return ty_error(TOY_ERR_INVALID, "toy_chat_template_render: no template or no messages");
    json_t *tools, *kw;
    toy_status st = load_tools_kwargs(tools_json, kwargs_json, &tools, &kw);
    t = ty_chat_template_for(t, tools);
    json_t *messages = st ? NULL : load_messages(t, messages_json);
    if (!st && !messages) st = TOY_ERR_INVALID;
    if (!st && t->family) {
        const ty_chat_tools shown = {json_is_array(tools) ? tools : NULL, true, false};
        st = render_family(t, messages, &shown, add_generation_prompt, prompt);
    } else if (!st) {
        st = render_jinja(t, messages, json_is_array(tools) ? tools : NULL, kw, add_generation_prompt, prompt);
    }
    json_decref(messages);
    json_decref(tools);
    json_decref(kw);
    return st;
}

toy_status toy_chat_template_prompt(const toy_chat_template *t, const char *messages_json, const char *tools_json,
                                    const char *kwargs_json, bool parallel_tool_calls, char **prompt) {
    if (!prompt) return ty_error(TOY_ERR_INVALID, "toy_chat_template_prompt: prompt is NULL");
    *prompt = NULL;
    if (!t || !messages_json) return ty_error(TOY_ERR_INVALID, "toy_chat_template_prompt: no template or no messages");
    json_t *tools, *kw;
    toy_status st = load_tools_kwargs(tools_json, kwargs_json, &tools, &kw);
    json_error_t je;
    json_t *messages = st ? NULL : json_loads(messages_json, JSON_DECODE_ANY, &je);
    if (!st && !messages)
        st = ty_error(TOY_ERR_INVALID, "messages: invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
    const ty_chat_tools shown = {json_is_array(tools) ? tools : NULL, parallel_tool_calls, false};
    if (!st) st = ty_chat_prompt(t, messages, &shown, kw, true, prompt);
    json_decref(messages);
    json_decref(tools);
    json_decref(kw);
    return st;
}

/* toy_chat_template_parse and _parse_partial (fn: which, for errors) */
static toy_status parse_reply(const toy_chat_template *t, const char *prompt, const char *reply, const char *tools_json,
                              bool reasoning, bool partial, char **message_json, const char *fn) {
    if (!message_json) return ty_error(TOY_ERR_INVALID, "%s: message_json is NULL", fn);
    *message_json = NULL;
    if (!t || !reply) return ty_error(TOY_ERR_INVALID, "%s: no template or no reply", fn);
    json_t *tools = tools_json ? json_loads(tools_json, JSON_DECODE_ANY, NULL) : NULL;
    if (tools_json && !tools) return ty_error(TOY_ERR_INVALID, "tools: invalid JSON");
    size_t n = 0;
    ty_tool_function *fns = tools ? tool_functions(tools, NULL, &n) : NULL;
    const char **names = calloc(n + 1, sizeof *names);
    toy_status st = (tools && !fns) ? TOY_ERR_INVALID : names ? TOY_OK : ty_error(TOY_ERR_NOMEM, "no memory");
    for (size_t i = 0; !st && i < n; i++) names[i] = fns[i].name;
    const ty_chat_syntax syn = ty_chat_template_for(t, tools)->syntax;
    ty_chat_output o = {0};
    if (!st && !ty_chat_output_parse(syn, prompt && ty_chat_prompt_opens_reasoning(syn, prompt, strlen(prompt)),
                                     reasoning, names, n, true, reply, strlen(reply), partial, &o))
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

toy_status toy_chat_template_parse(const toy_chat_template *t, const char *prompt, const char *reply,
                                   const char *tools_json, bool reasoning, char **message_json) {
    return parse_reply(t, prompt, reply, tools_json, reasoning, false, message_json, "toy_chat_template_parse");
}

toy_status toy_chat_template_parse_partial(const toy_chat_template *t, const char *prompt, const char *reply,
                                           const char *tools_json, bool reasoning, char **message_json) {
    return parse_reply(t, prompt, reply, tools_json, reasoning, true, message_json,
                       "toy_chat_template_parse_partial");
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
        const ty_chat_syntax syn = ty_chat_template_for(t, tools)->syntax;
        const ty_prompt_thinking at = ty_chat_prompt_thinking(syn, prompt, prompt ? strlen(prompt) : 0);
        *gbnf = ty_chat_grammar(syn, at, fns, n, parallel, &bad, err, sizeof err);
        if (!*gbnf)
            st = !strcmp(err, "out of memory") ? ty_error(TOY_ERR_NOMEM, "no memory")
                                               : ty_error(TOY_ERR_INVALID, "tools: %s: %s", bad < n ? fns[bad].name : "?", err);
    }
    free(fns);
    json_decref(tools);
    return st;
}
