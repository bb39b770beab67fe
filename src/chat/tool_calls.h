/* tool_calls.h — each model family's output syntax for tool calls and reasoning
 * ("thinking") (internal): which syntax a chat template's model writes (from marker
 * strings in its Jinja text, as llama.cpp's common/chat.cpp detects them), the parsing
 * of a model's output into reasoning, content and calls (whole, or partial while it
 * streams), and the GBNF grammar that forces a call.
 *
 * The output of a model is read as: an optional thinking block where the answer begins,
 * then content text with call blocks in it. The parts are:
 *
 *   reasoning  the thinking block's text, white space trimmed at both ends (llama.cpp
 *              strips it the same way), NULL when empty;
 *   content    the text outside the thinking block and the calls: each run of text
 *              between calls trimmed at both ends, the non-empty runs joined by "\n";
 *              NULL when empty. Markers that only frame content (Command R7B's
 *              <|START_RESPONSE|>, Granite's <response>, functionary v3.2's ">>>all\n")
 *              are dropped;
 *   calls      the calls of declared functions, arguments as compact JSON text: the
 *              model's own JSON with the white space between tokens removed (numbers,
 *              escapes and key order kept as written). The XML formats (Qwen3-Coder,
 *              Seed-OSS) get an object of their parameters in order: a value that reads
 *              as JSON stays JSON (3, true, {"a": 1}, "quoted"), any other is a string,
 *              as llama.cpp reads them (so a string parameter written 42 arrives as the
 *              number 42); GLM's and MiniMax's the same; one newline at either end of a value is the template's layout
 *              and is dropped; a parameter named twice makes the call content.
 *
 * A block that is not a call of a declared function with a JSON object for arguments,
 * or whose syntax is broken, stays in the content as written. A block holding several
 * calls (a JSON array, DeepSeek's and Kimi's sections) is all calls or all content.
 *
 * Streaming: a partial parse returns only what no later text can change. It holds back
 * an incomplete UTF-8 character at the end, a suffix that may be the beginning of a
 * marker, trailing white space (the final texts are trimmed) and everything from the
 * start of a block whose fate is still open; calls are returned once their block is
 * complete. The reasoning and content of successive partial parses of a growing text are
 * prefixes of each other and of the final parse's, and their calls a prefix of its
 * calls, so a server sends the differences as stream deltas. */
