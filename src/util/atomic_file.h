/* atomic_file.h — files that appear whole or not at all: written to PATH.tmp.XXXXXX
 * beside PATH, flushed to disk, then renamed over PATH. A crash or an error leaves
 * whatever PATH held before. */
#ifndef TOY_ATOMIC_FILE_H
#define TOY_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "toy.h"

typedef struct {
    FILE *f;   /* write here between open and commit */
    char *path, *tmp_path;
} ty_atomic_file;

toy_status ty_atomic_open(ty_atomic_file *a, const char *path);
/* Flushes, syncs and renames; on failure the temporary file is removed. */
toy_status ty_atomic_commit(ty_atomic_file *a);
/* Drops the temporary file (safe after commit, or on a zeroed struct). */
void ty_atomic_abort(ty_atomic_file *a);

/* The whole file at once. */
toy_status ty_write_file_atomic(const char *path, const void *data, size_t len);

#endif
