/* stop.c — stop strings over streamed text.
 *
 * Generated text arrives a piece (one token's bytes) at a time. Two things may not be
 * printed yet: a tail that could be the start of a stop string ("<|im_" while "<|im_end|>"
 * is a stop), and a UTF-8 character whose last bytes have not arrived. Everything before
 * those is safe. When a stop string appears (anywhere, even across many pieces) the text
 * before its first byte is the last output; the stop string and whatever followed it in
 * that piece are dropped.
 *
 * The matcher keeps one buffer: the bytes it handed out last call (valid until this one),
 * then the bytes it held back. The held part is never longer than the longest stop string
 * plus three bytes of a partial character, so searching the whole buffer after each
 * piece costs little. Pieces are bytes: embedded NULs are ordinary bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

struct toy_stop {
    char **stops;
    size_t *stop_len;
    size_t n_stops;
    size_t max_stop_len;
    char *buf;      /* [handed out by the last call | held back] */
    size_t len;     /* bytes in buf */
    size_t cap;     /* bytes allocated */
    size_t emitted; /* the front of buf that the last call handed out */
    bool stopped;   /* a stop string has appeared; later pieces are dropped */
};

/* The length of s[0..n) without a trailing UTF-8 sequence that is incomplete but could
 * still become a character. Invalid bytes (a stray continuation byte, C0, C1, F5..FF, a
 * lead byte followed by an impossible second byte) never will, so they are not held. */
static size_t utf8_complete_len(const unsigned char *s, size_t n) {
    size_t i = n, cont = 0;
    while (i > 0 && cont < 3 && (s[i - 1] & 0xc0) == 0x80) {
        i--;
        cont++;
    }
    if (i == 0) return n;
    const unsigned char lead = s[i - 1];
    size_t need;
    if (lead >= 0xc2 && lead <= 0xdf)
        need = 1;
    else if (lead >= 0xe0 && lead <= 0xef)
        need = 2;
    else if (lead >= 0xf0 && lead <= 0xf4)
        need = 3;
    else
        return n; /* ASCII or a byte no character starts with */
    if (cont >= need) return n;
    if (cont >= 1) { /* the lead bytes whose second byte has a narrower range */
        const unsigned char b = s[i];
        if ((lead == 0xe0 && b < 0xa0) || (lead == 0xed && b > 0x9f) ||
            (lead == 0xf0 && b < 0x90) || (lead == 0xf4 && b > 0x8f))
            return n;
    }
    return i - 1;
}

/* The earliest position whose suffix of buf is the beginning of some stop string — a
 * proper beginning, since a whole one has been looked for already. len if none. */
static size_t stop_prefix_start(const toy_stop *st) {
    if (st->n_stops == 0) return st->len;
    const size_t len = st->len;
    size_t j = len >= st->max_stop_len ? len - (st->max_stop_len - 1) : 0;
    for (; j < len; j++) {
        const size_t tail = len - j;
        for (size_t k = 0; k < st->n_stops; k++)
            if (st->stop_len[k] > tail && memcmp(st->buf + j, st->stops[k], tail) == 0)
                return j;
    }
    return len;
}

/* The first byte of the earliest complete stop string in buf; SIZE_MAX if none. */
static size_t find_stop(const toy_stop *st) {
    size_t at = SIZE_MAX;
    for (size_t k = 0; k < st->n_stops; k++) {
        const char *hit = memmem(st->buf, st->len, st->stops[k], st->stop_len[k]);
        if (hit && (size_t)(hit - st->buf) < at) at = (size_t)(hit - st->buf);
    }
    return at;
}

/* Forgets what the last call handed out; what was held moves to the front. */
static void drop_emitted(toy_stop *st) {
    if (st->emitted == 0) return;
    memmove(st->buf, st->buf + st->emitted, st->len - st->emitted);
    st->len -= st->emitted;
    st->emitted = 0;
}

