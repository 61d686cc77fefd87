/* dataflow.c - block 0 over the dependency engine (engine/engine.h): the
 * dataflow executor (pardo_exec_options.kind PARDO_EXEC_DATAFLOW).
 *
 * Each of block 0's vars gets an engine var. Block 0's ops are grouped into
 * units, each pushed as one engine op with the vars its ops read and write
 * (a var both read and written counts as written): one op; or a stage of
 * merges and updates (stage_plan.h), run as the sequential executor runs it;
 * or a parallel_do with the stage after it when that stage has an early
 * stage (its chains run on the parts' threads, inside the parallel_do).
 * Ops no var links run at once; the rest keep file order per var, so every
 * op sees the tensors the sequential executor gives it: the same bits.
 *
 * Temps a unit read last (release_plan.h) are freed by a release op pushed
 * after it that writes them: it runs once every op pushed before it that
 * reads them is done, whatever order the engine ran them in.
 *
 * A failing unit keeps its status; the step's error is the one of the
 * failed unit with the lowest index (the op the sequential executor would
 * have stopped at), the engine's poison stopping what depends on it. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "exec/executor_internal.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

typedef enum unit_kind {
    UNIT_OP,       // op `first`
    UNIT_STAGE,    // the stage starting at `first`
    UNIT_PD_STAGE, // the parallel_do `first`, then the stage starting at first + 1
} unit_kind;

typedef struct df_unit {
    pardo_executor *ex;
    unit_kind kind;
    int first, last;          // the ops it runs
    bool release;             // it is a release op: frees the temps ops [first, last] read last
    pardo_var **reads, **writes; // owned arrays of engine vars (borrowed vars)
    int n_reads, n_writes;
    bool failed;              // this step
    pardo_status st;          // its error, when failed
} df_unit;

struct pardo_dataflow {
    pardo_engine *e;
    pardo_var **vars;  // per block 0 var; owned (deleted in pardo_dataflow_free)
    int n_vars;
    df_unit *units;    // in push order; owned
    int n_units;
    bool pushed;       // a step is in flight
    atomic_int running; // units running now
};

/* The engine var of block 0's var `name`. */
static pardo_var *var_of(pardo_executor *ex, const char *name) {
    const pardo_block *blk = &ex->prog->blocks[0];
    const pardo_graph_var *v = pardo_block_find_var(blk, name);
    PARDO_ASSERT(v); /* the checked program names only its vars */
    return ex->df->vars[v - blk->vars];
}

static bool listed(pardo_var *const *a, int n, const pardo_var *v) {
    for (int i = 0; i < n; i++)
        if (a[i] == v) return true;
    return false;
}

/* Fills u's reads and writes from the names ops [first, last] read and
 * write. PARDO_ENOMEM. */
static int unit_vars(pardo_executor *ex, df_unit *u, pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    int cap = 0;
    for (int i = u->first; i <= u->last; i++) cap += blk->ops[i].n_in + blk->ops[i].n_out;
    u->reads = malloc(sizeof(*u->reads) * (size_t)(cap + 1));
    u->writes = malloc(sizeof(*u->writes) * (size_t)(cap + 1));
    if (!u->reads || !u->writes) return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    for (int i = u->first; i <= u->last; i++)
        for (int k = 0; k < blk->ops[i].n_out; k++) {
            const char *name = blk->ops[i].out[k];
            if (!name[0]) continue;
            pardo_var *v = var_of(ex, name);
            if (!listed(u->writes, u->n_writes, v)) u->writes[u->n_writes++] = v;
        }
    for (int i = u->first; i <= u->last; i++)
        for (int k = 0; k < blk->ops[i].n_in; k++) {
            const char *name = blk->ops[i].in[k];
            if (!name[0]) continue;
            pardo_var *v = var_of(ex, name);
            if (!listed(u->writes, u->n_writes, v) && !listed(u->reads, u->n_reads, v)) u->reads[u->n_reads++] = v;
        }
    return PARDO_OK;
}

