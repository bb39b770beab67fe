/* symbols.h — merging adjacent symbols (symbols.c), shared by SPM and BPE (internal). */
#ifndef TOY_SYMBOLS_H
#define TOY_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocab.h"

/* Merging adjacent symbols, shared by SPM and BPE (llama.cpp's llm_symbol and
 * llm_bigram_*): the text is cut into characters, and the queued pair that comes first
 * is merged, again and again. */
typedef struct {
    int prev, next; /* -1: none */
    size_t off, n;  /* bytes of the text; n = 0 once merged into its left neighbour */
} ty_symbol;

typedef struct {
    int left, right;
    /* The lowest key first, then the leftmost: BPE's merge rank, or SPM's score negated
     * (llama.cpp pops the highest score first). A double holds every int32 and float
     * exactly, and negation is exact, so ties and order are those of comparing the rank
     * or the score itself. */
    double key;
    size_t size; /* bytes of the pair when it was queued; differs once it is stale */
} ty_bigram;

/* A binary heap of bigrams. */
typedef struct {
    ty_bigram *v;
    size_t n, cap;
} ty_bigram_queue;

/* One symbol per UTF-8 character of text[0..n), linked in order (a truncated character
 * at the end keeps what is left); sym has room for n. Returns the number of symbols. */
int ty_symbols_init(ty_symbol *sym, const char *text, size_t n);
/* False when out of memory. */
bool ty_bigram_push(ty_bigram_queue *q, ty_bigram b);
/* Pops pairs until one whose symbols are as they were when it was queued, merges its
 * right symbol into its left one and returns the left one's index; -1 once the queue is
 * empty. */
int ty_bigram_merge_next(ty_bigram_queue *q, ty_symbol *sym);
/* Appends the token of every symbol, in order. A symbol that is no token falls back to
 * the byte_token of each of its bytes, else to `unk` (-1: the byte is dropped). */
void ty_symbols_emit(const toy_vocab *v, const char *text, const ty_symbol *sym, int n_sym,
                     int32_t unk, ty_ids *out);

#endif
