/* test_libkvd.c — libkvd end to end, against a real kvd and the real kvctl (clib/libkvd/tests/run.sh
 * starts them). Every call of kvd.h is exercised; values of every type must round-trip exactly
 * with what kvctl writes and reads.
 *
 * Environment: KVD_SOCKET (the kvd run.sh started), KVD_BIN (kvd), KVCTL_BIN (kvctl),
 * LIBKVD_TEST_DIR (a private temp folder). `test_libkvd --unsafe-folder` runs only the check of
 * /tmp/kvd-<uid> (run.sh runs it as another user). LIBKVD_TEST_SMALL=1 leaves out the 16 MiB
 * values (the valgrind run). */
#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvd.h"

static int failures;
static const char *kvctl_bin, *kvd_bin, *test_dir;

#define CHECK(condition, ...)                                                                                                            \
    do {                                                                                                                                 \
        if (!(condition)) {                                                                                                              \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #condition);                                              \
            fprintf(stderr, __VA_ARGS__);                                                                                                \
            fprintf(stderr, "\n");                                                                                                       \
            failures++;                                                                                                                  \
        }                                                                                                                                \
    } while (0)

#define CHECK_OK(call, error)                                                                                                            \
    do {                                                                                                                                 \
        kvd_status status_ = (call);                                                                                                     \
        CHECK(status_ == KVD_OK, "%s: %s", kvd_status_name(status_), (error)->message ? (error)->message : "");                         \
        kvd_error_clear(error);                                                                                                          \
    } while (0)

static char *must_json(const kvd_value *value) {
    char *text = kvd_value_to_json(value, NULL);
    return text ? text : strdup("(unwritable)");
}

static kvd_value *parse(const char *json) {
    kvd_value *value = NULL;
    kvd_error error = KVD_ERROR_INIT;
    if (kvd_value_from_json(json, strlen(json), &value, &error) != KVD_OK) {
        fprintf(stderr, "cannot read %s: %s\n", json, error.message);
        exit(2);
    }
    return value;
}

/* Runs kvctl with `arguments` (NULL-terminated), returns its stdout (the caller frees) and exit
 * status in `*status`. */
static char *kvctl(int *status, const char *const *arguments) {
    int out[2];
    if (pipe(out) != 0) return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        const char *argv[16] = {kvctl_bin};
        for (int i = 0; arguments[i] && i < 14; i++) argv[i + 1] = arguments[i];
        execv(kvctl_bin, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    size_t len = 0, cap = 1 << 16;
    char *text = malloc(cap);
    ssize_t n;
    while ((n = read(out[0], text + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 2) text = realloc(text, cap *= 2);
    }
    text[len] = '\0';
    close(out[0]);
    int wait_status = 0;
    waitpid(pid, &wait_status, 0);
    *status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128;
    return text;
}

static kvd_client *connect_default(void) {
    kvd_client *client = NULL;
    kvd_error error = KVD_ERROR_INIT;
    if (kvd_connect(NULL, &client, &error) != KVD_OK) {
        fprintf(stderr, "cannot connect: %s\n", error.message);
        exit(2);
    }
    return client;
}

/* ---- values alone ---- */

static void values_are_built_read_and_refused_locally(void) {
    kvd_value *v = kvd_value_new_double(1.0);
    char *text = must_json(v);
    CHECK(!strcmp(text, "1.0"), "1.0 is written %s", text);
    free(text);
    kvd_value_free(v);
    CHECK(kvd_value_new_double(0.0 / 0.0) == NULL, "NaN is refused");
    CHECK(kvd_value_new_string("\xff") == NULL, "invalid UTF-8 is refused");
    CHECK(kvd_value_new_date(253402300800LL, 0) == NULL, "the year 10000 is refused");
    kvd_value *dict = kvd_value_new_dict();
    CHECK(kvd_value_dict_set(dict, "$x", kvd_value_new_int(1)), "dict_set");
    CHECK(kvd_value_dict_set(dict, "$x", kvd_value_new_int(2)), "dict_set replaces");
    text = must_json(dict);
    CHECK(!strcmp(text, "{\"$dict\":{\"$x\":2}}"), "a '$' key is wrapped: %s", text);
    free(text);
    kvd_value_free(dict);
    static const char *const refused[] = {"null", "{\"a\":1,\"a\":2}", "9223372036854775808", "1e999", "{\"$date\":\"yesterday\"}",
                                          "{\"$data\":\"A\"}", "{\"$x\":1}", "[1,]", "\"\\ud800\"", "\"a\" x", "{\"$date\":1}"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        kvd_value *out = NULL;
        kvd_error error = KVD_ERROR_INIT;
        kvd_status status = kvd_value_from_json(refused[i], strlen(refused[i]), &out, &error);
        CHECK(status == KVD_ERROR_INVALID_ARGUMENT && error.message, "%s is refused (%s)", refused[i], kvd_status_name(status));
        kvd_error_clear(&error);
    }
    /* 512 levels are a value, 513 are not */
    char deep[1100];
    for (int levels = 512; levels <= 513; levels++) {
        memset(deep, '[', levels);
        memset(deep + levels, ']', levels);
        kvd_value *out = NULL;
        kvd_error error = KVD_ERROR_INIT;
        kvd_status status = kvd_value_from_json(deep, 2 * (size_t)levels, &out, &error);
        CHECK((status == KVD_OK) == (levels == 512), "%d levels: %s", levels, error.message ? error.message : "ok");
        kvd_value_free(out);
        kvd_error_clear(&error);
    }
    if (setlocale(LC_ALL, "de_DE.UTF-8") || setlocale(LC_ALL, "fr_FR.UTF-8")) {
        kvd_value *real = parse("2.5");
        text = must_json(real);
        CHECK(!strcmp(text, "2.5"), "a decimal comma locale still writes %s", text);
        free(text);
        kvd_value_free(real);
        setlocale(LC_ALL, "C");
    }
}

/* ---- every type, both ways, with kvctl ---- */

static const char *const samples[] = {
    "\"plain\"", "\"\"", "\"quote \\\" backslash \\\\ newline \\n tab \\t é 😀 \\u0001\"", "true", "false", "0", "42",
    "-9223372036854775808", "9223372036854775807", "1.0", "0.1", "-2.5e-300", "1.7976931348623157e+308", "-0.0",
    "{\"$date\":\"2026-11-29T17:00:00.250Z\"}", "{\"$date\":\"0001-01-01T00:00:00.000Z\"}", "{\"$data\":\"AAECAwT/\"}",
    "{\"$data\":\"\"}", "{\"$date\":\"2026-11-29T19:00:00.250+02:00\"}", "{\"$date\":\"2026-11-29T17:00:00.1234567Z\"}",
    "\"nul \\u0000 inside\"", "[]", "[1,\"two\",[3.5,{\"$data\":\"AA==\"}],{}]", "{}", "{\"a\":1,\"b\":{\"c\":[true,false]},\"ü\":\"x\"}",
    "{\"$dict\":{\"$x\":1,\"y\":{\"$date\":\"2000-02-29T12:34:56.789Z\"}}}"};

static void every_type_round_trips_with_kvctl(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        kvd_value *value = parse(samples[i]);
        char key[32], back_key[32];
        snprintf(key, sizeof key, "sample%zu", i);
        snprintf(back_key, sizeof back_key, "fromkvctl%zu", i);
        int64_t revision = -1, got_revision = -1;
        CHECK_OK(kvd_set(client, "org.libkvd.types", key, value, KVD_ANY_REVISION, &revision, &error), &error);
        kvd_value *got = NULL;
        kvd_source source = KVD_SOURCE_LOCKED;
        CHECK_OK(kvd_get(client, "org.libkvd.types", key, &got, &got_revision, &source, &error), &error);
        CHECK(kvd_value_equal(value, got), "libkvd reads back what it wrote: %s", samples[i]);
        CHECK(got_revision == revision && source == KVD_SOURCE_USER, "revision %lld of %lld, source %d", (long long)got_revision,
              (long long)revision, source);
        kvd_value_free(got);
        /* kvctl reads what libkvd wrote */
        int status;
        char *printed = kvctl(&status, (const char *const[]){"--json", "get", "org.libkvd.types", key, NULL});
        CHECK(status == 0, "kvctl get %s: status %d", key, status);
        kvd_value *read = NULL;
        kvd_status parsed = kvd_value_from_json(printed, strlen(printed), &read, &error);
        CHECK(parsed == KVD_OK && kvd_value_equal(read, value), "kvctl --json get prints %s for %s", printed, samples[i]);
        kvd_error_clear(&error);
        kvd_value_free(read);
        free(printed);
        /* libkvd reads what kvctl wrote */
        free(kvctl(&status, (const char *const[]){"set", "org.libkvd.types", back_key, "--json", samples[i], NULL}));
        CHECK(status == 0, "kvctl set --json %s: status %d", samples[i], status);
        CHECK_OK(kvd_get(client, "org.libkvd.types", back_key, &got, NULL, NULL, &error), &error);
        char *text = got ? must_json(got) : NULL;
        CHECK(got && kvd_value_equal(value, got), "kvctl wrote %s, libkvd read %s", samples[i], text ? text : "nothing");
        free(text);
        kvd_value_free(got);
        got = NULL;
        kvd_value_free(value);
    }
    /* plain `kvctl get` of a string is the string and a newline */
    kvd_value *string = kvd_value_new_string("dark mode");
    CHECK_OK(kvd_set(client, "org.libkvd.types", "Theme", string, KVD_ANY_REVISION, NULL, &error), &error);
    int status;
    char *printed = kvctl(&status, (const char *const[]){"get", "org.libkvd.types", "Theme", NULL});
    CHECK(status == 0 && !strcmp(printed, "dark mode\n"), "kvctl get prints \"%s\"", printed);
    free(printed);
    kvd_value_free(string);
    /* a date built in C reads in kvctl as the same instant */
    kvd_value *date = kvd_value_new_date(1796058000, 250000000) /* 2026-11-30T17:00:00.250Z */;
    CHECK_OK(kvd_set(client, "org.libkvd.types", "When", date, KVD_ANY_REVISION, NULL, &error), &error);
    printed = kvctl(&status, (const char *const[]){"get", "org.libkvd.types", "When", NULL});
    CHECK(status == 0 && !strcmp(printed, "2026-11-30T17:00:00.250Z\n"), "kvctl get prints \"%s\"", printed);
    free(printed);
    kvd_value_free(date);
}

/* kvd_blame names this program (its executable's path), its pid and uid, for a change it made. */
static void blame_names_this_program(kvd_client *client) {
    kvd_error error = {0};
    kvd_value *one = kvd_value_new_int(1);
    CHECK_OK(kvd_set(client, "org.libkvd.blame", "k", one, KVD_ANY_REVISION, NULL, &error), &error);
    kvd_value_free(one);
    kvd_value *entries = NULL;
    CHECK_OK(kvd_blame(client, "org.libkvd.blame", NULL, &entries, &error), &error);
    const kvd_value *writer = kvd_value_dict_get(kvd_value_dict_get(entries, "k"), "writer");
    char self[4096] = "";
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length > 0) self[length] = 0;
    const char *program = kvd_value_get_string(kvd_value_dict_get(writer, "program"), NULL);
    /* under valgrind the process's executable is valgrind's tool, which runs this program inside it */
    bool named = program && (!strcmp(program, self) || strstr(program, "/valgrind/"));
    CHECK(named, "blame names %s, not this program %s", program ? program : "nothing", self);
    int64_t pid = kvd_value_get_int(kvd_value_dict_get(writer, "pid"));
    int64_t uid = kvd_value_get_int(kvd_value_dict_get(writer, "uid"));
    CHECK(pid == getpid() && uid == (int64_t)getuid(), "blame names pid %lld uid %lld", (long long)pid, (long long)uid);
    kvd_value_free(entries);
    entries = NULL;
    kvd_status status = kvd_blame(client, "org.libkvd.blame", "missing", &entries, &error);
    CHECK(status == KVD_ERROR_NOT_FOUND && !entries, "blame of a missing key: %s", kvd_status_name(status));
    kvd_error_clear(&error);
}

