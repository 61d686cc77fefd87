/* dataflow.c - block 0 over the dependency engine (engine/engine.h): the
 * dataflow executor (pardo_exec_options.kind PARDO_EXEC_DATAFLOW).
 *
 * Each of block 0's vars gets an engine var. Block 0's ops are grouped into
 * units, each pushed as one engine op with the vars its ops read and write
 * (a var both read and written counts as written; a var no op of block 0
 * writes, a param or feed, is not listed: nothing waits for it): one op,
 * or a linear chain of them (chain_extends); or a stage of
 * merges and updates (stage_plan.h), run as the sequential executor runs it;
 * or a parallel_do with the stage after it when that stage has an early
 * stage (its chains run on the parts' threads, inside the parallel_do).
 * Ops no var links run at once; the rest keep file order per var, so every
 * op sees the tensors the sequential executor gives it: the same bits.
 *
 * A temp that dies in the step (release_plan.h) is freed by the last of
 * the units that touch it to finish: each counts down the temp's count of
 * units when it ends. The engine orders its writers before its readers, so
 * the last to end is a reader no later op needs. A temp only one chain
 * touches dies after the chain's op that reads it last, as in the
 * sequential executor.
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
    UNIT_OP,       // ops first..last: one op, or a chain of them (bulked: see chain_extends)
    UNIT_STAGE,    // the stage starting at `first`
    UNIT_PD_STAGE, // the parallel_do `first`, then the stage starting at first + 1
} unit_kind;

/* A temp that dies in the step: freed by the last unit touching it to end. */
typedef struct df_dying {
    const char *name;   // borrowed from the program
    int entry;          // its root scope entry, -1 until resolved
    int units;          // the units that read or write it
    int last_op;        // the op that reads it last (the release plan's)
    int only_unit;      // the one unit touching it, when units is 1
    atomic_int left;    // of them, not yet ended this step
} df_dying;

typedef struct df_unit {
    pardo_executor *ex;
    unit_kind kind;
    int first, last;          // the ops it runs
    pardo_var **reads, **writes; // owned arrays of engine vars (borrowed vars)
    int n_reads, n_writes;
    int *var_index;           // owned: reads' then writes' block 0 var indices (n_vars: the stages var)
    int *dying;               // owned: the df_dying it touches (indices), freed by the last such unit to end
    int n_dying;
    int *local;               // owned: a chain's temps no other unit touches (df_dying indices), by the op reading them last
    int n_local;
    bool has_sibling;         // a unit no var orders it against (before or after) exists: it may run beside it
    bool failed;              // this step
    pardo_status st;          // its error, when failed
} df_unit;

struct pardo_dataflow {
    pardo_engine *e;
    pardo_var **vars;  // per block 0 var; owned (deleted in pardo_dataflow_free)
    int n_vars;
    pardo_var *stages; // written by every unit that runs a stage: they share the stage plan's scratch; owned
    df_unit *units;    // in push order; owned
    int n_units;
    df_dying *dying;   // the temps that die in a step; owned
    int n_dying;
    int *dying_of;     // per block 0 var: its df_dying index, or -1; owned
    bool *written;     // per block 0 var: an op of block 0 writes it (else no unit lists it: nothing orders its reads); owned
    bool pushed;       // a step is in flight
};

/* The index of block 0's var `name`. */
static int index_of(pardo_executor *ex, const char *name) {
    const pardo_block *blk = &ex->prog->blocks[0];
    const pardo_graph_var *v = pardo_block_find_var(blk, name);
    PARDO_ASSERT(v); /* the checked program names only its vars */
    return (int)(v - blk->vars);
}


static bool listed_index(const int *a, int n, int v) {
    for (int i = 0; i < n; i++)
        if (a[i] == v) return true;
    return false;
}

/* Fills u's reads and writes (and their var indices) from the names ops
 * [first, last] read and write; a unit running a stage also writes the
 * stages var. PARDO_ENOMEM. */
