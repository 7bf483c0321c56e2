/* kvd-dconf-import — moves dconf settings into kvd: `dconf dump / | kvd-dconf-import [PATH]`, and
 * back: `kvd-dconf-import --export [PATH] | dconf load PATH`; `--login` makes the move the
 * machine's switch asks for (kvctl --system gnome; dconf-tool.h).
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
#include <stdio.h>
#include <string.h>

#include "dconf-tool.h"

static int usage(void) {
    fprintf(stderr, "usage: dconf dump PATH | " TOOL_NAME " [PATH]; " TOOL_NAME " --export [PATH] | dconf load PATH; " TOOL_NAME
                    " --login   (PATH starts and ends with '/', default /)\n");
    return 2;
}

static int connect_client(kvd_client **client) {
    kvd_error error = KVD_ERROR_INIT;
    if (kvd_connect(NULL, client, &error) == KVD_OK) return 0;
    fprintf(stderr, TOOL_NAME ": %s\n", error.message);
    kvd_error_clear(&error);
    return 1;
}

static int export_to_stdout(const char *base) {
    kvd_client *client = NULL;
    if (connect_client(&client) != 0) return 1;
    size_t exported = 0, skipped = 0;
    GKeyFile *out = dconf_export(client, base, NULL, NULL, &exported, &skipped);
    kvd_client_free(client);
    if (out == NULL) return 1;
    gsize length = 0;
    char *text = g_key_file_to_data(out, &length, NULL);
    fwrite(text, 1, length, stdout);
    fprintf(stderr, TOOL_NAME ": exported %zu keys%s\n", exported, skipped ? " (some left out, see above)" : "");
    g_free(text);
    g_key_file_free(out);
    return skipped ? 1 : 0;
}

static int import_from_stdin(const char *base) {
    GString *input = g_string_new(NULL);
    char buffer[65536];
    size_t got;
    while ((got = fread(buffer, 1, sizeof buffer, stdin)) > 0) g_string_append_len(input, buffer, (gssize)got);
    kvd_client *client = NULL;
    int status = connect_client(&client);
    if (status == 0) status = dconf_import(client, input->str, input->len, base, NULL, NULL);
    kvd_client_free(client);
    g_string_free(input, TRUE);
    return status;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf(TOOL_NAME " %s\n", KVD_VERSION);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--login") == 0) return dconf_login();
    gboolean export = argc > 1 && strcmp(argv[1], "--export") == 0;
    int first = export ? 2 : 1;
    const char *base = argc > first ? argv[first] : "/";
    if (argc > first + 1 || base[0] != '/' || !g_str_has_suffix(base, "/")) return usage();
    return export ? export_to_stdout(base) : import_from_stdin(base);
}
