#ifndef KVD_CLINUX_SHIM_H
#define KVD_CLINUX_SHIM_H
/* Linux interfaces the Glibc module does not export: the daemon's event loop needs them. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/inotify.h>
#include <signal.h>
#include <sys/socket.h>
#include <spawn.h>
#include <sys/xattr.h>
/* malloc_trim, for FileSystem.releaseFreedMemory: the Glibc module leaves malloc.h out. */
#include <malloc.h>

/* accept4 is declared only under _GNU_SOURCE, which the Glibc module is built without. */
int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);
/* pipe2 likewise. */
int pipe2(int pipefd[2], int flags);

/* struct ucred is declared only under _GNU_SOURCE too: the same layout, for SO_PEERCRED. */
struct kvd_peer_credentials { int pid; unsigned int uid; unsigned int gid; };
/* glibc 2.34+, declared only under _GNU_SOURCE: a spawned child keeps no descriptor above 2. */
int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

#ifndef SO_PEERCRED
#define SO_PEERCRED 17
#endif
#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif
/* Linux 6.5+: a pidfd of the peer that connected (older kernels: ENOPROTOOPT). */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
/* O_PATH, declared only under _GNU_SOURCE too: a descriptor that finds, never reads. */
#define KVD_O_PATH 010000000
#include <sys/syscall.h>
#include <unistd.h>
/* pidfd_open(2) and pidfd_send_signal(2), which glibc 2.36 wraps only under _GNU_SOURCE. */
static inline int kvd_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
static inline int kvd_pidfd_send_signal(int pidfd, int sig) { return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, (void *)0, 0); }
/* statx(2) (glibc declares it only under _GNU_SOURCE) asking for nothing and AT_STATX_DONT_SYNC:
   the device, inode and mount id the kernel already holds, never a request to a FUSE daemon or a network
   server. Follows a last symbolic link; an empty path is `directory` itself (AT_EMPTY_PATH).
   0, or -1 and errno. */
#include <linux/stat.h>
#include <fcntl.h>
/* PIDFD_GET_INFO (Linux 6.13; its first layout, which later kernels still take): the id of the
   process's cgroup in the unified hierarchy. Fails with ESRCH once the process exited, ENOTTY or
   EINVAL before 6.13. 0 with *id set (0: no cgroup id given), or -1 and errno. */
#include <stdint.h>
#include <sys/ioctl.h>
struct kvd_pidfd_info {
    uint64_t mask, cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid, spare0;
};
static inline int kvd_pidfd_cgroup_id(int pidfd, unsigned long long *id) {
    struct kvd_pidfd_info info = { .mask = 1u << 2 /* PIDFD_INFO_CGROUPID */ };
    if (ioctl(pidfd, _IOWR(0xFF, 11, struct kvd_pidfd_info), &info) != 0) return -1;
    *id = (info.mask & (1u << 2)) ? info.cgroupid : 0;
    return 0;
}
static inline int kvd_file_identity(int directory, const char *path, unsigned long long *device,
                                    unsigned long long *inode, unsigned long long *mount) {
    struct statx status;
    int flags = 0x4000 /* AT_STATX_DONT_SYNC */ | (path[0] == 0 ? 0x1000 /* AT_EMPTY_PATH */ : 0);
    int result = (int)syscall(SYS_statx, directory, path, flags, 0u, &status);
    if (result == 0) {
        *device = ((unsigned long long)status.stx_dev_major << 32) | status.stx_dev_minor;
        *inode = status.stx_ino;
        *mount = (status.stx_mask & 0x1000 /* STATX_MNT_ID, given asked or not */) ? status.stx_mnt_id : 0;
    }
    return result;
}
/* What kvd reads of a peer's process at accept beyond its credentials, in one call: the target of
   /proc/PID/exe into `program` (at most `capacity` bytes, truncated as readlink(2) truncates;
   *length set), then /proc/PID/root's device, inode and mount as kvd_file_identity gives them,
   then the cgroup id of `pidfd` (a pidfd of that process) as kvd_pidfd_cgroup_id gives it: asked
   last, since it fails with ESRCH once the process exited, so what was read before is that
   process's own. 0 when all three were read, or -1 and the errno of the first that failed (those
   after it are not asked). */
static inline int kvd_peer_process_facts(int pid, int pidfd, char *program, int capacity, int *length,
                                         unsigned long long *device, unsigned long long *inode,
                                         unsigned long long *mount, unsigned long long *cgroup) {
    char path[32] = "/proc/";
    char digits[12];
    int count = 0, at = 6;
    unsigned int rest = (unsigned int)pid;
    do { digits[count++] = (char)('0' + rest % 10); rest /= 10; } while (rest != 0 && count < 11);
    while (count > 0) path[at++] = digits[--count];
    const char exe[] = "/exe", root[] = "/root";
    for (unsigned int i = 0; i < sizeof exe; i++) path[at + i] = exe[i];
    ssize_t got = readlink(path, program, (size_t)capacity);
    if (got < 0) return -1;
    *length = (int)got;
    for (unsigned int i = 0; i < sizeof root; i++) path[at + i] = root[i];
    if (kvd_file_identity(AT_FDCWD, path, device, inode, mount) != 0) return -1;
    return kvd_pidfd_cgroup_id(pidfd, cgroup);
}
#endif
