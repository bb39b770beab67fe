/* fuzz_grammar.c — libFuzzer target for grammars: GBNF text and JSON Schemas from anyone
 * (toy serve's grammar, json_schema and response_format fields, toy run's files), compiled
 * and run.
 *
 * Input: the first byte picks the vocabulary (fuzz_common.h) and whether the text is GBNF
 * or a JSON Schema (strict or not); up to the first NUL byte is that text, the rest a
 * sample text. Beyond what ASan and UBSan catch, the target traps when a promise is
 * broken: a refused grammar has a one-line message (GBNF: naming line and column); an
 * accepted one answers toy_grammar_accepts on the sample, and for a few steps of
 * generation (tokens picked by the sample's bytes among the allowed ones) every allowed
 * token is one the token-by-token reference allows and accepting it succeeds, and the
 * mask is the same when asked again.
 *
 * tests/unit/test_fuzz_corpus.c includes this file to run the target over fuzz/corpus_grammar.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "grammar.h"
#include "toy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_load_vocabs();
    return 0;
}

/* Follows tokens picked by the sample's bytes, checking each step's mask. */
static void generate(const toy_grammar *g, const toy_vocab *v, const uint8_t *pick, size_t n_pick) {
    const int32_t n = toy_vocab_n_tokens(v);
    const size_t words = ((size_t)n + 63) / 64;
    uint64_t *bits = malloc(words * sizeof *bits), *again = malloc(words * sizeof *again);
    int32_t *allowed = malloc((size_t)n * sizeof *allowed);
    FUZZ_PROMISE(bits && again && allowed);
    grammar_cursor c;
    FUZZ_PROMISE(ty_grammar_cursor_init(g, &c) == TOY_OK);
    for (size_t step = 0; step < 4 && step < n_pick + 1; step++) {
        if (ty_grammar_allowed(g, &c, bits)) { /* a limit of the grammar: a message, and the end */
            FUZZ_PROMISE(toy_last_error()[0]);
            break;
        }
        int32_t n_allowed = 0;
        for (int32_t t = 0; t < n; t++)
            if (bits[t / 64] >> (t % 64) & 1) allowed[n_allowed++] = t;
        /* the reference agrees on a few of them (it is slow: one token at a time) */
        for (int32_t k = 0; k < n_allowed && k < 8; k++)
            FUZZ_PROMISE(ty_grammar_allows_reference(g, &c, allowed[(size_t)k * 7919 % (size_t)n_allowed]));
        FUZZ_PROMISE(ty_grammar_allowed(g, &c, again) == TOY_OK && !memcmp(bits, again, words * sizeof *bits));
        if (!n_allowed) break;
        const int32_t t = allowed[(step < n_pick ? pick[step] * 257u : 0) % (uint32_t)n_allowed];
        if (toy_vocab_is_eog(v, t)) break;
        FUZZ_PROMISE(ty_grammar_accept_token(g, &c, t) == TOY_OK);
    }
    ty_grammar_cursor_free(&c);
    free(bits);
    free(again);
    free(allowed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    fuzz_load_vocabs();
    const toy_vocab *v = fuzz_vocab[data[0] % fuzz_n_vocabs];
    const int mode = (data[0] >> 4) % 3; /* 0: GBNF, 1: JSON Schema, 2: strict JSON Schema */
    const uint8_t *end = memchr(data + 1, 0, size - 1);
    const size_t text_len = end ? (size_t)(end - data - 1) : size - 1;
    char *text = malloc(text_len + 1);
    FUZZ_PROMISE(text != NULL);
    memcpy(text, data + 1, text_len);
    text[text_len] = 0;
    const uint8_t *sample = end ? end + 1 : data + size;
    const size_t sample_len = (size_t)(data + size - sample);

    toy_grammar *g = NULL;
    const toy_status st = mode == 0 ? toy_grammar_new(v, text, &g) : toy_grammar_from_json_schema(v, text, mode == 2, &g);
    if (st) {
        const char *msg = toy_last_error();
        FUZZ_PROMISE(g == NULL && msg[0] && !strchr(msg, '\n'));
        if (mode == 0 && st == TOY_ERR_INVALID && strncmp(msg, "the grammar has no rule", 23) && !strstr(msg, "left-recursive") &&
            !strstr(msg, "nest too deeply") && !strstr(msg, "ambiguous"))
            FUZZ_PROMISE(!strncmp(msg, "line ", 5) && strstr(msg, ", column "));
    } else {
        (void)toy_grammar_accepts(g, (const char *)sample, sample_len);
        generate(g, v, sample, sample_len);
    }
    toy_grammar_free(g);
    free(text);
    return 0;
}
