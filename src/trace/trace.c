/* trace.c - per-thread event buffers, written once as Chrome trace JSON
 * (see trace.h; the format is README.md's "Traces").
 *
 * Each recording thread owns a trace_buf: a list of chunks (mmap'd with
 * their pages populated, so that appending never page-faults) of
 * variable-size records - rec_op, rec_flow, rec_part, rec_stage, rec_user,
 * rec_mem - appended by that thread alone, without locks. A thread finds its
 * buffer through thread-local storage tagged with the trace's generation; a
 * thread whose tag is stale (its first event of this trace) makes a buffer
 * and links it into the global list under reg_mu, once per trace. Records
 * hold raw data: tick clock values, op pointers, and shapes, which an op's
 * record points at in an earlier record of the same op on the same thread
 * when they did not change (48 bytes an op in the steady state). The memory
 * counter is recorded only when it changed. All formatting happens at write
 * time, where an op's name and args are formatted once per shapes block. */
#include "trace/trace.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "io/file_io.h"
#include "exec/thread_pool.h"
#include "cli/version.h"

#define NAME_MAX_LEN 48  // bytes of a thread name, NUL included
#define STACK_MAX 32     // open pardo_trace_begin spans per thread
#define USER_ARGS_MAX 16 // args kept per user span
#define CHUNK_BYTES (128 * 1024)
#define DEFAULT_MAX_MB 16 // event records a trace keeps (about 9 times as much JSON): $PARDO_TRACE_MAX_MB
#define SHAPE_CACHE 256 // ops whose last shapes a thread remembers (a power of two)
#define MAX_IO 128      // tensors of one op record (inputs and outputs)

enum { REC_OP = 1, REC_FLOW, REC_PART, REC_STAGE, REC_USER, REC_MEM };
enum { F_ERROR = 1, F_LONG = 2 }; /* rec_op flags: an error string follows; 64-bit times follow */

typedef struct rec_hdr {
    uint8_t kind;
    uint8_t flags;
    uint16_t pad;
    uint32_t size; // bytes of the whole record, a multiple of 8
} rec_hdr;

/* One tensor of a shapes block: ndim dims follow. */
typedef struct rec_tensor {
    int8_t dtype; // pardo_dtype, or -1 when absent
    int8_t ndim;  // dims that follow (a tensor_array: its first part's), -1: none known
    int16_t pad;
    int32_t parts;  // tensor_array: its parts; -1: a plain tensor
    int64_t nbytes; // bytes of data (a tensor_array: of all its parts)
    int64_t dims[];
} rec_tensor;

/* The inputs and outputs of an op run: n_in + max(n_out, 0) rec_tensors follow. */
typedef struct rec_shapes {
    int16_t n_in, n_out; // n_out -1: the op failed (no outputs)
    uint32_t size;       // bytes of the block, this header included
} rec_shapes;

/* An op run: 48 bytes in the steady state, where its shapes are those of
 * the op's last run on this thread and `shapes` points there. */
typedef struct rec_op {
    rec_hdr h;
    const pardo_op *op;       // borrowed from the program
    int64_t t0;               // ns
    uint32_t dur, queued;     // ns; with F_LONG both saturate and int64 copies follow the record head
    const rec_shapes *shapes; // in this record (after the head) or in an earlier one of this thread
    int32_t block, index;
} rec_op;

/* Flows a parallel_do started: attached to the op's event at write time. */
typedef struct rec_flow {
    rec_hdr h;
    const pardo_op *op;
    uint64_t first; // flow ids first .. first + n - 1
    int64_t ts;     // ns
    int32_t n, pad;
} rec_flow;

typedef struct rec_part {
    rec_hdr h;
    const pardo_op *pd;
    int32_t op_block, op_index, block, part, parts, err_len;
    int64_t rows;
    uint64_t flow;
    int64_t t0, t1;
} rec_part;

typedef struct rec_stage {
    rec_hdr h;
    int32_t block, first, end, chains;
    int64_t t0, t1;
} rec_stage;

/* name, cat, then n_args (key, value) pairs as NUL-terminated strings follow;
 * a number's value is stored as a string already ("%.17g"). */
typedef struct rec_user {
    rec_hdr h;
    int64_t t0, t1;
    int32_t n_args;
    uint32_t str_mask; // bit i: arg i is a string (else a number)
} rec_user;

/* The tensor memory counter, when it changed since this thread's last sample. */
typedef struct rec_mem {
    rec_hdr h;
    int64_t t;     // ns
    int64_t bytes; // pardo_tensor_bytes_in_use
} rec_mem;

typedef struct chunk {
    struct chunk *next;
    size_t used, cap; // bytes of data
    size_t map;       // bytes mapped, this header included
    _Alignas(8) unsigned char data[];
} chunk;

typedef struct trace_buf {
    struct trace_buf *next; // global list, in registration order
    int order;              // registration order in this trace, from 0
    long tid;               // kernel thread id
    bool main;              // the thread that started the trace
    char name[NAME_MAX_LEN];
    chunk *head, *tail;
    uint32_t flows; // flow ids made so far by this thread
    int64_t mem;    // the last memory sample this thread recorded, -1: none
} trace_buf;

atomic_bool pardo_trace_enabled;
atomic_bool pardo_trace_tsc;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER; // guards bufs, n_bufs, spare
static trace_buf *bufs, **bufs_tail = &bufs;
static struct chunk *spare; // first chunks made at start for the threads that register later
static int n_bufs;
static atomic_uint generation; // bumped by each start and reset; thread-local buffers of another generation are stale
static int64_t start_ns;       // the trace's t = 0, CLOCK_MONOTONIC ns
static int64_t start_tick;     // pardo_trace_ticks at start_ns
static double tick_ns = 1.0;   // ns per tick, calibrated when the trace is written
static atomic_long n_created, n_dropped;
/* The trace's memory limit: chunks (mapped bytes) are made while they stay within max_bytes; the first that
 * would not sets full, from then on every event is dropped (a clean cut), and full_tick is when. */
