/* test_json_schema.c — JSON Schema to GBNF (src/grammar/json_schema.c).
 *
 * A table of schemas: the errors invalid or unsupported ones give (the JSON pointer and
 * what is wrong), pieces of the grammar valid ones give, and that every grammar is well
 * formed (rules defined once, every rule named is defined, names under the root's) and
 * compiles with toy_grammar_new. A second table: JSON texts each schema's grammar must
 * accept and ones it must refuse (toy_grammar_accepts).
 *
 * The binary is also the driver of tests/python/json_schema_check.py (cli_json_schema.sh):
 *   test_json_schema --gbnf [--strict]   schema on stdin, grammar on stdout
 *   test_json_schema --has-engine        exit 0 when toy's grammar engine is linked in
 *   test_json_schema --accepts           stdin: grammar \0 text \0 text ...; one 1 or 0 a text */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema.h"
#include "test.h"
#include "toy.h"

/* ---------------------------------------------------------------- well-formed GBNF */

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* Every line "name ::= body"; names defined once, under prefix; every name a body uses
 * is defined; literals, classes and counts closed. NULL when fine, else what is wrong. */
static const char *check_gbnf(const char *g, const char *prefix, char *why, size_t why_size) {
    enum { MAX_RULES = 4096 };
    static char names[MAX_RULES][128];
    int n = 0;
    size_t plen = strlen(prefix);
    for (const char *line = g; *line;) {
        const char *end = strchr(line, '\n');
        if (!end) return snprintf(why, why_size, "the last line has no newline"), why;
        const char *sep = strstr(line, " ::= ");
        if (!sep || sep > end) return snprintf(why, why_size, "a line without ::=: %.60s", line), why;
        size_t len = (size_t)(sep - line);
        if (len == 0 || len >= 128 || n == MAX_RULES) return snprintf(why, why_size, "a bad rule name"), why;
        for (size_t i = 0; i < len; i++)
            if (!name_char(line[i])) return snprintf(why, why_size, "bad rule name %.*s", (int)len, line), why;
        if (strncmp(line, prefix, plen) || (len > plen && line[plen] != '-'))
            return snprintf(why, why_size, "rule %.*s is not under %s", (int)len, line, prefix), why;
        memcpy(names[n], line, len);
        names[n][len] = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], names[n])) return snprintf(why, why_size, "rule %.100s defined twice", names[n]), why;
        n++;
        line = end + 1;
    }
    for (const char *line = g; *line;) {
        const char *end = strchr(line, '\n');
        const char *p = strstr(line, " ::= ") + 5;
        int depth = 0;
        while (p < end) {
            if (*p == '"' || *p == '[') {
                char close = *p == '"' ? '"' : ']';
                for (p++; p < end && *p != close; p++)
                    if (*p == '\\') p++;
                if (p >= end) return snprintf(why, why_size, "an unclosed literal or class: %.80s", line), why;
                p++;
            } else if (*p == '{') {
                while (p < end && *p != '}') p++;
                if (p >= end) return snprintf(why, why_size, "an unclosed count: %.80s", line), why;
                p++;
            } else if (name_char(*p)) {
                const char *q = p;
                while (q < end && name_char(*q)) q++;
                bool found = false;
                for (int i = 0; i < n && !found; i++)
                    found = strlen(names[i]) == (size_t)(q - p) && !strncmp(names[i], p, (size_t)(q - p));
                if (!found) return snprintf(why, why_size, "undefined rule %.*s", (int)(q - p), p), why;
                p = q;
            } else {
                if (*p == '(') depth++;
                if (*p == ')') depth--;
                if (depth < 0 || !strchr(" ()|*+?", *p))
                    return snprintf(why, why_size, "unexpected '%c' in %.80s", *p, line), why;
                p++;
            }
        }
        if (depth) return snprintf(why, why_size, "unbalanced parentheses in %.80s", line), why;
        line = end + 1;
    }
    return NULL;
}

/* ---------------------------------------------------------------- the table */

typedef struct {
    const char *schema;
    bool strict;
    const char *error;    /* a substring of the error, NULL when it converts */
    const char *want[4];  /* substrings of the grammar */
} schema_case;

