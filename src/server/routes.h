/* routes.h — toy serve's routes, described once. Each row:
 *
 *     X(ID, METHOD, PATH, HANDLER, RULES)
 *
 * ID names the route (ROUTE_ID in gate.h's verdicts); HANDLER is the function of server.c
 * that answers it; RULES are what gate.c checks before a byte of the body is read:
 *   ROUTE_BODY     it reads a JSON body: a Content-Type, where given, must be
 *                  application/json (any route's body is at most --max-body bytes);
 *   ROUTE_OPEN     it answers without the API key (--api-key): /health for load
 *                  balancers, the chat page, which holds nothing and asks for the key;
 *   ROUTE_LOADING  it answers while the weights are being packed (others: 503);
 *   ROUTE_STOPPING it answers while the server shuts down (others: 503).
 * A GET route answers HEAD too; every known path answers OPTIONS (CORS preflights), and
 * a path of no row is a 404, a known path with another method a 405 naming the row's.
 *
 * Adding a route: its row here and its handler in server.c (static enum MHD_Result
 * HANDLER(server *, struct MHD_Connection *, conn_state *)). */
#ifndef TOY_SERVER_ROUTES_H
#define TOY_SERVER_ROUTES_H

enum { ROUTE_BODY = 1, ROUTE_OPEN = 2, ROUTE_LOADING = 4, ROUTE_STOPPING = 8 };

#define SRV_ROUTES(X)                                                                          \
    X(PAGE, "GET", "/", page, ROUTE_OPEN | ROUTE_LOADING)                                      \
    X(HEALTH, "GET", "/health", health, ROUTE_OPEN | ROUTE_LOADING | ROUTE_STOPPING)           \
    X(METRICS, "GET", "/metrics", metrics, ROUTE_LOADING)                                      \
    X(MODELS, "GET", "/v1/models", models, 0)                                                  \
    X(CHAT, "POST", "/v1/chat/completions", chat_completions, ROUTE_BODY)                      \
    X(COMPLETIONS, "POST", "/v1/completions", completions, ROUTE_BODY)                         \
    X(TOKENIZE, "POST", "/tokenize", tokenize, ROUTE_BODY)                                     \
    X(DETOKENIZE, "POST", "/detokenize", detokenize, ROUTE_BODY)                               \
    X(EMBEDDINGS, "POST", "/v1/embeddings", embeddings, ROUTE_BODY)                            \
    X(EMBEDDINGS_UNVERSIONED, "POST", "/embeddings", embeddings, ROUTE_BODY)                   \
    X(APPLY_TEMPLATE, "POST", "/apply-template", apply_template, ROUTE_BODY)

#endif
