/* giokvd.h — internals of libgiokvd.so, kvd's GSettingsBackend (clib/gio/).
 *
 * The mapping between GSettings and kvd, as docs/gsettings.md documents it:
 *
 * Paths. A GSettings key "/s1/s2/.../sN/name" goes to kvd domain "E(s1).E(s2)...E(sN)" and key
 * "name". E keeps the bytes A-Z a-z 0-9 and '-' (not a leading '-' of the domain) and writes every
 * other byte as '_' and two upper-case hex digits ("." is "_2E", ":" is "_3A", "_" is "_5F"), so
 * '.' only ever separates segments and '_' only ever starts an escape: the mapping is reversible
 * and no path is refused. A domain holds as many leading segments as fit in kvd's 255 bytes; the
 * rest stay in the key, raw, separated by '/' ("sK/.../sN/name"). A key at the root, or whose first
 * segment alone is too long, goes to domain "_" (a lone '_' is no escape: it is the empty path).
 * Key names that are not UTF-8 cannot be kvd keys: they are not writable and read as defaults.
 *
 * Values. The natural kvd type where one exists: b bool; y n q i u x h-less integers, and t up to
 * 2^63-1, as integer; d (finite) as real; s o g as string; ay as data; arrays of those as arrays;
 * dictionaries a{sT} with keys in ascending byte order as dictionaries; a variant v when its
 * contents read back with the same type by the inference below (bool b, integer x, real d,
 * string s, data ay, array of one of b x d s -> aT, empty array as, other arrays av, dictionary
 * a{sv}). Every other value, and a dictionary that would look like the tagged form, is stored
 * tagged: the dictionary {"gvariant": TYPE, "text": g_variant_print(value, TRUE)}, read back with
 * g_variant_parse, or, when that parse would not give the value back (GLib refuses subnormal
 * doubles), {"gvariant": TYPE, "data": the value's normal-form little-endian serialization}. A value read is converted to the schema's type; one that does not convert
 * (another program stored something else) reads as the schema's default.
 */
#ifndef GIOKVD_H
#define GIOKVD_H

#include <glib.h>
#include <kvd.h>

/* The kvd domain and key of a GSettings key; false when the key cannot be mapped (not UTF-8).
 * `prefix` (if not NULL) gets the GSettings path the domain stands for ("/org/gnome/a/"). */
gboolean giokvd_map_key(const char *gsettings_key, char **domain, char **key, char **prefix);

/* giokvd_map_key with nothing allocated: the domain into `domain` (NUL-terminated), `*key` the
 * key's bytes in `gsettings_key` (the prefix is the bytes before them). */
#define GIOKVD_DOMAIN_SIZE 256
gboolean giokvd_map_key_in_place(const char *gsettings_key, char domain[GIOKVD_DOMAIN_SIZE], const char **key);

/* The reverse: the GSettings key of a kvd domain and key (a new string), NULL when the domain
 * is not one the mapping makes (a '_' without two hex digits). */
char *giokvd_unmap_key(const char *domain, const char *key);

/* The value's kvd form (natural or tagged); NULL only when out of memory. */
kvd_value *giokvd_to_kvd(GVariant *value);
/* The value's kvd form when no schema will give its type back (kvd-dconf-import, a key no
 * installed schema has): the natural form if giokvd_guess_type of it is the value's type (a b, x,
 * d, s, ay, ...), else the tagged form (a uint32 9 is {"gvariant": "u", "text": "uint32 9"}). */
kvd_value *giokvd_to_kvd_keeping_type(GVariant *value);
/* The type of a value when no schema says (kvd-dconf-import --export): a tagged value's own type,
 * else the inference above (integers as x); NULL for a date. A new string. */
char *giokvd_guess_type(const kvd_value *value);
/* The value read back as `type` (a new reference, not floating), or NULL when it does not convert. */
GVariant *giokvd_from_kvd(const kvd_value *value, const GVariantType *type);

/* The current state a stream starts with (start.c): each domain's values as the JSON kvd sent
 * (kvd_watch_all_current_raw_new), copied into a few large chunks and found by name (binary
 * search), so that the domains of the store cost no allocation each and only those used are
 * decoded. Not thread-safe. */
