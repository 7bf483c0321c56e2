/* fuzz_current.c — libFuzzer target libkvd-current: the scan of a WatchAll current state's
 * replies (clib/libkvd/current.c, kvdi_scan_current_piece), which takes a domain's values without
 * parsing them, against libkvd's JSON parser, built by fuzz/build.sh and run by fuzz/run.sh.
 *
 * Invariants, on any input (one message, as between two NULs): no crash or undefined behaviour;
 * when the scan takes the message, its changes are the bytes of one '[' ... ']' inside it, and
 * when those bytes parse as JSON, the message parses too and is a partial reply whose parameters
 * name the domain, revision, system revision (or none) and changes the scan found. (When they do
 * not, the domain is read apart: a valid message with a member after "changes" is one.) And, the
 * input taken as a domain's changes (kvd_changes_from_json, changes.c): when its quick path takes
 * them, its general path decodes them to the same keys, values and sources. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch.h"

static void broken(const char *what, size_t size) {
    fprintf(stderr, "invariant broken: %s (input of %zu bytes)\n", what, size);
    abort();
}

/* `node` written as JSON (a new buffer, NUL-terminated). */
static json_buffer written(const json_node *node) {
    json_buffer out = {0};
    kvdi_buffer_append_json(&out, node);
    kvdi_buffer_append(&out, "", 1);
    return out;
}

static void agrees(const json_node *message, const json_node *changes, const kvdi_current_piece *p, size_t size) {
    const json_node *parameters = kvdi_json_get(message, "parameters");
    const json_node *domain = kvdi_json_get(parameters, "domain"), *revision = kvdi_json_get(parameters, "revision");
    const json_node *system = kvdi_json_get(parameters, "systemRevision"), *partial = kvdi_json_get(parameters, "partial");
    if (!domain || domain->type != JSON_STRING || domain->u.string.len != p->domain_len ||
        memcmp(domain->u.string.bytes, p->domain, p->domain_len))
        broken("the domain differs", size);
    if (!revision || revision->type != JSON_INT || revision->u.integer != p->revision) broken("the revision differs", size);
    if ((system ? system->type != JSON_INT || system->u.integer != p->system_revision : p->system_revision != -1))
        broken("the system revision differs", size);
    if (!partial || partial->type != JSON_BOOL || !partial->u.flag || !p->partial) broken("not partial", size);
    json_buffer a = written(kvdi_json_get(parameters, "changes")), b = written(changes);
    if (a.len != b.len || memcmp(a.data, b.data, a.len)) broken("the changes differ", size);
    free(a.data);
    free(b.data);
}

/* The quick path of kvd_changes_from_json against its general path, on the input as a changes array. */
static void changes_agree(const char *bytes, size_t size) {
    kvd_change *quick = NULL, *parsed = NULL;
    size_t quick_count = 0, parsed_count = 0;
    if (!kvdi_changes_quick(bytes, size, &quick, &quick_count)) return;
    if (kvdi_changes_parsed(bytes, size, &parsed, &parsed_count, NULL) != KVD_OK) broken("the quick path took changes the general path refuses", size);
    if (quick_count != parsed_count) broken("the two paths give different counts of changes", size);
    for (size_t i = 0; i < quick_count; i++)
        if (strcmp(quick[i].key, parsed[i].key) || quick[i].source != parsed[i].source || !kvd_value_equal(quick[i].value, parsed[i].value))
            broken("the two paths give different changes", size);
    kvd_changes_free(quick, quick_count);
    kvd_changes_free(parsed, parsed_count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *bytes = (const char *)data;
    changes_agree(bytes, size);
    if (memchr(bytes, '\0', size)) return 0; /* a NUL ends a message: never inside one */
    kvdi_current_piece p;
    if (!kvdi_scan_current_piece(bytes, size, &p)) return 0;
    if (p.changes < bytes || p.changes_len < 2 || p.changes + p.changes_len > bytes + size || p.changes[0] != '[' ||
        p.changes[p.changes_len - 1] != ']' || p.domain < bytes || p.domain + p.domain_len > bytes + size)
        broken("the pieces are not inside the message", size);
    char message[256];
    json_node *whole = NULL, *changes = NULL;
    bool parses = !kvdi_json_parse(bytes, size, KVD_MESSAGE_DEPTH, &whole, message, sizeof message);
    bool array = !kvdi_json_parse(p.changes, p.changes_len, KVD_MESSAGE_DEPTH, &changes, message, sizeof message);
    if (array && !parses) broken("an invalid message's changes parse", size);
    if (array) agrees(whole, changes, &p, size);
    if (whole) kvdi_json_free(whole);
    if (changes) kvdi_json_free(changes);
    return 0;
}
