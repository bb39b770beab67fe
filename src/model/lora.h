/* lora.h — LoRA adapters in llama.cpp's GGUF format, read and written.
 *
 * An adapter file has general.type = "adapter", general.architecture = the base's,
 * adapter.type = "lora" and adapter.lora.alpha, and for each adapted matrix W of the base
 * (named after it, "blk.3.attn_q.weight") two tensors:
 *     W.lora_a   ne = [n_in, rank]    rank rows of n_in: A
 *     W.lora_b   ne = [rank, n_out]   n_out rows of rank: B
 * and the adapted product is y = W x + s * B (A x), with s = scale * alpha / rank (scale
 * given by the user, 1 by default; s = scale when alpha is 0, as llama.cpp does). The
 * token embedding is the exception llama.cpp makes: its lora_a is [rank, n_vocab] and
 * lora_b [rank, n_embd], and row t of the embedding gains s * B a_t (a_t row t of A).
 * Tensors may be of any type toy reads; they are held as F32.
 *
 * toy's design writes its LoRA-Q adapters another way: one rank-r pair per query head,
 * "blk.N.attn_q.head_H.lora_a.weight" (ne [n_embd, r]) and "...lora_b.weight" (ne
 * [r, head_dim]), each with its AdamW moments beside it ("...weight.m", "...weight.v", or
 * "...lora_a.m"), the scale alpha / r, and no general.type required (a checkpoint may
 * carry its base's tensors too, which the adapter ignores). Such a layer is held as one
 * pair of rank n_head r whose B is block-diagonal (n_groups = n_head): B_H fills rows
 * H head_dim.. and columns H r.. , zeros elsewhere.
 */
#ifndef TOY_LORA_H
#define TOY_LORA_H

#include <stdint.h>

#include "model.h"

typedef struct {
    char name[96];          /* the base tensor */
    int64_t n_in, n_out;    /* the base matrix: n_out rows of n_in */
    int64_t rank;
    int64_t n_groups;       /* 1; a per-head pair: n_head, each of rank rank / n_groups */
    bool per_head;          /* the design's per-head pairs (n_groups may be 1: one head) */
    float *a;               /* [rank][n_in]; token_embd: [n_vocab][rank] */
    float *b;               /* [n_out][rank]; token_embd: [n_embd][rank] */
} ty_lora_pair;

struct toy_lora {
    char *path;
    float alpha;
    int n_pairs;
    ty_lora_pair *pairs;
};

/* The pair adapting the base tensor `name`, or NULL. */
const ty_lora_pair *ty_lora_find(const toy_lora *lora, const char *name);

/* s of a pair at a user scale. */
float ty_lora_pair_scale(const toy_lora *lora, const ty_lora_pair *p, float scale);

/* The per-head pair tensor "blk.N.attn_q.head_H.lora_a.weight" (or lora_b): its layer,
 * head and 'a' or 'b'; false for any other name. */
bool ty_lora_per_head_name(const char *name, int *layer, int *head, char *ab);

/* A writer holding an adapter's metadata (general.type, general.architecture,
 * adapter.type, adapter.lora.alpha), for its tensors to be added; free it even on error. */
toy_status ty_lora_writer_new(const char *arch, size_t arch_len, float alpha, toy_gguf_writer **out);

/* Writes an adapter of n pairs (F32 tensors) for a base of architecture arch, atomically. */
toy_status ty_lora_write(const char *path, const char *arch, float alpha, const ty_lora_pair *pairs,
                         int n);

#endif
