/* check_safetensors.c - the safetensors reader and writer: round trips, a
 * fixture written per the format by tests/fixtures/make_npy_fixtures.py, and
 * every class of bad file. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
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
#include "io/safetensors.h"
#include "test_util.h"

/* ---- helpers ---------------------------------------------------------- */

/* Fails unless st's message starts with name and contains every string of
 * the NULL-terminated va_list. */
static void assert_msg_v(const pardo_status *st, const char *name, va_list ap) {
    ck_assert_msg(strncmp(st->msg, name, strlen(name)) == 0, "message does not start with '%s': %s", name, st->msg);
    for (const char *w = va_arg(ap, const char *); w; w = va_arg(ap, const char *))
        ck_assert_msg(strstr(st->msg, w) != NULL, "message lacks '%s': %s", w, st->msg);
}

static void assert_msg(const pardo_status *st, const char *name, ...) {
    va_list ap;
    va_start(ap, name);
    assert_msg_v(st, name, ap);
    va_end(ap);
}

/* Parses a copy of buf in a buffer of exactly n bytes (so that ASan sees any
 * read past the end) into out. */
static int parse_exact(const void *buf, size_t n, const char *name, pardo_tensor_list *out, pardo_status *st) {
    void *copy = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(copy);
    if (n) memcpy(copy, buf, n);
    int rc = pardo_safetensors_parse(copy, n, name, out, st);
    free(copy);
    return rc;
}

/* A safetensors image: the header length, json verbatim, dn bytes of data
 * (zeros when data is NULL). The caller frees it. */
static unsigned char *st_image(const char *json, const void *data, size_t dn, size_t *n) {
    size_t hl = strlen(json);
    *n = 8 + hl + dn;
    unsigned char *b = calloc(*n, 1);
    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    if (data && dn) memcpy(b + 8 + hl, data, dn);
    return b;
}

/* Expects json + dn zero bytes of data to fail with PARDO_EPARSE and a
 * message holding the NULL-terminated key words, leaving the list as it was. */
static void expect_error(const char *json, size_t dn, ...) {
    size_t n;
    unsigned char *img = st_image(json, NULL, dn, &n);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    int rc = parse_exact(img, n, "bad.safetensors", &l, &st);
    ck_assert_msg(rc == PARDO_EPARSE, "header %s: got %s (%s)", json, pardo_code_name(rc), st.msg);
    ck_assert_int_eq(l.n, 0);
    va_list ap;
    va_start(ap, dn);
    assert_msg_v(&st, "bad.safetensors: ", ap);
    va_end(ap);
    free(img);
}

/* A list of one tensor per dtype and shape class, names t<dtype>_<shape>. */
static void make_list(pardo_tensor_list *l) {
    static const int64_t shapes[][3] = {{0, 0, 0}, {5, 0, 0}, {2, 3, 4}, {3, 0, 2}};
    static const int ranks[] = {0, 1, 3, 3};
    test_rng rng = {99};
    pardo_status st;
    pardo_tensor_list_init(l);
    for (int dt = 0; dt < PARDO_DTYPE_COUNT; dt++) {
        for (int s = 0; s < 4; s++) {
            pardo_tensor *t;
            if (dt == PARDO_BOOL) {
                t = pardo_tensor_new_cpu(PARDO_BOOL, ranks[s], shapes[s], &st);
                ck_assert_ptr_nonnull(t);
                for (int64_t i = 0; i < t->numel; i++) pardo_tensor_set_f64(t, i, (double)(test_rng_next(&rng) & 1));
            } else if (pardo_dtype_is_extra((pardo_dtype)dt)) { /* uint8..bfloat16: random bytes */
                t = pardo_tensor_new_cpu((pardo_dtype)dt, ranks[s], shapes[s], &st);
                ck_assert_ptr_nonnull(t);
                uint8_t *bytes = pardo_tensor_data(t);
                for (size_t i = 0; i < t->nbytes; i++) bytes[i] = (uint8_t)test_rng_next(&rng);
            } else {
                double lim = dt == PARDO_I64 ? 4e18 : dt == PARDO_I32 ? 2e9 : 1e3;
                t = test_tensor_random(&rng, (pardo_dtype)dt, ranks[s], shapes[s], -lim, lim);
            }
            char name[32];
            snprintf(name, sizeof name, "t%d_%d", dt, s);
            ck_assert_int_eq(pardo_tensor_list_add(l, name, t, &st), PARDO_OK);
            pardo_tensor_release(t);
        }
    }
}

