/* jinja_eval.c — a template's tree run over its variables: expressions as Python
 * evaluates them (jinja2's rules for undefined values, attributes and items on top),
 * statements as jinja2 runs them (a for loop's body a new scope each iteration, macros
 * closing over the scope they were defined in), within the render's limits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

/* ---------------------------------------------------------------- output and depth */

static void free_bufs(jx *x) {
    for (jbuf *j = x->bufs; j; j = j->next) ty_jx_buf_done(&j->b);
    x->bufs = NULL;
}

static void emit(jx *x, const char *s, size_t n) {
    if (!n) return;
    if (n > x->lim.max_output || x->out_total > x->lim.max_output - n)
        ty_jx_fail(x, "the template wrote more than %zu bytes", x->lim.max_output);
    x->out_total += n;
    ty_buf_append(x->out, s, n);
    if (x->out->oom) ty_jx_fail(x, "no memory");
}

static void enter(jx *x) {
    if (++x->depth > x->lim.max_depth) ty_jx_fail(x, "the template nested more than %d levels deep", x->lim.max_depth);
}

/* ---------------------------------------------------------------- scopes */

static scope *push_scope(jx *x, scope *parent) {
    scope *s = ty_arena_alloc(&x->mem, sizeof *s);
    s->parent = parent;
    s->vars = NULL;
    return s;
}

/* name must live as long as the render (the template's names, the render's strings) */
static void scope_set(jx *x, scope *s, const char *name, jv v) {
    for (var *e = s->vars; e; e = e->next)
        if (!strcmp(e->name, name)) {
            e->value = v;
            return;
        }
    var *e = ty_arena_alloc(&x->mem, sizeof *e);
    *e = (var){name, v, s->vars};
    s->vars = e;
}

static const jv *scope_get(const scope *s, const char *name) {
    for (; s; s = s->parent)
        for (const var *e = s->vars; e; e = e->next)
            if (!strcmp(e->name, name)) return &e->value;
    return NULL;
}

/* ---------------------------------------------------------------- evaluation */

typedef enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE } flow;

static jv eval(jx *x, scope *s, const node *n);
static flow exec(jx *x, scope *s, const node *n);

/* Python's slice indices of a sequence of n items (PySlice_AdjustIndices) */
static void slice_indices(jx *x, jv start_v, jv stop_v, jv step_v, int64_t n, int64_t *start, int64_t *stop,
                          int64_t *step) {
    *step = step_v.kind == JV_NONE ? 1 : step_v.i;
    if (*step == 0) ty_jx_fail(x, "slice step cannot be zero");
    const bool neg = *step < 0;
    if (start_v.kind == JV_NONE) {
        *start = neg ? n - 1 : 0;
    } else {
        *start = start_v.i;
        if (*start < 0) *start = *start + n < 0 ? (neg ? -1 : 0) : *start + n;
        else if (*start >= n) *start = neg ? n - 1 : n;
    }
    if (stop_v.kind == JV_NONE) {
        *stop = neg ? -1 : n;
    } else {
        *stop = stop_v.i;
        if (*stop < 0) *stop = *stop + n < 0 ? (neg ? -1 : 0) : *stop + n;
        else if (*stop >= n) *stop = neg ? n - 1 : n;
    }
}

