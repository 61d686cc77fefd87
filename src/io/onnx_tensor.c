/* onnx_tensor.c - ONNX TensorProto to pardo tensors: dtypes, dims, data in
 * raw_data (little-endian), in the typed fields, or in an external file
 * beside the model; and the node tests' serialised TensorProto files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/file_io.h"
#include "io/onnx.h"
#include "io/onnx_internal.h"

pardo_dtype onnx_dtype(int32_t data_type) {
    switch (data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return PARDO_F32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return PARDO_F64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return PARDO_I32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return PARDO_I64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return PARDO_BOOL;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return PARDO_U8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return PARDO_I8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return PARDO_I16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return PARDO_U16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return PARDO_U32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return PARDO_U64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return PARDO_F16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return PARDO_BF16;
    default: return PARDO_DTYPE_UNKNOWN;
    }
}

const char *onnx_dtype_name(int32_t data_type) {
    static const char *const names[] = {"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32",
                                        "int64", "string", "bool", "float16", "float64", "uint32", "uint64",
                                        "complex64", "complex128", "bfloat16"};
    if (data_type >= 0 && data_type < (int32_t)(sizeof names / sizeof names[0])) return names[data_type];
    return "an unknown data type";
}

/* Reads `length` bytes at `offset` of the external file `location` (a path
 * relative to dir, inside it) into dst. */
static int read_external(const Onnx__TensorProto *t, const char *dir, const char *what, void *dst, size_t nbytes,
                         pardo_status *st) {
    const char *location = NULL;
    long long offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value) continue;
        char *end;
        if (strcmp(e->key, "location") == 0) {
            location = e->value;
        } else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
            errno = 0;
            long long v = strtoll(e->value, &end, 10);
            if (errno || *end || v < 0)
                return pardo_errorf(st, PARDO_EPARSE, "%s: external data %s '%s' is not a byte count", what, e->key,
                                    e->value);
            if (e->key[0] == 'o') offset = v;
            else length = v;
        }
    }
    if (!location || !*location) return pardo_errorf(st, PARDO_EPARSE, "%s: external data without a location", what);
    if (location[0] == '/' || strstr(location, ".."))
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: external data location '%s' must be a relative path inside the model's folder", what,
                            location);
    if (length >= 0 && (size_t)length != nbytes)
        return pardo_errorf(st, PARDO_EPARSE, "%s: external data length %lld, expected %zu bytes for its dims", what,
                            length, nbytes);
    size_t pl = strlen(dir) + strlen(location) + 2;
    char *full = malloc(pl);
    if (!full) return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", what);
    snprintf(full, pl, "%s/%s", dir, location);
    FILE *f = fopen(full, "rb");
    int rc = PARDO_OK;
    if (!f) {
        rc = pardo_errorf(st, PARDO_EPARSE, "%s: cannot open external data file %s: %s", what, full, strerror(errno));
    } else if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(dst, 1, nbytes, f) != nbytes) {
        rc = pardo_errorf(st, PARDO_EPARSE, "%s: external data file %s has no %zu bytes at offset %lld", what, full,
                          nbytes, offset);
    }
    if (f) fclose(f);
    free(full);
    return rc;
}

/* Whether t's external data file (under dir) is missing or shorter than
 * offset + nbytes: checked before the tensor is allocated. */
static bool external_too_short(const Onnx__TensorProto *t, const char *dir, size_t nbytes) {
    const char *location = NULL;
    long long offset = 0;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value) continue;
        if (strcmp(e->key, "location") == 0) location = e->value;
        else if (strcmp(e->key, "offset") == 0) offset = strtoll(e->value, NULL, 10);
    }
    if (!location || location[0] == '/' || strstr(location, "..") || offset < 0) return false; /* read_external says */
    char full[4096];
    if (snprintf(full, sizeof full, "%s/%s", dir, location) >= (int)sizeof full) return true;
    struct stat sb;
    if (stat(full, &sb) != 0) return false; /* read_external names the file and the reason */
    return (unsigned long long)sb.st_size < (unsigned long long)offset + nbytes;
}

/* How many elements t's typed field for pardo dtype dt holds: bool, the ints narrower than 32 bits and the
 * halves (their bits) live in int32_data, like int32; uint32 and uint64 in uint64_data. */
static size_t typed_count(const Onnx__TensorProto *t, pardo_dtype dt) {
    switch (dt) {
    case PARDO_F32: return t->n_float_data;
    case PARDO_F64: return t->n_double_data;
    case PARDO_I64: return t->n_int64_data;
    case PARDO_U32:
    case PARDO_U64: return t->n_uint64_data;
    default: return t->n_int32_data;
    }
}

/* Copies the typed field of t into dst (numel elements of pardo dtype dt, checked against typed_count). */
static void copy_typed(const Onnx__TensorProto *t, pardo_dtype dt, int64_t numel, void *dst) {
    for (int64_t i = 0; i < numel; i++) switch (dt) {
        case PARDO_F32: ((float *)dst)[i] = t->float_data[i]; break;
        case PARDO_F64: ((double *)dst)[i] = t->double_data[i]; break;
        case PARDO_I32: ((int32_t *)dst)[i] = t->int32_data[i]; break;
        case PARDO_BOOL: ((uint8_t *)dst)[i] = t->int32_data[i] != 0; break;
        case PARDO_I64: ((int64_t *)dst)[i] = t->int64_data[i]; break;
        case PARDO_U8: ((uint8_t *)dst)[i] = (uint8_t)t->int32_data[i]; break;
        case PARDO_I8: ((int8_t *)dst)[i] = (int8_t)t->int32_data[i]; break;
        case PARDO_I16: ((int16_t *)dst)[i] = (int16_t)t->int32_data[i]; break;
        case PARDO_U16:
        case PARDO_F16:
        case PARDO_BF16: ((uint16_t *)dst)[i] = (uint16_t)t->int32_data[i]; break; /* the halves' bits */
        case PARDO_U32: ((uint32_t *)dst)[i] = (uint32_t)t->uint64_data[i]; break;
        case PARDO_U64: ((uint64_t *)dst)[i] = t->uint64_data[i]; break;
        default: break;
        }
}

