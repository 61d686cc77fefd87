/* csv.c - CSV feeds and fetches, and the feed dtype casts (see csv.h). */
#include "io/csv.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/file_io.h"

bool pardo_csv_is_csv_path(const char *path) {
    size_t n = strlen(path);
    return n >= 4 && strcasecmp(path + n - 4, ".csv") == 0;
}

/* A line of the text: [b, e) without its end of line. */
typedef struct line {
    const char *b, *e;
} line;

static bool line_blank(line l) {
    for (const char *c = l.b; c < l.e; c++)
        if (!isspace((unsigned char)*c)) return false;
    return true;
}

/* Field k of a line starts at *pos; sets *fe to its end (a comma or the line's end). */
static const char *field_end(const char *f, const char *e) {
    const char *c = memchr(f, ',', (size_t)(e - f));
    return c ? c : e;
}

/* Parses field [f, fe) as dtype dt into *v (double) or *iv (integer). A
 * short, NUL-terminated copy is parsed. 0 ok; else a reason. */
static const char *parse_field(const char *f, const char *fe, pardo_dtype dt, double *v, int64_t *iv) {
    while (f < fe && isspace((unsigned char)*f)) f++;
    while (fe > f && isspace((unsigned char)fe[-1])) fe--;
    if (f == fe) return "an empty field";
    char buf[128];
    size_t n = (size_t)(fe - f);
    if (n >= sizeof buf) return "a field too long to be a number";
    memcpy(buf, f, n);
    buf[n] = '\0';
    char *end = NULL;
    errno = 0;
    if (dt == PARDO_BOOL) {
        if (strcmp(buf, "0") == 0 || strcasecmp(buf, "false") == 0) *iv = 0;
        else if (strcmp(buf, "1") == 0 || strcasecmp(buf, "true") == 0) *iv = 1;
        else return "not 0, 1, true or false";
        return NULL;
    }
    if (dt == PARDO_F32 || dt == PARDO_F64) {
        if (dt == PARDO_F32) *v = (double)strtof(buf, &end);
        else *v = strtod(buf, &end);
        if (end == buf || *end) return "not a number";
        return NULL; /* overflow gives inf, as numpy's loadtxt */
    }
    long long x = strtoll(buf, &end, 10);
    if (end == buf || *end) return "not an integer";
    if (errno == ERANGE || (dt == PARDO_I32 && (x < INT32_MIN || x > INT32_MAX))) return "out of the dtype's range";
    *iv = (int64_t)x;
    return NULL;
}

static void store(void *data, pardo_dtype dt, int64_t i, double v, int64_t iv) {
    switch (dt) {
    case PARDO_F32: ((float *)data)[i] = (float)v; break;
    case PARDO_F64: ((double *)data)[i] = v; break;
    case PARDO_I32: ((int32_t *)data)[i] = (int32_t)iv; break;
    case PARDO_I64: ((int64_t *)data)[i] = iv; break;
    default: ((uint8_t *)data)[i] = (uint8_t)(iv != 0); break;
    }
}

/* True when every field of the line fails to parse as a float: a header. */
static bool is_header(line l) {
    for (const char *f = l.b; f <= l.e;) {
        const char *fe = field_end(f, l.e);
        double v;
        int64_t iv;
        if (!parse_field(f, fe, PARDO_F64, &v, &iv)) return false;
        f = fe + 1;
    }
    return true;
}

