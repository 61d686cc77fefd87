/* optimizer.c - sgd, momentum, adam and adamw: each updates a param in
 * place (the param var is both input 0 and output 0) and its state vars
 * likewise, with torch.optim's equations (dampening 0, no amsgrad); and
 * clip_grad_norm, which scales gradients by their global norm first:
 *
 *   sgd:      g += wd p; p -= lr * g
 *   momentum: g += wd p; v = mu * v + g; p -= lr * (nesterov ? g + mu * v : v)
 *             (torch.optim.SGD with momentum mu and weight_decay wd; its first
 *             step sets v = g, which is mu * 0 + g from the zero state)
 *   adam:     g += wd p; t = step + 1; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 *             p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *             (torch.optim.Adam's form of lr * m_hat / (sqrt(v_hat) + eps))
 *   adamw:    adam without the L2 term, the decay decoupled: p *= 1 - lr wd
 *             first (torch.optim.AdamW; weight_decay default 0.01)
 *   clip_grad_norm: total = sqrt(sum over every gradient of g^2); each g *=
 *             min(1, max_norm / (total + 1e-6)) (torch.nn.utils.clip_grad_norm_)
 *
 * lr is a float32 or float64 scalar tensor ([] or [1]); adam's step is an
 * int64 or float scalar state the op increments. grad and the moment states
 * must have the param's dtype and shape. Element updates run in double and
 * are stored in the param's dtype. The kernels read element i of every input
 * before writing element i of any output, so outputs may be the inputs'
 * tensors (.inplace). Optimizers have no gradient.
 *
 * grad may also be a tensor_array of parts (the form the fusion pass,
 * transpiler/fuse.c, gives merge -> update): its parts are combined as the
 * merge op would (attr grad_merge: mean, weighted by the split named by the
 * last input weight_by where given, or sum) a tile at a time as the update
 * runs, with the bits of merge then update. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_util.h"
#include "kernels.h"
#include "merge_combine.h"
#include "nn_util.h"
#include "op.h"

static const pardo_dtype lr_dtypes[] = {PARDO_F32, PARDO_F64};
static const pardo_dtype step_dtypes[] = {PARDO_I64, PARDO_I32, PARDO_F32, PARDO_F64};

/* attr grad_merge: how a tensor_array gradient's parts combine, mean
 * (default) or sum; PARDO_EINVAL for any other word. */
static int opt_grad_mode(const pardo_op *op, pardo_merge_mode *mode, pardo_status *st) {
    const char *how;
    int rc = pardo_attr_string(op, "grad_merge", "mean", &how, st);
    if (rc != PARDO_OK) return rc;
    *mode = strcmp(how, "sum") == 0 ? PARDO_MERGE_SUM : PARDO_MERGE_MEAN;
    if (*mode == PARDO_MERGE_MEAN && strcmp(how, "mean") != 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'grad_merge' is \"%s\", expected \"mean\" or \"sum\"", how);
    return PARDO_OK;
}

/* Checks attr grad_merge, param (input 0) and the inputs at `same` (n_same
 * of them, with names) against it, and lr (input lr_at) as a float scalar. */
