/* grad_test_util.c - finite-difference gradient checks (see grad_test_util.h). */
#include "grad_test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_test_util.h"
#include "core/scope.h"
#include "test_util.h"
#include "core/value_json.h"

#define MAX_IO 16

/* L = sum_j <w_j, out_j> of the forward op on `in`. */
static double loss_of(const char *type, const char *attrs, int n_in, pardo_tensor **in, int n_out,
                      pardo_tensor *const *w, bool training, uint64_t step) {
    pardo_tensor *out[MAX_IO];
    pardo_status st;
    int rc = test_run_op_ex(type, attrs, n_in, in, n_out, out, training, step, &st);
    ck_assert_msg(rc == PARDO_OK, "%s forward: %s", type, st.msg);
    double l = 0;
    for (int j = 0; j < n_out; j++) {
        if (w[j])
            for (int64_t i = 0; i < out[j]->numel; i++) l += pardo_tensor_get_f64(w[j], i) * pardo_tensor_get_f64(out[j], i);
        pardo_tensor_release(out[j]);
    }
    return l;
}

/* Runs one op of the gradient block over scope s: inference on the bound
 * inputs' types, then the CPU kernel; binds its outputs. */
static void run_in_scope(const pardo_op *op, pardo_scope *s, bool training, uint64_t step) {
    pardo_status st;
    pardo_tensor *in[64] = {0}, *out[MAX_IO] = {0};
    pardo_type types[64];
    const pardo_type *tp[64];
    pardo_type out_types[MAX_IO];
    ck_assert_msg(op->def != NULL, "gradient op '%s' is not registered", op->type);
    ck_assert_int_le(op->n_in, 64);
    for (int k = 0; k < op->n_in; k++) {
        tp[k] = NULL;
        if (!op->in[k][0]) continue;
        in[k] = pardo_scope_find(s, op->in[k]);
        ck_assert_msg(in[k] != NULL, "%s: input '%s' has no value", op->type, op->in[k]);
        types[k] = pardo_tensor_type(in[k]);
        tp[k] = &types[k];
    }
    for (int k = 0; k < op->n_out; k++) {
        memset(&out_types[k], 0, sizeof out_types[k]);
        out_types[k].dtype = PARDO_DTYPE_UNKNOWN;
        out_types[k].ndim = -1;
    }
    pardo_infer_ctx ictx = {.op = op, .n_in = op->n_in, .in = tp, .n_out = op->n_out, .out = out_types, .st = &st};
    ck_assert_msg(pardo_op_infer(&ictx) == PARDO_OK, "%s infer: %s", op->type, st.msg);
    pardo_kernel_ctx ctx = {.op = op, .n_in = op->n_in, .in = in, .n_out = op->n_out, .out = out, .st = &st,
                            .device = PARDO_DEVICE_CPU, .nthreads = 1, .training = training, .step = step};
    ck_assert_msg(op->def->cpu(&ctx) == PARDO_OK, "%s kernel: %s", op->type, st.msg);
    for (int k = 0; k < op->n_out; k++) {
        if (!op->out[k][0]) {
            ck_assert_msg(out[k] == NULL, "%s made output %d that the graph left out", op->type, k);
            continue;
        }
        ck_assert_msg(out[k] != NULL, "%s did not make output %d", op->type, k);
        ck_assert_msg(out[k]->dtype == out_types[k].dtype, "%s output %d: dtype differs from inference", op->type, k);
        ck_assert_msg(out_types[k].ndim < 0 || out_types[k].ndim == out[k]->ndim, "%s output %d: rank differs from inference", op->type, k);
        pardo_scope_set_move(s, op->out[k], out[k], &st);
    }
}

