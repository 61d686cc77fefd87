/* synced_mem.h - Caffe's SyncedMemory: one buffer with a host copy and a
 * device copy, kept in step lazily. The head says where the newest data is.
 * Read accessors sync and return const; mutable accessors sync and move the
 * head. Not thread-safe: one owner thread at a time (kernels of one op). */
#ifndef PARDO_SYNCED_MEM_H
#define PARDO_SYNCED_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/status.h"

typedef enum pardo_mem_head {
    PARDO_MEM_UNINITIALIZED = 0,
    PARDO_MEM_HEAD_AT_CPU,
    PARDO_MEM_HEAD_AT_GPU,
    PARDO_MEM_SYNCED,
} pardo_mem_head;

/* How the host buffer was obtained, so it is freed the same way (Caffe issue
 * 3053 came from freeing by the current mode instead). */
typedef enum pardo_host_alloc {
    PARDO_HOST_NONE = 0, /* no host buffer */
    PARDO_HOST_ALIGNED,  /* posix_memalign, freed with free */
    PARDO_HOST_PINNED,   /* cudaMallocHost, freed with cudaFreeHost */
    PARDO_HOST_BORROWED, /* set_cpu_data: the caller keeps ownership */
} pardo_host_alloc;

typedef struct pardo_synced_mem {
    size_t nbytes;              // bytes of the buffer
    void *cpu_ptr;              // host copy or NULL
    void *gpu_ptr;              // device copy or NULL
    pardo_host_alloc host_kind; // how cpu_ptr was obtained
    bool own_gpu;               // gpu_ptr allocated here
    int device;                 // device index of gpu_ptr: the allocating thread's current device
    pardo_mem_head head;
    uint64_t version; // changes with every mutable access (and set_cpu_data); unique to this record, so a
                      // reader that keeps something made from the data (a packed matrix) can tell it is current
} pardo_synced_mem;

/* Host buffers are aligned to this many bytes. */
#define PARDO_HOST_ALIGN 64

/* Allocates a synced memory record of nbytes, head UNINITIALIZED, no buffer
 * yet. Returns NULL on allocation failure. Caller frees with
 * pardo_synced_mem_free. */
pardo_synced_mem *pardo_synced_mem_new(size_t nbytes);

/* Frees the record and the buffers it owns (each the way it was allocated);
 * borrowed host memory is left alone. NULL is a no-op. */
void pardo_synced_mem_free(pardo_synced_mem *m);

/* Newest data on the host, read-only: copies from the device when the head is
 * there (head becomes SYNCED), allocates zeroed memory when UNINITIALIZED
 * (head becomes HEAD_AT_CPU). Returns NULL and fills st on failure. */
const void *pardo_synced_mem_cpu_data(pardo_synced_mem *m, pardo_status *st);

/* As cpu_data, then moves the head to HEAD_AT_CPU (the device copy is stale). */
void *pardo_synced_mem_mutable_cpu_data(pardo_synced_mem *m, pardo_status *st);

/* Newest data on the device, read-only: copies from the host when the head is
 * there (head becomes SYNCED). Fails with PARDO_ENOTSUP without a device. */
const void *pardo_synced_mem_gpu_data(pardo_synced_mem *m, pardo_status *st);

/* As gpu_data, then moves the head to HEAD_AT_GPU. */
void *pardo_synced_mem_mutable_gpu_data(pardo_synced_mem *m, pardo_status *st);

/* Points the host copy at caller memory of at least nbytes, which stays the
 * caller's (borrowed, never freed here) and must outlive m or the next
 * set_cpu_data. Frees an owned host buffer first. Head becomes HEAD_AT_CPU. */
void pardo_synced_mem_set_cpu_data(pardo_synced_mem *m, void *data);

/* Starts an asynchronous copy of the host data to the device on `stream`
 * (head must be HEAD_AT_CPU); head becomes SYNCED. The caller synchronises
 * the stream before reading gpu data from another stream. */
int pardo_synced_mem_async_gpu_push(pardo_synced_mem *m, pardo_stream stream, pardo_status *st);

/* Starts an asynchronous copy of nbytes at src (pinned host memory that is not m's: a staging block of
 * core/host_cache.h) into m's device copy on `stream`, allocating that on the calling thread's current device
 * (for the compute stream, whose work may reuse it once m is freed) if m has none; the head becomes HEAD_AT_GPU
 * (a host copy, if any, is stale) whatever it was. src must stay unchanged until the copy has run, and work on
 * other streams that reads m's device copy waits for it first (an event recorded on `stream` after this call);
 * pardo_synced_mem_gpu_data does not wait. Told to the copy observer as an async "h2d". Fails with
 * PARDO_ENOTSUP without a device; on failure the head is unchanged. */
int pardo_synced_mem_async_gpu_push_from(pardo_synced_mem *m, const void *src, pardo_stream stream, pardo_status *st);

/* Told of each copy SyncedMemory makes between host and device: direction "h2d" or "d2h" (static strings),
 * nbytes, whether it was an asynchronous push (then t1_ns is when it was queued, not when it ended), and its start
 * and end on CLOCK_MONOTONIC in ns (pardo_trace_now_ns's clock). Called on the thread that made the copy, after
 * it succeeded. */
typedef void (*pardo_copy_observer)(const char *direction, size_t nbytes, bool async, int64_t t0_ns, int64_t t1_ns);

/* Sets the process's copy observer (NULL: none, the default); the trace sets it while it records (a "copy" event
 * per copy, TRACES.md). Thread-safe (an atomic pointer); a copy already under way may still call the old one. */
void pardo_synced_mem_set_copy_observer(pardo_copy_observer fn);

/* Name of a head state, for messages and tests. */
const char *pardo_mem_head_name(pardo_mem_head h);

#endif
