/* parallel.c - the parallel ops (SPEC section 2, "Split, Merge, ParallelDo"):
 * split cuts a tensor into a tensor_array of parts, parallel_do runs a block
 * once per part on the thread pool, merge joins the parts again.
 * all_reduce, in a part block, gives every part the sum over the parts of
 * its inputs (cross-part statistics: batch_norm's sync form): parallel_do
 * runs such a block in segments, the parts joining at each all_reduce,
 * which the forking thread computes in part order before the next segment
 * forks (a barrier inside a kernel would deadlock when parts outnumber the
 * threads). Outside a part block it copies its inputs (one part).
 *
 * Parts along axis 0 are views of the input's rows (pardo_tensor_view_of: no
 * copy; each part holds the input) where no op can write them: every
 * parallel_do that binds them leaves its part var unwritten, and no other
 * op writes the array. Otherwise, and along another axis, parts are copies
 * (one memcpy per part, one per outer row along another axis). Parts are
 * reused from run to run, as are parallel_do's child scopes and everything
 * in them, so the steady state allocates nothing. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/executor.h"
#include "merge_combine.h"
#include "op.h"
#include "rank_merge.h"
#include "core/scope.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

/* Element counts before and after dim ax, in elements. */
static void outer_inner(const pardo_tensor *t, int ax, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < ax; d++) *outer *= t->shape[d];
    for (int d = ax + 1; d < t->ndim; d++) *inner *= t->shape[d];
}

/* ---- split ---- */

static const pardo_arg_def split_in[] = {{"X", "the tensor to cut", false, false}};
static const pardo_arg_def split_out[] = {{"XA", "tensor_array of the parts", false, false}};
static const pardo_attr_def split_attrs[] = {
    {"parts", PARDO_ATTR_INT, "0", "number of parts; 0: the run's thread count"},
    {"axis", PARDO_ATTR_INT, "0", "dim to cut along (negative counts from the end)"},
};

static int split_attrs_get(const pardo_op *op, int ndim, int64_t *parts, int *ax, pardo_status *st) {
    int64_t axis;
    int rc;
    if ((rc = pardo_attr_int(op, "parts", 0, parts, st)) != PARDO_OK) return rc;
    if ((rc = pardo_attr_int(op, "axis", 0, &axis, st)) != PARDO_OK) return rc;
    if (*parts < 0 || *parts > 1 << 20)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'parts' is %lld, expected 0 (the thread count) or a count >= 1",
                            (long long)*parts);
    if (ndim == 0) return pardo_errorf(st, PARDO_ESHAPE, "cannot split a scalar: X needs at least one dim");
    if (ndim < 0) {
        *ax = 0;
        return PARDO_OK;
    }
    return pardo_normalize_axis(axis, ndim, "axis", ax, st);
}

