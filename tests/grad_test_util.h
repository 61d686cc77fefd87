/* grad_test_util.h - checks an op's registered gradient against float64
 * central finite differences. The scalar checked is L = sum_j sum_i
 * w_j[i] * out_j[i] over the op's float outputs, with seeded random weights
 * w_j (they become the output gradients given to the gradient ops). */
#ifndef PARDO_GRAD_TEST_UTIL_H
#define PARDO_GRAD_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "op.h"

/* For op `type` with attrs (JSON text or NULL) on n_in inputs (float64 for
 * the ones checked; others may be any dtype; NULL = absent optional input)
 * and n_out outputs: builds its gradient ops with the op's registered
 * builder, runs them, and asserts for every element of every input whose bit
 * is set in `which` that |analytic - numeric| <= tol * max(1, |analytic|,
 * |numeric|), numeric = (L(x + eps) - L(x - eps)) / (2 eps). Inputs whose bit
 * is clear get "" as their gradient name. Fails the test with the op, input,
 * element and both values on a mismatch. */
void test_check_grad(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                     unsigned which, double eps, double tol);

/* As test_check_grad with the forward and gradient kernels run with
 * ctx->training and ctx->step set as given (dropout). */
void test_check_grad_ex(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                        unsigned which, double eps, double tol, bool training, uint64_t step);

/* The same with the usual eps 1e-6 and tol 1e-6. */
void test_check_grad_default(const char *type, const char *attrs_json, int n_in, pardo_tensor **in, int n_out,
                             unsigned which);

/* Moves every element of t (float) closer than margin to `at` out to at -
 * margin or at + margin (the side it was on), keeping finite differences
 * away from a kink at `at` (relu, abs, clip bounds). */
void test_push_away(pardo_tensor *t, double at, double margin);

#endif
