/* unicode.h — the Unicode facts the tokenizers need, exactly as llama.cpp's
 * src/unicode.cpp has them: its UTF-8 decoder (an invalid byte becomes U+FFFD), its
 * per-code-point category flags, whitespace set, simple lowercase map and one-code-point
 * NFD map, and GPT-2's byte <-> character mapping.
 *
 * The tables live in unicode_data.c, written by scripts/gen-unicode-data.py the way llama.cpp's
 * scripts/gen-unicode-data.py writes unicode-data.cpp:
 *
 *   flags = {"Cn":0x01, "Cc"/"Cf"/"Co"/"Cs":0x80, "L*":0x04, "M*":0x10, "N*":0x02,
 *            "P*":0x20, "S*":0x40, "Z*":0x08}[General_Category of UnicodeData.txt]
 *   ranges: (first code point, flags) at every change of flags
 *   lowercase: UnicodeData.txt's simple lowercase mapping
 *   nfd: (first, last, ord(unicodedata.normalize("NFD", chr(c))[0])) where it differs
 *
 * The Unicode version must be the reference build's, UnicodeData.txt 15.1.0: with older
 * tables the characters added since (Kawi digits, CJK Extension I, ...) would fall into
 * other pre-tokenizer words and WordPiece words than llama.cpp's. The NFD column comes
 * from Python's unicodedata, as llama.cpp's does; no character added after Unicode 14.0
 * decomposes, so Pythons 3.11 to 3.13 (Unicode 14.0 to 15.1) give the same column.
 */
#ifndef TOY_UNICODE_H
#define TOY_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Category flags, one per code point (llama.cpp's unicode_cpt_flags), plus
 * TY_UCD_WHITESPACE from llama.cpp's separate whitespace set. */
enum {
    TY_UCD_UNDEFINED = 0x0001,
    TY_UCD_NUMBER = 0x0002,      /* \p{N} */
    TY_UCD_LETTER = 0x0004,      /* \p{L} */
    TY_UCD_SEPARATOR = 0x0008,   /* \p{Z} */
    TY_UCD_ACCENT_MARK = 0x0010, /* \p{M} */
    TY_UCD_PUNCTUATION = 0x0020, /* \p{P} */
    TY_UCD_SYMBOL = 0x0040,      /* \p{S} */
    TY_UCD_CONTROL = 0x0080,     /* \p{C} */
    TY_UCD_CATEGORIES = 0x00FF,
    TY_UCD_WHITESPACE = 0x0100,  /* \s */
};

typedef struct {
    uint32_t first;
    uint16_t flags;
} ty_unicode_range;

typedef struct {
    uint32_t from, to;
} ty_unicode_pair;

typedef struct {
    uint32_t first, last, nfd;
} ty_unicode_nfd;

extern const ty_unicode_range ty_unicode_ranges[];
extern const size_t ty_unicode_n_ranges;
extern const ty_unicode_pair ty_unicode_lowercase[];
extern const size_t ty_unicode_n_lowercase;
extern const ty_unicode_nfd ty_unicode_nfd_ranges[];
extern const size_t ty_unicode_n_nfd;

#define TOY_UNICODE_REPLACEMENT 0xFFFDu

/* Length of the UTF-8 sequence a lead byte announces (1 for a stray continuation
 * byte), llama.cpp's unicode_len_utf8. */
static inline size_t ty_utf8_len(unsigned char c) {
    static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* Decodes the code point at s[*pos] (n bytes in all) and advances *pos. An invalid
 * or truncated sequence consumes one byte and gives U+FFFD. Like llama.cpp, overlong
 * forms and surrogates are not rejected, and F5..F7 leads give values above U+10FFFF. */
uint32_t ty_utf8_decode(const char *s, size_t n, size_t *pos);
/* Writes the UTF-8 of cpt (U+FFFD for a value above U+10FFFF) to out[4]; returns
 * the number of bytes. */
size_t ty_utf8_encode(uint32_t cpt, char *out);

uint16_t ty_unicode_flags(uint32_t cpt);
uint32_t ty_unicode_tolower(uint32_t cpt);
/* The first code point of the canonical decomposition (llama.cpp's
 * unicode_cpts_normalize_nfd works one code point at a time). */
uint32_t ty_unicode_nfd_first(uint32_t cpt);

/* GPT-2's byte-level alphabet: every byte as a printable character (U+0021..U+017F
 * range); ty_unicode_cpt_to_byte returns -1 for a character that is no byte. */
uint32_t ty_unicode_byte_to_cpt(uint8_t byte);
int ty_unicode_cpt_to_byte(uint32_t cpt);

#endif
