/* matmul_cuda.c - matmul and matmul_grad on the GPU (pardo_kernel_fn), built
 * only with CUDA=1; ops/matmul.c names them through ops/cuda/kernels.h. The
 * semantics are ops/matmul.c's: numpy.matmul's 1-D, 2-D and batched N-D
 * operands with broadcast batch dims, transpose_a / transpose_b on the last
 * two dims, the bias (broadcast to Y) and relu / gelu after it; matmul_grad's
 * dA, dB summed over the batches an operand was broadcast to, dA through a
 * relu's mask (input 4) and the bias gradient summed from it (output 2).
 * Each product is a row-major cuBLAS call (ops/cuda/matmul.cu: computed as
 * C^T = op(B)^T op(A)^T): a batch of A against a B of no batch dims as one
 * product of all the batch's rows, else one strided batched call per run of
 * the innermost merged batch dim where the products write distinct matrices,
 * one after another where they add into one. What the GPU half does not
 * take (integer and half dtypes, a tensor_array, shapes or attrs the CPU
 * kernel refuses, sizes past cuBLAS's ints) runs the CPU kernel
 * (pardo_cuda_run_on_cpu), which also gives the errors. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/device.h"
#include "cuda_util.h"
#include "kernel_util.h"
#include "kernels.h"
#include "launch.h"

_Static_assert(PARDO_CU_MAX_DIMS >= PARDO_MAX_DIMS, "the CUDA kernels' broadcasts take every rank");

/* The products of one matmul: attrs, matrix sizes, the batch broadcast and Y's shape. */
typedef struct gpu_plan {
    bool ta, tb;
    int64_t m, n, k;
    int a_batch_nd, b_batch_nd;
    pardo_bcast2 batch;              // A's batch dims (sa, in matrices) against B's (sb)
    int y_nd;                        // rank of Y
    int64_t y_shape[PARDO_MAX_DIMS]; // Y's shape
} gpu_plan;

/* Fills p as ops/matmul.c's mm_plan_make would for a and b; false where that kernel would refuse them (it then
 * says why) or where a size is past cuBLAS's ints. */
static bool plan_make(pardo_kernel_ctx *ctx, const pardo_tensor *a, const pardo_tensor *b, gpu_plan *p) {
    if (pardo_attr_bool(ctx->op, "transpose_a", false, &p->ta, ctx->st) != PARDO_OK ||
        pardo_attr_bool(ctx->op, "transpose_b", false, &p->tb, ctx->st) != PARDO_OK)
        return false;
    if (a->ndim < 1 || b->ndim < 1 || (p->ta && a->ndim < 2) || (p->tb && b->ndim < 2)) return false;
    const bool a_vec = a->ndim == 1, b_vec = b->ndim == 1;
    int64_t ka, kb;
    if (a_vec) {
        p->m = 1;
        ka = a->shape[0];
    } else {
        p->m = p->ta ? a->shape[a->ndim - 1] : a->shape[a->ndim - 2];
        ka = p->ta ? a->shape[a->ndim - 2] : a->shape[a->ndim - 1];
    }
    if (b_vec) {
        kb = b->shape[0];
        p->n = 1;
    } else {
        kb = p->tb ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
        p->n = p->tb ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    }
    if (ka != kb) return false;
    p->k = ka;
    p->a_batch_nd = a->ndim > 2 ? a->ndim - 2 : 0;
    p->b_batch_nd = b->ndim > 2 ? b->ndim - 2 : 0;
    if (pardo_bcast2_plan(p->a_batch_nd, a->shape, p->b_batch_nd, b->shape, &p->batch, ctx->st) != PARDO_OK)
        return false;
    p->y_nd = p->batch.ndim;
    memcpy(p->y_shape, p->batch.shape, sizeof(int64_t) * (size_t)p->y_nd);
    if (!a_vec) p->y_shape[p->y_nd++] = p->m;
    if (!b_vec) p->y_shape[p->y_nd++] = p->n;
    return p->m <= INT_MAX && p->n <= INT_MAX && p->k <= INT_MAX && p->batch.dims[p->batch.nd - 1] <= INT_MAX;
}

