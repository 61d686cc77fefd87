/* control_flow.c - the control-flow ops, as ONNX's If, Loop and Scan: each
 * runs blocks of the program (children of the op's block, which see its
 * vars) through the executor, as parallel_do does.
 *
 * if runs attrs.then_block or attrs.else_block as its cond says; output k is
 * the branch's then_out[k] / else_out[k].
 * loop runs attrs.body while i < M (input 0, "" for none) and cond (input
 * 1, then the body's body_out[0]) hold: body_in names the body's vars bound
 * each iteration (the iteration number int64 [], cond bool [], the N
 * carried values), body_out its results (cond, the N carried values, then
 * the scan outputs, stacked along a new axis 0). Outputs: the N final
 * carried values, then the scan outputs.
 * scan runs attrs.body once per slice of its scan inputs: body_in names the
 * N states then the num_scan_inputs slices, body_out the N states then the
 * scan outputs, stacked along scan_output_axes; directions 1 walk (or fill)
 * backwards. With attr batch (ONNX opset 8's form) input 0 is sequence_lens
 * (or ""), states and scan inputs carry a batch dim 0 the body runs once per
 * entry of, and scan inputs are scanned along dim 1.
 * The op's inputs past those list every enclosing var the blocks read (the
 * dependency for the dataflow executor; validate checks the list).
 *
 * Each run of a block is in a child scope of the op's scope, made for the op
 * run and freed after it, so the op keeps no state (it may run inside a
 * parallel_do part). The blocks' types are inferred by the transpiler
 * (transpiler/infer_shapes.c), which sees the program; validate checks the
 * attrs (transpiler/validate.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/executor.h"
#include "op.h"
#include "core/scope.h"

/* At most this many carried values, states, scan inputs or outputs. */
#define CF_MAX 32

/* Entry i of the names list attr `key` (validate checked it: an array of strings). */
static const char *name_at(const pardo_op *op, const char *key, int i) { return pardo_attr(op, key)->items[i].string; }

static int names_count(const pardo_op *op, const char *key) {
    const pardo_value *v = pardo_attr(op, key);
    return v ? v->n : 0;
}

static int no_infer(pardo_infer_ctx *ctx) {
    (void)ctx; /* the blocks' types: transpiler/infer_shapes.c */
    return PARDO_OK;
}

static int run_block(pardo_kernel_ctx *ctx, int block, pardo_scope *scope) {
    pardo_block_run r = {.nthreads = ctx->nthreads, .cpu_only = true, .idle_help = ctx->idle_help};
    return pardo_executor_run_block_with(ctx->exec, block, scope, &r, ctx->st);
}

/* The tensor a block run left in `name` (its own or an enclosing var), retained; NULL with ctx->st. */
static pardo_tensor *block_result(pardo_kernel_ctx *ctx, const pardo_scope *scope, int block, const char *name) {
    pardo_tensor *t = pardo_scope_find(scope, name);
    if (!t || t->is_array) {
        pardo_errorf(ctx->st, PARDO_ERUNTIME, "block %d left '%s' without a tensor", block, name);
        return NULL;
    }
    return pardo_tensor_retain(t);
}

/* After an iteration whose results were retained: the body's own bindings
 * of the body_out vars (but those that are body_in vars, which are bound
 * again) are dropped from scope, so that the next iteration's ops write new
 * tensors rather than reuse (or, in place, overwrite) the ones kept. */
static void unbind_results(const pardo_op *op, pardo_scope *scope) {
    const int n_in = names_count(op, "body_in"), n_out = names_count(op, "body_out");
    for (int k = 0; k < n_out; k++) {
        const char *name = name_at(op, "body_out", k);
        bool bound = false;
        for (int j = 0; j < n_in && !bound; j++) bound = strcmp(name_at(op, "body_in", j), name) == 0;
        if (!bound && pardo_scope_find_local(scope, name)) pardo_tensor_release(pardo_scope_take(scope, name));
    }
}

