/* train_model.c — the training forward and backward of a dense model.
 *
 * ty_train_model_step reads as toy_decode does: embed → for each layer (norm, attention,
 * FFN) → final norm → output projection and loss; then the same in reverse. The
 * architecture switches are those of ty_hparams. Per layer the forward keeps what the
 * backward cannot cheaply recompute (the layer's input, Q/K/V, the attention output and
 * its log-sum-exp, the FFN's gate and up); norms and gated activations are recomputed.
 * The output projection and the loss run over chunks of rows, the backward of each
 * chunk right after its forward, so the logits of the whole batch never exist at once.
 *
 * A micro-batch runs in parts of whole sequences, TRAIN_PART_TOKENS rows or so each,
 * forward and backward one part after another, so that the activations kept are those
 * of one part. The gradients are the same bits as in one pass: each gradient is a sum
 * over rows in row order, a product over rows continued by accumulate (gemm.h) or a
 * per-column loop adding row after row, and the parts come in row order; the loss sums
 * on from part to part, and LoRA's dropout draws by the row's place in the micro-batch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "error.h"
#include "gguf.h"
#include "ops.h"
#include "train_model.h"

/* Rows of one part of a micro-batch (whole sequences, one at least). 512 rows: the
 * products are as fast as over the whole micro-batch (docs/performance.md, "Training"),
 * and a 135M model keeps 0.3 GB of activations instead of 2.8 at 8 x 512. */
#ifndef TRAIN_PART_TOKENS
#define TRAIN_PART_TOKENS 512
#endif

/* what the forward keeps of one layer, [n rows] each */
typedef struct {
    float *x;            /* the layer's input (the residual stream) */
    float *q_raw, *k_raw; /* before the QK norms (q_norm_len only) */
    float *q, *k, *v;    /* as attention reads them (normed, rotated, prescaled) */
    float *att;          /* attention output [n][n_head * head_dim] */
    float *lse;          /* [B][n_head][T] */
    float *o_raw;        /* attention projection before its post-norm (post_norms only) */
    float *x_mid;        /* the residual stream after attention */
    float *gate, *up;    /* [n][n_ff] */
    float *f_raw;        /* FFN output before its post-norm (post_norms only) */
    float *ts[MAT_KINDS]; /* LoRA: s (x A^T) of each adapted product [n][groups * rank] */
} layer_acts;

/* One adapter's A [rank][n_in] and B [n_out][rank], in the parameters or gradients. */
typedef struct {
    float *a, *b;
} lora_ab;

struct train_model {
    ty_hparams hp;
    ty_rope_params *rope; /* per layer, freq_factors pointing into the parameters */
    int32_t *n_swa;        /* per layer */
    int32_t seq_len;
    train_tensor *tensors;
    int n_tensors;
    int64_t n_floats, n_trainable;
    float *params, *grads;
    train_weights w, g;
    ty_gemm *gemm;
    ty_pool *pool;

    /* activations, for part_B sequences of T tokens (a part of a B x T micro-batch) */
    int B, T, part_B;
    int64_t row0; /* the part's first row in the micro-batch */
    float *act_mem;
    layer_acts *acts;
    float *x_final;
    float *dembd; /* [B * T][n_embd]: the embedding output's gradient (a trainable embedding) */
    /* scratch */
    float *h, *mean, *rstd, *act, *dact, *dgate, *dup, *dh, *dbranch, *draw, *datt, *dq, *dk, *dv;
    float *dq_raw, *dk_raw, *att_scratch, *cs, *theta, *logits, *row_loss, *row_lse;
    int64_t head_rows; /* rows of logits per chunk */

    /* LoRA (lora.rank > 0): the base's matrices, frozen, and the adapters */
    train_lora_params lora;
    float lora_scale;                 /* alpha / rank */
    int64_t lora_groups;              /* pairs per adapted product: n_head per head, else 1 */
    const ty_weight **frozen;        /* [n_layer * MAT_KINDS] */
    const ty_weight *frozen_embd, *frozen_output;
    lora_ab *lw, *lg;                 /* [n_layer * MAT_KINDS], a NULL: not adapted */
    float *panel;                     /* a frozen matrix's rows as floats, panel_rows at a time */
    int64_t panel_rows;
    float *xd, *dxd, *dts;            /* dropout's input, its gradient, d(ts) */
    uint64_t key;                     /* the micro-batch's dropout key */

    /* taps kept from the forward: [n_layer * TRAIN_TAP_KINDS], each [tap_rows][n_embd] or NULL */
    float **taps;
    int64_t tap_rows;

    /* Trainable matrices as the products' B panels, packed once per step where it has
     * parts and runs BF16 pairs (every part reads the same weights; 2 bytes an element,
     * where F32 panels would add the model's size again for a few percent): [2][n_layer *
     * MAT_KINDS + 1] (forward, input gradient; the last: the output matrix, whose
     * input-gradient panels are not kept: at a vocabulary of 50k they cost more memory
     * than they save time, docs/performance.md) */
    struct weight_panels {
        float *p;
        size_t floats; /* its room */
        int64_t step;  /* packed in this step (0: never) */
    } *panels;
    int64_t step;   /* ty_train_model_step calls */
    bool pack_once; /* in this step */
    /* a normed input that several matrices read (Q, K and V; gate and up) packed once for
     * their products (shared_input) */
    float *in_panels;
    size_t in_panels_floats;
};

const char *const ty_train_tap_names[TRAIN_TAP_KINDS] = {"attn_norm", "attn_out", "ffn_norm", "ffn_out", "out"};

/* ---------------------------------------------------------------- tensors */

static int find_tensor(const train_model *tm, const char *name) {
    for (int i = 0; i < tm->n_tensors; i++)
        if (!strcmp(tm->tensors[i].name, name)) return i;
    return -1;
}

/* The tensor's floats in params (or grads), NULL if absent; `rows_skip` rows of
 * `row_len` into it (a part of a fused matrix). */
static float *tensor_at(const train_model *tm, float *base, const char *name, int64_t row0,
                        int64_t row_len) {
    const int i = find_tensor(tm, name);
    return i < 0 ? NULL : base + tm->tensors[i].offset + row0 * row_len;
}

static void bind_weights(const train_model *tm, float *base, train_weights *w) {
    const ty_hparams *hp = &tm->hp;
    char name[96];
    w->token_embd = tensor_at(tm, base, "token_embd.weight", 0, 0);
    w->output_norm = tensor_at(tm, base, "output_norm.weight", 0, 0);
    w->output_norm_b = tensor_at(tm, base, "output_norm.bias", 0, 0);
    w->pos_embd = tensor_at(tm, base, "position_embd.weight", 0, 0);
    w->output = hp->tied_output ? w->token_embd : tensor_at(tm, base, "output.weight", 0, 0);
    for (int il = 0; il < hp->n_layer; il++) {
        train_layer_weights *l = &w->layers[il];
        float **mats[MAT_KINDS] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down};
        for (int k = 0; k < MAT_KINDS; k++) {
            const ty_mat_home h = ty_layer_mat_home(hp, k);
            /* per-head: head 0's tensor, the others right after it (per_head_contiguous) */
            const bool heads = hp->per_head_weights && k <= MAT_V;
            snprintf(name, sizeof name, heads ? "blk.%d.%s.head_0.weight" : "blk.%d.%s.weight", il, h.tensor);
            *mats[k] = tensor_at(tm, base, name, h.row0, h.n_in);
        }
#define T(fmt) (snprintf(name, sizeof name, "blk.%d." fmt, il), tensor_at(tm, base, name, 0, 0))
        l->attn_norm = T("attn_norm.weight");
        l->ffn_norm = T("ffn_norm.weight");
        if (hp->layer_norm) {
            l->attn_norm_b = T("attn_norm.bias");
            l->ffn_norm_b = T("ffn_norm.bias");
        }
        if (hp->mat_bias) {
            l->bo = T("attn_output.bias");
            l->b_up = T("ffn_up.bias");
            l->b_down = T("ffn_down.bias");
        }
        if (hp->qkv_bias && hp->fused_qkv) { /* attn_qkv.bias: Q's, then K's, then V's */
            const int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
            snprintf(name, sizeof name, "blk.%d.attn_qkv.bias", il);
            l->bq = tensor_at(tm, base, name, 0, 0);
            l->bk = l->bq ? l->bq + qd : NULL;
            l->bv = l->bq ? l->bq + qd + kvd : NULL;
        } else if (hp->qkv_bias && hp->per_head_weights) {
            l->bq = T("attn_q.head_0.bias");
            l->bk = T("attn_k.head_0.bias");
            l->bv = T("attn_v.head_0.bias");
        } else if (hp->qkv_bias) {
            l->bq = T("attn_q.bias");
            l->bk = T("attn_k.bias");
            l->bv = T("attn_v.bias");
        }
        if (hp->q_norm_len) {
            l->q_norm = T("attn_q_norm.weight");
            l->k_norm = T("attn_k_norm.weight");
        }
        if (hp->post_norms) {
            l->post_attn_norm = T("post_attention_norm.weight");
            l->post_ffn_norm = T("post_ffw_norm.weight");
        }
#undef T
    }
}

