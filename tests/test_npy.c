/* test_npy.c - minimal .npy reader for op fixtures (see test_npy.h). */
#include "test_npy.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

pardo_tensor *test_npy_load(const char *name) {
    const char *path = test_fixture(name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open fixture %s (run from the repository root)", path);
    unsigned char pre[10];
    ck_assert_msg(fread(pre, 1, 10, f) == 10 && memcmp(pre, "\x93NUMPY", 6) == 0 && pre[6] == 1,
                  "%s: not a version 1 .npy file", path);
    size_t hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    char *hdr = calloc(hlen + 1, 1);
    ck_assert_ptr_nonnull(hdr);
    ck_assert_msg(fread(hdr, 1, hlen, f) == hlen, "%s: short header", path);

    pardo_dtype dt = PARDO_DTYPE_UNKNOWN;
    if (strstr(hdr, "'descr': '<f4'")) dt = PARDO_F32;
    else if (strstr(hdr, "'descr': '<f8'")) dt = PARDO_F64;
    else if (strstr(hdr, "'descr': '<i4'")) dt = PARDO_I32;
    else if (strstr(hdr, "'descr': '<i8'")) dt = PARDO_I64;
    ck_assert_msg(dt != PARDO_DTYPE_UNKNOWN, "%s: unsupported descr in %s", path, hdr);
    ck_assert_msg(strstr(hdr, "'fortran_order': False") != NULL, "%s: not C order", path);
    const char *s = strstr(hdr, "'shape': (");
    ck_assert_msg(s != NULL, "%s: no shape in %s", path, hdr);
    s += strlen("'shape': (");
    int64_t shape[PARDO_MAX_DIMS];
    int nd = 0;
    while (*s != ')') {
        char *end;
        long long v = strtoll(s, &end, 10);
        ck_assert_msg(end != s && nd < PARDO_MAX_DIMS, "%s: bad shape in %s", path, hdr);
        shape[nd++] = v;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    free(hdr);

    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(dt, nd, shape, &st);
    ck_assert_msg(t != NULL, "%s: %s", path, st.msg);
    if (t->nbytes) ck_assert_msg(fread(pardo_tensor_data(t), 1, t->nbytes, f) == t->nbytes, "%s: short data", path);
    fclose(f);
    return t;
}
