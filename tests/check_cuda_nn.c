/* check_cuda_nn.c - the network ops' CUDA kernels (ops/cuda/softmax_cuda.c ...), each run by an executor on the
 * GPU and compared with the same graph on the CPU kernels (the reference; those are checked against naive loops,
 * NumPy and PyTorch in their own suites): float32 and float64, the attrs (axis, scale, reduction), a row that is
 * a block's (contiguous, long), a thread's (short or strided along the axis), sizes for many blocks, the
 * gradient ops with and without their dY, and the CPU fallback where a kernel takes no input of that kind.
 * Under make gpu-mock-test the GPU side is tests/gpu_mock/'s host stand-in (the glue checked); on a GPU
 * (tools/gpu_check.sh) the kernels themselves. Without a CUDA device each test says that it skipped. */
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
static void note_gpu(const char *test) { test_cuda_note_gpu("cuda_nn", test); }

static pardo_executor *gpu_executor(const pardo_program *p) { return test_cuda_executor(p, PARDO_DEVICE_CUDA, false); }

/* The graph of one block: vars "NAME": feeds of the feeds' dtypes and shapes, then the ops (a JSON list's
 * items). */
static void graph_of(char *buf, size_t n, const test_named_tensor *feeds, int n_feeds, const char *ops) {
    size_t k = (size_t)snprintf(buf, n, "{\"pardo\": 1, \"blocks\": [{\"vars\": {");
    for (int f = 0; f < n_feeds; f++) {
        char sh[128];
        test_shape_json(sh, sizeof sh, feeds[f].t->ndim, feeds[f].t->shape);
        k += (size_t)snprintf(buf + k, n - k, "%s\"%s\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}",
                              f ? ", " : "", feeds[f].name, pardo_dtype_name(feeds[f].t->dtype), sh);
    }
    ck_assert_uint_lt(k, n);
    k += (size_t)snprintf(buf + k, n - k, "}, \"ops\": [%s]}]}", ops);
    ck_assert_uint_lt(k, n);
}

/* Runs the graph of feeds and ops on both devices (training or not) for two steps (the second reuses the outputs
 * the first allocated, and draws other dropout masks) and compares the fetched vars. Without a GPU only the CPU
 * side runs. */
static void compare_devices_ex(const test_named_tensor *feeds, int n_feeds, const char *ops, const char *const *fetch,
                               int n_fetch, double tol, bool training) {
    pardo_status st;
    char graph[4096];
    graph_of(graph, sizeof graph, feeds, n_feeds, ops);
    pardo_program *p = test_program(graph, "cuda_nn.json");
    bool gpu_here = pardo_device_count() > 0;
    pardo_executor *gpu = gpu_here ? test_cuda_executor(p, PARDO_DEVICE_CUDA, training) : NULL,
                   *cpu = test_cuda_executor(p, PARDO_DEVICE_CPU, training);
    for (int step = 0; step < 2; step++) {
        for (int f = 0; f < n_feeds; f++) test_feed(cpu, feeds[f].name, feeds[f].t);
        ck_assert_msg(pardo_executor_run(cpu, &st) == PARDO_OK, "cpu: %s\n%s", st.msg, graph);
        for (int k = 0; k < n_fetch; k++) ck_assert_ptr_nonnull(pardo_executor_fetch(cpu, fetch[k]));
        if (!gpu) continue;
        for (int f = 0; f < n_feeds; f++) test_feed(gpu, feeds[f].name, feeds[f].t);
        ck_assert_msg(pardo_executor_run(gpu, &st) == PARDO_OK, "gpu: %s\n%s", st.msg, graph);
        for (int k = 0; k < n_fetch; k++) {
            pardo_tensor *zg = pardo_executor_fetch(gpu, fetch[k]), *zc = pardo_executor_fetch(cpu, fetch[k]);
            ck_assert_msg(zg != NULL, "gpu: no %s", fetch[k]);
            ck_assert_ptr_nonnull(pardo_tensor_cpu(zg, &st));
            test_assert_close(zg, zc, tol, tol);
        }
    }
    pardo_executor_free(gpu);
    pardo_executor_free(cpu);
    pardo_program_free(p);
}

static void compare_devices(const test_named_tensor *feeds, int n_feeds, const char *ops, const char *const *fetch,
                            int n_fetch, double tol) {
    compare_devices_ex(feeds, n_feeds, ops, fetch, n_fetch, tol, false);
}

