/* feed_stage.c - batches copied into alternating feed tensors by engine ops (see feed_stage.h). */
#include "train/feed_stage.h"

#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/host_cache.h"
#include "core/synced_mem.h"
#include "engine/engine.h"
#include "trace/trace.h"

#define MAX_FEEDS 64

/* One set of feed tensors and the copy that fills it. */
typedef struct feed_set {
    pardo_feed_stage *stage;
    pardo_var *var;                  // written by the copy; owned (deleted in free)
    pardo_tensor *tensors[MAX_FEEDS]; // owned, one reference each
    pardo_tensor *spare[MAX_FEEDS];   // owned or NULL: each feed's tensor of the shape before (an epoch's short
                                      // last batch, or the full one after it), kept to be swapped back in
    const pardo_batch *batch;        // the batch being copied (borrowed)
    pardo_event copied;              // on a GPU: recorded on the copy stream after the set's copies; owned
} feed_set;

struct pardo_feed_stage {
    pardo_engine *e;
    int n;
    int device; // the GPU the copies go to, -1: none (the CPU)
    feed_set sets[2];
    int next_push, next_take; // set indices, counting pushes and takes
    int in_flight;            // pushed, not taken
};

int pardo_feed_stage_new(int n, int device, pardo_feed_stage **out, pardo_status *st) {
    *out = NULL;
    if (n < 1 || n > MAX_FEEDS) return pardo_errorf(st, PARDO_EINVAL, "feed stage: %d feeds, expected 1..%d", n, MAX_FEEDS);
    pardo_feed_stage *s = calloc(1, sizeof(*s));
    if (!s) return pardo_errorf(st, PARDO_ENOMEM, "out of memory for the feed stage");
    s->e = pardo_engine_get();
    s->n = n;
    s->device = device < 0 ? -1 : device;
    for (int k = 0; k < 2; k++) {
        s->sets[k].stage = s;
        if (!(s->sets[k].var = pardo_engine_new_var(s->e, st))) {
            pardo_feed_stage_free(s);
            return st->code;
        }
    }
    *out = s;
    return PARDO_OK;
}

void pardo_feed_stage_free(pardo_feed_stage *s) {
    if (!s) return;
    pardo_status ignored;
    for (int k = 0; k < 2; k++) /* each after the copy pending on it; wait_all waits for both */
        if (s->sets[k].var) pardo_engine_delete_var(s->e, s->sets[k].var, &ignored);
    pardo_engine_wait_all(s->e, &ignored);
    for (int k = 0; k < 2; k++) {
        if (s->sets[k].copied) { /* a copy not taken may still be writing the set's device memory */
            (void)pardo_device_event_sync(s->sets[k].copied, &ignored);
            pardo_device_event_destroy(s->sets[k].copied);
        }
        for (int i = 0; i < s->n; i++) {
            pardo_tensor_release(s->sets[k].tensors[i]);
            pardo_tensor_release(s->sets[k].spare[i]);
        }
    }
    if (s->device >= 0) pardo_host_cache_trim();
    free(s);
}

/* On a GPU: the set's copy of one tensor's bytes, staged through a pinned block of the host cache and queued on
 * the copy stream cs; the block goes back to the cache at once, to be reused after the copy has run. */
static int copy_to_gpu(pardo_tensor *dst, const void *from, pardo_stream cs, pardo_status *st) {
    void *pin = NULL;
    if (pardo_host_cache_alloc(&pin, dst->nbytes, st) != PARDO_OK) return st->code;
    memcpy(pin, from, dst->nbytes);
    int rc = pardo_synced_mem_async_gpu_push_from(dst->mem, pin, cs, st);
    pardo_status rst;
    int rrc = pardo_host_cache_release(pin, cs, &rst);
    if (rc == PARDO_OK && rrc != PARDO_OK) {
        *st = rst;
        rc = rrc;
    }
    return rc;
}

static bool fits(const pardo_tensor *t, const pardo_tensor *src) {
    return t && t->dtype == src->dtype && pardo_shape_equal(t->ndim, t->shape, src->ndim, src->shape);
}

