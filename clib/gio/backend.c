/* backend.c — KvdSettingsBackend, the GSettingsBackend "kvd" (libgiokvd.so).
 *
 * Reads come from an in-process cache kept current by ONE kvd WatchAll for the whole process (every
 * domain's changes on one descriptor), dispatched on a worker thread with its own GMainContext (a
 * GSource on kvd_watch_fd), whatever the app's main loop does. The stream starts with the current
 * values of every domain (kvd_watch_all_current_raw_new), all at one (revision, system revision),
 * kept as the JSON kvd sent (`current`: a few large chunks and an index by name, start.c) until a
 * GSettings object first touches the domain, which then decodes and takes them with no round
 * trip; the stream's events of an untouched domain update its stored values (decoded then, into
 * `stored`; a domain created later starts there), while they take at most STORED_MAX bytes (past
 * it, the domain is only named, as kvd names those it withholds). A domain
 * kvd withheld (too large for its budget), or any domain when kvd is older than the current state,
 * is read once when first touched (kvd_read_domain: a Snapshot on the request connection; a domain
 * too large for one reply in pieces by a Watch on a connection closed after); the stream's events
 * of it that come during the read are held, then taken if newer than the (revision, system
 * revision) the read was at, so none is lost or taken twice. GLib delivers `changed` and `writable-changed` to each
 * GSettings object in the main context it was made in.
 * Writes never wait for kvd: they are queued to the writer (writer.c, its own thread and
 * connection), read back at once from its queue and announced; g_settings_sync waits until kvd
 * acknowledged them durable. The cache holds what kvd holds: a write kvd acknowledged at revision R
 * goes into it unless a read or the stream already showed the domain at R or later (`own` then
 * keeps older news of the key, at a revision before R, out of the cache; the stream's event of
 * that commit finds nothing new, so an app's own write is announced once); a write that failed
 * leaves it, so the app sees kvd's value again, announced.
 * Descriptors: the request connection, the stream, the writer's connection, and one read's while it
 * lasts, however many domains. A dead stream (kvd stopped or restarted) is made again every second
 * by the worker; its current state replaces the cache of every domain (those withheld are read
 * again), announcing what differs.
 * When kvd cannot be reached, reads give the schema defaults, writes are reverted with a warning
 * that says why, and no read waits longer than the connection's timeout (GIOKVD_TIMEOUT_MS, 3 s);
 * after a failure the app's thread does not try again for a second (the worker does). A write of a
 * key known locked returns FALSE at once, quietly, as dconf's (g_debug).
 */
#define G_SETTINGS_ENABLE_BACKEND
#include <gio/gio.h>
#include <gio/gsettingsbackend.h>
#include <glib-unix.h>

#include <string.h>

#include "giokvd.h"

#define GIOKVD_TIMEOUT_MS 3000
#define RETRY_SECONDS 1
/* The most GSettings keys whose mapping is remembered (then the memory starts over). */
#define KEY_CACHE_MAX 4096
/* The most the stored values of untouched domains take (about, see stored_cost): a change that
 * would take them past it leaves its domain named only, to be read when touched. */
#define STORED_MAX (8 << 20)

/* A watch event of a domain being read, kept until the read is taken (then replayed in order); or
 * an untouched domain's stored values (`stored`: the changes at the (revision, system revision) of
 * the last event taken, a value NULL only for a key locked without one; or the stream's current
 * state of it, decoded when it is touched: take_untouched). */
typedef struct {
    int64_t revision, system_revision;
    size_t count;
    kvd_change *changes; /* keys and values owned */
} Held;

typedef struct {
    char *name;        /* the kvd domain */
    char *prefix;      /* the GSettings path it stands for, "/org/gnome/a/" */
    GHashTable *values; /* kvd key -> kvd_value* */
    /* Made when first needed (most domains have none; has_key, add_key, remove_key): */
    GHashTable *locked; /* kvd key -> 1 for keys the system layer locks */
    GHashTable *system; /* kvd key -> 1 for values from the system layer */
    GHashTable *own;    /* kvd key -> gint64*: the revision of an own commit of it the cache has but its reads and
                         * the stream have not shown yet */
    /* The (revision, system revision) the cache is at: the stream's events at or before it are in it
     * (an own commit acknowledged at or before `revision` is too). */
    int64_t revision, system_revision;
    gboolean loaded;  /* read on the current stream: its events keep the cache current */
    gboolean reading; /* a read is on its way: the stream's events are held */
    GPtrArray *held;  /* Held*, in stream order, while reading */
} Domain;

typedef struct {
    GSettingsBackend parent_instance;
    GMutex lock;
    kvd_client *client;
    GHashTable *domains; /* name -> Domain* */
    GHashTable *keys;    /* GSettings key -> KeyRef*: the mapping of the keys read, so a read maps nothing */
    gint64 quiet_until;  /* monotonic µs: no connecting from the app's threads before then */
    GMainContext *context;
    GMainLoop *loop;
    GThread *thread;
    /* The one WatchAll of the process (every domain's changes), dispatched on the worker. */
    GMutex stream_lock;  /* held while the stream is made (taken before lock, never inside it) */
    kvd_watch *stream;   /* under lock; NULL while there is none */
    GSource *stream_source;
    guint stream_generation; /* counts the streams made: a read taken on an older one is stale */
    gpointer stream_notes;   /* Notes of the stream's events (the worker's) */
    GiokvdWriter *writer;    /* the writes, queued and sent (writer.c); guarded by `lock` */
    /* The current stream's current state of the domains not touched yet (under lock): */
    gboolean known;          /* it came: an untouched domain neither stored nor withheld is empty */
    GiokvdStart *current;    /* the values kvd sent as it began, of those its events have not changed */
    GHashTable *stored;      /* name -> Held*: the values of those its events changed (or made) */
    GHashTable *withheld;    /* name -> 1: to be read when touched (too large for kvd's or our budget) */
    gsize stored_bytes;      /* what `stored` takes, about */
    int64_t start_revision, start_system_revision; /* the (revision, system revision) it was at */
} KvdSettingsBackend;

