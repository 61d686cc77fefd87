/* device_cache.c - the caching device allocator (see device_cache.h): every block it handed out or keeps is in a
 * pointer -> block hash; free blocks also sit on the free list of their bin, one bin per (size class, stream). */
#include "core/device_cache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct block {
    void *ptr;           // device memory from pardo_device_malloc
    size_t size;         // bytes: the size class
    pardo_stream stream; // the stream it was allocated for
    bool is_free;        // on its bin's free list
    struct block *hnext; // next in the pointer hash's chain
    struct block *fnext; // next free block of the bin
} block;

typedef struct bin {
    size_t size;         // bytes: the size class
    pardo_stream stream; // the stream
    block *free_head;    // free blocks of this class and stream
    struct bin *next;    // next bin in the same bucket
} bin;

#define N_BIN_BUCKETS 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block **blocks_by_ptr; // n_ptr_buckets chains
static size_t n_ptr_buckets;
static size_t n_blocks; // in the pointer hash
static bin *bins[N_BIN_BUCKETS];
static pardo_device_cache_stats stats;

/* A fork while another thread holds the lock (Check forks each test) leaves the child a usable allocator. */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }
static void register_fork(void) { pthread_atfork(before_fork, after_fork, after_fork); }

static void lock_cache(void) {
    pthread_once(&fork_once, register_fork);
    pthread_mutex_lock(&lock);
}

static size_t hash_ptr(const void *p, size_t n_buckets) {
    uint64_t h = (uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 32) & (n_buckets - 1);
}

static size_t hash_bin(size_t size, pardo_stream stream) {
    uint64_t h =
        ((uint64_t)size ^ ((uint64_t)(uintptr_t)stream * UINT64_C(0xFF51AFD7ED558CCD))) * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 40) % N_BIN_BUCKETS;
}

size_t pardo_device_cache_round(size_t nbytes) {
    size_t n = nbytes ? nbytes : 1;
    size_t r = n <= PARDO_DEVICE_CACHE_SMALL_MAX ? PARDO_DEVICE_CACHE_SMALL_ROUND : PARDO_DEVICE_CACHE_LARGE_ROUND;
    if (n > SIZE_MAX - (r - 1)) return 0;
    return (n + r - 1) / r * r;
}

/* Doubles the pointer hash (or makes its first 256 buckets). False when out of memory (the old one stays). */
static bool grow_ptr_hash(void) {
    size_t n = n_ptr_buckets ? n_ptr_buckets * 2 : 256;
    block **b = calloc(n, sizeof(*b));
    if (!b) return false;
    for (size_t i = 0; i < n_ptr_buckets; i++)
        for (block *k = blocks_by_ptr[i], *next; k; k = next) {
            next = k->hnext;
            size_t h = hash_ptr(k->ptr, n);
            k->hnext = b[h];
            b[h] = k;
        }
    free(blocks_by_ptr);
    blocks_by_ptr = b;
    n_ptr_buckets = n;
    return true;
}

static block *find_block(const void *p) {
    if (!n_ptr_buckets) return NULL;
    for (block *k = blocks_by_ptr[hash_ptr(p, n_ptr_buckets)]; k; k = k->hnext)
        if (k->ptr == p) return k;
    return NULL;
}

static void unlink_block(block *k) {
    block **pp = &blocks_by_ptr[hash_ptr(k->ptr, n_ptr_buckets)];
    while (*pp != k) pp = &(*pp)->hnext;
    *pp = k->hnext;
    n_blocks--;
}

static bin *find_bin(size_t size, pardo_stream stream) {
    for (bin *b = bins[hash_bin(size, stream)]; b; b = b->next)
        if (b->size == size && b->stream == stream) return b;
    return NULL;
}

