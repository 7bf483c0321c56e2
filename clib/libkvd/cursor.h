/* cursor.h — reading JSON at a glance, the way kvd writes it (internal): a cursor over a
 * message's bytes and the tokens it takes whole (a plain string, a small integer, a literal),
 * each false for anything else, so that the caller can give the bytes to the parser
 * (json.c) instead. Used by current.c (a WatchAll's current state) and changes.c (a domain's
 * changes). */
#ifndef KVD_CURSOR_H
#define KVD_CURSOR_H

#include <stdint.h>
#include <string.h>

#include "json.h"

/* A cursor over one message's bytes. */
typedef struct {
    const char *p, *end;
} cursor;

static inline void skip_space(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static inline bool take(cursor *c, char byte) {
    skip_space(c);
    if (c->p >= c->end || *c->p != byte) return false;
    c->p++;
    return true;
}

/* How many bytes from `bytes` (up to `end`) are plain ASCII in a JSON string: 0x20 to 0x7F but
 * '"' and '\\' (no escape, no control byte, nothing to check as UTF-8). Eight bytes at a time on
 * a little-endian machine: a byte is flagged when below 0x20, '"', '\\' or at or above 0x80; the
 * lowest flag is the first such byte (a borrow only ever flags a byte above a flagged one). The
 * last bytes, and every byte on other machines, one by one. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static inline size_t plain_ascii_run(const char *bytes, const char *end) {
    const char *p = bytes;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; end - p >= 8; p += 8) {
        uint64_t x, quote, backslash;
        memcpy(&x, p, 8);
        quote = x ^ (ONES * '"');
        backslash = x ^ (ONES * '\\');
        uint64_t flags = (((x - ONES * 0x20) & ~x) | ((quote - ONES) & ~quote) | ((backslash - ONES) & ~backslash) | x) & HIGHS;
        if (flags) return (size_t)(p - bytes) + (size_t)__builtin_ctzll(flags) / 8;
    }
#endif
    while (p < end && (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x80 && *p != '"' && *p != '\\') p++;
    return (size_t)(p - bytes);
}

#undef ONES
#undef HIGHS

/* The bytes that end a plain string: 1 its '"', 2 what makes it not plain (an escape, a control byte). */
static const unsigned char PLAIN_STOP[256] = {
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, ['"'] = 1, ['\\'] = 2};

/* A plain string (no escape, no control byte) at the cursor: its bytes, not copied; `*ascii` (if
 * not NULL) the length of its first run of ASCII bytes (all of it: no byte to check as UTF-8). */
static inline bool plain_string(cursor *c, const char **bytes, size_t *len, size_t *ascii) {
    skip_space(c);
    if (c->p >= c->end || *c->p != '"') return false;
    const char *from = c->p + 1, *p = from + plain_ascii_run(from, c->end);
    if (ascii) *ascii = (size_t)(p - from);
    while (p < c->end && !PLAIN_STOP[(unsigned char)*p]) p++;
    if (p >= c->end || PLAIN_STOP[(unsigned char)*p] != 1) return false;
    *bytes = from;
    *len = (size_t)(p - from);
    c->p = p + 1;
    return true;
}

/* A plain string that is valid UTF-8 (checked from its first byte that is not ASCII). */
static inline bool plain_utf8_string(cursor *c, const char **bytes, size_t *len) {
    size_t ascii;
    return plain_string(c, bytes, len, &ascii) && (ascii == *len || kvdi_utf8_valid(*bytes + ascii, *len - ascii));
}

/* A member's name and the ':' after it. */
static inline bool member_name(cursor *c, const char **name, size_t *len) { return plain_string(c, name, len, NULL) && take(c, ':'); }

#define IS_NAME(name, len, expected) ((len) == sizeof(expected) - 1 && !memcmp((name), (expected), (len)))

/* An integer of at most 18 digits (no fraction, no exponent). */
static inline bool small_integer(cursor *c, int64_t *out) {
    skip_space(c);
    bool negative = c->p < c->end && *c->p == '-';
    const char *from = c->p += negative;
    const char *stop = c->end - from > 18 ? from + 18 : c->end;
    int64_t value = 0;
    while (c->p < stop && (unsigned char)(*c->p - '0') < 10) value = value * 10 + (*c->p++ - '0');
    char next = c->p < c->end ? *c->p : ' ';
    if (c->p == from || (next >= '0' && next <= '9') || next == '.' || next == 'e' || next == 'E' || (*from == '0' && c->p - from > 1))
        return false;
    *out = negative ? -value : value;
    return true;
}

static inline bool literal(cursor *c, bool *flag) {
    skip_space(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && !memcmp(c->p, "true", 4)) return *flag = true, c->p += 4, true;
    if (left >= 5 && !memcmp(c->p, "false", 5)) return *flag = false, c->p += 5, true;
    return false;
}

#endif
