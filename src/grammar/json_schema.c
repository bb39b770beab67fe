/* json_schema.c — JSON Schema to GBNF (json_schema.h; docs/json-schema.md for users).
 *
 * Each schema node becomes one grammar expression, and a node with structure gets a rule
 * named after where it is (root-address-city). The JSON texts accepted follow llama.cpp's
 * json-schema-to-grammar: whitespace of one space or up to two newlines and 20 blanks
 * after each token, at most 16 integer digits, properties in the schema's order,
 * additional properties after the declared ones. Bounded whitespace and digits keep a
 * sampler that follows the grammar from running away on a random model. The rules and
 * GBNF text are json_schema_rules.c's, integer and number ranges json_schema_numbers.c's,
 * "pattern" json_schema_pattern.c's. */
#include "json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "json_schema_internal.h"
#include "toy.h"

/* ---------------------------------------------------------------- JSON values as text */

/* The compact JSON text of a value (const and enum): keys in their order, numbers in the
 * shortest form that reads back the same. */
static void put_json(ty_buf *b, const json_t *v);

static void put_json_string(ty_buf *b, const char *s, size_t n) {
    ty_js_put_quoted(b, s, n, true);
}

static void put_json(ty_buf *b, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: ty_js_put(b, "null"); break;
    case JSON_TRUE: ty_js_put(b, "true"); break;
    case JSON_FALSE: ty_js_put(b, "false"); break;
    case JSON_INTEGER: ty_js_putf(b, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: {
        double x = json_real_value(v);
        char tmp[64];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(tmp, sizeof tmp, "%.*g", prec, x);
            if (strtod(tmp, NULL) == x) break;
        }
        ty_js_put(b, tmp);
        break;
    }
    case JSON_STRING: put_json_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY: {
        ty_js_put(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) ty_js_put(b, ",");
            put_json(b, json_array_get(v, i));
        }
        ty_js_put(b, "]");
        break;
    }
    case JSON_OBJECT: {
        ty_js_put(b, "{");
        const char *k;
        const json_t *x;
        bool first = true;
        json_object_foreach((json_t *)v, k, x) {
            if (!first) ty_js_put(b, ",");
            first = false;
            put_json_string(b, k, strlen(k));
            ty_js_put(b, ":");
            put_json(b, x);
        }
        ty_js_put(b, "}");
        break;
    }
    }
}

/* ---------------------------------------------------------------- keywords */

typedef enum { KW_ANNOTATION, KW_ANY, KW_OBJECT, KW_ARRAY, KW_STRING, KW_NUMBER } kw_kind;

static const struct {
    const char *name;
    kw_kind kind;
} keywords[] = {
    {"title", KW_ANNOTATION}, {"description", KW_ANNOTATION}, {"$schema", KW_ANNOTATION},
    {"$id", KW_ANNOTATION}, {"default", KW_ANNOTATION}, {"examples", KW_ANNOTATION},
    {"$comment", KW_ANNOTATION}, {"deprecated", KW_ANNOTATION}, {"readOnly", KW_ANNOTATION},
    {"writeOnly", KW_ANNOTATION}, {"$defs", KW_ANNOTATION}, {"definitions", KW_ANNOTATION},
    {"type", KW_ANY}, {"enum", KW_ANY}, {"const", KW_ANY}, {"anyOf", KW_ANY}, {"oneOf", KW_ANY},
    {"allOf", KW_ANY}, {"$ref", KW_ANY},
    {"properties", KW_OBJECT}, {"required", KW_OBJECT}, {"additionalProperties", KW_OBJECT},
    {"items", KW_ARRAY}, {"prefixItems", KW_ARRAY}, {"minItems", KW_ARRAY}, {"maxItems", KW_ARRAY},
    {"minLength", KW_STRING}, {"maxLength", KW_STRING}, {"pattern", KW_STRING}, {"format", KW_STRING},
    {"minimum", KW_NUMBER}, {"maximum", KW_NUMBER}, {"exclusiveMinimum", KW_NUMBER},
    {"exclusiveMaximum", KW_NUMBER},
};

/* The keyword's kind, or -1 when toy does not support it. */
static int keyword_kind(const char *key) {
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
        if (!strcmp(keywords[i].name, key)) return (int)keywords[i].kind;
    return -1;
}

enum { T_OBJECT = 1, T_ARRAY = 2, T_STRING = 4, T_NUMBER = 8, T_INTEGER = 16, T_BOOLEAN = 32, T_NULL = 64 };
static const char *const type_names[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

static int type_bit(const char *name) {
    for (int i = 0; i < 7; i++)
        if (!strcmp(type_names[i], name)) return 1 << i;
    return 0;
}

/* A count (minLength, maxItems, ...): a non-negative integer; 3.0 is one too. */
static bool get_count(conv *c, const json_t *s, const char *key, long long *out) {
    const json_t *v = json_object_get(s, key);
    if (!v) return false;
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = json_integer_value(v);
        return true;
    }
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 9e15 &&
        floor(json_real_value(v)) == json_real_value(v)) {
        *out = (long long)json_real_value(v);
        return true;
    }
    return ty_js_fail_at(c, TOY_ERR_INVALID, key, "%s must be a non-negative integer", key);
}

/* Checks every keyword of a schema object: unknown ones (strict), values of the wrong
 * type, minimums above maximums. */
