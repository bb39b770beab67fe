/* grad.c — toy_grad: the loss of one sequence and the gradient of every tensor, as a
 * GGUF file. The stable interface gradients are checked through. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "train_model.h"

toy_status toy_grad(const char *model_path, const int32_t *tokens, int32_t n, int n_threads,
                    const char *out_path, double *loss_out) {
    if (n < 2) return toy_error(TOY_ERR_INVALID, "the gradient needs at least 2 tokens, got %d", n);
    toy_model *m;
    toy_status st = toy_model_load(model_path, &m);
    if (st) return st;
    const int32_t n_vocab = m->hp.n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            toy_model_free(m);
            return toy_error(TOY_ERR_INVALID, "token %d: id %d out of range (0..%d)", i, tokens[i],
                             n_vocab - 1);
        }
    toy_pool *pool = toy_pool_new(n_threads > 0 ? n_threads : 1);
    train_model *tm = NULL;
    int32_t *targets = malloc((size_t)n * sizeof *targets);
    float *weights = malloc((size_t)n * sizeof *weights);
    if (!pool || !targets || !weights) st = toy_error(TOY_ERR_NOMEM, "no memory");
    if (!st) st = train_model_new(m, n, pool, &tm);
    if (!st) st = train_model_reserve(tm, 1, n);
    double loss = 0;
    if (!st) {
        for (int32_t i = 0; i < n; i++) {
            targets[i] = i + 1 < n ? tokens[i + 1] : -1;
            weights[i] = 1.0f / (float)(n - 1);
        }
        train_batch b = {1, n, 0, tokens, targets, weights};
        loss = train_model_step(tm, &b, true);
    }
    toy_gguf_writer *w = st ? NULL : toy_gguf_writer_new();
    if (!st && !w) st = toy_error(TOY_ERR_NOMEM, "no memory");
    if (!st) st = toy_gguf_writer_set_f32(w, "toy.loss", (float)loss);
    if (!st) st = toy_gguf_writer_set_u32(w, "toy.n_tokens", (uint32_t)n);
    for (int i = 0; !st && i < train_model_n_tensors(tm); i++) {
        const train_tensor *t = train_model_tensor(tm, i);
        st = toy_gguf_writer_add_tensor(w, t->name, TOY_TYPE_F32, t->n_dims, t->ne,
                                        train_model_grads(tm) + t->offset);
    }
    if (!st) st = toy_gguf_writer_write(w, out_path);
    if (!st && loss_out) *loss_out = loss;
    toy_gguf_writer_free(w);
    train_model_free(tm);
    toy_pool_free(pool);
    free(targets);
    free(weights);
    toy_model_free(m);
    return st;
}
