/* gbnf.c — GBNF text to rules, as llama.cpp's grammars/README.md describes the language:
 *
 *     name ::= alternative | alternative ...     # a comment
 *
 * where an alternative is a sequence of "literals", [character classes] (ranges, ^ for
 * negation), . (any character), rule names and ( groups ), each optionally followed by
 * *, +, ?, {m}, {m,}, {m,n}. Escapes: \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH.
 * A rule ends at the end of its line unless inside parentheses or after |.
 *
 * Groups and repetitions become rules of their own: x* is R ::= x R | (empty), x? is
 * R ::= x | (empty), x{m,n} is m copies of x then n-m nested optional copies. So the
 * matcher only ever sees sequences of character sets and rule references. Rules that
 * could call themselves before reading a character (left recursion) are refused:
 * the matcher would never stop expanding them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "error.h"
#include "gbnf.h"
#include "unicode.h"

/* Limits that keep a hostile grammar from taking unbounded memory or time. */
#define GBNF_MAX_REPEAT 10000       /* the m and n of {m,n} */
#define GBNF_MAX_ELEMS (1u << 22)   /* elements after repetitions are expanded */
#define GBNF_MAX_NESTING 256        /* parentheses inside each other */

typedef struct {
    gelem *v;
    uint32_t n, cap;
} elem_vec;

/* A rule while parsing: its name, its body (alternatives separated by GE_END, the last
 * one ending in GE_END too) and where it was first mentioned, for messages. */
typedef struct {
    char *name;
    elem_vec body;
    bool defined;
    size_t first_use;
} rule_def;

typedef struct {
    const char *text;
    size_t len, pos;
    rule_def *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *by_name; /* open-addressing hash of rule names: index + 1, 0 empty */
    uint32_t name_mask;
    grange *ranges;
    uint32_t n_ranges, cap_ranges;
    gcharset *sets;
    uint32_t n_sets, cap_sets;
    uint64_t n_elems; /* in every body, to bound the total */
    int depth;
    toy_status st;
    char err[256];
    size_t err_pos;
} parser;

static bool fail_at(parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail_at(parser *p, size_t pos, const char *fmt, ...) {
    if (p->st) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    p->st = TOY_ERR_INVALID;
    p->err_pos = pos;
    return false;
}

static bool no_memory(parser *p) {
    if (!p->st) {
        p->st = TOY_ERR_NOMEM;
        snprintf(p->err, sizeof p->err, "out of memory");
        p->err_pos = p->pos;
    }
    return false;
}

/* Grows an array of `size`-byte items to hold n + 1. */
static bool grow(parser *p, void **v, uint32_t *cap, uint32_t n, size_t size) {
    if (n < *cap) return true;
    const uint32_t c = *cap ? *cap * 2 : 16;
    if (c <= *cap) return no_memory(p);
    void *nv = realloc(*v, (size_t)c * size);
    if (!nv) return no_memory(p);
    *v = nv;
    *cap = c;
    return true;
}

static bool push_elem(parser *p, elem_vec *b, uint32_t kind, uint32_t value) {
    if (++p->n_elems > GBNF_MAX_ELEMS)
        return fail_at(p, p->pos, "the grammar is too large (over %u elements once repetitions are expanded)",
                       GBNF_MAX_ELEMS);
    if (!grow(p, (void **)&b->v, &b->cap, b->n, sizeof *b->v)) return false;
    b->v[b->n++] = (gelem){kind, value};
    return true;
}

static uint32_t name_hash(const char *name, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)name[i]) * 16777619u;
    return h;
}

static bool names_grow(parser *p) {
    const size_t n = p->by_name ? ((size_t)p->name_mask + 1) * 2 : 256;
    uint32_t *t = calloc(n, sizeof *t);
    if (!t) return no_memory(p);
    for (uint32_t r = 0; r < p->n_rules; r++) {
        size_t i = name_hash(p->rules[r].name, strlen(p->rules[r].name)) & (n - 1);
        while (t[i]) i = (i + 1) & (n - 1);
        t[i] = r + 1;
    }
    free(p->by_name);
    p->by_name = t;
    p->name_mask = (uint32_t)(n - 1);
    return true;
}

