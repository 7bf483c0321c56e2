/* json.h — libkvd's own JSON reader and writer (internal).
 *
 * The reader takes strict JSON (RFC 8259) by the rules kvd's own parser reads it with
 * (Sources/KVValues/JSONParser.swift): valid UTF-8, escapes forming valid scalars, no unescaped
 * control characters, no duplicate object members, integers within signed 64 bits, finite reals,
 * nothing after the document but whitespace, at most `max_depth` levels. Numbers with no '.', 'e'
 * or 'E' are integers, the rest reals. The writer emits compact JSON that the reader takes back
 * to the same tree. Fuzzed by clib/fuzz/fuzz_json.c. Not thread-shared: a tree belongs to one
 * thread at a time. */
#ifndef KVD_JSON_H
#define KVD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_INT, JSON_REAL, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_node json_node;

typedef struct json_member {
    char *name; /* NUL-terminated; name_len counts NUL bytes inside */
    size_t name_len;
    json_node *value;
} json_member;

struct json_node {
    json_type type;
    union {
        bool flag;
        int64_t integer;
        double real;
        struct {
            char *bytes; /* NUL-terminated */
            size_t len;
        } string;
        struct {
            json_node **items;
            size_t count;
        } array;
        struct {
            json_member *members; /* in document order */
            size_t count;
        } object;
    } u;
};

/* Parses `len` bytes. On success returns 0 and the tree in `*out` (free with kvdi_json_free). On
 * failure returns -1 and writes one line into `message` (like "at byte 12: duplicate member
 * \"a\""); -2 when out of memory. */
int kvdi_json_parse(const char *text, size_t len, int max_depth, json_node **out, char *message, size_t message_size);
void kvdi_json_free(json_node *node);
/* The member `name` of an object, or NULL (also when `object` is not one). */
const json_node *kvdi_json_get(const json_node *object, const char *name);

/* A growing byte buffer; `failed` once an allocation failed (then appends do nothing). */
typedef struct json_buffer {
    char *data;
    size_t len, cap;
    bool failed;
} json_buffer;

void kvdi_buffer_append(json_buffer *buffer, const char *bytes, size_t len);
void kvdi_buffer_append_str(json_buffer *buffer, const char *text);
void kvdi_buffer_append_byte(json_buffer *buffer, char byte);
/* A quoted JSON string of `len` bytes of UTF-8 (escapes '"', '\\' and control characters). */
void kvdi_buffer_append_json_string(json_buffer *buffer, const char *bytes, size_t len);
void kvdi_buffer_append_int(json_buffer *buffer, int64_t number);
/* The shortest text that reads back to the same double, always with '.' or an exponent, in the
 * C locale. `number` must be finite. */
void kvdi_buffer_append_real(json_buffer *buffer, double number);
/* The compact JSON of `node`. */
void kvdi_buffer_append_json(json_buffer *buffer, const json_node *node);

/* Whether `len` bytes are valid UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). */
bool kvdi_utf8_valid(const char *bytes, size_t len);
/* strtod and snprintf("%.*g") in the C locale, whatever the process's locale. */
double kvdi_c_strtod(const char *text, char **end);
int kvdi_c_format_double(char *out, size_t size, int precision, double number);

#endif