/* The per-head layout: head h's tensor (weight or bias) of each of Q, K and V must be
 * right after head h - 1's in the parameters, so that the heads are the matrix's rows. */
static toy_status per_head_contiguous(const train_model *tm, const char *path) {
    const ty_hparams *hp = &tm->hp;
    for (int il = 0; il < hp->n_layer; il++)
        for (int k = MAT_Q; k <= MAT_V; k++)
            for (int b = 0; b < (hp->qkv_bias ? 2 : 1); b++) {
                const int heads = k == MAT_Q ? hp->n_head : hp->n_head_kv;
                const int64_t floats = (int64_t)hp->head_dim * (b ? 1 : hp->n_embd);
                char name[128];
                snprintf(name, sizeof name, "blk.%d.%s.head_0.%s", il, ty_layer_mat_home(hp, k).tensor,
                         b ? "bias" : "weight");
                const float *first = tensor_at(tm, tm->params, name, 0, 0);
                for (int h = 1; first && h < heads; h++) {
                    snprintf(name, sizeof name, "blk.%d.%s.head_%d.%s", il, ty_layer_mat_home(hp, k).tensor, h,
                             b ? "bias" : "weight");
                    if (tensor_at(tm, tm->params, name, 0, 0) != first + h * floats)
                        return ty_error(TOY_ERR_UNSUPPORTED,
                                        "%s: tensor %s does not follow head %d's in training's layout (its %lld "
                                        "floats are not a multiple of 16)",
                                        path, name, h - 1, (long long)floats);
                }
            }
    return TOY_OK;
}

/* The adapters' A and B in params or grads. The matrices of a fused tensor (phi3's
 * attn_qkv, ffn_up) share its one pair: all of A, and B split by rows. Per-head pairs
 * lie head after head (model_new), so head 0's A and B begin the stacked A and B. */
static void bind_lora(const train_model *tm, float *base, lora_ab *ab) {
    char name[128];
    for (int il = 0; il < tm->hp.n_layer; il++)
        for (int k = 0; k < MAT_KINDS; k++) {
            const ty_mat_home h = ty_layer_mat_home(&tm->hp, k);
            lora_ab *p = &ab[il * MAT_KINDS + k];
            if (tm->lora.per_head) {
                snprintf(name, sizeof name, "blk.%d.%s.head_0.lora_a.weight", il, h.tensor);
                p->a = tensor_at(tm, base, name, 0, 0);
                snprintf(name, sizeof name, "blk.%d.%s.head_0.lora_b.weight", il, h.tensor);
                p->b = tensor_at(tm, base, name, 0, 0);
                continue;
            }
            snprintf(name, sizeof name, "blk.%d.%s.weight.lora_a", il, h.tensor);
            p->a = tensor_at(tm, base, name, 0, 0);
            snprintf(name, sizeof name, "blk.%d.%s.weight.lora_b", il, h.tensor);
            p->b = tensor_at(tm, base, name, h.row0, tm->lora.rank);
        }
}

static const char *arch_name(const toy_model *m) {
    const char *s;
    size_t len;
    static _Thread_local char buf[64];
    if (toy_gguf_get_str(m->gguf, "general.architecture", &s, &len)) return "?";
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 63 ? len : 63), s);
    return buf;
}

/* A normal variate (Box-Muller on splitmix64), for LoRA's A. */
static float train_gaussian(uint64_t *state) {
    uint64_t z[2];
    for (int i = 0; i < 2; i++) {
        uint64_t x = (*state += 0x9e3779b97f4a7c15ull);
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        z[i] = x ^ (x >> 31);
    }
    const double u1 = ((z[0] >> 11) + 1) * (1.0 / 9007199254740993.0), u2 = (z[1] >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
}

static toy_status model_new(const toy_model *m, int32_t seq_len, ty_pool *pool, const train_lora_params *lp,
                            train_model **out);

toy_status ty_train_model_new(const toy_model *m, int32_t seq_len, ty_pool *pool, train_model **out) {
    return model_new(m, seq_len, pool, NULL, out);
}

toy_status ty_train_model_new_lora(const toy_model *m, int32_t seq_len, ty_pool *pool, const train_lora_params *lp,
                                train_model **out) {
    *out = NULL;
    const char *path = toy_gguf_path(m->gguf);
    if (lp->rank < 1 || lp->rank > 4096) return ty_error(TOY_ERR_INVALID, "LoRA rank %d (1..4096)", lp->rank);
    if (!(lp->dropout >= 0 && lp->dropout < 1))
        return ty_error(TOY_ERR_INVALID, "LoRA dropout %g must be in [0, 1)", lp->dropout);
    if (!(lp->targets & ((1u << MAT_KINDS) - 1))) return ty_error(TOY_ERR_INVALID, "no LoRA targets");
    if (!(lp->init_scale >= 0) || !isfinite(lp->init_scale))
        return ty_error(TOY_ERR_INVALID, "LoRA init scale %g must be a finite number >= 0", lp->init_scale);
    if (lp->per_head && (lp->targets & ((1u << MAT_KINDS) - 1)) != 1u << MAT_Q)
        return ty_error(TOY_ERR_INVALID, "per-head LoRA adapts the query only: targets q");
    if (lp->per_head && m->hp.fused_qkv)
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: per-head LoRA needs a query matrix of its own (attn_q); %s fuses it",
                        path, arch_name(m));
    if (m->hp.ffn_no_gate && !(lp->targets & ((1u << MAT_KINDS) - 1) & ~(1u << MAT_GATE)))
        return ty_error(TOY_ERR_INVALID, "%s: LoRA targets: the model has no gate matrix (ffn_gate), the only one named",
                        path);
    /* a fused matrix has one adapter: naming one of its parts adapts them all */
    train_lora_params p = *lp;
    for (int k = 0; k < MAT_KINDS; k++)
        if (p.targets >> k & 1) p.targets |= 1u << ty_layer_mat_home(&m->hp, k).first;
    for (int k = 0; k < MAT_KINDS; k++)
        if (p.targets >> ty_layer_mat_home(&m->hp, k).first & 1) p.targets |= 1u << k;
    return model_new(m, seq_len, pool, &p, out);
}

const train_lora_params *ty_train_model_lora(const train_model *tm) { return tm->lora.rank ? &tm->lora : NULL; }

/* The per-head layout (model.h): the file's tensors in an order where each per-head
 * group (blk.N.attn_q.head_H.weight or .bias, H = 0, 1, ...) comes whole, in head order,
 * where its first member was; NULL (and *st 0) for any other layout. */
