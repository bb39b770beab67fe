/* tokenizer.c — the vocabulary of a GGUF file and what every tokenizer kind shares,
 * as llama.cpp's src/llama-vocab.cpp does it: reading tokenizer.* (llama_vocab::load,
 * with its defaults and its detection of special tokens by their text), splitting the
 * input at the text of special tokens (tokenizer_st_partition), adding BOS/EOS, and
 * token pieces and detokenization (token_to_piece, detokenize). */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "unicode.h"

/* ---------------------------------------------------------------- reading metadata */

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TOKEN_TYPE "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"
#define KEY_ADD_BOS "tokenizer.ggml.add_bos_token"
#define KEY_ADD_EOS "tokenizer.ggml.add_eos_token"
#define KEY_ADD_SEP "tokenizer.ggml.add_sep_token"
#define KEY_BOS "tokenizer.ggml.bos_token_id"
#define KEY_EOS "tokenizer.ggml.eos_token_id"
#define KEY_SEP "tokenizer.ggml.seperator_token_id" /* sic, as llama.cpp spells it */

static toy_status get_str_opt(const toy_gguf *g, const char *key, const char **s, size_t *len) {
    const toy_gguf_value *v = toy_gguf_get(g, key);
    *s = "";
    *len = 0;
    if (!v) return TOY_OK;
    if (toy_gguf_value_type(v) != TOY_GGUF_STRING)
        return ty_error(TOY_ERR_FORMAT, "%s: expected a string, got %s", key,
                        toy_gguf_type_name(toy_gguf_value_type(v)));
    return toy_gguf_value_str(v, s, len);
}

static toy_status get_bool_opt(const toy_gguf *g, const char *key, bool *out) {
    const toy_gguf_value *v = toy_gguf_get(g, key);
    if (!v) return TOY_OK;
    if (toy_gguf_value_type(v) != TOY_GGUF_BOOL)
        return ty_error(TOY_ERR_FORMAT, "%s: expected a bool, got %s", key,
                        toy_gguf_type_name(toy_gguf_value_type(v)));
    return toy_gguf_value_bool(v, out);
}

/* A special token id: the default is dropped when out of range, a key in range
 * replaces it (llama.cpp only warns about one out of range and keeps the default). */
static toy_status get_token_id(const toy_gguf *g, const char *key, int32_t n_tokens,
                               int32_t *id) {
    if (*id >= n_tokens) *id = -1;
    const toy_gguf_value *v = toy_gguf_get(g, key);
    if (!v) return TOY_OK;
    int64_t x;
    if (toy_gguf_value_i64(v, &x))
        return ty_error(TOY_ERR_FORMAT, "%s: expected an integer token id, got %s", key,
                        toy_gguf_type_name(toy_gguf_value_type(v)));
    if (x >= 0 && x < n_tokens) *id = (int32_t)x;
    return TOY_OK;
}

static toy_status get_str_array(const toy_gguf *g, const char *key, bool required,
                                const toy_gguf_value **out) {
    const toy_gguf_value *v = toy_gguf_get(g, key);
    *out = NULL;
    if (!v) {
        if (required) return ty_error(TOY_ERR_NOT_FOUND, "%s: key not found", key);
        return TOY_OK;
    }
    if (toy_gguf_value_type(v) != TOY_GGUF_ARRAY || toy_gguf_array_type(v) != TOY_GGUF_STRING)
        return ty_error(TOY_ERR_FORMAT, "%s: expected an array of strings", key);
    *out = v;
    return TOY_OK;
}

/* An array of n_tokens (or more) numbers, or NULL when the key is absent. */
static toy_status get_num_array(const toy_gguf *g, const char *key, int32_t n_tokens,
                                const toy_gguf_value **out) {
    const toy_gguf_value *v = toy_gguf_get(g, key);
    *out = NULL;
    if (!v) return TOY_OK;
    toy_gguf_type t = toy_gguf_value_type(v) == TOY_GGUF_ARRAY ? toy_gguf_array_type(v)
                                                                : TOY_GGUF_TYPE_COUNT;
    if (t == TOY_GGUF_TYPE_COUNT || t == TOY_GGUF_STRING || t == TOY_GGUF_ARRAY ||
        t == TOY_GGUF_BOOL)
        return ty_error(TOY_ERR_FORMAT, "%s: expected an array of numbers", key);
    if (toy_gguf_array_len(v) < (uint64_t)n_tokens)
        return ty_error(TOY_ERR_FORMAT, "%s: %llu entries for %d tokens", key,
                        (unsigned long long)toy_gguf_array_len(v), (int)n_tokens);
    *out = v;
    return TOY_OK;
}

