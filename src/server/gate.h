/* gate.h — what a request must pass when its headers arrive, before a byte of its body is
 * read: the server's state (stopping, too many connections), the Host and Origin headers
 * that keep web pages in a browser out (DNS rebinding, cross-site requests), CORS
 * preflights, the API key, the route and method, the Content-Type and the body's length;
 * the routes and their rules are routes.h's table.
 *
 * A pure function of the headers and the configuration, so that the fuzzer drives it as
 * the HTTP layer does. */
#ifndef TOY_SERVER_GATE_H
#define TOY_SERVER_GATE_H

#include <stdbool.h>
#include <stddef.h>

#include "openai.h"
#include "routes.h"

/* The routes of routes.h, by ID: ROUTE_PAGE, ROUTE_HEALTH, ... in its order. */
#define GATE_ROUTE_ID(id, method, path, handler, rules) ROUTE_##id,
typedef enum { ROUTE_NONE = -1, SRV_ROUTES(GATE_ROUTE_ID) ROUTE_COUNT } gate_route;
#undef GATE_ROUTE_ID

typedef struct {
    const char *api_key;   /* NULL: none */
    const char *bind_host; /* the address listened on (an IPv4 or IPv6 literal) */
    const char *const *host_aliases; /* more names the Host header may give (--host-alias) */
    int n_host_aliases;
    const char *const *cors_origins; /* origins whose pages may call the API ("*": any) */
    int n_cors_origins;
    size_t max_body;
    int max_connections;
} gate_config;

/* The request line and the headers the gate reads (NULL: absent). */
typedef struct {
    const char *method, *url;
    const char *host, *origin, *authorization, *content_type, *content_length;
    const char *preflight_method; /* Access-Control-Request-Method */
    int open_connections;         /* this one included */
    bool stopping;
    bool loading;                 /* the weights are being prepared: only /health, the page and /metrics */
} gate_request;

typedef struct {
    int status;           /* 0: read the body and serve the route; else answer this now */
    gate_route route;
    const char *allow;    /* the Allow header: the route's methods (405, OPTIONS) */
    bool cors;            /* the request's Origin may read the answer: echo it */
    bool retry_after;     /* 503: Retry-After */
    size_t body_length;   /* from Content-Length; SIZE_MAX when none was given */
    oai_error err;        /* status >= 400: the error object */
} gate_verdict;

void gate_check(const gate_config *c, const gate_request *r, gate_verdict *v);

/* Whether the server listens on a loopback address only: then the Host header must name
 * it (localhost, 127.0.0.1, [::1], the address, or an alias). */
bool gate_loopback(const char *bind_host);

/* The CORS headers of an answer to a preflight (method, headers, max age). */
#define GATE_CORS_ALLOW_HEADERS "Authorization, Content-Type"
#define GATE_CORS_MAX_AGE "600"

#endif
