/* engine.c - the dependency engine (see engine.h), after MXNet's
 * ThreadedEngine and its ThreadedVar.
 *
 * Each var keeps a FIFO of the dependencies not yet granted, the count of
 * reads running and whether a write runs. A pushed op holds one entry per
 * var and a wait count of its entries plus one (the push's own, released
 * once every entry is queued); an entry granted by its var takes one off,
 * outside the var's lock, and the op that reaches zero is ready. Ready ops
 * go to one FIFO, which dispatchers drain: pool tasks (at most one per pool
 * worker) that run ops until the FIFO stays empty for a short spin, and
 * threads inside a wait, which run ops while they wait (a pool of n
 * threads has n - 1 workers: the waiting thread is the n-th). A thread that
 * finishes an op keeps one op it made ready and runs it next, without the
 * FIFO or a wake (TensorFlow's executor runs a finished node's successor
 * inline): a chain of small ops stays on one thread. */
#include "engine/engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/spin.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

#define INLINE_DEPS 6 // an op's entries kept in its block; more come from a buffer the block keeps
#define CHUNK 64      // blocks allocated at once when a free list runs dry
#define LOCAL_OPS 32  // op blocks moved at once between a thread's own free list and the engine's

typedef enum op_kind {
    OP_USER,   // a pushed function
    OP_WAIT,   // wait_to_read's read of its var: wakes the waiter when granted
    OP_DELETE, // delete_var's write of its var: frees the var when granted
} op_kind;

typedef struct engine_op engine_op;
typedef struct dep_entry dep_entry;

/* Entries for an op with more vars than its block holds: a power of two of
 * them, kept on the engine's free list of that size once used (an op's
 * block and its buffer part when it is freed, so that a block taken again
 * never has to grow one: the steady state allocates nothing). */
typedef struct dep_buf {
    struct dep_buf *next; // the free list of its size
    struct dep_buf *all;  // every buffer, for shutdown
    int size_class;       // holds 1 << size_class entries
    struct dep_entry *e;  // the entries (allocated with the buffer)
} dep_buf;

#define DEP_CLASSES 31

/* One var of one op: queued on the var until granted. */
struct dep_entry {
    struct dep_entry *next; // the var's queue
    engine_op *op;
    pardo_var *var;
    bool write;
};

struct engine_op {
    pardo_engine_fn fn;
    void *arg;
    const char *name;    // borrowed; may be NULL
    atomic_int wait;     // entries not yet granted, plus one until the push is done
    op_kind kind;
    int n_deps;          // entries: n_reads reads, then the writes
    int n_reads;
    dep_entry *deps;     // inline_deps, or big->e
    dep_entry inline_deps[INLINE_DEPS];
    struct dep_buf *big; // more entries than fit inline: a buffer of the engine's, given back with the block
    atomic_bool *woken;  // OP_WAIT: the waiter's flag
    pardo_var *poison;   // a var of the op that held an error when the op became ready (it does not run)
    int64_t ready_ticks; // trace ticks when it became ready (0: no trace then)
    engine_op *next;     // the ready FIFO, a list of ready ops, the free list
};

struct pardo_var {
    atomic_flag lock;         // a spin lock over the fields below: held for a few loads and stores
    dep_entry *head, *tail;   // entries not yet granted, in push order
    int running_reads;        // granted reads not yet finished
    bool write_running;       // a granted write not yet finished
    int err_epoch;            // err is this var's error while err_epoch equals the engine's epoch
    bool has_err;
    pardo_status err;         // the first error of its history (since the last clear)
    pardo_var *next_free;
};

typedef struct chunk {
    struct chunk *next;
    void *blocks; // CHUNK ops or vars (the first op chunk more: first_op_chunk)
    bool ops;     // blocks are engine_op (else pardo_var)
} chunk;

