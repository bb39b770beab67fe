/* cmd_train.c — `toy train` (a new model, or more training of one) and `toy finetune`
 * (a full fine-tune of a base model): options, the progress display, Ctrl-C, and
 * `toy train --bench`. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "toy.h"
#include "clock.h"

static const char *const train_usage =
    "usage: toy train --data FILE... --out MODEL.gguf [model] [options]\n"
    "       toy train --bench -m MODEL.gguf [--batch B] [--seq T] [--steps N] [--compute T] [--json]\n"
    "\n"
    "Trains a new model from scratch (or, with -m, trains an existing one further) on plain\n"
    "text or .jsonl chat records, and writes it as a GGUF model llama.cpp loads, with\n"
    "MODEL.optim.gguf (the state --resume continues from), MODEL.csv (the loss log) and\n"
    "MODEL.svg (the loss curve) beside it. Ctrl-C writes a checkpoint and stops.\n"
    "\n"
    "model (a new one):\n";

static const char *const finetune_usage =
    "usage: toy finetune -m BASE.gguf --data FILE... --out MODEL.gguf [options]\n"
    "\n"
    "A full fine-tune of BASE (any dense architecture; F32, F16 or BF16 weights, others are\n"
    "trained as their dequantized values) on plain text or .jsonl chat records\n"
    "({\"messages\": [{\"role\": \"user\", \"content\": ...}, ...]}: formatted with the model's\n"
    "chat template, the loss on the assistant's tokens only). Writes MODEL.gguf in the\n"
    "base's type, MODEL.optim.gguf, MODEL.csv and MODEL.svg. Ctrl-C writes a checkpoint.\n"
    "\n"
    "With --lora-rank R it trains LoRA adapters instead: the base stays in its own type\n"
    "(quantized ones included), memory-mapped, and --out is an adapter in llama.cpp's\n"
    "format (toy run --lora, llama-cli --lora).\n"
    "\n"
    "  -m, --model FILE       the base model\n"
    "  --lora-rank R          train rank-R adapters (A Gaussian, B zero: step 0 is the base)\n"
    "  --lora-alpha A         the adapters' scale is A / R (default A = R)\n"
    "  --lora-targets LIST    products to adapt, of q,k,v,o,gate,up,down (default: all)\n"
    "  --lora-dropout P       drop each adapter input with probability P (default 0)\n"
    "  --lora-per-head        one rank-R pair per query head (toy's design's LoRA-Q; needs\n"
    "                         --lora-targets q), written in its per-head format with the\n"
    "                         AdamW moments beside each tensor\n"
    "  --lora-init-scale X    the standard deviation of A's start (default 1 / R; the\n"
    "                         design's is 0.01)\n"
    "  --lora-from FILE       train this adapter further (either format; its rank, targets\n"
    "                         and alpha, and the design's moments where it has them)\n";

static const char *const common_usage =
    "\n"
    "data:\n"
    "  --data FILE...         training files (.jsonl: chat records; anything else: text)\n"
    "  --eval-data FILE...    validation files: loss and perplexity\n"
    "  --eval-every N         evaluate every N steps (default: at the end only)\n"
    "batches and schedule:\n"
    "  --batch B              sequences per micro-batch (default 8)\n"
    "  --seq T                tokens per sequence (default 256)\n"
    "  --grad-accum N         micro-batches per optimizer step (default 1)\n"
    "  --steps N | --epochs N optimizer steps, or passes over the data (default 1 epoch)\n"
    "  --lr X --min-lr X      peak and final learning rate (default 1e-3, 1e-4)\n"
    "  --warmup N             steps of linear warmup (default 100, at most a tenth of the run)\n"
    "  --weight-decay X       AdamW's decoupled decay, not on norms and biases (default 0.1)\n"
    "  --adam-beta1 X --adam-beta2 X --adam-eps X   (default 0.9, 0.95, 1e-8)\n"
    "  --clip X               clip the global gradient norm (default 1.0; 0: off)\n"
    "  --seed S               data order and new weights (default 42)\n"
    "output:\n"
    "  --out FILE             the model to write\n"
    "  --out-type T           F32, F16, BF16, Q8_0, ... (default: the base's; F32 for a new model)\n"
    "  --save-every N         a checkpoint every N steps (default: at the end)\n"
    "  --resume               continue the run that wrote --out\n"
    "  --no-mmap              read the model into memory instead of mapping it\n"
    "  -t, --threads N        threads (default: the CPUs available; the losses are the same)\n"
    "  --compute T            f32 (default), bf16 or f16: the products' operands rounded to T\n"
    "                         (F32 accumulation, F32 master weights and AdamW moments;\n"
    "                         bf16 runs vdpbf16ps where toy --version says so)\n"
    "  -h, --help             this message\n";

static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig) {
    (void)sig;
    stop_requested = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends at once */
}

