/* loader.c - batches gathered ahead on a producer thread (see loader.h).
 *
 * Slots: capacity + 1 batches, each with tensors of batch_size rows and,
 * when the last batch of an epoch is shorter, tensors of that many rows.
 * A slot is free, being filled by the producer, queued (the `ready` FIFO)
 * or held by the consumer. The producer fills a slot only while fewer
 * than `capacity` are queued, so it is never more than capacity batches
 * ahead. Both sides wait on a pardo_wait_post, cleared under the queue
 * lock before the wait, so a post made after the state changed is never
 * lost; the producer's wait is its task's, which an interrupt wakes. */
#include "train/loader.h"

#include "trace/trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    pardo_batch batch;
    pardo_tensor **full;       // n tensors of batch_size rows; owned (one reference each)
    pardo_tensor **tail;       // n tensors of tail_rows rows, or NULL when every batch is full; owned
    unsigned char **full_data; // host data of full[i]; borrowed from the tensors
    unsigned char **tail_data; // host data of tail[i]
} slot;

struct pardo_loader {
    int n;                     // sources
    char **names;              // n, owned
    const pardo_npy_map **src; // n, borrowed
    size_t *row_bytes;         // n, bytes per row of each source
    int64_t rows;              // rows of every source
    int64_t n_batches;         // per epoch
    int64_t tail_rows;         // rows of the last batch when short (and kept), else 0
    int64_t chunk;             // positions of the epoch's order per batch index: ranks x batch_size
    int64_t left_out;          // rows of an epoch in no rank's batch (a last chunk of fewer rows than ranks)
    pardo_loader_options opt;
    const char *lane; // the producer thread's name (borrowed; NULL: opt.name)
    int n_slots;      // capacity + 1
    slot *slots;      // owned
    int64_t *order;   // rows entries: the producer's current epoch order (shuffle only; NULL in file order); owned

    pthread_mutex_t mu; // guards the queue fields below
    int *ready;         // FIFO ring of slot indexes (n_slots entries)
    int ready_head, ready_n;
    int *free_slots; // stack of free slot indexes
    int free_n;
    int high_water;         // most batches ever queued
    bool finished;          // the producer returned
    int64_t gathered;       // batches gathered since the loader was made
    pardo_wait_post space;  // posted when a slot is freed or a batch dequeued
    pardo_wait_post filled; // posted when a batch is queued or the producer ends

    pardo_task_group *group;  // the running producer's group; borrowed; NULL when none was started
    pardo_coordinator *coord; // borrowed
    int coord_id;
    bool started; // a producer was spawned and not yet joined (pardo_loader_join)
    int64_t first_epoch, first_batch, end_epoch;
};

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A uniform integer in [0, bound) by rejection (no modulo bias). */
static uint64_t uniform_below(uint64_t *state, uint64_t bound) {
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t r = splitmix64(state);
        if (r >= threshold) return r % bound;
    }
}

