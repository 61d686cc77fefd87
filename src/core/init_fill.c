/* init_fill.c - deterministic tensor fills from a pardo_init (see init_fill.h). */
#include "core/init_fill.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* splitmix64's output function. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Draw i of the stream keyed by key: splitmix64 in counter mode. */
static uint64_t draw(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL); }

/* Uniform in [0, 1) with 53 random bits. */
static double unit(uint64_t bits) { return (double)(bits >> 11) * 0x1.0p-53; }

int pardo_init_fans(int ndim, const int64_t *shape, int64_t *fan_in, int64_t *fan_out, pardo_status *st) {
    if (ndim < 1) return pardo_errorf(st, PARDO_EINVAL, "fan-based fills need a tensor of rank >= 1, got a scalar");
    if (ndim == 1) {
        *fan_in = *fan_out = shape[0];
    } else if (ndim == 2) {
        *fan_in = shape[0];
        *fan_out = shape[1];
    } else {
        int64_t rf = 1;
        for (int d = 2; d < ndim; d++) rf *= shape[d];
        *fan_in = shape[1] * rf;
        *fan_out = shape[0] * rf;
    }
    return PARDO_OK;
}

static int need_finite(const char *key, double v, pardo_status *st) {
    return isfinite(v) ? PARDO_OK : pardo_errorf(st, PARDO_EINVAL, "'%s' is %g, expected a finite number", key, v);
}

/* PARDO_EINVAL unless v converts to an integer of dtype dt without
 * undefined behaviour (finite and in range). */
static int check_int_value(double v, pardo_dtype dt, pardo_status *st) {
    double lo, hi; /* v must lie in [lo, hi) */
    switch (dt) {
    case PARDO_I8: lo = -128.0, hi = 128.0; break;
    case PARDO_I16: lo = -32768.0, hi = 32768.0; break;
    case PARDO_I32: lo = -2147483648.0, hi = 2147483648.0; break;
    case PARDO_U8: lo = 0, hi = 256.0; break;
    case PARDO_U16: lo = 0, hi = 65536.0; break;
    case PARDO_U32: lo = 0, hi = 4294967296.0; break;
    case PARDO_U64: lo = 0, hi = 18446744073709551616.0; break;
    default: lo = -9223372036854775808.0, hi = 9223372036854775808.0; break;
    }
    if (!(v >= lo && v < hi))
        return pardo_errorf(st, PARDO_EINVAL, "'value' is %g, expected a number that fits %s", v, pardo_dtype_name(dt));
    return PARDO_OK;
}

int pardo_init_check(const pardo_init *init, pardo_dtype dt, int ndim, const int64_t *shape, pardo_status *st) {
    int rc = PARDO_OK;
    int64_t fi, fo;
    if (init->fill == PARDO_FILL_CONSTANT)
        return pardo_dtype_is_integer(dt) ? check_int_value(init->value, dt, st) : PARDO_OK;
    if (init->fill < PARDO_FILL_CONSTANT || init->fill > PARDO_FILL_KAIMING_UNIFORM)
        return pardo_errorf(st, PARDO_EINVAL,
                            "fill is %s, expected constant, uniform, normal, xavier_uniform or kaiming_uniform",
                            pardo_fill_name(init->fill));
    if (!pardo_dtype_is_float(dt))
        return pardo_errorf(st, PARDO_EINVAL,
                            "fill '%s' makes float values, expected dtype float32 or float64 (got %s)",
                            pardo_fill_name(init->fill), pardo_dtype_name(dt));
    switch (init->fill) {
    case PARDO_FILL_UNIFORM:
        if ((rc = need_finite("low", init->low, st)) != PARDO_OK) return rc;
        if ((rc = need_finite("high", init->high, st)) != PARDO_OK) return rc;
        if (init->low > init->high)
            return pardo_errorf(st, PARDO_EINVAL, "'low' is %g and 'high' is %g, expected low <= high", init->low,
                                init->high);
        return PARDO_OK;
    case PARDO_FILL_NORMAL:
        if ((rc = need_finite("mean", init->mean, st)) != PARDO_OK) return rc;
        if ((rc = need_finite("std", init->std, st)) != PARDO_OK) return rc;
        if (init->std < 0) return pardo_errorf(st, PARDO_EINVAL, "'std' is %g, expected >= 0", init->std);
        return PARDO_OK;
    default: /* xavier_uniform, kaiming_uniform */ return pardo_init_fans(ndim, shape, &fi, &fo, st);
    }
}

