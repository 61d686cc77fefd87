/* check_coordinator.c - tf.train.Coordinator's contract: the first stop
 * request's status wins, wait_for_stop as an interruptible sleep,
 * clear_stop, join of tasks that finish or stop, and a grace period that
 * names the task ignoring the stop. Tasks run in a TaskGroup on their own
 * threads and register with the coordinator by name. */
#include <check.h>
#include <string.h>
#include <time.h>

#include "check_suites.h"
#include "exec/coordinator.h"
#include "exec/task.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(first_stop_status_is_kept) {
    pardo_status st, a, b;
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert(!pardo_coordinator_should_stop(c));
    pardo_errorf(&a, PARDO_EIO, "reader failed");
    pardo_errorf(&b, PARDO_EINVAL, "second complaint");
    pardo_coordinator_request_stop(c, &a);
    pardo_coordinator_request_stop(c, &b); /* ignored, as in TF */
    ck_assert(pardo_coordinator_should_stop(c));
    ck_assert_int_eq(pardo_coordinator_join(c, 1.0, &st), PARDO_EIO);
    ck_assert_str_eq(st.msg, "reader failed");
    pardo_coordinator_clear_stop(c);
    ck_assert(!pardo_coordinator_should_stop(c));
    ck_assert_int_eq(pardo_coordinator_join(c, 1.0, &st), PARDO_OK);
    /* a stop without error, then one with: the first (clean) one counts */
    pardo_coordinator_request_stop(c, NULL);
    pardo_coordinator_request_stop(c, &a);
    ck_assert_int_eq(pardo_coordinator_join(c, 1.0, &st), PARDO_OK);
    pardo_coordinator_clear_stop(c);
    pardo_errorf(&b, PARDO_ECANCELED, "interrupted");
    pardo_coordinator_request_stop(c, &b); /* a clean stop */
    ck_assert_int_eq(pardo_coordinator_join(c, 1.0, &st), PARDO_OK);
    pardo_coordinator_free(c);
}
END_TEST

START_TEST(wait_for_stop_times_out_or_wakes) {
    pardo_coordinator *c = pardo_coordinator_new();
    double t0 = now_s();
    ck_assert(!pardo_coordinator_wait_for_stop(c, 0.02));
    ck_assert(now_s() - t0 >= 0.015);
    pardo_coordinator_request_stop(c, NULL);
    ck_assert(pardo_coordinator_wait_for_stop(c, 10));
    ck_assert(pardo_coordinator_wait_for_stop(c, -1));
    pardo_coordinator_free(c);
}
END_TEST

typedef struct worker {
    pardo_coordinator *c;
    int id;
    double run_s;     // work this long, then finish (when not stopped)
    bool ignore_stop; // the stubborn one: blocks on `release` instead
    pardo_wait_post *release;
    int loops;
} worker;

/* A loader-style task: loops until stopped, sleeping in wait_for_stop. */
static int work(pardo_task *self, void *arg, pardo_status *st) {
    (void)self;
    (void)st;
    worker *w = arg;
    double end = now_s() + w->run_s;
    if (w->ignore_stop) {
        pardo_wait_post_wait(w->release, NULL, st); /* deaf to the coordinator */
    } else {
        while (now_s() < end && !pardo_coordinator_wait_for_stop(w->c, 0.002)) w->loops++;
    }
    pardo_coordinator_done(w->c, w->id);
    return PARDO_OK;
}

static void start(pardo_task_group *g, worker *w, const char *name) {
    pardo_status st;
    ck_assert_int_eq(pardo_coordinator_register(w->c, name, &w->id, &st), PARDO_OK);
    ck_assert_int_eq(pardo_task_group_spawn(g, name, PARDO_TASK_OWN_THREAD, work, w, &st), PARDO_OK);
}

START_TEST(join_waits_for_tasks_that_finish) {
    pardo_status st;
    pardo_coordinator *c = pardo_coordinator_new();
    pardo_task_group *g = pardo_task_group_new();
    worker a = {.c = c, .run_s = 0.02}, b = {.c = c, .run_s = 0.04};
    start(g, &a, "producer");
    start(g, &b, "consumer");
    ck_assert_int_eq(pardo_coordinator_join(c, 0.1, &st), PARDO_OK); /* no stop: waits for both */
    ck_assert_int_eq(pardo_coordinator_running(c), 0);
    ck_assert(!pardo_coordinator_should_stop(c));
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_OK);
    pardo_task_group_free(g);
    pardo_coordinator_free(c);
}
END_TEST

START_TEST(stop_ends_tasks_within_the_grace_period) {
    pardo_status st, why;
    pardo_coordinator *c = pardo_coordinator_new();
    pardo_task_group *g = pardo_task_group_new();
    worker a = {.c = c, .run_s = 60}, b = {.c = c, .run_s = 60};
    start(g, &a, "producer");
    start(g, &b, "consumer");
    ck_assert_int_eq(pardo_coordinator_running(c), 2);
    pardo_errorf(&why, PARDO_EIO, "bad record 17");
    double t0 = now_s();
    pardo_coordinator_request_stop(c, &why);
    ck_assert_int_eq(pardo_coordinator_join(c, 5.0, &st), PARDO_EIO); /* the stop's status */
    ck_assert_str_eq(st.msg, "bad record 17");
    ck_assert(now_s() - t0 < 5);
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_OK);
    pardo_task_group_free(g);
    pardo_coordinator_free(c);
}
END_TEST

START_TEST(err_grace_period_names_the_straggler) {
    pardo_status st, why;
    pardo_wait_post release;
    pardo_wait_post_init(&release);
    pardo_coordinator *c = pardo_coordinator_new();
    pardo_task_group *g = pardo_task_group_new();
    worker good = {.c = c, .run_s = 60}, deaf = {.c = c, .ignore_stop = true, .release = &release};
    start(g, &good, "well_behaved");
    start(g, &deaf, "stubborn");
    pardo_errorf(&why, PARDO_EINVAL, "trainer diverged");
    pardo_coordinator_request_stop(c, &why);
    double t0 = now_s();
    ck_assert_int_eq(pardo_coordinator_join(c, 0.05, &st), PARDO_ERUNTIME);
    double waited = now_s() - t0;
    ck_assert_msg(waited >= 0.04 && waited < 5, "waited %.3f s for a 0.05 s grace period", waited);
    ck_assert_msg(strstr(st.msg, "'stubborn'") && !strstr(st.msg, "well_behaved") && strstr(st.msg, "1 task") &&
                      strstr(st.msg, "trainer diverged"),
                  "%s", st.msg);
    ck_assert_int_eq(pardo_coordinator_running(c), 1);
    pardo_wait_post_set(&release); /* let it go, then everything joins */
    ck_assert_int_eq(pardo_task_group_join_all(g, &st), PARDO_OK);
    ck_assert_int_eq(pardo_coordinator_running(c), 0);
    pardo_task_group_free(g);
    pardo_coordinator_free(c);
    pardo_wait_post_destroy(&release);
}
END_TEST

Suite *make_coordinator_suite(void) {
    Suite *s = suite_create("coordinator");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 30);
    tcase_add_test(core, first_stop_status_is_kept);
    tcase_add_test(core, wait_for_stop_times_out_or_wakes);
    tcase_add_test(core, join_waits_for_tasks_that_finish);
    tcase_add_test(core, stop_ends_tasks_within_the_grace_period);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_set_timeout(errors, 30);
    tcase_add_test(errors, err_grace_period_names_the_straggler);
    suite_add_tcase(s, errors);
    return s;
}