void pardo_loader_order(int64_t rows, bool shuffle, uint64_t seed, int64_t epoch, int64_t *order) {
    for (int64_t i = 0; i < rows; i++) order[i] = i;
    if (!shuffle) return;
    uint64_t a = seed, b = (uint64_t)epoch ^ 0x6a09e667f3bcc909ULL;
    uint64_t state = splitmix64(&a) ^ splitmix64(&b);
    for (int64_t i = rows - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)uniform_below(&state, (uint64_t)i + 1);
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static void free_tensors(pardo_tensor **t, int n) {
    for (int i = 0; t && i < n; i++) pardo_tensor_release(t[i]);
    free(t);
}

void pardo_loader_free(pardo_loader *l) {
    if (!l) return;
    if (l->started) {
        pardo_loader_stop(l);
        pardo_loader_join(l, NULL);
    }
    for (int s = 0; l->slots && s < l->n_slots; s++) {
        free_tensors(l->slots[s].full, l->n);
        free_tensors(l->slots[s].tail, l->n);
        free(l->slots[s].full_data);
        free(l->slots[s].tail_data);
    }
    free(l->slots);
    for (int i = 0; l->names && i < l->n; i++) free(l->names[i]);
    free(l->names);
    free(l->src);
    free(l->row_bytes);
    free(l->order);
    free(l->ready);
    free(l->free_slots);
    pardo_wait_post_destroy(&l->space);
    pardo_wait_post_destroy(&l->filled);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* Tensors of `rows` rows shaped like each source; their host data in data[]. */
static int make_tensors(pardo_loader *l, int64_t rows, pardo_tensor ***out, unsigned char ***data, pardo_status *st) {
    pardo_tensor **t = calloc((size_t)l->n, sizeof(*t));
    unsigned char **d = calloc((size_t)l->n, sizeof(*d));
    *out = t;
    *data = d;
    if (!t || !d) return pardo_errorf(st, PARDO_ENOMEM, "out of memory for the loader's batches");
    for (int i = 0; i < l->n; i++) {
        const pardo_npy_info *info = &l->src[i]->info;
        int64_t shape[PARDO_MAX_DIMS];
        memcpy(shape, info->shape, sizeof shape);
        shape[0] = rows;
        if (!(t[i] = pardo_tensor_new_cpu(info->dtype, info->ndim, shape, st)) ||
            !(d[i] = pardo_tensor_mutable_cpu(t[i], st)))
            return pardo_status_prefix(st, "%s: batch of %lld rows: ", l->src[i]->path, (long long)rows);
    }
    return PARDO_OK;
}

int pardo_loader_new(const pardo_loader_source *src, int n, const pardo_loader_options *opt, pardo_loader **out,
                     pardo_status *st) {
    *out = NULL;
    if (n < 1) return pardo_errorf(st, PARDO_EINVAL, "the loader needs at least one array");
    if (opt->batch_size < 1)
        return pardo_errorf(st, PARDO_EINVAL, "batch size %lld, expected 1 or more", (long long)opt->batch_size);
    for (int i = 0; i < n; i++) {
        if (src[i].data->info.ndim < 1)
            return pardo_errorf(st, PARDO_ESHAPE, "%s: a scalar; a data array needs a first dim of rows",
                                src[i].data->path);
        if (pardo_npy_map_rows(src[i].data) != pardo_npy_map_rows(src[0].data))
            return pardo_errorf(st, PARDO_ESHAPE,
                                "%s: has %lld rows, but %s has %lld (every data array needs the same first dim)",
                                src[i].data->path, (long long)pardo_npy_map_rows(src[i].data), src[0].data->path,
                                (long long)pardo_npy_map_rows(src[0].data));
    }
    if (pardo_npy_map_rows(src[0].data) == 0)
        return pardo_errorf(st, PARDO_EINVAL, "%s: has no rows", src[0].data->path);
    if (opt->ranks > 1 && (opt->rank < 0 || opt->rank >= opt->ranks))
        return pardo_errorf(st, PARDO_EINVAL, "rank %d of %d ranks", opt->rank, opt->ranks);

    pardo_loader *l = calloc(1, sizeof(*l));
    if (!l) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    pardo_wait_post_init(&l->space);
    pardo_wait_post_init(&l->filled);
    l->n = n;
    l->opt = *opt;
    if (l->opt.capacity < 1) l->opt.capacity = 2;
    l->rows = pardo_npy_map_rows(src[0].data);
    if (l->opt.ranks < 1) l->opt.ranks = 1, l->opt.rank = 0;
    const int64_t bs = l->opt.batch_size, nr = l->opt.ranks;
    l->chunk = bs * nr;
    int64_t rem = l->rows % l->chunk;
    if (rem && !l->opt.drop_last && rem < nr) l->left_out = rem; /* a rank would get no row */
    l->n_batches = l->rows / l->chunk + (rem && !l->opt.drop_last && !l->left_out);
    l->tail_rows = l->opt.drop_last || l->left_out || !rem ? 0 : (rem - l->opt.rank + nr - 1) / nr;
    if (l->tail_rows == bs) l->tail_rows = 0; /* this rank's share of the last chunk is a full batch */
    l->n_slots = l->opt.capacity + 1;
    int rc = PARDO_OK;
    if (!(l->names = calloc((size_t)n, sizeof(*l->names))) || !(l->src = calloc((size_t)n, sizeof(*l->src))) ||
        !(l->row_bytes = calloc((size_t)n, sizeof(*l->row_bytes))) ||
        (l->opt.shuffle && !(l->order = malloc((size_t)l->rows * sizeof(*l->order)))) ||
        !(l->slots = calloc((size_t)l->n_slots, sizeof(*l->slots))) ||
        !(l->ready = calloc((size_t)l->n_slots, sizeof(*l->ready))) ||
        !(l->free_slots = calloc((size_t)l->n_slots, sizeof(*l->free_slots))))
        rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int i = 0; rc == PARDO_OK && i < n; i++) {
        l->src[i] = src[i].data;
        l->row_bytes[i] = pardo_npy_map_row_bytes(src[i].data);
        if (!(l->names[i] = strdup(src[i].name))) rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    }
    for (int s = 0; rc == PARDO_OK && s < l->n_slots; s++) {
        slot *sl = &l->slots[s];
        if (l->n_batches > (l->tail_rows ? 1 : 0)) rc = make_tensors(l, bs, &sl->full, &sl->full_data, st);
        if (rc == PARDO_OK && l->tail_rows) rc = make_tensors(l, l->tail_rows, &sl->tail, &sl->tail_data, st);
        l->free_slots[l->free_n++] = s;
    }
    if (rc == PARDO_OK && l->n_batches == 0)
        rc = l->left_out ? pardo_errorf(st, PARDO_EINVAL, "%s: %lld rows are fewer than the %lld ranks: a rank would "
                                        "get none", src[0].data->path, (long long)l->rows, (long long)nr)
                         : pardo_errorf(st, PARDO_EINVAL, "%s: %lld rows make no batch of %lld with the last partial "
                                        "batch dropped", src[0].data->path, (long long)l->rows, (long long)l->chunk);
    if (rc != PARDO_OK) {
        pardo_loader_free(l);
        return rc;
    }
    *out = l;
    return PARDO_OK;
}

int64_t pardo_loader_rows(const pardo_loader *l) { return l->rows; }
int64_t pardo_loader_batches(const pardo_loader *l) { return l->n_batches; }
int64_t pardo_loader_tail_rows(const pardo_loader *l) { return l->tail_rows; }
int64_t pardo_loader_rows_left_out(const pardo_loader *l) { return l->left_out; }

pardo_tensor *const *pardo_loader_probe(pardo_loader *l, int64_t rows) {
    if (rows == l->opt.batch_size && l->slots[0].full) return l->slots[0].full;
    if (l->tail_rows && rows == l->tail_rows) return l->slots[0].tail;
    return NULL;
}

/* Copies the rows of batch b of epoch e (in l->order) into slot s. The slot's tensors are written through the
 * mutable accessor first, so a copy a GPU run made of the batch the slot held before is stale from now on (the
 * next GPU op copies it again); it fails only where that copy's newest data is on the device and cannot come
 * back. Returns PARDO_OK or that error. */
static int gather(pardo_loader *l, slot *s, int64_t e, int64_t b, pardo_status *st) {
    int64_t t0 = pardo_trace_on() ? pardo_trace_now_ns() : 0;
    const int64_t nr = l->opt.ranks, first = b * l->chunk + l->opt.rank;
    const int64_t in_chunk = l->rows - b * l->chunk < l->chunk ? l->rows - b * l->chunk : l->chunk;
    const int64_t rows = (in_chunk - l->opt.rank + nr - 1) / nr; /* positions rank, rank + nr, ... of the chunk */
    bool tail = rows != l->opt.batch_size;
    const int64_t *order = l->order ? l->order + first : NULL;
    for (int i = 0; i < l->n; i++) {
        unsigned char *dst = tail ? s->tail_data[i] : s->full_data[i];
        const void *now = pardo_tensor_mutable_cpu(tail ? s->tail[i] : s->full[i], st);
        if (!now) return st->code;
        if (now != dst)
            return pardo_errorf(st, PARDO_ERUNTIME, "%s: a batch slot's host buffer moved", l->src[i]->path);
        const unsigned char *src = l->src[i]->data;
        size_t rb = l->row_bytes[i];
        if (!l->opt.shuffle && nr == 1) {
            memcpy(dst, src + (size_t)first * rb, (size_t)rows * rb);
        } else {
            for (int64_t r = 0; r < rows; r++)
                memcpy(dst + (size_t)r * rb, src + (size_t)(order ? order[r * nr] : first + r * nr) * rb, rb);
        }
        if (l->src[i]->info.dtype == PARDO_BOOL)
            for (size_t k = 0; k < (size_t)rows * rb; k++) dst[k] = dst[k] != 0; /* as NumPy reads bools */
    }
    s->batch =
        (pardo_batch){.epoch = e, .index = b, .rows = rows, .first_row = first, .tensors = tail ? s->tail : s->full};
    if (pardo_trace_on()) {
        pardo_trace_arg args[3] = {{"epoch", NULL, (double)e}, {"batch", NULL, (double)b}, {"rows", NULL, (double)rows}};
        pardo_trace_complete(l->opt.name ? l->opt.name : "loader", "loader", t0, pardo_trace_now_ns(), args, 3);
    }
    return PARDO_OK;
}

/* The producer waits for a free slot while `capacity` batches are queued. */
static int acquire(pardo_loader *l, pardo_task *self, int *s, pardo_status *st) {
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (pardo_task_should_stop(self) || pardo_coordinator_should_stop(l->coord)) {
            pthread_mutex_unlock(&l->mu);
            return pardo_errorf(st, PARDO_ECANCELED, "the loader was stopped");
        }
        if (l->ready_n < l->opt.capacity && l->free_n > 0) break;
        pardo_wait_post_clear(&l->space);
        pthread_mutex_unlock(&l->mu);
        int rc = pardo_wait_post_wait(&l->space, self, st);
        if (rc != PARDO_OK) return rc;
        pthread_mutex_lock(&l->mu);
    }
    *s = l->free_slots[--l->free_n];
    pthread_mutex_unlock(&l->mu);
    return PARDO_OK;
}