static bool check_keywords(conv *c, const json_t *s) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        int kind = keyword_kind(k);
        if (kind < 0) {
            if (c->strict) return ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, k, "unsupported keyword \"%s\"", k);
            continue;
        }
        bool ok = true;
        const char *want = NULL;
        if (!strcmp(k, "type")) {
            want = "a type name or an array of type names";
            if (json_is_string(v)) {
                ok = type_bit(json_string_value(v)) != 0;
            } else if (json_is_array(v) && json_array_size(v)) {
                for (size_t i = 0; i < json_array_size(v); i++)
                    ok = ok && json_is_string(json_array_get(v, i)) &&
                         type_bit(json_string_value(json_array_get(v, i)));
            } else {
                ok = false;
            }
        } else if (!strcmp(k, "enum") || !strcmp(k, "anyOf") || !strcmp(k, "oneOf") || !strcmp(k, "allOf")) {
            want = "a non-empty array";
            ok = json_is_array(v) && json_array_size(v) > 0;
        } else if (!strcmp(k, "prefixItems")) {
            want = "an array of schemas";
            ok = json_is_array(v);
        } else if (!strcmp(k, "$ref") || !strcmp(k, "pattern") || !strcmp(k, "format")) {
            want = "a string";
            ok = json_is_string(v);
        } else if (!strcmp(k, "properties") || !strcmp(k, "$defs") || !strcmp(k, "definitions")) {
            want = "an object";
            ok = json_is_object(v);
        } else if (!strcmp(k, "required")) {
            want = "an array of strings";
            ok = json_is_array(v);
            for (size_t i = 0; ok && i < json_array_size(v); i++) ok = json_is_string(json_array_get(v, i));
        } else if (!strcmp(k, "additionalProperties")) {
            want = "a schema";
            ok = json_is_object(v) || json_is_boolean(v);
        } else if (!strcmp(k, "items")) {
            want = "a schema or an array of schemas";
            ok = json_is_object(v) || json_is_boolean(v) || json_is_array(v);
        } else if (!strcmp(k, "minimum") || !strcmp(k, "maximum")) {
            want = "a number";
            ok = json_is_number(v);
        } else if (!strcmp(k, "exclusiveMinimum") || !strcmp(k, "exclusiveMaximum")) {
            want = "a number"; /* or, as in draft 4, a boolean */
            ok = json_is_number(v) || json_is_boolean(v);
        } else if (!strcmp(k, "minLength") || !strcmp(k, "maxLength") || !strcmp(k, "minItems") ||
                   !strcmp(k, "maxItems")) {
            long long n;
            if (!get_count(c, s, k, &n)) return false;
        }
        if (!ok) return ty_js_fail_at(c, TOY_ERR_INVALID, k, "%s must be %s", k, want);
    }
    long long lo, hi;
    if (get_count(c, s, "minLength", &lo) && get_count(c, s, "maxLength", &hi) && lo > hi)
        return ty_js_fail_at(c, TOY_ERR_INVALID, "minLength", "minLength %lld is greater than maxLength %lld", lo, hi);
    if (get_count(c, s, "minItems", &lo) && get_count(c, s, "maxItems", &hi) && lo > hi)
        return ty_js_fail_at(c, TOY_ERR_INVALID, "minItems", "minItems %lld is greater than maxItems %lld", lo, hi);
    const json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    if (mn && mx && json_number_value(mn) > json_number_value(mx))
        return ty_js_fail_at(c, TOY_ERR_INVALID, "minimum", "minimum %g is greater than maximum %g", json_number_value(mn),
                       json_number_value(mx));
    return c->status == TOY_OK;
}

/* Whether a schema object has keywords beyond annotations and those named in skip. */
static bool has_constraints(const json_t *s, const char *const *skip) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        int kind = keyword_kind(k);
        if (kind == KW_ANNOTATION || kind < 0) continue;
        bool skipped = false;
        for (const char *const *p = skip; *p; p++) skipped = skipped || !strcmp(*p, k);
        if (!skipped) return true;
    }
    return false;
}

/* ---------------------------------------------------------------- $ref */

/* The schema a local $ref ("#", "#/$defs/a", any JSON pointer into the document) names. */
static const json_t *resolve_ref(conv *c, const char *ref) {
    if (ref[0] != '#')
        return ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, "$ref", "$ref \"%.200s\" is not supported: only local references (#/...) are",
                       ref), NULL;
    const json_t *t = c->doc;
    const char *p = ref + 1;
    if (*p && *p != '/') return ty_js_fail_at(c, TOY_ERR_INVALID, "$ref", "$ref \"%.200s\" is not a JSON pointer", ref), NULL;
    while (*p == '/') {
        p++;
        char tok[256];
        size_t n = 0;
        for (; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1')) ch = p[1] == '0' ? '~' : '/', p++;
            else if (ch == '%' && p[1] && p[2]) {
                char hex[3] = {p[1], p[2], 0};
                char *end;
                long x = strtol(hex, &end, 16);
                if (*end == 0) ch = (char)x, p += 2;
            }
            if (n + 1 >= sizeof tok) return ty_js_fail_at(c, TOY_ERR_INVALID, "$ref", "$ref \"%.200s\" is too long", ref), NULL;
            tok[n++] = ch;
        }
        tok[n] = 0;
        if (json_is_object(t)) {
            t = json_object_get(t, tok);
        } else if (json_is_array(t)) {
            char *end;
            unsigned long long i = strtoull(tok, &end, 10);
            t = (*tok && *end == 0) ? json_array_get(t, (size_t)i) : NULL;
        } else {
            t = NULL;
        }
        if (!t) return ty_js_fail_at(c, TOY_ERR_INVALID, "$ref", "unresolved $ref \"%.200s\"", ref), NULL;
    }
    return t;
}

/* ---------------------------------------------------------------- allOf */

static bool visit_body(conv *c, const json_t *s, const char *hint, ty_buf *body);
static const char *visit(conv *c, const json_t *s, const char *hint);

static json_t *own(conv *c, json_t *j) {
    if (!j) return ty_js_oom(c), NULL;
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? c->cap_owned * 2 : 16;
        json_t **o = realloc(c->owned, cap * sizeof *o);
        if (!o) {
            json_decref(j);
            return ty_js_oom(c), NULL;
        }
        c->owned = o;
        c->cap_owned = cap;
    }
    c->owned[c->n_owned++] = j;
    return j;
}

/* The types both lists allow, in a's order (integer where one says number). */
static json_t *type_intersection(const json_t *a, const json_t *b) {
    json_t *la = json_is_string(a) ? json_pack("[O]", a) : json_incref((json_t *)a);
    json_t *lb = json_is_string(b) ? json_pack("[O]", b) : json_incref((json_t *)b);
    json_t *out = json_array();
    if (!la || !lb || !out) goto done;
    int mb = 0;
    for (size_t i = 0; i < json_array_size(lb); i++) mb |= type_bit(json_string_value(json_array_get(lb, i)));
    for (size_t i = 0; i < json_array_size(la); i++) {
        int t = type_bit(json_string_value(json_array_get(la, i)));
        if ((t & mb) || (t == T_INTEGER && (mb & T_NUMBER)))
            json_array_append_new(out, json_string(type_names[__builtin_ctz((unsigned)t)]));
        else if (t == T_NUMBER && (mb & T_INTEGER)) json_array_append_new(out, json_string("integer"));
    }
done:
    json_decref(la);
    json_decref(lb);
    return out;
}

