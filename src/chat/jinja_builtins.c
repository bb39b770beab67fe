/* jinja_builtins.c — what a template can call: jinja2's filters, tests and globals,
 * transformers' tojson, raise_exception and strftime_now, the loop object, and the
 * methods of str, dict and list that read (the sandbox refuses those that write). Each
 * follows its Python definition; where jinja2 returns a generator (map, select, ...) a
 * list is returned, which prints differently but iterates, joins and counts the same. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"
#include "unicode.h"

#define ARGS jx *x, jv self, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw
#define ARG(pos, name, dflt) ty_jx_arg(args, n_args, kw_names, kw, n_kw, pos, name, dflt)

static const jv UNDEF = {.kind = JV_UNDEFINED};

static _Noreturn void fail_undefined(jx *x, jv v) { ty_jx_fail(x, "%s", v.undef ? v.undef : "a value is undefined"); }

static jv escape_value(jx *x, jv v, bool force);

static jv str_of(jx *x, jv v) { return v.kind == JV_UNDEFINED ? ty_jv_str(x, "", 0) : ty_jv_to_str(x, v); }

static jv need_str(jx *x, jv v, const char *what) {
    if (v.kind == JV_UNDEFINED) fail_undefined(x, v);
    if (v.kind != JV_STR) ty_jx_fail(x, "%s: expected a string, got %s", what, ty_jv_type_name(v));
    return v;
}

static int64_t need_int(jx *x, jv v, const char *what) {
    if (v.kind == JV_UNDEFINED) fail_undefined(x, v);
    if (v.kind == JV_BOOL) return v.b;
    if (v.kind != JV_INT) ty_jx_fail(x, "%s: expected an integer, got %s", what, ty_jv_type_name(v));
    return v.i;
}

/* a string built in a ty_buf, into the arena */
/* a scratch buffer's text as a string; the buffer is done with */
static jv buf_str(jx *x, ty_buf *b) {
    if (b->oom) ty_jx_fail(x, "no memory");
    jv s = ty_jv_str(x, b->v ? b->v : "", b->n);
    ty_jx_buf_done(b);
    return s;
}

static uint32_t next_cp(const jstr *s, size_t *i) { return ty_utf8_decode(s->p, s->len, i); }

static void put_cp(ty_buf *b, uint32_t c) {
    char u[4];
    ty_buf_append(b, u, ty_utf8_encode(c, u));
}

/* ---------------------------------------------------------------- string helpers */

static bool cased_letter(uint32_t c) { return ty_ju_lower(c) != c || ty_ju_upper(c) != c; }

/* strip(chars): chars NULL strips whitespace */
static jv strip(jx *x, jv s, jv chars, bool left, bool right) {
    const jstr *cs = chars.kind == JV_STR ? chars.s : NULL;
    if (chars.kind != JV_NONE && chars.kind != JV_UNDEFINED && !cs)
        ty_jx_fail(x, "strip arg must be None or str, not %s", ty_jv_type_name(chars));
    size_t a = 0, b = s.s->len;
    for (;;) {
        if (!left || a >= b) break;
        size_t i = a;
        const uint32_t c = next_cp(s.s, &i);
        bool hit = false;
        if (cs) {
            for (size_t k = 0; k < cs->len && !hit;) hit = next_cp(cs, &k) == c;
        } else {
            hit = ty_ju_space(c);
        }
        if (!hit) break;
        a = i;
    }
    while (right && b > a) {
        size_t start = b - 1;
        while (start > a && ((unsigned char)s.s->p[start] & 0xC0) == 0x80) start--;
        size_t i = start;
        const uint32_t c = next_cp(s.s, &i);
        bool hit = false;
        if (cs) {
            for (size_t k = 0; k < cs->len && !hit;) hit = next_cp(cs, &k) == c;
        } else {
            hit = ty_ju_space(c);
        }
        if (!hit) break;
        b = start;
    }
    return ty_jv_str(x, s.s->p + a, b - a);
}

/* The characters whose full case mapping (SpecialCasing.txt) is several: ß and the Latin
 * ligatures upper to two or three letters (title case: the first upper, the rest lower),
 * İ lowers to i and a combining dot. */
static bool special_case(ty_buf *b, uint32_t c, bool upper, bool title) {
    static const struct {
        uint32_t c;
        const char *upper, *title;
    } special[] = {{0xDF, "SS", "Ss"},     {0xFB00, "FF", "Ff"}, {0xFB01, "FI", "Fi"},  {0xFB02, "FL", "Fl"},
                   {0xFB03, "FFI", "Ffi"}, {0xFB04, "FFL", "Ffl"}, {0xFB05, "ST", "St"}, {0xFB06, "ST", "St"}};
    if (!upper) {
        if (c != 0x130) return false;
        ty_buf_append(b, "i\xcc\x87", 3);
        return true;
    }
    for (size_t k = 0; k < sizeof special / sizeof *special; k++)
        if (special[k].c == c) {
            const char *t = title ? special[k].title : special[k].upper;
            ty_buf_append(b, t, strlen(t));
            return true;
        }
    return false;
}

static jv map_case(jx *x, jv s, int mode) { /* 0 lower, 1 upper, 2 capitalize, 3 title (Python's str.title) */
    ty_buf *b = ty_jx_buf(x);
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i);
        const bool upper = mode == 1 || (mode == 2 && first) || (mode == 3 && !prev_cased);
        if (!special_case(b, c, upper, mode >= 2)) put_cp(b, upper ? ty_ju_upper(c) : ty_ju_lower(c));
        prev_cased = cased_letter(c);
        first = false;
        ty_jx_step(x);
    }
    return buf_str(x, b);
}

/* Python's str.splitlines boundaries */
static bool line_break(uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
}

static jv splitlines(jx *x, jv s, bool keepends) {
    jv out = ty_jv_list(x, 0);
    size_t start = 0;
    for (size_t i = 0; i < s.s->len;) {
        const size_t at = i;
        const uint32_t c = next_cp(s.s, &i);
        if (!line_break(c)) continue;
        size_t end = i;
        if (c == '\r' && i < s.s->len && s.s->p[i] == '\n') end = ++i;
        ty_jv_list_push(x, out, ty_jv_str(x, s.s->p + start, (keepends ? end : at) - start));
        start = i;
    }
    if (start < s.s->len) ty_jv_list_push(x, out, ty_jv_str(x, s.s->p + start, s.s->len - start));
    return out;
}

static jv split(jx *x, jv s, jv sep, int64_t maxsplit, bool from_right) {
    jv out = ty_jv_list(x, 0);
    const char *p = s.s->p;
    const size_t n = s.s->len;
    if (sep.kind == JV_NONE || sep.kind == JV_UNDEFINED) { /* runs of whitespace */
        /* words as (start, end) pairs, then the maxsplit rule from the chosen end */
        size_t *w = ty_arena_alloc(&x->mem, (n + 1) * 2 * sizeof *w);
        size_t nw = 0;
        for (size_t i = 0; i < n;) {
            size_t j = i;
            if (ty_ju_space(next_cp(s.s, &j))) {
                i = j;
                continue;
            }
            const size_t start = i;
            while (i < n) {
                j = i;
                if (ty_ju_space(next_cp(s.s, &j))) break;
                i = j;
            }
            w[2 * nw] = start;
            w[2 * nw + 1] = i;
            nw++;
        }
        if (maxsplit < 0 || (size_t)maxsplit >= nw) {
            for (size_t k = 0; k < nw; k++) ty_jv_list_push(x, out, ty_jv_str(x, p + w[2 * k], w[2 * k + 1] - w[2 * k]));
            return out;
        }
        if (!from_right) {
            for (int64_t k = 0; k < maxsplit; k++) ty_jv_list_push(x, out, ty_jv_str(x, p + w[2 * k], w[2 * k + 1] - w[2 * k]));
            /* the rest: from the next word to the end, as it is */
            const size_t rs = w[2 * maxsplit];
            ty_jv_list_push(x, out, ty_jv_str(x, p + rs, n - rs));
        } else {
            const size_t first = nw - (size_t)maxsplit;
            ty_jv_list_push(x, out, ty_jv_str(x, p, w[2 * (first - 1) + 1]));
            for (size_t k = first; k < nw; k++) ty_jv_list_push(x, out, ty_jv_str(x, p + w[2 * k], w[2 * k + 1] - w[2 * k]));
        }
        return out;
    }
    need_str(x, sep, "split");
    if (sep.s->len == 0) ty_jx_fail(x, "empty separator");
    const size_t m = sep.s->len;
    if (!from_right) {
        size_t start = 0;
        int64_t k = 0;
        for (const char *hit; (maxsplit < 0 || k < maxsplit) && (hit = memmem(p + start, n - start, sep.s->p, m)); k++) {
            ty_jx_step(x);
            ty_jv_list_push(x, out, ty_jv_str(x, p + start, (size_t)(hit - p) - start));
            start = (size_t)(hit - p) + m;
        }
        ty_jv_list_push(x, out, ty_jv_str(x, p + start, n - start));
        return out;
    }
    /* from the right: pieces gathered backwards, then reversed */
    jv rev = ty_jv_list(x, 0);
    size_t end = n;
    int64_t k = 0;
    while ((maxsplit < 0 || k < maxsplit) && end >= m) {
        size_t at = end - m + 1, found = (size_t)-1;
        while (at-- > 0)
            if (!memcmp(p + at, sep.s->p, m)) {
                found = at;
                break;
            }
        if (found == (size_t)-1) break;
        ty_jv_list_push(x, rev, ty_jv_str(x, p + found + m, end - found - m));
        end = found;
        k++;
    }
    ty_jv_list_push(x, rev, ty_jv_str(x, p, end));
    for (size_t i = rev.l->n; i-- > 0;) ty_jv_list_push(x, out, rev.l->v[i]);
    return out;
}

static jv replace(jx *x, jv s, jv old, jv new_, int64_t count) {
    ty_buf *b = ty_jx_buf(x);
    const char *p = s.s->p;
    const size_t n = s.s->len, m = old.s->len;
    if (m == 0) { /* Python inserts `new` before every character and at the end */
        int64_t k = 0;
        for (size_t i = 0; i <= n;) {
            if (count < 0 || k < count) {
                ty_buf_append(b, new_.s->p, new_.s->len);
                k++;
            }
            if (i == n) break;
            const size_t start = i;
            next_cp(s.s, &i);
            ty_buf_append(b, p + start, i - start);
            ty_jx_step(x);
        }
        return buf_str(x, b);
    }
    size_t start = 0;
    int64_t k = 0;
    for (const char *hit; (count < 0 || k < count) && (hit = memmem(p + start, n - start, old.s->p, m)); k++) {
        ty_jx_step(x);
        ty_buf_append(b, p + start, (size_t)(hit - p) - start);
        ty_buf_append(b, new_.s->p, new_.s->len);
        start = (size_t)(hit - p) + m;
        if (b->n > x->lim.max_memory) break;
    }
    ty_buf_append(b, p + start, n - start);
    return buf_str(x, b);
}

