/* kernel_util.h - helpers shared by the CPU kernels in ops/: a two-operand
 * broadcast plan (numpy rules, unit dims dropped and contiguous dims merged)
 * and an odometer that walks an N-D index space carrying two element offsets
 * without any division per step. Nothing here allocates. */
#ifndef PARDO_KERNEL_UTIL_H
#define PARDO_KERNEL_UTIL_H

#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "core/status.h"
#include "core/tensor.h"

/* The broadcast of two concrete shapes a and b, for a kernel that writes the
 * output in row-major order. After planning, the output is `nd` merged dims
 * `dims`, and stepping one index of merged dim d moves a by sa[d] and b by
 * sb[d] elements (0 where that operand broadcasts). nd >= 1 always (a scalar
 * output is one dim of size 1); the innermost merged dim is the one to loop
 * over in a kernel's inner loop. */
typedef struct pardo_bcast2 {
    int ndim;                      // rank of the output
    int64_t shape[PARDO_MAX_DIMS]; // output shape
    int64_t numel;                 // output elements
    int nd;                        // merged rank, 1..PARDO_MAX_DIMS
    int64_t dims[PARDO_MAX_DIMS];  // merged sizes
    int64_t sa[PARDO_MAX_DIMS];    // stride of a per merged dim, in elements; 0: broadcast
    int64_t sb[PARDO_MAX_DIMS];    // stride of b per merged dim, in elements; 0: broadcast
} pardo_bcast2;

/* Plans the numpy broadcast of shapes a (a_ndim dims) and b. Returns
 * PARDO_OK, or PARDO_ESHAPE naming both shapes when they do not broadcast
 * (no -1 dims here: these are run-time shapes). Thread-safe; fills *p only. */
int pardo_bcast2_plan(int a_ndim, const int64_t *a, int b_ndim, const int64_t *b, pardo_bcast2 *p, pardo_status *st);

/* An odometer over n dims (n may be 0: one position) carrying two element
 * offsets, off[0] and off[1], each with its own stride per dim. */
typedef struct pardo_odo {
    int n;                             // dims walked
    int64_t dims[PARDO_MAX_DIMS];      // sizes
    int64_t idx[PARDO_MAX_DIMS];       // current index
    int64_t stride[2][PARDO_MAX_DIMS]; // element strides of the two offsets
    int64_t off[2];                    // current offsets
} pardo_odo;

/* Starts an odometer at index 0 (offsets 0) over dims[0..n) with strides s0
 * and s1 (either may be NULL: all zero). */
static inline void pardo_odo_init(pardo_odo *o, int n, const int64_t *dims, const int64_t *s0, const int64_t *s1) {
    o->n = n;
    o->off[0] = o->off[1] = 0;
    for (int d = 0; d < n; d++) {
        o->dims[d] = dims[d];
        o->idx[d] = 0;
        o->stride[0][d] = s0 ? s0[d] : 0;
        o->stride[1][d] = s1 ? s1[d] : 0;
    }
}

/* Moves to the next index in row-major order, updating both offsets; after
 * the last index it wraps to index 0 (offsets 0). */
static inline void pardo_odo_next(pardo_odo *o) {
    for (int d = o->n - 1; d >= 0; d--) {
        if (++o->idx[d] < o->dims[d]) {
            o->off[0] += o->stride[0][d];
            o->off[1] += o->stride[1][d];
            return;
        }
        o->idx[d] = 0;
        o->off[0] -= o->stride[0][d] * (o->dims[d] - 1);
        o->off[1] -= o->stride[1][d] * (o->dims[d] - 1);
    }
}

/* Moves the odometer to position idx (row-major, 0 <= idx < the product of
 * its dims) from index 0; one division per dim. */
static inline void pardo_odo_seek(pardo_odo *o, int64_t idx) {
    for (int d = o->n - 1; d >= 0; d--) {
        const int64_t i = idx % o->dims[d];
        idx /= o->dims[d];
        o->idx[d] = i;
        o->off[0] += i * o->stride[0][d];
        o->off[1] += i * o->stride[1][d];
    }
}

/* Defines NAME(p, flag, a, b, y): y[e] = OP(T, a_e, b_e, flag) over a
 * broadcast plan's output, elements of type T, the outer dims walked with an
 * odometer and the innermost in a loop (mod's and bit_shift's kernels). */
