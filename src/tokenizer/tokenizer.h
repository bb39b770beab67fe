/* tokenizer.h — the vocabulary as the tokenizers see it (internal).
 *
 * tokenizer.c reads the vocabulary and owns what is common to every kind: special
 * tokens, splitting the text at special-token text, BOS/EOS, pieces and detokenizing.
 * The three ways to turn plain text into ids live beside it, one file each:
 * tokenizer_spm.c (SentencePiece merges by score), tokenizer_bpe.c (byte-level BPE
 * with its pre-tokenizer regexes) and tokenizer_wpm.c (WordPiece). Each reproduces the
 * corresponding llm_tokenizer_* of llama.cpp's src/llama-vocab.cpp. */
#ifndef TOY_TOKENIZER_H
#define TOY_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "toy.h"

/* llama.cpp's llama_token_attr bits (a token can carry several, e.g. NORMAL|CONTROL
 * when llama.cpp promotes a control-looking token). */
enum {
    TOY_ATTR_UNDEFINED = 0,
    TOY_ATTR_UNKNOWN = 1 << 0,
    TOY_ATTR_UNUSED = 1 << 1,
    TOY_ATTR_NORMAL = 1 << 2,
    TOY_ATTR_CONTROL = 1 << 3,
    TOY_ATTR_USER_DEFINED = 1 << 4,
    TOY_ATTR_BYTE = 1 << 5,
    TOY_ATTR_LSTRIP = 1 << 7,
    TOY_ATTR_RSTRIP = 1 << 8,
};

/* String -> int32 hash map over keys stored elsewhere (they must outlive it). The
 * first value inserted for a key stays. */
typedef struct {
    const char *key;
    uint32_t len;
    int32_t value;
} toy_strmap_entry;

typedef struct {
    toy_strmap_entry *entries;
    uint32_t n, cap;
    uint32_t *slots; /* entry index + 1; 0 = empty */
    uint32_t mask;
} toy_strmap;

toy_status toy_strmap_init(toy_strmap *m, uint32_t n_max);
void toy_strmap_free(toy_strmap *m);
/* False if the key was already there (its value is kept). */
bool toy_strmap_insert(toy_strmap *m, const char *key, uint32_t len, int32_t value);
/* -1 if absent. */
int32_t toy_strmap_find(const toy_strmap *m, const char *key, size_t len);

typedef struct {
    uint32_t text_off, text_len;   /* into toy_vocab.text (NUL-terminated there) */
    uint32_t piece_off, piece_len; /* into toy_vocab.pieces: the piece with special */
    float score;
    uint16_t attr;
} toy_token_data;

/* Growing list of token ids; a failed allocation sets oom and drops the id. */
typedef struct {
    int32_t *v;
    size_t n, cap;
    bool oom;
} toy_ids;

void toy_ids_push(toy_ids *ids, int32_t id);

/* A token's text (toy_token_to_piece) however long: *text is buf when it fits in cap
 * bytes, else *big, malloc'd for the caller to free (on success; *big is left alone when
 * the text fits, and holds nothing to free after a failure). */
toy_status toy_token_text(const toy_vocab *v, int32_t token, bool special, char *buf, size_t cap, char **big,
                          const char **text, size_t *len);

/* Merging adjacent symbols, shared by SPM and BPE (llama.cpp's llm_symbol and
 * llm_bigram_*): the text is cut into characters, and the queued pair that comes first
 * is merged, again and again. */
typedef struct {
    int prev, next; /* -1: none */
    size_t off, n;  /* bytes of the text; n = 0 once merged into its left neighbour */
} toy_symbol;

typedef struct {
    int left, right;
    /* The lowest key first, then the leftmost: BPE's merge rank, or SPM's score negated
     * (llama.cpp pops the highest score first). A double holds every int32 and float
     * exactly, and negation is exact, so ties and order are those of comparing the rank
     * or the score itself. */
    double key;
    size_t size; /* bytes of the pair when it was queued; differs once it is stale */
} toy_bigram;

