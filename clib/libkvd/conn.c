/* conn.c — socket rules, connecting, and varlink framing (see conn.h). The rules are those of
 * Sources/KVSystem/Paths.swift and SocketFolder.swift; the framing that of
 * docs/reference/protocol.md. */

#include "conn.h"

#include "autostart.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"

#ifndef KVD_DAEMON_PATH /* set by clib/libkvd/meson.build: BINDIR/kvd */
#define KVD_DAEMON_PATH "/usr/local/bin/kvd"
#endif

static char *dup_or_null(const char *text) { return text && *text ? strdup(text) : NULL; }

kvd_status kvdi_conn_config_init(conn_config *config, const kvd_connect_options *options, kvd_error *error) {
    kvd_connect_options none = KVD_CONNECT_OPTIONS_INIT;
    if (!options) options = &none;
    memset(config, 0, sizeof *config);
    const char *socket_variable = getenv("KVD_SOCKET"), *runtime = getenv("XDG_RUNTIME_DIR");
    char *path = NULL;
    if (options->socket_path && *options->socket_path) path = strdup(options->socket_path);
    else if (socket_variable && *socket_variable) path = strdup(socket_variable);
    else if (runtime && *runtime) {
        if (asprintf(&path, "%s/kvd.sock", runtime) < 0) path = NULL;
    } else if (asprintf(&path, "/tmp/kvd-%u/kvd.sock", (unsigned)getuid()) < 0)
        path = NULL;
    const char *no_autostart = getenv("KVD_NO_AUTOSTART");
    config->socket_path = path;
    config->daemon_path = dup_or_null(options->daemon_path ? options->daemon_path : KVD_DAEMON_PATH);
    config->autostart = !options->no_autostart && !(no_autostart && !strcmp(no_autostart, "1"));
    config->timeout_ms = options->timeout_ms == 0 ? KVD_DEFAULT_TIMEOUT_MS : options->timeout_ms;
    if (!path || !config->daemon_path) {
        kvdi_conn_config_free(config);
        return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    }
    return KVD_OK;
}

kvd_status kvdi_conn_config_copy(conn_config *copy, const conn_config *config, kvd_error *error) {
    *copy = *config;
    copy->socket_path = strdup(config->socket_path);
    copy->daemon_path = strdup(config->daemon_path);
    if (!copy->socket_path || !copy->daemon_path) {
        kvdi_conn_config_free(copy);
        return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    }
    return KVD_OK;
}

void kvdi_conn_config_free(conn_config *config) {
    free(config->socket_path);
    free(config->daemon_path);
    config->socket_path = config->daemon_path = NULL;
}

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int64_t kvdi_conn_deadline(int timeout_ms) { return timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms; }

/* Waits for `events` on `fd` until `deadline`: 1 ready, 0 timed out, -1 failed (errno). */
static int wait_for(int fd, short events, int64_t deadline) {
    for (;;) {
        int timeout = -1;
        if (deadline != INT64_MAX) {
            int64_t left = deadline - now_ms();
            timeout = left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
        }
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, timeout);
        if (n > 0) return 1;
        if (n == 0 && deadline != INT64_MAX && now_ms() >= deadline) return 0;
        if (n < 0 && errno != EINTR) return -1;
    }
}

