/* trace_write.c - a recorded trace (trace.c's per-thread buffers) written
 * once as Chrome trace JSON (see trace.h; the format is
 * TRACES.md): otherData (version, command, clock, limits), the process and
 * thread names and sort order, every thread's records in order as events
 * (an op's name and args formatted once per shapes block and copied for
 * each run; a parallel_do's flows attached to its op's event), and the
 * tensor memory counter track; then written to a file atomically. */
#include "trace/trace_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/version.h"
#include "io/file_io.h"
#include "trace/trace_sbuf.h"

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
    sb_ns_as_us(b, t0 - pardo_trace_clock.start_ns);
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
    sb_ns_as_us(b, ns_at(o->t0) - pardo_trace_clock.start_ns);
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
    if (o->segment > 0) sb_printf(b, ",\"segment\":%d", (int)o->segment);
    sb_printf(b, ",\"flow\":%llu", (unsigned long long)o->flow);
    if (o->err_len > 0) {
        sb_puts(b, ",\"error\":");
        sb_str(b, (const char *)o + sizeof(rec_part));
    }
    sb_puts(b, "}}");
    if (o->flow && o->segment == 0) { /* the arrow ends at the part's first span */
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
    sb_ns_as_us(b, o->t0 - pardo_trace_clock.start_ns);
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
static void write_counter(sbuf *b, const trace_buf *bufs, int pid) {
    size_t n = 0, cap = 0;
    mem_sample *s = NULL;
    for (const trace_buf *tb = bufs; tb; tb = tb->next)
        for (const chunk *c = tb->head; c; c = c->next)
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
        sb_ns_as_us(b, ns_at(s[i].t) - pardo_trace_clock.start_ns);
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
    if (atomic_load(&pardo_trace_enabled)) pardo_trace_calibrate(); /* else pardo_trace_stop did */
    const trace_buf *bufs = pardo_trace_bufs_lock();
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
              atomic_load(&pardo_trace_tsc) ? "tsc" : "monotonic", (long long)pardo_trace_clock.start_ns,
              pardo_trace_dropped());
    sb_printf(&b, ",\"max_bytes\":%zu", pardo_trace_max_bytes());
    int64_t full_tick;
    if (pardo_trace_full_tick(&full_tick)) {
        sb_puts(&b, ",\"full_at_us\":");
        sb_ns_as_us(&b, ns_at(full_tick) - pardo_trace_clock.start_ns);
    }
    sb_puts(&b, "},\n\"traceEvents\":[");
    sb_printf(&b, "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
    char pname[300];
    snprintf(pname, sizeof pname, "pardo%s%s%s%s", info && info->command ? " " : "",
             info && info->command ? info->command : "", info && info->graph ? " " : "",
             info && info->graph ? info->graph : "");
    sb_str(&b, pname);
    sb_puts(&b, "}}");
    for (const trace_buf *tb = bufs; tb; tb = tb->next) {
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
    for (const trace_buf *tb = bufs; tb; tb = tb->next) {
        char pid_tid[64];
        snprintf(pid_tid, sizeof pid_tid, ",\"pid\":%d,\"tid\":%ld", pid, tb->tid);
        ws.flow = NULL;
        ws.mem = 0; /* a thread's first op is preceded by a sample */
        for (const chunk *c = tb->head; c; c = c->next)
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
    write_counter(&b, bufs, pid);
    pardo_trace_bufs_unlock();
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

const char *pardo_trace_rank_path(const char *path, int rank, int ranks, char *buf, size_t n) {
    if (!path || ranks <= 1) return path;
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) dot = path + strlen(path);
    snprintf(buf, n, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
    return buf;
}
