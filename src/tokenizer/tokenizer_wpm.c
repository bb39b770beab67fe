/* tokenizer_wpm.c — WordPiece as llama.cpp's llm_tokenizer_wpm runs it (BERT).
 *
 * The text is normalized code point by code point: NFD, keeping only the first code
 * point of each decomposition (llama.cpp's table holds one code point per character),
 * and lowercased, each unless the vocabulary says otherwise; control characters are
 * dropped. Whitespace separates words; punctuation, ASCII symbols and CJK ideographs
 * are words of their own. Each word, with "▁" in front (the converter stores
 * word-initial pieces that way and "##" continuations bare), becomes the longest
 * tokens that match from the left; a word with a part that matches nothing becomes
 * [UNK] as a whole.
 *
 * This is the reference build's WordPiece (../shared/llama.cpp, September 2025), which
 * departs from HuggingFace's BertNormalizer + WordPiece (docs/tokenizers.md):
 *  - combining marks stay: HF strips accents by full NFD and then drops every Mn;
 *    llama.cpp's NFD-first takes the accent off a precomposed "é" but leaves e + U+0301
 *    as it is, so a word with a decomposed accent is [UNK] ("browne\u0301" -> [UNK]);
 *  - a character whose NFD is several letters keeps only the first: a Hangul syllable
 *    becomes its leading consonant jamo (HF keeps all its jamo);
 *  - U+000B, U+000C and U+0085 are whitespace and split words (HF drops them as control
 *    characters), unassigned code points stay in the word (HF drops them too), and
 *    lowercasing is the one-code-point mapping ("İ" -> "i"; HF: "i" + U+0307).
 * tokenizer.ggml.normalizer.lowercase false turns lowercasing off, .strip_accents false
 * (or absent, with lowercase false) NFD, as llama.cpp reads the keys since 2026; the
 * reference build ignores them. That later llama.cpp also drops combining marks when
 * strip_accents is on; toy keeps them, as the reference build, whose tokens the
 * fixtures hold, does. */
#include "tokenizer_wpm.h"

#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "error.h"
#include "unicode.h"

/* llama.cpp's is_chinese_char, with its 0x2B920 (which the HF Rust code has too). */
static bool is_chinese_char(uint32_t c) {
    return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* word holds "▁" followed by the word's bytes */
static void tokenize_word(const toy_vocab *v, const ty_buf *word, ty_ids *out) {
    const char *w = word->v;
    size_t n = word->n;
    size_t start = out->n;
    for (size_t i = 0; i < n; i++) {
        size_t j = i + (size_t)v->max_token_len + 1;
        if (j > n) j = n;
        bool match = false;
        for (; j > i; j--) {
            int32_t id = ty_vocab_find(v, w + i, j - i);
            if (id >= 0) {
                ty_ids_push(out, id);
                match = true;
                i = j - 1;
                break;
            }
        }
        if (!match) { /* drop what this word produced */
            out->n = start;
            break;
        }
    }
    if (out->n == start && v->unk >= 0) ty_ids_push(out, v->unk);
}

toy_status ty_wpm_tokenize(const toy_vocab *v, const char *text, size_t len, ty_ids *out) {
    static const char space[] = "\xe2\x96\x81";
    ty_buf word = {0};
    ty_buf_append(&word, space, 3);

    for (size_t pos = 0; pos < len && !word.oom;) {
        uint32_t cpt = ty_utf8_decode(text, len, &pos);
        if (v->strip_accents) cpt = ty_unicode_nfd_first(cpt);
        uint16_t flags = ty_unicode_flags(cpt);

        if (flags & TY_UCD_WHITESPACE) {
            if (word.n > 3) tokenize_word(v, &word, out);
            word.n = 3;
            continue;
        }
        if (cpt == 0 || cpt == TOY_UNICODE_REPLACEMENT || (flags & TY_UCD_CONTROL)) continue;

        char utf8[4];
        size_t l = ty_utf8_encode(v->lowercase ? ty_unicode_tolower(cpt) : cpt, utf8);
        if ((flags & TY_UCD_PUNCTUATION) || (cpt < 0x7F && (flags & TY_UCD_SYMBOL)) ||
            is_chinese_char(cpt)) {
            if (word.n > 3) tokenize_word(v, &word, out);
            word.n = 3;
            ty_buf_append(&word, utf8, l);
            tokenize_word(v, &word, out);
            word.n = 3;
        } else {
            ty_buf_append(&word, utf8, l);
        }
    }
    if (word.n > 3 && !word.oom) tokenize_word(v, &word, out);

    bool oom = word.oom;
    free(word.v);
    if (oom) return ty_error(TOY_ERR_NOMEM, "tokenize: out of memory");
    return TOY_OK;
}
