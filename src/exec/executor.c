/* executor.c - sequential execution of blocks (see executor.h). */
#include "exec/executor.h"
#include "exec/executor_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/device_cache.h"
#include "core/init_fill.h"
#include "exec/release_plan.h"
#include "exec/stage_plan.h"
#include "exec/tensor_pool.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

/* Fills op i of block b's plan: its output vars, which outputs are in place,
 * and (block 0) room for its root scope entries. PARDO_ENOMEM on failure. */
static int plan_op(const pardo_program *p, int b, int i, op_plan *pl) {
    const pardo_op *op = &p->blocks[b].ops[i];
    PARDO_ASSERT(op->n_in <= MAX_OP_IO && op->n_out <= MAX_OP_IO);
    if (!(pl->out_vars = calloc((size_t)op->n_out + 1, sizeof(*pl->out_vars)))) return PARDO_ENOMEM;
    for (int k = 0; k < op->n_out; k++) {
        if (!op->out[k][0]) continue;
        pl->out_vars[k] = pardo_program_lookup_var(p, b, op->out[k], NULL);
        for (int j = 0; j < op->n_in; j++)
            if (strcmp(op->in[j], op->out[k]) == 0) pl->inplace |= (uint64_t)1 << k;
    }
    if (b != 0) return PARDO_OK;
    int n = op->n_in + op->n_out;
    if (!(pl->root_entry = malloc(sizeof(int) * (size_t)(n + 1)))) return PARDO_ENOMEM;
    for (int k = 0; k < n; k++) pl->root_entry[k] = -1;
    return PARDO_OK;
}

/* Room for the root entries of the vars block 0's ops free (release_temps). */
static int plan_releases(pardo_executor *ex, pardo_status *st) {
    for (int i = 0; i < ex->release.n_ops; i++) {
        int n = ex->release.count[i];
        if (n == 0) continue;
        op_plan *pl = &ex->ops[0][i];
        if (!(pl->release_entry = malloc(sizeof(int) * (size_t)n)))
            return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning block 0's memory");
        for (int k = 0; k < n; k++) pl->release_entry[k] = -1;
    }
    return PARDO_OK;
}

int pardo_executor_new(const pardo_program *p, const pardo_exec_options *opt, pardo_executor **out,
                       pardo_status *st) {
    *out = NULL;
    pardo_executor *ex = calloc(1, sizeof(*ex));
    if (!ex) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    ex->prog = p;
    ex->opt = *opt;
    if (ex->opt.nthreads < 1) ex->opt.nthreads = 1;
    pardo_program_index_vars(p); /* kernels look vars up from several threads (parallel_do parts): only reads from here */
    if (!(ex->root = pardo_scope_new(NULL)) || !(ex->states = calloc((size_t)p->n_blocks + 1, sizeof(*ex->states))) ||
        !(ex->plans = calloc((size_t)p->n_blocks + 1, sizeof(*ex->plans))) ||
        !(ex->planned = calloc((size_t)p->n_blocks + 1, sizeof(*ex->planned)))) {
        pardo_executor_free(ex);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    }
    if (!(ex->ops = calloc((size_t)p->n_blocks + 1, sizeof(*ex->ops)))) {
        pardo_executor_free(ex);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    }
    for (int b = 0; b < p->n_blocks; b++) {
        if (!(ex->states[b] = calloc((size_t)p->blocks[b].n_ops + 1, sizeof(*ex->states[b]))) ||
            !(ex->ops[b] = calloc((size_t)p->blocks[b].n_ops + 1, sizeof(*ex->ops[b])))) {
            pardo_executor_free(ex);
            return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        }
        for (int i = 0; i < p->blocks[b].n_ops; i++)
            if (plan_op(p, b, i, &ex->ops[b][i]) != PARDO_OK) {
                pardo_executor_free(ex);
                return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
            }
    }
    pardo_tensor_pool_init(&ex->pool);
    ex->opt.keep = NULL; /* borrowed only while the executor is made */
    ex->opt.n_keep = 0;
    if (opt->release_temps && (pardo_release_plan_build(p, opt->keep, opt->n_keep, &ex->release, st) != PARDO_OK ||
                               plan_releases(ex, st) != PARDO_OK)) {
        pardo_executor_free(ex);
        return st->code;
    }
    ex->pooling = opt->release_temps;
    if (ex->opt.device == PARDO_DEVICE_CUDA) {
        int n = pardo_device_count();
        if (n == 0) {
            pardo_device_note_cpu_fallback(pardo_device_compiled() ? "no CUDA device found"
                                                                   : "pardo was built without CUDA");
            ex->opt.device = PARDO_DEVICE_CPU;
        } else if (ex->opt.device_index < 0 || ex->opt.device_index >= n) {
            int idx = ex->opt.device_index;
            pardo_executor_free(ex);
            return pardo_errorf(st, PARDO_EINVAL, "--device cuda:%d: there are %d CUDA devices (0..%d)", idx, n, n - 1);
        } else if (pardo_device_set(ex->opt.device_index, st) != PARDO_OK) {
            pardo_executor_free(ex);
            return st->code;
        }
    }
    *out = ex;
    return PARDO_OK;
}