static void give_back(pardo_loader *l, int s) {
    pthread_mutex_lock(&l->mu);
    l->free_slots[l->free_n++] = s;
    pthread_mutex_unlock(&l->mu);
    pardo_wait_post_set(&l->space);
}

static void enqueue(pardo_loader *l, int s) {
    pthread_mutex_lock(&l->mu);
    l->ready[(l->ready_head + l->ready_n) % l->n_slots] = s;
    l->ready_n++;
    if (l->ready_n > l->high_water) l->high_water = l->ready_n;
    l->gathered++;
    pthread_mutex_unlock(&l->mu);
    pardo_wait_post_set(&l->filled);
}

static int produce(pardo_task *self, void *arg, pardo_status *st) {
    pardo_loader *l = arg;
    int rc = PARDO_OK;
    for (int64_t e = l->first_epoch; rc == PARDO_OK && e < l->end_epoch; e++) {
        if (l->opt.shuffle) pardo_loader_order(l->rows, true, l->opt.seed, e, l->order);
        for (int64_t b = e == l->first_epoch ? l->first_batch : 0; b < l->n_batches; b++) {
            int s = -1;
            if ((rc = acquire(l, self, &s, st)) != PARDO_OK) break;
            if (l->opt.fail_at > 0 && pardo_loader_gathered(l) + 1 == l->opt.fail_at) {
                give_back(l, s);
                rc = pardo_errorf(st, PARDO_EIO, "%s: injected failure gathering batch %lld of epoch %lld",
                                  l->src[0]->path, (long long)b, (long long)e);
                break;
            }
            if ((rc = gather(l, &l->slots[s], e, b, st)) != PARDO_OK) {
                give_back(l, s);
                break;
            }
            enqueue(l, s);
        }
    }
    if (rc != PARDO_OK && rc != PARDO_ECANCELED) {
        pardo_status report = *st;
        pardo_status_prefix(&report, "%s: ", l->opt.name ? l->opt.name : "loader");
        pardo_coordinator_request_stop(l->coord, &report);
    }
    pthread_mutex_lock(&l->mu);
    l->finished = true;
    pthread_mutex_unlock(&l->mu);
    pardo_wait_post_set(&l->filled);
    pardo_coordinator_done(l->coord, l->coord_id); /* the last touch of the coordinator */
    return rc;
}

