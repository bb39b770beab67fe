/* gate.c — see gate.h. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gate.h"

/* routes.h's table: a route's method, path and rules, by its ID */
static const struct {
    const char *method, *path;
    int rules;
} routes[ROUTE_COUNT] = {
#define GATE_ROUTE_ROW(id, method, path, handler, rules) [ROUTE_##id] = {method, path, rules},
    SRV_ROUTES(GATE_ROUTE_ROW)
#undef GATE_ROUTE_ROW
};

static bool stop(gate_verdict *v, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool stop(gate_verdict *v, int status, const char *fmt, ...) {
    char msg[sizeof v->err.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    v->status = status;
    oai_fail(&v->err, status, NULL, "%s", msg);
    return false;
}

bool gate_loopback(const char *bind_host) {
    return !strncmp(bind_host, "127.", 4) || !strcmp(bind_host, "::1");
}

/* The host name of a Host header, without the port: "[::1]:8080" -> "[::1]". */
static size_t host_name_len(const char *host) {
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        return end ? (size_t)(end - host) + 1 : strlen(host);
    }
    return strcspn(host, ":");
}

static bool name_is(const char *name, size_t len, const char *want, bool bracket) {
    const size_t n = strlen(want);
    if (bracket) return len == n + 2 && name[0] == '[' && !strncasecmp(name + 1, want, n) && name[len - 1] == ']';
    return len == n && !strncasecmp(name, want, n);
}

static bool host_allowed(const gate_config *c, const char *host) {
    const size_t len = host_name_len(host);
    if (name_is(host, len, "localhost", false) || name_is(host, len, "127.0.0.1", false) ||
        name_is(host, len, "::1", true))
        return true;
    const bool v6 = strchr(c->bind_host, ':') != NULL;
    if (name_is(host, len, c->bind_host, v6)) return true;
    for (int i = 0; i < c->n_host_aliases; i++)
        if (name_is(host, len, c->host_aliases[i], false)) return true;
    return false;
}

static bool cors_listed(const gate_config *c, const char *origin) {
    for (int i = 0; i < c->n_cors_origins; i++)
        if (!strcmp(c->cors_origins[i], "*") || !strcasecmp(c->cors_origins[i], origin)) return true;
    return false;
}

/* A page may call the API if it was served by this server (its Origin names the Host the
 * request went to) or its origin is one of --cors-origin. */
static bool origin_allowed(const gate_config *c, const char *origin, const char *host) {
    const char *sep = strstr(origin, "://");
    return (sep && host && !strcasecmp(sep + 3, host)) || cors_listed(c, origin);
}

/* the same time whatever the key's first wrong byte */
static bool key_matches(const char *key, const char *authorization) {
    if (!authorization || strncmp(authorization, "Bearer ", 7)) return false;
    const char *given = authorization + 7;
    const size_t lk = strlen(key), lg = strlen(given);
    unsigned diff = lk != lg;
    for (size_t i = 0; i < lk; i++) diff |= (unsigned)(key[i] ^ (i < lg ? given[i] : 0));
    return diff == 0;
}

/* application/json, any case, with parameters (charset) or not */
static bool is_json_type(const char *type) {
    while (*type == ' ' || *type == '\t') type++;
    const size_t n = strlen("application/json");
    if (strncasecmp(type, "application/json", n)) return false;
    const char *rest = type + n;
    while (*rest == ' ' || *rest == '\t') rest++;
    return *rest == 0 || *rest == ';';
}

static bool check(const gate_config *c, const gate_request *r, gate_verdict *v) {
    bool path_known = false;
    const char *route_method = NULL;
    for (int i = 0; i < ROUTE_COUNT; i++) {
        if (strcmp(r->url, routes[i].path)) continue;
        path_known = true;
        route_method = routes[i].method;
        if (!strcmp(r->method, routes[i].method) || (!strcmp(r->method, "HEAD") && !strcmp(routes[i].method, "GET")))
            v->route = (gate_route)i;
    }
    if (path_known) v->allow = !strcmp(route_method, "POST") ? "POST, OPTIONS" : "GET, HEAD, OPTIONS";
    const int rules = v->route == ROUTE_NONE ? 0 : routes[v->route].rules;

    if (r->stopping && !(rules & ROUTE_STOPPING)) {
        v->retry_after = true;
        return stop(v, 503, "the server is shutting down");
    }
    if (r->loading && !(rules & ROUTE_LOADING)) {
        v->retry_after = true;
        return stop(v, 503, "the model is loading: try again when /health answers 200");
    }
    if (r->open_connections > c->max_connections) {
        v->retry_after = true;
        return stop(v, 503, "too many connections (over --max-connections %d): try again", c->max_connections);
    }
    if (gate_loopback(c->bind_host) && r->host && !host_allowed(c, r->host))
        return stop(v, 403,
                    "the Host '%.200s' is not this server's: it listens on %s only (a name it should answer to: "
                    "--host-alias NAME)",
                    r->host, c->bind_host);
    if (r->origin) {
        if (!origin_allowed(c, r->origin, r->host))
            return stop(v, 403, "pages from the origin '%.200s' may not use this server (allow them with --cors-origin)",
                        r->origin);
        v->cors = cors_listed(c, r->origin);
    }
    if (!strcmp(r->method, "OPTIONS")) { /* a CORS preflight, or a question about methods */
        if (!path_known) return stop(v, 404, "no route OPTIONS %.500s", r->url);
        if (r->preflight_method && !r->origin) return stop(v, 400, "a preflight without an Origin");
        v->status = 204;
        return false;
    }
    if (!(rules & ROUTE_OPEN) && c->api_key && !key_matches(c->api_key, r->authorization))
        return stop(v, 401, "a valid API key is needed: Authorization: Bearer KEY");
    if (!path_known) return stop(v, 404, "no route %.50s %.500s", r->method, r->url);
    if (v->route == ROUTE_NONE) return stop(v, 405, "%.500s does not take %.50s (only %s)", r->url, r->method, v->allow);
    if ((rules & ROUTE_BODY) && r->content_type && !is_json_type(r->content_type))
        return stop(v, 415, "the request body must be JSON: Content-Type: application/json, not '%.200s'",
                    r->content_type);
    if (r->content_length) {
        char *end;
        const unsigned long long n = strtoull(r->content_length, &end, 10);
        if (end == r->content_length || *end || r->content_length[0] == '-')
            return stop(v, 400, "Content-Length '%.50s' is not a number", r->content_length);
        if (n > c->max_body)
            return stop(v, 413, "the request body is %llu bytes, over the limit of %zu (--max-body)", n, c->max_body);
        v->body_length = (size_t)n;
    }
    return true;
}

void gate_check(const gate_config *c, const gate_request *r, gate_verdict *v) {
    memset(v, 0, sizeof *v);
    v->route = ROUTE_NONE;
    v->body_length = SIZE_MAX;
    check(c, r, v);
}
