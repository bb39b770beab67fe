/* grammar.h — GBNF grammars (internal): the compiled rules, and the state of one
 * generation within them as the sampler sees it.
 *
 * gbnf.c turns the text into rules; grammar.c runs them. A rule is a list of
 * alternatives, each a sequence of elements ending in GE_END: a set of code points
 * (GE_CHARS) or a reference to a rule (GE_RULE). Repetition and groups become rules of
 * their own while parsing, so nothing else exists at run time. */
#ifndef TOY_GRAMMAR_H
#define TOY_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "toy.h"

typedef enum { GE_END, GE_CHARS, GE_RULE } gelem_kind;

typedef struct {
    uint32_t kind;  /* gelem_kind */
    uint32_t value; /* GE_CHARS: the set's index; GE_RULE: the rule's */
} gelem;

/* Code points lo..hi, both included. */
typedef struct {
    uint32_t lo, hi;
} grange;

/* A character class: ranges[off .. off+n), sorted and disjoint; a negated set matches
 * every code point outside them ("." is a negated set with no ranges). */
typedef struct {
    uint32_t off, n;
    bool negated;
} gcharset;

typedef struct {
    gelem *elems;          /* every alternative of every rule, each ending in GE_END */
    uint32_t n_elems;
    grange *ranges;
    uint32_t n_ranges;
    gcharset *sets;
    uint32_t n_sets;
    uint32_t *alts;        /* the first element of each alternative, rule after rule */
    uint32_t *rule_alt;    /* n_rules + 1: rule r's alternatives are alts[rule_alt[r] .. rule_alt[r+1]) */
    uint32_t n_rules;
    uint32_t root;
    char **names;          /* n_rules, for messages */
} gbnf_rules;

/* Parses GBNF text (llama.cpp's grammars/README.md) whose start rule is `root`. Errors
 * are TOY_ERR_INVALID "line L, column C: ...". */
toy_status ty_gbnf_parse(const char *text, size_t len, const char *root, gbnf_rules *out);
void ty_gbnf_free(gbnf_rules *g);
bool ty_gbnf_set_matches(const gbnf_rules *g, uint32_t set, uint32_t cpt);
/* Whether some code point in lo..hi is in the set. */
bool ty_gbnf_set_meets(const gbnf_rules *g, uint32_t set, uint32_t lo, uint32_t hi);

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
