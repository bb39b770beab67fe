/* tokenize.c — libtoy's tokenizer on its own: read the tokenizer of any GGUF file (a
 * model, or a vocabulary-only file), turn text into token ids and back.
 *
 *   cc tokenize.c $(pkg-config --cflags --libs toy) -o tokenize
 *   ./tokenize model.gguf "And it came to pass"
 *
 * Prints the ids on one line (as `toy tokenize` does), then each id with its text,
 * then the text the ids decode to, which is the input again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <toy.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FILE.gguf TEXT\n", argv[0]);
        return 2;
    }
    const char *text = argv[2];
    toy_gguf *gguf = NULL;
    toy_vocab *vocab = NULL;
    int32_t *ids = NULL;
    char *back = NULL;
    int rc = 1;

    /* the file is mapped, its metadata read; the vocabulary keeps no pointer into it */
    if (toy_gguf_open(argv[1], &gguf) != TOY_OK) goto done;
    if (toy_vocab_load(gguf, &vocab) != TOY_OK) goto done;

    /* a first call with no room says how many ids the text needs (TOY_ERR_BUFFER when
     * that is more than the room; toy_tokenize_alloc does both calls in one) */
    const size_t len = strlen(text);
    int32_t n = 0;
    toy_status st = toy_tokenize(vocab, text, len, true, false, NULL, 0, &n);
    if (st != TOY_OK && st != TOY_ERR_BUFFER) goto done;
    if (!(ids = malloc((size_t)(n ? n : 1) * sizeof *ids))) goto done;
    if (toy_tokenize(vocab, text, len, true, false, ids, n, &n) != TOY_OK) goto done;

    for (int32_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    putchar('\n');
    for (int32_t i = 0; i < n; i++) {
        char piece[256];
        size_t piece_len = 0;
        st = toy_token_to_piece(vocab, ids[i], true, piece, sizeof piece, &piece_len);
        if (st == TOY_ERR_BUFFER) { /* a token's text longer than the buffer: its length is known */
            printf("%6d -> (%zu bytes)\n", ids[i], piece_len);
            continue;
        }
        if (st != TOY_OK) goto done;
        printf("%6d -> '%.*s'\n", ids[i], (int)piece_len, piece);
    }

    /* and back: special tokens (BOS) left out of the text */
    size_t back_len = 0;
    if (toy_detokenize(vocab, ids, n, false, &back, &back_len) != TOY_OK) goto done;
    printf("%s\n", back);
    rc = 0;
done:
    if (rc) fprintf(stderr, "tokenize: %s\n", toy_last_error());
    free(back);
    free(ids);
    toy_vocab_free(vocab);
    toy_gguf_close(gguf);
    return rc;
}
