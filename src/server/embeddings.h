/* embeddings.h — the JSON of POST /v1/embeddings (and /embeddings) as llama-server
 * --embeddings answers it: OpenAI's request checked field by field, and the list of
 * vectors, as JSON numbers or base64 of little-endian float32. server.c runs each input
 * as an embedding job of the engine (engine.h: pooled final-norm states,
 * L2-normalised). */
#ifndef TOY_SERVER_EMBEDDINGS_H
#define TOY_SERVER_EMBEDDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openai.h"

/* OpenAI's limit on the inputs of one request */
#define EMB_MAX_INPUTS 2048

typedef struct {
    const oai_context *oai; /* the model's id, vocabulary, a slot's context */
    int32_t n_embd;
    toy_pooling pooling;    /* MEAN, CLS or LAST; another is refused */
    int window;             /* a request's inputs queued or running at once, at most (server.c) */
} emb_context;

typedef struct {
    int32_t **tokens;  /* per input: its tokens (malloc'd; NULL once handed to the engine) */
    int32_t *n_tokens; /* per input: 1..n_ctx */
    size_t n_inputs;
    bool base64;       /* encoding_format "base64" */
} emb_request;

/* Checks a request's body: input (a string, an array of strings, an array of token ids,
 * or an array of arrays of token ids; strings tokenized as llama-server does, BOS/EOS as
 * the vocabulary says and special-token text parsed), model, encoding_format, dimensions
 * (n_embd only), user; any other field is refused. An input of no tokens, or of more
 * than a slot's context, is refused naming input[i]; every request is when c->pooling
 * gives no one vector per input. false with *err set otherwise. */
bool emb_parse(const emb_context *c, const char *body, size_t len, emb_request *out, oai_error *err);
void emb_request_free(emb_request *r);

/* The response: one vector of c->n_embd floats per input (vectors[i * n_embd ...]), as
 * JSON numbers (9 digits, the same float32 read back) or base64 of their little-endian
 * bytes, and the usage. NULL with *err set when a vector is not finite or there is no
 * memory. */
char *emb_response_json(const emb_context *c, const emb_request *r, const float *vectors, oai_error *err);

#endif
