/* move-out.c — the move back at login: the user's values in kvd into dconf (move.h).
 *
 * Everything the move back writes goes to dconf as one change set (dconf's own `Change` on its
 * writer, as `dconf load` sends it): the keys kvd has set, the keys kvd no longer has reset, all
 * at once or not at all, whatever their number (one process per reset made a move of 50,000
 * keys time out). Before writing, the move keeps a record beside kvd (move-state.h,
 * dconf-move-out): what dconf held and what the move was to write. A retry after a move back
 * that failed keeps each key whose dconf value is neither of those: the user changed it under
 * dconf since (their session used dconf meanwhile). */
#include <stdio.h>
#include <string.h>

#include "../gio/giokvd.h"
#include "move-state.h"
#include "move.h"

/* dconf's writer may take a while for a large change set: the call waits this long. */
#define DCONF_TIMEOUT_MS (5 * 60 * 1000)

static void variant_free(gpointer data) {
    if (data) g_variant_unref(data);
}

/* A change set: GSettings path -> GVariant* (NULL: reset), both owned. */
static GHashTable *changes_new(void) {
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, variant_free);
}

/* The path of `key` in the group `group` of `dconf dump /`'s keyfile. */
static char *path_in(const char *group, const char *key) {
    return strcmp(group, "/") == 0 ? g_strconcat("/", key, NULL) : g_strconcat("/", group, "/", key, NULL);
}

/* The change set as dconf's writer takes it (a{smv}), floating. */
static GVariant *changes_serialised(GHashTable *changes) {
    GVariantBuilder builder;
    g_variant_builder_init(&builder, G_VARIANT_TYPE("a{smv}"));
    GHashTableIter iter;
    gpointer path, value;
    g_hash_table_iter_init(&iter, changes);
    while (g_hash_table_iter_next(&iter, &path, &value)) g_variant_builder_add(&builder, "{smv}", path, value);
    return g_variant_builder_end(&builder);
}

/* Adds every key of `wanted` (kvd's export) to `changes`; FALSE (said) when a value does not parse. */
static gboolean add_sets(GHashTable *changes, GKeyFile *wanted) {
    char **groups = g_key_file_get_groups(wanted, NULL);
    gboolean ok = TRUE;
    for (char **group = groups; ok && *group; group++) {
        char **keys = g_key_file_get_keys(wanted, *group, NULL, NULL);
        for (char **key = keys; ok && key && *key; key++) {
            char *text = g_key_file_get_value(wanted, *group, *key, NULL);
            GVariant *value = text ? g_variant_parse(NULL, text, NULL, NULL, NULL) : NULL;
            char *path = path_in(*group, *key);
            ok = value != NULL;
            if (ok) g_hash_table_replace(changes, path, g_variant_ref_sink(value));
            else fprintf(stderr, TOOL_NAME ": %s: the export's value %s does not parse\n", path, text);
            if (!ok) g_free(path);
            g_free(text);
        }
        g_strfreev(keys);
    }
    g_strfreev(groups);
    return ok;
}

static void note_locked(const kvd_watch_event *event, void *user_data) {
    for (size_t i = 0; i < event->count; i++)
        if (event->changes[i].source == KVD_SOURCE_LOCKED) g_hash_table_add(user_data, g_strdup(event->changes[i].key));
}

/* The keys kvd's system layer locks in `domain` (a set, owned by `locks`, read once per domain:
 * the first event of a watch of the domain lists them even where the user has no value in it, when
 * Get and List answer NotFound); NULL (said) when kvd failed. */
static GHashTable *locked_keys(kvd_client *client, GHashTable *locks, const char *domain) {
    GHashTable *locked = g_hash_table_lookup(locks, domain);
    if (locked) return locked;
    locked = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    kvd_watch *watch = NULL;
    kvd_error error = KVD_ERROR_INIT;
    if (kvd_watch_new(client, domain, NULL, note_locked, locked, &watch, &error) != KVD_OK) {
        fprintf(stderr, TOOL_NAME ": domain %s: %s\n", domain, error.message);
        g_hash_table_unref(locked);
        locked = NULL;
    } else {
        g_hash_table_insert(locks, g_strdup(domain), locked);
    }
    kvd_watch_free(watch);
    kvd_error_clear(&error);
    return locked;
}