static uint16_t attr_of_type(int64_t type) {
    switch (type) {
    case TOY_TOKEN_NORMAL: return TY_ATTR_NORMAL;
    case TOY_TOKEN_UNKNOWN: return TY_ATTR_UNKNOWN;
    case TOY_TOKEN_CONTROL: return TY_ATTR_CONTROL;
    case TOY_TOKEN_USER_DEFINED: return TY_ATTR_USER_DEFINED;
    case TOY_TOKEN_UNUSED: return TY_ATTR_UNUSED;
    case TOY_TOKEN_BYTE: return TY_ATTR_BYTE;
    default: return TY_ATTR_UNDEFINED;
    }
}

/* tokens, scores and types; the text of an empty token becomes "[EMPTY_<id>]" */
static toy_status load_tokens(toy_vocab *v, const toy_gguf *g) {
    const toy_gguf_value *tokens, *scores, *types;
    toy_status st = get_str_array(g, KEY_TOKENS, true, &tokens);
    if (st) return st;
    uint64_t n = toy_gguf_array_len(tokens);
    if (n == 0) return ty_error(TOY_ERR_FORMAT, "%s: no tokens", KEY_TOKENS);
    if (n > INT32_MAX) return ty_error(TOY_ERR_FORMAT, "%s: %llu tokens", KEY_TOKENS,
                                       (unsigned long long)n);
    v->n_tokens = (int32_t)n;
    if ((st = get_num_array(g, KEY_SCORES, v->n_tokens, &scores))) return st;
    if ((st = get_num_array(g, KEY_TOKEN_TYPE, v->n_tokens, &types))) return st;

    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if ((st = toy_gguf_array_str(tokens, i, &s, &len)))
            return ty_error_wrap(st, "%s[%llu]", KEY_TOKENS, (unsigned long long)i);
        if (len > UINT32_MAX / 2)
            return ty_error(TOY_ERR_FORMAT, "%s[%llu]: token of %zu bytes", KEY_TOKENS,
                            (unsigned long long)i, len);
        total += (len ? len : 20) + 1;
    }
    if (total > UINT32_MAX) return ty_error(TOY_ERR_FORMAT, "%s: too much text", KEY_TOKENS);

    v->tokens = calloc(n, sizeof *v->tokens);
    v->text = malloc(total);
    if (!v->tokens || !v->text) return ty_error(TOY_ERR_NOMEM, "vocabulary: out of memory");
    if ((st = ty_strmap_init(&v->token_ids, (uint32_t)n))) return st;

    uint32_t off = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const char *s;
        size_t len;
        toy_gguf_array_str(tokens, (uint64_t)i, &s, &len);
        char *dst = v->text + off;
        if (len) {
            memcpy(dst, s, len);
        } else {
            len = (size_t)snprintf(dst, 21, "[EMPTY_%d]", (int)i);
        }
        dst[len] = 0;
        ty_token_data *t = &v->tokens[i];
        t->text_off = off;
        t->text_len = (uint32_t)len;
        off += (uint32_t)len + 1;
        if (!ty_strmap_insert(&v->token_ids, dst, t->text_len, i))
            return ty_error(TOY_ERR_FORMAT, "%s: duplicate token '%s' has ids %d and %d",
                            KEY_TOKENS, dst, (int)ty_strmap_find(&v->token_ids, dst, len),
                            (int)i);
        if ((int)len > v->max_token_len) v->max_token_len = (int)len;

        double score = 0;
        if (scores && toy_gguf_array_f64(scores, (uint64_t)i, &score))
            return ty_error_wrap(TOY_ERR_FORMAT, "%s[%d]", KEY_SCORES, (int)i);
        t->score = (float)score;
        t->attr = TY_ATTR_NORMAL;
        if (types) {
            int64_t type;
            if (toy_gguf_array_i64(types, (uint64_t)i, &type))
                return ty_error(TOY_ERR_FORMAT, "%s: expected an array of integers",
                                KEY_TOKEN_TYPE);
            t->attr = attr_of_type(type);
        }
    }
    return TOY_OK;
}

/* BPE merges "left right" -> rank. llama.cpp splits each at its first space after the
 * first byte and keeps the first rank of a pair; looking "left right" up among the
 * whole strings gives the same answers, because symbols never contain a space. */
static toy_status load_merges(toy_vocab *v, const toy_gguf *g) {
    const toy_gguf_value *merges;
    toy_status st = get_str_array(g, KEY_MERGES, true, &merges);
    if (st) return st;
    uint64_t n = toy_gguf_array_len(merges);
    if (n > INT32_MAX) return ty_error(TOY_ERR_FORMAT, "%s: %llu merges", KEY_MERGES,
                                       (unsigned long long)n);
    size_t total = 1;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if ((st = toy_gguf_array_str(merges, i, &s, &len)))
            return ty_error_wrap(st, "%s[%llu]", KEY_MERGES, (unsigned long long)i);
        if (len > UINT32_MAX) return ty_error(TOY_ERR_FORMAT, "%s: merge too long", KEY_MERGES);
        total += len + 1;
    }
    v->merge_text = malloc(total);
    if (!v->merge_text) return ty_error(TOY_ERR_NOMEM, "vocabulary: out of memory");
    if ((st = ty_strmap_init(&v->merges, (uint32_t)n))) return st;
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        toy_gguf_array_str(merges, i, &s, &len);
        if (len < 3 || !memchr(s + 1, ' ', len - 1)) continue; /* no pair: never matches */
        char *dst = v->merge_text + off;
        memcpy(dst, s, len);
        dst[len] = 0;
        off += len + 1;
        ty_strmap_insert(&v->merges, dst, (uint32_t)len, (int32_t)i);
    }
    return TOY_OK;
}

