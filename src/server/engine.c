/* engine.c — the slots and the step loop of engine.h.
 *
 * Whatever goes wrong with one request (a choice that cannot start, a forward pass its
 * tokens make fail, no memory for its events) ends that request with an SRV_EV_ERROR
 * and frees its slots; the queue moves on and every other request's tokens are those it
 * would have had alone. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "piece.h"
#include "sampler.h"
#include "error.h"
#include "clock.h"

struct srv_request {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    srv_engine *engine;
    int refs;        /* the client's and one per choice not finished */
    srv_params p;
    srv_event *ev;   /* a FIFO: ev[head .. n_ev) are waiting */
    int n_ev, cap_ev, head;
    int n_done;
    int cancelled;   /* read by the engine without the lock: only ever goes 0 -> 1 */
    int fail_status; /* 0, or the HTTP status of the failure that ended the request */
    char fail_message[256];
    bool fail_delivered;
    int32_t n_completion, n_cached;
};

typedef struct {
    srv_request *req; /* NULL: idle */
    int choice;
    int32_t *cache;   /* the tokens in this slot's KV sequence */
    int32_t n_cache;
    bool decoding;    /* the prompt is read: next_token is to be evaluated */
    int32_t next_token;
    int32_t produced;
    toy_sampler *sampler;
    toy_stop *stop;
    int32_t batch_first;  /* the slot's rows of the last batch: batch_first .. + batch_n */
    int32_t batch_n;
    int32_t batch_row;    /* the slot's logits in the last batch, -1: none */
    int32_t batch_tokens; /* prompt tokens it put in the last batch */
    uint64_t last_used;
    double *pool;         /* an embedding job's sum of states (mean) or the state kept (cls, last) [n_embd] */
} slot;

typedef struct {
    srv_request *req;
    int choice;
} job;

#define ENGINE_MAX_GROUPS 64 /* groups of slots in flight at once: a pipeline's stages at most */

struct srv_engine {
    toy_model *model;
    const toy_vocab *vocab;
    toy_context *ctx;
    srv_engine_params p;
    slot *slots;
    float *logits; /* a copy of one row, for ignore_eos and the log-probabilities */
    int32_t *eog;  /* the end-of-generation tokens, for ignore_eos */
    float *embd;   /* an embedding job's vector, as its DONE event sends it [n_embd] */
    int32_t n_eog;
    int32_t *b_token, *b_pos, *b_seq;
    int8_t *b_logits;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    job *queue;
    int q_head, q_len;
    int q_cap; /* queue_max + n_parallel: the choices that idle slots have not yet taken, and the waiting */
    bool stopping;
    int abort_status; /* srv_engine_abort: end every request with this status */
    char abort_message[256];
    double last_progress; /* when the engine last finished a step or found no work */
    uint64_t clock;
    srv_metrics m;
    /* In a pipeline of stages (toy_decode_depth > 1) the slots form as many groups (slot
     * i in group i % n_groups), each with at most one batch in flight, so that every stage
     * works on one group's batch while the next works on another's. Alone: one group. */
    int n_groups;
    int inflight[ENGINE_MAX_GROUPS]; /* the groups whose batches are in flight, oldest first */
    int n_inflight, next_group;
};

/* ---------------------------------------------------------------- requests */

static void params_free(srv_params *p) {
    free(p->prompt);
    for (size_t i = 0; i < p->n_stops; i++) free(p->stops[i]);
    toy_grammar_free(p->grammar);
    free(p->logit_bias);
    memset(p, 0, sizeof *p);
}

static void request_unref(srv_request *r) {
    pthread_mutex_lock(&r->lock);
    const int left = --r->refs;
    pthread_mutex_unlock(&r->lock);
    if (left) return;
    for (int i = r->head; i < r->n_ev; i++) free(r->ev[i].text);
    free(r->ev);
    params_free(&r->p);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
}

static void request_fail_locked(srv_request *r, int status, const char *message) {
    if (!r->fail_status) {
        r->fail_status = status;
        snprintf(r->fail_message, sizeof r->fail_message, "%s", message);
    }
    __atomic_store_n(&r->cancelled, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&r->cond);
}

/* Ends the request with an error (the first failure's is the one reported): its client
 * gets SRV_EV_ERROR, and its other choices end at the engine's next step. */
static void request_fail(srv_request *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void request_fail(srv_request *r, int status, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&r->lock);
    request_fail_locked(r, status, msg);
    pthread_mutex_unlock(&r->lock);
}

/* The HTTP status of a library failure: the request's fault or the server's. */
static int status_of(toy_status st) { return st == TOY_ERR_INVALID ? 400 : 500; }

/* Appends an event (text copied); with no memory for it the request fails, and a DONE
 * still counts, so the client is never left waiting. */
