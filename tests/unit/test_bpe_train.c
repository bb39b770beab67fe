/* test_bpe_train.c — toy_tokenizer_train on small corpora written here:
 *  - the classic corpus hug×10 pug×5 pun×12 bun×4 hugs×5 gives its merges in the order
 *    worked out by hand below (a tie included), and stops when no pair is left;
 *  - tokenizing the training words with the file gives one token each;
 *  - a text of a few MiB (several chunks) gives the same file whatever the threads, and
 *    as many pre-tokens as pre-tokenizing it whole;
 *  - special-token text is cut out, also a special that spells bytes in GPT-2's
 *    characters;
 *  - each error names the file, parameter or value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "tokenizer.h"
#include "toy.h"

static char tmpdir[] = "/tmp/test_bpe_train.XXXXXX";

static char *tmp_path(const char *name) {
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}


static toy_status train(const char *data, int32_t vocab_size, const char *pre,
                        const char *const *special, size_t n_special, int n_threads,
                        const char *out, toy_tokenizer_train_stats *stats) {
    const char *paths[] = {data};
    toy_tokenizer_train_params p = toy_tokenizer_train_default_params();
    p.data_paths = paths;
    p.n_data = 1;
    p.vocab_size = vocab_size;
    p.pre = pre;
    p.special = special;
    p.n_special = n_special;
    p.n_threads = n_threads;
    p.stats = stats;
    return toy_tokenizer_train(&p, out);
}

/* The i-th string of an array key, as a C string (static buffer). */
static const char *array_str(const toy_gguf *g, const char *key, uint64_t i) {
    static char buf[256];
    const char *s;
    size_t len;
    const toy_gguf_value *v = toy_gguf_get(g, key);
    if (!v || i >= toy_gguf_array_len(v) || toy_gguf_array_str(v, i, &s, &len)) return "";
    snprintf(buf, sizeof buf, "%.*s", (int)len, s);
    return buf;
}

static void test_classic_corpus(void) {
    /* one word a line: GPT-2's pre-tokenizer makes "\n" a pre-token of its own and the
     * words carry no leading space. By hand: u+g 20 (hug pug hugs); u+n 16 (pun bun);
     * h+ug 15 (hug hugs); p+un 12; then hug+s and p+ug tie at 5, and "hug" < "p";
     * b+un 4; then every word is one token. */
    static const struct {
        const char *word;
        int count;
    } words[] = {{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}};
    static const char *const want[] = {"u g", "u n", "h ug", "p un", "hug s", "p ug", "b un"};
    const int n_want = (int)(sizeof want / sizeof want[0]);
    char text[512];
    size_t n = 0;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        for (int k = 0; k < words[w].count; k++)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s\n", words[w].word);
    test_write_file(tmp_path("classic.txt"), text, n);

    toy_tokenizer_train_stats stats = {.size = sizeof stats};
    const char *out = tmp_path("classic.gguf");
    toy_status st = train(tmp_path("classic.txt"), 256 + 3 + 100, "gpt-2", NULL, 0, 1, out,
                          &stats);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_EQ(stats.n_bytes, n);
    CHECK_EQ(stats.n_pretokens, 2 * 36);
    CHECK_EQ(stats.n_distinct, 6); /* five words and "\n" */
    CHECK_EQ(stats.n_merges, n_want); /* the text ran out of pairs */
    CHECK_EQ(stats.n_tokens, 256 + n_want + 3);

    toy_gguf *g;
    if (toy_gguf_open(out, &g)) {
        CHECK_MSG(0, "%s", toy_last_error());
        return;
    }
    const toy_gguf_value *merges = toy_gguf_get(g, "tokenizer.ggml.merges");
    CHECK(merges && toy_gguf_array_len(merges) == (uint64_t)n_want);
    for (int k = 0; merges && k < n_want; k++)
        CHECK_MSG(!strcmp(array_str(g, "tokenizer.ggml.merges", (uint64_t)k), want[k]),
                  "merge %d is '%s', want '%s'", k, array_str(g, "tokenizer.ggml.merges", (uint64_t)k),
                  want[k]);
    CHECK(!strcmp(array_str(g, "tokenizer.ggml.tokens", 'a'), "a"));
    CHECK(!strcmp(array_str(g, "tokenizer.ggml.tokens", '\n'), "\xc4\x8a")); /* Ċ */
    CHECK(!strcmp(array_str(g, "tokenizer.ggml.tokens", 256 + 4), "hugs"));
    CHECK(!strcmp(array_str(g, "tokenizer.ggml.tokens", 256 + n_want), "<|endoftext|>"));
    CHECK(!strcmp(array_str(g, "tokenizer.ggml.tokens", 256 + n_want + 2), "<|im_end|>"));
    const char *pre;
    size_t pre_len;
    CHECK(!toy_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len) && pre_len == 5 &&
          !memcmp(pre, "gpt-2", 5));

    /* the tokenizer makes each training word one token, as training left it */
    toy_vocab *v;
    if (toy_vocab_load(g, &v)) {
        CHECK_MSG(0, "%s", toy_last_error());
        toy_gguf_close(g);
        return;
    }
    CHECK_EQ(toy_vocab_bos(v), 256 + n_want);
    CHECK_EQ(toy_vocab_eos(v), 256 + n_want);
    CHECK(toy_vocab_add_bos(v) && !toy_vocab_add_eos(v));
    CHECK(toy_vocab_is_eog(v, 256 + n_want + 2));
    int32_t ids[64], n_ids = 0;
    st = toy_tokenize(v, "hugs\npun\nbun", 12, true, false, ids, 64, &n_ids);
    CHECK(!st);
    int32_t want_ids[] = {256 + n_want, 256 + 4, '\n', 256 + 3, '\n', 256 + 6};
    CHECK_EQ(n_ids, 6);
    for (int i = 0; i < 6 && i < n_ids; i++) CHECK_EQ(ids[i], want_ids[i]);
    toy_vocab_free(v);
    toy_gguf_close(g);
}