/* The check of /tmp/kvd-<uid> (SocketFolder.prepare): other folders are left alone. */
static kvd_status check_folder(const char *socket_path, kvd_error *error) {
    char folder[64];
    snprintf(folder, sizeof folder, "/tmp/kvd-%u", (unsigned)getuid());
    size_t n = strlen(folder);
    if (strncmp(socket_path, folder, n) != 0 || socket_path[n] != '/') return KVD_OK;
    static const char elsewhere[] = "or set XDG_RUNTIME_DIR or KVD_SOCKET to a folder of your own";
    if (mkdir(folder, 0700) != 0 && errno != EEXIST)
        return kvdi_set_error(error, KVD_ERROR_UNSAFE_SOCKET_FOLDER, "the socket folder %s cannot be created: %s; %s", folder, strerror(errno),
                         elsewhere);
    struct stat info;
    if (lstat(folder, &info) != 0)
        return kvdi_set_error(error, KVD_ERROR_UNSAFE_SOCKET_FOLDER, "the socket folder %s cannot be inspected: %s; %s", folder, strerror(errno),
                         elsewhere);
    if (!S_ISDIR(info.st_mode))
        return kvdi_set_error(error, KVD_ERROR_UNSAFE_SOCKET_FOLDER, "the socket folder %s is %s, so kvd programs will not use it; remove it (rm %s) %s",
                         folder, S_ISLNK(info.st_mode) ? "a symbolic link" : "not a folder", folder, elsewhere);
    if (info.st_uid != geteuid())
        return kvdi_set_error(error, KVD_ERROR_UNSAFE_SOCKET_FOLDER,
                         "the socket folder %s belongs to uid %u, not to you (uid %u), so kvd programs will not use it: another user could "
                         "read and answer your settings there; have it removed (rm -r %s, as root or its owner) %s",
                         folder, (unsigned)info.st_uid, (unsigned)geteuid(), folder, elsewhere);
    if (info.st_mode & 077)
        return kvdi_set_error(error, KVD_ERROR_UNSAFE_SOCKET_FOLDER,
                         "the socket folder %s has mode 0%o, so other users could put their own socket there and kvd programs will not use "
                         "it; remove it (rm -r %s) so that it is made again with mode 0700, %s",
                         folder, (unsigned)(info.st_mode & 07777), folder, elsewhere);
    return KVD_OK;
}

/* One attempt: 0 connected (`*fd`), else the errno. EAGAIN (a full backlog) is retried until
 * `deadline`, then ETIMEDOUT. */
int kvdi_conn_try_connect(const char *path, int64_t deadline, int *fd) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) return ENAMETOOLONG;
    strcpy(address.sun_path, path);
    for (;;) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0) return errno;
        if (connect(s, (struct sockaddr *)&address, sizeof address) == 0) {
            *fd = s;
            return 0;
        }
        int e = errno;
        close(s);
        if (e == EINTR) continue;
        if (e != EAGAIN) return e;
        if (now_ms() >= deadline) return ETIMEDOUT;
        usleep(10000);
    }
}

static kvd_status cannot_connect(const char *path, int e, kvd_error *error) {
    if (e == ETIMEDOUT)
        return kvdi_set_error(error, KVD_ERROR_TIMEOUT, "cannot connect to kvd at %s: it accepts no connections (its backlog is full); try again",
                         path);
    const char *reason = e == ENAMETOOLONG ? "the socket path is longer than 107 bytes" : strerror(e);
    return kvdi_set_error(error, KVD_ERROR_CANNOT_CONNECT,
                     "cannot connect to kvd at %s: %s (is kvd running? start it with `systemctl --user start kvd.socket` or run `kvd`)", path,
                     reason);
}

/* Starts kvd for `config->socket_path` and connects: one client at a time (the others wait for
 * the lock, then find the first one's kvd), kvd's standard error in the state folder's
 * kvd-autostart.log, quoted when it does not come up. */
static kvd_status conn_autostart(conn *c, const conn_config *config, kvd_error *error) {
    int lock = kvdi_autostart_lock(config->socket_path);
    kvd_status status = KVD_OK;
    if (kvdi_conn_try_connect(config->socket_path, INT64_MIN, &c->fd) != 0) {
        autostart_log log;
        int log_fd = kvdi_autostart_log_open(&log, config->daemon_path, config->socket_path);
        status = kvdi_spawn_daemon(config->daemon_path, config->socket_path, log_fd, error);
        if (log_fd >= 0) close(log_fd);
        if (!status) status = kvdi_spawn_wait(config->socket_path, config->daemon_path, log_fd >= 0 ? &log : NULL, &c->fd, error);
    }
    kvdi_autostart_unlock(lock);
    return status;
}