static const schema_case cases[] = {
    /* the output language */
    {"{\"type\":\"string\"}", true, NULL,
     {"root ::= root-string\n", "root-string ::= \"\\\"\" root-char* \"\\\"\" root-space\n", "root-space ::= ( \" \" | \"\\n\"{1,2} [ \\t]{0,20} )?\n",
      "root-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"}},
    {"{\"type\":\"number\"}", true, NULL,
     {"root ::= root-number\n", "root-number ::= \"-\"? root-integral-part ( \".\" root-decimal-part )? ( [eE] [-+]? root-integral-part )? root-space\n",
      "root-integral-part ::= \"0\" | [1-9] [0-9]{0,15}\n"}},
    {"{\"type\":\"integer\",\"minimum\":-15,\"maximum\":1234}", true, NULL,
     {"root ::= ( \"-\" ( [1-9] | \"1\" [0-5] ) | [0-9] | ( [1-9] [0-9] ) | ( [1-9] [0-9]{2} ) | \"1\" ( [0-1] [0-9]{2} | "
      "[2] ( [0-2] [0-9] | [3] [0-4] ) ) ) root-space\n"}},
    {"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", true, NULL,
     {"root ::= ( ( \"0\" ) ( \".\" [0-9]{1,14} )? | \"1\" ( \".\" \"0\"{1,14} )? ) root-space\n"}},
    {"{\"type\":\"number\",\"exclusiveMinimum\":-3,\"exclusiveMaximum\":2}", true, NULL,
     {"root ::= ( ( [0-1] ) ( \".\" [0-9]{1,14} )? | \"-\" ( ( [1-2] ) ( \".\" [0-9]{1,14} )? | \"0\" \".\" [0-9]{0,13} "
      "[1-9] ) ) root-space\n"}},
    {"{\"type\":\"number\",\"minimum\":0.5}", false, NULL, {"root ::= ( ( [0-9] |"}},
    {"{\"type\":\"number\",\"exclusiveMinimum\":5,\"exclusiveMaximum\":5}", false, "#: no number is between the bounds", {NULL}},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":0}", true, NULL,
     {"root ::= ( [1-9] | ( [1-9] [0-9] ) | ( [1-9] [0-9]{2} ) |"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":5}", true, NULL, {"root ::= \"\\\"\" root-char{2,5} \"\\\"\" root-space\n"}},
    {"{\"type\":\"string\",\"maxLength\":0}", true, NULL, {"root ::= \"\\\"\" \"\\\"\" root-space\n"}},
    {"{\"type\":[\"boolean\",\"null\"]}", true, NULL, {"root ::= root-boolean | root-null\n"}},
    {"{\"enum\":[\"a\\\"b\",1.5,null,{\"k\":[true]}]}", true, NULL,
     {"root ::= ( \"\\\"a\\\\\\\"b\\\"\" | \"1.5\" | \"null\" | \"{\\\"k\\\":[true]}\" ) root-space\n"}},
    {"{\"const\":42,\"title\":\"t\",\"description\":\"d\",\"$schema\":\"x\",\"$id\":\"y\",\"default\":1,\"examples\":[1],"
     "\"$comment\":\"c\"}",
     true, NULL, {"root ::= \"42\" root-space\n"}},
    {"{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\"},\"a\":{\"type\":\"string\"}},\"required\":[\"b\",\"a\"]}",
     true, NULL,
     {"root ::= \"{\" root-space ( root-b-kv \",\" root-space root-a-kv ) \"}\" root-space\n",
      "root-b-kv ::= \"\\\"b\\\"\" root-space \":\" root-space root-integer\n"}},
    {"{\"properties\":{\"x\":{},\"y\":{}},\"required\":[\"y\"]}", true, NULL,
     {"root ::= \"{\" root-space ( root-x-kv root-rest-1 | root-y-kv ) \"}\" root-space\n",
      "root-rest-1 ::= \",\" root-space root-y-kv\n"}},
    {"{\"type\":\"object\",\"properties\":{\"and\":{},\"also\":{}},\"additionalProperties\":{\"type\":\"null\"}}", true, NULL,
     {"root-additional-key ::= \"\\\"\" ( [a] ( [l] ( [s] ( [o] root-key-char+ | [^\"\\\\\\x00-\\x1Fo] root-key-char* )? | "
      "[^\"\\\\\\x00-\\x1Fs] root-key-char* )? | [n] ( [d] root-key-char+ | [^\"\\\\\\x00-\\x1Fd] root-key-char* )? | "
      "[^\"\\\\\\x00-\\x1Fln] root-key-char* )? | [^\"\\\\\\x00-\\x1Fa] root-key-char* )? \"\\\"\" root-space\n",
      "root-additional-kv ::= root-additional-key \":\" root-space root-null\n"}},
    {"{\"type\":\"object\"}", true, NULL, {"root ::= root-object\n"}},
    {"{\"properties\":{\"名前\":{\"type\":\"string\",\"maxLength\":2}},\"required\":[\"名前\"]}", true, NULL,
     {"root ::= \"{\" root-space ( root-x-kv ) \"}\" root-space\n",
      "root-x-kv ::= \"\\\"名前\\\"\" root-space \":\" root-space root-x\n"}},
    {"{}", true, NULL, {"root ::= root-value\n", "root-value ::= root-object | root-array | root-string | root-number | "
                                                 "root-boolean | root-null\n"}},
    {"true", true, NULL, {"root ::= root-value\n"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":4}", true, NULL,
     {"root ::= \"[\" root-space root-integer ( \",\" root-space root-integer ){1,3} \"]\" root-space\n"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", true, NULL,
     {"root ::= \"[\" root-space root-string \",\" root-space root-null \"]\" root-space\n"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":\"null\"},\"maxItems\":3}", true, NULL,
     {"root ::= \"[\" root-space root-string ( \",\" root-space root-null ){0,2} \"]\" root-space\n"}},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", true, NULL, {"root ::= root-string | root-integer\n"}},
    {"{\"oneOf\":[{\"const\":1},{\"const\":2}]}", true, NULL, {"root ::= root-0 | root-1\n", "root-1 ::= \"2\" root-space\n"}},
    {"{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},{\"properties\":{\"b\":{\"type\":"
     "\"integer\"}}}]}",
     true, NULL, {"root ::= \"{\" root-space ( root-a-kv ( \",\" root-space root-b-kv )? ) \"}\" root-space\n"}},
    {"{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"}}}}},"
     "\"$ref\":\"#/$defs/t\"}",
     true, NULL, {"root ::= root-defs-t\n", "root-defs-t-kids ::= \"[\" root-space ( root-defs-t ( \",\" root-space root-defs-t )* )? \"]\" root-space\n"}},
    {"{\"definitions\":{\"d\":{\"type\":\"string\",\"format\":\"date\"}},\"$ref\":\"#/definitions/d\"}", true, NULL,
     {"root-definitions-d ::= root-date-string\n", "root-date-string ::= \"\\\"\" root-date \"\\\"\" root-space\n"}},
    {"{\"type\":\"string\",\"format\":\"uuid\"}", true, NULL, {"root ::= root-uuid\n"}},
    {"{\"type\":\"string\",\"format\":\"date-time\"}", true, NULL, {"root-date-time ::= root-date \"T\" root-time\n"}},
    {"{\"type\":\"string\",\"format\":\"email\"}", false, NULL, {"root ::= root-string\n"}},
    {"{\"type\":\"string\",\"pattern\":\"^a\\\\d{2,}[x-z\\\\\\\"]?(?:b|c)*$\"}", true, NULL,
     {"root ::= \"\\\"\" \"a\" [0-9]{2,} ( [x-z] | \"\\\\\\\"\" )? ( \"b\" | \"c\" )* \"\\\"\" root-space\n"}},
    {"{\"type\":\"string\",\"pattern\":\"ab\"}", true, NULL, {"root ::= \"\\\"\" root-char* \"ab\" root-char* \"\\\"\" root-space\n"}},
    {"{\"type\":\"integer\",\"multipleOf\":3}", false, NULL, {"root ::= root-integer\n"}},

    /* invalid schemas: errors with or without strict */
    {"{\"type\": }", false, "invalid JSON at line 1, column 10", {NULL}},
    {"{\"type\":\"string\",\"type\":\"integer\"}", false, "invalid JSON at line 1", {NULL}},
    {"123", false, "#: a schema must be an object or a boolean", {NULL}},
    {"false", false, "#: the schema false matches no value", {NULL}},
    {"{\"type\":\"strin\"}", false, "#/type: type must be a type name or an array of type names", {NULL}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"string\",7]}}}", false,
     "#/properties/a/type: type must be a type name", {NULL}},
    {"{\"minLength\":5,\"maxLength\":2}", false, "#/minLength: minLength 5 is greater than maxLength 2", {NULL}},
    {"{\"type\":\"array\",\"minItems\":-1}", false, "#/minItems: minItems must be a non-negative integer", {NULL}},
    {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":1}", false, "#/minItems: minItems 3 is greater than maxItems 1", {NULL}},
    {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":3}", false, "#/minimum: minimum 5 is greater than maximum 3", {NULL}},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":3,\"exclusiveMaximum\":4}", false, "#: no integer is between the bounds 4 and 3", {NULL}},
    {"{\"$ref\":\"#/$defs/missing\"}", false, "#/$ref: unresolved $ref \"#/$defs/missing\"", {NULL}},
    {"{\"type\":\"object\",\"properties\":{\"a b\":{\"$ref\":\"#/definitions/x\"}}}", false,
     "#/properties/a b/$ref: unresolved $ref \"#/definitions/x\"", {NULL}},
    {"{\"$ref\":\"https://example.com/s.json\"}", false, "only local references", {NULL}},
    {"{\"$defs\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"},{\"type\":\"null\"}]}},\"$ref\":\"#/$defs/a\"}", false,
     "#/$defs/a/anyOf/0/$ref: $ref \"#/$defs/a\" refers to itself before any input (left recursion)", {NULL}},
    {"{\"enum\":[]}", false, "#/enum: enum must be a non-empty array", {NULL}},
    {"{\"type\":\"string\",\"enum\":[1,2]}", false, "#/enum: no value of enum is of the schema's type", {NULL}},
    {"{\"required\":\"a\"}", false, "#/required: required must be an array of strings", {NULL}},
    {"{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}", false,
     "#/properties/a: property \"a\" is required but its schema is false", {NULL}},
    {"{\"type\":\"object\",\"required\":[\"z\"],\"properties\":{},\"additionalProperties\":false}", false,
     "#/required: \"z\" is required but is not in properties and additionalProperties is false", {NULL}},
    {"{\"type\":\"array\",\"items\":false,\"minItems\":1}", false, "#/minItems: minItems 1 needs more items", {NULL}},
    {"{\"allOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", false, "#/allOf: the schemas of allOf have no type in common", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}", false, "#/pattern: the group (?=a at offset 2 of the pattern is not supported", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", false, "#/pattern: the escape \\1 at offset 4 of the pattern is not supported", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"a\\\\bc\"}", false, "#/pattern: the word boundary \\b", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"a(b\"}", false, "#/pattern: an unbalanced '('", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"a)\"}", false, "#/pattern: an unbalanced ')'", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"[z-a]\"}", false, "#/pattern: the range at offset 4 of the pattern is reversed", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"a**\"}", false, "#/pattern: a quantifier after a quantifier", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"^(a|[^b]*)+$\"}", false,
     "#/pattern: repeating a group that can match the empty string at offset 10 of the pattern is not supported", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"^(a?b*){2,}$\"}", false, "repeating a group that can match the empty string", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"^(a|){2,3}(b?)?$\"}", false, NULL,
     {"root ::= \"\\\"\" ( ( \"a\" )? ){2,3} ( \"b\"? )? \"\\\"\" root-space\n"}},
    {"{\"type\":\"string\",\"pattern\":\"a^b\"}", false, "#/pattern: '^' after the start of the pattern", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"\\\\p{L}\"}", false, "#/pattern: the escape \\p", {NULL}},

    /* unsupported under strict, ignored without */
    {"{\"type\":\"string\",\"multipleOf\":3}", true, "#/multipleOf: unsupported keyword \"multipleOf\"", {NULL}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"uniqueItems\":true}}}", true,
     "#/properties/a/uniqueItems: unsupported keyword \"uniqueItems\"", {NULL}},
    {"{\"type\":\"string\",\"format\":\"email\"}", true, "#/format: format \"email\" is not supported", {NULL}},
    {"{\"type\":\"number\",\"minimum\":0.5}", true, "#/minimum: minimum 0.5: bounds with a fraction are supported on type integer only", {NULL}},
    {"{\"type\":\"string\",\"pattern\":\"^a$\",\"maxLength\":3}", true, "#/pattern: pattern together with minLength", {NULL}},
    {"{\"anyOf\":[{\"type\":\"integer\"}],\"oneOf\":[{\"type\":\"integer\"}]}", true, "#/oneOf: anyOf together with oneOf", {NULL}},
    {"{\"type\":\"string\",\"enum\":[\"abc\"],\"maxLength\":2}", true, "#/maxLength: \"maxLength\" beside enum or const is not supported", {NULL}},
    {"{\"type\":\"string\",\"enum\":[\"abc\"],\"maxLength\":2}", false, NULL, {"root ::= \"\\\"abc\\\"\" root-space\n"}},
};

