/* tensor.h - dtypes and reference-counted dense tensors (row-major, always
 * contiguous) whose storage is a SyncedMemory. */
#ifndef PARDO_TENSOR_H
#define PARDO_TENSOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/synced_mem.h"

#define PARDO_MAX_DIMS 8

typedef enum pardo_dtype {
    PARDO_F32 = 0,
    PARDO_F64,
    PARDO_I32,
    PARDO_I64,
    PARDO_BOOL,
    /* the dtypes added after bool (the ones above keep their numbers, and tables indexed by them stay valid);
     * an op takes them only where its def says so (pardo_op_def.all_dtypes) */
    PARDO_U8,
    PARDO_I8,
    PARDO_I16,
    PARDO_U16,
    PARDO_U32,
    PARDO_U64,
    PARDO_F16,  // IEEE binary16, stored as uint16_t bits (core/half.h)
    PARDO_BF16, // bfloat16, stored as uint16_t bits (core/half.h)
    PARDO_DTYPE_COUNT,
    PARDO_DTYPE_UNKNOWN = -1,
} pardo_dtype;

/* Bytes per element (bool is one byte); 0 for an unknown dtype. */
size_t pardo_dtype_size(pardo_dtype dt);

/* "float32", "float64", "int32", "int64", "bool", "uint8", "int8", "int16",
 * "uint16", "uint32", "uint64", "float16", "bfloat16"; "unknown" otherwise. */
const char *pardo_dtype_name(pardo_dtype dt);

/* Parses a dtype name as pardo_dtype_name writes it; PARDO_DTYPE_UNKNOWN if
 * it is none of them. */
pardo_dtype pardo_dtype_from_name(const char *name);

/* True for float32 and float64 only: the float dtypes most kernels compute
 * in (float16 and bfloat16 are pardo_dtype_is_half). */
bool pardo_dtype_is_float(pardo_dtype dt);

/* True for int32 and int64 only: the integer dtypes most kernels compute in
 * (every integer dtype: pardo_dtype_is_integer). */
bool pardo_dtype_is_int(pardo_dtype dt);

/* True for float16 and bfloat16. */
bool pardo_dtype_is_half(pardo_dtype dt);

/* True for every integer dtype (int8..int64, uint8..uint64; not bool). */
bool pardo_dtype_is_integer(pardo_dtype dt);

/* True for the unsigned integer dtypes (uint8, uint16, uint32, uint64). */
bool pardo_dtype_is_unsigned(pardo_dtype dt);

/* True for the dtypes past bool (uint8..bfloat16), which an op takes only
 * where its def sets all_dtypes. */
bool pardo_dtype_is_extra(pardo_dtype dt);

/* Element i of the array p of dtype dt as a double (exact for every dtype
 * but int64 and uint64 values past 2^53, which round); and the store of v
 * into it, converted as C converts (float16, bfloat16: nearest, ties to
 * even; an integer dtype: v truncated, which must fit the dtype; bool:
 * v != 0). Any known dtype; no checks. */
double pardo_elem_get_f64(const void *p, pardo_dtype dt, int64_t i);
/* Element i as a long double: exact for every dtype, int64 and uint64
 * included, on the targets pardo builds for (x86-64's and aarch64's long
 * double hold 64 bits of significand or more): for ops that compare values
 * (top_k). */
long double pardo_elem_get_ld(const void *p, pardo_dtype dt, int64_t i);
void pardo_elem_set_f64(void *p, pardo_dtype dt, int64_t i, double v);

/* A dtype and a shape; a dim of -1 is known only at run time. ndim -1 means
 * the rank itself is unknown. Used by shape inference and tensors alike. */
typedef struct pardo_type {
    pardo_dtype dtype;
    int ndim;                       // rank, or -1 when unknown
    int64_t shape[PARDO_MAX_DIMS];  // sizes; -1 for a run-time size
} pardo_type;

/* Element count of a shape (1 for a scalar); -1 when a dim is -1. */
int64_t pardo_shape_numel(int ndim, const int64_t *shape);

/* True when a tensor of this shape can exist: the product of its known sizes (-1 dims skipped), times 16 bytes
 * (the widest dtype, with room), fits in int64. Shape inference refuses a shape that does not. */
bool pardo_shape_fits(int ndim, const int64_t *shape);

/* Writes "[2, 3]" (or "[-1, 64]", "[?]" for unknown rank) into buf; returns buf. */
char *pardo_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* True when both shapes have the same rank and sizes. */
bool pardo_shape_equal(int a_ndim, const int64_t *a, int b_ndim, const int64_t *b);

/* A tensor, or a tensor_array (SPEC section 1, kind tensor_array: the list
 * of parts `split` writes): then is_array is set, dtype is the parts'
 * dtype, ndim/numel/nbytes are 0 and mem is an empty buffer, and the data
 * lives in `parts`. Arrays bind in scopes like any tensor. */