static void push_event(srv_request *r, const srv_event *ev, const char *text, size_t len) {
    pthread_mutex_lock(&r->lock);
    if (ev->kind == SRV_EV_DONE) r->n_done++;
    if (r->n_ev == r->cap_ev) {
        if (r->head > 0) { /* reuse the consumed front */
            memmove(r->ev, r->ev + r->head, (size_t)(r->n_ev - r->head) * sizeof *r->ev);
            r->n_ev -= r->head;
            r->head = 0;
        }
        if (r->n_ev == r->cap_ev) {
            const int cap = r->cap_ev ? 2 * r->cap_ev : 16;
            srv_event *e = realloc(r->ev, (size_t)cap * sizeof *e);
            if (e) {
                r->ev = e;
                r->cap_ev = cap;
            }
        }
    }
    char *copy = r->n_ev < r->cap_ev ? malloc(len + 1) : NULL;
    if (copy) {
        memcpy(copy, text, len);
        copy[len] = 0;
        srv_event *dst = &r->ev[r->n_ev++];
        *dst = *ev;
        dst->text = copy;
        dst->len = len;
    } else {
        request_fail_locked(r, 500, "no memory for the reply");
    }
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

bool srv_next_event(srv_request *r, srv_event *ev, int timeout_ms) {
    pthread_mutex_lock(&r->lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_ms > 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    }
    while (r->head == r->n_ev && r->n_done < r->p.n_choices && !r->fail_status) {
        if (timeout_ms == 0) break;
        if (timeout_ms < 0) pthread_cond_wait(&r->cond, &r->lock);
        else if (pthread_cond_timedwait(&r->cond, &r->lock, &until)) break;
    }
    bool got = false;
    if (r->fail_status) { /* the error, once, before anything else still waiting */
        if (!r->fail_delivered) {
            *ev = (srv_event){.kind = SRV_EV_ERROR, .status = r->fail_status, .text = strdup(r->fail_message)};
            ev->len = ev->text ? strlen(ev->text) : 0;
            r->fail_delivered = got = true;
        }
    } else if (r->head < r->n_ev) {
        *ev = r->ev[r->head++];
        got = true;
    }
    pthread_mutex_unlock(&r->lock);
    return got;
}

void srv_event_clear(srv_event *ev) {
    free(ev->text);
    ev->text = NULL;
}

void srv_cancel(srv_request *r) {
    __atomic_store_n(&r->cancelled, 1, __ATOMIC_RELEASE);
    srv_engine *e = r->engine;
    pthread_mutex_lock(&e->lock);
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->lock);
}

void srv_request_release(srv_request *r) { request_unref(r); }

void srv_request_usage(srv_request *r, int32_t *prompt, int32_t *completion, int32_t *cached) {
    pthread_mutex_lock(&r->lock);
    *prompt = r->p.n_prompt;
    *completion = r->n_completion;
    *cached = r->n_cached;
    pthread_mutex_unlock(&r->lock);
}

/* ---------------------------------------------------------------- slots */

static void slot_finish(srv_engine *e, slot *s, const char *reason) {
    srv_request *r = s->req;
    /* counted idle before the reply's last event goes out: a client that submits again at
     * once must find it so (srv_submit), not the count of the engine's last pass (under
     * the sanitizers, the next pass came late enough for such a request to get 503) */
    pthread_mutex_lock(&e->lock);
    e->m.busy_slots--;
    pthread_mutex_unlock(&e->lock);
    if (reason && !__atomic_load_n(&r->cancelled, __ATOMIC_ACQUIRE)) {
        const char *rest = (const char *)e->embd;
        size_t rest_len = (size_t)toy_model_n_embd(e->model) * sizeof *e->embd;
        if (!r->p.embedding) toy_stop_flush(s->stop, &rest, &rest_len);
        srv_event ev = {.kind = SRV_EV_DONE, .choice = s->choice, .finish_reason = reason};
        push_event(r, &ev, rest, rest_len);
    } else {
        srv_event ev = {.kind = SRV_EV_DONE, .choice = s->choice, .finish_reason = "stop"};
        push_event(r, &ev, "", 0);
    }
    toy_sampler_free(s->sampler);
    toy_stop_free(s->stop);
    s->sampler = NULL;
    s->stop = NULL;
    s->req = NULL;
    s->decoding = false;
    s->last_used = ++e->clock;
    request_unref(r);
}

/* Ends the slot's request with an error; the slot's cache, whose last tokens may not
 * have been evaluated, is emptied. */
static void slot_fail(srv_engine *e, slot *s, int status, const char *message) {
    request_fail(s->req, status, "%s", message);
    toy_kv_seq_rm(e->ctx, (int32_t)(s - e->slots), 0, -1);
    s->n_cache = 0;
    slot_finish(e, s, NULL);
}

