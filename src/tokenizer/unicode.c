/* unicode.c — UTF-8 and code point properties as llama.cpp's src/unicode.cpp has them. */
#include "unicode.h"

#include <stdbool.h>

uint32_t ty_utf8_decode(const char *s, size_t n, size_t *pos) {
    const unsigned char *u = (const unsigned char *)s + *pos;
    size_t left = n - *pos;
    /* llama.cpp checks the lead byte bit by bit and throws on a missing or malformed
     * continuation byte; its caller then skips one byte and emits U+FFFD. */
    if (!(u[0] & 0x80)) {
        *pos += 1;
        return u[0];
    }
    if (!(u[0] & 0x40)) goto invalid;
    if (!(u[0] & 0x20)) {
        if (left < 2 || (u[1] & 0xC0) != 0x80) goto invalid;
        *pos += 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if (!(u[0] & 0x10)) {
        if (left < 3 || (u[1] & 0xC0) != 0x80 || (u[2] & 0xC0) != 0x80) goto invalid;
        *pos += 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    if (!(u[0] & 0x08)) {
        if (left < 4 || (u[1] & 0xC0) != 0x80 || (u[2] & 0xC0) != 0x80 ||
            (u[3] & 0xC0) != 0x80)
            goto invalid;
        *pos += 4;
        return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
               ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    }
invalid:
    *pos += 1;
    return TOY_UNICODE_REPLACEMENT;
}

size_t ty_utf8_encode(uint32_t cpt, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cpt <= 0x7F) {
        o[0] = (unsigned char)cpt;
        return 1;
    }
    if (cpt <= 0x7FF) {
        o[0] = (unsigned char)(0xC0 | (cpt >> 6));
        o[1] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    /* llama.cpp throws for a value above U+10FFFF (only F4 90.. and F5..F7 leads decode
     * to one); toy writes the replacement character instead. */
    if (cpt > 0x10FFFF) cpt = TOY_UNICODE_REPLACEMENT;
    if (cpt <= 0xFFFF) {
        o[0] = (unsigned char)(0xE0 | (cpt >> 12));
        o[1] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cpt >> 18));
    o[1] = (unsigned char)(0x80 | ((cpt >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cpt & 0x3F));
    return 4;
}

/* llama.cpp's unicode_set_whitespace: PropList.txt's White_Space. */
static bool is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

uint16_t ty_unicode_flags(uint32_t cpt) {
    if (cpt >= 0x110000) return TY_UCD_UNDEFINED;
    /* the last range that starts at or before cpt */
    size_t lo = 0, hi = ty_unicode_n_ranges;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ty_unicode_ranges[mid].first <= cpt)
            lo = mid;
        else
            hi = mid;
    }
    uint16_t flags = ty_unicode_ranges[lo].flags;
    if (is_whitespace(cpt)) flags |= TY_UCD_WHITESPACE;
    return flags;
}

uint32_t ty_unicode_tolower(uint32_t cpt) {
    size_t lo = 0, hi = ty_unicode_n_lowercase;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ty_unicode_lowercase[mid].from < cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ty_unicode_n_lowercase && ty_unicode_lowercase[lo].from == cpt)
        return ty_unicode_lowercase[lo].to;
    return cpt;
}

uint32_t ty_unicode_nfd_first(uint32_t cpt) {
    size_t lo = 0, hi = ty_unicode_n_nfd;
    while (lo < hi) { /* first range with first > cpt */
        size_t mid = lo + (hi - lo) / 2;
        if (ty_unicode_nfd_ranges[mid].first <= cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return cpt;
    const ty_unicode_nfd *r = &ty_unicode_nfd_ranges[lo - 1];
    return cpt <= r->last ? r->nfd : cpt;
}

/* bytes_to_unicode() of GPT-2's encoder.py: the printable bytes '!'..'~', U+00A1..U+00AC
 * and U+00AE..U+00FF stand for themselves; the other 68 bytes, in order, become
 * U+0100..U+0143. */
uint32_t ty_unicode_byte_to_cpt(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 0x100u + b;              /* 33 bytes: U+0100..U+0120 */
    if (b <= 0xA0) return 0x121u + (b - 0x7Fu);    /* 0x7F..0xA0: U+0121..U+0142 */
    return 0x143u;                                 /* 0xAD */
}

int ty_unicode_cpt_to_byte(uint32_t cpt) {
    if ((cpt >= 0x21 && cpt <= 0x7E) || (cpt >= 0xA1 && cpt <= 0xAC) ||
        (cpt >= 0xAE && cpt <= 0xFF))
        return (int)cpt;
    if (cpt >= 0x100 && cpt <= 0x120) return (int)(cpt - 0x100);
    if (cpt >= 0x121 && cpt <= 0x142) return (int)(0x7F + (cpt - 0x121));
    if (cpt == 0x143) return 0xAD;
    return -1;
}
