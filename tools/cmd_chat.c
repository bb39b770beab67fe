/* cmd_chat.c — `toy chat`: an interactive conversation with line editing and history.
 *
 * Each turn the whole conversation is formatted with the chat template and tokenized;
 * the tokens the KV cache already holds (the common prefix) are kept, so only the new
 * part is evaluated. Ctrl-C stops a reply; at the prompt, Ctrl-D or /quit leaves. */
#include <editline/readline.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "generate.h"

static const char *const chat_usage_head =
    "usage: toy chat [-m MODEL] [--system TEXT] [--chat-template NAME] [options]\n"
    "\n"
    "Talks with the model. Lines are edited with the usual keys (libedit); history with\n"
    "up/down. Ctrl-C interrupts a reply; Ctrl-D or /quit ends the chat.\n"
    "\n"
    "  --system TEXT           a system message\n"
    "  --chat-template NAME    chatml, llama2, llama3, gemma, phi3, mistral, zephyr, ...\n"
    "                          (default: recognised from the model's template, else chatml)\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct {
    toy_chat_message *msgs;
    size_t n, cap;
} conversation;

static bool add_message(conversation *c, const char *role, char *content) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        toy_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return false;
        c->msgs = m;
        c->cap = cap;
    }
    c->msgs[c->n++] = (toy_chat_message){role, content};
    return true;
}

/* The template family: --chat-template, else the model's template, else ChatML. */
static const char *choose_template(const char *flag, const toy_model *m) {
    if (flag) {
        const char *f = toy_chat_template_detect(flag);
        if (!f) fprintf(stderr, "toy chat: unknown chat template '%s'; using chatml\n", flag);
        return f ? f : "chatml";
    }
    const char *f;
    if (toy_chat_template_of(toy_model_gguf(m), &f) == TOY_ERR_UNSUPPORTED)
        fprintf(stderr, "toy chat: the model's chat template is not recognised; using chatml\n");
    return f;
}

typedef struct {
    gen_options gen;
    const char *system, *template_flag;
} chat_options;

static int parse_chat_options(int argc, char **argv, chat_options *o) {
    *o = (chat_options){0};
    gen_options_default(&o->gen);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(chat_usage_head, stdout);
            fputs(gen_options_help, stdout);
            fputs(lora_options_help, stdout);
            fputs(trace_options_help, stdout);
            fputs("  -h, --help              this message\n", stdout);
            return 0;
        }
        int r = gen_parse_option("chat", argc, argv, &i, &o->gen);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "--system") && i + 1 < argc) {
            o->system = argv[++i];
        } else if (!strcmp(a, "--chat-template") && i + 1 < argc) {
            o->template_flag = argv[++i];
        } else {
            return unknown_option("chat", a);
        }
    }
    return gen_options_check("chat", &o->gen) ? GO_ON : 2;
}

static int run_chat(const chat_options *o) {
    gen_session s;
    if (!gen_session_open(&s, "chat", &o->gen)) return 1;
    const char *family = choose_template(o->template_flag, s.model);

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: Ctrl-C ends a blocking read too */

    conversation conv = {0};
    if (o->system) add_message(&conv, "system", strdup(o->system));
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
        add_message(&conv, "user", line);

        char *prompt = NULL;
        if (toy_chat_apply(family, conv.msgs, conv.n, true, &prompt)) {
            fprintf(stderr, "toy chat: %s\n", toy_last_error());
            rc = 1;
            break;
        }
        int32_t *tokens = NULL, n = 0;
        /* the template's text holds the special tokens, BOS included where it wants */
        bool ok = !toy_tokenize_alloc(s.vocab, prompt, strlen(prompt), true, true, &tokens, &n);
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
            conv.n--; /* the turn did not fit: forget it */
            free((char *)conv.msgs[conv.n].content);
            continue;
        }
        if (got == GEN_FAILED) { /* the grammar allowed no token, say: the chat cannot go on */
            rc = 1;
            break;
        }
        fputs(interrupted ? " [interrupted]\n" : "\n", stdout);
        add_message(&conv, "assistant", reply ? reply : strdup(""));
    }
    for (size_t i = 0; i < conv.n; i++) free((char *)conv.msgs[i].content);
    free(conv.msgs);
    gen_session_close(&s);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    chat_options o;
    const int rc = parse_chat_options(argc, argv, &o);
    return rc == GO_ON ? run_chat(&o) : rc;
}
