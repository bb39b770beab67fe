/* serve_one.c — one streaming completion over HTTP, from libtoy's callback: listen on a
 * port, take one request whose body is the prompt, and send the continuation as
 * server-sent events while toy_generate produces it, one event per piece of text.
 *
 *   cc serve_one.c $(pkg-config --cflags --libs toy) -o serve_one
 *   ./serve_one model.gguf 8090 &
 *   curl -N --data-binary 'And it came to pass' http://127.0.0.1:8090/
 *
 * The events are OpenAI's streaming shape, cut down: data: {"text": "..."} per piece,
 * then data: [DONE]. Port 0 takes any free port; the first line on stdout says which.
 * A real server (toy serve) handles many requests at once; this shows the callback. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strcasestr */
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <toy.h>

#define MAX_REQUEST (1 << 16)

/* writes all of buf, or fails */
static bool send_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        const ssize_t n = write(fd, buf, len);
        if (n <= 0) return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

/* one event: data: {"text": "<the piece as a JSON string>"} */
static bool send_event(void *user, int32_t token, const char *text, size_t len) {
    (void)token;
    const int fd = *(int *)user;
    if (len == 0) return true;
    char buf[512];
    size_t n = (size_t)snprintf(buf, sizeof buf, "data: {\"text\": \"");
    for (size_t i = 0; i < len; i++) {
        if (n > sizeof buf - 10) { /* room for the longest escape and the end; send what is there */
            if (!send_all(fd, buf, n)) return false;
            n = 0;
        }
        const unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\') n += (size_t)snprintf(buf + n, sizeof buf - n, "\\%c", c);
        else if (c < 0x20) n += (size_t)snprintf(buf + n, sizeof buf - n, "\\u%04x", c);
        else buf[n++] = (char)c;
    }
    memcpy(buf + n, "\"}\n\n", 4);
    return send_all(fd, buf, n + 4); /* false (the client left) stops the generation */
}

/* Reads one request and returns its body (the prompt), NUL-terminated, or NULL. */
static char *read_body(int fd) {
    char *req = malloc(MAX_REQUEST + 1);
    size_t len = 0;
    char *body = NULL;
    long want = -1;
    while (req && len < MAX_REQUEST) {
        const ssize_t n = read(fd, req + len, MAX_REQUEST - len);
        if (n <= 0) break;
        len += (size_t)n;
        req[len] = 0;
        if (!body && (body = strstr(req, "\r\n\r\n"))) {
            body += 4;
            const char *cl = strcasestr(req, "\r\nContent-Length:");
            want = cl ? strtol(cl + 17, NULL, 10) : 0;
        }
        if (body && len - (size_t)(body - req) >= (size_t)want) break;
    }
    if (!body || want < 0 || len - (size_t)(body - req) < (size_t)want) {
        free(req);
        return NULL;
    }
    body[want] = 0;
    memmove(req, body, (size_t)want + 1);
    return req;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PORT\n", argv[0]);
        return 2;
    }
    toy_model *model = NULL;
    toy_context *ctx = NULL;
    toy_sampler *sampler = NULL;
    if (toy_model_load(argv[1], &model) != TOY_OK) {
        fprintf(stderr, "serve_one: %s\n", toy_last_error());
        return 1;
    }

    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t addr_len = sizeof addr;
    const int on = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&addr, &addr_len) != 0) {
        perror("serve_one: listen");
        toy_model_free(model);
        return 1;
    }
    printf("listening on http://127.0.0.1:%d/\n", ntohs(addr.sin_port));
    fflush(stdout);

    int rc = 1;
    int fd = accept(listener, NULL, NULL);
    char *prompt = fd >= 0 ? read_body(fd) : NULL;
    int32_t *tokens = NULL;
    if (!prompt) {
        fprintf(stderr, "serve_one: no request with a body\n");
        goto done;
    }

    toy_context_params cp = toy_context_default_params();
    cp.n_threads = 2;
    toy_sampler_params sp = toy_sampler_default_params();
    sp.temperature = 0.0f; /* greedy, so a test can compare the text */
    int32_t n = 0;
    if (toy_context_new(model, &cp, &ctx) != TOY_OK || toy_sampler_new(&sp, toy_model_n_vocab(model), &sampler) != TOY_OK ||
        toy_tokenize_alloc(toy_model_vocab(model), prompt, strlen(prompt), true, false, &tokens, &n) != TOY_OK) {
        const char *msg = "HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\n";
        send_all(fd, msg, strlen(msg));
        fprintf(stderr, "serve_one: %s\n", toy_last_error());
        goto done;
    }

    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                       "Connection: close\r\n\r\n";
    toy_generate_params gp = toy_generate_default_params();
    gp.max_tokens = 40;
    gp.on_text = send_event;
    gp.user = (void *)&fd;
    if (send_all(fd, head, strlen(head)) && toy_generate(ctx, sampler, tokens, n, &gp, NULL) == TOY_OK) {
        send_all(fd, "data: [DONE]\n\n", 14);
        rc = 0;
    } else {
        fprintf(stderr, "serve_one: %s\n", toy_last_error());
    }
done:
    if (fd >= 0) close(fd);
    close(listener);
    toy_free(tokens);
    free(prompt);
    toy_sampler_free(sampler);
    toy_context_free(ctx);
    toy_model_free(model);
    return rc;
}
