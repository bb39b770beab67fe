/* pipeline.h — pipeline-parallel inference over MPI (toy_pipeline_init, toy.h): the
 * transport. It knows processes, messages and stages, not models or contexts, which
 * use it (model.c, context.c, forward.c) and whose calls pipeline_worker.c replays.
 *
 * Under `mpirun -np N` a model's layers split into N contiguous stages, balanced by the
 * bytes of their tensors (or as toy_model_params.split says): process r computes stage r.
 * Rank 0 runs the program (tokenizer, sampling, HTTP) and its calls on pipelined models
 * and contexts are sent to the other ranks, which wait in toy_pipeline_worker: a model
 * load, a context, each batch, each KV-cache edit. A batch's activations pass from rank
 * to rank as [tokens x n_embd] F32 and the last rank sends the outputs (logits,
 * embeddings) back to rank 0. Each rank runs the arithmetic of one process on its
 * layers, so the outputs are the same bits. Every rank keeps the whole batch's
 * bookkeeping (the KV cache's cells are placed by one rule from the same calls), and
 * touches only its own layers' weights and KV rows. */
#ifndef TOY_PIPELINE_H
#define TOY_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "toy.h"

/* Whether this process is one of a pipeline of several (after toy_pipeline_init). */
bool ty_pipeline_on(void);
int ty_pipeline_rank(void);
int ty_pipeline_size(void);

/* first[0..size]: stage s computes layers first[s] .. first[s + 1] - 1 of the model in
 * g (n_layer layers; its output matrix is token_embd's when tied): split's layer counts,
 * or balanced by bytes. An error says why the layers cannot be split so. */
toy_status ty_pipeline_split(const toy_gguf *g, int n_layer, bool tied, const int32_t *split, int n_split,
                             int32_t *first);

/* What rank 0 sends the others: a command, the id of the model or context it is about,
 * five numbers and a payload. */
enum { PIPE_QUIT, PIPE_MODEL_LOAD, PIPE_MODEL_FREE, PIPE_MODEL_PACK, PIPE_CONTEXT_NEW, PIPE_CONTEXT_FREE, PIPE_DECODE, PIPE_KV };
enum { PIPE_KV_RM, PIPE_KV_CP, PIPE_KV_ADD };
typedef struct {
    int cmd, id;
    int64_t x[5];
    uint8_t *payload; /* received: malloc'd, the receiver frees it */
    int64_t len;
} ty_pipe_msg;
void ty_pipeline_send(const ty_pipe_msg *m); /* rank 0, to all */
void ty_pipeline_receive(ty_pipe_msg *m);    /* the others */
/* A batch as a payload, and back (the arrays malloc'd in one block, at b->token). */
void ty_pipeline_send_batch(int id, const toy_batch *b);
toy_status ty_pipeline_batch_of(const ty_pipe_msg *m, toy_batch *b);

/* Every rank's status of a model or context being made: rank 0 gets the first
 * failure, naming the rank, its host and its message. */
toy_status ty_pipeline_agree(toy_status st);
/* A worker's failure where rank 0 expects it to go on: every process ends, the
 * error printed with this rank and host. */
_Noreturn void ty_pipeline_abort(const char *what);

/* Models and contexts by id, the same on every rank: rank 0 takes a free one, the
 * others the id rank 0 sent (ty_pipeline_expect), -1 when all are taken. */
enum { PIPE_MODELS, PIPE_CONTEXTS };
int ty_pipeline_add(int kind, void *p);
void *ty_pipeline_get(int kind, int id);
void ty_pipeline_remove(int kind, int id);
void ty_pipeline_expect(int id);

/* Floats between ranks: a stage's activations from the rank before and to the rank
 * after, the outputs from the last rank to rank 0. */
enum { PIPE_TAG_X = 1, PIPE_TAG_LOGITS, PIPE_TAG_EMBD };
void ty_pipeline_send_floats(const float *x, int64_t n, int dest, int tag);
void ty_pipeline_recv_floats(float *x, int64_t n, int src, int tag);
/* The same without waiting for the receiver (from a copy: rank 0 takes the outputs
 * when it waits for their batch, after submitting others); ty_pipeline_flush waits for
 * every send posted. */
void ty_pipeline_post_floats(const float *x, int64_t n, int dest, int tag);
void ty_pipeline_flush(void);

/* A checked batch through this process's stage (forward.c), for the worker's replay;
 * *rows (may be NULL) gets its micro-batches' rows. */
toy_status ty_decode_stage(toy_context *ctx, const toy_batch *b, int64_t *rows);

#endif
