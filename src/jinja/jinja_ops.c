/* jinja_ops.c — what Python does with a value: attributes and items (the sandbox's
 * rules: only data, no private names, no method that writes), the arithmetic and
 * concatenation operators, str % args and str.format, and the methods of str, dict, list,
 * the loop and the cycler, with the string work they share with the filters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "unicode.h"

/* ---------------------------------------------------------------- attributes and items */

static const char *object_type_repr(jv v) {
    switch (v.kind) {
    case JV_NONE: return "None";
    case JV_STR: return "str object";
    case JV_LIST: return v.seq == SEQ_TUPLE ? "tuple object" : "list object";
    case JV_DICT: return "dict object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_BOOL: return "bool object";
    case JV_NAMESPACE: return "jinja2.utils.Namespace object";
    default: return "object";
    }
}

static jv no_attribute(jx *x, jv obj, const char *name) {
    return ty_jv_undefined(ty_jx_sprintf(x, "'%s' has no attribute '%s'", object_type_repr(obj), name));
}

jv ty_jx_getattr(jx *x, jv obj, const char *name) {
    if (obj.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, obj);
    if (name[0] == '_') /* the sandbox: no dunder or private attribute is reachable */
        return ty_jv_undefined(ty_jx_sprintf(x, "access to attribute '%s' of '%s' object is unsafe.", name,
                                          ty_jv_type_name(obj)));
    switch (obj.kind) {
    case JV_DICT: {
        jv m = ty_jinja_method(x, obj, name);
        if (m.kind != JV_UNDEFINED || m.undef) return m;
        const jv *v = ty_jv_dict_get_str(obj, name);
        return v ? *v : no_attribute(x, obj, name);
    }
    case JV_NAMESPACE: {
        const jv *v = ty_jv_dict_get_str(obj, name);
        return v ? *v : no_attribute(x, obj, name);
    }
    case JV_LOOP: return ty_jinja_loop_attr(x, obj, name);
    case JV_STR:
    case JV_LIST: {
        jv m = ty_jinja_method(x, obj, name);
        return m.kind != JV_UNDEFINED || m.undef ? m : no_attribute(x, obj, name);
    }
    case JV_CYCLER: {
        jv m = ty_jinja_method(x, obj, name);
        return m.kind != JV_UNDEFINED || m.undef ? m : no_attribute(x, obj, name);
    }
    default: return no_attribute(x, obj, name);
    }
}

static jv no_element(jx *x, jv obj, jv key) {
    ty_buf *k = ty_jx_buf(x);
    ty_jv_write_repr(x, k, key);
    jv u = ty_jv_undefined(ty_jx_sprintf(x, "%s has no element %s", object_type_repr(obj), k->v ? k->v : ""));
    ty_jx_buf_done(k);
    return u;
}

/* Python's index rules: negative from the end; false when out of range */
static bool norm_index(int64_t i, size_t n, size_t *out) {
    if (i < 0) i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n) return false;
    *out = (size_t)i;
    return true;
}

jv ty_jx_getitem(jx *x, jv obj, jv key) {
    if (obj.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, obj);
    switch (obj.kind) {
    case JV_DICT: {
        const jv *v = ty_jv_dict_get(obj, key);
        if (v) return *v;
        break;
    }
    case JV_LIST:
    case JV_STR:
        if (obj.kind == JV_LIST && obj.seq > SEQ_RANGE) break; /* not subscriptable */
        if (key.kind == JV_INT || key.kind == JV_BOOL) {
            size_t at;
            const int64_t i = key.kind == JV_INT ? key.i : key.b;
            if (obj.kind == JV_LIST && norm_index(i, obj.l->n, &at)) return obj.l->v[at];
            if (obj.kind == JV_STR && norm_index(i, obj.s->n_cp, &at)) {
                const size_t a = ty_jstr_cp_offset(obj.s, at), b = ty_jstr_cp_offset(obj.s, at + 1);
                jv c = ty_jv_str(x, obj.s->p + a, b - a);
                c.markup = obj.markup;
                return c;
            }
            return no_element(x, obj, key);
        }
        break;
    default: break;
    }
    if (key.kind == JV_STR) return ty_jx_getattr(x, obj, key.s->p);
    return no_element(x, obj, key);
}

