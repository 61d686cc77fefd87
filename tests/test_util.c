/* test_util.c - helpers for the Check suites (see test_util.h). */
#include "test_util.h"

#include "core/half.h"
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

long double test_elem_ld(const void *data, pardo_dtype dt, int64_t i) {
    switch (dt) {
    case PARDO_F32: return ((const float *)data)[i];
    case PARDO_F64: return ((const double *)data)[i];
    case PARDO_I8: return ((const int8_t *)data)[i];
    case PARDO_I16: return ((const int16_t *)data)[i];
    case PARDO_I32: return ((const int32_t *)data)[i];
    case PARDO_I64: return ((const int64_t *)data)[i];
    case PARDO_U8:
    case PARDO_BOOL: return ((const uint8_t *)data)[i];
    case PARDO_U16: return ((const uint16_t *)data)[i];
    case PARDO_U32: return ((const uint32_t *)data)[i];
    case PARDO_U64: return ((const uint64_t *)data)[i];
    case PARDO_F16: return pardo_f16_to_f32(((const uint16_t *)data)[i]);
    case PARDO_BF16: return pardo_bf16_to_f32(((const uint16_t *)data)[i]);
    default: ck_abort_msg("test_elem_ld: dtype %d", (int)dt);
    }
    return 0;
}

pardo_tensor *test_tensor_spread(test_rng *r, pardo_dtype dt, int ndim, const int64_t *shape) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(dt, ndim, shape, &st);
    ck_assert_msg(t != NULL, "tensor_new: %s", st.msg);
    unsigned char *d = pardo_tensor_data(t);
    const size_t es = pardo_dtype_size(dt);
    for (int64_t i = 0; i < t->numel; i++) {
        uint64_t bits = test_rng_next(r);
        const unsigned pick = (unsigned)(bits >> 60);
        if (pick == 0) bits = 0; /* ties at zero */
        else if (pick == 1) bits = ((uint64_t)1 << (8 * es - 1)) - 1; /* the largest signed integer */
        else if (pick == 2) bits = (uint64_t)1 << (8 * es - 1); /* the smallest signed integer, or -0 */
        else if (pick == 3) bits = ~(uint64_t)0; /* the largest unsigned integer, -1 */
        if (dt == PARDO_F32) {
            float f = (float)test_rng_uniform(r, -1e30, 1e30);
            if (pick < 3) f = pick == 0 ? 0.0f : pick == 1 ? 3.4028235e38f : -0.0f;
            memcpy(d + (size_t)i * es, &f, es);
            continue;
        }
        if (dt == PARDO_F64) {
            double f = test_rng_uniform(r, -1e300, 1e300);
            if (pick < 3) f = pick == 0 ? 0.0 : pick == 1 ? 1.7976931348623157e308 : -0.0;
            memcpy(d + (size_t)i * es, &f, es);
            continue;
        }
        if (dt == PARDO_F16 || dt == PARDO_BF16) { /* any bits but NaN (exponent all ones): inf stays in */
            uint16_t h = (uint16_t)bits;
            const uint16_t exp_mask = dt == PARDO_F16 ? 0x7C00 : 0x7F80, man_mask = dt == PARDO_F16 ? 0x03FF : 0x007F;
            if ((h & exp_mask) == exp_mask && (h & man_mask)) h &= (uint16_t)~man_mask;
            memcpy(d + (size_t)i * es, &h, es);
            continue;
        }
        memcpy(d + (size_t)i * es, &bits, es); /* little-endian: the low bytes */
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
