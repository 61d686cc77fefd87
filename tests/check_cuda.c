/* check_cuda.c - every op with a CUDA kernel, run by an executor on the GPU
 * and compared with the same graph on the CPU kernels (the reference; those
 * are checked against naive loops and NumPy in their own suites). Float32 and
 * float64, broadcasting shapes, a tensor large enough for many blocks, a
 * graph that moves between GPU and CPU-only ops, and the CPU fallback for
 * integer dtypes; matmul (cuBLAS: transposes, batched with broadcast batch
 * dims, 1-D operands, K = 0, the bias and relu / gelu epilogue) and
 * matmul_grad (the same shapes, relu_y's mask and the bias gradient).
 * Without a CUDA device each test says that it skipped. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/device.h"
#include "cuda_test_util.h"
#include "graph_test_util.h"
#include "test_util.h"

/* Says so when the GPU half of `test` is skipped; the CPU half still runs. */
static void note_gpu(const char *test) { test_cuda_note_gpu("cuda", test); }

static pardo_executor *gpu_executor(const pardo_program *p) { return test_cuda_executor(p, PARDO_DEVICE_CUDA, false); }

/* Runs `graph` (feeds a and, if b, b; output z) on both devices for two steps
 * and compares z. The second step reuses the outputs the first allocated.
 * Without a GPU only the CPU side runs (the graph and inputs still get checked). */
static void compare_devices(const char *graph, pardo_tensor *a, pardo_tensor *b, double tol) {
    pardo_status st;
    pardo_program *p = test_program(graph, "cuda.json");
    bool gpu_here = pardo_device_count() > 0;
    pardo_executor *gpu = gpu_here ? gpu_executor(p) : NULL, *cpu = test_executor(p, 1);
    for (int step = 0; step < 2; step++) {
        test_feed(cpu, "a", a);
        if (b) test_feed(cpu, "b", b);
        ck_assert_msg(pardo_executor_run(cpu, &st) == PARDO_OK, "cpu: %s", st.msg);
        if (!gpu) continue;
        test_feed(gpu, "a", a);
        if (b) test_feed(gpu, "b", b);
        ck_assert_msg(pardo_executor_run(gpu, &st) == PARDO_OK, "gpu: %s", st.msg);
        pardo_tensor *zg = pardo_executor_fetch(gpu, "z"), *zc = pardo_executor_fetch(cpu, "z");
        ck_assert_ptr_nonnull(zg);
        ck_assert_ptr_nonnull(pardo_tensor_cpu(zg, &st));
        test_assert_close(zg, zc, tol, tol);
    }
    pardo_executor_free(gpu);
    pardo_executor_free(cpu);
    pardo_program_free(p);
}

static const char *const unary_ops[] = {"relu", "sigmoid", "tanh", "exp", "log", "scale"};

static void check_unary(const char *op, pardo_dtype dt, int nd, const int64_t *shape) {
    char graph[1024], sh[128];
    test_shape_json(sh, sizeof sh, nd, shape);
    snprintf(graph, sizeof graph,
             "{\"pardo\": 1, \"blocks\": [{\"vars\": {\"a\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}},"
             "\"ops\": [{\"op\": \"%s\", \"in\": [\"a\"], \"out\": [\"z\"]%s}]}]}",
             pardo_dtype_name(dt), sh, op, strcmp(op, "scale") ? "" : ", \"attrs\": {\"scale\": -2.5, \"bias\": 0.75}");
    test_rng r = {11};
    bool positive = !strcmp(op, "log");
    pardo_tensor *a = test_tensor_random(&r, dt, nd, shape, positive ? 0.01 : -4.0, 4.0);
    compare_devices(graph, a, NULL, dt == PARDO_F64 ? 1e-12 : 1e-5);
    pardo_tensor_release(a);
}

