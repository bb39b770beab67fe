/* symbols.c — merging adjacent symbols, shared by SPM and BPE (llama.cpp's llm_symbol
 * and llm_bigram_*): a text cut into characters, a heap of the pairs that are tokens
 * or merges, and the tokens of what is left. */
#include "symbols.h"

#include <stdlib.h>

#include "unicode.h"

int ty_symbols_init(ty_symbol *sym, const char *text, size_t n) {
    int n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t l = ty_utf8_len((unsigned char)text[off]);
        if (l > n - off) l = n - off;
        sym[n_sym] = (ty_symbol){n_sym - 1, off + l == n ? -1 : n_sym + 1, off, l};
        off += l;
        n_sym++;
    }
    return n_sym;
}

static bool bigram_before(const ty_bigram *a, const ty_bigram *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

bool ty_bigram_push(ty_bigram_queue *q, ty_bigram b) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        ty_bigram *v = realloc(q->v, cap * sizeof *v);
        if (!v) return false;
        q->v = v;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &q->v[parent])) break;
        q->v[i] = q->v[parent];
        i = parent;
    }
    q->v[i] = b;
    return true;
}

static ty_bigram bigram_pop(ty_bigram_queue *q) {
    ty_bigram top = q->v[0], last = q->v[--q->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && bigram_before(&q->v[c + 1], &q->v[c])) c++;
        if (!bigram_before(&q->v[c], &last)) break;
        q->v[i] = q->v[c];
        i = c;
    }
    if (q->n) q->v[i] = last;
    return top;
}

int ty_bigram_merge_next(ty_bigram_queue *q, ty_symbol *sym) {
    while (q->n) {
        ty_bigram b = bigram_pop(q);
        ty_symbol *l = &sym[b.left], *r = &sym[b.right];
        /* stale: one side was merged since (llama.cpp compares the texts) */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        return b.left;
    }
    return -1;
}

void ty_symbols_emit(const toy_vocab *v, const char *text, const ty_symbol *sym, int n_sym,
                     int32_t unk, ty_ids *out) {
    for (int i = 0; n_sym > 0 && i != -1; i = sym[i].next) {
        int32_t id = ty_vocab_find(v, text + sym[i].off, sym[i].n);
        if (id >= 0) {
            ty_ids_push(out, id);
            continue;
        }
        for (size_t j = 0; j < sym[i].n; j++) {
            int32_t b = v->byte_token[(unsigned char)text[sym[i].off + j]];
            if (b < 0) b = unk;
            if (b >= 0) ty_ids_push(out, b);
        }
    }
}
