/* json_schema_rules.c — the JSON Schema converter's state (json_schema_internal.h): its
 * failures, the path of the node being converted, the rules it writes (named after
 * where they are, unique, with the shared primitives of JSON: space, string, number,
 * ...), and GBNF text: literals, character classes and repetitions. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema_internal.h"

static const char *const prim_names[N_PRIM] = {
    "space", "char", "string", "integral-part", "decimal-part", "number", "integer",
    "boolean", "null", "value", "object", "array", "uuid", "date", "time",
    "date-time", "date-string", "time-string", "date-time-string", "key-char",
};


bool ty_js_oom(conv *c) {
    if (c->status == TOY_OK) {
        c->status = TOY_ERR_NOMEM;
        snprintf(c->msg, sizeof c->msg, "out of memory");
    }
    return false;
}

/* Records the first failure: "<pointer>[/key]: message". */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
bool ty_js_fail_at(conv *c, toy_status st, const char *key, const char *fmt, ...) {
    if (c->status != TOY_OK) return false;
    c->status = st;
    int n = snprintf(c->msg, sizeof c->msg, "%s", c->path.v ? c->path.v : "#");
    if (key && n >= 0 && (size_t)n < sizeof c->msg) n += snprintf(c->msg + n, sizeof c->msg - (size_t)n, "/%s", key);
    if (n >= 0 && (size_t)n < sizeof c->msg) n += snprintf(c->msg + n, sizeof c->msg - (size_t)n, ": ");
    if (n >= 0 && (size_t)n < sizeof c->msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg + n, sizeof c->msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return false;
}

void ty_js_put(ty_buf *b, const char *s) { ty_buf_append(b, s, strlen(s)); }

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void ty_js_putf(ty_buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->oom = true; /* callers format only numbers and short names */
        return;
    }
    ty_buf_append(b, tmp, (size_t)n);
}

/* Appends "/key" (RFC 6901 escaped) to the path; returns the length to restore. */
size_t ty_js_path_push(conv *c, const char *key) {
    size_t old = c->path.n;
    ty_js_put(&c->path, "/");
    for (const char *p = key; *p; p++) {
        if (*p == '~') ty_js_put(&c->path, "~0");
        else if (*p == '/') ty_js_put(&c->path, "~1");
        else ty_buf_append(&c->path, p, 1);
    }
    return old;
}
size_t ty_js_path_push_index(conv *c, size_t i) {
    char k[32];
    snprintf(k, sizeof k, "%zu", i);
    return ty_js_path_push(c, k);
}
void ty_js_path_pop(conv *c, size_t n) {
    if (c->path.oom) return;
    c->path.n = n;
    c->path.v[n] = 0;
}

/* ---------------------------------------------------------------- rules */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

long ty_js_find_rule(const conv *c, const char *name) {
    if (!c->index_cap) return -1;
    for (size_t i = hash_name(name) & (c->index_cap - 1);; i = (i + 1) & (c->index_cap - 1)) {
        if (!c->index[i]) return -1;
        if (!strcmp(c->rules[c->index[i] - 1].name, name)) return (long)(c->index[i] - 1);
    }
}

static void index_put(size_t *index, size_t cap, const char *name, size_t rule_no) {
    size_t i = hash_name(name) & (cap - 1);
    while (index[i]) i = (i + 1) & (cap - 1);
    index[i] = rule_no + 1;
}

/* A rule with a name no other rule has; body may be NULL (reserved). -1 when out of memory. */
long ty_js_new_rule(conv *c, const char *name, const char *body) {
    if (c->n_rules == c->cap_rules) {
        size_t cap = c->cap_rules ? c->cap_rules * 2 : 64;
        rule *r = realloc(c->rules, cap * sizeof *r);
        if (!r) return ty_js_oom(c), -1;
        c->rules = r;
        c->cap_rules = cap;
    }
    if ((c->n_rules + 1) * 2 > c->index_cap) {
        size_t cap = c->index_cap ? c->index_cap * 2 : 128;
        size_t *index = calloc(cap, sizeof *index);
        if (!index) return ty_js_oom(c), -1;
        for (size_t i = 0; i < c->n_rules; i++) index_put(index, cap, c->rules[i].name, i);
        free(c->index);
        c->index = index;
        c->index_cap = cap;
    }
    rule *r = &c->rules[c->n_rules];
    r->name = strdup(name);
    r->body = body ? strdup(body) : NULL;
    if (!r->name || (body && !r->body)) {
        free(r->name);
        free(r->body);
        return ty_js_oom(c), -1;
    }
    index_put(c->index, c->index_cap, name, c->n_rules);
    return (long)c->n_rules++;
}

/* The rule named hint (or hint-1, hint-2, ...) with this body: an existing one with the
 * same name and body is shared. body NULL reserves a new name. -1 on failure. */