static jv slice_value(jx *x, jv obj, jv a, jv b, jv c) {
    if (obj.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, obj);
    for (int k = 0; k < 3; k++) {
        jv *p = k == 0 ? &a : k == 1 ? &b : &c;
        if (p->kind == JV_BOOL) *p = ty_jv_int(p->b);
        if (p->kind != JV_NONE && p->kind != JV_INT)
            ty_jx_fail(x, "slice indices must be integers or None, not %s", ty_jv_type_name(*p));
    }
    int64_t start, stop, step;
    if (obj.kind == JV_STR) {
        slice_indices(x, a, b, c, (int64_t)obj.s->n_cp, &start, &stop, &step);
        if (step > 0 && stop < start) stop = start;
        jv r = ty_jv_str_slice(x, obj, start, stop, step);
        r.markup = obj.markup;
        return r;
    }
    /* jinja2 answers a subscript Python refuses with an undefined value */
    if (obj.kind != JV_LIST || obj.seq > SEQ_RANGE)
        return ty_jv_undefined(ty_jx_sprintf(x, "'%s' object is not subscriptable", ty_jv_type_name(obj)));
    slice_indices(x, a, b, c, (int64_t)obj.l->n, &start, &stop, &step);
    jv out = ty_jv_list(x, 0);
    out.seq = obj.seq;
    if (obj.seq == SEQ_RANGE) { /* a range's slice is a range */
        const int64_t *r = obj.l->range;
        int64_t count = 0;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) count++;
        out.l->range[0] = r[0] + start * r[2];
        out.l->range[2] = r[2] * step;
        out.l->range[1] = out.l->range[0] + count * out.l->range[2];
    }
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        ty_jx_step(x);
        ty_jv_list_push(x, out, obj.l->v[i]);
    }
    return out;
}

static bool contains(jx *x, jv hay, jv needle) {
    switch (hay.kind) {
    case JV_UNDEFINED: return false;
    case JV_STR:
        if (needle.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, needle);
        if (needle.kind != JV_STR)
            ty_jx_fail(x, "'in <string>' requires string as left operand, not %s", ty_jv_type_name(needle));
        return needle.s->len == 0 || memmem(hay.s->p, hay.s->len, needle.s->p, needle.s->len) != NULL;
    case JV_LIST:
        hay = ty_jv_iter_list(x, hay); /* a generator is used up */
        for (size_t i = 0; i < hay.l->n; i++) {
            ty_jx_step(x);
            if (ty_jv_equal(hay.l->v[i], needle)) return true;
        }
        return false;
    case JV_DICT:
    case JV_NAMESPACE:
        ty_jv_need_hashable(x, needle);
        return ty_jv_dict_get(hay, needle) != NULL;
    default: ty_jx_fail(x, "argument of type '%s' is not iterable", ty_jv_type_name(hay));
    }
}

static bool compare(jx *x, int op, jv a, jv b) {
    switch (op) {
    case CMP_EQ: return ty_jv_equal(a, b);
    case CMP_NE: return !ty_jv_equal(a, b);
    case CMP_IN: return contains(x, b, a);
    case CMP_NOT_IN: return !contains(x, b, a);
    default: break;
    }
    if (a.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, a);
    if (b.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, b);
    const int c = ty_jv_compare(x, a, b);
    return op == CMP_LT ? c < 0 : op == CMP_LE ? c <= 0 : op == CMP_GT ? c > 0 : c >= 0;
}

/* ---------------------------------------------------------------- calls */

typedef struct {
    jv *pos;
    int n_pos;
    const char **kw_names;
    jv *kw;
    int n_kw;
} call_args;

static void eval_args(jx *x, scope *s, const node_args *na, call_args *ca, int extra_kw) {
    int n_pos = na->n_pos, n_kw = na->n_kw;
    jv star = {0}, starstar = {0};
    if (na->star) {
        star = eval(x, s, na->star);
        star = ty_jv_iter_list(x, star);
        n_pos += (int)star.l->n;
    }
    if (na->starstar) {
        starstar = eval(x, s, na->starstar);
        if (starstar.kind != JV_DICT) ty_jx_fail(x, "argument after ** must be a mapping, not %s", ty_jv_type_name(starstar));
        n_kw += (int)starstar.d->n;
    }
    ca->pos = ty_arena_alloc(&x->mem, (size_t)(n_pos + 1) * sizeof *ca->pos);
    ca->kw = ty_arena_alloc(&x->mem, (size_t)(n_kw + extra_kw + 1) * sizeof *ca->kw);
    ca->kw_names = ty_arena_alloc(&x->mem, (size_t)(n_kw + extra_kw + 1) * sizeof *ca->kw_names);
    ca->n_pos = 0;
    for (int i = 0; i < na->n_pos; i++) ca->pos[ca->n_pos++] = eval(x, s, na->pos[i]);
    for (size_t i = 0; na->star && i < star.l->n; i++) ca->pos[ca->n_pos++] = star.l->v[i];
    ca->n_kw = 0;
    for (int i = 0; i < na->n_kw; i++) {
        ca->kw_names[ca->n_kw] = na->kw_names[i];
        ca->kw[ca->n_kw++] = eval(x, s, na->kw[i]);
    }
    for (size_t i = 0; na->starstar && i < starstar.d->n; i++) {
        if (starstar.d->k[i].kind != JV_STR) ty_jx_fail(x, "keywords must be strings");
        ca->kw_names[ca->n_kw] = starstar.d->k[i].s->p;
        ca->kw[ca->n_kw++] = starstar.d->v[i];
    }
}

