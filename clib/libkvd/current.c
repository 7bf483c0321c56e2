/* current.c — a WatchAll's current state. kvd_watch_all_current_raw_new keeps each domain's
 * changes as the JSON kvd sent, found by a scan of the message's other members (kvd writes
 * "changes" last: the array ends where the message's fixed end begins; a message written in
 * another order is scanned whole, strings skipped and brackets matched), no value decoded and
 * nothing allocated per value, so that a process pays for the domains it reads, not for the whole
 * store. kvd_changes_from_json (changes.c) checks and decodes one such array when the domain is
 * first needed: an array that decodes came in a valid message that means what the scan read. A
 * message the scan does not take (any member it does not know, an escape in a name, a number it
 * does not read at a glance) is parsed whole. kvd_watch_all_current_new is the raw one with every domain
 * decoded for its callback. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cursor.h"
#include "watch.h"

/* Past a string (the cursor at its '"'). */
static bool skip_string(cursor *c) {
    for (const char *p = c->p + 1; p < c->end; p++) {
        if (*p == '"') return c->p = p + 1, true;
        if (*p == '\\') p++; /* the escaped byte, maybe a '"', is no end */
    }
    return false;
}

/* The bytes skip_value stops at inside a container: 1 a string, 2 an opening, 3 a closing bracket. */
static const unsigned char BRACKETS[256] = {['"'] = 1, ['['] = 2, ['{'] = 2, [']'] = 3, ['}'] = 3};

/* Past one value: a string, a container (brackets matched, strings inside skipped; the rest is
 * checked when the value is parsed) or a literal. */
static bool skip_value(cursor *c) {
    skip_space(c);
    if (c->p < c->end && *c->p == '"') return skip_string(c);
    if (c->p < c->end && BRACKETS[(unsigned char)*c->p] == 2) {
        size_t depth = 0;
        while (c->p < c->end) {
            unsigned char kind = BRACKETS[(unsigned char)*c->p];
            if (kind == 1) {
                if (!skip_string(c)) return false;
                continue;
            }
            c->p++;
            if (kind == 2) depth++;
            else if (kind == 3 && --depth == 0) return true;
        }
        return false;
    }
    const char *from = c->p;
    while (c->p < c->end && !strchr(",]} \t\n\r", *c->p)) c->p++;
    return c->p > from;
}

/* What kvd writes after a current-state piece's "changes", the last member of its parameters. */
static const char AFTER_LAST[] = "},\"continues\":true}";

/* The changes array at the cursor ('[') as kvd writes it, last: its end found from the message's
 * end (the array's ']' and AFTER_LAST), its values not scanned; the cursor past it. Whether the
 * bytes between are one JSON array is checked when they are decoded (kvd_changes_from_json): when
 * they are, the message is valid JSON, since the rest of it is scanned; a valid message with a
 * member after "changes" gives bytes that are not, and its domain is read apart. */
static bool changes_last(cursor *c) {
    size_t after = sizeof AFTER_LAST - 1;
    if ((size_t)(c->end - c->p) < after + 2 || memcmp(c->end - after, AFTER_LAST, after) || c->end[-(ptrdiff_t)after - 1] != ']')
        return false;
    c->p = c->end - after;
    return true;
}

/* One member of "parameters" into `out`; false for a member the scan does not take. */
static bool piece_member(cursor *c, const char *name, size_t len, kvdi_current_piece *out, unsigned *seen) {
    static const struct {
        const char *name;
        size_t len;
    } names[] = {{"revision", 8}, {"systemRevision", 14}, {"domain", 6}, {"changes", 7}, {"initial", 7}, {"partial", 7}};
    unsigned which = 0;
    while (which < 6 && (len != names[which].len || memcmp(name, names[which].name, len))) which++;
    if (which == 6 || (*seen & (1u << which))) return false;
    *seen |= 1u << which;
    bool flag;
    const char *from;
    switch (which) {
    case 0: return small_integer(c, &out->revision);
    case 1: return small_integer(c, &out->system_revision);
    case 2: return plain_utf8_string(c, &out->domain, &out->domain_len);
    case 3: skip_space(c), from = c->p;
        if (c->p >= c->end || *c->p != '[') return false;
        if (!changes_last(c) && (!skip_value(c) || c->p[-1] != ']')) return false; /* skip_value matches brackets of any kind */
        out->changes = from, out->changes_len = (size_t)(c->p - from);
        return true;
    case 4: return literal(c, &flag);
    default: return literal(c, &out->partial);
    }
}