static int *per_head_order(const toy_model *m, toy_status *st) {
    *st = TOY_OK;
    if (!m->hp.per_head_weights) return NULL;
    const toy_gguf *g = m->gguf;
    const int n = (int)toy_gguf_n_tensors(g);
    int *order = malloc((size_t)n * sizeof *order);
    bool *placed = calloc((size_t)n, sizeof *placed);
    if (!order || !placed) {
        free(order);
        free(placed);
        *st = ty_error(TOY_ERR_NOMEM, "no memory");
        return NULL;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (placed[i]) continue;
        const char *name = toy_gguf_tensor_at(g, i)->name;
        int layer, head, len = 0;
        char what[16], kind[16];
        if (sscanf(name, "blk.%d.%15[a-z_].head_%d.%15[a-z]%n", &layer, what, &head, kind, &len) != 4 || name[len]) {
            order[k++] = i;
            placed[i] = true;
            continue;
        }
        for (int h = 0;; h++) { /* the whole group, in head order */
            char member[128];
            snprintf(member, sizeof member, "blk.%d.%s.head_%d.%s", layer, what, h, kind);
            const toy_gguf_tensor *t = toy_gguf_find_tensor(g, member);
            const int at = t ? (int)(t - toy_gguf_tensor_at(g, 0)) : -1;
            if (at < 0 || placed[at]) break;
            order[k++] = at;
            placed[at] = true;
        }
        if (!placed[i]) { /* a head number with a gap before it */
            order[k++] = i;
            placed[i] = true;
        }
    }
    free(placed);
    return order;
}

static toy_status model_new(const toy_model *m, int32_t seq_len, ty_pool *pool, const train_lora_params *lp,
                            train_model **out) {
    *out = NULL;
    const ty_hparams *hp = &m->hp;
    const char *path = toy_gguf_path(m->gguf);
    if (hp->n_expert > 0)
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: training not supported for %s (mixture of experts)",
                        path, arch_name(m));
    if (seq_len < 1) return ty_error(TOY_ERR_INVALID, "sequence length %d", seq_len);
    train_model *tm = calloc(1, sizeof *tm);
    if (!tm) return ty_error(TOY_ERR_NOMEM, "no memory");
    tm->hp = *hp;
    tm->seq_len = seq_len;
    tm->pool = pool;
    toy_status st = TOY_OK;
    const toy_gguf *g = m->gguf;
    const int n_file = (int)toy_gguf_n_tensors(g);
    const int pairs_per_kind = lp && lp->per_head ? hp->n_head : 1;
    tm->tensors = calloc((size_t)n_file + (size_t)hp->n_layer * MAT_KINDS * 2 * (size_t)pairs_per_kind,
                         sizeof *tm->tensors);
    tm->rope = calloc((size_t)hp->n_layer, sizeof *tm->rope);
    tm->n_swa = calloc((size_t)hp->n_layer, sizeof *tm->n_swa);
    tm->w.layers = calloc((size_t)hp->n_layer, sizeof *tm->w.layers);
    tm->g.layers = calloc((size_t)hp->n_layer, sizeof *tm->g.layers);
    tm->gemm = ty_gemm_new(pool, ty_cpu()->gemm());
    if (tm->gemm) ty_gemm_set_bf16_dot(tm->gemm, ty_cpu_gemm_bf16());
    if (!tm->tensors || !tm->rope || !tm->n_swa || !tm->w.layers || !tm->g.layers || !tm->gemm) {
        ty_train_model_free(tm);
        return ty_error(TOY_ERR_NOMEM, "no memory");
    }
    if (lp) {
        tm->lora = *lp;
        tm->lora_scale = lp->alpha / (float)lp->rank;
        tm->lora_groups = lp->per_head ? hp->n_head : 1;
        tm->frozen = calloc((size_t)hp->n_layer * MAT_KINDS, sizeof *tm->frozen);
        tm->lw = calloc((size_t)hp->n_layer * MAT_KINDS, sizeof *tm->lw);
        tm->lg = calloc((size_t)hp->n_layer * MAT_KINDS, sizeof *tm->lg);
        if (!tm->frozen || !tm->lw || !tm->lg) {
            ty_train_model_free(tm);
            return ty_error(TOY_ERR_NOMEM, "no memory");
        }
        for (int il = 0; il < hp->n_layer; il++)
            for (int k = 0; k < MAT_KINDS; k++) tm->frozen[il * MAT_KINDS + k] = ty_layer_mat(&m->layers[il], k);
        tm->frozen_embd = &m->token_embd;
        tm->frozen_output = &m->output;
    }
    /* one float per element, tensors in file order (LoRA: the vectors only, then the
     * adapters), each 16-float aligned; the heads of a per-head matrix one after another,
     * in head order, so that they are the matrix's rows (bind_weights checks) */
    int *file_order = per_head_order(m, &st);
    if (st) {
        ty_train_model_free(tm);
        return st;
    }
    int64_t off = 0;
    for (int oi = 0; oi < n_file; oi++) {
        const int i = file_order ? file_order[oi] : oi;
        const toy_gguf_tensor *t = toy_gguf_tensor_at(g, i);
        /* a frozen matrix, read in place (but the learned positions, which are added) */
        if (lp && t->n_dims >= 2 && strcmp(t->name, "position_embd.weight")) continue;
        train_tensor *tt = &tm->tensors[tm->n_tensors++];
        snprintf(tt->name, sizeof tt->name, "%s", t->name);
        tt->type = t->type;
        tt->n_dims = t->n_dims;
        memcpy(tt->ne, t->ne, sizeof tt->ne);
        tt->n = toy_tensor_nelements(t);
        tt->offset = off;
        if (!toy_type_can_dequantize(t->type)) {
            st = ty_error(TOY_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which toy cannot train",
                          path, t->name, toy_type_name(t->type));
            break;
        }
        tt->trainable = !lp && strncmp(t->name, "rope_freqs", 10) && strncmp(t->name, "rope_factors", 12);
        tt->decay = tt->trainable && t->n_dims >= 2;
        if (tt->trainable) tm->n_trainable += tt->n;
        off += (tt->n + 15) / 16 * 16;
    }
    free(file_order);
    const int n_vectors = tm->n_tensors;
    for (int il = 0; lp && !st && il < hp->n_layer; il++)
        for (int k = 0; k < MAT_KINDS; k++) {
            if (!(lp->targets & (1u << k)) || (k == MAT_GATE && hp->ffn_no_gate)) continue;
            const ty_weight *w = tm->frozen[il * MAT_KINDS + k];
            const ty_mat_home h = ty_layer_mat_home(hp, k);
            if (h.first != k) continue; /* a part of a fused pair */
            if (lp->per_head) { /* head after head, A then B, with no gap between heads */
                for (int ab = 0; ab < 2; ab++) {
                    for (int hd = 0; hd < hp->n_head; hd++) {
                        train_tensor *tt = &tm->tensors[tm->n_tensors++];
                        *tt = (train_tensor){.type = TOY_TYPE_F32, .n_dims = 2,
                                             .ne = {ab ? lp->rank : w->n_cols, ab ? hp->head_dim : lp->rank, 1, 1},
                                             .trainable = true, .decay = true, .lora = true, .lora_a = !ab};
                        snprintf(tt->name, sizeof tt->name, "blk.%d.%s.head_%d.lora_%c.weight", il, h.tensor, hd,
                                 ab ? 'b' : 'a');
                        tt->n = tt->ne[0] * tt->ne[1];
                        tt->offset = off;
                        tm->n_trainable += tt->n;
                        off += tt->n;
                    }
                    off = (off + 15) / 16 * 16;
                }
                continue;
            }
            for (int ab = 0; ab < 2; ab++) {
                train_tensor *tt = &tm->tensors[tm->n_tensors++];
                snprintf(tt->name, sizeof tt->name, "blk.%d.%s.weight.lora_%c", il, h.tensor, ab ? 'b' : 'a');
                tt->type = TOY_TYPE_F32;
                tt->n_dims = 2;
                tt->ne[0] = ab ? lp->rank : w->n_cols;
                tt->ne[1] = ab ? h.n_out : lp->rank;
                tt->ne[2] = tt->ne[3] = 1;
                tt->n = tt->ne[0] * tt->ne[1];
                tt->offset = off;
                tt->trainable = tt->decay = tt->lora = true;
                tt->lora_a = !ab;
                tm->n_trainable += tt->n;
                off += (tt->n + 15) / 16 * 16;
            }
        }
    tm->n_floats = off;
    if (!st) {
        tm->params = aligned_alloc(64, (size_t)off * sizeof(float) + 64);
        tm->grads = aligned_alloc(64, (size_t)off * sizeof(float) + 64);
        if (!tm->params || !tm->grads)
            st = ty_error(TOY_ERR_NOMEM, "cannot allocate %lld parameters and gradients",
                          (long long)off);
    }
    for (int i = 0; !st && i < n_vectors; i++) {
        const toy_gguf_tensor *t = toy_gguf_find_tensor(g, tm->tensors[i].name);
        st = toy_dequantize(t->type, t->data, tm->params + tm->tensors[i].offset, tm->tensors[i].n);
        if (st) ty_error_wrap(st, "%s: tensor %s", path, t->name);
        else ty_gguf_drop_pages(g, t->data, t->size); /* copied: training reads the copy */
    }
    /* LoRA's standard start: A ~ N(0, init_scale^2), init_scale 1 / rank by default; B = 0 */
    uint64_t rng = lp ? lp->seed * 0x9e3779b97f4a7c15ull + 1 : 0;
    const float a_std = lp && lp->init_scale > 0 ? lp->init_scale : lp ? 1.0f / (float)lp->rank : 0.0f;
    for (int i = n_vectors; !st && i < tm->n_tensors; i++) {
        const train_tensor *t = &tm->tensors[i];
        float *x = tm->params + t->offset;
        for (int64_t j = 0; j < t->n; j++) x[j] = t->lora_a ? train_gaussian(&rng) * a_std : 0.0f;
    }
    if (st) {
        ty_train_model_free(tm);
        return st;
    }
    memset(tm->grads, 0, (size_t)off * sizeof(float));
    if (hp->per_head_weights && (st = per_head_contiguous(tm, path))) {
        ty_train_model_free(tm);
        return st;
    }
    bind_weights(tm, tm->params, &tm->w);
    if (!lp) bind_weights(tm, tm->grads, &tm->g); /* LoRA: nothing of the base has a gradient */
    if (lp) {
        bind_lora(tm, tm->params, tm->lw);
        bind_lora(tm, tm->grads, tm->lg);
        /* about 4 MB of a frozen matrix at a time, whole groups of 16 rows */
        int64_t widest = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
        const int64_t qd = (int64_t)hp->n_head * hp->head_dim;
        if (qd > widest) widest = qd;
        tm->panel_rows = ((1 << 20) / widest + 15) / 16 * 16;
        tm->panel = aligned_alloc(64, (size_t)(tm->panel_rows * widest) * sizeof(float) + 64);
        if (!tm->panel) {
            ty_train_model_free(tm);
            return ty_error(TOY_ERR_NOMEM, "no memory");
        }
    }
    /* RoPE as a context of seq_len would use it (LongRoPE: long factors past the
     * original context), the factors pointing at the trainable copy */
    const float *file_factors;
    const char *factors = ty_model_rope_factors(m, seq_len, &file_factors);
    if (factors) {
        tm->w.rope_factors = tensor_at(tm, tm->params, factors, 0, 0);
        tm->g.rope_factors = lp ? NULL : tensor_at(tm, tm->grads, factors, 0, 0);
    }
    for (int il = 0; il < hp->n_layer; il++) {
        tm->rope[il] = m->layers[il].rope;
        tm->rope[il].freq_factors = tm->w.rope_factors; /* every layer, as ty_context_rope */
        tm->n_swa[il] = m->layers[il].n_swa;
    }
    *out = tm;
    return TOY_OK;
}