static jv capture(jx *x, scope *s, const node *body, const char *what) {
    ty_buf *buf = ty_jx_buf(x), *saved = x->out;
    x->out = buf;
    const flow f = exec(x, s, body);
    x->out = saved;
    if (buf->oom) ty_jx_fail(x, "no memory");
    jv v = ty_jv_str(x, buf->v ? buf->v : "", buf->n);
    ty_jx_buf_done(buf);
    if (f != FLOW_NEXT) ty_jx_fail(x, "'%s' outside of a loop (in %s)", f == FLOW_BREAK ? "break" : "continue", what);
    return v;
}

static jv call_macro(jx *x, jv m, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw) {
    const node *def = m.o->macro;
    const bool is_caller = def->kind == N_CALL_BLOCK;
    const char *name = is_caller ? "caller" : def->name;
    enter(x);
    scope *s = push_scope(x, m.o->closure);
    const int n_params = def->args.n_kw;
    bool *bound = ty_arena_alloc(&x->mem, (size_t)(n_params + 1) * sizeof *bound);
    memset(bound, 0, (size_t)(n_params + 1) * sizeof *bound);
    jv varargs = ty_jv_list(x, 0);
    varargs.seq = SEQ_TUPLE;
    for (int i = 0; i < n_args; i++) {
        if (i < n_params) {
            scope_set(x, s, def->args.kw_names[i], args[i]);
            bound[i] = true;
        } else {
            ty_jv_list_push(x, varargs, args[i]);
        }
    }
    jv kwargs = ty_jv_dict(x, 0);
    jv caller = m.o->caller;
    for (int i = 0; i < n_kw; i++) {
        int p = -1;
        for (int k = 0; k < n_params; k++)
            if (!strcmp(def->args.kw_names[k], kw_names[i])) p = k;
        if (p >= 0) {
            if (bound[p]) ty_jx_fail(x, "macro '%s' got multiple values for argument '%s'", name, kw_names[i]);
            scope_set(x, s, kw_names[i], kw[i]);
            bound[p] = true;
        } else if (!strcmp(kw_names[i], "caller") && ty_jinja_node_reads(def->c, "caller")) {
            caller = kw[i];
        } else if (!strcmp(kw_names[i], "caller") && !ty_jinja_node_reads(def->c, "kwargs")) {
            ty_jx_fail(x, "macro '%s' was invoked with two values for the special caller argument. This is most likely a "
                       "bug.", name);
        } else {
            ty_jv_dict_set(x, kwargs, ty_jv_cstr(x, kw_names[i]), kw[i]);
        }
    }
    if (varargs.l->n && !ty_jinja_node_reads(def->c, "varargs"))
        ty_jx_fail(x, "macro '%s' takes not more than %d argument(s)", name, n_params);
    if (kwargs.d->n && !ty_jinja_node_reads(def->c, "kwargs"))
        ty_jx_fail(x, "macro '%s' takes no keyword argument '%s'", name, kwargs.d->k[0].s->p);
    for (int k = 0; k < n_params; k++) {
        if (bound[k]) continue;
        const node *saved = x->at;
        jv d = def->args.kw[k] ? eval(x, s, def->args.kw[k])
                               : ty_jv_undefined(ty_jx_sprintf(x, "parameter '%s' was not provided", def->args.kw_names[k]));
        x->at = saved;
        scope_set(x, s, def->args.kw_names[k], d);
    }
    scope_set(x, s, "varargs", varargs);
    scope_set(x, s, "kwargs", kwargs);
    if (ty_jinja_node_reads(def->c, "caller"))
        scope_set(x, s, "caller", caller.kind != JV_UNDEFINED ? caller : ty_jv_undefined("No caller defined"));
    jv out = capture(x, s, def->c, name);
    x->depth--;
    return out;
}