static void check_case(const schema_case *k) {
    char *g = NULL;
    toy_status st = toy_json_schema_to_gbnf(k->schema, k->strict, &g);
    if (k->error) {
        CHECK_MSG(st != TOY_OK, "%s converted, expected \"%s\":\n%s", k->schema, k->error, g ? g : "");
        if (st != TOY_OK) CHECK_STR_CONTAINS(toy_last_error(), k->error);
        CHECK(g == NULL);
        free(g);
        return;
    }
    CHECK_MSG(st == TOY_OK, "%s (strict %d): %s", k->schema, k->strict, toy_last_error());
    if (st != TOY_OK) return;
    char why[256];
    const char *bad = check_gbnf(g, "root", why, sizeof why);
    CHECK_MSG(bad == NULL, "%s: %s\n%s", k->schema, bad, g);
    CHECK_MSG(!strncmp(g, "root ::= ", 9), "%s: the grammar does not begin with root", k->schema);
    toy_grammar *gr = NULL;
    CHECK_MSG(toy_grammar_new(NULL, g, &gr) == TOY_OK, "%s: toy_grammar_new: %s\n%s", k->schema, toy_last_error(), g);
    toy_grammar_free(gr);
    for (int i = 0; i < 4 && k->want[i]; i++)
        CHECK_MSG(strstr(g, k->want[i]) != NULL, "%s: missing\n  %s\nin\n%s", k->schema, k->want[i], g);
    /* the same schema gives the same bytes */
    char *again = NULL;
    CHECK(toy_json_schema_to_gbnf(k->schema, k->strict, &again) == TOY_OK);
    CHECK(again && !strcmp(g, again));
    free(again);
    free(g);
}