/* ---------------------------------------------------------------- special tokens */

static int32_t find_text(const toy_vocab *v, const char *s) {
    return ty_vocab_find(v, s, strlen(s));
}

/* llama.cpp finds EOT, EOM and FIM tokens by their text when no key names them, and
 * makes a token so found a control token. It walks a hash map, so when several texts
 * are present which one wins is unspecified there; toy takes them in list order. */
static void detect_by_text(toy_vocab *v, int32_t *id, const char *const *texts) {
    if (*id >= 0) return;
    for (; *texts; texts++) {
        int32_t t = find_text(v, *texts);
        if (t >= 0) {
            *id = t;
            v->tokens[t].attr |= TY_ATTR_CONTROL;
            return;
        }
    }
}

static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
    "<\uff5cend\u2581of\u2581sentence\uff5c>", /* DeepSeek */
    "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\uff5cfim\u2581begin\uff5c>", "<PRE>", "\u2581<PRE>",
    "<|code_prefix|>", NULL};
static const char *const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\uff5cfim\u2581hole\uff5c>", "<SUF>", "\u2581<SUF>",
    "<|code_suffix|>", NULL};
static const char *const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\uff5cfim\u2581end\uff5c>", "<MID>", "\u2581<MID>",
    "<|code_middle|>", NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                            NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};

/* The texts that end generation (llama.cpp's list as of the reference build, late
 * September 2025: without the later "</s>", "<eos>" and Gemma 4 entries). */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", NULL};

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static toy_status build_eog(toy_vocab *v) {
    /* at most: every text of the list, 3 FIM tokens, EOS, EOT, EOM */
    v->eog = malloc(32 * sizeof *v->eog);
    if (!v->eog) return ty_error(TOY_ERR_NOMEM, "vocabulary: out of memory");
    int32_t n = 0;
    int32_t ids[] = {v->fim_pad, v->fim_rep, v->fim_sep};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= 0) v->eog[n++] = ids[i];
    for (const char *const *t = eog_texts; *t; t++) {
        int32_t id = find_text(v, *t);
        if (id < 0) continue;
        v->eog[n++] = id;
        v->tokens[id].attr |= TY_ATTR_CONTROL;
    }
    /* gpt-oss: always render these */
    static const char *const user_texts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                             "<|constrain|>", NULL};
    for (const char *const *t = user_texts; *t; t++) {
        int32_t id = find_text(v, *t);
        if (id >= 0) v->tokens[id].attr = TY_ATTR_USER_DEFINED;
    }
    int32_t more[] = {v->eos, v->eot, v->eom};
    for (int i = 0; i < 3; i++)
        if (more[i] >= 0) v->eog[n++] = more[i];

    qsort(v->eog, (size_t)n, sizeof *v->eog, cmp_i32);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (m == 0 || v->eog[m - 1] != v->eog[i]) v->eog[m++] = v->eog[i];
    v->n_eog = m;

    /* o200k_harmony (gpt-oss): with <|return|> and <|call|>, <|end|> is no end */
    int32_t ret = find_text(v, "<|return|>"), call = find_text(v, "<|call|>");
    int32_t end = find_text(v, "<|end|>");
    if (ret >= 0 && call >= 0 && end >= 0 && toy_vocab_is_eog(v, ret) &&
        toy_vocab_is_eog(v, call) && toy_vocab_is_eog(v, end)) {
        int32_t k = 0;
        for (int32_t i = 0; i < v->n_eog; i++)
            if (v->eog[i] != end) v->eog[k++] = v->eog[i];
        v->n_eog = k;
        v->tokens[end].attr = TY_ATTR_USER_DEFINED;
    }
    return TOY_OK;
}

typedef struct {
    uint32_t len;
    int32_t id;
} by_length;

static int cmp_by_length(const void *a, const void *b) {
    const by_length *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Control, user-defined and unknown tokens, longest text first (llama.cpp sorts by
 * length only, with an unstable sort; toy breaks ties by id). */
static toy_status build_special(toy_vocab *v) {
    const uint16_t mask = TY_ATTR_CONTROL | TY_ATTR_USER_DEFINED | TY_ATTR_UNKNOWN;
    int32_t n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].attr & mask) n++;
    by_length *order = malloc((n ? (size_t)n : 1) * sizeof *order);
    v->special = malloc((n ? (size_t)n : 1) * sizeof *v->special);
    if (!order || !v->special) {
        free(order);
        return ty_error(TOY_ERR_NOMEM, "vocabulary: out of memory");
    }
    int32_t k = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].attr & mask) order[k++] = (by_length){v->tokens[i].text_len, i};
    qsort(order, (size_t)n, sizeof *order, cmp_by_length);
    for (int32_t i = 0; i < n; i++) v->special[i] = order[i].id;
    v->n_special = n;
    free(order);
    return TOY_OK;
}