static size_t max_bytes = (size_t)DEFAULT_MAX_MB << 20;
static atomic_size_t mapped_bytes;
static atomic_bool full;
static atomic_llong full_tick;

typedef struct shape_slot {
    const pardo_op *op;
    const rec_shapes *last; // the op's last shapes block on this thread
} shape_slot;

static _Thread_local struct {
    trace_buf *buf;
    unsigned gen;
    char name[NAME_MAX_LEN];
    int depth; // open begin spans
    int64_t open_t0[STACK_MAX];
    const char *open_name[STACK_MAX], *open_cat[STACK_MAX];
    shape_slot shapes[SHAPE_CACHE];
} tls;

int64_t pardo_trace_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

long pardo_trace_buffers_created(void) { return atomic_load(&n_created); }
long pardo_trace_dropped(void) { return atomic_load(&n_dropped); }

static void copy_name(char *dst, const char *src) { snprintf(dst, NAME_MAX_LEN, "%s", src ? src : ""); }

void pardo_trace_set_thread_name(const char *name) {
    copy_name(tls.name, name);
    if (tls.buf && tls.gen == atomic_load_explicit(&generation, memory_order_relaxed))
        copy_name(tls.buf->name, tls.name);
}

/* A chunk for at least `need` bytes, its pages populated at once: one
 * mapping call instead of a page fault every 4 KiB on the hot path (which
 * cost about 2 us each on the machine this was measured on). NULL when
 * out of memory or past the limit, which makes the trace full; a first
 * chunk made at start for a pool thread (first) is only made within half
 * the limit, and one refused does not make the trace full. */
static chunk *chunk_new(size_t need, bool first) {
    size_t cap = need > CHUNK_BYTES ? need : CHUNK_BYTES;
    size_t map = (sizeof(chunk) + cap + 4095) & ~(size_t)4095;
    if (atomic_fetch_add(&mapped_bytes, map) + map > (first ? max_bytes / 2 : max_bytes)) {
        atomic_fetch_sub(&mapped_bytes, map);
        if (!first && !atomic_exchange(&full, true)) atomic_store(&full_tick, pardo_trace_ticks());
        return NULL;
    }
    void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
        atomic_fetch_sub(&mapped_bytes, map);
        return NULL;
    }
    chunk *c = p;
    c->next = NULL;
    c->used = 0;
    c->cap = map - sizeof(chunk);
    c->map = map;
    return c;
}

static void chunk_free(chunk *c) {
    atomic_fetch_sub(&mapped_bytes, c->map);
    munmap(c, c->map);
}

/* The calling thread's buffer in this trace, made on first use (its first
 * chunk one of those made at start, while there are some); NULL when out
 * of memory. */
static trace_buf *my_buf(void) {
    unsigned g = atomic_load_explicit(&generation, memory_order_relaxed);
    if (tls.buf && tls.gen == g) return tls.buf;
    trace_buf *b = calloc(1, sizeof(*b));
    if (!b) return NULL;
    pthread_mutex_lock(&reg_mu);
    chunk *c = spare;
    if (c) spare = c->next;
    pthread_mutex_unlock(&reg_mu);
    if (c) c->next = NULL;
    else if (!(c = chunk_new(0, false))) {
        free(b);
        return NULL;
    }
    b->head = b->tail = c;
    b->tid = (long)syscall(SYS_gettid);
    b->mem = -1;
    copy_name(b->name, tls.name);
    atomic_fetch_add(&n_created, 1);
    pthread_mutex_lock(&reg_mu);
    b->order = n_bufs++;
    *bufs_tail = b;
    bufs_tail = &b->next;
    pthread_mutex_unlock(&reg_mu);
    tls.buf = b;
    tls.gen = g;
    tls.depth = 0;
    memset(tls.shapes, 0, sizeof tls.shapes);
    return b;
}

/* n bytes (rounded up to 8) at the end of the calling thread's buffer b;
 * NULL (the event dropped) when out of memory or once the trace is full. */
