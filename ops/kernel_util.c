/* kernel_util.c - broadcast planning for the CPU kernels (see kernel_util.h). */
#include "kernel_util.h"

void pardo_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
}

int pardo_bcast2_plan(int a_ndim, const int64_t *a, int b_ndim, const int64_t *b, pardo_bcast2 *p, pardo_status *st) {
    int nd = a_ndim > b_ndim ? a_ndim : b_ndim;
    int64_t ca[PARDO_MAX_DIMS], cb[PARDO_MAX_DIMS];
    pardo_contiguous_strides(a_ndim, a, ca);
    pardo_contiguous_strides(b_ndim, b, cb);

    /* Full-rank output shape and per-dim strides (0 where an operand is 1 or absent). */
    int64_t sa[PARDO_MAX_DIMS], sb[PARDO_MAX_DIMS];
    p->ndim = nd;
    p->numel = 1;
    for (int i = 0; i < nd; i++) {
        int ia = a_ndim - nd + i, ib = b_ndim - nd + i;
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char s1[128], s2[128];
            return pardo_errorf(st, PARDO_ESHAPE, "shapes %s and %s do not broadcast (dim %d: %lld vs %lld)",
                                pardo_shape_str(a_ndim, a, s1, sizeof s1), pardo_shape_str(b_ndim, b, s2, sizeof s2), i,
                                (long long)da, (long long)db);
        }
        p->shape[i] = da == 1 ? db : da;
        sa[i] = da == 1 ? 0 : ca[ia];
        sb[i] = db == 1 ? 0 : cb[ib];
        p->numel *= p->shape[i];
    }

    /* Drop unit dims, then merge neighbours that both operands walk alike. */
    p->nd = 0;
    for (int i = 0; i < nd; i++) {
        if (p->shape[i] == 1) continue;
        int m = p->nd;
        if (m > 0 && p->sa[m - 1] == sa[i] * p->shape[i] && p->sb[m - 1] == sb[i] * p->shape[i]) {
            p->dims[m - 1] *= p->shape[i];
            p->sa[m - 1] = sa[i];
            p->sb[m - 1] = sb[i];
            continue;
        }
        p->dims[m] = p->shape[i];
        p->sa[m] = sa[i];
        p->sb[m] = sb[i];
        p->nd++;
    }
    if (p->nd == 0) { /* every dim is 1: one element */
        p->nd = 1;
        p->dims[0] = 1;
        p->sa[0] = p->sb[0] = 1;
    }
    return PARDO_OK;
}
