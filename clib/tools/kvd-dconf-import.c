/* kvd-dconf-import — moves dconf settings into kvd: `dconf dump / | kvd-dconf-import [PATH]`, and
 * back: `kvd-dconf-import --export [PATH] | dconf load PATH`.
 *
 * Reads the keyfile `dconf dump PATH` prints (default PATH "/") from stdin and writes every key
 * into kvd under the GSettings backend's mapping (docs/gsettings.md), with the
 * same value forms, so that GSETTINGS_BACKEND=kvd apps read exactly what they read from dconf.
 * Each dconf folder is one atomic Apply per kvd domain. A value dconf printed that GVariant cannot
 * parse is named on stderr and the whole import stops before writing anything (exit 1).
 *
 * --export prints, in the same keyfile form, every key of the user's own (not the system layer's)
 * of every kvd domain the mapping makes whose path is under PATH, each with the type the installed
 * schema at that path gives it; for a path no schema has, the only relocatable schema whose keys
 * hold all of that folder's, else the type the stored value carries (a tagged value's own; an
 * integer as int64). Nothing in kvd changes.
 */
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

#include "../gio/giokvd.h"

typedef struct {
    GPtrArray *keys;   /* kvd keys (owned) */
    GPtrArray *values; /* kvd_value* (owned) */
} Batch;

static void batch_free(gpointer data) {
    Batch *batch = data;
    g_ptr_array_unref(batch->keys);
    g_ptr_array_unref(batch->values);
    g_free(batch);
}

/* The installed schemas with a path: path ("/a/b/") -> GSettingsSchema*. */
static GHashTable *fixed_schemas(void) {
    GHashTable *fixed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_settings_schema_unref);
    GSettingsSchemaSource *source = g_settings_schema_source_get_default();
    char **ids = NULL;
    if (source) g_settings_schema_source_list_schemas(source, TRUE, &ids, NULL);
    for (char **id = ids; id && *id; id++) {
        GSettingsSchema *schema = g_settings_schema_source_lookup(source, *id, TRUE);
        if (schema && g_settings_schema_get_path(schema))
            g_hash_table_insert(fixed, g_strdup(g_settings_schema_get_path(schema)), schema);
        else if (schema) g_settings_schema_unref(schema);
    }
    g_strfreev(ids);
    return fixed;
}

/* The ids of the installed relocatable schemas. */
static char **relocatable_schemas(void) {
    GSettingsSchemaSource *source = g_settings_schema_source_get_default();
    char **ids = NULL;
    if (source) g_settings_schema_source_list_schemas(source, TRUE, NULL, &ids);
    return ids;
}

/* The schema of the folder `dir` ("/a/b/"): the installed one at that path, else the only
 * relocatable one that has every key of `names` (a NULL-terminated list); NULL when none is. */
static GSettingsSchema *schema_for(GHashTable *fixed, char **relocatable, const char *dir, GPtrArray *names) {
    GSettingsSchema *schema = g_hash_table_lookup(fixed, dir);
    if (schema) return g_settings_schema_ref(schema);
    GSettingsSchemaSource *source = g_settings_schema_source_get_default();
    GSettingsSchema *found = NULL;
    for (char **id = relocatable; source && id && *id; id++) {
        GSettingsSchema *candidate = g_settings_schema_source_lookup(source, *id, TRUE);
        gboolean all = candidate != NULL;
        for (guint i = 0; all && i < names->len; i++) all = g_settings_schema_has_key(candidate, names->pdata[i]);
        if (!all) {
            if (candidate) g_settings_schema_unref(candidate);
            continue;
        }
        if (found) { /* two fit: neither is known to be it */
            g_settings_schema_unref(candidate);
            g_settings_schema_unref(found);
            return NULL;
        }
        found = candidate;
    }
    return found;
}

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

