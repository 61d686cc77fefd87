/* scratch.h - per-thread scratch buffers for kernels that need room of their
 * own while they run (conv2d's im2col columns, its gathered output
 * gradients, the per-block partial sums of its weight gradient;
 * layer_norm_grad's row statistics): each
 * thread keeps PARDO_SCRATCH_SLOTS buffers, grown to the largest size asked
 * and never shrunk, so the steady state allocates nothing; a thread's
 * buffers are freed when the thread ends (a pthread key's destructor; the
 * main thread's stay reachable through its thread-local pointers until the
 * process exits). The GEMM's pack buffers are slots here too.
 *
 * A kernel owns a slot on its thread from pardo_scratch_get until it
 * returns; kernels do not nest on a thread (a pool thread runs one item at
 * a time), so two kernels never share a slot at once. Items a kernel hands
 * to pardo_parallel_for run on the calling thread too: they must use other
 * slots than the ones the caller holds across the loop. */
#ifndef PARDO_SCRATCH_H
#define PARDO_SCRATCH_H

#include <stddef.h>

enum {
    PARDO_SCRATCH_COL,  // conv2d: the im2col columns of a chunk of images (items); rnn, gru, lstm and their
                        // gradients: their whole workspace (the caller, across its products)
    PARDO_SCRATCH_ROWS, // conv2d: a chunk's output (gradient) rows gathered (items)
    PARDO_SCRATCH_PART, // conv2d_grad: the per-block partial sums (the caller, across its loop)
    PARDO_SCRATCH_MASK, // im2col: the column masks of the last geometry (inside one call; kept for the next)
    PARDO_SCRATCH_STATS, // layer_norm_grad: each row's mean and inverse deviation (the caller, across its loops);
                         // non_max_suppression: a flag and a kept index per box
    PARDO_SCRATCH_GEMM, // the GEMM's packed op(B) and its other buffers: N_BUFS slots from here (ops/gemm_internal.h)
    PARDO_SCRATCH_SLOTS = PARDO_SCRATCH_GEMM + 3
};

/* The calling thread's buffer `slot` (PARDO_SCRATCH_*) with room for at
 * least `bytes` bytes, 64-byte aligned; its old contents are kept only
 * while it does not grow. Returns NULL when out of memory (the old buffer
 * is kept). Owned by the thread; valid until its next call for the same
 * slot. Thread-safe (each thread has its own). */
void *pardo_scratch_get(int slot, size_t bytes);

#endif
