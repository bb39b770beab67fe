/* tool_calls.c — see tool_calls.h. The syntaxes are those the models' own chat templates
 * write (../shared/templates, and llama.cpp's models/templates for the others); the
 * leniency around them (white space, the variants of DeepSeek's opening marker, a closing
 * marker left out at the very end) follows llama.cpp's common/chat-parser.cpp where the
 * models are known to stray.
 *
 * An answer is read in two layers: the thinking block it may open with (read_thinking),
 * then runs of content and blocks (read_blocks). A block is what one format's reader
 * recognises where an opening marker stands: calls, a marker to drop, or nothing (its text
 * stays content). A reader decides from the block's own text only, and says "open" while
 * the text ends before it can decide; that is what makes a partial parse a prefix of the
 * final one. gpt-oss's harmony messages have a reader of their own (read_harmony). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "buffer.h"
#include "json_schema.h"
#include "tool_calls.h"

/* ---------------------------------------------------------------- text */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

/* Whether lit stands at s[i]. */
static bool starts(const char *s, size_t n, size_t i, const char *lit) {
    const size_t l = strlen(lit);
    return i <= n && n - i >= l && !memcmp(s + i, lit, l);
}

/* Whether the text ends before lit could be told at s[i] (at i, or inside a beginning of it). */
static bool cut_short(const char *s, size_t n, size_t i, const char *lit) {
    const size_t l = strlen(lit);
    return i <= n && n - i < l && !memcmp(s + i, lit, n - i);
}

/* The first lit at or after i; n if none. */
static size_t find(const char *s, size_t n, size_t i, const char *lit) {
    if (i >= n) return n;
    const char *f = memmem(s + i, n - i, lit, strlen(lit));
    return f ? (size_t)(f - s) : n;
}

/* Where the suffix of s[i, n) begins that may still grow into lit; n if none. */
static size_t cut_at(const char *s, size_t n, size_t i, const char *lit) {
    const size_t l = strlen(lit);
    for (size_t k = n - i >= l ? n - l + 1 : i; k < n; k++)
        if (cut_short(s, n, k, lit)) return k;
    return n;
}

/* text less an incomplete UTF-8 character at its end (a token may end inside one). */
static size_t complete_utf8(const char *s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        const unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80) continue;
        const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

/* ---------------------------------------------------------------- detection */

typedef struct {
    const char *all[3]; /* markers that must all be in the template */
    const char *any[3]; /* and one of these, when any are given */
    ty_tool_format tools;
} format_markers;

/* First match wins. Where one family's template also holds another's markers, the more
 * specific row comes first: Seed-OSS's and Qwen3-Coder's templates write "<function=" as
 * functionary v3.1's does; Command R7B's instructions say "Action:" and "```json" as
 * Command R+'s do; functionary v3.1's speaks of ipython as Llama 3.1's does. */
static const format_markers tool_markers[] = {
    {{"<|channel|>"}, {NULL}, TY_TOOLS_GPT_OSS},
    {{"<seed:tool_call>"}, {NULL}, TY_TOOLS_SEED_OSS},
    {{"<TOOLCALL>"}, {NULL}, TY_TOOLS_NEMOTRON_V2},
    {{"<tool_calls>"}, {NULL}, TY_TOOLS_APRIEL},
    {{NULL}, {"<|tool_calls_section_begin|>", "tool_declare"}, TY_TOOLS_KIMI_K2},
    /* V3.1's template writes the arguments right after the separator, R1's the name;
     * llama.cpp tells V3.1 by its "prefix" message */
    {{"<｜tool▁calls▁begin｜>"},
     {"<｜tool▁sep｜>' + tool['function']['arguments']",
      "message['prefix'] is defined and message['prefix'] and thinking"},
     TY_TOOLS_DEEPSEEK_V31},
    {{"<｜tool▁calls▁begin｜>"}, {NULL}, TY_TOOLS_DEEPSEEK_R1},
    {{"<|START_ACTION|>"}, {NULL}, TY_TOOLS_COMMAND_R7B},
    {{"<minimax:tool_call>"}, {NULL}, TY_TOOLS_MINIMAX_M2},
    {{"<tool_call>", "<arg_key>"}, {NULL}, TY_TOOLS_GLM},
    {{"<tool_call>", "<function="}, {NULL}, TY_TOOLS_QWEN3_CODER},
    {{"<tool_call>"}, {NULL}, TY_TOOLS_HERMES},
    {{"[TOOL_CALLS]", "[ARGS]"}, {NULL}, TY_TOOLS_MISTRAL_SMALL},
    {{"[TOOL_CALLS]"}, {NULL}, TY_TOOLS_MISTRAL_NEMO},
    {{">>>all"}, {NULL}, TY_TOOLS_FUNCTIONARY_V32},
    {{" functools["}, {NULL}, TY_TOOLS_FIREFUNCTION},
    {{"<|tool_call|>"}, {NULL}, TY_TOOLS_GRANITE},
    {{"<function="}, {"<|python_tag|>", "ipython", "<|start_header_id|>"}, TY_TOOLS_FUNCTIONARY_V31},
    {{NULL}, {"<|python_tag|>", "ipython"}, TY_TOOLS_LLAMA3},
    {{"Action:", "```json"}, {NULL}, TY_TOOLS_COMMAND_R},
};

/* Each thinking syntax's markers. */
static const struct {
    const char *open, *close;
} thinking[TY_REASONING_N_FORMATS] = {
    [TY_REASONING_THINK] = {"<think>", "</think>"},
    [TY_REASONING_SEED] = {"<seed:think>", "</seed:think>"},
    [TY_REASONING_GPT_OSS] = {"<|channel|>analysis<|message|>", "<|end|>"},
    [TY_REASONING_COMMAND_R7B] = {"<|START_THINKING|>", "<|END_THINKING|>"},
};

/* "<think>" last: other families' templates may mention it. */
static const struct {
    const char *marker;
    ty_reasoning_format reasoning;
} reasoning_markers[] = {
    {"<seed:think>", TY_REASONING_SEED},
    {"<|START_THINKING|>", TY_REASONING_COMMAND_R7B},
    {"<|channel|>", TY_REASONING_GPT_OSS},
    {"<think>", TY_REASONING_THINK},
};

static bool markers_match(const char *text, const format_markers *m) {
    for (int i = 0; i < 3 && m->all[i]; i++)
        if (!strstr(text, m->all[i])) return false;
    if (!m->any[0]) return true;
    for (int i = 0; i < 3 && m->any[i]; i++)
        if (strstr(text, m->any[i])) return true;
    return false;
}

ty_chat_syntax ty_chat_syntax_of(const char *template_text) {
    ty_chat_syntax syn = {TY_TOOLS_GENERIC, TY_REASONING_NONE};
    if (!template_text) return syn;
    for (size_t i = 0; i < sizeof tool_markers / sizeof *tool_markers; i++)
        if (markers_match(template_text, &tool_markers[i])) {
            syn.tools = tool_markers[i].tools;
            break;
        }
    for (size_t i = 0; i < sizeof reasoning_markers / sizeof *reasoning_markers; i++)
        if (strstr(template_text, reasoning_markers[i].marker)) {
            syn.reasoning = reasoning_markers[i].reasoning;
            break;
        }
    return syn;
}

const char *ty_tool_format_name(ty_tool_format f) {
    static const char *const names[TY_TOOLS_N_FORMATS] = {
        [TY_TOOLS_GENERIC] = "generic",
        [TY_TOOLS_HERMES] = "hermes",
        [TY_TOOLS_QWEN3_CODER] = "qwen3-coder",
        [TY_TOOLS_LLAMA3] = "llama3",
        [TY_TOOLS_MISTRAL_NEMO] = "mistral-nemo",
        [TY_TOOLS_MISTRAL_SMALL] = "mistral-small",
        [TY_TOOLS_DEEPSEEK_R1] = "deepseek-r1",
        [TY_TOOLS_DEEPSEEK_V31] = "deepseek-v3.1",
        [TY_TOOLS_COMMAND_R] = "command-r",
        [TY_TOOLS_COMMAND_R7B] = "command-r7b",
        [TY_TOOLS_FUNCTIONARY_V31] = "functionary-v3.1",
        [TY_TOOLS_FUNCTIONARY_V32] = "functionary-v3.2",
        [TY_TOOLS_FIREFUNCTION] = "firefunction",
        [TY_TOOLS_GRANITE] = "granite",
        [TY_TOOLS_GPT_OSS] = "gpt-oss",
        [TY_TOOLS_KIMI_K2] = "kimi-k2",
        [TY_TOOLS_SEED_OSS] = "seed-oss",
        [TY_TOOLS_NEMOTRON_V2] = "nemotron-v2",
        [TY_TOOLS_APRIEL] = "apriel",
        [TY_TOOLS_GLM] = "glm",
        [TY_TOOLS_MINIMAX_M2] = "minimax-m2",
    };
    return (unsigned)f < TY_TOOLS_N_FORMATS ? names[f] : "unknown";
}