static void assert_lists_equal(const pardo_tensor_list *a, const pardo_tensor_list *b) {
    ck_assert_int_eq(a->n, b->n);
    for (int k = 0; k < a->n; k++) {
        ck_assert_str_eq(a->names[k], b->names[k]);
        test_assert_close(a->tensors[k], b->tensors[k], 0, 0);
    }
}

/* ---- Core ------------------------------------------------------------- */

/* Every dtype and shape (scalar, 1-D, 3-D, zero-size dim) survives a write
 * and a read, in list order, in a file laid out as the format says. */
START_TEST(test_round_trip) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    pardo_tensor_list in, back;
    make_list(&in);
    pardo_tensor_list_init(&back);
    pardo_status st;
    ck_assert_msg(pardo_safetensors_write(path, &in, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_safetensors_read(path, &back, &st) == PARDO_OK, "%s", st.msg);
    assert_lists_equal(&back, &in);

    size_t n, data = 0;
    unsigned char *raw = test_read_file(path, &n);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)raw[i] << (8 * i);
    ck_assert_uint_eq(hl % 8, 0);
    ck_assert_int_eq(raw[8], '{');
    for (int k = 0; k < in.n; k++) {
        /* Contiguous, in list order: each tensor's bytes sit where the sum of
         * the previous sizes says. */
        ck_assert_int_eq(memcmp(raw + 8 + hl + data, pardo_tensor_data(in.tensors[k]), in.tensors[k]->nbytes), 0);
        data += in.tensors[k]->nbytes;
    }
    ck_assert_uint_eq(n, 8 + hl + data);
    free(raw);
    ck_assert_int_eq(test_dir_count(dir), 1);
    pardo_tensor_list_clear(&in);
    pardo_tensor_list_clear(&back);
    test_dir_remove(dir);
}
END_TEST

