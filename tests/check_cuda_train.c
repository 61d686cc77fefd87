/* check_cuda_train.c - the training-side CUDA kernels (ops/cuda/optimizer_cuda.c, data_cuda.c, conv_cuda.c,
 * pool_cuda.c, embedding_cuda.c, batch_norm_cuda.c and their .cu halves), each op run by an executor on the GPU and
 * compared with the same graph on the CPU kernels (the reference; those are checked against PyTorch, NumPy and naive
 * loops in their own suites): sgd, momentum, adam and adamw over several steps (params and states updated in place,
 * adam's step counter, lr as [] and [1], the attrs); reshape, flatten, identity, transpose (any perm), concat (any
 * axis), cast and fill with their gradients; conv2d and conv2d_grad (strides, pads, dilations, groups, the bias, relu,
 * pointwise kernels, several chunks of columns); the 2-D pools and their gradients (ties); embedding and
 * embedding_grad (atomicAdd: compared within a tolerance); batch_norm and its gradient in training and eval mode.
 * Float32 and float64, odd sizes and sizes of many blocks, every output of a gradient and some left out, no dY; what
 * the GPU halves do not take runs the CPU kernel. Without a CUDA device each test says that it ran the CPU side only.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/device.h"
#include "cuda_test_util.h"
#include "graph_test_util.h"
#include "test_util.h"

/* Says so when the GPU half of `test` is skipped; the CPU half still runs. */
static void note_gpu(const char *test) { test_cuda_note_gpu("cuda_train", test); }

/* Whether the executors run in training mode (batch_norm's batch statistics); a test that sets it runs in its
 * own process (Check forks each). */
static bool training_mode;

static pardo_executor *executor_on(const pardo_program *p, pardo_device_kind dev) {
    return test_cuda_executor(p, dev, training_mode);
}

static pardo_executor *gpu_executor(const pardo_program *p) { return executor_on(p, PARDO_DEVICE_CUDA); }




/* test_assert_close, the message naming the var and the step. */
static void assert_close_named(const char *name, int step, const pardo_tensor *a, const pardo_tensor *b, double rtol,
                               double atol) {
    ck_assert_msg(a->dtype == b->dtype && pardo_shape_equal(a->ndim, a->shape, b->ndim, b->shape),
                  "%s step %d: dtype or shape differ", name, step);
    for (int64_t i = 0; i < a->numel; i++) {
        const double x = pardo_tensor_get_f64(a, i), y = pardo_tensor_get_f64(b, i);
        const bool ok = (isnan(x) && isnan(y)) || x == y || fabs(x - y) <= atol + rtol * fabs(y);
        ck_assert_msg(ok, "%s step %d element %lld: got %.9g on the GPU, %.9g on the CPU (rtol %g, atol %g)", name,
                      step, (long long)i, x, y, rtol, atol);
    }
}

/* Runs `graph` on both devices for `steps` steps, step s fed feeds[s * n_feeds ..] (NULL tensors: not fed that
 * step), and compares the fetched vars `fetch` after every step. Without a GPU only the CPU side runs. */
static void compare_steps(const char *graph, int steps, const test_named_tensor *feeds, int n_feeds,
                          const char *const *fetch, int n_fetch, double rtol, double atol) {
    pardo_status st;
    pardo_program *p = test_program(graph, "cuda_train.json");
    const bool gpu_here = pardo_device_count() > 0;
    pardo_executor *gpu = gpu_here ? gpu_executor(p) : NULL, *cpu = executor_on(p, PARDO_DEVICE_CPU);
    for (int s = 0; s < steps; s++) {
        const test_named_tensor *f = feeds + s * n_feeds;
        for (int k = 0; k < n_feeds; k++)
            if (f[k].t) test_feed(cpu, f[k].name, f[k].t);
        ck_assert_msg(pardo_executor_run(cpu, &st) == PARDO_OK, "cpu: %s\n%s", st.msg, graph);
        for (int k = 0; k < n_fetch; k++) ck_assert_msg(pardo_executor_fetch(cpu, fetch[k]), "cpu: no %s", fetch[k]);
        if (!gpu) continue;
        for (int k = 0; k < n_feeds; k++)
            if (f[k].t) test_feed(gpu, f[k].name, f[k].t);
        ck_assert_msg(pardo_executor_run(gpu, &st) == PARDO_OK, "gpu: %s\n%s", st.msg, graph);
        for (int k = 0; k < n_fetch; k++) {
            pardo_tensor *zg = pardo_executor_fetch(gpu, fetch[k]), *zc = pardo_executor_fetch(cpu, fetch[k]);
            ck_assert_msg(zg != NULL, "gpu: no %s", fetch[k]);
            ck_assert_ptr_nonnull(pardo_tensor_cpu(zg, &st));
            ck_assert_ptr_nonnull(pardo_tensor_cpu(zc, &st));
            assert_close_named(fetch[k], s, zg, zc, rtol, atol);
        }
    }
    pardo_executor_free(gpu);
    pardo_executor_free(cpu);
    pardo_program_free(p);
}

/* As compare_steps for one step of the same feeds run twice (the second reuses the first's outputs). */
static void compare_twice(const char *graph, const test_named_tensor *feeds, int n_feeds, const char *const *fetch,
                          int n_fetch, double rtol, double atol) {
    test_named_tensor f[2 * 8];
    ck_assert_int_le(n_feeds, 8);
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < n_feeds; k++) f[s * n_feeds + k] = feeds[k];
    compare_steps(graph, 2, f, n_feeds, fetch, n_fetch, rtol, atol);
}