/* A binary heap of bigrams. */
typedef struct {
    toy_bigram *v;
    size_t n, cap;
} toy_bigram_queue;

/* One symbol per UTF-8 character of text[0..n), linked in order (a truncated character
 * at the end keeps what is left); sym has room for n. Returns the number of symbols. */
int toy_symbols_init(toy_symbol *sym, const char *text, size_t n);
/* False when out of memory. */
bool toy_bigram_push(toy_bigram_queue *q, toy_bigram b);
/* Pops pairs until one whose symbols are as they were when it was queued, merges its
 * right symbol into its left one and returns the left one's index; -1 once the queue is
 * empty. */
int toy_bigram_merge_next(toy_bigram_queue *q, toy_symbol *sym);
/* Appends the token of every symbol, in order. A symbol that is no token falls back to
 * the byte_token of each of its bytes, else to `unk` (-1: the byte is dropped). */
void toy_symbols_emit(const toy_vocab *v, const char *text, const toy_symbol *sym, int n_sym,
                      int32_t unk, toy_ids *out);

typedef struct toy_pretokenizer toy_pretokenizer;

struct toy_vocab {
    toy_vocab_kind kind;
    int32_t n_tokens;
    toy_token_data *tokens;
    char *text;   /* every token's text, each NUL-terminated */
    char *pieces; /* every token's piece (token_to_piece with special) */
    toy_strmap token_ids;
    int max_token_len; /* bytes, for WordPiece's longest-match search */

    /* BPE: "left right" -> rank, over the merge strings kept in merge_text */
    toy_strmap merges;
    char *merge_text;
    toy_pretokenizer *pre;
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

static inline const char *toy_token_text_of(const toy_vocab *v, int32_t id) {
    return v->text + v->tokens[id].text_off;
}

/* Token id of a text, -1 if none. */
static inline int32_t toy_vocab_find(const toy_vocab *v, const char *s, size_t len) {
    return toy_strmap_find(&v->token_ids, s, len);
}

/* Plain text (no special tokens) to ids, appended to out. `first` tells SPM whether the
 * text follows the start or a special token (where the space prefix goes). */
toy_status toy_spm_tokenize(const toy_vocab *v, const char *text, size_t len, bool first,
                            toy_ids *out);
toy_status toy_bpe_tokenize(const toy_vocab *v, const char *text, size_t len, toy_ids *out);
toy_status toy_wpm_tokenize(const toy_vocab *v, const char *text, size_t len, toy_ids *out);

/* The pre-tokenizer named by tokenizer.ggml.pre ("" for the default). Sets the
 * vocabulary flags that llama.cpp ties to the name (ignore_merges, clean_spaces, the
 * default of add_bos) unless v is NULL. TOY_ERR_UNSUPPORTED for an unknown name. */
toy_status toy_pretokenizer_new(const char *name, size_t len, toy_vocab *v,
                                toy_pretokenizer **out);
void toy_pretokenizer_free(toy_pretokenizer *p);
/* llama.cpp looks a whole pre-token up in the vocabulary before merging (llama3's
 * ignore_merges) under this pre-tokenizer's name. */
bool toy_pretokenizer_ignores_merges(const toy_pretokenizer *p);
/* The i-th name tokenizer.ggml.pre may hold, NULL past the last. */
const char *toy_pretokenizer_name(size_t i);

/* Called with each pre-token in order: the UTF-8 of its code points (so invalid UTF-8
 * arrives as U+FFFD's bytes). A status other than TOY_OK stops the walk. */
typedef toy_status (*toy_pretoken_fn)(void *user, const char *word, size_t len);
/* Cuts plain text (no special tokens) into the pre-tokens that toy_bpe_tokenize merges;
 * tokenizing and training a tokenizer (bpe_train.c) share this one path. */
toy_status toy_pretokenize(const toy_pretokenizer *p, const char *text, size_t len,
                           toy_pretoken_fn fn, void *user);

#endif
