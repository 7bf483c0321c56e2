/* convert.c — GVariant values to kvd values and back (the rule is in giokvd.h). */
#include "giokvd.h"

#include <math.h>
#include <string.h>

static kvd_value *natural(GVariant *value);

/* The type a kvd value reads back as inside a variant; NULL for a date. Owned by the caller. */
static char *inferred_type(const kvd_value *value) {
    switch (kvd_value_type(value)) {
    case KVD_TYPE_BOOL: return g_strdup("b");
    case KVD_TYPE_INT: return g_strdup("x");
    case KVD_TYPE_DOUBLE: return g_strdup("d");
    case KVD_TYPE_STRING: return g_strdup("s");
    case KVD_TYPE_DATA: return g_strdup("ay");
    case KVD_TYPE_DICT: return g_strdup("a{sv}");
    case KVD_TYPE_DATE: return NULL;
    case KVD_TYPE_ARRAY: {
        size_t count = kvd_value_array_length(value);
        if (count == 0) return g_strdup("as");
        kvd_type first = kvd_value_type(kvd_value_array_get(value, 0));
        if (first != KVD_TYPE_BOOL && first != KVD_TYPE_INT && first != KVD_TYPE_DOUBLE && first != KVD_TYPE_STRING)
            return g_strdup("av");
        for (size_t i = 1; i < count; i++)
            if (kvd_value_type(kvd_value_array_get(value, i)) != first) return g_strdup("av");
        char *element = inferred_type(kvd_value_array_get(value, 0));
        char *type = g_strconcat("a", element, NULL);
        g_free(element);
        return type;
    }
    }
    return NULL;
}

/* Whether a dictionary is the tagged form {"gvariant": TYPE, "text": TEXT} or {"gvariant": TYPE,
 * "data": BYTES}. */
static gboolean is_tagged(const kvd_value *value) {
    if (kvd_value_type(value) != KVD_TYPE_DICT || kvd_value_dict_length(value) != 2) return FALSE;
    const kvd_value *type = kvd_value_dict_get(value, "gvariant");
    const kvd_value *text = kvd_value_dict_get(value, "text");
    const kvd_value *data = kvd_value_dict_get(value, "data");
    gboolean has_text = text && kvd_value_type(text) == KVD_TYPE_STRING;
    gboolean has_data = data && kvd_value_type(data) == KVD_TYPE_DATA;
    if (type == NULL || !(has_text || has_data)) return FALSE;
    const char *type_string = kvd_value_get_string(type, NULL);
    return type_string != NULL && g_variant_type_string_is_valid(type_string);
}

static kvd_value *natural_array(GVariant *value) {
    const GVariantType *element = g_variant_type_element(g_variant_get_type(value));
    size_t count = g_variant_n_children(value);
    if (g_variant_type_equal(element, G_VARIANT_TYPE_BYTE)) {
        gsize length = 0;
        const void *bytes = g_variant_get_fixed_array(value, &length, 1);
        return kvd_value_new_data(bytes, length);
    }
    if (g_variant_type_is_dict_entry(element)) {
        if (!g_variant_type_equal(g_variant_type_key(element), G_VARIANT_TYPE_STRING)) return NULL;
        kvd_value *dict = kvd_value_new_dict();
        const char *previous = NULL;
        for (size_t i = 0; i < count && dict; i++) {
            GVariant *entry = g_variant_get_child_value(value, i);
            GVariant *key = g_variant_get_child_value(entry, 0);
            GVariant *item = g_variant_get_child_value(entry, 1);
            const char *name = g_variant_get_string(key, NULL);
            kvd_value *converted = NULL;
            /* Only strictly ascending keys: kvd keeps no order, a read sorts them. */
            if (previous == NULL || strcmp(previous, name) < 0) converted = natural(item);
            previous = name;
            if (converted == NULL || !kvd_value_dict_set(dict, name, converted)) {
                kvd_value_free(dict);
                dict = NULL;
            }
            g_variant_unref(item);
            g_variant_unref(key);
            g_variant_unref(entry);
        }
        if (dict && is_tagged(dict)) {
            kvd_value_free(dict);
            return NULL;
        }
        return dict;
    }
    kvd_value *array = kvd_value_new_array();
    for (size_t i = 0; i < count && array; i++) {
        GVariant *item = g_variant_get_child_value(value, i);
        kvd_value *converted = natural(item);
        g_variant_unref(item);
        if (converted == NULL || !kvd_value_array_append(array, converted)) {
            kvd_value_free(array);
            array = NULL;
        }
    }
    return array;
}

