/* trace.c - the recording of a trace (see trace.h; the format is
 * TRACES.md): per-thread event buffers, their chunks and the
 * memory limit, the tick clock, and the record functions; trace_write.c
 * writes what they kept as Chrome trace JSON.
 *
 * Each recording thread owns a trace_buf: a list of chunks (mmap'd with
 * their pages populated, so that appending never page-faults) of
 * variable-size records - rec_op, rec_flow, rec_part, rec_stage, rec_user,
 * rec_mem (trace_internal.h) - appended by that thread alone, without
 * locks. A thread finds its buffer through thread-local storage tagged with
 * the trace's generation; a thread whose tag is stale (its first event of
 * this trace) makes a buffer and links it into the global list under
 * reg_mu, once per trace. Records hold raw data: tick clock values, op
 * pointers, and shapes, which an op's record points at in an earlier record
 * of the same op on the same thread when they did not change (48 bytes an
 * op in the steady state). The memory counter is recorded only when it
 * changed. All formatting happens at write time. */
#include "trace/trace_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/synced_mem.h"
#include "exec/thread_pool.h"

#define STACK_MAX 32     // open pardo_trace_begin spans per thread
#define USER_ARGS_MAX 16 // args kept per user span
#define CHUNK_BYTES (128 * 1024)
#define DEFAULT_MAX_MB 16 // event records a trace keeps (about 9 times as much JSON): $PARDO_TRACE_MAX_MB
#define SHAPE_CACHE 256 // ops whose last shapes a thread remembers (a power of two)
#define MAX_IO 128      // tensors of one op record (inputs and outputs)

atomic_bool pardo_trace_enabled;
atomic_bool pardo_trace_tsc;
trace_clock pardo_trace_clock = {.tick_ns = 1.0};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER; // guards bufs, n_bufs, spare
static trace_buf *bufs, **bufs_tail = &bufs;
static struct chunk *spare; // first chunks made at start for the threads that register later
static int n_bufs;
static atomic_uint generation; // bumped by each start and reset; thread-local buffers of another generation are stale
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

void pardo_trace_calibrate(void) {
    trace_clock *c = &pardo_trace_clock;
    if (!atomic_load(&pardo_trace_tsc)) {
        c->tick_ns = 1.0;
        return;
    }
    int64_t t = pardo_trace_ticks(), ns = pardo_trace_now_ns();
    if (t > c->start_tick && ns > c->start_ns) c->tick_ns = (double)(ns - c->start_ns) / (double)(t - c->start_tick);
}

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

/* SyncedMemory's copy observer while a trace records: a "copy" event (cat "memory") per host<->device copy. */
static void record_copy(const char *direction, size_t nbytes, bool async, int64_t t0_ns, int64_t t1_ns) {
    pardo_trace_arg args[3] = {{.key = "direction", .str = direction},
                               {.key = "bytes", .num = (double)nbytes},
                               {.key = "async", .num = async}};
    pardo_trace_complete("copy", "memory", t0_ns, t1_ns, args, 3);
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
    pardo_trace_clock.start_ns = pardo_trace_now_ns();
    pardo_trace_clock.start_tick = atomic_load(&pardo_trace_tsc) ? pardo_trace_ticks() : pardo_trace_clock.start_ns;
    pardo_trace_clock.tick_ns = 1.0;
    if (b) {
        b->main = true;
        sample_mem(b, pardo_trace_clock.start_tick);
    }
    atomic_store_explicit(&pardo_trace_enabled, true, memory_order_release);
    pardo_synced_mem_set_copy_observer(record_copy);
    return PARDO_OK;
}

void pardo_trace_stop(void) {
    if (!atomic_load(&pardo_trace_enabled)) return;
    atomic_store_explicit(&pardo_trace_enabled, false, memory_order_release);
    pardo_synced_mem_set_copy_observer(NULL);
    pardo_trace_calibrate();
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
    return (double)(ns_at(atomic_load(&full_tick)) - pardo_trace_clock.start_ns) / 1e9;
}

bool pardo_trace_full_tick(int64_t *tick) {
    if (!atomic_load(&full)) return false;
    *tick = atomic_load(&full_tick);
    return true;
}

const trace_buf *pardo_trace_bufs_lock(void) {
    pthread_mutex_lock(&reg_mu);
    return bufs;
}

void pardo_trace_bufs_unlock(void) { pthread_mutex_unlock(&reg_mu); }

/* ---- recording ---- */

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
    o->segment = r->segment;
    o->pad = 0;
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