static void free_acts(train_model *tm) {
    free(tm->act_mem);
    free(tm->acts);
    tm->act_mem = NULL;
    tm->acts = NULL;
    tm->B = tm->T = 0;
}

static void free_taps(train_model *tm) {
    for (int i = 0; tm->taps && i < tm->hp.n_layer * TRAIN_TAP_KINDS; i++) free(tm->taps[i]);
    free(tm->taps);
    tm->taps = NULL;
}

void ty_train_model_free(train_model *tm) {
    if (!tm) return;
    free_acts(tm);
    free_taps(tm);
    free(tm->tensors);
    free(tm->rope);
    free(tm->n_swa);
    free(tm->w.layers);
    free(tm->g.layers);
    free(tm->params);
    free(tm->grads);
    free(tm->frozen);
    free(tm->lw);
    free(tm->lg);
    free(tm->panel);
    if (tm->panels)
        for (int i = 0; i < 2 * (tm->hp.n_layer * MAT_KINDS + 1); i++) free(tm->panels[i].p);
    free(tm->panels);
    free(tm->in_panels);
    ty_gemm_free(tm->gemm);
    free(tm);
}

/* ---------------------------------------------------------------- activations */

/* Carves named arrays out of one allocation: a first pass only counts. */
typedef struct {
    float *base;
    int64_t used;
} carver;

static float *carve(carver *c, int64_t n) {
    float *p = c->base ? c->base + c->used : NULL;
    c->used += (n + 15) / 16 * 16;
    return p;
}

static void layout_acts(train_model *tm, carver *c, int B, int T, int part_B) {
    const ty_hparams *hp = &tm->hp;
    const int64_t n = (int64_t)part_B * T, C = hp->n_embd, F = hp->n_ff;
    /* d(embedding output) of the whole micro-batch: the embedding's backward runs after
     * the last part, so that a tied embedding's gradient adds the output's products of
     * every part first, in the order of the whole */
    if (tm->w.token_embd) tm->dembd = carve(c, (int64_t)B * T * C);
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    for (int il = 0; il < hp->n_layer; il++) {
        layer_acts *a = tm->acts ? &tm->acts[il] : &(layer_acts){0};
        a->x = carve(c, n * C);
        if (hp->q_norm_len) {
            a->q_raw = carve(c, n * qd);
            a->k_raw = carve(c, n * kvd);
        }
        a->q = carve(c, n * qd);
        a->k = carve(c, n * kvd);
        a->v = carve(c, n * kvd);
        a->att = carve(c, n * qd);
        a->lse = carve(c, n * hp->n_head);
        if (hp->post_norms) {
            a->o_raw = carve(c, n * C);
            a->f_raw = carve(c, n * C);
        }
        a->x_mid = carve(c, n * C);
        if (!hp->ffn_no_gate) a->gate = carve(c, n * F);
        a->up = carve(c, n * F);
        for (int k = 0; k < MAT_KINDS; k++)
            if (tm->lora.rank && (tm->lora.targets & (1u << k))) a->ts[k] = carve(c, n * tm->lora.rank * tm->lora_groups);
    }
    if (tm->lora.rank) {
        const int64_t widest = C > F ? (C > qd ? C : qd) : (F > qd ? F : qd);
        tm->xd = carve(c, n * widest);
        tm->dxd = carve(c, n * widest);
        tm->dts = carve(c, n * tm->lora.rank * tm->lora_groups);
    }
    tm->x_final = carve(c, n * C);
    const int64_t wide = C > qd ? C : qd;
    tm->h = carve(c, n * C);
    tm->rstd = carve(c, n * (hp->n_head > 1 ? hp->n_head : 1));
    tm->mean = carve(c, n);
    tm->act = carve(c, n * F);
    tm->dact = carve(c, n * F);
    tm->dgate = carve(c, n * F);
    tm->dup = carve(c, n * F);
    tm->dh = carve(c, n * C);
    tm->dbranch = carve(c, n * C);
    tm->draw = carve(c, n * wide);
    tm->datt = carve(c, n * qd);
    tm->dq = carve(c, n * qd);
    tm->dk = carve(c, n * kvd);
    tm->dv = carve(c, n * kvd);
    tm->dq_raw = carve(c, n * qd);
    tm->dk_raw = carve(c, n * kvd);
    const attention_shape as = {part_B, T, hp->n_head, hp->n_head_kv, hp->head_dim, 1, 0, 0};
    tm->att_scratch = carve(c, ty_attention_scratch_floats(&as, tm->pool ? ty_pool_size(tm->pool) : 1));
    tm->cs = carve(c, (int64_t)T * hp->n_rot);
    tm->theta = carve(c, (int64_t)T * hp->n_rot / 2 + 1);
    /* logits of about 16M floats at a time, at least one row */
    tm->head_rows = (16 << 20) / hp->n_vocab;
    if (tm->head_rows < 1) tm->head_rows = 1;
    if (tm->head_rows > n) tm->head_rows = n;
    tm->logits = carve(c, tm->head_rows * hp->n_vocab);
    tm->row_loss = carve(c, n);
    tm->row_lse = carve(c, n);
}