const char *ty_reasoning_format_name(ty_reasoning_format r) {
    static const char *const names[TY_REASONING_N_FORMATS] = {
        [TY_REASONING_NONE] = "none",
        [TY_REASONING_THINK] = "think",
        [TY_REASONING_SEED] = "seed",
        [TY_REASONING_GPT_OSS] = "gpt-oss",
        [TY_REASONING_COMMAND_R7B] = "command-r7b",
    };
    return (unsigned)r < TY_REASONING_N_FORMATS ? names[r] : "unknown";
}

ty_prompt_thinking ty_chat_prompt_thinking(ty_chat_syntax syn, const char *prompt, size_t len) {
    /* harmony's analysis channel is the model's to open */
    if (!prompt || (unsigned)syn.reasoning >= TY_REASONING_N_FORMATS || syn.reasoning == TY_REASONING_GPT_OSS ||
        !thinking[syn.reasoning].open)
        return TY_THINK_MAY_OPEN;
    while (len > 0 && is_ws(prompt[len - 1])) len--;
    const char *open = thinking[syn.reasoning].open, *close = thinking[syn.reasoning].close;
    const size_t lo = strlen(open), lc = strlen(close);
    if (len >= lo && !memcmp(prompt + len - lo, open, lo)) return TY_THINK_OPEN;
    if (len >= lc && !memcmp(prompt + len - lc, close, lc)) return TY_THINK_CLOSED;
    return TY_THINK_MAY_OPEN;
}

bool ty_chat_prompt_opens_reasoning(ty_chat_syntax syn, const char *prompt, size_t len) {
    return ty_chat_prompt_thinking(syn, prompt, len) == TY_THINK_OPEN;
}

/* ---------------------------------------------------------------- JSON text */

/* The end of the JSON string at s[i] ('"'); 0 when the text ends first. */
static size_t string_end(const char *s, size_t n, size_t i) {
    for (i++; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return 0;
}

/* The end of the JSON object or array at s[i], found lexically (strings and nesting); 0
 * when the text ends first. Whether it is valid JSON is Jansson's to say. */
static size_t container_end(const char *s, size_t n, size_t i) {
    size_t depth = 0;
    while (i < n) {
        const char c = s[i];
        if (c == '"') {
            const size_t e = string_end(s, n, i);
            if (!e) return 0;
            i = e;
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
        i++;
    }
    return 0;
}

/* The end of the value at s[i] in valid JSON text. */
static size_t value_end(const char *s, size_t n, size_t i) {
    if (s[i] == '"') return string_end(s, n, i);
    if (s[i] == '{' || s[i] == '[') return container_end(s, n, i);
    while (i < n && !is_ws(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') i++;
    return i;
}

/* s[a, b) as JSON; NULL if it is not. Duplicate keys are refused (as
 * src/server/tool_requests.c does), and integers of any size are read (as reals: only the
 * structure is looked at, the text is what is kept). */
static json_t *load_json(const char *s, size_t a, size_t b) {
    return json_loadb(s + a, b - a, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, NULL);
}

/* The valid JSON text s[a, b) without the white space between its tokens. */
static char *json_compact(const char *s, size_t a, size_t b) {
    char *out = malloc(b - a + 1);
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = a; i < b; i++) {
        if (s[i] == '"') {
            size_t e = string_end(s, b, i);
            if (!e) e = b;
            memcpy(out + k, s + i, e - i);
            k += e - i;
            i = e - 1;
        } else if (!is_ws(s[i])) {
            out[k++] = s[i];
        }
    }
    out[k] = 0;
    return out;
}

/* Where the value of `key` lies in the object text s[a, b) (valid JSON). */
static bool member_span(const char *s, size_t a, size_t b, const char *key, size_t *va, size_t *vb) {
    size_t i = skip_ws(s, b, a + 1);
    while (i < b && s[i] == '"') {
        const size_t ke = string_end(s, b, i);
        if (!ke) return false;
        bool match;
        if (memchr(s + i, '\\', ke - i)) { /* an escaped key: Jansson reads it */
            json_t *k = json_loadb(s + i, ke - i, JSON_DECODE_ANY, NULL);
            match = json_is_string(k) && !strcmp(json_string_value(k), key);
            json_decref(k);
        } else {
            match = ke - i - 2 == strlen(key) && !memcmp(s + i + 1, key, ke - i - 2);
        }
        i = skip_ws(s, b, skip_ws(s, b, ke) + 1); /* past the ':' */
        const size_t ve = value_end(s, b, i);
        if (match) {
            *va = i;
            *vb = ve;
            return true;
        }
        i = skip_ws(s, b, ve);
        if (i >= b || s[i] != ',') return false;
        i = skip_ws(s, b, i + 1);
    }
    return false;
}

/* ---------------------------------------------------------------- the parser's state */

typedef struct {
    ty_tool_call *v;
    size_t n, cap;
    bool oom;
} call_list;

static void call_list_free(call_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].arguments);
        free(l->v[i].id);
    }
    free(l->v);
    *l = (call_list){0};
}

/* Adds the call, taking its strings (NULL ones, from a failed allocation, mark no memory). */
static void call_list_push(call_list *l, ty_tool_call c) {
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 4;
        ty_tool_call *v = realloc(l->v, cap * sizeof *v);
        if (v) l->v = v, l->cap = cap;
    }
    if (!c.name || !c.arguments || l->n == l->cap) {
        l->oom = true;
        free(c.name);
        free(c.arguments);
        free(c.id);
        return;
    }
    l->v[l->n++] = c;
}

typedef struct {
    const char *s;
    size_t n;
    bool partial;
    const char *const *fns;
    size_t n_fns;
    bool parallel;
    call_list calls;
    ty_buf content;   /* the runs of content so far, trimmed, one per line */
    ty_buf run;       /* the run of content being read */
    ty_buf reasoning; /* the thinking, trimmed (harmony: a line per analysis message) */
} parser;

static bool declared(const parser *p, const char *name, size_t len) {
    for (size_t k = 0; k < p->n_fns; k++)
        if (strlen(p->fns[k]) == len && !memcmp(p->fns[k], name, len)) return true;
    return false;
}

static void run_add(parser *p, size_t a, size_t b) {
    if (b > a) ty_buf_append(&p->run, p->s + a, b - a);
}

/* Appends the text trimmed, on a line of its own, when any is left. */
static void put_line(ty_buf *b, const char *s, size_t n) {
    while (n && is_ws(*s)) s++, n--;
    while (n && is_ws(s[n - 1])) n--;
    if (!n) return;
    if (b->n) ty_buf_append(b, "\n", 1);
    ty_buf_append(b, s, n);
}

static void run_end(parser *p) {
    put_line(&p->content, p->run.v, p->run.n);
    p->run.n = 0;
}

/* Keeps a block's calls: all of them with parallel, else the answer's first. */
static void keep_calls(parser *p, call_list *got) {
    p->calls.oom |= got->oom;
    for (size_t k = 0; k < got->n; k++)
        if (p->parallel || p->calls.n == 0) {
            call_list_push(&p->calls, got->v[k]);
            got->v[k] = (ty_tool_call){0};
        }
}

/* A call of the named function with the arguments' JSON object s[a, b), and its id when
 * the format writes one. false: not a declared function, or not an object. */
static bool add_call(parser *p, call_list *got, size_t na, size_t nb, size_t a, size_t b, const char *id, size_t id_len) {
    while (na < nb && is_ws(p->s[na])) na++;
    while (nb > na && is_ws(p->s[nb - 1])) nb--;
    if (!declared(p, p->s + na, nb - na)) return false;
    json_t *o = load_json(p->s, a, b);
    const bool object = json_is_object(o);
    json_decref(o);
    if (!object) return false;
    call_list_push(got, (ty_tool_call){strndup(p->s + na, nb - na), json_compact(p->s, a, b),
                                       id ? strndup(id, id_len) : NULL});
    if (id && !got->oom && !got->v[got->n - 1].id) got->oom = true;
    return true;
}

/* ---------------------------------------------------------------- steps inside a block */

typedef enum {
    BLOCK_NONE,  /* not a block: its text is content */
    BLOCK_CALLS, /* calls */
    BLOCK_DROP,  /* a marker that frames content, dropped */
    BLOCK_OPEN,  /* partial: the text ends before the block is decided */
} block_result;

/* A step of a reader: matched, not this block, or the text ends before it can tell. */
typedef enum { STEP_OK, STEP_NO, STEP_CUT } step;

/* What a block is when a step fails: open while streaming if the text ran out, else not a block. */
static block_result failed(const parser *p, step st) { return st == STEP_CUT && p->partial ? BLOCK_OPEN : BLOCK_NONE; }

#define TRY(p, x)                                                                                            \
    do {                                                                                                     \
        const step st_ = (x);                                                                                \
        if (st_ != STEP_OK) return failed(p, st_);                                                           \
    } while (0)

/* Moves *i past lit, after white space when ws. */
static step expect(const parser *p, size_t *i, const char *lit, bool ws) {
    if (ws) *i = skip_ws(p->s, p->n, *i);
    if (starts(p->s, p->n, *i, lit)) {
        *i += strlen(lit);
        return STEP_OK;
    }
    return cut_short(p->s, p->n, *i, lit) ? STEP_CUT : STEP_NO;
}

/* A block's closing marker, which a model may leave out at the very end of its answer. */
static step expect_close(const parser *p, size_t *i, const char *lit) {
    *i = skip_ws(p->s, p->n, *i);
    if (*i == p->n && !p->partial) return STEP_OK;
    return expect(p, i, lit, false);
}

