/* gemm.h - the matrix product under matmul and matmul_grad: C = op(A) op(B)
 * or C += op(A) op(B) on row-major float32 or float64 matrices, through the
 * own packed, register-blocked kernel (ops/gemm.c the drivers, gemm_pack.c
 * the packing, gemm_kernels.c the micro-kernels: AVX-512, AVX2+FMA or
 * plain C, picked once from the CPU) or through a CBLAS library when pardo
 * was built with BLAS=1 (ops/gemm_blas.c). Ops run from block 0 split the
 * rows of C over the thread pool (pardo_parallel_for); inside a parallel_do
 * part (nthreads 1) everything runs on the calling thread.
 *
 * Every element of C comes out the same bits whatever the thread count and
 * whatever the number of rows (a parallel_do part's share of a batch, or
 * the whole batch): neither the split nor the path a shape takes changes
 * the order in which an element's terms are summed.
 * The packed copy of op(B) lives in a per-thread buffer made on first use
 * and grown to the largest product seen: no allocation in the steady state. */
#ifndef PARDO_GEMM_H
#define PARDO_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "op.h"

/* op(B) of a product packed once and kept by the caller (ONNX Runtime's
 * prepacked weights): a matmul whose B is the same from run to run (a param
 * at inference) passes the same record each time. A product packs all of
 * op(B) into it the second time it sees the same B (address, sizes, and
 * pardo_gemm.b_version: the data's version, which changes with every write)
 * and from then on reads the packed copy until B changes; a B that changes
 * every run (a param being trained) is packed as usual, block by block, and
 * never kept. The bits do not depend on it. Zero-initialise; free with
 * pardo_gemm_packed_clear. One product at a time per record. */
typedef struct pardo_gemm_packed {
    void *data;  // the packed op(B), owned (64-byte aligned)
    size_t cap;  // bytes of data
    bool valid;  // data holds op(B) for the key below
    const void *b, *arch;
    int64_t ldb, k, n;
    bool tb;
    pardo_dtype dtype;
    uint64_t version;         // B's version when packed
    const void *seen_b;       // the last B asked for, and its version: packed when asked again unchanged
    uint64_t seen_version;
} pardo_gemm_packed;

/* Frees what p holds and zeroes it. */
void pardo_gemm_packed_clear(pardo_gemm_packed *p);

/* The activation of a product's epilogue, applied after the bias (the arithmetic of the op it stands for, so
 * the bits are the op's). */
typedef enum pardo_gemm_act {
    PARDO_GEMM_ACT_NONE = 0,
    PARDO_GEMM_ACT_RELU, // C < 0 ? 0 : C (NaN kept), the relu op
    PARDO_GEMM_ACT_GELU, // 0.5 C erfc(-C / sqrt 2), exactly as the gelu op computes it (float32: ops/vmath.h)
} pardo_gemm_act;

/* One product. op(A) is [m, k], op(B) is [k, n], C is [m, n]. A is stored
 * [m, k] with row stride lda ([k, m] when ta); B is stored [k, n] with row
 * stride ldb ([n, k] when tb); C has row stride ldc. Strides in elements. */
typedef struct pardo_gemm {
    pardo_dtype dtype; // PARDO_F32 or PARDO_F64 for A, B and C
    bool ta, tb;       // use A (B) transposed
    int64_t m, n, k;   // sizes of the product
    const void *a;     // A (borrowed)
    int64_t lda;       // elements between rows of A as stored
    const void *b;     // B (borrowed)
    int64_t ldb;       // elements between rows of B as stored
    void *c;           // C (borrowed; must not overlap A or B)
    int64_t ldc;       // elements between rows of C
    bool accumulate;   // C += op(A) op(B); else C = op(A) op(B) (C's old values are not read)
    /* epilogue, applied to each row of C once its product is done (while it is in cache): */
    const void *bias;  // C[i][j] += bias[j] (n elements of dtype; borrowed), or NULL
    pardo_gemm_act act; // then C[i][j] = act(C[i][j]): none, relu or gelu, as the op of that name computes it
    const void *relu_y; // then C[i][j] = y[i][j] > 0 ? C[i][j] : 0, y of C's dtype with rows ldc apart (relu_grad
                        // through its forward output; borrowed), or NULL
    pardo_gemm_packed *b_packed; // op(B) kept packed from product to product (borrowed), or NULL; own kernel only
    uint64_t b_version;          // with b_packed: the version of B's data (pardo_synced_mem.version)
} pardo_gemm;

