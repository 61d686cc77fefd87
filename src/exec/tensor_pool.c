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

void pardo_tensor_pool_init(pardo_tensor_pool *pool) {
    memset(pool, 0, sizeof(*pool));
    atomic_flag_clear(&pool->lock);
}

void pardo_tensor_pool_clear(pardo_tensor_pool *pool) {
    for (int i = 0; i < pool->n; i++) pardo_tensor_release(pool->free[i]);
    free(pool->free);
    memset(pool, 0, sizeof(*pool));
}

void pardo_tensor_pool_put(pardo_tensor_pool *pool, pardo_tensor *t) {
    if (!t) return;
    if (t->is_array || t->nbytes == 0 || atomic_load(&t->refs) != 1) {
        pardo_tensor_release(t);
        return;
    }
    pool_lock(pool);
    if (pool->n == pool->cap) {
        int cap = pool->cap ? pool->cap * 2 : 16;
        pardo_tensor **f = realloc(pool->free, sizeof(*f) * (size_t)cap);
        if (!f) {
            pool_unlock(pool);
            pardo_tensor_release(t); /* no room to keep it: free it instead */
            return;
        }
        pool->free = f;
        pool->cap = cap;
    }
    pool->free[pool->n++] = t;
    pool->bytes += t->nbytes;
    pool_unlock(pool);
}

pardo_tensor *pardo_tensor_pool_take(pardo_tensor_pool *pool, pardo_dtype dtype, int ndim, const int64_t *shape) {
    int64_t numel = pardo_shape_numel(ndim, shape);
    if (numel <= 0 || ndim < 0 || ndim > PARDO_MAX_DIMS) return NULL;
    size_t nbytes = (size_t)numel * pardo_dtype_size(dtype);
    pardo_tensor *t = NULL;
    pool_lock(pool);
    for (int i = pool->n - 1; i >= 0; i--) /* the most recently freed first: likeliest still in cache */
        if (pool->free[i]->nbytes == nbytes) {
            t = pool->free[i];
            pool->free[i] = pool->free[--pool->n];
            pool->bytes -= nbytes;
            break;
        }
    pool_unlock(pool);
    if (!t) return NULL;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(*shape) * (size_t)ndim);
    t->numel = numel;
    return t;
}
