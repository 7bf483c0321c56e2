/* watch.c — kvd_watch: a Watch (or WatchAll) call with "more" on its own connection, its replies
 * delivered to a callback as they are read from a non-blocking descriptor (a WatchAll with the
 * current state: that state first, per domain, before the call returns); kvd_read_domain, a
 * Watch's first replies read on a connection of their own, which is then closed. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "watch.h"


/* Calls the watch's callback with `event`, as a kvd_watch_all_event when it has an all_callback:
 * the domain (the reply's, or kvd_read_domain's) and the system instance's revision added. */
static kvd_status call_back(kvd_watch *w, const kvd_watch_event *event, const json_node *parameters, kvd_error *error) {
    if (!w->all_callback) {
        w->callback(event, w->user_data);
        return KVD_OK;
    }
    kvd_watch_all_event all = {event->revision, -1, w->domain, event->initial, event->count, event->changes};
    const json_node *domain = kvdi_json_get(parameters, "domain"), *system = kvdi_json_get(parameters, "systemRevision");
    if (domain && domain->type == JSON_STRING && !w->domain) all.domain = domain->u.string.bytes;
    else if (domain && domain->type != JSON_NULL)
        return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a WatchAll \"domain\" that is not a string");
    if (system && system->type == JSON_INT) all.system_revision = system->u.integer;
    if (!all.initial && !all.domain)
        return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a WatchAll change without a \"domain\"");
    w->all_callback(&all, w->user_data);
    return KVD_OK;
}

kvd_status kvdi_decode_change(const json_node *item, kvd_change *change, kvd_error *error) {
    const json_node *key = kvdi_json_get(item, "key"), *value = kvdi_json_get(item, "value");
    if (!key || key->type != JSON_STRING)
        return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a Watch change without a \"key\"");
    change->key = key->u.string.bytes;
    kvd_status status = kvdi_decode_source(kvdi_json_get(item, "source"), &change->source, error);
    if (!status && value && value->type != JSON_NULL) {
        kvd_value *v = NULL;
        status = kvdi_decode_value(value, "changes.value", &v, error);
        change->value = v;
    }
    return status;
}

/* Whether `reply` is a piece of the first reply with more pieces to come ("partial": true). */
bool kvdi_watch_is_partial(const json_node *reply) {
    const json_node *partial = kvdi_json_get(kvdi_json_get(reply, "parameters"), "partial");
    return partial && partial->type == JSON_BOOL && partial->u.flag;
}

/* Decodes one event, from `count` replies of the stream (the pieces of the first reply, whose
 * changes are gathered into one initial event; else one reply), and calls the callback with it. */
kvd_status kvdi_watch_deliver(kvd_watch *w, json_node *const *replies, size_t count, kvd_error *error) {
    const json_node *p = NULL;
    kvd_watch_event event = {0};
    size_t n = 0;
    kvd_status status = KVD_OK;
    for (size_t r = 0; r < count && !status; r++) {
        if ((status = kvdi_reply_check(replies[r], &p, error))) return status;
        const json_node *changes = kvdi_json_get(p, "changes");
        if ((status = kvdi_decode_revision(p, r ? NULL : &event.revision, error))) return status;
        if (!changes || changes->type != JSON_ARRAY)
            return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: Watch without a \"changes\" array");
        if (r == 0) {
            const json_node *initial = kvdi_json_get(p, "initial");
            event.initial = initial && initial->type == JSON_BOOL && initial->u.flag;
        }
        n += changes->u.array.count;
    }
    const json_node *continues = kvdi_json_get(replies[count - 1], "continues");
    kvd_change *list = calloc(n ? n : 1, sizeof *list);
    if (!list) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    size_t filled = 0;
    for (size_t r = 0; r < count && !status; r++) {
        const json_node *changes = kvdi_json_get(kvdi_json_get(replies[r], "parameters"), "changes");
        for (size_t i = 0; i < changes->u.array.count && !status; i++, filled++) {
            status = kvdi_decode_change(changes->u.array.items[i], &list[filled], error);
        }
    }
    if (!status) {
        event.count = n;
        event.changes = list;
        status = call_back(w, &event, kvdi_json_get(replies[0], "parameters"), error);
    }
    if (!status) {
        if (!(continues && continues->type == JSON_BOOL && continues->u.flag)) w->ended = true;
    }
    for (size_t i = 0; i < n; i++) kvd_value_free((kvd_value *)list[i].value);
    free(list);
    return status;
}