struct pardo_engine {
    pthread_mutex_t mu;           // guards the FIFO, the dispatcher counts, first_err
    engine_op *ready_head, *ready_tail;
    _Alignas(PARDO_CACHE_LINE) atomic_int n_ready; // ops in the FIFO, read by spinning dispatchers
    int n_dispatchers;            // dispatcher tasks submitted and not yet returned
    atomic_int n_spinning;        // dispatchers spinning on an empty FIFO (they take the next op)
    atomic_bool stopping;         // shutdown: spinning dispatchers give their workers back at once
    int max_dispatchers;          // the pool's workers (its size - 1); -1 until the first push
    pardo_pool_task *tasks;       // max_dispatchers slots; owned
    int *free_slots, n_free_slots;
    atomic_int n_waiting;         // threads in a wait (they block in the pool: pardo_thread_pool_wait_until)
    bool has_first_err;
    pardo_status first_err;       // the first failing op's status since the last wait_all
    /* Ops pushed and ops finished, on lines of their own: a pushing thread and a finishing one do not
     * share a line (pending = pushed - finished). */
    _Alignas(PARDO_CACHE_LINE) atomic_llong pushed;
    _Alignas(PARDO_CACHE_LINE) atomic_llong finished;
    atomic_uint generation;       // bumped by shutdown: the threads' own free lists (local_ops) are void
    atomic_int epoch;             // bumped by wait_all: every var's error is cleared
    atomic_int errors_live;       // nonzero once a var may have an error (ops then check theirs)
    _Alignas(PARDO_CACHE_LINE) atomic_flag free_lock; // over the free lists and chunks
    engine_op *free_ops;
    bool ops_reserved;            // the first op chunk, with the threads' lists' reserve, is made
    pardo_var *free_vars;
    chunk *chunks;
    dep_buf *free_bufs[DEP_CLASSES]; // by size class
    dep_buf *all_bufs;
};

static pardo_engine engine = {.mu = PTHREAD_MUTEX_INITIALIZER, .max_dispatchers = -1, .free_lock = ATOMIC_FLAG_INIT};
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* The op running on this thread (its name, or "" when it has none), NULL outside one; and its ready time. */
static _Thread_local const char *running_op;
static _Thread_local int64_t running_ready_ticks;

static void lock_flag(atomic_flag *f) {
    while (atomic_flag_test_and_set_explicit(f, memory_order_acquire)) pardo_cpu_relax();
}

static void unlock_flag(atomic_flag *f) { atomic_flag_clear_explicit(f, memory_order_release); }

/* The child of a fork has none of the parent's threads: no dispatcher runs
 * and nobody waits. Locks the parent may have held are re-initialised. */
static void reset_in_child(void) {
    pthread_mutex_init(&engine.mu, NULL);
    atomic_flag_clear(&engine.free_lock);
    engine.n_dispatchers = 0;
    atomic_store(&engine.n_spinning, 0);
    atomic_store(&engine.n_waiting, 0);
    free(engine.tasks);
    free(engine.free_slots);
    engine.tasks = NULL;
    engine.free_slots = NULL;
    engine.n_free_slots = 0;
    engine.max_dispatchers = -1; /* the child's pool may be sized anew */
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, reset_in_child); }

pardo_engine *pardo_engine_get(void) {
    pthread_once(&atfork_once, register_atfork);
    return &engine;
}

int64_t pardo_engine_op_ready_ticks(void) { return running_op ? running_ready_ticks : 0; }

/* Ops pushed and not finished. finished is read first: it never passes
 * pushed, so the difference is never negative. */
static int64_t pending_now(pardo_engine *e) {
    long long done = atomic_load(&e->finished);
    return atomic_load(&e->pushed) - done;
}

int64_t pardo_engine_pending(pardo_engine *e) { return pending_now(e); }


/* ---- free lists ---- */

/* n zeroed blocks of `size` bytes, kept on e->chunks until shutdown;
 * NULL when out of memory. Call with e->free_lock held. */
static void *new_chunk(pardo_engine *e, size_t n, size_t size, bool ops) {
    chunk *c = malloc(sizeof(*c));
    void *blocks = calloc(n, size);
    if (!c || !blocks) {
        free(c);
        free(blocks);
        return NULL;
    }
    c->blocks = blocks;
    c->ops = ops;
    c->next = e->chunks;
    e->chunks = c;
    return blocks;
}

/* A thread's own free op blocks: a pushing thread takes blocks and a
 * finishing one frees them, LOCAL_OPS at a time to and from the engine's
 * list, so that the two do not take the engine's free lock (and move its
 * line between their cores) at every op. Void when `generation` is not the
 * engine's (a shutdown freed the blocks). */
typedef struct local_ops {
    engine_op *head;
    int n;
    unsigned generation;
} local_ops;

static _Thread_local local_ops local;

/* This thread's list, emptied first when a shutdown voided it. */
static local_ops *local_list(pardo_engine *e) {
    unsigned g = atomic_load_explicit(&e->generation, memory_order_relaxed);
    if (local.generation != g) local = (local_ops){.generation = g};
    return &local;
}

