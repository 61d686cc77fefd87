/* cuda_test_util.h - what the CUDA suites (check_cuda.c, check_cuda_nn.c,
 * check_cuda_train.c) share: executors on either device and the pieces of
 * the graphs they run on both. */
#ifndef PARDO_CUDA_TEST_UTIL_H
#define PARDO_CUDA_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "exec/executor.h"

/* Prints, where no CUDA device exists, that suite's `test` ran its CPU side only. */
void test_cuda_note_gpu(const char *suite, const char *test);

/* An executor of p on one thread on `device` (asserted to be the one it runs on), training or not, its vars
 * initialised; fails the test on error. The caller frees it. */
pardo_executor *test_cuda_executor(const pardo_program *p, pardo_device_kind device, bool training);

/* shape as JSON ("[2, 3]") into buf (n bytes). */
void test_shape_json(char *buf, size_t n, int nd, const int64_t *shape);

/* A named feed of a graph (both borrowed). */
typedef struct test_named_tensor {
    const char *name;
    pardo_tensor *t;
} test_named_tensor;

#endif