START_TEST(unary_ops_match_cpu) {
    note_gpu("unary_ops_match_cpu");
    const int64_t small[] = {3, 7}, large[] = {1 << 20};
    for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++) {
        check_unary(unary_ops[k], PARDO_F32, 2, small);
        check_unary(unary_ops[k], PARDO_F64, 2, small);
        check_unary(unary_ops[k], PARDO_F32, 1, large);
    }
}
END_TEST

static void check_binary(const char *op, pardo_dtype dt, int na, const int64_t *sa, int nb, const int64_t *sb) {
    char graph[1024], ja[128], jb[128];
    test_shape_json(ja, sizeof ja, na, sa);
    test_shape_json(jb, sizeof jb, nb, sb);
    snprintf(graph, sizeof graph,
             "{\"pardo\": 1, \"blocks\": [{\"vars\": {\"a\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"},"
             "\"b\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}},"
             "\"ops\": [{\"op\": \"%s\", \"in\": [\"a\", \"b\"], \"out\": [\"z\"]}]}]}",
             pardo_dtype_name(dt), ja, pardo_dtype_name(dt), jb, op);
    test_rng r = {5};
    pardo_tensor *a = test_tensor_random(&r, dt, na, sa, -3.0, 3.0);
    /* b in [0.5, 3] keeps div well away from a zero divisor */
    pardo_tensor *b = test_tensor_random(&r, dt, nb, sb, 0.5, 3.0);
    compare_devices(graph, a, b, dt == PARDO_F64 ? 1e-12 : 1e-5);
    pardo_tensor_release(a);
    pardo_tensor_release(b);
}

START_TEST(binary_ops_broadcast_like_cpu) {
    note_gpu("binary_ops_broadcast_like_cpu");
    static const char *const ops[] = {"add", "sub", "mul", "div"};
    const int64_t same[] = {4, 6}, rows[] = {4, 1, 5}, cols[] = {3, 1}, one[] = {1}, big[] = {513, 1031},
                  bias[] = {1031};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        for (int f64 = 0; f64 < 2; f64++) {
            pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
            check_binary(ops[k], dt, 2, same, 2, same);
            check_binary(ops[k], dt, 3, rows, 2, cols);  // both sides broadcast: [4,3,5]
            check_binary(ops[k], dt, 2, cols, 3, rows);
            check_binary(ops[k], dt, 2, same, 1, one);
        }
        check_binary(ops[k], PARDO_F32, 2, big, 1, bias);
    }
}
END_TEST

/* A GPU op feeding a CPU-only op (softsign) feeding a GPU op: the executor
 * must move the heads between devices, and a param updated in place on the
 * GPU must read back the same as on the CPU. */
START_TEST(mixed_graph_moves_between_devices) {
    note_gpu("mixed_graph_moves_between_devices");
    static const char graph[] =
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"a\": {\"dtype\": \"float32\", \"shape\": [8, 16], \"role\": \"feed\"},"
        "\"w\": {\"dtype\": \"float32\", \"shape\": [16], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", "
        "\"low\": -1, \"high\": 1, \"seed\": 2}}},"
        "\"ops\": ["
        "{\"op\": \"mul\", \"in\": [\"a\", \"w\"], \"out\": [\"h\"]},"
        "{\"op\": \"softsign\", \"in\": [\"h\"], \"out\": [\"p\"]},"
        "{\"op\": \"exp\", \"in\": [\"p\"], \"out\": [\"e\"]},"
        "{\"op\": \"reduce_mean\", \"in\": [\"e\"], \"out\": [\"m\"], \"attrs\": {\"axes\": [0], \"keepdims\": false}},"
        "{\"op\": \"scale\", \"in\": [\"m\"], \"out\": [\"d\"], \"attrs\": {\"scale\": -0.1}},"
        "{\"op\": \"add\", \"in\": [\"w\", \"d\"], \"out\": [\"w\"], \"role\": \"optimize\"},"
        "{\"op\": \"tanh\", \"in\": [\"h\"], \"out\": [\"z\"]}"
        "]}]}";
    test_rng r = {3};
    const int64_t shape[] = {8, 16};
    pardo_tensor *a = test_tensor_random(&r, PARDO_F32, 2, shape, -2.0, 2.0);
    compare_devices(graph, a, NULL, 1e-5);
    pardo_tensor_release(a);
}
END_TEST