static double tol_of(pardo_dtype dt) { return dt == PARDO_F64 ? 1e-12 : 1e-5; }

/* ---- the optimizers ---- */

enum { OPT_STEPS = 4 };

/* `op` (sgd, momentum, adam, adamw) with attrs (JSON object text) on a param of dtype dt and shape (nd, shape),
 * lr a feed of [] or [1] (lr_vec) of lr_dt, adam's step of step_dt: OPT_STEPS steps of random gradients, the
 * param and every state compared after each. */
static void check_optimizer(const char *op, const char *attrs, pardo_dtype dt, int nd, const int64_t *shape,
                            bool lr_vec, pardo_dtype lr_dt, pardo_dtype step_dt) {
    char graph[4096], sh[128];
    test_shape_json(sh, sizeof sh, nd, shape);
    const char *dn = pardo_dtype_name(dt);
    const bool adam = strncmp(op, "adam", 4) == 0, mom = strcmp(op, "momentum") == 0;
    char states[1024] = "", ins[256], outs[256];
    if (mom) {
        snprintf(states, sizeof states,
                 ", \"v\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"state\", \"init\": {\"fill\": \"constant\", "
                 "\"value\": 0}}",
                 dn, sh);
        snprintf(ins, sizeof ins, "\"p\", \"g\", \"v\", \"lr\"");
        snprintf(outs, sizeof outs, "\"p\", \"v\"");
    } else if (adam) {
        snprintf(states, sizeof states,
                 ", \"m\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"state\", \"init\": {\"fill\": \"constant\", "
                 "\"value\": 0}}, \"v\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"state\", \"init\": {\"fill\": "
                 "\"constant\", \"value\": 0}}, \"step\": {\"dtype\": \"%s\", \"shape\": [], \"role\": \"state\", "
                 "\"init\": {\"fill\": \"constant\", \"value\": 0}}",
                 dn, sh, dn, sh, pardo_dtype_name(step_dt));
        snprintf(ins, sizeof ins, "\"p\", \"g\", \"m\", \"v\", \"step\", \"lr\"");
        snprintf(outs, sizeof outs, "\"p\", \"m\", \"v\", \"step\"");
    } else {
        snprintf(ins, sizeof ins, "\"p\", \"g\", \"lr\"");
        snprintf(outs, sizeof outs, "\"p\"");
    }
    snprintf(graph, sizeof graph,
             "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
             "\"p\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"param\", \"init\": {\"fill\": \"uniform\", "
             "\"low\": -1, \"high\": 1, \"seed\": 3}},"
             "\"g\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"},"
             "\"lr\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}%s},"
             "\"ops\": [{\"op\": \"%s\", \"in\": [%s], \"out\": [%s], \"role\": \"optimize\", \"attrs\": %s}]}]}",
             dn, sh, dn, sh, pardo_dtype_name(lr_dt), lr_vec ? "[1]" : "[]", states, op, ins, outs,
             attrs ? attrs : "{}");
    test_rng r = {29};
    test_named_tensor feeds[OPT_STEPS * 2];
    const int64_t one = 1;
    const double lr = adam ? 0.01 : 0.1;
    pardo_tensor *lrt = test_tensor_from(lr_dt, lr_vec ? 1 : 0, &one, &lr);
    for (int s = 0; s < OPT_STEPS; s++) {
        feeds[2 * s] = (test_named_tensor){"g", test_tensor_random(&r, dt, nd, shape, -1.0, 1.0)};
        feeds[2 * s + 1] = (test_named_tensor){"lr", lrt};
    }
    static const char *const fetch_sgd[] = {"p"}, *const fetch_mom[] = {"p", "v"},
                             *const fetch_adam[] = {"p", "m", "v", "step"};
    const char *const *fetch = adam ? fetch_adam : mom ? fetch_mom : fetch_sgd;
    compare_steps(graph, OPT_STEPS, feeds, 2, fetch, adam ? 4 : mom ? 2 : 1, tol_of(dt), tol_of(dt));
    for (int s = 0; s < OPT_STEPS; s++) pardo_tensor_release(feeds[2 * s].t);
    pardo_tensor_release(lrt);
}

START_TEST(optimizers_match_cpu) {
    note_gpu("optimizers_match_cpu");
    static const struct {
        const char *op, *attrs;
    } cases[] = {
        {"sgd", NULL},      {"sgd", "{\"weight_decay\": 0.05}"},
        {"momentum", NULL}, {"momentum", "{\"mu\": 0.8, \"nesterov\": true, \"weight_decay\": 0.1}"},
        {"adam", NULL},     {"adam", "{\"beta1\": 0.8, \"beta2\": 0.95, \"epsilon\": 0.0001, \"weight_decay\": 0.2}"},
        {"adamw", NULL},    {"adamw", "{\"beta1\": 0.8, \"beta2\": 0.95, \"epsilon\": 0.0001, \"weight_decay\": 0.5}"},
    };
    const int64_t small[] = {3, 7}, big[] = {(1 << 18) + 3}, one[] = {1};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (int f64 = 0; f64 < 2; f64++) {
            const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_optimizer(cases[c].op, cases[c].attrs, dt, 2, small, false, dt, PARDO_I64);
            check_optimizer(cases[c].op, cases[c].attrs, dt, 1, one, true, PARDO_F32, PARDO_F32);
        }
        check_optimizer(cases[c].op, cases[c].attrs, PARDO_F32, 1, big, true, PARDO_F64, PARDO_I32);
    }
}
END_TEST