static bool contains(const char *s, size_t len, const char *sub) {
    return memmem(s, len, sub, strlen(sub)) != NULL;
}

static void set_attr(toy_vocab *v, const char *text, uint16_t attr, bool on) {
    int32_t id = find_text(v, text);
    if (id < 0) return;
    if (on)
        v->tokens[id].attr |= attr;
    else
        v->tokens[id].attr &= (uint16_t)~attr;
}

/* llama.cpp sets strip attributes by model name: they make the special-token split
 * drop whitespace beside these tokens. */
static void set_model_attrs(toy_vocab *v, const toy_gguf *g) {
    const char *name = "", *arch = "", *pre = "";
    size_t name_len = 0, arch_len = 0, pre_len = 0;
    /* a mistyped name only loses these adjustments */
    if (get_str_opt(g, "general.name", &name, &name_len)) name_len = 0;
    if (get_str_opt(g, "general.architecture", &arch, &arch_len)) arch_len = 0;
    if (get_str_opt(g, KEY_PRE, &pre, &pre_len)) pre_len = 0;
    char lower[256];
    size_t n = name_len < sizeof lower ? name_len : sizeof lower - 1;
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);

    if (contains(pre, pre_len, "jina-v2-de") || contains(pre, pre_len, "jina-v2-es") ||
        contains(pre, pre_len, "jina-v2-code") || contains(arch, arch_len, "nomic-bert-moe") ||
        contains(arch, arch_len, "jina-bert-v3")) {
        set_attr(v, "<mask>", TY_ATTR_LSTRIP, true);
    } else if (contains(lower, n, "phi-3") || contains(lower, n, "phi3")) {
        for (int32_t i = 0; i < v->n_special; i++) v->tokens[v->special[i]].attr |= TY_ATTR_RSTRIP;
        set_attr(v, "</s>", TY_ATTR_RSTRIP, true);
        set_attr(v, "<unk>", TY_ATTR_RSTRIP, false);
        set_attr(v, "<s>", TY_ATTR_RSTRIP, false);
        set_attr(v, "<|endoftext|>", TY_ATTR_RSTRIP, false);
    } else if (contains(lower, n, "modern-bert")) {
        set_attr(v, "[MASK]", TY_ATTR_LSTRIP, true);
    }
}

/* ---------------------------------------------------------------- pieces */

/* llama.cpp's token_to_byte: the two characters after "<0x", read as hex */
static char byte_of_token(const char *text, size_t len) {
    unsigned value = 0;
    for (size_t i = 3; i < len && i < 5; i++) {
        char c = text[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else break;
        value = value * 16 + d;
    }
    return (char)value;
}

/* BPE: GPT-2 characters back to bytes; llama.cpp writes a character that stands for no
 * byte as "[UNK_BYTE_0x<its UTF-8 in hex><the token's text>]". */
static void decode_byte_level(const char *text, size_t len, ty_buf *out) {
    for (size_t pos = 0; pos < len;) {
        uint32_t cpt = ty_utf8_decode(text, len, &pos);
        int b = ty_unicode_cpt_to_byte(cpt);
        if (b >= 0) {
            char c = (char)b;
            ty_buf_append(out, &c, 1);
            continue;
        }
        char utf8[4], hex[16];
        size_t l = ty_utf8_encode(cpt, utf8);
        ty_buf_append(out, "[UNK_BYTE_0x", 12);
        for (size_t k = 0; k < l; k++) {
            snprintf(hex, sizeof hex, "%02x", (unsigned char)utf8[k]);
            ty_buf_append(out, hex, 2);
        }
        ty_buf_append(out, text, len);
        ty_buf_append(out, "]", 1);
    }
}

/* The piece of every token as token_to_piece(special = true) gives it; without
 * `special`, control and unknown tokens are "" (decided when asked). */
static toy_status build_pieces(toy_vocab *v) {
    ty_buf buf = {0};
    static const char space[] = "\xe2\x96\x81";
    for (int32_t i = 0; i < v->n_tokens && !buf.oom; i++) {
        ty_token_data *t = &v->tokens[i];
        const char *text = ty_token_text_of(v, i);
        size_t start = buf.n;
        if (t->attr & (TY_ATTR_UNKNOWN | TY_ATTR_CONTROL | TY_ATTR_USER_DEFINED)) {
            ty_buf_append(&buf, text, t->text_len);
        } else if (t->attr & TY_ATTR_NORMAL) {
            if (v->kind == TOY_VOCAB_BPE) {
                decode_byte_level(text, t->text_len, &buf);
            } else { /* SPM, WPM: U+2581 is a space */
                for (size_t k = 0; k < t->text_len;) {
                    if (t->text_len - k >= 3 && !memcmp(text + k, space, 3)) {
                        ty_buf_append(&buf, " ", 1);
                        k += 3;
                    } else {
                        ty_buf_append(&buf, text + k, 1);
                        k++;
                    }
                }
            }
        } else if (t->attr & TY_ATTR_BYTE) {
            char b = byte_of_token(text, t->text_len);
            ty_buf_append(&buf, &b, 1);
        }
        if (buf.n - start > UINT32_MAX || buf.n > UINT32_MAX) buf.oom = true;
        t->piece_off = (uint32_t)start;
        t->piece_len = (uint32_t)(buf.n - start);
    }
    if (buf.oom) {
        free(buf.v);
        return ty_error(TOY_ERR_NOMEM, "vocabulary: out of memory");
    }
    v->pieces = buf.v ? buf.v : calloc(1, 1);
    return v->pieces ? TOY_OK : ty_error(TOY_ERR_NOMEM, "vocabulary: out of memory");
}

static void build_byte_tokens(toy_vocab *v) {
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        int32_t id = -1;
        if (v->kind == TOY_VOCAB_SPM) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            id = find_text(v, hex);
        }
        if (id < 0 && v->kind != TOY_VOCAB_WPM) id = ty_vocab_find(v, &c, 1);
        v->byte_token[b] = id;
    }
}