/* Pseudo-random lines of pseudo-words, digits and punctuation, a few MiB. */
static char *make_text(size_t size, size_t *len) {
    static const char *const syll[] = {"the", "an", "ing", "qu", "ck", " ", " ", "\n", ", ",
                                       "er", "é", "日本", "42", "  ", ". ", "'s", "\t", "x"};
    char *t = xmalloc(size + 16);
    uint64_t s = 12345;
    size_t n = 0;
    while (n < size) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const char *p = syll[(s >> 33) % (sizeof syll / sizeof syll[0])];
        size_t l = strlen(p);
        memcpy(t + n, p, l);
        n += l;
    }
    *len = n;
    return t;
}

static toy_status count_word(void *user, const char *word, size_t len) {
    (void)word;
    (void)len;
    (*(uint64_t *)user)++;
    return TOY_OK;
}

static void test_determinism(void) {
    size_t len;
    char *text = make_text(3u << 20, &len);
    test_write_file(tmp_path("big.txt"), text, len);
    toy_tokenizer_train_stats s1 = {.size = sizeof s1}, s3 = {.size = sizeof s3};
    toy_status st = train(tmp_path("big.txt"), 2000, NULL, NULL, 0, 1, tmp_path("big1.gguf"), &s1);
    CHECK_MSG(!st, "%s", toy_last_error());
    st = train(tmp_path("big.txt"), 2000, NULL, NULL, 0, 3, tmp_path("big3.gguf"), &s3);
    CHECK_MSG(!st, "%s", toy_last_error());
    size_t n1 = 0, n3 = 0;
    char *f1 = test_read_file(tmp_path("big1.gguf"), &n1), *f3 = test_read_file(tmp_path("big3.gguf"), &n3);
    CHECK_MSG(f1 && f3 && n1 == n3 && !memcmp(f1, f3, n1),
              "1 and 3 threads gave different files");
    CHECK_EQ(s1.n_pretokens, s3.n_pretokens);
    CHECK_EQ(s1.n_tokens, 2000);

    /* the chunks' pre-tokens are those of the whole text */
    ty_pretokenizer *pre;
    uint64_t n_words = 0;
    CHECK(!ty_pretokenizer_new("qwen2", 5, NULL, &pre));
    CHECK(!ty_pretokenize(pre, text, len, count_word, &n_words));
    CHECK_EQ(s1.n_pretokens, n_words);
    ty_pretokenizer_free(pre);
    free(f1);
    free(f3);
    free(text);
}

