/* ty_jinja_parse.c — a Jinja template's text to its tree: jinja2's lexer (trim_blocks,
 * lstrip_blocks, the - and + whitespace controls, comments, raw blocks) and its parser
 * (the precedence of jinja2's parser.py, statement by statement). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "unicode.h"
#include "utf8.h"

/* ---------------------------------------------------------------- tokens */

typedef enum {
    T_DATA,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
    T_EOF,
} tok_kind;

typedef struct {
    tok_kind kind;
    int line, col;
    const char *p; /* into the normalized source (T_STRING: the decoded text, in the arena) */
    size_t len;
    char op[3];    /* T_OP */
    int64_t i;
    double f;
} token;

typedef struct {
    arena *mem;
    const char *src;
    size_t n;
    token *toks;
    size_t n_toks, cap_toks;
    size_t at; /* the parser's position */
    int depth;        /* nested expressions and blocks: bounded, so the C stack is */
    size_t where_off; /* where() resumes from here: tokens come in order */
    int where_line, where_col;
    char *err;
    size_t err_size;
    jmp_buf fail;
} parser;

static _Noreturn void fail_at(parser *ps, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static _Noreturn void fail_at(parser *ps, int line, int col, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->err_size, "%d:%d: %s", line, col, msg);
    longjmp(ps->fail, 1);
}

/* line and column (1-based, in code points) of a source offset */
static void where(parser *ps, size_t off, int *line, int *col) {
    if (off < ps->where_off) ps->where_off = 0, ps->where_line = 1, ps->where_col = 1;
    int l = ps->where_line, c = ps->where_col;
    for (size_t i = ps->where_off; i < off && i < ps->n; i++) {
        if (ps->src[i] == '\n') l++, c = 1;
        else if (((unsigned char)ps->src[i] & 0xC0) != 0x80) c++;
    }
    ps->where_off = off;
    *line = ps->where_line = l;
    *col = ps->where_col = c;
}

static token *push_tok(parser *ps, tok_kind kind, size_t off) {
    if (ps->n_toks == ps->cap_toks) {
        size_t cap = ps->cap_toks ? 2 * ps->cap_toks : 256;
        token *t = realloc(ps->toks, cap * sizeof *t);
        if (!t) fail_at(ps, 0, 0, "no memory");
        ps->toks = t;
        ps->cap_toks = cap;
    }
    token *t = &ps->toks[ps->n_toks++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    where(ps, off, &t->line, &t->col);
    return t;
}

/* ---------------------------------------------------------------- the lexer */

static bool py_space_at(const char *s, size_t n, size_t i, size_t *len) {
    size_t pos = i;
    const uint32_t c = ty_utf8_decode(s, n, &pos);
    *len = pos - i;
    return ty_ju_space(c);
}

/* the length of s without its trailing whitespace (Python's str.rstrip()) */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80) start--;
        size_t len;
        if (!py_space_at(s, end, start, &len)) break;
        end = start;
    }
    return end;
}

static bool all_space(const char *s, size_t n) {
    if (n == 0) return false; /* jinja2's \s+ needs one */
    for (size_t i = 0; i < n;) {
        size_t len;
        if (!py_space_at(s, n, i, &len)) return false;
        i += len;
    }
    return true;
}

static size_t skip_space(const parser *ps, size_t i) {
    size_t len;
    while (i < ps->n && py_space_at(ps->src, ps->n, i, &len)) i += len;
    return i;
}

/* The text before a tag, its whitespace stripped as the tag's sign (- or +) and
 * lstrip_blocks say; line_starting: the text begins a line. */
static void emit_data(parser *ps, size_t start, size_t end, char sign, bool is_var, bool line_starting) {
    size_t n = end - start;
    const char *s = ps->src + start;
    if (sign == '-') {
        n = rstrip_len(s, n);
    } else if (sign != '+' && !is_var) {
        size_t l_pos = n;
        while (l_pos > 0 && s[l_pos - 1] != '\n') l_pos--;
        if ((l_pos > 0 || line_starting) && all_space(s + l_pos, n - l_pos)) n = l_pos;
    }
    if (n == 0) return;
    token *t = push_tok(ps, T_DATA, start);
    t->p = s;
    t->len = n;
}

static bool starts(const parser *ps, size_t i, const char *lit) {
    const size_t n = strlen(lit);
    return i + n <= ps->n && memcmp(ps->src + i, lit, n) == 0;
}

/* Python's unicode-escape decoding of a string literal's body */
static void decode_string(parser *ps, token *t, const char *s, size_t n) {
    char *out = ty_arena_alloc(ps->mem, n + 1);
    if (!out) fail_at(ps, t->line, t->col, "no memory");
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) {
            out[o++] = s[i];
            continue;
        }
        const char e = s[++i];
        uint32_t cp = 0;
        int digits = 0;
        switch (e) {
        case '\n': continue;
        case '\\': out[o++] = '\\'; continue;
        case '\'': out[o++] = '\''; continue;
        case '"': out[o++] = '"'; continue;
        case 'a': out[o++] = '\a'; continue;
        case 'b': out[o++] = '\b'; continue;
        case 'f': out[o++] = '\f'; continue;
        case 'n': out[o++] = '\n'; continue;
        case 'r': out[o++] = '\r'; continue;
        case 't': out[o++] = '\t'; continue;
        case 'v': out[o++] = '\v'; continue;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), k++;
                i--;
                o += ty_utf8_encode(cp, out + o);
                continue;
            }
            out[o++] = '\\';
            out[o++] = e;
            continue;
        }
        for (int k = 0; k < digits; k++) {
            const char h = i + 1 < n ? s[i + 1] : 0;
            const int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (v < 0) fail_at(ps, t->line, t->col, "truncated \\%cXXXX escape in a string", e);
            cp = cp * 16 + (uint32_t)v;
            i++;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            fail_at(ps, t->line, t->col, "the escape \\%c%0*X in a string is not a character", e, digits, cp);
        o += ty_utf8_encode(cp, out + o);
    }
    out[o] = 0;
    t->p = out;
    t->len = o;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* digits with single underscores between them: the length, 0 if none */