/* The text from *i up to stop, at most max bytes and none of `bad`: its span [*a, *b),
 * *i past stop. */
static step read_until(const parser *p, size_t *i, const char *stop, const char *bad, size_t max, size_t *a,
                       size_t *b) {
    const size_t e = find(p->s, p->n, *i, stop);
    /* without stop, the text may end in its beginning: that is no bad character */
    const size_t checked = e < p->n ? e : cut_at(p->s, p->n, *i, stop);
    for (size_t k = *i; k < checked; k++)
        if (k - *i >= max || !p->s[k] || strchr(bad, p->s[k])) return STEP_NO;
    if (e == p->n) return STEP_CUT;
    *a = *i;
    *b = e;
    *i = e + strlen(stop);
    return STEP_OK;
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

/* A function's name at *i: [a-zA-Z0-9_.-]{1,128}. */
static step read_name(const parser *p, size_t *i, size_t *a, size_t *b) {
    size_t k = *i;
    while (k < p->n && k - *i <= 128 && is_name_char(p->s[k])) k++;
    if (k - *i > 128) return STEP_NO;
    if (k == p->n) return STEP_CUT;
    if (k == *i) return STEP_NO;
    *a = *i;
    *b = *i = k;
    return STEP_OK;
}

/* The JSON object ('{') or array ('[') at *i after white space: its span [*a, *b). */
static step read_json(const parser *p, size_t *i, char open, size_t *a, size_t *b) {
    const size_t j = skip_ws(p->s, p->n, *i);
    if (j >= p->n) return STEP_CUT;
    if (p->s[j] != open) return STEP_NO;
    const size_t e = container_end(p->s, p->n, j);
    if (!e) return STEP_CUT;
    *a = j;
    *b = *i = e;
    return STEP_OK;
}

/* How a format's call objects name their parts. */
typedef struct {
    const char *name;    /* the key of the function's name */
    const char *args[2]; /* the key of its arguments (either) */
    const char *id;      /* the key of the call's id, NULL when there is none */
} call_keys;

static const call_keys openai_keys = {"name", {"arguments", NULL}, "id"};
static const call_keys llama3_keys = {"name", {"parameters", "arguments"}, NULL};
static const call_keys cohere_keys = {"tool_name", {"parameters", NULL}, "tool_call_id"};

/* The call object s[a, b): a declared function's name, an object of arguments, the id
 * when the format has one and "type": "function" allowed besides
 * (src/server/tool_requests.c's rule), nothing else. false: not a call. */
static bool read_call_object(parser *p, size_t a, size_t b, const call_keys *k, call_list *got) {
    json_t *o = load_json(p->s, a, b);
    const json_t *name = json_object_get(o, k->name), *type = json_object_get(o, "type");
    const json_t *id = k->id ? json_object_get(o, k->id) : NULL;
    const char *args_key = NULL;
    for (int i = 0; i < 2 && k->args[i] && !args_key; i++)
        if (json_object_get(o, k->args[i])) args_key = k->args[i];
    size_t na, nb, va, vb;
    bool ok = json_is_string(name) && args_key && (!id || json_is_string(id)) &&
              (!type || (json_is_string(type) && !strcmp(json_string_value(type), "function"))) &&
              json_object_size(o) == 2u + (id != NULL) + (type != NULL) && member_span(p->s, a, b, k->name, &na, &nb) &&
              member_span(p->s, a, b, args_key, &va, &vb) && !memchr(p->s + na, '\\', nb - na);
    if (ok)
        ok = add_call(p, got, na + 1, nb - 1, va, vb, id ? json_string_value(id) : NULL,
                      id ? json_string_length(id) : 0);
    json_decref(o);
    return ok;
}

/* The array of call objects s[a, b), not empty; false unless every element is a call. */
static bool read_call_array(parser *p, size_t a, size_t b, const call_keys *k, call_list *got) {
    json_t *arr = load_json(p->s, a, b);
    const bool ok = json_is_array(arr) && json_array_size(arr) > 0;
    json_decref(arr);
    if (!ok) return false;
    for (size_t i = skip_ws(p->s, b, a + 1); i < b;) {
        if (p->s[i] != '{') return false;
        const size_t e = container_end(p->s, b, i);
        if (!e || !read_call_object(p, i, e, k, got)) return false;
        i = skip_ws(p->s, b, e);
        if (i < b && p->s[i] == ']') return true;
        i = skip_ws(p->s, b, i + 1); /* past the comma */
    }
    return false;
}

/* Raw code from s[i] to `stop` (the end of the text when NULL or absent): a call of
 * "python" with {"code": the code, trimmed}, as llama.cpp reads <|python_tag|>code. */
static block_result read_raw_code(parser *p, size_t i, const char *stop, size_t *end, call_list *got) {
    if (!declared(p, "python", 6)) return BLOCK_NONE;
    const size_t e = stop ? find(p->s, p->n, i, stop) : p->n;
    if (e == p->n && p->partial) return BLOCK_OPEN; /* the code goes on */
    size_t a = i, b = e;
    while (a < b && is_ws(p->s[a])) a++;
    while (b > a && is_ws(p->s[b - 1])) b--;
    json_t *code = json_pack("{s:s%}", "code", p->s + a, b - a);
    if (!code) return BLOCK_NONE; /* not UTF-8 */
    call_list_push(got, (ty_tool_call){strdup("python"), json_dumps(code, JSON_COMPACT), NULL});
    json_decref(code);
    *end = e;
    return BLOCK_CALLS;
}

/* ---------------------------------------------------------------- the formats' blocks */

typedef block_result block_reader(parser *p, size_t at, size_t *end, call_list *got);

/* {"tool_calls": [{"name": N, "arguments": A}, ...]} or {"tool_call": {...}}, all of the object */
static block_result read_generic(parser *p, size_t at, size_t *end, call_list *got) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at, a, b, va, vb;
    TRY(p, read_json(p, &i, '{', &a, &b));
    json_t *o = load_json(p->s, a, b);
    const bool one = json_is_object(o) && json_object_size(o) == 1;
    json_decref(o);
    bool ok = false;
    if (one && member_span(p->s, a, b, "tool_calls", &va, &vb))
        ok = p->s[va] == '[' && read_call_array(p, va, vb, &openai_keys, got);
    else if (one && member_span(p->s, a, b, "tool_call", &va, &vb))
        ok = p->s[va] == '{' && read_call_object(p, va, vb, &openai_keys, got);
    if (!ok) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* <tool_call>{"name": N, "arguments": A}</tool_call> */
static block_result read_hermes(parser *p, size_t at, size_t *end, call_list *got) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at + strlen("<tool_call>"), a, b;
    TRY(p, read_json(p, &i, '{', &a, &b));
    TRY(p, expect(p, &i, "</tool_call>", true));
    if (!read_call_object(p, a, b, &openai_keys, got)) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* One parameter of an XML call: its value is the text between the tags less the newline
 * the template puts at either end; JSON when it reads as JSON (a number, true, an object,
 * a quoted string), else a string, as llama.cpp reads them. false: a repeated name, or
 * text that is not UTF-8. */
static bool put_param(parser *p, ty_buf *args, json_t *seen, size_t ka, size_t kb, size_t va, size_t vb) {
    if (vb > va && p->s[va] == '\n') va++;
    else if (vb > va + 1 && p->s[va] == '\r' && p->s[va + 1] == '\n') va += 2;
    if (vb > va && p->s[vb - 1] == '\n') vb--;
    if (vb > va && p->s[vb - 1] == '\r') vb--;
    json_t *key = json_stringn(p->s + ka, kb - ka);
    if (!key || memchr(p->s + ka, 0, kb - ka) || json_object_get(seen, json_string_value(key))) {
        json_decref(key);
        return false;
    }
    json_object_set_new(seen, json_string_value(key), json_true());
    char *key_text = json_dumps(key, JSON_ENCODE_ANY);
    json_decref(key);
    json_t *v = load_json(p->s, va, vb);
    char *value = NULL;
    if (v) {
        value = json_compact(p->s, va, vb);
    } else if ((v = json_stringn(p->s + va, vb - va))) {
        value = json_dumps(v, JSON_ENCODE_ANY);
    } else {
        free(key_text);
        return false;
    }
    json_decref(v);
    if (!key_text || !value) args->oom = true;
    else TOY_BUF_PUT(args, args->n > 1 ? "," : "", key_text, ":", value);
    free(key_text);
    free(value);
    return true;
}

/* How an XML format writes a call: the function's name between name_open and name_end
 * (name_open "": right where the block opens; name_end "\n": up to the end of the line
 * or the first tag), each parameter's name between key_open and key_end and its value up
 * to value_end (after value_open, when there is one), then fn_close (NULL: the block's
 * end closes the call). */
typedef struct {
    const char *name_open, *name_end, *fn_close;
    const char *key_open, *key_end, *value_open, *value_end;
} xml_shape;

static const xml_shape function_tags = {"<function=", ">", "</function>", "<parameter=", ">", NULL, "</parameter>"};
static const xml_shape glm_tags = {"", "\n", NULL, "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"};
static const xml_shape invoke_tags = {"<invoke name=\"", "\">", "</invoke>", "<parameter name=\"", "\">", NULL,
                                      "</parameter>"};

/* The function's name at *i, as the shape writes it. */
static step read_xml_name(const parser *p, size_t *i, const xml_shape *x, size_t *na, size_t *nb) {
    if (x->name_open[0]) {
        const step st = expect(p, i, x->name_open, true);
        return st == STEP_OK ? read_until(p, i, x->name_end, "<\n", 128, na, nb) : st;
    }
    /* GLM: the name, then a newline or the first tag */
    size_t e = *i;
    while (e < p->n && p->s[e] != '\n' && p->s[e] != '<' && e - *i < 128) e++;
    if (e == p->n) return STEP_CUT;
    if (e - *i >= 128) return STEP_NO;
    *na = *i, *nb = e;
    while (*nb > *na && is_ws(p->s[*nb - 1])) (*nb)--;
    *i = e;
    return *nb > *na ? STEP_OK : STEP_NO;
}

/* One call in the shape, white space between the tags; `close` ends the call where the
 * shape has no closing tag of its own (it is left for the caller to read). */
static block_result read_xml_function(parser *p, size_t *i, call_list *got, const xml_shape *x, const char *close) {
    size_t na, nb;
    TRY(p, read_xml_name(p, i, x, &na, &nb));
    if (!declared(p, p->s + na, nb - na)) return BLOCK_NONE;
    ty_buf args = {0};
    json_t *seen = json_object();
    ty_buf_append(&args, "{", 1);
    block_result r = BLOCK_CALLS;
    for (;;) {
        size_t at = *i;
        const step done = expect(p, &at, x->fn_close ? x->fn_close : close, true);
        if (done == STEP_OK) {
            if (x->fn_close) *i = at;
            break;
        }
        const step open = expect(p, i, x->key_open, true);
        size_t ka = 0, kb = 0, va = 0, vb = 0;
        step st = open == STEP_OK ? read_until(p, i, x->key_end, "<\n", 128, &ka, &kb)
                                  : (done == STEP_CUT || open == STEP_CUT ? STEP_CUT : STEP_NO);
        if (st == STEP_OK && x->value_open) st = expect(p, i, x->value_open, true);
        if (st == STEP_OK) st = read_until(p, i, x->value_end, "", SIZE_MAX, &va, &vb);
        if (st != STEP_OK || !put_param(p, &args, seen, ka, kb, va, vb)) {
            r = st != STEP_OK ? failed(p, st) : BLOCK_NONE;
            break;
        }
    }
    ty_buf_append(&args, "}", 1);
    json_decref(seen);
    if (r != BLOCK_CALLS || args.oom) {
        got->oom |= args.oom;
        free(args.v);
        return r;
    }
    call_list_push(got, (ty_tool_call){strndup(p->s + na, nb - na), args.v, NULL});
    return r;
}

/* OPEN, one call (or with several, one or more), CLOSE */
static block_result read_xml(parser *p, size_t at, size_t *end, call_list *got, const char *open, const char *close,
                             const xml_shape *x, bool several) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at + strlen(open);
    for (;;) {
        const block_result r = read_xml_function(p, &i, got, x, close);
        if (r != BLOCK_CALLS) return r;
        if (!several) break;
        size_t k = i;
        const step more = expect(p, &k, x->name_open, true);
        if (more == STEP_CUT && p->partial) return BLOCK_OPEN; /* (a whole answer may end here) */
        if (more != STEP_OK) break;
    }
    TRY(p, expect_close(p, &i, close));
    *end = i;
    return BLOCK_CALLS;
}