/* Output k gets a copy of t. */
static int put_output(pardo_kernel_ctx *ctx, int k, const pardo_tensor *t) {
    if (!pardo_kernel_wants_output(ctx, k)) return PARDO_OK;
    pardo_tensor *y = pardo_kernel_output(ctx, k, t->dtype, t->ndim, t->shape);
    if (!y) return ctx->st->code;
    if (t->nbytes && pardo_tensor_data(y) != pardo_tensor_data(t))
        memcpy(pardo_tensor_data(y), pardo_tensor_data(t), t->nbytes);
    return PARDO_OK;
}

/* The one element of t (a condition or a trip count) into *v. */
static int one_value(pardo_kernel_ctx *ctx, const pardo_tensor *t, const char *what, int64_t *v) {
    if (t->is_array || t->numel != 1)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "%s has %lld elements, expected one", what, (long long)t->numel);
    *v = t->dtype == PARDO_I64 ? *(const int64_t *)pardo_tensor_data(t) : (int64_t)pardo_tensor_get_f64(t, 0);
    return PARDO_OK;
}

/* A new scalar of dtype dt holding v; NULL with st. */
static pardo_tensor *scalar_new(pardo_dtype dt, int64_t v, pardo_status *st) {
    pardo_tensor *t = pardo_tensor_new_cpu(dt, 0, NULL, st);
    if (t && dt == PARDO_I64) *(int64_t *)pardo_tensor_data(t) = v;
    else if (t) pardo_tensor_set_f64(t, 0, (double)v);
    return t;
}

/* Element counts before and after dim ax of a shape. */
static void outer_inner(int ndim, const int64_t *shape, int ax, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < ax; d++) *outer *= shape[d];
    for (int d = ax; d < ndim; d++) *inner *= shape[d];
}

/* A new tensor: x's slice `index` along dim ax (that dim dropped); NULL with st. */
static pardo_tensor *take_slice(const pardo_tensor *x, int ax, int64_t index, pardo_status *st) {
    int64_t shape[PARDO_MAX_DIMS], outer, inner;
    for (int d = 0, o = 0; d < x->ndim; d++)
        if (d != ax) shape[o++] = x->shape[d];
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, x->ndim - 1, shape, st);
    if (!y) return NULL;
    outer_inner(x->ndim - 1, shape, ax, &outer, &inner);
    const size_t row = (size_t)inner * pardo_dtype_size(x->dtype);
    const char *src = pardo_tensor_data(x);
    char *dst = pardo_tensor_data(y);
    for (int64_t o = 0; o < outer && row; o++)
        memcpy(dst + (size_t)o * row, src + (size_t)(o * x->shape[ax] + index) * row, row);
    return y;
}

/* A new tensor stacking the n tensors ts (equal dtype and shape) along a new
 * dim ax; with n == 0 the elements' type is `elem` (its -1 dims as 0). NULL
 * with st; what names the stacked value in messages. */
static pardo_tensor *stack(pardo_tensor *const *ts, int64_t n, int ax, const pardo_type *elem, const char *what,
                           pardo_status *st) {
    int64_t eshape[PARDO_MAX_DIMS], shape[PARDO_MAX_DIMS], outer, inner;
    pardo_dtype dt = n ? ts[0]->dtype : elem->dtype;
    int nd = n ? ts[0]->ndim : elem->ndim;
    if (nd < 0 || nd + 1 > PARDO_MAX_DIMS) {
        pardo_errorf(st, PARDO_ESHAPE, "%s: cannot stack tensors of rank %d", what, nd);
        return NULL;
    }
    for (int d = 0; d < nd; d++) eshape[d] = n ? ts[0]->shape[d] : elem->shape[d] < 0 ? 0 : elem->shape[d];
    for (int64_t i = 1; i < n; i++)
        if (ts[i]->dtype != dt || !pardo_shape_equal(ts[i]->ndim, ts[i]->shape, nd, eshape)) {
            char a[160], b[160];
            pardo_errorf(st, PARDO_ESHAPE, "%s: iteration %lld gives %s %s, iteration 0 %s %s", what, (long long)i,
                         pardo_dtype_name(ts[i]->dtype), pardo_shape_str(ts[i]->ndim, ts[i]->shape, a, sizeof a),
                         pardo_dtype_name(dt), pardo_shape_str(nd, eshape, b, sizeof b));
            return NULL;
        }
    for (int d = 0, e = 0; d <= nd; d++) shape[d] = d == ax ? n : eshape[e++];
    pardo_tensor *y = pardo_tensor_new_cpu(dt, nd + 1, shape, st);
    if (!y) return NULL;
    outer_inner(nd, eshape, ax, &outer, &inner);
    const size_t row = (size_t)inner * pardo_dtype_size(dt);
    char *dst = pardo_tensor_data(y);
    for (int64_t i = 0; i < n && row; i++) {
        const char *src = pardo_tensor_data(ts[i]);
        for (int64_t o = 0; o < outer; o++) memcpy(dst + (size_t)(o * n + i) * row, src + (size_t)o * row, row);
    }
    return y;
}

