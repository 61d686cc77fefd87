/* check_thread_pool.c - the singleton pool: sizing, lazy start, fork reset,
 * every item run exactly once, never more threads than configured, a loop
 * that only idle threads help (pardo_thread_pool_for_idle), an idle pool
 * that burns no CPU, pardo_parallel_for's ggml split, and errors. Check
 * forks each test, so each starts with a fresh pool (that is what the
 * pthread_atfork reset is for). */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_suites.h"
#include "op.h"
#include "test_util.h"
#include "exec/thread_pin.h"
#include "exec/thread_pool.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

/* Sizes the pool; under CK_FORK=no (one process for every test) a pool an
 * earlier test started is shut down first. */
static void configure(int n) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != n) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(n, &st) == PARDO_OK, "%s", st.msg);
}

typedef struct count_job {
    atomic_int *hits;   // per item
    atomic_int running; // items running now
    atomic_int most;    // the most that ran at once
    int spin;           // busy work per item
} count_job;

static void count_item(void *arg, int64_t i) {
    count_job *j = arg;
    int now = atomic_fetch_add(&j->running, 1) + 1;
    int most = atomic_load(&j->most);
    while (now > most && !atomic_compare_exchange_weak(&j->most, &most, now)) {
    }
    volatile double x = 0;
    for (int k = 0; k < j->spin; k++) x += k;
    atomic_fetch_add(&j->hits[i], 1);
    atomic_fetch_sub(&j->running, 1);
}

START_TEST(size_is_configured_before_start) {
    pardo_thread_pool_shutdown(); /* a no-op in a forked test */
    ck_assert(!pardo_thread_pool_started());
    configure(3);
    ck_assert_int_eq(pardo_thread_pool_size(), 3);
    ck_assert(!pardo_thread_pool_started()); /* asking the size starts nothing */
    configure(4);                            /* still free to change */
    ck_assert_int_eq(pardo_thread_pool_size(), 4);
    atomic_int hits[1] = {0};
    count_job j = {.hits = hits};
    pardo_thread_pool_for(4, 1, count_item, &j);
    ck_assert(pardo_thread_pool_started());
    configure(4); /* the same size again is fine */
    ck_assert_int_eq(pardo_thread_pool_size(), 4);
}
END_TEST

START_TEST(size_from_environment) {
    pardo_thread_pool_shutdown();
    setenv("PARDO_NUM_THREADS", "5", 1);
    ck_assert_int_eq(pardo_thread_pool_size(), 5);
    setenv("PARDO_NUM_THREADS", "zero", 1); /* ignored: the online CPUs */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_int_eq(pardo_thread_pool_size(), cpus < 1 ? 1 : cpus > PARDO_MAX_THREADS ? PARDO_MAX_THREADS : cpus);
    setenv("PARDO_NUM_THREADS", "2", 1);
    configure(3); /* configure wins over the environment */
    ck_assert_int_eq(pardo_thread_pool_size(), 3);
    unsetenv("PARDO_NUM_THREADS");
}
END_TEST

START_TEST(every_item_runs_once) {
    configure(4);
    enum { N = 1000 };
    static atomic_int hits[N];
    const int widths[] = {1, 2, 3, 4, 16};
    const int64_t sizes[] = {0, 1, 2, 3, 7, 64, N};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            for (int i = 0; i < N; i++) atomic_store(&hits[i], 0);
            count_job j = {.hits = hits, .spin = 200};
            pardo_thread_pool_for(widths[w], sizes[s], count_item, &j);
            for (int i = 0; i < N; i++)
                ck_assert_msg(atomic_load(&hits[i]) == (i < sizes[s] ? 1 : 0), "width %d, n %lld: item %d ran %d times",
                              widths[w], (long long)sizes[s], i, atomic_load(&hits[i]));
            ck_assert_int_le(atomic_load(&j.most), widths[w] < 4 ? widths[w] : 4);
        }
}
END_TEST

START_TEST(never_more_threads_than_configured) {
    configure(2);
    enum { N = 200 };
    static atomic_int hits[N];
    count_job j = {.hits = hits, .spin = 20000};
    pardo_thread_pool_for(64, N, count_item, &j); /* asks for 64, gets 2: the caller and one worker */
    ck_assert_int_le(atomic_load(&j.most), 2);
    for (int i = 0; i < N; i++) ck_assert_int_eq(atomic_load(&hits[i]), 1);
}
END_TEST