/* An empty list is a valid file: "{}" padded to 8 bytes and no data. */
START_TEST(test_empty_list) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/empty.safetensors", dir);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    ck_assert_msg(pardo_safetensors_write(path, &l, &st) == PARDO_OK, "%s", st.msg);
    size_t n;
    unsigned char *raw = test_read_file(path, &n);
    ck_assert_uint_eq(n, 16);
    ck_assert_int_eq(memcmp(raw, "\x08\0\0\0\0\0\0\0{}      ", 16), 0);
    free(raw);
    ck_assert_msg(pardo_safetensors_read(path, &l, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(l.n, 0);
    test_dir_remove(dir);
}
END_TEST

/* Names with quotes, backslashes, control characters and UTF-8 survive. */
START_TEST(test_odd_names) {
    static const char *const names[] = {"a\"b", "back\\slash", "new\nline", "caf\xc3\xa9", "", "w@GRAD"};
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/names.safetensors", dir);
    pardo_tensor_list in, back;
    pardo_tensor_list_init(&in);
    pardo_tensor_list_init(&back);
    pardo_status st;
    test_rng rng = {5};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        pardo_tensor *t = test_tensor_random(&rng, PARDO_F32, 1, (int64_t[]){(int64_t)k + 1}, -1, 1);
        ck_assert_int_eq(pardo_tensor_list_add(&in, names[k], t, &st), PARDO_OK);
        pardo_tensor_release(t);
    }
    ck_assert_msg(pardo_safetensors_write(path, &in, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_safetensors_read(path, &back, &st) == PARDO_OK, "%s", st.msg);
    assert_lists_equal(&back, &in);
    pardo_tensor_list_clear(&in);
    pardo_tensor_list_clear(&back);
    test_dir_remove(dir);
}
END_TEST

/* The fixture (written per the format by the script, data in the reverse of
 * the JSON key order, with __metadata__) reads in offset order and holds the
 * same arrays as the NumPy-written .npy fixtures. */
START_TEST(test_read_fixture) {
    static const char *const by_offset[] = {"empty_f4_0x3", "scalar_f8", "b1_5",  "i8_2x2x2",
                                            "i4_2x3",       "f8_3x4",    "f4_2x3"};
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    ck_assert_msg(pardo_safetensors_read(test_fixture("model.safetensors"), &l, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(l.n, 7);
    for (int k = 0; k < l.n; k++) {
        ck_assert_str_eq(l.names[k], by_offset[k]);
        char npy[64];
        snprintf(npy, sizeof npy, "%s.npy", by_offset[k]);
        pardo_tensor *want = NULL;
        ck_assert_msg(pardo_npy_read(test_fixture(npy), &want, &st) == PARDO_OK, "%s", st.msg);
        test_assert_close(l.tensors[k], want, 0, 0);
        pardo_tensor_release(want);
    }
    /* A few values recomputed here, as make_npy_fixtures.py computes them. */
    pardo_tensor *f4 = pardo_tensor_list_find(&l, "f4_2x3");
    for (int i = 0; i < 6; i++) ck_assert_double_eq(pardo_tensor_get_f64(f4, i), i / 4.0);
    pardo_tensor *i8 = pardo_tensor_list_find(&l, "i8_2x2x2");
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(((int64_t *)pardo_tensor_data(i8))[i], (int64_t)i * 1099511627776LL - 3);
    pardo_tensor *b1 = pardo_tensor_list_find(&l, "b1_5");
    for (int i = 0; i < 5; i++) ck_assert_int_eq(((uint8_t *)pardo_tensor_data(b1))[i], i % 2 == 0);
    pardo_tensor *sc = pardo_tensor_list_find(&l, "scalar_f8");
    ck_assert_int_eq(sc->ndim, 0);
    ck_assert_double_eq(pardo_tensor_get_f64(sc, 0), 3.25);
    pardo_tensor_list_clear(&l);
}
END_TEST

/* Parsing appends to a list that already has entries; metadata may come
 * anywhere and is ignored; zero-size entries may share an offset. */
START_TEST(test_parse_appends) {
    const char *json = "{\"b\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"z\":{\"shape\":[2,0],\"data_offsets\":[4,4],\"dtype\":\"BOOL\"},"
                       "\"__metadata__\":{\"format\":\"pt\"}}";
    const float one = 1.5f;
    size_t n;
    unsigned char *img = st_image(json, &one, 4, &n);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    pardo_tensor *first = test_tensor_from(PARDO_F64, 0, NULL, (double[]){9});
    ck_assert_int_eq(pardo_tensor_list_add(&l, "first", first, &st), PARDO_OK);
    pardo_tensor_release(first);
    ck_assert_msg(parse_exact(img, n, "x.safetensors", &l, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(l.n, 4);
    ck_assert_str_eq(l.names[0], "first");
    ck_assert_str_eq(l.names[1], "a");
    ck_assert_str_eq(l.names[2], "b");
    ck_assert_str_eq(l.names[3], "z");
    ck_assert_double_eq(pardo_tensor_get_f64(l.tensors[1], 0), 1.5);
    ck_assert_int_eq(l.tensors[3]->dtype, PARDO_BOOL);
    ck_assert_int_eq(l.tensors[3]->numel, 0);
    pardo_tensor_list_clear(&l);
    free(img);
}
END_TEST

/* ---- Errors ----------------------------------------------------------- */

START_TEST(test_err_short_and_lengths) {
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    ck_assert_int_eq(parse_exact("\x02\0\0\0", 4, "s.safetensors", &l, &st), PARDO_EPARSE);
    assert_msg(&st, "s.safetensors: ", "truncated", "at least 8", NULL);
    size_t n;
    unsigned char *img = st_image("{}", NULL, 0, &n);
    img[0] = 100;
    ck_assert_int_eq(parse_exact(img, n, "s.safetensors", &l, &st), PARDO_EPARSE);
    assert_msg(&st, "s.safetensors: ", "byte 0", "header length 100 goes past the end of the file", NULL);
    memcpy(img, "\x00\xc2\xeb\x0b\0\0\0\0", 8); /* 200,000,000 */
    ck_assert_int_eq(parse_exact(img, n, "s.safetensors", &l, &st), PARDO_EPARSE);
    assert_msg(&st, "s.safetensors: ", "header length 200000000 is too large", "at most 100000000", NULL);
    memcpy(img, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    ck_assert_int_eq(parse_exact(img, n, "s.safetensors", &l, &st), PARDO_EPARSE);
    assert_msg(&st, "s.safetensors: ", "too large", NULL);
    ck_assert_int_eq(l.n, 0);
    free(img);
}
END_TEST

START_TEST(test_err_not_json) {
    expect_error("{\"a\": ", 0, "byte", "invalid JSON in the header", NULL);
    expect_error("not json", 0, "byte 8", "invalid JSON", NULL);
    expect_error("", 0, "invalid JSON", NULL);
    expect_error("[1, 2]  ", 0, "header", "expected a JSON object, found an array", NULL);
    expect_error("\"str\"", 0, "expected a JSON object, found a string", NULL);
    expect_error("{} {}   ", 0, "byte 11", "invalid JSON", "found '{'", NULL);
    size_t n;
    unsigned char *img = st_image("{}\x01\x01\x01\x01\x01\x01", NULL, 0, &n);
    img[10] = 0; /* a NUL byte inside the header */
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    ck_assert_int_eq(parse_exact(img, n, "nul.safetensors", &l, &st), PARDO_EPARSE);
    assert_msg(&st, "nul.safetensors: ", "byte 10", "expected the end of the header", "0x00", NULL);
    free(img);
}
END_TEST

START_TEST(test_err_entry_shape_of_json) {
    expect_error("{\"w\": 3}", 0, "entry 'w'", "expected an object with dtype, shape and data_offsets", "a number",
                 NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": []}}", 4, "entry 'w'", "missing key 'data_offsets'", NULL);
    expect_error("{\"w\": {\"shape\": [], \"data_offsets\": [0, 4]}}", 4, "entry 'w'", "missing key 'dtype'", NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4], \"x\": 1}}", 4, "entry 'w'",
                 "unexpected key 'x'", NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]}}", 4,
                 "entry 'w'", "duplicate key 'dtype'", NULL);
}
END_TEST

START_TEST(test_err_dtype) {
    static const char *const bad[] = {"F8_E4M3", "C64", "U128", "f32", "bf16", ""};
    char json[160];
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(json, sizeof json, "{\"w\": {\"dtype\": \"%s\", \"shape\": [2], \"data_offsets\": [0, 4]}}", bad[k]);
        char quoted[16];
        snprintf(quoted, sizeof quoted, "'%s'", bad[k]);
        expect_error(json, 4, "entry 'w'", "unsupported dtype", quoted,
                     "F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, BOOL", NULL);
    }
    expect_error("{\"w\": {\"dtype\": 1, \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, "entry 'w'", "key 'dtype'",
                 "expected a string", NULL);
}
END_TEST

START_TEST(test_err_shape) {
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": 3, \"data_offsets\": [0, 12]}}", 12, "entry 'w'",
                 "key 'shape'", "expected an array of sizes", NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [2, -1], \"data_offsets\": [0, 8]}}", 8, "entry 'w'",
                 "size 1 is -1", "expected an integer >= 0", NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, "size 0 is 1.5", NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}}", 8, "size 0 is a string",
                 NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [1e300], \"data_offsets\": [0, 8]}}", 8, "expected an integer",
                 NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4,
                 "entry 'w'", "rank 9 exceeds 8", NULL);
    expect_error("{\"w\": {\"dtype\": \"F64\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 4]}}", 4,
                 "entry 'w'", "more bytes than pardo can address", NULL);
}
END_TEST

