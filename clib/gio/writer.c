/* writer.c — GiokvdWriter, the write side of kvd's GSettings backend: writes that never block the
 * app (giokvd.h states the contract).
 *
 * The model is dconf's engine: a write is queued and returns; the writer's thread sends what is
 * queued, one domain's changes as one Apply (the batch "in flight"), on a kvd_client of its own.
 * While a batch is in flight, new writes merge into the queued changes of their domain, one value
 * per key, so the queue never holds more than one value per key and a burst of writes of one key
 * costs two round trips. A batch kvd refuses as a whole for one key (a lock, a value too large)
 * is sent again key by key, so that only the refused keys fail.
 *
 * Threads: the owner's threads call queue, lookup and sync; the writer's thread sends. All the
 * writer's state is guarded by the owner's lock (`lock`, given at creation), so that the owner's
 * cache and the queue change together: a read never sees a write neither queued nor settled.
 *
 * kvd hung (stopped, not dead): a batch waits the write timeout, then fails. The changesets queued
 * when it failed fail at once after it, unsent (each domain waiting its own timeout in turn made
 * g_settings_sync of N domains wait N timeouts); a write queued after that is sent, and finds out
 * whether kvd answers again.
 *
 * fork(): the child has no writer thread, and what is queued or in flight is the parent's, which
 * the parent sends. A child's first call of the writer keeps those as its inheritance, read-only:
 * looked up as they were (the child reads what its process wrote, as its cache from before the fork
 * does), never sent, until the child writes the key itself; and starts a thread of its own (its
 * client connects anew: libkvd's rule). As with any lock, fork while no other thread is in a call
 * (the writer's thread holds the lock only to take and settle a batch).
 */
#include <pthread.h>
#include <string.h>

#include "giokvd.h"

/* No reply within this: the batch failed (kvd_connect_options.timeout_ms; D-Bus's default). */
#define WRITE_TIMEOUT_MS KVD_DEFAULT_TIMEOUT_MS

/* One domain's changes, merged: kvd key -> GiokvdChange*. */
typedef struct {
    char *domain;
    GHashTable *changes;
} Changeset;

/* The fork()s this process descends by (a child's handler counts one more). */
static gint forks;

static void count_fork(void) {
    g_atomic_int_inc(&forks);
}

struct GiokvdWriter {
    GMutex *lock;             /* the owner's: guards every field below but client */
    GCond work;               /* signalled when a changeset is queued or the writer stops */
    GCond settled;            /* broadcast when a batch is settled */
    GHashTable *queued;       /* domain -> Changeset*, not yet sent */
    GQueue order;             /* the domains of `queued`, oldest first (owned by `queued`) */
    Changeset *in_flight;     /* the batch being sent, or NULL */
    GHashTable *inherited;    /* domain -> Changeset*: what the parent had queued or in flight at fork() */
    gboolean sleeping;        /* the thread waits on `work` */
    gboolean stopping;
    GiokvdWriterSettle settle;
    GiokvdWriterAnnounce announce;
    gpointer data;
    kvd_client *client;       /* the writer's thread's only, as `away` */
    gboolean away;            /* kvd could not be reached (warned once), and no write succeeded since */
    guint failing;            /* changesets still to fail unsent: those queued when a batch timed out */
    GThread *thread;
    gint forks;               /* `forks` when the thread was started */
};

static gpointer writer_thread(gpointer data);

static void change_free(gpointer data) {
    GiokvdChange *change = data;
    g_free(change->gsettings_key);
    g_free(change->kvd_key);
    kvd_value_free(change->value);
    g_free(change);
}

static Changeset *changeset_new(const char *domain) {
    Changeset *set = g_new(Changeset, 1);
    set->domain = g_strdup(domain);
    set->changes = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, change_free); /* keys: the change's */
    return set;
}

static void changeset_free(gpointer data) {
    Changeset *set = data;
    if (set == NULL) return;
    g_hash_table_unref(set->changes);
    g_free(set->domain);
    g_free(set);
}

/* The changeset of `domain` in `table` (domain -> Changeset*), made when it has none. */
static Changeset *changeset_in(GHashTable *table, const char *domain) {
    Changeset *set = g_hash_table_lookup(table, domain);
    if (set == NULL) {
        set = changeset_new(domain);
        g_hash_table_insert(table, set->domain, set);
    }
    return set;
}