static void release_all(pardo_tensor **ts, int64_t n) {
    for (int64_t i = 0; ts && i < n; i++) pardo_tensor_release(ts[i]);
}

/* The inferred type of var `name` seen from block b (for a stack of no iterations). */
static pardo_type var_type(const pardo_kernel_ctx *ctx, int b, const char *name) {
    const pardo_graph_var *v = pardo_program_lookup_var(ctx->prog, b, name, NULL);
    pardo_type t = {.dtype = PARDO_F32, .ndim = 0};
    return v ? v->type : t;
}

static int need_executor(pardo_kernel_ctx *ctx) {
    if (ctx->exec && ctx->prog) return PARDO_OK;
    return pardo_errorf(ctx->st, PARDO_EINVAL, "%s runs blocks: it needs the executor and the program",
                        ctx->op->type);
}

/* ---- if ---- */

static const pardo_arg_def if_in[] = {
    {"cond", "the condition, one element (nonzero: then_block)", false, false},
    {"X", "every enclosing var the branches read", true, true},
};
static const pardo_arg_def if_out[] = {{"Y", "the branch's outputs (\"\": not needed)", true, true}};
static const pardo_attr_def if_attrs[] = {
    {"then_block", PARDO_ATTR_INT, NULL, "the block run when cond holds (a child of the op's block)"},
    {"else_block", PARDO_ATTR_INT, NULL, "the block run otherwise (a child of the op's block)"},
    {"then_out", PARDO_ATTR_ANY, NULL, "list of then_block's vars giving the outputs, in order"},
    {"else_out", PARDO_ATTR_ANY, NULL, "list of else_block's vars giving the outputs, in order"},
};

static int if_cpu(pardo_kernel_ctx *ctx) {
    int64_t cond, then_b, else_b;
    int rc = need_executor(ctx);
    if (rc != PARDO_OK || (rc = one_value(ctx, ctx->in[0], "cond", &cond)) != PARDO_OK ||
        (rc = pardo_attr_int(ctx->op, "then_block", 0, &then_b, ctx->st)) != PARDO_OK ||
        (rc = pardo_attr_int(ctx->op, "else_block", 0, &else_b, ctx->st)) != PARDO_OK)
        return rc;
    const int block = (int)(cond ? then_b : else_b);
    const char *key = cond ? "then_out" : "else_out";
    pardo_scope *scope = pardo_scope_new(ctx->scope);
    if (!scope) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory");
    rc = run_block(ctx, block, scope);
    for (int k = 0; rc == PARDO_OK && k < ctx->n_out; k++) {
        pardo_tensor *t = block_result(ctx, scope, block, name_at(ctx->op, key, k));
        rc = t ? put_output(ctx, k, t) : ctx->st->code;
        pardo_tensor_release(t);
    }
    pardo_scope_free(scope);
    return rc;
}

