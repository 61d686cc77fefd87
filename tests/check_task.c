/* check_task.c - TaskGroup: tasks on their own threads and on the pool,
 * the first real error kept (a clean stop never overwrites it), an error
 * interrupting the others, interrupt_all waking interruptible waits, reuse
 * after join, and many groups at once on one pool. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check_suites.h"
#include "exec/task.h"
#include "exec/thread_pool.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pool_size(int n) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != n) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(n, &st) == PARDO_OK, "%s", st.msg);
}

static int add_one(pardo_task *self, void *arg, pardo_status *st) {
    (void)st;
    if (pardo_task_self() != self) return pardo_errorf(st, PARDO_ERUNTIME, "pardo_task_self is not the task");
    atomic_fetch_add((atomic_int *)arg, 1);
    return PARDO_OK;
}

START_TEST(tasks_run_on_threads_and_pool) {
    pardo_status st;
    pool_size(3);
    atomic_int n = 0;
    pardo_task_group *g = pardo_task_group_new();
    ck_assert_ptr_nonnull(g);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(pardo_task_group_spawn(g, "own", PARDO_TASK_OWN_THREAD, add_one, &n, &st), PARDO_OK);
        ck_assert_int_eq(pardo_task_group_spawn(g, "pooled", PARDO_TASK_POOL, add_one, &n, &st), PARDO_OK);
    }
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&n), 20);
    ck_assert_ptr_null(pardo_task_self());
    /* the group runs more tasks after a join */
    ck_assert_int_eq(pardo_task_group_spawn(g, "again", PARDO_TASK_OWN_THREAD, add_one, &n, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&n), 21);
    pardo_task_group_free(g);
}
END_TEST

typedef struct gate {
    pardo_wait_post go; // posted by the test
    atomic_int stopped; // tasks that saw the interrupt
} gate;

/* Waits for the gate, interruptibly: ECANCELED on interrupt. */
static int wait_gate(pardo_task *self, void *arg, pardo_status *st) {
    gate *g = arg;
    int rc = pardo_wait_post_wait(&g->go, self, st);
    if (rc == PARDO_ECANCELED) atomic_fetch_add(&g->stopped, 1);
    return rc;
}

static int fail_eio(pardo_task *self, void *arg, pardo_status *st) {
    (void)self;
    (void)arg;
    return pardo_errorf(st, PARDO_EIO, "disk on fire");
}

START_TEST(an_error_interrupts_the_others) {
    pardo_status st;
    pool_size(2);
    gate gt;
    pardo_wait_post_init(&gt.go);
    atomic_init(&gt.stopped, 0);
    pardo_task_group *g = pardo_task_group_new();
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pardo_task_group_spawn(g, "waiter", PARDO_TASK_OWN_THREAD, wait_gate, &gt, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_spawn(g, "reader", PARDO_TASK_OWN_THREAD, fail_eio, NULL, &st), PARDO_OK);
    double t0 = now_s();
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_EIO); /* never posted: only the interrupt frees them */
    ck_assert_msg(strstr(st.msg, "task 'reader'") && strstr(st.msg, "disk on fire"), "%s", st.msg);
    ck_assert_int_eq(atomic_load(&gt.stopped), 3);
    ck_assert(now_s() - t0 < 5);
    pardo_task_group_free(g);
    pardo_wait_post_destroy(&gt.go);
}
END_TEST

static int cancel_at_once(pardo_task *self, void *arg, pardo_status *st) {
    (void)self;
    (void)arg;
    return pardo_errorf(st, PARDO_ECANCELED, "stopped cleanly");
}

/* Fails with EINVAL after the clean stop has been recorded. */
static int fail_later(pardo_task *self, void *arg, pardo_status *st) {
    pardo_wait_post *after = arg;
    pardo_wait_post_wait(after, NULL, st); /* not interruptible */
    (void)self;
    return pardo_errorf(st, PARDO_EINVAL, "the real problem");
}

