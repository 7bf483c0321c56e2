/* contract_cases.c — the contract cases of Tests/Contract/ (Tests/Contract/README.md) on libkvd's
 * side: socket paths (kvd_connect's resolution), names (the check before sending), typed JSON
 * (kvd_value_from_json, kvd_value_to_json) and error replies (kvd_error's status and detail).
 * The Swift side runs the same files (Tests/KVClientTests/ContractCaseTests.swift).
 *
 * Usage: contract_cases DIR   (make contract-c; make libkvd-test runs it)
 * A case marked known_difference with side "c" must give what the marker says here (the difference is
 * pinned: when libkvd changes, the case must be looked at again). Prints each failure and exits 1
 * if any. Reads the case files with libkvd's own JSON reader, so it links libkvd.a. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calls.h"
#include "conn.h"
#include "internal.h"

static int failures, passed, known;

static const char *str(const json_node *object, const char *member) {
    const json_node *n = kvdi_json_get(object, member);
    return n && n->type == JSON_STRING ? n->u.string.bytes : NULL;
}

static int64_t integer(const json_node *object, const char *member, int64_t otherwise) {
    const json_node *n = kvdi_json_get(object, member);
    return n && n->type == JSON_INT ? n->u.integer : otherwise;
}

/* What this side must give for `member`: the case's, or what a known difference on C says. */
static const char *expected(const json_node *c, const char *member) {
    const json_node *difference = kvdi_json_get(c, "known_difference");
    const char *side = str(difference, "side");
    if (side && !strcmp(side, "c") && str(difference, member)) return str(difference, member);
    return str(c, member);
}

/* Counts the known differences on C of a file's cases (printed at the end). */
static void count_known(const json_node *cases) {
    for (size_t i = 0; cases && i < cases->u.array.count; i++) {
        const char *side = str(kvdi_json_get(cases->u.array.items[i], "known_difference"), "side");
        if (side && !strcmp(side, "c")) known++;
    }
}

static void verdict(const char *file, const char *name, const char *want, const char *got) {
    if (want && got && !strcmp(want, got)) {
        passed++;
        return;
    }
    failures++;
    printf("FAIL %s: %s: expected %s, got %s\n", file, name, want ? want : "(nothing)", got ? got : "(nothing)");
}

/* `fill` repeated up to `length` bytes after `prefix` (a fill of several bytes is not cut). */
static char *filled(const char *prefix, const char *fill, size_t length) {
    char *out = calloc(1, length + 8);
    if (!out) abort();
    strcpy(out, prefix ? prefix : "");
    size_t fill_len = fill ? strlen(fill) : 0;
    while (fill_len && strlen(out) + fill_len <= length) strcat(out, fill);
    return out;
}

static void socket_cases(const char *file, const json_node *root) {
    const json_node *cases = kvdi_json_get(root, "cases");
    for (size_t i = 0; cases && i < cases->u.array.count; i++) {
        const json_node *c = cases->u.array.items[i];
        unsetenv("KVD_SOCKET");
        unsetenv("XDG_RUNTIME_DIR");
        const json_node *environment = kvdi_json_get(c, "environment");
        for (size_t m = 0; environment && m < environment->u.object.count; m++)
            setenv(environment->u.object.members[m].name, environment->u.object.members[m].value->u.string.bytes, 1);
        kvd_connect_options options = KVD_CONNECT_OPTIONS_INIT;
        options.socket_path = str(c, "explicit");
        conn_config config;
        kvd_error error = KVD_ERROR_INIT;
        if (kvdi_conn_config_init(&config, &options, &error)) abort();
        char want[512], uid[32];
        snprintf(uid, sizeof uid, "%u", (unsigned)getuid());
        const char *pattern = expected(c, "expect"), *at = strstr(pattern, "{uid}");
        if (at) snprintf(want, sizeof want, "%.*s%s%s", (int)(at - pattern), pattern, uid, at + 5);
        else snprintf(want, sizeof want, "%s", pattern);
        verdict(file, str(c, "name"), want, config.socket_path);
        kvdi_conn_config_free(&config);
    }
    unsetenv("KVD_SOCKET");
    unsetenv("XDG_RUNTIME_DIR");
    const json_node *addresses = kvdi_json_get(kvdi_json_get(root, "addresses"), "cases");
    for (size_t i = 0; addresses && i < addresses->u.array.count; i++) {
        const json_node *c = addresses->u.array.items[i];
        char *path = filled(str(c, "prefix"), str(c, "fill"), (size_t)integer(c, "length", 0));
        int fd = -1;
        int status = kvdi_conn_try_connect(path, kvdi_conn_deadline(100), &fd);
        if (fd >= 0) close(fd);
        const json_node *fits = kvdi_json_get(c, "fits");
        verdict(file, str(c, "name"), fits && fits->u.flag ? "fits" : "does not fit", status == ENAMETOOLONG ? "does not fit" : "fits");
        free(path);
    }
}

static char *from_hex(const char *hex) {
    size_t n = strlen(hex) / 2;
    char *out = calloc(1, n + 1);
    if (!out) abort();
    for (size_t i = 0; i < n; i++) sscanf(hex + 2 * i, "%2hhx", (unsigned char *)&out[i]);
    return out;
}

