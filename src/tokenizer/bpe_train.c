/* bpe_train.c — learning a byte-level BPE tokenizer from plain text
 * (toy_tokenizer_train), written so that llama.cpp's llm_tokenizer_bpe, and toy's
 * tokenizer_bpe.c, tokenize with it exactly as it was learned.
 *
 * 1. Counting. The files are read in chunks of about CHUNK bytes, each cut before a
 *    printable ASCII character that starts a line, where every pre-tokenizer splits
 *    anyway, so counting chunk by chunk finds the pre-tokens of the whole text. In a
 *    chunk the text of the special tokens is cut out and each piece between is
 *    pre-tokenized by ty_pretokenize, the code toy_tokenize runs. Each thread counts
 *    the distinct pre-tokens of the chunks it took in a table of its own; the tables
 *    are summed. Memory: a batch of chunks and the distinct pre-tokens, not the text.
 * 2. Merging. Every distinct pre-token starts as its bytes. The most frequent adjacent
 *    pair of tokens (each pre-token weighing its count) becomes a new token and is
 *    merged in every pre-token, left to right. A tie goes to the pair whose left
 *    token's bytes, then right token's bytes, are lower in byte order (memcmp, a prefix
 *    before its extensions). A pair whose bytes are already a token, or are spelled by
 *    a special token's text in GPT-2's characters, is not merged: every token text has
 *    one id, and `vocab_size` is bytes + merges + specials. Each pair keeps its count and the pre-tokens it occurs in, and a
 *    merge updates counts in those pre-tokens only. The pairs wait in a max-heap whose
 *    entries may be stale: a merge lowers the counts of pairs that existed before it and
 *    raises only those of the pairs it creates (all holding the new token, pushed once
 *    the merge is done), so an entry is never below its pair's count, and one popped
 *    too high is pushed again with the true count.
 * 3. Writing: tokens in GPT-2's byte-to-character alphabet, the merges as "left right"
 *    in the order learned, then the special tokens.
 *
 * Why tokenizing gives what training did: in a pre-token llama.cpp merges the queued
 * pair of lowest rank first, the leftmost of equal ones. A merge only creates pairs
 * holding the new token, whose ranks are all higher, so this applies the merges in
 * rank order, each left to right: step 2's sequence. That holds for a pre-token that
 * is merged, hence no pre-tokenizer under which llama.cpp looks the whole pre-token up
 * in the vocabulary first (ignore_merges): a pre-token that is a token would become it
 * even where the merges split it. (On the KJV text no such pre-token turned up, but
 * nothing here proves there is none.)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buffer.h"
#include "error.h"
#include "gguf.h"
#include "params.h"
#include "threadpool.h"
#include "tokenizer_bpe.h"
#include "unicode.h"

#define CHUNK (1u << 20)
#define DEFAULT_PRE "qwen2"
#define DEFAULT_NAME "toy-bpe"

static const char *const default_special[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
enum { N_DEFAULT_SPECIAL = 3 };

/* ChatML, as SmolLM2's and Qwen2's tokenizer_config.json have it */
static const char chatml_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

static toy_status oom(void) { return ty_error(TOY_ERR_NOMEM, "tokenizer train: out of memory"); }

/* n elements of `size` bytes, NULL if that overflows or fails. */
static void *alloc_array(size_t n, size_t size) {
    size_t bytes;
    if (ty_mul_overflows(n ? n : 1, size, &bytes)) return NULL;
    return malloc(bytes);
}

/* Room for one more element: *cap grows (doubling, overflow-checked) past n. Returns the
 * array, moved or not, or NULL (the old one is kept) when that is impossible. */
static void *grow_array(void *v, size_t n, size_t *cap, size_t size) {
    if (n < *cap) return v;
    size_t c = *cap ? *cap : 16, bytes;
    while (c <= n)
        if (ty_mul_overflows(c, 2, &c)) return NULL;
    if (ty_mul_overflows(c, size, &bytes)) return NULL;
    void *p = realloc(v, bytes);
    if (p) *cap = c;
    return p;
}

/* ---------------------------------------------------------------- byte strings -> u64 */

typedef struct {
    uint64_t hash, value;
    size_t off; /* of the key in `keys` */
    uint32_t len;
} bmap_entry;

/* A growing hash table of byte strings (pre-tokens with their counts, tokens with their
 * ids), keys copied into one arena. */
typedef struct {
    bmap_entry *e;
    size_t n, cap;
    uint32_t *slot; /* entry index + 1; 0: empty */
    size_t n_slots;
    ty_buf keys;
} bmap;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static const char *bmap_key(const bmap *m, size_t i) { return m->keys.v + m->e[i].off; }

static bool bmap_rehash(bmap *m) {
    size_t n_slots = m->n_slots ? m->n_slots : 1024, bytes;
    while (n_slots / 2 <= m->n)
        if (ty_mul_overflows(n_slots, 2, &n_slots)) return false;
    if (ty_mul_overflows(n_slots, sizeof *m->slot, &bytes)) return false;
    uint32_t *slot = calloc(1, bytes);
    if (!slot) return false;
    for (size_t i = 0; i < m->n; i++) {
        size_t s = m->e[i].hash & (n_slots - 1);
        while (slot[s]) s = (s + 1) & (n_slots - 1);
        slot[s] = (uint32_t)(i + 1);
    }
    free(m->slot);
    m->slot = slot;
    m->n_slots = n_slots;
    return true;
}