typedef GSettingsBackendClass KvdSettingsBackendClass;

/* A GSettings key's domain (never freed before the backend) and kvd key. */
typedef struct {
    Domain *domain;
    char *kvd_key;
} KeyRef;

static void key_ref_free(gpointer data) {
    KeyRef *ref = data;
    g_free(ref->kvd_key);
    g_free(ref);
}

static GType kvd_settings_backend_get_type(void);
G_DEFINE_DYNAMIC_TYPE(KvdSettingsBackend, kvd_settings_backend, G_TYPE_SETTINGS_BACKEND)

#define KVD_SETTINGS_BACKEND(o) ((KvdSettingsBackend *)(o))

/* The current state a stream starts with, gathered (without the lock) as it is made. */
typedef struct {
    GiokvdStart *current; /* the values of each domain kvd sent */
    GHashTable *withheld; /* name -> 1 */
    int64_t revision, system_revision;
} Start;

/* What watch events changed, announced once the lock is released. */
typedef struct {
    KvdSettingsBackend *backend;
    Domain *domain;      /* the domain of the event being taken */
    guint generation;    /* a read: the stream it was made on */
    GPtrArray *changed;  /* GSettings keys */
    GPtrArray *writable; /* GSettings keys whose lock changed */
    Start *start;        /* the stream's: while it is made, its current state */
} Notes;

static void held_free(gpointer data) {
    Held *held = data;
    for (size_t i = 0; i < held->count; i++) {
        g_free((char *)held->changes[i].key);
        kvd_value_free((kvd_value *)held->changes[i].value);
    }
    g_free(held->changes);
    g_free(held);
}

static void domain_free(Domain *domain) {
    g_hash_table_unref(domain->values);
    g_clear_pointer(&domain->locked, g_hash_table_unref);
    g_clear_pointer(&domain->system, g_hash_table_unref);
    g_clear_pointer(&domain->own, g_hash_table_unref);
    g_ptr_array_unref(domain->held);
    g_free(domain->name);
    g_free(domain->prefix);
    g_free(domain);
}

/* A domain's set of keys (locked, system; `own` is a map), NULL until a key is added: whether it
 * has `key`. */
static gboolean has_key(GHashTable *set, const char *key) { return set != NULL && g_hash_table_contains(set, key); }

static void add_key(GHashTable **set, const char *key) {
    if (*set == NULL) *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_hash_table_add(*set, g_strdup(key));
}

static void remove_key(GHashTable *set, const char *key) {
    if (set != NULL && g_hash_table_size(set) > 0) g_hash_table_remove(set, key);
}

static guint key_count(GHashTable *set) { return set ? g_hash_table_size(set) : 0; }

/* Needs the lock. */
static kvd_status ensure_client(KvdSettingsBackend *self, kvd_error *error) {
    if (self->client) return KVD_OK;
    kvd_connect_options options = KVD_CONNECT_OPTIONS_INIT;
    options.timeout_ms = GIOKVD_TIMEOUT_MS;
    return kvd_connect(&options, &self->client, error);
}

static void announce(Notes *notes) {
    for (guint i = 0; i < notes->changed->len; i++)
        g_settings_backend_changed(G_SETTINGS_BACKEND(notes->backend), notes->changed->pdata[i], NULL);
    for (guint i = 0; i < notes->writable->len; i++)
        g_settings_backend_writable_changed(G_SETTINGS_BACKEND(notes->backend), notes->writable->pdata[i]);
    g_ptr_array_set_size(notes->changed, 0);
    g_ptr_array_set_size(notes->writable, 0);
}

/* Needs the lock: whether an own commit of the key, later than `revision`, has been acknowledged
 * but not yet shown by a read or the stream (then news at `revision` is older: the stream's events
 * arrive in commit order, and a read at `revision` was made before the commit). News at or after it
 * ends the wait. */
static gboolean own_commit_is_newer(Domain *domain, const char *key, int64_t revision) {
    const gint64 *own = domain->own ? g_hash_table_lookup(domain->own, key) : NULL;
    if (own && *own > revision) return TRUE;
    if (own) g_hash_table_remove(domain->own, key);
    return FALSE;
}

/* Needs the lock: records one key's new state at `revision` (a read's or an event's), noting what
 * changed. The cache holds what kvd holds; a write queued or in flight (the writer's) hides it from
 * the app, so a change under one is not announced (the app sees the write). */
static void take_change(Notes *notes, const char *key, const kvd_value *value, kvd_source source, int64_t revision) {
    Domain *domain = notes->domain;
    const kvd_value *old = g_hash_table_lookup(domain->values, key);
    gboolean was_locked = has_key(domain->locked, key);
    gboolean is_locked = source == KVD_SOURCE_LOCKED;
    gboolean same = (old == NULL && value == NULL) || (old && value && kvd_value_equal(old, value));
    gboolean older = own_commit_is_newer(domain, key, revision);
    if (!same && !older) {
        if (value) g_hash_table_replace(domain->values, g_strdup(key), kvd_value_copy(value));
        else g_hash_table_remove(domain->values, key);
        if (!giokvd_writer_lookup(notes->backend->writer, domain->name, key, NULL))
            g_ptr_array_add(notes->changed, g_strconcat(domain->prefix, key, NULL));
    }
    if (!older && source == KVD_SOURCE_SYSTEM && value) add_key(&domain->system, key);
    else if (!older) remove_key(domain->system, key);
    if (is_locked != was_locked) {
        if (is_locked) add_key(&domain->locked, key);
        else remove_key(domain->locked, key);
        g_ptr_array_add(notes->writable, g_strconcat(domain->prefix, key, NULL));
    }
}

/* Needs the lock: the domain's current values, read at `revision`, replace the cache; whatever it
 * had and they lack is gone (but for a key of an own commit acknowledged after `revision`). */
