/* host_device.c - a host stand-in for src/core/device.h, for tests only (make gpu-mock-test links it into
 * build/gpu-mock/ instead of src/core/device_cuda.c; pardo itself never has it): "devices" whose memory is
 * host memory from malloc (its bytes in use capped by PARDO_MOCK_DEVICE_BYTES, below, for out-of-memory tests),
 * filled with a byte pattern as device memory holds garbage, and copies as memcpy. PARDO_MOCK_DEVICE_COUNT (1 to
 * 64, default 1) says how many devices there are; each thread has its current device (0 until it selects one),
 * which SyncedMemory records as its buffers' device, so a test sees where memory landed.
 * Streams and events, so that a missing wait shows as wrong data: each device's compute stream runs its work at
 * once (the kernels of host_launch.c run as they are called), but every other stream (the copy streams, streams
 * of one's own) only queues its asynchronous copies, and runs them when something waits for them: a stream sync,
 * an event sync, a stream waiting on an event recorded after them, a device sync or the stream's destruction. An
 * event recorded on such a stream therefore stays pending (pardo_device_event_query says not done) until one of
 * those waits; a reader that skipped the wait reads the memory before the copy, and a source buffer reused
 * before its copy's event completed is copied with what overwrote it.
 * With tests/gpu_mock/host_launch.c it runs the GPU half of pardo (the executor's device path, SyncedMemory's
 * heads, the ops/cuda/ glue, pardo train --device cuda) on a machine without a GPU. Thread-safe as device.h
 * promises (the streams' queues under one mutex). */
#include "core/device.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool pardo_device_compiled(void) { return true; }

/* Tells a test that it runs on the stand-in (tests/check_device_stream.c declares it weak: NULL with a real
 * device), where work queued on a copy stream stays pending until something waits for it. */
bool pardo_gpu_mock(void);
bool pardo_gpu_mock(void) { return true; }

#define MOCK_MAX_DEVICES 64

/* PARDO_MOCK_DEVICE_COUNT, read at every call so that a test may change it. */
int pardo_device_count(void) {
    const char *s = getenv("PARDO_MOCK_DEVICE_COUNT");
    if (!s || !*s) return 1;
    long v = strtol(s, NULL, 10);
    return v < 1 ? 1 : v > MOCK_MAX_DEVICES ? MOCK_MAX_DEVICES : (int)v;
}

void pardo_device_note_cpu_fallback(const char *why) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        fprintf(stderr, "pardo: running on the CPU: %s\n", why);
}

static atomic_bool in_use;

bool pardo_device_in_use(void) { return atomic_load(&in_use); }

static _Thread_local int current_device;

int pardo_device_set(int dev, pardo_status *st) {
    int n = pardo_device_count();
    if (dev < 0 || dev >= n)
        return pardo_errorf(st, PARDO_EINVAL, "the host stand-in has devices 0..%d (PARDO_MOCK_DEVICE_COUNT), not %d",
                            n - 1, dev);
    current_device = dev;
    atomic_store(&in_use, true);
    return PARDO_OK;
}

int pardo_device_get(int *dev, pardo_status *st) {
    (void)st;
    *dev = current_device;
    return PARDO_OK;
}

/* Each "device" block starts with a header holding its size, so the bytes in use can be counted against the
 * cap that PARDO_MOCK_DEVICE_BYTES sets (read at every allocation, so a test may change it): past it an
 * allocation fails with PARDO_ENOMEM as cudaMalloc's cudaErrorMemoryAllocation does (device_cache's retry). */
#define MOCK_HEADER 64 /* bytes: keeps the memory handed out 64-byte aligned as malloc's is 16 */

static atomic_size_t mock_bytes_in_use;

static size_t mock_cap(void) {
    const char *s = getenv("PARDO_MOCK_DEVICE_BYTES");
    if (!s || !*s) return SIZE_MAX;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    return end && *end == '\0' ? (size_t)v : SIZE_MAX;
}