/* Integer inputs have no CUDA kernel: the op runs its CPU kernel. */
START_TEST(integer_dtypes_fall_back_to_cpu) {
    note_gpu("integer_dtypes_fall_back_to_cpu");
    const int64_t sa[] = {2, 3}, sb[] = {3};
    check_binary("add", PARDO_I64, 2, sa, 1, sb);
    check_binary("mul", PARDO_I32, 2, sa, 1, sb);
}
END_TEST

/* ---- matmul and matmul_grad (cuBLAS) ---- */


/* As compare_devices, with any feeds and the fetched vars `fetch` (n_fetch of them) compared. */
static void compare_devices_named(const char *graph, const test_named_tensor *feeds, int n_feeds,
                                  const char *const *fetch, int n_fetch, double rtol, double atol) {
    pardo_status st;
    pardo_program *p = test_program(graph, "cuda_matmul.json");
    bool gpu_here = pardo_device_count() > 0;
    pardo_executor *gpu = gpu_here ? gpu_executor(p) : NULL, *cpu = test_executor(p, 1);
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
            test_assert_close(zg, zc, rtol, atol);
        }
    }
    pardo_executor_free(gpu);
    pardo_executor_free(cpu);
    pardo_program_free(p);
}

/* The shape an operand is stored in: its matrix dims swapped when transposed (rank >= 2). */
static void stored_shape(int nd, const int64_t *shape, bool t, int64_t *out) {
    memcpy(out, shape, sizeof(int64_t) * (size_t)nd);
    if (t && nd >= 2) {
        out[nd - 2] = shape[nd - 1];
        out[nd - 1] = shape[nd - 2];
    }
}

/* matmul of A (as used: [..., M, K], or [K]) and B ([..., K, N] or [K]), stored transposed where ta / tb, with an
 * optional bias of shape sbias (nbias dims; nbias < 0: none) and activation act, on both devices. */
static void check_matmul(pardo_dtype dt, int na, const int64_t *sa, bool ta, int nb, const int64_t *sb, bool tb,
                         int nbias, const int64_t *sbias, const char *act) {
    char graph[2048], ja[128], jb[128], jc[128] = "";
    int64_t a_st[PARDO_MAX_DIMS], b_st[PARDO_MAX_DIMS];
    stored_shape(na, sa, ta, a_st);
    stored_shape(nb, sb, tb, b_st);
    test_shape_json(ja, sizeof ja, na, a_st);
    test_shape_json(jb, sizeof jb, nb, b_st);
    if (nbias >= 0) test_shape_json(jc, sizeof jc, nbias, sbias);
    const char *dn = pardo_dtype_name(dt);
    char bias_var[256] = "";
    if (nbias >= 0)
        snprintf(bias_var, sizeof bias_var, ", \"c\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}", dn, jc);
    snprintf(graph, sizeof graph,
             "{\"pardo\": 1, \"blocks\": [{\"vars\": {\"a\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"},"
             "\"b\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}%s},"
             "\"ops\": [{\"op\": \"matmul\", \"in\": [\"a\", \"b\"%s], \"out\": [\"z\"], \"attrs\": "
             "{\"transpose_a\": %s, \"transpose_b\": %s, \"activation\": \"%s\"}}]}]}",
             dn, ja, dn, jb, bias_var, nbias >= 0 ? ", \"c\"" : "", ta ? "true" : "false", tb ? "true" : "false", act);
    test_rng r = {17};
    bool is_float = pardo_dtype_is_float(dt);
    test_named_tensor feeds[3] = {
        {"a", test_tensor_random(&r, dt, na, a_st, is_float ? -1.0 : -5.0, is_float ? 1.0 : 5.0)},
        {"b", test_tensor_random(&r, dt, nb, b_st, is_float ? -1.0 : -5.0, is_float ? 1.0 : 5.0)},
        {"c", nbias >= 0 ? test_tensor_random(&r, dt, nbias, sbias, -1.0, 1.0) : NULL}};
    const char *const fetch[] = {"z"};
    /* float32 sums of a few hundred products: cuBLAS adds in another order than the CPU's packed kernel */
    compare_devices_named(graph, feeds, nbias >= 0 ? 3 : 2, fetch, 1, dt == PARDO_F64 ? 1e-12 : 1e-4,
                          dt == PARDO_F64 ? 1e-12 : 1e-4);
    for (int f = 0; f < 3; f++) pardo_tensor_release(feeds[f].t);
}

