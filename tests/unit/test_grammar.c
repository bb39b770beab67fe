/* test_grammar.c — GBNF grammars: parsing (every construct, and errors naming line and
 * column), the language each grammar accepts, the token masks against a token-by-token
 * reference on real vocabularies, and sampling under a grammar. */
#include <stdbool.h>

#include "grammar.h"
#include "sampler.h"
#include "tokenizer.h"
#include "test.h"
#include "toy.h"

static toy_grammar *compile(const toy_vocab *v, const char *gbnf) {
    toy_grammar *g = NULL;
    const toy_status st = toy_grammar_new(v, gbnf, &g);
    CHECK_MSG(!st, "%s: %s", gbnf, toy_last_error());
    return g;
}

static bool accepts(const toy_grammar *g, const char *text) { return toy_grammar_accepts(g, text, strlen(text)); }

/* Each grammar with texts it must accept and texts it must refuse ("|"-free lists). */
typedef struct {
    const char *gbnf;
    const char *yes[8];
    const char *no[8];
} language_case;

static const language_case languages[] = {
    {"root ::= \"abc\"", {"abc"}, {"", "ab", "abcd", "abd"}},
    {"root ::= \"a\" | \"bc\" | \"\"", {"a", "bc", ""}, {"b", "abc", "aa"}},
    {"root ::= [a-c]+", {"a", "abcabc", "cccc"}, {"", "d", "ad"}},
    {"root ::= [^a-c\\n]*", {"", "xyz", "é€😀", "d e"}, {"a", "xa", "\n"}},
    {"root ::= ( \"x\" | \"yy\" )* \"z\"", {"z", "xz", "yyxz", "xxyyyyz"}, {"", "yz", "xy"}},
    {"root ::= \"a\"?  \"b\"", {"b", "ab"}, {"aab", "a", ""}},
    {"root ::= [0-9]{3}", {"123", "000"}, {"12", "1234", ""}},
    {"root ::= [0-9]{2,4}", {"12", "123", "1234"}, {"1", "12345"}},
    {"root ::= [0-9]{2,}", {"12", "1234567"}, {"1", ""}},
    {"root ::= [0-9]{0,2} \"!\"", {"!", "1!", "12!"}, {"123!", "1"}},
    {"root ::= .", {"a", "\xc3\xa9", "\xf0\x9f\x98\x80", "\n"}, {"", "ab", "\xc3"}},
    /* overlong forms and surrogates are no characters: "{" cannot be passed as F0 80 81 BB */
    {"root ::= \"{\"", {"{"}, {"\xf0\x80\x81\xbb", "\xc1\xbb", "\xe0\x81\xbb"}},
    {"root ::= [^a]", {"\xed\x9f\xbf"}, {"\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\x80"}},
    /* escapes and Unicode */
    {"root ::= \"\\x41\\u00e9\\U0001F600\\t\\n\\\\\\\"\"", {"A\xc3\xa9\xf0\x9f\x98\x80\t\n\\\""}, {"A"}},
    {"root ::= [\\u0400-\\u04FF]+", {"\xd0\x96\xd0\xb8", "\xd1\x8f"}, {"a", "\xc3\xa9"}},
    {"root ::= \"日本\" [語人]", {"日本語", "日本人"}, {"日本", "日本国"}},
    {"root ::= [\\]\\-\\^a]", {"]", "-", "^", "a"}, {"b", "\\"}},
    /* rules, nesting, comments, newlines inside groups and after | */
    {"# a comment\nroot ::= item (\",\" item)*   # list\nitem ::= [a-z]+\n", {"a", "ab,c", "x,y,z"}, {"", "a,", ",a"}},
    {"root ::= (\n  \"a\"\n  | \"b\"\n)\n", {"a", "b"}, {"ab"}},
    {"root ::= \"a\" |\n  \"b\"", {"a", "b"}, {"ab"}},
    {"root ::= obj\nobj ::= \"{\" (obj)? \"}\"", {"{}", "{{}}", "{{{}}}"}, {"{", "{}}", "{{}"}},
    {"root ::= \"(\" root \")\" | \"x\"", {"x", "(x)", "((x))"}, {"(x", "()"}},
};

/* A prefix that can only become a surrogate (ED A0..BF) is refused at once: allowing it
 * left a generation where no byte could follow (a bug seen on an SPM vocabulary). */
static void test_partial_characters(void) {
    toy_grammar *g = compile(NULL, "root ::= [^\"]{0,5}");
    if (!g) return;
    CHECK(accepts(g, "\xed\x9f\xbf"));
    CHECK(!accepts(g, "\xed\xa0\x80"));
    toy_grammar_free(g);
}

