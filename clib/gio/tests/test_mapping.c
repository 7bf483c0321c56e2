/* test_mapping.c — the GSettings path <-> kvd domain/key mapping is reversible and always makes
 * names kvd accepts (docs/reference/names-and-limits.md): fixed cases, then many random paths.
 * Run by run.sh. */
#include <stdio.h>
#include <string.h>

#include "../giokvd.h"

static int failures = 0;

static gboolean domain_ok(const char *domain) {
    size_t length = strlen(domain);
    if (length < 1 || length > 255 || domain[0] == '.' || domain[0] == '-') return FALSE;
    for (const char *c = domain; *c; c++)
        if (!g_ascii_isalnum(*c) && *c != '.' && *c != '_' && *c != '-') return FALSE;
    return TRUE;
}

static void check(const char *path, const char *want_domain, const char *want_key) {
    char *domain = NULL, *key = NULL;
    if (!giokvd_map_key(path, &domain, &key, NULL)) {
        printf("not mapped: %s\n", path);
        failures++;
        return;
    }
    char *back = giokvd_unmap_key(domain, key);
    if (!domain_ok(domain) || strlen(key) > 1024 || back == NULL || strcmp(back, path) != 0 ||
        (want_domain && strcmp(domain, want_domain) != 0) || (want_key && strcmp(key, want_key) != 0)) {
        printf("bad mapping: %s -> %s / %s -> %s\n", path, domain, key, back ? back : "(none)");
        failures++;
    }
    g_free(back);
    g_free(domain);
    g_free(key);
}

int main(void) {
    check("/org/gnome/desktop/interface/color-scheme", "org.gnome.desktop.interface", "color-scheme");
    check("/org/gnome/terminal/legacy/profiles:/:b1dcc9dd-5262/font", "org.gnome.terminal.legacy.profiles_3A._3Ab1dcc9dd-5262", "font");
    check("/a.b/c_d/-e/k", "a_2Eb.c_5Fd.-e", "k");
    check("/-x/k", "_2Dx", "k");
    check("/_2D/k", "_5F2D", "k");
    check("/top", "_", "top");
    check("/caf\xc3\xa9/k", "caf_C3_A9", "k");
    GRand *rand = g_rand_new_with_seed(28);
    static const char alphabet[] = "aZ09-._:/ \xc3\xa9";
    for (int round = 0; round < 20000; round++) {
        GString *path = g_string_new("/");
        int segments = g_rand_int_range(rand, 0, 6);
        for (int s = 0; s < segments; s++) {
            int length = g_rand_int_range(rand, 1, round % 10 == 0 ? 200 : 8);
            for (int i = 0; i < length; i++) {
                int pick = g_rand_int_range(rand, 0, (int)sizeof alphabet - 2);
                if (alphabet[pick] == '/') continue;
                if (alphabet[pick] == '\xc3') g_string_append(path, "\xc3\xa9");
                else g_string_append_c(path, alphabet[pick]);
            }
            if (path->str[path->len - 1] != '/') g_string_append_c(path, '/');
        }
        g_string_append(path, "key");
        if (g_utf8_validate(path->str, -1, NULL)) check(path->str, NULL, NULL);
        g_string_free(path, TRUE);
    }
    g_rand_free(rand);
    if (failures) return 1;
    printf("ok the path mapping: fixed cases and 20000 random paths map to valid kvd names and back\n");
    return 0;
}
