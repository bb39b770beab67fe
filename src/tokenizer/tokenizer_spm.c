/* tokenizer_spm.c — SentencePiece BPE as llama.cpp's llm_tokenizer_spm runs it.
 *
 * Spaces become U+2581 ("▁", with one in front of text that starts the input or
 * follows a special token, when add_space_prefix), the text is cut into UTF-8
 * characters, and the adjacent pair whose concatenation is the token with the highest
 * score is merged, again and again (ties: leftmost first). A piece that is no token
 * at the end falls back to its bytes, <0xNN>. */
#include "tokenizer_spm.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "symbols.h"

typedef struct {
    const toy_vocab *vocab;
    const char *text;
    ty_symbol *sym;
    ty_bigram_queue queue;
    bool oom;
} spm_session;

static void try_add_bigram(spm_session *s, int left, int right) {
    if (left < 0 || right < 0) return;
    const ty_symbol *l = &s->sym[left], *r = &s->sym[right];
    size_t size = l->n + r->n;
    int32_t id = ty_vocab_find(s->vocab, s->text + l->off, size);
    if (id < 0) return;
    /* llama.cpp's priority queue order: the higher score first, then the leftmost */
    ty_bigram b = {left, right, -(double)s->vocab->tokens[id].score, size};
    if (!ty_bigram_push(&s->queue, b)) s->oom = true;
}

toy_status ty_spm_tokenize(const toy_vocab *v, const char *text, size_t len, bool first,
                           ty_ids *out) {
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */

    /* the escaped text: at most 3 bytes for every input byte, plus the prefix */
    size_t cap;
    if (ty_mul_overflows(len + 1, 3, &cap))
        return ty_error(TOY_ERR_NOMEM, "tokenize: text too long");
    char *esc = malloc(cap);
    if (!esc) return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
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
        return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    }

    int n_sym = ty_symbols_init(s.sym, esc, n);
    for (int i = 1; i < n_sym; i++) try_add_bigram(&s, i - 1, i);

    for (int left; !s.oom && (left = ty_bigram_merge_next(&s.queue, s.sym)) >= 0;) {
        try_add_bigram(&s, s.sym[left].prev, left);
        try_add_bigram(&s, left, s.sym[left].next);
    }

    /* Every merged symbol is a token; a single character that is not falls back to
     * its bytes. (llama.cpp's resegment also looks the text up among the merges it
     * made, but a text that is no token was never queued, so that never applies.) */
    /* llama.cpp throws when the vocabulary has no token for a byte; toy uses the unknown
     * token, or drops the byte when there is none */
    ty_symbols_emit(v, esc, s.sym, n_sym, v->unk, out);

    bool oom = s.oom;
    free(s.queue.v);
    free(s.sym);
    free(esc);
    if (oom) return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    return TOY_OK;
}
