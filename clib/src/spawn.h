/* spawn.h — autostart (internal): see spawn.c. */
#ifndef KVD_SPAWN_H
#define KVD_SPAWN_H

#include "internal.h"

/* How long a started kvd has to accept connections (Autostart.startTimeout). */
#define SPAWN_TIMEOUT_MS 5000

/* Starts `daemon --socket socket_path` detached, in a new session, with stdio on /dev/null and
 * the environment less the service manager's variables. Returns once it is exec'd. */
kvd_status spawn_daemon(const char *daemon, const char *socket_path, kvd_error *error);
/* Polls `socket_path` every 20 ms until it accepts (`*fd`), the daemon is gone, or 5 s pass. */
kvd_status spawn_wait(const char *socket_path, const char *daemon, int *fd, kvd_error *error);

#endif
