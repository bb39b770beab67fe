/* error.h — the library's error reporting and checked size arithmetic. */
#ifndef TOY_ERROR_H
#define TOY_ERROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "toy.h"

/* Records a message for toy_last_error() on this thread and returns `status`, so a
 * failure reads `return ty_error(TOY_ERR_FORMAT, "%s: ...", path);`. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
toy_status ty_error(toy_status status, const char *fmt, ...);

/* Prefixes the current message with more context: "CONTEXT: old message". */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
toy_status ty_error_wrap(toy_status status, const char *fmt, ...);

static inline bool ty_mul_overflows(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline bool ty_add_overflows(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out);
}

#endif
