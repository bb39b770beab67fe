/* piece.c — see piece.h. */
#include <stdlib.h>

#include "piece.h"
#include "tokenizer.h"

bool srv_piece_of(const toy_vocab *v, int32_t token, srv_piece *p) {
    char *big = NULL;
    const char *text;
    if (ty_token_text(v, token, false, p->small, sizeof p->small, &big, &text, &p->len)) {
        p->text = NULL;
        return false;
    }
    p->text = (char *)text;
    return true;
}

void srv_piece_free(srv_piece *p) {
    if (p->text != p->small) free(p->text);
    p->text = NULL;
}
