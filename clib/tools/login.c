/* login.c — the move of a user's GSettings values at login (dconf-tool.h; docs/gsettings.md,
 * "One switch for the machine"). Run by the user unit kvd-gnome-login.service, which the machine's switch
 * (`kvctl --system gnome enable`) turns on; the session's GSETTINGS_BACKEND says which side the
 * user's apps use from now on. */
#include "dconf-tool.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../gio/giokvd.h"
#include "move-state.h"
#include "move.h"

/* Runs `dconf ARGS...` with `input` on its stdin (NULL: none); its stdout in `output` (NULL:
 * not kept); with DCONF_PROFILE=`profile` when not NULL. FALSE (after saying why) when it could not
 * run or failed. */
static gboolean run_dconf_with(const char *const *argv, const char *input, char **output, const char *profile) {
    GError *error = NULL;
    GSubprocessFlags flags = G_SUBPROCESS_FLAGS_STDERR_PIPE | (input ? G_SUBPROCESS_FLAGS_STDIN_PIPE : 0) |
                             (output ? G_SUBPROCESS_FLAGS_STDOUT_PIPE : G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
    GSubprocessLauncher *launcher = g_subprocess_launcher_new(flags);
    if (profile) g_subprocess_launcher_setenv(launcher, "DCONF_PROFILE", profile, TRUE);
    GSubprocess *process = g_subprocess_launcher_spawnv(launcher, argv, &error);
    g_object_unref(launcher);
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

/* The user's database in the profile dconf uses for them (DCONF_PROFILE: a path, or a name in
 * /etc/dconf/profile; else /etc/dconf/profile/user): its `user-db:NAME`, else "user" (dconf's
 * default). */
char *user_database(void) {
    const char *name = g_getenv("DCONF_PROFILE");
    char *path = name && name[0] == '/' ? g_strdup(name) : g_build_filename("/etc/dconf/profile", name && *name ? name : "user", NULL);
    char *text = NULL;
    char *database = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL)) {
        char **lines = g_strsplit(text, "\n", -1);
        for (char **line = lines; *line && database == NULL; line++) {
            char *stripped = g_strstrip(*line);
            if (g_str_has_prefix(stripped, "user-db:") && stripped[8] != '\0') database = g_strdup(stripped + 8);
        }
        g_strfreev(lines);
    }
    g_free(text);
    g_free(path);
    return database ? database : g_strdup("user");
}

/* The user's own values as `dconf dump /` prints them, without the system databases' (a plain
 * `dconf dump` gives the values as the profile combines them: the site's defaults would become the
 * user's own). Read through a profile of the user's database alone, in a file of ours. */
gboolean dump_own(char **output) {
    char *profile = NULL;
    GError *error = NULL;
    int fd = g_file_open_tmp("kvd-dconf-profile-XXXXXX", &profile, &error);
    char *database = user_database();
    char *line = g_strdup_printf("user-db:%s\n", database);
    gboolean ok = fd >= 0 && write(fd, line, strlen(line)) == (ssize_t)strlen(line);
    if (fd >= 0) close(fd);
    if (!ok) fprintf(stderr, TOOL_NAME ": cannot write a dconf profile: %s\n", error ? error->message : g_strerror(errno));
    const char *dump[] = {"dconf", "dump", "/", NULL};
    ok = ok && run_dconf_with(dump, NULL, output, profile);
    if (profile) g_unlink(profile);
    g_clear_error(&error);
    g_free(line);
    g_free(database);
    g_free(profile);
    return ok;
}

/* The user's own value of MOVE_DOMAIN's `key` (never an admin's default of it), NULL when the
 * user has none; `failed` when kvd could not say. */
static kvd_value *own_record(kvd_client *client, const char *key, gboolean *failed) {
    kvd_value *value = NULL;
    kvd_source source = KVD_SOURCE_USER;
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = kvd_get(client, MOVE_DOMAIN, key, &value, NULL, &source, &error);
    *failed = status != KVD_OK && status != KVD_ERROR_NOT_FOUND;
    if (*failed) fprintf(stderr, TOOL_NAME ": %s\n", error.message);
    kvd_error_clear(&error);
    if (status == KVD_OK && source == KVD_SOURCE_USER) return value;
    kvd_value_free(value);
    return NULL;
}

/* What kvd's record says of where the user's values are. */
typedef enum {
    SIDE_NONE,    /* no record of the user's own: never moved, or the record was deleted */
    SIDE_KVD,     /* moved into kvd */
    SIDE_DCONF,   /* moved back into dconf */
    SIDE_UNKNOWN, /* a record that is neither (garbage, another type): said on stderr */
} Side;

/* Which side holds the user's values, as kvd recorded it; `failed` when kvd could not say. */
static Side recorded_side(kvd_client *client, gboolean *failed) {
    kvd_value *value = own_record(client, MOVE_KEY, failed);
    Side side = value == NULL ? SIDE_NONE : SIDE_UNKNOWN;
    const char *text = value && kvd_value_type(value) == KVD_TYPE_STRING ? kvd_value_get_string(value, NULL) : NULL;
    if (g_strcmp0(text, "kvd") == 0) side = SIDE_KVD;
    else if (g_strcmp0(text, "dconf") == 0) side = SIDE_DCONF;
    if (side == SIDE_UNKNOWN)
        fprintf(stderr, TOOL_NAME ": the record " MOVE_DOMAIN " " MOVE_KEY " is %s%s%s, neither \"kvd\" nor \"dconf\"\n",
                text ? "\"" : "", text ? text : "not a string", text ? "\"" : "");
    kvd_value_free(value);
    return side;
}