/* ---- the calls and their errors ---- */

static void writes_lists_deletes_and_errors(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    const char *domain = "org.libkvd.calls";
    kvd_value *one = kvd_value_new_int(1), *two = kvd_value_new_string("two");
    int64_t first = 0, second = 0;
    CHECK_OK(kvd_set(client, domain, "a", one, 0, &first, &error), &error);
    /* a conditional write at a stale revision */
    kvd_status status = kvd_set(client, domain, "a", two, 0, NULL, &error);
    CHECK(status == KVD_ERROR_REVISION_MISMATCH && error.detail == first, "stale ifRevision: %s, detail %lld", kvd_status_name(status),
          (long long)error.detail);
    kvd_error_clear(&error);
    CHECK_OK(kvd_set(client, domain, "a", two, first, &second, &error), &error);
    CHECK(second > first, "revisions rise: %lld then %lld", (long long)first, (long long)second);
    /* Apply: all or nothing */
    kvd_change changes[] = {{"b", one, KVD_SOURCE_USER}, {"c", two, KVD_SOURCE_USER}, {"a", NULL, KVD_SOURCE_USER}};
    int64_t applied = 0;
    CHECK_OK(kvd_apply(client, domain, changes, 3, KVD_ANY_REVISION, &applied, &error), &error);
    kvd_value *values = NULL, *sources = NULL;
    int64_t listed = 0;
    CHECK_OK(kvd_list(client, domain, &values, &listed, &sources, &error), &error);
    kvd_value *expected = parse("{\"b\":1,\"c\":\"two\"}");
    CHECK(kvd_value_equal(values, expected), "List after Apply: %s", values ? kvd_value_to_json(values, NULL) : "nothing");
    CHECK(listed == applied && kvd_value_dict_length(sources) == 0, "List revision %lld, Apply %lld", (long long)listed, (long long)applied);
    kvd_value_free(values);
    kvd_value_free(sources);
    kvd_change bad[] = {{"d", one, KVD_SOURCE_USER}, {"", one, KVD_SOURCE_USER}};
    status = kvd_apply(client, domain, bad, 2, KVD_ANY_REVISION, NULL, &error);
    CHECK(status == KVD_ERROR_INVALID_NAME, "Apply with an empty key: %s: %s", kvd_status_name(status), error.message);
    kvd_error_clear(&error);
    status = kvd_apply(client, domain, changes, 1, first, NULL, &error);
    CHECK(status == KVD_ERROR_REVISION_MISMATCH, "Apply at a stale revision: %s", kvd_status_name(status));
    kvd_error_clear(&error);
    status = kvd_get(client, domain, "d", NULL, NULL, NULL, &error);
    CHECK(status == KVD_ERROR_NOT_FOUND, "a refused Apply changed nothing: %s", kvd_status_name(status));
    CHECK(error.message && !strcmp(error.message, "no key \"d\" in domain \"org.libkvd.calls\""), "message: %s", error.message);
    CHECK(error.name && !strcmp(error.name, "io.kvd.Defaults.NotFound"), "name: %s", error.name);
    kvd_error_clear(&error);
    /* names kvd refuses, with kvd's reason */
    status = kvd_set(client, "bad domain!", "k", one, KVD_ANY_REVISION, NULL, &error);
    CHECK(status == KVD_ERROR_INVALID_NAME && error.message && strstr(error.message, "invalid name \"bad domain!\": a domain name"),
          "bad domain: %s: %s", kvd_status_name(status), error.message);
    kvd_error_clear(&error);
    status = kvd_get(client, domain, "\xc3", NULL, NULL, NULL, &error);
    CHECK(status == KVD_ERROR_INVALID_NAME, "a key that is not UTF-8: %s", kvd_status_name(status));
    kvd_error_clear(&error);
    status = kvd_get(client, NULL, "k", NULL, NULL, NULL, &error);
    CHECK(status == KVD_ERROR_INVALID_ARGUMENT, "a NULL domain: %s", kvd_status_name(status));
    kvd_error_clear(&error);
    /* Domains, Delete of a key and of a domain */
    char **domains = NULL;
    size_t count = 0;
    CHECK_OK(kvd_domains(client, &domains, &count, &error), &error);
    bool seen = false;
    for (size_t i = 0; i < count; i++) seen |= !strcmp(domains[i], domain);
    CHECK(seen && domains[count] == NULL, "Domains lists %s", domain);
    kvd_strv_free(domains);
    CHECK_OK(kvd_delete(client, domain, "b", NULL, &error), &error);
    status = kvd_get(client, domain, "b", NULL, NULL, NULL, &error);
    CHECK(status == KVD_ERROR_NOT_FOUND, "a deleted key: %s", kvd_status_name(status));
    kvd_error_clear(&error);
    CHECK_OK(kvd_delete(client, domain, NULL, NULL, &error), &error);
    status = kvd_get(client, domain, "c", NULL, NULL, NULL, &error);
    CHECK(status == KVD_ERROR_NOT_FOUND, "a key of a deleted domain: %s", kvd_status_name(status));
    kvd_error_clear(&error);
    kvd_value_free(expected);
    kvd_value_free(one);
    kvd_value_free(two);
}

