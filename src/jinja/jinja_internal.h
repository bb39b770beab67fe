/* jinja_internal.h — what the Jinja engine's files share: the syntax tree the parser
 * builds, the values the evaluator computes with, the render's state, and the calls
 * between them. The files depend one way: jinja_value.c (values, the render's failure
 * and limits) < jinja_ops.c (attributes, operators, methods) < jinja_builtins.c
 * (filters, tests, globals) < jinja_parse.c < jinja_eval.c. */
#ifndef TOY_JINJA_INTERNAL_H
#define TOY_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "jinja.h"
#include "unicode.h"

/* ---------------------------------------------------------------- memory */

/* A bump allocator: a template's tree lives in one, a render's values in another, each
 * freed whole. A render's counts its bytes against the memory limit. */
typedef struct arena_block arena_block;
typedef struct {
    arena_block *head;
    size_t used;  /* bytes handed out, all blocks */
    size_t limit; /* 0: none */
    struct jx *owner; /* the render to fail when the limit is passed (NULL: return NULL) */
} arena;

void *ty_arena_alloc(arena *a, size_t n);
void ty_arena_free(arena *a);

/* ---------------------------------------------------------------- values */

typedef enum {
    JV_UNDEFINED,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,      /* a Python list, or a tuple, generator, iterator or dict view (jv.seq) */
    JV_DICT,
    JV_NAMESPACE, /* namespace(): a dict whose attributes `set` may assign */
    JV_MACRO,
    JV_FUNC,      /* a built-in function, or a method bound to its value */
    JV_LOOP,      /* a for loop's `loop` */
    JV_CYCLER,
    JV_JOINER,
} jv_kind;

typedef struct jstr jstr;
typedef struct jlist jlist;
typedef struct scope scope;
typedef struct jdict jdict;
typedef struct jobj jobj;

/* What Python would hold a JV_LIST's items in: jinja2's filters return generators (always
 * true, no len(), not JSON, used up by one iteration), dict methods views. */
enum { SEQ_LIST, SEQ_TUPLE, SEQ_RANGE, SEQ_GEN, SEQ_REVITER, SEQ_ITEMS, SEQ_KEYS, SEQ_VALUES };

typedef struct jv {
    uint8_t kind;
    uint8_t seq; /* JV_LIST: SEQ_* */
    bool markup; /* JV_STR: a markupsafe.Markup (from |safe or |escape): what is added to it is
                  * HTML-escaped, as Markup's operators do whatever the autoescaping */
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d;
        jobj *o;
        const char *undef; /* JV_UNDEFINED: what was missing, for the error when it is used */
    };
} jv;

struct jstr {
    size_t len;   /* bytes */
    size_t n_cp;  /* code points */
    char p[];     /* NUL-terminated */
};

struct jlist {
    size_t n, cap;
    jv *v;
    int64_t range[3]; /* SEQ_RANGE: its start, stop and step (the items are there too) */
};

struct jdict {
    size_t n, cap;
    jv *k, *v; /* insertion order */
};

/* ---------------------------------------------------------------- the tree */

typedef enum {
    /* expressions */
    N_CONST,
    N_NAME,
    N_LIST,
    N_TUPLE,
    N_DICT,    /* args.pos: key, value, key, value, ... */
    N_GETATTR, /* a.name */
    N_GETITEM, /* a[b] */
    N_SLICE,   /* a:b:c, any of them NULL */
    N_CALL,    /* a(args) */
    N_FILTER,  /* a | name(args); a NULL in a filter block or set block */
    N_TEST,    /* a is [not] name(args) (flag: not) */
    N_UNARY,   /* op a: '-', '+' */
    N_BINARY,  /* a op b: '+', '-', '*', '/', 'f' (//), '%', 'p' (**), '~' */
    N_COMPARE, /* a op b op c ...: args.pos the operands after a, ops their operators */
    N_AND,
    N_OR,
    N_NOT,
    N_COND,    /* b if a else c */
    /* statements */
    N_BODY, /* args.pos: the statements */
    N_DATA, /* text */
    N_PRINT,
    N_IF,     /* if a: b else c */
    N_FOR,    /* for a in b [if e]: c else d (flag: recursive) */
    N_SET,    /* set a = b */
    N_SET_BLOCK, /* set a | b: c */
    N_MACRO,  /* name(params): c */
    N_CALL_BLOCK, /* call(params) a: c */
    N_FILTER_BLOCK, /* filter b: c */
    N_WITH,   /* with args (kw names = kw values): c */
    N_BREAK,
    N_CONTINUE,
} node_kind;

