/* host_cache.c - the cache of pinned host blocks (see host_cache.h): one bin per size class with a free list and
 * a FIFO of pending blocks (given back, their event not yet seen complete), a list of the blocks in use, and a
 * pool of events. */
#include "core/host_cache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/device_cache.h"

typedef struct hblock {
    void *ptr;           // pinned memory from pardo_device_malloc_host
    size_t size;         // bytes: the size class
    pardo_event ev;      // while pending: the event recorded when it was given back (the pool's)
    struct hblock *next; // next in the in-use list, the free list or the pending FIFO
} hblock;

typedef struct hbin {
    size_t size;                         // bytes: the size class
    hblock *free_head;                   // given back, event complete
    hblock *pending_head, *pending_tail; // given back, oldest first
    struct hbin *next;
} hbin;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static hbin *bins;
static hblock *in_use;
static pardo_event *events; // the pool: events not recorded for any block
static size_t n_events, cap_events;
static pardo_host_cache_stats stats;

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }
static void register_fork(void) { pthread_atfork(before_fork, after_fork, after_fork); }

static void lock_cache(void) {
    pthread_once(&fork_once, register_fork);
    pthread_mutex_lock(&lock);
}

static hbin *find_bin(size_t size, bool make) {
    for (hbin *b = bins; b; b = b->next)
        if (b->size == size) return b;
    if (!make) return NULL;
    hbin *b = calloc(1, sizeof(*b));
    if (!b) return NULL;
    b->size = size;
    b->next = bins;
    bins = b;
    return b;
}

/* An event of the pool, or a new one. */
static int event_take(pardo_event *out, pardo_status *st) {
    if (n_events > 0) {
        *out = events[--n_events];
        return PARDO_OK;
    }
    if (pardo_device_event_create(out, st) != PARDO_OK) return st->code;
    stats.events_made++;
    return PARDO_OK;
}

/* Back to the pool (destroyed when the pool cannot grow). */
static void event_put(pardo_event ev) {
    if (n_events == cap_events) {
        size_t cap = cap_events ? 2 * cap_events : 8;
        pardo_event *e = realloc(events, cap * sizeof(*e));
        if (!e) {
            pardo_device_event_destroy(ev);
            return;
        }
        events = e;
        cap_events = cap;
    }
    events[n_events++] = ev;
}

/* Moves b's pending blocks whose events are complete to its free list (their events to the pool). */
static void reap(hbin *b) {
    hblock **pp = &b->pending_head, *last = NULL;
    while (*pp) {
        hblock *k = *pp;
        bool done = false;
        pardo_status ignored;
        if (pardo_device_event_query(k->ev, &done, &ignored) != PARDO_OK) done = false;
        if (!done) {
            last = k;
            pp = &k->next;
            continue;
        }
        *pp = k->next;
        event_put(k->ev);
        k->ev = NULL;
        k->next = b->free_head;
        b->free_head = k;
        stats.blocks_pending--;
        stats.blocks_cached++;
    }
    b->pending_tail = last;
}

int pardo_host_cache_alloc(void **out, size_t nbytes, pardo_status *st) {
    *out = NULL;
    size_t size = pardo_device_cache_round(nbytes);
    if (size == 0) return pardo_errorf(st, PARDO_ENOMEM, "cannot allocate %zu bytes of pinned host memory", nbytes);
    lock_cache();
    int rc = PARDO_OK;
    hblock *k = NULL;
    hbin *b = find_bin(size, true);
    if (!b) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "out of host memory for the pinned host cache's records");
        goto done;
    }
    if (!b->free_head && b->pending_head) reap(b);
    if (!b->free_head && b->pending_head) { /* sync at reuse: the oldest pending block, once its copy has run */
        k = b->pending_head;
        if ((rc = pardo_device_event_sync(k->ev, st)) != PARDO_OK) goto done;
        if (!(b->pending_head = k->next)) b->pending_tail = NULL;
        event_put(k->ev);
        k->ev = NULL;
        stats.blocks_pending--;
        stats.reuse_waits++;
        stats.cache_hits++;
    } else if (b->free_head) {
        k = b->free_head;
        b->free_head = k->next;
        stats.blocks_cached--;
        stats.cache_hits++;
    } else {
        if (!(k = calloc(1, sizeof(*k)))) {
            rc = pardo_errorf(st, PARDO_ENOMEM, "out of host memory for the pinned host cache's records");
            goto done;
        }
        if ((rc = pardo_device_malloc_host(&k->ptr, size, st)) != PARDO_OK) {
            free(k);
            k = NULL;
            goto done;
        }
        k->size = size;
        stats.raw_allocs++;
        stats.bytes_held += size;
    }
    k->next = in_use;
    in_use = k;
    *out = k->ptr;
done:
    pthread_mutex_unlock(&lock);
    return rc;
}

int pardo_host_cache_release(void *p, pardo_stream stream, pardo_status *st) {
    if (!p) return PARDO_OK;
    lock_cache();
    hblock **pp = &in_use;
    while (*pp && (*pp)->ptr != p) pp = &(*pp)->next;
    PARDO_ASSERT(*pp != NULL);
    hblock *k = *pp;
    *pp = k->next;
    k->next = NULL;
    hbin *b = find_bin(k->size, false);
    PARDO_ASSERT(b != NULL);
    pardo_event ev = NULL;
    int rc = event_take(&ev, st);
    if (rc == PARDO_OK && (rc = pardo_device_event_record(ev, stream, st)) != PARDO_OK) event_put(ev);
    if (rc != PARDO_OK) { /* no event to wait on later: wait now, and the block is free */
        pardo_status ignored;
        (void)pardo_device_stream_sync(stream, &ignored);
        k->next = b->free_head;
        b->free_head = k;
        stats.blocks_cached++;
        pthread_mutex_unlock(&lock);
        return rc;
    }
    k->ev = ev;
    if (b->pending_tail)
        b->pending_tail->next = k;
    else
        b->pending_head = k;
    b->pending_tail = k;
    stats.blocks_pending++;
    pthread_mutex_unlock(&lock);
    return PARDO_OK;
}

static void free_block(hblock *k) {
    pardo_device_free_host(k->ptr);
    stats.raw_frees++;
    stats.bytes_held -= k->size;
    free(k);
}

void pardo_host_cache_trim(void) {
    lock_cache();
    for (hbin *b = bins; b; b = b->next) {
        for (hblock *k = b->pending_head, *next; k; k = next) {
            next = k->next;
            pardo_status ignored;
            (void)pardo_device_event_sync(k->ev, &ignored);
            event_put(k->ev);
            stats.blocks_pending--;
            free_block(k);
        }
        b->pending_head = b->pending_tail = NULL;
        for (hblock *k = b->free_head, *next; k; k = next) {
            next = k->next;
            stats.blocks_cached--;
            free_block(k);
        }
        b->free_head = NULL;
    }
    for (size_t i = 0; i < n_events; i++) pardo_device_event_destroy(events[i]);
    n_events = 0;
    pthread_mutex_unlock(&lock);
}

void pardo_host_cache_get_stats(pardo_host_cache_stats *out) {
    lock_cache();
    *out = stats;
    pthread_mutex_unlock(&lock);
}
