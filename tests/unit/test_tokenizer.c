/* test_tokenizer.c — the tokenizers on tiny vocabularies made here, where every
 * expected id can be worked out by hand from llama.cpp's rules: SentencePiece merges
 * by score with byte fallback, BPE merges by rank, WordPiece longest match, special
 * tokens in the text, BOS/EOS, pieces, detokenizing, and the errors of broken
 * metadata. */
#include <stdint.h>
#include <unistd.h>

#include "test.h"
#include "toy.h"

/* ---------------------------------------------------------------- building vocabularies */

static int file_counter;

/* Writes the metadata to a temporary GGUF and loads its vocabulary. */
static toy_status load_written(toy_gguf_writer *w, toy_vocab **out) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/toy_test_tokenizer_%d_%d.gguf", (int)getpid(),
             file_counter++);
    toy_status st = toy_gguf_writer_write(w, path);
    toy_gguf_writer_free(w);
    if (st) {
        fprintf(stderr, "writing %s: %s\n", path, toy_last_error());
        return st;
    }
    toy_gguf *g = NULL;
    *out = NULL;
    st = toy_gguf_open(path, &g);
    if (!st) st = toy_vocab_load(g, out);
    toy_gguf_close(g); /* the vocabulary keeps no pointer into the file */
    unlink(path);
    return st;
}

static void set_tokens(toy_gguf_writer *w, const char *const *toks, int n) {
    size_t *lens = malloc((size_t)n * sizeof *lens);
    for (int i = 0; i < n; i++) lens[i] = strlen(toks[i]);
    CHECK(!toy_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, lens, (uint64_t)n));
    free(lens);
}

static void set_strs(toy_gguf_writer *w, const char *key, const char *const *strs, int n) {
    size_t lens[64];
    for (int i = 0; i < n; i++) lens[i] = strlen(strs[i]);
    CHECK(!toy_gguf_writer_set_str_array(w, key, strs, lens, (uint64_t)n));
}

/* SPM: <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF> (ids 3..258), then pieces. */
enum {
    SPM_BYTE0 = 3,
    SPM_SPACE = 259, /* "▁" */
    SPM_A,           /* "a" */
    SPM_B,           /* "b" */
    SPM_C,           /* "c" */
    SPM_AB,          /* "ab", score -3 */
    SPM_BC,          /* "bc", score -1.5 */
    SPM_SPACE_A,     /* "▁a", score -2.5 */
    SPM_USER,        /* "<|user|>", user-defined */
    SPM_CTRL,        /* "<|end|>", control */
    SPM_N,
};

static toy_gguf_writer *spm_writer(const char *name) {
    static char byte_text[256][8];
    const char *toks[SPM_N];
    float scores[SPM_N];
    int32_t types[SPM_N];
    toks[0] = "<unk>", types[0] = TOY_TOKEN_UNKNOWN;
    toks[1] = "<s>", types[1] = TOY_TOKEN_CONTROL;
    toks[2] = "</s>", types[2] = TOY_TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(byte_text[b], sizeof byte_text[b], "<0x%02X>", b);
        toks[SPM_BYTE0 + b] = byte_text[b];
        types[SPM_BYTE0 + b] = TOY_TOKEN_BYTE;
    }
    const char *pieces[] = {"\xe2\x96\x81", "a", "b", "c", "ab", "bc", "\u2581a",
                            "<|user|>", "<|end|>"};
    const float piece_scores[] = {-1, -2, -2, -2, -3, -1.5f, -2.5f, 0, 0};
    for (int i = SPM_SPACE; i < SPM_N; i++) {
        toks[i] = pieces[i - SPM_SPACE];
        scores[i] = piece_scores[i - SPM_SPACE];
        types[i] = TOY_TOKEN_NORMAL;
    }
    for (int i = 0; i < SPM_SPACE; i++) scores[i] = 0;
    types[SPM_USER] = TOY_TOKEN_USER_DEFINED;
    types[SPM_CTRL] = TOY_TOKEN_CONTROL;

    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_gguf_writer_set_str(w, "general.name", name, strlen(name));
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5);
    set_tokens(w, toks, SPM_N);
    toy_gguf_writer_set_array(w, "tokenizer.ggml.scores", TOY_GGUF_FLOAT32, scores, SPM_N);
    toy_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TOY_GGUF_INT32, types, SPM_N);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    return w;
}

static int tokenize(const toy_vocab *v, const char *text, bool add_special, bool parse_special,
                    int32_t *ids) {
    int32_t n = -1;
    toy_status st = toy_tokenize(v, text, strlen(text), add_special, parse_special, ids, 64, &n);
    CHECK_MSG(!st, "tokenize \"%s\": %s", text, toy_last_error());
    return n;
}

