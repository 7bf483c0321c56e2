/* autostart.h — the autostart lock and log (internal): see autostart.c. */
#ifndef KVD_AUTOSTART_H
#define KVD_AUTOSTART_H

#include "spawn.h"

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* The size over which a start empties the log: 1 MiB (AutostartLog.limit). */
#define AUTOSTART_LOG_LIMIT (1 << 20)

/* Where a start's lines begin in STATE/kvd-autostart.log. */
typedef struct autostart_log {
    char path[PATH_MAX]; /* empty: no log */
    off_t start;
} autostart_log;

/* How long a client waits for the lock: the holder's whole start timeout, and then some. */
#define AUTOSTART_LOCK_WAIT_MS (2 * SPAWN_TIMEOUT_MS)

/* Takes the exclusive lock on SOCKET.autostart.lock (made 0600), trying every 20 ms for up to
 * AUTOSTART_LOCK_WAIT_MS; its descriptor, or -1 (no lock to be had: the caller goes on without). */
int kvdi_autostart_lock(const char *socket_path);
/* Releases a lock kvdi_autostart_lock took (-1: none). */
void kvdi_autostart_unlock(int fd);
/* Opens the log of the state folder the started kvd will use (made 0700; the file 0600,
 * appended, emptied first when over AUTOSTART_LOG_LIMIT) and writes this start's header; the
 * descriptor to give kvd as its standard error (close-on-exec), or -1 with `log->path` empty. */
int kvdi_autostart_log_open(autostart_log *log, const char *daemon, const char *socket_path);
/* For an error message: "; its log PATH ends: LINE" (the last line kvd wrote this start, at
 * most 300 bytes), "; it wrote nothing to PATH", or "" without a log. */
void kvdi_autostart_log_explain(const autostart_log *log, char *out, size_t size);

#endif
