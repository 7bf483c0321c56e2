/* mapping.c — GSettings key paths to kvd domains and keys (the rule is in giokvd.h). */
#include "giokvd.h"

#include <string.h>

#define DOMAIN_MAX 255

static void escape_segment(GString *out, const char *segment, size_t length, gboolean domain_start) {
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)segment[i];
        gboolean plain = g_ascii_isalnum(c) || (c == '-' && !(domain_start && i == 0));
        if (plain) {
            g_string_append_c(out, (char)c);
        } else {
            g_string_append_printf(out, "_%02X", c);
        }
    }
}

gboolean giokvd_map_key(const char *gsettings_key, char **domain, char **key, char **prefix) {
    if (gsettings_key == NULL || gsettings_key[0] != '/') return FALSE;
    const char *name = strrchr(gsettings_key, '/') + 1;
    if (*name == '\0' || !g_utf8_validate(gsettings_key, -1, NULL)) return FALSE;
    GString *dom = g_string_new(NULL);
    GString *path = g_string_new("/");
    const char *cursor = gsettings_key + 1;
    /* Whole segments into the domain while they fit. */
    for (;;) {
        const char *slash = strchr(cursor, '/');
        if (slash == NULL || slash >= name) break;
        GString *piece = g_string_new(NULL);
        escape_segment(piece, cursor, (size_t)(slash - cursor), dom->len == 0);
        size_t needed = piece->len + (dom->len ? 1 : 0);
        if (slash == cursor || dom->len + needed > DOMAIN_MAX) {
            g_string_free(piece, TRUE);
            break;
        }
        if (dom->len) g_string_append_c(dom, '.');
        g_string_append_len(dom, piece->str, (gssize)piece->len);
        g_string_free(piece, TRUE);
        g_string_append_len(path, cursor, slash - cursor + 1);
        cursor = slash + 1;
    }
    if (dom->len == 0) {
        g_string_assign(dom, "_");
        g_string_assign(path, "/");
        cursor = gsettings_key + 1;
    }
    if (domain) *domain = g_string_free(dom, FALSE);
    else g_string_free(dom, TRUE);
    if (key) *key = g_strdup(cursor);
    if (prefix) *prefix = g_string_free(path, FALSE);
    else g_string_free(path, TRUE);
    return TRUE;
}

char *giokvd_unmap_key(const char *domain, const char *key) {
    if (domain == NULL || key == NULL || *key == '\0') return NULL;
    GString *path = g_string_new("/");
    if (strcmp(domain, "_") != 0) {
        for (const char *c = domain; *c; c++) {
            if (*c == '.') {
                g_string_append_c(path, '/');
            } else if (*c == '_') {
                if (!g_ascii_isxdigit(c[1]) || !g_ascii_isxdigit(c[2])) {
                    g_string_free(path, TRUE);
                    return NULL;
                }
                g_string_append_c(path, (char)(g_ascii_xdigit_value(c[1]) * 16 + g_ascii_xdigit_value(c[2])));
                c += 2;
            } else {
                g_string_append_c(path, *c);
            }
        }
        g_string_append_c(path, '/');
    }
    g_string_append(path, key);
    return g_string_free(path, FALSE);
}