static void *buf_alloc(trace_buf *b, size_t n) {
    n = (n + 7) & ~(size_t)7;
    if (atomic_load_explicit(&full, memory_order_relaxed)) {
        atomic_fetch_add(&n_dropped, 1);
        return NULL;
    }
    chunk *c = b->tail;
    if (c->cap - c->used < n) {
        chunk *d = chunk_new(n, false);
        if (!d) {
            atomic_fetch_add(&n_dropped, 1);
            return NULL;
        }
        c->next = d;
        b->tail = c = d;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

/* As buf_alloc, for the calling thread's buffer (made if needed). */
static void *my_alloc(size_t n) {
    trace_buf *b = my_buf();
    if (!b) {
        atomic_fetch_add(&n_dropped, 1);
        return NULL;
    }
    return buf_alloc(b, n);
}

/* Samples the tensor memory counter at t into b when it changed. */
static void sample_mem(trace_buf *b, int64_t t) {
    int64_t bytes = pardo_tensor_bytes_in_use();
    if (bytes == b->mem) return;
    rec_mem *m = buf_alloc(b, sizeof(rec_mem));
    if (!m) return;
    m->h = (rec_hdr){.kind = REC_MEM, .size = sizeof(rec_mem)};
    m->t = t;
    m->bytes = bytes;
    b->mem = bytes;
}

/* True when the TSC may be the tick clock: x86-64, the kernel keeps time
 * with it (it checked that it is steady and synchronised across cores), and
 * $PARDO_TRACE_CLOCK does not ask for "monotonic". */
static bool tsc_usable(void) {
#if defined(__x86_64__)
    const char *env = getenv("PARDO_TRACE_CLOCK");
    if (env && strcmp(env, "monotonic") == 0) return false;
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    char src[32] = "";
    if (f) {
        if (!fgets(src, sizeof src, f)) src[0] = '\0';
        fclose(f);
    }
    return strncmp(src, "tsc", 3) == 0 && (src[3] == '\n' || src[3] == '\0');
#else
    return false;
#endif
}

/* Fixes tick_ns from the ticks and ns elapsed since the start (the tick clock
 * against CLOCK_MONOTONIC). */
static void calibrate(void) {
    if (!atomic_load(&pardo_trace_tsc)) {
        tick_ns = 1.0;
        return;
    }
    int64_t t = pardo_trace_ticks(), ns = pardo_trace_now_ns();
    if (t > start_tick && ns > start_ns) tick_ns = (double)(ns - start_ns) / (double)(t - start_tick);
}

/* A tick as CLOCK_MONOTONIC ns, and a tick count as ns. */
static int64_t ns_at(int64_t tick) { return start_ns + llround((double)(tick - start_tick) * tick_ns); }
static int64_t ns_of(int64_t ticks) { return llround((double)ticks * tick_ns); }

/* $PARDO_TRACE_MAX_MB in bytes (DEFAULT_MAX_MB when unset); PARDO_EINVAL when it is not a whole number >= 1. */
static int limit_from_env(size_t *bytes, pardo_status *st) {
    const char *v = getenv("PARDO_TRACE_MAX_MB");
    *bytes = (size_t)DEFAULT_MAX_MB << 20;
    if (!v || !*v) return PARDO_OK;
    char *end;
    errno = 0;
    long long mb = strtoll(v, &end, 10);
    if (*end || errno || mb < 1 || mb > (1LL << 30))
        return pardo_errorf(st, PARDO_EINVAL, "trace: PARDO_TRACE_MAX_MB is '%s', expected megabytes of event records, "
                            "a whole number from 1 to 1073741824 (default %d)", v, DEFAULT_MAX_MB);
    *bytes = (size_t)mb << 20;
    return PARDO_OK;
}

int pardo_trace_start(pardo_status *st) {
    if (atomic_load(&pardo_trace_enabled)) return pardo_errorf(st, PARDO_EINVAL, "trace: a trace is already recording");
    size_t limit;
    if (limit_from_env(&limit, st) != PARDO_OK) return st->code;
    pardo_trace_reset();
    max_bytes = limit;
    atomic_store(&pardo_trace_tsc, tsc_usable());
    if (!tls.name[0]) copy_name(tls.name, "main");
    /* memory first (populating a chunk takes a while): the controlling
     * thread's buffer ("main" in the file), and a first chunk for each pool
     * worker, so that a thread's first event does not wait for one */
    trace_buf *b = my_buf();
    for (int i = 1; i < pardo_thread_pool_size() && i <= 64; i++) { /* more threads make theirs when they start */
        chunk *c = chunk_new(0, true);
        if (!c) break;
        pthread_mutex_lock(&reg_mu);
        c->next = spare;
        spare = c;
        pthread_mutex_unlock(&reg_mu);
    }
    start_ns = pardo_trace_now_ns();
    start_tick = atomic_load(&pardo_trace_tsc) ? pardo_trace_ticks() : start_ns;
    tick_ns = 1.0;
    if (b) {
        b->main = true;
        sample_mem(b, start_tick);
    }
    atomic_store_explicit(&pardo_trace_enabled, true, memory_order_release);
    return PARDO_OK;
}

void pardo_trace_stop(void) {
    if (!atomic_load(&pardo_trace_enabled)) return;
    atomic_store_explicit(&pardo_trace_enabled, false, memory_order_release);
    calibrate();
}

void pardo_trace_reset(void) {
    PARDO_ASSERT(!atomic_load(&pardo_trace_enabled));
    pthread_mutex_lock(&reg_mu);
    trace_buf *b = bufs;
    chunk *sp = spare;
    bufs = NULL;
    bufs_tail = &bufs;
    n_bufs = 0;
    spare = NULL;
    pthread_mutex_unlock(&reg_mu);
    while (sp) {
        chunk *next = sp->next;
        chunk_free(sp);
        sp = next;
    }
    while (b) {
        trace_buf *next = b->next;
        for (chunk *c = b->head; c;) {
            chunk *cn = c->next;
            chunk_free(c);
            c = cn;
        }
        free(b);
        b = next;
    }
    /* every thread's buffer is now stale: the next trace's generation differs */
    atomic_fetch_add(&generation, 1);
    atomic_store(&full, false);
    atomic_store(&n_dropped, 0);
}

size_t pardo_trace_max_bytes(void) { return max_bytes; }

double pardo_trace_full_at_s(void) {
    if (!atomic_load(&full)) return -1;
    return (double)(ns_at(atomic_load(&full_tick)) - start_ns) / 1e9;
}

/* ---- recording ---- */

static size_t tensor_rec_size(int ndim) { return sizeof(rec_tensor) + (size_t)(ndim > 0 ? ndim : 0) * sizeof(int64_t); }

/* Writes t at p; returns the bytes used. */
static size_t put_tensor(unsigned char *p, const pardo_tensor *t) {
    rec_tensor *r = (rec_tensor *)p;
    r->pad = 0;
    if (!t) {
        r->dtype = -1;
        r->ndim = -1;
        r->parts = -1;
        r->nbytes = 0;
        return tensor_rec_size(0);
    }
    r->dtype = (int8_t)t->dtype;
    const pardo_tensor *shape_of = t;
    if (t->is_array) {
        r->parts = t->n_parts;
        r->nbytes = 0;
        shape_of = NULL;
        for (int i = 0; i < t->n_parts; i++) {
            if (!t->parts[i]) continue;
            r->nbytes += (int64_t)t->parts[i]->nbytes;
            if (!shape_of) shape_of = t->parts[i];
        }
    } else {
        r->parts = -1;
        r->nbytes = (int64_t)t->nbytes;
    }
    r->ndim = shape_of ? (int8_t)shape_of->ndim : -1;
    for (int d = 0; d < r->ndim; d++) r->dims[d] = shape_of->shape[d];
    return tensor_rec_size(r->ndim);
}

/* True when r describes t as put_tensor would. */
static bool same_tensor(const rec_tensor *r, const pardo_tensor *t) {
    if (!t) return r->dtype < 0;
    if (r->dtype != (int8_t)t->dtype) return false;
    const pardo_tensor *shape_of = t;
    if (t->is_array) {
        if (r->parts != t->n_parts) return false;
        int64_t nbytes = 0;
        shape_of = NULL;
        for (int i = 0; i < t->n_parts; i++) {
            if (!t->parts[i]) continue;
            nbytes += (int64_t)t->parts[i]->nbytes;
            if (!shape_of) shape_of = t->parts[i];
        }
        if (r->nbytes != nbytes) return false;
    } else if (r->parts != -1 || r->nbytes != (int64_t)t->nbytes) {
        return false;
    }
    if (r->ndim != (shape_of ? shape_of->ndim : -1)) return false;
    for (int d = 0; d < r->ndim; d++)
        if (r->dims[d] != shape_of->shape[d]) return false;
    return true;
}

/* True when sh describes inputs in and outputs out (NULL: failed). */
static bool same_shapes(const rec_shapes *sh, pardo_tensor *const *in, int n_in, pardo_tensor *const *out, int n_out) {
    if (sh->n_in != n_in || sh->n_out != n_out) return false;
    const unsigned char *p = (const unsigned char *)sh + sizeof(rec_shapes);
    for (int k = 0; k < n_in + (n_out > 0 ? n_out : 0); k++) {
        const rec_tensor *r = (const rec_tensor *)p;
        if (!same_tensor(r, k < n_in ? in[k] : out[k - n_in])) return false;
        p += tensor_rec_size(r->ndim);
    }
    return true;
}

static uint32_t clamp_u32(int64_t ns) { return ns < 0 ? 0 : ns > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)ns; }

void pardo_trace_record_op(const pardo_trace_op *r) {
    if (!pardo_trace_on()) return;
    trace_buf *b = my_buf();
    if (!b) {
        atomic_fetch_add(&n_dropped, 1);
        return;
    }
    sample_mem(b, r->t1); /* before the op's record: the writer reads samples in order */
    /* the shapes: most runs repeat those of the op's last run on this thread */
    int n_in = r->n_in < MAX_IO ? r->n_in : MAX_IO;
    int n_out = r->out ? (r->n_out < MAX_IO - n_in ? r->n_out : MAX_IO - n_in) : -1;
    shape_slot *slot = &tls.shapes[((uintptr_t)r->op >> 4) & (SHAPE_CACHE - 1)];
    bool same = slot->op == r->op && slot->last && same_shapes(slot->last, r->in, n_in, r->out, n_out);
    size_t sz = same ? 0
                     : sizeof(rec_shapes) + (size_t)(n_in + (n_out > 0 ? n_out : 0)) *
                                                (sizeof(rec_tensor) + PARDO_MAX_DIMS * sizeof(int64_t));

    int64_t dur = r->t1 - r->t0, queued = r->t0 - r->ready;
    if (queued < 0) queued = 0;
    bool longer = dur > (int64_t)UINT32_MAX || queued > (int64_t)UINT32_MAX;
    size_t err_len = r->error ? strlen(r->error) : 0;
    size_t head = sizeof(rec_op) + (longer ? 2 * sizeof(int64_t) : 0);
    size_t total = head + sz + (err_len ? err_len + 1 : 0);
    unsigned char *p = buf_alloc(b, total);
    if (!p) return;
    if (!same) { /* written in place, at most sz bytes; the rest given back below */
        rec_shapes *sh = (rec_shapes *)(p + head);
        sh->n_in = (int16_t)n_in;
        sh->n_out = (int16_t)n_out;
        size_t used = sizeof(rec_shapes);
        for (int k = 0; k < n_in; k++) used += put_tensor((unsigned char *)sh + used, r->in[k]);
        for (int k = 0; k < n_out; k++) used += put_tensor((unsigned char *)sh + used, r->out[k]);
        sh->size = (uint32_t)used;
        size_t alloc = (total + 7) & ~(size_t)7;
        sz = used;
        total = head + sz + (err_len ? err_len + 1 : 0);
        b->tail->used -= alloc - ((total + 7) & ~(size_t)7);
        slot->op = r->op;
        slot->last = sh;
    }
    rec_op *o = (rec_op *)p;
    o->h = (rec_hdr){.kind = REC_OP,
                     .flags = (uint8_t)((err_len ? F_ERROR : 0) | (longer ? F_LONG : 0)),
                     .size = (uint32_t)((total + 7) & ~(size_t)7)};
    o->op = r->op;
    o->t0 = r->t0;
    o->dur = clamp_u32(dur);
    o->queued = clamp_u32(queued);
    o->block = r->block;
    o->index = r->index;
    if (longer) {
        int64_t *ext = (int64_t *)(p + sizeof(rec_op));
        ext[0] = dur;
        ext[1] = queued;
    }
    o->shapes = slot->last;
    if (err_len) memcpy(p + head + sz, r->error, err_len + 1);
}

uint64_t pardo_trace_flow_start(const pardo_op *op, int n) {
    if (!pardo_trace_on() || n <= 0) return 0;
    trace_buf *b = my_buf();
    if (!b) return 0;
    rec_flow *f = buf_alloc(b, sizeof(rec_flow));
    if (!f) return 0;
    /* ids unique in the trace without a shared counter: the thread's order
     * in the high bits, its own count in the low ones */
    uint64_t first = ((uint64_t)(b->order + 1) << 32) | b->flows;
    b->flows += (uint32_t)n;
    f->h = (rec_hdr){.kind = REC_FLOW, .size = sizeof(rec_flow)};
    f->op = op;
    f->first = first;
    f->ts = pardo_trace_ticks();
    f->n = n;
    f->pad = 0;
    return first;
}

void pardo_trace_record_part(const pardo_trace_part *r) {
    if (!pardo_trace_on()) return;
    size_t err_len = r->error ? strlen(r->error) : 0;
    unsigned char *p = my_alloc(sizeof(rec_part) + err_len + 1);
    if (!p) return;
    rec_part *o = (rec_part *)p;
    o->h = (rec_hdr){.kind = REC_PART, .size = (uint32_t)((sizeof(rec_part) + err_len + 1 + 7) & ~(size_t)7)};
    o->pd = r->parallel_do;
    o->op_block = r->op_block;
    o->op_index = r->op_index;
    o->block = r->block;
    o->part = r->part;
    o->parts = r->parts;
    o->rows = r->rows;
    o->flow = r->flow;
    o->t0 = r->t0;
    o->t1 = r->t1;
    o->err_len = (int32_t)err_len;
    memcpy(p + sizeof(rec_part), r->error ? r->error : "", err_len + 1);
}

void pardo_trace_record_stage(int block, int first, int end, int chains, int64_t t0, int64_t t1) {
    if (!pardo_trace_on()) return;
    rec_stage *o = my_alloc(sizeof(rec_stage));
    if (!o) return;
    o->h = (rec_hdr){.kind = REC_STAGE, .size = sizeof(rec_stage)};
    o->block = block;
    o->first = first;
    o->end = end;
    o->chains = chains;
    o->t0 = t0;
    o->t1 = t1;
}

void pardo_trace_complete(const char *name, const char *cat, int64_t t0_ns, int64_t t1_ns, const pardo_trace_arg *args,
                          int n_args) {
    if (!pardo_trace_on()) return;
    if (!name) name = "span";
    if (!cat) cat = "user";
    if (n_args < 0 || !args) n_args = 0;
    if (n_args > USER_ARGS_MAX) n_args = USER_ARGS_MAX;
    char nums[USER_ARGS_MAX][32];
    size_t need = sizeof(rec_user) + strlen(name) + 1 + strlen(cat) + 1;
    for (int i = 0; i < n_args; i++) {
        need += strlen(args[i].key ? args[i].key : "") + 1;
        if (args[i].str) {
            need += strlen(args[i].str) + 1;
        } else {
            snprintf(nums[i], sizeof nums[i], "%.17g", args[i].num);
            need += strlen(nums[i]) + 1;
        }
    }
    unsigned char *p = my_alloc(need);
    if (!p) return;
    rec_user *o = (rec_user *)p;
    o->h = (rec_hdr){.kind = REC_USER, .size = (uint32_t)((need + 7) & ~(size_t)7)};
    o->t0 = t0_ns;
    o->t1 = t1_ns;
    o->n_args = n_args;
    o->str_mask = 0;
    char *s = (char *)(p + sizeof(rec_user));
    s = stpcpy(s, name) + 1;
    s = stpcpy(s, cat) + 1;
    for (int i = 0; i < n_args; i++) {
        s = stpcpy(s, args[i].key ? args[i].key : "") + 1;
        if (args[i].str) o->str_mask |= 1u << i;
        s = stpcpy(s, args[i].str ? args[i].str : nums[i]) + 1;
    }
}

void pardo_trace_begin(const char *name, const char *cat) {
    if (!pardo_trace_on()) return;
    if (!my_buf()) return;
    if (tls.depth < STACK_MAX) {
        tls.open_t0[tls.depth] = pardo_trace_now_ns();
        tls.open_name[tls.depth] = name;
        tls.open_cat[tls.depth] = cat;
    }
    tls.depth++;
}

void pardo_trace_end(const pardo_trace_arg *args, int n_args) {
    if (!pardo_trace_on() || tls.depth == 0 || tls.gen != atomic_load_explicit(&generation, memory_order_relaxed))
        return;
    int d = --tls.depth;
    if (d < STACK_MAX)
        pardo_trace_complete(tls.open_name[d], tls.open_cat[d], tls.open_t0[d], pardo_trace_now_ns(), args, n_args);
}

/* ---- writing ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static bool sb_reserve(sbuf *b, size_t n) {
    if (b->oom) return false;
    if (b->len + n + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_put(b, tmp, (size_t)n);
        return;
    }
    if (!sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A decimal integer (the writer's hot path: no printf). */
static void sb_int(sbuf *b, long long v) {
    char tmp[24], *e = tmp + sizeof tmp, *q = e;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do *--q = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0) *--q = '-';
    sb_put(b, q, (size_t)(e - q));
}