static int split_infer(pardo_infer_ctx *ctx) {
    int64_t parts;
    int ax;
    int rc = split_attrs_get(ctx->op, ctx->in[0]->ndim, &parts, &ax, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    if (ctx->out[0].ndim > 0) ctx->out[0].shape[ax] = -1; /* parts differ in size */
    return PARDO_OK;
}

/* The copies of one split: part i takes rows [start[i], start[i] + rows[i])
 * of each outer row of src. */
typedef struct split_job {
    const char *src;
    pardo_tensor *a;     // the tensor_array, its parts allocated
    int64_t outer, rows; // outer rows of src; rows of src along the axis
    size_t row_bytes;    // bytes of one row along the axis
    int64_t base, rem;   // part i has base + (i < rem) rows
} split_job;

static void split_copy(void *arg, int64_t begin, int64_t end) {
    const split_job *j = arg;
    for (int64_t i = begin; i < end; i++) {
        const int64_t r = j->base + (i < j->rem), start = i * j->base + (i < j->rem ? i : j->rem);
        char *dst = pardo_tensor_data(pardo_tensor_array_part(j->a, (int)i));
        for (int64_t o = 0; o < j->outer && r > 0; o++)
            memcpy(dst + (size_t)(o * r) * j->row_bytes, j->src + (size_t)(o * j->rows + start) * j->row_bytes,
                   (size_t)r * j->row_bytes);
    }
}

/* True when no op of p can write the parts of block b's tensor_array
 * `array` (split op `self` fills it from `input`) or the input under them:
 * no other op of b writes the array or the input (an in-place op would
 * write through the views), and every parallel_do of b binding the array
 * through parts_in runs a block that neither writes the part var nor runs
 * blocks of its own. */
static bool parts_read_only(const pardo_program *p, int b, int self, const char *input, const char *array) {
    const pardo_block *blk = &p->blocks[b];
    for (int i = 0; i < blk->n_ops; i++) {
        const pardo_op *op = &blk->ops[i];
        if (i != self && (pardo_op_writes(op, array) || pardo_op_writes(op, input))) return false;
        const pardo_value *pin = strcmp(op->type, "parallel_do") == 0 ? pardo_attr(op, "parts_in") : NULL;
        int64_t pb = -1;
        pardo_status ignored;
        for (int k = 0; pin && k < pin->n; k++) {
            if (pin->items[k].kind != PARDO_V_STRING || strcmp(pin->items[k].string, array) != 0) continue;
            if (pardo_attr_int(op, "block", -1, &pb, &ignored) != PARDO_OK || pb <= 0 || pb >= p->n_blocks)
                return false;
            const pardo_block *part = &p->blocks[pb];
            for (int q = 0; q < part->n_ops; q++)
                if (pardo_op_writes(&part->ops[q], pin->keys[k]) || pardo_attr(&part->ops[q], "block")) return false;
        }
    }
    return true;
}

/* What split keeps in its op state: whether its parts may be views. */
typedef struct split_state {
    bool views;
} split_state;

/* Whether this split's parts may be views of its input (decided on the
 * first run). Block 0 only: there one thread runs the op at a time (a
 * split inside a part block would share its op state between parts). */
static bool split_views(pardo_kernel_ctx *ctx) {
    pardo_op_state *slot = ctx->block == 0 ? ctx->state : NULL;
    if (!slot) return false;
    if (!slot->data) {
        split_state *k = calloc(1, sizeof(*k));
        if (!k) return false;
        k->views = parts_read_only(ctx->prog, ctx->block, ctx->op_index, ctx->op->in[0], ctx->op->out[0]);
        slot->data = k;
        slot->free_fn = free;
    }
    return ((const split_state *)slot->data)->views;
}

/* Below this many bytes a split copies on the calling thread. */
#define SPLIT_PAR_MIN_BYTES (64 * 1024)

/* Allocates (or reuses) the parts on the calling thread, then copies them
 * on the pool, each thread a run of whole parts: with as many parts as
 * threads (split just before a parallel_do), the thread that copies part i
 * is most often the one that then runs it, and the workers are awake when
 * the parts are handed out. */
static int split_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    int64_t parts;
    int ax;
    int rc = split_attrs_get(ctx->op, x->ndim, &parts, &ax, ctx->st);
    if (rc != PARDO_OK) return rc;
    int n = parts > 0 ? (int)parts : ctx->nparts_default > 0 ? ctx->nparts_default : 1;
    pardo_tensor *a = pardo_kernel_output_array(ctx, 0, x->dtype, n);
    if (!a) return ctx->st->code;
    split_job j = {.a = a, .rows = x->shape[ax], .base = x->shape[ax] / n, .rem = x->shape[ax] % n};
    int64_t inner;
    outer_inner(x, ax, &j.outer, &inner);
    j.row_bytes = (size_t)inner * pardo_dtype_size(x->dtype);
    j.src = pardo_tensor_data(x);
    const bool views = j.outer == 1 && split_views(ctx);
    int64_t start = 0; /* part i's first row */
    for (int i = 0; i < n; i++) {
        int64_t shape[PARDO_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        shape[ax] = j.base + (i < j.rem); /* larger parts first */
        pardo_tensor *p = pardo_tensor_array_part(a, i);
        /* a view is never written: where parts are copies now, it is replaced */
        if (!(p && atomic_load(&p->refs) == 1 && p->dtype == x->dtype && (views || !p->base) &&
              pardo_shape_equal(p->ndim, p->shape, x->ndim, shape))) {
            if (!(p = pardo_tensor_new(x->dtype, x->ndim, shape, ctx->st))) return ctx->st->code;
            pardo_tensor_array_set_part(a, i, p);
        }
        if (views ? pardo_tensor_view_of(p, x, start * inner, ctx->st) != PARDO_OK
                  : !pardo_tensor_mutable_cpu(p, ctx->st))
            return ctx->st->code;
        start += shape[ax];
    }
    if (views) return PARDO_OK;
    if (x->nbytes < SPLIT_PAR_MIN_BYTES) {
        split_copy(&j, 0, n);
        return PARDO_OK;
    }
    return pardo_parallel_for(ctx, n, split_copy, &j);
}

const pardo_op_def pardo_op_split = {
    .type = "split",
    .doc = "XA = X cut along axis into parts whose sizes differ by at most one, larger first",
    .inputs = split_in,
    .n_inputs = 1,
    .outputs = split_out,
    .n_outputs = 1,
    .attrs = split_attrs,
    .n_attrs = 2,
    .infer = split_infer,
    .cpu = split_cpu,
    .array_out = 1u,
};

/* ---- merge ---- */

static const pardo_arg_def merge_in[] = {
    {"A", "tensor_array of parts", false, false},
    {"W", "the split output weight_by names (optional: listing it shows the dependency)", true, false},
};
static const pardo_arg_def merge_out[] = {{"Y", "the merged tensor", false, false}};
static const pardo_attr_def merge_attrs[] = {
    {"mode", PARDO_ATTR_STRING, NULL, "mean, sum, max, min (elementwise over parts) or concat"},
    {"axis", PARDO_ATTR_INT, "0", "concat: dim to join along"},
    {"weight_by", PARDO_ATTR_STRING, "\"\"", "mean: a split output; part i weighs its share of the split batch"},
};

static int merge_attrs_get(const pardo_op *op, int ndim, pardo_merge_mode *mode, int *ax, const char **weight_by,
                           pardo_status *st) {
    static const char *const names[] = {"mean", "sum", "max", "min", "concat"};
    const char *m;
    int64_t axis;
    int rc;
    if ((rc = pardo_attr_string(op, "mode", "", &m, st)) != PARDO_OK) return rc;
    if ((rc = pardo_attr_int(op, "axis", 0, &axis, st)) != PARDO_OK) return rc;
    if ((rc = pardo_attr_string(op, "weight_by", "", weight_by, st)) != PARDO_OK) return rc;
    int found = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(m, names[i]) == 0) found = i;
    if (found < 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'mode' is \"%s\", expected mean, sum, max, min or concat", m);
    *mode = (pardo_merge_mode)found;
    if ((*weight_by)[0] && *mode != PARDO_MERGE_MEAN)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'weight_by' weights a mean; mode is %s", m);
    *ax = 0;
    if (*mode != PARDO_MERGE_CONCAT || ndim < 0) return PARDO_OK;
    if (ndim == 0) return pardo_errorf(st, PARDO_ESHAPE, "concat needs parts with at least one dim");
    return pardo_normalize_axis(axis, ndim, "axis", ax, st);
}