/* A choice that never got a slot: its DONE, so that the request's count of finished
 * choices is whole. */
static void job_end(const job *j) {
    srv_event ev = {.kind = SRV_EV_DONE, .choice = j->choice, .finish_reason = "stop"};
    push_event(j->req, &ev, "", 0);
    request_unref(j->req);
}

static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

typedef enum { START_OK, START_NO_SLOT, START_FAILED } start_result;

/* Gives slot s (holding the first s->n_cache tokens of the prompt) the longest prefix of
 * the prompt that another slot holds, idle or busy (a busy slot's cells below its n_cache
 * are final), by copying that slot's cells, up to limit tokens. Returns the tokens
 * copied. */
static int32_t slot_copy_prefix(srv_engine *e, slot *s, const int32_t *prompt, int32_t limit) {
    const slot *from = NULL;
    int32_t longest = s->n_cache;
    for (int i = 0; i < e->p.n_parallel; i++) {
        const slot *d = &e->slots[i];
        const int32_t c = d == s ? 0 : common_prefix(d->cache, d->n_cache, prompt, limit);
        if (c > longest) from = d, longest = c;
    }
    const int32_t have = s->n_cache;
    if (!from || toy_kv_seq_cp(e->ctx, (int32_t)(from - e->slots), (int32_t)(s - e->slots), have, longest))
        return 0;
    memcpy(s->cache + have, from->cache + have, (size_t)(longest - have) * sizeof *s->cache);
    s->n_cache = longest;
    __atomic_fetch_add(&e->m.cached_tokens, longest - have, __ATOMIC_RELAXED);
    return longest - have;
}

/* An embedding job in an idle slot: its states pool from the first token, so the slot's
 * cache is emptied (and holds the job's tokens once it is done). */
static start_result embedding_start(srv_engine *e, slot *s, const job *j) {
    const srv_params *p = &j->req->p;
    if (!s->pool) {
        request_fail(j->req, 500, "this engine keeps no token states: embeddings are off");
        return START_FAILED;
    }
    if (p->pooling != TOY_POOLING_MEAN && p->pooling != TOY_POOLING_CLS && p->pooling != TOY_POOLING_LAST) {
        request_fail(j->req, 400, "pooling %d is not mean, cls or last", (int)p->pooling);
        return START_FAILED;
    }
    toy_kv_seq_rm(e->ctx, (int32_t)(s - e->slots), 0, -1);
    s->n_cache = 0;
    memset(s->pool, 0, (size_t)toy_model_n_embd(e->model) * sizeof *s->pool);
    s->req = j->req;
    s->choice = j->choice;
    s->decoding = false;
    s->produced = 0;
    return START_OK;
}

/* Puts a job in an idle slot: the one that holds the longest prefix of its prompt (the
 * least recently used among equals); a longer prefix held by any other slot is copied
 * in. With cache_prompt false, the least recently used slot, emptied. START_FAILED: the
 * job's request has failed (its sampler or stop strings were refused, or no memory) and
 * the slot stays idle. */
static start_result slot_start(srv_engine *e, const job *j) {
    const srv_params *p = &j->req->p;
    const bool reuse = !p->no_cache_prompt;
    slot *best = NULL;
    int32_t best_common = -1;
    for (int i = 0; i < e->p.n_parallel; i++) {
        slot *s = &e->slots[i];
        if (s->req) continue;
        /* an embedding job reuses no prefix: the least recently used slot */
        const int32_t c = reuse && !p->embedding ? common_prefix(s->cache, s->n_cache, p->prompt, p->n_prompt) : 0;
        if (c > best_common || (c == best_common && s->last_used < best->last_used)) {
            best = s;
            best_common = c;
        }
    }
    if (!best) return START_NO_SLOT;
    if (p->embedding) return embedding_start(e, best, j);
    toy_sampler_params sp = p->sampling;
    sp.seed += (uint64_t)j->choice;
    toy_status st = toy_sampler_new(&sp, toy_model_n_vocab(e->model), &best->sampler);
    if (!st) st = toy_stop_new((const char *const *)p->stops, p->n_stops, &best->stop);
    if (st) {
        request_fail(j->req, status_of(st), "the request cannot start: %s", toy_last_error());
        toy_sampler_free(best->sampler);
        best->sampler = NULL;
        return START_FAILED;
    }
    /* the last prompt token is always evaluated again: its logits start the reply */
    const int32_t keep = best_common < p->n_prompt ? best_common : p->n_prompt - 1;
    toy_kv_seq_rm(e->ctx, (int32_t)(best - e->slots), keep, -1);
    best->n_cache = keep;
    __atomic_fetch_add(&e->m.cached_tokens, keep, __ATOMIC_RELAXED);
    if (reuse) slot_copy_prefix(e, best, p->prompt, p->n_prompt - 1);
    /* as toy run: the prompt goes into the penalties' history before the first sample */
    for (int32_t i = 0; i < p->n_prompt; i++) toy_sampler_accept(best->sampler, p->prompt[i]);
    best->req = j->req;
    best->choice = j->choice;
    best->decoding = false;
    best->produced = 0;
    if (j->choice == 0) {
        pthread_mutex_lock(&j->req->lock);
        j->req->n_cached = best->n_cache;
        pthread_mutex_unlock(&j->req->lock);
    }
    return START_OK;
}