/* <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call> */
static block_result read_qwen3_coder(parser *p, size_t at, size_t *end, call_list *got) {
    return read_xml(p, at, end, got, "<tool_call>", "</tool_call>", &function_tags, false);
}

/* <seed:tool_call>\n<function=N>\n<parameter=K>V</parameter>\n</function>\n</seed:tool_call> */
static block_result read_seed_oss(parser *p, size_t at, size_t *end, call_list *got) {
    return read_xml(p, at, end, got, "<seed:tool_call>", "</seed:tool_call>", &function_tags, false);
}

/* <tool_call>N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call> */
static block_result read_glm(parser *p, size_t at, size_t *end, call_list *got) {
    return read_xml(p, at, end, got, "<tool_call>", "</tool_call>", &glm_tags, false);
}

/* <minimax:tool_call>\n<invoke name="N">\n<parameter name="K">V</parameter>\n</invoke>...</minimax:tool_call> */
static block_result read_minimax(parser *p, size_t at, size_t *end, call_list *got) {
    return read_xml(p, at, end, got, "<minimax:tool_call>", "</minimax:tool_call>", &invoke_tags, true);
}

/* {"name": N, "parameters": A} where the answer begins or after a call (";" between, as
 * llama.cpp allows), <|python_tag|> before it or before raw code for "python" */
static block_result read_llama3(parser *p, size_t at, size_t *end, call_list *got) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at, a, b;
    if (i < p->n && p->s[i] == ';') i = skip_ws(p->s, p->n, i + 1);
    const step tag = expect(p, &i, "<|python_tag|>", false);
    if (tag == STEP_CUT) return failed(p, tag);
    if (tag == STEP_OK) {
        i = skip_ws(p->s, p->n, i);
        if (i == p->n) return failed(p, STEP_CUT);
        if (p->s[i] != '{') return read_raw_code(p, i, NULL, end, got);
    }
    TRY(p, read_json(p, &i, '{', &a, &b));
    if (!read_call_object(p, a, b, &llama3_keys, got)) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* [TOOL_CALLS][{"name": N, "arguments": A, "id": I}, ...] */
static block_result read_mistral_nemo(parser *p, size_t at, size_t *end, call_list *got) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at + strlen("[TOOL_CALLS]"), a, b;
    TRY(p, read_json(p, &i, '[', &a, &b));
    if (!read_call_array(p, a, b, &openai_keys, got)) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* [TOOL_CALLS]N[ARGS]{...}, with [CALL_ID]I before [ARGS] where the model writes its
 * template's form */
static block_result read_mistral_small(parser *p, size_t at, size_t *end, call_list *got) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at + strlen("[TOOL_CALLS]"), na, nb, ia = 0, ib = 0, a, b;
    TRY(p, read_name(p, &i, &na, &nb));
    if (!declared(p, p->s + na, nb - na)) return BLOCK_NONE;
    const step id = expect(p, &i, "[CALL_ID]", false);
    if (id == STEP_CUT) return failed(p, id);
    if (id == STEP_OK) TRY(p, read_until(p, &i, "[ARGS]", "\n\"{[", 64, &ia, &ib));
    else TRY(p, expect(p, &i, "[ARGS]", false));
    TRY(p, read_json(p, &i, '{', &a, &b));
    if (!add_call(p, got, na, nb, a, b, id == STEP_OK ? p->s + ia : NULL, ib - ia)) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* The opening markers of DeepSeek's calls: the R1 distills are unsure of theirs and write
 * these variants too (llama.cpp accepts them). */
#define DEEPSEEK_OPENS                                                                                       \
    "<｜tool▁calls▁begin｜>", "<｜tool_calls_begin｜>", "<｜tool calls begin｜>", "<｜tool\\_calls\\_begin｜>", "<｜tool▁calls｜>"
static const char *const deepseek_opens[] = {DEEPSEEK_OPENS, NULL};

/* <｜tool▁calls▁begin｜>, calls, <｜tool▁calls▁end｜> (which may be missing at the end of
 * the text). R1's call: [<｜tool▁call▁begin｜>]function<｜tool▁sep｜>N\n```json\n{...}\n```
 * <｜tool▁call▁end｜>; V3.1's: <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>. */
static block_result read_deepseek(parser *p, size_t at, size_t *end, call_list *got, bool v31) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at;
    for (const char *const *m = deepseek_opens; *m; m++)
        if (starts(p->s, p->n, at, *m)) {
            i = at + strlen(*m);
            break;
        }
    for (;;) {
        i = skip_ws(p->s, p->n, i);
        if (i == p->n && !p->partial && got->n) break;
        const step close = expect(p, &i, "<｜tool▁calls▁end｜>", false);
        if (close == STEP_OK) break;
        if (close == STEP_CUT) return failed(p, close);
        size_t na, nb, a, b;
        const step open = expect(p, &i, "<｜tool▁call▁begin｜>", false);
        if (open == STEP_CUT || (open == STEP_NO && v31)) return failed(p, open);
        if (v31) {
            TRY(p, read_until(p, &i, "<｜tool▁sep｜>", "\n<", 128, &na, &nb));
        } else {
            TRY(p, expect(p, &i, "function<｜tool▁sep｜>", false));
            TRY(p, read_until(p, &i, "\n", "<", 128, &na, &nb));
            TRY(p, expect(p, &i, "```json", true));
        }
        TRY(p, read_json(p, &i, '{', &a, &b));
        if (!v31) TRY(p, expect(p, &i, "```", true));
        TRY(p, expect(p, &i, "<｜tool▁call▁end｜>", true));
        if (!add_call(p, got, na, nb, a, b, NULL, 0)) return BLOCK_NONE;
    }
    *end = i;
    return got->n ? BLOCK_CALLS : BLOCK_NONE;
}