/* Sends the call in `b` (freed here) on the new watch's own connection, reads its first reply
 * (every piece of it) and delivers it. On failure, frees the watch. */
static kvd_status watch_start(kvd_client *client, json_buffer *b, kvd_watch *w, kvd_error *error) {
    json_node *reply = NULL;
    const json_node *p;
    const conn_config *config = kvdi_client_config(client);
    kvd_status status = kvdi_exchange(&w->connection, config, b, &reply, &p, error);
    free(b->data);
    /* The current values may come in pieces (all but the last "partial": true): read them all,
     * each within the timeout, so that the initial event holds the whole domain. */
    json_node **pieces = NULL;
    size_t count = 0;
    if (!status && !(pieces = malloc(sizeof *pieces))) {
        kvdi_json_free(reply);
        status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    } else if (!status) {
        pieces[count++] = reply;
    }
    while (!status && kvdi_watch_is_partial(pieces[count - 1])) {
        json_node *next = NULL;
        status = kvdi_conn_receive(&w->connection, kvdi_conn_deadline(config->timeout_ms), &next, error);
        if (status) break;
        json_node **more = realloc(pieces, (count + 1) * sizeof *pieces);
        if (!more) {
            kvdi_json_free(next);
            status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
            break;
        }
        pieces = more;
        pieces[count++] = next;
    }
    if (!status) status = kvdi_watch_deliver(w, pieces, count, error);
    for (size_t i = 0; i < count; i++) kvdi_json_free(pieces[i]);
    free(pieces);
    if (!status && w->ended) status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a Watch that ended at once");
    if (status) kvd_watch_free(w);
    return status;
}

kvd_watch *kvdi_watch_alloc(kvd_watch_callback callback, kvd_watch_all_callback all_callback, void *user_data) {
    kvd_watch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->connection = (conn)CONN_INIT;
    w->callback = callback;
    w->all_callback = all_callback;
    w->user_data = user_data;
    return w;
}

/* The Watch call of `domain` (and `key`), checked, into `b`. */
static kvd_status watch_call(json_buffer *b, const char *domain, const char *key, kvd_error *error) {
    kvd_status status = kvdi_check_name("domain", domain, error);
    if (!status && key) status = kvdi_check_name("key", key, error);
    if (status) return status;
    kvdi_call_begin(b, "io.kvd.Defaults.Watch");
    kvdi_call_string(b, "domain", domain);
    if (key) kvdi_call_string(b, "key", key);
    if ((status = kvdi_call_end(b, true, error))) free(b->data);
    return status;
}

KVD_EXPORT kvd_status kvd_watch_new(kvd_client *client, const char *domain, const char *key, kvd_watch_callback callback,
                                    void *user_data, kvd_watch **out, kvd_error *error) {
    if (!client || !callback || !out) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_watch_new: client, callback or watch is NULL");
    json_buffer b = {0};
    kvd_status status = watch_call(&b, domain, key, error);
    if (status) return status;
    kvd_watch *w = kvdi_watch_alloc(callback, NULL, user_data);
    if (!w) return free(b.data), kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    if ((status = watch_start(client, &b, w, error))) return status;
    *out = w;
    return KVD_OK;
}

KVD_EXPORT kvd_status kvd_watch_all_new(kvd_client *client, const char *prefix, kvd_watch_all_callback callback, void *user_data,
                                        kvd_watch **out, kvd_error *error) {
    if (!client || !callback || !out)
        return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_watch_all_new: client, callback or watch is NULL");
    kvd_status status = prefix ? kvdi_check_name("domain", prefix, error) : KVD_OK;
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.WatchAll");
    if (prefix) kvdi_call_string(&b, "prefix", prefix);
    if ((status = kvdi_call_end(&b, true, error))) return free(b.data), status;
    kvd_watch *w = kvdi_watch_alloc(NULL, callback, user_data);
    if (!w) return free(b.data), kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    if ((status = watch_start(client, &b, w, error))) return status;
    *out = w;
    return KVD_OK;
}