const pardo_op_def pardo_op_if = {
    .type = "if",
    .doc = "runs then_block when cond holds, else else_block; the outputs are the branch's then_out / else_out",
    .inputs = if_in,
    .n_inputs = 2,
    .outputs = if_out,
    .n_outputs = 1,
    .attrs = if_attrs,
    .n_attrs = 4,
    .infer = no_infer,
    .cpu = if_cpu,
};

/* ---- loop ---- */

static const pardo_arg_def loop_in[] = {
    {"M", "the trip count, int64, one element (\"\": none)", true, false},
    {"cond", "the condition before the first iteration, bool, one element (\"\": true)", true, false},
    {"V", "the initial carried values (one per body_in after the first two), then every enclosing var the body "
          "reads", true, true},
};
static const pardo_arg_def loop_out[] = {
    {"Y", "the final carried values, then the scan outputs stacked along a new axis 0", true, true}};
static const pardo_attr_def loop_attrs[] = {
    {"body", PARDO_ATTR_INT, NULL, "the block run per iteration (a child of the op's block)"},
    {"body_in", PARDO_ATTR_ANY, NULL, "list of the body's vars bound per iteration: the iteration number, cond, the "
                                      "carried values"},
    {"body_out", PARDO_ATTR_ANY, NULL, "list of the body's vars read after each iteration: cond, the carried values, "
                                       "the scan outputs"},
};

/* What one loop run holds: the carried values and each scan output's iterations. */
typedef struct loop_run {
    pardo_tensor *carried[CF_MAX];
    pardo_tensor **scans[CF_MAX]; // n_scan lists of cap tensors
    int64_t n_iter, cap;
} loop_run;

static int loop_push_scans(pardo_kernel_ctx *ctx, loop_run *r, int n_scan) {
    if (r->n_iter < r->cap) return PARDO_OK;
    int64_t cap = r->cap ? r->cap * 2 : 16;
    for (int j = 0; j < n_scan; j++) {
        pardo_tensor **p = realloc(r->scans[j], sizeof(*p) * (size_t)cap);
        if (!p) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for %lld iterations", (long long)cap);
        r->scans[j] = p;
    }
    r->cap = cap;
    return PARDO_OK;
}

/* Iterations until M or cond stops the loop, in scope. */
static int loop_iterate(pardo_kernel_ctx *ctx, pardo_scope *scope, int body, loop_run *r) {
    const pardo_op *op = ctx->op;
    const int n_carried = names_count(op, "body_in") - 2, n_scan = names_count(op, "body_out") - 1 - n_carried;
    int64_t max_trip = -1, cond = 1;
    int rc;
    if (ctx->in[0] && (rc = one_value(ctx, ctx->in[0], "M", &max_trip)) != PARDO_OK) return rc;
    if (ctx->in[0] && max_trip < 0) max_trip = 0;
    if (ctx->n_in > 1 && ctx->in[1] && (rc = one_value(ctx, ctx->in[1], "cond", &cond)) != PARDO_OK) return rc;
    for (int64_t i = 0; (max_trip < 0 || i < max_trip) && cond; i++) {
        pardo_tensor *iter = scalar_new(PARDO_I64, i, ctx->st), *c = iter ? scalar_new(PARDO_BOOL, 1, ctx->st) : NULL;
        if (!c) {
            pardo_tensor_release(iter);
            return ctx->st->code;
        }
        if ((rc = pardo_scope_set_move(scope, name_at(op, "body_in", 0), iter, ctx->st)) != PARDO_OK) {
            pardo_tensor_release(c);
            return rc;
        }
        if ((rc = pardo_scope_set_move(scope, name_at(op, "body_in", 1), c, ctx->st)) != PARDO_OK) return rc;
        for (int k = 0; k < n_carried; k++)
            if ((rc = pardo_scope_set(scope, name_at(op, "body_in", 2 + k), r->carried[k], ctx->st)) != PARDO_OK)
                return rc;
        if ((rc = run_block(ctx, body, scope)) != PARDO_OK) return rc;
        pardo_tensor *next[CF_MAX + 1];
        for (int k = 0; k <= n_carried; k++) /* all read before any is rebound: an output may be a body input */
            if (!(next[k] = block_result(ctx, scope, body, name_at(op, "body_out", k)))) {
                release_all(next, k);
                return ctx->st->code;
            }
        rc = one_value(ctx, next[0], "body_out[0] (cond)", &cond);
        pardo_tensor_release(next[0]);
        for (int k = 0; k < n_carried; k++) {
            pardo_tensor_release(r->carried[k]);
            r->carried[k] = next[k + 1];
        }
        if (rc != PARDO_OK) return rc;
        if (n_scan && (rc = loop_push_scans(ctx, r, n_scan)) != PARDO_OK) return rc;
        for (int j = 0; j < n_scan; j++) {
            r->scans[j][r->n_iter] = block_result(ctx, scope, body, name_at(op, "body_out", 1 + n_carried + j));
            if (!r->scans[j][r->n_iter]) {
                for (int q = 0; q < j; q++) pardo_tensor_release(r->scans[q][r->n_iter]);
                return ctx->st->code;
            }
        }
        unbind_results(op, scope);
        r->n_iter++;
    }
    return PARDO_OK;
}

