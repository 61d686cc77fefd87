/* check_npy.c - the .npy reader and writer: round trips, NumPy-made fixtures
 * (tests/fixtures/make_npy_fixtures.py), and every class of bad file. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_suites.h"
#include "io/npy.h"
#include "test_util.h"

/* ---- helpers ---------------------------------------------------------- */

/* Fails unless st's message starts with name and contains every string of
 * the NULL-terminated list. */
static void assert_msg(const pardo_status *st, const char *name, ...) {
    ck_assert_msg(strncmp(st->msg, name, strlen(name)) == 0, "message does not start with '%s': %s", name, st->msg);
    va_list ap;
    va_start(ap, name);
    for (const char *w = va_arg(ap, const char *); w; w = va_arg(ap, const char *))
        ck_assert_msg(strstr(st->msg, w) != NULL, "message lacks '%s': %s", w, st->msg);
    va_end(ap);
}

/* Parses a copy of buf in a buffer of exactly n bytes, so that ASan sees any
 * read past the end. */
static int parse_exact(const void *buf, size_t n, const char *name, pardo_tensor **out, pardo_status *st) {
    void *copy = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(copy);
    if (n) memcpy(copy, buf, n);
    int rc = pardo_npy_parse(copy, n, name, out, st);
    free(copy);
    return rc;
}

/* A .npy image: magic, version major.0, the header verbatim, then dn bytes
 * of data. The caller frees it. */
static unsigned char *npy_image(int major, const char *header, const void *data, size_t dn, size_t *n) {
    size_t hl = strlen(header), pre = major == 1 ? 10 : 12;
    *n = pre + hl + dn;
    unsigned char *b = malloc(*n);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    if (major == 1) {
        b[8] = (unsigned char)hl;
        b[9] = (unsigned char)(hl >> 8);
    } else {
        for (int i = 0; i < 4; i++) b[8 + i] = (unsigned char)(hl >> (8 * i));
    }
    memcpy(b + pre, header, hl);
    if (dn) memcpy(b + pre + hl, data, dn);
    return b;
}

/* Parses a v1 image of header + dn bytes of data (zeros) and expects
 * PARDO_EPARSE with a message holding the NULL-terminated key words. */
static void expect_header_error(const char *header, size_t dn, ...) {
    size_t n;
    unsigned char *zeros = calloc(dn ? dn : 1, 1);
    unsigned char *img = npy_image(1, header, zeros, dn, &n);
    pardo_status st;
    pardo_tensor *t = NULL;
    int rc = parse_exact(img, n, "bad.npy", &t, &st);
    ck_assert_msg(rc == PARDO_EPARSE, "header %s: got %s (%s)", header, pardo_code_name(rc), st.msg);
    ck_assert_ptr_null(t);
    ck_assert_msg(strncmp(st.msg, "bad.npy: ", 9) == 0, "message does not start with the name: %s", st.msg);
    va_list ap;
    va_start(ap, dn);
    for (const char *w = va_arg(ap, const char *); w; w = va_arg(ap, const char *))
        ck_assert_msg(strstr(st.msg, w) != NULL, "header %s: message lacks '%s': %s", header, w, st.msg);
    va_end(ap);
    free(img);
    free(zeros);
}

/* Parses a v1 image and expects success; returns the tensor. */
static pardo_tensor *expect_header_ok(const char *header, const void *data, size_t dn) {
    size_t n;
    unsigned char *img = npy_image(1, header, data, dn, &n);
    pardo_status st;
    pardo_tensor *t = NULL;
    int rc = parse_exact(img, n, "ok.npy", &t, &st);
    ck_assert_msg(rc == PARDO_OK, "header %s: %s", header, st.msg);
    free(img);
    return t;
}