/* Gives every free block back to the device and frees the bins; and the pointer hash once it is empty. */
static void release_cached(void) {
    for (int i = 0; i < N_BIN_BUCKETS; i++) {
        for (bin *b = bins[i], *next; b; b = next) {
            next = b->next;
            for (block *k = b->free_head, *fnext; k; k = fnext) {
                fnext = k->fnext;
                unlink_block(k);
                pardo_device_free(k->ptr);
                stats.raw_frees++;
                stats.bytes_held -= k->size;
                stats.bytes_cached -= k->size;
                stats.blocks_cached--;
                free(k);
            }
            free(b);
        }
        bins[i] = NULL;
    }
    if (n_blocks == 0) {
        free(blocks_by_ptr);
        blocks_by_ptr = NULL;
        n_ptr_buckets = 0;
    }
}

int pardo_device_cache_alloc(void **out, size_t nbytes, pardo_stream stream, pardo_status *st) {
    *out = NULL;
    size_t size = pardo_device_cache_round(nbytes);
    if (size == 0) return pardo_errorf(st, PARDO_ENOMEM, "cannot allocate %zu bytes of device memory", nbytes);
    lock_cache();
    bin *b = find_bin(size, stream);
    if (b && b->free_head) {
        block *k = b->free_head;
        b->free_head = k->fnext;
        k->fnext = NULL;
        k->is_free = false;
        stats.cache_hits++;
        stats.bytes_cached -= size;
        stats.blocks_cached--;
        *out = k->ptr;
        pthread_mutex_unlock(&lock);
        return PARDO_OK;
    }
    int rc = PARDO_OK;
    block *k = calloc(1, sizeof(*k));
    if (!k || (n_blocks + 1 > 2 * n_ptr_buckets && !grow_ptr_hash())) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "out of host memory for the device cache's records");
        goto fail;
    }
    void *p = NULL;
    rc = pardo_device_malloc(&p, size, st);
    if (rc == PARDO_ENOMEM && stats.blocks_cached > 0) {
        /* PyTorch's retry: what the cache keeps may be what the request needs */
        release_cached();
        stats.oom_flushes++;
        if (!blocks_by_ptr && !grow_ptr_hash()) {
            rc = pardo_errorf(st, PARDO_ENOMEM, "out of host memory for the device cache's records");
            goto fail;
        }
        rc = pardo_device_malloc(&p, size, st);
    }
    if (rc != PARDO_OK) goto fail;
    k->ptr = p;
    k->size = size;
    k->stream = stream;
    size_t h = hash_ptr(p, n_ptr_buckets);
    k->hnext = blocks_by_ptr[h];
    blocks_by_ptr[h] = k;
    n_blocks++;
    stats.raw_allocs++;
    stats.bytes_held += size;
    *out = p;
    pthread_mutex_unlock(&lock);
    return PARDO_OK;
fail:
    free(k);
    pthread_mutex_unlock(&lock);
    return rc;
}

void pardo_device_cache_free(void *p) {
    if (!p) return;
    lock_cache();
    block *k = find_block(p);
    PARDO_ASSERT(k != NULL && !k->is_free);
    bin *b = find_bin(k->size, k->stream);
    if (!b && (b = calloc(1, sizeof(*b)))) {
        b->size = k->size;
        b->stream = k->stream;
        size_t h = hash_bin(k->size, k->stream);
        b->next = bins[h];
        bins[h] = b;
    }
    if (!b) { /* no bin and no memory for one: the block goes back to the device */
        unlink_block(k);
        pardo_device_free(k->ptr);
        stats.raw_frees++;
        stats.bytes_held -= k->size;
        free(k);
        pthread_mutex_unlock(&lock);
        return;
    }
    k->is_free = true;
    k->fnext = b->free_head;
    b->free_head = k;
    stats.bytes_cached += k->size;
    stats.blocks_cached++;
    pthread_mutex_unlock(&lock);
}

void pardo_device_cache_trim(void) {
    lock_cache();
    release_cached();
    pthread_mutex_unlock(&lock);
}

void pardo_device_cache_get_stats(pardo_device_cache_stats *out) {
    lock_cache();
    *out = stats;
    pthread_mutex_unlock(&lock);
}
