/* grammar.c — running a grammar: which tokens may come next, and moving past one.
 *
 * Where a text stands in the language is a set of stacks of a pushdown automaton (the
 * way llama.cpp's llama-grammar.cpp runs GBNF): each stack lists, top last, the element
 * to match next and, below it, where to go on when the rule it belongs to ends. Reading
 * a code point keeps the stacks whose top set holds it, each moved one element on and
 * expanded until every top is a character set again; an empty stack means the text may
 * end here.
 *
 * Tokens are bytes, so the step is per byte: a stack set plus a half-read UTF-8
 * character (kept while its prefix can still become a character some top accepts) is a
 * state, and each state's successor on each byte is computed once and cached. Those
 * states and their edges form an automaton over bytes, built lazily as generation goes.
 * The tokens allowed in a state are found by walking the vocabulary's trie (every
 * token's bytes, shared prefixes once, in depth-first order) through that automaton,
 * skipping a whole subtree where a byte leads nowhere; the result is cached per state
 * as a bitset. Inside a string of a JSON schema the state repeats from token to token,
 * so most steps find their mask cached; a new state costs one walk of table lookups.
 * The cache is dropped when it outgrows GRAMMAR_CACHE_BYTES (samplers keep their own
 * stack set, so they find their state again).
 *
 * A state's description (its key) is a flat array of uint32:
 *     partial value, continuation bytes still expected, number of stacks,
 *     then each stack as its length and its element positions, bottom first;
 * stacks are sorted and unique, so equal sets have equal keys. */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"
#include "tokenizer.h"

#define GRAMMAR_CACHE_BYTES ((size_t)64 << 20)
#define GRAMMAR_MAX_STACKS 4096     /* in one state */
#define GRAMMAR_MAX_DEPTH 4096      /* elements in one stack */
#define GRAMMAR_MAX_WORK 1000000    /* expansion steps for one code point */
#define GRAMMAR_MAX_STEP_WORK 20000000 /* for one mask or token: the worst a step can stall */
#define DEAD (-1)
#define UNKNOWN (-2)

/* ---------------------------------------------------------------- the token trie */

typedef struct {
    uint32_t n_nodes;
    uint8_t *byte;    /* the byte leading to node i */
    uint32_t *depth;  /* 1 for the first byte of a token */
    uint32_t *end;    /* the node after i's subtree */
    uint32_t *tok_off, *tok_n; /* the tokens whose bytes end at node i: tokens[tok_off ..] */
    int32_t *tokens;  /* by their bytes */
    uint32_t max_depth;
} grammar_trie;

static void grammar_trie_free(void *p) {
    grammar_trie *t = p;
    if (!t) return;
    free(t->byte);
    free(t->depth);
    free(t->end);
    free(t->tok_off);
    free(t->tok_n);
    free(t->tokens);
    free(t);
}

/* The bytes a token stands for in generated text (toy_token_to_piece without special):
 * none for control and unknown tokens, which a grammar never allows. */
static const char *token_bytes(const toy_vocab *v, int32_t id, uint32_t *len) {
    const ty_token_data *t = &v->tokens[id];
    *len = (t->attr & (TY_ATTR_UNKNOWN | TY_ATTR_CONTROL)) ? 0 : t->piece_len;
    return v->pieces + t->piece_off;
}

static const toy_vocab *sort_vocab; /* qsort has no user argument; guarded by trie_lock */

