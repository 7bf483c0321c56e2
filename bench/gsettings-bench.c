/* gsettings-bench.c — the GSettings rows of make bench (bench/gsettings.py builds and runs it),
 * the same program on whichever backend GSETTINGS_BACKEND names (kvd or dconf):
 *
 *   gsettings-bench read COUNT      g_settings_get_int of one key COUNT times after a warm-up (the
 *                                   backend's cache: kvd's in-process one, dconf's mmap'd file);
 *                                   prints {"ns_per_op": ...}
 *   gsettings-bench write SECONDS   g_settings_set_int then g_settings_sync, again and again: a
 *                                   write the backend has acknowledged when the sync returns
 *                                   (kvd: durable; dconf: dconf-service has written its database)
 *   gsettings-bench burst COUNT     COUNT g_settings_set_int of one key in a loop, then one
 *                                   g_settings_sync (an app writing from its main loop); the
 *                                   value read back checked; prints {"ops", "seconds" (all of it),
 *                                   "set_seconds" (the sets alone)}
 *   gsettings-bench notify SECONDS  a writer process (this program, started by it, on the same
 *                                   bus) sets the key; the time until this process's `changed`
 *                                   signal, in its main loop, shows the new value
 *
 *   gsettings-bench populate N      sets name, size and flag of N relocatable objects
 *                                   (io.kvd.bench.profile at /io/kvd/bench/many/pI/), then syncs
 *   gsettings-bench many N          a fresh process's first read: makes the N objects populate set
 *                                   and reads each one's name (checked); prints {"ms", "wrong",
 *                                   "sockets"} (the process's socket descriptors after)
 *   gsettings-bench start N         an app start: N objects (the first N populate set) and all
 *                                   three keys of each; prints the same
 *
 * write and notify print {"ops", "ops_per_s", "p50_us", "p99_us"} as kvbench does. The schemas are
 * io.kvd.bench and io.kvd.bench.profile (GSETTINGS_SCHEMA_DIR). GSETTINGS_BENCH_CPU=N binds this process (not its writer
 * child's bus or daemon) to CPU N.
 */
#define _GNU_SOURCE
#include <gio/gio.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(GArray *latencies, double elapsed_us) {
    g_array_sort(latencies, compare);
    guint n = latencies->len;
    double p50 = n ? g_array_index(latencies, double, n / 2) : 0, p99 = n ? g_array_index(latencies, double, n * 99 / 100) : 0;
    printf("{\"ops\": %u, \"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f}\n", n, n / (elapsed_us / 1e6), p50, p99);
}

static int bench_read(GSettings *settings, long count) {
    volatile gint sink = 0;
    for (int i = 0; i < 1000; i++) sink += g_settings_get_int(settings, "counter");
    double begin = now_us();
    for (long i = 0; i < count; i++) sink += g_settings_get_int(settings, "counter");
    double elapsed = now_us() - begin;
    printf("{\"ns_per_op\": %.1f}\n", elapsed * 1000 / count);
    return 0;
}

static int bench_write(GSettings *settings, double seconds) {
    GArray *latencies = g_array_new(FALSE, FALSE, sizeof(double));
    g_settings_set_int(settings, "counter", -1);
    g_settings_sync();
    double begin = now_us(), end = begin + seconds * 1e6;
    for (gint i = 0; now_us() < end; i++) {
        double start = now_us();
        if (!g_settings_set_int(settings, "counter", i)) {
            fprintf(stderr, "gsettings-bench: the write was refused\n");
            return 1;
        }
        g_settings_sync();
        double took = now_us() - start;
        g_array_append_val(latencies, took);
    }
    report(latencies, now_us() - begin);
    g_array_unref(latencies);
    return 0;
}

static int bench_burst(GSettings *settings, long count) {
    g_settings_set_int(settings, "counter", -1);
    g_settings_sync();
    double begin = now_us();
    for (long i = 0; i < count; i++)
        if (!g_settings_set_int(settings, "counter", (gint)i)) {
            fprintf(stderr, "gsettings-bench: the write was refused\n");
            return 1;
        }
    double sets = now_us();
    g_settings_sync();
    double end = now_us();
    if (g_settings_get_int(settings, "counter") != (gint)(count - 1)) {
        fprintf(stderr, "gsettings-bench: after the burst, counter is %d, not %ld\n", g_settings_get_int(settings, "counter"), count - 1);
        return 1;
    }
    printf("{\"ops\": %ld, \"seconds\": %.4f, \"set_seconds\": %.4f}\n", count, (end - begin) / 1e6, (sets - begin) / 1e6);
    return 0;
}

/* notify: the reader's state. */
typedef struct {
    GSettings *settings;
    GMainLoop *loop;
    FILE *to_writer;
    gint expected;
    double sent;
    double end;
    GArray *latencies;
} Round;

static void next_round(Round *round) {
    round->expected++;
    round->sent = now_us();
    fprintf(round->to_writer, "%d\n", round->expected);
    fflush(round->to_writer);
}

static void on_changed(GSettings *settings, const gchar *key, gpointer data) {
    Round *round = data;
    if (strcmp(key, "counter") != 0 || g_settings_get_int(settings, "counter") != round->expected) return;
    double took = now_us() - round->sent;
    g_array_append_val(round->latencies, took);
    if (now_us() >= round->end) g_main_loop_quit(round->loop);
    else next_round(round);
}

