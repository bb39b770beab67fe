/* jinja_value.c — the values a template computes with, as Python holds them: their
 * memory (an arena per render), truth, equality and order, str() and repr(), json.dumps,
 * strings by code point, and a render's failure, limits, scratch buffers and arguments. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"
#include "unicode.h"

/* ---------------------------------------------------------------- the arena */

struct arena_block {
    arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *ty_arena_alloc(arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->limit && (n > a->limit || a->used > a->limit - n)) {
        if (a->owner) ty_jx_fail(a->owner, "the template used more than %zu MiB of memory", a->limit >> 20);
        return NULL;
    }
    arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        b = malloc(sizeof *b + cap);
        if (!b) {
            if (a->owner) ty_jx_fail(a->owner, "no memory");
            return NULL;
        }
        b->used = 0;
        b->cap = cap;
        /* a block too big to share goes behind the current one, which keeps its room */
        if (a->head && cap == n) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += n;
    a->used += n;
    return p;
}

void ty_arena_free(arena *a) {
    for (arena_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
    a->used = 0;
}

/* ---------------------------------------------------------------- construction */

jv ty_jv_undefined(const char *what) { return (jv){.kind = JV_UNDEFINED, .undef = what}; }
jv ty_jv_bool(bool b) { return (jv){.kind = JV_BOOL, .b = b}; }
jv ty_jv_int(int64_t i) { return (jv){.kind = JV_INT, .i = i}; }
jv ty_jv_float(double f) { return (jv){.kind = JV_FLOAT, .f = f}; }

static size_t count_cp(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static jv str_in(arena *a, const char *s, size_t len) {
    jstr *p = ty_arena_alloc(a, sizeof *p + len + 1);
    if (!p) return JV_NONE_V;
    p->len = len;
    p->n_cp = count_cp(s, len);
    if (len) memcpy(p->p, s, len);
    p->p[len] = 0;
    return (jv){.kind = JV_STR, .s = p};
}

jv ty_jv_const_str(arena *a, const char *s, size_t len) { return str_in(a, s, len); }
jv ty_jv_str(jx *x, const char *s, size_t len) { return str_in(&x->mem, s, len); }
jv ty_jv_cstr(jx *x, const char *s) { return ty_jv_str(x, s, strlen(s)); }

jv ty_jv_list(jx *x, size_t cap) {
    jlist *l = ty_arena_alloc(&x->mem, sizeof *l);
    l->n = 0;
    l->cap = cap;
    l->v = cap ? ty_arena_alloc(&x->mem, cap * sizeof *l->v) : NULL;
    return (jv){.kind = JV_LIST, .l = l};
}

void ty_jv_list_push(jx *x, jv list, jv item) {
    jlist *l = list.l;
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 4;
        jv *v = ty_arena_alloc(&x->mem, cap * sizeof *v);
        if (l->n) memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = item;
}

jv ty_jv_dict(jx *x, size_t cap) {
    jdict *d = ty_arena_alloc(&x->mem, sizeof *d);
    d->n = 0;
    d->cap = cap;
    d->k = cap ? ty_arena_alloc(&x->mem, cap * sizeof *d->k) : NULL;
    d->v = cap ? ty_arena_alloc(&x->mem, cap * sizeof *d->v) : NULL;
    return (jv){.kind = JV_DICT, .d = d};
}

static const jv *dict_find(const jdict *d, jv key) {
    for (size_t i = 0; i < d->n; i++)
        if (ty_jv_equal(d->k[i], key)) return &d->v[i];
    return NULL;
}

void ty_jv_dict_set(jx *x, jv dict, jv key, jv value) {
    jdict *d = dict.kind == JV_NAMESPACE ? dict.o->ns : dict.d;
    jv *slot = (jv *)dict_find(d, key);
    if (slot) {
        *slot = value;
        return;
    }
    if (d->n == d->cap) {
        const size_t cap = d->cap ? 2 * d->cap : 4;
        jv *k = ty_arena_alloc(&x->mem, cap * sizeof *k), *v = ty_arena_alloc(&x->mem, cap * sizeof *v);
        if (d->n) {
            memcpy(k, d->k, d->n * sizeof *k);
            memcpy(v, d->v, d->n * sizeof *v);
        }
        d->k = k;
        d->v = v;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n++] = value;
}

const jv *ty_jv_dict_get(jv dict, jv key) {
    if (dict.kind == JV_NAMESPACE) return dict_find(dict.o->ns, key);
    return dict.kind == JV_DICT ? dict_find(dict.d, key) : NULL;
}

const jv *ty_jv_dict_get_str(jv dict, const char *key) {
    const jdict *d = dict.kind == JV_NAMESPACE ? dict.o->ns : dict.kind == JV_DICT ? dict.d : NULL;
    if (!d) return NULL;
    const size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == JV_STR && d->k[i].s->len == n && !memcmp(d->k[i].s->p, key, n)) return &d->v[i];
    return NULL;
}

jv ty_jv_of_json(jx *x, const json_t *j) {
    ty_jx_step(x);
    switch (json_typeof(j)) {
    case JSON_NULL: return JV_NONE_V;
    case JSON_TRUE: return JV_TRUE_V;
    case JSON_FALSE: return JV_FALSE_V;
    case JSON_INTEGER: return ty_jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return ty_jv_float(json_real_value(j));
    case JSON_STRING: return ty_jv_str(x, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        jv l = ty_jv_list(x, json_array_size(j));
        for (size_t i = 0; i < json_array_size(j); i++) ty_jv_list_push(x, l, ty_jv_of_json(x, json_array_get(j, i)));
        return l;
    }
    case JSON_OBJECT: {
        jv d = ty_jv_dict(x, json_object_size(j));
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)j, key, v) ty_jv_dict_set(x, d, ty_jv_cstr(x, key), ty_jv_of_json(x, v));
        return d;
    }
    }
    return JV_NONE_V;
}

