/* tensor_pool.c - free tensors kept for reuse (see tensor_pool.h). */
#include "exec/tensor_pool.h"

#include <stdlib.h>
#include <string.h>

#include "exec/spin.h"

/* The pool is shared only while a stage's chains run as tasks (then a spin
 * lock: it guards a few loads and stores); every other time one thread
 * uses it and takes no lock. */
static void pool_lock(pardo_tensor_pool *pool) {
    while (pool->shared && atomic_flag_test_and_set_explicit(&pool->lock, memory_order_acquire)) pardo_cpu_relax();
}

static void pool_unlock(pardo_tensor_pool *pool) {
    if (pool->shared) atomic_flag_clear_explicit(&pool->lock, memory_order_release);
}

/* This thread's tag in `freer`: the address of a thread-local. */
static const void *this_thread(void) {
    static _Thread_local char tag;
    return &tag;
}

void pardo_tensor_pool_init(pardo_tensor_pool *pool) {
    memset(pool, 0, sizeof(*pool));
    atomic_flag_clear(&pool->lock);
}

void pardo_tensor_pool_clear(pardo_tensor_pool *pool) {
    for (int i = 0; i < pool->n; i++) pardo_tensor_release(pool->free[i]);
    free(pool->free);
    free(pool->freer);
    memset(pool, 0, sizeof(*pool));
}

void pardo_tensor_pool_put(pardo_tensor_pool *pool, pardo_tensor *t) {
    if (!t) return;
    if (t->is_array || t->base || t->nbytes == 0 || atomic_load(&t->refs) != 1) { /* a view's data is not its own */
        pardo_tensor_release(t);
        return;
    }
    pool_lock(pool);
    if (pool->n == pool->cap) {
        int cap = pool->cap ? pool->cap * 2 : 16;
        pardo_tensor **f = realloc(pool->free, sizeof(*f) * (size_t)cap);
        if (f) pool->free = f;
        const void **w = f ? realloc(pool->freer, sizeof(*w) * (size_t)cap) : NULL;
        if (w) pool->freer = w;
        if (!f || !w) {
            pool_unlock(pool);
            pardo_tensor_release(t); /* no room to keep it: free it instead */
            return;
        }
        pool->cap = cap;
    }
    pool->freer[pool->n] = this_thread();
    pool->free[pool->n++] = t;
    pool->bytes += t->nbytes;
    pool_unlock(pool);
}

pardo_tensor *pardo_tensor_pool_take(pardo_tensor_pool *pool, pardo_dtype dtype, int ndim, const int64_t *shape) {
    int64_t numel = pardo_shape_numel(ndim, shape);
    if (numel <= 0 || ndim < 0 || ndim > PARDO_MAX_DIMS) return NULL;
    size_t nbytes = (size_t)numel * pardo_dtype_size(dtype);
    const void *me = this_thread();
    pardo_tensor *t = NULL;
    pool_lock(pool);
    int pick = -1; /* the most recently put by this thread, else the most recent */
    for (int i = pool->n - 1; i >= 0; i--)
        if (pool->free[i]->nbytes == nbytes) {
            if (pick < 0) pick = i;
            if (pool->freer[i] == me) {
                pick = i;
                break;
            }
        }
    if (pick >= 0) {
        t = pool->free[pick];
        pool->n--;
        pool->free[pick] = pool->free[pool->n];
        pool->freer[pick] = pool->freer[pool->n];
        pool->bytes -= nbytes;
    }
    pool_unlock(pool);
    if (!t) return NULL;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(*shape) * (size_t)ndim);
    t->numel = numel;
    return t;
}