static pardo_tensor *read_fixture(const char *name) {
    pardo_status st;
    pardo_tensor *t = NULL;
    int rc = pardo_npy_read(test_fixture(name), &t, &st);
    ck_assert_msg(rc == PARDO_OK, "%s: %s", name, st.msg);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* The values make_npy_fixtures.py writes, recomputed here. */
static pardo_tensor *expected_fixture(const char *name) {
    double v[16] = {0};
    if (!strcmp(name, "f4_2x3.npy")) {
        for (int i = 0; i < 6; i++) v[i] = i / 4.0;
        return test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 3}, v);
    }
    if (!strcmp(name, "f8_3x4.npy")) {
        for (int i = 0; i < 12; i++) v[i] = (i - 5.5) / 3;
        return test_tensor_from(PARDO_F64, 2, (int64_t[]){3, 4}, v);
    }
    if (!strcmp(name, "i4_2x3.npy")) {
        for (int i = 0; i < 6; i++) v[i] = (i - 3) * 1000;
        v[0] = -2147483648.0;
        v[5] = 2147483647.0;
        return test_tensor_from(PARDO_I32, 2, (int64_t[]){2, 3}, v);
    }
    if (!strcmp(name, "i8_2x2x2.npy")) {
        for (int i = 0; i < 8; i++) v[i] = i * 1099511627776.0 - 3;
        return test_tensor_from(PARDO_I64, 3, (int64_t[]){2, 2, 2}, v);
    }
    if (!strcmp(name, "b1_5.npy")) {
        for (int i = 0; i < 5; i++) v[i] = i % 2 == 0;
        return test_tensor_from(PARDO_BOOL, 1, (int64_t[]){5}, v);
    }
    if (!strcmp(name, "scalar_f8.npy")) {
        v[0] = 3.25;
        return test_tensor_from(PARDO_F64, 0, NULL, v);
    }
    if (!strcmp(name, "empty_f4_0x3.npy")) return test_tensor_from(PARDO_F32, 2, (int64_t[]){0, 3}, v);
    if (!strcmp(name, "v2_f4_3.npy")) {
        for (int i = 0; i < 3; i++) v[i] = i + 0.5;
        return test_tensor_from(PARDO_F32, 1, (int64_t[]){3}, v);
    }
    if (!strcmp(name, "v3_i8_2.npy")) {
        v[0] = 7;
        v[1] = -7;
        return test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, v);
    }
    static const struct {
        const char *name;
        pardo_dtype dt;
        int ndim;
        int64_t shape[2];
        double v[4];
    } narrow[] = {
        {"u1_4.npy", PARDO_U8, 1, {4}, {0, 1, 127, 255}},
        {"i1_4.npy", PARDO_I8, 1, {4}, {-128, -1, 0, 127}},
        {"i2_3.npy", PARDO_I16, 1, {3}, {-32768, 0, 32767}},
        {"u2_3.npy", PARDO_U16, 1, {3}, {0, 1, 65535}},
        {"u4_3.npy", PARDO_U32, 1, {3}, {0, 1, 4294967295.0}},
        {"u8_2.npy", PARDO_U64, 1, {2}, {1, 9223372036854775808.0}},
        {"f2_2x2.npy", PARDO_F16, 2, {2, 2}, {0.0999755859375, -2, 65504, -HUGE_VAL}},
    };
    for (size_t k = 0; k < sizeof narrow / sizeof narrow[0]; k++)
        if (!strcmp(name, narrow[k].name))
            return test_tensor_from(narrow[k].dt, narrow[k].ndim, narrow[k].shape, narrow[k].v);
    ck_abort_msg("no expectation for %s", name);
    return NULL;
}

static const char *const v1_fixtures[] = {"f4_2x3.npy", "f8_3x4.npy",    "i4_2x3.npy",       "i8_2x2x2.npy",
                                          "b1_5.npy",   "scalar_f8.npy", "empty_f4_0x3.npy", "u1_4.npy",
                                          "i1_4.npy",   "i2_3.npy",      "u2_3.npy",         "u4_3.npy",
                                          "u8_2.npy",   "f2_2x2.npy"};
#define N_V1_FIXTURES ((int)(sizeof v1_fixtures / sizeof v1_fixtures[0]))

/* ---- Core ------------------------------------------------------------- */

