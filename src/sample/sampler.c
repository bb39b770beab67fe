/* sampler.c — picking the next token from a row of logits the way llama.cpp's common
 * sampler chain does (common/sampling.cpp, default order, without the DRY, typical-p, XTC
 * and top-n-sigma stages toy does not offer):
 *
 *     penalties → top-k → top-p → min-p → temperature → softmax → random pick
 *
 * Temperature <= 0 is greedy: the argmax of the penalised logits, lowest id on a tie (the
 * later stages cannot change which token that is).
 *
 * Cost for vocabularies up to 256k: one pass applies the penalties; top-k keeps a heap of
 * k tokens (O(n log k)) and sorts only those; top-p without top-k finds its cut by a
 * quickselect on probability mass (expected O(n)); nothing beyond top-k's k is sorted.
 * Survivors are listed best first when top-k ran, in id order otherwise. Everything is
 * allocated in toy_sampler_new; sampling allocates nothing.
 *
 * The random numbers are xoshiro256** (Blackman and Vigna, 2018), its 256-bit state filled
 * from the seed by four steps of splitmix64. A uniform double is the top 53 bits of one
 * draw times 2^-53. The generator is integer arithmetic only, so a seed gives the same
 * stream on every platform; each sampled token (greedy ones excepted) takes exactly one
 * draw, and toy_sampler_reset starts the stream over. NaN logits count as -inf. */
#include "sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"
#include "params.h"
#include "splitmix.h"

struct toy_sampler {
    toy_sampler_params params;
    int32_t n_vocab;
    bool penalties_on; /* a history window and a penalty that changes logits */
    /* The penalty window: how often each token occurs in it and, when it is bounded, the
     * last repeat_last_n tokens as a ring (window_head is the oldest once it is full). */
    int32_t *counts; /* n_vocab */
    int32_t *window; /* repeat_last_n entries; NULL for an unbounded window (-1) */
    int32_t window_len, window_head;
    float *logits;               /* n_vocab: the penalised row */
    ty_sampler_candidate *cand; /* n_vocab: the tokens still in the running */
    uint64_t rng[4];             /* xoshiro256** state */
    toy_logit_bias *bias;        /* the caller's logit_bias, copied */
    grammar_cursor grammar;      /* where the sampled text stands in params.grammar */
    int32_t *ids;                /* n_vocab, with a grammar: the tokens asked of it */
    bool *allowed;               /* and its answers */
};