/* log-softmax of the token and the top alternatives, from the raw logits */
static void logprobs(const float *logits, int32_t n_vocab, int n_top, srv_event *ev) {
    float mx = -INFINITY;
    for (int32_t v = 0; v < n_vocab; v++) mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (int32_t v = 0; v < n_vocab; v++) sum += exp((double)logits[v] - mx);
    const double lse = mx + log(sum);
    ev->logprob = (float)(logits[ev->token] - lse);
    ev->n_top = n_top < n_vocab ? n_top : n_vocab;
    for (int k = 0; k < ev->n_top; k++) { /* selection, highest first, lower id on ties */
        int32_t best = -1;
        for (int32_t v = 0; v < n_vocab; v++) {
            bool taken = false;
            for (int i = 0; i < k && !taken; i++) taken = ev->top_token[i] == v;
            if (!taken && (best < 0 || logits[v] > logits[best])) best = v;
        }
        ev->top_token[k] = best;
        ev->top_logprob[k] = (float)(logits[best] - lse);
    }
}

/* Samples the slot's next token from the logits of row `row` of the last batch and
 * reports it, or ends the slot. */
static void slot_sample(srv_engine *e, slot *s, int32_t row) {
    const srv_params *p = &s->req->p;
    if (p->max_tokens == 0) { /* the prompt is read (and cached); nothing to generate */
        slot_finish(e, s, "length");
        return;
    }
    const int32_t n_vocab = toy_model_n_vocab(e->model);
    const float *raw = toy_get_logits(e->ctx, row), *logits = raw;
    if (!raw) {
        slot_fail(e, s, 500, "the forward pass gave no logits");
        return;
    }
    if (p->ignore_eos) { /* as llama-server: end-of-generation tokens get -inf */
        memcpy(e->logits, raw, (size_t)n_vocab * sizeof *raw);
        for (int32_t i = 0; i < e->n_eog; i++) e->logits[e->eog[i]] = -INFINITY;
        logits = e->logits;
    }
    const int32_t tok = toy_sampler_sample(s->sampler, logits);
    if (tok < 0) { /* the grammar allows no token here: its text has ended, or it cannot go on */
        if (ty_sampler_grammar_complete(s->sampler)) slot_finish(e, s, "stop"); /* ignore_eos */
        else slot_fail(e, s, 400, toy_last_error());
        return;
    }
    toy_sampler_accept(s->sampler, tok);
    if (toy_vocab_is_eog(e->vocab, tok)) {
        slot_finish(e, s, "stop");
        return;
    }
    srv_event ev = {.kind = SRV_EV_TOKEN, .choice = s->choice, .token = tok};
    if (p->top_logprobs >= 0) logprobs(raw, n_vocab, p->top_logprobs, &ev);
    srv_piece piece;
    if (!srv_piece_of(e->vocab, tok, &piece)) {
        slot_fail(e, s, 500, "no memory for a token's text");
        return;
    }
    const char *emit;
    size_t emit_len;
    const bool stopped = toy_stop_feed(s->stop, piece.text, piece.len, &emit, &emit_len);
    srv_piece_free(&piece);
    s->produced++;
    __atomic_fetch_add(&e->m.generated_tokens, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&s->req->lock);
    s->req->n_completion++;
    pthread_mutex_unlock(&s->req->lock);
    push_event(s->req, &ev, emit, emit_len);
    if (stopped) slot_finish(e, s, "stop");
    else if (p->max_tokens >= 0 && s->produced >= p->max_tokens) slot_finish(e, s, "length");
    else if (s->n_cache >= e->p.n_ctx) slot_finish(e, s, "length"); /* as toy run: context full */
    else {
        s->decoding = true;
        s->next_token = tok;
    }
}

/* ---------------------------------------------------------------- the step loop */

/* The prompt is read once for all the choices of a request: a later choice copies what
 * the others have read, and waits while an earlier one reads on (choice 0 never waits).
 * true: the slot waits this step. */
