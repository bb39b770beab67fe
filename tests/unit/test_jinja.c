/* test_jinja.c — the Jinja engine against outputs python3-jinja2 gave (configured as
 * transformers configures it) for templates that cover each construct, the errors with
 * their line and column, and hostile templates: each ends with an error naming the limit
 * it hit, never a hang or a crash. tests/python/jinja_diff.py compares far more cases
 * with python3-jinja2 itself, where it is installed. */
#include <jansson.h>

#include "jinja.h"
#include "test.h"

/* the variables of every case */
static const char *const VARS =
    "{\"s\": \"Hello World\", \"l\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1}, \"u\": \"ünï 東京\", \"msgs\": "
    "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": "
    "[{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}]}";

/* {template, what python3-jinja2 3.1 renders} */
static const char *const cases[][2] = {
    {"{{ s|upper }}|{{ s|title }}|{{ u|length }}|{{ u[1:3] }}|{{ s[::-1] }}",
     "HELLO WORLD|Hello World|6|nï|dlroW olleH"},
    {"{{ s.split() }}{{ '  a  b  '.split(None, 1) }}{{ 'a,b,,c'.split(',') }}{{ 'x y z'.rsplit(' ', 1) }}",
     "['Hello', 'World']['a', 'b  ']['a', 'b', '', 'c']['x y', 'z']"},
    {"{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ msgs|tojson(separators=(',', ':')) }}|{{ {'k': '\u00e9\\n\"\\u0001'}|tojson }}",
     "{\"b\": 2, \"a\": 1}|{\n  \"b\": 2,\n  \"a\": 1\n}|[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1}}}]}]|{\"k\": \"é\\n\\\"\\u0001\"}"},
    {"{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 0.00001 }} {{ 7 // -2 }} {{ 7 % -2 }} {{ 2 ** 10 }} {{ 10 / 4 }}",
     "1.0 0.30000000000000004 1e+16 1e-05 -4 -1 1024 2.5"},
    {"{{ [1, 'a', none, true, (1,), {'k': 1.5}] }}|{{ \"it's\" }}|{{ ['it\\'s \"q\"'] }}",
     "[1, 'a', None, True, (1,), {'k': 1.5}]|it's|['it\\'s \"q\"']"},
    {"{% for x in l %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.cycle('a', 'b') }};{% endfor %}",
     "12TrueFalsea;21FalseFalseb;30FalseTruea;"},
    {"{% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}{% for x in [] %}{% else %}empty{% endfor %}",
     "1/22/2empty"},
    {"{% set ns = namespace(n=0) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% set t = i %}{% endfor %}{{ ns.n }}{{ t is defined }}",
     "10False"},
    {"{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}",
     "1110"},
    {"{% macro m(a, b='B') %}[{{ a }}{{ b }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ m(1) }}{{ m(1, 2, 3, k=4) }}{% call m(0) %}{% endcall %}",
     "[1B(){}][12(3,){'k': 4}][0B(){'caller': <Macro anonymous>}]"},
    {"{% macro w() %}<{{ caller('x') }}>{% endmacro %}{% call(v) w() %}got {{ v }}{% endcall %}",
     "<got x>"},
    {"{% filter upper %}a{{ s }}{% endfilter %}|{% set b | trim %}  pad  {% endset %}[{{ b }}]",
     "AHELLO WORLD|[pad]"},
    {"{{ msgs|selectattr('role', 'equalto', 'user')|list|length }}|{{ msgs|map(attribute='role')|join(',') }}|{{ msgs|rejectattr('content')|list|length }}",
     "1|user,assistant|1"},
    {"{{ l|sort }}{{ l|sort(reverse=true) }}{{ d|dictsort }}{{ d.items()|list }}{{ l|max }}{{ l|sum }}{{ ['b', 'A']|sort }}{{ l|unique|list }}",
     "[1, 2, 3][3, 2, 1][('a', 1), ('b', 2)][('b', 2), ('a', 1)]36['A', 'b'][3, 1, 2]"},
    {"{{ 'a' in s }}{{ 3 in l }}{{ 'a' in d }}{{ 1 < 2 < 3 }}{{ 1 == 1.0 }}{{ none or 'x' }}{{ 0 and 1 }}{{ 'y' if none }}",
     "FalseTrueTrueTrueTruex0"},
    {"{{ msgs[1].tool_calls[0].function.arguments.x }}{{ msgs[0].tool_calls is defined }}{{ msgs[0].get('nope', 5) }}{{ msgs[5] is defined }}",
     "1False5False"},
    {"{{ '%s=%d %05.1f %r' % ('a', 3, 2.25, 'q') }}|{{ '{} {k}'.format(1, k=2) }}|{{ s|replace('o', '0', 1) }}|{{ 'ab'|center(6) }}|",
     "a=3 002.2 'q'|1 2|Hell0 World|  ab  |"},
    {"{{ 'x\\ny'|indent(2) }}|{{ 'x\\n\\ny'|indent(2, true, true) }}|{{ s|truncate(9) }}|{{ ' t '|trim }}|{{ '\u00df'|upper }}",
     "x\n  y|  x\n  \n  y|Hello World|t|SS"},
    {"a\n  {% if true %}\n  b\n  {% endif %}\nc {{- ' d ' -}} e {#- note -#} f\n{%+ if true %}g{% endif %}\n{% raw %}{{ x }}{% endraw %}",
     "a\n  b\nc d ef\ng{{ x }}"},
    {"{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "023"},
    {"{% for item in [{'n': 'a', 'c': [{'n': 'b', 'c': []}]}] recursive %}{{ item.n }}{{ loop.depth }}({{ loop(item.c) }}){% endfor %}",
     "a1(b2())"},
    /* an unknown filter or test in an if or a conditional expression fails only if it runs
     * (jinja2 defers it there: StepFun's `| fromjson if ... is string`) */
    {"{% if false %}{{ 'x' | fromjson }}{{ 1 is nosuch }}{% endif %}{{ ('x' | fromjson) if false else 'ok' }}"
     "{% for i in [1] %}{% if false %}{{ i | nope }}{% endif %}{% endfor %}",
     "ok"},
    {"{% with a = 2 %}{{ a * 3 }}{% endwith %}{{ a is defined }}{% set p, q = [1, 2] %}{{ p + q }}{{ range(1, 7, 2)|list }}{{ dict(k=1) }}",
     "6False3[1, 3, 5]{'k': 1}"},
};

/* renders text over VARS with limits: the output, or NULL with err */
static char *render(const char *text, const jinja_limits *lim, char *err, size_t n, bool *raised) {
    jinja_template *t = ty_jinja_parse(text, strlen(text), err, n);
    if (!t) return NULL;
    json_t *vars = json_loads(VARS, 0, NULL);
    size_t len;
    char *out = ty_jinja_render(t, vars, lim, &len, raised, err, n);
    json_decref(vars);
    ty_jinja_free(t);
    return out;
}

static void test_cases(void) {
    const jinja_limits lim = ty_jinja_default_limits();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[512];
        bool raised;
        char *out = render(cases[i][0], &lim, err, sizeof err, &raised);
        CHECK_MSG(out && !strcmp(out, cases[i][1]), "case %zu: %s\n  want: %s\n  got:  %s", i, cases[i][0], cases[i][1],
                  out ? out : err);
        free(out);
    }
}

