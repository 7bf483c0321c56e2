/* client.c — kvd_client and the calls of io.kvd.Defaults (Sources/KVConnection/Connection.swift,
 * Connection+Defaults.swift). One call at a time per client, under its lock. */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"

struct kvd_client {
    pthread_mutex_t lock;
    conn_config config;
    conn connection;
};

KVD_EXPORT kvd_status kvd_connect(const kvd_connect_options *options, kvd_client **out, kvd_error *error) {
    if (!out) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_connect: client is NULL");
    kvd_client *client = calloc(1, sizeof *client);
    if (!client) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    client->connection = (conn)CONN_INIT;
    kvd_status status = kvdi_conn_config_init(&client->config, options, error);
    if (status) return free(client), status;
    status = kvdi_conn_open(&client->connection, &client->config, error);
    if (status) {
        kvdi_conn_config_free(&client->config);
        free(client);
        return status;
    }
    pthread_mutex_init(&client->lock, NULL);
    *out = client;
    return KVD_OK;
}

KVD_EXPORT void kvd_client_free(kvd_client *client) {
    if (!client) return;
    kvdi_conn_close(&client->connection);
    kvdi_conn_config_free(&client->config);
    pthread_mutex_destroy(&client->lock);
    free(client);
}

KVD_EXPORT const char *kvd_client_socket_path(const kvd_client *client) { return client ? client->config.socket_path : NULL; }

const conn_config *kvdi_client_config(const kvd_client *client) { return &client->config; }

kvd_status kvdi_check_client(const char *function, const kvd_client *client, kvd_error *error) {
    return client ? KVD_OK : kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "%s: the client is NULL", function);
}

kvd_status kvdi_check_name(const char *what, const char *name, kvd_error *error) {
    if (!name) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "the %s is NULL", what);
    if (!kvdi_utf8_valid(name, strlen(name))) return kvdi_set_error(error, KVD_ERROR_INVALID_NAME, "invalid name: the %s is not valid UTF-8", what);
    return KVD_OK;
}

void kvdi_call_begin(json_buffer *b, const char *method) {
    kvdi_buffer_append_str(b, "{\"method\":\"");
    kvdi_buffer_append_str(b, method);
    kvdi_buffer_append_str(b, "\",\"parameters\":{");
}

void kvdi_call_member(json_buffer *b, const char *name) {
    if (b->data[b->len - 1] != '{') kvdi_buffer_append_byte(b, ',');
    kvdi_buffer_append_json_string(b, name, strlen(name));
    kvdi_buffer_append_byte(b, ':');
}

void kvdi_call_string(json_buffer *b, const char *name, const char *value) {
    kvdi_call_member(b, name);
    kvdi_buffer_append_json_string(b, value, strlen(value));
}

kvd_status kvdi_call_end(json_buffer *b, bool more, kvd_error *error) {
    kvdi_buffer_append_str(b, more ? "},\"more\":true}" : "}}");
    kvdi_buffer_append_byte(b, '\0');
    if (b->failed) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    if (b->len - 1 > (size_t)KVD_MESSAGE_LIMIT) {
        kvdi_set_error(error, KVD_ERROR_TOO_LARGE,
                       "the request is larger than kvd's limit of %d bytes (one message), so it was not sent; store less under one key",
                       KVD_MESSAGE_LIMIT);
        if (error) error->detail = KVD_MESSAGE_LIMIT; /* as kvd's TooLarge carries its limit */
        return KVD_ERROR_TOO_LARGE;
    }
    return KVD_OK;
}

kvd_status kvdi_call_value(json_buffer *b, const char *name, const kvd_value *value, kvd_error *error) {
    if (!value) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "the value is NULL");
    kvdi_call_member(b, name);
    if (!kvdi_value_write(b, value))
        return kvdi_set_error(error, KVD_ERROR_INVALID_VALUE, "invalid value: nesting deeper than %d levels (the limit for a value)",
                         KVD_VALUE_MAX_DEPTH);
    return KVD_OK;
}