#define CHECK_IDS(v, text, add, parse, ...)                                               \
    do {                                                                                \
        const int32_t want_[] = {__VA_ARGS__};                                          \
        int32_t got_[64];                                                               \
        int n_ = tokenize(v, text, add, parse, got_);                                   \
        int nw_ = (int)(sizeof want_ / sizeof want_[0]);                                \
        bool same_ = n_ == nw_ && !memcmp(got_, want_, sizeof want_);                   \
        CHECK_MSG(same_, "tokenize(\"%s\"): got %d ids, first %d", text, n_,            \
                  n_ > 0 ? (int)got_[0] : -1);                                          \
    } while (0)

static void check_detok(const toy_vocab *v, const int32_t *ids, int n, bool special,
                        const char *want, size_t want_len) {
    char *text = NULL;
    size_t len = 0;
    toy_status st = toy_detokenize(v, ids, n, special, &text, &len);
    CHECK_MSG(!st, "detokenize: %s", toy_last_error());
    CHECK_MSG(!st && len == want_len && !memcmp(text, want, len), "detokenize: \"%s\", want \"%s\"",
              text ? text : "", want);
    if (text) CHECK(text[len] == 0);
    free(text);
}
#define CHECK_DETOK(v, special, want, ...)                                                 \
    do {                                                                                 \
        const int32_t ids_[] = {__VA_ARGS__};                                            \
        check_detok(v, ids_, (int)(sizeof ids_ / sizeof ids_[0]), special, want,         \
                    sizeof(want) - 1);                                                   \
    } while (0)

/* ---------------------------------------------------------------- SPM */

