/* piece.c — a token's text of any length (engine.h's srv_piece). */
#include <stdlib.h>

#include "engine.h"

bool srv_piece_of(const toy_vocab *v, int32_t token, srv_piece *p) {
    p->text = p->small;
    p->len = 0;
    if (toy_token_to_piece(v, token, false, p->small, sizeof p->small, &p->len)) {
        p->text = NULL;
        return false;
    }
    if (p->len <= sizeof p->small) return true;
    char *big = malloc(p->len);
    size_t len = 0;
    if (!big || toy_token_to_piece(v, token, false, big, p->len, &len) || len != p->len) {
        free(big);
        p->text = NULL;
        return false;
    }
    p->text = big;
    return true;
}

void srv_piece_free(srv_piece *p) {
    if (p->text != p->small) free(p->text);
    p->text = NULL;
}
