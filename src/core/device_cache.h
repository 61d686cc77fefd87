/* device_cache.h - a caching allocator for device memory, after PyTorch's CUDACachingAllocator: requests are
 * rounded up to a size class, a freed block goes back to a free list of its class and stream instead of to
 * cudaFree, and the next request of that class on that stream takes it, so a training loop's steady state calls
 * neither cudaMalloc nor cudaFree. When the raw allocator (device.h's pardo_device_malloc) is out of memory,
 * every cached free block is given back to the device and the allocation is tried once more.
 * Blocks are never split or merged: a block serves requests of its own class only.
 * Streams: a block is reused only by requests on the stream it was allocated for (NULL, the compute stream, for
 * everything SyncedMemory allocates outside async pushes of its own host copy); work queued on other streams that used the block must
 * be complete before it is freed (PyTorch's rule without record_stream). One device: blocks are not keyed by
 * device index. Every function here is thread-safe (one mutex). */
#ifndef PARDO_DEVICE_CACHE_H
#define PARDO_DEVICE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/status.h"

/* Requests up to this many bytes round up to a multiple of PARDO_DEVICE_CACHE_SMALL_ROUND; larger ones to a
 * multiple of PARDO_DEVICE_CACHE_LARGE_ROUND (PyTorch's 512 B blocks and 2 MiB buffers). */
#define PARDO_DEVICE_CACHE_SMALL_MAX ((size_t)1 << 20)   // bytes
#define PARDO_DEVICE_CACHE_SMALL_ROUND ((size_t)512)     // bytes
#define PARDO_DEVICE_CACHE_LARGE_ROUND ((size_t)2 << 20) // bytes

/* What the cache has done since the process started (counters only grow) and holds now. */
typedef struct pardo_device_cache_stats {
    uint64_t raw_allocs;  // pardo_device_malloc calls that succeeded
    uint64_t raw_frees;   // pardo_device_free calls
    uint64_t cache_hits;  // requests served by a cached free block
    uint64_t oom_flushes; // times an out-of-memory emptied the cache before a retry
    size_t bytes_held;    // bytes: of device memory allocated raw and not yet freed raw (in use + cached)
    size_t bytes_cached;  // bytes: of that, in free blocks waiting for reuse
    size_t blocks_cached; // free blocks waiting for reuse
} pardo_device_cache_stats;

/* The size class of a request of nbytes: the bytes a block serving it has (0 is served as 1 byte). Returns 0
 * when the rounding would overflow size_t. Thread-safe (pure). */
size_t pardo_device_cache_round(size_t nbytes);

/* Device memory of at least nbytes for work on `stream` (NULL: the compute stream): a cached free block of the
 * request's class and stream, else a new one from pardo_device_malloc (after emptying the cache and retrying
 * once if that is out of memory). On success *out holds it and the caller frees it with pardo_device_cache_free;
 * on failure *out is NULL, st says why and nothing is held. The memory's contents are undefined. */
int pardo_device_cache_alloc(void **out, size_t nbytes, pardo_stream stream, pardo_status *st);

/* Gives a block from pardo_device_cache_alloc back to the cache (not to the device). NULL is a no-op; a pointer
 * the cache did not hand out is a broken invariant of pardo (PARDO_ASSERT). */
void pardo_device_cache_free(void *p);

/* Gives every cached free block back to the device (pardo_device_free); blocks in use stay theirs. Called at
 * shutdown and when an executor is freed; afterwards raw_frees == raw_allocs if nothing is in use. */
void pardo_device_cache_trim(void);

/* Copies the counters into *out. */
void pardo_device_cache_get_stats(pardo_device_cache_stats *out);

#endif
