/* synced_mem.c - host/device buffer kept in step lazily (see synced_mem.h). */
#include "core/synced_mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/device_cache.h"

/* Records made so far: the high half of a record's version, so that no two
 * records (one freed, another made at its address) share a version. */
static atomic_uint_least64_t records_made;

pardo_synced_mem *pardo_synced_mem_new(size_t nbytes) {
    pardo_synced_mem *m = calloc(1, sizeof(*m));
    if (!m) return NULL;
    m->nbytes = nbytes;
    m->head = PARDO_MEM_UNINITIALIZED;
    m->version = (uint64_t)(atomic_fetch_add_explicit(&records_made, 1, memory_order_relaxed) + 1) << 32;
    return m;
}

static void free_host(pardo_synced_mem *m) {
    switch (m->host_kind) {
    case PARDO_HOST_ALIGNED: free(m->cpu_ptr); break;
    case PARDO_HOST_PINNED: pardo_device_free_host(m->cpu_ptr); break;
    case PARDO_HOST_BORROWED:
    case PARDO_HOST_NONE: break;
    }
    m->cpu_ptr = NULL;
    m->host_kind = PARDO_HOST_NONE;
}

void pardo_synced_mem_free(pardo_synced_mem *m) {
    if (!m) return;
    free_host(m);
    if (m->own_gpu) pardo_device_cache_free(m->gpu_ptr);
    free(m);
}

/* Host memory is pinned once the process uses a device (fast async copies;
 * as Caffe pins in GPU mode), else aligned for SIMD. */
static int alloc_host(pardo_synced_mem *m, pardo_status *st) {
    size_t n = m->nbytes ? m->nbytes : 1;
    if (pardo_device_in_use()) {
        pardo_status ignored;
        if (pardo_device_malloc_host(&m->cpu_ptr, n, &ignored) == PARDO_OK) {
            m->host_kind = PARDO_HOST_PINNED;
            return PARDO_OK;
        }
    }
    size_t rounded = (n + PARDO_HOST_ALIGN - 1) / PARDO_HOST_ALIGN * PARDO_HOST_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, PARDO_HOST_ALIGN, rounded) != 0)
        return pardo_errorf(st, PARDO_ENOMEM, "cannot allocate %zu bytes of host memory", m->nbytes);
    m->cpu_ptr = p;
    m->host_kind = PARDO_HOST_ALIGNED;
    return PARDO_OK;
}

/* Device memory comes from the caching allocator (device_cache.h), for work on `stream`. */
static int alloc_gpu(pardo_synced_mem *m, pardo_stream stream, pardo_status *st) {
    int rc = pardo_device_get(&m->device, st);
    if (rc == PARDO_OK) rc = pardo_device_cache_alloc(&m->gpu_ptr, m->nbytes, stream, st);
    if (rc != PARDO_OK) return rc;
    m->own_gpu = true;
    return PARDO_OK;
}

static _Atomic(pardo_copy_observer) copy_observer;

void pardo_synced_mem_set_copy_observer(pardo_copy_observer fn) { atomic_store(&copy_observer, fn); }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The copies between host and device, each told to the copy observer when there is one; h2d's from src (the host
 * copy, or a caller's staging buffer). */
static int copy_h2d(pardo_synced_mem *m, const void *src, pardo_stream stream, bool async, pardo_status *st) {
    pardo_copy_observer obs = atomic_load_explicit(&copy_observer, memory_order_relaxed);
    int64_t t0 = obs ? now_ns() : 0;
    int rc = async ? pardo_device_copy_h2d_async(m->gpu_ptr, src, m->nbytes, stream, st)
                   : pardo_device_copy_h2d(m->gpu_ptr, src, m->nbytes, st);
    if (rc == PARDO_OK && obs) obs("h2d", m->nbytes, async, t0, now_ns());
    return rc;
}

static int copy_d2h(pardo_synced_mem *m, pardo_status *st) {
    pardo_copy_observer obs = atomic_load_explicit(&copy_observer, memory_order_relaxed);
    int64_t t0 = obs ? now_ns() : 0;
    int rc = pardo_device_copy_d2h(m->cpu_ptr, m->gpu_ptr, m->nbytes, st);
    if (rc == PARDO_OK && obs) obs("d2h", m->nbytes, false, t0, now_ns());
    return rc;
}

static int to_cpu(pardo_synced_mem *m, pardo_status *st) {
    int rc;
    switch (m->head) {
    case PARDO_MEM_UNINITIALIZED:
        if ((rc = alloc_host(m, st)) != PARDO_OK) return rc;
        memset(m->cpu_ptr, 0, m->nbytes);
        m->head = PARDO_MEM_HEAD_AT_CPU;
        return PARDO_OK;
    case PARDO_MEM_HEAD_AT_GPU:
        if (!m->cpu_ptr && (rc = alloc_host(m, st)) != PARDO_OK) return rc;
        if ((rc = copy_d2h(m, st)) != PARDO_OK) return rc;
        m->head = PARDO_MEM_SYNCED;
        return PARDO_OK;
    case PARDO_MEM_HEAD_AT_CPU:
    case PARDO_MEM_SYNCED:
        return PARDO_OK;
    }
    return PARDO_OK;
}

