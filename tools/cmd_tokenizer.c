/* cmd_tokenizer.c — `toy tokenizer train`: learn a byte-level BPE tokenizer. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "toy.h"
#include "clock.h"

static const char *const tokenizer_usage =
    "usage: toy tokenizer train --vocab-size N --data FILE... --out TOK.gguf [OPTIONS]\n"
    "\n"
    "Makes tokenizers (to read one, see toy tokenize and toy info).\n"
    "\n"
    "  train        learn a byte-level BPE tokenizer from plain text\n"
    "               (toy tokenizer train --help)\n"
    "  -h, --help   this message\n";

static const char *const train_usage =
    "usage: toy tokenizer train --vocab-size N --data FILE... --out TOK.gguf [--pre NAME]\n"
    "                           [--special TEXT]... [--name NAME] [-t N]\n"
    "\n"
    "Learns a byte-level BPE tokenizer from plain-text files and writes it as a GGUF that\n"
    "holds only tokenizer metadata, like llama.cpp's vocabulary files: toy and llama.cpp\n"
    "tokenize any text alike with it, and `toy init --vocab-from` takes it. Tokens: the 256\n"
    "bytes (ids 0..255), one per merge learned, then the special tokens <|endoftext|> (BOS\n"
    "and EOS), <|im_start|>, <|im_end|> and those of --special; a ChatML chat template.\n"
    "The most frequent adjacent pair is merged first; a tie goes to the pair whose left,\n"
    "then right, token's bytes are lower in byte order. The same data and options give the\n"
    "same file, byte for byte, whatever -t.\n"
    "\n"
    "  --vocab-size N     every token: 256 bytes + merges + special tokens\n"
    "  --data FILE...     plain-text files (the option may repeat)\n"
    "  --out FILE         the GGUF to write\n"
    "  --pre NAME         pre-tokenizer, a tokenizer.ggml.pre name (default qwen2; also\n"
    "                     gpt-2, smollm, smaug-bpe, deepseek-llm, ...; not llama-bpe and\n"
    "                     others under which llama.cpp skips merging known words)\n"
    "  --special TEXT     one more special token (repeatable); its text in the data is\n"
    "                     never learned, as that of the default three\n"
    "  --name NAME        general.name (default toy-bpe)\n"
    "  -t, --threads N    threads pre-tokenizing the text (default: all CPUs)\n"
    "  -h, --help         this message\n";

typedef struct {
    toy_tokenizer_train_params params;
    const char **data, **special; /* what params.data_paths and params.special point to */
    const char *out;
    int vocab_size;
} tokenizer_train_options;

/* toy tokenizer's one subcommand, train, and its options. */
static int parse_tokenizer_options(int argc, char **argv, tokenizer_train_options *o) {
    if (argc < 2 || strcmp(argv[1], "train")) {
        const bool help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
        if (argc >= 2 && !help)
            fprintf(stderr, "toy tokenizer: unknown subcommand '%s' (see toy tokenizer --help)\n", argv[1]);
        else
            fputs(tokenizer_usage, help ? stdout : stderr);
        return help ? 0 : 2;
    }
    *o = (tokenizer_train_options){.params = toy_tokenizer_train_default_params(), .vocab_size = -1};
    toy_tokenizer_train_params *p = &o->params;
    p->n_threads = default_threads();
    o->data = calloc((size_t)argc, sizeof *o->data);
    o->special = calloc((size_t)argc, sizeof *o->special);
    int rc = 2;
    if (!o->data || !o->special) {
        fprintf(stderr, "toy tokenizer train: out of memory\n");
        rc = 1;
        goto done;
    }
    p->data_paths = o->data;
    p->special = o->special;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(train_usage, stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "--vocab-size")) {
            if (!parse_int_arg("tokenizer train", a, next, 0, INT32_MAX, &o->vocab_size)) goto done;
            i++;
        } else if (!strcmp(a, "--data")) {
            int n0 = (int)p->n_data;
            while (i + 1 < argc && !(argv[i + 1][0] == '-' && argv[i + 1][1]))
                o->data[p->n_data++] = argv[++i];
            if ((int)p->n_data == n0) {
                fprintf(stderr, "toy tokenizer train: --data needs at least one FILE\n");
                goto done;
            }
        } else if (!strcmp(a, "--out") && next) {
            o->out = argv[++i];
        } else if (!strcmp(a, "--pre") && next) {
            p->pre = argv[++i];
        } else if (!strcmp(a, "--special") && next) {
            o->special[p->n_special++] = argv[++i];
        } else if (!strcmp(a, "--name") && next) {
            p->name = argv[++i];
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!parse_int_arg("tokenizer train", a, next, 1, 256, &p->n_threads)) goto done;
            i++;
        } else {
            rc = unknown_option("tokenizer train", a);
            goto done;
        }
    }
    if (o->vocab_size < 0 || !p->n_data || !o->out) {
        fprintf(stderr, "toy tokenizer train: needs --vocab-size N, --data FILE and --out FILE "
                        "(see toy tokenizer train --help)\n");
        goto done;
    }
    if (o->vocab_size < 256 + 3 + (int)p->n_special) {
        fprintf(stderr,
                "toy tokenizer train: --vocab-size %d is below %d, the 256 byte tokens and %d "
                "special tokens\n",
                o->vocab_size, 256 + 3 + (int)p->n_special, 3 + (int)p->n_special);
        goto done;
    }
    p->vocab_size = o->vocab_size;
    return GO_ON;
done:
    free(o->data);
    free(o->special);
    return rc;
}

static int run_tokenizer_train(tokenizer_train_options *o) {
    toy_tokenizer_train_params *p = &o->params;
    toy_tokenizer_train_stats stats = {.size = sizeof stats};
    p->stats = &stats;
    int rc = 1;
    double t0 = ty_now_s();
    if (toy_tokenizer_train(p, o->out)) {
        fprintf(stderr, "toy tokenizer train: %s\n", toy_last_error());
        goto done;
    }
    fprintf(stderr,
            "toy tokenizer train: wrote %s: %d tokens (256 bytes, %d merges, %d special), "
            "pre-tokenizer %s; %llu bytes of text, %llu pre-tokens (%llu distinct); %.2f s\n",
            o->out, (int)stats.n_tokens, (int)stats.n_merges,
            (int)(stats.n_tokens - 256 - stats.n_merges), p->pre && *p->pre ? p->pre : "qwen2",
            (unsigned long long)stats.n_bytes, (unsigned long long)stats.n_pretokens,
            (unsigned long long)stats.n_distinct, ty_now_s() - t0);
    if (stats.n_tokens < o->vocab_size)
        fprintf(stderr,
                "toy tokenizer train: the text ran out of pairs to merge: %d tokens, not %d\n",
                (int)stats.n_tokens, o->vocab_size);
    rc = 0;
done:
    free(o->data);
    free(o->special);
    return rc;
}

int cmd_tokenizer(int argc, char **argv) {
    tokenizer_train_options o;
    const int rc = parse_tokenizer_options(argc, argv, &o);
    return rc == GO_ON ? run_tokenizer_train(&o) : rc;
}
