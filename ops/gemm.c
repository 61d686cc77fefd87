/* gemm.c - the own matrix product (gemm.h), BLIS's way, and what picks
 * the implementation: op(B) is packed into panels nr columns wide, K in
 * blocks of at most KC_MAX rows (gemm_pack.c); a register-blocked
 * micro-kernel (gemm_kernels.c, picked for the CPU here) computes an
 * mr x nr tile of C from a panel and mr rows of op(A). A is read in place
 * along its rows, a panel of B staying in L1 over a block of rows; A read
 * down its columns (transpose_a) is packed a row panel at a time instead,
 * which then stays in L1 over all panels. This file holds the drivers:
 * the sweep of a block of rows over the panels (the hot chain, one
 * translation unit down to the kernel pointer), the split over threads by
 * rows or by column panels, the swapped product, a caller-kept packed
 * op(B), the BLAS path, and pardo_gemm_run choosing among them.
 *
 * An element's terms are summed in the same order whatever rows a thread
 * is given (the K blocks depend on K alone, tiles start at multiples of mr,
 * a short last row panel overlaps the one above rather than being padded),
 * so the bits do not depend on the thread count. */
#include "exec/comm.h"
#include "gemm_internal.h"
#include "kernel_util.h"
#include "vmath.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define DIRECT_MAX_ROWS 48 // products of at most this many rows read B in place (gemm_own)
#define KC_MAX 256 // most rows of op(B) per packed block (gemm_arch.kc): an element's terms are summed in such blocks
#ifndef MC_ROWS
#define MC_ROWS 96 // rows of C a thread sweeps across all panels before the next rows (A's rows stay in L2)
#endif
#define PAR_MIN_MACS (1 << 19) // products smaller than this many multiply-adds run on one thread
#define PACK_STACK 32768       // bytes: a packed op(B) this small lives on the stack
#define NARROW_COLS 16         // products of fewer columns waste most of a tile's lanes (gemm_swapped)
#define COLS_MIN_K 128         // a product split by column panels sums at least this many terms (split_columns)

/* ---- which implementation runs ---- */

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
const gemm_arch *pardo_gemm_own_arch = pardo_gemm_arch_c; // [0] float32, [1] float64

/* The best own kernels this CPU runs. */
static const gemm_arch *best_arch(void) {
#if GEMM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return pardo_gemm_arch_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return pardo_gemm_arch_avx2;
#endif
    return pardo_gemm_arch_c;
}

static void setup(void) { pardo_gemm_own_arch = best_arch(); }

void pardo_gemm_setup(void) { pthread_once(&setup_once, setup); }

int pardo_gemm_force_isa(const char *isa, pardo_status *st) {
    pardo_gemm_setup();
    const gemm_arch *best = best_arch(), *want = NULL;
    if (strcmp(isa, "auto") == 0)
        want = best;
    else if (strcmp(isa, "c") == 0)
        want = pardo_gemm_arch_c;
#if GEMM_X86
    else if (strcmp(isa, "avx512f") == 0 && best == pardo_gemm_arch_avx512)
        want = pardo_gemm_arch_avx512;
    else if (strcmp(isa, "avx2") == 0 && (best == pardo_gemm_arch_avx512 || best == pardo_gemm_arch_avx2))
        want = pardo_gemm_arch_avx2;
#endif
    if (!want) return pardo_errorf(st, PARDO_ENOTSUP, "gemm: no '%s' kernel on this CPU (auto, avx512f, avx2, c)", isa);
    if (want != pardo_gemm_own_arch) pardo_gemm_pick_reset(); /* the pick's key names the own kernels */
    pardo_gemm_own_arch = want;
    return PARDO_OK;
}

/* Whether impl runs g through BLAS (g NULL: for no shape in particular, as pardo_gemm_describe says). */
static bool use_blas(pardo_gemm_impl impl, const pardo_gemm *g) {
    pardo_gemm_setup();
    if (impl == PARDO_GEMM_BLAS) return true;
    if (impl == PARDO_GEMM_OWN) return false;
    if (g) return pardo_gemm_pick_blas(g);
    const pardo_gemm_impl forced = pardo_gemm_env_impl();
    if (forced != PARDO_GEMM_AUTO) return forced == PARDO_GEMM_BLAS;
    return !pardo_gemm_own_arch[0].simd && pardo_gemm_blas_compiled();
}

pardo_gemm_impl pardo_gemm_resolve(const pardo_gemm *g, pardo_gemm_impl impl) {
    return use_blas(impl, g) && pardo_gemm_blas_compiled() ? PARDO_GEMM_BLAS : PARDO_GEMM_OWN;
}

const char *pardo_gemm_describe(pardo_dtype dtype, pardo_gemm_impl impl) {
    if (use_blas(impl, NULL)) return pardo_gemm_blas_name();
    return pardo_gemm_own_arch[dtype == PARDO_F64].name;
}

/* ---- the blocked product ---- */

