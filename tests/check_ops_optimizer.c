/* check_ops_optimizer.c - sgd, momentum (plain and Nesterov) and adam: three
 * steps against PyTorch fixtures (torch.optim.SGD and Adam, float64 and
 * float32, params and optimizer state after every step), in-place updates
 * (the outputs are the inputs' tensors), the step counter, lr as [] or
 * [1], and inference errors naming both sides of a mismatch. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"
#include "exec/thread_pool.h"
#include "core/value_json.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct opt_case {
    const char *name;  // fixture case (make_optimizer_fixtures.py)
    const char *op;    // pardo op
    const char *attrs; // its attrs
    double lr;
    const char *state[2]; // fixture names of the state outputs after the param ("buf", "m", "v")
    int n_state;
} opt_case;

static const opt_case cases[] = {
    {"sgd", "sgd", NULL, 0.1, {NULL, NULL}, 0},
    {"momentum", "momentum", "{\"mu\": 0.9}", 0.1, {"buf", NULL}, 1},
    {"nesterov", "momentum", "{\"mu\": 0.8, \"nesterov\": true}", 0.05, {"buf", NULL}, 1},
    {"adam", "adam", NULL, 0.01, {"m", "v"}, 2},
    {"adam_b", "adam", "{\"beta1\": 0.8, \"beta2\": 0.95, \"epsilon\": 0.0001}", 0.002, {"m", "v"}, 2},
    {"sgd_wd", "sgd", "{\"weight_decay\": 0.05}", 0.1, {NULL, NULL}, 0},
    {"momentum_wd", "momentum", "{\"mu\": 0.9, \"weight_decay\": 0.1}", 0.1, {"buf", NULL}, 1},
    {"adam_wd", "adam", "{\"weight_decay\": 0.2}", 0.01, {"m", "v"}, 2},
    {"adamw", "adamw", NULL, 0.01, {"m", "v"}, 2}, /* weight_decay's default, 0.01, as torch's */
    {"adamw_b", "adamw", "{\"beta1\": 0.8, \"beta2\": 0.95, \"epsilon\": 0.0001, \"weight_decay\": 0.5}", 0.05,
     {"m", "v"}, 2},
};

/* Loads optim/<name>.npy, name = fmt filled with a string and an int. */
static pardo_tensor *load(const char *fmt, const char *a, int t) {
    char name[128], file[160];
    snprintf(name, sizeof name, fmt, a, t);
    snprintf(file, sizeof file, "optim/%s.npy", name);
    return test_npy_load(file);
}

/* Runs one case for 3 steps from the fixture's p0 with its gradients; the
 * op's inputs are param, grad, states..., [step,] lr. */
static void run_case(const opt_case *c, const char *dt, bool lr_vector) {
    pardo_status st;
    const bool adam = strncmp(c->op, "adam", 4) == 0, f32 = strcmp(dt, "f32") == 0;
    const int n_in = 3 + c->n_state + (adam ? 1 : 0), n_out = 1 + c->n_state + (adam ? 1 : 0);
    pardo_tensor *in[6] = {NULL}, *out[4] = {NULL};
    in[0] = load("%s_p0", dt, 0);
    for (int k = 0; k < c->n_state; k++) in[2 + k] = pardo_tensor_new_cpu(in[0]->dtype, in[0]->ndim, in[0]->shape, &st);
    int64_t one = 1;
    if (adam) in[2 + c->n_state] = test_tensor_from(PARDO_I64, 0, NULL, (double[]){0});
    in[n_in - 1] = test_tensor_from(in[0]->dtype, lr_vector ? 1 : 0, &one, &c->lr);
    for (int t = 1; t <= 3; t++) {
        in[1] = load("%s_g%d", dt, t);
        ck_assert_msg(test_run_op(c->op, c->attrs, n_in, in, n_out, out, &st) == PARDO_OK, "%s %s step %d: %s", c->name,
                      dt, t, st.msg);
        char stem[64];
        snprintf(stem, sizeof stem, "%s_%s", c->name, dt);
        const double rtol = f32 ? 1e-5 : 1e-6, atol = 0;
        pardo_tensor *want = load("%s_p%d", stem, t);
        test_assert_close(out[0], want, rtol, atol);
        pardo_tensor_release(want);
        for (int k = 0; k < c->n_state; k++) {
            char fmt[32];
            snprintf(fmt, sizeof fmt, "%%s_%s%%d", c->state[k]);
            want = load(fmt, stem, t);
            test_assert_close(out[1 + k], want, rtol, atol);
            pardo_tensor_release(want);
        }
        if (adam) ck_assert_int_eq((int)pardo_tensor_get_f64(out[n_out - 1], 0), t);
        /* the outputs are the next step's param and state */
        for (int k = 0; k < n_out; k++) {
            int at = k == 0 ? 0 : 1 + k;
            pardo_tensor_release(in[at]);
            in[at] = out[k];
            out[k] = NULL;
        }
        pardo_tensor_release(in[1]);
        in[1] = NULL;
    }
    for (int k = 0; k < n_in; k++) pardo_tensor_release(in[k]);
}

