/* json_schema_internal.h — what the parts of the JSON Schema converter share (internal to
 * src/grammar/): the converter's state, its rules and GBNF text (json_schema_rules.c),
 * the integer and number ranges (json_schema_numbers.c) and the regular expressions of
 * "pattern" (json_schema_pattern.c), which json_schema.c's walk over a schema calls. */
#ifndef TOY_JSON_SCHEMA_INTERNAL_H
#define TOY_JSON_SCHEMA_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "toy.h"

enum {
    MAX_DEPTH = 64, /* nested schemas, $ref chains and allOf merges together */
    HINT_MAX = 96,  /* rule names are cut here; a number keeps them unique */
};

typedef struct {
    char *name;
    char *body; /* NULL while reserved: a $ref whose schema is being converted */
} rule;

typedef struct {
    char *ref;      /* the $ref text */
    size_t rule;    /* its rule */
    bool busy;      /* its schema is being converted */
    unsigned mark;  /* c->consumed when it started */
} ref_entry;

typedef enum {
    PRIM_SPACE, PRIM_CHAR, PRIM_STRING, PRIM_INTEGRAL, PRIM_DECIMAL, PRIM_NUMBER, PRIM_INTEGER,
    PRIM_BOOLEAN, PRIM_NULL, PRIM_VALUE, PRIM_OBJECT, PRIM_ARRAY, PRIM_UUID, PRIM_DATE, PRIM_TIME,
    PRIM_DATE_TIME, PRIM_DATE_STRING, PRIM_TIME_STRING, PRIM_DATE_TIME_STRING, PRIM_KEY_CHAR,
    N_PRIM
} prim_id;

typedef struct {
    const json_t *doc; /* the whole schema: $ref's base */
    bool strict;
    const char *root;
    rule *rules;
    size_t n_rules, cap_rules;
    size_t *index; /* open-addressing hash of rule names: rule number + 1, 0 free */
    size_t index_cap;
    ref_entry *refs;
    size_t n_refs, cap_refs;
    size_t prim[N_PRIM]; /* rule number + 1, 0 until first used */
    json_t **owned;      /* schemas made by allOf merges, freed at the end */
    size_t n_owned, cap_owned;
    ty_buf path; /* "#/properties/a": the JSON pointer of the node being converted */
    int depth;
    unsigned consumed; /* counts object and array openings on the way down: a $ref met
                          again with the same count would recurse without consuming input */
    toy_status status;
    char msg[600];
} conv;

/* json_schema_rules.c: the path of the node being converted ("#/properties/a"; push
 * returns the length to restore), the rules (find by name, -1 if none; new under an
 * exact name; add under a name made unique from a hint; make_hint: hint-what cut to
 * HINT_MAX), and a JSON string's text as a GBNF literal (json: as JSON writes it). */
size_t ty_js_path_push(conv *c, const char *key);
size_t ty_js_path_push_index(conv *c, size_t i);
void ty_js_path_pop(conv *c, size_t n);
long ty_js_find_rule(const conv *c, const char *name);
long ty_js_new_rule(conv *c, const char *name, const char *body);
long ty_js_add_rule(conv *c, const char *hint, const char *body);
void ty_js_make_hint(char *dst, size_t size, const char *hint, const char *what);
void ty_js_put_quoted(ty_buf *b, const char *s, size_t n, bool json);

/* Failure records (the first wins: "<pointer>[/key]: message"); both return false. */
bool ty_js_oom(conv *c);
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
bool ty_js_fail_at(conv *c, toy_status st, const char *key, const char *fmt, ...);
#define ty_js_fail(c, st, ...) ty_js_fail_at(c, st, NULL, __VA_ARGS__)

/* GBNF text: a string, a formatted short one, a literal of n bytes, a code point inside
 * a character class, item{min,max} (max < 0: unbounded), a shared primitive's rule. */
void ty_js_put(ty_buf *b, const char *s);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void ty_js_putf(ty_buf *b, const char *fmt, ...);
void ty_js_put_lit(ty_buf *b, const char *s, size_t n);
void ty_js_put_class_char(ty_buf *b, uint32_t cp);
void ty_js_put_rep(ty_buf *b, const char *item, long long min, long long max);
const char *ty_js_prim(conv *c, prim_id id);
bool ty_js_put_prim(conv *c, ty_buf *b, prim_id id);

/* The next code point of s[*i, n) (a byte as it is where the UTF-8 is broken). */
static inline uint32_t ty_js_utf8_next(const char *s, size_t *i, size_t n) {
    const unsigned char *u = (const unsigned char *)s + *i;
    size_t left = n - *i;
    if (u[0] < 0x80 || left < 2) return (*i)++, u[0];
    if ((u[0] & 0xe0) == 0xc0) return *i += 2, ((uint32_t)(u[0] & 0x1f) << 6) | (u[1] & 0x3f);
    if ((u[0] & 0xf0) == 0xe0 && left >= 3)
        return *i += 3, ((uint32_t)(u[0] & 0x0f) << 12) | ((uint32_t)(u[1] & 0x3f) << 6) | (u[2] & 0x3f);
    if (left >= 4)
        return *i += 4, ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3f) << 12) |
                            ((uint32_t)(u[2] & 0x3f) << 6) | (u[3] & 0x3f);
    return (*i)++, u[0];
}

/* json_schema_numbers.c: the body of an integer or number schema (minimum, maximum,
 * exclusive bounds as digit ranges). */
bool ty_js_integer_body(conv *c, const json_t *s, ty_buf *b);
bool ty_js_number_body(conv *c, const json_t *s, ty_buf *b);
/* json_schema_pattern.c: a string schema's "pattern" (ECMA-262 regex) as GBNF. */
bool ty_js_pattern_body(conv *c, const char *pattern, ty_buf *b);

#endif
