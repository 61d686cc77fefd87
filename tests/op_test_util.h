/* op_test_util.h - runs one op outside any graph, for the op suites:
 * shape inference on the inputs' types, then the CPU kernel, then a check
 * that the outputs have the inferred dtypes and shapes. */
#ifndef PARDO_OP_TEST_UTIL_H
#define PARDO_OP_TEST_UTIL_H

#include "op.h"

/* Runs op `type` with attrs given as JSON object text (or NULL) on n_in
 * inputs (NULL entries are absent optional inputs). On PARDO_OK out[0..n_out)
 * hold new references the caller releases. On failure returns the code with
 * st filled (from inference or the kernel) and out[] all NULL. Fails the test
 * if the op is unknown or an output disagrees with inference. */
int test_run_op(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                pardo_tensor **out, pardo_status *st);

/* Inference only: fills out_types from in_types (NULL entries absent). */
int test_infer_op(const char *type, const char *attrs_json, int n_in, const pardo_type *const *in_types, int n_out,
                  pardo_type *out_types, pardo_status *st);

/* As test_run_op with training set (dropout) and the given step. */
int test_run_op_ex(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                   pardo_tensor **out, bool training, uint64_t step, pardo_status *st);

/* As test_run_op with a kernel ctx of nthreads threads (block 0's ops split
 * big tensors over the thread pool, which the caller configures). */
int test_run_op_threads(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                        pardo_tensor **out, int nthreads, pardo_status *st);

#endif
