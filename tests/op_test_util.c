/* op_test_util.c - run one op outside a graph (see op_test_util.h). */
#include "op_test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/value_json.h"

static void make_op(pardo_op *op, const char *type, const char *attrs_json, int n_in, int n_out) {
    static char *in_names[16], *out_names[16];
    static char names[32][16];
    ck_assert_int_le(n_in, 16);
    ck_assert_int_le(n_out, 16);
    memset(op, 0, sizeof(*op));
    op->def = pardo_op_lookup(type);
    ck_assert_msg(op->def != NULL, "op '%s' is not registered", type);
    op->type = (char *)type;
    for (int i = 0; i < n_in; i++) {
        snprintf(names[i], sizeof names[i], "in%d", i);
        in_names[i] = names[i];
    }
    for (int i = 0; i < n_out; i++) {
        snprintf(names[16 + i], sizeof names[16 + i], "out%d", i);
        out_names[i] = names[16 + i];
    }
    op->in = in_names;
    op->n_in = n_in;
    op->out = out_names;
    op->n_out = n_out;
    if (attrs_json) {
        pardo_status st;
        int rc = pardo_value_parse_json(attrs_json, &op->attrs, &st);
        ck_assert_msg(rc == PARDO_OK, "attrs %s: %s", attrs_json, st.msg);
    }
}

int test_infer_op(const char *type, const char *attrs_json, int n_in, const pardo_type *const *in_types, int n_out,
                  pardo_type *out_types, pardo_status *st) {
    pardo_op op;
    make_op(&op, type, attrs_json, n_in, n_out);
    for (int i = 0; i < n_out; i++) {
        memset(&out_types[i], 0, sizeof(out_types[i]));
        out_types[i].dtype = PARDO_DTYPE_UNKNOWN;
        out_types[i].ndim = -1;
    }
    pardo_infer_ctx ictx = {.op = &op, .n_in = n_in, .in = in_types, .n_out = n_out, .out = out_types, .st = st};
    pardo_status_clear(st);
    int rc = pardo_op_infer(&ictx);
    pardo_value_free(op.attrs);
    return rc;
}

/* test_run_op_ex with the kernel ctx's thread count. */
static int run_op(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out, pardo_tensor **out,
                  bool training, uint64_t step, int nthreads, pardo_status *st) {
    pardo_type in_types[16], out_types[16];
    const pardo_type *in_ptrs[16];
    ck_assert_int_le(n_in, 16);
    for (int i = 0; i < n_in; i++) {
        if (in[i]) {
            in_types[i] = pardo_tensor_type(in[i]);
            in_ptrs[i] = &in_types[i];
        } else {
            in_ptrs[i] = NULL;
        }
    }
    for (int i = 0; i < n_out; i++) out[i] = NULL;
    int rc = test_infer_op(type, attrs_json, n_in, in_ptrs, n_out, out_types, st);
    if (rc != PARDO_OK) return rc;

    pardo_op op;
    make_op(&op, type, attrs_json, n_in, n_out);
    pardo_kernel_ctx ctx = {.op = &op, .n_in = n_in, .in = in, .n_out = n_out, .out = out, .st = st,
                            .device = PARDO_DEVICE_CPU, .nthreads = nthreads, .training = training, .step = step};
    for (int i = 0; i < n_in; i++)
        if (in[i]) ck_assert_ptr_nonnull(pardo_tensor_cpu(in[i], st));
    rc = pardo_op_run_cpu(&ctx);
    pardo_value_free(op.attrs);
    if (rc != PARDO_OK) {
        for (int i = 0; i < n_out; i++) {
            pardo_tensor_release(out[i]);
            out[i] = NULL;
        }
        return rc;
    }
    for (int i = 0; i < n_out; i++) {
        char a[128], b[128];
        if (!out[i]) continue; /* an output the op left unset (optional) */
        ck_assert_msg(out_types[i].dtype == out[i]->dtype, "%s output %d: inferred dtype %s, kernel made %s", type,
                      i, pardo_dtype_name(out_types[i].dtype), pardo_dtype_name(out[i]->dtype));
        ck_assert_msg(out_types[i].ndim == -1 || out_types[i].ndim == out[i]->ndim,
                      "%s output %d: inferred rank %d, kernel made %s", type, i, out_types[i].ndim,
                      pardo_shape_str(out[i]->ndim, out[i]->shape, a, sizeof a));
        for (int d = 0; out_types[i].ndim > 0 && d < out_types[i].ndim; d++)
            ck_assert_msg(out_types[i].shape[d] == -1 || out_types[i].shape[d] == out[i]->shape[d],
                          "%s output %d: inferred shape %s, kernel made %s", type, i,
                          pardo_shape_str(out_types[i].ndim, out_types[i].shape, b, sizeof b),
                          pardo_shape_str(out[i]->ndim, out[i]->shape, a, sizeof a));
    }
    return PARDO_OK;
}

int test_run_op_ex(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                   pardo_tensor **out, bool training, uint64_t step, pardo_status *st) {
    return run_op(type, attrs_json, n_in, in, n_out, out, training, step, 1, st);
}

int test_run_op_threads(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                        pardo_tensor **out, int nthreads, pardo_status *st) {
    return run_op(type, attrs_json, n_in, in, n_out, out, false, 0, nthreads, st);
}

int test_run_op(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                pardo_tensor **out, pardo_status *st) {
    return test_run_op_ex(type, attrs_json, n_in, in, n_out, out, false, 0, st);
}
