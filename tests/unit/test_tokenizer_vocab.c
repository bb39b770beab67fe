/* test_tokenizer_vocab.c — toy's tokenizers against llama.cpp's.
 *
 * 1. vocab/NAME.gguf with their .inp/.out test vectors (llama.cpp's models/ directory):
 *    every string tokenized with add_special = false, parse_special = false must give
 *    exactly the ids of its .out line. Then detokenize(tokenize(text)) must give the
 *    text back, except where llama.cpp does not promise that:
 *      - WordPiece (bert) lowercases, drops whitespace and precomposed letters' accents:
 *        not checked;
 *      - vocabularies with clean_up_tokenization_spaces (gpt-2, mpt, refact,
 *        llama-bpe) turn " ." " ," " !" " ?" " 's" " 'm" " 're" " 've" " ' " into
 *        the form without the space: strings with those are not checked.
 *    SentencePiece's added leading space is removed again by detokenize, so SPM
 *    round-trips exactly.
 * 2. strings on which toy and llama.cpp once differed, with llama.cpp's ids.
 * 3. models/NAME.gguf with NAME.ref.gguf: ref.prompt tokenized with add_special = true
 *    must give the first ref.n_prompt ids of ref.tokens; the end-of-generation set must
 *    be the one the fixtures README lists, and the greedy continuation must stop exactly
 *    at its first end-of-generation token. */
#include <dirent.h>
#include <stdint.h>
#include <time.h>

#include "test.h"
#include "toy.h"

static double now_ms(void) { return 1e3 * test_now_s(); }

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = (size_t)n;
    }
    return buf;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .gguf files of a folder, sorted; NULL-terminated. */
static char **list_gguf(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    size_t n = 0, cap = 64;
    char **names = malloc(cap * sizeof *names);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf")) continue;
        if (n + 1 == cap) names = realloc(names, (cap *= 2) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    names[n] = NULL;
    return names;
}

static void free_list(char **names) {
    for (char **p = names; p && *p; p++) free(*p);
    free(names);
}

/* The text shown in a failure message: escapes, and at most 60 bytes. */
static void print_text(const char *s, size_t len) {
    fputc('"', stderr);
    for (size_t i = 0; i < len && i < 60; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stderr);
        else if (c == '\t') fputs("\\t", stderr);
        else if (c < 0x20) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    fputs(len > 60 ? "\"..." : "\"", stderr);
}

static void print_ids(const char *label, const int32_t *ids, int n) {
    fprintf(stderr, "    %s:", label);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
    fputc('\n', stderr);
}

/* The ids of one .out line. */
static int parse_ids(const char *line, size_t len, int32_t *ids, int max) {
    int n = 0;
    const char *p = line, *end = line + len;
    while (p < end) {
        while (p < end && *p == ' ') p++;
        if (p >= end) break;
        char *q;
        long x = strtol(p, &q, 10);
        if (q == p) break;
        if (n < max) ids[n] = (int32_t)x;
        n++;
        p = q;
    }
    return n;
}

static bool has_cleanup_pattern(const char *s, size_t len) {
    static const char *const pats[] = {" .", " ,", " !", " ?", " '"};
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++)
        if (memmem(s, len, pats[i], 2)) return true;
    return false;
}

enum { MAX_IDS = 8192 };