/* The epilogue on n elements of a row of C: += bias, then the activation, then the relu_grad mask through y
 * (bias and y at the same columns; either NULL: none); the same arithmetic as the add, relu or gelu, and
 * relu_grad ops, so the bits match theirs (GELU is the gelu op's function for T, from ops/vmath.h). The kernels apply it as they store a tile (tile_ep),
 * but for gelu; this is for what they do not. */
#define EPILOGUE_SPAN(SFX, T, GELU)                                                                                    \
    PARDO_SIMD_CLONES static void epilogue_span_##SFX(T *restrict row, const T *restrict bias, pardo_gemm_act act,    \
                                                      const T *restrict y, int64_t n) {                                \
        if (act == PARDO_GEMM_ACT_GELU)                                                                                \
            for (int64_t q = 0; q < n; q++) row[q] = GELU(bias ? row[q] + bias[q] : row[q]);                          \
        else if (bias && act == PARDO_GEMM_ACT_RELU)                                                                   \
            for (int64_t q = 0; q < n; q++) {                                                                          \
                const T v = row[q] + bias[q];                                                                          \
                row[q] = v < 0 ? (T)0 : v;                                                                             \
            }                                                                                                          \
        else if (bias)                                                                                                 \
            for (int64_t q = 0; q < n; q++) row[q] = row[q] + bias[q];                                                 \
        else if (act == PARDO_GEMM_ACT_RELU)                                                                           \
            for (int64_t q = 0; q < n; q++) row[q] = row[q] < 0 ? (T)0 : row[q];                                       \
        if (y)                                                                                                         \
            for (int64_t q = 0; q < n; q++) row[q] = y[q] > 0 ? row[q] : (T)0;                                         \
    }
EPILOGUE_SPAN(f32, float, pardo_vgeluf)
EPILOGUE_SPAN(f64, double, pardo_gelu_f64)

static bool has_epilogue(const pardo_gemm *g) { return g->bias || g->act != PARDO_GEMM_ACT_NONE || g->relu_y; }

void pardo_gemm_epilogue_rows(const pardo_gemm *g, int64_t r0, int64_t r1) {
    if (!has_epilogue(g)) return;
    for (int64_t i = r0; i < r1; i++) {
        if (g->dtype == PARDO_F32)
            epilogue_span_f32((float *)g->c + i * g->ldc, g->bias, g->act,
                              g->relu_y ? (const float *)g->relu_y + i * g->ldc : NULL, g->n);
        else
            epilogue_span_f64((double *)g->c + i * g->ldc, g->bias, g->act,
                              g->relu_y ? (const double *)g->relu_y + i * g->ldc : NULL, g->n);
    }
}

void pardo_gemm_epilogue_tile(pardo_dtype dtype, void *c, int64_t ldc, int64_t rows, int64_t cols, const tile_ep *ep) {
    for (int64_t i = 0; i < rows; i++) {
        if (dtype == PARDO_F32)
            epilogue_span_f32((float *)c + i * ldc, ep->bias, ep->act, ep->y ? (const float *)ep->y + i * ldc : NULL,
                              cols);
        else
            epilogue_span_f64((double *)c + i * ldc, ep->bias, ep->act, ep->y ? (const double *)ep->y + i * ldc : NULL,
                              cols);
    }
}

/* The epilogue of g's tile at row i0, column j0 (in ep), or NULL when g has none. */
static inline const tile_ep *tile_ep_at(const pardo_gemm *g, int64_t i0, int64_t j0, tile_ep *ep) {
    if (!has_epilogue(g)) return NULL;
    const size_t es = g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
    ep->bias = g->bias ? (const char *)g->bias + (size_t)j0 * es : NULL;
    ep->act = g->act;
    ep->y = g->relu_y ? (const char *)g->relu_y + (size_t)(i0 * g->ldc + j0) * es : NULL;
    return ep;
}

/* A row panel of A in the packed path: it computes rows [i0, i0 + h) of C; rows [top, top + rows) of op(A) are
 * packed (zeros after them up to mr); cut: into short kernels; sh: rows of the panel above it overlaps. */
typedef struct a_panel {
    int64_t i0, h, sh, top, rows;
    bool cut;
} a_panel;

/* The row panels of rows [ic, ie) of an m-row product (ic a multiple of mr), into pan; returns how many. */
static int64_t a_panels(const gemm_arch *ar, int64_t m, int64_t ic, int64_t ie, a_panel *pan) {
    const int64_t mr = ar->mr;
    int64_t q = 0;
    for (int64_t i0 = ic; i0 < ie; i0 += mr, q++) {
        const int64_t h = ie - i0 < mr ? ie - i0 : mr;
        const bool cut = h < mr && short_rows(ar, h) > 0;
        const int64_t sh = m < mr || cut ? 0 : mr - h;
        pan[q] = (a_panel){.i0 = i0, .h = h, .sh = sh, .top = i0 - sh, .rows = m < mr || cut ? h : mr, .cut = cut};
    }
    return q;
}

