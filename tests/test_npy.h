/* test_npy.h - a minimal .npy reader for the op suites' NumPy fixtures
 * (tests/fixtures/ops/, written by tests/fixtures/make_op_fixtures.py):
 * format version 1.0, little-endian '<f4', '<f8', '<i4' or '<i8', C order.
 * Test-only: it trusts files our own script wrote and fails the test on
 * anything else. src/npy.c is pardo's real reader. */
#ifndef PARDO_TEST_NPY_H
#define PARDO_TEST_NPY_H

#include "tensor.h"

/* Loads fixture `name` (relative to test_fixture's folder) into a new CPU
 * tensor the caller releases; fails the test when it cannot. */
pardo_tensor *test_npy_load(const char *name);

#endif