/* The rule of a name, created (undefined) on first mention; UINT32_MAX on failure. */
static uint32_t rule_named(parser *p, const char *name, size_t len, size_t at) {
    if ((!p->by_name || ((size_t)p->n_rules + 1) * 2 > (size_t)p->name_mask + 1) && !names_grow(p)) return UINT32_MAX;
    size_t i = name_hash(name, len) & p->name_mask;
    for (; p->by_name[i]; i = (i + 1) & p->name_mask) {
        const rule_def *r = &p->rules[p->by_name[i] - 1];
        if (strlen(r->name) == len && !memcmp(r->name, name, len)) return p->by_name[i] - 1;
    }
    if (!grow(p, (void **)&p->rules, &p->cap_rules, p->n_rules, sizeof *p->rules)) return UINT32_MAX;
    rule_def *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    if (!(r->name = strndup(name, len))) return no_memory(p), UINT32_MAX;
    r->first_use = at;
    p->by_name[i] = p->n_rules + 1;
    return p->n_rules++;
}

/* A new rule for a group or repetition inside `parent`: "parent-N". */
static uint32_t rule_generated(parser *p, uint32_t parent) {
    char name[320];
    snprintf(name, sizeof name, "%.256s-%u", p->rules[parent].name, p->n_rules);
    const uint32_t r = rule_named(p, name, strlen(name), p->pos);
    if (r != UINT32_MAX) p->rules[r].defined = true;
    return r;
}

static int range_cmp(const void *a, const void *b) {
    const grange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* A set from ranges (sorted and merged in place, so a lookup may stop at the first
 * range past the code point); UINT32_MAX on failure. */
static uint32_t add_set(parser *p, grange *ranges, uint32_t n, bool negated) {
    if (n > 1) qsort(ranges, n, sizeof *ranges, range_cmp);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (m && ranges[i].lo <= ranges[m - 1].hi + 1) {
            if (ranges[i].hi > ranges[m - 1].hi) ranges[m - 1].hi = ranges[i].hi;
        } else {
            ranges[m++] = ranges[i];
        }
    }
    const uint32_t off = p->n_ranges;
    for (uint32_t i = 0; i < m; i++) {
        if (!grow(p, (void **)&p->ranges, &p->cap_ranges, p->n_ranges, sizeof *p->ranges)) return UINT32_MAX;
        p->ranges[p->n_ranges++] = ranges[i];
    }
    if (!grow(p, (void **)&p->sets, &p->cap_sets, p->n_sets, sizeof *p->sets)) return UINT32_MAX;
    p->sets[p->n_sets] = (gcharset){off, m, negated};
    return p->n_sets++;
}

/* ---------------------------------------------------------------- lexing */

static bool at_end(const parser *p) { return p->pos >= p->len; }
static char peek(const parser *p) { return at_end(p) ? 0 : p->text[p->pos]; }

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips spaces, tabs and comments, and newlines too when `newlines` (inside a group or
 * after |). */
static void skip_space(parser *p, bool newlines) {
    while (!at_end(p)) {
        const char c = peek(p);
        if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
            p->pos++;
        } else if (c == '#') {
            while (!at_end(p) && peek(p) != '\n') p->pos++;
        } else {
            break;
        }
    }
}

/* One code point of the text, valid UTF-8 only. */
static bool read_utf8(parser *p, uint32_t *cpt) {
    const size_t at = p->pos;
    *cpt = ty_utf8_decode(p->text, p->len, &p->pos);
    if (*cpt == TOY_UNICODE_REPLACEMENT && (p->pos - at != 3 || memcmp(p->text + at, "\xEF\xBF\xBD", 3)))
        return fail_at(p, at, "invalid UTF-8");
    return true;
}

static bool read_hex(parser *p, int digits, uint32_t *cpt) {
    const size_t at = p->pos;
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        const char c = peek(p);
        uint32_t d;
        if (c >= '0' && c <= '9') d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (uint32_t)(c - 'A' + 10);
        else return fail_at(p, at, "expected %d hexadecimal digits", digits);
        v = v * 16 + d;
        p->pos++;
    }
    if (v > 0x10FFFF) return fail_at(p, at, "code point U+%X is beyond U+10FFFF", v);
    *cpt = v;
    return true;
}

/* One character of a literal or class, escapes decoded. */
static bool read_char(parser *p, uint32_t *cpt) {
    if (at_end(p)) return fail_at(p, p->pos, "unexpected end of the grammar");
    if (peek(p) != '\\') return read_utf8(p, cpt);
    const size_t at = p->pos++;
    const char c = peek(p);
    p->pos++;
    switch (c) {
    case 'n': *cpt = '\n'; return true;
    case 'r': *cpt = '\r'; return true;
    case 't': *cpt = '\t'; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *cpt = (uint32_t)c; return true;
    case 'x': return read_hex(p, 2, cpt);
    case 'u': return read_hex(p, 4, cpt);
    case 'U': return read_hex(p, 8, cpt);
    default:
        return fail_at(p, at, c ? "unknown escape '\\%c'" : "unknown escape '\\%c'", c ? c : '0');
    }
}