/* Merges the constraints of src into dst (an allOf): properties and required are joined,
 * bounds take the tighter, types and enums intersect. */
static bool merge_into(conv *c, json_t *dst, const json_t *src) {
    if (json_is_true(src)) return true;
    if (json_is_false(src)) return ty_js_fail_at(c, TOY_ERR_INVALID, "allOf", "allOf contains false, which no value matches");
    if (!json_is_object(src)) return ty_js_fail_at(c, TOY_ERR_INVALID, "allOf", "a schema must be an object or a boolean");
    if (++c->depth > MAX_DEPTH) return ty_js_fail(c, TOY_ERR_UNSUPPORTED, "schemas nested deeper than %d (or a $ref cycle)", MAX_DEPTH);
    bool ok = check_keywords(c, src);
    const json_t *ref = json_object_get(src, "$ref");
    if (ok && ref) {
        const json_t *t = resolve_ref(c, json_string_value(ref));
        ok = t && merge_into(c, dst, t);
    }
    const json_t *all = json_object_get(src, "allOf");
    for (size_t i = 0; ok && i < json_array_size(all); i++) ok = merge_into(c, dst, json_array_get(all, i));
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)src, k, v) {
        if (!ok) break;
        int kind = keyword_kind(k);
        if (kind < 0 || kind == KW_ANNOTATION || !strcmp(k, "$ref") || !strcmp(k, "allOf")) continue;
        json_t *old = json_object_get(dst, k);
        if (!old) {
            json_t *copy = (!strcmp(k, "properties") || !strcmp(k, "required")) ? json_copy((json_t *)v)
                                                                                 : json_incref((json_t *)v);
            if (!copy || json_object_set_new(dst, k, copy)) ok = ty_js_oom(c);
        } else if (!strcmp(k, "properties")) {
            const char *p;
            json_t *ps;
            json_object_foreach((json_t *)v, p, ps) {
                json_t *prev = json_object_get(old, p);
                json_t *nv = prev ? json_pack("{s:[O,O]}", "allOf", prev, ps) : json_incref(ps);
                if (!nv || json_object_set_new(old, p, nv)) ok = ty_js_oom(c);
            }
        } else if (!strcmp(k, "required")) {
            for (size_t i = 0; i < json_array_size(v); i++) {
                bool have = false;
                for (size_t j = 0; j < json_array_size(old); j++)
                    have = have || json_equal(json_array_get(old, j), json_array_get(v, i));
                if (!have && json_array_append(old, json_array_get(v, i))) ok = ty_js_oom(c);
            }
        } else if (!strcmp(k, "type")) {
            json_t *t = type_intersection(old, v);
            if (!t) ok = ty_js_oom(c);
            else if (!json_array_size(t))
                json_decref(t), ok = ty_js_fail_at(c, TOY_ERR_INVALID, "allOf", "the schemas of allOf have no type in common");
            else if (json_object_set_new(dst, k, t)) ok = ty_js_oom(c);
        } else if (!strcmp(k, "enum")) {
            json_t *e = json_array();
            for (size_t i = 0; e && i < json_array_size(old); i++)
                for (size_t j = 0; j < json_array_size(v); j++)
                    if (json_equal(json_array_get(old, i), json_array_get(v, j))) {
                        json_array_append(e, json_array_get(old, i));
                        break;
                    }
            if (!e) ok = ty_js_oom(c);
            else if (!json_array_size(e))
                json_decref(e), ok = ty_js_fail_at(c, TOY_ERR_INVALID, "allOf", "no value is in every enum of allOf");
            else if (json_object_set_new(dst, k, e)) ok = ty_js_oom(c);
        } else if (json_equal(old, (json_t *)v)) {
            continue;
        } else if (!strcmp(k, "const")) {
            ok = ty_js_fail_at(c, TOY_ERR_INVALID, "allOf", "the schemas of allOf have different consts");
        } else if (json_is_number(old) && json_is_number(v) &&
                   (!strncmp(k, "min", 3) || !strncmp(k, "max", 3) || !strncmp(k, "exclusive", 9))) {
            bool lower = !strncmp(k, "min", 3) || !strcmp(k, "exclusiveMinimum");
            double a = json_number_value(old), b = json_number_value(v);
            if (lower ? b > a : b < a) ok = !json_object_set(dst, k, (json_t *)v) || ty_js_oom(c);
        } else if (c->strict) {
            ok = ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, "allOf", "the schemas of allOf set \"%s\" differently, which is not supported", k);
        } /* else the first schema's value stays: the grammar accepts more than the schema */
    }
    c->depth--;
    return ok && c->status == TOY_OK;
}

/* ---------------------------------------------------------------- strings */

static bool string_body(conv *c, const json_t *s, ty_buf *b) {
    const json_t *fmt = json_object_get(s, "format"), *pattern = json_object_get(s, "pattern");
    long long min = 0, max = -1;
    bool has_min = get_count(c, s, "minLength", &min), has_max = get_count(c, s, "maxLength", &max);
    if (c->status != TOY_OK) return false;
    if (fmt) {
        static const struct {
            const char *name;
            prim_id id;
        } formats[] = {{"date", PRIM_DATE_STRING}, {"time", PRIM_TIME_STRING}, {"date-time", PRIM_DATE_TIME_STRING},
                       {"uuid", PRIM_UUID}};
        const char *f = json_string_value(fmt);
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
            if (strcmp(f, formats[i].name)) continue;
            if (c->strict && (pattern || has_min || has_max))
                return ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, "format",
                               "format together with pattern, minLength or maxLength is not supported");
            return ty_js_put_prim(c, b, formats[i].id);
        }
        if (c->strict)
            return ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, "format",
                           "format \"%.100s\" is not supported (date, time, date-time and uuid are)", f);
    }
    if (pattern) {
        if (c->strict && (has_min || has_max))
            return ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, "pattern", "pattern together with minLength or maxLength is not supported");
        return ty_js_pattern_body(c, json_string_value(pattern), b);
    }
    if (!has_min && !has_max) return ty_js_put_prim(c, b, PRIM_STRING);
    const char *ch = ty_js_prim(c, PRIM_CHAR);
    if (!ch) return false;
    ty_js_put(b, "\"\\\"\" ");
    if (max != 0) ty_js_put_rep(b, ch, min, max), ty_js_put(b, " ");
    ty_js_put(b, "\"\\\"\" ");
    return ty_js_put_prim(c, b, PRIM_SPACE);
}

