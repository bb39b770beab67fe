/* fuzz_chat_template.c — libFuzzer target for chat templates: detection over arbitrary
 * template text (toy_chat_template_detect) and formatting of arbitrary message lists
 * (toy_chat_apply) with every family toy knows.
 *
 * Input: the first byte picks a family by name, or (when its top bit is set) the family
 * detected from the input read as a Jinja template; the rest is a message list, messages
 * separated by NUL bytes, each a role byte (0: system, 1: user, 2: assistant, else the
 * byte itself as a one-letter role) followed by its content. Beyond what ASan and UBSan
 * catch, the target traps when a promise is broken: a refusal has a message and gives no
 * text; a prompt is a NUL-terminated string that holds every user message's content
 * (spaces at its ends aside, which some templates trim).
 *
 * tests/unit/test_fuzz_corpus.c includes this file to run the target over
 * fuzz/corpus_chat_template.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "toy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const chat_families[] = {
    "chatml",   "llama2",   "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1", "mistral-v3",
    "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3", "phi4", "falcon3", "zephyr", "monarch",
    "gemma",    "orion",    "openchat",   "vicuna",         "vicuna-orca",      "deepseek",   "deepseek2",
    "deepseek3", "command-r", "llama3",   "chatglm3",       "chatglm4",         "glmedge",    "minicpm",
    "exaone3",  "exaone4",  "rwkv-world", "granite",        "gigachat",         "megrez",     "yandex",
    "bailing",  "llama4",   "smolvlm",    "hunyuan-moe",    "gpt-oss",          "hunyuan-dense", "kimi-k2",
    "seed_oss", "no-such-family",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    /* a NUL-terminated copy of the rest: as template text, and cut into messages */
    char *rest = malloc(size);
    FUZZ_PROMISE(rest != NULL);
    memcpy(rest, data + 1, size - 1);
    rest[size - 1] = 0;
    const char *family;
    if (data[0] & 0x80) {
        family = toy_chat_template_detect(rest);
        if (!family) family = "chatml";
    } else {
        family = chat_families[data[0] % (sizeof chat_families / sizeof *chat_families)];
    }

    enum { MAX_MESSAGES = 64 };
    toy_chat_message m[MAX_MESSAGES];
    char roles[MAX_MESSAGES][2];
    size_t n = 0;
    for (size_t at = 0; at < size - 1 && n < MAX_MESSAGES;) {
        const uint8_t r = (uint8_t)rest[at];
        const char *content = rest + at + 1 <= rest + size - 1 ? rest + at + 1 : "";
        roles[n][0] = (char)(r ? r : '?');
        roles[n][1] = 0;
        m[n].role = r == 0 ? "system" : r == 1 ? "user" : r == 2 ? "assistant" : roles[n];
        m[n].content = content;
        n++;
        at += 1 + strlen(content) + 1;
    }

    char *with = NULL, *without = NULL;
    const toy_status a = toy_chat_apply(family, m, n, true, &with);
    const toy_status b = toy_chat_apply(family, m, n, false, &without);
    if (a) FUZZ_PROMISE(toy_last_error()[0] && !with);
    if (b) FUZZ_PROMISE(!without);
    if (!a) {
        FUZZ_PROMISE(with != NULL);
        for (size_t i = 0; i < n; i++)
            if (!strcmp(m[i].role, "user") && m[i].content[0] && !strstr(with, m[i].content)) {
                /* some templates trim the content (llama.cpp's trim: C isspace): look for it trimmed */
                const char *c = m[i].content;
                size_t len = strlen(c);
                while (len && isspace((unsigned char)c[len - 1])) len--;
                while (len && isspace((unsigned char)*c)) c++, len--;
                FUZZ_PROMISE(len == 0 || memmem(with, strlen(with), c, len) != NULL);
            }
    }
    toy_free(with);
    toy_free(without);
    free(rest);
    return 0;
}