/* Runs the graph on both devices, expecting each run to fail with the same code and message. */
static void compare_errors(const test_named_tensor *feeds, int n_feeds, const char *ops) {
    pardo_status sc, sg;
    char graph[4096];
    graph_of(graph, sizeof graph, feeds, n_feeds, ops);
    pardo_program *p = test_program(graph, "cuda_nn.json");
    pardo_executor *cpu = test_executor(p, 1), *gpu = pardo_device_count() > 0 ? gpu_executor(p) : NULL;
    for (int f = 0; f < n_feeds; f++) test_feed(cpu, feeds[f].name, feeds[f].t);
    const int rc = pardo_executor_run(cpu, &sc);
    ck_assert_msg(rc != PARDO_OK, "cpu: ran\n%s", graph);
    if (gpu) {
        for (int f = 0; f < n_feeds; f++) test_feed(gpu, feeds[f].name, feeds[f].t);
        ck_assert_int_eq(pardo_executor_run(gpu, &sg), rc);
        ck_assert_str_eq(sg.msg, sc.msg);
    }
    pardo_executor_free(gpu);
    pardo_executor_free(cpu);
    pardo_program_free(p);
}

static void release_all(test_named_tensor *feeds, int n) {
    for (int f = 0; f < n; f++) pardo_tensor_release(feeds[f].t);
}

static double tol_of(pardo_dtype dt) { return dt == PARDO_F64 ? 1e-11 : 2e-5; }

/* ---- softmax, log_softmax and their gradients ---- */

/* op (softmax or log_softmax) of X [shape] along axis (softmax with attr scale), then its gradient op from X, Y
 * and a fed dY (with_dy) or none; Y and dX compared. */
static void check_softmax(const char *op, pardo_dtype dt, int nd, const int64_t *shape, int axis, double scale,
                          bool with_dy) {
    test_rng r = {7};
    test_named_tensor feeds[2] = {{"x", test_tensor_random(&r, dt, nd, shape, -6.0, 6.0)},
                                  {"g", test_tensor_random(&r, dt, nd, shape, -1.0, 1.0)}};
    char attrs[128], ops[1024];
    if (strcmp(op, "softmax") == 0)
        snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"scale\": %.17g}", axis, scale);
    else
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", axis);
    snprintf(ops, sizeof ops,
             "{\"op\": \"%s\", \"in\": [\"x\"], \"out\": [\"y\"], \"attrs\": %s},"
             "{\"op\": \"%s_grad\", \"in\": [\"x\", \"y\", \"%s\"], \"out\": [\"dx\"], \"attrs\": %s}",
             op, attrs, op, with_dy ? "g" : "", attrs);
    const char *const fetch[] = {"y", "dx"};
    compare_devices(feeds, with_dy ? 2 : 1, ops, fetch, 2, tol_of(dt));
    release_all(feeds, 2);
}

START_TEST(softmax_family_matches_cpu) {
    note_gpu("softmax_family_matches_cpu");
    const int64_t small[] = {3, 7}, rows[] = {4, 300}, mid[] = {2, 5, 6}, first[] = {5, 3, 4}, one[] = {1, 1},
                  vec[] = {129}, empty[] = {0, 5}, many[] = {260, 1031}, cols[] = {517, 3, 130};
    static const char *const ops[] = {"softmax", "log_softmax"};
    for (int k = 0; k < 2; k++)
        for (int f64 = 0; f64 < 2; f64++) {
            const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_softmax(ops[k], dt, 2, small, -1, 1.0, true); /* rows a thread's */
            check_softmax(ops[k], dt, 2, rows, -1, 0.37, true); /* rows a block's */
            check_softmax(ops[k], dt, 2, rows, 0, 1.0, true);   /* strided columns */
            check_softmax(ops[k], dt, 3, mid, 1, -1.5, true);   /* inner 6 */
            check_softmax(ops[k], dt, 3, first, 0, 2.0, true);
            check_softmax(ops[k], dt, 2, one, 1, 1.0, true);
            check_softmax(ops[k], dt, 1, vec, 0, 0.125, true);
            check_softmax(ops[k], dt, 2, small, 1, 1.0, false); /* no dY: zeros */
            check_softmax(ops[k], dt, 2, empty, -1, 1.0, true); /* no elements */
            check_softmax(ops[k], dt, 2, many, -1, 0.5, true);  /* many blocks */
            check_softmax(ops[k], dt, 3, cols, 1, 1.0, true);   /* many threads' columns */
        }
}
END_TEST

/* Half inputs have no CUDA kernel: softmax runs its CPU kernel (through float32). */
START_TEST(softmax_halves_fall_back_to_cpu) {
    note_gpu("softmax_halves_fall_back_to_cpu");
    const int64_t shape[] = {4, 9};
    test_rng r = {3};
    test_named_tensor feeds[1] = {{"x", test_tensor_random(&r, PARDO_F16, 2, shape, -3.0, 3.0)}};
    const char *const fetch[] = {"y"};
    compare_devices(feeds, 1, "{\"op\": \"softmax\", \"in\": [\"x\"], \"out\": [\"y\"]}", fetch, 1, 0.0);
    release_all(feeds, 1);
}
END_TEST

/* ---- softmax_cross_entropy and its gradient ---- */

/* softmax_cross_entropy of logits [n, c] against labels (dtype ldt) with reduction red, then its gradient from
 * a fed dloss (with_dl) or none; loss and dlogits compared. */