/* ---------------------------------------------------------------- objects */

/* A trie of property names, for the keys additional properties may have. */
typedef struct trie {
    uint32_t cp;
    bool end;
    struct trie *kids;
    size_t n_kids;
} trie;

static void trie_free(trie *t) {
    for (size_t i = 0; i < t->n_kids; i++) trie_free(&t->kids[i]);
    free(t->kids);
}

static bool trie_insert(trie *t, const char *s) {
    const size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp = ty_js_utf8_next(s, &i, n);
        if (cp < 0x20 || cp == '"' || cp == '\\') return true; /* not writable without escapes */
        size_t k = 0;
        while (k < t->n_kids && t->kids[k].cp < cp) k++;
        if (k == t->n_kids || t->kids[k].cp != cp) {
            trie *nk = realloc(t->kids, (t->n_kids + 1) * sizeof *nk);
            if (!nk) return false;
            t->kids = nk;
            memmove(&t->kids[k + 1], &t->kids[k], (t->n_kids - k) * sizeof *nk);
            memset(&t->kids[k], 0, sizeof *nk);
            t->kids[k].cp = cp;
            t->n_kids++;
        }
        t = &t->kids[k];
    }
    t->end = true;
    return true;
}

/* Non-empty continuations after t that do not spell a name of the trie. */
static void put_not_trie(ty_buf *b, const trie *t, const char *kc) {
    for (size_t i = 0; i < t->n_kids; i++) {
        const trie *k = &t->kids[i];
        ty_js_put(b, "[");
        ty_js_put_class_char(b, k->cp);
        ty_js_put(b, "]");
        if (k->n_kids) {
            ty_js_put(b, " ( ");
            put_not_trie(b, k, kc);
            ty_js_put(b, k->end ? " )" : " )?");
        } else {
            ty_js_putf(b, " %s+", kc);
        }
        ty_js_put(b, " | ");
    }
    ty_js_put(b, "[^\"\\\\\\x00-\\x1F");
    for (size_t i = 0; i < t->n_kids; i++) ty_js_put_class_char(b, t->kids[i].cp);
    ty_js_putf(b, "] %s*", kc);
}

typedef struct {
    const char *key;
    const char *kv; /* its rule */
    bool required;
} prop;

/* One member, key: value, value being its value's rule (NULL: a failure already
 * reported): its rule (the key as a JSON string, the colon between spaces, the value's
 * rule), named after hint, goes into *item; false on failure. */
static bool add_member(conv *c, prop *item, const char *hint, const char *key, bool required,
                       const char *value, const char *sp) {
    if (!value) return false;
    ty_buf kv = {0}, k = {0};
    put_json_string(&k, key, strlen(key));
    if (k.oom) kv.oom = true;
    else ty_js_put_lit(&kv, k.v, k.n);
    free(k.v);
    ty_js_putf(&kv, " %s \":\" %s ", sp, sp);
    ty_js_put(&kv, value);
    char kh[HINT_MAX + 48];
    snprintf(kh, sizeof kh, "%s-kv", hint);
    const long r = kv.oom ? (ty_js_oom(c), -1) : ty_js_add_rule(c, kh, kv.v);
    free(kv.v);
    if (r < 0) return false;
    *item = (prop){.key = key, .kv = c->rules[r].name, .required = required};
    return true;
}