/* Stores v as element i of a float tensor; keeps float32 values of a
 * uniform draw below `below` (when finite) against rounding up. */
static void put(void *p, pardo_dtype dt, int64_t i, double v, double below) {
    if (dt == PARDO_F64) {
        ((double *)p)[i] = v;
        return;
    }
    float f = (float)v;
    if ((double)f >= below && (double)f > v) f = nextafterf(f, -INFINITY);
    ((float *)p)[i] = f;
}

static void fill_uniform(void *p, pardo_dtype dt, int64_t n, uint64_t key, double low, double high) {
    const double below = high > low ? high : HUGE_VAL;
    for (int64_t i = 0; i < n; i++) put(p, dt, i, low + (high - low) * unit(draw(key, (uint64_t)i)), below);
}

/* Box-Muller on draws (2j, 2j + 1) gives elements 2j (cos) and 2j + 1 (sin). */
static void fill_normal(void *p, pardo_dtype dt, int64_t n, uint64_t key, double mean, double std) {
    const double two_pi = 6.283185307179586476925287;
    for (int64_t j = 0; 2 * j < n; j++) {
        double u1 = 1.0 - unit(draw(key, (uint64_t)(2 * j))); /* (0, 1]: log is finite */
        double u2 = unit(draw(key, (uint64_t)(2 * j + 1)));
        double r = sqrt(-2.0 * log(u1)), th = two_pi * u2;
        put(p, dt, 2 * j, mean + std * r * cos(th), HUGE_VAL);
        if (2 * j + 1 < n) put(p, dt, 2 * j + 1, mean + std * r * sin(th), HUGE_VAL);
    }
}

static void fill_constant(void *p, pardo_dtype dt, int64_t n, double v) {
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case PARDO_F32: ((float *)p)[i] = (float)v; break;
        case PARDO_F64: ((double *)p)[i] = v; break;
        case PARDO_I32: ((int32_t *)p)[i] = (int32_t)v; break;
        case PARDO_I64: ((int64_t *)p)[i] = (int64_t)v; break;
        default: pardo_elem_set_f64(p, dt, i, v); break; /* bool, the narrow ints, the halves */
        }
    }
}

int pardo_init_fill(pardo_tensor *t, const pardo_init *init, pardo_status *st) {
    int rc = pardo_init_check(init, t->dtype, t->ndim, t->shape, st);
    if (rc != PARDO_OK) return rc;
    void *p = pardo_tensor_mutable_cpu(t, st);
    if (!p) return st->code;
    const int64_t n = t->numel;
    const uint64_t key = mix64(init->seed ^ 0x5bd1e9955bd1e995ULL);
    int64_t fi, fo;
    switch (init->fill) {
    case PARDO_FILL_CONSTANT: fill_constant(p, t->dtype, n, init->value); break;
    case PARDO_FILL_UNIFORM: fill_uniform(p, t->dtype, n, key, init->low, init->high); break;
    case PARDO_FILL_NORMAL: fill_normal(p, t->dtype, n, key, init->mean, init->std); break;
    default: /* xavier_uniform, kaiming_uniform; n == 0 has nothing to draw (and may have a zero fan) */
        if (n == 0) break;
        pardo_init_fans(t->ndim, t->shape, &fi, &fo, st);
        double bound = init->fill == PARDO_FILL_XAVIER_UNIFORM ? sqrt(6.0 / (double)(fi + fo)) : sqrt(6.0 / (double)fi);
        fill_uniform(p, t->dtype, n, key, -bound, bound);
        break;
    }
    return PARDO_OK;
}
