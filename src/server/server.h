/* server.h — toy serve: the OpenAI HTTP API over the engine (engine.h), on
 * libmicrohttpd with a thread per connection; the checks on a request's headers are
 * gate.h's, on its body openai.h's. */
#ifndef TOY_SERVER_H
#define TOY_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *model_path;
    const char *host;    /* default 127.0.0.1 */
    int port;            /* 0: any free port (the log line says which) */
    int n_parallel;
    int32_t n_ctx;       /* per slot; 0: the model's training context, at most 4096 */
    int n_threads;
    const char *api_key; /* NULL: none */
    int cache_type_k, cache_type_v;
    toy_attn attn;       /* TOY_ATTN_FUSED or TOY_ATTN_PLAIN */
    int timeout_s;       /* an idle connection is closed after this (0: never) */
    size_t max_body;     /* bytes of a request body, at most */
    int queue_max;       /* choices waiting for a slot, at most */
    int max_connections; /* open connections; more are answered 503 */
    const char *const *cors_origins; /* origins whose pages may call the API */
    int n_cors_origins;
    const char *const *host_aliases; /* names besides localhost the Host header may give */
    int n_host_aliases;
    int shutdown_grace_s; /* on SIGTERM, seconds for the requests in flight to finish */
    int watchdog_s;      /* /health is 503 when the engine makes no progress this long with work (0: never) */
    const char *const *lora_paths; /* LoRA adapters applied to every request */
    const float *lora_scales;
    int n_lora;
    bool no_mmap;        /* read the model into memory instead of mapping it */
    /* the chat template, opened once the model is loaded (NULL: after its own message the
     * server does not start), and the chat_template_kwargs of requests that give none
     * (a JSON object's text, or NULL) */
    toy_chat_template *(*open_chat_template)(void *user, const toy_model *model);
    void *open_chat_template_user;
    const char *chat_template_kwargs;
    int pooling;         /* toy_pooling of /v1/embeddings; TOY_POOLING_UNSPECIFIED: the model's
                          * pooling_type, or mean when it has none */
    /* the engine's trace (toy_trace_fn; NULL: none), and trace_model, called with the model
     * once it is loaded (false: do not start, after its own message) */
    toy_trace_fn trace;
    void *trace_user;
    bool (*trace_model)(void *trace_user, const toy_model *model);
} ty_server_params;

/* Serves until *stop becomes non-zero; then answers new requests 503, gives those in
 * flight shutdown_grace_s seconds (or until *stop reaches 2), ends the rest with an error
 * and returns 0. 1 after a message on stderr if it cannot start. Logs one line a request
 * to stderr. */
int ty_server_run(const ty_server_params *p, const volatile sig_atomic_t *stop);

#endif