/* ---------------------------------------------------------------- parsing */

static bool parse_alternatives(parser *p, uint32_t rule, bool nested);

static bool repeat_copies(parser *p, uint32_t rule, const gelem *item, uint32_t item_n, uint32_t min, uint32_t max);

/* Replaces the last item, body[start..n), by its repetition {min, max} (max UINT32_MAX:
 * unbounded). */
static bool repeat_item(parser *p, uint32_t rule, elem_vec *body, uint32_t start, uint32_t min, uint32_t max) {
    const uint32_t item_n = body->n - start;
    gelem *item = malloc((item_n ? item_n : 1) * sizeof *item);
    if (!item) return no_memory(p);
    if (item_n) memcpy(item, body->v + start, item_n * sizeof *item);
    body->n = start;
    const bool ok = repeat_copies(p, rule, item, item_n, min, max);
    free(item);
    return ok;
}

static bool repeat_copies(parser *p, uint32_t rule, const gelem *item, uint32_t item_n, uint32_t min, uint32_t max) {
    elem_vec *body = &p->rules[rule].body;
    for (uint32_t c = 0; c < min; c++)
        for (uint32_t i = 0; i < item_n; i++)
            if (!push_elem(p, body, item[i].kind, item[i].value)) return false;
    if (max == min) return true;
    /* the optional part: R ::= item R | (unbounded) or the nested R_k ::= item R_{k-1} | */
    uint32_t inner = UINT32_MAX;
    const uint32_t n_opt = max == UINT32_MAX ? 1 : max - min;
    for (uint32_t k = 0; k < n_opt; k++) {
        const uint32_t r = rule_generated(p, rule);
        if (r == UINT32_MAX) return false;
        elem_vec *rb = &p->rules[r].body;
        for (uint32_t i = 0; i < item_n; i++)
            if (!push_elem(p, rb, item[i].kind, item[i].value)) return false;
        const uint32_t next = max == UINT32_MAX ? r : inner;
        if (next != UINT32_MAX && !push_elem(p, rb, GE_RULE, next)) return false;
        if (!push_elem(p, rb, GE_END, 0) || !push_elem(p, rb, GE_END, 0)) return false; /* | (empty) */
        inner = r;
        body = &p->rules[rule].body; /* rules may have moved */
    }
    return push_elem(p, body, GE_RULE, inner);
}

static bool parse_repeat_count(parser *p, uint32_t *v) {
    const size_t at = p->pos;
    if (!(peek(p) >= '0' && peek(p) <= '9')) return fail_at(p, at, "expected a number");
    uint64_t n = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        n = n * 10 + (uint64_t)(peek(p) - '0');
        p->pos++;
        if (n > GBNF_MAX_REPEAT) return fail_at(p, at, "repetition count over %d", GBNF_MAX_REPEAT);
    }
    *v = (uint32_t)n;
    return true;
}