START_TEST(test_optimizer_fixtures) {
    for (int c = 0; c < LEN(cases); c++) {
        run_case(&cases[c], "f64", false);
        run_case(&cases[c], "f32", c % 2 == 0); /* lr as [1] sometimes */
    }
}
END_TEST

/* clip_grad_norm of two gradients against torch.nn.utils.clip_grad_norm_:
 * clipped (max_norm 1.5, their norm is about 5) and left alone (100), in
 * float64 and float32; a max_norm <= 0 or missing is refused. */
START_TEST(test_clip_grad_norm_fixtures) {
    static const char *const dts[] = {"f64", "f32"}, *const maxes[] = {"1.5", "100"};
    pardo_status st;
    for (int d = 0; d < 2; d++)
        for (int m = 0; m < 2; m++) {
            pardo_tensor *in[2] = {load("%s_g%d", dts[d], 1), NULL}, *out[2] = {NULL, NULL};
            char name[32], attrs[48];
            snprintf(name, sizeof name, "clip_%s_b", dts[d]);
            in[1] = load("%s", name, 0);
            snprintf(attrs, sizeof attrs, "{\"max_norm\": %s}", maxes[m]);
            ck_assert_msg(test_run_op("clip_grad_norm", attrs, 2, in, 2, out, &st) == PARDO_OK, "%s", st.msg);
            for (int k = 0; k < 2; k++) {
                snprintf(name, sizeof name, "clip_%s_%s_%c", dts[d], maxes[m], "ab"[k]);
                pardo_tensor *want = load("%s", name, 0);
                test_assert_close(out[k], want, d ? 1e-6 : 1e-12, 0);
                pardo_tensor_release(want);
                pardo_tensor_release(out[k]);
            }
            for (int k = 0; k < 2; k++) pardo_tensor_release(in[k]);
        }
    int64_t n = 3;
    pardo_tensor *g = test_tensor_from(PARDO_F32, 1, &n, (double[]){3, 4, 0}), *o = NULL;
    ck_assert(test_run_op("clip_grad_norm", "{\"max_norm\": 0}", 1, &g, 1, &o, &st) == PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "max_norm") != NULL, "%s", st.msg);
    ck_assert(test_run_op("clip_grad_norm", NULL, 1, &g, 1, &o, &st) == PARDO_EINVAL);
    /* the naive loop: norm 5 clipped to 1 */
    ck_assert(test_run_op("clip_grad_norm", "{\"max_norm\": 1}", 1, &g, 1, &o, &st) == PARDO_OK);
    ck_assert(fabs(pardo_tensor_get_f64(o, 0) - 0.6) < 1e-6 && fabs(pardo_tensor_get_f64(o, 1) - 0.8) < 1e-6);
    pardo_tensor_release(o);
    pardo_tensor_release(g);
}
END_TEST

/* Runs op in place: output k is the tensor of input in_of[k], as the
 * executor hands it over when the graph names the same var. */
static void run_inplace_on(const char *type, const char *attrs, int n_in, pardo_tensor **in, int n_out, const int *in_of,
                           int nthreads) {
    static char names[8][16];
    char *in_names[8], *out_names[8];
    for (int k = 0; k < n_in; k++) {
        snprintf(names[k], sizeof names[k], "v%d", k);
        in_names[k] = names[k];
    }
    for (int k = 0; k < n_out; k++) out_names[k] = names[in_of[k]];
    pardo_op op;
    memset(&op, 0, sizeof op);
    op.type = (char *)type;
    op.def = pardo_op_lookup(type);
    op.in = in_names;
    op.n_in = n_in;
    op.out = out_names;
    op.n_out = n_out;
    pardo_status st;
    if (attrs) ck_assert_int_eq(pardo_value_parse_json(attrs, &op.attrs, &st), PARDO_OK);
    ck_assert(op.def->inplace);
    pardo_tensor *out[8];
    for (int k = 0; k < n_out; k++) out[k] = pardo_tensor_retain(in[in_of[k]]);
    pardo_kernel_ctx ctx = {.op = &op,
                            .n_in = n_in,
                            .in = in,
                            .n_out = n_out,
                            .out = out,
                            .st = &st,
                            .device = PARDO_DEVICE_CPU,
                            .nthreads = nthreads};
    ck_assert_msg(op.def->cpu(&ctx) == PARDO_OK, "%s: %s", type, st.msg);
    for (int k = 0; k < n_out; k++) {
        ck_assert_ptr_eq(out[k], in[in_of[k]]); /* updated in place, nothing allocated */
        pardo_tensor_release(out[k]);
    }
    pardo_value_free(op.attrs);
}