static int opt_check(const pardo_op *op, const pardo_type *const *in, const int *same, const char *const *names,
                     int n_same, int lr_at, pardo_status *st) {
    pardo_merge_mode mode;
    int rc = opt_grad_mode(op, &mode, st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_float(in[0], "input 0 'param'", st);
    for (int k = 0; rc == PARDO_OK && k < n_same; k++)
        rc = pardo_nn_expect_same(in[same[k]], names[k], in[0], "input 0 'param'", st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_scalar(in[lr_at], "input 'lr'", lr_dtypes, 2, st);
    return rc;
}

/* The gradient a kernel updates with: a tensor's data, or a tensor_array's
 * parts merged as the update runs (m), or, past PARDO_MERGE_STACK_PARTS
 * parts, merged first into a tensor the op keeps (opt_scratch). */
typedef struct opt_grad {
    const void *data;  // the gradient's elements; NULL where merged (m)
    bool merged;       // m holds the parts to merge
    pardo_merge_args m;
    const void *parts[PARDO_MERGE_STACK_PARTS]; // m's part pointers
    double w[PARDO_MERGE_MAX_WEIGHTED];         // m's weights
    pardo_type type;   // the gradient's type (its parts')
} opt_grad;

/* What an update keeps for a gradient of more parts than it merges on the
 * stack: the merged tensor and room for the part pointers. */
typedef struct opt_scratch {
    pardo_tensor *merged;
    const void **parts;
    int cap;
} opt_scratch;

static void opt_scratch_free(void *p) {
    opt_scratch *s = p;
    if (!s) return;
    pardo_tensor_release(s->merged);
    free(s->parts);
    free(s);
}

/* The scratch in the op's state slot (made on first use); NULL with st
 * filled when there is no slot or no memory. */
static opt_scratch *opt_scratch_of(pardo_kernel_ctx *ctx, int n_parts) {
    pardo_op_state *slot = ctx->state;
    if (!slot || (slot->data && slot->free_fn != opt_scratch_free)) {
        pardo_errorf(ctx->st, PARDO_ENOTSUP, "a gradient of %d parts is merged in the op's state, which this run "
                     "does not give", n_parts);
        return NULL;
    }
    if (!slot->data) {
        if (!(slot->data = calloc(1, sizeof(opt_scratch)))) goto oom;
        slot->free_fn = opt_scratch_free;
    }
    opt_scratch *s = slot->data;
    if (s->cap < n_parts) {
        const void **p = realloc(s->parts, sizeof(*p) * (size_t)n_parts);
        if (!p) goto oom;
        s->parts = p;
        s->cap = n_parts;
    }
    return s;
oom:
    pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory merging %d parts", n_parts);
    return NULL;
}

/* Fills g from input 1 (and, for a tensor_array, attr grad_merge and input
 * weight_at, the optional weight_by). */
static int opt_grad_prepare(pardo_kernel_ctx *ctx, int weight_at, opt_grad *g) {
    const pardo_tensor *t = ctx->in[1];
    g->merged = false;
    if (!t->is_array) {
        g->data = pardo_tensor_data(t);
        g->type = pardo_tensor_type(t);
        return PARDO_OK;
    }
    pardo_merge_mode mode;
    int rc = opt_grad_mode(ctx->op, &mode, ctx->st);
    if (rc != PARDO_OK) return rc;
    const char *wb = ctx->op->n_in > weight_at ? ctx->op->in[weight_at] : "";
    const pardo_tensor *weights = ctx->n_in > weight_at ? ctx->in[weight_at] : NULL;
    if (wb[0] && mode != PARDO_MERGE_MEAN)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input %d 'weight_by' weights a mean; attr 'grad_merge' is sum",
                            weight_at);
    if (t->n_parts <= PARDO_MERGE_STACK_PARTS) {
        rc = pardo_merge_prepare_parts(ctx, t, ctx->op->in[1], mode, weights, wb, &g->m, g->parts,
                                       PARDO_MERGE_STACK_PARTS, g->w);
        if (rc != PARDO_OK) return rc;
        g->merged = true;
        g->data = NULL;
        g->type = pardo_tensor_type(g->m.first);
        return PARDO_OK;
    }
    /* more parts than an update merges as it runs: merged first, as the merge op would, into a kept tensor */
    opt_scratch *s = opt_scratch_of(ctx, t->n_parts);
    if (!s) return ctx->st->code;
    pardo_merge_args m;
    if ((rc = pardo_merge_prepare_parts(ctx, t, ctx->op->in[1], mode, weights, wb, &m, s->parts, s->cap, g->w)) !=
        PARDO_OK)
        return rc;
    if (!s->merged || s->merged->dtype != m.first->dtype ||
        !pardo_shape_equal(s->merged->ndim, s->merged->shape, m.first->ndim, m.first->shape)) {
        pardo_tensor_release(s->merged);
        if (!(s->merged = pardo_tensor_new_cpu(m.first->dtype, m.first->ndim, m.first->shape, ctx->st)))
            return ctx->st->code;
    }
    m.y = pardo_tensor_data(s->merged);
    pardo_merge_combine(&m, 0, s->merged->numel);
    g->data = m.y;
    g->type = pardo_tensor_type(s->merged);
    return PARDO_OK;
}

/* The run-time types of a kernel's n inputs into types and ptrs; the
 * gradient's from g. */
static void opt_types(const pardo_kernel_ctx *ctx, const opt_grad *g, int n, pardo_type *types,
                      const pardo_type **ptrs) {
    for (int k = 0; k < n; k++) {
        types[k] = k == 1 ? g->type : pardo_tensor_type(ctx->in[k]);
        ptrs[k] = &types[k];
    }
}

/* Outputs 0..n_out-1 with the types of inputs in_of[k] (in place when the
 * graph names the same vars); NULL entries in out for failures. */
static int opt_outputs(pardo_kernel_ctx *ctx, const int *in_of, int n_out, pardo_tensor **out) {
    for (int k = 0; k < n_out; k++) {
        out[k] = NULL;
        if (k > 0 && !pardo_kernel_wants_output(ctx, k)) continue;
        const pardo_tensor *src = ctx->in[in_of[k]];
        if (!(out[k] = pardo_kernel_output(ctx, k, src->dtype, src->ndim, src->shape))) return ctx->st->code;
    }
    return PARDO_OK;
}

/* Defines the update loops for element type T: sgd_SUF, momentum_SUF and
 * adam_SUF. Each reads element i of its inputs, then writes element i of
 * its outputs; an output pointer may equal an input pointer (in place). An
 * optional state output (v_out, m_out) may be NULL: the new state is then
 * dropped. */
#define OPT_KERNELS(SUF, T)                                                                                            \
    PARDO_SIMD_CLONES static void sgd_##SUF(int64_t n, const void *vp, const void *vg, double lr, double wd,           \
                                            void *vpo) {                                                               \
        const T *p = vp, *g = vg;                                                                                      \
        T *po = vpo;                                                                                                   \
        if (wd == 0)                                                                                                   \
            for (int64_t i = 0; i < n; i++) po[i] = (T)((double)p[i] - lr * (double)g[i]);                             \
        else                                                                                                           \
            for (int64_t i = 0; i < n; i++) po[i] = (T)((double)p[i] - lr * ((double)g[i] + wd * (double)p[i]));       \
    }                                                                                                                  \
    PARDO_SIMD_CLONES static void momentum_##SUF(int64_t n, const void *vp, const void *vg, const void *vv,            \
                                                 double lr, double mu, double wd, bool nesterov, void *vpo,            \
                                                 void *vvo) {                                                          \
        const T *p = vp, *g = vg, *v = vv;                                                                             \
        T *po = vpo, *vo = vvo;                                                                                        \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const double gi = wd == 0 ? (double)g[i] : (double)g[i] + wd * (double)p[i];                               \
            const T vn = (T)(mu * (double)v[i] + gi);                                                                  \
            const double upd = nesterov ? gi + mu * (double)vn : (double)vn;                                           \
            po[i] = (T)((double)p[i] - lr * upd);                                                                      \
            if (vo) vo[i] = vn;                                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
    PARDO_SIMD_CLONES static void adam_##SUF(int64_t n, const void *vp, const void *vg, const void *vm,                \
                                             const void *vv, double step_size, double bc2_sqrt, double b1,             \
                                             double b2, double eps, double wd, double decay, void *vpo, void *vmo,     \
                                             void *vvo) {                                                              \
        const T *p = vp, *g = vg, *m = vm, *v = vv;                                                                    \
        T *po = vpo, *mo = vmo, *vo = vvo;                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const double gi = wd == 0 ? (double)g[i] : (double)g[i] + wd * (double)p[i];                               \
            const T mn = (T)(b1 * (double)m[i] + (1 - b1) * gi);                                                       \
            const T vn = (T)(b2 * (double)v[i] + (1 - b2) * gi * gi);                                                  \
            const double denom = sqrt((double)vn) / bc2_sqrt + eps;                                                    \
            const double pd = decay == 1 ? (double)p[i] : (double)(T)((double)p[i] * decay);                           \
            po[i] = (T)(pd - step_size * (double)mn / denom);                                                          \
            if (mo) mo[i] = mn;                                                                                        \
            if (vo) vo[i] = vn;                                                                                        \
        }                                                                                                              \
    }

