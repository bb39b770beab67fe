/* vocab.h — a vocabulary as the tokenizers see it (internal): its tokens, their texts
 * and attributes, the string -> id map, the BPE merges, the special tokens; and the
 * list of ids that tokenizing appends to. tokenizer.c fills it from a GGUF file; the
 * tokenizers (tokenizer_spm.c, tokenizer_bpe.c, tokenizer_wpm.c) read it. */
#ifndef TOY_VOCAB_H
#define TOY_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "toy.h"

/* llama.cpp's llama_token_attr bits (a token can carry several, e.g. NORMAL|CONTROL
 * when llama.cpp promotes a control-looking token). */
enum {
    TY_ATTR_UNDEFINED = 0,
    TY_ATTR_UNKNOWN = 1 << 0,
    TY_ATTR_UNUSED = 1 << 1,
    TY_ATTR_NORMAL = 1 << 2,
    TY_ATTR_CONTROL = 1 << 3,
    TY_ATTR_USER_DEFINED = 1 << 4,
    TY_ATTR_BYTE = 1 << 5,
    TY_ATTR_LSTRIP = 1 << 7,
    TY_ATTR_RSTRIP = 1 << 8,
};

/* String -> int32 hash map over keys stored elsewhere (they must outlive it). The
 * first value inserted for a key stays. */
typedef struct {
    const char *key;
    uint32_t len;
    int32_t value;
} ty_strmap_entry;

typedef struct {
    ty_strmap_entry *entries;
    uint32_t n, cap;
    uint32_t *slots; /* entry index + 1; 0 = empty */
    uint32_t mask;
} ty_strmap;

toy_status ty_strmap_init(ty_strmap *m, uint32_t n_max);
void ty_strmap_free(ty_strmap *m);
/* False if the key was already there (its value is kept). */
bool ty_strmap_insert(ty_strmap *m, const char *key, uint32_t len, int32_t value);
/* -1 if absent. */
int32_t ty_strmap_find(const ty_strmap *m, const char *key, size_t len);

typedef struct {
    uint32_t text_off, text_len;   /* into toy_vocab.text (NUL-terminated there) */
    uint32_t piece_off, piece_len; /* into toy_vocab.pieces: the piece with special */
    float score;
    uint16_t attr;
} ty_token_data;

/* Growing list of token ids; a failed allocation sets oom and drops the id. */
typedef struct {
    int32_t *v;
    size_t n, cap;
    bool oom;
} ty_ids;

void ty_ids_push(ty_ids *ids, int32_t id);

typedef struct ty_pretokenizer ty_pretokenizer;

struct toy_vocab {
    toy_vocab_kind kind;
    int32_t n_tokens;
    ty_token_data *tokens;
    char *text;   /* every token's text, each NUL-terminated */
    char *pieces; /* every token's piece (token_to_piece with special) */
    ty_strmap token_ids;
    int max_token_len; /* bytes, for WordPiece's longest-match search */

    /* BPE: "left right" -> rank, over the merge strings kept in merge_text */
    ty_strmap merges;
    char *merge_text;
    ty_pretokenizer *pre;
    bool ignore_merges; /* look the whole pre-token up before merging (llama3) */

    int32_t bos, eos, eot, eom, unk, sep, pad, mask;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_sep;
    bool add_space_prefix; /* SPM: a space before the text (after BOS/special tokens) */
    bool clean_spaces;     /* detokenize: " ." -> "." etc. (clean_up_tokenization_spaces) */
    bool lowercase, strip_accents; /* WPM normalizer keys; strip_accents: NFD (tokenizer_wpm.c) */

    /* the byte fallback of each byte: SPM <0xXX> (else the byte as text); BPE the
     * one-byte token text; -1 if none */
    int32_t byte_token[256];

    /* control, user-defined and unknown tokens, longest text first */
    int32_t *special;
    int32_t n_special;
    /* end-of-generation tokens, ascending */
    int32_t *eog;
    int32_t n_eog;

    /* the trie of every token's bytes, built by the first grammar (src/grammar/), and
     * the function that frees it (set with it, so the vocabulary need not know grammars) */
    void *grammar_trie;
    void (*grammar_trie_free)(void *trie);
};

static inline const char *ty_token_text_of(const toy_vocab *v, int32_t id) {
    return v->text + v->tokens[id].text_off;
}

/* Token id of a text, -1 if none. */
static inline int32_t ty_vocab_find(const toy_vocab *v, const char *s, size_t len) {
    return ty_strmap_find(&v->token_ids, s, len);
}

#endif