static block_result read_deepseek_r1(parser *p, size_t at, size_t *end, call_list *got) {
    return read_deepseek(p, at, end, got, false);
}

static block_result read_deepseek_v31(parser *p, size_t at, size_t *end, call_list *got) {
    return read_deepseek(p, at, end, got, true);
}

/* OPEN, a JSON array of calls whose parts are named as keys says, then CLOSE (none:
 * NULL; it may be left out at the very end of the text) */
static block_result read_tagged_array(parser *p, size_t at, size_t *end, call_list *got, const char *open,
                                      const char *close, const call_keys *keys) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at + strlen(open), a, b;
    TRY(p, read_json(p, &i, '[', &a, &b));
    if (close) TRY(p, expect_close(p, &i, close));
    if (!read_call_array(p, a, b, keys, got)) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* Whether a marker that only frames the answer's text stands at `at` (then dropped). */
static bool framing(const parser *p, size_t at, const char *const frames[2], size_t *end) {
    for (int k = 0; k < 2; k++)
        if (starts(p->s, p->n, at, frames[k])) {
            *end = at + strlen(frames[k]);
            return true;
        }
    return false;
}

/* Action: ```json\n[{"tool_name": N, "parameters": A}, ...]\n``` */
static block_result read_command_r(parser *p, size_t at, size_t *end, call_list *got) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at + strlen("Action:"), a, b;
    TRY(p, expect(p, &i, "```json", true));
    TRY(p, read_json(p, &i, '[', &a, &b));
    TRY(p, expect(p, &i, "```", true));
    if (!read_call_array(p, a, b, &cohere_keys, got)) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* <|START_ACTION|>[{"tool_call_id": I, "tool_name": N, "parameters": A}, ...]<|END_ACTION|>;
 * the answer's text comes framed in <|START_RESPONSE|> ... <|END_RESPONSE|> */
static block_result read_command_r7b(parser *p, size_t at, size_t *end, call_list *got) {
    static const char *const frames[] = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"};
    if (framing(p, at, frames, end)) return BLOCK_DROP;
    return read_tagged_array(p, at, end, got, "<|START_ACTION|>", "<|END_ACTION|>", &cohere_keys);
}

/* <function=N>{...}</function>; <|python_tag|> before raw code for "python" */
static block_result read_functionary_v31(parser *p, size_t at, size_t *end, call_list *got) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at, na, nb, a, b;
    if (starts(p->s, p->n, at, "<|python_tag|>")) {
        i = skip_ws(p->s, p->n, at + strlen("<|python_tag|>"));
        return i == p->n ? failed(p, STEP_CUT) : read_raw_code(p, i, NULL, end, got);
    }
    i += strlen("<function=");
    TRY(p, read_until(p, &i, ">", "<\n", 128, &na, &nb));
    if (!declared(p, p->s + na, nb - na)) return BLOCK_NONE;
    TRY(p, read_json(p, &i, '{', &a, &b));
    TRY(p, expect(p, &i, "</function>", true));
    if (!add_call(p, got, na, nb, a, b, NULL, 0)) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* N\n{...} after ">>>", or where the answer begins (the generation prompt ends with
 * ">>>"); the recipient "all" frames text; "python" may take raw code */
static block_result read_functionary_v32(parser *p, size_t at, size_t *end, call_list *got) {
    size_t i = at, na, nb, a, b;
    if (starts(p->s, p->n, i, ">>>")) i += 3;
    TRY(p, read_name(p, &i, &na, &nb));
    TRY(p, expect(p, &i, "\n", false));
    if (nb - na == 3 && !memcmp(p->s + na, "all", 3)) {
        *end = i;
        return BLOCK_DROP;
    }
    if (!declared(p, p->s + na, nb - na)) return BLOCK_NONE;
    const size_t j = skip_ws(p->s, p->n, i);
    if (j == p->n) return failed(p, STEP_CUT);
    if (p->s[j] != '{' && nb - na == 6 && !memcmp(p->s + na, "python", 6)) return read_raw_code(p, j, ">>>", end, got);
    TRY(p, read_json(p, &i, '{', &a, &b));
    if (!add_call(p, got, na, nb, a, b, NULL, 0)) return BLOCK_NONE;
    *end = i;
    return BLOCK_CALLS;
}

/* functools[{"name": N, "arguments": A}, ...] */
static block_result read_firefunction(parser *p, size_t at, size_t *end, call_list *got) {
    return read_tagged_array(p, at, end, got, "functools", NULL, &openai_keys);
}

/* <|tool_call|>[{"name": N, "arguments": A}, ...]; Granite 3.3's thinking mode frames its
 * answer in <response> ... </response> */
static block_result read_granite(parser *p, size_t at, size_t *end, call_list *got) {
    static const char *const frames[] = {"<response>", "</response>"};
    if (framing(p, at, frames, end)) return BLOCK_DROP;
    return read_tagged_array(p, at, end, got, "<|tool_call|>", NULL, &openai_keys);
}

/* <TOOLCALL>[{"name": N, "arguments": A}, ...]</TOOLCALL> */
static block_result read_nemotron_v2(parser *p, size_t at, size_t *end, call_list *got) {
    return read_tagged_array(p, at, end, got, "<TOOLCALL>", "</TOOLCALL>", &openai_keys);
}

/* <tool_calls>[{"name": N, "arguments": A}, ...]</tool_calls> */
static block_result read_apriel(parser *p, size_t at, size_t *end, call_list *got) {
    return read_tagged_array(p, at, end, got, "<tool_calls>", "</tool_calls>", &openai_keys);
}

/* <|tool_calls_section_begin|>, for each call <|tool_call_begin|>functions.N:0
 * <|tool_call_argument_begin|>{...}<|tool_call_end|>, then <|tool_calls_section_end|>
 * (which may be missing at the end of the text). The id "functions.N:0" is kept: Kimi's
 * template writes it back as the call's id. */
static block_result read_kimi_k2(parser *p, size_t at, size_t *end, call_list *got) {
    if (!p->n_fns) return BLOCK_NONE;
    size_t i = at + strlen("<|tool_calls_section_begin|>");
    for (;;) {
        i = skip_ws(p->s, p->n, i);
        if (i == p->n && !p->partial && got->n) break;
        const step close = expect(p, &i, "<|tool_calls_section_end|>", false);
        if (close == STEP_OK) break;
        if (close == STEP_CUT) return failed(p, close);
        size_t ia, ib, a, b;
        TRY(p, expect(p, &i, "<|tool_call_begin|>", false));
        TRY(p, read_until(p, &i, "<|tool_call_argument_begin|>", "\n{", 160, &ia, &ib));
        while (ia < ib && is_ws(p->s[ia])) ia++;
        while (ib > ia && is_ws(p->s[ib - 1])) ib--;
        size_t na = ia, nb = ib;
        if (starts(p->s, nb, na, "functions.")) na += strlen("functions.");
        const char *colon = memrchr(p->s + na, ':', nb - na);
        if (colon) nb = (size_t)(colon - p->s);
        TRY(p, read_json(p, &i, '{', &a, &b));
        TRY(p, expect(p, &i, "<|tool_call_end|>", true));
        if (!add_call(p, got, na, nb, a, b, p->s + ia, ib - ia)) return BLOCK_NONE;
    }
    *end = i;
    return got->n ? BLOCK_CALLS : BLOCK_NONE;
}

/* How each format's blocks are found. */
typedef struct {
    const char *opens[6]; /* the markers that begin a block wherever they stand */
    bool at_answer;       /* a block is also tried where the answer begins */
    bool chains;          /* a block may follow a block of calls at once (white space between) */
    block_reader *read;
} format_row;

static const format_row formats[TY_TOOLS_N_FORMATS] = {
    [TY_TOOLS_GENERIC] = {{NULL}, true, false, read_generic},
    [TY_TOOLS_HERMES] = {{"<tool_call>"}, false, false, read_hermes},
    [TY_TOOLS_QWEN3_CODER] = {{"<tool_call>"}, false, false, read_qwen3_coder},
    [TY_TOOLS_LLAMA3] = {{NULL}, true, true, read_llama3},
    [TY_TOOLS_MISTRAL_NEMO] = {{"[TOOL_CALLS]"}, false, false, read_mistral_nemo},
    [TY_TOOLS_MISTRAL_SMALL] = {{"[TOOL_CALLS]"}, false, false, read_mistral_small},
    [TY_TOOLS_DEEPSEEK_R1] = {{DEEPSEEK_OPENS}, false, false, read_deepseek_r1},
    [TY_TOOLS_DEEPSEEK_V31] = {{DEEPSEEK_OPENS}, false, false, read_deepseek_v31},
    [TY_TOOLS_COMMAND_R] = {{"Action:"}, false, false, read_command_r},
    [TY_TOOLS_COMMAND_R7B] = {{"<|START_ACTION|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>"}, false, false,
                              read_command_r7b},
    [TY_TOOLS_FUNCTIONARY_V31] = {{"<function=", "<|python_tag|>"}, false, false, read_functionary_v31},
    [TY_TOOLS_FUNCTIONARY_V32] = {{">>>"}, true, false, read_functionary_v32},
    [TY_TOOLS_FIREFUNCTION] = {{"functools["}, false, false, read_firefunction},
    [TY_TOOLS_GRANITE] = {{"<|tool_call|>", "<response>", "</response>"}, false, false, read_granite},
    [TY_TOOLS_GPT_OSS] = {{NULL}, false, false, NULL}, /* read_harmony reads the whole answer */
    [TY_TOOLS_KIMI_K2] = {{"<|tool_calls_section_begin|>"}, false, false, read_kimi_k2},
    [TY_TOOLS_SEED_OSS] = {{"<seed:tool_call>"}, false, false, read_seed_oss},
    [TY_TOOLS_NEMOTRON_V2] = {{"<TOOLCALL>"}, false, false, read_nemotron_v2},
    [TY_TOOLS_APRIEL] = {{"<tool_calls>"}, false, false, read_apriel},
    [TY_TOOLS_GLM] = {{"<tool_call>"}, false, false, read_glm},
    [TY_TOOLS_MINIMAX_M2] = {{"<minimax:tool_call>"}, false, false, read_minimax},
};