kvd_status kvdi_exchange(conn *c, const conn_config *config, const json_buffer *message, json_node **reply, const json_node **parameters,
                    kvd_error *error) {
    *reply = NULL;
    /* a child forked after the connection was made: its copy is closed (the parent's stays
     * open) and it connects on its own, before peeking at the parent's stream */
    if (kvdi_conn_forked(c)) kvdi_conn_close(c);
    if (c->fd < 0 || kvdi_conn_peer_closed(c)) {
        kvd_status status = kvdi_conn_open(c, config, error);
        if (status) return status;
    }
    int64_t deadline = kvdi_conn_deadline(config->timeout_ms);
    kvd_status status = kvdi_conn_send(c, message->data, message->len, deadline, error);
    if (!status) status = kvdi_conn_receive(c, deadline, reply, error);
    if (status) return status;
    status = kvdi_reply_check(*reply, parameters, error);
    if (status) kvdi_json_free(*reply), *reply = NULL;
    return status;
}

/* Sends the call in `message` (freed here) and returns its reply (the caller frees `*reply`). */
static kvd_status call(kvd_client *client, json_buffer *message, json_node **reply, const json_node **parameters, kvd_error *error) {
    pthread_mutex_lock(&client->lock);
    kvd_status status = kvdi_exchange(&client->connection, &client->config, message, reply, parameters, error);
    pthread_mutex_unlock(&client->lock);
    free(message->data);
    if (!status && kvdi_json_get(*reply, "continues"))
        status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: \"continues\" on a call without \"more\"");
    if (status && *reply) kvdi_json_free(*reply), *reply = NULL;
    return status;
}

kvd_status kvdi_client_call(kvd_client *client, json_buffer *message, json_node **reply, const json_node **parameters, kvd_error *error) {
    return call(client, message, reply, parameters, error);
}

kvd_status kvdi_decode_revision(const json_node *parameters, int64_t *revision, kvd_error *error) {
    const json_node *n = kvdi_json_get(parameters, "revision");
    if (!n || n->type != JSON_INT) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: no integer \"revision\"");
    if (revision) *revision = n->u.integer;
    return KVD_OK;
}

kvd_status kvdi_decode_source(const json_node *n, kvd_source *source, kvd_error *error) {
    *source = KVD_SOURCE_USER;
    if (!n) return KVD_OK;
    if (n->type == JSON_STRING && !strcmp(n->u.string.bytes, "user")) return KVD_OK;
    if (n->type == JSON_STRING && !strcmp(n->u.string.bytes, "system")) return *source = KVD_SOURCE_SYSTEM, KVD_OK;
    if (n->type == JSON_STRING && !strcmp(n->u.string.bytes, "locked")) return *source = KVD_SOURCE_LOCKED, KVD_OK;
    return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a source that is not \"user\", \"system\" or \"locked\"");
}

kvd_status kvdi_decode_value(const json_node *n, const char *member, kvd_value **value, kvd_error *error) {
    if (!n) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: no \"%s\"", member);
    char message[256];
    kvd_status status = kvdi_value_from_json(n, value, message, sizeof message);
    if (status == KVD_ERROR_INVALID_VALUE) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: \"%s\": %s", member, message);
    if (status) return kvdi_set_error(error, status, "%s", message);
    return KVD_OK;
}

KVD_EXPORT kvd_status kvd_get(kvd_client *client, const char *domain, const char *key, kvd_value **value, int64_t *revision,
                              kvd_source *source, kvd_error *error) {
    kvd_status status = kvdi_check_client("kvd_get", client, error);
    if (!status) status = kvdi_check_name("domain", domain, error);
    if (!status) status = kvdi_check_name("key", key, error);
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.Get");
    kvdi_call_string(&b, "domain", domain);
    kvdi_call_string(&b, "key", key);
    if ((status = kvdi_call_end(&b, false, error))) return free(b.data), status;
    json_node *reply;
    const json_node *p;
    if ((status = call(client, &b, &reply, &p, error))) return status;
    kvd_value *v = NULL;
    kvd_source s;
    int64_t r = 0;
    if (!(status = kvdi_decode_revision(p, &r, error)) && !(status = kvdi_decode_source(kvdi_json_get(p, "source"), &s, error)) &&
        !(status = kvdi_decode_value(kvdi_json_get(p, "value"), "value", &v, error))) {
        if (value) *value = v;
        else kvd_value_free(v);
        if (revision) *revision = r;
        if (source) *source = s;
    }
    kvdi_json_free(reply);
    return status;
}

