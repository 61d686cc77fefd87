/* kernel_util.c - broadcast planning and the broadcast gradient helpers for
 * the CPU kernels (see kernel_util.h). */
#include "kernel_util.h"

#include <string.h>

#include "op.h"

typedef struct chunks {
    void (*fn)(void *arg, int64_t e0, int64_t e1);
    void *arg;
    int64_t n;
} chunks;

static void run_range(void *p, int64_t begin, int64_t end) {
    const chunks *c = p;
    c->fn(c->arg, begin * PARDO_CHUNK, end * PARDO_CHUNK < c->n ? end * PARDO_CHUNK : c->n);
}

int pardo_run_chunks(pardo_kernel_ctx *ctx, int64_t n, void (*fn)(void *arg, int64_t e0, int64_t e1), void *arg) {
    if (n < PARDO_PAR_MIN) {
        if (n > 0) fn(arg, 0, n);
        return PARDO_OK;
    }
    chunks c = {fn, arg, n};
    return pardo_parallel_for(ctx, (n + PARDO_CHUNK - 1) / PARDO_CHUNK, run_range, &c);
}

int pardo_run_rows(pardo_kernel_ctx *ctx, int64_t rows, int64_t row_elems, void (*fn)(void *arg, int64_t r0, int64_t r1),
                   void *arg) {
    if (rows <= 1 || rows * row_elems < PARDO_PAR_MIN) {
        if (rows > 0) fn(arg, 0, rows);
        return PARDO_OK;
    }
    return pardo_parallel_for(ctx, rows, fn, arg);
}

void pardo_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
}

int pardo_bcast2_plan(int a_ndim, const int64_t *a, int b_ndim, const int64_t *b, pardo_bcast2 *p, pardo_status *st) {
    if (pardo_shape_equal(a_ndim, a, b_ndim, b)) { /* the common case: one contiguous run, what the merge below gives */
        p->ndim = a_ndim;
        p->numel = 1;
        for (int i = 0; i < a_ndim; i++) p->numel *= (p->shape[i] = a[i]);
        p->nd = 1;
        p->dims[0] = p->numel;
        p->sa[0] = p->sb[0] = 1;
        return PARDO_OK;
    }
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

/* Plans `from` broadcast to `to` (returns the plan of from against to, so
 * p->sa walks `from` and p->sb walks `to`); PARDO_ESHAPE unless the result
 * has exactly the shape `to`. */
static int plan_broadcast_to(int from_nd, const int64_t *from, int to_nd, const int64_t *to, pardo_bcast2 *p,
                             pardo_status *st) {
    char s1[128], s2[128];
    if (pardo_bcast2_plan(from_nd, from, to_nd, to, p, st) != PARDO_OK ||
        !pardo_shape_equal(p->ndim, p->shape, to_nd, to))
        return pardo_errorf(st, PARDO_ESHAPE, "shape %s does not broadcast to %s",
                            pardo_shape_str(from_nd, from, s1, sizeof s1), pardo_shape_str(to_nd, to, s2, sizeof s2));
    return PARDO_OK;
}

/* Defines NAME, pardo_sum_to_shape for element type T: walks src in
 * row-major order with dst's offset in o.off[0]. With scale 1 or -1 the
 * contiguous runs are plain T adds, which give the same bits as the sum in
 * double rounded to T (a sum of two floats rounded to double and then to
 * float is the float sum), and vectorise. */
#define SUM_TO_KERNEL(NAME, T)                                                                                         \
    PARDO_SIMD_CLONES static void NAME(const pardo_bcast2 *p, const T *src, T *dst, int64_t dst_numel,               \
                                       double scale) {                                                          \
        const int inner = p->nd - 1;                                                                                   \
        const int64_t n = p->dims[inner], sd = p->sa[inner];                                                           \
        if (p->numel == dst_numel) { /* nothing is summed: a scaled copy */                                            \
            if (scale == 1) memcpy(dst, src, (size_t)dst_numel * sizeof(T));                                           \
            else                                                                                                       \
                for (int64_t i = 0; i < dst_numel; i++) dst[i] = (T)(scale * (double)src[i]);                          \
            return;                                                                                                    \
        }                                                                                                              \
        for (int64_t i = 0; i < dst_numel; i++) dst[i] = 0;                                                            \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, inner, p->dims, p->sa, NULL);                                                               \
        for (int64_t base = 0; base < p->numel; base += n, pardo_odo_next(&o)) {                                       \
            const T *restrict ps = src + base;                                                                         \
            T *restrict pd = dst + o.off[0];                                                                           \
            if (sd == 0) {                                                                                             \
                double acc = 0;                                                                                        \
                for (int64_t i = 0; i < n; i++) acc += (double)ps[i];                                                  \
                pd[0] = (T)((double)pd[0] + scale * acc);                                                              \
            } else if (sd == 1 && scale == 1) {                                                                        \
                for (int64_t i = 0; i < n; i++) pd[i] = pd[i] + ps[i];                                                 \
            } else if (sd == 1 && scale == -1) {                                                                       \
                for (int64_t i = 0; i < n; i++) pd[i] = pd[i] - ps[i];                                                 \
            } else {                                                                                                   \
                for (int64_t i = 0; i < n; i++) pd[i * sd] = (T)((double)pd[i * sd] + scale * (double)ps[i]);          \
            }                                                                                                          \
        }                                                                                                              \
    }