/* The natural kvd form, or NULL when there is none. */
static kvd_value *natural(GVariant *value) {
    switch (g_variant_classify(value)) {
    case G_VARIANT_CLASS_BOOLEAN: return kvd_value_new_bool(g_variant_get_boolean(value));
    case G_VARIANT_CLASS_BYTE: return kvd_value_new_int(g_variant_get_byte(value));
    case G_VARIANT_CLASS_INT16: return kvd_value_new_int(g_variant_get_int16(value));
    case G_VARIANT_CLASS_UINT16: return kvd_value_new_int(g_variant_get_uint16(value));
    case G_VARIANT_CLASS_INT32: return kvd_value_new_int(g_variant_get_int32(value));
    case G_VARIANT_CLASS_UINT32: return kvd_value_new_int(g_variant_get_uint32(value));
    case G_VARIANT_CLASS_INT64: return kvd_value_new_int(g_variant_get_int64(value));
    case G_VARIANT_CLASS_UINT64: {
        guint64 number = g_variant_get_uint64(value);
        return number <= (guint64)G_MAXINT64 ? kvd_value_new_int((int64_t)number) : NULL;
    }
    case G_VARIANT_CLASS_DOUBLE: {
        double number = g_variant_get_double(value);
        return isfinite(number) ? kvd_value_new_double(number) : NULL;
    }
    case G_VARIANT_CLASS_STRING:
    case G_VARIANT_CLASS_OBJECT_PATH:
    case G_VARIANT_CLASS_SIGNATURE: return kvd_value_new_string(g_variant_get_string(value, NULL));
    case G_VARIANT_CLASS_VARIANT: {
        GVariant *inner = g_variant_get_variant(value);
        kvd_value *converted = natural(inner);
        char *type = converted ? inferred_type(converted) : NULL;
        if (type == NULL || strcmp(type, g_variant_get_type_string(inner)) != 0) {
            kvd_value_free(converted);
            converted = NULL;
        }
        g_free(type);
        g_variant_unref(inner);
        return converted;
    }
    case G_VARIANT_CLASS_ARRAY: return natural_array(value);
    default: return NULL; /* handles, maybes, tuples */
    }
}

static kvd_value *tagged_form(GVariant *value);

kvd_value *giokvd_to_kvd(GVariant *value) {
    kvd_value *converted = natural(value);
    if (converted) return converted;
    return tagged_form(value);
}

kvd_value *giokvd_to_kvd_keeping_type(GVariant *value) {
    kvd_value *converted = natural(value);
    if (converted == NULL) return tagged_form(value);
    char *guessed = giokvd_guess_type(converted);
    gboolean same = guessed && strcmp(guessed, g_variant_get_type_string(value)) == 0;
    g_free(guessed);
    if (same) return converted;
    kvd_value_free(converted);
    return tagged_form(value);
}

/* {"gvariant": TYPE, "text": ...} or {"gvariant": TYPE, "data": ...} (giokvd.h). */
static kvd_value *tagged_form(GVariant *value) {
    char *text = g_variant_print(value, TRUE);
    kvd_value *tagged = kvd_value_new_dict();
    if (tagged) kvd_value_dict_set(tagged, "gvariant", kvd_value_new_string(g_variant_get_type_string(value)));
    /* The text, unless GLib's parser does not give the same value back (it refuses subnormal
     * doubles, 5e-324): then GVariant's own serialization, normal form, little-endian. */
    GVariant *parsed = g_variant_parse(g_variant_get_type(value), text, NULL, NULL, NULL);
    if (parsed && g_variant_equal(parsed, value)) {
        if (tagged) kvd_value_dict_set(tagged, "text", kvd_value_new_string(text));
    } else {
        GVariant *normal = g_variant_get_normal_form(value);
        if (G_BYTE_ORDER == G_BIG_ENDIAN) {
            GVariant *swapped = g_variant_byteswap(normal);
            g_variant_unref(normal);
            normal = swapped;
        }
        if (tagged) kvd_value_dict_set(tagged, "data", kvd_value_new_data(g_variant_get_data(normal), g_variant_get_size(normal)));
        g_variant_unref(normal);
    }
    if (parsed) g_variant_unref(parsed);
    g_free(text);
    return tagged;
}

