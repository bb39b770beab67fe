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
 */
#ifndef TOY_LORA_H
#define TOY_LORA_H

#include <stdint.h>

#include "model.h"

typedef struct {
    char name[96];          /* the base tensor */
    int64_t n_in, n_out;    /* the base matrix: n_out rows of n_in */
    int64_t rank;
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

/* Writes an adapter of n pairs (F32 tensors) for a base of architecture arch, atomically. */
toy_status ty_lora_write(const char *path, const char *arch, float alpha, const ty_lora_pair *pairs,
                         int n);

#endif