/* Takes `text` (a constant) at the cursor, exactly. */
static bool exactly(cursor *c, const char *text, size_t len) {
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, text, len)) return false;
    c->p += len;
    return true;
}

#define EXACTLY(c, text) exactly((c), (text), sizeof(text) - 1)

/* A piece exactly as kvd writes it, read at a glance: {"parameters":{"domain":"NAME",
 * "revision":R[,"systemRevision":S],"initial":true,"partial":true,"changes":[...]},
 * "continues":true} with no space, a plain name, the changes last. False for anything else
 * (kvdi_scan_current_piece then reads the members in any order). */
static bool kvd_layout(const char *bytes, size_t len, kvdi_current_piece *out) {
    cursor c = {bytes, bytes + len};
    *out = (kvdi_current_piece){.system_revision = -1, .partial = true};
    if (!EXACTLY(&c, "{\"parameters\":{\"domain\":")) return false;
    if (!plain_utf8_string(&c, &out->domain, &out->domain_len)) return false;
    if (!EXACTLY(&c, ",\"revision\":") || !small_integer(&c, &out->revision)) return false;
    if (EXACTLY(&c, ",\"systemRevision\":") && !small_integer(&c, &out->system_revision)) return false;
    if (!EXACTLY(&c, ",\"initial\":true,\"partial\":true,\"changes\":")) return false;
    out->changes = c.p;
    if (c.p >= c.end || *c.p != '[' || !changes_last(&c)) return false;
    out->changes_len = (size_t)(c.p - out->changes);
    return true;
}

/* watch.h says what it promises; fuzz_current.c checks it. */
bool kvdi_scan_current_piece(const char *bytes, size_t len, kvdi_current_piece *out) {
    if (kvd_layout(bytes, len, out)) return true;
    cursor c = {bytes, bytes + len};
    *out = (kvdi_current_piece){.system_revision = -1};
    unsigned seen = 0;
    bool parameters = false, continues;
    const char *name;
    size_t name_len;
    if (!take(&c, '{')) return false;
    do {
        if (!member_name(&c, &name, &name_len)) return false;
        if (IS_NAME(name, name_len, "parameters") && !parameters) {
            parameters = true;
            if (!take(&c, '{')) return false;
            if (take(&c, '}')) continue;
            do {
                if (!member_name(&c, &name, &name_len) || !piece_member(&c, name, name_len, out, &seen)) return false;
            } while (take(&c, ','));
            if (!take(&c, '}')) return false;
        } else if (!IS_NAME(name, name_len, "continues") || !literal(&c, &continues)) {
            return false;
        }
    } while (take(&c, ','));
    if (!take(&c, '}')) return false;
    skip_space(&c);
    return c.p == c.end && out->domain && out->changes && (seen & 1u) && out->partial;
}

/* The current state being read: the domain whose pieces are being gathered into one array. Its
 * first piece stays where it was received (`borrowed`: the name and the array NUL-terminated in
 * the message's own bytes, over the '"' and the byte after the ']'), handed over with no copy when
 * the next message names another domain and is already received whole (kvdi_conn_has_message:
 * its receive moves no byte); else it is copied out (spill) before the next receive. */
typedef struct {
    kvd_current_raw_callback current;
    void *user_data;
    const char *domain; /* NULL: none; else in the message (borrowed) or `name` */
    const char *json;   /* borrowed: the array, in the message */
    size_t json_len;
    bool borrowed;
    char *name; /* the domain's name, NUL-terminated; kept for the next */
    size_t name_len, name_cap;
    int64_t revision, system_revision;
    json_buffer changes; /* not borrowed: "[" and the items so far; "]" added when handed over */
    bool items;
    const kvd_status *stop; /* NULL, or set by `current` to stop the read (kvd_watch_all_current_new) */
} raw_read;