/* What the move back resets in dconf: each key of `current` (dconf's) that kvd's export lacks
 * and that the last move into kvd took (`moved`): not a key kvd never held (written straight into
 * dconf meanwhile, or refused by the move in), not one kvd holds a value dconf cannot take
 * (`left_out`: dconf keeps its own), not one kvd locks (the user's value under a lock). */
static gboolean add_resets(GHashTable *changes, kvd_client *client, GKeyFile *current, GHashTable *moved,
                           GHashTable *left_out) {
    GHashTable *locks = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_hash_table_unref);
    char **groups = g_key_file_get_groups(current, NULL);
    gboolean ok = TRUE;
    for (char **group = groups; ok && *group; group++) {
        char **keys = g_key_file_get_keys(current, *group, NULL, NULL);
        for (char **key = keys; ok && key && *key; key++) {
            char *path = path_in(*group, *key), *domain = NULL, *kvd_key = NULL;
            if (!g_hash_table_contains(changes, path) && g_hash_table_contains(moved, path) &&
                !g_hash_table_contains(left_out, path) && giokvd_map_key(path, &domain, &kvd_key, NULL)) {
                GHashTable *locked = locked_keys(client, locks, domain);
                ok = locked != NULL;
                if (ok && !g_hash_table_contains(locked, kvd_key)) g_hash_table_insert(changes, g_steal_pointer(&path), NULL);
            }
            g_free(domain);
            g_free(kvd_key);
            g_free(path);
        }
        g_strfreev(keys);
    }
    g_strfreev(groups);
    g_hash_table_unref(locks);
    return ok;
}

/* The value `file` (a `dconf dump /` keyfile) has for `path`, as text (a new string), or NULL. */
static char *dumped(GKeyFile *file, const char *path) {
    const char *slash = strrchr(path, '/');
    char *group = slash == path ? g_strdup("/") : g_strndup(path + 1, (gsize)(slash - path - 1));
    char *text = g_key_file_get_value(file, group, slash + 1, NULL);
    g_free(group);
    return text;
}

/* The change set `serialised` (a{smv}) as a table (changes_new's). */
static GHashTable *changes_parsed(GVariant *serialised) {
    GHashTable *changes = changes_new();
    GVariantIter iter;
    const char *path;
    GVariant *value;
    g_variant_iter_init(&iter, serialised);
    while (g_variant_iter_next(&iter, "{&smv}", &path, &value)) g_hash_table_replace(changes, g_strdup(path), value);
    return changes;
}

/* Whether dconf's `now` (text, or NULL: no value) is what the failed move was to write at `path`. */
static gboolean as_planned(GHashTable *planned, const char *path, const char *now) {
    gpointer value = NULL;
    if (!g_hash_table_lookup_extended(planned, path, NULL, &value)) return FALSE;
    if (value == NULL || now == NULL) return value == NULL && now == NULL;
    GVariant *parsed = g_variant_parse(NULL, now, NULL, NULL, NULL);
    gboolean same = parsed != NULL && g_variant_equal(value, parsed);
    if (parsed) g_variant_unref(parsed);
    return same;
}

/* A retry (`record` of the move back that failed): each change of `changes` whose key dconf now
 * holds otherwise than both when that move began and as it was to write is dropped (named): the
 * user changed it under dconf since. */
static void keep_changes_since(GHashTable *changes, GKeyFile *current, GVariant *record) {
    const char *before_text = NULL;
    GVariant *serialised = NULL;
    g_variant_get(record, "(&s@a{smv})", &before_text, &serialised);
    GHashTable *planned = changes_parsed(serialised);
    GKeyFile *before = g_key_file_new();
    g_key_file_load_from_data(before, before_text, strlen(before_text), G_KEY_FILE_NONE, NULL);
    GHashTableIter iter;
    gpointer path;
    g_hash_table_iter_init(&iter, changes);
    while (g_hash_table_iter_next(&iter, &path, NULL)) {
        char *now = dumped(current, path), *then = dumped(before, path);
        if (g_strcmp0(now, then) != 0 && !as_planned(planned, path, now)) {
            fprintf(stderr, TOOL_NAME ": %s: changed in dconf since the move back began; dconf's value kept\n", (char *)path);
            g_hash_table_iter_remove(&iter);
        }
        g_free(now);
        g_free(then);
    }
    g_key_file_free(before);
    g_hash_table_unref(planned);
    g_variant_unref(serialised);
}

/* Sends the change set (a{smv}) to dconf's writer of the user's database, as `dconf load` does;
 * FALSE after saying why. */