jv ty_jx_call(jx *x, jv fn, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw) {
    ty_jx_step(x);
    switch (fn.kind) {
    case JV_FUNC: return ty_jinja_call_builtin(x, fn, args, n_args, kw_names, kw, n_kw);
    case JV_MACRO: return call_macro(x, fn, args, n_args, kw_names, kw, n_kw);
    case JV_LOOP:
        if (n_args != 1 || n_kw) ty_jx_fail(x, "loop() takes one argument, the items of the next level");
        return ty_jx_loop_call(x, fn, args[0]);
    case JV_JOINER: {
        const bool first = fn.o->pos == 0;
        fn.o->pos = 1;
        return first ? ty_jv_str(x, "", 0) : fn.o->sep;
    }
    case JV_UNDEFINED: ty_jx_fail_undefined(x, fn);
    default: ty_jx_fail(x, "'%s' object is not callable", ty_jv_type_name(fn));
    }
}

/* the filter chain f on a block's text (innermost operand NULL) or on its operand */
static jv eval_filter(jx *x, scope *s, const node *f, const jv *block) {
    jv v = f->a ? (f->a->kind == N_FILTER ? eval_filter(x, s, f->a, block) : eval(x, s, f->a)) : *block;
    call_args ca;
    eval_args(x, s, &f->args, &ca, 0);
    x->at = f;
    return ty_jx_apply_filter(x, f->name, v, ca.pos, ca.n_pos, ca.kw_names, ca.kw, ca.n_kw);
}

static jv lookup(jx *x, scope *s, const char *name) {
    const jv *v = scope_get(s, name);
    if (v) return *v;
    const builtin *g = ty_jinja_global(name);
    if (g) {
        jobj *o = ty_arena_alloc(&x->mem, sizeof *o);
        memset(o, 0, sizeof *o);
        o->fn = g;
        return (jv){.kind = JV_FUNC, .o = o};
    }
    return ty_jv_undefined(ty_jx_sprintf(x, "'%s' is undefined", name));
}

