/* gguf.h — internals of the GGUF reader and writer shared between them. */
#ifndef TOY_GGUF_H
#define TOY_GGUF_H

#include "toy.h"

/* Bytes of a scalar value type; for strings and arrays, their smallest encoding. */
size_t toy_gguf_type_size(toy_gguf_type type);

#endif