static size_t digit_run(const parser *ps, size_t i) {
    size_t j = i;
    if (j >= ps->n || !is_digit(ps->src[j])) return 0;
    while (j < ps->n && (is_digit(ps->src[j]) || (ps->src[j] == '_' && j + 1 < ps->n && is_digit(ps->src[j + 1])))) j++;
    return j - i;
}

static void number_token(parser *ps, size_t *pi) {
    size_t i = *pi, j = i + digit_run(ps, i);
    bool is_float = false;
    /* a float needs digits after its point; after a '.', "0.1" is two subscripts */
    const bool after_dot = i > 0 && ps->src[i - 1] == '.';
    if (!after_dot && j < ps->n && ps->src[j] == '.' && digit_run(ps, j + 1)) {
        j = j + 1 + digit_run(ps, j + 1);
        is_float = true;
    }
    if (!after_dot && j < ps->n && (ps->src[j] == 'e' || ps->src[j] == 'E')) {
        size_t k = j + 1;
        if (k < ps->n && (ps->src[k] == '+' || ps->src[k] == '-')) k++;
        if (digit_run(ps, k)) {
            j = k + digit_run(ps, k);
            is_float = true;
        }
    }
    char buf[128];
    size_t o = 0;
    for (size_t k = i; k < j && o + 1 < sizeof buf; k++)
        if (ps->src[k] != '_') buf[o++] = ps->src[k];
    buf[o] = 0;
    token *t = push_tok(ps, is_float ? T_FLOAT : T_INT, i);
    errno = 0;
    if (is_float) {
        t->f = strtod(buf, NULL);
    } else {
        t->i = strtoll(buf, NULL, 10);
        if (errno == ERANGE || j - i >= sizeof buf - 1) fail_at(ps, t->line, t->col, "the integer %s is too large", buf);
    }
    *pi = j;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char OPS1[] = "+-/*%~[](){}><=.:|,;";

/* The tokens inside {{ }} or {% %}, from i; returns the offset after the end tag. */
static size_t lex_tag(parser *ps, size_t i, bool is_block, int line, int col) {
    int depth = 0;
    for (;;) {
        i = skip_space(ps, i);
        if (i >= ps->n) fail_at(ps, line, col, "the %s that begins here is not closed", is_block ? "{%" : "{{");
        if (depth == 0) {
            const char *close = is_block ? "%}" : "}}";
            if (starts(ps, i, close) || ((ps->src[i] == '-' || (is_block && ps->src[i] == '+')) && starts(ps, i + 1, close))) {
                token *t = push_tok(ps, is_block ? T_BLOCK_END : T_VAR_END, i);
                const char sign = ps->src[i] == '-' || ps->src[i] == '+' ? ps->src[i] : 0;
                t->op[0] = sign;
                i += sign ? 3 : 2;
                if (sign == '-') i = skip_space(ps, i);
                else if (!sign && is_block && i < ps->n && ps->src[i] == '\n') i++; /* trim_blocks */
                return i;
            }
        }
        const char c = ps->src[i];
        if (is_digit(c)) {
            number_token(ps, &i);
        } else if (is_name_start(c)) {
            size_t j = i;
            while (j < ps->n && is_name_char(ps->src[j])) j++;
            token *t = push_tok(ps, T_NAME, i);
            t->p = ps->src + i;
            t->len = j - i;
            i = j;
        } else if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < ps->n && ps->src[j] != c) j += ps->src[j] == '\\' ? 2 : 1;
            token *t = push_tok(ps, T_STRING, i);
            if (j >= ps->n) fail_at(ps, t->line, t->col, "unterminated string");
            decode_string(ps, t, ps->src + i + 1, j - i - 1);
            i = j + 1;
        } else {
            token *t = push_tok(ps, T_OP, i);
            for (size_t k = 0; k < sizeof OPS2 / sizeof *OPS2; k++)
                if (starts(ps, i, OPS2[k])) {
                    memcpy(t->op, OPS2[k], 2);
                    break;
                }
            if (!t->op[0]) {
                if (!strchr(OPS1, c) || !c) fail_at(ps, t->line, t->col, "unexpected character '%c'", c);
                t->op[0] = c;
            }
            if (c == '(' || c == '[' || c == '{') depth++;
            if ((c == ')' || c == ']' || c == '}') && depth > 0) depth--;
            i += strlen(t->op);
        }
    }
}

/* {% raw %}: the offset after "{% raw %}" if one begins at i, else 0 */
static size_t raw_begin(const parser *ps, size_t i) {
    size_t j = i + 2;
    if (j < ps->n && (ps->src[j] == '-' || ps->src[j] == '+')) j++;
    j = skip_space(ps, j);
    if (!starts(ps, j, "raw") || (j + 3 < ps->n && is_name_char(ps->src[j + 3]))) return 0;
    j = skip_space(ps, j + 3);
    if (starts(ps, j, "-%}")) return skip_space(ps, j + 3);
    if (starts(ps, j, "%}")) return j + 2;
    return 0;
}