/* ---------------------------------------------------------------- truth, equality, order */

bool ty_jv_is_number(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }

double ty_jv_number(jv v) {
    return v.kind == JV_FLOAT ? v.f : v.kind == JV_INT ? (double)v.i : v.kind == JV_BOOL ? (double)v.b : 0;
}

const char *ty_jv_type_name(jv v) {
    switch ((jv_kind)v.kind) {
    case JV_UNDEFINED: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return v.markup ? "Markup" : "str";
    case JV_LIST: {
        static const char *const names[] = {"list", "tuple", "range", "generator", "list_reverseiterator", "dict_items",
                                            "dict_keys", "dict_values"};
        return names[v.seq];
    }
    case JV_DICT: return "dict";
    case JV_NAMESPACE: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "builtin_function_or_method";
    case JV_LOOP: return "LoopContext";
    case JV_CYCLER: return "Cycler";
    case JV_JOINER: return "Joiner";
    }
    return "object";
}

size_t ty_jv_len(jx *x, jv v) {
    switch (v.kind) {
    case JV_UNDEFINED: return 0;
    case JV_STR: return v.s->n_cp;
    case JV_LIST:
        if (v.seq == SEQ_GEN || v.seq == SEQ_REVITER) ty_jx_fail(x, "object of type '%s' has no len()", ty_jv_type_name(v));
        return v.l->n;
    case JV_DICT: return v.d->n;
    case JV_NAMESPACE: return v.o->ns->n;
    default: ty_jx_fail(x, "object of type '%s' has no len()", ty_jv_type_name(v));
    }
}

void ty_jv_need_hashable(jx *x, jv v) {
    if (v.kind == JV_DICT || v.kind == JV_NAMESPACE ||
        (v.kind == JV_LIST && (v.seq == SEQ_LIST || v.seq == SEQ_ITEMS || v.seq == SEQ_KEYS)))
        ty_jx_fail(x, "unhashable type: '%s'", ty_jv_type_name(v));
}