/* ---------------------------------------------------------------- random numbers */

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro256ss(uint64_t s[4]) {
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

static void seed_rng(toy_sampler *s) {
    uint64_t x = s->params.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = ty_splitmix64(&x);
}

double ty_sampler_uniform(toy_sampler *s) {
    return (double)(xoshiro256ss(s->rng) >> 11) * 0x1.0p-53;
}

/* ---------------------------------------------------------------- penalties */

/* llama.cpp's llama_sampler_penalties: a token seen in the window has its logit divided by
 * the repetition penalty when positive and multiplied when not (so it drops either way for
 * a penalty > 1), then lowered by count * frequency + presence — one subtraction of the
 * sum, as llama.cpp rounds it. */
static float penalize(const toy_sampler_params *p, float logit, int32_t count) {
    logit = logit <= 0 ? logit * p->repeat_penalty : logit / p->repeat_penalty;
    return logit - ((float)count * p->frequency_penalty + p->presence_penalty);
}

void ty_sampler_apply_penalties(const toy_sampler *s, const float *logits, float *out) {
    for (int32_t i = 0; i < s->n_vocab; i++) {
        float l = isnan(logits[i]) ? -INFINITY : logits[i];
        if (s->penalties_on && s->counts[i] > 0) l = penalize(&s->params, l, s->counts[i]);
        out[i] = l;
    }
}

/* ---------------------------------------------------------------- selection */

/* The ranking every stage uses: higher logit first, lower id first on a tie — a total
 * order, so any sort or selection gives the same list. */
static inline bool ranks_above(const ty_sampler_candidate *a,
                               const ty_sampler_candidate *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void swap_cand(ty_sampler_candidate *a, ty_sampler_candidate *b) {
    ty_sampler_candidate t = *a;
    *a = *b;
    *b = t;
}

/* A heap with the lowest-ranked kept token at the root: the one a better token evicts. */
static void heap_sift_down(ty_sampler_candidate *h, size_t n, size_t i) {
    for (;;) {
        size_t low = i;
        const size_t left = 2 * i + 1, right = left + 1;
        if (left < n && ranks_above(&h[low], &h[left])) low = left;
        if (right < n && ranks_above(&h[low], &h[right])) low = right;
        if (low == i) return;
        swap_cand(&h[i], &h[low]);
        i = low;
    }
}

static void heap_sift_up(ty_sampler_candidate *h, size_t i) {
    while (i > 0) {
        const size_t parent = (i - 1) / 2;
        if (!ranks_above(&h[parent], &h[i])) return;
        swap_cand(&h[i], &h[parent]);
        i = parent;
    }
}

/* The m best-ranked tokens above -inf into cand[0..), best first; returns how many (fewer
 * than m when fewer are left). O(n_vocab log m): most tokens cost one comparison with
 * the root. */
static size_t select_top(toy_sampler *s, size_t m) {
    ty_sampler_candidate *h = s->cand;
    size_t n = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        const ty_sampler_candidate c = {i, s->logits[i], 0.0};
        if (c.logit == -INFINITY) continue;
        if (n < m) {
            h[n] = c;
            heap_sift_up(h, n++);
        } else if (ranks_above(&c, &h[0])) {
            h[0] = c;
            heap_sift_down(h, n, 0);
        }
    }
    /* heap sort: moving the root (the lowest-ranked) to the back leaves the best first */
    for (size_t end = n; end > 1; end--) {
        swap_cand(&h[0], &h[end - 1]);
        heap_sift_down(h, end - 1, 0);
    }
    return n;
}

/* exp(logit - max) as softmax weighs it; a +inf maximum takes all the mass (shared by the
 * +inf tokens) where exp(inf - inf) would give NaN. */
static inline double softmax_weight(float logit, float max) {
    if (isinf(max)) return logit == max ? 1.0 : 0.0;
    return exp((double)logit - (double)max);
}

static void softmax(ty_sampler_candidate *c, size_t n) {
    float max = c[0].logit;
    for (size_t i = 1; i < n; i++)
        if (c[i].logit > max) max = c[i].logit;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += c[i].p = softmax_weight(c[i].logit, max);
    for (size_t i = 0; i < n; i++) c[i].p /= sum;
}

/* llama.cpp's top-p over a list sorted best first: keep the shortest prefix whose
 * probability reaches p (at least one token). */
static size_t top_p_prefix(ty_sampler_candidate *c, size_t n, float top_p) {
    softmax(c, n);
    double cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (cum >= top_p) return i + 1;
    }
    return n;
}

/* Top-p with top-k off: the same prefix, with probabilities over the whole vocabulary,
 * found without sorting it. A quickselect on probability mass finds the prefix's
 * lowest-ranked token (expected O(n_vocab); pivots come from a fixed splitmix64 sequence,
 * so the work done is the same on every run); then one pass gathers every token ranked
 * at or above it, in id order. The masses are summed in partition order rather than best
 * first, which can move the cut only when the running sum lands within rounding of p. */
static size_t top_p_whole_vocab(toy_sampler *s, float top_p) {
    ty_sampler_candidate *c = s->cand;
    size_t n = 0;
    float max = -INFINITY;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (s->logits[i] == -INFINITY) continue;
        c[n++] = (ty_sampler_candidate){i, s->logits[i], 0.0};
        if (s->logits[i] > max) max = s->logits[i];
    }
    if (n == 0) return 0;
    double total = 0;
    for (size_t i = 0; i < n; i++) total += c[i].p = softmax_weight(c[i].logit, max);

    /* c[0..lo) is kept for sure (its mass is top_p * total - need); the cut is in
     * [lo, hi) */
    double need = top_p * total;
    size_t lo = 0, hi = n;
    uint64_t pivot_state = 0;
    ty_sampler_candidate cut;
    for (;;) {
        swap_cand(&c[lo + ty_splitmix64(&pivot_state) % (hi - lo)], &c[hi - 1]);
        const ty_sampler_candidate pivot = c[hi - 1];
        size_t above = lo; /* c[lo..above) rank above the pivot */
        double above_mass = 0;
        for (size_t i = lo; i < hi - 1; i++) {
            if (ranks_above(&c[i], &pivot)) {
                above_mass += c[i].p;
                swap_cand(&c[i], &c[above++]);
            }
        }
        swap_cand(&c[above], &c[hi - 1]);
        if (above > lo && above_mass >= need) {
            hi = above; /* the better ones already reach p */
        } else if (above_mass + pivot.p >= need || above + 1 == hi) {
            cut = pivot; /* (or every token is in: rounding kept the sum short of p) */
            break;
        } else {
            need -= above_mass + pivot.p;
            lo = above + 1;
        }
    }

    size_t kept = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        const ty_sampler_candidate t = {i, s->logits[i], 0.0};
        if (t.logit != -INFINITY && (i == cut.id || ranks_above(&t, &cut))) c[kept++] = t;
    }
    return kept;
}