/* ---------------------------------------------------------------- progress */

typedef struct {
    bool tty;
    double last_print;
    const char *cmd;
} progress_state;

static void fmt_time(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    const long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

static void show_progress(void *user, const toy_train_progress *p) {
    progress_state *ps = user;
    char eta[32], el[32];
    fmt_time(eta, sizeof eta, p->eta_s);
    fmt_time(el, sizeof el, p->elapsed_s);
    if (ps->tty) {
        const int width = 24, fill = (int)((double)width * (double)p->step / (double)p->n_steps);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r\033[K%lld/%lld [%s] loss %.4f lr %.2e %.0f tok/s %s ETA %s", (long long)p->step,
                (long long)p->n_steps, bar, p->loss, p->lr, p->tokens_per_s, el, eta);
        if (p->has_eval || p->saved || p->step == p->n_steps) fputc('\n', stderr);
    }
    const double t = ty_now_s();
    const bool plain = !ps->tty && (t - ps->last_print >= 1.0 || p->step == p->n_steps || p->has_eval || p->saved);
    if (plain) {
        fprintf(stderr, "step %lld/%lld loss %.4f lr %.3e grad_norm %.3f %.0f tok/s elapsed %s eta %s\n",
                (long long)p->step, (long long)p->n_steps, p->loss, p->lr, p->grad_norm, p->tokens_per_s, el, eta);
        ps->last_print = t;
    }
    if (p->has_eval) fprintf(stderr, "  eval loss %.4f, perplexity %.3f\n", p->eval_loss, p->eval_ppl);
    if (p->saved) fprintf(stderr, "  checkpoint written\n");
}

/* ---------------------------------------------------------------- options */

static bool parse_i64_arg(const char *cmd, const char *flag, const char *v, int64_t *out) {
    int x;
    if (!parse_int_arg(cmd, flag, v, 0, 2000000000, &x)) return false;
    *out = x;
    return true;
}

/* --data A B C: the values up to the next option */
static int take_files(int argc, char **argv, int i, const char ***list, int *n) {
    int k = i + 1;
    while (k < argc && argv[k][0] != '-') k++;
    const int count = k - i - 1;
    const char **l = realloc(*list, (size_t)(*n + count + 1) * sizeof *l);
    if (!l) return -1;
    for (int j = 0; j < count; j++) l[*n + j] = argv[i + 1 + j];
    *list = l;
    *n += count;
    return count;
}

static int run_bench(const char *model, int32_t batch, int32_t seq, int steps, int threads, toy_type compute,
                     bool json) {
    /* as --compute spells it, and as bench-train-torch.py's JSON does */
    const char *compute_name = compute == TOY_TYPE_BF16 ? "bf16" : compute == TOY_TYPE_F16 ? "f16" : "f32";
    toy_train_bench_result r = {.size = sizeof r};
    if (toy_train_bench_compute(model, batch, seq, steps, threads, compute, &r)) {
        fprintf(stderr, "toy train --bench: %s\n", toy_last_error());
        return 1;
    }
    if (json) {
        printf("{\"model\": ");
        print_json_string(stdout, model, strlen(model));
        printf(", \"n_params\": %lld, \"batch\": %d, \"seq\": %d, \"threads\": %d, \"isa\": \"%s\", "
               "\"compute\": \"%s\", \"bf16_dot\": \"%s\", \"step_s\": ",
               (long long)r.n_params, batch, seq, r.threads, toy_kernel_isa(), compute_name, toy_kernel_bf16_dot());
        print_json_number(stdout, r.step_s);
        printf(", \"tokens_per_s\": ");
        print_json_number(stdout, r.tokens_per_s);
        printf(", \"peak_gflops\": ");
        print_json_number(stdout, r.peak_gflops);
        printf(", \"utilisation\": ");
        print_json_number(stdout, r.utilisation);
        printf(", \"peak_rss_mb\": ");
        print_json_number(stdout, r.peak_rss_mb);
        printf(", \"loss\": ");
        print_json_number(stdout, r.loss);
        printf("}\n");
        return 0;
    }
    printf("model             %s (%.1f M parameters)\n", model, (double)r.n_params / 1e6);
    printf("threads           %d (kernels: %s)\n", r.threads, toy_kernel_isa());
    if (compute == TOY_TYPE_BF16) printf("compute           BF16 (bf16 dot: %s)\n", toy_kernel_bf16_dot());
    else if (compute == TOY_TYPE_F16) printf("compute           F16 (operands rounded, F32 products)\n");
    printf("tokens/step       %lld (%d x %d)\n", (long long)r.tokens_per_step, batch, seq);
    printf("step              %.3f s (median of %d: forward, backward, AdamW)\n", r.step_s, steps);
    printf("throughput        %.1f tokens/s\n", r.tokens_per_s);
    printf("peak              %.1f GFLOP/s (F32 FMA with %d threads, measured)\n", r.peak_gflops, r.threads);
    printf("utilisation       %.1f %% (6 x parameters x tokens/s / peak)\n", 100.0 * r.utilisation);
    printf("peak RSS          %.0f MB\n", r.peak_rss_mb);
    return 0;
}

/* "q,v" to the bits of train_lora targets (q, k, v, o, gate, up, down). */
static bool parse_lora_targets(const char *cmd, const char *list, uint32_t *out) {
    static const char *const names[] = {"q", "k", "v", "o", "gate", "up", "down"};
    uint32_t bits = 0;
    const char *s = list;
    while (*s) {
        const size_t len = strcspn(s, ",");
        size_t k = 0;
        while (k < 7 && !(strlen(names[k]) == len && !strncmp(names[k], s, len))) k++;
        if (k == 7) {
            fprintf(stderr, "toy %s: --lora-targets: '%.*s' is not one of q, k, v, o, gate, up, down\n", cmd, (int)len, s);
            return false;
        }
        bits |= 1u << k;
        s += len + (s[len] == ',');
    }
    if (!bits) {
        fprintf(stderr, "toy %s: --lora-targets is empty\n", cmd);
        return false;
    }
    *out = bits;
    return true;
}

typedef struct {
    const char *cmd; /* "train" or "finetune" */
    bool bench, json;
    toy_train_params params;
    toy_init_params init; /* the shape of a new model */
    const char **data, **eval;
    int n_data, n_eval;
} train_options;

static int parse_train_options(const char *cmd, bool finetune, int argc, char **argv, train_options *o) {
    *o = (train_options){.cmd = cmd, .params = toy_train_default_params(),
                         .init = toy_init_default_params()};
    toy_train_params *p = &o->params;
    toy_init_params *init = &o->init;
    p->n_threads = default_threads();
    p->init = init;
    init->arch = "llama";
    int rc = 2;
    bool warmup_set = false;
    const char *new_adapter_option = NULL; /* an option that shapes a new adapter */
    const char *out_type = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(finetune ? finetune_usage : train_usage, stdout);
            if (!finetune) fputs(shape_options_help, stdout);
            if (!finetune) fputs("  -m, --model FILE       train this model instead of a new one\n", stdout);
            fputs(common_usage, stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "--data") || !strcmp(a, "--eval-data")) {
            const bool is_eval = !strcmp(a, "--eval-data");
            const int k = take_files(argc, argv, i, is_eval ? &o->eval : &o->data, is_eval ? &o->n_eval : &o->n_data);
            if (k <= 0) {
                fprintf(stderr, "toy %s: %s needs one or more files\n", cmd, a);
                goto done;
            }
            i += k;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) {
            p->model_path = argv[++i];
        } else if (!strcmp(a, "--out") && v) {
            p->out_path = argv[++i];
        } else if (!strcmp(a, "--out-type") && v) {
            out_type = argv[++i];
        } else if (!finetune && (x = parse_shape_option(cmd, argc, argv, &i, init)) != 0) {
            if (x < 0) goto done;
        } else if (!strcmp(a, "--batch") || !strcmp(a, "--seq") || !strcmp(a, "--grad-accum") ||
                   !strcmp(a, "--epochs")) {
            if (!parse_int_arg(cmd, a, v, 1, 1 << 20, &x)) goto done;
            i++;
            if (!strcmp(a, "--batch")) p->batch = x;
            else if (!strcmp(a, "--seq")) p->seq = x;
            else if (!strcmp(a, "--grad-accum")) p->grad_accum = x;
            else p->epochs = x, p->steps = 0;
        } else if (!strcmp(a, "--steps") || !strcmp(a, "--warmup") || !strcmp(a, "--eval-every") ||
                   !strcmp(a, "--save-every")) {
            int64_t y;
            if (!parse_i64_arg(cmd, a, v, &y)) goto done;
            i++;
            if (!strcmp(a, "--steps")) p->steps = y;
            else if (!strcmp(a, "--warmup")) p->warmup = y, warmup_set = true;
            else if (!strcmp(a, "--eval-every")) p->eval_every = y;
            else p->save_every = y;
        } else if (!strcmp(a, "--lr") || !strcmp(a, "--min-lr") || !strcmp(a, "--weight-decay") ||
                   !strcmp(a, "--clip") || !strcmp(a, "--adam-beta1") || !strcmp(a, "--adam-beta2") ||
                   !strcmp(a, "--adam-eps")) {
            float f;
            if (!parse_float_arg(cmd, a, v, &f)) goto done;
            i++;
            float *dst = !strcmp(a, "--lr") ? &p->lr : !strcmp(a, "--min-lr") ? &p->min_lr
                       : !strcmp(a, "--weight-decay") ? &p->weight_decay : !strcmp(a, "--clip") ? &p->clip
                       : !strcmp(a, "--adam-beta1") ? &p->beta1 : !strcmp(a, "--adam-beta2") ? &p->beta2 : &p->eps;
            *dst = f;
        } else if (!strcmp(a, "--seed") && v) {
            char *end;
            p->seed = strtoull(argv[++i], &end, 10);
            if (*end || argv[i][0] == '-') {
                fprintf(stderr, "toy %s: --seed must be a non-negative integer, got '%s'\n", cmd, argv[i]);
                goto done;
            }
            init->seed = p->seed;
        } else if (finetune && !strcmp(a, "--lora-rank")) {
            if (!parse_int_arg(cmd, a, v, 1, 4096, &x)) goto done;
            p->lora_rank = x;
            i++;
        } else if (finetune && (!strcmp(a, "--lora-alpha") || !strcmp(a, "--lora-dropout") ||
                                !strcmp(a, "--lora-init-scale"))) {
            float f;
            if (!parse_float_arg(cmd, a, v, &f)) goto done;
            i++;
            if (!strcmp(a, "--lora-dropout")) p->lora_dropout = f;
            else if (!strcmp(a, "--lora-alpha")) p->lora_alpha = f;
            else p->lora_init_scale = f;
            if (strcmp(a, "--lora-dropout")) new_adapter_option = a;
        } else if (finetune && !strcmp(a, "--lora-targets") && v) {
            if (!parse_lora_targets(cmd, argv[++i], &p->lora_targets)) goto done;
            new_adapter_option = a;
        } else if (finetune && !strcmp(a, "--lora-per-head")) {
            p->lora_per_head = true;
            new_adapter_option = a;
        } else if (finetune && !strcmp(a, "--lora-from") && v) {
            p->lora_from = argv[++i];
        } else if (!strcmp(a, "--compute") && v) {
            const int t = toy_type_from_name(argv[++i]);
            if (t != TOY_TYPE_F32 && t != TOY_TYPE_BF16 && t != TOY_TYPE_F16) {
                fprintf(stderr, "toy %s: --compute must be f32, bf16 or f16, got '%s'\n", cmd, argv[i]);
                goto done;
            }
            p->compute_type = t;
        } else if (!strcmp(a, "--no-mmap")) {
            p->no_mmap = true;
        } else if (!strcmp(a, "--resume")) {
            p->resume = true;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!parse_int_arg(cmd, a, v, 1, 256, &p->n_threads)) goto done;
            i++;
        } else if (!finetune && !strcmp(a, "--bench")) {
            o->bench = true;
        } else if (!finetune && !strcmp(a, "--json")) {
            o->json = true;
        } else {
            rc = unknown_option(cmd, a);
            goto done;
        }
    }
    if (o->bench) {
        if (!p->model_path) {
            fprintf(stderr, "toy train --bench: needs -m MODEL (toy init writes one of any shape)\n");
            goto done;
        }
        return GO_ON;
    }
    if (!p->out_path || o->n_data == 0 || (finetune && !p->model_path)) {
        fprintf(stderr, "toy %s: needs %s--data and --out (see toy %s --help)\n", cmd, finetune ? "-m BASE, " : "",
                cmd);
        goto done;
    }
    if (new_adapter_option && (p->lora_from || !p->lora_rank)) {
        fprintf(stderr, "toy %s: %s %s\n", cmd, new_adapter_option,
                p->lora_from ? "shapes a new adapter; --lora-from's adapter has its own"
                             : "needs --lora-rank R (a LoRA run)");
        goto done;
    }
    if (p->lora_per_head && p->lora_targets != 1u) {
        fprintf(stderr, "toy %s: --lora-per-head adapts the query only: add --lora-targets q\n", cmd);
        goto done;
    }
    if (!p->model_path && !p->resume && !init->vocab_path) {
        fprintf(stderr, "toy %s: a new model needs a tokenizer: --vocab-from FILE.gguf (or -m MODEL)\n", cmd);
        goto done;
    }
    if (out_type) {
        p->out_ftype = toy_ftype_from_name(out_type);
        if (p->out_ftype < 0) {
            fprintf(stderr, "toy %s: unknown --out-type '%s' (see toy quantize --help)\n", cmd, out_type);
            goto done;
        }
    }
    if (!warmup_set && p->steps > 0 && p->warmup > p->steps / 10) p->warmup = p->steps / 10;
    p->data = o->data;
    p->n_data = o->n_data;
    p->eval_data = o->eval;
    p->n_eval_data = o->n_eval;
    return GO_ON;
