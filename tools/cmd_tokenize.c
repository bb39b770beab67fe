/* cmd_tokenize.c — `toy tokenize`: text to token ids. */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "toy.h"

static const char *const tokenize_usage =
    "usage: toy tokenize -m MODEL [--json] [--no-special] [--parse-special] [--pieces] TEXT\n"
    "\n"
    "Prints the token ids of TEXT with the model's tokenizer (any GGUF with tokenizer\n"
    "metadata, vocabulary-only files included).\n"
    "\n"
    "  -m, --model FILE   the GGUF file\n"
    "  --json             print a JSON array of integers\n"
    "  --no-special       add no BOS/EOS (as llama.cpp's tokenizer tests)\n"
    "  --parse-special    turn the text of special tokens (<|im_start|>, ...) into them\n"
    "  --pieces           print each id with the text it stands for\n"
    "  -h, --help         this message\n";

typedef struct {
    const char *model_path, *text;
    bool json, add_special, parse_special, pieces;
} tokenize_options;

static int parse_tokenize_options(int argc, char **argv, tokenize_options *o) {
    *o = (tokenize_options){.add_special = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(tokenize_usage, stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) {
            o->model_path = argv[++i];
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--no-special")) {
            o->add_special = false;
        } else if (!strcmp(a, "--parse-special")) {
            o->parse_special = true;
        } else if (!strcmp(a, "--pieces")) {
            o->pieces = true;
        } else if (a[0] == '-' && a[1]) {
            return unknown_option("tokenize", a);
        } else if (!o->text) {
            o->text = a;
        } else {
            fprintf(stderr, "toy tokenize: more than one TEXT given\n");
            return 2;
        }
    }
    if (!o->model_path || !o->text) {
        fprintf(stderr, "toy tokenize: needs -m MODEL and TEXT (see toy tokenize --help)\n");
        return 2;
    }
    return GO_ON;
}

static int run_tokenize(const tokenize_options *o) {
    toy_gguf *g;
    if (toy_gguf_open(o->model_path, &g)) {
        fprintf(stderr, "toy tokenize: %s\n", toy_last_error());
        return 1;
    }
    toy_vocab *v;
    if (toy_vocab_load(g, &v)) {
        fprintf(stderr, "toy tokenize: %s: %s\n", o->model_path, toy_last_error());
        toy_gguf_close(g);
        return 1;
    }
    int32_t *ids = NULL, n = 0;
    int rc = 1;
    if (toy_tokenize_alloc(v, o->text, strlen(o->text), o->add_special, o->parse_special, &ids, &n)) {
        fprintf(stderr, "toy tokenize: %s\n", toy_last_error());
        goto done;
    }
    if (o->json) putchar('[');
    for (int32_t i = 0; i < n; i++) {
        if (o->json) printf(i ? ", %d" : "%d", ids[i]);
        else if (o->pieces) {
            char small[256], *piece = small;
            size_t plen = 0;
            toy_status st = toy_token_to_piece(v, ids[i], true, small, sizeof small, &plen);
            if (st == TOY_ERR_BUFFER) /* a token longer than 256 bytes */
                st = (piece = malloc(plen)) ? toy_token_to_piece(v, ids[i], true, piece, plen, &plen) : TOY_ERR_NOMEM;
            if (st) {
                fprintf(stderr, "toy tokenize: token %d: %s\n", ids[i], piece ? toy_last_error() : "no memory");
                if (piece != small) free(piece);
                goto done;
            }
            printf("%6d -> '", ids[i]);
            print_piece(stdout, piece, plen);
            printf("'\n");
            if (piece != small) free(piece);
        } else printf(i ? " %d" : "%d", ids[i]);
    }
    if (o->json) putchar(']');
    if (o->json || !o->pieces) putchar('\n');
    rc = 0;
done:
    free(ids);
    toy_vocab_free(v);
    toy_gguf_close(g);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_options o;
    const int rc = parse_tokenize_options(argc, argv, &o);
    return rc == GO_ON ? run_tokenize(&o) : rc;
}
