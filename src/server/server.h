/* server.h — toy serve: the OpenAI HTTP API over the engine (engine.h), on
 * libmicrohttpd with a thread per connection. */
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
    int timeout_s;       /* an idle connection is closed after this (0: never) */
    size_t max_body;     /* bytes of a request body, at most */
    int queue_max;       /* choices waiting for a slot, at most */
    const char *const *lora_paths; /* LoRA adapters applied to every request */
    const float *lora_scales;
    int n_lora;
    bool no_mmap;        /* read the model into memory instead of mapping it */
} toy_server_params;

/* Serves until *stop becomes true, then stops accepting, finishes the requests in flight
 * and returns 0; 1 after a message on stderr if it cannot start. Logs one line a
 * request to stderr. */
int toy_server_run(const toy_server_params *p, const volatile sig_atomic_t *stop);

#endif