static void take_current(Notes *notes, const kvd_change *changes, size_t count, int64_t revision) {
    GHashTable *present = g_hash_table_new(g_str_hash, g_str_equal);
    for (size_t i = 0; i < count; i++) g_hash_table_add(present, (gpointer)changes[i].key);
    GPtrArray *gone = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter iter;
    gpointer key;
    g_hash_table_iter_init(&iter, notes->domain->values);
    while (g_hash_table_iter_next(&iter, &key, NULL))
        if (!g_hash_table_contains(present, key)) g_ptr_array_add(gone, g_strdup(key));
    if (notes->domain->locked) {
        g_hash_table_iter_init(&iter, notes->domain->locked);
        while (g_hash_table_iter_next(&iter, &key, NULL))
            if (!g_hash_table_contains(present, key)) g_ptr_array_add(gone, g_strdup(key));
    }
    for (guint i = 0; i < gone->len; i++) take_change(notes, gone->pdata[i], NULL, KVD_SOURCE_USER, revision);
    g_ptr_array_unref(gone);
    g_hash_table_unref(present);
    for (size_t i = 0; i < count; i++) take_change(notes, changes[i].key, changes[i].value, changes[i].source, revision);
}

/* Whether an event at (revision, system_revision) is newer than what the domain's cache holds. */
static gboolean is_newer(const Domain *domain, int64_t revision, int64_t system_revision) {
    return revision > domain->revision || (revision == domain->revision && system_revision > domain->system_revision);
}

/* Needs the lock: takes one change event of the domain at (revision, system_revision). */
static void take_event(Notes *notes, int64_t revision, int64_t system_revision, const kvd_change *changes, size_t count) {
    Domain *domain = notes->domain;
    if (!is_newer(domain, revision, system_revision)) return; /* the read had it */
    for (size_t i = 0; i < count; i++) take_change(notes, changes[i].key, changes[i].value, changes[i].source, revision);
    domain->revision = revision;
    domain->system_revision = system_revision;
}

/* kvd_read_domain's callback (the reading thread): the cache takes the current values, then the
 * stream's events held meanwhile; the domain is loaded if the stream it was read on still runs. */
static void on_read(const kvd_watch_all_event *event, void *user_data) {
    Notes *notes = user_data;
    Domain *domain = notes->domain;
    g_mutex_lock(&notes->backend->lock);
    take_current(notes, event->changes, event->count, event->revision);
    domain->revision = event->revision;
    domain->system_revision = event->system_revision;
    for (guint i = 0; i < domain->held->len; i++) {
        Held *held = domain->held->pdata[i];
        take_event(notes, held->revision, held->system_revision, held->changes, held->count);
    }
    g_ptr_array_set_size(domain->held, 0);
    domain->loaded = notes->backend->stream != NULL && notes->backend->stream_generation == notes->generation;
    g_mutex_unlock(&notes->backend->lock);
}

static Held *held_copy(int64_t revision, int64_t system_revision, const kvd_change *changes, size_t count) {
    Held *held = g_new0(Held, 1);
    held->revision = revision;
    held->system_revision = system_revision;
    held->count = count;
    held->changes = g_new0(kvd_change, count ? count : 1);
    for (size_t i = 0; i < count; i++) {
        held->changes[i].key = g_strdup(changes[i].key);
        held->changes[i].value = changes[i].value ? kvd_value_copy(changes[i].value) : NULL;
        held->changes[i].source = changes[i].source;
    }
    return held;
}

static Held *held_new(const kvd_watch_all_event *event) {
    return held_copy(event->revision, event->system_revision, event->changes, event->count);
}

/* What a value takes in memory, about (its bytes, and a few words per node). */
static gsize value_cost(const kvd_value *value) {
    size_t length = 0;
    gsize cost = 32;
    switch (value ? kvd_value_type(value) : KVD_TYPE_BOOL) {
    case KVD_TYPE_STRING: kvd_value_get_string(value, &length); return cost + length;
    case KVD_TYPE_DATA: kvd_value_get_data(value, &length); return cost + length;
    case KVD_TYPE_ARRAY:
        for (size_t i = 0; i < kvd_value_array_length(value); i++) cost += value_cost(kvd_value_array_get(value, i));
        return cost;
    case KVD_TYPE_DICT:
        for (size_t i = 0; i < kvd_value_dict_length(value); i++) {
            kvd_value_dict_key_at(value, i, &length);
            cost += length + 16 + value_cost(kvd_value_dict_value_at(value, i));
        }
        return cost;
    default: return cost;
    }
}

/* What a stored domain takes in memory, about. */
static gsize stored_cost(const Held *held) {
    gsize cost = sizeof *held;
    for (size_t i = 0; i < held->count; i++)
        cost += sizeof held->changes[i] + strlen(held->changes[i].key) + 1 + value_cost(held->changes[i].value);
    return cost;
}

/* The stored values of a domain with an event's changes taken (a new Held; `stored` may be NULL:
 * the domain was empty): a key the event names takes its state from it, and is kept while it has
 * a value or a lock. */
static Held *stored_with(const Held *stored, const kvd_watch_all_event *event) {
    GHashTable *named = g_hash_table_new(g_str_hash, g_str_equal);
    for (size_t i = 0; i < event->count; i++) g_hash_table_add(named, (gpointer)event->changes[i].key);
    size_t old = stored ? stored->count : 0;
    kvd_change *kept = g_new0(kvd_change, old + event->count + 1);
    size_t count = 0;
    for (size_t i = 0; i < old; i++)
        if (!g_hash_table_contains(named, stored->changes[i].key)) kept[count++] = stored->changes[i];
    for (size_t i = 0; i < event->count; i++)
        if (event->changes[i].value || event->changes[i].source == KVD_SOURCE_LOCKED) kept[count++] = event->changes[i];
    Held *held = held_copy(event->revision, event->system_revision, kept, count);
    g_free(kept);
    g_hash_table_unref(named);
    return held;
}

/* Needs the lock: the stored values of a domain not touched yet, taken out into `*held` (NULL: it
 * has none, it is empty): those its events made (`stored`), else the stream's current state of
 * it, decoded now (kvd_changes_from_json's keys and values are malloc'd, which g_free and
 * kvd_value_free free). FALSE when kvd sent values that do not decode (then it is read apart). */
