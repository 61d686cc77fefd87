/* check_synced_mem.c - every head transition of SyncedMemory. The GPU
 * transitions run only where a CUDA device exists; elsewhere they check that
 * GPU access fails cleanly, and say that they skipped. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/device.h"
#include "core/synced_mem.h"

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
    suite_add_tcase(s, tc);
    return s;
}