static void test_vocab_file(const char *dir, const char *name) {
    char path[4600], inp_path[4700], out_path[4700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    size_t inp_len, out_len;
    char *inp = read_file(inp_path, &inp_len), *out = read_file(out_path, &out_len);
    if (!inp || !out) {
        printf("%s: no test vectors, skipped\n", name);
        free(inp);
        free(out);
        return;
    }

    toy_gguf *g = NULL;
    toy_vocab *v = NULL;
    double t0 = now_ms();
    toy_status st = toy_gguf_open(path, &g);
    if (!st) st = toy_vocab_load(g, &v);
    double t_load = now_ms() - t0;
    CHECK_MSG(!st, "%s: %s", name, toy_last_error());
    if (st) {
        toy_gguf_close(g);
        free(inp);
        free(out);
        return;
    }
    bool wpm = toy_vocab_kind_of(v) == TOY_VOCAB_WPM;
    bool cleans = strstr(name, "gpt-2") || strstr(name, "mpt") || strstr(name, "refact") ||
                  strstr(name, "llama-bpe");

    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    int32_t *want = malloc(MAX_IDS * sizeof *want), *got = malloc(MAX_IDS * sizeof *got);
    int n_cases = 0, n_pass = 0, n_round = 0, n_round_ok = 0;
    double t_tok = 0;
    const char *line = out, *out_end = out + out_len;
    for (const char *p = inp;;) {
        const char *e = memmem(p, inp_len - (size_t)(p - inp), sep, sep_len);
        if (!e) break; /* what follows the last separator is not a test */
        size_t text_len = (size_t)(e - p);
        const char *nl = memchr(line, '\n', (size_t)(out_end - line));
        size_t line_len = nl ? (size_t)(nl - line) : (size_t)(out_end - line);
        int n_want = parse_ids(line, line_len, want, MAX_IDS);
        line = nl ? nl + 1 : out_end;
        n_cases++;

        int32_t n_got = 0;
        double t1 = now_ms();
        st = toy_tokenize(v, p, text_len, false, false, got, MAX_IDS, &n_got);
        t_tok += now_ms() - t1;
        bool ok = !st && n_got == n_want && n_got <= MAX_IDS &&
                  !memcmp(got, want, (size_t)n_got * sizeof *got);
        if (ok) {
            n_pass++;
        } else {
            fprintf(stderr, "%s: case %d ", name, n_cases - 1);
            print_text(p, text_len);
            fprintf(stderr, " %s\n", st ? toy_last_error() : "differs");
            print_ids("want", want, n_want < MAX_IDS ? n_want : MAX_IDS);
            print_ids("got ", got, n_got < MAX_IDS ? n_got : MAX_IDS);
        }

        if (ok && !wpm && !(cleans && has_cleanup_pattern(p, text_len))) {
            char *back = NULL;
            size_t back_len = 0;
            n_round++;
            st = toy_detokenize(v, got, n_got, false, &back, &back_len);
            if (!st && back_len == text_len && !memcmp(back, p, text_len)) {
                n_round_ok++;
            } else {
                fprintf(stderr, "%s: case %d round trip: ", name, n_cases - 1);
                print_text(p, text_len);
                fputs(" -> ", stderr);
                if (st) fputs(toy_last_error(), stderr);
                else print_text(back, back_len);
                fputc('\n', stderr);
            }
            free(back);
        }
        p = e + sep_len;
    }
    /* arbitrary bytes, specials parsed or not: no failure, ids in range */
    unsigned long long seed = 7;
    int n_random_ok = 0;
    for (int iter = 0; iter < 200; iter++) {
        char text[200];
        size_t len = test_rand_u64(&seed) % sizeof text;
        for (size_t i = 0; i < len; i++) text[i] = (char)(test_rand_u64(&seed) & 0xFF);
        int32_t n_got = 0;
        st = toy_tokenize(v, text, len, iter & 1, iter & 2, got, MAX_IDS, &n_got);
        bool ok = !st && n_got <= MAX_IDS;
        for (int i = 0; ok && i < n_got; i++) ok = got[i] >= 0 && got[i] < toy_vocab_n_tokens(v);
        char *back = NULL;
        size_t back_len;
        ok = ok && !toy_detokenize(v, got, n_got, iter & 4, &back, &back_len);
        free(back);
        n_random_ok += ok;
    }
    CHECK_MSG(n_random_ok == 200, "%s: %d of 200 random texts failed", name, 200 - n_random_ok);
    CHECK_MSG(n_cases > 0, "%s: no test strings", name);
    CHECK_MSG(n_pass == n_cases, "%s: %d of %d strings differ", name, n_cases - n_pass, n_cases);
    CHECK_MSG(n_round_ok == n_round, "%s: %d of %d round trips differ", name,
              n_round - n_round_ok, n_round);
    printf("%-32s %2d/%2d tokenized exactly, %2d/%2d round trips; load %.1f ms, tokenize %.2f ms\n",
           name, n_pass, n_cases, n_round_ok, n_round, t_load, t_tok);

    free(want);
    free(got);
    toy_vocab_free(v);
    toy_gguf_close(g);
    free(inp);
    free(out);
}

/* Strings on which toy and llama.cpp once differed (tests/python/tokenizer_diff.py found them),
 * with llama.cpp's ids (add_special and parse_special off). */
static const struct {
    const char *vocab, *text;
    int32_t ids[12];
    int n;
} found_cases[] = {
    /* WordPiece keeps combining marks (only a precomposed letter loses its accent, by
     * NFD's first code point), so a word with a decomposed accent is [UNK] */
    {"ggml-vocab-bert-bge.gguf", "e\xcc\x81", {100}, 1},
    {"ggml-vocab-bert-bge.gguf", "browne\xcc\x81 quick", {100, 4248}, 2},
    {"ggml-vocab-bert-bge.gguf", "Cre\xcc\x80me Bru\xcc\x82le\xcc\x81" "e Cr\xc3\xa8me",
     {100, 100, 13675, 21382}, 4},
    /* Unicode 15.1 tables: U+11F43 KAWI DANDA (15.0) is punctuation, a word of its own */
    {"ggml-vocab-bert-bge.gguf", "a\xf0\x91\xbd\x83" "b", {1037, 100, 1038}, 3},
    /* ... and U+11F50 KAWI DIGIT ZERO a number, so the space before it is a word alone */
    {"ggml-vocab-llama-bpe.gguf", " \xf0\x91\xbd\x90", {220, 172, 239, 121, 238}, 5},
};

static void test_found_cases(const char *dir) {
    for (size_t i = 0; i < sizeof found_cases / sizeof found_cases[0]; i++) {
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", dir, found_cases[i].vocab);
        toy_gguf *g = NULL;
        toy_vocab *v = NULL;
        toy_status st = toy_gguf_open(path, &g);
        if (!st) st = toy_vocab_load(g, &v);
        CHECK_MSG(!st, "%s: %s", found_cases[i].vocab, toy_last_error());
        int32_t ids[64], n = 0;
        const char *text = found_cases[i].text;
        if (!st) st = toy_tokenize(v, text, strlen(text), false, false, ids, 64, &n);
        bool same = !st && n == found_cases[i].n &&
                    !memcmp(ids, found_cases[i].ids, (size_t)n * sizeof *ids);
        CHECK_MSG(same, "%s: found case %zu differs", found_cases[i].vocab, i);
        if (!same) {
            fprintf(stderr, "    text: ");
            print_text(text, strlen(text));
            fputc('\n', stderr);
            print_ids("want", found_cases[i].ids, found_cases[i].n);
            print_ids("got ", ids, n);
        }
        toy_vocab_free(v);
        toy_gguf_close(g);
    }
}

/* The end-of-generation sets that the fixtures README lists, by model name prefix. */
static const struct {
    const char *prefix;
    int32_t ids[4];
    int n;
} eog_sets[] = {
    {"llama-spm", {2}, 1},        {"mixtral", {2}, 1},           {"gemma", {2}, 1},
    {"phi3", {2048, 2051}, 2},    {"llama3-bpe", {2049, 2050}, 2}, {"qwen", {2048, 2050}, 2},
    {"smollm2", {2048, 2050}, 2}, {"olmoe", {2048}, 1},          {"granite", {2048}, 1},
};

static void test_model_file(const char *dir, const char *name) {
    char path[4600], ref_path[4700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(ref_path, sizeof ref_path, "%.*s.ref.gguf", (int)(strlen(path) - 5), path);

    toy_gguf *g = NULL, *ref = NULL;
    toy_vocab *v = NULL;
    toy_status st = toy_gguf_open(path, &g);
    if (!st) st = toy_vocab_load(g, &v);
    CHECK_MSG(!st, "%s: %s", name, toy_last_error());
    if (!st) st = toy_gguf_open(ref_path, &ref);
    CHECK_MSG(!st, "%s: %s", ref_path, toy_last_error());

    const char *prompt = NULL;
    size_t prompt_len = 0;
    uint64_t n_prompt = 0;
    const toy_gguf_tensor *t = NULL;
    if (!st) st = toy_gguf_get_str(ref, "ref.prompt", &prompt, &prompt_len);
    if (!st) st = toy_gguf_get_u64(ref, "ref.n_prompt", &n_prompt);
    if (!st && !(t = toy_gguf_find_tensor(ref, "ref.tokens"))) st = TOY_ERR_NOT_FOUND;
    CHECK_MSG(!st, "%s: %s", ref_path, toy_last_error());
    if (st) goto done;
    CHECK(t->type == TOY_TYPE_I32);
    int64_t n_ref = toy_tensor_nelements(t);
    int32_t *ref_ids = malloc((size_t)n_ref * sizeof *ref_ids);
    memcpy(ref_ids, t->data, (size_t)n_ref * sizeof *ref_ids);

    int32_t ids[256], n = 0;
    st = toy_tokenize(v, prompt, prompt_len, true, false, ids, 256, &n);
    CHECK_MSG(!st, "%s: %s", name, toy_last_error());
    bool same = !st && (uint64_t)n == n_prompt && !memcmp(ids, ref_ids, (size_t)n * sizeof *ids);
    CHECK_MSG(same, "%s: prompt tokens differ", name);
    if (!same) {
        print_ids("want", ref_ids, (int)n_prompt);
        print_ids("got ", ids, n);
    }

    /* the set of EOG tokens, and llama.cpp stopping at the first one */
    int set = -1;
    for (int i = 0; i < (int)(sizeof eog_sets / sizeof eog_sets[0]); i++)
        if (!strncmp(name, eog_sets[i].prefix, strlen(eog_sets[i].prefix))) set = i;
    CHECK_MSG(set >= 0, "%s: no EOG set listed for it", name);
    if (set >= 0) {
        int n_eog = 0;
        for (int32_t id = 0; id < toy_vocab_n_tokens(v); id++) {
            if (!toy_vocab_is_eog(v, id)) continue;
            n_eog++;
            bool listed = false;
            for (int k = 0; k < eog_sets[set].n; k++) listed |= eog_sets[set].ids[k] == id;
            CHECK_MSG(listed, "%s: token %d is EOG", name, (int)id);
        }
        CHECK_EQ(n_eog, eog_sets[set].n);
    }
    for (int64_t i = (int64_t)n_prompt; i < n_ref; i++) {
        bool last = i == n_ref - 1, eog = toy_vocab_is_eog(v, ref_ids[i]);
        bool stopped_early = n_ref - (int64_t)n_prompt < 32;
        CHECK_MSG(eog == (last && stopped_early), "%s: generated token %lld (%d) eog=%d", name,
                  (long long)i, (int)ref_ids[i], (int)eog);
    }

    /* detokenizing the prompt: SPM keeps the space it added after BOS (llama.cpp removes
     * only the first token's, and here that is BOS). These 2048-token SPM vocabularies
     * have no "▁" piece, so " 42" is spelled with the byte tokens of U+2581, and byte
     * tokens detokenize to their bytes: llama.cpp writes "ran▁42". */
    char *back = NULL;
    size_t back_len = 0;
    if (same && !toy_detokenize(v, ids, n, false, &back, &back_len)) {
        char want_text[512];
        bool spm = toy_vocab_kind_of(v) == TOY_VOCAB_SPM;
        snprintf(want_text, sizeof want_text, "%s%.*s", spm && strncmp(name, "gemma", 5) ? " " : "",
                 (int)prompt_len, prompt);
        char *digits = strstr(want_text, " 42");
        if (spm && digits) {
            memmove(digits + 3, digits + 1, strlen(digits + 1) + 1);
            memcpy(digits, "\xe2\x96\x81", 3);
        }
        CHECK_MSG(back_len == strlen(want_text) && !memcmp(back, want_text, back_len),
                  "%s: detokenized prompt \"%s\", want \"%s\"", name, back, want_text);
    }
    free(back);
    printf("%-32s prompt %2d tokens ok, %d generated, eog set ok\n", name, n,
           (int)(n_ref - (int64_t)n_prompt));
    free(ref_ids);
done:
    toy_vocab_free(v);
    toy_gguf_close(g);
    toy_gguf_close(ref);
}

int main(void) {
    const char *fixtures = test_fixtures_dir();
    if (!fixtures) {
        printf("SKIP: needs the fixtures' vocabularies and llama.cpp's ids for their test strings\n");
        return TEST_SKIP_CODE;
    }
    char dir[4200];

    snprintf(dir, sizeof dir, "%s/vocab", fixtures);
    char **names = list_gguf(dir);
    CHECK_MSG(names && names[0], "no vocabularies in %s", dir);
    for (char **p = names; p && *p; p++) test_vocab_file(dir, *p);
    free_list(names);
    test_found_cases(dir);

    snprintf(dir, sizeof dir, "%s/models", fixtures);
    names = list_gguf(dir);
    int n_models = 0;
    for (char **p = names; p && *p; p++) {
        if (strstr(*p, ".ref.gguf")) continue;
        test_model_file(dir, *p);
        n_models++;
    }
    CHECK_MSG(n_models > 0, "no models in %s", dir);
    free_list(names);
    return test_finish("test_tokenizer_vocab");
}
