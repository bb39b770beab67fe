/* cmd_bench.c — `toy bench`: prompt-processing and generation speed, and how close
 * generation comes to the memory-bandwidth roofline.
 *
 * Decode reads every weight once per token, so its ceiling is bandwidth / bytes per
 * token. The bandwidth is measured around each run, on this machine, with the same
 * number of threads (toy_bandwidth_probe_measure). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "clock.h"
#include "commands.h"
#include "toy.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---------------------------------------------------------------- bandwidth */

/* The size in bytes of the largest data cache of CPU 0 and its level (Linux sysfs), 0 if
 * unknown. Decode from weights that fit in it measures the cache, not memory. */
static uint64_t last_level_cache(int *level) {
    uint64_t best = 0;
    *level = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], type[32] = "", size[32] = "";
        int lv = 0;
        FILE *f;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!(f = fopen(path, "r"))) break;
        if (fscanf(f, "%d", &lv) != 1) lv = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%31s", type) != 1) type[0] = 0;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%31s", size) != 1) size[0] = 0;
            fclose(f);
        }
        char *end;
        uint64_t bytes = strtoull(size, &end, 10);
        if (*end == 'K') bytes <<= 10;
        else if (*end == 'M') bytes <<= 20;
        if (strcmp(type, "Instruction") && lv >= *level && bytes) {
            *level = lv;
            best = bytes;
        }
    }
    return best;
}

/* ---------------------------------------------------------------- the model */

static bool run_tokens(toy_context *ctx, int32_t n, int32_t pos0, int32_t n_vocab, uint64_t *rng,
                       int32_t batch) {
    int32_t tok[512], pos[512], seq[512] = {0};
    for (int32_t i = 0; i < n; i += batch) {
        int32_t k = n - i < batch ? n - i : batch;
        for (int32_t j = 0; j < k; j++) {
            *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
            tok[j] = (int32_t)((*rng >> 33) % (uint64_t)n_vocab);
            pos[j] = pos0 + i + j;
        }
        toy_batch b = {k, tok, pos, seq, NULL};
        if (toy_decode(ctx, &b)) return false;
    }
    return true;
}

typedef struct {
    model_options model;
    int n_prompt, n_gen, reps;
    bool json, mlock;
    int cache_k, cache_v;
    trace_options trace;
} bench_options;

static int parse_bench_options(int argc, char **argv, bench_options *o) {
    *o = (bench_options){.model = {.n_threads = default_threads()}, .n_prompt = 512, .n_gen = 128, .reps = 5,
                         .cache_k = TOY_TYPE_F32, .cache_v = TOY_TYPE_F32, .trace = TRACE_OPTIONS_INIT};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: toy bench -m MODEL [-p 512] [-n 128] [-t N] [-r REPS] [--json] [--mlock]\n"
                   "\n"
                   "Measures prompt processing (a batch of -p tokens) and generation (-n tokens one\n"
                   "at a time), with random tokens, -r times each, and prints the medians with the\n"
                   "weight bytes read per generated token, this machine's measured read bandwidth\n"
                   "with the same threads, and the fraction of that roofline decode reaches; first,\n"
                   "the time toy_model_pack takes to repack the weights for this CPU (none with\n"
                   "TOY_REPACK=0).\n"
                   "\n"
                   "  -m, --model FILE   the GGUF model\n"
                   "  -p N               prompt tokens (default 512; 0 skips)\n"
                   "  -n N               generated tokens (default 128; 0 skips)\n"
                   "  -t, --threads N    threads (default: the CPUs available)\n"
                   "  --no-mmap          read the model into memory instead of mapping it\n"
                   "  --split A,B,...    under mpirun -np N: the layers of each of the N pipeline stages\n"
                   "                     (default: balanced by bytes; docs/pipeline.md)\n"
                   "  -r, --reps N       repetitions (default 5)\n"
                   "  --json             one JSON object\n"
                   "  --mlock            lock the weights in RAM first\n"
                   "  --cache-type-k T   KV cache types: f32 (default), f16, bf16, q8_0\n"
                   "  --cache-type-v T\n"
                   "  -h, --help         this message\n"
                   "\n"
                   "Tracing is off unless asked for; with --trace the runs measure its cost (send it\n"
                   "to --trace-file: a prompt's taps are large):\n");
            fputs(trace_options_help, stdout);
            return 0;
        } else if ((r = parse_model_option("bench", argc, argv, &i, &o->model)) ||
                   (r = trace_parse_option("bench", argc, argv, &i, &o->trace))) {
            if (r < 0) return 2;
        } else if (!strcmp(a, "-p") || !strcmp(a, "-n")) {
            if (!parse_int_arg("bench", a, v, 0, 1 << 16, a[1] == 'p' ? &o->n_prompt : &o->n_gen)) return 2;
            i++;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--reps")) {
            if (!parse_int_arg("bench", a, v, 1, 1000, &o->reps)) return 2;
            i++;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--mlock")) {
            o->mlock = true;
        } else if (!strcmp(a, "--cache-type-k") || !strcmp(a, "--cache-type-v")) {
            if (!parse_cache_type("bench", a, v, a[13] == 'k' ? &o->cache_k : &o->cache_v)) return 2;
            i++;
        } else {
            return unknown_option("bench", a);
        }
    }
    if (!o->model.path) {
        fprintf(stderr, "toy bench: no model given (-m MODEL)\n");
        return 2;
    }
    return GO_ON;
}