/* ---------------------------------------------------------------- the grammar */

/* When only the k best tokens of the masked row can survive (greedy: k = 1; top-k): the
 * best-ranked tokens of the unmasked row are asked of the grammar one by one, in order,
 * and the first k it allows are the k best of the masked row, without a mask over the
 * whole vocabulary. Returns how many are in s->cand (best first); 0 when the first
 * GRAMMAR_LOOKAHEAD * k hold fewer than k allowed ones (the caller masks the whole row
 * instead); -1 on failure. */
#define GRAMMAR_LOOKAHEAD 4
static long grammar_top(toy_sampler *s, size_t k) {
    size_t m = k * GRAMMAR_LOOKAHEAD < 64 ? 64 : k * GRAMMAR_LOOKAHEAD;
    if (m > (size_t)s->n_vocab) m = (size_t)s->n_vocab;
    const size_t n = select_top(s, m);
    for (size_t i = 0; i < n; i++) s->ids[i] = s->cand[i].id;
    if (ty_grammar_allows(s->params.grammar, &s->grammar, s->ids, n, s->allowed)) return -1;
    size_t kept = 0;
    for (size_t i = 0; i < n && kept < k; i++)
        if (s->allowed[i]) s->cand[kept++] = s->cand[i];
    /* fewer than m: every token with a finite logit was asked, so the count is exact */
    return kept == k || (n < m && kept > 0) ? (long)kept : 0;
}

/* ---------------------------------------------------------------- the chain */

/* Under a grammar, token 0 is no fallback: it is most likely refused. */
static size_t nothing_allowed(void) {
    ty_error(TOY_ERR_INVALID, "every token the grammar allows here is banned (logit_bias) or has a -inf logit");
    return 0;
}

