/* quantize.h — the parts of file quantization that toy init reuses: the per-tensor type
 * plan of a mix and the conversion of rows to a weight type. */
#ifndef TOY_QUANTIZE_H
#define TOY_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "toy.h"

/* What the mix rules need to know of a model. */
typedef struct {
    char arch[64];
    int n_layer;
    int n_head;
    int n_head_kv;
    int n_expert;
} ty_quant_shape;

void ty_quant_shape_from_gguf(const toy_gguf *g, ty_quant_shape *shape);

/* llama-quantize's choices for `n` tensors (their name, n_dims, ne and type are read):
 * order[k] is the index of the k-th tensor in llama.cpp's write order, types[k] its type
 * under ftype (tensors that are not quantized keep their type). */
toy_status ty_quantize_plan(const ty_quant_shape *shape, const toy_gguf_tensor *tensors,
                            int64_t n, int ftype, bool pure, int64_t *order, int *types);

/* Produces row `row` (n_cols floats) of a tensor being written. Called from several
 * threads at once, for different rows. */
typedef void (*ty_row_source)(void *user, int64_t row, float *out);

/* n_rows rows from `source`, converted to type_out with n_threads threads (the result
 * does not depend on them); *out is malloc'd. */
toy_status ty_quantize_rows(const char *name, int64_t n_cols, int64_t n_rows,
                            ty_row_source source, void *user, int type_out, int n_threads,
                            uint8_t **out, size_t *out_size);

#endif
