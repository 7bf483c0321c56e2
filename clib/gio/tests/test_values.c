/* test_values.c — every GVariant round-trips exactly through its kvd form: random types and
 * values (every basic type at its edges, arrays, dictionaries, maybes, tuples, variants, nested),
 * each converted, sent through typed JSON as kvd stores it, read back as its type and compared
 * bit for bit (g_variant_equal). Run by run.sh before the end-to-end part. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../giokvd.h"

static GRand *rand_;

static int pick(int n) { return g_rand_int_range(rand_, 0, n); }

static GString *random_type(int depth) {
    static const char basic[] = "bynqiuxthdsog";
    GString *type = g_string_new(NULL);
    int kind = depth > 3 ? 0 : pick(10);
    if (kind < 4) g_string_append_c(type, basic[pick((int)strlen(basic))]);
    else if (kind == 4) g_string_append_c(type, 'v');
    else if (kind == 5 || kind == 6) {
        GString *inner = random_type(depth + 1);
        g_string_append_printf(type, "a%s", inner->str);
        g_string_free(inner, TRUE);
    } else if (kind == 7) {
        GString *inner = random_type(depth + 1);
        g_string_append_printf(type, "a{%c%s}", pick(3) ? 's' : basic[pick(13)], inner->str);
        g_string_free(inner, TRUE);
    } else if (kind == 8) {
        GString *inner = random_type(depth + 1);
        g_string_append_printf(type, "m%s", inner->str);
        g_string_free(inner, TRUE);
    } else {
        g_string_append_c(type, '(');
        for (int i = pick(4); i > 0; i--) {
            GString *inner = random_type(depth + 1);
            g_string_append(type, inner->str);
            g_string_free(inner, TRUE);
        }
        g_string_append_c(type, ')');
    }
    return type;
}

static const char *random_string(void) {
    static const char *strings[] = {"", "a", "b", "$x", "gvariant", "text", "caf\xc3\xa9", "it's \"q\"", "z\tz", "a/b"};
    return strings[pick(10)];
}

static gint64 edge(gint64 low, guint64 high) {
    switch (pick(4)) {
    case 0: return low;
    case 1: return (gint64)high;
    case 2: return 0;
    default: return low + (gint64)(g_rand_double(rand_) * ((double)high - (double)low));
    }
}

static GVariant *random_value(const GVariantType *type, int depth) {
    const char *t = g_variant_type_peek_string(type);
    switch (t[0]) {
    case 'b': return g_variant_new_boolean(pick(2));
    case 'y': return g_variant_new_byte((guchar)edge(0, 255));
    case 'n': return g_variant_new_int16((gint16)edge(G_MININT16, G_MAXINT16));
    case 'q': return g_variant_new_uint16((guint16)edge(0, G_MAXUINT16));
    case 'i': return g_variant_new_int32((gint32)edge(G_MININT32, G_MAXINT32));
    case 'u': return g_variant_new_uint32((guint32)edge(0, G_MAXUINT32));
    case 'x': return g_variant_new_int64(edge(G_MININT64, G_MAXINT64));
    case 't': return g_variant_new_uint64(pick(3) ? (guint64)edge(0, G_MAXINT64) : G_MAXUINT64 - (guint64)pick(5));
    case 'h': return g_variant_new_handle((gint32)edge(G_MININT32, G_MAXINT32));
    case 'd': {
        static const double doubles[] = {0.0, -0.0, 1.0, 0.1, -1e308, 5e-324, 1.0 / 3.0, 1e15, INFINITY, -INFINITY, NAN};
        return g_variant_new_double(pick(3) ? doubles[pick(11)] : g_rand_double_range(rand_, -1e6, 1e6));
    }
    case 's': return g_variant_new_string(random_string());
    case 'o': return g_variant_new_object_path(pick(2) ? "/" : "/io/kvd/x_1");
    case 'g': return g_variant_new_signature(pick(2) ? "" : "a{sv}(ii)");
    case 'v': {
        GString *inner = random_type(depth + 1);
        GVariantType *inner_type = g_variant_type_new(inner->str);
        GVariant *value = g_variant_new_variant(random_value(inner_type, depth + 1));
        g_variant_type_free(inner_type);
        g_string_free(inner, TRUE);
        return value;
    }
    case 'm': {
        if (pick(2)) return g_variant_new_maybe(g_variant_type_element(type), NULL);
        return g_variant_new_maybe(NULL, random_value(g_variant_type_element(type), depth + 1));
    }
    case 'a': {
        GVariantBuilder builder;
        g_variant_builder_init(&builder, type);
        const GVariantType *element = g_variant_type_element(type);
        int count = depth > 4 ? 0 : pick(4);
        for (int i = 0; i < count; i++) {
            if (g_variant_type_is_dict_entry(element))
                g_variant_builder_add_value(&builder, g_variant_new_dict_entry(random_value(g_variant_type_key(element), depth + 1),
                                                                                random_value(g_variant_type_value(element), depth + 1)));
            else
                g_variant_builder_add_value(&builder, random_value(element, depth + 1));
        }
        return g_variant_builder_end(&builder);
    }
    case '(': {
        GVariantBuilder builder;
        g_variant_builder_init(&builder, type);
        for (const GVariantType *item = g_variant_type_first(type); item; item = g_variant_type_next(item))
            g_variant_builder_add_value(&builder, random_value(item, depth + 1));
        return g_variant_builder_end(&builder);
    }
    }
    g_error("no generator for %s", t);
}

int main(void) {
    rand_ = g_rand_new_with_seed(28);
    int failures = 0, natural = 0;
    int rounds = g_getenv("GIOKVD_ROUNDS") ? atoi(g_getenv("GIOKVD_ROUNDS")) : 20000;
    for (int round = 0; round < rounds && failures < 5; round++) {
        GString *type_string = random_type(0);
        GVariantType *type = g_variant_type_new(type_string->str);
        GVariant *value = g_variant_ref_sink(random_value(type, 0));
        kvd_value *stored = giokvd_to_kvd(value);
        char *json = kvd_value_to_json(stored, NULL);
        kvd_value *reread = NULL;
        kvd_error error = KVD_ERROR_INIT;
        GVariant *back = NULL;
        if (json && kvd_value_from_json(json, strlen(json), &reread, &error) == KVD_OK) back = giokvd_from_kvd(reread, type);
        if (json && !strstr(json, "\"gvariant\"")) natural++;
        if (back == NULL || !g_variant_equal(back, value)) {
            char *text = g_variant_print(value, TRUE);
            char *got = back ? g_variant_print(back, TRUE) : g_strdup("(nothing)");
            printf("FAIL %s %s -> %s -> %s\n", type_string->str, text, json ? json : "(no json)", got);
            g_free(text);
            g_free(got);
            failures++;
        }
        /* With no schema (kvd-dconf-import of a key no schema has, then --export): the stored
         * form keeps the type, and reads back as the value. */
        kvd_value *kept = giokvd_to_kvd_keeping_type(value);
        char *guessed = kept ? giokvd_guess_type(kept) : NULL;
        GVariant *again = NULL;
        if (guessed && strcmp(guessed, type_string->str) == 0) again = giokvd_from_kvd(kept, type);
        if (again == NULL || !g_variant_equal(again, value)) {
            char *text = g_variant_print(value, TRUE);
            printf("FAIL without a schema: %s %s came back as type %s\n", type_string->str, text, guessed ? guessed : "(none)");
            g_free(text);
            failures++;
        }
        if (again) g_variant_unref(again);
        g_free(guessed);
        kvd_value_free(kept);
        kvd_error_clear(&error);
        if (back) g_variant_unref(back);
        kvd_value_free(reread);
        free(json);
        kvd_value_free(stored);
        g_variant_unref(value);
        g_variant_type_free(type);
        g_string_free(type_string, TRUE);
    }
    g_rand_free(rand_);
    if (failures) return 1;
    printf("ok every GVariant round-trips: %d random values of random types (%d in natural kvd form), and without a schema keeps its type\n", rounds, natural);
    return 0;
}
