/* fuzz_jinja.c — libFuzzer target for the Jinja engine: arbitrary template text rendered
 * over an arbitrary conversation, within tight limits, so that a hostile template meets
 * each of them (steps, memory, output, depth, time) in a fraction of a second.
 *
 * Input: a flags byte (bit 0: add_generation_prompt; bit 1: tools given; bit 2:
 * enable_thinking), the template text up to the first NUL, then the messages, separated
 * by NUL bytes, each a role byte (0: system, 1: user, 2: assistant, 3: tool, else the byte
 * itself as a one-letter role) followed by its content. Beyond what ASan and UBSan catch,
 * the target traps when a promise is broken: a failure has a message and no output; an
 * output is within the output limit; a refusal by raise_exception is a failure.
 *
 * tests/unit/test_fuzz_corpus.c includes this file to run the target over
 * fuzz/corpus_jinja.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t flags = data[0];
    const char *text = (const char *)data + 1;
    const size_t rest = size - 1;
    const char *nul = memchr(text, 0, rest);
    const size_t text_len = nul ? (size_t)(nul - text) : rest;

    json_t *messages = json_array(), *vars = json_object();
    FUZZ_PROMISE(messages && vars);
    for (size_t at = text_len + 1; at < rest && json_array_size(messages) < 64;) {
        const uint8_t r = (uint8_t)text[at];
        const char *content = text + at + 1;
        const char *end = at + 1 < rest ? memchr(content, 0, rest - at - 1) : NULL;
        const size_t len = at + 1 < rest ? (end ? (size_t)(end - content) : rest - at - 1) : 0;
        char role[2] = {(char)(r ? r : '?'), 0};
        json_t *m = json_pack("{s:s, s:s%}", "role",
                              r == 0 ? "system" : r == 1 ? "user" : r == 2 ? "assistant" : r == 3 ? "tool" : role,
                              "content", at + 1 < rest ? content : "", len);
        if (m) json_array_append_new(messages, m); /* (NULL: the content is not UTF-8) */
        at += 1 + len + 1;
    }
    json_object_set_new(vars, "messages", messages);
    json_object_set_new(vars, "tools", (flags & 2) ? json_pack("[{s:s, s:{s:s, s:{s:s}}}]", "type", "function",
                                                               "function", "name", "f", "parameters", "type", "object")
                                                    : json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(flags & 1));
    json_object_set_new(vars, "bos_token", json_string("<s>"));
    json_object_set_new(vars, "eos_token", json_string("</s>"));
    if (flags & 4) json_object_set_new(vars, "enable_thinking", json_false());

    char err[512] = "";
    jinja_template *t = ty_jinja_parse(text, text_len, err, sizeof err);
    if (!t) {
        FUZZ_PROMISE(err[0] != 0);
    } else {
        const jinja_limits lim = {.max_steps = 200000, .max_memory = (size_t)32 << 20, .max_output = (size_t)1 << 20,
                                  .max_depth = 64, .max_seconds = 2};
        bool raised = false;
        size_t len = 0;
        err[0] = 0;
        char *out = ty_jinja_render(t, vars, &lim, &len, &raised, err, sizeof err);
        if (out) FUZZ_PROMISE(len <= lim.max_output && !raised);
        else FUZZ_PROMISE(err[0] != 0);
        free(out);
        ty_jinja_free(t);
    }
    json_decref(vars);
    return 0;
}
