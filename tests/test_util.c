/* test_util.c - helpers for the Check suites (see test_util.h). */
#include "test_util.h"

#include "io/npy.h"
#include "exec/thread_pool.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t test_rng_next(test_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double test_rng_uniform(test_rng *r, double lo, double hi) {
    return lo + (hi - lo) * ((double)(test_rng_next(r) >> 11) * 0x1.0p-53);
}

pardo_tensor *test_tensor_random(test_rng *r, pardo_dtype dt, int ndim, const int64_t *shape, double lo,
                                 double hi) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(dt, ndim, shape, &st);
    ck_assert_msg(t != NULL, "tensor_new: %s", st.msg);
    for (int64_t i = 0; i < t->numel; i++) {
        double v = test_rng_uniform(r, lo, hi);
        pardo_tensor_set_f64(t, i, pardo_dtype_is_integer(dt) ? floor(v) : v);
    }
    return t;
}

pardo_tensor *test_tensor_from(pardo_dtype dt, int ndim, const int64_t *shape, const double *vals) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(dt, ndim, shape, &st);
    ck_assert_msg(t != NULL, "tensor_new: %s", st.msg);
    for (int64_t i = 0; i < t->numel; i++) pardo_tensor_set_f64(t, i, vals[i]);
    return t;
}

void test_assert_close(const pardo_tensor *a, const pardo_tensor *b, double rtol, double atol) {
    char sa[96], sb[96];
    ck_assert_msg(a != NULL && b != NULL, "comparing a missing tensor");
    ck_assert_msg(a->dtype == b->dtype, "dtype %s != %s", pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype));
    ck_assert_msg(pardo_shape_equal(a->ndim, a->shape, b->ndim, b->shape), "shape %s != %s",
                  pardo_shape_str(a->ndim, a->shape, sa, sizeof sa), pardo_shape_str(b->ndim, b->shape, sb, sizeof sb));
    for (int64_t i = 0; i < a->numel; i++) {
        double x = pardo_tensor_get_f64(a, i), y = pardo_tensor_get_f64(b, i);
        int ok = (isnan(x) && isnan(y)) || (x == y) || fabs(x - y) <= atol + rtol * fabs(y);
        ck_assert_msg(ok, "element %lld: got %.9g, expected %.9g (rtol %g, atol %g)", (long long)i, x, y, rtol,
                      atol);
    }
}

const char *test_fixture(const char *name) {
    static char path[1024];
    const char *dir = getenv("PARDO_TEST_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

char *test_scratch_dir(char *buf, size_t n) {
    snprintf(buf, n, "/tmp/pardo-test-XXXXXX");
    ck_assert_msg(mkdtemp(buf) != NULL, "mkdtemp failed");
    return buf;
}

void test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

pardo_tensor *test_npy_load(const char *name) {
    pardo_status st;
    pardo_tensor *t = NULL;
    ck_assert_msg(pardo_npy_read(test_fixture(name), &t, &st) == PARDO_OK, "fixture %s: %s", name, st.msg);
    return t;
}

unsigned char *test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    unsigned char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    for (;;) {
        size_t r = fread(b + len, 1, cap - len, f);
        len += r;
        if (len < cap) break;
        cap *= 2;
        b = realloc(b, cap);
        ck_assert_ptr_nonnull(b);
    }
    fclose(f);
    *n = len;
    return b;
}

int test_dir_count(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "opendir %s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

void test_dir_remove(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char p[PATH_MAX];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(dir);
}

pardo_type test_type(pardo_dtype dt, int nd, const int64_t *shape) {
    pardo_type t = {.dtype = dt, .ndim = nd};
    if (nd > 0) memcpy(t.shape, shape, sizeof(int64_t) * (size_t)nd);
    return t;
}

bool test_someone_idle_within_100ms(void) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (pardo_thread_pool_idle_awake() > 0) return true;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < 0.1);
    return false;
}

void test_pool_size(int n) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != n) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(n, &st) == PARDO_OK, "%s", st.msg);
}
