/* rank_merge.c - rank_merge, the merge over the ranks of an MPI job
 * (`mpirun -np N pardo train`, src/exec/comm.h): each input, a rank's
 * gradient (already merged over its parts), becomes its mean over the
 * ranks weighted by each rank's rows, sum_r n_r X_r / sum_r n_r, as merge
 * weighs the parts, so N ranks of B rows train as one process of N x B
 * rows. Input 0 is the rank's batch (its dim 0 counts the rows; a split's
 * tensor_array counts its parts' rows). The row counts are summed first
 * (one allreduce of a scalar); each rank then scales its inputs by n_r / n
 * into a buffer the op keeps (no allocation in the steady state), packed in
 * input order (the transpiler's, the same on every rank: never arrival
 * order, horovod#100) in buckets of attr bucket_mb, and each bucket is
 * summed over the ranks by one allreduce, then unpacked into the outputs
 * (in place). One process: the outputs are the inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm.h"
#include "op.h"

static const pardo_arg_def rm_in[] = {
    {"rows", "the rank's batch: its dim 0 (a tensor_array: its parts' dim 0 summed) weighs the rank", false, false},
    {"X", "a gradient per output (float32 or float64), in the same order on every rank", false, true},
};
static const pardo_arg_def rm_out[] = {
    {"Y", "X's mean over the ranks weighted by their rows (name X: in place)", false, true},
};
static const pardo_attr_def rm_attrs[] = {
    {"bucket_mb", PARDO_ATTR_FLOAT, "4", "bytes of gradients summed by one allreduce, in MiB (> 0)"},
};

static int rm_infer(pardo_infer_ctx *ctx) {
    if (ctx->n_out != ctx->n_in - 1)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "%d gradients but %d outputs, expected one output per gradient",
                            ctx->n_in - 1, ctx->n_out);
    double mb;
    int rc = pardo_attr_float(ctx->op, "bucket_mb", 4, &mb, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (!(mb > 0) || isinf(mb))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "attr 'bucket_mb' is %g, expected a number > 0", mb);
    if (ctx->in[0]->ndim < 1) return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'rows' is a scalar, expected [N, ...]");
    for (int k = 1; k < ctx->n_in; k++) {
        if (ctx->in[k]->dtype != PARDO_F32 && ctx->in[k]->dtype != PARDO_F64)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d is %s, expected float32 or float64", k,
                                pardo_dtype_name(ctx->in[k]->dtype));
        ctx->out[k - 1] = *ctx->in[k];
    }
    return PARDO_OK;
}

/* The buffer the op keeps across runs (pardo_op_state). */
typedef struct rm_state {
    void *buf;
    size_t cap; // bytes
} rm_state;

static void rm_state_free(void *p) {
    rm_state *s = p;
    if (s) free(s->buf);
    free(s);
}

/* This rank's rows: dim 0 of input 0, or of its parts. */
static double rank_rows(const pardo_tensor *t) {
    if (!t->is_array) return t->ndim > 0 ? (double)t->shape[0] : 0;
    double n = 0;
    for (int i = 0; i < t->n_parts; i++) {
        const pardo_tensor *p = pardo_tensor_array_part(t, i);
        if (p && p->ndim > 0) n += (double)p->shape[0];
    }
    return n;
}

/* Inputs [first, end) (one dtype, at most a bucket's bytes but for a lone big one): scaled by w into buf,
 * summed over the ranks, unpacked into the outputs. */
static int rm_bucket(pardo_kernel_ctx *ctx, int first, int end, double w, void *buf) {
    const pardo_dtype dt = ctx->in[first]->dtype;
    int64_t at = 0;
    for (int k = first; k < end; k++) {
        const pardo_tensor *x = ctx->in[k];
        if (dt == PARDO_F32) {
            const float *src = pardo_tensor_data(x);
            float *d = (float *)buf + at;
            for (int64_t i = 0; i < x->numel; i++) d[i] = (float)((double)src[i] * w);
        } else {
            const double *src = pardo_tensor_data(x);
            double *d = (double *)buf + at;
            for (int64_t i = 0; i < x->numel; i++) d[i] = src[i] * w;
        }
        at += x->numel;
    }
    int rc = pardo_comm_allreduce_sum(dt, buf, at, ctx->st);
    if (rc != PARDO_OK) return rc;
    at = 0;
    for (int k = first; k < end; k++) {
        const pardo_tensor *x = ctx->in[k];
        pardo_tensor *y = pardo_kernel_output(ctx, k - 1, x->dtype, x->ndim, x->shape);
        if (!y) return ctx->st->code;
        memcpy(pardo_tensor_data(y), (char *)buf + at * (int64_t)pardo_dtype_size(dt), x->nbytes);
        at += x->numel;
    }
    return PARDO_OK;
}