static void check_sce(pardo_dtype dt, pardo_dtype ldt, int64_t n, int64_t c, const char *red, bool with_dl) {
    test_rng r = {19};
    const int64_t xs[] = {n, c}, ls[] = {n}, none_shape[] = {n};
    const bool per_row = strcmp(red, "none") == 0;
    test_named_tensor feeds[3] = {{"x", test_tensor_random(&r, dt, 2, xs, -8.0, 8.0)},
                                  {"l", test_tensor_random(&r, ldt, 1, ls, 0.0, (double)c)},
                                  {"g", test_tensor_random(&r, dt, per_row ? 1 : 0, none_shape, 0.5, 2.0)}};
    char ops[1024];
    snprintf(ops, sizeof ops,
             "{\"op\": \"softmax_cross_entropy\", \"in\": [\"x\", \"l\"], \"out\": [\"loss\"], \"attrs\": "
             "{\"reduction\": \"%s\"}},"
             "{\"op\": \"softmax_cross_entropy_grad\", \"in\": [\"x\", \"l\", \"loss\", \"%s\"], \"out\": [\"dx\", "
             "\"\"], \"attrs\": {\"reduction\": \"%s\"}}",
             red, with_dl ? "g" : "", red);
    const char *const fetch[] = {"loss", "dx"};
    compare_devices(feeds, with_dl ? 3 : 2, ops, fetch, 2, tol_of(dt));
    release_all(feeds, 3);
}

START_TEST(softmax_cross_entropy_matches_cpu) {
    note_gpu("softmax_cross_entropy_matches_cpu");
    static const char *const reds[] = {"mean", "sum", "none"};
    for (int k = 0; k < 3; k++)
        for (int f64 = 0; f64 < 2; f64++) {
            const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_sce(dt, PARDO_I32, 5, 7, reds[k], true);      /* rows a thread's */
            check_sce(dt, PARDO_I64, 6, 300, reds[k], true);    /* rows a block's */
            check_sce(dt, PARDO_I64, 1000, 10, reds[k], true);  /* many threads */
            check_sce(dt, PARDO_I32, 300, 1500, reds[k], true); /* many blocks */
            check_sce(dt, PARDO_I64, 1, 1, reds[k], true);
            check_sce(dt, PARDO_I32, 5, 7, reds[k], false); /* no dloss: zeros */
            check_sce(dt, PARDO_I64, 0, 4, reds[k], true);  /* no rows: mean 0 */
        }
}
END_TEST

/* A label outside [0, C) fails the op on the GPU with the CPU kernel's code and message (the first such row),
 * in the forward and in the gradient, for int32 and int64 labels and both row kernels. */
START_TEST(softmax_cross_entropy_bad_label_fails_like_cpu) {
    note_gpu("softmax_cross_entropy_bad_label_fails_like_cpu");
    const int64_t cs[] = {7, 300};
    for (int k = 0; k < 2; k++)
        for (int l64 = 0; l64 < 2; l64++) {
            const int64_t c = cs[k], xs[] = {6, c}, ls[] = {6}, none_shape[] = {6};
            test_rng r = {29};
            test_named_tensor feeds[3] = {{"x", test_tensor_random(&r, PARDO_F32, 2, xs, -1.0, 1.0)},
                                          {"l", test_tensor_random(&r, l64 ? PARDO_I64 : PARDO_I32, 1, ls, 0.0, 3.0)},
                                          {"g", test_tensor_random(&r, PARDO_F32, 1, none_shape, -1.0, 1.0)}};
            pardo_tensor_set_f64(feeds[1].t, 2, (double)c); /* rows 2 and 4 bad: row 2 is named */
            pardo_tensor_set_f64(feeds[1].t, 4, -1.0);
            compare_errors(feeds, 2,
                           "{\"op\": \"softmax_cross_entropy\", \"in\": [\"x\", \"l\"], \"out\": [\"loss\"]}");
            compare_errors(feeds, 3,
                           "{\"op\": \"softmax_cross_entropy_grad\", \"in\": [\"x\", \"l\", \"g\", \"g\"], "
                           "\"out\": [\"dx\", \"\"], \"attrs\": {\"reduction\": \"none\"}}");
            release_all(feeds, 3);
        }
}
END_TEST

/* ---- gelu and the activations' gradients ---- */

/* op (relu, sigmoid, tanh or gelu) of X [shape], then op_grad from X (or, x_out, with X left out: Y stands in)
 * and Y with a fed dY (with_dy) or none; Y and dX compared. */
