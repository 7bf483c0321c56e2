/* test_start.c — GiokvdStart (start.c), the stream's current state found by name: every domain
 * of a store of 3,000 (names that are prefixes of one another, the first and last of the order, a
 * domain of its own chunk) is found with its own JSON once, and a name that is not there (before
 * the first, after the last, between two, a prefix or an extension of one) is not; the same when
 * the domains come out of order, or twice (the last kept). Run by make giokvd-test. */
#include <stdio.h>
#include <string.h>

#include "../giokvd.h"

static int failures = 0;

static void fail(const char *what, const char *name) {
    fprintf(stderr, "FAIL %s: %s\n", what, name);
    failures++;
}

static gint by_bytes(gconstpointer a, gconstpointer b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The store's names, sorted: groups of names that are prefixes of one another ("a", "a.b",
 * "a.b.c", ...), numbered ones ("p1" before "p10" before "p100") and those that sort first and
 * last ("0", "zz.zz"). */
static GPtrArray *store_names(void) {
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    static const char *fixed[] = {"0", "0.0", "0.00", "0-", "0_", "A", "A.b", "_", "_2E",
                                  "a", "a.b", "a.b.c", "a.b-", "a.bc", "zz", "zz.z", "zz.zz"};
    for (size_t i = 0; i < G_N_ELEMENTS(fixed); i++) g_ptr_array_add(names, g_strdup(fixed[i]));
    for (int i = 0; i < 2983; i++) g_ptr_array_add(names, g_strdup_printf("io.kvd.first.p%d", i));
    g_ptr_array_sort(names, by_bytes);
    return names;
}

/* The JSON a domain's values are given as: its own name in it, and 100 KiB for one (a chunk of its own). */
static char *json_of(const char *name) {
    if (strcmp(name, "io.kvd.first.p1500") == 0) {
        char *padding = g_strnfill(100 << 10, 'x');
        char *json = g_strdup_printf("[{\"key\":\"name\",\"value\":\"%s\",\"pad\":\"%s\"}]", name, padding);
        g_free(padding);
        return json;
    }
    return g_strdup_printf("[{\"key\":\"name\",\"value\":\"%s\"}]", name);
}

static void add(GiokvdStart *start, const char *name, int64_t revision) {
    char *json = json_of(name);
    kvd_current_raw raw = {revision, 7, name, false, json, strlen(json)};
    giokvd_start_add(start, &raw);
    g_free(json); /* the start keeps a copy */
}

/* Takes `name`: whether it was found with its own JSON and `revision`. */
static gboolean take_own(GiokvdStart *start, const char *name, int64_t revision) {
    kvd_current_raw raw = {0};
    if (!giokvd_start_take(start, name, &raw)) return FALSE;
    char *json = json_of(name);
    gboolean own = strcmp(raw.changes_json, json) == 0 && raw.changes_json_len == strlen(json) && raw.revision == revision &&
                   raw.system_revision == 7 && strcmp(raw.domain, name) == 0;
    g_free(json);
    if (!own) fail("the values of another domain", name);
    return TRUE;
}

/* Every name is found once, with its values (the first, the last and the middle of the order
 * first, then all: those again not); the absent names never. */
static void check_lookups(GiokvdStart *start, GPtrArray *names, int64_t revision, const char *how) {
    static const char *absent[] = {"", "-", "00", "0.000", "0.0.0", "a.b.b", "a.b.c.d", "ab", "io.kvd.first", "io.kvd.first.p",
                                   "io.kvd.first.p29830", "zz.zzz", "zzz", "~"};
    for (size_t i = 0; i < G_N_ELEMENTS(absent); i++) {
        kvd_current_raw raw;
        if (giokvd_start_take(start, absent[i], &raw)) fail("an absent name found", absent[i]);
    }
    gboolean *early = g_new0(gboolean, names->len);
    guint first[] = {0, names->len - 1, names->len / 2 - 1, names->len / 2, names->len / 2 + 1};
    for (size_t i = 0; i < G_N_ELEMENTS(first); i++) {
        early[first[i]] = TRUE;
        if (!take_own(start, names->pdata[first[i]], revision)) fail(how, names->pdata[first[i]]);
    }
    for (guint i = 0; i < names->len; i++) {
        gboolean taken = take_own(start, names->pdata[i], revision);
        if (early[i] && taken) fail("taken twice", names->pdata[i]);
        else if (!early[i] && !taken) fail(how, names->pdata[i]);
    }
    g_free(early);
    if (giokvd_start_bytes(start) != 0) fail("bytes left after every domain was taken", how);
}

int main(void) {
    GPtrArray *names = store_names();

    GiokvdStart *start = giokvd_start_new();
    for (guint i = 0; i < names->len; i++) add(start, names->pdata[i], 5);
    if (giokvd_start_bytes(start) < 100 << 10) fail("bytes counted", "in order");
    check_lookups(start, names, 5, "in order: not found");
    giokvd_start_free(start);

    /* Out of order, every domain twice (the last kept), one of them given twice in a row. */
    start = giokvd_start_new();
    GRand *rand = g_rand_new_with_seed(38);
    GPtrArray *shuffled = g_ptr_array_new();
    for (guint i = 0; i < names->len; i++) g_ptr_array_add(shuffled, names->pdata[i]);
    for (guint i = shuffled->len - 1; i > 0; i--) {
        guint j = (guint)g_rand_int_range(rand, 0, (gint32)i + 1);
        gpointer swap = shuffled->pdata[i];
        shuffled->pdata[i] = shuffled->pdata[j];
        shuffled->pdata[j] = swap;
    }
    for (guint i = 0; i < shuffled->len; i++) add(start, shuffled->pdata[i], 1);
    add(start, shuffled->pdata[0], 2);
    for (guint i = 0; i < shuffled->len; i++) add(start, shuffled->pdata[i], i == 0 ? 3 : 9);
    add(start, shuffled->pdata[shuffled->len - 1], 9);
    add(start, shuffled->pdata[0], 9);
    check_lookups(start, names, 9, "out of order: not found");
    giokvd_start_free(start);

    kvd_current_raw raw;
    if (giokvd_start_take(NULL, "a", &raw) || giokvd_start_bytes(NULL) != 0) fail("no start", "NULL");
    start = giokvd_start_new();
    if (giokvd_start_take(start, "a", &raw) || giokvd_start_bytes(start) != 0) fail("an empty start", "a");
    giokvd_start_free(start);

    g_ptr_array_unref(shuffled);
    g_rand_free(rand);
    g_ptr_array_unref(names);
    if (failures) return 1;
    printf("ok the stream's start by name: 3,000 domains in order and out of order (each twice), absent names not found\n");
    return 0;
}
