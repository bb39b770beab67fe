/* utf8.h — checking UTF-8 from outside (requests, metadata) before it is passed on. */
#ifndef TOY_UTF8_H
#define TOY_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0 where it is not
 * one: a bad lead or continuation byte, a truncated sequence, an overlong form, a
 * surrogate, or a value past U+10FFFF. */
static inline size_t ty_utf8_valid_len(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if ((s[0] & 0xE0) == 0xC0) len = 2, cp = s[0] & 0x1F;
    else if ((s[0] & 0xF0) == 0xE0) len = 3, cp = s[0] & 0x0F;
    else if ((s[0] & 0xF8) == 0xF0) len = 4, cp = s[0] & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

#endif