static gboolean take_untouched(KvdSettingsBackend *self, const char *name, Held **held) {
    gpointer key = NULL;
    *held = NULL;
    if (g_hash_table_steal_extended(self->stored, name, &key, (gpointer *)held)) {
        self->stored_bytes -= stored_cost(*held);
        g_free(key);
        return TRUE;
    }
    kvd_current_raw raw;
    if (!giokvd_start_take(self->current, name, &raw)) return TRUE;
    kvd_error error = KVD_ERROR_INIT;
    Held decoded = {raw.revision, raw.system_revision, 0, NULL};
    if (kvd_changes_from_json(raw.changes_json, raw.changes_json_len, &decoded.changes, &decoded.count, &error) != KVD_OK) {
        g_debug("kvd GSettings backend: the current state of %s does not decode: %s", name, error.message);
        kvd_error_clear(&error);
        return FALSE;
    }
    *held = g_new(Held, 1);
    **held = decoded;
    return TRUE;
}

/* Needs the lock: an event of a domain not touched yet, taken into its stored values (while they
 * stay under STORED_MAX: past it, the domain is named to be read when touched). */
static void store_event(KvdSettingsBackend *self, const kvd_watch_all_event *event) {
    if (!self->known || g_hash_table_contains(self->withheld, event->domain)) return;
    Held *old = NULL;
    gboolean decoded = take_untouched(self, event->domain, &old);
    Held *now = decoded ? stored_with(old, event) : NULL; /* the event after what it follows */
    gsize after = now ? stored_cost(now) : 0;
    if (old) held_free(old);
    if (now == NULL || self->stored_bytes + giokvd_start_bytes(self->current) + after > STORED_MAX) {
        if (now) held_free(now);
        g_hash_table_add(self->withheld, g_strdup(event->domain));
        return;
    }
    if (now->count == 0) {
        held_free(now);
        return;
    }
    self->stored_bytes += after;
    g_hash_table_insert(self->stored, g_strdup(event->domain), now);
}

/* The stream's callback (the worker): a loaded domain takes the event, a domain being read holds
 * it; the others (not touched, or to be read again) need nothing of it. */
static void on_stream_event(const kvd_watch_all_event *event, void *user_data) {
    Notes *notes = user_data;
    if (event->domain == NULL) { /* the first event: the stream has begun, at the current state's revisions */
        if (notes->start) {
            notes->start->revision = event->revision;
            notes->start->system_revision = event->system_revision;
        }
        return;
    }
    g_mutex_lock(&notes->backend->lock);
    Domain *domain = g_hash_table_lookup(notes->backend->domains, event->domain);
    if (domain && domain->reading) g_ptr_array_add(domain->held, held_new(event));
    else if (domain && domain->loaded) {
        notes->domain = domain;
        take_event(notes, event->revision, event->system_revision, event->changes, event->count);
    } else if (domain == NULL) {
        store_event(notes->backend, event);
    }
    g_mutex_unlock(&notes->backend->lock);
}

static Notes *notes_new(KvdSettingsBackend *self, Domain *domain) {
    Notes *notes = g_new0(Notes, 1);
    notes->backend = self;
    notes->domain = domain;
    notes->changed = g_ptr_array_new_with_free_func(g_free);
    notes->writable = g_ptr_array_new_with_free_func(g_free);
    return notes;
}

static void notes_free(gpointer data) {
    Notes *notes = data;
    if (notes == NULL) return;
    g_ptr_array_unref(notes->changed);
    g_ptr_array_unref(notes->writable);
    g_free(notes);
}

static gboolean stream_ready(gint fd, GIOCondition condition, gpointer user_data);

/* kvd_watch_all_current_raw_new's callback, as the stream is made (without the lock): one domain's
 * current values, their JSON copied into the Start (decoded when the domain is touched), or a
 * domain withheld. */
static void on_current(const kvd_current_raw *domain, void *user_data) {
    Start *start = ((Notes *)user_data)->start;
    if (domain->withheld) g_hash_table_add(start->withheld, g_strdup(domain->domain));
    else giokvd_start_add(start->current, domain);
}

/* Makes the stream (without the lock), its current state gathered into `start`. */
static kvd_status make_stream(KvdSettingsBackend *self, kvd_client *client, Start *start, bool *complete, kvd_watch **stream,
                              kvd_error *error) {
    start->current = giokvd_start_new();
    start->withheld = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    Notes *notes = self->stream_notes; /* no stream dispatches meanwhile: there is none */
    notes->start = start;
    kvd_status status = kvd_watch_all_current_raw_new(client, NULL, on_current, on_stream_event, notes, complete, stream, error);
    notes->start = NULL;
    return status;
}

/* Needs the lock: whether the domain caches nothing yet (no value, lock, system value or own
 * commit): then take_current of its values would only add them, announcing nothing to a domain
 * just made. */
static gboolean caches_nothing(const Domain *domain) {
    return g_hash_table_size(domain->values) == 0 && key_count(domain->locked) == 0 && key_count(domain->system) == 0 &&
           key_count(domain->own) == 0;
}

/* Needs the lock: take_current into a domain that caches nothing, not announced: `held`'s keys
 * and values moved in (none copied; `held` keeps none), each change taken in order as
 * take_change takes it (a key named twice ends as the last says). */
static void take_into_empty(Domain *domain, Held *held) {
    for (size_t i = 0; i < held->count; i++) {
        char *key = (char *)held->changes[i].key;
        kvd_value *value = (kvd_value *)held->changes[i].value;
        kvd_source source = held->changes[i].source;
        held->changes[i] = (kvd_change){NULL, NULL, KVD_SOURCE_USER};
        if (source == KVD_SOURCE_SYSTEM && value) add_key(&domain->system, key);
        else remove_key(domain->system, key);
        if (source == KVD_SOURCE_LOCKED) add_key(&domain->locked, key);
        else remove_key(domain->locked, key);
        if (value) g_hash_table_replace(domain->values, key, value);
        else g_hash_table_remove(domain->values, key), g_free(key);
    }
}

/* Needs the lock: a domain touched now (or again, on a new stream) takes its values from the
 * current stream's current state, with no round trip; FALSE when it has to be read (withheld, or
 * kvd sent no current state). What changed is noted in `notes` (NULL: not announced). */
