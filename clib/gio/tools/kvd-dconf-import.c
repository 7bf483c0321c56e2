/* kvd-dconf-import — moves dconf settings into kvd: `dconf dump / | kvd-dconf-import [PATH]`.
 *
 * Reads the keyfile `dconf dump PATH` prints (default PATH "/") from stdin and writes every key
 * into kvd under the GSettings backend's mapping (README "GNOME and GSettings apps"), with the
 * same value forms, so that GSETTINGS_BACKEND=kvd apps read exactly what they read from dconf.
 * Each dconf folder is one atomic Apply per kvd domain. A value dconf printed that GVariant cannot
 * parse is named on stderr and the whole import stops before writing anything (exit 1).
 */
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

#include "../giokvd.h"

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

int main(int argc, char **argv) {
    const char *base = argc > 1 ? argv[1] : "/";
    if (argc > 2 || base[0] != '/' || !g_str_has_suffix(base, "/")) {
        fprintf(stderr, "usage: dconf dump PATH | kvd-dconf-import [PATH]   (PATH starts and ends with '/', default /)\n");
        return 2;
    }
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
    gsize group_count = 0, total = 0;
    char **groups = g_key_file_get_groups(file, &group_count);
    for (gsize g = 0; g < group_count; g++) {
        char **keys = g_key_file_get_keys(file, groups[g], NULL, NULL);
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
            g_ptr_array_add(batch->values, giokvd_to_kvd(g_variant_ref_sink(value)));
            g_variant_unref(value);
            g_free(domain);
            g_free(text);
            g_free(path);
            total++;
        }
        g_strfreev(keys);
    }
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
