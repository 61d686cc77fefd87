/* check_ops_control_flow.c - if, loop and scan (ops/control_flow.c): JSON
 * programs whose blocks the ops run, against values worked out by hand in
 * the comments, with the sequential and the dataflow executor; the
 * refusals of validate and inference; a program with such blocks written to
 * JSON and read back. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "io/graph_json.h"
#include "test_util.h"

static void expect_values(const pardo_tensor *t, int ndim, const int64_t *shape, const double *want) {
    ck_assert_msg(pardo_shape_equal(t->ndim, t->shape, ndim, shape), "shape differs (rank %d, want %d)", t->ndim, ndim);
    for (int64_t i = 0; i < t->numel; i++)
        ck_assert_msg(pardo_tensor_get_f64(t, i) == want[i], "[%lld]: %g, want %g", (long long)i,
                      pardo_tensor_get_f64(t, i), want[i]);
}

static pardo_tensor *scalar(pardo_dtype dt, double v) { return test_tensor_from(dt, 0, NULL, &v); }

/* An executor for p on 2 threads: kind 0 sequential, 1 dataflow (block 0's ops pushed to the engine). */
static pardo_executor *cf_executor(const pardo_program *p, int kind) {
    pardo_status st;
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = 2, .device = PARDO_DEVICE_CPU,
                              .kind = kind ? PARDO_EXEC_DATAFLOW : PARDO_EXEC_SEQUENTIAL};
    ck_assert_msg(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK, "executor: %s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "init_vars: %s", st.msg);
    return ex;
}

/* ---- if ---- */

