/* export.c — kvd's values as a `dconf load` keyfile (dconf-tool.h). */
#include "dconf-tool.h"

#include <stdio.h>
#include <string.h>

#include "../gio/giokvd.h"

/* One folder of the export: its keys' names and values (borrowed from the listing). */
typedef struct {
    GPtrArray *names;
    GPtrArray *values;
} Folder;

static void folder_free(gpointer data) {
    Folder *folder = data;
    g_ptr_array_unref(folder->names);
    g_ptr_array_unref(folder->values);
    g_free(folder);
}

/* Files the user's own keys of `values` (not those `sources` names: the system layer's) under
 * their folders, when their path is under `base`. */
static void add_domain(GHashTable *folders, const char *domain, const kvd_value *values, const kvd_value *sources,
                       const char *base) {
    for (size_t i = 0; i < kvd_value_dict_length(values); i++) {
        const char *key = kvd_value_dict_key_at(values, i, NULL);
        if (kvd_value_dict_get(sources, key)) continue; /* the system layer's */
        char *path = giokvd_unmap_key(domain, key);
        if (path == NULL || !g_str_has_prefix(path, base) || g_str_has_prefix(path, MOVE_PATH)) {
            g_free(path);
            continue;
        }
        char *slash = strrchr(path, '/');
        char *name = g_strdup(slash + 1);
        slash[1] = '\0';
        Folder *folder = g_hash_table_lookup(folders, path);
        if (folder == NULL) {
            folder = g_new0(Folder, 1);
            folder->names = g_ptr_array_new_with_free_func(g_free);
            folder->values = g_ptr_array_new();
            g_hash_table_insert(folders, g_strdup(path), folder);
        }
        g_ptr_array_add(folder->names, name);
        g_ptr_array_add(folder->values, (gpointer)kvd_value_dict_value_at(values, i));
        g_free(path);
    }
}

/* The value as a GVariant of its schema's type, else of the type it carries; NULL for a date. */
static GVariant *as_variant(const kvd_value *value, GSettingsSchema *schema, const char *name) {
    GVariant *variant = NULL;
    if (schema && g_settings_schema_has_key(schema, name)) {
        GSettingsSchemaKey *key = g_settings_schema_get_key(schema, name);
        variant = giokvd_from_kvd(value, g_settings_schema_key_get_value_type(key));
        g_settings_schema_key_unref(key);
    }
    if (variant == NULL) {
        char *type = giokvd_guess_type(value);
        if (type && g_variant_type_string_is_valid(type)) {
            GVariantType *guessed = g_variant_type_new(type);
            variant = giokvd_from_kvd(value, guessed);
            g_variant_type_free(guessed);
        }
        g_free(type);
    }
    return variant;
}

/* dconf dump's group for the folder `dir` under `base`: without its slashes at the ends, "/" for
 * `base` itself. */
static char *group_of(const char *dir, const char *base) {
    char *group = g_strndup(dir + strlen(base), strlen(dir) - strlen(base));
    if (*group == '\0') {
        g_free(group);
        return g_strdup("/");
    }
    group[strlen(group) - 1] = '\0';
    return group;
}

static void write_folders(GKeyFile *out, GHashTable *folders, const char *base, GKeyFile *known, GHashTable *left_out,
                          size_t *exported, size_t *skipped) {
    Schemas schemas = schemas_load();
    GHashTableIter iter;
    gpointer dir, data;
    g_hash_table_iter_init(&iter, folders);
    while (g_hash_table_iter_next(&iter, &dir, &data)) {
        Folder *folder = data;
        GSettingsSchema *schema = schemas_for(&schemas, dir, folder->names);
        char *group = group_of(dir, base);
        for (guint i = 0; i < folder->names->len; i++) {
            const char *name = folder->names->pdata[i];
            gboolean described = schema && g_settings_schema_has_key(schema, name);
            if (known && !described && !g_key_file_has_key(known, group, name, NULL)) continue;
            GVariant *value = as_variant(folder->values->pdata[i], schema, name);
            if (value == NULL) { /* a date: GVariant has no type for it */
                fprintf(stderr, TOOL_NAME ": %s%s: a value dconf cannot hold; left out\n", (char *)dir, name);
                if (left_out) g_hash_table_add(left_out, g_strconcat(dir, name, NULL));
                (*skipped)++;
                continue;
            }
            char *text = g_variant_print(value, TRUE);
            g_key_file_set_value(out, group, name, text);
            g_free(text);
            g_variant_unref(value);
            (*exported)++;
        }
        g_free(group);
        if (schema) g_settings_schema_unref(schema);
    }
    schemas_clear(&schemas);
}

GKeyFile *dconf_export(kvd_client *client, const char *base, GKeyFile *known, GHashTable *left_out, size_t *exported,
                       size_t *skipped) {
    kvd_error error = KVD_ERROR_INIT;
    char **domains = NULL;
    size_t count = 0;
    if (kvd_domains(client, &domains, &count, &error) != KVD_OK) {
        fprintf(stderr, TOOL_NAME ": %s\n", error.message);
        kvd_error_clear(&error);
        return NULL;
    }
    GPtrArray *listings = g_ptr_array_new_with_free_func((GDestroyNotify)kvd_value_free);
    GHashTable *folders = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, folder_free);
    gboolean ok = TRUE;
    for (size_t d = 0; ok && d < count; d++) {
        kvd_value *values = NULL, *sources = NULL;
        if (kvd_list(client, domains[d], &values, NULL, &sources, &error) != KVD_OK) {
            ok = error.status == KVD_ERROR_NOT_FOUND; /* removed meanwhile */
            if (!ok) fprintf(stderr, TOOL_NAME ": domain %s: %s\n", domains[d], error.message);
            kvd_error_clear(&error);
            continue;
        }
        g_ptr_array_add(listings, values);
        add_domain(folders, domains[d], values, sources, base);
        kvd_value_free(sources);
    }
    GKeyFile *out = NULL;
    *exported = *skipped = 0;
    if (ok) {
        out = g_key_file_new();
        write_folders(out, folders, base, known, left_out, exported, skipped);
    }
    g_hash_table_unref(folders);
    g_ptr_array_unref(listings);
    kvd_strv_free(domains);
    return out;
}
