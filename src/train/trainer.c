/* trainer.c — toy_train: the training loop, and toy_train_bench.
 *
 * A step: grad_accum micro-batches of `batch` windows from the shuffled data, their
 * gradients summed (each token weighted by 1 / the step's scored tokens, so the step
 * minimises the mean loss whatever the accumulation), clipped by the global norm, one
 * AdamW update with the scheduled learning rate. Everything that decides the numbers —
 * the window order (seed, epoch), the sums (fixed orders), the state saved — is the same
 * whatever the threads and whether the run was interrupted and resumed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "buffer.h"
#include "checkpoint.h"
#include "data.h"
#include "error.h"
#include "optimizer.h"
#include "params.h"
#include "plot.h"
#include "dist.h"
#include "train_model.h"
#include "clock.h"

void toy_train_params_init(toy_train_params *params, size_t size) {
    const toy_train_params defaults = {
        .size = sizeof defaults, .batch = 8, .seq = 256, .grad_accum = 1, .epochs = 1, .lr = 1e-3f, .min_lr = 1e-4f,
        .lora_targets = 0x7f, .warmup = 100, .weight_decay = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
        .clip = 1.0f, .seed = 42, .n_threads = 1, .out_ftype = -1,
    };
    ty_params_init(params, size, &defaults, sizeof defaults);
}

/* ---------------------------------------------------------------- output files */

typedef struct {
    char *model, *state, *csv, *svg;
} out_paths;

static toy_status make_paths(const char *out, out_paths *p) {
    const size_t n = strlen(out);
    const size_t stem = n > 5 && !strcmp(out + n - 5, ".gguf") ? n - 5 : n;
    static const char *const suffix[3] = {".optim.gguf", ".csv", ".svg"};
    char **dst[3] = {&p->state, &p->csv, &p->svg};
    p->model = strdup(out);
    for (int i = 0; i < 3; i++) {
        *dst[i] = malloc(stem + strlen(suffix[i]) + 1);
        if (*dst[i]) snprintf(*dst[i], stem + strlen(suffix[i]) + 1, "%.*s%s", (int)stem, out, suffix[i]);
    }
    if (!p->model || !p->state || !p->csv || !p->svg) return ty_error(TOY_ERR_NOMEM, "no memory");
    return TOY_OK;
}

static void free_paths(out_paths *p) {
    free(p->model);
    free(p->state);
    free(p->csv);
    free(p->svg);
}

/* The loss log: one row per step, the evaluation where there was one. */
static toy_status write_csv(const char *path, const train_history *h, int64_t tokens_per_step) {
    ty_buf b = {0};
    const char *head = "step,tokens,lr,loss,grad_norm,eval_loss,eval_ppl\n";
    ty_buf_append(&b, head, strlen(head));
    int64_t e = 0;
    char line[256];
    for (int64_t i = 0; i < h->n; i++) {
        int len = snprintf(line, sizeof line, "%lld,%lld,%.6g,%.6f,%.6g,", (long long)(i + 1),
                           (long long)((i + 1) * tokens_per_step), h->lr[i], h->loss[i], h->grad_norm[i]);
        while (e < h->n_eval && h->eval_step[e] < i + 1) e++;
        if (e < h->n_eval && h->eval_step[e] == i + 1)
            len += snprintf(line + len, sizeof line - (size_t)len, "%.6f,%.6g\n", h->eval_loss[e],
                            exp(h->eval_loss[e]));
        else
            len += snprintf(line + len, sizeof line - (size_t)len, ",\n");
        ty_buf_append(&b, line, (size_t)len);
    }
    toy_status st = b.oom ? ty_error(TOY_ERR_NOMEM, "no memory") : ty_write_file_atomic(path, b.v, b.n);
    free(b.v);
    return st;
}

static toy_status write_svg(const char *path, const char *title, const train_history *h) {
    size_t len;
    char *svg = ty_loss_curve_svg(title, h->loss, h->n, h->eval_step, h->eval_loss, h->n_eval, &len);
    if (!svg) return ty_error(TOY_ERR_NOMEM, "no memory");
    toy_status st = ty_write_file_atomic(path, svg, len);
    free(svg);
    return st;
}

