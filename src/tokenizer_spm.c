/* tokenizer_spm.c — SentencePiece BPE as llama.cpp's llm_tokenizer_spm runs it.
 *
 * Spaces become U+2581 ("▁", with one in front of text that starts the input or
 * follows a special token, when add_space_prefix), the text is cut into UTF-8
 * characters, and the adjacent pair whose concatenation is the token with the highest
 * score is merged, again and again (ties: leftmost first). A piece that is no token
 * at the end falls back to its bytes, <0xNN>. */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "unicode.h"

typedef struct {
    int prev, next; /* -1: none */
    size_t off, n;  /* bytes of the escaped text; n = 0 once merged into its left */
} spm_symbol;

typedef struct {
    int left, right;
    float score;
    size_t size; /* bytes of the pair when it was queued; differs once it is stale */
} spm_bigram;

typedef struct {
    spm_bigram *v;
    size_t n, cap;
} spm_queue;

/* llama.cpp's priority queue order: the higher score first, then the leftmost. */
static bool spm_before(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static bool spm_queue_push(spm_queue *q, spm_bigram b) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        spm_bigram *v = realloc(q->v, cap * sizeof *v);
        if (!v) return false;
        q->v = v;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!spm_before(&b, &q->v[parent])) break;
        q->v[i] = q->v[parent];
        i = parent;
    }
    q->v[i] = b;
    return true;
}

static spm_bigram spm_queue_pop(spm_queue *q) {
    spm_bigram top = q->v[0], last = q->v[--q->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && spm_before(&q->v[c + 1], &q->v[c])) c++;
        if (!spm_before(&q->v[c], &last)) break;
        q->v[i] = q->v[c];
        i = c;
    }
    if (q->n) q->v[i] = last;
    return top;
}

typedef struct {
    const toy_vocab *vocab;
    const char *text;
    spm_symbol *sym;
    spm_queue queue;
    bool oom;
} spm_session;

static void try_add_bigram(spm_session *s, int left, int right) {
    if (left < 0 || right < 0) return;
    const spm_symbol *l = &s->sym[left], *r = &s->sym[right];
    size_t size = l->n + r->n;
    int32_t id = toy_vocab_find(s->vocab, s->text + l->off, size);
    if (id < 0) return;
    spm_bigram b = {left, right, s->vocab->tokens[id].score, size};
    if (!spm_queue_push(&s->queue, b)) s->oom = true;
}

toy_status toy_spm_tokenize(const toy_vocab *v, const char *text, size_t len, bool first,
                            toy_ids *out) {
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */

    /* the escaped text: at most 3 bytes for every input byte, plus the prefix */
    size_t cap;
    if (toy_mul_overflows(len + 1, 3, &cap))
        return toy_error(TOY_ERR_NOMEM, "tokenize: text too long");
    char *esc = malloc(cap);
    if (!esc) return toy_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    size_t n = 0;
    if (v->add_space_prefix && first) {
        memcpy(esc, space, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(esc + n, space, 3);
            n += 3;
        } else {
            esc[n++] = text[i];
        }
    }

    spm_session s = {.vocab = v, .text = esc};
    s.sym = malloc((n ? n : 1) * sizeof *s.sym);
    if (!s.sym) {
        free(esc);
        return toy_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    }

    /* one symbol per UTF-8 character (a truncated one at the end keeps what is left) */
    int n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t l = toy_utf8_len((unsigned char)esc[off]);
        if (l > n - off) l = n - off;
        s.sym[n_sym] = (spm_symbol){n_sym - 1, off + l == n ? -1 : n_sym + 1, off, l};
        off += l;
        n_sym++;
    }

    for (int i = 1; i < n_sym; i++) try_add_bigram(&s, i - 1, i);

    while (s.queue.n && !s.oom) {
        spm_bigram b = spm_queue_pop(&s.queue);
        spm_symbol *l = &s.sym[b.left], *r = &s.sym[b.right];
        /* one of them was merged since this pair was queued */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.sym[r->next].prev = b.left;
        try_add_bigram(&s, l->prev, b.left);
        try_add_bigram(&s, b.left, l->next);
    }

    /* Every merged symbol is a token; a single character that is not falls back to
     * its bytes. (llama.cpp's resegment also looks the text up among the merges it
     * made, but a text that is no token was never queued, so that never applies.) */
    for (int i = 0; n_sym > 0 && i != -1; i = s.sym[i].next) {
        const spm_symbol *sym = &s.sym[i];
        int32_t id = toy_vocab_find(v, esc + sym->off, sym->n);
        if (id >= 0) {
            toy_ids_push(out, id);
            continue;
        }
        for (size_t j = 0; j < sym->n; j++) {
            /* llama.cpp throws when the vocabulary has no token for the byte; toy uses
             * the unknown token, or drops the byte when there is none */
            int32_t b = v->byte_token[(unsigned char)esc[sym->off + j]];
            if (b < 0) b = v->unk;
            if (b >= 0) toy_ids_push(out, b);
        }
    }

    bool oom = s.oom;
    free(s.queue.v);
    free(s.sym);
    free(esc);
    if (oom) return toy_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    return TOY_OK;
}