int pardo_loader_start(pardo_loader *l, pardo_task_group *g, pardo_coordinator *c, int64_t first_epoch,
                       int64_t first_batch, int64_t end_epoch, pardo_status *st) {
    if (l->started) return pardo_errorf(st, PARDO_EINVAL, "the loader's producer was not joined (pardo_loader_join)");
    if (first_epoch < 0 || first_epoch >= end_epoch || first_batch < 0 || first_batch >= l->n_batches)
        return pardo_errorf(
            st, PARDO_EINVAL, "no batches from batch %lld of epoch %lld to epoch %lld (%lld batches an epoch)",
            (long long)first_batch, (long long)first_epoch, (long long)end_epoch, (long long)l->n_batches);
    /* every slot free again (a stopped run may have left batches queued) */
    l->ready_head = l->ready_n = 0;
    l->free_n = 0;
    for (int s = 0; s < l->n_slots; s++) l->free_slots[l->free_n++] = s;
    l->finished = false;
    pardo_wait_post_clear(&l->space);
    pardo_wait_post_clear(&l->filled);
    l->group = g;
    l->coord = c;
    l->first_epoch = first_epoch;
    l->first_batch = first_batch;
    l->end_epoch = end_epoch;
    const char *name = l->opt.name ? l->opt.name : "loader";
    int rc = pardo_coordinator_register(c, name, &l->coord_id, st);
    if (rc != PARDO_OK) return rc;
    if ((rc = pardo_task_group_spawn(g, l->lane ? l->lane : name, PARDO_TASK_OWN_THREAD, produce, l, st)) != PARDO_OK) {
        pardo_coordinator_done(c, l->coord_id);
        return rc;
    }
    l->started = true;
    return PARDO_OK;
}