/* Moves every change of `set` into the inheritance (replacing an older one of its key), then
 * frees `set`. */
static void inherit(GiokvdWriter *self, Changeset *set) {
    if (set == NULL) return;
    Changeset *kept = changeset_in(self->inherited, set->domain);
    GHashTableIter iter;
    gpointer change;
    g_hash_table_iter_init(&iter, set->changes);
    while (g_hash_table_iter_next(&iter, NULL, &change)) {
        g_hash_table_iter_steal(&iter);
        g_hash_table_replace(kept->changes, ((GiokvdChange *)change)->kvd_key, change);
    }
    changeset_free(set);
}

/* Needs the lock: in a child of fork(), the parent's writes kept as the inheritance (the batch in
 * flight under those queued after it) and a thread started. */
static void follow_fork(GiokvdWriter *self) {
    gint now = g_atomic_int_get(&forks);
    if (G_LIKELY(self->forks == now)) return;
    self->forks = now;
    inherit(self, self->in_flight); /* the parent's thread's: this process's copy, not changed since */
    self->in_flight = NULL;
    for (GList *domain = self->order.head; domain; domain = domain->next) {
        Changeset *set = NULL;
        g_hash_table_steal_extended(self->queued, domain->data, NULL, (gpointer *)&set);
        inherit(self, set);
    }
    g_queue_clear(&self->order);
    self->sleeping = FALSE;
    self->failing = 0;
    g_cond_init(&self->work);
    g_cond_init(&self->settled);
    self->thread = g_thread_new("kvd-gsettings-writer", writer_thread, self); /* the old one is not in this process */
}

void giokvd_writer_queue(GiokvdWriter *self, const char *domain, const char *gsettings_key, const char *kvd_key,
                         kvd_value *value) {
    follow_fork(self);
    Changeset *set = g_hash_table_lookup(self->queued, domain);
    if (set == NULL) {
        set = changeset_in(self->queued, domain);
        g_queue_push_tail(&self->order, set->domain);
    }
    Changeset *kept = g_hash_table_lookup(self->inherited, domain);
    if (kept) g_hash_table_remove(kept->changes, kvd_key); /* the child's own write hides it from now on */
    GiokvdChange *change = g_new(GiokvdChange, 1);
    change->gsettings_key = g_strdup(gsettings_key);
    change->kvd_key = g_strdup(kvd_key);
    change->value = value;
    g_hash_table_replace(set->changes, change->kvd_key, change); /* frees the older value of the key */
    if (self->sleeping) g_cond_signal(&self->work);
}

/* The change of `kvd_key` in `set`, or NULL. */
static const GiokvdChange *find(const Changeset *set, const char *domain, const char *kvd_key) {
    if (set == NULL || strcmp(set->domain, domain) != 0) return NULL;
    return g_hash_table_lookup(set->changes, kvd_key);
}

gboolean giokvd_writer_lookup(GiokvdWriter *self, const char *domain, const char *kvd_key, const kvd_value **value) {
    follow_fork(self);
    const GiokvdChange *change = find(g_hash_table_lookup(self->queued, domain), domain, kvd_key);
    if (change == NULL) change = find(self->in_flight, domain, kvd_key);
    if (change == NULL) change = find(g_hash_table_lookup(self->inherited, domain), domain, kvd_key);
    if (change && value) *value = change->value;
    return change != NULL;
}

void giokvd_writer_sync(GiokvdWriter *self) {
    if (g_thread_self() == self->thread) return; /* from a handler of `announce`: it would wait for itself */
    g_mutex_lock(self->lock);
    follow_fork(self);
    while (self->in_flight || !g_queue_is_empty(&self->order)) g_cond_wait(&self->settled, self->lock);
    g_mutex_unlock(self->lock);
}

/* Whether kvd refused the batch for one of its keys (so that the others may go alone). */
static gboolean refused_for_a_key(kvd_status status) {
    return status == KVD_ERROR_KEY_LOCKED || status == KVD_ERROR_TOO_LARGE || status == KVD_ERROR_INVALID_VALUE ||
           status == KVD_ERROR_INVALID_NAME;
}