/* the code point index of a byte offset */
static int64_t cp_index(const jstr *s, size_t off) {
    int64_t k = 0;
    for (size_t i = 0; i < off; i++) k += ((unsigned char)s->p[i] & 0xC0) != 0x80;
    return k;
}

static jv affix_test(jx *x, jv s, jv affix, bool suffix) {
    if (affix.kind == JV_LIST && affix.seq == SEQ_TUPLE) {
        for (size_t i = 0; i < affix.l->n; i++)
            if (affix_test(x, s, affix.l->v[i], suffix).b) return JV_TRUE_V;
        return JV_FALSE_V;
    }
    if (affix.kind != JV_STR)
        ty_jx_fail(x, "%s first arg must be str or a tuple of str, not %s", suffix ? "endswith" : "startswith",
                ty_jv_type_name(affix));
    const size_t m = affix.s->len;
    if (m > s.s->len) return JV_FALSE_V;
    return ty_jv_bool(!memcmp(s.s->p + (suffix ? s.s->len - m : 0), affix.s->p, m));
}

/* ---------------------------------------------------------------- % formatting */

/* one conversion; markup: the format is Markup, which escapes what %s and %r bring */
static void format_one(jx *x, ty_buf *b, char conv, const char *flags, int width, int prec, jv v, bool markup) {
    char spec[32], out[512];
    int n = 0;
    if (conv == 's' || conv == 'r' || conv == 'a') {
        ty_buf *t = ty_jx_buf(x);
        if (conv == 's') ty_jv_write_str(x, t, v);
        else ty_jv_write_repr(x, t, v);
        jv sv = buf_str(x, t);
        if (markup && !(conv == 's' && v.kind == JV_STR && v.markup)) sv = escape_value(x, sv, true);
        size_t len = sv.s->len;
        if (prec >= 0) len = ty_jstr_cp_offset(sv.s, (size_t)prec);
        const int64_t pad = width - cp_index(sv.s, len);
        const bool left = strchr(flags, '-') != NULL;
        for (int64_t i = 0; !left && i < pad; i++) ty_buf_append(b, " ", 1);
        ty_buf_append(b, sv.s->p, len);
        for (int64_t i = 0; left && i < pad; i++) ty_buf_append(b, " ", 1);
        return;
    }
    if (!ty_jv_is_number(v)) {
        if (v.kind == JV_UNDEFINED) fail_undefined(x, v);
        ty_jx_fail(x, "%%%c format: a number is required, not %s", conv, ty_jv_type_name(v));
    }
    if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o' || conv == 'c') {
        const long long i = v.kind == JV_FLOAT ? (long long)v.f : (long long)(v.kind == JV_INT ? v.i : v.b);
        if (conv == 'c') {
            put_cp(b, (uint32_t)i);
            return;
        }
        snprintf(spec, sizeof spec, "%%%s*.*ll%c", flags, conv == 'i' || conv == 'u' ? 'd' : conv);
        n = snprintf(out, sizeof out, spec, width, prec < 0 ? 1 : prec, i);
    } else {
        snprintf(spec, sizeof spec, "%%%s*.*%c", flags, conv);
        n = snprintf(out, sizeof out, spec, width, prec < 0 ? 6 : prec, ty_jv_number(v));
    }
    ty_buf_append(b, out, n < 0 ? 0 : (size_t)n < sizeof out ? (size_t)n : sizeof out - 1);
}

jv ty_jinja_percent_format(jx *x, jv fmt, jv args) {
    /* Python takes any non-tuple with __getitem__ (a dict, a list) as a mapping: its
     * %(key)s, and no complaint about arguments left over */
    const bool mapping =
        args.kind == JV_DICT || args.kind == JV_UNDEFINED || (args.kind == JV_LIST && args.seq != SEQ_TUPLE);
    const jv *items = args.kind == JV_LIST && args.seq == SEQ_TUPLE ? args.l->v : &args;
    const size_t n_items = args.kind == JV_LIST && args.seq == SEQ_TUPLE ? args.l->n : 1;
    size_t next = 0;
    ty_buf *b = ty_jx_buf(x);
    const char *p = fmt.s->p, *end = p + fmt.s->len;
    while (p < end) {
        const char *pct = memchr(p, '%', (size_t)(end - p));
        if (!pct) {
            ty_buf_append(b, p, (size_t)(end - p));
            break;
        }
        ty_buf_append(b, p, (size_t)(pct - p));
        p = pct + 1;
        if (p < end && *p == '%') {
            ty_buf_append(b, "%", 1);
            p++;
            continue;
        }
        jv value = UNDEF;
        bool have = false;
        if (p < end && *p == '(') {
            const char *close = memchr(p, ')', (size_t)(end - p));
            if (!close || !mapping) ty_jx_fail(x, "format requires a mapping");
            const jv *v = ty_jv_dict_get(args, ty_jv_str(x, p + 1, (size_t)(close - p - 1)));
            if (!v) ty_jx_fail(x, "format: key '%.*s' missing", (int)(close - p - 1), p + 1);
            value = *v;
            have = true;
            p = close + 1;
        }
        char flags[8] = "";
        int nf = 0;
        while (p < end && strchr("-+ #0", *p) && nf < 7) flags[nf++] = *p++;
        flags[nf] = 0;
        int width = 0, prec = -1;
        while (p < end && *p >= '0' && *p <= '9') width = width * 10 + (*p++ - '0');
        if (p < end && *p == '.') {
            p++;
            prec = 0;
            while (p < end && *p >= '0' && *p <= '9') prec = prec * 10 + (*p++ - '0');
        }
        if (width > 4096 || prec > 4096) ty_jx_fail(x, "format: width or precision too large");
        if (p >= end) ty_jx_fail(x, "incomplete format");
        const char conv = *p++;
        if (!strchr("sradiuxXoceEfFgG", conv)) ty_jx_fail(x, "unsupported format character '%c'", conv);
        if (!have) {
            if (mapping && n_items == 1) value = args;
            else if (next >= n_items) ty_jx_fail(x, "not enough arguments for format string");
            else value = items[next++];
        }
        format_one(x, b, conv, flags, width, prec, value, fmt.markup);
        ty_jx_step(x);
    }
    if (!mapping && next < n_items) ty_jx_fail(x, "not all arguments converted during string formatting");
    jv r = buf_str(x, b);
    r.markup = fmt.markup;
    return r;
}

/* str.format: {} {0} {name} {name.attr} {name[key]}, !r !s, no format spec but an empty one */
static jv str_format(jx *x, jv fmt, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw) {
    ty_buf *b = ty_jx_buf(x);
    const char *p = fmt.s->p, *end = p + fmt.s->len;
    int auto_index = 0;
    while (p < end) {
        const char c = *p++;
        if (c == '}' ) {
            if (p < end && *p == '}') p++;
            else ty_jx_fail(x, "Single '}' encountered in format string");
            ty_buf_append(b, "}", 1);
            continue;
        }
        if (c != '{') {
            ty_buf_append(b, &c, 1);
            continue;
        }
        if (p < end && *p == '{') {
            ty_buf_append(b, "{", 1);
            p++;
            continue;
        }
        const char *close = memchr(p, '}', (size_t)(end - p));
        if (!close) ty_jx_fail(x, "Single '{' encountered in format string");
        const char *field = p, *fend = close;
        char conv = 0;
        const char *bang = memchr(field, '!', (size_t)(fend - field)), *colon = memchr(field, ':', (size_t)(fend - field));
        if (colon && colon + 1 != fend) ty_jx_fail(x, "str.format: format specs are not supported");
        if (bang && (!colon || bang < colon)) conv = bang[1], fend = bang;
        else if (colon) fend = colon;
        /* the first part: an index or a name */
        const char *q = field;
        while (q < fend && *q != '.' && *q != '[') q++;
        jv v;
        if ((q == field && auto_index < 0) || (q != field && *field >= '0' && *field <= '9' && auto_index > 0))
            ty_jx_fail(x, "cannot switch between automatic and manual field numbering");
        if (q == field) {
            if (auto_index >= n_args) ty_jx_fail(x, "Replacement index %d out of range for positional args tuple", auto_index);
            v = args[auto_index++];
        } else if (*field >= '0' && *field <= '9') {
            const int i = atoi(field);
            auto_index = -1;
            if (i >= n_args) ty_jx_fail(x, "Replacement index %d out of range for positional args tuple", i);
            v = args[i];
        } else {
            v = UNDEF;
            bool found = false;
            for (int k = 0; k < n_kw; k++)
                if (strlen(kw_names[k]) == (size_t)(q - field) && !memcmp(kw_names[k], field, (size_t)(q - field)))
                    v = kw[k], found = true;
            if (!found) ty_jx_fail(x, "str.format: no argument '%.*s'", (int)(q - field), field);
        }
        while (q < fend) {
            if (*q == '.') {
                const char *a = ++q;
                while (q < fend && *q != '.' && *q != '[') q++;
                char name[128];
                snprintf(name, sizeof name, "%.*s", (int)(q - a), a);
                v = ty_jx_getattr(x, v, name);
            } else {
                const char *a = ++q;
                while (q < fend && *q != ']') q++;
                jv key = ty_jv_str(x, a, (size_t)(q - a));
                if (q - a > 0 && *a >= '0' && *a <= '9') key = ty_jv_int(atoll(a));
                v = ty_jx_getitem(x, v, key);
                if (q < fend) q++;
            }
        }
        if (conv == 'r') ty_jv_write_repr(x, b, v);
        else ty_jv_write_str(x, b, v);
        p = close + 1;
        ty_jx_step(x);
    }
    return buf_str(x, b);
}

/* ---------------------------------------------------------------- sorting */

typedef struct {
    jv key, value;
} keyed;

static jv sort_key(jx *x, jv v, jv attribute, bool case_sensitive) {
    if (attribute.kind == JV_STR) {
        /* a dotted path, and integers as items, as jinja2's make_attrgetter */
        const char *p = attribute.s->p;
        for (;;) {
            const char *dot = strchr(p, '.');
            const size_t len = dot ? (size_t)(dot - p) : strlen(p);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)len, p);
            bool digits = len > 0;
            for (size_t i = 0; i < len; i++) digits = digits && name[i] >= '0' && name[i] <= '9';
            v = digits ? ty_jx_getitem(x, v, ty_jv_int(atoll(name))) : ty_jx_getitem(x, v, ty_jv_cstr(x, name));
            if (!dot) break;
            p = dot + 1;
        }
    } else if (attribute.kind == JV_INT) {
        v = ty_jx_getitem(x, v, attribute);
    }
    if (!case_sensitive && v.kind == JV_STR) v = map_case(x, v, 0);
    return v;
}