OPT_KERNELS(f32, float)
OPT_KERNELS(f64, double)

/* One update over a range of elements: the kernels above applied to
 * [begin, end) of every tensor, so that a big param's update splits over the
 * pool (block 0 of a transpiled graph runs its updates on all threads). */
typedef enum opt_kind { OPT_SGD, OPT_MOMENTUM, OPT_ADAM } opt_kind;

typedef struct opt_job {
    opt_kind kind;
    bool f32;
    const pardo_merge_args *merge; // the gradient as a merge of parts (g is then NULL), or NULL
    const void *p, *g, *s1, *s2; // param, grad, states (velocity; or moment1, moment2)
    void *po, *o1, *o2;          // updated param and states (a NULL state output drops it)
    double lr, mu, b1, b2, eps, bc2_sqrt;
    double wd;    // L2 weight decay added to the gradient (sgd, momentum, adam)
    double decay; // adamw: the param's factor 1 - lr wd before the step (1: none)
    bool nesterov;
} opt_job;

#define AT(ptr, k) ((ptr) ? (void *)((char *)(ptr) + (k)) : NULL)

static void opt_range(void *arg, int64_t begin, int64_t end);

/* The merged gradient of [begin, end) a tile at a time: each tile's parts
 * combined into a buffer on the stack (the bits of the merge op's output),
 * then the update run on it. */
enum { OPT_MERGE_TILE = 512 };

/* sgd on a float32 gradient merged from parts, in one pass: element by
 * element the arithmetic of pardo_merge_combine (in double: part 0 times
 * its weight, plus each next part times its own, divided by mean_of, the
 * part count, when it is not 0 (0: a sum), rounded to float) and then of
 * sgd_f32, so the bits are theirs;
 * MERGED_LANES elements at a time held in registers, where the merge op
 * goes through a tile in memory; a mean over a power of two of parts
 * multiplies by its exact inverse instead of dividing (the same bits,
 * pardo_merge_exact_inverse). x and w: the nx parts that count (nonzero
 * weight), in order. p and po may be the same (in place). */
enum { MERGED_LANES = 16 };
#define SGD_MERGED_LANES(I, L, G_OF)                                                                                   \
    do {                                                                                                               \
        double acc[MERGED_LANES];                                                                                      \
        for (int k = 0; k < (L); k++) acc[k] = (double)x[0][(I) + k] * w[0];                                          \
        for (int q = 1; q < nx; q++)                                                                                   \
            for (int k = 0; k < (L); k++) acc[k] += (double)x[q][(I) + k] * w[q];                                     \
        for (int k = 0; k < (L); k++) {                                                                                \
            const float g = (float)(G_OF(acc[k]));                                                                     \
            const double gd = wd == 0 ? (double)g : (double)g + wd * (double)p[(I) + k];                               \
            po[(I) + k] = (float)((double)p[(I) + k] - lr * gd);                                                       \
        }                                                                                                              \
    } while (0)