/* y = cond ? x + x : x * x */
static const char if_text[] =
    "{\"pardo\": 1, \"blocks\": ["
    "{\"vars\": {\"c\": {\"dtype\": \"bool\", \"shape\": [], \"role\": \"feed\"},"
    "  \"x\": {\"dtype\": \"float64\", \"shape\": [3], \"role\": \"feed\"}},"
    " \"ops\": [{\"op\": \"if\", \"in\": [\"c\", \"x\"], \"out\": [\"y\"], \"attrs\": {\"then_block\": 1,"
    "  \"else_block\": 2, \"then_out\": [\"t\"], \"else_out\": [\"e\"]}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": [{\"op\": \"add\", \"in\": [\"x\", \"x\"], \"out\": [\"t\"]}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": [{\"op\": \"mul\", \"in\": [\"x\", \"x\"], \"out\": [\"e\"]}]}"
    "]}";

START_TEST(test_if_branches) {
    pardo_program *p = test_program(if_text, "if.json");
    const pardo_graph_var *y = pardo_block_find_var(&p->blocks[0], "y");
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->type.dtype, PARDO_F64);
    ck_assert_int_eq(y->type.ndim, 1);
    ck_assert_int_eq(y->type.shape[0], 3);
    const double xs[3] = {1, 2, 3}, then_y[3] = {2, 4, 6}, else_y[3] = {1, 4, 9};
    const int64_t three = 3;
    for (int kind = 0; kind < 2; kind++) {
        pardo_executor *ex = cf_executor(p, kind);
        pardo_tensor *x = test_tensor_from(PARDO_F64, 1, &three, xs);
        for (int c = 1; c >= 0; c--) {
            pardo_tensor *ct = scalar(PARDO_BOOL, c);
            test_feed(ex, "c", ct);
            test_feed(ex, "x", x);
            test_run(ex);
            expect_values(test_fetch(ex, "y"), 1, &three, c ? then_y : else_y);
            pardo_tensor_release(ct);
        }
        pardo_tensor_release(x);
        pardo_executor_free(ex);
    }
    pardo_program_free(p);
}
END_TEST

/* ---- loop ---- */

/* s += 1.5 while s < 4 (at most M = 10 times), from s = 0; the scan outputs
 * are each iteration's s and its number: s 1.5 (1.5 < 4), 3 (3 < 4), 4.5
 * (stops): final s [4.5], ss [[1.5], [3], [4.5]], is [0, 1, 2]. */
static const char loop_exit_text[] =
    "{\"pardo\": 1, \"blocks\": ["
    "{\"vars\": {\"m\": {\"dtype\": \"int64\", \"shape\": [], \"role\": \"feed\"},"
    "  \"s0\": {\"dtype\": \"float64\", \"shape\": [1], \"role\": \"feed\"},"
    "  \"step\": {\"dtype\": \"float64\", \"shape\": [1], \"value\": [1.5]},"
    "  \"lim\": {\"dtype\": \"float64\", \"shape\": [1], \"value\": [4]}},"
    " \"ops\": [{\"op\": \"loop\", \"in\": [\"m\", \"\", \"s0\", \"step\", \"lim\"], \"out\": [\"s\", \"ss\", \"is\"],"
    "  \"attrs\": {\"body\": 1, \"body_in\": [\"i\", \"c\", \"s_in\"], \"body_out\": [\"c_out\", \"s_out\", \"s_out\","
    "  \"i_copy\"]}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    " {\"op\": \"add\", \"in\": [\"s_in\", \"step\"], \"out\": [\"s_out\"]},"
    " {\"op\": \"less\", \"in\": [\"s_out\", \"lim\"], \"out\": [\"c_vec\"]},"
    " {\"op\": \"reshape\", \"in\": [\"c_vec\"], \"out\": [\"c_out\"], \"attrs\": {\"shape\": []}},"
    " {\"op\": \"identity\", \"in\": [\"i\"], \"out\": [\"i_copy\"]}]}"
    "]}";

START_TEST(test_loop_early_exit) {
    pardo_program *p = test_program(loop_exit_text, "loop.json");
    const pardo_graph_var *ss = pardo_block_find_var(&p->blocks[0], "ss");
    ck_assert_int_eq(ss->type.ndim, 2);
    ck_assert_int_eq(ss->type.shape[0], -1); /* the iterations are known at run time */
    ck_assert_int_eq(ss->type.shape[1], 1);
    const int64_t one = 1, ss_shape[2] = {3, 1}, three = 3;
    const double zero = 0, s_want = 4.5, ss_want[3] = {1.5, 3, 4.5}, is_want[3] = {0, 1, 2};
    for (int kind = 0; kind < 2; kind++) {
        pardo_executor *ex = cf_executor(p, kind);
        pardo_tensor *m = scalar(PARDO_I64, 10), *s0 = test_tensor_from(PARDO_F64, 1, &one, &zero);
        test_feed(ex, "m", m);
        test_feed(ex, "s0", s0);
        test_run(ex);
        expect_values(test_fetch(ex, "s"), 1, &one, &s_want);
        expect_values(test_fetch(ex, "ss"), 2, ss_shape, ss_want);
        pardo_tensor *is = test_fetch(ex, "is");
        ck_assert_int_eq(is->dtype, PARDO_I64);
        expect_values(is, 1, &three, is_want);
        /* M = 2 stops it first: s 3, ss [[1.5], [3]] */
        pardo_tensor *m2 = scalar(PARDO_I64, 2);
        test_feed(ex, "m", m2);
        test_run(ex);
        const double s2 = 3;
        const int64_t ss2_shape[2] = {2, 1};
        expect_values(test_fetch(ex, "s"), 1, &one, &s2);
        expect_values(test_fetch(ex, "ss"), 2, ss2_shape, ss_want);
        /* M = 0: no iteration, s is s0 and ss is empty */
        pardo_tensor *m0 = scalar(PARDO_I64, 0);
        test_feed(ex, "m", m0);
        test_run(ex);
        const int64_t ss0_shape[2] = {0, 1};
        expect_values(test_fetch(ex, "s"), 1, &one, &zero);
        expect_values(test_fetch(ex, "ss"), 2, ss0_shape, ss_want);
        pardo_tensor_release(m);
        pardo_tensor_release(m2);
        pardo_tensor_release(m0);
        pardo_tensor_release(s0);
        pardo_executor_free(ex);
    }
    pardo_program_free(p);
}
END_TEST

/* M = 4 iterations (no cond input, the body's cond stays true) of y = y + x
 * from y = [1, 2] with x = [1, 1], scan output y * y: y [2, 3], [3, 4],
 * [4, 5], [5, 6]; final [5, 6]; squares [[4, 9], [9, 16], [16, 25], [25, 36]]. */
static const char loop_scan_text[] =
    "{\"pardo\": 1, \"blocks\": ["
    "{\"vars\": {\"m\": {\"dtype\": \"int64\", \"shape\": [], \"value\": [4]},"
    "  \"y0\": {\"dtype\": \"float32\", \"shape\": [2], \"value\": [1, 2]},"
    "  \"x\": {\"dtype\": \"float32\", \"shape\": [2], \"value\": [1, 1]}},"
    " \"ops\": [{\"op\": \"loop\", \"in\": [\"m\", \"\", \"y0\", \"x\"], \"out\": [\"y\", \"sq\"],"
    "  \"attrs\": {\"body\": 1, \"body_in\": [\"i\", \"c\", \"y_in\"], \"body_out\": [\"c\", \"y_out\", \"y2\"]}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    " {\"op\": \"add\", \"in\": [\"y_in\", \"x\"], \"out\": [\"y_out\"]},"
    " {\"op\": \"mul\", \"in\": [\"y_out\", \"y_out\"], \"out\": [\"y2\"]}]}"
    "]}";

START_TEST(test_loop_scan_outputs) {
    pardo_program *p = test_program(loop_scan_text, "loop_scan.json");
    const int64_t two = 2, sq_shape[2] = {4, 2};
    const double y_want[2] = {5, 6}, sq_want[8] = {4, 9, 9, 16, 16, 25, 25, 36};
    for (int kind = 0; kind < 2; kind++) {
        pardo_executor *ex = cf_executor(p, kind);
        for (int run = 0; run < 2; run++) { /* a second run reuses the outputs */
            test_run(ex);
            expect_values(test_fetch(ex, "y"), 1, &two, y_want);
            expect_values(test_fetch(ex, "sq"), 2, sq_shape, sq_want);
        }
        pardo_executor_free(ex);
    }
    pardo_program_free(p);
}
END_TEST

/* A loop whose body holds an if, and a second loop beside it (the dataflow
 * executor may run both at once): M = 4 from s = 1, s = i < 2 ? s + 1 :
 * s * 2: 2, 3, 6, 12; the second loop adds 1 four times: 5. */
static const char loop_nested_text[] =
    "{\"pardo\": 1, \"blocks\": ["
    "{\"vars\": {\"m\": {\"dtype\": \"int64\", \"shape\": [], \"value\": [4]},"
    "  \"s0\": {\"dtype\": \"float64\", \"shape\": [], \"value\": [1]},"
    "  \"one\": {\"dtype\": \"float64\", \"shape\": [], \"value\": [1]},"
    "  \"two\": {\"dtype\": \"int64\", \"shape\": [], \"value\": [2]}},"
    " \"ops\": [{\"op\": \"loop\", \"in\": [\"m\", \"\", \"s0\", \"one\", \"two\"], \"out\": [\"s\"],"
    "  \"attrs\": {\"body\": 1, \"body_in\": [\"i\", \"c\", \"s_in\"], \"body_out\": [\"c\", \"s_out\"]}},"
    "  {\"op\": \"loop\", \"in\": [\"m\", \"\", \"s0\", \"one\"], \"out\": [\"t\"],"
    "  \"attrs\": {\"body\": 4, \"body_in\": [\"j\", \"d\", \"t_in\"], \"body_out\": [\"d\", \"t_out\"]}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    " {\"op\": \"less\", \"in\": [\"i\", \"two\"], \"out\": [\"early\"]},"
    " {\"op\": \"if\", \"in\": [\"early\", \"s_in\", \"one\"], \"out\": [\"s_out\"], \"attrs\": {\"then_block\": 2,"
    "  \"else_block\": 3, \"then_out\": [\"inc\"], \"else_out\": [\"dbl\"]}}]},"
    "{\"parent\": 1, \"vars\": {}, \"ops\": [{\"op\": \"add\", \"in\": [\"s_in\", \"one\"], \"out\": [\"inc\"]}]},"
    "{\"parent\": 1, \"vars\": {}, \"ops\": [{\"op\": \"add\", \"in\": [\"s_in\", \"s_in\"], \"out\": [\"dbl\"]}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": [{\"op\": \"add\", \"in\": [\"t_in\", \"one\"], \"out\": [\"t_out\"]}]}"
    "]}";

START_TEST(test_loop_nested) {
    pardo_program *p = test_program(loop_nested_text, "nested.json");
    const double s_want = 12, t_want = 5;
    for (int kind = 0; kind < 2; kind++) {
        pardo_executor *ex = cf_executor(p, kind);
        for (int run = 0; run < 3; run++) {
            test_run(ex);
            expect_values(test_fetch(ex, "s"), 0, NULL, &s_want);
            expect_values(test_fetch(ex, "t"), 0, NULL, &t_want);
        }
        pardo_executor_free(ex);
    }
    pardo_program_free(p);
}
END_TEST

/* A body of no ops that passes its inputs through, and an if whose branch
 * gives an enclosing var: M = 3 iterations keep s = [7]; the scan outputs
 * stack s and the iteration numbers: [[7], [7], [7]], [0, 1, 2]. */
static const char loop_through_text[] =
    "{\"pardo\": 1, \"blocks\": ["
    "{\"vars\": {\"m\": {\"dtype\": \"int64\", \"shape\": [], \"value\": [3]},"
    "  \"yes\": {\"dtype\": \"bool\", \"shape\": [], \"value\": [true]},"
    "  \"s0\": {\"dtype\": \"float32\", \"shape\": [1], \"value\": [7]}},"
    " \"ops\": [{\"op\": \"loop\", \"in\": [\"m\", \"yes\", \"s0\"], \"out\": [\"s\", \"ss\", \"is\"],"
    "  \"attrs\": {\"body\": 1, \"body_in\": [\"i\", \"c\", \"s_in\"], \"body_out\": [\"c\", \"s_in\", \"s_in\", \"i\"]}},"
    "  {\"op\": \"if\", \"in\": [\"yes\", \"s0\"], \"out\": [\"picked\"], \"attrs\": {\"then_block\": 2,"
    "  \"else_block\": 3, \"then_out\": [\"s0\"], \"else_out\": [\"s0\"]}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": []},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": []},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": []}"
    "]}";

START_TEST(test_loop_pass_through) {
    pardo_program *p = test_program(loop_through_text, "through.json");
    const int64_t one = 1, ss_shape[2] = {3, 1}, three = 3;
    const double seven = 7, ss_want[3] = {7, 7, 7}, is_want[3] = {0, 1, 2};
    for (int kind = 0; kind < 2; kind++) {
        pardo_executor *ex = cf_executor(p, kind);
        test_run(ex);
        expect_values(test_fetch(ex, "s"), 1, &one, &seven);
        expect_values(test_fetch(ex, "ss"), 2, ss_shape, ss_want);
        expect_values(test_fetch(ex, "is"), 1, &three, is_want);
        expect_values(test_fetch(ex, "picked"), 1, &one, &seven);
        pardo_executor_free(ex);
    }
    pardo_program_free(p);
}
END_TEST

/* ---- scan ---- */

/* Running sums of x's slices from sum = [0, 0]; %s are the attrs after
 * num_scan_inputs, %s the inputs after the state. */
static const char scan_fmt[] =
    "{\"pardo\": 1, \"blocks\": ["
    "{\"vars\": {\"init\": {\"dtype\": \"float64\", \"shape\": %s, \"role\": \"feed\"},"
    "  \"x\": {\"dtype\": \"float64\", \"shape\": %s, \"role\": \"feed\"}},"
    " \"ops\": [{\"op\": \"scan\", \"in\": [%s\"init\", \"x\"], \"out\": [\"y\", \"z\"],"
    "  \"attrs\": {\"body\": 1, \"body_in\": [\"sum_in\", \"next\"], \"body_out\": [\"sum_out\", \"scan_out\"],"
    "  \"num_scan_inputs\": 1%s}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    " {\"op\": \"add\", \"in\": [\"sum_in\", \"next\"], \"out\": [\"sum_out\"]},"
    " {\"op\": \"identity\", \"in\": [\"sum_out\"], \"out\": [\"scan_out\"]}]}"
    "]}";

/* Runs the scan with attrs over x (shape xs, values xv) from a zero state
 * of shape is; checks y and z. */
static void check_scan(const char *lens, const char *attrs, int x_nd, const int64_t *xs, const double *xv, int s_nd,
                       const int64_t *ss, int z_nd, const int64_t *zs, const double *y_want, const double *z_want) {
    char text[4096], xshape[64], sshape[64];
    int o = snprintf(xshape, sizeof xshape, "[");
    for (int d = 0; d < x_nd; d++) o += snprintf(xshape + o, sizeof xshape - (size_t)o, "%s%lld", d ? ", " : "", (long long)xs[d]);
    snprintf(xshape + o, sizeof xshape - (size_t)o, "]");
    o = snprintf(sshape, sizeof sshape, "[");
    for (int d = 0; d < s_nd; d++) o += snprintf(sshape + o, sizeof sshape - (size_t)o, "%s%lld", d ? ", " : "", (long long)ss[d]);
    snprintf(sshape + o, sizeof sshape - (size_t)o, "]");
    snprintf(text, sizeof text, scan_fmt, sshape, xshape, lens, attrs);
    pardo_program *p = test_program(text, "scan.json");
    const pardo_graph_var *z = pardo_block_find_var(&p->blocks[0], "z");
    ck_assert(pardo_shape_equal(z->type.ndim, z->type.shape, z_nd, zs)); /* known at load: x's dims */
    const double zeros[4] = {0};
    for (int kind = 0; kind < 2; kind++) {
        pardo_executor *ex = cf_executor(p, kind);
        pardo_tensor *x = test_tensor_from(PARDO_F64, x_nd, xs, xv), *init = test_tensor_from(PARDO_F64, s_nd, ss, zeros);
        test_feed(ex, "x", x);
        test_feed(ex, "init", init);
        test_run(ex);
        expect_values(test_fetch(ex, "y"), s_nd, ss, y_want);
        expect_values(test_fetch(ex, "z"), z_nd, zs, z_want);
        pardo_tensor_release(x);
        pardo_tensor_release(init);
        pardo_executor_free(ex);
    }
    pardo_program_free(p);
}

/* x = [[1, 2], [3, 4], [5, 6]] forward: sums [1, 2], [4, 6], [9, 12]. */
START_TEST(test_scan_forward) {
    const int64_t xs[2] = {3, 2}, two = 2;
    const double x[6] = {1, 2, 3, 4, 5, 6}, y[2] = {9, 12}, z[6] = {1, 2, 4, 6, 9, 12};
    check_scan("", "", 2, xs, x, 1, &two, 2, xs, y, z);
}
END_TEST

/* Backwards: slices [5, 6], [3, 4], [1, 2]: sums [5, 6], [8, 10], [9, 12];
 * stored in order, or reversed with scan_output_directions [1]. */
START_TEST(test_scan_reverse) {
    const int64_t xs[2] = {3, 2}, two = 2;
    const double x[6] = {1, 2, 3, 4, 5, 6}, y[2] = {9, 12}, z[6] = {5, 6, 8, 10, 9, 12},
                 z_rev[6] = {9, 12, 8, 10, 5, 6};
    check_scan("", ", \"scan_input_directions\": [1]", 2, xs, x, 1, &two, 2, xs, y, z);
    check_scan("", ", \"scan_input_directions\": [1], \"scan_output_directions\": [1]", 2, xs, x, 1, &two, 2, xs, y,
               z_rev);
}
END_TEST

/* Along axis 1 of x^T = [[1, 3, 5], [2, 4, 6]], stacked along axis 1:
 * z = the forward sums transposed, [[1, 4, 9], [2, 6, 12]]. */
START_TEST(test_scan_axes) {
    const int64_t xs[2] = {2, 3}, two = 2;
    const double x[6] = {1, 3, 5, 2, 4, 6}, y[2] = {9, 12}, z[6] = {1, 4, 9, 2, 6, 12};
    check_scan("", ", \"scan_input_axes\": [1], \"scan_output_axes\": [-1]", 2, xs, x, 1, &two, 2, xs, y, z);
}
END_TEST

/* ONNX opset 8's batch form: x [1, 3, 2], state [1, 2], the same sums. */
START_TEST(test_scan_batch) {
    const int64_t xs[3] = {1, 3, 2}, ss[2] = {1, 2};
    const double x[6] = {1, 2, 3, 4, 5, 6}, y[2] = {9, 12}, z[6] = {1, 2, 4, 6, 9, 12};
    check_scan("\"\", ", ", \"batch\": true", 3, xs, x, 2, ss, 3, xs, y, z);
}
END_TEST

/* ---- round trip ---- */

START_TEST(test_json_round_trip) {
    pardo_program *p = test_program(loop_scan_text, "loop_scan.json");
    pardo_status st;
    pardo_status_clear(&st);
    char *text = pardo_graph_to_json(p, &st);
    ck_assert_msg(text, "%s", st.msg);
    pardo_program *q = test_program(text, "again.json");
    ck_assert_int_eq(q->n_blocks, 2);
    ck_assert_int_eq(q->blocks[1].parent, 0);
    ck_assert_int_eq(q->blocks[1].n_ops, 2);
    pardo_executor *ex = test_executor(q, 1);
    test_run(ex);
    const int64_t two = 2;
    const double y_want[2] = {5, 6};
    expect_values(test_fetch(ex, "y"), 1, &two, y_want);
    pardo_executor_free(ex);
    free(text);
    pardo_program_free(q);
    pardo_program_free(p);
}
END_TEST

/* ---- errors ---- */

static void expect_refused(const char *text, int code, const char *needle) {
    pardo_status st;
    pardo_status_clear(&st);
    int rc = test_program_status(text, "bad.json", NULL, &st);
    ck_assert_msg(rc == code, "code %d, want %d: %s", rc, code, st.msg);
    ck_assert_msg(strstr(st.msg, needle), "message '%s' lacks '%s'", st.msg, needle);
}

/* Replaces the first `from` in src by `to` into buf. */
static const char *edit(char *buf, size_t n, const char *src, const char *from, const char *to) {
    const char *at = strstr(src, from);
    ck_assert_ptr_nonnull(at);
    snprintf(buf, n, "%.*s%s%s", (int)(at - src), src, to, at + strlen(from));
    return buf;
}

START_TEST(test_refusals) {
    char buf[4096];
    /* the branches give different counts */
    expect_refused(edit(buf, sizeof buf, if_text, "\"else_out\": [\"e\"]", "\"else_out\": [\"e\", \"x\"]"),
                   PARDO_EINVAL, "then_out names 1 vars but else_out 2");
    /* the branches disagree in dtype */
    expect_refused(edit(buf, sizeof buf, if_text, "\"else_out\": [\"e\"]", "\"else_out\": [\"c\"]"), PARDO_ESHAPE,
                   "then_out 't' is float64 [3] but else_out 'c' is bool []");
    /* a loop body that takes no cond */
    expect_refused(edit(buf, sizeof buf, loop_scan_text, "\"body_in\": [\"i\", \"c\", \"y_in\"]", "\"body_in\": [\"i\"]"),
                   PARDO_EINVAL, "attr 'body_in' names 1 vars, expected at least 2");
    /* one output for a body that gives two */
    expect_refused(edit(buf, sizeof buf, loop_scan_text, "\"out\": [\"y\", \"sq\"]", "\"out\": [\"y\"]"), PARDO_EINVAL,
                   "has 1 outputs, expected 2");
    /* neither M nor cond */
    expect_refused(edit(buf, sizeof buf, loop_scan_text, "\"in\": [\"m\", \"\",", "\"in\": [\"\", \"\","), PARDO_EINVAL,
                   "neither a trip count M nor a cond");
    /* the body reads x but the op does not list it */
    expect_refused(edit(buf, sizeof buf, loop_scan_text, "\"y0\", \"x\"]", "\"y0\"]"), PARDO_EINVAL,
                   "reads 'x' of block 0: list it in \"in\"");
    /* a carried value whose dtype changes */
    expect_refused(edit(buf, sizeof buf, loop_scan_text, "\"body_out\": [\"c\", \"y_out\"", "\"body_out\": [\"c\", \"i\""),
                   PARDO_ESHAPE, "carried value 'y_in' starts as float32 [2] but the body gives back int64 []");
    /* one block for both branches */
    expect_refused(edit(buf, sizeof buf, if_text, "\"else_block\": 2", "\"else_block\": 1"), PARDO_EINVAL,
                   "then_block and else_block are both block 1");
    /* scan axes of the wrong count */
    snprintf(buf, sizeof buf, scan_fmt, "[2]", "[3, 2]", "", ", \"scan_input_axes\": [0, 1]");
    expect_refused(buf, PARDO_EINVAL, "attr 'scan_input_axes' has 2 entries, expected 1");
    /* the multi-CPU rewrite does not move a loop's body into the part block */
    pardo_program *p = test_program(loop_scan_text, "loop_scan.json");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.parts = 2;
    pardo_status st;
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_pass_multi_cpu(p, &opt, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "a loop op runs blocks of its own"), "%s", st.msg);
    pardo_program_free(p);
}
END_TEST

/* A cond of several elements, which inference cannot see (a run-time dim),
 * and a batch scan's sequence_lens below the full length are refused when
 * the op runs. */
START_TEST(test_run_time_errors) {
    char buf[4096];
    pardo_program *p = test_program(edit(buf, sizeof buf, if_text, "\"shape\": [], \"role\"", "\"shape\": [-1], \"role\""),
                                    "if.json");
    pardo_executor *ex = test_executor(p, 1);
    const int64_t three = 3, two = 2;
    const double xs[3] = {1, 2, 3}, cs[2] = {1, 0};
    pardo_tensor *x = test_tensor_from(PARDO_F64, 1, &three, xs), *c = test_tensor_from(PARDO_BOOL, 1, &two, cs);
    test_feed(ex, "x", x);
    test_feed(ex, "c", c);
    pardo_status st;
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "cond has 2 elements, expected one"), "%s", st.msg);
    pardo_tensor_release(x);
    pardo_tensor_release(c);
    pardo_executor_free(ex);
    pardo_program_free(p);
    /* opset 8's sequence_lens shorter than the sequence: pardo's scan runs whole sequences */
    char text[4096];
    snprintf(text, sizeof text, scan_fmt, "[1, 2]", "[1, 3, 2]", "\"lens\", ", ", \"batch\": true");
    p = test_program(edit(buf, sizeof buf, text, "\"vars\": {",
                          "\"vars\": {\"lens\": {\"dtype\": \"int64\", \"shape\": [1], \"value\": [2]}, "),
                     "lens.json");
    ex = test_executor(p, 1);
    const int64_t xs8[3] = {1, 3, 2}, ss8[2] = {1, 2};
    const double xv[6] = {1, 2, 3, 4, 5, 6}, zeros[2] = {0, 0};
    x = test_tensor_from(PARDO_F64, 3, xs8, xv);
    pardo_tensor *init = test_tensor_from(PARDO_F64, 2, ss8, zeros);
    test_feed(ex, "x", x);
    test_feed(ex, "init", init);
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "sequence_lens[0] is 2, not the full length 3"), "%s", st.msg);
    pardo_tensor_release(x);
    pardo_tensor_release(init);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

Suite *make_ops_control_flow_suite(void) {
    Suite *s = suite_create("ops_control_flow");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_if_branches);
    tcase_add_test(core, test_loop_early_exit);
    tcase_add_test(core, test_loop_scan_outputs);
    tcase_add_test(core, test_loop_nested);
    tcase_add_test(core, test_loop_pass_through);
    tcase_add_test(core, test_scan_forward);
    tcase_add_test(core, test_scan_reverse);
    tcase_add_test(core, test_scan_axes);
    tcase_add_test(core, test_scan_batch);
    tcase_add_test(core, test_json_round_trip);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_refusals);
    tcase_add_test(errors, test_run_time_errors);
    suite_add_tcase(s, errors);
    return s;
}
