/* conn.h — the socket under libkvd (internal): where it is, connecting with autostart, and
 * varlink framing (one JSON object, then a NUL) with a deadline. */
#ifndef KVD_CONN_H
#define KVD_CONN_H

#include <sys/types.h>

#include "internal.h"

/* How to connect: resolved once from kvd_connect_options and the environment. */
typedef struct conn_config {
    char *socket_path;
    char *daemon_path;
    bool autostart;
    int timeout_ms; /* < 0: none */
} conn_config;

/* One connection: a non-blocking, close-on-exec descriptor and the bytes received and not yet
 * taken as messages, and the process that opened it: after fork() the child has a copy of the
 * descriptor, which it must neither read nor write (the parent's stream) — it only closes its
 * copy (close(), never shutdown(), which would end the parent's too). */
typedef struct conn {
    int fd; /* -1 when closed */
    char *buffer;
    size_t start;   /* the bytes of buffer before it are taken (moved out only when room is needed) */
    size_t len, cap;
    size_t scanned; /* the bytes of buffer before it hold no NUL but in taken messages */
    pid_t pid;      /* the process that opened fd */
    bool drained;   /* every byte received was taken: the buffer starts over at the next receive */
} conn;

#define CONN_INIT {-1, NULL, 0, 0, 0, 0, 0, false}

/* Resolves `options` and the environment into `config` (free with kvdi_conn_config_free). */
kvd_status kvdi_conn_config_init(conn_config *config, const kvd_connect_options *options, kvd_error *error);
kvd_status kvdi_conn_config_copy(conn_config *copy, const conn_config *config, kvd_error *error);
void kvdi_conn_config_free(conn_config *config);

/* A monotonic deadline `timeout_ms` from now (INT64_MAX when negative). */
int64_t kvdi_conn_deadline(int timeout_ms);

/* Connects `c` (closed) by `config`: the folder check, then connect, then autostart. */
kvd_status kvdi_conn_open(conn *c, const conn_config *config, kvd_error *error);
/* One connect to `path`: 0 (connected, `*fd`) or the errno. A full backlog (EAGAIN) is retried
 * until `deadline`, then ETIMEDOUT. */
int kvdi_conn_try_connect(const char *path, int64_t deadline, int *fd);
/* Closes the descriptor and drops buffered bytes; the conn may be opened again. */
void kvdi_conn_close(conn *c);
/* Whether `c` is open in another process (this one is a child forked after it was opened). */
bool kvdi_conn_forked(const conn *c);
/* Whether kvd closed the connection while it was idle (end of file waiting): then reconnect. */
bool kvdi_conn_peer_closed(const conn *c);

/* Sends all `len` bytes by `deadline`. On failure closes `c`. */
kvd_status kvdi_conn_send(conn *c, const char *bytes, size_t len, int64_t deadline, kvd_error *error);
/* Receives one message by `deadline` (INT64_MIN: only what can be read without waiting; then
 * `*reply` is NULL when no whole message has arrived) and parses it into `*reply`. On failure
 * closes `c`. */
kvd_status kvdi_conn_receive(conn *c, int64_t deadline, json_node **reply, kvd_error *error);

/* As kvdi_conn_receive, the message left unparsed: `*bytes` (NULL when none has arrived whole
 * with INT64_MIN) and `*len` (its NUL not counted) are valid until the next receive on `c` that
 * kvdi_conn_has_message did not promise; they are the caller's to write over meanwhile. */
kvd_status kvdi_conn_receive_bytes(conn *c, int64_t deadline, const char **bytes, size_t *len, kvd_error *error);
/* Whether the next message has been received whole: then the next receive takes it with no read
 * and moves no byte (the bytes of the messages taken before stay valid through it). */
bool kvdi_conn_has_message(conn *c);
/* Parses a message received as bytes into `*reply` (an object); on failure closes `c`. */
kvd_status kvdi_conn_parse(conn *c, const char *bytes, size_t len, json_node **reply, kvd_error *error);

/* Checks a reply: its error (set into `error`, returned) or KVD_OK with its parameters (an empty
 * object's worth: NULL when it has none) in `*parameters`. */
kvd_status kvdi_reply_check(const json_node *reply, const json_node **parameters, kvd_error *error);

#endif
