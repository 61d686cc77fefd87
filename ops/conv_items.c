/* conv_items.c - the item runner, products and gradient outputs of the
 * GEMM-form convolutions (see conv_items.h). */
#include "conv_items.h"

#include <string.h>

#include "gemm.h"
#include "kernel_util.h"
#include "nn_util.h"
#include "scratch.h"

/* The context an item's products run with: the kernel's inline, else one thread; st its own. */
static pardo_kernel_ctx item_ctx(const pardo_conv_items *it, pardo_status *st) {
    pardo_kernel_ctx c = *it->ctx;
    if (!it->inline_run) {
        c.nthreads = 1;
        c.idle_help = false;
    }
    c.st = st;
    return c;
}

static void run_items(void *arg, int64_t begin, int64_t end) {
    pardo_conv_items *it = arg;
    pardo_status st;
    pardo_kernel_ctx c = item_ctx(it, &st);
    for (int64_t i = begin; i < end && !atomic_load(&it->failed); i++)
        if (it->item(it->job, &c, i) != PARDO_OK && !atomic_exchange(&it->failed, true)) it->st = st;
}

/* The first failure into the kernel's status. */
static int items_result(pardo_conv_items *it, int rc) {
    if (rc == PARDO_OK && atomic_load(&it->failed)) {
        *it->ctx->st = it->st;
        rc = it->st.code;
    }
    return rc;
}

int pardo_conv_items_run(pardo_conv_items *it, double macs, double min_macs) {
    it->inline_run = it->n <= 1 || it->ctx->nthreads <= 1 || macs < min_macs;
    atomic_init(&it->failed, false);
    if (it->inline_run) return items_result(it, (run_items(it, 0, it->n), PARDO_OK));
    return items_result(it, pardo_parallel_for_blocks(it->ctx, it->n, 1, run_items, it));
}

int pardo_conv_items_inline(pardo_conv_items *it) {
    it->inline_run = true;
    atomic_init(&it->failed, false);
    run_items(it, 0, it->n);
    return items_result(it, PARDO_OK);
}

int pardo_conv_gemm(pardo_kernel_ctx *c, pardo_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const void *a, int64_t lda, const void *b, int64_t ldb, void *out, int64_t ldc, bool acc) {
    const pardo_gemm gm = {.dtype = dt,
                           .ta = ta,
                           .tb = tb,
                           .m = m,
                           .n = n,
                           .k = k,
                           .a = a,
                           .lda = lda,
                           .b = b,
                           .ldb = ldb,
                           .c = out,
                           .ldc = ldc,
                           .accumulate = acc};
    return pardo_gemm_run(c, &gm, PARDO_GEMM_AUTO);
}

int pardo_conv_grad_outputs(pardo_kernel_ctx *ctx, const pardo_tensor *x, const pardo_tensor *w, int64_t m, bool has_dy,
                            pardo_tensor *outs[3]) {
    for (int i = 0; i < 3; i++) {
        outs[i] = NULL;
        if (!pardo_kernel_wants_output(ctx, i)) continue;
        const pardo_tensor *like = i == 0 ? x : w;
        outs[i] = i < 2 ? pardo_kernel_output(ctx, i, x->dtype, like->ndim, like->shape)
                        : pardo_kernel_output(ctx, i, x->dtype, 1, &m);
        if (!outs[i]) return ctx->st->code;
        if (!has_dy || outs[i]->numel == 0) pardo_tensor_zero(outs[i]);
    }
    return PARDO_OK;
}

typedef struct bias_job {
    const void *dy;
    void *db;
    int64_t n, m, plane;
} bias_job;

#define BIAS_SUMS(SUF, T)                                                                                              \
    static void bias_sums_##SUF(void *arg, int64_t p0, int64_t p1) {                                                   \
        const bias_job *j = arg;                                                                                       \
        const T *dy = j->dy;                                                                                           \
        T *db = j->db;                                                                                                 \
        for (int64_t oc = p0; oc < p1; oc++) {                                                                         \
            double s = 0;                                                                                              \
            for (int64_t n = 0; n < j->n; n++) {                                                                       \
                const T *dyp = dy + (n * j->m + oc) * j->plane;                                                        \
                for (int64_t e = 0; e < j->plane; e++) s += (double)dyp[e];                                            \
            }                                                                                                          \
            db[oc] = (T)s;                                                                                             \
        }                                                                                                              \
    }
BIAS_SUMS(f32, float)
BIAS_SUMS(f64, double)

int pardo_conv_bias_grad(pardo_kernel_ctx *ctx, const pardo_tensor *dy, int64_t n, int64_t m, int64_t plane,
                         pardo_tensor *db) {
    bias_job j = {.dy = pardo_tensor_data(dy), .db = pardo_tensor_data(db), .n = n, .m = m, .plane = plane};
    return pardo_run_rows(ctx, m, n * plane, db->dtype == PARDO_F32 ? bias_sums_f32 : bias_sums_f64, &j);
}