/* Whether the failure is kvd's being out of reach (rather than its answer). */
static gboolean out_of_reach(kvd_status status) {
    return status == KVD_ERROR_CANNOT_CONNECT || status == KVD_ERROR_CANNOT_START || status == KVD_ERROR_UNSAFE_SOCKET_FOLDER ||
           status == KVD_ERROR_CONNECTION || status == KVD_ERROR_TIMEOUT || status == KVD_ERROR_PROTOCOL;
}

/* Logs a failure: a g_warning, but a g_debug for a locked key (get_writable says it is not
 * writable once the watch has seen the lock: no warning, as dconf gives none) and for kvd out of
 * reach again (warned once, until a write succeeds: an app writing in a loop would flood stderr). */
static void log_failure(GiokvdWriter *self, GiokvdChange *const *changes, size_t count, kvd_status status, const kvd_error *error) {
    const char *first = changes[0]->gsettings_key, *more = count > 1 ? " and others" : "";
    gboolean again = out_of_reach(status) && self->away;
    if (out_of_reach(status)) self->away = TRUE;
    if (status == KVD_ERROR_KEY_LOCKED || again) g_debug("kvd GSettings backend: cannot write %s%s: %s", first, more, error->message);
    else if (out_of_reach(status))
        g_warning("kvd GSettings backend: cannot write %s%s: %s (until a write succeeds, further ones failing so are logged at debug level)",
                  first, more, error->message);
    else g_warning("kvd GSettings backend: cannot write %s%s: %s", first, more, error->message);
}

/* One Apply of `count` changes; the revision on success, -1 (a message logged) on failure. */
static int64_t send_changes(GiokvdWriter *self, const char *domain, GiokvdChange *const *changes, size_t count,
                            gboolean quiet_refusal, kvd_status *status_out) {
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = KVD_OK;
    if (self->client == NULL) {
        kvd_connect_options options = KVD_CONNECT_OPTIONS_INIT;
        options.timeout_ms = WRITE_TIMEOUT_MS;
        status = kvd_connect(&options, &self->client, &error);
    }
    int64_t revision = -1;
    if (status == KVD_OK) {
        kvd_change *list = g_new0(kvd_change, count);
        for (size_t i = 0; i < count; i++) {
            list[i].key = changes[i]->kvd_key;
            list[i].value = changes[i]->value;
        }
        status = kvd_apply(self->client, domain, list, count, KVD_ANY_REVISION, &revision, &error);
        g_free(list);
    }
    *status_out = status;
    if (status == KVD_OK) self->away = FALSE;
    if (status == KVD_OK) return revision;
    if (!(quiet_refusal && refused_for_a_key(status))) log_failure(self, changes, count, status, &error);
    kvd_error_clear(&error);
    return -1;
}

/* Sends the batch: its revision for every change (-1 for those that failed) in `revisions`.
 * Returns KVD_ERROR_TIMEOUT when kvd did not answer a send in time, else KVD_OK. */
static kvd_status send_batch(GiokvdWriter *self, const Changeset *set, GiokvdChange **changes, size_t count,
                             int64_t *revisions) {
    kvd_status status;
    int64_t revision = send_changes(self, set->domain, changes, count, count > 1, &status);
    gboolean timed_out = status == KVD_ERROR_TIMEOUT;
    if (status == KVD_OK || count == 1 || !refused_for_a_key(status)) {
        for (size_t i = 0; i < count; i++) revisions[i] = revision;
        return timed_out ? KVD_ERROR_TIMEOUT : KVD_OK;
    }
    for (size_t i = 0; i < count; i++) {
        revisions[i] = send_changes(self, set->domain, &changes[i], 1, FALSE, &status);
        timed_out = timed_out || status == KVD_ERROR_TIMEOUT;
    }
    return timed_out ? KVD_ERROR_TIMEOUT : KVD_OK;
}

/* A batch queued while the one before it timed out: failed unsent (logged at debug level: kvd out
 * of reach was warned of). */
static void fail_unsent(const Changeset *set, GiokvdChange *const *changes, size_t count, int64_t *revisions) {
    for (size_t i = 0; i < count; i++) revisions[i] = -1;
    g_debug("kvd GSettings backend: cannot write %s%s in %s: not sent, kvd did not answer the write before it in time",
            changes[0]->gsettings_key, count > 1 ? " and others" : "", set->domain);
}

