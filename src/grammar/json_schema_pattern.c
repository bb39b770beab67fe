/* json_schema_pattern.c — a string schema's "pattern", the ECMA-262 regular expressions
 * JSON Schema uses, as GBNF: classes as code point sets, escapes, groups, alternatives
 * and quantifiers; what GBNF cannot say (lookaround, backreferences) is an error naming
 * the pattern's offset (json_schema_internal.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema_internal.h"

/* Sets of code points as sorted, disjoint ranges. */
typedef struct {
    uint32_t lo, hi;
} cp_range;
typedef struct {
    cp_range *r;
    size_t n, cap;
    bool oom;
} cp_set;

static void set_add(cp_set *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        cp_range *r = realloc(s->r, cap * sizeof *r);
        if (!r) {
            s->oom = true;
            return;
        }
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n].lo = lo;
    s->r[s->n].hi = hi;
    s->n++;
}

static int cmp_range(const void *a, const void *b) {
    const cp_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void set_normalize(cp_set *s) {
    if (!s->n) return;
    qsort(s->r, s->n, sizeof *s->r, cmp_range);
    size_t m = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i].lo <= s->r[m].hi + 1) {
            if (s->r[i].hi > s->r[m].hi) s->r[m].hi = s->r[i].hi;
        } else {
            s->r[++m] = s->r[i];
        }
    }
    s->n = m + 1;
}

static bool set_has(const cp_set *s, uint32_t cp) {
    for (size_t i = 0; i < s->n; i++)
        if (cp >= s->r[i].lo && cp <= s->r[i].hi) return true;
    return false;
}

/* The complement within Unicode; s must be normalized. */
static cp_set set_complement(const cp_set *s) {
    cp_set o = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > next) set_add(&o, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= 0x10ffff) set_add(&o, next, 0x10ffff);
    o.oom = o.oom || s->oom;
    return o;
}

/* \d \w \s as ASCII, as ECMA 262 has the first two. Negated (wide), \s is every
 * character ECMA 262 or Python's re count as white space, so [^\s] and \S match none of
 * them. */
static void set_add_class(cp_set *s, char cls, bool wide) {
    switch (cls) {
    case 'd': set_add(s, '0', '9'); break;
    case 'w': set_add(s, '0', '9'), set_add(s, 'A', 'Z'), set_add(s, 'a', 'z'), set_add(s, '_', '_'); break;
    case 's':
        set_add(s, '\t', '\r'), set_add(s, ' ', ' ');
        if (!wide) break;
        set_add(s, 0x1c, 0x1f), set_add(s, 0x85, 0x85), set_add(s, 0xa0, 0xa0), set_add(s, 0x1680, 0x1680);
        set_add(s, 0x2000, 0x200a), set_add(s, 0x2028, 0x2029), set_add(s, 0x202f, 0x202f);
        set_add(s, 0x205f, 0x205f), set_add(s, 0x3000, 0x3000), set_add(s, 0xfeff, 0xfeff);
        break;
    }
}

typedef struct {
    conv *c;
    const char *s;
    size_t i, n;
} pat;

static uint32_t utf8_next(pat *p) { return ty_js_utf8_next(p->s, &p->i, p->n); }