toy_status ty_train_model_reserve(train_model *tm, int B, int T) {
    int part_B = T > 0 && TRAIN_PART_TOKENS / T > 1 ? TRAIN_PART_TOKENS / T : 1;
    /* an even number of rows, where the BF16 pair products (gemm.h) split as the whole's */
    if (T % 2 && part_B % 2 && part_B < B) part_B = part_B > 1 ? part_B - 1 : 2;
    return ty_train_model_reserve_parts(tm, B, T, part_B);
}

toy_status ty_train_model_reserve_parts(train_model *tm, int B, int T, int part_B) {
    if (B < 1 || T < 1 || part_B < 1) return ty_error(TOY_ERR_INVALID, "batch of %d x %d tokens", B, T);
    if (T > tm->seq_len)
        return ty_error(TOY_ERR_INVALID, "sequences of %d tokens, the model was set up for %d", T,
                        tm->seq_len);
    if (tm->hp.pos_embd && T > tm->hp.n_ctx_train)
        return ty_error(TOY_ERR_INVALID, "sequences of %d tokens, past the model's %d learned positions", T,
                        tm->hp.n_ctx_train);
    if (part_B > B) part_B = B;
    if (B == tm->B && T == tm->T && part_B == tm->part_B) return TOY_OK;
    free_acts(tm);
    free_taps(tm); /* sized for the old batch */
    carver c = {0};
    layout_acts(tm, &c, B, T, part_B);
    tm->acts = calloc((size_t)tm->hp.n_layer, sizeof *tm->acts);
    tm->act_mem = aligned_alloc(64, (size_t)c.used * sizeof(float) + 64);
    if (!tm->acts || !tm->act_mem) {
        free_acts(tm);
        return ty_error(TOY_ERR_NOMEM, "cannot allocate %.1f MB of activations for %d x %d tokens",
                        (double)c.used * 4 / 1e6, part_B, T);
    }
    c = (carver){tm->act_mem, 0};
    layout_acts(tm, &c, B, T, part_B);
    tm->B = B;
    tm->T = T;
    tm->part_B = part_B;
    return TOY_OK;
}

toy_status ty_train_model_keep_tap(train_model *tm, int il, int kind, float **out) {
    *out = NULL;
    if (!tm->B) return ty_error(TOY_ERR_INVALID, "taps: reserve the batch first");
    if (il < 0 || il >= tm->hp.n_layer || kind < 0 || kind >= TRAIN_TAP_KINDS)
        return ty_error(TOY_ERR_INVALID, "tap L%d.%s: the model has %d layers", il,
                        kind >= 0 && kind < TRAIN_TAP_KINDS ? ty_train_tap_names[kind] : "?", tm->hp.n_layer);
    if (!tm->taps && !(tm->taps = calloc((size_t)tm->hp.n_layer * TRAIN_TAP_KINDS, sizeof *tm->taps)))
        return ty_error(TOY_ERR_NOMEM, "no memory");
    float **t = &tm->taps[il * TRAIN_TAP_KINDS + kind];
    tm->tap_rows = (int64_t)tm->B * tm->T;
    if (!*t && !(*t = calloc((size_t)(tm->tap_rows * tm->hp.n_embd), sizeof **t)))
        return ty_error(TOY_ERR_NOMEM, "no memory for tap L%d.%s", il, ty_train_tap_names[kind]);
    *out = *t;
    return TOY_OK;
}

const float *ty_train_model_tap(const train_model *tm, int il, int kind) {
    return tm->taps && il >= 0 && il < tm->hp.n_layer && kind >= 0 && kind < TRAIN_TAP_KINDS
               ? tm->taps[il * TRAIN_TAP_KINDS + kind]
               : NULL;
}

/* ---------------------------------------------------------------- forward */

/* A kept tap gets the part's n rows of x (times s): rows row0.. of the micro-batch. */
static void tap(train_model *tm, int il, int kind, const float *x, int64_t n, float s) {
    float *t = tm->taps ? tm->taps[il * TRAIN_TAP_KINDS + kind] : NULL;
    if (!t) return;
    const int64_t C = tm->hp.n_embd;
    t += tm->row0 * C;
    for (int64_t i = 0; i < n * C; i++) t[i] = s * x[i];
}

static void zero(float *x, int64_t n) { memset(x, 0, (size_t)n * sizeof *x); }

static attention_shape layer_attention(const train_model *tm, int il, int B, int T) {
    const ty_hparams *hp = &tm->hp;
    return (attention_shape){B, T, hp->n_head, hp->n_head_kv, hp->head_dim, hp->kq_scale, hp->attn_softcap,
                             tm->n_swa[il]};
}

static void rope_tables(train_model *tm, int il, int T) {
    for (int t = 0; t < T; t++) ty_rope_cos_sin(&tm->rope[il], t, tm->cs + (int64_t)t * tm->hp.n_rot);
}

/* The FFN's activation: act(gate) * up, or act(up) without a gate */
static void glu_forward(train_model *tm, float *out, const float *gate, const float *up, int64_t n) {
    if (tm->hp.ffn_no_gate) ty_gelu_forward(tm->pool, out, up, n);
    else if (tm->hp.ffn_act == TY_ACT_GELU_TANH) ty_geglu_forward(tm->pool, out, gate, up, n);
    else ty_swiglu_forward(tm->pool, out, gate, up, n);
}

/* The model's norm of x, weight w (and bias b: LayerNorm), over n rows of n_embd; mean and
 * rstd (NULL: not kept) for the backward */
static void norm_forward(train_model *tm, float *out, float *mean, float *rstd, const float *x, const float *w,
                         const float *b, int64_t n) {
    const ty_hparams *hp = &tm->hp;
    if (hp->layer_norm) ty_layernorm_forward(tm->pool, out, mean, rstd, x, w, b, n, hp->n_embd, hp->rms_eps);
    else ty_rmsnorm_forward(tm->pool, out, rstd, x, w, n, hp->n_embd, hp->rms_eps);
}

static void norm_backward(train_model *tm, float *dx, float *dw, float *db, const float *dout, const float *x,
                          const float *w, int64_t n) {
    const ty_hparams *hp = &tm->hp;
    if (hp->layer_norm) ty_layernorm_backward(tm->pool, dx, dw, db, dout, x, w, tm->mean, tm->rstd, n, hp->n_embd);
    else ty_rmsnorm_backward(tm->pool, dx, dw, dout, x, w, tm->rstd, n, hp->n_embd);
}

/* ---------------------------------------------------------------- products
 * Layer il's product `kind`: out = in W^T + bias, W trainable (w) or the base's, frozen;
 * with an adapter, + s B (A dropout(in)). */

/* The dropout mask's key of an adapter input: the micro-batch, the layer, the pair. */
static uint64_t dropout_key(const train_model *tm, int il, int kind) {
    const int home = ty_layer_mat_home(&tm->hp, kind).first;
    return tm->key * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(il * MAT_KINDS + home) << 40) ^ tm->lora.seed;
}

static const float *lora_input(train_model *tm, int il, int kind, const float *in, int64_t n, int64_t C) {
    if (tm->lora.dropout <= 0) return in;
    const uint64_t key = dropout_key(tm, il, kind);
    ty_dropout_forward(tm->pool, tm->xd, in, n, C, tm->lora.dropout, key, tm->row0);
    return tm->xd;
}

/* *p with room for `floats` panel floats (64-byte aligned, as the kernels load them),
 * grown where *room is less; NULL without memory or on overflow. */
