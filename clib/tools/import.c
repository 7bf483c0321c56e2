/* import.c — a `dconf dump` keyfile into kvd (dconf-tool.h). */
#include "dconf-tool.h"

#include <stdio.h>
#include <string.h>

#include "../gio/giokvd.h"

/* One kvd domain's part of the import: its keys and values, in the keyfile's order. */
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

static Batch *batch_for(GHashTable *batches, const char *domain) {
    Batch *batch = g_hash_table_lookup(batches, domain);
    if (batch == NULL) {
        batch = g_new0(Batch, 1);
        batch->keys = g_ptr_array_new_with_free_func(g_free);
        batch->values = g_ptr_array_new_with_free_func((GDestroyNotify)kvd_value_free);
        g_hash_table_insert(batches, g_strdup(domain), batch);
    }
    return batch;
}

/* The path of `key` in the keyfile group `group` under `base`. */
static char *path_of(const char *base, const char *group, const char *key) {
    return strcmp(group, "/") == 0 ? g_strconcat(base, key, NULL) : g_strconcat(base, group, "/", key, NULL);
}

/* Adds one group's keys to `batches`; FALSE (after saying which) when a value cannot be read. */
static gboolean read_group(GKeyFile *file, const char *base, const char *group, const Schemas *schemas,
                           GHashTable *batches, size_t *total) {
    char **keys = g_key_file_get_keys(file, group, NULL, NULL);
    /* A key no installed schema has keeps its type in kvd (tagged when the natural form would lose
     * it), so that --export gives it back as it was. */
    char *dir = strcmp(group, "/") == 0 ? g_strdup(base) : g_strconcat(base, group, "/", NULL);
    GPtrArray *names = g_ptr_array_new();
    for (char **key = keys; key && *key; key++) g_ptr_array_add(names, *key);
    GSettingsSchema *schema = schemas_for(schemas, dir, names);
    g_ptr_array_unref(names);
    gboolean ok = TRUE;
    for (char **key = keys; ok && key && *key; key++) {
        char *path = path_of(base, group, *key);
        char *text = g_key_file_get_value(file, group, *key, NULL);
        GError *error = NULL;
        GVariant *value = g_variant_parse(NULL, text, NULL, NULL, &error);
        char *domain = NULL, *kvd_key = NULL;
        if (value == NULL || !giokvd_map_key(path, &domain, &kvd_key, NULL)) {
            fprintf(stderr, TOOL_NAME ": %s: cannot read the value %s%s%s; nothing was written\n", path, text,
                    error ? ": " : "", error ? error->message : "");
            ok = FALSE;
        } else if (!g_str_has_prefix(path, MOVE_PATH)) { /* kvd's own record is never moved */
            Batch *batch = batch_for(batches, domain);
            g_ptr_array_add(batch->keys, g_steal_pointer(&kvd_key));
            g_variant_ref_sink(value);
            gboolean described = schema && g_settings_schema_has_key(schema, *key);
            g_ptr_array_add(batch->values, described ? giokvd_to_kvd(value) : giokvd_to_kvd_keeping_type(value));
            (*total)++;
        }
        if (value) g_variant_unref(value);
        g_clear_error(&error);
        g_free(kvd_key);
        g_free(domain);
        g_free(text);
        g_free(path);
    }
    if (schema) g_settings_schema_unref(schema);
    g_free(dir);
    g_strfreev(keys);
    return ok;
}

/* Whether kvd refuses `status` for one key rather than for the whole call: a lock always; a
 * name, value or size kvd refuses when the rules leave such keys out. */
static gboolean refused_for_the_key(kvd_status status, const ImportRules *rules) {
    if (status == KVD_ERROR_KEY_LOCKED) return TRUE;
    return rules->skip_refused &&
           (status == KVD_ERROR_INVALID_NAME || status == KVD_ERROR_INVALID_VALUE || status == KVD_ERROR_TOO_LARGE);
}

static void note_written(const ImportRules *rules, const char *domain, const char *key) {
    if (rules->written) g_ptr_array_add(rules->written, giokvd_unmap_key(domain, key));
}

/* The domain's changes one by one, after its Apply was refused for one key: each key kvd refuses
 * (refused_for_the_key) named and left out, its value staying where it came from. */
