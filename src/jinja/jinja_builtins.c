/* jinja_builtins.c — what a template can call: jinja2's filters, tests and globals,
 * transformers' tojson, raise_exception and strftime_now, and their application to a value
 * (the methods of str, dict and list are jinja_ops.c's). Each follows its Python
 * definition; where jinja2 returns a generator (map, select, ...) a list is returned,
 * which prints differently but iterates, joins and counts the same. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"
#include "unicode.h"

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
    if (!case_sensitive && v.kind == JV_STR) v = ty_jx_map_case(x, v, 0);
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
    if (self.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, self);
    ty_jx_fail(x, "bad operand type for abs(): '%s'", ty_jv_type_name(self));
}

/* attributes only: a dict's keys are items, not attributes, to attr() */
static jv f_attr(ARGS) {
    jv name = ty_jx_need_str(x, ARG(0, "name", JV_UNDEF_V), "attr");
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
    const int64_t size = ty_jx_need_int(x, ARG(0, "linecount", JV_UNDEF_V), "batch");
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
    return ty_jx_map_case(x, ty_jx_str_of(x, self), 2);
}

static jv f_center(ARGS) {
    const int64_t width = ty_jx_need_int(x, ARG(0, "width", ty_jv_int(80)), "center");
    jv s = ty_jx_str_of(x, self);
    const int64_t len = (int64_t)s.s->n_cp;
    if (width <= len) return s;
    if (width > (int64_t)x->lim.max_output) ty_jx_fail(x, "center: width too large");
    /* Python: left = pad // 2 + (pad & width & 1) */
    const int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    ty_buf *b = ty_jx_buf(x);
    for (int64_t i = 0; i < left; i++) ty_buf_append(b, " ", 1);
    ty_buf_append(b, s.s->p, s.s->len);
    for (int64_t i = 0; i < pad - left; i++) ty_buf_append(b, " ", 1);
    return ty_jx_buf_str(x, b);
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

static jv f_escape(ARGS) { return ty_jx_escape(x, self, false); }
static jv f_forceescape(ARGS) { return ty_jx_escape(x, self, true); }

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
    if (self.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, self); /* float(Undefined) raises */
    if (ty_jv_is_number(self)) return ty_jv_float(ty_jv_number(self));
    double f;
    if (self.kind == JV_STR && parse_float(self, &f)) return ty_jv_float(f);
    return dflt;
}

static jv f_format(ARGS) {
    jv fmt = ty_jx_str_of(x, self);
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
    jv attribute = ARG(0, "attribute", JV_UNDEF_V);
    jv dflt = ARG(1, "default", JV_NONE_V);
    const bool case_sensitive = ty_jv_truthy(x, ARG(2, "case_sensitive", JV_FALSE_V));
    jv items = sorted(x, self, attribute, case_sensitive, false, false);
    jv out = ty_jv_list(x, 0);
    for (size_t i = 0; i < items.l->n; i++) {
        jv k = sort_key(x, items.l->v[i], attribute, case_sensitive);
        if (k.kind == JV_UNDEFINED) k = dflt;
        jv last = out.l->n ? out.l->v[out.l->n - 1] : JV_UNDEF_V;
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
        const int64_t w = ty_jx_need_int(x, width, "indent");
        if (w > 4096) ty_jx_fail(x, "indent: width too large");
        ty_buf *sp = ty_jx_buf(x);
        for (int64_t i = 0; i < w; i++) ty_buf_append(sp, " ", 1);
        ind = ty_jx_buf_str(x, sp);
    }
    /* jinja2 adds a newline to its argument as it is: a string, or a TypeError */
    if (self.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, self);
    if (self.kind != JV_STR)
        ty_jx_fail(x, "unsupported operand type(s) for +=: '%s' and 'str'", ty_jv_type_name(self));
    jv s = self;
    ty_buf *withnl = ty_jx_buf(x);
    ty_buf_append(withnl, s.s->p, s.s->len);
    ty_buf_append(withnl, "\n", 1);
    jv lines = ty_jx_splitlines(x, ty_jx_buf_str(x, withnl), false);
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
    return ty_jx_buf_str(x, b);
}

