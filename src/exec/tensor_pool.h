/* tensor_pool.h - free tensors kept for reuse: the executor puts a dead
 * temporary's tensor here (release_plan.h) and a kernel's new output takes
 * one of the same byte size, reshaped, instead of allocating. Thread-safe
 * while `shared` is set (parallel stages release and take at once); one
 * thread at a time otherwise. The pool owns one reference to each tensor
 * it holds. */
#ifndef PARDO_TENSOR_POOL_H
#define PARDO_TENSOR_POOL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "core/tensor.h"

typedef struct pardo_tensor_pool {
    atomic_flag lock; // a spin lock, taken only while shared: held for a few loads and stores
    bool shared;      // several threads may use the pool now (the owner sets it before forking, clears it after)
    pardo_tensor **free; // n tensors, one reference each
    const void **freer;  // per tensor: the thread that put it (pardo_tensor_pool_take prefers its own)
    int n, cap;
    size_t bytes;        // their data bytes
} pardo_tensor_pool;

/* An empty pool. */
void pardo_tensor_pool_init(pardo_tensor_pool *pool);

/* Releases every tensor the pool holds. */
void pardo_tensor_pool_clear(pardo_tensor_pool *pool);

/* Takes over the caller's reference to t when t is a plain tensor nobody
 * else holds (else just releases it: an array, a view, a shared one). */
void pardo_tensor_pool_put(pardo_tensor_pool *pool, pardo_tensor *t);

/* A tensor of exactly the bytes dtype and shape need, reshaped to them and
 * handed over with its reference; NULL when the pool has none. The most
 * recently put one that this thread put is preferred (its lines are likely
 * still in this core's cache; another core's would move over as the
 * caller writes them), then the most recent any thread put. Its data is
 * whatever it held: the caller overwrites it. */
pardo_tensor *pardo_tensor_pool_take(pardo_tensor_pool *pool, pardo_dtype dtype, int ndim, const int64_t *shape);

#endif
