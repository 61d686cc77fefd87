/* rank_merge.c - rank_merge, the merge over the ranks of an MPI job
 * (`mpirun -np N pardo train`, src/exec/comm.h): each input, a rank's
 * gradient (already merged over its parts), becomes its mean over the
 * ranks weighted by each rank's rows, sum_r n_r X_r / sum_r n_r, as merge
 * weighs the parts, so N ranks of B rows train as one process of N x B
 * rows. Input 0 is the rank's batch (its dim 0 counts the rows; a split's
 * tensor_array counts its parts' rows).
 *
 * The gradients are packed, in input order (the transpiler's, the same on
 * every rank: never arrival order, horovod#100), into buckets of attr
 * bucket_mb, each rank's scaled by its rows n_r, and each bucket is summed
 * over the ranks by one allreduce (the last by a blocking one in rank_merge,
 * the others by non-blocking ones that may start early), then the sums over
 * sum_r n_r are unpacked into the outputs (in place); the row count is
 * summed last.
 *
 * Overlap (DDP's buckets, Horovod's fusion): from the second run on, a
 * gradient that a merge (mean, weight_by) of a parallel_do's tensor_array
 * writes is packed as the parts hand it on (rank_merge.h: sum_i n_i part_i,
 * which is n_r times the merge), and a bucket whose gradients are all
 * packed is started (MPI_Iallreduce) at once, by the part thread that
 * completed it, provided every bucket before it has started: the ranks
 * start the same collectives in the same order whatever the timing. The
 * parts advance the started buckets between their ops (Open MPI has no
 * asynchronous progress); rank_merge then waits for them, and packs and
 * sums the buckets that did not start early. No allocation in the steady
 * state. One process: the outputs are the inputs.
 *
 * A gradient that an op of block 0 writes (a graph not in parts, or not
 * from a merge) is packed the same way by the executor's thread that ran
 * its last writer, from the second run on (pardo_executor_watch_ops: the
 * op's outputs as it finishes, weighted by the rows an op of the window
 * read from input 0's var); the watched ops advance the started buckets
 * as the parts do. On the CPU only (a GPU run packs late). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <stdatomic.h>

#include "core/scope.h"
#include "exec/comm.h"
#include "exec/executor.h"
#include "op.h"
#include "rank_merge.h"
#include "trace/trace.h"

extern const pardo_op_def pardo_op_merge; /* the merges whose arrays a slot watches (ops/parallel.c) */

static const pardo_arg_def rm_in[] = {
    {"rows", "the rank's batch: its dim 0 (a tensor_array: its parts' dim 0 summed) weighs the rank", false, false},
    {"X", "a gradient per output (float32 or float64), in the same order on every rank", false, true},
};
static const pardo_arg_def rm_out[] = {
    {"Y", "X's mean over the ranks weighted by their rows (name X: in place)", false, true},
};
static const pardo_attr_def rm_attrs[] = {
    {"bucket_mb", PARDO_ATTR_FLOAT, "25",
     "bytes of gradients summed by one allreduce, in MiB (> 0; 25 as PyTorch DDP's bucket_cap_mb)"},
};

static int rm_infer(pardo_infer_ctx *ctx) {
    if (ctx->n_out != ctx->n_in - 1)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "%d gradients but %d outputs, expected one output per gradient",
                            ctx->n_in - 1, ctx->n_out);
    double mb;
    int rc = pardo_attr_float(ctx->op, "bucket_mb", 25, &mb, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (!(mb > 0) || isinf(mb))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "attr 'bucket_mb' is %g, expected a number > 0", mb);
    if (ctx->in[0]->ndim < 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'rows' is a scalar, expected [N, ...]");
    for (int k = 1; k < ctx->n_in; k++) {
        if (ctx->in[k]->dtype != PARDO_F32 && ctx->in[k]->dtype != PARDO_F64)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d is %s, expected float32 or float64", k,
                                pardo_dtype_name(ctx->in[k]->dtype));
        ctx->out[k - 1] = *ctx->in[k];
    }
    return PARDO_OK;
}

