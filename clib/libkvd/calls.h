/* calls.h — building calls and reading replies, shared by client.c and watch.c (internal). */
#ifndef KVD_CALLS_H
#define KVD_CALLS_H

#include "conn.h"

/* A NULL client is KVD_ERROR_INVALID_ARGUMENT, the message naming `function`. */
kvd_status kvdi_check_client(const char *function, const kvd_client *client, kvd_error *error);
/* NULL is KVD_ERROR_INVALID_ARGUMENT; text that is not UTF-8 KVD_ERROR_INVALID_NAME (kvd checks
 * the rest of the naming rule). */
kvd_status kvdi_check_name(const char *what, const char *name, kvd_error *error);

/* {"method":METHOD,"parameters":{ ... members ... }} and a NUL, built in a json_buffer. */
void kvdi_call_begin(json_buffer *b, const char *method);
void kvdi_call_member(json_buffer *b, const char *name);
void kvdi_call_string(json_buffer *b, const char *name, const char *value);
kvd_status kvdi_call_value(json_buffer *b, const char *name, const kvd_value *value, kvd_error *error);
/* Closes the call (with "more": true if `more`) and checks KVD_MESSAGE_LIMIT. */
kvd_status kvdi_call_end(json_buffer *b, bool more, kvd_error *error);

/* Connects `c` if it is closed or kvd closed it, sends `message`, and reads one reply, within the
 * config's timeout. An error reply is returned as its status (and `*reply` is NULL). */
kvd_status kvdi_exchange(conn *c, const conn_config *config, const json_buffer *message, json_node **reply, const json_node **parameters,
                    kvd_error *error);

kvd_status kvdi_decode_revision(const json_node *parameters, int64_t *revision, kvd_error *error);
kvd_status kvdi_decode_source(const json_node *node, kvd_source *source, kvd_error *error);
kvd_status kvdi_decode_value(const json_node *node, const char *member, kvd_value **value, kvd_error *error);

const conn_config *kvdi_client_config(const kvd_client *client);
/* One call on the client's own connection (`message` freed here); a reply with "continues" is a
 * protocol error. */
kvd_status kvdi_client_call(kvd_client *client, json_buffer *message, json_node **reply, const json_node **parameters, kvd_error *error);

#endif
