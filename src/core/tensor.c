/* tensor.c - dtypes and reference-counted tensors (see tensor.h). */
#include "core/tensor.h"

#include "core/half.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[PARDO_DTYPE_COUNT] = {
    "float32", "float64", "int32", "int64", "bool", "uint8", "int8", "int16", "uint16", "uint32", "uint64",
    "float16", "bfloat16"};
static const size_t dtype_sizes[PARDO_DTYPE_COUNT] = {4, 8, 4, 8, 1, 1, 1, 2, 2, 4, 8, 2, 2};
_Static_assert(PARDO_BF16 == 12 && PARDO_DTYPE_COUNT == 13, "dtype tables list every dtype");

/* Bytes of live tensors (pardo_tensor_bytes_in_use); its own cache line, as
 * threads create and free tensors at once. */
static _Alignas(64) atomic_llong bytes_in_use;

int64_t pardo_tensor_bytes_in_use(void) { return atomic_load_explicit(&bytes_in_use, memory_order_relaxed); }

void pardo_tensor_bytes_adjust(int64_t delta) {
    atomic_fetch_add_explicit(&bytes_in_use, (long long)delta, memory_order_relaxed);
}

size_t pardo_dtype_size(pardo_dtype dt) {
    return (dt >= 0 && dt < PARDO_DTYPE_COUNT) ? dtype_sizes[dt] : 0;
}

const char *pardo_dtype_name(pardo_dtype dt) {
    return (dt >= 0 && dt < PARDO_DTYPE_COUNT) ? dtype_names[dt] : "unknown";
}

pardo_dtype pardo_dtype_from_name(const char *name) {
    for (int i = 0; i < PARDO_DTYPE_COUNT; i++)
        if (name && strcmp(name, dtype_names[i]) == 0) return (pardo_dtype)i;
    return PARDO_DTYPE_UNKNOWN;
}

bool pardo_dtype_is_float(pardo_dtype dt) { return dt == PARDO_F32 || dt == PARDO_F64; }
bool pardo_dtype_is_int(pardo_dtype dt) { return dt == PARDO_I32 || dt == PARDO_I64; }
bool pardo_dtype_is_half(pardo_dtype dt) { return dt == PARDO_F16 || dt == PARDO_BF16; }
bool pardo_dtype_is_unsigned(pardo_dtype dt) {
    return dt == PARDO_U8 || dt == PARDO_U16 || dt == PARDO_U32 || dt == PARDO_U64;
}
bool pardo_dtype_is_integer(pardo_dtype dt) {
    return dt == PARDO_I32 || dt == PARDO_I64 || dt == PARDO_I8 || dt == PARDO_I16 || pardo_dtype_is_unsigned(dt);
}
bool pardo_dtype_is_extra(pardo_dtype dt) { return dt > PARDO_BOOL && dt < PARDO_DTYPE_COUNT; }

double pardo_elem_get_f64(const void *p, pardo_dtype dt, int64_t i) {
    switch (dt) {
    case PARDO_F32: return (double)((const float *)p)[i];
    case PARDO_F64: return ((const double *)p)[i];
    case PARDO_I32: return (double)((const int32_t *)p)[i];
    case PARDO_I64: return (double)((const int64_t *)p)[i];
    case PARDO_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    case PARDO_U8: return (double)((const uint8_t *)p)[i];
    case PARDO_I8: return (double)((const int8_t *)p)[i];
    case PARDO_I16: return (double)((const int16_t *)p)[i];
    case PARDO_U16: return (double)((const uint16_t *)p)[i];
    case PARDO_U32: return (double)((const uint32_t *)p)[i];
    case PARDO_U64: return (double)((const uint64_t *)p)[i];
    case PARDO_F16: return pardo_f16_to_f64(((const uint16_t *)p)[i]);
    case PARDO_BF16: return pardo_bf16_to_f64(((const uint16_t *)p)[i]);
    default: break;
    }
    PARDO_ASSERT(!"bad dtype");
    return 0;
}

long double pardo_elem_get_ld(const void *p, pardo_dtype dt, int64_t i) {
    switch (dt) {
    case PARDO_I64: return (long double)((const int64_t *)p)[i];
    case PARDO_U64: return (long double)((const uint64_t *)p)[i];
    default: return pardo_elem_get_f64(p, dt, i); /* every other dtype's values a double holds exactly */
    }
}