/* The entry of a key; absent, a new one with value 0 when `insert`, else -1. -2: out of
 * memory. */
static int64_t bmap_get(bmap *m, const char *key, size_t len, bool insert) {
    if (len > UINT32_MAX) return insert ? -2 : -1;
    uint64_t h = hash_bytes(key, len);
    if (m->n_slots) {
        for (size_t s = h & (m->n_slots - 1); m->slot[s]; s = (s + 1) & (m->n_slots - 1)) {
            const bmap_entry *e = &m->e[m->slot[s] - 1];
            if (e->hash == h && e->len == len && !memcmp(bmap_key(m, m->slot[s] - 1), key, len))
                return m->slot[s] - 1;
        }
    }
    if (!insert) return -1;
    if (m->n >= UINT32_MAX - 1) return -2;
    if (m->n_slots / 2 <= m->n + 1 && !bmap_rehash(m)) return -2;
    bmap_entry *e = grow_array(m->e, m->n, &m->cap, sizeof *e);
    if (!e) return -2;
    m->e = e;
    size_t off = m->keys.n;
    ty_buf_append(&m->keys, key, len);
    if (m->keys.oom) return -2;
    m->e[m->n] = (bmap_entry){h, 0, off, (uint32_t)len};
    size_t s = h & (m->n_slots - 1);
    while (m->slot[s]) s = (s + 1) & (m->n_slots - 1);
    m->slot[s] = (uint32_t)(m->n + 1);
    return (int64_t)m->n++;
}

