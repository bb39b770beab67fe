/* json_schema_numbers.c — integer and number schemas with bounds (minimum, maximum and
 * their exclusive forms) as GBNF: the digit strings between two bounds, written digit
 * by digit (json_schema_internal.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema_internal.h"

/* Appends the numbers of n decimal digits (leading zeros allowed) >= s. */
static void put_ge(ty_buf *b, const char *s, size_t n) {
    size_t z = 0;
    while (z < n && s[z] == '0') z++;
    if (z == n) {
        ty_js_put_rep(b, "[0-9]", (long long)n, (long long)n);
        return;
    }
    if (n == 1) {
        ty_js_putf(b, "[%c-9]", s[0]);
        return;
    }
    ty_js_putf(b, "( [%c] ", s[0]);
    put_ge(b, s + 1, n - 1);
    if (s[0] < '9') {
        if (s[0] + 1 < '9') ty_js_putf(b, " | [%c-9] ", s[0] + 1);
        else ty_js_put(b, " | [9] ");
        ty_js_put_rep(b, "[0-9]", (long long)n - 1, (long long)n - 1);
    }
    ty_js_put(b, " )");
}

/* Appends the numbers of n decimal digits (leading zeros allowed) <= s. */
static void put_le(ty_buf *b, const char *s, size_t n) {
    size_t z = 0;
    while (z < n && s[z] == '9') z++;
    if (z == n) {
        ty_js_put_rep(b, "[0-9]", (long long)n, (long long)n);
        return;
    }
    if (n == 1) {
        ty_js_putf(b, "[0-%c]", s[0]);
        return;
    }
    ty_js_put(b, "( ");
    if (s[0] > '0') {
        if (s[0] - 1 > '0') ty_js_putf(b, "[0-%c] ", s[0] - 1);
        else ty_js_put(b, "[0] ");
        ty_js_put_rep(b, "[0-9]", (long long)n - 1, (long long)n - 1);
        ty_js_put(b, " | ");
    }
    ty_js_putf(b, "[%c] ", s[0]);
    put_le(b, s + 1, n - 1);
    ty_js_put(b, " )");
}

/* Appends the numbers lo..hi, both of n digits. */
static void put_between(ty_buf *b, const char *lo, const char *hi, size_t n) {
    size_t i = 0;
    while (i < n && lo[i] == hi[i]) i++;
    if (i) ty_js_put_lit(b, lo, i);
    if (i == n) return;
    if (i) ty_js_put(b, " ");
    size_t rest = n - i - 1;
    if (!rest) {
        ty_js_putf(b, "[%c-%c]", lo[i], hi[i]);
        return;
    }
    bool lo_zeros = strspn(lo + i + 1, "0") >= rest, hi_nines = strspn(hi + i + 1, "9") >= rest;
    char from = lo[i], to = hi[i];
    ty_js_put(b, "( ");
    bool any = false;
    if (!lo_zeros) {
        ty_js_putf(b, "[%c] ", from);
        put_ge(b, lo + i + 1, rest);
        from++;
        any = true;
    }
    if (!hi_nines) to--;
    if (from <= to) {
        if (any) ty_js_put(b, " | ");
        ty_js_putf(b, "[%c-%c] ", from, to);
        ty_js_put_rep(b, "[0-9]", (long long)rest, (long long)rest);
        any = true;
    }
    if (!hi_nines) {
        if (any) ty_js_put(b, " | ");
        ty_js_putf(b, "[%c] ", hi[i]);
        put_le(b, hi + i + 1, rest);
    }
    ty_js_put(b, " )");
}

/* Appends the decimal numbers lo..hi (no leading zeros), as alternatives. */
static void put_range(ty_buf *b, uint64_t lo, uint64_t hi) {
    char a[24], z[24];
    int na = snprintf(a, sizeof a, "%llu", (unsigned long long)lo);
    int nz = snprintf(z, sizeof z, "%llu", (unsigned long long)hi);
    for (int d = na; d <= nz; d++) {
        char from[24], to[24];
        if (d == na) snprintf(from, sizeof from, "%s", a);
        else from[0] = '1', memset(from + 1, '0', (size_t)d - 1), from[d] = 0;
        if (d == nz) snprintf(to, sizeof to, "%s", z);
        else memset(to, '9', (size_t)d), to[d] = 0;
        if (d > na) ty_js_put(b, " | ");
        put_between(b, from, to, (size_t)d);
    }
}

/* The integer bound of minimum/exclusiveMinimum (lower) or maximum/exclusiveMaximum:
 * lower bounds round up, upper ones down, exclusive ones move by one; the tighter of the
 * two wins. false when there is none (or none within 64 bits on the open side). */
