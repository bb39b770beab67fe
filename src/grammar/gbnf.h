/* gbnf.h — GBNF grammars' rules (internal), and gbnf.c, which turns the text into them.
 * A rule is a list of alternatives, each a sequence of elements ending in GE_END: a set
 * of code points (GE_CHARS) or a reference to a rule (GE_RULE). Repetition and groups
 * become rules of their own while parsing, so nothing else exists at run time
 * (grammar.h runs them). */
#ifndef TOY_GBNF_H
#define TOY_GBNF_H

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

#endif