/* ---- Watch ---- */

typedef struct seen {
    int events;
    bool initial;
    size_t initial_count;
    char last_key[64];
    bool last_removed;
    char last_value[64];
} seen;

static void on_event(const kvd_watch_event *event, void *user_data) {
    seen *s = user_data;
    if (event->initial) s->initial = true, s->initial_count = event->count;
    s->events++;
    for (size_t i = 0; i < event->count; i++) {
        snprintf(s->last_key, sizeof s->last_key, "%s", event->changes[i].key);
        s->last_removed = event->changes[i].value == NULL;
        const char *text = kvd_value_get_string(event->changes[i].value, NULL);
        snprintf(s->last_value, sizeof s->last_value, "%s", text ? text : "");
    }
}

/* Waits (up to 20 s, which only a failure takes) for an event about `key`. */
static bool wait_for_key(kvd_watch *watch, seen *s, const char *key) {
    for (int round = 0; round < 200; round++) {
        if (!strcmp(s->last_key, key)) return true;
        kvd_error error = KVD_ERROR_INIT;
        kvd_status status = kvd_watch_wait(watch, 100, &error);
        CHECK(status == KVD_OK, "kvd_watch_wait: %s", error.message);
        kvd_error_clear(&error);
        if (status) return false;
    }
    return !strcmp(s->last_key, key);
}

static void watch_sees_kvctl_and_libkvd_changes(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    const char *domain = "org.libkvd.watch";
    kvd_value *start = kvd_value_new_string("start");
    kvd_delete(client, domain, NULL, NULL, NULL); /* from an earlier run */
    CHECK_OK(kvd_set(client, domain, "first", start, KVD_ANY_REVISION, NULL, &error), &error);
    seen s = {0};
    kvd_watch *watch = NULL;
    CHECK_OK(kvd_watch_new(client, domain, NULL, on_event, &s, &watch, &error), &error);
    if (!watch) return;
    CHECK(s.initial && s.events == 1 && s.initial_count == 1, "the first event has the current values (%d events)", s.events);
    CHECK(kvd_watch_fd(watch) >= 0, "a descriptor to poll");
    CHECK_OK(kvd_watch_dispatch(watch, &error), &error); /* nothing arrived: returns at once */
    int status;
    free(kvctl(&status, (const char *const[]){"set", domain, "FromKvctl", "hello", NULL}));
    CHECK(wait_for_key(watch, &s, "FromKvctl") && !strcmp(s.last_value, "hello"), "the watch saw kvctl's set (last: %s=%s)", s.last_key,
          s.last_value);
    CHECK_OK(kvd_set(client, domain, "FromC", start, KVD_ANY_REVISION, NULL, &error), &error);
    CHECK(wait_for_key(watch, &s, "FromC"), "the watch saw libkvd's set");
    free(kvctl(&status, (const char *const[]){"delete", domain, "FromKvctl", NULL}));
    s.last_key[0] = '\0';
    CHECK(wait_for_key(watch, &s, "FromKvctl") && s.last_removed, "the watch saw kvctl's delete as a removal");
    kvd_watch_free(watch);
    /* a watch of one key: a change of another key is not delivered, so the first event after the
     * initial one is about the watched key */
    seen one = {0};
    CHECK_OK(kvd_watch_new(client, domain, "Watched", on_event, &one, &watch, &error), &error);
    if (!watch) return;
    CHECK(one.initial && one.initial_count == 0, "a key with no value: an initial event without changes (%zu)", one.initial_count);
    free(kvctl(&status, (const char *const[]){"set", domain, "Other", "x", NULL}));
    free(kvctl(&status, (const char *const[]){"set", domain, "Watched", "y", NULL}));
    CHECK(wait_for_key(watch, &one, "Watched") && one.events == 2, "only the watched key's change arrives (%d events)", one.events);
    kvd_watch_free(watch);
    /* a watch of a bad name is kvd's error */
    kvd_status refused = kvd_watch_new(client, "no spaces", NULL, on_event, &s, &watch, &error);
    CHECK(refused == KVD_ERROR_INVALID_NAME, "Watch of a bad domain: %s", kvd_status_name(refused));
    kvd_error_clear(&error);
    kvd_value_free(start);
}

/* ---- NULL arguments ---- */

/* Each call with a NULL client, watch or argument fails with its documented value (no crash, no
 * abort), and the error says which argument. Run in a child, so that a crash is a failure here. */