static int merge_infer(pardo_infer_ctx *ctx) {
    pardo_merge_mode mode;
    int ax;
    const char *wb;
    const pardo_type *a = ctx->in[0];
    int rc = merge_attrs_get(ctx->op, a->ndim, &mode, &ax, &wb, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (mode == PARDO_MERGE_MEAN && !pardo_dtype_is_float(a->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "mode mean needs float parts, got %s", pardo_dtype_name(a->dtype));
    if (mode == PARDO_MERGE_SUM && a->dtype == PARDO_BOOL)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "mode sum needs numeric parts, got bool");
    ctx->out[0] = *a;
    if (mode == PARDO_MERGE_CONCAT && a->ndim > 0) ctx->out[0].shape[ax] = -1;
    return PARDO_OK;
}

/* pardo_parallel_for's shape of pardo_merge_combine. */
static void merge_range(void *arg, int64_t begin, int64_t end) { pardo_merge_combine(arg, begin, end); }

static int merge_concat(pardo_kernel_ctx *ctx, const pardo_tensor *a, int ax) {
    const pardo_tensor *p0 = a->parts[0];
    int64_t shape[PARDO_MAX_DIMS], total = 0, outer, inner;
    memcpy(shape, p0->shape, sizeof shape);
    for (int p = 0; p < a->n_parts; p++) {
        const pardo_tensor *t = a->parts[p];
        for (int d = 0; d < p0->ndim; d++)
            if (d != ax && t->shape[d] != p0->shape[d]) {
                char s0[160], s1[160];
                return pardo_errorf(ctx->st, PARDO_ESHAPE, "concat along axis %d: part %d is %s but part 0 is %s", ax,
                                    p, pardo_shape_str(t->ndim, t->shape, s1, sizeof s1),
                                    pardo_shape_str(p0->ndim, p0->shape, s0, sizeof s0));
            }
        total += t->shape[ax];
    }
    shape[ax] = total;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, p0->dtype, p0->ndim, shape);
    if (!y) return ctx->st->code;
    outer_inner(p0, ax, &outer, &inner);
    size_t row_bytes = (size_t)inner * pardo_dtype_size(p0->dtype);
    char *dst = pardo_tensor_data(y);
    int64_t start = 0;
    for (int p = 0; p < a->n_parts; p++) {
        const pardo_tensor *t = a->parts[p];
        int64_t r = t->shape[ax];
        const char *src = pardo_tensor_data(t);
        for (int64_t o = 0; o < outer && r > 0; o++)
            memcpy(dst + (size_t)(o * total + start) * row_bytes, src + (size_t)(o * r) * row_bytes,
                   (size_t)r * row_bytes);
        start += r;
    }
    return PARDO_OK;
}

/* Per-part weights of a weighted mean: part i's share of the split's
 * elements (its rows over all rows, the other dims being equal). wa is the
 * split's tensor_array named weight_by (NULL: it has no value). */
static int merge_weights(pardo_kernel_ctx *ctx, const pardo_tensor *wa, const char *weight_by, int n, double *w) {
    if (!wa) return pardo_errorf(ctx->st, PARDO_ENOTFOUND, "weight_by '%s' has no value at run time", weight_by);
    if (!wa->is_array)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "weight_by '%s' is a tensor, expected a tensor_array", weight_by);
    if (wa->n_parts != n)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "weight_by '%s' has %d parts, the merged tensor_array %d", weight_by,
                            wa->n_parts, n);
    double total = 0;
    for (int p = 0; p < n; p++) {
        if (!wa->parts[p])
            return pardo_errorf(ctx->st, PARDO_ERUNTIME, "weight_by '%s': part %d is unset", weight_by, p);
        w[p] = (double)wa->parts[p]->numel;
        total += w[p];
    }
    if (total <= 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "weight_by '%s': the split batch is empty", weight_by);
    for (int p = 0; p < n; p++) w[p] /= total;
    return PARDO_OK;
}

enum { MERGE_PARALLEL_MIN = 1 << 15 };

static const char *merge_mode_name(pardo_merge_mode mode) {
    return mode == PARDO_MERGE_MEAN ? "mean" : mode == PARDO_MERGE_SUM ? "sum" : mode == PARDO_MERGE_MAX ? "max" : "min";
}