static void put_utf8(ty_buf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xc0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xe0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    else
        u[0] = (char)(0xf0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    ty_buf_append(b, u, n);
}

/* The JSON string text of one character (inside the quotes): \" \\ and the control
 * escapes, everything else as itself. */
static void put_json_char(ty_buf *b, uint32_t cp) {
    static const char short_esc[] = {['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
    if (cp == '"') ty_js_put(b, "\\\"");
    else if (cp == '\\') ty_js_put(b, "\\\\");
    else if (cp < 0x20 && cp < sizeof short_esc && short_esc[cp]) ty_js_putf(b, "\\%c", short_esc[cp]);
    else if (cp < 0x20) ty_js_putf(b, "\\u%04x", (unsigned)cp);
    else put_utf8(b, cp);
}

/* An expression for the JSON string text of any one character of the set: the
 * characters JSON writes as themselves in a class, the others as their escapes. Control
 * characters without a short escape are matched (as \u00XX) only when the set holds
 * all 32. */
static bool put_set(pat *p, ty_buf *b, cp_set *s) {
    set_normalize(s);
    cp_set special = {0};
    set_add(&special, 0, 0x1f);
    set_add(&special, '"', '"');
    set_add(&special, '\\', '\\');
    /* raw = s minus special, written as a class or, when shorter, a negated class */
    set_normalize(&special);
    cp_set plain = set_complement(&special);
    cp_set raw = {0};
    for (size_t i = 0, j = 0; i < s->n && j < plain.n;) {
        uint32_t lo = s->r[i].lo > plain.r[j].lo ? s->r[i].lo : plain.r[j].lo;
        uint32_t hi = s->r[i].hi < plain.r[j].hi ? s->r[i].hi : plain.r[j].hi;
        if (lo <= hi) set_add(&raw, lo, hi);
        if (s->r[i].hi < plain.r[j].hi) i++;
        else j++;
    }
    free(plain.r);
    raw.oom = raw.oom || plain.oom;
    set_normalize(&raw);
    cp_set neg = set_complement(&raw);
    bool bad = s->oom || special.oom || raw.oom || neg.oom;
    ty_buf alt = {0};
    int n_alt = 0;
    if (!bad && raw.n) {
        bool negated = neg.n < raw.n;
        const cp_set *w = negated ? &neg : &raw;
        ty_js_put(&alt, negated ? "[^" : "[");
        for (size_t i = 0; i < w->n; i++) {
            ty_js_put_class_char(&alt, w->r[i].lo);
            if (w->r[i].hi != w->r[i].lo) ty_js_put(&alt, "-"), ty_js_put_class_char(&alt, w->r[i].hi);
        }
        ty_js_put(&alt, "]");
        n_alt++;
    }
    if (set_has(s, '"')) ty_js_put(&alt, n_alt++ ? " | \"\\\\\\\"\"" : "\"\\\\\\\"\"");
    if (set_has(s, '\\')) ty_js_put(&alt, n_alt++ ? " | \"\\\\\\\\\"" : "\"\\\\\\\\\"");
    bool all_controls = true;
    for (uint32_t x = 0; x < 0x20; x++) all_controls = all_controls && set_has(s, x);
    static const struct {
        uint32_t cp;
        const char *lit;
    } short_esc[] = {{'\b', "\"\\\\b\""}, {'\t', "\"\\\\t\""}, {'\n', "\"\\\\n\""}, {'\f', "\"\\\\f\""}, {'\r', "\"\\\\r\""}};
    for (size_t i = 0; i < 5; i++)
        if (set_has(s, short_esc[i].cp)) {
            if (n_alt++) ty_js_put(&alt, " | ");
            ty_js_put(&alt, short_esc[i].lit);
        }
    if (all_controls) ty_js_put(&alt, n_alt++ ? " | \"\\\\u00\" [01] [0-9a-fA-F]" : "\"\\\\u00\" [01] [0-9a-fA-F]");
    free(special.r);
    free(raw.r);
    free(neg.r);
    if (bad || alt.oom) {
        free(alt.v);
        return ty_js_oom(p->c);
    }
    if (!n_alt) {
        free(alt.v);
        return ty_js_fail_at(p->c, TOY_ERR_INVALID, "pattern", "a character class of the pattern matches no character");
    }
    if (n_alt > 1) ty_js_put(b, "( ");
    ty_js_put(b, alt.v);
    if (n_alt > 1) ty_js_put(b, " )");
    free(alt.v);
    return true;
}

static bool pat_fail(pat *p, const char *what) {
    return ty_js_fail_at(p->c, TOY_ERR_UNSUPPORTED, "pattern", "%s at offset %zu of the pattern is not supported", what, p->i);
}

/* Reads hex digits of an escape (\xHH, \uHHHH). */
static bool pat_hex(pat *p, int digits, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        if (p->i >= p->n) return pat_fail(p, "a short hex escape");
        char ch = p->s[p->i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0) return pat_fail(p, "a bad hex escape");
        v = v * 16 + (uint32_t)d;
        p->i++;
    }
    *out = v;
    return true;
}

/* An escape after '\' (already read): a class letter in *cls, else one character. */
static bool pat_escape(pat *p, bool in_class, char *cls, uint32_t *cp) {
    *cls = 0;
    if (p->i >= p->n) return pat_fail(p, "a '\\' at the end");
    uint32_t ch = utf8_next(p);
    switch (ch) {
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S': *cls = (char)ch; return true;
    case 'n': *cp = '\n'; return true;
    case 't': *cp = '\t'; return true;
    case 'r': *cp = '\r'; return true;
    case 'f': *cp = '\f'; return true;
    case 'v': *cp = '\v'; return true;
    case '0': *cp = 0; return true;
    case 'x': return pat_hex(p, 2, cp);
    case 'u': return pat_hex(p, 4, cp);
    case 'b':
        if (in_class) return *cp = '\b', true;
        return p->i--, pat_fail(p, "the word boundary \\b");
    default: break;
    }
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '1' && ch <= '9')) {
        char what[48];
        snprintf(what, sizeof what, "the escape \\%c", (char)ch);
        p->i--;
        return pat_fail(p, what);
    }
    *cp = ch; /* an escaped punctuation character stands for itself */
    return true;
}