/* Blocks of the engine's first op chunk: CHUNK, and what the threads' own
 * lists can hold (each fewer than 2 * LOCAL_OPS), for the pool's threads and
 * one pushing thread more. Blocks wander between the lists at random; were
 * the first chunk only CHUNK, a steady load would still grow the heap at
 * some late step, when the lists happen to hold more than they ever did.
 * With the reserve only ops pending at once grow it. */
static size_t first_op_chunk(void) {
    return CHUNK + (size_t)2 * LOCAL_OPS * (size_t)(pardo_thread_pool_size() + 1);
}

/* Moves up to LOCAL_OPS blocks of the engine's list to l, making a chunk
 * when it is empty (the first one with the reserve above); false when out
 * of memory. Call with e->free_lock held. */
static bool refill_local(pardo_engine *e, local_ops *l) {
    if (!e->free_ops) {
        size_t n = e->ops_reserved ? CHUNK : first_op_chunk();
        engine_op *ops = new_chunk(e, n, sizeof(*ops), true);
        if (!ops) return false;
        e->ops_reserved = true;
        for (size_t i = 0; i < n; i++) {
            ops[i].next = e->free_ops;
            e->free_ops = &ops[i];
        }
    }
    while (e->free_ops && l->n < LOCAL_OPS) {
        engine_op *op = e->free_ops;
        e->free_ops = op->next;
        op->next = l->head;
        l->head = op;
        l->n++;
    }
    return true;
}

static engine_op *alloc_op(pardo_engine *e, int n_deps) {
    local_ops *l = local_list(e);
    bool locked = false;
    if (!l->head) {
        lock_flag(&e->free_lock);
        locked = true;
        if (!refill_local(e, l)) {
            unlock_flag(&e->free_lock);
            return NULL;
        }
    }
    engine_op *op = l->head;
    l->head = op->next;
    l->n--;
    op->big = NULL;
    op->deps = op->inline_deps;
    if (n_deps > INLINE_DEPS) {
        if (!locked) lock_flag(&e->free_lock);
        locked = true;
        int c = 3;
        while ((1 << c) < n_deps) c++;
        dep_buf *b = e->free_bufs[c];
        if (b) {
            e->free_bufs[c] = b->next;
        } else if ((b = malloc(sizeof(*b) + sizeof(dep_entry) * ((size_t)1 << c)))) {
            b->e = (dep_entry *)(b + 1);
            b->size_class = c;
            b->all = e->all_bufs;
            e->all_bufs = b;
        } else {
            op->next = l->head;
            l->head = op;
            l->n++;
            unlock_flag(&e->free_lock);
            return NULL;
        }
        op->big = b;
        op->deps = b->e;
    }
    if (locked) unlock_flag(&e->free_lock);
    op->next = NULL;
    op->ready_ticks = 0;
    op->woken = NULL;
    return op;
}

/* Gives op's block to this thread's list (and its buffer, if any, to the
 * engine's); a list grown to twice LOCAL_OPS hands LOCAL_OPS back. */
static void free_op(pardo_engine *e, engine_op *op) {
    local_ops *l = local_list(e);
    if (op->big) {
        lock_flag(&e->free_lock);
        op->big->next = e->free_bufs[op->big->size_class];
        e->free_bufs[op->big->size_class] = op->big;
        unlock_flag(&e->free_lock);
        op->big = NULL;
    }
    op->next = l->head;
    l->head = op;
    if (++l->n < 2 * LOCAL_OPS) return;
    engine_op *first = l->head, *last = first;
    for (int i = 1; i < LOCAL_OPS; i++) last = last->next;
    l->head = last->next;
    l->n -= LOCAL_OPS;
    lock_flag(&e->free_lock);
    last->next = e->free_ops;
    e->free_ops = first;
    unlock_flag(&e->free_lock);
}

pardo_var *pardo_engine_new_var(pardo_engine *e, pardo_status *st) {
    lock_flag(&e->free_lock);
    if (!e->free_vars) {
        pardo_var *vars = new_chunk(e, CHUNK, sizeof(*vars), false);
        if (!vars) {
            unlock_flag(&e->free_lock);
            pardo_errorf(st, PARDO_ENOMEM, "engine: out of memory for a var");
            return NULL;
        }
        for (int i = 0; i < CHUNK; i++) {
            vars[i].next_free = e->free_vars;
            e->free_vars = &vars[i];
        }
    }
    pardo_var *v = e->free_vars;
    e->free_vars = v->next_free;
    unlock_flag(&e->free_lock);
    atomic_flag_clear(&v->lock);
    v->head = v->tail = NULL;
    v->running_reads = 0;
    v->write_running = false;
    v->has_err = false;
    v->next_free = NULL;
    return v;
}