static jv f_int(ARGS) {
    jv dflt = ARG(0, "default", ty_jv_int(0));
    const int64_t base = ty_jx_need_int(x, ARG(1, "base", ty_jv_int(10)), "int");
    if (self.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, self); /* int(Undefined) raises */
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

static jv f_items_gen(ARGS) { return gen(ty_jinja_items(x, self, args, n_args, kw_names, kw, n_kw)); }

static jv f_join(ARGS) {
    jv sep = ty_jx_str_of(x, ARG(0, "d", ty_jv_str(x, "", 0)));
    jv attribute = ARG(1, "attribute", JV_UNDEF_V);
    jv items = ty_jv_iter_list(x, self);
    ty_buf *b = ty_jx_buf(x);
    for (size_t i = 0; i < items.l->n; i++) {
        if (i) ty_buf_append(b, sep.s->p, sep.s->len);
        jv v = items.l->v[i];
        if (attribute.kind != JV_UNDEFINED) v = sort_key(x, v, attribute, true);
        ty_jv_write_str(x, b, v);
        ty_jx_step(x);
    }
    return ty_jx_buf_str(x, b);
}

static jv f_lower(ARGS) {
    return ty_jx_map_case(x, ty_jx_str_of(x, self), 0);
}

static jv f_upper(ARGS) {
    return ty_jx_map_case(x, ty_jx_str_of(x, self), 1);
}

static jv f_map(ARGS) {
    if (!ty_jv_truthy(x, self)) return gen(ty_jv_list(x, 0)); /* jinja2: `if value:` first */
    jv items = ty_jv_iter_list(x, self), out = gen(ty_jv_list(x, items.l->n));
    jv attribute = ARG(-1, "attribute", JV_UNDEF_V);
    if (attribute.kind != JV_UNDEFINED) {
        jv dflt = ARG(-1, "default", JV_UNDEF_V);
        for (size_t i = 0; i < items.l->n; i++) {
            jv v = sort_key(x, items.l->v[i], attribute, true);
            ty_jv_list_push(x, out, v.kind == JV_UNDEFINED && dflt.kind != JV_UNDEFINED ? dflt : v);
        }
        return out;
    }
    if (n_args < 1) ty_jx_fail(x, "map requires a filter argument");
    jv name = ty_jx_need_str(x, args[0], "map");
    for (size_t i = 0; i < items.l->n; i++)
        ty_jv_list_push(x, out, ty_jx_apply_filter(x, name.s->p, items.l->v[i], args + 1, n_args - 1, kw_names, kw, n_kw));
    return out;
}

static jv min_max(jx *x, jv self, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw, bool max) {
    const bool case_sensitive = ty_jv_truthy(x, ARG(0, "case_sensitive", JV_FALSE_V));
    jv attribute = ARG(1, "attribute", JV_UNDEF_V);
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
    jv attribute = JV_UNDEF_V;
    if (by_attr) {
        if (n_args < 1) ty_jx_fail(x, "selectattr/rejectattr need an attribute");
        attribute = args[at++];
    }
    const char *test = NULL;
    if (at < n_args) test = ty_jx_need_str(x, args[at++], "select").s->p;
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
    jv old = ty_jx_str_of(x, ARG(0, "old", JV_UNDEF_V)), new_ = ty_jx_str_of(x, ARG(1, "new", JV_UNDEF_V));
    jv count = ARG(2, "count", JV_NONE_V);
    return ty_jx_replace(x, ty_jx_str_of(x, self), old, new_, count.kind == JV_NONE ? -1 : ty_jx_need_int(x, count, "replace"));
}

static jv f_reverse(ARGS) {
    if (self.kind == JV_STR) return ty_jv_str_slice(x, self, (int64_t)self.s->n_cp - 1, -1, -1);
    jv items = ty_jv_iter_list(x, self), out = ty_jv_list(x, items.l->n);
    for (size_t i = items.l->n; i-- > 0;) ty_jv_list_push(x, out, items.l->v[i]);
    out.seq = self.kind == JV_LIST && self.seq <= SEQ_RANGE ? SEQ_REVITER : SEQ_LIST;
    return out;
}

static jv f_round(ARGS) {
    const int64_t precision = ty_jx_need_int(x, ARG(0, "precision", ty_jv_int(0)), "round");
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

static jv f_safe(ARGS) { return ty_jv_markup(ty_jx_str_of(x, self)); }

static jv f_slice(ARGS) {
    const int64_t slices = ty_jx_need_int(x, ARG(0, "slices", JV_UNDEF_V), "slice");
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
    return sorted(x, self, ARG(2, "attribute", JV_UNDEF_V), case_sensitive, reverse, true);
}

static jv f_string(ARGS) {
    return ty_jx_str_of(x, self);
}

static jv f_striptags(ARGS) {
    jv s = ty_jx_str_of(x, self);
    ty_buf *b = ty_jx_buf(x);
    bool in_tag = false;
    for (size_t i = 0; i < s.s->len; i++) {
        const char c = s.s->p[i];
        if (c == '<') in_tag = true;
        else if (c == '>' && in_tag) in_tag = false;
        else if (!in_tag) ty_buf_append(b, &c, 1);
    }
    jv t = ty_jx_buf_str(x, b);
    /* whitespace runs become one space */
    jv words = ty_jx_split(x, t, JV_NONE_V, -1, false);
    ty_buf *o = ty_jx_buf(x);
    for (size_t i = 0; i < words.l->n; i++) {
        if (i) ty_buf_append(o, " ", 1);
        ty_buf_append(o, words.l->v[i].s->p, words.l->v[i].s->len);
    }
    return ty_jx_buf_str(x, o);
}

static jv f_sum(ARGS) {
    jv attribute = ARG(0, "attribute", JV_UNDEF_V);
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
    jv s = ty_jx_str_of(x, self);
    ty_buf *b = ty_jx_buf(x);
    bool word_start = true;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i);
        const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || ty_ju_space(c);
        /* item[0].upper() + item[1:].lower(): str.upper's full mapping (ß: SS) */
        if (sep) put_cp(b, c);
        else if (!ty_jx_special_case(b, c, word_start, false)) put_cp(b, word_start ? ty_ju_upper(c) : ty_ju_lower(c));
        word_start = sep;
    }
    return ty_jx_buf_str(x, b);
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
    if (!ensure_ascii) return ty_jx_buf_str(x, b);
    ty_buf *a = ty_jx_buf(x);
    json_ascii(a, b->v ? b->v : "", b->n);
    return ty_jx_buf_str(x, a);
}