/* ---- one op on both devices ---- */

/* A graph of one op `op` (attrs: JSON object text or NULL) reading ins and writing outs (JSON list text), with a
 * feed var of each tensor's dtype and shape; run twice on both devices and the vars fetch compared. */
static void check_op(const char *op, const char *attrs, const char *ins, const char *outs,
                     const test_named_tensor *feeds, int n_feeds, const char *const *fetch, int n_fetch, double tol) {
    char graph[8192], vars[4096] = "", sh[128];
    size_t w = 0;
    for (int k = 0; k < n_feeds; k++) {
        const pardo_tensor *t = feeds[k].t;
        test_shape_json(sh, sizeof sh, t->ndim, t->shape);
        w += (size_t)snprintf(vars + w, sizeof vars - w,
                              "%s\"%s\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": "
                              "\"feed\"}",
                              k ? ", " : "", feeds[k].name, pardo_dtype_name(t->dtype), sh);
    }
    snprintf(graph, sizeof graph,
             "{\"pardo\": 1, \"blocks\": [{\"vars\": {%s}, \"ops\": [{\"op\": \"%s\", \"in\": [%s], \"out\": [%s], "
             "\"attrs\": %s}]}]}",
             vars, op, ins, outs, attrs ? attrs : "{}");
    compare_twice(graph, feeds, n_feeds, fetch, n_fetch, tol, tol);
}

static pardo_tensor *rnd(pardo_dtype dt, int nd, const int64_t *shape) {
    static test_rng r = {41};
    const bool f = pardo_dtype_is_float(dt), u = pardo_dtype_is_unsigned(dt) || dt == PARDO_BOOL;
    return test_tensor_random(&r, dt, nd, shape, f ? -3.0 : u ? 0.0 : -1000.0, f ? 3.0 : u ? 2.0 : 1000.0);
}

static void release_feeds(test_named_tensor *f, int n) {
    for (int k = 0; k < n; k++) pardo_tensor_release(f[k].t);
}

/* ---- data movement ---- */

/* reshape (attr shape) or flatten (attr axis) of x, and its gradient from a dY of Y's shape and from none. */
static void check_reshape(const char *op, const char *attrs, pardo_dtype dt, int nd, const int64_t *shape, int ynd,
                          const int64_t *yshape) {
    static const char *const fy[] = {"y"}, *const fdx[] = {"dx"};
    test_named_tensor f[3] = {{"x", rnd(dt, nd, shape)}};
    check_op(op, attrs, "\"x\"", "\"y\"", f, 1, fy, 1, 0);
    if (pardo_dtype_is_float(dt)) {
        char grad[64];
        snprintf(grad, sizeof grad, "%s_grad", op);
        f[1] = (test_named_tensor){"y", rnd(dt, ynd, yshape)};
        f[2] = (test_named_tensor){"g", rnd(dt, ynd, yshape)};
        check_op(grad, attrs, "\"x\", \"y\", \"g\"", "\"dx\"", f, 3, fdx, 1, 0);
        check_op(grad, attrs, "\"x\", \"y\", \"\"", "\"dx\"", f, 2, fdx, 1, 0);
    }
    release_feeds(f, pardo_dtype_is_float(dt) ? 3 : 1);
}

START_TEST(reshape_flatten_match_cpu) {
    note_gpu("reshape_flatten_match_cpu");
    const int64_t x3[] = {2, 3, 5}, y2[] = {5, 6}, y3[] = {2, 15}, big[] = {257, 1031}, bigy[] = {1031, 257};
    const int64_t f0[] = {1, 30}, f3[] = {30, 1};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        check_reshape("reshape", "{\"shape\": [5, -1]}", dt, 3, x3, 2, y2);
        check_reshape("reshape", "{\"shape\": [0, -1]}", dt, 3, x3, 2, y3);
        check_reshape("flatten", "{\"axis\": 0}", dt, 3, x3, 2, f0);
        check_reshape("flatten", "{\"axis\": 1}", dt, 3, x3, 2, y3);
        check_reshape("flatten", "{\"axis\": -3}", dt, 3, x3, 2, f0);
        check_reshape("flatten", "{\"axis\": 3}", dt, 3, x3, 2, f3);
        check_reshape("identity", NULL, dt, 3, x3, 3, x3);
    }
    check_reshape("reshape", "{\"shape\": [1031, 257]}", PARDO_F32, 2, big, 2, bigy);
    check_reshape("reshape", "{\"shape\": [-1]}", PARDO_I64, 3, x3, 1, (const int64_t[]){30});
    check_reshape("flatten", NULL, PARDO_I32, 3, x3, 2, y3);
}
END_TEST

/* A reshape to a shape given at run time (input 1) runs the CPU kernel. */
START_TEST(reshape_runtime_shape_falls_back_to_cpu) {
    note_gpu("reshape_runtime_shape_falls_back_to_cpu");
    const int64_t x3[] = {2, 3, 5}, two[] = {2};
    static const char *const fy[] = {"y"};
    test_named_tensor f[2] = {{"x", rnd(PARDO_F32, 3, x3)},
                              {"s", test_tensor_from(PARDO_I64, 1, two, (double[]){3, -1})}};
    check_op("reshape", NULL, "\"x\", \"s\"", "\"y\"", f, 2, fy, 1, 0);
    release_feeds(f, 2);
}
END_TEST