START_TEST(test_err_offsets) {
    static const char *const bad[] = {"3", "[0]", "[0, 4, 8]", "[0, \"4\"]", "[-1, 3]", "[0.5, 4]", "[]", "null"};
    char json[160];
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(json, sizeof json, "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": %s}}", bad[k]);
        expect_error(json, 4, "entry 'w'", "key 'data_offsets'", "expected [begin, end]", NULL);
    }
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 4]}}", 8, "entry 'w'",
                 "data_offsets [8, 4]", "begin is after end", NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [16], \"data_offsets\": [0, 64]}}", 16, "entry 'w'",
                 "data_offsets [0, 64] go past the end of the data buffer (16 bytes)", NULL);
    expect_error("{\"w\": {\"dtype\": \"F32\", \"shape\": [5], \"data_offsets\": [0, 16]}}", 16, "entry 'w'",
                 "hold 16 bytes, expected 20 for F32 [5]", NULL);
}
END_TEST

START_TEST(test_err_layout) {
    /* Overlap. */
    expect_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                 " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
                 12, "entry 'b'", "overlap entry 'a' [0, 8]", NULL);
    /* The same bytes twice. */
    expect_error("{\"a\": {\"dtype\": \"I32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                 " \"b\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]}}",
                 4, "overlap", NULL);
    /* A hole between entries, at the start, and at the end. */
    expect_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                 " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [12, 20]}}",
                 20, "entry 'b'", "leave a hole at bytes [8, 12)", NULL);
    expect_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, "entry 'a'",
                 "hole at bytes [0, 4)", NULL);
    expect_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 12,
                 "the entries cover 8 bytes of data, the file has 12", NULL);
    expect_error("{}", 4, "the entries cover 0 bytes", NULL);
}
END_TEST