int pardo_merge_prepare_parts(pardo_kernel_ctx *ctx, const pardo_tensor *a, const char *a_name, pardo_merge_mode mode,
                              const pardo_tensor *weights, const char *weight_by, pardo_merge_args *m,
                              const void **part_data, int cap, double *w) {
    int n = a->n_parts, rc;
    if (n == 0) return pardo_errorf(ctx->st, PARDO_ERUNTIME, "tensor_array '%s' has no parts", a_name);
    for (int p = 0; p < n; p++)
        if (!a->parts[p]) return pardo_errorf(ctx->st, PARDO_ERUNTIME, "tensor_array '%s': part %d is unset", a_name, p);
    const pardo_tensor *p0 = a->parts[0];
    if (mode == PARDO_MERGE_CONCAT) return pardo_errorf(ctx->st, PARDO_ENOTSUP, "concat is not elementwise");
    if (n > cap) return pardo_errorf(ctx->st, PARDO_ENOTSUP, "%d parts (room for %d)", n, cap);
    for (int p = 1; p < n; p++) {
        if (a->parts[p]->dtype != p0->dtype)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "mode %s combines parts elementwise: part %d of '%s' is %s but "
                                "part 0 is %s", merge_mode_name(mode), p, a_name, pardo_dtype_name(a->parts[p]->dtype),
                                pardo_dtype_name(p0->dtype));
        if (!pardo_shape_equal(a->parts[p]->ndim, a->parts[p]->shape, p0->ndim, p0->shape)) {
            char s0[160], s1[160];
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "mode %s combines parts elementwise: part %d is %s but part 0 is %s",
                                merge_mode_name(mode), p,
                                pardo_shape_str(a->parts[p]->ndim, a->parts[p]->shape, s1, sizeof s1),
                                pardo_shape_str(p0->ndim, p0->shape, s0, sizeof s0));
        }
    }
    if (weight_by[0]) {
        if (n > PARDO_MERGE_MAX_WEIGHTED)
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "a weighted mean of %d parts (at most %d)", n,
                                PARDO_MERGE_MAX_WEIGHTED);
        if ((rc = merge_weights(ctx, weights, weight_by, n, w)) != PARDO_OK) return rc;
    }
    for (int p = 0; p < n; p++) part_data[p] = pardo_tensor_data(a->parts[p]);
    *m = (pardo_merge_args){p0->dtype, mode, part_data, n, weight_by[0] ? w : NULL, NULL, p0};
    return PARDO_OK;
}

/* The merge op's inputs and attrs as pardo_merge_prepare_parts takes them
 * (weight_by's array: input 1 where given, else looked up by name). */
static int merge_prepare(pardo_kernel_ctx *ctx, pardo_merge_args *m, const void **part_data, int cap, double *w) {
    pardo_merge_mode mode;
    int ax;
    const char *wb;
    int rc = merge_attrs_get(ctx->op, -1, &mode, &ax, &wb, ctx->st); /* concat's axis is not needed: refused below */
    if (rc != PARDO_OK) return rc;
    const pardo_tensor *weights =
        !wb[0] ? NULL : ctx->n_in > 1 && ctx->in[1] ? ctx->in[1] : pardo_scope_find(ctx->scope, wb);
    return pardo_merge_prepare_parts(ctx, ctx->in[0], ctx->op->in[0], mode, weights, wb, m, part_data, cap, w);
}

static int merge_cpu(pardo_kernel_ctx *ctx) {
    const pardo_tensor *a = ctx->in[0];
    int n = a->n_parts, ax;
    pardo_merge_mode mode;
    const char *wb;
    if (n > 0 && a->parts[0] && merge_attrs_get(ctx->op, a->parts[0]->ndim, &mode, &ax, &wb, ctx->st) == PARDO_OK &&
        mode == PARDO_MERGE_CONCAT)
        return merge_concat(ctx, a, ax);
    const void *stack_parts[PARDO_MERGE_STACK_PARTS], **parts = stack_parts;
    if (n > PARDO_MERGE_STACK_PARTS && !(parts = malloc(sizeof(*parts) * (size_t)n)))
        return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory merging %d parts", n);
    double w[PARDO_MERGE_MAX_WEIGHTED];
    pardo_merge_args m;
    int rc = merge_prepare(ctx, &m, parts, n > PARDO_MERGE_STACK_PARTS ? n : PARDO_MERGE_STACK_PARTS, w);
    pardo_tensor *y = NULL;
    if (rc == PARDO_OK && !(y = pardo_kernel_output(ctx, 0, m.first->dtype, m.first->ndim, m.first->shape)))
        rc = ctx->st->code;
    if (rc == PARDO_OK) {
        m.y = pardo_tensor_data(y);
        pardo_kernel_ctx one = *ctx;
        if (y->numel < MERGE_PARALLEL_MIN) one.nthreads = 1; /* a fork costs more than it saves */
        rc = pardo_parallel_for(&one, y->numel, merge_range, &m);
    }
    if (parts != stack_parts) free(parts);
    return rc;
}

const pardo_op_def pardo_op_merge = {
    .type = "merge",
    .doc = "Y = the parts of A combined: mean (weight_by a split), sum, max, min, or concat along axis",
    .inputs = merge_in,
    .n_inputs = 2,
    .outputs = merge_out,
    .n_outputs = 1,
    .attrs = merge_attrs,
    .n_attrs = 3,
    .infer = merge_infer,
    .cpu = merge_cpu,
    .array_in = 3u,
};

/* ---- all_reduce ---- */

static const pardo_arg_def ar_in[] = {{"X", "a tensor per output (float32 or float64)", false, true}};
static const pardo_arg_def ar_out[] = {{"Y", "X's sum over the parallel_do's parts, X's dtype and shape", false, true}};