static void null_arguments_are_refused_child(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    kvd_value *v = kvd_value_new_int(1);
    kvd_change change = {"k", v, KVD_SOURCE_USER};
    kvd_status status;
#define REFUSED(call)                                                                                                                    \
    do {                                                                                                                                 \
        status = (call);                                                                                                                 \
        CHECK(status == KVD_ERROR_INVALID_ARGUMENT && error.status == status && error.message, "%s: %s", #call, kvd_status_name(status)); \
        kvd_error_clear(&error);                                                                                                         \
        CHECK((call) == KVD_ERROR_INVALID_ARGUMENT, "%s without an error", #call);                                                       \
    } while (0)
    REFUSED(kvd_get(NULL, "d", "k", NULL, NULL, NULL, &error));
    REFUSED(kvd_get(client, NULL, "k", NULL, NULL, NULL, &error));
    REFUSED(kvd_get(client, "d", NULL, NULL, NULL, NULL, &error));
    REFUSED(kvd_set(NULL, "d", "k", v, KVD_ANY_REVISION, NULL, &error));
    REFUSED(kvd_set(client, "d", "k", NULL, KVD_ANY_REVISION, NULL, &error));
    REFUSED(kvd_set(client, NULL, "k", v, KVD_ANY_REVISION, NULL, &error));
    REFUSED(kvd_apply(NULL, "d", &change, 1, KVD_ANY_REVISION, NULL, &error));
    REFUSED(kvd_apply(client, "d", NULL, 1, KVD_ANY_REVISION, NULL, &error));
    REFUSED(kvd_delete(NULL, "d", "k", NULL, &error));
    REFUSED(kvd_delete(client, NULL, "k", NULL, &error));
    REFUSED(kvd_list(NULL, "d", NULL, NULL, NULL, &error));
    REFUSED(kvd_list(client, NULL, NULL, NULL, NULL, &error));
    REFUSED(kvd_domains(NULL, NULL, NULL, &error));
    REFUSED(kvd_watch_dispatch(NULL, &error));
    REFUSED(kvd_watch_wait(NULL, 0, &error));
    REFUSED(kvd_connect(NULL, NULL, &error));
    REFUSED(kvd_value_from_json(NULL, 3, NULL, &error));
    kvd_watch *watch = NULL;
    REFUSED(kvd_watch_new(NULL, "d", NULL, on_event, NULL, &watch, &error));
    REFUSED(kvd_watch_new(client, "d", NULL, NULL, NULL, &watch, &error));
    REFUSED(kvd_watch_new(client, "d", NULL, on_event, NULL, NULL, &error));
#undef REFUSED
    CHECK(kvd_client_socket_path(NULL) == NULL, "kvd_client_socket_path(NULL) is NULL");
    CHECK(kvd_watch_fd(NULL) == -1, "kvd_watch_fd(NULL) is -1");
    CHECK(!strcmp(kvd_type_name(kvd_value_type(NULL)), "unknown"), "kvd_value_type(NULL) is no type");
    kvd_client_free(NULL);
    kvd_watch_free(NULL);
    kvd_value_free(NULL);
    kvd_strv_free(NULL);
    kvd_error_clear(NULL);
    kvd_value_free(v);
}

static void null_arguments_are_refused(kvd_client *client) {
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        null_arguments_are_refused_child(client);
        _exit(failures ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the NULL checks: %s %d", WIFSIGNALED(status) ? "killed by signal" : "exit status",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* ---- fork ---- */

/* 300 sets and gets of its own key with its own values: the number of wrong replies. */
static int own_calls(kvd_client *client, const char *key, int64_t base) {
    int wrong = 0;
    kvd_error error = KVD_ERROR_INIT;
    for (int64_t i = 0; i < 300; i++) {
        kvd_value *v = kvd_value_new_int(base + i), *got = NULL;
        int64_t revision = -1;
        kvd_status set = kvd_set(client, "org.libkvd.fork", key, v, KVD_ANY_REVISION, &revision, &error);
        kvd_error_clear(&error);
        kvd_status get = kvd_get(client, "org.libkvd.fork", key, &got, NULL, NULL, &error);
        kvd_error_clear(&error);
        if (set != KVD_OK || revision <= 0 || get != KVD_OK || kvd_value_get_int(got) != base + i || kvd_value_type(got) != KVD_TYPE_INT) wrong++;
        kvd_value_free(v);
        kvd_value_free(got);
    }
    return wrong;
}

/* After fork(), the child's calls get a connection of its own; the parent's goes on unharmed. */
static void a_forked_child_gets_its_own_connection(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    CHECK_OK(kvd_domains(client, NULL, NULL, &error), &error); /* connected before the fork */
    seen s = {0};
    kvd_watch *watch = NULL;
    CHECK_OK(kvd_watch_new(client, "org.libkvd.fork", "parent", on_event, &s, &watch, &error), &error);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int wrong = own_calls(client, "child", 1000000);
        if (wrong) fprintf(stderr, "the child: %d of 300 calls got a wrong reply\n", wrong);
        /* the parent's watch is not read here: it is over for the child */
        kvd_status dispatched = watch ? kvd_watch_dispatch(watch, &error) : KVD_ERROR_CONNECTION;
        kvd_error_clear(&error);
        if (dispatched != KVD_ERROR_CONNECTION) fprintf(stderr, "the child dispatched the parent's watch: %s\n", kvd_status_name(dispatched)), wrong++;
        kvd_watch_free(watch);
        kvd_client_free(client); /* closes only the child's */
        _exit(wrong ? 1 : 0);
    }
    int wrong = own_calls(client, "parent", 2000000);
    CHECK(wrong == 0, "the parent: %d of 300 calls got a wrong reply", wrong);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's calls (status %d)", status);
    /* after the child exited, the parent's connection still works */
    CHECK(own_calls(client, "parent", 3000000) == 0, "the parent after the child exited");
    if (watch) {
        kvd_value *v = kvd_value_new_string("seen");
        CHECK_OK(kvd_set(client, "org.libkvd.fork", "parent", v, KVD_ANY_REVISION, NULL, &error), &error);
        for (int round = 0; round < 200 && strcmp(s.last_value, "seen"); round++)
            if (kvd_watch_wait(watch, 100, &error) != KVD_OK) break; /* the 900 earlier events first */
        CHECK(!strcmp(s.last_value, "seen"), "the parent's watch goes on after the child: %s", error.message ? error.message : s.last_value);
        kvd_error_clear(&error);
        kvd_value_free(v);
        kvd_watch_free(watch);
    }
    kvd_delete(client, "org.libkvd.fork", NULL, NULL, NULL);
}

/* ---- a watch's first reply in pieces ---- */

/* A domain over 2 MiB: kvd sends the current values in pieces of about 1 MiB (all but the last
 * `partial`); the watch's initial event holds all of them, the key of the last piece included. */
static void a_large_domain_comes_whole_in_the_initial_event(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    const char *domain = "org.libkvd.pieces";
    enum { KEYS = 2600 };
    kvd_delete(client, domain, NULL, NULL, NULL);
    char filler[1025];
    memset(filler, 'p', 1024);
    filler[1024] = '\0';
    kvd_change *changes = calloc(KEYS + 1, sizeof *changes);
    char (*keys)[16] = calloc(KEYS, sizeof *keys);
    kvd_value *big = kvd_value_new_string(filler), *last = kvd_value_new_string("last");
    for (int i = 0; i < KEYS; i++) {
        snprintf(keys[i], sizeof keys[i], "k%04d", i);
        changes[i] = (kvd_change){keys[i], big, KVD_SOURCE_USER};
    }
    changes[KEYS] = (kvd_change){"zz-last", last, KVD_SOURCE_USER}; /* sorted last: in the last piece */
    CHECK_OK(kvd_apply(client, domain, changes, KEYS + 1, KVD_ANY_REVISION, NULL, &error), &error);
    seen s = {0};
    kvd_watch *watch = NULL;
    CHECK_OK(kvd_watch_new(client, domain, NULL, on_event, &s, &watch, &error), &error);
    CHECK(s.events == 1 && s.initial && s.initial_count == KEYS + 1, "one initial event with all %d keys (%d events, %zu keys)", KEYS + 1,
          s.events, s.initial_count);
    CHECK(!strcmp(s.last_key, "zz-last") && !strcmp(s.last_value, "last"), "the last piece's key is in it (last: %s=%s)", s.last_key,
          s.last_value);
    if (watch) {
        CHECK_OK(kvd_watch_wait(watch, 200, &error), &error);
        CHECK(s.events == 1, "no piece comes after the initial event (%d events)", s.events);
        kvd_value *v = kvd_value_new_string("after");
        s.last_key[0] = '\0';
        CHECK_OK(kvd_set(client, domain, "zz-last", v, KVD_ANY_REVISION, NULL, &error), &error);
        CHECK(wait_for_key(watch, &s, "zz-last") && s.events == 2 && !strcmp(s.last_value, "after"), "then the next commit (%d events)",
              s.events);
        kvd_value_free(v);
    }
    kvd_watch_free(watch);
    kvd_delete(client, domain, NULL, NULL, NULL);
    kvd_value_free(big);
    kvd_value_free(last);
    free(keys);
    free(changes);
}

/* ---- a WatchAll that starts with the current state ---- */

typedef struct current_seen {
    int domains, withheld, other, first_events, events;
    int64_t revision, first_revision, event_revision;
    char withheld_name[64], event_domain[64], event_value[64];
    bool values_right;
} current_seen;

static void on_current(const kvd_current_domain *domain, void *user_data) {
    current_seen *s = user_data;
    if (strncmp(domain->domain, "org.libkvd.current.", 19) != 0) {
        s->other++;
        return;
    }
    s->revision = domain->revision;
    if (domain->withheld) {
        s->withheld++;
        snprintf(s->withheld_name, sizeof s->withheld_name, "%s", domain->domain);
        return;
    }
    s->domains++;
    char expected[64];
    snprintf(expected, sizeof expected, "value-%s", domain->domain + 19);
    const char *text = domain->count == 1 ? kvd_value_get_string(domain->changes[0].value, NULL) : NULL;
    if (!text || strcmp(text, expected) != 0 || strcmp(domain->changes[0].key, "k") != 0) s->values_right = false;
}

static void on_all_event(const kvd_watch_all_event *event, void *user_data) {
    current_seen *s = user_data;
    if (event->domain == NULL) {
        s->first_events++;
        s->first_revision = event->revision;
        return;
    }
    s->events++;
    s->event_revision = event->revision;
    snprintf(s->event_domain, sizeof s->event_domain, "%s", event->domain);
    const char *text = event->count ? kvd_value_get_string(event->changes[0].value, NULL) : NULL;
    snprintf(s->event_value, sizeof s->event_value, "%s", text ? text : "");
}

static void on_read_count(const kvd_watch_all_event *event, void *user_data) { *(size_t *)user_data = event->count; }

/* kvd_watch_all_current_new: 200 domains' values arrive, one call each, before it returns; a
 * domain over kvd's per-domain budget is only named (read apart, it has its values); a domain
 * created afterwards comes as an event of the stream. */
static void a_watch_all_starts_with_every_domains_values(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    enum { DOMAINS = 200, BIG_KEYS = 300 };
    char domain[64], value[64];
    for (int i = 0; i < DOMAINS; i++) {
        snprintf(domain, sizeof domain, "org.libkvd.current.d%03d", i);
        snprintf(value, sizeof value, "value-d%03d", i);
        kvd_value *v = kvd_value_new_string(value);
        CHECK_OK(kvd_set(client, domain, "k", v, KVD_ANY_REVISION, NULL, &error), &error);
        kvd_value_free(v);
    }
    char filler[1025], keys[BIG_KEYS][8];
    memset(filler, 'b', 1024);
    filler[1024] = '\0';
    kvd_value *big = kvd_value_new_string(filler);
    kvd_change changes[BIG_KEYS];
    for (int i = 0; i < BIG_KEYS; i++) {
        snprintf(keys[i], sizeof keys[i], "a%03d", i);
        changes[i] = (kvd_change){keys[i], big, KVD_SOURCE_USER};
    }
    CHECK_OK(kvd_apply(client, "org.libkvd.current.zbig", changes, BIG_KEYS, KVD_ANY_REVISION, NULL, &error), &error);
    current_seen s = {.values_right = true};
    kvd_watch *watch = NULL;
    bool complete = false;
    CHECK_OK(kvd_watch_all_current_new(client, "org.libkvd.current.", on_current, on_all_event, &s, &complete, &watch, &error), &error);
    CHECK(complete && s.domains == DOMAINS && s.values_right, "every domain's values before it returns (complete %d, %d domains, right %d)",
          complete, s.domains, s.values_right);
    CHECK(s.withheld == 1 && !strcmp(s.withheld_name, "org.libkvd.current.zbig"), "the domain over the budget named (%d: %s)", s.withheld,
          s.withheld_name);
    CHECK(s.other == 0, "no domain outside the prefix (%d)", s.other);
    size_t read = 0;
    CHECK_OK(kvd_read_domain(client, "org.libkvd.current.zbig", on_read_count, &read, &error), &error);
    CHECK(read == BIG_KEYS, "the withheld domain read apart has its %d keys (%zu)", BIG_KEYS, read);
    CHECK(s.first_events == 1 && s.first_revision == s.revision && s.events == 0, "then the first event, at the state's revision");
    if (watch) {
        kvd_value *v = kvd_value_new_string("late");
        CHECK_OK(kvd_set(client, "org.libkvd.current.new", "k", v, KVD_ANY_REVISION, NULL, &error), &error);
        for (int round = 0; round < 200 && s.events == 0; round++) CHECK_OK(kvd_watch_wait(watch, 100, &error), &error);
        CHECK(s.events == 1 && !strcmp(s.event_domain, "org.libkvd.current.new") && !strcmp(s.event_value, "late") &&
                  s.event_revision > s.revision,
              "a domain made afterwards comes on the stream (%d events, %s=%s)", s.events, s.event_domain, s.event_value);
        kvd_value_free(v);
    }
    kvd_watch_free(watch);
    watch = NULL;
    CHECK(kvd_watch_all_current_new(client, NULL, NULL, on_all_event, &s, &complete, &watch, NULL) == KVD_ERROR_INVALID_ARGUMENT &&
              kvd_watch_all_current_new(client, NULL, on_current, on_all_event, &s, NULL, &watch, NULL) == KVD_ERROR_INVALID_ARGUMENT &&
              kvd_watch_all_current_new(NULL, NULL, on_current, on_all_event, &s, &complete, &watch, NULL) == KVD_ERROR_INVALID_ARGUMENT &&
              kvd_watch_all_current_new(client, "-bad", on_current, on_all_event, &s, &complete, &watch, NULL) == KVD_ERROR_INVALID_NAME &&
              watch == NULL,
          "NULL arguments and a bad prefix are refused");
    for (int i = 0; i < DOMAINS; i++) {
        snprintf(domain, sizeof domain, "org.libkvd.current.d%03d", i);
        kvd_delete(client, domain, NULL, NULL, NULL);
    }
    kvd_delete(client, "org.libkvd.current.zbig", NULL, NULL, NULL);
    kvd_delete(client, "org.libkvd.current.new", NULL, NULL, NULL);
    kvd_value_free(big);
}

/* kvd_watch_all_current_raw_new: each domain's changes as JSON that kvd_changes_from_json decodes
 * to the values set (strings holding quotes, brackets and escapes that a scan must skip, a second
 * key); a domain over the budget named; then the stream's events; kvd_changes_from_json refuses
 * what is not an array of changes, with nothing filled. */
typedef struct raw_seen {
    int domains, withheld, wrong, first_events;
    char wrong_domain[80];
} raw_seen;

static const char *const RAW_TRICKY = "a]\"}[{\\ \"changes\":[] \xc3\xa9\t";

static void on_raw(const kvd_current_raw *domain, void *user_data) {
    raw_seen *s = user_data;
    if (strncmp(domain->domain, "org.libkvd.raw.", 15) != 0) return;
    if (domain->withheld) {
        s->withheld += !strcmp(domain->domain, "org.libkvd.raw.zbig");
        return;
    }
    s->domains++;
    kvd_change *changes = NULL;
    size_t count = 0;
    char expected[64];
    snprintf(expected, sizeof expected, "value-%s", domain->domain + 15);
    bool right = domain->changes_json[domain->changes_json_len] == '\0' &&
                 kvd_changes_from_json(domain->changes_json, domain->changes_json_len, &changes, &count, NULL) == KVD_OK && count == 2;
    const char *k = right ? kvd_value_get_string(changes[0].value, NULL) : NULL;
    const char *tricky = right ? kvd_value_get_string(changes[1].value, NULL) : NULL;
    right = right && !strcmp(changes[0].key, "k") && k && !strcmp(k, expected) && !strcmp(changes[1].key, "t\"]") && tricky &&
            !strcmp(tricky, RAW_TRICKY);
    if (!right) s->wrong++, snprintf(s->wrong_domain, sizeof s->wrong_domain, "%s: %s", domain->domain, domain->changes_json);
    kvd_changes_free(changes, count);
}

static void on_raw_event(const kvd_watch_all_event *event, void *user_data) { ((raw_seen *)user_data)->first_events += event->domain == NULL; }

static void a_raw_current_state_decodes_when_asked(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    enum { DOMAINS = 50, BIG_KEYS = 300 };
    char domain[64], value[64];
    kvd_value *tricky = kvd_value_new_string(RAW_TRICKY);
    for (int i = 0; i < DOMAINS; i++) {
        snprintf(domain, sizeof domain, "org.libkvd.raw.d%03d", i);
        snprintf(value, sizeof value, "value-d%03d", i);
        kvd_value *v = kvd_value_new_string(value);
        kvd_change both[2] = {{"k", v, KVD_SOURCE_USER}, {"t\"]", tricky, KVD_SOURCE_USER}};
        CHECK_OK(kvd_apply(client, domain, both, 2, KVD_ANY_REVISION, NULL, &error), &error);
        kvd_value_free(v);
    }
    char filler[1025];
    memset(filler, 'b', 1024);
    filler[1024] = '\0';
    kvd_value *big = kvd_value_new_string(filler);
    for (int i = 0; i < BIG_KEYS; i++) {
        snprintf(value, sizeof value, "a%03d", i);
        CHECK_OK(kvd_set(client, "org.libkvd.raw.zbig", value, big, KVD_ANY_REVISION, NULL, &error), &error);
    }
    raw_seen s = {0};
    kvd_watch *watch = NULL;
    bool complete = false;
    CHECK_OK(kvd_watch_all_current_raw_new(client, "org.libkvd.raw.", on_raw, on_raw_event, &s, &complete, &watch, &error), &error);
    CHECK(complete && s.domains == DOMAINS && s.wrong == 0 && s.withheld == 1 && s.first_events == 1,
          "every domain's JSON decodes to its values (complete %d, %d domains, %d wrong: %s; %d withheld, %d first events)", complete,
          s.domains, s.wrong, s.wrong_domain, s.withheld, s.first_events);
    kvd_watch_free(watch);
    static const char *const bad[] = {"[", "{}", "[{\"value\":1}]", "[{\"key\":\"k\",\"value\":1,\"source\":\"elsewhere\"}]",
                                      "[{\"key\":\"k\",\"value\":{\"$date\":\"x\"}}]", "[1]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        kvd_change *changes = (kvd_change *)1;
        size_t count = 7;
        kvd_status status = kvd_changes_from_json(bad[i], strlen(bad[i]), &changes, &count, &error);
        CHECK(status != KVD_OK && changes == NULL && count == 0 && error.message, "%s is refused with nothing filled (%s)", bad[i],
              kvd_status_name(status));
        kvd_error_clear(&error);
    }
    CHECK(kvd_watch_all_current_raw_new(client, NULL, NULL, on_raw_event, &s, &complete, &watch, NULL) == KVD_ERROR_INVALID_ARGUMENT &&
              kvd_changes_from_json(NULL, 0, NULL, NULL, NULL) == KVD_ERROR_INVALID_ARGUMENT,
          "NULL arguments are refused");
    for (int i = 0; i < DOMAINS; i++) {
        snprintf(domain, sizeof domain, "org.libkvd.raw.d%03d", i);
        kvd_delete(client, domain, NULL, NULL, NULL);
    }
    kvd_delete(client, "org.libkvd.raw.zbig", NULL, NULL, NULL);
    kvd_value_free(big);
    kvd_value_free(tricky);
}

/* ---- big values ---- */

static void values_up_to_the_message_limit(kvd_client *client) {
    kvd_error error = KVD_ERROR_INIT;
    size_t size = KVD_MESSAGE_LIMIT - 2048; /* within the domain budget: 16 MiB less 1 KiB of envelope */
    char *text = malloc(size + 1);
    for (size_t i = 0; i < size; i++) text[i] = (char)('a' + i % 26);
    text[size] = '\0';
    kvd_value *big = kvd_value_new_string_len(text, size);
    CHECK_OK(kvd_set(client, "org.libkvd.big", "big", big, KVD_ANY_REVISION, NULL, &error), &error);
    kvd_value *got = NULL;
    CHECK_OK(kvd_get(client, "org.libkvd.big", "big", &got, NULL, NULL, &error), &error);
    CHECK(kvd_value_equal(big, got), "a value of 16 MiB - 2 KiB reads back");
    kvd_value_free(got);
    int status;
    char *printed = kvctl(&status, (const char *const[]){"get", "org.libkvd.big", "big", NULL});
    CHECK(status == 0 && strlen(printed) == size + 1 && !memcmp(printed, text, size), "kvctl reads the big value (%zu bytes)", strlen(printed));
    free(printed);
    kvd_value_free(big);
    /* one byte over the limit: refused without being sent, and the connection goes on */
    char *over = realloc(text, KVD_MESSAGE_LIMIT + 2);
    memset(over, 'x', KVD_MESSAGE_LIMIT + 1);
    kvd_value *too_big = kvd_value_new_string_len(over, KVD_MESSAGE_LIMIT + 1);
    kvd_status refused = kvd_set(client, "org.libkvd.big", "big", too_big, KVD_ANY_REVISION, NULL, &error);
    CHECK(refused == KVD_ERROR_TOO_LARGE && error.message, "over the limit: %s", kvd_status_name(refused));
    CHECK(error.detail == KVD_MESSAGE_LIMIT && !error.name, "over the limit: detail is the limit (%lld)", (long long)error.detail);
    kvd_error_clear(&error);
    /* within one message, but the domain would not fit one reply: kvd says TooLarge */
    kvd_value *almost = kvd_value_new_string_len(over, KVD_MESSAGE_LIMIT - 100);
    refused = kvd_set(client, "org.libkvd.big", "other", almost, KVD_ANY_REVISION, NULL, &error);
    CHECK(refused == KVD_ERROR_TOO_LARGE && error.name, "a domain over the limit: %s: %s", kvd_status_name(refused), error.message);
    kvd_error_clear(&error);
    CHECK_OK(kvd_delete(client, "org.libkvd.big", NULL, NULL, &error), &error);
    kvd_value_free(too_big);
    kvd_value_free(almost);
    free(over);
}

/* ---- one client, many threads ---- */

static void *hammer(void *argument) {
    kvd_client *client = argument;
    kvd_error error = KVD_ERROR_INIT;
    char key[32];
    snprintf(key, sizeof key, "thread%lu", (unsigned long)pthread_self() % 1000003);
    for (int i = 0; i < 40; i++) {
        kvd_value *v = kvd_value_new_int(i), *got = NULL;
        CHECK_OK(kvd_set(client, "org.libkvd.threads", key, v, KVD_ANY_REVISION, NULL, &error), &error);
        CHECK_OK(kvd_get(client, "org.libkvd.threads", key, &got, NULL, NULL, &error), &error);
        CHECK(kvd_value_get_int(got) == i, "each thread reads its own write");
        kvd_value_free(v);
        kvd_value_free(got);
    }
    return NULL;
}

static void one_client_is_shared_by_threads(kvd_client *client) {
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, hammer, client);
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
}

/* ---- kvd not reachable, autostart ---- */

static void nothing_listening_is_a_clear_error(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/nobody/kvd.sock", test_dir);
    kvd_connect_options options = KVD_CONNECT_OPTIONS_INIT;
    options.socket_path = path;
    options.no_autostart = 1;
    kvd_client *client = NULL;
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = kvd_connect(&options, &client, &error);
    CHECK(status == KVD_ERROR_CANNOT_CONNECT && error.message && strstr(error.message, path) && strstr(error.message, "No such file"),
          "no socket: %s: %s", kvd_status_name(status), error.message);
    kvd_error_clear(&error);
    /* KVD_NO_AUTOSTART=1 does the same */
    options.no_autostart = 0;
    setenv("KVD_NO_AUTOSTART", "1", 1);
    status = kvd_connect(&options, &client, &error);
    CHECK(status == KVD_ERROR_CANNOT_CONNECT, "KVD_NO_AUTOSTART=1: %s", kvd_status_name(status));
    kvd_error_clear(&error);
    unsetenv("KVD_NO_AUTOSTART");
    /* a kvd that is not where it should be */
    options.daemon_path = "/nonexistent/kvd";
    status = kvd_connect(&options, &client, &error);
    CHECK(status == KVD_ERROR_CANNOT_START && strstr(error.message, "/nonexistent/kvd"), "no kvd to start: %s: %s", kvd_status_name(status),
          error.message);
    kvd_error_clear(&error);
    /* a regular file where the socket should be: said so, and nothing started in its place */
    snprintf(path, sizeof path, "%s/regular-file.sock", test_dir);
    fclose(fopen(path, "w"));
    options.socket_path = path;
    for (int autostart = 0; autostart < 2; autostart++) {
        options.no_autostart = !autostart;
        status = kvd_connect(&options, &client, &error);
        CHECK(status == KVD_ERROR_CANNOT_CONNECT && strstr(error.message, path) && strstr(error.message, "not a socket") &&
                  !strstr(error.message, "Connection refused"),
              "a regular file as the socket (autostart %d): %s: %s", autostart, kvd_status_name(status), error.message);
        kvd_error_clear(&error);
    }
    options.no_autostart = 1;
    unlink(path);
    /* a socket that accepts but never answers: a timeout, not a hang */
    snprintf(path, sizeof path, "%s/silent.sock", test_dir);
    unlink(path);
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    CHECK(bind(listener, (struct sockaddr *)&address, sizeof address) == 0 && listen(listener, 4) == 0, "listen: %s", strerror(errno));
    options.socket_path = path;
    options.daemon_path = NULL;
    options.timeout_ms = 200;
    CHECK_OK(kvd_connect(&options, &client, &error), &error);
    if (client) {
        status = kvd_get(client, "d", "k", NULL, NULL, NULL, &error);
        CHECK(status == KVD_ERROR_TIMEOUT && strstr(error.message, "did not answer"), "silent kvd: %s: %s", kvd_status_name(status),
              error.message);
        kvd_error_clear(&error);
        kvd_client_free(client);
    }
    close(listener);
}

/* A kvd that takes a client's own connection (kvd_connect's, never used here) and answers the
 * call on its next one with `replies` (each a message without its NUL), then waits for the client
 * to go. */
typedef struct canned_kvd {
    int listener;
    const char *const *replies;
    size_t count;
} canned_kvd;

static void *serve_canned(void *data) {
    canned_kvd *kvd = data;
    int own = accept(kvd->listener, NULL, NULL);
    int s = accept(kvd->listener, NULL, NULL);
    char byte;
    while (s >= 0 && read(s, &byte, 1) == 1 && byte != '\0') {}
    for (size_t i = 0; s >= 0 && i < kvd->count; i++)
        if (write(s, kvd->replies[i], strlen(kvd->replies[i]) + 1) < 0) break;
    while (s >= 0 && read(s, &byte, 1) > 0) {}
    if (s >= 0) close(s);
    if (own >= 0) close(own);
    return NULL;
}

typedef struct layout_seen {
    int decoded, undecodable, first_events;
    char order[16];
} layout_seen;

static void on_layout(const kvd_current_raw *domain, void *user_data) {
    layout_seen *s = user_data;
    kvd_change *changes = NULL;
    size_t count = 0;
    kvd_status status = kvd_changes_from_json(domain->changes_json, domain->changes_json_len, &changes, &count, NULL);
    bool right = status == KVD_OK && count == 1 && !strcmp(changes[0].key, "k") && kvd_value_get_int(changes[0].value) == domain->revision;
    if (status != KVD_OK) s->undecodable++;
    else s->decoded += right;
    size_t n = strlen(s->order);
    if (n + 1 < sizeof s->order) s->order[n] = domain->domain[0];
    kvd_changes_free(changes, count);
}

static void on_layout_event(const kvd_watch_all_event *event, void *user_data) { ((layout_seen *)user_data)->first_events += event->domain == NULL; }

static void on_layout_decoded(const kvd_current_domain *domain, void *user_data) {
    layout_seen *s = user_data;
    s->decoded += !domain->withheld && domain->count == 1 && !strcmp(domain->changes[0].key, "k") &&
                  kvd_value_get_int(domain->changes[0].value) == domain->revision;
}

/* kvd_watch_all_current_raw_new reads a current state in kvd's own layout ("changes" last: its end
 * found from the message's) and in any other (members in another order, spaces): the same values.
 * A message in kvd's layout whose changes are not one array is taken, and its JSON does not decode
 * (the GSettings module then reads the domain apart); a domain's pieces are one array.
 * kvd_watch_all_current_new, decoding each domain, fails on it with no watch. */
static void a_current_state_reads_in_any_layout(void) {
    static const char *const replies[] = {
        "{\"parameters\":{\"domain\":\"a\",\"revision\":7,\"initial\":true,\"partial\":true,\"changes\":[{\"key\":\"k\",\"value\":7}]},\"continues\":true}",
        "{\"parameters\":{\"domain\":\"b\",\"revision\":8,\"systemRevision\":3,\"initial\":true,\"partial\":true,\"changes\":[]},\"continues\":true}",
        "{\"parameters\":{\"domain\":\"b\",\"revision\":8,\"systemRevision\":3,\"initial\":true,\"partial\":true,\"changes\":[{\"key\":\"k\",\"value\":8}]},\"continues\":true}",
        "{ \"continues\": true, \"parameters\": { \"changes\": [ {\"value\": 9, \"key\": \"k\"} ], \"partial\": true, \"initial\": true, \"revision\": 9, \"domain\": \"c\" } }",
        "{\"parameters\":{\"domain\":\"d\",\"revision\":10,\"initial\":true,\"partial\":true,\"changes\":[{\"key\":\"k\",\"value\":10}],\"x\":[1]},\"continues\":true}",
        "{\"parameters\":{\"revision\":11,\"initial\":true,\"withheld\":[],\"changes\":[]},\"continues\":true}",
    };
    char path[512];
    snprintf(path, sizeof path, "%s/canned.sock", test_dir);
    unlink(path);
    canned_kvd kvd = {socket(AF_UNIX, SOCK_STREAM, 0), replies, sizeof replies / sizeof *replies};
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    CHECK(bind(kvd.listener, (struct sockaddr *)&address, sizeof address) == 0 && listen(kvd.listener, 4) == 0, "listen: %s", strerror(errno));
    kvd_connect_options options = KVD_CONNECT_OPTIONS_INIT;
    options.socket_path = path;
    options.no_autostart = 1;
    for (int decoded = 0; decoded < 2; decoded++) {
        pthread_t server;
        pthread_create(&server, NULL, serve_canned, &kvd);
        kvd_client *client = NULL;
        kvd_error error = KVD_ERROR_INIT;
        CHECK_OK(kvd_connect(&options, &client, &error), &error);
        layout_seen s = {0};
        kvd_watch *watch = NULL;
        bool complete = false;
        if (client && !decoded) {
            CHECK_OK(kvd_watch_all_current_raw_new(client, NULL, on_layout, on_layout_event, &s, &complete, &watch, &error), &error);
            CHECK(complete && s.decoded == 3 && s.undecodable == 1 && s.first_events == 1 && !strcmp(s.order, "abcd"),
                  "a, b (two pieces) and c decode to their values, d does not (complete %d, %d decoded, %d undecodable, order %s, %d first events)",
                  complete, s.decoded, s.undecodable, s.order, s.first_events);
        } else if (client) {
            kvd_status status = kvd_watch_all_current_new(client, NULL, on_layout_decoded, on_layout_event, &s, &complete, &watch, &error);
            CHECK(status == KVD_ERROR_PROTOCOL && !watch && !complete && s.decoded == 3 && s.first_events == 0 && error.message &&
                      strstr(error.message, "invalid reply"),
                  "decoded: a, b and c, then d fails the call (%s: %s; %d decoded, %d first events)", kvd_status_name(status),
                  error.message ? error.message : "", s.decoded, s.first_events);
            kvd_error_clear(&error);
        }
        kvd_watch_free(watch);
        kvd_client_free(client);
        pthread_join(server, NULL);
    }
    close(kvd.listener);
    unlink(path);
}

/* The pid of whoever listens on `path` (SO_PEERCRED), or 0. */
static pid_t listener_pid(const char *path) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    struct ucred credentials = {0};
    socklen_t len = sizeof credentials;
    pid_t pid = 0;
    if (connect(s, (struct sockaddr *)&address, sizeof address) == 0 && getsockopt(s, SOL_SOCKET, SO_PEERCRED, &credentials, &len) == 0)
        pid = credentials.pid;
    close(s);
    return pid;
}

/* Whether process `pid`'s environment has an entry starting with `prefix`. */
static bool environment_has(pid_t pid, const char *prefix) {
    char path[64], entries[65536];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    FILE *file = fopen(path, "r");
    if (!file) return false;
    size_t n = fread(entries, 1, sizeof entries - 1, file);
    fclose(file);
    entries[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(entries + i) + 1)
        if (!strncmp(entries + i, prefix, strlen(prefix))) return true;
    return false;
}

static void stop(pid_t pid) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 1000 && kill(pid, 0) == 0; i++) usleep(10000);
}

