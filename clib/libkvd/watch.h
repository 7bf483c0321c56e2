/* watch.h — kvd_watch's state and the parts of watch.c that current.c (a WatchAll's current
 * state, kvd_watch_all_current_new and kvd_watch_all_current_raw_new) shares (internal). */
#ifndef KVD_WATCH_H
#define KVD_WATCH_H

#include "calls.h"

struct kvd_watch {
    conn connection;
    kvd_watch_callback callback;
    /* A WatchAll's or kvd_read_domain's callback (then callback is NULL). */
    kvd_watch_all_callback all_callback;
    /* kvd_read_domain's domain, named in its event. */
    const char *domain;
    void *user_data;
    bool ended;
};

kvd_watch *kvdi_watch_alloc(kvd_watch_callback callback, kvd_watch_all_callback all_callback, void *user_data);
/* Whether `reply` is a piece of the first reply with more pieces to come ("partial": true). */
bool kvdi_watch_is_partial(const json_node *reply);
/* Decodes one event, from `count` replies of the stream (the pieces of the first reply, whose
 * changes are gathered into one initial event; else one reply), and calls the callback with it. */
kvd_status kvdi_watch_deliver(kvd_watch *w, json_node *const *replies, size_t count, kvd_error *error);
/* One change of a Watch reply: its key (the node's bytes, not copied), source and value (decoded,
 * the caller's to free; NULL when it has none). */
kvd_status kvdi_decode_change(const json_node *item, kvd_change *change, kvd_error *error);

/* kvd_changes_from_json's two paths (changes.c, which says how they agree): the quick one, true
 * with `*changes` and `*count` filled when it takes the array, false with nothing filled for
 * anything else; the general one, for any array. */
bool kvdi_changes_quick(const char *json, size_t len, kvd_change **changes, size_t *count);
kvd_status kvdi_changes_parsed(const char *json, size_t len, kvd_change **changes, size_t *count, kvd_error *error);

/* One piece of a domain's current values, as kvdi_scan_current_piece found it (pointers into the
 * message; `changes` is its "changes" array, unchecked). */
typedef struct {
    const char *domain, *changes;
    size_t domain_len, changes_len;
    int64_t revision, system_revision; /* system_revision -1 when absent */
    bool partial;
} kvdi_current_piece;

/* The scan of one reply of a WatchAll's current state (current.c): true when it is a piece
 * naming a domain ({"parameters": {...}, "continues": ...}) whose every member the scan takes;
 * then, when `changes` is one JSON array, the message is valid JSON and means what `out` says
 * (when it is not, kvd_changes_from_json refuses it and the domain is read apart). False sends
 * the message to the parser. clib/fuzz/fuzz_current.c checks this. */
bool kvdi_scan_current_piece(const char *bytes, size_t len, kvdi_current_piece *out);

#endif