/* ---------------------------------------------------------------- the run */

typedef struct {
    const toy_train_params *p;
    out_paths out;
    ty_pool *pool;
    train_dist dist; /* this process among those of mpirun (rank 0 of 1 alone) */
    toy_model *model;  /* the source of metadata and tokenizer */
    train_model *tm;
    float *m, *v;      /* AdamW moments */
    train_stream data, eval;
    int64_t n_windows, steps_per_epoch, n_steps, *order;
    int ftype;
    adamw_params ap;
    train_state st;
    train_history hist;
    int32_t *tokens, *targets;
    float *weights;
} run;

static void run_free(run *r) {
    free_paths(&r->out);
    ty_train_model_free(r->tm);
    toy_model_free(r->model);
    ty_pool_free(r->pool);
    free(r->m);
    free(r->v);
    ty_train_stream_free(&r->data);
    ty_train_stream_free(&r->eval);
    free(r->order);
    ty_history_free(&r->hist);
    free(r->tokens);
    free(r->targets);
    free(r->weights);
}

static bool file_exists(const char *path) { return access(path, F_OK) == 0; }

/* A model file, mapped or (no_mmap) read into memory. */
static toy_status load_model(const toy_train_params *p, const char *path, toy_model **out) {
    toy_model_params mp = toy_model_default_params();
    mp.use_mmap = !p->no_mmap;
    return toy_model_load_with(path, &mp, out);
}

/* The model to train: the checkpoint to resume, the base, or a new one written by toy
 * init to a file that is removed once mapped. */
static toy_status open_model(run *r) {
    const toy_train_params *p = r->p;
    if (p->resume) {
        if (!file_exists(r->out.model) || !file_exists(r->out.state))
            return ty_error(TOY_ERR_NOT_FOUND, "--resume: %s and %s are needed, from an earlier run",
                            r->out.model, r->out.state);
        /* LoRA: the adapters come back from the state's master copy; the base is the base */
        if (!p->lora_rank && !p->lora_from) return load_model(p, r->out.model, &r->model);
    }
    if ((p->lora_rank || p->lora_from) && !p->model_path) return ty_error(TOY_ERR_INVALID, "LoRA needs a base model");
    if (p->model_path) return load_model(p, p->model_path, &r->model);
    const size_t n = strlen(r->out.model) + 32;
    char *tmp = malloc(n);
    if (!tmp) return ty_error(TOY_ERR_NOMEM, "no memory");
    /* every process of mpirun makes the same model from the same seed, each its own file */
    if (r->dist.size > 1) snprintf(tmp, n, "%s.init.%d.gguf", r->out.model, r->dist.rank);
    else snprintf(tmp, n, "%s.init.gguf", r->out.model);
    toy_init_params ip = toy_init_default_params();
    if (p->init && ty_params_read(&ip, sizeof ip, p->init, "toy_train_params.init")) {
        free(tmp);
        return TOY_ERR_INVALID;
    }
    ip.ftype = TOY_FTYPE_ALL_F32;
    ip.n_threads = p->n_threads;
    toy_status st = toy_init_model(&ip, tmp);
    if (!st) st = load_model(p, tmp, &r->model);
    remove(tmp); /* the mapping stays valid */
    free(tmp);
    return st;
}

static int model_ftype(const toy_model *m) {
    uint64_t ft;
    if (toy_gguf_get_u64(toy_model_gguf(m), "general.file_type", &ft) == TOY_OK && toy_ftype_name((int)ft))
        return (int)ft;
    return TOY_FTYPE_ALL_F32;
}

/* The products' operand types training has (0: the default, F32). */
static toy_status check_compute_type(toy_type t) {
    if (t && t != TOY_TYPE_F32 && t != TOY_TYPE_BF16 && t != TOY_TYPE_F16)
        return ty_error(TOY_ERR_INVALID, "compute type %s: f32, bf16 or f16", toy_type_name(t));
    return TOY_OK;
}

