/* checkpoint.c — model files and resumable state (checkpoint.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "lora.h"
#include "error.h"
#include "quantize.h"

/* ---------------------------------------------------------------- history */

static toy_status grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return TOY_OK;
    int64_t c = *cap ? 2 * *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return ty_error(TOY_ERR_NOMEM, "no memory for the loss history");
    *p = q;
    return TOY_OK;
}

toy_status ty_history_add(train_history *h, float loss, float lr, float grad_norm) {
    int64_t cap = h->cap;
    toy_status st = grow((void **)&h->loss, &cap, h->n + 1, sizeof *h->loss);
    if (!st) {
        cap = h->cap;
        st = grow((void **)&h->lr, &cap, h->n + 1, sizeof *h->lr);
    }
    if (!st) {
        cap = h->cap;
        st = grow((void **)&h->grad_norm, &cap, h->n + 1, sizeof *h->grad_norm);
    }
    if (st) return st;
    h->cap = cap;
    h->loss[h->n] = loss;
    h->lr[h->n] = lr;
    h->grad_norm[h->n] = grad_norm;
    h->n++;
    return TOY_OK;
}

toy_status ty_history_add_eval(train_history *h, int64_t step, float loss) {
    int64_t cap = h->cap_eval;
    toy_status st = grow((void **)&h->eval_step, &cap, h->n_eval + 1, sizeof *h->eval_step);
    if (!st) {
        cap = h->cap_eval;
        st = grow((void **)&h->eval_loss, &cap, h->n_eval + 1, sizeof *h->eval_loss);
    }
    if (st) return st;
    h->cap_eval = cap;
    h->eval_step[h->n_eval] = step;
    h->eval_loss[h->n_eval++] = loss;
    return TOY_OK;
}

void ty_history_free(train_history *h) {
    free(h->loss);
    free(h->lr);
    free(h->grad_norm);
    free(h->eval_step);
    free(h->eval_loss);
    memset(h, 0, sizeof *h);
}

/* ---------------------------------------------------------------- the model */

typedef struct {
    const float *data;
    int64_t n_cols;
} param_rows;

static void param_row(void *user, int64_t r, float *out) {
    const param_rows *p = user;
    memcpy(out, p->data + r * p->n_cols, (size_t)p->n_cols * sizeof *out);
}

toy_status ty_checkpoint_write_model(train_model *tm, const toy_gguf *source, int ftype, int n_threads,
                                  const char *path) {
    const int n = ty_train_model_n_tensors(tm);
    toy_gguf_tensor *infos = calloc((size_t)n, sizeof *infos);
    int64_t *order = calloc((size_t)n, sizeof *order);
    int *types = calloc((size_t)n, sizeof *types);
    toy_gguf_writer *w = toy_gguf_writer_new();
    toy_status st = infos && order && types && w ? TOY_OK : ty_error(TOY_ERR_NOMEM, "no memory");
    for (int i = 0; !st && i < n; i++) {
        const train_tensor *t = ty_train_model_tensor(tm, i);
        infos[i] = (toy_gguf_tensor){.name = t->name, .type = TOY_TYPE_F32, .n_dims = t->n_dims};
        memcpy(infos[i].ne, t->ne, sizeof t->ne);
    }
    ty_quant_shape shape;
    ty_quant_shape_from_gguf(source, &shape);
    if (!st) st = ty_quantize_plan(&shape, infos, n, ftype, false, order, types);
    for (int64_t i = 0; !st && i < toy_gguf_n_kv(source); i++) {
        const char *key = toy_gguf_key(source, i);
        if (strcmp(key, "general.quantization_version") && strcmp(key, "general.file_type"))
            st = toy_gguf_writer_set_value(w, key, toy_gguf_kv(source, i));
    }
    if (!st) st = toy_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!st) st = toy_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    for (int k = 0; !st && k < n; k++) {
        const toy_gguf_tensor *t = &infos[order[k]];
        st = toy_gguf_writer_add_tensor(w, t->name, types[k], t->n_dims ? t->n_dims : 1, t->ne, NULL);
    }
    if (!st) st = toy_gguf_writer_begin(w, path);
    for (int k = 0; !st && k < n; k++) {
        const train_tensor *t = ty_train_model_tensor(tm, (int)order[k]);
        param_rows src = {ty_train_model_params(tm) + t->offset, t->ne[0]};
        uint8_t *buf = NULL;
        size_t size = 0;
        st = ty_quantize_rows(t->name, t->ne[0], t->n / t->ne[0], param_row, &src, types[k], n_threads,
                              &buf, &size);
        if (!st) st = toy_gguf_writer_write_tensor_data(w, buf, size);
        free(buf);
    }
    if (!st) st = toy_gguf_writer_finish(w);
    toy_gguf_writer_free(w);
    free(infos);
    free(order);
    free(types);
    return st;
}