/* a template that must fail, with message containing `want` */
static void expect_error(const char *text, const jinja_limits *lim, const char *want, bool want_raised) {
    char err[512] = "";
    bool raised = false;
    char *out = render(text, lim, err, sizeof err, &raised);
    CHECK_MSG(!out, "%s: rendered, expected an error with '%s'", text, want);
    free(out);
    CHECK_MSG(strstr(err, want), "%s: error '%s', expected '%s'", text, err, want);
    CHECK_EQ(raised, want_raised);
}

static void test_errors(void) {
    const jinja_limits lim = ty_jinja_default_limits();
    /* syntax errors: line and column */
    expect_error("a\n{% if x %}", &lim, "2:11: the template ended inside a 'if' block, which needs 'endif'", false);
    expect_error("{{ 1 +* 2 }}", &lim, "1:7: expected an expression", false);
    expect_error("x\n  {% frobnicate %}", &lim, "2:6: unknown tag 'frobnicate'", false);
    expect_error("{{ x|nofilter }}", &lim, "1:6: no filter named 'nofilter'", false);
    expect_error("{{ 'abc }}", &lim, "unterminated string", false);
    expect_error("{{ x is nosuchtest }}", &lim, "no test named 'nosuchtest'", false);
    /* the bodies of a loop, a set block, a macro, a filter block, a loop's else: frames of
     * their own, where an unknown name is an error again, inside an if or not */
    expect_error("{% if false %}{% for i in [1] %}{{ i | nope }}{% endfor %}{% endif %}", &lim,
                 "1:40: no filter named 'nope'", false);
    expect_error("{% if false %}{% set x %}{{ 1|nope }}{% endset %}{% endif %}", &lim, "no filter named 'nope'", false);
    expect_error("{% if false %}{% macro m() %}{{ 1|nope }}{% endmacro %}{% endif %}", &lim, "no filter named", false);
    expect_error("{% if false %}{% filter nope %}x{% endfilter %}{% endif %}", &lim, "no filter named", false);
    expect_error("{% if false %}{% for i in [] %}{% else %}{{ 1|nope }}{% endfor %}{% endif %}", &lim, "no filter",
                 false);
    expect_error("{% for x in [1] if x is nope %}{% endfor %}", &lim, "no test named 'nope'", false);
    /* and where it runs, at run time */
    expect_error("{% if true %}{{ 'x' | fromjson }}{% endif %}", &lim, "1:23: no filter named 'fromjson'", false);
    expect_error("{{ 1 if false else 2 | nope }}", &lim, "no filter named 'nope'", false);
    /* run-time errors name the node */
    expect_error("\n\n{{ nope.attr }}", &lim, "3:8: 'nope' is undefined", false);
    expect_error("{{ d.z.w }}", &lim, "'dict object' has no attribute 'z'", false);
    expect_error("{{ 1 + 'a' }}", &lim, "unsupported operand type(s) for +: 'int' and 'str'", false);
    expect_error("{{ 1 / 0 }}", &lim, "division by zero", false);
    expect_error("{{ raise_exception('roles must alternate') }}", &lim, "roles must alternate", true);
    /* the immutable sandbox: no writes, no private attributes */
    expect_error("{{ l.append(4) }}", &lim, "access to attribute 'append' of 'list' object is unsafe.", false);
    expect_error("{{ d.update({}) }}", &lim, "access to attribute 'update' of 'dict' object is unsafe.", false);
    expect_error("{{ s.__class__.__mro__ }}", &lim, "access to attribute '__class__' of 'str' object is unsafe.", false);
    char err[512];
    bool raised;
    char *out = render("[{{ s.__class__ }}{{ l._private }}]", &lim, err, sizeof err, &raised);
    CHECK_MSG(out && !strcmp(out, "[]"), "private attributes print as undefined: %s", out ? out : err);
    free(out);
}