START_TEST(matmul_matches_cpu) {
    note_gpu("matmul_matches_cpu");
    const int64_t a2[] = {5, 7}, b2[] = {7, 3}, a_big[] = {130, 257}, b_big[] = {257, 65};
    const int64_t a4[] = {2, 3, 5, 7}, b_bc[] = {3, 1, 5, 7}, b3[] = {2, 7, 4}, a3[] = {4, 5, 7}, b3s[] = {4, 7, 6};
    const int64_t v7[] = {7}, a_e[] = {3, 0}, b_e[] = {0, 4};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        for (int t = 0; t < 4; t++) {
            check_matmul(dt, 2, a2, t & 1, 2, b2, t & 2, -1, NULL, "none");
            check_matmul(dt, 4, a4, t & 1, 2, b2, t & 2, -1, NULL, "none");       /* B broadcast over A's batch */
            check_matmul(dt, 3, a3, t & 1, 3, b3s, t & 2, -1, NULL, "none");      /* equal batches */
            check_matmul(dt, 4, b_bc, t & 1, 3, b3, t & 2, -1, NULL, "none");     /* both broadcast: [3, 2, 5, 4] */
        }
        check_matmul(dt, 1, v7, false, 2, b2, false, -1, NULL, "none");           /* [7] @ [7, 3] */
        check_matmul(dt, 3, a3, false, 1, v7, false, -1, NULL, "none");           /* [4, 5, 7] @ [7] */
        check_matmul(dt, 1, v7, false, 1, v7, false, -1, NULL, "none");           /* a dot product */
        check_matmul(dt, 2, a_big, false, 2, b_big, true, -1, NULL, "none");
        check_matmul(dt, 2, a_e, false, 2, b_e, false, -1, NULL, "none");         /* K = 0: zeros */
    }
}
END_TEST

/* The bias and activation epilogue: a [N] bias with relu or gelu, a bias of another broadcast shape, the
 * activation alone, over batches too. */
START_TEST(matmul_epilogue_matches_cpu) {
    note_gpu("matmul_epilogue_matches_cpu");
    const int64_t a2[] = {6, 9}, b2[] = {9, 5}, n[] = {5}, col[] = {6, 1}, a3[] = {2, 6, 9}, full[] = {2, 6, 5},
                  a_e[] = {6, 0}, b_e[] = {0, 5};
    static const char *const acts[] = {"none", "relu", "gelu"};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        for (int k = 0; k < 3; k++) {
            check_matmul(dt, 2, a2, false, 2, b2, false, 1, n, acts[k]);
            check_matmul(dt, 2, a2, true, 2, b2, true, 2, col, acts[k]);
            check_matmul(dt, 3, a3, false, 2, b2, false, 3, full, acts[k]);
            check_matmul(dt, 3, a3, false, 2, b2, false, 1, n, acts[k]);
            check_matmul(dt, 2, a2, false, 2, b2, false, -1, NULL, acts[k]);
        }
        check_matmul(dt, 2, a_e, false, 2, b_e, false, 1, n, "relu"); /* K = 0: the bias alone, through relu */
    }
}
END_TEST

