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
    "                 [--timeout S] [--queue N] [--max-body BYTES] [--max-connections N]\n"
    "                 [--cors-origin ORIGIN]... [--host-alias NAME]... [--shutdown-grace S]\n"
    "                 [--watchdog S] [--lora FILE [--lora-scale S]]...\n"
    "                 [--chat-template-file F | --chat-template NAME] [--chat-template-kwargs JSON]\n"
    "                 [--pooling P]\n"
    "\n"
    "Serves MODEL over HTTP with OpenAI's API (POST /v1/chat/completions, /v1/completions,\n"
    "/v1/embeddings, GET /v1/models; streaming as server-sent events), /tokenize,\n"
    "/detokenize, /apply-template, /health, /metrics (Prometheus) and a chat page at /.\n"
    "It listens at once and packs the weights before /health answers 200 (503 \"loading\"\n"
    "until then), so that its first request does not wait for the packing.\n"
    "Chat is formatted with the model's own chat template (docs/chat-templates.md). Up to --parallel\n"
    "requests share each forward pass; a completion's tokens are those toy run gives for\n"
    "the same prompt and settings, whatever else runs beside it. Request bodies are JSON\n"
    "(Content-Type: application/json, or none). SIGTERM (or Ctrl-C) answers new requests\n"
    "503, gives those in flight --shutdown-grace seconds, ends the rest with an error and\n"
    "exits 0; a second signal ends the grace.\n"
    "\n"
    "  -m, --model FILE       the GGUF model (default: the bundled models/" TOY_DEFAULT_MODEL ")\n"
    "  --host ADDR            the address to listen on (default 127.0.0.1; 0.0.0.0: all)\n"
    "  --port N               the port (default 8080; 0: any free one, logged)\n"
    "  --parallel N           requests served at once, each with a KV cache slot (default 4)\n"
    "  -c, --ctx-size N       tokens of a slot's context (default: the model's, at most 4096)\n"
    "  -t, --threads N        threads (default: the CPUs available)\n"
    "  --no-mmap              read the model into memory instead of mapping it\n"
    "  --split A,B,...        under mpirun -np N: the layers of each of the N pipeline stages\n"
    "                         (default: balanced by bytes; docs/pipeline.md)\n"
    "  --api-key KEY          require Authorization: Bearer KEY (on every route but /health\n"
    "                         and the chat page, which asks for it)\n"
    "  --api-key-file F       the same, the key read from the first line of F\n"
    "  --cache-type-k T       KV cache type of keys: f32 (default), f16, bf16, q8_0\n"
    "  --cache-type-v T       the same for values\n"
    "  --attn fused|plain     attention fused (default), or plain: scores, softmax and product\n"
    "                         with V each kept\n"
    "  --timeout S            close a connection idle for S seconds (default 600; 0: never)\n"
    "  --queue N              choices waiting for a slot before 503 (default 256)\n"
    "  --max-body BYTES       the largest request body (default 8 MiB; larger: 413)\n"
    "  --max-connections N    open connections (default 256; more: 503)\n"
    "  --cors-origin ORIGIN   let pages from ORIGIN (https://app.example, or *) call the API\n"
    "                         (repeatable; by default only the server's own pages may)\n"
    "  --host-alias NAME      a name the server answers to besides localhost, 127.0.0.1 and\n"
    "                         [::1] when it listens on loopback (repeatable; other Host: 403)\n"
    "  --shutdown-grace S     seconds for requests in flight to finish on SIGTERM (default 5)\n"
    "  --watchdog S           /health answers 503 when the engine makes no progress for S\n"
    "                         seconds with work to do (default 60; 0: never)\n"
    "  --lora FILE            apply a LoRA adapter to every request (repeatable)\n"
    "  --lora-scale S         the scale of the --lora before it (default 1)\n"
    "  --chat-template NAME   a built-in template family for chat: chatml, llama3, mistral-v7,\n"
    "                         gemma, phi3, ... (default: the model's own template)\n"
    "  --chat-template-file F a Jinja chat template read from F\n"
    "  --chat-template-kwargs JSON  variables for the template in requests that give no\n"
    "                         chat_template_kwargs, e.g. '{\"enable_thinking\": false}'\n"
    "  --pooling P            how /v1/embeddings pools an input's token states: mean, cls\n"
    "                         (the first token's) or last (default: the model's\n"
    "                         pooling_type, else mean)\n"
    "  -h, --help             this message\n";

