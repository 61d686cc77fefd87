// cuda_stream.cuh - the one stream every kernel of ops/cuda/*.cu launches on
// and every cuBLAS handle is set to: `kernel<<<grid, block, 0, PARDO_CU_STREAM>>>`.
// Included by the .cu files only (nvcc). Today it is the legacy default stream;
// making it the calling thread's own stream is a change here alone.
#ifndef PARDO_CUDA_STREAM_CUH
#define PARDO_CUDA_STREAM_CUH

#include <cuda_runtime.h>

#define PARDO_CU_STREAM ((cudaStream_t)0)

#endif