#define PARDO_BCAST2_FLAG_KERNEL(NAME, T, OP)                                                                          \
    static void NAME(const pardo_bcast2 *p, bool flag, const void *va, const void *vb, void *vy) {                     \
        const T *a = va, *b = vb;                                                                                      \
        T *y = vy;                                                                                                     \
        const int inner = p->nd - 1;                                                                                   \
        const int64_t n = p->dims[inner], sa = p->sa[inner], sb = p->sb[inner];                                        \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, inner, p->dims, p->sa, p->sb);                                                              \
        for (int64_t e = 0; e < p->numel; e += n, pardo_odo_next(&o)) {                                                \
            const T *pa = a + o.off[0], *pb = b + o.off[1];                                                            \
            for (int64_t i = 0; i < n; i++) y[e + i] = OP(T, pa[i * sa], pb[i * sb], flag);                            \
        }                                                                                                              \
    }

/* Elements a kernel's parallel chunk covers, and the fewest elements worth
 * splitting over threads. */
/* PARDO_SIMD_CLONES before a loop kernel: GCC builds it for AVX-512, AVX2
 * and the baseline, and the loader picks the best the CPU has (ifunc), so
 * the default build stays portable (no -march) and still runs wide
 * vectors. Where the compiler cannot (or under ThreadSanitizer), it is empty. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(PARDO_NO_CLONES) && \
    !defined(__SANITIZE_THREAD__) /* TSan crashes in ifunc resolvers, which run before its runtime is up */
#define PARDO_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PARDO_SIMD_CLONES
#endif

#define PARDO_CHUNK 4096
#define PARDO_PAR_MIN 32768

struct pardo_kernel_ctx;

/* Runs fn(arg, e0, e1) over the elements [0, n): one call on the calling
 * thread when n < PARDO_PAR_MIN, else chunks of PARDO_CHUNK elements split
 * over ctx's threads with pardo_parallel_for (inline at nthreads 1, as in a
 * parallel_do part). fn must be safe on disjoint ranges at once. Returns
 * PARDO_OK, or pardo_parallel_for's error. No allocation. */
int pardo_run_chunks(struct pardo_kernel_ctx *ctx, int64_t n, void (*fn)(void *arg, int64_t e0, int64_t e1),
                     void *arg);

/* The ordered dtypes (every numeric one: bool is not ordered), for kernels
 * that only compare and copy elements (max pooling): M(SUF, T, LOAD) is
 * expanded once per dtype, T the stored element and LOAD(v) the value it
 * compares as (float16 and bfloat16 as the float they encode; the others as
 * they are), and PARDO_ORDERED_TABLE(P) is the table of the P_SUF by dtype
 * (PARDO_ORDERED_ENTRIES(P) its entries, for a table with more). */
#define PARDO_LOAD_AS_IS(v) (v)
#define PARDO_LOAD_F16(v) pardo_f16_to_f32(v)
#define PARDO_LOAD_BF16(v) pardo_bf16_to_f32(v)
#define PARDO_FOR_ORDERED_DTYPES(M)                                                                                    \
    M(f32, float, PARDO_LOAD_AS_IS)                                                                                    \
    M(f64, double, PARDO_LOAD_AS_IS)                                                                                   \
    M(i8, int8_t, PARDO_LOAD_AS_IS)                                                                                    \
    M(i16, int16_t, PARDO_LOAD_AS_IS)                                                                                  \
    M(i32, int32_t, PARDO_LOAD_AS_IS)                                                                                  \
    M(i64, int64_t, PARDO_LOAD_AS_IS)                                                                                  \
    M(u8, uint8_t, PARDO_LOAD_AS_IS)                                                                                   \
    M(u16, uint16_t, PARDO_LOAD_AS_IS)                                                                                 \
    M(u32, uint32_t, PARDO_LOAD_AS_IS)                                                                                 \
    M(u64, uint64_t, PARDO_LOAD_AS_IS)                                                                                 \
    M(f16, uint16_t, PARDO_LOAD_F16)                                                                                   \
    M(bf16, uint16_t, PARDO_LOAD_BF16)
#define PARDO_ORDERED_ENTRIES(P)                                                                                       \
    [PARDO_F32] = P##_f32, [PARDO_F64] = P##_f64, [PARDO_I8] = P##_i8,   [PARDO_I16] = P##_i16,                        \
    [PARDO_I32] = P##_i32, [PARDO_I64] = P##_i64, [PARDO_U8] = P##_u8,   [PARDO_U16] = P##_u16,                        \
    [PARDO_U32] = P##_u32, [PARDO_U64] = P##_u64, [PARDO_F16] = P##_f16, [PARDO_BF16] = P##_bf16
#define PARDO_ORDERED_TABLE(P) {PARDO_ORDERED_ENTRIES(P)}

/* The ordered dtypes' names for an error message, and a check that t has one. */
#define PARDO_ORDERED_NAMES "float32, float64, float16, bfloat16, int8/16/32/64 or uint8/16/32/64"
int pardo_expect_ordered(const pardo_type *t, const char *what, pardo_status *st);