/* A LoRA run's adapter: every adapter tensor under its own name (llama.cpp's
 * "W.lora_a", or the design's per-head "blk.N.attn_q.head_H.lora_a.weight", which keeps
 * its AdamW moments beside it, "...weight.m" and "...weight.v", and the step they are at). */
toy_status ty_checkpoint_write_adapter(train_model *tm, const toy_gguf *source, const float *m, const float *v,
                                       int64_t adam_step, const char *path) {
    const train_lora_params *lp = ty_train_model_lora(tm);
    const char *arch;
    size_t len;
    toy_gguf_writer *w = NULL;
    toy_status st = toy_gguf_get_str(source, "general.architecture", &arch, &len);
    if (!st) st = ty_lora_writer_new(arch, len, lp->alpha, &w);
    const bool moments = lp->per_head && m && v;
    if (!st && moments) st = toy_gguf_writer_set_u64(w, "toy.lora.adam_step", (uint64_t)adam_step);
    const float *params = ty_train_model_params(tm);
    for (int i = 0; !st && i < ty_train_model_n_tensors(tm); i++) {
        const train_tensor *t = ty_train_model_tensor(tm, i);
        if (!t->lora) continue;
        st = toy_gguf_writer_add_tensor(w, t->name, TOY_TYPE_F32, 2, t->ne, params + t->offset);
        char name[128];
        for (int k = 0; !st && moments && k < 2; k++) {
            snprintf(name, sizeof name, "%s.%c", t->name, k ? 'v' : 'm');
            st = toy_gguf_writer_add_tensor(w, name, TOY_TYPE_F32, 2, t->ne, (k ? v : m) + t->offset);
        }
    }
    if (!st) st = toy_gguf_writer_write(w, path);
    toy_gguf_writer_free(w);
    return st;
}

toy_status ty_checkpoint_adapter_params(const toy_model *m, const char *path, train_lora_params *lp) {
    toy_lora *l;
    toy_status st = toy_lora_load(m, path, &l);
    if (st) return st;
    *lp = (train_lora_params){.alpha = l->alpha};
    for (int i = 0; !st && i < l->n_pairs; i++) {
        const ty_lora_pair *p = &l->pairs[i];
        int il = -1, len = 0;
        char kind[32];
        uint32_t bits = 0;
        if (sscanf(p->name, "blk.%d.%31[a-z_].weight%n", &il, kind, &len) == 2 && !p->name[len])
            for (int k = 0; k < MAT_KINDS; k++)
                if (!strcmp(kind, ty_layer_mat_home(&m->hp, k).tensor)) bits |= 1u << k;
        const int64_t rank = p->rank / p->n_groups;
        if (!bits || il < 0 || il >= m->hp.n_layer)
            st = ty_error(TOY_ERR_UNSUPPORTED, "%s: toy trains no adapter on %s", path, p->name);
        else if ((lp->rank && rank != lp->rank) || (i && lp->per_head != p->per_head))
            st = ty_error(TOY_ERR_UNSUPPORTED, "%s: pairs of ranks %d and %lld%s: toy trains one kind at a time", path,
                          lp->rank, (long long)rank, i && lp->per_head != p->per_head ? ", per head and not" : "");
        lp->rank = (int32_t)rank;
        lp->per_head = p->per_head;
        lp->targets |= bits;
    }
    toy_lora_free(l);
    if (lp->alpha == 0) lp->alpha = (float)lp->rank; /* llama.cpp: scale 1 */
    return st;
}