/* ns as microseconds with three decimals, exactly ("%.3f" of ns / 1e3). */
static void sb_ns_as_us(sbuf *b, int64_t ns) {
    if (ns < 0) {
        sb_put(b, "-", 1);
        ns = -ns;
    }
    sb_int(b, ns / 1000);
    char frac[4] = {'.', (char)('0' + ns % 1000 / 100), (char)('0' + ns % 100 / 10), (char)('0' + ns % 10)};
    sb_put(b, frac, 4);
}

/* s as a JSON string, quotes included (NULL: null). */
static void sb_str(sbuf *b, const char *s) {
    if (!s) {
        sb_puts(b, "null");
        return;
    }
    sb_put(b, "\"", 1);
    const char *run = s;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c >= 0x20 && *c != '"' && *c != '\\') continue;
        sb_put(b, run, (size_t)((const char *)c - run));
        switch (*c) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\t': sb_puts(b, "\\t"); break;
        case '\r': sb_puts(b, "\\r"); break;
        default: sb_printf(b, "\\u%04x", *c); break;
        }
        run = (const char *)c + 1;
    }
    sb_puts(b, run);
    sb_put(b, "\"", 1);
}

static const char *op_label(const pardo_op *op) { return op->name && op->name[0] ? op->name : op->type; }

