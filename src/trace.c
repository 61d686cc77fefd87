/* trace.c - per-thread event buffers, written once as Chrome trace JSON
 * (see trace.h; the format is README.md's "Traces").
 *
 * Each recording thread owns a trace_buf: a list of chunks of variable-size
 * records (rec_op, rec_part, rec_stage, rec_user), appended by that thread
 * alone, without locks. A thread finds its buffer through thread-local
 * storage tagged with the trace's generation; a thread whose tag is stale
 * (first event of this trace) makes a new buffer and links it into the
 * global list under reg_mu, once per trace. Records hold raw data (clock
 * values, op pointers, shapes); all formatting happens at write time. */
#include "trace.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "file_io.h"

#ifndef PARDO_VERSION
#define PARDO_VERSION "0.1.0"
#endif

#define NAME_MAX_LEN 48  // bytes of a thread name, NUL included
#define STACK_MAX 32     // open pardo_trace_begin spans per thread
#define USER_ARGS_MAX 16 // args kept per user span
#define CHUNK_BYTES (256 * 1024)

enum { REC_OP = 1, REC_PART, REC_STAGE, REC_USER };

typedef struct rec_hdr {
    uint32_t kind;
    uint32_t size; // bytes of the whole record, a multiple of 8
} rec_hdr;

/* A tensor of an op record: ndim dims follow. */
typedef struct rec_tensor {
    int8_t dtype;    // pardo_dtype, or -1 when absent
    int8_t ndim;     // dims that follow (a tensor_array: its first part's), -1: none known
    int16_t pad;
    int32_t parts;   // tensor_array: its parts; -1: a plain tensor
    int64_t nbytes;  // bytes of data (a tensor_array: of all its parts)
    int64_t dims[];
} rec_tensor;

typedef struct rec_op {
    rec_hdr h;
    const pardo_op *op; // borrowed from the program
    int32_t block, index;
    int64_t ready, t0, t1; // ns
    int64_t mem;           // tensor bytes in use at t1
    uint64_t flow;         // first flow id this op started (parallel_do), 0 if none
    int64_t flow_ts;       // ns
    int32_t flow_n;        // flows started
    int16_t n_in, n_out;   // tensors that follow (inputs then outputs); n_out -1: the op failed
    int32_t err_len;       // bytes of the error message after the tensors, 0: none
} rec_op;

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

typedef struct chunk {
    struct chunk *next;
    size_t used, cap; // bytes
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
} trace_buf;

atomic_bool pardo_trace_enabled;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER; // guards bufs, n_bufs
static trace_buf *bufs, **bufs_tail = &bufs;
static int n_bufs;
static atomic_uint generation; // bumped by each start; thread-local buffers of another generation are stale
static int64_t start_ns;       // the trace's t = 0
static atomic_long n_created, n_dropped;

static _Thread_local struct {
    trace_buf *buf;
    unsigned gen;
    char name[NAME_MAX_LEN];
    int depth; // open begin spans
    int64_t open_t0[STACK_MAX];
    const char *open_name[STACK_MAX], *open_cat[STACK_MAX];
    const pardo_op *flow_op; // the parallel_do whose flows were started last on this thread
    uint64_t flow;
    int64_t flow_ts;
    int flow_n;
} tls;

int64_t pardo_trace_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

long pardo_trace_buffers_created(void) { return atomic_load(&n_created); }
long pardo_trace_dropped(void) { return atomic_load(&n_dropped); }

static void copy_name(char *dst, const char *src) {
    snprintf(dst, NAME_MAX_LEN, "%s", src ? src : "");
}

void pardo_trace_set_thread_name(const char *name) {
    copy_name(tls.name, name);
    if (tls.buf && tls.gen == atomic_load_explicit(&generation, memory_order_relaxed))
        copy_name(tls.buf->name, tls.name);
}

static chunk *chunk_new(size_t need) {
    size_t cap = need > CHUNK_BYTES ? need : CHUNK_BYTES;
    chunk *c = malloc(sizeof(*c) + cap);
    if (!c) return NULL;
    c->next = NULL;
    c->used = 0;
    c->cap = cap;
    return c;
}

/* The calling thread's buffer in this trace, made on first use; NULL when
 * out of memory. */
static trace_buf *my_buf(void) {
    unsigned g = atomic_load_explicit(&generation, memory_order_relaxed);
    if (tls.buf && tls.gen == g) return tls.buf;
    trace_buf *b = calloc(1, sizeof(*b));
    if (!b || !(b->head = b->tail = chunk_new(0))) {
        free(b);
        return NULL;
    }
    b->tid = (long)syscall(SYS_gettid);
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
    tls.flow_op = NULL;
    return b;
}

/* n bytes (rounded up to 8) at the end of the calling thread's buffer; NULL
 * (the event dropped) when out of memory. */