typedef struct submit_arg {
    pthread_t caller, ran_on;
    atomic_bool done;
} submit_arg;

static void record_thread(void *p) {
    submit_arg *a = p;
    a->ran_on = pthread_self();
    atomic_store(&a->done, true);
}

START_TEST(submit_runs_on_a_worker) {
    configure(2);
    submit_arg a = {.caller = pthread_self()};
    pardo_pool_task t;
    pardo_thread_pool_submit(&t, record_thread, &a);
    struct timespec pause = {0, 1000000};
    for (int i = 0; i < 5000 && !atomic_load(&a.done); i++)
        nanosleep(&pause, NULL); /* the test polls; pardo does not */
    ck_assert(atomic_load(&a.done));
    ck_assert(!pthread_equal(a.ran_on, a.caller));
}
END_TEST

START_TEST(size_one_runs_inline) {
    configure(1);
    submit_arg a = {.caller = pthread_self()};
    pardo_pool_task t;
    pardo_thread_pool_submit(&t, record_thread, &a); /* no workers: ran before returning */
    ck_assert(atomic_load(&a.done));
    ck_assert(pthread_equal(a.ran_on, a.caller));
    atomic_int hits[8] = {0};
    count_job j = {.hits = hits};
    pardo_thread_pool_for(8, 8, count_item, &j);
    ck_assert_int_eq(atomic_load(&j.most), 1);
}
END_TEST

static void nested_item(void *arg, int64_t i) {
    (void)i;
    count_job *inner = arg;
    pardo_thread_pool_for(4, 10, count_item, inner);
}

START_TEST(forks_nest_without_deadlock) {
    configure(3);
    static atomic_int hits[10];
    count_job inner = {.hits = hits, .spin = 100};
    for (int r = 0; r < 50; r++) pardo_thread_pool_for(3, 6, nested_item, &inner);
    for (int i = 0; i < 10; i++) ck_assert_int_eq(atomic_load(&hits[i]), 300);
}
END_TEST

/* The helping join: the caller's item returns once the worker, in the
 * other item, has forked two of its own and runs one of them; that one waits
 * (5 s at most) until the other has run, which only a thread other than the
 * worker can do: the caller, waiting for the worker's item, runs it. Roles go
 * by thread, not by item index: which thread claims item 0 first is a race
 * (a spinning worker may take it before the caller does). Handshakes, not
 * sleeps, so a loaded machine cannot reorder them. */
typedef struct helped_job {
    pthread_t caller;
    atomic_int nested_started;   // the worker runs a nested item: the nested fork's other item is queued
    atomic_int second_on_caller; // 1: the nested fork's other item ran on the caller; 0: elsewhere; -1: not yet
} helped_job;