void pardo_executor_free(pardo_executor *ex) {
    if (!ex) return;
    pardo_dataflow_free(ex->df);
    for (int b = 0; ex->states && b < ex->prog->n_blocks; b++) {
        for (int i = 0; ex->states[b] && i < ex->prog->blocks[b].n_ops; i++)
            if (ex->states[b][i].free_fn) ex->states[b][i].free_fn(ex->states[b][i].data);
        free(ex->states[b]);
    }
    free(ex->states);
    for (int b = 0; ex->ops && b < ex->prog->n_blocks; b++) {
        for (int i = 0; ex->ops[b] && i < ex->prog->blocks[b].n_ops; i++) {
            free((void *)ex->ops[b][i].out_vars);
            free(ex->ops[b][i].root_entry);
            free(ex->ops[b][i].release_entry);
        }
        free(ex->ops[b]);
    }
    free(ex->ops);
    for (int b = 0; ex->plans && b < ex->prog->n_blocks; b++) pardo_stage_plan_clear(&ex->plans[b]);
    free(ex->plans);
    free(ex->planned);
    if (ex->early) {
        free(ex->early->progress);
        free(ex->early->claimed);
        free(ex->early->done);
        free(ex->early);
    }
    pardo_release_plan_clear(&ex->release);
    pardo_tensor_pool_clear(&ex->pool);
    pardo_scope_free(ex->root);
    free(ex);
    pardo_device_cache_trim(); /* the device blocks its tensors held go back to the device, not only the cache */
}

int pardo_executor_nthreads(const pardo_executor *ex) { return ex->opt.nthreads; }
const pardo_program *pardo_executor_program(const pardo_executor *ex) { return ex->prog; }

pardo_scope *pardo_executor_scope(pardo_executor *ex) { return ex->root; }
pardo_device_kind pardo_executor_device(const pardo_executor *ex) { return ex->opt.device; }
int pardo_executor_device_index(const pardo_executor *ex) { return ex->opt.device_index; }
uint64_t pardo_executor_steps(const pardo_executor *ex) { return ex->steps; }

static char *type_str(const pardo_type *t, char *buf, size_t n) {
    char shape[160];
    snprintf(buf, n, "%s %s", pardo_dtype_name(t->dtype), pardo_shape_str(t->ndim, t->shape, shape, sizeof shape));
    return buf;
}

/* True when t has v's dtype and a shape matching v's (-1 dims match any size). */
static bool tensor_fits(const pardo_tensor *t, const pardo_type *ty) {
    if (t->dtype != ty->dtype) return false;
    if (ty->ndim < 0) return true;
    if (t->ndim != ty->ndim) return false;
    for (int d = 0; d < t->ndim; d++)
        if (ty->shape[d] != -1 && ty->shape[d] != t->shape[d]) return false;
    return true;
}

static int var_error(const pardo_executor *ex, const pardo_graph_var *v, pardo_status *st) {
    char where[512];
    pardo_var_where(ex->prog, 0, v, where, sizeof where);
    return pardo_status_prefix(st, "%s: ", where);
}

