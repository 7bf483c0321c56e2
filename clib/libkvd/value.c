/* value.c — kvd_value: construction, access, comparison, and the contract's typed JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoding.h"
#include "internal.h"

typedef struct member {
    char *key;
    size_t key_len;
    kvd_value *value;
} member;

struct kvd_value {
    kvd_type type;
    union {
        bool flag;
        int64_t integer;
        double real;
        struct {
            char *bytes; /* string: NUL-terminated; data: NULL when empty */
            size_t len;
        } blob;
        struct {
            int64_t seconds;
            int32_t nanoseconds;
            char *text; /* the text it was read from, written back as it is; or NULL */
        } date;
        struct {
            kvd_value **items;
            size_t count, cap;
        } array;
        struct {
            member *members;
            size_t count, cap;
        } dict;
    } u;
};

static kvd_value *make(kvd_type type) {
    kvd_value *v = calloc(1, sizeof *v);
    if (v) v->type = type;
    return v;
}

static char *copy_bytes(const char *bytes, size_t len) {
    char *copy = malloc(len + 1);
    if (!copy) return NULL;
    if (len) memcpy(copy, bytes, len);
    copy[len] = '\0';
    return copy;
}

KVD_EXPORT kvd_value *kvd_value_new_string_len(const char *text, size_t length) {
    if ((!text && length) || !kvdi_utf8_valid(text, length)) return NULL;
    kvd_value *v = make(KVD_TYPE_STRING);
    if (v && !(v->u.blob.bytes = copy_bytes(text ? text : "", length))) return free(v), NULL;
    if (v) v->u.blob.len = length;
    return v;
}

kvd_value *kvdi_value_new_checked_string(const char *text, size_t length) {
    kvd_value *v = make(KVD_TYPE_STRING);
    if (v && !(v->u.blob.bytes = copy_bytes(text, length))) return free(v), NULL;
    if (v) v->u.blob.len = length;
    return v;
}

KVD_EXPORT kvd_value *kvd_value_new_string(const char *text) { return text ? kvd_value_new_string_len(text, strlen(text)) : NULL; }

KVD_EXPORT kvd_value *kvd_value_new_bool(bool flag) {
    kvd_value *v = make(KVD_TYPE_BOOL);
    if (v) v->u.flag = flag;
    return v;
}

KVD_EXPORT kvd_value *kvd_value_new_int(int64_t number) {
    kvd_value *v = make(KVD_TYPE_INT);
    if (v) v->u.integer = number;
    return v;
}

KVD_EXPORT kvd_value *kvd_value_new_double(double number) {
    if (!isfinite(number)) return NULL;
    kvd_value *v = make(KVD_TYPE_DOUBLE);
    if (v) v->u.real = number;
    return v;
}

KVD_EXPORT kvd_value *kvd_value_new_date(int64_t unix_seconds, int32_t nanoseconds) {
    if (!kvdi_date_in_range(unix_seconds, nanoseconds)) return NULL;
    kvd_value *v = make(KVD_TYPE_DATE);
    if (v) v->u.date.seconds = unix_seconds, v->u.date.nanoseconds = nanoseconds;
    return v;
}

KVD_EXPORT kvd_value *kvd_value_new_data(const void *bytes, size_t length) {
    if (!bytes && length) return NULL;
    kvd_value *v = make(KVD_TYPE_DATA);
    if (v && length) {
        if (!(v->u.blob.bytes = malloc(length))) return free(v), NULL;
        memcpy(v->u.blob.bytes, bytes, length);
        v->u.blob.len = length;
    }
    return v;
}

KVD_EXPORT kvd_value *kvd_value_new_array(void) { return make(KVD_TYPE_ARRAY); }
KVD_EXPORT kvd_value *kvd_value_new_dict(void) { return make(KVD_TYPE_DICT); }

