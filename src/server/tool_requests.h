/* tool_requests.h — OpenAI tool calling for toy serve: a chat request's tools, tool_choice and
 * parallel_tool_calls are checked, and so are its messages' calls and tool results; a
 * named or required tool_choice gets a GBNF grammar that forces a call. The prompt's
 * forms are src/chat/tool_prompt.h's (and the model's own template's); the parser of
 * the answers is src/chat/tool_calls.h. */
#ifndef TOY_SERVER_TOOL_REQUESTS_H
#define TOY_SERVER_TOOL_REQUESTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tool_calls.h"
#include "tool_prompt.h"

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
bool tools_request_parse(const json_t *body, ty_chat_syntax syntax, tools_request *t, tools_error *err);
void tools_request_free(tools_request *t);

/* Whether the answers are parsed for calls: the request has tools and tool_choice is
 * not "none" (as llama-server). */
bool tools_parse_calls(const tools_request *t);

/* An assistant's tool_calls ([{"id", "type": "function", "function": {"name",
 * "arguments": a JSON object's text}}]) or a tool message's tool_call_id, as message i
 * of role `role` holds them; *calls and *call_id point into msg (NULL if absent).
 * false with *err set, naming messages[i]. */
bool tools_message_check(const json_t *msg, size_t i, const char *role, const json_t **calls,
                         const char **call_id, tools_error *err);

/* ---------------------------------------------------------------- forcing */

/* With tool_choice "required" (any function) or a named one, a GBNF grammar (start
 * rule root) whose language is the calls in the request's syntax (tool_calls.h's
 * ty_chat_grammar: one or more calls with parallel, else one; a thinking block first
 * where the model thinks unless the prompt closed it, opened already where it opened it), each call's
 * arguments matching its function's parameters; NULL for "auto" and "none". false with
 * *err set (a schema the grammar cannot express, naming tools[i].function.parameters). */
bool tools_grammar(const tools_request *t, ty_prompt_thinking thinking, char **gbnf, tools_error *err);

#endif
