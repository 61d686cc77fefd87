/* check_device_stream.c - device.h's streams and events, the pinned host cache (core/host_cache.h) and the feed
 * stage on a device (train/feed_stage.h). Where a CUDA device exists (a GPU, or the host stand-in of make
 * gpu-mock-test) they check what holds on both: a copy read after its event was waited for has arrived, a
 * pinned block is reused only once the copy from it has run, no pinned allocation after the first batch, the
 * feed copy selects the stage's device on its pool thread. On the stand-in, whose streams run queued copies only
 * when something waits for them (tests/gpu_mock/host_device.c), they also check that the work was pending until
 * then. Elsewhere each test says that it skipped. */
#include <cJSON.h>
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "mlp_test_util.h"
#include "test_util.h"
#include "core/device.h"
#include "core/host_cache.h"
#include "core/synced_mem.h"
#include "trace/trace.h"
#include "train/feed_stage.h"

/* Defined by the host stand-in only (tests/gpu_mock/host_device.c): NULL in a build with the real device. */
bool pardo_gpu_mock(void) __attribute__((weak));

static bool mock(void) { return pardo_gpu_mock && pardo_gpu_mock(); }

static bool have_gpu(const char *test) {
    if (pardo_device_count() > 0) return true;
    printf("device_stream: %s: skipped the GPU part (no CUDA device%s)\n", test,
           pardo_device_compiled() ? "" : "; built without CUDA");
    return false;
}

/* n bytes of device memory read back through the compute stream (ordered after what it waited for). */
static void read_back(void *host, const void *dev, size_t n) {
    pardo_status st;
    ck_assert_msg(pardo_device_copy_d2h(host, dev, n, &st) == PARDO_OK, "%s", st.msg);
}

static void *stream_of_thread(void *arg) {
    pardo_stream *out = arg;
    pardo_status st;
    if (pardo_device_compute_stream(0, &out[0], &st) != PARDO_OK) out[0] = NULL;
    if (pardo_device_copy_stream(0, &out[1], &st) != PARDO_OK) out[1] = NULL;
    return NULL;
}

/* One compute and one copy stream per device, the same for every thread, neither the legacy default (NULL). */
START_TEST(streams_per_device) {
    pardo_status st;
    if (!have_gpu("streams_per_device")) return;
    ck_assert_int_eq(pardo_device_set(0, &st), PARDO_OK);
    pardo_stream theirs[4][2];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, stream_of_thread, theirs[i]), 0);
    pardo_stream compute = NULL, copy = NULL;
    ck_assert_msg(pardo_device_compute_stream(0, &compute, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_device_copy_stream(0, &copy, &st) == PARDO_OK, "%s", st.msg);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    ck_assert_ptr_nonnull(compute);
    ck_assert_ptr_nonnull(copy);
    ck_assert_ptr_ne(compute, copy);
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_eq(theirs[i][0], compute);
        ck_assert_ptr_eq(theirs[i][1], copy);
    }
    ck_assert_ptr_eq(pardo_device_stream_current(), compute);
    int dev = -1;
    ck_assert_int_eq(pardo_device_get(&dev, &st), PARDO_OK);
    ck_assert_int_eq(dev, 0);
}
END_TEST