static gboolean take_stored(KvdSettingsBackend *self, Domain *domain, Notes *notes) {
    if (!self->known || g_hash_table_contains(self->withheld, domain->name)) return FALSE;
    Held *held = NULL;
    if (!take_untouched(self, domain->name, &held)) { /* kvd sent values that do not decode: read the domain apart */
        g_hash_table_add(self->withheld, g_strdup(domain->name));
        return FALSE;
    }
    if (notes == NULL && caches_nothing(domain)) {
        if (held) take_into_empty(domain, held);
    } else {
        Notes *own = notes ? notes : notes_new(self, domain);
        own->domain = domain;
        take_current(own, held ? held->changes : NULL, held ? held->count : 0, held ? held->revision : self->start_revision);
        if (own != notes) notes_free(own);
    }
    domain->revision = held ? held->revision : self->start_revision;
    domain->system_revision = held ? held->system_revision : self->start_system_revision;
    domain->loaded = TRUE;
    if (held) held_free(held);
    return TRUE;
}

/* Needs the lock: the new stream's current state replaces what the old one left; the domains
 * read before take theirs now (what differs noted in `notes`), but those to be read again; the
 * others take it when retry or lock_domain gets to them. */
static void take_start(KvdSettingsBackend *self, Start *start, bool complete, Notes *notes) {
    giokvd_start_free(self->current);
    g_hash_table_unref(self->withheld);
    self->current = g_steal_pointer(&start->current);
    self->withheld = g_steal_pointer(&start->withheld);
    g_hash_table_remove_all(self->stored);
    self->stored_bytes = 0;
    self->known = complete;
    self->start_revision = start->revision;
    self->start_system_revision = start->system_revision;
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, self->domains);
    while (g_hash_table_iter_next(&iter, NULL, &value))
        if (!((Domain *)value)->reading && ((Domain *)value)->revision >= 0) take_stored(self, value, notes);
}

/* Makes the process's one stream unless it has one (called without the lock). Blocks at most the
 * connection's timeout. Returns whether there is a stream now; after a failure, the app's threads
 * do not try again for a second. */
static gboolean ensure_stream(KvdSettingsBackend *self) {
    g_mutex_lock(&self->stream_lock);
    kvd_error error = KVD_ERROR_INIT;
    g_mutex_lock(&self->lock);
    gboolean up = self->stream != NULL;
    kvd_status status = up ? KVD_OK : ensure_client(self, &error);
    kvd_client *client = self->client;
    g_mutex_unlock(&self->lock);
    if (up) {
        g_mutex_unlock(&self->stream_lock);
        return TRUE;
    }
    kvd_watch *stream = NULL;
    Start start = {0};
    bool complete = false;
    if (status == KVD_OK) status = make_stream(self, client, &start, &complete, &stream, &error);
    Notes *notes = notes_new(self, NULL);
    g_mutex_lock(&self->lock);
    if (status != KVD_OK) {
        self->quiet_until = g_get_monotonic_time() + RETRY_SECONDS * G_USEC_PER_SEC;
        g_debug("kvd GSettings backend: cannot watch kvd: %s", error.message);
        kvd_error_clear(&error);
    } else {
        self->stream = stream;
        self->stream_generation++;
        self->stream_source = g_unix_fd_source_new(kvd_watch_fd(stream), G_IO_IN | G_IO_HUP | G_IO_ERR);
        g_source_set_callback(self->stream_source, (GSourceFunc)(void (*)(void))stream_ready, self, NULL);
        g_source_attach(self->stream_source, self->context);
        take_start(self, &start, complete, notes);
        up = TRUE;
    }
    g_mutex_unlock(&self->lock);
    g_mutex_unlock(&self->stream_lock);
    giokvd_start_free(start.current);
    if (start.withheld) g_hash_table_unref(start.withheld);
    announce(notes);
    notes_free(notes);
    return up;
}

/* Reads the domain (marked reading, without the lock) on the current stream, announcing what the
 * read changed when `announce_read`. Blocks at most the connection's timeout. */
static void read_domain(KvdSettingsBackend *self, Domain *domain, gboolean announce_read) {
    kvd_error error = KVD_ERROR_INIT;
    g_mutex_lock(&self->lock);
    Notes *notes = notes_new(self, domain);
    notes->generation = self->stream_generation;
    kvd_status status = self->stream ? ensure_client(self, &error) : KVD_ERROR_CONNECTION;
    kvd_client *client = self->client;
    g_mutex_unlock(&self->lock);
    if (status == KVD_OK) status = kvd_read_domain(client, domain->name, on_read, notes, &error);
    g_mutex_lock(&self->lock);
    domain->reading = FALSE;
    g_ptr_array_set_size(domain->held, 0);
    if (status != KVD_OK && error.message) {
        self->quiet_until = g_get_monotonic_time() + RETRY_SECONDS * G_USEC_PER_SEC;
        g_debug("kvd GSettings backend: cannot read %s: %s", domain->name, error.message);
    }
    g_mutex_unlock(&self->lock);
    kvd_error_clear(&error);
    if (announce_read) announce(notes);
    notes_free(notes);
}

/* Needs the lock: the stream is gone; every domain is to be read again (its cache still serves),
 * and its current state is no longer current. */
static void drop_stream(KvdSettingsBackend *self) {
    kvd_watch_free(self->stream);
    self->stream = NULL;
    self->known = FALSE;
    giokvd_start_free(self->current);
    self->current = NULL;
    g_hash_table_remove_all(self->stored);
    g_hash_table_remove_all(self->withheld);
    self->stored_bytes = 0;
    if (self->stream_source) {
        g_source_destroy(self->stream_source);
        g_source_unref(self->stream_source);
        self->stream_source = NULL;
    }
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, self->domains);
    while (g_hash_table_iter_next(&iter, NULL, &value)) ((Domain *)value)->loaded = FALSE;
}

