/* npy_close.c - the CLI tests' comparison of two .npy files without Python:
 *   npy_close GOT.npy WANT.npy [RTOL [ATOL]]
 * exits 0 when dtypes and shapes are equal and every element is within
 * ATOL + RTOL * |want| (defaults 1e-4, 1e-5; NaN equal to NaN), else 1 with
 * the first difference on stderr; 2 for a file it cannot read. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/npy.h"

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: npy_close GOT.npy WANT.npy [RTOL [ATOL]]\n");
        return 2;
    }
    double rtol = argc > 3 ? atof(argv[3]) : 1e-4, atol = argc > 4 ? atof(argv[4]) : 1e-5;
    pardo_status st;
    pardo_status_clear(&st);
    pardo_tensor *a = NULL, *b = NULL;
    if (pardo_npy_read(argv[1], &a, &st) != PARDO_OK || pardo_npy_read(argv[2], &b, &st) != PARDO_OK) {
        fprintf(stderr, "npy_close: %s\n", st.msg);
        return 2;
    }
    int rc = 0;
    char sa[128], sb[128];
    if (a->dtype != b->dtype || !pardo_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) {
        fprintf(stderr, "npy_close: %s %s vs %s %s\n", pardo_dtype_name(a->dtype),
                pardo_shape_str(a->ndim, a->shape, sa, sizeof sa), pardo_dtype_name(b->dtype),
                pardo_shape_str(b->ndim, b->shape, sb, sizeof sb));
        rc = 1;
    }
    for (int64_t i = 0; rc == 0 && i < a->numel; i++) {
        double x = pardo_tensor_get_f64(a, i), y = pardo_tensor_get_f64(b, i);
        bool ok = isnan(x) || isnan(y) ? isnan(x) && isnan(y) : fabs(x - y) <= atol + rtol * fabs(y);
        if (!ok) {
            fprintf(stderr, "npy_close: element %lld: %.9g vs %.9g (rtol %g, atol %g)\n", (long long)i, x, y, rtol,
                    atol);
            rc = 1;
        }
    }
    pardo_tensor_release(a);
    pardo_tensor_release(b);
    return rc;
}
