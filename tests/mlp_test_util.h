/* mlp_test_util.h - the small MLP (x [-1, 6] -> 8 relu -> 3 classes,
 * float64) that the memory and fusion suites train, and helpers to run a
 * program and compare its results bit for bit. */
#ifndef PARDO_MLP_TEST_UTIL_H
#define PARDO_MLP_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "exec/executor.h"
#include "pass.h"

/* The MLP's graph file text (ops as TEST_MLP_OPS: matmul h, add z, relu a,
 * matmul logits, softmax_cross_entropy loss). */
extern const char test_mlp_text[];

/* The MLP with gradients and `optimizer` (lr 0.1) appended, as `pardo
 * transpile` does before its parallel rewrite; the caller frees it. */
pardo_program *test_mlp_training_with(pardo_optimizer_kind optimizer);
pardo_program *test_mlp_training(void); /* with sgd */

/* The first op of block 0 of type `type` whose output 0 is out0 (NULL: any);
 * fails the test when none. Borrowed from p. */
const pardo_op *test_find_op(const pardo_program *p, const char *type, const char *out0);

/* An executor for p made with opt, its vars initialised and the n feeds
 * bound (names[i] to feeds[i], which the caller keeps); the caller frees it. */
pardo_executor *test_executor_with(const pardo_program *p, pardo_exec_options opt, int n, const char *const *names,
                                   pardo_tensor *const *feeds);

/* Runs ex `steps` times, failing the test on an error. */
void test_run_steps(pardo_executor *ex, int steps);

/* A copy of what block 0's var `name` holds after a run (the caller
 * releases it); fails the test when it has no value. */
pardo_tensor *test_fetched_copy(pardo_executor *ex, const char *name);

/* How many times needle occurs in text. */
int test_occurrences(const char *text, const char *needle);

/* A training executor for the MLP program p keeping only the loss, its vars
 * initialised and a batch of `rows` random rows of x (labels i % 3) fed. */
pardo_executor *test_fed_mlp_executor(const pardo_program *p, int nthreads, bool release, int64_t rows);

/* Asserts that the n tensors of without[] (the ops one by one) and with[]
 * (fused) are bitwise the same, naming `what` and names[q]; releases them all. */
void test_assert_same_bits(pardo_tensor **without, pardo_tensor **with, int n, const char *const *names,
                           const char *what);

#endif
