/* tokenizer_wpm.h — WordPiece (tokenizer_wpm.c), internal. */
#ifndef TOY_TOKENIZER_WPM_H
#define TOY_TOKENIZER_WPM_H

#include <stdbool.h>
#include <stddef.h>

#include "vocab.h"

/* Plain text (no special tokens) to ids, appended to out. */
toy_status ty_wpm_tokenize(const toy_vocab *v, const char *text, size_t len, ty_ids *out);

#endif