static bool object_body(conv *c, const json_t *s, const char *hint, ty_buf *b) {
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    const json_t *addl = json_object_get(s, "additionalProperties");
    /* no properties and no additionalProperties: any object; with properties, additional
       ones only when additionalProperties allows them */
    if (!props && !addl && !req) return ty_js_put_prim(c, b, PRIM_OBJECT);
    bool any_addl = (!props && !addl) || json_is_true(addl);
    const json_t *addl_schema = json_is_object(addl) ? addl : NULL;
    size_t cap = json_object_size(props) + json_array_size(req) + 1;
    prop *items = calloc(cap, sizeof *items);
    trie names = {0};
    if (!items) return ty_js_oom(c);
    size_t n = 0;
    bool ok = true;
    const char *sp = ty_js_prim(c, PRIM_SPACE);
    ok = sp != NULL;
    c->consumed++;
    const char *key;
    const json_t *ps;
    size_t old = ty_js_path_push(c, "properties");
    json_object_foreach((json_t *)props, key, ps) {
        if (!ok) break;
        bool required = false;
        for (size_t i = 0; i < json_array_size(req); i++)
            required = required || !strcmp(json_string_value(json_array_get(req, i)), key);
        if (!trie_insert(&names, key)) ok = ty_js_oom(c);
        if (json_is_false(ps)) { /* the property must be absent */
            if (required) ok = ty_js_fail_at(c, TOY_ERR_INVALID, key, "property \"%.100s\" is required but its schema is false", key);
            continue;
        }
        char h[HINT_MAX + 32];
        ty_js_make_hint(h, sizeof h, hint, key);
        size_t o2 = ty_js_path_push(c, key);
        const char *value = ok ? visit(c, ps, h) : NULL;
        ty_js_path_pop(c, o2);
        if (!add_member(c, &items[n], h, key, required, value, sp)) {
            ok = false;
            break;
        }
        n++;
    }
    ty_js_path_pop(c, old);
    /* required names that properties lack: present, with a value additionalProperties allows */
    for (size_t i = 0; ok && i < json_array_size(req); i++) {
        const char *k = json_string_value(json_array_get(req, i));
        bool seen = json_object_get(props, k) != NULL;
        for (size_t j = 0; j < i && !seen; j++) seen = !strcmp(json_string_value(json_array_get(req, j)), k);
        if (seen) continue;
        if (json_is_false(addl)) {
            ok = ty_js_fail_at(c, TOY_ERR_INVALID, "required",
                         "\"%.100s\" is required but is not in properties and additionalProperties is false", k);
            break;
        }
        if (!trie_insert(&names, k)) ok = ty_js_oom(c);
        char h[HINT_MAX + 32];
        ty_js_make_hint(h, sizeof h, hint, k);
        const char *value;
        if (addl_schema) {
            size_t o2 = ty_js_path_push(c, "additionalProperties");
            value = visit(c, addl_schema, h);
            ty_js_path_pop(c, o2);
        } else {
            value = ty_js_prim(c, PRIM_VALUE);
        }
        if (!add_member(c, &items[n], h, k, true, value, sp)) {
            ok = false;
            break;
        }
        n++;
    }
    /* additional properties: after the named ones, keys other than theirs */
    const char *addl_kv = NULL;
    if (ok && (any_addl || addl_schema)) {
        char h[HINT_MAX + 32], kh[HINT_MAX + 48];
        ty_js_make_hint(h, sizeof h, hint, "additional");
        const char *value;
        if (addl_schema) {
            char vh[HINT_MAX + 48];
            snprintf(vh, sizeof vh, "%s-value", h);
            size_t o2 = ty_js_path_push(c, "additionalProperties");
            value = visit(c, addl_schema, vh);
            ty_js_path_pop(c, o2);
        } else {
            value = ty_js_prim(c, PRIM_VALUE);
        }
        const char *key_rule = NULL;
        if (value && !names.n_kids && !names.end) {
            key_rule = ty_js_prim(c, PRIM_STRING);
        } else if (value) {
            const char *kc = ty_js_prim(c, PRIM_KEY_CHAR);
            ty_buf kb = {0};
            if (kc) {
                ty_js_put(&kb, "\"\\\"\" ( ");
                put_not_trie(&kb, &names, kc);
                ty_js_put(&kb, names.end ? " )" : " )?");
                ty_js_putf(&kb, " \"\\\"\" %s", sp);
                snprintf(kh, sizeof kh, "%s-key", h);
                long r = kb.oom ? (ty_js_oom(c), -1) : ty_js_add_rule(c, kh, kb.v);
                key_rule = r < 0 ? NULL : c->rules[r].name;
            }
            free(kb.v);
        }
        if (key_rule) {
            ty_buf kv = {0};
            ty_js_putf(&kv, "%s \":\" %s ", key_rule, sp);
            ty_js_put(&kv, value);
            snprintf(kh, sizeof kh, "%s-kv", h);
            long r = kv.oom ? (ty_js_oom(c), -1) : ty_js_add_rule(c, kh, kv.v);
            free(kv.v);
            addl_kv = r < 0 ? NULL : c->rules[r].name;
        }
        ok = addl_kv != NULL;
    }
    c->consumed--;
    trie_free(&names);
    if (!ok) {
        free(items);
        return false;
    }
    /* The members in order: a required one always, an optional one maybe, then any number
       of additional ones. `first` is how far the first member written may be: up to the
       first required one. Each member after it is written after a comma; the rest of the
       list from a possible first member on is a rule, so the text grows linearly. */
    size_t first = 0;
    while (first < n && !items[first].required) first++;
    size_t n_alt = first < n ? first + 1 : n + (addl_kv ? 1 : 0);
    bool can_be_empty = first == n;
    ty_buf body = {0};
    ty_js_put(&body, "\"{\" ");
    ty_js_put(&body, sp);
    /* tail(j): the members j.. each after a comma */
    char **tails = calloc(n + 2, sizeof *tails);
    if (!tails) {
        free(items);
        return ty_js_oom(c);
    }
    for (size_t j = n + 1; j-- > 0 && ok;) {
        ty_buf t = {0};
        if (j == n) {
            if (addl_kv) ty_js_putf(&t, "( \",\" %s %s )*", sp, addl_kv);
        } else {
            ty_js_putf(&t, items[j].required ? "\",\" %s %s" : "( \",\" %s %s )?", sp, items[j].kv);
            if (tails[j + 1] && *tails[j + 1]) ty_js_put(&t, " "), ty_js_put(&t, tails[j + 1]);
        }
        if (t.oom) ok = ty_js_oom(c);
        /* tails up to the first required member are referred to twice: rules */
        if (ok && t.n && j >= 1 && j <= first && n_alt > 1) {
            char th[HINT_MAX + 48];
            snprintf(th, sizeof th, "%s-rest-%zu", hint, j);
            long r = ty_js_add_rule(c, th, t.v);
            free(t.v);
            t.v = r < 0 ? NULL : strdup(c->rules[r].name);
            if (!t.v) ok = ty_js_oom(c);
        }
        tails[j] = t.v ? t.v : strdup("");
        if (!tails[j]) ok = ty_js_oom(c);
    }
    if (ok && n_alt) {
        ty_js_put(&body, " ( ");
        for (size_t a = 0; a < n_alt; a++) {
            if (a) ty_js_put(&body, " | ");
            if (a < n) {
                ty_js_put(&body, items[a].kv);
                if (*tails[a + 1]) ty_js_put(&body, " "), ty_js_put(&body, tails[a + 1]);
            } else {
                ty_js_putf(&body, "%s ( \",\" %s %s )*", addl_kv, sp, addl_kv);
            }
        }
        ty_js_put(&body, can_be_empty ? " )?" : " )");
    }
    ty_js_putf(&body, " \"}\" %s", sp);
    for (size_t j = 0; j < n + 2; j++) free(tails[j]);
    free(tails);
    free(items);
    if (body.oom) ok = ty_js_oom(c);
    if (ok) ty_js_put(b, body.v);
    free(body.v);
    return ok;
}

/* ---------------------------------------------------------------- arrays */