/* ---------------------------------------------------------------- reading an answer */

/* The first opening marker at or after i; n if none. */
static size_t find_open(const parser *p, const format_row *f, size_t i) {
    size_t best = p->n;
    for (const char *const *m = f->opens; *m; m++) {
        const size_t k = find(p->s, p->n, i, *m);
        if (k < best) best = k;
    }
    return best;
}

/* Where a suffix of s[i, n) begins that may still grow into an opening marker; n if none. */
static size_t open_cut(const parser *p, const format_row *f, size_t i) {
    size_t cut = p->n;
    for (const char *const *m = f->opens; *m; m++) {
        const size_t k = cut_at(p->s, p->n, i, *m);
        if (k < cut) cut = k;
    }
    return cut;
}

/* Reads the answer from `from` as runs of content and blocks; the first run's text
 * begins at `run` (before `from` when the thinking block is kept in the content). */
static void read_blocks(parser *p, ty_tool_format fmt, size_t from, size_t run) {
    const format_row *f = &formats[fmt];
    size_t pos = from;
    bool at_block = f->at_answer;
    for (;;) {
        const size_t at = at_block ? skip_ws(p->s, p->n, pos) : find_open(p, f, pos);
        if (at == p->n && !at_block) break;
        size_t end = at;
        call_list got = {0};
        const block_result r = f->read(p, at, &end, &got);
        if (r == BLOCK_CALLS) keep_calls(p, &got);
        call_list_free(&got);
        if (r == BLOCK_OPEN) { /* held back, with all after it */
            run_add(p, run, at);
            run_end(p);
            return;
        }
        if (r == BLOCK_NONE) {
            if (at_block) at_block = false;
            else pos = at + 1;
            continue;
        }
        run_add(p, run, at);
        if (r == BLOCK_CALLS) run_end(p);
        pos = run = end;
        at_block = f->chains && r == BLOCK_CALLS;
    }
    run_add(p, run, p->partial ? open_cut(p, f, pos) : p->n);
    run_end(p);
}

/* Reads the thinking block the answer opens with (with starts_in, begins inside). Sets
 * where the rest begins (*body) and where its content does (*run: 0 when the block is
 * kept in the content as written). false: the text ends inside the block, nothing
 * follows it. */
static bool read_thinking(parser *p, ty_reasoning_format r, bool starts_in, bool keep, size_t *body, size_t *run) {
    *body = *run = 0;
    const char *open = thinking[r].open, *close = thinking[r].close;
    if (!open) return true;
    size_t i = skip_ws(p->s, p->n, 0);
    if (starts(p->s, p->n, i, open)) i += strlen(open); /* also a marker repeated after the prompt's */
    else if (p->partial && cut_short(p->s, p->n, i, open)) return false;
    else if (!starts_in) return true;
    else i = 0;
    const size_t c = find(p->s, p->n, i, close);
    const bool closed = c < p->n;
    if (keep) put_line(&p->reasoning, p->s + i, (closed || !p->partial ? c : cut_at(p->s, p->n, i, close)) - i);
    *body = *run = closed ? c + strlen(close) : p->n;
    if (!keep) *run = 0;
    if (!closed && !keep) {
        run_add(p, 0, p->n);
        run_end(p);
    }
    return closed;
}

