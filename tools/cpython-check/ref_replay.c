/* Reference replayer: replays an allocation trace through the real CPython 3.11 small-object
 * allocator (PyObject_Malloc / PyObject_Realloc / PyObject_Free from libpython3.11) and prints
 * its counters as JSON, in the layout of the expected.json files in tests/data/pymalloc/.
 *
 *   ref_replay < TRACE        (plain text; decompress .gz traces before piping them in)
 *
 * The interpreter is never initialised, so nothing but this program touches the pools and the
 * heap starts empty. Arenas come from aligned_alloc(1 MiB, 1 MiB), so every arena holds exactly
 * 64 pools, as in a heapdelta Pool whose arenas are pool-aligned.
 *
 * Counters are parsed from the text _PyObject_DebugMallocStats() writes (what
 * sys._debugmallocstats() prints); live_blocks / allocated_blocks is _Py_GetAllocatedBlocks()
 * (sys.getallocatedblocks()), which also counts blocks that went to malloc (size 0 or > 512).
 */
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Private but exported by libpython3.11; not declared in the public headers. */
PyAPI_FUNC(Py_ssize_t) _Py_GetAllocatedBlocks(void);
PyAPI_FUNC(int) _PyObject_DebugMallocStats(FILE *out);

#define ARENA_SIZE (1u << 20)
#define MAX_CLASSES 32

static long n_arena_alloc, n_arena_free;

static void *arena_alloc(void *ctx, size_t size) {
    (void)ctx;
    if (size != ARENA_SIZE) {
        fprintf(stderr, "ref_replay: unexpected arena size %zu (not CPython 3.11?)\n", size);
        exit(1);
    }
    void *p = aligned_alloc(ARENA_SIZE, ARENA_SIZE);
    if (p) n_arena_alloc++;
    return p;
}

static void arena_free(void *ctx, void *p, size_t size) {
    (void)ctx; (void)size;
    n_arena_free++;
    free(p);
}

typedef struct {
    long long arenas_total, arenas_reclaimed, arenas_highwater, arenas_current;
    long long arena_size, pool_size;
    long long bytes_allocated_blocks, bytes_available_blocks, unused_pools;
    long long bytes_pool_headers, bytes_quantization, bytes_arena_alignment;
    long long total, allocated_blocks;
    int nclasses;
    long long cls[MAX_CLASSES][5]; /* class index, block size, pools, blocks in use, avail blocks */
} Stats;

static void fail(const char *msg, const char *detail) {
    fprintf(stderr, "ref_replay: %s%s\n", msg, detail ? detail : "");
    exit(1);
}

/* The value after '=' in a stats line, e.g. "   1,048,576". */
static long long stat_value(const char *s) {
    long long v = 0;
    int digits = 0;
    for (; *s; s++) {
        if (*s >= '0' && *s <= '9') { v = v * 10 + (*s - '0'); digits++; }
        else if (*s != ',' && *s != ' ') fail("unexpected stats value: ", s);
    }
    if (!digits) fail("empty stats value", NULL);
    return v;
}

static FILE *stats_file;      /* scratch file _PyObject_DebugMallocStats writes into */
static char stats_text[1 << 16];