static void run_inplace(const char *type, const char *attrs, int n_in, pardo_tensor **in, int n_out, const int *in_of) {
    run_inplace_on(type, attrs, n_in, in, n_out, in_of, 1);
}

/* A param big enough to split over the pool updates bitwise as on one
 * thread, and sgd as the naive loop p - lr * g. */
START_TEST(test_optimizer_split_over_threads) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(2, &st) == PARDO_OK, "%s", st.msg);
    test_rng r = {9};
    int64_t n[] = {100003};
    pardo_tensor *lr = test_tensor_from(PARDO_F32, 0, NULL, (double[]){0.05}),
                 *step[2] = {test_tensor_from(PARDO_I64, 0, NULL, (double[]){4}),
                             test_tensor_from(PARDO_I64, 0, NULL, (double[]){4})};
    pardo_tensor *g = test_tensor_random(&r, PARDO_F32, 1, n, -1, 1);
    pardo_tensor *p[2], *m[2], *v[2];
    p[0] = test_tensor_random(&r, PARDO_F32, 1, n, -1, 1);
    m[0] = test_tensor_random(&r, PARDO_F32, 1, n, -1, 1);
    v[0] = test_tensor_random(&r, PARDO_F32, 1, n, 0, 1);
    p[1] = pardo_tensor_clone(p[0], &st);
    m[1] = pardo_tensor_clone(m[0], &st);
    v[1] = pardo_tensor_clone(v[0], &st);
    pardo_tensor *p_before = pardo_tensor_clone(p[0], &st);
    for (int t = 0; t < 2; t++) {
        pardo_tensor *sgd_in[3] = {p[t], g, lr};
        run_inplace_on("sgd", NULL, 3, sgd_in, 1, (int[]){0}, t ? 2 : 1);
    }
    for (int64_t i = 0; i < n[0]; i += 997)
        ck_assert(pardo_tensor_get_f64(p[1], i) == (double)(float)(pardo_tensor_get_f64(p_before, i) -
                                                                    (double)0.05f * pardo_tensor_get_f64(g, i)));
    for (int t = 0; t < 2; t++) {
        pardo_tensor *mom_in[4] = {p[t], g, m[t], lr};
        run_inplace_on("momentum", "{\"mu\": 0.9, \"nesterov\": true}", 4, mom_in, 2, (int[]){0, 2}, t ? 2 : 1);
        pardo_tensor *adam_in[6] = {p[t], g, m[t], v[t], step[t], lr};
        run_inplace_on("adam", NULL, 6, adam_in, 4, (int[]){0, 2, 3, 4}, t ? 2 : 1);
    }
    size_t bytes = (size_t)n[0] * sizeof(float);
    ck_assert(memcmp(pardo_tensor_data(p[0]), pardo_tensor_data(p[1]), bytes) == 0);
    ck_assert(memcmp(pardo_tensor_data(m[0]), pardo_tensor_data(m[1]), bytes) == 0);
    ck_assert(memcmp(pardo_tensor_data(v[0]), pardo_tensor_data(v[1]), bytes) == 0);
    ck_assert(memcmp(pardo_tensor_data(p[0]), pardo_tensor_data(p_before), bytes) != 0);
    for (int t = 0; t < 2; t++) {
        pardo_tensor_release(p[t]);
        pardo_tensor_release(m[t]);
        pardo_tensor_release(v[t]);
        pardo_tensor_release(step[t]);
    }
    pardo_tensor_release(p_before);
    pardo_tensor_release(g);
    pardo_tensor_release(lr);
    pardo_thread_pool_shutdown();
}
END_TEST