/* ---------------------------------------------------------------- arithmetic */

static _Noreturn void bad_operands(jx *x, const char *op, jv a, jv b) {
    if (a.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, a);
    if (b.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, b);
    ty_jx_fail(x, "unsupported operand type(s) for %s: '%s' and '%s'", op, ty_jv_type_name(a), ty_jv_type_name(b));
}

static bool repeatable(jv v) { return v.kind == JV_STR || (v.kind == JV_LIST && v.seq <= SEQ_TUPLE); }

static jv repeat(jx *x, jv seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq.kind == JV_STR) {
        if (times && seq.s->len > x->lim.max_memory / (uint64_t)times)
            ty_jx_fail(x, "the template used more than %zu MiB of memory", x->lim.max_memory >> 20);
        char *p = ty_arena_alloc(&x->mem, seq.s->len * (size_t)times + 1);
        for (int64_t i = 0; i < times; i++) memcpy(p + (size_t)i * seq.s->len, seq.s->p, seq.s->len);
        jv r = ty_jv_str(x, p, seq.s->len * (size_t)times);
        r.markup = seq.markup;
        return r;
    }
    if (times && seq.l->n > x->lim.max_memory / sizeof(jv) / (uint64_t)times)
        ty_jx_fail(x, "the template used more than %zu MiB of memory", x->lim.max_memory >> 20);
    jv out = ty_jv_list(x, seq.l->n * (size_t)times);
    out.seq = seq.seq;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.l->n; k++) ty_jv_list_push(x, out, seq.l->v[k]);
    return out;
}

static jv escaped(jx *x, jv s) {
    ty_buf *b = ty_jx_buf(x);
    ty_jv_escape(b, s.s->p, s.s->len);
    jv e = ty_jv_str(x, b->v ? b->v : "", b->n);
    ty_jx_buf_done(b);
    return e;
}

static jv concat(jx *x, jv a, jv b) {
    jv sa = ty_jv_to_str(x, a), sb = ty_jv_to_str(x, b);
    char *p = ty_arena_alloc(&x->mem, sa.s->len + sb.s->len + 1);
    memcpy(p, sa.s->p, sa.s->len);
    memcpy(p + sa.s->len, sb.s->p, sb.s->len);
    return ty_jv_str(x, p, sa.s->len + sb.s->len);
}