/* A copy queued on the copy stream is seen by the compute stream once it waited for the copy's event. */
START_TEST(event_orders_streams) {
    pardo_status st;
    if (!have_gpu("event_orders_streams")) return;
    enum { N = 4096 };
    unsigned char *pin = NULL, back[N];
    void *dev = NULL;
    pardo_stream copy = NULL;
    pardo_event ev = NULL;
    ck_assert_int_eq(pardo_device_malloc_host((void **)&pin, N, &st), PARDO_OK);
    ck_assert_int_eq(pardo_device_malloc(&dev, N, &st), PARDO_OK);
    ck_assert_int_eq(pardo_device_memset_zero(dev, N, &st), PARDO_OK);
    ck_assert_int_eq(pardo_device_stream_sync(NULL, &st), PARDO_OK); /* the zeros before the copy stream's copy */
    ck_assert_int_eq(pardo_device_copy_stream(0, &copy, &st), PARDO_OK);
    ck_assert_int_eq(pardo_device_event_create(&ev, &st), PARDO_OK);
    bool done = false;
    ck_assert_int_eq(pardo_device_event_query(ev, &done, &st), PARDO_OK);
    ck_assert(done); /* never recorded */
    memset(pin, 7, N);
    ck_assert_int_eq(pardo_device_copy_h2d_async(dev, pin, N, copy, &st), PARDO_OK);
    ck_assert_int_eq(pardo_device_event_record(ev, copy, &st), PARDO_OK);
    if (mock()) { /* the stand-in's copy stream has not run it: nothing waited yet */
        ck_assert_int_eq(pardo_device_event_query(ev, &done, &st), PARDO_OK);
        ck_assert(!done);
        read_back(back, dev, N);
        ck_assert_int_eq(back[N - 1], 0);
    }
    ck_assert_int_eq(pardo_device_stream_wait_event(NULL, ev, &st), PARDO_OK);
    read_back(back, dev, N);
    ck_assert_int_eq(back[0], 7);
    ck_assert_int_eq(back[N - 1], 7);
    ck_assert_int_eq(pardo_device_event_sync(ev, &st), PARDO_OK);
    ck_assert_int_eq(pardo_device_event_query(ev, &done, &st), PARDO_OK);
    ck_assert(done);
    pardo_device_event_destroy(ev);
    pardo_device_free(dev);
    pardo_device_free_host(pin);
}
END_TEST

/* A pinned block given back after a copy from it serves the next request of its class only after the copy ran:
 * the copy still reads what was written before the block was reused. */
