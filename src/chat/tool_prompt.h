/* tool_prompt.h — a conversation with tools written in toy's own forms: the built-in
 * template families' tool syntaxes, and the generic form for a Jinja template that writes
 * no tools of its own. The forms (docs/chat-templates.md, "Tools"):
 *   chatml        Hermes 2 Pro / Qwen 2.5: tools in the system message inside <tools>,
 *                 calls <tool_call>\n{"name": N, "arguments": A}\n</tool_call>, results
 *                 <tool_response>\nR\n</tool_response> in a user turn
 *   llama3        Llama 3.1 / 3.2: "Environment: ipython" and the tools as JSON in the
 *                 system message, calls {"name": N, "parameters": A}, results in the
 *                 ipython role
 *   mistral-*     [AVAILABLE_TOOLS][...][/AVAILABLE_TOOLS] before the last user turn,
 *                 calls [TOOL_CALLS][{"name": N, "arguments": A}],
 *                 results [TOOL_RESULTS]{"content": R, "call_id": I}[/TOOL_RESULTS]
 *   any other     the generic form: the tools as JSON in the system message with an
 *                 instruction, calls {"tool_calls": [{"name": N, "arguments": A}]},
 *                 results {"tool_results": [{"tool_call_id": I, "content": R}]} as a
 *                 user message */
#ifndef TOY_CHAT_TOOL_PROMPT_H
#define TOY_CHAT_TOOL_PROMPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "toy.h"

/* A message as the forms take it: role system, user, assistant or tool; content "" when
 * it has none; an assistant's tool_calls ([{"id", "function": {"name", "arguments": an
 * object or its text}}], NULL if none); a tool message's tool_call_id ("" if none). */
typedef struct {
    const char *role;
    const char *content;
    const json_t *tool_calls;
    const char *tool_call_id;
} ty_chat_turn;

/* The tools shown: [{"type": "function", "function": {"name", "description",
 * "parameters"}}] (json NULL or empty: none); parallel: calls may be several; choice_none:
 * tool_choice "none" (the generic form then leaves the tools out). */
typedef struct {
    const json_t *json;
    bool parallel;
    bool choice_none;
} ty_chat_tools;

/* Whether the messages hold calls or tool results. */
bool ty_chat_turns_have_tools(const ty_chat_turn *m, size_t n);

/* The prompt of the conversation in a built-in family's template (toy_chat_template_detect's
 * names) with its tool form (t may be NULL). Without tools and tool messages it is exactly
 * toy_chat_apply's prompt. *prompt is malloc'd; an error is recorded. */
toy_status ty_tool_prompt_family(const ty_chat_tools *t, const char *family, const ty_chat_turn *m, size_t n,
                                 bool add_assistant, char **prompt);

/* The conversation in the generic form as messages for a Jinja template that writes no
 * tools: [{"role", "content"}, ...]. NULL with the error recorded (no memory). */
json_t *ty_tool_prompt_generic(const ty_chat_tools *t, const ty_chat_turn *m, size_t n);

/* A model's template for requests with tools (tokenizer.chat_template.tool_use, owned by
 * t from now on; toy_model_chat_template sets it), and the template a request with the
 * tools array `tools` (NULL: none) is rendered and read with: that variant when tools has
 * any, else t, as transformers and llama.cpp choose. */
void ty_chat_template_set_tool_use(toy_chat_template *t, toy_chat_template *tool_use);
const toy_chat_template *ty_chat_template_for(const toy_chat_template *t, const json_t *tools);

/* toy_chat_template_prompt over JSON in memory: messages (an array, normalized in place:
 * the SDKs' fields dropped, call arguments parsed), tools (NULL: none) and kwargs (an
 * object or NULL); add_generation_prompt as the caller asks. */
toy_status ty_chat_prompt(const toy_chat_template *t, json_t *messages, const ty_chat_tools *tools,
                          const json_t *kwargs, bool add_generation_prompt, char **prompt);

#endif