bool ty_jv_truthy(jx *x, jv v) {
    switch (v.kind) {
    case JV_UNDEFINED:
    case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.s->len != 0;
    case JV_LIST: return v.seq == SEQ_GEN || v.seq == SEQ_REVITER || v.l->n != 0;
    case JV_DICT:
    case JV_NAMESPACE: return ty_jv_len(x, v) != 0;
    default: return true;
    }
}

static bool equal_at(jv a, jv b, int depth);

bool ty_jv_equal(jv a, jv b) { return equal_at(a, b, 0); }

/* values nested deeper than this compare unequal, so the C stack stays bounded */
enum { MAX_VALUE_DEPTH = 1000 };

static bool equal_at(jv a, jv b, int depth) {
    if (depth > MAX_VALUE_DEPTH) return false;
    if (ty_jv_is_number(a) && ty_jv_is_number(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) return (a.kind == JV_INT ? a.i : a.b) == (b.kind == JV_INT ? b.i : b.b);
        return ty_jv_number(a) == ty_jv_number(b);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case JV_UNDEFINED:
    case JV_NONE: return true;
    case JV_STR: return a.s->len == b.s->len && !memcmp(a.s->p, b.s->p, a.s->len);
    case JV_LIST:
        if (a.seq > SEQ_RANGE || b.seq > SEQ_RANGE) return a.l == b.l;
        if (a.seq != b.seq || a.l->n != b.l->n) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!equal_at(a.l->v[i], b.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            const jv *o = dict_find(b.d, a.d->k[i]);
            if (!o || !equal_at(a.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    default: return a.o == b.o;
    }
}

static int compare_at(jx *x, jv a, jv b, int depth);

int ty_jv_compare(jx *x, jv a, jv b) { return compare_at(x, a, b, 0); }

static int compare_at(jx *x, jv a, jv b, int depth) {
    if (depth > MAX_VALUE_DEPTH) ty_jx_fail(x, "a value nested more than %d levels deep", MAX_VALUE_DEPTH);
    if (ty_jv_is_number(a) && ty_jv_is_number(b)) {
        if (a.kind == JV_INT && b.kind == JV_INT) return a.i < b.i ? -1 : a.i > b.i;
        const double p = ty_jv_number(a), q = ty_jv_number(b);
        return p < q ? -1 : p > q;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        /* UTF-8's byte order is the code points' order */
        const size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
        const int c = memcmp(a.s->p, b.s->p, n);
        return c ? (c < 0 ? -1 : 1) : (a.s->len < b.s->len ? -1 : a.s->len > b.s->len);
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST && a.seq == b.seq && a.seq <= SEQ_TUPLE) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (ty_jv_equal(a.l->v[i], b.l->v[i])) continue;
            return compare_at(x, a.l->v[i], b.l->v[i], depth + 1);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    ty_jx_fail(x, "'<' is not supported between instances of '%s' and '%s'", ty_jv_type_name(a), ty_jv_type_name(b));
}

/* ---------------------------------------------------------------- str() and repr() */

void ty_jv_write_float(ty_buf *b, double f) {
    if (isnan(f)) {
        ty_buf_append(b, "nan", 3);
        return;
    }
    if (isinf(f)) {
        if (f < 0) ty_buf_append(b, "-inf", 4);
        else ty_buf_append(b, "inf", 3);
        return;
    }
    /* the shortest digits that read back as f, laid out as Python's repr lays them */
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    const bool neg = e[0] == '-';
    char digits[24];
    int nd = 0;
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    const int exp10 = atoi(p + 1); /* f = d.ddd x 10^exp10 */
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char out[64];
    int o = 0;
    if (neg) out[o++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int k = 0; k < -exp10 - 1; k++) out[o++] = '0';
            for (int k = 0; k < nd; k++) out[o++] = digits[k];
        } else {
            for (int k = 0; k <= exp10; k++) out[o++] = k < nd ? digits[k] : '0';
            out[o++] = '.';
            if (nd > exp10 + 1)
                for (int k = exp10 + 1; k < nd; k++) out[o++] = digits[k];
            else
                out[o++] = '0';
        }
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int k = 1; k < nd; k++) out[o++] = digits[k];
        }
        o += snprintf(out + o, sizeof out - (size_t)o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
    ty_buf_append(b, out, (size_t)o);
}

static void write_int(ty_buf *b, int64_t i) {
    char s[24];
    ty_buf_append(b, s, (size_t)snprintf(s, sizeof s, "%lld", (long long)i));
}

/* Python's str.isprintable, close enough for repr: controls, separators other than the
 * space, format characters, surrogates and private use are escaped */
static bool printable(uint32_t c) {
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
    if (c < 0x7F) return true;
    const uint16_t f = ty_unicode_flags(c);
    if (f & (TY_UCD_CONTROL | TY_UCD_UNDEFINED)) return false;
    if ((f & TY_UCD_SEPARATOR) && c != 0x20) return false;
    return true;
}

static void write_str_repr(ty_buf *b, const jstr *s) {
    const bool has_single = memchr(s->p, '\'', s->len) != NULL, has_double = memchr(s->p, '"', s->len) != NULL;
    const char q = has_single && !has_double ? '"' : '\'';
    ty_buf_append(b, &q, 1);
    for (size_t i = 0; i < s->len;) {
        const size_t start = i;
        const uint32_t c = ty_utf8_decode(s->p, s->len, &i);
        char esc[16];
        if (c == (uint32_t)q || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            ty_buf_append(b, esc, 2);
        } else if (c == '\n') {
            ty_buf_append(b, "\\n", 2);
        } else if (c == '\r') {
            ty_buf_append(b, "\\r", 2);
        } else if (c == '\t') {
            ty_buf_append(b, "\\t", 2);
        } else if (!printable(c)) {
            const int n = c < 0x100 ? snprintf(esc, sizeof esc, "\\x%02x", c)
                        : c < 0x10000 ? snprintf(esc, sizeof esc, "\\u%04x", c)
                                      : snprintf(esc, sizeof esc, "\\U%08x", c);
            ty_buf_append(b, esc, (size_t)n);
        } else {
            ty_buf_append(b, s->p + start, i - start);
        }
    }
    ty_buf_append(b, &q, 1);
}

static void write_any(jx *x, ty_buf *b, jv v, bool repr, int depth);

static void write_seq(jx *x, ty_buf *b, jv v, int depth) {
    if (v.seq == SEQ_GEN || v.seq == SEQ_REVITER) { /* CPython writes an address here */
        TOY_BUF_PUT(b, "<", ty_jv_type_name(v), v.seq == SEQ_GEN ? " object" : "", " at 0x7f0000000000>");
        return;
    }
    if (v.seq == SEQ_RANGE) {
        char r[80];
        const int64_t *p = v.l->range;
        const int n = p[2] == 1 ? snprintf(r, sizeof r, "range(%lld, %lld)", (long long)p[0], (long long)p[1])
                                : snprintf(r, sizeof r, "range(%lld, %lld, %lld)", (long long)p[0], (long long)p[1],
                                           (long long)p[2]);
        ty_buf_append(b, r, (size_t)n);
        return;
    }
    if (v.seq >= SEQ_ITEMS) TOY_BUF_PUT(b, ty_jv_type_name(v), "(");
    const bool tuple = v.seq == SEQ_TUPLE;
    ty_buf_append(b, tuple ? "(" : "[", 1);
    for (size_t i = 0; i < v.l->n; i++) {
        if (i) ty_buf_append(b, ", ", 2);
        write_any(x, b, v.l->v[i], true, depth + 1);
    }
    if (tuple && v.l->n == 1) ty_buf_append(b, ",", 1);
    ty_buf_append(b, tuple ? ")" : "]", 1);
    if (v.seq >= SEQ_ITEMS) ty_buf_append(b, ")", 1);
}

static void write_any(jx *x, ty_buf *b, jv v, bool repr, int depth) {
    ty_jx_step(x);
    if (depth > MAX_VALUE_DEPTH) ty_jx_fail(x, "a value nested more than %d levels deep", MAX_VALUE_DEPTH);
    switch ((jv_kind)v.kind) {
    case JV_UNDEFINED:
        if (repr) ty_buf_append(b, "Undefined", 9);
        return;
    case JV_NONE: ty_buf_append(b, "None", 4); return;
    case JV_BOOL: v.b ? ty_buf_append(b, "True", 4) : ty_buf_append(b, "False", 5); return;
    case JV_INT: write_int(b, v.i); return;
    case JV_FLOAT: ty_jv_write_float(b, v.f); return;
    case JV_STR:
        if (repr && v.markup) ty_buf_append(b, "Markup(", 7);
        if (repr) write_str_repr(b, v.s);
        else ty_buf_append(b, v.s->p, v.s->len);
        if (repr && v.markup) ty_buf_append(b, ")", 1);
        return;
    case JV_LIST: write_seq(x, b, v, depth); return;
    case JV_DICT:
        ty_buf_append(b, "{", 1);
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) ty_buf_append(b, ", ", 2);
            write_any(x, b, v.d->k[i], true, depth + 1);
            ty_buf_append(b, ": ", 2);
            write_any(x, b, v.d->v[i], true, depth + 1);
        }
        ty_buf_append(b, "}", 1);
        return;
    case JV_NAMESPACE: {
        ty_buf_append(b, "<Namespace {", 12);
        for (size_t i = 0; i < v.o->ns->n; i++) {
            if (i) ty_buf_append(b, ", ", 2);
            write_any(x, b, v.o->ns->k[i], true, depth + 1);
            ty_buf_append(b, ": ", 2);
            write_any(x, b, v.o->ns->v[i], true, depth + 1);
        }
        ty_buf_append(b, "}>", 2);
        return;
    }
    case JV_MACRO:
        if (v.o->macro->kind == N_MACRO) TOY_BUF_PUT(b, "<Macro '", v.o->macro->name, "'>");
        else ty_buf_append(b, "<Macro anonymous>", 17);
        return;
    case JV_FUNC: TOY_BUF_PUT(b, "<built-in function ", v.o->fn->name, ">"); return;
    case JV_LOOP: ty_buf_append(b, "<LoopContext>", 13); return;
    case JV_CYCLER: ty_buf_append(b, "<Cycler>", 8); return;
    case JV_JOINER: ty_buf_append(b, "<Joiner>", 8); return;
    }
}