static void free_var(pardo_engine *e, pardo_var *v) {
    lock_flag(&e->free_lock);
    v->next_free = e->free_vars;
    e->free_vars = v;
    unlock_flag(&e->free_lock);
}

void pardo_engine_shutdown(void) {
    pardo_engine *e = &engine;
    if (pending_now(e) != 0) return; /* still in use: keep it all */
    /* dispatchers may still spin for more work (up to 2 ms): tell them to stop, and wait until they have */
    atomic_store(&e->stopping, true);
    for (;;) {
        pthread_mutex_lock(&e->mu);
        int running = e->n_dispatchers;
        pthread_mutex_unlock(&e->mu);
        if (running == 0) break;
        pardo_cpu_relax();
    }
    atomic_store(&e->stopping, false);
    for (chunk *c = e->chunks, *next; c; c = next) {
        next = c->next;
        free(c->blocks);
        free(c);
    }
    for (dep_buf *b = e->all_bufs, *next; b; b = next) {
        next = b->all;
        free(b);
    }
    e->all_bufs = NULL;
    memset(e->free_bufs, 0, sizeof(e->free_bufs));
    e->chunks = NULL;
    e->free_ops = NULL;
    e->ops_reserved = false;
    e->free_vars = NULL;
    free(e->tasks);
    free(e->free_slots);
    e->tasks = NULL;
    e->free_slots = NULL;
    e->n_free_slots = 0;
    e->max_dispatchers = -1;
    atomic_fetch_add(&e->generation, 1); /* the threads' own lists held blocks of the chunks just freed */
}

/* ---- the ready FIFO and its dispatchers ---- */

static void dispatcher_main(void *arg);

/* Makes the pool's tasks once its size is known. Call with e->mu held. */
static void plan_dispatchers(pardo_engine *e) {
    if (e->max_dispatchers >= 0) return;
    int n = pardo_thread_pool_size() - 1;
    if (n > 0 && (!(e->tasks = calloc((size_t)n, sizeof(*e->tasks))) ||
                  !(e->free_slots = malloc(sizeof(int) * (size_t)n)))) {
        free(e->tasks);
        e->tasks = NULL;
        n = 0; /* no dispatchers: waits run every op */
    }
    for (int i = 0; i < n; i++) e->free_slots[i] = i;
    e->n_free_slots = n;
    e->max_dispatchers = n;
}

/* Starts a dispatcher when ops wait in the FIFO that the dispatchers
 * awake will not take at once and a pool worker is free for one. Call with
 * e->mu held; submit the returned slot (>= 0) after unlocking. */
static int want_dispatcher(pardo_engine *e) {
    int waiting = atomic_load_explicit(&e->n_ready, memory_order_relaxed);
    if (e->n_free_slots == 0 || waiting <= atomic_load_explicit(&e->n_spinning, memory_order_relaxed)) return -1;
    e->n_dispatchers++;
    return e->free_slots[--e->n_free_slots];
}

static void start_dispatcher(pardo_engine *e, int slot) {
    if (slot >= 0) pardo_thread_pool_submit(&e->tasks[slot], dispatcher_main, (void *)(intptr_t)slot);
}

/* Wakes the threads in a wait to check their conditions (ops to run, their op done, nothing pending). */
static void notify_waiters(pardo_engine *e) {
    if (atomic_load(&e->n_waiting) > 0) pardo_thread_pool_notify();
}

/* Appends the list `ops` (linked by next, n of them) to the FIFO; wakes the
 * waiters (they run ops too) and starts a dispatcher if wanted. */
static void enqueue_ready(pardo_engine *e, engine_op *ops, engine_op *last, int n) {
    pthread_mutex_lock(&e->mu);
    plan_dispatchers(e);
    if (e->ready_tail) e->ready_tail->next = ops;
    else e->ready_head = ops;
    e->ready_tail = last;
    atomic_fetch_add_explicit(&e->n_ready, n, memory_order_release);
    int slot = want_dispatcher(e);
    pthread_mutex_unlock(&e->mu);
    notify_waiters(e);
    start_dispatcher(e, slot);
}