static toy_status check_params(const toy_train_params *p) {
    if (!p->out_path) return ty_error(TOY_ERR_INVALID, "no output model path");
    if (p->n_data < 1) return ty_error(TOY_ERR_INVALID, "no training data");
    if (p->batch < 1 || p->seq < 2 || p->grad_accum < 1)
        return ty_error(TOY_ERR_INVALID, "batch %d, seq %d, grad_accum %d: each must be at least 1 (seq 2)",
                        p->batch, p->seq, p->grad_accum);
    if (p->steps < 0 || (p->steps == 0 && p->epochs < 1))
        return ty_error(TOY_ERR_INVALID, "nothing to train: steps %lld, epochs %d", (long long)p->steps, p->epochs);
    if (!(p->lr > 0) || !(p->min_lr >= 0) || p->min_lr > p->lr)
        return ty_error(TOY_ERR_INVALID, "learning rates: lr %g must be > 0 and min_lr %g in 0..lr", p->lr, p->min_lr);
    if (!(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1) || !(p->eps > 0))
        return ty_error(TOY_ERR_INVALID, "AdamW: betas must be in [0, 1) and eps > 0");
    if (!(p->weight_decay >= 0) || !(p->clip >= 0) || p->warmup < 0)
        return ty_error(TOY_ERR_INVALID, "weight decay, clip and warmup must be >= 0");
    if ((p->lora_per_head || p->lora_init_scale != 0) && (!p->lora_rank || p->lora_from))
        return ty_error(TOY_ERR_INVALID, "a per-head LoRA and an init scale make a new adapter: they need lora_rank, "
                                         "and not lora_from (whose adapter has its own)");
    if (p->out_ftype != -1 && !toy_ftype_name(p->out_ftype))
        return ty_error(TOY_ERR_INVALID, "unknown output type %d", p->out_ftype);
    return check_compute_type(p->compute_type);
}