static void check_act(const char *op, pardo_dtype dt, int nd, const int64_t *shape, bool x_out, bool with_dy) {
    test_rng r = {13};
    test_named_tensor feeds[2] = {{"x", test_tensor_random(&r, dt, nd, shape, -5.0, 5.0)},
                                  {"g", test_tensor_random(&r, dt, nd, shape, -1.0, 1.0)}};
    char ops[1024];
    snprintf(ops, sizeof ops,
             "{\"op\": \"%s\", \"in\": [\"x\"], \"out\": [\"y\"]},"
             "{\"op\": \"%s_grad\", \"in\": [\"%s\", \"y\", \"%s\"], \"out\": [\"dx\"]}",
             op, op, x_out ? "" : "x", with_dy ? "g" : "");
    const char *const fetch[] = {"y", "dx"};
    compare_devices(feeds, with_dy ? 2 : 1, ops, fetch, 2, tol_of(dt));
    release_all(feeds, 2);
}

START_TEST(activations_and_gradients_match_cpu) {
    note_gpu("activations_and_gradients_match_cpu");
    static const char *const ops[] = {"relu", "sigmoid", "tanh", "gelu"};
    const int64_t small[] = {3, 7}, odd[] = {2, 3, 5}, large[] = {1 << 18}, empty[] = {0, 3};
    for (int k = 0; k < 4; k++) {
        const bool from_y = k < 3; /* gelu_grad reads X */
        for (int f64 = 0; f64 < 2; f64++) {
            const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_act(ops[k], dt, 2, small, false, true);
            check_act(ops[k], dt, 3, odd, false, true);
            check_act(ops[k], dt, 2, small, false, false); /* no dY: zeros */
            check_act(ops[k], dt, 2, empty, false, true);
            if (from_y) check_act(ops[k], dt, 3, odd, true, true);
        }
        check_act(ops[k], PARDO_F32, 1, large, false, true);
    }
}
END_TEST

/* Half inputs have no CUDA kernel: gelu runs its CPU kernel (through float32). */
START_TEST(gelu_halves_fall_back_to_cpu) {
    note_gpu("gelu_halves_fall_back_to_cpu");
    const int64_t shape[] = {5, 6};
    test_rng r = {3};
    test_named_tensor feeds[1] = {{"x", test_tensor_random(&r, PARDO_BF16, 2, shape, -3.0, 3.0)}};
    const char *const fetch[] = {"y"};
    compare_devices(feeds, 1, "{\"op\": \"gelu\", \"in\": [\"x\"], \"out\": [\"y\"]}", fetch, 1, 0.0);
    release_all(feeds, 1);
}
END_TEST

/* ---- layer_norm and its gradient ---- */

enum { LN_SCALE = 1, LN_BIAS = 2, LN_DY = 4, LN_DMEAN = 8, LN_DINV = 16, LN_STATS_OUT = 32 };
enum { LN_DX = 1, LN_DSCALE = 2, LN_DBIAS = 4 };

/* layer_norm of X [shape] from axis with epsilon eps, its inputs and Mean / InvStdDev outputs as `with` says,
 * then layer_norm_grad with the gradients `with` names and the outputs `want` asks for; all compared. */
static void check_ln(pardo_dtype dt, int nd, const int64_t *shape, int axis, double eps, int with, int want) {
    test_rng r = {31};
    const int a = axis < 0 ? axis + nd : axis;
    int64_t sshape[PARDO_MAX_DIMS];
    for (int d = 0; d < nd; d++) sshape[d] = d < a ? shape[d] : 1;
    test_named_tensor feeds[6];
    int n = 0;
    feeds[n++] = (test_named_tensor){"x", test_tensor_random(&r, dt, nd, shape, -3.0, 5.0)};
    if (with & LN_SCALE) feeds[n++] = (test_named_tensor){"s", test_tensor_random(&r, dt, nd - a, shape + a, 0.5, 2.0)};
    if (with & LN_BIAS) feeds[n++] = (test_named_tensor){"b", test_tensor_random(&r, dt, nd - a, shape + a, -1.0, 1.0)};
    if (with & LN_DY) feeds[n++] = (test_named_tensor){"g", test_tensor_random(&r, dt, nd, shape, -1.0, 1.0)};
    if (with & LN_DMEAN) feeds[n++] = (test_named_tensor){"gm", test_tensor_random(&r, dt, nd, sshape, -1.0, 1.0)};
    if (with & LN_DINV) feeds[n++] = (test_named_tensor){"gi", test_tensor_random(&r, dt, nd, sshape, -1.0, 1.0)};
    const bool stats = with & LN_STATS_OUT;
    char attrs[96], ops[1536];
    snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"epsilon\": %.17g}", axis, eps);
    snprintf(ops, sizeof ops,
             "{\"op\": \"layer_norm\", \"in\": [\"x\", \"%s\", \"%s\"], \"out\": [\"y\", \"%s\", \"%s\"], "
             "\"attrs\": %s},"
             "{\"op\": \"layer_norm_grad\", \"in\": [\"x\", \"%s\", \"%s\", \"y\", \"%s\", \"%s\", \"%s\", \"%s\", "
             "\"%s\"], \"out\": [\"%s\", \"%s\", \"%s\"], \"attrs\": %s}",
             with & LN_SCALE ? "s" : "", with & LN_BIAS ? "b" : "", stats ? "m" : "", stats ? "iv" : "", attrs,
             with & LN_SCALE ? "s" : "", with & LN_BIAS ? "b" : "", stats ? "m" : "", stats ? "iv" : "",
             with & LN_DY ? "g" : "", with & LN_DMEAN ? "gm" : "", with & LN_DINV ? "gi" : "", want & LN_DX ? "dx" : "",
             want & LN_DSCALE && with & LN_SCALE ? "ds" : "", want & LN_DBIAS && with & LN_BIAS ? "db" : "", attrs);
    const char *fetch[6];
    int nf = 0;
    fetch[nf++] = "y";
    if (stats) fetch[nf++] = "m", fetch[nf++] = "iv";
    if (want & LN_DX) fetch[nf++] = "dx";
    if (want & LN_DSCALE && with & LN_SCALE) fetch[nf++] = "ds";
    if (want & LN_DBIAS && with & LN_BIAS) fetch[nf++] = "db";
    /* dscale sums hundreds of rows: float32's rounding of the CPU's order and the GPU's differ */
    compare_devices(feeds, n, ops, fetch, nf, dt == PARDO_F64 ? 1e-10 : 1e-4);
    release_all(feeds, n);
}

