/* check_synced_mem.c - every head transition of SyncedMemory. The GPU
 * transitions run only where a CUDA device exists; elsewhere they check that
 * GPU access fails cleanly, and say that they skipped. */
#include <cJSON.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "core/device.h"
#include "core/device_cache.h"
#include "core/synced_mem.h"
#include "trace/trace.h"

static bool have_gpu(const char *test) {
    if (pardo_device_count() > 0) return true;
    printf("synced_mem: %s: skipped the GPU part (no CUDA device%s)\n", test,
           pardo_device_compiled() ? "" : "; built without CUDA");
    return false;
}

START_TEST(uninitialized_to_cpu) {
    pardo_status st;
    pardo_synced_mem *m = pardo_synced_mem_new(16);
    ck_assert_int_eq(m->head, PARDO_MEM_UNINITIALIZED);
    ck_assert_ptr_null(m->cpu_ptr);
    const unsigned char *p = pardo_synced_mem_cpu_data(m, &st);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(m->head, PARDO_MEM_HEAD_AT_CPU);
    for (int i = 0; i < 16; i++) ck_assert_int_eq(p[i], 0);
    ck_assert(m->host_kind == PARDO_HOST_ALIGNED || m->host_kind == PARDO_HOST_PINNED);
    pardo_synced_mem_free(m);
}
END_TEST

START_TEST(mutable_cpu_keeps_head_at_cpu) {
    pardo_status st;
    pardo_synced_mem *m = pardo_synced_mem_new(8);
    unsigned char *p = pardo_synced_mem_mutable_cpu_data(m, &st);
    p[3] = 9;
    ck_assert_int_eq(m->head, PARDO_MEM_HEAD_AT_CPU);
    ck_assert_ptr_eq(pardo_synced_mem_cpu_data(m, &st), p);
    ck_assert_int_eq(((const unsigned char *)pardo_synced_mem_cpu_data(m, &st))[3], 9);
    pardo_synced_mem_free(m);
}
END_TEST

START_TEST(set_cpu_data_borrows) {
    pardo_status st;
    static float mine[4] = {1, 2, 3, 4};
    pardo_synced_mem *m = pardo_synced_mem_new(sizeof mine);
    pardo_synced_mem_mutable_cpu_data(m, &st); /* owned buffer first: must be freed, not leaked */
    pardo_synced_mem_set_cpu_data(m, mine);
    ck_assert_int_eq(m->head, PARDO_MEM_HEAD_AT_CPU);
    ck_assert_int_eq(m->host_kind, PARDO_HOST_BORROWED);
    ck_assert_ptr_eq(pardo_synced_mem_cpu_data(m, &st), mine);
    pardo_synced_mem_free(m); /* must not free `mine` */
    ck_assert(mine[3] == 4.0f);
}
END_TEST

START_TEST(gpu_transitions) {
    pardo_status st;
    pardo_synced_mem *m = pardo_synced_mem_new(4 * sizeof(float));
    if (!have_gpu("gpu_transitions")) {
        ck_assert_ptr_null(pardo_synced_mem_gpu_data(m, &st));
        ck_assert_int_eq(st.code, PARDO_ENOTSUP);
        ck_assert_ptr_null(pardo_synced_mem_mutable_gpu_data(m, &st));
        ck_assert_int_eq(m->head, PARDO_MEM_UNINITIALIZED);
        ck_assert_int_eq(pardo_synced_mem_async_gpu_push(m, NULL, &st), PARDO_EINVAL);
        pardo_synced_mem_mutable_cpu_data(m, &st);
        ck_assert_int_eq(pardo_synced_mem_async_gpu_push(m, NULL, &st), PARDO_ENOTSUP);
        ck_assert_int_eq(m->head, PARDO_MEM_HEAD_AT_CPU);
        pardo_synced_mem_free(m);
        return;
    }
    /* UNINITIALIZED -> HEAD_AT_GPU (zeroed) */
    ck_assert_ptr_nonnull(pardo_synced_mem_mutable_gpu_data(m, &st));
    ck_assert_int_eq(m->head, PARDO_MEM_HEAD_AT_GPU);
    /* HEAD_AT_GPU -> SYNCED on a host read */
    const float *h = pardo_synced_mem_cpu_data(m, &st);
    ck_assert_int_eq(m->head, PARDO_MEM_SYNCED);
    ck_assert(h[0] == 0.0f && h[3] == 0.0f);
    ck_assert_int_eq(m->host_kind, PARDO_HOST_PINNED);
    /* SYNCED -> HEAD_AT_CPU on a host write; -> SYNCED on a device read */
    float *w = pardo_synced_mem_mutable_cpu_data(m, &st);
    w[0] = 1.5f;
    w[3] = -2.0f;
    ck_assert_int_eq(m->head, PARDO_MEM_HEAD_AT_CPU);
    ck_assert_ptr_nonnull(pardo_synced_mem_gpu_data(m, &st));
    ck_assert_int_eq(m->head, PARDO_MEM_SYNCED);
    /* device write, then a host read sees it (round trip through the device) */
    ck_assert_ptr_nonnull(pardo_synced_mem_mutable_gpu_data(m, &st));
    ck_assert_int_eq(m->head, PARDO_MEM_HEAD_AT_GPU);
    h = pardo_synced_mem_cpu_data(m, &st);
    ck_assert(h[0] == 1.5f && h[3] == -2.0f);
    pardo_synced_mem_free(m);
}
END_TEST