static jv eval(jx *x, scope *s, const node *n) {
    ty_jx_step(x);
    x->at = n;
    switch ((node_kind)n->kind) {
    case N_CONST: return n->value;
    case N_NAME: return lookup(x, s, n->name);
    case N_LIST:
    case N_TUPLE: {
        jv l = ty_jv_list(x, (size_t)n->args.n_pos);
        l.seq = n->kind == N_TUPLE ? SEQ_TUPLE : SEQ_LIST;
        for (int i = 0; i < n->args.n_pos; i++) ty_jv_list_push(x, l, eval(x, s, n->args.pos[i]));
        return l;
    }
    case N_DICT: {
        jv d = ty_jv_dict(x, (size_t)n->args.n_pos / 2);
        for (int i = 0; i + 1 < n->args.n_pos; i += 2) {
            jv k = eval(x, s, n->args.pos[i]);
            ty_jv_need_hashable(x, k);
            ty_jv_dict_set(x, d, k, eval(x, s, n->args.pos[i + 1]));
        }
        return d;
    }
    case N_GETATTR: {
        jv obj = eval(x, s, n->a);
        x->at = n;
        return ty_jx_getattr(x, obj, n->name);
    }
    case N_GETITEM: {
        jv obj = eval(x, s, n->a);
        if (n->b->kind == N_SLICE) {
            const node *sl = n->b;
            jv a = sl->a ? eval(x, s, sl->a) : JV_NONE_V, b = sl->b ? eval(x, s, sl->b) : JV_NONE_V,
               c = sl->c ? eval(x, s, sl->c) : JV_NONE_V;
            x->at = n;
            return slice_value(x, obj, a, b, c);
        }
        jv key = eval(x, s, n->b);
        x->at = n;
        return ty_jx_getitem(x, obj, key);
    }
    case N_SLICE: ty_jx_fail(x, "a slice outside of a subscript");
    case N_CALL: {
        jv fn = eval(x, s, n->a);
        call_args ca;
        eval_args(x, s, &n->args, &ca, 0);
        x->at = n;
        return ty_jx_call(x, fn, ca.pos, ca.n_pos, ca.kw_names, ca.kw, ca.n_kw);
    }
    case N_FILTER: return eval_filter(x, s, n, NULL);
    case N_TEST: {
        jv v = eval(x, s, n->a);
        call_args ca;
        eval_args(x, s, &n->args, &ca, 0);
        x->at = n;
        const builtin *t = ty_jinja_test(n->name);
        if (!t) ty_jx_fail(x, "no test named '%s'", n->name); /* where jinja2 fails only when it runs */
        jv r = t->fn(x, v, ca.pos, ca.n_pos, ca.kw_names, ca.kw, ca.n_kw);
        return ty_jv_bool(n->flag ? !r.b : r.b);
    }
    case N_UNARY: {
        jv v = eval(x, s, n->a);
        x->at = n;
        if (v.kind == JV_UNDEFINED) ty_jx_fail_undefined(x, v);
        if (!ty_jv_is_number(v)) ty_jx_fail(x, "bad operand type for unary %c: '%s'", n->op, ty_jv_type_name(v));
        if (n->op == '+') return v.kind == JV_BOOL ? ty_jv_int(v.b) : v;
        if (v.kind == JV_FLOAT) return ty_jv_float(-v.f);
        if (as_int(v) == INT64_MIN) ty_jx_fail(x, "integer overflow");
        return ty_jv_int(-as_int(v));
    }
    case N_BINARY: {
        jv a = eval(x, s, n->a), b = eval(x, s, n->b);
        x->at = n;
        if (n->op != '~' && (a.kind == JV_UNDEFINED || b.kind == JV_UNDEFINED) &&
            !(n->op == '%' && a.kind == JV_STR))
            ty_jx_fail_undefined(x, a.kind == JV_UNDEFINED ? a : b);
        return ty_jx_binary(x, n->op, a, b);
    }
    case N_COMPARE: {
        jv left = eval(x, s, n->a);
        for (int i = 0; i < n->args.n_pos; i++) {
            jv right = eval(x, s, n->args.pos[i]);
            x->at = n;
            if (!compare(x, n->ops[i], left, right)) return JV_FALSE_V;
            left = right;
        }
        return JV_TRUE_V;
    }
    case N_AND: {
        jv a = eval(x, s, n->a);
        return ty_jv_truthy(x, a) ? eval(x, s, n->b) : a;
    }
    case N_OR: {
        jv a = eval(x, s, n->a);
        return ty_jv_truthy(x, a) ? a : eval(x, s, n->b);
    }
    case N_NOT: return ty_jv_bool(!ty_jv_truthy(x, eval(x, s, n->a)));
    case N_COND:
        if (ty_jv_truthy(x, eval(x, s, n->a))) return eval(x, s, n->b);
        return n->c ? eval(x, s, n->c)
                    : ty_jv_undefined(ty_jx_sprintf(x, "the inline if-expression on line %d evaluated to false and no "
                                                    "else section was defined.", n->line));
    default: ty_jx_fail(x, "a statement where an expression was expected");
    }
}

/* ---------------------------------------------------------------- statements */

static void assign(jx *x, scope *s, const node *target, jv v) {
    x->at = target;
    if (target->kind == N_NAME) {
        scope_set(x, s, target->name, v);
        return;
    }
    if (target->kind == N_GETATTR) {
        jv ns = eval(x, s, target->a);
        x->at = target;
        if (ns.kind != JV_NAMESPACE) ty_jx_fail(x, "cannot assign attribute on non-namespace object");
        ty_jv_dict_set(x, ns, ty_jv_cstr(x, target->name), v);
        return;
    }
    /* a tuple of names: unpacking */
    jv items = ty_jv_iter_list(x, v);
    const int n = target->args.n_pos;
    if ((int64_t)items.l->n != n)
        ty_jx_fail(x, (int64_t)items.l->n > n ? "too many values to unpack (expected %d)"
                                           : "not enough values to unpack (expected %d, got %zu)", n, items.l->n);
    for (int i = 0; i < n; i++) assign(x, s, target->args.pos[i], items.l->v[i]);
}

