/* test_kv_cache.c — the KV cache's layout and editing (kv_cache.c): rows land where
 * ty_kv_k/ty_kv_v say ([layer][seq][head][cell]), the cells of one sequence and head
 * are contiguous, sequences do not touch each other, and removing a range of positions
 * keeps the other cells' rows and positions in order, in every layer and head. Copying
 * a range between sequences (toy_kv_seq_cp) replaces the target's cells in that range,
 * and on the bundled model, for every cache type, the next token's logits after a copy
 * are the bits of a sequence that computed the prefix itself. toy_generate leaves the
 * prompt and every generated token in the cache when max_tokens ends it, all but the
 * last with feed_last false (the forward pass toy run saves). */
#include <stdint.h>

#include "toy.h"

#include "kv_cache.h"
#include "quant.h"
#include "test.h"

enum { LAYERS = 3, SEQS = 2, CELLS = 8, HEADS = 3, HD = 4 };

/* A value that names layer, sequence, position and head (exact in f32). */
static float tag(int layer, int seq, int pos, int head, int d) {
    return (float)(layer * 10000 + seq * 1000 + pos * 10 + head) + (float)d * 0.25f;
}

static void store_token(ty_kv_cache *c, int layer, int64_t cell, int seq, int pos) {
    float k[HEADS * HD], v[HEADS * HD];
    for (int h = 0; h < HEADS; h++)
        for (int d = 0; d < HD; d++) {
            k[h * HD + d] = tag(layer, seq, pos, h, d);
            v[h * HD + d] = -tag(layer, seq, pos, h, d);
        }
    ty_kv_cache_store(c, layer, cell, k, v);
}

/* Checks that sequence seq holds the positions want[0..n) in order, rows included. */
static void expect_cells(const ty_kv_cache *c, int seq, const int *want, int n) {
    CHECK_EQ(c->n_used[seq], n);
    for (int i = 0; i < n && i < c->n_used[seq]; i++) {
        const int64_t cell = (int64_t)seq * CELLS + i;
        CHECK_EQ(c->pos[cell], want[i]);
        for (int l = 0; l < LAYERS; l++)
            for (int h = 0; h < HEADS; h++) {
                const float *k = (const float *)ty_kv_k(c, l, cell, h);
                const float *v = (const float *)ty_kv_v(c, l, cell, h);
                for (int d = 0; d < HD; d++) {
                    CHECK_MSG(k[d] == tag(l, seq, want[i], h, d), "seq %d cell %d layer %d head %d: K %g",
                              seq, i, l, h, (double)k[d]);
                    CHECK_MSG(v[d] == -tag(l, seq, want[i], h, d), "seq %d cell %d layer %d head %d: V %g",
                              seq, i, l, h, (double)v[d]);
                }
            }
    }
}

/* Decodes n tokens of one sequence at positions from0 on; the last token's logits go to
 * out when it is not NULL. */
static bool decode_seq(toy_context *ctx, const int32_t *tok, int n, int32_t seq, int32_t from0, float *out,
                       int32_t n_vocab) {
    int32_t pos[64], seqs[64];
    int8_t want[64] = {0};
    for (int i = 0; i < n; i++) pos[i] = from0 + i, seqs[i] = seq;
    want[n - 1] = 1;
    const toy_batch b = {n, tok, pos, seqs, want};
    if (toy_decode(ctx, &b) != TOY_OK) return false;
    if (out) memcpy(out, toy_get_logits(ctx, n - 1), (size_t)n_vocab * sizeof *out);
    return true;
}

/* A prefix computed on sequence 0 and copied to sequence 1 (over cells of other tokens,
 * whole or after a head that sequence 1 computed itself) gives the next token the logits
 * sequence 2 gets from computing the prefix directly, bit for bit, in every cache type. */