START_TEST(host_cache_reuse_after_event) {
    pardo_status st;
    if (!have_gpu("host_cache_reuse_after_event")) return;
    pardo_host_cache_trim();
    pardo_host_cache_stats a, b;
    pardo_host_cache_get_stats(&a);
    enum { N = 1000 };
    unsigned char back[N];
    void *dev = NULL;
    pardo_stream copy = NULL;
    ck_assert_int_eq(pardo_device_malloc(&dev, N, &st), PARDO_OK);
    ck_assert_int_eq(pardo_device_copy_stream(0, &copy, &st), PARDO_OK);
    unsigned char *p = NULL, *q = NULL, *r = NULL, *other = NULL;
    ck_assert_msg(pardo_host_cache_alloc((void **)&p, N, &st) == PARDO_OK, "%s", st.msg);
    memset(p, 7, N);
    ck_assert_int_eq(pardo_device_copy_h2d_async(dev, p, N, copy, &st), PARDO_OK);
    ck_assert_int_eq(pardo_host_cache_release(p, copy, &st), PARDO_OK);
    pardo_host_cache_get_stats(&b);
    ck_assert_uint_eq(b.raw_allocs, a.raw_allocs + 1);
    if (mock()) ck_assert_uint_eq(b.blocks_pending, 1);
    ck_assert_msg(pardo_host_cache_alloc((void **)&other, 3000, &st) == PARDO_OK, "%s", st.msg); /* another class */
    ck_assert_ptr_ne(other, p);
    ck_assert_msg(pardo_host_cache_alloc((void **)&q, 700, &st) == PARDO_OK, "%s", st.msg); /* p's class: 1024 */
    ck_assert_ptr_eq(q, p);
    memset(q, 9, N); /* the copy from p must have run by now */
    ck_assert_int_eq(pardo_device_stream_sync(copy, &st), PARDO_OK);
    read_back(back, dev, N);
    ck_assert_int_eq(back[0], 7);
    ck_assert_int_eq(back[N - 1], 7);
    pardo_host_cache_get_stats(&b);
    ck_assert_uint_eq(b.raw_allocs, a.raw_allocs + 2);
    ck_assert_uint_eq(b.cache_hits, a.cache_hits + 1);
    if (mock()) ck_assert_uint_eq(b.reuse_waits, a.reuse_waits + 1); /* its event was pending: waited for */
    /* given back with nothing queued after the last sync: complete at once, reused without waiting (the
     * stand-in's idle stream; a GPU's completes as soon as it is seen) */
    ck_assert_int_eq(pardo_host_cache_release(q, copy, &st), PARDO_OK);
    ck_assert_int_eq(pardo_device_stream_sync(copy, &st), PARDO_OK);
    ck_assert_msg(pardo_host_cache_alloc((void **)&r, N, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_ptr_eq(r, p);
    pardo_host_cache_stats c;
    pardo_host_cache_get_stats(&c);
    ck_assert_uint_eq(c.reuse_waits, b.reuse_waits);
    ck_assert_uint_eq(c.raw_allocs, b.raw_allocs);
    ck_assert_int_eq(pardo_host_cache_release(r, NULL, &st), PARDO_OK);
    ck_assert_int_eq(pardo_host_cache_release(other, NULL, &st), PARDO_OK);
    pardo_host_cache_trim();
    pardo_host_cache_get_stats(&c);
    ck_assert_uint_eq(c.raw_frees, c.raw_allocs);
    ck_assert_uint_eq(c.bytes_held, 0);
    ck_assert_uint_eq(c.blocks_pending, 0);
    ck_assert_uint_eq(c.blocks_cached, 0);
    pardo_device_free(dev);
}
END_TEST

/* The feed stage on device `dev` over two "epochs" of batches of two tensors (float32 [rows, 3], int64 [rows])
 * whose values follow the batch index, each epoch's last batch short: each taken set holds its batch, on the
 * device (HEAD_AT_GPU, memory of `dev`); after the first two batches (one per set) and the first short one, no
 * pinned allocation; in the second epoch no new feed tensor (the full and short ones take turns). */
static void run_feed_stage(int dev) {
    pardo_status st;
    enum { EPOCH = 6, BATCHES = 2 * EPOCH, ROWS = 5 };
    pardo_tensor *src[BATCHES][2];
    pardo_batch batch[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        const int64_t rows = k % EPOCH == EPOCH - 1 ? 2 : ROWS; /* a short last batch: other tensors */
        const int64_t xs[2] = {rows, 3};
        src[k][0] = pardo_tensor_new_cpu(PARDO_F32, 2, xs, &st);
        src[k][1] = pardo_tensor_new_cpu(PARDO_I64, 1, xs, &st);
        ck_assert_ptr_nonnull(src[k][0]);
        ck_assert_ptr_nonnull(src[k][1]);
        float *x = pardo_tensor_mutable_cpu(src[k][0], &st);
        int64_t *y = pardo_tensor_mutable_cpu(src[k][1], &st);
        for (int64_t i = 0; i < rows * 3; i++) x[i] = (float)(100 * k + i);
        for (int64_t i = 0; i < rows; i++) y[i] = 1000 * k + i;
        batch[k] = (pardo_batch){.epoch = k / EPOCH, .index = k % EPOCH, .rows = rows, .tensors = src[k]};
    }
    /* this thread stays on device 0: the copy selects the stage's device itself, on whichever thread the engine
     * runs it (a pool thread, or this one when its wait helps) */
    ck_assert_int_eq(pardo_device_set(0, &st), PARDO_OK);
    pardo_stream compute = NULL;
    ck_assert_int_eq(pardo_device_compute_stream(dev, &compute, &st), PARDO_OK);
    pardo_feed_stage *s = NULL;
    ck_assert_msg(pardo_feed_stage_new(2, dev, &s, &st) == PARDO_OK, "%s", st.msg);
    pardo_host_cache_stats warm = {0}, now;
    uint64_t first_epoch[EPOCH * 2]; /* the feed tensors' records (a version's high half is unique to its record) */
    int n_first = 0;
    ck_assert_msg(pardo_feed_stage_push(s, &batch[0], &st) == PARDO_OK, "%s", st.msg);
    for (int k = 0; k < BATCHES; k++) {
        pardo_tensor *const *feeds = NULL;
        ck_assert_msg(pardo_feed_stage_take(s, &feeds, &st) == PARDO_OK, "batch %d: %s", k, st.msg);
        if (k + 1 < BATCHES) ck_assert_msg(pardo_feed_stage_push(s, &batch[k + 1], &st) == PARDO_OK, "%s", st.msg);
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(feeds[i]->mem->head, PARDO_MEM_HEAD_AT_GPU);
            ck_assert_int_eq(feeds[i]->mem->device, dev); /* allocated by the pool thread, on the stage's device */
            ck_assert(pardo_shape_equal(feeds[i]->ndim, feeds[i]->shape, src[k][i]->ndim, src[k][i]->shape));
        }
        /* read once the stage's compute stream, which waited for the set's event at the take, has run to here */
        ck_assert_int_eq(pardo_device_stream_sync(compute, &st), PARDO_OK);
        float x[ROWS * 3];
        int64_t y[ROWS];
        read_back(x, feeds[0]->mem->gpu_ptr, feeds[0]->nbytes);
        read_back(y, feeds[1]->mem->gpu_ptr, feeds[1]->nbytes);
        for (int64_t i = 0; i < batch[k].rows * 3; i++) ck_assert(x[i] == (float)(100 * k + i));
        for (int64_t i = 0; i < batch[k].rows; i++) ck_assert_int_eq(y[i], 1000 * k + i);
        if (k == 1) pardo_host_cache_get_stats(&warm);
        for (int i = 0; i < 2; i++) {
            bool seen = false;
            const uint64_t record = feeds[i]->mem->version >> 32;
            for (int j = 0; j < n_first; j++) seen |= first_epoch[j] == record;
            if (k < EPOCH && !seen) first_epoch[n_first++] = record;
            ck_assert_msg(k < EPOCH || seen, "batch %d: a new feed tensor in the second epoch", k);
        }
    }
    pardo_host_cache_get_stats(&now);
    ck_assert_uint_gt(warm.raw_allocs, 0);
    ck_assert_uint_le(now.raw_allocs, warm.raw_allocs + 2); /* the short batch's two classes, at most */
    ck_assert_uint_ge(now.cache_hits, warm.cache_hits + 2 * (BATCHES - 3));
    ck_assert_uint_le(now.events_made, warm.events_made + 2);
    pardo_feed_stage_free(s);
    pardo_host_cache_get_stats(&now);
    ck_assert_uint_eq(now.raw_frees, now.raw_allocs); /* the stage's free trimmed the cache */
    for (int k = 0; k < BATCHES; k++) {
        pardo_tensor_release(src[k][0]);
        pardo_tensor_release(src[k][1]);
    }
}

START_TEST(feed_stage_device0) {
    if (!have_gpu("feed_stage_device0")) return;
    run_feed_stage(0);
}
END_TEST

/* --device cuda:K with K > 0: the copy's pool thread (on device 0 until it selects one) puts the feeds on K.
 * The stand-in gets two devices for it; a machine with one GPU skips. */
START_TEST(feed_stage_device1) {
    if (!have_gpu("feed_stage_device1")) return;
    if (mock()) setenv("PARDO_MOCK_DEVICE_COUNT", "2", 1);
    if (pardo_device_count() < 2) {
        printf("device_stream: feed_stage_device1: skipped (one CUDA device)\n");
        return;
    }
    run_feed_stage(1);
    unsetenv("PARDO_MOCK_DEVICE_COUNT");
}
END_TEST

/* A thread that runs a GPU executor's ops (a stage's chains on pool threads, src/exec/stage_run.c; a caller's
 * thread other than the one that made the executor) selects its device first: here an executor of cuda:1 at 2
 * threads, a graph in parts, run from a new thread (on device 0 until it selects one): the params end where the
 * CPU's do, and every tensor of block 0 with device memory has it on device 1 (the device current on the thread
 * that allocated it; SyncedMemory records it). */
typedef struct run_arg {
    pardo_executor *ex;
    int steps;
} run_arg;

static void *run_steps_thread(void *arg) {
    run_arg *a = arg;
    test_run_steps(a->ex, a->steps);
    return NULL;
}

START_TEST(ops_run_on_the_executor_device) {
    if (!have_gpu("ops_run_on_the_executor_device")) return;
    if (mock()) setenv("PARDO_MOCK_DEVICE_COUNT", "2", 1);
    if (pardo_device_count() < 2) {
        printf("device_stream: ops_run_on_the_executor_device: skipped (one CUDA device)\n");
        return;
    }
    pardo_program *p = test_training_program(test_mlp_text, "mlp.json", "loss", PARDO_OPTIMIZER_MOMENTUM, 0.1, 2);
    const int64_t xs[2] = {8, 6}, ys[1] = {8};
    test_rng r = {99u};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1);
    pardo_tensor *y = test_tensor_random(&r, PARDO_I64, 1, ys, 0, 3);
    const char *names[2] = {"x", "y"};
    pardo_tensor *feeds[2] = {x, y};
    pardo_exec_options go = {.nthreads = 2, .device = PARDO_DEVICE_CUDA, .device_index = 1}, co = {.nthreads = 2};
    pardo_executor *gpu = test_executor_with(p, go, 2, names, feeds), *cpu = test_executor_with(p, co, 2, names, feeds);
    pardo_status st;
    ck_assert_int_eq(pardo_device_set(0, &st), PARDO_OK); /* this thread too: nothing but the ops may select 1 */
    run_arg a = {gpu, 4};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run_steps_thread, &a), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    test_run_steps(cpu, 4);
    static const char *const params[] = {"w1", "b1", "w2"};
    for (int i = 0; i < 3; i++) {
        pardo_tensor *g = test_fetched_copy(gpu, params[i]), *c = test_fetched_copy(cpu, params[i]);
        test_assert_close(g, c, 1e-9, 1e-12);
        pardo_tensor_release(g);
        pardo_tensor_release(c);
    }
    const pardo_block *b0 = &p->blocks[0];
    int on_device = 0;
    for (int i = 0; i < b0->n_vars; i++) {
        const pardo_tensor *t = pardo_executor_fetch(gpu, b0->vars[i].name);
        if (!t || t->is_array || !t->mem || !t->mem->gpu_ptr) continue;
        ck_assert_msg(t->mem->device == 1, "'%s' is on device %d", b0->vars[i].name, t->mem->device);
        on_device++;
    }
    ck_assert_int_gt(on_device, 6);
    pardo_executor_free(gpu);
    pardo_executor_free(cpu);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
    pardo_program_free(p);
    unsetenv("PARDO_MOCK_DEVICE_COUNT");
}
END_TEST