/* a stable merge sort (Python's sort is stable) by key; ty_jv_compare fails on keys that
 * do not order, as Python's < does. list_keys: the keys are as jinja2's sort filter makes
 * them, one-item lists, which Python compares with == before < (equal undefined values
 * sort without a complaint). */
static void merge_sort(jx *x, keyed *a, keyed *tmp, size_t n, bool reverse, bool list_keys) {
    if (n < 2) return;
    const size_t h = n / 2;
    merge_sort(x, a, tmp, h, reverse, list_keys);
    merge_sort(x, a + h, tmp, n - h, reverse, list_keys);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        ty_jx_step(x);
        int c = list_keys && ty_jv_equal(a[j].key, a[i].key) ? 0 : ty_jv_compare(x, a[j].key, a[i].key);
        if (reverse) c = -c;
        tmp[k++] = c < 0 ? a[j++] : a[i++];
    }
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

static jv sorted(jx *x, jv items, jv attribute, bool case_sensitive, bool reverse, bool list_keys) {
    items = ty_jv_iter_list(x, items);
    const size_t n = items.l->n;
    keyed *a = ty_arena_alloc(&x->mem, (n + 1) * sizeof *a), *tmp = ty_arena_alloc(&x->mem, (n + 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++) a[i] = (keyed){sort_key(x, items.l->v[i], attribute, case_sensitive), items.l->v[i]};
    merge_sort(x, a, tmp, n, reverse, list_keys);
    jv out = ty_jv_list(x, n);
    for (size_t i = 0; i < n; i++) ty_jv_list_push(x, out, a[i].value);
    return out;
}

/* ---------------------------------------------------------------- filters */

static jv f_abs(ARGS) {
    if (self.kind == JV_INT) {
        if (self.i == INT64_MIN) ty_jx_fail(x, "integer overflow");
        return ty_jv_int(self.i < 0 ? -self.i : self.i);
    }
    if (self.kind == JV_BOOL) return ty_jv_int(self.b);
    if (self.kind == JV_FLOAT) return ty_jv_float(fabs(self.f));
    if (self.kind == JV_UNDEFINED) fail_undefined(x, self);
    ty_jx_fail(x, "bad operand type for abs(): '%s'", ty_jv_type_name(self));
}

/* attributes only: a dict's keys are items, not attributes, to attr() */
static jv f_attr(ARGS) {
    jv name = need_str(x, ARG(0, "name", UNDEF), "attr");
    if (self.kind == JV_DICT || self.kind == JV_STR || self.kind == JV_LIST) {
        jv m = ty_jinja_method(x, self, name.s->p);
        return m.kind == JV_UNDEFINED && !m.undef ? ty_jv_undefined(NULL) : m;
    }
    return ty_jx_getattr(x, self, name.s->p);
}

/* a generator of the list's items */
static jv gen(jv l) {
    l.seq = SEQ_GEN;
    return l;
}

static jv f_batch(ARGS) {
    const int64_t size = need_int(x, ARG(0, "linecount", UNDEF), "batch");
    if (size <= 0) ty_jx_fail(x, "batch: the size must be positive");
    jv fill = ARG(1, "fill_with", JV_NONE_V);
    jv items = ty_jv_iter_list(x, self), out = ty_jv_list(x, 0), cur = ty_jv_list(x, 0);
    for (size_t i = 0; i < items.l->n; i++) {
        if (cur.l->n == (size_t)size) {
            ty_jv_list_push(x, out, cur);
            cur = ty_jv_list(x, 0);
        }
        ty_jv_list_push(x, cur, items.l->v[i]);
    }
    if (cur.l->n) {
        if (fill.kind != JV_NONE)
            while (cur.l->n < (size_t)size) ty_jv_list_push(x, cur, fill);
        ty_jv_list_push(x, out, cur);
    }
    return gen(out);
}

static jv f_capitalize(ARGS) {
    return map_case(x, str_of(x, self), 2);
}

static jv f_center(ARGS) {
    const int64_t width = need_int(x, ARG(0, "width", ty_jv_int(80)), "center");
    jv s = str_of(x, self);
    const int64_t len = (int64_t)s.s->n_cp;
    if (width <= len) return s;
    if (width > (int64_t)x->lim.max_output) ty_jx_fail(x, "center: width too large");
    /* Python: left = pad // 2 + (pad & width & 1) */
    const int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    ty_buf *b = ty_jx_buf(x);
    for (int64_t i = 0; i < left; i++) ty_buf_append(b, " ", 1);
    ty_buf_append(b, s.s->p, s.s->len);
    for (int64_t i = 0; i < pad - left; i++) ty_buf_append(b, " ", 1);
    return buf_str(x, b);
}

static jv f_length(ARGS) {
    return ty_jv_int((int64_t)ty_jv_len(x, self));
}

static jv f_default(ARGS) {
    jv dflt = ARG(0, "default_value", ty_jv_str(x, "", 0));
    const bool boolean = ty_jv_truthy(x, ARG(1, "boolean", JV_FALSE_V));
    if (self.kind == JV_UNDEFINED || (boolean && !ty_jv_truthy(x, self))) return dflt;
    return self;
}

static jv f_dictsort(ARGS) {
    const bool case_sensitive = ty_jv_truthy(x, ARG(0, "case_sensitive", JV_FALSE_V));
    jv by = ARG(1, "by", ty_jv_cstr(x, "key"));
    const bool reverse = ty_jv_truthy(x, ARG(2, "reverse", JV_FALSE_V));
    if (self.kind != JV_DICT) ty_jx_fail(x, "dictsort: expected a mapping, got %s", ty_jv_type_name(self));
    int pos = 0;
    if (by.kind == JV_STR && !strcmp(by.s->p, "value")) pos = 1;
    else if (!(by.kind == JV_STR && !strcmp(by.s->p, "key"))) ty_jx_fail(x, "You can only sort by either \"key\" or \"value\"");
    jv pairs = ty_jv_list(x, self.d->n);
    for (size_t i = 0; i < self.d->n; i++) {
        jv t = ty_jv_list(x, 2);
        t.seq = SEQ_TUPLE;
        ty_jv_list_push(x, t, self.d->k[i]);
        ty_jv_list_push(x, t, self.d->v[i]);
        ty_jv_list_push(x, pairs, t);
    }
    return sorted(x, pairs, ty_jv_int(pos), case_sensitive, reverse, false);
}

/* Markup of the escaped text; Markup itself is left as it is, but by forceescape */
static jv escape_value(jx *x, jv v, bool force) {
    if (v.kind == JV_STR && v.markup && !force) return v;
    jv s = str_of(x, v);
    ty_buf *b = ty_jx_buf(x);
    ty_jv_escape(b, s.s->p, s.s->len);
    return ty_jv_markup(buf_str(x, b));
}

static jv f_escape(ARGS) { return escape_value(x, self, false); }
static jv f_forceescape(ARGS) { return escape_value(x, self, true); }

static jv f_first(ARGS) {
    jv items = ty_jv_iter_list(x, self);
    return items.l->n ? items.l->v[0] : ty_jv_undefined("No first item, sequence was empty.");
}

static jv f_last(ARGS) {
    jv items = ty_jv_iter_list(x, self);
    return items.l->n ? items.l->v[items.l->n - 1] : ty_jv_undefined("No last item, sequence was empty.");
}

/* Python's float(str): an optional sign, digits with a point or exponent, inf, nan;
 * whitespace around */
static bool parse_float(jv s, double *out) {
    char buf[128];
    if (s.s->len >= sizeof buf) return false;
    memcpy(buf, s.s->p, s.s->len + 1);
    char *p = buf, *end = buf + s.s->len;
    while (p < end && (*p == ' ' || (*p >= '\t' && *p <= '\r'))) p++;
    while (end > p && (end[-1] == ' ' || (end[-1] >= '\t' && end[-1] <= '\r'))) end--;
    *end = 0;
    if (p == end || strchr(p, '_') || (strchr(p, 'x') || strchr(p, 'X'))) return false;
    char *stop;
    *out = strtod(p, &stop);
    return stop == end;
}

static jv f_float(ARGS) {
    jv dflt = ARG(0, "default", ty_jv_float(0));
    if (self.kind == JV_UNDEFINED) fail_undefined(x, self); /* float(Undefined) raises */
    if (ty_jv_is_number(self)) return ty_jv_float(ty_jv_number(self));
    double f;
    if (self.kind == JV_STR && parse_float(self, &f)) return ty_jv_float(f);
    return dflt;
}

static jv f_format(ARGS) {
    jv fmt = str_of(x, self);
    if (n_kw) {
        jv d = ty_jv_dict(x, (size_t)n_kw);
        for (int i = 0; i < n_kw; i++) ty_jv_dict_set(x, d, ty_jv_cstr(x, kw_names[i]), kw[i]);
        if (n_args) ty_jx_fail(x, "can't handle positional and keyword arguments at the same time");
        return ty_jinja_percent_format(x, fmt, d);
    }
    jv t = ty_jv_list(x, (size_t)n_args);
    t.seq = SEQ_TUPLE;
    for (int i = 0; i < n_args; i++) ty_jv_list_push(x, t, args[i]);
    return ty_jinja_percent_format(x, fmt, t);
}

static jv f_groupby(ARGS) {
    jv attribute = ARG(0, "attribute", UNDEF);
    jv dflt = ARG(1, "default", JV_NONE_V);
    const bool case_sensitive = ty_jv_truthy(x, ARG(2, "case_sensitive", JV_FALSE_V));
    jv items = sorted(x, self, attribute, case_sensitive, false, false);
    jv out = ty_jv_list(x, 0);
    for (size_t i = 0; i < items.l->n; i++) {
        jv k = sort_key(x, items.l->v[i], attribute, case_sensitive);
        if (k.kind == JV_UNDEFINED) k = dflt;
        jv last = out.l->n ? out.l->v[out.l->n - 1] : UNDEF;
        if (last.kind == JV_UNDEFINED || !ty_jv_equal(last.l->v[0], k)) {
            last = ty_jv_list(x, 2);
            last.seq = SEQ_TUPLE;
            ty_jv_list_push(x, last, k);
            ty_jv_list_push(x, last, ty_jv_list(x, 0));
            ty_jv_list_push(x, out, last);
        }
        ty_jv_list_push(x, last.l->v[1], items.l->v[i]);
    }
    return out;
}

static jv f_indent(ARGS) {
    jv width = ARG(0, "width", ty_jv_int(4));
    const bool first = ty_jv_truthy(x, ARG(1, "first", JV_FALSE_V)), blank = ty_jv_truthy(x, ARG(2, "blank", JV_FALSE_V));
    jv ind;
    if (width.kind == JV_STR) {
        ind = width;
    } else {
        const int64_t w = need_int(x, width, "indent");
        if (w > 4096) ty_jx_fail(x, "indent: width too large");
        ty_buf *sp = ty_jx_buf(x);
        for (int64_t i = 0; i < w; i++) ty_buf_append(sp, " ", 1);
        ind = buf_str(x, sp);
    }
    /* jinja2 adds a newline to its argument as it is: a string, or a TypeError */
    if (self.kind == JV_UNDEFINED) fail_undefined(x, self);
    if (self.kind != JV_STR)
        ty_jx_fail(x, "unsupported operand type(s) for +=: '%s' and 'str'", ty_jv_type_name(self));
    jv s = self;
    ty_buf *withnl = ty_jx_buf(x);
    ty_buf_append(withnl, s.s->p, s.s->len);
    ty_buf_append(withnl, "\n", 1);
    jv lines = splitlines(x, buf_str(x, withnl), false);
    ty_buf *b = ty_jx_buf(x);
    if (first) ty_buf_append(b, ind.s->p, ind.s->len);
    for (size_t i = 0; i < lines.l->n; i++) {
        const jstr *line = lines.l->v[i].s;
        if (i) {
            ty_buf_append(b, "\n", 1);
            if (blank || line->len) ty_buf_append(b, ind.s->p, ind.s->len);
        }
        ty_buf_append(b, line->p, line->len);
        ty_jx_step(x);
    }
    return buf_str(x, b);
}

static jv f_int(ARGS) {
    jv dflt = ARG(0, "default", ty_jv_int(0));
    const int64_t base = need_int(x, ARG(1, "base", ty_jv_int(10)), "int");
    if (self.kind == JV_UNDEFINED) fail_undefined(x, self); /* int(Undefined) raises */
    if (self.kind == JV_INT) return self;
    if (self.kind == JV_BOOL) return ty_jv_int(self.b);
    if (self.kind == JV_FLOAT) {
        if (!isfinite(self.f)) return dflt; /* int(inf), int(nan): jinja2's default */
        /* Python's ints are unbounded, toy's 64-bit: a bigger one is an error, not a wrong number */
        if (fabs(self.f) >= 9.2e18) ty_jx_fail(x, "int: %g is beyond a 64-bit integer", self.f);
        return ty_jv_int((int64_t)self.f);
    }
    if (self.kind == JV_STR) {
        char buf[128];
        if (self.s->len < sizeof buf) {
            memcpy(buf, self.s->p, self.s->len + 1);
            char *p = buf;
            while (*p == ' ' || (*p >= '\t' && *p <= '\r')) p++;
            char *end;
            errno = 0;
            const long long v = strtoll(p, &end, (int)base);
            while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
            if (end != p && !*end && errno == 0 && !strchr(p, '_')) return ty_jv_int(v);
        }
        double f;
        if (parse_float(self, &f) && isfinite(f) && fabs(f) < 9.2e18) return ty_jv_int((int64_t)f);
    }
    return dflt;
}

static jv f_items(ARGS) {
    if (self.kind == JV_UNDEFINED) return ty_jv_list(x, 0);
    if (self.kind != JV_DICT) ty_jx_fail(x, "Can only get item pairs from a mapping.");
    jv out = ty_jv_list(x, self.d->n);
    for (size_t i = 0; i < self.d->n; i++) {
        jv t = ty_jv_list(x, 2);
        t.seq = SEQ_TUPLE;
        ty_jv_list_push(x, t, self.d->k[i]);
        ty_jv_list_push(x, t, self.d->v[i]);
        ty_jv_list_push(x, out, t);
    }
    return out;
}

static jv f_items_gen(ARGS) { return gen(f_items(x, self, args, n_args, kw_names, kw, n_kw)); }

static jv f_join(ARGS) {
    jv sep = str_of(x, ARG(0, "d", ty_jv_str(x, "", 0)));
    jv attribute = ARG(1, "attribute", UNDEF);
    jv items = ty_jv_iter_list(x, self);
    ty_buf *b = ty_jx_buf(x);
    for (size_t i = 0; i < items.l->n; i++) {
        if (i) ty_buf_append(b, sep.s->p, sep.s->len);
        jv v = items.l->v[i];
        if (attribute.kind != JV_UNDEFINED) v = sort_key(x, v, attribute, true);
        ty_jv_write_str(x, b, v);
        ty_jx_step(x);
    }
    return buf_str(x, b);
}

static jv f_list(ARGS) {
    jv items = ty_jv_iter_list(x, self);
    jv out = ty_jv_list(x, items.l->n);
    for (size_t i = 0; i < items.l->n; i++) ty_jv_list_push(x, out, items.l->v[i]);
    return out;
}

static jv f_lower(ARGS) {
    return map_case(x, str_of(x, self), 0);
}

static jv f_upper(ARGS) {
    return map_case(x, str_of(x, self), 1);
}

static jv f_map(ARGS) {
    if (!ty_jv_truthy(x, self)) return gen(ty_jv_list(x, 0)); /* jinja2: `if value:` first */
    jv items = ty_jv_iter_list(x, self), out = gen(ty_jv_list(x, items.l->n));
    jv attribute = ARG(-1, "attribute", UNDEF);
    if (attribute.kind != JV_UNDEFINED) {
        jv dflt = ARG(-1, "default", UNDEF);
        for (size_t i = 0; i < items.l->n; i++) {
            jv v = sort_key(x, items.l->v[i], attribute, true);
            ty_jv_list_push(x, out, v.kind == JV_UNDEFINED && dflt.kind != JV_UNDEFINED ? dflt : v);
        }
        return out;
    }
    if (n_args < 1) ty_jx_fail(x, "map requires a filter argument");
    jv name = need_str(x, args[0], "map");
    for (size_t i = 0; i < items.l->n; i++)
        ty_jv_list_push(x, out, ty_jx_apply_filter(x, name.s->p, items.l->v[i], args + 1, n_args - 1, kw_names, kw, n_kw));
    return out;
}

static jv min_max(jx *x, jv self, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw, bool max) {
    const bool case_sensitive = ty_jv_truthy(x, ARG(0, "case_sensitive", JV_FALSE_V));
    jv attribute = ARG(1, "attribute", UNDEF);
    jv items = ty_jv_iter_list(x, self);
    if (!items.l->n) return ty_jv_undefined(max ? "No aggregated item, sequence was empty." : "No aggregated item, sequence was empty.");
    size_t best = 0;
    jv best_key = sort_key(x, items.l->v[0], attribute, case_sensitive);
    for (size_t i = 1; i < items.l->n; i++) {
        jv k = sort_key(x, items.l->v[i], attribute, case_sensitive);
        const int c = ty_jv_compare(x, k, best_key);
        if (max ? c > 0 : c < 0) best = i, best_key = k;
    }
    return items.l->v[best];
}

static jv f_max(ARGS) { return min_max(x, self, args, n_args, kw_names, kw, n_kw, true); }
static jv f_min(ARGS) { return min_max(x, self, args, n_args, kw_names, kw, n_kw, false); }

/* select, reject, selectattr, rejectattr */
static jv select_items(jx *x, jv self, const jv *args, int n_args, bool by_attr, bool keep) {
    jv out = gen(ty_jv_list(x, 0));
    if (!ty_jv_truthy(x, self)) return out; /* jinja2: `if value:` first */
    jv items = ty_jv_iter_list(x, self);
    int at = 0;
    jv attribute = UNDEF;
    if (by_attr) {
        if (n_args < 1) ty_jx_fail(x, "selectattr/rejectattr need an attribute");
        attribute = args[at++];
    }
    const char *test = NULL;
    if (at < n_args) test = need_str(x, args[at++], "select").s->p;
    for (size_t i = 0; i < items.l->n; i++) {
        jv v = by_attr ? sort_key(x, items.l->v[i], attribute, true) : items.l->v[i];
        const bool ok = test ? ty_jx_apply_test(x, test, v, args + at, n_args - at) : ty_jv_truthy(x, v);
        if (ok == keep) ty_jv_list_push(x, out, items.l->v[i]);
    }
    return out;
}

static jv f_select(ARGS) {
    return select_items(x, self, args, n_args, false, true);
}
static jv f_reject(ARGS) {
    return select_items(x, self, args, n_args, false, false);
}
static jv f_selectattr(ARGS) {
    return select_items(x, self, args, n_args, true, true);
}
static jv f_rejectattr(ARGS) {
    return select_items(x, self, args, n_args, true, false);
}

static jv f_replace(ARGS) {
    jv old = str_of(x, ARG(0, "old", UNDEF)), new_ = str_of(x, ARG(1, "new", UNDEF));
    jv count = ARG(2, "count", JV_NONE_V);
    return replace(x, str_of(x, self), old, new_, count.kind == JV_NONE ? -1 : need_int(x, count, "replace"));
}

static jv f_reverse(ARGS) {
    if (self.kind == JV_STR) return ty_jv_str_slice(x, self, (int64_t)self.s->n_cp - 1, -1, -1);
    jv items = ty_jv_iter_list(x, self), out = ty_jv_list(x, items.l->n);
    for (size_t i = items.l->n; i-- > 0;) ty_jv_list_push(x, out, items.l->v[i]);
    out.seq = self.kind == JV_LIST && self.seq <= SEQ_RANGE ? SEQ_REVITER : SEQ_LIST;
    return out;
}

static jv f_round(ARGS) {
    const int64_t precision = need_int(x, ARG(0, "precision", ty_jv_int(0)), "round");
    jv method = ARG(1, "method", ty_jv_cstr(x, "common"));
    if (!ty_jv_is_number(self)) ty_jx_fail(x, "round: expected a number, got %s", ty_jv_type_name(self));
    /* Python's round(int, n) is an int */
    if (self.kind != JV_FLOAT && precision >= 0 && method.kind == JV_STR && !strcmp(method.s->p, "common"))
        return ty_jv_int(self.kind == JV_INT ? self.i : self.b);
    const double v = ty_jv_number(self), scale = pow(10, (double)precision);
    const char *m = method.kind == JV_STR ? method.s->p : "";
    double r;
    if (!strcmp(m, "common")) r = nearbyint(v * scale) / scale; /* Python's round: half to even */
    else if (!strcmp(m, "ceil")) r = ceil(v * scale) / scale;
    else if (!strcmp(m, "floor")) r = floor(v * scale) / scale;
    else ty_jx_fail(x, "method must be common, ceil or floor");
    return ty_jv_float(r);
}

static jv f_safe(ARGS) { return ty_jv_markup(str_of(x, self)); }

static jv f_slice(ARGS) {
    const int64_t slices = need_int(x, ARG(0, "slices", UNDEF), "slice");
    jv fill = ARG(1, "fill_with", JV_NONE_V);
    if (slices <= 0) ty_jx_fail(x, "slice: the count must be positive");
    jv items = ty_jv_iter_list(x, self), out = ty_jv_list(x, (size_t)slices);
    const int64_t n = (int64_t)items.l->n, per = n / slices, extra = n % slices;
    int64_t offset = 0;
    for (int64_t k = 0; k < slices; k++) {
        const int64_t start = offset + k * per;
        if (k < extra) offset++;
        const int64_t end = offset + (k + 1) * per;
        jv part = ty_jv_list(x, 0);
        for (int64_t i = start; i < end; i++) ty_jv_list_push(x, part, items.l->v[i]);
        if (fill.kind != JV_NONE && k >= extra) ty_jv_list_push(x, part, fill);
        ty_jv_list_push(x, out, part);
    }
    return gen(out);
}

static jv f_sort(ARGS) {
    const bool reverse = ty_jv_truthy(x, ARG(0, "reverse", JV_FALSE_V));
    const bool case_sensitive = ty_jv_truthy(x, ARG(1, "case_sensitive", JV_FALSE_V));
    return sorted(x, self, ARG(2, "attribute", UNDEF), case_sensitive, reverse, true);
}

static jv f_string(ARGS) {
    return str_of(x, self);
}

static jv f_striptags(ARGS) {
    jv s = str_of(x, self);
    ty_buf *b = ty_jx_buf(x);
    bool in_tag = false;
    for (size_t i = 0; i < s.s->len; i++) {
        const char c = s.s->p[i];
        if (c == '<') in_tag = true;
        else if (c == '>' && in_tag) in_tag = false;
        else if (!in_tag) ty_buf_append(b, &c, 1);
    }
    jv t = buf_str(x, b);
    /* whitespace runs become one space */
    jv words = split(x, t, JV_NONE_V, -1, false);
    ty_buf *o = ty_jx_buf(x);
    for (size_t i = 0; i < words.l->n; i++) {
        if (i) ty_buf_append(o, " ", 1);
        ty_buf_append(o, words.l->v[i].s->p, words.l->v[i].s->len);
    }
    return buf_str(x, o);
}

static jv f_sum(ARGS) {
    jv attribute = ARG(0, "attribute", UNDEF);
    jv acc = ARG(1, "start", ty_jv_int(0));
    jv items = ty_jv_iter_list(x, self);
    for (size_t i = 0; i < items.l->n; i++) {
        jv v = attribute.kind != JV_UNDEFINED ? sort_key(x, items.l->v[i], attribute, true) : items.l->v[i];
        acc = ty_jx_binary(x, '+', acc, v);
    }
    return acc;
}

/* jinja2's title: words split at runs of -, whitespace and opening brackets */
static jv f_title(ARGS) {
    jv s = str_of(x, self);
    ty_buf *b = ty_jx_buf(x);
    bool word_start = true;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i);
        const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || ty_ju_space(c);
        /* item[0].upper() + item[1:].lower(): str.upper's full mapping (ß: SS) */
        if (sep) put_cp(b, c);
        else if (!special_case(b, c, word_start, false)) put_cp(b, word_start ? ty_ju_upper(c) : ty_ju_lower(c));
        word_start = sep;
    }
    return buf_str(x, b);
}