START_TEST(test_err_duplicate_names) {
    expect_error("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                 " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
                 8, "entry 'a'", "duplicate name", NULL);
    expect_error("{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "entry '__metadata__'", "duplicate name", NULL);
}
END_TEST

START_TEST(test_err_metadata) {
    expect_error("{\"__metadata__\": [1]}", 0, "entry '__metadata__'", "expected an object of strings", NULL);
    expect_error("{\"__metadata__\": {\"step\": 3}}", 0, "entry '__metadata__'", "key 'step'", "expected a string",
                 NULL);
}
END_TEST

/* A failed parse leaves the caller's list as it was. */
START_TEST(test_err_list_untouched) {
    const char *json = "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                       " \"b\": {\"dtype\": \"C64\", \"shape\": [1], \"data_offsets\": [4, 6]}}";
    size_t n;
    unsigned char *img = st_image(json, NULL, 6, &n);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    pardo_tensor *t = test_tensor_from(PARDO_F32, 0, NULL, (double[]){1});
    ck_assert_int_eq(pardo_tensor_list_add(&l, "keep", t, &st), PARDO_OK);
    pardo_tensor_release(t);
    ck_assert_int_eq(parse_exact(img, n, "x.safetensors", &l, &st), PARDO_EPARSE);
    ck_assert_int_eq(l.n, 1);
    ck_assert_str_eq(l.names[0], "keep");
    pardo_tensor_list_clear(&l);
    free(img);
}
END_TEST

START_TEST(test_err_read_io) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    ck_assert_int_eq(pardo_safetensors_read(path, &l, &st), PARDO_EIO);
    assert_msg(&st, path, strerror(ENOENT), NULL);
    ck_assert_int_eq(l.n, 0);
    test_dir_remove(dir);
}
END_TEST