static void autostart_starts_kvd_and_a_lost_connection_reconnects(void) {
    char folder[512], path[600];
    snprintf(folder, sizeof folder, "%s/auto", test_dir);
    mkdir(folder, 0700);
    snprintf(path, sizeof path, "%s/kvd.sock", folder);
    kvd_connect_options options = KVD_CONNECT_OPTIONS_INIT;
    options.socket_path = path;
    options.daemon_path = kvd_bin;
    kvd_client *client = NULL;
    kvd_error error = KVD_ERROR_INIT;
    setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1); /* must not reach the started kvd */
    CHECK_OK(kvd_connect(&options, &client, &error), &error);
    unsetenv("NOTIFY_SOCKET");
    if (!client) return;
    kvd_value *v = kvd_value_new_bool(true), *got = NULL;
    CHECK_OK(kvd_set(client, "org.libkvd.auto", "k", v, KVD_ANY_REVISION, NULL, &error), &error);
    pid_t first = listener_pid(path);
    CHECK(first > 0 && getppid() != first, "an autostarted kvd listens (pid %d)", (int)first);
    int child_status;
    CHECK(waitpid(-1, &child_status, WNOHANG) < 0 && errno == ECHILD, "the autostarted kvd is not our child");
    CHECK(first <= 0 || !environment_has(first, "NOTIFY_SOCKET="), "the service manager's variables are not passed on");
    CHECK(first <= 0 || environment_has(first, "KVD_STATE_DIR="), "the rest of the environment is passed on");
    /* kvd goes away: the next call starts it again, and the value is there */
    stop(first);
    CHECK_OK(kvd_get(client, "org.libkvd.auto", "k", &got, NULL, NULL, &error), &error);
    CHECK(kvd_value_equal(v, got), "the value survives the restart");
    pid_t second = listener_pid(path);
    CHECK(second > 0 && second != first, "a second kvd was started (%d, then %d)", (int)first, (int)second);
    kvd_client_free(client);
    if (second > 0) stop(second);
    kvd_value_free(v);
    kvd_value_free(got);
}