static void json_ascii(ty_buf *out, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            ty_buf_append(out, s + i, 1);
            i++;
            continue;
        }
        uint32_t cp = ty_utf8_decode(s, n, &i);
        char u[16];
        if (cp >= 0x10000) {
            cp -= 0x10000;
            snprintf(u, sizeof u, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
        } else {
            snprintf(u, sizeof u, "\\u%04x", cp);
        }
        ty_buf_append(out, u, strlen(u));
    }
}

/* transformers' tojson: json.dumps(x, ensure_ascii=False, indent, separators, sort_keys) */
static jv f_tojson(ARGS) {
    const bool ensure_ascii = ty_jv_truthy(x, ARG(0, "ensure_ascii", JV_FALSE_V));
    jv indent = ARG(1, "indent", JV_NONE_V), separators = ARG(2, "separators", JV_NONE_V);
    const bool sort_keys = ty_jv_truthy(x, ARG(3, "sort_keys", JV_FALSE_V));
    const char *ind = NULL;
    if (indent.kind == JV_STR) {
        ind = indent.s->p;
    } else if (indent.kind == JV_INT || indent.kind == JV_BOOL) {
        const int64_t n = indent.kind == JV_INT ? indent.i : indent.b;
        if (n > 256) ty_jx_fail(x, "tojson: indent too large");
        char *sp = ty_arena_alloc(&x->mem, (size_t)(n > 0 ? n : 0) + 1);
        for (int64_t i = 0; i < n; i++) sp[i] = ' ';
        sp[n > 0 ? n : 0] = 0;
        ind = sp;
    } else if (indent.kind != JV_NONE) {
        ty_jx_fail(x, "tojson: indent must be an integer, a string or None");
    }
    const char *item_sep = ind ? "," : ", ", *key_sep = ": ";
    if (separators.kind == JV_LIST) {
        if (separators.l->n != 2 || separators.l->v[0].kind != JV_STR || separators.l->v[1].kind != JV_STR)
            ty_jx_fail(x, "tojson: separators must be two strings");
        item_sep = separators.l->v[0].s->p;
        key_sep = separators.l->v[1].s->p;
    } else if (separators.kind != JV_NONE) {
        ty_jx_fail(x, "tojson: separators must be a pair of strings");
    }
    if (self.kind == JV_UNDEFINED) ty_jx_fail(x, "Object of type Undefined is not JSON serializable");
    ty_buf *b = ty_jx_buf(x);
    ty_jv_write_json(x, b, self, ind, item_sep, key_sep, sort_keys);
    if (!ensure_ascii) return buf_str(x, b);
    ty_buf *a = ty_jx_buf(x);
    json_ascii(a, b->v ? b->v : "", b->n);
    return buf_str(x, a);
}

