/* check_engine.c - the dependency engine (src/engine/engine.h): per-var
 * order (reads after a write wait, reads share, a write waits for the reads
 * before it), ops on no common var at once, push never running the
 * function, a stress of random pushes from several threads checked against
 * running the same ops in push order, and the errors: poisoning and its
 * clearing, refused pushes, waits from inside an op, delete_var with ops
 * pending, and no heap growth in the steady state. */
#include <check.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check_suites.h"
#include "engine/engine.h"
#include "exec/thread_pool.h"

static pardo_engine *eng;

static void setup_pool4(void) {
    pardo_status st;
    ck_assert_int_eq(pardo_thread_pool_configure(4, &st), PARDO_OK);
    eng = pardo_engine_get();
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---- order ---- */

typedef struct log_op {
    int *log;
    atomic_int *n; // the log's length
    int id;
    long sleep_us;
} log_op;

static int append_id(void *p, pardo_status *st) {
    (void)st;
    log_op *o = p;
    if (o->sleep_us) sleep_us(o->sleep_us);
    o->log[atomic_fetch_add(o->n, 1)] = o->id;
    return PARDO_OK;
}

START_TEST(writes_on_one_var_run_in_push_order) {
    enum { N = 2000 };
    static int log[N];
    static log_op ops[N];
    atomic_int n = 0;
    pardo_status st;
    pardo_var *v = pardo_engine_new_var(eng, &st);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < N; i++) {
        ops[i] = (log_op){.log = log, .n = &n, .id = i};
        ck_assert_int_eq(pardo_engine_push(eng, append_id, &ops[i], NULL, 0, &v, 1, "append", &st), PARDO_OK);
    }
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&n), N);
    for (int i = 0; i < N; i++) ck_assert_int_eq(log[i], i);
    ck_assert_int_eq(pardo_engine_delete_var(eng, v, &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_pending(eng), 0);
}
END_TEST

/* Two ops that each wait (bounded) for the other to start: both see the
 * other only if they run at once. */
typedef struct meet_op {
    atomic_int *arrived;
    int need;     // how many must arrive
    bool met;     // all arrived while this one waited
} meet_op;

static int meet(void *p, pardo_status *st) {
    (void)st;
    meet_op *m = p;
    atomic_fetch_add(m->arrived, 1);
    for (int i = 0; i < 20000 && atomic_load(m->arrived) < m->need; i++) sleep_us(100);
    m->met = atomic_load(m->arrived) >= m->need;
    return PARDO_OK;
}