START_TEST(test_optimizer_in_place) {
    /* the same values as the out-of-place fixture run, written into the inputs */
    int64_t s[] = {3};
    pardo_tensor *p = test_tensor_from(PARDO_F64, 1, s, (double[]){1, -2, 0.5}),
                 *g = test_tensor_from(PARDO_F64, 1, s, (double[]){0.5, 0.25, -1}),
                 *m = test_tensor_from(PARDO_F64, 1, s, (double[]){0, 0, 0}),
                 *v = test_tensor_from(PARDO_F64, 1, s, (double[]){0, 0, 0}),
                 *step = test_tensor_from(PARDO_F32, 0, NULL, (double[]){0}),
                 *lr = test_tensor_from(PARDO_F64, 0, NULL, (double[]){0.1});
    pardo_tensor *sgd_in[3] = {p, g, lr};
    run_inplace("sgd", NULL, 3, sgd_in, 1, (int[]){0});
    ck_assert_double_eq_tol(pardo_tensor_get_f64(p, 0), 0.95, 1e-15);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(p, 2), 0.6, 1e-15);
    pardo_tensor *mom_in[4] = {p, g, v, lr};
    run_inplace("momentum", "{\"mu\": 0.5}", 4, mom_in, 2, (int[]){0, 2});
    run_inplace("momentum", "{\"mu\": 0.5}", 4, mom_in, 2, (int[]){0, 2});
    /* v1 = g, v2 = 1.5 g; p = 0.95 - 0.1 * 2.5 * 0.5 */
    ck_assert_double_eq_tol(pardo_tensor_get_f64(v, 0), 0.75, 1e-15);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(p, 0), 0.825, 1e-15);
    /* adam with a float32 step counter: with a constant gradient every step moves lr * sign(g) (eps aside) */
    pardo_tensor_release(v);
    v = test_tensor_from(PARDO_F64, 1, s, (double[]){0, 0, 0});
    pardo_tensor *adam_in[6] = {p, g, m, v, step, lr};
    double p0[3];
    for (int i = 0; i < 3; i++) p0[i] = pardo_tensor_get_f64(p, i);
    for (int t = 0; t < 3; t++) run_inplace("adam", "{\"epsilon\": 0}", 6, adam_in, 4, (int[]){0, 2, 3, 4});
    ck_assert_double_eq(pardo_tensor_get_f64(step, 0), 3);
    for (int i = 0; i < 3; i++) {
        double gi = pardo_tensor_get_f64(g, i);
        ck_assert_double_eq_tol(pardo_tensor_get_f64(p, i), p0[i] - 0.3 * (gi > 0 ? 1 : -1), 1e-12);
        ck_assert_double_eq_tol(pardo_tensor_get_f64(m, i), (1 - pow(0.9, 3)) * gi, 1e-15);
        ck_assert_double_eq_tol(pardo_tensor_get_f64(v, i), (1 - pow(0.999, 3)) * gi * gi, 1e-15);
    }
    pardo_tensor *all[] = {p, g, m, v, step, lr};
    for (int i = 0; i < 6; i++) pardo_tensor_release(all[i]);
}
END_TEST

START_TEST(test_optimizer_optional_state_outputs) {
    /* adam with only the param output: the state inputs are read, not written */
    int64_t s[] = {2};
    pardo_tensor *in[6] = {test_tensor_from(PARDO_F32, 1, s, (double[]){1, 1}),
                           test_tensor_from(PARDO_F32, 1, s, (double[]){1, -1}),
                           test_tensor_from(PARDO_F32, 1, s, (double[]){0, 0}),
                           test_tensor_from(PARDO_F32, 1, s, (double[]){0, 0}),
                           test_tensor_from(PARDO_I64, 1, (int64_t[]){1}, (double[]){0}),
                           test_tensor_from(PARDO_F32, 1, (int64_t[]){1}, (double[]){0.5})},
                 *out = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("adam", NULL, 6, in, 1, &out, &st), PARDO_OK);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(out, 0), 0.5, 1e-6);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(out, 1), 1.5, 1e-6);
    ck_assert_double_eq(pardo_tensor_get_f64(in[4], 0), 0);
    pardo_tensor_release(out);
    for (int i = 0; i < 6; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_optimizer_infer) {
    pardo_type out[4], p = test_type(PARDO_F32, 2, (int64_t[]){-1, 4}), g = test_type(PARDO_F32, 2, (int64_t[]){3, 4}),
                       step = test_type(PARDO_I64, 0, NULL), lr = test_type(PARDO_F32, 1, (int64_t[]){1});
    const pardo_type *in[6] = {&p, &g, &p, &g, &step, &lr};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("adam", NULL, 6, in, 4, out, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(out[0].ndim, out[0].shape, 2, (int64_t[]){-1, 4}));
    ck_assert_int_eq(out[3].dtype, PARDO_I64);
    ck_assert_int_eq(out[3].ndim, 0);
    for (int k = 0; k < 3; k++)
        ck_assert(pardo_op_lookup((const char *[]){"sgd", "momentum", "adam"}[k])->grad == NULL);
}
END_TEST