/* comparison operators of N_COMPARE */
enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOT_IN };

typedef struct node node;

typedef struct {
    node **pos;
    int n_pos;
    const char **kw_names;
    node **kw;
    int n_kw;
    node *star, *starstar; /* *args, **kwargs */
} node_args;

struct node {
    uint8_t kind;
    char op;
    bool flag;
    int line, col;
    const char *name; /* a name, an attribute, a filter, test or macro */
    jv value;         /* N_CONST, N_DATA */
    node *a, *b, *c, *d, *e;
    node_args args;   /* a call's, a filter's, a test's; a macro's parameters (kw: defaults) */
    uint8_t *ops;     /* N_COMPARE */
};

struct jinja_template {
    arena mem;
    node *root;
};

/* ---------------------------------------------------------------- a render */

/* A scope's variables: a short list, names pointing into the template or the render
 * (never copied per assignment: a loop's iterations allocate little). */
typedef struct var var;
struct var {
    const char *name;
    jv value;
    var *next;
};
struct scope {
    scope *parent;
    var *vars;
};

/* A scratch buffer of a render (ty_jx_buf). */
typedef struct jbuf jbuf;
struct jbuf {
    ty_buf b;
    jbuf *next;
};

typedef struct jx {
    arena mem;
    jbuf *bufs;       /* every scratch buffer: those still holding bytes are freed on failure */
    jinja_limits lim;
    uint64_t steps;
    double deadline;
    int depth;
    ty_buf *out;      /* where output goes now (a macro's or a set block's own buffer inside them) */
    size_t out_total; /* bytes written to every buffer */
    scope *root;      /* the render's variables; macros run in a scope under it */
    jmp_buf fail;
    char *err;
    size_t err_size;
    bool raised;
    const node *at; /* the node being evaluated, for the error's line and column */
} jx;

/* A scratch buffer for text being built: its bytes are malloc'd (they may grow large),
 * and a failure frees those of every buffer not yet done with, so a longjmp out of a
 * builtin leaks nothing. ty_jx_buf_done frees the bytes once they are copied out. */
ty_buf *ty_jx_buf(jx *x);
void ty_jx_buf_done(ty_buf *b);

jv ty_jx_buf_str(jx *x, ty_buf *b); /* the buffer's text as a string; the buffer is done with */