static void test_limits(void) {
    jinja_limits lim = ty_jinja_default_limits();
    lim.max_steps = 200000;
    lim.max_memory = (size_t)16 << 20;
    lim.max_output = (size_t)1 << 20;
    lim.max_depth = 50;
    /* loops that do not end within the steps */
    expect_error("{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", &lim,
                 "more than 200000 steps", false);
    /* unbounded recursion */
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &lim, "nested more than 50 levels", false);
    /* huge strings and output */
    expect_error("{{ 'x' * 100000000 }}", &lim, "MiB of memory", false);
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", &lim,
                 "MiB of memory", false);
    expect_error("{% for i in range(100000) %}{{ 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy' }}{% endfor %}", &lim,
                 "wrote more than 1048576 bytes", false);
    /* jinja2's sandbox: MAX_RANGE */
    expect_error("{{ range(1000000)|length }}", &lim, "Range too big", false);
    /* deep nesting in the text itself is refused at the parse, not on the C stack */
    static char deep[40000];
    size_t n = 0;
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ ");
    for (int i = 0; i < 5000; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 5000; i++) deep[n++] = ')';
    snprintf(deep + n, sizeof deep - n, " }}");
    expect_error(deep, &lim, "nested", false);
}

int main(void) {
    test_cases();
    test_errors();
    test_limits();
    return test_finish("test_jinja");
}
