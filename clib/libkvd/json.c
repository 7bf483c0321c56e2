/* json.c — the reader and writer declared in json.h. */

#include "json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the C locale, made once ---- */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

double kvdi_c_strtod(const char *text, char **end) {
    pthread_once(&c_locale_once, make_c_locale);
    return c_locale ? strtod_l(text, end, c_locale) : strtod(text, end);
}

int kvdi_c_format_double(char *out, size_t size, int precision, double number) {
    pthread_once(&c_locale_once, make_c_locale);
    locale_t previous = c_locale ? uselocale(c_locale) : (locale_t)0;
    int written = snprintf(out, size, "%.*g", precision, number);
    if (c_locale) uselocale(previous);
    return written;
}

/* ---- UTF-8 ---- */

/* The length of the scalar at `p` (at most `left` bytes), or 0 if it is not valid UTF-8. */
static size_t utf8_scalar_length(const unsigned char *p, size_t left) {
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t need;
    uint32_t min, scalar;
    if (c >= 0xC2 && c <= 0xDF) need = 2, min = 0x80, scalar = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) need = 3, min = 0x800, scalar = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) need = 4, min = 0x10000, scalar = c & 0x07;
    else return 0;
    if (left < need) return 0;
    for (size_t i = 1; i < need; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        scalar = (scalar << 6) | (p[i] & 0x3F);
    }
    if (scalar < min || scalar > 0x10FFFF || (scalar >= 0xD800 && scalar < 0xE000)) return 0;
    return need;
}