static pardo_tensor *constant_tensor(const pardo_graph_var *v, pardo_status *st) {
    if (pardo_shape_numel(v->type.ndim, v->type.shape) < 0) {
        pardo_errorf(st, PARDO_EINVAL, "has a value but a run-time (-1) dim; give its full shape");
        return NULL;
    }
    pardo_tensor *t = pardo_tensor_new_cpu(v->type.dtype, v->type.ndim, v->type.shape, st);
    if (!t) return NULL;
    if (t->numel != v->n_value) {
        pardo_errorf(st, PARDO_ESHAPE, "value has %lld elements, its shape needs %lld", (long long)v->n_value,
                     (long long)t->numel);
        pardo_tensor_release(t);
        return NULL;
    }
    for (int64_t i = 0; i < t->numel; i++) pardo_tensor_set_f64(t, i, v->value[i]);
    return t;
}

static pardo_tensor *initial_tensor(const pardo_graph_var *v, pardo_status *st) {
    if (pardo_shape_numel(v->type.ndim, v->type.shape) < 0) {
        pardo_errorf(st, PARDO_EINVAL, "is a %s with a run-time (-1) dim; a %s needs its full shape",
                     pardo_var_role_name(v->role), pardo_var_role_name(v->role));
        return NULL;
    }
    pardo_tensor *t = pardo_tensor_new_cpu(v->type.dtype, v->type.ndim, v->type.shape, st);
    if (t && pardo_init_fill(t, &v->init, st) != PARDO_OK) {
        pardo_tensor_release(t);
        return NULL;
    }
    return t;
}