/* Whether `current` stopped the read: nothing more is read or delivered. */
static bool stopped(const raw_read *read) { return read->stop && *read->stop; }

/* Hands the domain gathered to `current`. */
static kvd_status raw_flush(raw_read *read, kvd_error *error) {
    if (!read->domain) return KVD_OK;
    kvd_current_raw raw = {read->revision, read->system_revision, read->domain, false, read->json, read->json_len};
    kvd_status status = KVD_OK;
    if (!read->borrowed) {
        kvdi_buffer_append(&read->changes, "]", 2); /* and a NUL */
        status = read->changes.failed ? kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory") : KVD_OK;
        raw.changes_json = read->changes.data;
        raw.changes_json_len = read->changes.len - 1;
    }
    if (!status) read->current(&raw, read->user_data);
    read->domain = NULL;
    read->borrowed = false;
    read->changes.len = 0;
    read->changes.failed = false;
    read->items = false;
    return status;
}

/* Appends the items of an array of `len` bytes to the domain's (copied, not borrowed). */
static void append_items(raw_read *read, const char *array, size_t len) {
    cursor inner = {array + 1, array + len - 1};
    skip_space(&inner);
    if (inner.p == inner.end) return;
    if (read->items) kvdi_buffer_append_byte(&read->changes, ',');
    kvdi_buffer_append(&read->changes, inner.p, (size_t)(inner.end - inner.p));
    read->items = true;
}

/* Starts a domain copied: its name into `name`, "[" into `changes`. */
static kvd_status copy_name(raw_read *read, const char *domain, size_t len, kvd_error *error) {
    if (read->name_cap <= len) {
        char *bigger = realloc(read->name, len + 1);
        if (!bigger) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
        read->name = bigger;
        read->name_cap = len + 1;
    }
    memmove(read->name, domain, len);
    read->name[len] = '\0';
    read->name_len = len;
    read->domain = read->name;
    kvdi_buffer_append_byte(&read->changes, '[');
    return KVD_OK;
}

/* Copies a borrowed domain out of its message, before a receive that may move it. */
static kvd_status spill(raw_read *read, kvd_error *error) {
    if (!read->borrowed) return KVD_OK;
    read->borrowed = false;
    kvd_status status = copy_name(read, read->domain, read->name_len, error);
    if (status) return read->domain = NULL, status;
    append_items(read, read->json, read->json_len);
    return KVD_OK;
}

/* Adds a piece's changes (one JSON array) to its domain's, handing over the one before if it
 * named another domain. `in_message`: the piece's bytes are the received message's (the caller's
 * to write over until the next receive), so that a domain's first piece can be borrowed. */
static kvd_status raw_gather(raw_read *read, const kvdi_current_piece *p, bool in_message, kvd_error *error) {
    kvd_status status = KVD_OK;
    if (read->domain && (read->name_len != p->domain_len || memcmp(read->domain, p->domain, p->domain_len)))
        status = raw_flush(read, error);
    if (!status && !read->domain && in_message) {
        ((char *)p->domain)[p->domain_len] = '\0';  /* its closing '"' */
        ((char *)p->changes)[p->changes_len] = '\0'; /* what follows the ']' in the message */
        read->domain = p->domain, read->name_len = p->domain_len;
        read->json = p->changes, read->json_len = p->changes_len;
        read->borrowed = true;
        read->revision = p->revision, read->system_revision = p->system_revision;
        return KVD_OK;
    }
    if (!status && read->borrowed) status = spill(read, error);
    if (!status && !read->domain) {
        status = copy_name(read, p->domain, p->domain_len, error);
        read->revision = p->revision;
        read->system_revision = p->system_revision;
    }
    if (!status) append_items(read, p->changes, p->changes_len);
    return status;
}