/* Duplicate or reserved names: PARDO_EINVAL and no file. */
START_TEST(test_err_write_names) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status st;
    pardo_tensor *t = test_tensor_from(PARDO_F32, 0, NULL, (double[]){1});
    ck_assert_int_eq(pardo_tensor_list_add(&l, "w", t, &st), PARDO_OK);
    ck_assert_int_eq(pardo_tensor_list_add(&l, "b", t, &st), PARDO_OK);
    ck_assert_int_eq(pardo_tensor_list_add(&l, "w", t, &st), PARDO_OK);
    ck_assert_int_eq(pardo_safetensors_write(path, &l, &st), PARDO_EINVAL);
    assert_msg(&st, path, "duplicate tensor name 'w'", "tensors 0 and 2", NULL);
    ck_assert_int_eq(test_dir_count(dir), 0);
    pardo_tensor_list_clear(&l);
    ck_assert_int_eq(pardo_tensor_list_add(&l, "__metadata__", t, &st), PARDO_OK);
    ck_assert_int_eq(pardo_safetensors_write(path, &l, &st), PARDO_EINVAL);
    assert_msg(&st, path, "'__metadata__' is reserved", NULL);
    ck_assert_int_eq(test_dir_count(dir), 0);
    pardo_tensor_list_clear(&l);
    pardo_tensor_release(t);
    test_dir_remove(dir);
}
END_TEST

/* A folder that does not exist, a folder in the way of the rename, and a
 * write that fails part-way: EIO, no temporary file left, an old file intact. */
START_TEST(test_err_write_io) {
    char dir[64], path[160];
    test_scratch_dir(dir, sizeof dir);
    pardo_tensor_list l;
    make_list(&l);
    pardo_status st;

    snprintf(path, sizeof path, "%s/no/such/out.safetensors", dir);
    ck_assert_int_eq(pardo_safetensors_write(path, &l, &st), PARDO_EIO);
    assert_msg(&st, path, strerror(ENOENT), NULL);
    ck_assert_int_eq(test_dir_count(dir), 0);

    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(pardo_safetensors_write(path, &l, &st), PARDO_EIO);
    assert_msg(&st, path, "rename", NULL);
    ck_assert_int_eq(test_dir_count(dir), 1);
    ck_assert_int_eq(rmdir(path), 0);

    test_write_file(path, "old checkpoint", 14);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 256;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = pardo_safetensors_write(path, &l, &st);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    ck_assert_int_eq(rc, PARDO_EIO);
    assert_msg(&st, path, "write", strerror(EFBIG), NULL);
    size_t n;
    unsigned char *b = test_read_file(path, &n);
    ck_assert_uint_eq(n, 14);
    ck_assert_int_eq(memcmp(b, "old checkpoint", 14), 0);
    free(b);
    ck_assert_int_eq(test_dir_count(dir), 1);

    if (geteuid() != 0) { /* root writes into read-only folders */
        ck_assert_int_eq(chmod(dir, 0555), 0);
        ck_assert_int_eq(pardo_safetensors_write(path, &l, &st), PARDO_EIO);
        assert_msg(&st, path, strerror(EACCES), NULL);
        ck_assert_int_eq(test_dir_count(dir), 1);
        chmod(dir, 0755);
    }
    pardo_tensor_list_clear(&l);
    test_dir_remove(dir);
}
END_TEST