static GVariant *integer(const kvd_value *value, int64_t low, uint64_t high) {
    if (kvd_value_type(value) != KVD_TYPE_INT) return NULL;
    int64_t number = kvd_value_get_int(value);
    if (number < low || (number > 0 && (uint64_t)number > high)) return NULL;
    return g_variant_new_int64(number); /* the caller narrows */
}

static int compare_keys(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static GVariant *read_as(const kvd_value *value, const GVariantType *type);

static GVariant *read_dict(const kvd_value *value, const GVariantType *type) {
    const GVariantType *entry = g_variant_type_element(type);
    if (kvd_value_type(value) != KVD_TYPE_DICT || !g_variant_type_equal(g_variant_type_key(entry), G_VARIANT_TYPE_STRING))
        return NULL;
    size_t count = kvd_value_dict_length(value);
    const char **keys = g_new(const char *, count ? count : 1);
    for (size_t i = 0; i < count; i++) {
        size_t length = 0;
        keys[i] = kvd_value_dict_key_at(value, i, &length);
        if (strlen(keys[i]) != length) { /* a NUL inside: no GVariant string */
            g_free(keys);
            return NULL;
        }
    }
    qsort(keys, count, sizeof *keys, compare_keys);
    GVariantBuilder builder;
    g_variant_builder_init(&builder, type);
    for (size_t i = 0; i < count; i++) {
        GVariant *item = read_as(kvd_value_dict_get(value, keys[i]), g_variant_type_value(entry));
        if (item == NULL) {
            g_variant_builder_clear(&builder);
            g_free(keys);
            return NULL;
        }
        g_variant_builder_add_value(&builder, g_variant_new_dict_entry(g_variant_new_string(keys[i]), item));
    }
    g_free(keys);
    return g_variant_builder_end(&builder);
}

static GVariant *read_array(const kvd_value *value, const GVariantType *type) {
    const GVariantType *element = g_variant_type_element(type);
    if (g_variant_type_is_dict_entry(element)) return read_dict(value, type);
    if (g_variant_type_equal(element, G_VARIANT_TYPE_BYTE) && kvd_value_type(value) == KVD_TYPE_DATA) {
        size_t length = 0;
        const void *bytes = kvd_value_get_data(value, &length);
        return g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, bytes ? bytes : "", length, 1);
    }
    if (kvd_value_type(value) != KVD_TYPE_ARRAY) return NULL;
    GVariantBuilder builder;
    g_variant_builder_init(&builder, type);
    for (size_t i = 0; i < kvd_value_array_length(value); i++) {
        GVariant *item = read_as(kvd_value_array_get(value, i), element);
        if (item == NULL) {
            g_variant_builder_clear(&builder);
            return NULL;
        }
        g_variant_builder_add_value(&builder, item);
    }
    return g_variant_builder_end(&builder);
}

/* The same value as a floating reference, taking `owned` (a full reference; NULL is fine). */
static GVariant *floating(GVariant *owned) {
    if (owned == NULL) return NULL;
    GBytes *bytes = g_variant_get_data_as_bytes(owned);
    GVariant *result = g_variant_new_from_bytes(g_variant_get_type(owned), bytes, TRUE);
    g_bytes_unref(bytes);
    g_variant_unref(owned);
    return result;
}