static jv new_obj(jx *x, jv_kind kind) {
    jobj *o = ty_arena_alloc(&x->mem, sizeof *o);
    memset(o, 0, sizeof *o);
    return (jv){.kind = kind, .o = o};
}

/* a for loop over items, at depth0 (0; recursive calls one more) */
static void run_for(jx *x, scope *s, const node *n, jv iterable, int64_t depth0) {
    jv items = ty_jv_iter_list(x, iterable);
    if (n->e) { /* the loop's filter: the items it keeps, with the target bound */
        jv kept = ty_jv_list(x, items.l->n);
        for (size_t i = 0; i < items.l->n; i++) {
            ty_jx_step(x);
            scope *f = push_scope(x, s);
            assign(x, f, n->a, items.l->v[i]);
            if (ty_jv_truthy(x, eval(x, f, n->e))) ty_jv_list_push(x, kept, items.l->v[i]);
        }
        items = kept;
    }
    enter(x);
    jv loop = new_obj(x, JV_LOOP);
    loop.o->items = items.l;
    loop.o->depth0 = depth0;
    loop.o->loop_node = n;
    loop.o->closure = s; /* a recursive loop's loop() runs in the scope the loop began in */
    /* jinja2 marks an iteration done at the end of the body: one that ended in break or
     * continue leaves the loop's else to run */
    bool completed = false;
    for (size_t i = 0; i < items.l->n; i++) {
        ty_jx_step(x);
        loop.o->index0 = (int64_t)i;
        scope *it = push_scope(x, s);
        assign(x, it, n->a, items.l->v[i]);
        scope_set(x, it, "loop", loop);
        const flow f = exec(x, it, n->c);
        if (f == FLOW_BREAK) break;
        if (f == FLOW_NEXT) completed = true;
    }
    if (!completed && n->d) {
        const flow f = exec(x, push_scope(x, s), n->d);
        if (f != FLOW_NEXT) ty_jx_fail(x, "'%s' outside of a loop", f == FLOW_BREAK ? "break" : "continue");
    }
    x->depth--;
}

jv ty_jx_loop_call(jx *x, jv loop, jv items) {
    const node *n = loop.o->loop_node;
    if (!n->flag) ty_jx_fail(x, "the loop is not recursive: loop() needs 'for ... recursive'");
    ty_buf *buf = ty_jx_buf(x), *saved = x->out;
    x->out = buf;
    run_for(x, loop.o->closure, n, items, loop.o->depth0 + 1);
    x->out = saved;
    if (buf->oom) ty_jx_fail(x, "no memory");
    jv v = ty_jv_str(x, buf->v ? buf->v : "", buf->n);
    ty_jx_buf_done(buf);
    return v;
}