/* The markers that end a harmony message (<|start|> begins the next one). */
static const char *const harmony_ends[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>", NULL};

/* A harmony message to a function: its body a JSON object of arguments. Content when the
 * function is not declared or the body is not an object; false while it is undecided. */
static bool harmony_call(parser *p, size_t na, size_t nb, size_t body, size_t be, size_t shown, bool open) {
    const size_t j = skip_ws(p->s, be, body);
    if (declared(p, p->s + na, nb - na)) {
        if (j == be && open && p->partial) return false; /* nothing yet */
        const size_t e = j < be && p->s[j] == '{' ? container_end(p->s, be, j) : 0;
        if (!e && j < be && p->s[j] == '{' && open && p->partial) return false;
        call_list got = {0};
        if (e && add_call(p, &got, na, nb, j, e, NULL, 0)) {
            keep_calls(p, &got);
            call_list_free(&got);
            return true;
        }
        call_list_free(&got);
    }
    run_add(p, body, shown);
    run_end(p);
    return true;
}

/* gpt-oss's harmony: messages [<|start|>assistant] HEADER<|message|>BODY<|end|> (or
 * <|call|>, <|return|>), the header naming the channel (analysis: reasoning; final and
 * commentary: content) and, for a call, the recipient " to=functions.N" (in the channel's
 * header, or before it after the role). With keep false an analysis message stays in
 * the content as written, markers and all (as llama.cpp's reasoning_format none). */
static void read_harmony(parser *p, bool keep) {
    const char *s = p->s;
    const size_t n = p->n;
    size_t pos = 0;
    while (pos < n) {
        size_t i = pos;
        if (starts(s, n, i, "<|start|>")) {
            i += strlen("<|start|>");
            while (i < n && s[i] != '<' && s[i] != ' ') i++; /* the role */
        } else if (p->partial && cut_short(s, n, i, "<|start|>")) {
            return;
        }
        const size_t msg = i;
        if (!starts(s, n, i, "<|channel|>") && !starts(s, n, i, " to=")) {
            if (p->partial && (cut_short(s, n, i, "<|channel|>") || cut_short(s, n, i, " to="))) return;
            /* text outside a message: content, up to the next message */
            size_t e = find(s, n, i, "<|start|>"), k = find(s, n, i, "<|channel|>");
            if (k < e) e = k;
            const bool found = e < n;
            if (!found && p->partial) {
                e = cut_at(s, n, i, "<|start|>");
                k = cut_at(s, n, i, "<|channel|>");
                if (k < e) e = k;
            }
            run_add(p, i, e);
            run_end(p);
            if (!found) return;
            pos = e;
            continue;
        }
        const size_t h = find(s, n, i, "<|message|>");
        if (h == n) {
            if (!p->partial) { /* a broken header: content as written */
                run_add(p, i, n);
                run_end(p);
            }
            return;
        }
        const size_t body = h + strlen("<|message|>");
        size_t be = n, after = n, shown = n;
        for (const char *const *m = harmony_ends; *m; m++) {
            const size_t k = find(s, n, body, *m);
            if (k < be) be = k, after = strcmp(*m, "<|start|>") ? k + strlen(*m) : k;
        }
        const bool open = be == n;
        if (!open) shown = be;
        for (const char *const *m = harmony_ends; open && p->partial && *m; m++) {
            const size_t k = cut_at(s, n, body, *m);
            if (k < shown) shown = k;
        }
        const size_t to = find(s, h, i, " to=functions.");
        if (to < h) {
            const size_t na = to + strlen(" to=functions.");
            size_t nb = na;
            while (nb < h && s[nb] != ' ' && s[nb] != '<') nb++;
            if (!harmony_call(p, na, nb, body, be, shown, open)) return;
        } else if (starts(s, h, i, "<|channel|>analysis")) {
            if (keep) {
                put_line(&p->reasoning, s + body, shown - body);
            } else {
                run_add(p, msg, open ? shown : after);
                run_end(p);
            }
        } else {
            run_add(p, body, shown);
            run_end(p);
        }
        if (open) return;
        pos = after;
    }
}

bool ty_chat_output_parse(ty_chat_syntax syn, bool starts_in_reasoning, bool reasoning, const char *const *fns,
                          size_t n_fns, bool parallel, const char *text, size_t len, bool partial,
                          ty_chat_output *out) {
    memset(out, 0, sizeof *out);
    if (!text) text = "", len = 0;
    if ((unsigned)syn.tools >= TY_TOOLS_N_FORMATS) syn.tools = TY_TOOLS_GENERIC;
    if ((unsigned)syn.reasoning >= TY_REASONING_N_FORMATS) syn.reasoning = TY_REASONING_NONE;
    parser p = {.s = text,
                .n = partial ? complete_utf8(text, len) : len,
                .partial = partial,
                .fns = fns,
                .n_fns = fns ? n_fns : 0,
                .parallel = parallel};
    if (syn.tools == TY_TOOLS_GPT_OSS) {
        read_harmony(&p, reasoning && syn.reasoning == TY_REASONING_GPT_OSS);
    } else {
        size_t body, run;
        if (read_thinking(&p, syn.reasoning, starts_in_reasoning, reasoning, &body, &run))
            read_blocks(&p, syn.tools, body, run);
    }
    free(p.run.v);
    if (p.calls.oom || p.run.oom || p.content.oom || p.reasoning.oom) {
        call_list_free(&p.calls);
        free(p.content.v);
        free(p.reasoning.v);
        return false;
    }
    if (!p.content.n) free(p.content.v), p.content.v = NULL;
    if (!p.reasoning.n) free(p.reasoning.v), p.reasoning.v = NULL;
    out->reasoning = p.reasoning.v;
    out->content = p.content.v;
    out->calls = p.calls.v;
    out->n_calls = p.calls.n;
    if (!out->n_calls) free(out->calls), out->calls = NULL;
    return true;
}

void ty_chat_output_free(ty_chat_output *o) {
    if (!o) return;
    call_list c = {o->calls, o->n_calls, o->n_calls, false};
    call_list_free(&c);
    free(o->reasoning);
    free(o->content);
    memset(o, 0, sizeof *o);
}

/* ---------------------------------------------------------------- forcing */

/* How each format writes a forced answer: the literal text of one call around its slots
 * (%N the name, %A the arguments, %I an id), and around and between the calls. The
 * forms are those the models' templates write, so the forced text reads as the model's
 * own (and parses back: test_tool_calls checks both). */
typedef struct {
    const char *call;
    const char *id;    /* GBNF of %I */
    const char *open, *sep, *close;
    const char *param; /* XML formats: one parameter, %K its name, %V its value (NULL: %A is JSON) */
} grammar_row;

static const grammar_row grammars[TY_TOOLS_N_FORMATS] = {
    [TY_TOOLS_GENERIC] = {"{\"name\": \"%N\", \"arguments\": %A}", NULL, "{\"tool_calls\": [", ", ", "]}", NULL},
    [TY_TOOLS_HERMES] = {"<tool_call>\n{\"name\": \"%N\", \"arguments\": %A}\n</tool_call>", NULL, "", "\n", "", NULL},
    [TY_TOOLS_QWEN3_CODER] = {"<tool_call>\n<function=%N>\n%A</function>\n</tool_call>", NULL, "", "\n", "",
                              "<parameter=%K>\n%V\n</parameter>\n"},
    [TY_TOOLS_LLAMA3] = {"{\"name\": \"%N\", \"parameters\": %A}", NULL, "", "\n", "", NULL},
    /* Nemo's template insists on 9-letter ids; the model writes them */
    [TY_TOOLS_MISTRAL_NEMO] = {"{\"name\": \"%N\", \"arguments\": %A, \"id\": \"%I\"}", "[a-zA-Z0-9]{9}",
                               "[TOOL_CALLS][", ", ", "]", NULL},
    [TY_TOOLS_MISTRAL_SMALL] = {"[TOOL_CALLS]%N[ARGS]%A", NULL, "", "", "", NULL},
    [TY_TOOLS_DEEPSEEK_R1] = {"<｜tool▁call▁begin｜>function<｜tool▁sep｜>%N\n```json\n%A\n```<｜tool▁call▁end｜>", NULL,
                              "<｜tool▁calls▁begin｜>", "\n", "<｜tool▁calls▁end｜>", NULL},
    [TY_TOOLS_DEEPSEEK_V31] = {"<｜tool▁call▁begin｜>%N<｜tool▁sep｜>%A<｜tool▁call▁end｜>", NULL, "<｜tool▁calls▁begin｜>",
                               "", "<｜tool▁calls▁end｜>", NULL},
    [TY_TOOLS_COMMAND_R] = {"{\"tool_name\": \"%N\", \"parameters\": %A}", NULL, "Action:\n```json\n[\n", ",\n",
                            "\n]```", NULL},
    /* R7B's template numbers the calls of a conversation; any small number reads back */
    [TY_TOOLS_COMMAND_R7B] = {"{\"tool_call_id\": \"%I\", \"tool_name\": \"%N\", \"parameters\": %A}", "[0-9]{1,4}",
                              "<|START_ACTION|>[\n    ", ",\n    ", "\n]<|END_ACTION|>", NULL},
    [TY_TOOLS_FUNCTIONARY_V31] = {"<function=%N>%A</function>", NULL, "", "", "", NULL},
    [TY_TOOLS_FUNCTIONARY_V32] = {"%N\n%A", NULL, "", ">>>", "", NULL},
    [TY_TOOLS_FIREFUNCTION] = {"{\"name\": \"%N\", \"arguments\": %A}", NULL, " functools[", ", ", "]", NULL},
    [TY_TOOLS_GRANITE] = {"{\"name\": \"%N\", \"arguments\": %A}", NULL, "<|tool_call|>[", ", ", "]", NULL},
    [TY_TOOLS_GPT_OSS] = {"<|channel|>commentary to=functions.%N <|constrain|>json<|message|>%A", NULL, "", "", "",
                          NULL},
    [TY_TOOLS_KIMI_K2] = {"<|tool_call_begin|>functions.%N:%I<|tool_call_argument_begin|>%A<|tool_call_end|>",
                          "[0-9]{1,4}", "<|tool_calls_section_begin|>", "", "<|tool_calls_section_end|>", NULL},
    [TY_TOOLS_NEMOTRON_V2] = {"{\"name\": \"%N\", \"arguments\": %A}", NULL, "<TOOLCALL>[", ", ", "]</TOOLCALL>", NULL},
    [TY_TOOLS_APRIEL] = {"{\"name\": \"%N\", \"arguments\": %A}", NULL, "<tool_calls>[", ", ", "]</tool_calls>", NULL},
    [TY_TOOLS_GLM] = {"<tool_call>%N\n%A</tool_call>", NULL, "", "\n", "", "<arg_key>%K</arg_key>\n<arg_value>%V</arg_value>\n"},
    [TY_TOOLS_MINIMAX_M2] = {"<minimax:tool_call>\n<invoke name=\"%N\">\n%A</invoke>\n</minimax:tool_call>", NULL, "", "\n",
                             "", "<parameter name=\"%K\">%V</parameter>\n"},
    [TY_TOOLS_SEED_OSS] = {"<seed:tool_call>\n<function=%N>\n%A</function>\n</seed:tool_call>", NULL, "", "\n", "",
                           "<parameter=%K>%V</parameter>\n"},
};

/* A GBNF string literal of s[0, n), and a space. */
static void put_literal(ty_buf *b, const char *s, size_t n) {
    ty_buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '"': TOY_BUF_PUT(b, "\\\""); break;
        case '\\': TOY_BUF_PUT(b, "\\\\"); break;
        case '\n': TOY_BUF_PUT(b, "\\n"); break;
        case '\r': TOY_BUF_PUT(b, "\\r"); break;
        case '\t': TOY_BUF_PUT(b, "\\t"); break;
        default: ty_buf_append(b, s + i, 1);
        }
    }
    ty_buf_append(b, "\" ", 2);
}

/* A pattern's slot: text spliced into the literal, or a GBNF fragment. */
typedef struct {
    char key;
    const char *text;
    bool gbnf;
} slot;

/* The pattern as GBNF: its text as literals, each %X replaced by its slot. */
static void put_pattern(ty_buf *b, const char *pattern, const slot *slots, size_t n_slots) {
    ty_buf lit = {0};
    for (const char *c = pattern; *c; c++) {
        const slot *sl = NULL;
        for (size_t k = 0; c[0] == '%' && k < n_slots; k++)
            if (slots[k].key == c[1]) sl = &slots[k];
        if (!sl) {
            ty_buf_append(&lit, c, 1);
            continue;
        }
        c++;
        if (!sl->gbnf) {
            ty_buf_append(&lit, sl->text, strlen(sl->text));
            continue;
        }
        if (lit.n) put_literal(b, lit.v, lit.n), lit.n = 0;
        TOY_BUF_PUT(b, sl->text, " ");
    }
    if (lit.n) put_literal(b, lit.v, lit.n);
    if (lit.oom) b->oom = true;
    free(lit.v);
}

/* rule ::= text without the (ASCII) marker: any character but the marker's first, or a
 * proper beginning of the marker and a character that does not continue it. (So the text
 * cannot end in a beginning of the marker either: a small price for a short rule.) */
static void put_text_without(ty_buf *b, const char *rule, const char *marker) {
    TOY_BUF_PUT(b, rule, " ::= ( ");
    for (size_t k = 0; marker[k]; k++) {
        if (k) TOY_BUF_PUT(b, " | "), put_literal(b, marker, k);
        TOY_BUF_PUT(b, "[^");
        const char c = marker[k];
        if (c == '\\' || c == ']' || c == '^' || c == '-' || c == '[') ty_buf_append(b, "\\", 1);
        ty_buf_append(b, &c, 1);
        TOY_BUF_PUT(b, "]");
    }
    TOY_BUF_PUT(b, " )*\n");
}

/* The parameters of an XML call as a GBNF fragment (*params), with the rules it needs
 * appended to b: each property of the schema in its order, optional unless required.
 * false with err set on a schema the grammar cannot express. */