static void test_spm(void) {
    toy_vocab *v = NULL;
    toy_status st = load_written(spm_writer("tiny-spm"), &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_EQ(toy_vocab_kind_of(v), TOY_VOCAB_SPM);
    CHECK_EQ(toy_vocab_n_tokens(v), SPM_N);
    CHECK_EQ(toy_vocab_bos(v), 1);
    CHECK_EQ(toy_vocab_eos(v), 2);
    CHECK_EQ(toy_vocab_eot(v), SPM_CTRL); /* found by its text "<|end|>" */
    CHECK(toy_vocab_add_bos(v));  /* SPM's default */
    CHECK(!toy_vocab_add_eos(v));
    CHECK(toy_vocab_is_eog(v, 2));
    CHECK(toy_vocab_is_eog(v, SPM_CTRL));
    CHECK(!toy_vocab_is_eog(v, 1));
    CHECK(!toy_vocab_is_eog(v, -1));
    CHECK_EQ(toy_vocab_token_type(v, SPM_BYTE0 + 0x41), TOY_TOKEN_BYTE);
    CHECK_EQ(toy_vocab_token_type(v, SPM_USER), TOY_TOKEN_USER_DEFINED);
    CHECK_EQ(toy_vocab_token_type(v, SPM_N), TOY_TOKEN_UNDEFINED);
    CHECK(!strcmp(toy_vocab_token_text(v, SPM_AB), "ab"));
    CHECK(toy_vocab_token_text(v, SPM_N) == NULL);

    /* "▁abc": pairs ▁a -2.5, ab -3, bc -1.5; bc merges first, then ▁a (a+bc is no token) */
    CHECK_IDS(v, "abc", false, false, SPM_SPACE_A, SPM_BC);
    CHECK_IDS(v, "abc", true, false, 1, SPM_SPACE_A, SPM_BC);
    /* spaces are ▁; "▁▁a": ▁a (-2.5) vs ▁▁ (no token): the leftmost ▁ stays alone */
    CHECK_IDS(v, " a", false, false, SPM_SPACE, SPM_SPACE_A);
    /* byte fallback: é is C3 A9, x is 78 */
    CHECK_IDS(v, "\xc3\xa9x", false, false, SPM_SPACE, SPM_BYTE0 + 0xC3, SPM_BYTE0 + 0xA9,
              SPM_BYTE0 + 'x');
    /* invalid UTF-8 goes byte by byte, nothing is lost */
    CHECK_IDS(v, "a\xff\xc3", false, false, SPM_SPACE_A, SPM_BYTE0 + 0xFF, SPM_BYTE0 + 0xC3);
    /* empty text: nothing, or BOS alone */
    CHECK_IDS(v, "", true, false, 1);
    int32_t none[4], n = -1;
    CHECK(!toy_tokenize(v, NULL, 0, false, false, none, 4, &n));
    CHECK_EQ(n, 0);

    /* user-defined tokens are matched even without parse_special, control tokens only
     * with it; the text after a special token gets the space prefix again */
    CHECK_IDS(v, "a<|user|>b", false, false, SPM_SPACE_A, SPM_USER, SPM_SPACE, SPM_B);
    CHECK_IDS(v, "a<|end|>", false, true, SPM_SPACE_A, SPM_CTRL);
    CHECK_IDS(v, "<s>a", true, true, 1, 1, SPM_SPACE_A);
    {
        int32_t ids[64];
        int k = tokenize(v, "a<|end|>", false, false, ids);
        CHECK(k > 3); /* spelled out: ▁a then the pieces of "<|end|>" */
        for (int i = 0; i < k; i++) CHECK(ids[i] != SPM_CTRL);
    }

    /* detokenize: the first token's leading space is the added prefix and goes; after
     * BOS it stays (llama_detokenize with remove_special = false) */
    CHECK_DETOK(v, false, "abc", SPM_SPACE_A, SPM_BC);
    CHECK_DETOK(v, false, " abc", 1, SPM_SPACE_A, SPM_BC);
    CHECK_DETOK(v, true, "<s> abc", 1, SPM_SPACE_A, SPM_BC);
    CHECK_DETOK(v, false, "\xc3\xa9", SPM_BYTE0 + 0xC3, SPM_BYTE0 + 0xA9);
    CHECK_DETOK(v, false, "", 1, 2);
    CHECK_DETOK(v, false, "a<|user|>", SPM_A, SPM_USER); /* user-defined: always its text */
    {
        const char *texts[] = {"abc", " a  b\tc", "\xc3\xa9t\xc3\xa9 \xf0\x9f\xa6\x99",
                               "a\xff\xfe", "  "};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            int32_t ids[64];
            int k = tokenize(v, texts[i], false, false, ids);
            check_detok(v, ids, k, false, texts[i], strlen(texts[i]));
        }
    }

    /* streaming: piece by piece, the first keeps its space */
    char buf[16];
    size_t len = 0;
    CHECK(!toy_token_to_piece(v, SPM_SPACE_A, false, buf, sizeof buf, &len));
    CHECK(len == 2 && !memcmp(buf, " a", 2));
    CHECK(!toy_token_to_piece(v, 1, false, buf, sizeof buf, &len));
    CHECK_EQ(len, 0);
    CHECK(!toy_token_to_piece(v, 1, true, buf, sizeof buf, &len));
    CHECK(len == 3 && !memcmp(buf, "<s>", 3));
    CHECK(!toy_token_to_piece(v, 0, false, buf, sizeof buf, &len)); /* unknown: "" */
    CHECK_EQ(len, 0);
    CHECK(!toy_token_to_piece(v, SPM_BYTE0 + 0x0A, false, buf, sizeof buf, &len));
    CHECK(len == 1 && buf[0] == '\n');
    /* a short buffer: TOY_ERR_BUFFER, nothing written, *len tells the whole (before, it
     * got what fitted and TOY_OK, which callers took for the whole text) */
    memset(buf, '#', sizeof buf);
    CHECK_EQ(toy_token_to_piece(v, SPM_USER, false, buf, 3, &len), TOY_ERR_BUFFER);
    CHECK(len == 8 && buf[0] == '#');
    CHECK_STR_CONTAINS(toy_last_error(), "8 bytes");
    CHECK_EQ(toy_token_to_piece(v, SPM_USER, false, NULL, 0, &len), TOY_ERR_BUFFER);
    CHECK_EQ(len, 8);
    CHECK(!toy_token_to_piece(v, SPM_USER, false, buf, 8, &len)); /* exactly enough */
    CHECK(len == 8 && !memcmp(buf, "<|user|>", 8));
    CHECK(!toy_token_to_piece(v, 1, false, NULL, 0, &len)); /* "" needs no room */
    CHECK_EQ(len, 0);

    /* ids out of range are errors, not reads past the table */
    CHECK_EQ(toy_token_to_piece(v, SPM_N, false, buf, sizeof buf, &len), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "out of range");
    CHECK_EQ(toy_token_to_piece(v, -1, false, buf, sizeof buf, &len), TOY_ERR_INVALID);
    char *text = NULL;
    const int32_t bad[] = {SPM_A, 100000};
    CHECK_EQ(toy_detokenize(v, bad, 2, false, &text, &len), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "tokens[1]");
    CHECK(text == NULL);

    /* a short id buffer: TOY_ERR_BUFFER, *n_tokens says how many are needed, nothing
     * written (before, TOY_OK with the first n_max: callers used the count unchecked) */
    int32_t ids[4] = {-7, -7, -7, -7};
    n = 0;
    CHECK_EQ(toy_tokenize(v, "abc", 3, true, false, ids, 2, &n), TOY_ERR_BUFFER);
    CHECK_EQ(n, 3);
    CHECK(ids[0] == -7 && ids[1] == -7);
    CHECK_STR_CONTAINS(toy_last_error(), "3 tokens");
    CHECK_EQ(toy_tokenize(v, "abc", 3, true, false, NULL, 0, &n), TOY_ERR_BUFFER);
    CHECK_EQ(n, 3);
    CHECK(!toy_tokenize(v, "abc", 3, true, false, ids, 3, &n)); /* exactly enough */
    CHECK(n == 3 && ids[0] == 1 && ids[1] == SPM_SPACE_A && ids[3] == -7);
    int32_t *all = NULL;
    CHECK(!toy_tokenize_alloc(v, "abc", 3, true, false, &all, &n));
    CHECK(all && n == 3 && all[0] == 1 && all[1] == SPM_SPACE_A);
    toy_free(all);
    all = NULL;
    CHECK(!toy_tokenize_alloc(v, "", 0, false, false, &all, &n)); /* no tokens: still an array */
    CHECK(all != NULL && n == 0);
    toy_free(all);
    CHECK_EQ(toy_tokenize_alloc(v, NULL, 3, true, false, &all, &n), TOY_ERR_INVALID);
    CHECK_EQ(toy_tokenize(v, "abc", 3, true, false, ids, -1, &n), TOY_ERR_INVALID);
    CHECK_EQ(toy_tokenize(v, NULL, 3, true, false, ids, 4, &n), TOY_ERR_INVALID);
    toy_vocab_free(v);

    /* gemma: no space prefix, and detokenize keeps a leading space */
    toy_gguf_writer *w = spm_writer("tiny-gemma");
    toy_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
    st = load_written(w, &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_IDS(v, "abc", false, false, SPM_A, SPM_BC);
    CHECK_IDS(v, " a", false, false, SPM_SPACE_A);
    CHECK_DETOK(v, false, " a", SPM_SPACE_A);
    toy_vocab_free(v);

    /* phi3 (by general.name): special tokens take the whitespace after them */
    st = load_written(spm_writer("Phi3-mini"), &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_IDS(v, "<|user|>\n a", false, false, SPM_USER, SPM_SPACE_A);
    CHECK_IDS(v, "<|end|> \n", false, true, SPM_CTRL);
    toy_vocab_free(v);
}

/* ---------------------------------------------------------------- BPE */

/* GPT-2's byte -> character table, built the way encoder.py builds it. */
static void gpt2_byte_chars(char out[256][3]) {
    int cpt[256], n = 0;
    bool printable[256] = {false};
    for (int b = '!'; b <= '~'; b++) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; b++) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; b++) printable[b] = true;
    for (int b = 0; b < 256; b++) cpt[b] = printable[b] ? b : 256 + n++;
    for (int b = 0; b < 256; b++) {
        int c = cpt[b];
        if (c < 0x80) {
            out[b][0] = (char)c;
            out[b][1] = 0;
        } else {
            out[b][0] = (char)(0xC0 | (c >> 6));
            out[b][1] = (char)(0x80 | (c & 0x3F));
            out[b][2] = 0;
        }
    }
}