static void check_copy_logits(toy_model *m) {
    const int types[] = {TOY_TYPE_F32, TOY_TYPE_F16, TOY_TYPE_BF16, TOY_TYPE_Q8_0};
    const int32_t n_vocab = toy_model_n_vocab(m);
    int32_t tok[24], junk[12];
    unsigned long long rng = 11;
    for (int i = 0; i < 24; i++) tok[i] = (int32_t)(test_rand_u64(&rng) % (uint64_t)n_vocab);
    for (int i = 0; i < 12; i++) junk[i] = (int32_t)(test_rand_u64(&rng) % (uint64_t)n_vocab);
    float *a = malloc((size_t)n_vocab * sizeof *a), *b = malloc((size_t)n_vocab * sizeof *b);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (int head = 0; head <= 8; head += 8) {
            toy_context_params p = toy_context_default_params();
            p.n_ctx = 32;
            p.n_batch = p.n_outputs = 32;
            p.n_seq_max = 3;
            p.n_threads = 2;
            p.cache_type_k = p.cache_type_v = types[t];
            toy_context *ctx = NULL;
            CHECK_MSG(toy_context_new(m, &p, &ctx) == TOY_OK, "%s", toy_last_error());
            if (!ctx) continue;
            /* sequence 1: its own head (positions 0..head), then other tokens up to 12 */
            bool ok = decode_seq(ctx, tok, 20, 0, 0, NULL, n_vocab) &&
                      (!head || decode_seq(ctx, tok, head, 1, 0, NULL, n_vocab)) &&
                      decode_seq(ctx, junk, 12 - head, 1, head, NULL, n_vocab);
            ok = ok && toy_kv_seq_cp(ctx, 0, 1, head, head ? 20 : -1) == TOY_OK;
            CHECK_EQ(toy_kv_seq_pos_max(ctx, 1), 19);
            ok = ok && decode_seq(ctx, tok + 20, 1, 1, 20, a, n_vocab);
            ok = ok && decode_seq(ctx, tok, 21, 2, 0, b, n_vocab);
            CHECK_MSG(ok, "%s: %s", toy_type_name(types[t]), toy_last_error());
            CHECK_MSG(ok && !memcmp(a, b, (size_t)n_vocab * sizeof *a),
                      "cache %s, head %d: the logits after a copy differ from computing the prefix",
                      toy_type_name(types[t]), head);
            toy_context_free(ctx);
        }
    free(a);
    free(b);
}

/* Bad sequence ids and ranges, and a copy that would overflow the target, are errors
 * that change nothing. */
