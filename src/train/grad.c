/* grad.c — toy_grad: the loss of one sequence and the gradient of every tensor, as a
 * GGUF file. The stable interface gradients are checked through. */
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "error.h"
#include "checkpoint.h"
#include "params.h"
#include "train_model.h"

void toy_grad_params_init(toy_grad_params *params, size_t size) {
    const toy_grad_params defaults = {.size = sizeof defaults, .n_threads = 1};
    ty_params_init(params, size, &defaults, sizeof defaults);
}

static toy_status grad_of(const toy_model *m, const char *lora_path, const int32_t *tokens, int32_t n,
                          int n_threads, const char *out_path, double *loss_out) {
    toy_status st = toy_kernel_init();
    if (st) return st;
    const int32_t n_vocab = m->hp.n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return ty_error(TOY_ERR_INVALID, "token %d: id %d out of range (0..%d)", i, tokens[i],
                            n_vocab - 1);
    ty_pool *pool = ty_pool_new(n_threads > 0 ? n_threads : 1);
    train_model *tm = NULL;
    int32_t *targets = malloc((size_t)n * sizeof *targets);
    float *weights = malloc((size_t)n * sizeof *weights);
    if (!pool || !targets || !weights) st = ty_error(TOY_ERR_NOMEM, "no memory");
    train_lora_params lp;
    if (!st && lora_path) st = ty_checkpoint_adapter_params(m, lora_path, &lp);
    if (!st) st = lora_path ? ty_train_model_new_lora(m, n, pool, &lp, &tm) : ty_train_model_new(m, n, pool, &tm);
    /* the adapter's values in place of the fresh ones, zeros where it has no pair */
    if (!st && lora_path) st = ty_checkpoint_read_adapter(lora_path, tm, NULL, NULL, true, NULL);
    if (!st) st = ty_train_model_reserve(tm, 1, n);
    double loss = 0;
    if (!st) {
        for (int32_t i = 0; i < n; i++) {
            targets[i] = i + 1 < n ? tokens[i + 1] : -1;
            weights[i] = 1.0f / (float)(n - 1);
        }
        train_batch b = {1, n, 0, tokens, targets, weights};
        loss = ty_train_model_step(tm, &b, true);
    }
    toy_gguf_writer *w = st ? NULL : toy_gguf_writer_new();
    if (!st && !w) st = ty_error(TOY_ERR_NOMEM, "no memory");
    if (!st) st = toy_gguf_writer_set_f32(w, "toy.loss", (float)loss);
    if (!st) st = toy_gguf_writer_set_u32(w, "toy.n_tokens", (uint32_t)n);
    for (int i = 0; !st && i < ty_train_model_n_tensors(tm); i++) {
        const train_tensor *t = ty_train_model_tensor(tm, i);
        if (lora_path && !t->lora) continue; /* the frozen base has no gradient */
        st = toy_gguf_writer_add_tensor(w, t->name, TOY_TYPE_F32, t->n_dims, t->ne,
                                        ty_train_model_grads(tm) + t->offset);
    }
    if (!st) st = toy_gguf_writer_write(w, out_path);
    if (!st && loss_out) *loss_out = loss;
    toy_gguf_writer_free(w);
    ty_train_model_free(tm);
    ty_pool_free(pool);
    free(targets);
    free(weights);
    return st;
}

toy_status toy_grad(const toy_grad_params *caller_params, const int32_t *tokens, int32_t n,
                    const char *out_path, double *loss_out) {
    toy_grad_params p = toy_grad_default_params();
    if (!caller_params) return ty_error(TOY_ERR_INVALID, "toy_grad: params is NULL");
    if (ty_params_read(&p, sizeof p, caller_params, "toy_grad_params")) return TOY_ERR_INVALID;
    if (!p.model && !p.model_path) return ty_error(TOY_ERR_INVALID, "toy_grad: neither model nor model_path");
    if (!tokens || !out_path) return ty_error(TOY_ERR_INVALID, "toy_grad: tokens or out_path is NULL");
    if (n < 2) return ty_error(TOY_ERR_INVALID, "the gradient needs at least 2 tokens, got %d", n);
    if (p.model) return grad_of(p.model, p.lora_path, tokens, n, p.n_threads, out_path, loss_out);
    toy_model *m;
    toy_status st = toy_model_load(p.model_path, &m);
    if (st) return st;
    st = grad_of(m, p.lora_path, tokens, n, p.n_threads, out_path, loss_out);
    toy_model_free(m);
    return st;
}