static float *panel_room(float **p, size_t *room, size_t floats) {
    if (!floats || floats > (SIZE_MAX - 63) / sizeof(float)) return NULL;
    if (floats > *room) {
        free(*p);
        *room = 0;
        if (!(*p = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64))) return NULL;
        *room = floats;
    }
    return *p;
}

/* Weight w [n_out][n_in] (slot: il * MAT_KINDS + kind, or the output matrix's) as the B
 * panels of the forward product (x W^T) or of the input gradient's (dy W), packed at the
 * first use in a step; NULL where the step does not pack once (the product packs it),
 * or when there is no memory for the panels (the same then). */
static const float *weight_panels(train_model *tm, int slot, bool forward, const float *w, int64_t n_in,
                                  int64_t n_out) {
    if (!tm->pack_once) return NULL;
    if (!forward && slot == tm->hp.n_layer * MAT_KINDS) return NULL; /* see pack_once */
    struct weight_panels *e = &tm->panels[(forward ? 0 : tm->hp.n_layer * MAT_KINDS + 1) + slot];
    const int64_t k = forward ? n_in : n_out, n = forward ? n_out : n_in;
    if (e->step == tm->step) return e->p;
    if (!panel_room(&e->p, &e->floats, ty_gemm_packed_b_floats(tm->gemm, k, n))) return NULL;
    const ty_gemm_args p = {false, forward, false, 0, n, k, NULL, 0, w, n_in, NULL, 0, NULL, NULL};
    ty_gemm_pack_b(tm->gemm, &p, e->p);
    e->step = tm->step;
    return e->p;
}

/* in[n x C], read by `users` products of dense matrices, packed once for them: as op(A)
 * of the forward products (x W^T), or as op(B) of the weight gradients (dy^T x); NULL
 * where fewer than two read it or there is no memory (each product packs it then). */
static const float *shared_input(train_model *tm, const float *in, int64_t n, int64_t C, bool forward, int users) {
    if (users < 2) return NULL;
    const size_t floats =
        forward ? ty_gemm_packed_a_floats(tm->gemm, n, C) : ty_gemm_packed_b_floats(tm->gemm, n, C);
    if (!panel_room(&tm->in_panels, &tm->in_panels_floats, floats)) return NULL;
    const ty_gemm_args p = {false, false, false, n, C, forward ? C : n, in, C, in, C, NULL, 0, NULL, NULL};
    if (forward) ty_gemm_pack_a(tm->gemm, &p, tm->in_panels);
    else ty_gemm_pack_b(tm->gemm, &p, tm->in_panels);
    return tm->in_panels;
}

/* in_panels: in packed by shared_input, or NULL */
static void linear_forward(train_model *tm, int il, int kind, const float *w, float *out, const float *in,
                           const float *in_panels, const float *bias, int64_t n, int64_t C, int64_t OC) {
    const ty_matmul_panels panels = {w ? weight_panels(tm, il * MAT_KINDS + kind, true, w, C, OC) : NULL, in_panels};
    if (w) ty_matmul_forward(tm->gemm, out, in, w, &panels, bias, n, C, OC);
    else ty_frozen_matmul_forward(tm->gemm, out, in, tm->frozen[il * MAT_KINDS + kind], bias, n, tm->panel,
                               tm->panel_rows);
    const lora_ab *ab = tm->lw ? &tm->lw[il * MAT_KINDS + kind] : NULL;
    if (!ab || !ab->a) return;
    const float *x = lora_input(tm, il, kind, in, n, C);
    ty_lora_forward(tm->gemm, out, tm->acts[il].ts[kind], x, ab->a, ab->b, n, C, OC, tm->lora.rank,
                    tm->lora_groups, tm->lora_scale);
}

/* din += dout W (and the trainable weight's dw, dbias), and the adapter's gradients. */
static void linear_backward(train_model *tm, int il, int kind, const float *w, float *dw, float *dbias, float *din,
                            const float *dout, const float *in, const float *in_panels, int64_t n, int64_t C,
                            int64_t OC) {
    const ty_matmul_panels panels = {w ? weight_panels(tm, il * MAT_KINDS + kind, false, w, C, OC) : NULL, in_panels};
    if (w) ty_matmul_backward(tm->gemm, din, dw, dbias, dout, in, w, &panels, n, C, OC);
    else ty_frozen_matmul_backward(tm->gemm, din, dout, tm->frozen[il * MAT_KINDS + kind], n, tm->panel,
                                tm->panel_rows);
    const lora_ab *ab = tm->lw ? &tm->lw[il * MAT_KINDS + kind] : NULL;
    if (!ab || !ab->a) return;
    const lora_ab *gab = &tm->lg[il * MAT_KINDS + kind];
    const float *x = lora_input(tm, il, kind, in, n, C);
    if (tm->lora.dropout <= 0) {
        ty_lora_backward(tm->gemm, din, gab->a, gab->b, tm->dts, dout, x, tm->acts[il].ts[kind], ab->a, ab->b, n, C, OC,
                         tm->lora.rank, tm->lora_groups, tm->lora_scale);
        return;
    }
    /* the gradient reaches the input through the same mask */
    memset(tm->dxd, 0, (size_t)(n * C) * sizeof *tm->dxd);
    ty_lora_backward(tm->gemm, tm->dxd, gab->a, gab->b, tm->dts, dout, x, tm->acts[il].ts[kind], ab->a, ab->b, n, C, OC,
                     tm->lora.rank, tm->lora_groups, tm->lora_scale);
    ty_dropout_forward(tm->pool, tm->dxd, tm->dxd, n, C, tm->lora.dropout, dropout_key(tm, il, kind), tm->row0);
    ty_add_scaled(tm->pool, din, din, tm->dxd, 1.0f, n * C);
}

static void layer_forward(train_model *tm, int il, int B, int T) {
    const ty_hparams *hp = &tm->hp;
    const train_layer_weights *w = &tm->w.layers[il];
    layer_acts *a = &tm->acts[il];
    ty_pool *pool = tm->pool;
    ty_gemm *g = tm->gemm;
    const int64_t n = (int64_t)B * T, C = hp->n_embd, F = hp->n_ff, hd = hp->head_dim;
    const int64_t qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;
    float *x_next = il + 1 < hp->n_layer ? tm->acts[il + 1].x : tm->x_final;

    /* attention */
    norm_forward(tm, tm->h, NULL, NULL, a->x, w->attn_norm, w->attn_norm_b, n);
    tap(tm, il, TRAIN_TAP_ATTN_NORM, tm->h, n, 1.0f);
    float *q = hp->q_norm_len ? a->q_raw : a->q;
    float *k = hp->q_norm_len ? a->k_raw : a->k;
    const float *h = shared_input(tm, tm->h, n, C, true, !!w->wq + !!w->wk + !!w->wv);
    linear_forward(tm, il, MAT_Q, w->wq, q, tm->h, h, w->bq, n, C, qd);
    linear_forward(tm, il, MAT_K, w->wk, k, tm->h, h, w->bk, n, C, kvd);
    linear_forward(tm, il, MAT_V, w->wv, a->v, tm->h, h, w->bv, n, C, kvd);
    if (hp->q_norm_len) {
        ty_rmsnorm_forward(pool, a->q, NULL, a->q_raw, w->q_norm, n * qd / hp->q_norm_len, hp->q_norm_len, hp->rms_eps);
        ty_rmsnorm_forward(pool, a->k, NULL, a->k_raw, w->k_norm, n * kvd / hp->k_norm_len, hp->k_norm_len, hp->rms_eps);
    }
    rope_tables(tm, il, T);
    ty_rope_forward(pool, a->q, n, T, hp->n_head, hd, &tm->rope[il], tm->cs);
    ty_rope_forward(pool, a->k, n, T, hp->n_head_kv, hd, &tm->rope[il], tm->cs);
    if (hp->q_scale != 1.0f) ty_scale_inplace(pool, a->q, hp->q_scale, n * qd);
    const attention_shape as = layer_attention(tm, il, B, T);
    ty_attention_forward(g, a->att, a->lse, a->q, a->k, a->v, &as, tm->att_scratch);
    float *o = hp->post_norms ? a->o_raw : tm->dbranch; /* dbranch is free in the forward */
    linear_forward(tm, il, MAT_O, w->wo, o, a->att, NULL, w->bo, n, qd, C);
    if (hp->post_norms) {
        ty_rmsnorm_forward(pool, tm->dbranch, NULL, a->o_raw, w->post_attn_norm, n, C, hp->rms_eps);
        o = tm->dbranch;
    }
    tap(tm, il, TRAIN_TAP_ATTN_OUT, o, n, hp->residual_scale);
    ty_add_scaled(pool, a->x_mid, a->x, o, hp->residual_scale, n * C);

    /* feed-forward */
    norm_forward(tm, tm->h, NULL, NULL, a->x_mid, w->ffn_norm, w->ffn_norm_b, n);
    tap(tm, il, TRAIN_TAP_FFN_NORM, tm->h, n, 1.0f);
    h = shared_input(tm, tm->h, n, C, true, (!hp->ffn_no_gate && w->ffn_gate) + !!w->ffn_up);
    if (!hp->ffn_no_gate) linear_forward(tm, il, MAT_GATE, w->ffn_gate, a->gate, tm->h, h, NULL, n, C, F);
    linear_forward(tm, il, MAT_UP, w->ffn_up, a->up, tm->h, h, w->b_up, n, C, F);
    glu_forward(tm, tm->act, a->gate, a->up, n * F);
    float *f = hp->post_norms ? a->f_raw : tm->dbranch;
    linear_forward(tm, il, MAT_DOWN, w->ffn_down, f, tm->act, NULL, w->b_down, n, F, C);
    if (hp->post_norms) {
        ty_rmsnorm_forward(pool, tm->dbranch, NULL, a->f_raw, w->post_ffn_norm, n, C, hp->rms_eps);
        f = tm->dbranch;
    }
    tap(tm, il, TRAIN_TAP_FFN_OUT, f, n, hp->residual_scale);
    ty_add_scaled(pool, x_next, a->x_mid, f, hp->residual_scale, n * C);
    tap(tm, il, TRAIN_TAP_OUT, x_next, n, 1.0f);
}

