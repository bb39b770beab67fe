/* fuzz_tokenizer.c — libFuzzer target for the tokenizer on arbitrary bytes, with every
 * vocabulary of fuzz_common.h (SentencePiece, byte-level BPE with several pre-tokenizers,
 * WordPiece).
 *
 * Input: the first byte picks the vocabulary and whether special tokens are added and
 * parsed; the rest is the text. Beyond what ASan and UBSan catch, the target traps when a
 * promise is broken:
 *   - toy_tokenize_alloc and toy_tokenize into a buffer of exactly the count give the
 *     same ids; a buffer one short is TOY_ERR_BUFFER with that count and nothing written;
 *   - every id is in the vocabulary, and every id's text (toy_token_to_piece) and the
 *     whole text (toy_detokenize) can be made;
 *   - with a byte-level BPE vocabulary that does not clean up spaces, no special tokens
 *     and valid UTF-8, the text comes back byte for byte, as it does from llama.cpp.
 *
 * tests/unit/test_fuzz_corpus.c includes this file to run the target over fuzz/corpus_tokenizer.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tokenizer.h"
#include "toy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_load_vocabs();
    return 0;
}

/* whether s[0..n) is valid UTF-8 (no surrogates, no overlong forms, at most U+10FFFF) */
static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!len || i + len > n) return false;
        uint32_t cp = len == 1 ? c : c & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const int which = data[0] % fuzz_n_vocabs;
    const toy_vocab *v = fuzz_vocab[which];
    const bool add_special = data[0] & 0x40, parse_special = data[0] & 0x80;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;

    int32_t *ids = NULL, n = 0;
    const toy_status st = toy_tokenize_alloc(v, text, len, add_special, parse_special, &ids, &n);
    if (st) { /* only a text toy cannot hold is refused */
        FUZZ_PROMISE(st == TOY_ERR_NOMEM || st == TOY_ERR_INVALID);
        FUZZ_PROMISE(toy_last_error()[0]);
        return 0;
    }
    FUZZ_PROMISE(ids != NULL && n >= 0);
    const int32_t n_vocab = toy_vocab_n_tokens(v);
    for (int32_t i = 0; i < n; i++) FUZZ_PROMISE(ids[i] >= 0 && ids[i] < n_vocab);

    /* the caller's buffer: exactly the count, and one short */
    int32_t *exact = malloc((size_t)(n + 1) * sizeof *exact), m = -1;
    FUZZ_PROMISE(exact != NULL);
    exact[n] = -7;
    FUZZ_PROMISE(toy_tokenize(v, text, len, add_special, parse_special, exact, n, &m) == TOY_OK);
    FUZZ_PROMISE(m == n && !memcmp(exact, ids, (size_t)n * sizeof *ids) && exact[n] == -7);
    if (n > 0) {
        exact[n - 1] = -7;
        FUZZ_PROMISE(toy_tokenize(v, text, len, add_special, parse_special, exact, n - 1, &m) == TOY_ERR_BUFFER);
        FUZZ_PROMISE(m == n && exact[n - 1] == -7);
    }
    free(exact);

    for (int32_t i = 0; i < n; i++) {
        size_t piece_len = 0;
        const toy_status ps = toy_token_to_piece(v, ids[i], parse_special, NULL, 0, &piece_len);
        FUZZ_PROMISE(ps == (piece_len ? TOY_ERR_BUFFER : TOY_OK));
    }
    char *back = NULL;
    size_t back_len = 0;
    FUZZ_PROMISE(toy_detokenize(v, ids, n, false, &back, &back_len) == TOY_OK && back);
    /* (a vocabulary that cleans up spaces, as llama.cpp's gpt-2 does, turns " ?" into "?") */
    if (v->kind == TOY_VOCAB_BPE && !v->clean_spaces && !add_special && !parse_special && valid_utf8(data + 1, len))
        FUZZ_PROMISE(back_len == len && !memcmp(back, text, len));
    toy_free(back);
    toy_free(ids);
    return 0;
}