/* transpose by perm (attrs), and transpose_grad from a dY of Y's shape and from none. */
static void check_transpose(const char *attrs, pardo_dtype dt, int nd, const int64_t *shape, const int *perm) {
    static const char *const fy[] = {"y"}, *const fdx[] = {"dx"};
    int64_t ys[PARDO_MAX_DIMS];
    for (int i = 0; i < nd; i++) ys[i] = shape[perm[i]];
    test_named_tensor f[3] = {{"x", rnd(dt, nd, shape)}};
    check_op("transpose", attrs, "\"x\"", "\"y\"", f, 1, fy, 1, 0);
    const bool fl = pardo_dtype_is_float(dt);
    if (fl) {
        f[1] = (test_named_tensor){"y", rnd(dt, nd, ys)};
        f[2] = (test_named_tensor){"g", rnd(dt, nd, ys)};
        check_op("transpose_grad", attrs, "\"x\", \"y\", \"g\"", "\"dx\"", f, 3, fdx, 1, 0);
        check_op("transpose_grad", attrs, "\"x\", \"y\", \"\"", "\"dx\"", f, 2, fdx, 1, 0);
    }
    release_feeds(f, fl ? 3 : 1);
}

START_TEST(transpose_matches_cpu) {
    note_gpu("transpose_matches_cpu");
    const int64_t s3[] = {2, 3, 5}, s4[] = {3, 1, 4, 2}, s1[] = {7}, big[] = {129, 1031};
    const int p201[] = {2, 0, 1}, rev3[] = {2, 1, 0}, p1302[] = {1, 3, 0, 2}, id1[] = {0}, p10[] = {1, 0};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        check_transpose("{\"perm\": [2, 0, 1]}", dt, 3, s3, p201);
        check_transpose(NULL, dt, 3, s3, rev3);
        check_transpose("{\"perm\": [1, 3, 0, 2]}", dt, 4, s4, p1302);
        check_transpose("{\"perm\": [0]}", dt, 1, s1, id1);
        check_transpose(NULL, dt, 0, s1, id1);
    }
    check_transpose("{\"perm\": [1, 0]}", PARDO_F32, 2, big, p10);
    check_transpose("{\"perm\": [2, 0, 1]}", PARDO_I32, 3, s3, p201);
    check_transpose("{\"perm\": [2, 0, 1]}", PARDO_I64, 3, s3, p201);
    check_transpose("{\"perm\": [1, 3, 0, 2]}", PARDO_U8, 4, s4, p1302);
}
END_TEST

/* concat of three inputs along axis (their shapes s0, s1, s2; attrs names it), and concat_grad from dY with every
 * output, with the middle one left out, and from no dY. */
static void check_concat(const char *attrs, pardo_dtype dt, int nd, const int64_t *s0, const int64_t *s1,
                         const int64_t *s2, int axis) {
    static const char *const fy[] = {"y"}, *const fdx[] = {"d0", "d1", "d2"}, *const fdx02[] = {"d0", "d2"};
    int64_t ys[PARDO_MAX_DIMS];
    memcpy(ys, s0, sizeof(int64_t) * (size_t)nd);
    ys[axis] = s0[axis] + s1[axis] + s2[axis];
    test_named_tensor f[5] = {{"a", rnd(dt, nd, s0)}, {"b", rnd(dt, nd, s1)}, {"c", rnd(dt, nd, s2)}};
    check_op("concat", attrs, "\"a\", \"b\", \"c\"", "\"y\"", f, 3, fy, 1, 0);
    const bool fl = pardo_dtype_is_float(dt);
    if (fl) {
        f[3] = (test_named_tensor){"y", rnd(dt, nd, ys)};
        f[4] = (test_named_tensor){"g", rnd(dt, nd, ys)};
        check_op("concat_grad", attrs, "\"a\", \"b\", \"c\", \"y\", \"g\"", "\"d0\", \"d1\", \"d2\"", f, 5, fdx, 3, 0);
        check_op("concat_grad", attrs, "\"a\", \"b\", \"c\", \"y\", \"g\"", "\"d0\", \"\", \"d2\"", f, 5, fdx02, 2, 0);
        check_op("concat_grad", attrs, "\"a\", \"b\", \"c\", \"y\", \"\"", "\"d0\", \"d1\", \"d2\"", f, 4, fdx, 3, 0);
    }
    release_feeds(f, fl ? 5 : 3);
}

START_TEST(concat_matches_cpu) {
    note_gpu("concat_matches_cpu");
    const int64_t a0[] = {2, 3, 4}, b0[] = {5, 3, 4}, c0[] = {1, 3, 4};
    const int64_t a1[] = {2, 3, 4}, b1[] = {2, 1, 4}, c1[] = {2, 6, 4};
    const int64_t a2[] = {2, 3, 4}, b2[] = {2, 3, 7}, c2[] = {2, 3, 1}, e2[] = {2, 3, 0};
    const int64_t ba[] = {300, 517}, bb[] = {300, 1}, bc[] = {300, 1030};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        check_concat("{\"axis\": 0}", dt, 3, a0, b0, c0, 0);
        check_concat("{\"axis\": 1}", dt, 3, a1, b1, c1, 1);
        check_concat("{\"axis\": -1}", dt, 3, a2, b2, c2, 2);
        check_concat("{\"axis\": 2}", dt, 3, a2, e2, c2, 2); /* an empty part */
    }
    check_concat("{\"axis\": 1}", PARDO_F32, 2, ba, bb, bc, 1);
    check_concat("{\"axis\": 1}", PARDO_I64, 3, a1, b1, c1, 1);
    check_concat("{\"axis\": 0}", PARDO_BOOL, 3, a0, b0, c0, 0);
}
END_TEST