/* Several conversions in one grammar text: each under its own root. */
static void check_shared_text(void) {
    ty_buf out = {0};
    char err[256];
    json_t *a = json_loads("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}},\"required\":[\"x\"]}", 0, NULL);
    json_t *b = json_loads("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":3}}", 0, NULL);
    CHECK(ty_json_schema_gbnf(a, true, "tool-0", &out, err, sizeof err));
    CHECK(ty_json_schema_gbnf(b, true, "tool-1", &out, err, sizeof err));
    CHECK(ty_json_schema_gbnf_any_object("obj", &out));
    ty_buf all = {0};
    ty_buf_append(&all, "root ::= tool-0 | tool-1 | obj\n", 31);
    ty_buf_append(&all, out.v, out.n);
    char why[256];
    /* every rule is root, tool-0..., tool-1... or obj...: check each prefix's lines */
    const char *bad = NULL;
    for (const char *line = all.v; *line && !bad;) {
        const char *end = strchr(line, '\n');
        bool ok = !strncmp(line, "root ::= ", 9) || !strncmp(line, "tool-0", 6) || !strncmp(line, "tool-1", 6) ||
                  !strncmp(line, "obj", 3);
        if (!ok) bad = line;
        line = end + 1;
    }
    CHECK_MSG(bad == NULL, "a rule outside the roots: %.60s", bad);
    CHECK_STR_CONTAINS(out.v, "tool-0 ::= \"{\" tool-0-space ( tool-0-x-kv ) \"}\" tool-0-space\n");
    CHECK_STR_CONTAINS(out.v, "obj ::= obj-object\n");
    CHECK_STR_CONTAINS(out.v, "tool-1-item ::= ( [3-9] |");
    (void)why;
    CHECK(!ty_json_schema_gbnf(a, true, "bad name", &out, err, sizeof err));
    CHECK_STR_CONTAINS(err, "root rule name must match [a-zA-Z0-9-]+");
    json_decref(a);
    json_decref(b);
    free(out.v);
    free(all.v);
}

