/* tools.h — OpenAI tool calling for toy serve. A chat request's tools, tool_choice and
 * parallel_tool_calls are checked; its messages (an assistant's tool_calls, tool
 * results) are written into the prompt in the tool syntax of the model's template
 * family; the generated text is parsed back into tool calls, whole or as it streams; and
 * tool_choice "required" or a named function gets a GBNF grammar that forces a call.
 *
 * The syntaxes (docs/server.md, "Tool calling"):
 *   chatml        Hermes 2 Pro / Qwen 2.5: tools in the system message inside <tools>,
 *                 calls <tool_call>\n{"name": N, "arguments": A}\n</tool_call>, results
 *                 <tool_response>\nR\n</tool_response> in a user turn
 *   llama3        Llama 3.1 / 3.2: "Environment: ipython" and the tools as JSON in the
 *                 system message, calls {"name": N, "parameters": A}, results in the
 *                 ipython role
 *   mistral-*     [AVAILABLE_TOOLS][...][/AVAILABLE_TOOLS] before the last user turn,
 *                 calls [TOOL_CALLS][{"name": N, "arguments": A}],
 *                 results [TOOL_RESULTS]{"content": R, "call_id": I}[/TOOL_RESULTS]
 *   any other     toy's generic form: the tools as JSON in the system message with an
 *                 instruction, calls {"tool_calls": [{"name": N, "arguments": A}]},
 *                 results {"tool_results": [{"tool_call_id": I, "content": R}]} as a
 *                 user message */
#ifndef TOY_SERVER_TOOLS_H
#define TOY_SERVER_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tool_calls.h"

/* The renderer's form for a built-in chat template family (toy_chat_template_detect's
 * names). */
typedef enum { TOOLS_HERMES, TOOLS_LLAMA3, TOOLS_MISTRAL, TOOLS_GENERIC } tools_syntax;
tools_syntax tools_syntax_of(const char *family);

typedef enum { TOOL_CHOICE_AUTO, TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_NAMED } tool_choice;

typedef struct {
    const char *name;         /* [a-zA-Z0-9_-]{1,64} */
    const char *description;  /* NULL if none */
    const json_t *parameters; /* a JSON Schema object ({"type": "object", "properties": {}}
                               * when not given) */
    bool strict;              /* "strict": true (the schema's own keys only) */
} tool_function;

/* A request's tools. Strings and schemas point into `json`, the tools as the prompt
 * shows them: [{"type": "function", "function": {"name", "description", "parameters"}}]. */
typedef struct {
    json_t *json;
    tool_function *functions;
    size_t n_functions; /* 0: the request has no tools */
    tool_choice choice; /* "auto" unless the request says otherwise */
    size_t named;       /* TOOL_CHOICE_NAMED: the function's index */
    bool parallel;      /* parallel_tool_calls: more than one call per answer */
    ty_chat_syntax syntax; /* how the model writes its calls (the parser's and the grammar's) */
    const char *family;    /* a built-in template family (a static name), NULL for Jinja */
} tools_request;

/* A failure: the HTTP status (400, or 500 for no memory), the field at fault and a
 * message naming it ("tools[2].function.name ..."). */
typedef struct {
    int status;
    char param[32];
    char message[448];
} tools_error;

/* tools, tool_choice and parallel_tool_calls of a chat request's body. With no tools
 * (absent, null or []), tool_choice may only be absent, null, "none" or "auto". false
 * with *err set; *t needs tools_request_free either way. */
bool tools_request_parse(const json_t *body, const char *family, ty_chat_syntax syntax, tools_request *t,
                         tools_error *err);
void tools_request_free(tools_request *t);

/* Whether the answers are parsed for calls: the request has tools and tool_choice is
 * not "none" (as llama-server). */
bool tools_parse_calls(const tools_request *t);

/* A chat message as the renderer takes it (role "system", "user", "assistant" or
 * "tool"; strings owned by the caller). */
typedef struct {
    const char *role;
    const char *content;       /* "" when the message has none */
    const json_t *tool_calls;  /* an assistant's calls, checked by tools_message_check */
    const char *tool_call_id;  /* a tool message's */
} tools_message;

/* An assistant's tool_calls ([{"id", "type": "function", "function": {"name",
 * "arguments": a JSON object's text}}]) or a tool message's tool_call_id, as message i
 * of role `role` holds them; *calls and *call_id point into msg (NULL if absent).
 * false with *err set, naming messages[i]. */
bool tools_message_check(const json_t *msg, size_t i, const char *role, const json_t **calls,
                         const char **call_id, tools_error *err);

/* The prompt of the conversation in the family's template with its tool syntax: the
 * tools (t may be NULL, and is not written with tool_choice "none" in the generic
 * form), the calls and the results. Without tools and tool messages it is exactly
 * toy_chat_apply's prompt. *prompt is malloc'd; false with *err set. */
bool tools_render(const tools_request *t, const char *family, const tools_message *m, size_t n,
                  bool add_assistant, char **prompt, tools_error *err);

/* Whether the messages hold calls or tool results. */
bool tools_messages_have_tools(const tools_message *m, size_t n);
/* The conversation in the generic form (the tools in the system message, calls and
 * results as text) as messages for a Jinja template that writes no tools of its own:
 * [{"role", "content"}, ...]. NULL with *err set. */
json_t *tools_generic_messages(const tools_request *t, const tools_message *m, size_t n, tools_error *err);

/* ---------------------------------------------------------------- forcing */

/* With tool_choice "required" (any function) or a named one, a GBNF grammar (start
 * rule root) whose language is the calls in the request's syntax (tool_calls.h's
 * ty_chat_grammar: one or more calls with parallel, else one; a thinking block first
 * where the model thinks, opened already when starts_in_reasoning), each call's
 * arguments matching its function's parameters; NULL for "auto" and "none". false with
 * *err set (a schema the grammar cannot express, naming tools[i].function.parameters). */
bool tools_grammar(const tools_request *t, bool starts_in_reasoning, char **gbnf, tools_error *err);

#endif