typedef struct pardo_tensor {
    atomic_int refs;               // references; freed at zero
    pardo_dtype dtype;
    int ndim;                      // rank, 0..PARDO_MAX_DIMS
    int64_t shape[PARDO_MAX_DIMS]; // sizes
    int64_t numel;                 // elements
    size_t nbytes;                 // bytes of data
    pardo_synced_mem *mem;         // storage, owned
    bool is_array;                 // a tensor_array
    int n_parts;                   // tensor_array: parts in use
    int cap_parts;                 // tensor_array: slots allocated in parts
    struct pardo_tensor **parts;   // tensor_array: n_parts tensors, one reference each (NULL while unset); owned
    struct pardo_tensor *base;     // a view (pardo_tensor_view_of): the tensor whose host memory it reads, one
                                   // reference; NULL otherwise
} pardo_tensor;

/* A new tensor with one reference and lazily allocated storage (zeros on
 * first access). Returns NULL and fills st on bad arguments or no memory.
 * The caller releases it with pardo_tensor_release. */
pardo_tensor *pardo_tensor_new(pardo_dtype dtype, int ndim, const int64_t *shape, pardo_status *st);

/* As pardo_tensor_new, with the host buffer allocated now (zeroed). */
pardo_tensor *pardo_tensor_new_cpu(pardo_dtype dtype, int ndim, const int64_t *shape, pardo_status *st);

/* Adds a reference; returns t. Thread-safe. */
pardo_tensor *pardo_tensor_retain(pardo_tensor *t);

/* Drops a reference, freeing the tensor at zero. NULL is a no-op. Thread-safe. */
void pardo_tensor_release(pardo_tensor *t);

/* Host data, read-only (syncs from the device if needed); NULL and st filled
 * on failure. The tensor keeps ownership. */
const void *pardo_tensor_cpu(pardo_tensor *t, pardo_status *st);

/* Host data, writable; moves the head to the CPU. NULL and st on failure. */
void *pardo_tensor_mutable_cpu(pardo_tensor *t, pardo_status *st);

/* Host data of a tensor whose host copy is known current (kernels, after the
 * executor made it so); asserts that it is. Writable; does not move the head. */
void *pardo_tensor_data(const pardo_tensor *t);

/* Makes t a view of base: t's host data becomes base's from element
 * `offset` on (t->numel elements; same dtype, base contiguous as every
 * tensor is), with no copy; t drops its own buffer and holds a reference
 * to base (released when t is freed or viewed elsewhere). For split's parts
 * (ops/parallel.c). The caller keeps writes away from t: its data is
 * base's. A view's bytes count once, as base's (pardo_tensor_bytes_in_use).
 * PARDO_EINVAL for arrays, another dtype or a range past base. */
int pardo_tensor_view_of(pardo_tensor *t, pardo_tensor *base, int64_t offset, pardo_status *st);

/* Copies src's elements into dst (same dtype and numel). */
int pardo_tensor_copy(pardo_tensor *dst, pardo_tensor *src, pardo_status *st);

/* A new tensor with src's dtype, shape and a copy of its data. */
pardo_tensor *pardo_tensor_clone(pardo_tensor *src, pardo_status *st);

/* Element i as a double, for printing and tests (any dtype). */
double pardo_tensor_get_f64(const pardo_tensor *t, int64_t i);

/* Sets element i from a double, converting to the tensor's dtype. */
void pardo_tensor_set_f64(pardo_tensor *t, int64_t i, double v);

/* The tensor's dtype and shape as a pardo_type. */
pardo_type pardo_tensor_type(const pardo_tensor *t);

/* Bytes of tensor data in use: the sum of nbytes over every live tensor (a
 * tensor_array's header counts 0; its parts count as tensors). One atomic
 * counter, updated when a tensor is created or freed; traces sample it.
 * Thread-safe. */
int64_t pardo_tensor_bytes_in_use(void);

/* Adds delta to that counter: for tensor.c and tensor_array.c only, when a
 * tensor's nbytes changes after its creation. Thread-safe. */
void pardo_tensor_bytes_adjust(int64_t delta);

/* Tensor arrays (src/core/tensor_array.c). One owner thread at a time, except
 * that threads may set or take distinct parts concurrently (parallel_do's
 * parts each touch their own slot). */

/* A new empty tensor_array of parts of dtype elem, one reference; NULL and
 * st on failure. Released with pardo_tensor_release, which releases the
 * parts. */
pardo_tensor *pardo_tensor_array_new(pardo_dtype elem, pardo_status *st);

/* True for a tensor_array. */
bool pardo_tensor_is_array(const pardo_tensor *t);

/* Makes a hold n parts: parts past n are released, new ones start NULL;
 * keeps the storage when shrinking (no allocation in the steady state).
 * PARDO_ENOMEM. */
int pardo_tensor_array_resize(pardo_tensor *a, int n, pardo_status *st);

/* Part i (0 <= i < n_parts), borrowed; may be NULL. */
pardo_tensor *pardo_tensor_array_part(const pardo_tensor *a, int i);

/* Puts t (may be NULL) in slot i, taking over the caller's reference and
 * releasing what the slot held. */
void pardo_tensor_array_set_part(pardo_tensor *a, int i, pardo_tensor *t);

/* Empties slot i and hands its reference to the caller (NULL if unset). */
pardo_tensor *pardo_tensor_array_take_part(pardo_tensor *a, int i);

#endif