int onnx_tensor_to_pardo(const Onnx__TensorProto *t, const char *dir, const char *what, pardo_tensor **out,
                         pardo_status *st) {
    *out = NULL;
    if (!t->has_data_type || t->data_type == 0)
        return pardo_errorf(st, PARDO_EPARSE, "%s: no data type", what);
    pardo_dtype dt = onnx_dtype(t->data_type);
    if (dt == PARDO_DTYPE_UNKNOWN)
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: data type %s (%d); pardo runs float32, float64, float16, bfloat16, "
                            "int8..int64, uint8..uint64 and bool",
                            what, onnx_dtype_name(t->data_type), (int)t->data_type);
    if (t->segment) return pardo_errorf(st, PARDO_ENOTSUP, "%s: a segmented tensor", what);
    if (t->n_dims > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: %zu dims, pardo takes at most %d", what, t->n_dims, PARDO_MAX_DIMS);
    int64_t shape[PARDO_MAX_DIMS];
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return pardo_errorf(st, PARDO_EPARSE, "%s: dim %zu is %lld", what, i, (long long)t->dims[i]);
        shape[i] = t->dims[i];
    }
    if (!pardo_shape_fits((int)t->n_dims, shape))
        return pardo_errorf(st, PARDO_EPARSE, "%s: its dims hold too many elements", what);
    int64_t numel = pardo_shape_numel((int)t->n_dims, shape);
    size_t nbytes = (size_t)numel * pardo_dtype_size(dt);
    /* the data must be there before anything is allocated: dims that lie (2^31 elements over 64 bytes) are
     * refused at once, not after allocating what they claim */
    const bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (!external && t->has_raw_data && t->raw_data.len != nbytes)
        return pardo_errorf(st, PARDO_EPARSE, "%s: %zu bytes of raw data, expected %zu for its dims and dtype", what,
                            t->raw_data.len, nbytes);
    if (!external && !t->has_raw_data && (int64_t)typed_count(t, dt) != numel)
        return pardo_errorf(st, PARDO_EPARSE, "%s: %zu elements in its data, expected %lld for its dims", what,
                            typed_count(t, dt), (long long)numel);
    if (external && external_too_short(t, dir ? dir : ".", nbytes))
        return pardo_errorf(st, PARDO_EPARSE, "%s: its external data file holds fewer than the %zu bytes its dims "
                            "need (or cannot be read)", what, nbytes);
    pardo_tensor *x = pardo_tensor_new_cpu(dt, (int)t->n_dims, shape, st);
    if (!x) return st->code;
    void *dst = pardo_tensor_data(x);
    if (!external && !t->has_raw_data) {
        copy_typed(t, dt, numel, dst);
    } else {
        int rc = PARDO_OK;
        if (external) rc = read_external(t, dir ? dir : ".", what, dst, nbytes, st);
        else if (nbytes) memcpy(dst, t->raw_data.data, nbytes); /* little-endian, as the hosts pardo builds for */
        if (rc != PARDO_OK) {
            pardo_tensor_release(x);
            return rc;
        }
        if (dt == PARDO_BOOL) /* raw bytes: any non-zero byte is true */
            for (int64_t i = 0; i < numel; i++) ((uint8_t *)dst)[i] = ((uint8_t *)dst)[i] != 0;
    }
    *out = x;
    return PARDO_OK;
}

bool onnx_const_ints(const pardo_tensor *t, int64_t *out, int max, int *n) {
    if (!t || t->numel > max) return false;
    for (int64_t i = 0; i < t->numel; i++) /* int64 exactly, past 2^53 */
        out[i] = t->dtype == PARDO_I64 ? ((const int64_t *)pardo_tensor_data(t))[i]
                                       : (int64_t)pardo_tensor_get_f64(t, i);
    *n = (int)t->numel;
    return true;
}

int pardo_onnx_read_tensor_file(const char *path, pardo_tensor **out, char **name, pardo_status *st) {
    *out = NULL;
    if (name) *name = NULL;
    unsigned char *data = NULL;
    size_t n = 0;
    int rc = pardo_file_read_all(path, &data, &n, st);
    if (rc != PARDO_OK) return rc;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, n, data);
    if (!t) {
        free(data);
        return pardo_errorf(st, PARDO_EPARSE, "%s: not a serialised ONNX TensorProto (protobuf parse failed)", path);
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    rc = onnx_tensor_to_pardo(t, dir, path, out, st);
    if (rc == PARDO_OK && name) {
        *name = strdup(t->name ? t->name : "");
        if (!*name) {
            pardo_tensor_release(*out);
            *out = NULL;
            rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
        }
    }
    onnx__tensor_proto__free_unpacked(t, NULL);
    free(data);
    return rc;
}
