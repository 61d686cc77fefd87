/* check_dataflow.c - the dataflow executor (pardo_exec_options.kind
 * PARDO_EXEC_DATAFLOW) against the sequential one: every example graph
 * under graphs/ (as written, trained, transpiled into parts and fused), on
 * 1, 2 and 3 threads, gives bitwise the same vars after three steps; a
 * failing op gives the sequential executor's message, at the step's end
 * and at a fetch; independent ops run at once. */
#include <check.h>
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "exec/executor.h"
#include "exec/thread_pool.h"
#include "graph_test_util.h"
#include "io/graph_json.h"
#include "mlp_test_util.h"
#include "pass.h"
#include "test_util.h"

/* The output of block 0's op with role loss, or NULL. */
static const char *loss_var(const pardo_program *p) {
    const pardo_block *b = &p->blocks[0];
    for (int i = 0; i < b->n_ops; i++)
        if (b->ops[i].role == PARDO_OP_LOSS && b->ops[i].n_out > 0) return b->ops[i].out[0];
    return NULL;
}

static bool has_optimizer(const pardo_program *p) {
    const pardo_block *b = &p->blocks[0];
    for (int i = 0; i < b->n_ops; i++)
        if (b->ops[i].role == PARDO_OP_OPTIMIZE) return true;
    return false;
}

/* A feed for var v: 24 rows for a -1 dim; floats in [-1, 1], integers i % 2 (a label of any classifier). */
static pardo_tensor *feed_for(const pardo_graph_var *v, test_rng *rng) {
    int64_t shape[PARDO_MAX_DIMS];
    for (int d = 0; d < v->type.ndim; d++) shape[d] = v->type.shape[d] < 0 ? 24 : v->type.shape[d];
    if (v->type.dtype == PARDO_F32 || v->type.dtype == PARDO_F64)
        return test_tensor_random(rng, v->type.dtype, v->type.ndim, shape, -1, 1);
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(v->type.dtype, v->type.ndim, shape, &st);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < t->numel; i++) pardo_tensor_set_f64(t, i, (double)(i % 2));
    return t;
}

/* Runs p for 3 steps with kind on the pool's threads, feeds made from seed 11; the caller frees. */
static pardo_executor *run_three(const pardo_program *p, pardo_executor_kind kind, bool release, const char *keep) {
    pardo_status st;
    pardo_exec_options opt = {.nthreads = pardo_thread_pool_size(), .kind = kind, .device = PARDO_DEVICE_CPU,
                              .release_temps = release, .keep = keep ? &keep : NULL, .n_keep = keep ? 1 : 0};
    pardo_executor *ex = NULL;
    ck_assert_msg(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "%s", st.msg);
    test_rng rng = {11};
    const pardo_block *b = &p->blocks[0];
    for (int i = 0; i < b->n_vars; i++) {
        if (b->vars[i].role != PARDO_VAR_FEED) continue;
        pardo_tensor *t = feed_for(&b->vars[i], &rng);
        test_feed(ex, b->vars[i].name, t);
        pardo_tensor_release(t);
    }
    for (int s = 0; s < 3; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "step %d: %s", s, st.msg);
    return ex;
}

/* Every tensor var of block 0 bound after the sequential run has the same bytes after the dataflow run. */
static int assert_same_vars(const pardo_program *p, pardo_executor *seq, pardo_executor *df, const char *what) {
    const pardo_block *b = &p->blocks[0];
    int compared = 0;
    for (int i = 0; i < b->n_vars; i++) {
        pardo_tensor *a = pardo_executor_fetch(seq, b->vars[i].name);
        if (!a || a->is_array) continue;
        pardo_tensor *c = pardo_executor_fetch(df, b->vars[i].name);
        ck_assert_msg(c != NULL, "%s: '%s' has no value after the dataflow run", what, b->vars[i].name);
        pardo_status st;
        const void *da = pardo_tensor_cpu(a, &st), *dc = pardo_tensor_cpu(c, &st);
        ck_assert_int_eq(a->numel, c->numel);
        ck_assert_msg(memcmp(da, dc, (size_t)a->numel * pardo_dtype_size(a->dtype)) == 0,
                      "%s: var '%s' differs between the sequential and dataflow executors", what, b->vars[i].name);
        compared++;
    }
    return compared;
}

