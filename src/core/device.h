/* device.h - the only door to the CUDA runtime. Built with CUDA (CUDA=1),
 * src/core/device_cuda.c implements it over cudart; otherwise src/core/device_none.c
 * reports "no device". Nothing else in pardo includes CUDA headers. */
#ifndef PARDO_DEVICE_H
#define PARDO_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* An opaque CUDA stream (cudaStream_t); NULL is the default stream. */
typedef void *pardo_stream;

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

/* Selects device `dev` for the calling thread. */
int pardo_device_set(int dev, pardo_status *st);

/* Device memory. On success *out holds nbytes of device memory that the
 * caller frees with pardo_device_free. */
int pardo_device_malloc(void **out, size_t nbytes, pardo_status *st);
void pardo_device_free(void *p);

/* Pinned (page-locked) host memory; freed with pardo_device_free_host. */
int pardo_device_malloc_host(void **out, size_t nbytes, pardo_status *st);
void pardo_device_free_host(void *p);

/* Copies: host to device, device to host, device to device (synchronous). */
int pardo_device_copy_h2d(void *dst, const void *src, size_t nbytes, pardo_status *st);
int pardo_device_copy_d2h(void *dst, const void *src, size_t nbytes, pardo_status *st);
int pardo_device_copy_d2d(void *dst, const void *src, size_t nbytes, pardo_status *st);

/* Asynchronous host to device copy on `stream`; src should be pinned. */
int pardo_device_copy_h2d_async(void *dst, const void *src, size_t nbytes,
                                pardo_stream stream, pardo_status *st);

/* Fills nbytes of device memory with zeros. */
int pardo_device_memset_zero(void *dst, size_t nbytes, pardo_status *st);

/* Streams: created non-blocking; destroyed by pardo_device_stream_destroy. */
int pardo_device_stream_create(pardo_stream *out, pardo_status *st);
int pardo_device_stream_sync(pardo_stream s, pardo_status *st);
void pardo_device_stream_destroy(pardo_stream s);

/* Waits for all work on the current device. */
int pardo_device_sync(pardo_status *st);

#endif