/* Writes `text` to `path`, mode 0755 (a script standing in for kvd). */
static void write_script(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s: %s", path, strerror(errno));
    if (!f) return;
    fputs(text, f);
    fclose(f);
    chmod(path, 0755);
}

/* Connects to `socket_path`, starting `daemon` when nothing listens, and reads a key there: the
 * status of the read (KVD_ERROR_NOT_FOUND once kvd answered), or of the connect when it failed. */
static kvd_status autostart_and_read(const char *socket_path, const char *daemon, kvd_error *error) {
    kvd_connect_options options = KVD_CONNECT_OPTIONS_INIT;
    options.socket_path = socket_path;
    options.daemon_path = daemon;
    kvd_client *client = NULL;
    kvd_status status = kvd_connect(&options, &client, error);
    if (status == KVD_OK && client) status = kvd_get(client, "org.libkvd.autostart", "k", NULL, NULL, NULL, error);
    kvd_client_free(client);
    return status;
}

/* Why an autostarted kvd did not come up is kept in STATE/kvd-autostart.log
 * and quoted (its standard error went to /dev/null). */
static void an_autostart_that_fails_is_explained_from_its_log(void) {
    char folder[512], path[600], script[600], state[600];
    snprintf(folder, sizeof folder, "%s/failing", test_dir);
    mkdir(folder, 0700);
    snprintf(path, sizeof path, "%s/kvd.sock", folder);
    snprintf(script, sizeof script, "%s/failing-kvd", folder);
    snprintf(state, sizeof state, "%s/state", folder);
    write_script(script, "#!/bin/sh\necho 'an earlier line' >&2\necho 'boom: cannot start' >&2\nexit 1\n");
    char *saved = getenv("KVD_STATE_DIR") ? strdup(getenv("KVD_STATE_DIR")) : NULL;
    setenv("KVD_STATE_DIR", state, 1);
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = autostart_and_read(path, script, &error);
    CHECK(status == KVD_ERROR_CANNOT_START && error.message && strstr(error.message, "boom: cannot start") &&
              strstr(error.message, "kvd-autostart.log") && !strstr(error.message, "an earlier line"),
          "the failure quotes the log: %s: %s", kvd_status_name(status), error.message);
    kvd_error_clear(&error);
    char log[700];
    snprintf(log, sizeof log, "%s/kvd-autostart.log", state);
    struct stat info;
    CHECK(stat(log, &info) == 0 && (info.st_mode & 0777) == 0600, "the log is mode 0600");
    if (saved) setenv("KVD_STATE_DIR", saved, 1), free(saved);
    else unsetenv("KVD_STATE_DIR");
}