static void lex(parser *ps) {
    size_t i = 0;
    bool line_starting = true;
    while (i < ps->n) {
        /* the next tag */
        size_t k = i;
        while (k + 1 < ps->n && !(ps->src[k] == '{' && (ps->src[k + 1] == '{' || ps->src[k + 1] == '%' || ps->src[k + 1] == '#'))) k++;
        if (k + 1 >= ps->n) {
            emit_data(ps, i, ps->n, '+', true, false);
            break;
        }
        const char kind = ps->src[k + 1];
        const char sign = k + 2 < ps->n && (ps->src[k + 2] == '-' || ps->src[k + 2] == '+') ? ps->src[k + 2] : 0;
        emit_data(ps, i, k, sign, kind == '{', line_starting);
        int line, col;
        where(ps, k, &line, &col);
        size_t after;
        if (kind == '#') {
            const size_t body = k + 2 + (sign ? 1 : 0);
            size_t j = body;
            while (j + 1 < ps->n && !(ps->src[j] == '#' && ps->src[j + 1] == '}')) j++;
            if (j + 1 >= ps->n) fail_at(ps, line, col, "the comment that begins here is not closed");
            after = j + 2;
            /* "{#-#}": the sign belongs to the opening */
            const char end_sign = j > body && (ps->src[j - 1] == '-' || ps->src[j - 1] == '+') ? ps->src[j - 1] : 0;
            if (end_sign == '-') after = skip_space(ps, after);
            else if (!end_sign && after < ps->n && ps->src[after] == '\n') after++; /* trim_blocks */
        } else if (kind == '%' && (after = raw_begin(ps, k)) != 0) {
            /* raw text up to {% endraw %} */
            size_t j = after;
            for (;; j++) {
                if (j + 1 >= ps->n) fail_at(ps, line, col, "the raw block that begins here is not closed");
                if (ps->src[j] != '{' || ps->src[j + 1] != '%') continue;
                size_t e = j + 2;
                const char esign = e < ps->n && (ps->src[e] == '-' || ps->src[e] == '+') ? ps->src[e] : 0;
                if (esign) e++;
                e = skip_space(ps, e);
                if (!starts(ps, e, "endraw")) continue;
                e = skip_space(ps, e + 6);
                emit_data(ps, after, j, esign, false, ps->src[after - 1] == '\n');
                if (starts(ps, e, "-%}")) after = skip_space(ps, e + 3);
                else if (starts(ps, e, "+%}")) after = e + 3;
                else if (starts(ps, e, "%}")) after = e + 2 + (e + 2 < ps->n && ps->src[e + 2] == '\n');
                else fail_at(ps, line, col, "endraw is not closed by %%}");
                break;
            }
        } else {
            push_tok(ps, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, k);
            after = lex_tag(ps, k + 2 + (sign ? 1 : 0), kind == '%', line, col);
        }
        line_starting = after > 0 && ps->src[after - 1] == '\n';
        i = after;
    }
    push_tok(ps, T_EOF, ps->n);
}

/* ---------------------------------------------------------------- parser helpers */

static token *cur(parser *ps) { return &ps->toks[ps->at]; }
static token *peek(parser *ps, int k) {
    const size_t at = ps->at + (size_t)k;
    return &ps->toks[at < ps->n_toks ? at : ps->n_toks - 1];
}
static void advance(parser *ps) {
    if (ps->toks[ps->at].kind != T_EOF) ps->at++;
}

static bool is_op(const token *t, const char *op) { return t->kind == T_OP && !strcmp(t->op, op); }
static bool is_name(const token *t, const char *name) {
    return t->kind == T_NAME && t->len == strlen(name) && !memcmp(t->p, name, t->len);
}

static const char *describe(const token *t, char *buf, size_t n) {
    switch (t->kind) {
    case T_DATA: return "template data";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "'%}'";
    case T_NAME: snprintf(buf, n, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->p); return buf;
    case T_STRING: return "a string";
    case T_INT: return "an integer";
    case T_FLOAT: return "a float";
    case T_OP: snprintf(buf, n, "'%s'", t->op); return buf;
    case T_EOF: return "the end of the template";
    }
    return "?";
}

static _Noreturn void unexpected(parser *ps, const char *wanted) {
    char buf[64];
    const token *t = cur(ps);
    fail_at(ps, t->line, t->col, "expected %s, got %s", wanted, describe(t, buf, sizeof buf));
}

