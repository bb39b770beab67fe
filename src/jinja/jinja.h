/* jinja.h — a Jinja template engine with the semantics of Python's jinja2 as transformers
 * configures it for chat templates (internal).
 *
 * The environment is transformers' apply_chat_template: an ImmutableSandboxedEnvironment
 * with trim_blocks, lstrip_blocks and the loopcontrols extension, no autoescaping, a
 * tojson filter that is json.dumps(x, ensure_ascii=False, indent, separators, sort_keys),
 * and the globals raise_exception(msg) and strftime_now(fmt). Values behave as the Python
 * values jinja2 works on: str indexes by code point, dicts keep their order, 1 == 1.0,
 * printing gives str() (True, None, ['a'], {'k': 1}).
 *
 * A template is parsed once (ty_jinja_parse) and rendered any number of times, from any
 * number of threads (ty_jinja_render only reads it). Rendering is a sandbox: the work, the
 * memory, the output, the nesting and the time are bounded (jinja_limits), only data is
 * reachable (dict keys, list items, and the methods of str, dict and list that read), and
 * every failure is an error with the template's line and column, never a crash. */
#ifndef TOY_JINJA_H
#define TOY_JINJA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jinja_template jinja_template;

typedef struct {
    uint64_t max_steps;       /* expression nodes and loop iterations evaluated */
    size_t max_memory;        /* bytes of values a render may allocate */
    size_t max_output;        /* bytes of output */
    int max_depth;            /* nested macro calls, loops and blocks */
    double max_seconds;       /* wall time: a backstop, the deterministic limits come first */
} jinja_limits;

/* Generous for any real chat template, tight for a hostile one: 20 million steps, 256
 * MiB, 16 MiB of output, depth 200, 10 s. */
jinja_limits ty_jinja_default_limits(void);

/* Parses text (len bytes, UTF-8). NULL on failure with "LINE:COLUMN: message" in err. */
jinja_template *ty_jinja_parse(const char *text, size_t len, char *err, size_t err_size);
void ty_jinja_free(jinja_template *t);

/* Renders with the variables of `vars` (a JSON object: messages, tools, bos_token, ...;
 * JSON integers are ints, reals floats). Returns the malloc'd, NUL-terminated output
 * (*out_len bytes), or NULL with "LINE:COLUMN: message" in err; a raise_exception(msg)
 * of the template gives msg alone, with *raised set (the template refused its input). */
char *ty_jinja_render(const jinja_template *t, const json_t *vars, const jinja_limits *limits, size_t *out_len,
                   bool *raised, char *err, size_t err_size);

/* Whether the template reads the variable `name` anywhere (e.g. "tools", "enable_thinking"). */
bool ty_jinja_reads(const jinja_template *t, const char *name);

#endif
