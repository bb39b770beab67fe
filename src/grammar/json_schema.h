/* json_schema.h — JSON Schema to GBNF grammar text (internal).
 *
 * The grammar is in llama.cpp's GBNF dialect and accepts the JSON texts llama.cpp's
 * json-schema-to-grammar accepts: properties in schema order, whitespace bounded to
 * one space or up to two newlines and 20 blanks, numbers of at most 16 integer digits.
 * docs/json-schema.md lists what is supported and where the grammar is narrower than
 * the schema. */
#ifndef TOY_JSON_SCHEMA_H
#define TOY_JSON_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "buffer.h"

/* Appends GBNF rules matching `schema` to out: the rule named `root` matches the
 * schema; every other rule it needs is named `root` + "-" + something, so several
 * conversions can share one grammar text. `root` must match [a-zA-Z0-9-]+. With strict,
 * a keyword or format that is not supported is an error; without, it is ignored (the
 * grammar then accepts more than the schema). Invalid schemas are errors either way.
 * false with err set ("<json pointer>: message", the pointer as a URI fragment, "#" for
 * the schema itself) on an unsupported or invalid schema, or "out of memory". The
 * output is the same bytes for the same schema. */
bool ty_json_schema_gbnf(const json_t *schema, bool strict, const char *root, ty_buf *out, char *err,
                      size_t err_size);

/* Appends rules for any JSON object (response_format json_object), named as above. false
 * only when memory ran out. */
bool ty_json_schema_gbnf_any_object(const char *root, ty_buf *out);

#endif