static int loop_cpu(pardo_kernel_ctx *ctx) {
    const pardo_op *op = ctx->op;
    int64_t body;
    int rc = need_executor(ctx);
    if (rc != PARDO_OK || (rc = pardo_attr_int(op, "body", 0, &body, ctx->st)) != PARDO_OK) return rc;
    const int n_carried = names_count(op, "body_in") - 2, n_scan = names_count(op, "body_out") - 1 - n_carried;
    loop_run r;
    memset(&r, 0, sizeof r);
    for (int k = 0; k < n_carried; k++) r.carried[k] = pardo_tensor_retain(ctx->in[2 + k]);
    pardo_scope *scope = pardo_scope_new(ctx->scope);
    rc = scope ? loop_iterate(ctx, scope, (int)body, &r) : pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory");
    for (int k = 0; rc == PARDO_OK && k < n_carried; k++) rc = put_output(ctx, k, r.carried[k]);
    for (int j = 0; rc == PARDO_OK && j < n_scan; j++) {
        const char *name = name_at(op, "body_out", 1 + n_carried + j);
        pardo_type elem = var_type(ctx, (int)body, name);
        char what[256];
        snprintf(what, sizeof what, "scan output '%s'", name);
        pardo_tensor *y = stack(r.scans[j], r.n_iter, 0, &elem, what, ctx->st);
        rc = y ? put_output(ctx, n_carried + j, y) : ctx->st->code;
        pardo_tensor_release(y);
    }
    release_all(r.carried, n_carried);
    for (int j = 0; j < n_scan; j++) {
        release_all(r.scans[j], r.n_iter);
        free(r.scans[j]);
    }
    pardo_scope_free(scope);
    return rc;
}

const pardo_op_def pardo_op_loop = {
    .type = "loop",
    .doc = "runs block body while i < M and cond hold, carrying values between iterations; scan outputs stacked "
           "along a new axis 0",
    .inputs = loop_in,
    .n_inputs = 3,
    .outputs = loop_out,
    .n_outputs = 1,
    .attrs = loop_attrs,
    .n_attrs = 3,
    .infer = no_infer,
    .cpu = loop_cpu,
};

/* ---- scan ---- */

