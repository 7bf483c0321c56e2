/* internal.h — what libkvd's files share; not installed. */
#ifndef KVD_INTERNAL_H
#define KVD_INTERNAL_H

#include "json.h"
#include "kvd.h"

#define KVD_EXPORT __attribute__((visibility("default")))

/* A parser depth that lets a value sit inside the deepest varlink framing (an Apply call, a
 * Watch reply: four levels), as kvd's own parser allows; the value rule is checked by
 * kvdi_value_from_json on the value itself. */
#define KVD_MESSAGE_DEPTH (KVD_VALUE_MAX_DEPTH + 4)

/* Sets `*error` (if not NULL) to `status` with a printf-formatted message; returns `status`. */
kvd_status kvdi_set_error(kvd_error *error, kvd_status status, const char *format, ...) __attribute__((format(printf, 3, 4)));
/* Sets `*error` from a varlink error reply (`name`, `parameters`); returns its status. */
kvd_status kvdi_set_reply_error(kvd_error *error, const char *name, const json_node *parameters);

/* The typed value of `node` per the contract, at `level` levels below the value's top (0).
 * Returns KVD_OK, or KVD_ERROR_INVALID_VALUE with the reason and where in `message`, or
 * KVD_ERROR_NO_MEMORY. */
kvd_status kvdi_value_from_json(const json_node *node, kvd_value **out, char *message, size_t message_size);
/* Appends the typed JSON of `value`; false if it is deeper than KVD_VALUE_MAX_DEPTH. */
bool kvdi_value_write(json_buffer *buffer, const kvd_value *value);

/* A string value of `length` bytes already known to be valid UTF-8 (copied); NULL when out of memory. */
kvd_value *kvdi_value_new_checked_string(const char *text, size_t length);

/* Adds `key` (copied) with `element` (taken, also on failure) to `dict` without looking for the
 * key: for keys known to be distinct (a parsed object's). */
bool kvdi_value_dict_add(kvd_value *dict, const char *key, size_t key_len, kvd_value *element);

#endif