static int unit_vars(pardo_executor *ex, df_unit *u, pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    pardo_dataflow *df = ex->df;
    int cap = 1;
    for (int i = u->first; i <= u->last; i++) cap += blk->ops[i].n_in + blk->ops[i].n_out;
    int *w = malloc(sizeof(int) * (size_t)cap), *r = malloc(sizeof(int) * (size_t)cap);
    u->reads = malloc(sizeof(*u->reads) * (size_t)cap);
    u->writes = malloc(sizeof(*u->writes) * (size_t)cap);
    u->var_index = malloc(sizeof(int) * (size_t)cap);
    if (!w || !r || !u->reads || !u->writes || !u->var_index) {
        free(w);
        free(r);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    }
    for (int i = u->first; i <= u->last; i++)
        for (int k = 0; k < blk->ops[i].n_out; k++) {
            if (!blk->ops[i].out[k][0]) continue;
            int v = index_of(ex, blk->ops[i].out[k]);
            if (!listed_index(w, u->n_writes, v)) w[u->n_writes++] = v;
        }
    if (u->kind != UNIT_OP) w[u->n_writes++] = df->n_vars; /* one stage at a time */
    for (int i = u->first; i <= u->last; i++)
        for (int k = 0; k < blk->ops[i].n_in; k++) {
            if (!blk->ops[i].in[k][0]) continue;
            int v = index_of(ex, blk->ops[i].in[k]);
            if (!df->written[v]) continue; /* a param or feed of the step: no write to wait for, none waits for it */
            if (!listed_index(w, u->n_writes, v) && !listed_index(r, u->n_reads, v)) r[u->n_reads++] = v;
        }
    for (int i = 0; i < u->n_reads; i++) {
        u->reads[i] = df->vars[r[i]];
        u->var_index[i] = r[i];
    }
    for (int i = 0; i < u->n_writes; i++) {
        u->writes[i] = w[i] == df->n_vars ? df->stages : df->vars[w[i]];
        u->var_index[u->n_reads + i] = w[i];
    }
    free(w);
    free(r);
    return PARDO_OK;
}

/* The temps that die in a step (the release plan's, once each) and, for
 * each unit, the ones it touches. */