static void sleep_ms(long ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void nested_slow_item(void *arg, int64_t i) {
    (void)i;
    helped_job *j = arg;
    if (!atomic_exchange(&j->nested_started, 1)) { /* the first item taken: the worker's, which forked */
        for (int w = 0; w < 5000 && atomic_load(&j->second_on_caller) < 0; w++) sleep_ms(1);
    } else {
        atomic_store(&j->second_on_caller, pthread_equal(pthread_self(), j->caller) ? 1 : 0);
    }
}

static void outer_item(void *arg, int64_t i) {
    (void)i;
    helped_job *j = arg;
    if (pthread_equal(pthread_self(), j->caller)) { /* until the worker's nested fork is queued (at most 5 s) */
        for (int w = 0; w < 5000 && !atomic_load(&j->nested_started); w++) sleep_ms(1);
    } else {
        pardo_thread_pool_for(2, 2, nested_slow_item, arg);
    }
}

START_TEST(waiting_caller_helps_other_forks) {
    configure(2);
    helped_job j = {.caller = pthread_self()};
    atomic_init(&j.nested_started, 0);
    atomic_init(&j.second_on_caller, -1);
    pardo_thread_pool_for(2, 2, outer_item, &j);
    const int second_on_caller = atomic_load(&j.second_on_caller);
    ck_assert_int_eq(second_on_caller, 1);
}
END_TEST

/* pardo_thread_pool_for_idle: help only from threads already awake with
 * nothing to do. A blocked worker is not woken (every item on the caller, in
 * order, and nothing queued: pardo_thread_pool_idle_awake is 0); a thread
 * waiting in a join, or spinning for work, takes items. */
typedef struct idle_log {
    pthread_t caller;
    atomic_int next;       // order in which items ran
    int order[8];          // item i ran next-th
    atomic_int on_caller;  // items the caller ran
    atomic_int elsewhere;  // items another thread ran
} idle_log;

static void idle_item(void *arg, int64_t i) {
    idle_log *l = arg;
    l->order[i] = atomic_fetch_add(&l->next, 1);
    atomic_fetch_add(pthread_equal(pthread_self(), l->caller) ? &l->on_caller : &l->elsewhere, 1);
    sleep_ms(6);
}

START_TEST(idle_fork_wakes_nobody) {
    configure(2);
    static atomic_int hits[4];
    count_job warm = {.hits = hits};
    pardo_thread_pool_for(2, 4, count_item, &warm); /* starts the pool */
    /* past the worker's spin: it blocks (polled, 5 s at most: a loaded machine may run its spin late) */
    for (int w = 0; w < 5000 && pardo_thread_pool_idle_awake() > 0; w++) sleep_ms(1);
    ck_assert_int_eq(pardo_thread_pool_idle_awake(), 0);
    idle_log l = {.caller = pthread_self()};
    pardo_thread_pool_for_idle(2, 8, idle_item, &l);
    ck_assert_int_eq(atomic_load(&l.on_caller), 8);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(l.order[i], i);
}
END_TEST

/* The outer fork's items: one returns after 20 ms and its thread waits (in
 * the helping join, or spinning for work); the other, once it sees that,
 * forks an idle loop of 8 items of 6 ms, and the waiting thread takes some.
 * On a loaded machine the poll can miss the waiter's spin: up to 20 tries. */
static void idle_outer_item(void *arg, int64_t i) {
    sleep_ms(i == 0 ? 20 : 5);
    if (i == 1 && test_someone_idle_within_100ms()) pardo_thread_pool_for_idle(2, 8, idle_item, arg);
}

START_TEST(idle_fork_takes_a_waiting_thread) {
    configure(2);
    bool helped = false;
    for (int attempt = 0; attempt < 20 && !helped; attempt++) {
        idle_log l = {.caller = pthread_self()};
        pardo_thread_pool_for(2, 2, idle_outer_item, &l);
        const int here = atomic_load(&l.on_caller), there = atomic_load(&l.elsewhere);
        ck_assert(here + there == 0 || here + there == 8);
        helped = here > 0 && there > 0; /* both threads ran some: the idle one helped */
    }
    ck_assert_msg(helped, "in 20 tries no idle thread took an item");
}
END_TEST

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(idle_pool_burns_no_cpu) {
    configure(4);
    static atomic_int hits[64];
    count_job j = {.hits = hits, .spin = 100};
    pardo_thread_pool_for(4, 64, count_item, &j);
    struct timespec settle = {0, 20000000}, idle = {0, 300000000};
    nanosleep(&settle, NULL); /* past the workers' short spin */
    double before = cpu_seconds();
    nanosleep(&idle, NULL);
    double used = cpu_seconds() - before;
    ck_assert_msg(used < 0.03, "3 idle workers used %.3f s of CPU in 0.3 s", used);
}
END_TEST

START_TEST(fork_gives_the_child_a_fresh_pool) {
#ifdef UNDER_TSAN
    /* TSan does not support starting threads after a multi-threaded fork */
    return;
#endif
    configure(3);
    static atomic_int hits[16];
    count_job j = {.hits = hits, .spin = 100};
    pardo_thread_pool_for(3, 16, count_item, &j);
    ck_assert(pardo_thread_pool_started());
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int bad = pardo_thread_pool_started() ? 1 : 0; /* not started in the child */
        if (pardo_thread_pool_size() != 3) bad |= 2;   /* but it keeps the configured size */
        for (int i = 0; i < 16; i++) atomic_store(&hits[i], 0);
        pardo_thread_pool_for(3, 16, count_item, &j); /* starts a fresh pool and works */
        for (int i = 0; i < 16; i++) bad |= atomic_load(&hits[i]) == 1 ? 0 : 4;
        if (!pardo_thread_pool_started()) bad |= 8;
        _exit(bad);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_msg(WEXITSTATUS(status) == 0, "child failed checks (bits %d)", WEXITSTATUS(status));
}
END_TEST

START_TEST(shutdown_then_resize) {
    configure(3);
    static atomic_int hits[8];
    count_job j = {.hits = hits};
    pardo_thread_pool_for(3, 8, count_item, &j);
    pardo_thread_pool_shutdown();
    ck_assert(!pardo_thread_pool_started());
    configure(2);
    pardo_thread_pool_for(3, 8, count_item, &j);
    ck_assert_int_eq(pardo_thread_pool_size(), 2);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(atomic_load(&hits[i]), 2);
    pardo_thread_pool_shutdown();
}
END_TEST

typedef struct range_log {
    pthread_mutex_t mu;
    int n;
    int64_t begin[64], end[64];
} range_log;

static void log_range(void *arg, int64_t begin, int64_t end) {
    range_log *l = arg;
    pthread_mutex_lock(&l->mu);
    l->begin[l->n] = begin;
    l->end[l->n++] = end;
    pthread_mutex_unlock(&l->mu);
}

/* Runs pardo_parallel_for and checks the chunks are ggml's: dr = ceil(n / nth). */
static void check_split(int nthreads, int64_t n, int want_chunks, int64_t want_dr) {
    pardo_status st;
    pardo_kernel_ctx ctx = {.nthreads = nthreads, .st = &st};
    range_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(pardo_parallel_for(&ctx, n, log_range, &l), PARDO_OK);
    ck_assert_int_eq(l.n, want_chunks);
    bool seen[64] = {false};
    for (int c = 0; c < l.n; c++) {
        int idx = (int)(l.begin[c] / want_dr);
        ck_assert_int_eq(l.begin[c], idx * want_dr);
        ck_assert_int_eq(l.end[c], idx * want_dr + want_dr < n ? idx * want_dr + want_dr : n);
        ck_assert(!seen[idx]);
        seen[idx] = true;
    }
}

/* Runs pardo_parallel_for_blocks and checks every call is one whole block
 * (the last shorter) and each block comes once. */
static void check_blocks(int nthreads, int64_t n, int64_t block, int want_calls) {
    pardo_status st;
    pardo_kernel_ctx ctx = {.nthreads = nthreads, .st = &st};
    range_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(pardo_parallel_for_blocks(&ctx, n, block, log_range, &l), PARDO_OK);
    ck_assert_int_eq(l.n, want_calls);
    bool seen[64] = {false};
    int64_t covered = 0;
    for (int c = 0; c < l.n; c++) {
        if (want_calls == 1 && n > block) { /* one thread: one call over everything */
            ck_assert(l.begin[c] == 0 && l.end[c] == n);
            covered = n;
            continue;
        }
        int idx = (int)(l.begin[c] / block);
        ck_assert_int_eq(l.begin[c], idx * block);
        ck_assert_int_eq(l.end[c], idx * block + block < n ? idx * block + block : n);
        ck_assert(!seen[idx]);
        seen[idx] = true;
        covered += l.end[c] - l.begin[c];
    }
    ck_assert_int_eq(covered, n);
}

START_TEST(parallel_for_blocks_hands_out_whole_blocks) {
    configure(4);
    check_blocks(4, 100, 8, 13); /* 12 blocks of 8 and one of 4, on whichever threads ask */
    check_blocks(2, 64, 64, 1);  /* one block: one call */
    check_blocks(1, 100, 8, 1);  /* one thread: one call over everything */
    check_blocks(4, 0, 8, 0);
    pardo_status st;
    pardo_kernel_ctx ctx = {.nthreads = 4, .st = &st};
    range_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(pardo_parallel_for_blocks(&ctx, 10, 0, log_range, &l), PARDO_EINVAL);
    ck_assert_int_eq(pardo_parallel_for_blocks(&ctx, -1, 4, log_range, &l), PARDO_EINVAL);
    ck_assert_int_eq(l.n, 0);
}
END_TEST

START_TEST(parallel_for_splits_ggml_way) {
    configure(4);
    check_split(1, 10, 1, 10); /* one thread: one call over everything */
    check_split(3, 10, 3, 4);  /* dr = 4: [0,4) [4,8) [8,10) */
    check_split(4, 10, 4, 3);  /* dr = 3: [0,3) [3,6) [6,9) [9,10) */
    check_split(8, 10, 4, 3);  /* capped at the pool's 4 threads */
    check_split(4, 2, 2, 1);
    check_split(4, 1, 1, 1);
    pardo_status st;
    pardo_kernel_ctx ctx = {.nthreads = 4, .st = &st};
    range_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(pardo_parallel_for(&ctx, 0, log_range, &l), PARDO_OK);
    ck_assert_int_eq(l.n, 0);
}
END_TEST

START_TEST(err_configure_bad_sizes) {
    pardo_status st;
    ck_assert_int_eq(pardo_thread_pool_configure(0, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "0 threads") != NULL, "%s", st.msg);
    ck_assert_int_eq(pardo_thread_pool_configure(PARDO_MAX_THREADS + 1, &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_thread_pool_configure(-3, &st), PARDO_EINVAL);
}
END_TEST

START_TEST(err_resize_after_start) {
    pardo_status st;
    configure(2);
    static atomic_int hits[2];
    count_job j = {.hits = hits};
    pardo_thread_pool_for(2, 2, count_item, &j);
    ck_assert_int_eq(pardo_thread_pool_configure(5, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "already running with 2 threads") && strstr(st.msg, "to 5"), "%s", st.msg);
    ck_assert_int_eq(pardo_thread_pool_size(), 2);
}
END_TEST

START_TEST(err_parallel_for_negative) {
    pardo_status st;
    pardo_kernel_ctx ctx = {.nthreads = 2, .st = &st};
    range_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(pardo_parallel_for(&ctx, -1, log_range, &l), PARDO_EINVAL);
    ck_assert_int_eq(l.n, 0);
}
END_TEST


/* The CPUs in this thread's mask. */
static int mask_count(cpu_set_t *mask) {
    ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof *mask, mask), 0);
    return CPU_COUNT(mask);
}