static volatile sig_atomic_t stop_requested; /* signals received, counted to 2 */

static void on_signal(int sig) {
    (void)sig;
    if (stop_requested < 2) stop_requested++;
}

enum { MAX_NAMES = 32 };

/* An origin as browsers send it: "*", or http(s)://host[:port] with no path. */
static bool is_origin(const char *v) {
    if (!strcmp(v, "*")) return true;
    const char *host = !strncmp(v, "http://", 7) ? v + 7 : !strncmp(v, "https://", 8) ? v + 8 : NULL;
    return host && *host && !strpbrk(host, "/ \t?#");
}

/* A host name as the Host header gives it, without a port: "toy.internal". */
static bool is_host_name(const char *v) { return *v && !strpbrk(v, ":/ \t?#[]"); }

/* A repeatable option's value into names[*n]. */
static bool add_name(const char *flag, const char *value, const char **names, int *n) {
    if (*n == MAX_NAMES) {
        fprintf(stderr, "toy serve: %s given more than %d times\n", flag, MAX_NAMES);
        return false;
    }
    const bool origin = !strcmp(flag, "--cors-origin");
    if (origin ? !is_origin(value) : !is_host_name(value)) {
        fprintf(stderr, "toy serve: %s '%s' is not %s\n", flag, value,
                origin ? "an origin (*, or http(s)://host[:port] with no path)" : "a host name (no port, no scheme)");
        return false;
    }
    names[(*n)++] = value;
    return true;
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

typedef struct {
    ty_server_params params;
    const char *cors[MAX_NAMES], *aliases[MAX_NAMES];
    char *key_from_file; /* --api-key-file's key, malloc'd */
    lora_options lora;
    trace_options trace;
    chat_template_options tmpl;
} serve_options;

static toy_chat_template *open_template(void *user, const toy_model *m) {
    return chat_template_open("serve", m, user);
}

/* the trace file opens, and --trace-head is checked, once the server has the model */
static bool trace_model(void *user, const toy_model *m) { return trace_options_begin("serve", user, m); }

static int parse_serve_options(int argc, char **argv, serve_options *o) {
    *o = (serve_options){.params = {.host = "127.0.0.1", .port = 8080, .n_parallel = 4, .n_threads = default_threads(),
                                    .cache_type_k = TOY_TYPE_F32, .cache_type_v = TOY_TYPE_F32, .timeout_s = 600,
                                    .max_body = 8u << 20, .queue_max = 256, .max_connections = 256,
                                    .shutdown_grace_s = 5, .watchdog_s = 60, .pooling = TOY_POOLING_UNSPECIFIED},
                        .trace = TRACE_OPTIONS_INIT};
    ty_server_params *p = &o->params;
    int n_cors = 0, n_aliases = 0, n_ctx = -1, x, lora_rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(serve_usage, stdout);
            fputs(trace_options_help, stdout);
            return 0;
        } else if ((x = trace_parse_option("serve", argc, argv, &i, &o->trace))) {
            if (x < 0) goto fail;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) {
            p->model_path = argv[++i];
        } else if (!strcmp(a, "--no-mmap")) {
            p->no_mmap = true;
        } else if (!strcmp(a, "--host") && v) {
            p->host = argv[++i];
        } else if ((x = chat_template_parse_option("serve", argc, argv, &i, &o->tmpl))) {
            if (x < 0) goto fail;
        } else if (!strcmp(a, "--api-key") && v) {
            p->api_key = argv[++i];
        } else if (!strcmp(a, "--cors-origin") && v) {
            if (!add_name(a, argv[++i], o->cors, &n_cors)) goto fail;
        } else if (!strcmp(a, "--host-alias") && v) {
            if (!add_name(a, argv[++i], o->aliases, &n_aliases)) goto fail;
        } else if (!strcmp(a, "--api-key-file") && v) {
            free(o->key_from_file);
            if (!(o->key_from_file = read_key_file(argv[++i]))) goto fail;
            p->api_key = o->key_from_file;
        } else if (!strcmp(a, "--port") || !strcmp(a, "--parallel") || !strcmp(a, "-c") || !strcmp(a, "--ctx-size") ||
                   !strcmp(a, "-t") || !strcmp(a, "--threads") || !strcmp(a, "--timeout") || !strcmp(a, "--queue") ||
                   !strcmp(a, "--max-body") || !strcmp(a, "--max-connections") || !strcmp(a, "--shutdown-grace") ||
                   !strcmp(a, "--watchdog")) {
            const bool port = !strcmp(a, "--port");
            const int lo = port || !strcmp(a, "--timeout") || !strcmp(a, "--shutdown-grace") || !strcmp(a, "--watchdog")
                               ? 0
                               : 1;
            const int hi = port ? 65535 : !strcmp(a, "--parallel") ? 256 : (!strcmp(a, "-t") || !strcmp(a, "--threads")) ? 256
                                                                                  : 1 << 30;
            if (!parse_int_arg("serve", a, v, lo, hi, &x)) goto fail;
            i++;
            if (port) p->port = x;
            else if (!strcmp(a, "--parallel")) p->n_parallel = x;
            else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) n_ctx = x;
            else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) p->n_threads = x;
            else if (!strcmp(a, "--timeout")) p->timeout_s = x;
            else if (!strcmp(a, "--queue")) p->queue_max = x;
            else if (!strcmp(a, "--max-connections")) p->max_connections = x;
            else if (!strcmp(a, "--shutdown-grace")) p->shutdown_grace_s = x;
            else if (!strcmp(a, "--watchdog")) p->watchdog_s = x;
            else p->max_body = (size_t)x;
        } else if (!strcmp(a, "--pooling") && v) {
            static const char *const names[] = {"mean", "cls", "last"};
            static const toy_pooling kinds[] = {TOY_POOLING_MEAN, TOY_POOLING_CLS, TOY_POOLING_LAST};
            p->pooling = TOY_POOLING_UNSPECIFIED;
            for (int k = 0; k < 3; k++)
                if (!strcmp(v, names[k])) p->pooling = kinds[k];
            if (p->pooling == TOY_POOLING_UNSPECIFIED) {
                fprintf(stderr, "toy serve: --pooling '%s' is not mean, cls or last\n", v);
                goto fail;
            }
            i++;
        } else if (!strcmp(a, "--attn") && v) {
            if (!parse_attn("serve", argv[++i], &p->attn)) goto fail;
        } else if (!strcmp(a, "--cache-type-k") || !strcmp(a, "--cache-type-v")) {
            if (!parse_cache_type("serve", a, v, a[13] == 'k' ? &p->cache_type_k : &p->cache_type_v)) goto fail;
            i++;
        } else if ((lora_rc = lora_parse_option("serve", argc, argv, &i, &o->lora))) {
            if (lora_rc < 0) goto fail;
        } else {
            unknown_option("serve", a);
            goto fail;
        }
    }
    if (!p->model_path && !(p->model_path = default_model_path())) {
        fprintf(stderr, "toy serve: no model given (-m MODEL), and the bundled models/%s is not there\n",
                TOY_DEFAULT_MODEL);
        goto fail;
    }
    p->n_ctx = n_ctx < 0 ? 0 : n_ctx;
    p->cors_origins = o->cors;
    p->n_cors_origins = n_cors;
    p->host_aliases = o->aliases;
    p->n_host_aliases = n_aliases;
    if (!chat_template_options_check("serve", &o->tmpl)) goto fail;
    p->open_chat_template = open_template;
    p->open_chat_template_user = &o->tmpl;
    p->chat_template_kwargs = o->tmpl.kwargs;
    p->lora_paths = o->lora.path;
    p->lora_scales = o->lora.scale;
    p->n_lora = o->lora.n;
    if (o->trace.pattern) {
        p->trace = trace_tap;
        p->trace_user = &o->trace;
        p->trace_model = trace_model;
    } else if (!trace_options_check("serve", &o->trace)) {
        goto fail;
    }
    return GO_ON;
fail:
    free(o->key_from_file);
    return 2;
}

static int run_serve(serve_options *o) {
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = ty_server_run(&o->params, &stop_requested);
    if (!trace_options_end(&o->trace) && !rc) rc = 1;
    free(o->key_from_file);
    return rc;
}

int cmd_serve(int argc, char **argv) {
    serve_options o;
    const int rc = parse_serve_options(argc, argv, &o);
    return rc == GO_ON ? run_serve(&o) : rc;
}