int pardo_executor_init_vars(pardo_executor *ex, const pardo_tensor_list *ckpt, const char *ckpt_name,
                             pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    char a[200], b[200];
    for (int i = 0; i < blk->n_vars; i++) {
        const pardo_graph_var *v = &blk->vars[i];
        if (!v->declared || v->kind != PARDO_VAR_TENSOR) continue;
        bool stateful = v->role == PARDO_VAR_PARAM || v->role == PARDO_VAR_STATE;
        pardo_tensor *t = NULL;
        pardo_tensor *saved = (stateful && ckpt) ? pardo_tensor_list_find(ckpt, v->name) : NULL;
        if (saved) {
            if (!tensor_fits(saved, &v->type) || pardo_shape_numel(v->type.ndim, v->type.shape) < 0) {
                pardo_type ty = pardo_tensor_type(saved);
                pardo_errorf(st, PARDO_ESHAPE, "%s: entry '%s' is %s, but the graph declares %s", ckpt_name, v->name,
                             type_str(&ty, a, sizeof a), type_str(&v->type, b, sizeof b));
                return var_error(ex, v, st);
            }
            t = pardo_tensor_retain(saved);
        } else if (v->value) {
            t = constant_tensor(v, st);
        } else if (stateful && v->init.fill != PARDO_FILL_NONE) {
            if (ckpt && v->role == PARDO_VAR_PARAM)
                fprintf(stderr, "pardo: warning: %s has no entry '%s'; the param keeps its init (%s)\n", ckpt_name,
                        v->name, pardo_fill_name(v->init.fill));
            t = initial_tensor(v, st);
        } else if (stateful) {
            pardo_errorf(st, PARDO_ENOTFOUND, "%s '%s' has no init and no value%s%s", pardo_var_role_name(v->role),
                         v->name, ckpt ? ", and is not in " : " (give one, or --load a checkpoint that has it)",
                         ckpt ? ckpt_name : "");
            return var_error(ex, v, st);
        } else {
            continue; /* feeds and temps get tensors at run time */
        }
        if (!t) return var_error(ex, v, st);
        if (pardo_scope_set_move(ex->root, v->name, t, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}

int pardo_executor_feed(pardo_executor *ex, const char *name, pardo_tensor *t, const char *source,
                        pardo_status *st) {
    const pardo_graph_var *v = pardo_block_find_var(&ex->prog->blocks[0], name);
    char a[200], b[200];
    if (!v || !v->declared)
        return pardo_errorf(st, PARDO_ENOTFOUND, "%s: the graph has no var '%s' to feed", source, name);
    if (v->role != PARDO_VAR_FEED)
        return pardo_errorf(st, PARDO_EINVAL, "%s: var '%s' is a %s, not a feed", source, name,
                            pardo_var_role_name(v->role));
    if (!tensor_fits(t, &v->type)) {
        pardo_type ty = pardo_tensor_type(t);
        return pardo_errorf(st, PARDO_ESHAPE, "%s: feed '%s' is %s, but the graph declares %s", source, name,
                            type_str(&ty, a, sizeof a), type_str(&v->type, b, sizeof b));
    }
    return pardo_scope_set(ex->root, name, t, st);
}

int pardo_executor_check_feeds(pardo_executor *ex, pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    char a[200];
    for (int i = 0; i < blk->n_vars; i++) {
        const pardo_graph_var *v = &blk->vars[i];
        if (v->role == PARDO_VAR_FEED && !pardo_scope_find_local(ex->root, v->name)) {
            pardo_errorf(st, PARDO_ENOTFOUND, "missing feed '%s' (%s): pass --feed %s=FILE.npy", v->name,
                         type_str(&v->type, a, sizeof a), v->name);
            return var_error(ex, v, st);
        }
    }
    return PARDO_OK;
}

static int sync_one(pardo_tensor *t, pardo_device_kind dev, pardo_status *st) {
    const void *p = dev == PARDO_DEVICE_CUDA ? pardo_synced_mem_gpu_data(t->mem, st)
                                             : pardo_synced_mem_cpu_data(t->mem, st);
    return p ? PARDO_OK : st->code;
}

/* Makes input tensors current on the op's device (a tensor_array's parts). */
static int sync_inputs(pardo_tensor **in, int n, pardo_device_kind dev, pardo_status *st) {
    for (int k = 0; k < n; k++) {
        if (!in[k]) continue;
        if (!in[k]->is_array) {
            if (sync_one(in[k], dev, st) != PARDO_OK) return st->code;
            continue;
        }
        for (int i = 0; i < in[k]->n_parts; i++)
            if (in[k]->parts[i] && sync_one(in[k]->parts[i], dev, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}

/* Checks that output k fits its var's (declared or inferred) type. */
static int check_output(const pardo_graph_var *v, const pardo_op *op, int k, const pardo_tensor *t, pardo_status *st) {
    char a[200], b[200];
    if (!t) return pardo_errorf(st, PARDO_ERUNTIME, "the kernel produced no output %d ('%s')", k, op->out[k]);
    if (v && (v->kind == PARDO_VAR_TENSOR_ARRAY) != t->is_array)
        return pardo_errorf(st, PARDO_ERUNTIME, "output '%s' is a %s at run time, but the graph says %s", op->out[k],
                            t->is_array ? "tensor_array" : "tensor", pardo_var_kind_name(v->kind));
    if (v && t->is_array) {
        if (t->dtype == v->type.dtype) return PARDO_OK;
        return pardo_errorf(st, PARDO_ESHAPE, "output '%s' is a tensor_array of %s at run time, but the graph says %s",
                            op->out[k], pardo_dtype_name(t->dtype), pardo_dtype_name(v->type.dtype));
    }
    if (!v || tensor_fits(t, &v->type)) return PARDO_OK;
    pardo_type ty = pardo_tensor_type(t);
    return pardo_errorf(st, PARDO_ESHAPE, "output '%s' is %s at run time, but the graph says %s", op->out[k],
                        type_str(&ty, a, sizeof a), type_str(&v->type, b, sizeof b));
}

/* Records op `index`'s run in the trace: started at t0, ready since *ready
 * (which becomes its end), outputs out (NULL when it failed). */
static void trace_op(pardo_executor *ex, int block, int index, int64_t *ready, int64_t t0, pardo_tensor **in,
                     pardo_tensor **out, const pardo_status *st) {
    const pardo_op *op = &ex->prog->blocks[block].ops[index];
    pardo_trace_op r = {.op = op, .block = block, .index = index, .ready = ready && *ready ? *ready : t0, .t0 = t0,
                        .t1 = pardo_trace_ticks(), .in = in, .n_in = op->n_in, .out = out, .n_out = op->n_out,
                        .error = out ? NULL : st->msg};
    pardo_trace_record_op(&r);
    if (ready) *ready = r.t1;
}

/* Frees the root scope's temps that ops [first, last] of block read last
 * (block 0 in the root scope only): their tensors go to the pool for later
 * outputs (release_plan.h). */
void pardo_exec_release_dead(pardo_executor *ex, int block, const pardo_scope *scope, int first, int last) {
    if (!ex->pooling || block != 0 || scope != ex->root) return;
    for (int i = first; i <= last; i++) {
        op_plan *pl = &ex->ops[0][i];
        if (!pl->release_entry) continue; /* nothing dies after op i */
        const char **names = &ex->release.names[ex->release.first[i]];
        for (int k = 0; k < ex->release.count[i]; k++) {
            int *e = &pl->release_entry[k];
            if (*e < 0 && (*e = pardo_scope_entry(ex->root, names[k])) < 0) continue;
            pardo_tensor_pool_put(&ex->pool, pardo_scope_entry_take(ex->root, *e));
        }
    }
}

/* True when ops with a CUDA kernel run on the GPU in this run (not in a
 * parallel_do part, which runs on the CPU). */
static bool on_gpu(const pardo_executor *ex, const pardo_block_run *run) {
    return !run->cpu_only && ex->opt.device == PARDO_DEVICE_CUDA;
}

pardo_tensor *pardo_executor_pool_take(pardo_executor *ex, const pardo_scope *scope, pardo_dtype dtype, int ndim,
                                       const int64_t *shape) {
    if (!ex || !ex->pooling || scope != ex->root) return NULL;
    return pardo_tensor_pool_take(&ex->pool, dtype, ndim, shape);
}

void pardo_executor_pool_put(pardo_executor *ex, const pardo_scope *scope, pardo_tensor *t) {
    if (ex && ex->pooling && scope == ex->root) pardo_tensor_pool_put(&ex->pool, t);
    else pardo_tensor_release(t);
}

/* The kernel context of op `index` of `block` as `run` runs it: its place, the threads and idle help its loops
 * may use, the executor's mode and step, its state slot, on the CPU; run_op adds the tensors and the device. */
static pardo_kernel_ctx kernel_ctx(pardo_executor *ex, int block, int index, pardo_scope *scope,
                                   const pardo_block_run *run, pardo_status *st) {
    return (pardo_kernel_ctx){.op = &ex->prog->blocks[block].ops[index], .st = st, .device = PARDO_DEVICE_CPU,
                              .nthreads = run->nthreads, .idle_help = run->idle_help && run->nthreads == 1,
                              .training = ex->opt.training, .step = ex->steps, .exec = ex, .scope = scope,
                              .block = block, .op_index = index, .nparts_default = ex->opt.nthreads,
                              .prog = ex->prog, .state = &ex->states[block][index]};
}

/* Runs op `index` of block. When a trace is on, *ready (may be NULL) is when
 * the op became ready, and gets its end. Inside a stage (in_stage) the temps
 * the op read last are left for run_stage to free: chains run in any order. */
int pardo_exec_run_op(pardo_executor *ex, int block, int index, pardo_scope *scope, const pardo_block_run *run,
                  bool in_stage, int64_t *ready, pardo_status *st) {
    const pardo_op *op = &ex->prog->blocks[block].ops[index];
    pardo_tensor *in[MAX_OP_IO], *out[MAX_OP_IO];
    int rc = PARDO_OK;
    bool tracing = pardo_trace_on(), traced = false;
    int64_t t0 = tracing ? pardo_trace_ticks() : 0;
    PARDO_ASSERT(op->def);
    /* only the slots the op or its def can name are cleared (absent optional
     * ones read as NULL): zeroing all 2 x 64 costs more than a small kernel */
    int n_in_slots = op->n_in > op->def->n_inputs ? op->n_in : op->def->n_inputs,
        n_out_slots = op->n_out > op->def->n_outputs ? op->n_out : op->def->n_outputs;
    memset(in, 0, sizeof(*in) * (size_t)(n_in_slots < MAX_OP_IO ? n_in_slots : MAX_OP_IO));
    memset(out, 0, sizeof(*out) * (size_t)(n_out_slots < MAX_OP_IO ? n_out_slots : MAX_OP_IO));
    op_plan *pl = &ex->ops[block][index];
    /* block 0 in the root scope: names resolved to entries once (the root has no parent to fall back to) */
    int *entry = block == 0 && scope == ex->root ? pl->root_entry : NULL;
    const bool gpu_run = on_gpu(ex, run);
    pardo_device_kind dev = gpu_run && op->def->cuda ? PARDO_DEVICE_CUDA : PARDO_DEVICE_CPU;
    /* an op without a CUDA kernel runs on the CPU, its inputs moved there by sync_inputs: said once per op type */
    if (gpu_run && !op->def->cuda && !op->def->on_host) pardo_op_note_cpu_run(op->def, "it has no CUDA kernel");
    /* the executor's GPU on this thread: a stage's chains and the early stage run on pool threads that never
     * selected one (on device 0 otherwise); the same device again is a cheap call */
    if (dev == PARDO_DEVICE_CUDA && (rc = pardo_device_set(ex->opt.device_index, st)) != PARDO_OK) goto done;
    for (int k = 0; k < op->n_in; k++) {
        if (!op->in[k][0]) continue;
        pardo_tensor *t;
        if (entry) {
            if (entry[k] < 0) entry[k] = pardo_scope_entry(scope, op->in[k]);
            t = entry[k] < 0 ? NULL : pardo_scope_entry_get(scope, entry[k]);
        } else {
            t = pardo_scope_find(scope, op->in[k]);
        }
        if (!t) {
            rc = pardo_errorf(st, PARDO_ENOTFOUND, "input %d: var '%s' has no value at run time", k, op->in[k]);
            goto done;
        }
        in[k] = pardo_tensor_retain(t);
    }
    if ((rc = sync_inputs(in, op->n_in, dev, st)) != PARDO_OK) goto done;
    for (int k = 0; k < op->n_out; k++) {
        /* hand the output's current tensor to the kernel for reuse: moved out
         * of the scope when only the scope holds it, shared when the op also
         * reads it (in-place ops) */
        bool inplace = pl->inplace >> k & 1;
        int *e = entry ? &entry[op->n_in + k] : NULL;
        if (!op->out[k][0]) {
            out[k] = NULL; /* left out by the graph: the kernel skips it */
        } else if (e) {
            if (*e < 0 && (*e = pardo_scope_reserve(scope, op->out[k], st)) < 0) {
                rc = st->code;
                goto done;
            }
            out[k] = inplace ? pardo_tensor_retain(pardo_scope_entry_get(scope, *e))
                             : pardo_scope_entry_take(scope, *e);
        } else if (inplace) {
            pardo_tensor *t = pardo_scope_find(scope, op->out[k]);
            out[k] = t ? pardo_tensor_retain(t) : NULL;
        } else {
            out[k] = pardo_scope_take(scope, op->out[k]);
        }
    }
    pardo_kernel_ctx ctx = kernel_ctx(ex, block, index, scope, run, st);
    ctx.n_in = op->n_in, ctx.in = in, ctx.n_out = op->n_out, ctx.out = out;
    ctx.device = dev;
    rc = dev == PARDO_DEVICE_CUDA ? op->def->cuda(&ctx) : pardo_op_run_cpu(&ctx);
    for (int k = 0; rc == PARDO_OK && k < op->n_out; k++)
        if (op->out[k][0]) rc = check_output(pl->out_vars[k], op, k, out[k], st);
    if (tracing && rc == PARDO_OK) { /* before the outputs move into the scope */
        trace_op(ex, block, index, ready, t0, in, out, st);
        traced = true;
    }
    pardo_op_watch_fn watch = atomic_load_explicit(&pl->watch, memory_order_acquire);
    if (watch && rc == PARDO_OK && block == 0 && scope == ex->root)
        watch(pl->watch_arg, index, ex->steps, in, op->n_in, out, op->n_out);
    for (int k = 0; k < op->n_out; k++) {
        if (rc == PARDO_OK && op->out[k][0]) {
            if (entry) pardo_scope_entry_set_move(scope, entry[op->n_in + k], out[k]);
            else rc = pardo_scope_set_move(scope, op->out[k], out[k], st);
            out[k] = NULL;
        }
        pardo_tensor_release(out[k]);
    }
done:
    if (rc != PARDO_OK) {
        char where[512];
        pardo_op_where(ex->prog, block, index, where, sizeof where);
        pardo_status_prefix(st, "%s: ", where);
        if (tracing && !traced) trace_op(ex, block, index, ready, t0, in, NULL, st);
    }
    for (int k = 0; k < op->n_in; k++) pardo_tensor_release(in[k]);
    if (rc == PARDO_OK && !in_stage) pardo_exec_release_dead(ex, block, scope, index, index);
    return rc;
}

int pardo_executor_run_block_with(pardo_executor *ex, int block, pardo_scope *scope, const pardo_block_run *run,
                                  pardo_status *st) {
    if (block < 0 || block >= ex->prog->n_blocks)
        return pardo_errorf(st, PARDO_EINVAL, "no block %d (the program has %d)", block, ex->prog->n_blocks);
    pardo_block_run r = *run;
    if (r.nthreads < 1) r.nthreads = 1;
    const pardo_block *blk = &ex->prog->blocks[block];
    /* merges and optimizer updates of different params run at once, from the
     * second run on (the first binds every name, so later runs only re-bind) */
    bool stages = r.nthreads > 1 && scope == ex->root && ex->steps > 0;
    if (stages && !ex->planned[block]) {
        if (pardo_stage_plan_build(ex->prog, block, &ex->plans[block], st) != PARDO_OK) return st->code;
        ex->planned[block] = true;
    }
    /* trace: an op is ready when the one before it (or a stage) ends, the first at the block's start */
    int64_t ready = pardo_trace_on() ? pardo_trace_ticks() : 0;
    if (ex->early && block == 0 && scope == ex->root) ex->early->active = false;
    const int end = r.end_op > 0 && r.end_op < blk->n_ops ? r.end_op : blk->n_ops;
    int told = r.first_op > 0 ? r.first_op : 0; /* ops handed to r.after_op and r.progress so far */
    for (int i = told; i < end; i++) {
        if (r.stop && atomic_load_explicit(r.stop, memory_order_acquire))
            return pardo_errorf(st, PARDO_ECANCELED, "block %d stopped before op %d", block, i);
        int rc;
        if (stages && ex->plans[block].n_chains[i] > 1) {
            rc = pardo_exec_run_stage(ex, block, i, scope, &r, st);
            i = ex->plans[block].stage_end[i] - 1;
            if (ready) ready = pardo_trace_ticks();
        } else {
            rc = pardo_exec_run_op(ex, block, i, scope, &r, false, &ready, st);
        }
        if (rc != PARDO_OK) return rc;
        for (; told <= i && (r.after_op || r.progress); told++) {
            if (r.after_op && (rc = r.after_op(r.after_arg, told, st)) != PARDO_OK) return rc;
            if (r.progress) atomic_store_explicit(r.progress, told + 1, memory_order_release);
        }
    }
    return PARDO_OK;
}

int pardo_executor_run_block(pardo_executor *ex, int block, pardo_scope *scope, int nthreads, pardo_status *st) {
    pardo_block_run r = {.nthreads = nthreads};
    return pardo_executor_run_block_with(ex, block, scope, &r, st);
}

/* Settles kind auto, once: dataflow on the CPU at 2 threads or more when
 * block 0 has ops that may run at once (the dataflow plan says), where it
 * is never slower; else sequential (a plain chain gains nothing and would
 * pay the engine per op). A plan that cannot be made (out of memory) means
 * sequential. */
static void settle_kind(pardo_executor *ex) {
    if (ex->opt.kind != PARDO_EXEC_AUTO) return;
    ex->opt.kind = PARDO_EXEC_SEQUENTIAL;
    if (ex->opt.device != PARDO_DEVICE_CPU || ex->opt.nthreads < 2) return;
    pardo_status st;
    if (pardo_dataflow_plan(ex, &st) == PARDO_OK && pardo_dataflow_may_overlap(ex)) {
        ex->opt.kind = PARDO_EXEC_DATAFLOW;
        return;
    }
    pardo_dataflow_free(ex->df);
    ex->df = NULL;
}

/* True when block 0 runs over the engine: kind dataflow, on the CPU (a CUDA
 * run is sequential: its ops share one stream and their tensors' heads move). */
static bool dataflow(pardo_executor *ex) {
    settle_kind(ex);
    return ex->opt.kind == PARDO_EXEC_DATAFLOW && ex->opt.device == PARDO_DEVICE_CPU;
}

bool pardo_executor_overlaps_input(pardo_executor *ex) {
    return dataflow(ex) || ex->opt.device == PARDO_DEVICE_CUDA;
}

int pardo_executor_run_async(pardo_executor *ex, pardo_status *st) {
    if (ex->df_running && pardo_executor_wait(ex, st) != PARDO_OK) return st->code;
    int rc = pardo_executor_check_feeds(ex, st);
    if (rc != PARDO_OK) return rc;
    if (dataflow(ex)) return pardo_dataflow_push_step(ex, st);
    rc = pardo_executor_run_block(ex, 0, ex->root, ex->opt.nthreads, st);
    if (rc == PARDO_OK) ex->steps++;
    return rc;
}

int pardo_executor_wait(pardo_executor *ex, pardo_status *st) {
    if (!ex->df_running) return PARDO_OK;
    int rc = pardo_dataflow_wait_step(ex, st);
    if (rc == PARDO_OK) ex->steps++;
    return rc;
}

int pardo_executor_fetch_wait(pardo_executor *ex, const char *name, pardo_tensor **out, pardo_status *st) {
    *out = NULL;
    if (ex->df_running && pardo_dataflow_fetch_wait(ex, name, st) != PARDO_OK) return st->code;
    *out = pardo_executor_fetch(ex, name);
    return PARDO_OK;
}

int pardo_executor_run(pardo_executor *ex, pardo_status *st) {
    int rc = pardo_executor_run_async(ex, st);
    if (rc == PARDO_OK) rc = pardo_executor_wait(ex, st);
    return rc;
}

pardo_tensor *pardo_executor_fetch(pardo_executor *ex, const char *name) {
    return pardo_scope_find_local(ex->root, name);
}

int pardo_executor_collect_state(pardo_executor *ex, pardo_tensor_list *out, pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    for (int i = 0; i < blk->n_vars; i++) {
        const pardo_graph_var *v = &blk->vars[i];
        if (v->role != PARDO_VAR_PARAM && v->role != PARDO_VAR_STATE) continue;
        pardo_tensor *t = pardo_scope_find_local(ex->root, v->name);
        if (!t) continue;
        if (!pardo_tensor_cpu(t, st)) return st->code;
        if (pardo_tensor_list_add(out, v->name, t, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}

int pardo_exec_reserve_outputs(pardo_executor *ex, pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    pardo_tensor *placeholder = pardo_tensor_new(PARDO_F32, 0, NULL, st);
    if (!placeholder) return st->code;
    int rc = PARDO_OK;
    for (int i = 0; rc == PARDO_OK && i < blk->n_ops; i++)
        for (int k = 0; rc == PARDO_OK && k < blk->ops[i].n_out; k++) {
            const char *name = blk->ops[i].out[k];
            if (!name[0] || pardo_scope_find_local(ex->root, name)) continue;
            if ((rc = pardo_scope_set(ex->root, name, placeholder, st)) == PARDO_OK)
                pardo_tensor_release(pardo_scope_take(ex->root, name));
        }
    pardo_tensor_release(placeholder);
    return rc;
}

int pardo_executor_watch_ops(pardo_executor *ex, int first, int end, pardo_op_watch_fn fn, void *arg,
                             pardo_status *st) {
    const int n = ex->prog->n_blocks > 0 ? ex->prog->blocks[0].n_ops : 0;
    if (first < 0 || end > n || first > end || !fn)
        return pardo_errorf(st, PARDO_EINVAL, "cannot watch ops [%d, %d) of block 0 (it has %d)", first, end, n);
    op_plan *pl = ex->ops[0];
    for (int i = first; i < end; i++) {
        pardo_op_watch_fn w = atomic_load_explicit(&pl[i].watch, memory_order_acquire);
        if (w && (w != fn || pl[i].watch_arg != arg))
            return pardo_errorf(st, PARDO_EINVAL, "op %d of block 0 has a watcher already", i);
    }
    for (int i = first; i < end; i++) {
        if (atomic_load_explicit(&pl[i].watch, memory_order_relaxed)) continue; /* this one's already */
        pl[i].watch_arg = arg;
        atomic_store_explicit(&pl[i].watch, fn, memory_order_release);
    }
    return PARDO_OK;
}

int pardo_executor_set_steps(pardo_executor *ex, uint64_t steps, pardo_status *st) {
    /* Parallel stages run only once every name block 0 writes is bound (from
     * the second run on, see run_block_with): binding a new name inserts
     * into the root scope, which stages running at once must not do. So
     * reserve those names now (bound, then taken: the scope keeps them),
     * for a first run that counts from steps > 0. */
    int rc = pardo_exec_reserve_outputs(ex, st);
    if (rc == PARDO_OK) ex->steps = steps;
    return rc;
}