static int write_each(kvd_client *client, const char *domain, const kvd_change *changes, size_t count,
                      const ImportRules *rules, size_t *total) {
    for (size_t i = 0; i < count; i++) {
        kvd_error error = KVD_ERROR_INIT;
        kvd_status status = kvd_set(client, domain, changes[i].key, changes[i].value, KVD_ANY_REVISION, NULL, &error);
        if (status == KVD_OK) {
            note_written(rules, domain, changes[i].key);
        } else if (refused_for_the_key(status, rules)) {
            fprintf(stderr, TOOL_NAME ": domain %s key %s: %s; left out\n", domain, changes[i].key,
                    status == KVD_ERROR_KEY_LOCKED ? "locked by the administrator" : error.message);
            (*total)--;
        } else {
            fprintf(stderr, TOOL_NAME ": domain %s: %s\n", domain, error.message);
            kvd_error_clear(&error);
            return 1;
        }
        kvd_error_clear(&error);
    }
    return 0;
}

/* Whether the user's own value of `key` changed in kvd after revision `after` (then kvd's is
 * newer than the one being moved in, and stays). */
static gboolean changed_after(kvd_client *client, const char *domain, const char *key, int64_t after) {
    int64_t revision = 0;
    kvd_source source = KVD_SOURCE_USER;
    kvd_status status = kvd_get(client, domain, key, NULL, &revision, &source, NULL);
    return status == KVD_OK && revision > after;
}

/* The batch's changes to write: all, or with rules->keep_after, those kvd did not change since. */
static size_t changes_to_write(kvd_client *client, const char *domain, Batch *batch, const ImportRules *rules,
                               kvd_change *changes, size_t *total) {
    size_t count = 0;
    for (guint i = 0; i < batch->keys->len; i++) {
        if (rules->keep_after >= 0 && changed_after(client, domain, batch->keys->pdata[i], rules->keep_after)) {
            fprintf(stderr, TOOL_NAME ": domain %s key %s: %s; kvd's value kept\n", domain, (char *)batch->keys->pdata[i],
                    rules->keep_after == 0 ? "kvd holds a value of it" : "changed in kvd since the move began");
            (*total)--;
            continue;
        }
        changes[count].key = batch->keys->pdata[i];
        changes[count++].value = batch->values->pdata[i];
    }
    return count;
}

/* One Apply per domain; a domain holding a key kvd refuses alone (a lock; with the rules, a name or
 * size) key by key instead. */
static int write_batches(kvd_client *client, GHashTable *batches, const ImportRules *rules, size_t *total) {
    GHashTableIter iter;
    gpointer name, data;
    g_hash_table_iter_init(&iter, batches);
    while (g_hash_table_iter_next(&iter, &name, &data)) {
        Batch *batch = data;
        kvd_change *changes = g_new0(kvd_change, batch->keys->len);
        size_t count = changes_to_write(client, name, batch, rules, changes, total);
        kvd_error error = KVD_ERROR_INIT;
        kvd_status status = count ? kvd_apply(client, name, changes, count, KVD_ANY_REVISION, NULL, &error) : KVD_OK;
        int failed = 0;
        if (status == KVD_OK) {
            for (size_t i = 0; i < count; i++) note_written(rules, name, changes[i].key);
        } else if (refused_for_the_key(status, rules)) {
            failed = write_each(client, name, changes, count, rules, total);
        } else {
            fprintf(stderr, TOOL_NAME ": domain %s: %s\n", (char *)name, error.message);
            failed = 1;
        }
        kvd_error_clear(&error);
        g_free(changes);
        if (failed) return 1;
    }
    return 0;
}

int dconf_import(kvd_client *client, const char *text, size_t length, const char *base, const ImportRules *rules,
                 size_t *imported) {
    GKeyFile *file = g_key_file_new();
    GError *error = NULL;
    if (!g_key_file_load_from_data(file, text, length, G_KEY_FILE_NONE, &error)) {
        fprintf(stderr, TOOL_NAME ": the input is not a `dconf dump` keyfile: %s\n", error->message);
        g_error_free(error);
        g_key_file_free(file);
        return 1;
    }
    GHashTable *batches = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, batch_free);
    Schemas schemas = schemas_load();
    size_t total = 0;
    char **groups = g_key_file_get_groups(file, NULL);
    gboolean ok = TRUE;
    for (char **group = groups; ok && group && *group; group++)
        ok = read_group(file, base, *group, &schemas, batches, &total);
    static const ImportRules every = {.keep_after = -1};
    int status = ok ? write_batches(client, batches, rules ? rules : &every, &total) : 1;
    if (status == 0) fprintf(stderr, TOOL_NAME ": %zu keys in %u domains\n", total, g_hash_table_size(batches));
    if (status == 0 && imported) *imported = total;
    g_strfreev(groups);
    schemas_clear(&schemas);
    g_hash_table_unref(batches);
    g_key_file_free(file);
    return status;
}