/* An integer matmul has no CUDA kernel: it runs the CPU kernel. */
START_TEST(matmul_integers_fall_back_to_cpu) {
    note_gpu("matmul_integers_fall_back_to_cpu");
    const int64_t a2[] = {4, 6}, b2[] = {6, 3};
    check_matmul(PARDO_I32, 2, a2, false, 2, b2, false, -1, NULL, "none");
    check_matmul(PARDO_I64, 2, a2, true, 2, b2, false, -1, NULL, "none");
}
END_TEST

/* matmul_grad of A (as used [..., M, K] or [K]) and B, stored transposed where ta / tb, fed dY of the product's
 * shape (no dY: with_dy false), optionally relu_y (A's shape) and a bias of shape sbias (then dbias too). */
static void check_matmul_grad(pardo_dtype dt, int na, const int64_t *sa, bool ta, int nb, const int64_t *sb, bool tb,
                              int ny, const int64_t *sy, bool with_dy, bool relu, int nbias, const int64_t *sbias) {
    char graph[3072], ja[128], jb[128], jy[128], jc[128] = "", vars[1024];
    int64_t a_st[PARDO_MAX_DIMS], b_st[PARDO_MAX_DIMS];
    stored_shape(na, sa, ta, a_st);
    stored_shape(nb, sb, tb, b_st);
    test_shape_json(ja, sizeof ja, na, a_st);
    test_shape_json(jb, sizeof jb, nb, b_st);
    test_shape_json(jy, sizeof jy, ny, sy);
    if (nbias >= 0) test_shape_json(jc, sizeof jc, nbias, sbias);
    const char *dn = pardo_dtype_name(dt);
    int w = snprintf(
        vars, sizeof vars,
        "\"a\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}, \"b\": {\"dtype\": \"%s\", \"shape\": %s, "
        "\"role\": \"feed\"}",
        dn, ja, dn, jb);
    if (with_dy)
        w += snprintf(vars + w, sizeof vars - (size_t)w,
                      ", \"g\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}", dn, jy);
    if (relu)
        w += snprintf(vars + w, sizeof vars - (size_t)w,
                      ", \"r\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}", dn, ja);
    if (nbias >= 0)
        snprintf(vars + w, sizeof vars - (size_t)w, ", \"c\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"feed\"}",
                 dn, jc);
    snprintf(
        graph, sizeof graph,
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {%s}, \"ops\": [{\"op\": \"matmul_grad\", \"in\": [\"a\", \"b\", \"\", "
        "\"%s\", \"%s\", \"%s\"], \"out\": [\"da\", \"db\"%s], \"attrs\": {\"transpose_a\": %s, \"transpose_b\": "
        "%s}}]}]}",
        vars, with_dy ? "g" : "", relu ? "r" : "", nbias >= 0 ? "c" : "", nbias >= 0 ? ", \"dc\"" : "",
        ta ? "true" : "false", tb ? "true" : "false");
    test_rng r = {23};
    test_named_tensor feeds[5];
    int n = 0;
    feeds[n++] = (test_named_tensor){"a", test_tensor_random(&r, dt, na, a_st, -1.0, 1.0)};
    feeds[n++] = (test_named_tensor){"b", test_tensor_random(&r, dt, nb, b_st, -1.0, 1.0)};
    if (with_dy) feeds[n++] = (test_named_tensor){"g", test_tensor_random(&r, dt, ny, sy, -1.0, 1.0)};
    if (relu) feeds[n++] = (test_named_tensor){"r", test_tensor_random(&r, dt, na, a_st, -1.0, 1.0)}; /* half masked */
    if (nbias >= 0) feeds[n++] = (test_named_tensor){"c", test_tensor_random(&r, dt, nbias, sbias, -1.0, 1.0)};
    const char *const fetch[] = {"da", "db", "dc"};
    compare_devices_named(graph, feeds, n, fetch, nbias >= 0 ? 3 : 2, dt == PARDO_F64 ? 1e-12 : 1e-4,
                          dt == PARDO_F64 ? 1e-12 : 1e-4);
    for (int f = 0; f < n; f++) pardo_tensor_release(feeds[f].t);
}