/* A piece the scan did not take, parsed: the domain's changes written back as JSON. */
static kvd_status parsed_domain(raw_read *read, const json_node *p, const json_node *domain, kvd_error *error) {
    const json_node *changes = kvdi_json_get(p, "changes"), *system = kvdi_json_get(p, "systemRevision");
    kvdi_current_piece one = {domain->u.string.bytes, NULL, domain->u.string.len, 0, 0, system && system->type == JSON_INT ? system->u.integer : -1, true};
    kvd_status status = kvdi_decode_revision(p, &one.revision, error);
    if (!status && (!changes || changes->type != JSON_ARRAY))
        return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: Watch without a \"changes\" array");
    json_buffer text = {0};
    if (!status) kvdi_buffer_append_json(&text, changes);
    if (!status && text.failed) status = kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    one.changes = text.data;
    one.changes_len = text.len;
    if (!status) status = raw_gather(read, &one, false, error);
    free(text.data);
    return status;
}

/* Calls `current` for each name of the reply's "withheld"; sets `*listed` when the member is there. */
static kvd_status raw_withheld(const json_node *p, raw_read *read, bool *listed, kvd_error *error) {
    const json_node *withheld = kvdi_json_get(p, "withheld"), *revision = kvdi_json_get(p, "revision");
    const json_node *system = kvdi_json_get(p, "systemRevision");
    if (!withheld || withheld->type == JSON_NULL) return KVD_OK;
    if (withheld->type != JSON_ARRAY) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a \"withheld\" that is not an array");
    *listed = true;
    kvd_current_raw raw = {revision && revision->type == JSON_INT ? revision->u.integer : 0,
                           system && system->type == JSON_INT ? system->u.integer : -1, NULL, true, NULL, 0};
    for (size_t i = 0; i < withheld->u.array.count; i++) {
        const json_node *name = withheld->u.array.items[i];
        if (name->type != JSON_STRING) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a withheld domain that is not a string");
        raw.domain = name->u.string.bytes;
        read->current(&raw, read->user_data);
    }
    return KVD_OK;
}

/* One reply of the current state, parsed (the scan did not take it): a domain's piece, a list of
 * withheld domains, or the last (not partial), the stream's first event. Sets `*done` after it. */
static kvd_status parsed_piece(kvd_watch *w, raw_read *read, json_node *reply, bool *complete, bool *done, kvd_error *error) {
    const json_node *p = NULL;
    kvd_status status = kvdi_reply_check(reply, &p, error);
    const json_node *domain = status ? NULL : kvdi_json_get(p, "domain");
    bool named = domain && domain->type == JSON_STRING;
    if (!status && named && kvdi_watch_is_partial(reply)) return parsed_domain(read, p, domain, error);
    if (!status) status = raw_flush(read, error);
    if (!status && stopped(read)) return KVD_OK;
    if (!status && named) status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: the current state ended with a domain");
    if (!status) status = raw_withheld(p, read, complete, error);
    if (!status && !kvdi_watch_is_partial(reply)) {
        *done = true;
        status = kvdi_watch_deliver(w, &reply, 1, error);
    }
    return status;
}

/* Sends the WatchAll in `b` on the watch's own connection and reads the current state, every
 * piece within the timeout, then the first event. */
static kvd_status raw_start(kvd_client *client, const json_buffer *b, kvd_watch *w, raw_read *read, bool *complete, kvd_error *error) {
    const conn_config *config = kvdi_client_config(client);
    kvd_status status = kvdi_conn_open(&w->connection, config, error);
    if (!status) status = kvdi_conn_send(&w->connection, b->data, b->len, kvdi_conn_deadline(config->timeout_ms), error);
    bool done = false;
    while (!status && !done && !stopped(read)) {
        const char *bytes = NULL;
        size_t len = 0;
        kvdi_current_piece one;
        if (read->borrowed && !kvdi_conn_has_message(&w->connection)) status = spill(read, error);
        if (!status) status = kvdi_conn_receive_bytes(&w->connection, kvdi_conn_deadline(config->timeout_ms), &bytes, &len, error);
        if (status) break;
        if (kvdi_scan_current_piece(bytes, len, &one)) {
            status = raw_gather(read, &one, true, error);
            continue;
        }
        json_node *reply = NULL;
        status = kvdi_conn_parse(&w->connection, bytes, len, &reply, error);
        if (!status) status = parsed_piece(w, read, reply, complete, &done, error);
        kvdi_json_free(reply);
    }
    if (!status && !stopped(read) && w->ended) status = kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: a Watch that ended at once");
    return status;
}

