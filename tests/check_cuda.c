/* check_cuda.c - every op with a CUDA kernel, run by an executor on the GPU
 * and compared with the same graph on the CPU kernels (the reference; those
 * are checked against naive loops and NumPy in their own suites). Float32 and
 * float64, broadcasting shapes, a tensor large enough for many blocks, a
 * graph that moves between GPU and CPU-only ops, and the CPU fallback for
 * integer dtypes. Without a CUDA device each test says that it skipped. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/device.h"
#include "graph_test_util.h"
#include "test_util.h"

/* Says so when the GPU half of `test` is skipped; the CPU half still runs. */
static void note_gpu(const char *test) {
    if (pardo_device_count() > 0) return;
    printf("cuda: %s: ran the CPU side only, skipped the GPU (no CUDA device%s)\n", test,
           pardo_device_compiled() ? "" : "; built without CUDA");
}

static pardo_executor *gpu_executor(const pardo_program *p) {
    pardo_status st;
    pardo_exec_options opt = {.nthreads = 1, .device = PARDO_DEVICE_CUDA};
    pardo_executor *ex = NULL;
    ck_assert_msg(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(pardo_executor_device(ex), PARDO_DEVICE_CUDA);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "%s", st.msg);
    return ex;
}

static void feed(pardo_executor *ex, const char *name, pardo_tensor *t) {
    pardo_status st;
    ck_assert_msg(pardo_executor_feed(ex, name, t, "test", &st) == PARDO_OK, "feed %s: %s", name, st.msg);
}

static void shape_json(char *buf, size_t n, int nd, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < nd; d++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    snprintf(buf + k, n - k, "]");
}

/* Runs `graph` (feeds a and, if b, b; output z) on both devices for two steps
 * and compares z. The second step reuses the outputs the first allocated.
 * Without a GPU only the CPU side runs (the graph and inputs still get checked). */
static void compare_devices(const char *graph, pardo_tensor *a, pardo_tensor *b, double tol) {
    pardo_status st;
    pardo_program *p = test_program(graph, "cuda.json");
    bool gpu_here = pardo_device_count() > 0;
    pardo_executor *gpu = gpu_here ? gpu_executor(p) : NULL, *cpu = test_executor(p, 1);
    for (int step = 0; step < 2; step++) {
        feed(cpu, "a", a);
        if (b) feed(cpu, "b", b);
        ck_assert_msg(pardo_executor_run(cpu, &st) == PARDO_OK, "cpu: %s", st.msg);
        if (!gpu) continue;
        feed(gpu, "a", a);
        if (b) feed(gpu, "b", b);
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
    shape_json(sh, sizeof sh, nd, shape);
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
    shape_json(ja, sizeof ja, na, sa);
    shape_json(jb, sizeof jb, nb, sb);
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

/* A GPU op feeding a CPU-only op (softmax) feeding a GPU op: the executor
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
        "{\"op\": \"softmax\", \"in\": [\"h\"], \"out\": [\"p\"]},"
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

Suite *make_cuda_suite(void) {
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("core");
    /* the first CUDA call of each forked test creates a context: seconds on a big GPU */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, unary_ops_match_cpu);
    tcase_add_test(tc, binary_ops_broadcast_like_cpu);
    tcase_add_test(tc, mixed_graph_moves_between_devices);
    tcase_add_test(tc, integer_dtypes_fall_back_to_cpu);
    suite_add_tcase(s, tc);
    return s;
}