/* A release unit for the temps ops [first, last] read last, if any: it
 * writes them. */
static int release_unit(pardo_executor *ex, int first, int last, df_unit *u, bool *made, pardo_status *st) {
    *made = false;
    if (!ex->pooling) return PARDO_OK;
    int n = 0;
    for (int i = first; i <= last; i++) n += ex->release.count[i];
    if (n == 0) return PARDO_OK;
    *u = (df_unit){.ex = ex, .first = first, .last = last, .release = true};
    if (!(u->writes = malloc(sizeof(*u->writes) * (size_t)n)))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    for (int i = first; i <= last; i++)
        for (int k = 0; k < ex->release.count[i]; k++) {
            pardo_var *v = var_of(ex, ex->release.names[ex->release.first[i] + k]);
            if (!listed(u->writes, u->n_writes, v)) u->writes[u->n_writes++] = v;
        }
    *made = true;
    return PARDO_OK;
}

void pardo_dataflow_free(pardo_dataflow *df) {
    if (!df) return;
    pardo_status ignored;
    for (int i = 0; i < df->n_vars; i++)
        if (df->vars[i]) pardo_engine_delete_var(df->e, df->vars[i], &ignored);
    if (df->n_vars > 0) pardo_engine_wait_all(df->e, &ignored); /* the deletes, and any step left in flight */
    for (int u = 0; u < df->n_units; u++) {
        free(df->units[u].reads);
        free(df->units[u].writes);
    }
    free(df->units);
    free(df->vars);
    free(df);
}

/* Builds ex->df: engine vars and units. Stages (and the early stage) run
 * as units where the sequential executor would run them: on 2 threads or
 * more. */