/* A floating GVariant of `type`, or NULL. */
static GVariant *read_as(const kvd_value *value, const GVariantType *type) {
    if (is_tagged(value)) {
        const char *type_string = kvd_value_get_string(kvd_value_dict_get(value, "gvariant"), NULL);
        char *wanted = g_variant_type_dup_string(type);
        gboolean same = strcmp(wanted, type_string) == 0;
        g_free(wanted);
        if (!same) return NULL;
        const kvd_value *text = kvd_value_dict_get(value, "text");
        if (text && kvd_value_type(text) == KVD_TYPE_STRING)
            return floating(g_variant_parse(type, kvd_value_get_string(text, NULL), NULL, NULL, NULL));
        size_t length = 0;
        const void *bytes = kvd_value_get_data(kvd_value_dict_get(value, "data"), &length);
        GBytes *data = g_bytes_new(bytes, length);
        GVariant *stored = g_variant_ref_sink(g_variant_new_from_bytes(type, data, FALSE));
        g_bytes_unref(data);
        if (G_BYTE_ORDER == G_BIG_ENDIAN) {
            GVariant *swapped = g_variant_byteswap(stored);
            g_variant_unref(stored);
            stored = swapped;
        }
        /* Bytes from elsewhere: only a value in normal form is taken. */
        if (g_variant_is_normal_form(stored)) return floating(stored);
        g_variant_unref(stored);
        return NULL;
    }
    GVariant *number;
    switch (g_variant_type_peek_string(type)[0]) {
    case 'b': return kvd_value_type(value) == KVD_TYPE_BOOL ? g_variant_new_boolean(kvd_value_get_bool(value)) : NULL;
#define NARROW(letter, low, high, make, ctype)                                                                                   \
    case letter:                                                                                                               \
        number = integer(value, low, high);                                                                             \
        if (number == NULL) return NULL;                                                                                       \
        {                                                                                                                      \
            GVariant *narrow = make((ctype)g_variant_get_int64(number));                                                      \
            g_variant_unref(g_variant_ref_sink(number));                                                                       \
            return narrow;                                                                                                     \
        }
        NARROW('y', 0, 255, g_variant_new_byte, guchar)
        NARROW('n', G_MININT16, G_MAXINT16, g_variant_new_int16, gint16)
        NARROW('q', 0, G_MAXUINT16, g_variant_new_uint16, guint16)
        NARROW('i', G_MININT32, G_MAXINT32, g_variant_new_int32, gint32)
        NARROW('u', 0, G_MAXUINT32, g_variant_new_uint32, guint32)
        NARROW('x', G_MININT64, G_MAXINT64, g_variant_new_int64, gint64)
        NARROW('t', 0, G_MAXINT64, g_variant_new_uint64, guint64)
#undef NARROW
    case 'd':
        if (kvd_value_type(value) == KVD_TYPE_DOUBLE) return g_variant_new_double(kvd_value_get_double(value));
        if (kvd_value_type(value) == KVD_TYPE_INT) return g_variant_new_double((double)kvd_value_get_int(value));
        return NULL;
    case 's':
    case 'o':
    case 'g': {
        size_t length = 0;
        const char *text = kvd_value_get_string(value, &length);
        if (text == NULL || strlen(text) != length) return NULL;
        char letter = g_variant_type_peek_string(type)[0];
        if (letter == 's') return g_variant_new_string(text);
        if (letter == 'o') return g_variant_is_object_path(text) ? g_variant_new_object_path(text) : NULL;
        return g_variant_is_signature(text) ? g_variant_new_signature(text) : NULL;
    }
    case 'v': {
        char *inferred = inferred_type(value);
        if (inferred == NULL) return NULL;
        GVariantType *inner_type = g_variant_type_new(inferred);
        GVariant *inner = read_as(value, inner_type);
        g_variant_type_free(inner_type);
        g_free(inferred);
        return inner ? g_variant_new_variant(inner) : NULL;
    }
    case 'a': return read_array(value, type);
    default: return NULL;
    }
}

char *giokvd_guess_type(const kvd_value *value) {
    if (is_tagged(value)) return g_strdup(kvd_value_get_string(kvd_value_dict_get(value, "gvariant"), NULL));
    return inferred_type(value);
}

GVariant *giokvd_from_kvd(const kvd_value *value, const GVariantType *type) {
    GVariant *result = read_as(value, type);
    return result ? g_variant_ref_sink(result) : NULL;
}