jv ty_jx_binary(jx *x, char op, jv a, jv b) {
    const bool nums = ty_jv_is_number(a) && ty_jv_is_number(b);
    const bool ints = nums && a.kind != JV_FLOAT && b.kind != JV_FLOAT;
    int64_t r;
    switch (op) {
    case '~': return concat(x, a, b);
    case '+':
        if (ints) {
            if (__builtin_add_overflow(as_int(a), as_int(b), &r)) ty_jx_fail(x, "integer overflow");
            return ty_jv_int(r);
        }
        if (nums) return ty_jv_float(ty_jv_number(a) + ty_jv_number(b));
        if (a.kind == JV_STR && b.kind == JV_STR && (a.markup || b.markup)) /* Markup escapes what is added */
            return ty_jv_markup(concat(x, a.markup ? a : escaped(x, a), b.markup ? b : escaped(x, b)));
        if (a.kind == JV_STR && b.kind == JV_STR) return concat(x, a, b);
        if (a.kind == JV_LIST && b.kind == JV_LIST && a.seq == b.seq && a.seq <= SEQ_TUPLE) {
            jv out = ty_jv_list(x, a.l->n + b.l->n);
            out.seq = a.seq;
            for (size_t i = 0; i < a.l->n; i++) ty_jv_list_push(x, out, a.l->v[i]);
            for (size_t i = 0; i < b.l->n; i++) ty_jv_list_push(x, out, b.l->v[i]);
            return out;
        }
        bad_operands(x, "+", a, b);
    case '-':
        if (ints) {
            if (__builtin_sub_overflow(as_int(a), as_int(b), &r)) ty_jx_fail(x, "integer overflow");
            return ty_jv_int(r);
        }
        if (nums) return ty_jv_float(ty_jv_number(a) - ty_jv_number(b));
        bad_operands(x, "-", a, b);
    case '*':
        if (ints) {
            if (__builtin_mul_overflow(as_int(a), as_int(b), &r)) ty_jx_fail(x, "integer overflow");
            return ty_jv_int(r);
        }
        if (nums) return ty_jv_float(ty_jv_number(a) * ty_jv_number(b));
        if (repeatable(a) && (b.kind == JV_INT || b.kind == JV_BOOL)) return repeat(x, a, as_int(b));
        if (repeatable(b) && (a.kind == JV_INT || a.kind == JV_BOOL)) return repeat(x, b, as_int(a));
        bad_operands(x, "*", a, b);
    case '/':
        if (!nums) bad_operands(x, "/", a, b);
        if (ty_jv_number(b) == 0) ty_jx_fail(x, "division by zero");
        return ty_jv_float(ty_jv_number(a) / ty_jv_number(b));
    case 'f':
    case '%':
        if (op == '%' && a.kind == JV_STR) return ty_jinja_percent_format(x, a, b);
        if (!nums) bad_operands(x, op == 'f' ? "//" : "%", a, b);
        if (ty_jv_number(b) == 0) ty_jx_fail(x, "integer division or modulo by zero");
        if (ints) {
            const int64_t p = as_int(a), q = as_int(b);
            if (p == INT64_MIN && q == -1) ty_jx_fail(x, "integer overflow");
            int64_t quo = p / q, rem = p % q;
            if (rem != 0 && ((rem < 0) != (q < 0))) quo--, rem += q;
            return ty_jv_int(op == 'f' ? quo : rem);
        } else {
            const double p = ty_jv_number(a), q = ty_jv_number(b);
            double rem = fmod(p, q);
            if (rem != 0 && ((rem < 0) != (q < 0))) rem += q;
            return ty_jv_float(op == 'f' ? floor((p - rem) / q + 0.5) : rem);
        }
    case 'p':
        if (!nums) bad_operands(x, "**", a, b);
        if (ints && as_int(b) >= 0) {
            int64_t base = as_int(a), e = as_int(b), acc = 1;
            while (e > 0) {
                if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) ty_jx_fail(x, "integer overflow");
                e >>= 1;
                if (e && __builtin_mul_overflow(base, base, &base)) ty_jx_fail(x, "integer overflow");
            }
            return ty_jv_int(acc);
        }
        if (ty_jv_number(a) == 0 && ty_jv_number(b) < 0) ty_jx_fail(x, "0.0 cannot be raised to a negative power");
        {
            const double p = ty_jv_number(a), q = ty_jv_number(b), power = pow(p, q);
            /* Python's float ** float raises where C's pow overflows */
            if (isinf(power) && isfinite(p) && isfinite(q)) ty_jx_fail(x, "(34, 'Numerical result out of range')");
            return ty_jv_float(power);
        }
    }
    ty_jx_fail(x, "unknown operator");
}

/* ---------------------------------------------------------------- string helpers */

static bool cased_letter(uint32_t c) { return ty_ju_lower(c) != c || ty_ju_upper(c) != c; }

/* whether str.strip(chars) takes c away: c is in chars, or with none white space */
static bool stripped(const jstr *chars, uint32_t c) {
    if (!chars) return ty_ju_space(c);
    for (size_t k = 0; k < chars->len;)
        if (next_cp(chars, &k) == c) return true;
    return false;
}

jv ty_jx_strip(jx *x, jv s, jv chars, bool left, bool right) {
    const jstr *cs = chars.kind == JV_STR ? chars.s : NULL;
    if (chars.kind != JV_NONE && chars.kind != JV_UNDEFINED && !cs)
        ty_jx_fail(x, "strip arg must be None or str, not %s", ty_jv_type_name(chars));
    size_t a = 0, b = s.s->len;
    while (left && a < b) {
        size_t i = a;
        if (!stripped(cs, next_cp(s.s, &i))) break;
        a = i;
    }
    while (right && b > a) {
        size_t start = b - 1;
        while (start > a && ((unsigned char)s.s->p[start] & 0xC0) == 0x80) start--;
        size_t i = start;
        if (!stripped(cs, next_cp(s.s, &i))) break;
        b = start;
    }
    return ty_jv_str(x, s.s->p + a, b - a);
}