START_TEST(async_push) {
    pardo_status st;
    if (!have_gpu("async_push")) return;
    pardo_synced_mem *m = pardo_synced_mem_new(1024);
    unsigned char *p = pardo_synced_mem_mutable_cpu_data(m, &st);
    memset(p, 7, 1024);
    pardo_stream s = NULL;
    ck_assert_int_eq(pardo_device_stream_create(&s, &st), PARDO_OK);
    ck_assert_int_eq(pardo_synced_mem_async_gpu_push(m, s, &st), PARDO_OK);
    ck_assert_int_eq(m->head, PARDO_MEM_SYNCED);
    ck_assert_int_eq(pardo_device_stream_sync(s, &st), PARDO_OK);
    unsigned char back[1024];
    ck_assert_int_eq(pardo_device_copy_d2h(back, pardo_synced_mem_gpu_data(m, &st), 1024, &st), PARDO_OK);
    ck_assert_int_eq(back[1023], 7);
    pardo_device_stream_destroy(s);
    pardo_synced_mem_free(m);
}
END_TEST

/* The caching device allocator (core/device_cache.h). */

START_TEST(cache_size_classes) {
    ck_assert_uint_eq(pardo_device_cache_round(0), 512);
    ck_assert_uint_eq(pardo_device_cache_round(1), 512);
    ck_assert_uint_eq(pardo_device_cache_round(512), 512);
    ck_assert_uint_eq(pardo_device_cache_round(513), 1024);
    ck_assert_uint_eq(pardo_device_cache_round((size_t)1 << 20), (size_t)1 << 20);
    ck_assert_uint_eq(pardo_device_cache_round(((size_t)1 << 20) + 1), (size_t)2 << 20);
    ck_assert_uint_eq(pardo_device_cache_round((size_t)5 << 20), (size_t)6 << 20);
    ck_assert_uint_eq(pardo_device_cache_round(SIZE_MAX), 0); /* overflow: no class */
}
END_TEST

START_TEST(cache_reuses_freed_block) {
    pardo_status st;
    if (!have_gpu("cache_reuses_freed_block")) return;
    pardo_device_cache_trim();
    pardo_device_cache_stats a, b;
    pardo_device_cache_get_stats(&a);
    void *p = NULL, *q = NULL, *r = NULL;
    ck_assert_int_eq(pardo_device_cache_alloc(&p, 1000, NULL, &st), PARDO_OK);
    pardo_device_cache_free(p);
    pardo_device_cache_get_stats(&b);
    ck_assert_uint_eq(b.raw_allocs, a.raw_allocs + 1);
    ck_assert_uint_eq(b.raw_frees, a.raw_frees); /* back to the cache, not to the device */
    ck_assert_uint_eq(b.bytes_cached, 1024);
    ck_assert_int_eq(pardo_device_cache_alloc(&q, 700, NULL, &st), PARDO_OK); /* same class: 1024 */
    ck_assert_ptr_eq(q, p);
    ck_assert_int_eq(pardo_device_cache_alloc(&r, 1500, NULL, &st), PARDO_OK); /* another class: a new block */
    ck_assert_ptr_ne(r, p);
    pardo_device_cache_get_stats(&b);
    ck_assert_uint_eq(b.cache_hits, a.cache_hits + 1);
    ck_assert_uint_eq(b.raw_allocs, a.raw_allocs + 2);
    ck_assert_uint_eq(b.bytes_held, 1024 + 1536);
    ck_assert_uint_eq(b.bytes_cached, 0);
    /* a freed block serves requests on its own stream only */
    pardo_device_cache_free(q);
    pardo_stream s = (pardo_stream)&st; /* a key, never used as a stream: the cache only compares it */
    void *other = NULL;
    ck_assert_int_eq(pardo_device_cache_alloc(&other, 1000, s, &st), PARDO_OK);
    ck_assert_ptr_ne(other, q);
    pardo_device_cache_free(other);
    pardo_device_cache_free(r);
    pardo_device_cache_trim();
}
END_TEST