static bool append(toy_stop *st, const char *piece, size_t len) {
    if (len == 0) return true;
    if (len > st->cap - st->len) {
        size_t cap = st->cap;
        while (len > cap - st->len) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        char *buf = realloc(st->buf, cap);
        if (!buf) return false;
        st->buf = buf;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, piece, len);
    st->len += len;
    return true;
}

bool toy_stop_feed(toy_stop *st, const char *piece, size_t len, const char **emit,
                   size_t *emit_len) {
    if (!st->stopped) {
        drop_emitted(st);
        size_t safe;
        if (!append(st, piece, len)) {
            /* The API has no status here: end the stream as a stop would, releasing what
             * was safe, and leave the reason for toy_last_error(). */
            ty_error(TOY_ERR_NOMEM, "stop strings: out of memory buffering %zu bytes",
                     len);
            st->stopped = true;
            safe = stop_prefix_start(st);
        } else {
            const size_t at = find_stop(st);
            st->stopped = at != SIZE_MAX;
            safe = st->stopped ? at : stop_prefix_start(st);
        }
        /* after a stop, a character cut by it can never complete: its bytes go too */
        st->emitted = utf8_complete_len((const unsigned char *)st->buf, safe);
        *emit = st->buf;
        *emit_len = st->emitted;
        return st->stopped;
    }
    *emit = st->buf;
    *emit_len = 0;
    return true;
}

void toy_stop_flush(toy_stop *st, const char **emit, size_t *emit_len) {
    *emit = st->buf;
    *emit_len = 0;
    if (!st->stopped) {
        drop_emitted(st);
        /* no more bytes will come, so a partial character is dropped */
        *emit_len = utf8_complete_len((const unsigned char *)st->buf, st->len);
    }
    /* the stream is over: the next feed starts a new one */
    st->emitted = st->len;
    st->stopped = false;
}

toy_status toy_stop_new(const char *const *stops, size_t n_stops, toy_stop **out) {
    if (!out) return ty_error(TOY_ERR_INVALID, "toy_stop_new: out is NULL");
    *out = NULL;
    if (n_stops > 0 && !stops)
        return ty_error(TOY_ERR_INVALID, "stop strings: %zu strings but the list is NULL",
                        n_stops);
    for (size_t k = 0; k < n_stops; k++) {
        if (!stops[k]) return ty_error(TOY_ERR_INVALID, "stop string %zu is NULL", k);
        if (!stops[k][0])
            return ty_error(TOY_ERR_INVALID,
                            "stop string %zu is empty (it would match before any text)", k);
    }
    toy_stop *st = calloc(1, sizeof *st);
    if (!st) return ty_error(TOY_ERR_NOMEM, "stop strings: out of memory");
    st->cap = 256;
    st->buf = malloc(st->cap);
    st->stops = calloc(n_stops ? n_stops : 1, sizeof *st->stops);
    st->stop_len = calloc(n_stops ? n_stops : 1, sizeof *st->stop_len);
    bool ok = st->buf && st->stops && st->stop_len;
    for (size_t k = 0; ok && k < n_stops; k++) {
        st->stop_len[k] = strlen(stops[k]);
        st->stops[k] = malloc(st->stop_len[k]);
        ok = st->stops[k] != NULL;
        if (ok) memcpy(st->stops[k], stops[k], st->stop_len[k]);
        st->n_stops = k + 1; /* so that free releases what was copied */
        if (st->stop_len[k] > st->max_stop_len) st->max_stop_len = st->stop_len[k];
    }
    if (!ok) {
        toy_stop_free(st);
        return ty_error(TOY_ERR_NOMEM, "stop strings: out of memory");
    }
    *out = st;
    return TOY_OK;
}

void toy_stop_free(toy_stop *st) {
    if (!st) return;
    for (size_t k = 0; k < st->n_stops; k++) free(st->stops[k]);
    free(st->stops);
    free(st->stop_len);
    free(st->buf);
    free(st);
}