/* One gradient (input k + 1). */
typedef struct rm_slot {
    const char *array_name;    // the tensor_array its merge reads (borrowed from the program), or NULL: packed late
    const char *weight_name;   // that merge's weight_by array
    int bucket;
    int64_t offset;    // elements into its bucket
    int64_t numel;     // and how many
    int writer;        // the op of block 0 that writes it last before rank_merge (packed as it ends), or -1
    int writer_out;    // that op's output
    int next_of_writer; // the next slot of the same writer, or -1
    atomic_int parts;  // parts handed on this step
    atomic_bool early; // packed from the parts (or its writer) this step
} rm_slot;

typedef struct rm_bucket {
    int first, end;          // slots [first, end)
    pardo_dtype dtype;
    int64_t numel;
    size_t at;               // byte offset in the buffer
    atomic_int packed;       // slots packed this step
    atomic_bool started;
    pardo_comm_request req;
    bool done;               // its allreduce completed (progress saw it)
    int64_t t_start, t_done; // trace: ns
} rm_bucket;

/* What the op keeps across runs (pardo_op_state). */
typedef struct rm_state {
    void *buf; // every bucket, one after the other
    rm_slot *slots;
    int n_slots;
    rm_bucket *buckets;
    int n_buckets;
    pthread_mutex_t lock; // starting buckets in order
    int next_start;       // the first bucket not started
    bool armed;           // registered: parts pack and start this step
    const struct pardo_scope *scope; // the scope its arrays are vars of (the op's, block 0's root scope)
    /* the watched ops of block 0 (pardo_executor_watch_ops), [watch_first, watch_end): per op, its input that
     * reads input 0's var (-1: none) and its first slot (-1: none) */
    int watch_first, watch_end;
    int *rows_input, *first_slot;
    atomic_ullong armed_run; // 1 + the run the watched ops pack for (0: none)
    atomic_ullong rows_run;  // 1 + the run whose rows `rows` holds (0: none)
    _Atomic double rows;     // this rank's rows in that run (input 0's, read by a watched op)
    atomic_int watch_packed; // slots the watched ops packed this run
} rm_state;

/* The armed states, for the parts' notifications (rank_merge.h). */
#define MAX_ARMED 8
static rm_state *_Atomic armed[MAX_ARMED];
static atomic_int n_armed, n_started;

static void rm_disarm(rm_state *s) {
    for (int i = 0; i < MAX_ARMED; i++) {
        rm_state *expect = s;
        if (atomic_compare_exchange_strong(&armed[i], &expect, NULL)) atomic_fetch_sub(&n_armed, 1);
    }
    s->armed = false;
}