/* The elements of one alternative, up to | or ) or the end of the rule. */
static bool parse_sequence(parser *p, uint32_t rule, bool nested) {
    uint32_t item_start = UINT32_MAX; /* where the last item began in the body */
    for (;;) {
        skip_space(p, nested);
        if (at_end(p)) return true;
        const size_t at = p->pos;
        const char c = peek(p);
        elem_vec *body = &p->rules[rule].body;
        if (c == '"') { /* a literal: one set per character */
            p->pos++;
            item_start = body->n;
            while (peek(p) != '"') {
                if (at_end(p) || peek(p) == '\n') return fail_at(p, at, "unterminated literal");
                uint32_t cpt;
                if (!read_char(p, &cpt)) return false;
                grange r = {cpt, cpt};
                const uint32_t set = add_set(p, &r, 1, false);
                if (set == UINT32_MAX || !push_elem(p, &p->rules[rule].body, GE_CHARS, set)) return false;
            }
            p->pos++;
        } else if (c == '[') { /* a class */
            p->pos++;
            bool negated = false;
            if (peek(p) == '^') {
                negated = true;
                p->pos++;
            }
            grange *ranges = NULL;
            uint32_t n = 0, cap = 0;
            bool ok = true;
            while (ok && peek(p) != ']') {
                if (at_end(p)) {
                    ok = fail_at(p, at, "unterminated character class");
                    break;
                }
                uint32_t lo, hi;
                ok = read_char(p, &lo);
                hi = lo;
                if (ok && peek(p) == '-' && p->pos + 1 < p->len && p->text[p->pos + 1] != ']') {
                    const size_t range_at = p->pos++;
                    ok = read_char(p, &hi);
                    if (ok && hi < lo) ok = fail_at(p, range_at, "range end U+%04X is below its start U+%04X", hi, lo);
                }
                if (ok && (ok = grow(p, (void **)&ranges, &cap, n, sizeof *ranges))) ranges[n++] = (grange){lo, hi};
            }
            const uint32_t set = ok ? add_set(p, ranges, n, negated) : UINT32_MAX;
            free(ranges);
            if (!ok) return false;
            p->pos++;
            item_start = p->rules[rule].body.n;
            if (set == UINT32_MAX || !push_elem(p, &p->rules[rule].body, GE_CHARS, set)) return false;
        } else if (c == '.') {
            p->pos++;
            const uint32_t set = add_set(p, NULL, 0, true);
            item_start = body->n;
            if (set == UINT32_MAX || !push_elem(p, body, GE_CHARS, set)) return false;
        } else if (is_name_char(c)) {
            const size_t start = p->pos;
            while (is_name_char(peek(p))) p->pos++;
            /* a name followed by ::= starts the next rule: this one has ended */
            const size_t after = p->pos;
            skip_space(p, false);
            if (p->pos + 3 <= p->len && !memcmp(p->text + p->pos, "::=", 3)) {
                if (nested) return fail_at(p, start, "expected ')' before the next rule");
                p->pos = start;
                return true;
            }
            p->pos = after;
            const uint32_t ref = rule_named(p, p->text + start, after - start, start);
            if (ref == UINT32_MAX) return false;
            item_start = p->rules[rule].body.n;
            if (!push_elem(p, &p->rules[rule].body, GE_RULE, ref)) return false;
        } else if (c == '(') {
            p->pos++;
            if (++p->depth > GBNF_MAX_NESTING) return fail_at(p, at, "groups nested deeper than %d", GBNF_MAX_NESTING);
            const uint32_t sub = rule_generated(p, rule);
            if (sub == UINT32_MAX || !parse_alternatives(p, sub, true)) return false;
            p->depth--;
            skip_space(p, true);
            if (peek(p) != ')') return fail_at(p, at, "'(' is not closed");
            p->pos++;
            item_start = p->rules[rule].body.n;
            if (!push_elem(p, &p->rules[rule].body, GE_RULE, sub)) return false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (item_start == UINT32_MAX) return fail_at(p, at, "'%c' follows nothing it could repeat", c);
            p->pos++;
            uint32_t min = 0, max = UINT32_MAX;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                skip_space(p, false);
                if (!parse_repeat_count(p, &min)) return false;
                skip_space(p, false);
                if (peek(p) == ',') {
                    p->pos++;
                    skip_space(p, false);
                    if (peek(p) != '}' && !parse_repeat_count(p, &max)) return false;
                    skip_space(p, false);
                } else {
                    max = min;
                }
                if (peek(p) != '}') return fail_at(p, p->pos, "expected '}'");
                p->pos++;
                if (max < min) return fail_at(p, at, "repetition {%u,%u}: the maximum is below the minimum", min, max);
            }
            if (!repeat_item(p, rule, &p->rules[rule].body, item_start, min, max)) return false;
            item_start = UINT32_MAX; /* x** is an error, as in llama.cpp */
        } else if (c == '|' || c == ')' || c == '\n' || c == '\r') {
            return true;
        } else if (c == '<') {
            return fail_at(p, at, "token references (<...>) are not supported");
        } else {
            return fail_at(p, at, "unexpected character '%c'", c);
        }
    }
}

static bool parse_alternatives(parser *p, uint32_t rule, bool nested) {
    for (;;) {
        if (!parse_sequence(p, rule, nested)) return false;
        if (!push_elem(p, &p->rules[rule].body, GE_END, 0)) return false;
        if (peek(p) != '|') return true;
        p->pos++;
        skip_space(p, true);
    }
}

