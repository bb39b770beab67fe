/* test_kv_cache.c — the KV cache's layout and editing (kv_cache.c): rows land where
 * toy_kv_k/toy_kv_v say ([layer][seq][head][cell]), the cells of one sequence and head
 * are contiguous, sequences do not touch each other, and removing a range of positions
 * keeps the other cells' rows and positions in order, in every layer and head. */
#include <stdint.h>

#include "kv_cache.h"
#include "quant.h"
#include "test.h"

enum { LAYERS = 3, SEQS = 2, CELLS = 8, HEADS = 3, HD = 4 };

/* A value that names layer, sequence, position and head (exact in f32). */
static float tag(int layer, int seq, int pos, int head, int d) {
    return (float)(layer * 10000 + seq * 1000 + pos * 10 + head) + (float)d * 0.25f;
}

static void store_token(toy_kv_cache *c, int layer, int64_t cell, int seq, int pos) {
    float k[HEADS * HD], v[HEADS * HD];
    for (int h = 0; h < HEADS; h++)
        for (int d = 0; d < HD; d++) {
            k[h * HD + d] = tag(layer, seq, pos, h, d);
            v[h * HD + d] = -tag(layer, seq, pos, h, d);
        }
    toy_kv_cache_store(c, layer, cell, k, v);
}

/* Checks that sequence seq holds the positions want[0..n) in order, rows included. */
static void expect_cells(const toy_kv_cache *c, int seq, const int *want, int n) {
    CHECK_EQ(c->n_used[seq], n);
    for (int i = 0; i < n && i < c->n_used[seq]; i++) {
        const int64_t cell = (int64_t)seq * CELLS + i;
        CHECK_EQ(c->pos[cell], want[i]);
        for (int l = 0; l < LAYERS; l++)
            for (int h = 0; h < HEADS; h++) {
                const float *k = (const float *)toy_kv_k(c, l, cell, h);
                const float *v = (const float *)toy_kv_v(c, l, cell, h);
                for (int d = 0; d < HD; d++) {
                    CHECK_MSG(k[d] == tag(l, seq, want[i], h, d), "seq %d cell %d layer %d head %d: K %g",
                              seq, i, l, h, (double)k[d]);
                    CHECK_MSG(v[d] == -tag(l, seq, want[i], h, d), "seq %d cell %d layer %d head %d: V %g",
                              seq, i, l, h, (double)v[d]);
                }
            }
    }
}

int main(void) {
    toy_kv_cache c;
    CHECK(toy_kv_cache_init(&c, LAYERS, SEQS, CELLS, HEADS, HD, TOY_TYPE_F32, TOY_TYPE_F32) == TOY_OK);

    /* the layout: one head's cells of one sequence are consecutive rows */
    CHECK(toy_kv_k(&c, 1, 3, 2) + HD * sizeof(float) == toy_kv_k(&c, 1, 4, 2));
    CHECK(toy_kv_k(&c, 0, CELLS, 0) == toy_kv_k(&c, 0, 0, HEADS - 1) + (size_t)CELLS * HD * sizeof(float));

    /* both sequences fill 6 cells, interleaved in one batch */
    int32_t seq_id[12], pos[12], cells[12];
    for (int i = 0; i < 12; i++) seq_id[i] = i % 2, pos[i] = i / 2;
    CHECK(toy_kv_cache_place(&c, 12, seq_id, pos, cells) == TOY_OK);
    for (int i = 0; i < 12; i++)
        for (int l = 0; l < LAYERS; l++) store_token(&c, l, cells[i], seq_id[i], pos[i]);
    const int all[6] = {0, 1, 2, 3, 4, 5};
    expect_cells(&c, 0, all, 6);
    expect_cells(&c, 1, all, 6);

    /* a middle range out of sequence 0: the rest move down, sequence 1 untouched */
    toy_kv_cache_seq_rm(&c, 0, 2, 4);
    const int kept[4] = {0, 1, 4, 5};
    expect_cells(&c, 0, kept, 4);
    expect_cells(&c, 1, all, 6);

    /* a full sequence fails to grow past its cells, changing nothing */
    int32_t more_seq[3] = {1, 1, 1}, more_pos[3] = {6, 7, 8}, more_cells[3];
    CHECK(toy_kv_cache_place(&c, 3, more_seq, more_pos, more_cells) != TOY_OK);
    expect_cells(&c, 1, all, 6);

    toy_kv_cache_free(&c);
    return test_finish("test_kv_cache");
}