void ty_jv_write_str(jx *x, ty_buf *b, jv v) { write_any(x, b, v, false, 0); }
void ty_jv_write_repr(jx *x, ty_buf *b, jv v) { write_any(x, b, v, true, 0); }

jv ty_jv_to_str(jx *x, jv v) {
    if (v.kind == JV_STR) return v;
    ty_buf *b = ty_jx_buf(x);
    ty_jv_write_str(x, b, v);
    if (b->oom) {
        ty_jx_fail(x, "no memory");
    }
    jv s = ty_jv_str(x, b->v ? b->v : "", b->n);
    return s;
}

void ty_jv_escape(ty_buf *b, const char *s, size_t n) {
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = s[i] == '&' ? "&amp;" : s[i] == '<' ? "&lt;" : s[i] == '>' ? "&gt;"
                      : s[i] == '"' ? "&#34;" : s[i] == '\'' ? "&#39;" : NULL;
        if (!e) continue;
        ty_buf_append(b, s + run, i - run);
        ty_buf_append(b, e, strlen(e));
        run = i + 1;
    }
    ty_buf_append(b, s + run, n - run);
}

jv ty_jv_markup(jv s) {
    if (s.kind == JV_STR) s.markup = true;
    return s;
}

/* ---------------------------------------------------------------- json.dumps */