static bool parse_rule(parser *p) {
    const size_t at = p->pos;
    while (is_name_char(peek(p))) p->pos++;
    if (p->pos == at) return fail_at(p, at, "expected a rule name");
    const uint32_t r = rule_named(p, p->text + at, p->pos - at, at);
    if (r == UINT32_MAX) return false;
    if (p->rules[r].defined) return fail_at(p, at, "rule '%s' is defined twice", p->rules[r].name);
    p->rules[r].defined = true;
    skip_space(p, false);
    if (p->pos + 3 > p->len || memcmp(p->text + p->pos, "::=", 3))
        return fail_at(p, p->pos, "expected '::=' after '%s'", p->rules[r].name);
    p->pos += 3;
    skip_space(p, true);
    if (!parse_alternatives(p, r, false)) return false;
    if (peek(p) == ')') return fail_at(p, p->pos, "')' without '('");
    return true;
}

/* ---------------------------------------------------------------- checks */

/* Rules that can match the empty text, to a fixed point. */
static void find_nullable(const gbnf_rules *g, bool *nullable) {
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && !nullable[r]; a++) {
                uint32_t e = g->alts[a];
                while (g->elems[e].kind == GE_RULE && nullable[g->elems[e].value]) e++;
                if (g->elems[e].kind == GE_END) nullable[r] = changed = true;
            }
        }
    }
}

/* The k-th rule that rule r may begin with (the leading references of each alternative
 * up to and including the first that cannot be empty); UINT32_MAX past the last. */
static uint32_t leading_rule(const gbnf_rules *g, const bool *nullable, uint32_t r, uint32_t k) {
    uint32_t seen = 0;
    for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
        for (uint32_t e = g->alts[a]; g->elems[e].kind == GE_RULE; e++) {
            if (seen++ == k) return g->elems[e].value;
            if (!nullable[g->elems[e].value]) break;
        }
    return UINT32_MAX;
}

/* A rule that reaches itself before reading a character, by a depth-first search over
 * "may begin with" edges (iterative: a long chain of rules must not overflow the C
 * stack); UINT32_MAX if none is reachable from start. mark: 0 unseen, 1 on the path,
 * 2 done. */
static uint32_t find_left_recursion(const gbnf_rules *g, const bool *nullable, uint8_t *mark, uint32_t *path,
                                    uint32_t *edge, uint32_t start) {
    uint32_t n = 0;
    path[n] = start;
    edge[n++] = 0;
    mark[start] = 1;
    while (n) {
        const uint32_t r = path[n - 1];
        const uint32_t child = leading_rule(g, nullable, r, edge[n - 1]++);
        if (child == UINT32_MAX) {
            mark[r] = 2;
            n--;
        } else if (mark[child] == 1) {
            return child;
        } else if (mark[child] == 0) {
            mark[child] = 1;
            path[n] = child;
            edge[n++] = 0;
        }
    }
    return UINT32_MAX;
}

static toy_status check_rules(gbnf_rules *g) {
    bool *nullable = calloc(g->n_rules, sizeof *nullable);
    uint8_t *mark = calloc(g->n_rules, 1);
    uint32_t *todo = malloc(g->n_rules * sizeof *todo), *pos = malloc(g->n_rules * sizeof *pos);
    toy_status st = TOY_OK;
    if (!nullable || !mark || !todo || !pos) st = ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    if (!st) find_nullable(g, nullable);
    for (uint32_t r = 0; !st && r < g->n_rules; r++) {
        if (mark[r]) continue;
        const uint32_t bad = find_left_recursion(g, nullable, mark, todo, pos, r);
        if (bad != UINT32_MAX)
            st = ty_error(TOY_ERR_INVALID, "rule '%s' is left-recursive (it can reach itself before reading a character)",
                          g->names[bad]);
    }
    free(nullable);
    free(mark);
    free(todo);
    free(pos);
    return st;
}

/* ---------------------------------------------------------------- the result */

static void line_col(const char *text, size_t len, size_t pos, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < pos && i < len; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}

static void parser_free(parser *p) {
    for (uint32_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i].name);
        free(p->rules[i].body.v);
    }
    free(p->rules);
    free(p->by_name);
    free(p->ranges);
    free(p->sets);
}

void ty_gbnf_free(gbnf_rules *g) {
    if (g->names)
        for (uint32_t i = 0; i < g->n_rules; i++) free(g->names[i]);
    free(g->names);
    free(g->elems);
    free(g->ranges);
    free(g->sets);
    free(g->alts);
    free(g->rule_alt);
    memset(g, 0, sizeof *g);
}