/* Nesting beyond the limit is an error, not a stack overflow. */
static void check_deep(void) {
    ty_buf s = {0};
    char *g = NULL;
    for (int depth = 100; depth <= 5000; depth += 4900) {
        s.n = 0;
        for (int i = 0; i < depth; i++) ty_buf_append(&s, "{\"items\":", 9);
        ty_buf_append(&s, "{}", 2);
        for (int i = 0; i < depth; i++) ty_buf_append(&s, "}", 1);
        toy_status st = toy_json_schema_to_gbnf(s.v, false, &g);
        CHECK(st == TOY_ERR_INVALID || st == TOY_ERR_UNSUPPORTED);
        /* jansson stops the deeper one while parsing */
        CHECK_STR_CONTAINS(toy_last_error(), depth == 100 ? "#/items/items/items" : "maximum parsing depth");
        CHECK_STR_CONTAINS(toy_last_error(), depth == 100 ? "nested deeper than 64" : "invalid JSON at line 1");
    }
    free(s.v);
    free(g);
    CHECK(toy_json_schema_to_gbnf(NULL, false, &g) == TOY_ERR_INVALID);
}

/* Mutated schemas from the table (keywords spliced in after a '{', bytes dropped): each
 * converts to a well-formed grammar or fails with a message, in both modes. */
