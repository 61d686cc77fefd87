/* conv_test_util.h - checks the suites of the GEMM-form convolutions of 1
 * to 3 spatial dims share (check_ops_conv_nd.c, check_ops_conv_transpose.c). */
#ifndef PARDO_CONV_TEST_UTIL_H
#define PARDO_CONV_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

/* Writes the k values of v as a JSON list ("[1, 2]") into buf (n bytes). */
void test_json_ints(char *buf, size_t n, const int64_t *v, int k);

/* One convolution op of a suite, for test_conv_blocks_threads. */
typedef struct test_conv_op {
    const char *op, *grad_op; // "conv_nd", "conv_nd_grad"
    const char *attrs;        // its attrs, JSON
    int rank;                 // of X and W
    const int64_t *xs, *ws;   // X's and W's shapes
    int64_t m;                // B's length (the output channels)
    /* the naive forward in double, as a new tensor of x's dtype (ctx: the suite's case) */
    pardo_tensor *(*ref)(const void *ctx, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b);
    const void *ctx;
} test_conv_op;

/* On random X, W, B of dtype dt (seeded by seed), with the pool at 2 threads: the forward against c->ref (rtol and
 * atol tol), its bits at 1 and 2 threads, the last image alone giving its bits in the batch, the gradients' bits at
 * 1 and 2 threads, dX and dW as the forward's adjoints (<dX, X'> = <dY, Y(X', W)>, <dW, W'> = <dY, Y(X, W')>, no
 * bias; to adj_tol relative) and dB as dY's sums (summed in double: to a float's rounding). Fails the test naming
 * case k. */
void test_conv_blocks_threads(const test_conv_op *c, pardo_dtype dt, uint64_t seed, double tol, double adj_tol, int k);

#endif
