/* gemm_internal.h - what the files of the own matrix product share; not
 * public (gemm.h is): included by gemm.c (which kernels run, the drivers:
 * the blocked product, its split over threads, the swapped product, kept
 * packed weights), gemm_kernels.c (the micro-kernels and the tables of
 * them per instruction set) and gemm_pack.c (op(B) packed into panels, the
 * per-thread buffers). Types and inline helpers keep their short names:
 * nothing outside these files includes this header; what links across files
 * is named pardo_gemm_*.
 *
 * The hot chain (a row block's panels, tiles, and a kernel picked for each)
 * stays in gemm.c, calling the micro-kernels through the function pointers
 * of gemm_arch as it always did; the helpers it calls per tile are inline
 * here. Packing is called once per panel and K block. */
#ifndef PARDO_GEMM_INTERNAL_H
#define PARDO_GEMM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMM_X86 1
#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2,fma")))
#else
#define GEMM_X86 0
#endif

#define MR_MAX 12 // largest kernel tile, rows
#define NR_MAX 64 // largest kernel tile, columns

/* The epilogue of one tile, applied as the last K block's sums are stored (the same arithmetic as the add,
 * relu or gelu, and relu_grad ops, so the bits match theirs): C += bias along the row, then the activation,
 * then relu_grad's mask through y. Pointers at the tile's first column (y: its first element, rows ldc apart,
 * like C's). */
typedef struct tile_ep {
    const void *bias; // or NULL
    pardo_gemm_act act;
    const void *y; // or NULL
} tile_ep;

/* gemm.c: ep on a rows x cols tile of C (rows ldc apart) of dtype, element by element (the kernels store a
 * tile whose activation has no vector form in their registers, gelu, and hand it here). */
void pardo_gemm_epilogue_tile(pardo_dtype dtype, void *c, int64_t ldc, int64_t rows, int64_t cols, const tile_ep *ep);

/* An mr x (nv * lanes) tile: C[i][j] (+)= sum_p a(i, p) b(p, j) over p < kc,
 * a(i, p) = a[i * rsa + p * csa], b(p, j) = b[p * bs + j]; add: C += sum;
 * then the epilogue ep (NULL: none). */
typedef void (*ukernel_fn)(int64_t kc, const void *a, int64_t rsa, int64_t csa, const void *b, int64_t bs, void *c,
                           int64_t ldc, bool add, const tile_ep *ep);

/* A kernel's width: its columns are nr >> width. */
enum { WIDTH_FULL, WIDTH_HALF, WIDTH_QUARTER };

/* One instruction set's kernels for one dtype. */
typedef struct gemm_arch {
    const char *name;          // for pardo_gemm_describe
    int mr, nr; // tile of the full kernel
    int kc;     // most rows of op(B) per K block (a panel of kc x nr stays in L1)
    /* [width][rows]: the kernels reading the first nr >> width columns of a panel (width WIDTH_FULL, _HALF or
     * _QUARTER; no quarter kernels, NULL: the half ones serve) for mr rows, and for fewer (1, 2, 4 and 6 rows, see
     * short_rows) that a last row panel of fewer than mr rows is cut into; without those (tile_r[0][1] NULL) it
     * overlaps the panel above */
    ukernel_fn tile_r[3][MR_MAX + 1]; // A along rows (csa 1)
    ukernel_fn tile_c[3][MR_MAX + 1]; // A down columns (rsa 1)
    bool simd;                        // an instruction-set kernel (not plain C)
} gemm_arch;

/* gemm_kernels.c: the kernels of each instruction set, [0] float32, [1] float64 (constant tables of static
 * functions). */
extern const gemm_arch pardo_gemm_arch_c[2]; // plain C 4x8
#if GEMM_X86
extern const gemm_arch pardo_gemm_arch_avx512[2];     // 12x32 float, 12x16 double
extern const gemm_arch pardo_gemm_arch_avx512_wide;   // 6x64 float, for A along rows and N >= 64 (gemm.c arch_for)
extern const gemm_arch pardo_gemm_arch_avx2[2];       // 6x16 float, 6x8 double
#endif

/* gemm.c: the own kernels products run on, [0] float32, [1] float64: the best this CPU has, picked once
 * (or pardo_gemm_force_isa's); written only before products run. */
extern const gemm_arch *pardo_gemm_own_arch;

/* gemm.c: picks the own kernels for this CPU (once; every entry of gemm.h calls it first). */
void pardo_gemm_setup(void);

/* gemm_pick.c: $PARDO_GEMM's implementation (OWN or BLAS; AUTO where unset or not one of them), read once; and
 * whether PARDO_GEMM_AUTO runs g through BLAS (the env, the CPU, the pick for g's class, measured now if new). */
pardo_gemm_impl pardo_gemm_env_impl(void);
bool pardo_gemm_pick_blas(const pardo_gemm *g);

/* True when the own kernels are AVX-512's (gemm_narrow.c's and the SIMD transposes may run too). */
static inline bool own_is_avx512(void) {
#if GEMM_X86
    return pardo_gemm_own_arch == pardo_gemm_arch_avx512;
#else
    return false;
#endif
}