/* Needs the lock, the batch just out of flight: the owner settles each change, then the keys
 * whose value changed for the app are announced without the lock. */
static void settle_batch(GiokvdWriter *self, const Changeset *set, GiokvdChange **changes, size_t count, const int64_t *revisions) {
    GPtrArray *changed = g_ptr_array_new_with_free_func(g_free);
    for (size_t i = 0; i < count; i++) self->settle(self->data, set->domain, changes[i], revisions[i], changed);
    g_cond_broadcast(&self->settled);
    g_mutex_unlock(self->lock);
    for (guint i = 0; i < changed->len; i++) self->announce(self->data, changed->pdata[i]);
    g_ptr_array_unref(changed);
    g_mutex_lock(self->lock);
}

/* Needs the lock: takes the oldest queued changeset into flight, sends it, settles it. */
static void write_one(GiokvdWriter *self) {
    char *domain = g_queue_pop_head(&self->order);
    g_hash_table_steal_extended(self->queued, domain, NULL, (gpointer *)&self->in_flight);
    Changeset *set = self->in_flight;
    guint count = g_hash_table_size(set->changes), i = 0;
    GiokvdChange **changes = g_new(GiokvdChange *, count);
    GHashTableIter iter;
    gpointer change;
    g_hash_table_iter_init(&iter, set->changes);
    while (g_hash_table_iter_next(&iter, NULL, &change)) changes[i++] = change;
    int64_t *revisions = g_new(int64_t, count);
    gboolean unsent = self->failing > 0;
    if (unsent) self->failing--;
    g_mutex_unlock(self->lock); /* the batch is not changed while in flight: lookups only read it */
    kvd_status status = KVD_OK;
    if (unsent) fail_unsent(set, changes, count, revisions);
    else status = send_batch(self, set, changes, count, revisions);
    g_mutex_lock(self->lock);
    if (status == KVD_ERROR_TIMEOUT) self->failing = g_queue_get_length(&self->order); /* fail at once, not a timeout each */
    self->in_flight = NULL;
    settle_batch(self, set, changes, count, revisions);
    g_free(revisions);
    g_free(changes);
    changeset_free(set);
}

static gpointer writer_thread(gpointer data) {
    GiokvdWriter *self = data;
    g_mutex_lock(self->lock);
    for (;;) {
        while (!self->stopping && g_queue_is_empty(&self->order)) {
            self->sleeping = TRUE;
            g_cond_wait(&self->work, self->lock);
            self->sleeping = FALSE;
        }
        if (g_queue_is_empty(&self->order)) break; /* stopping, and everything sent */
        write_one(self);
    }
    g_mutex_unlock(self->lock);
    return NULL;
}

GiokvdWriter *giokvd_writer_new(GMutex *lock, GiokvdWriterSettle settle, GiokvdWriterAnnounce announce, gpointer data) {
    GiokvdWriter *self = g_new0(GiokvdWriter, 1);
    self->lock = lock;
    g_cond_init(&self->work);
    g_cond_init(&self->settled);
    self->queued = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, changeset_free); /* keys: the set's */
    self->inherited = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, changeset_free);
    g_queue_init(&self->order);
    self->settle = settle;
    self->announce = announce;
    self->data = data;
    static gsize registered = 0;
    if (g_once_init_enter(&registered)) {
        pthread_atfork(NULL, NULL, count_fork);
        g_once_init_leave(&registered, 1);
    }
    self->forks = g_atomic_int_get(&forks);
    self->thread = g_thread_new("kvd-gsettings-writer", writer_thread, self);
    return self;
}

void giokvd_writer_free(GiokvdWriter *self) {
    if (self == NULL) return;
    g_mutex_lock(self->lock);
    follow_fork(self);
    self->stopping = TRUE;
    g_cond_signal(&self->work);
    g_mutex_unlock(self->lock);
    if (g_thread_self() != self->thread) g_thread_join(self->thread);
    else g_thread_unref(self->thread);
    g_hash_table_unref(self->queued);
    g_hash_table_unref(self->inherited);
    kvd_client_free(self->client);
    g_cond_clear(&self->work);
    g_cond_clear(&self->settled);
    g_free(self);
}