/* The feed copy's host-to-device copies are "copy" events (cat "memory"), async, with their bytes. */
START_TEST(feed_copies_are_traced) {
    pardo_status st;
    if (!have_gpu("feed_copies_are_traced")) return;
    const int64_t shape[1] = {250};
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_F32, 1, shape, &st);
    ck_assert_ptr_nonnull(t);
    pardo_tensor *const tensors[1] = {t};
    pardo_batch b = {.rows = 250, .tensors = tensors};
    ck_assert_int_eq(pardo_device_set(0, &st), PARDO_OK);
    pardo_feed_stage *s = NULL;
    ck_assert_msg(pardo_feed_stage_new(1, 0, &s, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_trace_start(&st) == PARDO_OK, "%s", st.msg);
    pardo_tensor *const *feeds = NULL;
    ck_assert_int_eq(pardo_feed_stage_push(s, &b, &st), PARDO_OK);
    ck_assert_msg(pardo_feed_stage_take(s, &feeds, &st) == PARDO_OK, "%s", st.msg);
    pardo_trace_stop();
    pardo_feed_stage_free(s);
    char *text = NULL;
    size_t len = 0;
    ck_assert_msg(pardo_trace_json(NULL, &text, &len, &st) == PARDO_OK, "%s", st.msg);
    cJSON *doc = cJSON_Parse(text);
    ck_assert_ptr_nonnull(doc);
    int copies = 0, feed_copies = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents")) {
        const cJSON *name = cJSON_GetObjectItem(e, "name");
        if (!cJSON_IsString(name)) continue;
        if (strcmp(name->valuestring, "feed_copy") == 0) feed_copies++;
        if (strcmp(name->valuestring, "copy") != 0) continue;
        ck_assert_str_eq(cJSON_GetObjectItem(e, "cat")->valuestring, "memory");
        const cJSON *args = cJSON_GetObjectItem(e, "args");
        ck_assert_str_eq(cJSON_GetObjectItem(args, "direction")->valuestring, "h2d");
        ck_assert_double_eq(cJSON_GetObjectItem(args, "bytes")->valuedouble, 1000);
        ck_assert_double_eq(cJSON_GetObjectItem(args, "async")->valuedouble, 1);
        copies++;
    }
    ck_assert_int_eq(copies, 1);
    ck_assert_int_eq(feed_copies, 1);
    cJSON_Delete(doc);
    free(text);
    pardo_trace_reset();
    pardo_tensor_release(t);
}
END_TEST