/* ids 0..255: the byte characters (id = byte); then merged tokens and specials */
enum {
    BPE_HE = 256, /* "he" */
    BPE_LL,       /* "ll" */
    BPE_HELL,     /* "hell" */
    BPE_HELLO,    /* "hello" */
    BPE_SP_W,     /* "Ġw" */
    BPE_EL,       /* "el" */
    BPE_XYZ,      /* "xyz": a token that no merge makes */
    BPE_EOT,      /* "<|endoftext|>", control */
    BPE_IM_END,   /* "<|im_end|>", control */
    BPE_IM,       /* "<|im", user-defined: shorter, loses to <|im_end|> */
    BPE_N,
};

static toy_gguf_writer *bpe_writer(const char *pre) {
    static char byte_chars[256][3];
    gpt2_byte_chars(byte_chars);
    const char *toks[BPE_N];
    int32_t types[BPE_N];
    for (int b = 0; b < 256; b++) {
        toks[b] = byte_chars[b];
        types[b] = TOY_TOKEN_NORMAL;
    }
    const char *more[] = {"he", "ll", "hell", "hello", "\xc4\xa0w", "el", "xyz",
                          "<|endoftext|>", "<|im_end|>", "<|im"};
    for (int i = BPE_HE; i < BPE_N; i++) {
        toks[i] = more[i - BPE_HE];
        types[i] = TOY_TOKEN_NORMAL;
    }
    types[BPE_EOT] = types[BPE_IM_END] = TOY_TOKEN_CONTROL;
    types[BPE_IM] = TOY_TOKEN_USER_DEFINED;
    /* ranks: h e, l l, he ll, hell o, Ġ w, e l */
    const char *merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "e l"};

    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    toy_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre, strlen(pre));
    set_tokens(w, toks, BPE_N);
    toy_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TOY_GGUF_INT32, types, BPE_N);
    set_strs(w, "tokenizer.ggml.merges", merges, 6);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", BPE_EOT);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", BPE_EOT);
    return w;
}

