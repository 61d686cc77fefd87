/* device_cuda.c - device.h over the CUDA runtime (built only with CUDA=1): the calls, and the per-device compute
 * and copy streams (non-blocking, made on first use under a mutex, kept for the process). */
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

int pardo_device_get(int *dev, pardo_status *st) {
    *dev = 0;
    cudaError_t e = cudaGetDevice(dev);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaGetDevice");
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

/* ---- the streams: a compute stream and a copy stream per device, made on first use ---- */

#define MAX_DEVICES 64

static _Atomic(cudaStream_t) compute_streams[MAX_DEVICES], copy_streams[MAX_DEVICES];
static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;

/* slots[dev], made non-blocking for device dev (selected for the moment when the calling thread is elsewhere)
 * under stream_lock the first time. */
static int device_stream(_Atomic(cudaStream_t) *slots, int dev, cudaStream_t *out, pardo_status *st) {
    *out = NULL;
    if (dev < 0 || dev >= MAX_DEVICES || dev >= pardo_device_count())
        return pardo_errorf(st, PARDO_EINVAL, "no CUDA device %d (there are %d)", dev, pardo_device_count());
    cudaStream_t s = atomic_load_explicit(&slots[dev], memory_order_acquire);
    if (s) {
        *out = s;
        return PARDO_OK;
    }
    int rc = PARDO_OK, cur = 0;
    pthread_mutex_lock(&stream_lock);
    if (!(s = atomic_load_explicit(&slots[dev], memory_order_acquire))) {
        cudaError_t e = cudaGetDevice(&cur);
        if (e == cudaSuccess && cur != dev) e = cudaSetDevice(dev);
        if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (e == cudaSuccess)
            atomic_store_explicit(&slots[dev], s, memory_order_release);
        else
            rc = cuda_fail(st, e, "cudaStreamCreate");
        if (cur != dev) (void)cudaSetDevice(cur);
    }
    pthread_mutex_unlock(&stream_lock);
    *out = s;
    return rc;
}

int pardo_device_compute_stream(int dev, pardo_stream *out, pardo_status *st) {
    cudaStream_t s;
    int rc = device_stream(compute_streams, dev, &s, st);
    *out = (pardo_stream)s;
    return rc;
}

int pardo_device_copy_stream(int dev, pardo_stream *out, pardo_status *st) {
    cudaStream_t s;
    int rc = device_stream(copy_streams, dev, &s, st);
    *out = (pardo_stream)s;
    return rc;
}

pardo_stream pardo_device_stream_current(void) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return NULL;
    cudaStream_t s =
        dev >= 0 && dev < MAX_DEVICES ? atomic_load_explicit(&compute_streams[dev], memory_order_acquire) : NULL;
    if (s) return (pardo_stream)s;
    pardo_status ignored;
    return device_stream(compute_streams, dev, &s, &ignored) == PARDO_OK ? (pardo_stream)s : NULL;
}

/* s, or the current device's compute stream for NULL. */
static cudaStream_t stream_of(pardo_stream s) { return (cudaStream_t)(s ? s : pardo_device_stream_current()); }

/* ---- copies: on the compute stream; the synchronous ones then wait for it ---- */

static int copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, pardo_status *st) {
    cudaStream_t s = stream_of(NULL);
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, s);
    if (e != cudaSuccess) return cuda_fail(st, e, "cudaMemcpyAsync");
    e = cudaStreamSynchronize(s);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaStreamSynchronize (after a copy)");
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
    cudaError_t e = cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, stream_of(stream));
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaMemcpyAsync");
}

int pardo_device_memset_zero(void *d, size_t n, pardo_status *st) {
    cudaError_t e = cudaMemsetAsync(d, 0, n, stream_of(NULL));
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaMemsetAsync");
}

int pardo_device_stream_create(pardo_stream *out, pardo_status *st) {
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    *out = (pardo_stream)s;
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaStreamCreate");
}

int pardo_device_stream_sync(pardo_stream s, pardo_status *st) {
    cudaError_t e = cudaStreamSynchronize(stream_of(s));
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaStreamSynchronize");
}

void pardo_device_stream_destroy(pardo_stream s) {
    if (s) cudaStreamDestroy((cudaStream_t)s);
}

/* ---- events ---- */

int pardo_device_event_create(pardo_event *out, pardo_status *st) {
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    *out = (pardo_event)ev;
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaEventCreateWithFlags");
}

int pardo_device_event_record(pardo_event ev, pardo_stream s, pardo_status *st) {
    cudaError_t e = cudaEventRecord((cudaEvent_t)ev, stream_of(s));
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaEventRecord");
}

int pardo_device_event_query(pardo_event ev, bool *done, pardo_status *st) {
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    *done = e == cudaSuccess;
    if (e == cudaSuccess || e == cudaErrorNotReady) {
        if (e == cudaErrorNotReady) (void)cudaGetLastError(); /* not an error: clear it */
        return PARDO_OK;
    }
    return cuda_fail(st, e, "cudaEventQuery");
}

int pardo_device_event_sync(pardo_event ev, pardo_status *st) {
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaEventSynchronize");
}

int pardo_device_stream_wait_event(pardo_stream s, pardo_event ev, pardo_status *st) {
    cudaError_t e = cudaStreamWaitEvent(stream_of(s), (cudaEvent_t)ev, 0);
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaStreamWaitEvent");
}

void pardo_device_event_destroy(pardo_event ev) {
    if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

int pardo_device_sync(pardo_status *st) {
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? PARDO_OK : cuda_fail(st, e, "cudaDeviceSynchronize");
}