/* The error at the current node: longjmps out of the render. */
_Noreturn void ty_jx_fail(jx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void ty_jx_fail_undefined(jx *x, jv v); /* the error of using an undefined value */
/* The render's limits, its time counted from now. */
void ty_jx_limit(jx *x, jinja_limits lim);
/* One step of work: fails past the step or time limit. */
void ty_jx_step(jx *x);
/* formatted text in the render's memory */
const char *ty_jx_sprintf(jx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* an argument by position or keyword, or dflt */
jv ty_jx_arg(const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw, int pos, const char *name,
          jv dflt);
jv ty_jx_str_of(jx *x, jv v); /* str(v); undefined: "" */
jv ty_jx_need_str(jx *x, jv v, const char *what); /* v, or the error that `what` wants a string */
int64_t ty_jx_need_int(jx *x, jv v, const char *what);

/* values: jinja_value.c */
static const jv JV_NONE_V = {.kind = JV_NONE}, JV_TRUE_V = {.kind = JV_BOOL, .b = true},
                JV_FALSE_V = {.kind = JV_BOOL, .b = false}, JV_UNDEF_V = {.kind = JV_UNDEFINED};
static inline int64_t as_int(jv v) { return v.kind == JV_INT ? v.i : v.b; } /* an int or a bool */
jv ty_jv_undefined(const char *what);
jv ty_jv_bool(bool b);
jv ty_jv_int(int64_t i);
jv ty_jv_float(double f);
jv ty_jv_str(jx *x, const char *s, size_t len);
jv ty_jv_cstr(jx *x, const char *s);
jv ty_jv_list(jx *x, size_t cap);
jv ty_jv_dict(jx *x, size_t cap);
void ty_jv_list_push(jx *x, jv list, jv item);
void ty_jv_dict_set(jx *x, jv dict, jv key, jv value); /* replaces the value of an equal key */
const jv *ty_jv_dict_get(jv dict, jv key);
const jv *ty_jv_dict_get_str(jv dict, const char *key);
jv ty_jv_of_json(jx *x, const json_t *j);
jv ty_jv_const_str(arena *a, const char *s, size_t len); /* a template constant */

bool ty_jv_truthy(jx *x, jv v);
/* fails as Python's hash() does on a list, a dict, a dict's items or keys: a dict key, a
 * set member */
void ty_jv_need_hashable(jx *x, jv v);
bool ty_jv_equal(jv a, jv b);
int ty_jv_compare(jx *x, jv a, jv b); /* <0, 0, >0; fails where Python's < would */
bool ty_jv_is_number(jv v);
double ty_jv_number(jv v);
const char *ty_jv_type_name(jv v);
size_t ty_jv_len(jx *x, jv v);

/* str(v) and repr(v), as Python writes them */
void ty_jv_write_str(jx *x, ty_buf *b, jv v);
void ty_jv_write_repr(jx *x, ty_buf *b, jv v);
jv ty_jv_to_str(jx *x, jv v);
/* json.dumps(v, ensure_ascii=False, indent, separators, sort_keys); indent NULL: none */
void ty_jv_write_json(jx *x, ty_buf *b, jv v, const char *indent, const char *item_sep, const char *key_sep,
                   bool sort_keys);
void ty_jv_write_float(ty_buf *b, double f); /* Python's repr of a float */

/* iteration: a list's items, a dict's keys, a string's characters; undefined: none */
jv ty_jv_iter_list(jx *x, jv v);

/* HTML-escaped text (markupsafe.escape): & < > " ' */
void ty_jv_escape(ty_buf *b, const char *s, size_t n);
/* Markup's rules for a + b and fmt % args where either side is Markup */
jv ty_jv_markup(jv s);

/* strings by code point */
size_t ty_jstr_cp_offset(const jstr *s, size_t cp); /* byte offset of code point cp */
jv ty_jv_str_slice(jx *x, jv s, int64_t start, int64_t stop, int64_t step);
uint32_t ty_ju_upper(uint32_t c);
uint32_t ty_ju_lower(uint32_t c);
bool ty_ju_space(uint32_t c);
static inline uint32_t next_cp(const jstr *s, size_t *i) { return ty_utf8_decode(s->p, s->len, i); }
static inline void put_cp(ty_buf *b, uint32_t c) {
    char u[4];
    ty_buf_append(b, u, ty_utf8_encode(c, u));
}

/* builtins: a filter, test, global or method */
typedef struct builtin builtin;
typedef jv (*builtin_fn)(jx *x, jv self, const jv *args, int n_args, const char **kw_names, const jv *kw,
                         int n_kw);
struct builtin {
    const char *name;
    builtin_fn fn;
    unsigned flags; /* KEEPS_MARKUP */
};
/* a filter or str method whose string result is Markup when its input is (markupsafe's
 * wrapped methods, which also escape their string arguments) */
#define KEEPS_MARKUP 1u
struct jobj {
    const builtin *fn;  /* JV_FUNC */
    jv self;            /* JV_FUNC: the value a method is bound to */
    const node *macro;  /* JV_MACRO: its definition (or a call block, for its caller) */
    jv caller;          /* JV_MACRO: `caller` in a call block's macro */
    scope *closure;     /* JV_MACRO: the scope it was defined in; JV_LOOP: the loop's */
    jdict *ns;          /* JV_NAMESPACE */
    /* JV_LOOP */
    jlist *items;
    int64_t index0, depth0;
    jv last_changed;
    bool changed_seen;
    const node *loop_node;
    /* JV_CYCLER, JV_JOINER */
    int64_t pos;
    jv sep;
};

/* the arguments every builtin takes, and one of them by position or keyword */
#define ARGS jx *x, jv self, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw
#define ARG(pos, name, dflt) ty_jx_arg(args, n_args, kw_names, kw, n_kw, pos, name, dflt)

/* ops: jinja_ops.c */
jv ty_jx_getattr(jx *x, jv obj, const char *name);
jv ty_jx_getitem(jx *x, jv obj, jv key);
jv ty_jx_binary(jx *x, char op, jv a, jv b); /* a op b: + - * / f(//) % p(**) ~ */
jv ty_jinja_percent_format(jx *x, jv fmt, jv args); /* str % args */
jv ty_jinja_method(jx *x, jv self, const char *name); /* a bound method, or undefined */
jv ty_jinja_loop_attr(jx *x, jv loop, const char *name);
/* a name in a table sorted by name, or NULL */
const builtin *ty_jinja_find(const builtin *table, size_t n, const char *name);
#define FIND(table, name) ty_jinja_find(table, sizeof table / sizeof *table, name)
/* str's work, as Python's str methods do it */
jv ty_jx_strip(jx *x, jv s, jv chars, bool left, bool right); /* chars None: white space */
jv ty_jx_map_case(jx *x, jv s, int mode); /* 0 lower, 1 upper, 2 capitalize, 3 title */
bool ty_jx_special_case(ty_buf *b, uint32_t c, bool upper, bool title); /* a full case mapping (ß: SS) */
jv ty_jx_splitlines(jx *x, jv s, bool keepends);
jv ty_jx_split(jx *x, jv s, jv sep, int64_t maxsplit, bool from_right);
jv ty_jx_replace(jx *x, jv s, jv old, jv new_, int64_t count);
jv ty_jx_escape(jx *x, jv v, bool force); /* Markup of the escaped text */
/* the builtins that are also methods: dict.items(), list.copy(), dict(), str.islower() ... */
jv ty_jinja_items(ARGS);
jv ty_jinja_list(ARGS);
jv ty_jinja_dict(ARGS);
jv ty_jinja_islower(ARGS);
jv ty_jinja_isupper(ARGS);

/* builtins: jinja_builtins.c */
const builtin *ty_jinja_filter(const char *name);
const builtin *ty_jinja_test(const char *name);
const builtin *ty_jinja_global(const char *name);
/* a built-in function or bound method called (Markup's rules applied) */
jv ty_jinja_call_builtin(jx *x, jv fn, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw);
jv ty_jx_apply_filter(jx *x, const char *name, jv v, const jv *args, int n_args, const char **kw_names,
                   const jv *kw, int n_kw);
bool ty_jx_apply_test(jx *x, const char *name, jv v, const jv *args, int n_args);

/* parse: whether the tree under n reads the variable `name` (jinja_parse.c) */
bool ty_jinja_node_reads(const node *n, const char *name);

/* eval: jinja_eval.c */
jv ty_jx_call(jx *x, jv fn, const jv *args, int n_args, const char **kw_names, const jv *kw, int n_kw);
jv ty_jx_loop_call(jx *x, jv loop, jv items); /* loop(items) in a recursive for */

#endif