static toy_status setup(run *r) {
    const toy_train_params *p = r->p;
    toy_status st = make_paths(p->out_path, &r->out);
    if (st) return st;
    if ((st = ty_train_dist_init(&r->dist))) return st;
    if (p->grad_accum % r->dist.size)
        return ty_error(TOY_ERR_INVALID,
                        "%d processes share each step's %d micro-batches (--grad-accum): make it a multiple of %d",
                        r->dist.size, p->grad_accum, r->dist.size);
    r->pool = ty_pool_new(p->n_threads > 0 ? p->n_threads : 1);
    if (!r->pool) return ty_error(TOY_ERR_NOMEM, "cannot start %d threads", p->n_threads);
    if ((st = open_model(r))) return st;
    r->ftype = p->out_ftype >= 0 ? p->out_ftype : p->model_path ? model_ftype(r->model) : TOY_FTYPE_ALL_F32;
    if (p->lora_from) {
        train_lora_params lp;
        if ((st = ty_checkpoint_adapter_params(r->model, p->lora_from, &lp))) return st;
        if (p->lora_rank && p->lora_rank != lp.rank)
            return ty_error(TOY_ERR_INVALID, "%s: an adapter of rank %d, and the run asks for rank %d", p->lora_from,
                            lp.rank, p->lora_rank);
        lp.dropout = p->lora_dropout;
        lp.seed = p->seed;
        if ((st = ty_train_model_new_lora(r->model, p->seq, r->pool, &lp, &r->tm))) return st;
    } else if (p->lora_rank) {
        const train_lora_params lp = {p->lora_rank, p->lora_alpha > 0 ? p->lora_alpha : (float)p->lora_rank,
                                      p->lora_targets, p->lora_dropout, p->seed, p->lora_per_head,
                                      p->lora_init_scale};
        if ((st = ty_train_model_new_lora(r->model, p->seq, r->pool, &lp, &r->tm))) return st;
    } else if ((st = ty_train_model_new(r->model, p->seq, r->pool, &r->tm))) {
        return st;
    }
    ty_gemm_set_operand_type(ty_train_model_gemm(r->tm), p->compute_type ? p->compute_type : TOY_TYPE_F32);
    if ((st = ty_train_model_reserve(r->tm, p->batch, p->seq))) return st;

    const toy_vocab *vocab = toy_model_vocab(r->model);
    const char *family;
    toy_chat_template_of(toy_model_gguf(r->model), &family); /* ChatML when none is recognised */
    if ((st = ty_train_stream_load(&r->data, vocab, family, p->data, p->n_data))) return st;
    if ((st = ty_train_stream_load(&r->eval, vocab, family, p->eval_data, p->n_eval_data))) return st;
    r->n_windows = ty_train_stream_n_windows(&r->data, p->seq);
    const int64_t per_step = (int64_t)p->batch * p->grad_accum;
    r->steps_per_epoch = r->n_windows / per_step;
    if (r->steps_per_epoch == 0)
        return ty_error(TOY_ERR_INVALID,
                        "%s%s: the training data holds %lld tokens: %lld windows of %d + 1, and a step needs "
                        "batch %d x grad_accum %d = %lld",
                        p->data[0], p->n_data > 1 ? " and the other training files" : "", (long long)r->data.n,
                        (long long)r->n_windows, p->seq, p->batch, p->grad_accum, (long long)per_step);
    if (p->n_eval_data > 0 && ty_train_stream_n_windows(&r->eval, p->seq) == 0)
        return ty_error(TOY_ERR_INVALID, "%s%s: the evaluation data holds %lld tokens, less than one window of %d + 1",
                        p->eval_data[0], p->n_eval_data > 1 ? " and the other evaluation files" : "",
                        (long long)r->eval.n, p->seq);
    r->n_steps = p->steps > 0 ? p->steps : (int64_t)p->epochs * r->steps_per_epoch;
    r->ap = (adamw_params){p->lr, p->min_lr, p->warmup, r->n_steps, p->beta1, p->beta2, p->eps,
                           p->weight_decay, p->clip};

    const int64_t nf = ty_train_model_n_floats(r->tm);
    r->m = calloc((size_t)nf, sizeof *r->m);
    r->v = calloc((size_t)nf, sizeof *r->v);
    r->order = malloc((size_t)r->n_windows * sizeof *r->order);
    const size_t rows = (size_t)p->batch * (size_t)p->seq;
    r->tokens = malloc(rows * sizeof *r->tokens);
    r->targets = malloc(rows * sizeof *r->targets);
    r->weights = malloc(rows * sizeof *r->weights);
    if (!r->m || !r->v || !r->order || !r->tokens || !r->targets || !r->weights)
        return ty_error(TOY_ERR_NOMEM, "no memory for the optimizer state");
    r->st = (train_state){.seed = p->seed, .batch = p->batch, .seq = p->seq, .grad_accum = p->grad_accum,
                          .n_windows = r->n_windows};
    if (p->lora_from && !p->resume &&
        (st = ty_checkpoint_read_adapter(p->lora_from, r->tm, r->m, r->v, false, &r->st.adam_step0)))
        return st;
    if (p->resume) {
        train_state saved;
        if ((st = ty_checkpoint_read_state(r->out.state, r->tm, r->m, r->v, &saved, &r->hist))) return st;
        if (saved.seed != p->seed || saved.batch != p->batch || saved.seq != p->seq ||
            saved.grad_accum != p->grad_accum || saved.n_windows != r->n_windows)
            return ty_error(TOY_ERR_INVALID,
                            "%s: saved with seed %llu, batch %d, seq %d, grad_accum %d and %lld windows of "
                            "data; this run has %llu, %d, %d, %d and %lld: resume with the same data and options",
                            r->out.state, (unsigned long long)saved.seed, saved.batch, saved.seq,
                            saved.grad_accum, (long long)saved.n_windows, (unsigned long long)p->seed,
                            p->batch, p->seq, p->grad_accum, (long long)r->n_windows);
        r->st = saved;
    }
    ty_train_window_order(r->order, r->n_windows, p->seed, r->st.epoch);
    return TOY_OK;
}