/* Elements of one channel plane of I (img) and of P (pos). */
static int64_t plane(const int64_t *dims) { return dims[0] * dims[1] * dims[2]; }

/* The calling thread's column buffer for one block. */
static void *cols_buffer(const pardo_conv_cols *cc, pardo_kernel_ctx *c) {
    const size_t bytes = (size_t)(cc->cols.c * cc->cols.kp * cc->rows * cc->cols.pos[2]) * pardo_dtype_size(cc->dtype);
    void *col = pardo_scratch_get(PARDO_SCRATCH_COL, bytes);
    if (!col) pardo_errorf(c->st, PARDO_ENOMEM, "cannot allocate %zu bytes for a convolution's columns", bytes);
    return col;
}

pardo_conv_cols pardo_conv_cols_make(pardo_dtype dtype, const pardo_cols_nd *cols, int64_t group, int64_t p_ch,
                                     const void *w) {
    pardo_conv_cols cc = {.dtype = dtype, .cols = *cols, .group = group, .p_ch = p_ch, .w = w};
    cc.rows = pardo_cols_nd_block_rows(cols, pardo_dtype_size(dtype), PARDO_CONV_COL_BYTES);
    return cc;
}

/* Multiply-adds of the products W_g cols(I_g) of n images. */
static double cols_macs(const pardo_conv_cols *cc, int64_t n) {
    return (double)n * (double)cc->group * (double)cc->p_ch * (double)plane(cc->cols.pos) * (double)cc->cols.c *
           (double)cc->cols.kp;
}

int pardo_conv_cols_items_run(pardo_conv_items *it, const pardo_conv_cols *cc, int64_t n) {
    return pardo_conv_items_run(it, cols_macs(cc, n), PARDO_CONV_PAR_MIN_MACS);
}

bool pardo_conv_cols_items_apart(const pardo_kernel_ctx *ctx, const pardo_conv_cols *cc, int64_t n) {
    return n * cc->group > 1 && ctx->nthreads > 1 && cols_macs(cc, n) >= (double)PARDO_CONV_PAR_MIN_MACS;
}

