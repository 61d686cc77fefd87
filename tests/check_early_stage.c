/* check_early_stage.c - the stage after a parallel_do started by the parts
 * that end first (executor.h, pardo_early): what each chain waits for
 * (stage_plan.h, early_need), chains run exactly when every part has got
 * far enough and never by the last part to end, and training with it gives
 * bitwise what one thread gives. */
#include <check.h>
#include <limits.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "exec/stage_plan.h"
#include "test_util.h"
#include "exec/thread_pool.h"

/* Two params updated from parts' gradients. Block 1: g2 (ops 0-1) before g1
 * (ops 2-3), then op 4 reads w2 again (its update must wait for it); yp is
 * a parts_in var handed straight out (no op names it: only when the part
 * ends); lsum comes last (op 5). */
static const char early_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 4], \"role\": \"feed\"},"
    "\"y\": {\"dtype\": \"float64\", \"shape\": [-1, 4], \"role\": \"feed\"},"
    "\"w1\": {\"dtype\": \"float64\", \"shape\": [4], \"role\": \"param\", \"value\": [1, 2, 3, 4]},"
    "\"w2\": {\"dtype\": \"float64\", \"shape\": [4], \"role\": \"param\", \"value\": [-1, 0.5, 2, -3]},"
    "\"lr\": {\"dtype\": \"float64\", \"shape\": [], \"value\": [0.25]},"
    "\"xs\": {\"dtype\": \"float64\", \"shape\": [-1, 4], \"kind\": \"tensor_array\"},"
    "\"ys\": {\"dtype\": \"float64\", \"shape\": [-1, 4], \"kind\": \"tensor_array\"}},"
    "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
    "{\"op\": \"split\", \"in\": [\"y\"], \"out\": [\"ys\"], \"attrs\": {\"parts\": 2}},"
    "{\"op\": \"parallel_do\", \"in\": [\"xs\", \"ys\", \"w1\", \"w2\"], \"out\": [\"g1s\", \"g2s\", \"yo\", \"ls\"],"
    " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\", \"yp\": \"ys\"},"
    " \"parts_out\": {\"g1\": \"g1s\", \"g2\": \"g2s\", \"yp\": \"yo\", \"lsum\": \"ls\"}}},"
    "{\"op\": \"merge\", \"in\": [\"g1s\"], \"out\": [\"g1m\"], \"attrs\": {\"mode\": \"mean\"}},"
    "{\"op\": \"sgd\", \"in\": [\"w1\", \"g1m\", \"lr\"], \"out\": [\"w1\"], \"role\": \"optimize\"},"
    "{\"op\": \"merge\", \"in\": [\"g2s\"], \"out\": [\"g2m\"], \"attrs\": {\"mode\": \"mean\"}},"
    "{\"op\": \"sgd\", \"in\": [\"w2\", \"g2m\", \"lr\"], \"out\": [\"w2\"], \"role\": \"optimize\"},"
    "{\"op\": \"merge\", \"in\": [\"yo\"], \"out\": [\"ym\"], \"attrs\": {\"mode\": \"concat\"}},"
    "{\"op\": \"merge\", \"in\": [\"ls\"], \"out\": [\"lm\"], \"attrs\": {\"mode\": \"mean\"}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    "{\"op\": \"mul\", \"in\": [\"xp\", \"w2\"], \"out\": [\"h2\"]},"
    "{\"op\": \"reduce_sum\", \"in\": [\"h2\"], \"out\": [\"g2\"], \"attrs\": {\"axes\": [0], \"keepdims\": false}},"
    "{\"op\": \"mul\", \"in\": [\"xp\", \"w1\"], \"out\": [\"h1\"]},"
    "{\"op\": \"reduce_sum\", \"in\": [\"h1\"], \"out\": [\"g1\"], \"attrs\": {\"axes\": [0], \"keepdims\": false}},"
    "{\"op\": \"mul\", \"in\": [\"xp\", \"w2\"], \"out\": [\"late\"]},"
    "{\"op\": \"reduce_sum\", \"in\": [\"late\"], \"out\": [\"lsum\"], \"attrs\": {\"axes\": [0, 1]}}]}]}";

START_TEST(plan_says_what_each_chain_waits_for) {
    pardo_program *p = test_program(early_text, "early.json");
    pardo_stage_plan plan;
    pardo_status st;
    ck_assert_msg(pardo_stage_plan_build(p, 0, &plan, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(plan.early_pd, 2);
    ck_assert_int_eq(plan.n_chains[3], 4);
    ck_assert_int_eq(plan.early_need[plan.chain[4]], 4); /* w1: after g1 (op 3) */
    ck_assert_int_eq(plan.early_need[plan.chain[6]], 5); /* w2: g2 is there after op 1, w2 read by op 4 */
    ck_assert_int_eq(plan.early_need[plan.chain[7]], INT_MAX); /* yp: handed on when the part ends */
    ck_assert_int_eq(plan.early_need[plan.chain[8]], 6);       /* lsum: op 5 */
    pardo_stage_plan_clear(&plan);
    pardo_program_free(p);
    /* a stage of one chain runs as plain ops: nothing early */
    p = test_program("{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                     "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 4], \"role\": \"feed\"},"
                     "\"w\": {\"dtype\": \"float64\", \"shape\": [4], \"role\": \"param\", \"value\": [1, 2, 3, 4]},"
                     "\"lr\": {\"dtype\": \"float64\", \"shape\": [], \"value\": [0.25]},"
                     "\"xs\": {\"dtype\": \"float64\", \"shape\": [-1, 4], \"kind\": \"tensor_array\"}},"
                     "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
                     "{\"op\": \"parallel_do\", \"in\": [\"xs\", \"w\"], \"out\": [\"gs\"],"
                     " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"g\": \"gs\"}}},"
                     "{\"op\": \"merge\", \"in\": [\"gs\"], \"out\": [\"gm\"], \"attrs\": {\"mode\": \"mean\"}},"
                     "{\"op\": \"sgd\", \"in\": [\"w\", \"gm\", \"lr\"], \"out\": [\"w\"], \"role\": \"optimize\"}]},"
                     "{\"parent\": 0, \"vars\": {}, \"ops\": ["
                     "{\"op\": \"mul\", \"in\": [\"xp\", \"w\"], \"out\": [\"h\"]},"
                     "{\"op\": \"reduce_sum\", \"in\": [\"h\"], \"out\": [\"g\"], "
                     "\"attrs\": {\"axes\": [0], \"keepdims\": false}}]}]}",
                     "one.json");
    ck_assert_msg(pardo_stage_plan_build(p, 0, &plan, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(plan.n_chains[2], 1);
    ck_assert_int_eq(plan.early_pd, -1);
    pardo_stage_plan_clear(&plan);
    pardo_program_free(p);
    p = test_program(early_text, "early.json");
    /* a part that runs a block of its own: nothing early */
    pardo_status ignored;
    ck_assert_int_eq(pardo_op_set_attr(&p->blocks[1].ops[4], "block", pardo_value_new_number(1), &ignored), PARDO_OK);
    ck_assert_msg(pardo_stage_plan_build(p, 0, &plan, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(plan.early_pd, -1);
    pardo_stage_plan_clear(&plan);
    pardo_program_free(p);
}
END_TEST

static pardo_executor *early_executor(const pardo_program *p, int nthreads, int64_t rows) {
    pardo_status st;
    pardo_executor *ex = NULL;
    pardo_exec_options o = {.nthreads = nthreads, .training = true};
    ck_assert_msg(pardo_executor_new(p, &o, &ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "%s", st.msg);
    test_rng r = {5};
    int64_t shape[] = {rows, 4};
    const char *feeds[] = {"x", "y"};
    for (int k = 0; k < 2; k++) {
        pardo_tensor *t = test_tensor_random(&r, PARDO_F64, 2, shape, -1, 1);
        ck_assert_msg(pardo_executor_feed(ex, feeds[k], t, "test", &st) == PARDO_OK, "%s", st.msg);
        pardo_tensor_release(t);
    }
    return ex;
}

static double get(pardo_executor *ex, const char *name, int64_t i) {
    const pardo_tensor *t = pardo_executor_fetch(ex, name);
    ck_assert_msg(t, "'%s' has no value", name);
    return pardo_tensor_get_f64(t, i);
}

/* Driven by hand after two steps (the first binds every name, the second
 * plans the stages): with part 0 done and part 1 past op 3, the part that
 * ends first runs w1's update (the mean of its parts' gradients) and not
 * w2's (op 4 still reads w2); the last part to end runs nothing. */
START_TEST(chains_run_once_every_part_is_far_enough) {
    pardo_status st;
    ck_assert_msg(pardo_thread_pool_configure(2, &st) == PARDO_OK, "%s", st.msg);
    pardo_program *p = test_program(early_text, "early.json");
    pardo_executor *ex = early_executor(p, 2, 6);
    for (int step = 0; step < 2; step++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    pardo_scope *root = pardo_executor_scope(ex);
    const char *names[] = {"g1s", "g2s", "yo", "ls"};
    pardo_tensor *outs[4];
    for (int k = 0; k < 4; k++) ck_assert_ptr_nonnull(outs[k] = pardo_scope_find(root, names[k]));
    double w1[4], w2[4], g1[4];
    for (int i = 0; i < 4; i++) {
        w1[i] = get(ex, "w1", i);
        w2[i] = get(ex, "w2", i);
        g1[i] = (pardo_tensor_get_f64(pardo_tensor_array_part(outs[0], 0), i) +
                 pardo_tensor_get_f64(pardo_tensor_array_part(outs[0], 1), i)) / 2;
    }
    atomic_int stop = 0;
    pardo_early *e = pardo_executor_early_begin(ex, 0, 2, root, 2, outs, 4, 2, &stop);
    ck_assert_ptr_nonnull(e);
    atomic_store(pardo_early_progress(e, 0), 6);
    atomic_store(pardo_early_progress(e, 1), 4);
    pardo_early_part_ended(e);
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq_tol(get(ex, "w1", i), w1[i] - 0.25 * g1[i], 1e-12);
        ck_assert(get(ex, "w2", i) == w2[i]);
    }
    atomic_store(pardo_early_progress(e, 1), 6);
    pardo_early_part_ended(e); /* the last: the stage's, not its */
    for (int i = 0; i < 4; i++) ck_assert(get(ex, "w2", i) == w2[i]);
    pardo_executor_early_end(e);
    /* not from another op, nor on one thread */
    ck_assert_ptr_null(pardo_executor_early_begin(ex, 0, 1, root, 2, outs, 4, 2, &stop));
    ck_assert_ptr_null(pardo_executor_early_begin(ex, 0, 2, root, 1, outs, 4, 2, &stop));
    /* a failed part stops the early chains */
    e = pardo_executor_early_begin(ex, 0, 2, root, 2, outs, 4, 2, &stop);
    atomic_store(pardo_early_progress(e, 0), 6);
    atomic_store(pardo_early_progress(e, 1), 6);
    atomic_store(&stop, 1);
    pardo_early_part_ended(e);
    pardo_executor_early_end(e);
    for (int i = 0; i < 4; i++) ck_assert_double_eq_tol(get(ex, "w1", i), w1[i] - 0.25 * g1[i], 1e-12);
    pardo_executor_free(ex);
    pardo_program_free(p);
    pardo_thread_pool_shutdown();
}
END_TEST

static const char mlp_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 24], \"role\": \"feed\"},"
    "\"y\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"},"
    "\"w1\": {\"dtype\": \"float32\", \"shape\": [24, 64], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", "
    "\"low\": -0.3, \"high\": 0.3, \"seed\": 1}},"
    "\"b1\": {\"dtype\": \"float32\", \"shape\": [64], \"role\": \"param\","
    " \"init\": {\"fill\": \"constant\", \"value\": 0.01}},"
    "\"w2\": {\"dtype\": \"float32\", \"shape\": [64, 5], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", "
    "\"low\": -0.3, \"high\": 0.3, \"seed\": 2}}},"
    TEST_MLP_OPS "}]}";

/* The params after `steps` training steps of p on nthreads (fused ops on). */
static void train(const pardo_program *p, int nthreads, int steps, pardo_tensor **params) {
    pardo_status st;
    pardo_executor *ex = NULL;
    const char *keep[] = {"loss"};
    pardo_exec_options o = {.nthreads = nthreads, .training = true, .release_temps = true, .keep = keep, .n_keep = 1};
    ck_assert_msg(pardo_executor_new(p, &o, &ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "%s", st.msg);
    test_rng r = {9};
    int64_t xs[] = {37, 24}, ys[] = {37};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1), *y = pardo_tensor_new_cpu(PARDO_I64, 1, ys, &st);
    for (int64_t i = 0; i < 37; i++) pardo_tensor_set_f64(y, i, (double)(i % 5));
    ck_assert_msg(pardo_executor_feed(ex, "x", x, "test", &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_executor_feed(ex, "y", y, "test", &st) == PARDO_OK, "%s", st.msg);
    for (int s = 0; s < steps; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    const char *names[] = {"w1", "b1", "w2"};
    for (int k = 0; k < 3; k++) params[k] = pardo_tensor_clone(pardo_executor_fetch(ex, names[k]), &st);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
    pardo_executor_free(ex);
}

/* Training a transpiled MLP (2 and 3 parts; sgd, momentum, adam) on two
 * threads, where the parts that end first run updates, gives bitwise the
 * params one thread gives. */
START_TEST(training_with_early_updates_keeps_the_bits) {
    pardo_status st;
    const pardo_optimizer_kind kinds[] = {PARDO_OPTIMIZER_SGD, PARDO_OPTIMIZER_MOMENTUM, PARDO_OPTIMIZER_ADAM};
    for (int parts = 2; parts <= 3; parts++)
        for (int k = 0; k < 3; k++) {
            pardo_program *p = test_training_program(mlp_text, "mlp.json", "loss", kinds[k], 0.05, parts);
            pardo_tensor *one[3], *two[3];
            for (int threads = 1; threads <= 2; threads++) {
                if (pardo_thread_pool_started() && pardo_thread_pool_size() != threads) pardo_thread_pool_shutdown();
                ck_assert_msg(pardo_thread_pool_configure(threads, &st) == PARDO_OK, "%s", st.msg);
                train(p, threads, 6, threads == 1 ? one : two);
            }
            for (int q = 0; q < 3; q++) {
                ck_assert_int_eq(one[q]->numel, two[q]->numel);
                ck_assert_msg(memcmp(pardo_tensor_data(one[q]), pardo_tensor_data(two[q]),
                                     (size_t)one[q]->numel * sizeof(float)) == 0,
                              "param %d differs (optimizer %d, %d parts)", q, k, parts);
                pardo_tensor_release(one[q]);
                pardo_tensor_release(two[q]);
            }
            pardo_program_free(p);
        }
    pardo_thread_pool_shutdown();
}
END_TEST

Suite *make_early_stage_suite(void) {
    Suite *s = suite_create("early_stage");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, plan_says_what_each_chain_waits_for);
    tcase_add_test(tc, chains_run_once_every_part_is_far_enough);
    tcase_add_test(tc, training_with_early_updates_keeps_the_bits);
    suite_add_tcase(s, tc);
    return s;
}