kvd_status kvdi_conn_open(conn *c, const conn_config *config, kvd_error *error) {
    kvdi_conn_close(c);
    c->pid = getpid();
    kvd_status status = check_folder(config->socket_path, error);
    if (status) return status;
    int64_t deadline = kvdi_conn_deadline(config->timeout_ms);
    int e = kvdi_conn_try_connect(config->socket_path, deadline, &c->fd);
    if (e == 0) return KVD_OK;
    /* connect() says "Connection refused" for a file that is no socket: say what it is, and
     * start no kvd (it could not listen there either) */
    struct stat info;
    if (e == ECONNREFUSED && stat(config->socket_path, &info) == 0 && !S_ISSOCK(info.st_mode))
        return kvdi_set_error(error, KVD_ERROR_CANNOT_CONNECT,
                              "cannot connect to kvd at %s: it is %s, not a socket (remove it, or set KVD_SOCKET or the socket path to "
                              "kvd's socket)",
                              config->socket_path, S_ISDIR(info.st_mode) ? "a folder" : S_ISREG(info.st_mode) ? "a regular file" : "a file");
    if ((e != ENOENT && e != ECONNREFUSED) || !config->autostart) return cannot_connect(config->socket_path, e, error);
    return conn_autostart(c, config, error);
}

void kvdi_conn_close(conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    free(c->buffer);
    c->buffer = NULL;
    c->start = c->len = c->cap = c->scanned = 0;
    c->drained = false;
}

bool kvdi_conn_forked(const conn *c) { return c->fd >= 0 && c->pid != getpid(); }