static void check_mutations(void) {
    static const char *const snippets[] = {
        "\"items\":{},", "\"$ref\":\"#\",", "\"$ref\":\"#/properties\",", "\"anyOf\":[{},{\"type\":\"null\"}],",
        "\"allOf\":[{\"required\":[\"q\"]}],", "\"pattern\":\"^(a|[^b-d]*)+?$\",", "\"enum\":[1,\"x\",[]],",
        "\"type\":[\"integer\",\"string\"],", "\"minimum\":-7.5,", "\"maximum\":1e300,", "\"maxLength\":3,",
        "\"additionalProperties\":{\"type\":\"array\"},", "\"prefixItems\":[true,false],", "\"const\":{\"a\":null},",
        "\"format\":\"date\",", "\"properties\":{\"\":{}},", "\"required\":[\"\",\"~/\"],", "\"oneOf\":[{\"$ref\":\"#\"}],",
    };
    unsigned long long seed = 42;
    int converted = 0, refused = 0;
    ty_buf m = {0};
    for (int it = 0; it < 3000; it++) {
        const char *base = cases[test_rand_u64(&seed) % (sizeof cases / sizeof cases[0])].schema;
        size_t n = strlen(base);
        m.n = 0;
        ty_buf_append(&m, base, n);
        for (int k = 1 + (int)(test_rand_u64(&seed) % 3); k > 0; k--) {
            size_t at = (size_t)(test_rand_u64(&seed) % (m.n + 1));
            if (test_rand_u64(&seed) % 4 == 0 && m.n) { /* drop a byte */
                if (at == m.n) at--;
                memmove(m.v + at, m.v + at + 1, m.n - at);
                m.n--;
                continue;
            }
            const char *brace = memchr(m.v + at, '{', m.n - at);
            if (!brace) continue;
            size_t pos = (size_t)(brace - m.v) + 1;
            const char *sn = snippets[test_rand_u64(&seed) % (sizeof snippets / sizeof snippets[0])];
            size_t sl = strlen(sn);
            if (m.v[pos] == '}') sl--; /* no trailing comma before '}' */
            ty_buf_append(&m, sn, sl); /* grow, then move into place */
            memmove(m.v + pos + sl, m.v + pos, m.n - sl - pos);
            memcpy(m.v + pos, sn, sl);
        }
        for (int strict = 0; strict < 2; strict++) {
            char *g = NULL;
            toy_status st = toy_json_schema_to_gbnf(m.v, strict, &g);
            if (st == TOY_OK) {
                char why[256];
                const char *bad = check_gbnf(g, "root", why, sizeof why);
                CHECK_MSG(bad == NULL, "%s: %s", m.v, bad);
                toy_grammar *gr = NULL;
                CHECK_MSG(toy_grammar_new(NULL, g, &gr) == TOY_OK, "%s: %s", m.v, toy_last_error());
                toy_grammar_free(gr);
                converted++;
            } else {
                CHECK_MSG(!strncmp(toy_last_error(), "JSON schema", 11), "%s: %s", m.v, toy_last_error());
                CHECK(st == TOY_ERR_INVALID || st == TOY_ERR_UNSUPPORTED);
                refused++;
            }
            free(g);
        }
    }
    free(m.v);
    CHECK_MSG(converted > 1000 && refused > 1000, "converted %d, refused %d", converted, refused);
}

/* ---------------------------------------------------------------- membership */

typedef struct {
    const char *schema;
    const char *accept[8]; /* JSON texts in the grammar */
    const char *refuse[8]; /* and not */
} member_case;