typedef struct mask_arg {
    cpu_set_t mask;
    atomic_bool done;
} mask_arg;

static void record_mask(void *p) {
    mask_arg *a = p;
    pthread_getaffinity_np(pthread_self(), sizeof a->mask, &a->mask);
    atomic_store(&a->done, true);
}

/* The mask of a worker, from a task submitted to the started pool. */
static void worker_mask(cpu_set_t *mask) {
    mask_arg a = {0};
    pardo_pool_task t;
    pardo_thread_pool_submit(&t, record_mask, &a);
    struct timespec pause = {0, 1000000};
    for (int i = 0; i < 5000 && !atomic_load(&a.done); i++) nanosleep(&pause, NULL);
    ck_assert(atomic_load(&a.done));
    *mask = a.mask;
}

START_TEST(pin_modes_parse) {
    pardo_pin_mode m = PARDO_PIN_OFF;
    ck_assert(pardo_pin_mode_parse(NULL, &m) && m == PARDO_PIN_AUTO);
    ck_assert(pardo_pin_mode_parse("", &m) && m == PARDO_PIN_AUTO);
    ck_assert(pardo_pin_mode_parse("auto", &m) && m == PARDO_PIN_AUTO);
    ck_assert(pardo_pin_mode_parse("on", &m) && m == PARDO_PIN_ON);
    ck_assert(pardo_pin_mode_parse("off", &m) && m == PARDO_PIN_OFF);
    ck_assert(!pardo_pin_mode_parse("yes", &m));
    ck_assert(!pardo_pin_mode_parse("1", &m));
}
END_TEST