/* N rounds of the same buffers through SyncedMemory: only the first round allocates from the device. */
START_TEST(cache_steady_state) {
    pardo_status st;
    if (!have_gpu("cache_steady_state")) return;
    static const size_t sizes[] = {4, 100, 4096, 100000, (size_t)3 << 20, 4096};
    enum { N = sizeof sizes / sizeof sizes[0] };
    pardo_device_cache_stats first, now;
    for (int round = 0; round < 5; round++) {
        pardo_synced_mem *m[N];
        for (int i = 0; i < N; i++) {
            m[i] = pardo_synced_mem_new(sizes[i]);
            ck_assert_ptr_nonnull(m[i]);
            ck_assert_ptr_nonnull(pardo_synced_mem_mutable_gpu_data(m[i], &st));
        }
        for (int i = 0; i < N; i++) pardo_synced_mem_free(m[i]);
        if (round == 0) pardo_device_cache_get_stats(&first);
    }
    pardo_device_cache_get_stats(&now);
    ck_assert_uint_eq(now.raw_allocs, first.raw_allocs);
    ck_assert_uint_eq(now.raw_frees, first.raw_frees);
    ck_assert_uint_eq(now.cache_hits, first.cache_hits + 4 * N);
    pardo_device_cache_trim();
    pardo_device_cache_get_stats(&now);
    ck_assert_uint_eq(now.raw_frees, now.raw_allocs);
    ck_assert_uint_eq(now.bytes_held, 0);
    ck_assert_uint_eq(now.blocks_cached, 0);
}
END_TEST

/* Past the stand-in's cap (PARDO_MOCK_DEVICE_BYTES) the device is out of memory: the cache gives its free
 * blocks back and retries. On a real GPU the cap is ignored and the allocation simply succeeds. */
START_TEST(cache_oom_retry) {
    pardo_status st;
    if (!have_gpu("cache_oom_retry")) return;
    pardo_device_cache_trim();
    pardo_device_cache_stats a, b;
    pardo_device_cache_get_stats(&a);
    void *big = NULL, *small = NULL;
    ck_assert_int_eq(pardo_device_cache_alloc(&big, (size_t)2 << 20, NULL, &st), PARDO_OK);
    pardo_device_cache_free(big);                    /* 2 MiB cached */
    setenv("PARDO_MOCK_DEVICE_BYTES", "2621440", 1); /* 2.5 MiB: 2 MiB cached + 1 MiB does not fit */
    int rc = pardo_device_cache_alloc(&small, (size_t)1 << 20, NULL, &st);
    unsetenv("PARDO_MOCK_DEVICE_BYTES");
    ck_assert_msg(rc == PARDO_OK, "%s", st.msg);
    ck_assert_ptr_nonnull(small);
    pardo_device_cache_get_stats(&b);
    if (b.oom_flushes == a.oom_flushes) {
        printf("synced_mem: cache_oom_retry: the device did not run out (not the host stand-in)\n");
    } else {
        ck_assert_uint_eq(b.oom_flushes, a.oom_flushes + 1);
        ck_assert_uint_eq(b.raw_frees, a.raw_frees + 1); /* the cached 2 MiB went back */
        ck_assert_uint_eq(b.bytes_held, (size_t)1 << 20);
    }
    pardo_device_cache_free(small);
    pardo_device_cache_trim();
    pardo_device_cache_get_stats(&b);
    ck_assert_uint_eq(b.raw_frees, b.raw_allocs);
}
END_TEST

/* Out of memory with nothing cached: ENOMEM, *out NULL, nothing held. */
START_TEST(cache_oom_fails_cleanly) {
    pardo_status st;
    if (!have_gpu("cache_oom_fails_cleanly")) return;
    pardo_device_cache_trim();
    pardo_device_cache_stats a, b;
    pardo_device_cache_get_stats(&a);
    void *p = (void *)&st;
    setenv("PARDO_MOCK_DEVICE_BYTES", "1024", 1);
    int rc = pardo_device_cache_alloc(&p, 4096, NULL, &st);
    unsetenv("PARDO_MOCK_DEVICE_BYTES");
    if (rc == PARDO_OK) { /* a real device has the memory */
        printf("synced_mem: cache_oom_fails_cleanly: the device did not run out (not the host stand-in)\n");
        pardo_device_cache_free(p);
        pardo_device_cache_trim();
        return;
    }
    ck_assert_int_eq(rc, PARDO_ENOMEM);
    ck_assert_ptr_null(p);
    pardo_device_cache_get_stats(&b);
    ck_assert_uint_eq(b.raw_allocs, a.raw_allocs);
    ck_assert_uint_eq(b.bytes_held, a.bytes_held);
    ck_assert_int_eq(pardo_device_cache_alloc(&p, SIZE_MAX, NULL, &st), PARDO_ENOMEM); /* no class */
    ck_assert_ptr_null(p);
}
END_TEST