static jv f_trim(ARGS) {
    return strip(x, str_of(x, self), ARG(0, "chars", JV_NONE_V), true, true);
}

static jv f_truncate(ARGS) {
    const int64_t length = need_int(x, ARG(0, "length", ty_jv_int(255)), "truncate");
    const bool killwords = ty_jv_truthy(x, ARG(1, "killwords", JV_FALSE_V));
    jv end = str_of(x, ARG(2, "end", ty_jv_cstr(x, "...")));
    jv leeway = ARG(3, "leeway", JV_NONE_V);
    const int64_t lee = leeway.kind == JV_NONE ? 5 : need_int(x, leeway, "truncate");
    /* jinja2 takes len() of what it is given, and gives back what is short enough as it is */
    if ((int64_t)ty_jv_len(x, self) <= length + lee) return self;
    jv s = str_of(x, self);
    if (length < (int64_t)end.s->n_cp) ty_jx_fail(x, "expected length >= %zu, got %lld", end.s->n_cp, (long long)length);
    const int64_t keep = length - (int64_t)end.s->n_cp;
    jv head = ty_jv_str_slice(x, s, 0, keep, 1);
    if (!killwords) {
        /* up to the last space: s[:keep].rsplit(" ", 1)[0] */
        const char *sp = NULL;
        for (size_t i = head.s->len; i-- > 0;)
            if (head.s->p[i] == ' ') {
                sp = head.s->p + i;
                break;
            }
        if (sp) head = ty_jv_str(x, head.s->p, (size_t)(sp - head.s->p));
    }
    ty_buf *b = ty_jx_buf(x);
    ty_buf_append(b, head.s->p, head.s->len);
    ty_buf_append(b, end.s->p, end.s->len);
    return buf_str(x, b);
}

static jv f_unique(ARGS) {
    const bool case_sensitive = ty_jv_truthy(x, ARG(0, "case_sensitive", JV_FALSE_V));
    jv attribute = ARG(1, "attribute", UNDEF);
    jv items = ty_jv_iter_list(x, self), out = ty_jv_list(x, 0), seen = ty_jv_list(x, 0);
    for (size_t i = 0; i < items.l->n; i++) {
        jv k = sort_key(x, items.l->v[i], attribute, case_sensitive);
        ty_jv_need_hashable(x, k); /* Python keeps a set of them */
        bool dup = false;
        for (size_t j = 0; j < seen.l->n && !dup; j++) {
            ty_jx_step(x);
            dup = ty_jv_equal(seen.l->v[j], k);
        }
        if (dup) continue;
        ty_jv_list_push(x, seen, k);
        ty_jv_list_push(x, out, items.l->v[i]);
    }
    return gen(out);
}

/* jinja2's url_quote: the UTF-8 of str(v), %XX but for letters, digits and _.-~ (and /
 * outside a query string, where a space is +) */
static void url_quote(jx *x, ty_buf *b, jv v, bool for_qs) {
    jv s = str_of(x, v);
    for (size_t i = 0; i < s.s->len; i++) {
        const unsigned char c = (unsigned char)s.s->p[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("_.-~", c) ||
            (c == '/' && !for_qs)) {
            ty_buf_append(b, (const char *)&c, 1);
        } else if (c == ' ' && for_qs) {
            ty_buf_append(b, "+", 1);
        } else {
            char e[4];
            snprintf(e, sizeof e, "%%%02X", c);
            ty_buf_append(b, e, 3);
        }
    }
}

/* a string quoted; a dict's items or an iterable's pairs as k=v&k=v */
static jv f_urlencode(ARGS) {
    ty_buf *b = ty_jx_buf(x);
    if (self.kind != JV_LIST && self.kind != JV_DICT) {
        url_quote(x, b, self, false);
        return buf_str(x, b);
    }
    jv items = self.kind == JV_DICT ? f_items(x, self, args, 0, NULL, NULL, 0) : ty_jv_iter_list(x, self);
    for (size_t i = 0; i < items.l->n; i++) {
        jv pair = items.l->v[i];
        if (pair.kind != JV_LIST && pair.kind != JV_STR)
            ty_jx_fail(x, "cannot unpack non-iterable %s object", ty_jv_type_name(pair));
        pair = ty_jv_iter_list(x, pair);
        if (pair.l->n != 2)
            ty_jx_fail(x, pair.l->n > 2 ? "too many values to unpack (expected 2)"
                                        : "not enough values to unpack (expected 2, got %zu)", pair.l->n);
        if (i) ty_buf_append(b, "&", 1);
        url_quote(x, b, pair.l->v[0], true);
        ty_buf_append(b, "=", 1);
        url_quote(x, b, pair.l->v[1], true);
    }
    return buf_str(x, b);
}

