/* host_device.c - a host stand-in for src/core/device.h, for tests only (make gpu-mock-test links it into
 * build/gpu-mock/ instead of src/core/device_cuda.c; pardo itself never has it): one "device" whose memory is
 * host memory from malloc (its bytes in use capped by PARDO_MOCK_DEVICE_BYTES, below, for out-of-memory tests),
 * filled with a byte pattern as device memory holds garbage, copies as memcpy, streams
 * and synchronisation as nothing. With tests/gpu_mock/host_launch.c it runs the GPU half of pardo (the
 * executor's device path, SyncedMemory's heads, the ops/cuda/ glue, pardo train --device cuda) on a machine
 * without a GPU. Not thread-safe beyond what device.h promises. */
#include "core/device.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool pardo_device_compiled(void) { return true; }

int pardo_device_count(void) { return 1; }

void pardo_device_note_cpu_fallback(const char *why) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
        fprintf(stderr, "pardo: running on the CPU: %s\n", why);
}

static atomic_bool in_use;

bool pardo_device_in_use(void) { return atomic_load(&in_use); }

int pardo_device_set(int dev, pardo_status *st) {
    if (dev != 0)
        return pardo_errorf(st, PARDO_EINVAL, "the host stand-in has device 0 only, not %d", dev);
    atomic_store(&in_use, true);
    return PARDO_OK;
}

/* Each "device" block starts with a header holding its size, so the bytes in use can be counted against the
 * cap that PARDO_MOCK_DEVICE_BYTES sets (read at every allocation, so a test may change it): past it an
 * allocation fails with PARDO_ENOMEM as cudaMalloc's cudaErrorMemoryAllocation does (device_cache's retry). */
#define MOCK_HEADER 64 /* bytes: keeps the memory handed out 64-byte aligned as malloc's is 16 */

static atomic_size_t mock_bytes_in_use;

static size_t mock_cap(void) {
    const char *s = getenv("PARDO_MOCK_DEVICE_BYTES");
    if (!s || !*s) return SIZE_MAX;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    return end && *end == '\0' ? (size_t)v : SIZE_MAX;
}

int pardo_device_malloc(void **out, size_t nbytes, pardo_status *st) {
    size_t n = nbytes ? nbytes : 1;
    *out = NULL;
    size_t used = atomic_fetch_add(&mock_bytes_in_use, n) + n;
    if (used > mock_cap() || n > SIZE_MAX - MOCK_HEADER) {
        atomic_fetch_sub(&mock_bytes_in_use, n);
        return pardo_errorf(st, PARDO_ENOMEM, "out of device memory for %zu bytes (the stand-in's cap)", n);
    }
    unsigned char *p = NULL;
    if (posix_memalign((void **)&p, MOCK_HEADER, MOCK_HEADER + n) != 0) {
        atomic_fetch_sub(&mock_bytes_in_use, n);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory for %zu bytes of device memory", n);
    }
    memcpy(p, &n, sizeof n);
    *out = p + MOCK_HEADER;
    memset(*out, 0xA5, n); /* not zeros: what a kernel does not write stays visibly wrong */
    atomic_store(&in_use, true);
    return PARDO_OK;
}

void pardo_device_free(void *p) {
    if (!p) return;
    unsigned char *base = (unsigned char *)p - MOCK_HEADER;
    size_t n;
    memcpy(&n, base, sizeof n);
    atomic_fetch_sub(&mock_bytes_in_use, n);
    free(base);
}

int pardo_device_malloc_host(void **out, size_t nbytes, pardo_status *st) {
    size_t n = nbytes ? nbytes : 1;
    if (!(*out = malloc(n)))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory for %zu bytes of host memory", n);
    return PARDO_OK;
}

void pardo_device_free_host(void *p) { free(p); }

int pardo_device_copy_h2d(void *dst, const void *src, size_t nbytes, pardo_status *st) {
    (void)st;
    memcpy(dst, src, nbytes);
    return PARDO_OK;
}

int pardo_device_copy_d2h(void *dst, const void *src, size_t nbytes, pardo_status *st) {
    (void)st;
    memcpy(dst, src, nbytes);
    return PARDO_OK;
}

int pardo_device_copy_d2d(void *dst, const void *src, size_t nbytes, pardo_status *st) {
    (void)st;
    memcpy(dst, src, nbytes);
    return PARDO_OK;
}

int pardo_device_copy_h2d_async(void *dst, const void *src, size_t nbytes, pardo_stream stream, pardo_status *st) {
    (void)stream;
    (void)st;
    memcpy(dst, src, nbytes);
    return PARDO_OK;
}

int pardo_device_memset_zero(void *dst, size_t nbytes, pardo_status *st) {
    (void)st;
    memset(dst, 0, nbytes);
    return PARDO_OK;
}

int pardo_device_stream_create(pardo_stream *out, pardo_status *st) {
    (void)st;
    *out = NULL;
    return PARDO_OK;
}

int pardo_device_stream_sync(pardo_stream s, pardo_status *st) {
    (void)s;
    (void)st;
    return PARDO_OK;
}

void pardo_device_stream_destroy(pardo_stream s) { (void)s; }

int pardo_device_sync(pardo_status *st) {
    (void)st;
    return PARDO_OK;
}