static bool pat_class(pat *p, ty_buf *b) {
    cp_set s = {0};
    bool negated = p->i < p->n && p->s[p->i] == '^';
    if (negated) p->i++;
    bool first = true, ok = true;
    for (;;) {
        if (p->i >= p->n) {
            ok = pat_fail(p, "an unterminated '['");
            break;
        }
        uint32_t lo = utf8_next(p);
        if (lo == ']' && !first) break;
        first = false;
        if (lo == '\\') {
            char cls;
            if (!(ok = pat_escape(p, true, &cls, &lo))) break;
            if (cls >= 'A' && cls <= 'Z') {
                ok = pat_fail(p, "a negated class escape inside [...]");
                break;
            }
            if (cls) {
                set_add_class(&s, cls, negated);
                continue;
            }
        }
        uint32_t hi = lo;
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            hi = utf8_next(p);
            if (hi == '\\') {
                char cls;
                if (!(ok = pat_escape(p, true, &cls, &hi))) break;
                if (cls) {
                    ok = pat_fail(p, "a class escape as the end of a range");
                    break;
                }
            }
            if (hi < lo) {
                ok = ty_js_fail_at(p->c, TOY_ERR_INVALID, "pattern", "the range at offset %zu of the pattern is reversed", p->i);
                break;
            }
        }
        set_add(&s, lo, hi);
    }
    if (ok) {
        set_normalize(&s);
        if (negated) {
            cp_set t = set_complement(&s);
            free(s.r);
            s = t;
        }
        ok = put_set(p, b, &s);
    }
    free(s.r);
    return ok;
}

/* One character, a class letter, '.', as an expression. */
static bool pat_class_letter(pat *p, ty_buf *b, char cls) {
    cp_set s = {0};
    if (cls == '.') {
        set_add(&s, '\n', '\n');
    } else {
        set_add_class(&s, (char)(cls | 0x20), cls >= 'A' && cls <= 'Z');
    }
    set_normalize(&s);
    if (cls == '.' || (cls >= 'A' && cls <= 'Z')) {
        cp_set t = set_complement(&s);
        free(s.r);
        s = t;
    }
    bool ok = put_set(p, b, &s);
    free(s.r);
    return ok;
}

/* The quantifier {m}, {m,} or {m,n} at p->i: its end in *end, -1 in *m when there is none
 * (then '{' is a literal character). */
static void pat_braces(const pat *p, size_t i, long long *m, long long *n, size_t *end) {
    *m = *n = -1;
    size_t j = i + 1;
    if (i >= p->n || p->s[i] != '{' || j >= p->n || p->s[j] < '0' || p->s[j] > '9') return;
    long long a = 0, b = -1;
    for (; j < p->n && p->s[j] >= '0' && p->s[j] <= '9'; j++)
        if (a < 1000000) a = a * 10 + (p->s[j] - '0');
    if (j < p->n && p->s[j] == ',') {
        j++;
        if (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') {
            b = 0;
            for (; j < p->n && p->s[j] >= '0' && p->s[j] <= '9'; j++)
                if (b < 1000000) b = b * 10 + (p->s[j] - '0');
        }
    } else {
        b = a;
    }
    if (j >= p->n || p->s[j] != '}') return;
    *m = a;
    *n = b;
    *end = j + 1;
}

static bool pat_is_quantifier(const pat *p, size_t i) {
    if (i >= p->n) return false;
    if (p->s[i] == '*' || p->s[i] == '+' || p->s[i] == '?') return true;
    long long m, n;
    size_t end;
    pat_braces(p, i, &m, &n, &end);
    return m >= 0;
}

