/* embeddings.c — see embeddings.h. The fields and objects are OpenAI's; what an input may
 * be, and the vectors (pooled final-norm states, L2-normalised), are llama-server's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "embeddings.h"

#define fail oai_fail

/* ---------------------------------------------------------------- parsing */

void emb_request_free(emb_request *r) {
    for (size_t i = 0; r->tokens && i < r->n_inputs; i++) free(r->tokens[i]);
    free(r->tokens);
    free(r->n_tokens);
    memset(r, 0, sizeof *r);
}

/* "input" for the one input of a string or token array, "input[i]" for an array's */
static void input_name(char *name, size_t n, bool listed, size_t i) {
    if (listed) snprintf(name, n, "input[%zu]", i);
    else snprintf(name, n, "input");
}

/* A text to 1..n_ctx tokens, as llama-server tokenizes an embedding's input (special
 * tokens added as the vocabulary says, special-token text parsed). */
static bool input_text(const oai_context *c, const json_t *s, const char *name, int32_t **out, int32_t *n,
                       oai_error *err) {
    const size_t len = json_string_length(s);
    if (len > c->max_text_bytes)
        return fail(err, 400, "input",
                    "%s is %zu bytes: more than the %d tokens of a slot's context can hold (at most %zu bytes)", name,
                    len, c->n_ctx, c->max_text_bytes);
    if (!(*out = malloc((size_t)c->n_ctx * sizeof **out))) return fail(err, 500, "input", "no memory");
    const toy_status st = toy_tokenize(c->vocab, json_string_value(s), len, true, true, *out, c->n_ctx, n);
    if (st == TOY_ERR_BUFFER)
        return fail(err, 400, "input", "%s is %d tokens, over the context of %d", name, *n, c->n_ctx);
    if (st) return fail(err, 400, "input", "%s: %s", name, toy_last_error());
    /* llama-server's answer too: a model that adds no BOS gives "" no tokens */
    if (*n == 0) return fail(err, 400, "input", "%s has no tokens: an empty text (this model adds none)", name);
    int32_t *fit = realloc(*out, (size_t)*n * sizeof **out);
    if (fit) *out = fit;
    return true;
}

/* An array of token ids, 1..n_ctx of them, each in the vocabulary. */
static bool input_ids(const oai_context *c, const json_t *a, const char *name, int32_t **out, int32_t *n,
                      oai_error *err) {
    const size_t count = json_array_size(a);
    if (count == 0) return fail(err, 400, "input", "%s is an empty array of token ids", name);
    if (count > (size_t)c->n_ctx)
        return fail(err, 400, "input", "%s is %zu tokens, over the context of %d", name, count, c->n_ctx);
    if (!(*out = malloc(count * sizeof **out))) return fail(err, 500, "input", "no memory");
    const int32_t n_vocab = toy_vocab_n_tokens(c->vocab);
    for (size_t k = 0; k < count; k++) {
        const json_t *t = json_array_get(a, k);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= n_vocab)
            return fail(err, 400, "input", "%s[%zu] is not a token id (0..%d)", name, k, n_vocab - 1);
        (*out)[k] = (int32_t)json_integer_value(t);
    }
    *n = (int32_t)count;
    return true;
}

static bool parse_input(const oai_context *c, const json_t *input, emb_request *out, oai_error *err) {
    static const char shape[] =
        "input must be a string, an array of strings, an array of token ids or an array of arrays of token ids";
    if (!input || json_is_null(input)) return fail(err, 400, "input", "input is missing");
    /* one input: a string, or an array whose first element is a token id */
    const bool one = json_is_string(input) || (json_is_array(input) && json_is_integer(json_array_get(input, 0)));
    if (!one && !json_is_array(input)) return fail(err, 400, "input", "%s", shape);
    const size_t n = one ? 1 : json_array_size(input);
    if (n == 0) return fail(err, 400, "input", "input is an empty array: nothing to embed");
    if (n > EMB_MAX_INPUTS) return fail(err, 400, "input", "input holds %zu inputs, at most %d", n, EMB_MAX_INPUTS);
    out->tokens = calloc(n, sizeof *out->tokens);
    out->n_tokens = calloc(n, sizeof *out->n_tokens);
    if (!out->tokens || !out->n_tokens) return fail(err, 500, "input", "no memory");
    out->n_inputs = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = one ? input : json_array_get(input, i);
        char name[48];
        input_name(name, sizeof name, !one, i);
        bool ok;
        if (json_is_string(v)) ok = input_text(c, v, name, &out->tokens[i], &out->n_tokens[i], err);
        else if (json_is_array(v)) ok = input_ids(c, v, name, &out->tokens[i], &out->n_tokens[i], err);
        else ok = fail(err, 400, "input", "%s must be a string or an array of token ids", name);
        if (!ok) return false;
    }
    return true;
}