/* Records `side` (and, moving into kvd, ends the move begun: MOVE_SINCE_KEY removed), atomically. */
int record_side(kvd_client *client, const char *side) {
    kvd_value *value = kvd_value_new_string(side);
    kvd_change changes[] = {{.key = MOVE_KEY, .value = value}, {.key = MOVE_SINCE_KEY, .value = NULL}};
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = kvd_apply(client, MOVE_DOMAIN, changes, 2, KVD_ANY_REVISION, NULL, &error);
    if (status != KVD_OK) fprintf(stderr, TOOL_NAME ": recording the move: %s\n", error.message);
    kvd_value_free(value);
    kvd_error_clear(&error);
    return status == KVD_OK ? 0 : 1;
}

/* The revision a move into kvd began at: the one recorded by an earlier attempt that failed (a
 * retry), else a new record's (set now, before anything moves); -1 when kvd failed. Keys whose
 * user value changed in kvd after it keep kvd's value: the user's session used kvd since. */
static int64_t move_began(kvd_client *client) {
    gboolean failed = FALSE;
    kvd_value *since = own_record(client, MOVE_SINCE_KEY, &failed);
    int64_t revision = -1;
    if (since && kvd_value_type(since) == KVD_TYPE_INT) revision = kvd_value_get_int(since);
    kvd_value_free(since);
    if (failed || revision >= 0) return failed ? -1 : revision;
    if (pending_marker_exists()) return 0; /* kvd was away at an attempt: keep every key kvd has */
    kvd_value *now = kvd_value_new_int(0);
    kvd_error error = KVD_ERROR_INIT;
    int64_t set = -1;
    if (kvd_set(client, MOVE_DOMAIN, MOVE_SINCE_KEY, now, KVD_ANY_REVISION, &set, &error) != KVD_OK) {
        fprintf(stderr, TOOL_NAME ": recording the move: %s\n", error.message);
        set = -1;
    }
    kvd_value_free(now);
    kvd_error_clear(&error);
    if (set >= 0) { /* the value names the revision that set it */
        kvd_value *value = kvd_value_new_int(set);
        if (kvd_set(client, MOVE_DOMAIN, MOVE_SINCE_KEY, value, KVD_ANY_REVISION, NULL, NULL) != KVD_OK) set = -1;
        kvd_value_free(value);
    }
    return set;
}

/* The resets under dconf since the move back (`text`: dconf's dump), carried into kvd. */
static int carry_resets_in(kvd_client *client, const char *text) {
    GKeyFile *dump = g_key_file_new();
    int status = g_key_file_load_from_data(dump, text, strlen(text), G_KEY_FILE_NONE, NULL) ? carry_resets(client, dump) : 1;
    g_key_file_free(dump);
    return status;
}

/* dconf's values into kvd: every key kvd did not change since the move began (with `keep_all`:
 * every key kvd has none of), but those kvd refuses (named, left in dconf); the keys written are
 * noted for the move back's resets. Without `keep_all` (after a move back), a key the move back
 * wrote and dconf no longer has is reset in kvd too (carry_resets). */
static int move_in(kvd_client *client, gboolean keep_all) {
    int64_t since = keep_all ? 0 : move_began(client);
    if (since < 0) return 1;
    char *text = NULL;
    if (!dump_own(&text)) return 1;
    size_t count = 0;
    ImportRules rules = {.keep_after = since, .skip_refused = TRUE, .written = g_ptr_array_new_with_free_func(g_free)};
    int status = dconf_import(client, text, strlen(text), "/", &rules, &count);
    if (status == 0 && !keep_all) status = carry_resets_in(client, text);
    g_free(text);
    if (status == 0) status = save_moved_in(rules.written);
    if (status == 0) status = record_side(client, "kvd");
    if (status == 0) remove_pending_marker();
    if (status == 0) forget_moved_out();
    if (status == 0) fprintf(stderr, TOOL_NAME ": moved %zu keys from dconf into kvd\n", count);
    g_ptr_array_unref(rules.written);
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
        if (on) write_pending_marker(); /* the session may yet write to kvd: the retry keeps that */
        return 1;
    }
    gboolean failed = FALSE;
    Side side = recorded_side(client, &failed);
    int status = 0;
    if (failed) {
        status = 1;
    } else if (on && side == SIDE_DCONF) {
        status = move_in(client, FALSE);
    } else if (on && side != SIDE_KVD) { /* no record, or one that says nothing: kvd's values stay */
        if (side == SIDE_UNKNOWN) fprintf(stderr, TOOL_NAME ": taken as unknown: every key kvd holds keeps kvd's value\n");
        status = move_in(client, TRUE);
    } else if (!on && side == SIDE_KVD) {
        status = move_out(client);
    } else if (!on && side == SIDE_UNKNOWN) {
        fprintf(stderr, TOOL_NAME ": nothing moved back into dconf: set it to \"kvd\" to move kvd's values back, or delete it\n");
        status = 1;
    } else {
        if (on) forget_move_out(); /* a move back that failed is not made: the user's values are in kvd */
        fprintf(stderr, TOOL_NAME ": nothing to move (GSettings uses %s)\n", on ? "kvd" : "dconf");
    }
    kvd_client_free(client);
    return status;
}