#define MERGED_MEAN(a) ((a) / (double)mean_of)
#define MERGED_SCALED(a) ((a) * inv)
#define MERGED_SUM(a) (a)
PARDO_SIMD_CLONES static void sgd_merged_f32(int64_t n, const float *p, const float *const *x, const double *w, int nx,
                                             int mean_of, double lr, double wd, float *po) {
    int64_t i = 0;
    const double inv = pardo_merge_exact_inverse(mean_of);
    if (inv != 0) {
        for (; i + MERGED_LANES <= n; i += MERGED_LANES) SGD_MERGED_LANES(i, MERGED_LANES, MERGED_SCALED);
        SGD_MERGED_LANES(i, n - i, MERGED_SCALED);
    } else if (mean_of != 0) {
        for (; i + MERGED_LANES <= n; i += MERGED_LANES) SGD_MERGED_LANES(i, MERGED_LANES, MERGED_MEAN);
        SGD_MERGED_LANES(i, n - i, MERGED_MEAN);
    } else {
        for (; i + MERGED_LANES <= n; i += MERGED_LANES) SGD_MERGED_LANES(i, MERGED_LANES, MERGED_SUM);
        SGD_MERGED_LANES(i, n - i, MERGED_SUM);
    }
}
#undef SGD_MERGED_LANES
#undef MERGED_MEAN
#undef MERGED_SCALED
#undef MERGED_SUM

/* The sgd of j over [begin, end) in one pass (sgd_merged_f32) where its
 * gradient is a float32 mean or sum of parts; false where j is something
 * else (the tile path then). */
static bool sgd_merged(const opt_job *j, int64_t begin, int64_t end) {
    const pardo_merge_args *m = j->merge;
    if (j->kind != OPT_SGD || !j->f32 || (m->mode != PARDO_MERGE_MEAN && m->mode != PARDO_MERGE_SUM)) return false;
    const float *x[PARDO_MERGE_STACK_PARTS];
    double w[PARDO_MERGE_STACK_PARTS];
    int nx = 0;
    for (int q = 0; q < m->n; q++) {
        if (m->w && m->w[q] == 0) continue; /* the merge skips it */
        x[nx] = (const float *)m->parts[q] + begin;
        w[nx++] = m->w ? m->w[q] : 1.0;
    }
    if (nx == 0) return false;
    const int mean_of = m->mode == PARDO_MERGE_MEAN && !m->w ? m->n : 0;
    sgd_merged_f32(end - begin, (const float *)j->p + begin, x, w, nx, mean_of, j->lr, j->wd, (float *)j->po + begin);
    return true;
}

static void opt_range_merged(const opt_job *j, int64_t begin, int64_t end) {
    if (sgd_merged(j, begin, end)) return;
    const size_t es = j->f32 ? sizeof(float) : sizeof(double);
    const pardo_merge_args *m = j->merge;
    double tile[OPT_MERGE_TILE] __attribute__((aligned(64))); /* room for 512 doubles or floats */
    const void *parts[PARDO_MERGE_STACK_PARTS];
    PARDO_ASSERT(m->n <= PARDO_MERGE_STACK_PARTS);
    pardo_merge_args at = *m;
    at.parts = parts;
    at.y = tile;
    for (int64_t t0 = begin; t0 < end; t0 += OPT_MERGE_TILE) {
        const int64_t len = end - t0 < OPT_MERGE_TILE ? end - t0 : OPT_MERGE_TILE;
        const size_t off = (size_t)t0 * es;
        for (int p = 0; p < m->n; p++) parts[p] = (const char *)m->parts[p] + off;
        pardo_merge_combine(&at, 0, len);
        /* the update on the tile: every tensor from element t0 on, the gradient the tile */
        opt_job one = *j;
        one.merge = NULL;
        one.g = tile;
#define FROM(ptr) ((ptr) ? (void *)((char *)(ptr) + off) : NULL)
        one.p = FROM(j->p);
        one.s1 = FROM(j->s1);
        one.s2 = FROM(j->s2);
        one.po = FROM(j->po);
        one.o1 = FROM(j->o1);
        one.o2 = FROM(j->o2);
#undef FROM
        opt_range(&one, 0, len);
    }
}

static void opt_range(void *arg, int64_t begin, int64_t end) {
    const opt_job *j = arg;
    if (j->merge) {
        opt_range_merged(j, begin, end);
        return;
    }
    const int64_t n = end - begin, k = begin * (j->f32 ? (int64_t)sizeof(float) : (int64_t)sizeof(double));
    switch (j->kind) {
    case OPT_SGD: (j->f32 ? sgd_f32 : sgd_f64)(n, AT(j->p, k), AT(j->g, k), j->lr, j->wd, AT(j->po, k)); break;
    case OPT_MOMENTUM:
        (j->f32 ? momentum_f32 : momentum_f64)(n, AT(j->p, k), AT(j->g, k), AT(j->s1, k), j->lr, j->mu, j->wd,
                                               j->nesterov, AT(j->po, k), AT(j->o1, k));
        break;
    case OPT_ADAM:
        (j->f32 ? adam_f32 : adam_f64)(n, AT(j->p, k), AT(j->g, k), AT(j->s1, k), AT(j->s2, k), j->lr, j->bc2_sqrt,
                                       j->b1, j->b2, j->eps, j->wd, j->decay, AT(j->po, k), AT(j->o1, k),
                                       AT(j->o2, k));
        break;
    }
}
#undef AT

enum { OPT_PARALLEL_MIN = 1 << 15 }; /* elements: below this a fork costs more than it saves */

/* Runs j over the param's n elements, on the kernel's threads when n is
 * big, in blocks of OPT_PARALLEL_MIN elements handed out as threads ask;
 * the gradient's parts merged as it goes where g says so. */
