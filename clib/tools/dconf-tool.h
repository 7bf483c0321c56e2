/* dconf-tool.h — the parts of kvd-dconf-import (clib/tools/): the installed schemas, the import
 * of a `dconf dump` keyfile into kvd, the export of kvd's values as one, and the move at login
 * (kvctl --system gnome). Each part reports a failure as one line on stderr, prefixed with the
 * program's name, and returns a status: 0 done, 1 failed (nothing of the step is half-written where
 * the step says so). */
#ifndef KVD_DCONF_TOOL_H
#define KVD_DCONF_TOOL_H

#include <gio/gio.h>
#include <kvd.h>

#define TOOL_NAME "kvd-dconf-import"

/* The installed schemas: those with a path by path, and the relocatable ones' ids. */
typedef struct {
    GHashTable *fixed;  /* "/a/b/" -> GSettingsSchema* */
    char **relocatable; /* ids */
} Schemas;

Schemas schemas_load(void);
void schemas_clear(Schemas *schemas);
/* The schema of the folder `dir` ("/a/b/"): the installed one at that path, else the only
 * relocatable one that has every name in `names`; NULL when none is known to be it. A new ref. */
GSettingsSchema *schemas_for(const Schemas *schemas, const char *dir, GPtrArray *names);

/* The domain of kvd's own record of the move at login, and its key: "kvd" once the user's dconf
 * values were imported, "dconf" once kvd's were exported back. Neither import nor export touches
 * that domain's path (/io/kvd/gnome/). */
#define MOVE_DOMAIN "io.kvd.gnome"
#define MOVE_KEY "settingsIn"
#define MOVE_PATH "/io/kvd/gnome/"
/* The revision a move into kvd began at, while it is not done (an attempt that failed). */
#define MOVE_SINCE_KEY "movingSince"

/* How an import treats keys kvd already has or refuses (NULL rules: {.keep_after = -1}). */
typedef struct {
    /* >= 0: a key whose user value kvd changed after this revision keeps kvd's (named); -1: none. */
    int64_t keep_after;
    /* A key kvd refuses alone (its name, its value, a domain grown too large) is named and left
     * out, not a failure of the import (a lock always is). */
    gboolean skip_refused;
    /* If not NULL: gets the GSettings path (a new string) of every key written. */
    GPtrArray *written;
} ImportRules;

/* Writes every key of the keyfile `text` (what `dconf dump BASE` prints) into kvd, one atomic
 * Apply per kvd domain, after every value was parsed (a value that cannot be parsed: nothing is
 * written); a key the system layer locks is named on stderr and left out (kvd refuses its write). `imported` (if not NULL) gets the number of keys written. */
int dconf_import(kvd_client *client, const char *text, size_t length, const char *base, const ImportRules *rules,
                 size_t *imported);

/* The keyfile for `dconf load BASE` of every key of the user's own under BASE (never the system
 * layer's, never MOVE_PATH's), each with its schema's type, else the stored value's. With `known`
 * (a keyfile of the same groups), a key no installed schema describes is left out unless `known`
 * has it: kvd's other apps' domains stay out of dconf. A value no GVariant type holds (a date) is
 * named on stderr, counted in `skipped` and its path (a new string) added to `left_out` (a set; may
 * be NULL). NULL when kvd failed. */
GKeyFile *dconf_export(kvd_client *client, const char *base, GKeyFile *known, GHashTable *left_out, size_t *exported,
                       size_t *skipped);

/* The move at login: with GSETTINGS_BACKEND=kvd and the user's settings not yet in kvd, the
 * import of `dconf dump /`; without it and the settings in kvd, their export back into dconf
 * (keys reset under kvd are reset in dconf; only keys a schema describes or dconf holds, never
 * the domains of kvd's other apps); else nothing. Records which side holds them in kvd
 * (MOVE_DOMAIN) only after the step succeeded, so a failed step is tried again next login. */
int dconf_login(void);

#endif