int pardo_device_malloc(void **out, size_t nbytes, pardo_status *st) {
    size_t n = nbytes ? nbytes : 1;
    *out = NULL;
    size_t used = atomic_fetch_add(&mock_bytes_in_use, n) + n;
    if (used > mock_cap() || n > SIZE_MAX - MOCK_HEADER) {
        atomic_fetch_sub(&mock_bytes_in_use, n);
        return pardo_errorf(st, PARDO_ENOMEM, "out of device memory for %zu bytes (the stand-in's cap)", n);
    }
    unsigned char *p = NULL;
    if (posix_memalign((void **)&p, MOCK_HEADER, MOCK_HEADER + n) != 0) {
        atomic_fetch_sub(&mock_bytes_in_use, n);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory for %zu bytes of device memory", n);
    }
    memcpy(p, &n, sizeof n);
    *out = p + MOCK_HEADER;
    memset(*out, 0xA5, n); /* not zeros: what a kernel does not write stays visibly wrong */
    atomic_store(&in_use, true);
    return PARDO_OK;
}

void pardo_device_free(void *p) {
    if (!p) return;
    unsigned char *base = (unsigned char *)p - MOCK_HEADER;
    size_t n;
    memcpy(&n, base, sizeof n);
    atomic_fetch_sub(&mock_bytes_in_use, n);
    free(base);
}

int pardo_device_malloc_host(void **out, size_t nbytes, pardo_status *st) {
    size_t n = nbytes ? nbytes : 1;
    if (!(*out = malloc(n)))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory for %zu bytes of host memory", n);
    return PARDO_OK;
}

void pardo_device_free_host(void *p) { free(p); }

/* ---- streams and events ---- */

/* An asynchronous copy queued on a stream that runs its work only when waited for. */
typedef struct mock_op {
    void *dst;
    const void *src;
    size_t n; // bytes
    struct mock_op *next;
} mock_op;

typedef struct mock_stream {
    int device;
    bool eager;               // runs its work at once (the compute streams)
    uint64_t queued;          // copies queued on it so far
    uint64_t done;            // of those, run
    mock_op *head, *tail;     // queued, not yet run, oldest first
    struct mock_stream *next; // streams of one's own, for pardo_device_sync
} mock_stream;

typedef struct mock_event {
    mock_stream *stream; // where it was last recorded; NULL: never (complete)
    uint64_t seq;        // complete once stream->done reaches it
} mock_event;

static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static mock_stream compute_streams[MOCK_MAX_DEVICES], copy_streams[MOCK_MAX_DEVICES];
static mock_stream *own_streams; // made by pardo_device_stream_create

/* Runs s's queued copies until `seq` of them have run (mock_lock held). */
static void run_until(mock_stream *s, uint64_t seq) {
    while (s->done < seq && s->head) {
        mock_op *op = s->head;
        if (!(s->head = op->next)) s->tail = NULL;
        memcpy(op->dst, op->src, op->n);
        free(op);
        s->done++;
    }
}

static mock_stream *device_stream(mock_stream *slots, int dev, bool eager) {
    mock_stream *s = &slots[dev];
    s->device = dev;
    s->eager = eager;
    return s;
}

/* s, or the current device's compute stream for NULL. */
static mock_stream *stream_of(pardo_stream s) {
    return s ? (mock_stream *)s : device_stream(compute_streams, current_device, true);
}

static int check_dev(int dev, pardo_status *st) {
    if (dev >= 0 && dev < pardo_device_count()) return PARDO_OK;
    return pardo_errorf(st, PARDO_EINVAL, "no CUDA device %d (there are %d)", dev, pardo_device_count());
}

int pardo_device_compute_stream(int dev, pardo_stream *out, pardo_status *st) {
    *out = NULL;
    if (check_dev(dev, st) != PARDO_OK) return st->code;
    pthread_mutex_lock(&mock_lock);
    *out = device_stream(compute_streams, dev, true);
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}

int pardo_device_copy_stream(int dev, pardo_stream *out, pardo_status *st) {
    *out = NULL;
    if (check_dev(dev, st) != PARDO_OK) return st->code;
    pthread_mutex_lock(&mock_lock);
    *out = device_stream(copy_streams, dev, false);
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}

pardo_stream pardo_device_stream_current(void) {
    pthread_mutex_lock(&mock_lock);
    mock_stream *s = stream_of(NULL);
    pthread_mutex_unlock(&mock_lock);
    return s;
}

/* The synchronous copies run on the compute stream, which never has work queued: at once. */
int pardo_device_copy_h2d(void *dst, const void *src, size_t nbytes, pardo_status *st) {
    (void)st;
    memcpy(dst, src, nbytes);
    return PARDO_OK;
}

