/* device_cuda.c - device.h over the CUDA runtime (built only with CUDA=1). */
#include "core/device.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static int cuda_fail(pardo_status *st, cudaError_t err, const char *what) {
    return pardo_errorf(st, PARDO_ECUDA, "CUDA %s failed: %s (%s)", what,
                        cudaGetErrorString(err), cudaGetErrorName(err));
}

bool pardo_device_compiled(void) { return true; }

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probed_count;

static void probe_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    (void)cudaGetLastError(); /* clear the sticky "no device" error */
    probed_count = n;
}

int pardo_device_count(void) {
    pthread_once(&probe_once, probe_devices);
    return probed_count;
}

void pardo_device_note_cpu_fallback(const char *why) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        fprintf(stderr, "pardo: running on the CPU: %s\n", why);
}

static atomic_bool in_use;

bool pardo_device_in_use(void) { return atomic_load_explicit(&in_use, memory_order_relaxed); }

int pardo_device_set(int dev, pardo_status *st) {
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess) return cuda_fail(st, e, "cudaSetDevice");
    atomic_store(&in_use, true);
    return PARDO_OK;
}

int pardo_device_malloc(void **out, size_t nbytes, pardo_status *st) {
    *out = NULL;
    cudaError_t e = cudaMalloc(out, nbytes ? nbytes : 1);
    if (e == cudaErrorMemoryAllocation) { /* not sticky: cleared, and ENOMEM so the device cache can retry */
        (void)cudaGetLastError();
        return pardo_errorf(st, PARDO_ENOMEM, "CUDA cudaMalloc of %zu bytes failed: %s", nbytes, cudaGetErrorString(e));
    }
    if (e != cudaSuccess) return cuda_fail(st, e, "cudaMalloc");
    atomic_store(&in_use, true);
    return PARDO_OK;
}

void pardo_device_free(void *p) {
    if (p) cudaFree(p);
}

int pardo_device_malloc_host(void **out, size_t nbytes, pardo_status *st) {
    *out = NULL;
    cudaError_t e = cudaMallocHost(out, nbytes ? nbytes : 1);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaMallocHost");
}

void pardo_device_free_host(void *p) {
    if (p) cudaFreeHost(p);
}

static int copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, pardo_status *st) {
    cudaError_t e = cudaMemcpy(dst, src, n, kind);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaMemcpy");
}

int pardo_device_copy_h2d(void *d, const void *s, size_t n, pardo_status *st) {
    return copy(d, s, n, cudaMemcpyHostToDevice, st);
}
int pardo_device_copy_d2h(void *d, const void *s, size_t n, pardo_status *st) {
    return copy(d, s, n, cudaMemcpyDeviceToHost, st);
}
int pardo_device_copy_d2d(void *d, const void *s, size_t n, pardo_status *st) {
    return copy(d, s, n, cudaMemcpyDeviceToDevice, st);
}

int pardo_device_copy_h2d_async(void *d, const void *s, size_t n, pardo_stream stream, pardo_status *st) {
    cudaError_t e = cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, (cudaStream_t)stream);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaMemcpyAsync");
}

int pardo_device_memset_zero(void *d, size_t n, pardo_status *st) {
    cudaError_t e = cudaMemset(d, 0, n);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaMemset");
}

int pardo_device_stream_create(pardo_stream *out, pardo_status *st) {
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    *out = (pardo_stream)s;
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaStreamCreate");
}

int pardo_device_stream_sync(pardo_stream s, pardo_status *st) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)s);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaStreamSynchronize");
}

void pardo_device_stream_destroy(pardo_stream s) {
    if (s) cudaStreamDestroy((cudaStream_t)s);
}

int pardo_device_sync(pardo_status *st) {
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaDeviceSynchronize");
}
