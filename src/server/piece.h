/* piece.h — a token's text of any length, for toy serve's streams (piece.c). */
#ifndef TOY_SERVER_PIECE_H
#define TOY_SERVER_PIECE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "toy.h"

/* A token's bytes, however long: in `small` when they fit, else malloc'd. false (and
 * nothing to free) when there is no memory or the token is out of range. */
typedef struct {
    char small[64];
    char *text;
    size_t len;
} srv_piece;
bool srv_piece_of(const toy_vocab *v, int32_t token, srv_piece *p);
void srv_piece_free(srv_piece *p);

#endif
