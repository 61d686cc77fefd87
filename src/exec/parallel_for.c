/* parallel_for.c - pardo_parallel_for, pardo_parallel_for_blocks and
 * pardo_parallel_for_idle (op.h): a kernel's loop split over the shared
 * thread pool, ggml's way (one chunk per thread), in fixed blocks handed out
 * as threads ask, or item by item to the threads that are idle. */
#include "op.h"
#include "exec/thread_pool.h"

typedef struct block_job {
    void (*fn)(void *arg, int64_t begin, int64_t end);
    void *arg;
    int64_t n, block; // items, items per block
} block_job;

static void run_block(void *p, int64_t b) {
    const block_job *j = p;
    const int64_t begin = j->block * b, end = begin + j->block < j->n ? begin + j->block : j->n;
    j->fn(j->arg, begin, end);
}

/* The threads a kernel's loop may use: ctx->nthreads, at most the pool's size. */
static int loop_threads(const pardo_kernel_ctx *ctx) {
    int nth = ctx->nthreads;
    if (nth > 1) {
        int size = pardo_thread_pool_size();
        if (nth > size) nth = size;
    }
    return nth;
}

/* fn over [0, n) in blocks of `block` items on up to nth threads; one call on
 * the calling thread when nth <= 1 or everything fits one block. */
static void run_blocks(int nth, int64_t n, int64_t block, void (*fn)(void *arg, int64_t begin, int64_t end),
                       void *arg) {
    if (nth <= 1 || n <= block) {
        if (n > 0) fn(arg, 0, n);
        return;
    }
    block_job j = {fn, arg, n, block};
    pardo_thread_pool_for(nth, (n + block - 1) / block, run_block, &j);
}

int pardo_parallel_for(pardo_kernel_ctx *ctx, int64_t n, void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
    if (n < 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "parallel_for over %lld items", (long long)n);
    const int nth = loop_threads(ctx);
    run_blocks(nth, n, nth > 1 ? (n + nth - 1) / nth : n, fn, arg); /* ggml's dr: one chunk per thread */
    return PARDO_OK;
}

int pardo_parallel_for_blocks(pardo_kernel_ctx *ctx, int64_t n, int64_t block,
                              void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
    if (n < 0 || block < 1)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "parallel_for over %lld items in blocks of %lld", (long long)n,
                            (long long)block);
    run_blocks(loop_threads(ctx), n, block, fn, arg);
    return PARDO_OK;
}

typedef struct idle_job {
    void (*fn)(void *arg, int64_t begin, int64_t end);
    void *arg;
} idle_job;

static void run_one(void *p, int64_t i) {
    const idle_job *j = p;
    j->fn(j->arg, i, i + 1);
}

int pardo_parallel_for_idle(pardo_kernel_ctx *ctx, int64_t n, void (*fn)(void *arg, int64_t begin, int64_t end),
                            void *arg) {
    if (n < 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "parallel_for over %lld items", (long long)n);
    idle_job j = {fn, arg};
    /* width 1 where the kernel may not be helped: the pool runs every item inline, in order */
    pardo_thread_pool_for_idle(ctx->idle_help ? pardo_thread_pool_size() : 1, n, run_one, &j);
    return PARDO_OK;
}