/* Lays the rules out as gbnf_rules: bodies one after another, alternatives indexed. */
static toy_status flatten(parser *p, const char *root, gbnf_rules *g) {
    memset(g, 0, sizeof *g);
    uint64_t n_elems = 0, n_alts = 0;
    for (uint32_t r = 0; r < p->n_rules; r++) {
        n_elems += p->rules[r].body.n;
        for (uint32_t i = 0; i < p->rules[r].body.n; i++) n_alts += p->rules[r].body.v[i].kind == GE_END;
    }
    g->n_rules = p->n_rules;
    g->elems = malloc((size_t)(n_elems + 1) * sizeof *g->elems);
    g->alts = malloc((size_t)(n_alts + 1) * sizeof *g->alts);
    g->rule_alt = malloc((size_t)(p->n_rules + 1) * sizeof *g->rule_alt);
    g->names = calloc(p->n_rules ? p->n_rules : 1, sizeof *g->names);
    if (!g->elems || !g->alts || !g->rule_alt || !g->names) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    uint32_t ne = 0, na = 0;
    for (uint32_t r = 0; r < p->n_rules; r++) {
        g->rule_alt[r] = na;
        const elem_vec *b = &p->rules[r].body;
        bool starts = true;
        for (uint32_t i = 0; i < b->n; i++) {
            if (starts) g->alts[na++] = ne;
            g->elems[ne++] = b->v[i];
            starts = b->v[i].kind == GE_END;
        }
        g->names[r] = p->rules[r].name;
        p->rules[r].name = NULL;
    }
    g->rule_alt[p->n_rules] = na;
    g->n_elems = ne;
    g->ranges = p->ranges;
    g->n_ranges = p->n_ranges;
    g->sets = p->sets;
    g->n_sets = p->n_sets;
    p->ranges = NULL;
    p->sets = NULL;
    g->root = UINT32_MAX;
    for (uint32_t r = 0; r < g->n_rules; r++)
        if (!strcmp(g->names[r], root)) g->root = r;
    return TOY_OK;
}

toy_status ty_gbnf_parse(const char *text, size_t len, const char *root, gbnf_rules *out) {
    memset(out, 0, sizeof *out);
    parser p = {.text = text, .len = len};
    if (memchr(text, 0, len)) fail_at(&p, (size_t)((const char *)memchr(text, 0, len) - text), "a NUL byte");
    for (;;) {
        if (p.st) break;
        skip_space(&p, true);
        if (at_end(&p)) break;
        parse_rule(&p);
    }
    for (uint32_t r = 0; !p.st && r < p.n_rules; r++)
        if (!p.rules[r].defined) fail_at(&p, p.rules[r].first_use, "rule '%s' is not defined", p.rules[r].name);
    if (p.st) {
        size_t line, col;
        line_col(text, len, p.err_pos, &line, &col);
        const toy_status st = ty_error(p.st, "line %zu, column %zu: %s", line, col, p.err);
        parser_free(&p);
        return st;
    }
    toy_status st = flatten(&p, root, out);
    parser_free(&p);
    if (!st && out->root == UINT32_MAX) st = ty_error(TOY_ERR_INVALID, "the grammar has no rule '%s' to start from", root);
    if (!st) st = check_rules(out);
    if (st) ty_gbnf_free(out);
    return st;
}

/* ---------------------------------------------------------------- sets */

bool ty_gbnf_set_matches(const gbnf_rules *g, uint32_t set, uint32_t cpt) {
    const gcharset *s = &g->sets[set];
    bool in = false;
    for (uint32_t i = 0; i < s->n; i++) {
        const grange *r = &g->ranges[s->off + i];
        if (cpt < r->lo) break;
        if (cpt <= r->hi) {
            in = true;
            break;
        }
    }
    return in != s->negated;
}

bool ty_gbnf_set_meets(const gbnf_rules *g, uint32_t set, uint32_t lo, uint32_t hi) {
    const gcharset *s = &g->sets[set];
    if (!s->negated) {
        for (uint32_t i = 0; i < s->n; i++) {
            const grange *r = &g->ranges[s->off + i];
            if (r->lo <= hi && lo <= r->hi) return true;
        }
        return false;
    }
    /* negated: some code point of lo..hi lies outside every range (they are sorted and
     * merged, so walk the uncovered gaps) */
    uint32_t next = lo; /* the lowest code point not yet known to be covered */
    for (uint32_t i = 0; i < s->n && next <= hi; i++) {
        const grange *r = &g->ranges[s->off + i];
        if (r->hi < next) continue;
        if (r->lo > next) return true;
        if (r->hi == UINT32_MAX) return false;
        next = r->hi + 1;
    }
    return next <= hi;
}