/* On the worker thread: dispatches the stream's events; a dead stream is dropped, to be made again. */
static gboolean stream_ready(gint fd, GIOCondition condition, gpointer user_data) {
    KvdSettingsBackend *self = user_data;
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = kvd_watch_dispatch(self->stream, &error);
    announce(self->stream_notes);
    if (status == KVD_OK) return G_SOURCE_CONTINUE;
    g_debug("kvd GSettings backend: the watch ended: %s", error.message);
    kvd_error_clear(&error);
    g_mutex_lock(&self->lock);
    drop_stream(self);
    g_mutex_unlock(&self->lock);
    return G_SOURCE_REMOVE;
}

/* On the worker thread, every second: makes the stream again if it is gone, then takes the
 * domains not loaded on it from its current state, or reads them, announcing the differences. */
static gboolean retry(gpointer user_data) {
    KvdSettingsBackend *self = user_data;
    g_mutex_lock(&self->lock);
    gboolean idle = g_hash_table_size(self->domains) == 0;
    g_mutex_unlock(&self->lock);
    if (idle || !ensure_stream(self)) return G_SOURCE_CONTINUE;
    GPtrArray *waiting = g_ptr_array_new();
    Notes *notes = notes_new(self, NULL);
    g_mutex_lock(&self->lock);
    GHashTableIter iter;
    gpointer value;
    g_hash_table_iter_init(&iter, self->domains);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        Domain *domain = value;
        if (!domain->loaded && !domain->reading && !take_stored(self, domain, notes)) {
            domain->reading = TRUE;
            g_ptr_array_add(waiting, domain);
        }
    }
    g_mutex_unlock(&self->lock);
    announce(notes);
    notes_free(notes);
    for (guint i = 0; i < waiting->len; i++) read_domain(self, waiting->pdata[i], TRUE);
    g_ptr_array_unref(waiting);
    return G_SOURCE_CONTINUE;
}

static gpointer worker(gpointer user_data) {
    KvdSettingsBackend *self = user_data;
    g_main_context_push_thread_default(self->context);
    g_main_loop_run(self->loop);
    g_main_context_pop_thread_default(self->context);
    return NULL;
}

static Domain *domain_new(char *name, char *prefix) {
    Domain *domain = g_new0(Domain, 1);
    domain->name = name;
    domain->prefix = prefix;
    domain->values = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)kvd_value_free);
    domain->held = g_ptr_array_new_with_free_func(held_free);
    domain->revision = -1;
    domain->system_revision = -1;
    return domain;
}

/* The domain of a GSettings key, made (and read, unless kvd failed a moment ago) when new, and
 * `*kvd_key` the key's kvd key (its bytes in `gsettings_key`). Returns with the lock held; NULL
 * when the key cannot be mapped. */
static Domain *lock_domain(KvdSettingsBackend *self, const char *gsettings_key, const char **kvd_key) {
    char name[GIOKVD_DOMAIN_SIZE];
    if (!giokvd_map_key_in_place(gsettings_key, name, kvd_key)) {
        g_mutex_lock(&self->lock);
        return NULL;
    }
    g_mutex_lock(&self->lock);
    Domain *domain = g_hash_table_lookup(self->domains, name);
    if (domain == NULL) {
        domain = domain_new(g_strdup(name), g_strndup(gsettings_key, (gsize)(*kvd_key - gsettings_key)));
        g_hash_table_insert(self->domains, domain->name, domain);
        if (g_get_monotonic_time() >= self->quiet_until) {
            g_mutex_unlock(&self->lock);
            gboolean up = ensure_stream(self); /* before the read: what follows the read is on it */
            g_mutex_lock(&self->lock);
            if (up && !domain->reading && !domain->loaded && !take_stored(self, domain, NULL)) {
                domain->reading = TRUE;
                g_mutex_unlock(&self->lock);
                read_domain(self, domain, FALSE);
                g_mutex_lock(&self->lock);
            }
        }
    }
    return domain;
}

/* The domain of a GSettings key as lock_domain, for the reads: the mapping remembered (`*kvd_key`
 * belongs to the backend, valid while the lock is held). Returns with the lock held. */
static Domain *lock_key(KvdSettingsBackend *self, const char *gsettings_key, const char **kvd_key) {
    g_mutex_lock(&self->lock);
    KeyRef *ref = g_hash_table_lookup(self->keys, gsettings_key);
    if (ref) {
        *kvd_key = ref->kvd_key;
        return ref->domain;
    }
    g_mutex_unlock(&self->lock);
    const char *mapped = NULL;
    Domain *domain = lock_domain(self, gsettings_key, &mapped);
    *kvd_key = NULL;
    if (domain == NULL) return NULL;
    if (g_hash_table_size(self->keys) >= KEY_CACHE_MAX) g_hash_table_remove_all(self->keys);
    ref = g_new(KeyRef, 1);
    ref->domain = domain;
    ref->kvd_key = g_strdup(mapped);
    g_hash_table_insert(self->keys, g_strdup(gsettings_key), ref);
    *kvd_key = ref->kvd_key;
    return domain;
}

static GVariant *kvd_backend_read(GSettingsBackend *backend, const gchar *key, const GVariantType *expected_type,
                                  gboolean default_value) {
    KvdSettingsBackend *self = KVD_SETTINGS_BACKEND(backend);
    const char *kvd_key = NULL;
    Domain *domain = lock_key(self, key, &kvd_key);
    GVariant *result = NULL;
    const kvd_value *written = NULL;
    if (domain && !default_value && giokvd_writer_lookup(self->writer, domain->name, kvd_key, &written)) {
        /* An own write not yet settled reads back at once (a removal as the default). */
        if (written) result = giokvd_from_kvd(written, expected_type);
    } else if (domain) {
        const kvd_value *value = g_hash_table_lookup(domain->values, kvd_key);
        /* The default layer is the system layer's value; a user's own value hides it from us. */
        gboolean system = has_key(domain->system, kvd_key);
        if (value && (!default_value || system)) result = giokvd_from_kvd(value, expected_type);
    }
    g_mutex_unlock(&self->lock);
    return result;
}

