/* bitwise.c - bit_shift, like ONNX BitShift: C = A shifted left or right
 * (attr direction) by B bits, A and B of one unsigned integer dtype
 * (uint8, uint16, uint32, uint64) broadcast like numpy. A shift by the
 * dtype's width or more gives 0 (numpy's result; C leaves it undefined).
 * No gradient. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernel_util.h"
#include "op.h"

static const pardo_arg_def ab_in[] = {
    {"A", "the values shifted (uint8, uint16, uint32 or uint64)", false, false},
    {"B", "the shift amounts, A's dtype, broadcast against A like numpy", false, false},
};
static const pardo_arg_def c_out[] = {{"C", "A shifted, of the broadcast shape and A's dtype", false, false}};
static const pardo_attr_def shift_attrs[] = {
    {"direction", PARDO_ATTR_STRING, NULL, "\"left\" or \"right\""},
};
static const pardo_dtype shift_dtypes[] = {PARDO_U8, PARDO_U16, PARDO_U32, PARDO_U64};

/* *left from attr direction; PARDO_EINVAL unless it is "left" or "right". */
static int shift_direction(const pardo_op *op, bool *left, pardo_status *st) {
    const char *d;
    if (!pardo_attr(op, "direction")) return pardo_errorf(st, PARDO_EINVAL, "attr 'direction' is required");
    int rc = pardo_attr_string(op, "direction", "", &d, st);
    if (rc != PARDO_OK) return rc;
    if (strcmp(d, "left") != 0 && strcmp(d, "right") != 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'direction' is \"%s\", expected \"left\" or \"right\"", d);
    *left = d[0] == 'l';
    return PARDO_OK;
}

static int shift_infer(pardo_infer_ctx *ctx) {
    bool left;
    int rc = shift_direction(ctx->op, &left, ctx->st);
    return rc == PARDO_OK ? pardo_infer_binary_same_dtype(ctx, shift_dtypes, 4) : rc;
}

/* x << s or x >> s for elements of the unsigned type T; a shift of T's width or more gives 0. */
#define SHIFT_OP(T, x, s, left)                                                                                        \
    ((s) >= 8 * sizeof(T) ? (T)0 : (left) ? (T)((uint64_t)(x) << (s)) : (T)((x) >> (s)))

PARDO_BCAST2_FLAG_KERNEL(shift_u8, uint8_t, SHIFT_OP)
PARDO_BCAST2_FLAG_KERNEL(shift_u16, uint16_t, SHIFT_OP)
PARDO_BCAST2_FLAG_KERNEL(shift_u32, uint32_t, SHIFT_OP)
PARDO_BCAST2_FLAG_KERNEL(shift_u64, uint64_t, SHIFT_OP)

static int shift_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    bool left;
    int rc = shift_direction(ctx->op, &left, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (a->dtype != b->dtype || !pardo_dtype_is_unsigned(a->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs have dtypes %s and %s, expected one unsigned int dtype",
                            pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype));
    pardo_bcast2 plan;
    if ((rc = pardo_bcast2_plan(a->ndim, a->shape, b->ndim, b->shape, &plan, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, a->dtype, plan.ndim, plan.shape);
    if (!y) return ctx->st->code;
    if (plan.numel == 0) return PARDO_OK;
    const void *pa = pardo_tensor_data(a), *pb = pardo_tensor_data(b);
    void *py = pardo_tensor_data(y);
    switch (a->dtype) {
    case PARDO_U8: shift_u8(&plan, left, pa, pb, py); break;
    case PARDO_U16: shift_u16(&plan, left, pa, pb, py); break;
    case PARDO_U32: shift_u32(&plan, left, pa, pb, py); break;
    default: shift_u64(&plan, left, pa, pb, py); break;
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_bit_shift = {
    .type = "bit_shift",
    .doc = "C = A << B or A >> B (attr direction), broadcasting like numpy, like ONNX BitShift (uint8, uint16, "
           "uint32, uint64; a shift by the width or more gives 0; no gradient)",
    .inputs = ab_in,
    .n_inputs = 2,
    .outputs = c_out,
    .n_outputs = 1,
    .attrs = shift_attrs,
    .n_attrs = 1,
    .infer = shift_infer,
    .cpu = shift_cpu,
    .all_dtypes = true,
};