size_t ty_sampler_candidates(toy_sampler *s, const float *logits,
                             const ty_sampler_candidate **out) {
    const toy_sampler_params *p = &s->params;
    ty_sampler_candidate *c = s->cand;
    *out = c;
    const float *in = logits;
    if (p->n_logit_bias) { /* the bias goes first, so the penalties see the biased logit */
        memcpy(s->logits, logits, (size_t)s->n_vocab * sizeof *logits);
        for (size_t i = 0; i < p->n_logit_bias; i++) {
            float *l = &s->logits[s->bias[i].token];
            *l = s->bias[i].bias <= -100 ? -INFINITY : *l + s->bias[i].bias;
        }
        in = s->logits;
    }
    ty_sampler_apply_penalties(s, in, s->logits);

    const bool greedy = !(p->temperature > 0), top_k = p->top_k > 0 && p->top_k < s->n_vocab;
    size_t n = 0;
    bool ranked = false; /* c holds the grammar's best tokens already */
    if (p->grammar) {
        if (greedy || top_k) {
            const long r = grammar_top(s, greedy ? 1 : (size_t)p->top_k);
            if (r < 0) return 0;
            n = (size_t)r;
            ranked = r > 0;
        }
        if (!ranked && ty_grammar_mask_logits(p->grammar, &s->grammar, s->logits, s->n_vocab)) return 0;
    }

    if (greedy) {
        if (!ranked) {
            int32_t best = 0;
            for (int32_t i = 1; i < s->n_vocab; i++)
                if (s->logits[i] > s->logits[best]) best = i;
            if (p->grammar && s->logits[best] == -INFINITY) return nothing_allowed();
            c[0] = (ty_sampler_candidate){best, s->logits[best], 1.0};
        }
        c[0].p = 1.0;
        return 1;
    }

    bool sorted = true;
    if (top_k) {
        if (!ranked) n = select_top(s, (size_t)p->top_k);
        if (n > 0 && p->top_p < 1) n = top_p_prefix(c, n, p->top_p);
    } else if (p->top_p < 1) {
        n = top_p_whole_vocab(s, p->top_p);
        sorted = false;
    } else {
        n = 0;
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (s->logits[i] != -INFINITY)
                c[n++] = (ty_sampler_candidate){i, s->logits[i], 0.0};
        sorted = false;
    }
    if (n == 0 && p->grammar) return nothing_allowed();
    if (n == 0) { /* every logit is -inf or NaN: nothing to prefer, take the first token */
        c[0] = (ty_sampler_candidate){0, -INFINITY, 1.0};
        return 1;
    }

    /* min-p compares logits, as llama.cpp does: keep l >= l_max + log(min_p), i.e.
     * p >= min_p * p_max; if that would leave none (min_p > 1), it keeps them all. */
    if (p->min_p > 0 && n > 1) {
        float max = c[0].logit;
        if (!sorted)
            for (size_t i = 1; i < n; i++)
                if (c[i].logit > max) max = c[i].logit;
        const float floor_logit = max + logf(p->min_p);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].logit >= floor_logit) c[kept++] = c[i];
        if (kept > 0) n = kept;
    }

    if (p->temperature != 1)
        for (size_t i = 0; i < n; i++) c[i].logit /= p->temperature;
    softmax(c, n);
    return n;
}

static int32_t pick(toy_sampler *s, const ty_sampler_candidate *c, size_t n) {
    if (!(s->params.temperature > 0)) return c[0].id;
    const double u = ty_sampler_uniform(s);
    double cum = 0;
    size_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].p <= 0) continue;
        cum += c[i].p;
        last = i;
        if (u < cum) return c[i].id;
    }
    return c[last].id; /* rounding left the total a hair under u */
}

int32_t toy_sampler_sample(toy_sampler *s, const float *logits) {
    const ty_sampler_candidate *c;
    const size_t n = ty_sampler_candidates(s, logits, &c);
    if (n == 0) return -1;
    const int32_t token = pick(s, c, n);
    if (s->params.grammar && ty_grammar_accept_token(s->params.grammar, &s->grammar, token)) return -1;
    return token;
}

bool ty_sampler_grammar_complete(const toy_sampler *s) {
    return s->params.grammar && ty_grammar_cursor_complete(&s->grammar);
}

/* ---------------------------------------------------------------- history */

void toy_sampler_accept(toy_sampler *s, int32_t token) {
    if (!s || !s->penalties_on || token < 0 || token >= s->n_vocab) return;
    if (s->window) {
        const int32_t cap = s->params.repeat_last_n;
        if (s->window_len == cap)
            s->counts[s->window[s->window_head]]--; /* the oldest token leaves */
        else
            s->window_len++;
        s->window[s->window_head] = token;
        s->window_head = (s->window_head + 1) % cap;
    }
    if (s->counts[token] < INT32_MAX) s->counts[token]++;
}

void toy_sampler_reset(toy_sampler *s) {
    if (!s) return;
    memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
    s->window_len = s->window_head = 0;
    seed_rng(s);
    if (s->params.grammar) {
        grammar_cursor c;
        if (!ty_grammar_cursor_init(s->params.grammar, &c)) { /* else the old place stays */
            ty_grammar_cursor_free(&s->grammar);
            s->grammar = c;
        }
    }
}

/* ---------------------------------------------------------------- lifetime */

void toy_sampler_params_init(toy_sampler_params *params, size_t size) {
    const toy_sampler_params defaults = {
        .size = sizeof defaults,
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .seed = 0,
        .grammar = NULL,
        .logit_bias = NULL,
        .n_logit_bias = 0,
    };
    ty_params_init(params, size, &defaults, sizeof defaults);
}