/* kvd_read_domain on the client's connection: a Snapshot. Fills `fallback` when a Watch has to
 * read it instead (the domain takes more than one reply, or kvd is older than Snapshot). */
static kvd_status snapshot(kvd_client *client, kvd_watch *w, bool *fallback, kvd_error *error) {
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.Snapshot");
    kvdi_call_string(&b, "domain", w->domain);
    kvd_status status = kvdi_call_end(&b, false, error);
    if (status) return free(b.data), status;
    json_node *reply = NULL;
    const json_node *p;
    kvd_error own = KVD_ERROR_INIT;
    status = kvdi_client_call(client, &b, &reply, &p, &own);
    *fallback = status == KVD_ERROR_TOO_LARGE || status == KVD_ERROR_REMOTE;
    if (!status) status = kvdi_watch_deliver(w, &reply, 1, &own);
    if (status && !*fallback) kvdi_set_error(error, status, "%s", own.message);
    kvd_error_clear(&own);
    kvdi_json_free(reply);
    return status;
}

KVD_EXPORT kvd_status kvd_read_domain(kvd_client *client, const char *domain, kvd_watch_all_callback callback, void *user_data,
                                      kvd_error *error) {
    if (!client || !callback) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_read_domain: client or callback is NULL");
    kvd_status status = kvdi_check_name("domain", domain, error);
    if (status) return status;
    kvd_watch quick = {.connection = CONN_INIT, .all_callback = callback, .domain = domain, .user_data = user_data};
    bool fallback = false;
    status = snapshot(client, &quick, &fallback, error);
    if (!fallback) return status;
    json_buffer b = {0};
    status = watch_call(&b, domain, NULL, error);
    if (status) return status;
    kvd_watch *w = kvdi_watch_alloc(NULL, callback, user_data);
    if (!w) return free(b.data), kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    w->domain = domain;
    if ((status = watch_start(client, &b, w, error))) return status;
    kvd_watch_free(w);
    return KVD_OK;
}

KVD_EXPORT int kvd_watch_fd(const kvd_watch *w) { return w ? w->connection.fd : -1; }

KVD_EXPORT kvd_status kvd_watch_dispatch(kvd_watch *w, kvd_error *error) {
    if (!w) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_watch_dispatch: the watch is NULL");
    if (kvdi_conn_forked(&w->connection)) {
        kvdi_conn_close(&w->connection); /* this process's copy only: the parent's watch goes on */
        return kvdi_set_error(error, KVD_ERROR_CONNECTION, "the watch was made in another process (this one was forked after); watch again");
    }
    for (;;) {
        if (w->ended || w->connection.fd < 0)
            return kvdi_set_error(error, KVD_ERROR_CONNECTION, "kvd ended the watch (did it stop or restart?); watch again");
        json_node *reply = NULL;
        kvd_status status = kvdi_conn_receive(&w->connection, INT64_MIN, &reply, error);
        if (status || !reply) return status;
        status = kvdi_watch_deliver(w, &reply, 1, error);
        kvdi_json_free(reply);
        if (status) return kvdi_conn_close(&w->connection), status;
    }
}

KVD_EXPORT kvd_status kvd_watch_wait(kvd_watch *w, int timeout_ms, kvd_error *error) {
    if (!w) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_watch_wait: the watch is NULL");
    if (w->connection.fd >= 0 && !w->ended && !kvdi_conn_forked(&w->connection)) {
        struct pollfd p = {w->connection.fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms < 0 ? -1 : timeout_ms) == 0) return KVD_OK;
    }
    return kvd_watch_dispatch(w, error);
}

KVD_EXPORT void kvd_watch_free(kvd_watch *w) {
    if (!w) return;
    kvdi_conn_close(&w->connection);
    free(w);
}