static bool slot_follows(srv_engine *e, slot *s) {
    const srv_params *p = &s->req->p;
    if (s->choice == 0 || p->no_cache_prompt) return false;
    slot_copy_prefix(e, s, p->prompt, p->n_prompt - 1);
    for (int i = 0; i < e->p.n_parallel && s->n_cache < p->n_prompt - 1; i++) {
        const slot *d = &e->slots[i];
        if (d->req == s->req && d->choice < s->choice && !d->decoding) return true;
    }
    return false;
}

/* One batch of group g's slots: every generating slot's next token, then prompt chunks
 * while the batch has room, the slots taken in turn from a rotating start so that none
 * waits for long. A slot's rows are contiguous (batch_first, batch_n). */
static int32_t build_batch(srv_engine *e, int start, int g) {
    int32_t n = 0;
    for (int i = 0; i < e->p.n_parallel; i++) {
        slot *s = &e->slots[i];
        if (i % e->n_groups != g) continue;
        s->batch_row = -1;
        s->batch_first = s->batch_n = s->batch_tokens = 0;
        if (!s->req || !s->decoding) continue;
        e->b_token[n] = s->next_token;
        e->b_pos[n] = s->n_cache;
        e->b_seq[n] = i;
        e->b_logits[n] = 1;
        s->batch_first = n;
        s->batch_n = 1;
        s->batch_row = n++;
    }
    for (int k = 0; k < e->p.n_parallel && n < e->p.n_batch; k++) {
        const int i = (start + k) % e->p.n_parallel;
        slot *s = &e->slots[i];
        if (i % e->n_groups != g || !s->req || s->decoding || slot_follows(e, s)) continue;
        const srv_params *p = &s->req->p;
        int32_t m = p->n_prompt - s->n_cache;
        if (m > e->p.prefill_chunk) m = e->p.prefill_chunk;
        if (m > e->p.n_batch - n) m = e->p.n_batch - n;
        for (int32_t t = 0; t < m; t++) {
            e->b_token[n + t] = p->prompt[s->n_cache + t];
            e->b_pos[n + t] = s->n_cache + t;
            e->b_seq[n + t] = i;
            e->b_logits[n + t] = 0;
        }
        if (s->n_cache + m == p->n_prompt && !p->embedding) { /* the prompt's last token: logits for the reply */
            e->b_logits[n + m - 1] = 1;
            s->batch_row = n + m - 1;
        }
        s->batch_first = n;
        s->batch_n = m;
        s->batch_tokens = m;
        n += m;
    }
    return n;
}

/* An embedding job's prompt rows of the last batch, from `row`, go into its pool: every
 * state summed (mean), or the first or last token's kept. false: the batch kept none. */
static bool embedding_pool(srv_engine *e, slot *s, int32_t row) {
    const srv_params *p = &s->req->p;
    const int32_t n_embd = toy_model_n_embd(e->model);
    for (int32_t t = 0; t < s->batch_tokens; t++) {
        const float *h = toy_get_embeddings(e->ctx, row + t);
        if (!h) return false;
        const int32_t pos = s->n_cache + t;
        if (p->pooling == TOY_POOLING_MEAN)
            for (int32_t d = 0; d < n_embd; d++) s->pool[d] += h[d];
        else if ((p->pooling == TOY_POOLING_CLS && pos == 0) ||
                 (p->pooling == TOY_POOLING_LAST && pos == p->n_prompt - 1))
            for (int32_t d = 0; d < n_embd; d++) s->pool[d] = h[d];
    }
    return true;
}

/* The pooled vector, L2-normalised (a zero vector stays zero, as llama.cpp's
 * common_embd_normalize leaves it), into e->embd for the job's DONE event. */
static void embedding_vector(srv_engine *e, const slot *s) {
    const int32_t n_embd = toy_model_n_embd(e->model);
    const double scale = s->req->p.pooling == TOY_POOLING_MEAN ? 1.0 / s->req->p.n_prompt : 1.0;
    double sum = 0;
    for (int32_t d = 0; d < n_embd; d++) sum += (s->pool[d] * scale) * (s->pool[d] * scale);
    const double inv = sum > 0 ? 1.0 / sqrt(sum) : 0.0;
    for (int32_t d = 0; d < n_embd; d++) e->embd[d] = (float)(s->pool[d] * scale * inv);
}

/* After the slot's rows were evaluated (in a batch whose row 0 was the last batch's row
 * `offset`): its cache takes them, and a slot with logits samples; an embedding job pools
 * them, and ends with its vector after its last. */