static int token_cmp(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx, ly;
    const char *px = token_bytes(sort_vocab, x, &lx), *py = token_bytes(sort_vocab, y, &ly);
    const int c = memcmp(px, py, lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static pthread_mutex_t trie_lock = PTHREAD_MUTEX_INITIALIZER;

static grammar_trie *trie_build(const toy_vocab *v) {
    grammar_trie *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    uint32_t n_tok = 0;
    uint64_t n_bytes = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint32_t len;
        token_bytes(v, i, &len);
        if (len) n_tok++, n_bytes += len;
    }
    t->tokens = malloc((n_tok ? n_tok : 1) * sizeof *t->tokens);
    const size_t cap = (size_t)n_bytes + 1; /* nodes: at most one per byte */
    t->byte = malloc(cap);
    t->depth = malloc(cap * sizeof *t->depth);
    t->end = malloc(cap * sizeof *t->end);
    t->tok_off = malloc(cap * sizeof *t->tok_off);
    t->tok_n = malloc(cap * sizeof *t->tok_n);
    uint32_t *path = NULL;
    uint32_t max_len = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint32_t len;
        token_bytes(v, i, &len);
        if (len > max_len) max_len = len;
    }
    path = malloc(((size_t)max_len + 1) * sizeof *path);
    if (!t->tokens || !t->byte || !t->depth || !t->end || !t->tok_off || !t->tok_n || !path) {
        free(path);
        grammar_trie_free(t);
        return NULL;
    }
    n_tok = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        uint32_t len;
        token_bytes(v, i, &len);
        if (len) t->tokens[n_tok++] = i;
    }
    sort_vocab = v;
    qsort(t->tokens, n_tok, sizeof *t->tokens, token_cmp);
    /* nodes in depth-first order: each token adds the bytes past what it shares with
     * the one before it */
    const char *prev = NULL;
    uint32_t prev_len = 0, n = 0;
    for (uint32_t k = 0; k < n_tok; k++) {
        uint32_t len;
        const char *b = token_bytes(v, t->tokens[k], &len);
        uint32_t common = 0;
        while (prev && common < len && common < prev_len && b[common] == prev[common]) common++;
        if (prev && common == len && len == prev_len) { /* the same bytes as the last token */
            t->tok_n[path[len]]++;
            continue;
        }
        for (uint32_t d = common; d < len; d++) {
            t->byte[n] = (uint8_t)b[d];
            t->depth[n] = d + 1;
            t->tok_off[n] = 0;
            t->tok_n[n] = 0;
            path[d + 1] = n++;
        }
        t->tok_off[path[len]] = k;
        t->tok_n[path[len]] = 1;
        prev = b;
        prev_len = len;
    }
    t->n_nodes = n;
    t->max_depth = max_len;
    /* end of each subtree: the next node no deeper than it */
    uint32_t sp = 0;
    for (uint32_t i = 0; i < n; i++) {
        while (sp && t->depth[path[sp - 1]] >= t->depth[i]) t->end[path[--sp]] = i;
        path[sp++] = i;
    }
    while (sp) t->end[path[--sp]] = n;
    free(path);
    return t;
}

static const grammar_trie *trie_of(const toy_vocab *v) {
    pthread_mutex_lock(&trie_lock);
    toy_vocab *mv = (toy_vocab *)v; /* the trie is a cache: built once, then read only */
    if (!mv->grammar_trie) {
        mv->grammar_trie = trie_build(v);
        mv->grammar_trie_free = grammar_trie_free;
    }
    const grammar_trie *t = mv->grammar_trie;
    pthread_mutex_unlock(&trie_lock);
    return t;
}

/* ---------------------------------------------------------------- the grammar */

typedef struct {
    uint32_t *key;
    uint32_t key_len;
    uint64_t hash;
    int32_t *next;  /* 256 successors (DEAD, UNKNOWN or a state), allocated on first use */
    uint64_t *mask; /* the allowed tokens, once computed */
    bool accepting; /* the text may end here */
} dstate;

struct toy_grammar {
    gbnf_rules rules;
    const toy_vocab *vocab; /* NULL: no masks, only toy_grammar_accepts */
    const grammar_trie *trie;
    int32_t n_vocab;
    pthread_mutex_t lock; /* the cache below is shared by every sampler of the grammar */
    dstate *states;
    uint32_t n_states, cap_states;
    uint32_t *slots;      /* open-addressing hash of states: index + 1, 0 empty */
    uint32_t slot_mask;
    size_t cache_bytes;
    uint64_t epoch;
    uint32_t *start_key;  /* the stacks before any text */
    uint32_t start_len;
    /* scratch for computing a successor */
    uint32_t *work;       /* the stacks being expanded, innermost last */
    size_t n_work, cap_work;
    uint32_t *out;        /* the stacks whose top is a character set (or empty) */
    size_t n_out, cap_out;
    size_t *found;        /* where each of them begins in out */
    size_t n_found, cap_found;
    uint64_t steps;       /* expansion steps for this code point */
    uint64_t op_steps;    /* and for this operation (a mask, a token) */
    bool overflow;        /* the last successor hit a limit */
    const char *overflow_what;
    int32_t *walk_state;  /* per trie depth, for the mask walk */
};

static bool reserve(uint32_t **v, size_t n, size_t *cap, size_t more) {
    if (*cap - n >= more) return true;
    size_t c = *cap ? *cap : 1024;
    while (c - n < more) c *= 2;
    uint32_t *w = realloc(*v, c * sizeof *w);
    if (!w) return false;
    *v = w;
    *cap = c;
    return true;
}

static bool limit(toy_grammar *g, const char *what) {
    g->overflow = true;
    g->overflow_what = what;
    return false;
}

