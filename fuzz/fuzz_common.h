/* fuzz_common.h — what the fuzz targets over text share: the check that traps on a broken
 * promise, and the vocabularies they tokenize with: the bundled model's (byte-level BPE)
 * and, where the fixtures are ($TOY_FIXTURES, else ../shared/fixtures beside the source
 * tree), llama.cpp's vocabulary files of every kind: SentencePiece, byte-level BPE with
 * several pre-tokenizers, and WordPiece. Loaded once, at start. */
#ifndef TOY_FUZZ_COMMON_H
#define TOY_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "toy.h"

/* When cond is false: its text on stderr and a trap, so that libFuzzer keeps the input. */
#define FUZZ_PROMISE(cond)                                                              \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #cond);   \
            __builtin_trap();                                                           \
        }                                                                               \
    } while (0)

/* (unused in a target that tokenizes nothing) */
#define FUZZ_UNUSED __attribute__((unused))

enum { FUZZ_MAX_VOCABS = 16 };
FUZZ_UNUSED static toy_vocab *fuzz_vocab[FUZZ_MAX_VOCABS];
FUZZ_UNUSED static const char *fuzz_vocab_name[FUZZ_MAX_VOCABS];
FUZZ_UNUSED static int fuzz_n_vocabs;

FUZZ_UNUSED static void fuzz_vocab_add(const char *path, const char *name) {
    toy_gguf *g = NULL;
    if (fuzz_n_vocabs == FUZZ_MAX_VOCABS || toy_gguf_open(path, &g)) return;
    if (!toy_vocab_load(g, &fuzz_vocab[fuzz_n_vocabs])) fuzz_vocab_name[fuzz_n_vocabs++] = name;
    toy_gguf_close(g);
}

FUZZ_UNUSED static void fuzz_load_vocabs(void) {
    if (fuzz_n_vocabs) return;
    fuzz_vocab_add(TOY_SOURCE_DIR "/models/toy-kjv.gguf", "toy-kjv");
    static const char *const names[] = {"gpt-2", "llama-bpe", "deepseek-coder", "mpt", "refact",
                                        "llama-spm", "phi-3", "bert-bge"};
    const char *fixtures = getenv("TOY_FIXTURES");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf",
                 fixtures && *fixtures ? fixtures : TOY_SOURCE_DIR "/../shared/fixtures", names[i]);
        fuzz_vocab_add(path, names[i]);
    }
    if (!fuzz_n_vocabs) {
        fprintf(stderr, "fuzz: cannot load %s/models/toy-kjv.gguf\n", TOY_SOURCE_DIR);
        abort();
    }
}

#endif