toy_status toy_sampler_new(const toy_sampler_params *params, int32_t n_vocab,
                           toy_sampler **out) {
    if (!out) return ty_error(TOY_ERR_INVALID, "toy_sampler_new: out is NULL");
    *out = NULL;
    toy_sampler_params p = toy_sampler_default_params();
    if (params && ty_params_read(&p, sizeof p, params, "toy_sampler_params")) return TOY_ERR_INVALID;
    if (n_vocab <= 0)
        return ty_error(TOY_ERR_INVALID, "sampler: n_vocab must be positive, got %d",
                        (int)n_vocab);
    if (isnan(p.temperature) || isnan(p.top_p) || isnan(p.min_p))
        return ty_error(TOY_ERR_INVALID,
                        "sampler: temperature, top_p and min_p must not be NaN");
    if (!(p.repeat_penalty > 0) || isinf(p.repeat_penalty))
        return ty_error(TOY_ERR_INVALID,
                        "sampler: repeat_penalty must be finite and > 0, got %g",
                        (double)p.repeat_penalty);
    if (!isfinite(p.frequency_penalty) || !isfinite(p.presence_penalty))
        return ty_error(TOY_ERR_INVALID,
                        "sampler: frequency_penalty and presence_penalty must be finite");
    if (p.repeat_last_n < -1)
        return ty_error(TOY_ERR_INVALID, "sampler: repeat_last_n must be >= -1, got %d",
                        (int)p.repeat_last_n);
    if (p.n_logit_bias && !p.logit_bias)
        return ty_error(TOY_ERR_INVALID, "sampler: n_logit_bias is %zu but logit_bias is NULL", p.n_logit_bias);
    for (size_t i = 0; i < p.n_logit_bias; i++) {
        if (p.logit_bias[i].token < 0 || p.logit_bias[i].token >= n_vocab)
            return ty_error(TOY_ERR_INVALID, "sampler: logit_bias[%zu]: token %d is out of range (vocabulary of %d)", i,
                            (int)p.logit_bias[i].token, (int)n_vocab);
        if (isnan(p.logit_bias[i].bias) || p.logit_bias[i].bias == INFINITY)
            return ty_error(TOY_ERR_INVALID, "sampler: logit_bias[%zu]: the bias must be a number below +inf", i);
    }

    toy_sampler *s = calloc(1, sizeof *s);
    if (!s) return ty_error(TOY_ERR_NOMEM, "sampler: out of memory");
    s->params = p;
    s->n_vocab = n_vocab;
    s->penalties_on = p.repeat_last_n != 0 && (p.repeat_penalty != 1 ||
                                               p.frequency_penalty != 0 ||
                                               p.presence_penalty != 0);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->logits = calloc((size_t)n_vocab, sizeof *s->logits);
    s->cand = calloc((size_t)n_vocab, sizeof *s->cand);
    const bool bounded = s->penalties_on && p.repeat_last_n > 0;
    if (bounded) s->window = calloc((size_t)p.repeat_last_n, sizeof *s->window);
    if (p.n_logit_bias && (s->bias = malloc(p.n_logit_bias * sizeof *s->bias)))
        memcpy(s->bias, p.logit_bias, p.n_logit_bias * sizeof *s->bias);
    s->params.logit_bias = s->bias;
    if (p.grammar && ty_grammar_cursor_init(p.grammar, &s->grammar)) {
        toy_sampler_free(s);
        return TOY_ERR_NOMEM;
    }
    if (p.grammar) {
        s->ids = malloc((size_t)n_vocab * sizeof *s->ids);
        s->allowed = malloc((size_t)n_vocab * sizeof *s->allowed);
    }
    if (!s->counts || !s->logits || !s->cand || (bounded && !s->window) || (p.n_logit_bias && !s->bias) ||
        (p.grammar && (!s->ids || !s->allowed))) {
        toy_sampler_free(s);
        return ty_error(TOY_ERR_NOMEM, "sampler: out of memory for a vocabulary of %d",
                        (int)n_vocab);
    }
    seed_rng(s);
    *out = s;
    return TOY_OK;
}

void toy_sampler_free(toy_sampler *s) {
    if (!s) return;
    free(s->counts);
    free(s->window);
    free(s->logits);
    free(s->cand);
    free(s->bias);
    free(s->ids);
    free(s->allowed);
    ty_grammar_cursor_free(&s->grammar);
    free(s);
}