static const pardo_arg_def scan_ins[] = {
    {"X", "batch: sequence_lens (or \"\") first; the initial states, the scan inputs, then every enclosing var the "
          "body reads", true, true},
};
static const pardo_arg_def scan_outs[] = {{"Y", "the final states, then the scan outputs", true, true}};
static const pardo_attr_def scan_attr_defs[] = {
    {"body", PARDO_ATTR_INT, NULL, "the block run per slice (a child of the op's block)"},
    {"body_in", PARDO_ATTR_ANY, NULL, "list of the body's vars bound per slice: the states, then the scan inputs' "
                                      "slices"},
    {"body_out", PARDO_ATTR_ANY, NULL, "list of the body's vars read after each slice: the states, then the scan "
                                       "outputs' slices"},
    {"num_scan_inputs", PARDO_ATTR_INT, NULL, "how many of body_in are scan inputs' slices (the last ones)"},
    {"scan_input_axes", PARDO_ATTR_INTS, "null", "per scan input, the axis scanned (default 0; batch: none)"},
    {"scan_input_directions", PARDO_ATTR_INTS, "null", "per scan input, 0 forward or 1 backward (default 0)"},
    {"scan_output_axes", PARDO_ATTR_INTS, "null", "per scan output, the axis stacked along (default 0; batch: none)"},
    {"scan_output_directions", PARDO_ATTR_INTS, "null", "per scan output, 0 in order or 1 reversed (default 0)"},
    {"batch", PARDO_ATTR_BOOL, "false", "ONNX opset 8's form: input 0 is sequence_lens, dim 0 a batch"},
};

/* Scan's attrs, read once per run (validate checked them). */
typedef struct scan_attrs {
    int n_state, n_in, n_out; // states, scan inputs, scan outputs
    int64_t in_axes[CF_MAX], in_dirs[CF_MAX], out_axes[CF_MAX], out_dirs[CF_MAX];
    bool batch;
    int body;
} scan_attrs;

/* Reads list attr key into v (n entries, default 0). */
static int ints_or_zero(const pardo_op *op, const char *key, int64_t *v, int n, pardo_status *st) {
    int got;
    int rc = pardo_attr_ints(op, key, v, CF_MAX, &got, st);
    if (rc != PARDO_OK) return rc;
    if (got < 0) memset(v, 0, sizeof(*v) * (size_t)n);
    else if (got != n) return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %d entries, expected %d", key, got, n);
    return PARDO_OK;
}

static int scan_attrs_get(const pardo_op *op, scan_attrs *a, pardo_status *st) {
    int64_t body, n_in;
    int rc;
    if ((rc = pardo_attr_int(op, "body", 0, &body, st)) != PARDO_OK ||
        (rc = pardo_attr_int(op, "num_scan_inputs", 0, &n_in, st)) != PARDO_OK ||
        (rc = pardo_attr_bool(op, "batch", false, &a->batch, st)) != PARDO_OK)
        return rc;
    a->body = (int)body;
    a->n_in = (int)n_in;
    a->n_state = names_count(op, "body_in") - a->n_in;
    a->n_out = names_count(op, "body_out") - a->n_state;
    if ((rc = ints_or_zero(op, "scan_input_axes", a->in_axes, a->n_in, st)) != PARDO_OK ||
        (rc = ints_or_zero(op, "scan_input_directions", a->in_dirs, a->n_in, st)) != PARDO_OK ||
        (rc = ints_or_zero(op, "scan_output_axes", a->out_axes, a->n_out, st)) != PARDO_OK ||
        (rc = ints_or_zero(op, "scan_output_directions", a->out_dirs, a->n_out, st)) != PARDO_OK)
        return rc;
    return PARDO_OK;
}

/* One scan (one batch entry) over the n_in tensors xs from the states s0: the
 * final states into states (retained) and the stacked scan outputs into outs
 * (new), in scope. */