void pardo_elem_set_f64(void *p, pardo_dtype dt, int64_t i, double v) {
    switch (dt) {
    case PARDO_F32: ((float *)p)[i] = (float)v; return;
    case PARDO_F64: ((double *)p)[i] = v; return;
    case PARDO_I32: ((int32_t *)p)[i] = (int32_t)v; return;
    case PARDO_I64: ((int64_t *)p)[i] = (int64_t)v; return;
    case PARDO_BOOL: ((uint8_t *)p)[i] = v != 0.0; return;
    case PARDO_U8: ((uint8_t *)p)[i] = (uint8_t)v; return;
    case PARDO_I8: ((int8_t *)p)[i] = (int8_t)v; return;
    case PARDO_I16: ((int16_t *)p)[i] = (int16_t)v; return;
    case PARDO_U16: ((uint16_t *)p)[i] = (uint16_t)v; return;
    case PARDO_U32: ((uint32_t *)p)[i] = (uint32_t)v; return;
    case PARDO_U64: ((uint64_t *)p)[i] = (uint64_t)v; return;
    case PARDO_F16: ((uint16_t *)p)[i] = pardo_f16_from_f64(v); return;
    case PARDO_BF16: ((uint16_t *)p)[i] = pardo_bf16_from_f64(v); return;
    default: break;
    }
    PARDO_ASSERT(!"bad dtype");
}

int64_t pardo_shape_numel(int ndim, const int64_t *shape) {
    if (ndim < 0) return -1;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        n *= shape[i];
    }
    return n;
}

bool pardo_shape_fits(int ndim, const int64_t *shape) {
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0) continue; /* 0: an empty tensor; -1: known at run time */
        if (numel > INT64_MAX / 16 / shape[i]) return false;
        numel *= shape[i];
    }
    return true;
}

char *pardo_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    if (n == 0) return buf;
    if (ndim < 0) {
        snprintf(buf, n, "[?]");
        return buf;
    }
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

bool pardo_shape_equal(int a_ndim, const int64_t *a, int b_ndim, const int64_t *b) {
    if (a_ndim != b_ndim) return false;
    for (int i = 0; i < a_ndim; i++)
        if (a[i] != b[i]) return false;
    return true;
}