static void test_bpe(void) {
    toy_vocab *v = NULL;
    toy_status st = load_written(bpe_writer("gpt-2"), &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_EQ(toy_vocab_kind_of(v), TOY_VOCAB_BPE);
    CHECK(!toy_vocab_add_bos(v)); /* BPE's default */
    CHECK(toy_vocab_is_eog(v, BPE_EOT));
    CHECK(toy_vocab_is_eog(v, BPE_IM_END));
    CHECK(!toy_vocab_is_eog(v, BPE_HE));
    CHECK_EQ(toy_vocab_eot(v), BPE_IM_END); /* "<|im_end|>" comes before "<|endoftext|>" */

    /* "hello": he, ll, he+ll, hell+o; " world" is its own pre-token: Ġw o r l d */
    CHECK_IDS(v, "hello world", false, false, BPE_HELLO, BPE_SP_W, 'o', 'r', 'l', 'd');
    /* "hel": h e (rank 0) before e l (rank 5) */
    CHECK_IDS(v, "hel", false, false, BPE_HE, 'l');
    /* "xel": only e l applies */
    CHECK_IDS(v, "xel", false, false, 'x', BPE_EL);
    /* merges stay inside pre-tokens: "he", "'ll" (a contraction) and "o" */
    CHECK_IDS(v, "he'llo", false, false, BPE_HE, '\'', BPE_LL, 'o');
    /* no merge makes "xyz", so gpt-2 spells it out */
    CHECK_IDS(v, "xyz", false, false, 'x', 'y', 'z');
    /* a space is byte 0x20, whose character is id 0x20 here */
    CHECK_IDS(v, "a b", false, false, 'a', ' ', 'b');
    /* invalid UTF-8 becomes U+FFFD (EF BF BD), as llama.cpp decodes it */
    CHECK_IDS(v, "\xff", false, false, 0xEF, 0xBF, 0xBD);
    CHECK_IDS(v, "a\xe2\x82", false, false, 'a', 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD);

    /* specials: control only with parse_special; longest text first */
    CHECK_IDS(v, "hello<|endoftext|>", false, true, BPE_HELLO, BPE_EOT);
    CHECK_IDS(v, "<|im_end|>", false, true, BPE_IM_END);
    CHECK_IDS(v, "<|im_end|>", false, false, BPE_IM, '_', 'e', 'n', 'd', '|', '>');
    CHECK_IDS(v, "x<|im", false, false, 'x', BPE_IM);

    /* detokenize: byte-level characters back to bytes; gpt-2 cleans " ." and " 's" */
    CHECK_DETOK(v, false, "hello world", BPE_HELLO, BPE_SP_W, 'o', 'r', 'l', 'd');
    CHECK_DETOK(v, false, "\xff", 0xFF);
    CHECK_DETOK(v, false, "hello.", BPE_HELLO, ' ', '.');
    CHECK_DETOK(v, false, "he's", BPE_HE, ' ', '\'', 's');
    CHECK_DETOK(v, false, "he 'll", BPE_HE, ' ', '\'', 'l', 'l');
    CHECK_DETOK(v, false, "he'x", BPE_HE, ' ', '\'', ' ', 'x');
    CHECK_DETOK(v, false, "hello", BPE_HELLO, BPE_EOT);
    CHECK_DETOK(v, true, "hello<|endoftext|>", BPE_HELLO, BPE_EOT);
    char buf[8];
    size_t len = 0;
    CHECK(!toy_token_to_piece(v, BPE_SP_W, false, buf, sizeof buf, &len));
    CHECK(len == 2 && !memcmp(buf, " w", 2));
    toy_vocab_free(v);

    /* qwen2 keeps the spaces; it splits digits one by one */
    st = load_written(bpe_writer("qwen2"), &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_DETOK(v, false, "hello .", BPE_HELLO, ' ', '.');
    CHECK_IDS(v, "hello world", false, false, BPE_HELLO, BPE_SP_W, 'o', 'r', 'l', 'd');
    toy_vocab_free(v);

    /* llama-bpe: a pre-token that is a token is taken whole (ignore_merges), and BOS is
     * added by default */
    st = load_written(bpe_writer("llama-bpe"), &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK(toy_vocab_add_bos(v));
    CHECK_IDS(v, "xyz", false, false, BPE_XYZ);
    CHECK_IDS(v, "xyz", true, false, BPE_EOT, BPE_XYZ);
    toy_vocab_free(v);

    /* add_eos from the key */
    toy_gguf_writer *w = bpe_writer("gpt-2");
    toy_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    toy_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", true);
    st = load_written(w, &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_IDS(v, "hel", true, false, BPE_EOT, BPE_HE, 'l', BPE_EOT);
    toy_vocab_free(v);
}

/* Long runs of one kind of character: the regex pre-tokenizers must neither fail
 * (PCRE2's JIT stack once ran out on 200k letters under gpt-4o's pattern) nor crawl. */
static void test_bpe_long_runs(void) {
    static const char *const pres[] = {"gpt-4o", "tekken", "qwen2", "deepseek-llm", "default",
                                       "llama-bpe", "chameleon"};
    enum { N = 200000 };
    char *text = malloc(N);
    int32_t *ids = malloc(N * sizeof *ids);
    for (size_t p = 0; p < sizeof pres / sizeof pres[0]; p++) {
        toy_vocab *v = NULL;
        toy_status st = load_written(bpe_writer(pres[p]), &v);
        CHECK_MSG(!st, "%s: %s", pres[p], toy_last_error());
        if (st) continue;
        const char fills[] = {'a', ' ', '!', '7', '\n'};
        for (size_t f = 0; f < sizeof fills; f++) {
            memset(text, fills[f], N);
            int32_t n = 0;
            st = toy_tokenize(v, text, N, false, false, ids, N, &n);
            CHECK_MSG(!st, "%s, 200k of 0x%02x: %s", pres[p], fills[f], toy_last_error());
            /* no merge joins two equal characters here: one token per byte */
            CHECK_MSG(n == N, "%s, 200k of 0x%02x: %d tokens", pres[p], fills[f], (int)n);
        }
        toy_vocab_free(v);
    }
    free(text);
    free(ids);
}

/* Random text (valid and invalid UTF-8, special tokens) through SPM and BPE: ids in
 * range, detokenize works, and SPM gives plain valid UTF-8 back exactly. (Not invalid
 * UTF-8: llama.cpp cuts SPM symbols by the length a lead byte announces, so a stray
 * lead byte before a space takes bytes of its "▁" along, and those come back as
 * bytes, not as a space.) */
static void test_random_bytes(void) {
    /* pieces of text: the first N_PLAIN are valid UTF-8 without special tokens (after
     * one, SPM adds its space prefix again, which detokenize keeps) */
    static const char *const units[] = {"a", "b", "c", "l", "h", "e", " ", "  ", "\t", "\n", "<",
                                        "|", ">", "'", "\xc3\xa9", "\xf0\x9f\xa6\x99",
                                        "\xe4\xbd\xa0", "<|user|>", "\xff", "\x80", "\xc3",
                                        "\xf0\x9f", "\xed\xa0\x80"};
    enum { N_UNITS = sizeof units / sizeof units[0], N_PLAIN = 17 };
    toy_vocab *vocabs[3] = {NULL, NULL, NULL};
    CHECK(!load_written(spm_writer("tiny-spm"), &vocabs[0]));
    CHECK(!load_written(bpe_writer("gpt-2"), &vocabs[1]));
    CHECK(!load_written(bpe_writer("llama-bpe"), &vocabs[2]));
    unsigned long long seed = 42;
    char text[256];
    int32_t ids[512];
    int n_round_trips = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = 0, n_units = test_rand_u64(&seed) % 40;
        bool plain = iter % 4 != 0;
        int choices = plain ? N_PLAIN : N_UNITS;
        for (size_t u = 0; u < n_units; u++) {
            const char *unit = units[test_rand_u64(&seed) % (unsigned)choices];
            memcpy(text + len, unit, strlen(unit));
            len += strlen(unit);
        }
        for (int k = 0; k < 3; k++) {
            toy_vocab *v = vocabs[k];
            if (!v) continue;
            int32_t n = 0;
            bool parse = iter & 1;
            toy_status st = toy_tokenize(v, text, len, true, parse, ids, 512, &n);
            CHECK_MSG(!st && n <= 512, "random text %d: %s", iter, toy_last_error());
            if (st || n > 512) continue;
            for (int i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < toy_vocab_n_tokens(v));
            char *back = NULL;
            size_t back_len = 0;
            CHECK(!toy_detokenize(v, ids, n, false, &back, &back_len));
            /* SPM with BOS (which detokenizes to nothing and keeps the space prefix):
             * " " + the text, byte for byte */
            if (k == 0 && len && plain) {
                n_round_trips++;
                CHECK_MSG(back_len == len + 1 && !memcmp(back + 1, text, len),
                          "random text %d does not round-trip", iter);
            }
            free(back);
        }
    }
    CHECK(n_round_trips > 2000);
    for (int k = 0; k < 3; k++) toy_vocab_free(vocabs[k]);
}

/* ---------------------------------------------------------------- WPM */

/* A BERT vocabulary of these n <= 32 tokens, the first five [PAD] [UNK] [CLS] [SEP] [MASK];
 * cased: tokenizer.ggml.normalizer.lowercase and strip_accents false. */
static toy_status load_wpm(const char *const *toks, int n, bool cased, toy_vocab **v) {
    int32_t types[32];
    for (int i = 0; i < n; i++) types[i] = i <= 4 ? TOY_TOKEN_CONTROL : TOY_TOKEN_NORMAL;
    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert", 4);
    set_tokens(w, toks, n);
    toy_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TOY_GGUF_INT32, types, (uint64_t)n);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", 4);
    if (cased) {
        toy_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", false);
        toy_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.strip_accents", false);
    }
    return load_written(w, v);
}

static void test_wpm(void) {
    const char *toks[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                          "\xe2\x96\x81hello", "\xe2\x96\x81world", "\xe2\x96\x81!",
                          "\xe2\x96\x81hel", "lo", "\xe2\x96\x81,", "\u2581cafe",
                          "\u2581\u1112", "\u2581a", "\u2581b", "\u2581\U00011F43", "\u2581Hello",
                          "\u2581caf\u00e9"};
    enum { PAD, UNK, CLS, SEP, MASK, HELLO, WORLD, BANG, HEL, LO, COMMA, CAFE, HIEUH, A, B,
           KAWI_DANDA, HELLO_CASED, CAFE_ACCENT, N };
    toy_vocab *v = NULL;
    toy_status st = load_wpm(toks, N, false, &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_EQ(toy_vocab_kind_of(v), TOY_VOCAB_WPM);

    /* lowercased, punctuation split off, [CLS] ... [SEP] with add_special */
    CHECK_IDS(v, "Hello, WORLD!", false, false, HELLO, COMMA, WORLD, BANG);
    CHECK_IDS(v, "Hello, WORLD!", true, false, CLS, HELLO, COMMA, WORLD, BANG, SEP);
    /* longest match from the left, continuation pieces without ▁ */
    CHECK_IDS(v, "hellolo", false, false, HELLO, LO);
    /* a word with an unmatched part is [UNK] as a whole */
    CHECK_IDS(v, "helo world", false, false, UNK, WORLD);
    /* llama.cpp keeps of each NFD only its first code point and drops no combining mark
     * (HuggingFace's BERT drops them): a precomposed é is "e", but e + U+0301 keeps
     * the mark, which no piece matches */
    CHECK_IDS(v, "Caf\xc3\xa9 cafe\xcc\x81", false, false, CAFE, UNK);
    CHECK_IDS(v, "hello\xcc\x81 world", false, false, UNK, WORLD);
    CHECK_IDS(v, "\xcc\x81", false, false, UNK); /* a lone mark: a word no piece matches */
    /* a Hangul syllable is its leading consonant (U+1112 for 한 and 하) */
    CHECK_IDS(v, "\xed\x95\x9c \xed\x95\x98", false, false, HIEUH, HIEUH);
    /* Unicode 15.0's Kawi danda U+11F43 is punctuation, a word of its own; its Egyptian
     * format control U+13439 vanishes (both were unassigned in 14.0) */
    CHECK_IDS(v, "a\xf0\x91\xbd\x83" "b", false, false, A, KAWI_DANDA, B);
    CHECK_IDS(v, "hel\xf0\x93\x90\xb9lo", false, false, HELLO);
    /* CJK ideographs are words of their own; control characters vanish */
    CHECK_IDS(v, "\xe4\xbd\xa0\xe5\xa5\xbd", false, false, UNK, UNK);
    CHECK_IDS(v, "hel\x01lo", false, false, HELLO);
    {
        int32_t ids[8];
        CHECK_EQ(tokenize(v, " \t\n", false, false, ids), 0);
        CHECK_EQ(tokenize(v, "\xff\xfe", false, false, ids), 0); /* U+FFFD is dropped */
    }
    /* detokenize: ▁ back to spaces, WordPiece's own leading space included */
    CHECK_DETOK(v, false, " hello world", HELLO, WORLD);
    CHECK_DETOK(v, false, " hello world", CLS, HELLO, WORLD, SEP);
    CHECK_DETOK(v, false, " hello!", HELLO, BANG); /* clean_up_tokenization_spaces */
    toy_vocab_free(v);

    /* normalizer keys false (as later llama.cpp reads them): neither lowercase nor NFD */
    st = load_wpm(toks, N, true, &v);
    CHECK_MSG(!st, "%s", toy_last_error());
    if (st) return;
    CHECK_IDS(v, "Hello hello caf\xc3\xa9 cafe", false, false, HELLO_CASED, HELLO, CAFE_ACCENT,
              CAFE);
    toy_vocab_free(v);
}

/* ---------------------------------------------------------------- broken metadata */

/* A tiny valid SPM vocabulary, then one change. */
static toy_gguf_writer *tiny_writer(void) {
    const char *toks[] = {"<unk>", "<s>", "</s>", "a"};
    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5);
    set_tokens(w, toks, 4);
    return w;
}

static void expect_error(toy_gguf_writer *w, toy_status want, const char *msg) {
    toy_vocab *v = NULL;
    toy_status st = load_written(w, &v);
    CHECK_MSG(st == want, "want status %d (%s), got %d: %s", (int)want, msg, (int)st,
              toy_last_error());
    CHECK(v == NULL);
    CHECK_STR_CONTAINS(toy_last_error(), msg);
    toy_vocab_free(v);
}

static void test_errors(void) {
    toy_vocab *v = NULL;
    CHECK(!load_written(tiny_writer(), &v));
    toy_vocab_free(v);

    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_gguf_writer_set_u32(w, "general.alignment", 32);
    expect_error(w, TOY_ERR_NOT_FOUND, "tokenizer.ggml.model");

    w = tiny_writer();
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.model", 1);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.model: expected a string");

    w = tiny_writer();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "t5x", 3);
    expect_error(w, TOY_ERR_UNSUPPORTED, "tokenizer.ggml.model: tokenizer 't5x'");

    w = tiny_writer();
    toy_gguf_writer_remove(w, "tokenizer.ggml.tokens");
    expect_error(w, TOY_ERR_NOT_FOUND, "tokenizer.ggml.tokens: key not found");

    w = tiny_writer();
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.tokens", 7);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.tokens: expected an array of strings");

    w = tiny_writer();
    const int32_t ints[] = {1, 2, 3, 4};
    toy_gguf_writer_set_array(w, "tokenizer.ggml.tokens", TOY_GGUF_INT32, ints, 4);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.tokens: expected an array of strings");

    w = tiny_writer();
    set_strs(w, "tokenizer.ggml.tokens", (const char *const[]){"a", "b", "a"}, 3);
    expect_error(w, TOY_ERR_FORMAT, "duplicate token 'a' has ids 0 and 2");

    w = tiny_writer();
    const float scores[] = {0, 0};
    toy_gguf_writer_set_array(w, "tokenizer.ggml.scores", TOY_GGUF_FLOAT32, scores, 2);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.scores: 2 entries for 4 tokens");

    w = tiny_writer();
    set_strs(w, "tokenizer.ggml.token_type", (const char *const[]){"1", "1", "1", "1"}, 4);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.token_type: expected an array of numbers");

    w = tiny_writer();
    toy_gguf_writer_set_u8(w, "tokenizer.ggml.add_bos_token", 1);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.add_bos_token: expected a bool");

    w = tiny_writer();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.bos_token_id", "1", 1);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.bos_token_id: expected an integer");

    w = tiny_writer();
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 99); /* out of range */
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 3);
    CHECK(!load_written(w, &v)); /* llama.cpp keeps the default (1) */
    CHECK_EQ(toy_vocab_bos(v), 1);
    CHECK_EQ(toy_vocab_eos(v), 3);
    toy_vocab_free(v);

    /* BPE: merges are required; a pre-tokenizer must be known; add_bos needs a BOS
     * (the BPE default, 11, is out of range in 4 tokens) */
    w = tiny_writer();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    expect_error(w, TOY_ERR_NOT_FOUND, "tokenizer.ggml.merges");

    w = tiny_writer();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    set_strs(w, "tokenizer.ggml.merges", (const char *const[]){"a b"}, 1);
    toy_gguf_writer_set_str(w, "tokenizer.ggml.pre", "no-such-pre", 11);
    expect_error(w, TOY_ERR_UNSUPPORTED, "tokenizer.ggml.pre: unknown pre-tokenizer 'no-such-pre'");

    w = tiny_writer();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    set_strs(w, "tokenizer.ggml.merges", (const char *const[]){"a b"}, 1);
    toy_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.add_bos_token is true, but "
                                    "tokenizer.ggml.bos_token_id is not set");

    w = tiny_writer();
    toy_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    toy_gguf_writer_set_u32(w, "tokenizer.ggml.merges", 0);
    expect_error(w, TOY_ERR_FORMAT, "tokenizer.ggml.merges: expected an array of strings");

    /* an empty token is named after its id, as llama.cpp does */
    w = tiny_writer();
    set_strs(w, "tokenizer.ggml.tokens", (const char *const[]){"<unk>", "", "x"}, 3);
    CHECK(!load_written(w, &v));
    CHECK(v && !strcmp(toy_vocab_token_text(v, 1), "[EMPTY_1]"));
    toy_vocab_free(v);

    CHECK_EQ(toy_vocab_load(NULL, &v), TOY_ERR_INVALID);
    toy_vocab_free(NULL);
    CHECK_EQ(toy_vocab_n_tokens(NULL), 0);
    CHECK(!toy_vocab_is_eog(NULL, 0));
}