/* Clients that find no kvd at once start one between them (a lock beside
 * the socket), not one each. */
static void clients_autostarting_at_once_start_one_kvd(void) {
    char folder[512], path[600], script[600], count[600], text[2048];
    snprintf(folder, sizeof folder, "%s/race", test_dir);
    mkdir(folder, 0700);
    snprintf(path, sizeof path, "%s/kvd.sock", folder);
    snprintf(script, sizeof script, "%s/counting-kvd", folder);
    snprintf(count, sizeof count, "%s/starts", folder);
    snprintf(text, sizeof text, "#!/bin/sh\necho start >> '%s'\nsleep 0.2\nexec '%s' \"$@\"\n", count, kvd_bin);
    write_script(script, text);
    unlink(count); /* the run under valgrind follows the native one in the same folder */
    enum { clients = 4 };
    pid_t children[clients];
    for (int i = 0; i < clients; i++) {
        children[i] = fork();
        if (children[i] == 0) {
            kvd_error error = KVD_ERROR_INIT;
            _exit(autostart_and_read(path, script, &error) == KVD_ERROR_NOT_FOUND ? 0 : 1);
        }
    }
    int connected = 0;
    for (int i = 0; i < clients; i++) {
        int child_status = 0;
        waitpid(children[i], &child_status, 0);
        connected += WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0;
    }
    int starts = 0;
    FILE *f = fopen(count, "r");
    for (int c; f && (c = fgetc(f)) != EOF;) starts += c == '\n';
    if (f) fclose(f);
    CHECK(connected == clients && starts == 1, "%d clients connected, %d kvd(s) started (one wanted)", connected, starts);
    pid_t kvd = listener_pid(path);
    if (kvd > 0) stop(kvd);
}

