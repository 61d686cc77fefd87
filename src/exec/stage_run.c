/* stage_run.c - running a block's stages (stage_plan.h): chains of merge
 * and optimize ops that share no written var, the big ones op by op on all
 * threads, the small ones as tasks on the pool; and the early stage, whose
 * chains a parallel_do part's thread runs while other parts still run
 * (executor.h, pardo_executor_early_begin). */
#include <limits.h>
#include <stdlib.h>

#include "exec/executor_internal.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

/* One stage's chains (see stage_plan.h). */
typedef struct stage_run {
    pardo_executor *ex;
    int block, first, end;
    pardo_scope *scope;
    const pardo_block_run *run;   // nthreads: 1 for chains run as tasks, the block's for big chains
    const int *which;             // chain of task k (NULL: chain k itself)
    pardo_status *status;         // per chain
    int *failed_at;               // per chain: the op that failed, or -1
    int64_t t0;                   // trace ticks at the stage's start (0 when no trace is on)
} stage_run;

static void run_chain(void *arg, int64_t k) {
    stage_run *s = arg;
    const pardo_stage_plan *plan = &s->ex->plans[s->block];
    int c = s->which ? s->which[k] : (int)k;
    int64_t ready = s->t0; /* a chain's first op is ready at the stage's start, the next at its predecessor's end */
    for (int i = s->first; i < s->end; i++) {
        if (plan->chain[i] != c) continue;
        if (pardo_exec_run_op(s->ex, s->block, i, s->scope, s->run, true, &ready, &s->status[c]) != PARDO_OK) {
            s->failed_at[c] = i;
            return;
        }
    }
}

/* A chain that writes at least this many elements runs its ops one at a time
 * on all threads (each splits its elements over the pool): one big param
 * (784 x 512) would otherwise hold one thread while the others sit idle. */
enum { STAGE_BIG_CHAIN = 1 << 16 };

/* Runs the stage starting at op `first`: its big chains one after another,
 * each op on all threads, then the small chains as tasks on the pool (a
 * chain's ops keep their order; chains share no var they write). The error
 * of the failed op with the lowest index is the stage's. */
int pardo_exec_run_stage(pardo_executor *ex, int block, int first, pardo_scope *scope, const pardo_block_run *r,
                     pardo_status *st) {
    const pardo_stage_plan *plan = &ex->plans[block];
    const pardo_block *blk = &ex->prog->blocks[block];
    int n = plan->n_chains[first], end = plan->stage_end[first], n_small = 0;
    /* chains that ran early (pardo_early) are passed over; their failures stand */
    const bool *ran = ex->early && ex->early->active && block == 0 && first == plan->early_pd + 1 ? ex->early->done
                                                                                                  : NULL;
    for (int c = 0; c < n; c++) {
        if (!ran || !ran[c]) plan->failed_at[c] = -1;
        plan->elements[c] = 0;
    }
    for (int i = first; i < end; i++) { /* every name is bound from the second run on: sizes are known */
        const pardo_tensor *t = blk->ops[i].n_out > 0 ? pardo_scope_find(scope, blk->ops[i].out[0]) : NULL;
        if (t && !t->is_array) plan->elements[plan->chain[i]] += t->numel;
    }
    pardo_block_run one = *r;
    one.nthreads = 1;
    stage_run s = {.ex = ex, .block = block, .first = first, .end = end, .scope = scope, .run = r,
                   .status = plan->status, .failed_at = plan->failed_at};
    bool tracing = pardo_trace_on();
    if (tracing) s.t0 = pardo_trace_ticks();
    for (int c = 0; c < n; c++) {
        if (ran && ran[c]) continue;
        if (plan->elements[c] < STAGE_BIG_CHAIN) plan->small[n_small++] = c;
        else run_chain(&s, c);
    }
    if (ran) ex->early->active = false;
    s.run = &one;
    s.which = plan->small;
    if (n_small > 0) {
        if (!ex->df_running) ex->pool.shared = true; /* the chains' outputs take from it on several threads */
        pardo_thread_pool_for(r->nthreads < n_small ? r->nthreads : n_small, n_small, run_chain, &s);
        if (!ex->df_running) ex->pool.shared = false; /* a dataflow step keeps it shared throughout */
    }
    if (tracing) pardo_trace_record_stage(block, first, s.end, n, s.t0, pardo_trace_ticks());
    int worst = -1;
    for (int c = 0; c < n; c++)
        if (plan->failed_at[c] >= 0 && (worst < 0 || plan->failed_at[c] < plan->failed_at[worst])) worst = c;
    if (worst < 0) { /* chains ran in any order: what died in the stage is freed after all of it */
        if (!ex->df_running) pardo_exec_release_dead(ex, block, scope, first, end - 1); /* else a release unit */
        return PARDO_OK;
    }
    *st = plan->status[worst];
    return st->code;
}

