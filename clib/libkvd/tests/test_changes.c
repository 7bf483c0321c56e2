/* test_changes.c — kvd_changes_from_json's quick path against its general path (changes.c), on
 * arrays kvd writes and on tricky ones: the quick path takes exactly the arrays listed as its own
 * (so it keeps running for the shape kvd writes) and gives up on the others, and what it takes the
 * general path decodes to the same keys, values and sources. Links libkvd.a (kvdi_* functions);
 * make libkvd-test runs it. Exits 1 on the first failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch.h"

typedef struct {
    const char *json;
    size_t len;
    bool quick; /* the quick path takes it */
    bool valid; /* the general path decodes it */
} example;

/* A literal and its length (NUL bytes inside counted). */
#define BYTES(text) text, sizeof(text) - 1

static const example EXAMPLES[] = {
    {BYTES("[]"), true, true},
    {BYTES(" [\n] \t"), true, true},
    {BYTES("[{\"key\":\"flag\",\"value\":true},{\"key\":\"name\",\"value\":\"p1\"},{\"key\":\"size\",\"value\":3}]"), true, true},
    {BYTES("[{\"value\":-42,\"key\":\"k\"},{\"key\":\"f\",\"value\":false}]"), true, true},
    {BYTES("[{\"key\":\"k\",\"value\":null,\"source\":\"locked\"}]"), true, true},
    {BYTES("[{\"key\":\"k\",\"source\":\"locked\"},{\"key\":\"s\",\"value\":1,\"source\":\"system\"},"
           "{\"source\":\"user\",\"key\":\"u\",\"value\":2}]"),
     true, true},
    {BYTES("[{\"key\":\"\xc3\xa9t\xc3\xa9\",\"value\":\"\xe2\x82\xac \xf0\x9f\x98\x80 long enough to take whole words\"}]"), true, true},
    {BYTES(" [ { \"key\" : \"a\" , \"value\" : 0 } , {\"key\":\"b\",\"value\":-0} ] "), true, true},
    {BYTES("[{\"key\":\"k\",\"value\":999999999999999999},{\"key\":\"m\",\"value\":-999999999999999999}]"), true, true},
    {BYTES("[{\"key\":\"k\",\"value\":\"\"},{\"key\":\"a key with spaces, commas and ]} brackets\",\"value\":\"[{\\\"\"}]"), false, true},
    {BYTES("[{\"key\":\"a key with spaces, commas and ]} brackets\",\"value\":\"[{}]\"}]"), true, true},
    {BYTES("[{\"key\":\"k\",\"value\":1.5}]"), false, true},
    {BYTES("[{\"key\":\"k\",\"value\":1e3}]"), false, true},
    {BYTES("[{\"key\":\"k\",\"value\":1234567890123456789}]"), false, true},
    {BYTES("[{\"key\":\"k\",\"value\":99999999999999999999}]"), false, false},
    {BYTES("[{\"key\":\"k\\\"q\",\"value\":1}]"), false, true},
    {BYTES("[{\"key\":\"k\",\"value\":\"a\\nb\"}]"), false, true},
    {BYTES("[{\"key\":\"k\",\"value\":[1,2]}]"), false, true},
    {BYTES("[{\"key\":\"k\",\"value\":{\"$date\":\"2026-01-01T00:00:00Z\"}}]"), false, true},
    {BYTES("[{\"key\":\"k\",\"value\":{\"$date\":\"x\"}}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"key\":\"j\"}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":1,\"value\":2}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"other\":1}]"), false, true},
    {BYTES("[{\"key\":\"k\",\"value\":01}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":-}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":tru}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":truex}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":nul}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":true}] x"), false, false},
    {BYTES("[{\"key\":\"k\"},]"), false, false},
    {BYTES("[{\"key\":\"k\"}"), false, false},
    {BYTES("[{\"key\":\"k\",}]"), false, false},
    {BYTES("[{}]"), false, false},
    {BYTES("{}"), false, false},
    {BYTES("[1]"), false, false},
    {BYTES("[{\"value\":1}]"), false, false},
    {BYTES("[{\"key\":1}]"), false, false},
    {BYTES("[{\"key\":\"\xff\",\"value\":1}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":\"\xc3\"}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":\"\xed\xa0\x80 a surrogate\"}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"source\":\"elsewhere\"}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"source\":null}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":\"a\tb\"}]"), false, false},
    {BYTES("[{\"key\":\"k\0\",\"value\":1}]"), false, false},
    {BYTES("[{\"key\":\"k\",\"value\":1}]\0"), false, false},
    {BYTES(""), false, false},
};

static bool same_changes(const kvd_change *a, size_t a_count, const kvd_change *b, size_t b_count) {
    if (a_count != b_count) return false;
    for (size_t i = 0; i < a_count; i++)
        if (strcmp(a[i].key, b[i].key) || a[i].source != b[i].source || !kvd_value_equal(a[i].value, b[i].value)) return false;
    return true;
}

int main(void) {
    int failures = 0;
    size_t count = sizeof EXAMPLES / sizeof *EXAMPLES;
    for (size_t i = 0; i < count; i++) {
        const example *e = &EXAMPLES[i];
        size_t len = e->len;
        kvd_change *quick = NULL, *parsed = NULL;
        size_t quick_count = 0, parsed_count = 0;
        bool took = kvdi_changes_quick(e->json, len, &quick, &quick_count);
        kvd_error error = KVD_ERROR_INIT;
        bool decoded = kvdi_changes_parsed(e->json, len, &parsed, &parsed_count, &error) == KVD_OK;
        const char *wrong = took != e->quick         ? (took ? "the quick path took it" : "the quick path gave up")
                            : decoded != e->valid    ? (decoded ? "the general path decoded it" : "the general path refused it")
                            : took && !same_changes(quick, quick_count, parsed, parsed_count) ? "the two paths differ"
                                                                                               : NULL;
        if (wrong) {
            fprintf(stderr, "test_changes: example %zu (%.*s): %s (%s)\n", i, (int)len, e->json, wrong, error.message ? error.message : "");
            failures++;
        }
        kvd_error_clear(&error);
        if (took) kvd_changes_free(quick, quick_count);
        if (decoded) kvd_changes_free(parsed, parsed_count);
    }
    printf("%s kvd_changes_from_json: %zu arrays, the quick path where expected and as the general path\n", failures ? "FAIL" : "ok", count);
    return failures ? 1 : 0;
}