/* The common head of an event:
 * {"name":..,"cat":..,"ph":..,"ts":..,["dur":..,]"pid":..,"tid":..
 * t0: CLOCK_MONOTONIC ns; dur: ns, < 0 for none. */
static void event_head(sbuf *b, const char *name, const char *cat, const char *ph, int64_t t0, int64_t dur,
                       const char *pid_tid) {
    sb_puts(b, ",\n{\"name\":");
    sb_str(b, name);
    sb_puts(b, ",\"cat\":\"");
    sb_puts(b, cat);
    sb_puts(b, "\",\"ph\":\"");
    sb_puts(b, ph);
    sb_puts(b, "\",\"ts\":");
    sb_ns_as_us(b, t0 - start_ns);
    if (dur >= 0) {
        sb_puts(b, ",\"dur\":");
        sb_ns_as_us(b, dur);
    }
    sb_puts(b, pid_tid);
}

/* Writes one tensor as {"var":..,"dtype":..,"shape":[..],"bytes":..}; returns its record size. */
static size_t write_tensor(sbuf *b, const unsigned char *p, const char *var, int64_t *nbytes) {
    const rec_tensor *t = (const rec_tensor *)p;
    if (t->dtype < 0) {
        sb_puts(b, "null");
        return tensor_rec_size(0);
    }
    sb_puts(b, "{\"var\":");
    sb_str(b, var);
    sb_puts(b, ",\"dtype\":\"");
    sb_puts(b, pardo_dtype_name((pardo_dtype)t->dtype));
    sb_puts(b, "\"");
    if (t->parts >= 0) {
        sb_puts(b, ",\"tensor_array\":");
        sb_int(b, t->parts);
    }
    sb_puts(b, ",\"shape\":");
    if (t->ndim < 0) {
        sb_puts(b, "null");
    } else {
        sb_puts(b, "[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) sb_puts(b, ",");
            sb_int(b, t->dims[d]);
        }
        sb_puts(b, "]");
    }
    sb_puts(b, ",\"bytes\":");
    sb_int(b, t->nbytes);
    sb_puts(b, "}");
    *nbytes += t->nbytes;
    return tensor_rec_size(t->ndim);
}