static bool put_xml_params(ty_buf *b, ty_buf *params, const char *pattern, const char *rule,
                           const ty_tool_function *fn, bool *uses_text, char *err, size_t err_size) {
    const json_t *props = json_object_get(fn->parameters, "properties");
    const json_t *required = json_object_get(fn->parameters, "required");
    if (props && !json_is_object(props)) {
        snprintf(err, err_size, "#/properties: expected an object");
        return false;
    }
    const char *key;
    json_t *prop;
    size_t j = 0;
    json_object_foreach((json_t *)props, key, prop) {
        bool req = false;
        size_t r;
        json_t *name;
        json_array_foreach(required, r, name) req |= json_is_string(name) && !strcmp(json_string_value(name), key);
        /* a string's value is written raw (an enum's, one of its values); others as JSON */
        const json_t *type = json_object_get(prop, "type"), *values = json_object_get(prop, "enum");
        bool strings = json_array_size(values) > 0;
        size_t v;
        json_t *value;
        json_array_foreach(values, v, value) strings &= json_is_string(value);
        ty_buf frag = {0};
        if (strings) {
            TOY_BUF_PUT(&frag, "( ");
            json_array_foreach(values, v, value) {
                if (v) TOY_BUF_PUT(&frag, "| ");
                put_literal(&frag, json_string_value(value), json_string_length(value));
            }
            TOY_BUF_PUT(&frag, ")");
        } else if (json_is_string(type) && !strcmp(json_string_value(type), "string") && !values &&
                   !json_object_get(prop, "const")) {
            TOY_BUF_PUT(&frag, "tc-text");
            *uses_text = true;
        } else {
            char value_rule[96], e[256];
            snprintf(value_rule, sizeof value_rule, "%s-p%zu", rule, j);
            if (!ty_json_schema_gbnf(prop, fn->strict, value_rule, b, e, sizeof e)) {
                snprintf(err, err_size, "#/properties/%s%s", key, e[0] == '#' ? e + 1 : e);
                free(frag.v);
                return false;
            }
            TOY_BUF_PUT(&frag, value_rule);
        }
        const slot slots[] = {{'K', key, false}, {'V', frag.v ? frag.v : "", true}};
        TOY_BUF_PUT(params, "( ");
        put_pattern(params, pattern, slots, 2);
        TOY_BUF_PUT(params, req ? ") " : ")? ");
        if (frag.oom) params->oom = true;
        free(frag.v);
        j++;
    }
    return true;
}

char *ty_chat_grammar(ty_chat_syntax syn, ty_prompt_thinking thinking_at, const ty_tool_function *fns, size_t n,
                      bool parallel, size_t *bad, char *err, size_t err_size) {
    char e[320] = "";
    if (bad) *bad = SIZE_MAX;
    if ((unsigned)syn.tools >= TY_TOOLS_N_FORMATS || (unsigned)syn.reasoning >= TY_REASONING_N_FORMATS || !n) {
        snprintf(err, err_size, "no functions to call");
        return NULL;
    }
    const grammar_row *g = &grammars[syn.tools];
    ty_buf b = {0}, alts = {0};
    bool uses_text = false;
    for (size_t k = 0; k < n; k++) {
        char rule[48], args_rule[64];
        snprintf(rule, sizeof rule, "tc-call%zu", k);
        snprintf(args_rule, sizeof args_rule, "%s-args", rule);
        ty_buf args = {0}; /* the fragment of %A */
        bool ok;
        if (g->param) {
            ok = put_xml_params(&b, &args, g->param, rule, &fns[k], &uses_text, e, sizeof e);
        } else {
            ok = fns[k].parameters ? ty_json_schema_gbnf(fns[k].parameters, fns[k].strict, args_rule, &b, e, sizeof e)
                                   : ty_json_schema_gbnf_any_object(args_rule, &b);
            TOY_BUF_PUT(&args, args_rule);
        }
        if (!ok) {
            free(args.v);
            free(b.v);
            free(alts.v);
            if (bad && strcmp(e, "out of memory")) *bad = k;
            snprintf(err, err_size, "%s", e[0] ? e : "out of memory");
            return NULL;
        }
        const slot slots[] = {{'N', fns[k].name, false}, {'A', args.v ? args.v : "", true}, {'I', g->id, true}};
        TOY_BUF_PUT(&b, rule, " ::= ");
        put_pattern(&b, g->call, slots, 3);
        TOY_BUF_PUT(&b, "\n");
        TOY_BUF_PUT(&alts, alts.n ? " | " : "", rule);
        if (args.oom) b.oom = true;
        free(args.v);
    }
    TOY_BUF_PUT(&b, "tc-call ::= ", alts.v ? alts.v : "", "\n");
    free(alts.v);

    /* one call, or up to TY_TOOL_CALLS_MAX; a gpt-oss call ends the turn */
    char calls[64];
    if (parallel && syn.tools != TY_TOOLS_GPT_OSS) {
        TOY_BUF_PUT(&b, "tc-sep ::= ");
        put_literal(&b, g->sep, strlen(g->sep));
        TOY_BUF_PUT(&b, "\n");
        snprintf(calls, sizeof calls, "tc-call ( tc-sep tc-call ){0,%d}", TY_TOOL_CALLS_MAX - 1);
    } else {
        snprintf(calls, sizeof calls, "tc-call");
    }

    /* a thinking block first (the prompt may have opened it, or closed it) */
    TOY_BUF_PUT(&b, "root ::= ");
    const char *open = thinking[syn.reasoning].open, *close = thinking[syn.reasoning].close;
    const bool starts_in_reasoning = thinking_at == TY_THINK_OPEN;
    if (thinking_at == TY_THINK_CLOSED) {
        close = NULL;
    } else if (syn.tools == TY_TOOLS_GPT_OSS && syn.reasoning == TY_REASONING_GPT_OSS) {
        TOY_BUF_PUT(&b, "( ");
        put_literal(&b, open, strlen(open));
        TOY_BUF_PUT(&b, "tc-think ");
        put_literal(&b, "<|end|><|start|>assistant", strlen("<|end|><|start|>assistant"));
        TOY_BUF_PUT(&b, ")? ");
    } else if (open && syn.reasoning != TY_REASONING_GPT_OSS) {
        TOY_BUF_PUT(&b, starts_in_reasoning ? "" : "( ");
        if (!starts_in_reasoning) put_literal(&b, open, strlen(open));
        TOY_BUF_PUT(&b, "tc-think ");
        put_literal(&b, close, strlen(close));
        TOY_BUF_PUT(&b, starts_in_reasoning ? "tc-ws " : "tc-ws )? ");
    } else {
        close = NULL;
    }
    if (g->open[0]) put_literal(&b, g->open, strlen(g->open));
    TOY_BUF_PUT(&b, calls, " ");
    if (g->close[0]) put_literal(&b, g->close, strlen(g->close));
    TOY_BUF_PUT(&b, "\n");
    if (close) {
        put_text_without(&b, "tc-think", close);
        TOY_BUF_PUT(&b, "tc-ws ::= [ \\t\\n]{0,4}\n");
    }
    if (uses_text) { /* a string's raw text: anything but the tag that ends the value */
        const char *v = strstr(g->param, "%V"), *tag = v ? strstr(v, "</") : NULL, *gt = tag ? strchr(tag, '>') : NULL;
        char end[48] = "</parameter>";
        if (gt && (size_t)(gt - tag + 1) < sizeof end) snprintf(end, sizeof end, "%.*s", (int)(gt - tag + 1), tag);
        put_text_without(&b, "tc-text", end);
    }
    if (b.oom) {
        free(b.v);
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    return b.v;
}

/* ---------------------------------------------------------------- the API's calls */

/* (the ids need no secrecy, only to differ: the kernel's random bytes, else the clock and
 * a counter mixed) */
void ty_tool_call_id(char id[32], ty_tool_format format) {
    const bool mistral = format == TY_TOOLS_MISTRAL_NEMO || format == TY_TOOLS_MISTRAL_SMALL;
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static atomic_uint_fast64_t counter;
    unsigned char r[24];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) { /* no entropy yet: time and a counter */
        uint64_t x = (uint64_t)time(NULL) ^ (atomic_fetch_add(&counter, 1) + 1) * 0x9e3779b97f4a7c15ULL;
        for (size_t i = 0; i < sizeof r; i++) {
            x ^= x >> 31;
            x *= 0xbf58476d1ce4e5b9ULL;
            r[i] = (unsigned char)(x >> 56);
        }
    }
    const size_t n = mistral ? 9 : sizeof r, at = mistral ? 0 : 5;
    memcpy(id, "call_", at);
    for (size_t i = 0; i < n; i++) id[at + i] = alnum[r[i] % (sizeof alnum - 1)];
    id[at + n] = 0;
}

json_t *ty_tool_calls_json(const ty_chat_output *o, size_t first, bool with_index, ty_tool_format format) {
    json_t *arr = json_array();
    for (size_t i = first; arr && i < o->n_calls; i++) {
        char id[32];
        ty_tool_call_id(id, format);
        /* the model's own id where it wrote one: its template expects it back */
        json_t *c = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", o->calls[i].id ? o->calls[i].id : id, "type", "function",
                              "function", "name",
                              o->calls[i].name, "arguments", o->calls[i].arguments);
        if (c && with_index) json_object_set_new(c, "index", json_integer((json_int_t)i));
        if (!c || json_array_append_new(arr, c)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