static void bmap_free(bmap *m) {
    free(m->e);
    free(m->slot);
    free(m->keys.v);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- special tokens */

typedef struct {
    const char **text;
    size_t *len;
    size_t n;
} specials;

/* Whether [i - 1, i] lies inside an occurrence of a special token's text in s[0..n). */
static bool inside_special(const specials *sp, const char *s, size_t n, size_t i) {
    for (size_t k = 0; k < sp->n; k++) {
        size_t l = sp->len[k];
        for (size_t st = i >= l ? i - l + 1 : 0; st < i; st++)
            if (st + l <= n && !memcmp(s + st, sp->text[k], l)) return true;
    }
    return false;
}

static bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_ascii_alnum(char c) { return is_ascii_letter(c) || (c >= '0' && c <= '9'); }

/* Where to end a chunk of s[0..n) (not the end of its file): before a printable ASCII
 * character that starts a line, where every pre-tokenizer of llama.cpp splits (none
 * joins a line break with a following letter, digit or punctuation mark, and none looks
 * behind). Lacking one: before the space of "a b", where they split too. Lacking that,
 * at a character boundary, where pre-tokens may differ from those of the whole text. */
static size_t find_cut(const specials *sp, const char *s, size_t n) {
    for (size_t i = n - 1; i > 0; i--)
        if (s[i - 1] == '\n' && s[i] > ' ' && s[i] < 0x7F && !inside_special(sp, s, n, i))
            return i;
    for (size_t i = n - 2; i > 0; i--)
        if (s[i] == ' ' && is_ascii_alnum(s[i - 1]) && is_ascii_letter(s[i + 1]) &&
            !inside_special(sp, s, n, i))
            return i;
    for (size_t i = n - 1; i > 0; i--)
        if (((unsigned char)s[i] & 0xC0) != 0x80 && !inside_special(sp, s, n, i)) return i;
    return n;
}

/* ---------------------------------------------------------------- reading chunks */

typedef struct {
    char *v;
    size_t n;
} chunk;

typedef struct {
    const char *const *paths;
    size_t n_paths, file;
    FILE *f;
    ty_buf carry; /* the rest of the last chunk's text, to start the next */
    uint64_t n_bytes;
} reader;

/* The next chunk of text into *c (its buffer holds CHUNK bytes); *got = false after the
 * last. A chunk never spans two files. */
static toy_status reader_next(reader *r, const specials *sp, chunk *c, bool *got) {
    for (;;) {
        if (!r->f) {
            if (r->file == r->n_paths) {
                *got = false;
                return TOY_OK;
            }
            r->f = fopen(r->paths[r->file], "rb");
            if (!r->f)
                return ty_error(TOY_ERR_IO, "%s: %s", r->paths[r->file], strerror(errno));
        }
        if (r->carry.n) memcpy(c->v, r->carry.v, r->carry.n);
        c->n = r->carry.n;
        r->carry.n = 0;
        bool eof = false;
        while (c->n < CHUNK) {
            size_t got_n = fread(c->v + c->n, 1, CHUNK - c->n, r->f);
            c->n += got_n;
            r->n_bytes += got_n;
            if (got_n == 0) {
                if (ferror(r->f))
                    return ty_error(TOY_ERR_IO, "%s: read failed: %s", r->paths[r->file],
                                    strerror(errno));
                eof = true;
                break;
            }
        }
        if (eof) {
            fclose(r->f);
            r->f = NULL;
            r->file++;
            if (!c->n) continue;
            *got = true;
            return TOY_OK;
        }
        size_t cut = find_cut(sp, c->v, c->n);
        ty_buf_append(&r->carry, c->v + cut, c->n - cut);
        if (r->carry.oom) return oom();
        c->n = cut;
        *got = true;
        return TOY_OK;
    }
}

/* ---------------------------------------------------------------- counting pre-tokens */

typedef struct {
    bmap words; /* pre-token -> count */
    uint64_t n_pretokens;
    toy_status st; /* the first failure of this thread, with its message */
    char msg[512];
} counter;

typedef struct {
    const ty_pretokenizer *pre;
    const specials *sp;
    const chunk *chunks;
    counter *counters; /* one per thread */
} count_job;

static toy_status count_pretoken(void *user, const char *word, size_t len) {
    counter *c = user;
    int64_t i = bmap_get(&c->words, word, len, true);
    if (i < 0) return oom();
    c->words.e[i].value++;
    c->n_pretokens++;
    return TOY_OK;
}

/* The first occurrence of special token k in s[from..n), n if none. */
static size_t find_special(const specials *sp, size_t k, const char *s, size_t n, size_t from) {
    const char *p = memmem(s + from, n - from, sp->text[k], sp->len[k]);
    return p ? (size_t)(p - s) : n;
}

/* The pre-tokens of one chunk: the text between special tokens' (leftmost first, the
 * longest of those starting together), each piece on its own as toy_tokenize does. */
static void count_chunk(void *ctx, int64_t task, int thread) {
    const count_job *job = ctx;
    counter *c = &job->counters[thread];
    if (c->st) return;
    const char *s = job->chunks[task].v;
    size_t n = job->chunks[task].n, pos = 0;
    size_t *next = alloc_array(job->sp->n, sizeof *next);
    toy_status st = next ? TOY_OK : oom();
    for (size_t k = 0; next && k < job->sp->n; k++) next[k] = find_special(job->sp, k, s, n, 0);
    while (!st) {
        size_t end = n, best = SIZE_MAX;
        for (size_t k = 0; k < job->sp->n; k++)
            if (next[k] < end || (next[k] == end && best != SIZE_MAX &&
                                  job->sp->len[k] > job->sp->len[best])) {
                end = next[k];
                best = k;
            }
        if (end > pos) st = ty_pretokenize(job->pre, s + pos, end - pos, count_pretoken, c);
        if (best == SIZE_MAX) break;
        pos = end + job->sp->len[best];
        for (size_t k = 0; k < job->sp->n; k++)
            if (next[k] < pos) next[k] = find_special(job->sp, k, s, n, pos);
    }
    free(next);
    if (st) {
        c->st = st;
        snprintf(c->msg, sizeof c->msg, "%s", toy_last_error());
    }
}

/* ---------------------------------------------------------------- merging */

typedef struct {
    size_t off;     /* of its symbols in trainer.sym */
    uint32_t n;     /* symbols now */
    uint64_t count; /* occurrences in the text */
} word;

typedef struct {
    int32_t left, right;
    int64_t count;   /* occurrences in the text, now */
    uint32_t *where; /* the words it occurs in (perhaps no longer), no repeats */
    size_t n_where, cap_where;
    int32_t created; /* the token whose merge created it last touched it */
    bool dead;       /* its bytes were already a token */
} pair;

typedef struct {
    int64_t count;
    uint32_t pair;
} heap_entry;

typedef struct {
    /* tokens: bytes, by id; ids 0..255 the bytes, 256 + k the k-th merge's */
    ty_buf tok_bytes;
    size_t *tok_off;
    uint32_t *tok_len;
    size_t n_tok, cap_tok_off, cap_tok_len;
    bmap tok_ids; /* bytes -> id, UINT64_MAX: reserved (a special token's text) */
    int32_t *merge_left, *merge_right; /* of merge k, which made token 256 + k */

    word *words;
    size_t n_words;
    int32_t *sym;

    pair *pairs;
    size_t n_pairs, cap_pairs;
    uint32_t *pair_slot; /* pair index + 1, by hash of (left, right) */
    size_t n_pair_slots;

    heap_entry *heap;
    size_t n_heap, cap_heap;

    uint32_t *touched; /* pairs created by the current merge */
    size_t n_touched, cap_touched;
    bool oom;
} trainer;

static int cmp_tokens(const trainer *t, int32_t a, int32_t b) {
    uint32_t la = t->tok_len[a], lb = t->tok_len[b];
    int c = memcmp(t->tok_bytes.v + t->tok_off[a], t->tok_bytes.v + t->tok_off[b],
                   la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

/* Does entry a come out of the heap before entry b? */
static bool heap_before(const trainer *t, heap_entry a, heap_entry b) {
    if (a.count != b.count) return a.count > b.count;
    const pair *pa = &t->pairs[a.pair], *pb = &t->pairs[b.pair];
    int c = cmp_tokens(t, pa->left, pb->left);
    return (c ? c : cmp_tokens(t, pa->right, pb->right)) < 0;
}

static void heap_push(trainer *t, heap_entry e) {
    heap_entry *h = grow_array(t->heap, t->n_heap, &t->cap_heap, sizeof *h);
    if (!h) {
        t->oom = true;
        return;
    }
    t->heap = h;
    size_t i = t->n_heap++;
    while (i > 0 && heap_before(t, e, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static heap_entry heap_pop(trainer *t) {
    heap_entry *h = t->heap, top = h[0], last = h[--t->n_heap];
    size_t i = 0, n = t->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(t, h[c + 1], h[c])) c++;
        if (!heap_before(t, h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}

static size_t pair_hash(int32_t left, int32_t right) {
    uint64_t k = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) * 0x9E3779B97F4A7C15ull;
    return (size_t)(k >> 17);
}

static bool pair_rehash(trainer *t) {
    size_t n_slots = t->n_pair_slots ? t->n_pair_slots : 4096, bytes;
    while (n_slots / 2 <= t->n_pairs)
        if (ty_mul_overflows(n_slots, 2, &n_slots)) return false;
    if (ty_mul_overflows(n_slots, sizeof *t->pair_slot, &bytes)) return false;
    uint32_t *slot = calloc(1, bytes);
    if (!slot) return false;
    for (size_t i = 0; i < t->n_pairs; i++) {
        size_t s = pair_hash(t->pairs[i].left, t->pairs[i].right) & (n_slots - 1);
        while (slot[s]) s = (s + 1) & (n_slots - 1);
        slot[s] = (uint32_t)(i + 1);
    }
    free(t->pair_slot);
    t->pair_slot = slot;
    t->n_pair_slots = n_slots;
    return true;
}

/* The pair (left, right), made when absent; NULL when out of memory. */
static pair *pair_get(trainer *t, int32_t left, int32_t right) {
    size_t s = pair_hash(left, right) & (t->n_pair_slots - 1);
    for (; t->pair_slot[s]; s = (s + 1) & (t->n_pair_slots - 1)) {
        pair *p = &t->pairs[t->pair_slot[s] - 1];
        if (p->left == left && p->right == right) return p;
    }
    if (t->n_pairs >= UINT32_MAX - 1) return NULL;
    if (t->n_pair_slots / 2 <= t->n_pairs + 1) {
        if (!pair_rehash(t)) return NULL;
        s = pair_hash(left, right) & (t->n_pair_slots - 1);
        while (t->pair_slot[s]) s = (s + 1) & (t->n_pair_slots - 1);
    }
    pair *v = grow_array(t->pairs, t->n_pairs, &t->cap_pairs, sizeof *v);
    if (!v) return NULL;
    t->pairs = v;
    v[t->n_pairs] = (pair){left, right, 0, NULL, 0, 0, -1, false};
    t->pair_slot[s] = (uint32_t)(t->n_pairs + 1);
    return &v[t->n_pairs++];
}

/* Adds `delta` occurrences of (left, right) in word w. A pair that gains occurrences
 * notes w among its words; during merge `created` (the new token's id), a pair it
 * creates is remembered, to be queued once the merge is done. */
static void pair_add(trainer *t, int32_t left, int32_t right, int64_t delta, uint32_t w,
                     int32_t created) {
    pair *p = pair_get(t, left, right);
    if (!p) {
        t->oom = true;
        return;
    }
    p->count += delta;
    if (delta <= 0) return;
    if (!p->n_where || p->where[p->n_where - 1] != w) {
        uint32_t *v = grow_array(p->where, p->n_where, &p->cap_where, sizeof *v);
        if (!v) {
            t->oom = true;
            return;
        }
        p->where = v;
        v[p->n_where++] = w;
    }
    if (created >= 0 && p->created != created) {
        p->created = created;
        uint32_t *v = grow_array(t->touched, t->n_touched, &t->cap_touched, sizeof *v);
        if (!v) {
            t->oom = true;
            return;
        }
        t->touched = v;
        v[t->n_touched++] = (uint32_t)(p - t->pairs);
    }
}

/* A new token of the given bytes; -1 when out of memory. */
static int32_t add_token(trainer *t, const char *bytes, size_t len) {
    if (len > UINT32_MAX || t->n_tok >= INT32_MAX) return -1;
    size_t *off = grow_array(t->tok_off, t->n_tok, &t->cap_tok_off, sizeof *off);
    if (!off) return -1;
    t->tok_off = off;
    uint32_t *tl = grow_array(t->tok_len, t->n_tok, &t->cap_tok_len, sizeof *tl);
    if (!tl) return -1;
    t->tok_len = tl;
    int64_t e = bmap_get(&t->tok_ids, bytes, len, true);
    if (e < 0) return -1;
    t->tok_ids.e[e].value = t->n_tok;
    t->tok_off[t->n_tok] = t->tok_bytes.n;
    t->tok_len[t->n_tok] = (uint32_t)len;
    ty_buf_append(&t->tok_bytes, bytes, len);
    if (t->tok_bytes.oom) return -1;
    return (int32_t)t->n_tok++;
}

/* Replaces every (a, b) in word w, left to right, by token m, keeping the pair counts. */
static void merge_in_word(trainer *t, uint32_t w, int32_t a, int32_t b, int32_t m) {
    word *wd = &t->words[w];
    int32_t *s = t->sym + wd->off;
    int64_t c = (int64_t)wd->count;
    uint32_t n = wd->n, j = 0;
    for (uint32_t i = 0; i < n;) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            if (j > 0) {
                pair_add(t, s[j - 1], a, -c, w, m);
                pair_add(t, s[j - 1], m, c, w, m);
            }
            if (i + 2 < n) {
                pair_add(t, b, s[i + 2], -c, w, m);
                pair_add(t, m, s[i + 2], c, w, m);
            }
            pair_add(t, a, b, -c, w, m);
            s[j++] = m;
            i += 2;
        } else {
            s[j++] = s[i++];
        }
    }
    wd->n = j;
}

/* Learns up to n_merges merges. */
static toy_status learn(trainer *t, int32_t n_merges) {
    if (!pair_rehash(t)) return oom();
    for (size_t w = 0; w < t->n_words && !t->oom; w++) {
        const word *wd = &t->words[w];
        const int32_t *s = t->sym + wd->off;
        for (uint32_t i = 0; i + 1 < wd->n; i++)
            pair_add(t, s[i], s[i + 1], (int64_t)wd->count, (uint32_t)w, -1);
    }
    for (size_t i = 0; i < t->n_pairs && !t->oom; i++)
        heap_push(t, (heap_entry){t->pairs[i].count, (uint32_t)i});

    ty_buf bytes = {0};
    t->merge_left = alloc_array((size_t)n_merges, sizeof *t->merge_left);
    t->merge_right = alloc_array((size_t)n_merges, sizeof *t->merge_right);
    if (!t->merge_left || !t->merge_right) t->oom = true;
    int32_t n_done = 0;
    while (n_done < n_merges && t->n_heap && !t->oom) {
        heap_entry e = heap_pop(t);
        pair *p = &t->pairs[e.pair];
        if (p->dead || p->count <= 0) continue;
        if (e.count != p->count) {
            heap_push(t, (heap_entry){p->count, e.pair});
            continue;
        }
        int32_t a = p->left, b = p->right;
        bytes.n = 0;
        ty_buf_append(&bytes, t->tok_bytes.v + t->tok_off[a], t->tok_len[a]);
        ty_buf_append(&bytes, t->tok_bytes.v + t->tok_off[b], t->tok_len[b]);
        if (bytes.oom) break;
        if (bmap_get(&t->tok_ids, bytes.v, bytes.n, false) >= 0) {
            p->dead = true;
            continue;
        }
        int32_t m = add_token(t, bytes.v, bytes.n);
        if (m < 0) {
            t->oom = true;
            break;
        }
        t->merge_left[n_done] = a;
        t->merge_right[n_done] = b;
        n_done++;

        /* the pair's words, taken out: the pairs array moves as pairs are made */
        uint32_t *where = p->where;
        size_t n_where = p->n_where;
        p->where = NULL;
        p->n_where = p->cap_where = 0;
        t->n_touched = 0;
        for (size_t i = 0; i < n_where && !t->oom; i++) merge_in_word(t, where[i], a, b, m);
        free(where);
        for (size_t i = 0; i < t->n_touched && !t->oom; i++) {
            const pair *q = &t->pairs[t->touched[i]];
            if (q->count > 0) heap_push(t, (heap_entry){q->count, t->touched[i]});
        }
    }
    free(bytes.v);
    if (t->oom || bytes.oom) return oom();
    return TOY_OK;
}

static void trainer_free(trainer *t) {
    free(t->tok_bytes.v);
    free(t->tok_off);
    free(t->tok_len);
    bmap_free(&t->tok_ids);
    free(t->merge_left);
    free(t->merge_right);
    free(t->words);
    free(t->sym);
    for (size_t i = 0; i < t->n_pairs; i++) free(t->pairs[i].where);
    free(t->pairs);
    free(t->pair_slot);
    free(t->heap);
    free(t->touched);
}

/* ---------------------------------------------------------------- writing */

/* A token's bytes as GPT-2's characters, appended to b. */
static void append_gpt2(ty_buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char utf8[4];
        ty_buf_append(b, utf8, ty_utf8_encode(ty_unicode_byte_to_cpt((uint8_t)s[i]), utf8));
    }
}

/* The vocabulary as a GGUF of tokenizer metadata, to out_path, or with data to memory. */
static toy_status write_vocab(const trainer *t, const specials *sp, int32_t n_merges, const char *pre,
                              const char *name, const char *out_path, void **data, size_t *size) {
    size_t n_tok = t->n_tok + sp->n, n_strs = n_tok > (size_t)n_merges ? n_tok : (size_t)n_merges;
    ty_buf text = {0}, merges = {0};
    size_t *tok_end = alloc_array(n_tok, sizeof *tok_end);
    size_t *merge_end = alloc_array((size_t)n_merges, sizeof *merge_end);
    const char **strs = alloc_array(n_strs, sizeof *strs);
    size_t *lens = alloc_array(n_strs, sizeof *lens);
    int32_t *types = alloc_array(n_tok, sizeof *types);
    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_status st = TOY_OK;
    if (!tok_end || !merge_end || !strs || !lens || !types || !w) st = oom();

    for (size_t i = 0; !st && i < n_tok; i++) {
        if (i < t->n_tok)
            append_gpt2(&text, t->tok_bytes.v + t->tok_off[i], t->tok_len[i]);
        else
            ty_buf_append(&text, sp->text[i - t->n_tok], sp->len[i - t->n_tok]);
        tok_end[i] = text.n;
        types[i] = i < t->n_tok ? TOY_TOKEN_NORMAL : TOY_TOKEN_CONTROL;
    }
    for (int32_t k = 0; !st && k < n_merges; k++) {
        int32_t a = t->merge_left[k], b = t->merge_right[k];
        append_gpt2(&merges, t->tok_bytes.v + t->tok_off[a], t->tok_len[a]);
        ty_buf_append(&merges, " ", 1);
        append_gpt2(&merges, t->tok_bytes.v + t->tok_off[b], t->tok_len[b]);
        merge_end[k] = merges.n;
    }
    if (!st && (text.oom || merges.oom)) st = oom();

    const uint32_t bos = (uint32_t)t->n_tok; /* <|endoftext|> */
#define S(key, s) \
    if (!st) st = toy_gguf_writer_set_str(w, key, s, strlen(s))
    S("general.architecture", "llama");
    S("general.name", name);
    S("tokenizer.ggml.model", "gpt2");
    S("tokenizer.ggml.pre", pre);
#undef S
    if (!st) {
        for (size_t i = 0; i < n_tok; i++) {
            strs[i] = text.v + (i ? tok_end[i - 1] : 0);
            lens[i] = tok_end[i] - (i ? tok_end[i - 1] : 0);
        }
        st = toy_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", strs, lens, n_tok);
    }
    if (!st)
        st = toy_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TOY_GGUF_INT32, types,
                                       n_tok);
    if (!st) {
        for (int32_t k = 0; k < n_merges; k++) {
            strs[k] = (merges.v ? merges.v : "") + (k ? merge_end[k - 1] : 0);
            lens[k] = merge_end[k] - (k ? merge_end[k - 1] : 0);
        }
        st = toy_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", strs, lens,
                                           (uint64_t)n_merges);
    }
    if (!st) st = toy_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", bos);
    if (!st) st = toy_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", bos);
    if (!st) st = toy_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    if (!st) st = toy_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    if (!st)
        st = toy_gguf_writer_set_str(w, "tokenizer.chat_template", chatml_template,
                                     sizeof chatml_template - 1);
    if (!st && data) ty_gguf_writer_to_memory(w, data, size);
    if (!st) st = toy_gguf_writer_write(w, out_path);

    toy_gguf_writer_free(w);
    free(text.v);
    free(merges.v);
    free(tok_end);
    free(merge_end);
    free(strs);
    free(lens);
    free(types);
    return st;
}

/* ---------------------------------------------------------------- the whole run */

/* The special tokens' texts, checked: none empty or repeated, none a byte token's text.
 * A text that spells bytes in GPT-2's characters reserves those bytes in tok_ids, so
 * no merge makes a token of the same text. */
static toy_status check_specials(const toy_tokenizer_train_params *p, specials *sp,
                                 trainer *t) {
    size_t n;
    if (ty_add_overflows(N_DEFAULT_SPECIAL, p->n_special, &n)) return oom();
    sp->text = alloc_array(n, sizeof *sp->text);
    sp->len = alloc_array(n, sizeof *sp->len);
    if (!sp->text || !sp->len) return oom();
    ty_buf bytes = {0};
    toy_status st = TOY_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const char *s = i < N_DEFAULT_SPECIAL ? default_special[i]
                                              : p->special[i - N_DEFAULT_SPECIAL];
        if (!s || !*s) {
            st = ty_error(TOY_ERR_INVALID, "special token %zu is empty", i + 1);
            break;
        }
        size_t len = strlen(s);
        for (size_t k = 0; k < sp->n && !st; k++)
            if (sp->len[k] == len && !memcmp(sp->text[k], s, len))
                st = ty_error(TOY_ERR_INVALID, "special token '%s' is given twice", s);
        bytes.n = 0;
        bool spells_bytes = true;
        for (size_t pos = 0; pos < len && spells_bytes;) {
            int byte = ty_unicode_cpt_to_byte(ty_utf8_decode(s, len, &pos));
            char c = (char)byte;
            if (byte < 0) spells_bytes = false;
            else ty_buf_append(&bytes, &c, 1);
        }
        if (!st && bytes.oom) st = oom();
        if (!st && spells_bytes && bytes.n == 1)
            st = ty_error(TOY_ERR_INVALID, "special token '%s' is the text of byte token %d", s,
                          (unsigned char)bytes.v[0]);
        if (!st && spells_bytes) {
            int64_t e = bmap_get(&t->tok_ids, bytes.v, bytes.n, true);
            if (e < 0) st = oom();
            else t->tok_ids.e[e].value = UINT64_MAX;
        }
        sp->text[sp->n] = s;
        sp->len[sp->n++] = len;
    }
    free(bytes.v);
    return st;
}