static void expect_op(parser *ps, const char *op) {
    if (!is_op(cur(ps), op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", op);
        unexpected(ps, want);
    }
    advance(ps);
}

static const char *intern(parser *ps, const char *s, size_t n) {
    char *p = ty_arena_alloc(ps->mem, n + 1);
    if (!p) fail_at(ps, cur(ps)->line, cur(ps)->col, "no memory");
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static const char *expect_name(parser *ps) {
    const token *t = cur(ps);
    if (t->kind != T_NAME) unexpected(ps, "a name");
    advance(ps);
    return intern(ps, t->p, t->len);
}

static node *new_node(parser *ps, node_kind kind, const token *at) {
    node *n = ty_arena_alloc(ps->mem, sizeof *n);
    if (!n) fail_at(ps, at->line, at->col, "no memory");
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* a growing array of nodes, in the arena when done */
typedef struct {
    node **v;
    int n, cap;
} node_vec;

/* (in the arena, so that a failed parse leaves nothing to free) */
static void vec_push(parser *ps, node_vec *v, node *n) {
    if (v->n == v->cap) {
        const int cap = v->cap ? 2 * v->cap : 8;
        node **p = ty_arena_alloc(ps->mem, (size_t)cap * sizeof *p);
        if (!p) fail_at(ps, 0, 0, "no memory");
        if (v->n) memcpy(p, v->v, (size_t)v->n * sizeof *p);
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = n;
}

static node **vec_done(parser *ps, node_vec *v) {
    (void)ps;
    return v->n ? v->v : NULL;
}

/* ---------------------------------------------------------------- expressions */

enum { MAX_NESTING = 200 };

static void nest(parser *ps) {
    if (++ps->depth > MAX_NESTING)
        fail_at(ps, cur(ps)->line, cur(ps)->col, "the template is nested more than %d levels deep", MAX_NESTING);
}

static node *parse_expression(parser *ps, bool with_condexpr);
static node *parse_tuple(parser *ps, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_parens);
static node *parse_unary(parser *ps, bool with_filter);
static node *parse_primary(parser *ps);
static node *parse_postfix(parser *ps, node *n);
static node *parse_filter_expr(parser *ps, node *n);

static void parse_call_args(parser *ps, node_args *args) {
    const token *open = cur(ps);
    expect_op(ps, "(");
    node_vec pos = {0}, kw = {0};
    const char *names[256];
    int n_names = 0;
    while (!is_op(cur(ps), ")")) {
        if (pos.n || kw.n || args->star || args->starstar) expect_op(ps, ",");
        if (is_op(cur(ps), ")")) break;
        if (is_op(cur(ps), "**")) {
            advance(ps);
            args->starstar = parse_expression(ps, true);
        } else if (is_op(cur(ps), "*")) {
            advance(ps);
            args->star = parse_expression(ps, true);
        } else if (cur(ps)->kind == T_NAME && is_op(peek(ps, 1), "=")) {
            if (n_names == 256) fail_at(ps, open->line, open->col, "more than 256 keyword arguments");
            names[n_names++] = expect_name(ps);
            advance(ps);
            vec_push(ps, &kw, parse_expression(ps, true));
        } else {
            if (kw.n) fail_at(ps, cur(ps)->line, cur(ps)->col, "a positional argument after a keyword argument");
            vec_push(ps, &pos, parse_expression(ps, true));
        }
    }
    advance(ps);
    args->n_pos = pos.n;
    args->pos = vec_done(ps, &pos);
    args->n_kw = kw.n;
    args->kw = vec_done(ps, &kw);
    if (n_names) {
        args->kw_names = ty_arena_alloc(ps->mem, (size_t)n_names * sizeof *args->kw_names);
        if (!args->kw_names) fail_at(ps, open->line, open->col, "no memory");
        memcpy(args->kw_names, names, (size_t)n_names * sizeof *names);
    }
}

static node *parse_subscribed(parser *ps) {
    const token *at = cur(ps);
    node *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    if (!is_op(cur(ps), ":")) {
        node *e = parse_expression(ps, true);
        if (!is_op(cur(ps), ":")) return e;
        parts[0] = e;
    }
    /* a slice */
    advance(ps);
    k = 1;
    if (!is_op(cur(ps), "]") && !is_op(cur(ps), ",") && !is_op(cur(ps), ":")) parts[1] = parse_expression(ps, true);
    if (is_op(cur(ps), ":")) {
        advance(ps);
        k = 2;
        if (!is_op(cur(ps), "]") && !is_op(cur(ps), ",")) parts[2] = parse_expression(ps, true);
    }
    (void)k;
    node *s = new_node(ps, N_SLICE, at);
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static node *parse_subscript(parser *ps, node *n) {
    const token *t = cur(ps);
    if (is_op(t, ".")) {
        advance(ps);
        const token *a = cur(ps);
        if (a->kind == T_NAME) {
            node *g = new_node(ps, N_GETATTR, t);
            g->a = n;
            g->name = expect_name(ps);
            return g;
        }
        if (a->kind != T_INT) unexpected(ps, "a name or an integer after '.'");
        node *g = new_node(ps, N_GETITEM, t);
        node *k = new_node(ps, N_CONST, a);
        k->value = ty_jv_int(a->i);
        advance(ps);
        g->a = n;
        g->b = k;
        return g;
    }
    /* [ ... ] */
    advance(ps);
    node_vec items = {0};
    while (!is_op(cur(ps), "]")) {
        if (items.n) {
            expect_op(ps, ",");
            if (is_op(cur(ps), "]")) break;
        }
        vec_push(ps, &items, parse_subscribed(ps));
    }
    expect_op(ps, "]");
    node *g = new_node(ps, N_GETITEM, t);
    g->a = n;
    if (items.n == 1) {
        g->b = items.v[0];
    } else {
        node *tup = new_node(ps, N_TUPLE, t);
        tup->args.n_pos = items.n;
        tup->args.pos = vec_done(ps, &items);
        g->b = tup;
    }
    return g;
}

/* Each loop that builds a left-deep chain (a.b.c, a + b + c, x|f|g) counts its links as
 * nesting: the evaluator recurses once per link. */
static node *parse_postfix(parser *ps, node *n) {
    const int depth = ps->depth;
    for (;; nest(ps)) {
        const token *t = cur(ps);
        if (is_op(t, ".") || is_op(t, "[")) {
            n = parse_subscript(ps, n);
        } else if (is_op(t, "(")) {
            node *c = new_node(ps, N_CALL, t);
            c->a = n;
            parse_call_args(ps, &c->args);
            n = c;
        } else {
            ps->depth = depth;
            return n;
        }
    }
}

/* a dotted name (filters and tests may be "ns.name") */
static const char *dotted_name(parser *ps) {
    const token *t = cur(ps);
    const char *name = expect_name(ps);
    while (is_op(cur(ps), ".") && peek(ps, 1)->kind == T_NAME) {
        advance(ps);
        const char *more = expect_name(ps);
        char *joined = ty_arena_alloc(ps->mem, strlen(name) + strlen(more) + 2);
        if (!joined) fail_at(ps, t->line, t->col, "no memory");
        sprintf(joined, "%s.%s", name, more);
        name = joined;
    }
    return name;
}

static node *parse_filter(parser *ps, node *n, bool start_inline) {
    const int depth = ps->depth;
    for (; is_op(cur(ps), "|") || start_inline; nest(ps)) {
        if (!start_inline) advance(ps);
        start_inline = false;
        const token *t = cur(ps);
        node *f = new_node(ps, N_FILTER, t);
        f->name = dotted_name(ps); /* an unknown name: check_names */
        if (is_op(cur(ps), "(")) parse_call_args(ps, &f->args);
        f->a = n;
        n = f;
    }
    ps->depth = depth;
    return n;
}

static node *parse_test(parser *ps, node *n) {
    advance(ps); /* is */
    bool negated = false;
    if (is_name(cur(ps), "not")) {
        advance(ps);
        negated = true;
    }
    node *x = new_node(ps, N_TEST, cur(ps)); /* at its name */
    x->name = dotted_name(ps); /* an unknown name: check_names */
    x->flag = negated;
    x->a = n;
    const token *c = cur(ps);
    if (is_op(c, "(")) {
        parse_call_args(ps, &x->args);
    } else if ((c->kind == T_NAME || c->kind == T_STRING || c->kind == T_INT || c->kind == T_FLOAT || is_op(c, "(") ||
                is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) fail_at(ps, c->line, c->col, "tests cannot be chained with 'is'");
        node *arg = parse_postfix(ps, parse_primary(ps));
        x->args.pos = ty_arena_alloc(ps->mem, sizeof *x->args.pos);
        if (!x->args.pos) fail_at(ps, c->line, c->col, "no memory");
        x->args.pos[0] = arg;
        x->args.n_pos = 1;
    }
    return x;
}

static node *parse_filter_expr(parser *ps, node *n) {
    const int depth = ps->depth;
    for (;; nest(ps)) {
        const token *t = cur(ps);
        if (is_op(t, "|")) {
            n = parse_filter(ps, n, false);
        } else if (is_name(t, "is")) {
            n = parse_test(ps, n);
        } else if (is_op(t, "(")) {
            node *c = new_node(ps, N_CALL, t);
            c->a = n;
            parse_call_args(ps, &c->args);
            n = c;
        } else {
            ps->depth = depth;
            return n;
        }
    }
}

static node *parse_primary(parser *ps) {
    const token *t = cur(ps);
    if (t->kind == T_NAME) {
        node *n = new_node(ps, N_CONST, t);
        if (is_name(t, "true") || is_name(t, "True")) n->value = ty_jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) n->value = ty_jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) n->value = JV_NONE_V;
        else {
            n->kind = N_NAME;
            n->name = intern(ps, t->p, t->len);
        }
        advance(ps);
        return n;
    }
    if (t->kind == T_STRING) {
        /* adjacent strings are one */
        size_t total = 0, k = 0;
        while (peek(ps, (int)k)->kind == T_STRING) total += peek(ps, (int)k++)->len;
        char *s = ty_arena_alloc(ps->mem, total + 1);
        if (!s) fail_at(ps, t->line, t->col, "no memory");
        size_t o = 0;
        for (size_t j = 0; j < k; j++) {
            memcpy(s + o, cur(ps)->p, cur(ps)->len);
            o += cur(ps)->len;
            advance(ps);
        }
        node *n = new_node(ps, N_CONST, t);
        n->value = ty_jv_const_str(ps->mem, s, total);
        if (n->value.kind != JV_STR) fail_at(ps, t->line, t->col, "no memory");
        return n;
    }
    if (t->kind == T_INT || t->kind == T_FLOAT) {
        node *n = new_node(ps, N_CONST, t);
        n->value = t->kind == T_INT ? ty_jv_int(t->i) : ty_jv_float(t->f);
        advance(ps);
        return n;
    }
    if (is_op(t, "(")) {
        advance(ps);
        node *n = parse_tuple(ps, false, true, NULL, true);
        expect_op(ps, ")");
        return n;
    }
    if (is_op(t, "[")) {
        advance(ps);
        node_vec items = {0};
        while (!is_op(cur(ps), "]")) {
            if (items.n) {
                expect_op(ps, ",");
                if (is_op(cur(ps), "]")) break;
            }
            vec_push(ps, &items, parse_expression(ps, true));
        }
        advance(ps);
        node *n = new_node(ps, N_LIST, t);
        n->args.n_pos = items.n;
        n->args.pos = vec_done(ps, &items);
        return n;
    }
    if (is_op(t, "{")) {
        advance(ps);
        node_vec items = {0};
        while (!is_op(cur(ps), "}")) {
            if (items.n) {
                expect_op(ps, ",");
                if (is_op(cur(ps), "}")) break;
            }
            vec_push(ps, &items, parse_expression(ps, true));
            expect_op(ps, ":");
            vec_push(ps, &items, parse_expression(ps, true));
        }
        advance(ps);
        node *n = new_node(ps, N_DICT, t);
        n->args.n_pos = items.n;
        n->args.pos = vec_done(ps, &items);
        return n;
    }
    unexpected(ps, "an expression");
}

static node *parse_unary(parser *ps, bool with_filter) {
    const token *t = cur(ps);
    node *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        advance(ps);
        n = new_node(ps, N_UNARY, t);
        n->op = t->op[0];
        nest(ps);
        n->a = parse_unary(ps, false);
        ps->depth--;
    } else {
        n = parse_postfix(ps, parse_primary(ps));
    }
    return with_filter ? parse_filter_expr(ps, n) : n;
}

static node *binary(parser *ps, const token *at, char op, node *a, node *b) {
    node *n = new_node(ps, N_BINARY, at);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static node *parse_pow(parser *ps) {
    node *left = parse_unary(ps, true);
    const int depth = ps->depth;
    for (; is_op(cur(ps), "**"); nest(ps)) {
        const token *t = cur(ps);
        advance(ps);
        left = binary(ps, t, 'p', left, parse_unary(ps, true));
    }
    ps->depth = depth;
    return left;
}

static node *parse_math2(parser *ps) {
    node *left = parse_pow(ps);
    for (const int depth = ps->depth;; nest(ps)) {
        const token *t = cur(ps);
        char op = is_op(t, "*") ? '*' : is_op(t, "/") ? '/' : is_op(t, "//") ? 'f' : is_op(t, "%") ? '%' : 0;
        if (!op) {
            ps->depth = depth;
            return left;
        }
        advance(ps);
        left = binary(ps, t, op, left, parse_pow(ps));
    }
}

static node *parse_concat(parser *ps) {
    node *left = parse_math2(ps);
    const int depth = ps->depth;
    for (; is_op(cur(ps), "~"); nest(ps)) {
        const token *t = cur(ps);
        advance(ps);
        left = binary(ps, t, '~', left, parse_math2(ps));
    }
    ps->depth = depth;
    return left;
}

static node *parse_math1(parser *ps) {
    node *left = parse_concat(ps);
    for (const int depth = ps->depth;; nest(ps)) {
        const token *t = cur(ps);
        char op = is_op(t, "+") ? '+' : is_op(t, "-") ? '-' : 0;
        if (!op) {
            ps->depth = depth;
            return left;
        }
        advance(ps);
        left = binary(ps, t, op, left, parse_concat(ps));
    }
}

static node *parse_compare(parser *ps) {
    const token *at = cur(ps);
    node *first = parse_math1(ps);
    node_vec operands = {0};
    uint8_t ops[64];
    for (;;) {
        const token *t = cur(ps);
        int op = -1;
        if (is_op(t, "==")) op = CMP_EQ;
        else if (is_op(t, "!=")) op = CMP_NE;
        else if (is_op(t, "<")) op = CMP_LT;
        else if (is_op(t, "<=")) op = CMP_LE;
        else if (is_op(t, ">")) op = CMP_GT;
        else if (is_op(t, ">=")) op = CMP_GE;
        else if (is_name(t, "in")) op = CMP_IN;
        else if (is_name(t, "not") && is_name(peek(ps, 1), "in")) op = CMP_NOT_IN;
        if (op < 0) break;
        if (operands.n == 64) fail_at(ps, t->line, t->col, "more than 64 comparisons in a chain");
        advance(ps);
        if (op == CMP_NOT_IN) advance(ps);
        ops[operands.n] = (uint8_t)op;
        vec_push(ps, &operands, parse_math1(ps));
    }
    if (!operands.n) return first;
    node *n = new_node(ps, N_COMPARE, at);
    n->a = first;
    n->args.n_pos = operands.n;
    n->ops = ty_arena_alloc(ps->mem, (size_t)operands.n);
    if (!n->ops) fail_at(ps, at->line, at->col, "no memory");
    memcpy(n->ops, ops, (size_t)operands.n);
    n->args.pos = vec_done(ps, &operands);
    return n;
}

static node *parse_not(parser *ps) {
    const token *t = cur(ps);
    if (is_name(t, "not")) {
        advance(ps);
        node *n = new_node(ps, N_NOT, t);
        nest(ps);
        n->a = parse_not(ps);
        ps->depth--;
        return n;
    }
    return parse_compare(ps);
}

static node *parse_and(parser *ps) {
    node *left = parse_not(ps);
    const int depth = ps->depth;
    for (; is_name(cur(ps), "and"); nest(ps)) {
        const token *t = cur(ps);
        advance(ps);
        node *n = new_node(ps, N_AND, t);
        n->a = left;
        n->b = parse_not(ps);
        left = n;
    }
    ps->depth = depth;
    return left;
}

static node *parse_or(parser *ps) {
    node *left = parse_and(ps);
    const int depth = ps->depth;
    for (; is_name(cur(ps), "or"); nest(ps)) {
        const token *t = cur(ps);
        advance(ps);
        node *n = new_node(ps, N_OR, t);
        n->a = left;
        n->b = parse_and(ps);
        left = n;
    }
    ps->depth = depth;
    return left;
}

static node *parse_condexpr(parser *ps) {
    node *expr1 = parse_or(ps);
    const int depth = ps->depth;
    for (; is_name(cur(ps), "if"); nest(ps)) {
        const token *t = cur(ps);
        advance(ps);
        node *n = new_node(ps, N_COND, t);
        n->a = parse_or(ps);
        n->b = expr1;
        if (is_name(cur(ps), "else")) {
            advance(ps);
            n->c = parse_expression(ps, true);
        }
        expr1 = n;
    }
    ps->depth = depth;
    return expr1;
}

static node *parse_expression(parser *ps, bool with_condexpr) {
    nest(ps);
    node *n = with_condexpr ? parse_condexpr(ps) : parse_or(ps);
    ps->depth--;
    return n;
}

static bool tuple_ends(parser *ps, const char *extra_end) {
    const token *t = cur(ps);
    if (t->kind == T_VAR_END || t->kind == T_BLOCK_END || t->kind == T_EOF) return true;
    if (is_op(t, ")") || is_op(t, "]") || is_op(t, "}")) return true;
    return extra_end && is_name(t, extra_end);
}

/* an expression, or several separated by commas (a tuple); simplified: names only (the
 * targets of for and set) */
static node *parse_tuple(parser *ps, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_parens) {
    const token *at = cur(ps);
    node_vec items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n) expect_op(ps, ",");
        if (tuple_ends(ps, extra_end)) break;
        node *e;
        if (simplified) {
            const token *t = cur(ps);
            e = new_node(ps, N_NAME, t);
            e->name = expect_name(ps);
        } else {
            e = parse_expression(ps, with_condexpr);
        }
        vec_push(ps, &items, e);
        if (is_op(cur(ps), ",")) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) unexpected(ps, "an expression");
    }
    node *n = new_node(ps, N_TUPLE, at);
    n->args.n_pos = items.n;
    n->args.pos = vec_done(ps, &items);
    return n;
}