static bool array_body(conv *c, const json_t *s, const char *hint, ty_buf *b) {
    const json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
    if (json_is_array(items)) { /* draft 4's tuples */
        if (prefix) return ty_js_fail_at(c, TOY_ERR_INVALID, "items", "items is an array and prefixItems is present");
        prefix = items;
        items = NULL;
    }
    long long min = 0, max = -1;
    get_count(c, s, "minItems", &min);
    get_count(c, s, "maxItems", &max);
    if (c->status != TOY_OK) return false;
    long long n_prefix = (long long)json_array_size(prefix);
    /* the whole tuple is written (cut at maxItems); then items' schema, or when items is
       absent after a tuple, any values only as far as minItems asks */
    long long n_tuple = max >= 0 && max < n_prefix ? max : n_prefix;
    long long emin = min > n_tuple ? min - n_tuple : 0;
    long long emax = max < 0 ? -1 : max - n_tuple;
    if (json_is_false(items)) {
        if (emin > 0)
            return ty_js_fail_at(c, TOY_ERR_INVALID, "minItems",
                           "minItems %lld needs more items than prefixItems has, and items is false", min);
        emax = 0;
    } else if (!items && prefix) {
        emax = emin;
    }
    const char *sp = ty_js_prim(c, PRIM_SPACE);
    if (!sp) return false;
    c->consumed++;
    ty_buf body = {0};
    ty_js_putf(&body, "\"[\" %s", sp);
    bool ok = true;
    for (long long i = 0; ok && i < n_tuple; i++) {
        char h[HINT_MAX + 32], what[32];
        snprintf(what, sizeof what, "tuple-%lld", i);
        ty_js_make_hint(h, sizeof h, hint, what);
        size_t o = ty_js_path_push(c, json_object_get(s, "prefixItems") ? "prefixItems" : "items");
        ty_js_path_push_index(c, (size_t)i);
        const char *r = visit(c, json_array_get(prefix, (size_t)i), h);
        ty_js_path_pop(c, o);
        if (!r) ok = false;
        else if (i) ty_js_putf(&body, " \",\" %s %s", sp, r);
        else ty_js_putf(&body, " %s", r);
    }
    if (ok && emax != 0) {
        const char *item;
        if (items) {
            char h[HINT_MAX + 32];
            ty_js_make_hint(h, sizeof h, hint, "item");
            size_t o = ty_js_path_push(c, "items");
            item = visit(c, items, h);
            ty_js_path_pop(c, o);
        } else {
            item = ty_js_prim(c, PRIM_VALUE);
        }
        ok = item != NULL;
        if (ok && n_tuple) {
            ty_buf g = {0};
            ty_js_putf(&g, "( \",\" %s %s )", sp, item);
            ty_js_put(&body, " ");
            if (g.oom) ok = ty_js_oom(c);
            else ty_js_put_rep(&body, g.v, emin, emax);
            free(g.v);
        } else if (ok) {
            /* item ( "," item ){emin-1,emax-1}, optional when emin is 0 */
            ty_buf g = {0};
            ty_js_putf(&g, "( \",\" %s %s )", sp, item);
            ty_js_put(&body, emin ? " " : " ( ");
            ty_js_put(&body, item);
            if (emax != 1) ty_js_put(&body, " "), ty_js_put_rep(&body, g.v, emin ? emin - 1 : 0, emax < 0 ? -1 : emax - 1);
            if (!emin) ty_js_put(&body, " )?");
            if (g.oom) ok = ty_js_oom(c);
            free(g.v);
        }
    }
    c->consumed--;
    ty_js_putf(&body, " \"]\" %s", sp);
    if (body.oom) ok = ty_js_oom(c);
    if (ok) ty_js_put(b, body.v);
    free(body.v);
    return ok;
}

/* ---------------------------------------------------------------- schemas */

/* The type bits a value has (integral reals count as integers too). */
static int value_types(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return T_OBJECT;
    case JSON_ARRAY: return T_ARRAY;
    case JSON_STRING: return T_STRING;
    case JSON_INTEGER: return T_INTEGER | T_NUMBER;
    case JSON_REAL: return T_NUMBER | (floor(json_real_value(v)) == json_real_value(v) ? T_INTEGER : 0);
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOLEAN;
    case JSON_NULL: return T_NULL;
    }
    return 0;
}

/* const and enum: the values' JSON text, those of the schema's types. */
static bool constant_body(conv *c, const json_t *s, int types, ty_buf *b) {
    const json_t *k = json_object_get(s, "const"), *e = json_object_get(s, "enum");
    const char *sp = ty_js_prim(c, PRIM_SPACE);
    if (!sp) return false;
    if (k) {
        if (e) {
            bool in = false;
            for (size_t i = 0; i < json_array_size(e); i++) in = in || json_equal((json_t *)k, json_array_get(e, i));
            if (!in) return ty_js_fail_at(c, TOY_ERR_INVALID, "const", "const is not one of enum's values");
        }
        if (!(value_types(k) & types)) return ty_js_fail_at(c, TOY_ERR_INVALID, "const", "const is not of the schema's type");
        ty_buf t = {0};
        put_json(&t, k);
        if (!t.oom) ty_js_put_lit(b, t.v, t.n);
        free(t.v);
        ty_js_putf(b, " %s", sp);
        return !t.oom || ty_js_oom(c);
    }
    ty_buf alts = {0};
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(e); i++) {
        const json_t *v = json_array_get(e, i);
        if (!(value_types(v) & types)) continue;
        ty_buf t = {0};
        put_json(&t, v);
        if (n++) ty_js_put(&alts, " | ");
        if (t.oom) alts.oom = true;
        else ty_js_put_lit(&alts, t.v, t.n);
        free(t.v);
    }
    bool ok = !alts.oom || ty_js_oom(c);
    if (ok && !n) ok = ty_js_fail_at(c, TOY_ERR_INVALID, "enum", "no value of enum is of the schema's type");
    if (ok) {
        if (n > 1) ty_js_put(b, "( ");
        ty_js_put(b, alts.v);
        ty_js_put(b, n > 1 ? " ) " : " ");
        ty_js_put(b, sp);
    }
    free(alts.v);
    return ok;
}

/* The body for one type of a schema. */
static bool type_body(conv *c, const json_t *s, int t, const char *hint, ty_buf *b) {
    switch (t) {
    case T_NULL: return ty_js_put_prim(c, b, PRIM_NULL);
    case T_BOOLEAN: return ty_js_put_prim(c, b, PRIM_BOOLEAN);
    case T_INTEGER: return ty_js_integer_body(c, s, b);
    case T_NUMBER: return ty_js_number_body(c, s, b);
    case T_STRING: return string_body(c, s, b);
    case T_OBJECT: return object_body(c, s, hint, b);
    case T_ARRAY: return array_body(c, s, hint, b);
    }
    return false;
}

/* The types a schema allows, in its order: "type", or else what its keywords imply
 * (properties: object, items: array, ...), or else none (0: any value). */