/* Every dtype and shape (scalar, 1-D, 3-D, zero-size dim) survives a write
 * and a read bit for bit, in a file laid out as the format says. */
START_TEST(test_round_trip) {
    static const int64_t shapes[][3] = {{0, 0, 0}, {7, 0, 0}, {2, 3, 4}, {2, 0, 3}};
    static const int ranks[] = {0, 1, 3, 3};
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    test_rng rng = {42};
    for (int dt = 0; dt < PARDO_DTYPE_COUNT; dt++) {
        for (int s = 0; s < 4; s++) {
            pardo_status st;
            pardo_tensor *t;
            if (dt == PARDO_BF16) { /* npy has no bfloat16: refused, nothing written */
                t = pardo_tensor_new_cpu(PARDO_BF16, ranks[s], shapes[s], &st);
                ck_assert_ptr_nonnull(t);
                snprintf(path, sizeof path, "%s/bf16_%d.npy", dir, s);
                ck_assert_int_eq(pardo_npy_write(path, t, &st), PARDO_ENOTSUP);
                ck_assert_msg(strstr(st.msg, "bfloat16") != NULL, "%s", st.msg);
                pardo_tensor_release(t);
                continue;
            }
            if (dt == PARDO_BOOL) {
                t = pardo_tensor_new_cpu(PARDO_BOOL, ranks[s], shapes[s], &st);
                ck_assert_ptr_nonnull(t);
                for (int64_t i = 0; i < t->numel; i++) pardo_tensor_set_f64(t, i, (double)(test_rng_next(&rng) & 1));
            } else if (pardo_dtype_is_extra(dt) && dt != PARDO_F16) { /* the narrow ints: random bytes */
                t = pardo_tensor_new_cpu((pardo_dtype)dt, ranks[s], shapes[s], &st);
                ck_assert_ptr_nonnull(t);
                uint8_t *bytes = pardo_tensor_data(t);
                for (size_t i = 0; i < t->nbytes; i++) bytes[i] = (uint8_t)test_rng_next(&rng);
            } else if (dt == PARDO_I64) {
                t = test_tensor_random(&rng, dt, ranks[s], shapes[s], -4e18, 4e18);
            } else if (dt == PARDO_I32) {
                t = test_tensor_random(&rng, dt, ranks[s], shapes[s], -2e9, 2e9);
            } else {
                t = test_tensor_random(&rng, dt, ranks[s], shapes[s], -1e3, 1e3);
            }
            snprintf(path, sizeof path, "%s/t%d_%d.npy", dir, dt, s);
            ck_assert_msg(pardo_npy_write(path, t, &st) == PARDO_OK, "%s", st.msg);

            size_t n;
            unsigned char *raw = test_read_file(path, &n);
            ck_assert_int_eq(memcmp(raw, "\x93NUMPY\x01\x00", 8), 0);
            size_t hl = (size_t)raw[8] | ((size_t)raw[9] << 8);
            ck_assert_uint_eq((10 + hl) % 64, 0);
            ck_assert_int_eq(raw[10 + hl - 1], '\n');
            ck_assert_uint_eq(n, 10 + hl + t->nbytes);
            ck_assert_int_eq(memcmp(raw + 10 + hl, pardo_tensor_data(t), t->nbytes), 0);
            free(raw);

            pardo_tensor *back = NULL;
            ck_assert_msg(pardo_npy_read(path, &back, &st) == PARDO_OK, "%s", st.msg);
            test_assert_close(back, t, 0, 0);
            if (t->nbytes) /* bit for bit, past 2^53 too */
                ck_assert_int_eq(memcmp(pardo_tensor_data(back), pardo_tensor_data(t), t->nbytes), 0);
            pardo_tensor_release(back);
            pardo_tensor_release(t);
        }
    }
    ck_assert_int_eq(test_dir_count(dir), (PARDO_DTYPE_COUNT - 1) * 4); /* all but bfloat16 */
    test_dir_remove(dir);
}
END_TEST