pardo_tensor *pardo_tensor_new(pardo_dtype dtype, int ndim, const int64_t *shape, pardo_status *st) {
    if (dtype < 0 || dtype >= PARDO_DTYPE_COUNT) {
        pardo_errorf(st, PARDO_EINVAL, "tensor: unknown dtype %d", (int)dtype);
        return NULL;
    }
    if (ndim < 0 || ndim > PARDO_MAX_DIMS) {
        pardo_errorf(st, PARDO_EINVAL, "tensor: rank %d is outside 0..%d", ndim, PARDO_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            pardo_errorf(st, PARDO_EINVAL, "tensor: dim %d is %lld, expected a size >= 0", i, (long long)shape[i]);
            return NULL;
        }
    if (!pardo_shape_fits(ndim, shape)) {
        pardo_errorf(st, PARDO_EINVAL, "tensor: shape is too large");
        return NULL;
    }
    const int64_t numel = pardo_shape_numel(ndim, shape);
    pardo_tensor *t = calloc(1, sizeof(*t));
    if (!t) {
        pardo_errorf(st, PARDO_ENOMEM, "tensor: out of memory");
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = numel;
    t->nbytes = (size_t)numel * pardo_dtype_size(dtype);
    t->mem = pardo_synced_mem_new(t->nbytes);
    if (!t->mem) {
        free(t);
        pardo_errorf(st, PARDO_ENOMEM, "tensor: out of memory");
        return NULL;
    }
    pardo_tensor_bytes_adjust((int64_t)t->nbytes);
    return t;
}

pardo_tensor *pardo_tensor_new_cpu(pardo_dtype dtype, int ndim, const int64_t *shape, pardo_status *st) {
    pardo_tensor *t = pardo_tensor_new(dtype, ndim, shape, st);
    if (t && !pardo_tensor_mutable_cpu(t, st)) {
        pardo_tensor_release(t);
        return NULL;
    }
    return t;
}

pardo_tensor *pardo_tensor_retain(pardo_tensor *t) {
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void pardo_tensor_release(pardo_tensor *t) {
    if (!t) return;
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) {
        for (int i = 0; i < t->n_parts; i++) pardo_tensor_release(t->parts[i]);
        free(t->parts);
        if (t->base) pardo_tensor_release(t->base);
        else pardo_tensor_bytes_adjust(-(int64_t)t->nbytes);
        pardo_synced_mem_free(t->mem);
        free(t);
    }
}

const void *pardo_tensor_cpu(pardo_tensor *t, pardo_status *st) {
    return pardo_synced_mem_cpu_data(t->mem, st);
}

void *pardo_tensor_mutable_cpu(pardo_tensor *t, pardo_status *st) {
    return pardo_synced_mem_mutable_cpu_data(t->mem, st);
}

void *pardo_tensor_data(const pardo_tensor *t) {
    PARDO_ASSERT(t->mem->head == PARDO_MEM_HEAD_AT_CPU || t->mem->head == PARDO_MEM_SYNCED);
    return t->mem->cpu_ptr;
}

int pardo_tensor_view_of(pardo_tensor *t, pardo_tensor *base, int64_t offset, pardo_status *st) {
    if (t->is_array || base->is_array || t == base || t->dtype != base->dtype || offset < 0 ||
        offset > base->numel - t->numel)
        return pardo_errorf(st, PARDO_EINVAL, "tensor view: %s[%lld] at %lld of %s[%lld]", pardo_dtype_name(t->dtype),
                            (long long)t->numel, (long long)offset, pardo_dtype_name(base->dtype),
                            (long long)base->numel);
    if (t->numel == 0) return PARDO_OK; /* nothing to read: keeps its own (empty) buffer */
    const char *data = pardo_tensor_cpu(base, st);
    if (!data) return st->code;
    pardo_tensor_retain(base);
    if (t->base) pardo_tensor_release(t->base);
    else pardo_tensor_bytes_adjust(-(int64_t)t->nbytes); /* its bytes are base's now */
    t->base = base;
    pardo_synced_mem_set_cpu_data(t->mem, (void *)(data + (size_t)offset * pardo_dtype_size(t->dtype)));
    return PARDO_OK;
}

int pardo_tensor_copy(pardo_tensor *dst, pardo_tensor *src, pardo_status *st) {
    if (dst->dtype != src->dtype || dst->numel != src->numel)
        return pardo_errorf(st, PARDO_ESHAPE, "tensor copy: %s[%lld] into %s[%lld]", pardo_dtype_name(src->dtype),
                            (long long)src->numel, pardo_dtype_name(dst->dtype), (long long)dst->numel);
    const void *s = pardo_tensor_cpu(src, st);
    if (!s) return st->code;
    void *d = pardo_tensor_mutable_cpu(dst, st);
    if (!d) return st->code;
    if (src->nbytes) memcpy(d, s, src->nbytes);
    return PARDO_OK;
}

pardo_tensor *pardo_tensor_clone(pardo_tensor *src, pardo_status *st) {
    pardo_tensor *t = pardo_tensor_new(src->dtype, src->ndim, src->shape, st);
    if (t && pardo_tensor_copy(t, src, st) != PARDO_OK) {
        pardo_tensor_release(t);
        return NULL;
    }
    return t;
}

double pardo_tensor_get_f64(const pardo_tensor *t, int64_t i) {
    return pardo_elem_get_f64(pardo_tensor_data(t), t->dtype, i);
}

void pardo_tensor_set_f64(pardo_tensor *t, int64_t i, double v) {
    void *p = pardo_tensor_data(t);
    t->mem->version++; /* a write, like the mutable accessors' */
    pardo_elem_set_f64(p, t->dtype, i, v);
}

pardo_type pardo_tensor_type(const pardo_tensor *t) {
    pardo_type ty;
    memset(&ty, 0, sizeof(ty));
    ty.dtype = t->dtype;
    ty.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) ty.shape[i] = t->shape[i];
    return ty;
}
