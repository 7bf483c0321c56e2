/* mapping.c — GSettings key paths to kvd domains and keys (the rule is in giokvd.h). */
#include "giokvd.h"

#include <string.h>

#define DOMAIN_MAX (GIOKVD_DOMAIN_SIZE - 1)

/* Whether E keeps the byte as it is (`leading`: the domain's first byte). */
static gboolean plain_byte(unsigned char c, gboolean leading) { return g_ascii_isalnum(c) || (c == '-' && !leading); }

/* The domain's bytes for the segment [from, to) escaped (E), its '.' before it unless it is the
 * first, appended to `out` (`*len` bytes so far) when they fit in DOMAIN_MAX; FALSE when not. */
static gboolean append_segment(char *out, size_t *len, const char *from, const char *to) {
    gboolean first = *len == 0;
    size_t needed = first ? 0 : 1;
    for (const char *c = from; c < to; c++) needed += plain_byte((unsigned char)*c, first && c == from) ? 1 : 3;
    if (*len + needed > DOMAIN_MAX) return FALSE;
    static const char HEX[] = "0123456789ABCDEF";
    if (!first) out[(*len)++] = '.';
    for (const char *c = from; c < to; c++) {
        unsigned char byte = (unsigned char)*c;
        if (plain_byte(byte, first && c == from)) {
            out[(*len)++] = (char)byte;
        } else {
            out[(*len)++] = '_';
            out[(*len)++] = HEX[byte >> 4];
            out[(*len)++] = HEX[byte & 15];
        }
    }
    return TRUE;
}

gboolean giokvd_map_key_in_place(const char *gsettings_key, char domain[GIOKVD_DOMAIN_SIZE], const char **key) {
    if (gsettings_key == NULL || gsettings_key[0] != '/') return FALSE;
    const char *name = strrchr(gsettings_key, '/') + 1;
    if (*name == '\0' || !g_utf8_validate(gsettings_key, -1, NULL)) return FALSE;
    size_t len = 0;
    const char *cursor = gsettings_key + 1;
    /* Whole segments into the domain while they fit (an empty one ends it). */
    for (const char *slash; (slash = strchr(cursor, '/')) != NULL && slash < name && slash > cursor; cursor = slash + 1)
        if (!append_segment(domain, &len, cursor, slash)) break;
    if (len == 0) {
        domain[len++] = '_';
        cursor = gsettings_key + 1;
    }
    domain[len] = '\0';
    *key = cursor;
    return TRUE;
}

gboolean giokvd_map_key(const char *gsettings_key, char **domain, char **key, char **prefix) {
    char mapped[GIOKVD_DOMAIN_SIZE];
    const char *cursor = NULL;
    if (!giokvd_map_key_in_place(gsettings_key, mapped, &cursor)) return FALSE;
    if (domain) *domain = g_strdup(mapped);
    if (key) *key = g_strdup(cursor);
    /* The path the domain stands for: the key's own bytes up to the segments taken. */
    if (prefix) *prefix = g_strndup(gsettings_key, (gsize)(cursor - gsettings_key));
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
