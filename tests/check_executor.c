/* check_executor.c - running blocks: results against naive references,
 * output reuse across steps, in-place updates, feeds, init, errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/device.h"
#include "graph_test_util.h"
#include "test_util.h"

static const char mlp_text[] =
    "{\"pardo\": 1, \"name\": \"mlp\", \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 5], \"role\": \"feed\"},"
    "\"y\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"},"
    "\"w1\": {\"dtype\": \"float64\", \"shape\": [5, 4], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}},"
    "\"b1\": {\"dtype\": \"float64\", \"shape\": [4], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 4}},"
    "\"w2\": {\"dtype\": \"float64\", \"shape\": [4, 3], \"role\": \"param\", \"init\": {\"fill\": \"normal\", \"mean\": 0, \"std\": 1, \"seed\": 5}},"
    "\"b2\": {\"dtype\": \"float64\", \"shape\": [3], \"role\": \"param\", \"value\": [0.1, -0.2, 0.3]}},"
    "\"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w1\"], \"out\": [\"h\"]},"
    "{\"op\": \"add\", \"in\": [\"h\", \"b1\"], \"out\": [\"z\"]},"
    "{\"op\": \"tanh\", \"in\": [\"z\"], \"out\": [\"a\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a\", \"w2\"], \"out\": [\"h2\"]},"
    "{\"op\": \"add\", \"in\": [\"h2\", \"b2\"], \"out\": [\"logits\"]},"
    "{\"op\": \"softmax\", \"in\": [\"logits\"], \"out\": [\"p\"]},"
    "{\"op\": \"softmax_cross_entropy\", \"in\": [\"logits\", \"y\"], \"out\": [\"loss\"]}"
    "]}]}";

static void feed(pardo_executor *ex, const char *name, pardo_tensor *t) {
    pardo_status st;
    ck_assert_msg(pardo_executor_feed(ex, name, t, "test", &st) == PARDO_OK, "feed %s: %s", name, st.msg);
}

START_TEST(mlp_matches_naive_reference) {
    pardo_status st;
    test_rng r = {7};
    pardo_program *p = test_program(mlp_text, "mlp.json");
    pardo_executor *ex = test_executor(p, 1);
    enum { N = 6, D = 5, H = 4, C = 3 };
    int64_t xs[2] = {N, D}, ys[1] = {N};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, xs, -2, 2);
    pardo_tensor *y = test_tensor_random(&r, PARDO_I64, 1, ys, 0, C);
    feed(ex, "x", x);
    feed(ex, "y", y);
    ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    pardo_scope *s = pardo_executor_scope(ex);
    const pardo_tensor *w1 = pardo_scope_find(s, "w1"), *b1 = pardo_scope_find(s, "b1");
    const pardo_tensor *w2 = pardo_scope_find(s, "w2"), *b2 = pardo_scope_find(s, "b2");
    ck_assert_double_eq(pardo_tensor_get_f64(b2, 1), -0.2);
    double loss = 0;
    for (int n = 0; n < N; n++) {
        double a[H], lg[C], mx = -INFINITY, sum = 0;
        for (int j = 0; j < H; j++) {
            double acc = pardo_tensor_get_f64(b1, j);
            for (int k = 0; k < D; k++) acc += pardo_tensor_get_f64(x, n * D + k) * pardo_tensor_get_f64(w1, k * H + j);
            a[j] = tanh(acc);
        }
        for (int c = 0; c < C; c++) {
            lg[c] = pardo_tensor_get_f64(b2, c);
            for (int j = 0; j < H; j++) lg[c] += a[j] * pardo_tensor_get_f64(w2, j * C + c);
            mx = fmax(mx, lg[c]);
        }
        for (int c = 0; c < C; c++) sum += exp(lg[c] - mx);
        const pardo_tensor *pt = pardo_executor_fetch(ex, "p");
        for (int c = 0; c < C; c++) {
            double want = exp(lg[c] - mx) / sum;
            ck_assert_double_eq_tol(pardo_tensor_get_f64(pt, n * C + c), want, 1e-12);
        }
        loss += -(lg[(int)pardo_tensor_get_f64(y, n)] - mx - log(sum)) / N;
    }
    ck_assert_double_eq_tol(pardo_tensor_get_f64(pardo_executor_fetch(ex, "loss"), 0), loss, 1e-12);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(init_is_seeded_and_reproducible) {
    pardo_program *p = test_program(mlp_text, "mlp.json");
    pardo_executor *a = test_executor(p, 1), *b = test_executor(p, 1);
    const pardo_tensor *wa = pardo_scope_find(pardo_executor_scope(a), "w1");
    const pardo_tensor *wb = pardo_scope_find(pardo_executor_scope(b), "w1");
    test_assert_close(wa, wb, 0, 0);
    bool all_zero = true;
    for (int i = 0; i < wa->numel; i++) {
        double v = pardo_tensor_get_f64(wa, i);
        ck_assert(v >= -1 && v < 1);
        all_zero &= v == 0;
    }
    ck_assert(!all_zero);
    pardo_executor_free(a);
    pardo_executor_free(b);
    pardo_program_free(p);
}
END_TEST

static const char update_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"g\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"feed\"},"
    "\"w\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\", \"value\": [1, 2, 3]}},"
    "\"ops\": ["
    "{\"op\": \"scale\", \"in\": [\"g\"], \"out\": [\"step\"], \"attrs\": {\"scale\": -0.5}},"
    "{\"op\": \"add\", \"in\": [\"w\", \"step\"], \"out\": [\"w\"], \"role\": \"optimize\"},"
    "{\"op\": \"mul\", \"in\": [\"w\", \"w\"], \"out\": [\"sq\"]}"
    "]}]}";

START_TEST(steps_update_in_place_and_reuse_outputs) {
    pardo_status st;
    pardo_program *p = test_program(update_text, "u.json");
    pardo_executor *ex = test_executor(p, 1);
    int64_t n = 3;
    pardo_tensor *g = test_tensor_from(PARDO_F32, 1, &n, (const double[]){2, 4, -2});
    feed(ex, "g", g);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_OK);
    pardo_tensor *sq1 = pardo_executor_fetch(ex, "sq"), *step1 = pardo_executor_fetch(ex, "step");
    for (int s = 0; s < 4; s++) ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_steps(ex), 5);
    /* w = [1,2,3] - 5 * 0.5 * g */
    const pardo_tensor *w = pardo_executor_fetch(ex, "w");
    const double want[3] = {1 - 5.0, 2 - 10.0, 3 + 5.0};
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq_tol(pardo_tensor_get_f64(w, i), want[i], 1e-6);
        ck_assert_double_eq_tol(pardo_tensor_get_f64(pardo_executor_fetch(ex, "sq"), i), want[i] * want[i], 1e-4);
    }
    /* steady state: the temps' tensors are reused, not reallocated */
    ck_assert_ptr_eq(pardo_executor_fetch(ex, "sq"), sq1);
    ck_assert_ptr_eq(pardo_executor_fetch(ex, "step"), step1);
    pardo_tensor_release(g);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(held_outputs_are_not_overwritten) {
    pardo_status st;
    pardo_program *p = test_program(update_text, "u.json");
    pardo_executor *ex = test_executor(p, 1);
    int64_t n = 3;
    pardo_tensor *g = test_tensor_from(PARDO_F32, 1, &n, (const double[]){2, 4, -2});
    feed(ex, "g", g);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_OK);
    pardo_tensor *held = pardo_tensor_retain(pardo_executor_fetch(ex, "sq"));
    double before = pardo_tensor_get_f64(held, 0);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_OK);
    ck_assert_ptr_ne(pardo_executor_fetch(ex, "sq"), held);
    ck_assert_double_eq(pardo_tensor_get_f64(held, 0), before);
    pardo_tensor_release(held);
    pardo_tensor_release(g);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(feed_errors) {
    pardo_status st;
    pardo_program *p = test_program(mlp_text, "mlp.json");
    pardo_executor *ex = test_executor(p, 1);
    int64_t bad[2] = {2, 6}, ok_shape[2] = {2, 5};
    pardo_tensor *xb = pardo_tensor_new_cpu(PARDO_F64, 2, bad, &st);
    pardo_tensor *xf = pardo_tensor_new_cpu(PARDO_F32, 2, ok_shape, &st);
    ck_assert_int_eq(pardo_executor_feed(ex, "x", xb, "x.npy", &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "x.npy") && strstr(st.msg, "[2, 6]") && strstr(st.msg, "[-1, 5]"), "%s", st.msg);
    ck_assert_int_eq(pardo_executor_feed(ex, "x", xf, "x.npy", &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float32") && strstr(st.msg, "float64"), "%s", st.msg);
    ck_assert_int_eq(pardo_executor_feed(ex, "w1", xf, "w.npy", &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_executor_feed(ex, "nope", xf, "n.npy", &st), PARDO_ENOTFOUND);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_ENOTFOUND);
    ck_assert_msg(strstr(st.msg, "missing feed 'x'") && strstr(st.msg, "mlp.json"), "%s", st.msg);
    pardo_tensor_release(xb);
    pardo_tensor_release(xf);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(kernel_error_names_the_op) {
    pardo_status st;
    pardo_program *p = test_program(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"a\": {\"dtype\": \"int32\", \"shape\": [2], \"role\": \"feed\"},"
        "\"b\": {\"dtype\": \"int32\", \"shape\": [2], \"role\": \"feed\"}},"
        "\"ops\": [{\"op\": \"div\", \"name\": \"ratio\", \"in\": [\"a\", \"b\"], \"out\": [\"q\"]}]}]}",
        "d.json");
    pardo_executor *ex = test_executor(p, 1);
    int64_t n = 2;
    pardo_tensor *a = test_tensor_from(PARDO_I32, 1, &n, (const double[]){4, 5});
    pardo_tensor *b = test_tensor_from(PARDO_I32, 1, &n, (const double[]){2, 0});
    feed(ex, "a", a);
    feed(ex, "b", b);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "d.json:1:") && strstr(st.msg, "block 0, op 0 'ratio' (div)"), "%s", st.msg);
    ck_assert_int_eq(pardo_executor_steps(ex), 0);
    pardo_tensor_release(a);
    pardo_tensor_release(b);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(param_without_init_needs_checkpoint) {
    pardo_status st;
    pardo_program *p = test_program(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"w\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"param\"}},"
        "\"ops\": [{\"op\": \"relu\", \"in\": [\"w\"], \"out\": [\"r\"]}]}]}",
        "p.json");
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = 1};
    ck_assert_int_eq(pardo_executor_new(p, &opt, &ex, &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_init_vars(ex, NULL, NULL, &st), PARDO_ENOTFOUND);
    ck_assert_msg(strstr(st.msg, "p.json") && strstr(st.msg, "'w'") && strstr(st.msg, "no init"), "%s", st.msg);
    /* a checkpoint that gives it */
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    int64_t n = 2;
    pardo_tensor *w = test_tensor_from(PARDO_F32, 1, &n, (const double[]){-1, 3});
    pardo_tensor_list_add(&l, "w", w, &st);
    ck_assert_int_eq(pardo_executor_init_vars(ex, &l, "c.safetensors", &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(pardo_executor_fetch(ex, "r"), 1), 3);
    pardo_tensor_list_clear(&l);
    /* a checkpoint whose entry has the wrong shape */
    int64_t n3 = 3;
    pardo_tensor *w3 = test_tensor_from(PARDO_F32, 1, &n3, (const double[]){1, 2, 3});
    pardo_tensor_list_add(&l, "w", w3, &st);
    ck_assert_int_eq(pardo_executor_init_vars(ex, &l, "c.safetensors", &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "c.safetensors") && strstr(st.msg, "[3]") && strstr(st.msg, "[2]"), "%s", st.msg);
    pardo_tensor_list_clear(&l);
    pardo_tensor_release(w);
    pardo_tensor_release(w3);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(cuda_matches_cpu_or_falls_back) {
    pardo_status st;
    pardo_program *p = test_program(update_text, "u.json");
    pardo_exec_options opt = {.nthreads = 1, .device = PARDO_DEVICE_CUDA};
    pardo_executor *gpu = NULL;
    ck_assert_int_eq(pardo_executor_new(p, &opt, &gpu, &st), PARDO_OK);
    if (pardo_device_count() == 0) {
        printf("executor: cuda_matches_cpu_or_falls_back: no CUDA device, checked the CPU fallback only\n");
        ck_assert_int_eq(pardo_executor_device(gpu), PARDO_DEVICE_CPU);
    }
    ck_assert_int_eq(pardo_executor_init_vars(gpu, NULL, NULL, &st), PARDO_OK);
    pardo_executor *cpu = test_executor(p, 1);
    int64_t n = 3;
    pardo_tensor *g = test_tensor_from(PARDO_F32, 1, &n, (const double[]){0.25, -1.5, 3});
    feed(gpu, "g", g);
    feed(cpu, "g", g);
    for (int s = 0; s < 3; s++) {
        ck_assert_msg(pardo_executor_run(gpu, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_int_eq(pardo_executor_run(cpu, &st), PARDO_OK);
    }
    pardo_tensor *a = pardo_executor_fetch(gpu, "sq");
    ck_assert_ptr_nonnull(pardo_tensor_cpu(a, &st));
    test_assert_close(a, pardo_executor_fetch(cpu, "sq"), 1e-6, 1e-6);
    pardo_tensor_release(g);
    pardo_executor_free(gpu);
    pardo_executor_free(cpu);
    pardo_program_free(p);
}
END_TEST

Suite *make_executor_suite(void) {
    Suite *s = suite_create("executor");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, mlp_matches_naive_reference);
    tcase_add_test(tc, init_is_seeded_and_reproducible);
    tcase_add_test(tc, steps_update_in_place_and_reuse_outputs);
    tcase_add_test(tc, held_outputs_are_not_overwritten);
    tcase_add_test(tc, cuda_matches_cpu_or_falls_back);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, feed_errors);
    tcase_add_test(te, kernel_error_names_the_op);
    tcase_add_test(te, param_without_init_needs_checkpoint);
    suite_add_tcase(s, te);
    return s;
}