void test_check_grad_ex(const char *type, const char *attrs, int n_in, pardo_tensor **in, int n_out, unsigned which,
                        double eps, double tol, bool training, uint64_t step) {
    pardo_status st;
    test_rng r = {0x5eedULL};
    const pardo_op_def *def = pardo_op_lookup(type);
    ck_assert_msg(def && def->grad, "op '%s' has no gradient builder", type);
    ck_assert(n_in <= MAX_IO && n_out <= MAX_IO);

    /* forward once, random output weights for the float outputs */
    pardo_tensor *out[MAX_IO], *w[MAX_IO] = {0};
    ck_assert_msg(test_run_op_ex(type, attrs, n_in, in, n_out, out, training, step, &st) == PARDO_OK, "%s: %s", type,
                  st.msg);
    for (int j = 0; j < n_out; j++)
        if (pardo_dtype_is_float(out[j]->dtype))
            w[j] = test_tensor_random(&r, out[j]->dtype, out[j]->ndim, out[j]->shape, -1, 1);

    /* the forward op as the graph would hold it, and the gradient request */
    char in_names[MAX_IO][24], out_names[MAX_IO][24], dy[MAX_IO][24], dx[MAX_IO][24]; /* "x%d@GRAD" for any int */
    char *fin[MAX_IO], *fout[MAX_IO];
    const char *out_grads[MAX_IO], *in_grads[MAX_IO];
    for (int k = 0; k < n_in; k++) {
        snprintf(in_names[k], sizeof in_names[k], in[k] ? "x%d" : "", k);
        snprintf(dx[k], sizeof dx[k], "x%d@GRAD", k);
        fin[k] = in_names[k];
        in_grads[k] = (which >> k & 1u) ? dx[k] : "";
    }
    for (int j = 0; j < n_out; j++) {
        snprintf(out_names[j], sizeof out_names[j], "y%d", j);
        snprintf(dy[j], sizeof dy[j], "y%d@GRAD", j);
        fout[j] = out_names[j];
        out_grads[j] = w[j] ? dy[j] : "";
    }
    pardo_op fwd;
    memset(&fwd, 0, sizeof fwd);
    fwd.type = (char *)type;
    fwd.def = def;
    fwd.in = fin;
    fwd.n_in = n_in;
    fwd.out = fout;
    fwd.n_out = n_out;
    if (attrs) ck_assert_int_eq(pardo_value_parse_json(attrs, &fwd.attrs, &st), PARDO_OK);
    pardo_grad_request req = {.fwd = &fwd, .out_grads = out_grads, .in_grads = in_grads};
    pardo_block blk;
    memset(&blk, 0, sizeof blk);
    ck_assert_msg(def->grad(&req, &blk, &st) == PARDO_OK, "%s grad builder: %s", type, st.msg);
    ck_assert_int_gt(blk.n_ops, 0);

    /* run the gradient ops */
    pardo_scope *s = pardo_scope_new(NULL);
    for (int k = 0; k < n_in; k++)
        if (in[k]) pardo_scope_set(s, in_names[k], in[k], &st);
    for (int j = 0; j < n_out; j++) {
        pardo_scope_set(s, out_names[j], out[j], &st);
        if (w[j]) pardo_scope_set(s, dy[j], w[j], &st);
    }
    for (int i = 0; i < blk.n_ops; i++) {
        blk.ops[i].def = pardo_op_lookup(blk.ops[i].type);
        run_in_scope(&blk.ops[i], s, training, step);
    }

    /* compare with central differences */
    for (int k = 0; k < n_in; k++) {
        if (!(which >> k & 1u)) continue;
        pardo_tensor *x = in[k], *g = pardo_scope_find(s, dx[k]);
        ck_assert_msg(g != NULL, "%s: no gradient for input %d", type, k);
        ck_assert_msg(x->dtype == PARDO_F64, "%s: checked input %d must be float64", type, k);
        ck_assert_msg(pardo_shape_equal(g->ndim, g->shape, x->ndim, x->shape), "%s: gradient of input %d has another shape", type, k);
        for (int64_t i = 0; i < x->numel; i++) {
            double orig = pardo_tensor_get_f64(x, i);
            pardo_tensor_set_f64(x, i, orig + eps);
            double lp = loss_of(type, attrs, n_in, in, n_out, w, training, step);
            pardo_tensor_set_f64(x, i, orig - eps);
            double lm = loss_of(type, attrs, n_in, in, n_out, w, training, step);
            pardo_tensor_set_f64(x, i, orig);
            double num = (lp - lm) / (2 * eps), ana = pardo_tensor_get_f64(g, i);
            double scale = fmax(1.0, fmax(fabs(num), fabs(ana)));
            ck_assert_msg(fabs(ana - num) <= tol * scale,
                          "%s: d/d input %d [%lld]: analytic %.12g, finite differences %.12g (attrs %s)", type, k,
                          (long long)i, ana, num, attrs ? attrs : "none");
        }
    }

    pardo_scope_free(s);
    pardo_block_clear(&blk);
    pardo_value_free(fwd.attrs);
    for (int j = 0; j < n_out; j++) {
        pardo_tensor_release(out[j]);
        pardo_tensor_release(w[j]);
    }
}

void test_check_grad(const char *type, const char *attrs, int n_in, pardo_tensor **in, int n_out, unsigned which,
                     double eps, double tol) {
    test_check_grad_ex(type, attrs, n_in, in, n_out, which, eps, tol, false, 0);
}

void test_check_grad_default(const char *type, const char *attrs, int n_in, pardo_tensor **in, int n_out,
                             unsigned which) {
    test_check_grad(type, attrs, n_in, in, n_out, which, 1e-6, 1e-6);
}

void test_push_away(pardo_tensor *t, double at, double margin) {
    for (int64_t i = 0; i < t->numel; i++) {
        double v = pardo_tensor_get_f64(t, i);
        if (fabs(v - at) < margin) pardo_tensor_set_f64(t, i, v < at ? at - margin : at + margin);
    }
}
