/* test_util.h - helpers shared by the Check suites: seeded random data,
 * tolerant comparisons, fixture paths and scratch folders. */
#ifndef PARDO_TEST_UTIL_H
#define PARDO_TEST_UTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

/* A small deterministic generator (splitmix64) for test data. */
typedef struct test_rng {
    uint64_t s;
} test_rng;

uint64_t test_rng_next(test_rng *r);
/* Uniform in [lo, hi). */
double test_rng_uniform(test_rng *r, double lo, double hi);

/* A new CPU tensor filled with uniform values in [lo, hi) (integers rounded
 * down for int dtypes); the caller releases it. Fails the test on error. */
pardo_tensor *test_tensor_random(test_rng *r, pardo_dtype dt, int ndim, const int64_t *shape, double lo,
                                 double hi);

/* Element i of data (dtype dt, any numeric one) as a long double: exact for
 * every integer dtype (x86's 64-bit significand holds int64 and uint64) and
 * for the floats. */
long double test_elem_ld(const void *data, pardo_dtype dt, int64_t i);

/* A new CPU tensor of numeric dtype dt whose elements are random stored
 * values spread over the dtype's range, its extremes among them (the
 * smallest and largest integers, -0 and +0, the floats' largest finite
 * magnitudes; no NaN), and some repeated, so that ties occur. */
pardo_tensor *test_tensor_spread(test_rng *r, pardo_dtype dt, int ndim, const int64_t *shape);

/* A pardo_type of dtype dt and shape (nd dims; nd -1: unknown rank). */
pardo_type test_type(pardo_dtype dt, int nd, const int64_t *shape);

/* A new CPU tensor holding `n` values given as doubles (converted). */
pardo_tensor *test_tensor_from(pardo_dtype dt, int ndim, const int64_t *shape, const double *vals);

/* Fails the test unless a and b have the same dtype and shape and every
 * element satisfies |a - b| <= atol + rtol * |b|; the message names the first
 * bad index and both values. */
void test_assert_close(const pardo_tensor *a, const pardo_tensor *b, double rtol, double atol);

/* Path of a fixture under tests/fixtures (or $PARDO_TEST_FIXTURES); static buffer. */
const char *test_fixture(const char *name);

/* Loads fixture `name` (relative to test_fixture's folder) with pardo's own
 * .npy reader into a new CPU tensor the caller releases; fails the test when
 * it cannot. */
pardo_tensor *test_npy_load(const char *name);

/* Creates a fresh scratch folder under /tmp and returns its path (static buffer
 * of the caller's choosing: writes into buf of n bytes). */
char *test_scratch_dir(char *buf, size_t n);

/* Reads the whole file at path into a new buffer (caller frees) of *n bytes;
 * fails the test on error. */
unsigned char *test_read_file(const char *path, size_t *n);

/* Entries of folder dir other than . and .. */
int test_dir_count(const char *dir);

/* Removes dir with its plain files and empty folders (one level). */
void test_dir_remove(const char *dir);

/* Writes n bytes to path; fails the test on error. */
void test_write_file(const char *path, const void *data, size_t n);

/* True once some pool thread is awake with nothing to do
 * (pardo_thread_pool_idle_awake), false after 100 ms: a tight poll, since
 * that state lasts at most a waiter's spin (2 ms). */
bool test_someone_idle_within_100ms(void);

/* Sizes the thread pool to n threads (shutting down a started pool of another size first); fails the test on
 * error. */
void test_pool_size(int n);

#endif
