/* tokenizer_spm.h — SentencePiece BPE (tokenizer_spm.c), internal. */
#ifndef TOY_TOKENIZER_SPM_H
#define TOY_TOKENIZER_SPM_H

#include <stdbool.h>
#include <stddef.h>

#include "vocab.h"

/* Plain text (no special tokens) to ids, appended to out. `first` tells whether the
 * text follows the start or a special token (where the space prefix goes). */
toy_status ty_spm_tokenize(const toy_vocab *v, const char *text, size_t len, bool first,
                           ty_ids *out);

#endif
