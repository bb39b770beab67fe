/* buffer.h — a growing byte buffer (internal). */
#ifndef TOY_BUFFER_H
#define TOY_BUFFER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The bytes are kept NUL-terminated, so text can be handed out as a C string. A failed
 * allocation sets oom and every later append does nothing: callers check once, at the
 * end. */
typedef struct {
    char *v;
    size_t n, cap;
    bool oom;
} ty_buf;

static inline void ty_buf_append(ty_buf *b, const void *data, size_t len) {
    if (b->oom) return;
    if (b->cap - b->n < len + 1) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < len + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *v = realloc(b->v, cap);
        if (!v) {
            b->oom = true;
            return;
        }
        b->v = v;
        b->cap = cap;
    }
    if (len) memcpy(b->v + b->n, data, len);
    b->n += len;
    b->v[b->n] = 0;
}

/* Appends each string in turn, up to a NULL: TOY_BUF_PUT(b, "<|im_start|>", role, "\n"). */
#if defined(__GNUC__)
__attribute__((sentinel))
#endif
static inline void ty_buf_put_strings(ty_buf *b, ...) {
    va_list ap;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) ty_buf_append(b, s, strlen(s));
    va_end(ap);
}
#define TOY_BUF_PUT(b, ...) ty_buf_put_strings(b, __VA_ARGS__, (const char *)NULL)

#endif
