/* fuzz_vocabs.h — the vocabularies the fuzz targets tokenize with: the bundled model's
 * (byte-level BPE) and, where the fixtures are ($TOY_FIXTURES, else ../shared/fixtures
 * beside the source tree), llama.cpp's vocabulary files of every kind: SentencePiece,
 * byte-level BPE with several pre-tokenizers, and WordPiece. Loaded once, at start. */
#ifndef TOY_FUZZ_VOCABS_H
#define TOY_FUZZ_VOCABS_H

#include <stdio.h>
#include <stdlib.h>

#include "toy.h"

enum { FUZZ_MAX_VOCABS = 16 };
static toy_vocab *fuzz_vocab[FUZZ_MAX_VOCABS];
static const char *fuzz_vocab_name[FUZZ_MAX_VOCABS];
static int fuzz_n_vocabs;

static void fuzz_vocab_add(const char *path, const char *name) {
    toy_gguf *g = NULL;
    if (fuzz_n_vocabs == FUZZ_MAX_VOCABS || toy_gguf_open(path, &g)) return;
    if (!toy_vocab_load(g, &fuzz_vocab[fuzz_n_vocabs])) fuzz_vocab_name[fuzz_n_vocabs++] = name;
    toy_gguf_close(g);
}

static void fuzz_load_vocabs(void) {
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