static void get_stats(Stats *st) {
    memset(st, 0, sizeof *st);
    rewind(stats_file);
    if (ftruncate(fileno(stats_file), 0) != 0) fail("ftruncate failed", NULL);
    if (!_PyObject_DebugMallocStats(stats_file)) fail("pymalloc is not enabled in this libpython", NULL);
    fflush(stats_file);
    size_t n = (size_t)ftell(stats_file);
    if (n >= sizeof stats_text) fail("stats text too long", NULL);
    rewind(stats_file);
    if (fread(stats_text, 1, n, stats_file) != n) fail("cannot read stats back", NULL);
    stats_text[n] = 0;

    /* "# name = value" lines; the two lines whose name holds a count are parsed below. */
    const struct { const char *name; long long *field; } keys[] = {
        {"# arenas allocated total", &st->arenas_total},
        {"# arenas reclaimed", &st->arenas_reclaimed},
        {"# arenas highwater mark", &st->arenas_highwater},
        {"# arenas allocated current", &st->arenas_current},
        {"# bytes in allocated blocks", &st->bytes_allocated_blocks},
        {"# bytes in available blocks", &st->bytes_available_blocks},
        {"# bytes lost to pool headers", &st->bytes_pool_headers},
        {"# bytes lost to quantization", &st->bytes_quantization},
        {"# bytes lost to arena alignment", &st->bytes_arena_alignment},
        {"Total", &st->total},
    };
    const int nkeys = sizeof keys / sizeof keys[0];
    int seen = 0, expected = nkeys + 2;

    for (char *line = stats_text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *eq = strchr(line, '=');
        long long a, b, c, d, e;
        char extra;
        if (!eq) {
            /* per-class row: "  class  size  pools  blocks-in-use  avail-blocks" */
            if (sscanf(line, " %lld %lld %lld %lld %lld %c", &a, &b, &c, &d, &e, &extra) == 5) {
                if (st->nclasses == MAX_CLASSES) fail("too many size classes", NULL);
                long long *row = st->cls[st->nclasses++];
                row[0] = a; row[1] = b; row[2] = c; row[3] = d; row[4] = e;
            }
            continue;
        }
        if (sscanf(line, "%lld arenas * %lld bytes/arena", &a, &b) == 2) {
            st->arena_size = b; seen++;
        } else if (sscanf(line, "%lld unused pools * %lld bytes", &a, &b) == 2) {
            st->unused_pools = a; st->pool_size = b; seen++;
        } else {
            for (int i = 0; i < nkeys; i++)
                if (strncmp(line, keys[i].name, strlen(keys[i].name)) == 0) {
                    *keys[i].field = stat_value(eq + 1);
                    seen++;
                }
            /* The pool statistics end here; the arena-map section after it has its own "Total". */
            if (strncmp(line, "Total", 5) == 0) break;
        }
    }
    if (seen != expected) fail("unexpected _PyObject_DebugMallocStats output:\n", stats_text);

    /* Self-checks: the stats agree with themselves and with our arena allocator. */
    if (st->total != st->arenas_current * st->arena_size) fail("Total != arenas x arena size", NULL);
    if (st->arenas_current != n_arena_alloc - n_arena_free)
        fail("arena count differs from the arenas our allocator handed out", NULL);
    st->allocated_blocks = _Py_GetAllocatedBlocks();
}

static void put_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static void put_full(const Stats *s) {
    printf("{\"arenas_total\": %lld, \"arenas_reclaimed\": %lld, \"arenas_highwater\": %lld, "
           "\"arenas_current\": %lld, \"arena_size\": %lld, \"pool_size\": %lld, "
           "\"bytes_allocated_blocks\": %lld, \"bytes_available_blocks\": %lld, \"unused_pools\": %lld, "
           "\"bytes_pool_headers\": %lld, \"bytes_quantization\": %lld, \"bytes_arena_alignment\": %lld, "
           "\"allocated_blocks\": %lld, \"classes\": [",
           s->arenas_total, s->arenas_reclaimed, s->arenas_highwater, s->arenas_current, s->arena_size,
           s->pool_size, s->bytes_allocated_blocks, s->bytes_available_blocks, s->unused_pools,
           s->bytes_pool_headers, s->bytes_quantization, s->bytes_arena_alignment, s->allocated_blocks);
    for (int i = 0; i < s->nclasses; i++)
        printf("%s{\"class\": %lld, \"size\": %lld, \"pools\": %lld, \"blocks_in_use\": %lld, "
               "\"avail_blocks\": %lld}",
               i ? ", " : "", s->cls[i][0], s->cls[i][1], s->cls[i][2], s->cls[i][3], s->cls[i][4]);
    printf("]}");
}

/* Live blocks by trace id; ids are below 2^31 and may be reused after a free. */
static void **live;
static size_t nlive, live_cap;