/* The FIFO's head, or NULL. Ops left behind may start a dispatcher. */
static engine_op *pop_ready(pardo_engine *e) {
    if (atomic_load_explicit(&e->n_ready, memory_order_acquire) == 0) return NULL;
    int slot = -1;
    pthread_mutex_lock(&e->mu);
    engine_op *op = e->ready_head;
    if (op) {
        e->ready_head = op->next;
        if (!e->ready_head) e->ready_tail = NULL;
        if (atomic_fetch_sub_explicit(&e->n_ready, 1, memory_order_relaxed) > 1) slot = want_dispatcher(e);
    }
    pthread_mutex_unlock(&e->mu);
    start_dispatcher(e, slot);
    if (op) op->next = NULL;
    return op;
}

/* ---- dependencies ---- */

/* Grants the var's queued entries that may run now, in order; they are
 * linked into *granted (by next). Call with v->lock held. */
static void grant_queued(pardo_var *v, dep_entry **granted) {
    while (v->head) {
        dep_entry *d = v->head;
        if (d->write) {
            if (v->write_running || v->running_reads > 0) return;
            v->write_running = true;
        } else {
            if (v->write_running) return;
            v->running_reads++;
        }
        v->head = d->next;
        if (!v->head) v->tail = NULL;
        d->next = *granted;
        *granted = d;
        if (d->write) return;
    }
}

/* Queues d on its var; true when it was granted at once. */
static bool append_dep(dep_entry *d) {
    pardo_var *v = d->var;
    bool now = false;
    lock_flag(&v->lock);
    if (!v->head && !v->write_running && (!d->write || v->running_reads == 0)) {
        if (d->write) v->write_running = true;
        else v->running_reads++;
        now = true;
    } else {
        d->next = NULL;
        if (v->tail) v->tail->next = d;
        else v->head = d;
        v->tail = d;
    }
    unlock_flag(&v->lock);
    return now;
}

/* A list of ready ops being built (linked by next). */
typedef struct ready_list {
    engine_op *head, *tail;
    int n;
} ready_list;

static bool var_has_err(pardo_engine *e, const pardo_var *v);

/* A var of op's that holds an error now, or NULL. Decided when the op
 * becomes ready: a wait_to_read granted with it may clear the error before
 * the op runs. The error's text stays in the var (a clear only marks it),
 * and nothing rewrites it before the op ends: that takes a write of the
 * var, which waits for the op. */
static pardo_var *poisoned_var(pardo_engine *e, engine_op *op) {
    if (atomic_load_explicit(&e->errors_live, memory_order_acquire) == 0) return NULL;
    for (int i = 0; i < op->n_deps; i++) {
        pardo_var *v = op->deps[i].var;
        lock_flag(&v->lock);
        bool bad = var_has_err(e, v);
        unlock_flag(&v->lock);
        if (bad) return v;
    }
    return NULL;
}

static void ready_add(ready_list *l, engine_op *op) {
    op->poison = op->kind == OP_USER ? poisoned_var(&engine, op) : NULL;
    op->next = NULL;
    op->ready_ticks = pardo_trace_on() ? pardo_trace_ticks() : 0;
    if (l->tail) l->tail->next = op;
    else l->head = op;
    l->tail = op;
    l->n++;
}

/* Takes one off op's wait count; adds it to `ready` when that was the last. */
static void release_one(engine_op *op, ready_list *ready) {
    if (atomic_fetch_sub_explicit(&op->wait, 1, memory_order_acq_rel) == 1) ready_add(ready, op);
}

static void finish_op(pardo_engine *e, engine_op *op, ready_list *ready);

/* Ends the ops of `ready` that are the engine's own (a wait's read, a
 * delete's write) at once, which may make more ready; what is left are
 * pushed functions, to run. */
static void settle_internal(pardo_engine *e, ready_list *ready) {
    ready_list out = {0};
    while (ready->head) {
        engine_op *op = ready->head;
        ready->head = op->next;
        if (!ready->head) ready->tail = NULL;
        ready->n--;
        if (op->kind == OP_USER) {
            op->next = NULL;
            if (out.tail) out.tail->next = op;
            else out.head = op;
            out.tail = op;
            out.n++;
        } else {
            finish_op(e, op, ready);
        }
    }
    *ready = out;
}

/* Hands the ready functions of `ready` to the FIFO. */
static void dispatch(pardo_engine *e, ready_list *ready) {
    settle_internal(e, ready);
    if (ready->n > 0) enqueue_ready(e, ready->head, ready->tail, ready->n);
    *ready = (ready_list){0};
}