static int unsafe_folder_only(void) {
    kvd_connect_options options = KVD_CONNECT_OPTIONS_INIT;
    options.no_autostart = 1;
    kvd_client *client = NULL;
    kvd_error error = KVD_ERROR_INIT;
    kvd_status status = kvd_connect(&options, &client, &error);
    printf("%s: %s\n", kvd_status_name(status), error.message ? error.message : "");
    return status == KVD_ERROR_UNSAFE_SOCKET_FOLDER ? 0 : status == KVD_ERROR_CANNOT_CONNECT ? 3 : 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* nothing buffered is copied into a forked kvctl or kvd */
    if (argc > 1 && !strcmp(argv[1], "--unsafe-folder")) return unsafe_folder_only();
    kvctl_bin = getenv("KVCTL_BIN");
    kvd_bin = getenv("KVD_BIN");
    test_dir = getenv("LIBKVD_TEST_DIR");
    if (!kvctl_bin || !kvd_bin || !test_dir || !getenv("KVD_SOCKET")) {
        fprintf(stderr, "usage: KVD_SOCKET=... KVD_BIN=... KVCTL_BIN=... LIBKVD_TEST_DIR=... test_libkvd (see clib/libkvd/tests/run.sh)\n");
        return 2;
    }
    bool small = getenv("LIBKVD_TEST_SMALL") && !strcmp(getenv("LIBKVD_TEST_SMALL"), "1");
    kvd_client *client = connect_default();
    CHECK(!strcmp(kvd_client_socket_path(client), getenv("KVD_SOCKET")), "the socket is $KVD_SOCKET");
    struct {
        const char *name;
        void (*run)(kvd_client *);
    } tests[] = {
        {"every_type_round_trips_with_kvctl", every_type_round_trips_with_kvctl},
        {"writes_lists_deletes_and_errors", writes_lists_deletes_and_errors},
        {"watch_sees_kvctl_and_libkvd_changes", watch_sees_kvctl_and_libkvd_changes},
        {"blame_names_this_program", blame_names_this_program},
        {"one_client_is_shared_by_threads", one_client_is_shared_by_threads},
        {"null_arguments_are_refused", null_arguments_are_refused},
        {"a_forked_child_gets_its_own_connection", a_forked_child_gets_its_own_connection},
        {"a_large_domain_comes_whole_in_the_initial_event", a_large_domain_comes_whole_in_the_initial_event},
        {"a_watch_all_starts_with_every_domains_values", a_watch_all_starts_with_every_domains_values},
        {"a_raw_current_state_decodes_when_asked", a_raw_current_state_decodes_when_asked},
        {"values_up_to_the_message_limit", small ? NULL : values_up_to_the_message_limit},
    };
    values_are_built_read_and_refused_locally();
    printf("%s values_are_built_read_and_refused_locally\n", failures ? "FAIL" : "ok");
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (!tests[i].run) {
            printf("skip %s\n", tests[i].name);
            continue;
        }
        int before = failures;
        tests[i].run(client);
        printf("%s %s\n", failures > before ? "FAIL" : "ok", tests[i].name);
    }
    kvd_client_free(client);
    int before = failures;
    nothing_listening_is_a_clear_error();
    printf("%s nothing_listening_is_a_clear_error\n", failures > before ? "FAIL" : "ok");
    before = failures;
    a_current_state_reads_in_any_layout();
    printf("%s a_current_state_reads_in_any_layout\n", failures > before ? "FAIL" : "ok");
    before = failures;
    autostart_starts_kvd_and_a_lost_connection_reconnects();
    printf("%s autostart_starts_kvd_and_a_lost_connection_reconnects\n", failures > before ? "FAIL" : "ok");
    before = failures;
    an_autostart_that_fails_is_explained_from_its_log();
    printf("%s an_autostart_that_fails_is_explained_from_its_log\n", failures > before ? "FAIL" : "ok");
    before = failures;
    clients_autostarting_at_once_start_one_kvd();
    printf("%s clients_autostarting_at_once_start_one_kvd\n", failures > before ? "FAIL" : "ok");
    printf("%s: %d failed check(s)\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
