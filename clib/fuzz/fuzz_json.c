/* fuzz_json.c — libFuzzer target libkvd-json: libkvd's JSON reader and writer and its typed
 * values (clib/libkvd/json.c, value.c, encoding.c), built by `make libkvd-fuzz-build` with clang's
 * -fsanitize=fuzzer,address,undefined and run by fuzz/run.sh.
 *
 * Invariants, on any input: no crash, leak or undefined behaviour; a text read as a typed value
 * is written to JSON that reads back to an equal value and is written again byte for byte the
 * same; a copy is equal; a text read as plain JSON (as a varlink message is) is written to JSON
 * that reads back and writes the same; an error reply gets a status and a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void broken(const char *what, const uint8_t *data, size_t size) {
    fprintf(stderr, "invariant broken: %s (input of %zu bytes)\n", what, size);
    abort();
}

static void typed(const uint8_t *data, size_t size) {
    kvd_value *value = NULL;
    kvd_error error = KVD_ERROR_INIT;
    if (kvd_value_from_json((const char *)data, size, &value, &error) != KVD_OK) {
        if (!error.message || error.status == KVD_OK) broken("a refusal without a message", data, size);
        kvd_error_clear(&error);
        return;
    }
    size_t len1, len2;
    char *first = kvd_value_to_json(value, &len1);
    if (!first) broken("a value read could not be written", data, size);
    kvd_value *again = NULL;
    if (kvd_value_from_json(first, len1, &again, &error) != KVD_OK) {
        fprintf(stderr, "%s\n%s\n", error.message, first);
        broken("written JSON does not read back", data, size);
    }
    if (!kvd_value_equal(value, again)) broken("the value read back differs", data, size);
    char *second = kvd_value_to_json(again, &len2);
    if (!second || len1 != len2 || memcmp(first, second, len1)) broken("writing again differs", data, size);
    kvd_value *copy = kvd_value_copy(value);
    if (!kvd_value_equal(copy, value)) broken("a copy differs", data, size);
    kvd_value_free(copy);
    kvd_value_free(again);
    kvd_value_free(value);
    free(first);
    free(second);
}

static void plain(const uint8_t *data, size_t size) {
    json_node *node;
    char message[256];
    if (kvdi_json_parse((const char *)data, size, KVD_MESSAGE_DEPTH, &node, message, sizeof message)) return;
    json_buffer first = {0}, second = {0};
    kvdi_buffer_append_json(&first, node);
    json_node *again;
    if (kvdi_json_parse(first.data, first.len, KVD_MESSAGE_DEPTH, &again, message, sizeof message)) broken("written JSON does not parse", data, size);
    kvdi_buffer_append_json(&second, again);
    if (first.len != second.len || memcmp(first.data, second.data, first.len)) broken("plain JSON written again differs", data, size);
    const json_node *name = kvdi_json_get(node, "error");
    if (name && name->type == JSON_STRING) {
        kvd_error error = KVD_ERROR_INIT;
        const json_node *parameters = kvdi_json_get(node, "parameters");
        if (kvdi_set_reply_error(&error, name->u.string.bytes, parameters && parameters->type == JSON_OBJECT ? parameters : NULL) == KVD_OK ||
            !error.message)
            broken("an error reply without a status or message", data, size);
        kvd_error_clear(&error);
    }
    kvdi_json_free(again);
    kvdi_json_free(node);
    free(first.data);
    free(second.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    typed(data, size);
    plain(data, size);
    return 0;
}