static int ar_infer(pardo_infer_ctx *ctx) {
    if (ctx->n_out != ctx->n_in)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "%d inputs but %d outputs, expected one output per input", ctx->n_in,
                            ctx->n_out);
    for (int k = 0; k < ctx->n_in; k++) {
        if (ctx->in[k]->dtype != PARDO_F32 && ctx->in[k]->dtype != PARDO_F64)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d is %s, expected float32 or float64", k,
                                pardo_dtype_name(ctx->in[k]->dtype));
        ctx->out[k] = *ctx->in[k];
    }
    return PARDO_OK;
}

/* Block 0 (one part): Y = X. In a part block parallel_do computes it. */
static int ar_cpu(pardo_kernel_ctx *ctx) {
    for (int k = 0; k < ctx->n_in; k++) {
        const pardo_tensor *x = ctx->in[k];
        if (x->is_array) return pardo_errorf(ctx->st, PARDO_EINVAL, "input %d is a tensor_array, expected a tensor", k);
        if (!pardo_kernel_output_as(ctx, k, k, x->ndim, x->shape)) return ctx->st->code;
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_all_reduce = {
    .type = "all_reduce",
    .doc = "in a parallel_do part block: each output is its input summed over the parts, in part order (the parts "
           "join there); elsewhere a copy",
    .inputs = ar_in,
    .n_inputs = 1,
    .outputs = ar_out,
    .n_outputs = 1,
    .infer = ar_infer,
    .cpu = ar_cpu,
};

/* ---- parallel_do ---- */

static const pardo_arg_def pd_in[] = {
    {"X", "every var the block reads: the parts_in tensor_arrays and the enclosing vars", true, true},
};
static const pardo_arg_def pd_out[] = {{"Y", "the parts_out tensor_arrays (repeats)", false, false}};
static const pardo_attr_def pd_attrs[] = {
    {"block", PARDO_ATTR_INT, NULL, "the block to run once per part (a child of the op's block)"},
    {"parts_in", PARDO_ATTR_OBJECT, "{}", "block var -> tensor_array whose part i it is in run i"},
    {"parts_out", PARDO_ATTR_OBJECT, "{}", "block var -> tensor_array whose part i receives it"},
};

/* The block's inference happens in the infer_shapes pass, which sees the
 * program (transpiler/infer_shapes.c, infer_parallel_do). */
static int pd_infer(pardo_infer_ctx *ctx) {
    (void)ctx;
    return PARDO_OK;
}

typedef struct pd_binding {
    const char *var;   // block var (borrowed from the op's attrs)
    int slot;          // index into the op's in (parts_in) or out (parts_out)
    pardo_dtype dtype; // parts_out: the tensor_array's dtype
    int publish_at;    // parts_out: the last op of the block that names var, after which the part hands it
                       // on; -1: when the part ends (no op names it)
} pd_binding;

typedef struct pd_part {
    pardo_scope *scope; // child of the calling scope; its tensors are reused from run to run
    pardo_status st;    // this part's error
} pd_part;

/* What the kernel keeps across runs of one parallel_do (pardo_op_state). */
typedef struct pd_state {
    int block;              // the block each part runs
    pd_binding *ins, *outs; // parts_in, parts_out
    int n_ins, n_outs;
    pardo_scope *parent; // the calling scope the child scopes hang from
    pd_part *parts;      // cap_parts entries, the first n_scopes with a scope
    int cap_parts, n_scopes;
    int n_block_ops;     // ops of the block
    bool *joins;         // n_block_ops: op i is an all_reduce (the parts join before it); NULL when none is
    const void **summed; // cap_parts entries when joins: the parts' data of the all_reduce input being summed
} pd_state;

static void pd_free_scopes(pd_state *s) {
    for (int i = 0; i < s->n_scopes; i++) pardo_scope_free(s->parts[i].scope);
    s->n_scopes = 0;
}

static void pd_state_free(void *p) {
    pd_state *s = p;
    if (!s) return;
    pd_free_scopes(s);
    free(s->parts);
    free(s->joins);
    free(s->summed);
    free(s->ins);
    free(s->outs);
    free(s);
}

static int find_slot(char **names, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (strcmp(names[k], name) == 0) return k;
    return -1;
}

/* Reads the attrs once into a pd_state (the program does not change). */
static pd_state *pd_state_new(pardo_kernel_ctx *ctx) {
    const pardo_op *op = ctx->op;
    const pardo_program *prog = ctx->prog;
    const pardo_value *pin = pardo_attr(op, "parts_in"), *pout = pardo_attr(op, "parts_out");
    int64_t block;
    if (pardo_attr_int(op, "block", 0, &block, ctx->st) != PARDO_OK) return NULL;
    pd_state *s = calloc(1, sizeof(*s));
    if (!s) goto oom;
    s->block = (int)block;
    const pardo_block *blk = &prog->blocks[s->block];
    s->n_block_ops = blk->n_ops;
    for (int i = 0; i < blk->n_ops; i++) {
        if (blk->ops[i].def != &pardo_op_all_reduce) continue;
        if (!s->joins && !(s->joins = calloc((size_t)blk->n_ops, sizeof(bool)))) goto oom;
        s->joins[i] = true;
    }
    s->n_ins = pin ? pin->n : 0;
    s->n_outs = pout ? pout->n : 0;
    if ((s->n_ins && !(s->ins = calloc((size_t)s->n_ins, sizeof(*s->ins)))) ||
        (s->n_outs && !(s->outs = calloc((size_t)s->n_outs, sizeof(*s->outs)))))
        goto oom;
    for (int k = 0; k < s->n_ins; k++) {
        s->ins[k].var = pin->keys[k];
        s->ins[k].slot = find_slot(op->in, op->n_in, pin->items[k].string);
        PARDO_ASSERT(s->ins[k].slot >= 0); /* validate checked it */
    }
    for (int k = 0; k < s->n_outs; k++) {
        s->outs[k].var = pout->keys[k];
        s->outs[k].slot = find_slot(op->out, op->n_out, pout->items[k].string);
        PARDO_ASSERT(s->outs[k].slot >= 0);
        const pardo_graph_var *v = pardo_program_lookup_var(prog, ctx->block, pout->items[k].string, NULL);
        PARDO_ASSERT(v);
        s->outs[k].dtype = v->type.dtype;
        s->outs[k].publish_at = pardo_block_last_use(&prog->blocks[s->block], s->outs[k].var);
    }
    return s;
oom:
    pd_state_free(s);
    pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory");
    return NULL;
}

/* Makes n child scopes of ctx->scope (reusing the last run's when the
 * calling scope is the same). */
static int pd_scopes(pd_state *s, pardo_kernel_ctx *ctx, int n) {
    if (s->parent != ctx->scope) {
        pd_free_scopes(s);
        s->parent = ctx->scope;
    }
    if (n > s->cap_parts) {
        pd_part *p = realloc(s->parts, (size_t)n * sizeof(*p));
        if (!p) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for %d parts", n);
        s->parts = p;
        const void **d = s->joins ? realloc(s->summed, (size_t)n * sizeof(*d)) : NULL;
        if (s->joins && !d) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for %d parts", n);
        if (d) s->summed = d;
        s->cap_parts = n;
    }
    while (s->n_scopes < n) {
        if (!(s->parts[s->n_scopes].scope = pardo_scope_new(ctx->scope)))
            return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for %d parts", n);
        s->n_scopes++;
    }
    return PARDO_OK;
}

typedef struct pd_job {
    pardo_kernel_ctx *ctx;
    pd_state *s;
    int n;              // parts
    uint64_t flow;      // trace: the first part's flow id; 0 when no trace is on
    pardo_early *early; // the stage after the op, started by parts that end first (executor.h); or NULL
    int first, end;     // the segment of the block the parts run now: ops [first, end)
    int segment;        // its index (trace: a part's spans of one run share its flow)
    bool tracing;       // a trace is on
    _Alignas(64)
        atomic_int stop; // (a cache line of its own) set by the first part that fails; parts read it between ops
    atomic_int failed;   // the first part that failed, or -1
} pd_job;

/* Part i's output `k` from its scope to part i of its tensor_array. */
static int hand_on(pd_job *j, int i, int k, pardo_status *st) {
    pd_state *s = j->s;
    pardo_tensor *t = pardo_scope_take(s->parts[i].scope, s->outs[k].var);
    if (!t) return pardo_errorf(st, PARDO_ERUNTIME, "block %d left '%s' without a value", s->block, s->outs[k].var);
    pardo_tensor_array_set_part(j->ctx->out[s->outs[k].slot], i, t);
    /* a gradient summed over MPI ranks early */
    pardo_rank_merge_part_set(j->ctx->scope, j->ctx->op->out[s->outs[k].slot], j->ctx->out[s->outs[k].slot], i, j->n);
    return PARDO_OK;
}

typedef struct pd_part_run {
    pd_job *j;
    int part;
} pd_part_run;

/* pardo_block_run.after_op of a part: the outputs no later op names go to the arrays now, where the early
 * stage reads them (pardo_early_progress says how far the part got once they are there). */
static int hand_on_after(void *arg, int index, pardo_status *st) {
    const pd_part_run *pr = arg;
    const pd_state *s = pr->j->s;
    pardo_rank_merge_progress(); /* between ops: the buckets summed over MPI ranks move on */
    for (int k = 0; k < s->n_outs; k++)
        if (s->outs[k].publish_at == index) {
            int rc = hand_on(pr->j, pr->part, k, st);
            if (rc != PARDO_OK) return rc;
        }
    return PARDO_OK;
}

/* Part i's first segment: takes back last run's outputs and binds its slices. */
static int pd_bind_part(pd_job *j, int i, pardo_status *st) {
    pardo_kernel_ctx *ctx = j->ctx;
    pd_state *s = j->s;
    pardo_scope *scope = s->parts[i].scope;
    int rc = PARDO_OK;
    for (int k = 0; k < s->n_outs; k++) {
        /* last run's tensor for this part goes back to the block var, for reuse */
        pardo_tensor *prev = pardo_tensor_array_take_part(ctx->out[s->outs[k].slot], i);
        if (prev && atomic_load(&prev->refs) == 1) {
            if ((rc = pardo_scope_set_move(scope, s->outs[k].var, prev, st)) != PARDO_OK) return rc;
        } else {
            pardo_tensor_release(prev);
        }
    }
    for (int k = 0; k < s->n_ins; k++) { /* after the outputs: a parts_in var passed straight out wins */
        pardo_tensor *t = pardo_tensor_array_part(ctx->in[s->ins[k].slot], i);
        if (!t) return pardo_errorf(st, PARDO_ERUNTIME, "part %d of '%s' is unset", i, ctx->op->in[s->ins[k].slot]);
        if ((rc = pardo_scope_set(scope, s->ins[k].var, t, st)) != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

/* Part i's last segment ended (rc): the outputs no op named go to the arrays, the slices are unbound (so
 * split can reuse them). */
static int pd_unbind_part(pd_job *j, int i, int rc, pardo_status *st) {
    pd_state *s = j->s;
    for (int k = 0; rc == PARDO_OK && k < s->n_outs; k++) /* a block that ran to its end handed on the others */
        if (s->outs[k].publish_at < 0) rc = hand_on(j, i, k, st);
    for (int k = 0; k < s->n_ins; k++) pardo_tensor_release(pardo_scope_take(s->parts[i].scope, s->ins[k].var));
    return rc;
}

/* Part i, segment [j->first, j->end) of the block: bound first when the segment is the first, its outputs
 * handed on as their last op runs and when the block ends. */
static int pd_run_part(pd_job *j, int i, pardo_status *st) {
    pd_state *s = j->s;
    int rc = j->first == 0 ? pd_bind_part(j, i, st) : PARDO_OK;
    if (rc != PARDO_OK) return rc;
    pd_part_run pr = {j, i};
    pardo_block_run run = {.nthreads = 1, .stop = &j->stop, .cpu_only = true, .idle_help = true,
                           .after_op = hand_on_after, .after_arg = &pr,
                           .progress = j->early ? pardo_early_progress(j->early, i) : NULL,
                           .first_op = j->first, .end_op = j->end};
    if (j->end > j->first) rc = pardo_executor_run_block_with(j->ctx->exec, s->block, s->parts[i].scope, &run, st);
    return rc != PARDO_OK || j->end == s->n_block_ops ? pd_unbind_part(j, i, rc, st) : rc;
}

/* All_reduce op `index` of the part block, on the forking thread once every part ran the ops before it: each
 * part's output k becomes the sum of input k over the parts, merge's sum (pardo_merge_combine: in part order,
 * in double, the same bits whatever the threads), and the part hands on what the op ends. */
static int pd_all_reduce(pd_job *j, int index, pardo_status *st) {
    pd_state *s = j->s;
    const pardo_op *op = &j->ctx->prog->blocks[s->block].ops[index];
    for (int k = 0; k < op->n_in; k++) {
        const pardo_tensor *x0 = pardo_scope_find(s->parts[0].scope, op->in[k]);
        if (!x0 || x0->is_array)
            return pardo_errorf(st, PARDO_ERUNTIME, "all_reduce op %d of block %d: '%s' has no tensor", index,
                                s->block, op->in[k]);
        pardo_tensor *sum = NULL; /* part 0's output, which the other parts get a copy of */
        for (int i = 0; i < j->n; i++) {
            const pardo_tensor *x = pardo_scope_find(s->parts[i].scope, op->in[k]);
            if (!x || x->is_array || x->dtype != x0->dtype ||
                !pardo_shape_equal(x->ndim, x->shape, x0->ndim, x0->shape))
                return pardo_errorf(st, PARDO_ESHAPE, "all_reduce op %d of block %d: part %d's '%s' differs from "
                                    "part 0's in dtype or shape", index, s->block, i, op->in[k]);
            s->summed[i] = pardo_tensor_data(x);
        }
        for (int i = 0; i < j->n; i++) {
            pardo_scope *scope = s->parts[i].scope;
            pardo_tensor *y = pardo_scope_find_local(scope, op->out[k]);
            if (!y || y->base || atomic_load(&y->refs) != 1 || y->dtype != x0->dtype ||
                !pardo_shape_equal(y->ndim, y->shape, x0->ndim, x0->shape)) {
                if (!(y = pardo_tensor_new(x0->dtype, x0->ndim, x0->shape, st))) return st->code;
                int rc = pardo_scope_set_move(scope, op->out[k], y, st);
                if (rc != PARDO_OK) return rc;
            }
            void *yd = pardo_tensor_mutable_cpu(y, st);
            if (!yd) return st->code;
            if (i > 0) {
                memcpy(yd, pardo_tensor_data(sum), sum->nbytes);
                continue;
            }
            sum = y; /* merge's sum: the parts added in order, in double */
            pardo_merge_args m = {.dtype = x0->dtype, .mode = PARDO_MERGE_SUM, .parts = s->summed, .n = j->n,
                                  .y = yd, .first = x0};
            pardo_merge_combine(&m, 0, x0->numel);
        }
    }
    for (int i = 0; i < j->n; i++) {
        pd_part_run pr = {j, i};
        int rc = hand_on_after(&pr, index, st);
        if (rc != PARDO_OK) return rc;
        if (j->early) atomic_store_explicit(pardo_early_progress(j->early, i), index + 1, memory_order_release);
    }
    return PARDO_OK;
}

/* Records part i's span (from t0 to now) in the trace. */
static void trace_part(const pd_job *j, int i, int64_t t0, int rc, const pardo_status *st) {
    const pd_state *s = j->s;
    const pardo_tensor *first = s->n_ins ? pardo_tensor_array_part(j->ctx->in[s->ins[0].slot], i) : NULL;
    pardo_trace_part r = {.parallel_do = j->ctx->op,
                          .op_block = j->ctx->block,
                          .op_index = j->ctx->op_index,
                          .block = s->block,
                          .part = i,
                          .parts = j->n,
                          .rows = first && first->ndim > 0 ? first->shape[0] : -1,
                          .segment = j->segment,
                          .flow = j->flow ? j->flow + (uint64_t)i : 0,
                          .t0 = t0,
                          .t1 = pardo_trace_ticks(),
                          .error = rc == PARDO_OK ? NULL : st->msg};
    pardo_trace_record_part(&r);
}

static void pd_part_fn(void *arg, int64_t i) {
    pd_job *j = arg;
    pardo_status *st = &j->s->parts[i].st;
    if (atomic_load_explicit(&j->stop, memory_order_acquire)) return; /* another part failed: do not start */
    int64_t t0 = j->tracing ? pardo_trace_ticks() : 0;
    int rc = pd_run_part(j, (int)i, st);
    if (j->tracing) trace_part(j, (int)i, t0, rc, st);
    if (rc == PARDO_OK && j->early && j->end == j->s->n_block_ops) pardo_early_part_ended(j->early);
    if (rc == PARDO_OK || rc == PARDO_ECANCELED) return;
    st->code = rc;
    int none = -1;
    atomic_compare_exchange_strong(&j->failed, &none, (int)i);
    atomic_store_explicit(&j->stop, 1, memory_order_release);
}

static int pd_cpu(pardo_kernel_ctx *ctx) {
    pardo_op_state *slot = ctx->state;
    PARDO_ASSERT(slot && ctx->prog);
    if (!slot->data) {
        if (!(slot->data = pd_state_new(ctx))) return ctx->st->code;
        slot->free_fn = pd_state_free;
    }
    pd_state *s = slot->data;
    int n = s->n_ins ? -1 : ctx->nparts_default > 0 ? ctx->nparts_default : 1;
    for (int k = 0; k < s->n_ins; k++) {
        const pardo_tensor *a = ctx->in[s->ins[k].slot];
        const char *name = ctx->op->in[s->ins[k].slot];
        if (!a->is_array)
            return pardo_errorf(ctx->st, PARDO_EINVAL, "parts_in '%s': '%s' is not a tensor_array", s->ins[k].var,
                                name);
        if (n >= 0 && a->n_parts != n)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "parts_in: '%s' has %d parts but '%s' has %d", name, a->n_parts,
                                ctx->op->in[s->ins[0].slot], n);
        n = a->n_parts;
    }
    int rc = pd_scopes(s, ctx, n);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < s->n_outs; k++)
        if (!pardo_kernel_output_array(ctx, s->outs[k].slot, s->outs[k].dtype, n)) return ctx->st->code;
    pd_job j = {.ctx = ctx, .s = s, .n = n, .tracing = pardo_trace_on()};
    j.flow = j.tracing ? pardo_trace_flow_start(ctx->op, n) : 0;
    atomic_init(&j.stop, 0);
    atomic_init(&j.failed, -1);
    j.early = pardo_executor_early_begin(ctx->exec, ctx->block, ctx->op_index, ctx->scope, ctx->nthreads, ctx->out,
                                         ctx->n_out, n, &j.stop);
    /* the block's segments: the parts run ops up to the next all_reduce, which joins them */
    for (int first = 0; rc == PARDO_OK && atomic_load(&j.failed) < 0;) {
        int end = first;
        while (end < s->n_block_ops && !(s->joins && s->joins[end])) end++;
        if (end > first || first == 0) {
            j.first = first;
            j.end = end;
            pardo_thread_pool_for(ctx->nthreads, n, pd_part_fn, &j);
            j.segment++;
        }
        if (end == s->n_block_ops || atomic_load(&j.failed) >= 0) break;
        for (; rc == PARDO_OK && end < s->n_block_ops && s->joins[end]; end++) rc = pd_all_reduce(&j, end, ctx->st);
        first = end;
        if (rc == PARDO_OK && first == s->n_block_ops) { /* the block ends with its all_reduce ops */
            for (int i = 0; i < n && rc == PARDO_OK; i++) rc = pd_unbind_part(&j, i, PARDO_OK, ctx->st);
            break;
        }
    }
    if (rc != PARDO_OK || atomic_load(&j.failed) >= 0) { /* the parts still bound unbind their slices */
        pardo_status ignored = {0};
        for (int i = 0; i < n; i++) pd_unbind_part(&j, i, PARDO_ECANCELED, &ignored);
    }
    pardo_executor_early_end(j.early);
    if (rc != PARDO_OK) return rc;
    int bad = atomic_load(&j.failed);
    if (bad < 0) return PARDO_OK;
    *ctx->st = s->parts[bad].st;
    return pardo_status_prefix(ctx->st, "part %d of %d (block %d): ", bad, n, s->block);
}

const pardo_op_def pardo_op_parallel_do = {
    .type = "parallel_do",
    .doc = "runs block attrs.block once per part on the thread pool, each part in its own child scope",
    .inputs = pd_in,
    .n_inputs = 1,
    .outputs = pd_out,
    .n_outputs = 1,
    .attrs = pd_attrs,
    .n_attrs = 3,
    .infer = pd_infer,
    .cpu = pd_cpu,
    .array_out = 1u,
    .variadic_out = true,
};