static void name_cases(const char *file, const json_node *root) {
    const json_node *cases = kvdi_json_get(root, "cases");
    for (size_t i = 0; cases && i < cases->u.array.count; i++) {
        const json_node *c = cases->u.array.items[i];
        char *name = str(c, "hex") ? from_hex(str(c, "hex"))
                     : str(c, "fill") ? filled("", str(c, "fill"), (size_t)integer(c, "length", 0))
                                      : strdup(str(c, "name"));
        kvd_error error = KVD_ERROR_INIT;
        kvd_status status = kvdi_check_name(str(c, "kind"), name, &error);
        char label[128];
        snprintf(label, sizeof label, "%s %.60s%s (%zu bytes)", str(c, "kind"), name, strlen(name) > 60 ? "..." : "", strlen(name));
        verdict(file, label, expected(c, "expect"), status == KVD_OK ? "valid" : "invalid");
        kvd_error_clear(&error);
        free(name);
    }
}

static void typed_json_cases(const char *file, const json_node *root) {
    const json_node *cases = kvdi_json_get(root, "cases");
    for (size_t i = 0; cases && i < cases->u.array.count; i++) {
        const json_node *c = cases->u.array.items[i];
        json_buffer text = {0};
        if (str(c, "json")) kvdi_buffer_append_str(&text, str(c, "json"));
        else if (kvdi_json_get(c, "string_bytes")) {
            int64_t bytes = integer(c, "string_bytes", 0);
            kvdi_buffer_append_byte(&text, '"');
            for (int64_t n = 0; n < bytes; n++) kvdi_buffer_append_byte(&text, 'a');
            kvdi_buffer_append_byte(&text, '"');
        } else {
            int64_t nest = integer(c, "nest", 0);
            for (int64_t n = 0; n < nest; n++) kvdi_buffer_append_str(&text, str(c, "open"));
            kvdi_buffer_append_str(&text, str(c, "inner"));
            for (int64_t n = 0; n < nest; n++) kvdi_buffer_append_str(&text, str(c, "close"));
        }
        kvd_value *value = NULL;
        kvd_error error = KVD_ERROR_INIT;
        kvd_status status = kvd_value_from_json(text.data, text.len, &value, &error);
        const char *want = expected(c, "expect");
        verdict(file, str(c, "name"), want, status == KVD_OK ? "ok" : "invalid");
        const char *written = expected(c, "written");
        if (status == KVD_OK && written && want && !strcmp(want, "ok")) {
            char *out = kvd_value_to_json(value, NULL);
            char label[160];
            snprintf(label, sizeof label, "%s (written)", str(c, "name"));
            verdict(file, label, written, out);
            free(out);
        }
        kvd_value_free(value);
        kvd_error_clear(&error);
        free(text.data);
    }
}

static const char *kind_of(kvd_status status) {
    switch (status) {
    case KVD_ERROR_NOT_FOUND: return "notFound";
    case KVD_ERROR_INVALID_NAME: return "invalidName";
    case KVD_ERROR_INVALID_VALUE: return "invalidValue";
    case KVD_ERROR_REVISION_MISMATCH: return "revisionMismatch";
    case KVD_ERROR_STORAGE_FAILURE: return "storageFailure";
    case KVD_ERROR_TOO_LARGE: return "tooLarge";
    case KVD_ERROR_UNREADABLE_VALUE: return "unreadableValue";
    case KVD_ERROR_KEY_LOCKED: return "keyLocked";
    case KVD_ERROR_PERMISSION_DENIED: return "permissionDenied";
    case KVD_ERROR_REMOTE: return "remote";
    default: return kvd_status_name(status);
    }
}

static void error_cases(const char *file, const json_node *root) {
    const json_node *cases = kvdi_json_get(root, "cases");
    for (size_t i = 0; cases && i < cases->u.array.count; i++) {
        const json_node *c = cases->u.array.items[i];
        kvd_error error = KVD_ERROR_INIT;
        kvdi_set_reply_error(&error, str(c, "error"), kvdi_json_get(c, "parameters"));
        char label[160], want[160], got[160];
        snprintf(label, sizeof label, "%s #%zu", str(c, "error"), i + 1);
        const json_node *detail = kvdi_json_get(c, "detail");
        snprintf(want, sizeof want, "%s detail %lld", expected(c, "kind"), detail && detail->type == JSON_INT ? (long long)detail->u.integer : -1LL);
        snprintf(got, sizeof got, "%s detail %lld", kind_of(error.status), (long long)error.detail);
        verdict(file, label, want, got);
        if (!error.name || strcmp(error.name, str(c, "error"))) verdict(file, label, "the error's name kept", "another name");
        kvd_error_clear(&error);
    }
}

static json_node *read_cases(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("FAIL %s: %s\n", path, strerror(errno));
        exit(1);
    }
    json_buffer text = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) kvdi_buffer_append(&text, chunk, n);
    fclose(f);
    json_node *root = NULL;
    char message[256];
    if (kvdi_json_parse(text.data, text.len, 64, &root, message, sizeof message)) {
        printf("FAIL %s: not JSON: %s\n", path, message);
        exit(1);
    }
    free(text.data);
    return root;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "Tests/Contract";
    static const struct {
        const char *file;
        void (*run)(const char *, const json_node *);
    } files[] = {{"socket-path.json", socket_cases},
                 {"names.json", name_cases},
                 {"typed-json.json", typed_json_cases},
                 {"error-replies.json", error_cases}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].file);
        json_node *root = read_cases(path);
        count_known(kvdi_json_get(root, "cases"));
        files[i].run(files[i].file, root);
        kvdi_json_free(root);
    }
    printf("contract cases (C): %d checks passed, %d failed; %d cases are known differences (C side)\n", passed, failures, known);
    return failures ? 1 : 0;
}