/* The mean loss over every window of the evaluation data, in order. */
static double evaluate(run *r) {
    const toy_train_params *p = r->p;
    const int64_t nw = ty_train_stream_n_windows(&r->eval, p->seq);
    double sum = 0;
    int64_t scored = 0;
    for (int64_t w0 = 0; w0 < nw; w0 += p->batch) {
        const int b = (int)(nw - w0 < p->batch ? nw - w0 : p->batch);
        for (int i = 0; i < b; i++)
            scored += ty_train_stream_window(&r->eval, w0 + i, p->seq, r->tokens + (size_t)i * p->seq,
                                          r->targets + (size_t)i * p->seq);
        for (int i = 0; i < b * p->seq; i++) r->weights[i] = 1.0f;
        const train_batch batch = {b, p->seq, 0, r->tokens, r->targets, r->weights};
        sum += ty_train_model_step(r->tm, &batch, false);
    }
    return scored ? sum / (double)scored : NAN;
}

static toy_status save(run *r) {
    const bool lora = ty_train_model_lora(r->tm) != NULL;
    const bool master = lora || r->ftype != TOY_FTYPE_ALL_F32;
    toy_status st = lora ? ty_checkpoint_write_adapter(r->tm, toy_model_gguf(r->model), r->m, r->v,
                                                       r->st.adam_step0 + r->st.step, r->out.model)
                         : ty_checkpoint_write_model(r->tm, toy_model_gguf(r->model), r->ftype, r->p->n_threads,
                                                  r->out.model);
    if (!st) st = ty_checkpoint_write_state(r->out.state, r->tm, r->m, r->v, master, &r->st, &r->hist);
    const int64_t per_step = (int64_t)r->p->batch * r->p->grad_accum * r->p->seq;
    if (!st) st = write_csv(r->out.csv, &r->hist, per_step);
    if (!st) {
        const char *slash = strrchr(r->out.model, '/');
        char title[256];
        snprintf(title, sizeof title, "%s: training and validation loss", slash ? slash + 1 : r->out.model);
        st = write_svg(r->out.svg, title, &r->hist);
    }
    return st;
}

/* One optimizer step; false if *stop interrupted it (nothing was changed then). */
static bool train_step(run *r, double *loss_out, double *gnorm_out, float *lr_out, int64_t *scored_out) {
    const toy_train_params *p = r->p;
    train_model *tm = r->tm;
    const int64_t per_step = (int64_t)p->batch * p->grad_accum;
    if (r->st.position + per_step > r->n_windows) { /* the next epoch */
        r->st.epoch++;
        r->st.position = 0;
        ty_train_window_order(r->order, r->n_windows, p->seed, r->st.epoch);
    }
    const int64_t *windows = r->order + r->st.position;
    /* the step's scored tokens, so that every token weighs the same */
    int64_t scored = 0;
    for (int64_t i = 0; i < per_step; i++) {
        const int64_t w = windows[i] * p->seq;
        for (int t = 1; t <= p->seq; t++) scored += r->data.scored[w + t];
    }
    ty_train_model_zero_grads(tm);
    double loss = 0;
    const float weight = scored ? 1.0f / (float)scored : 0.0f;
    /* this process's share of the micro-batches: a contiguous run of them */
    const int a0 = r->dist.rank * p->grad_accum / r->dist.size, a1 = (r->dist.rank + 1) * p->grad_accum / r->dist.size;
    for (int a = a0; a < a1; a++) {
        if (r->dist.size == 1 && p->stop && *p->stop) return false; /* (several: at step boundaries) */
        for (int i = 0; i < p->batch; i++)
            ty_train_stream_window(&r->data, windows[a * p->batch + i], p->seq, r->tokens + (size_t)i * p->seq,
                                r->targets + (size_t)i * p->seq);
        for (int i = 0; i < p->batch * p->seq; i++) r->weights[i] = weight;
        const train_batch b = {p->batch, p->seq, (uint64_t)(r->st.step * p->grad_accum + a), r->tokens, r->targets,
                               r->weights};
        loss += ty_train_model_step(tm, &b, true);
    }
    /* every process gets the same sums, in rank order */
    if (ty_train_dist_sum_floats(&r->dist, ty_train_model_grads(tm), ty_train_model_n_floats(tm)) ||
        ty_train_dist_sum_double(&r->dist, &loss))
        return false;
    const float lr = ty_adamw_lr(&r->ap, r->st.step);
    const double gnorm = ty_adamw_step(r->pool, tm, r->m, r->v, &r->ap, lr, r->st.adam_step0 + r->st.step + 1);
    r->st.step++;
    r->st.position += per_step;
    r->st.tokens += scored;
    *loss_out = loss;
    *gnorm_out = gnorm;
    *lr_out = lr;
    *scored_out = scored;
    return true;
}

