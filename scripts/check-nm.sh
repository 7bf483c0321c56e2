#!/bin/sh
# Fails when an object file outside KVSystem references a C library function that is not on the
# list below: every system call — files, sockets, processes, signals, sleeping, user
# ids — goes through KVSystem (`SystemCalls`, `FileSystem`; LinuxSystem*.swift make the calls).
# Read from the compiled objects' undefined symbols (`nm -u`), so no call can hide from it.
#
# Covers every library and executable target (Sources/, the sample in Examples/Habits/, the
# benchmarks' programs in bench/, Tests/Probes/) but KVSystem and the C shims (CLinux, CSystemd,
# CCurl); test targets (which run real processes, sockets and users) are not
# covered. Swift symbols and the C shims' own functions (libcurl's `ccurl_*`, libsystemd's
# `sd_*`) are not C library calls. Needs a debug build (`swift build`); checks only the objects
# of today's sources (a removed file's object may linger in .build). Prints each offence and
# exits 1 if there is one.
set -eu
cd "$(dirname "$0")/.."
BIN=${BIN:-$(${SWIFT:-swift} build --show-bin-path)}

# C library functions that are no system call: memory, strings, arithmetic, the stack guard,
# thread-local storage, blocks (Dispatch's closures), the end of the process; the clock
# (`clock_gettime`: read in user space through the vDSO) and thread synchronisation (`syscall`
# is the futex call the standard library's `Mutex` inlines; pthread mutexes and conditions).
ALLOWED='^(memcpy|memmove|memset|memcmp|memchr|malloc|calloc|realloc|free|malloc_usable_size|strlen|strcmp|strdup|strerror|ceil|floor|round|rint|trunc|__stack_chk_fail|__tls_get_addr|_Block_copy|_Block_release|_NSConcreteStackBlock|exit|clock_gettime|syscall|pthread_mutex_(init|destroy|lock|unlock)|pthread_cond_(init|destroy|broadcast|signal|wait|timedwait)|pthread_condattr_(init|destroy|setclock))$'
SHIMS='^(ccurl_|sd_)'

# No file is excused: every call goes through KVSystem (add none here), the benchmark's programs
# too (kvbench's sockets, epoll and threads; kvbench-local's dlopen of SQLite).
TEMPORARY=''

status=0
for folder in Sources/*/ Examples/Habits/*/ bench/kvbench*/ Tests/Probes/*/; do
    target=$(basename "$folder")
    case $target in KVSystem | CLinux | CSystemd | CCurl) continue ;; esac
    module=$(printf %s "$target" | tr - _)
    for source in $(find "$folder" -name '*.swift' | sort); do
        object="$BIN/$module.build/$(basename "$source").o"
        if [ ! -f "$object" ]; then
            echo "check-nm: $object is missing; build first (swift build)"
            exit 1
        fi
        temporary=$(printf '%s\n' $TEMPORARY | sed -n "s|^$source:||p" | tr '\n' '|')
        calls=$(nm -u "$object" | awk '{print $2}' | grep -v '^\$s\|^_\$s\|^\$e\|swift' \
            | grep -vE "$ALLOWED" | grep -vE "$SHIMS" | grep -vE "^(${temporary%|})\$" | tr '\n' ' ' || true)
        if [ -n "$calls" ]; then
            echo "$source calls the C library directly: $calls(go through KVSystem's SystemCalls or FileSystem)"
            status=1
        fi
    done
done
exit $status