static int opt_run(pardo_kernel_ctx *ctx, const opt_grad *g, opt_job *j, int64_t n) {
    pardo_kernel_ctx one = *ctx;
    if (n < OPT_PARALLEL_MIN) one.nthreads = 1;
    j->merge = g->merged ? &g->m : NULL;
    return pardo_parallel_for_blocks(&one, n, OPT_PARALLEL_MIN, opt_range, j);
}

/* What every update takes besides its own: the optional last input and
 * the attr of a tensor_array gradient. */
#define OPT_WEIGHT_BY_IN                                                                                               \
    {"weight_by", "with grad a tensor_array: the split whose parts' sizes weight the mean (as merge's weight_by; "   \
                  "\"\" or left out: a plain mean)", true, false}
#define OPT_GRAD_MERGE_ATTR                                                                                            \
    {"grad_merge", PARDO_ATTR_STRING, "\"mean\"", "with grad a tensor_array of parts: how they combine, mean or sum"}

#define OPT_WEIGHT_DECAY_ATTR(DFLT, WHAT) {"weight_decay", PARDO_ATTR_FLOAT, DFLT, WHAT}
#define OPT_L2_DOC "L2 penalty: wd * param added to the gradient (torch.optim's weight_decay), >= 0"

/* attr weight_decay (default dflt), checked >= 0 and finite. */
static int opt_weight_decay(const pardo_op *op, double dflt, double *wd, pardo_status *st) {
    int rc = pardo_attr_float(op, "weight_decay", dflt, wd, st);
    if (rc == PARDO_OK && !(*wd >= 0 && isfinite(*wd)))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'weight_decay' is %g, expected a number >= 0", *wd);
    return rc;
}

static const pardo_arg_def opt_param_out = {"param", "the updated param (name the input var: updated in place)", false,
                                            false};

/* ---- sgd ---- */

#define OPT_GRAD_IN {"grad", "its gradient, param's dtype and shape (or a tensor_array of parts, merged)", false, false}

static const pardo_arg_def sgd_in[] = {
    {"param", "the param (float32 or float64)", false, false},
    OPT_GRAD_IN,
    {"lr", "learning rate, float scalar ([] or [1])", false, false},
    OPT_WEIGHT_BY_IN,
};
static const pardo_attr_def sgd_attrs[] = {OPT_WEIGHT_DECAY_ATTR("0", OPT_L2_DOC), OPT_GRAD_MERGE_ATTR};
static const int sgd_same[] = {1};
static const char *const sgd_names[] = {"input 1 'grad'"};

