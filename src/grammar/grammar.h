/* grammar.h — GBNF grammars (internal): the state of one generation within a grammar's
 * rules (gbnf.h) as the sampler sees it; grammar.c runs them. */
#ifndef TOY_GRAMMAR_H
#define TOY_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gbnf.h"
#include "toy.h"

/* Where a generation stands in a grammar's language (one per sampler): the stacks of
 * the pushdown automaton and any half-read UTF-8 character, cached as a state of the
 * grammar's lazily built automaton over bytes. */
typedef struct {
    uint32_t *key;  /* the state's description (see grammar.c); malloc'd */
    size_t key_len;
    int32_t state;  /* the cached state, valid while epoch matches the grammar's */
    uint64_t epoch;
    bool finished;  /* an end-of-generation token was accepted */
} grammar_cursor;

toy_status ty_grammar_cursor_init(const toy_grammar *g, grammar_cursor *c);
void ty_grammar_cursor_free(grammar_cursor *c);
/* Sets to -inf the logits of every token the grammar refuses here (end-of-generation
 * tokens unless the text so far is complete). TOY_ERR_INVALID when it allows none. */
toy_status ty_grammar_mask_logits(const toy_grammar *g, grammar_cursor *c, float *logits, int32_t n_vocab);
/* Whether the grammar allows each of n tokens here, one by one through the automaton
 * (for a few tokens, cheaper than a whole mask; the answers are the mask's). */
toy_status ty_grammar_allows(const toy_grammar *g, grammar_cursor *c, const int32_t *tokens, size_t n, bool *allowed);
/* Whether the text so far is a whole sentence of the grammar (it may end here). */
bool ty_grammar_cursor_complete(const grammar_cursor *c);
/* Moves past a sampled token; TOY_ERR_INVALID if the grammar refuses it. */
toy_status ty_grammar_accept_token(const toy_grammar *g, grammar_cursor *c, int32_t token);
/* Whether the grammar allows the token here (the reference the masks are tested
 * against: it reads the token's bytes one by one through the stacks, without the
 * automaton or the trie). */
bool ty_grammar_allows_reference(const toy_grammar *g, const grammar_cursor *c, int32_t token);
/* The allowed tokens as a bitset of (n_vocab + 63) / 64 words, as the masks give it. */
toy_status ty_grammar_allowed(const toy_grammar *g, grammar_cursor *c, uint64_t *bits);

#endif
