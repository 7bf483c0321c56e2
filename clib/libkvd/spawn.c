/* spawn.c — autostart: starting kvd when nothing listens (Sources/KVConnection/Autostart.swift).
 *
 * kvd is started detached (fork, setsid, fork, exec): it is never this process's child, so a
 * library needs no thread to reap it and leaves no zombie, and a host program's own SIGCHLD
 * handling never sees it. Between fork and exec only async-signal-safe calls are made; argv
 * and the environment are built before (the second fork is _Fork, which runs no atfork handlers). A close-on-exec pipe carries the daemon's pid and, if
 * exec fails, its errno. */

#include "spawn.h"

#include "autostart.h"
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* The service manager's variables, which a kvd started by this process must not take as its own
 * (Autostart.serviceManagerVariables). */
static bool is_service_manager_variable(const char *entry) {
    static const char *const names[] = {"NOTIFY_SOCKET",  "WATCHDOG_USEC",  "WATCHDOG_PID",   "LISTEN_FDS",
                                        "LISTEN_PID",     "LISTEN_FDNAMES", "JOURNAL_STREAM", "STATE_DIRECTORY"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (!strncmp(entry, names[i], n) && entry[n] == '=') return true;
    }
    return false;
}

typedef struct report {
    int32_t tag; /* 1: the daemon's pid; 2: exec failed with errno */
    int32_t value;
} report;

/* The daemon's pid, from the last kvdi_spawn_daemon on this thread (for kvdi_spawn_wait's message). */
static __thread pid_t spawned_pid;

kvd_status kvdi_spawn_daemon(const char *daemon, const char *socket_path, int log_fd, kvd_error *error) {
    if (access(daemon, X_OK) != 0)
        return kvdi_set_error(error, KVD_ERROR_CANNOT_START, "cannot start kvd for %s: kvd is not at %s (%s); install kvd or start it yourself",
                         socket_path, daemon, strerror(errno));
    size_t count = 0;
    for (char **e = environ; e && *e; e++) count++;
    char **envp = calloc(count + 1, sizeof *envp);
    if (!envp) return kvdi_set_error(error, KVD_ERROR_NO_MEMORY, "out of memory");
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (!is_service_manager_variable(environ[i])) envp[kept++] = environ[i];
    char *argv[] = {(char *)daemon, "--socket", (char *)socket_path, NULL};
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        free(envp);
        return kvdi_set_error(error, KVD_ERROR_CANNOT_START, "cannot start kvd for %s: pipe: %s", socket_path, strerror(errno));
    }
    pid_t middle = fork();
    if (middle == 0) {
        setsid();
        pid_t daemon_pid = _Fork(); /* no atfork handlers: async-signal-safe in a child of a threaded process */
        if (daemon_pid == 0) {
            int null = open("/dev/null", O_RDWR);
            if (null >= 0) dup2(null, 0), dup2(null, 1), dup2(log_fd >= 0 ? log_fd : null, 2);
            syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC); /* the host's descriptors stay out of kvd */
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            execve(daemon, argv, envp);
            report failed = {2, errno};
            (void)!write(pipe_fds[1], &failed, sizeof failed);
            _exit(127);
        }
        report started = {daemon_pid > 0 ? 1 : 2, daemon_pid > 0 ? daemon_pid : errno};
        (void)!write(pipe_fds[1], &started, sizeof started);
        _exit(0);
    }
    int fork_errno = errno;
    free(envp);
    close(pipe_fds[1]);
    if (middle < 0) {
        close(pipe_fds[0]);
        return kvdi_set_error(error, KVD_ERROR_CANNOT_START, "cannot start kvd for %s: fork: %s", socket_path, strerror(fork_errno));
    }
    while (waitpid(middle, NULL, 0) < 0 && errno == EINTR) {
    }
    report r;
    int exec_errno = 0;
    spawned_pid = 0;
    ssize_t n;
    while ((n = read(pipe_fds[0], &r, sizeof r)) == (ssize_t)sizeof r || (n < 0 && errno == EINTR)) {
        if (n < 0) continue;
        if (r.tag == 1) spawned_pid = r.value;
        else exec_errno = r.value;
    }
    close(pipe_fds[0]);
    if (exec_errno)
        return kvdi_set_error(error, KVD_ERROR_CANNOT_START, "cannot start kvd for %s: cannot run %s: %s", socket_path, daemon, strerror(exec_errno));
    return KVD_OK;
}

kvd_status kvdi_spawn_wait(const char *socket_path, const char *daemon, const autostart_log *log, int *fd,
                      kvd_error *error) {
    char why[512] = "";
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int last = ENOENT;
    for (;;) {
        int e = kvdi_conn_try_connect(socket_path, INT64_MIN, fd);
        if (e == 0) return KVD_OK;
        last = e;
        if (spawned_pid > 0 && kill(spawned_pid, 0) != 0 && errno == ESRCH) {
            /* A kvd started by hand may have taken the socket meanwhile; give it one more chance. */
            if (kvdi_conn_try_connect(socket_path, INT64_MIN, fd) == 0) return KVD_OK;
            if (log) kvdi_autostart_log_explain(log, why, sizeof why);
            if (why[0])
                return kvdi_set_error(error, KVD_ERROR_CANNOT_START, "cannot start kvd for %s: %s exited at once%s", socket_path, daemon,
                                 why);
            return kvdi_set_error(error, KVD_ERROR_CANNOT_START, "cannot start kvd for %s: %s exited at once; run `%s --socket %s` to see why",
                             socket_path, daemon, daemon, socket_path);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= SPAWN_TIMEOUT_MS) break;
        usleep(20000);
    }
    if (log) kvdi_autostart_log_explain(log, why, sizeof why);
    return kvdi_set_error(error, KVD_ERROR_CANNOT_START, "cannot start kvd for %s: %s started but did not accept connections within 5 s (%s)%s",
                     socket_path, daemon, strerror(last), why[0] ? why : "; check its log");
}
