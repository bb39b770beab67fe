/* cka.c — comparing models by linear CKA (Kornblith et al., 2019) of a per-layer tap —
 * by default the residual stream after each block — read through the context's trace
 * callback on one token stream fed to both models. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "toy.h"

/* Column-centred copy of x [n x d]. */
static float *centred(const float *x, int64_t n, int64_t d) {
    float *c = malloc((size_t)(n * d) * sizeof *c);
    double *mean = calloc((size_t)d, sizeof *mean);
    if (!c || !mean) {
        free(c);
        free(mean);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) mean[j] += x[i * d + j];
    for (int64_t j = 0; j < d; j++) mean[j] /= (double)n;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) c[i * d + j] = (float)(x[i * d + j] - mean[j]);
    free(mean);
    return c;
}

/* G = Xc Xc^T [n x n] in double (each entry a dot product over d, summed in double). */
static double *gram(const float *xc, int64_t n, int64_t d) {
    double *g = malloc((size_t)(n * n) * sizeof *g);
    if (!g) return NULL;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++) {
            double s = 0;
            for (int64_t k = 0; k < d; k++) s += (double)xc[i * d + k] * xc[j * d + k];
            g[i * n + j] = g[j * n + i] = s;
        }
    return g;
}

/* <Gx, Gy> / (||Gx|| ||Gy||) = ||Yc^T Xc||^2 / (||Xc^T Xc|| ||Yc^T Yc||) */
static double cka_of_grams(const double *gx, const double *gy, int64_t n) {
    double xy = 0, xx = 0, yy = 0;
    for (int64_t i = 0; i < n * n; i++) {
        xy += gx[i] * gy[i];
        xx += gx[i] * gx[i];
        yy += gy[i] * gy[i];
    }
    return xx > 0 && yy > 0 ? xy / sqrt(xx * yy) : 0.0;
}

static double *centred_gram(const float *x, int64_t n, int64_t d) {
    float *c = centred(x, n, d);
    double *g = c ? gram(c, n, d) : NULL;
    free(c);
    return g;
}

double toy_linear_cka(const float *x, int64_t n, int64_t dx, const float *y, int64_t dy) {
    double *gx = centred_gram(x, n, dx), *gy = centred_gram(y, n, dy);
    const double r = gx && gy ? cka_of_grams(gx, gy, n) : NAN;
    free(gx);
    free(gy);
    return r;
}

/* ---------------------------------------------------------------- taps */

typedef struct {
    const char *tap;
    float *taps;     /* [n_layer][n_tokens][width], allocated at the tap's first rows */
    int n_layer;
    int64_t width, n_tokens, row0; /* row0: where this window's tokens go */
    int64_t *rows;   /* per layer: rows received */
    toy_status st;   /* the first failure (no memory, rows of another width) */
} tap_sink;

static void on_trace(void *user, const char *name, const float *data, int64_t n_tok, int64_t n) {
    tap_sink *s = user;
    int il, len = 0;
    if (s->st || sscanf(name, "L%d.%n", &il, &len) != 1 || strcmp(name + len, s->tap) || il < 0 || il >= s->n_layer)
        return;
    if (!s->taps) {
        s->width = n;
        if ((size_t)n > SIZE_MAX / sizeof(float) / (size_t)s->n_layer / (size_t)s->n_tokens ||
            !(s->taps = malloc((size_t)s->n_layer * (size_t)s->n_tokens * (size_t)n * sizeof *s->taps))) {
            s->st = ty_error(TOY_ERR_NOMEM, "no memory for %d x %lld x %lld values of tap %s", s->n_layer,
                             (long long)s->n_tokens, (long long)n, s->tap);
            return;
        }
    }
    if (n != s->width) {
        s->st = ty_error(TOY_ERR_INVALID, "tap %s has rows of %lld and of %lld values: CKA needs one width", name,
                         (long long)s->width, (long long)n);
        return;
    }
    memcpy(s->taps + ((size_t)il * (size_t)s->n_tokens + (size_t)s->row0) * (size_t)n, data,
           (size_t)(n_tok * n) * sizeof *data);
    s->rows[il] += n_tok;
}

static toy_status model_taps(toy_model *m, const int32_t *tokens, int32_t n, int32_t window, int n_threads,
                             tap_sink *s) {
    s->n_layer = toy_model_n_layer(m);
    s->n_tokens = n;
    s->rows = calloc((size_t)s->n_layer, sizeof *s->rows);
    if (!s->rows) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_context_params p = toy_context_default_params();
    p.n_ctx = window;
    p.n_batch = window;
    p.n_threads = n_threads;
    p.trace = on_trace;
    p.trace_user = s;
    toy_context *ctx;
    toy_status st = toy_context_new(m, &p, &ctx);
    if (st) return st;
    int32_t *pos = malloc((size_t)window * sizeof *pos), *seq = calloc((size_t)window, sizeof *seq);
    if (!pos || !seq) st = ty_error(TOY_ERR_NOMEM, "no memory");
    for (int32_t i = 0; !st && i < window; i++) pos[i] = i;
    for (int32_t t0 = 0; !st && t0 < n; t0 += window) {
        const int32_t len = n - t0 < window ? n - t0 : window;
        toy_kv_seq_rm(ctx, 0, 0, -1);
        s->row0 = t0;
        toy_batch b = {len, tokens + t0, pos, seq, NULL};
        st = toy_decode(ctx, &b);
        if (!st) st = s->st;
    }
    for (int il = 0; !st && il < s->n_layer; il++)
        if (s->rows[il] != n)
            st = ty_error(TOY_ERR_INVALID, "%s has no tap L%d.%s (toy_trace_fn lists the taps)",
                          toy_gguf_path(toy_model_gguf(m)), il, s->tap);
    free(pos);
    free(seq);
    toy_context_free(ctx);
    return st;
}

