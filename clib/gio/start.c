/* start.c — GiokvdStart, the current state a stream starts with (kvd_watch_all_current_raw_new),
 * kept as kvd sent it until a domain is touched: each domain's name and JSON copied one after
 * the other into a few large chunks, and one entry per domain in an array sorted by name, found
 * by binary search. Nothing is allocated or hashed per domain: a process pays one copy for each
 * domain of the store and decodes only those it uses. kvd sends the domains in name order (byte
 * order: domain names are ASCII), so the entries are appended in order; each is compared with
 * the one before, and when one came out of order they are sorted before the first lookup. A
 * name given twice keeps the last. Not thread-safe: the backend fills one without its lock, then
 * uses it under the lock. */
#include <stdlib.h>
#include <string.h>

#include "giokvd.h"

/* The bytes of a chunk; a domain that takes more than a quarter of one gets an allocation of its own. */
#define CHUNK_BYTES (64 << 10)

typedef struct {
    const char *name; /* in a chunk, NUL-terminated, its JSON right after */
    const char *json; /* NUL-terminated */
    size_t json_len;
    int64_t revision, system_revision;
    guint arrival; /* how many came before it: of a name given twice, the later is kept */
    gboolean taken;
} Entry;

struct GiokvdStart {
    GPtrArray *chunks; /* char*: the entries' bytes */
    char *free_space;  /* the unused bytes of the chunk being filled */
    size_t free_len;
    Entry *entries;    /* by name, once `sorted` */
    guint count, capacity, arrivals;
    gboolean sorted;   /* in name order, no name twice */
    gsize bytes;       /* what the entries not taken take, about */
};

/* What an entry takes in memory, about. */
static gsize entry_cost(const Entry *entry) {
    return sizeof *entry + (size_t)(entry->json - entry->name) + entry->json_len + 1;
}

GiokvdStart *giokvd_start_new(void) {
    GiokvdStart *start = g_new0(GiokvdStart, 1);
    start->chunks = g_ptr_array_new_with_free_func(g_free);
    start->sorted = TRUE;
    return start;
}

void giokvd_start_free(GiokvdStart *start) {
    if (start == NULL) return;
    g_ptr_array_unref(start->chunks);
    g_free(start->entries);
    g_free(start);
}

/* `need` bytes in the chunks. */
static char *room(GiokvdStart *start, size_t need) {
    if (need > CHUNK_BYTES / 4) {
        char *own = g_malloc(need);
        g_ptr_array_add(start->chunks, own);
        return own;
    }
    if (need > start->free_len) {
        start->free_space = g_malloc(CHUNK_BYTES);
        start->free_len = CHUNK_BYTES;
        g_ptr_array_add(start->chunks, start->free_space);
    }
    char *at = start->free_space;
    start->free_space += need;
    start->free_len -= need;
    return at;
}

void giokvd_start_add(GiokvdStart *start, const kvd_current_raw *domain) {
    size_t name_len = strlen(domain->domain);
    char *at = room(start, name_len + 1 + domain->changes_json_len + 1);
    memcpy(at, domain->domain, name_len + 1);
    memcpy(at + name_len + 1, domain->changes_json, domain->changes_json_len);
    at[name_len + 1 + domain->changes_json_len] = '\0';
    Entry entry = {at, at + name_len + 1, domain->changes_json_len, domain->revision, domain->system_revision, start->arrivals++, FALSE};
    Entry *last = start->count ? &start->entries[start->count - 1] : NULL;
    int order = last ? strcmp(last->name, entry.name) : -1;
    start->bytes += entry_cost(&entry);
    if (order == 0) { /* the same domain again: the last kept */
        start->bytes -= entry_cost(last);
        *last = entry;
        return;
    }
    if (order > 0) start->sorted = FALSE;
    if (start->count == start->capacity) {
        start->capacity = start->capacity ? 2 * start->capacity : 256;
        start->entries = g_renew(Entry, start->entries, start->capacity);
    }
    start->entries[start->count++] = entry;
}

/* By name, then in the order they came. */
static int by_name(const void *a, const void *b) {
    const Entry *x = a, *y = b;
    int order = strcmp(x->name, y->name);
    return order ? order : (x->arrival > y->arrival) - (x->arrival < y->arrival);
}

/* Sorts entries that came out of order; of a name given twice, the last to come is kept. */
static void ensure_sorted(GiokvdStart *start) {
    if (start->sorted) return;
    qsort(start->entries, start->count, sizeof *start->entries, by_name);
    guint kept = 0;
    for (guint i = 0; i < start->count; i++) {
        if (i + 1 < start->count && strcmp(start->entries[i].name, start->entries[i + 1].name) == 0) {
            start->bytes -= entry_cost(&start->entries[i]);
            continue;
        }
        start->entries[kept++] = start->entries[i];
    }
    start->count = kept;
    start->sorted = TRUE;
}

/* The entry of `name`, or NULL: the first entry whose name is not before it, if it is the name. */
static Entry *find(GiokvdStart *start, const char *name) {
    ensure_sorted(start);
    guint low = 0, high = start->count;
    while (low < high) {
        guint middle = low + (high - low) / 2;
        if (strcmp(start->entries[middle].name, name) < 0) low = middle + 1;
        else high = middle;
    }
    return low < start->count && strcmp(start->entries[low].name, name) == 0 ? &start->entries[low] : NULL;
}

gboolean giokvd_start_take(GiokvdStart *start, const char *name, kvd_current_raw *domain) {
    Entry *entry = start ? find(start, name) : NULL;
    if (entry == NULL || entry->taken) return FALSE;
    entry->taken = TRUE;
    start->bytes -= entry_cost(entry);
    *domain = (kvd_current_raw){entry->revision, entry->system_revision, entry->name, false, entry->json, entry->json_len};
    return TRUE;
}

gsize giokvd_start_bytes(GiokvdStart *start) {
    if (start == NULL) return 0;
    ensure_sorted(start);
    return start->bytes;
}
