/* kernel_ctx.c - output tensors for kernels (pardo_kernel_output,
 * pardo_kernel_output_as, op.h). */
#include <stdlib.h>
#include <string.h>

#include "exec/executor.h"
#include "op.h"

/* True when t is one of the op's inputs (an in-place update). */
static bool is_input(const pardo_kernel_ctx *ctx, const pardo_tensor *t) {
    for (int k = 0; k < ctx->n_in; k++)
        if (ctx->in[k] == t) return true;
    return false;
}

pardo_tensor *pardo_kernel_output(pardo_kernel_ctx *ctx, int i, pardo_dtype dtype, int ndim, const int64_t *shape) {
    PARDO_ASSERT(i >= 0 && i < ctx->n_out);
    pardo_tensor *t = ctx->out[i];
    bool reusable = t && !t->base && t->dtype == dtype && pardo_shape_equal(t->ndim, t->shape, ndim, shape) &&
                    (atomic_load(&t->refs) == 1 || (ctx->op->def->inplace && is_input(ctx, t)));
    if (!reusable) {
        /* a tensor only this output held goes back to the executor's pool (if it keeps one), and a new
         * output comes from there when a free tensor has its size */
        if (t && atomic_load(&t->refs) == 1) pardo_executor_pool_put(ctx->exec, ctx->scope, t);
        else pardo_tensor_release(t);
        ctx->out[i] = NULL;
        t = pardo_executor_pool_take(ctx->exec, ctx->scope, dtype, ndim, shape);
        if (!t && !(t = pardo_tensor_new(dtype, ndim, shape, ctx->st))) return NULL;
        ctx->out[i] = t;
    }
    void *p = ctx->device == PARDO_DEVICE_CUDA ? pardo_synced_mem_mutable_gpu_data(t->mem, ctx->st)
                                               : pardo_synced_mem_mutable_cpu_data(t->mem, ctx->st);
    return p ? t : NULL;
}

/* How many ops of p write `name` as the var of block `owner` means (the
 * blocks that see it under that name). */
static int writers_of(const pardo_program *p, int owner, const char *name) {
    int n = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        int at = -1;
        if (!pardo_program_lookup_var(p, b, name, &at) || at != owner) continue;
        for (int i = 0; i < p->blocks[b].n_ops; i++) n += pardo_op_writes(&p->blocks[b].ops[i], name);
    }
    return n;
}

/* True when output i of ctx's op may be a view of input `in`: both are
 * temporaries of the program (not a feed the caller may rewrite, nor a
 * param an update writes in place), each written by one op only (its
 * producer; this op), so nothing writes through the view or under it
 * while it lives. */
static bool view_safe(const pardo_kernel_ctx *ctx, int in, int i) {
    const pardo_program *p = ctx->prog;
    if (!p || ctx->device != PARDO_DEVICE_CPU || in >= ctx->op->n_in || i >= ctx->op->n_out) return false;
    const char *src = ctx->op->in[in], *dst = ctx->op->out[i];
    if (!src[0] || !dst[0] || strcmp(src, dst) == 0) return false;
    int so = -1, dso = -1;
    const pardo_graph_var *vs = pardo_program_lookup_var(p, ctx->block, src, &so),
                          *vd = pardo_program_lookup_var(p, ctx->block, dst, &dso);
    return vs && vd && vs->role == PARDO_VAR_TEMP && vd->role == PARDO_VAR_TEMP && vs->kind == PARDO_VAR_TENSOR &&
           vd->kind == PARDO_VAR_TENSOR && !vs->value && writers_of(p, so, src) == 1 && writers_of(p, dso, dst) == 1;
}

/* What pardo_kernel_output_as keeps in an op's state (block 0: one thread
 * runs the op at a time): whether its output may be a view. */
typedef struct view_state {
    bool views;
} view_state;

/* view_safe, decided once per op in block 0 (the program does not change
 * under an executor); asked each run elsewhere (a part block's op state
 * would be shared by its parts). */
static bool views_allowed(pardo_kernel_ctx *ctx, int in, int i) {
    pardo_op_state *slot = ctx->block == 0 ? ctx->state : NULL;
    if (!slot) return view_safe(ctx, in, i);
    if (!slot->data) {
        view_state *v = calloc(1, sizeof(*v));
        if (!v) return false;
        v->views = view_safe(ctx, in, i);
        slot->data = v;
        slot->free_fn = free;
    }
    return slot->free_fn == free && ((const view_state *)slot->data)->views;
}

pardo_tensor *pardo_kernel_output_as(pardo_kernel_ctx *ctx, int i, int in, int ndim, const int64_t *shape) {
    PARDO_ASSERT(i >= 0 && i < ctx->n_out && in >= 0 && in < ctx->n_in && ctx->in[in]);
    pardo_tensor *x = ctx->in[in], *t = ctx->out[i];
    if (!x->is_array && x->numel > 0 && views_allowed(ctx, in, i)) {
        if (!(t && t->base && atomic_load(&t->refs) == 1 && t->dtype == x->dtype &&
              pardo_shape_equal(t->ndim, t->shape, ndim, shape))) {
            pardo_tensor_release(t); /* a view, or a tensor someone else holds: never pooled */
            ctx->out[i] = NULL;
            if (!(t = pardo_tensor_new(x->dtype, ndim, shape, ctx->st))) return NULL;
            ctx->out[i] = t;
        }
        return pardo_tensor_view_of(t, x, 0, ctx->st) == PARDO_OK ? t : NULL;
    }
    if (!(t = pardo_kernel_output(ctx, i, x->dtype, ndim, shape))) return NULL;
    if (t != x && x->nbytes) memcpy(pardo_tensor_data(t), pardo_tensor_data(x), x->nbytes);
    return t;
}

bool pardo_kernel_wants_output(const pardo_kernel_ctx *ctx, int i) {
    return i >= 0 && i < ctx->n_out && ctx->op->out[i][0] != '\0';
}

pardo_tensor *pardo_kernel_output_array(pardo_kernel_ctx *ctx, int i, pardo_dtype elem, int n) {
    PARDO_ASSERT(i >= 0 && i < ctx->n_out && n >= 0);
    pardo_tensor *a = ctx->out[i];
    if (!(a && a->is_array && a->dtype == elem && atomic_load(&a->refs) == 1)) {
        pardo_tensor_release(a);
        ctx->out[i] = NULL;
        if (!(a = pardo_tensor_array_new(elem, ctx->st))) return NULL;
        ctx->out[i] = a;
    }
    return pardo_tensor_array_resize(a, n, ctx->st) == PARDO_OK ? a : NULL;
}