static int scan_one(pardo_kernel_ctx *ctx, const scan_attrs *a, pardo_scope *scope, pardo_tensor *const *s0,
                    pardo_tensor *const *xs, pardo_tensor **states, pardo_tensor **outs) {
    const pardo_op *op = ctx->op;
    int axes[CF_MAX], rc = PARDO_OK;
    int64_t len = -1;
    for (int j = 0; j < a->n_in; j++) {
        const pardo_tensor *x = xs[j];
        if (x->is_array || x->ndim < 1)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "scan input %d has no dim to scan", j);
        if ((rc = pardo_normalize_axis(a->in_axes[j], x->ndim, "scan_input_axes", &axes[j], ctx->st)) != PARDO_OK)
            return rc;
        if (len >= 0 && x->shape[axes[j]] != len)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "scan input %d has %lld slices along axis %d, scan input 0 %lld",
                                j, (long long)x->shape[axes[j]], axes[j], (long long)len);
        len = x->shape[axes[j]];
    }
    if (len < 0) len = 0;
    pardo_tensor **lists = calloc((size_t)(a->n_out * len + 1), sizeof(*lists));
    if (!lists) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for %lld slices", (long long)len);
    for (int k = 0; k < a->n_state; k++) states[k] = pardo_tensor_retain(s0[k]);
    for (int64_t t = 0; rc == PARDO_OK && t < len; t++) {
        for (int j = 0; rc == PARDO_OK && j < a->n_in; j++) {
            pardo_tensor *slice = take_slice(xs[j], axes[j], a->in_dirs[j] ? len - 1 - t : t, ctx->st);
            rc = slice ? pardo_scope_set_move(scope, name_at(op, "body_in", a->n_state + j), slice, ctx->st)
                       : ctx->st->code;
        }
        for (int k = 0; rc == PARDO_OK && k < a->n_state; k++)
            rc = pardo_scope_set(scope, name_at(op, "body_in", k), states[k], ctx->st);
        if (rc == PARDO_OK) rc = run_block(ctx, a->body, scope);
        pardo_tensor *next[CF_MAX];
        int got = 0;
        for (; rc == PARDO_OK && got < a->n_state; got++)
            if (!(next[got] = block_result(ctx, scope, a->body, name_at(op, "body_out", got)))) rc = ctx->st->code;
        if (rc != PARDO_OK) {
            release_all(next, got - 1 < 0 ? 0 : got - 1);
            break;
        }
        for (int k = 0; k < a->n_state; k++) {
            pardo_tensor_release(states[k]);
            states[k] = next[k];
        }
        for (int j = 0; rc == PARDO_OK && j < a->n_out; j++) {
            int64_t at = a->out_dirs[j] ? len - 1 - t : t;
            if (!(lists[j * len + at] = block_result(ctx, scope, a->body, name_at(op, "body_out", a->n_state + j))))
                rc = ctx->st->code;
        }
        unbind_results(op, scope);
    }
    for (int j = 0; rc == PARDO_OK && j < a->n_out; j++) {
        const char *name = name_at(op, "body_out", a->n_state + j);
        pardo_type elem = var_type(ctx, a->body, name);
        int nd = len ? lists[j * len]->ndim : elem.ndim, ax;
        char what[256];
        snprintf(what, sizeof what, "scan output '%s'", name);
        if ((rc = pardo_normalize_axis(a->out_axes[j], nd + 1, "scan_output_axes", &ax, ctx->st)) == PARDO_OK &&
            !(outs[j] = stack(lists + j * len, len, ax, &elem, what, ctx->st)))
            rc = ctx->st->code;
    }
    release_all(lists, a->n_out * len);
    free(lists);
    return rc;
}