static jv f_trim(ARGS) {
    return ty_jx_strip(x, ty_jx_str_of(x, self), ARG(0, "chars", JV_NONE_V), true, true);
}

static jv f_truncate(ARGS) {
    const int64_t length = ty_jx_need_int(x, ARG(0, "length", ty_jv_int(255)), "truncate");
    const bool killwords = ty_jv_truthy(x, ARG(1, "killwords", JV_FALSE_V));
    jv end = ty_jx_str_of(x, ARG(2, "end", ty_jv_cstr(x, "...")));
    jv leeway = ARG(3, "leeway", JV_NONE_V);
    const int64_t lee = leeway.kind == JV_NONE ? 5 : ty_jx_need_int(x, leeway, "truncate");
    /* jinja2 takes len() of what it is given, and gives back what is short enough as it is */
    if ((int64_t)ty_jv_len(x, self) <= length + lee) return self;
    jv s = ty_jx_str_of(x, self);
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
    return ty_jx_buf_str(x, b);
}

static jv f_unique(ARGS) {
    const bool case_sensitive = ty_jv_truthy(x, ARG(0, "case_sensitive", JV_FALSE_V));
    jv attribute = ARG(1, "attribute", JV_UNDEF_V);
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
    jv s = ty_jx_str_of(x, v);
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
        return ty_jx_buf_str(x, b);
    }
    jv items = self.kind == JV_DICT ? ty_jinja_items(x, self, args, 0, NULL, NULL, 0) : ty_jv_iter_list(x, self);
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
    return ty_jx_buf_str(x, b);
}