/* The op is done: its vars grant what waits on them (the ops that become
 * ready are added to `ready`), its block is freed and the pending count
 * drops. A delete frees its var instead; a wait wakes its waiter. */
static void finish_op(pardo_engine *e, engine_op *op, ready_list *ready) {
    if (op->kind == OP_DELETE) {
        pardo_var *v = op->deps[0].var;
        PARDO_ASSERT(!v->head); /* nothing may be pushed on a var after its delete */
        free_var(e, v);
    } else {
        for (int i = 0; i < op->n_deps; i++) {
            dep_entry *d = &op->deps[i], *granted = NULL;
            pardo_var *v = d->var;
            lock_flag(&v->lock);
            if (d->write) v->write_running = false;
            else v->running_reads--;
            grant_queued(v, &granted);
            unlock_flag(&v->lock);
            for (dep_entry *g = granted, *next; g; g = next) {
                next = g->next;
                release_one(g->op, ready);
            }
        }
    }
    atomic_bool *woken = op->kind == OP_WAIT ? op->woken : NULL;
    free_op(e, op);
    atomic_fetch_add(&e->finished, 1);
    if (woken) atomic_store_explicit(woken, true, memory_order_release); /* the waiter may return now */
    /* pushed is read only when someone waits: a pusher's line stays on its core otherwise */
    if (atomic_load(&e->n_waiting) > 0 && (woken || pending_now(e) == 0)) pardo_thread_pool_notify();
}

/* ---- errors ---- */

static bool var_has_err(pardo_engine *e, const pardo_var *v) {
    return v->has_err && v->err_epoch == atomic_load_explicit(&e->epoch, memory_order_relaxed);
}

/* Leaves st on every var op writes that has no error yet. */
static void stamp_writes(pardo_engine *e, engine_op *op, const pardo_status *st) {
    atomic_fetch_add_explicit(&e->errors_live, 1, memory_order_release);
    int epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
    for (int i = op->n_reads; i < op->n_deps; i++) {
        pardo_var *v = op->deps[i].var;
        lock_flag(&v->lock);
        if (!var_has_err(e, v)) {
            v->err = *st;
            v->has_err = true;
            v->err_epoch = epoch;
        }
        unlock_flag(&v->lock);
    }
}

/* ---- running ops ---- */

/* Runs op (a pushed function) unless one of its vars has an error, then
 * finishes it; the ops that become ready are added to `ready`. */
static void run_op(pardo_engine *e, engine_op *op, ready_list *ready) {
    pardo_status st;
    st.code = PARDO_OK;
    st.msg[0] = '\0';
    bool poisoned = op->poison != NULL;
    if (poisoned) {
        lock_flag(&op->poison->lock);
        st = op->poison->err;
        unlock_flag(&op->poison->lock);
    } else {
        const char *outer = running_op;
        int64_t outer_ready = running_ready_ticks;
        running_op = op->name ? op->name : "";
        running_ready_ticks = op->ready_ticks;
        int rc = op->fn(op->arg, &st);
        running_op = outer;
        running_ready_ticks = outer_ready;
        if (rc != PARDO_OK) {
            if (st.code == PARDO_OK) pardo_errorf(&st, rc, "failed (%s)", pardo_code_text(rc));
            st.code = rc;
            if (op->name) pardo_status_prefix(&st, "engine op '%s': ", op->name);
            pthread_mutex_lock(&e->mu);
            if (!e->has_first_err) {
                e->first_err = st;
                e->has_first_err = true;
            }
            pthread_mutex_unlock(&e->mu);
        }
    }
    if (st.code != PARDO_OK) stamp_writes(e, op, &st);
    finish_op(e, op, ready);
}

/* Runs op and then, one at a time, an op each run made ready (the rest go
 * to the FIFO), until a run makes none ready. */
static void run_chain(pardo_engine *e, engine_op *op) {
    while (op) {
        ready_list ready = {0};
        run_op(e, op, &ready);
        settle_internal(e, &ready);
        op = ready.head;
        if (!op) break;
        ready.head = op->next;
        ready.n--;
        if (ready.n > 0) enqueue_ready(e, ready.head, ready.tail, ready.n);
        op->next = NULL;
    }
}

static bool fifo_has_ops(void *arg) {
    const pardo_engine *e = arg;
    return atomic_load_explicit(&e->n_ready, memory_order_acquire) > 0 ||
           atomic_load_explicit(&e->stopping, memory_order_relaxed);
}