/* Records the stack work[off] (its length, then its elements). */
static bool found_push(toy_grammar *g, size_t off) {
    if (g->n_found >= (size_t)GRAMMAR_MAX_STACKS * 16)
        return limit(g, "the grammar is too ambiguous here (too many ways to go on)");
    const size_t n = 1 + (size_t)g->work[off];
    if (!reserve(&g->out, g->n_out, &g->cap_out, n)) return false;
    if (g->n_found == g->cap_found) {
        const size_t cap = g->cap_found ? g->cap_found * 2 : 64;
        size_t *f = realloc(g->found, cap * sizeof *f);
        if (!f) return false;
        g->found = f;
        g->cap_found = cap;
    }
    memcpy(g->out + g->n_out, g->work + off, n * sizeof *g->out);
    g->found[g->n_found++] = g->n_out;
    g->n_out += n;
    return true;
}

/* Expands the stack work[off] (its length, then its elements), which ends the work,
 * until each top is a character set, recording every result. false on a limit or no
 * memory. */
static bool expand(toy_grammar *g, size_t off, int depth) {
    if (++g->steps > GRAMMAR_MAX_WORK) return limit(g, "the grammar is too ambiguous here (too many ways to go on)");
    if (++g->op_steps > GRAMMAR_MAX_STEP_WORK) return limit(g, "the grammar needs too much work at this point");
    const uint32_t len = g->work[off];
    if (depth > GRAMMAR_MAX_DEPTH || len > GRAMMAR_MAX_DEPTH) return limit(g, "rules nest too deeply here");
    if (len == 0 || g->rules.elems[g->work[off + len]].kind == GE_CHARS) return found_push(g, off);
    const uint32_t top = g->work[off + len];
    const uint32_t rule = g->rules.elems[top].value;
    const bool cont = g->rules.elems[top + 1].kind != GE_END; /* a rule that ends its sequence needs no return */
    for (uint32_t a = g->rules.rule_alt[rule]; a < g->rules.rule_alt[rule + 1]; a++) {
        const uint32_t first = g->rules.alts[a];
        if (!reserve(&g->work, g->n_work, &g->cap_work, (size_t)len + 3)) return false;
        const size_t noff = g->n_work;
        uint32_t *w = g->work;
        uint32_t n = len - 1;
        memcpy(w + noff + 1, w + off + 1, (size_t)n * sizeof *w);
        if (cont) w[noff + 1 + n++] = top + 1;
        if (g->rules.elems[first].kind != GE_END) w[noff + 1 + n++] = first;
        w[noff] = n;
        g->n_work = noff + 1 + n;
        const bool ok = expand(g, noff, depth + 1);
        g->n_work = noff;
        if (!ok) return false;
    }
    return true;
}

