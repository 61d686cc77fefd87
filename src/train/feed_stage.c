/* feed_stage.c - batches copied into alternating feed tensors by engine ops (see feed_stage.h). */
#include "train/feed_stage.h"

#include <stdlib.h>
#include <string.h>

#include "core/synced_mem.h"
#include "engine/engine.h"
#include "trace/trace.h"

#define MAX_FEEDS 64

/* One set of feed tensors and the copy that fills it. */
typedef struct feed_set {
    pardo_feed_stage *stage;
    pardo_var *var;                  // written by the copy; owned (deleted in free)
    pardo_tensor *tensors[MAX_FEEDS]; // owned, one reference each
    const pardo_batch *batch;        // the batch being copied (borrowed)
} feed_set;

struct pardo_feed_stage {
    pardo_engine *e;
    int n;
    bool to_gpu;
    feed_set sets[2];
    int next_push, next_take; // set indices, counting pushes and takes
    int in_flight;            // pushed, not taken
};

int pardo_feed_stage_new(int n, bool to_gpu, pardo_feed_stage **out, pardo_status *st) {
    *out = NULL;
    if (n < 1 || n > MAX_FEEDS) return pardo_errorf(st, PARDO_EINVAL, "feed stage: %d feeds, expected 1..%d", n, MAX_FEEDS);
    pardo_feed_stage *s = calloc(1, sizeof(*s));
    if (!s) return pardo_errorf(st, PARDO_ENOMEM, "out of memory for the feed stage");
    s->e = pardo_engine_get();
    s->n = n;
    s->to_gpu = to_gpu;
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
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s->n; i++) pardo_tensor_release(s->sets[k].tensors[i]);
    free(s);
}

/* The engine op: each of the batch's tensors into the set's tensor of its
 * dtype and shape (made anew only when those change: an epoch's short last
 * batch), then to the GPU when the stage says so. */
static int copy_batch(void *arg, pardo_status *st) {
    feed_set *set = arg;
    const pardo_feed_stage *s = set->stage;
    const pardo_batch *b = set->batch;
    int64_t t0 = pardo_trace_on() ? pardo_trace_now_ns() : 0;
    for (int i = 0; i < s->n; i++) {
        pardo_tensor *src = b->tensors[i], *dst = set->tensors[i];
        if (!dst || dst->dtype != src->dtype || !pardo_shape_equal(dst->ndim, dst->shape, src->ndim, src->shape)) {
            pardo_tensor_release(dst);
            set->tensors[i] = NULL;
            if (!(dst = pardo_tensor_new_cpu(src->dtype, src->ndim, src->shape, st))) return st->code;
            set->tensors[i] = dst;
        }
        const void *from = pardo_tensor_cpu(src, st);
        void *to = from ? pardo_tensor_mutable_cpu(dst, st) : NULL;
        if (!to) return st->code;
        memcpy(to, from, dst->nbytes);
        if (s->to_gpu && !pardo_synced_mem_gpu_data(dst->mem, st)) return st->code;
    }
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
    *tensors = set->tensors;
    return PARDO_OK;
}