/* cast of x (dtype from; taken: released here) to `to`, and, between floats, cast_grad from a dY and from none. */
static void check_cast(pardo_dtype from, pardo_dtype to, pardo_tensor *x) {
    static const char *const fy[] = {"y"}, *const fdx[] = {"dx"};
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", pardo_dtype_name(to));
    test_named_tensor f[3] = {{"x", x}};
    ck_assert_int_eq(x->dtype, from);
    check_op("cast", attrs, "\"x\"", "\"y\"", f, 1, fy, 1, 0);
    if (pardo_dtype_is_float(from) && (to == PARDO_F32 || to == PARDO_F64)) {
        f[1] = (test_named_tensor){"y", rnd(to, x->ndim, x->shape)};
        f[2] = (test_named_tensor){"g", rnd(to, x->ndim, x->shape)};
        check_op("cast_grad", attrs, "\"x\", \"y\", \"g\"", "\"dx\"", f, 3, fdx, 1, 0);
        check_op("cast_grad", attrs, "\"x\", \"y\", \"\"", "\"dx\"", f, 2, fdx, 1, 0);
        pardo_tensor_release(f[1].t);
        pardo_tensor_release(f[2].t);
    }
    pardo_tensor_release(x);
}

START_TEST(cast_matches_cpu) {
    note_gpu("cast_matches_cpu");
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    /* halves, edges, values past int32 and int64, NaN and infinities */
    static const double edge[] = {0.5,   -0.5, 1.5,      -2.7,      2147483647.0, 2147483648.5, -2147483649.0, 1e19,
                                  -1e19, NAN,  INFINITY, -INFINITY, 0.0,          -0.0,         16777217.0,    3e9};
    static const double ints[] = {0,
                                  1,
                                  -1,
                                  2147483647.0,
                                  -2147483648.0,
                                  4294967296.0 + 5,
                                  -4294967296.0 - 7,
                                  16777217.0,
                                  9007199254740993.0,
                                  -9007199254740993.0};
    const int64_t ne = sizeof edge / sizeof *edge, ni = sizeof ints / sizeof *ints, big[] = {1 << 18}, s2[] = {3, 7};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            const pardo_dtype from = dts[a], to = dts[b];
            const bool fl = pardo_dtype_is_float(from);
            if (from == PARDO_I32) {
                static const double i32[] = {0, 1, -1, 2147483647.0, -2147483648.0, 16777217.0, -16777219.0};
                const int64_t n = sizeof i32 / sizeof *i32;
                check_cast(from, to, test_tensor_from(from, 1, &n, i32));
            } else {
                check_cast(from, to, test_tensor_from(from, 1, fl ? &ne : &ni, fl ? edge : ints));
            }
            check_cast(from, to, rnd(from, 2, s2));
        }
    check_cast(PARDO_F32, PARDO_F64, rnd(PARDO_F32, 1, big));
    check_cast(PARDO_F64, PARDO_I32, rnd(PARDO_F64, 1, big));
    check_cast(PARDO_F32, PARDO_F16, rnd(PARDO_F32, 2, s2)); /* to a half: the CPU kernel */
    check_cast(PARDO_U8, PARDO_F32, rnd(PARDO_U8, 2, s2));   /* from uint8: the CPU kernel */
}
END_TEST

START_TEST(fill_matches_cpu) {
    note_gpu("fill_matches_cpu");
    static const char *const fy[] = {"y"};
    static const char *const attrs[] = {
        "{\"shape\": [3, 5], \"value\": 2.5}",
        "{\"shape\": [3, 5], \"dtype\": \"float64\", \"value\": -0.1}",
        "{\"shape\": [300, 1031], \"value\": 0.3}",
        "{\"shape\": [4], \"dtype\": \"int32\", \"value\": -7.9}",
        "{\"shape\": [2, 2], \"dtype\": \"int64\", \"value\": 1e12}",
        "{\"shape\": [0, 3]}",
        "{\"shape\": []}",
        "{\"shape\": [3, 4], \"fill\": \"uniform\", \"low\": -1, \"high\": 2, \"seed\": 5}", /* the CPU kernel */
        "{\"shape\": [3], \"dtype\": \"bool\", \"value\": 1}",                               /* the CPU kernel */
    };
    for (size_t k = 0; k < sizeof attrs / sizeof *attrs; k++)
        check_op("fill", attrs[k], "", "\"y\"", NULL, 0, fy, 1, 0);
}
END_TEST

/* ---- conv2d ---- */

/* A conv2d of X [n, c, h, w] and W [m, c / group, kh, kw] (attrs: JSON object text with its strides, pads,
 * dilations, group, activation), with a bias or not, and conv2d_grad from a random dY (and Y: relu's mask) with
 * every output, with dX alone, with dW and dB alone, and from no dY. */
