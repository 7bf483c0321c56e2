/* watch.c — kvd_watch: a Watch call with "more" on its own connection, its replies delivered
 * to a callback as they are read from a non-blocking descriptor. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"

struct kvd_watch {
    conn connection;
    kvd_watch_callback callback;
    void *user_data;
    bool ended;
};

/* Decodes one reply of the stream and calls the callback with it. */
static kvd_status deliver(kvd_watch *w, const json_node *reply, kvd_error *error) {
    const json_node *p = NULL;
    kvd_status status = kvdi_reply_check(reply, &p, error);
    if (status) return status;
    const json_node *changes = kvdi_json_get(p, "changes"), *initial = kvdi_json_get(p, "initial"), *continues = kvdi_json_get(reply, "continues");
    kvd_watch_event event = {0};
    if ((status = kvdi_decode_revision(p, &event.revision, error))) return status;
    if (!changes || changes->type != JSON_ARRAY)
        return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: Watch without a \"changes\" array");
    event.initial = initial && initial->type == JSON_BOOL && initial->u.flag;
    size_t n = changes->u.array.count;
    kvd_change *list = calloc(n ? n : 1, sizeof *list);
    if (!list) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < n && !status; i++) {
        const json_node *item = changes->u.array.items[i], *key = kvdi_json_get(item, "key"), *value = kvdi_json_get(item, "value");
        if (!key || key->type != JSON_STRING) {
            status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a Watch change without a \"key\"");
            break;
        }
        list[i].key = key->u.string.bytes;
        status = kvdi_decode_source(kvdi_json_get(item, "source"), &list[i].source, error);
        if (!status && value && value->type != JSON_NULL) {
            kvd_value *v = NULL;
            status = kvdi_decode_value(value, "changes.value", &v, error);
            list[i].value = v;
        }
    }
    if (!status) {
        event.count = n;
        event.changes = list;
        w->callback(&event, w->user_data);
        if (!(continues && continues->type == JSON_BOOL && continues->u.flag)) w->ended = true;
    }
    for (size_t i = 0; i < n; i++) kvd_value_free((kvd_value *)list[i].value);
    free(list);
    return status;
}

KVD_EXPORT kvd_status kvd_watch_new(kvd_client *client, const char *domain, const char *key, kvd_watch_callback callback,
                                    void *user_data, kvd_watch **out, kvd_error *error) {
    if (!client || !callback || !out) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_watch_new: client, callback or watch is NULL");
    kvd_status status = kvdi_check_name("domain", domain, error);
    if (!status && key) status = kvdi_check_name("key", key, error);
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.Watch");
    kvdi_call_string(&b, "domain", domain);
    if (key) kvdi_call_string(&b, "key", key);
    if ((status = kvdi_call_end(&b, true, error))) return free(b.data), status;
    kvd_watch *w = calloc(1, sizeof *w);
    if (!w) return free(b.data), kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    w->connection = (conn)CONN_INIT;
    w->callback = callback;
    w->user_data = user_data;
    json_node *reply = NULL;
    const json_node *p;
    status = kvdi_exchange(&w->connection, kvdi_client_config(client), &b, &reply, &p, error);
    free(b.data);
    if (!status) status = deliver(w, reply, error);
    kvdi_json_free(reply);
    if (!status && w->ended) status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a Watch that ended at once");
    if (status) return kvd_watch_free(w), status;
    *out = w;
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
        status = deliver(w, reply, error);
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