static void compare_forms(const char *path, const pardo_program *p, const char *form) {
    char what[512];
    snprintf(what, sizeof what, "%s (%s, %d threads)", path, form, pardo_thread_pool_size());
    pardo_executor *seq = run_three(p, PARDO_EXEC_SEQUENTIAL, false, NULL),
                   *df = run_three(p, PARDO_EXEC_DATAFLOW, false, NULL);
    ck_assert_int_gt(assert_same_vars(p, seq, df, what), 0);
    pardo_executor_free(seq);
    pardo_executor_free(df);
    const char *loss = loss_var(p);
    seq = run_three(p, PARDO_EXEC_SEQUENTIAL, true, loss);
    df = run_three(p, PARDO_EXEC_DATAFLOW, true, loss);
    ck_assert_int_gt(assert_same_vars(p, seq, df, what), 0);
    pardo_executor_free(seq);
    pardo_executor_free(df);
}

static void every_example_graph(void) {
    DIR *d = opendir("graphs");
    ck_assert_msg(d != NULL, "tests run from the repository root (graphs/ not found)");
    struct dirent *de;
    int graphs = 0;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "graphs/%s", de->d_name);
        pardo_status st;
        pardo_program *p = NULL;
        ck_assert_msg(pardo_graph_load(path, &p, &st) == PARDO_OK, "%s", st.msg);
        pardo_pass_options opt = pardo_pass_defaults();
        ck_assert_msg(pardo_pass_check(p, &opt, &st) == PARDO_OK, "%s", st.msg);
        compare_forms(path, p, "as written");
        const char *loss = loss_var(p);
        if (loss && !has_optimizer(p)) {
            for (int parts = 0; parts <= 2; parts += 2) {
                pardo_program *t = NULL;
                ck_assert_msg(pardo_graph_load(path, &t, &st) == PARDO_OK, "%s", st.msg);
                opt = pardo_pass_defaults();
                ck_assert_msg(pardo_pass_check(t, &opt, &st) == PARDO_OK, "%s", st.msg);
                opt.loss = loss;
                opt.optimizer = PARDO_OPTIMIZER_MOMENTUM;
                opt.lr = 0.05;
                opt.parts = parts;
                ck_assert_msg(pardo_pass_backward(t, &opt, &st) == PARDO_OK, "%s", st.msg);
                ck_assert_msg(pardo_pass_optimizer(t, &opt, &st) == PARDO_OK, "%s", st.msg);
                if (parts) ck_assert_msg(pardo_pass_multi_cpu(t, &opt, &st) == PARDO_OK, "%s", st.msg);
                compare_forms(path, t, parts ? "trained, 2 parts" : "trained");
                opt.keep = &loss;
                opt.n_keep = 1;
                ck_assert_msg(pardo_pass_fuse(t, &opt, &st) == PARDO_OK, "%s", st.msg);
                compare_forms(path, t, parts ? "trained, 2 parts, fused" : "trained, fused");
                pardo_program_free(t);
            }
        }
        pardo_program_free(p);
        graphs++;
    }
    closedir(d);
    ck_assert_int_ge(graphs, 5);
}

START_TEST(example_graphs_same_bits_1_thread) {
    test_pool_size(1);
    every_example_graph();
}
END_TEST

START_TEST(example_graphs_same_bits_2_threads) {
    test_pool_size(2);
    every_example_graph();
}
END_TEST

START_TEST(example_graphs_same_bits_3_threads) {
    test_pool_size(3);
    every_example_graph();
}
END_TEST

/* ---- errors ---- */

