/* data.c — reading training files into a token stream (data.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "error.h"
#include "splitmix.h"

/* ---------------------------------------------------------------- the stream */

static toy_status stream_reserve(train_stream *s, int64_t more) {
    if (more < 0 || s->n > INT64_MAX - more) return ty_error(TOY_ERR_INVALID, "training data too large");
    if (s->n + more <= s->cap) return TOY_OK;
    int64_t cap = s->cap ? s->cap : 4096;
    while (cap < s->n + more) {
        if (cap > INT64_MAX / 2) return ty_error(TOY_ERR_NOMEM, "training data too large");
        cap *= 2;
    }
    if ((uint64_t)cap > SIZE_MAX / sizeof(int32_t)) return ty_error(TOY_ERR_NOMEM, "training data too large");
    int32_t *t = realloc(s->tokens, (size_t)cap * sizeof *t);
    if (t) s->tokens = t;
    uint8_t *m = t ? realloc(s->scored, (size_t)cap) : NULL;
    if (m) s->scored = m;
    if (!t || !m) return ty_error(TOY_ERR_NOMEM, "no memory for %lld tokens of training data", (long long)cap);
    s->cap = cap;
    return TOY_OK;
}

static toy_status stream_push(train_stream *s, int32_t token, bool scored) {
    toy_status st = stream_reserve(s, 1);
    if (st) return st;
    s->tokens[s->n] = token;
    s->scored[s->n++] = scored;
    s->n_scored += scored;
    return TOY_OK;
}

/* Tokenizes text onto the end of the stream: into room for a token a byte (and BOS/EOS),
 * and again into room for every token when the text needs more (invalid UTF-8 does:
 * three byte tokens for each U+FFFD). */
static toy_status stream_text(train_stream *s, const toy_vocab *vocab, const char *text, size_t len,
                              bool add_special, bool parse_special, bool scored) {
    if (len > (size_t)INT32_MAX - 8) return ty_error(TOY_ERR_INVALID, "a text of %zu bytes is too long", len);
    int32_t room = (int32_t)len + 8, n = 0;
    toy_status st = stream_reserve(s, room);
    if (!st) st = toy_tokenize(vocab, text, len, add_special, parse_special, s->tokens + s->n, room, &n);
    if (st == TOY_ERR_BUFFER) {
        room = n;
        st = stream_reserve(s, room);
        if (!st) st = toy_tokenize(vocab, text, len, add_special, parse_special, s->tokens + s->n, room, &n);
    }
    if (st) return st;
    memset(s->scored + s->n, scored, (size_t)n);
    s->n += n;
    if (scored) s->n_scored += n;
    return TOY_OK;
}