START_TEST(layer_norm_matches_cpu) {
    note_gpu("layer_norm_matches_cpu");
    const int64_t small[] = {4, 10}, mid[] = {3, 4, 50}, odd[] = {2, 3, 5}, wide[] = {600, 300}, tall[] = {5000, 7},
                  one[] = {1, 1}, empty[] = {0, 8};
    const int all = LN_SCALE | LN_BIAS | LN_DY | LN_DMEAN | LN_DINV | LN_STATS_OUT,
              every = LN_DX | LN_DSCALE | LN_DBIAS;
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        check_ln(dt, 2, small, -1, 1e-5, all, every);               /* rows a thread's */
        check_ln(dt, 3, mid, 1, 1e-5, all, every);                  /* rows of 200: a block's */
        check_ln(dt, 3, mid, -1, 0.1, LN_SCALE | LN_DY, every);     /* scale only, epsilon */
        check_ln(dt, 3, odd, 0, 1e-5, LN_DY | LN_STATS_OUT, every); /* one row, no scale or bias */
        check_ln(dt, 2, small, 1, 1e-5, LN_SCALE | LN_BIAS | LN_DMEAN | LN_DINV | LN_STATS_OUT, every); /* no dY */
        check_ln(dt, 2, small, 1, 1e-5, all, LN_DX);                                                    /* dX alone */
        check_ln(dt, 2, small, 1, 1e-5, all, LN_DSCALE | LN_DBIAS); /* dscale and dbias alone */
        check_ln(dt, 2, wide, 1, 1e-5, all, every);                 /* many blocks */
        check_ln(dt, 2, tall, -1, 1e-5, all, every);                /* many threads' rows */
        check_ln(dt, 2, one, -1, 1e-5, all, every);
        check_ln(dt, 2, empty, -1, 1e-5, all, every); /* no rows: zero dscale, dbias */
    }
}
END_TEST

/* ---- the reductions, their gradients and argmax ---- */

/* Rounds t's elements down to integers (ties for max and min) and, with nan, makes every 97th a NaN. */
static void coarsen(pardo_tensor *t, bool nan) {
    for (int64_t i = 0; i < t->numel; i++)
        pardo_tensor_set_f64(t, i, nan && i % 97 == 5 ? (double)NAN : floor(pardo_tensor_get_f64(t, i)));
}

/* op (reduce_sum, _mean, _max or _min) of X [shape] with attrs (a JSON object's members, "" for none) and the axes
 * from an int64 input when axes_in (n_axes of them), then op_grad from X, Y and a fed dY (with_dy) or none, in
 * the 4-input form or (old_form) the 3-input one; Y and dX compared. coarse: integer values (ties), nan: NaNs
 * too. */