static int schema_types(const json_t *s, int order[7], int *n) {
    *n = 0;
    const json_t *t = json_object_get(s, "type");
    int mask = 0;
    if (json_is_string(t)) {
        order[(*n)++] = mask = type_bit(json_string_value(t));
        return mask;
    }
    if (json_is_array(t)) {
        for (size_t i = 0; i < json_array_size(t); i++) {
            int bit = type_bit(json_string_value(json_array_get(t, i)));
            if (!(mask & bit)) order[(*n)++] = bit;
            mask |= bit;
        }
        return mask;
    }
    static const struct {
        const char *key;
        int type;
    } implied[] = {
        {"properties", T_OBJECT}, {"additionalProperties", T_OBJECT}, {"required", T_OBJECT},
        {"items", T_ARRAY}, {"prefixItems", T_ARRAY}, {"minItems", T_ARRAY}, {"maxItems", T_ARRAY},
        {"minLength", T_STRING}, {"maxLength", T_STRING}, {"pattern", T_STRING}, {"format", T_STRING},
        {"minimum", T_NUMBER}, {"maximum", T_NUMBER}, {"exclusiveMinimum", T_NUMBER}, {"exclusiveMaximum", T_NUMBER},
    };
    for (size_t i = 0; i < sizeof implied / sizeof implied[0]; i++)
        if (json_object_get(s, implied[i].key) && !(mask & implied[i].type)) {
            order[(*n)++] = implied[i].type;
            mask |= implied[i].type;
        }
    return mask;
}

/* $ref: the rule of the referenced schema, converted once. */
static bool ref_body(conv *c, const char *ref, ty_buf *b) {
    for (size_t i = 0; i < c->n_refs; i++) {
        if (strcmp(c->refs[i].ref, ref)) continue;
        if (c->refs[i].busy && c->refs[i].mark == c->consumed)
            return ty_js_fail_at(c, TOY_ERR_INVALID, "$ref", "$ref \"%.200s\" refers to itself before any input (left recursion)", ref);
        ty_js_put(b, c->rules[c->refs[i].rule].name);
        return true;
    }
    const json_t *target = resolve_ref(c, ref);
    if (!target) return false;
    char h[HINT_MAX + 32];
    ty_js_make_hint(h, sizeof h, c->root, ref[1] ? ref + 1 : "ref");
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? c->cap_refs * 2 : 8;
        ref_entry *r = realloc(c->refs, cap * sizeof *r);
        if (!r) return ty_js_oom(c);
        c->refs = r;
        c->cap_refs = cap;
    }
    long r = ty_js_add_rule(c, h, NULL);
    if (r < 0) return false;
    size_t me = c->n_refs;
    c->refs[me].ref = strdup(ref);
    if (!c->refs[me].ref) return ty_js_oom(c);
    c->refs[me].rule = (size_t)r;
    c->refs[me].busy = true;
    c->refs[me].mark = c->consumed;
    c->n_refs++;
    /* errors inside name the referenced schema's place */
    ty_buf saved = c->path;
    c->path = (ty_buf){0};
    ty_js_put(&c->path, ref);
    ty_buf body = {0};
    char name[HINT_MAX + 32];
    snprintf(name, sizeof name, "%s", c->rules[r].name);
    bool ok = !c->path.oom && visit_body(c, target, name, &body);
    free(c->path.v);
    c->path = saved;
    c->refs[me].busy = false;
    if (ok && body.oom) ok = ty_js_oom(c);
    if (ok) {
        c->rules[r].body = body.v;
        body.v = NULL;
        ty_js_put(b, c->rules[r].name);
    }
    free(body.v);
    return ok;
}

static bool object_schema_body(conv *c, const json_t *s, const char *hint, ty_buf *b) {
    if (!check_keywords(c, s)) return false;
    static const char *const ref_only[] = {"$ref", NULL};
    const json_t *ref = json_object_get(s, "$ref");
    if (ref && !has_constraints(s, ref_only)) return ref_body(c, json_string_value(ref), b);
    if (ref || json_object_get(s, "allOf")) {
        json_t *merged = own(c, json_object());
        return merged && merge_into(c, merged, s) && visit_body(c, merged, hint, b);
    }
    const json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    if (any && one && c->strict) return ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, "oneOf", "anyOf together with oneOf is not supported");
    if (any || one) {
        const json_t *alts = any ? any : one;
        static const char *const skip[] = {"anyOf", "oneOf", NULL};
        json_t *siblings = NULL;
        if (has_constraints(s, skip)) { /* each branch and the keywords beside anyOf */
            siblings = own(c, json_deep_copy(s));
            if (!siblings) return false;
            json_object_del(siblings, "anyOf");
            json_object_del(siblings, "oneOf");
        }
        size_t old = ty_js_path_push(c, any ? "anyOf" : "oneOf");
        bool ok = true;
        for (size_t i = 0; ok && i < json_array_size(alts); i++) {
            const json_t *branch = json_array_get(alts, i);
            size_t o2 = ty_js_path_push_index(c, i);
            if (siblings) {
                json_t *m = own(c, json_deep_copy(siblings));
                ok = m && merge_into(c, m, branch);
                branch = m;
            }
            char h[HINT_MAX + 32], what[24];
            snprintf(what, sizeof what, "%zu", i);
            ty_js_make_hint(h, sizeof h, hint, what);
            const char *r = ok ? visit(c, branch, h) : NULL;
            ty_js_path_pop(c, o2);
            if (!r) ok = false;
            else ty_js_put(b, i ? " | " : ""), ty_js_put(b, r);
        }
        ty_js_path_pop(c, old);
        return ok;
    }
    int order[7], n;
    int types = schema_types(s, order, &n);
    if (json_object_get(s, "const") || json_object_get(s, "enum")) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)s, k, v) { /* the values are not checked against them */
            int kind = keyword_kind(k);
            if (c->strict && kind > KW_ANY)
                return ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, k, "\"%s\" beside enum or const is not supported", k);
        }
        return constant_body(c, s, json_object_get(s, "type") ? types : 0x7f, b);
    }
    if (!n) return ty_js_put_prim(c, b, PRIM_VALUE);
    if (n == 1) return type_body(c, s, order[0], hint, b);
    for (int i = 0; i < n; i++) {
        ty_buf t = {0};
        char h[HINT_MAX + 32];
        ty_js_make_hint(h, sizeof h, hint, type_names[__builtin_ctz((unsigned)order[i])]);
        bool ok = type_body(c, s, order[i], h, &t);
        if (ok && t.oom) ok = ty_js_oom(c);
        const char *name = NULL;
        if (ok && strpbrk(t.v, " \"([")) {
            long r = ty_js_add_rule(c, h, t.v);
            name = r < 0 ? NULL : c->rules[r].name;
        } else if (ok) {
            name = t.v;
        }
        if (name) ty_js_put(b, i ? " | " : ""), ty_js_put(b, name);
        free(t.v);
        if (!name) return false;
    }
    return true;
}

