/* tokenizer.h — the vocabulary and the tokenizers, for the rest of toy (internal).
 *
 * tokenizer.c reads the vocabulary (vocab.h) and owns what is common to every kind:
 * special tokens, splitting the text at special-token text, BOS/EOS, pieces and
 * detokenizing. It hands plain text to one of three tokenizers, one file each:
 * tokenizer_spm.c (SentencePiece merges by score), tokenizer_bpe.c (byte-level BPE
 * with its pre-tokenizer regexes) and tokenizer_wpm.c (WordPiece). Each reproduces the
 * corresponding llm_tokenizer_* of llama.cpp's src/llama-vocab.cpp, and uses only
 * vocab.h and symbols.h (the merging that SPM and BPE share), never tokenizer.c. */
#ifndef TOY_TOKENIZER_H
#define TOY_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "tokenizer_bpe.h"
#include "tokenizer_spm.h"
#include "tokenizer_wpm.h"
#include "toy.h"
#include "vocab.h"

/* A token's text (toy_token_to_piece) however long: *text is buf when it fits in cap
 * bytes, else *big, malloc'd for the caller to free (on success; *big is left alone when
 * the text fits, and holds nothing to free after a failure). */
toy_status ty_token_text(const toy_vocab *v, int32_t token, bool special, char *buf, size_t cap, char **big,
                         const char **text, size_t *len);

#endif