static gboolean write_to_dconf(GVariant *serialised) {
    GError *error = NULL;
    char *database = user_database();
    char *object = g_strconcat("/ca/desrt/dconf/Writer/", database, NULL);
    GDBusConnection *bus = g_variant_is_object_path(object) ? g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error) : NULL;
    GVariant *reply = NULL;
    if (bus) {
        GVariant *parameters = g_variant_new_from_data(G_VARIANT_TYPE("(ay)"), g_variant_get_data(serialised),
                                                       g_variant_get_size(serialised), TRUE, NULL, NULL);
        reply = g_dbus_connection_call_sync(bus, "ca.desrt.dconf", object, "ca.desrt.dconf.Writer", "Change", parameters,
                                            G_VARIANT_TYPE("(s)"), G_DBUS_CALL_FLAGS_NONE, DCONF_TIMEOUT_MS, NULL, &error);
    }
    if (reply == NULL)
        fprintf(stderr, TOOL_NAME ": writing to dconf's database %s: %s\n", database,
                error ? error->message : "its name makes no D-Bus object path");
    if (reply) g_variant_unref(reply);
    g_clear_error(&error);
    g_clear_object(&bus);
    g_free(object);
    g_free(database);
    return reply != NULL;
}

/* The change set of the move back (kvd's export set, the keys kvd no longer has reset), less
 * what the user changed in dconf since a move back that failed; NULL (said) on failure. */
static GHashTable *plan(kvd_client *client, const char *held, GKeyFile *current, size_t *exported, size_t *skipped) {
    GHashTable *moved = load_moved_in();
    GHashTable *left_out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    GKeyFile *wanted = dconf_export(client, "/", current, left_out, exported, skipped);
    GHashTable *changes = changes_new();
    gboolean ok = wanted && add_sets(changes, wanted) && add_resets(changes, client, current, moved, left_out);
    GVariant *record = ok ? load_move_out() : NULL;
    if (record) {
        keep_changes_since(changes, current, record);
    } else if (ok) { /* the first attempt: recorded before dconf changes */
        GVariant *made = g_variant_ref_sink(g_variant_new("(s@a{smv})", held, changes_serialised(changes)));
        ok = save_move_out(made) == 0;
        g_variant_unref(made);
    }
    if (record) g_variant_unref(record);
    if (wanted) g_key_file_free(wanted);
    g_hash_table_unref(left_out);
    g_hash_table_unref(moved);
    if (!ok) g_hash_table_unref(changes);
    return ok ? changes : NULL;
}

/* Notes the keys the change set sets (dconf-moved-out): the next move into kvd carries their
 * resets under dconf. 0, or 1 after saying why. */
static int save_written(GHashTable *changes) {
    GPtrArray *paths = g_ptr_array_new();
    GHashTableIter iter;
    gpointer path, value;
    g_hash_table_iter_init(&iter, changes);
    while (g_hash_table_iter_next(&iter, &path, &value))
        if (value) g_ptr_array_add(paths, path);
    int status = save_moved_out(paths);
    g_ptr_array_unref(paths);
    return status;
}

int move_out(kvd_client *client) {
    char *held = NULL;
    GKeyFile *current = g_key_file_new();
    if (!dump_own(&held) || !g_key_file_load_from_data(current, held, strlen(held), 0, NULL)) {
        if (held) fprintf(stderr, TOOL_NAME ": `dconf dump /` printed no keyfile\n");
        g_key_file_free(current);
        g_free(held);
        return 1;
    }
    size_t exported = 0, skipped = 0;
    GHashTable *changes = plan(client, held, current, &exported, &skipped);
    gboolean ok = changes != NULL;
    if (ok && g_hash_table_size(changes) > 0) {
        GVariant *serialised = g_variant_ref_sink(changes_serialised(changes));
        ok = write_to_dconf(serialised);
        g_variant_unref(serialised);
    }
    if (ok) ok = save_written(changes) == 0;
    int status = ok ? record_side(client, "dconf") : 1;
    if (status == 0) {
        fprintf(stderr, TOOL_NAME ": moved %zu keys from kvd back into dconf%s\n", exported,
                skipped ? "; the keys named above were left out (dconf keeps its own value of each)" : "");
        forget_moved_in();
        forget_move_out();
    }
    if (changes) g_hash_table_unref(changes);
    g_key_file_free(current);
    g_free(held);
    return status;
}