typedef struct GiokvdStart GiokvdStart;
GiokvdStart *giokvd_start_new(void);
/* NULL does nothing. */
void giokvd_start_free(GiokvdStart *start);
/* Copies in a domain's values (`domain` not withheld); a domain added twice keeps the last. */
void giokvd_start_add(GiokvdStart *start, const kvd_current_raw *domain);
/* Takes a domain's values out: TRUE, `*domain` filled (its strings valid until the start is
 * freed), unless `start` is NULL, has no values of `name` or gave them already. */
gboolean giokvd_start_take(GiokvdStart *start, const char *name, kvd_current_raw *domain);
/* What the values not taken yet take in memory, about; 0 for NULL. */
gsize giokvd_start_bytes(GiokvdStart *start);

/* The writer (writer.c): the backend's writes, queued and sent on a thread of its own.
 *
 * A write is queued (giokvd_writer_queue) and the caller returns at once; until it is settled,
 * giokvd_writer_lookup gives it back, so a read right after a write gives the written value.
 * While a batch is in flight, writes merge into the queued changes: one value per key queued,
 * one in flight, whatever the number of writes. Each domain's queued changes go as one Apply
 * (atomic), a connection of the writer's own, timeout KVD_DEFAULT_TIMEOUT_MS. Each change
 * sent is then settled: `settle` is called (with the owner's lock held, the change no longer
 * looked up) with the commit's revision, or -1 when it failed (logged: a locked key g_debug, any
 * other failure g_warning, "cannot write KEY: why"), and adds to `changed` the GSettings keys
 * (new strings) whose value the app sees changed by that; `announce` is then called for each,
 * without the lock, on the writer's thread. An Apply kvd refuses for one key (KeyLocked,
 * TooLarge, InvalidValue, InvalidName) is sent again key by key: only the refused keys fail.
 * A batch kvd does not answer within the timeout fails, and the changesets queued when it did
 * fail at once after it, unsent (a sync waits one timeout, not one per domain).
 * giokvd_writer_sync waits until nothing is queued or in flight. Writes not yet sent when the
 * process exits are lost (as dconf's): an app calls g_settings_sync first (g_application_run
 * does). In a child of fork(), the parent's queue is the parent's to send: the child's writer
 * keeps it as a read-only overlay that giokvd_writer_lookup still gives (until the child queues
 * the key itself), never sent, and has a thread of its own. */
typedef struct GiokvdWriter GiokvdWriter;
/* One key's write: `value` NULL removes the key. Owned by the writer. */
typedef struct {
    char *gsettings_key;
    char *kvd_key;
    kvd_value *value;
} GiokvdChange;
typedef void (*GiokvdWriterSettle)(gpointer data, const char *domain, const GiokvdChange *change, int64_t revision,
                                   GPtrArray *changed);
typedef void (*GiokvdWriterAnnounce)(gpointer data, const char *gsettings_key);

/* A writer whose state `lock` (the owner's, which outlives it) guards; starts its thread. */
GiokvdWriter *giokvd_writer_new(GMutex *lock, GiokvdWriterSettle settle, GiokvdWriterAnnounce announce, gpointer data);
/* Sends what is queued, then stops the thread and frees the writer (blocks meanwhile). Without
 * the lock. NULL does nothing. */
void giokvd_writer_free(GiokvdWriter *writer);
/* Needs the lock: queues `value` (taken; NULL removes the key) for `kvd_key` of `domain`,
 * replacing a value queued before for it. */
void giokvd_writer_queue(GiokvdWriter *writer, const char *domain, const char *gsettings_key, const char *kvd_key,
                         kvd_value *value);
/* Needs the lock: whether a write of the key is queued or in flight; `*value` (if not NULL) gets
 * the newest (NULL for a removal), the writer's, valid while the lock is held. */
gboolean giokvd_writer_lookup(GiokvdWriter *writer, const char *domain, const char *kvd_key, const kvd_value **value);
/* Without the lock: returns once every write queued is settled (durable in kvd, or failed). */
void giokvd_writer_sync(GiokvdWriter *writer);

#endif