/* The expression matching schema s; sub-rules are named hint-... */
static bool visit_body(conv *c, const json_t *s, const char *hint, ty_buf *body) {
    if (++c->depth > MAX_DEPTH) {
        c->depth--;
        return ty_js_fail(c, TOY_ERR_UNSUPPORTED, "schemas nested deeper than %d", MAX_DEPTH);
    }
    bool ok;
    if (json_is_true(s)) ok = ty_js_put_prim(c, body, PRIM_VALUE);
    else if (json_is_false(s)) ok = ty_js_fail(c, TOY_ERR_INVALID, "the schema false matches no value");
    else if (!json_is_object(s)) ok = ty_js_fail(c, TOY_ERR_INVALID, "a schema must be an object or a boolean");
    else ok = object_schema_body(c, s, hint, body);
    c->depth--;
    if (ok && body->oom) ok = ty_js_oom(c);
    return ok && c->status == TOY_OK;
}

/* The name of a rule matching s: a rule of its own, or the one its expression names. */
static const char *visit(conv *c, const json_t *s, const char *hint) {
    ty_buf b = {0};
    const char *name = NULL;
    if (visit_body(c, s, hint, &b) && b.v) {
        long r = ty_js_find_rule(c, b.v);
        if (r < 0) r = ty_js_add_rule(c, hint, b.v);
        if (r >= 0) name = c->rules[r].name;
    }
    free(b.v);
    return name;
}

/* ---------------------------------------------------------------- entry points */

static int cmp_rule_names(const void *a, const void *b) {
    return strcmp((*(const rule *const *)a)->name, (*(const rule *const *)b)->name);
}

static void conv_free(conv *c) {
    for (size_t i = 0; i < c->n_rules; i++) free(c->rules[i].name), free(c->rules[i].body);
    free(c->rules);
    free(c->index);
    for (size_t i = 0; i < c->n_refs; i++) free(c->refs[i].ref);
    free(c->refs);
    for (size_t i = 0; i < c->n_owned; i++) json_decref(c->owned[i]);
    free(c->owned);
    free(c->path.v);
}

static bool valid_root(const char *root) {
    if (!root || !*root || strlen(root) > HINT_MAX / 2) return false;
    for (const char *p = root; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-')) return false;
    return true;
}

/* Writes the rules: root first, the others by name. */
static bool emit(conv *c, long root_rule, ty_buf *out) {
    const rule **order = malloc((c->n_rules ? c->n_rules : 1) * sizeof *order);
    if (!order) return ty_js_oom(c);
    size_t n = 0;
    for (size_t i = 0; i < c->n_rules; i++)
        if ((long)i != root_rule) order[n++] = &c->rules[i];
    qsort(order, n, sizeof *order, cmp_rule_names);
    ty_buf b = {0};
    ty_js_putf(&b, "%s ::= ", c->rules[root_rule].name);
    ty_js_put(&b, c->rules[root_rule].body);
    ty_js_put(&b, "\n");
    for (size_t i = 0; i < n; i++) {
        ty_js_put(&b, order[i]->name);
        ty_js_put(&b, " ::= ");
        ty_js_put(&b, order[i]->body ? order[i]->body : "");
        ty_js_put(&b, "\n");
    }
    free(order);
    if (b.oom) {
        free(b.v);
        return ty_js_oom(c);
    }
    ty_buf_append(out, b.v, b.n);
    free(b.v);
    return out->oom ? ty_js_oom(c) : true;
}

static toy_status convert(const json_t *schema, bool strict, const char *root, ty_buf *out, char *err, size_t err_size) {
    conv c = {0};
    c.doc = schema;
    c.strict = strict;
    c.root = root;
    ty_js_put(&c.path, "#");
    if (!valid_root(root)) {
        c.status = TOY_ERR_INVALID;
        snprintf(c.msg, sizeof c.msg, "the root rule name must match [a-zA-Z0-9-]+ (at most %d characters)", HINT_MAX / 2);
    } else if (c.path.oom) {
        ty_js_oom(&c);
    } else {
        ty_buf body = {0};
        if (visit_body(&c, schema, root, &body)) {
            long r = ty_js_find_rule(&c, root) >= 0 ? -1 : ty_js_new_rule(&c, root, body.v);
            if (r >= 0) emit(&c, r, out);
            else if (c.status == TOY_OK) ty_js_fail(&c, TOY_ERR_INVALID, "rule %s is defined twice", root);
        }
        free(body.v);
    }
    if (err && err_size) snprintf(err, err_size, "%s", c.status == TOY_OK ? "" : c.msg);
    toy_status st = c.status;
    conv_free(&c);
    return st;
}

bool ty_json_schema_gbnf(const json_t *schema, bool strict, const char *root, ty_buf *out, char *err, size_t err_size) {
    return convert(schema, strict, root, out, err, err_size) == TOY_OK;
}

bool ty_json_schema_gbnf_any_object(const char *root, ty_buf *out) {
    json_t *s = json_pack("{s:s}", "type", "object");
    if (!s) return false;
    char err[64];
    bool ok = ty_json_schema_gbnf(s, false, root, out, err, sizeof err);
    json_decref(s);
    return ok;
}

toy_status toy_json_schema_to_gbnf(const char *schema_json, bool strict, char **gbnf) {
    if (!gbnf) return ty_error(TOY_ERR_INVALID, "toy_json_schema_to_gbnf: gbnf is NULL");
    *gbnf = NULL;
    if (!schema_json) return ty_error(TOY_ERR_INVALID, "toy_json_schema_to_gbnf: schema_json is NULL");
    json_error_t jerr;
    json_t *s = json_loads(schema_json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (!s)
        return ty_error(TOY_ERR_INVALID, "JSON schema: invalid JSON at line %d, column %d: %s", jerr.line, jerr.column,
                        jerr.text);
    ty_buf out = {0};
    char err[700];
    toy_status st = convert(s, strict, "root", &out, err, sizeof err);
    json_decref(s);
    if (st != TOY_OK) {
        free(out.v);
        return ty_error(st, "JSON schema %s", err);
    }
    *gbnf = out.v;
    return TOY_OK;
}
