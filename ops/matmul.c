/* matmul.c - matrix product like numpy.matmul (float32, float64): 2-D,
 * 1-D operands promoted as numpy does (A [K] is [1, K] and B [K] is [K, 1],
 * the added dim dropped from the result), and N-D operands as stacks of
 * matrices whose batch dims broadcast. transpose_a / transpose_b transpose
 * the last two dims of an operand before the product; they need that
 * operand to have rank >= 2. Each product goes through ops/gemm.h (the own
 * packed kernel, or BLAS), its rows split over the threads of block 0.
 * An optional third input, a bias, is added to the product (broadcast to
 * Y's shape), and attr activation "relu" (or "gelu") applies relu (gelu)
 * after it: the form the fusion pass (transpiler/fuse.c) gives matmul ->
 * add -> relu (gelu), run as one GEMM whose epilogue adds the bias and
 * applies the activation to each row block
 * while it is in cache (a [N] bias; any other bias shape after the
 * product), with the bits of the ops one after another.
 * matmul_grad: dA and dB, summed over the batches an operand was broadcast
 * to; optionally dA leaves through the mask of a relu whose output is
 * input 4 (relu_grad fused in) and the bias gradient of an add before that
 * relu (input 5, the bias) is output 2 (add_grad fused in). Both have a
 * CUDA kernel in CUDA builds (ops/cuda/matmul_cuda.c, through cuBLAS). */
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "kernel_util.h"
#include "kernels.h"
#include "op.h"
#include "vmath.h"

static const pardo_arg_def ab_in[] = {
    {"A", "left operand [..., M, K] (or [K])", false, false},
    {"B", "right operand [..., K, N] (or [K])", false, false},
    {"bias", "added to the product, broadcast to Y's shape (\"\" or left out: none)", true, false},
};
static const pardo_arg_def y_out[] = {{"Y", "product [broadcast batch..., M, N]", false, false}};
static const pardo_attr_def matmul_attrs[] = {
    {"transpose_a", PARDO_ATTR_BOOL, "false", "use A with its last two dims swapped"},
    {"transpose_b", PARDO_ATTR_BOOL, "false", "use B with its last two dims swapped"},
    {"activation", PARDO_ATTR_STRING, "\"none\"", "applied after the bias: \"none\", \"relu\" or \"gelu\" (the exact "
                                                 "form, as the gelu op)"},
};
static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};
/* what matmul's forward takes: the floats, and the integers of ONNX MatMul (wrapping; no bias nor activation) */
static const pardo_dtype forward_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_U32, PARDO_U64};

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

/* The activation attr: none, relu or gelu; PARDO_EINVAL for any other word. */
static int matmul_activation(const pardo_op *op, pardo_gemm_act *act, pardo_status *st) {
    const char *name;
    int rc = pardo_attr_string(op, "activation", "none", &name, st);
    if (rc != PARDO_OK) return rc;
    *act = strcmp(name, "relu") == 0   ? PARDO_GEMM_ACT_RELU
           : strcmp(name, "gelu") == 0 ? PARDO_GEMM_ACT_GELU
                                       : PARDO_GEMM_ACT_NONE;
    if (*act == PARDO_GEMM_ACT_NONE && strcmp(name, "none") != 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'activation' is \"%s\", expected \"none\", \"relu\" or \"gelu\"",
                            name);
    return PARDO_OK;
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

/* The bias (input 2), where given: Y's dtype, broadcasting to Y's shape
 * without growing it. */
static int bias_infer(pardo_infer_ctx *ctx, const pardo_type *y) {
    pardo_gemm_act act;
    int rc = matmul_activation(ctx->op, &act, ctx->st);
    const pardo_type *bias = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (rc != PARDO_OK || !bias) return rc;
    char sb[128], sy[128];
    if (bias->dtype != y->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'bias' has dtype %s, expected %s like the product",
                            pardo_dtype_name(bias->dtype), pardo_dtype_name(y->dtype));
    if (bias->ndim < 0 || y->ndim < 0) return PARDO_OK;
    pardo_type z;
    bool fits = bias->ndim <= y->ndim && pardo_broadcast_types(y, bias, &z, ctx->st) == PARDO_OK && z.ndim == y->ndim;
    for (int k = 0; fits && k < y->ndim; k++) fits = y->shape[k] < 0 || z.shape[k] == y->shape[k];
    if (!fits)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'bias' has shape %s, which does not broadcast to the "
                            "product's %s", pardo_shape_str(bias->ndim, bias->shape, sb, sizeof sb),
                            pardo_shape_str(y->ndim, y->shape, sy, sizeof sy));
    return PARDO_OK;
}

