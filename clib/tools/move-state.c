/* move-state.c — the move at login's files beside kvd (move-state.h). */
#include "move-state.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>

#include "dconf-tool.h"

static char *state_file(const char *name) {
    return g_build_filename(g_get_user_state_dir(), "kvd", name, NULL);
}

static gboolean write_state(const char *name, const char *text, gsize length) {
    char *folder = g_build_filename(g_get_user_state_dir(), "kvd", NULL);
    char *path = state_file(name);
    GError *error = NULL;
    gboolean ok = g_mkdir_with_parents(folder, 0700) == 0 &&
                  g_file_set_contents_full(path, text, (gssize)length, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &error);
    if (!ok) fprintf(stderr, TOOL_NAME ": cannot write %s: %s\n", path, error ? error->message : g_strerror(errno));
    g_clear_error(&error);
    g_free(path);
    g_free(folder);
    return ok;
}

static void forget(const char *name) {
    char *path = state_file(name);
    g_unlink(path);
    g_free(path);
}

gboolean pending_marker_exists(void) {
    char *path = state_file("dconf-move-pending");
    gboolean exists = g_file_test(path, G_FILE_TEST_EXISTS);
    g_free(path);
    return exists;
}

void write_pending_marker(void) {
    static const char text[] = "a move into kvd was tried while kvd could not be reached\n";
    write_state("dconf-move-pending", text, sizeof text - 1);
}

void remove_pending_marker(void) {
    forget("dconf-move-pending");
}

static int save_paths(const char *name, GPtrArray *paths) {
    GString *text = g_string_new(NULL);
    for (guint i = 0; i < paths->len; i++)
        if (paths->pdata[i]) g_string_append_printf(text, "%s\n", (char *)paths->pdata[i]);
    gboolean ok = write_state(name, text->str, text->len);
    g_string_free(text, TRUE);
    return ok ? 0 : 1;
}

static GHashTable *load_paths(const char *name) {
    GHashTable *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    char *path = state_file(name);
    char *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL)) {
        char **lines = g_strsplit(text, "\n", -1);
        for (char **line = lines; *line; line++)
            if (**line == '/') g_hash_table_add(set, g_strdup(*line));
        g_strfreev(lines);
    }
    g_free(text);
    g_free(path);
    return set;
}

int save_moved_in(GPtrArray *paths) {
    return save_paths("dconf-moved-in", paths);
}

GHashTable *load_moved_in(void) {
    return load_paths("dconf-moved-in");
}

void forget_moved_in(void) {
    forget("dconf-moved-in");
}

int save_moved_out(GPtrArray *paths) {
    return save_paths("dconf-moved-out", paths);
}

GHashTable *load_moved_out(void) {
    return load_paths("dconf-moved-out");
}

void forget_moved_out(void) {
    forget("dconf-moved-out");
}

GVariant *load_move_out(void) {
    char *path = state_file("dconf-move-out");
    GMappedFile *file = g_mapped_file_new(path, FALSE, NULL);
    g_free(path);
    if (file == NULL) return NULL;
    GBytes *bytes = g_mapped_file_get_bytes(file);
    g_mapped_file_unref(file);
    GVariant *record = g_variant_ref_sink(g_variant_new_from_bytes(G_VARIANT_TYPE("(sa{smv})"), bytes, FALSE));
    g_bytes_unref(bytes);
    if (g_variant_is_normal_form(record)) return record;
    fprintf(stderr, TOOL_NAME ": the record of the move back begun is damaged; not used\n");
    g_variant_unref(record);
    return NULL;
}

int save_move_out(GVariant *record) {
    return write_state("dconf-move-out", (const char *)g_variant_get_data(record), g_variant_get_size(record)) ? 0 : 1;
}

void forget_move_out(void) {
    forget("dconf-move-out");
}