START_TEST(matmul_grad_matches_cpu) {
    note_gpu("matmul_grad_matches_cpu");
    const int64_t a2[] = {5, 7}, b2[] = {7, 3}, y2[] = {5, 3};
    const int64_t a4[] = {2, 3, 5, 7}, y4[] = {2, 3, 5, 3};                      /* B broadcast: dB summed */
    const int64_t a_bc[] = {3, 1, 5, 7}, b3[] = {2, 7, 4}, y_bc[] = {3, 2, 5, 4}; /* both broadcast */
    const int64_t v7[] = {7}, y_v[] = {3}, a3[] = {4, 5, 7}, y3v[] = {4, 5};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        for (int t = 0; t < 4; t++) {
            check_matmul_grad(dt, 2, a2, t & 1, 2, b2, t & 2, 2, y2, true, false, -1, NULL);
            check_matmul_grad(dt, 4, a4, t & 1, 2, b2, t & 2, 4, y4, true, false, -1, NULL);
            check_matmul_grad(dt, 4, a_bc, t & 1, 3, b3, t & 2, 4, y_bc, true, false, -1, NULL);
        }
        check_matmul_grad(dt, 1, v7, false, 2, b2, false, 1, y_v, true, false, -1, NULL); /* [7] @ [7, 3] */
        check_matmul_grad(dt, 3, a3, false, 1, v7, false, 2, y3v, true, false, -1, NULL); /* [4, 5, 7] @ [7] */
        check_matmul_grad(dt, 2, a2, false, 2, b2, false, 2, y2, false, false, -1, NULL); /* no dY: zeros */
    }
}
END_TEST

/* The fused forms: dA through relu_y's mask, and the bias's gradient summed from it ([K] and [1, K] biases; a
 * batched A, whose products mask after the loop on the CPU). */
START_TEST(matmul_grad_relu_bias_matches_cpu) {
    note_gpu("matmul_grad_relu_bias_matches_cpu");
    const int64_t a2[] = {6, 7}, b2[] = {7, 4}, y2[] = {6, 4}, k[] = {7}, row[] = {1, 7}, a3[] = {2, 6, 7},
                  y3[] = {2, 6, 4};
    for (int f64 = 0; f64 < 2; f64++) {
        const pardo_dtype dt = f64 ? PARDO_F64 : PARDO_F32;
        check_matmul_grad(dt, 2, a2, false, 2, b2, false, 2, y2, true, true, -1, NULL);
        check_matmul_grad(dt, 2, a2, false, 2, b2, false, 2, y2, true, true, 1, k);
        check_matmul_grad(dt, 2, a2, false, 2, b2, true, 2, y2, true, true, 2, row);
        check_matmul_grad(dt, 3, a3, false, 2, b2, false, 3, y3, true, true, 1, k);
        check_matmul_grad(dt, 2, a2, false, 2, b2, false, 2, y2, false, true, 1, k); /* no dY: zeros */
    }
}
END_TEST

Suite *make_cuda_suite(void) {
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("core");
    /* the first CUDA call of each forked test creates a context: seconds on a big GPU */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, unary_ops_match_cpu);
    tcase_add_test(tc, binary_ops_broadcast_like_cpu);
    tcase_add_test(tc, mixed_graph_moves_between_devices);
    tcase_add_test(tc, integer_dtypes_fall_back_to_cpu);
    tcase_add_test(tc, matmul_matches_cpu);
    tcase_add_test(tc, matmul_epilogue_matches_cpu);
    tcase_add_test(tc, matmul_integers_fall_back_to_cpu);
    tcase_add_test(tc, matmul_grad_matches_cpu);
    tcase_add_test(tc, matmul_grad_relu_bias_matches_cpu);
    suite_add_tcase(s, tc);
    return s;
}