static bool int_bound(conv *c, const json_t *s, bool lower, long long *out) {
    const char *keys[2] = {lower ? "minimum" : "maximum", lower ? "exclusiveMinimum" : "exclusiveMaximum"};
    const json_t *vals[2] = {json_object_get(s, keys[0]), json_object_get(s, keys[1])};
    bool exclusive[2] = {json_is_true(vals[1]), true}; /* draft 4: a boolean makes minimum exclusive */
    if (json_is_boolean(vals[1])) vals[1] = NULL;
    bool have = false;
    long long best = 0;
    for (int i = 0; i < 2; i++) {
        const json_t *v = vals[i];
        if (!v) continue;
        long long n;
        if (json_is_integer(v)) {
            n = json_integer_value(v);
            if (exclusive[i] && (lower ? n == INT64_MAX : n == INT64_MIN))
                return ty_js_fail_at(c, TOY_ERR_INVALID, keys[i], "no 64-bit integer is beyond %lld", n);
            if (exclusive[i]) n += lower ? 1 : -1;
        } else {
            double x = json_real_value(v);
            double r = lower ? (exclusive[i] ? floor(x) + 1 : ceil(x)) : (exclusive[i] ? ceil(x) - 1 : floor(x));
            if (lower ? r <= -9.2e18 : r >= 9.2e18) continue; /* no bound within 64 bits */
            if (lower ? r >= 9.2e18 : r <= -9.2e18)
                return ty_js_fail_at(c, TOY_ERR_INVALID, keys[i], "no 64-bit integer is %s %g", lower ? "above" : "below", x);
            n = (long long)r;
        }
        if (!have || (lower ? n > best : n < best)) best = n;
        have = true;
    }
    *out = best;
    return have;
}

bool ty_js_integer_body(conv *c, const json_t *s, ty_buf *b) {
    long long lo = 0, hi = 0;
    bool has_lo = int_bound(c, s, true, &lo);
    bool has_hi = int_bound(c, s, false, &hi);
    if (c->status != TOY_OK) return false;
    if (!has_lo && !has_hi) return ty_js_put_prim(c, b, PRIM_INTEGER);
    /* the open side stops at 16 digits, as integers without bounds do */
    const long long lim = 9999999999999999LL;
    if (!has_lo) lo = hi < -lim ? -INT64_MAX : -lim;
    if (!has_hi) hi = lo > lim ? INT64_MAX : lim;
    if (lo == INT64_MIN) lo = -INT64_MAX;
    if (lo > hi) return ty_js_fail(c, TOY_ERR_INVALID, "no integer is between the bounds %lld and %lld", lo, hi);
    ty_js_put(b, "( ");
    if (lo < 0) {
        uint64_t mag_lo = (uint64_t)(hi < 0 ? -hi : 1), mag_hi = (uint64_t)(-lo);
        ty_js_put(b, "\"-\" ( ");
        put_range(b, mag_lo, mag_hi);
        ty_js_put(b, " )");
        if (hi >= 0) ty_js_put(b, " | ");
    }
    if (hi >= 0) put_range(b, (uint64_t)(lo < 0 ? 0 : lo), (uint64_t)hi);
    ty_js_put(b, " ) ");
    return ty_js_put_prim(c, b, PRIM_SPACE);
}

/* A bound of a number: an integer, inclusive or exclusive. */
typedef struct {
    bool set, exclusive;
    long long v;
} num_bound;

/* The tighter of minimum and exclusiveMinimum (lower) or of maximum and exclusiveMaximum.
 * A bound with a fraction is an error under strict; without, it is rounded outward (the
 * grammar then accepts a little more than the schema). */
static bool number_bound(conv *c, const json_t *s, bool lower, num_bound *out) {
    const char *keys[2] = {lower ? "minimum" : "maximum", lower ? "exclusiveMinimum" : "exclusiveMaximum"};
    const json_t *vals[2] = {json_object_get(s, keys[0]), json_object_get(s, keys[1])};
    bool exclusive[2] = {json_is_true(vals[1]), true}; /* draft 4's boolean form */
    if (json_is_boolean(vals[1])) vals[1] = NULL;
    *out = (num_bound){0};
    for (int i = 0; i < 2; i++) {
        const json_t *v = vals[i];
        if (!v) continue;
        long long n;
        bool ex = exclusive[i];
        if (json_is_integer(v)) {
            n = json_integer_value(v);
            if (n == INT64_MIN) n = -INT64_MAX;
        } else {
            double x = json_real_value(v);
            if (lower ? x <= -9.2e18 : x >= 9.2e18) continue; /* beyond 16 digits anyway */
            if (lower ? x >= 9.2e18 : x <= -9.2e18)
                return ty_js_fail_at(c, TOY_ERR_INVALID, keys[i], "no number of at most 16 integer digits is %s %g",
                               lower ? "above" : "below", x);
            if (floor(x) != x) {
                if (c->strict)
                    return ty_js_fail_at(c, TOY_ERR_UNSUPPORTED, keys[i],
                                   "%s %g: bounds with a fraction are supported on type integer only", keys[i], x);
                x = lower ? floor(x) : ceil(x);
                ex = false;
            }
            n = (long long)x;
        }
        bool tighter = !out->set || (lower ? n > out->v : n < out->v) || (n == out->v && ex);
        if (tighter) out->set = true, out->v = n, out->exclusive = ex;
    }
    return true;
}