/* ---------------------------------------------------------------- statements */

static node *subparse(parser *ps, const char *const *end_names);

static void expect_block_end(parser *ps) {
    if (cur(ps)->kind != T_BLOCK_END) unexpected(ps, "'%}'");
    advance(ps);
}

static bool at_end_name(parser *ps, const char *const *names) {
    for (; *names; names++)
        if (is_name(cur(ps), *names)) return true;
    return false;
}

/* The body up to one of end_names, which is left current (after its '{%'). */
static node *subparse(parser *ps, const char *const *end_names);

static node *parse_assign_target(parser *ps, const char *extra_end, bool with_namespace) {
    const token *t = cur(ps);
    if (with_namespace && t->kind == T_NAME && is_op(peek(ps, 1), ".") && peek(ps, 2)->kind == T_NAME) {
        node *ns = new_node(ps, N_NAME, t);
        ns->name = expect_name(ps);
        advance(ps);
        node *g = new_node(ps, N_GETATTR, t);
        g->a = ns;
        g->name = expect_name(ps);
        return g;
    }
    node *target = parse_tuple(ps, true, true, extra_end, false);
    return target;
}

static node *parse_if(parser *ps, const token *at) {
    node *n = new_node(ps, N_IF, at);
    n->a = parse_tuple(ps, false, true, NULL, false);
    expect_block_end(ps);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    n->b = subparse(ps, ends);
    const token *t = cur(ps);
    advance(ps);
    if (is_name(t, "elif")) {
        nest(ps);
        n->c = parse_if(ps, t);
        ps->depth--;
        return n;
    }
    if (is_name(t, "else")) {
        expect_block_end(ps);
        static const char *const end[] = {"endif", NULL};
        n->c = subparse(ps, end);
        advance(ps);
    }
    expect_block_end(ps);
    return n;
}

