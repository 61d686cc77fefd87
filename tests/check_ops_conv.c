/* check_ops_conv.c - conv2d and conv2d_grad: the forward against a naive
 * loop written from ONNX Conv's definition (strides, asymmetric pads,
 * dilations, groups, empty batch, odd and unit sizes), the gradients dX, dW
 * and dB against naive loops too and against float64 finite differences,
 * attr activation relu (forward and the gradient's mask), the same bits at 1
 * and 2 threads, no allocation in the steady state, PyTorch fixtures
 * (forward and autograd gradients), inference with run-time dims, and attr
 * and shape errors. */
#include <check.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "core/value_json.h"
#include "exec/thread_pool.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct conv_case {
    int64_t xs[4], ws[4]; // X [N, C, H, W], W [M, C/group, kH, kW]
    bool bias;
    int64_t strides[2], pads[4], dil[2], group;
} conv_case;

static char *conv_attrs(const conv_case *c, char *buf, size_t n) {
    snprintf(buf, n,
             "{\"strides\": [%lld, %lld], \"pads\": [%lld, %lld, %lld, %lld], \"dilations\": [%lld, %lld], "
             "\"group\": %lld}",
             (long long)c->strides[0], (long long)c->strides[1], (long long)c->pads[0], (long long)c->pads[1],
             (long long)c->pads[2], (long long)c->pads[3], (long long)c->dil[0], (long long)c->dil[1],
             (long long)c->group);
    return buf;
}

/* Y[n, m, oh, ow] = B[m] + sum over c in m's group, kh, kw of
 * X[n, c, oh*sH - top + kh*dH, ow*sW - left + kw*dW] * W[m, c - g*C/group, kh, kw],
 * zero outside X; in double. */
static pardo_tensor *ref_conv(const conv_case *c, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b) {
    const int64_t N = c->xs[0], C = c->xs[1], H = c->xs[2], W = c->xs[3], M = c->ws[0], CG = c->ws[1], KH = c->ws[2],
                  KW = c->ws[3];
    const int64_t OH = (H + c->pads[0] + c->pads[2] - (c->dil[0] * (KH - 1) + 1)) / c->strides[0] + 1;
    const int64_t OW = (W + c->pads[1] + c->pads[3] - (c->dil[1] * (KW - 1) + 1)) / c->strides[1] + 1;
    int64_t ys[4] = {N, M, OH, OW};
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, 4, ys, &st);
    ck_assert_ptr_nonnull(y);
    const int64_t MG = M / c->group;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = b ? pardo_tensor_get_f64(b, m) : 0;
                    for (int64_t cg = 0; cg < CG; cg++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * c->strides[0] - c->pads[0] + kh * c->dil[0];
                                int64_t iw = ow * c->strides[1] - c->pads[1] + kw * c->dil[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                int64_t ch = (m / MG) * CG + cg;
                                s += pardo_tensor_get_f64(x, ((n * C + ch) * H + ih) * W + iw) *
                                     pardo_tensor_get_f64(w, ((m * CG + cg) * KH + kh) * KW + kw);
                            }
                    pardo_tensor_set_f64(y, ((n * M + m) * OH + oh) * OW + ow, s);
                }
    return y;
}

