/* check_backward.c - the autodiff pass: gradients of whole graphs against
 * float64 central finite differences, shared vars summed, roles, errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "pass.h"
#include "test_util.h"

/* Parses and checks text, then appends the gradient ops of `loss`. */
static pardo_program *backward_program(const char *text, const char *loss) {
    pardo_status st;
    pardo_program *p = test_program(text, "bw.json");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = loss;
    ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "backward: %s", st.msg);
    return p;
}

static double run_loss(pardo_executor *ex, const char *loss) {
    pardo_status st;
    ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    return pardo_tensor_get_f64(pardo_executor_fetch(ex, loss), 0);
}

/* For every element of every param, d loss / d param from the gradient ops
 * against central differences of the whole forward graph. */
static void check_params(const pardo_program *p, pardo_executor *ex, const char *loss) {
    char gname[256];
    const pardo_block *blk = &p->blocks[0];
    int checked = 0;
    for (int v = 0; v < blk->n_vars; v++) {
        const pardo_graph_var *var = &blk->vars[v];
        if (var->role != PARDO_VAR_PARAM) continue;
        snprintf(gname, sizeof gname, "%s@GRAD", var->name);
        run_loss(ex, loss);
        pardo_tensor *g = pardo_tensor_clone(pardo_executor_fetch(ex, gname), NULL);
        ck_assert_msg(g != NULL, "no gradient '%s'", gname);
        pardo_tensor *w = pardo_scope_find(pardo_executor_scope(ex), var->name);
        for (int64_t i = 0; i < w->numel; i++) {
            const double eps = 1e-6, orig = pardo_tensor_get_f64(w, i);
            pardo_tensor_set_f64(w, i, orig + eps);
            double lp = run_loss(ex, loss);
            pardo_tensor_set_f64(w, i, orig - eps);
            double lm = run_loss(ex, loss);
            pardo_tensor_set_f64(w, i, orig);
            double num = (lp - lm) / (2 * eps), ana = pardo_tensor_get_f64(g, i);
            ck_assert_msg(fabs(num - ana) <= 1e-6 * fmax(1, fmax(fabs(num), fabs(ana))),
                          "%s[%lld]: analytic %.12g, finite differences %.12g", gname, (long long)i, ana, num);
            checked++;
        }
        pardo_tensor_release(g);
    }
    ck_assert_int_gt(checked, 0);
}