/* A text can need more ids than it has bytes: every invalid UTF-8 byte becomes U+FFFD,
 * three byte-level tokens. `toy train` sized its buffer at a token a byte plus 8 and used
 * the count unchecked: a heap overflow on random data. Now a buffer that size is refused
 * with the count, and toy_tokenize_alloc gives all of them. */
static void test_more_tokens_than_bytes(void) {
    toy_vocab *v = NULL;
    CHECK(!load_written(bpe_writer("gpt-2"), &v));
    if (!v) return;
    enum { LEN = 2000 };
    char text[LEN];
    memset(text, 0xff, LEN);
    int32_t *ids = malloc((LEN + 8) * sizeof *ids), n = 0;
    CHECK_EQ(toy_tokenize(v, text, LEN, false, false, ids, LEN + 8, &n), TOY_ERR_BUFFER);
    CHECK_EQ(n, 3 * LEN); /* EF BF BD, each a byte token of this vocabulary */
    free(ids);
    CHECK(!toy_tokenize_alloc(v, text, LEN, false, false, &ids, &n));
    CHECK_EQ(n, 3 * LEN);
    CHECK(ids && ids[0] == 0xEF && ids[1] == 0xBF && ids[2] == 0xBD && ids[3 * LEN - 1] == 0xBD);
    toy_free(ids);
    toy_vocab_free(v);
}

int main(void) {
    test_spm();
    test_more_tokens_than_bytes();
    test_bpe();
    test_bpe_long_runs();
    test_random_bytes();
    test_wpm();
    test_errors();
    return test_finish("test_tokenizer");
}
