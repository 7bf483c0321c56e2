/* changes.c — kvd_changes_from_json: a domain's changes (the JSON array of Watch changes that
 * kvd_watch_all_current_raw_new gives) checked and decoded, on one of two paths.
 *
 * The general path (kvdi_changes_parsed) parses the array (json.c) and decodes each item as a
 * Watch reply's change (kvdi_decode_change). The quick path (kvdi_changes_quick) reads, with no
 * tree, the shape kvd writes for scalar values: objects of a "key" (a plain string), a "value"
 * (a plain string, an integer of at most 18 digits, true, false or null) and a "source" ("user",
 * "system" or "locked"), in any order, with any JSON whitespace; it gives up, keeping nothing, at
 * anything else (an escape, a real, an array, an object, another member, a member twice, bytes
 * that are not JSON), and the general path then reads the array. The quick path must agree with
 * the general one: what it takes, the general path decodes to the same changes (a plain string
 * has no escape, so its bytes are its value). Checked by test_changes (tricky arrays, both paths)
 * and by clib/fuzz/fuzz_current.c on any input. Pure and thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "cursor.h"
#include "watch.h"

/* The changes read so far (one allocation, grown). */
typedef struct {
    kvd_change *items;
    size_t count, cap;
} change_list;

/* A value at the cursor the quick path takes: `*value` NULL for null. */
static bool quick_value(cursor *c, kvd_value **value) {
    const char *bytes;
    size_t len;
    int64_t number;
    bool flag;
    skip_space(c);
    if (c->p >= c->end) return false;
    if (*c->p == '"') return plain_utf8_string(c, &bytes, &len) && (*value = kvdi_value_new_checked_string(bytes, len)) != NULL;
    if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) return small_integer(c, &number) && (*value = kvd_value_new_int(number)) != NULL;
    if (c->end - c->p >= 4 && !memcmp(c->p, "null", 4)) return c->p += 4, *value = NULL, true;
    return literal(c, &flag) && (*value = kvd_value_new_bool(flag)) != NULL;
}

static bool quick_source(cursor *c, kvd_source *source) {
    const char *name;
    size_t len;
    if (!plain_string(c, &name, &len, NULL)) return false;
    if (IS_NAME(name, len, "user")) return *source = KVD_SOURCE_USER, true;
    if (IS_NAME(name, len, "system")) return *source = KVD_SOURCE_SYSTEM, true;
    if (IS_NAME(name, len, "locked")) return *source = KVD_SOURCE_LOCKED, true;
    return false;
}

enum { KEY = 1, VALUE = 2, SOURCE = 4 };

/* The member a change's name stands for; 0 for another. */
static unsigned member_kind(const char *name, size_t len) {
    if (IS_NAME(name, len, "key")) return KEY;
    if (IS_NAME(name, len, "value")) return VALUE;
    return IS_NAME(name, len, "source") ? SOURCE : 0;
}

/* One change object at the cursor, appended to `out`; false to give up (nothing appended). */
static bool quick_change(cursor *c, change_list *out) {
    kvd_value *value = NULL;
    kvd_source source = KVD_SOURCE_USER;
    const char *key = NULL, *name;
    size_t key_len = 0, name_len;
    unsigned seen = 0, which;
    bool ok = take(c, '{');
    while (ok) {
        which = member_name(c, &name, &name_len) ? member_kind(name, name_len) : 0;
        ok = which && !(seen & which);
        seen |= which;
        if (ok && which == KEY) ok = plain_utf8_string(c, &key, &key_len);
        else if (ok && which == VALUE) ok = quick_value(c, &value);
        else if (ok) ok = quick_source(c, &source);
        if (!ok || !take(c, ',')) break;
    }
    ok = ok && key && take(c, '}');
    if (ok && out->count == out->cap) {
        size_t want = out->cap ? 2 * out->cap : 8;
        kvd_change *bigger = realloc(out->items, want * sizeof *bigger);
        ok = bigger != NULL;
        if (ok) out->items = bigger, out->cap = want;
    }
    char *copy = ok ? malloc(key_len + 1) : NULL;
    if (!copy) return kvd_value_free(value), false;
    memcpy(copy, key, key_len);
    copy[key_len] = '\0';
    out->items[out->count++] = (kvd_change){copy, value, source};
    return true;
}

bool kvdi_changes_quick(const char *json, size_t len, kvd_change **changes, size_t *count) {
    cursor c = {json, json + len};
    change_list list = {0};
    bool ok = take(&c, '[');
    if (ok && !take(&c, ']')) {
        while ((ok = quick_change(&c, &list)) && take(&c, ',')) {
        }
        ok = ok && take(&c, ']');
    }
    skip_space(&c);
    if (!ok || c.p != c.end || !(list.items || (list.items = malloc(sizeof *list.items)))) {
        kvd_changes_free(list.items, list.count);
        return false;
    }
    *changes = list.items;
    *count = list.count;
    return true;
}

kvd_status kvdi_changes_parsed(const char *json, size_t len, kvd_change **changes, size_t *count, kvd_error *error) {
    char message[256];
    json_node *root = NULL;
    int parsed = kvdi_json_parse(json, len, KVD_MESSAGE_DEPTH, &root, message, sizeof message);
    if (parsed == -2) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    if (parsed) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: %s", message);
    kvd_status status = root->type == JSON_ARRAY ? KVD_OK : kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: changes that are not an array");
    size_t n = status ? 0 : root->u.array.count;
    kvd_change *list = calloc(n ? n : 1, sizeof *list);
    if (!status && !list) status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    size_t filled = 0;
    for (; !status && filled < n; filled++) {
        status = kvdi_decode_change(root->u.array.items[filled], &list[filled], error);
        char *key = status ? NULL : strdup(list[filled].key);
        if (!status && !key) status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
        list[filled].key = key;
    }
    kvdi_json_free(root);
    if (status) return kvd_changes_free(list, filled), status;
    *changes = list;
    *count = n;
    return KVD_OK;
}

KVD_EXPORT kvd_status kvd_changes_from_json(const char *json, size_t len, kvd_change **changes, size_t *count, kvd_error *error) {
    if (!json || !changes || !count) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_changes_from_json: json, changes or count is NULL");
    *changes = NULL;
    *count = 0;
    if (kvdi_changes_quick(json, len, changes, count)) return KVD_OK;
    return kvdi_changes_parsed(json, len, changes, count, error);
}

KVD_EXPORT void kvd_changes_free(kvd_change *changes, size_t count) {
    if (!changes) return;
    for (size_t i = 0; i < count; i++) {
        free((char *)changes[i].key);
        kvd_value_free((kvd_value *)changes[i].value);
    }
    free(changes);
}