toy_status ty_checkpoint_read_adapter(const char *path, train_model *tm, float *m, float *v, bool zero_missing,
                                      int64_t *adam_step) {
    toy_gguf *g;
    toy_status st = toy_gguf_open(path, &g);
    if (st) return st;
    float *params = ty_train_model_params(tm);
    bool any_moment = false;
    for (int i = 0; !st && i < ty_train_model_n_tensors(tm); i++) {
        const train_tensor *t = ty_train_model_tensor(tm, i);
        if (!t->lora) continue;
        const toy_gguf_tensor *x = toy_gguf_find_tensor(g, t->name);
        if (!x) { /* a target the adapter has in other layers only: nothing there */
            if (zero_missing) memset(params + t->offset, 0, (size_t)t->n * sizeof *params);
            continue;
        }
        if (x->ne[0] != t->ne[0] || toy_tensor_nelements(x) != t->n) {
            st = ty_error(TOY_ERR_FORMAT, "%s: tensor %s is [%lld, %lld], training's is [%lld, %lld]", path, t->name,
                          (long long)x->ne[0], (long long)x->ne[1], (long long)t->ne[0], (long long)t->ne[1]);
            break;
        }
        if ((st = toy_dequantize(x->type, x->data, params + t->offset, t->n))) {
            ty_error_wrap(st, "%s: tensor %s", path, t->name);
            break;
        }
        /* the design's moments: "X.weight.m" or "X.m", both or neither */
        const toy_gguf_tensor *mt[2] = {NULL, NULL};
        char name[2][160];
        const size_t len = strlen(t->name), w = strlen(".weight");
        const size_t stem = len > w && !strcmp(t->name + len - w, ".weight") ? len - w : len;
        for (int k = 0; m && v && k < 2; k++) {
            snprintf(name[k], sizeof name[k], "%s.%c", t->name, k ? 'v' : 'm');
            if (!(mt[k] = toy_gguf_find_tensor(g, name[k]))) {
                snprintf(name[k], sizeof name[k], "%.*s.%c", (int)stem, t->name, k ? 'v' : 'm');
                mt[k] = toy_gguf_find_tensor(g, name[k]);
            }
        }
        if (!mt[0] && !mt[1]) continue;
        for (int k = 0; !st && k < 2; k++)
            if (!mt[k])
                st = ty_error(TOY_ERR_FORMAT, "%s: tensor %s has the moment %s and no .%c beside it", path, t->name,
                              name[!k], k ? 'v' : 'm');
            else if (mt[k]->type != TOY_TYPE_F32 || toy_tensor_nelements(mt[k]) != t->n || mt[k]->ne[0] != t->ne[0])
                st = ty_error(TOY_ERR_FORMAT, "%s: moment %s is not an F32 tensor shaped like %s", path, name[k],
                              t->name);
            else memcpy((k ? v : m) + t->offset, mt[k]->data, (size_t)t->n * sizeof *m);
        any_moment = true;
    }
    uint64_t step = 0;
    if (!st && adam_step) *adam_step = any_moment && !toy_gguf_get_u64(g, "toy.lora.adam_step", &step) &&
                                               step <= INT64_MAX / 2 ? (int64_t)step : 0;
    toy_gguf_close(g);
    return st;
}

/* ---------------------------------------------------------------- the state */

#define STATE_VERSION 1

static toy_status add_f32(toy_gguf_writer *w, const char *prefix, const train_tensor *t, const float *data) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s", prefix, t->name);
    return toy_gguf_writer_add_tensor(w, name, TOY_TYPE_F32, t->n_dims ? t->n_dims : 1, t->ne, data);
}