static void **slot(long id) {
    if ((size_t)id >= live_cap) {
        size_t cap = live_cap ? live_cap : 1024;
        while (cap <= (size_t)id) cap *= 2;
        live = realloc(live, cap * sizeof *live);
        if (!live) fail("out of memory for the id table", NULL);
        memset(live + live_cap, 0, (cap - live_cap) * sizeof *live);
        live_cap = cap;
    }
    if ((size_t)id >= nlive) nlive = (size_t)id + 1;
    return &live[id];
}

static void bad_op(long k, const char *msg, long id) {
    fprintf(stderr, "ref_replay: op %ld: %s (id %ld)\n", k, msg, id);
    exit(1);
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc != 1) { fprintf(stderr, "usage: ref_replay < TRACE\n"); return 2; }
    PyObjectArenaAllocator arenas = {NULL, arena_alloc, arena_free};
    PyObject_SetArenaAllocator(&arenas);
    stats_file = tmpfile();
    if (!stats_file) { perror("tmpfile"); return 1; }

    Stats st;
    get_stats(&st);
    if (st.arenas_total != 0 || st.allocated_blocks != 0) {
        fprintf(stderr, "ref_replay: heap not empty at start (%lld arenas, %lld blocks)\n",
                st.arenas_total, st.allocated_blocks);
        return 1;
    }

    printf("{\"snapshots\": [");
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long k = 0;     /* index of the operation; snapshot lines count, comments and blanks don't */
    int nsnap = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
            line[--len] = 0;
        char *s = line + strspn(line, " \t");
        if (!*s || *s == '#') continue;
        char op = *s;
        long id = 0;
        unsigned long long size = 0;
        int ok = op == 's' || (op == 'f' ? sscanf(s + 1, "%ld", &id) == 1
                                         : (op == 'a' || op == 'r') && sscanf(s + 1, "%ld %llu", &id, &size) == 2);
        if (!ok) bad_op(k, "malformed line", -1);
        if (op != 's' && (id < 0 || id >= (1L << 31))) bad_op(k, "id out of range", id);

        if (op == 'a') {
            void **p = slot(id);
            if (*p) bad_op(k, "allocated twice", id);
            if (!(*p = PyObject_Malloc(size))) bad_op(k, "out of memory", id);
        } else if (op == 'f') {
            void **p = slot(id);
            if (!*p) bad_op(k, "free of an id that is not live", id);
            PyObject_Free(*p);
            *p = NULL;
        } else if (op == 'r') {
            void **p = slot(id);
            if (!*p) bad_op(k, "realloc of an id that is not live", id);
            void *q = PyObject_Realloc(*p, size);
            if (!q) bad_op(k, "out of memory", id);
            *p = q;
        } else {
            get_stats(&st);
            printf("%s{\"label\": ", nsnap++ ? ", " : "");
            put_string(s + 1 + strspn(s + 1, " \t"));
            printf(", \"op\": %ld, \"live_blocks\": %lld, \"arenas_current\": %lld, "
                   "\"arenas_highwater\": %lld, \"arenas_reclaimed\": %lld, \"arenas_total\": %lld, "
                   "\"bytes_allocated_blocks\": %lld, \"unused_pools\": %lld}",
                   k, st.allocated_blocks, st.arenas_current, st.arenas_highwater,
                   st.arenas_reclaimed, st.arenas_total, st.bytes_allocated_blocks, st.unused_pools);
        }
        k++;
    }
    if (ferror(stdin)) fail("error reading the trace", NULL);

    printf("], \"after\": ");
    get_stats(&st);
    put_full(&st);
    /* Blocks outside the pools (size 0 or > 512) that are still live. */
    long long live_raw = st.allocated_blocks;
    for (int i = 0; i < st.nclasses; i++) live_raw -= st.cls[i][3];

    /* Free every survivor in ascending id order, as heapdelta's replay::run does. */
    for (size_t i = 0; i < nlive; i++)
        if (live[i]) { PyObject_Free(live[i]); live[i] = NULL; }
    get_stats(&st);
    printf(", \"after_cleanup\": ");
    put_full(&st);
    printf(", \"live_raw\": %lld}\n", live_raw);
    return 0;
}