/* Every proper prefix of valid files fails cleanly (ASan watches reads). */
START_TEST(test_err_every_truncation) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    pardo_tensor_list l;
    make_list(&l);
    pardo_status st;
    ck_assert_msg(pardo_safetensors_write(path, &l, &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor_list_clear(&l);
    const char *files[] = {test_fixture("model.safetensors"), path};
    for (int f = 0; f < 2; f++) {
        size_t n;
        unsigned char *b = test_read_file(files[f], &n);
        for (size_t len = 0; len <= n; len++) {
            int rc = parse_exact(b, len, "cut.safetensors", &l, &st);
            if (len == n) {
                ck_assert_msg(rc == PARDO_OK, "%s", st.msg);
                ck_assert_int_gt(l.n, 0);
                pardo_tensor_list_clear(&l);
            } else {
                ck_assert_msg(rc == PARDO_EPARSE, "cut at %zu: got %s", len, pardo_code_name(rc));
                ck_assert_int_eq(l.n, 0);
                ck_assert_msg(strncmp(st.msg, "cut.safetensors: ", 17) == 0, "%s", st.msg);
            }
        }
        free(b);
    }
    test_dir_remove(dir);
}
END_TEST

/* Changing any byte of the length or the header either still parses to
 * entries that fit the file, or fails cleanly with a message. */
START_TEST(test_err_header_byte_flips) {
    static const unsigned char subst[] = {0x00, 0xff, 0x80, ' ', '"', ',', ':', '[', ']', '{', '}',
                                          '-',  '0',  '9',  'e', '.', 'F', 'I', '\\', 'x', 0x01};
    size_t n;
    unsigned char *b = test_read_file(test_fixture("model.safetensors"), &n);
    size_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (size_t)b[i] << (8 * i);
    int ok = 0, bad = 0;
    for (size_t pos = 0; pos < 8 + hl; pos++) {
        unsigned char orig = b[pos];
        for (size_t s = 0; s <= sizeof subst; s++) {
            b[pos] = s < sizeof subst ? subst[s] : (unsigned char)(orig ^ 0x01);
            pardo_tensor_list l;
            pardo_tensor_list_init(&l);
            pardo_status st;
            int rc = parse_exact(b, n, "flip.safetensors", &l, &st);
            if (rc == PARDO_OK) {
                size_t total = 0;
                for (int k = 0; k < l.n; k++) total += l.tensors[k]->nbytes;
                ck_assert_uint_le(total, n);
                pardo_tensor_list_clear(&l);
                ok++;
            } else {
                ck_assert_msg(rc == PARDO_EPARSE, "byte %zu: got %s: %s", pos, pardo_code_name(rc), st.msg);
                ck_assert_int_eq(l.n, 0);
                ck_assert_msg(strncmp(st.msg, "flip.safetensors: ", 18) == 0, "%s", st.msg);
                bad++;
            }
        }
        b[pos] = orig;
    }
    ck_assert_int_gt(ok, 0);
    ck_assert_int_gt(bad, 0);
    free(b);
}
END_TEST

Suite *make_safetensors_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_round_trip);
    tcase_add_test(core, test_empty_list);
    tcase_add_test(core, test_odd_names);
    tcase_add_test(core, test_read_fixture);
    tcase_add_test(core, test_parse_appends);
    suite_add_tcase(s, core);

    TCase *err = tcase_create("Errors");
    tcase_set_timeout(err, 60);
    tcase_add_test(err, test_err_short_and_lengths);
    tcase_add_test(err, test_err_not_json);
    tcase_add_test(err, test_err_entry_shape_of_json);
    tcase_add_test(err, test_err_dtype);
    tcase_add_test(err, test_err_shape);
    tcase_add_test(err, test_err_offsets);
    tcase_add_test(err, test_err_layout);
    tcase_add_test(err, test_err_duplicate_names);
    tcase_add_test(err, test_err_metadata);
    tcase_add_test(err, test_err_list_untouched);
    tcase_add_test(err, test_err_read_io);
    tcase_add_test(err, test_err_write_names);
    tcase_add_test(err, test_err_write_io);
    tcase_add_test(err, test_err_every_truncation);
    tcase_add_test(err, test_err_header_byte_flips);
    suite_add_tcase(s, err);
    return s;
}