/* Grows e's per-part and per-chain arrays; false when out of memory. */
static bool early_room(pardo_early *e, int nparts, int n_chains) {
    if (nparts > e->cap_parts) {
        atomic_int *p = realloc(e->progress, (size_t)nparts * sizeof(*p));
        if (!p) return false;
        e->progress = p;
        e->cap_parts = nparts;
    }
    if (n_chains > e->cap_chains) {
        atomic_int *c = realloc(e->claimed, (size_t)n_chains * sizeof(*c));
        if (!c) return false;
        e->claimed = c;
        bool *d = realloc(e->done, (size_t)n_chains * sizeof(*d));
        if (!d) return false;
        e->done = d;
        e->cap_chains = n_chains;
    }
    return true;
}

pardo_early *pardo_executor_early_begin(pardo_executor *ex, int block, int index, pardo_scope *scope, int nthreads,
                                        pardo_tensor *const *outs, int n_out, int nparts, const atomic_int *stop) {
    const pardo_stage_plan *plan = &ex->plans[0];
    if (block != 0 || scope != ex->root || nthreads < 2 || nparts < 2 || ex->steps == 0 || !ex->planned[0] ||
        plan->early_pd != index || ex->opt.device != PARDO_DEVICE_CPU)
        return NULL;
    const int first = index + 1, n = plan->n_chains[first];
    bool any = false;
    for (int c = 0; c < n; c++) any |= plan->early_need[c] != INT_MAX;
    if (!any) return NULL;
    if (!ex->early && !(ex->early = calloc(1, sizeof(*ex->early)))) return NULL;
    pardo_early *e = ex->early;
    if (!early_room(e, nparts, n)) return NULL; /* runs without: the stage does it all */
    pardo_status ignored;
    for (int k = 0; k < n_out; k++) /* the stage's merges find the parts' arrays where they will be after the op */
        if (ex->prog->blocks[0].ops[index].out[k][0] &&
            pardo_scope_set(scope, ex->prog->blocks[0].ops[index].out[k], outs[k], &ignored) != PARDO_OK)
            return NULL;
    e->ex = ex;
    e->n_parts = nparts;
    e->n_chains = n;
    e->stop = stop;
    e->nthreads = nthreads;
    for (int k = 0; k < nparts; k++) atomic_init(&e->progress[k], 0);
    atomic_init(&e->running, nparts);
    for (int c = 0; c < n; c++) {
        atomic_init(&e->claimed[c], 0);
        e->done[c] = false;
        plan->failed_at[c] = -1;
    }
    e->active = true;
    if (!ex->df_running) ex->pool.shared = true; /* early chains may take outputs from it on several threads */
    return e;
}

atomic_int *pardo_early_progress(pardo_early *e, int part) { return &e->progress[part]; }

/* A chain every part has progressed far enough for, claimed for the caller; -1 when none. */
static int early_claim(pardo_early *e) {
    const int *need = e->ex->plans[0].early_need;
    for (int c = 0; c < e->n_chains; c++) {
        if (need[c] == INT_MAX || atomic_load_explicit(&e->claimed[c], memory_order_relaxed)) continue;
        bool ready = true;
        for (int k = 0; ready && k < e->n_parts; k++)
            ready = atomic_load_explicit(&e->progress[k], memory_order_acquire) >= need[c];
        if (ready && !atomic_exchange_explicit(&e->claimed[c], 1, memory_order_relaxed)) return c;
    }
    return -1;
}

void pardo_early_part_ended(pardo_early *e) {
    atomic_fetch_sub_explicit(&e->running, 1, memory_order_acq_rel); /* the last to end runs nothing: the stage */
    pardo_executor *ex = e->ex;
    const pardo_stage_plan *plan = &ex->plans[0];
    const int first = plan->early_pd + 1;
    pardo_block_run one = {.nthreads = e->nthreads};
    stage_run s = {.ex = ex, .block = 0, .first = first, .end = plan->stage_end[first], .scope = ex->root,
                   .run = &one, .status = plan->status, .failed_at = plan->failed_at};
    while (!atomic_load_explicit(e->stop, memory_order_acquire) &&
           atomic_load_explicit(&e->running, memory_order_acquire) > 0) {
        const int c = early_claim(e);
        if (c < 0) return;
        s.t0 = pardo_trace_on() ? pardo_trace_ticks() : 0;
        run_chain(&s, c);
        e->done[c] = true;
    }
}

void pardo_executor_early_end(pardo_early *e) {
    if (e && !e->ex->df_running) e->ex->pool.shared = false;
}