static const member_case members[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":3},\"age\":{\"type\":\"integer\","
     "\"minimum\":-15,\"maximum\":1234}},\"required\":[\"name\"]}",
     {"{\"name\":\"abc\"}", "{ \"name\" : \"\" , \"age\" : -15 }", "{\"name\":\"\\n\\u00e9\",\"age\":1234}\n  ",
      "{\n\t\"name\": \"\\\"\"}", NULL},
     {"{}", "{\"name\":\"abcd\"}", "{\"name\":\"a\",\"age\":1235}", "{\"name\":\"a\",\"age\":-16}",
      "{\"age\":1,\"name\":\"a\"}", "{\"name\":\"a\",\"x\":1}", " {\"name\":\"a\"}", "{\"name\":\"a\",\"age\":01}"}},
    {"{\"type\":\"integer\",\"minimum\":-15,\"maximum\":1234}",
     {"-15", "-9", "0", "9", "10", "999", "1000", "1234"},
     {"-16", "-0", "1235", "2000", "01", "12345", "1.0", "-"}},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":99}",
     {"100", "101", "9999999999999999", NULL}, {"99", "0", "-100", "10000000000000000", NULL}},
    {"{\"type\":\"number\",\"minimum\":0,\"exclusiveMaximum\":10}",
     {"0", "0.5", "9.99", "3", NULL}, {"10", "10.0", "-0.5", "1e3", "-1", NULL}},
    {"{\"type\":\"number\"}",
     {"0", "-0", "1.5", "-2.25e-7", "6E+23", NULL}, {"01", ".5", "1.", "+1", "1e", "00.1", NULL}},
    {"{\"type\":[\"string\",\"null\"],\"minLength\":1}",
     {"\"a\"", "null", "\"\\/\"", NULL}, {"\"\"", "nul", "\"\\x\"", "\"a\nb\"", NULL}},
    {"{\"enum\":[\"red\",7,null,{\"a\":[1,2]}]}",
     {"\"red\"", "7", "null", "{\"a\":[1,2]}", NULL}, {"\"blue\"", "7.0", "{\"a\": [1,2]}", NULL}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{"
     "\"type\":\"integer\"}},\"required\":[\"b\"]}",
     {"{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"b\":2,\"c\":3}", "{\"a\":1,\"b\":2,\"c\":3}", NULL},
     {"{\"a\":1}", "{\"a\":1,\"c\":3}", "{\"c\":1,\"b\":2}", "{\"b\":1,}", NULL}},
    {"{\"type\":\"object\",\"properties\":{\"and\":{\"type\":\"null\"},\"also\":{\"type\":\"null\"}},"
     "\"additionalProperties\":{\"type\":\"integer\"}}",
     {"{\"and\":null,\"an\":1,\"andy\":2}", "{\"a\":1}", "{\"\":3,\"als\":4,\"alsoo\":5}", "{}", NULL},
     {"{\"and\":1}", "{\"x\":1,\"and\":null}", "{\"also\":2}", "{\"z\":null}", NULL}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":{\"type\":"
     "\"boolean\"},\"maxItems\":3}",
     {"[1,\"a\"]", "[ 1 , \"a\" , true ]", NULL}, {"[1]", "[]", "[1,\"a\",true,false]", "[\"a\",1]", NULL}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}",
     {"[1,2]", "[1,2,3]", NULL}, {"[1]", "[1,2,3,4]", "[1,,2]", NULL}},
    {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{"
     "\"$ref\":\"#/$defs/n\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/n\"}",
     {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3,\"next\":null}}}", NULL},
     {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2}}", NULL}},
    {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},{"
     "\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}",
     {"{\"a\":1,\"b\":\"x\"}", NULL}, {"{\"a\":1}", "{\"b\":\"x\"}", NULL}},
    {"{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]{1,3}(-\\\\d+)?$\"}",
     {"\"Ab\"", "\"Abcd-12\"", NULL}, {"\"ab\"", "\"A\"", "\"Abcde\"", "\"Ab-\"", NULL}},
    {"{\"type\":\"string\",\"pattern\":\"^a.c$\"}",
     {"\"abc\"", "\"a\\\"c\"", "\"a\\\\c\"", "\"a\\tc\"", "\"aéc\"", NULL}, {"\"a\\nc\"", "\"ac\"", "\"a\"c\"", NULL}},
    {"{\"type\":\"string\",\"pattern\":\"ab\"}", {"\"ab\"", "\"xxabyy\"", NULL}, {"\"a b\"", "\"\"", NULL}},
    {"{\"type\":\"string\",\"format\":\"date\"}",
     {"\"2024-02-29\"", "\"2000-02-29\"", "\"1999-12-31\"", "\"2023-04-30\"", NULL},
     {"\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\"", "\"2023-13-01\"", "\"0000-01-01\"", NULL}},
    {"{\"type\":\"string\",\"format\":\"date-time\"}",
     {"\"2024-02-29T12:30:00Z\"", "\"2024-02-29T23:59:59.123+05:30\"", NULL},
     {"\"2024-02-29 12:30:00Z\"", "\"2024-02-29T24:00:00Z\"", "\"2024-02-29T12:30:00\"", NULL}},
    {"{\"type\":\"string\",\"format\":\"uuid\"}",
     {"\"123e4567-e89b-12d3-a456-426614174000\"", NULL}, {"\"123e4567-e89b-12d3-a456-42661417400\"", NULL}},
    {"{}", {"1", "\"x\"", "[1,{\"a\":null}]", "{\"k\":[true,false]}", NULL}, {"", "[1,]", "{\"a\"}", "tru", NULL}},
    {"{\"type\":\"boolean\"}", {"true", "false ", "true\n\n    ", "false\n\t", NULL}, {"true\n\n\n", "false  ", "True", NULL}},
};

