/* spawn.h — autostart (internal): see spawn.c. */
#ifndef KVD_SPAWN_H
#define KVD_SPAWN_H

#include "internal.h"

/* How long a started kvd has to accept connections (Autostart.startTimeout). */
#define SPAWN_TIMEOUT_MS 5000

struct autostart_log;

/* Starts `daemon --socket socket_path` detached, in a new session, with stdin and stdout on
 * /dev/null, stderr on `log_fd` (-1: /dev/null) and the environment less the service manager's
 * variables. Returns once it is exec'd. */
kvd_status kvdi_spawn_daemon(const char *daemon, const char *socket_path, int log_fd, kvd_error *error);
/* Polls `socket_path` every 20 ms until it accepts (`*fd`), the daemon is gone, or 5 s pass; a
 * failure quotes `log` (NULL: none). */
kvd_status kvdi_spawn_wait(const char *socket_path, const char *daemon, const struct autostart_log *log, int *fd,
                      kvd_error *error);

#endif