static void slot_advance(srv_engine *e, slot *s, int32_t offset) {
    if (s->req->p.embedding) {
        if (!embedding_pool(e, s, s->batch_first - offset)) {
            slot_fail(e, s, 500, "the forward pass kept no token states");
            return;
        }
        memcpy(s->cache + s->n_cache, s->req->p.prompt + s->n_cache, (size_t)s->batch_tokens * sizeof *s->cache);
        s->n_cache += s->batch_tokens;
        __atomic_fetch_add(&e->m.prompt_tokens, s->batch_tokens, __ATOMIC_RELAXED);
        if (s->n_cache == s->req->p.n_prompt) {
            embedding_vector(e, s);
            slot_finish(e, s, "stop");
        }
        return;
    }
    if (s->decoding) {
        s->cache[s->n_cache++] = s->next_token;
    } else {
        memcpy(s->cache + s->n_cache, s->req->p.prompt + s->n_cache, (size_t)s->batch_tokens * sizeof *s->cache);
        s->n_cache += s->batch_tokens;
        __atomic_fetch_add(&e->m.prompt_tokens, s->batch_tokens, __ATOMIC_RELAXED);
    }
    if (s->batch_row >= 0) slot_sample(e, s, s->batch_row - offset);
}

static bool in_flight(const srv_engine *e, int g) {
    for (int k = 0; k < e->n_inflight; k++)
        if (e->inflight[k] == g) return true;
    return false;
}

/* The oldest batch in flight: its outputs taken, its slots move on. */
static void take_oldest(srv_engine *e) {
    const int g = e->inflight[0];
    memmove(e->inflight, e->inflight + 1, (size_t)--e->n_inflight * sizeof *e->inflight);
    const bool ok = toy_decode_wait(e->ctx) == TOY_OK;
    for (int i = g; i < e->p.n_parallel; i += e->n_groups) {
        slot *s = &e->slots[i];
        if (!s->req || s->batch_n == 0) continue;
        if (ok) slot_advance(e, s, 0);
        else slot_fail(e, s, 500, "the forward pass failed");
    }
}

/* Group g's batch failed as a whole: evaluated again slot by slot (nothing else in
 * flight), so that only the slots whose own tokens fail end (with an error); the others
 * get the logits the whole batch would have given them (a token's logits do not depend
 * on the batch). */
static void retry_slots(srv_engine *e, int g) {
    for (int i = g; i < e->p.n_parallel; i += e->n_groups) {
        slot *s = &e->slots[i];
        if (!s->req || s->batch_n == 0) continue;
        const int32_t f = s->batch_first;
        const toy_batch one = {s->batch_n, e->b_token + f, e->b_pos + f, e->b_seq + f, e->b_logits + f};
        if (toy_decode(e->ctx, &one)) {
            char msg[256];
            snprintf(msg, sizeof msg, "the forward pass failed: %s", toy_last_error());
            slot_fail(e, s, 500, msg);
        } else {
            slot_advance(e, s, f);
        }
    }
}

/* One step: the slots of clients that left end (but those of a batch in flight, until it
 * lands), the next group with work submits its batch, and when every group that can is
 * in flight (alone: the one), the oldest batch lands and its slots move on. */
static void step(srv_engine *e, int start) {
    for (int i = 0; i < e->p.n_parallel; i++) {
        slot *s = &e->slots[i];
        if (s->req && !in_flight(e, i % e->n_groups) && __atomic_load_n(&s->req->cancelled, __ATOMIC_ACQUIRE))
            slot_finish(e, s, NULL);
    }
    bool submitted = false;
    for (int k = 0; k < e->n_groups && !submitted && e->n_inflight < e->n_groups; k++) {
        const int g = (e->next_group + k) % e->n_groups;
        if (in_flight(e, g)) continue;
        const int32_t n = build_batch(e, start, g);
        if (n == 0) continue;
        const toy_batch b = {n, e->b_token, e->b_pos, e->b_seq, e->b_logits};
        if (toy_decode_submit(e->ctx, &b) != TOY_OK) {
            while (e->n_inflight) take_oldest(e);
            retry_slots(e, g);
            return;
        }
        e->inflight[e->n_inflight++] = g;
        e->next_group = (g + 1) % e->n_groups;
        submitted = true;
    }
    if (e->n_inflight == e->n_groups || (!submitted && e->n_inflight)) take_oldest(e);
}

/* Takes out of the queue the choices of requests that were cancelled or have failed. */
static void queue_sweep(srv_engine *e) {
    int kept = 0;
    for (int k = 0; k < e->q_len; k++) {
        const job j = e->queue[(e->q_head + k) % e->q_cap];
        if (__atomic_load_n(&j.req->cancelled, __ATOMIC_ACQUIRE)) job_end(&j);
        else e->queue[(e->q_head + kept++) % e->q_cap] = j;
    }
    e->q_len = kept;
}