toy_status ty_checkpoint_write_state(const char *path, train_model *tm, const float *m, const float *v,
                                  bool master, const train_state *s, const train_history *h) {
    toy_gguf_writer *w = toy_gguf_writer_new();
    if (!w) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_status st = toy_gguf_writer_set_str(w, "general.type", "toy-train-state", 15);
#define U64(key, val) \
    if (!st) st = toy_gguf_writer_set_u64(w, "toy.train." key, (uint64_t)(val))
    U64("version", STATE_VERSION);
    U64("step", s->step);
    U64("epoch", s->epoch);
    U64("position", s->position);
    U64("seed", s->seed);
    U64("batch", s->batch);
    U64("seq", s->seq);
    U64("grad_accum", s->grad_accum);
    U64("n_windows", s->n_windows);
    U64("tokens", s->tokens);
    U64("adam_step0", s->adam_step0);
#undef U64
    if (!st) st = toy_gguf_writer_set_f64(w, "toy.train.seconds", s->seconds);
    if (!st) st = toy_gguf_writer_set_array(w, "toy.train.history.loss", TOY_GGUF_FLOAT32, h->loss, (uint64_t)h->n);
    if (!st) st = toy_gguf_writer_set_array(w, "toy.train.history.lr", TOY_GGUF_FLOAT32, h->lr, (uint64_t)h->n);
    if (!st)
        st = toy_gguf_writer_set_array(w, "toy.train.history.grad_norm", TOY_GGUF_FLOAT32, h->grad_norm,
                                       (uint64_t)h->n);
    if (!st)
        st = toy_gguf_writer_set_array(w, "toy.train.history.eval_step", TOY_GGUF_INT64, h->eval_step,
                                       (uint64_t)h->n_eval);
    if (!st)
        st = toy_gguf_writer_set_array(w, "toy.train.history.eval_loss", TOY_GGUF_FLOAT32, h->eval_loss,
                                       (uint64_t)h->n_eval);
    const float *params = ty_train_model_params(tm);
    for (int i = 0; !st && i < ty_train_model_n_tensors(tm); i++) {
        const train_tensor *t = ty_train_model_tensor(tm, i);
        if (t->trainable) st = add_f32(w, "adam_m", t, m + t->offset);
        if (!st && t->trainable) st = add_f32(w, "adam_v", t, v + t->offset);
        if (!st && master) st = add_f32(w, "master", t, params + t->offset);
    }
    if (!st) st = toy_gguf_writer_write(w, path);
    toy_gguf_writer_free(w);
    return st;
}

static toy_status read_u64(const toy_gguf *g, const char *key, int64_t *out) {
    uint64_t v;
    char full[96];
    snprintf(full, sizeof full, "toy.train.%s", key);
    toy_status st = toy_gguf_get_u64(g, full, &v);
    if (st || v > INT64_MAX)
        return ty_error(TOY_ERR_FORMAT, "%s: key %s is missing or out of range", toy_gguf_path(g), full);
    *out = (int64_t)v;
    return TOY_OK;
}

/* an F32 tensor of the state shaped like t, copied to dst */
static toy_status read_tensor(const toy_gguf *g, const char *prefix, const train_tensor *t, float *dst,
                              bool required) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s", prefix, t->name);
    const toy_gguf_tensor *x = toy_gguf_find_tensor(g, name);
    if (!x) return required ? ty_error(TOY_ERR_FORMAT, "%s: tensor %s is missing", toy_gguf_path(g), name)
                            : TOY_OK;
    if (x->type != TOY_TYPE_F32 || toy_tensor_nelements(x) != t->n || x->ne[0] != t->ne[0])
        return ty_error(TOY_ERR_FORMAT, "%s: tensor %s does not match the model's %s", toy_gguf_path(g), name,
                        t->name);
    memcpy(dst, x->data, (size_t)t->n * sizeof *dst);
    return TOY_OK;
}