/* A row panel of A stored along its rows packed [p][mr] with SIMD (gemm_pack.c), or false for the loop. */
static bool pack_a_f32(const float *a, int64_t lda, int64_t rows, int64_t mr, int64_t kcb, float *d) {
    return pardo_gemm_pack_a_f32(a, lda, rows, mr, kcb, d);
}
static bool pack_a_f64(const double *a, int64_t lda, int64_t rows, int64_t mr, int64_t kcb, double *d) {
    (void)a, (void)lda, (void)rows, (void)mr, (void)kcb, (void)d;
    return false;
}

/* pn rows of a full row panel of A stored transposed packed [p][mr] with SIMD (gemm_pack.c), or false. */
static bool pack_at_f32(const float *at, int64_t lda, int64_t pn, int64_t mr, float *d, bool last) {
    return pardo_gemm_pack_at_f32(at, lda, pn, mr, d, last);
}
static bool pack_at_f64(const double *at, int64_t lda, int64_t pn, int64_t mr, double *d, bool last) {
    (void)at, (void)lda, (void)pn, (void)mr, (void)d, (void)last;
    return false;
}

/* Defines the sweep over rows for element type T: tiles, short row panels, row panels, a block of rows. */
#define GEMM_DRIVER(SFX, T)                                                                                            \
    /* A tile through the tile buffer: short (h < mr rows, of which the first sh are the panel above's and not      \
     * written) or narrow (w < the kernel's kw columns); out of line, so the full tiles' path stays short. */          \
    __attribute__((noinline)) static void edge_##SFX(ukernel_fn uk, int64_t kcb, const T *ap, int64_t ra, int64_t ca,  \
                                                      const T *bp, int64_t bs, T *cp, int64_t ldc, int64_t h,          \
                                                      int64_t sh, int64_t w, bool add, const tile_ep *ep) {            \
        T tile[MR_MAX * NR_MAX] __attribute__((aligned(64)));                                                          \
        uk(kcb, ap, ra, ca, bp, bs, tile, NR_MAX, false, NULL);                                                        \
        for (int64_t i = 0; i < h; i++) {                                                                              \
            for (int64_t q = 0; q < w; q++)                                                                            \
                cp[i * ldc + q] = add ? cp[i * ldc + q] + tile[(i + sh) * NR_MAX + q] : tile[(i + sh) * NR_MAX + q];   \
            if (ep)                                                                                                    \
                epilogue_span_##SFX(cp + i * ldc, ep->bias, ep->act, ep->y ? (const T *)ep->y + i * ldc : NULL, w);    \
        }                                                                                                              \
    }                                                                                                                  \
    /* One tile: kernel uk on A (ap, strides ra, ca) and panel bp into C at cp, then the epilogue ep (NULL: none); \
     * inline (a product of short K, as dA = dY W^T of a 10-class layer, spends as long getting to the kernel as in  \
     * it: measured 0.75 -> 0.88 of OpenBLAS there with AVX2), edge_ for short or narrow tiles. */                     \
    static inline void tile_##SFX(ukernel_fn uk, int64_t kcb, const T *ap, int64_t ra, int64_t ca, const T *bp,        \
                                  int64_t bs, T *cp, int64_t ldc, int64_t mr, int64_t h, int64_t sh, int64_t w,        \
                                  int64_t kw, bool add, const tile_ep *ep) {                                           \
        if (h == mr && w == kw)                                                                                        \
            uk(kcb, ap, ra, ca, bp, bs, cp, ldc, add, ep);                                                             \
        else                                                                                                           \
            edge_##SFX(uk, kcb, ap, ra, ca, bp, bs, cp, ldc, h, sh, w, add, ep);                                       \
    }                                                                                                                  \
                                                                                                                       \
    /* A short row panel (h < mr rows, row r of A at ap + r * ra) cut into short kernels (short_rows). */            \
    static void cut_##SFX(const gemm_arch *ar, int width, bool down, int64_t kcb, const T *ap, int64_t ra, int64_t ca,  \
                          const T *bp, int64_t bs, T *cp, int64_t ldc, int64_t h, int64_t w, int64_t kw, bool add,     \
                          const tile_ep *ep) {                                                                         \
        for (int64_t off = 0, s; off < h; off += s) {                                                                  \
            s = short_rows(ar, h - off);                                                                               \
            tile_ep e;                                                                                                 \
            if (ep) e = (tile_ep){ep->bias, ep->act, ep->y ? (const T *)ep->y + off * ldc : NULL};                     \
            tile_##SFX(kernel_for(ar, s, width, down), kcb, ap + off * ra, ra, ca, bp, bs, cp + off * ldc, ldc, s, s,  \
                       0, w, kw, add, ep ? &e : NULL);                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
                                                                                                                       \
    /* Row panel pn of C by the column panel from column j0, w wide: the short kernels where pn is cut, else one     \
     * tile of mr rows whose first sh are the panel above's; A from pn's top row at at (strides ra, ca), the panel of  \
     * B at bp (rows bs apart); on the last K block (last) the tiles end with the epilogue. */                         \
    static inline void panel_##SFX(const pardo_gemm *g, const gemm_arch *ar, const a_panel *pn, bool down, int64_t kcb, \
                            const T *at, int64_t ra, int64_t ca, const T *bp, int64_t bs, int64_t j0, int64_t w,       \
                            bool add, bool last) {                                                                     \
        const int width = width_for(ar, w);                                                                            \
        const int64_t kw = ar->nr >> width;                                                                            \
        tile_ep e;                                                                                                     \
        const tile_ep *ep = last ? tile_ep_at(g, pn->i0, j0, &e) : NULL;                                               \
        T *cp = (T *)g->c + pn->i0 * g->ldc + j0;                                                                      \
        if (pn->cut)                                                                                                   \
            cut_##SFX(ar, width, down, kcb, at, ra, ca, bp, bs, cp, g->ldc, pn->h, w, kw, add, ep);                    \
        else                                                                                                           \
            tile_##SFX(kernel_for(ar, ar->mr, width, down), kcb, at, ra, ca, bp, bs, cp, g->ldc, ar->mr, pn->h,        \
                       pn->sh, w, kw, add, ep);                                                                        \
    }                                                                                                                  \
                                                                                                                       \
    /* Rows [r0, r1) of C (r0 a multiple of mr) from the packed op(B). A short last row panel is cut into short        \
     * kernels where the arch has them; else it starts sh rows higher, overlapping the panel above (the same sums;     \
     * only its own rows are written), so it needs no padding unless A has fewer than mr rows in all. */               \
    static void rows_##SFX(const gemm_job *j, int64_t r0, int64_t r1) {                                                \
        const pardo_gemm *g = j->g;                                                                                    \
        const gemm_arch *ar = j->arch;                                                                                 \
        const int64_t mr = ar->mr, nr = ar->nr;                                                                        \
        const T *a = g->a;                                                                                             \
        T ap[MC_ROWS * KC_MAX] __attribute__((aligned(64))); /* a block's row panels of A packed [panel][p][mr] */     \
        for (int64_t kb = j->kb0; kb < j->kb1; kb++) {                                                                 \
            const int64_t p0 = kb * j->kc, kcb = g->k - p0 < j->kc ? g->k - p0 : j->kc;                                \
            const bool add = g->accumulate || kb > 0, last = kb == j->nkb - 1; /* last: the tiles end with the epilogue */ \
            /* panel jp of this K block starts at bblock + jp * pstep, its rows bs apart */                            \
            const T *bblock =                                                                                          \
                j->direct ? (const T *)g->b + p0 * g->ldb : (const T *)j->bpack + (p0 * j->np * nr - j->boff);         \
            const int64_t bs = j->direct ? g->ldb : nr, pstep = j->direct ? nr : kcb * nr;                             \
            for (int64_t ic = r0; ic < r1; ic += MC_ROWS) {                                                            \
                const int64_t ie = ic + MC_ROWS < r1 ? ic + MC_ROWS : r1;                                              \
                pardo_comm_poll(); /* an allreduce in flight moves on (MPI ranks: rank_merge's buckets) */             \
                if (g->m < mr || (j->np > 1 && (g->ta || !own_is_avx512()))) {                                                             \
                    /* A read down its columns (or tiny): pack the block's row panels (panel q's [p][mr] at ap + q *   \
                     * mr * kcb; down columns, a stored row of A at a time, so the reads run along it), then sweep     \
                     * them with each column panel of B in L1 (measured: 3% faster than each row panel in L1 across   \
                     * the column panels where K is a part's 128 rows; the same at 256) */                             \
                    a_panel pan[MC_ROWS];                                                                              \
                    const int64_t npan = a_panels(ar, g->m, ic, ie, pan);                                              \
                    for (int64_t p = 0; p < kcb && g->ta; p += 8) { /* 8 stored rows of A at a time */               \
                        const int64_t pn = kcb - p < 8 ? kcb - p : 8;                                                  \
                        for (int64_t q = 0; q < npan; q++) {                                                           \
                            const T *src = a + (p0 + p) * g->lda + pan[q].top;                                         \
                            if (pan[q].rows == mr &&                                                                   \
                                pack_at_##SFX(src, g->lda, pn, mr, ap + q * mr * kcb + p * mr, p + pn == kcb))         \
                                continue;                                                                              \
                            for (int64_t pp = 0; pp < pn; pp++) {                                                      \
                                T *d = ap + q * mr * kcb + (p + pp) * mr;                                              \
                                if (pan[q].rows == MR_MAX) /* a copy of known size: inline moves, not a call */        \
                                    memcpy(d, src + pp * g->lda, MR_MAX * sizeof(T));                                  \
                                else                                                                                   \
                                    memcpy(d, src + pp * g->lda, (size_t)pan[q].rows * sizeof(T));                     \
                                for (int64_t i = pan[q].rows; i < mr; i++) d[i] = 0;                                   \
                            }                                                                                          \
                        }                                                                                              \
                    }                                                                                                  \
                    for (int64_t q = 0; q < npan && !g->ta; q++)                                                       \
                        if (!pack_a_##SFX(a + pan[q].top * g->lda + p0, g->lda, pan[q].rows, mr, kcb, ap + q * mr * kcb)) \
                        for (int64_t p = 0; p < kcb; p++) {                                                            \
                            T *d = ap + q * mr * kcb + p * mr;                                                         \
                            for (int64_t i = 0; i < pan[q].rows; i++) d[i] = a[(pan[q].top + i) * g->lda + p0 + p];    \
                            for (int64_t i = pan[q].rows; i < mr; i++) d[i] = 0;                                       \
                        }                                                                                              \
                    for (int64_t jp = j->jp0; jp < j->jp1; jp++) {                                                      \
                        const int64_t j0 = jp * nr, w = g->n - j0 < nr ? g->n - j0 : nr;                               \
                        for (int64_t q = 0; q < npan; q++)                                                             \
                            panel_##SFX(g, ar, &pan[q], true, kcb, ap + q * mr * kcb, 1, mr, bblock + jp * pstep, bs,  \
                                        j0, w, add, last);                                                             \
                    }                                                                                                  \
                    continue;                                                                                          \
                }                                                                                                      \
                /* A read in place; a column panel of B stays in L1 over the block's row panels */                     \
                const int64_t rsa = g->ta ? 1 : g->lda, csa = g->ta ? g->lda : 1;                                      \
                a_panel pan[MC_ROWS];                                                                                  \
                const int64_t npan = a_panels(ar, g->m, ic, ie, pan);                                                  \
                for (int64_t jp = j->jp0; jp < j->jp1; jp++) {                                                          \
                    const int64_t j0 = jp * nr, w = g->n - j0 < nr ? g->n - j0 : nr;                                   \
                    for (int64_t q = 0; q < npan; q++)                                                                 \
                        panel_##SFX(g, ar, &pan[q], g->ta, kcb, a + pan[q].top * rsa + p0 * csa, rsa, csa,             \
                                    bblock + jp * pstep, bs, j0, w, add, last);                                        \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

GEMM_DRIVER(f32, float)
GEMM_DRIVER(f64, double)

/* Rows [begin * unit, end * unit) of C (clipped to m), unit a multiple of mr. */
static void rows_in_units(const gemm_job *j, int64_t unit, int64_t begin, int64_t end) {
    const int64_t r0 = begin * unit, r1 = end * unit < j->g->m ? end * unit : j->g->m;
    if (j->g->dtype == PARDO_F32)
        rows_f32(j, r0, r1);
    else
        rows_f64(j, r0, r1);
}

/* Items are blocks of MC_ROWS rows (a multiple of every mr), the blocks rows_ sweeps one at a time: run one
 * after the other they are rows_ over all rows. */
static void block_items(void *arg, int64_t begin, int64_t end) { rows_in_units(arg, MC_ROWS, begin, end); }

/* Items are row panels of mr rows. */
static void row_items(void *arg, int64_t begin, int64_t end) {
    const gemm_job *j = arg;
    rows_in_units(j, j->arch->mr, begin, end);
}

static int gemm_own(pardo_kernel_ctx *ctx, const pardo_gemm *g, int kc);

/* Items are column panels: all rows of C for panels [begin, end), their
 * panels of op(B) packed by this thread, a K block at a time, into its own
 * buffer (BUF_COLS: the item never waits, so nothing else on this thread
 * uses it meanwhile), where they stay in its L2 and no other thread reads
 * them. The same tiles and K blocks as a split by rows: the same bits. */
static void col_items(void *arg, int64_t begin, int64_t end) {
    gemm_job *shared = arg;
    gemm_job j = {.g = shared->g, .arch = shared->arch, .np = shared->np, .kc = shared->kc, .nkb = shared->nkb,
                  .jp0 = begin, .jp1 = end};
    const size_t es = j.g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
    void *buf = pardo_gemm_buf_get(BUF_COLS, (size_t)j.kc * (size_t)(end - begin) * (size_t)j.arch->nr * es);
    if (!buf) {
        atomic_store(&shared->oom, true);
        return;
    }
    for (int64_t kb = 0; kb < j.nkb; kb++) {
        pardo_gemm_pack_block(&j, kb, begin, end, buf);
        rows_in_units(&j, j.g->m, 0, 1);
    }
}

/* True when g on the own kernels (np column panels) at nthreads splits its
 * column panels over the threads (col_items) rather than its rows: each
 * thread then packs only the part of op(B) it multiplies, where a split by
 * rows packs op(B) once and has every thread read all of it, half from
 * another core. Measured at 2 threads: four of the five MLP products it
 * takes 5 to 9% faster (fc1 dW1 the same), the training step's
 * single-thread graph 3 to 8%. Only where the panels share out evenly, the
 * rows are enough to reuse each packed block (MC_ROWS) and K is long
 * enough for packing to matter (COLS_MIN_K). */
static bool split_columns(const pardo_gemm *g, int64_t np, int nthreads) {
    return nthreads > 1 && g->m >= MC_ROWS && g->k >= COLS_MIN_K && np >= 2 * nthreads && np % nthreads == 0;
}

/* The own kernels for a product of dtype, A transposed or not, n columns. */
static const gemm_arch *arch_for(pardo_dtype dtype, bool ta, int64_t n) {
    const gemm_arch *ar = &pardo_gemm_own_arch[dtype == PARDO_F64];
#if GEMM_X86
    /* measured: 6x64 is 3-9% faster where A is read along its rows and the product is wide; 12x32 (12x16 tiles
     * for N <= 16) where A is packed down its columns or N is narrow. The pick depends on the shape alone. */
    if (ar == &pardo_gemm_arch_avx512[0] && !ta && n >= 64) ar = &pardo_gemm_arch_avx512_wide;
#endif
    return ar;
}

/* Rows [i0, i1) of C from t = C^T ([n, m], rows m apart), then their epilogue: 16 x 16 blocks in registers where
 * the rows are 16 and AVX-512 runs, else element by element. */
static void swap_rows(const pardo_gemm *g, const void *t, int64_t i0, int64_t i1) {
    int64_t jdone = 0;
#if GEMM_X86
    if (g->dtype == PARDO_F32 && i1 - i0 == 16 && own_is_avx512())
        for (; jdone + 16 <= g->n; jdone += 16)
            pardo_gemm_tr16_f32((const float *)t + jdone * g->m + i0, g->m, (float *)g->c + i0 * g->ldc + jdone,
                                g->ldc);
    else if (g->dtype == PARDO_F32 && i1 - i0 == 16 && own_has_avx2())
        for (; jdone + 8 <= g->n; jdone += 8)
            for (int64_t h = i0; h < i1; h += 8)
                pardo_gemm_tr8_f32((const float *)t + jdone * g->m + h, g->m, (float *)g->c + h * g->ldc + jdone,
                                   g->ldc);
#endif
    for (int64_t i = i0; i < i1; i++) {
        if (g->dtype == PARDO_F32)
            for (int64_t j = jdone; j < g->n; j++) ((float *)g->c)[i * g->ldc + j] = ((const float *)t)[j * g->m + i];
        else
            for (int64_t j = jdone; j < g->n; j++) ((double *)g->c)[i * g->ldc + j] = ((const double *)t)[j * g->m + i];
    }
    pardo_gemm_epilogue_rows(g, i0, i1);
}

typedef struct swap_job {
    const pardo_gemm *g;
    const void *t; // C^T
} swap_job;

/* Items are blocks of 16 rows of C. */
static void swap_items(void *arg, int64_t begin, int64_t end) {
    const swap_job *sj = arg;
    for (int64_t b = begin; b < end; b++) swap_rows(sj->g, sj->t, b * 16, b * 16 + 16 < sj->g->m ? b * 16 + 16 : sj->g->m);
}

/* True when g runs cheaper as the swapped product C^T = op(B)^T op(A)^T (gemm_swapped), never from the thread
 * count (so that a product's bits do not depend on it): op(B) transposed ([n, k] as stored), which packing
 * would transpose whole, where the swapped product transposes less: A (m x k, unless A is stored transposed) and
 * its result (m x n) -- a handful of rows, a part's few rows against a square weight (dY W^T of a parallel_do
 * part), or a batch against a wider weight (dY W^T of a 784-input layer: measured 2% faster swapped; a tie, as a
 * batch of 256 against a square 512 weight, stays unswapped); or few columns (fewer than NARROW_COLS, a 10-class
 * layer's weight gradient A^T dY) from a transposed A, where the kernels would fill a tile's lanes with zeros and
 * C^T = dY^T A has few rows and its wide B (A itself) read in place. Not for accumulate (its K blocks would be
 * added to C in another order). The choice depends on the shape and on whether B is kept packed
 * (pardo_gemm.b_packed, the same for every run of an op). */
static bool swap_pays(const pardo_gemm *g) {
    if (g->accumulate) return false;
    if (g->tb) {
        if (g->m <= DIRECT_MAX_ROWS && g->n >= 4 * g->m) return true;
        /* by the transposes, but not where B is kept packed from run to run (pardo_gemm_packed: no packing to
         * save; the bits are the same either way), nor where the kernels pack A as stored too (AVX2's): the swapped
         * product then packs both as well and transposes its result besides (measured with AVX2, 1 thread: fc1's
         * dX = dY W1^T best 99 -> 105 GFLOP/s unswapped, a part's 100 or 128 rows against a square weight 81 -> 95
         * and 98 -> 107) */
        const double swapped = (double)g->m * (double)((g->ta ? 0 : g->k) + g->n), packed = (double)g->n * (double)g->k;
        return !g->b_packed && own_is_avx512() && swapped < packed;
    }
    return g->ta && g->n < NARROW_COLS && g->m >= 4 * g->n;
}

/* g as the swapped product (swap_pays): C^T into a per-thread buffer, then transposed into C (its rows split over
 * the threads), each block of rows given the epilogue as it lands. */
static int gemm_swapped(pardo_kernel_ctx *ctx, const pardo_gemm *g) {
    const size_t es = g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
    void *t = pardo_gemm_buf_get(BUF_SWAP, (size_t)(g->n * g->m) * es);
    if (!t) return pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate a product's %lld x %lld result",
                                (long long)g->n, (long long)g->m);
    pardo_gemm s = {.dtype = g->dtype, .ta = !g->tb, .tb = !g->ta, .m = g->n, .n = g->m, .k = g->k, .a = g->b,
                    .lda = g->ldb, .b = g->a, .ldb = g->lda, .c = t, .ldc = g->m};
    /* K blocked as g's own kernels would block it: each element's terms summed in the same order (the swapped
     * kernel multiplies b a for a b), so the bits are the unswapped product's */
    int rc = gemm_own(ctx, &s, arch_for(g->dtype, g->ta, g->n)->kc);
    if (rc != PARDO_OK) return rc;
    swap_job sj = {.g = g, .t = t};
    return pardo_parallel_for(ctx, (g->m + 15) / 16, swap_items, &sj);
}

void pardo_gemm_packed_clear(pardo_gemm_packed *p) {
    free(p->data);
    *p = (pardo_gemm_packed){0};
}

/* j for g from the caller's kept op(B) (g->b_packed): true when j reads it
 * (packed now if B is the one seen last time, unchanged), with *rc the
 * packing's status; false when B is to be packed as usual. */
static bool kept_b(pardo_kernel_ctx *ctx, const pardo_gemm *g, gemm_job *j, size_t es, int *rc) {
    pardo_gemm_packed *pc = g->b_packed;
    const bool same = pc->valid && pc->b == g->b && pc->arch == j->arch && pc->ldb == g->ldb && pc->k == g->k &&
                      pc->n == g->n && pc->tb == g->tb && pc->dtype == g->dtype && pc->version == g->b_version;
    const bool again = pc->seen_b == g->b && pc->seen_version == g->b_version;
    pc->seen_b = g->b;
    pc->seen_version = g->b_version;
    if (!same) {
        if (!again) return false; /* seen once: packed as usual */
        const size_t bytes = ((size_t)g->k * (size_t)j->np * (size_t)j->arch->nr * es + 63) & ~(size_t)63;
        if (bytes > pc->cap) {
            void *p = aligned_alloc(64, bytes);
            if (!p) return false; /* packed as usual */
            free(pc->data);
            pc->data = p;
            pc->cap = bytes;
        }
        pc->valid = false;
    }
    /* all K blocks of op(B), packed whole at pc->data */
    j->kb0 = 0;
    j->kb1 = j->nkb;
    j->boff = 0;
    j->direct = false;
    j->bpack = pc->data;
    if (same) return true;
    if ((*rc = pardo_parallel_for(ctx, j->np, pardo_gemm_pack_items, j)) != PARDO_OK) return true;
    *pc = (pardo_gemm_packed){.data = pc->data, .cap = pc->cap, .valid = true, .b = g->b, .arch = j->arch,
                              .ldb = g->ldb, .k = g->k, .n = g->n, .tb = g->tb, .dtype = g->dtype,
                              .version = g->b_version, .seen_b = g->b, .seen_version = g->b_version};
    return true;
}

/* g on the own kernels, K in blocks of at most kc rows (0: the kernels' own). */
static int gemm_own(pardo_kernel_ctx *ctx, const pardo_gemm *g, int kc) {
    const gemm_arch *ar = arch_for(g->dtype, g->ta, g->n);
    const size_t es = g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
    gemm_job j = {.g = g, .arch = ar, .np = (g->n + ar->nr - 1) / ar->nr};
    j.jp1 = j.np;
    if (kc <= 0) kc = ar->kc;
    j.nkb = (g->k + kc - 1) / kc;
    j.kc = (g->k + j.nkb - 1) / j.nkb;
    const int64_t mp = (g->m + ar->mr - 1) / ar->mr;
    const bool one = ctx->nthreads <= 1 || mp <= 1;
    /* few rows: packing op(B) would cost about what the product does, so where B is not transposed, its
     * panels whole and its rows 64-byte aligned, the kernel reads it in place (its aligned loads hold) */
    j.direct = !g->tb && g->m <= DIRECT_MAX_ROWS && g->n % ar->nr == 0 && (uintptr_t)g->b % 64 == 0 &&
               (size_t)g->ldb * es % 64 == 0;
    if (g->b_packed) {
        int rc = PARDO_OK;
        if (kept_b(ctx, g, &j, es, &rc)) return rc == PARDO_OK ? pardo_parallel_for(ctx, mp, row_items, &j) : rc;
    }
    if (j.direct) {
        j.kb0 = 0;
        j.kb1 = j.nkb;
        return pardo_parallel_for(ctx, mp, row_items, &j);
    }
    if (!one && split_columns(g, j.np, ctx->nthreads)) {
        atomic_init(&j.oom, false);
        int rc = pardo_parallel_for(ctx, j.np, col_items, &j);
        if (rc == PARDO_OK && atomic_load(&j.oom))
            rc = pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate a buffer to pack a matrix product's panels");
        return rc;
    }
    /* one thread packs one K block at a time; several share all of op(B) */
    const size_t bytes = (size_t)(one ? j.kc : g->k) * (size_t)j.np * (size_t)ar->nr * es;
    /* small products pack on the stack, so they never touch the heap (not even on a thread's first product) */
    max_align_t small[PACK_STACK / sizeof(max_align_t)] __attribute__((aligned(64)));
    void *buf = bytes <= sizeof small ? (void *)small : pardo_gemm_buf_get(BUF_PACK, bytes);
    if (!buf) return pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate %zu bytes to pack a matrix product", bytes);
    if (one) { /* pack each K block just before it is used, so it is still in L2 */
        const int64_t nblocks = (g->m + MC_ROWS - 1) / MC_ROWS;
        for (int64_t kb = 0; kb < j.nkb; kb++) {
            pardo_gemm_pack_block(&j, kb, 0, j.np, buf);
            /* the row blocks in order, some maybe on an idle thread (a parallel_do part's product, helped by the
             * thread of a part that ended first); the same tiles and sums either way */
            int rc = pardo_parallel_for_idle(ctx, nblocks, block_items, &j);
            if (rc != PARDO_OK) return rc;
        }
        return PARDO_OK;
    }
    j.bpack = buf;
    /* several: pack all of op(B) at once (split by panels), then split the rows */
    j.kb0 = 0;
    j.kb1 = j.nkb;
    int rc = pardo_parallel_for(ctx, j.np, pardo_gemm_pack_items, &j);
    if (rc == PARDO_OK) rc = pardo_parallel_for(ctx, mp, row_items, &j);
    return rc;
}

bool pardo_gemm_splits_columns(const pardo_gemm *g, int nthreads) {
    pardo_gemm_setup();
    const gemm_arch *ar = arch_for(g->dtype, g->ta, g->n);
    return !g->b_packed && split_columns(g, (g->n + ar->nr - 1) / ar->nr, nthreads);
}

/* ---- through BLAS: rows in fixed blocks, so the bits do not depend on the thread count ---- */

#define BLAS_ROWS 128

typedef struct blas_job {
    const pardo_gemm *g;
    atomic_int failed;
    pardo_status st; // the first failure
} blas_job;

static void blas_items(void *arg, int64_t begin, int64_t end) {
    blas_job *j = arg;
    pardo_status st;
    for (int64_t r = begin; r < end; r++) {
        int64_t m0 = r * BLAS_ROWS, m1 = m0 + BLAS_ROWS < j->g->m ? m0 + BLAS_ROWS : j->g->m;
        if (pardo_gemm_blas_rows(j->g, m0, m1, &st) != PARDO_OK) {
            if (atomic_exchange(&j->failed, 1) == 0) j->st = st;
            continue;
        }
        pardo_gemm_epilogue_rows(j->g, m0, m1);
    }
}

static int gemm_blas(pardo_kernel_ctx *ctx, const pardo_gemm *g) {
    blas_job j = {.g = g};
    int rc = pardo_parallel_for(ctx, (g->m + BLAS_ROWS - 1) / BLAS_ROWS, blas_items, &j);
    if (rc == PARDO_OK && atomic_load(&j.failed)) {
        *ctx->st = j.st;
        rc = j.st.code;
    }
    return rc;
}

static bool stride_ok(int64_t ld, int64_t cols) { return ld >= cols; }

int pardo_gemm_run(pardo_kernel_ctx *ctx, const pardo_gemm *g, pardo_gemm_impl impl) {
    if ((g->dtype != PARDO_F32 && g->dtype != PARDO_F64) || g->m < 0 || g->n < 0 || g->k < 0 ||
        !stride_ok(g->lda, g->ta ? g->m : g->k) || !stride_ok(g->ldb, g->tb ? g->k : g->n) || !stride_ok(g->ldc, g->n))
        return pardo_errorf(ctx->st, PARDO_EINVAL,
                            "gemm: bad product (%s, m %lld, n %lld, k %lld, lda %lld, ldb %lld, ldc %lld)",
                            pardo_dtype_name(g->dtype), (long long)g->m, (long long)g->n, (long long)g->k,
                            (long long)g->lda, (long long)g->ldb, (long long)g->ldc);
    pardo_gemm_setup();
    if (impl == PARDO_GEMM_BLAS && !pardo_gemm_blas_compiled())
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "gemm: pardo was built without BLAS (make BLAS=1)");
    if (g->m == 0 || g->n == 0) return PARDO_OK;
    if (g->k == 0) { /* an empty sum */
        const size_t es = g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
        for (int64_t i = 0; !g->accumulate && i < g->m; i++)
            memset((char *)g->c + (size_t)(i * g->ldc) * es, 0, (size_t)g->n * es);
        pardo_gemm_epilogue_rows(g, 0, g->m);
        return PARDO_OK;
    }
    pardo_kernel_ctx one = *ctx;
    if ((double)g->m * (double)g->n * (double)g->k < (double)PAR_MIN_MACS) {
        one.nthreads = 1;
        one.idle_help = false;
    }
    if (use_blas(impl, g) && pardo_gemm_blas_compiled()) return gemm_blas(&one, g);
    int rc;
    if (own_has_avx2() && pardo_gemm_narrow(&one, g, own_is_avx512(), &rc)) return rc;
    if (swap_pays(g)) return gemm_swapped(&one, g);
    return gemm_own(&one, g, 0);
}
