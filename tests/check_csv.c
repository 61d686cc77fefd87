/* check_csv.c - the CSV reader and writer (src/io/csv.c) and the feed dtype
 * casts: values against strtod/strtof and C casts, float bits round-tripped
 * through the writer, every class of bad file refused with its line and
 * column, every prefix of a good file parsed or refused without a crash. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "io/csv.h"

static pardo_type type_of(pardo_dtype dt, int ndim, const int64_t *shape) {
    pardo_type ty = {.dtype = dt, .ndim = ndim};
    for (int d = 0; d < ndim; d++) ty.shape[d] = shape[d];
    return ty;
}

static pardo_tensor *parse_ok(const char *text, pardo_type ty) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_tensor *t = NULL;
    int rc = pardo_csv_parse(text, strlen(text), "t.csv", &ty, &t, &st);
    ck_assert_msg(rc == PARDO_OK, "parse failed: %s", st.msg);
    return t;
}

/* Parses text, expects code and a message holding each of the words. */
static void parse_bad(const char *text, pardo_type ty, int code, const char *w1, const char *w2) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_tensor *t = NULL;
    int rc = pardo_csv_parse(text, strlen(text), "t.csv", &ty, &t, &st);
    ck_assert_msg(rc == code, "'%s': rc %d, expected %d (%s)", text, rc, code, st.msg);
    ck_assert_ptr_null(t);
    ck_assert_msg(strncmp(st.msg, "t.csv: ", 7) == 0, "message lacks the name: %s", st.msg);
    ck_assert_msg(!w1 || strstr(st.msg, w1), "message lacks '%s': %s", w1, st.msg);
    ck_assert_msg(!w2 || strstr(st.msg, w2), "message lacks '%s': %s", w2, st.msg);
}

START_TEST(floats_rows_and_header) {
    int64_t sh[] = {-1, 3};
    const char *text = "a,b,c\r\n1.5, -2e-3 ,7\r\n0.1,3.4028235e38,-0\n\n\n";
    pardo_tensor *t = parse_ok(text, type_of(PARDO_F32, 2, sh));
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_int_eq(t->shape[0], 2);
    ck_assert_int_eq(t->shape[1], 3);
    const float *d = pardo_tensor_data(t);
    const char *ref[] = {"1.5", "-2e-3", "7", "0.1", "3.4028235e38", "-0"};
    for (int i = 0; i < 6; i++) ck_assert_msg(memcmp(&d[i], &(float){strtof(ref[i], NULL)}, 4) == 0, "element %d", i);
    pardo_tensor_release(t);
    /* float64 keeps what float32 rounds */
    pardo_tensor *u = parse_ok("0.1,0.2,0.3\n", type_of(PARDO_F64, 2, sh));
    ck_assert(((const double *)pardo_tensor_data(u))[1] == strtod("0.2", NULL));
    pardo_tensor_release(u);
}
END_TEST