KVD_EXPORT void kvd_value_free(kvd_value *v) {
    if (!v) return;
    switch (v->type) {
    case KVD_TYPE_STRING:
    case KVD_TYPE_DATA: free(v->u.blob.bytes); break;
    case KVD_TYPE_DATE: free(v->u.date.text); break;
    case KVD_TYPE_ARRAY:
        for (size_t i = 0; i < v->u.array.count; i++) kvd_value_free(v->u.array.items[i]);
        free(v->u.array.items);
        break;
    case KVD_TYPE_DICT:
        for (size_t i = 0; i < v->u.dict.count; i++) {
            free(v->u.dict.members[i].key);
            kvd_value_free(v->u.dict.members[i].value);
        }
        free(v->u.dict.members);
        break;
    default: break;
    }
    free(v);
}

KVD_EXPORT kvd_type kvd_value_type(const kvd_value *v) { return v ? v->type : (kvd_type)-1; }

KVD_EXPORT const char *kvd_type_name(kvd_type type) {
    static const char *const names[] = {"string", "bool", "integer", "real", "date", "data", "array", "dictionary"};
    return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

KVD_EXPORT bool kvd_value_get_bool(const kvd_value *v) { return v && v->type == KVD_TYPE_BOOL && v->u.flag; }
KVD_EXPORT int64_t kvd_value_get_int(const kvd_value *v) { return v && v->type == KVD_TYPE_INT ? v->u.integer : 0; }
KVD_EXPORT double kvd_value_get_double(const kvd_value *v) { return v && v->type == KVD_TYPE_DOUBLE ? v->u.real : 0.0; }

KVD_EXPORT const char *kvd_value_get_string(const kvd_value *v, size_t *length) {
    if (!v || v->type != KVD_TYPE_STRING) return NULL;
    if (length) *length = v->u.blob.len;
    return v->u.blob.bytes;
}

KVD_EXPORT const void *kvd_value_get_data(const kvd_value *v, size_t *length) {
    if (length) *length = v && v->type == KVD_TYPE_DATA ? v->u.blob.len : 0;
    return v && v->type == KVD_TYPE_DATA ? v->u.blob.bytes : NULL;
}

KVD_EXPORT bool kvd_value_get_date(const kvd_value *v, int64_t *unix_seconds, int32_t *nanoseconds) {
    if (!v || v->type != KVD_TYPE_DATE) return false;
    if (unix_seconds) *unix_seconds = v->u.date.seconds;
    if (nanoseconds) *nanoseconds = v->u.date.nanoseconds;
    return true;
}

KVD_EXPORT size_t kvd_value_array_length(const kvd_value *v) { return v && v->type == KVD_TYPE_ARRAY ? v->u.array.count : 0; }

KVD_EXPORT const kvd_value *kvd_value_array_get(const kvd_value *v, size_t index) {
    return v && v->type == KVD_TYPE_ARRAY && index < v->u.array.count ? v->u.array.items[index] : NULL;
}

KVD_EXPORT bool kvd_value_array_append(kvd_value *v, kvd_value *element) {
    if (!v || v->type != KVD_TYPE_ARRAY || !element) return kvd_value_free(element), false;
    if (v->u.array.count == v->u.array.cap) {
        size_t want = v->u.array.cap ? v->u.array.cap * 2 : 4;
        kvd_value **bigger = realloc(v->u.array.items, want * sizeof *bigger);
        if (!bigger) return kvd_value_free(element), false;
        v->u.array.items = bigger;
        v->u.array.cap = want;
    }
    v->u.array.items[v->u.array.count++] = element;
    return true;
}

KVD_EXPORT size_t kvd_value_dict_length(const kvd_value *v) { return v && v->type == KVD_TYPE_DICT ? v->u.dict.count : 0; }

KVD_EXPORT const char *kvd_value_dict_key_at(const kvd_value *v, size_t index, size_t *length) {
    if (!v || v->type != KVD_TYPE_DICT || index >= v->u.dict.count) return NULL;
    if (length) *length = v->u.dict.members[index].key_len;
    return v->u.dict.members[index].key;
}

KVD_EXPORT const kvd_value *kvd_value_dict_value_at(const kvd_value *v, size_t index) {
    return v && v->type == KVD_TYPE_DICT && index < v->u.dict.count ? v->u.dict.members[index].value : NULL;
}

static member *find_member(const kvd_value *v, const char *key, size_t len) {
    for (size_t i = 0; i < v->u.dict.count; i++) {
        member *m = &v->u.dict.members[i];
        if (m->key_len == len && memcmp(m->key, key, len) == 0) return m;
    }
    return NULL;
}

KVD_EXPORT const kvd_value *kvd_value_dict_get(const kvd_value *v, const char *key) {
    if (!v || v->type != KVD_TYPE_DICT || !key) return NULL;
    member *m = find_member(v, key, strlen(key));
    return m ? m->value : NULL;
}

/* Adds a member without looking for the key (the caller knows it is new); takes `key`. */
static bool dict_add(kvd_value *v, char *key, size_t key_len, kvd_value *element) {
    if (v->u.dict.count == v->u.dict.cap) {
        size_t want = v->u.dict.cap ? v->u.dict.cap * 2 : 4;
        member *bigger = realloc(v->u.dict.members, want * sizeof *bigger);
        if (!bigger) return false;
        v->u.dict.members = bigger;
        v->u.dict.cap = want;
    }
    v->u.dict.members[v->u.dict.count++] = (member){key, key_len, element};
    return true;
}

bool kvdi_value_dict_add(kvd_value *dict, const char *key, size_t key_len, kvd_value *element) {
    char *copy = copy_bytes(key, key_len);
    if (!copy || !dict_add(dict, copy, key_len, element)) return free(copy), kvd_value_free(element), false;
    return true;
}

KVD_EXPORT bool kvd_value_dict_set(kvd_value *v, const char *key, kvd_value *element) {
    size_t len = key ? strlen(key) : 0;
    if (!v || v->type != KVD_TYPE_DICT || !key || !element || !kvdi_utf8_valid(key, len)) return kvd_value_free(element), false;
    member *m = find_member(v, key, len);
    if (m) {
        kvd_value_free(m->value);
        m->value = element;
        return true;
    }
    char *copy = copy_bytes(key, len);
    if (!copy || !dict_add(v, copy, len, element)) return free(copy), kvd_value_free(element), false;
    return true;
}

KVD_EXPORT kvd_value *kvd_value_copy(const kvd_value *v) {
    if (!v) return NULL;
    kvd_value *c = make(v->type);
    if (!c) return NULL;
    bool ok = true;
    switch (v->type) {
    case KVD_TYPE_STRING:
        ok = (c->u.blob.bytes = copy_bytes(v->u.blob.bytes, v->u.blob.len)) != NULL;
        c->u.blob.len = v->u.blob.len;
        break;
    case KVD_TYPE_DATA:
        if (v->u.blob.len && (ok = (c->u.blob.bytes = malloc(v->u.blob.len)) != NULL)) memcpy(c->u.blob.bytes, v->u.blob.bytes, v->u.blob.len);
        c->u.blob.len = ok ? v->u.blob.len : 0;
        break;
    case KVD_TYPE_DATE:
        c->u.date = v->u.date;
        c->u.date.text = NULL;
        if (v->u.date.text) ok = (c->u.date.text = copy_bytes(v->u.date.text, strlen(v->u.date.text))) != NULL;
        break;
    case KVD_TYPE_ARRAY:
        for (size_t i = 0; ok && i < v->u.array.count; i++) {
            kvd_value *item = kvd_value_copy(v->u.array.items[i]);
            ok = item && kvd_value_array_append(c, item);
        }
        break;
    case KVD_TYPE_DICT:
        for (size_t i = 0; ok && i < v->u.dict.count; i++) {
            const member *m = &v->u.dict.members[i];
            kvd_value *item = kvd_value_copy(m->value);
            char *key = item ? copy_bytes(m->key, m->key_len) : NULL;
            ok = key && dict_add(c, key, m->key_len, item);
            if (!ok) free(key), kvd_value_free(item);
        }
        break;
    default: c->u = v->u;
    }
    if (!ok) return kvd_value_free(c), NULL;
    return c;
}

KVD_EXPORT bool kvd_value_equal(const kvd_value *a, const kvd_value *b) {
    if (!a || !b) return a == b;
    if (a->type != b->type) return false;
    switch (a->type) {
    case KVD_TYPE_BOOL: return a->u.flag == b->u.flag;
    case KVD_TYPE_INT: return a->u.integer == b->u.integer;
    case KVD_TYPE_DOUBLE: return memcmp(&a->u.real, &b->u.real, sizeof(double)) == 0;
    case KVD_TYPE_STRING:
    case KVD_TYPE_DATA: return a->u.blob.len == b->u.blob.len && (!a->u.blob.len || !memcmp(a->u.blob.bytes, b->u.blob.bytes, a->u.blob.len));
    case KVD_TYPE_DATE: return a->u.date.seconds == b->u.date.seconds && a->u.date.nanoseconds == b->u.date.nanoseconds;
    case KVD_TYPE_ARRAY:
        if (a->u.array.count != b->u.array.count) return false;
        for (size_t i = 0; i < a->u.array.count; i++)
            if (!kvd_value_equal(a->u.array.items[i], b->u.array.items[i])) return false;
        return true;
    case KVD_TYPE_DICT:
        if (a->u.dict.count != b->u.dict.count) return false;
        for (size_t i = 0; i < a->u.dict.count; i++) {
            const member *m = &a->u.dict.members[i];
            const member *n = find_member(b, m->key, m->key_len);
            if (!n || !kvd_value_equal(m->value, n->value)) return false;
        }
        return true;
    }
    return false;
}

/* ---- typed JSON ---- */

static bool has_dollar_key(const kvd_value *v) {
    for (size_t i = 0; i < v->u.dict.count; i++)
        if (v->u.dict.members[i].key_len && v->u.dict.members[i].key[0] == '$') return true;
    return false;
}

/* `level`: the JSON levels of the containers around `v`. */
static bool write_value(json_buffer *b, const kvd_value *v, int level) {
    switch (v->type) {
    case KVD_TYPE_STRING: kvdi_buffer_append_json_string(b, v->u.blob.bytes, v->u.blob.len); return true;
    case KVD_TYPE_BOOL: kvdi_buffer_append_str(b, v->u.flag ? "true" : "false"); return true;
    case KVD_TYPE_INT: kvdi_buffer_append_int(b, v->u.integer); return true;
    case KVD_TYPE_DOUBLE: kvdi_buffer_append_real(b, v->u.real); return true;
    case KVD_TYPE_DATE: {
        if (level + 1 > KVD_VALUE_MAX_DEPTH) return false;
        char text[DATE_TEXT_SIZE];
        const char *shown = v->u.date.text;
        size_t n = shown ? strlen(shown) : kvdi_date_format(text, v->u.date.seconds, v->u.date.nanoseconds);
        kvdi_buffer_append_str(b, "{\"$date\":");
        kvdi_buffer_append_json_string(b, shown ? shown : text, n);
        kvdi_buffer_append_byte(b, '}');
        return true;
    }
    case KVD_TYPE_DATA:
        if (level + 1 > KVD_VALUE_MAX_DEPTH) return false;
        kvdi_buffer_append_str(b, "{\"$data\":\"");
        kvdi_base64_append(b, (const unsigned char *)v->u.blob.bytes, v->u.blob.len);
        kvdi_buffer_append_str(b, "\"}");
        return true;
    case KVD_TYPE_ARRAY:
        if (level + 1 > KVD_VALUE_MAX_DEPTH) return false;
        kvdi_buffer_append_byte(b, '[');
        for (size_t i = 0; i < v->u.array.count; i++) {
            if (i) kvdi_buffer_append_byte(b, ',');
            if (!write_value(b, v->u.array.items[i], level + 1)) return false;
        }
        kvdi_buffer_append_byte(b, ']');
        return true;
    case KVD_TYPE_DICT: {
        int levels = has_dollar_key(v) ? 2 : 1;
        if (level + levels > KVD_VALUE_MAX_DEPTH) return false;
        if (levels == 2) kvdi_buffer_append_str(b, "{\"$dict\":");
        kvdi_buffer_append_byte(b, '{');
        for (size_t i = 0; i < v->u.dict.count; i++) {
            const member *m = &v->u.dict.members[i];
            if (i) kvdi_buffer_append_byte(b, ',');
            kvdi_buffer_append_json_string(b, m->key, m->key_len);
            kvdi_buffer_append_byte(b, ':');
            if (!write_value(b, m->value, level + levels)) return false;
        }
        kvdi_buffer_append_byte(b, '}');
        if (levels == 2) kvdi_buffer_append_byte(b, '}');
        return true;
    }
    }
    return false;
}

bool kvdi_value_write(json_buffer *b, const kvd_value *v) { return write_value(b, v, 0); }

KVD_EXPORT char *kvd_value_to_json(const kvd_value *v, size_t *length) {
    if (!v) return NULL;
    json_buffer b = {0};
    bool ok = write_value(&b, v, 0);
    kvdi_buffer_append_byte(&b, '\0');
    if (!ok || b.failed) return free(b.data), NULL;
    if (length) *length = b.len - 1;
    return b.data;
}

typedef struct reader {
    char *message;
    size_t size;
    kvd_status status;
} reader;

static kvd_value *refuse(reader *r, const char *reason) {
    if (r->status == KVD_OK) {
        r->status = KVD_ERROR_INVALID_VALUE;
        snprintf(r->message, r->size, "%s", reason);
    }
    return NULL;
}

static kvd_value *no_memory(reader *r) {
    if (r->status == KVD_OK) r->status = KVD_ERROR_NO_MEMORY, snprintf(r->message, r->size, "out of memory");
    return NULL;
}

static kvd_value *read_value(reader *r, const json_node *n, int level);

static kvd_value *read_members(reader *r, const json_node *object, int level) {
    kvd_value *dict = make(KVD_TYPE_DICT);
    if (!dict) return no_memory(r);
    for (size_t i = 0; i < object->u.object.count; i++) {
        const json_member *m = &object->u.object.members[i];
        kvd_value *item = read_value(r, m->value, level);
        if (!item) return kvd_value_free(dict), NULL;
        char *key = copy_bytes(m->name, m->name_len);
        if (!key || !dict_add(dict, key, m->name_len, item)) return free(key), kvd_value_free(item), kvd_value_free(dict), no_memory(r);
    }
    return dict;
}

/* `level` counts the object itself (Value.decodeObject). */
static kvd_value *read_object(reader *r, const json_node *n, int level) {
    bool tagged = false;
    for (size_t i = 0; i < n->u.object.count; i++)
        if (n->u.object.members[i].name_len && n->u.object.members[i].name[0] == '$') tagged = true;
    if (!tagged) return read_members(r, n, level);
    if (n->u.object.count != 1)
        return refuse(r, "an object with a key starting with '$' must be exactly one of {\"$date\": ...}, {\"$data\": ...}, {\"$dict\": {...}}");
    const json_member *m = &n->u.object.members[0];
    const json_node *payload = m->value;
    if (!strcmp(m->name, "$date") && m->name_len == 5) {
        if (payload->type != JSON_STRING) return refuse(r, "$date needs a string");
        kvd_value *v = make(KVD_TYPE_DATE);
        if (!v) return no_memory(r);
        if (!kvdi_date_parse(payload->u.string.bytes, payload->u.string.len, &v->u.date.seconds, &v->u.date.nanoseconds)) {
            free(v);
            return refuse(r, "a $date is not an RFC 3339 date-time in the years 0001 to 9999 (like 2026-11-29T17:00:00.250Z)");
        }
        if (!(v->u.date.text = copy_bytes(payload->u.string.bytes, payload->u.string.len))) return free(v), no_memory(r);
        return v;
    }
    if (!strcmp(m->name, "$data") && m->name_len == 5) {
        if (payload->type != JSON_STRING) return refuse(r, "$data needs a string");
        kvd_value *v = make(KVD_TYPE_DATA);
        unsigned char *bytes = malloc(payload->u.string.len / 4 * 3 + 1);
        if (!v || !bytes) return free(v), free(bytes), no_memory(r);
        long n_bytes = kvdi_base64_decode(payload->u.string.bytes, payload->u.string.len, bytes);
        if (n_bytes < 0) return free(v), free(bytes), refuse(r, "$data is not valid base64");
        if (n_bytes == 0) free(bytes), bytes = NULL;
        v->u.blob.bytes = (char *)bytes;
        v->u.blob.len = (size_t)n_bytes;
        return v;
    }
    if (!strcmp(m->name, "$dict") && m->name_len == 5) {
        if (payload->type != JSON_OBJECT) return refuse(r, "$dict needs an object");
        if (level + 1 > KVD_VALUE_MAX_DEPTH) return refuse(r, "nesting deeper than 512 levels (the limit for a value)");
        return read_members(r, payload, level + 1);
    }
    return refuse(r, "unknown tag (a dictionary with '$' keys must be wrapped as {\"$dict\": {...}})");
}

static kvd_value *read_value(reader *r, const json_node *n, int level) {
    kvd_value *v;
    switch (n->type) {
    case JSON_NULL: return refuse(r, "null is not a value (remove the key instead)");
    case JSON_BOOL: return (v = kvd_value_new_bool(n->u.flag)) ? v : no_memory(r);
    case JSON_INT: return (v = kvd_value_new_int(n->u.integer)) ? v : no_memory(r);
    case JSON_REAL: return (v = kvd_value_new_double(n->u.real)) ? v : no_memory(r);
    case JSON_STRING:
        if (!(v = make(KVD_TYPE_STRING)) || !(v->u.blob.bytes = copy_bytes(n->u.string.bytes, n->u.string.len))) return free(v), no_memory(r);
        v->u.blob.len = n->u.string.len;
        return v;
    case JSON_ARRAY:
        if (level + 1 > KVD_VALUE_MAX_DEPTH) return refuse(r, "nesting deeper than 512 levels (the limit for a value)");
        if (!(v = make(KVD_TYPE_ARRAY))) return no_memory(r);
        for (size_t i = 0; i < n->u.array.count; i++) {
            kvd_value *item = read_value(r, n->u.array.items[i], level + 1);
            if (!item) return kvd_value_free(v), NULL;
            if (!kvd_value_array_append(v, item)) return kvd_value_free(v), no_memory(r);
        }
        return v;
    case JSON_OBJECT:
        if (level + 1 > KVD_VALUE_MAX_DEPTH) return refuse(r, "nesting deeper than 512 levels (the limit for a value)");
        return read_object(r, n, level + 1);
    }
    return refuse(r, "unknown JSON node");
}

kvd_status kvdi_value_from_json(const json_node *node, kvd_value **out, char *message, size_t size) {
    reader r = {message, size, KVD_OK};
    kvd_value *v = read_value(&r, node, 0);
    if (!v) return r.status;
    *out = v;
    return KVD_OK;
}

KVD_EXPORT kvd_status kvd_value_from_json(const char *text, size_t length, kvd_value **value, kvd_error *error) {
    if (!text && length) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_value_from_json: text is NULL");
    char message[256];
    json_node *node;
    int parsed = kvdi_json_parse(text ? text : "", length, KVD_VALUE_MAX_DEPTH, &node, message, sizeof message);
    if (parsed == -2) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    if (parsed) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "not JSON: %s", message);
    kvd_value *v = NULL;
    kvd_status status = kvdi_value_from_json(node, &v, message, sizeof message);
    kvdi_json_free(node);
    if (status == KVD_ERROR_INVALID_VALUE) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "not a typed value: %s", message);
    if (status) return kvdi_set_error(error, status, "%s", message);
    if (value) *value = v;
    else kvd_value_free(v);
    return KVD_OK;
}