/* Alternatives for the numbers m >= 0 (written without sign or exponent) from lo to hi,
 * with at most `frac` fraction digits and integer parts up to `open` where hi is absent;
 * how many were written (0: none is in range). */
static int put_magnitude(ty_buf *b, long long lo, bool lo_ex, bool has_hi, long long hi, bool hi_ex, long long open,
                         int frac) {
    long long from = lo_ex ? (lo < INT64_MAX ? lo + 1 : lo) : lo;
    long long to = has_hi ? hi - 1 : (from > open ? INT64_MAX : open);
    int n = 0;
    char num[32];
    if (from <= to) { /* integer parts in range, any fraction */
        ty_js_put(b, "( ");
        put_range(b, (uint64_t)from, (uint64_t)to);
        ty_js_putf(b, frac > 1 ? " ) ( \".\" [0-9]{1,%d} )?" : " ) ( \".\" [0-9] )?", frac);
        n++;
    }
    if (lo_ex && (!has_hi || lo < hi)) { /* just above lo: a fraction ending in a non-zero digit */
        snprintf(num, sizeof num, "%lld", lo);
        if (n++) ty_js_put(b, " | ");
        ty_js_put_lit(b, num, strlen(num));
        ty_js_put(b, " \".\" ");
        if (frac > 1) ty_js_putf(b, frac > 2 ? "[0-9]{0,%d} " : "[0-9]? ", frac - 1);
        ty_js_put(b, "[1-9]");
    }
    if (has_hi && !hi_ex && (lo_ex ? hi > lo : hi >= lo)) { /* hi itself: a fraction of zeros */
        snprintf(num, sizeof num, "%lld", hi);
        if (n++) ty_js_put(b, " | ");
        ty_js_put_lit(b, num, strlen(num));
        ty_js_putf(b, frac > 1 ? " ( \".\" \"0\"{1,%d} )?" : " ( \".\" \"0\" )?", frac);
    }
    return n;
}

static int decimal_digits(unsigned long long x) {
    int d = 1;
    while (x >= 10) x /= 10, d++;
    return d;
}

/* Numbers with bounds: without exponent, the integer part's digit ranges as for integers,
 * the fraction free except next to a bound. */
bool ty_js_number_body(conv *c, const json_t *s, ty_buf *b) {
    num_bound lo, hi;
    if (!number_bound(c, s, true, &lo) || !number_bound(c, s, false, &hi)) return false;
    if (!lo.set && !hi.set) return ty_js_put_prim(c, b, PRIM_NUMBER);
    /* At most 15 significant digits, so that a value read as a double compares with the
       bounds as the decimal does: an open side stops at 9 integer digits (or the other
       bound's), and the fraction has what is left, at least one digit. */
    unsigned long long top = 999999999ULL;
    if (lo.set) top = top > (unsigned long long)llabs(lo.v) ? top : (unsigned long long)llabs(lo.v);
    if (hi.set) top = top > (unsigned long long)llabs(hi.v) ? top : (unsigned long long)llabs(hi.v);
    if (lo.set && hi.set) top = (unsigned long long)(llabs(lo.v) > llabs(hi.v) ? llabs(lo.v) : llabs(hi.v));
    int frac = 15 - decimal_digits(top);
    if (frac < 1) frac = 1;
    const long long open = (long long)(top > 999999999ULL ? top : 999999999ULL);
    ty_buf alts = {0};
    int n = 0;
    /* x >= 0 */
    if (!hi.set || hi.v > 0 || (hi.v == 0 && !hi.exclusive)) {
        bool low = lo.set && lo.v >= 0;
        n += put_magnitude(&alts, low ? lo.v : 0, low && lo.exclusive, hi.set, hi.v, hi.exclusive, open, frac);
    }
    /* x < 0, as "-" m with m > 0 */
    if (!lo.set || lo.v < 0) {
        ty_buf neg = {0};
        bool high = hi.set && hi.v < 0;
        int k = put_magnitude(&neg, high ? -hi.v : 0, high ? hi.exclusive : true, lo.set, lo.set ? -lo.v : 0,
                              lo.exclusive, open, frac);
        if (k) {
            if (n) ty_js_put(&alts, " | ");
            ty_js_put(&alts, "\"-\" ( ");
            ty_js_put(&alts, neg.v);
            ty_js_put(&alts, " )");
            n += k;
        }
        if (neg.oom) alts.oom = true;
        free(neg.v);
    }
    bool ok = c->status == TOY_OK && (!alts.oom || ty_js_oom(c));
    if (ok && !n) ok = ty_js_fail(c, TOY_ERR_INVALID, "no number is between the bounds");
    if (ok) {
        ty_js_put(b, "( ");
        ty_js_put(b, alts.v);
        ty_js_put(b, " ) ");
        ok = ty_js_put_prim(c, b, PRIM_SPACE);
    }
    free(alts.v);
    return ok;
}