/* The pre-tokenizer of a name, refusing those under which llama.cpp looks whole
 * pre-tokens up in the vocabulary before merging. */
static toy_status open_pretokenizer(const char *name, ty_pretokenizer **out) {
    if (ty_pretokenizer_new(name, strlen(name), NULL, out)) {
        ty_buf known = {0};
        for (size_t i = 0; ty_pretokenizer_name(i); i++) {
            ty_pretokenizer *p;
            const char *n = ty_pretokenizer_name(i);
            if (ty_pretokenizer_new(n, strlen(n), NULL, &p)) continue;
            if (!ty_pretokenizer_ignores_merges(p)) {
                if (known.n) ty_buf_append(&known, ", ", 2);
                ty_buf_append(&known, n, strlen(n));
            }
            ty_pretokenizer_free(p);
        }
        toy_status st = ty_error(TOY_ERR_INVALID, "unknown pre-tokenizer '%s' (known: %s)", name,
                                 known.v ? known.v : "");
        free(known.v);
        return st;
    }
    if (ty_pretokenizer_ignores_merges(*out)) {
        ty_pretokenizer_free(*out);
        *out = NULL;
        return ty_error(TOY_ERR_INVALID,
                        "pre-tokenizer '%s': llama.cpp looks each whole pre-token up in the "
                        "vocabulary before merging under this name, so the learned merges "
                        "would not be applied as learned; choose another (smaug-bpe splits as "
                        "llama-bpe does, without the lookup)",
                        name);
    }
    return TOY_OK;
}

