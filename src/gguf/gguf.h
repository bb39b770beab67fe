/* gguf.h — internals of the GGUF reader and writer shared between them. */
#ifndef TOY_GGUF_H
#define TOY_GGUF_H

#include "toy.h"

/* Bytes of a scalar value type; for strings and arrays, their smallest encoding. */
size_t ty_gguf_type_size(toy_gguf_type type);

/* Whether the tensor data lies in a memory map of the file (toy_gguf_open), which the
 * kernel can drop and refill from the file; false for a copy in allocated memory
 * (toy_gguf_open_read) or a caller's buffer, whose pages must be kept. */
bool ty_gguf_is_mapped(const toy_gguf *gguf);

/* Gives the whole pages of [p, p + n), tensor data of a mapped file, back to the kernel:
 * a copy was made and the process's memory need not hold them too. Reading them again
 * refills them from the page cache. Nothing for a copy in memory, which would be zeroed. */
void ty_gguf_drop_pages(const toy_gguf *gguf, const void *p, size_t n);

/* The writer's next file (begin .. finish, or write) goes to memory instead of a path:
 * once finish succeeds, *data holds it (64-byte aligned; the caller frees it) and *size
 * its length. The path given to begin names it in messages. */
void ty_gguf_writer_to_memory(toy_gguf_writer *w, void **data, size_t *size);

#endif