/* The JSON of an op event that its runs with the same shapes share: its
 * head up to "ts": and its args up to bytes_written, made once per shapes
 * block (a shapes block belongs to one op) and copied for each run. */
typedef struct frag {
    const rec_shapes *key;
    size_t head, head_len, args, args_len; // offsets and lengths in write_state.frags
} frag;

/* While writing: the flows of the parallel_do run not yet written and the
 * memory sample current at the op being written (per thread), and the
 * fragments made so far (the whole trace). */
typedef struct write_state {
    const rec_flow *flow;
    int64_t mem;
    frag *table; // open addressing on key, cap a power of two, NULL keys empty
    size_t cap, used;
    sbuf frags;
} write_state;

static size_t frag_slot(const write_state *ws, const rec_shapes *key) {
    size_t i = (size_t)(((uintptr_t)key >> 3) * 0x9E3779B97F4A7C15ull) & (ws->cap - 1);
    while (ws->table[i].key && ws->table[i].key != key) i = (i + 1) & (ws->cap - 1);
    return i;
}

/* The fragments of o's event, made on first sight; NULL when out of memory. */
static const frag *op_frag(sbuf *b, write_state *ws, const rec_op *o);

static const frag *op_frag(sbuf *b, write_state *ws, const rec_op *o) {
    if (ws->used * 2 >= ws->cap) { /* grow: rehash */
        size_t old_cap = ws->cap;
        frag *old = ws->table;
        ws->cap = old_cap ? old_cap * 2 : 256;
        if (!(ws->table = calloc(ws->cap, sizeof(*ws->table)))) {
            ws->table = old;
            ws->cap = old_cap;
            b->oom = true;
            return NULL;
        }
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].key) ws->table[frag_slot(ws, old[i].key)] = old[i];
        free(old);
    }
    size_t i = frag_slot(ws, o->shapes);
    frag *f = &ws->table[i];
    if (f->key) return f;
    const pardo_op *op = o->op;
    sbuf *fb = &ws->frags;
    f->key = o->shapes;
    ws->used++;
    f->head = fb->len;
    sb_puts(fb, ",\n{\"name\":");
    sb_str(fb, op_label(op));
    sb_puts(fb, ",\"cat\":\"op\",\"ph\":\"X\",\"ts\":");
    f->head_len = fb->len - f->head;
    f->args = fb->len;
    sb_puts(fb, ",\"args\":{\"op\":");
    sb_str(fb, op->type);
    sb_puts(fb, ",\"name\":");
    sb_str(fb, op->name ? op->name : "");
    sb_puts(fb, ",\"block\":");
    sb_int(fb, o->block);
    sb_puts(fb, ",\"index\":");
    sb_int(fb, o->index);
    sb_puts(fb, ",\"role\":\"");
    sb_puts(fb, pardo_op_role_name(op->role));
    const rec_shapes *sh = o->shapes;
    const unsigned char *t = (const unsigned char *)sh + sizeof(rec_shapes);
    int64_t in_bytes = 0, out_bytes = 0;
    sb_puts(fb, "\",\"inputs\":[");
    for (int k = 0; k < sh->n_in; k++) {
        if (k) sb_puts(fb, ",");
        t += write_tensor(fb, t, op->in[k], &in_bytes);
    }
    sb_puts(fb, "],\"outputs\":");
    if (sh->n_out < 0) {
        sb_puts(fb, "null");
    } else {
        sb_puts(fb, "[");
        for (int k = 0; k < sh->n_out; k++) {
            if (k) sb_puts(fb, ",");
            t += write_tensor(fb, t, op->out[k], &out_bytes);
        }
        sb_puts(fb, "]");
    }
    sb_puts(fb, ",\"bytes_written\":");
    sb_int(fb, out_bytes);
    f->args_len = fb->len - f->args;
    if (fb->oom) b->oom = true;
    return fb->oom ? NULL : f;
}