/* Each copy between host and device is a trace event "copy" (cat "memory") with its direction and bytes. */
START_TEST(copies_are_traced) {
    pardo_status st;
    if (!have_gpu("copies_are_traced")) return;
    ck_assert_msg(pardo_trace_start(&st) == PARDO_OK, "%s", st.msg);
    pardo_synced_mem *m = pardo_synced_mem_new(1000);
    ck_assert_ptr_nonnull(pardo_synced_mem_mutable_cpu_data(m, &st));
    ck_assert_ptr_nonnull(pardo_synced_mem_gpu_data(m, &st));         /* h2d */
    ck_assert_ptr_nonnull(pardo_synced_mem_mutable_gpu_data(m, &st)); /* no copy: SYNCED */
    ck_assert_ptr_nonnull(pardo_synced_mem_cpu_data(m, &st));         /* d2h */
    ck_assert_ptr_nonnull(pardo_synced_mem_mutable_cpu_data(m, &st));
    ck_assert_int_eq(pardo_synced_mem_async_gpu_push(m, NULL, &st), PARDO_OK); /* h2d, async */
    pardo_trace_stop();
    ck_assert_ptr_nonnull(pardo_synced_mem_mutable_cpu_data(m, &st));
    ck_assert_ptr_nonnull(pardo_synced_mem_gpu_data(m, &st)); /* not recorded: the trace stopped */
    pardo_synced_mem_free(m);
    char *text = NULL;
    size_t len = 0;
    ck_assert_msg(pardo_trace_json(NULL, &text, &len, &st) == PARDO_OK, "%s", st.msg);
    cJSON *doc = cJSON_Parse(text);
    ck_assert_ptr_nonnull(doc);
    const char *want_dir[] = {"h2d", "d2h", "h2d"};
    const int want_async[] = {0, 0, 1};
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents")) {
        const cJSON *name = cJSON_GetObjectItem(e, "name"), *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, "copy") != 0) continue;
        ck_assert(cJSON_IsString(cat) && strcmp(cat->valuestring, "memory") == 0);
        ck_assert_int_lt(n, 3);
        const cJSON *args = cJSON_GetObjectItem(e, "args");
        ck_assert_str_eq(cJSON_GetObjectItem(args, "direction")->valuestring, want_dir[n]);
        ck_assert_double_eq(cJSON_GetObjectItem(args, "bytes")->valuedouble, 1000);
        ck_assert_double_eq(cJSON_GetObjectItem(args, "async")->valuedouble, want_async[n]);
        ck_assert(cJSON_GetObjectItem(e, "dur")->valuedouble >= 0);
        n++;
    }
    ck_assert_int_eq(n, 3);
    cJSON_Delete(doc);
    free(text);
    pardo_trace_reset();
}
END_TEST

START_TEST(head_names) {
    ck_assert_str_eq(pardo_mem_head_name(PARDO_MEM_UNINITIALIZED), "UNINITIALIZED");
    ck_assert_str_eq(pardo_mem_head_name(PARDO_MEM_HEAD_AT_CPU), "HEAD_AT_CPU");
    ck_assert_str_eq(pardo_mem_head_name(PARDO_MEM_HEAD_AT_GPU), "HEAD_AT_GPU");
    ck_assert_str_eq(pardo_mem_head_name(PARDO_MEM_SYNCED), "SYNCED");
}
END_TEST

Suite *make_synced_mem_suite(void) {
    Suite *s = suite_create("synced_mem");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, uninitialized_to_cpu);
    tcase_add_test(tc, mutable_cpu_keeps_head_at_cpu);
    tcase_add_test(tc, set_cpu_data_borrows);
    tcase_add_test(tc, gpu_transitions);
    tcase_add_test(tc, async_push);
    tcase_add_test(tc, head_names);
    tcase_add_test(tc, cache_size_classes);
    tcase_add_test(tc, cache_reuses_freed_block);
    tcase_add_test(tc, cache_steady_state);
    tcase_add_test(tc, cache_oom_retry);
    tcase_add_test(tc, copies_are_traced);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, cache_oom_fails_cleanly);
    suite_add_tcase(s, te);
    return s;
}