/* A quantifier after an atom, as GBNF, or "" when there is none. */
static bool pat_quantifier(pat *p, char *q, size_t size) {
    q[0] = 0;
    if (!pat_is_quantifier(p, p->i)) return true;
    char ch = p->s[p->i];
    if (ch == '{') {
        long long m, n;
        size_t end;
        pat_braces(p, p->i, &m, &n, &end);
        if (m >= 100000 || n >= 100000) return pat_fail(p, "a repetition count of 100000 or more");
        if (n >= 0 && n < m)
            return ty_js_fail_at(p->c, TOY_ERR_INVALID, "pattern", "the repetition at offset %zu of the pattern has min > max", p->i);
        p->i = end;
        if (n < 0) snprintf(q, size, "{%lld,}", m);
        else if (n == m) snprintf(q, size, "{%lld}", m);
        else snprintf(q, size, "{%lld,%lld}", m, n);
    } else {
        q[0] = ch, q[1] = 0;
        p->i++;
    }
    if (p->i < p->n && p->s[p->i] == '?') p->i++; /* lazy: the same strings */
    if (pat_is_quantifier(p, p->i)) return pat_fail(p, "a quantifier after a quantifier");
    return true;
}

static bool pat_alternatives(pat *p, ty_buf *out, bool top, bool group, bool *nullable);

/* A sequence up to '|', ')' or the end. At the top, '^' may open it and '$' close it;
 * without them it may have any text around. *nullable: whether it matches "". */
static bool pat_sequence(pat *p, ty_buf *out, bool top, bool *nullable) {
    *nullable = true;
    bool anchored_start = false, anchored_end = false;
    if (p->i < p->n && p->s[p->i] == '^') {
        if (!top) return pat_fail(p, "'^' inside a group");
        anchored_start = true;
        p->i++;
    }
    ty_buf seq = {0}, lit = {0};
    bool ok = true;
    while (ok && p->i < p->n && p->s[p->i] != '|' && p->s[p->i] != ')') {
        char ch = p->s[p->i];
        if (ch == '$') {
            p->i++;
            if (!top || (p->i < p->n && p->s[p->i] != '|')) {
                p->i--;
                ok = pat_fail(p, "'$' before the end of the pattern");
                break;
            }
            anchored_end = true;
            break;
        }
        if (ch == '^') {
            ok = pat_fail(p, "'^' after the start of the pattern");
            break;
        }
        if (ch == '*' || ch == '+' || ch == '?') {
            ok = pat_fail(p, "a quantifier with nothing to repeat");
            break;
        }
        ty_buf atom = {0};
        bool is_char = false, atom_nullable = false;
        uint32_t cp = 0;
        if (ch == '(') {
            p->i++;
            if (p->i < p->n && p->s[p->i] == '?') {
                size_t j = p->i + 1;
                if (j < p->n && p->s[j] == 'P') j++;
                bool named = j < p->n && p->s[j] == '<' && j + 1 < p->n && p->s[j + 1] != '=' && p->s[j + 1] != '!';
                const char *gt = named ? memchr(p->s + j, '>', p->n - j) : NULL;
                if (p->i + 1 < p->n && p->s[p->i + 1] == ':') {
                    p->i += 2;
                } else if (gt) {
                    p->i = (size_t)(gt - p->s) + 1; /* a named group: a group */
                } else {
                    char what[64];
                    snprintf(what, sizeof what, "the group (?%.2s", p->s + p->i + 1);
                    ok = pat_fail(p, what);
                }
            }
            ty_buf inner = {0};
            if (ok) ok = pat_alternatives(p, &inner, false, true, &atom_nullable);
            if (ok && (p->i >= p->n || p->s[p->i] != ')')) ok = pat_fail(p, "an unbalanced '('");
            if (ok) {
                p->i++;
                if (inner.n) ty_js_put(&atom, inner.v);
            }
            free(inner.v);
        } else if (ch == '[') {
            p->i++;
            ok = pat_class(p, &atom);
        } else if (ch == '.') {
            p->i++;
            ok = pat_class_letter(p, &atom, '.');
        } else if (ch == '\\') {
            p->i++;
            char cls;
            ok = pat_escape(p, false, &cls, &cp);
            if (ok && cls) ok = pat_class_letter(p, &atom, cls);
            else is_char = true;
        } else {
            cp = utf8_next(p);
            is_char = true;
        }
        char q[48] = "";
        size_t at = p->i;
        if (ok) ok = pat_quantifier(p, q, sizeof q);
        size_t ql = strlen(q);
        /* a grammar engine expands X* into a rule that calls itself after X: with an X
           that can be empty, that is left recursion */
        if (ok && atom_nullable && ql && (q[0] == '*' || q[0] == '+' || (ql > 2 && q[ql - 2] == ','))) {
            p->i = at;
            ok = pat_fail(p, "repeating a group that can match the empty string");
        }
        if (ok) *nullable = *nullable && ((!is_char && (atom_nullable || !atom.n)) || q[0] == '*' || q[0] == '?' ||
                                          !strncmp(q, "{0", 2));
        if (ok && ql && atom.n && strchr("?*+}", atom.v[atom.n - 1])) { /* one operator after another */
            ty_buf w = {0};
            ty_js_put(&w, "( ");
            ty_js_put(&w, atom.v);
            ty_js_put(&w, " )");
            free(atom.v);
            atom = w;
        }
        if (ok && is_char && !q[0]) {
            put_json_char(&lit, cp);
        } else if (ok) {
            if (lit.n) {
                if (seq.n) ty_js_put(&seq, " ");
                ty_js_put_lit(&seq, lit.v, lit.n);
                lit.n = 0;
            }
            if (is_char) {
                ty_buf one = {0};
                put_json_char(&one, cp);
                ty_js_put_lit(&atom, one.v, one.n);
                if (one.oom) atom.oom = true;
                free(one.v);
            }
            if (atom.n) {
                if (seq.n) ty_js_put(&seq, " ");
                ty_js_put(&seq, atom.v);
                ty_js_put(&seq, q);
            }
        }
        if (atom.oom) ok = ty_js_oom(p->c);
        free(atom.v);
    }
    if (ok && lit.n) {
        if (seq.n) ty_js_put(&seq, " ");
        ty_js_put_lit(&seq, lit.v, lit.n);
    }
    const char *ch_rule = ok && top && !(anchored_start && anchored_end) ? ty_js_prim(p->c, PRIM_CHAR) : "";
    if (!ch_rule) ok = false;
    if (ok && top) {
        if (!anchored_start) ty_js_put(out, ch_rule), ty_js_put(out, "*"), ty_js_put(out, seq.n || !anchored_end ? " " : "");
        if (seq.n) ty_js_put(out, seq.v);
        if (!anchored_end) {
            if (seq.n) ty_js_put(out, " ");
            ty_js_put(out, ch_rule), ty_js_put(out, "*");
        }
    } else if (ok && seq.n) {
        ty_js_put(out, seq.v);
    }
    if (seq.oom || lit.oom) ok = ty_js_oom(p->c);
    free(seq.v);
    free(lit.v);
    return ok;
}