/* The engine op: each of the batch's tensors into the set's tensor of its dtype and shape (swapped with the spare
 * when that fits, else made anew, the old one becoming the spare: an epoch's short last batch and the full one
 * after it take turns without new tensors, so without new device or pinned host memory from the second epoch).
 * On a GPU it runs on a pool thread, which selects the stage's device first (its allocations and streams are
 * that device's), and the bytes go to the device through the copy stream (copy_to_gpu); the set's event,
 * recorded after them, is what pardo_feed_stage_take makes the compute stream wait for. The set's device memory
 * is free to overwrite: the step that read it ended (a GPU step ends with its last op's compute stream
 * synchronised) before the set was pushed again. */
static int copy_batch(void *arg, pardo_status *st) {
    feed_set *set = arg;
    const pardo_feed_stage *s = set->stage;
    const pardo_batch *b = set->batch;
    int64_t t0 = pardo_trace_on() ? pardo_trace_now_ns() : 0;
    const bool gpu = s->device >= 0;
    pardo_stream cs = NULL;
    if (gpu &&
        (pardo_device_set(s->device, st) != PARDO_OK || pardo_device_copy_stream(s->device, &cs, st) != PARDO_OK ||
         (!set->copied && pardo_device_event_create(&set->copied, st) != PARDO_OK)))
        return st->code;
    for (int i = 0; i < s->n; i++) {
        pardo_tensor *src = b->tensors[i], *dst = set->tensors[i];
        if (!fits(dst, src)) {
            if (dst || fits(set->spare[i], src)) { /* the current one becomes the spare */
                pardo_tensor *t = set->spare[i];
                set->spare[i] = dst;
                set->tensors[i] = dst = t;
            }
            if (!fits(dst, src)) {
                pardo_tensor_release(dst);
                set->tensors[i] = NULL;
                dst = gpu ? pardo_tensor_new(src->dtype, src->ndim, src->shape, st)
                          : pardo_tensor_new_cpu(src->dtype, src->ndim, src->shape, st);
                if (!dst) return st->code;
                set->tensors[i] = dst;
            }
        }
        const void *from = pardo_tensor_cpu(src, st);
        if (!from) return st->code;
        if (gpu) {
            if (copy_to_gpu(dst, from, cs, st) != PARDO_OK) return st->code;
            continue;
        }
        void *to = pardo_tensor_mutable_cpu(dst, st);
        if (!to) return st->code;
        memcpy(to, from, dst->nbytes);
    }
    if (gpu && pardo_device_event_record(set->copied, cs, st) != PARDO_OK) return st->code;
    if (pardo_trace_on()) {
        pardo_trace_arg args[3] = {
            {"epoch", NULL, (double)b->epoch}, {"batch", NULL, (double)b->index}, {"rows", NULL, (double)b->rows}};
        pardo_trace_complete("feed_copy", "loader", t0, pardo_trace_now_ns(), args, 3);
    }
    return PARDO_OK;
}

int pardo_feed_stage_push(pardo_feed_stage *s, const pardo_batch *b, pardo_status *st) {
    PARDO_ASSERT(s->in_flight < 2);
    feed_set *set = &s->sets[s->next_push];
    set->batch = b;
    if (pardo_engine_push(s->e, copy_batch, set, NULL, 0, &set->var, 1, "feed_copy", st) != PARDO_OK)
        return st->code;
    s->next_push ^= 1;
    s->in_flight++;
    return PARDO_OK;
}

int pardo_feed_stage_take(pardo_feed_stage *s, pardo_tensor *const **tensors, pardo_status *st) {
    PARDO_ASSERT(s->in_flight > 0);
    feed_set *set = &s->sets[s->next_take];
    s->next_take ^= 1;
    s->in_flight--;
    *tensors = NULL;
    if (pardo_engine_wait_to_read(s->e, set->var, st) != PARDO_OK) return st->code;
    if (s->device >= 0) { /* the step's work on the compute stream follows the set's copies */
        pardo_stream compute;
        if (pardo_device_compute_stream(s->device, &compute, st) != PARDO_OK ||
            pardo_device_stream_wait_event(compute, set->copied, st) != PARDO_OK)
            return st->code;
    }
    *tensors = set->tensors;
    return PARDO_OK;
}
