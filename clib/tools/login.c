/* login.c — the move of a user's GSettings values at login (dconf-tool.h; docs/gsettings.md,
 * "One switch for the machine"). Run by the user unit kvd-gnome-login.service, which the machine's switch
 * (`kvctl --system gnome enable`) turns on; the session's GSETTINGS_BACKEND says which side the
 * user's apps use from now on. */
#include "dconf-tool.h"

#include <stdio.h>
#include <string.h>

#include "../gio/giokvd.h"

/* Runs `dconf ARGS...` with `input` on its stdin (NULL: none); its stdout in `output` (NULL:
 * not kept). FALSE (after saying why) when it could not run or failed. */
static gboolean run_dconf(const char *const *argv, const char *input, char **output) {
    GError *error = NULL;
    GSubprocessFlags flags = G_SUBPROCESS_FLAGS_STDERR_PIPE | (input ? G_SUBPROCESS_FLAGS_STDIN_PIPE : 0) |
                             (output ? G_SUBPROCESS_FLAGS_STDOUT_PIPE : G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
    GSubprocess *process = g_subprocess_newv(argv, flags, &error);
    char *out = NULL, *err = NULL;
    gboolean ok = process && g_subprocess_communicate_utf8(process, input, NULL, &out, &err, &error) &&
                  g_subprocess_get_successful(process);
    if (!ok) {
        const char *why = error ? error->message : (err && *err ? g_strchomp(err) : "it failed");
        fprintf(stderr, TOOL_NAME ": `%s %s`: %s\n", argv[0], argv[1], why);
    }
    if (ok && output) *output = g_steal_pointer(&out);
    g_clear_error(&error);
    g_clear_object(&process);
    g_free(out);
    g_free(err);
    return ok;
}

/* Which side holds the user's values, as kvd recorded it: "kvd", "dconf", or NULL (never moved). */
static char *recorded_side(kvd_client *client, gboolean *failed) {
    kvd_value *value = NULL;
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = kvd_get(client, MOVE_DOMAIN, MOVE_KEY, &value, NULL, NULL, &error);
    char *side = NULL;
    if (status == KVD_OK && kvd_value_type(value) == KVD_TYPE_STRING) side = g_strdup(kvd_value_get_string(value, NULL));
    *failed = status != KVD_OK && status != KVD_ERROR_NOT_FOUND;
    if (*failed) fprintf(stderr, TOOL_NAME ": %s\n", error.message);
    kvd_value_free(value);
    kvd_error_clear(&error);
    return side;
}

static int record_side(kvd_client *client, const char *side) {
    kvd_value *value = kvd_value_new_string(side);
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = kvd_set(client, MOVE_DOMAIN, MOVE_KEY, value, KVD_ANY_REVISION, NULL, &error);
    if (status != KVD_OK) fprintf(stderr, TOOL_NAME ": %s\n", error.message);
    kvd_value_free(value);
    kvd_error_clear(&error);
    return status == KVD_OK ? 0 : 1;
}

/* dconf's values into kvd. */
static int move_in(kvd_client *client) {
    const char *dump[] = {"dconf", "dump", "/", NULL};
    char *text = NULL;
    if (!run_dconf(dump, NULL, &text)) return 1;
    size_t count = 0;
    int status = dconf_import(client, text, strlen(text), "/", &count);
    g_free(text);
    if (status == 0) status = record_side(client, "kvd");
    if (status == 0) fprintf(stderr, TOOL_NAME ": moved %zu keys from dconf into kvd\n", count);
    return status;
}

static void note_locked(const kvd_watch_event *event, void *user_data) {
    for (size_t i = 0; i < event->count; i++)
        if (event->changes[i].source == KVD_SOURCE_LOCKED) *(gboolean *)user_data = TRUE;
}

/* Whether kvd's system layer locks the GSettings key `path`. The first event of a watch of the key
 * says so even where the user has no value in its domain (then Get and List answer NotFound). */
static gboolean locked_in_kvd(kvd_client *client, const char *path, gboolean *failed) {
    char *domain = NULL, *key = NULL;
    gboolean locked = FALSE;
    kvd_watch *watch = NULL;
    kvd_error error = KVD_ERROR_INIT;
    *failed = giokvd_map_key(path, &domain, &key, NULL) &&
              kvd_watch_new(client, domain, key, note_locked, &locked, &watch, &error) != KVD_OK;
    if (*failed) fprintf(stderr, TOOL_NAME ": %s: %s\n", path, error.message);
    kvd_watch_free(watch);
    kvd_error_clear(&error);
    g_free(domain);
    g_free(key);
    return locked;
}

/* Resets in dconf each key of `current` (what dconf holds) that `wanted` lacks, but those kvd
 * locks: the user's dconf value under an administrator's lock, which kvd never took. */
static gboolean reset_missing(kvd_client *client, GKeyFile *current, GKeyFile *wanted) {
    char **groups = g_key_file_get_groups(current, NULL);
    gboolean ok = TRUE;
    for (char **group = groups; ok && *group; group++) {
        char **keys = g_key_file_get_keys(current, *group, NULL, NULL);
        for (char **key = keys; ok && key && *key; key++) {
            if (g_key_file_has_key(wanted, *group, *key, NULL)) continue;
            char *path = strcmp(*group, "/") == 0 ? g_strconcat("/", *key, NULL) : g_strconcat("/", *group, "/", *key, NULL);
            const char *reset[] = {"dconf", "reset", path, NULL};
            gboolean failed = FALSE;
            if (!locked_in_kvd(client, path, &failed) && !failed) ok = run_dconf(reset, NULL, NULL);
            ok = ok && !failed;
            g_free(path);
        }
        g_strfreev(keys);
    }
    g_strfreev(groups);
    return ok;
}

/* kvd's values back into dconf: every key the user has in kvd loaded, every key kvd no longer
 * has reset. */
static int move_out(kvd_client *client) {
    const char *dump[] = {"dconf", "dump", "/", NULL};
    const char *load[] = {"dconf", "load", "/", NULL};
    char *held = NULL;
    GKeyFile *current = g_key_file_new();
    if (!run_dconf(dump, NULL, &held) || !g_key_file_load_from_data(current, held, strlen(held), 0, NULL)) {
        if (held) fprintf(stderr, TOOL_NAME ": `dconf dump /` printed no keyfile\n");
        g_key_file_free(current);
        g_free(held);
        return 1;
    }
    size_t exported = 0, skipped = 0;
    GKeyFile *wanted = dconf_export(client, "/", current, &exported, &skipped);
    char *text = wanted ? g_key_file_to_data(wanted, NULL, NULL) : NULL;
    gboolean ok = wanted && run_dconf(load, text, NULL) && reset_missing(client, current, wanted);
    int status = ok ? record_side(client, "dconf") : 1;
    if (status == 0) fprintf(stderr, TOOL_NAME ": moved %zu keys from kvd back into dconf\n", exported);
    g_key_file_free(current);
    if (wanted) g_key_file_free(wanted);
    g_free(held);
    g_free(text);
    return status;
}

int dconf_login(void) {
    const char *backend = g_getenv("GSETTINGS_BACKEND");
    gboolean on = backend && strcmp(backend, "kvd") == 0;
    kvd_client *client = NULL;
    kvd_error error = KVD_ERROR_INIT;
    if (kvd_connect(NULL, &client, &error) != KVD_OK) {
        fprintf(stderr, TOOL_NAME ": %s\n", error.message);
        kvd_error_clear(&error);
        return 1;
    }
    gboolean failed = FALSE;
    char *side = recorded_side(client, &failed);
    int status = failed ? 1 : 0;
    if (!failed && on && g_strcmp0(side, "kvd") != 0) status = move_in(client);
    else if (!failed && !on && g_strcmp0(side, "kvd") == 0) status = move_out(client);
    else if (!failed) fprintf(stderr, TOOL_NAME ": nothing to move (GSettings uses %s)\n", on ? "kvd" : "dconf");
    g_free(side);
    kvd_client_free(client);
    return status;
}