static void check_members(void) {
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
        const member_case *m = &members[i];
        toy_grammar *g = NULL;
        toy_status st = toy_grammar_from_json_schema(NULL, m->schema, true, &g);
        CHECK_MSG(st == TOY_OK, "%s: %s", m->schema, toy_last_error());
        if (st != TOY_OK) continue;
        for (int k = 0; k < 8 && m->accept[k]; k++)
            CHECK_MSG(toy_grammar_accepts(g, m->accept[k], strlen(m->accept[k])), "%s: refused %s", m->schema, m->accept[k]);
        for (int k = 0; k < 8 && m->refuse[k]; k++)
            CHECK_MSG(!toy_grammar_accepts(g, m->refuse[k], strlen(m->refuse[k])), "%s: accepted %s", m->schema,
                      m->refuse[k]);
        toy_grammar_free(g);
    }
    /* the grammar for response_format json_object: any object, nothing else */
    ty_buf out = {0};
    CHECK(ty_json_schema_gbnf_any_object("root", &out));
    toy_grammar *g = NULL;
    CHECK(toy_grammar_new(NULL, out.v, &g) == TOY_OK);
    static const char *const objects[] = {"{}", "{\"a\":[1,{\"b\":null}],\"c\":\"d\"}", "{ \"x\" : -1.5e3 }"};
    static const char *const others[] = {"[]", "1", "\"{}\"", "{\"a\":}", "{1:2}"};
    for (size_t k = 0; g && k < 3; k++) CHECK_MSG(toy_grammar_accepts(g, objects[k], strlen(objects[k])), "refused %s", objects[k]);
    for (size_t k = 0; g && k < 5; k++) CHECK_MSG(!toy_grammar_accepts(g, others[k], strlen(others[k])), "accepted %s", others[k]);
    toy_grammar_free(g);
    free(out.v);
}

/* ---------------------------------------------------------------- driver modes */

static char *read_stdin(size_t *len) {
    ty_buf b = {0};
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, stdin)) > 0) ty_buf_append(&b, tmp, n);
    if (!b.v) ty_buf_append(&b, "", 0);
    *len = b.n;
    return b.v;
}

static int driver(int argc, char **argv) {
    if (!strcmp(argv[1], "--gbnf")) {
        size_t len;
        char *schema = read_stdin(&len);
        char *g = NULL;
        toy_status st = toy_json_schema_to_gbnf(schema, argc > 2 && !strcmp(argv[2], "--strict"), &g);
        free(schema);
        if (st != TOY_OK) {
            fprintf(stderr, "%s\n", toy_last_error());
            return 2;
        }
        fputs(g, stdout);
        free(g);
        return 0;
    }
    if (!strcmp(argv[1], "--has-engine")) return 0;
    if (!strcmp(argv[1], "--accepts")) {
        size_t len;
        char *in = read_stdin(&len);
        toy_grammar *g = NULL;
        if (toy_grammar_new(NULL, in, &g) != TOY_OK) {
            fprintf(stderr, "%s\n", toy_last_error());
            free(in);
            return 2;
        }
        for (size_t at = strlen(in) + 1; at <= len; at += strlen(in + at) + 1)
            printf("%d\n", toy_grammar_accepts(g, in + at, strlen(in + at)) ? 1 : 0);
        toy_grammar_free(g);
        free(in);
        return 0;
    }
    fprintf(stderr, "usage: test_json_schema [--gbnf [--strict] | --has-engine | --accepts]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc > 1) return driver(argc, argv);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    check_shared_text();
    check_deep();
    check_mutations();
    check_members();
    return test_finish("test_json_schema");
}