/* Output projection and loss over chunks of rows; with backward, each chunk's gradient
 * right away: dres (zeroed first) gets d(final norm input). */
static void head_forward_backward(train_model *tm, const train_batch *b, bool backward, double *total) {
    const ty_hparams *hp = &tm->hp;
    const int64_t n = (int64_t)b->B * b->T, C = hp->n_embd, V = hp->n_vocab;
    ty_pool *pool = tm->pool;
    norm_forward(tm, tm->h, tm->mean, tm->rstd, tm->x_final, tm->w.output_norm, tm->w.output_norm_b, n);
    if (backward) zero(tm->dh, n * C);
    const float s = 1.0f / hp->logit_scale;
    for (int64_t r0 = 0; r0 < n; r0 += tm->head_rows) {
        const int64_t m = n - r0 < tm->head_rows ? n - r0 : tm->head_rows;
        const int out_slot = hp->n_layer * MAT_KINDS;
        if (tm->w.output)
            ty_matmul_forward(tm->gemm, tm->logits, tm->h + r0 * C, tm->w.output,
                              &(ty_matmul_panels){weight_panels(tm, out_slot, true, tm->w.output, C, V), NULL}, NULL,
                              m, C, V);
        else ty_frozen_matmul_forward(tm->gemm, tm->logits, tm->h + r0 * C, tm->frozen_output, NULL, m, tm->panel,
                                   tm->panel_rows);
        ty_lm_loss_forward(pool, tm->logits, tm->row_loss + r0, tm->row_lse + r0, b->targets + r0, m, V,
                        s, hp->final_softcap);
        for (int64_t i = r0; i < r0 + m; i++)
            if (b->targets[i] >= 0) *total += (double)b->weights[i] * tm->row_loss[i];
        if (!backward) continue;
        ty_lm_loss_backward(pool, tm->logits, tm->logits, tm->row_lse + r0, b->targets + r0, b->weights + r0,
                         m, V, s, hp->final_softcap);
        if (tm->w.output)
            ty_matmul_backward(tm->gemm, tm->dh + r0 * C, tm->g.output, NULL, tm->logits, tm->h + r0 * C, tm->w.output,
                               &(ty_matmul_panels){weight_panels(tm, out_slot, false, tm->w.output, C, V), NULL}, m,
                               C, V);
        else ty_frozen_matmul_backward(tm->gemm, tm->dh + r0 * C, tm->logits, tm->frozen_output, m, tm->panel,
                                    tm->panel_rows);
    }
    if (backward) {
        zero(tm->dbranch, n * C); /* becomes d(x_final), the start of the residual gradient */
        norm_backward(tm, tm->dbranch, tm->g.output_norm, tm->g.output_norm_b, tm->dh, tm->x_final,
                      tm->w.output_norm, n);
    }
}

/* ---------------------------------------------------------------- backward */

static void glu_backward(train_model *tm, float *dgate, float *dup, const float *dout,
                         const float *gate, const float *up, int64_t n) {
    if (tm->hp.ffn_no_gate) ty_gelu_backward(tm->pool, dup, dout, up, n);
    else if (tm->hp.ffn_act == TY_ACT_GELU_TANH) ty_geglu_backward(tm->pool, dgate, dup, dout, gate, up, n);
    else ty_swiglu_backward(tm->pool, dgate, dup, dout, gate, up, n);
}

/* d(branch output) = residual_scale * dres into dbranch, through the branch's post-norm
 * (of `raw` with weight w, gradient gw) when there is one: returns the gradient of the
 * raw branch output. */
static const float *branch_grad(train_model *tm, const float *dres, const float *raw, const float *w,
                                float *gw, int64_t n) {
    const ty_hparams *hp = &tm->hp;
    const int64_t C = hp->n_embd;
    for (int64_t i = 0; i < n * C; i++) tm->dbranch[i] = hp->residual_scale * dres[i];
    if (!hp->post_norms) return tm->dbranch;
    ty_rmsnorm_forward(tm->pool, tm->h, tm->rstd, raw, w, n, C, hp->rms_eps); /* for rstd */
    zero(tm->draw, n * C);
    ty_rmsnorm_backward(tm->pool, tm->draw, gw, tm->dbranch, raw, w, tm->rstd, n, C);
    return tm->draw;
}