#ifndef TOY_TOOL_CALLS_H
#define TOY_TOOL_CALLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* How a model writes its calls (N the function's name, A its arguments' JSON object). */
typedef enum {
    TY_TOOLS_GENERIC,         /* toy's own form for models without one, at the start of the answer:
                               * {"tool_calls": [{"name": N, "arguments": A}, ...]} or {"tool_call": {...}} */
    TY_TOOLS_HERMES,          /* Hermes 2 Pro, Qwen 2.5, QwQ, Qwen 3: <tool_call>\n{"name": N, "arguments": A}\n</tool_call> */
    TY_TOOLS_QWEN3_CODER,     /* <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call> */
    TY_TOOLS_LLAMA3,          /* Llama 3.x, at the start of the answer: {"name": N, "parameters": A} ("arguments" too),
                               * several apart by white space or ";"; <|python_tag|> before one, or before raw code
                               * for the function "python" */
    TY_TOOLS_MISTRAL_NEMO,    /* [TOOL_CALLS][{"name": N, "arguments": A, "id": I}, ...] */
    TY_TOOLS_MISTRAL_SMALL,   /* Mistral Small 3.2, Devstral: [TOOL_CALLS]N[ARGS]A, or [TOOL_CALLS]N[CALL_ID]I[ARGS]A */
    TY_TOOLS_DEEPSEEK_R1,     /* <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\nA\n```
                               * <｜tool▁call▁end｜>...<｜tool▁calls▁end｜> */
    TY_TOOLS_DEEPSEEK_V31,    /* <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>N<｜tool▁sep｜>A<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> */
    TY_TOOLS_COMMAND_R,       /* Command R(+) tool_use: Action: ```json\n[{"tool_name": N, "parameters": A}, ...]\n``` */
    TY_TOOLS_COMMAND_R7B,     /* <|START_ACTION|>[{"tool_call_id": "0", "tool_name": N, "parameters": A}, ...]<|END_ACTION|> */
    TY_TOOLS_FUNCTIONARY_V31, /* <function=N>A</function>, and <|python_tag|> before raw code for "python" */
    TY_TOOLS_FUNCTIONARY_V32, /* N\nA>>>N2\nA2 (the prompt ends with ">>>"); "all\n" before text; raw code for "python" */
    TY_TOOLS_FIREFUNCTION,    /* functools[{"name": N, "arguments": A}, ...] */
    TY_TOOLS_GRANITE,         /* <|tool_call|>[{"name": N, "arguments": A}, ...] */
    TY_TOOLS_GPT_OSS,         /* harmony messages: <|channel|>commentary to=functions.N <|constrain|>json<|message|>A;
                               * the reasoning in <|channel|>analysis<|message|>...<|end|>, the answer in
                               * <|start|>assistant<|channel|>final<|message|>... */
    TY_TOOLS_KIMI_K2,         /* <|tool_calls_section_begin|><|tool_call_begin|>functions.N:0<|tool_call_argument_begin|>A
                               * <|tool_call_end|>...<|tool_calls_section_end|> (the call's id: "functions.N:0") */
    TY_TOOLS_SEED_OSS,        /* <seed:tool_call>\n<function=N>\n<parameter=K>V</parameter>\n</function>\n</seed:tool_call> */
    TY_TOOLS_NEMOTRON_V2,     /* NVIDIA Nemotron Nano v2: <TOOLCALL>[{"name": N, "arguments": A}, ...]</TOOLCALL> */
    TY_TOOLS_APRIEL,          /* ServiceNow Apriel 1.5, 1.6: <tool_calls>[{"name": N, "arguments": A}, ...]</tool_calls> */
    TY_TOOLS_GLM,             /* GLM 4.5, 4.6: <tool_call>N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call> */
    TY_TOOLS_MINIMAX_M2,      /* <minimax:tool_call>\n<invoke name="N">\n<parameter name="K">V</parameter>\n</invoke>\n
                               * </minimax:tool_call> (several invokes in one block) */
} ty_tool_format;
#define TY_TOOLS_N_FORMATS (TY_TOOLS_MINIMAX_M2 + 1)

/* How a model writes its thinking. */
typedef enum {
    TY_REASONING_NONE,
    TY_REASONING_THINK,       /* <think>...</think> (DeepSeek R1, QwQ, Qwen 3, Kimi K2 Thinking, ...) */
    TY_REASONING_SEED,        /* <seed:think>...</seed:think> */
    TY_REASONING_GPT_OSS,     /* harmony's analysis channel (read with TY_TOOLS_GPT_OSS's messages) */
    TY_REASONING_COMMAND_R7B, /* <|START_THINKING|>...<|END_THINKING|> */
} ty_reasoning_format;
#define TY_REASONING_N_FORMATS (TY_REASONING_COMMAND_R7B + 1)

typedef struct {
    ty_tool_format tools;
    ty_reasoning_format reasoning;
} ty_chat_syntax;

/* The syntax of the model whose chat template (Jinja text) this is: GENERIC and NONE
 * when no family's markers are in it (also for NULL). */
ty_chat_syntax ty_chat_syntax_of(const char *template_text);

/* The syntax of a chat template's model (toy.h's toy_chat_template): detected from a
 * Jinja template's text, and for a built-in family the forms toy serve writes. */
typedef struct toy_chat_template toy_chat_template;
ty_chat_syntax ty_chat_template_syntax(const toy_chat_template *t);

/* Names for logs and docs: "hermes", "llama3", "deepseek-r1", ...; "think", "seed", ... */
const char *ty_tool_format_name(ty_tool_format f);
const char *ty_reasoning_format_name(ty_reasoning_format r);

/* Where a rendered prompt leaves the model's thinking: inside an open thinking block when
 * it ends (white space aside) with the syntax's opening marker, as the generation prompts
 * of the DeepSeek R1 distills and QwQ ("<think>\n"), DeepSeek V3.1 with thinking
 * ("<think>") and Command R7B may; done with when it ends with the closing marker, as
 * Qwen 3's does with enable_thinking false ("<think>\n\n</think>\n\n"); else free to
 * think or not. */