START_TEST(reads_between_writes_run_at_once) {
    pardo_status st;
    pardo_var *v = pardo_engine_new_var(eng, &st);
    static int log[4];
    atomic_int n = 0, arrived = 0;
    log_op w = {.log = log, .n = &n, .id = 1};
    meet_op r[3] = {{&arrived, 3, false}, {&arrived, 3, false}, {&arrived, 3, false}};
    ck_assert_int_eq(pardo_engine_push(eng, append_id, &w, NULL, 0, &v, 1, "write", &st), PARDO_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pardo_engine_push(eng, meet, &r[i], &v, 1, NULL, 0, "read", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    for (int i = 0; i < 3; i++) ck_assert(r[i].met);
    pardo_engine_delete_var(eng, v, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

START_TEST(ops_on_different_vars_run_at_once) {
    pardo_status st;
    pardo_var *a = pardo_engine_new_var(eng, &st), *b = pardo_engine_new_var(eng, &st);
    atomic_int arrived = 0;
    meet_op m[2] = {{&arrived, 2, false}, {&arrived, 2, false}};
    ck_assert_int_eq(pardo_engine_push(eng, meet, &m[0], NULL, 0, &a, 1, "a", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_push(eng, meet, &m[1], NULL, 0, &b, 1, "b", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert(m[0].met && m[1].met);
    pardo_engine_delete_var(eng, a, &st);
    pardo_engine_delete_var(eng, b, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

/* Reads (slow) before a write and after it: the write sees every earlier
 * read finished, and the later reads see the write. */
typedef struct rw_op {
    atomic_int *reads_done;
    atomic_int *writes_done;
    int reads_before;   // for the write: reads that must have finished
    int seen;           // what the op saw: reads finished (write) or writes finished (read)
    bool write;
} rw_op;

static int rw(void *p, pardo_status *st) {
    (void)st;
    rw_op *o = p;
    if (o->write) {
        o->seen = atomic_load(o->reads_done);
        atomic_fetch_add(o->writes_done, 1);
    } else {
        sleep_us(2000);
        o->seen = atomic_load(o->writes_done);
        atomic_fetch_add(o->reads_done, 1);
    }
    return PARDO_OK;
}

START_TEST(a_write_waits_for_the_reads_before_it) {
    pardo_status st;
    pardo_var *v = pardo_engine_new_var(eng, &st);
    atomic_int reads_done = 0, writes_done = 0;
    rw_op ops[7];
    for (int i = 0; i < 7; i++)
        ops[i] = (rw_op){.reads_done = &reads_done, .writes_done = &writes_done, .write = i == 3};
    for (int i = 0; i < 7; i++) {
        bool w = ops[i].write;
        ck_assert_int_eq(pardo_engine_push(eng, rw, &ops[i], w ? NULL : &v, w ? 0 : 1, w ? &v : NULL, w ? 1 : 0,
                                           "rw", &st),
                         PARDO_OK);
    }
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v, &st), PARDO_OK);
    ck_assert_int_eq(ops[3].seen, 3); /* the three reads pushed before it */
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(ops[i].seen, 0);
    for (int i = 4; i < 7; i++) ck_assert_int_eq(ops[i].seen, 1);
    pardo_engine_delete_var(eng, v, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

typedef struct thread_op {
    pthread_t ran_on;
    atomic_bool ran;
} thread_op;

static int note_thread(void *p, pardo_status *st) {
    (void)st;
    thread_op *o = p;
    o->ran_on = pthread_self();
    atomic_store(&o->ran, true);
    return PARDO_OK;
}

/* With a pool of one thread (no workers) nothing runs until a wait, which runs it on the waiting thread. */
START_TEST(push_never_runs_the_function) {
    pardo_status st;
    ck_assert_int_eq(pardo_thread_pool_configure(1, &st), PARDO_OK);
    pardo_engine *e = pardo_engine_get();
    pardo_var *v = pardo_engine_new_var(e, &st);
    thread_op o = {0};
    ck_assert_int_eq(pardo_engine_push(e, note_thread, &o, NULL, 0, &v, 1, "t", &st), PARDO_OK);
    ck_assert(!atomic_load(&o.ran));
    ck_assert_int_eq(pardo_engine_wait_to_read(e, v, &st), PARDO_OK);
    ck_assert(atomic_load(&o.ran));
    ck_assert(pthread_equal(o.ran_on, pthread_self()));
    pardo_engine_delete_var(e, v, &st);
    pardo_engine_wait_all(e, &st);
}
END_TEST

/* A slow op first on the var: the ones pushed after it cannot have run
 * when push returns, whatever the pool does. */
START_TEST(push_returns_before_the_op_runs) {
    pardo_status st;
    pardo_var *v = pardo_engine_new_var(eng, &st);
    static int log[2];
    atomic_int n = 0;
    log_op slow = {.log = log, .n = &n, .id = 0, .sleep_us = 20000};
    thread_op o = {0};
    ck_assert_int_eq(pardo_engine_push(eng, append_id, &slow, NULL, 0, &v, 1, "slow", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_push(eng, note_thread, &o, NULL, 0, &v, 1, "after", &st), PARDO_OK);
    ck_assert(!atomic_load(&o.ran));
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert(atomic_load(&o.ran));
    pardo_engine_delete_var(eng, v, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

/* ---- the stress test ---- */

enum { NVARS = 64, MAXV = 4 };

typedef struct stress_op {
    int64_t *vals;        // the shared values, one per var (the engine's order makes these plain accesses safe)
    int reads[MAXV], writes[MAXV];
    int n_reads, n_writes;
    int64_t seen;         // what the run saw: a hash of its reads' values and its writes' old values
    int64_t id;
} stress_op;

static int64_t mix(int64_t h, int64_t x) {
    uint64_t z = (uint64_t)h * 0x9E3779B97F4A7C15u ^ (uint64_t)x;
    z ^= z >> 29;
    return (int64_t)(z * 0xBF58476D1CE4E5B9u);
}

/* What an op does to the values: the same in the engine and in the replay. */
static void stress_apply(stress_op *o, int64_t *vals) {
    int64_t h = o->id;
    for (int i = 0; i < o->n_reads; i++) h = mix(h, vals[o->reads[i]]);
    for (int i = 0; i < o->n_writes; i++) h = mix(h, vals[o->writes[i]]);
    o->seen = h;
    for (int i = 0; i < o->n_writes; i++) vals[o->writes[i]] = mix(h, o->writes[i]);
}

static int stress_run(void *p, pardo_status *st) {
    (void)st;
    stress_op *o = p;
    stress_apply(o, o->vals);
    return PARDO_OK;
}

static uint64_t rng_next(uint64_t *s) {
    *s += 0x9E3779B97F4A7C15u;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* Picks distinct vars out of [lo, lo + span) for o's reads and writes. */
static void stress_pick(stress_op *o, uint64_t *rng, int lo, int span) {
    int used[2 * MAXV], n_used = 0;
    o->n_reads = (int)(rng_next(rng) % 3);
    o->n_writes = 1 + (int)(rng_next(rng) % 2);
    for (int k = 0; k < o->n_reads + o->n_writes; k++) {
        int v;
        bool dup;
        do {
            v = lo + (int)(rng_next(rng) % (uint64_t)span);
            dup = false;
            for (int j = 0; j < n_used; j++) dup |= used[j] == v;
        } while (dup);
        used[n_used++] = v;
        if (k < o->n_reads) o->reads[k] = v;
        else o->writes[k - o->n_reads] = v;
    }
}

typedef struct stress_thread {
    stress_op *ops;       // this thread's ops (or the shared array, with seq)
    int n;
    pardo_var **vars;
    pthread_mutex_t *order; // when set: pushes are serialised and numbered through *seq
    atomic_int *seq;
    int *order_of;        // order_of[seq] = op index, when order is set
    int lo, span;         // the vars this thread's ops use
    uint64_t seed;
    int64_t *vals;
    int base;             // first op index of this thread in the shared array
} stress_thread;

static int push_stress(stress_op *o, pardo_var **vars) {
    pardo_var *r[MAXV], *w[MAXV];
    for (int i = 0; i < o->n_reads; i++) r[i] = vars[o->reads[i]];
    for (int i = 0; i < o->n_writes; i++) w[i] = vars[o->writes[i]];
    pardo_status st;
    return pardo_engine_push(eng, stress_run, o, r, o->n_reads, w, o->n_writes, "stress", &st);
}

static void *stress_pusher(void *p) {
    stress_thread *t = p;
    uint64_t rng = t->seed;
    for (int i = 0; i < t->n; i++) {
        stress_op *o = &t->ops[i];
        o->vals = t->vals;
        o->id = t->base + i;
        stress_pick(o, &rng, t->lo, t->span);
        if (t->order) pthread_mutex_lock(t->order);
        if (t->order) t->order_of[atomic_fetch_add(t->seq, 1)] = t->base + i;
        int rc = push_stress(o, t->vars);
        if (t->order) pthread_mutex_unlock(t->order);
        if (rc != PARDO_OK) return (void *)1;
    }
    return NULL;
}

/* 10^5 pushes over 64 shared vars from 4 threads, numbered as pushed; the
 * values and what each op saw equal a replay in that order. */
START_TEST(random_pushes_from_four_threads_match_push_order) {
    enum { NT = 4, PER = 25000, N = NT * PER };
    static stress_op ops[N], replay[N];
    static int order_of[N];
    static int64_t vals[NVARS], ref[NVARS];
    pardo_var *vars[NVARS];
    pardo_status st;
    for (int i = 0; i < NVARS; i++) ck_assert_ptr_nonnull(vars[i] = pardo_engine_new_var(eng, &st));
    for (int i = 0; i < NVARS; i++) vals[i] = ref[i] = i;
    pthread_mutex_t order = PTHREAD_MUTEX_INITIALIZER;
    atomic_int seq = 0;
    pthread_t th[NT];
    stress_thread t[NT];
    for (int k = 0; k < NT; k++) {
        t[k] = (stress_thread){.ops = &ops[k * PER], .n = PER, .vars = vars, .order = &order, .seq = &seq,
                               .order_of = order_of, .lo = 0, .span = NVARS, .seed = 7 + (uint64_t)k,
                               .vals = vals, .base = k * PER};
        ck_assert_int_eq(pthread_create(&th[k], NULL, stress_pusher, &t[k]), 0);
    }
    for (int k = 0; k < NT; k++) {
        void *rc;
        pthread_join(th[k], &rc);
        ck_assert_ptr_null(rc);
    }
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    for (int s = 0; s < N; s++) {
        replay[s] = ops[order_of[s]];
        stress_apply(&replay[s], ref);
        ck_assert_msg(replay[s].seen == ops[order_of[s]].seen, "op %d (pushed %d-th) saw other values",
                      order_of[s], s);
    }
    for (int i = 0; i < NVARS; i++) ck_assert(vals[i] == ref[i]);
    for (int i = 0; i < NVARS; i++) pardo_engine_delete_var(eng, vars[i], &st);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_pending(eng), 0);
}
END_TEST

/* Four threads push at once, unserialised, each on its own 16 vars: each
 * thread's values equal a replay of its own pushes. */
START_TEST(concurrent_pushers_on_their_own_vars) {
    enum { NT = 4, PER = 20000, SPAN = NVARS / NT };
    static stress_op ops[NT * PER];
    static int64_t vals[NVARS], ref[NVARS];
    pardo_var *vars[NVARS];
    pardo_status st;
    for (int i = 0; i < NVARS; i++) vars[i] = pardo_engine_new_var(eng, &st);
    for (int i = 0; i < NVARS; i++) vals[i] = ref[i] = 100 + i;
    pthread_t th[NT];
    stress_thread t[NT];
    for (int k = 0; k < NT; k++) {
        t[k] = (stress_thread){.ops = &ops[k * PER], .n = PER, .vars = vars, .lo = k * SPAN, .span = SPAN,
                               .seed = 99 + (uint64_t)k, .vals = vals, .base = k * PER};
        ck_assert_int_eq(pthread_create(&th[k], NULL, stress_pusher, &t[k]), 0);
    }
    for (int k = 0; k < NT; k++) pthread_join(th[k], NULL);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    for (int i = 0; i < NT * PER; i++) {
        stress_op r = ops[i];
        stress_apply(&r, ref);
        ck_assert(r.seen == ops[i].seen);
    }
    for (int i = 0; i < NVARS; i++) ck_assert(vals[i] == ref[i]);
    for (int i = 0; i < NVARS; i++) pardo_engine_delete_var(eng, vars[i], &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

static int empty_op(void *p, pardo_status *st) {
    (void)p;
    (void)st;
    return PARDO_OK;
}

/* After a first round has grown the free lists, a third round of the same
 * pushes takes nothing from the heap. On one thread, so that the ops in
 * flight are the same in every round (they run at the waits). */
START_TEST(no_heap_growth_in_the_steady_state) {
    pardo_status st;
    ck_assert_int_eq(pardo_thread_pool_configure(1, &st), PARDO_OK);
    eng = pardo_engine_get();
    pardo_var *vars[8];
    for (int i = 0; i < 8; i++) vars[i] = pardo_engine_new_var(eng, &st);
    size_t before = 0;
    for (int round = 0; round < 3; round++) {
        if (round == 2) before = mallinfo2().uordblks;
        for (int i = 0; i < 20000; i++) {
            pardo_var *r = vars[i % 8], *w[2] = {vars[(i + 1) % 8], vars[(i + 3) % 8]};
            ck_assert_int_eq(pardo_engine_push(eng, empty_op, NULL, &r, 1, w, 2, "e", &st), PARDO_OK);
            if (i % 5000 == 4999) ck_assert_int_eq(pardo_engine_wait_to_read(eng, r, &st), PARDO_OK);
        }
        ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    }
    ck_assert_uint_le(mallinfo2().uordblks, before);
    for (int i = 0; i < 8; i++) pardo_engine_delete_var(eng, vars[i], &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

/* An op with more vars than a block holds inline. */
START_TEST(an_op_with_many_vars) {
    enum { NV = 40 };
    pardo_status st;
    pardo_var *vars[NV];
    for (int i = 0; i < NV; i++) vars[i] = pardo_engine_new_var(eng, &st);
    static int log[3];
    atomic_int n = 0;
    log_op a = {.log = log, .n = &n, .id = 0, .sleep_us = 5000}, b = {.log = log, .n = &n, .id = 1},
           c = {.log = log, .n = &n, .id = 2};
    ck_assert_int_eq(pardo_engine_push(eng, append_id, &a, NULL, 0, &vars[NV - 1], 1, "a", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_push(eng, append_id, &b, vars, NV - 10, &vars[NV - 10], 10, "b", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_push(eng, append_id, &c, &vars[NV - 1], 1, NULL, 0, "c", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(log[0], 0);
    ck_assert_int_eq(log[1], 1);
    ck_assert_int_eq(log[2], 2);
    for (int i = 0; i < NV; i++) pardo_engine_delete_var(eng, vars[i], &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

/* ---- errors ---- */

typedef struct fail_op {
    atomic_int *runs;
    bool fail;
} fail_op;

static int maybe_fail(void *p, pardo_status *st) {
    fail_op *o = p;
    atomic_fetch_add(o->runs, 1);
    if (o->fail) return pardo_errorf(st, PARDO_ERUNTIME, "boom in the kernel");
    return PARDO_OK;
}

START_TEST(a_failure_poisons_what_it_writes_and_what_follows) {
    pardo_status st;
    pardo_var *v1 = pardo_engine_new_var(eng, &st), *v2 = pardo_engine_new_var(eng, &st),
              *v3 = pardo_engine_new_var(eng, &st);
    atomic_int runs_a = 0, runs_b = 0, runs_c = 0, runs_d = 0;
    fail_op a = {&runs_a, true}, b = {&runs_b, false}, c = {&runs_c, false}, d = {&runs_d, false};
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &a, NULL, 0, &v1, 1, "op_a", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &b, &v1, 1, &v2, 1, "op_b", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &c, &v2, 1, NULL, 0, "op_c", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &d, NULL, 0, &v3, 1, "op_d", &st), PARDO_OK);
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v2, &st), PARDO_ERUNTIME);
    ck_assert_str_eq(st.msg, "engine op 'op_a': boom in the kernel");
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v2, &st), PARDO_OK); /* cleared */
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v3, &st), PARDO_OK); /* unrelated */
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v1, &st), PARDO_ERUNTIME);
    ck_assert_ptr_nonnull(strstr(st.msg, "op_a"));
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v1, &st), PARDO_OK);
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_ERUNTIME);
    ck_assert_ptr_nonnull(strstr(st.msg, "boom in the kernel"));
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK); /* cleared */
    ck_assert_int_eq(atomic_load(&runs_a), 1);
    ck_assert_int_eq(atomic_load(&runs_b), 0);
    ck_assert_int_eq(atomic_load(&runs_c), 0);
    ck_assert_int_eq(atomic_load(&runs_d), 1);
    /* cleared vars run their ops again */
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &b, &v1, 1, &v2, 1, "op_b", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v2, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&runs_b), 1);
    pardo_engine_delete_var(eng, v1, &st);
    pardo_engine_delete_var(eng, v2, &st);
    pardo_engine_delete_var(eng, v3, &st);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
}
END_TEST

START_TEST(wait_all_returns_the_first_error_and_clears_every_var) {
    pardo_status st;
    pardo_var *v1 = pardo_engine_new_var(eng, &st), *v2 = pardo_engine_new_var(eng, &st);
    atomic_int runs = 0;
    fail_op f = {&runs, true}, ok = {&runs, false};
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &f, NULL, 0, &v1, 1, "first", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v1, &st), PARDO_ERUNTIME); /* first is done */
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &f, NULL, 0, &v2, 1, "second", &st), PARDO_OK);
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_ERUNTIME);
    ck_assert_str_eq(st.msg, "engine op 'first': boom in the kernel");
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v2, &st), PARDO_OK); /* cleared by wait_all */
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &ok, &v2, 1, &v1, 1, "after", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&runs), 3);
    pardo_engine_delete_var(eng, v1, &st);
    pardo_engine_delete_var(eng, v2, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

/* A failing op that returns a code without a message still names itself. */
static int fail_silently(void *p, pardo_status *st) {
    (void)p;
    (void)st;
    return PARDO_EIO;
}

START_TEST(a_code_without_a_message) {
    pardo_status st;
    pardo_var *v = pardo_engine_new_var(eng, &st);
    ck_assert_int_eq(pardo_engine_push(eng, fail_silently, NULL, NULL, 0, &v, 1, "quiet", &st), PARDO_OK);
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, v, &st), PARDO_EIO);
    ck_assert_ptr_nonnull(strstr(st.msg, "'quiet'"));
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_EIO);
    pardo_engine_delete_var(eng, v, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

START_TEST(bad_pushes_are_refused) {
    pardo_status st;
    pardo_var *a = pardo_engine_new_var(eng, &st), *b = pardo_engine_new_var(eng, &st);
    atomic_int runs = 0;
    fail_op ok = {&runs, false};
    pardo_var *twice[2] = {a, a}, *none[1] = {NULL};
    ck_assert_int_eq(pardo_engine_push(eng, NULL, NULL, &a, 1, NULL, 0, "nofn", &st), PARDO_EINVAL);
    ck_assert_ptr_nonnull(strstr(st.msg, "no function"));
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &ok, twice, 2, NULL, 0, "dup", &st), PARDO_EINVAL);
    ck_assert_ptr_nonnull(strstr(st.msg, "listed twice"));
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &ok, NULL, 0, twice, 2, "dupw", &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &ok, &a, 1, &a, 1, "both", &st), PARDO_EINVAL);
    ck_assert_ptr_nonnull(strstr(st.msg, "both read and written"));
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &ok, none, 1, NULL, 0, "null", &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &ok, NULL, 2, NULL, 0, "nolist", &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_engine_pending(eng), 0);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&runs), 0);
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, NULL, &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_engine_delete_var(eng, NULL, &st), PARDO_EINVAL);
    /* a good push still works after the refusals */
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &ok, &a, 1, &b, 1, "good", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&runs), 1);
    pardo_engine_delete_var(eng, a, &st);
    pardo_engine_delete_var(eng, b, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

typedef struct waiting_op {
    pardo_var *v;
    int rc_read, rc_all;
    pardo_status st_read, st_all;
} waiting_op;

static int wait_inside(void *p, pardo_status *st) {
    (void)st;
    waiting_op *o = p;
    o->rc_read = pardo_engine_wait_to_read(eng, o->v, &o->st_read);
    o->rc_all = pardo_engine_wait_all(eng, &o->st_all);
    return PARDO_OK;
}

START_TEST(a_wait_inside_an_op_is_refused) {
    pardo_status st;
    pardo_var *v = pardo_engine_new_var(eng, &st), *w = pardo_engine_new_var(eng, &st);
    waiting_op o = {.v = v};
    ck_assert_int_eq(pardo_engine_push(eng, wait_inside, &o, NULL, 0, &w, 1, "waiter", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(o.rc_read, PARDO_EINVAL);
    ck_assert_int_eq(o.rc_all, PARDO_EINVAL);
    ck_assert_ptr_nonnull(strstr(o.st_read.msg, "inside engine op 'waiter'"));
    ck_assert_ptr_nonnull(strstr(o.st_all.msg, "wait_all"));
    pardo_engine_delete_var(eng, v, &st);
    pardo_engine_delete_var(eng, w, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

/* Pushes from inside an op are allowed, and wait_all waits for them too. */
typedef struct spawn_op {
    pardo_var *v;
    log_op child;
} spawn_op;

static int spawn(void *p, pardo_status *st) {
    spawn_op *o = p;
    return pardo_engine_push(eng, append_id, &o->child, NULL, 0, &o->v, 1, "child", st);
}

START_TEST(a_push_from_inside_an_op) {
    pardo_status st;
    pardo_var *v = pardo_engine_new_var(eng, &st), *w = pardo_engine_new_var(eng, &st);
    static int log[1];
    atomic_int n = 0;
    spawn_op o = {.v = v, .child = {.log = log, .n = &n, .id = 5, .sleep_us = 2000}};
    ck_assert_int_eq(pardo_engine_push(eng, spawn, &o, NULL, 0, &w, 1, "parent", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&n), 1);
    ck_assert_int_eq(log[0], 5);
    pardo_engine_delete_var(eng, v, &st);
    pardo_engine_delete_var(eng, w, &st);
    pardo_engine_wait_all(eng, &st);
}
END_TEST

START_TEST(delete_var_waits_for_its_pending_ops) {
    pardo_status st;
    enum { N = 6 };
    pardo_var *v = pardo_engine_new_var(eng, &st);
    static int log[N];
    atomic_int n = 0;
    log_op ops[N];
    for (int i = 0; i < N; i++) {
        ops[i] = (log_op){.log = log, .n = &n, .id = i, .sleep_us = 3000};
        bool w = i % 2 == 0;
        ck_assert_int_eq(pardo_engine_push(eng, append_id, &ops[i], w ? NULL : &v, w ? 0 : 1, w ? &v : NULL, w,
                                           "pending", &st),
                         PARDO_OK);
    }
    ck_assert_int_eq(pardo_engine_delete_var(eng, v, &st), PARDO_OK);
    ck_assert_int_gt(pardo_engine_pending(eng), 0); /* the ops take 18 ms at least */
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&n), N);
    ck_assert_int_eq(pardo_engine_pending(eng), 0);
    /* a poisoned var is deleted too, and a new var starts clean */
    atomic_int runs = 0;
    fail_op f = {&runs, true}, ok = {&runs, false};
    pardo_var *p = pardo_engine_new_var(eng, &st);
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &f, NULL, 0, &p, 1, "bad", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_delete_var(eng, p, &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_ERUNTIME);
    pardo_var *q = pardo_engine_new_var(eng, &st);
    ck_assert_int_eq(pardo_engine_push(eng, maybe_fail, &ok, NULL, 0, &q, 1, "fresh", &st), PARDO_OK);
    ck_assert_int_eq(pardo_engine_wait_to_read(eng, q, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&runs), 2);
    pardo_engine_delete_var(eng, q, &st);
    ck_assert_int_eq(pardo_engine_wait_all(eng, &st), PARDO_OK);
}
END_TEST

Suite *make_engine_suite(void) {
    Suite *s = suite_create("engine");
    TCase *core = tcase_create("Core");
    tcase_add_checked_fixture(core, setup_pool4, NULL);
    tcase_set_timeout(core, 60);
    tcase_add_test(core, writes_on_one_var_run_in_push_order);
    tcase_add_test(core, reads_between_writes_run_at_once);
    tcase_add_test(core, ops_on_different_vars_run_at_once);
    tcase_add_test(core, a_write_waits_for_the_reads_before_it);
    tcase_add_test(core, push_returns_before_the_op_runs);
    tcase_add_test(core, random_pushes_from_four_threads_match_push_order);
    tcase_add_test(core, concurrent_pushers_on_their_own_vars);
    tcase_add_test(core, an_op_with_many_vars);
    tcase_add_test(core, a_push_from_inside_an_op);
    suite_add_tcase(s, core);
    TCase *one = tcase_create("OneThread");
    tcase_add_test(one, push_never_runs_the_function);
    tcase_add_test(one, no_heap_growth_in_the_steady_state);
    suite_add_tcase(s, one);
    TCase *err = tcase_create("Errors");
    tcase_add_checked_fixture(err, setup_pool4, NULL);
    tcase_add_test(err, a_failure_poisons_what_it_writes_and_what_follows);
    tcase_add_test(err, wait_all_returns_the_first_error_and_clears_every_var);
    tcase_add_test(err, a_code_without_a_message);
    tcase_add_test(err, bad_pushes_are_refused);
    tcase_add_test(err, a_wait_inside_an_op_is_refused);
    tcase_add_test(err, delete_var_waits_for_its_pending_ops);
    suite_add_tcase(s, err);
    return s;
}