/* Every file there, readable and no directory, before minutes of reading the others;
 * without opening them (opening and closing a FIFO would cost its writer the data). */
static toy_status check_files(const toy_tokenizer_train_params *p) {
    if (!p->n_data || !p->data_paths) return ty_error(TOY_ERR_INVALID, "no training data files");
    for (size_t i = 0; i < p->n_data; i++) {
        const char *path = p->data_paths[i];
        if (!path) return ty_error(TOY_ERR_INVALID, "training data file %zu is NULL", i + 1);
        struct stat sb;
        if (stat(path, &sb) || access(path, R_OK)) return ty_error(TOY_ERR_IO, "%s: %s", path, strerror(errno));
        if (S_ISDIR(sb.st_mode)) return ty_error(TOY_ERR_IO, "%s: is a directory", path);
    }
    return TOY_OK;
}

/* Counts the pre-tokens of every file into counters[0] (the other counters summed in). */
static toy_status count_all(const toy_tokenizer_train_params *p, const ty_pretokenizer *pre,
                            const specials *sp, int n_threads, counter *counters,
                            uint64_t *n_bytes) {
    ty_pool *pool = ty_pool_new(n_threads);
    /* two chunks a thread, so a thread that finishes early takes another */
    size_t n_chunks = 2 * (size_t)n_threads;
    chunk *chunks = calloc(n_chunks, sizeof *chunks); /* calloc checks n * size */
    reader r = {.paths = p->data_paths, .n_paths = p->n_data};
    toy_status st = pool && chunks ? TOY_OK : oom();
    for (size_t i = 0; !st && i < n_chunks; i++)
        if (!(chunks[i].v = malloc(CHUNK))) st = oom();

    count_job job = {pre, sp, chunks, counters};
    while (!st) {
        size_t n = 0;
        bool got = true;
        while (!st && n < n_chunks && got) {
            st = reader_next(&r, sp, &chunks[n], &got);
            n += got && !st;
        }
        if (st || !n) break;
        ty_pool_run(pool, (int64_t)n, count_chunk, &job);
        for (int i = 0; i < n_threads && !st; i++)
            if (counters[i].st) st = ty_error(counters[i].st, "%s", counters[i].msg);
    }
    *n_bytes = r.n_bytes;

    for (int i = 1; i < n_threads && !st; i++) {
        for (size_t k = 0; k < counters[i].words.n && !st; k++) {
            const bmap_entry *e = &counters[i].words.e[k];
            int64_t j = bmap_get(&counters[0].words, bmap_key(&counters[i].words, k), e->len, true);
            if (j < 0) st = oom();
            else counters[0].words.e[j].value += e->value;
        }
        counters[0].n_pretokens += counters[i].n_pretokens;
        bmap_free(&counters[i].words);
    }

    if (r.f) fclose(r.f);
    free(r.carry.v);
    for (size_t i = 0; chunks && i < n_chunks; i++) free(chunks[i].v);
    free(chunks);
    ty_pool_free(pool);
    return st;
}