bool kvdi_utf8_valid(const char *bytes, size_t len) {
    const unsigned char *p = (const unsigned char *)bytes;
    size_t i = 0;
    while (i < len) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = utf8_scalar_length(p + i, len - i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

/* ---- the reader ---- */

typedef struct parser {
    const unsigned char *text;
    size_t len, pos;
    int max_depth;
    char *message;
    size_t message_size;
    int status; /* 0, -1 (invalid), -2 (no memory) */
} parser;

static void fail(parser *p, const char *what) {
    if (p->status) return;
    p->status = -1;
    snprintf(p->message, p->message_size, "at byte %zu: %s", p->pos, what);
}

static void fail_memory(parser *p) {
    if (p->status) return;
    p->status = -2;
    snprintf(p->message, p->message_size, "out of memory");
}

static void skip_space(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static json_node *new_node(parser *p, json_type type) {
    json_node *node = calloc(1, sizeof *node);
    if (!node) fail_memory(p);
    else node->type = type;
    return node;
}

static bool literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0) {
        fail(p, "invalid literal");
        return false;
    }
    p->pos += n;
    return true;
}

static int hex4(parser *p, uint32_t *out) {
    if (p->len - p->pos < 4) return fail(p, "truncated \\u escape"), -1;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->text[p->pos + i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return fail(p, "invalid \\u escape"), -1;
    }
    p->pos += 4;
    *out = v;
    return 0;
}

static void put_scalar(json_buffer *b, uint32_t s) {
    char u[4];
    size_t n;
    if (s < 0x80) u[0] = (char)s, n = 1;
    else if (s < 0x800) u[0] = (char)(0xC0 | (s >> 6)), u[1] = (char)(0x80 | (s & 0x3F)), n = 2;
    else if (s < 0x10000)
        u[0] = (char)(0xE0 | (s >> 12)), u[1] = (char)(0x80 | ((s >> 6) & 0x3F)), u[2] = (char)(0x80 | (s & 0x3F)), n = 3;
    else
        u[0] = (char)(0xF0 | (s >> 18)), u[1] = (char)(0x80 | ((s >> 12) & 0x3F)), u[2] = (char)(0x80 | ((s >> 6) & 0x3F)),
        u[3] = (char)(0x80 | (s & 0x3F)), n = 4;
    kvdi_buffer_append(b, u, n);
}

/* Reads a string (at its opening quote) into a fresh NUL-terminated buffer. */
static char *parse_string(parser *p, size_t *out_len) {
    p->pos++; /* the quote */
    json_buffer b = {0};
    for (;;) {
        size_t start = p->pos;
        while (p->pos < p->len) {
            unsigned char c = p->text[p->pos];
            if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
            p->pos++;
        }
        kvdi_buffer_append(&b, (const char *)p->text + start, p->pos - start);
        if (p->pos >= p->len) {
            fail(p, "unterminated string");
            break;
        }
        unsigned char c = p->text[p->pos];
        if (c == '"') {
            p->pos++;
            kvdi_buffer_append_byte(&b, '\0');
            if (b.failed) break;
            *out_len = b.len - 1;
            return b.data;
        }
        if (c < 0x20) {
            fail(p, "unescaped control character in string");
            break;
        }
        if (c >= 0x80) {
            size_t n = utf8_scalar_length(p->text + p->pos, p->len - p->pos);
            if (n == 0) {
                fail(p, "invalid UTF-8 in string");
                break;
            }
            kvdi_buffer_append(&b, (const char *)p->text + p->pos, n);
            p->pos += n;
            continue;
        }
        /* an escape */
        if (++p->pos >= p->len) {
            fail(p, "unterminated string");
            break;
        }
        char e = (char)p->text[p->pos++];
        static const char escapes[] = "\"\\/bfnrt", replacements[] = "\"\\/\b\f\n\r\t";
        const char *simple = e ? strchr(escapes, e) : NULL;
        if (simple) {
            kvdi_buffer_append_byte(&b, replacements[simple - escapes]);
            continue;
        }
        if (e != 'u') {
            p->pos--;
            fail(p, "invalid escape in string");
            break;
        }
        uint32_t unit;
        if (hex4(p, &unit)) break;
        if (unit >= 0xDC00 && unit < 0xE000) {
            fail(p, "unpaired surrogate in \\u escape");
            break;
        }
        if (unit >= 0xD800 && unit < 0xDC00) {
            uint32_t low;
            if (p->len - p->pos < 2 || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u') {
                fail(p, "unpaired surrogate in \\u escape");
                break;
            }
            p->pos += 2;
            if (hex4(p, &low)) break;
            if (low < 0xDC00 || low >= 0xE000) {
                fail(p, "unpaired surrogate in \\u escape");
                break;
            }
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
        }
        put_scalar(&b, unit);
    }
    if (b.failed) fail_memory(p);
    free(b.data);
    return NULL;
}

static json_node *parse_number(parser *p) {
    size_t start = p->pos;
    bool integer = true;
    if (p->pos < p->len && p->text[p->pos] == '-') p->pos++;
    if (p->pos >= p->len || p->text[p->pos] < '0' || p->text[p->pos] > '9') return fail(p, "invalid number"), NULL;
    if (p->text[p->pos] == '0') p->pos++;
    else
        while (p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') p->pos++;
    if (p->pos < p->len && p->text[p->pos] == '.') {
        integer = false;
        p->pos++;
        size_t digits = p->pos;
        while (p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') p->pos++;
        if (p->pos == digits) return fail(p, "invalid number: no digits after '.'"), NULL;
    }
    if (p->pos < p->len && (p->text[p->pos] == 'e' || p->text[p->pos] == 'E')) {
        integer = false;
        p->pos++;
        if (p->pos < p->len && (p->text[p->pos] == '+' || p->text[p->pos] == '-')) p->pos++;
        size_t digits = p->pos;
        while (p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') p->pos++;
        if (p->pos == digits) return fail(p, "invalid number: no digits in the exponent"), NULL;
    }
    size_t n = p->pos - start;
    char small[64];
    char *copy = n < sizeof small ? small : malloc(n + 1);
    if (!copy) return fail_memory(p), NULL;
    memcpy(copy, p->text + start, n);
    copy[n] = '\0';
    json_node *node = new_node(p, integer ? JSON_INT : JSON_REAL);
    if (node) {
        char *end;
        errno = 0;
        if (integer) node->u.integer = strtoll(copy, &end, 10);
        else node->u.real = kvdi_c_strtod(copy, &end);
        if (integer && errno == ERANGE) {
            p->pos = start;
            fail(p, "integer out of the signed 64-bit range");
        } else if (!integer && !isfinite(node->u.real)) {
            p->pos = start;
            fail(p, "real out of the double range");
        }
        if (p->status) kvdi_json_free(node), node = NULL;
    }
    if (copy != small) free(copy);
    return node;
}

static json_node *parse_value(parser *p, int depth);

static int compare_members(const void *a, const void *b) {
    const json_member *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* The first duplicate name among `count` members, or NULL: sorts a copy, O(n log n). */
static const json_member *find_duplicate(const json_member *members, size_t count, parser *p) {
    if (count < 2) return NULL;
    if (count <= 8) {
        for (size_t i = 1; i < count; i++)
            for (size_t j = 0; j < i; j++)
                if (!compare_members(&members[i], &members[j])) return &members[i];
        return NULL;
    }
    json_member *sorted = malloc(count * sizeof *sorted);
    if (!sorted) return fail_memory(p), NULL;
    memcpy(sorted, members, count * sizeof *sorted);
    qsort(sorted, count, sizeof *sorted, compare_members);
    const json_member *found = NULL;
    for (size_t i = 1; i < count && !found; i++)
        if (!compare_members(&sorted[i - 1], &sorted[i])) {
            for (size_t j = 0; j < count; j++)
                if (members[j].name == sorted[i].name) found = &members[j];
        }
    free(sorted);
    return found;
}

/* Grows `*items` (of `size`-byte elements) to hold `count + 1`. */
static bool grow(parser *p, void **items, size_t *cap, size_t count, size_t size) {
    if (count < *cap) return true;
    size_t want = *cap ? *cap * 2 : 4;
    void *bigger = realloc(*items, want * size);
    if (!bigger) return fail_memory(p), false;
    *items = bigger;
    *cap = want;
    return true;
}

static json_node *parse_array(parser *p, int depth) {
    json_node *node = new_node(p, JSON_ARRAY);
    if (!node) return NULL;
    size_t cap = 0;
    p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == ']') return p->pos++, node;
    for (;;) {
        if (!grow(p, (void **)&node->u.array.items, &cap, node->u.array.count, sizeof(json_node *))) break;
        json_node *item = parse_value(p, depth + 1);
        if (!item) break;
        node->u.array.items[node->u.array.count++] = item;
        skip_space(p);
        if (p->pos < p->len && p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->text[p->pos] == ']') return p->pos++, node;
        fail(p, "expected ',' or ']' in array");
        break;
    }
    kvdi_json_free(node);
    return NULL;
}

static json_node *parse_object(parser *p, int depth) {
    json_node *node = new_node(p, JSON_OBJECT);
    if (!node) return NULL;
    size_t cap = 0;
    p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == '}') return p->pos++, node;
    for (;;) {
        skip_space(p);
        if (p->pos >= p->len || p->text[p->pos] != '"') {
            fail(p, "expected a member name in object");
            break;
        }
        if (!grow(p, (void **)&node->u.object.members, &cap, node->u.object.count, sizeof(json_member))) break;
        json_member *m = &node->u.object.members[node->u.object.count];
        m->value = NULL;
        m->name = parse_string(p, &m->name_len);
        if (!m->name) break;
        node->u.object.count++;
        skip_space(p);
        if (p->pos >= p->len || p->text[p->pos] != ':') {
            fail(p, "expected ':' after a member name");
            break;
        }
        p->pos++;
        m->value = parse_value(p, depth + 1);
        if (!m->value) break;
        skip_space(p);
        if (p->pos < p->len && p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->text[p->pos] == '}') {
            p->pos++;
            const json_member *dup = find_duplicate(node->u.object.members, node->u.object.count, p);
            if (!dup && !p->status) return node;
            if (dup) {
                char what[160];
                snprintf(what, sizeof what, "duplicate member \"%.100s\"", dup->name);
                fail(p, what);
            }
            break;
        }
        fail(p, "expected ',' or '}' in object");
        break;
    }
    kvdi_json_free(node);
    return NULL;
}

static json_node *parse_value(parser *p, int depth) {
    skip_space(p);
    if (p->pos >= p->len) return fail(p, "unexpected end of text"), NULL;
    unsigned char c = p->text[p->pos];
    if ((c == '[' || c == '{') && depth >= p->max_depth) {
        char what[64];
        snprintf(what, sizeof what, "nesting deeper than %d levels", p->max_depth);
        return fail(p, what), NULL;
    }
    json_node *node;
    switch (c) {
    case '{': return parse_object(p, depth);
    case '[': return parse_array(p, depth);
    case '"': {
        size_t len;
        char *s = parse_string(p, &len);
        if (!s) return NULL;
        if (!(node = new_node(p, JSON_STRING))) return free(s), NULL;
        node->u.string.bytes = s;
        node->u.string.len = len;
        return node;
    }
    case 't':
    case 'f':
        if (!literal(p, c == 't' ? "true" : "false")) return NULL;
        if ((node = new_node(p, JSON_BOOL))) node->u.flag = c == 't';
        return node;
    case 'n': return literal(p, "null") ? new_node(p, JSON_NULL) : NULL;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p);
        return fail(p, "unexpected character"), NULL;
    }
}

int kvdi_json_parse(const char *text, size_t len, int max_depth, json_node **out, char *message, size_t message_size) {
    parser p = {(const unsigned char *)text, len, 0, max_depth, message, message_size, 0};
    if (message_size) message[0] = '\0';
    json_node *node = parse_value(&p, 0);
    if (node) {
        skip_space(&p);
        if (p.pos != p.len) fail(&p, "unexpected text after the JSON document");
    }
    if (p.status) {
        kvdi_json_free(node);
        return p.status;
    }
    *out = node;
    return 0;
}

void kvdi_json_free(json_node *node) {
    if (!node) return;
    switch (node->type) {
    case JSON_STRING: free(node->u.string.bytes); break;
    case JSON_ARRAY:
        for (size_t i = 0; i < node->u.array.count; i++) kvdi_json_free(node->u.array.items[i]);
        free(node->u.array.items);
        break;
    case JSON_OBJECT:
        for (size_t i = 0; i < node->u.object.count; i++) {
            free(node->u.object.members[i].name);
            kvdi_json_free(node->u.object.members[i].value);
        }
        free(node->u.object.members);
        break;
    default: break;
    }
    free(node);
}

const json_node *kvdi_json_get(const json_node *object, const char *name) {
    if (!object || object->type != JSON_OBJECT) return NULL;
    size_t n = strlen(name);
    for (size_t i = 0; i < object->u.object.count; i++) {
        const json_member *m = &object->u.object.members[i];
        if (m->name_len == n && memcmp(m->name, name, n) == 0) return m->value;
    }
    return NULL;
}

/* ---- the writer ---- */

void kvdi_buffer_append(json_buffer *b, const char *bytes, size_t len) {
    if (b->failed || len == 0) return;
    if (b->cap - b->len < len) {
        size_t want = b->cap ? b->cap : 256;
        while (want - b->len < len) {
            if (want > SIZE_MAX / 2) {
                b->failed = true;
                return;
            }
            want *= 2;
        }
        char *bigger = realloc(b->data, want);
        if (!bigger) {
            b->failed = true;
            return;
        }
        b->data = bigger;
        b->cap = want;
    }
    memcpy(b->data + b->len, bytes, len);
    b->len += len;
}

void kvdi_buffer_append_str(json_buffer *b, const char *text) { kvdi_buffer_append(b, text, strlen(text)); }

void kvdi_buffer_append_byte(json_buffer *b, char byte) {
    if (!b->failed && b->len < b->cap) b->data[b->len++] = byte;
    else kvdi_buffer_append(b, &byte, 1);
}

void kvdi_buffer_append_json_string(json_buffer *b, const char *bytes, size_t len) {
    static const char hex[] = "0123456789abcdef";
    kvdi_buffer_append_byte(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        kvdi_buffer_append(b, bytes + start, i - start);
        start = i + 1;
        switch (c) {
        case '"': kvdi_buffer_append(b, "\\\"", 2); break;
        case '\\': kvdi_buffer_append(b, "\\\\", 2); break;
        case '\n': kvdi_buffer_append(b, "\\n", 2); break;
        case '\r': kvdi_buffer_append(b, "\\r", 2); break;
        case '\t': kvdi_buffer_append(b, "\\t", 2); break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            kvdi_buffer_append(b, u, 6);
        }
        }
    }
    kvdi_buffer_append(b, bytes + start, len - start);
    kvdi_buffer_append_byte(b, '"');
}

void kvdi_buffer_append_int(json_buffer *b, int64_t number) {
    char text[24];
    int n = snprintf(text, sizeof text, "%lld", (long long)number);
    kvdi_buffer_append(b, text, (size_t)n);
}

void kvdi_buffer_append_real(json_buffer *b, double number) {
    char text[40];
    int n = 0;
    for (int precision = 1; precision <= 17; precision++) {
        n = kvdi_c_format_double(text, sizeof text, precision, number);
        if (kvdi_c_strtod(text, NULL) == number) break;
    }
    if (!strpbrk(text, ".eE")) {
        memcpy(text + n, ".0", 3);
        n += 2;
    }
    kvdi_buffer_append(b, text, (size_t)n);
}

void kvdi_buffer_append_json(json_buffer *b, const json_node *node) {
    switch (node->type) {
    case JSON_NULL: kvdi_buffer_append(b, "null", 4); break;
    case JSON_BOOL: kvdi_buffer_append_str(b, node->u.flag ? "true" : "false"); break;
    case JSON_INT: kvdi_buffer_append_int(b, node->u.integer); break;
    case JSON_REAL: kvdi_buffer_append_real(b, node->u.real); break;
    case JSON_STRING: kvdi_buffer_append_json_string(b, node->u.string.bytes, node->u.string.len); break;
    case JSON_ARRAY:
        kvdi_buffer_append_byte(b, '[');
        for (size_t i = 0; i < node->u.array.count; i++) {
            if (i) kvdi_buffer_append_byte(b, ',');
            kvdi_buffer_append_json(b, node->u.array.items[i]);
        }
        kvdi_buffer_append_byte(b, ']');
        break;
    case JSON_OBJECT:
        kvdi_buffer_append_byte(b, '{');
        for (size_t i = 0; i < node->u.object.count; i++) {
            const json_member *m = &node->u.object.members[i];
            if (i) kvdi_buffer_append_byte(b, ',');
            kvdi_buffer_append_json_string(b, m->name, m->name_len);
            kvdi_buffer_append_byte(b, ':');
            kvdi_buffer_append_json(b, m->value);
        }
        kvdi_buffer_append_byte(b, '}');
        break;
    }
}