/* ---------------------------------------------------------------- loading */

static toy_status load(toy_vocab *v, const toy_gguf *g) {
    const char *model, *pre;
    size_t model_len, pre_len;
    toy_status st;
    if (!toy_gguf_get(g, KEY_MODEL))
        return ty_error(TOY_ERR_NOT_FOUND, "%s: key not found", KEY_MODEL);
    if ((st = get_str_opt(g, KEY_MODEL, &model, &model_len))) return st;
    if ((st = get_str_opt(g, KEY_PRE, &pre, &pre_len))) return st;

    /* llama.cpp's defaults per tokenizer kind */
    v->eot = v->eom = v->sep = v->pad = v->mask = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    v->lowercase = true;
    if (model_len == 5 && !memcmp(model, "llama", 5)) {
        v->kind = TOY_VOCAB_SPM;
        v->bos = 1, v->eos = 2, v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (model_len == 4 && !memcmp(model, "gpt2", 4)) {
        v->kind = TOY_VOCAB_BPE;
        v->bos = 11, v->eos = 11, v->unk = -1;
        v->clean_spaces = true;
    } else if (model_len == 4 && !memcmp(model, "bert", 4)) {
        v->kind = TOY_VOCAB_WPM;
        v->bos = 101, v->eos = -1, v->unk = 100, v->sep = 102, v->pad = 0, v->mask = 103;
        v->add_bos = true;
        v->add_sep = true;
        v->clean_spaces = true;
    } else {
        return ty_error(TOY_ERR_UNSUPPORTED, "%s: tokenizer '%.*s' is not supported", KEY_MODEL,
                        (int)model_len, model);
    }

    if (v->kind == TOY_VOCAB_BPE) {
        if ((st = load_merges(v, g))) return st;
        if ((st = ty_pretokenizer_new(pre, pre_len, v, &v->pre))) return st;
    }
    if ((st = get_bool_opt(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix)))
        return st;
    if ((st = load_tokens(v, g))) return st;

    struct {
        const char *key;
        int32_t *id;
    } ids[] = {
        {KEY_BOS, &v->bos},
        {KEY_EOS, &v->eos},
        {"tokenizer.ggml.eot_token_id", &v->eot},
        {"tokenizer.ggml.eom_token_id", &v->eom},
        {"tokenizer.ggml.unknown_token_id", &v->unk},
        {KEY_SEP, &v->sep},
        {"tokenizer.ggml.padding_token_id", &v->pad},
        {"tokenizer.ggml.mask_token_id", &v->mask},
        {"tokenizer.ggml.fim_pre_token_id", &v->fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &v->fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &v->fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep},
        {"tokenizer.ggml.prefix_token_id", &v->fim_pre}, /* deprecated names */
        {"tokenizer.ggml.suffix_token_id", &v->fim_suf},
        {"tokenizer.ggml.middle_token_id", &v->fim_mid},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if ((st = get_token_id(g, ids[i].key, v->n_tokens, ids[i].id))) return st;

    if ((st = get_bool_opt(g, KEY_ADD_BOS, &v->add_bos))) return st;
    if ((st = get_bool_opt(g, KEY_ADD_EOS, &v->add_eos))) return st;
    if ((st = get_bool_opt(g, KEY_ADD_SEP, &v->add_sep))) return st;
    if (v->add_bos && v->bos < 0)
        return ty_error(TOY_ERR_FORMAT, "%s is true, but %s is not set", KEY_ADD_BOS, KEY_BOS);
    if (v->add_eos && v->eos < 0)
        return ty_error(TOY_ERR_FORMAT, "%s is true, but %s is not set", KEY_ADD_EOS, KEY_EOS);
    if (v->add_sep && v->sep < 0)
        return ty_error(TOY_ERR_FORMAT, "%s is true, but %s is not set", KEY_ADD_SEP, KEY_SEP);

    if ((st = get_bool_opt(g, "tokenizer.ggml.normalizer.lowercase", &v->lowercase))) return st;
    v->strip_accents = v->lowercase;
    if ((st = get_bool_opt(g, "tokenizer.ggml.normalizer.strip_accents", &v->strip_accents)))
        return st;

    detect_by_text(v, &v->eot, eot_texts);
    detect_by_text(v, &v->eom, eom_texts);
    detect_by_text(v, &v->fim_pre, fim_pre_texts);
    detect_by_text(v, &v->fim_suf, fim_suf_texts);
    detect_by_text(v, &v->fim_mid, fim_mid_texts);
    detect_by_text(v, &v->fim_pad, fim_pad_texts);
    detect_by_text(v, &v->fim_rep, fim_rep_texts);
    detect_by_text(v, &v->fim_sep, fim_sep_texts);
    if ((st = build_eog(v))) return st;
    if ((st = build_special(v))) return st;
    if ((st = build_pieces(v))) return st;
    set_model_attrs(v, g);
    build_byte_tokens(v);
    return TOY_OK;
}

toy_status toy_vocab_load(const toy_gguf *gguf, toy_vocab **out) {
    if (!out) return ty_error(TOY_ERR_INVALID, "toy_vocab_load: out is NULL");
    *out = NULL;
    if (!gguf) return ty_error(TOY_ERR_INVALID, "toy_vocab_load: gguf is NULL");
    toy_vocab *v = calloc(1, sizeof *v);
    if (!v) return ty_error(TOY_ERR_NOMEM, "vocabulary: out of memory");
    toy_status st = load(v, gguf);
    if (st) {
        toy_vocab_free(v);
        return st;
    }
    *out = v;
    return TOY_OK;
}

void toy_vocab_free(toy_vocab *v) {
    if (!v) return;
    free(v->tokens);
    free(v->text);
    free(v->pieces);
    ty_strmap_free(&v->token_ids);
    ty_strmap_free(&v->merges);
    free(v->merge_text);
    ty_pretokenizer_free(v->pre);
    free(v->special);
    free(v->eog);
    if (v->grammar_trie) v->grammar_trie_free(v->grammar_trie);
    free(v);
}

/* ---------------------------------------------------------------- accessors */

toy_vocab_kind toy_vocab_kind_of(const toy_vocab *v) { return v ? v->kind : (toy_vocab_kind)0; }
int32_t toy_vocab_n_tokens(const toy_vocab *v) { return v ? v->n_tokens : 0; }
int32_t toy_vocab_bos(const toy_vocab *v) { return v ? v->bos : -1; }
int32_t toy_vocab_eos(const toy_vocab *v) { return v ? v->eos : -1; }
int32_t toy_vocab_eot(const toy_vocab *v) { return v ? v->eot : -1; }
bool toy_vocab_add_bos(const toy_vocab *v) { return v && v->add_bos; }
bool toy_vocab_add_eos(const toy_vocab *v) { return v && v->add_eos; }

bool toy_vocab_is_eog(const toy_vocab *v, int32_t token) {
    if (!v || token < 0) return false;
    return bsearch(&token, v->eog, (size_t)v->n_eog, sizeof *v->eog, cmp_i32) != NULL;
}

toy_token_type toy_vocab_token_type(const toy_vocab *v, int32_t token) {
    if (!v || token < 0 || token >= v->n_tokens) return TOY_TOKEN_UNDEFINED;
    uint16_t a = v->tokens[token].attr;
    /* a promoted token (NORMAL|CONTROL) reports as what llama.cpp treats it as */
    if (a & TY_ATTR_CONTROL) return TOY_TOKEN_CONTROL;
    if (a & TY_ATTR_USER_DEFINED) return TOY_TOKEN_USER_DEFINED;
    if (a & TY_ATTR_UNKNOWN) return TOY_TOKEN_UNKNOWN;
    if (a & TY_ATTR_BYTE) return TOY_TOKEN_BYTE;
    if (a & TY_ATTR_NORMAL) return TOY_TOKEN_NORMAL;
    if (a & TY_ATTR_UNUSED) return TOY_TOKEN_UNUSED;
    return TOY_TOKEN_UNDEFINED;
}

const char *toy_vocab_token_text(const toy_vocab *v, int32_t token) {
    if (!v || token < 0 || token >= v->n_tokens) return NULL;
    return ty_token_text_of(v, token);
}

/* ---------------------------------------------------------------- tokenizing */

typedef struct {
    int32_t token; /* -1: text */
    size_t off, len;
} fragment;

typedef struct {
    fragment *v;
    size_t n, cap;
    bool oom;
} fragments;

static void fragments_push(fragments *f, int32_t token, size_t off, size_t len) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 16;
        fragment *v = realloc(f->v, cap * sizeof *v);
        if (!v) {
            f->oom = true;
            return;
        }
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (fragment){token, off, len};
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Splits a text fragment at every occurrence of one special token's text, dropping
 * whitespace before it (LSTRIP) or after it (RSTRIP) where the token says so. */
static void split_at(const toy_vocab *v, int32_t id, const char *text, size_t off, size_t len,
                     fragments *out) {
    const ty_token_data *t = &v->tokens[id];
    const char *tok = ty_token_text_of(v, id);
    for (;;) {
        const char *m = memmem(text + off, len, tok, t->text_len);
        if (!m) {
            if (len) fragments_push(out, -1, off, len);
            return;
        }
        size_t at = (size_t)(m - text), left = at - off;
        if (t->attr & TY_ATTR_LSTRIP)
            while (left > 0 && is_space(text[off + left - 1])) left--;
        if (left) fragments_push(out, -1, off, left);
        fragments_push(out, id, 0, 0);
        size_t r_off = at + t->text_len, r_len = off + len - r_off;
        if (t->attr & TY_ATTR_RSTRIP)
            while (r_len > 0 && is_space(text[r_off])) r_off++, r_len--;
        off = r_off;
        len = r_len;
        if (!len) return;
    }
}

/* llama.cpp's tokenizer_st_partition: special tokens in the text, longest first.
 * Without parse_special only user-defined tokens are matched (as Hugging Face's
 * added tokens are). */
static toy_status partition(const toy_vocab *v, const char *text, size_t len,
                            bool parse_special, fragments *out) {
    fragments cur = {0}, next = {0};
    if (len) fragments_push(&cur, -1, 0, len);
    for (int32_t s = 0; s < v->n_special && cur.n && !cur.oom; s++) {
        int32_t id = v->special[s];
        if (!parse_special && (v->tokens[id].attr & (TY_ATTR_CONTROL | TY_ATTR_UNKNOWN)))
            continue;
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            const fragment *f = &cur.v[i];
            if (f->token >= 0)
                fragments_push(&next, f->token, 0, 0);
            else
                split_at(v, id, text, f->off, f->len, &next);
        }
        fragments tmp = cur;
        cur = next;
        next = tmp;
        cur.oom |= next.oom;
    }
    free(next.v);
    if (cur.oom) {
        free(cur.v);
        return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    }
    *out = cur;
    return TOY_OK;
}

/* The text's ids, as many as it needs, in *ids (malloc'd). */
static toy_status tokenize_ids(const toy_vocab *v, const char *text, size_t len, bool add_special,
                               bool parse_special, ty_ids *ids) {
    *ids = (ty_ids){0};
    fragments frags = {0};
    toy_status st = partition(v, text, len, parse_special, &frags);
    if (st) return st;
    bool prev_special = true; /* SPM: the start counts as after a special token */
    if (add_special && v->add_bos && v->bos >= 0) ty_ids_push(ids, v->bos);
    for (size_t i = 0; i < frags.n && !st; i++) {
        const fragment *f = &frags.v[i];
        if (f->token >= 0) {
            ty_ids_push(ids, f->token);
            prev_special = true;
            continue;
        }
        switch (v->kind) {
        case TOY_VOCAB_SPM:
            st = ty_spm_tokenize(v, text + f->off, f->len, prev_special, ids);
            break;
        case TOY_VOCAB_BPE: st = ty_bpe_tokenize(v, text + f->off, f->len, ids); break;
        case TOY_VOCAB_WPM: st = ty_wpm_tokenize(v, text + f->off, f->len, ids); break;
        }
        prev_special = false;
    }
    if (add_special) {
        /* BERT ends with [SEP]; the others with EOS if the vocabulary asks */
        if (v->kind == TOY_VOCAB_WPM) {
            if (v->sep >= 0) ty_ids_push(ids, v->sep);
        } else if (v->add_eos && v->eos >= 0) {
            ty_ids_push(ids, v->eos);
        }
    }
    free(frags.v);
    if (!st && ids->oom) st = ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    if (!st && ids->n > INT32_MAX) st = ty_error(TOY_ERR_INVALID, "tokenize: %zu tokens, over %d", ids->n, INT32_MAX);
    if (st) {
        free(ids->v);
        *ids = (ty_ids){0};
    }
    return st;
}

toy_status toy_tokenize(const toy_vocab *v, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *tokens, int32_t n_max,
                        int32_t *n_tokens) {
    if (!v || !n_tokens || (!text && len) || n_max < 0 || (!tokens && n_max > 0))
        return ty_error(TOY_ERR_INVALID, "toy_tokenize: bad arguments");
    *n_tokens = 0;
    ty_ids ids;
    toy_status st = tokenize_ids(v, text, len, add_special, parse_special, &ids);
    if (st) return st;
    *n_tokens = (int32_t)ids.n;
    if (ids.n > (size_t)n_max)
        st = ty_error(TOY_ERR_BUFFER, "tokenize: the text is %zu tokens, the buffer holds %d", ids.n, (int)n_max);
    else if (ids.n)
        memcpy(tokens, ids.v, ids.n * sizeof *tokens);
    free(ids.v);
    return st;
}

toy_status toy_tokenize_alloc(const toy_vocab *v, const char *text, size_t len, bool add_special,
                              bool parse_special, int32_t **tokens, int32_t *n_tokens) {
    if (!v || !tokens || !n_tokens || (!text && len))
        return ty_error(TOY_ERR_INVALID, "toy_tokenize_alloc: bad arguments");
    *tokens = NULL;
    *n_tokens = 0;
    ty_ids ids;
    toy_status st = tokenize_ids(v, text, len, add_special, parse_special, &ids);
    if (st) return st;
    if (!ids.v && !(ids.v = malloc(sizeof *ids.v))) /* a valid pointer even for no tokens */
        return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    *tokens = ids.v;
    *n_tokens = (int32_t)ids.n;
    return TOY_OK;
}

/* ---------------------------------------------------------------- pieces and text */

static toy_status check_token(const toy_vocab *v, int32_t token) {
    if (token < 0 || token >= v->n_tokens)
        return ty_error(TOY_ERR_INVALID, "token %d out of range (vocabulary has %d tokens)",
                        (int)token, (int)v->n_tokens);
    return TOY_OK;
}

static const char *piece_of(const toy_vocab *v, int32_t token, bool special, size_t *len) {
    const ty_token_data *t = &v->tokens[token];
    if (!special && (t->attr & (TY_ATTR_UNKNOWN | TY_ATTR_CONTROL))) {
        *len = 0;
        return "";
    }
    *len = t->piece_len;
    return v->pieces + t->piece_off;
}

toy_status toy_token_to_piece(const toy_vocab *v, int32_t token, bool special, char *buf,
                              size_t cap, size_t *len) {
    if (!v || !len || (!buf && cap))
        return ty_error(TOY_ERR_INVALID, "toy_token_to_piece: bad arguments");
    *len = 0;
    toy_status st = check_token(v, token);
    if (st) return st;
    size_t n;
    const char *p = piece_of(v, token, special, &n);
    *len = n;
    if (n > cap)
        return ty_error(TOY_ERR_BUFFER, "token %d: its text is %zu bytes, the buffer holds %zu", (int)token, n, cap);
    if (n) memcpy(buf, p, n);
    return TOY_OK;
}

toy_status ty_token_text(const toy_vocab *v, int32_t token, bool special, char *buf, size_t cap, char **big,
                         const char **text, size_t *len) {
    toy_status st = toy_token_to_piece(v, token, special, buf, cap, len);
    *text = buf;
    if (st != TOY_ERR_BUFFER) return st;
    if (!(*big = malloc(*len))) return ty_error(TOY_ERR_NOMEM, "no memory for the text of token %d", (int)token);
    *text = *big;
    if ((st = toy_token_to_piece(v, token, special, *big, *len, len))) {
        free(*big);
        *big = NULL;
    }
    return st;
}

/* llama.cpp's clean_up_tokenization_spaces, three passes in place over the text,
 * each reading characters the previous step of the same pass may have moved. */
static size_t clean_spaces(char *text, size_t total) {
    /* " ?", " !", " .", " ," lose the space */
    size_t total1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        text[total++] = x;
    }
    /* " ' " becomes "'" */
    size_t total2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = 0;
        }
        text[total++] = x;
    }
    /* " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it) */
    size_t total3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
                char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

