/* carry-resets.c — the move into kvd after a move back: what the user reset under dconf
 * meanwhile is reset in kvd too (move.h), as the move back resets in dconf what was reset under
 * kvd. */
#include <stdio.h>
#include <string.h>

#include "../gio/giokvd.h"
#include "move-state.h"
#include "move.h"

/* A key dconf holds none of this many of the keys the move back wrote: the user's database looks
 * replaced or lost, not reset key by key; nothing is taken as reset. */
#define LOST_DATABASE_KEYS 10

/* Whether `dump` (`dconf dump /`'s keyfile) has a value at `path`. */
static gboolean holds(GKeyFile *dump, const char *path) {
    const char *slash = strrchr(path, '/');
    char *group = slash == path ? g_strdup("/") : g_strndup(path + 1, (gsize)(slash - path - 1));
    gboolean held = g_key_file_has_key(dump, group, slash + 1, NULL);
    g_free(group);
    return held;
}

/* The revision kvd recorded the move back at (settingsIn's), -1 when kvd cannot say. */
static int64_t moved_back_at(kvd_client *client) {
    int64_t revision = -1;
    if (kvd_get(client, MOVE_DOMAIN, MOVE_KEY, NULL, &revision, NULL, NULL) != KVD_OK) return -1;
    return revision;
}

/* Removes each of `keys` (kvd keys of `domain`) whose value is the user's own and unchanged since
 * revision `since`, in one Apply; `reset` counts them. 0, or 1 after saying why. */
static int reset_domain(kvd_client *client, const char *domain, GPtrArray *keys, int64_t since, size_t *reset) {
    kvd_change *changes = g_new0(kvd_change, keys->len);
    size_t count = 0;
    for (guint i = 0; i < keys->len; i++) {
        int64_t revision = 0;
        kvd_source source = KVD_SOURCE_SYSTEM;
        if (kvd_get(client, domain, keys->pdata[i], NULL, &revision, &source, NULL) != KVD_OK) continue;
        if (source != KVD_SOURCE_USER || revision > since) continue; /* an admin's, or changed in kvd since */
        changes[count++].key = keys->pdata[i];
    }
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = count ? kvd_apply(client, domain, changes, count, KVD_ANY_REVISION, NULL, &error) : KVD_OK;
    if (status != KVD_OK) fprintf(stderr, TOOL_NAME ": resetting in domain %s: %s\n", domain, error.message);
    if (status == KVD_OK) *reset += count;
    kvd_error_clear(&error);
    g_free(changes);
    return status == KVD_OK ? 0 : 1;
}

int carry_resets(kvd_client *client, GKeyFile *dump) {
    GHashTable *written = load_moved_out();
    GHashTable *domains = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    size_t held = 0, gone = 0, reset = 0;
    GHashTableIter iter;
    gpointer path, keys;
    g_hash_table_iter_init(&iter, written);
    while (g_hash_table_iter_next(&iter, &path, NULL)) {
        char *domain = NULL, *key = NULL;
        if (holds(dump, path)) held++;
        else if (giokvd_map_key(path, &domain, &key, NULL)) {
            GPtrArray *list = g_hash_table_lookup(domains, domain);
            if (list == NULL) g_hash_table_insert(domains, g_strdup(domain), list = g_ptr_array_new_with_free_func(g_free));
            g_ptr_array_add(list, g_steal_pointer(&key));
            gone++;
        }
        g_free(domain);
        g_free(key);
    }
    int64_t since = gone ? moved_back_at(client) : -1;
    int status = 0;
    if (gone && held == 0 && gone >= LOST_DATABASE_KEYS)
        fprintf(stderr, TOOL_NAME ": dconf holds none of the %zu keys the move back wrote: its database looks replaced; "
                        "no key is reset in kvd\n", gone);
    else if (gone && since >= 0) {
        g_hash_table_iter_init(&iter, domains);
        while (status == 0 && g_hash_table_iter_next(&iter, &path, &keys)) status = reset_domain(client, path, keys, since, &reset);
    }
    if (reset) fprintf(stderr, TOOL_NAME ": reset %zu keys in kvd that were reset under dconf\n", reset);
    g_hash_table_unref(domains);
    g_hash_table_unref(written);
    return status;
}
