/* tensor_print.c - one-line tensor summaries (see tensor_print.h). */
#include "core/tensor_print.h"

void pardo_tensor_print(FILE *f, const char *name, const pardo_tensor *t, int max_values) {
    char shape[160];
    fprintf(f, "%s: %s %s = [", name, pardo_dtype_name(t->dtype), pardo_shape_str(t->ndim, t->shape, shape, sizeof shape));
    int64_t n = t->numel < max_values ? t->numel : max_values;
    for (int64_t i = 0; i < n; i++) {
        double v = pardo_tensor_get_f64(t, i);
        if (t->dtype == PARDO_BOOL) fprintf(f, "%s%s", i ? ", " : "", v != 0 ? "true" : "false");
        else if (pardo_dtype_is_integer(t->dtype)) fprintf(f, "%s%lld", i ? ", " : "", (long long)v);
        else fprintf(f, "%s%.6g", i ? ", " : "", v);
    }
    fprintf(f, "%s]\n", t->numel > n ? ", ..." : "");
}