int pardo_csv_parse(const char *buf, size_t n, const char *name, const pardo_type *ty, pardo_tensor **out,
                    pardo_status *st) {
    *out = NULL;
    char shape[160];
    if (ty->ndim < 0) return pardo_errorf(st, PARDO_EINVAL, "%s: the var's rank is unknown: a CSV needs its shape", name);
    if (pardo_dtype_is_extra(ty->dtype))
        return pardo_errorf(st, PARDO_ENOTSUP,
                            "%s: a CSV reads float32, float64, int32, int64 or bool, not %s (use .npy)", name,
                            pardo_dtype_name(ty->dtype));
    int64_t cols = 1;
    for (int d = 1; d < ty->ndim; d++) {
        if (ty->shape[d] < 0)
            return pardo_errorf(st, PARDO_EINVAL, "%s: the var's shape %s has a run-time size past dim 0: a CSV "
                                "gives only the row count", name, pardo_shape_str(ty->ndim, ty->shape, shape, sizeof shape));
        cols *= ty->shape[d];
    }
    /* the lines: count them first (blank ones only at the end) */
    int64_t rows = 0, first = 0, lineno = 0;
    const char *p = buf, *end = buf + n;
    bool header = false, blank_seen = false;
    int64_t blank_line = 0;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        line l = {p, e ? e : end};
        if (l.e > l.b && l.e[-1] == '\r') l.e--;
        lineno++;
        if (line_blank(l)) {
            if (!blank_seen) blank_line = lineno;
            blank_seen = true;
        } else {
            if (blank_seen)
                return pardo_errorf(st, PARDO_EPARSE, "%s: line %" PRId64 ": a blank line between rows (only trailing "
                                    "blank lines are allowed)", name, blank_line);
            if (lineno == 1 && is_header(l)) {
                header = true;
                first = 1;
            } else {
                rows++;
            }
        }
        p = e ? e + 1 : end;
    }
    if (rows == 0) return pardo_errorf(st, PARDO_EPARSE, "%s: no rows of numbers%s", name, header ? " after the header" : "");
    int ndim = ty->ndim;
    int64_t sh[PARDO_MAX_DIMS];
    for (int d = 0; d < ndim; d++) sh[d] = ty->shape[d];
    if (ndim == 0) {
        if (rows != 1)
            return pardo_errorf(st, PARDO_ESHAPE, "%s: %" PRId64 " rows, but the var is a scalar (one row of one "
                                "number)", name, rows);
    } else {
        if (sh[0] >= 0 && sh[0] != rows)
            return pardo_errorf(st, PARDO_ESHAPE, "%s: %" PRId64 " rows, but the var's shape %s wants %" PRId64, name,
                                rows, pardo_shape_str(ty->ndim, ty->shape, shape, sizeof shape), sh[0]);
        sh[0] = rows;
    }
    pardo_tensor *t = pardo_tensor_new_cpu(ty->dtype, ndim, sh, st);
    if (!t) return st->code;
    void *data = pardo_tensor_mutable_cpu(t, st);
    if (!data && t->numel > 0) {
        pardo_tensor_release(t);
        return st->code;
    }
    int64_t i = 0;
    lineno = 0;
    for (p = buf; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        line l = {p, e ? e : end};
        if (l.e > l.b && l.e[-1] == '\r') l.e--;
        p = e ? e + 1 : end;
        lineno++;
        if (lineno <= first || line_blank(l)) continue;
        int64_t c = 0;
        for (const char *f = l.b; f <= l.e; c++) {
            const char *fe = field_end(f, l.e);
            if (c >= cols) {
                pardo_tensor_release(t);
                return pardo_errorf(st, PARDO_ESHAPE, "%s: line %" PRId64 ": more than %" PRId64 " fields; the var's "
                                    "shape %s wants %" PRId64 " a row", name, lineno, cols,
                                    pardo_shape_str(ty->ndim, ty->shape, shape, sizeof shape), cols);
            }
            double v = 0;
            int64_t iv = 0;
            const char *why = parse_field(f, fe, ty->dtype, &v, &iv);
            if (why) {
                int w = (int)(fe - f) > 40 ? 40 : (int)(fe - f);
                pardo_tensor_release(t);
                return pardo_errorf(st, PARDO_EPARSE, "%s: line %" PRId64 ", column %" PRId64 ": '%.*s' is %s; "
                                    "expected a %s number", name, lineno, c + 1, w, f, why,
                                    pardo_dtype_name(ty->dtype));
            }
            store(data, ty->dtype, i++, v, iv);
            f = fe + 1;
        }
        if (c != cols) {
            pardo_tensor_release(t);
            return pardo_errorf(st, PARDO_ESHAPE, "%s: line %" PRId64 ": %" PRId64 " fields, but the var's shape %s "
                                "wants %" PRId64 " a row", name, lineno, c,
                                pardo_shape_str(ty->ndim, ty->shape, shape, sizeof shape), cols);
        }
    }
    *out = t;
    return PARDO_OK;
}

static int csv_need(const unsigned char *buf, size_t n, const char *path, size_t *need, bool *whole,
                    pardo_status *st) {
    *whole = false;
    *need = PARDO_FILE_ALL;
    if (n && memchr(buf, '\0', n))
        return pardo_errorf(st, PARDO_EPARSE, "%s: a NUL byte: not a CSV text file", path);
    return PARDO_OK;
}

int pardo_csv_read(const char *path, const pardo_type *ty, pardo_tensor **out, pardo_status *st) {
    *out = NULL;
    pardo_file_view v;
    int rc = pardo_file_view_open(path, csv_need, &v, st);
    if (rc != PARDO_OK) return rc;
    if (v.n && memchr(v.data, '\0', v.n))
        rc = pardo_errorf(st, PARDO_EPARSE, "%s: a NUL byte: not a CSV text file", path);
    else
        rc = pardo_csv_parse((const char *)v.data, v.n, path, ty, out, st);
    pardo_file_view_close(&v);
    return rc;
}