/* auto: a pool of as many threads as the process's CPUs (2 or more) gets
 * one CPU each, the starting thread the first of its mask; a worker its
 * own; shutdown gives the starting thread its mask back. */
START_TEST(pool_pins_a_thread_per_cpu) {
    cpu_set_t before, now, worker;
    int cpus = mask_count(&before);
    unsetenv("PARDO_PIN_THREADS");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("MPI_LOCALNRANKS");
    int plan[PARDO_MAX_THREADS];
    if (cpus < 2 || cpus > PARDO_MAX_THREADS) { /* one CPU: nothing to place */
        ck_assert(!pardo_pin_plan(cpus < 2 ? 2 : cpus, plan));
        return;
    }
    ck_assert(pardo_pin_plan(cpus, plan));
    for (int k = 0; k < cpus; k++) {
        ck_assert(CPU_ISSET(plan[k], &before));
        for (int j = 0; j < k; j++) ck_assert_int_ne(plan[j], plan[k]);
    }
    configure(cpus);
    worker_mask(&worker);
    ck_assert_int_eq(mask_count(&now), 1);
    ck_assert(CPU_ISSET(plan[0], &now));
    ck_assert_int_eq(CPU_COUNT(&worker), 1);
    ck_assert(!CPU_ISSET(plan[0], &worker));
    pardo_thread_pool_shutdown();
    ck_assert_int_eq(mask_count(&now), cpus);
    ck_assert(CPU_EQUAL(&now, &before));
}
END_TEST