START_TEST(streams_bad_device) {
    pardo_status st;
    pardo_stream s = (pardo_stream)&st;
    if (!have_gpu("streams_bad_device")) {
        ck_assert_int_ne(pardo_device_compute_stream(0, &s, &st), PARDO_OK);
        ck_assert_ptr_null(s);
        return;
    }
    ck_assert_int_eq(pardo_device_compute_stream(-1, &s, &st), PARDO_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(pardo_device_copy_stream(pardo_device_count(), &s, &st), PARDO_EINVAL);
    ck_assert_ptr_null(s);
}
END_TEST

/* A stage for a device that does not exist: the copy's pool thread cannot select it, and the take says why. */
START_TEST(feed_stage_bad_device) {
    pardo_status st;
    if (!have_gpu("feed_stage_bad_device")) return;
    const int64_t shape[1] = {4};
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_F32, 1, shape, &st);
    pardo_tensor *const tensors[1] = {t};
    pardo_batch b = {.rows = 4, .tensors = tensors};
    pardo_feed_stage *s = NULL;
    ck_assert_msg(pardo_feed_stage_new(1, pardo_device_count(), &s, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(pardo_feed_stage_push(s, &b, &st), PARDO_OK);
    pardo_tensor *const *feeds = (pardo_tensor *const *)&st;
    ck_assert_int_ne(pardo_feed_stage_take(s, &feeds, &st), PARDO_OK);
    ck_assert_ptr_null(feeds);
    pardo_feed_stage_free(s);
    pardo_tensor_release(t);
}
END_TEST

Suite *make_device_stream_suite(void) {
    Suite *s = suite_create("device_stream");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, streams_per_device);
    tcase_add_test(tc, event_orders_streams);
    tcase_add_test(tc, host_cache_reuse_after_event);
    tcase_add_test(tc, feed_stage_device0);
    tcase_add_test(tc, feed_stage_device1);
    tcase_add_test(tc, feed_copies_are_traced);
    tcase_add_test(tc, ops_run_on_the_executor_device);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, streams_bad_device);
    tcase_add_test(te, feed_stage_bad_device);
    suite_add_tcase(s, te);
    return s;
}