static jv f_wordcount(ARGS) {
    jv s = ty_jx_str_of(x, self);
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.s->len;) {
        const uint32_t c = next_cp(s.s, &i);
        const bool w = c == '_' || (ty_unicode_flags(c) & (TY_UCD_LETTER | TY_UCD_NUMBER));
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
    {"list", ty_jinja_list, 0},
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
    {"lower", ty_jinja_islower, 0},
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
    {"upper", ty_jinja_isupper, 0},
};

/* ---------------------------------------------------------------- globals */

static jv g_range(ARGS) {
    if (n_kw) ty_jx_fail(x, "range() takes no keyword arguments");
    if (n_args < 1 || n_args > 3) ty_jx_fail(x, "range expected 1 to 3 arguments, got %d", n_args);
    int64_t start = 0, stop, step = 1;
    if (n_args == 1) {
        stop = ty_jx_need_int(x, args[0], "range");
    } else {
        start = ty_jx_need_int(x, args[0], "range");
        stop = ty_jx_need_int(x, args[1], "range");
        if (n_args == 3) step = ty_jx_need_int(x, args[2], "range");
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

static jv g_namespace(ARGS) {
    jv d = ty_jinja_dict(x, self, args, n_args, kw_names, kw, n_kw);
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
    o->sep = ty_jx_str_of(x, ARG(0, "sep", ty_jv_cstr(x, ", ")));
    return (jv){.kind = JV_JOINER, .o = o};
}

static jv g_raise_exception(ARGS) {
    jv msg = ty_jx_str_of(x, ARG(0, "message", ty_jv_str(x, "", 0)));
    x->raised = true;
    ty_jx_fail(x, "%s", msg.s->p);
}

static jv g_strftime_now(ARGS) {
    jv fmt = ty_jx_need_str(x, ARG(0, "format", JV_UNDEF_V), "strftime_now");
    const time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char out[512];
    const size_t n = fmt.s->len ? strftime(out, sizeof out, fmt.s->p, &tm) : 0;
    return ty_jv_str(x, out, n);
}

static const builtin globals[] = {
    {"cycler", g_cycler, 0},
    {"dict", ty_jinja_dict, 0},
    {"joiner", g_joiner, 0},
    {"namespace", g_namespace, 0},
    {"raise_exception", g_raise_exception, 0},
    {"range", g_range, 0},
    {"strftime_now", g_strftime_now, 0},
};

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
            v = ty_jx_escape(x, v, false);
        } else if (v.kind == JV_LIST && !strcmp(b->name, "join")) {
            jv items = ty_jv_iter_list(x, v);
            v = ty_jv_list(x, items.l->n);
            for (size_t j = 0; j < items.l->n; j++)
                ty_jv_list_push(x, v, items.l->v[j].kind == JV_STR ? ty_jx_escape(x, items.l->v[j], false) : items.l->v[j]);
        }
        if (i < n_args) a[i] = v;
        else k[i - n_args] = v;
    }
    jv r = b->fn(x, self, a, n_args, kw_names, k, n_kw);
    if (r.kind == JV_LIST)
        for (size_t j = 0; j < r.l->n; j++) r.l->v[j] = ty_jv_markup(r.l->v[j]);
    return ty_jv_markup(r);
}

jv ty_jx_apply_filter(jx *x, const char *name, jv v, const jv *args, int n_args, const char **kw_names,
                   const jv *kw, int n_kw) {
    const builtin *f = ty_jinja_filter(name);
    if (!f) ty_jx_fail(x, "no filter named '%s'", name);
    ty_jx_step(x);
    jv r = f->fn(x, v, args, n_args, kw_names, kw, n_kw);
    if ((f->flags & KEEPS_MARKUP) && v.kind == JV_STR && v.markup) r = ty_jv_markup(r);
    return r;
}

bool ty_jx_apply_test(jx *x, const char *name, jv v, const jv *args, int n_args) {
    const builtin *t = ty_jinja_test(name);
    if (!t) ty_jx_fail(x, "no test named '%s'", name);
    ty_jx_step(x);
    return t->fn(x, v, args, n_args, NULL, NULL, 0).b;
}
