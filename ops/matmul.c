/* matmul.c - matrix product like numpy.matmul (float32, float64): 2-D,
 * 1-D operands promoted as numpy does (A [K] is [1, K] and B [K] is [K, 1],
 * the added dim dropped from the result), and N-D operands as stacks of
 * matrices whose batch dims broadcast. transpose_a / transpose_b transpose
 * the last two dims of an operand before the product; they need that
 * operand to have rank >= 2. Plain loops in a cache-friendly order, no BLAS. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernel_util.h"
#include "op.h"

static const pardo_arg_def ab_in[] = {
    {"A", "left operand [..., M, K] (or [K])", false, false},
    {"B", "right operand [..., K, N] (or [K])", false, false},
};
static const pardo_arg_def y_out[] = {{"Y", "product [broadcast batch..., M, N]", false, false}};
static const pardo_attr_def matmul_attrs[] = {
    {"transpose_a", PARDO_ATTR_BOOL, "false", "use A with its last two dims swapped"},
    {"transpose_b", PARDO_ATTR_BOOL, "false", "use B with its last two dims swapped"},
};
static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

/* The matrix view of the two operands: M, K, N and their batch shapes. */
typedef struct mm_dims {
    int64_t m, ka, kb, n;             // sizes as A and B give them; -1 at inference: run time
    int a_batch_nd, b_batch_nd;       // batch ranks
    const int64_t *a_batch, *b_batch; // batch shapes (borrowed)
    bool a_vec, b_vec;                // 1-D operands
} mm_dims;

static int matmul_attrs_get(const pardo_op *op, bool *ta, bool *tb, pardo_status *st) {
    int rc = pardo_attr_bool(op, "transpose_a", false, ta, st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(op, "transpose_b", false, tb, st);
    return rc;
}

/* Reads M, K, N off the shapes, or PARDO_ESHAPE / PARDO_EINVAL when a rank
 * does not fit. Does not compare the two K. */
static int mm_dims_get(int a_nd, const int64_t *a, int b_nd, const int64_t *b, bool ta, bool tb, mm_dims *d,
                       pardo_status *st) {
    char s[128];
    if (a_nd < 1)
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'A' has shape %s, expected rank >= 1",
                            pardo_shape_str(a_nd, a, s, sizeof s));
    if (b_nd < 1)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'B' has shape %s, expected rank >= 1",
                            pardo_shape_str(b_nd, b, s, sizeof s));
    if (ta && a_nd < 2)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'transpose_a' is true, expected input 0 'A' of rank >= 2 (got shape %s)",
                            pardo_shape_str(a_nd, a, s, sizeof s));
    if (tb && b_nd < 2)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'transpose_b' is true, expected input 1 'B' of rank >= 2 (got shape %s)",
                            pardo_shape_str(b_nd, b, s, sizeof s));
    d->a_vec = a_nd == 1;
    d->b_vec = b_nd == 1;
    if (d->a_vec) {
        d->m = 1;
        d->ka = a[0];
    } else {
        d->m = ta ? a[a_nd - 1] : a[a_nd - 2];
        d->ka = ta ? a[a_nd - 2] : a[a_nd - 1];
    }
    if (d->b_vec) {
        d->kb = b[0];
        d->n = 1;
    } else {
        d->kb = tb ? b[b_nd - 1] : b[b_nd - 2];
        d->n = tb ? b[b_nd - 2] : b[b_nd - 1];
    }
    d->a_batch_nd = a_nd > 2 ? a_nd - 2 : 0;
    d->b_batch_nd = b_nd > 2 ? b_nd - 2 : 0;
    d->a_batch = a;
    d->b_batch = b;
    return PARDO_OK;
}

static int k_mismatch(int a_nd, const int64_t *a, int b_nd, const int64_t *b, bool ta, bool tb, const mm_dims *d,
                      pardo_status *st) {
    char sa[128], sb[128];
    return pardo_errorf(st, PARDO_ESHAPE, "inner dims differ: A %s%s has K = %lld, B %s%s has K = %lld",
                        pardo_shape_str(a_nd, a, sa, sizeof sa), ta ? " (transposed)" : "", (long long)d->ka,
                        pardo_shape_str(b_nd, b, sb, sizeof sb), tb ? " (transposed)" : "", (long long)d->kb);
}

/* Appends M and N (where not dropped for a 1-D operand) after the batch dims
 * already in shape[0..*nd). */
static void mm_out_tail(const mm_dims *d, int64_t *shape, int *nd) {
    if (!d->a_vec) shape[(*nd)++] = d->m;
    if (!d->b_vec) shape[(*nd)++] = d->n;
}

