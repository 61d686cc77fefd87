/* device.h - the only door to the CUDA runtime. Built with CUDA (CUDA=1),
 * src/core/device_cuda.c implements it over cudart; otherwise src/core/device_none.c
 * reports "no device". Nothing else in pardo includes CUDA headers. */
#ifndef PARDO_DEVICE_H
#define PARDO_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* An opaque CUDA stream (cudaStream_t). Where a function here takes one, NULL means the compute stream of the
 * calling thread's current device (pardo_device_compute_stream), never CUDA's legacy default stream. */
typedef void *pardo_stream;

/* An opaque CUDA event (cudaEvent_t), made without timing (cudaEventDisableTiming). */
typedef void *pardo_event;

/* True when pardo was compiled with CUDA support. */
bool pardo_device_compiled(void);

/* Number of usable CUDA devices now (0 without CUDA, a driver or a GPU).
 * The first call probes and caches; thread-safe. */
int pardo_device_count(void);

/* Prints, once per process, to stderr, why pardo runs on the CPU when the
 * user asked for a GPU or pardo was built with CUDA and none is present. */
void pardo_device_note_cpu_fallback(const char *why);

/* True once this process has selected a device or allocated device memory:
 * from then on SyncedMemory pins the host memory it allocates (fast copies).
 * A CPU-only run never pins, so it never starts the CUDA runtime. */
bool pardo_device_in_use(void);

/* Selects device `dev` for the calling thread (each thread has its own; a thread that never selects one is on
 * device 0). A thread that touches an executor's device memory selects the executor's device first. */
int pardo_device_set(int dev, pardo_status *st);

/* The calling thread's current device into *dev (0 when it never selected one). */
int pardo_device_get(int *dev, pardo_status *st);

/* Device memory. On success *out holds nbytes of device memory that the
 * caller frees with pardo_device_free. */
int pardo_device_malloc(void **out, size_t nbytes, pardo_status *st);
void pardo_device_free(void *p);

/* Pinned (page-locked) host memory; freed with pardo_device_free_host. */
int pardo_device_malloc_host(void **out, size_t nbytes, pardo_status *st);
void pardo_device_free_host(void *p);

/* Copies: host to device, device to host, device to device, synchronous: queued on the current device's compute
 * stream (so ordered after the kernels queued there), which is then synchronised. */
int pardo_device_copy_h2d(void *dst, const void *src, size_t nbytes, pardo_status *st);
int pardo_device_copy_d2h(void *dst, const void *src, size_t nbytes, pardo_status *st);
int pardo_device_copy_d2d(void *dst, const void *src, size_t nbytes, pardo_status *st);

/* Asynchronous host to device copy on `stream` (NULL: the compute stream); src should be pinned and must stay
 * unchanged until the copy has run (an event recorded after it completes). */
int pardo_device_copy_h2d_async(void *dst, const void *src, size_t nbytes, pardo_stream stream, pardo_status *st);

/* Fills nbytes of device memory with zeros, queued on the current device's compute stream (ordered before the
 * kernels and device.h copies that follow; not waited for). */
int pardo_device_memset_zero(void *dst, size_t nbytes, pardo_status *st);

/* The streams pardo's work runs on, one pair per device, each made non-blocking (never synchronising with the
 * legacy default stream) on first use and kept for the process: the compute stream, which every kernel, cuBLAS
 * handle and device.h copy of an op uses, and the copy stream, which the feed stage's host-to-device copies of
 * the next batch use while a step computes. *out gets device dev's stream (made for dev even when the calling
 * thread is on another device). Thread-safe; PARDO_EINVAL for a dev that is not a device, PARDO_ECUDA when the
 * stream cannot be made. */
int pardo_device_compute_stream(int dev, pardo_stream *out, pardo_status *st);
int pardo_device_copy_stream(int dev, pardo_stream *out, pardo_status *st);

/* The compute stream of the calling thread's current device, for the kernel launches of the .cu files in
 * ops/cuda/ (cuda_stream.cuh's PARDO_CU_STREAM, which declares it for C++ too). Where the stream cannot be made
 * it is NULL (the legacy default stream, which pardo_cuda_sync_check then synchronises as well). Thread-safe. */
pardo_stream pardo_device_stream_current(void);

/* Streams of one's own: created non-blocking; destroyed by pardo_device_stream_destroy (after their work). */
int pardo_device_stream_create(pardo_stream *out, pardo_status *st);
/* Waits for the work queued on s (NULL: the compute stream). */
int pardo_device_stream_sync(pardo_stream s, pardo_status *st);
void pardo_device_stream_destroy(pardo_stream s);

/* Events, to order one stream's work after another's and to tell the host when queued work is done. An event is
 * made on the current device; *out is destroyed with pardo_device_event_destroy. */
int pardo_device_event_create(pardo_event *out, pardo_status *st);
/* Records ev on stream s (NULL: the compute stream): it completes once the work queued on s so far has run. */
int pardo_device_event_record(pardo_event ev, pardo_stream s, pardo_status *st);
/* *done: whether ev's work has completed (an event never recorded has). Does not wait. */
int pardo_device_event_query(pardo_event ev, bool *done, pardo_status *st);
/* Waits on the host until ev's work has completed. */
int pardo_device_event_sync(pardo_event ev, pardo_status *st);
/* Work queued on s (NULL: the compute stream) after this call runs after ev's work (cudaStreamWaitEvent); the
 * host does not wait. s and ev may belong to different devices. */
int pardo_device_stream_wait_event(pardo_stream s, pardo_event ev, pardo_status *st);
/* NULL is a no-op; work still pending on ev is not waited for. */
void pardo_device_event_destroy(pardo_event ev);

/* Waits for all work on the current device (every stream). */
int pardo_device_sync(pardo_status *st);

#endif
