/* json_out.c — writing JSON values by hand: strings from GGUF metadata may hold any
 * bytes, so escaping and UTF-8 validation are done here rather than trusted. */
#include <math.h>
#include <stdint.h>

#include "commands.h"
#include "utf8.h"

void print_json_string(FILE *f, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            i++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': fputs("\\n", f); break;
            case '\t': fputs("\\t", f); break;
            case '\r': fputs("\\r", f); break;
            default: fprintf(f, "\\u%04x", c); break;
            }
            i++;
        } else {
            size_t len = ty_utf8_valid_len(s + i, n - i);
            if (len == 0) {
                fputs("\\ufffd", f);
                i++;
            } else {
                fwrite(s + i, 1, len, f);
                i += len;
            }
        }
    }
    fputc('"', f);
}

void print_piece(FILE *f, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        size_t len = s[i] >= 0x20 ? ty_utf8_valid_len(s + i, n - i) : 0;
        if (len == 0) {
            fprintf(f, "\\x%02x", s[i]);
            i++;
        } else {
            fwrite(s + i, 1, len, f);
            i += len;
        }
    }
}

void print_json_number(FILE *f, double x) {
    if (!isfinite(x)) fputs("null", f);
    else if (x == (double)(int64_t)x && fabs(x) < 9e15) fprintf(f, "%lld", (long long)x);
    else fprintf(f, "%.9g", x);
}