static void check_copy_errors(toy_model *m) {
    toy_context_params p = toy_context_default_params();
    p.n_ctx = 16;
    p.n_batch = p.n_outputs = 16;
    p.n_seq_max = 2;
    toy_context *ctx = NULL;
    CHECK_MSG(toy_context_new(m, &p, &ctx) == TOY_OK, "%s", toy_last_error());
    if (!ctx) return;
    const int32_t n_vocab = toy_model_n_vocab(m);
    const int32_t tok[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    CHECK(decode_seq(ctx, tok, 10, 0, 0, NULL, n_vocab));
    CHECK(decode_seq(ctx, tok, 10, 1, 10, NULL, n_vocab)); /* positions 10..19 */
    CHECK_EQ(toy_kv_seq_cp(ctx, 0, 2, 0, -1), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "sequence id 2 out of range");
    CHECK_EQ(toy_kv_seq_cp(ctx, -1, 1, 0, -1), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "sequence id -1");
    CHECK_EQ(toy_kv_seq_cp(ctx, 0, 1, 5, 3), TOY_ERR_INVALID);
    CHECK_STR_CONTAINS(toy_last_error(), "[5, 3)");
    CHECK_EQ(toy_kv_seq_cp(ctx, 0, 1, 0, 10), TOY_ERR_INVALID); /* 10 kept + 10 copied > 16 */
    CHECK_STR_CONTAINS(toy_last_error(), "overflows");
    CHECK_EQ(toy_kv_seq_pos_max(ctx, 1), 19);
    CHECK_EQ(toy_kv_seq_cp(ctx, 0, 0, 0, -1), TOY_OK);
    CHECK_EQ(toy_kv_seq_pos_max(ctx, 0), 9);
    toy_context_free(ctx);
}

static void check_generate_feed_last(toy_model *m) {
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = 64;
    toy_context *ctx = NULL;
    toy_sampler *s = NULL;
    toy_sampler_params sp = toy_sampler_default_params();
    sp.temperature = 0.0f;
    CHECK_MSG(toy_context_new(m, &cp, &ctx) == TOY_OK && toy_sampler_new(&sp, toy_model_n_vocab(m), &s) == TOY_OK,
              "%s", toy_last_error());
    const int32_t prompt[3] = {1, 200, 300};
    for (int feed = 0; feed < 2 && ctx && s; feed++) {
        toy_kv_seq_rm(ctx, 0, 0, -1);
        toy_generate_params gp = toy_generate_default_params();
        CHECK(gp.feed_last); /* the default */
        gp.max_tokens = 4;
        gp.feed_last = feed;
        toy_generate_result r = {.size = sizeof r};
        CHECK_MSG(toy_generate(ctx, s, prompt, 3, &gp, &r) == TOY_OK, "%s", toy_last_error());
        CHECK_EQ(r.finish, TOY_FINISH_LENGTH); /* greedy after this prompt: no end-of-generation token */
        CHECK_EQ(r.n_generated, 4);
        CHECK_MSG(toy_kv_seq_pos_max(ctx, 0) + 1 == (feed ? 7 : 6), "feed_last %d: the cache holds %d tokens",
                  feed, toy_kv_seq_pos_max(ctx, 0) + 1);
    }
    toy_sampler_free(s);
    toy_context_free(ctx);
}

int main(void) {
    ty_kv_cache c;
    CHECK(ty_kv_cache_init(&c, LAYERS, SEQS, CELLS, HEADS, HD, TOY_TYPE_F32, TOY_TYPE_F32) == TOY_OK);

    /* the layout: one head's cells of one sequence are consecutive rows */
    CHECK(ty_kv_k(&c, 1, 3, 2) + HD * sizeof(float) == ty_kv_k(&c, 1, 4, 2));
    CHECK(ty_kv_k(&c, 0, CELLS, 0) == ty_kv_k(&c, 0, 0, HEADS - 1) + (size_t)CELLS * HD * sizeof(float));

    /* both sequences fill 6 cells, interleaved in one batch */
    int32_t seq_id[12], pos[12], cells[12];
    for (int i = 0; i < 12; i++) seq_id[i] = i % 2, pos[i] = i / 2;
    CHECK(ty_kv_cache_place(&c, 12, seq_id, pos, cells) == TOY_OK);
    for (int i = 0; i < 12; i++)
        for (int l = 0; l < LAYERS; l++) store_token(&c, l, cells[i], seq_id[i], pos[i]);
    const int all[6] = {0, 1, 2, 3, 4, 5};
    expect_cells(&c, 0, all, 6);
    expect_cells(&c, 1, all, 6);

    /* a middle range out of sequence 0: the rest move down, sequence 1 untouched */
    ty_kv_cache_seq_rm(&c, 0, 2, 4);
    const int kept[4] = {0, 1, 4, 5};
    expect_cells(&c, 0, kept, 4);
    expect_cells(&c, 1, all, 6);

    /* a full sequence fails to grow past its cells, changing nothing */
    int32_t more_seq[3] = {1, 1, 1}, more_pos[3] = {6, 7, 8}, more_cells[3];
    CHECK(ty_kv_cache_place(&c, 3, more_seq, more_pos, more_cells) != TOY_OK);
    expect_cells(&c, 1, all, 6);

    /* positions 2..4 of sequence 1 into sequence 0 (holding 0, 1, 4, 5): its 4 goes, the
     * copies come before 5 */
    CHECK(ty_kv_cache_seq_cp(&c, 1, 0, 2, 5) == TOY_OK);
    CHECK_EQ(c.n_used[0], 6);
    const int merged[6] = {0, 1, 2, 3, 4, 5};
    const int from_seq[6] = {0, 0, 1, 1, 1, 0};
    for (int i = 0; i < 6; i++) {
        CHECK_EQ(c.pos[i], merged[i]);
        const float *k = (const float *)ty_kv_k(&c, LAYERS - 1, i, HEADS - 1);
        const float *v = (const float *)ty_kv_v(&c, LAYERS - 1, i, HEADS - 1);
        CHECK_MSG(k[1] == tag(LAYERS - 1, from_seq[i], merged[i], HEADS - 1, 1) &&
                      v[1] == -tag(LAYERS - 1, from_seq[i], merged[i], HEADS - 1, 1),
                  "cell %d after the copy: K %g V %g", i, (double)k[1], (double)v[1]);
    }
    expect_cells(&c, 1, all, 6);

    ty_kv_cache_free(&c);

    char path[4096];
    snprintf(path, sizeof path, "%s/models/toy-kjv.gguf", TOY_SOURCE_DIR);
    toy_model *m = NULL;
    CHECK_MSG(toy_model_load(path, &m) == TOY_OK, "%s", toy_last_error());
    if (m) {
        check_copy_logits(m);
        check_copy_errors(m);
        check_generate_feed_last(m);
        toy_model_free(m);
    }
    return test_finish("test_kv_cache");
}