START_TEST(clean_stop_never_overwrites_a_real_error) {
    pardo_status st;
    pardo_wait_post after;
    pardo_wait_post_init(&after);
    pardo_task_group *g = pardo_task_group_new();
    ck_assert_int_eq(pardo_task_group_spawn(g, "late", PARDO_TASK_OWN_THREAD, fail_later, &after, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_spawn(g, "quitter", PARDO_TASK_OWN_THREAD, cancel_at_once, NULL, &st), PARDO_OK);
    /* wait until the clean stop is recorded, then let the real error happen */
    while (pardo_task_group_error(g, NULL) != PARDO_ECANCELED) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    pardo_wait_post_set(&after);
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "task 'late'") && strstr(st.msg, "the real problem"), "%s", st.msg);
    /* and the other order: a real error first, a clean stop after */
    pardo_wait_post_clear(&after);
    gate gt;
    pardo_wait_post_init(&gt.go);
    atomic_init(&gt.stopped, 0);
    ck_assert_int_eq(pardo_task_group_spawn(g, "waiter", PARDO_TASK_OWN_THREAD, wait_gate, &gt, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_spawn(g, "broken", PARDO_TASK_OWN_THREAD, fail_eio, NULL, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_EIO);
    ck_assert_msg(strstr(st.msg, "task 'broken'"), "%s", st.msg);
    ck_assert_int_eq(atomic_load(&gt.stopped), 1);
    pardo_task_group_free(g);
    pardo_wait_post_destroy(&gt.go);
    pardo_wait_post_destroy(&after);
}
END_TEST

static int long_sleep(pardo_task *self, void *arg, pardo_status *st) {
    (void)arg;
    return pardo_task_sleep(self, 30.0, st);
}

static int poll_until_stopped(pardo_task *self, void *arg, pardo_status *st) {
    atomic_int *spins = arg;
    while (!pardo_task_should_stop(self)) {
        atomic_fetch_add(spins, 1);
        int rc = pardo_task_sleep(self, 0.001, st);
        if (rc != PARDO_OK) return rc;
    }
    return pardo_errorf(st, PARDO_ECANCELED, "saw the stop flag");
}

START_TEST(interrupt_all_wakes_sleepers_and_pollers) {
    pardo_status st;
    atomic_int spins = 0;
    pardo_task_group *g = pardo_task_group_new();
    ck_assert_int_eq(pardo_task_group_spawn(g, "sleeper", PARDO_TASK_OWN_THREAD, long_sleep, NULL, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_spawn(g, "poller", PARDO_TASK_OWN_THREAD, poll_until_stopped, &spins, &st),
                     PARDO_OK);
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    ck_assert(!pardo_task_group_interrupted(g));
    double t0 = now_s();
    pardo_task_group_interrupt_all(g);
    ck_assert(pardo_task_group_interrupted(g));
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_ECANCELED);
    ck_assert_msg(now_s() - t0 < 5, "the 30 s sleep was not interrupted");
    ck_assert(!pardo_task_group_interrupted(g));                    /* join resets the group */
    ck_assert_int_eq(pardo_task_sleep(NULL, 0.001, &st), PARDO_OK); /* outside a task: a plain timed wait */
    pardo_task_group_free(g);
}
END_TEST

START_TEST(free_interrupts_running_tasks) {
    pardo_status st;
    pool_size(2); /* a worker for the pooled sleeper (size 1 would run it inline) */
    pardo_task_group *g = pardo_task_group_new();
    ck_assert_int_eq(pardo_task_group_spawn(g, "sleeper", PARDO_TASK_OWN_THREAD, long_sleep, NULL, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_spawn(g, "pooled", PARDO_TASK_POOL, long_sleep, NULL, &st), PARDO_OK);
    double t0 = now_s();
    pardo_task_group_free(g);
    ck_assert(now_s() - t0 < 5);
}
END_TEST

/* ---- many groups at once on one pool ---- */

static void square_item(void *arg, int64_t i) {
    atomic_llong *sum = arg;
    atomic_fetch_add(sum, (long long)(i * i));
}

static int fork_work(pardo_task *self, void *arg, pardo_status *st) {
    (void)self;
    atomic_llong sum = 0;
    pardo_thread_pool_for(4, 100, square_item, &sum);
    if (atomic_load(&sum) != 328350) return pardo_errorf(st, PARDO_ERUNTIME, "sum %lld", (long long)atomic_load(&sum));
    atomic_fetch_add((atomic_int *)arg, 1);
    return PARDO_OK;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
enum { GROUP_ROUNDS = 40 };
#else
enum { GROUP_ROUNDS = 200 };
#endif

static void *group_driver(void *arg) {
    atomic_int *done = arg;
    pardo_status st;
    for (int r = 0; r < GROUP_ROUNDS; r++) {
        pardo_task_group *g = pardo_task_group_new();
        for (int t = 0; t < 8; t++)
            if (pardo_task_group_spawn(g, "work", PARDO_TASK_POOL, fork_work, done, &st) != PARDO_OK) return NULL;
        if (pardo_task_group_join_all(g, &st) != PARDO_OK) {
            pardo_task_group_free(g);
            return NULL;
        }
        pardo_task_group_free(g);
    }
    return NULL;
}

START_TEST(stress_many_groups_share_the_pool) {
    pool_size(4);
    enum { DRIVERS = 6 };
    pthread_t th[DRIVERS];
    atomic_int done = 0;
    for (int i = 0; i < DRIVERS; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, group_driver, &done), 0);
    for (int i = 0; i < DRIVERS; i++) pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&done), DRIVERS * GROUP_ROUNDS * 8);
}
END_TEST

START_TEST(err_join_names_the_task) {
    pardo_status st;
    pardo_task_group *g = pardo_task_group_new();
    ck_assert_int_eq(pardo_task_group_spawn(g, "loader", PARDO_TASK_POOL, fail_eio, NULL, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_EIO);
    ck_assert_str_eq(st.msg, "task 'loader': disk on fire");
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_OK); /* nothing left */
    pardo_task_group_free(g);
}
END_TEST

Suite *make_task_suite(void) {
    Suite *s = suite_create("task");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 120);
    tcase_add_test(core, tasks_run_on_threads_and_pool);
    tcase_add_test(core, an_error_interrupts_the_others);
    tcase_add_test(core, clean_stop_never_overwrites_a_real_error);
    tcase_add_test(core, interrupt_all_wakes_sleepers_and_pollers);
    tcase_add_test(core, free_interrupts_running_tasks);
    tcase_add_test(core, stress_many_groups_share_the_pool);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, err_join_names_the_task);
    suite_add_tcase(s, errors);
    return s;
}
