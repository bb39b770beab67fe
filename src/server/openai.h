/* openai.h — the OpenAI API's requests and responses as toy serve speaks them: a
 * request's JSON checked field by field and turned into engine parameters, and the
 * completion, chat completion and streaming chunk objects built from engine events. */
#ifndef TOY_SERVER_OPENAI_H
#define TOY_SERVER_OPENAI_H

#include <jansson.h>
#include <stdbool.h>

#include "engine.h"
#include "tool_requests.h"

typedef struct {
    int status;       /* HTTP status: 400, 404, ...; 0: no error */
    char message[512];
    char param[64];   /* the field at fault, "" if none */
    const char *type; /* "invalid_request_error" (4xx) or "server_error" (5xx) */
} oai_error;

/* Sets an error (the type from the status) and returns false. */
bool oai_fail(oai_error *err, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef struct {
    bool chat;
    srv_params gen;
    bool stream, include_usage;
    bool logprobs; /* chat: logprobs true; completions: logprobs N given */
    char grammar_param[32]; /* the field the grammar came from, for messages */
    tools_request tools; /* chat: its tools (owned: tools_request_free, also after submitting) */
    /* chat: how the answers are read (tool_calls.h): parsed for the tools' calls and for
     * reasoning kept apart (reasoning_format not "none") where the model thinks */
    bool parse_output;
    bool reasoning;
    ty_prompt_thinking thinking; /* where the prompt left the model's thinking (open: the answer starts in it) */
    const char **fn_names;    /* the declared functions' names, for the parser */
} oai_request;

typedef struct {
    const char *model_id;     /* what clients name the model */
    const toy_vocab *vocab;
    const toy_chat_template *chat_template; /* the model's own (Jinja), or a built-in family */
    const char *chat_family;  /* that family, NULL for a Jinja template */
    const json_t *chat_template_kwargs; /* of requests that give none (an object), or NULL */
    int32_t n_ctx;            /* per slot */
    size_t max_text_bytes;    /* the longest text that is tokenized (oai_max_text_bytes) */
    uint64_t seed;            /* for requests that give none */
} oai_context;

/* The longest text that can become a prompt of n_ctx tokens: n_ctx times the longest
 * token's text (at least 4 bytes, one UTF-8 character). A token stands for at most its
 * own text's bytes (SPM's U+2581 and byte tokens are longer than the byte they stand
 * for, BPE's byte-level characters as long or longer), so a longer text would need
 * more tokens than the context holds, and is refused before the tokenizer runs. */
size_t oai_max_text_bytes(const toy_vocab *v, int32_t n_ctx);

/* A request's body as a JSON object, or NULL with *err set (invalid JSON, not an object). */
json_t *oai_load_object(const char *body, size_t len, oai_error *err);
/* Whether the request's "model", where it names one, is this server's; false with *err
 * set otherwise. */
bool oai_check_model(const oai_context *c, const json_t *j, oai_error *err);

/* Parses and checks a completion request's body: every field's type and range, the
 * prompt templated and tokenized within the context. false with *err set otherwise.
 * The caller owns the prompt and stops in out->gen until it submits them. */
bool oai_parse(const oai_context *c, const char *body, size_t len, bool chat, oai_request *out,
               oai_error *err);
void oai_request_free(oai_request *r);
/* What the answer side keeps of a submitted request (its tools, the functions' names),
 * freed once the answer is out. */
void oai_request_answer_free(oai_request *r);

/* POST /apply-template (llama-server's): a chat request's messages, tools and
 * chat_template_kwargs (add_generation_prompt true unless it says otherwise) as the
 * template writes them, {"prompt": TEXT}; NULL with *err set. */
char *oai_apply_template(const oai_context *c, const char *body, size_t len, oai_error *err);

/* POST /tokenize ({"content", "add_special", "parse_special"}) and /detokenize
 * ({"tokens"}): the response body (malloc'd), or NULL with *err set. */
char *oai_tokenize(const oai_context *c, const char *body, size_t len, oai_error *err);
char *oai_detokenize(const oai_context *c, const char *body, size_t len, oai_error *err);

/* {"error": {"message", "type", "param", "code"}} as text (malloc'd). */
char *oai_error_json(const oai_error *err);
/* The same as a server-sent event named "error", for a stream that has begun. */
char *oai_error_sse(const oai_error *err);

/* The pieces of a response: per choice, the text so far and, with logprobs, one entry
 * per token. */
typedef struct {
    char *text;
    size_t len, cap;
    json_t *logprobs; /* array of entries (chat) or NULL */
    json_t *lp_tokens, *lp_token_logprobs, *lp_top, *lp_offsets; /* completions */
    const char *finish_reason;
    json_t *tool_calls; /* the calls parsed from the text (which is then the rest), or NULL */
    char *reasoning;    /* the reasoning parsed from it, or NULL */
} oai_choice;

/* One token's log-probability entry, in the chat format ({"token", "logprob", "bytes",
 * "top_logprobs"}). */
json_t *oai_token_logprob(const toy_vocab *v, const srv_event *ev);
/* Adds an event to a choice being collected (non-streaming); false: no memory. */
bool oai_choice_add(const toy_vocab *v, bool chat, bool logprobs, oai_choice *c, const srv_event *ev);
void oai_choice_free(oai_choice *c);
/* A whole choice's text parsed (req->parse_output): its reasoning apart, the calls of
 * the request's tools (finish_reason "tool_calls" when there are any), the content the
 * rest (null when none is left). false: no memory. */
bool oai_choice_parse(const oai_request *req, oai_choice *c);
/* The whole response object (malloc'd text); its usage has the prompt tokens that came
 * from the cache as prompt_tokens_details.cached_tokens. */
char *oai_response_json(const oai_context *c, bool chat, const char *id, long created, oai_choice *choices,
                        int n, int32_t prompt_tokens, int32_t completion_tokens, int32_t cached_tokens);
/* A streaming chunk for one event ("data: ...\n\n", malloc'd); first: the choice's
 * first chunk (chat sends the role then). */
char *oai_chunk_sse(const oai_context *c, bool chat, bool logprobs, const char *id, long created,
                    const srv_event *ev, bool first);
/* A stream of a chat whose answers are parsed, per choice: the text so far, and how much
 * of its reasoning, content and calls was sent. */
typedef struct {
    char *text;
    size_t len, cap;
    size_t sent_reasoning, sent_content, sent_calls;
} oai_parsed_stream;
/* The chunks for one event of such a stream (zero or more, "" for none, malloc'd; NULL:
 * no memory): what a partial parse of the text so far adds to the reasoning
 * (delta.reasoning_content), the content and the calls (delta.tool_calls, each whole);
 * at the choice's end the rest by the final parse, and finish_reason "tool_calls" when
 * there were calls. */
char *oai_parsed_chunks_sse(const oai_context *c, const oai_request *req, oai_parsed_stream *ps, const char *id,
                            long created, const srv_event *ev, bool first);
/* The last chunk with the usage and no choices. */
char *oai_usage_chunk_sse(const oai_context *c, bool chat, const char *id, long created,
                          int32_t prompt_tokens, int32_t completion_tokens, int32_t cached_tokens);

/* JSON text of a valid UTF-8 string from any bytes (invalid sequences become U+FFFD);
 * NULL when there is no memory (whatever holds it then fails as a whole). */
json_t *oai_json_text(const char *s, size_t len);

#endif
