/* error.c — per-thread last-error message. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { TY_ERROR_MAX = 1024 };

static _Thread_local char last_error[TY_ERROR_MAX];

/* Messages quote names read from files; control bytes in them would break the
 * one-line message, so they are shown as '?'. */
static void make_one_line(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

toy_status ty_error(toy_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    make_one_line(last_error);
    return status;
}

toy_status ty_error_wrap(toy_status status, const char *fmt, ...) {
    char prefix[TY_ERROR_MAX], old[TY_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* truncation of an over-long message is acceptable */
    size_t n = strlen(prefix);
    if (n > sizeof last_error - 3) n = sizeof last_error - 3;
    memcpy(last_error, prefix, n);
    memcpy(last_error + n, ": ", 2);
    size_t room = sizeof last_error - n - 3;
    size_t m = strlen(old);
    if (m > room) m = room;
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = 0;
    make_one_line(last_error);
    return status;
}

const char *toy_last_error(void) { return last_error; }

const char *toy_status_str(toy_status status) {
    switch (status) {
    case TOY_OK: return "ok";
    case TOY_ERR_IO: return "i/o error";
    case TOY_ERR_FORMAT: return "malformed file";
    case TOY_ERR_NOMEM: return "out of memory";
    case TOY_ERR_INVALID: return "invalid argument";
    case TOY_ERR_UNSUPPORTED: return "unsupported";
    case TOY_ERR_NOT_FOUND: return "not found";
    case TOY_ERR_BUFFER: return "buffer too small";
    }
    return "unknown status";
}