static int matmul_infer(pardo_infer_ctx *ctx) {
    const pardo_type *a = ctx->in[0], *b = ctx->in[1];
    bool ta, tb;
    int rc = matmul_attrs_get(ctx->op, &ta, &tb, ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(a, "input 0 'A'", float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (b->dtype != a->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'B' has dtype %s, expected %s like input 0 'A'",
                            pardo_dtype_name(b->dtype), pardo_dtype_name(a->dtype));
    pardo_type *y = &ctx->out[0];
    y->dtype = a->dtype;
    if (a->ndim < 0 || b->ndim < 0) {
        y->ndim = -1;
        return PARDO_OK;
    }
    mm_dims d;
    if ((rc = mm_dims_get(a->ndim, a->shape, b->ndim, b->shape, ta, tb, &d, ctx->st)) != PARDO_OK) return rc;
    if (d.ka >= 0 && d.kb >= 0 && d.ka != d.kb)
        return k_mismatch(a->ndim, a->shape, b->ndim, b->shape, ta, tb, &d, ctx->st);

    pardo_type ab = {.dtype = a->dtype, .ndim = d.a_batch_nd}, bb = {.dtype = a->dtype, .ndim = d.b_batch_nd};
    memcpy(ab.shape, d.a_batch, sizeof(int64_t) * (size_t)d.a_batch_nd);
    memcpy(bb.shape, d.b_batch, sizeof(int64_t) * (size_t)d.b_batch_nd);
    if ((rc = pardo_broadcast_types(&ab, &bb, y, ctx->st)) != PARDO_OK) {
        char sa[128], sb[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "batch dims of A %s and B %s do not broadcast",
                            pardo_shape_str(a->ndim, a->shape, sa, sizeof sa),
                            pardo_shape_str(b->ndim, b->shape, sb, sizeof sb));
    }
    y->dtype = a->dtype;
    mm_out_tail(&d, y->shape, &y->ndim);
    return PARDO_OK;
}

typedef void (*mm_fn)(const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k, bool ta, bool tb);

/* Defines NAME, one product C[m, n] = op(A) op(B) of contiguous matrices of
 * type T, A stored [m, k] ([k, m] when ta), B stored [k, n] ([n, k] when tb).
 * Loop order keeps the innermost loop on contiguous memory where it can:
 * i-k-j (rows of B and C), k-i-j when A is transposed, i-j-k dot products
 * when B is transposed (rows of B^T). Writes every element of C. */
#define MM_KERNEL(NAME, T)                                                                                             \
    static void NAME(const void *va, const void *vb, void *vc, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {    \
        const T *A = va, *B = vb;                                                                                      \
        T *C = vc;                                                                                                     \
        if (tb) {                                                                                                      \
            const int64_t ask = ta ? m : 1, asi = ta ? 1 : k; /* A(i, p) = A[i * asi + p * ask] */                     \
            for (int64_t i = 0; i < m; i++)                                                                            \
                for (int64_t j = 0; j < n; j++) {                                                                      \
                    const T *ar = A + i * asi, *br = B + j * k;                                                        \
                    T acc = 0;                                                                                         \
                    for (int64_t p = 0; p < k; p++) acc += ar[p * ask] * br[p];                                        \
                    C[i * n + j] = acc;                                                                                \
                }                                                                                                      \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t i = 0; i < m * n; i++) C[i] = 0;                                                                  \
        if (ta) {                                                                                                      \
            for (int64_t p = 0; p < k; p++)                                                                            \
                for (int64_t i = 0; i < m; i++) {                                                                      \
                    const T av = A[p * m + i];                                                                         \
                    const T *br = B + p * n;                                                                           \
                    T *cr = C + i * n;                                                                                 \
                    for (int64_t j = 0; j < n; j++) cr[j] += av * br[j];                                               \
                }                                                                                                      \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t i = 0; i < m; i++) {                                                                              \
            T *cr = C + i * n;                                                                                         \
            for (int64_t p = 0; p < k; p++) {                                                                          \
                const T av = A[i * k + p];                                                                             \
                const T *br = B + p * n;                                                                               \
                for (int64_t j = 0; j < n; j++) cr[j] += av * br[j];                                                   \
            }                                                                                                          \
        }                                                                                                              \
    }

MM_KERNEL(mm_f32, float)
MM_KERNEL(mm_f64, double)

static int matmul_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    bool ta, tb;
    int rc = matmul_attrs_get(ctx->op, &ta, &tb, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (a->dtype != b->dtype || !pardo_dtype_is_float(a->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs have dtypes %s and %s, expected float32 or float64 for both",
                            pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype));
    mm_dims d;
    if ((rc = mm_dims_get(a->ndim, a->shape, b->ndim, b->shape, ta, tb, &d, ctx->st)) != PARDO_OK) return rc;
    if (d.ka != d.kb) return k_mismatch(a->ndim, a->shape, b->ndim, b->shape, ta, tb, &d, ctx->st);

    pardo_bcast2 batch;
    if ((rc = pardo_bcast2_plan(d.a_batch_nd, d.a_batch, d.b_batch_nd, d.b_batch, &batch, ctx->st)) != PARDO_OK) {
        char sa[128], sb[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "batch dims of A %s and B %s do not broadcast",
                            pardo_shape_str(a->ndim, a->shape, sa, sizeof sa),
                            pardo_shape_str(b->ndim, b->shape, sb, sizeof sb));
    }
    int64_t shape[PARDO_MAX_DIMS];
    int nd = batch.ndim;
    memcpy(shape, batch.shape, sizeof(int64_t) * (size_t)nd);
    mm_out_tail(&d, shape, &nd);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, a->dtype, nd, shape);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;

    const int64_t m = d.m, n = d.n, k = d.ka, a_mat = m * k, b_mat = k * n, y_mat = m * n;
    const size_t es = pardo_dtype_size(a->dtype);
    const char *pa = pardo_tensor_data(a), *pb = pardo_tensor_data(b);
    char *py = pardo_tensor_data(y);
    mm_fn mm = a->dtype == PARDO_F32 ? mm_f32 : mm_f64;
    pardo_odo o;
    pardo_odo_init(&o, batch.nd, batch.dims, batch.sa, batch.sb);
    for (int64_t i = 0; i < batch.numel; i++, pardo_odo_next(&o))
        mm(pa + (size_t)(o.off[0] * a_mat) * es, pb + (size_t)(o.off[1] * b_mat) * es, py + (size_t)(i * y_mat) * es, m,
           n, k, ta, tb);
    return PARDO_OK;
}

const pardo_op_def pardo_op_matmul = {
    .type = "matmul",
    .doc = "Y = A @ B like numpy.matmul (1-D, 2-D, batched N-D with broadcast batch dims)",
    .inputs = ab_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = matmul_attrs,
    .n_attrs = 2,
    .infer = matmul_infer,
    .cpu = matmul_cpu,
};