bool kvdi_conn_peer_closed(const conn *c) {
    if (c->fd < 0) return true;
    char byte;
    ssize_t n = recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static kvd_status lost(conn *c, kvd_status status, kvd_error *error, const char *what) {
    kvdi_conn_close(c);
    if (status == KVD_ERROR_TIMEOUT)
        return kvdi_set_error(error, status, "kvd did not answer in time (%s); the connection is closed, the next call connects again", what);
    return kvdi_set_error(error, status, "%s", what);
}

kvd_status kvdi_conn_send(conn *c, const char *bytes, size_t len, int64_t deadline, kvd_error *error) {
    size_t sent = 0;
    while (sent < len) {
        ssize_t n = send(c->fd, bytes + sent, len - sent, MSG_NOSIGNAL);
        if (n >= 0) {
            sent += (size_t)n;
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int ready = wait_for(c->fd, POLLOUT, deadline);
            if (ready == 0) return lost(c, KVD_ERROR_TIMEOUT, error, "sending");
            if (ready > 0) continue;
        }
        if (errno == EPIPE || errno == ECONNRESET)
            return lost(c, KVD_ERROR_CONNECTION, error, "kvd closed the connection before replying (did it stop or crash? see `journalctl --user -u kvd`)");
        char what[160];
        snprintf(what, sizeof what, "the connection to kvd failed (%s); try again", strerror(errno));
        return lost(c, KVD_ERROR_CONNECTION, error, what);
    }
    return KVD_OK;
}

/* Takes the first whole message out of the buffer, if there is one, as its bytes (`*bytes` NULL
 * when none has arrived whole), valid until the next receive (the bytes after it stay where they
 * are: many messages read at once cost no copy each). */
static kvd_status take_bytes(conn *c, const char **bytes, size_t *len, kvd_error *error) {
    size_t from = c->scanned > c->start ? c->scanned : c->start;
    char *nul = c->len > from ? memchr(c->buffer + from, '\0', c->len - from) : NULL;
    *bytes = NULL;
    if (!nul) {
        c->scanned = c->len;
        if (c->len - c->start > (size_t)KVD_MESSAGE_LIMIT)
            return lost(c, KVD_ERROR_PROTOCOL, error, "kvd sent an invalid reply: a message longer than 16 MiB");
        return KVD_OK;
    }
    *bytes = c->buffer + c->start;
    *len = (size_t)(nul - (c->buffer + c->start));
    c->start += *len + 1;
    c->scanned = c->start;
    /* An emptied buffer starts over at the next receive (not here: the bytes are the caller's until then). */
    c->drained = c->start == c->len;
    return KVD_OK;
}

bool kvdi_conn_has_message(conn *c) {
    if (c->drained) return false; /* nothing left: the next receive starts the buffer over */
    size_t from = c->scanned > c->start ? c->scanned : c->start;
    char *nul = c->len > from ? memchr(c->buffer + from, '\0', c->len - from) : NULL;
    c->scanned = nul ? (size_t)(nul - c->buffer) : c->len; /* no NUL before it: take_bytes starts there */
    return nul != NULL;
}

kvd_status kvdi_conn_parse(conn *c, const char *bytes, size_t n, json_node **reply, kvd_error *error) {
    char message[256];
    json_node *node = NULL;
    int parsed = kvdi_json_parse(bytes, n, KVD_MESSAGE_DEPTH, &node, message, sizeof message);
    if (parsed == -2) return lost(c, KVD_ERROR_NO_MEMORY, error, "out of memory");
    if (parsed || node->type != JSON_OBJECT) {
        kvdi_json_free(node);
        char what[300];
        snprintf(what, sizeof what, "kvd sent an invalid reply: %s", parsed ? message : "not a JSON object");
        return lost(c, KVD_ERROR_PROTOCOL, error, what);
    }
    *reply = node;
    return KVD_OK;
}

kvd_status kvdi_conn_receive(conn *c, int64_t deadline, json_node **reply, kvd_error *error) {
    const char *bytes = NULL;
    size_t len = 0;
    *reply = NULL;
    kvd_status status = kvdi_conn_receive_bytes(c, deadline, &bytes, &len, error);
    if (status || !bytes) return status;
    return kvdi_conn_parse(c, bytes, len, reply, error);
}

kvd_status kvdi_conn_receive_bytes(conn *c, int64_t deadline, const char **bytes, size_t *len, kvd_error *error) {
    if (c->drained) c->start = c->len = c->scanned = 0;
    c->drained = false;
    for (;;) {
        kvd_status status = take_bytes(c, bytes, len, error);
        if (status || *bytes) return status;
        if (c->cap - c->len < 65536 && c->start > 0) { /* the taken bytes make room first */
            memmove(c->buffer, c->buffer + c->start, c->len - c->start);
            c->len -= c->start;
            c->scanned -= c->start;
            c->start = 0;
        }
        if (c->cap - c->len < 65536) {
            size_t want = c->cap ? c->cap * 2 : 65536;
            char *bigger = realloc(c->buffer, want);
            if (!bigger) return lost(c, KVD_ERROR_NO_MEMORY, error, "out of memory");
            c->buffer = bigger;
            c->cap = want;
        }
        ssize_t n = recv(c->fd, c->buffer + c->len, c->cap - c->len, 0);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0 || errno == ECONNRESET)
            return lost(c, KVD_ERROR_CONNECTION, error, "kvd closed the connection before replying (did it stop or crash? see `journalctl --user -u kvd`)");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (deadline == INT64_MIN) return KVD_OK; /* *reply is NULL */
            int ready = wait_for(c->fd, POLLIN, deadline);
            if (ready == 0) return lost(c, KVD_ERROR_TIMEOUT, error, "waiting for a reply");
            if (ready > 0) continue;
        }
        char what[160];
        snprintf(what, sizeof what, "the connection to kvd failed (%s); try again", strerror(errno));
        return lost(c, KVD_ERROR_CONNECTION, error, what);
    }
}

kvd_status kvdi_reply_check(const json_node *reply, const json_node **parameters, kvd_error *error) {
    const json_node *name = kvdi_json_get(reply, "error");
    const json_node *p = kvdi_json_get(reply, "parameters");
    if (p && p->type != JSON_OBJECT) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: \"parameters\" is not an object");
    if (name) {
        if (name->type != JSON_STRING) return kvdi_set_error(error, KVD_ERROR_PROTOCOL, "kvd sent an invalid reply: \"error\" is not a string");
        return kvdi_set_reply_error(error, name->u.string.bytes, p);
    }
    *parameters = p;
    return KVD_OK;
}
