/* train_util.h - what the C glue of the training-side CUDA kernels shares (optimizer_cuda.c, data_cuda.c,
 * conv_cuda.c; built with CUDA=1 only): the op's own shape inference run on the run-time types (the checks and
 * output types of the CPU kernel, from the one place they are written), scalars read on the host, and device
 * workspace kept in the op's state slot, and device zeros and copies on the kernels' stream. */
#ifndef PARDO_CUDA_TRAIN_UTIL_H
#define PARDO_CUDA_TRAIN_UTIL_H

#include <stddef.h>

#include "op.h"

/* Runs ctx's op's infer function on the types of its run-time inputs (absent ones NULL) and copies the first
 * n_want output types into out (n_want <= ctx->n_out; out may be NULL when n_want is 0). Returns PARDO_OK, or the
 * infer function's error (ctx->st says what was expected, as the CPU kernel would), or PARDO_EINVAL for a
 * tensor_array input (the callers hand those to the CPU first). */
int pardo_cuda_infer_run(pardo_kernel_ctx *ctx, pardo_type *out, int n_want);

/* Element 0 of t as a double, read from t's host copy (copied from the device first where the head is there).
 * PARDO_OK, or the copy's error in ctx->st. */
int pardo_cuda_host_scalar(pardo_kernel_ctx *ctx, pardo_tensor *t, double *v);

/* Device memory of at least nbytes for the op's run, in *out: the block kept in the op's state slot where it is
 * big enough, else one from the device cache (device_cache.h) kept there for the next run (a smaller one kept
 * before is given back to the cache). Where the op has no slot, or its slot holds another kernel's state, the
 * block is the caller's to give back with pardo_cuda_workspace_done after the op's last launch is synchronised.
 * nbytes 0 gives NULL. Returns PARDO_OK or the allocation's error in ctx->st. */
int pardo_cuda_workspace_get(pardo_kernel_ctx *ctx, size_t nbytes, void **out);

/* Ends the op's use of a block from pardo_cuda_workspace_get: gives it back to the device cache unless the op's
 * state slot keeps it. Call after pardo_cuda_sync_check (the kernels that used it have finished). NULL: no-op. */
void pardo_cuda_workspace_done(pardo_kernel_ctx *ctx, void *p);

/* Zeros t's device data, on the stream of the kernels (launch_train.h's pardo_cuda_launch_zero, not device.h's
 * memset, so it stays in order with them whichever stream that is). PARDO_OK or the error in ctx->st. */
int pardo_cuda_zero(pardo_kernel_ctx *ctx, pardo_tensor *t);

/* nbytes from src to dst on the device, on the kernels' stream likewise. PARDO_OK or the error in ctx->st. */
int pardo_cuda_copy(pardo_kernel_ctx *ctx, void *dst, const void *src, size_t nbytes);

#endif