/* The fixtures NumPy wrote hold the values the script computed. */
START_TEST(test_read_numpy_fixtures) {
    static const char *const all[] = {"f4_2x3.npy",    "f8_3x4.npy",       "i4_2x3.npy",  "i8_2x2x2.npy", "b1_5.npy",
                                      "scalar_f8.npy", "empty_f4_0x3.npy", "v2_f4_3.npy", "v3_i8_2.npy",  "u1_4.npy",
                                      "i1_4.npy",      "i2_3.npy",         "u2_3.npy",    "u4_3.npy",     "u8_2.npy",
                                      "f2_2x2.npy"};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        pardo_tensor *t = read_fixture(all[k]);
        pardo_tensor *want = expected_fixture(all[k]);
        test_assert_close(t, want, 0, 0);
        pardo_tensor_release(t);
        pardo_tensor_release(want);
    }
}
END_TEST

/* pardo's writer makes the same bytes as NumPy's for the same array. */
START_TEST(test_write_matches_numpy) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    for (int k = 0; k < N_V1_FIXTURES; k++) {
        pardo_tensor *t = read_fixture(v1_fixtures[k]);
        pardo_status st;
        snprintf(path, sizeof path, "%s/%s", dir, v1_fixtures[k]);
        ck_assert_msg(pardo_npy_write(path, t, &st) == PARDO_OK, "%s", st.msg);
        size_t n1, n2;
        unsigned char *ours = test_read_file(path, &n1), *numpy = test_read_file(test_fixture(v1_fixtures[k]), &n2);
        ck_assert_msg(n1 == n2 && memcmp(ours, numpy, n1) == 0, "%s: bytes differ from NumPy's", v1_fixtures[k]);
        free(ours);
        free(numpy);
        pardo_tensor_release(t);
    }
    test_dir_remove(dir);
}
END_TEST

/* Version 2 and 3 headers (u32 length) read, made here and by NumPy. */
START_TEST(test_read_v2_header) {
    const float data[3] = {1.5f, -2.0f, 0.25f};
    size_t n;
    for (int major = 2; major <= 3; major++) {
        unsigned char *img = npy_image(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }  \n", data,
                                       sizeof data, &n);
        pardo_status st;
        pardo_tensor *t = NULL;
        ck_assert_msg(parse_exact(img, n, "v2.npy", &t, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_int_eq(t->ndim, 1);
        ck_assert_int_eq(t->shape[0], 3);
        for (int i = 0; i < 3; i++) ck_assert_double_eq((double)((float *)pardo_tensor_data(t))[i], (double)data[i]);
        pardo_tensor_release(t);
        free(img);
    }
    pardo_tensor *t = read_fixture("v2_f4_3.npy");
    ck_assert_int_eq(t->dtype, PARDO_F32);
    ck_assert_int_eq(t->numel, 3);
    pardo_tensor_release(t);
}
END_TEST

/* The header dict parses in any key order, either quotes, any spacing, with
 * or without trailing commas, Python 2 'L' sizes, and without padding. */
START_TEST(test_header_forms) {
    const float data[6] = {0, 1, 2, 3, 4, 5};
    static const char *const forms[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
        "{\"shape\": (2, 3), \"fortran_order\": False, \"descr\": \"<f4\"}",
        "  { 'fortran_order' : False ,\n\t'shape' : ( 2 , 3 , ) , 'descr' : '<f4' , }   \n",
        "{'descr':'<f4','fortran_order':False,'shape':(2L, 3L)}",
        "{'descr': \"<f4\", 'shape': (2,3), 'fortran_order': False,}\r\n",
    };
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        pardo_tensor *t = expect_header_ok(forms[k], data, sizeof data);
        ck_assert_int_eq(t->dtype, PARDO_F32);
        ck_assert_int_eq(t->ndim, 2);
        ck_assert_int_eq(t->shape[0], 2);
        ck_assert_int_eq(t->shape[1], 3);
        ck_assert_double_eq((double)((float *)pardo_tensor_data(t))[5], 5.0);
        pardo_tensor_release(t);
    }
    /* Scalars, one dim with its trailing comma, '<b1' for bool. */
    const double one = 2.5;
    pardo_tensor *t = expect_header_ok("{'descr': '<f8', 'fortran_order': False, 'shape': ()}", &one, 8);
    ck_assert_int_eq(t->ndim, 0);
    ck_assert_int_eq(t->numel, 1);
    pardo_tensor_release(t);
    const unsigned char bools[3] = {0, 1, 1};
    t = expect_header_ok("{'descr': '<b1', 'fortran_order': False, 'shape': (3,)}", bools, 3);
    ck_assert_int_eq(t->dtype, PARDO_BOOL);
    ck_assert_int_eq(t->shape[0], 3);
    pardo_tensor_release(t);
}
END_TEST