long ty_js_add_rule(conv *c, const char *hint, const char *body) {
    char name[HINT_MAX + 32];
    snprintf(name, sizeof name, "%s", hint);
    for (unsigned k = 1;; k++) {
        long i = ty_js_find_rule(c, name);
        if (i < 0) return ty_js_new_rule(c, name, body);
        if (body && c->rules[i].body && !strcmp(c->rules[i].body, body)) return i;
        snprintf(name, sizeof name, "%s-%u", hint, k);
    }
}

/* hint + "-" + what, with every run of characters outside [a-zA-Z0-9-] made one "-", cut
 * at HINT_MAX. */
void ty_js_make_hint(char *dst, size_t size, const char *hint, const char *what) {
    size_t n = (size_t)snprintf(dst, size, "%s", hint);
    if (n > HINT_MAX) n = HINT_MAX;
    bool dash = false;
    if (n < HINT_MAX) dst[n++] = '-', dash = true;
    for (const char *p = what; *p && n < HINT_MAX; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (ok) dst[n++] = ch, dash = false;
        else if (!dash) dst[n++] = '-', dash = true;
    }
    while (n > 1 && dst[n - 1] == '-') n--;
    if (n <= strlen(hint) && n < HINT_MAX) dst[n++] = '-', dst[n++] = 'x'; /* nothing left of what */
    dst[n] = 0;
}

/* ---------------------------------------------------------------- GBNF text */

/* n bytes of UTF-8 text in quotes, escaped for a GBNF string literal or (json) for JSON
 * text. */
void ty_js_put_quoted(ty_buf *b, const char *s, size_t n, bool json) {
    ty_js_put(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') ty_js_put(b, "\\\"");
        else if (ch == '\\') ty_js_put(b, "\\\\");
        else if (ch == '\n') ty_js_put(b, "\\n");
        else if (ch == '\r') ty_js_put(b, "\\r");
        else if (ch == '\t') ty_js_put(b, "\\t");
        else if (json && ch == '\b') ty_js_put(b, "\\b");
        else if (json && ch == '\f') ty_js_put(b, "\\f");
        else if (json && ch < 0x20) ty_js_putf(b, "\\u%04x", ch);
        else if (!json && (ch < 0x20 || ch == 0x7f)) ty_js_putf(b, "\\x%02X", ch);
        else ty_buf_append(b, &s[i], 1);
    }
    ty_js_put(b, "\"");
}

/* A GBNF string literal of n bytes of UTF-8 text. */
void ty_js_put_lit(ty_buf *b, const char *s, size_t n) {
    ty_js_put_quoted(b, s, n, false);
}

/* One code point inside a GBNF character class. */
void ty_js_put_class_char(ty_buf *b, uint32_t cp) {
    if (cp >= 0x20 && cp < 0x7f && !strchr("[]\\-^", (int)cp)) {
        char ch = (char)cp;
        ty_buf_append(b, &ch, 1);
    } else if (cp < 0x80) {
        ty_js_putf(b, "\\x%02X", (unsigned)cp);
    } else if (cp <= 0xffff) {
        ty_js_putf(b, "\\u%04X", (unsigned)cp);
    } else {
        ty_js_putf(b, "\\U%08X", (unsigned)cp);
    }
}

/* x{min,max} in GBNF (max < 0: unbounded), or "" when max is 0. */
void ty_js_put_rep(ty_buf *b, const char *item, long long min, long long max) {
    if (max == 0) return;
    ty_js_put(b, item);
    if (min == 1 && max == 1) return;
    if (max < 0) {
        if (min == 0) ty_js_put(b, "*");
        else if (min == 1) ty_js_put(b, "+");
        else ty_js_putf(b, "{%lld,}", min);
    } else if (min == 0 && max == 1) {
        ty_js_put(b, "?");
    } else if (min == max) {
        ty_js_putf(b, "{%lld}", min);
    } else {
        ty_js_putf(b, "{%lld,%lld}", min, max);
    }
}

/* The name of a shared rule (JSON whitespace, strings, numbers, any value, formats),
 * created on first use. */
