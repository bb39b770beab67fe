/* cmd_chat.c — `toy chat`: an interactive conversation with line editing and history.
 *
 * Each turn the whole conversation is formatted with the chat template (the model's own
 * by default) and tokenized; the tokens the KV cache already holds (the common prefix)
 * are kept, so only the new part is evaluated. Ctrl-C stops a reply; at the prompt,
 * Ctrl-D or /quit leaves. */
#include <editline/readline.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "generate.h"
#include "utf8.h"

static const char *const chat_usage_head =
    "usage: toy chat [-m MODEL] [--system TEXT] [--chat-template-file F | --chat-template NAME] [options]\n"
    "\n"
    "Talks with the model through its own chat template (tokenizer.chat_template). Lines are\n"
    "edited with the usual keys (libedit); history with up/down. Ctrl-C interrupts a reply;\n"
    "Ctrl-D or /quit ends the chat.\n"
    "\n"
    "  --system TEXT           a system message\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* The conversation so far, as OpenAI's messages: text that is not UTF-8 (a line typed in
 * another encoding, a reply cut inside a character) gets U+FFFD for each bad byte. */
static bool add_message(json_t *conv, const char *role, const char *content) {
    const size_t n = strlen(content);
    char *text = malloc(3 * n + 1);
    if (!text) return false;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const size_t len = ty_utf8_valid_len((const unsigned char *)content + i, n - i);
        if (len) {
            memcpy(text + o, content + i, len);
            o += len, i += len;
        } else {
            memcpy(text + o, "\xEF\xBF\xBD", 3);
            o += 3, i++;
        }
    }
    text[o] = 0;
    const bool ok = json_array_append_new(conv, json_pack("{s:s, s:s}", "role", role, "content", text)) == 0;
    free(text);
    return ok;
}

typedef struct {
    gen_options gen;
    const char *system;
    chat_template_options tmpl;
} chat_options;

static int parse_chat_options(int argc, char **argv, chat_options *o) {
    *o = (chat_options){0};
    gen_options_default(&o->gen);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(chat_usage_head, stdout);
            fputs(chat_template_options_help, stdout);
            fputs(gen_options_help, stdout);
            fputs(lora_options_help, stdout);
            fputs(trace_options_help, stdout);
            fputs("  -h, --help              this message\n", stdout);
            return 0;
        }
        int r = gen_parse_option("chat", argc, argv, &i, &o->gen);
        if (!r) r = chat_template_parse_option("chat", argc, argv, &i, &o->tmpl);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "--system") && i + 1 < argc) {
            o->system = argv[++i];
        } else {
            return unknown_option("chat", a);
        }
    }
    return gen_options_check("chat", &o->gen) && chat_template_options_check("chat", &o->tmpl) ? GO_ON : 2;
}

static int run_chat(const chat_options *o) {
    gen_session s;
    if (!gen_session_open(&s, "chat", &o->gen)) return 1;
    toy_chat_template *tmpl = chat_template_open("chat", s.model, &o->tmpl);
    json_t *conv = json_array();
    if (!tmpl || !conv) {
        toy_chat_template_free(tmpl);
        json_decref(conv);
        gen_session_close(&s);
        return 1;
    }

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: Ctrl-C ends a blocking read too */

    if (o->system) add_message(conv, "system", o->system);
    using_history();
    int rc = 0;
    for (;;) {
        interrupted = 0;
        char *line = readline("> ");
        if (!line) break; /* Ctrl-D */
        if (interrupted) {
            free(line);
            continue;
        }
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) {
            free(line);
            break;
        }
        if (!*line) {
            free(line);
            continue;
        }
        add_history(line);
        add_message(conv, "user", line);
        free(line);

        char *prompt = NULL, *messages = json_dumps(conv, JSON_COMPACT);
        const toy_status st = messages ? toy_chat_template_render(tmpl, messages, NULL, o->tmpl.kwargs, true, &prompt)
                                       : TOY_ERR_NOMEM;
        free(messages);
        if (st) {
            fprintf(stderr, "toy chat: %s\n", st == TOY_ERR_NOMEM ? "no memory" : toy_last_error());
            rc = 1;
            break;
        }
        int32_t *tokens = NULL, n = 0;
        /* the template's text holds the special tokens, and BOS where it wants one */
        bool ok = !toy_tokenize_alloc(s.vocab, prompt, strlen(prompt), chat_prompt_add_bos(tmpl, prompt), true,
                                      &tokens, &n);
        free(prompt);
        if (!ok) {
            fprintf(stderr, "toy chat: %s\n", toy_last_error());
            rc = 1;
            break;
        }
        /* keep the cached prefix, evaluate only what is new */
        int32_t common = 0;
        while (common < s.n_tokens && common < n - 1 && s.tokens[common] == tokens[common]) common++;
        gen_session_truncate(&s, common);
        char *reply = NULL;
        const gen_outcome got =
            gen_session_generate(&s, "chat", tokens + common, n - common, stdout, &interrupted, &reply);
        free(tokens);
        if (got == GEN_NO_ROOM) {
            json_array_remove(conv, json_array_size(conv) - 1); /* the turn did not fit: forget it */
            continue;
        }
        if (got == GEN_FAILED) { /* the grammar allowed no token, say: the chat cannot go on */
            rc = 1;
            break;
        }
        fputs(interrupted ? " [interrupted]\n" : "\n", stdout);
        add_message(conv, "assistant", reply ? reply : "");
        free(reply);
    }
    json_decref(conv);
    toy_chat_template_free(tmpl);
    gen_session_close(&s);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    chat_options o;
    const int rc = parse_chat_options(argc, argv, &o);
    return rc == GO_ON ? run_chat(&o) : rc;
}