static void check_reduce(const char *op, pardo_dtype dt, int nd, const int64_t *shape, const char *attrs,
                         const int64_t *axes_in, int n_axes, bool with_dy, bool old_form, bool coarse, bool nan) {
    test_rng r = {37};
    test_named_tensor feeds[3];
    int n = 0;
    feeds[n++] = (test_named_tensor){"x", test_tensor_random(&r, dt, nd, shape, -4.0, 4.0)};
    if (coarse) coarsen(feeds[0].t, nan);
    if (axes_in) {
        double v[PARDO_MAX_DIMS];
        const int64_t as[] = {n_axes};
        for (int k = 0; k < n_axes; k++) v[k] = (double)axes_in[k];
        feeds[n++] = (test_named_tensor){"ax", test_tensor_from(PARDO_I64, 1, as, v)};
    }
    /* dY takes Y's shape, known only from a CPU run: run the forward once on the CPU */
    char ops[1024], fwd[512];
    snprintf(fwd, sizeof fwd, "{\"op\": \"%s\", \"in\": [\"x\"%s], \"out\": [\"y\"], \"attrs\": {%s}}", op,
             axes_in ? ", \"ax\"" : "", attrs);
    {
        char graph[4096];
        graph_of(graph, sizeof graph, feeds, n, fwd);
        pardo_program *p = test_program(graph, "cuda_nn_shape.json");
        pardo_executor *cpu = test_executor(p, 1);
        for (int f = 0; f < n; f++) test_feed(cpu, feeds[f].name, feeds[f].t);
        test_run(cpu);
        pardo_tensor *y = test_fetch(cpu, "y");
        feeds[n++] = (test_named_tensor){"g", test_tensor_random(&r, dt, y->ndim, y->shape, -1.0, 1.0)};
        pardo_executor_free(cpu);
        pardo_program_free(p);
    }
    if (old_form)
        snprintf(ops, sizeof ops,
                 "%s, {\"op\": \"%s_grad\", \"in\": [\"x\", \"y\", \"%s\"], \"out\": [\"dx\"], \"attrs\": {%s}}", fwd,
                 op, with_dy ? "g" : "", attrs);
    else
        snprintf(ops, sizeof ops,
                 "%s, {\"op\": \"%s_grad\", \"in\": [\"x\", \"%s\", \"y\", \"%s\"], \"out\": [\"dx\", \"\"], "
                 "\"attrs\": {%s}}",
                 fwd, op, axes_in ? "ax" : "", with_dy ? "g" : "", attrs);
    if (!with_dy) { /* the last feed, dY, left out */
        pardo_tensor_release(feeds[n - 1].t);
        n--;
    }
    const char *const fetch[] = {"y", "dx"};
    compare_devices(feeds, n, ops, fetch, 2, dt == PARDO_F64 ? 1e-11 : 1e-5);
    release_all(feeds, n);
}

START_TEST(reductions_match_cpu) {
    note_gpu("reductions_match_cpu");
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"};
    const int64_t s3[] = {3, 4, 5}, wide[] = {300, 1000}, flat[] = {1 << 18}, unit[] = {2, 1, 3, 1}, empty[] = {4, 0};
    const int64_t ax02[] = {0, 2}, ax_last[] = {-1};
    for (int k = 0; k < 4; k++) {
        const bool extreme = k >= 2;
        for (int f64 = 0; f64 < 2; f64++) {
            const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_reduce(ops[k], dt, 3, s3, "\"axes\": [1]", NULL, 0, true, false, extreme, false);
            check_reduce(ops[k], dt, 3, s3, "\"axes\": [0, 2], \"keepdims\": false", NULL, 0, true, false, extreme,
                         false);
            check_reduce(ops[k], dt, 3, s3, "", NULL, 0, true, false, extreme, false); /* all axes */
            check_reduce(ops[k], dt, 3, s3, "\"noop_with_empty_axes\": true", NULL, 0, true, false, false, false);
            check_reduce(ops[k], dt, 3, s3, "\"keepdims\": false", ax02, 2, true, false, extreme, false); /* input */
            check_reduce(ops[k], dt, 3, s3, "", ax_last, 1, true, false, extreme, false);
            check_reduce(ops[k], dt, 3, s3, "\"axes\": [2]", NULL, 0, false, false, false, false); /* no dY */
            check_reduce(ops[k], dt, 3, s3, "\"axes\": [1]", NULL, 0, true, true, extreme, false); /* X, Y, dY */
            check_reduce(ops[k], dt, 4, unit, "\"axes\": [1, 2]", NULL, 0, true, false, extreme, false);
            check_reduce(ops[k], dt, 2, wide, "\"axes\": [1]", NULL, 0, true, false, extreme, false); /* blocks */
            check_reduce(ops[k], dt, 2, wide, "\"axes\": [0]", NULL, 0, true, false, extreme, false); /* strided */
            check_reduce(ops[k], dt, 2, empty, "\"axes\": [1]", NULL, 0, true, false, false, false);
            if (extreme) check_reduce(ops[k], dt, 2, wide, "\"axes\": [1]", NULL, 0, true, false, true, true); /* NaN */
        }
        check_reduce(ops[k], PARDO_F32, 1, flat, "", NULL, 0, true, false, extreme, false); /* one block's output */
    }
}
END_TEST

/* An int32 sum has no CUDA kernel: it runs the CPU kernel. */
START_TEST(reduce_integers_fall_back_to_cpu) {
    note_gpu("reduce_integers_fall_back_to_cpu");
    const int64_t shape[] = {4, 6};
    test_rng r = {5};
    test_named_tensor feeds[1] = {{"x", test_tensor_random(&r, PARDO_I32, 2, shape, -50.0, 50.0)}};
    const char *const fetch[] = {"y"};
    compare_devices(feeds, 1, "{\"op\": \"reduce_sum\", \"in\": [\"x\"], \"out\": [\"y\"], \"attrs\": {\"axes\": [0]}}",
                    fetch, 1, 0.0);
    release_all(feeds, 1);
}
END_TEST