done:
    free(o->data);
    free(o->eval);
    return rc;
}

/* Trains (Ctrl-C stops with a checkpoint), or measures training steps (--bench). */
static int run_train(train_options *o) {
    toy_train_params *p = &o->params;
    const char *cmd = o->cmd;
    int rc;
    if (o->bench) {
        const bool shape_given = p->batch != toy_train_default_params().batch || p->seq != toy_train_default_params().seq;
        rc = run_bench(p->model_path, shape_given ? p->batch : 8, shape_given ? p->seq : 512,
                       p->steps > 0 ? (int)p->steps : 3, p->n_threads,
                       p->compute_type ? p->compute_type : TOY_TYPE_F32, o->json);
        goto done;
    }
    progress_state ps = {isatty(2), 0, cmd};
    p->progress = show_progress;
    p->progress_user = &ps;
    p->stop = &stop_requested;
    signal(SIGINT, on_sigint);
    toy_train_result r = {.size = sizeof r};
    const toy_status st = toy_train(p, &r);
    signal(SIGINT, SIG_DFL);
    if (st) {
        if (ps.tty) fputc('\n', stderr);
        fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
        fflush(stderr);
        toy_mpi_abort(1);
        rc = 1;
        goto done;
    }
    if (r.rank == 0) {
        fprintf(stderr, "toy %s: %s %s after %lld steps (%.2f M parameters, %lld training tokens): loss %.4f",
                cmd, r.stopped ? "stopped; checkpoint" : "wrote", p->out_path, (long long)r.steps,
                (double)r.n_params / 1e6, (long long)r.n_train_tokens, r.loss);
        if (!isnan(r.eval_loss)) fprintf(stderr, ", eval loss %.4f (perplexity %.3f)", r.eval_loss, exp(r.eval_loss));
        if (r.n_procs > 1) fprintf(stderr, "; %d processes", r.n_procs);
        fprintf(stderr, "\n");
    }
    rc = r.stopped ? 130 : 0;
done:
    free(o->data);
    free(o->eval);
    return rc;
}

static int train_main(const char *cmd, bool finetune, int argc, char **argv) {
    train_options o;
    const int rc = parse_train_options(cmd, finetune, argc, argv, &o);
    return rc == GO_ON ? run_train(&o) : rc;
}

int cmd_train(int argc, char **argv) { return train_main("train", false, argc, argv); }
int cmd_finetune(int argc, char **argv) { return train_main("finetune", true, argc, argv); }