static node *parse_for(parser *ps, const token *at) {
    node *n = new_node(ps, N_FOR, at);
    n->a = parse_assign_target(ps, "in", false);
    if (!is_name(cur(ps), "in")) unexpected(ps, "'in'");
    advance(ps);
    n->b = parse_tuple(ps, false, false, "recursive", false);
    if (is_name(cur(ps), "if")) {
        advance(ps);
        n->e = parse_expression(ps, true);
    }
    if (is_name(cur(ps), "recursive")) {
        advance(ps);
        n->flag = true;
    }
    expect_block_end(ps);
    static const char *const ends[] = {"endfor", "else", NULL};
    n->c = subparse(ps, ends);
    if (is_name(cur(ps), "else")) {
        advance(ps);
        expect_block_end(ps);
        static const char *const end[] = {"endfor", NULL};
        n->d = subparse(ps, end);
    }
    advance(ps);
    expect_block_end(ps);
    return n;
}

static node *parse_set(parser *ps, const token *at) {
    node *target = parse_assign_target(ps, NULL, true);
    if (is_op(cur(ps), "=")) {
        advance(ps);
        node *n = new_node(ps, N_SET, at);
        n->a = target;
        n->b = parse_tuple(ps, false, true, NULL, false);
        expect_block_end(ps);
        return n;
    }
    if (target->kind != N_NAME && target->kind != N_GETATTR) fail_at(ps, at->line, at->col, "a block set assigns one name");
    node *n = new_node(ps, N_SET_BLOCK, at);
    n->a = target;
    n->b = parse_filter(ps, NULL, false);
    expect_block_end(ps);
    static const char *const end[] = {"endset", NULL};
    n->c = subparse(ps, end);
    advance(ps);
    expect_block_end(ps);
    return n;
}