/* argmax or argmin (op) of X [shape] with attrs; coarse values (ties) and, with nan, NaNs. */
static void check_argmax(const char *op, pardo_dtype dt, int nd, const int64_t *shape, const char *attrs, bool nan) {
    test_rng r = {41};
    test_named_tensor feeds[1] = {{"x", test_tensor_random(&r, dt, nd, shape, -3.0, 3.0)}};
    coarsen(feeds[0].t, nan);
    char ops[512];
    snprintf(ops, sizeof ops, "{\"op\": \"%s\", \"in\": [\"x\"], \"out\": [\"y\"], \"attrs\": {%s}}", op, attrs);
    const char *const fetch[] = {"y"};
    compare_devices(feeds, 1, ops, fetch, 1, 0.0);
    release_all(feeds, 1);
}

START_TEST(argmax_matches_cpu) {
    note_gpu("argmax_matches_cpu");
    const int64_t s3[] = {3, 4, 5}, wide[] = {257, 1031}, one[] = {7};
    static const char *const ops[] = {"argmax", "argmin"};
    for (int k = 0; k < 2; k++)
        for (int f64 = 0; f64 < 2; f64++) {
            const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_argmax(ops[k], dt, 3, s3, "", false);
            check_argmax(ops[k], dt, 3, s3, "\"axis\": 1, \"keepdims\": false", false);
            check_argmax(ops[k], dt, 3, s3, "\"axis\": -1, \"select_last_index\": true", false);
            check_argmax(ops[k], dt, 2, wide, "\"axis\": 1", true);
            check_argmax(ops[k], dt, 2, wide, "\"axis\": 0, \"select_last_index\": true", true);
            check_argmax(ops[k], dt, 1, one, "\"keepdims\": false", false);
        }
}
END_TEST

/* ---- mse_loss, dropout and their gradients ---- */

/* mse_loss of prediction and target [shape] with reduction red, then its gradient from a fed dloss (with_dl) or
 * none, with the outputs want asks for (bit 0 dprediction, bit 1 dtarget); all compared. */
static void check_mse(pardo_dtype dt, int nd, const int64_t *shape, const char *red, bool with_dl, int want) {
    test_rng r = {43};
    const bool per_elem = strcmp(red, "none") == 0;
    test_named_tensor feeds[3] = {{"p", test_tensor_random(&r, dt, nd, shape, -2.0, 2.0)},
                                  {"t", test_tensor_random(&r, dt, nd, shape, -2.0, 2.0)},
                                  {"g", test_tensor_random(&r, dt, per_elem ? nd : 0, shape, 0.5, 1.5)}};
    char ops[1024];
    snprintf(ops, sizeof ops,
             "{\"op\": \"mse_loss\", \"in\": [\"p\", \"t\"], \"out\": [\"loss\"], \"attrs\": {\"reduction\": \"%s\"}},"
             "{\"op\": \"mse_loss_grad\", \"in\": [\"p\", \"t\", \"loss\", \"%s\"], \"out\": [\"%s\", \"%s\"], "
             "\"attrs\": {\"reduction\": \"%s\"}}",
             red, with_dl ? "g" : "", want & 1 ? "dp" : "", want & 2 ? "dt" : "", red);
    const char *fetch[3];
    int nf = 0;
    fetch[nf++] = "loss";
    if (want & 1) fetch[nf++] = "dp";
    if (want & 2) fetch[nf++] = "dt";
    compare_devices(feeds, with_dl ? 3 : 2, ops, fetch, nf, dt == PARDO_F64 ? 1e-11 : 1e-5);
    release_all(feeds, 3);
}

START_TEST(mse_loss_matches_cpu) {
    note_gpu("mse_loss_matches_cpu");
    static const char *const reds[] = {"mean", "sum", "none"};
    const int64_t small[] = {3, 7}, big[] = {(1 << 18) + 77}, huge[] = {517, 1031}, empty[] = {0, 3};
    for (int k = 0; k < 3; k++)
        for (int f64 = 0; f64 < 2; f64++) {
            const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_mse(dt, 2, small, reds[k], true, 3);
            check_mse(dt, 2, small, reds[k], true, 1);
            check_mse(dt, 2, small, reds[k], true, 2);
            check_mse(dt, 2, small, reds[k], false, 3); /* no dloss: zeros */
            check_mse(dt, 1, big, reds[k], true, 3);    /* more blocks than partials */
            check_mse(dt, 2, huge, reds[k], true, 1);
            check_mse(dt, 2, empty, reds[k], true, 3); /* mean 0 */
        }
}
END_TEST