static int stack_cmp(const void *a, const void *b, void *user) {
    const uint32_t *out = user;
    const uint32_t *x = out + *(const size_t *)a, *y = out + *(const size_t *)b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    for (uint32_t i = 1; i <= x[0]; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* The found stacks as a key (sorted, unique) with the given partial character, into
 * *key (malloc'd); *key NULL when there are too many (g->overflow). */
static toy_status found_key(toy_grammar *g, uint32_t partial, uint32_t need, uint32_t **key, uint32_t *key_len) {
    *key = NULL;
    qsort_r(g->found, g->n_found, sizeof *g->found, stack_cmp, g->out);
    size_t n = 3, n_stacks = 0;
    for (size_t i = 0; i < g->n_found; i++) {
        if (i && !stack_cmp(&g->found[i - 1], &g->found[i], g->out)) continue;
        n += 1 + g->out[g->found[i]];
        n_stacks++;
    }
    if (n_stacks > GRAMMAR_MAX_STACKS) {
        limit(g, "the grammar is too ambiguous here (too many ways to go on)");
        return TOY_OK;
    }
    uint32_t *k = malloc(n * sizeof *k);
    if (!k) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    k[0] = partial;
    k[1] = need;
    k[2] = (uint32_t)n_stacks;
    size_t at = 3;
    for (size_t i = 0; i < g->n_found; i++) {
        if (i && !stack_cmp(&g->found[i - 1], &g->found[i], g->out)) continue;
        const uint32_t *st = g->out + g->found[i];
        memcpy(k + at, st, (1 + (size_t)st[0]) * sizeof *k);
        at += 1 + st[0];
    }
    *key = k;
    *key_len = (uint32_t)n;
    return TOY_OK;
}

/* Starts a computation of stacks. */
static void found_reset(toy_grammar *g) {
    g->n_work = g->n_out = g->n_found = 0;
    g->steps = 0;
    g->overflow = false;
}

/* The stacks after reading code point cpt from the stacks of key: *out NULL when none
 * accepts it (or a limit was hit: g->overflow). */
static toy_status step_cpt(toy_grammar *g, const uint32_t *key, uint32_t cpt, uint32_t **out, uint32_t *out_len) {
    found_reset(g);
    const uint32_t n_stacks = key[2];
    size_t at = 3;
    for (uint32_t i = 0; i < n_stacks; i++) {
        const uint32_t len = key[at];
        const uint32_t *s = key + at + 1;
        at += 1 + len;
        if (!len) continue;
        const uint32_t top = s[len - 1];
        if (!ty_gbnf_set_matches(&g->rules, g->rules.elems[top].value, cpt)) continue;
        if (!reserve(&g->work, g->n_work, &g->cap_work, (size_t)len + 2))
            return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
        const size_t off = g->n_work;
        uint32_t n = len - 1;
        memcpy(g->work + off + 1, s, (size_t)n * sizeof *s);
        if (g->rules.elems[top + 1].kind != GE_END) g->work[off + 1 + n++] = top + 1;
        g->work[off] = n;
        g->n_work = off + 1 + n;
        const bool ok = expand(g, off, 0);
        g->n_work = off;
        if (!ok) {
            *out = NULL;
            return g->overflow ? TOY_OK : ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
        }
    }
    if (!g->n_found) {
        *out = NULL;
        return TOY_OK;
    }
    return found_key(g, 0, 0, out, out_len);
}

/* The least code point a UTF-8 sequence of n bytes may encode (shorter forms of the
 * same value are invalid, and would let a grammar be passed by a character it
 * excludes). */
static uint32_t utf8_min(uint32_t n) { return n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000; }

/* Whether some stack's top set holds a code point in lo..hi. */
static bool some_top_meets(const toy_grammar *g, const uint32_t *key, uint32_t lo, uint32_t hi) {
    size_t at = 3;
    for (uint32_t i = 0; i < key[2]; i++) {
        const uint32_t len = key[at];
        if (len && ty_gbnf_set_meets(&g->rules, g->rules.elems[key[at + len]].value, lo, hi)) return true;
        at += 1 + len;
    }
    return false;
}

/* Whether a character of `total` bytes beginning with the bits `partial` (need more
 * 6-bit groups to come) can still be accepted by some stack. Surrogates are no
 * characters: a prefix such as ED BC, which only they complete, leads nowhere. */
static bool partial_viable(const toy_grammar *g, const uint32_t *key, uint32_t partial, uint32_t need, uint32_t total) {
    uint32_t lo = partial << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
    if (lo < utf8_min(total)) lo = utf8_min(total);
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) return false;
    if (lo <= 0xDFFF && hi >= 0xD800)
        return (lo < 0xD800 && some_top_meets(g, key, lo, 0xD7FF)) || (hi > 0xDFFF && some_top_meets(g, key, 0xE000, hi));
    return some_top_meets(g, key, lo, hi);
}

/* The key after one byte: *out NULL when the byte leads nowhere. key[1] holds the
 * continuation bytes still expected and, above bit 8, the length of the character. */
static toy_status step_byte(toy_grammar *g, const uint32_t *key, uint32_t key_len, uint8_t b, uint32_t **out,
                            uint32_t *out_len) {
    *out = NULL;
    uint32_t partial = key[0], need = key[1] & 0xFF, total = key[1] >> 8;
    if (need == 0) {
        if (b < 0x80) return step_cpt(g, key, b, out, out_len);
        if (b >= 0xC2 && b <= 0xDF) partial = b & 0x1F, need = 1, total = 2;
        else if (b >= 0xE0 && b <= 0xEF) partial = b & 0x0F, need = 2, total = 3;
        else if (b >= 0xF0 && b <= 0xF4) partial = b & 0x07, need = 3, total = 4;
        else return TOY_OK; /* not a lead byte */
    } else {
        if ((b & 0xC0) != 0x80) return TOY_OK;
        partial = (partial << 6) | (b & 0x3F);
        if (--need == 0) {
            if (partial < utf8_min(total) || partial > 0x10FFFF || (partial >= 0xD800 && partial <= 0xDFFF))
                return TOY_OK;
            uint32_t *k = malloc(key_len * sizeof *k);
            if (!k) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
            memcpy(k, key, key_len * sizeof *k);
            k[0] = k[1] = 0;
            const toy_status st = step_cpt(g, k, partial, out, out_len);
            free(k);
            return st;
        }
    }
    if (!partial_viable(g, key, partial, need, total)) return TOY_OK;
    uint32_t *k = malloc(key_len * sizeof *k);
    if (!k) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    memcpy(k, key, key_len * sizeof *k);
    k[0] = partial;
    k[1] = need | total << 8;
    *out = k;
    *out_len = key_len;
    return TOY_OK;
}

static bool key_accepting(const uint32_t *key) {
    if (key[1]) return false;
    size_t at = 3;
    for (uint32_t i = 0; i < key[2]; i++) {
        if (!key[at]) return true;
        at += 1 + key[at];
    }
    return false;
}

/* ---------------------------------------------------------------- the state cache */

static uint64_t key_hash(const uint32_t *key, uint32_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < len; i++) h = (h ^ key[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static void cache_clear(toy_grammar *g) {
    for (uint32_t i = 0; i < g->n_states; i++) {
        free(g->states[i].key);
        free(g->states[i].next);
        free(g->states[i].mask);
    }
    g->n_states = 0;
    if (g->slots) memset(g->slots, 0, ((size_t)g->slot_mask + 1) * sizeof *g->slots);
    g->cache_bytes = 0;
    g->epoch++;
}

static bool slots_grow(toy_grammar *g) {
    const size_t n = g->slots ? ((size_t)g->slot_mask + 1) * 2 : 1024;
    uint32_t *s = calloc(n, sizeof *s);
    if (!s) return false;
    for (uint32_t i = 0; i < g->n_states; i++) {
        size_t h = g->states[i].hash & (n - 1);
        while (s[h]) h = (h + 1) & (n - 1);
        s[h] = i + 1;
    }
    free(g->slots);
    g->slots = s;
    g->slot_mask = (uint32_t)(n - 1);
    return true;
}

/* The state of a key, added if new (taking the key, or freeing it if known); -1 with
 * the error set when there is no memory. */
static int32_t intern(toy_grammar *g, uint32_t *key, uint32_t len) {
    const uint64_t h = key_hash(key, len);
    if (g->slots) {
        for (size_t i = h & g->slot_mask; g->slots[i]; i = (i + 1) & g->slot_mask) {
            const dstate *s = &g->states[g->slots[i] - 1];
            if (s->hash == h && s->key_len == len && !memcmp(s->key, key, len * sizeof *key)) {
                free(key);
                return (int32_t)(g->slots[i] - 1);
            }
        }
    }
    if ((!g->slots || (uint64_t)(g->n_states + 1) * 2 > (uint64_t)g->slot_mask + 1) && !slots_grow(g)) goto nomem;
    if (g->n_states == g->cap_states) {
        const uint32_t cap = g->cap_states ? g->cap_states * 2 : 256;
        dstate *s = realloc(g->states, (size_t)cap * sizeof *s);
        if (!s) goto nomem;
        g->states = s;
        g->cap_states = cap;
    }
    if (g->n_states >= INT32_MAX / 2) goto nomem;
    dstate *s = &g->states[g->n_states];
    *s = (dstate){.key = key, .key_len = len, .hash = h, .accepting = key_accepting(key)};
    size_t i = h & g->slot_mask;
    while (g->slots[i]) i = (i + 1) & g->slot_mask;
    g->slots[i] = g->n_states + 1;
    g->cache_bytes += len * sizeof *key + sizeof *s;
    return (int32_t)g->n_states++;
nomem:
    free(key);
    ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    return -1;
}

/* The successor of state s on byte b: a state, DEAD, or -3 on failure (error set). */
static int32_t next_state(toy_grammar *g, int32_t s, uint8_t b) {
    dstate *d = &g->states[s];
    if (d->next && d->next[b] != UNKNOWN) return d->next[b];
    if (!d->next) {
        if (!(d->next = malloc(256 * sizeof *d->next))) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory"), -3;
        for (int i = 0; i < 256; i++) d->next[i] = UNKNOWN;
        g->cache_bytes += 256 * sizeof *d->next;
    }
    uint32_t *key, len = 0;
    if (step_byte(g, d->key, d->key_len, b, &key, &len)) return -3;
    if (!key) {
        if (g->overflow) return ty_error(TOY_ERR_INVALID, "%s", g->overflow_what), -3;
        g->states[s].next[b] = DEAD;
        return DEAD;
    }
    const int32_t t = intern(g, key, len);
    if (t < 0) return -3;
    g->states[s].next[b] = t; /* intern may have moved the states */
    return t;
}

/* The cursor's state in the current cache, found again after a reset. */
static int32_t cursor_state(toy_grammar *g, grammar_cursor *c) {
    if (c->epoch == g->epoch && c->state >= 0) return c->state;
    if (g->cache_bytes > GRAMMAR_CACHE_BYTES) cache_clear(g);
    uint32_t *k = malloc(c->key_len * sizeof *k);
    if (!k) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory"), -1;
    memcpy(k, c->key, c->key_len * sizeof *k);
    const int32_t s = intern(g, k, (uint32_t)c->key_len);
    c->state = s;
    c->epoch = g->epoch;
    return s;
}

/* Points the cursor at state s (its key copied, so it survives a reset). */
static toy_status cursor_set(toy_grammar *g, grammar_cursor *c, int32_t s) {
    const dstate *d = &g->states[s];
    uint32_t *k = realloc(c->key, d->key_len * sizeof *k);
    if (!k) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    memcpy(k, d->key, d->key_len * sizeof *k);
    c->key = k;
    c->key_len = d->key_len;
    c->state = s;
    c->epoch = g->epoch;
    return TOY_OK;
}

/* ---------------------------------------------------------------- masks */

/* The allowed tokens of state s into bits: the trie walked through the automaton. */
static toy_status walk_mask(toy_grammar *g, int32_t s, uint64_t *bits) {
    const size_t words = ((size_t)g->n_vocab + 63) / 64;
    memset(bits, 0, words * sizeof *bits);
    const grammar_trie *t = g->trie;
    int32_t *at = g->walk_state;
    at[0] = s;
    for (uint32_t i = 0; i < t->n_nodes;) {
        const int32_t from = at[t->depth[i] - 1];
        const int32_t *known = g->states[from].next; /* the common case: an edge seen before */
        const int32_t n = known && known[t->byte[i]] != UNKNOWN ? known[t->byte[i]] : next_state(g, from, t->byte[i]);
        if (n == -3) return TOY_ERR_INVALID;
        if (n == DEAD) {
            i = t->end[i];
            continue;
        }
        at[t->depth[i]] = n;
        for (uint32_t k = 0; k < t->tok_n[i]; k++) {
            const int32_t tok = t->tokens[t->tok_off[i] + k];
            if (tok < g->n_vocab) bits[tok / 64] |= 1ull << (tok % 64);
        }
        i++;
    }
    if (g->states[s].accepting)
        for (int32_t i = 0; i < g->vocab->n_eog; i++) {
            const int32_t tok = g->vocab->eog[i];
            if (tok < g->n_vocab) bits[tok / 64] |= 1ull << (tok % 64);
        }
    return TOY_OK;
}

static toy_status state_mask(toy_grammar *g, int32_t s, const uint64_t **out) {
    if (!g->states[s].mask) {
        const size_t words = ((size_t)g->n_vocab + 63) / 64;
        uint64_t *m = malloc(words * sizeof *m);
        if (!m) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
        const toy_status st = walk_mask(g, s, m);
        if (st) {
            free(m);
            return st;
        }
        g->states[s].mask = m;
        g->cache_bytes += words * sizeof *m;
    }
    *out = g->states[s].mask;
    return TOY_OK;
}

/* ---------------------------------------------------------------- the cursor */

/* Every operation holds the lock, and has its own budget of work. */
static void op_begin(toy_grammar *g) {
    pthread_mutex_lock(&g->lock);
    g->op_steps = 0;
}

toy_status ty_grammar_cursor_init(const toy_grammar *cg, grammar_cursor *c) {
    toy_grammar *g = (toy_grammar *)cg;
    memset(c, 0, sizeof *c);
    c->state = -1;
    if (!(c->key = malloc(g->start_len * sizeof *c->key))) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    memcpy(c->key, g->start_key, g->start_len * sizeof *c->key);
    c->key_len = g->start_len;
    return TOY_OK;
}

void ty_grammar_cursor_free(grammar_cursor *c) {
    free(c->key);
    c->key = NULL;
}

static toy_status no_token(const grammar_cursor *c) {
    if (c->finished) return ty_error(TOY_ERR_INVALID, "the grammar's text has ended");
    return ty_error(TOY_ERR_INVALID, "the grammar allows no token of this vocabulary here");
}

toy_status ty_grammar_allowed(const toy_grammar *cg, grammar_cursor *c, uint64_t *bits) {
    toy_grammar *g = (toy_grammar *)cg;
    if (!g->vocab) return ty_error(TOY_ERR_INVALID, "the grammar was made without a vocabulary");
    op_begin(g);
    toy_status st = TOY_OK;
    const size_t words = ((size_t)g->n_vocab + 63) / 64;
    if (c->finished) {
        memset(bits, 0, words * sizeof *bits);
    } else {
        const uint64_t *m;
        const int32_t s = cursor_state(g, c);
        if (s < 0) st = TOY_ERR_NOMEM;
        if (!st) st = state_mask(g, s, &m);
        if (!st) memcpy(bits, m, words * sizeof *bits);
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

bool ty_grammar_cursor_complete(const grammar_cursor *c) { return c->finished || key_accepting(c->key); }

toy_status ty_grammar_allows(const toy_grammar *cg, grammar_cursor *c, const int32_t *tokens, size_t n, bool *allowed) {
    toy_grammar *g = (toy_grammar *)cg;
    if (!g->vocab) return ty_error(TOY_ERR_INVALID, "the grammar was made without a vocabulary");
    if (c->finished) {
        memset(allowed, 0, n * sizeof *allowed);
        return TOY_OK;
    }
    op_begin(g);
    toy_status st = TOY_OK;
    const int32_t s = cursor_state(g, c);
    if (s < 0) st = TOY_ERR_NOMEM;
    const uint64_t *m = s >= 0 ? g->states[s].mask : NULL; /* a mask already made answers at once */
    for (size_t i = 0; !st && i < n; i++) {
        const int32_t t = tokens[i];
        if (t < 0 || t >= g->n_vocab) {
            allowed[i] = false;
        } else if (m) {
            allowed[i] = m[t / 64] >> (t % 64) & 1;
        } else if (toy_vocab_is_eog(g->vocab, t)) {
            allowed[i] = g->states[s].accepting;
        } else {
            uint32_t len;
            const char *b = token_bytes(g->vocab, t, &len);
            int32_t at = len ? s : DEAD;
            for (uint32_t k = 0; at >= 0 && k < len; k++) at = next_state(g, at, (uint8_t)b[k]);
            if (at == -3) st = TOY_ERR_INVALID;
            allowed[i] = at >= 0;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

toy_status ty_grammar_mask_logits(const toy_grammar *cg, grammar_cursor *c, float *logits, int32_t n_vocab) {
    toy_grammar *g = (toy_grammar *)cg;
    if (!g->vocab) return ty_error(TOY_ERR_INVALID, "the grammar was made without a vocabulary");
    if (c->finished) return no_token(c);
    op_begin(g);
    const uint64_t *m = NULL;
    const int32_t s = cursor_state(g, c);
    toy_status st = s < 0 ? TOY_ERR_NOMEM : state_mask(g, s, &m);
    if (!st) {
        bool any = false;
        for (int32_t w = 0; w * 64 < n_vocab; w++) {
            const uint64_t bits = w * 64 < g->n_vocab ? m[w] : 0;
            const int32_t end = (w + 1) * 64 < n_vocab ? (w + 1) * 64 : n_vocab;
            if (bits == ~0ull && end - w * 64 == 64) {
                any = true;
                continue;
            }
            for (int32_t v = w * 64; v < end; v++) {
                if (v < g->n_vocab && (bits >> (v % 64) & 1)) any = true;
                else logits[v] = -__builtin_inff();
            }
        }
        if (!any) st = no_token(c);
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

toy_status ty_grammar_accept_token(const toy_grammar *cg, grammar_cursor *c, int32_t token) {
    toy_grammar *g = (toy_grammar *)cg;
    if (!g->vocab || token < 0 || token >= g->vocab->n_tokens)
        return ty_error(TOY_ERR_INVALID, "token %d is not in the grammar's vocabulary", (int)token);
    if (c->finished) return no_token(c);
    op_begin(g);
    toy_status st = TOY_OK;
    int32_t s = cursor_state(g, c);
    if (s < 0) st = TOY_ERR_NOMEM;
    if (!st && toy_vocab_is_eog(g->vocab, token)) {
        if (g->states[s].accepting) c->finished = true;
        else st = ty_error(TOY_ERR_INVALID, "end of generation where the grammar's text is not complete");
    } else if (!st) {
        uint32_t len;
        const char *b = token_bytes(g->vocab, token, &len);
        if (!len) st = ty_error(TOY_ERR_INVALID, "the grammar does not allow token %d (it has no text)", (int)token);
        for (uint32_t i = 0; !st && i < len; i++) {
            s = next_state(g, s, (uint8_t)b[i]);
            if (s == -3) st = TOY_ERR_INVALID;
            else if (s == DEAD) st = ty_error(TOY_ERR_INVALID, "the grammar does not allow token %d here", (int)token);
        }
        if (!st) st = cursor_set(g, c, s);
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

bool ty_grammar_allows_reference(const toy_grammar *cg, const grammar_cursor *c, int32_t token) {
    toy_grammar *g = (toy_grammar *)cg;
    if (c->finished || token < 0 || token >= g->vocab->n_tokens) return false;
    if (toy_vocab_is_eog(g->vocab, token)) return key_accepting(c->key);
    uint32_t len;
    const char *b = token_bytes(g->vocab, token, &len);
    if (!len) return false;
    op_begin(g);
    uint32_t *key = malloc(c->key_len * sizeof *key), key_len = (uint32_t)c->key_len;
    bool ok = key != NULL;
    if (ok) memcpy(key, c->key, c->key_len * sizeof *key);
    for (uint32_t i = 0; ok && i < len; i++) {
        uint32_t *next, next_len = 0;
        ok = !step_byte(g, key, key_len, (uint8_t)b[i], &next, &next_len) && next;
        free(key);
        key = ok ? next : NULL;
        key_len = next_len;
    }
    free(key);
    pthread_mutex_unlock(&g->lock);
    return ok;
}

/* ---------------------------------------------------------------- the public API */

static toy_status grammar_make(const toy_vocab *vocab, const char *gbnf, size_t len, toy_grammar **out) {
    toy_grammar *g = calloc(1, sizeof *g);
    if (!g) return ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    pthread_mutex_init(&g->lock, NULL);
    toy_status st = ty_gbnf_parse(gbnf, len, "root", &g->rules);
    if (st) {
        free(g);
        return st;
    }
    g->vocab = vocab;
    if (vocab) {
        g->n_vocab = vocab->n_tokens;
        if (!(g->trie = trie_of(vocab))) st = ty_error(TOY_ERR_NOMEM, "grammar: out of memory for the token trie");
        if (!st && (!(g->walk_state = malloc(((size_t)g->trie->max_depth + 1) * sizeof *g->walk_state))))
            st = ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    }
    /* the start: every alternative of the root rule, expanded */
    if (!st && !reserve(&g->work, 0, &g->cap_work, 2)) st = ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
    if (!st) {
        g->work[0] = 1;
        g->work[1] = g->rules.n_elems; /* a stand-in element: a reference to the root */
        gelem *e = realloc(g->rules.elems, ((size_t)g->rules.n_elems + 2) * sizeof *e);
        if (!e) st = ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
        else {
            g->rules.elems = e;
            e[g->rules.n_elems] = (gelem){GE_RULE, g->rules.root};
            e[g->rules.n_elems + 1] = (gelem){GE_END, 0};
        }
    }
    if (!st) {
        found_reset(g);
        g->n_work = 2;
        if (!expand(g, 0, 0))
            st = g->overflow ? ty_error(TOY_ERR_INVALID, "%s", g->overflow_what) : ty_error(TOY_ERR_NOMEM, "grammar: out of memory");
        else st = found_key(g, 0, 0, &g->start_key, &g->start_len);
        if (!st && !g->start_key) st = ty_error(TOY_ERR_INVALID, "%s", g->overflow_what);
    }
    if (st) {
        toy_grammar_free(g);
        return st;
    }
    *out = g;
    return TOY_OK;
}

toy_status toy_grammar_new(const toy_vocab *vocab, const char *gbnf, toy_grammar **out) {
    if (!gbnf || !out) return ty_error(TOY_ERR_INVALID, "toy_grammar_new: bad arguments");
    *out = NULL;
    return grammar_make(vocab, gbnf, strlen(gbnf), out);
}

void toy_grammar_free(toy_grammar *g) {
    if (!g) return;
    cache_clear(g);
    free(g->states);
    free(g->slots);
    free(g->start_key);
    free(g->work);
    free(g->out);
    free(g->found);
    free(g->walk_state);
    ty_gbnf_free(&g->rules);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

bool toy_grammar_accepts(const toy_grammar *cg, const char *text, size_t len) {
    toy_grammar *g = (toy_grammar *)cg;
    if (!g || (!text && len)) return false;
    op_begin(g);
    bool ok = true;
    grammar_cursor c = {.state = -1};
    c.key = g->start_key;
    c.key_len = g->start_len;
    int32_t s = cursor_state(g, &c);
    ok = s >= 0;
    for (size_t i = 0; ok && i < len; i++) {
        g->op_steps = 0; /* a budget per byte: a long text is no stall of a generation */
        s = next_state(g, s, (uint8_t)text[i]);
        ok = s >= 0;
    }
    ok = ok && g->states[s].accepting;
    pthread_mutex_unlock(&g->lock);
    return ok;
}

toy_status toy_grammar_from_json_schema(const toy_vocab *vocab, const char *schema_json, bool strict,
                                        toy_grammar **out) {
    if (!schema_json || !out) return ty_error(TOY_ERR_INVALID, "toy_grammar_from_json_schema: bad arguments");
    *out = NULL;
    char *gbnf = NULL;
    toy_status st = toy_json_schema_to_gbnf(schema_json, strict, &gbnf);
    if (!st) st = toy_grammar_new(vocab, gbnf, out);
    free(gbnf);
    return st;
}