/* (a, b=1, ...): names in args.kw_names, defaults in args.kw (NULL: none) */
static void parse_signature(parser *ps, node *n) {
    expect_op(ps, "(");
    node_vec defaults = {0};
    const char *names[256];
    int k = 0;
    bool had_default = false;
    while (!is_op(cur(ps), ")")) {
        if (k) expect_op(ps, ",");
        if (is_op(cur(ps), ")")) break;
        const token *t = cur(ps);
        if (k == 256) fail_at(ps, t->line, t->col, "more than 256 parameters");
        names[k] = expect_name(ps);
        node *d = NULL;
        if (is_op(cur(ps), "=")) {
            advance(ps);
            d = parse_expression(ps, true);
            had_default = true;
        } else if (had_default) {
            fail_at(ps, t->line, t->col, "parameter '%s' without a default follows one with a default", names[k]);
        }
        vec_push(ps, &defaults, d);
        k++;
    }
    advance(ps);
    n->args.n_kw = k;
    n->args.kw = NULL;
    if (k) {
        n->args.kw = ty_arena_alloc(ps->mem, (size_t)k * sizeof *n->args.kw);
        n->args.kw_names = ty_arena_alloc(ps->mem, (size_t)k * sizeof *n->args.kw_names);
        if (!n->args.kw || !n->args.kw_names) fail_at(ps, n->line, n->col, "no memory");
        memcpy(n->args.kw, defaults.v, (size_t)k * sizeof *n->args.kw);
        memcpy(n->args.kw_names, names, (size_t)k * sizeof *names);
    }
}

static node *parse_macro(parser *ps, const token *at) {
    node *n = new_node(ps, N_MACRO, at);
    n->name = expect_name(ps);
    parse_signature(ps, n);
    expect_block_end(ps);
    static const char *const end[] = {"endmacro", NULL};
    n->c = subparse(ps, end);
    advance(ps);
    if (cur(ps)->kind == T_NAME) advance(ps); /* {% endmacro name %} */
    expect_block_end(ps);
    return n;
}

static node *parse_call_block(parser *ps, const token *at) {
    node *n = new_node(ps, N_CALL_BLOCK, at);
    if (is_op(cur(ps), "(")) parse_signature(ps, n);
    const token *t = cur(ps);
    n->a = parse_expression(ps, true);
    if (n->a->kind != N_CALL) fail_at(ps, t->line, t->col, "a call block needs a call");
    expect_block_end(ps);
    static const char *const end[] = {"endcall", NULL};
    n->c = subparse(ps, end);
    advance(ps);
    expect_block_end(ps);
    return n;
}

static node *parse_filter_block(parser *ps, const token *at) {
    node *n = new_node(ps, N_FILTER_BLOCK, at);
    n->b = parse_filter(ps, NULL, true);
    expect_block_end(ps);
    static const char *const end[] = {"endfilter", NULL};
    n->c = subparse(ps, end);
    advance(ps);
    expect_block_end(ps);
    return n;
}

static node *parse_with(parser *ps, const token *at) {
    node *n = new_node(ps, N_WITH, at);
    node_vec targets = {0}, values = {0};
    while (cur(ps)->kind != T_BLOCK_END) {
        if (targets.n) expect_op(ps, ",");
        vec_push(ps, &targets, parse_assign_target(ps, NULL, false));
        expect_op(ps, "=");
        vec_push(ps, &values, parse_expression(ps, true));
    }
    expect_block_end(ps);
    n->args.n_pos = targets.n;
    n->args.pos = vec_done(ps, &targets);
    n->args.n_kw = values.n;
    n->args.kw = vec_done(ps, &values);
    static const char *const end[] = {"endwith", NULL};
    n->c = subparse(ps, end);
    advance(ps);
    expect_block_end(ps);
    return n;
}