static jv f_wordcount(ARGS) {
    jv s = str_of(x, self);
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i);
        const bool w = c == '_' || (ty_unicode_flags(c) & (TOY_UCD_LETTER | TOY_UCD_NUMBER));
        if (w && !in_word) n++;
        in_word = w;
    }
    return ty_jv_int(n);
}

static const builtin filters[] = {
    {"abs", f_abs, 0},
    {"attr", f_attr, 0},
    {"batch", f_batch, 0},
    {"capitalize", f_capitalize, KEEPS_MARKUP},
    {"center", f_center, KEEPS_MARKUP},
    {"count", f_length, 0},
    {"d", f_default, KEEPS_MARKUP},
    {"default", f_default, KEEPS_MARKUP},
    {"dictsort", f_dictsort, 0},
    {"e", f_escape, 0},
    {"escape", f_escape, 0},
    {"first", f_first, 0},
    {"float", f_float, 0},
    {"forceescape", f_forceescape, 0},
    {"format", f_format, 0},
    {"groupby", f_groupby, 0},
    {"indent", f_indent, KEEPS_MARKUP},
    {"int", f_int, 0},
    {"items", f_items_gen, 0},
    {"join", f_join, 0},
    {"last", f_last, 0},
    {"length", f_length, 0},
    {"list", f_list, 0},
    {"lower", f_lower, KEEPS_MARKUP},
    {"map", f_map, 0},
    {"max", f_max, 0},
    {"min", f_min, 0},
    {"reject", f_reject, 0},
    {"rejectattr", f_rejectattr, 0},
    {"replace", f_replace, 0},
    {"reverse", f_reverse, KEEPS_MARKUP},
    {"round", f_round, 0},
    {"safe", f_safe, 0},
    {"select", f_select, 0},
    {"selectattr", f_selectattr, 0},
    {"slice", f_slice, 0},
    {"sort", f_sort, 0},
    {"string", f_string, KEEPS_MARKUP},
    {"striptags", f_striptags, 0},
    {"sum", f_sum, 0},
    {"title", f_title, 0},
    {"tojson", f_tojson, 0},
    {"trim", f_trim, KEEPS_MARKUP},
    {"truncate", f_truncate, KEEPS_MARKUP},
    {"unique", f_unique, 0},
    {"upper", f_upper, KEEPS_MARKUP},
    {"urlencode", f_urlencode, 0},
    {"wordcount", f_wordcount, 0},
};

/* ---------------------------------------------------------------- tests */

static bool one_arg(jx *x, int n_args, const char *test) {
    if (n_args < 1) ty_jx_fail(x, "the test '%s' needs an argument", test);
    return true;
}

#define TEST(name, expr)                                                                                              \
    static jv t_##name(ARGS) {                                                                                        \
        return ty_jv_bool(expr);                                                                                         \
    }

TEST(boolean, self.kind == JV_BOOL)
TEST(callable, self.kind == JV_MACRO || self.kind == JV_FUNC || self.kind == JV_LOOP || self.kind == JV_JOINER ||
                   self.kind == JV_UNDEFINED)
TEST(defined, self.kind != JV_UNDEFINED)
TEST(undefined, self.kind == JV_UNDEFINED)
TEST(none, self.kind == JV_NONE)
TEST(true, self.kind == JV_BOOL && self.b)
TEST(false, self.kind == JV_BOOL && !self.b)
TEST(integer, self.kind == JV_INT)
TEST(float, self.kind == JV_FLOAT)
TEST(number, ty_jv_is_number(self))
TEST(string, self.kind == JV_STR)
TEST(mapping, self.kind == JV_DICT)
TEST(iterable, self.kind == JV_STR || self.kind == JV_LIST || self.kind == JV_DICT || self.kind == JV_UNDEFINED)
TEST(sequence, self.kind == JV_STR || self.kind == JV_LIST || self.kind == JV_DICT || self.kind == JV_UNDEFINED)
TEST(escaped, false)
/* value in environment.filters (a dict: an unhashable value is an error) */
static jv t_filter(ARGS) {
    ty_jv_need_hashable(x, self);
    return ty_jv_bool(self.kind == JV_STR && ty_jinja_filter(self.s->p) != NULL);
}
static jv t_test(ARGS) {
    ty_jv_need_hashable(x, self);
    return ty_jv_bool(self.kind == JV_STR && ty_jinja_test(self.s->p) != NULL);
}

/* value % 2 == 1 and == 0, on any number (2.5 is neither) */
static jv t_odd(ARGS) { return ty_jv_bool(ty_jv_equal(ty_jx_binary(x, '%', self, ty_jv_int(2)), ty_jv_int(1))); }
static jv t_even(ARGS) { return ty_jv_bool(ty_jv_equal(ty_jx_binary(x, '%', self, ty_jv_int(2)), ty_jv_int(0))); }
static jv t_divisibleby(ARGS) {
    one_arg(x, n_args, "divisibleby");
    /* value % num == 0, on any numbers */
    if (!ty_jv_is_number(self) || !ty_jv_is_number(args[0])) ty_jx_binary(x, '%', self, args[0]);
    return ty_jv_bool(ty_jv_equal(ty_jx_binary(x, '%', self, args[0]), ty_jv_int(0)));
}
static jv t_lower(ARGS) {
    jv s = str_of(x, self);
    bool cased = false;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i);
        if (ty_ju_upper(c) != c && ty_ju_lower(c) == c) cased = true;
        else if (ty_ju_lower(c) != c) return JV_FALSE_V;
    }
    return ty_jv_bool(cased);
}
static jv t_upper(ARGS) {
    jv s = str_of(x, self);
    bool cased = false;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i);
        if (ty_ju_lower(c) != c && ty_ju_upper(c) == c) cased = true;
        else if (ty_ju_upper(c) != c) return JV_FALSE_V;
    }
    return ty_jv_bool(cased);
}

#define COMPARE_TEST(name, op)                                                                                         \
    static jv t_##name(ARGS) {                                                                                        \
        one_arg(x, n_args, #name);                                                                                   \
        return ty_jv_bool(op);                                                                                          \
    }
COMPARE_TEST(eq, ty_jv_equal(self, args[0]))
COMPARE_TEST(ne, !ty_jv_equal(self, args[0]))
COMPARE_TEST(lt, ty_jv_compare(x, self, args[0]) < 0)
COMPARE_TEST(le, ty_jv_compare(x, self, args[0]) <= 0)
COMPARE_TEST(gt, ty_jv_compare(x, self, args[0]) > 0)
COMPARE_TEST(ge, ty_jv_compare(x, self, args[0]) >= 0)

static jv t_sameas(ARGS) {
    one_arg(x, n_args, "sameas");
    jv o = args[0];
    if (self.kind != o.kind) return JV_FALSE_V;
    switch (self.kind) {
    case JV_NONE:
    case JV_UNDEFINED: return JV_TRUE_V;
    case JV_BOOL: return ty_jv_bool(self.b == o.b);
    case JV_INT: return ty_jv_bool(self.i == o.i && self.i >= -5 && self.i <= 256); /* CPython's cached ints */
    case JV_STR: return ty_jv_bool(self.s == o.s);
    case JV_LIST: return ty_jv_bool(self.l == o.l);
    case JV_DICT: return ty_jv_bool(self.d == o.d);
    case JV_FLOAT: return JV_FALSE_V;
    default: return ty_jv_bool(self.o == o.o);
    }
}

static jv t_in(ARGS) {
    one_arg(x, n_args, "in");
    jv hay = args[0];
    if (hay.kind == JV_STR && self.kind == JV_STR)
        return ty_jv_bool(self.s->len == 0 || memmem(hay.s->p, hay.s->len, self.s->p, self.s->len));
    if (hay.kind == JV_LIST) {
        for (size_t i = 0; i < hay.l->n; i++)
            if (ty_jv_equal(hay.l->v[i], self)) return JV_TRUE_V;
        return JV_FALSE_V;
    }
    if (hay.kind == JV_DICT) return ty_jv_bool(ty_jv_dict_get(hay, self) != NULL);
    if (hay.kind == JV_UNDEFINED) return JV_FALSE_V;
    ty_jx_fail(x, "argument of type '%s' is not iterable", ty_jv_type_name(hay));
}

static const builtin tests[] = {
    {"!=", t_ne, 0},
    {"<", t_lt, 0},
    {"<=", t_le, 0},
    {"==", t_eq, 0},
    {">", t_gt, 0},
    {">=", t_ge, 0},
    {"boolean", t_boolean, 0},
    {"callable", t_callable, 0},
    {"defined", t_defined, 0},
    {"divisibleby", t_divisibleby, 0},
    {"eq", t_eq, 0},
    {"equalto", t_eq, 0},
    {"escaped", t_escaped, 0},
    {"even", t_even, 0},
    {"false", t_false, 0},
    {"filter", t_filter, 0},
    {"float", t_float, 0},
    {"ge", t_ge, 0},
    {"greaterthan", t_gt, 0},
    {"gt", t_gt, 0},
    {"in", t_in, 0},
    {"integer", t_integer, 0},
    {"iterable", t_iterable, 0},
    {"le", t_le, 0},
    {"lessthan", t_lt, 0},
    {"lower", t_lower, 0},
    {"lt", t_lt, 0},
    {"mapping", t_mapping, 0},
    {"ne", t_ne, 0},
    {"none", t_none, 0},
    {"number", t_number, 0},
    {"odd", t_odd, 0},
    {"sameas", t_sameas, 0},
    {"sequence", t_sequence, 0},
    {"string", t_string, 0},
    {"test", t_test, 0},
    {"true", t_true, 0},
    {"undefined", t_undefined, 0},
    {"upper", t_upper, 0},
};

/* ---------------------------------------------------------------- globals */