static int plan_dataflow(pardo_executor *ex, pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    pardo_dataflow *df = calloc(1, sizeof(*df));
    if (!df) return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    ex->df = df;
    df->e = pardo_engine_get();
    if (!(df->vars = calloc((size_t)blk->n_vars + 1, sizeof(*df->vars))) ||
        !(df->units = calloc(2 * (size_t)blk->n_ops + 1, sizeof(*df->units))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    for (int i = 0; i < blk->n_vars; i++) {
        if (!(df->vars[i] = pardo_engine_new_var(df->e, st))) return st->code;
        df->n_vars = i + 1;
    }
    bool stages = ex->opt.nthreads > 1;
    if (stages && !ex->planned[0]) {
        if (pardo_stage_plan_build(ex->prog, 0, &ex->plans[0], st) != PARDO_OK) return st->code;
        ex->planned[0] = true;
    }
    const pardo_stage_plan *plan = &ex->plans[0];
    for (int i = 0; i < blk->n_ops; i++) {
        df_unit *u = &df->units[df->n_units];
        *u = (df_unit){.ex = ex, .kind = UNIT_OP, .first = i, .last = i};
        if (stages && plan->n_chains[i] > 1) {
            u->kind = UNIT_STAGE;
            u->last = plan->stage_end[i] - 1;
        } else if (stages && plan->early_pd == i && i + 1 < blk->n_ops && plan->n_chains[i + 1] > 1) {
            u->kind = UNIT_PD_STAGE;
            u->last = plan->stage_end[i + 1] - 1;
        }
        df->n_units++;
        if (unit_vars(ex, u, st) != PARDO_OK) return st->code;
        bool made;
        if (release_unit(ex, u->first, u->last, &df->units[df->n_units], &made, st) != PARDO_OK) return st->code;
        if (made) df->n_units++;
        i = u->last;
    }
    return PARDO_OK;
}

/* The engine op of a unit: runs its ops as the sequential executor does,
 * leaving their dead temps to the release unit after it. */
static int run_unit(void *arg, pardo_status *st) {
    df_unit *u = arg;
    pardo_executor *ex = u->ex;
    if (u->release) {
        pardo_exec_release_dead(ex, 0, ex->root, u->first, u->last);
        return PARDO_OK;
    }
    /* Alone, a unit's kernels split over every thread, as the sequential executor's do; with other units
     * running or ready, each runs on its own thread (idle threads may help): small products split over
     * threads busy elsewhere cost more than they gain. The split does not change a kernel's bits. */
    pardo_dataflow *df = ex->df;
    int others = atomic_fetch_add_explicit(&df->running, 1, memory_order_relaxed) + pardo_engine_ready_count(df->e);
    pardo_block_run r = {.nthreads = others > 0 ? 1 : ex->opt.nthreads, .idle_help = others > 0};
    int64_t ready = pardo_engine_op_ready_ticks();
    int rc;
    if (u->kind == UNIT_STAGE) {
        rc = pardo_exec_run_stage(ex, 0, u->first, ex->root, &r, st);
    } else {
        rc = pardo_exec_run_op(ex, 0, u->first, ex->root, &r, true, &ready, st);
        if (rc == PARDO_OK && u->kind == UNIT_PD_STAGE)
            rc = pardo_exec_run_stage(ex, 0, u->first + 1, ex->root, &r, st);
    }
    atomic_fetch_sub_explicit(&df->running, 1, memory_order_relaxed);
    if (rc != PARDO_OK) {
        u->st = *st;
        u->failed = true;
    }
    return rc;
}


int pardo_dataflow_push_step(pardo_executor *ex, pardo_status *st) {
    if (!ex->df) {
        if (pardo_exec_reserve_outputs(ex, st) != PARDO_OK || plan_dataflow(ex, st) != PARDO_OK) return st->code;
    }
    pardo_dataflow *df = ex->df;
    PARDO_ASSERT(!df->pushed);
    if (ex->early) ex->early->active = false;
    ex->pool.shared = true; /* units take outputs from it and free temps into it on several threads */
    ex->df_running = true;
    for (int u = 0; u < df->n_units; u++) {
        df_unit *x = &df->units[u];
        x->failed = false;
        if (pardo_engine_push(df->e, run_unit, x, x->reads, x->n_reads, x->writes, x->n_writes, NULL, st) !=
            PARDO_OK) {
            /* cannot happen for a checked program (its vars are distinct per unit); wait for what was pushed */
            pardo_status ignored;
            pardo_engine_wait_all(df->e, &ignored);
            ex->pool.shared = false;
            ex->df_running = false;
            return st->code;
        }
    }
    df->pushed = true;
    return PARDO_OK;
}

int pardo_dataflow_fetch_wait(pardo_executor *ex, const char *name, pardo_status *st) {
    pardo_dataflow *df = ex->df;
    if (!df || !df->pushed) return PARDO_OK;
    if (!pardo_block_find_var(&ex->prog->blocks[0], name)) return PARDO_OK; /* fetch says there is none */
    int rc = pardo_engine_wait_to_read(df->e, var_of(ex, name), st);
    if (rc == PARDO_OK) return PARDO_OK;
    /* the var's error is the op's that poisoned it; the step's may be an earlier op's */
    for (int u = 0; u < df->n_units; u++)
        if (df->units[u].failed) {
            *st = df->units[u].st;
            return st->code;
        }
    return rc;
}

int pardo_dataflow_wait_step(pardo_executor *ex, pardo_status *st) {
    pardo_dataflow *df = ex->df;
    if (!df || !df->pushed) return PARDO_OK;
    pardo_status all;
    pardo_status_clear(&all);
    int rc = pardo_engine_wait_all(df->e, &all);
    df->pushed = false;
    ex->pool.shared = false;
    ex->df_running = false;
    for (int u = 0; u < df->n_units; u++)
        if (df->units[u].failed) {
            *st = df->units[u].st;
            return st->code;
        }
    if (rc != PARDO_OK) *st = all;
    return rc;
}