/* The batch form: scan_one per entry of dim 0, the results stacked along it. */
static int scan_batch(pardo_kernel_ctx *ctx, const scan_attrs *a, pardo_scope *scope, pardo_tensor *const *s0,
                      pardo_tensor *const *xs, pardo_tensor **states, pardo_tensor **outs) {
    const pardo_tensor *lens = ctx->in[0];
    int64_t batch = -1;
    for (int k = 0; k < a->n_state + a->n_in; k++) {
        const pardo_tensor *x = k < a->n_state ? s0[k] : xs[k - a->n_state];
        if (x->is_array || x->ndim < (k < a->n_state ? 1 : 2))
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "batch: input %d needs a batch dim 0%s", k + 1,
                                k < a->n_state ? "" : " and a dim 1 to scan");
        if (batch >= 0 && x->shape[0] != batch)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "batch: input %d has batch %lld, input 1 %lld", k + 1,
                                (long long)x->shape[0], (long long)batch);
        batch = x->shape[0];
    }
    if (lens) {
        if (lens->is_array || lens->numel != batch)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "sequence_lens has %lld entries, the batch is %lld",
                                (long long)lens->numel, (long long)batch);
        for (int64_t b = 0; b < batch; b++)
            if (a->n_in && (int64_t)pardo_tensor_get_f64(lens, b) != xs[0]->shape[1])
                return pardo_errorf(ctx->st, PARDO_ENOTSUP, "sequence_lens[%lld] is %lld, not the full length %lld "
                                    "(pardo's scan runs whole sequences)", (long long)b,
                                    (long long)pardo_tensor_get_f64(lens, b), (long long)xs[0]->shape[1]);
    }
    const int n_res = a->n_state + a->n_out;
    pardo_tensor **res = calloc((size_t)(n_res * batch + 1), sizeof(*res));
    if (!res) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory");
    scan_attrs one = *a;
    memset(one.in_axes, 0, sizeof one.in_axes);
    memset(one.out_axes, 0, sizeof one.out_axes);
    int rc = PARDO_OK;
    for (int64_t b = 0; rc == PARDO_OK && b < batch; b++) {
        pardo_tensor *s[CF_MAX] = {0}, *x[CF_MAX] = {0}, *fs[CF_MAX] = {0}, *os[CF_MAX] = {0};
        for (int k = 0; rc == PARDO_OK && k < a->n_state; k++)
            if (!(s[k] = take_slice(s0[k], 0, b, ctx->st))) rc = ctx->st->code;
        for (int j = 0; rc == PARDO_OK && j < a->n_in; j++)
            if (!(x[j] = take_slice(xs[j], 0, b, ctx->st))) rc = ctx->st->code;
        if (rc == PARDO_OK) rc = scan_one(ctx, &one, scope, s, x, fs, os);
        for (int k = 0; k < a->n_state; k++) res[k * batch + b] = fs[k];
        for (int j = 0; j < a->n_out; j++) res[(a->n_state + j) * batch + b] = os[j];
        release_all(s, a->n_state);
        release_all(x, a->n_in);
    }
    for (int k = 0; rc == PARDO_OK && k < n_res; k++) {
        const char *name = name_at(ctx->op, "body_out", k);
        pardo_type elem = var_type(ctx, a->body, name);
        char what[256];
        snprintf(what, sizeof what, "output '%s' over the batch", name);
        pardo_tensor *y = stack(res + k * batch, batch, 0, &elem, what, ctx->st);
        if (!y) rc = ctx->st->code;
        else if (k < a->n_state) states[k] = y;
        else outs[k - a->n_state] = y;
    }
    release_all(res, n_res * batch);
    free(res);
    return rc;
}

static int scan_cpu(pardo_kernel_ctx *ctx) {
    scan_attrs a;
    int rc = need_executor(ctx);
    if (rc != PARDO_OK || (rc = scan_attrs_get(ctx->op, &a, ctx->st)) != PARDO_OK) return rc;
    const int off = a.batch ? 1 : 0;
    pardo_tensor *states[CF_MAX] = {0}, *outs[CF_MAX] = {0};
    pardo_scope *scope = pardo_scope_new(ctx->scope);
    if (!scope) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory");
    rc = a.batch ? scan_batch(ctx, &a, scope, ctx->in + off, ctx->in + off + a.n_state, states, outs)
                 : scan_one(ctx, &a, scope, ctx->in, ctx->in + a.n_state, states, outs);
    for (int k = 0; rc == PARDO_OK && k < a.n_state; k++) rc = put_output(ctx, k, states[k]);
    for (int j = 0; rc == PARDO_OK && j < a.n_out; j++) rc = put_output(ctx, a.n_state + j, outs[j]);
    release_all(states, a.n_state);
    release_all(outs, a.n_out);
    pardo_scope_free(scope);
    return rc;
}

const pardo_op_def pardo_op_scan = {
    .type = "scan",
    .doc = "runs block body once per slice of the scan inputs, carrying states; scan outputs stacked along "
           "scan_output_axes",
    .inputs = scan_ins,
    .n_inputs = 1,
    .outputs = scan_outs,
    .n_outputs = 1,
    .attrs = scan_attr_defs,
    .n_attrs = 9,
    .infer = no_infer,
    .cpu = scan_cpu,
};