const char *ty_js_prim(conv *c, prim_id id) {
    if (c->prim[id]) return c->rules[c->prim[id] - 1].name;
    char hint[HINT_MAX + 32];
    ty_js_make_hint(hint, sizeof hint, c->root, prim_names[id]);
    long r = ty_js_add_rule(c, hint, NULL);
    if (r < 0) return NULL;
    c->prim[id] = (size_t)r + 1; /* before the body: value and object refer to each other */
    ty_buf b = {0};
    const char *sp = id == PRIM_SPACE ? "" : ty_js_prim(c, PRIM_SPACE);
    if (!sp) return NULL;
#define P(x) (ty_js_prim(c, x) ? c->rules[c->prim[x] - 1].name : "")
    switch (id) {
    case PRIM_SPACE: ty_js_put(&b, "( \" \" | \"\\n\"{1,2} [ \\t]{0,20} )?"); break;
    case PRIM_CHAR: ty_js_put(&b, "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )"); break;
    case PRIM_KEY_CHAR: ty_js_put(&b, "[^\"\\\\\\x00-\\x1F]"); break;
    case PRIM_STRING: ty_js_putf(&b, "\"\\\"\" %s* \"\\\"\" %s", P(PRIM_CHAR), sp); break;
    case PRIM_INTEGRAL: ty_js_put(&b, "\"0\" | [1-9] [0-9]{0,15}"); break;
    case PRIM_DECIMAL: ty_js_put(&b, "[0-9]{1,16}"); break;
    case PRIM_NUMBER:
        ty_js_putf(&b, "\"-\"? %s ( \".\" %s )? ( [eE] [-+]? %s )? %s", P(PRIM_INTEGRAL), P(PRIM_DECIMAL),
             P(PRIM_INTEGRAL), sp);
        break;
    case PRIM_INTEGER: ty_js_putf(&b, "\"-\"? %s %s", P(PRIM_INTEGRAL), sp); break;
    case PRIM_BOOLEAN: ty_js_putf(&b, "( \"true\" | \"false\" ) %s", sp); break;
    case PRIM_NULL: ty_js_putf(&b, "\"null\" %s", sp); break;
    case PRIM_VALUE:
        ty_js_putf(&b, "%s | ", P(PRIM_OBJECT));
        ty_js_putf(&b, "%s | ", P(PRIM_ARRAY));
        ty_js_putf(&b, "%s | ", P(PRIM_STRING));
        ty_js_putf(&b, "%s | ", P(PRIM_NUMBER));
        ty_js_putf(&b, "%s | ", P(PRIM_BOOLEAN));
        ty_js_putf(&b, "%s", P(PRIM_NULL));
        break;
    case PRIM_OBJECT: {
        const char *s = P(PRIM_STRING), *v = P(PRIM_VALUE);
        ty_js_putf(&b, "\"{\" %s ( %s \":\" %s %s ", sp, s, sp, v);
        ty_js_putf(&b, "( \",\" %s %s \":\" %s %s )* )? \"}\" %s", sp, s, sp, v, sp);
        break;
    }
    case PRIM_ARRAY: {
        const char *v = P(PRIM_VALUE);
        ty_js_putf(&b, "\"[\" %s ( %s ( \",\" %s %s )* )? \"]\" %s", sp, v, sp, v, sp);
        break;
    }
    case PRIM_UUID:
        ty_js_put(&b, "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                "[0-9a-fA-F]{12} \"\\\"\" ");
        ty_js_put(&b, sp);
        break;
    case PRIM_DATE:
        /* llama.cpp's allows every day up to 31 in every month: here the month has it,
           and February the 29th only in leap years; year 0000 is not a date to Python */
        ty_js_put(&b, "( [1-9] [0-9]{3} | \"0\" ( [1-9] [0-9]{2} | \"0\" ( [1-9] [0-9] | \"0\" [1-9] ) ) ) \"-\" ( "
                "( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
                "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
                "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | "
                "( [0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\" ) "
                "\"-02-29\"");
        break;
    case PRIM_TIME:
        ty_js_put(&b, "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? "
                "( \"Z\" | [+\\x2D] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )");
        break;
    case PRIM_DATE_TIME: ty_js_putf(&b, "%s \"T\" ", P(PRIM_DATE)); ty_js_put(&b, P(PRIM_TIME)); break;
    case PRIM_DATE_STRING: ty_js_putf(&b, "\"\\\"\" %s \"\\\"\" %s", P(PRIM_DATE), sp); break;
    case PRIM_TIME_STRING: ty_js_putf(&b, "\"\\\"\" %s \"\\\"\" %s", P(PRIM_TIME), sp); break;
    case PRIM_DATE_TIME_STRING: ty_js_putf(&b, "\"\\\"\" %s \"\\\"\" %s", P(PRIM_DATE_TIME), sp); break;
    case N_PRIM: break;
    }
#undef P
    if (b.oom || c->status != TOY_OK) {
        free(b.v);
        if (c->status == TOY_OK) ty_js_oom(c);
        return NULL;
    }
    c->rules[r].body = b.v ? b.v : strdup("");
    if (!c->rules[r].body) return ty_js_oom(c), NULL;
    return c->rules[r].name;
}

/* Appends a primitive's name; false on failure. */
bool ty_js_put_prim(conv *c, ty_buf *b, prim_id id) {
    const char *n = ty_js_prim(c, id);
    if (!n) return false;
    ty_js_put(b, n);
    return true;
}
