/* chat_template_options.c — which chat template toy chat and toy serve use: the model's own
 * (tokenizer.chat_template, run by the Jinja engine) unless --chat-template-file gives
 * another's text or --chat-template names a built-in family; a model without one gets
 * ChatML, said once. --chat-template-kwargs passes variables to the template. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

const char *const chat_template_options_help =
    "  --chat-template NAME    a built-in template family: chatml, llama2, llama3, gemma, phi3,\n"
    "                          mistral-v7, zephyr, ... (default: the model's own template)\n"
    "  --chat-template-file F  a Jinja chat template read from F\n"
    "  --chat-template-kwargs JSON  variables for the template, e.g. '{\"enable_thinking\": false}'\n";

int chat_template_parse_option(const char *cmd, int argc, char **argv, int *i, chat_template_options *o) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    const char **dst = !strcmp(a, "--chat-template")          ? &o->name
                       : !strcmp(a, "--chat-template-file")   ? &o->file
                       : !strcmp(a, "--chat-template-kwargs") ? &o->kwargs
                                                              : NULL;
    if (!dst) return 0;
    if (!v) {
        fprintf(stderr, "toy %s: %s needs a value\n", cmd, a);
        return -1;
    }
    if (dst == &o->name && !toy_chat_template_detect(v)) {
        fprintf(stderr, "toy %s: --chat-template '%s' is not a template family toy knows (chatml, llama2, "
                        "llama3, gemma, phi3, mistral-v7, zephyr, ...); a Jinja template goes in "
                        "--chat-template-file\n", cmd, v);
        return -1;
    }
    if (dst == &o->kwargs) {
        json_error_t je;
        json_t *j = json_loads(v, 0, &je);
        const bool ok = json_is_object(j);
        json_decref(j);
        if (!ok) {
            fprintf(stderr, "toy %s: --chat-template-kwargs must be a JSON object, got '%s'\n", cmd, v);
            return -1;
        }
    }
    *dst = v;
    (*i)++;
    return 1;
}

bool chat_template_options_check(const char *cmd, const chat_template_options *o) {
    if (o->name && o->file) {
        fprintf(stderr, "toy %s: --chat-template and --chat-template-file cannot be combined\n", cmd);
        return false;
    }
    return true;
}

static const char *token_text(const toy_vocab *v, int32_t id) {
    const char *s = id >= 0 ? toy_vocab_token_text(v, id) : NULL;
    return s ? s : "";
}

toy_chat_template *chat_template_open(const char *cmd, const toy_model *m, const chat_template_options *o) {
    toy_chat_template *t = NULL;
    if (o->name) {
        if (toy_chat_template_builtin(o->name, &t)) fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
        return t;
    }
    if (o->file) {
        size_t len;
        char *text = read_text_file(cmd, o->file, &len);
        if (!text) return NULL;
        const toy_vocab *v = toy_model_vocab(m);
        if (toy_chat_template_new(text, token_text(v, toy_vocab_bos(v)), token_text(v, toy_vocab_eos(v)), &t))
            fprintf(stderr, "toy %s: %s: %s\n", cmd, o->file, toy_last_error());
        free(text);
        return t;
    }
    const toy_status st = toy_model_chat_template(m, NULL, &t);
    if (!st) return t;
    /* no template, or one the engine cannot read: the family it looks like, else ChatML */
    const char *family = "chatml";
    if (st == TOY_ERR_NOT_FOUND) {
        fprintf(stderr, "toy %s: the model has no chat template (tokenizer.chat_template): using chatml\n", cmd);
    } else {
        char why[512];
        snprintf(why, sizeof why, "%s", toy_last_error());
        const char *f = NULL;
        toy_chat_template_of(toy_model_gguf(m), &f);
        family = f ? f : "chatml";
        fprintf(stderr, "toy %s: %s; using the built-in %s family instead\n", cmd, why, family);
    }
    if (toy_chat_template_builtin(family, &t)) fprintf(stderr, "toy %s: %s\n", cmd, toy_last_error());
    return t;
}

bool chat_prompt_add_bos(const toy_chat_template *t, const char *prompt) {
    const char *bos = toy_chat_template_bos(t);
    return !*bos || strncmp(prompt, bos, strlen(bos)) != 0;
}