int pardo_conv_cols_gather(const pardo_conv_cols *cc, pardo_kernel_ctx *c, int64_t n, int64_t grp, const void *i,
                           void *p_out, const void *p_in, void *dw, bool first) {
    const size_t es = pardo_dtype_size(cc->dtype);
    const int64_t ck = cc->cols.c * cc->cols.kp, ip = plane(cc->cols.img), pp = plane(cc->cols.pos);
    const int64_t rows = cc->cols.pos[0] * cc->cols.pos[1], n2 = cc->cols.pos[2], g = n * cc->group + grp;
    const char *ig = (const char *)i + (size_t)(g * cc->cols.c * ip) * es;
    const char *wg = (const char *)cc->w + (size_t)(grp * cc->p_ch * ck) * es;
    char *po = p_out ? (char *)p_out + (size_t)(g * cc->p_ch * pp) * es : NULL;
    const char *pi = p_in ? (const char *)p_in + (size_t)(g * cc->p_ch * pp) * es : NULL;
    char *dwg = dw ? (char *)dw + (size_t)(grp * cc->p_ch * ck) * es : NULL;
    if (cc->p_ch == 0) return PARDO_OK;
    if (ck == 0) { /* no columns: P is 0, dW empty */
        if (po) memset(po, 0, (size_t)(cc->p_ch * pp) * es);
        return PARDO_OK;
    }
    void *col = cols_buffer(cc, c);
    if (!col) return c->st->code;
    for (int64_t r0 = 0; r0 < rows; r0 += cc->rows) {
        const int64_t r1 = r0 + cc->rows < rows ? r0 + cc->rows : rows, q = (r1 - r0) * n2;
        if (cc->dtype == PARDO_F32)
            pardo_im2col_nd_f32(&cc->cols, (const void *)ig, r0, r1, col);
        else
            pardo_im2col_nd_f64(&cc->cols, (const void *)ig, r0, r1, col);
        int rc = PARDO_OK;
        if (po)
            rc = pardo_conv_gemm(c, cc->dtype, false, false, cc->p_ch, q, ck, wg, ck, col, q,
                                 po + (size_t)(r0 * n2) * es, pp, false);
        if (rc == PARDO_OK && dwg)
            rc = pardo_conv_gemm(c, cc->dtype, false, true, cc->p_ch, ck, q, pi + (size_t)(r0 * n2) * es, pp, col, q,
                                 dwg, ck, !(first && r0 == 0));
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

int pardo_conv_cols_scatter(const pardo_conv_cols *cc, pardo_kernel_ctx *c, int64_t n, int64_t grp, const void *p,
                            void *i_out) {
    const size_t es = pardo_dtype_size(cc->dtype);
    const int64_t ck = cc->cols.c * cc->cols.kp, ip = plane(cc->cols.img), pp = plane(cc->cols.pos);
    const int64_t rows = cc->cols.pos[0] * cc->cols.pos[1], n2 = cc->cols.pos[2], g = n * cc->group + grp;
    char *ig = (char *)i_out + (size_t)(g * cc->cols.c * ip) * es;
    const char *wg = (const char *)cc->w + (size_t)(grp * cc->p_ch * ck) * es;
    const char *pg = (const char *)p + (size_t)(g * cc->p_ch * pp) * es;
    if (ck == 0 || cc->p_ch == 0) return PARDO_OK;
    void *col = cols_buffer(cc, c);
    if (!col) return c->st->code;
    for (int64_t r0 = 0; r0 < rows; r0 += cc->rows) {
        const int64_t r1 = r0 + cc->rows < rows ? r0 + cc->rows : rows, q = (r1 - r0) * n2;
        int rc = pardo_conv_gemm(c, cc->dtype, true, false, ck, q, cc->p_ch, wg, ck, pg + (size_t)(r0 * n2) * es, pp,
                                 col, q, false);
        if (rc != PARDO_OK) return rc;
        if (cc->dtype == PARDO_F32)
            pardo_col2im_nd_f32(&cc->cols, col, r0, r1, (void *)ig);
        else
            pardo_col2im_nd_f64(&cc->cols, col, r0, r1, (void *)ig);
    }
    return PARDO_OK;
}

#define BIAS_PLANES(SUF, T)                                                                                            \
    static void bias_planes_##SUF(T *out, const T *b, int64_t ch, int64_t plane, bool add) {                           \
        for (int64_t k = 0; k < ch; k++) {                                                                             \
            const T v = b ? b[k] : (T)0;                                                                               \
            T *o = out + k * plane;                                                                                    \
            if (add)                                                                                                   \
                for (int64_t e = 0; e < plane; e++) o[e] += v;                                                         \
            else                                                                                                       \
                for (int64_t e = 0; e < plane; e++) o[e] = v;                                                          \
        }                                                                                                              \
    }
BIAS_PLANES(f32, float)
BIAS_PLANES(f64, double)

void pardo_conv_bias_planes(pardo_dtype dtype, void *out, const void *b, int64_t ch, int64_t plane, bool add) {
    if (dtype == PARDO_F32)
        bias_planes_f32(out, b, ch, plane, add);
    else
        bias_planes_f64(out, b, ch, plane, add);
}

int pardo_conv_window_read(const pardo_op *op, const pardo_type *x, const pardo_type *w, const char *w_layout,
                           pardo_conv_window *win, pardo_status *st) {
    char sw[128];
    int rc;
    if ((rc = pardo_nn_expect_float(x, "input 0 'X'", st)) != PARDO_OK) return rc;
    if (w->dtype != x->dtype)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' is %s but input 0 'X' is %s; expected the same dtype",
                            pardo_dtype_name(w->dtype), pardo_dtype_name(x->dtype));
    const int rank = x->ndim >= 0 ? x->ndim : w->ndim;
    if (rank < 0) return pardo_errorf(st, PARDO_ESHAPE, "the ranks of input 0 'X' and input 1 'W' are unknown");
    if (rank < 3 || rank > 2 + PARDO_COLS_ND_DIMS)
        return pardo_errorf(st, PARDO_ESHAPE,
                            "input 0 'X' has rank %d, expected 3 to 5 ([N, C, spatial...] of 1 to 3 spatial axes)",
                            rank);
    if (w->ndim >= 0 && w->ndim != rank)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' has shape %s, expected rank %d (%s)",
                            pardo_shape_str(w->ndim, w->shape, sw, sizeof sw), rank, w_layout);
    const int nsp = rank - 2, o = PARDO_COLS_ND_DIMS - nsp;
    win->nsp = nsp;
    for (int a = 0; a < PARDO_COLS_ND_DIMS; a++) {
        win->s[a] = win->d[a] = 1;
        win->pb[a] = win->pe[a] = 0;
    }
    int64_t pads[2 * PARDO_COLS_ND_DIMS] = {0};
    if ((rc = pardo_nn_axis_ints(op, "strides", nsp, 1, win->s + o, st)) != PARDO_OK ||
        (rc = pardo_nn_axis_ints(op, "dilations", nsp, 1, win->d + o, st)) != PARDO_OK ||
        (rc = pardo_nn_axis_ints(op, "pads", 2 * nsp, 0, pads, st)) != PARDO_OK)
        return rc;
    for (int i = 0; i < nsp; i++) {
        win->pb[o + i] = pads[i];
        win->pe[o + i] = pads[nsp + i];
    }
    if ((rc = pardo_attr_int(op, "group", 1, &win->group, st)) != PARDO_OK) return rc;
    if (win->group < 1)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'group' is %lld, expected >= 1", (long long)win->group);
    return PARDO_OK;
}