/* Two branches from x: b1 = x w1 (fails when x has 5 columns: w1 is [4, 3]), b2 = x + x; then c = b1 + 1. */
static const char failing_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, -1], \"role\": \"feed\"},"
    "\"w1\": {\"dtype\": \"float32\", \"shape\": [4, 3], \"role\": \"param\", \"init\": {\"fill\": \"constant\", \"value\": 1}},"
    "\"w2\": {\"dtype\": \"float32\", \"shape\": [5, 2], \"role\": \"param\", \"init\": {\"fill\": \"constant\", \"value\": 1}}},"
    "\"ops\": ["
    "{\"op\": \"add\", \"in\": [\"x\", \"x\"], \"out\": [\"b2\"], \"name\": \"twice\"},"
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w1\"], \"out\": [\"b1\"], \"name\": \"bad_product\"},"
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w2\"], \"out\": [\"b3\"], \"name\": \"good_product\"},"
    "{\"op\": \"scale\", \"in\": [\"b1\"], \"out\": [\"c\"], \"attrs\": {\"scale\": 2}, \"name\": \"after_bad\"},"
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w1\"], \"out\": [\"b4\"], \"name\": \"second_bad\"}"
    "]}]}";

static pardo_executor *failing_executor(pardo_program *p, pardo_executor_kind kind) {
    pardo_status st;
    pardo_exec_options opt = {.nthreads = pardo_thread_pool_size(), .kind = kind, .device = PARDO_DEVICE_CPU};
    pardo_executor *ex = NULL;
    ck_assert_msg(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "%s", st.msg);
    int64_t shape[2] = {3, 5};
    test_rng rng = {5};
    pardo_tensor *x = test_tensor_random(&rng, PARDO_F32, 2, shape, -1, 1);
    test_feed(ex, "x", x);
    pardo_tensor_release(x);
    return ex;
}

START_TEST(a_failing_op_gives_the_sequential_message) {
    test_pool_size(2);
    pardo_program *p = test_program(failing_text, "failing.json");
    pardo_executor *seq = failing_executor(p, PARDO_EXEC_SEQUENTIAL), *df = failing_executor(p, PARDO_EXEC_DATAFLOW);
    pardo_status a, b;
    int rc_seq = pardo_executor_run(seq, &a);
    ck_assert_int_ne(rc_seq, PARDO_OK);
    ck_assert_ptr_nonnull(strstr(a.msg, "bad_product"));
    for (int step = 0; step < 3; step++) { /* every step, the same error; the engine's are cleared */
        pardo_status_clear(&b);
        ck_assert_int_eq(pardo_executor_run(df, &b), rc_seq);
        ck_assert_str_eq(b.msg, a.msg);
    }
    /* at a fetch: a var the failure reached, then the step's end */
    ck_assert_int_eq(pardo_executor_run_async(df, &b), PARDO_OK);
    pardo_tensor *t = NULL;
    pardo_status_clear(&b);
    ck_assert_int_eq(pardo_executor_fetch_wait(df, "c", &t, &b), rc_seq);
    ck_assert_str_eq(b.msg, a.msg);
    ck_assert_ptr_null(t);
    pardo_status_clear(&b);
    ck_assert_int_eq(pardo_executor_fetch_wait(df, "b3", &t, &b), PARDO_OK); /* an independent branch ran */
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(pardo_executor_wait(df, &b), rc_seq);
    ck_assert_str_eq(b.msg, a.msg);
    pardo_executor_free(seq);
    pardo_executor_free(df);
    pardo_program_free(p);
}
END_TEST

START_TEST(a_missing_feed_is_refused_before_anything_runs) {
    test_pool_size(2);
    pardo_program *p = test_program(failing_text, "failing.json");
    pardo_status st;
    pardo_exec_options opt = {.nthreads = 2, .kind = PARDO_EXEC_DATAFLOW, .device = PARDO_DEVICE_CPU};
    pardo_executor *ex = NULL;
    ck_assert_int_eq(pardo_executor_new(p, &opt, &ex, &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_init_vars(ex, NULL, NULL, &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "missing feed 'x'"));
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

Suite *make_dataflow_suite(void) {
    Suite *s = suite_create("dataflow");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 120);
    tcase_add_test(core, example_graphs_same_bits_1_thread);
    tcase_add_test(core, example_graphs_same_bits_2_threads);
    tcase_add_test(core, example_graphs_same_bits_3_threads);
    suite_add_tcase(s, core);
    TCase *err = tcase_create("Errors");
    tcase_add_test(err, a_failing_op_gives_the_sequential_message);
    tcase_add_test(err, a_missing_feed_is_refused_before_anything_runs);
    suite_add_tcase(s, err);
    return s;
}