static void *engine_thread(void *arg) {
    srv_engine *e = arg;
    int start = 0;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (e->abort_status) { /* shutdown: every request, queued or running, ends */
            for (int k = 0; k < e->q_len; k++)
                request_fail(e->queue[(e->q_head + k) % e->q_cap].req, e->abort_status, "%s", e->abort_message);
            for (int i = 0; i < e->p.n_parallel; i++)
                if (e->slots[i].req) request_fail(e->slots[i].req, e->abort_status, "%s", e->abort_message);
        }
        queue_sweep(e);
        /* choices waiting go to idle slots in order; one that cannot start ends its request */
        while (e->q_len > 0) {
            const job j = e->queue[e->q_head];
            const start_result r = slot_start(e, &j);
            if (r == START_NO_SLOT) break;
            if (r == START_FAILED) job_end(&j);
            e->q_head = (e->q_head + 1) % e->q_cap;
            e->q_len--;
            if (r == START_FAILED) queue_sweep(e); /* the request's other choices */
        }
        int busy = 0;
        for (int i = 0; i < e->p.n_parallel; i++) busy += e->slots[i].req != NULL;
        e->m.busy_slots = busy;
        e->m.queue_depth = e->q_len;
        if (!busy) {
            e->last_progress = ty_now_s();
            if (e->stopping && e->q_len == 0) break;
            pthread_cond_wait(&e->wake, &e->lock);
            continue;
        }
        pthread_mutex_unlock(&e->lock);
        const double t0 = ty_now_s();
        step(e, start);
        start = (start + 1) % e->p.n_parallel;
        const double t1 = ty_now_s();
        pthread_mutex_lock(&e->lock);
        e->m.busy_seconds += t1 - t0;
        e->last_progress = t1;
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* ---------------------------------------------------------------- public */

toy_status srv_engine_new(toy_model *model, const srv_engine_params *p, srv_engine **out) {
    *out = NULL;
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return ty_error(TOY_ERR_NOMEM, "no memory");
    e->model = model;
    e->vocab = toy_model_vocab(model);
    e->p = *p;
    if (e->p.n_parallel < 1) e->p.n_parallel = 1;
    if (e->p.n_batch < e->p.n_parallel) e->p.n_batch = e->p.n_parallel;
    if (e->p.prefill_chunk < 1) e->p.prefill_chunk = 1;
    if (e->p.queue_max < 1) e->p.queue_max = 1;
    toy_context_params cp = toy_context_default_params();
    cp.n_ctx = p->n_ctx;
    cp.n_batch = e->p.n_batch;
    cp.n_seq_max = e->p.n_parallel;
    cp.n_outputs = e->p.n_parallel;
    cp.n_threads = p->n_threads;
    cp.cache_type_k = p->cache_type_k;
    cp.attn = p->attn;
    cp.cache_type_v = p->cache_type_v;
    cp.embeddings = p->embeddings;
    cp.trace = p->trace;
    cp.trace_user = p->trace_user;
    toy_status st = toy_context_new(model, &cp, &e->ctx);
    if (st) {
        free(e);
        return st;
    }
    e->p.n_ctx = toy_n_ctx(e->ctx);
    e->n_groups = toy_decode_depth(e->ctx);
    if (e->n_groups > e->p.n_parallel) e->n_groups = e->p.n_parallel;
    if (e->n_groups > ENGINE_MAX_GROUPS) e->n_groups = ENGINE_MAX_GROUPS;
    const size_t nb = (size_t)e->p.n_batch;
    e->slots = calloc((size_t)e->p.n_parallel, sizeof *e->slots);
    e->logits = malloc((size_t)toy_model_n_vocab(model) * sizeof *e->logits);
    e->b_token = malloc(nb * sizeof *e->b_token);
    e->b_pos = malloc(nb * sizeof *e->b_pos);
    e->b_seq = malloc(nb * sizeof *e->b_seq);
    e->b_logits = malloc(nb);
    e->q_cap = e->p.queue_max + e->p.n_parallel;
    e->queue = calloc((size_t)e->q_cap, sizeof *e->queue);
    const int32_t n_vocab = toy_model_n_vocab(model);
    e->eog = malloc((size_t)n_vocab * sizeof *e->eog);
    for (int32_t v = 0; e->eog && v < n_vocab; v++)
        if (toy_vocab_is_eog(e->vocab, v)) e->eog[e->n_eog++] = v;
    bool ok = e->eog && e->slots && e->logits && e->b_token && e->b_pos && e->b_seq && e->b_logits && e->queue;
    for (int i = 0; ok && i < e->p.n_parallel; i++)
        ok = (e->slots[i].cache = malloc((size_t)e->p.n_ctx * sizeof(int32_t))) != NULL;
    const size_t n_embd = (size_t)toy_model_n_embd(model);
    if (ok && p->embeddings) ok = (e->embd = malloc(n_embd * sizeof *e->embd)) != NULL;
    for (int i = 0; ok && p->embeddings && i < e->p.n_parallel; i++)
        ok = (e->slots[i].pool = malloc(n_embd * sizeof *e->slots[i].pool)) != NULL;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    e->m.n_slots = e->p.n_parallel;
    e->last_progress = ty_now_s();
    if (ok) ok = pthread_create(&e->thread, NULL, engine_thread, e) == 0;
    if (!ok) {
        srv_engine_free(e);
        return ty_error(TOY_ERR_NOMEM, "cannot set up %d slots of %d tokens", p->n_parallel, p->n_ctx);
    }
    e->thread_started = true;
    *out = e;
    return TOY_OK;
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->lock);
        e->stopping = true;
        pthread_cond_broadcast(&e->wake);
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->thread, NULL);
    }
    for (int i = 0; e->slots && i < e->p.n_parallel; i++) {
        free(e->slots[i].cache);
        free(e->slots[i].pool);
    }
    free(e->embd);
    free(e->slots);
    free(e->logits);
    free(e->eog);
    free(e->b_token);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_logits);
    free(e->queue);
    toy_context_free(e->ctx);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->wake);
    free(e);
}