/* A batch of A against one B of no batch dims, A not transposed: A's matrices are one [batch * M, K] matrix and
 * Y's one [batch * M, N] (each contiguous), so the batch is one product of M rows batch times as many: one GEMM
 * for Y and for dA, and dB = A^T dY one GEMM over all the batch's rows instead of a sum of batch GEMMs into one
 * matrix. Leaves p alone elsewhere. */
static void fold_batch_into_rows(gpu_plan *p) {
    if (p->b_batch_nd != 0 || p->ta || p->a_batch_nd == 0 || p->batch.numel * p->m > INT_MAX) return;
    p->m *= p->batch.numel;
    p->a_batch_nd = 0;
    p->batch.nd = 1;
    p->batch.numel = p->batch.dims[0] = 1;
    p->batch.sa[0] = p->batch.sb[0] = 1;
}

/* The activation attr as launch.h's enum; false for a word matmul does not know (the CPU kernel says so). */
static bool activation_get(pardo_kernel_ctx *ctx, int *act) {
    const char *name;
    if (pardo_attr_string(ctx->op, "activation", "none", &name, ctx->st) != PARDO_OK) return false;
    *act = strcmp(name, "relu") == 0 ? PARDO_CU_ACT_RELU : strcmp(name, "gelu") == 0 ? PARDO_CU_ACT_GELU
                                                                                        : PARDO_CU_ACT_NONE;
    return *act != PARDO_CU_ACT_NONE || strcmp(name, "none") == 0;
}

/* Where a product of the batch finds its matrix of an operand: A's batch index, B's, or Y's (the position). */
typedef enum mat_at { AT_A, AT_B, AT_Y } mat_at;

/* One operand of a product: its device data, elements per matrix and whose batch index it follows. */
typedef struct operand {
    const char *data;
    int64_t mat;
    mat_at at;
} operand;

/* The product C = op(X) op(W) (+ C with beta 1) of every position of the batch plan bt: op(X) [m, k], op(W)
 * [k, n], each stored as pardo_cuda_gemm says. A run of the innermost merged batch dim is one strided batched
 * call where its products write distinct C matrices; where they all write one (C broadcast along it, a gradient
 * summed over the batch) they run one after another, adding up (beta 1). Returns 0 or pardo_cuda_gemm's error. */
static int products(const pardo_bcast2 *bt, int f64, bool tx, bool tw, int64_t m, int64_t n, int64_t k, operand x,
                    operand w, operand c, double beta, char *err, size_t errlen) {
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    const int inner = bt->nd - 1;
    const int64_t count = bt->dims[inner];
#define INNER_STRIDE(o) ((o).at == AT_Y ? (o).mat : ((o).at == AT_A ? bt->sa[inner] : bt->sb[inner]) * (o).mat)
    const int64_t sx = INNER_STRIDE(x), sw = INNER_STRIDE(w), sc = INNER_STRIDE(c);
#undef INNER_STRIDE
    pardo_odo o;
    pardo_odo_init(&o, inner, bt->dims, bt->sa, bt->sb);
    for (int64_t pos = 0; pos < bt->numel; pos += count, pardo_odo_next(&o)) {
#define FIRST(op) ((op).data + (size_t)(((op).at == AT_Y ? pos : o.off[(op).at]) * (op).mat) * es)
        const char *px = FIRST(x), *pw = FIRST(w);
        char *pc = (char *)FIRST(c);
#undef FIRST
        int rc = 0;
        if (sc != 0 || count == 1) {
            rc = pardo_cuda_gemm(f64, tx, tw, m, n, k, px, sx, pw, sw, pc, sc, count, beta, err, errlen);
        } else {
            for (int64_t q = 0; rc == 0 && q < count; q++)
                rc = pardo_cuda_gemm(f64, tx, tw, m, n, k, px + (size_t)(q * sx) * es, 0, pw + (size_t)(q * sw) * es,
                                     0, pc, 0, 1, beta, err, errlen);
        }
        if (rc) return rc;
    }
    return 0;
}

/* The device data of a tensor current there (the executor synced the inputs; outputs come from
 * pardo_kernel_output), or NULL with ctx->st filled. */
static const char *dev(pardo_kernel_ctx *ctx, pardo_tensor *t) { return pardo_synced_mem_gpu_data(t->mem, ctx->st); }