/* Alternatives separated by '|'; an empty one makes the whole optional. A group is
 * always in parentheses. */
static bool pat_alternatives(pat *p, ty_buf *out, bool top, bool group, bool *nullable) {
    ty_buf alts = {0};
    int n = 0;
    bool empty = false, ok = true;
    *nullable = false;
    for (;;) {
        ty_buf one = {0};
        bool null_one;
        ok = pat_sequence(p, &one, top, &null_one);
        *nullable = *nullable || null_one;
        if (ok && one.n) {
            if (n++) ty_js_put(&alts, " | ");
            ty_js_put(&alts, one.v);
        } else if (ok) {
            empty = true;
        }
        free(one.v);
        if (!ok || p->i >= p->n || p->s[p->i] != '|') break;
        p->i++;
    }
    if (ok && n) {
        bool wrap = n > 1 || empty || group;
        if (wrap) ty_js_put(out, "( ");
        ty_js_put(out, alts.v);
        if (wrap) ty_js_put(out, empty ? " )?" : " )");
    }
    if (alts.oom) ok = ty_js_oom(p->c);
    free(alts.v);
    return ok;
}

bool ty_js_pattern_body(conv *c, const char *pattern, ty_buf *b) {
    pat p = {c, pattern, 0, strlen(pattern)};
    ty_buf e = {0};
    bool nullable;
    bool ok = pat_alternatives(&p, &e, true, false, &nullable);
    if (ok && p.i < p.n) ok = pat_fail(&p, "an unbalanced ')'");
    if (ok) {
        ty_js_put(b, "\"\\\"\" ");
        if (e.n) ty_js_put(b, e.v), ty_js_put(b, " ");
        ty_js_put(b, "\"\\\"\" ");
        ok = ty_js_put_prim(c, b, PRIM_SPACE);
    }
    if (e.oom) ok = ty_js_oom(c);
    free(e.v);
    return ok;
}
