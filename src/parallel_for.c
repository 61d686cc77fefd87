/* parallel_for.c - pardo_parallel_for (op.h): a kernel's loop split ggml's
 * way over the shared thread pool. */
#include "op.h"
#include "thread_pool.h"

typedef struct chunk_job {
    void (*fn)(void *arg, int64_t begin, int64_t end);
    void *arg;
    int64_t n, dr; // items, items per chunk
} chunk_job;

static void run_chunk(void *p, int64_t c) {
    const chunk_job *j = p;
    int64_t begin = j->dr * c, end = begin + j->dr < j->n ? begin + j->dr : j->n;
    if (begin < end) j->fn(j->arg, begin, end);
}

int pardo_parallel_for(pardo_kernel_ctx *ctx, int64_t n, void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
    if (n < 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "parallel_for over %lld items", (long long)n);
    int nth = ctx->nthreads;
    if (nth > 1) {
        int size = pardo_thread_pool_size();
        if (nth > size) nth = size;
    }
    if (nth <= 1 || n <= 1) {
        if (n > 0) fn(arg, 0, n);
        return PARDO_OK;
    }
    chunk_job j = {fn, arg, n, (n + nth - 1) / nth};
    int64_t chunks = (n + j.dr - 1) / j.dr;
    pardo_thread_pool_for(nth, chunks, run_chunk, &j);
    return PARDO_OK;
}

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

int pardo_parallel_for_blocks(pardo_kernel_ctx *ctx, int64_t n, int64_t block,
                              void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
    if (n < 0 || block < 1)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "parallel_for over %lld items in blocks of %lld", (long long)n,
                            (long long)block);
    const int64_t blocks = (n + block - 1) / block;
    int nth = ctx->nthreads;
    if (nth > 1) {
        int size = pardo_thread_pool_size();
        if (nth > size) nth = size;
    }
    if (nth <= 1 || blocks <= 1) {
        if (n > 0) fn(arg, 0, n);
        return PARDO_OK;
    }
    block_job j = {fn, arg, n, block};
    pardo_thread_pool_for(nth, blocks, run_block, &j);
    return PARDO_OK;
}
