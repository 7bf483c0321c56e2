/* autostart.c — one client at a time starts kvd for a socket, and what the started kvd writes to
 * its standard error is kept (Sources/KVConnection/AutostartLock.swift and AutostartLog.swift:
 * the same lock file and the same log, so kvctl, KVClient and libkvd exclude one another). */

#include "autostart.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int kvdi_autostart_lock(const char *socket_path) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s.autostart.lock", socket_path) >= (int)sizeof path) return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -1;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= AUTOSTART_LOCK_WAIT_MS) break;
        usleep(20000);
    }
    close(fd); /* held past the start timeout, or no lock here: go on without it, as before */
    return -1;
}

void kvdi_autostart_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing the only descriptor of the open file releases the lock */
}

/* The state folder a kvd started with this environment uses: $KVD_STATE_DIR, else
 * $XDG_CONFIG_HOME/kvd, else ~/.config/kvd (docs/reference/paths.md; STATE_DIRECTORY is the
 * service manager's and is not passed on). 0 when it cannot be told. */
static int state_folder(char *out, size_t size) {
    const char *explicit = getenv("KVD_STATE_DIR");
    if (explicit && *explicit) return snprintf(out, size, "%s", explicit) < (int)size;
    const char *config = getenv("XDG_CONFIG_HOME");
    if (config && *config) return snprintf(out, size, "%s/kvd", config) < (int)size;
    const char *home = getenv("HOME");
    if (!home || !*home) return 0;
    char parent[PATH_MAX];
    if (snprintf(parent, sizeof parent, "%s/.config", home) >= (int)sizeof parent) return 0;
    (void)mkdir(parent, 0700);
    return snprintf(out, size, "%s/kvd", parent) < (int)size;
}

int kvdi_autostart_log_open(autostart_log *log, const char *daemon, const char *socket_path) {
    char folder[PATH_MAX];
    log->path[0] = 0;
    log->start = 0;
    if (!state_folder(folder, sizeof folder)) return -1;
    (void)mkdir(folder, 0700);
    if (snprintf(log->path, sizeof log->path, "%s/kvd-autostart.log", folder) >= (int)sizeof log->path) return -1;
    int fd = open(log->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        log->path[0] = 0;
        return -1;
    }
    struct stat info;
    if (fstat(fd, &info) == 0 && info.st_size > AUTOSTART_LOG_LIMIT) (void)!ftruncate(fd, 0);
    dprintf(fd, "kvd-autostart: pid %d (libkvd) runs %s --socket %s\n", (int)getpid(), daemon, socket_path);
    log->start = lseek(fd, 0, SEEK_END);
    return fd;
}

void kvdi_autostart_log_explain(const autostart_log *log, char *out, size_t size) {
    out[0] = 0;
    if (!log->path[0]) return;
    int fd = open(log->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return;
    char added[4096];
    off_t end = lseek(fd, 0, SEEK_END), from = end - (off_t)sizeof added + 1;
    if (from < log->start) from = log->start;
    ssize_t n = from < end ? pread(fd, added, (size_t)(end - from), from) : 0;
    close(fd);
    if (n <= 0) {
        snprintf(out, size, "; it wrote nothing to %s", log->path);
        return;
    }
    added[n] = 0;
    while (n > 0 && (added[n - 1] == '\n' || added[n - 1] == '\r')) added[--n] = 0;
    char *line = strrchr(added, '\n');
    line = line ? line + 1 : added;
    snprintf(out, size, "; its log %s ends: %.300s", log->path, line);
}
