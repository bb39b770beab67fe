/* cmd_serve.c — `toy serve`: the OpenAI HTTP API, continuous batching, a chat page. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "server.h"
#include "toy.h"

static const char *const serve_usage =
    "usage: toy serve [-m MODEL] [--host ADDR] [--port N] [--parallel N] [-c CTX] [-t N]\n"
    "                 [--api-key KEY | --api-key-file F] [--cache-type-k T] [--cache-type-v T]\n"
    "                 [--timeout S] [--queue N] [--max-body BYTES] [--lora FILE [--lora-scale S]]...\n"
    "\n"
    "Serves MODEL over HTTP with OpenAI's API (POST /v1/chat/completions, /v1/completions,\n"
    "GET /v1/models; streaming as server-sent events), /tokenize, /detokenize, /health,\n"
    "/metrics (Prometheus) and a chat page at /. Up to --parallel requests share each\n"
    "forward pass; a completion's tokens are those toy run gives for the same prompt and\n"
    "settings, whatever else runs beside it. SIGTERM (or Ctrl-C) stops accepting, lets the\n"
    "requests in flight finish and exits 0.\n"
    "\n"
    "  -m, --model FILE       the GGUF model (default: the bundled models/" TOY_DEFAULT_MODEL ")\n"
    "  --host ADDR            the address to listen on (default 127.0.0.1; 0.0.0.0: all)\n"
    "  --port N               the port (default 8080; 0: any free one, logged)\n"
    "  --parallel N           requests served at once, each with a KV cache slot (default 4)\n"
    "  -c, --ctx-size N       tokens of a slot's context (default: the model's, at most 4096)\n"
    "  -t, --threads N        threads (default: the CPUs available)\n"
    "  --no-mmap              read the model into memory instead of mapping it\n"
    "  --api-key KEY          require Authorization: Bearer KEY (on every route but /health)\n"
    "  --api-key-file F       the same, the key read from the first line of F\n"
    "  --cache-type-k T       KV cache type of keys: f32 (default), f16, bf16, q8_0\n"
    "  --cache-type-v T       the same for values\n"
    "  --timeout S            close a connection idle for S seconds (default 600; 0: never)\n"
    "  --queue N              choices waiting for a slot before 503 (default 256)\n"
    "  --max-body BYTES       the largest request body (default 8 MiB; larger: 413)\n"
    "  --lora FILE            apply a LoRA adapter to every request (repeatable)\n"
    "  --lora-scale S         the scale of the --lora before it (default 1)\n"
    "  -h, --help             this message\n";

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static char *read_key_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "toy serve: --api-key-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char line[1024];
    char *key = fgets(line, sizeof line, f) ? strdup(line) : NULL;
    fclose(f);
    if (key) key[strcspn(key, "\r\n")] = 0;
    if (!key || !*key) {
        fprintf(stderr, "toy serve: --api-key-file %s: the first line holds no key\n", path);
        free(key);
        return NULL;
    }
    return key;
}

int cmd_serve(int argc, char **argv) {
    toy_server_params p = {.host = "127.0.0.1", .port = 8080, .n_parallel = 4, .n_threads = default_threads(),
                           .cache_type_k = TOY_TYPE_F32, .cache_type_v = TOY_TYPE_F32, .timeout_s = 600,
                           .max_body = 8u << 20, .queue_max = 256};
    char *key_from_file = NULL;
    int n_ctx = -1, x, lora_rc;
    lora_options lora = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(serve_usage, stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) {
            p.model_path = argv[++i];
        } else if (!strcmp(a, "--no-mmap")) {
            p.no_mmap = true;
        } else if (!strcmp(a, "--host") && v) {
            p.host = argv[++i];
        } else if (!strcmp(a, "--api-key") && v) {
            p.api_key = argv[++i];
        } else if (!strcmp(a, "--api-key-file") && v) {
            free(key_from_file);
            if (!(key_from_file = read_key_file(argv[++i]))) return 2;
            p.api_key = key_from_file;
        } else if (!strcmp(a, "--port") || !strcmp(a, "--parallel") || !strcmp(a, "-c") || !strcmp(a, "--ctx-size") ||
                   !strcmp(a, "-t") || !strcmp(a, "--threads") || !strcmp(a, "--timeout") || !strcmp(a, "--queue") ||
                   !strcmp(a, "--max-body")) {
            const bool port = !strcmp(a, "--port");
            const int lo = port || !strcmp(a, "--timeout") ? 0 : 1;
            const int hi = port ? 65535 : !strcmp(a, "--parallel") ? 256 : (!strcmp(a, "-t") || !strcmp(a, "--threads")) ? 256
                                                                                  : 1 << 30;
            if (!parse_int_arg("serve", a, v, lo, hi, &x)) return 2;
            i++;
            if (port) p.port = x;
            else if (!strcmp(a, "--parallel")) p.n_parallel = x;
            else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) n_ctx = x;
            else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) p.n_threads = x;
            else if (!strcmp(a, "--timeout")) p.timeout_s = x;
            else if (!strcmp(a, "--queue")) p.queue_max = x;
            else p.max_body = (size_t)x;
        } else if (!strcmp(a, "--cache-type-k") || !strcmp(a, "--cache-type-v")) {
            if (!parse_cache_type("serve", a, v, a[13] == 'k' ? &p.cache_type_k : &p.cache_type_v)) return 2;
            i++;
        } else if ((lora_rc = lora_parse_option("serve", argc, argv, &i, &lora))) {
            if (lora_rc < 0) {
                free(key_from_file);
                return 2;
            }
        } else {
            fprintf(stderr, "toy serve: unknown or incomplete option '%s' (see toy serve --help)\n", a);
            free(key_from_file);
            return 2;
        }
    }
    if (!p.model_path && !(p.model_path = default_model_path())) {
        fprintf(stderr, "toy serve: no model given (-m MODEL), and the bundled models/%s is not there\n",
                TOY_DEFAULT_MODEL);
        free(key_from_file);
        return 2;
    }
    p.n_ctx = n_ctx < 0 ? 0 : n_ctx;
    p.lora_paths = lora.path;
    p.lora_scales = lora.scale;
    p.n_lora = lora.n;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    const int rc = toy_server_run(&p, &stop_requested);
    free(key_from_file);
    return rc;
}
