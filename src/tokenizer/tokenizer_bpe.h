/* tokenizer_bpe.h — byte-level BPE and its pre-tokenizers (tokenizer_bpe.c), internal;
 * bpe_train.c trains over the same pre-tokens. */
#ifndef TOY_TOKENIZER_BPE_H
#define TOY_TOKENIZER_BPE_H

#include <stdbool.h>
#include <stddef.h>

#include "vocab.h"

/* Plain text (no special tokens) to ids, appended to out. */
toy_status ty_bpe_tokenize(const toy_vocab *v, const char *text, size_t len, ty_ids *out);

/* The pre-tokenizer named by tokenizer.ggml.pre ("" for the default). Sets the
 * vocabulary flags that llama.cpp ties to the name (ignore_merges, clean_spaces, the
 * default of add_bos) unless v is NULL. TOY_ERR_UNSUPPORTED for an unknown name. */
toy_status ty_pretokenizer_new(const char *name, size_t len, toy_vocab *v,
                               ty_pretokenizer **out);
void ty_pretokenizer_free(ty_pretokenizer *p);
/* llama.cpp looks a whole pre-token up in the vocabulary before merging (llama3's
 * ignore_merges) under this pre-tokenizer's name. */
bool ty_pretokenizer_ignores_merges(const ty_pretokenizer *p);
/* The i-th name tokenizer.ggml.pre may hold, NULL past the last. */
const char *ty_pretokenizer_name(size_t i);

/* Called with each pre-token in order: the UTF-8 of its code points (so invalid UTF-8
 * arrives as U+FFFD's bytes). A status other than TOY_OK stops the walk. */
typedef toy_status (*ty_pretoken_fn)(void *user, const char *word, size_t len);
/* Cuts plain text (no special tokens) into the pre-tokens that ty_bpe_tokenize merges;
 * tokenizing and training a tokenizer (bpe_train.c) share this one path. */
toy_status ty_pretokenize(const ty_pretokenizer *p, const char *text, size_t len,
                          ty_pretoken_fn fn, void *user);

/* The vocabulary of toy_tokenizer_train before any merge: the 256 byte tokens and its
 * default special tokens, a vocabulary-only GGUF in memory (*data, the caller frees it):
 * the tokenizer of a model made with no tokenizer file (toy_model_new). */
toy_status ty_bpe_byte_vocab(void **data, size_t *size);

#endif