/* An integer product takes no bias and no activation (ONNX MatMul has neither; they are pardo's fusion's). */
static int int_product_plain(const pardo_op *op, bool has_bias, pardo_status *st) {
    pardo_gemm_act act;
    int rc = matmul_activation(op, &act, st);
    if (rc == PARDO_OK && (act != PARDO_GEMM_ACT_NONE || has_bias))
        rc = pardo_errorf(st, PARDO_EINVAL, "an integer matmul takes no bias and no activation");
    return rc;
}

static int matmul_infer(pardo_infer_ctx *ctx) {
    const pardo_type *a = ctx->in[0], *b = ctx->in[1];
    bool ta, tb;
    int rc = matmul_attrs_get(ctx->op, &ta, &tb, ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(a, "input 0 'A'", forward_dtypes, 6, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (b->dtype != a->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'B' has dtype %s, expected %s like input 0 'A'",
                            pardo_dtype_name(b->dtype), pardo_dtype_name(a->dtype));
    if (!pardo_dtype_is_float(a->dtype) &&
        (rc = int_product_plain(ctx->op, ctx->n_in > 2 && ctx->in[2], ctx->st)) != PARDO_OK)
        return rc;
    pardo_type *y = &ctx->out[0];
    y->dtype = a->dtype;
    if (a->ndim < 0 || b->ndim < 0) {
        y->ndim = -1;
        return bias_infer(ctx, y);
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
    return bias_infer(ctx, y);
}

/* One product C[m, n] = op(A) op(B) of contiguous matrices of dtype dt
 * (ops/gemm.h), A stored [m, k] ([k, m] when ta), B stored [k, n] ([n, k]
 * when tb); with add_to the product is added to C instead of replacing it
 * (the gradient kernels sum over broadcast batches). pardo_gemm_run (mm)
 * runs it, its rows of C split over ctx->nthreads threads. */
static pardo_gemm mm_desc(pardo_dtype dt, const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k,
                          bool ta, bool tb, bool add_to) {
    return (pardo_gemm){.dtype = dt, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .a = a, .lda = ta ? m : k, .b = b,
                        .ldb = tb ? k : n, .c = c, .ldc = n, .accumulate = add_to};
}

static int mm(pardo_kernel_ctx *ctx, pardo_dtype dt, const void *a, const void *b, void *c, int64_t m, int64_t n,
              int64_t k, bool ta, bool tb, bool add_to) {
    pardo_gemm g = mm_desc(dt, a, b, c, m, n, k, ta, tb, add_to);
    return pardo_gemm_run(ctx, &g, PARDO_GEMM_AUTO);
}

/* The epilogue a forward product may carry (pardo_matmul_epilogue_cpu). */
typedef struct mm_epilogue {
    const void *bias;   // [N] of Y's dtype, or NULL
    pardo_gemm_act act; // after the bias
} mm_epilogue;

/* What the forward and gradient kernels share: attrs, matrix dims, the
 * batch broadcast and Y's shape, checked against the run-time shapes. */
typedef struct mm_plan {
    bool ta, tb;
    mm_dims d;
    pardo_bcast2 batch;              // batch dims of A (sa) and B (sb) broadcast
    int y_nd;                        // rank of Y
    int64_t y_shape[PARDO_MAX_DIMS]; // Y's shape
} mm_plan;

static int mm_plan_make(const pardo_kernel_ctx *ctx, const pardo_tensor *a, const pardo_tensor *b, mm_plan *p) {
    int rc = matmul_attrs_get(ctx->op, &p->ta, &p->tb, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (a->dtype != b->dtype || !pardo_dtype_listed(a->dtype, forward_dtypes, 6))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs have dtypes %s and %s, expected one of float32, float64, "
                            "int32, int64, uint32 or uint64 for both", pardo_dtype_name(a->dtype),
                            pardo_dtype_name(b->dtype));
    mm_dims *d = &p->d;
    if ((rc = mm_dims_get(a->ndim, a->shape, b->ndim, b->shape, p->ta, p->tb, d, ctx->st)) != PARDO_OK) return rc;
    if (d->ka != d->kb) return k_mismatch(a->ndim, a->shape, b->ndim, b->shape, p->ta, p->tb, d, ctx->st);
    if (pardo_bcast2_plan(d->a_batch_nd, d->a_batch, d->b_batch_nd, d->b_batch, &p->batch, ctx->st) != PARDO_OK) {
        char sa[128], sb[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "batch dims of A %s and B %s do not broadcast",
                            pardo_shape_str(a->ndim, a->shape, sa, sizeof sa),
                            pardo_shape_str(b->ndim, b->shape, sb, sizeof sb));
    }
    p->y_nd = p->batch.ndim;
    memcpy(p->y_shape, p->batch.shape, sizeof(int64_t) * (size_t)p->y_nd);
    mm_out_tail(d, p->y_shape, &p->y_nd);
    return PARDO_OK;
}

/* What a matmul of block 0 keeps in its op state: whether its B may be kept
 * packed (decided on its first run) and the packed copy. */
typedef struct kept_state {
    bool eligible;
    pardo_gemm_packed packed;
} kept_state;

static void kept_state_free(void *p) {
    if (!p) return;
    pardo_gemm_packed_clear(&((kept_state *)p)->packed);
    free(p);
}

/* The packed B a matmul of block 0 keeps from run to run (ops/gemm.h,
 * pardo_gemm_packed): for a 2-D B on the CPU that is a param or a constant
 * (written only through kernels and the tensor API, which change its
 * version; a feed's tensor belongs to the caller, who may write it in
 * place), where one thread runs the op at a time (not in a parallel_do's
 * parts, which share the op). NULL where none is kept. */
static pardo_gemm_packed *kept_b(pardo_kernel_ctx *ctx, const pardo_tensor *b) {
    if (!ctx->state || !ctx->prog || ctx->block != 0 || ctx->device != PARDO_DEVICE_CPU || b->ndim != 2 || !b->mem)
        return NULL;
    pardo_op_state *slot = ctx->state;
    if (slot->data && slot->free_fn != kept_state_free) return NULL;
    if (!slot->data) {
        kept_state *k = calloc(1, sizeof(*k));
        if (!k) return NULL;
        const pardo_graph_var *v = pardo_program_lookup_var(ctx->prog, 0, ctx->op->in[1], NULL);
        k->eligible = v && (v->role == PARDO_VAR_PARAM || (v->role == PARDO_VAR_TEMP && v->value));
        slot->data = k;
        slot->free_fn = kept_state_free;
    }
    kept_state *k = slot->data;
    return k->eligible ? &k->packed : NULL;
}

/* One integer product of a batch: C[m, n] = op(A) op(B), rows [r0, r1) (int_rows). */
typedef struct int_mm {
    const void *a, *b;
    void *c;
    int64_t m, n, k;
    bool ta, tb;
} int_mm;

/* Defines int_rows_SUF: C's rows [r0, r1) of an int_mm of element type T, summed in U (its unsigned twin:
 * wrapping modulo 2^bits, as NumPy's and ONNX Runtime's integer products do), k outermost within a row so that
 * B is read along its rows. */
#define INT_ROWS(SUF, T, U)                                                                                            \
    static void int_rows_##SUF(void *arg, int64_t r0, int64_t r1) {                                                    \
        const int_mm *j = arg;                                                                                         \
        const T *a = j->a, *b = j->b;                                                                                  \
        T *c = j->c;                                                                                                   \
        for (int64_t i = r0; i < r1; i++) {                                                                            \
            U *row = (U *)(void *)(c + i * j->n);                                                                      \
            for (int64_t q = 0; q < j->n; q++) row[q] = 0;                                                             \
            for (int64_t p = 0; p < j->k; p++) {                                                                       \
                const U av = (U)(j->ta ? a[p * j->m + i] : a[i * j->k + p]);                                           \
                for (int64_t q = 0; q < j->n; q++) row[q] += av * (U)(j->tb ? b[q * j->k + p] : b[p * j->n + q]);      \
            }                                                                                                          \
        }                                                                                                              \
    }
INT_ROWS(i32, int32_t, uint32_t)
INT_ROWS(i64, int64_t, uint64_t)
INT_ROWS(u32, uint32_t, uint32_t)
INT_ROWS(u64, uint64_t, uint64_t)

/* Y = op(A) op(B) for every batch of integers. */
static int matmul_forward_int(pardo_kernel_ctx *ctx, const mm_plan *p, pardo_tensor *y) {
    static void (*const rows[PARDO_DTYPE_COUNT])(void *, int64_t, int64_t) = {
        [PARDO_I32] = int_rows_i32, [PARDO_I64] = int_rows_i64, [PARDO_U32] = int_rows_u32, [PARDO_U64] = int_rows_u64};
    const pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    const int64_t m = p->d.m, n = p->d.n, k = p->d.ka;
    const size_t es = pardo_dtype_size(a->dtype);
    pardo_odo o;
    pardo_odo_init(&o, p->batch.nd, p->batch.dims, p->batch.sa, p->batch.sb);
    for (int64_t i = 0; i < p->batch.numel; i++, pardo_odo_next(&o)) {
        int_mm j = {(const char *)pardo_tensor_data(a) + (size_t)(o.off[0] * m * k) * es,
                    (const char *)pardo_tensor_data(b) + (size_t)(o.off[1] * k * n) * es,
                    (char *)pardo_tensor_data(y) + (size_t)(i * m * n) * es, m, n, k, p->ta, p->tb};
        int rc = pardo_parallel_for(ctx, m, rows[a->dtype], &j);
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

/* Y = op(A) op(B) for every batch, each product then given the epilogue ep
 * (NULL: none). */
static int matmul_forward(pardo_kernel_ctx *ctx, const mm_plan *pp, const mm_epilogue *ep) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    const mm_plan p = *pp;
    int rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, a->dtype, p.y_nd, p.y_shape);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;
    if (!pardo_dtype_is_float(a->dtype)) return matmul_forward_int(ctx, &p, y);

    const int64_t m = p.d.m, n = p.d.n, k = p.d.ka, a_mat = m * k, b_mat = k * n, y_mat = m * n;
    const size_t es = pardo_dtype_size(a->dtype);
    const char *pa = pardo_tensor_data(a), *pb = pardo_tensor_data(b);
    char *py = pardo_tensor_data(y);
    pardo_gemm_packed *kept = kept_b(ctx, b);
    pardo_odo o;
    pardo_odo_init(&o, p.batch.nd, p.batch.dims, p.batch.sa, p.batch.sb);
    for (int64_t i = 0; i < p.batch.numel; i++, pardo_odo_next(&o)) {
        pardo_gemm g = mm_desc(a->dtype, pa + (size_t)(o.off[0] * a_mat) * es, pb + (size_t)(o.off[1] * b_mat) * es,
                               py + (size_t)(i * y_mat) * es, m, n, k, p.ta, p.tb, false);
        g.bias = ep ? ep->bias : NULL;
        g.act = ep ? ep->act : PARDO_GEMM_ACT_NONE;
        g.b_packed = kept;
        g.b_version = b->mem->version;
        if ((rc = pardo_gemm_run(ctx, &g, PARDO_GEMM_AUTO)) != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

/* Y += bias broadcast to Y's shape, then the activation: the arithmetic of
 * the add and relu or gelu ops, for a bias the GEMM's epilogue does not take. */
static int add_bias_after(pardo_kernel_ctx *ctx, pardo_tensor *y, const pardo_tensor *bias, pardo_gemm_act act) {
    pardo_bcast2 p;
    int rc = pardo_bcast2_plan(y->ndim, y->shape, bias->ndim, bias->shape, &p, ctx->st);
    if (rc == PARDO_OK && !pardo_shape_equal(p.ndim, p.shape, y->ndim, y->shape)) {
        char sb[128], sy[128];
        rc = pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'bias' has shape %s, which does not broadcast to the "
                          "product's %s", pardo_shape_str(bias->ndim, bias->shape, sb, sizeof sb),
                          pardo_shape_str(y->ndim, y->shape, sy, sizeof sy));
    }
    if (rc != PARDO_OK || y->numel == 0) return rc;
    const int inner = p.nd - 1;
    const int64_t n = p.dims[inner], sb = p.sb[inner];
    pardo_odo o;
    pardo_odo_init(&o, inner, p.dims, p.sa, p.sb);
    for (int64_t base = 0; base < p.numel; base += n, pardo_odo_next(&o)) {
        if (y->dtype == PARDO_F32) {
            float *py = (float *)pardo_tensor_data(y) + base;
            const float *pb = (const float *)pardo_tensor_data(bias) + o.off[1];
            for (int64_t i = 0; i < n; i++) {
                const float v = py[i] + pb[i * sb];
                py[i] = act == PARDO_GEMM_ACT_RELU ? (v < 0 ? 0.0f : v) : act == PARDO_GEMM_ACT_GELU ? pardo_vgeluf(v) : v;
            }
        } else {
            double *py = (double *)pardo_tensor_data(y) + base;
            const double *pb = (const double *)pardo_tensor_data(bias) + o.off[1];
            for (int64_t i = 0; i < n; i++) {
                const double v = py[i] + pb[i * sb];
                py[i] = act == PARDO_GEMM_ACT_RELU ? (v < 0 ? 0.0 : v) : act == PARDO_GEMM_ACT_GELU ? pardo_gelu_f64(v) : v;
            }
        }
    }
    return PARDO_OK;
}

/* Y = act(op(A) op(B) + bias): a [N] bias of Y's dtype (and the activation)
 * go into the GEMM's epilogue; any other bias is added after the product. */
static int matmul_cpu(pardo_kernel_ctx *ctx) {
    mm_plan p;
    pardo_gemm_act act;
    const pardo_tensor *bias = ctx->n_in > 2 ? ctx->in[2] : NULL;
    int rc = mm_plan_make(ctx, ctx->in[0], ctx->in[1], &p);
    if (rc == PARDO_OK) rc = matmul_activation(ctx->op, &act, ctx->st);
    if (rc == PARDO_OK && !pardo_dtype_is_float(ctx->in[0]->dtype))
        rc = int_product_plain(ctx->op, bias != NULL, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (bias && (bias->is_array || bias->dtype != ctx->in[0]->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'bias' is %s %s, expected a tensor of %s like A",
                            bias->is_array ? "a tensor_array of" : "a tensor of", pardo_dtype_name(bias->dtype),
                            pardo_dtype_name(ctx->in[0]->dtype));
    /* the activation alone always fits the epilogue; a bias only as a [N] along Y's last dim */
    const bool in_epilogue = !bias || (!p.d.b_vec && bias->ndim == 1 && bias->shape[0] == p.d.n);
    mm_epilogue ep = {in_epilogue && bias ? pardo_tensor_data(bias) : NULL,
                      in_epilogue ? act : PARDO_GEMM_ACT_NONE};
    if ((rc = matmul_forward(ctx, &p, &ep)) != PARDO_OK || in_epilogue) return rc;
    return add_bias_after(ctx, ctx->out[0], bias, act);
}

/* matmul_grad reads A, B and dY, never Y: leave Y out, so that Y can be
 * freed after its forward readers. A bias input (an imported Gemm's) gets
 * its gradient as add's: add_grad("", bias, "", dY) sums dY to the bias's
 * shape. An activation has no gradient here (the fusion pass makes those
 * after autodiff). */
static int matmul_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    const pardo_op *f = req->fwd;
    pardo_gemm_act act;
    int rc = matmul_activation(f, &act, st);
    if (rc != PARDO_OK) return rc;
    if (act != PARDO_GEMM_ACT_NONE)
        return pardo_errorf(st, PARDO_ENOTSUP, "matmul with an activation has no gradient: write matmul, add and "
                            "relu or gelu (pardo run and pardo train fuse them after autodiff)");
    const bool has_bias = f->n_in > 2 && f->in[2][0];
    char bias_grad[512] = "";
    if (has_bias) snprintf(bias_grad, sizeof bias_grad, "%s", req->in_grads[2]);
    const char *dy = req->out_grads[0];
    char dy_copy[512];
    snprintf(dy_copy, sizeof dy_copy, "%s", dy);
    char bias[512] = "", name[300] = "";
    if (has_bias) snprintf(bias, sizeof bias, "%s", f->in[2]);
    if (f->name) snprintf(name, sizeof name, "%s@grad_bias", f->name);
    /* f may live in blk: everything taken from it is copied before blk->ops grows */
    if ((!has_bias || req->in_grads[0][0] || req->in_grads[1][0]) &&
        (rc = pardo_grad_wired_n(req, blk, 0, 1, 2, st)) != PARDO_OK) /* matmul_grad's layout: A, B, Y, dY */
        return rc;
    if (!bias_grad[0] || !dy_copy[0]) return PARDO_OK;
    pardo_op *g = pardo_block_add_op(blk, "add_grad", st);
    if (!g) return st->code;
    g->role = PARDO_OP_BACKWARD;
    if (name[0] && !(g->name = strdup(name))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    const char *in[] = {"", bias, "", dy_copy}, *out[] = {"", bias_grad};
    for (int k = 0; k < 4; k++)
        if (pardo_op_add_input(g, in[k], st) != PARDO_OK) return st->code;
    for (int k = 0; k < 2; k++)
        if (pardo_op_add_output(g, out[k], st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

const pardo_op_def pardo_op_matmul = {
    .type = "matmul",
    .doc = "Y = act(A @ B + bias) like numpy.matmul (1-D, 2-D, batched N-D with broadcast batch dims; bias and relu "
           "optional; float32, float64; int32, int64, uint32, uint64 wrapping, without bias or activation)",
    .inputs = ab_in,
    .n_inputs = 3,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = matmul_attrs,
    .n_attrs = 3,
    .infer = matmul_infer,
    .cpu = matmul_cpu,
    .cuda = pardo_cuda_matmul,
    .halves_in_f32 = true,
    .all_dtypes = true, /* uint32, uint64 (and the halves, through float32) */
    .grad = matmul_grad_build,
};

/* ---- matmul_grad ---- */

static const pardo_arg_def grad_in[] = {
    {"A", "the forward input A", false, false},
    {"B", "the forward input B", false, false},
    {"Y", "the forward output (not read: the backward pass leaves it out, \"\")", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
    {"relu_y", "the output of a relu whose input A is: dA leaves through its mask, relu_y > 0 ? dA : 0 (relu_grad "
               "fused in; \"\": none)", true, false},
    {"bias", "the bias of an add whose output relu read: output 2 is its gradient, the masked dA summed to its "
             "shape (add_grad fused in; needs relu_y; \"\": none)", true, false},
};
static const pardo_arg_def grad_out[] = {
    {"dA", "gradient of A, A's dtype and shape (masked by relu_y where given)", true, false},
    {"dB", "gradient of B, B's dtype and shape", true, false},
    {"dbias", "gradient of input 5 'bias', its dtype and shape", true, false},
};

static int matmul_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *a = ctx->in[0], *b = ctx->in[1], *dy = ctx->n_in > 3 ? ctx->in[3] : NULL,
                     *ry = ctx->n_in > 4 ? ctx->in[4] : NULL, *bias = ctx->n_in > 5 ? ctx->in[5] : NULL;
    bool ta, tb;
    pardo_gemm_act act;
    int rc = matmul_attrs_get(ctx->op, &ta, &tb, ctx->st);
    if (rc == PARDO_OK) rc = matmul_activation(ctx->op, &act, ctx->st);
    if (rc == PARDO_OK && act != PARDO_GEMM_ACT_NONE)
        rc = pardo_errorf(ctx->st, PARDO_EINVAL, "attr 'activation' is \"%s\": matmul_grad is the gradient of a "
                          "matmul without one (a relu after A's producer is input 4 'relu_y')",
                          act == PARDO_GEMM_ACT_RELU ? "relu" : "gelu");
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 0, a, "input 0 'A'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 1, b, "input 1 'B'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(a, "input 0 'A'", float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (b->dtype != a->dtype || (dy && dy->dtype != a->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs 'B' and 'dY' have dtypes %s and %s, expected %s like 'A'",
                            pardo_dtype_name(b->dtype), dy ? pardo_dtype_name(dy->dtype) : "(absent)",
                            pardo_dtype_name(a->dtype));
    if (ry && ry->dtype != a->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 4 'relu_y' has dtype %s, expected %s like 'A'",
                            pardo_dtype_name(ry->dtype), pardo_dtype_name(a->dtype));
    if (bias && (!ry || bias->dtype != a->dtype))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 5 'bias' %s", !ry ? "needs input 4 'relu_y'"
                                                                            : "has another dtype than 'A'");
    ctx->out[0] = *a;
    if (ctx->n_out > 1) ctx->out[1] = *b;
    if (ctx->n_out > 2) {
        if (!bias && pardo_op_wants_output(ctx->op, 2))
            return pardo_errorf(ctx->st, PARDO_EINVAL, "output 2 'dbias' needs input 5 'bias'");
        if (bias) ctx->out[2] = *bias;
    }
    return PARDO_OK;
}

/* The gradient of one product Y = op(A) op(B) (m, n, k as mm), into dA
 * and dB (either NULL: not wanted), added to them with add_to: with op(A)
 * [m, k] and op(B) [k, n], d op(A) = dY op(B)^T and d op(B) = op(A)^T dY,
 * each stored transposed back where the operand was. */
static int mm_grad(pardo_kernel_ctx *ctx, pardo_dtype dt, const void *a, const void *b, const void *dy, void *da,
                   void *db, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool add_a, bool add_b,
                   const void *da_relu_y) {
    int rc = PARDO_OK;
    if (da) {
        pardo_gemm g = !ta ? mm_desc(dt, dy, b, da, m, k, n, false, !tb, add_a)  /* dA [m, k] = dY op(B)^T */
                           : mm_desc(dt, b, dy, da, k, m, n, tb, true, add_a); /* dA [k, m] = op(B) dY^T */
        g.relu_y = da_relu_y;
        rc = pardo_gemm_run(ctx, &g, PARDO_GEMM_AUTO);
    }
    if (db && rc == PARDO_OK) {
        if (!tb) rc = mm(ctx, dt, a, dy, db, k, n, m, !ta, false, add_b); /* dB [k, n] = op(A)^T dY */
        else rc = mm(ctx, dt, dy, a, db, n, k, m, true, ta, add_b);       /* dB [n, k] = dY^T op(A) */
    }
    return rc;
}

/* Whether the batch plan visits each batch of an operand (its merged batch strides) once: no dim of more than
 * one batch broadcasts it (stride 0). */
static bool once_a_batch(const pardo_bcast2 *batch, const int64_t *strides) {
    for (int d = 0; d < batch->nd; d++)
        if (batch->dims[d] > 1 && strides[d] == 0) return false;
    return true;
}

/* dA = relu_y > 0 ? dA : 0, relu_grad's arithmetic, for the products whose
 * GEMM epilogue does not take the mask (batch dims, no dY). */
static void relu_mask_after(pardo_tensor *da, const pardo_tensor *relu_y) {
    if (da->dtype == PARDO_F32) {
        float *d = pardo_tensor_data(da);
        const float *y = pardo_tensor_data(relu_y);
        for (int64_t i = 0; i < da->numel; i++) d[i] = y[i] > 0 ? d[i] : 0.0f;
    } else {
        double *d = pardo_tensor_data(da);
        const double *y = pardo_tensor_data(relu_y);
        for (int64_t i = 0; i < da->numel; i++) d[i] = y[i] > 0 ? d[i] : 0.0;
    }
}

/* What follows the products: relu_y's mask on dA where the GEMM did not
 * apply it, then the bias's gradient (output 2) summed from dA. */
static int finish_grad(pardo_kernel_ctx *ctx, pardo_tensor *da, const pardo_tensor *relu_y, const pardo_tensor *bias,
                       bool masked) {
    if (da && relu_y && !masked) relu_mask_after(da, relu_y);
    if (!bias || !pardo_kernel_wants_output(ctx, 2)) return PARDO_OK;
    pardo_tensor *dbias = pardo_kernel_output(ctx, 2, bias->dtype, bias->ndim, bias->shape);
    if (!dbias) return ctx->st->code;
    if (da->numel == 0) {
        pardo_tensor_zero(dbias);
        return PARDO_OK;
    }
    return pardo_sum_to_shape(da->dtype, pardo_tensor_data(da), da->ndim, da->shape, pardo_tensor_data(dbias),
                              bias->ndim, bias->shape, 1.0, ctx->st);
}

/* matmul_grad's kernel: dA and dB; with relu_y (input 4), dA leaves through
 * relu_grad's mask, in the GEMM's epilogue where there is one product and
 * dY is given, after it otherwise; with bias (input 5), output 2 is the
 * masked dA summed to the bias's shape, as add_grad sums it. */
static int matmul_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1], *dy = ctx->n_in > 3 ? ctx->in[3] : NULL,
                 *relu_y = ctx->n_in > 4 ? ctx->in[4] : NULL, *bias = ctx->n_in > 5 ? ctx->in[5] : NULL;
    const bool want_a = pardo_kernel_wants_output(ctx, 0), want_b = pardo_kernel_wants_output(ctx, 1),
               want_bias = bias && pardo_kernel_wants_output(ctx, 2);
    if (!want_a && !want_b && !want_bias) return PARDO_OK;
    if (want_bias && !want_a)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "output 2 'dbias' is summed from output 0 'dA': name it too");
    mm_plan p;
    int rc = mm_plan_make(ctx, a, b, &p);
    if (rc != PARDO_OK) return rc;
    if (dy && (dy->dtype != a->dtype || !pardo_shape_equal(dy->ndim, dy->shape, p.y_nd, p.y_shape))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dY' is %s %s, expected %s %s like the product",
                            pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            pardo_dtype_name(a->dtype), pardo_shape_str(p.y_nd, p.y_shape, s2, sizeof s2));
    }
    /* each batch of Y adds its share into the A and B batches it came from;
     * with no batch dims there is one product, written without zeroing first,
     * and an operand that no batch dim broadcasts gets one product a batch
     * (attention's), written so too; a broadcast one is zeroed and summed */
    const bool one = p.batch.numel == 1 && p.d.a_batch_nd == 0 && p.d.b_batch_nd == 0;
    const bool a_once = one || once_a_batch(&p.batch, p.batch.sa), b_once = one || once_a_batch(&p.batch, p.batch.sb);
    if (relu_y && (relu_y->is_array || relu_y->dtype != a->dtype ||
                   !pardo_shape_equal(relu_y->ndim, relu_y->shape, a->ndim, a->shape))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 4 'relu_y' is %s %s, expected %s %s like 'A'",
                            pardo_dtype_name(relu_y->dtype), pardo_shape_str(relu_y->ndim, relu_y->shape, s1, sizeof s1),
                            pardo_dtype_name(a->dtype), pardo_shape_str(a->ndim, a->shape, s2, sizeof s2));
    }
    if (want_bias && (bias->is_array || bias->dtype != a->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 5 'bias' is not a tensor of %s like 'A'",
                            pardo_dtype_name(a->dtype));
    const bool masked_in_gemm = relu_y && dy && one;
    pardo_tensor *da = want_a ? pardo_kernel_output(ctx, 0, a->dtype, a->ndim, a->shape) : NULL;
    if (want_a && !da) return ctx->st->code;
    pardo_tensor *db = want_b ? pardo_kernel_output(ctx, 1, b->dtype, b->ndim, b->shape) : NULL;
    if (want_b && !db) return ctx->st->code;
    if (da && (!dy || !a_once || p.batch.numel == 0)) pardo_tensor_zero(da);
    if (db && (!dy || !b_once || p.batch.numel == 0)) pardo_tensor_zero(db);
    if (!dy) return finish_grad(ctx, da, relu_y, bias, false);

    const int64_t m = p.d.m, n = p.d.n, k = p.d.ka, a_mat = m * k, b_mat = k * n, y_mat = m * n;
    const size_t es = pardo_dtype_size(a->dtype);
    const char *pa = pardo_tensor_data(a), *pb = pardo_tensor_data(b), *pg = pardo_tensor_data(dy);
    char *pda = da ? pardo_tensor_data(da) : NULL, *pdb = db ? pardo_tensor_data(db) : NULL;
    pardo_odo o;
    pardo_odo_init(&o, p.batch.nd, p.batch.dims, p.batch.sa, p.batch.sb);
    for (int64_t i = 0; i < p.batch.numel; i++, pardo_odo_next(&o)) {
        const size_t ao = (size_t)(o.off[0] * a_mat) * es, bo = (size_t)(o.off[1] * b_mat) * es;
        if ((rc = mm_grad(ctx, a->dtype, pa + ao, pb + bo, pg + (size_t)(i * y_mat) * es, pda ? pda + ao : NULL,
                          pdb ? pdb + bo : NULL, m, n, k, p.ta, p.tb, !a_once, !b_once,
                          masked_in_gemm ? pardo_tensor_data(relu_y) : NULL)) != PARDO_OK)
            return rc;
    }
    return finish_grad(ctx, da, relu_y, bias, masked_in_gemm);
}

const pardo_op_def pardo_op_matmul_grad = {
    .type = "matmul_grad",
    .doc = "dA = dY B^T, dB = A^T dY (transposes, 1-D operands and broadcast batch dims undone; gradient of matmul; "
           "float32, float64)",
    .inputs = grad_in,
    .n_inputs = 6,
    .outputs = grad_out,
    .n_outputs = 3,
    .attrs = matmul_attrs,
    .n_attrs = 3,
    .infer = matmul_grad_infer,
    .cpu = matmul_grad_cpu,
    .cuda = pardo_cuda_matmul_grad,
};