static void test_languages(void) {
    for (size_t i = 0; i < sizeof languages / sizeof *languages; i++) {
        const language_case *c = &languages[i];
        toy_grammar *g = compile(NULL, c->gbnf);
        if (!g) continue;
        for (int k = 0; k < 8 && c->yes[k]; k++) CHECK_MSG(accepts(g, c->yes[k]), "%s should accept '%s'", c->gbnf, c->yes[k]);
        for (int k = 0; k < 8 && c->no[k]; k++) CHECK_MSG(!accepts(g, c->no[k]), "%s should refuse '%s'", c->gbnf, c->no[k]);
        toy_grammar_free(g);
    }
}

/* Errors name line and column and what is wrong. */
static void test_errors(void) {
    static const struct {
        const char *gbnf, *message;
    } cases[] = {
        {"root ::= foo", "line 1, column 10: rule 'foo' is not defined"},
        {"item ::= \"a\"", "no rule 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
        {"root ::= \"abc", "line 1, column 10: unterminated literal"},
        {"root ::= [abc", "line 1, column 10: unterminated character class"},
        {"root ::= (\"a\"", "line 1, column 10: '(' is not closed"},
        {"root ::= \"a\")", "line 1, column 13: ')' without '('"},
        {"root ::= * \"a\"", "line 1, column 10: '*' follows nothing"},
        {"root ::= \"a\"{3,1}", "the maximum is below the minimum"},
        {"root ::= \"a\"{99999}", "repetition count over"},
        {"root ::= [z-a]", "line 1, column 12: range end"},
        {"root ::= \"\\q\"", "line 1, column 11: unknown escape"},
        {"root ::= \"\\xZZ\"", "hexadecimal"},
        {"root ::= \"\\U00110000\"", "beyond U+10FFFF"},
        {"root  \"a\"", "line 1, column 7: expected '::='"},
        {"root ::= <think>", "token references"},
        {"root ::= \"a\"\n\n  \"b\"", "line 3, column 3: expected a rule name"},
        {"root ::= \"\xff\"", "invalid UTF-8"},
        {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
        {"root ::= x\nx ::= y? x \"a\" | \"b\"\ny ::= \"c\"", "left-recursive"},
        {"root ::= x\nx ::= (\"a\"?)*", "left-recursive"},
        {"root ::= ~", "line 1, column 10: unexpected character '~'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        toy_grammar *g = NULL;
        const toy_status st = toy_grammar_new(NULL, cases[i].gbnf, &g);
        CHECK_MSG(st == TOY_ERR_INVALID && !g, "%s: status %d", cases[i].gbnf, (int)st);
        CHECK_STR_CONTAINS(toy_last_error(), cases[i].message);
        toy_grammar_free(g);
    }
    /* a long chain of rules is no recursion of C functions */
    char *chain = malloc(200000 * 16);
    size_t n = 0;
    n += (size_t)sprintf(chain + n, "root ::= r0\n");
    for (int i = 0; i < 100000; i++) n += (size_t)sprintf(chain + n, "r%d ::= r%d\n", i, i + 1);
    n += (size_t)sprintf(chain + n, "r100000 ::= \"z\"\n");
    toy_grammar *g = NULL;
    const toy_status st = toy_grammar_new(NULL, chain, &g);
    CHECK_EQ(st, TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "nest too deeply");
    toy_grammar_free(g);
    free(chain);
}

/* ---------------------------------------------------------------- masks */

typedef struct {
    int32_t ed, b1, x9f, quote;
} ty_vocab_internal_ids;

static uint64_t rng_state = 0x1234567;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* From the grammar's start, follows random allowed tokens; at every step the mask must
 * equal the token-by-token reference. */
static void check_masks(const toy_vocab *v, const char *name, const char *gbnf, int steps) {
    toy_grammar *g = compile(v, gbnf);
    if (!g) return;
    const int32_t n = toy_vocab_n_tokens(v);
    const size_t words = ((size_t)n + 63) / 64;
    uint64_t *bits = malloc(words * sizeof *bits);
    int32_t *allowed = malloc((size_t)n * sizeof *allowed);
    grammar_cursor c;
    CHECK(!ty_grammar_cursor_init(g, &c));
    int mismatches = 0;
    for (int step = 0; step < steps && !c.finished; step++) {
        CHECK(!ty_grammar_allowed(g, &c, bits));
        int32_t n_allowed = 0;
        /* every allowed token, and a sample of the others, against the reference */
        for (int32_t t = 0; t < n; t++) {
            const bool mask = bits[t / 64] >> (t % 64) & 1;
            if (!mask && rnd() % 16) continue;
            const bool ref = ty_grammar_allows_reference(g, &c, t);
            if (mask != ref && mismatches++ < 5)
                fprintf(stderr, "%s: step %d token %d: mask %d, reference %d\n", name, step, t, mask, ref);
            if (mask) allowed[n_allowed++] = t;
        }
        if (!n_allowed) break;
        const int32_t t = allowed[rnd() % (uint32_t)n_allowed];
        CHECK_MSG(!ty_grammar_accept_token(g, &c, t), "%s: %s", name, toy_last_error());
    }
    CHECK_MSG(mismatches == 0, "%s: %d tokens where the mask and the reference differ for %s", name, mismatches, gbnf);
    ty_grammar_cursor_free(&c);
    free(bits);
    free(allowed);
    toy_grammar_free(g);
}

/* SPM's byte tokens: after <0xED>, <0x9F> may follow (U+D7xx) but not <0xB1>, which
 * could only begin a surrogate, after which no byte fits (seen on a random model). */
static void check_surrogate_prefix(const toy_vocab *v) {
    toy_grammar *g = compile(v, "root ::= \"\\\"\" [^\"]{0,5} \"\\\"\"");
    const ty_vocab_internal_ids ids = {ty_vocab_find(v, "<0xED>", 6), ty_vocab_find(v, "<0xB1>", 6),
                                        ty_vocab_find(v, "<0x9F>", 6), ty_vocab_find(v, "\"", 1)};
    CHECK(g && ids.ed >= 0 && ids.b1 >= 0 && ids.x9f >= 0 && ids.quote >= 0);
    if (!g || ids.ed < 0 || ids.b1 < 0 || ids.x9f < 0 || ids.quote < 0) return toy_grammar_free(g);
    grammar_cursor c;
    CHECK(!ty_grammar_cursor_init(g, &c));
    CHECK(!ty_grammar_accept_token(g, &c, ids.quote));
    CHECK(!ty_grammar_accept_token(g, &c, ids.ed));
    uint64_t *bits = calloc(((size_t)toy_vocab_n_tokens(v) + 63) / 64, sizeof *bits);
    CHECK(!ty_grammar_allowed(g, &c, bits));
    CHECK(bits[ids.x9f / 64] >> (ids.x9f % 64) & 1);
    CHECK(!(bits[ids.b1 / 64] >> (ids.b1 % 64) & 1));
    free(bits);
    ty_grammar_cursor_free(&c);
    toy_grammar_free(g);
}

static const char *mask_grammars[] = {
    "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws \"}\"\nstr ::= \"\\\"\" [^\"\\\\]{0,12} \"\\\"\"\nws ::= [ ]?",
    "root ::= [0-9]+ (\".\" [0-9]+)?",
    "root ::= ([^a-z] | \"ab\")* \"z\"",
    "root ::= [\\u0400-\\u04FF\\u4e00-\\u9fff ]{1,20}",
    "root ::= ([a-zA-Z]+ (\" \" | \", \")){1,8}",
};

static void test_masks(void) {
    const char *fixtures = test_fixtures_dir();
    if (!fixtures) {
        printf("masks: fixtures not found (set TOY_FIXTURES), skipped\n");
        return;
    }
    static const char *vocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-gpt-2.gguf",
                                   "ggml-vocab-phi-3.gguf"};
    for (size_t i = 0; i < sizeof vocabs / sizeof *vocabs; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/vocab/%s", fixtures, vocabs[i]);
        toy_gguf *gg = NULL;
        toy_vocab *v = NULL;
        if (toy_gguf_open(path, &gg) || toy_vocab_load(gg, &v)) {
            printf("%s: %s, skipped\n", vocabs[i], toy_last_error());
            toy_gguf_close(gg);
            continue;
        }
        for (size_t k = 0; k < sizeof mask_grammars / sizeof *mask_grammars; k++)
            check_masks(v, vocabs[i], mask_grammars[k], 6);
        if (i == 0) check_surrogate_prefix(v);
        toy_vocab_free(v);
        toy_gguf_close(gg);
    }
}

/* ---------------------------------------------------------------- sampling */

/* Sampling at temperature 1 from random logits under a grammar: every text is in the
 * language and ends with an end-of-generation token where the grammar allows it. */
static void test_sampling(void) {
    const char *fixtures = test_fixtures_dir();
    if (!fixtures) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-bpe.gguf", fixtures);
    toy_gguf *gg = NULL;
    toy_vocab *v = NULL;
    if (toy_gguf_open(path, &gg) || toy_vocab_load(gg, &v)) {
        toy_gguf_close(gg);
        return;
    }
    const char *gbnf = "root ::= \"[\" num (\", \" num){0,3} \"]\"\nnum ::= \"-\"? [1-9] [0-9]{0,2}";
    toy_grammar *g = compile(v, gbnf);
    const int32_t n = toy_vocab_n_tokens(v);
    float *logits = malloc((size_t)n * sizeof *logits);
    for (int run = 0; g && run < 20; run++) {
        toy_sampler_params p = toy_sampler_default_params();
        p.temperature = 1;
        p.top_k = 0;
        p.top_p = 1;
        p.min_p = 0;
        p.seed = (uint64_t)run;
        p.grammar = g;
        toy_sampler *s = NULL;
        CHECK(!toy_sampler_new(&p, n, &s));
        char text[512];
        size_t len = 0;
        bool ended = false;
        for (int step = 0; step < 100 && !ended; step++) {
            for (int32_t t = 0; t < n; t++) logits[t] = (float)(rnd() % 1000) / 250.0f;
            const int32_t tok = toy_sampler_sample(s, logits);
            CHECK_MSG(tok >= 0, "%s", toy_last_error());
            if (tok < 0) break;
            if (toy_vocab_is_eog(v, tok)) {
                ended = true;
                break;
            }
            size_t l = 0;
            CHECK(!toy_token_to_piece(v, tok, false, text + len, sizeof text - len - 1, &l));
            len += l;
        }
        text[len] = 0;
        CHECK_MSG(ended, "run %d did not end: '%s'", run, text);
        CHECK_MSG(accepts(g, text), "run %d: '%s' is not in the language", run, text);
        /* once ended, nothing more */
        CHECK_EQ(toy_sampler_sample(s, logits), -1);
        toy_sampler_free(s);
    }
    /* logit bias: -100 bans, a large bias wins */
    {
        toy_logit_bias bias[2] = {{5, -100.0f}, {7, 50.0f}};
        toy_sampler_params p = toy_sampler_default_params();
        p.temperature = 0;
        p.logit_bias = bias;
        p.n_logit_bias = 2;
        for (int32_t t = 0; t < n; t++) logits[t] = 0;
        logits[5] = 1000;
        toy_sampler *s = NULL;
        CHECK(!toy_sampler_new(&p, n, &s));
        CHECK_EQ(toy_sampler_sample(s, logits), 7);
        toy_sampler_free(s);
        bias[0].token = n;
        CHECK_EQ(toy_sampler_new(&p, n, &s), TOY_ERR_INVALID);
        CHECK_STR_CONTAINS(toy_last_error(), "logit_bias[0]: token");
    }
    free(logits);
    toy_grammar_free(g);
    toy_vocab_free(v);
    toy_gguf_close(gg);
}

/* The sampler with a grammar picks what a sampler without one picks from the row with
 * every refused token at -inf: with greedy and top-k it asks the grammar about its best
 * tokens only (grammar_top), else it masks the whole row; both must be that. */
static void test_sampler_equals_masked_row(void) {
    const char *fixtures = test_fixtures_dir();
    if (!fixtures) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", fixtures);
    toy_gguf *gg = NULL;
    toy_vocab *v = NULL;
    if (toy_gguf_open(path, &gg) || toy_vocab_load(gg, &v)) {
        toy_gguf_close(gg);
        return;
    }
    toy_grammar *g = compile(v, "root ::= \"{\\\"a\\\": \\\"\" [^\"\\\\]{0,30} \"\\\", \\\"n\\\": \" [0-9]{1,4} \"}\"");
    const int32_t n = toy_vocab_n_tokens(v);
    float *logits = malloc((size_t)n * sizeof *logits), *masked = malloc((size_t)n * sizeof *masked);
    uint64_t *bits = malloc(((size_t)n + 63) / 64 * sizeof *bits);
    static const struct {
        float temperature, top_p, min_p;
        int32_t top_k;
    } chains[] = {{0, 1, 0, 40}, {1, 1, 0, 40}, {0.8f, 0.95f, 0.05f, 40}, {1, 0.9f, 0, 0}, {1.5f, 1, 0, 5}};
    int compared = 0;
    for (size_t k = 0; g && k < sizeof chains / sizeof *chains; k++) {
        for (uint64_t seed = 0; seed < 4; seed++) {
            toy_sampler_params p = toy_sampler_default_params();
            p.temperature = chains[k].temperature;
            p.top_k = chains[k].top_k;
            p.top_p = chains[k].top_p;
            p.min_p = chains[k].min_p;
            p.seed = seed;
            toy_sampler *plain = NULL, *constrained = NULL;
            CHECK(!toy_sampler_new(&p, n, &plain));
            p.grammar = g;
            CHECK(!toy_sampler_new(&p, n, &constrained));
            grammar_cursor c;
            CHECK(!ty_grammar_cursor_init(g, &c));
            for (int step = 0; step < 60; step++) {
                /* logits that favour '"' and digits now and then, so strings end */
                for (int32_t t = 0; t < n; t++) logits[t] = (float)(rnd() % 1000) / 200.0f;
                CHECK(!ty_grammar_allowed(g, &c, bits));
                for (int32_t t = 0; t < n; t++) masked[t] = bits[t / 64] >> (t % 64) & 1 ? logits[t] : -INFINITY;
                const int32_t want = toy_sampler_sample(plain, masked), got = toy_sampler_sample(constrained, logits);
                CHECK_MSG(want == got, "chain %zu seed %llu step %d: %d with the grammar, %d from the masked row", k,
                          (unsigned long long)seed, step, got, want);
                compared++;
                if (want != got || got < 0 || toy_vocab_is_eog(v, got)) break;
                CHECK(!ty_grammar_accept_token(g, &c, got));
            }
            ty_grammar_cursor_free(&c);
            toy_sampler_free(plain);
            toy_sampler_free(constrained);
        }
    }
    CHECK_MSG(compared >= 20 * 10, "only %d steps compared", compared);
    free(logits);
    free(masked);
    free(bits);
    toy_grammar_free(g);
    toy_vocab_free(v);
    toy_gguf_close(gg);
}

/* toy_generate under a grammar that allows no token: an error with the sampler's
 * message, the text before it shown. "a" is complete after one token, and
 * logit_bias bans every end-of-generation token, the only ones left. */
static size_t shown;
static bool count_text(void *user, int32_t token, const char *text, size_t len) {
    (void)user, (void)token, (void)text;
    shown += len;
    return true;
}

static void test_generate_dead_end(void) {
    toy_model *m = NULL;
    toy_context *ctx = NULL;
    CHECK(!toy_model_load(TOY_SOURCE_DIR "/models/toy-kjv.gguf", &m));
    if (!m) return;
    const toy_vocab *v = toy_model_vocab(m);
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    CHECK(!toy_context_new(m, &cp, &ctx));
    const int32_t n = toy_vocab_n_tokens(v);
    toy_logit_bias *bans = calloc((size_t)n, sizeof *bans);
    size_t n_bans = 0;
    for (int32_t t = 0; t < n; t++)
        if (toy_vocab_is_eog(v, t)) bans[n_bans++] = (toy_logit_bias){t, -100.0f};
    CHECK(n_bans > 0);
    toy_grammar *g = compile(v, "root ::= \"a\"");
    for (int greedy = 0; greedy < 2 && ctx && g; greedy++) {
        toy_sampler_params sp = toy_sampler_default_params();
        sp.temperature = greedy ? 0.0f : 1.0f;
        sp.grammar = g;
        sp.logit_bias = bans;
        sp.n_logit_bias = n_bans;
        toy_sampler *s = NULL;
        CHECK(!toy_sampler_new(&sp, n, &s));
        toy_generate_params gp = toy_generate_default_params();
        gp.max_tokens = 10;
        gp.on_text = count_text;
        int32_t *prompt = NULL, n_prompt = 0;
        CHECK(!toy_tokenize_alloc(v, "In the beginning", 16, true, false, &prompt, &n_prompt));
        toy_kv_seq_rm(ctx, 0, 0, -1);
        shown = 0;
        CHECK_EQ(toy_generate(ctx, s, prompt, n_prompt, &gp, NULL), TOY_ERR_INVALID);
        CHECK_STR_CONTAINS(toy_last_error(), "generated token 2: every token the grammar allows here is banned");
        CHECK_EQ(shown, 1); /* "a" */
        toy_free(prompt);
        toy_sampler_free(s);
    }
    toy_grammar_free(g);
    free(bans);
    toy_context_free(ctx);
    toy_model_free(m);
}

int main(void) {
    test_languages();
    test_partial_characters();
    test_errors();
    test_masks();
    test_sampling();
    test_sampler_equals_masked_row();
    test_generate_dead_end();
    return test_failures ? 1 : 0;
}