static void *buf_alloc(size_t n) {
    n = (n + 7) & ~(size_t)7;
    trace_buf *b = my_buf();
    if (!b) {
        atomic_fetch_add(&n_dropped, 1);
        return NULL;
    }
    chunk *c = b->tail;
    if (c->cap - c->used < n) {
        chunk *d = chunk_new(n);
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

/* Gives back the tail of the last allocation: it used `used` of its `got` bytes. */
static void buf_shrink(size_t got, size_t used) {
    got = (got + 7) & ~(size_t)7;
    used = (used + 7) & ~(size_t)7;
    tls.buf->tail->used -= got - used;
}

int pardo_trace_start(pardo_status *st) {
    if (atomic_load(&pardo_trace_enabled)) return pardo_errorf(st, PARDO_EINVAL, "trace: a trace is already recording");
    pardo_trace_reset();
    atomic_fetch_add(&generation, 1);
    start_ns = pardo_trace_now_ns();
    if (!tls.name[0]) copy_name(tls.name, "main");
    trace_buf *b = my_buf(); /* the controlling thread first: it is "main" in the file */
    if (b) b->main = true;
    atomic_store_explicit(&pardo_trace_enabled, true, memory_order_release);
    return PARDO_OK;
}

void pardo_trace_stop(void) { atomic_store_explicit(&pardo_trace_enabled, false, memory_order_release); }

void pardo_trace_reset(void) {
    PARDO_ASSERT(!atomic_load(&pardo_trace_enabled));
    pthread_mutex_lock(&reg_mu);
    trace_buf *b = bufs;
    bufs = NULL;
    bufs_tail = &bufs;
    n_bufs = 0;
    pthread_mutex_unlock(&reg_mu);
    while (b) {
        trace_buf *next = b->next;
        for (chunk *c = b->head; c;) {
            chunk *cn = c->next;
            free(c);
            c = cn;
        }
        free(b);
        b = next;
    }
    /* every thread's buffer is now stale: the next trace's generation differs */
    atomic_fetch_add(&generation, 1);
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

void pardo_trace_record_op(const pardo_trace_op *r) {
    if (!pardo_trace_on()) return;
    int n_out = r->out ? r->n_out : 0;
    size_t err_len = r->error ? strlen(r->error) : 0;
    size_t cap = sizeof(rec_op) + (size_t)(r->n_in + n_out) * tensor_rec_size(PARDO_MAX_DIMS) + err_len + 1;
    unsigned char *p = buf_alloc(cap);
    if (!p) return;
    rec_op *o = (rec_op *)p;
    o->h.kind = REC_OP;
    o->op = r->op;
    o->block = r->block;
    o->index = r->index;
    o->ready = r->ready_ns;
    o->t0 = r->t0_ns;
    o->t1 = r->t1_ns;
    o->mem = pardo_tensor_bytes_in_use();
    if (tls.flow_op == r->op && tls.flow_op) {
        o->flow = tls.flow;
        o->flow_ts = tls.flow_ts;
        o->flow_n = tls.flow_n;
        tls.flow_op = NULL;
    } else {
        o->flow = 0;
        o->flow_ts = 0;
        o->flow_n = 0;
    }
    o->n_in = (int16_t)r->n_in;
    o->n_out = (int16_t)(r->out ? r->n_out : -1);
    o->err_len = (int32_t)err_len;
    size_t used = sizeof(rec_op);
    for (int k = 0; k < r->n_in; k++) used += put_tensor(p + used, r->in[k]);
    for (int k = 0; k < n_out; k++) used += put_tensor(p + used, r->out[k]);
    if (err_len) memcpy(p + used, r->error, err_len + 1);
    used += err_len + (err_len ? 1 : 0);
    buf_shrink(cap, used);
    o->h.size = (uint32_t)((used + 7) & ~(size_t)7);
}

uint64_t pardo_trace_flow_start(const pardo_op *op, int n) {
    if (!pardo_trace_on() || n <= 0) return 0;
    trace_buf *b = my_buf();
    if (!b) return 0;
    /* ids unique in the trace without a shared counter: the thread's order
     * in the high bits, its own count in the low ones */
    uint64_t first = ((uint64_t)(b->order + 1) << 32) | b->flows;
    b->flows += (uint32_t)n;
    tls.flow_op = op;
    tls.flow = first;
    tls.flow_ts = pardo_trace_now_ns();
    tls.flow_n = n;
    return first;
}

void pardo_trace_record_part(const pardo_trace_part *r) {
    if (!pardo_trace_on()) return;
    size_t err_len = r->error ? strlen(r->error) : 0;
    unsigned char *p = buf_alloc(sizeof(rec_part) + err_len + 1);
    if (!p) return;
    rec_part *o = (rec_part *)p;
    o->h.kind = REC_PART;
    o->h.size = (uint32_t)((sizeof(rec_part) + err_len + 1 + 7) & ~(size_t)7);
    o->pd = r->parallel_do;
    o->op_block = r->op_block;
    o->op_index = r->op_index;
    o->block = r->block;
    o->part = r->part;
    o->parts = r->parts;
    o->rows = r->rows;
    o->flow = r->flow;
    o->t0 = r->t0_ns;
    o->t1 = r->t1_ns;
    o->err_len = (int32_t)err_len;
    memcpy(p + sizeof(rec_part), r->error ? r->error : "", err_len + 1);
}

void pardo_trace_record_stage(int block, int first, int end, int chains, int64_t t0_ns, int64_t t1_ns) {
    if (!pardo_trace_on()) return;
    rec_stage *o = buf_alloc(sizeof(rec_stage));
    if (!o) return;
    o->h.kind = REC_STAGE;
    o->h.size = sizeof(rec_stage);
    o->block = block;
    o->first = first;
    o->end = end;
    o->chains = chains;
    o->t0 = t0_ns;
    o->t1 = t1_ns;
}

void pardo_trace_complete(const char *name, const char *cat, int64_t t0_ns, int64_t t1_ns,
                          const pardo_trace_arg *args, int n_args) {
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
    unsigned char *p = buf_alloc(need);
    if (!p) return;
    rec_user *o = (rec_user *)p;
    o->h.kind = REC_USER;
    o->h.size = (uint32_t)((need + 7) & ~(size_t)7);
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

static void sb_reserve(sbuf *b, size_t n) {
    if (b->oom || b->len + n + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_put(sbuf *b, const char *s, size_t n) {
    sb_reserve(b, n);
    if (b->oom) return;
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
    sb_reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
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

/* A clock value as trace microseconds: "%.3f" of the time since the start. */
static void sb_us(sbuf *b, int64_t ns) { sb_printf(b, "%.3f", (double)(ns - start_ns) / 1e3); }
static void sb_dur(sbuf *b, int64_t ns) { sb_printf(b, "%.3f", (double)ns / 1e3); }

static const char *op_label(const pardo_op *op) { return op->name && op->name[0] ? op->name : op->type; }

/* The common head of an event: {"name":..,"cat":..,"ph":..,"ts":..,["dur":..,]"pid":..,"tid":.. */
static void event_head(sbuf *b, const char *name, const char *cat, const char *ph, int64_t t0, int64_t t1, int pid,
                       long tid) {
    sb_puts(b, ",\n{\"name\":");
    sb_str(b, name);
    sb_puts(b, ",\"cat\":");
    sb_str(b, cat);
    sb_printf(b, ",\"ph\":\"%s\",\"ts\":", ph);
    sb_us(b, t0);
    if (t1 >= t0 && ph[0] == 'X') {
        sb_puts(b, ",\"dur\":");
        sb_dur(b, t1 - t0);
    }
    sb_printf(b, ",\"pid\":%d,\"tid\":%ld", pid, tid);
}

/* Writes one tensor record as {"var":..,"dtype":..,"shape":[..]}; returns its size. */
static size_t write_tensor(sbuf *b, const unsigned char *p, const char *var, int64_t *nbytes) {
    const rec_tensor *t = (const rec_tensor *)p;
    if (t->dtype < 0) {
        sb_puts(b, "null");
        return tensor_rec_size(0);
    }
    sb_puts(b, "{\"var\":");
    sb_str(b, var);
    sb_puts(b, ",\"dtype\":");
    sb_str(b, pardo_dtype_name((pardo_dtype)t->dtype));
    if (t->parts >= 0) sb_printf(b, ",\"tensor_array\":%d", (int)t->parts);
    sb_puts(b, ",\"shape\":");
    if (t->ndim < 0) {
        sb_puts(b, "null");
    } else {
        sb_puts(b, "[");
        for (int d = 0; d < t->ndim; d++) sb_printf(b, "%s%lld", d ? "," : "", (long long)t->dims[d]);
        sb_puts(b, "]");
    }
    sb_printf(b, ",\"bytes\":%lld}", (long long)t->nbytes);
    *nbytes += t->nbytes;
    return tensor_rec_size(t->ndim);
}

static void write_op(sbuf *b, const rec_op *o, int pid, long tid) {
    const pardo_op *op = o->op;
    event_head(b, op_label(op), "op", "X", o->t0, o->t1, pid, tid);
    sb_puts(b, ",\"args\":{\"op\":");
    sb_str(b, op->type);
    sb_puts(b, ",\"name\":");
    sb_str(b, op->name ? op->name : "");
    sb_printf(b, ",\"block\":%d,\"index\":%d,\"role\":", (int)o->block, (int)o->index);
    sb_str(b, pardo_op_role_name(op->role));
    const unsigned char *p = (const unsigned char *)o + sizeof(rec_op);
    int64_t in_bytes = 0, out_bytes = 0;
    sb_puts(b, ",\"inputs\":[");
    for (int k = 0; k < o->n_in; k++) {
        if (k) sb_puts(b, ",");
        p += write_tensor(b, p, op->in[k], &in_bytes);
    }
    sb_puts(b, "],\"outputs\":");
    if (o->n_out < 0) {
        sb_puts(b, "null");
    } else {
        sb_puts(b, "[");
        for (int k = 0; k < o->n_out; k++) {
            if (k) sb_puts(b, ",");
            p += write_tensor(b, p, op->out[k], &out_bytes);
        }
        sb_puts(b, "]");
    }
    sb_printf(b, ",\"bytes_written\":%lld,\"queued_us\":", (long long)out_bytes);
    sb_dur(b, o->t0 > o->ready ? o->t0 - o->ready : 0);
    sb_printf(b, ",\"mem_bytes\":%lld", (long long)o->mem);
    if (o->flow_n > 0) sb_printf(b, ",\"flow_first\":%llu,\"flows\":%d", (unsigned long long)o->flow, (int)o->flow_n);
    if (o->err_len > 0) {
        sb_puts(b, ",\"error\":");
        sb_str(b, (const char *)p);
    }
    sb_puts(b, "}}");
    for (int i = 0; i < o->flow_n; i++) {
        event_head(b, "parallel_do", "flow", "s", o->flow_ts, o->flow_ts, pid, tid);
        sb_printf(b, ",\"id\":%llu}", (unsigned long long)(o->flow + (uint64_t)i));
    }
}

static void write_part(sbuf *b, const rec_part *o, int pid, long tid) {
    char name[32];
    snprintf(name, sizeof name, "part %d", (int)o->part);
    event_head(b, name, "part", "X", o->t0, o->t1, pid, tid);
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
        event_head(b, "parallel_do", "flow", "f", o->t0, o->t0, pid, tid);
        sb_printf(b, ",\"bp\":\"e\",\"id\":%llu}", (unsigned long long)o->flow);
    }
}

static void write_stage(sbuf *b, const rec_stage *o, int pid, long tid) {
    event_head(b, "stage", "stage", "X", o->t0, o->t1, pid, tid);
    sb_printf(b, ",\"args\":{\"block\":%d,\"first\":%d,\"end\":%d,\"chains\":%d}}", (int)o->block, (int)o->first,
              (int)o->end, (int)o->chains);
}

static void write_user(sbuf *b, const rec_user *o, int pid, long tid) {
    const char *name = (const char *)o + sizeof(rec_user);
    const char *cat = name + strlen(name) + 1;
    event_head(b, name, cat, "X", o->t0, o->t1, pid, tid);
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

/* The memory counter track: every op end's sample, in time order, less
 * those equal to the one before. */
static void write_counter(sbuf *b, int pid) {
    size_t n = 0, cap = 0;
    mem_sample *s = NULL;
    for (trace_buf *tb = bufs; tb; tb = tb->next)
        for (chunk *c = tb->head; c; c = c->next)
            for (size_t off = 0; off < c->used;) {
                const rec_hdr *h = (const rec_hdr *)(c->data + off);
                off += h->size;
                if (h->kind != REC_OP) continue;
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
                const rec_op *o = (const rec_op *)h;
                s[n].t = o->t1;
                s[n++].mem = o->mem;
            }
    if (n) qsort(s, n, sizeof(*s), cmp_sample);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && i + 1 < n && s[i].mem == s[i - 1].mem) continue;
        sb_puts(b, ",\n{\"name\":\"tensor memory\",\"cat\":\"memory\",\"ph\":\"C\",\"ts\":");
        sb_us(b, s[i].t);
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
    sb_printf(&b, ",\"clock\":\"CLOCK_MONOTONIC\",\"start_ns\":%lld,\"dropped_events\":%ld},\n\"traceEvents\":[",
              (long long)start_ns, pardo_trace_dropped());
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
    for (trace_buf *tb = bufs; tb; tb = tb->next)
        for (chunk *c = tb->head; c; c = c->next)
            for (size_t off = 0; off < c->used;) {
                const rec_hdr *h = (const rec_hdr *)(c->data + off);
                off += h->size;
                switch (h->kind) {
                case REC_OP: write_op(&b, (const rec_op *)h, pid, tb->tid); break;
                case REC_PART: write_part(&b, (const rec_part *)h, pid, tb->tid); break;
                case REC_STAGE: write_stage(&b, (const rec_stage *)h, pid, tb->tid); break;
                case REC_USER: write_user(&b, (const rec_user *)h, pid, tb->tid); break;
                default: PARDO_ASSERT(!"unknown trace record");
                }
            }
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