/* A pool task: runs ready ops until the FIFO stays empty for a spin, then
 * gives its worker back to the pool. */
static void dispatcher_main(void *arg) {
    pardo_engine *e = &engine;
    int slot = (int)(intptr_t)arg;
    uint64_t worked_ns = 0; /* as the pool's workers: spin for a quarter of the work just done (spin.h) */
    for (;;) {
        engine_op *op = pop_ready(e);
        if (op) {
            const uint64_t t0 = pardo_now_ns();
            run_chain(e, op);
            worked_ns = pardo_now_ns() - t0;
            continue;
        }
        atomic_fetch_add_explicit(&e->n_spinning, 1, memory_order_relaxed);
        /* helping forks meanwhile, as its worker would */
        pardo_thread_pool_spin_helping(fifo_has_ops, e, worked_ns ? pardo_spin_budget(worked_ns) : 0);
        worked_ns = 0;
        pthread_mutex_lock(&e->mu);
        atomic_fetch_sub_explicit(&e->n_spinning, 1, memory_order_relaxed);
        if (atomic_load_explicit(&e->n_ready, memory_order_relaxed) > 0) {
            pthread_mutex_unlock(&e->mu);
            continue;
        }
        e->n_dispatchers--;
        e->free_slots[e->n_free_slots++] = slot;
        pthread_mutex_unlock(&e->mu);
        return;
    }
}

/* What a wait waits for: its own condition, or ops to run. */
typedef struct wait_cond {
    pardo_engine *e;
    bool (*done)(pardo_engine *, void *);
    void *arg;
} wait_cond;

static bool done_or_work(void *p) {
    wait_cond *w = p;
    return w->done(w->e, w->arg) || atomic_load_explicit(&w->e->n_ready, memory_order_acquire) > 0;
}

/* Until done(arg) holds: runs ready ops; with none, waits in the pool
 * (pardo_thread_pool_wait_until: helping forks, spinning, then blocked
 * until the engine notifies: ops queued, a wait's op done, nothing
 * pending). */
static void wait_running(pardo_engine *e, bool (*done)(pardo_engine *, void *), void *arg) {
    wait_cond w = {e, done, arg};
    uint64_t worked_ns = 0; /* the last chain of ops run here: how long to spin for more (pardo_spin_budget) */
    atomic_fetch_add(&e->n_waiting, 1);
    for (;;) {
        if (done(e, arg)) break;
        engine_op *op = pop_ready(e);
        if (op) {
            const uint64_t t0 = pardo_now_ns();
            run_chain(e, op);
            worked_ns = pardo_now_ns() - t0;
            continue;
        }
        pardo_thread_pool_wait_until(done_or_work, &w, worked_ns ? pardo_spin_budget(worked_ns) : 0);
        worked_ns = 0;
    }
    atomic_fetch_sub(&e->n_waiting, 1);
}

/* ---- the API ---- */

int pardo_engine_push(pardo_engine *e, pardo_engine_fn fn, void *arg, pardo_var *const *reads, int n_reads,
                      pardo_var *const *writes, int n_writes, const char *name, pardo_status *st) {
    const char *nm = name ? name : "(unnamed)";
    if (!fn) return pardo_errorf(st, PARDO_EINVAL, "engine push '%s': no function", nm);
    if (n_reads < 0 || n_writes < 0 || (n_reads > 0 && !reads) || (n_writes > 0 && !writes))
        return pardo_errorf(st, PARDO_EINVAL, "engine push '%s': bad var list (%d reads, %d writes)", nm, n_reads,
                            n_writes);
    int n = n_reads + n_writes;
    for (int i = 0; i < n; i++) {
        pardo_var *v = i < n_reads ? reads[i] : writes[i - n_reads];
        if (!v)
            return pardo_errorf(st, PARDO_EINVAL, "engine push '%s': %s %d is NULL", nm,
                                i < n_reads ? "read" : "write", i < n_reads ? i : i - n_reads);
        for (int j = 0; j < i; j++) {
            pardo_var *u = j < n_reads ? reads[j] : writes[j - n_reads];
            if (u != v) continue;
            bool both = (j < n_reads) != (i < n_reads);
            return pardo_errorf(st, PARDO_EINVAL, "engine push '%s': a var is %s (%s %d and %s %d)", nm,
                                both ? "both read and written" : "listed twice", j < n_reads ? "read" : "write",
                                j < n_reads ? j : j - n_reads, i < n_reads ? "read" : "write",
                                i < n_reads ? i : i - n_reads);
        }
    }
    engine_op *op = alloc_op(e, n);
    if (!op) return pardo_errorf(st, PARDO_ENOMEM, "engine push '%s': out of memory", nm);
    op->fn = fn;
    op->arg = arg;
    op->name = name;
    op->kind = OP_USER;
    op->n_deps = n;
    op->n_reads = n_reads;
    atomic_store_explicit(&op->wait, n + 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->pushed, 1, memory_order_relaxed);
    int granted = 0;
    for (int i = 0; i < n; i++) {
        dep_entry *d = &op->deps[i];
        d->op = op;
        d->var = i < n_reads ? reads[i] : writes[i - n_reads];
        d->write = i >= n_reads;
        d->next = NULL;
        if (append_dep(d)) granted++;
    }
    if (atomic_fetch_sub_explicit(&op->wait, granted + 1, memory_order_acq_rel) == granted + 1) {
        ready_list ready = {0};
        ready_add(&ready, op);
        dispatch(e, &ready);
    }
    return PARDO_OK;
}

