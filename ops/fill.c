/* fill.c - the fill op: no inputs, one output of attrs shape and dtype,
 * filled like a var's init (constant, uniform, normal, xavier_uniform,
 * kaiming_uniform; see init_fill.h). The same attrs give the same values on
 * every run. */
#include <stdint.h>

#include "core/init_fill.h"
#include "kernels.h"
#include "op.h"

static const pardo_arg_def y_out[] = {{"Y", "the filled tensor", false, false}};
static const pardo_attr_def fill_attrs[] = {
    {"shape", PARDO_ATTR_INTS, NULL, "output shape, sizes >= 0 (required)"},
    {"dtype", PARDO_ATTR_STRING, "\"float32\"", "output dtype; random fills need float32 or float64"},
    {"fill", PARDO_ATTR_STRING, "\"constant\"", "constant, uniform, normal, xavier_uniform or kaiming_uniform"},
    {"value", PARDO_ATTR_FLOAT, "0.0", "constant: the value"},
    {"low", PARDO_ATTR_FLOAT, "0.0", "uniform: lower bound (inclusive)"},
    {"high", PARDO_ATTR_FLOAT, "1.0", "uniform: upper bound (exclusive)"},
    {"mean", PARDO_ATTR_FLOAT, "0.0", "normal: mean"},
    {"std", PARDO_ATTR_FLOAT, "1.0", "normal: standard deviation, >= 0"},
    {"seed", PARDO_ATTR_INT, "0", "random fills: seed, >= 0"},
};

/* The output type and the init from the attrs; PARDO_EINVAL naming the attr
 * when one is missing or bad. */
static int fill_params(const pardo_op *op, pardo_type *y, pardo_init *init, pardo_status *st) {
    const char *dtype, *fill;
    int64_t seed;
    int rc = pardo_attr_ints(op, "shape", y->shape, PARDO_MAX_DIMS, &y->ndim, st);
    if (rc != PARDO_OK) return rc;
    if (y->ndim < 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'shape' is required: a list of sizes >= 0");
    for (int d = 0; d < y->ndim; d++)
        if (y->shape[d] < 0)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'shape' element %d is %lld, expected a size >= 0", d,
                                (long long)y->shape[d]);
    if ((rc = pardo_attr_string(op, "dtype", "float32", &dtype, st)) != PARDO_OK) return rc;
    y->dtype = pardo_dtype_from_name(dtype);
    if (y->dtype == PARDO_DTYPE_UNKNOWN)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'dtype' is \"%s\", expected float32, float64, int32, int64 or bool",
                            dtype);
    if ((rc = pardo_attr_string(op, "fill", "constant", &fill, st)) != PARDO_OK) return rc;
    if (!pardo_fill_parse(fill, &init->fill))
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'fill' is \"%s\", expected constant, uniform, normal, xavier_uniform or "
                            "kaiming_uniform", fill);
    if ((rc = pardo_attr_float(op, "value", 0.0, &init->value, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "low", 0.0, &init->low, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "high", 1.0, &init->high, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "mean", 0.0, &init->mean, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "std", 1.0, &init->std, st)) != PARDO_OK ||
        (rc = pardo_attr_int(op, "seed", 0, &seed, st)) != PARDO_OK)
        return rc;
    if (seed < 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'seed' is %lld, expected >= 0", (long long)seed);
    init->seed = (uint64_t)seed;
    if ((rc = pardo_init_check(init, y->dtype, y->ndim, y->shape, st)) != PARDO_OK)
        return pardo_status_prefix(st, "attrs: ");
    return PARDO_OK;
}

static int fill_infer(pardo_infer_ctx *ctx) {
    pardo_init init;
    return fill_params(ctx->op, &ctx->out[0], &init, ctx->st);
}

static int fill_cpu(pardo_kernel_ctx *ctx) {
    pardo_type t;
    pardo_init init;
    int rc = fill_params(ctx->op, &t, &init, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, t.dtype, t.ndim, t.shape);
    if (!y) return ctx->st->code;
    return pardo_init_fill(y, &init, ctx->st);
}

const pardo_op_def pardo_op_fill = {
    .type = "fill",
    .doc = "Y of attrs shape and dtype, filled like a var's init (constant, uniform, normal, xavier/kaiming_uniform)",
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = fill_attrs,
    .n_attrs = 9,
    .infer = fill_infer,
    .cpu = fill_cpu,
    .cuda = pardo_cuda_fill,
};