static void check_conv_tol(pardo_dtype dt, const char *attrs, const int64_t *xs, const int64_t *ws, const int64_t *ys,
                           bool bias, double tol) {
    static const char *const fy[] = {"y"}, *const fall[] = {"dx", "dw", "db"}, *const fdx[] = {"dx"},
                             *const fwb[] = {"dw", "db"};
    const int64_t bs[] = {ws[0]};
    test_named_tensor f[5] = {{"x", rnd(dt, 4, xs)}, {"w", rnd(dt, 4, ws)}, {"b", bias ? rnd(dt, 1, bs) : NULL}};
    check_op("conv2d", attrs, bias ? "\"x\", \"w\", \"b\"" : "\"x\", \"w\"", "\"y\"", f, bias ? 3 : 2, fy, 1, tol);
    test_named_tensor gf[5] = {f[0], f[1], {"y", rnd(dt, 4, ys)}, {"g", rnd(dt, 4, ys)}, f[2]};
    const int ng = bias ? 5 : 4;
    const char *ins = bias ? "\"x\", \"w\", \"b\", \"y\", \"g\"" : "\"x\", \"w\", \"\", \"y\", \"g\"";
    check_op("conv2d_grad", attrs, ins, bias ? "\"dx\", \"dw\", \"db\"" : "\"dx\", \"dw\"", gf, ng, fall, bias ? 3 : 2,
             tol);
    check_op("conv2d_grad", attrs, ins, "\"dx\"", gf, ng, fdx, 1, tol);
    check_op("conv2d_grad", attrs, ins, "\"\", \"dw\", \"db\"", gf, ng, fwb, 2, tol);
    check_op("conv2d_grad", attrs, "\"x\", \"w\", \"\", \"y\", \"\"", "\"dx\", \"dw\", \"db\"", gf, 3, fall, 3, tol);
    pardo_tensor_release(gf[2].t);
    pardo_tensor_release(gf[3].t);
    release_feeds(f, bias ? 3 : 2);
}

/* check_conv_tol at the tolerance of sums of a few hundred products: float32's 1e-4, float64's 1e-11. */
static void check_conv(pardo_dtype dt, const char *attrs, const int64_t *xs, const int64_t *ws, const int64_t *ys,
                       bool bias) {
    check_conv_tol(dt, attrs, xs, ws, ys, bias, dt == PARDO_F64 ? 1e-11 : 1e-4);
}

START_TEST(conv2d_matches_cpu) {
    note_gpu("conv2d_matches_cpu");
    const int64_t x1[] = {2, 3, 7, 7}, w1[] = {4, 3, 3, 3}, y1[] = {2, 4, 7, 7};
    /* strides 2, asymmetric pads, dilations (2, 1), 2 groups: oH = (9 + 3 - 5) / 2 + 1 = 4, oW = (8 + 1 - 3) / 2 + 1
     * = 4 */
    const int64_t x2[] = {3, 4, 9, 8}, w2[] = {6, 2, 3, 3}, y2[] = {3, 6, 4, 4};
    const int64_t x3[] = {2, 6, 5, 3}, w3[] = {4, 6, 1, 1}, y3[] = {2, 4, 5, 3}; /* pointwise */
    const int64_t x4[] = {2, 6, 5, 3}, w4[] = {4, 3, 1, 1}, y4[] = {2, 4, 5, 3}; /* pointwise, 2 groups */
    const int64_t x5[] = {1, 2, 4, 5}, w5[] = {3, 2, 4, 5}, y5[] = {1, 3, 1, 1}; /* the kernel the whole input */
    static const char *const a1 = "{\"pads\": [1, 1, 1, 1]}",
                             *const a2 = "{\"strides\": [2, 2], \"pads\": [1, 0, 2, 1], \"dilations\": [2, 1], "
                                         "\"group\": 2, \"activation\": \"relu\"}",
                             *const a4 = "{\"group\": 2, \"activation\": \"relu\"}";
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        check_conv(dt, a1, x1, w1, y1, true);
        check_conv(dt, a1, x1, w1, y1, false);
        check_conv(dt, a2, x2, w2, y2, true);
        check_conv(dt, NULL, x3, w3, y3, true);
        check_conv(dt, a4, x4, w4, y4, false);
        check_conv(dt, NULL, x5, w5, y5, true);
    }
}
END_TEST

/* Bigger images: many blocks per kernel, and columns of several chunks of images (conv_cuda.c's COL_BYTES, 16 MiB:
 * 16 x 9 x 96 x 96 floats, 5.3 MB an image, 3 images a chunk). */
START_TEST(conv2d_large_matches_cpu) {
    note_gpu("conv2d_large_matches_cpu");
    const int64_t x[] = {7, 16, 96, 96}, w[] = {8, 16, 3, 3}, y[] = {7, 8, 96, 96};
    /* dW's and dB's elements sum 7 x 96 x 96 products of values in [-3, 3], to some hundreds: float32 sums in
     * another order differ by some 1e-4 absolute */
    check_conv_tol(PARDO_F32, "{\"pads\": [1, 1, 1, 1], \"activation\": \"relu\"}", x, w, y, true, 2e-3);
}
END_TEST

/* ---- the pools ---- */

/* max_pool2d and avg_pool2d of X [n, c, h, w] (attrs: kernel, strides, pads) with values of few levels (ties:
 * the first maximum of a window), and their gradients from a dY of Y's shape and from none. */