#define F64(shape) "{\"dtype\": \"float64\", \"shape\": " shape
static const char mlp[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": " F64("[-1, 4]") ", \"role\": \"feed\"},"
    "\"y\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"},"
    "\"w1\": " F64("[4, 5]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 1}},"
    "\"b1\": " F64("[5]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 2}},"
    "\"w2\": " F64("[5, 3]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}},"
    "\"b2\": " F64("[3]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 4}}},"
    "\"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w1\"], \"out\": [\"h\"]},"
    "{\"op\": \"add\", \"in\": [\"h\", \"b1\"], \"out\": [\"z\"]},"
    "{\"op\": \"tanh\", \"in\": [\"z\"], \"out\": [\"a\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a\", \"w2\"], \"out\": [\"h2\"]},"
    "{\"op\": \"add\", \"in\": [\"h2\", \"b2\"], \"out\": [\"logits\"]},"
    "{\"op\": \"softmax\", \"in\": [\"logits\"], \"out\": [\"probs\"]},"
    "{\"op\": \"softmax_cross_entropy\", \"in\": [\"logits\", \"y\"], \"out\": [\"loss\"]}"
    "]}]}";

static void feed_random(pardo_executor *ex, test_rng *r, int n) {
    pardo_status st;
    int64_t xs[2] = {n, 4}, ys[1] = {n};
    pardo_tensor *x = test_tensor_random(r, PARDO_F64, 2, xs, -2, 2);
    pardo_tensor *y = test_tensor_random(r, PARDO_I64, 1, ys, 0, 3);
    ck_assert_int_eq(pardo_executor_feed(ex, "x", x, "x", &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_feed(ex, "y", y, "y", &st), PARDO_OK);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
}

START_TEST(mlp_gradients_match_finite_differences) {
    test_rng r = {11};
    pardo_program *p = backward_program(mlp, "loss");
    pardo_executor *ex = test_executor(p, 1);
    feed_random(ex, &r, 7);
    check_params(p, ex, "loss");
    /* roles: forward, loss, backward; no gradient for feeds or the unused softmax */
    const pardo_block *blk = &p->blocks[0];
    ck_assert_int_eq(blk->ops[0].role, PARDO_OP_FORWARD);
    ck_assert_int_eq(blk->ops[6].role, PARDO_OP_LOSS);
    for (int i = 7; i < blk->n_ops; i++) ck_assert_int_eq(blk->ops[i].role, PARDO_OP_BACKWARD);
    ck_assert_ptr_null(pardo_block_find_var(blk, "x@GRAD"));
    ck_assert_ptr_null(pardo_block_find_var(blk, "y@GRAD"));
    ck_assert_ptr_null(pardo_block_find_var(blk, "probs@GRAD"));
    ck_assert_ptr_nonnull(pardo_block_find_var(blk, "loss@GRAD"));
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* w used twice (h = x w, k = h w) and a residual add (r = x + k): the
 * gradients of w and of h are sums of two contributions. */
static const char shared[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": " F64("[3, 4]") ", \"role\": \"feed\"},"
    "\"w\": " F64("[4, 4]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 8}}},"
    "\"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
    "{\"op\": \"matmul\", \"in\": [\"h\", \"w\"], \"out\": [\"k\"]},"
    "{\"op\": \"add\", \"in\": [\"h\", \"k\"], \"out\": [\"r\"]},"
    "{\"op\": \"mul\", \"in\": [\"r\", \"r\"], \"out\": [\"sq\"]},"
    "{\"op\": \"reduce_mean\", \"in\": [\"sq\"], \"out\": [\"loss\"], \"attrs\": {\"keepdims\": false}}"
    "]}]}";

START_TEST(shared_vars_get_summed_gradients) {
    pardo_status st;
    test_rng r = {12};
    pardo_program *p = backward_program(shared, "loss");
    ck_assert_ptr_nonnull(pardo_block_find_var(&p->blocks[0], "w@GRAD@RENAME@1"));
    ck_assert_ptr_nonnull(pardo_block_find_var(&p->blocks[0], "h@GRAD@RENAME@1"));
    pardo_executor *ex = test_executor(p, 1);
    int64_t xs[2] = {3, 4};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1);
    ck_assert_int_eq(pardo_executor_feed(ex, "x", x, "x", &st), PARDO_OK);
    check_params(p, ex, "loss");
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* A small network over the network ops: conv2d (stride, pad) -> tanh ->
 * avg_pool2d -> flatten -> layer_norm (scale, bias) -> matmul with an
 * embedding row added -> mse_loss against a target. */
static const char cnn[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": " F64("[2, 2, 5, 5]") ", \"role\": \"feed\"},"
    "\"t\": " F64("[2, 3]") ", \"role\": \"feed\"},"
    "\"idx\": {\"dtype\": \"int64\", \"shape\": [2], \"role\": \"feed\"},"
    "\"k\": " F64("[4, 2, 3, 3]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -0.5, \"high\": 0.5, \"seed\": 1}},"
    "\"kb\": " F64("[4]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -0.5, \"high\": 0.5, \"seed\": 2}},"
    "\"g\": " F64("[16]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": 0.5, \"high\": 1.5, \"seed\": 3}},"
    "\"gb\": " F64("[16]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -0.5, \"high\": 0.5, \"seed\": 4}},"
    "\"w\": " F64("[16, 3]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -0.5, \"high\": 0.5, \"seed\": 5}},"
    "\"emb\": " F64("[4, 3]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -0.5, \"high\": 0.5, \"seed\": 6}}},"
    "\"ops\": ["
    "{\"op\": \"conv2d\", \"in\": [\"x\", \"k\", \"kb\"], \"out\": [\"c\"], \"attrs\": {\"strides\": [2, 2], \"pads\": [1, 1, 1, 1]}},"
    "{\"op\": \"tanh\", \"in\": [\"c\"], \"out\": [\"a\"]},"
    "{\"op\": \"avg_pool2d\", \"in\": [\"a\"], \"out\": [\"p\"], \"attrs\": {\"kernel\": [2, 2], \"strides\": [1, 1]}},"
    "{\"op\": \"flatten\", \"in\": [\"p\"], \"out\": [\"f\"]},"
    "{\"op\": \"layer_norm\", \"in\": [\"f\", \"g\", \"gb\"], \"out\": [\"n\"]},"
    "{\"op\": \"matmul\", \"in\": [\"n\", \"w\"], \"out\": [\"o\"]},"
    "{\"op\": \"embedding\", \"in\": [\"emb\", \"idx\"], \"out\": [\"e\"]},"
    "{\"op\": \"add\", \"in\": [\"o\", \"e\"], \"out\": [\"oe\"]},"
    "{\"op\": \"mse_loss\", \"in\": [\"oe\", \"t\"], \"out\": [\"loss\"]}"
    "]}]}";

START_TEST(network_ops_gradients_match_finite_differences) {
    pardo_status st;
    test_rng r = {13};
    pardo_program *p = backward_program(cnn, "loss");
    pardo_executor *ex = test_executor(p, 1);
    int64_t xs[4] = {2, 2, 5, 5}, ts[2] = {2, 3}, is[1] = {2};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 4, xs, -1, 1);
    pardo_tensor *t = test_tensor_random(&r, PARDO_F64, 2, ts, -1, 1);
    pardo_tensor *idx = test_tensor_from(PARDO_I64, 1, is, (const double[]){3, 1});
    ck_assert_int_eq(pardo_executor_feed(ex, "x", x, "x", &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_feed(ex, "t", t, "t", &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_feed(ex, "idx", idx, "idx", &st), PARDO_OK);
    check_params(p, ex, "loss");
    pardo_tensor_release(x);
    pardo_tensor_release(t);
    pardo_tensor_release(idx);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* The optimizer pass wires one update per param: after one sgd step each
 * param moved by -lr times the gradient the step computed. */
START_TEST(optimizer_pass_applies_updates) {
    pardo_status st;
    test_rng r = {14};
    pardo_program *p = backward_program(mlp, "loss");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.optimizer = PARDO_OPTIMIZER_SGD;
    opt.lr = 0.5;
    ck_assert_msg(pardo_pass_optimizer(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_ptr_nonnull(pardo_block_find_var(&p->blocks[0], "learning_rate@float64"));
    pardo_executor *ex = test_executor(p, 1);
    feed_random(ex, &r, 5);
    const char *params[] = {"w1", "b1", "w2", "b2"};
    pardo_tensor *before[4];
    for (int i = 0; i < 4; i++) before[i] = pardo_tensor_clone(pardo_scope_find(pardo_executor_scope(ex), params[i]), &st);
    double l0 = run_loss(ex, "loss");
    for (int i = 0; i < 4; i++) {
        char g[64];
        snprintf(g, sizeof g, "%s@GRAD", params[i]);
        const pardo_tensor *grad = pardo_executor_fetch(ex, g), *now = pardo_executor_fetch(ex, params[i]);
        for (int64_t e = 0; e < now->numel; e++)
            ck_assert_double_eq_tol(pardo_tensor_get_f64(now, e),
                                    pardo_tensor_get_f64(before[i], e) - 0.5 * pardo_tensor_get_f64(grad, e), 1e-12);
        pardo_tensor_release(before[i]);
    }
    double l = l0;
    for (int s = 0; s < 20; s++) l = run_loss(ex, "loss");
    ck_assert_msg(l < l0, "loss did not fall: %g -> %g", l0, l);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* adam declares its moments and step as state (saved in checkpoints). */
START_TEST(optimizer_pass_declares_state) {
    pardo_status st;
    pardo_program *p = backward_program(mlp, "loss");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.optimizer = PARDO_OPTIMIZER_ADAM;
    ck_assert_msg(pardo_pass_optimizer(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    const char *state[] = {"w1@MOMENT1", "w1@MOMENT2", "w1@STEP", "b2@MOMENT2"};
    for (int i = 0; i < 4; i++) {
        const pardo_graph_var *v = pardo_block_find_var(&p->blocks[0], state[i]);
        ck_assert_msg(v && v->declared && v->role == PARDO_VAR_STATE, "%s", state[i]);
    }
    ck_assert_int_eq(pardo_block_find_var(&p->blocks[0], "w1@STEP")->type.dtype, PARDO_I64);
    pardo_executor *ex = test_executor(p, 1);
    test_rng r = {15};
    feed_random(ex, &r, 4);
    run_loss(ex, "loss");
    run_loss(ex, "loss");
    ck_assert_double_eq(pardo_tensor_get_f64(pardo_executor_fetch(ex, "w1@STEP"), 0), 2);
    /* a second optimizer pass is refused */
    ck_assert_int_eq(pardo_pass_optimizer(p, &opt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "already has optimize ops"), "%s", st.msg);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

static void expect_error(const char *text, const char *loss, int code, const char *word) {
    pardo_status st;
    pardo_program *p = test_program(text, "bw.json");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = loss;
    ck_assert_int_eq(pardo_pass_backward(p, &opt, &st), code);
    ck_assert_msg(strstr(st.msg, "bw.json") && strstr(st.msg, word), "message lacks '%s': %s", word, st.msg);
    pardo_program_free(p);
}

START_TEST(errors) {
    expect_error(mlp, "nope", PARDO_ENOTFOUND, "no var 'nope'");
    expect_error(mlp, "probs", PARDO_EINVAL, "float scalar");
    expect_error(mlp, "y", PARDO_EINVAL, "float scalar");
    /* twice: the second time the graph already has backward ops */
    pardo_status st;
    pardo_program *p = backward_program(mlp, "loss");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = "loss";
    ck_assert_int_eq(pardo_pass_backward(p, &opt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "already has backward ops"), "%s", st.msg);
    pardo_program_free(p);
    /* an op on the path that has no gradient: accuracy's float output as the loss */
    expect_error("{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                 "\"x\": " F64("[2, 3]") ", \"role\": \"feed\"},"
                 "\"y\": {\"dtype\": \"int64\", \"shape\": [2], \"role\": \"feed\"},"
                 "\"w\": " F64("[3, 3]") ", \"role\": \"param\", \"init\": {\"fill\": \"normal\"}}},"
                 "\"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
                 "{\"op\": \"accuracy\", \"in\": [\"h\", \"y\"], \"out\": [\"acc\"]}]}]}",
                 "acc", PARDO_ENOTSUP, "not differentiable");
    /* the optimizer pass needs gradients */
    pardo_program *fwd = test_program(mlp, "bw.json");
    pardo_pass_options o = pardo_pass_defaults();
    o.optimizer = PARDO_OPTIMIZER_SGD;
    ck_assert_int_eq(pardo_pass_optimizer(fwd, &o, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "no param has a gradient"), "%s", st.msg);
    pardo_program_free(fwd);
}
END_TEST

Suite *make_backward_suite(void) {
    Suite *s = suite_create("backward");
    TCase *tc = tcase_create("Core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, mlp_gradients_match_finite_differences);
    tcase_add_test(tc, shared_vars_get_summed_gradients);
    tcase_add_test(tc, network_ops_gradients_match_finite_differences);
    tcase_add_test(tc, optimizer_pass_applies_updates);
    tcase_add_test(tc, optimizer_pass_declares_state);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, errors);
    suite_add_tcase(s, te);
    return s;
}