/* A float's bits and back (select loops mask with them: pool.c, im2col.c). */
static inline uint32_t pardo_bits_f32(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}
static inline float pardo_from_bits_f32(uint32_t u) {
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}
static inline uint64_t pardo_bits_f64(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}
static inline double pardo_from_bits_f64(uint64_t u) {
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* OUT (a double) = the sum over j in [0, n) of TERM, a double expression of
 * j: LANES at a time lane by lane, then over the lanes in order, then the
 * tail in order. The compiler vectorises it without reassociating anything,
 * so the bits depend only on n and LANES (not on the CPU's vector width nor
 * on how a kernel's rows are split over threads). */
#define PARDO_LANE_SUM(OUT, LANES, n, TERM)                                                                            \
    do {                                                                                                               \
        double lane_[LANES];                                                                                           \
        const int64_t nv_ = (n) / (LANES) * (LANES);                                                                   \
        for (int l_ = 0; l_ < (LANES); l_++) lane_[l_] = 0;                                                            \
        for (int64_t b_ = 0; b_ < nv_; b_ += (LANES))                                                                  \
            for (int l_ = 0; l_ < (LANES); l_++) {                                                                     \
                const int64_t j = b_ + l_;                                                                             \
                lane_[l_] += (TERM);                                                                                   \
            }                                                                                                          \
        (OUT) = 0;                                                                                                     \
        for (int l_ = 0; l_ < (LANES); l_++) (OUT) += lane_[l_];                                                       \
        for (int64_t j = nv_; j < (n); j++) (OUT) += (TERM);                                                           \
    } while (0)

/* Runs fn(arg, r0, r1) over the rows [0, rows) of a kernel whose rows hold
 * row_elems elements each and are computed independently (softmax, layer
 * norm): one call on the calling thread when all rows hold fewer than
 * PARDO_PAR_MIN elements, else the rows split over ctx's threads with
 * pardo_parallel_for. A row's bits do not depend on the split. Returns
 * PARDO_OK or pardo_parallel_for's error. No allocation. */
int pardo_run_rows(struct pardo_kernel_ctx *ctx, int64_t rows, int64_t row_elems,
                   void (*fn)(void *arg, int64_t r0, int64_t r1), void *arg);

/* Sets every byte of t's host data to 0 (0.0 for floats); t is current on
 * the CPU (a kernel output). Safe on empty tensors. */
static inline void pardo_tensor_zero(pardo_tensor *t) {
    if (t->nbytes) memset(pardo_tensor_data(t), 0, t->nbytes);
}

/* Row-major element strides of a contiguous shape into strides[0..ndim). */
void pardo_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

/* The gradient of a broadcast, for the gradient kernels: sums src (float32
 * or float64 `dt`, shape src_shape) into dst (same dtype, shape dst_shape,
 * which must broadcast to src_shape): dst[j] = scale * (sum of the src
 * elements that element j broadcast to). Overwrites every element of dst.
 * Runs along a broadcast innermost dim are summed in double. Returns
 * PARDO_OK, or PARDO_ESHAPE naming both shapes when dst_shape does not
 * broadcast to src_shape. Thread-safe; allocates nothing. */
int pardo_sum_to_shape(pardo_dtype dt, const void *src, int src_nd, const int64_t *src_shape, void *dst, int dst_nd,
                       const int64_t *dst_shape, double scale, pardo_status *st);

/* dst[row-major index over dims] = src[sum of index_i * src_strides[i]]
 * for numel elements of es bytes (1, 2, 4 or 8), nd >= 1: a transpose
 * (strides permuted) or a broadcast (strides 0 on broadcast dims). Walks
 * dst in order with src's offset in an odometer. Thread-safe; allocates
 * nothing. */
void pardo_strided_gather(size_t es, const void *src, void *dst, int nd, const int64_t *dims,
                          const int64_t *src_strides, int64_t numel);

/* The reverse: broadcasts src (shape src_shape, which must broadcast to
 * dst_shape) into dst, dst[i] = scale * src[the element i comes from].
 * float32 or float64 `dt`. Overwrites every element of dst. Returns
 * PARDO_OK or PARDO_ESHAPE as pardo_sum_to_shape. Thread-safe; allocates
 * nothing. */
int pardo_expand_to_shape(pardo_dtype dt, const void *src, int src_nd, const int64_t *src_shape, void *dst,
                          int dst_nd, const int64_t *dst_shape, double scale, pardo_status *st);

/* Converts n elements of dtype `from` at src into dtype `to` at dst, as the
 * cast op does (ops/cast.c: C conversion, float to int truncated, float16
 * and bfloat16 rounded to nearest even once). Any known dtypes; src and dst
 * do not overlap. Thread-safe; allocates nothing. */
void pardo_cast_elements(pardo_dtype from, const void *src, pardo_dtype to, void *dst, int64_t n);

#endif