toy_status toy_train(const toy_train_params *caller_params, toy_train_result *result) {
    toy_train_params full = toy_train_default_params();
    if (!caller_params) return ty_error(TOY_ERR_INVALID, "toy_train: no parameters");
    if (ty_params_read(&full, sizeof full, caller_params, "toy_train_params")) return TOY_ERR_INVALID;
    const toy_train_params *p = &full;
    toy_status st = ty_result_check(result, "toy_train_result");
    if (!st) st = toy_kernel_init();
    if (!st) st = check_params(p);
    if (st) return st;
    run r = {.p = p};
    if ((st = setup(&r))) {
        run_free(&r);
        return st;
    }
    toy_train_result res = {.size = sizeof res, .n_params = ty_train_model_n_params(r.tm), .n_train_tokens = r.data.n_scored,
                            .n_eval_tokens = r.eval.n_scored, .eval_loss = NAN};
    const double t_start = ty_now_s(), seconds_before = r.st.seconds;
    const int64_t step0 = r.st.step;
    res.rank = r.dist.rank;
    res.n_procs = r.dist.size;
    const bool main_rank = r.dist.rank == 0;
    while (!st && r.st.step < r.n_steps) {
        double stop = p->stop && *p->stop; /* all stop together, if any was told to */
        if (r.dist.size > 1 && (st = ty_train_dist_sum_double(&r.dist, &stop))) break;
        if (stop > 0) {
            res.stopped = true;
            break;
        }
        const double t0 = ty_now_s();
        double loss, gnorm;
        float lr;
        int64_t scored;
        if (!train_step(&r, &loss, &gnorm, &lr, &scored)) {
            res.stopped = true;
            break;
        }
        const double dt = ty_now_s() - t0;
        r.st.seconds = seconds_before + (ty_now_s() - t_start);
        if ((st = ty_history_add(&r.hist, (float)loss, lr, (float)gnorm))) break;
        toy_train_progress pr = {.step = r.st.step, .n_steps = r.n_steps, .epoch = r.st.epoch, .loss = loss,
                                 .lr = lr, .grad_norm = gnorm,
                                 .tokens_per_s = (double)p->batch * p->grad_accum * p->seq / dt};
        pr.elapsed_s = r.st.seconds;
        const double per = (ty_now_s() - t_start) / (double)(r.st.step - step0);
        pr.eta_s = per * (double)(r.n_steps - r.st.step);
        res.loss = loss;
        const bool last = r.st.step == r.n_steps;
        if (p->n_eval_data > 0 && (last || (p->eval_every > 0 && r.st.step % p->eval_every == 0))) {
            pr.has_eval = true;
            pr.eval_loss = evaluate(&r);
            pr.eval_ppl = exp(pr.eval_loss);
            res.eval_loss = pr.eval_loss;
            if ((st = ty_history_add_eval(&r.hist, r.st.step, (float)pr.eval_loss))) break;
        }
        if (!last && p->save_every > 0 && r.st.step % p->save_every == 0) {
            if (main_rank && (st = save(&r))) break;
            pr.saved = true;
        }
        if (p->progress && main_rank) p->progress(p->progress_user, &pr);
    }
    /* at the end, and when stopped: a run always leaves a checkpoint (rank 0 writes) */
    if (!st && main_rank) st = save(&r);
    res.steps = r.st.step;
    if (result && !st) st = ty_result_write(result, &res, sizeof res, "toy_train_result");
    run_free(&r);
    return st;
}

/* ---------------------------------------------------------------- bench */

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

toy_status toy_train_bench(const char *model_path, int32_t batch, int32_t seq, int steps, int n_threads,
                           toy_train_bench_result *out) {
    return toy_train_bench_compute(model_path, batch, seq, steps, n_threads, TOY_TYPE_F32, out);
}