static void test_specials(void) {
    /* "Ã©" spells the bytes C3 A9 (é's UTF-8) in GPT-2's characters: no merge may make
     * a token of that text, or the file would hold it twice */
    char text[8192];
    size_t n = 0;
    for (int i = 0; i < 60; i++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "<|im_start|>user\ncafé\né<|im_end|><tool>call</tool> <|endoftext|>");
    test_write_file(tmp_path("special.txt"), text, n);
    const char *extra[] = {"<tool>", "</tool>", "\xc3\x83\xc2\xa9"};
    toy_tokenizer_train_stats stats = {.size = sizeof stats};
    toy_status st = train(tmp_path("special.txt"), 1000, NULL, extra, 3, 2,
                          tmp_path("special.gguf"), &stats);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    /* left: "user" "\n" "café" "\n" "é" "call" " " per turn; the pre-token "é" would
     * make its two bytes the first merge */
    CHECK_EQ(stats.n_pretokens, 60 * 7);
    toy_gguf *g;
    toy_vocab *v;
    if (toy_gguf_open(tmp_path("special.gguf"), &g) || toy_vocab_load(g, &v)) {
        CHECK_MSG(0, "%s", toy_last_error());
        return;
    }
    int32_t n_tok = toy_vocab_n_tokens(v);
    CHECK_EQ(n_tok, stats.n_tokens);
    for (int32_t i = 0; i < n_tok - 6; i++) {
        const char *t = toy_vocab_token_text(v, i);
        CHECK_EQ(toy_vocab_token_type(v, i), TOY_TOKEN_NORMAL);
        if (i < 256) continue;
        CHECK_MSG(!strchr(t, '<') && !strchr(t, '|') && strcmp(t, "\xc3\x83\xc2\xa9"),
                  "token %d '%s' comes from special-token text", (int)i, t);
    }
    for (int32_t i = n_tok - 6; i < n_tok; i++)
        CHECK_EQ(toy_vocab_token_type(v, i), TOY_TOKEN_CONTROL);
    CHECK(!strcmp(toy_vocab_token_text(v, n_tok - 1), "\xc3\x83\xc2\xa9"));
    toy_vocab_free(v);
    toy_gguf_close(g);
}

static void expect_error(toy_status st, toy_status want, const char *msg) {
    CHECK_EQ(st, want);
    CHECK_STR_CONTAINS(toy_last_error(), msg);
}

static void test_errors(void) {
    const char *data = tmp_path("classic.txt"), *out = tmp_path("err.gguf");
    expect_error(train(data, 258, NULL, NULL, 0, 1, out, NULL), TOY_ERR_INVALID,
                 "vocab size 258 is below 259");
    const char *one[] = {"<x>"};
    expect_error(train(data, 259, NULL, one, 1, 1, out, NULL), TOY_ERR_INVALID,
                 "vocab size 259 is below 260");
    expect_error(train(data, -5, NULL, NULL, 0, 1, out, NULL), TOY_ERR_INVALID,
                 "vocab size -5");
    expect_error(train(data, 300, "nope", NULL, 0, 1, out, NULL), TOY_ERR_INVALID,
                 "unknown pre-tokenizer 'nope' (known: default,");
    expect_error(train(data, 300, "llama-bpe", NULL, 0, 1, out, NULL), TOY_ERR_INVALID,
                 "pre-tokenizer 'llama-bpe': llama.cpp looks each whole pre-token up");
    const char *missing = tmp_path("missing.txt");
    expect_error(train(missing, 300, NULL, NULL, 0, 1, out, NULL), TOY_ERR_IO, missing);
    expect_error(train(tmpdir, 300, NULL, NULL, 0, 1, out, NULL), TOY_ERR_IO,
                 "is a directory");
    test_write_file(tmp_path("empty.txt"), "", 0);
    expect_error(train(tmp_path("empty.txt"), 300, NULL, NULL, 0, 1, out, NULL), TOY_ERR_INVALID,
                 "empty.txt: no training text");
    const char *twice[] = {"<|im_start|>"};
    expect_error(train(data, 300, NULL, twice, 1, 1, out, NULL), TOY_ERR_INVALID,
                 "special token '<|im_start|>' is given twice");
    const char *byte[] = {"a"};
    expect_error(train(data, 300, NULL, byte, 1, 1, out, NULL), TOY_ERR_INVALID,
                 "special token 'a' is the text of byte token 97");
    const char *empty[] = {""};
    expect_error(train(data, 300, NULL, empty, 1, 1, out, NULL), TOY_ERR_INVALID,
                 "special token 4 is empty");
    toy_tokenizer_train_params p = toy_tokenizer_train_default_params();
    p.vocab_size = 300;
    expect_error(toy_tokenizer_train(&p, out), TOY_ERR_INVALID, "no training data files");
    CHECK(access(out, F_OK) != 0);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_classic_corpus();
    test_determinism();
    test_specials();
    test_errors();
    const char *names[] = {"classic.txt", "classic.gguf", "big.txt", "big1.gguf", "big3.gguf",
                           "special.txt", "special.gguf", "empty.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) remove(tmp_path(names[i]));
    rmdir(tmpdir);
    return test_finish("test_bpe_train");
}