static void check_pool(pardo_dtype dt, const char *attrs, const int64_t *xs, const int64_t *ys) {
    static const char *const fy[] = {"y"}, *const fdx[] = {"dx"};
    static test_rng r = {53};
    pardo_tensor *x = test_tensor_random(&r, dt, 4, xs, 0.0, 4.0);
    for (int64_t i = 0; i < x->numel; i++) pardo_tensor_set_f64(x, i, floor(pardo_tensor_get_f64(x, i)));
    test_named_tensor f[3] = {{"x", x}, {"y", rnd(dt, 4, ys)}, {"g", rnd(dt, 4, ys)}};
    const double tol = tol_of(dt);
    for (int max = 0; max < 2; max++) {
        char op[32], grad[48];
        snprintf(op, sizeof op, "%s_pool2d", max ? "max" : "avg");
        snprintf(grad, sizeof grad, "%s_grad", op);
        check_op(op, attrs, "\"x\"", "\"y\"", f, 1, fy, 1, tol);
        check_op(grad, attrs, "\"x\", \"y\", \"g\"", "\"dx\"", f, 3, fdx, 1, tol);
        check_op(grad, attrs, "\"x\", \"\", \"g\"", "\"dx\"", (test_named_tensor[]){f[0], f[2]}, 2, fdx, 1, tol);
        check_op(grad, attrs, "\"x\", \"y\", \"\"", "\"dx\"", f, 2, fdx, 1, tol);
    }
    release_feeds(f, 3);
}

START_TEST(pools_match_cpu) {
    note_gpu("pools_match_cpu");
    const int64_t x1[] = {2, 3, 7, 9}, y1[] = {2, 3, 3, 4};       /* 2x2, strides 2: an odd last row and column */
    const int64_t y2[] = {2, 3, 4, 5};                            /* 3x3, strides 2, pads 1 */
    const int64_t y3[] = {2, 3, 8, 5};                            /* 3x2, strides (1, 2), pads (1, 0, 2, 1) */
    const int64_t y4[] = {2, 3, 2, 3};                            /* 3x3, default strides (the kernel) */
    const int64_t xb[] = {8, 16, 64, 63}, yb[] = {8, 16, 32, 31}; /* many blocks */
    static const char *const a1 = "{\"kernel\": [2, 2], \"strides\": [2, 2]}",
                             *const a2 = "{\"kernel\": [3, 3], \"strides\": [2, 2], \"pads\": [1, 1, 1, 1]}",
                             *const a3 = "{\"kernel\": [3, 2], \"strides\": [1, 2], \"pads\": [1, 0, 2, 1]}",
                             *const a4 = "{\"kernel\": [3, 3]}";
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        check_pool(dt, a1, x1, y1);
        check_pool(dt, a2, x1, y2);
        check_pool(dt, a3, x1, y3);
        check_pool(dt, a4, x1, y4);
    }
    check_pool(PARDO_F32, a1, xb, yb);
}
END_TEST

/* An integer max pool has no CUDA kernel: the CPU kernel runs it. */
START_TEST(pool_integers_fall_back_to_cpu) {
    note_gpu("pool_integers_fall_back_to_cpu");
    const int64_t xs[] = {1, 2, 5, 5};
    static const char *const fy[] = {"y"};
    test_named_tensor f[1] = {{"x", rnd(PARDO_I32, 4, xs)}};
    check_op("max_pool2d", "{\"kernel\": [2, 2]}", "\"x\"", "\"y\"", f, 1, fy, 1, 0);
    release_feeds(f, 1);
}
END_TEST

/* ---- embedding ---- */

/* embedding of W [v, d] by indices of shape (ni, is) (dtype it, values in [0, v), repeated), and embedding_grad
 * from a dY and from none. The GPU's scatter adds with atomicAdd, in no fixed order: the sums of repeated rows are
 * compared within a tolerance. */
static void check_embedding(pardo_dtype dt, pardo_dtype it, int64_t v, int64_t d, int ni, const int64_t *is) {
    static const char *const fy[] = {"y"}, *const fdw[] = {"dw"};
    static test_rng r = {67};
    const int64_t ws[] = {v, d};
    int64_t ys[PARDO_MAX_DIMS];
    memcpy(ys, is, sizeof(int64_t) * (size_t)ni);
    ys[ni] = d;
    test_named_tensor f[4] = {{"w", rnd(dt, 2, ws)},
                              {"i", test_tensor_random(&r, it, ni, is, 0.0, (double)v)},
                              {"y", rnd(dt, ni + 1, ys)},
                              {"g", rnd(dt, ni + 1, ys)}};
    const double tol = dt == PARDO_F64 ? 1e-12 : 1e-5;
    check_op("embedding", NULL, "\"w\", \"i\"", "\"y\"", f, 2, fy, 1, 0);
    check_op("embedding_grad", NULL, "\"w\", \"i\", \"y\", \"g\"", "\"dw\"", f, 4, fdw, 1, tol);
    check_op("embedding_grad", NULL, "\"w\", \"i\", \"y\", \"\"", "\"dw\"", f, 3, fdw, 1, 0);
    release_feeds(f, 4);
}

START_TEST(embedding_matches_cpu) {
    note_gpu("embedding_matches_cpu");
    const int64_t i1[] = {13}, i2[] = {4, 7}, ib[] = {64, 129};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        check_embedding(dt, PARDO_I64, 5, 3, 1, i1); /* 13 indices into 5 rows: repeats */
        check_embedding(dt, PARDO_I32, 11, 8, 2, i2);
    }
    check_embedding(PARDO_F32, PARDO_I64, 1000, 67, 2, ib);
}
END_TEST