int pardo_csv_write(const char *path, const pardo_tensor *t, pardo_status *st) {
    if (pardo_dtype_is_extra(t->dtype))
        return pardo_errorf(st, PARDO_ENOTSUP,
                            "%s: a CSV writes float32, float64, int32, int64 or bool, not %s (use .npy)", path,
                            pardo_dtype_name(t->dtype));
    int64_t rows = t->ndim > 0 ? t->shape[0] : 1;
    int64_t cols = rows > 0 ? t->numel / rows : 0;
    size_t cap = (size_t)t->numel * 26 + (size_t)rows + 1, len = 0;
    char *buf = malloc(cap);
    if (!buf) return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    const void *d = pardo_tensor_data(t);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) {
            int64_t i = r * cols + c;
            if (c) buf[len++] = ',';
            int w;
            switch (t->dtype) {
            case PARDO_F32: w = snprintf(buf + len, cap - len, "%.9g", (double)((const float *)d)[i]); break;
            case PARDO_F64: w = snprintf(buf + len, cap - len, "%.17g", ((const double *)d)[i]); break;
            case PARDO_I32: w = snprintf(buf + len, cap - len, "%" PRId32, ((const int32_t *)d)[i]); break;
            case PARDO_I64: w = snprintf(buf + len, cap - len, "%" PRId64, ((const int64_t *)d)[i]); break;
            default: w = snprintf(buf + len, cap - len, "%d", ((const uint8_t *)d)[i] != 0); break;
            }
            len += (size_t)w;
        }
        buf[len++] = '\n';
    }
    pardo_file_part part = {buf, len};
    int rc = pardo_file_write_atomic(path, &part, 1, st);
    free(buf);
    return rc;
}

int pardo_feed_cast_kind(pardo_dtype from, pardo_dtype to) {
    if (from == to) return 0;
    if ((from == PARDO_F64 && to == PARDO_F32) || (from == PARDO_F32 && to == PARDO_F64) ||
        (from == PARDO_I32 && to == PARDO_I64) || (from == PARDO_I64 && to == PARDO_I32))
        return 1;
    return -1;
}

int pardo_feed_cast(const pardo_tensor *t, pardo_dtype to, const char *source, const char *name, pardo_tensor **out,
                    pardo_status *st) {
    *out = NULL;
    char shape[160];
    int kind = pardo_feed_cast_kind(t->dtype, to);
    if (kind == 0) {
        *out = pardo_tensor_retain((pardo_tensor *)t);
        return PARDO_OK;
    }
    pardo_shape_str(t->ndim, t->shape, shape, sizeof shape);
    if (kind < 0)
        return pardo_errorf(st, PARDO_EINVAL, "%s: the file is %s %s, but the var '%s' is %s: a %s -> %s cast is "
                            "refused (cast the file: only float64 <-> float32 and int32 <-> int64 are made)", source,
                            pardo_dtype_name(t->dtype), shape, name, pardo_dtype_name(to), pardo_dtype_name(t->dtype),
                            pardo_dtype_name(to));
    const void *src = pardo_tensor_data(t);
    if (t->dtype == PARDO_I64 && to == PARDO_I32)
        for (int64_t i = 0; i < t->numel; i++) {
            int64_t x = ((const int64_t *)src)[i];
            if (x < INT32_MIN || x > INT32_MAX)
                return pardo_errorf(st, PARDO_EINVAL, "%s: the file is int64 %s, but the var '%s' is int32, and "
                                    "element %" PRId64 " (%" PRId64 ") does not fit in int32", source, shape, name, i, x);
        }
    pardo_tensor *o = pardo_tensor_new_cpu(to, t->ndim, t->shape, st);
    if (!o) return st->code;
    void *dst = pardo_tensor_mutable_cpu(o, st);
    if (!dst && o->numel > 0) {
        pardo_tensor_release(o);
        return st->code;
    }
    for (int64_t i = 0; i < t->numel; i++) {
        switch (to) {
        case PARDO_F32: ((float *)dst)[i] = (float)((const double *)src)[i]; break;
        case PARDO_F64: ((double *)dst)[i] = (double)((const float *)src)[i]; break;
        case PARDO_I64: ((int64_t *)dst)[i] = ((const int32_t *)src)[i]; break;
        default: ((int32_t *)dst)[i] = (int32_t)((const int64_t *)src)[i]; break;
        }
    }
    fprintf(stderr, "pardo: note: %s: %s %s cast to %s for '%s'\n", source, pardo_dtype_name(t->dtype), shape,
            pardo_dtype_name(to), name);
    *out = o;
    return PARDO_OK;
}
