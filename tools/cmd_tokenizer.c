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

static int cmd_tokenizer_train(int argc, char **argv) {
    toy_tokenizer_train_params p = toy_tokenizer_train_default_params();
    p.n_threads = default_threads();
    toy_tokenizer_train_stats stats = {.size = sizeof stats};
    p.stats = &stats;
    const char **data = calloc((size_t)argc, sizeof *data);
    const char **special = calloc((size_t)argc, sizeof *special);
    const char *out = NULL;
    int vocab_size = -1, rc = 2;
    if (!data || !special) {
        fprintf(stderr, "toy tokenizer train: out of memory\n");
        rc = 1;
        goto done;
    }
    p.data_paths = data;
    p.special = special;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(train_usage, stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "--vocab-size")) {
            if (!parse_int_arg("tokenizer train", a, next, 0, INT32_MAX, &vocab_size)) goto done;
            i++;
        } else if (!strcmp(a, "--data")) {
            int n0 = (int)p.n_data;
            while (i + 1 < argc && !(argv[i + 1][0] == '-' && argv[i + 1][1]))
                data[p.n_data++] = argv[++i];
            if ((int)p.n_data == n0) {
                fprintf(stderr, "toy tokenizer train: --data needs at least one FILE\n");
                goto done;
            }
        } else if (!strcmp(a, "--out") && next) {
            out = argv[++i];
        } else if (!strcmp(a, "--pre") && next) {
            p.pre = argv[++i];
        } else if (!strcmp(a, "--special") && next) {
            special[p.n_special++] = argv[++i];
        } else if (!strcmp(a, "--name") && next) {
            p.name = argv[++i];
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!parse_int_arg("tokenizer train", a, next, 1, 256, &p.n_threads)) goto done;
            i++;
        } else {
            fprintf(stderr,
                    "toy tokenizer train: unknown or incomplete option '%s' (see toy tokenizer "
                    "train --help)\n",
                    a);
            goto done;
        }
    }
    if (vocab_size < 0 || !p.n_data || !out) {
        fprintf(stderr, "toy tokenizer train: needs --vocab-size N, --data FILE and --out FILE "
                        "(see toy tokenizer train --help)\n");
        goto done;
    }
    if (vocab_size < 256 + 3 + (int)p.n_special) {
        fprintf(stderr,
                "toy tokenizer train: --vocab-size %d is below %d, the 256 byte tokens and %d "
                "special tokens\n",
                vocab_size, 256 + 3 + (int)p.n_special, 3 + (int)p.n_special);
        goto done;
    }
    p.vocab_size = vocab_size;

    double t0 = toy_now_s();
    if (toy_tokenizer_train(&p, out)) {
        fprintf(stderr, "toy tokenizer train: %s\n", toy_last_error());
        rc = 1;
        goto done;
    }
    fprintf(stderr,
            "toy tokenizer train: wrote %s: %d tokens (256 bytes, %d merges, %d special), "
            "pre-tokenizer %s; %llu bytes of text, %llu pre-tokens (%llu distinct); %.2f s\n",
            out, (int)stats.n_tokens, (int)stats.n_merges,
            (int)(stats.n_tokens - 256 - stats.n_merges), p.pre && *p.pre ? p.pre : "qwen2",
            (unsigned long long)stats.n_bytes, (unsigned long long)stats.n_pretokens,
            (unsigned long long)stats.n_distinct, toy_now_s() - t0);
    if (stats.n_tokens < vocab_size)
        fprintf(stderr,
                "toy tokenizer train: the text ran out of pairs to merge: %d tokens, not %d\n",
                (int)stats.n_tokens, vocab_size);
    rc = 0;
done:
    free(data);
    free(special);
    return rc;
}

int cmd_tokenizer(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "train")) return cmd_tokenizer_train(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(tokenizer_usage, stdout);
        return 0;
    }
    if (argc >= 2)
        fprintf(stderr, "toy tokenizer: unknown subcommand '%s' (see toy tokenizer --help)\n",
                argv[1]);
    else
        fputs(tokenizer_usage, stderr);
    return 2;
}