static const conv_case cases[] = {
    {{1, 1, 5, 5}, {1, 1, 3, 3}, false, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {{2, 3, 6, 5}, {4, 3, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {{2, 4, 7, 6}, {6, 2, 3, 2}, true, {2, 1}, {1, 0, 2, 1}, {1, 2}, 2},  /* stride, asymmetric pads, group */
    {{3, 3, 1, 9}, {3, 1, 1, 3}, true, {1, 3}, {0, 1, 0, 1}, {1, 1}, 3},  /* depthwise, height 1 */
    {{2, 2, 7, 7}, {5, 2, 1, 1}, false, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1}, /* 1x1, stride 2, odd size */
    {{1, 2, 4, 3}, {2, 2, 4, 3}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},  /* kernel = input: 1x1 output */
    {{1, 2, 9, 8}, {4, 1, 3, 2}, true, {2, 3}, {2, 1, 0, 3}, {2, 3}, 2},  /* dilations, strides, pads */
    {{0, 3, 5, 5}, {2, 3, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},  /* empty batch */
    {{1, 4, 3, 3}, {8, 1, 2, 2}, false, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4}, /* group = C, M = 2C */
    {{2, 1, 2, 2}, {3, 1, 3, 3}, true, {3, 3}, {1, 1, 1, 1}, {1, 1}, 1},  /* padding all round, 1x1 out */
};

START_TEST(test_conv_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(cases); k++)
        for (int t = 0; t < 2; t++) {
            const conv_case *c = &cases[k];
            test_rng r = {100u + (uint64_t)k * 2 + (uint64_t)t};
            pardo_tensor *in[3] = {test_tensor_random(&r, dts[t], 4, c->xs, -1, 1),
                                   test_tensor_random(&r, dts[t], 4, c->ws, -1, 1),
                                   c->bias ? test_tensor_random(&r, dts[t], 1, c->ws, -1, 1) : NULL};
            pardo_tensor *y = NULL;
            pardo_status st;
            char attrs[256];
            ck_assert_msg(test_run_op("conv2d", conv_attrs(c, attrs, sizeof attrs), 3, in, 1, &y, &st) == PARDO_OK,
                          "case %d: %s", k, st.msg);
            pardo_tensor *want = ref_conv(c, in[0], in[1], in[2]);
            test_assert_close(y, want, t ? 1e-5 : 1e-12, t ? 1e-5 : 1e-12);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
        }
}
END_TEST

START_TEST(test_conv_defaults_and_two_inputs) {
    /* no attrs and no bias input at all (two inputs): a plain valid convolution */
    const conv_case c = {{1, 2, 4, 5}, {3, 2, 2, 2}, false, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
    test_rng r = {7};
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F64, 4, c.xs, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 4, c.ws, -1, 1)},
                 *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("conv2d", NULL, 2, in, 1, &y, &st), PARDO_OK);
    pardo_tensor *want = ref_conv(&c, in[0], in[1], NULL);
    test_assert_close(y, want, 1e-12, 1e-12);
    ck_assert(pardo_shape_equal(y->ndim, y->shape, 4, (int64_t[]){1, 3, 3, 4}));
    pardo_tensor_release(want);
    pardo_tensor_release(y);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

/* The gradient of every input checked by finite differences. */
static void check_conv_grad(const conv_case *c, uint64_t seed) {
    test_rng r = {seed};
    pardo_tensor *in[3] = {test_tensor_random(&r, PARDO_F64, 4, c->xs, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 4, c->ws, -1, 1),
                           c->bias ? test_tensor_random(&r, PARDO_F64, 1, c->ws, -1, 1) : NULL};
    char attrs[256];
    test_check_grad_default("conv2d", conv_attrs(c, attrs, sizeof attrs), 3, in, 1, c->bias ? 7u : 3u);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}

START_TEST(test_conv_grad_stride_pad_group) {
    const conv_case c = {{2, 4, 5, 6}, {4, 2, 3, 3}, true, {2, 2}, {1, 2, 1, 0}, {1, 1}, 2};
    check_conv_grad(&c, 21);
}
END_TEST

START_TEST(test_conv_grad_dilation) {
    const conv_case c = {{1, 3, 6, 5}, {2, 3, 2, 2}, false, {1, 2}, {0, 1, 2, 1}, {2, 2}, 1};
    check_conv_grad(&c, 22);
}
END_TEST

START_TEST(test_conv_grad_depthwise) {
    const conv_case c = {{2, 3, 4, 4}, {6, 1, 3, 1}, true, {1, 1}, {1, 0, 1, 0}, {1, 1}, 3};
    check_conv_grad(&c, 23);
}
END_TEST

START_TEST(test_conv_grad_two_input_forward) {
    /* a conv2d written with two inputs (no bias at all): the standard builder
     * passes "" for B, so conv2d_grad reads Y and dY where its schema says */
    char *fin[2] = {"x", "w"}, *fout[1] = {"y"};
    pardo_op fwd;
    memset(&fwd, 0, sizeof fwd);
    fwd.type = "conv2d";
    fwd.in = fin;
    fwd.n_in = 2;
    fwd.out = fout;
    fwd.n_out = 1;
    const char *og[1] = {"y@GRAD"}, *ig[2] = {"x@GRAD", "w@GRAD"};
    pardo_grad_request req = {.fwd = &fwd, .out_grads = og, .in_grads = ig};
    pardo_block blk;
    memset(&blk, 0, sizeof blk);
    pardo_status st;
    ck_assert_int_eq(pardo_grad_standard(&req, &blk, &st), PARDO_OK);
    const pardo_op *g = &blk.ops[0];
    static const char *const want_in[] = {"x", "w", "", "y", "y@GRAD"}, *const want_out[] = {"x@GRAD", "w@GRAD", ""};
    ck_assert_int_eq(g->n_in, 5);
    ck_assert_int_eq(g->n_out, 3);
    for (int k = 0; k < 5; k++) ck_assert_str_eq(g->in[k], want_in[k]);
    for (int k = 0; k < 3; k++) ck_assert_str_eq(g->out[k], want_out[k]);
    pardo_block_clear(&blk);
    /* and the gradients of such an op check out */
    const conv_case c = {{2, 2, 5, 4}, {3, 2, 2, 3}, false, {1, 1}, {1, 1, 0, 0}, {1, 1}, 1};
    test_rng r = {24};
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F64, 4, c.xs, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 4, c.ws, -1, 1)};
    char attrs[256];
    test_check_grad_default("conv2d", conv_attrs(&c, attrs, sizeof attrs), 2, in, 1, 3u);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

START_TEST(test_conv_grad_absent_dy_and_outputs) {
    /* dY "" gives zero gradients; outputs left "" are not made */
    const conv_case c = {{1, 2, 4, 4}, {2, 2, 3, 3}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
    test_rng r = {5};
    pardo_tensor *in[5] = {test_tensor_random(&r, PARDO_F64, 4, c.xs, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 4, c.ws, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 1, c.ws, -1, 1), NULL, NULL};
    pardo_tensor *out[3];
    pardo_status st;
    ck_assert_int_eq(test_run_op("conv2d_grad", NULL, 5, in, 3, out, &st), PARDO_OK);
    for (int k = 0; k < 3; k++) {
        ck_assert_ptr_nonnull(out[k]);
        for (int64_t i = 0; i < out[k]->numel; i++) ck_assert(pardo_tensor_get_f64(out[k], i) == 0);
        ck_assert(pardo_shape_equal(out[k]->ndim, out[k]->shape, in[k]->ndim, in[k]->shape));
        pardo_tensor_release(out[k]);
    }
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}
END_TEST

/* ---- the gradients against naive loops, threads, activation ---- */

/* Output size along axis a of case c. */
static int64_t out_size(const conv_case *c, int a) {
    const int64_t n = c->xs[2 + a], k = c->ws[2 + a];
    return (n + c->pads[a] + c->pads[a + 2] - (c->dil[a] * (k - 1) + 1)) / c->strides[a] + 1;
}

/* dX, dW and dB of case c for output gradient dy, taken where mask > 0 (mask NULL: everywhere), summed in double
 * by visiting every (output, tap) pair: the definition, with nothing shared with the kernels. */
static void ref_conv_grad(const conv_case *c, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *dy,
                          const pardo_tensor *mask, pardo_tensor **g) {
    const int64_t N = c->xs[0], C = c->xs[1], H = c->xs[2], W = c->xs[3], M = c->ws[0], CG = c->ws[1], KH = c->ws[2],
                  KW = c->ws[3], OH = out_size(c, 0), OW = out_size(c, 1), MG = M / c->group;
    pardo_status st;
    g[0] = pardo_tensor_new_cpu(x->dtype, 4, c->xs, &st);
    g[1] = pardo_tensor_new_cpu(x->dtype, 4, c->ws, &st);
    g[2] = pardo_tensor_new_cpu(x->dtype, 1, c->ws, &st);
    ck_assert(g[0] && g[1] && g[2]);
    double *dx = calloc((size_t)(N * C * H * W) + 1, sizeof(double)), *dw = calloc((size_t)(M * CG * KH * KW) + 1, sizeof(double)),
           *db = calloc((size_t)M + 1, sizeof(double));
    ck_assert(dx && dw && db);
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    const int64_t yi = ((n * M + m) * OH + oh) * OW + ow;
                    const double d = mask && !(pardo_tensor_get_f64(mask, yi) > 0) ? 0 : pardo_tensor_get_f64(dy, yi);
                    db[m] += d;
                    for (int64_t cg = 0; cg < CG; cg++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                const int64_t ih = oh * c->strides[0] - c->pads[0] + kh * c->dil[0];
                                const int64_t iw = ow * c->strides[1] - c->pads[1] + kw * c->dil[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                const int64_t xi = ((n * C + (m / MG) * CG + cg) * H + ih) * W + iw,
                                              wi = ((m * CG + cg) * KH + kh) * KW + kw;
                                dx[xi] += d * pardo_tensor_get_f64(w, wi);
                                dw[wi] += d * pardo_tensor_get_f64(x, xi);
                            }
                }
    for (int64_t i = 0; i < g[0]->numel; i++) pardo_tensor_set_f64(g[0], i, dx[i]);
    for (int64_t i = 0; i < g[1]->numel; i++) pardo_tensor_set_f64(g[1], i, dw[i]);
    for (int64_t i = 0; i < M; i++) pardo_tensor_set_f64(g[2], i, db[i]);
    free(dx);
    free(dw);
    free(db);
}

/* One op outside a graph with its attrs parsed once, for kernels run with a chosen thread count: op_run_init,
 * then op_run_go any number of times, then op_run_free. */
typedef struct op_run {
    pardo_op op;
    char type[32], names[3][8];
    char *outs[3];
} op_run;

/* Op `type` (attrs JSON text or NULL) with n_out outputs named names[k] (NULL: all named; "" leaves one out). */
static void op_run_init(op_run *o, const char *type, const char *attrs, int n_out, const char *const *names) {
    memset(o, 0, sizeof(*o));
    snprintf(o->type, sizeof o->type, "%s", type);
    for (int k = 0; k < n_out; k++) {
        snprintf(o->names[k], sizeof o->names[k], "%s", names ? names[k] : "out");
        o->outs[k] = o->names[k];
    }
    o->op.type = o->type;
    o->op.def = pardo_op_lookup(type);
    ck_assert_ptr_nonnull(o->op.def);
    o->op.out = o->outs;
    o->op.n_out = n_out;
    pardo_status st;
    if (attrs) ck_assert_msg(pardo_value_parse_json(attrs, &o->op.attrs, &st) == PARDO_OK, "%s", st.msg);
}

static void op_run_free(op_run *o) { pardo_value_free(o->op.attrs); }

/* Runs o's kernel on in[0..n_in) with a kernel ctx of nthreads threads; outputs into out[0..n_out), whose
 * tensors are reused where they fit (as an executor's are; NULL entries are made). The kernel's status. */
static int op_run_go(op_run *o, int n_in, pardo_tensor **in, pardo_tensor **out, int nthreads, pardo_status *st) {
    o->op.n_in = n_in;
    pardo_kernel_ctx ctx = {.op = &o->op, .n_in = n_in, .in = in, .n_out = o->op.n_out, .out = out, .st = st,
                            .device = PARDO_DEVICE_CPU, .nthreads = nthreads};
    return o->op.def->cpu(&ctx);
}

/* op_run_init, op_run_go, op_run_free at once. */
static int run_ctx(const char *type, const char *attrs, int n_in, pardo_tensor **in, int n_out, pardo_tensor **out,
                   const char *const *names, int nthreads, pardo_status *st) {
    op_run o;
    op_run_init(&o, type, attrs, n_out, names);
    int rc = op_run_go(&o, n_in, in, out, nthreads, st);
    op_run_free(&o);
    return rc;
}

static char *conv_attrs_act(const conv_case *c, const char *act, char *buf, size_t n) {
    conv_attrs(c, buf, n);
    size_t len = strlen(buf);
    snprintf(buf + len - 1, n - len + 1, ", \"activation\": \"%s\"}", act);
    return buf;
}

/* Beyond cases[]: a 1x1 kernel with strides 1 and no pads (its columns are X itself) with groups, a batch of 1
 * of several channels, batches past the gradient's block count (several images per block), and columns too
 * big for one chunk of a block's images (chunks of 2 and 1 in blocks of 3, float32, at this writing). */
static const conv_case grad_cases[] = {
    {{3, 4, 5, 6}, {6, 2, 1, 1}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2},
    {{1, 5, 6, 7}, {4, 5, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {{37, 3, 6, 5}, {4, 3, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {{19, 4, 7, 8}, {6, 2, 3, 2}, true, {2, 1}, {0, 1, 2, 0}, {2, 1}, 2},
    {{37, 4, 38, 38}, {4, 4, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
};

/* No input channels (an empty sum: Y is the bias) and no output channels (Y empty, dX zeros), forward and
 * gradients, against the naive loops. */
START_TEST(test_conv_empty_channels) {
    static const conv_case ec[] = {
        {{2, 0, 5, 5}, {3, 0, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
        {{2, 4, 5, 5}, {0, 2, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},
    };
    for (int k = 0; k < LEN(ec); k++) {
        const conv_case *c = &ec[k];
        test_rng r = {80u + (uint64_t)k};
        int64_t ys[4] = {c->xs[0], c->ws[0], out_size(c, 0), out_size(c, 1)};
        pardo_tensor *in[5] = {test_tensor_random(&r, PARDO_F32, 4, c->xs, -1, 1),
                               test_tensor_random(&r, PARDO_F32, 4, c->ws, -1, 1),
                               test_tensor_random(&r, PARDO_F32, 1, c->ws, -1, 1), NULL,
                               test_tensor_random(&r, PARDO_F32, 4, ys, -1, 1)};
        pardo_tensor *y = NULL, *g[3], *want[3];
        pardo_status st;
        char attrs[256];
        conv_attrs(c, attrs, sizeof attrs);
        ck_assert_msg(test_run_op("conv2d", attrs, 3, in, 1, &y, &st) == PARDO_OK, "case %d: %s", k, st.msg);
        pardo_tensor *wy = ref_conv(c, in[0], in[1], in[2]);
        test_assert_close(y, wy, 0, 0);
        ck_assert_msg(test_run_op("conv2d_grad", attrs, 5, in, 3, g, &st) == PARDO_OK, "case %d: %s", k, st.msg);
        ref_conv_grad(c, in[0], in[1], in[4], NULL, want);
        for (int i = 0; i < 3; i++) {
            test_assert_close(g[i], want[i], 1e-6, 1e-6);
            pardo_tensor_release(g[i]);
            pardo_tensor_release(want[i]);
        }
        pardo_tensor *all[] = {in[0], in[1], in[2], in[4], y, wy};
        for (int i = 0; i < LEN(all); i++) pardo_tensor_release(all[i]);
    }
}
END_TEST

/* conv2d_grad's dX, dW and dB against ref_conv_grad, in float64 and float32, on cases[] and grad_cases[]. */
START_TEST(test_conv_grad_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(cases) + LEN(grad_cases); k++)
        for (int t = 0; t < 2; t++) {
            const conv_case *c = k < LEN(cases) ? &cases[k] : &grad_cases[k - LEN(cases)];
            const bool big = c->xs[0] * c->xs[2] * c->xs[3] > 10000;
            if (big && t == 0) continue; /* the big one in float32 only (the reference is slow) */
            test_rng r = {300u + (uint64_t)k * 2 + (uint64_t)t};
            int64_t ys[4] = {c->xs[0], c->ws[0], out_size(c, 0), out_size(c, 1)};
            pardo_tensor *in[5] = {test_tensor_random(&r, dts[t], 4, c->xs, -1, 1),
                                   test_tensor_random(&r, dts[t], 4, c->ws, -1, 1),
                                   c->bias ? test_tensor_random(&r, dts[t], 1, c->ws, -1, 1) : NULL, NULL,
                                   test_tensor_random(&r, dts[t], 4, ys, -1, 1)};
            pardo_tensor *g[3], *want[3];
            pardo_status st;
            char attrs[256];
            ck_assert_msg(test_run_op("conv2d_grad", conv_attrs(c, attrs, sizeof attrs), 5, in, 3, g, &st) == PARDO_OK,
                          "case %d: %s", k, st.msg);
            ref_conv_grad(c, in[0], in[1], in[4], NULL, want);
            const double tol = t ? (big ? 1e-4 : 2e-5) : 1e-12;
            for (int i = 0; i < 3; i++) {
                test_assert_close(g[i], want[i], tol, tol);
                pardo_tensor_release(g[i]);
                pardo_tensor_release(want[i]);
            }
            for (int i = 0; i < 5; i++) pardo_tensor_release(in[i]);
        }
}
END_TEST

/* activation relu: the forward is relu of the plain conv2d's output (the same bits: the bias then relu, as add
 * then relu compute them); conv2d_grad with it takes dY where Y (its input 3, relu's output) > 0, against the
 * naive loops and against finite differences through the registered builder. */
START_TEST(test_conv_activation_relu) {
    const conv_case c = {{3, 4, 7, 6}, {6, 2, 3, 3}, true, {1, 2}, {1, 0, 2, 1}, {1, 1}, 2};
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int t = 0; t < 2; t++) {
        test_rng r = {40u + (uint64_t)t};
        pardo_tensor *in[3] = {test_tensor_random(&r, dts[t], 4, c.xs, -1, 1),
                               test_tensor_random(&r, dts[t], 4, c.ws, -1, 1),
                               test_tensor_random(&r, dts[t], 1, c.ws, -1, 1)};
        pardo_tensor *y = NULL, *yr = NULL, *relu = NULL;
        pardo_status st;
        char attrs[256], plain[256];
        ck_assert_msg(test_run_op("conv2d", conv_attrs_act(&c, "relu", attrs, sizeof attrs), 3, in, 1, &yr, &st) ==
                          PARDO_OK,
                      "%s", st.msg);
        ck_assert_int_eq(test_run_op("conv2d", conv_attrs(&c, plain, sizeof plain), 3, in, 1, &y, &st), PARDO_OK);
        ck_assert_int_eq(test_run_op("relu", NULL, 1, &y, 1, &relu, &st), PARDO_OK);
        ck_assert(yr->nbytes == relu->nbytes && memcmp(pardo_tensor_data(yr), pardo_tensor_data(relu), yr->nbytes) == 0);
        bool some_zero = false, some_positive = false;
        for (int64_t i = 0; i < yr->numel; i++) {
            some_zero |= pardo_tensor_get_f64(yr, i) == 0;
            some_positive |= pardo_tensor_get_f64(yr, i) > 0;
        }
        ck_assert(some_zero && some_positive);
        /* the gradient through the mask */
        pardo_tensor *gin[5] = {in[0], in[1], in[2], yr, test_tensor_random(&r, dts[t], 4, yr->shape, -1, 1)};
        pardo_tensor *g[3], *want[3];
        ck_assert_msg(test_run_op("conv2d_grad", attrs, 5, gin, 3, g, &st) == PARDO_OK, "%s", st.msg);
        ref_conv_grad(&c, in[0], in[1], gin[4], yr, want);
        for (int i = 0; i < 3; i++) {
            test_assert_close(g[i], want[i], t ? 2e-5 : 1e-12, t ? 2e-5 : 1e-12);
            pardo_tensor_release(g[i]);
            pardo_tensor_release(want[i]);
        }
        /* without Y the mask cannot be taken */
        gin[3] = NULL;
        ck_assert_int_eq(test_run_op("conv2d_grad", attrs, 5, gin, 3, g, &st), PARDO_EINVAL);
        ck_assert_msg(strstr(st.msg, "'Y'") != NULL, "%s", st.msg);
        if (t == 0) test_check_grad_default("conv2d", attrs, 3, in, 1, 7u);
        pardo_tensor *all[] = {in[0], in[1], in[2], y, yr, relu, gin[4]};
        for (int i = 0; i < LEN(all); i++) pardo_tensor_release(all[i]);
    }
}
END_TEST

/* True when a and b hold the same bytes. */
static bool same_bits(const pardo_tensor *a, const pardo_tensor *b) {
    return a && b && a->nbytes == b->nbytes && memcmp(pardo_tensor_data(a), pardo_tensor_data(b), a->nbytes) == 0;
}

/* conv2d_grad with activation relu (dY masked as it is read) gives the bits of relu_grad then conv2d_grad
 * without it, as the fusion pass needs: small images (a chunk's rows gathered) and bigger ones (one image per
 * product), on 1 and 2 threads. */
START_TEST(test_conv_relu_grad_fused_bits) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(2, &st) == PARDO_OK, "%s", st.msg);
    static const conv_case fc[] = {
        {{21, 3, 10, 9}, {4, 3, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
        {{33, 2, 23, 23}, {6, 1, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},
    };
    for (int k = 0; k < LEN(fc); k++)
        for (int th = 1; th <= 2; th++) {
            const conv_case *c = &fc[k];
            test_rng r = {90u + (uint64_t)k};
            int64_t ys[4] = {c->xs[0], c->ws[0], out_size(c, 0), out_size(c, 1)};
            pardo_tensor *in[5] = {test_tensor_random(&r, PARDO_F32, 4, c->xs, -1, 1),
                                   test_tensor_random(&r, PARDO_F32, 4, c->ws, -1, 1),
                                   test_tensor_random(&r, PARDO_F32, 1, c->ws, -1, 1), NULL,
                                   test_tensor_random(&r, PARDO_F32, 4, ys, -1, 1)};
            char plain[256], fused[256];
            conv_attrs(c, plain, sizeof plain);
            conv_attrs_act(c, "relu", fused, sizeof fused);
            const char *names[3] = {"dx", "dw", "db"};
            pardo_tensor *y = NULL, *dz = NULL, *ga[3] = {NULL, NULL, NULL}, *gb[3] = {NULL, NULL, NULL};
            ck_assert_msg(run_ctx("conv2d", fused, 3, in, 1, &y, NULL, th, &st) == PARDO_OK, "%s", st.msg);
            pardo_tensor *rg[3] = {NULL, y, in[4]};
            ck_assert_msg(run_ctx("relu_grad", NULL, 3, rg, 1, &dz, NULL, th, &st) == PARDO_OK, "%s", st.msg);
            pardo_tensor *dyin = in[4];
            in[3] = y;
            ck_assert_msg(run_ctx("conv2d_grad", fused, 5, in, 3, ga, names, th, &st) == PARDO_OK, "%s", st.msg);
            in[4] = dz;
            ck_assert_msg(run_ctx("conv2d_grad", plain, 5, in, 3, gb, names, th, &st) == PARDO_OK, "%s", st.msg);
            for (int i = 0; i < 3; i++) {
                ck_assert_msg(same_bits(ga[i], gb[i]), "case %d, %d threads: output %d differs", k, th, i);
                pardo_tensor_release(ga[i]);
                pardo_tensor_release(gb[i]);
            }
            pardo_tensor *all[] = {in[0], in[1], in[2], dyin, y, dz};
            for (int i = 0; i < LEN(all); i++) pardo_tensor_release(all[i]);
        }
}
END_TEST

/* conv2d and conv2d_grad give the same bits on 1 and 2 threads: a batch split over the threads by chunks of images
 * (the weight and bias gradients summed per block of images), a batch of 1 whose products the threads split, a
 * batch past the block count, a 1x1 kernel, bigger images; float32 with activation relu, float64 mostly without. */
START_TEST(test_conv_threads_same_bits) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(2, &st) == PARDO_OK, "%s", st.msg);
    static const conv_case tc[] = {
        {{20, 4, 12, 12}, {8, 4, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
        {{1, 8, 20, 20}, {16, 8, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
        {{41, 6, 9, 10}, {8, 3, 3, 2}, true, {2, 1}, {1, 0, 0, 1}, {1, 2}, 2},
        {{24, 16, 7, 7}, {8, 16, 1, 1}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
        {{18, 3, 24, 24}, {4, 3, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, /* bigger images: dY read in place */
    };
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int k = 0; k < LEN(tc); k++)
        for (int t = 0; t < 2; t++) {
            const conv_case *c = &tc[k];
            test_rng r = {500u + (uint64_t)k};
            int64_t ys[4] = {c->xs[0], c->ws[0], out_size(c, 0), out_size(c, 1)};
            pardo_tensor *in[5] = {test_tensor_random(&r, dts[t], 4, c->xs, -1, 1),
                                   test_tensor_random(&r, dts[t], 4, c->ws, -1, 1),
                                   test_tensor_random(&r, dts[t], 1, c->ws, -1, 1), NULL,
                                   test_tensor_random(&r, dts[t], 4, ys, -1, 1)};
            char attrs[256];
            const bool relu = t == 0 || k == 1;
            conv_attrs_act(c, relu ? "relu" : "none", attrs, sizeof attrs);
            pardo_tensor *y[2] = {NULL, NULL}, *g[2][3] = {{NULL, NULL, NULL}, {NULL, NULL, NULL}};
            for (int th = 0; th < 2; th++) {
                ck_assert_msg(run_ctx("conv2d", attrs, 3, in, 1, &y[th], NULL, th + 1, &st) == PARDO_OK, "%s", st.msg);
                in[3] = y[0];
                const char *names[3] = {"dx", "dw", "db"};
                ck_assert_msg(run_ctx("conv2d_grad", attrs, 5, in, 3, g[th], names, th + 1, &st) == PARDO_OK, "%s",
                              st.msg);
            }
            ck_assert_msg(same_bits(y[0], y[1]), "case %d: Y differs on 2 threads", k);
            for (int i = 0; i < 3; i++) ck_assert_msg(same_bits(g[0][i], g[1][i]), "case %d: output %d differs on 2 threads", k, i);
            /* and the results are right */
            pardo_tensor *want = ref_conv(c, in[0], in[1], in[2]), *act = NULL, *wg[3];
            if (relu) ck_assert_int_eq(test_run_op("relu", NULL, 1, &want, 1, &act, &st), PARDO_OK);
            else act = pardo_tensor_retain(want);
            const double tol = t ? 1e-12 : 1e-4;
            test_assert_close(y[1], act, tol, tol);
            ref_conv_grad(c, in[0], in[1], in[4], relu ? y[0] : NULL, wg);
            for (int i = 0; i < 3; i++) {
                test_assert_close(g[1][i], wg[i], tol, tol);
                pardo_tensor_release(wg[i]);
                pardo_tensor_release(g[0][i]);
                pardo_tensor_release(g[1][i]);
            }
            pardo_tensor *all[] = {in[0], in[1], in[2], in[4], y[0], y[1], want, act};
            for (int i = 0; i < LEN(all); i++) pardo_tensor_release(all[i]);
        }
}
END_TEST

/* The second run of conv2d and conv2d_grad (outputs reused, as an executor reuses them) allocates nothing: the
 * columns, gathered rows and partial sums are kept per thread. One thread: a pool thread's buffers are made the
 * first time it happens to take an item. */
START_TEST(test_conv_no_allocation_steady_state) {
    const conv_case c = {{19, 6, 11, 10}, {8, 3, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
    test_rng r = {61};
    int64_t ys[4] = {c.xs[0], c.ws[0], out_size(&c, 0), out_size(&c, 1)};
    pardo_tensor *in[5] = {test_tensor_random(&r, PARDO_F32, 4, c.xs, -1, 1),
                           test_tensor_random(&r, PARDO_F32, 4, c.ws, -1, 1),
                           test_tensor_random(&r, PARDO_F32, 1, c.ws, -1, 1), NULL,
                           test_tensor_random(&r, PARDO_F32, 4, ys, -1, 1)};
    char attrs[256];
    conv_attrs_act(&c, "relu", attrs, sizeof attrs);
    pardo_tensor *y = NULL, *g[3] = {NULL, NULL, NULL};
    const char *names[3] = {"dx", "dw", "db"};
    op_run fwd, bwd;
    op_run_init(&fwd, "conv2d", attrs, 1, NULL);
    op_run_init(&bwd, "conv2d_grad", attrs, 3, names);
    pardo_status st;
    size_t before = 0;
    for (int run = 0; run < 3; run++) {
        if (run == 2) {
            struct mallinfo2 m = mallinfo2();
            before = m.uordblks + m.hblkhd;
        }
        ck_assert_msg(op_run_go(&fwd, 3, in, &y, 1, &st) == PARDO_OK, "%s", st.msg);
        in[3] = y;
        ck_assert_msg(op_run_go(&bwd, 5, in, g, 1, &st) == PARDO_OK, "%s", st.msg);
    }
    struct mallinfo2 m = mallinfo2();
    op_run_free(&fwd);
    op_run_free(&bwd);
    ck_assert_msg(m.uordblks + m.hblkhd == before, "the third run allocated %lld bytes",
                  (long long)(m.uordblks + m.hblkhd) - (long long)before);
    pardo_tensor *all[] = {in[0], in[1], in[2], in[4], y, g[0], g[1], g[2]};
    for (int i = 0; i < LEN(all); i++) pardo_tensor_release(all[i]);
}
END_TEST

/* ---- inference ---- */

static int infer_conv(const char *attrs, pardo_type x, pardo_type w, const pardo_type *b, pardo_type *y,
                      pardo_status *st) {
    const pardo_type *in[3] = {&x, &w, b};
    return test_infer_op("conv2d", attrs, 3, in, 1, y, st);
}

START_TEST(test_conv_infer) {
    pardo_type y, b = test_type(PARDO_F32, 1, (int64_t[]){8});
    pardo_status st;
    ck_assert_int_eq(infer_conv("{\"strides\": [2, 2], \"pads\": [1, 1, 1, 1]}",
                                test_type(PARDO_F32, 4, (int64_t[]){-1, 3, 32, 31}),
                                test_type(PARDO_F32, 4, (int64_t[]){8, 3, 3, 3}), &b, &y, &st),
                     PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_F32);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){-1, 8, 16, 16}));
    /* a run-time height stays run-time; a run-time C skips the group checks */
    ck_assert_int_eq(infer_conv("{\"group\": 2}", test_type(PARDO_F64, 4, (int64_t[]){4, -1, -1, 10}),
                                test_type(PARDO_F64, 4, (int64_t[]){6, 3, 1, 3}), NULL, &y, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){4, 6, -1, 8}));
    ck_assert_int_eq(infer_conv(NULL, test_type(PARDO_F32, -1, NULL), test_type(PARDO_F32, 4, (int64_t[]){8, 3, 3, 3}),
                                NULL, &y, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){-1, 8, -1, -1}));
}
END_TEST

/* ---- errors ---- */

static void expect_conv_error(const char *attrs, const int64_t *xs, const int64_t *ws, const int64_t *bs, int code,
                              const char *w1, const char *w2) {
    pardo_type y, x = test_type(PARDO_F32, 4, xs), w = test_type(PARDO_F32, 4, ws), b;
    if (bs) b = test_type(PARDO_F32, 1, bs);
    pardo_status st;
    ck_assert_int_eq(infer_conv(attrs, x, w, bs ? &b : NULL, &y, &st), code);
    ck_assert_msg(strstr(st.msg, w1) != NULL, "message lacks '%s': %s", w1, st.msg);
    ck_assert_msg(!w2 || strstr(st.msg, w2) != NULL, "message lacks '%s': %s", w2, st.msg);
}

START_TEST(test_conv_err_attrs) {
    const int64_t xs[] = {1, 4, 6, 6}, ws[] = {2, 4, 3, 3};
    expect_conv_error("{\"pads\": [0, -1, 0, 0]}", xs, ws, NULL, PARDO_EINVAL, "'pads'", "negative");
    expect_conv_error("{\"pads\": [1, 1]}", xs, ws, NULL, PARDO_EINVAL, "'pads'", "expected 4");
    expect_conv_error("{\"strides\": [1, 1, 1]}", xs, ws, NULL, PARDO_EINVAL, "'strides'", "expected 2");
    expect_conv_error("{\"strides\": [0, 1]}", xs, ws, NULL, PARDO_EINVAL, "'strides'", ">= 1");
    expect_conv_error("{\"dilations\": [1, 0]}", xs, ws, NULL, PARDO_EINVAL, "'dilations'", ">= 1");
    expect_conv_error("{\"dilations\": 2}", xs, ws, NULL, PARDO_EINVAL, "'dilations'", "expected 2");
    expect_conv_error("{\"group\": 0}", xs, ws, NULL, PARDO_EINVAL, "'group'", ">= 1");
    expect_conv_error("{\"strides\": \"big\"}", xs, ws, NULL, PARDO_EINVAL, "'strides'", NULL);
}
END_TEST

START_TEST(test_conv_err_shapes) {
    /* kernel larger than the padded input, plainly and through dilation */
    expect_conv_error(NULL, (int64_t[]){1, 1, 2, 6}, (int64_t[]){1, 1, 3, 3}, NULL, PARDO_ESHAPE, "'W'", "'pads'");
    expect_conv_error("{\"pads\": [0, 1, 0, 0]}", (int64_t[]){1, 1, 6, 2}, (int64_t[]){1, 1, 3, 4}, NULL, PARDO_ESHAPE,
                      "width", "larger than");
    expect_conv_error("{\"dilations\": [3, 1]}", (int64_t[]){1, 1, 6, 6}, (int64_t[]){1, 1, 3, 3}, NULL, PARDO_ESHAPE,
                      "'dilations'", "spans 7");
    /* padding makes it fit */
    pardo_type y;
    pardo_status st;
    ck_assert_int_eq(infer_conv("{\"pads\": [1, 0, 0, 0]}", test_type(PARDO_F32, 4, (int64_t[]){1, 1, 2, 6}),
                                test_type(PARDO_F32, 4, (int64_t[]){1, 1, 3, 3}), NULL, &y, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){1, 1, 1, 4}));
    /* groups: C not divisible, M not divisible, W's channel dim */
    expect_conv_error("{\"group\": 3}", (int64_t[]){1, 4, 5, 5}, (int64_t[]){3, 1, 3, 3}, NULL, PARDO_EINVAL, "'group'",
                      "4 channels");
    expect_conv_error("{\"group\": 2}", (int64_t[]){1, 4, 5, 5}, (int64_t[]){3, 2, 3, 3}, NULL, PARDO_EINVAL, "'group'",
                      "3 output channels");
    expect_conv_error("{\"group\": 2}", (int64_t[]){1, 4, 5, 5}, (int64_t[]){4, 4, 3, 3}, NULL, PARDO_ESHAPE,
                      "C/group = 2", NULL);
    expect_conv_error(NULL, (int64_t[]){1, 4, 5, 5}, (int64_t[]){4, 4, 3, 3}, (int64_t[]){3}, PARDO_ESHAPE, "'B'",
                      "M = 4");
    /* ranks and dtypes */
    pardo_type x3 = test_type(PARDO_F32, 3, (int64_t[]){1, 5, 5}), w = test_type(PARDO_F32, 4, (int64_t[]){1, 1, 3, 3});
    ck_assert_int_eq(infer_conv(NULL, x3, w, NULL, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[N, C, H, W]") != NULL, "%s", st.msg);
    pardo_type xi = test_type(PARDO_I32, 4, (int64_t[]){1, 1, 5, 5}),
               wd = test_type(PARDO_F64, 4, (int64_t[]){1, 1, 3, 3});
    ck_assert_int_eq(infer_conv(NULL, xi, w, NULL, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(infer_conv(NULL, test_type(PARDO_F32, 4, (int64_t[]){1, 1, 5, 5}), wd, NULL, &y, &st),
                     PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'W'") && strstr(st.msg, "float64"), "%s", st.msg);
}
END_TEST

START_TEST(test_conv_err_activation) {
    const int64_t xs[] = {1, 4, 6, 6}, ws[] = {2, 4, 3, 3};
    expect_conv_error("{\"activation\": \"tanh\"}", xs, ws, NULL, PARDO_EINVAL, "'activation'", "\"relu\"");
    expect_conv_error("{\"activation\": 1}", xs, ws, NULL, PARDO_EINVAL, "'activation'", NULL);
    /* and conv2d_grad, which takes the forward's attrs */
    pardo_type x = test_type(PARDO_F32, 4, xs), w = test_type(PARDO_F32, 4, ws), out[3];
    const pardo_type *in[5] = {&x, &w, NULL, NULL, NULL};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("conv2d_grad", "{\"activation\": \"gelu\"}", 5, in, 3, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'activation'") != NULL, "%s", st.msg);
    /* with relu, a Y of the wrong shape */
    pardo_type y = test_type(PARDO_F32, 4, (int64_t[]){1, 2, 3, 3});
    in[3] = &y;
    ck_assert_int_eq(test_infer_op("conv2d_grad", "{\"activation\": \"relu\"}", 5, in, 3, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'Y'") != NULL, "%s", st.msg);
}
END_TEST

START_TEST(test_conv_err_runtime_shapes) {
    /* a run-time shape that inference could not see is caught by the kernel */
    int64_t xs[] = {1, 1, 2, 2}, ws[] = {1, 1, 3, 3};
    test_rng r = {1};
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F32, 4, xs, -1, 1),
                           test_tensor_random(&r, PARDO_F32, 4, ws, -1, 1)};
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("conv2d", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_ptr_null(y);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

/* ---- PyTorch fixtures ---- */

static pardo_tensor *load(const char *stem, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "nn/%s_%s.npy", stem, what);
    return test_npy_load(name);
}

START_TEST(test_conv_fixtures) {
    static const struct {
        const char *name;
        const char *attrs;
        bool bias;
    } fx[] = {
        {"conv_basic", NULL, true},
        {"conv_s2_g2", "{\"strides\": [2, 1], \"pads\": [1, 0, 2, 1], \"dilations\": [1, 2], \"group\": 2}", true},
        {"conv_dil_f32", "{\"strides\": [1, 2], \"pads\": [2, 1, 2, 1], \"dilations\": [2, 2]}", false},
        {"conv_dw", "{\"strides\": [2, 2], \"pads\": [1, 1, 1, 1], \"group\": 3}", true},
    };
    for (int k = 0; k < LEN(fx); k++) {
        pardo_tensor *in[5] = {load(fx[k].name, "x"), load(fx[k].name, "w"), fx[k].bias ? load(fx[k].name, "b") : NULL,
                               NULL, load(fx[k].name, "dy")};
        const bool f32 = in[0]->dtype == PARDO_F32;
        const double rtol = f32 ? 1e-5 : 1e-12, atol = f32 ? 1e-5 : 1e-12;
        pardo_tensor *y = NULL, *g[3];
        pardo_status st;
        ck_assert_msg(test_run_op("conv2d", fx[k].attrs, 3, in, 1, &y, &st) == PARDO_OK, "%s: %s", fx[k].name, st.msg);
        pardo_tensor *want = load(fx[k].name, "y");
        test_assert_close(y, want, rtol, atol);
        pardo_tensor_release(want);
        in[3] = y;
        ck_assert_msg(test_run_op("conv2d_grad", fx[k].attrs, 5, in, fx[k].bias ? 3 : 2, g, &st) == PARDO_OK, "%s: %s",
                      fx[k].name, st.msg);
        static const char *const dnames[3] = {"dx", "dw", "db"};
        for (int i = 0; i < (fx[k].bias ? 3 : 2); i++) {
            want = load(fx[k].name, dnames[i]);
            test_assert_close(g[i], want, rtol, atol);
            pardo_tensor_release(want);
            pardo_tensor_release(g[i]);
        }
        for (int i = 0; i < 5; i++) pardo_tensor_release(in[i]);
    }
}
END_TEST

Suite *make_ops_conv_suite(void) {
    Suite *s = suite_create("ops_conv");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_conv_reference);
    tcase_add_test(core, test_conv_defaults_and_two_inputs);
    tcase_add_test(core, test_conv_grad_stride_pad_group);
    tcase_add_test(core, test_conv_grad_dilation);
    tcase_add_test(core, test_conv_grad_depthwise);
    tcase_add_test(core, test_conv_grad_two_input_forward);
    tcase_add_test(core, test_conv_grad_absent_dy_and_outputs);
    tcase_add_test(core, test_conv_infer);
    tcase_add_test(core, test_conv_fixtures);
    tcase_add_test(core, test_conv_grad_reference);
    tcase_add_test(core, test_conv_empty_channels);
    tcase_add_test(core, test_conv_activation_relu);
    tcase_add_test(core, test_conv_threads_same_bits);
    tcase_add_test(core, test_conv_relu_grad_fused_bits);
    tcase_add_test(core, test_conv_no_allocation_steady_state);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_conv_err_attrs);
    tcase_add_test(errors, test_conv_err_shapes);
    tcase_add_test(errors, test_conv_err_runtime_shapes);
    tcase_add_test(errors, test_conv_err_activation);
    suite_add_tcase(s, errors);
    return s;
}