/* The end of the bucket starting at input `first`: the inputs after it of its dtype while they fit in
 * `bucket` bytes (a lone bigger one is a bucket of its own); *bytes their size. */
static int bucket_end(const pardo_kernel_ctx *ctx, int first, size_t bucket, size_t *bytes) {
    int end = first + 1;
    *bytes = ctx->in[first]->nbytes;
    for (; end < ctx->n_in && ctx->in[end]->dtype == ctx->in[first]->dtype && *bytes + ctx->in[end]->nbytes <= bucket;
         end++)
        *bytes += ctx->in[end]->nbytes;
    return end;
}

static int rm_cpu(pardo_kernel_ctx *ctx) {
    for (int k = 1; k < ctx->n_in; k++)
        if (ctx->in[k]->is_array || (ctx->in[k]->dtype != PARDO_F32 && ctx->in[k]->dtype != PARDO_F64))
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d must be a float32 or float64 tensor", k);
    if (pardo_comm_size() == 1) { /* one process: the mean of one rank */
        for (int k = 1; k < ctx->n_in; k++)
            if (!pardo_kernel_output_as(ctx, k - 1, k, ctx->in[k]->ndim, ctx->in[k]->shape)) return ctx->st->code;
        return PARDO_OK;
    }
    double mb;
    int rc = pardo_attr_float(ctx->op, "bucket_mb", 4, &mb, ctx->st);
    if (rc != PARDO_OK) return rc;
    const size_t bucket = (size_t)(mb * 1048576.0) < 64 ? 64 : (size_t)(mb * 1048576.0);
    double rows[1] = {rank_rows(ctx->in[0])};
    const double mine = rows[0];
    if ((rc = pardo_comm_allreduce_sum(PARDO_F64, rows, 1, ctx->st)) != PARDO_OK) return rc;
    if (!(rows[0] > 0))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "no rank has rows in this step: nothing to weigh the gradients by");
    const double w = mine / rows[0];
    /* the buffer: the biggest bucket */
    size_t need = 0, bytes;
    for (int first = 1; first < ctx->n_in; first = bucket_end(ctx, first, bucket, &bytes))
        if (bucket_end(ctx, first, bucket, &bytes) && bytes > need) need = bytes;
    pardo_op_state *slot = ctx->state;
    rm_state local = {0}, *s = slot ? slot->data : NULL;
    if (slot && !s) {
        if (!(s = calloc(1, sizeof(*s)))) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory");
        slot->data = s;
        slot->free_fn = rm_state_free;
    }
    if (!s) s = &local;
    if (need > s->cap) {
        void *b = realloc(s->buf, need);
        if (!b) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for a %zu-byte bucket", need);
        s->buf = b;
        s->cap = need;
    }
    for (int first = 1, end; rc == PARDO_OK && first < ctx->n_in; first = end) {
        end = bucket_end(ctx, first, bucket, &bytes);
        rc = rm_bucket(ctx, first, end, w, s->buf);
    }
    if (s == &local) free(local.buf);
    return rc;
}

const pardo_op_def pardo_op_rank_merge = {
    .type = "rank_merge",
    .doc = "under mpirun: each gradient's mean over the ranks weighted by their rows (input 0 the rank's batch), "
           "summed by allreduce in buckets in input order; one process: a copy",
    .inputs = rm_in,
    .n_inputs = 2,
    .outputs = rm_out,
    .n_outputs = 1,
    .attrs = rm_attrs,
    .n_attrs = 1,
    .infer = rm_infer,
    .cpu = rm_cpu,
    .inplace = true,
    .array_ok = 1u,
};