/* Bool bytes other than 0 and 1 read as true, as NumPy reads them. */
START_TEST(test_bool_normalised) {
    const unsigned char raw[4] = {0, 2, 255, 1};
    pardo_tensor *t = expect_header_ok("{'descr': '|b1', 'fortran_order': False, 'shape': (4,)}", raw, 4);
    const unsigned char *b = pardo_tensor_data(t);
    ck_assert_int_eq(b[0], 0);
    ck_assert_int_eq(b[1], 1);
    ck_assert_int_eq(b[2], 1);
    ck_assert_int_eq(b[3], 1);
    pardo_tensor_release(t);
}
END_TEST

/* ---- Errors ----------------------------------------------------------- */

START_TEST(test_err_magic) {
    pardo_status st;
    pardo_tensor *t = NULL;
    const char junk[] = "NOTNUMPY\x01\x00 junk";
    ck_assert_int_eq(parse_exact(junk, sizeof junk, "junk.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "junk.npy: ", "byte 0", "magic", NULL);
    ck_assert_int_eq(parse_exact("", 0, "empty.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "empty.npy: ", "empty", NULL);
    ck_assert_ptr_null(t);
}
END_TEST

START_TEST(test_err_version) {
    size_t n;
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n";
    unsigned char *img = npy_image(1, hdr, "\0\0\0\0", 4, &n);
    pardo_status st;
    pardo_tensor *t = NULL;
    img[6] = 4;
    ck_assert_int_eq(parse_exact(img, n, "v4.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "v4.npy: ", "byte 6", "unsupported .npy version 4.0", "expected 1.0, 2.0 or 3.0", NULL);
    img[6] = 1;
    img[7] = 1;
    ck_assert_int_eq(parse_exact(img, n, "v11.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "v11.npy: ", "version 1.1", NULL);
    img[6] = 0;
    img[7] = 0;
    ck_assert_int_eq(parse_exact(img, n, "v0.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "v0.npy: ", "version 0.0", NULL);
    ck_assert_ptr_null(t);
    free(img);
}
END_TEST

START_TEST(test_err_truncated_header) {
    size_t n;
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n";
    unsigned char *img = npy_image(1, hdr, "\0\0\0\0", 4, &n);
    pardo_status st;
    pardo_tensor *t = NULL;
    ck_assert_int_eq(parse_exact(img, 9, "short.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "short.npy: ", "truncated", "preamble", NULL);
    /* The header length says more than the file holds. */
    img[8] = 0xe8;
    img[9] = 0x03;
    ck_assert_int_eq(parse_exact(img, n, "long.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "long.npy: ", "byte 8", "truncated header", "header length 1000", NULL);
    /* Cut inside the header. */
    img[8] = (unsigned char)strlen(hdr);
    img[9] = 0;
    ck_assert_int_eq(parse_exact(img, 30, "cut.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "cut.npy: ", "truncated header", NULL);
    ck_assert_ptr_null(t);
    free(img);
}
END_TEST

START_TEST(test_err_keys) {
    expect_header_error("{'descr': '<f4', 'shape': (3,), }", 12, "header", "missing key 'fortran_order'", NULL);
    expect_header_error("{'fortran_order': False, 'shape': (3,)}", 12, "missing key 'descr'", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False}", 4, "missing key 'shape'", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'descr': '<f4'}", 12,
                        "byte 66", "header key 'descr'", "duplicate key", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", 12,
                        "header key 'extra'", "unexpected key", NULL);
}
END_TEST

START_TEST(test_err_big_endian) {
    pardo_status st;
    pardo_tensor *t = NULL;
    const char *path = test_fixture("be_f4_3.npy");
    char name[1024];
    snprintf(name, sizeof name, "%s", path);
    ck_assert_int_eq(pardo_npy_read(name, &t, &st), PARDO_EPARSE);
    assert_msg(&st, name, "header key 'descr'", "'>f4'", "expected little-endian", NULL);
    ck_assert_ptr_null(t);
    expect_header_error("{'descr': '>i8', 'fortran_order': False, 'shape': ()}", 8, "expected little-endian", NULL);
}
END_TEST

START_TEST(test_err_fortran_order) {
    pardo_status st;
    pardo_tensor *t = NULL;
    char name[1024];
    snprintf(name, sizeof name, "%s", test_fixture("fortran_f4_2x3.npy"));
    ck_assert_int_eq(pardo_npy_read(name, &t, &st), PARDO_EPARSE);
    assert_msg(&st, name, "header key 'fortran_order'", "expected C order", NULL);
    ck_assert_ptr_null(t);
    expect_header_error("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", 4, "True or False", NULL);
}
END_TEST

START_TEST(test_err_dtype) {
    static const char *const bad[] = {"<c8", "<f16", "O", "<U5", "<f4x", "<M8[s]", "<V2"};
    char hdr[128];
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': ()}", bad[k]);
        expect_header_error(hdr, 8, "header key 'descr'", "unsupported dtype", bad[k],
                            "<f4 <f8 <f2 <i4 <i8 <i2 |i1 <u8 <u4 <u2 |u1 |b1", NULL);
    }
    expect_header_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}", 4,
                        "structured dtypes are not supported", NULL);
}
END_TEST

START_TEST(test_err_shape) {
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3)}", 0, "header key 'shape'",
                        "size 0 is negative (-1)", "expected a size >= 0", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}", 4,
                        "header key 'shape'", "rank exceeds 8", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 0,
                        "size 0 is too large", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,)}", 0,
                        "too large", NULL);
    expect_header_error("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 0,
                        "header key 'shape'", "more bytes than pardo can address", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", 24, "expected a tuple", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 12, "(3,)", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", 24, "',' or ')'", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}", 24, "a size", NULL);
}
END_TEST

START_TEST(test_err_syntax) {
    expect_header_error("{'descr' '<f4', 'fortran_order': False, 'shape': ()}", 4, "byte 19", "expected ':'", NULL);
    expect_header_error("{'descr': '<f4", 4, "byte 24", "a closing quote", "the end of the header", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x", 4, "only spaces", "found 'x'",
                        NULL);
    expect_header_error("['descr', '<f4']", 4, "byte 10", "'{'", NULL);
    expect_header_error("{'de\\scr': '<f4', 'fortran_order': False, 'shape': ()}", 4, "escape", NULL);
    expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': ()", 4, "',' or '}'",
                        "the end of the header", NULL);
    expect_header_error("{'descr': '<f4' 'fortran_order': False, 'shape': ()}", 4, "',' or '}'", NULL);
}
END_TEST

START_TEST(test_err_data_size) {
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
    size_t n;
    unsigned char data[28] = {0};
    unsigned char *img = npy_image(1, hdr, data, 20, &n);
    pardo_status st;
    pardo_tensor *t = NULL;
    ck_assert_int_eq(parse_exact(img, n, "short.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "short.npy: ", "truncated: expected 24 bytes of data, file has 20", NULL);
    free(img);
    img = npy_image(1, hdr, data, 28, &n);
    ck_assert_int_eq(parse_exact(img, n, "long.npy", &t, &st), PARDO_EPARSE);
    assert_msg(&st, "long.npy: ", "expected the end of the file after 24 bytes of data", "has 28", NULL);
    ck_assert_ptr_null(t);
    free(img);
}
END_TEST

START_TEST(test_err_read_io) {
    pardo_status st;
    pardo_tensor *t = NULL;
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/missing.npy", dir);
    ck_assert_int_eq(pardo_npy_read(path, &t, &st), PARDO_EIO);
    assert_msg(&st, path, strerror(ENOENT), NULL);
    ck_assert_int_eq(pardo_npy_read(dir, &t, &st), PARDO_EIO);
    assert_msg(&st, dir, strerror(EISDIR), NULL);
    ck_assert_ptr_null(t);
    test_dir_remove(dir);
}
END_TEST

static pardo_tensor *small_tensor(void) {
    test_rng rng = {7};
    return test_tensor_random(&rng, PARDO_F32, 2, (int64_t[]){16, 16}, -1, 1);
}

/* A folder that does not exist: EIO naming the path, nothing created. */
START_TEST(test_err_write_no_folder) {
    char dir[64], path[160];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/no/such/folder/out.npy", dir);
    pardo_tensor *t = small_tensor();
    pardo_status st;
    ck_assert_int_eq(pardo_npy_write(path, t, &st), PARDO_EIO);
    assert_msg(&st, path, strerror(ENOENT), NULL);
    ck_assert_int_eq(test_dir_count(dir), 0);
    pardo_tensor_release(t);
    test_dir_remove(dir);
}
END_TEST

/* The rename fails (a folder sits at the path): the temporary file is gone. */
START_TEST(test_err_write_rename) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.npy", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    pardo_tensor *t = small_tensor();
    pardo_status st;
    ck_assert_int_eq(pardo_npy_write(path, t, &st), PARDO_EIO);
    assert_msg(&st, path, "rename", NULL);
    ck_assert_int_eq(test_dir_count(dir), 1);
    pardo_tensor_release(t);
    test_dir_remove(dir);
}
END_TEST

/* Writing fails part-way (file size limit): the old file is untouched and no
 * temporary file is left. */
START_TEST(test_err_write_fails_midway) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.npy", dir);
    test_write_file(path, "old", 3);
    pardo_tensor *t = small_tensor(); /* 1 KiB of data */
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 512;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    pardo_status st;
    int rc = pardo_npy_write(path, t, &st);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    ck_assert_int_eq(rc, PARDO_EIO);
    assert_msg(&st, path, "write", strerror(EFBIG), NULL);
    size_t n;
    unsigned char *b = test_read_file(path, &n);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(memcmp(b, "old", 3), 0);
    free(b);
    ck_assert_int_eq(test_dir_count(dir), 1);
    pardo_tensor_release(t);
    test_dir_remove(dir);
}
END_TEST

/* A read-only folder (only meaningful when not running as root, who may
 * write anywhere): EIO, nothing created. */
START_TEST(test_err_write_read_only_folder) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.npy", dir);
    ck_assert_int_eq(chmod(dir, 0555), 0);
    pardo_tensor *t = small_tensor();
    pardo_status st;
    int rc = pardo_npy_write(path, t, &st);
    if (geteuid() != 0) {
        ck_assert_int_eq(rc, PARDO_EIO);
        assert_msg(&st, path, strerror(EACCES), NULL);
        ck_assert_int_eq(test_dir_count(dir), 0);
    }
    chmod(dir, 0755);
    pardo_tensor_release(t);
    test_dir_remove(dir);
}
END_TEST

/* Every proper prefix of a valid file fails cleanly (ASan watches reads). */
START_TEST(test_err_every_truncation) {
    static const char *const files[] = {"f4_2x3.npy", "v2_f4_3.npy", "scalar_f8.npy", "empty_f4_0x3.npy",
                                        "b1_5.npy"};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        size_t n;
        unsigned char *b = test_read_file(test_fixture(files[k]), &n);
        for (size_t len = 0; len <= n; len++) {
            pardo_status st;
            pardo_tensor *t = NULL;
            int rc = parse_exact(b, len, "cut.npy", &t, &st);
            if (len == n) {
                ck_assert_msg(rc == PARDO_OK, "%s: %s", files[k], st.msg);
                pardo_tensor_release(t);
            } else {
                ck_assert_msg(rc == PARDO_EPARSE, "%s cut at %zu: got %s", files[k], len, pardo_code_name(rc));
                ck_assert_ptr_null(t);
                ck_assert_msg(strncmp(st.msg, "cut.npy: ", 9) == 0, "%s", st.msg);
            }
        }
        free(b);
    }
}
END_TEST

/* Changing any byte of the preamble or header either still parses to a
 * tensor that fits the file, or fails cleanly with a message. */
START_TEST(test_err_header_byte_flips) {
    static const unsigned char subst[] = {0x00, 0xff, 0x80, ' ', '\n', '\'', '"', ',', ':', '(', ')', '{', '}',
                                          '-',  '0',  '9',  'L', '<',  '>',  '|', 'T', 'F', '\\', 'x'};
    static const char *const files[] = {"f4_2x3.npy", "v3_i8_2.npy", "scalar_f8.npy"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t n;
        unsigned char *b = test_read_file(test_fixture(files[f]), &n);
        size_t pre = b[6] == 1 ? 10 : 12;
        size_t hl = b[6] == 1 ? (size_t)(b[8] | (b[9] << 8)) : (size_t)(b[8] | (b[9] << 8) | (b[10] << 16));
        int ok = 0, bad = 0;
        for (size_t pos = 0; pos < pre + hl; pos++) {
            unsigned char orig = b[pos];
            for (size_t s = 0; s <= sizeof subst; s++) {
                b[pos] = s < sizeof subst ? subst[s] : (unsigned char)(orig ^ 0x01);
                pardo_status st;
                pardo_tensor *t = NULL;
                int rc = parse_exact(b, n, "flip.npy", &t, &st);
                if (rc == PARDO_OK) {
                    ck_assert_uint_le(t->nbytes, n);
                    pardo_tensor_release(t);
                    ok++;
                } else {
                    ck_assert_msg(rc == PARDO_EPARSE, "byte %zu: got %s: %s", pos, pardo_code_name(rc), st.msg);
                    ck_assert_ptr_null(t);
                    ck_assert_msg(strncmp(st.msg, "flip.npy: ", 10) == 0, "%s", st.msg);
                    bad++;
                }
            }
            b[pos] = orig;
        }
        ck_assert_int_gt(ok, 0);
        ck_assert_int_gt(bad, 0);
        free(b);
    }
}
END_TEST

Suite *make_npy_suite(void) {
    Suite *s = suite_create("npy");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_round_trip);
    tcase_add_test(core, test_read_numpy_fixtures);
    tcase_add_test(core, test_write_matches_numpy);
    tcase_add_test(core, test_read_v2_header);
    tcase_add_test(core, test_header_forms);
    tcase_add_test(core, test_bool_normalised);
    suite_add_tcase(s, core);

    TCase *err = tcase_create("Errors");
    tcase_set_timeout(err, 60);
    tcase_add_test(err, test_err_magic);
    tcase_add_test(err, test_err_version);
    tcase_add_test(err, test_err_truncated_header);
    tcase_add_test(err, test_err_keys);
    tcase_add_test(err, test_err_big_endian);
    tcase_add_test(err, test_err_fortran_order);
    tcase_add_test(err, test_err_dtype);
    tcase_add_test(err, test_err_shape);
    tcase_add_test(err, test_err_syntax);
    tcase_add_test(err, test_err_data_size);
    tcase_add_test(err, test_err_read_io);
    tcase_add_test(err, test_err_write_no_folder);
    tcase_add_test(err, test_err_write_rename);
    tcase_add_test(err, test_err_write_fails_midway);
    tcase_add_test(err, test_err_write_read_only_folder);
    tcase_add_test(err, test_err_every_truncation);
    tcase_add_test(err, test_err_header_byte_flips);
    suite_add_tcase(s, err);
    return s;
}