/* dropout of X [shape] with attrs, training or not, with its Mask output (with_mask) and dropout_grad from the
 * Mask (grad_reads_mask) or recomputing it, and a fed dY (with_dy) or none; Y, Mask and dX compared: the mask
 * must be the very bits the CPU draws. */
static void check_dropout(pardo_dtype dt, int nd, const int64_t *shape, const char *attrs, bool training,
                          bool with_mask, bool grad_reads_mask, bool with_dy) {
    test_rng r = {47};
    test_named_tensor feeds[2] = {{"x", test_tensor_random(&r, dt, nd, shape, -2.0, 2.0)},
                                  {"g", test_tensor_random(&r, dt, nd, shape, -1.0, 1.0)}};
    char ops[1024];
    snprintf(ops, sizeof ops,
             "{\"op\": \"dropout\", \"in\": [\"x\"], \"out\": [\"y\", \"%s\"], \"attrs\": {%s}},"
             "{\"op\": \"dropout_grad\", \"in\": [\"x\", \"y\", \"%s\", \"%s\"], \"out\": [\"dx\"], \"attrs\": {%s}}",
             with_mask ? "m" : "", attrs, with_mask && grad_reads_mask ? "m" : "", with_dy ? "g" : "", attrs);
    const char *fetch[3];
    int nf = 0;
    fetch[nf++] = "y";
    fetch[nf++] = "dx";
    if (with_mask) fetch[nf++] = "m";
    compare_devices_ex(feeds, with_dy ? 2 : 1, ops, fetch, nf, dt == PARDO_F64 ? 1e-12 : 1e-6, training);
    release_all(feeds, 2);
}

START_TEST(dropout_matches_cpu) {
    note_gpu("dropout_matches_cpu");
    const int64_t small[] = {3, 7}, big[] = {1 << 18}, odd[] = {2, 3, 5};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        for (int t = 0; t < 2; t++) {
            check_dropout(dt, 2, small, "\"ratio\": 0.5, \"seed\": 3", t, true, true, true);
            check_dropout(dt, 2, small, "\"ratio\": 0.5, \"seed\": 3", t, true, false, true); /* recomputed */
            check_dropout(dt, 3, odd, "\"ratio\": 0.2, \"seed\": 11", t, false, false, true);
            check_dropout(dt, 3, odd, "\"ratio\": 0.0", t, true, true, true);
            check_dropout(dt, 2, small, "\"ratio\": 0.7", t, true, true, false); /* no dY: zeros */
            check_dropout(dt, 1, big, "\"ratio\": 0.3, \"seed\": 77", t, true, false, true);
        }
    }
}
END_TEST

/* ONNX Dropout-12's run-time ratio and training_mode scalars override the attr and the run's mode (read on the
 * host), in a run that is not training and one that is. */
START_TEST(dropout_inputs_match_cpu) {
    note_gpu("dropout_inputs_match_cpu");
    const int64_t shape[] = {6, 50}, none[] = {1};
    test_rng r = {53};
    const double ratio = 0.25;
    for (int on = 0; on < 2; on++) {
        const double mode = on;
        test_named_tensor feeds[3] = {{"x", test_tensor_random(&r, PARDO_F32, 2, shape, -1.0, 1.0)},
                                      {"r", test_tensor_from(PARDO_F32, 0, none, &ratio)},
                                      {"tm", test_tensor_from(PARDO_BOOL, 0, none, &mode)}};
        const char *const fetch[] = {"y", "m"};
        compare_devices_ex(feeds, 3,
                           "{\"op\": \"dropout\", \"in\": [\"x\", \"r\", \"tm\"], \"out\": [\"y\", \"m\"], "
                           "\"attrs\": {\"ratio\": 0.9, \"seed\": 5}}",
                           fetch, 2, 1e-6, !on);
        release_all(feeds, 3);
    }
}
END_TEST

Suite *make_cuda_nn_suite(void) {
    Suite *s = suite_create("cuda_nn");
    TCase *tc = tcase_create("core");
    /* the first CUDA call of each forked test creates a context: seconds on a big GPU */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, softmax_family_matches_cpu);
    tcase_add_test(tc, softmax_halves_fall_back_to_cpu);
    tcase_add_test(tc, softmax_cross_entropy_matches_cpu);
    tcase_add_test(tc, softmax_cross_entropy_bad_label_fails_like_cpu);
    tcase_add_test(tc, activations_and_gradients_match_cpu);
    tcase_add_test(tc, gelu_halves_fall_back_to_cpu);
    tcase_add_test(tc, layer_norm_matches_cpu);
    tcase_add_test(tc, reductions_match_cpu);
    tcase_add_test(tc, reduce_integers_fall_back_to_cpu);
    tcase_add_test(tc, argmax_matches_cpu);
    tcase_add_test(tc, mse_loss_matches_cpu);
    tcase_add_test(tc, dropout_matches_cpu);
    tcase_add_test(tc, dropout_inputs_match_cpu);
    suite_add_tcase(s, tc);
    return s;
}
