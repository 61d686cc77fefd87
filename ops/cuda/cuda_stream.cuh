// cuda_stream.cuh - the one stream every kernel of ops/cuda/*.cu launches on
// and every cuBLAS handle is set to: `kernel<<<grid, block, 0, PARDO_CU_STREAM>>>`.
// Included by the .cu files only (nvcc). It is the compute stream of the calling
// thread's current device (src/core/device.h: non-blocking, one per device, made
// on first use), never the legacy default stream; the glue's pardo_cuda_sync_check
// (and elementwise.cu's launchers) synchronise that stream, not the device.
#ifndef PARDO_CUDA_STREAM_CUH
#define PARDO_CUDA_STREAM_CUH

#include <cuda_runtime.h>

// device.h's pardo_device_stream_current (device_cuda.c), declared here without device.h's C-only headers.
extern "C" void *pardo_device_stream_current(void);

#define PARDO_CU_STREAM ((cudaStream_t)pardo_device_stream_current())

#endif