toy_status toy_train_bench_compute(const char *model_path, int32_t batch, int32_t seq, int steps, int n_threads,
                                   toy_type compute_type, toy_train_bench_result *out) {
    if (batch < 1 || seq < 2 || steps < 1)
        return ty_error(TOY_ERR_INVALID, "bench: batch %d, seq %d, steps %d", batch, seq, steps);
    const toy_status bad = check_compute_type(compute_type);
    if (bad) return bad;
    if (!out) return ty_error(TOY_ERR_INVALID, "toy_train_bench: no result");
    if (ty_result_check(out, "toy_train_bench_result") || toy_kernel_init()) return TOY_ERR_INVALID;
    toy_model *m;
    toy_status st = toy_model_load(model_path, &m);
    if (st) return st;
    ty_pool *pool = ty_pool_new(n_threads);
    train_model *tm = NULL;
    const size_t rows = (size_t)batch * (size_t)seq;
    int32_t *tok = malloc(rows * sizeof *tok), *tgt = malloc(rows * sizeof *tgt);
    float *w = malloc(rows * sizeof *w);
    float *mom = NULL, *var = NULL;
    double *times = calloc((size_t)steps, sizeof *times);
    if (!pool || !tok || !tgt || !w || !times) st = ty_error(TOY_ERR_NOMEM, "no memory");
    if (!st) st = ty_train_model_new(m, seq, pool, &tm);
    if (!st) ty_gemm_set_operand_type(ty_train_model_gemm(tm), compute_type);
    if (!st) st = ty_train_model_reserve(tm, batch, seq);
    if (!st) {
        mom = calloc((size_t)ty_train_model_n_floats(tm), sizeof *mom);
        var = calloc((size_t)ty_train_model_n_floats(tm), sizeof *var);
        if (!mom || !var) st = ty_error(TOY_ERR_NOMEM, "no memory for the optimizer state");
    }
    if (!st) {
        uint64_t x = 12345;
        const int32_t n_vocab = toy_model_n_vocab(m);
        for (size_t i = 0; i < rows; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            tok[i] = (int32_t)((x >> 33) % (uint64_t)n_vocab);
        }
        for (size_t i = 0; i < rows; i++) {
            tgt[i] = (i + 1) % (size_t)seq ? tok[i + 1] : tok[i - (size_t)seq + 1];
            w[i] = 1.0f / (float)rows;
        }
        const adamw_params ap = {1e-4f, 1e-5f, 0, 100, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
        const train_batch b = {batch, seq, 0, tok, tgt, w};
        double loss = 0;
        for (int s = -1; s < steps; s++) { /* step -1 warms up */
            const double t0 = ty_now_s();
            ty_train_model_zero_grads(tm);
            loss = ty_train_model_step(tm, &b, true);
            ty_adamw_step(pool, tm, mom, var, &ap, ap.lr, s + 2);
            if (s >= 0) times[s] = ty_now_s() - t0;
        }
        qsort(times, (size_t)steps, sizeof *times, cmp_double);
        const double step_s = steps % 2 ? times[steps / 2] : 0.5 * (times[steps / 2 - 1] + times[steps / 2]);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        toy_train_bench_result r = {.size = sizeof r, .step_s = step_s, .tokens_per_s = (double)rows / step_s,
                                    .n_params = ty_train_model_n_params(tm), .tokens_per_step = (int64_t)rows,
                                    .threads = n_threads, .peak_rss_mb = (double)ru.ru_maxrss / 1024.0,
                                    .loss = loss};
        r.peak_gflops = toy_cpu_peak_gflops(n_threads);
        r.utilisation = 6.0 * (double)r.n_params * r.tokens_per_s / (r.peak_gflops * 1e9);
        st = ty_result_write(out, &r, sizeof r, "toy_train_bench_result");
    }
    free(times);
    free(mom);
    free(var);
    free(tok);
    free(tgt);
    free(w);
    ty_train_model_free(tm);
    ty_pool_free(pool);
    toy_model_free(m);
    return st;
}
