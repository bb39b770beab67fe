/* fuzz_train_data.c — libFuzzer target for the training-data loader (src/train/data.c):
 * plain text and chat JSONL files, tokenized with the vocabularies of fuzz_common.h and
 * formatted with several chat templates, then cut into windows as `toy train` cuts them.
 *
 * Input: the first byte picks the vocabulary, the format (text or .jsonl) and the chat
 * template; the rest is the file. Beyond what ASan and UBSan catch (random bytes once
 * overran the loader's token buffer), the target traps when a promise is broken: a
 * refused file's message names it; an accepted one gives a stream whose tokens are in
 * the vocabulary, whose loss mask is 0 or 1 and counted right, and whose windows give
 * inputs and targets in range.
 *
 * tests/unit/test_fuzz_corpus.c includes this file to run the target over fuzz/corpus_train_data.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "fuzz_common.h"
#include "toy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fuzz_dir[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_load_vocabs();
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s", access("/dev/shm", W_OK) ? "/tmp/toy-fuzz-XXXXXX" : "/dev/shm/toy-fuzz-XXXXXX");
    if (!mkdtemp(fuzz_dir)) {
        perror("fuzz_train_data: mkdtemp");
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const data_families[] = {"chatml", "llama3", "gemma", "mistral-v7", "phi3", "zephyr"};
    if (size == 0) return 0;
    const toy_vocab *v = fuzz_vocab[(data[0] & 0x0f) % fuzz_n_vocabs];
    const bool jsonl = data[0] & 0x10;
    const char *family = data_families[(data[0] >> 5) % (sizeof data_families / sizeof *data_families)];
    char path[128];
    snprintf(path, sizeof path, "%s/data.%s", fuzz_dir, jsonl ? "jsonl" : "txt");
    FILE *f = fopen(path, "wb");
    FUZZ_PROMISE(f != NULL);
    FUZZ_PROMISE(fwrite(data + 1, 1, size - 1, f) == size - 1);
    fclose(f);

    train_stream s = {0};
    const char *paths[] = {path};
    const toy_status st = ty_train_stream_load(&s, v, family, paths, 1);
    if (st) {
        FUZZ_PROMISE(strstr(toy_last_error(), path) != NULL);
    } else {
        const int32_t n_vocab = toy_vocab_n_tokens(v);
        int64_t scored = 0;
        FUZZ_PROMISE(s.n >= 0 && s.n <= s.cap);
        for (int64_t i = 0; i < s.n; i++) {
            FUZZ_PROMISE(s.tokens[i] >= 0 && s.tokens[i] < n_vocab);
            FUZZ_PROMISE(s.scored[i] <= 1);
            scored += s.scored[i];
        }
        FUZZ_PROMISE(scored == s.n_scored);
        enum { T = 16 };
        int32_t tokens[T], targets[T];
        const int64_t n_windows = ty_train_stream_n_windows(&s, T);
        FUZZ_PROMISE(n_windows * T + 1 <= (s.n > 0 ? s.n : 1));
        for (int64_t w = 0; w < n_windows; w++) {
            const int n = ty_train_stream_window(&s, w, T, tokens, targets);
            FUZZ_PROMISE(n >= 0 && n <= T);
            for (int t = 0; t < T; t++) FUZZ_PROMISE(targets[t] >= -1 && targets[t] < n_vocab);
        }
    }
    ty_train_stream_free(&s);
    return 0;
}