static void write_op(sbuf *b, const rec_op *o, const char *pid_tid, write_state *ws) {
    const pardo_op *op = o->op;
    const unsigned char *p = (const unsigned char *)o + sizeof(rec_op);
    int64_t dur = o->dur, queued = o->queued;
    if (o->h.flags & F_LONG) {
        const int64_t *ext = (const int64_t *)p;
        dur = ext[0];
        queued = ext[1];
        p += 2 * sizeof(int64_t);
    }
    if (o->shapes == (const rec_shapes *)p) p += o->shapes->size;
    p = (const unsigned char *)(((uintptr_t)p + 7) & ~(uintptr_t)7);
    const frag *fr = op_frag(b, ws, o);
    if (!fr) return;
    sb_put(b, ws->frags.p + fr->head, fr->head_len);
    sb_ns_as_us(b, ns_at(o->t0) - start_ns);
    sb_puts(b, ",\"dur\":");
    sb_ns_as_us(b, ns_of(dur));
    sb_puts(b, pid_tid);
    sb_put(b, ws->frags.p + fr->args, fr->args_len);
    sb_puts(b, ",\"queued_us\":");
    sb_ns_as_us(b, ns_of(queued));
    sb_puts(b, ",\"mem_bytes\":");
    sb_int(b, ws->mem);
    const rec_flow *f = ws->flow && ws->flow->op == op ? ws->flow : NULL;
    if (f) {
        sb_puts(b, ",\"flow_first\":");
        sb_int(b, (long long)f->first);
        sb_puts(b, ",\"flows\":");
        sb_int(b, f->n);
        ws->flow = NULL;
    }
    if (o->h.flags & F_ERROR) {
        sb_puts(b, ",\"error\":");
        sb_str(b, (const char *)p);
    }
    sb_puts(b, "}}");
    for (int i = 0; f && i < f->n; i++) {
        event_head(b, "parallel_do", "flow", "s", ns_at(f->ts), -1, pid_tid);
        sb_puts(b, ",\"id\":");
        sb_int(b, (long long)(f->first + (uint64_t)i));
        sb_puts(b, "}");
    }
}

static void write_part(sbuf *b, const rec_part *o, const char *pid_tid) {
    char name[32];
    snprintf(name, sizeof name, "part %d", (int)o->part);
    event_head(b, name, "part", "X", ns_at(o->t0), ns_of(o->t1 - o->t0), pid_tid);
    sb_puts(b, ",\"args\":{\"parallel_do\":");
    sb_str(b, op_label(o->pd));
    sb_printf(b, ",\"op_block\":%d,\"op_index\":%d,\"block\":%d,\"part\":%d,\"parts\":%d", (int)o->op_block,
              (int)o->op_index, (int)o->block, (int)o->part, (int)o->parts);
    if (o->rows >= 0) sb_printf(b, ",\"rows\":%lld", (long long)o->rows);
    sb_printf(b, ",\"flow\":%llu", (unsigned long long)o->flow);
    if (o->err_len > 0) {
        sb_puts(b, ",\"error\":");
        sb_str(b, (const char *)o + sizeof(rec_part));
    }
    sb_puts(b, "}}");
    if (o->flow) {
        event_head(b, "parallel_do", "flow", "f", ns_at(o->t0), -1, pid_tid);
        sb_printf(b, ",\"bp\":\"e\",\"id\":%llu}", (unsigned long long)o->flow);
    }
}

static void write_stage(sbuf *b, const rec_stage *o, const char *pid_tid) {
    event_head(b, "stage", "stage", "X", ns_at(o->t0), ns_of(o->t1 - o->t0), pid_tid);
    sb_printf(b, ",\"args\":{\"block\":%d,\"first\":%d,\"end\":%d,\"chains\":%d}}", (int)o->block, (int)o->first,
              (int)o->end, (int)o->chains);
}

static void write_user(sbuf *b, const rec_user *o, const char *pid_tid) {
    const char *name = (const char *)o + sizeof(rec_user);
    const char *cat = name + strlen(name) + 1;
    sb_puts(b, ",\n{\"name\":");
    sb_str(b, name);
    sb_puts(b, ",\"cat\":");
    sb_str(b, cat);
    sb_puts(b, ",\"ph\":\"X\",\"ts\":");
    sb_ns_as_us(b, o->t0 - start_ns);
    sb_puts(b, ",\"dur\":");
    sb_ns_as_us(b, o->t1 > o->t0 ? o->t1 - o->t0 : 0);
    sb_puts(b, pid_tid);
    sb_puts(b, ",\"args\":{");
    const char *s = cat + strlen(cat) + 1;
    for (int i = 0; i < o->n_args; i++) {
        const char *key = s, *val = key + strlen(key) + 1;
        s = val + strlen(val) + 1;
        if (i) sb_puts(b, ",");
        sb_str(b, key);
        sb_puts(b, ":");
        /* numbers JSON cannot spell (nan, inf) go as strings */
        bool number = !(o->str_mask & (1u << i)) && strpbrk(val, "ni") == NULL;
        if (number) sb_puts(b, val);
        else sb_str(b, val);
    }
    sb_puts(b, "}}");
}

typedef struct mem_sample {
    int64_t t;   // ns
    int64_t mem; // bytes
} mem_sample;