/* off, fewer or more threads than CPUs (auto), or several ranks on the
 * host: nobody is pinned. on pins any pool of 2 or more, wrapping threads
 * around the CPUs. */
START_TEST(pool_leaves_threads_unpinned) {
    cpu_set_t before, now, worker;
    int cpus = mask_count(&before);
    int plan[PARDO_MAX_THREADS];
    ck_assert(!pardo_pin_plan(1, plan)); /* one thread: nothing to keep apart */
    if (cpus < 2) {
        ck_assert(!pardo_pin_plan(2, plan));
        return;
    }
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("MPI_LOCALNRANKS");
    setenv("PARDO_PIN_THREADS", "off", 1);
    ck_assert(!pardo_pin_plan(2, plan));
    configure(2);
    worker_mask(&worker);
    ck_assert(CPU_EQUAL(&worker, &before));
    ck_assert_int_eq(mask_count(&now), cpus);
    pardo_thread_pool_shutdown();
    setenv("PARDO_PIN_THREADS", "auto", 1);
    if (cpus < PARDO_MAX_THREADS) ck_assert(!pardo_pin_plan(cpus + 1, plan));
    if (cpus > 2) ck_assert(!pardo_pin_plan(cpus - 1, plan)); /* a pool smaller than the machine */
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    if (cpus <= PARDO_MAX_THREADS) ck_assert(!pardo_pin_plan(cpus, plan));
    setenv("PARDO_PIN_THREADS", "on", 1);
    ck_assert(pardo_pin_plan(2, plan));
    if (cpus < PARDO_MAX_THREADS) {
        ck_assert(pardo_pin_plan(cpus + 1, plan));
        ck_assert_int_eq(plan[cpus], plan[0]); /* around again */
    }
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("PARDO_PIN_THREADS");
}
END_TEST

Suite *make_thread_pool_suite(void) {
    Suite *s = suite_create("thread_pool");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, size_is_configured_before_start);
    tcase_add_test(core, size_from_environment);
    tcase_add_test(core, every_item_runs_once);
    tcase_add_test(core, waiting_caller_helps_other_forks);
    tcase_add_test(core, idle_fork_wakes_nobody);
    tcase_add_test(core, idle_fork_takes_a_waiting_thread);
    tcase_add_test(core, never_more_threads_than_configured);
    tcase_add_test(core, submit_runs_on_a_worker);
    tcase_add_test(core, size_one_runs_inline);
    tcase_add_test(core, forks_nest_without_deadlock);
    tcase_add_test(core, idle_pool_burns_no_cpu);
    tcase_add_test(core, fork_gives_the_child_a_fresh_pool);
    tcase_add_test(core, shutdown_then_resize);
    tcase_add_test(core, parallel_for_splits_ggml_way);
    tcase_add_test(core, parallel_for_blocks_hands_out_whole_blocks);
    tcase_add_test(core, pin_modes_parse);
    tcase_add_test(core, pool_pins_a_thread_per_cpu);
    tcase_add_test(core, pool_leaves_threads_unpinned);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, err_configure_bad_sizes);
    tcase_add_test(errors, err_resize_after_start);
    tcase_add_test(errors, err_parallel_for_negative);
    suite_add_tcase(s, errors);
    return s;
}