START_TEST(test_optimizer_errors) {
    pardo_type out[4], p = test_type(PARDO_F32, 2, (int64_t[]){3, 4}), g = test_type(PARDO_F32, 2, (int64_t[]){3, 5}),
                       lr = test_type(PARDO_F32, 0, NULL), step = test_type(PARDO_I64, 0, NULL);
    const pardo_type *sgd[3] = {&p, &g, &lr};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("sgd", NULL, 3, sgd, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'grad'") && strstr(st.msg, "'param'") && strstr(st.msg, "[3, 5]") &&
                      strstr(st.msg, "[3, 4]"),
                  "%s", st.msg);
    g = test_type(PARDO_F64, 2, (int64_t[]){3, 4});
    ck_assert_int_eq(test_infer_op("sgd", NULL, 3, sgd, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float64") && strstr(st.msg, "float32"), "%s", st.msg);
    g = p;
    lr = test_type(PARDO_F32, 1, (int64_t[]){2});
    ck_assert_int_eq(test_infer_op("sgd", NULL, 3, sgd, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'lr'") && strstr(st.msg, "scalar"), "%s", st.msg);
    lr = test_type(PARDO_I32, 0, NULL);
    ck_assert_int_eq(test_infer_op("sgd", NULL, 3, sgd, 1, out, &st), PARDO_ESHAPE);
    lr = test_type(PARDO_F64, 0, NULL); /* a float64 lr for a float32 param is fine */
    ck_assert_int_eq(test_infer_op("sgd", NULL, 3, sgd, 1, out, &st), PARDO_OK);
    /* momentum: the velocity */
    pardo_type vel = test_type(PARDO_F32, 1, (int64_t[]){12});
    const pardo_type *mom[4] = {&p, &g, &vel, &lr};
    ck_assert_int_eq(test_infer_op("momentum", NULL, 4, mom, 2, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'velocity'"), "%s", st.msg);
    vel = p;
    ck_assert_int_eq(test_infer_op("momentum", "{\"nesterov\": \"yes\"}", 4, mom, 2, out, &st), PARDO_EINVAL);
    /* adam: the moments, the step, the attrs */
    pardo_type m = test_type(PARDO_F64, 2, (int64_t[]){3, 4});
    const pardo_type *adam[6] = {&p, &g, &m, &p, &step, &lr};
    ck_assert_int_eq(test_infer_op("adam", NULL, 6, adam, 4, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'m'"), "%s", st.msg);
    m = p;
    step = test_type(PARDO_I64, 1, (int64_t[]){2});
    ck_assert_int_eq(test_infer_op("adam", NULL, 6, adam, 4, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'step'"), "%s", st.msg);
    step = test_type(PARDO_BOOL, 0, NULL);
    ck_assert_int_eq(test_infer_op("adam", NULL, 6, adam, 4, out, &st), PARDO_ESHAPE);
    step = test_type(PARDO_I64, 0, NULL);
    ck_assert_int_eq(test_infer_op("adam", "{\"beta1\": 1}", 6, adam, 4, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'beta1'"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("adam", "{\"beta2\": -0.5}", 6, adam, 4, out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("adam", "{\"epsilon\": -1}", 6, adam, 4, out, &st), PARDO_EINVAL);
    p = g = m = test_type(PARDO_I32, 1, (int64_t[]){3});
    ck_assert_int_eq(test_infer_op("adam", NULL, 6, adam, 4, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'param'"), "%s", st.msg);
}
END_TEST

Suite *make_ops_optimizer_suite(void) {
    Suite *s = suite_create("ops_optimizer");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_optimizer_fixtures);
    tcase_add_test(core, test_clip_grad_norm_fixtures);
    tcase_add_test(core, test_optimizer_in_place);
    tcase_add_test(core, test_optimizer_split_over_threads);
    tcase_add_test(core, test_optimizer_optional_state_outputs);
    tcase_add_test(core, test_optimizer_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_optimizer_errors);
    suite_add_tcase(s, errors);
    return s;
}