void pardo_loader_set_lane(pardo_loader *l, const char *lane) { l->lane = lane; }

int pardo_loader_next(pardo_loader *l, const pardo_batch **out, pardo_status *st) {
    *out = NULL;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->coord && pardo_coordinator_should_stop(l->coord)) {
            pthread_mutex_unlock(&l->mu);
            return pardo_errorf(st, PARDO_ECANCELED, "the run was stopped");
        }
        if (l->ready_n > 0) break;
        if (l->finished || !l->started) {
            pthread_mutex_unlock(&l->mu);
            return pardo_errorf(st, PARDO_ENOTFOUND, "the loader has no more batches");
        }
        pardo_wait_post_clear(&l->filled);
        pthread_mutex_unlock(&l->mu);
        pardo_wait_post_wait(&l->filled, NULL, st);
        pthread_mutex_lock(&l->mu);
    }
    int s = l->ready[l->ready_head];
    l->ready_head = (l->ready_head + 1) % l->n_slots;
    l->ready_n--;
    pthread_mutex_unlock(&l->mu);
    pardo_wait_post_set(&l->space);
    *out = &l->slots[s].batch;
    return PARDO_OK;
}

void pardo_loader_release(pardo_loader *l, const pardo_batch *b) {
    if (!b) return;
    give_back(l, (int)((const slot *)(const void *)b - l->slots));
}

int pardo_loader_join(pardo_loader *l, pardo_status *st) {
    if (!l->started) return PARDO_OK;
    int rc = pardo_task_group_join_all(l->group, st);
    l->started = false;
    return rc;
}

void pardo_loader_stop(pardo_loader *l) {
    if (l->started && l->group) pardo_task_group_interrupt_all(l->group);
}

int pardo_loader_queued(pardo_loader *l) {
    pthread_mutex_lock(&l->mu);
    int n = l->ready_n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

int pardo_loader_high_water(pardo_loader *l) {
    pthread_mutex_lock(&l->mu);
    int n = l->high_water;
    pthread_mutex_unlock(&l->mu);
    return n;
}

int64_t pardo_loader_gathered(pardo_loader *l) {
    pthread_mutex_lock(&l->mu);
    int64_t n = l->gathered;
    pthread_mutex_unlock(&l->mu);
    return n;
}
