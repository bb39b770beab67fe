/* backend_cpu.h — the CPU backend's state, shared by its two files: backend_cpu.c (the
 * table, matmuls, norms, element-wise operations) and attention_cpu.c (attention). */
#ifndef TOY_BACKEND_CPU_H
#define TOY_BACKEND_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cpu.h"
#include "threadpool.h"

typedef struct {
    ty_backend base;
    ty_pool *pool;
    uint8_t *act;        /* quantized activation rows */
    uint8_t *tiled;      /* the same laid out for AMX tile loads (packed.h, tile_act) */
    size_t tiled_size;
    float *attn_ws;      /* per thread: accumulators of one query group (attention_task) */
    size_t attn_ws_per_thread;
    float *attn_slots;   /* decode: the state of each (token, segment) of a split job */
    size_t attn_n_slots, attn_slot_cap; /* how many, floats each */
    int32_t *attn_runs;  /* prefill: (first token, tokens) of each block of a sequence */
    int32_t *attn_tok;   /* the tokens attended one by one */
    float *attn_kv;      /* prefill: a sequence's K transposed by chunks, its V as floats */
    size_t attn_kv_cap;  /* floats; grown on the first prefill that needs more */
    const ty_cpu_ops *cpu; /* this CPU's operations (cpu.h) */
} cpu_backend;

/* Attention's scratch for batches of up to n_tok tokens; freed by ty_cpu_attention_free. */
toy_status ty_cpu_attention_reserve(cpu_backend *c, int64_t n_tok, int64_t n_head, int64_t head_dim);
void ty_cpu_attention_free(cpu_backend *c);
/* The backend's attention (backend.h) */
void ty_cpu_attention(ty_backend *be, float *out, const float *q, int64_t n_tok, const int32_t *pos,
                      const int32_t *seq_id, const ty_kv_view *kv, const ty_attn_params *p);
/* The plain path's three steps (backend.h) */
void ty_cpu_attn_scores(ty_backend *be, float *kq, const float *q, int64_t n_tok, const int32_t *pos,
                        const int32_t *seq_id, const ty_kv_view *kv, const ty_attn_params *p, int32_t n_kv);
void ty_cpu_softmax_rows(ty_backend *be, float *x, int64_t n_rows, int64_t n);
void ty_cpu_attn_mix(ty_backend *be, float *out, const float *kq, int64_t n_tok, const int32_t *seq_id,
                     const ty_kv_view *kv, const ty_attn_params *p, int32_t n_kv);

#endif
