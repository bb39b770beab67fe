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
#include "generation.h"
#include "utf8.h"

static const char *const chat_usage_head =
    "usage: toy chat [-m MODEL] [--system TEXT] [--chat-template-file F | --chat-template NAME] [options]\n"
    "\n"
    "Talks with the model through its own chat template (tokenizer.chat_template). Lines are\n"
    "edited with the usual keys (libedit); history with up/down. Ctrl-C interrupts a reply;\n"
    "Ctrl-D or /quit ends the chat.\n"
    "\n"
    "  --system TEXT           a system message\n"
    "  --show-reasoning        show a thinking model's reasoning apart from its answer (the default)\n"
    "  --hide-reasoning        show only the answer\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* Text made valid UTF-8: each bad byte becomes U+FFFD (a line typed in another encoding,
 * a reply cut inside a character). With stop_at_partial a character still being written
 * at the end is left out instead. Malloc'd, NULL: no memory. */
static char *clean_utf8(const char *s, size_t n, bool stop_at_partial) {
    char *text = malloc(3 * n + 1);
    if (!text) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const unsigned char *c = (const unsigned char *)s + i;
        const size_t len = ty_utf8_valid_len(c, n - i);
        if (len) {
            memcpy(text + o, c, len);
            o += len, i += len;
            continue;
        }
        const size_t want = c[0] >= 0xF0 ? 4 : c[0] >= 0xE0 ? 3 : c[0] >= 0xC0 ? 2 : 1;
        bool partial = stop_at_partial && want > n - i;
        for (size_t k = 1; partial && k < n - i; k++) partial = (c[k] & 0xC0) == 0x80;
        if (partial) break;
        memcpy(text + o, "\xEF\xBF\xBD", 3);
        o += 3, i++;
    }
    text[o] = 0;
    return text;
}

/* The conversation so far, as OpenAI's messages (reasoning NULL: none). */
static bool add_message(json_t *conv, const char *role, const char *content, const char *reasoning) {
    json_t *m = json_pack("{s:s}", "role", role);
    char *text = clean_utf8(content, strlen(content), false);
    bool ok = m && text && !json_object_set_new(m, "content", json_string(text));
    if (ok && reasoning) ok = !json_object_set_new(m, "reasoning_content", json_string(reasoning));
    free(text);
    return ok && !json_array_append_new(conv, m);
}

/* A reply shown as it is written, read as the template's model writes it: its thinking
 * apart from its answer as ollama shows it ("Thinking...", the reasoning, "...done
 * thinking.", then the answer), or with --hide-reasoning the answer alone. */
typedef struct {
    const toy_chat_template *tmpl;
    const char *prompt;
    bool show_reasoning;
    size_t reasoning_shown, content_shown; /* bytes of each printed (or passed over) */
    bool thinking;                         /* "Thinking..." printed, "...done thinking." not yet */
    char *reasoning, *content;             /* the final parse's, for the history */
} reply_view;

static const char *json_text(const json_t *msg, const char *key) {
    const char *v = json_string_value(json_object_get(msg, key));
    return v ? v : "";
}

static bool show_reply(void *user, const char *reply, size_t len, bool done) {
    reply_view *v = user;
    char *text = clean_utf8(reply, len, !done), *msg_json = NULL;
    if (!text) return false;
    const toy_status st = done ? toy_chat_template_parse(v->tmpl, v->prompt, text, NULL, true, &msg_json)
                               : toy_chat_template_parse_partial(v->tmpl, v->prompt, text, NULL, true, &msg_json);
    free(text);
    json_t *msg = st ? NULL : json_loads(msg_json, 0, NULL);
    free(msg_json);
    if (!msg) return false;
    const char *r = json_text(msg, "reasoning_content"), *c = json_text(msg, "content");
    const size_t nr = strlen(r), nc = strlen(c);
    bool printed = false;
    if (nr > v->reasoning_shown) {
        if (v->show_reasoning) {
            if (!v->reasoning_shown) fputs("Thinking...\n", stdout);
            fputs(r + v->reasoning_shown, stdout);
            v->thinking = printed = true;
        }
        v->reasoning_shown = nr;
    }
    if (v->thinking && (nc > v->content_shown || done)) {
        fputs(nc > v->content_shown ? "\n...done thinking.\n\n" : "\n...done thinking.\n", stdout);
        v->thinking = false;
        printed = true;
    }
    if (nc > v->content_shown) {
        fputs(c + v->content_shown, stdout);
        v->content_shown = nc;
        printed = true;
    }
    fflush(stdout);
    if (done) {
        v->reasoning = nr ? strdup(r) : NULL;
        v->content = strdup(c);
    }
    json_decref(msg);
    return printed;
}

typedef struct {
    gen_options gen;
    const char *system;
    chat_template_options tmpl;
    bool hide_reasoning;
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
        } else if (!strcmp(a, "--show-reasoning") || !strcmp(a, "--hide-reasoning")) {
            o->hide_reasoning = a[2] == 'h';
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

    int rc = 0;
    if (o->system && !add_message(conv, "system", o->system, NULL)) {
        fprintf(stderr, "toy chat: no memory\n");
        rc = 1;
    }
    using_history();
    for (; !rc;) {
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
        const bool added = add_message(conv, "user", line, NULL);
        free(line);
        if (!added) {
            fprintf(stderr, "toy chat: no memory\n");
            rc = 1;
            break;
        }

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
        if (!ok) {
            free(prompt);
            fprintf(stderr, "toy chat: %s\n", toy_last_error());
            rc = 1;
            break;
        }
        /* keep the cached prefix, evaluate only what is new */
        int32_t common = 0;
        while (common < s.n_tokens && common < n - 1 && s.tokens[common] == tokens[common]) common++;
        gen_session_truncate(&s, common);
        reply_view view = {.tmpl = tmpl, .prompt = prompt, .show_reasoning = !o->hide_reasoning};
        const gen_view shown = {show_reply, &view};
        const gen_outcome got = gen_session_generate(&s, "chat", tokens + common, n - common, &shown, &interrupted, NULL);
        free(tokens);
        free(prompt);
        if (got == GEN_NO_ROOM) {
            json_array_remove(conv, json_array_size(conv) - 1); /* the turn did not fit: forget it */
        } else if (got == GEN_FAILED) { /* the grammar allowed no token, say: the chat cannot go on */
            rc = 1;
        } else {
            fputs(interrupted ? " [interrupted]\n" : "\n", stdout);
            /* the answer and its reasoning: the template keeps what its model is shown */
            if (!view.content || !add_message(conv, "assistant", view.content, view.reasoning)) {
                fprintf(stderr, "toy chat: no memory\n");
                rc = 1;
            }
        }
        free(view.content);
        free(view.reasoning);
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