static void json_text(ty_buf *b, const char *s, size_t n) {
    ty_buf_append(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) snprintf(u, sizeof u, "\\u%04x", c), esc = u;
        if (!esc) continue;
        ty_buf_append(b, s + run, i - run);
        ty_buf_append(b, esc, strlen(esc));
        run = i + 1;
    }
    ty_buf_append(b, s + run, n - run);
    ty_buf_append(b, "\"", 1);
}

static void json_newline(ty_buf *b, const char *indent, int level) {
    ty_buf_append(b, "\n", 1);
    for (int i = 0; i < level; i++) ty_buf_append(b, indent, strlen(indent));
}


static void json_any(jx *x, ty_buf *b, jv v, const char *indent, const char *item_sep, const char *key_sep,
                     bool sort_keys, int level) {
    ty_jx_step(x);
    if (level > x->lim.max_depth) ty_jx_fail(x, "tojson: more than %d levels of nesting", x->lim.max_depth);
    switch ((jv_kind)v.kind) {
    case JV_NONE: ty_buf_append(b, "null", 4); return;
    case JV_BOOL: v.b ? ty_buf_append(b, "true", 4) : ty_buf_append(b, "false", 5); return;
    case JV_INT: write_int(b, v.i); return;
    case JV_FLOAT:
        if (isnan(v.f)) ty_buf_append(b, "NaN", 3);
        else if (isinf(v.f)) v.f < 0 ? ty_buf_append(b, "-Infinity", 9) : ty_buf_append(b, "Infinity", 8);
        else ty_jv_write_float(b, v.f);
        return;
    case JV_STR: json_text(b, v.s->p, v.s->len); return;
    case JV_LIST:
        if (v.seq > SEQ_TUPLE) ty_jx_fail(x, "Object of type %s is not JSON serializable", ty_jv_type_name(v));
        if (v.l->n == 0) {
            ty_buf_append(b, "[]", 2);
            return;
        }
        ty_buf_append(b, "[", 1);
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) ty_buf_append(b, item_sep, strlen(item_sep));
            if (indent) json_newline(b, indent, level + 1);
            json_any(x, b, v.l->v[i], indent, item_sep, key_sep, sort_keys, level + 1);
        }
        if (indent) json_newline(b, indent, level);
        ty_buf_append(b, "]", 1);
        return;
    case JV_DICT:
    case JV_NAMESPACE: {
        const jdict *d = v.kind == JV_DICT ? v.d : v.o->ns;
        if (v.kind == JV_NAMESPACE) ty_jx_fail(x, "Object of type Namespace is not JSON serializable");
        if (d->n == 0) {
            ty_buf_append(b, "{}", 2);
            return;
        }
        /* keys as json.dumps writes them: str as is, numbers, booleans and None as text */
        const jv **order = ty_arena_alloc(&x->mem, d->n * sizeof *order);
        jv *keys = ty_arena_alloc(&x->mem, d->n * sizeof *keys);
        for (size_t i = 0; i < d->n; i++) {
            jv k = d->k[i];
            if (k.kind == JV_BOOL) k = ty_jv_cstr(x, k.b ? "true" : "false");
            else if (k.kind == JV_NONE) k = ty_jv_cstr(x, "null");
            else if (k.kind == JV_INT || k.kind == JV_FLOAT) k = ty_jv_to_str(x, k);
            else if (k.kind != JV_STR) ty_jx_fail(x, "keys must be str, int, float, bool or None, not %s", ty_jv_type_name(k));
            keys[i] = k;
            order[i] = &keys[i];
        }
        /* sorted(dct.items()): by the keys as they are (an int and a str do not order) */
        for (size_t i = 1; sort_keys && i < d->n; i++)
            for (size_t j = i; j > 0 && ty_jv_compare(x, d->k[order[j] - keys], d->k[order[j - 1] - keys]) < 0; j--) {
                ty_jx_step(x);
                const jv *t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        ty_buf_append(b, "{", 1);
        for (size_t i = 0; i < d->n; i++) {
            const size_t at = (size_t)(order[i] - keys);
            if (i) ty_buf_append(b, item_sep, strlen(item_sep));
            if (indent) json_newline(b, indent, level + 1);
            json_text(b, keys[at].s->p, keys[at].s->len);
            ty_buf_append(b, key_sep, strlen(key_sep));
            json_any(x, b, d->v[at], indent, item_sep, key_sep, sort_keys, level + 1);
        }
        if (indent) json_newline(b, indent, level);
        ty_buf_append(b, "}", 1);
        return;
    }
    default: ty_jx_fail(x, "Object of type %s is not JSON serializable", ty_jv_type_name(v));
    }
}

