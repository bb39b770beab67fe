/* kv_cache.h — keys and values of past tokens, per layer, in cells.
 *
 * Each sequence owns a fixed range of cells_per_seq cells and fills it in order; a cell
 * remembers the position of the token it holds, and attention masks by position. So a
 * token's attention reads its own sequence's cells in the same order whether they were
 * written by a batched prefill or one token at a time.
 */
#ifndef TOY_KV_CACHE_H
#define TOY_KV_CACHE_H

#include <stdint.h>

#include "backend.h"
#include "toy.h"

typedef struct {
    int32_t n_layer;
    int32_t n_seq;
    int32_t cells_per_seq;
    int32_t n_head_kv, head_dim;
    int type_k, type_v;       /* F32, F16, BF16 or Q8_0 (rows of head_dim per head) */
    size_t head_bytes_k, head_bytes_v; /* bytes of one head's row */
    uint8_t *k;               /* [n_layer][n_seq][n_head_kv][cells_per_seq] rows */
    uint8_t *v;
    int32_t *pos;             /* [n_seq * cells_per_seq] */
    int32_t *n_used;          /* [n_seq] */
} ty_kv_cache;

toy_status ty_kv_cache_init(ty_kv_cache *c, int32_t n_layer, int32_t n_seq,
                            int32_t cells_per_seq, int32_t n_head_kv, int32_t head_dim,
                            int type_k, int type_v);
void ty_kv_cache_free(ty_kv_cache *c);

/* Picks the cell of every token of a batch (appending to its sequence's range) and
 * records its position. Fails, changing nothing, if a sequence would overflow. */
toy_status ty_kv_cache_place(ty_kv_cache *c, int32_t n_tokens, const int32_t *seq_id,
                             const int32_t *pos, int32_t *cells);

/* The K (V) row of one head of one cell and layer. Rows are laid out
 * [layer][seq][head][cell]: the cells of a sequence and head follow each other, so
 * attention over one head streams through contiguous memory. */
static inline size_t ty_kv_row_index(const ty_kv_cache *c, int32_t layer, int64_t cell, int32_t head) {
    const int64_t seq = cell / c->cells_per_seq, i = cell % c->cells_per_seq;
    return (((size_t)layer * (size_t)c->n_seq + (size_t)seq) * (size_t)c->n_head_kv + (size_t)head) *
               (size_t)c->cells_per_seq + (size_t)i;
}
static inline uint8_t *ty_kv_k(const ty_kv_cache *c, int32_t layer, int64_t cell, int32_t head) {
    return c->k + ty_kv_row_index(c, layer, cell, head) * c->head_bytes_k;
}
static inline uint8_t *ty_kv_v(const ty_kv_cache *c, int32_t layer, int64_t cell, int32_t head) {
    return c->v + ty_kv_row_index(c, layer, cell, head) * c->head_bytes_v;
}

/* Stores the float K and V rows (n_head_kv * head_dim each) of a token in a cell,
 * converted to the cache types. */
void ty_kv_cache_store(ty_kv_cache *c, int32_t layer, int64_t cell, const float *k,
                       const float *v);

ty_kv_view ty_kv_cache_view(const ty_kv_cache *c, int32_t layer);

/* Removes the cells of seq with positions in [p0, p1), keeping the others in order. */
void ty_kv_cache_seq_rm(ty_kv_cache *c, int32_t seq, int32_t p0, int32_t p1);

/* Replaces the cells of dst with positions in [p0, p1) by copies (rows byte for byte,
 * positions) of src's cells in that range, in src's order. They go before dst's first
 * remaining cell at a position >= p1 (at the end if none), so positions that rose in
 * both still rise. Fails, changing nothing, if dst would overflow; src != dst. */
toy_status ty_kv_cache_seq_cp(ty_kv_cache *c, int32_t src, int32_t dst, int32_t p0, int32_t p1);

#endif