typedef enum { TY_THINK_MAY_OPEN, TY_THINK_OPEN, TY_THINK_CLOSED } ty_prompt_thinking;
ty_prompt_thinking ty_chat_prompt_thinking(ty_chat_syntax syn, const char *prompt, size_t len);
/* Whether it is TY_THINK_OPEN: the answer is then parsed with starts_in_reasoning. */
bool ty_chat_prompt_opens_reasoning(ty_chat_syntax syn, const char *prompt, size_t len);

typedef struct {
    char *name;
    char *arguments; /* a JSON object's text, compact */
    char *id;        /* the call's id where the format writes one (Mistral's, Command R7B's
                      * tool_call_id, Kimi's "functions.N:0"), else NULL */
} ty_tool_call;

typedef struct {
    char *reasoning;
    char *content;
    ty_tool_call *calls;
    size_t n_calls;
} ty_chat_output;

/* Parses a model's output text[0, len) (see the top of this file).
 * - starts_in_reasoning: the prompt opened the thinking block (ty_chat_prompt_opens_
 *   reasoning), so the text begins inside it, up to its closing marker (all of it when
 *   there is none). An opening marker repeated at the very start is skipped.
 * - reasoning: false keeps the thinking block in the content as written, markers and all
 *   (the API's reasoning_format "none"); calls are still looked for after it only.
 * - fns[0, n_fns): the names of the declared functions; with none, no calls are parsed.
 * - parallel: every call is returned; else only the first (later ones are dropped, not
 *   made content).
 * - partial: the text is still streaming.
 * false: no memory (*out is then empty). */
bool ty_chat_output_parse(ty_chat_syntax syn, bool starts_in_reasoning, bool reasoning, const char *const *fns,
                          size_t n_fns, bool parallel, const char *text, size_t len, bool partial,
                          ty_chat_output *out);
void ty_chat_output_free(ty_chat_output *o);

/* A new call id for a call the model gave none: "call_" and 24 random letters and
 * digits, or 9 of them alone for the Mistral formats, whose templates take no other.
 * out holds 32 bytes. */
void ty_tool_call_id(char out[32], ty_tool_format format);

/* The calls of a parsed answer from `first` on as OpenAI gives them: [{"id", "type":
 * "function", "function": {"name", "arguments"}}] ("index" in each with with_index, for a
 * stream's delta); the id the model wrote, else a new one. NULL: no memory. */
json_t *ty_tool_calls_json(const ty_chat_output *o, size_t first, bool with_index, ty_tool_format format);

/* ---------------------------------------------------------------- forcing */

/* The most calls a forced answer may hold with parallel calls: a bound, so that a model
 * which never prefers to stop still ends. */
#define TY_TOOL_CALLS_MAX 8

/* A function a forced answer may call. */
typedef struct {
    const char *name;          /* [a-zA-Z0-9_-]+ */
    const json_t *parameters;  /* its JSON Schema (an object with "properties") */
    bool strict;               /* a schema keyword the grammar cannot express is an error */
} ty_tool_function;

/* The GBNF grammar (start rule "root") whose language is an answer of calls in the
 * syntax: one call of one of fns[0, n), or with parallel 1 to TY_TOOL_CALLS_MAX of them,
 * each call's arguments matching its function's parameters. When the syntax thinks
 * (THINK, SEED, COMMAND_R7B, GPT_OSS) a thinking block may come first (TY_THINK_MAY_OPEN);
 * with TY_THINK_OPEN the text begins inside it and must close it before the calls; with
 * TY_THINK_CLOSED the calls come at once.
 * Arguments are JSON (the schema's grammar, ty_json_schema_gbnf) except for the XML
 * formats (Qwen3-Coder, Seed-OSS), which write each property as a parameter: its raw
 * text when the property is a string (an enum's values for an enum of strings), its JSON
 * otherwise, the required ones in the schema's order, the others optional. gpt-oss gets
 * one call even with parallel: its call ends the turn (<|call|> is a stop token).
 * Malloc'd; NULL on failure with err set ("out of memory", or the schema's error for
 * fns[*bad], bad may be NULL). */
char *ty_chat_grammar(ty_chat_syntax syn, ty_prompt_thinking thinking, const ty_tool_function *fns, size_t n,
                      bool parallel, size_t *bad, char *err, size_t err_size);

#endif