void ty_jv_write_json(jx *x, ty_buf *b, jv v, const char *indent, const char *item_sep, const char *key_sep,
                   bool sort_keys) {
    json_any(x, b, v, indent, item_sep, key_sep, sort_keys, 0);
}

/* ---------------------------------------------------------------- iteration */

jv ty_jv_iter_list(jx *x, jv v) {
    switch (v.kind) {
    case JV_UNDEFINED: return ty_jv_list(x, 0);
    case JV_LIST:
        if (v.seq == SEQ_GEN || v.seq == SEQ_REVITER) { /* used up */
            jv copy = ty_jv_list(x, v.l->n);
            for (size_t i = 0; i < v.l->n; i++) ty_jv_list_push(x, copy, v.l->v[i]);
            v.l->n = 0;
            return copy;
        }
        return v;
    case JV_DICT:
    case JV_NAMESPACE: {
        const jdict *d = v.kind == JV_DICT ? v.d : v.o->ns;
        jv l = ty_jv_list(x, d->n);
        for (size_t i = 0; i < d->n; i++) ty_jv_list_push(x, l, d->k[i]);
        return l;
    }
    case JV_STR: {
        jv l = ty_jv_list(x, v.s->n_cp);
        for (size_t i = 0; i < v.s->len;) {
            const size_t start = i;
            ty_utf8_decode(v.s->p, v.s->len, &i);
            ty_jv_list_push(x, l, ty_jv_str(x, v.s->p + start, i - start));
        }
        return l;
    }
    default: ty_jx_fail(x, "'%s' object is not iterable", ty_jv_type_name(v));
    }
}