static void rm_state_free(void *p) {
    rm_state *s = p;
    if (!s) return;
    rm_disarm(s);
    pthread_mutex_destroy(&s->lock);
    free(s->buf);
    free(s->rows_input);
    free(s->first_slot);
    free(s->slots);
    free(s->buckets);
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

/* The end of the bucket starting at input `first`: the inputs after it of its dtype while they fit in
 * `bucket` bytes (a lone bigger one is a bucket of its own). */
static int bucket_end(const pardo_kernel_ctx *ctx, int first, size_t bucket) {
    size_t bytes = ctx->in[first]->nbytes;
    int end = first + 1;
    for (; end < ctx->n_in && ctx->in[end]->dtype == ctx->in[first]->dtype && bytes + ctx->in[end]->nbytes <= bucket;
         end++)
        bytes += ctx->in[end]->nbytes;
    return end;
}

/* The last op of block 0 that writes input var `name` before the op: a merge (mean, weight_by), and the slot
 * watches its tensor_array; any other, and the slot is packed as that op ends (writer, writer_out). */
static void find_writer(const pardo_kernel_ctx *ctx, const char *name, rm_slot *sl) {
    const pardo_block *b0 = &ctx->prog->blocks[ctx->block];
    sl->writer = sl->writer_out = sl->next_of_writer = -1;
    for (int i = ctx->op_index - 1; i >= 0; i--) {
        const pardo_op *op = &b0->ops[i];
        if (!pardo_op_writes(op, name)) continue;
        for (int k = 0; k < op->n_out; k++)
            if (strcmp(op->out[k], name) == 0) sl->writer = i, sl->writer_out = k;
        const char *mode = NULL, *weight = NULL;
        pardo_status st;
        if (op->def == &pardo_op_merge && op->n_in == 2 && op->n_out == 1 &&
            pardo_attr_string(op, "mode", "concat", &mode, &st) == PARDO_OK && strcmp(mode, "mean") == 0 &&
            pardo_attr_string(op, "weight_by", "", &weight, &st) == PARDO_OK && weight[0] &&
            strcmp(weight, op->in[1]) == 0) {
            sl->array_name = op->in[0];
            sl->weight_name = op->in[1];
            sl->writer = -1;
        }
        return; /* the last writer decides */
    }
}

/* The layout, made on the first run (the inputs' shapes never change: they are params' gradients). */
static rm_state *rm_state_new(pardo_kernel_ctx *ctx, size_t bucket) {
    rm_state *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    pthread_mutex_init(&s->lock, NULL);
    s->n_slots = ctx->n_in - 1;
    s->slots = calloc((size_t)s->n_slots, sizeof(*s->slots));
    s->buckets = calloc((size_t)s->n_slots, sizeof(*s->buckets));
    if (!s->slots || !s->buckets) {
        rm_state_free(s);
        return NULL;
    }
    size_t at = 0;
    for (int first = 1; first < ctx->n_in;) {
        int end = bucket_end(ctx, first, bucket);
        rm_bucket *b = &s->buckets[s->n_buckets];
        *b = (rm_bucket){.first = first - 1, .end = end - 1, .dtype = ctx->in[first]->dtype, .at = at};
        for (int k = first; k < end; k++) {
            rm_slot *sl = &s->slots[k - 1];
            sl->bucket = s->n_buckets;
            sl->offset = b->numel;
            sl->numel = ctx->in[k]->numel;
            b->numel += ctx->in[k]->numel;
            find_writer(ctx, ctx->op->in[k], sl);
        }
        at += (size_t)b->numel * pardo_dtype_size(b->dtype);
        at = (at + 63) & ~(size_t)63;
        s->n_buckets++;
        first = end;
    }
    if (!(s->buf = malloc(at ? at : 1))) {
        rm_state_free(s);
        return NULL;
    }
    return s;
}

/* Adds f times src (n elements of dtype) into dst (or sets it, when first). */
static void axpy(pardo_dtype dt, void *dst, const void *src, int64_t n, double f, bool first) {
    if (dt == PARDO_F32) {
        float *d = dst;
        const float *x = src;
        const float w = (float)f;
        if (first)
            for (int64_t i = 0; i < n; i++) d[i] = x[i] * w;
        else
            for (int64_t i = 0; i < n; i++) d[i] += x[i] * w;
    } else {
        double *d = dst;
        const double *x = src;
        if (first)
            for (int64_t i = 0; i < n; i++) d[i] = x[i] * f;
        else
            for (int64_t i = 0; i < n; i++) d[i] += x[i] * f;
    }
}

static void *slot_data(rm_state *s, const rm_slot *sl) {
    const rm_bucket *b = &s->buckets[sl->bucket];
    return (char *)s->buf + b->at + (size_t)sl->offset * pardo_dtype_size(b->dtype);
}

/* Starts, in order, the buckets whose slots are all packed (the first not started must be the next), all but the
 * last: rank_merge sums that one with a blocking allreduce (rm_finish). */
static void start_ready(rm_state *s) {
    pthread_mutex_lock(&s->lock);
    while (s->next_start < s->n_buckets - 1) {
        rm_bucket *b = &s->buckets[s->next_start];
        if (atomic_load(&b->packed) != b->end - b->first) break;
        pardo_status st;
        b->t_start = pardo_trace_on() ? pardo_trace_now_ns() : 0;
        if (pardo_comm_iallreduce_sum(b->dtype, (char *)s->buf + b->at, b->numel, &b->req, &st) != PARDO_OK) break;
        atomic_store(&b->started, true);
        atomic_fetch_add(&n_started, 1);
        s->next_start++;
    }
    pthread_mutex_unlock(&s->lock);
}

void pardo_rank_merge_part_set(const struct pardo_scope *scope, const char *name, const pardo_tensor *array, int part,
                               int n_parts) {
    (void)part;
    if (atomic_load_explicit(&n_armed, memory_order_acquire) == 0) return;
    for (int a = 0; a < MAX_ARMED; a++) {
        rm_state *s = atomic_load(&armed[a]);
        if (!s || s->scope != scope) continue;
        for (int k = 0; k < s->n_slots; k++) {
            rm_slot *sl = &s->slots[k];
            if (!sl->array_name || strcmp(sl->array_name, name) != 0) continue;
            if (atomic_fetch_add(&sl->parts, 1) + 1 != n_parts) return;
            /* the last part: every part is set; n_i part_i summed in part order (the weights are the split's,
             * which nothing writes while the parts run) */
            const rm_bucket *b = &s->buckets[sl->bucket];
            const pardo_tensor *weight = pardo_scope_find(scope, sl->weight_name);
            void *dst = slot_data(s, sl);
            bool ok = array->is_array && array->n_parts == n_parts && weight && weight->is_array &&
                      weight->n_parts == n_parts;
            for (int i = 0; ok && i < n_parts; i++) {
                const pardo_tensor *x = pardo_tensor_array_part(array, i), *w = pardo_tensor_array_part(weight, i);
                ok = x && w && w->ndim > 0 && x->dtype == b->dtype && !x->is_array && x->numel == sl->numel;
                if (ok) axpy(b->dtype, dst, pardo_tensor_data(x), x->numel, (double)w->shape[0], i == 0);
            }
            if (!ok) return; /* left for rank_merge to pack */
            atomic_store(&sl->early, true);
            if (atomic_fetch_add(&s->buckets[sl->bucket].packed, 1) + 1 == b->end - b->first) start_ready(s);
            return;
        }
    }
}

void pardo_rank_merge_progress(void) {
    if (atomic_load_explicit(&n_started, memory_order_acquire) == 0) return;
    for (int a = 0; a < MAX_ARMED; a++) {
        rm_state *s = atomic_load(&armed[a]);
        if (!s || pthread_mutex_trylock(&s->lock) != 0) continue;
        for (int k = 0; k < s->next_start; k++) {
            rm_bucket *b = &s->buckets[k];
            if (b->done) continue;
            pardo_comm_progress(&b->req, &b->done, 1);
            if (b->done) {
                b->t_done = b->t_start ? pardo_trace_now_ns() : 0;
                atomic_fetch_sub(&n_started, 1);
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
}

/* pardo_op_watch_fn: watched op `index` of block 0 ended in `run`. It may read input 0's var (this rank's
 * rows, then known for the run), and write gradients (packed, n_r times, once the rows are known: else
 * rank_merge packs them), which may complete buckets (started in order); then the started buckets advance. */
static void rm_watch(void *arg, int index, uint64_t run, pardo_tensor *const *in, int n_in, pardo_tensor *const *out,
                     int n_out) {
    rm_state *s = arg;
    if (atomic_load_explicit(&s->armed_run, memory_order_acquire) != run + 1) return;
    const int w = index - s->watch_first;
    const int r = s->rows_input[w];
    if (r >= 0 && r < n_in && in[r] && atomic_load_explicit(&s->rows_run, memory_order_acquire) != run + 1) {
        atomic_store_explicit(&s->rows, rank_rows(in[r]), memory_order_relaxed);
        atomic_store_explicit(&s->rows_run, run + 1, memory_order_release);
    }
    const bool rows_known = atomic_load_explicit(&s->rows_run, memory_order_acquire) == run + 1;
    for (int k = s->first_slot[w]; rows_known && k >= 0; k = s->slots[k].next_of_writer) {
        rm_slot *sl = &s->slots[k];
        rm_bucket *b = &s->buckets[sl->bucket];
        const pardo_tensor *x = sl->writer_out < n_out ? out[sl->writer_out] : NULL;
        if (!x || x->is_array || x->dtype != b->dtype || x->numel != sl->numel) continue; /* packed late */
        axpy(b->dtype, slot_data(s, sl), pardo_tensor_data(x), x->numel,
             atomic_load_explicit(&s->rows, memory_order_relaxed), true);
        atomic_store(&sl->early, true);
        atomic_fetch_add(&s->watch_packed, 1);
        if (atomic_fetch_add(&b->packed, 1) + 1 == b->end - b->first) start_ready(s);
    }
    pardo_rank_merge_progress();
}

/* On the first run, on the CPU: the executor calls rm_watch after each op of block 0 from the first that reads
 * input 0's var or writes a slot's gradient up to rank_merge. Without such a slot nothing is watched; a window
 * that another watcher holds is left to rank_merge (packed late). */
static void rm_watch_setup(pardo_kernel_ctx *ctx, rm_state *s) {
    if (ctx->block != 0 || !ctx->exec || pardo_executor_device(ctx->exec) != PARDO_DEVICE_CPU) return;
    const pardo_block *b0 = &ctx->prog->blocks[0];
    int first = ctx->op_index;
    for (int k = 0; k < s->n_slots; k++)
        if (s->slots[k].writer >= 0 && s->slots[k].writer < first) first = s->slots[k].writer;
    if (first == ctx->op_index) return; /* every gradient comes from the parts (or from no op) */
    for (int i = 0; i < first; i++)
        for (int k = 0; k < b0->ops[i].n_in; k++)
            if (strcmp(b0->ops[i].in[k], ctx->op->in[0]) == 0) {
                first = i;
                goto found;
            }
found:;
    const int n = ctx->op_index - first;
    if (!(s->rows_input = malloc((size_t)n * sizeof(int))) || !(s->first_slot = malloc((size_t)n * sizeof(int))))
        return; /* out of memory: packed late */
    for (int i = 0; i < n; i++) {
        const pardo_op *op = &b0->ops[first + i];
        s->rows_input[i] = s->first_slot[i] = -1;
        for (int k = 0; k < op->n_in && s->rows_input[i] < 0; k++)
            if (strcmp(op->in[k], ctx->op->in[0]) == 0) s->rows_input[i] = k;
    }
    for (int k = s->n_slots - 1; k >= 0; k--) { /* each writer's slots in input order */
        rm_slot *sl = &s->slots[k];
        if (sl->writer < 0) continue;
        sl->next_of_writer = s->first_slot[sl->writer - first];
        s->first_slot[sl->writer - first] = k;
    }
    s->watch_first = first;
    s->watch_end = ctx->op_index;
    pardo_status st;
    if (pardo_executor_watch_ops(ctx->exec, first, ctx->op_index, rm_watch, s, &st) != PARDO_OK)
        s->watch_first = s->watch_end = 0;
}

/* Waits for (or packs and runs) every bucket, then unpacks sums / total rows into the outputs. */
static int rm_finish(pardo_kernel_ctx *ctx, rm_state *s, double mine) {
    int rc = PARDO_OK;
    if (atomic_load(&s->watch_packed) > 0 && atomic_load(&s->rows) != mine) /* the same feed all the run */
        return pardo_errorf(ctx->st, PARDO_ERUNTIME, "the gradients packed early were weighed by %g rows, not %g",
                            atomic_load(&s->rows), mine);
    for (int k = 0; k < s->n_slots; k++) { /* what the parts did not pack: n_r times the rank's gradient */
        rm_slot *sl = &s->slots[k];
        const pardo_tensor *x = ctx->in[k + 1];
        if (atomic_load(&sl->early)) continue;
        axpy(x->dtype, slot_data(s, sl), pardo_tensor_data(x), x->numel, mine, true);
        atomic_fetch_add(&s->buckets[sl->bucket].packed, 1);
    }
    start_ready(s); /* every bucket is packed now: the rest start, in order */
    double rows[1] = {mine};
    for (int k = 0; k < s->n_buckets && rc == PARDO_OK; k++) {
        rm_bucket *b = &s->buckets[k];
        if (k == s->n_buckets - 1) { /* the last, the gradients written last: nothing is left to hide it behind,
                                      * and MPI's blocking allreduce is 2-3x faster than a non-blocking one polled
                                      * (Open MPI 4.1, 2 ranks, 1-3 MB); every rank sums it so, after the others */
            b->t_start = pardo_trace_on() ? pardo_trace_now_ns() : 0;
            rc = pardo_comm_allreduce_sum(b->dtype, (char *)s->buf + b->at, b->numel, ctx->st);
            if (b->t_start) {
                pardo_trace_arg args[2] = {{"bucket", NULL, (double)k}, {"elements", NULL, (double)b->numel}};
                pardo_trace_complete("bucket", "comm", b->t_start, pardo_trace_now_ns(), args, 2);
            }
            break;
        }
        pthread_mutex_lock(&s->lock);
        bool pending = atomic_load(&b->started) && !b->done;
        if (pending) b->done = true, atomic_fetch_sub(&n_started, 1); /* taken over here */
        pthread_mutex_unlock(&s->lock);
        if (!atomic_load(&b->started))
            rc = pardo_errorf(ctx->st, PARDO_ERUNTIME, "bucket %d of the gradients did not start", k);
        else if (pending)
            rc = pardo_comm_wait(&b->req, ctx->st);
        if (b->t_start) {
            int64_t t1 = pending || !b->t_done ? pardo_trace_now_ns() : b->t_done;
            pardo_trace_arg args[2] = {{"bucket", NULL, (double)k}, {"elements", NULL, (double)b->numel}};
            pardo_trace_complete("bucket", "comm", b->t_start, t1, args, 2);
        }
    }
    if (rc == PARDO_OK) rc = pardo_comm_allreduce_sum(PARDO_F64, rows, 1, ctx->st);
    if (rc == PARDO_OK && !(rows[0] > 0))
        rc = pardo_errorf(ctx->st, PARDO_EINVAL, "no rank has rows in this step: nothing to weigh the gradients by");
    for (int k = 0; rc == PARDO_OK && k < s->n_slots; k++) {
        const pardo_tensor *x = ctx->in[k + 1];
        pardo_tensor *y = pardo_kernel_output(ctx, k, x->dtype, x->ndim, x->shape);
        if (!y) return ctx->st->code;
        const void *src = slot_data(s, &s->slots[k]);
        axpy(x->dtype, pardo_tensor_data(y), src, x->numel, 1 / rows[0], true);
    }
    return rc;
}

/* For the next run: counters back to 0, armed (registered) for the parts of the op's scope. */
static void rm_arm(pardo_kernel_ctx *ctx, rm_state *s) {
    pthread_mutex_lock(&s->lock); /* a watched op that rank_merge does not wait for may be advancing buckets */
    for (int k = 0; k < s->n_slots; k++) {
        atomic_store(&s->slots[k].parts, 0);
        atomic_store(&s->slots[k].early, false);
    }
    s->scope = ctx->scope;
    for (int k = 0; k < s->n_buckets; k++) {
        rm_bucket *b = &s->buckets[k];
        atomic_store(&b->packed, 0);
        atomic_store(&b->started, false);
        b->done = false;
        b->req = 0;
        b->t_start = b->t_done = 0;
    }
    s->next_start = 0;
    atomic_store(&s->watch_packed, 0);
    pthread_mutex_unlock(&s->lock);
    if (s->watch_end > s->watch_first) atomic_store_explicit(&s->armed_run, ctx->step + 2, memory_order_release);
    pardo_comm_set_poll(pardo_rank_merge_progress); /* long kernels advance the started buckets too */
    if (s->armed) return;
    for (int i = 0; i < MAX_ARMED; i++) {
        rm_state *expect = NULL;
        if (atomic_compare_exchange_strong(&armed[i], &expect, s)) {
            atomic_fetch_add(&n_armed, 1);
            s->armed = true;
            return;
        }
    }
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
    int rc = pardo_attr_float(ctx->op, "bucket_mb", 25, &mb, ctx->st);
    if (rc != PARDO_OK) return rc;
    const size_t bucket = (size_t)(mb * 1048576.0) < 64 ? 64 : (size_t)(mb * 1048576.0);
    pardo_op_state *slot = ctx->state;
    if (!slot) return pardo_errorf(ctx->st, PARDO_EINVAL, "rank_merge runs only in an executor (it keeps state)");
    rm_state *s = slot->data;
    if (!s) {
        if (!(s = rm_state_new(ctx, bucket))) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory");
        slot->data = s;
        slot->free_fn = rm_state_free;
        rm_watch_setup(ctx, s);
    }
    /* the inputs keep the layout's shapes (the gradients of params) */
    for (int k = 0; k < s->n_slots; k++)
        if (ctx->in[k + 1]->numel != s->slots[k].numel || ctx->in[k + 1]->dtype != s->buckets[s->slots[k].bucket].dtype)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d has %lld elements, %lld at its first run", k + 1,
                                (long long)ctx->in[k + 1]->numel, (long long)s->slots[k].numel);
    rc = rm_finish(ctx, s, rank_rows(ctx->in[0]));
    if (rc == PARDO_OK) rm_arm(ctx, s);
    else
        rm_disarm(s), atomic_store(&s->armed_run, 0);
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