static int plan_dying(pardo_executor *ex, pardo_status *st) {
    pardo_dataflow *df = ex->df;
    const pardo_block *blk = &ex->prog->blocks[0];
    if (!(df->dying_of = malloc(sizeof(int) * ((size_t)blk->n_vars + 1))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    for (int i = 0; i < blk->n_vars; i++) df->dying_of[i] = -1;
    if (!ex->pooling) return PARDO_OK;
    int n = 0;
    for (int i = 0; i < ex->release.n_ops; i++) n += ex->release.count[i];
    if (!(df->dying = calloc((size_t)n + 1, sizeof(*df->dying))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    for (int i = 0; i < ex->release.n_ops; i++)
        for (int k = 0; k < ex->release.count[i]; k++) {
            const char *name = ex->release.names[ex->release.first[i] + k];
            int v = (int)(pardo_block_find_var(blk, name) - blk->vars);
            if (df->dying_of[v] >= 0) continue;
            df->dying_of[v] = df->n_dying;
            df->dying[df->n_dying++] =
                (df_dying){.name = name, .entry = pardo_scope_entry(ex->root, name), .last_op = i, .only_unit = -1};
        }
    for (int u = 0; u < df->n_units; u++) {
        df_unit *x = &df->units[u];
        if (!(x->dying = malloc(sizeof(int) * ((size_t)x->n_reads + (size_t)x->n_writes + 1))))
            return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
        for (int i = 0; i < x->n_reads + x->n_writes; i++) {
            int v = x->var_index[i];
            if (v < blk->n_vars && df->dying_of[v] >= 0) {
                df_dying *d = &df->dying[df->dying_of[v]];
                x->dying[x->n_dying++] = df->dying_of[v];
                d->only_unit = d->units++ == 0 ? u : -1;
            }
        }
    }
    /* a chain's temps that no other unit touches die after the chain's op that reads them last, as the
     * sequential executor frees them, not at the chain's end */
    for (int u = 0; u < df->n_units; u++) {
        df_unit *x = &df->units[u];
        if (x->kind != UNIT_OP || x->first == x->last) continue;
        if (!(x->local = malloc(sizeof(int) * ((size_t)x->n_dying + 1))))
            return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
        int kept = 0;
        for (int i = 0; i < x->n_dying; i++) {
            if (df->dying[x->dying[i]].only_unit == u) x->local[x->n_local++] = x->dying[i];
            else x->dying[kept++] = x->dying[i];
        }
        x->n_dying = kept;
        for (int i = 1; i < x->n_local; i++) /* by last_op: the chain frees them in its order */
            for (int j = i; j > 0 && df->dying[x->local[j - 1]].last_op > df->dying[x->local[j]].last_op; j--) {
                int t = x->local[j];
                x->local[j] = x->local[j - 1];
                x->local[j - 1] = t;
            }
    }
    return PARDO_OK;
}

/* Frees the temp d into the pool (its entry resolved on first use). */
static void free_dying(pardo_executor *ex, df_dying *d) {
    if (d->entry < 0 && (d->entry = pardo_scope_entry(ex->root, d->name)) < 0) return;
    pardo_tensor_pool_put(&ex->pool, pardo_scope_entry_take(ex->root, d->entry));
}

/* Counts down the temps u touched; frees those it was the last to touch. */
static void end_unit(pardo_executor *ex, df_unit *u) {
    pardo_dataflow *df = ex->df;
    for (int i = 0; i < u->n_dying; i++) {
        df_dying *d = &df->dying[u->dying[i]];
        if (atomic_fetch_sub_explicit(&d->left, 1, memory_order_acq_rel) == 1) free_dying(ex, d);
    }
}

/* The most units whose orders are worked out (a bit per pair); a block
 * with more runs every unit's kernels on all threads. */
#define MAX_ORDERED_UNITS 8192

static void or_into(uint64_t *dst, const uint64_t *src, int words, int bit) {
    for (int w = 0; w < words; w++) dst[w] |= src[w];
    dst[bit / 64] |= (uint64_t)1 << (bit % 64);
}

/* Which units may run beside another: those that some unit is neither
 * before nor after in the order the vars give (ancestors by closure over
 * each var's last writer and its readers since). */
static int plan_siblings(pardo_executor *ex, pardo_status *st) {
    pardo_dataflow *df = ex->df;
    int n = df->n_units, nv = df->n_vars + 1, words = (n + 63) / 64; /* + the stages var */
    if (n > MAX_ORDERED_UNITS) return PARDO_OK;
    uint64_t *anc = calloc((size_t)n * (size_t)words + 1, sizeof(*anc));
    int *last_writer = malloc(sizeof(int) * ((size_t)nv + 1));
    int **readers = calloc((size_t)nv + 1, sizeof(*readers));
    int *n_readers = calloc((size_t)nv + 1, sizeof(int)), *cap_readers = calloc((size_t)nv + 1, sizeof(int));
    int rc = PARDO_OK;
    if (!anc || !last_writer || !readers || !n_readers || !cap_readers) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
        goto done;
    }
    for (int v = 0; v < nv; v++) last_writer[v] = -1;
    for (int j = 0; j < n; j++) {
        df_unit *u = &df->units[j];
        uint64_t *aj = &anc[(size_t)j * (size_t)words];
        for (int i = 0; i < u->n_reads + u->n_writes; i++) {
            bool write = i >= u->n_reads;
            int v = u->var_index[i];
            if (last_writer[v] >= 0) or_into(aj, &anc[(size_t)last_writer[v] * (size_t)words], words, last_writer[v]);
            if (!write) {
                if (n_readers[v] == cap_readers[v]) {
                    int c = cap_readers[v] ? 2 * cap_readers[v] : 4, *r = realloc(readers[v], sizeof(int) * (size_t)c);
                    if (!r) {
                        rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
                        goto done;
                    }
                    readers[v] = r;
                    cap_readers[v] = c;
                }
                readers[v][n_readers[v]++] = j;
                continue;
            }
            for (int k = 0; k < n_readers[v]; k++)
                or_into(aj, &anc[(size_t)readers[v][k] * (size_t)words], words, readers[v][k]);
            n_readers[v] = 0;
            last_writer[v] = j;
        }
    }
    for (int j = 0; j < n; j++) {
        int before = 0;
        for (int w = 0; w < words; w++) before += __builtin_popcountll(anc[(size_t)j * (size_t)words + (size_t)w]);
        bool sib = before < j; /* an earlier unit it does not follow */
        for (int k = j + 1; !sib && k < n; k++) sib = !(anc[(size_t)k * (size_t)words + (size_t)(j / 64)] >> (j % 64) & 1);
        df->units[j].has_sibling = sib;
    }
done:
    for (int v = 0; readers && v < nv; v++) free(readers[v]);
    free(readers);
    free(n_readers);
    free(cap_readers);
    free(last_writer);
    free(anc);
    return rc;
}

void pardo_dataflow_free(pardo_dataflow *df) {
    if (!df) return;
    pardo_status ignored;
    for (int i = 0; i < df->n_vars; i++)
        if (df->vars[i]) pardo_engine_delete_var(df->e, df->vars[i], &ignored);
    if (df->stages) pardo_engine_delete_var(df->e, df->stages, &ignored);
    if (df->n_vars > 0 || df->stages) pardo_engine_wait_all(df->e, &ignored); /* the deletes, and any step left in flight */
    for (int u = 0; u < df->n_units; u++) {
        free(df->units[u].reads);
        free(df->units[u].writes);
        free(df->units[u].dying);
        free(df->units[u].local);
        free(df->units[u].var_index);
    }
    free(df->units);
    free(df->dying);
    free(df->dying_of);
    free(df->written);
    free(df->vars);
    free(df);
}

/* Per block 0 var, the last op placed in a unit so far that writes it
 * and that reads or writes it (-1: none): what chain_extends asks. */
typedef struct df_access {
    int *last_write, *last_touch;
    int *readers; // per var: the ops of block 0 that read it
} df_access;

static void access_add(pardo_executor *ex, df_access *a, int op) {
    const pardo_op *o = &ex->prog->blocks[0].ops[op];
    for (int k = 0; k < o->n_in; k++)
        if (o->in[k][0]) a->last_touch[index_of(ex, o->in[k])] = op;
    for (int k = 0; k < o->n_out; k++)
        if (o->out[k][0]) {
            int v = index_of(ex, o->out[k]);
            a->last_write[v] = a->last_touch[v] = op;
        }
}

/* Whether op j may join the unit u of ops first..j-1 (bulked, as MXNet's
 * engine bulks a segment of ops into one push): op j reads an output of op
 * j - 1, no other op reads op j - 1's outputs (nothing else waits for the
 * chain), and what op j reads or writes no op before the unit wrote (or,
 * for its writes, touched) since: j waits for nothing the unit does not.
 * The chain runs in file order on one thread, as it would op by op: its
 * ops follow each other anyway, and each push and hand-over between
 * threads is saved. */
static bool chain_extends(pardo_executor *ex, const df_access *a, const df_unit *u, int j) {
    const pardo_op *prev = &ex->prog->blocks[0].ops[j - 1], *o = &ex->prog->blocks[0].ops[j];
    bool linked = false;
    for (int k = 0; k < prev->n_out; k++) {
        if (!prev->out[k][0]) continue;
        int v = index_of(ex, prev->out[k]);
        if (a->readers[v] != 1) return false; /* op j - 1's output read by another op, or by none */
        for (int i = 0; i < o->n_in; i++) linked = linked || (o->in[i][0] && strcmp(o->in[i], prev->out[k]) == 0);
    }
    if (!linked) return false;
    for (int k = 0; k < o->n_in; k++)
        if (o->in[k][0] && a->last_write[index_of(ex, o->in[k])] >= 0 && a->last_write[index_of(ex, o->in[k])] < u->first)
            return false;
    for (int k = 0; k < o->n_out; k++)
        if (o->out[k][0] && a->last_touch[index_of(ex, o->out[k])] >= 0 &&
            a->last_touch[index_of(ex, o->out[k])] < u->first)
            return false;
    return true;
}

/* Whether op i starts a unit of its own kind: a stage, or the parallel_do
 * an early stage follows (on 2 threads or more). */
static bool stage_starts(const pardo_executor *ex, const pardo_stage_plan *plan, bool stages, int i) {
    const pardo_block *blk = &ex->prog->blocks[0];
    if (!stages) return false;
    return plan->n_chains[i] > 1 || (plan->early_pd == i && i + 1 < blk->n_ops && plan->n_chains[i + 1] > 1);
}

/* Groups block 0's ops into ex->df's units, in file order. */
static int plan_units(pardo_executor *ex, df_access *acc, pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    pardo_dataflow *df = ex->df;
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
        } else if (stage_starts(ex, plan, stages, i)) { /* the parallel_do before an early stage */
            u->kind = UNIT_PD_STAGE;
            u->last = plan->stage_end[i + 1] - 1;
        }
        for (int k = u->first; k <= u->last; k++) access_add(ex, acc, k);
        while (u->kind == UNIT_OP && u->last + 1 < blk->n_ops && !stage_starts(ex, plan, stages, u->last + 1) &&
               chain_extends(ex, acc, u, u->last + 1))
            access_add(ex, acc, ++u->last);
        df->n_units++;
        if (unit_vars(ex, u, st) != PARDO_OK) return st->code;
        i = u->last;
    }
    return PARDO_OK;
}

/* Builds ex->df: engine vars and units. Stages (and the early stage) run
 * as units where the sequential executor would run them: on 2 threads or
 * more; other ops as units of one op, or of a chain of them (chain_extends). */
static int plan_dataflow(pardo_executor *ex, pardo_status *st) {
    const pardo_block *blk = &ex->prog->blocks[0];
    pardo_dataflow *df = calloc(1, sizeof(*df));
    if (!df) return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    ex->df = df;
    df->e = pardo_engine_get();
    if (!(df->vars = calloc((size_t)blk->n_vars + 1, sizeof(*df->vars))) ||
        !(df->units = calloc((size_t)blk->n_ops + 1, sizeof(*df->units))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    for (int i = 0; i < blk->n_vars; i++) {
        if (!(df->vars[i] = pardo_engine_new_var(df->e, st))) return st->code;
        df->n_vars = i + 1;
    }
    if (!(df->stages = pardo_engine_new_var(df->e, st))) return st->code;
    const size_t nv = (size_t)blk->n_vars + 1;
    df_access acc = {malloc(sizeof(int) * nv), malloc(sizeof(int) * nv), calloc(nv, sizeof(int))};
    df->written = calloc(nv, sizeof(bool));
    if (!acc.last_write || !acc.last_touch || !acc.readers || !df->written) {
        free(acc.last_write);
        free(acc.last_touch);
        free(acc.readers);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the dataflow");
    }
    for (int v = 0; v < blk->n_vars; v++) acc.last_write[v] = acc.last_touch[v] = -1;
    for (int i = 0; i < blk->n_ops; i++) {
        const pardo_op *o = &blk->ops[i];
        for (int k = 0; k < o->n_out; k++)
            if (o->out[k][0]) df->written[index_of(ex, o->out[k])] = true;
        for (int k = 0; k < o->n_in; k++) /* an op reading a var twice counts once */
            if (o->in[k][0]) {
                bool seen = false;
                for (int m = 0; m < k; m++) seen = seen || strcmp(o->in[m], o->in[k]) == 0;
                if (!seen) acc.readers[index_of(ex, o->in[k])]++;
            }
    }
    int rc = plan_units(ex, &acc, st);
    free(acc.last_write);
    free(acc.last_touch);
    free(acc.readers);
    if (rc != PARDO_OK) return rc;
    if (plan_siblings(ex, st) != PARDO_OK) return st->code;
    return plan_dying(ex, st);
}

/* The engine op of a unit: runs its ops as the sequential executor does,
 * then frees the dead temps it was the last to touch. */
static int run_unit(void *arg, pardo_status *st) {
    df_unit *u = arg;
    pardo_executor *ex = u->ex;
    /* A unit that may run beside others runs its kernels on its own thread (idle threads may help): small
     * products split over threads busy elsewhere cost more than they gain. One the vars order against every
     * other unit runs alone, its kernels split over every thread as the sequential executor's are. The
     * split does not change a kernel's bits. */
    pardo_block_run r = {.nthreads = u->has_sibling ? 1 : ex->opt.nthreads, .idle_help = u->has_sibling};
    int64_t ready = pardo_engine_op_ready_ticks();
    int rc;
    if (u->kind == UNIT_STAGE) {
        rc = pardo_exec_run_stage(ex, 0, u->first, ex->root, &r, st);
    } else if (u->kind == UNIT_PD_STAGE) {
        rc = pardo_exec_run_op(ex, 0, u->first, ex->root, &r, true, &ready, st);
        if (rc == PARDO_OK) rc = pardo_exec_run_stage(ex, 0, u->first + 1, ex->root, &r, st);
    } else {
        rc = PARDO_OK;
        for (int i = u->first, k = 0; rc == PARDO_OK && i <= u->last; i++) {
            rc = pardo_exec_run_op(ex, 0, i, ex->root, &r, true, &ready, st);
            for (; rc == PARDO_OK && k < u->n_local && ex->df->dying[u->local[k]].last_op == i; k++)
                free_dying(ex, &ex->df->dying[u->local[k]]);
        }
    }
    if (rc == PARDO_OK) end_unit(ex, u); /* as the sequential executor, nothing is freed after a failure */
    if (rc != PARDO_OK) {
        u->st = *st;
        u->failed = true;
    }
    return rc;
}


int pardo_dataflow_plan(pardo_executor *ex, pardo_status *st) {
    if (ex->df) return PARDO_OK;
    if (pardo_exec_reserve_outputs(ex, st) != PARDO_OK || plan_dataflow(ex, st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

bool pardo_dataflow_may_overlap(const pardo_executor *ex) {
    for (int u = 0; ex->df && u < ex->df->n_units; u++)
        if (ex->df->units[u].has_sibling) return true;
    return false;
}

int pardo_dataflow_push_step(pardo_executor *ex, pardo_status *st) {
    if (pardo_dataflow_plan(ex, st) != PARDO_OK) return st->code;
    pardo_dataflow *df = ex->df;
    PARDO_ASSERT(!df->pushed);
    if (ex->early) ex->early->active = false;
    ex->pool.shared = true; /* units take outputs from it and free temps into it on several threads */
    ex->df_running = true;
    for (int i = 0; i < df->n_dying; i++) atomic_store_explicit(&df->dying[i].left, df->dying[i].units, memory_order_relaxed);
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
    const pardo_block *blk = &ex->prog->blocks[0];
    const pardo_graph_var *v = pardo_block_find_var(blk, name);
    if (!v) return PARDO_OK; /* fetch says there is none */
    int rc = pardo_engine_wait_to_read(df->e, df->vars[v - blk->vars], st);
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