static int run_bench(bench_options *o) {
    const int n_prompt = o->n_prompt, n_gen = o->n_gen, n_threads = o->model.n_threads, reps = o->reps;
    toy_model *m;
    if (!load_model("bench", o->model.path, o->model.no_mmap, &m)) return 1;
    if (!trace_options_begin("bench", &o->trace, m)) {
        toy_model_free(m);
        return 1;
    }
    if (o->mlock && toy_model_mlock(m)) fprintf(stderr, "toy bench: %s\n", toy_last_error());
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = n_prompt + n_gen + 2;
    cp.n_batch = n_prompt > 0 && n_prompt < 512 ? n_prompt : 512;
    cp.n_threads = n_threads;
    cp.cache_type_k = o->cache_k;
    cp.cache_type_v = o->cache_v;
    trace_options_apply(&o->trace, &cp);
    toy_context *ctx;
    if (toy_context_new(m, &cp, &ctx)) {
        fprintf(stderr, "toy bench: %s\n", toy_last_error());
        trace_options_end(&o->trace);
        toy_model_free(m);
        return 1;
    }
    const int32_t n_vocab = toy_model_n_vocab(m);
    uint64_t rng = 1;
    double *pp = calloc((size_t)reps, sizeof *pp), *tg = calloc((size_t)reps, sizeof *tg);
    double *bws = calloc((size_t)reps, sizeof *bws), *roofs = calloc((size_t)reps, sizeof *roofs);
    int rc = 0;
    /* the repacking on its own, then one warm-up pass of each, so that the page faults
     * of the mapping are not measured either */
    const double pack_t0 = ty_now_s();
    if (toy_model_pack(m, n_threads)) rc = 1;
    const double pack_s = ty_now_s() - pack_t0;
    if (!rc) run_tokens(ctx, n_prompt ? n_prompt : 1, 0, n_vocab, &rng, cp.n_batch);
    if (!rc) run_tokens(ctx, 1, n_prompt ? n_prompt : 1, n_vocab, &rng, 1);
    toy_kv_seq_rm(ctx, 0, 0, -1);
    const uint64_t bytes = toy_model_weight_bytes_per_token(m);
    struct rusage ru; /* the model's peak, before the bandwidth probe adds to it */
    getrusage(RUSAGE_SELF, &ru);
    toy_bandwidth_probe *probe = NULL;
    if (toy_bandwidth_probe_new(&probe)) probe = NULL; /* no memory: no roofline */
    for (int r = 0; r < reps && !rc; r++) {
        if (n_prompt) {
            double t0 = ty_now_s();
            if (!run_tokens(ctx, n_prompt, 0, n_vocab, &rng, cp.n_batch)) rc = 1;
            pp[r] = n_prompt / (ty_now_s() - t0);
            toy_kv_seq_rm(ctx, 0, 0, -1);
        }
        if (n_gen && !rc) {
            bws[r] = (probe ? toy_bandwidth_probe_measure(probe, n_threads) : 0);
            double t0 = ty_now_s();
            if (!run_tokens(ctx, n_gen, 0, n_vocab, &rng, 1)) rc = 1;
            tg[r] = n_gen / (ty_now_s() - t0);
            /* the larger of the bandwidths just before and just after the run: a probe
             * that caught a busy moment must not flatter the fraction */
            double after = (probe ? toy_bandwidth_probe_measure(probe, n_threads) : 0);
            if (after > bws[r]) bws[r] = after;
            roofs[r] = bws[r] > 0 ? tg[r] * (double)bytes / bws[r] : 0;
            toy_kv_seq_rm(ctx, 0, 0, -1);
        }
    }
    if (rc) {
        fprintf(stderr, "toy bench: %s\n", toy_last_error());
    } else {
        double pp_med = n_prompt ? median(pp, reps) : 0, tg_med = n_gen ? median(tg, reps) : 0;
        if (!n_gen) bws[0] = (probe ? toy_bandwidth_probe_measure(probe, n_threads) : 0);
        double bw = median(bws, n_gen ? reps : 1);
        double roof = n_gen ? median(roofs, reps) : 0;
        const char *arch = "?", *name = NULL;
        size_t arch_len = 1, name_len = 0;
        toy_gguf_get_str(toy_model_gguf(m), "general.architecture", &arch, &arch_len);
        toy_gguf_get_str(toy_model_gguf(m), "general.name", &name, &name_len);
        uint64_t ftype = 0;
        toy_gguf_get_u64(toy_model_gguf(m), "general.file_type", &ftype);
        const char *ftype_name = toy_ftype_name((int)ftype);
        char model_type[256];
        snprintf(model_type, sizeof model_type, "%.*s %.*s%s%s", (int)arch_len, arch,
                 (int)(name ? name_len : 0), name ? name : "", name ? " " : "",
                 ftype_name ? ftype_name : "?");
        int llc_level;
        const uint64_t llc = last_level_cache(&llc_level);
        if (o->json) {
            printf("{\"model\": ");
            print_json_string(stdout, o->model.path, strlen(o->model.path));
            printf(", \"model_type\": ");
            print_json_string(stdout, model_type, strlen(model_type));
            printf(", \"isa\": \"%s\"", toy_kernel_isa());
            printf(", \"threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"reps\": %d, "
                   "\"prompt_tokens_per_s\": %.3f, \"gen_tokens_per_s\": %.3f, "
                   "\"weight_bytes_per_token\": %llu, \"bandwidth_gb_per_s\": %.3f, "
                   "\"roofline_fraction\": %.4f, \"last_level_cache_bytes\": %llu, \"peak_rss_bytes\": %lld, "
                   "\"pack_s\": %.4f}\n",
                   n_threads, n_prompt, n_gen, reps, pp_med, tg_med, (unsigned long long)bytes,
                   bw / 1e9, roof, (unsigned long long)llc, (long long)ru.ru_maxrss * 1024, pack_s);
        } else {
            printf("model             %s (%s)\n", o->model.path, model_type);
            printf("threads           %d (kernels: %s)\n", n_threads, toy_kernel_isa());
            if (n_prompt) printf("prompt            %.2f tokens/s (median of %d, %d tokens)\n", pp_med, reps, n_prompt);
            if (n_gen) printf("generation        %.2f tokens/s (median of %d, %d tokens)\n", tg_med, reps, n_gen);
            printf("weights/token     %.1f MB\n", (double)bytes / 1e6);
            printf("repacking         %.3f s (toy_model_pack, before the runs; none with TOY_REPACK=0)\n", pack_s);
            printf("read bandwidth    %.2f GB/s (measured around each generation run, %d threads)\n",
                   bw / 1e9, n_threads);
            printf("roofline          %.1f%% (median over runs of tokens/s x weights/token / bandwidth)\n",
                   100 * roof);
            if (llc)
                printf("last-level cache  %.1f MiB (L%d)%s\n", (double)llc / (1 << 20), llc_level,
                       bytes <= llc ? ": the weights fit in it, so decode is no bandwidth measurement" : "");
            printf("peak RSS          %.1f MB\n", (double)ru.ru_maxrss / 1024.0);
        }
    }
    free(pp);
    free(tg);
    free(bws);
    free(roofs);
    toy_bandwidth_probe_free(probe);
    toy_context_free(ctx);
    toy_model_free(m);
    if (!trace_options_end(&o->trace)) rc = 1;
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_options o;
    const int rc = parse_bench_options(argc, argv, &o);
    return rc == GO_ON ? run_bench(&o) : rc;
}