bool emb_parse(const emb_context *ec, const char *body, size_t len, emb_request *out, oai_error *err) {
    const oai_context *c = ec->oai;
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    static const char *const pooling_names[] = {"none", "mean", "cls", "last", "rank"};
    if (ec->pooling != TOY_POOLING_MEAN && ec->pooling != TOY_POOLING_CLS && ec->pooling != TOY_POOLING_LAST)
        return fail(err, 400, NULL,
                    "this server's pooling is %s, which gives no one vector per input: start toy serve with --pooling "
                    "mean, cls or last",
                    ec->pooling >= 0 && ec->pooling <= TOY_POOLING_RANK ? pooling_names[ec->pooling] : "unknown");
    json_t *j = oai_load_object(body, len, err);
    if (!j) return false;
    bool ok = true;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        if (ok && strcmp(key, "input") && strcmp(key, "model") && strcmp(key, "encoding_format") &&
            strcmp(key, "dimensions") && strcmp(key, "user"))
            ok = fail(err, 400, key, "unknown field '%.64s' for /v1/embeddings", key);
    }
    if (ok) ok = oai_check_model(c, j, err);
    const json_t *format = ok ? json_object_get(j, "encoding_format") : NULL;
    if (ok && format && !json_is_null(format)) {
        if (json_is_string(format) && !strcmp(json_string_value(format), "base64")) out->base64 = true;
        else if (!json_is_string(format) || strcmp(json_string_value(format), "float"))
            ok = fail(err, 400, "encoding_format", "encoding_format must be \"float\" or \"base64\"");
    }
    const json_t *dims = ok ? json_object_get(j, "dimensions") : NULL;
    if (ok && dims && !json_is_null(dims)) {
        if (!json_is_integer(dims)) ok = fail(err, 400, "dimensions", "dimensions must be an integer");
        else if (json_integer_value(dims) != ec->n_embd)
            ok = fail(err, 400, "dimensions",
                      "dimensions %lld: this model's embeddings have %d, which toy serve does not shorten",
                      (long long)json_integer_value(dims), ec->n_embd);
    }
    const json_t *user = ok ? json_object_get(j, "user") : NULL;
    if (ok && user && !json_is_null(user) && !json_is_string(user))
        ok = fail(err, 400, "user", "user must be a string");
    if (ok) ok = parse_input(c, json_object_get(j, "input"), out, err);
    json_decref(j);
    if (!ok) emb_request_free(out);
    return ok;
}

/* ---------------------------------------------------------------- the response */

static void append_str(ty_buf *b, const char *s) { ty_buf_append(b, s, strlen(s)); }

/* base64 (RFC 4648, padded) of n floats as little-endian bytes */
static void append_base64(ty_buf *b, const float *x, size_t n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t n_bytes = 4 * n;
    uint8_t group[3];
    size_t filled = 0;
    char out[4];
    for (size_t i = 0; i < n_bytes; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i / 4], 4);
        group[filled++] = (uint8_t)(bits >> (8 * (i % 4)));
        if (filled < 3 && i + 1 < n_bytes) continue;
        const uint32_t w = (uint32_t)group[0] << 16 | (filled > 1 ? (uint32_t)group[1] << 8 : 0) |
                           (filled > 2 ? group[2] : 0);
        out[0] = digits[w >> 18 & 63];
        out[1] = digits[w >> 12 & 63];
        out[2] = filled > 1 ? digits[w >> 6 & 63] : '=';
        out[3] = filled > 2 ? digits[w & 63] : '=';
        ty_buf_append(b, out, 4);
        filled = 0;
    }
}

char *emb_response_json(const emb_context *c, const emb_request *r, const float *vectors, oai_error *err) {
    memset(err, 0, sizeof *err);
    const int32_t n_embd = c->n_embd;
    ty_buf b = {0};
    append_str(&b, "{\"object\":\"list\",\"data\":[");
    long long n_tokens = 0;
    char num[32];
    for (size_t i = 0; i < r->n_inputs; i++) {
        const float *x = vectors + i * (size_t)n_embd;
        for (int32_t d = 0; d < n_embd; d++)
            if (!isfinite(x[d])) {
                free(b.v);
                fail(err, 500, NULL, "the embedding of input[%zu] is not finite: the model's states overflow", i);
                return NULL;
            }
        snprintf(num, sizeof num, "%zu", i);
        append_str(&b, i ? ",{\"object\":\"embedding\",\"index\":" : "{\"object\":\"embedding\",\"index\":");
        append_str(&b, num);
        if (r->base64) {
            append_str(&b, ",\"embedding\":\"");
            append_base64(&b, x, (size_t)n_embd);
            append_str(&b, "\"}");
        } else {
            append_str(&b, ",\"embedding\":[");
            for (int32_t d = 0; d < n_embd; d++) {
                /* 9 significant digits: the same float32 when read back */
                snprintf(num, sizeof num, d ? ",%.9g" : "%.9g", (double)x[d]);
                append_str(&b, num);
            }
            append_str(&b, "]}");
        }
        n_tokens += r->n_tokens[i];
    }
    json_t *model = json_string(c->oai->model_id);
    char *model_text = model ? json_dumps(model, JSON_ENCODE_ANY) : NULL;
    json_decref(model);
    snprintf(num, sizeof num, "%lld", n_tokens);
    append_str(&b, "],\"model\":");
    append_str(&b, model_text ? model_text : "\"\"");
    append_str(&b, ",\"usage\":{\"prompt_tokens\":");
    append_str(&b, num);
    append_str(&b, ",\"total_tokens\":");
    append_str(&b, num);
    append_str(&b, "}}");
    free(model_text);
    if (b.oom || !model_text) {
        free(b.v);
        fail(err, 500, NULL, "no memory for the response");
        return NULL;
    }
    return b.v;
}