/* An index outside the table runs the CPU kernel, whose error names it. */
START_TEST(embedding_bad_index_errors_like_cpu) {
    note_gpu("embedding_bad_index_errors_like_cpu");
    const int64_t ws[] = {4, 3}, is[] = {3};
    static const char graph[] =
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {\"w\": {\"dtype\": \"float32\", \"shape\": [4, 3], \"role\": "
        "\"feed\"}, \"i\": {\"dtype\": \"int64\", \"shape\": [3], \"role\": \"feed\"}}, \"ops\": [{\"op\": "
        "\"embedding\", \"in\": [\"w\", \"i\"], \"out\": [\"y\"]}]}]}";
    pardo_tensor *w = rnd(PARDO_F32, 2, ws), *i = test_tensor_from(PARDO_I64, 1, is, (double[]){1, 4, 0});
    pardo_program *p = test_program(graph, "cuda_train.json");
    pardo_executor *ex = pardo_device_count() > 0 ? gpu_executor(p) : test_executor(p, 1);
    pardo_status st;
    test_feed(ex, "w", w);
    test_feed(ex, "i", i);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "input 1 'indices' [1] (element 1) is 4"), "%s", st.msg);
    pardo_executor_free(ex);
    pardo_program_free(p);
    pardo_tensor_release(w);
    pardo_tensor_release(i);
}
END_TEST

/* ---- batch_norm ---- */

/* batch_norm of X (nd dims, shape xs; C = xs[1]) with its running statistics updated in place (training) or read
 * (eval) over three steps, and batch_norm_grad from a dY with every output and with dX alone. */
static void check_batch_norm(pardo_dtype dt, int nd, const int64_t *xs, const char *attrs) {
    char graph[4096], sx[128], sc[64];
    const char *dn = pardo_dtype_name(dt);
    const int64_t cs[] = {xs[1]};
    test_shape_json(sx, sizeof sx, nd, xs);
    test_shape_json(sc, sizeof sc, 1, cs);
    snprintf(
        graph, sizeof graph,
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {\"x\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"},"
        "\"g\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"},"
        "\"sc\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"},"
        "\"bi\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"},"
        "\"mean\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"state\", \"init\": {\"fill\": \"constant\", "
        "\"value\": 0.5}},"
        "\"var\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"state\", \"init\": {\"fill\": \"constant\", "
        "\"value\": 2}}}, \"ops\": ["
        "{\"op\": \"batch_norm\", \"in\": [\"x\", \"sc\", \"bi\", \"mean\", \"var\"], \"out\": [\"y\", \"mean\", "
        "\"var\"], \"attrs\": %s},"
        "{\"op\": \"batch_norm_grad\", \"in\": [\"x\", \"sc\", \"bi\", \"mean\", \"var\", \"\", \"\", \"\", \"g\"],"
        " \"out\": [\"dx\", \"dsc\", \"dbi\"], \"attrs\": %s},"
        "{\"op\": \"batch_norm_grad\", \"in\": [\"x\", \"sc\", \"bi\", \"mean\", \"var\", \"\", \"\", \"\", \"g\"],"
        " \"out\": [\"dx2\"], \"attrs\": %s}]}]}",
        dn, sx, dn, sx, dn, sc, dn, sc, dn, sc, dn, sc, attrs, attrs, attrs);
    enum { STEPS = 3 };
    test_named_tensor f[STEPS * 4];
    for (int k = 0; k < STEPS; k++) {
        f[4 * k] = (test_named_tensor){"x", rnd(dt, nd, xs)};
        f[4 * k + 1] = (test_named_tensor){"g", rnd(dt, nd, xs)};
        f[4 * k + 2] = (test_named_tensor){"sc", rnd(dt, 1, cs)};
        f[4 * k + 3] = (test_named_tensor){"bi", rnd(dt, 1, cs)};
    }
    static const char *const fetch[] = {"y", "mean", "var", "dx", "dsc", "dbi", "dx2"};
    const double tol = dt == PARDO_F64 ? 1e-10 : 1e-4;
    compare_steps(graph, STEPS, f, 4, fetch, 7, tol, tol);
    release_feeds(f, STEPS * 4);
}

START_TEST(batch_norm_matches_cpu) {
    note_gpu("batch_norm_matches_cpu");
    const int64_t x4[] = {3, 4, 5, 7}, x2[] = {9, 6}, x3[] = {2, 3, 1}, big[] = {16, 8, 33, 31};
    for (int train = 0; train < 2; train++) {
        training_mode = train;
        for (int f64 = 0; f64 < 2; f64++) {
            const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_batch_norm(dt, 4, x4, "{}");
            check_batch_norm(dt, 2, x2, "{\"epsilon\": 0.001, \"momentum\": 0.7}");
            check_batch_norm(dt, 3, x3, "{\"momentum\": 0}");
        }
        check_batch_norm(PARDO_F32, 4, big, "{}");
    }
}
END_TEST

Suite *make_cuda_train_suite(void) {
    Suite *s = suite_create("cuda_train");
    TCase *tc = tcase_create("core");
    /* the first CUDA call of each forked test creates a context: seconds on a big GPU */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, optimizers_match_cpu);
    tcase_add_test(tc, reshape_flatten_match_cpu);
    tcase_add_test(tc, reshape_runtime_shape_falls_back_to_cpu);
    tcase_add_test(tc, transpose_matches_cpu);
    tcase_add_test(tc, concat_matches_cpu);
    tcase_add_test(tc, cast_matches_cpu);
    tcase_add_test(tc, fill_matches_cpu);
    tcase_add_test(tc, conv2d_matches_cpu);
    tcase_add_test(tc, conv2d_large_matches_cpu);
    tcase_add_test(tc, pools_match_cpu);
    tcase_add_test(tc, pool_integers_fall_back_to_cpu);
    tcase_add_test(tc, embedding_matches_cpu);
    tcase_add_test(tc, embedding_bad_index_errors_like_cpu);
    tcase_add_test(tc, batch_norm_matches_cpu);
    suite_add_tcase(s, tc);
    return s;
}