static flow exec(jx *x, scope *s, const node *n) {
    if (!n) return FLOW_NEXT;
    ty_jx_step(x);
    x->at = n;
    switch ((node_kind)n->kind) {
    case N_BODY:
        for (int i = 0; i < n->args.n_pos; i++) {
            const flow f = exec(x, s, n->args.pos[i]);
            if (f != FLOW_NEXT) return f;
        }
        return FLOW_NEXT;
    case N_DATA: emit(x, n->value.s->p, n->value.s->len); return FLOW_NEXT;
    case N_PRINT: {
        jv v = eval(x, s, n->a);
        if (v.kind == JV_STR) {
            emit(x, v.s->p, v.s->len);
        } else if (v.kind != JV_UNDEFINED) {
            jv t = ty_jv_to_str(x, v);
            emit(x, t.s->p, t.s->len);
        }
        return FLOW_NEXT;
    }
    case N_IF:
        if (ty_jv_truthy(x, eval(x, s, n->a))) return exec(x, s, n->b);
        return exec(x, s, n->c);
    case N_FOR: run_for(x, s, n, eval(x, s, n->b), 0); return FLOW_NEXT;
    case N_SET: assign(x, s, n->a, eval(x, s, n->b)); return FLOW_NEXT;
    case N_SET_BLOCK: {
        jv v = capture(x, s, n->c, "a set block");
        if (n->b) {
            x->at = n;
            v = eval_filter(x, s, n->b, &v);
        }
        assign(x, s, n->a, v);
        return FLOW_NEXT;
    }
    case N_MACRO: {
        jv m = new_obj(x, JV_MACRO);
        m.o->macro = n;
        m.o->caller = ty_jv_undefined("No caller defined");
        m.o->closure = s;
        scope_set(x, s, n->name, m);
        return FLOW_NEXT;
    }
    case N_CALL_BLOCK: {
        jv caller = new_obj(x, JV_MACRO);
        caller.o->macro = n;
        caller.o->caller = ty_jv_undefined("No caller defined");
        caller.o->closure = s;
        const node *call = n->a;
        jv fn = eval(x, s, call->a);
        call_args ca;
        eval_args(x, s, &call->args, &ca, 1);
        ca.kw_names[ca.n_kw] = "caller";
        ca.kw[ca.n_kw++] = caller;
        x->at = n;
        jv out = ty_jx_call(x, fn, ca.pos, ca.n_pos, ca.kw_names, ca.kw, ca.n_kw);
        jv t = ty_jv_to_str(x, out);
        emit(x, t.s->p, t.s->len);
        return FLOW_NEXT;
    }
    case N_FILTER_BLOCK: {
        jv v = capture(x, s, n->c, "a filter block");
        x->at = n;
        jv t = ty_jv_to_str(x, eval_filter(x, s, n->b, &v));
        emit(x, t.s->p, t.s->len);
        return FLOW_NEXT;
    }
    case N_WITH: {
        scope *w = push_scope(x, s);
        for (int i = 0; i < n->args.n_pos; i++) assign(x, w, n->args.pos[i], eval(x, s, n->args.kw[i]));
        return exec(x, w, n->c);
    }
    case N_BREAK: return FLOW_BREAK;
    case N_CONTINUE: return FLOW_CONTINUE;
    default: ty_jx_fail(x, "an expression where a statement was expected");
    }
}

/* ---------------------------------------------------------------- rendering */

jinja_limits ty_jinja_default_limits(void) {
    return (jinja_limits){.max_steps = 20000000, .max_memory = (size_t)256 << 20, .max_output = (size_t)16 << 20,
                          .max_depth = 200, .max_seconds = 10};
}

char *ty_jinja_render(const jinja_template *t, const json_t *vars, const jinja_limits *limits, size_t *out_len,
                   bool *raised, char *err, size_t err_size) {
    jx *volatile x = calloc(1, sizeof *x);
    ty_buf out = {0};
    if (raised) *raised = false;
    if (!x) {
        snprintf(err, err_size, "no memory");
        return NULL;
    }
    ty_jx_limit(x, limits ? *limits : ty_jinja_default_limits());
    x->err = err;
    x->err_size = err_size;
    x->out = &out;
    if (setjmp(x->fail)) {
        if (raised) *raised = x->raised;
        free_bufs(x);
        ty_arena_free(&x->mem);
        free(x);
        free(out.v);
        return NULL;
    }
    x->root = push_scope(x, NULL);
    if (vars && json_is_object(vars)) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)vars, key, v) scope_set(x, x->root, ty_jv_cstr(x, key).s->p, ty_jv_of_json(x, v));
    }
    x->at = NULL;
    const flow f = exec(x, push_scope(x, x->root), t->root);
    if (f != FLOW_NEXT) ty_jx_fail(x, "'%s' outside of a loop", f == FLOW_BREAK ? "break" : "continue");
    free_bufs(x);
    ty_arena_free(&x->mem);
    free(x);
    if (out.oom) {
        free(out.v);
        snprintf(err, err_size, "no memory");
        return NULL;
    }
    if (!out.v) out.v = calloc(1, 1);
    if (out_len) *out_len = out.n;
    return out.v;
}