/* True when the own kernels are AVX2's or AVX-512's (the CPU has AVX2: the AVX2 copies and transposes may run). */
static inline bool own_has_avx2(void) {
#if GEMM_X86
    return pardo_gemm_own_arch == pardo_gemm_arch_avx512 || pardo_gemm_own_arch == pardo_gemm_arch_avx2;
#else
    return false;
#endif
}

/* The rows of the first short kernel a last row panel of h < mr rows is cut into: the most of 6, 4, 2 and 1
 * that fit (each short kernel sums an element's terms as the full one does, so the bits are the same); 0 where
 * the arch has none. */
static inline int64_t short_rows(const gemm_arch *ar, int64_t h) {
    if (!ar->tile_r[WIDTH_FULL][1]) return 0;
    static const int64_t sizes[] = {6, 4, 2, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] <= h && sizes[i] < ar->mr) return sizes[i];
    return 0;
}

/* The narrowest kernel width of ar that covers a column panel w wide (each sums an element's terms as the full
 * kernel does: the same bits). */
static inline int width_for(const gemm_arch *ar, int64_t w) {
    if (w <= ar->nr / 4 && ar->tile_r[WIDTH_QUARTER][ar->mr]) return WIDTH_QUARTER;
    return w <= ar->nr / 2 ? WIDTH_HALF : WIDTH_FULL;
}

/* The kernel for a tile of `rows` rows (mr or a short one) of the given width, A down its columns or along rows. */
static inline ukernel_fn kernel_for(const gemm_arch *ar, int64_t rows, int width, bool down) {
    return down ? ar->tile_c[width][rows] : ar->tile_r[width][rows];
}

/* A product in progress: the packed op(B) and how K is blocked. */
typedef struct gemm_job {
    const pardo_gemm *g;
    const gemm_arch *arch;
    void *bpack;      // packed op(B): per K block, np panels of kc x nr, zero beyond n
    int64_t np;       // panels (ceil(n / nr))
    int64_t kc;       // rows per K block (the last may have fewer)
    int64_t nkb;      // K blocks
    int64_t kb0, kb1; // the K blocks this pass packs and computes
    int64_t boff;     // elements of the packed op(B) before bpack[0] (earlier blocks, packed and gone)
    bool direct;      // B read in place (row stride ldb) instead of packed: see gemm_own
    int64_t jp0, jp1; // the column panels this pass computes (all: 0, np)
    atomic_bool oom;  // a thread could not get its buffer for its panels (col_items)
} gemm_job;

/* ---- gemm_pack.c ---- */

/* The per-thread buffers: op(B) packed; a swapped product's result; BUF_COLS: col_items only, which never waits. */
enum { BUF_PACK, BUF_SWAP, BUF_COLS, N_BUFS };

/* The calling thread's buffer `which` (BUF_*) of at least n bytes, 64-byte aligned, or NULL when out of memory.
 * Owned by the thread (grown, never shrunk, freed when it ends); valid until its next call for the same buffer. */
void *pardo_gemm_buf_get(int which, size_t n);

/* Packs op(B)'s panels [begin, end) (arg a gemm_job *) for j's K blocks [kb0, kb1) into j->bpack: a
 * pardo_parallel_for item function. Each panel is written by the item that packs it alone. */
void pardo_gemm_pack_items(void *arg, int64_t begin, int64_t end);

/* Packs K block kb of op(B)'s panels [begin, end) into buf (borrowed: room for one block's panels [begin,
 * end)) and sets j's pass to that block alone, read from buf while it is still in L2. */
void pardo_gemm_pack_block(gemm_job *j, int64_t kb, int64_t begin, int64_t end, void *buf);

#if GEMM_X86
/* d[p * ldd + i] = s[i * lds + p] for p, i < 16: a 16 x 16 float block transposed in AVX-512 registers (the
 * packing of a B stored transposed, and a swapped product's result into C). The CPU must have AVX-512. */
AVX512 void pardo_gemm_tr16_f32(const float *s, int64_t lds, float *d, int64_t ldd);
/* The same for an 8 x 8 block in AVX2 registers (own_has_avx2). */
AVX2 void pardo_gemm_tr8_f32(const float *s, int64_t lds, float *d, int64_t ldd);
#endif

/* Packs rows [0, rows) of A (stored along its rows, lda apart) for K columns [0, kcb) as a row panel [p][mr]
 * (d[p * mr + i] = a[i * lda + p], zeros for rows up to mr): with AVX2, 8 columns at a time transposed in
 * registers; false (nothing written) where it does not apply (no AVX2, mr > 8), for the caller's loop. */
bool pardo_gemm_pack_a_f32(const float *a, int64_t lda, int64_t rows, int64_t mr, int64_t kcb, float *d);

/* Packs pn rows of A stored transposed ([k, m]: row p at at + p * lda, the panel's mr elements first) as a
 * full row panel's [p][mr] at d: with AVX2, a masked load of each row and a store of 8 lanes, the lanes past
 * mr overwritten by the next row's (or by a later call's, unless last: then the last row is stored masked);
 * false (nothing written) where it does not apply (no AVX2, mr > 8). */
bool pardo_gemm_pack_at_f32(const float *at, int64_t lda, int64_t pn, int64_t mr, float *d, bool last);

#endif