/* Sends a write whose reply is a revision. */
static kvd_status write_call(kvd_client *client, json_buffer *b, int64_t if_revision, int64_t *revision, kvd_error *error) {
    if (if_revision >= 0) {
        kvdi_call_member(b, "ifRevision");
        kvdi_buffer_append_int(b, if_revision);
    }
    kvd_status status = kvdi_call_end(b, false, error);
    if (status) return free(b->data), status;
    json_node *reply;
    const json_node *p;
    if ((status = call(client, b, &reply, &p, error))) return status;
    status = kvdi_decode_revision(p, revision, error);
    kvdi_json_free(reply);
    return status;
}

KVD_EXPORT kvd_status kvd_set(kvd_client *client, const char *domain, const char *key, const kvd_value *value, int64_t if_revision,
                              int64_t *revision, kvd_error *error) {
    kvd_status status = kvdi_check_client("kvd_set", client, error);
    if (!status) status = kvdi_check_name("domain", domain, error);
    if (!status) status = kvdi_check_name("key", key, error);
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.Set");
    kvdi_call_string(&b, "domain", domain);
    kvdi_call_string(&b, "key", key);
    if ((status = kvdi_call_value(&b, "value", value, error))) return free(b.data), status;
    return write_call(client, &b, if_revision, revision, error);
}

KVD_EXPORT kvd_status kvd_apply(kvd_client *client, const char *domain, const kvd_change *changes, size_t count, int64_t if_revision,
                                int64_t *revision, kvd_error *error) {
    kvd_status status = kvdi_check_client("kvd_apply", client, error);
    if (!status) status = kvdi_check_name("domain", domain, error);
    if (status) return status;
    if (count && !changes) return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "kvd_apply: changes is NULL");
    for (size_t i = 0; i < count; i++)
        if ((status = kvdi_check_name("key", changes[i].key, error))) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.Apply");
    kvdi_call_string(&b, "domain", domain);
    kvdi_call_member(&b, "changes");
    kvdi_buffer_append_byte(&b, '[');
    for (size_t i = 0; i < count; i++) {
        kvdi_buffer_append_str(&b, i ? ",{" : "{");
        kvdi_call_string(&b, "key", changes[i].key);
        if (changes[i].value && (status = kvdi_call_value(&b, "value", changes[i].value, error))) return free(b.data), status;
        kvdi_buffer_append_byte(&b, '}');
    }
    kvdi_buffer_append_byte(&b, ']');
    return write_call(client, &b, if_revision, revision, error);
}

KVD_EXPORT kvd_status kvd_delete(kvd_client *client, const char *domain, const char *key, int64_t *revision, kvd_error *error) {
    kvd_status status = kvdi_check_client("kvd_delete", client, error);
    if (!status) status = kvdi_check_name("domain", domain, error);
    if (!status && key) status = kvdi_check_name("key", key, error);
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.Delete");
    kvdi_call_string(&b, "domain", domain);
    if (key) kvdi_call_string(&b, "key", key);
    return write_call(client, &b, KVD_ANY_REVISION, revision, error);
}

/* A dictionary of the object `n` whose members are typed values (List's "values", "sources"). */
static kvd_status decode_values(const json_node *n, kvd_value **out, kvd_error *error) {
    if (!n || n->type != JSON_OBJECT) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: List without a \"values\" object");
    kvd_value *dict = kvd_value_new_dict();
    if (!dict) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < n->u.object.count; i++) {
        const json_member *m = &n->u.object.members[i];
        kvd_value *v;
        kvd_status status = kvdi_decode_value(m->value, "values", &v, error);
        if (!status && !kvdi_value_dict_add(dict, m->name, m->name_len, v)) status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
        if (status) return kvd_value_free(dict), status;
    }
    *out = dict;
    return KVD_OK;
}