int pardo_device_copy_d2h(void *dst, const void *src, size_t nbytes, pardo_status *st) {
    (void)st;
    memcpy(dst, src, nbytes);
    return PARDO_OK;
}

int pardo_device_copy_d2d(void *dst, const void *src, size_t nbytes, pardo_status *st) {
    (void)st;
    memcpy(dst, src, nbytes);
    return PARDO_OK;
}

int pardo_device_copy_h2d_async(void *dst, const void *src, size_t nbytes, pardo_stream stream, pardo_status *st) {
    pthread_mutex_lock(&mock_lock);
    mock_stream *s = stream_of(stream);
    if (s->eager) {
        s->queued++;
        s->done++;
        memcpy(dst, src, nbytes);
        pthread_mutex_unlock(&mock_lock);
        return PARDO_OK;
    }
    mock_op *op = malloc(sizeof(*op));
    if (!op) {
        pthread_mutex_unlock(&mock_lock);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory queueing a copy of %zu bytes", nbytes);
    }
    *op = (mock_op){.dst = dst, .src = src, .n = nbytes};
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->queued++;
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}

int pardo_device_memset_zero(void *dst, size_t nbytes, pardo_status *st) {
    (void)st;
    memset(dst, 0, nbytes);
    return PARDO_OK;
}

int pardo_device_stream_create(pardo_stream *out, pardo_status *st) {
    mock_stream *s = calloc(1, sizeof(*s));
    *out = s;
    if (!s) return pardo_errorf(st, PARDO_ENOMEM, "out of memory for a stream");
    pthread_mutex_lock(&mock_lock);
    s->device = current_device;
    s->next = own_streams;
    own_streams = s;
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}

int pardo_device_stream_sync(pardo_stream stream, pardo_status *st) {
    (void)st;
    pthread_mutex_lock(&mock_lock);
    mock_stream *s = stream_of(stream);
    run_until(s, s->queued);
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}

void pardo_device_stream_destroy(pardo_stream stream) {
    if (!stream) return;
    mock_stream *s = stream;
    pthread_mutex_lock(&mock_lock);
    run_until(s, s->queued); /* as cudaStreamDestroy: its work completes */
    mock_stream **pp = &own_streams;
    while (*pp && *pp != s) pp = &(*pp)->next;
    if (*pp) *pp = s->next;
    pthread_mutex_unlock(&mock_lock);
    free(s);
}

int pardo_device_event_create(pardo_event *out, pardo_status *st) {
    if (!(*out = calloc(1, sizeof(mock_event)))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory for an event");
    return PARDO_OK;
}

int pardo_device_event_record(pardo_event ev, pardo_stream stream, pardo_status *st) {
    (void)st;
    mock_event *e = ev;
    pthread_mutex_lock(&mock_lock);
    e->stream = stream_of(stream);
    e->seq = e->stream->queued;
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}

int pardo_device_event_query(pardo_event ev, bool *done, pardo_status *st) {
    (void)st;
    const mock_event *e = ev;
    pthread_mutex_lock(&mock_lock);
    *done = !e->stream || e->stream->done >= e->seq;
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}

int pardo_device_event_sync(pardo_event ev, pardo_status *st) {
    (void)st;
    mock_event *e = ev;
    pthread_mutex_lock(&mock_lock);
    if (e->stream) run_until(e->stream, e->seq);
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}

/* Whatever stream waits, the event's work runs now: the stand-in runs queued work when something waits for it,
 * and the waiting stream's later work then follows it. */
int pardo_device_stream_wait_event(pardo_stream s, pardo_event ev, pardo_status *st) {
    (void)s;
    return pardo_device_event_sync(ev, st);
}

void pardo_device_event_destroy(pardo_event ev) { free(ev); }

int pardo_device_sync(pardo_status *st) {
    (void)st;
    pthread_mutex_lock(&mock_lock);
    mock_stream *c = &copy_streams[current_device];
    run_until(c, c->queued);
    for (mock_stream *s = own_streams; s; s = s->next)
        if (s->device == current_device) run_until(s, s->queued);
    pthread_mutex_unlock(&mock_lock);
    return PARDO_OK;
}