static toy_status read_array(const toy_gguf *g, const char *key, toy_gguf_type type, void **out, int64_t *n) {
    const toy_gguf_value *v = toy_gguf_get(g, key);
    if (!v || toy_gguf_value_type(v) != TOY_GGUF_ARRAY || toy_gguf_array_type(v) != type)
        return ty_error(TOY_ERR_FORMAT, "%s: key %s is missing or has the wrong type", toy_gguf_path(g), key);
    const uint64_t len = toy_gguf_array_len(v);
    const size_t elem = type == TOY_GGUF_INT64 ? 8 : 4;
    *out = malloc((size_t)(len ? len : 1) * elem);
    if (!*out) return ty_error(TOY_ERR_NOMEM, "no memory");
    memcpy(*out, toy_gguf_array_data(v), (size_t)len * elem);
    *n = (int64_t)len;
    return TOY_OK;
}

toy_status ty_checkpoint_read_state(const char *path, train_model *tm, float *m, float *v, train_state *s,
                                 train_history *h) {
    toy_gguf *g;
    toy_status st = toy_gguf_open(path, &g);
    if (st) return st;
    int64_t version = 0, x;
    if ((st = read_u64(g, "version", &version))) goto done;
    if (version != STATE_VERSION) {
        st = ty_error(TOY_ERR_UNSUPPORTED, "%s: training state version %lld (toy reads %d)", path,
                      (long long)version, STATE_VERSION);
        goto done;
    }
    memset(s, 0, sizeof *s);
    if ((st = read_u64(g, "step", &s->step)) || (st = read_u64(g, "epoch", &s->epoch)) ||
        (st = read_u64(g, "position", &s->position)) || (st = read_u64(g, "seed", &x)))
        goto done;
    s->seed = (uint64_t)x;
    if ((st = read_u64(g, "batch", &x))) goto done;
    s->batch = (int32_t)x;
    if ((st = read_u64(g, "seq", &x))) goto done;
    s->seq = (int32_t)x;
    if ((st = read_u64(g, "grad_accum", &x))) goto done;
    s->grad_accum = (int32_t)x;
    if ((st = read_u64(g, "n_windows", &s->n_windows)) || (st = read_u64(g, "tokens", &s->tokens))) goto done;
    if (toy_gguf_get(g, "toy.train.adam_step0") && (st = read_u64(g, "adam_step0", &s->adam_step0))) goto done;
    double sec = 0;
    if (!toy_gguf_get_f64(g, "toy.train.seconds", &sec)) s->seconds = sec;
    ty_history_free(h);
    int64_t n_lr, n_gn, n_es;
    if ((st = read_array(g, "toy.train.history.loss", TOY_GGUF_FLOAT32, (void **)&h->loss, &h->n)) ||
        (st = read_array(g, "toy.train.history.lr", TOY_GGUF_FLOAT32, (void **)&h->lr, &n_lr)) ||
        (st = read_array(g, "toy.train.history.grad_norm", TOY_GGUF_FLOAT32, (void **)&h->grad_norm, &n_gn)) ||
        (st = read_array(g, "toy.train.history.eval_step", TOY_GGUF_INT64, (void **)&h->eval_step, &n_es)) ||
        (st = read_array(g, "toy.train.history.eval_loss", TOY_GGUF_FLOAT32, (void **)&h->eval_loss, &h->n_eval)))
        goto done;
    h->cap = h->n;
    h->cap_eval = h->n_eval;
    if (n_lr != h->n || n_gn != h->n || n_es != h->n_eval || h->n != s->step) {
        st = ty_error(TOY_ERR_FORMAT, "%s: the loss history does not match step %lld", path, (long long)s->step);
        goto done;
    }
    for (int i = 0; !st && i < ty_train_model_n_tensors(tm); i++) {
        const train_tensor *t = ty_train_model_tensor(tm, i);
        if (t->trainable) st = read_tensor(g, "adam_m", t, m + t->offset, true);
        if (!st && t->trainable) st = read_tensor(g, "adam_v", t, v + t->offset, true);
        if (!st) st = read_tensor(g, "master", t, ty_train_model_params(tm) + t->offset, false);
    }
done:
    toy_gguf_close(g);
    return st;
}