void ty_train_stream_free(train_stream *s) {
    free(s->tokens);
    free(s->scored);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- files */

static toy_status read_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return ty_error(TOY_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? 2 * cap : 1 << 20;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return ty_error(TOY_ERR_NOMEM, "%s: no memory", path);
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    const bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return ty_error(TOY_ERR_IO, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return TOY_OK;
}

static toy_status load_text(train_stream *s, const toy_vocab *vocab, const char *path) {
    char *text;
    size_t len;
    toy_status st = read_file(path, &text, &len);
    if (st) return st;
    st = stream_text(s, vocab, text, len, true, false, true);
    if (!st && toy_vocab_eos(vocab) >= 0) st = stream_push(s, toy_vocab_eos(vocab), true);
    if (st) ty_error_wrap(st, "%s", path);
    s->n_docs++;
    free(text);
    return st;
}

/* A chat record: the conversation formatted with the template, in pieces so that the
 * assistant's replies can be told from the rest. Each reply is the text between the
 * conversation formatted up to it with the assistant's turn opened (add_assistant) and
 * the conversation including it; every template toy knows extends its output that way. */
/* Formatting the conversation up to each reply costs about (replies x its length)
 * bytes: a record over this is refused (split it) rather than taking minutes. */
enum { RECORD_FORMAT_BYTES_MAX = 1 << 28 };

static toy_status load_record(train_stream *s, const toy_vocab *vocab, const char *family,
                              const toy_chat_message *msgs, size_t n) {
    char *full = NULL, *a = NULL, *b = NULL;
    toy_status st = toy_chat_apply(family, msgs, n, false, &full);
    const size_t full_len = st ? 0 : strlen(full);
    size_t replies = 0, work;
    for (size_t k = 0; k < n; k++) replies += !strcmp(msgs[k].role, "assistant");
    if (!st && (ty_mul_overflows(replies, full_len, &work) || work > RECORD_FORMAT_BYTES_MAX))
        st = ty_error(TOY_ERR_INVALID,
                      "a record of %zu messages (%zu replies) and %zu formatted bytes is too large to train on: "
                      "split it into records of fewer turns",
                      n, replies, full_len);
    size_t cursor = 0;
    bool first = true;
    for (size_t k = 0; !st && k < n; k++) {
        if (strcmp(msgs[k].role, "assistant")) continue;
        if ((st = toy_chat_apply(family, msgs, k, true, &a)) || (st = toy_chat_apply(family, msgs, k + 1, false, &b)))
            break;
        const size_t la = strlen(a), lb = strlen(b);
        if (la < cursor || la > lb || memcmp(a, b, la) || lb > full_len || memcmp(b, full, lb)) {
            st = ty_error(TOY_ERR_UNSUPPORTED,
                          "the %s chat template does not extend the conversation at message %zu", family, k + 1);
            break;
        }
        if (la > cursor) st = stream_text(s, vocab, full + cursor, la - cursor, first, true, false);
        if (!st && lb > la) st = stream_text(s, vocab, full + la, lb - la, first && la == cursor, true, true);
        first = false;
        cursor = lb;
        free(a);
        free(b);
        a = b = NULL;
    }
    if (!st && full_len > cursor) st = stream_text(s, vocab, full + cursor, full_len - cursor, first, true, false);
    free(full);
    free(a);
    free(b);
    s->n_docs++;
    return st;
}

static toy_status load_jsonl(train_stream *s, const toy_vocab *vocab, const char *family, const char *path) {
    char *text;
    size_t len;
    toy_status st = read_file(path, &text, &len);
    if (st) return st;
    toy_chat_message *msgs = NULL;
    size_t cap = 0;
    int64_t line = 0, records = 0;
    for (char *p = text; !st && p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        if (!end) end = text + len;
        line++;
        size_t l = (size_t)(end - p);
        const char *q = p;
        p = end + 1;
        while (l && (q[l - 1] == '\r' || q[l - 1] == ' ' || q[l - 1] == '\t')) l--;
        size_t skip = 0;
        while (skip < l && (q[skip] == ' ' || q[skip] == '\t')) skip++;
        if (skip == l) continue; /* blank line */
        json_error_t jerr;
        json_t *rec = json_loadb(q, l, 0, &jerr);
        if (!rec) {
            st = ty_error(TOY_ERR_FORMAT, "%s:%lld: invalid JSON at column %d: %s", path, (long long)line,
                          jerr.column, jerr.text);
            break;
        }
        json_t *arr = json_is_object(rec) ? json_object_get(rec, "messages") : NULL;
        if (!json_is_array(arr) || json_array_size(arr) == 0) {
            st = ty_error(TOY_ERR_FORMAT, "%s:%lld: expected an object with a non-empty \"messages\" array",
                          path, (long long)line);
            json_decref(rec);
            break;
        }
        const size_t n = json_array_size(arr);
        if (n > cap) {
            toy_chat_message *m = realloc(msgs, n * sizeof *m);
            if (!m) {
                st = ty_error(TOY_ERR_NOMEM, "no memory");
                json_decref(rec);
                break;
            }
            msgs = m;
            cap = n;
        }
        bool has_reply = false;
        for (size_t i = 0; !st && i < n; i++) {
            json_t *msg = json_array_get(arr, i);
            json_t *role = json_is_object(msg) ? json_object_get(msg, "role") : NULL;
            json_t *content = json_is_object(msg) ? json_object_get(msg, "content") : NULL;
            if (!json_is_string(role) || !json_is_string(content)) {
                st = ty_error(TOY_ERR_FORMAT, "%s:%lld: message %zu needs string fields \"role\" and \"content\"",
                              path, (long long)line, i + 1);
                break;
            }
            const char *r = json_string_value(role);
            if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
                st = ty_error(TOY_ERR_FORMAT, "%s:%lld: message %zu: role \"%s\" is not system, user or assistant",
                              path, (long long)line, i + 1, r);
                break;
            }
            has_reply |= !strcmp(r, "assistant");
            msgs[i] = (toy_chat_message){r, json_string_value(content)};
        }
        if (!st && !has_reply)
            st = ty_error(TOY_ERR_FORMAT, "%s:%lld: the record has no assistant message to learn", path,
                          (long long)line);
        if (!st && (st = load_record(s, vocab, family, msgs, n)))
            ty_error_wrap(st, "%s:%lld", path, (long long)line);
        json_decref(rec);
        records++;
    }
    if (!st && records == 0) st = ty_error(TOY_ERR_FORMAT, "%s: no chat records", path);
    free(msgs);
    free(text);
    return st;
}

static bool is_jsonl(const char *path) {
    const size_t n = strlen(path);
    return n >= 6 && !strcmp(path + n - 6, ".jsonl");
}

toy_status ty_train_stream_load(train_stream *s, const toy_vocab *vocab, const char *chat_family,
                             const char *const *paths, int n_paths) {
    for (int i = 0; i < n_paths; i++) {
        toy_status st = is_jsonl(paths[i]) ? load_jsonl(s, vocab, chat_family, paths[i])
                                           : load_text(s, vocab, paths[i]);
        if (st) return st;
    }
    return TOY_OK;
}

/* ---------------------------------------------------------------- windows */

int64_t ty_train_stream_n_windows(const train_stream *s, int T) {
    return T > 0 && s->n > T ? (s->n - 1) / T : 0;
}

int ty_train_stream_window(const train_stream *s, int64_t w, int T, int32_t *tokens, int32_t *targets) {
    const int32_t *src = s->tokens + w * T;
    const uint8_t *scored = s->scored + w * T;
    int n = 0;
    for (int t = 0; t < T; t++) {
        tokens[t] = src[t];
        targets[t] = scored[t + 1] ? src[t + 1] : -1;
        n += scored[t + 1];
    }
    return n;
}

/* Fisher-Yates with a stream seeded by (seed, epoch); the bound of each draw by
 * rejection, so the order is exactly uniform and the same on every machine */
void ty_train_window_order(int64_t *order, int64_t n, uint64_t seed, int64_t epoch) {
    uint64_t state = seed * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(epoch + 1) * 0xd1b54a32d192ed03ULL;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        const uint64_t bound = (uint64_t)i + 1, limit = UINT64_MAX - UINT64_MAX % bound;
        uint64_t r;
        do r = ty_splitmix64(&state);
        while (r >= limit);
        const int64_t j = (int64_t)(r % bound);
        const int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}
