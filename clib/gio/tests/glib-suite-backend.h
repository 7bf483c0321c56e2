/* glib-suite-backend.h — included first (cc -include) into GLib's gio/tests/gsettings.c by
 * glib-suite.sh, so that GLib's suite runs whole on kvd.
 *
 * gsettings.c registers 8 of its 49 tests (no-schema, unknown-key, wrong-type, wrong-path,
 * no-path, typesafe-binding, no-read-binding, no-write-binding) and some checks inside others
 * (of g_test_undefined) only when GSETTINGS_BACKEND is not set when it starts; then it sets
 * GSETTINGS_BACKEND=memory itself, for itself and the subprocesses it traps. This header turns
 * that one g_setenv into GSETTINGS_BACKEND=$GLIB_SUITE_BACKEND when that is set, and changes
 * nothing else: the suite then runs as GLib's own CI runs it, on kvd instead of memory. */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

static inline gboolean glib_suite_setenv(const gchar *variable, const gchar *value, gboolean overwrite) {
    const char *backend = getenv("GLIB_SUITE_BACKEND");
    if (backend && *backend && strcmp(variable, "GSETTINGS_BACKEND") == 0 && strcmp(value, "memory") == 0)
        value = backend;
    return g_setenv(variable, value, overwrite);
}
#define g_setenv glib_suite_setenv