/* The distinct pre-tokens as words of byte symbols. */
static toy_status make_words(trainer *t, const bmap *counts) {
    size_t n_sym = 0;
    for (size_t i = 0; i < counts->n; i++)
        if (ty_add_overflows(n_sym, counts->e[i].len, &n_sym)) return oom();
    t->words = alloc_array(counts->n, sizeof *t->words);
    t->sym = alloc_array(n_sym, sizeof *t->sym);
    if (!t->words || !t->sym) return oom();
    size_t off = 0;
    for (size_t i = 0; i < counts->n; i++) {
        const bmap_entry *e = &counts->e[i];
        const unsigned char *s = (const unsigned char *)bmap_key(counts, i);
        t->words[i] = (word){off, e->len, e->value};
        for (uint32_t k = 0; k < e->len; k++) t->sym[off + k] = s[k];
        off += e->len;
    }
    t->n_words = counts->n;
    return TOY_OK;
}

void toy_tokenizer_train_params_init(toy_tokenizer_train_params *params, size_t size) {
    const toy_tokenizer_train_params defaults = {.size = sizeof defaults};
    ty_params_init(params, size, &defaults, sizeof defaults);
}

toy_status toy_tokenizer_train(const toy_tokenizer_train_params *caller_params, const char *out_path) {
    if (!caller_params || !out_path) return ty_error(TOY_ERR_INVALID, "tokenizer train: no parameters or output path");
    toy_tokenizer_train_params full = toy_tokenizer_train_default_params();
    if (ty_params_read(&full, sizeof full, caller_params, "toy_tokenizer_train_params")) return TOY_ERR_INVALID;
    if (ty_result_check(full.stats, "toy_tokenizer_train_stats")) return TOY_ERR_INVALID;
    const toy_tokenizer_train_params *p = &full;
    if (p->n_special && !p->special)
        return ty_error(TOY_ERR_INVALID, "n_special is %zu but special is NULL", p->n_special);
    const char *pre_name = p->pre && *p->pre ? p->pre : DEFAULT_PRE;
    const char *name = p->name && *p->name ? p->name : DEFAULT_NAME;
    int n_threads = p->n_threads < 1 ? 1 : p->n_threads > 256 ? 256 : p->n_threads;

    trainer t = {0};
    specials sp = {0};
    ty_pretokenizer *pre = NULL;
    counter *counters = NULL;
    uint64_t n_bytes = 0;
    toy_status st = check_specials(p, &sp, &t);
    size_t min_vocab = 256 + sp.n;
    if (!st && (p->vocab_size < 0 || (size_t)p->vocab_size < min_vocab))
        st = ty_error(TOY_ERR_INVALID,
                      "vocab size %d is below %zu, the 256 byte tokens and %zu special tokens",
                      (int)p->vocab_size, min_vocab, sp.n);
    if (!st) st = open_pretokenizer(pre_name, &pre);
    if (!st) st = check_files(p);
    for (int b = 0; !st && b < 256; b++) {
        char c = (char)b;
        if (add_token(&t, &c, 1) < 0) st = oom();
    }

    if (!st && !(counters = calloc((size_t)n_threads, sizeof *counters))) st = oom();
    if (!st) st = count_all(p, pre, &sp, n_threads, counters, &n_bytes);
    if (!st && !counters[0].n_pretokens)
        st = p->n_data == 1
                 ? ty_error(TOY_ERR_INVALID, "%s: no training text", p->data_paths[0])
                 : ty_error(TOY_ERR_INVALID, "no training text in the %zu data files",
                            p->n_data);
    if (!st) st = make_words(&t, &counters[0].words);
    uint64_t n_pretokens = counters ? counters[0].n_pretokens : 0;
    uint64_t n_distinct = counters ? counters[0].words.n : 0;
    if (counters) bmap_free(&counters[0].words);

    int32_t n_merges = 0;
    if (!st) {
        st = learn(&t, (int32_t)((size_t)p->vocab_size - min_vocab));
        n_merges = (int32_t)(t.n_tok - 256);
    }
    if (!st) st = write_vocab(&t, &sp, n_merges, pre_name, name, out_path, NULL, NULL);
    if (!st && p->stats) {
        const toy_tokenizer_train_stats stats = {sizeof stats, n_bytes, n_pretokens, n_distinct, n_merges,
                                                 (int32_t)(t.n_tok + sp.n)};
        st = ty_result_write(p->stats, &stats, sizeof stats, "toy_tokenizer_train_stats");
    }

    for (int i = 0; counters && i < n_threads; i++) bmap_free(&counters[i].words);
    free(counters);
    ty_pretokenizer_free(pre);
    trainer_free(&t);
    free(sp.text);
    free(sp.len);
    return st;
}

toy_status ty_bpe_byte_vocab(void **data, size_t *size) {
    const toy_tokenizer_train_params p = toy_tokenizer_train_default_params();
    trainer t = {0};
    specials sp = {0};
    toy_status st = check_specials(&p, &sp, &t);
    for (int b = 0; !st && b < 256; b++) {
        char c = (char)b;
        if (add_token(&t, &c, 1) < 0) st = oom();
    }
    if (!st) st = write_vocab(&t, &sp, 0, DEFAULT_PRE, "toy-bytes", "(the byte-level vocabulary)", data, size);
    trainer_free(&t);
    free(sp.text);
    free(sp.len);
    return st;
}