/* kvd_watch_all_current_raw_new, `current` called with `current_data` and the stream's events with
 * `user_data`; `name` is the public function's, for its message. When `current` sets `*stop`,
 * nothing more is read or delivered and a watch is returned (the caller frees it). */
static kvd_status watch_all_current(kvd_client *client, const char *name, const char *prefix, kvd_current_raw_callback current,
                                    void *current_data, const kvd_status *stop, kvd_watch_all_callback callback, void *user_data,
                                    bool *complete, kvd_watch **out, kvd_error *error) {
    if (!client || !current || !callback || !complete || !out)
        return kvdi_set_error(error, KVD_ERROR_INVALID_ARGUMENT, "%s: client, current, callback, complete or watch is NULL", name);
    *complete = false;
    kvd_status status = prefix ? kvdi_check_name("domain", prefix, error) : KVD_OK;
    if (status) return status;
    json_buffer b = {0};
    kvdi_call_begin(&b, "io.kvd.Defaults.WatchAll");
    if (prefix) kvdi_call_string(&b, "prefix", prefix);
    kvdi_call_member(&b, "current");
    kvdi_buffer_append_str(&b, "true");
    if ((status = kvdi_call_end(&b, true, error))) return free(b.data), status;
    kvd_watch *w = kvdi_watch_alloc(NULL, callback, user_data);
    if (!w) return free(b.data), kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    raw_read read = {.current = current, .user_data = current_data, .stop = stop};
    status = raw_start(client, &b, w, &read, complete, error);
    free(b.data);
    free(read.name);
    free(read.changes.data);
    if (status) return kvd_watch_free(w), status;
    *out = w;
    return KVD_OK;
}

KVD_EXPORT kvd_status kvd_watch_all_current_raw_new(kvd_client *client, const char *prefix, kvd_current_raw_callback current,
                                                    kvd_watch_all_callback callback, void *user_data, bool *complete, kvd_watch **out,
                                                    kvd_error *error) {
    return watch_all_current(client, "kvd_watch_all_current_raw_new", prefix, current, user_data, NULL, callback, user_data, complete,
                             out, error);
}

/* kvd_watch_all_current_new's current state: each domain's JSON decoded for its callback, until
 * one does not decode (then the call fails with that error). */
typedef struct {
    kvd_current_callback current;
    void *user_data;
    kvd_status status;
    kvd_error error;
} decoding;

static void decode_current(const kvd_current_raw *raw, void *data) {
    decoding *d = data;
    if (d->status) return;
    kvd_current_domain domain = {raw->revision, raw->system_revision, raw->domain, raw->withheld, 0, NULL};
    kvd_change *changes = NULL;
    if (!raw->withheld && (d->status = kvd_changes_from_json(raw->changes_json, raw->changes_json_len, &changes, &domain.count, &d->error)))
        return;
    domain.changes = changes;
    d->current(&domain, d->user_data);
    kvd_changes_free(changes, domain.count);
}

KVD_EXPORT kvd_status kvd_watch_all_current_new(kvd_client *client, const char *prefix, kvd_current_callback current,
                                                kvd_watch_all_callback callback, void *user_data, bool *complete, kvd_watch **out,
                                                kvd_error *error) {
    decoding d = {current, user_data, KVD_OK, KVD_ERROR_INIT};
    kvd_status status = watch_all_current(client, "kvd_watch_all_current_new", prefix, current ? decode_current : NULL, &d, &d.status,
                                          callback, user_data, complete, out, error);
    if (status || !d.status) return kvd_error_clear(&d.error), status;
    kvd_watch_free(*out);
    *out = NULL;
    *complete = false;
    if (error) kvd_error_clear(error), *error = d.error;
    else kvd_error_clear(&d.error);
    return d.status;
}