/* The writer: sets each value read from stdin. */
static int writer(GSettings *settings) {
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        g_settings_set_int(settings, "counter", atoi(line));
        g_settings_sync();
    }
    return 0;
}

static gboolean give_up(gpointer data) {
    fprintf(stderr, "gsettings-bench: no changed signal within 10 s\n");
    exit(1);
}

static int bench_notify(GSettings *settings, const char *self, double seconds) {
    g_settings_set_int(settings, "counter", 0);
    g_settings_sync();
    GError *error = NULL;
    const char *argv[] = {self, "writer", NULL};
    GPid pid;
    gint input;
    /* The child inherits GSETTINGS_BACKEND, the bus and the socket; not the CPU binding. */
    g_unsetenv("GSETTINGS_BENCH_CPU");
    if (!g_spawn_async_with_pipes(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &input, NULL, NULL,
                                  &error)) {
        fprintf(stderr, "gsettings-bench: cannot start the writer: %s\n", error->message);
        return 1;
    }
    Round round = {settings, g_main_loop_new(NULL, FALSE), fdopen(input, "w"), 0, 0, 0, g_array_new(FALSE, FALSE, sizeof(double))};
    g_signal_connect(settings, "changed", G_CALLBACK(on_changed), &round);
    g_settings_get_int(settings, "counter"); /* subscribed before the first round */
    double begin = now_us();
    round.end = begin + seconds * 1e6;
    next_round(&round);
    guint watchdog = g_timeout_add_seconds(10 + (guint)seconds, give_up, NULL);
    g_main_loop_run(round.loop);
    g_source_remove(watchdog);
    report(round.latencies, now_us() - begin);
    fclose(round.to_writer);
    g_spawn_close_pid(pid);
    return 0;
}

static GSettings *profile(long i) {
    char path[64];
    snprintf(path, sizeof path, "/io/kvd/bench/many/p%ld/", i);
    return g_settings_new_with_path("io.kvd.bench.profile", path);
}

static int populate(long count) {
    for (long i = 0; i < count; i++) {
        GSettings *settings = profile(i);
        char name[32];
        snprintf(name, sizeof name, "profile-%ld", i);
        g_settings_set_string(settings, "name", name);
        g_settings_set_int(settings, "size", (int)i);
        g_settings_set_boolean(settings, "flag", i % 2);
        g_object_unref(settings);
    }
    g_settings_sync();
    return 0;
}

static int sockets(void) {
    GDir *dir = g_dir_open("/proc/self/fd", 0, NULL);
    int count = 0;
    for (const char *fd; dir && (fd = g_dir_read_name(dir));) {
        char path[64], target[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0 && !strncmp(target, "socket:", 7)) count++;
    }
    if (dir) g_dir_close(dir);
    return count;
}

/* Makes `count` objects and reads each one's name (with `all_keys`, its size and flag too). */
static int first_read(long count, gboolean all_keys) {
    GSettings **objects = g_new(GSettings *, count);
    long wrong = 0;
    double begin = now_us();
    for (long i = 0; i < count; i++) {
        objects[i] = profile(i);
        char expected[32];
        snprintf(expected, sizeof expected, "profile-%ld", i);
        char *name = g_settings_get_string(objects[i], "name");
        wrong += strcmp(name, expected) != 0;
        g_free(name);
        if (all_keys) wrong += g_settings_get_int(objects[i], "size") != i || g_settings_get_boolean(objects[i], "flag") != i % 2;
    }
    double elapsed = now_us() - begin;
    printf("{\"ms\": %.2f, \"wrong\": %ld, \"sockets\": %d}\n", elapsed / 1000, wrong, sockets());
    for (long i = 0; i < count; i++) g_object_unref(objects[i]);
    g_free(objects);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: gsettings-bench read COUNT | write SECONDS | burst COUNT | notify SECONDS | populate N | many N | start N\n");
        return 2;
    }
    const char *cpu = getenv("GSETTINGS_BENCH_CPU");
    if (cpu && *cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(atoi(cpu), &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    if (argc == 3 && !strcmp(argv[1], "populate")) return populate(atol(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "many")) return first_read(atol(argv[2]), FALSE);
    if (argc == 3 && !strcmp(argv[1], "start")) return first_read(atol(argv[2]), TRUE);
    GSettings *settings = g_settings_new("io.kvd.bench");
    int status = 2;
    if (!strcmp(argv[1], "read") && argc == 3) status = bench_read(settings, atol(argv[2]));
    else if (!strcmp(argv[1], "write") && argc == 3) status = bench_write(settings, atof(argv[2]));
    else if (!strcmp(argv[1], "burst") && argc == 3) status = bench_burst(settings, atol(argv[2]));
    else if (!strcmp(argv[1], "notify") && argc == 3) status = bench_notify(settings, argv[0], atof(argv[2]));
    else if (!strcmp(argv[1], "writer")) status = writer(settings);
    else fprintf(stderr, "gsettings-bench: unknown mode %s\n", argv[1]);
    g_object_unref(settings);
    return status;
}