toy_status toy_detokenize(const toy_vocab *v, const int32_t *tokens, int32_t n_tokens,
                          bool special, char **out, size_t *len) {
    if (!v || !out || !len || n_tokens < 0 || (!tokens && n_tokens))
        return ty_error(TOY_ERR_INVALID, "toy_detokenize: bad arguments");
    *out = NULL;
    *len = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        toy_status st = check_token(v, tokens[i]);
        if (st) return ty_error_wrap(st, "detokenize: tokens[%d]", (int)i);
    }

    ty_buf buf = {0};
    ty_buf_append(&buf, "", 0);
    /* the first token's leading space is the one the tokenizer added (SPM), whatever
     * that token is */
    bool remove_space = v->add_space_prefix;
    for (int32_t i = 0; i < n_tokens; i++) {
        size_t n;
        const char *p = piece_of(v, tokens[i], special, &n);
        if (remove_space && n && p[0] == ' ') {
            p++;
            n--;
        }
        remove_space = false;
        ty_buf_append(&buf, p, n);
    }
    if (buf.oom) {
        free(buf.v);
        return ty_error(TOY_ERR_NOMEM, "detokenize: out of memory");
    }
    if (v->clean_spaces) {
        buf.n = clean_spaces(buf.v, buf.n);
        buf.v[buf.n] = 0;
    }
    *out = buf.v;
    *len = buf.n;
    return TOY_OK;
}