static GVariant *kvd_backend_read_user_value(GSettingsBackend *backend, const gchar *key, const GVariantType *expected_type) {
    KvdSettingsBackend *self = KVD_SETTINGS_BACKEND(backend);
    const char *kvd_key = NULL;
    Domain *domain = lock_key(self, key, &kvd_key);
    GVariant *result = NULL;
    const kvd_value *written = NULL;
    if (domain && giokvd_writer_lookup(self->writer, domain->name, kvd_key, &written)) {
        if (written) result = giokvd_from_kvd(written, expected_type);
    } else if (domain && !has_key(domain->system, kvd_key) && !has_key(domain->locked, kvd_key)) {
        const kvd_value *value = g_hash_table_lookup(domain->values, kvd_key);
        if (value) result = giokvd_from_kvd(value, expected_type);
    }
    g_mutex_unlock(&self->lock);
    return result;
}

static gboolean kvd_backend_get_writable(GSettingsBackend *backend, const gchar *key) {
    KvdSettingsBackend *self = KVD_SETTINGS_BACKEND(backend);
    const char *kvd_key = NULL;
    Domain *domain = lock_key(self, key, &kvd_key);
    gboolean writable = domain != NULL && !has_key(domain->locked, kvd_key);
    g_mutex_unlock(&self->lock);
    return writable;
}

/* On the writer's thread, with the lock (GiokvdWriterSettle): a change committed at `revision`
 * goes into the cache, which holds what kvd holds (unless a read or the stream has shown the
 * domain at that revision or a later one: then the cache has the commit, or a newer value of the
 * key); a failed one leaves the
 * cache as it is, so the write is reverted. Then, unless a newer write of the key is queued, the
 * app sees the cache's value: when it is not the write's, the key is noted to be announced. */
static void settle_write(gpointer data, const char *domain_name, const GiokvdChange *change, int64_t revision,
                         GPtrArray *changed) {
    KvdSettingsBackend *self = data;
    Domain *domain = g_hash_table_lookup(self->domains, domain_name); /* never freed before the writer */
    if (domain == NULL) return;
    if (revision >= 0 && revision > domain->revision) {
        if (change->value) g_hash_table_replace(domain->values, g_strdup(change->kvd_key), kvd_value_copy(change->value));
        else g_hash_table_remove(domain->values, change->kvd_key);
        remove_key(domain->system, change->kvd_key);
        gint64 *own = g_new(gint64, 1);
        *own = revision;
        if (domain->own == NULL) domain->own = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
        g_hash_table_replace(domain->own, g_strdup(change->kvd_key), own);
    }
    if (giokvd_writer_lookup(self->writer, domain_name, change->kvd_key, NULL)) return;
    if (!kvd_value_equal(g_hash_table_lookup(domain->values, change->kvd_key), change->value))
        g_ptr_array_add(changed, g_strdup(change->gsettings_key));
}

/* On the writer's thread, without the lock (GiokvdWriterAnnounce). */
static void announce_write(gpointer data, const char *gsettings_key) {
    g_settings_backend_changed(G_SETTINGS_BACKEND(data), gsettings_key, NULL);
}

/* Needs the lock: whether the key can be written (mapped and not known locked); a locked one
 * fails without a warning, as dconf's (g_debug). */
static gboolean writable(Domain *domain, const char *gsettings_key, const char *kvd_key) {
    if (domain == NULL) return FALSE;
    if (!has_key(domain->locked, kvd_key)) return TRUE;
    g_debug("kvd GSettings backend: cannot write %s: the system administrator locked it", gsettings_key);
    return FALSE;
}

/* Queues one key's write (`converted` taken; NULL: a reset). FALSE, nothing queued, when the key
 * cannot be written. Never waits for kvd (but for the first read of a domain new to the process,
 * as a read). */
static gboolean queue_write(KvdSettingsBackend *self, const char *gsettings_key, kvd_value *converted) {
    const char *kvd_key = NULL;
    Domain *domain = lock_key(self, gsettings_key, &kvd_key);
    gboolean ok = writable(domain, gsettings_key, kvd_key);
    if (ok) giokvd_writer_queue(self->writer, domain->name, gsettings_key, kvd_key, converted);
    g_mutex_unlock(&self->lock);
    if (!ok) kvd_value_free(converted);
    return ok;
}

static gboolean kvd_backend_write(GSettingsBackend *backend, const gchar *key, GVariant *value, gpointer origin_tag) {
    KvdSettingsBackend *self = KVD_SETTINGS_BACKEND(backend);
    g_variant_ref_sink(value);
    kvd_value *converted = giokvd_to_kvd(value);
    g_variant_unref(value);
    gboolean ok = converted && queue_write(self, key, converted);
    if (ok) g_settings_backend_changed(backend, key, origin_tag);
    return ok;
}

static void kvd_backend_reset(GSettingsBackend *backend, const gchar *key, gpointer origin_tag) {
    if (queue_write(KVD_SETTINGS_BACKEND(backend), key, NULL)) g_settings_backend_changed(backend, key, origin_tag);
}

/* One key of a delayed apply, mapped and converted, before it is queued. */
typedef struct {
    char *domain;
    char *gsettings_key;
    char *kvd_key;
    kvd_value *value;
} Staged;

static void staged_free(gpointer data) {
    Staged *staged = data;
    g_free(staged->domain);
    g_free(staged->gsettings_key);
    g_free(staged->kvd_key);
    kvd_value_free(staged->value);
    g_free(staged);
}

typedef struct {
    KvdSettingsBackend *self;
    GPtrArray *staged; /* Staged* */
    gboolean ok;
} TreeWalk;

/* Maps and converts one key of the tree; stops the walk at a key that cannot be written. */
static gboolean stage_key(gpointer key, gpointer value, gpointer user_data) {
    TreeWalk *walk = user_data;
    kvd_value *converted = value ? giokvd_to_kvd(value) : NULL;
    const char *kvd_key = NULL;
    Domain *domain = lock_key(walk->self, key, &kvd_key);
    walk->ok = (value == NULL || converted) && writable(domain, key, kvd_key);
    if (walk->ok) {
        Staged *staged = g_new(Staged, 1);
        *staged = (Staged){g_strdup(domain->name), g_strdup(key), g_strdup(kvd_key), converted};
        g_ptr_array_add(walk->staged, staged);
    }
    g_mutex_unlock(&walk->self->lock);
    if (!walk->ok) kvd_value_free(converted);
    return !walk->ok;
}