int32_t srv_engine_n_ctx(const srv_engine *e) { return e->p.n_ctx; }
const toy_vocab *srv_engine_vocab(const srv_engine *e) { return e->vocab; }

toy_status srv_engine_set_lora(srv_engine *e, toy_lora *const *loras, const float *scales, int n) {
    return toy_context_set_lora(e->ctx, loras, scales, n);
}

toy_status srv_submit(srv_engine *e, srv_params *p, srv_request **out) {
    *out = NULL;
    srv_request *r = calloc(1, sizeof *r);
    if (!r) {
        params_free(p);
        return ty_error(TOY_ERR_NOMEM, "no memory");
    }
    r->p = *p;
    r->engine = e;
    memset(p, 0, sizeof *p);
    if (r->p.n_choices < 1) r->p.n_choices = 1;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->refs = 1 + r->p.n_choices;
    pthread_mutex_lock(&e->lock);
    /* The queue holds queue_max waiting choices beyond those idle slots will take: a
     * request submitted before the engine moved the previous one into its idle slot is
     * not turned away. busy_slots is from the engine's last pass, less the slots freed
     * since (slot_finish): exact whenever a reply has ended. */
    const int idle = e->p.n_parallel - e->m.busy_slots;
    const bool stopping = e->stopping || e->abort_status;
    if (stopping || e->q_len + r->p.n_choices > e->p.queue_max + (idle > 0 ? idle : 0)) {
        pthread_mutex_unlock(&e->lock);
        r->refs = 1;
        request_unref(r);
        return ty_error(TOY_ERR_UNSUPPORTED, stopping ? "the server is stopping" : "the queue is full");
    }
    for (int c = 0; c < r->p.n_choices; c++) {
        e->queue[(e->q_head + e->q_len) % e->q_cap] = (job){r, c};
        e->q_len++;
    }
    e->m.queue_depth = e->q_len;
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->lock);
    *out = r;
    return TOY_OK;
}

void srv_engine_metrics(srv_engine *e, srv_metrics *m) {
    pthread_mutex_lock(&e->lock);
    m->queue_depth = e->m.queue_depth;
    m->busy_slots = e->m.busy_slots;
    m->n_slots = e->m.n_slots;
    m->busy_seconds = e->m.busy_seconds;
    pthread_mutex_unlock(&e->lock);
    m->prompt_tokens = __atomic_load_n(&e->m.prompt_tokens, __ATOMIC_RELAXED);
    m->generated_tokens = __atomic_load_n(&e->m.generated_tokens, __ATOMIC_RELAXED);
    m->cached_tokens = __atomic_load_n(&e->m.cached_tokens, __ATOMIC_RELAXED);
}

void srv_engine_abort(srv_engine *e, int status, const char *message) {
    pthread_mutex_lock(&e->lock);
    if (!e->abort_status) {
        e->abort_status = status;
        snprintf(e->abort_message, sizeof e->abort_message, "%s", message);
    }
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->lock);
}

double srv_engine_stalled_for(srv_engine *e) {
    pthread_mutex_lock(&e->lock);
    const bool work = e->q_len > 0 || e->m.busy_slots > 0;
    const double t = work ? ty_now_s() - e->last_progress : 0;
    pthread_mutex_unlock(&e->lock);
    return t > 0 ? t : 0;
}