/* ---------------------------------------------------------------- strings by code point */

size_t ty_jstr_cp_offset(const jstr *s, size_t cp) {
    if (s->n_cp == s->len) return cp < s->len ? cp : s->len;
    size_t i = 0;
    for (size_t k = 0; k < cp && i < s->len; k++) {
        i++;
        while (i < s->len && ((unsigned char)s->p[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

jv ty_jv_str_slice(jx *x, jv s, int64_t start, int64_t stop, int64_t step) {
    const int64_t n = (int64_t)s.s->n_cp;
    if (step == 1) {
        const size_t a = ty_jstr_cp_offset(s.s, (size_t)start), b = ty_jstr_cp_offset(s.s, (size_t)stop);
        return b > a ? ty_jv_str(x, s.s->p + a, b - a) : ty_jv_str(x, "", 0);
    }
    ty_buf *out = ty_jx_buf(x);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (i < 0 || i >= n) break;
        const size_t a = ty_jstr_cp_offset(s.s, (size_t)i), b = ty_jstr_cp_offset(s.s, (size_t)i + 1);
        ty_buf_append(out, s.s->p + a, b - a);
    }
    jv r = ty_jv_str(x, out->v ? out->v : "", out->n);
    return r;
}

bool ty_ju_space(uint32_t c) {
    return (c >= 0x1C && c <= 0x1F) || (ty_unicode_flags(c) & TY_UCD_WHITESPACE);
}

uint32_t ty_ju_lower(uint32_t c) {
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    return ty_unicode_tolower(c);
}

/* The simple uppercase mapping: the inverse of the lowercase table, the smallest code
 * point where several lower to one (K, not the Kelvin sign). */
static ty_unicode_pair *upper_table;
static size_t n_upper;

static int cmp_pair_from(const void *p, const void *q) {
    const ty_unicode_pair *a = p, *b = q;
    return a->from < b->from ? -1 : a->from > b->from ? 1 : (a->to < b->to ? -1 : a->to > b->to);
}

static void build_upper(void) {
    ty_unicode_pair *t = malloc(ty_unicode_n_lowercase * sizeof *t);
    if (!t) return;
    for (size_t i = 0; i < ty_unicode_n_lowercase; i++)
        t[i] = (ty_unicode_pair){ty_unicode_lowercase[i].to, ty_unicode_lowercase[i].from};
    qsort(t, ty_unicode_n_lowercase, sizeof *t, cmp_pair_from);
    size_t n = 0;
    for (size_t i = 0; i < ty_unicode_n_lowercase; i++)
        if (n == 0 || t[n - 1].from != t[i].from) t[n++] = t[i];
    n_upper = n;
    upper_table = t;
}

static pthread_once_t upper_once = PTHREAD_ONCE_INIT;

uint32_t ty_ju_upper(uint32_t c) {
    if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
    pthread_once(&upper_once, build_upper);
    size_t lo = 0, hi = n_upper;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (upper_table[mid].from < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < n_upper && upper_table[lo].from == c ? upper_table[lo].to : c;
}

/* ---------------------------------------------------------------- a render's failure, limits and scratch */

void ty_jx_fail(jx *x, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (x->raised) snprintf(x->err, x->err_size, "%s", msg);
    else if (x->at) snprintf(x->err, x->err_size, "%d:%d: %s", x->at->line, x->at->col, msg);
    else snprintf(x->err, x->err_size, "%s", msg);
    longjmp(x->fail, 1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ty_jx_limit(jx *x, jinja_limits lim) {
    x->lim = lim;
    x->mem.limit = lim.max_memory;
    x->mem.owner = x;
    x->deadline = now_s() + lim.max_seconds;
}

void ty_jx_step(jx *x) {
    if (++x->steps > x->lim.max_steps)
        ty_jx_fail(x, "the template took more than %llu steps (a loop that does not end?)",
                (unsigned long long)x->lim.max_steps);
    if ((x->steps & 4095) == 0 && now_s() > x->deadline)
        ty_jx_fail(x, "the template ran for more than %g s", x->lim.max_seconds);
}

ty_buf *ty_jx_buf(jx *x) {
    jbuf *j = ty_arena_alloc(&x->mem, sizeof *j);
    memset(j, 0, sizeof *j);
    j->next = x->bufs;
    x->bufs = j;
    return &j->b;
}

void ty_jx_buf_done(ty_buf *b) {
    free(b->v);
    *b = (ty_buf){0};
}

_Noreturn void ty_jx_fail_undefined(jx *x, jv v) { ty_jx_fail(x, "%s", v.undef ? v.undef : "a value is undefined"); }

const char *ty_jx_sprintf(jx *x, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ty_jv_cstr(x, buf).s->p;
}

jv ty_jx_arg(const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw, int pos, const char *name,
          jv dflt) {
    if (pos >= 0 && pos < n_args) return args[pos];
    for (int i = 0; i < n_kw && name; i++)
        if (!strcmp(kw_names[i], name)) return kw[i];
    return dflt;
}

jv ty_jx_str_of(jx *x, jv v) { return v.kind == JV_UNDEFINED ? ty_jv_str(x, "", 0) : ty_jv_to_str(x, v); }

jv ty_jx_need_str(jx *x, jv v, const char *what) {
    if (v.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, v);
    if (v.kind != JV_STR) ty_jx_fail(x, "%s: expected a string, got %s", what, ty_jv_type_name(v));
    return v;
}

int64_t ty_jx_need_int(jx *x, jv v, const char *what) {
    if (v.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, v);
    if (v.kind == JV_BOOL) return v.b;
    if (v.kind != JV_INT) ty_jx_fail(x, "%s: expected an integer, got %s", what, ty_jv_type_name(v));
    return v.i;
}

jv ty_jx_buf_str(jx *x, ty_buf *b) {
    if (b->oom) ty_jx_fail(x, "no memory");
    jv s = ty_jv_str(x, b->v ? b->v : "", b->n);
    ty_jx_buf_done(b);
    return s;
}