static node *parse_statement(parser *ps, int loop_depth_hint) {
    (void)loop_depth_hint;
    const token *t = cur(ps);
    if (t->kind != T_NAME) unexpected(ps, "a statement name");
    advance(ps);
    if (is_name(t, "if")) return parse_if(ps, t);
    if (is_name(t, "for")) return parse_for(ps, t);
    if (is_name(t, "set")) return parse_set(ps, t);
    if (is_name(t, "macro")) return parse_macro(ps, t);
    if (is_name(t, "call")) return parse_call_block(ps, t);
    if (is_name(t, "filter")) return parse_filter_block(ps, t);
    if (is_name(t, "with")) return parse_with(ps, t);
    if (is_name(t, "break") || is_name(t, "continue")) {
        node *n = new_node(ps, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        expect_block_end(ps);
        return n;
    }
    if (is_name(t, "generation")) { /* transformers' mark of the assistant's text: no output of its own */
        expect_block_end(ps);
        static const char *const end[] = {"endgeneration", NULL};
        node *body = subparse(ps, end);
        advance(ps);
        expect_block_end(ps);
        return body;
    }
    char buf[64];
    fail_at(ps, t->line, t->col, "unknown tag %s", describe(t, buf, sizeof buf));
}

static node *subparse(parser *ps, const char *const *end_names) {
    const token *at = cur(ps);
    node *body = new_node(ps, N_BODY, at);
    nest(ps);
    node_vec items = {0};
    for (;;) {
        const token *t = cur(ps);
        if (t->kind == T_EOF) {
            if (end_names) {
                const char *const *closer = end_names;
                while (closer[1] && strncmp(*closer, "end", 3)) closer++;
                fail_at(ps, t->line, t->col, "the template ended inside a '%s' block, which needs '%s'", *closer + 3,
                        *closer);
            }
            break;
        }
        if (t->kind == T_DATA) {
            node *d = new_node(ps, N_DATA, t);
            d->value = ty_jv_const_str(ps->mem, t->p, t->len);
            if (d->value.kind != JV_STR) fail_at(ps, t->line, t->col, "no memory");
            vec_push(ps, &items, d);
            advance(ps);
        } else if (t->kind == T_VAR_BEGIN) {
            advance(ps);
            node *p = new_node(ps, N_PRINT, t);
            p->a = parse_tuple(ps, false, true, NULL, false);
            if (cur(ps)->kind != T_VAR_END) unexpected(ps, "'}}'");
            advance(ps);
            vec_push(ps, &items, p);
        } else if (t->kind == T_BLOCK_BEGIN) {
            advance(ps);
            if (end_names && at_end_name(ps, end_names)) break;
            vec_push(ps, &items, parse_statement(ps, 0));
        } else {
            unexpected(ps, "template data or a tag");
        }
    }
    body->args.n_pos = items.n;
    body->args.pos = vec_done(ps, &items);
    ps->depth--;
    return body;
}

/* ---------------------------------------------------------------- the whole */

/* Filters and tests the engine does not know are errors where the template is compiled,
 * as jinja2 makes them, but in an if statement (its test and its branches) and in a
 * conditional expression, where jinja2 fails only if the filter is run (a template may
 * guard a filter another engine has, as StepFun's `| fromjson if ... is string`). The
 * bodies of loops, macros, calls, filter and set blocks and with are frames of their own,
 * where the rule starts over. */
static void check_names(parser *ps, const node *n, bool soft) {
    if (!n) return;
    if (!soft && n->kind == N_FILTER && n->name && !ty_jinja_filter(n->name))
        fail_at(ps, n->line, n->col, "no filter named '%s'", n->name);
    if (!soft && n->kind == N_TEST && !ty_jinja_test(n->name))
        fail_at(ps, n->line, n->col, "no test named '%s'", n->name);
    bool body_soft = soft; /* c: the body of a statement */
    switch (n->kind) {
    case N_IF:
    case N_COND: soft = body_soft = true; break;
    case N_FOR:
    case N_MACRO:
    case N_CALL_BLOCK:
    case N_FILTER_BLOCK:
    case N_WITH:
    case N_SET_BLOCK: body_soft = false; break;
    default: break;
    }
    const bool frame_soft = n->kind == N_FILTER_BLOCK || n->kind == N_SET_BLOCK ? false : soft;
    check_names(ps, n->a, soft);
    check_names(ps, n->b, frame_soft);
    check_names(ps, n->c, body_soft);
    check_names(ps, n->d, n->kind == N_FOR ? false : soft); /* a loop's else, and its filter */
    check_names(ps, n->e, n->kind == N_FOR ? false : soft);
    const bool args_soft = n->kind == N_MACRO || n->kind == N_CALL_BLOCK ? false : soft;
    for (int i = 0; i < n->args.n_pos; i++) check_names(ps, n->args.pos[i], args_soft);
    for (int i = 0; i < n->args.n_kw; i++) check_names(ps, n->args.kw[i], args_soft);
    check_names(ps, n->args.star, args_soft);
    check_names(ps, n->args.starstar, args_soft);
}

jinja_template *ty_jinja_parse(const char *text, size_t len, char *err, size_t err_size) {
    jinja_template *volatile t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, err_size, "no memory");
        return NULL;
    }
    /* newlines as \n, and no trailing one (jinja2's keep_trailing_newline=False) */
    char *src = ty_arena_alloc(&t->mem, len + 1);
    if (!src) {
        snprintf(err, err_size, "no memory");
        ty_jinja_free(t);
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else {
            src[n++] = text[i];
        }
    }
    if (n > 0 && src[n - 1] == '\n') n--;
    src[n] = 0;
    parser ps = {.mem = &t->mem, .src = src, .n = n, .err = err, .err_size = err_size, .where_line = 1, .where_col = 1};
    if (setjmp(ps.fail)) {
        free(ps.toks);
        ty_jinja_free(t);
        return NULL;
    }
    for (size_t i = 0; i < n;) {
        const size_t l = ty_utf8_valid_len((const unsigned char *)src + i, n - i);
        if (!l) {
            int line, col;
            where(&ps, i, &line, &col);
            fail_at(&ps, line, col, "the template is not valid UTF-8");
        }
        i += l;
    }
    lex(&ps);
    t->root = subparse(&ps, NULL);
    check_names(&ps, t->root, false);
    free(ps.toks);
    return t;
}

void ty_jinja_free(jinja_template *t) {
    if (!t) return;
    ty_arena_free(&t->mem);
    free(t);
}

bool ty_jinja_node_reads(const node *n, const char *name) {
    if (!n) return false;
    if (n->kind == N_NAME && !strcmp(n->name, name)) return true;
    if (ty_jinja_node_reads(n->a, name) || ty_jinja_node_reads(n->b, name) || ty_jinja_node_reads(n->c, name) ||
        ty_jinja_node_reads(n->d, name) || ty_jinja_node_reads(n->e, name))
        return true;
    for (int i = 0; i < n->args.n_pos; i++)
        if (ty_jinja_node_reads(n->args.pos[i], name)) return true;
    for (int i = 0; i < n->args.n_kw; i++)
        if (ty_jinja_node_reads(n->args.kw[i], name)) return true;
    return ty_jinja_node_reads(n->args.star, name) || ty_jinja_node_reads(n->args.starstar, name);
}

bool ty_jinja_reads(const jinja_template *t, const char *name) { return t && ty_jinja_node_reads(t->root, name); }