static int sgd_infer(pardo_infer_ctx *ctx) {
    double wd;
    int rc = opt_weight_decay(ctx->op, 0, &wd, ctx->st);
    if (rc == PARDO_OK) rc = opt_check(ctx->op, ctx->in, sgd_same, sgd_names, 1, 2, ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}

static int sgd_cpu(pardo_kernel_ctx *ctx) {
    pardo_type types[3];
    const pardo_type *tp[3];
    pardo_tensor *out[1];
    static const int in_of[] = {0};
    opt_grad g;
    int rc = opt_grad_prepare(ctx, 3, &g);
    if (rc != PARDO_OK) return rc;
    opt_types(ctx, &g, 3, types, tp);
    double wd;
    rc = opt_weight_decay(ctx->op, 0, &wd, ctx->st);
    if (rc == PARDO_OK) rc = opt_check(ctx->op, tp, sgd_same, sgd_names, 1, 2, ctx->st);
    if (rc == PARDO_OK) rc = opt_outputs(ctx, in_of, 1, out);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *p = ctx->in[0];
    opt_job j = {.kind = OPT_SGD, .f32 = p->dtype == PARDO_F32, .p = pardo_tensor_data(p),
                 .g = g.data, .po = pardo_tensor_data(out[0]), .lr = pardo_tensor_get_f64(ctx->in[2], 0), .wd = wd};
    return opt_run(ctx, &g, &j, p->numel);
}

const pardo_op_def pardo_op_sgd = {
    .type = "sgd",
    .doc = "param -= lr * (grad + weight_decay * param), in place (torch.optim.SGD)",
    .inputs = sgd_in,
    .n_inputs = 4,
    .outputs = &opt_param_out,
    .n_outputs = 1,
    .attrs = sgd_attrs,
    .n_attrs = 2,
    .infer = sgd_infer,
    .cpu = sgd_cpu,
    .cuda = pardo_cuda_sgd,
    .inplace = true,
    .array_ok = 2u,
    .array_in = 1u << 3, /* weight_by */
};

/* ---- momentum ---- */

static const pardo_arg_def momentum_in[] = {
    {"param", "the param (float32 or float64)", false, false},
    OPT_GRAD_IN,
    {"velocity", "momentum buffer (state, zeros at first), param's dtype and shape", false, false},
    {"lr", "learning rate, float scalar ([] or [1])", false, false},
    OPT_WEIGHT_BY_IN,
};
static const pardo_arg_def momentum_out[] = {
    {"param", "the updated param (name the input var: updated in place)", false, false},
    {"velocity", "the updated buffer (name the input var)", true, false},
};
static const pardo_attr_def momentum_attrs[] = {
    {"mu", PARDO_ATTR_FLOAT, "0.9", "momentum factor"},
    {"nesterov", PARDO_ATTR_BOOL, "false", "Nesterov momentum: step along grad + mu * velocity"},
    OPT_WEIGHT_DECAY_ATTR("0", OPT_L2_DOC),
    OPT_GRAD_MERGE_ATTR,
};
static const int momentum_same[] = {1, 2};
static const char *const momentum_names[] = {"input 1 'grad'", "input 2 'velocity'"};

static int momentum_infer(pardo_infer_ctx *ctx) {
    double mu;
    bool nesterov;
    double wd;
    int rc = pardo_attr_float(ctx->op, "mu", 0.9, &mu, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "nesterov", false, &nesterov, ctx->st);
    if (rc == PARDO_OK) rc = opt_weight_decay(ctx->op, 0, &wd, ctx->st);
    if (rc == PARDO_OK) rc = opt_check(ctx->op, ctx->in, momentum_same, momentum_names, 2, 3, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    if (ctx->n_out > 1) ctx->out[1] = *ctx->in[2];
    return PARDO_OK;
}

static int momentum_cpu(pardo_kernel_ctx *ctx) {
    pardo_type types[4];
    const pardo_type *tp[4];
    pardo_tensor *out[2];
    static const int in_of[] = {0, 2};
    double mu;
    bool nesterov;
    opt_grad g;
    int rc = opt_grad_prepare(ctx, 4, &g);
    if (rc != PARDO_OK) return rc;
    opt_types(ctx, &g, 4, types, tp);
    double wd;
    rc = pardo_attr_float(ctx->op, "mu", 0.9, &mu, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "nesterov", false, &nesterov, ctx->st);
    if (rc == PARDO_OK) rc = opt_weight_decay(ctx->op, 0, &wd, ctx->st);
    if (rc == PARDO_OK) rc = opt_check(ctx->op, tp, momentum_same, momentum_names, 2, 3, ctx->st);
    if (rc == PARDO_OK) rc = opt_outputs(ctx, in_of, ctx->n_out < 2 ? ctx->n_out : 2, out);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *p = ctx->in[0];
    void *vo = ctx->n_out > 1 && out[1] ? pardo_tensor_data(out[1]) : NULL;
    opt_job j = {.kind = OPT_MOMENTUM, .f32 = p->dtype == PARDO_F32, .p = pardo_tensor_data(p),
                 .g = g.data, .s1 = pardo_tensor_data(ctx->in[2]),
                 .po = pardo_tensor_data(out[0]), .o1 = vo, .lr = pardo_tensor_get_f64(ctx->in[3], 0), .mu = mu,
                 .wd = wd, .nesterov = nesterov};
    return opt_run(ctx, &g, &j, p->numel);
}

const pardo_op_def pardo_op_momentum = {
    .type = "momentum",
    .doc = "SGD with momentum, in place (torch.optim.SGD, dampening 0): g += weight_decay param; v = mu v + g; "
           "param -= lr * (v or g + mu v)",
    .inputs = momentum_in,
    .n_inputs = 5,
    .outputs = momentum_out,
    .n_outputs = 2,
    .attrs = momentum_attrs,
    .n_attrs = 4,
    .infer = momentum_infer,
    .cpu = momentum_cpu,
    .cuda = pardo_cuda_momentum,
    .inplace = true,
    .array_ok = 2u,
    .array_in = 1u << 4, /* weight_by */
};

/* ---- adam ---- */

static const pardo_arg_def adam_in[] = {
    {"param", "the param (float32 or float64)", false, false},
    OPT_GRAD_IN,
    {"m", "first moment (state, zeros at first), param's dtype and shape", false, false},
    {"v", "second moment (state, zeros at first), param's dtype and shape", false, false},
    {"step", "steps taken so far (state, int64 or float scalar, 0 at first)", false, false},
    {"lr", "learning rate, float scalar ([] or [1])", false, false},
    OPT_WEIGHT_BY_IN,
};
static const pardo_arg_def adam_out[] = {
    {"param", "the updated param (name the input var: updated in place)", false, false},
    {"m", "the updated first moment (name the input var)", true, false},
    {"v", "the updated second moment (name the input var)", true, false},
    {"step", "step + 1 (name the input var)", true, false},
};
#define ADAM_ATTRS                                                                                                     \
    {"beta1", PARDO_ATTR_FLOAT, "0.9", "decay of the first moment, in [0, 1)"},                                        \
        {"beta2", PARDO_ATTR_FLOAT, "0.999", "decay of the second moment, in [0, 1)"},                                 \
        {"epsilon", PARDO_ATTR_FLOAT, "1e-08", "added to the denominator, >= 0"}
static const pardo_attr_def adam_attrs[] = {ADAM_ATTRS, OPT_WEIGHT_DECAY_ATTR("0", OPT_L2_DOC), OPT_GRAD_MERGE_ATTR};
static const pardo_attr_def adamw_attrs[] = {
    ADAM_ATTRS,
    OPT_WEIGHT_DECAY_ATTR("0.01", "decoupled weight decay: param *= 1 - lr * weight_decay before the step "
                                  "(torch.optim.AdamW), >= 0"),
    OPT_GRAD_MERGE_ATTR,
};
#define ADAMW_DEFAULT_DECAY 0.01

/* True for adamw (decoupled decay), false for adam (L2 on the gradient). */
static bool adam_decoupled(const pardo_op *op) { return strcmp(op->type, "adamw") == 0; }
static const int adam_same[] = {1, 2, 3};
static const char *const adam_names[] = {"input 1 'grad'", "input 2 'm'", "input 3 'v'"};

static int adam_attrs_get(const pardo_op *op, double *b1, double *b2, double *eps, double *wd, pardo_status *st) {
    int rc = opt_weight_decay(op, adam_decoupled(op) ? ADAMW_DEFAULT_DECAY : 0, wd, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "beta1", 0.9, b1, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "beta2", 0.999, b2, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "epsilon", 1e-8, eps, st);
    if (rc != PARDO_OK) return rc;
    if (!(*b1 >= 0 && *b1 < 1)) return pardo_errorf(st, PARDO_EINVAL, "attr 'beta1' is %g, expected [0, 1)", *b1);
    if (!(*b2 >= 0 && *b2 < 1)) return pardo_errorf(st, PARDO_EINVAL, "attr 'beta2' is %g, expected [0, 1)", *b2);
    if (!(*eps >= 0)) return pardo_errorf(st, PARDO_EINVAL, "attr 'epsilon' is %g, expected >= 0", *eps);
    return PARDO_OK;
}

static int adam_check(const pardo_op *op, const pardo_type *const *in, double *b1, double *b2, double *eps,
                      double *wd, pardo_status *st) {
    int rc = adam_attrs_get(op, b1, b2, eps, wd, st);
    if (rc == PARDO_OK) rc = opt_check(op, in, adam_same, adam_names, 3, 5, st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_scalar(in[4], "input 4 'step'", step_dtypes, 4, st);
    return rc;
}

static int adam_infer(pardo_infer_ctx *ctx) {
    double b1, b2, eps, wd;
    static const int in_of[] = {0, 2, 3, 4};
    int rc = adam_check(ctx->op, ctx->in, &b1, &b2, &eps, &wd, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < ctx->n_out && k < 4; k++) ctx->out[k] = *ctx->in[in_of[k]];
    return PARDO_OK;
}

static int adam_cpu(pardo_kernel_ctx *ctx) {
    pardo_type types[6];
    const pardo_type *tp[6];
    pardo_tensor *out[4] = {NULL, NULL, NULL, NULL};
    static const int in_of[] = {0, 2, 3, 4};
    double b1, b2, eps, wd;
    opt_grad g;
    int rc = opt_grad_prepare(ctx, 6, &g);
    if (rc != PARDO_OK) return rc;
    opt_types(ctx, &g, 6, types, tp);
    rc = adam_check(ctx->op, tp, &b1, &b2, &eps, &wd, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *p = ctx->in[0], *step = ctx->in[4];
    const double t = pardo_tensor_get_f64(step, 0) + 1, lr = pardo_tensor_get_f64(ctx->in[5], 0);
    if (!(t >= 1) || t > 9007199254740992.0) /* 2^53: beyond it t + 1 == t */
        return pardo_errorf(ctx->st, PARDO_ERUNTIME, "input 4 'step' is %g, expected a count >= 0", t - 1);
    if ((rc = opt_outputs(ctx, in_of, ctx->n_out < 4 ? ctx->n_out : 4, out)) != PARDO_OK) return rc;
    const double step_size = lr / (1 - pow(b1, t)), bc2_sqrt = sqrt(1 - pow(b2, t));
    opt_job j = {.kind = OPT_ADAM, .f32 = p->dtype == PARDO_F32, .p = pardo_tensor_data(p),
                 .g = g.data, .s1 = pardo_tensor_data(ctx->in[2]),
                 .s2 = pardo_tensor_data(ctx->in[3]), .po = pardo_tensor_data(out[0]),
                 .o1 = out[1] ? pardo_tensor_data(out[1]) : NULL, .o2 = out[2] ? pardo_tensor_data(out[2]) : NULL,
                 .lr = step_size, .b1 = b1, .b2 = b2, .eps = eps, .bc2_sqrt = bc2_sqrt};
    if (adam_decoupled(ctx->op)) {
        j.decay = 1 - lr * wd;
    } else {
        j.decay = 1;
        j.wd = wd;
    }
    if ((rc = opt_run(ctx, &g, &j, p->numel)) != PARDO_OK) return rc;
    if (out[3]) pardo_tensor_set_f64(out[3], 0, t);
    return PARDO_OK;
}

/* adam and adamw: one kernel, told apart by the type (adam_decoupled). */
#define ADAM_DEF(TYPE, DOC, ATTRS, CUDA)                                                                               \
    {                                                                                                                  \
        .type = TYPE, .doc = DOC, .inputs = adam_in, .n_inputs = 7, .outputs = adam_out, .n_outputs = 4,               \
        .attrs = ATTRS, .n_attrs = 5, .infer = adam_infer, .cpu = adam_cpu, .cuda = CUDA, .inplace = true,             \
        .array_ok = 2u, .array_in = 1u << 6, /* weight_by */                                                           \
    }
const pardo_op_def pardo_op_adam =
    ADAM_DEF("adam",
             "Adam, in place (torch.optim.Adam): g += weight_decay param; bias-corrected moments m, v; param -= lr "
             "m_hat / (sqrt(v_hat) + eps)",
             adam_attrs, pardo_cuda_adam);
const pardo_op_def pardo_op_adamw =
    ADAM_DEF("adamw", "AdamW, in place (torch.optim.AdamW): param *= 1 - lr weight_decay, then adam's step without L2",
             adamw_attrs, pardo_cuda_adamw);
#undef ADAM_DEF

/* ---- clip_grad_norm ---- */

static const pardo_arg_def clip_in[] = {
    {"grads", "the gradients to clip together (float32 or float64, any shapes)", false, true},
};
static const pardo_arg_def clip_out[] = {
    {"grads", "the same gradients scaled (name the input vars: scaled in place)", false, true},
};
static const pardo_attr_def clip_attrs[] = {
    {"max_norm", PARDO_ATTR_FLOAT, NULL, "the largest L2 norm of all the gradients together, > 0"},
};
#define CLIP_EPS 1e-6 /* torch.nn.utils.clip_grad_norm_'s */

/* attr max_norm (required, > 0) and one output per gradient. */
static int clip_check(const pardo_op *op, int n_in, int n_out, double *max_norm, pardo_status *st) {
    if (!pardo_attr(op, "max_norm")) return pardo_errorf(st, PARDO_EINVAL, "attr 'max_norm' is required");
    int rc = pardo_attr_float(op, "max_norm", 0, max_norm, st);
    if (rc == PARDO_OK && !(*max_norm > 0 && isfinite(*max_norm)))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'max_norm' is %g, expected a number > 0", *max_norm);
    if (rc == PARDO_OK && n_out != n_in)
        return pardo_errorf(st, PARDO_EINVAL, "%d outputs for %d gradients, expected one each", n_out, n_in);
    return rc;
}

static int clip_infer(pardo_infer_ctx *ctx) {
    double max_norm;
    int rc = clip_check(ctx->op, ctx->n_in, ctx->n_out, &max_norm, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < ctx->n_in; k++) {
        char what[48];
        snprintf(what, sizeof what, "input %d", k);
        if ((rc = pardo_nn_expect_float(ctx->in[k], what, ctx->st)) != PARDO_OK) return rc;
        ctx->out[k] = *ctx->in[k];
    }
    return PARDO_OK;
}

/* Sum of squares of n elements of type T in double, in 8 lanes (PARDO_LANE_SUM). */
#define CLIP_SUMSQ(SUF, T)                                                                                             \
    static double clip_sumsq_##SUF(const T *g, int64_t n) {                                                           \
        double s;                                                                                                      \
        PARDO_LANE_SUM(s, 8, n, (double)g[j] * (double)g[j]);                                                          \
        return s;                                                                                                      \
    }                                                                                                                  \
    PARDO_SIMD_CLONES static void clip_scale_##SUF(const T *g, int64_t n, double coef, T *out) {                     \
        const T c = (T)coef;                                                                                           \
        for (int64_t i = 0; i < n; i++) out[i] = g[i] * c;                                                             \
    }
CLIP_SUMSQ(f32, float)
CLIP_SUMSQ(f64, double)

static int clip_cpu(pardo_kernel_ctx *ctx) {
    double max_norm, sumsq = 0;
    int rc = clip_check(ctx->op, ctx->n_in, ctx->n_out, &max_norm, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < ctx->n_in; k++) {
        const pardo_tensor *g = ctx->in[k];
        if (g->is_array || !pardo_dtype_is_float(g->dtype))
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d is %s, expected a float32 or float64 tensor", k,
                                g->is_array ? "a tensor_array" : pardo_dtype_name(g->dtype));
        sumsq += g->dtype == PARDO_F32 ? clip_sumsq_f32(pardo_tensor_data(g), g->numel)
                                       : clip_sumsq_f64(pardo_tensor_data(g), g->numel);
    }
    /* torch scales by min(1, coef) always; a factor 1 changes nothing, so the gradients are left as they are */
    const double coef = max_norm / (sqrt(sumsq) + CLIP_EPS);
    for (int k = 0; k < ctx->n_in; k++) {
        const pardo_tensor *g = ctx->in[k];
        pardo_tensor *o = pardo_kernel_output(ctx, k, g->dtype, g->ndim, g->shape);
        if (!o) return ctx->st->code;
        if (coef >= 1) {
            if (o != g) memcpy(pardo_tensor_data(o), pardo_tensor_data(g), (size_t)g->numel * pardo_dtype_size(g->dtype));
        } else if (g->dtype == PARDO_F32) {
            clip_scale_f32(pardo_tensor_data(g), g->numel, coef, pardo_tensor_data(o));
        } else {
            clip_scale_f64(pardo_tensor_data(g), g->numel, coef, pardo_tensor_data(o));
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_clip_grad_norm = {
    .type = "clip_grad_norm",
    .doc = "scales the gradients, in place, by min(1, max_norm / (total + 1e-6)), total the L2 norm of all of them "
           "together (torch.nn.utils.clip_grad_norm_)",
    .inputs = clip_in,
    .n_inputs = 1,
    .outputs = clip_out,
    .n_outputs = 1,
    .attrs = clip_attrs,
    .n_attrs = 1,
    .infer = clip_infer,
    .cpu = clip_cpu,
    .inplace = true,
};