/* Which implementation runs a product. */
typedef enum pardo_gemm_impl {
    PARDO_GEMM_AUTO = 0, // $PARDO_GEMM (own or blas) if set; else, where the CPU has an own SIMD kernel and pardo
                         // was built with BLAS, the pick (ops/gemm_pick.c): per shape class (dtype, transposes,
                         // n and k, never m nor the thread count) the faster of the two, measured once and cached
                         // ($PARDO_GEMM_CACHE: a file, or off for the own kernel); else the own SIMD kernel, else
                         // BLAS where built in, else the own plain C kernel
    PARDO_GEMM_OWN,      // the own kernel
    PARDO_GEMM_BLAS,     // the CBLAS library (PARDO_ENOTSUP when pardo was built without one)
} pardo_gemm_impl;

/* Runs g. ctx gives the thread count (ctx->nthreads; 1: the calling thread
 * only) and the status to fill; small products run on one thread.
 * Returns PARDO_OK, PARDO_ENOMEM (the pack buffer), PARDO_EINVAL (bad
 * sizes, strides or dtype) or PARDO_ENOTSUP (BLAS asked for, not built in).
 * Thread-safe. */
int pardo_gemm_run(pardo_kernel_ctx *ctx, const pardo_gemm *g, pardo_gemm_impl impl);

/* What impl runs g with: PARDO_GEMM_OWN or PARDO_GEMM_BLAS (PARDO_GEMM_AUTO as above; the first product of a
 * shape class measures it, a few ms, on the calling thread). Thread-safe. */
pardo_gemm_impl pardo_gemm_resolve(const pardo_gemm *g, pardo_gemm_impl impl);

/* The pick in words (for pardo --version): forced, off or none and why, or the cache file and each shape class
 * decided so far with what it runs (reads the file; measures nothing). Into buf (n bytes, NUL-terminated,
 * cut to fit). Thread-safe. */
void pardo_gemm_pick_summary(char *buf, size_t n);

/* For tests: forgets the pick (the classes decided, the cache file read) and reads $PARDO_GEMM and
 * $PARDO_GEMM_CACHE again on next use; the classes measured since; the cache file in use (NULL: none, the
 * pick off or not built). Not thread-safe: no product may run meanwhile. */
void pardo_gemm_pick_reset(void);
int pardo_gemm_pick_measured(void);
const char *pardo_gemm_pick_path(void);

/* The implementation impl resolves to for dtype, in words ("own avx512f
 * 12x32", "OpenBLAS 0.3.21 ..."). A static string. */
const char *pardo_gemm_describe(pardo_dtype dtype, pardo_gemm_impl impl);

/* For tests and benchmarks: makes the own kernel use instruction set isa
 * ("avx512f", "avx2", "c" for plain C, or "auto": what the CPU has best).
 * PARDO_ENOTSUP when the CPU lacks it. Not thread-safe: no product may run
 * meanwhile. */
int pardo_gemm_force_isa(const char *isa, pardo_status *st);

/* True when pardo was built with a CBLAS library (BLAS=1). */
bool pardo_gemm_blas_compiled(void);

/* True when the own blocked kernels run g (no kept op(B)) on nthreads threads
 * split by column panels, each thread packing only its own panels of op(B),
 * rather than by rows over one packed op(B); the bits are the same either way.
 * (A product pardo_gemm_run sends elsewhere, BLAS, narrow or swapped, is not
 * split this way whatever this says.) For tests and benchmarks. */
bool pardo_gemm_splits_columns(const pardo_gemm *g, int nthreads);

/* Internal, ops/gemm.c: g's epilogue (bias along the rows, then the
 * activation, then relu_grad's mask through relu_y; the arithmetic of the
 * add, relu or gelu, and relu_grad ops) on rows [r0, r1) of C, for the
 * paths whose kernels do not apply it as they store (BLAS's, the swapped
 * product's, the dot products', an empty sum's). */
void pardo_gemm_epilogue_rows(const pardo_gemm *g, int64_t r0, int64_t r1);

/* Internal, ops/gemm_narrow.c: g as dot products along K where it has few
 * columns (a 10-class layer's Y = H W: float32, A not transposed, no
 * accumulate, at most 12 columns), with *rc its status; false where it does
 * not apply. For the own kernel where it runs AVX-512 (avx512) or AVX2. */
bool pardo_gemm_narrow(pardo_kernel_ctx *ctx, const pardo_gemm *g, bool avx512, int *rc);

/* Internal, ops/gemm_blas.c: rows [m0, m1) of g's C through CBLAS on the
 * calling thread (PARDO_ENOTSUP without BLAS); and the library's name. */
int pardo_gemm_blas_rows(const pardo_gemm *g, int64_t m0, int64_t m1, pardo_status *st);
const char *pardo_gemm_blas_name(void);
/* ... whether the library opens (opening it on first call); and the file it is opened from. */
bool pardo_gemm_blas_usable(void);
const char *pardo_gemm_blas_library(void);

#endif