static jv g_range(ARGS) {
    if (n_kw) ty_jx_fail(x, "range() takes no keyword arguments");
    if (n_args < 1 || n_args > 3) ty_jx_fail(x, "range expected 1 to 3 arguments, got %d", n_args);
    int64_t start = 0, stop, step = 1;
    if (n_args == 1) {
        stop = need_int(x, args[0], "range");
    } else {
        start = need_int(x, args[0], "range");
        stop = need_int(x, args[1], "range");
        if (n_args == 3) step = need_int(x, args[2], "range");
    }
    if (step == 0) ty_jx_fail(x, "range() arg 3 must not be zero");
    /* jinja2's sandbox: MAX_RANGE */
    const double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                                  : ceil(((double)start - (double)stop) / (double)-step);
    if (count > 100000) ty_jx_fail(x, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jv out = ty_jv_list(x, count > 0 ? (size_t)count : 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) ty_jv_list_push(x, out, ty_jv_int(i));
    out.seq = SEQ_RANGE;
    out.l->range[0] = start;
    out.l->range[1] = stop;
    out.l->range[2] = step;
    return out;
}

static jv g_dict(ARGS) {
    jv d = ty_jv_dict(x, (size_t)n_kw);
    if (n_args > 1) ty_jx_fail(x, "dict expected at most 1 argument, got %d", n_args);
    if (n_args == 1) {
        jv src = args[0];
        if (src.kind == JV_DICT) {
            for (size_t i = 0; i < src.d->n; i++) ty_jv_dict_set(x, d, src.d->k[i], src.d->v[i]);
        } else {
            jv items = ty_jv_iter_list(x, src);
            for (size_t i = 0; i < items.l->n; i++) {
                jv pair = ty_jv_iter_list(x, items.l->v[i]);
                if (pair.l->n != 2) ty_jx_fail(x, "dictionary update sequence element #%zu has length %zu; 2 is required", i, pair.l->n);
                ty_jv_dict_set(x, d, pair.l->v[0], pair.l->v[1]);
            }
        }
    }
    for (int i = 0; i < n_kw; i++) ty_jv_dict_set(x, d, ty_jv_cstr(x, kw_names[i]), kw[i]);
    return d;
}

static jv g_namespace(ARGS) {
    jv d = g_dict(x, self, args, n_args, kw_names, kw, n_kw);
    jobj *o = ty_arena_alloc(&x->mem, sizeof *o);
    memset(o, 0, sizeof *o);
    o->ns = d.d;
    return (jv){.kind = JV_NAMESPACE, .o = o};
}

static jv g_cycler(ARGS) {
    if (n_kw) ty_jx_fail(x, "cycler() takes no keyword arguments");
    if (n_args < 1) ty_jx_fail(x, "at least one item has to be provided");
    jobj *o = ty_arena_alloc(&x->mem, sizeof *o);
    memset(o, 0, sizeof *o);
    jv l = ty_jv_list(x, (size_t)n_args);
    for (int i = 0; i < n_args; i++) ty_jv_list_push(x, l, args[i]);
    o->items = l.l;
    return (jv){.kind = JV_CYCLER, .o = o};
}

static jv g_joiner(ARGS) {
    jobj *o = ty_arena_alloc(&x->mem, sizeof *o);
    memset(o, 0, sizeof *o);
    o->sep = str_of(x, ARG(0, "sep", ty_jv_cstr(x, ", ")));
    return (jv){.kind = JV_JOINER, .o = o};
}

static jv g_raise_exception(ARGS) {
    jv msg = str_of(x, ARG(0, "message", ty_jv_str(x, "", 0)));
    x->raised = true;
    ty_jx_fail(x, "%s", msg.s->p);
}

static jv g_strftime_now(ARGS) {
    jv fmt = need_str(x, ARG(0, "format", UNDEF), "strftime_now");
    const time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char out[512];
    const size_t n = fmt.s->len ? strftime(out, sizeof out, fmt.s->p, &tm) : 0;
    return ty_jv_str(x, out, n);
}

static const builtin globals[] = {
    {"cycler", g_cycler, 0},
    {"dict", g_dict, 0},
    {"joiner", g_joiner, 0},
    {"namespace", g_namespace, 0},
    {"raise_exception", g_raise_exception, 0},
    {"range", g_range, 0},
    {"strftime_now", g_strftime_now, 0},
};

static const builtin *find(const builtin *table, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const int c = strcmp(table[mid].name, name);
        if (c == 0) return &table[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

#define FIND(table, name) find(table, sizeof table / sizeof *table, name)
const builtin *ty_jinja_filter(const char *name) { return FIND(filters, name); }
const builtin *ty_jinja_test(const char *name) { return FIND(tests, name); }
const builtin *ty_jinja_global(const char *name) { return FIND(globals, name); }

/* ---------------------------------------------------------------- calls */

/* Markup's wrapped methods: string arguments (a join's items) escaped, string results
 * (a split's pieces) Markup */
jv ty_jinja_call_builtin(jx *x, jv fn, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw) {
    const builtin *b = fn.o->fn;
    jv self = fn.o->self;
    if (!(self.kind == JV_STR && self.markup && (b->flags & KEEPS_MARKUP)))
        return b->fn(x, self, args, n_args, kw_names, kw, n_kw);
    jv *a = ty_arena_alloc(&x->mem, (size_t)(n_args + 1) * sizeof *a), *k = ty_arena_alloc(&x->mem, (size_t)(n_kw + 1) * sizeof *k);
    for (int i = 0; i < n_args + n_kw; i++) {
        jv v = i < n_args ? args[i] : kw[i - n_args];
        if (v.kind == JV_STR) {
            v = escape_value(x, v, false);
        } else if (v.kind == JV_LIST && !strcmp(b->name, "join")) {
            jv items = ty_jv_iter_list(x, v);
            v = ty_jv_list(x, items.l->n);
            for (size_t j = 0; j < items.l->n; j++)
                ty_jv_list_push(x, v, items.l->v[j].kind == JV_STR ? escape_value(x, items.l->v[j], false) : items.l->v[j]);
        }
        if (i < n_args) a[i] = v;
        else k[i - n_args] = v;
    }
    jv r = b->fn(x, self, a, n_args, kw_names, k, n_kw);
    if (r.kind == JV_LIST)
        for (size_t j = 0; j < r.l->n; j++) r.l->v[j] = ty_jv_markup(r.l->v[j]);
    return ty_jv_markup(r);
}

/* ---------------------------------------------------------------- methods */

static jv m_str_strip(ARGS) { return strip(x, self, ARG(0, "chars", JV_NONE_V), true, true); }
static jv m_str_lstrip(ARGS) { return strip(x, self, ARG(0, "chars", JV_NONE_V), true, false); }
static jv m_str_rstrip(ARGS) { return strip(x, self, ARG(0, "chars", JV_NONE_V), false, true); }
static jv m_str_lower(ARGS) {
    return map_case(x, self, 0);
}
static jv m_str_upper(ARGS) {
    return map_case(x, self, 1);
}
static jv m_str_capitalize(ARGS) {
    return map_case(x, self, 2);
}
static jv m_str_title(ARGS) {
    return map_case(x, self, 3);
}
static jv m_str_split(ARGS) {
    jv max = ARG(1, "maxsplit", ty_jv_int(-1));
    return split(x, self, ARG(0, "sep", JV_NONE_V), need_int(x, max, "split"), false);
}
static jv m_str_rsplit(ARGS) {
    jv max = ARG(1, "maxsplit", ty_jv_int(-1));
    return split(x, self, ARG(0, "sep", JV_NONE_V), need_int(x, max, "rsplit"), true);
}
static jv m_str_splitlines(ARGS) { return splitlines(x, self, ty_jv_truthy(x, ARG(0, "keepends", JV_FALSE_V))); }
static jv m_str_startswith(ARGS) { return affix_test(x, self, ARG(0, "prefix", UNDEF), false); }
static jv m_str_endswith(ARGS) { return affix_test(x, self, ARG(0, "suffix", UNDEF), true); }
static jv m_str_replace(ARGS) {
    jv old = need_str(x, ARG(0, "old", UNDEF), "replace"), new_ = need_str(x, ARG(1, "new", UNDEF), "replace");
    return replace(x, self, old, new_, need_int(x, ARG(2, "count", ty_jv_int(-1)), "replace"));
}
static jv find_sub(jx *x, jv self, jv sub, bool last) {
    need_str(x, sub, "find");
    const char *hit = NULL;
    if (!last) {
        hit = sub.s->len == 0 ? self.s->p : memmem(self.s->p, self.s->len, sub.s->p, sub.s->len);
    } else {
        for (size_t i = self.s->len + 1; i-- > 0 && !hit;)
            if (i + sub.s->len <= self.s->len && !memcmp(self.s->p + i, sub.s->p, sub.s->len)) hit = self.s->p + i;
    }
    return ty_jv_int(hit ? cp_index(self.s, (size_t)(hit - self.s->p)) : -1);
}
static jv m_str_find(ARGS) { return find_sub(x, self, ARG(0, "sub", UNDEF), false); }
static jv m_str_rfind(ARGS) { return find_sub(x, self, ARG(0, "sub", UNDEF), true); }
static jv m_str_index(ARGS) {
    jv r = find_sub(x, self, ARG(0, "sub", UNDEF), false);
    if (r.i < 0) ty_jx_fail(x, "substring not found");
    return r;
}
static jv m_str_count(ARGS) {
    jv sub = need_str(x, ARG(0, "sub", UNDEF), "count");
    if (sub.s->len == 0) return ty_jv_int((int64_t)self.s->n_cp + 1);
    int64_t n = 0;
    for (const char *p = self.s->p, *end = p + self.s->len, *hit;
         (hit = memmem(p, (size_t)(end - p), sub.s->p, sub.s->len)); p = hit + sub.s->len)
        n++;
    return ty_jv_int(n);
}
static jv m_str_join(ARGS) {
    jv items = ty_jv_iter_list(x, ARG(0, "iterable", UNDEF));
    ty_buf *b = ty_jx_buf(x);
    for (size_t i = 0; i < items.l->n; i++) {
        if (items.l->v[i].kind != JV_STR) {
            ty_jx_fail(x, "sequence item %zu: expected str instance, %s found", i, ty_jv_type_name(items.l->v[i]));
        }
        if (i) ty_buf_append(b, self.s->p, self.s->len);
        ty_buf_append(b, items.l->v[i].s->p, items.l->v[i].s->len);
        ty_jx_step(x);
    }
    return buf_str(x, b);
}
static jv m_str_format(ARGS) { return str_format(x, self, args, n_args, kw_names, kw, n_kw); }
static jv m_str_removeprefix(ARGS) {
    jv p = need_str(x, ARG(0, "prefix", UNDEF), "removeprefix");
    if (affix_test(x, self, p, false).b) return ty_jv_str(x, self.s->p + p.s->len, self.s->len - p.s->len);
    return self;
}
static jv m_str_removesuffix(ARGS) {
    jv p = need_str(x, ARG(0, "suffix", UNDEF), "removesuffix");
    if (p.s->len && affix_test(x, self, p, true).b) return ty_jv_str(x, self.s->p, self.s->len - p.s->len);
    return self;
}
static jv str_class(jx *x, jv self, uint16_t flags, bool digits_only, bool space) {
    if (self.s->len == 0) return JV_FALSE_V;
    for (size_t i = 0; i < self.s->len;) {
        const uint32_t c = next_cp(self.s, &i);
        if (space ? !ty_ju_space(c) : digits_only ? !(c >= '0' && c <= '9') && !(ty_unicode_flags(c) & TOY_UCD_NUMBER)
                                               : !(ty_unicode_flags(c) & flags))
            return JV_FALSE_V;
    }
    return JV_TRUE_V;
}
static jv m_str_isalpha(ARGS) {
    return str_class(x, self, TOY_UCD_LETTER, false, false);
}
static jv m_str_isalnum(ARGS) {
    return str_class(x, self, TOY_UCD_LETTER | TOY_UCD_NUMBER, false, false);
}
static jv m_str_isdigit(ARGS) {
    return str_class(x, self, 0, true, false);
}
static jv m_str_isspace(ARGS) {
    return str_class(x, self, 0, false, true);
}
static jv m_str_islower(ARGS) { return t_lower(x, self, args, n_args, kw_names, kw, n_kw); }
static jv m_str_isupper(ARGS) { return t_upper(x, self, args, n_args, kw_names, kw, n_kw); }
static jv pad(jx *x, jv self, int64_t width, jv fill, int where) {
    if (fill.kind != JV_STR || fill.s->n_cp != 1) ty_jx_fail(x, "The fill character must be exactly one character long");
    const int64_t len = (int64_t)self.s->n_cp;
    if (width <= len) return self;
    if (width > (int64_t)x->lim.max_output) ty_jx_fail(x, "width too large");
    const int64_t p = width - len, left = where < 0 ? 0 : where > 0 ? p : p / 2 + (p & width & 1);
    ty_buf *b = ty_jx_buf(x);
    for (int64_t i = 0; i < left; i++) ty_buf_append(b, fill.s->p, fill.s->len);
    ty_buf_append(b, self.s->p, self.s->len);
    for (int64_t i = 0; i < p - left; i++) ty_buf_append(b, fill.s->p, fill.s->len);
    return buf_str(x, b);
}
static jv m_str_zfill(ARGS) {
    const int64_t width = need_int(x, ARG(0, "width", UNDEF), "zfill");
    const bool sign = self.s->len && (self.s->p[0] == '+' || self.s->p[0] == '-');
    jv padded = pad(x, sign ? ty_jv_str(x, self.s->p + 1, self.s->len - 1) : self, width - sign, ty_jv_cstr(x, "0"), 1);
    if (!sign) return padded;
    ty_buf *b = ty_jx_buf(x);
    ty_buf_append(b, self.s->p, 1);
    ty_buf_append(b, padded.s->p, padded.s->len);
    return buf_str(x, b);
}

static jv m_str_ljust(ARGS) {
    return pad(x, self, need_int(x, ARG(0, "width", UNDEF), "ljust"), ARG(1, "fillchar", ty_jv_cstr(x, " ")), -1);
}
static jv m_str_rjust(ARGS) {
    return pad(x, self, need_int(x, ARG(0, "width", UNDEF), "rjust"), ARG(1, "fillchar", ty_jv_cstr(x, " ")), 1);
}
static jv m_str_center(ARGS) {
    return pad(x, self, need_int(x, ARG(0, "width", UNDEF), "center"), ARG(1, "fillchar", ty_jv_cstr(x, " ")), 0);
}

static jv m_dict_get(ARGS) {
    jv key = ARG(0, "key", UNDEF);
    const jv *v = ty_jv_dict_get(self, key);
    return v ? *v : ARG(1, "default", JV_NONE_V);
}
static jv m_dict_items(ARGS) {
    jv v = f_items(x, self, args, n_args, kw_names, kw, n_kw);
    v.seq = SEQ_ITEMS;
    return v;
}
static jv m_dict_keys(ARGS) {
    jv v = ty_jv_iter_list(x, self);
    v.seq = SEQ_KEYS;
    return v;
}
static jv m_dict_values(ARGS) {
    jv out = ty_jv_list(x, self.d->n);
    for (size_t i = 0; i < self.d->n; i++) ty_jv_list_push(x, out, self.d->v[i]);
    out.seq = SEQ_VALUES;
    return out;
}
static jv m_copy(ARGS) {
    if (self.kind == JV_LIST) return f_list(x, self, args, n_args, kw_names, kw, n_kw);
    return g_dict(x, UNDEF, &self, 1, NULL, NULL, 0);
}
static jv m_list_count(ARGS) {
    jv v = ARG(0, "value", UNDEF);
    int64_t n = 0;
    for (size_t i = 0; i < self.l->n; i++) n += ty_jv_equal(self.l->v[i], v);
    return ty_jv_int(n);
}
static jv m_list_index(ARGS) {
    jv v = ARG(0, "value", UNDEF);
    for (size_t i = 0; i < self.l->n; i++)
        if (ty_jv_equal(self.l->v[i], v)) return ty_jv_int((int64_t)i);
    ty_jx_fail(x, "value is not in list");
}

static jv m_cycler_next(ARGS) {
    jv v = self.o->items->v[self.o->pos];
    self.o->pos = (self.o->pos + 1) % (int64_t)self.o->items->n;
    return v;
}
static jv m_cycler_reset(ARGS) {
    self.o->pos = 0;
    return JV_NONE_V;
}

static jv m_loop_cycle(ARGS) {
    if (n_args < 1) ty_jx_fail(x, "no items for cycling given");
    return args[self.o->index0 % n_args];
}
static jv m_loop_changed(ARGS) {
    jv t = ty_jv_list(x, (size_t)n_args);
    t.seq = SEQ_TUPLE;
    for (int i = 0; i < n_args; i++) ty_jv_list_push(x, t, args[i]);
    if (self.o->changed_seen && ty_jv_equal(self.o->last_changed, t)) return JV_FALSE_V;
    self.o->changed_seen = true;
    self.o->last_changed = t;
    return JV_TRUE_V;
}

static const builtin str_methods[] = {
    {"capitalize", m_str_capitalize, KEEPS_MARKUP},
    {"center", m_str_center, KEEPS_MARKUP},
    {"count", m_str_count, 0},
    {"endswith", m_str_endswith, 0},
    {"find", m_str_find, 0},
    {"format", m_str_format, KEEPS_MARKUP},
    {"index", m_str_index, 0},
    {"isalnum", m_str_isalnum, 0},
    {"isalpha", m_str_isalpha, 0},
    {"isdigit", m_str_isdigit, 0},
    {"islower", m_str_islower, 0},
    {"isspace", m_str_isspace, 0},
    {"isupper", m_str_isupper, 0},
    {"join", m_str_join, KEEPS_MARKUP},
    {"ljust", m_str_ljust, KEEPS_MARKUP},
    {"lower", m_str_lower, KEEPS_MARKUP},
    {"lstrip", m_str_lstrip, KEEPS_MARKUP},
    {"removeprefix", m_str_removeprefix, 0},
    {"removesuffix", m_str_removesuffix, 0},
    {"replace", m_str_replace, KEEPS_MARKUP},
    {"rfind", m_str_rfind, 0},
    {"rjust", m_str_rjust, KEEPS_MARKUP},
    {"rsplit", m_str_rsplit, KEEPS_MARKUP},
    {"rstrip", m_str_rstrip, KEEPS_MARKUP},
    {"split", m_str_split, KEEPS_MARKUP},
    {"splitlines", m_str_splitlines, KEEPS_MARKUP},
    {"startswith", m_str_startswith, 0},
    {"strip", m_str_strip, KEEPS_MARKUP},
    {"title", m_str_title, KEEPS_MARKUP},
    {"upper", m_str_upper, KEEPS_MARKUP},
    {"zfill", m_str_zfill, KEEPS_MARKUP},
};
static const builtin dict_methods[] = {
    {"copy", m_copy, 0}, {"get", m_dict_get, 0}, {"items", m_dict_items, 0}, {"keys", m_dict_keys, 0}, {"values", m_dict_values, 0},
};
static const builtin list_methods[] = {
    {"copy", m_copy, 0},
    {"count", m_list_count, 0},
    {"index", m_list_index, 0},
};
static const builtin cycler_methods[] = {{"next", m_cycler_next, 0}, {"reset", m_cycler_reset, 0}};
static const builtin loop_methods[] = {{"changed", m_loop_changed, 0}, {"cycle", m_loop_cycle, 0}};

/* the methods that write, which the immutable sandbox refuses */
static const char *const unsafe_list[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort", NULL};
static const char *const unsafe_dict[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};

static jv bound(jx *x, const builtin *b, jv self) {
    jobj *o = ty_arena_alloc(&x->mem, sizeof *o);
    memset(o, 0, sizeof *o);
    o->fn = b;
    o->self = self;
    return (jv){.kind = JV_FUNC, .o = o};
}

jv ty_jinja_method(jx *x, jv self, const char *name) {
    const builtin *b = NULL;
    const char *const *unsafe = NULL;
    switch (self.kind) {
    case JV_STR: b = FIND(str_methods, name); break;
    case JV_DICT:
        b = FIND(dict_methods, name);
        unsafe = unsafe_dict;
        break;
    case JV_LIST:
        b = FIND(list_methods, name);
        unsafe = unsafe_list;
        break;
    case JV_CYCLER:
        if (!strcmp(name, "current")) return self.o->items->v[self.o->pos];
        b = FIND(cycler_methods, name);
        break;
    case JV_LOOP: b = FIND(loop_methods, name); break;
    default: break;
    }
    if (b) return bound(x, b, self);
    for (; unsafe && *unsafe; unsafe++)
        if (!strcmp(*unsafe, name)) {
            char msg[160];
            snprintf(msg, sizeof msg, "access to attribute '%s' of '%s' object is unsafe.", name, ty_jv_type_name(self));
            return ty_jv_undefined(ty_jv_cstr(x, msg).s->p);
        }
    return UNDEF;
}

jv ty_jinja_loop_attr(jx *x, jv loop, const char *name) {
    const jobj *o = loop.o;
    const int64_t i = o->index0, n = (int64_t)o->items->n;
    if (!strcmp(name, "index")) return ty_jv_int(i + 1);
    if (!strcmp(name, "index0")) return ty_jv_int(i);
    if (!strcmp(name, "revindex")) return ty_jv_int(n - i);
    if (!strcmp(name, "revindex0")) return ty_jv_int(n - i - 1);
    if (!strcmp(name, "first")) return ty_jv_bool(i == 0);
    if (!strcmp(name, "last")) return ty_jv_bool(i == n - 1);
    if (!strcmp(name, "length")) return ty_jv_int(n);
    if (!strcmp(name, "depth")) return ty_jv_int(o->depth0 + 1);
    if (!strcmp(name, "depth0")) return ty_jv_int(o->depth0);
    if (!strcmp(name, "previtem")) return i > 0 ? o->items->v[i - 1] : ty_jv_undefined("there is no previous item");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? o->items->v[i + 1] : ty_jv_undefined("there is no next item");
    jv m = ty_jinja_method(x, loop, name);
    if (m.kind != JV_UNDEFINED) return m;
    char msg[160];
    snprintf(msg, sizeof msg, "'LoopContext object' has no attribute '%s'", name);
    return ty_jv_undefined(ty_jv_cstr(x, msg).s->p);
}