/* Delay-apply: every key queued at once, or none when one cannot be written; each domain's
 * keys (one GSettings object's are one domain's) then go in one atomic Apply. */
static gboolean kvd_backend_write_tree(GSettingsBackend *backend, GTree *tree, gpointer origin_tag) {
    KvdSettingsBackend *self = KVD_SETTINGS_BACKEND(backend);
    TreeWalk walk = {self, g_ptr_array_new_with_free_func(staged_free), TRUE};
    g_tree_foreach(tree, stage_key, &walk);
    if (walk.ok) {
        g_mutex_lock(&self->lock);
        for (guint i = 0; i < walk.staged->len; i++) {
            Staged *staged = walk.staged->pdata[i];
            giokvd_writer_queue(self->writer, staged->domain, staged->gsettings_key, staged->kvd_key, staged->value);
            staged->value = NULL; /* the writer's */
        }
        g_mutex_unlock(&self->lock);
        g_settings_backend_changed_tree(backend, tree, origin_tag);
    }
    g_ptr_array_unref(walk.staged);
    return walk.ok;
}

/* g_settings_sync: returns once every write made is durable in kvd or failed (and reverted). */
static void kvd_backend_sync(GSettingsBackend *backend) {
    giokvd_writer_sync(KVD_SETTINGS_BACKEND(backend)->writer);
}

static void kvd_backend_subscribe(GSettingsBackend *backend, const gchar *name) {
    KvdSettingsBackend *self = KVD_SETTINGS_BACKEND(backend);
    char *probe = g_strconcat(name, "k", NULL); /* a path "/a/b/" names the domain of its keys */
    const char *kvd_key = NULL;
    lock_domain(self, probe, &kvd_key);
    g_mutex_unlock(&self->lock);
    g_free(probe);
}

static void kvd_backend_unsubscribe(GSettingsBackend *backend, const gchar *name) {
    /* Domains stay cached and followed: an app reads the same few schemas again and again. */
}

static GPermission *kvd_backend_get_permission(GSettingsBackend *backend, const gchar *path) {
    return g_simple_permission_new(TRUE);
}

static void kvd_settings_backend_init(KvdSettingsBackend *self) {
    g_mutex_init(&self->lock);
    g_mutex_init(&self->stream_lock);
    self->stream_notes = notes_new(self, NULL);
    self->domains = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)domain_free);
    self->keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, key_ref_free);
    self->stored = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, held_free);
    self->withheld = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    self->context = g_main_context_new();
    self->loop = g_main_loop_new(self->context, FALSE);
    GSource *timer = g_timeout_source_new_seconds(RETRY_SECONDS);
    g_source_set_callback(timer, retry, self, NULL);
    g_source_attach(timer, self->context);
    g_source_unref(timer);
    self->thread = g_thread_new("kvd-gsettings", worker, self);
    self->writer = giokvd_writer_new(&self->lock, settle_write, announce_write, self);
}

static gboolean stop_loop(gpointer loop) {
    g_main_loop_quit(loop);
    return G_SOURCE_REMOVE;
}

static void kvd_settings_backend_finalize(GObject *object) {
    KvdSettingsBackend *self = KVD_SETTINGS_BACKEND(object);
    giokvd_writer_free(self->writer); /* sends what is queued first */
    /* Quit from inside the loop: a quit before the worker ran its loop would be lost. */
    GSource *quit = g_idle_source_new();
    g_source_set_callback(quit, stop_loop, self->loop, NULL);
    g_source_attach(quit, self->context);
    g_source_unref(quit);
    if (g_thread_self() != self->thread) g_thread_join(self->thread);
    else g_thread_unref(self->thread);
    drop_stream(self);
    notes_free(self->stream_notes);
    g_hash_table_unref(self->keys);
    g_hash_table_unref(self->domains);
    giokvd_start_free(self->current);
    g_hash_table_unref(self->stored);
    g_hash_table_unref(self->withheld);
    g_main_loop_unref(self->loop);
    g_main_context_unref(self->context);
    kvd_client_free(self->client);
    g_mutex_clear(&self->stream_lock);
    g_mutex_clear(&self->lock);
    G_OBJECT_CLASS(kvd_settings_backend_parent_class)->finalize(object);
}

static void kvd_settings_backend_class_init(KvdSettingsBackendClass *class) {
    GObjectClass *object_class = G_OBJECT_CLASS(class);
    object_class->finalize = kvd_settings_backend_finalize;
    class->read = kvd_backend_read;
    class->read_user_value = kvd_backend_read_user_value;
    class->get_writable = kvd_backend_get_writable;
    class->write = kvd_backend_write;
    class->write_tree = kvd_backend_write_tree;
    class->reset = kvd_backend_reset;
    class->sync = kvd_backend_sync;
    class->subscribe = kvd_backend_subscribe;
    class->unsubscribe = kvd_backend_unsubscribe;
    class->get_permission = kvd_backend_get_permission;
}

static void kvd_settings_backend_class_finalize(KvdSettingsBackendClass *class) {}

/* The GIO module's entry points. Priority 50: above GLib's memory backend, below dconf (100), so
 * installing kvd does not take over a desktop that has dconf (GSETTINGS_BACKEND=kvd chooses it). */
G_MODULE_EXPORT void g_io_module_load(GIOModule *module) {
    g_type_module_use(G_TYPE_MODULE(module)); /* the type stays registered */
    kvd_settings_backend_register_type(G_TYPE_MODULE(module));
    g_io_extension_point_implement(G_SETTINGS_BACKEND_EXTENSION_POINT_NAME, kvd_settings_backend_get_type(), "kvd", 50);
}

G_MODULE_EXPORT void g_io_module_unload(GIOModule *module) {}

G_MODULE_EXPORT gchar **g_io_module_query(void) {
    return g_strsplit(G_SETTINGS_BACKEND_EXTENSION_POINT_NAME, "!", 0);
}