static int cmp_sample(const void *a, const void *b) {
    const mem_sample *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* The memory counter track: every thread's samples in time order, less
 * those equal to the one before. */
static void write_counter(sbuf *b, int pid) {
    size_t n = 0, cap = 0;
    mem_sample *s = NULL;
    for (trace_buf *tb = bufs; tb; tb = tb->next)
        for (chunk *c = tb->head; c; c = c->next)
            for (size_t off = 0; off < c->used;) {
                const rec_hdr *h = (const rec_hdr *)(c->data + off);
                off += h->size;
                if (h->kind != REC_MEM) continue;
                if (n == cap) {
                    size_t ncap = cap ? cap * 2 : 1024;
                    mem_sample *ns = realloc(s, ncap * sizeof(*s));
                    if (!ns) {
                        b->oom = true;
                        free(s);
                        return;
                    }
                    s = ns;
                    cap = ncap;
                }
                const rec_mem *m = (const rec_mem *)h;
                s[n].t = m->t;
                s[n++].mem = m->bytes;
            }
    if (n) qsort(s, n, sizeof(*s), cmp_sample);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && s[i].mem == s[i - 1].mem) continue;
        sb_puts(b, ",\n{\"name\":\"tensor memory\",\"cat\":\"memory\",\"ph\":\"C\",\"ts\":");
        sb_ns_as_us(b, ns_at(s[i].t) - start_ns);
        sb_printf(b, ",\"pid\":%d,\"args\":{\"bytes\":%lld}}", pid, (long long)s[i].mem);
    }
    free(s);
}

/* Where a thread sorts in viewers: main first, then pool-1, pool-2, ..., then the rest. */
static int sort_index(const trace_buf *tb) {
    int k;
    char end;
    if (tb->main) return 0;
    if (sscanf(tb->name, "pool-%d%c", &k, &end) == 1 && k > 0) return k;
    return 10000 + tb->order;
}

int pardo_trace_json(const pardo_trace_info *info, char **out, size_t *len, pardo_status *st) {
    *out = NULL;
    *len = 0;
    sbuf b = {0};
    int pid = (int)getpid();
    if (atomic_load(&pardo_trace_enabled)) calibrate(); /* else pardo_trace_stop did */
    pthread_mutex_lock(&reg_mu);
    sb_puts(&b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"pardo\":");
    sb_str(&b, PARDO_VERSION);
    if (info && info->command) {
        sb_puts(&b, ",\"command\":");
        sb_str(&b, info->command);
    }
    if (info && info->graph) {
        sb_puts(&b, ",\"graph\":");
        sb_str(&b, info->graph);
    }
    if (info && info->threads > 0) sb_printf(&b, ",\"threads\":%d", info->threads);
    if (info && info->steps >= 0) sb_printf(&b, ",\"steps\":%ld", info->steps);
    if (info && info->status) {
        sb_puts(&b, ",\"status\":");
        sb_str(&b, info->status);
    }
    sb_printf(&b, ",\"clock\":\"CLOCK_MONOTONIC\",\"ticks\":\"%s\",\"start_ns\":%lld,\"dropped_events\":%ld",
              atomic_load(&pardo_trace_tsc) ? "tsc" : "monotonic", (long long)start_ns, pardo_trace_dropped());
    sb_printf(&b, ",\"max_bytes\":%zu", max_bytes);
    if (atomic_load(&full)) {
        sb_puts(&b, ",\"full_at_us\":");
        sb_ns_as_us(&b, ns_at(atomic_load(&full_tick)) - start_ns);
    }
    sb_puts(&b, "},\n\"traceEvents\":[");
    sb_printf(&b, "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
    char pname[300];
    snprintf(pname, sizeof pname, "pardo%s%s%s%s", info && info->command ? " " : "",
             info && info->command ? info->command : "", info && info->graph ? " " : "",
             info && info->graph ? info->graph : "");
    sb_str(&b, pname);
    sb_puts(&b, "}}");
    for (trace_buf *tb = bufs; tb; tb = tb->next) {
        char name[NAME_MAX_LEN + 16];
        if (tb->name[0]) snprintf(name, sizeof name, "%s", tb->name);
        else snprintf(name, sizeof name, "thread-%d", tb->order);
        sb_printf(&b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%ld,\"args\":{\"name\":", pid,
                  tb->tid);
        sb_str(&b, name);
        sb_puts(&b, "}}");
        sb_printf(&b,
                  ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%ld,"
                  "\"args\":{\"sort_index\":%d}}",
                  pid, tb->tid, sort_index(tb));
    }
    write_state ws = {0};
    for (trace_buf *tb = bufs; tb; tb = tb->next) {
        char pid_tid[64];
        snprintf(pid_tid, sizeof pid_tid, ",\"pid\":%d,\"tid\":%ld", pid, tb->tid);
        ws.flow = NULL;
        ws.mem = 0; /* a thread's first op is preceded by a sample */
        for (chunk *c = tb->head; c; c = c->next)
            for (size_t off = 0; off < c->used;) {
                const rec_hdr *h = (const rec_hdr *)(c->data + off);
                off += h->size;
                switch (h->kind) {
                case REC_OP: write_op(&b, (const rec_op *)h, pid_tid, &ws); break;
                case REC_FLOW: ws.flow = (const rec_flow *)h; break;
                case REC_PART: write_part(&b, (const rec_part *)h, pid_tid); break;
                case REC_STAGE: write_stage(&b, (const rec_stage *)h, pid_tid); break;
                case REC_USER: write_user(&b, (const rec_user *)h, pid_tid); break;
                case REC_MEM: ws.mem = ((const rec_mem *)h)->bytes; break;
                default: PARDO_ASSERT(!"unknown trace record");
                }
            }
    }
    free(ws.table);
    free(ws.frags.p);
    write_counter(&b, pid);
    pthread_mutex_unlock(&reg_mu);
    sb_puts(&b, "\n]}\n");
    if (b.oom) {
        free(b.p);
        return pardo_errorf(st, PARDO_ENOMEM, "trace: out of memory writing the trace");
    }
    *out = b.p;
    *len = b.len;
    return PARDO_OK;
}

int pardo_trace_write(const char *path, const pardo_trace_info *info, pardo_status *st) {
    char *text = NULL;
    size_t n = 0;
    if (pardo_trace_json(info, &text, &n, st) != PARDO_OK) return pardo_status_prefix(st, "%s: ", path);
    pardo_file_part part = {text, n};
    int rc = pardo_file_write_atomic(path, &part, 1, st);
    free(text);
    return rc;
}