START_TEST(ints_bools_ranks) {
    int64_t r1[] = {-1}, fixed[] = {2, 2};
    pardo_tensor *t = parse_ok("3\n-9223372036854775808\n9223372036854775807\n", type_of(PARDO_I64, 1, r1));
    const int64_t *d = pardo_tensor_data(t);
    ck_assert_int_eq(t->shape[0], 3);
    ck_assert(d[0] == 3 && d[1] == INT64_MIN && d[2] == INT64_MAX);
    pardo_tensor_release(t);
    t = parse_ok("1,2\n-2147483648,2147483647\n", type_of(PARDO_I32, 2, fixed));
    const int32_t *e = pardo_tensor_data(t);
    ck_assert(e[0] == 1 && e[1] == 2 && e[2] == INT32_MIN && e[3] == INT32_MAX);
    pardo_tensor_release(t);
    t = parse_ok("0,1\ntrue,FALSE", type_of(PARDO_BOOL, 2, fixed));
    const uint8_t *b = pardo_tensor_data(t);
    ck_assert(b[0] == 0 && b[1] == 1 && b[2] == 1 && b[3] == 0);
    pardo_tensor_release(t);
    t = parse_ok("2.5\n", type_of(PARDO_F32, 0, NULL));
    ck_assert_int_eq(t->ndim, 0);
    ck_assert(*(const float *)pardo_tensor_data(t) == 2.5f);
    pardo_tensor_release(t);
    /* [-1, 2, 2]: four fields a row */
    int64_t r3[] = {-1, 2, 2};
    t = parse_ok("1,2,3,4\n5,6,7,8\n", type_of(PARDO_F64, 3, r3));
    ck_assert_int_eq(t->shape[0], 2);
    ck_assert(((const double *)pardo_tensor_data(t))[7] == 8.0);
    pardo_tensor_release(t);
}
END_TEST

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The writer's text, read back, gives the same bits: random finite floats, subnormals included. */
START_TEST(write_round_trips_bits) {
    char dir[] = "/tmp/pardo-csv-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/t.csv", dir);
    for (int dt = 0; dt < 2; dt++) {
        int64_t sh[] = {50, 7};
        pardo_status st;
        pardo_status_clear(&st);
        pardo_tensor *t = pardo_tensor_new_cpu(dt ? PARDO_F64 : PARDO_F32, 2, sh, &st);
        void *d = pardo_tensor_mutable_cpu(t, &st);
        for (int i = 0; i < 350; i++) {
            if (dt) {
                double v;
                do {
                    uint64_t u = next_u64();
                    memcpy(&v, &u, 8);
                } while (!isfinite(v));
                ((double *)d)[i] = v;
            } else {
                float v;
                do {
                    uint32_t u = (uint32_t)next_u64();
                    memcpy(&v, &u, 4);
                } while (!isfinite(v));
                ((float *)d)[i] = v;
            }
        }
        ck_assert_int_eq(pardo_csv_write(path, t, &st), PARDO_OK);
        int64_t vsh[] = {-1, 7};
        pardo_type ty = type_of(t->dtype, 2, vsh);
        pardo_tensor *r = NULL;
        ck_assert_msg(pardo_csv_read(path, &ty, &r, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_int_eq(r->shape[0], 50);
        ck_assert_msg(memcmp(pardo_tensor_data(r), d, (size_t)t->nbytes) == 0, "dtype %d: bits differ", dt);
        pardo_tensor_release(r);
        pardo_tensor_release(t);
    }
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(casts) {
    int64_t sh[] = {3};
    pardo_status st;
    pardo_status_clear(&st);
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_F64, 1, sh, &st), *o = NULL;
    double *d = pardo_tensor_mutable_cpu(t, &st);
    d[0] = 0.1, d[1] = -1e300, d[2] = 3.0;
    ck_assert_int_eq(pardo_feed_cast(t, PARDO_F32, "f.npy", "x", &o, &st), PARDO_OK);
    ck_assert_int_eq(o->dtype, PARDO_F32);
    for (int i = 0; i < 3; i++) ck_assert(((const float *)pardo_tensor_data(o))[i] == (float)d[i]);
    pardo_tensor_release(o);
    ck_assert_int_eq(pardo_feed_cast(t, PARDO_F64, "f.npy", "x", &o, &st), PARDO_OK);
    ck_assert_ptr_eq(o, t); /* the same dtype: no copy */
    pardo_tensor_release(o);
    ck_assert_int_eq(pardo_feed_cast(t, PARDO_I64, "f.npy", "x", &o, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "f.npy: the file is float64 [3], but the var 'x' is int64"), "%s", st.msg);
    pardo_tensor_release(t);
    t = pardo_tensor_new_cpu(PARDO_I64, 1, sh, &st);
    int64_t *e = pardo_tensor_mutable_cpu(t, &st);
    e[0] = -5, e[1] = INT32_MAX, e[2] = INT32_MIN;
    ck_assert_int_eq(pardo_feed_cast(t, PARDO_I32, "i.npy", "y", &o, &st), PARDO_OK);
    for (int i = 0; i < 3; i++) ck_assert(((const int32_t *)pardo_tensor_data(o))[i] == (int32_t)e[i]);
    pardo_tensor_release(o);
    e[1] = (int64_t)INT32_MAX + 1;
    ck_assert_int_eq(pardo_feed_cast(t, PARDO_I32, "i.npy", "y", &o, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "element 1 (2147483648) does not fit"), "%s", st.msg);
    ck_assert_int_eq(pardo_feed_cast(t, PARDO_BOOL, "i.npy", "y", &o, &st), PARDO_EINVAL);
    pardo_tensor_release(t);
    ck_assert_int_eq(pardo_feed_cast_kind(PARDO_I32, PARDO_I64), 1);
    ck_assert_int_eq(pardo_feed_cast_kind(PARDO_F32, PARDO_F64), 1);
    ck_assert_int_eq(pardo_feed_cast_kind(PARDO_F32, PARDO_I32), -1);
    ck_assert_int_eq(pardo_feed_cast_kind(PARDO_BOOL, PARDO_F32), -1);
    ck_assert(pardo_csv_is_csv_path("a/b.CSV") && !pardo_csv_is_csv_path("b.npy") && !pardo_csv_is_csv_path("csv"));
}
END_TEST

START_TEST(bad_files) {
    int64_t sh[] = {-1, 3}, fixed[] = {2, 3}, bad[] = {2, -1}, r1[] = {-1};
    pardo_type f = type_of(PARDO_F32, 2, sh);
    parse_bad("1,2,3\n4,5\n", f, PARDO_ESHAPE, "line 2: 2 fields", "wants 3 a row");
    parse_bad("1,2,3\n4,5,6,7\n", f, PARDO_ESHAPE, "line 2: more than 3 fields", NULL);
    parse_bad("1,2,3\n4,x5,6\n", f, PARDO_EPARSE, "line 2, column 2: 'x5' is not a number", "float32");
    parse_bad("1,,3\n", f, PARDO_EPARSE, "line 1, column 2", "empty field");
    parse_bad("1,2,3\n\n4,5,6\n", f, PARDO_EPARSE, "line 2: a blank line between rows", NULL);
    parse_bad("", f, PARDO_EPARSE, "no rows", NULL);
    parse_bad("a,b,c\n", f, PARDO_EPARSE, "no rows of numbers after the header", NULL);
    parse_bad("1,2,3\n", type_of(PARDO_F32, 2, fixed), PARDO_ESHAPE, "1 rows", "wants 2");
    parse_bad("1,2\n", type_of(PARDO_F32, 2, bad), PARDO_EINVAL, "past dim 0", NULL);
    parse_bad("2147483648\n", type_of(PARDO_I32, 1, r1), PARDO_EPARSE, "line 1, column 1", "out of the dtype's range");
    parse_bad("1.5\n", type_of(PARDO_I64, 1, r1), PARDO_EPARSE, "'1.5' is not an integer", NULL);
    parse_bad("2\n", type_of(PARDO_BOOL, 1, r1), PARDO_EPARSE, "not 0, 1, true or false", NULL);
    parse_bad("1\n2\n", type_of(PARDO_F32, 0, NULL), PARDO_ESHAPE, "a scalar", NULL);
    /* a NUL byte in a file */
    char path[] = "/tmp/pardo-csv-nul-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "1,2,3\n\0\n", 8), 8);
    close(fd);
    pardo_status st;
    pardo_status_clear(&st);
    pardo_tensor *t = NULL;
    ck_assert_int_eq(pardo_csv_read(path, &f, &t, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "NUL byte"), "%s", st.msg);
    unlink(path);
    ck_assert_int_eq(pardo_csv_read("/nonexistent/x.csv", &f, &t, &st), PARDO_EIO);
}
END_TEST

/* Every prefix of a good file parses or is refused with a status. */
START_TEST(every_prefix) {
    const char *text = "h1,h2\n1.25,-3\n1e5,7\r\n-0.5,nan\n\n";
    int64_t sh[] = {-1, 2};
    pardo_type ty = type_of(PARDO_F64, 2, sh);
    for (size_t n = 0; n <= strlen(text); n++) {
        pardo_status st;
        pardo_status_clear(&st);
        pardo_tensor *t = NULL;
        int rc = pardo_csv_parse(text, n, "t.csv", &ty, &t, &st);
        ck_assert(rc == PARDO_OK ? t != NULL : (t == NULL && st.msg[0]));
        pardo_tensor_release(t);
    }
}
END_TEST

Suite *make_csv_suite(void) {
    Suite *s = suite_create("csv");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, floats_rows_and_header);
    tcase_add_test(core, ints_bools_ranks);
    tcase_add_test(core, write_round_trips_bits);
    tcase_add_test(core, casts);
    tcase_add_test(core, every_prefix);
    suite_add_tcase(s, core);
    TCase *err = tcase_create("Errors");
    tcase_add_test(err, bad_files);
    suite_add_tcase(s, err);
    return s;
}