KVD_EXPORT kvd_status kvd_list(kvd_client *client, const char *domain, kvd_value **values, int64_t *revision, kvd_value **sources,
                               kvd_error *error) {
    kvd_status status = kvdi_check_client("kvd_list", client, error);
    if (!status) status = kvdi_check_name("domain", domain, error);
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.List");
    kvdi_call_string(&b, "domain", domain);
    if ((status = kvdi_call_end(&b, false, error))) return free(b.data), status;
    json_node *reply;
    const json_node *p;
    if ((status = call(client, &b, &reply, &p, error))) return status;
    kvd_value *v = NULL, *s = NULL;
    int64_t r = 0;
    const json_node *source_object = kvdi_json_get(p, "sources");
    if (!(status = kvdi_decode_revision(p, &r, error)) && !(status = decode_values(kvdi_json_get(p, "values"), &v, error))) {
        if (source_object && source_object->type != JSON_OBJECT)
            status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: List's \"sources\" is not an object");
        else if (sources && source_object)
            status = decode_values(source_object, &s, error);
        else if (sources && !(s = kvd_value_new_dict()))
            status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    }
    if (!status) {
        if (values) *values = v, v = NULL;
        if (revision) *revision = r;
        if (sources) *sources = s, s = NULL;
    }
    kvd_value_free(v);
    kvd_value_free(s);
    kvdi_json_free(reply);
    return status;
}

KVD_EXPORT kvd_status kvd_domains(kvd_client *client, char ***domains, size_t *count, kvd_error *error) {
    kvd_status status = kvdi_check_client("kvd_domains", client, error);
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.Domains");
    status = kvdi_call_end(&b, false, error);
    if (status) return free(b.data), status;
    json_node *reply;
    const json_node *p;
    if ((status = call(client, &b, &reply, &p, error))) return status;
    const json_node *names = kvdi_json_get(p, "domains");
    if (!names || names->type != JSON_ARRAY) {
        kvdi_json_free(reply);
        return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: Domains without a \"domains\" array");
    }
    size_t n = names->u.array.count;
    char **list = calloc(n + 1, sizeof *list);
    for (size_t i = 0; list && i < n && !status; i++) {
        const json_node *name = names->u.array.items[i];
        if (name->type != JSON_STRING) status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a domain that is not a string");
        else if (!(list[i] = strdup(name->u.string.bytes))) status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    }
    kvdi_json_free(reply);
    if (!list) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    if (status) return kvd_strv_free(list), status;
    if (count) *count = n;
    if (domains) *domains = list;
    else kvd_strv_free(list);
    return KVD_OK;
}

/* Blame's entries, an array of objects of typed values, as a dictionary by their "key". */
static kvd_status decode_blame(const json_node *list, kvd_value **out, kvd_error *error) {
    if (!list || list->type != JSON_ARRAY) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: Blame without an \"entries\" array");
    kvd_value *dict = kvd_value_new_dict();
    if (!dict) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    kvd_status status = KVD_OK;
    for (size_t i = 0; i < list->u.array.count && !status; i++) {
        const json_node *entry = list->u.array.items[i];
        const json_node *name = kvdi_json_get(entry, "key");
        kvd_value *v;
        if (!name || name->type != JSON_STRING)
            status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a Blame entry without a \"key\"");
        else if (!(status = kvdi_decode_value(entry, "entries", &v, error)) && !kvdi_value_dict_add(dict, name->u.string.bytes, name->u.string.len, v))
            status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    }
    if (status) return kvd_value_free(dict), status;
    *out = dict;
    return KVD_OK;
}

KVD_EXPORT kvd_status kvd_blame(kvd_client *client, const char *domain, const char *key, kvd_value **entries, kvd_error *error) {
    kvd_status status = kvdi_check_client("kvd_blame", client, error);
    if (!status) status = kvdi_check_name("domain", domain, error);
    if (!status && key) status = kvdi_check_name("key", key, error);
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.Blame");
    kvdi_call_string(&b, "domain", domain);
    if (key) kvdi_call_string(&b, "key", key);
    status = kvdi_call_end(&b, false, error);
    if (status) return free(b.data), status;
    json_node *reply;
    const json_node *p;
    if ((status = call(client, &b, &reply, &p, error))) return status;
    kvd_value *dict = NULL;
    status = decode_blame(kvdi_json_get(p, "entries"), &dict, error);
    kvdi_json_free(reply);
    if (status) return status;
    if (entries) *entries = dict;
    else kvd_value_free(dict);
    return KVD_OK;
}

KVD_EXPORT void kvd_strv_free(char **strings) {
    if (!strings) return;
    for (char **s = strings; *s; s++) free(*s);
    free(strings);
}