static int to_gpu(pardo_synced_mem *m, pardo_status *st) {
    int rc;
    if (pardo_device_count() == 0)
        return pardo_errorf(st, PARDO_ENOTSUP, "no CUDA device is available");
    switch (m->head) {
    case PARDO_MEM_UNINITIALIZED:
        if ((rc = alloc_gpu(m, NULL, st)) != PARDO_OK) return rc;
        if ((rc = pardo_device_memset_zero(m->gpu_ptr, m->nbytes, st)) != PARDO_OK) return rc;
        m->head = PARDO_MEM_HEAD_AT_GPU;
        return PARDO_OK;
    case PARDO_MEM_HEAD_AT_CPU:
        if (!m->gpu_ptr && (rc = alloc_gpu(m, NULL, st)) != PARDO_OK) return rc;
        if ((rc = copy_h2d(m, m->cpu_ptr, NULL, false, st)) != PARDO_OK) return rc;
        m->head = PARDO_MEM_SYNCED;
        return PARDO_OK;
    case PARDO_MEM_HEAD_AT_GPU:
    case PARDO_MEM_SYNCED:
        return PARDO_OK;
    }
    return PARDO_OK;
}

const void *pardo_synced_mem_cpu_data(pardo_synced_mem *m, pardo_status *st) {
    return to_cpu(m, st) == PARDO_OK ? m->cpu_ptr : NULL;
}

void *pardo_synced_mem_mutable_cpu_data(pardo_synced_mem *m, pardo_status *st) {
    if (to_cpu(m, st) != PARDO_OK) return NULL;
    m->head = PARDO_MEM_HEAD_AT_CPU;
    m->version++;
    return m->cpu_ptr;
}

const void *pardo_synced_mem_gpu_data(pardo_synced_mem *m, pardo_status *st) {
    return to_gpu(m, st) == PARDO_OK ? m->gpu_ptr : NULL;
}

void *pardo_synced_mem_mutable_gpu_data(pardo_synced_mem *m, pardo_status *st) {
    if (to_gpu(m, st) != PARDO_OK) return NULL;
    m->head = PARDO_MEM_HEAD_AT_GPU;
    m->version++;
    return m->gpu_ptr;
}

void pardo_synced_mem_set_cpu_data(pardo_synced_mem *m, void *data) {
    PARDO_ASSERT(data != NULL);
    free_host(m);
    m->cpu_ptr = data;
    m->host_kind = PARDO_HOST_BORROWED;
    m->head = PARDO_MEM_HEAD_AT_CPU;
    m->version++;
}

int pardo_synced_mem_async_gpu_push(pardo_synced_mem *m, pardo_stream stream, pardo_status *st) {
    int rc;
    if (m->head != PARDO_MEM_HEAD_AT_CPU)
        return pardo_errorf(st, PARDO_EINVAL, "async gpu push needs the head at the CPU (it is %s)",
                            pardo_mem_head_name(m->head));
    if (pardo_device_count() == 0)
        return pardo_errorf(st, PARDO_ENOTSUP, "no CUDA device is available");
    if (!m->gpu_ptr && (rc = alloc_gpu(m, stream, st)) != PARDO_OK) return rc;
    if ((rc = copy_h2d(m, m->cpu_ptr, stream, true, st)) != PARDO_OK) return rc;
    m->head = PARDO_MEM_SYNCED;
    return PARDO_OK;
}

int pardo_synced_mem_async_gpu_push_from(pardo_synced_mem *m, const void *src, pardo_stream stream, pardo_status *st) {
    int rc;
    if (pardo_device_count() == 0) return pardo_errorf(st, PARDO_ENOTSUP, "no CUDA device is available");
    if (!m->gpu_ptr && (rc = alloc_gpu(m, NULL, st)) != PARDO_OK) return rc;
    if ((rc = copy_h2d(m, src, stream, true, st)) != PARDO_OK) return rc;
    m->head = PARDO_MEM_HEAD_AT_GPU;
    m->version++;
    return PARDO_OK;
}

const char *pardo_mem_head_name(pardo_mem_head h) {
    switch (h) {
    case PARDO_MEM_UNINITIALIZED: return "UNINITIALIZED";
    case PARDO_MEM_HEAD_AT_CPU: return "HEAD_AT_CPU";
    case PARDO_MEM_HEAD_AT_GPU: return "HEAD_AT_GPU";
    case PARDO_MEM_SYNCED: return "SYNCED";
    }
    return "?";
}
