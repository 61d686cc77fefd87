/* check_blocking_counter.c - count down to zero from many threads, the
 * waiter spinning or blocked, decrement_by, timed waits, and a counter
 * destroyed the moment its wait returns, many times over. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "exec/blocking_counter.h"
#include "exec/spin.h"
#include "check_suites.h"
#include "exec/thread_pool.h"

START_TEST(zero_returns_at_once) {
    pardo_blocking_counter c;
    pardo_blocking_counter_init(&c, 0);
    pardo_blocking_counter_wait(&c);
    ck_assert(pardo_blocking_counter_wait_for(&c, 0));
    pardo_blocking_counter_destroy(&c);
}
END_TEST

typedef struct dec_arg {
    pardo_blocking_counter *c;
    atomic_int *done;
    long delay_ns;
} dec_arg;

static void *decrement_later(void *p) {
    dec_arg *a = p;
    if (a->delay_ns) {
        struct timespec ts = {a->delay_ns / 1000000000L, a->delay_ns % 1000000000L};
        nanosleep(&ts, NULL); /* long enough that the waiter blocks */
    }
    atomic_fetch_add(a->done, 1);
    pardo_blocking_counter_decrement(a->c);
    return NULL;
}

/* n threads decrement after delay_ns; the waiter (spinning up to spin_ns,
 * 0: the default) must see all of them. */
static void run_threads_spinning(int n, long delay_ns, uint64_t spin_ns) {
    pardo_blocking_counter c;
    atomic_int done = 0;
    pthread_t th[16];
    dec_arg a = {&c, &done, delay_ns};
    pardo_blocking_counter_init(&c, n);
    for (int i = 0; i < n; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, decrement_later, &a), 0);
    pardo_blocking_counter_wait_spinning(&c, spin_ns);
    ck_assert_int_eq(atomic_load(&done), n);
    pardo_blocking_counter_destroy(&c);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static void run_threads(int n, long delay_ns) { run_threads_spinning(n, delay_ns, 0); }

START_TEST(waiter_sees_every_decrement_spinning) { run_threads(8, 0); }
END_TEST

START_TEST(waiter_sees_every_decrement_blocked) { run_threads(4, 5000000); }
END_TEST

/* A waiter given a longer spin (a fork's caller after a long part) catches
 * decrements well past PARDO_SPIN_NS while spinning, and still blocks and
 * wakes for one that comes after its budget. */
START_TEST(waiter_with_a_longer_spin_sees_every_decrement) {
    run_threads_spinning(4, 1000000, 20000000); /* 1 ms into a 20 ms spin */
    run_threads_spinning(4, 10000000, 2000000); /* 10 ms: after a 2 ms spin, blocked */
}
END_TEST

/* The spin after some work is a quarter of it, within the bounds. */
START_TEST(spin_budget_is_a_quarter_of_the_work_within_bounds) {
    ck_assert_uint_eq(pardo_spin_budget(0), PARDO_SPIN_NS);
    ck_assert_uint_eq(pardo_spin_budget(4 * PARDO_SPIN_NS - 4), PARDO_SPIN_NS);
    ck_assert_uint_eq(pardo_spin_budget(4000000), 1000000);
    ck_assert_uint_eq(pardo_spin_budget(1000000000), PARDO_SPIN_MAX_NS);
}
END_TEST

START_TEST(decrement_by_counts_many) {
    pardo_blocking_counter c;
    pardo_blocking_counter_init(&c, 5);
    pardo_blocking_counter_decrement_by(&c, 3);
    ck_assert(!pardo_blocking_counter_wait_for(&c, 1000000));
    pardo_blocking_counter_decrement_by(&c, 2);
    ck_assert(pardo_blocking_counter_wait_for(&c, 1000000));
    pardo_blocking_counter_wait(&c);
    pardo_blocking_counter_destroy(&c);
}
END_TEST

START_TEST(wait_for_times_out_then_succeeds) {
    pardo_blocking_counter c;
    atomic_int done = 0;
    pthread_t th;
    dec_arg a = {&c, &done, 50000000};
    pardo_blocking_counter_init(&c, 1);
    ck_assert(!pardo_blocking_counter_wait_for(&c, 2000000)); /* 2 ms: the decrement comes at 50 ms */
    ck_assert_int_eq(pthread_create(&th, NULL, decrement_later, &a), 0);
    ck_assert(pardo_blocking_counter_wait_for(&c, 10000000000ull));
    ck_assert_int_eq(atomic_load(&done), 1);
    pardo_blocking_counter_destroy(&c);
    pthread_join(th, NULL);
}
END_TEST

typedef struct fork_arg {
    pardo_blocking_counter c;
    atomic_int sum;
} fork_arg;

static void add_and_decrement(void *p) {
    fork_arg *f = p;
    atomic_fetch_add(&f->sum, 1);
    pardo_blocking_counter_decrement(&f->c); /* last touch of f: the waiter frees it at once */
}

START_TEST(destroyed_as_soon_as_wait_returns) {
    pardo_status st;
    ck_assert_int_eq(pardo_thread_pool_configure(4, &st), PARDO_OK);
    enum { ROUNDS = 20000, TASKS = 3 };
    for (int r = 0; r < ROUNDS; r++) {
        fork_arg f; /* on the stack: reused every round */
        pardo_pool_task t[TASKS];
        atomic_init(&f.sum, 0);
        pardo_blocking_counter_init(&f.c, TASKS);
        for (int i = 0; i < TASKS; i++) pardo_thread_pool_submit(&t[i], add_and_decrement, &f);
        pardo_blocking_counter_wait(&f.c);
        ck_assert_int_eq(atomic_load(&f.sum), TASKS);
        pardo_blocking_counter_destroy(&f.c);
    }
}
END_TEST

START_TEST(err_wait_for_never_reached) {
    pardo_blocking_counter c;
    pardo_blocking_counter_init(&c, 2);
    pardo_blocking_counter_decrement(&c);
    ck_assert(!pardo_blocking_counter_wait_for(&c, 5000000));
    ck_assert(!pardo_blocking_counter_wait_for(&c, 0));
    pardo_blocking_counter_decrement(&c);
    pardo_blocking_counter_wait(&c);
    pardo_blocking_counter_destroy(&c);
}
END_TEST

Suite *make_blocking_counter_suite(void) {
    Suite *s = suite_create("blocking_counter");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, zero_returns_at_once);
    tcase_add_test(core, waiter_sees_every_decrement_spinning);
    tcase_add_test(core, waiter_sees_every_decrement_blocked);
    tcase_add_test(core, waiter_with_a_longer_spin_sees_every_decrement);
    tcase_add_test(core, spin_budget_is_a_quarter_of_the_work_within_bounds);
    tcase_add_test(core, decrement_by_counts_many);
    tcase_add_test(core, wait_for_times_out_then_succeeds);
    tcase_add_test(core, destroyed_as_soon_as_wait_returns);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, err_wait_for_never_reached);
    suite_add_tcase(s, errors);
    return s;
}