/* The characters whose full case mapping (SpecialCasing.txt) is several: ß and the Latin
 * ligatures upper to two or three letters (title case: the first upper, the rest lower),
 * İ lowers to i and a combining dot. */
bool ty_jx_special_case(ty_buf *b, uint32_t c, bool upper, bool title) {
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

jv ty_jx_map_case(jx *x, jv s, int mode) { /* 0 lower, 1 upper, 2 capitalize, 3 title (Python's str.title) */
    ty_buf *b = ty_jx_buf(x);
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i);
        const bool upper = mode == 1 || (mode == 2 && first) || (mode == 3 && !prev_cased);
        if (!ty_jx_special_case(b, c, upper, mode >= 2)) put_cp(b, upper ? ty_ju_upper(c) : ty_ju_lower(c));
        prev_cased = cased_letter(c);
        first = false;
        ty_jx_step(x);
    }
    return ty_jx_buf_str(x, b);
}

/* Python's str.splitlines boundaries */
static bool line_break(uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
}

jv ty_jx_splitlines(jx *x, jv s, bool keepends) {
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

jv ty_jx_split(jx *x, jv s, jv sep, int64_t maxsplit, bool from_right) {
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
    ty_jx_need_str(x, sep, "split");
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

jv ty_jx_replace(jx *x, jv s, jv old, jv new_, int64_t count) {
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
        return ty_jx_buf_str(x, b);
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
    return ty_jx_buf_str(x, b);
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
        jv sv = ty_jx_buf_str(x, t);
        if (markup && !(conv == 's' && v.kind == JV_STR && v.markup)) sv = ty_jx_escape(x, sv, true);
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
        if (v.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, v);
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
        jv value = JV_UNDEF_V;
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
    jv r = ty_jx_buf_str(x, b);
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
            v = JV_UNDEF_V;
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
    return ty_jx_buf_str(x, b);
}

/* ---------------------------------------------------------------- shared with the filters */

/* Markup of the escaped text; Markup itself is left as it is, but by forceescape */
jv ty_jx_escape(jx *x, jv v, bool force) {
    if (v.kind == JV_STR && v.markup && !force) return v;
    jv s = ty_jx_str_of(x, v);
    ty_buf *b = ty_jx_buf(x);
    ty_jv_escape(b, s.s->p, s.s->len);
    return ty_jv_markup(ty_jx_buf_str(x, b));
}

jv ty_jinja_items(ARGS) {
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

jv ty_jinja_list(ARGS) {
    jv items = ty_jv_iter_list(x, self);
    jv out = ty_jv_list(x, items.l->n);
    for (size_t i = 0; i < items.l->n; i++) ty_jv_list_push(x, out, items.l->v[i]);
    return out;
}

jv ty_jinja_dict(ARGS) {
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

/* str.islower() (upper false) and str.isupper(): some cased character, none of the other case */
static jv is_case(jx *x, jv self, bool upper) {
    jv s = ty_jx_str_of(x, self);
    bool cased = false;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i), same = upper ? ty_ju_upper(c) : ty_ju_lower(c),
                       other = upper ? ty_ju_lower(c) : ty_ju_upper(c);
        if (other != c && same == c) cased = true;
        else if (same != c) return JV_FALSE_V;
    }
    return ty_jv_bool(cased);
}

jv ty_jinja_islower(ARGS) { return is_case(x, self, false); }
jv ty_jinja_isupper(ARGS) { return is_case(x, self, true); }

const builtin *ty_jinja_find(const builtin *table, size_t n, const char *name) {
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

/* ---------------------------------------------------------------- methods */

static jv m_str_strip(ARGS) { return ty_jx_strip(x, self, ARG(0, "chars", JV_NONE_V), true, true); }
static jv m_str_lstrip(ARGS) { return ty_jx_strip(x, self, ARG(0, "chars", JV_NONE_V), true, false); }
static jv m_str_rstrip(ARGS) { return ty_jx_strip(x, self, ARG(0, "chars", JV_NONE_V), false, true); }
static jv m_str_lower(ARGS) {
    return ty_jx_map_case(x, self, 0);
}
static jv m_str_upper(ARGS) {
    return ty_jx_map_case(x, self, 1);
}
static jv m_str_capitalize(ARGS) {
    return ty_jx_map_case(x, self, 2);
}
static jv m_str_title(ARGS) {
    return ty_jx_map_case(x, self, 3);
}
static jv m_str_split(ARGS) {
    jv max = ARG(1, "maxsplit", ty_jv_int(-1));
    return ty_jx_split(x, self, ARG(0, "sep", JV_NONE_V), ty_jx_need_int(x, max, "split"), false);
}
static jv m_str_rsplit(ARGS) {
    jv max = ARG(1, "maxsplit", ty_jv_int(-1));
    return ty_jx_split(x, self, ARG(0, "sep", JV_NONE_V), ty_jx_need_int(x, max, "rsplit"), true);
}
static jv m_str_splitlines(ARGS) { return ty_jx_splitlines(x, self, ty_jv_truthy(x, ARG(0, "keepends", JV_FALSE_V))); }
static jv m_str_startswith(ARGS) { return affix_test(x, self, ARG(0, "prefix", JV_UNDEF_V), false); }
static jv m_str_endswith(ARGS) { return affix_test(x, self, ARG(0, "suffix", JV_UNDEF_V), true); }
static jv m_str_replace(ARGS) {
    jv old = ty_jx_need_str(x, ARG(0, "old", JV_UNDEF_V), "replace"), new_ = ty_jx_need_str(x, ARG(1, "new", JV_UNDEF_V), "replace");
    return ty_jx_replace(x, self, old, new_, ty_jx_need_int(x, ARG(2, "count", ty_jv_int(-1)), "replace"));
}
static jv find_sub(jx *x, jv self, jv sub, bool last) {
    ty_jx_need_str(x, sub, "find");
    const char *hit = NULL;
    if (!last) {
        hit = sub.s->len == 0 ? self.s->p : memmem(self.s->p, self.s->len, sub.s->p, sub.s->len);
    } else {
        for (size_t i = self.s->len + 1; i-- > 0 && !hit;)
            if (i + sub.s->len <= self.s->len && !memcmp(self.s->p + i, sub.s->p, sub.s->len)) hit = self.s->p + i;
    }
    return ty_jv_int(hit ? cp_index(self.s, (size_t)(hit - self.s->p)) : -1);
}
static jv m_str_find(ARGS) { return find_sub(x, self, ARG(0, "sub", JV_UNDEF_V), false); }
static jv m_str_rfind(ARGS) { return find_sub(x, self, ARG(0, "sub", JV_UNDEF_V), true); }
static jv m_str_index(ARGS) {
    jv r = find_sub(x, self, ARG(0, "sub", JV_UNDEF_V), false);
    if (r.i < 0) ty_jx_fail(x, "substring not found");
    return r;
}
static jv m_str_count(ARGS) {
    jv sub = ty_jx_need_str(x, ARG(0, "sub", JV_UNDEF_V), "count");
    if (sub.s->len == 0) return ty_jv_int((int64_t)self.s->n_cp + 1);
    int64_t n = 0;
    for (const char *p = self.s->p, *end = p + self.s->len, *hit;
         (hit = memmem(p, (size_t)(end - p), sub.s->p, sub.s->len)); p = hit + sub.s->len)
        n++;
    return ty_jv_int(n);
}
static jv m_str_join(ARGS) {
    jv items = ty_jv_iter_list(x, ARG(0, "iterable", JV_UNDEF_V));
    ty_buf *b = ty_jx_buf(x);
    for (size_t i = 0; i < items.l->n; i++) {
        if (items.l->v[i].kind != JV_STR) {
            ty_jx_fail(x, "sequence item %zu: expected str instance, %s found", i, ty_jv_type_name(items.l->v[i]));
        }
        if (i) ty_buf_append(b, self.s->p, self.s->len);
        ty_buf_append(b, items.l->v[i].s->p, items.l->v[i].s->len);
        ty_jx_step(x);
    }
    return ty_jx_buf_str(x, b);
}
static jv m_str_format(ARGS) { return str_format(x, self, args, n_args, kw_names, kw, n_kw); }
static jv m_str_removeprefix(ARGS) {
    jv p = ty_jx_need_str(x, ARG(0, "prefix", JV_UNDEF_V), "removeprefix");
    if (affix_test(x, self, p, false).b) return ty_jv_str(x, self.s->p + p.s->len, self.s->len - p.s->len);
    return self;
}
static jv m_str_removesuffix(ARGS) {
    jv p = ty_jx_need_str(x, ARG(0, "suffix", JV_UNDEF_V), "removesuffix");
    if (p.s->len && affix_test(x, self, p, true).b) return ty_jv_str(x, self.s->p, self.s->len - p.s->len);
    return self;
}
static jv str_class(jx *x, jv self, uint16_t flags, bool digits_only, bool space) {
    if (self.s->len == 0) return JV_FALSE_V;
    for (size_t i = 0; i < self.s->len;) {
        const uint32_t c = next_cp(self.s, &i);
        if (space ? !ty_ju_space(c) : digits_only ? !(c >= '0' && c <= '9') && !(ty_unicode_flags(c) & TY_UCD_NUMBER)
                                               : !(ty_unicode_flags(c) & flags))
            return JV_FALSE_V;
    }
    return JV_TRUE_V;
}
static jv m_str_isalpha(ARGS) {
    return str_class(x, self, TY_UCD_LETTER, false, false);
}
static jv m_str_isalnum(ARGS) {
    return str_class(x, self, TY_UCD_LETTER | TY_UCD_NUMBER, false, false);
}
static jv m_str_isdigit(ARGS) {
    return str_class(x, self, 0, true, false);
}
static jv m_str_isspace(ARGS) {
    return str_class(x, self, 0, false, true);
}
static jv m_str_islower(ARGS) { return ty_jinja_islower(x, self, args, n_args, kw_names, kw, n_kw); }
static jv m_str_isupper(ARGS) { return ty_jinja_isupper(x, self, args, n_args, kw_names, kw, n_kw); }
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
    return ty_jx_buf_str(x, b);
}
static jv m_str_zfill(ARGS) {
    const int64_t width = ty_jx_need_int(x, ARG(0, "width", JV_UNDEF_V), "zfill");
    const bool sign = self.s->len && (self.s->p[0] == '+' || self.s->p[0] == '-');
    jv padded = pad(x, sign ? ty_jv_str(x, self.s->p + 1, self.s->len - 1) : self, width - sign, ty_jv_cstr(x, "0"), 1);
    if (!sign) return padded;
    ty_buf *b = ty_jx_buf(x);
    ty_buf_append(b, self.s->p, 1);
    ty_buf_append(b, padded.s->p, padded.s->len);
    return ty_jx_buf_str(x, b);
}

static jv m_str_ljust(ARGS) {
    return pad(x, self, ty_jx_need_int(x, ARG(0, "width", JV_UNDEF_V), "ljust"), ARG(1, "fillchar", ty_jv_cstr(x, " ")), -1);
}
static jv m_str_rjust(ARGS) {
    return pad(x, self, ty_jx_need_int(x, ARG(0, "width", JV_UNDEF_V), "rjust"), ARG(1, "fillchar", ty_jv_cstr(x, " ")), 1);
}
static jv m_str_center(ARGS) {
    return pad(x, self, ty_jx_need_int(x, ARG(0, "width", JV_UNDEF_V), "center"), ARG(1, "fillchar", ty_jv_cstr(x, " ")), 0);
}

static jv m_dict_get(ARGS) {
    jv key = ARG(0, "key", JV_UNDEF_V);
    const jv *v = ty_jv_dict_get(self, key);
    return v ? *v : ARG(1, "default", JV_NONE_V);
}
static jv m_dict_items(ARGS) {
    jv v = ty_jinja_items(x, self, args, n_args, kw_names, kw, n_kw);
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
    if (self.kind == JV_LIST) return ty_jinja_list(x, self, args, n_args, kw_names, kw, n_kw);
    return ty_jinja_dict(x, JV_UNDEF_V, &self, 1, NULL, NULL, 0);
}
static jv m_list_count(ARGS) {
    jv v = ARG(0, "value", JV_UNDEF_V);
    int64_t n = 0;
    for (size_t i = 0; i < self.l->n; i++) n += ty_jv_equal(self.l->v[i], v);
    return ty_jv_int(n);
}
static jv m_list_index(ARGS) {
    jv v = ARG(0, "value", JV_UNDEF_V);
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
    return JV_UNDEF_V;
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

