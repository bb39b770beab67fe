/* data.h — training data: files turned into one token stream with a loss mask, cut into
 * windows of T + 1 tokens (T inputs and the T tokens they predict).
 *
 * Plain text (any file not ending in .jsonl) is tokenized as one document: BOS if the
 * vocabulary adds one, the text, EOS; every token is a target. A .jsonl file holds one
 * chat record per line, {"messages": [{"role": ..., "content": ...}, ...]}, formatted
 * with the model's chat template (ChatML where it has none toy recognises) as `toy chat`
 * formats a conversation; only the assistant's tokens (its replies and their end-of-turn
 * markers) are targets. Documents and records follow each other in the stream in file
 * order; windows do not overlap (window i starts at token i * T).
 */
#ifndef TOY_TRAIN_DATA_H
#define TOY_TRAIN_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "toy.h"

typedef struct {
    int32_t *tokens;
    uint8_t *scored; /* per token: 1 if it is a target the loss counts */
    int64_t n, cap;
    int64_t n_scored;
    int64_t n_docs;  /* documents and chat records read */
} train_stream;

/* Appends the files to the stream (tokenized with vocab; chat records formatted with the
 * template family `chat_family`). Errors name the file and, for JSONL, the line. */
toy_status ty_train_stream_load(train_stream *s, const toy_vocab *vocab, const char *chat_family,
                             const char *const *paths, int n_paths);
void ty_train_stream_free(train_stream *s);

/* Whole windows of T + 1 tokens the stream holds. */
int64_t ty_train_stream_n_windows(const train_stream *s, int T);
/* Window w as T inputs and T targets (-1 where the next token is not scored); returns
 * how many targets are scored. */
int ty_train_stream_window(const train_stream *s, int64_t w, int T, int32_t *tokens, int32_t *targets);

/* The order of the n windows in epoch `epoch`: a permutation that depends only on the
 * seed and the epoch. */
void ty_train_window_order(int64_t *order, int64_t n, uint64_t seed, int64_t epoch);

#endif