/* Pushes an op of the engine's own on v (a wait's read, a delete's write). */
static int push_internal(pardo_engine *e, op_kind kind, pardo_var *v, atomic_bool *woken, pardo_status *st) {
    engine_op *op = alloc_op(e, 1);
    if (!op) return pardo_errorf(st, PARDO_ENOMEM, "engine: out of memory");
    op->fn = NULL;
    op->arg = NULL;
    op->name = kind == OP_WAIT ? "wait_to_read" : "delete_var";
    op->kind = kind;
    op->n_deps = 1;
    op->n_reads = kind == OP_WAIT ? 1 : 0;
    op->woken = woken;
    atomic_store_explicit(&op->wait, 2, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->pushed, 1, memory_order_relaxed);
    dep_entry *d = &op->deps[0];
    *d = (dep_entry){.op = op, .var = v, .write = kind == OP_DELETE};
    int granted = append_dep(d) ? 1 : 0;
    if (atomic_fetch_sub_explicit(&op->wait, granted + 1, memory_order_acq_rel) == granted + 1) {
        ready_list ready = {0};
        ready_add(&ready, op);
        dispatch(e, &ready);
    }
    return PARDO_OK;
}

static int refuse_inside_op(const char *what, pardo_status *st) {
    return pardo_errorf(st, PARDO_EINVAL, "engine: %s called from inside engine op '%s' (it would deadlock)", what,
                        running_op[0] ? running_op : "(unnamed)");
}

static bool flag_set(pardo_engine *e, void *arg) {
    (void)e;
    return atomic_load_explicit((atomic_bool *)arg, memory_order_acquire);
}

static bool nothing_pending(pardo_engine *e, void *arg) {
    (void)arg;
    return pending_now(e) == 0;
}

int pardo_engine_wait_to_read(pardo_engine *e, pardo_var *v, pardo_status *st) {
    if (!v) return pardo_errorf(st, PARDO_EINVAL, "engine: wait_to_read of a NULL var");
    if (running_op) return refuse_inside_op("wait_to_read", st);
    atomic_bool woken = false;
    if (push_internal(e, OP_WAIT, v, &woken, st) != PARDO_OK) return st->code;
    wait_running(e, flag_set, &woken);
    int rc = PARDO_OK;
    lock_flag(&v->lock);
    if (var_has_err(e, v)) {
        if (st) *st = v->err;
        rc = v->err.code;
        v->has_err = false;
    }
    unlock_flag(&v->lock);
    return rc;
}

int pardo_engine_wait_all(pardo_engine *e, pardo_status *st) {
    if (running_op) return refuse_inside_op("wait_all", st);
    wait_running(e, nothing_pending, NULL);
    int rc = PARDO_OK;
    pthread_mutex_lock(&e->mu);
    if (e->has_first_err) {
        if (st) *st = e->first_err;
        rc = e->first_err.code;
        e->has_first_err = false;
    }
    atomic_fetch_add_explicit(&e->epoch, 1, memory_order_relaxed);
    atomic_store_explicit(&e->errors_live, 0, memory_order_relaxed);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int pardo_engine_delete_var(pardo_engine *e, pardo_var *v, pardo_status *st) {
    if (!v) return pardo_errorf(st, PARDO_EINVAL, "engine: delete_var of a NULL var");
    return push_internal(e, OP_DELETE, v, NULL, st);
}
