/* place.c - the placement pass (pardo_pass_place, pass.h): for a run on a
 * GPU, every crossing of a tensor between the CPU and the GPU in block 0
 * becomes an explicit to_device or to_host op (ops/placement.c), as ONNX
 * Runtime's MemcpyFromHost / MemcpyToHost nodes, so that the graph (pardo
 * dot, a trace) shows where data moves. A pass that names the op types it
 * adds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "pass.h"

/* Where a value lives during the step: not tracked (params, state, constants, arrays: the executor keeps them
 * where their ops run), on the host, on the device. */
typedef enum where { NOWHERE, HOST, DEVICE } where;

/* Where op runs in a GPU run: where the executor runs it, on the device when it has a CUDA kernel (which may
 * still hand an input dtype it has no kernel for to the CPU, noted once: ops/cuda/cuda_util.h), else on the
 * host. */
static where op_place(const pardo_op *op) { return op->def && op->def->cuda ? DEVICE : HOST; }

/* A moved value: var `name` copied to `at` as var `copy`. */
typedef struct moved {
    char *name, *copy;
    where at;
} moved;

typedef struct place_state {
    moved *m;
    int n, cap;
    char **names; // where each var's current value lives, by name (parallel to at)
    where *at;
    int n_names, cap_names;
} place_state;

static where *where_of(place_state *s, const char *name, pardo_status *st) {
    for (int i = 0; i < s->n_names; i++)
        if (strcmp(s->names[i], name) == 0) return &s->at[i];
    if (s->n_names == s->cap_names) {
        int cap = s->cap_names ? 2 * s->cap_names : 32;
        char **names = realloc(s->names, (size_t)cap * sizeof(*names));
        if (names) s->names = names;
        where *at = names ? realloc(s->at, (size_t)cap * sizeof(*at)) : NULL;
        if (!at) {
            pardo_errorf(st, PARDO_ENOMEM, "out of memory");
            return NULL;
        }
        s->at = at;
        s->cap_names = cap;
    }
    if (!(s->names[s->n_names] = strdup(name))) {
        pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        return NULL;
    }
    s->at[s->n_names] = NOWHERE;
    return &s->at[s->n_names++];
}

/* Forgets the copies of var name (it was written again). */
static void forget(place_state *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (s->m[i].name && strcmp(s->m[i].name, name) == 0) {
            free(s->m[i].name), free(s->m[i].copy);
            s->m[i].name = s->m[i].copy = NULL;
        }
}

static const char *copy_of(const place_state *s, const char *name, where at) {
    for (int i = 0; i < s->n; i++)
        if (s->m[i].name && s->m[i].at == at && strcmp(s->m[i].name, name) == 0) return s->m[i].copy;
    return NULL;
}

static void place_state_free(place_state *s) {
    for (int i = 0; i < s->n; i++) free(s->m[i].name), free(s->m[i].copy);
    for (int i = 0; i < s->n_names; i++) free(s->names[i]);
    free(s->m);
    free(s->names);
    free(s->at);
}

/* A new var for v's value at `at` ("x@CUDA", "h@HOST"; a number after it when taken), declared as v is, a temp;
 * an op moving v there, inserted at index `before` of block 0. The new var's name in *out (owned by the state). */
static int add_copy(pardo_program *p, place_state *s, const char *v, where at, int before, const char **out,
                    pardo_status *st) {
    pardo_block *b = &p->blocks[0];
    char name[512];
    snprintf(name, sizeof name, "%s@%s", v, at == DEVICE ? "CUDA" : "HOST");
    for (int k = 2; pardo_program_lookup_var(p, 0, name, NULL); k++)
        snprintf(name, sizeof name, "%s@%s%d", v, at == DEVICE ? "CUDA" : "HOST", k);
    const pardo_graph_var *src = pardo_block_find_var(b, v);
    pardo_graph_var *nv = src ? pardo_block_add_var_copy(b, src, st) : NULL;
    if (!nv) return src ? st->code : pardo_errorf(st, PARDO_EINVAL, "var '%s' is not declared in block 0", v);
    char *nm = strdup(name);
    if (!nm) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    free(nv->name);
    nv->name = nm;
    nv->role = PARDO_VAR_TEMP;
    nv->declared = false;
    nv->line = nv->col = 0;
    pardo_block_vars_changed(b);
    pardo_op *op = pardo_block_add_op(b, at == DEVICE ? "to_device" : "to_host", st);
    if (!op || pardo_op_add_input(op, v, st) != PARDO_OK || pardo_op_add_output(op, name, st) != PARDO_OK)
        return st->code;
    op->role = b->ops[before].role; /* its reader's: an evaluation leaves a backward op's copies out with it */
    pardo_op moved_op = b->ops[b->n_ops - 1]; /* from the end to its place */
    memmove(&b->ops[before + 1], &b->ops[before], sizeof(pardo_op) * (size_t)(b->n_ops - 1 - before));
    b->ops[before] = moved_op;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        moved *m = realloc(s->m, (size_t)cap * sizeof(*m));
        if (!m) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        s->m = m;
        s->cap = cap;
    }
    s->m[s->n] = (moved){strdup(v), strdup(name), at};
    if (!s->m[s->n].name || !s->m[s->n].copy) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    *out = s->m[s->n++].copy;
    return PARDO_OK;
}

int pardo_pass_place(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    if (!p->n_blocks) return PARDO_OK;
    if (pardo_pass_check(p, opt, st) != PARDO_OK) return st->code; /* the ops' defs and the vars' types */
    place_state s = {0};
    int rc = PARDO_OK, added = 0;
    for (int i = 0; rc == PARDO_OK && i < p->blocks[0].n_ops; i++) {
        pardo_block *b = &p->blocks[0];
        const where here = op_place(&b->ops[i]);
        for (int k = 0; rc == PARDO_OK && k < b->ops[i].n_in; k++) {
            const pardo_op *op = &b->ops[i];
            const char *v = op->in[k];
            const pardo_graph_var *var = v[0] ? pardo_block_find_var(b, v) : NULL;
            if (!var || var->kind != PARDO_VAR_TENSOR || (var->role != PARDO_VAR_TEMP && var->role != PARDO_VAR_FEED))
                continue;
            where *now = where_of(&s, v, st);
            if (!now) {
                rc = st->code;
                break;
            }
            if (*now == NOWHERE) *now = HOST; /* a feed, or a temp from before block 0's ops: the caller's */
            if (*now == here || pardo_op_writes(op, v)) continue; /* an op that writes it in place moves it itself */
            const char *c = copy_of(&s, v, here);
            if (!c) {
                if ((rc = add_copy(p, &s, v, here, i, &c, st)) != PARDO_OK) break;
                i++, added++; /* the op moved one on */
                b = &p->blocks[0];
            }
            char *dup = strdup(c);
            if (!dup) {
                rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
                break;
            }
            free(b->ops[i].in[k]);
            b->ops[i].in[k] = dup;
        }
        for (int k = 0; rc == PARDO_OK && k < p->blocks[0].ops[i].n_out; k++) {
            const char *v = p->blocks[0].ops[i].out[k];
            if (!v[0]) continue;
            where *now = where_of(&s, v, st);
            if (!now) rc = st->code;
            else *now = here, forget(&s, v);
        }
    }
    place_state_free(&s);
    if (rc != PARDO_OK) return rc;
    return added ? pardo_pass_check(p, opt, st) : PARDO_OK;
}