/* The tokenizers must agree token for token. */
static toy_status same_tokenizer(const toy_model *a, const toy_model *b) {
    const toy_vocab *va = toy_model_vocab(a), *vb = toy_model_vocab(b);
    const int32_t na = toy_vocab_n_tokens(va), nb = toy_vocab_n_tokens(vb);
    if (na != nb || toy_vocab_kind_of(va) != toy_vocab_kind_of(vb))
        return ty_error(TOY_ERR_INVALID, "%s and %s have different tokenizers (%d and %d tokens): CKA needs one "
                        "token stream for both", toy_gguf_path(toy_model_gguf(a)), toy_gguf_path(toy_model_gguf(b)),
                        na, nb);
    for (int32_t t = 0; t < na; t++)
        if (strcmp(toy_vocab_token_text(va, t), toy_vocab_token_text(vb, t)))
            return ty_error(TOY_ERR_INVALID, "%s and %s have different tokenizers (token %d is \"%s\" and \"%s\"): "
                            "CKA needs one token stream for both", toy_gguf_path(toy_model_gguf(a)),
                            toy_gguf_path(toy_model_gguf(b)), t, toy_vocab_token_text(va, t),
                            toy_vocab_token_text(vb, t));
    return TOY_OK;
}

toy_status toy_cka_models(toy_model *a, toy_model *b, const int32_t *tokens, int32_t n_tokens, int32_t window,
                          int n_threads, double **cka, int *n_layer_a, int *n_layer_b) {
    return toy_cka_models_tap(a, b, NULL, tokens, n_tokens, window, n_threads, cka, n_layer_a, n_layer_b);
}

toy_status toy_cka_models_tap(toy_model *a, toy_model *b, const char *tap, const int32_t *tokens, int32_t n_tokens,
                              int32_t window, int n_threads, double **cka, int *n_layer_a, int *n_layer_b) {
    *cka = NULL;
    if (!tap || !strcmp(tap, "resid")) tap = "out";
    if (!*tap || strchr(tap, '.'))
        return ty_error(TOY_ERR_INVALID, "tap '%s': the name of a per-layer tap, without its layer (attn_norm, q, ...)",
                        tap);
    toy_status st = same_tokenizer(a, b);
    if (st) return st;
    if (n_tokens < 2) return ty_error(TOY_ERR_INVALID, "CKA needs at least 2 tokens, got %d", n_tokens);
    if (window <= 0) window = 512;
    if (window > toy_model_n_ctx_train(a)) window = toy_model_n_ctx_train(a);
    if (window > toy_model_n_ctx_train(b)) window = toy_model_n_ctx_train(b);
    if (window > n_tokens) window = n_tokens;
    tap_sink sa = {.tap = tap}, sb = {.tap = tap};
    if (!(st = model_taps(a, tokens, n_tokens, window, n_threads, &sa)))
        st = model_taps(b, tokens, n_tokens, window, n_threads, &sb);
    double **ga = NULL, **gb = NULL, *out = NULL;
    if (!st) {
        ga = calloc((size_t)sa.n_layer, sizeof *ga);
        gb = calloc((size_t)sb.n_layer, sizeof *gb);
        out = malloc((size_t)sa.n_layer * (size_t)sb.n_layer * sizeof *out);
        if (!ga || !gb || !out) st = ty_error(TOY_ERR_NOMEM, "no memory");
    }
    const size_t per_a = (size_t)n_tokens * (size_t)sa.width, per_b = (size_t)n_tokens * (size_t)sb.width;
    for (int i = 0; !st && i < sa.n_layer; i++)
        if (!(ga[i] = centred_gram(sa.taps + i * per_a, n_tokens, sa.width))) st = ty_error(TOY_ERR_NOMEM, "no memory");
    for (int j = 0; !st && j < sb.n_layer; j++)
        if (!(gb[j] = centred_gram(sb.taps + j * per_b, n_tokens, sb.width))) st = ty_error(TOY_ERR_NOMEM, "no memory");
    for (int i = 0; !st && i < sa.n_layer; i++)
        for (int j = 0; j < sb.n_layer; j++) out[i * sb.n_layer + j] = cka_of_grams(ga[i], gb[j], n_tokens);
    for (int i = 0; ga && i < sa.n_layer; i++) free(ga[i]);
    for (int j = 0; gb && j < sb.n_layer; j++) free(gb[j]);
    free(ga);
    free(gb);
    free(sa.taps);
    free(sb.taps);
    free(sa.rows);
    free(sb.rows);
    if (st) {
        free(out);
        return st;
    }
    *cka = out;
    *n_layer_a = sa.n_layer;
    *n_layer_b = sb.n_layer;
    return TOY_OK;
}