/* The CUDA error err (code rc) as the op's status. */
static int cuda_error(pardo_kernel_ctx *ctx, int rc, const char *err) { return pardo_errorf(ctx->st, rc, "%s", err); }

/* Whether t (of rank t_nd, shape t_shape) broadcasts to shape (nd dims) without growing it; *strides gets its
 * element stride per dim of shape, 0 where broadcast. */
static bool broadcasts_to(int t_nd, const int64_t *t_shape, int nd, const int64_t *shape, int64_t *strides) {
    if (t_nd > nd) return false;
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        const int td = t_nd - nd + d;
        const int64_t size = td >= 0 ? t_shape[td] : 1;
        if (size != 1 && size != shape[d]) return false;
        strides[d] = size == 1 ? 0 : s;
        s *= size;
    }
    return true;
}

/* matmul's CUDA kernel: Y = act(op(A) op(B) + bias). */
int pardo_cuda_matmul(pardo_kernel_ctx *ctx) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1], *bias = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!pardo_cuda_floats_in(ctx, 0x7)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x7);
    gpu_plan p;
    int act;
    int64_t bias_strides[PARDO_MAX_DIMS];
    if (!plan_make(ctx, a, b, &p) || !activation_get(ctx, &act) ||
        (bias && !broadcasts_to(bias->ndim, bias->shape, p.y_nd, p.y_shape, bias_strides)))
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes the shapes and attrs the CPU kernel takes, not these");
    pardo_tensor *y = pardo_kernel_output(ctx, 0, a->dtype, p.y_nd, p.y_shape);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;
    fold_batch_into_rows(&p); /* after Y's shape and the bias's strides, which stay the batch's */
    const char *pa = dev(ctx, a), *pb = dev(ctx, b), *pbias = bias ? dev(ctx, bias) : NULL;
    if (!pa || !pb || (bias && !pbias)) return ctx->st->code;
    const int f64 = a->dtype == PARDO_F64;
    char err[256];
    operand oa = {pa, p.m * p.k, AT_A}, ob = {pb, p.k * p.n, AT_B}, oy = {y->mem->gpu_ptr, p.m * p.n, AT_Y};
    int rc = products(&p.batch, f64, p.ta, p.tb, p.m, p.n, p.k, oa, ob, oy, 0.0, err, sizeof err);
    if (!rc && (bias || act != PARDO_CU_ACT_NONE))
        rc = pardo_cuda_launch_bias_act(f64, y->mem->gpu_ptr, pbias, p.y_nd, p.y_shape, bias_strides, act, err,
                                        sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("matmul", err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}

/* matmul_grad's CUDA kernel: dA = dY op(B)^T and dB = op(A)^T dY (transposed back where the operand was, summed
 * over broadcast batches), dA through relu_y's mask, dbias the masked dA summed to the bias's shape. */
int pardo_cuda_matmul_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1], *dy = ctx->n_in > 3 ? ctx->in[3] : NULL,
                 *relu_y = ctx->n_in > 4 ? ctx->in[4] : NULL, *bias = ctx->n_in > 5 ? ctx->in[5] : NULL;
    const bool want_a = pardo_kernel_wants_output(ctx, 0), want_b = pardo_kernel_wants_output(ctx, 1),
               want_bias = bias && pardo_kernel_wants_output(ctx, 2);
    if (!want_a && !want_b && !want_bias) return PARDO_OK;
    /* A, B, dY, relu_y and bias of one float dtype (input 2, Y, is not read) */
    const unsigned read = 1u << 0 | 1u << 1 | 1u << 3 | 1u << 4 | 1u << 5;
    if (!pardo_cuda_floats_in(ctx, read)) return pardo_cuda_run_on_cpu_inputs(ctx, read);
    gpu_plan p;
    int keep[PARDO_MAX_DIMS];
    bool fits = !(want_bias && !want_a) && plan_make(ctx, a, b, &p) &&
                (!dy || pardo_shape_equal(dy->ndim, dy->shape, p.y_nd, p.y_shape)) &&
                (!relu_y || pardo_shape_equal(relu_y->ndim, relu_y->shape, a->ndim, a->shape));
    if (fits && want_bias) { /* the bias broadcasts to A's shape: A's dims it has as 1 (or lacks) are summed over */
        int64_t strides[PARDO_MAX_DIMS];
        fits = broadcasts_to(bias->ndim, bias->shape, a->ndim, a->shape, strides);
        for (int d = 0; fits && d < a->ndim; d++) {
            const int bd = bias->ndim - a->ndim + d;
            keep[d] = (bd >= 0 ? bias->shape[bd] : 1) != 1 || a->shape[d] == 1;
        }
    }
    if (!fits)
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes the shapes and attrs the CPU kernel takes, not these");
    pardo_tensor *da = want_a ? pardo_kernel_output(ctx, 0, a->dtype, a->ndim, a->shape) : NULL;
    if (want_a && !da) return ctx->st->code;
    pardo_tensor *db = want_b ? pardo_kernel_output(ctx, 1, b->dtype, b->ndim, b->shape) : NULL;
    if (want_b && !db) return ctx->st->code;
    pardo_tensor *dbias = want_bias ? pardo_kernel_output(ctx, 2, bias->dtype, bias->ndim, bias->shape) : NULL;
    if (want_bias && !dbias) return ctx->st->code;

    /* with no batch dims (or the batch folded into A's rows) there is one product, written with beta 0;
     * otherwise each batch of Y adds its share into the A and B batches it came from, into zeros */
    fold_batch_into_rows(&p);
    const bool one = p.batch.numel == 1 && p.a_batch_nd == 0 && p.b_batch_nd == 0;
    if (!dy || !one) {
        if (da && pardo_device_memset_zero(da->mem->gpu_ptr, da->nbytes, ctx->st) != PARDO_OK) return ctx->st->code;
        if (db && pardo_device_memset_zero(db->mem->gpu_ptr, db->nbytes, ctx->st) != PARDO_OK) return ctx->st->code;
    }
    const int f64 = a->dtype == PARDO_F64;
    char err[256];
    int rc = 0;
    if (!dy) { /* dY all zeros: so are dA, dB and the bias's gradient */
        if (dbias && pardo_device_memset_zero(dbias->mem->gpu_ptr, dbias->nbytes, ctx->st) != PARDO_OK)
            return ctx->st->code;
        rc = pardo_cuda_sync_check("matmul_grad", err, sizeof err);
        return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
    }
    const char *pa = dev(ctx, a), *pb = dev(ctx, b), *pg = dev(ctx, dy), *pry = relu_y ? dev(ctx, relu_y) : NULL;
    if (!pa || !pb || !pg || (relu_y && !pry)) return ctx->st->code;
    const int64_t m = p.m, n = p.n, k = p.k;
    const double beta = one ? 0.0 : 1.0;
    const operand oa = {pa, m * k, AT_A}, ob = {pb, k * n, AT_B}, og = {pg, m * n, AT_Y};
    if (da) {
        const operand od = {da->mem->gpu_ptr, m * k, AT_A};
        if (!p.ta) /* dA [m, k] = dY op(B)^T */
            rc = products(&p.batch, f64, false, !p.tb, m, k, n, og, ob, od, beta, err, sizeof err);
        else /* dA [k, m] = op(B) dY^T */
            rc = products(&p.batch, f64, p.tb, true, k, m, n, ob, og, od, beta, err, sizeof err);
        if (!rc && relu_y) rc = pardo_cuda_launch_relu_mask(f64, da->mem->gpu_ptr, pry, da->numel, err, sizeof err);
        if (!rc && dbias)
            rc = pardo_cuda_launch_sum_to(f64, da->mem->gpu_ptr, a->ndim, a->shape, keep, dbias->mem->gpu_ptr, err,
                                          sizeof err);
    }
    if (!rc && db) {
        const operand od = {db->mem->gpu_ptr, k * n, AT_B};
        if (!p.tb) /* dB [k, n] = op(A)^T dY */
            rc = products(&p.batch, f64, !p.ta, false, k, n, m, oa, og, od, beta, err, sizeof err);
        else /* dB [n, k] = dY^T op(A) */
            rc = products(&p.batch, f64, true, p.ta, n, k, m, og, oa, od, beta, err, sizeof err);
    }
    if (!rc) rc = pardo_cuda_sync_check("matmul_grad", err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}