/* dres holds d(layer output) on entry, d(layer input) on return */
static void layer_backward(train_model *tm, int il, int B, int T, float *dres) {
    const ty_hparams *hp = &tm->hp;
    const train_layer_weights *w = &tm->w.layers[il];
    train_layer_weights *gw = &tm->g.layers[il];
    layer_acts *a = &tm->acts[il];
    ty_pool *pool = tm->pool;
    ty_gemm *g = tm->gemm;
    const int64_t n = (int64_t)B * T, C = hp->n_embd, F = hp->n_ff, hd = hp->head_dim;
    const int64_t qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;

    /* feed-forward: x_next = x_mid + rs * post_norm(act(h W_gate^T) * (h W_up^T) W_down^T) */
    const float *df = branch_grad(tm, dres, a->f_raw, w->post_ffn_norm, gw->post_ffn_norm, n);
    glu_forward(tm, tm->act, a->gate, a->up, n * F);
    zero(tm->dact, n * F);
    linear_backward(tm, il, MAT_DOWN, w->ffn_down, gw->ffn_down, gw->b_down, tm->dact, df, tm->act, NULL, n, F, C);
    zero(tm->dgate, n * F);
    zero(tm->dup, n * F);
    glu_backward(tm, tm->dgate, tm->dup, tm->dact, a->gate, a->up, n * F);
    norm_forward(tm, tm->h, tm->mean, tm->rstd, a->x_mid, w->ffn_norm, w->ffn_norm_b, n);
    zero(tm->dh, n * C);
    const float *h = shared_input(tm, tm->h, n, C, false,
                                  (!hp->ffn_no_gate && w->ffn_gate && gw->ffn_gate) + (w->ffn_up && gw->ffn_up));
    if (!hp->ffn_no_gate)
        linear_backward(tm, il, MAT_GATE, w->ffn_gate, gw->ffn_gate, NULL, tm->dh, tm->dgate, tm->h, h, n, C, F);
    linear_backward(tm, il, MAT_UP, w->ffn_up, gw->ffn_up, gw->b_up, tm->dh, tm->dup, tm->h, h, n, C, F);
    norm_backward(tm, dres, gw->ffn_norm, gw->ffn_norm_b, tm->dh, a->x_mid, w->ffn_norm, n);

    /* attention: x_mid = x + rs * post_norm(attention(q, k, v) W_o^T) */
    const float *dox = branch_grad(tm, dres, a->o_raw, w->post_attn_norm, gw->post_attn_norm, n);
    zero(tm->datt, n * qd);
    linear_backward(tm, il, MAT_O, w->wo, gw->wo, gw->bo, tm->datt, dox, a->att, NULL, n, qd, C);
    zero(tm->dq, n * qd);
    zero(tm->dk, n * kvd);
    zero(tm->dv, n * kvd);
    const attention_shape as = layer_attention(tm, il, B, T);
    ty_attention_backward(g, tm->dq, tm->dk, tm->dv, tm->datt, a->att, a->lse, a->q, a->k, a->v, &as,
                       tm->att_scratch);
    if (hp->q_scale != 1.0f) ty_scale_inplace(pool, tm->dq, hp->q_scale, n * qd);
    if (tm->rope[il].freq_factors && tm->g.rope_factors) {
        /* the rotated q is a->q before its prescale (a->q is not read again) */
        for (int t = 0; t < T; t++) ty_rope_angles(&tm->rope[il], t, tm->theta + (int64_t)t * hp->n_rot / 2);
        if (hp->q_scale != 1.0f) ty_scale_inplace(pool, a->q, 1.0f / hp->q_scale, n * qd);
        ty_rope_freq_backward(tm->g.rope_factors, a->q, tm->dq, n, T, hp->n_head, (int)hd, &tm->rope[il], tm->theta);
        ty_rope_freq_backward(tm->g.rope_factors, a->k, tm->dk, n, T, hp->n_head_kv, (int)hd, &tm->rope[il], tm->theta);
    }
    rope_tables(tm, il, T);
    ty_rope_backward(pool, tm->dq, n, T, hp->n_head, (int)hd, &tm->rope[il], tm->cs);
    ty_rope_backward(pool, tm->dk, n, T, hp->n_head_kv, (int)hd, &tm->rope[il], tm->cs);
    float *dq = tm->dq, *dk = tm->dk;
    if (hp->q_norm_len) {
        const int64_t qw = hp->q_norm_len, kw = hp->k_norm_len, qrows = n * qd / qw, krows = n * kvd / kw;
        zero(tm->dq_raw, n * qd);
        zero(tm->dk_raw, n * kvd);
        ty_rmsnorm_forward(pool, tm->datt, tm->rstd, a->q_raw, w->q_norm, qrows, qw, hp->rms_eps);
        ty_rmsnorm_backward(pool, tm->dq_raw, gw->q_norm, tm->dq, a->q_raw, w->q_norm, tm->rstd, qrows, qw);
        ty_rmsnorm_forward(pool, tm->datt, tm->rstd, a->k_raw, w->k_norm, krows, kw, hp->rms_eps);
        ty_rmsnorm_backward(pool, tm->dk_raw, gw->k_norm, tm->dk, a->k_raw, w->k_norm, tm->rstd, krows, kw);
        dq = tm->dq_raw;
        dk = tm->dk_raw;
    }
    norm_forward(tm, tm->h, tm->mean, tm->rstd, a->x, w->attn_norm, w->attn_norm_b, n);
    zero(tm->dh, n * C);
    h = shared_input(tm, tm->h, n, C, false, (w->wq && gw->wq) + (w->wk && gw->wk) + (w->wv && gw->wv));
    linear_backward(tm, il, MAT_Q, w->wq, gw->wq, gw->bq, tm->dh, dq, tm->h, h, n, C, qd);
    linear_backward(tm, il, MAT_K, w->wk, gw->wk, gw->bk, tm->dh, dk, tm->h, h, n, C, kvd);
    linear_backward(tm, il, MAT_V, w->wv, gw->wv, gw->bv, tm->dh, tm->dv, tm->h, h, n, C, kvd);
    norm_backward(tm, dres, gw->attn_norm, gw->attn_norm_b, tm->dh, a->x, w->attn_norm, n);
}

/* One part of a micro-batch: its loss added to *total (and its gradient to the grads). */
static void part_step(train_model *tm, const train_batch *b, bool backward, double *total) {
    const ty_hparams *hp = &tm->hp;
    const int64_t n = (int64_t)b->B * b->T, C = hp->n_embd;
    if (tm->w.token_embd) ty_embedding_forward(tm->acts[0].x, b->tokens, tm->w.token_embd, n, C, hp->embd_scale);
    else ty_frozen_embedding_forward(tm->acts[0].x, b->tokens, tm->frozen_embd, n, hp->embd_scale);
    if (hp->pos_embd) ty_position_forward(tm->acts[0].x, tm->w.pos_embd, n, b->T, C);
    for (int il = 0; il < hp->n_layer; il++) layer_forward(tm, il, b->B, b->T);
    head_forward_backward(tm, b, backward, total);
    if (!backward) return;
    /* The gradient of the residual stream, layer by layer (the layers use dbranch as
     * scratch), lives in the part's rows of dembd, which the embedding's backward reads
     * after the last part, or where x_final was. */
    float *dres = tm->g.token_embd ? tm->dembd + tm->row0 * C : tm->x_final;
    memcpy(dres, tm->dbranch, (size_t)(n * C) * sizeof *dres);
    for (int il = hp->n_layer - 1; il >= 0; il--) layer_backward(tm, il, b->B, b->T, dres);
    if (tm->g.pos_embd) ty_position_backward(tm->pool, tm->g.pos_embd, dres, n, b->T, C);
}

double ty_train_model_step(train_model *tm, const train_batch *b, bool backward) {
    tm->key = b->key;
    double total = 0;
    /* several parts read the same weights: their BF16 pair panels once (2 bytes an
     * element each way; F32 panels would double the model's memory for a few percent) */
    tm->step++;
    tm->pack_once = b->B > tm->part_B && ty_gemm_runs_pairs(tm->gemm);
    if (tm->pack_once && !tm->panels) tm->panels = calloc(2 * ((size_t)tm->hp.n_layer * MAT_KINDS + 1), sizeof *tm->panels);
    tm->pack_once = tm->pack_once && tm->panels; /* without the table, each product packs */
    for (int s0 = 0; s0 < b->B; s0 += tm->part_B) {
        const int64_t off = (int64_t)s0 * b->T;
        const train_batch part = {b->B - s0 < tm->part_B ? b->B - s0 : tm->part_B, b->T, b->key,
                                  b->tokens + off, b->targets + off, b->weights + off};
        tm->row0 = off;
        part_step(tm, &part, backward, &total);
    }
    if (backward && tm->g.token_embd)
        ty_embedding_backward(tm->g.token_embd, tm->dembd, b->tokens, (int64_t)b->B * b->T, tm->hp.n_embd,
                              tm->hp.embd_scale);
    return total;
}

/* ---------------------------------------------------------------- accessors */

int64_t ty_train_model_n_params(const train_model *tm) { return tm->n_trainable; }
int64_t ty_train_model_n_floats(const train_model *tm) { return tm->n_floats; }
float *ty_train_model_params(train_model *tm) { return tm->params; }
float *ty_train_model_grads(train_model *tm) { return tm->grads; }
void ty_train_model_zero_grads(train_model *tm) { zero(tm->grads, tm->n_floats); }
int ty_train_model_n_tensors(const train_model *tm) { return tm->n_tensors; }
const train_tensor *ty_train_model_tensor(const train_model *tm, int i) { return &tm->tensors[i]; }
const ty_hparams *ty_train_model_hparams(const train_model *tm) { return &tm->hp; }
ty_gemm *ty_train_model_gemm(train_model *tm) { return tm->gemm; }