SUM_TO_KERNEL(sum_to_f32, float)
SUM_TO_KERNEL(sum_to_f64, double)

int pardo_sum_to_shape(pardo_dtype dt, const void *src, int src_nd, const int64_t *src_shape, void *dst, int dst_nd,
                       const int64_t *dst_shape, double scale, pardo_status *st) {
    pardo_bcast2 p;
    int rc = plan_broadcast_to(dst_nd, dst_shape, src_nd, src_shape, &p, st);
    if (rc != PARDO_OK) return rc;
    const int64_t dst_numel = pardo_shape_numel(dst_nd, dst_shape);
    if (p.numel == 0) { /* nothing to sum: zeros */
        if (dt == PARDO_F32) memset(dst, 0, (size_t)dst_numel * sizeof(float));
        else memset(dst, 0, (size_t)dst_numel * sizeof(double));
        return PARDO_OK;
    }
    if (dt == PARDO_F32) sum_to_f32(&p, src, dst, dst_numel, scale);
    else sum_to_f64(&p, src, dst, dst_numel, scale);
    return PARDO_OK;
}

/* Defines NAME, pardo_strided_gather for elements of type T. */
#define GATHER_KERNEL(NAME, T)                                                                                         \
    static void NAME(const void *vs, void *vd, int nd, const int64_t *dims, const int64_t *sstr, int64_t numel) {      \
        const T *s = vs;                                                                                               \
        T *d = vd;                                                                                                     \
        const int64_t n = dims[nd - 1], step = sstr[nd - 1];                                                           \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, nd - 1, dims, sstr, NULL);                                                                  \
        if (step == 1) /* runs of the innermost dim are contiguous in src too (a transpose of outer dims) */          \
            for (int64_t base = 0; base < numel; base += n, pardo_odo_next(&o))                                        \
                memcpy(d + base, s + o.off[0], sizeof(T) * (size_t)n);                                                 \
        else                                                                                                           \
            for (int64_t base = 0; base < numel; base += n, pardo_odo_next(&o))                                        \
                for (int64_t i = 0; i < n; i++) d[base + i] = s[o.off[0] + i * step];                                  \
    }

GATHER_KERNEL(gather_1, uint8_t)
GATHER_KERNEL(gather_2, uint16_t)
GATHER_KERNEL(gather_4, uint32_t)
GATHER_KERNEL(gather_8, uint64_t)

void pardo_strided_gather(size_t es, const void *src, void *dst, int nd, const int64_t *dims,
                          const int64_t *src_strides, int64_t numel) {
    if (es == 1) gather_1(src, dst, nd, dims, src_strides, numel);
    else if (es == 2) gather_2(src, dst, nd, dims, src_strides, numel);
    else if (es == 4) gather_4(src, dst, nd, dims, src_strides, numel);
    else gather_8(src, dst, nd, dims, src_strides, numel);
}

/* Defines NAME, pardo_expand_to_shape for element type T: walks dst in
 * row-major order with src's offset in o.off[0]. */
#define EXPAND_KERNEL(NAME, T)                                                                                         \
    PARDO_SIMD_CLONES static void NAME(const pardo_bcast2 *p, const T *src, T *dst, double scale) {                    \
        const int inner = p->nd - 1;                                                                                   \
        const int64_t n = p->dims[inner], ss = p->sa[inner];                                                           \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, inner, p->dims, p->sa, NULL);                                                               \
        for (int64_t base = 0; base < p->numel; base += n, pardo_odo_next(&o)) {                                       \
            const T *ps = src + o.off[0];                                                                              \
            T *pd = dst + base;                                                                                        \
            for (int64_t i = 0; i < n; i++) pd[i] = (T)(scale * (double)ps[i * ss]);                                   \
        }                                                                                                              \
    }

EXPAND_KERNEL(expand_f32, float)
EXPAND_KERNEL(expand_f64, double)

int pardo_expand_to_shape(pardo_dtype dt, const void *src, int src_nd, const int64_t *src_shape, void *dst,
                          int dst_nd, const int64_t *dst_shape, double scale, pardo_status *st) {
    pardo_bcast2 p;
    int rc = plan_broadcast_to(src_nd, src_shape, dst_nd, dst_shape, &p, st);
    if (rc != PARDO_OK || p.numel == 0) return rc;
    if (dt == PARDO_F32) expand_f32(&p, src, dst, scale);
    else expand_f64(&p, src, dst, scale);
    return PARDO_OK;
}

int pardo_expect_ordered(const pardo_type *t, const char *what, pardo_status *st) {
    if (t->dtype >= 0 && t->dtype < PARDO_DTYPE_COUNT && t->dtype != PARDO_BOOL) return PARDO_OK;
    return pardo_errorf(st, PARDO_ESHAPE, "%s has dtype %s, expected " PARDO_ORDERED_NAMES, what,
                        pardo_dtype_name(t->dtype));
}
