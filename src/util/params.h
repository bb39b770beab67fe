/* params.h — the ABI rule of toy.h for structs that begin with their size: a program
 * built against an older header passes a shorter struct, and the library reads (or, for
 * results, writes) only the bytes that program knows of. */
#ifndef TOY_PARAMS_H
#define TOY_PARAMS_H

#include <stddef.h>

#include "toy.h"

/* Reads the caller's struct `src` (its first member the size_t it was initialised with)
 * into `dst`, which holds this library's defaults in this library's size: the caller's
 * bytes replace the defaults they cover, and dst's size stays its own. A size of 0 (the
 * struct was not initialised) or one larger than this library's (a newer header) is an
 * error naming the struct. */
toy_status ty_params_read(void *dst, size_t dst_size, const void *src, const char *name);

/* Writes the result `src` (src_size bytes) into the caller's `dst`, whose first member
 * the caller set to its own sizeof: at most that many bytes, dst's size kept. A size
 * too small to hold the size itself is an error naming the struct. */
toy_status ty_result_write(void *dst, const void *src, size_t src_size, const char *name);

/* The same check of the caller's size before any work, so that a long run does not fail
 * only at its end; NULL passes. */
toy_status ty_result_check(const void *dst, const char *name);

/* Starts a struct of this library's defaults: the size, then `defaults` (a full-size
 * struct) copied in. For the *_params_init functions. */
void ty_params_init(void *dst, size_t size, const void *defaults, size_t defaults_size);

#endif
