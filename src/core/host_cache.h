/* host_cache.h - a cache of pinned (page-locked) host blocks for asynchronous host-to-device copies, after
 * PyTorch's CachingHostAllocator: requests are rounded up to device_cache.h's size classes; a block given back
 * after a copy from it was queued goes back with an event recorded on the copy's stream, and serves the next
 * request of its class only once that event has completed (queried; when every block of the class is still
 * pending, the request waits for the oldest one's event: "sync at reuse"), so a block is never overwritten while
 * a copy may still read it. The steady state of a loop that copies batches of the same sizes calls neither
 * cudaMallocHost nor cudaFreeHost, and makes no events (they are pooled too). The feed stage
 * (train/feed_stage.h) stages every batch through it. Blocks are never split or merged; the blocks in use are
 * kept on a list (the cache is meant for a few feeds' blocks, not for every tensor). The pooled events are made
 * on the device current when they are needed, so a process copies through the cache to one device (where an
 * event cannot be recorded, release waits for the stream instead). Every function here is thread-safe (one
 * mutex, held while a request waits at reuse). */
#ifndef PARDO_HOST_CACHE_H
#define PARDO_HOST_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/status.h"

/* What the cache has done since the process started (counters only grow) and holds now. */
typedef struct pardo_host_cache_stats {
    uint64_t raw_allocs;   // pardo_device_malloc_host calls that succeeded (cudaMallocHost)
    uint64_t raw_frees;    // pardo_device_free_host calls
    uint64_t cache_hits;   // requests served by a cached block
    uint64_t reuse_waits;  // of those, the ones that waited for the block's event (none of its class was done)
    uint64_t events_made;  // events created for the pool
    size_t bytes_held;     // bytes: of pinned memory allocated and not yet freed (in use, pending and free)
    size_t blocks_pending; // blocks given back whose event has not been seen complete
    size_t blocks_cached;  // blocks given back and seen complete (free)
} pardo_host_cache_stats;

/* Pinned host memory of at least nbytes: a free block of the request's class (pardo_device_cache_round), else
 * the oldest pending block of the class once its event has completed (waited for if none has), else a new one
 * from pardo_device_malloc_host. On success *out holds it and the caller gives it back with
 * pardo_host_cache_release; on failure *out is NULL and st says why (PARDO_ENOMEM, PARDO_ENOTSUP without CUDA,
 * PARDO_ECUDA). Its contents are undefined. */
int pardo_host_cache_alloc(void **out, size_t nbytes, pardo_status *st);

/* Gives p (from pardo_host_cache_alloc) back once the work queued on `stream` so far (NULL: the compute stream
 * of the calling thread's device), the copies that read p, has run: records an event of the pool there, and the
 * block is pending until that event completes. On an error recording it, the stream is synchronised instead
 * (the block is then free) and the error returned. NULL is a no-op; a pointer the cache did not hand out is a
 * broken invariant of pardo (PARDO_ASSERT). */
int pardo_host_cache_release(void *p, pardo_stream stream, pardo_status *st);

/* Waits for the pending blocks' events, then gives every block not in use back (pardo_device_free_host) and
 * destroys the pooled events. Called when the feed stage is freed; blocks in use stay their holders'. */
void pardo_host_cache_trim(void);

/* Copies the counters into *out. */
void pardo_host_cache_get_stats(pardo_host_cache_stats *out);

#endif