static int export_to_dconf(const char *base) {
    kvd_client *client = NULL;
    kvd_error kerror = KVD_ERROR_INIT;
    char **domains = NULL;
    size_t count = 0;
    if (kvd_connect(NULL, &client, &kerror) != KVD_OK || kvd_domains(client, &domains, &count, &kerror) != KVD_OK) {
        fprintf(stderr, "kvd-dconf-import: %s\n", kerror.message);
        return 1;
    }
    GHashTable *fixed = fixed_schemas();
    char **relocatable = relocatable_schemas();
    GPtrArray *listings = g_ptr_array_new_with_free_func((GDestroyNotify)kvd_value_free);
    GHashTable *folders = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, folder_free);
    for (size_t d = 0; d < count; d++) {
        kvd_value *values = NULL, *sources = NULL;
        if (kvd_list(client, domains[d], &values, NULL, &sources, &kerror) != KVD_OK) {
            if (kerror.status == KVD_ERROR_NOT_FOUND) continue; /* removed meanwhile */
            fprintf(stderr, "kvd-dconf-import: domain %s: %s\n", domains[d], kerror.message);
            return 1;
        }
        g_ptr_array_add(listings, values);
        for (size_t i = 0; i < kvd_value_dict_length(values); i++) {
            const char *key = kvd_value_dict_key_at(values, i, NULL);
            if (kvd_value_dict_get(sources, key)) continue; /* the system layer's, not the user's */
            char *path = giokvd_unmap_key(domains[d], key);
            if (path == NULL || !g_str_has_prefix(path, base)) {
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
        kvd_value_free(sources);
    }
    GKeyFile *out = g_key_file_new();
    size_t exported = 0, skipped = 0;
    GHashTableIter iter;
    gpointer dir, data;
    g_hash_table_iter_init(&iter, folders);
    while (g_hash_table_iter_next(&iter, &dir, &data)) {
        Folder *folder = data;
        GSettingsSchema *schema = schema_for(fixed, relocatable, dir, folder->names);
        /* dconf dump's groups: the folder under PATH without its slashes at the ends, "/" for PATH itself. */
        char *group = g_strndup((char *)dir + strlen(base), strlen(dir) - strlen(base));
        if (*group == '\0') {
            g_free(group);
            group = g_strdup("/");
        } else {
            group[strlen(group) - 1] = '\0';
        }
        for (guint i = 0; i < folder->names->len; i++) {
            const char *name = folder->names->pdata[i];
            GVariant *value = NULL;
            if (schema && g_settings_schema_has_key(schema, name)) {
                GSettingsSchemaKey *key = g_settings_schema_get_key(schema, name);
                value = giokvd_from_kvd(folder->values->pdata[i], g_settings_schema_key_get_value_type(key));
                g_settings_schema_key_unref(key);
            }
            if (value == NULL) {
                char *type = giokvd_guess_type(folder->values->pdata[i]);
                if (type && g_variant_type_string_is_valid(type)) {
                    GVariantType *guessed = g_variant_type_new(type);
                    value = giokvd_from_kvd(folder->values->pdata[i], guessed);
                    g_variant_type_free(guessed);
                }
                g_free(type);
            }
            if (value == NULL) { /* a date: GVariant has no type for it */
                fprintf(stderr, "kvd-dconf-import: %s%s: a value dconf cannot hold; left out\n", (char *)dir, name);
                skipped++;
                continue;
            }
            char *text = g_variant_print(value, TRUE);
            g_key_file_set_value(out, group, name, text);
            g_free(text);
            g_variant_unref(value);
            exported++;
        }
        g_free(group);
        if (schema) g_settings_schema_unref(schema);
    }
    gsize length = 0;
    char *text = g_key_file_to_data(out, &length, NULL);
    fwrite(text, 1, length, stdout);
    fprintf(stderr, "kvd-dconf-import: exported %zu keys%s\n", exported, skipped ? " (some left out, see above)" : "");
    g_free(text);
    g_key_file_free(out);
    g_hash_table_unref(folders);
    g_ptr_array_unref(listings);
    g_hash_table_unref(fixed);
    g_strfreev(relocatable);
    kvd_strv_free(domains);
    kvd_client_free(client);
    return skipped ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("kvd-dconf-import %s\n", KVD_VERSION);
        return 0;
    }
    gboolean export = argc > 1 && strcmp(argv[1], "--export") == 0;
    int first = export ? 2 : 1;
    const char *base = argc > first ? argv[first] : "/";
    if (argc > first + 1 || base[0] != '/' || !g_str_has_suffix(base, "/")) {
        fprintf(stderr, "usage: dconf dump PATH | kvd-dconf-import [PATH]; kvd-dconf-import --export [PATH] | dconf load PATH"
                        "   (PATH starts and ends with '/', default /)\n");
        return 2;
    }
    if (export) return export_to_dconf(base);
    GString *input = g_string_new(NULL);
    char buffer[65536];
    size_t got;
    while ((got = fread(buffer, 1, sizeof buffer, stdin)) > 0) g_string_append_len(input, buffer, (gssize)got);
    GKeyFile *file = g_key_file_new();
    GError *error = NULL;
    if (!g_key_file_load_from_data(file, input->str, input->len, G_KEY_FILE_NONE, &error)) {
        fprintf(stderr, "kvd-dconf-import: stdin is not a `dconf dump` keyfile: %s\n", error->message);
        return 1;
    }
    GHashTable *batches = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, batch_free);
    GHashTable *fixed = fixed_schemas();
    char **relocatable = relocatable_schemas();
    gsize group_count = 0, total = 0;
    char **groups = g_key_file_get_groups(file, &group_count);
    for (gsize g = 0; g < group_count; g++) {
        char **keys = g_key_file_get_keys(file, groups[g], NULL, NULL);
        /* A key no installed schema has keeps its type in kvd (tagged when the natural form would
         * lose it), so that --export gives it back as it was. */
        char *dir = strcmp(groups[g], "/") == 0 ? g_strdup(base) : g_strconcat(base, groups[g], "/", NULL);
        GPtrArray *names = g_ptr_array_new();
        for (char **key = keys; key && *key; key++) g_ptr_array_add(names, *key);
        GSettingsSchema *schema = schema_for(fixed, relocatable, dir, names);
        g_ptr_array_unref(names);
        g_free(dir);
        for (char **key = keys; key && *key; key++) {
            char *path = strcmp(groups[g], "/") == 0 ? g_strconcat(base, *key, NULL) : g_strconcat(base, groups[g], "/", *key, NULL);
            char *text = g_key_file_get_value(file, groups[g], *key, NULL);
            GVariant *value = g_variant_parse(NULL, text, NULL, NULL, &error);
            char *domain = NULL, *kvd_key = NULL;
            if (value == NULL || !giokvd_map_key(path, &domain, &kvd_key, NULL)) {
                fprintf(stderr, "kvd-dconf-import: %s: cannot read the value %s%s%s; nothing was written\n", path, text,
                        error ? ": " : "", error ? error->message : "");
                return 1;
            }
            Batch *batch = g_hash_table_lookup(batches, domain);
            if (batch == NULL) {
                batch = g_new0(Batch, 1);
                batch->keys = g_ptr_array_new_with_free_func(g_free);
                batch->values = g_ptr_array_new_with_free_func((GDestroyNotify)kvd_value_free);
                g_hash_table_insert(batches, g_strdup(domain), batch);
            }
            g_ptr_array_add(batch->keys, kvd_key);
            g_variant_ref_sink(value);
            gboolean described = schema && g_settings_schema_has_key(schema, *key);
            g_ptr_array_add(batch->values, described ? giokvd_to_kvd(value) : giokvd_to_kvd_keeping_type(value));
            g_variant_unref(value);
            g_free(domain);
            g_free(text);
            g_free(path);
            total++;
        }
        if (schema) g_settings_schema_unref(schema);
        g_strfreev(keys);
    }
    g_hash_table_unref(fixed);
    g_strfreev(relocatable);
    kvd_client *client = NULL;
    kvd_error kerror = KVD_ERROR_INIT;
    if (kvd_connect(NULL, &client, &kerror) != KVD_OK) {
        fprintf(stderr, "kvd-dconf-import: %s\n", kerror.message);
        return 1;
    }
    GHashTableIter iter;
    gpointer name, data;
    g_hash_table_iter_init(&iter, batches);
    while (g_hash_table_iter_next(&iter, &name, &data)) {
        Batch *batch = data;
        kvd_change *changes = g_new0(kvd_change, batch->keys->len);
        for (guint i = 0; i < batch->keys->len; i++) {
            changes[i].key = batch->keys->pdata[i];
            changes[i].value = batch->values->pdata[i];
        }
        kvd_status status = kvd_apply(client, name, changes, batch->keys->len, KVD_ANY_REVISION, NULL, &kerror);
        g_free(changes);
        if (status != KVD_OK) {
            fprintf(stderr, "kvd-dconf-import: domain %s: %s\n", (char *)name, kerror.message);
            return 1;
        }
    }
    fprintf(stderr, "kvd-dconf-import: %zu keys in %u domains\n", (size_t)total, g_hash_table_size(batches));
    kvd_client_free(client);
    g_hash_table_unref(batches);
    g_strfreev(groups);
    g_key_file_free(file);
    g_string_free(input, TRUE);
    return 0;
}
