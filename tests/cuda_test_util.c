/* cuda_test_util.c - see cuda_test_util.h. */
#include <check.h>
#include <stdio.h>

#include "cuda_test_util.h"

void test_cuda_note_gpu(const char *suite, const char *test) {
    if (pardo_device_count() > 0) return;
    printf("%s: %s: ran the CPU side only, skipped the GPU (no CUDA device%s)\n", suite, test,
           pardo_device_compiled() ? "" : "; built without CUDA");
}

pardo_executor *test_cuda_executor(const pardo_program *p, pardo_device_kind device, bool training) {
    pardo_status st;
    pardo_exec_options opt = {.nthreads = 1, .device = device, .training = training};
    pardo_executor *ex = NULL;
    ck_assert_msg(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(pardo_executor_device(ex), device);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "%s", st.msg);
    return ex;
}

void test_shape_json(char *buf, size_t n, int nd, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < nd; d++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    snprintf(buf + k, n - k, "]");
}
