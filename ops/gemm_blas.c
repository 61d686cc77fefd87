/* gemm_blas.c - the CBLAS side of gemm.h. Built with BLAS=1 (the Makefile
 * defines PARDO_BLAS and links the library pkg-config names); without it
 * every entry says BLAS is absent. With OpenBLAS the library's own threads
 * are set to 1 once (pardo splits rows over its pool instead); a library
 * built without locking (OpenBLAS's serial build: openblas_get_parallel()
 * is 0) is not safe to call from several threads at once, so its calls are
 * serialised. */
#include "gemm.h"

#ifdef PARDO_BLAS
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static bool blas_serial;                                      // calls must not overlap
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER; // held around calls when blas_serial
static char blas_name[160];

static void blas_setup(void) {
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(1);
    blas_serial = openblas_get_parallel() == 0;
    snprintf(blas_name, sizeof blas_name, "blas: %s%s", openblas_get_config(),
             blas_serial ? " (calls serialised: no locking)" : " (1 thread per call)");
#else
    blas_serial = true;
    snprintf(blas_name, sizeof blas_name, "blas: CBLAS (calls serialised)");
#endif
}

bool pardo_gemm_blas_compiled(void) { return true; }

const char *pardo_gemm_blas_name(void) {
    pthread_once(&blas_once, blas_setup);
    return blas_name;
}

int pardo_gemm_blas_rows(const pardo_gemm *g, int64_t m0, int64_t m1, pardo_status *st) {
    pthread_once(&blas_once, blas_setup);
    const int64_t lim = 0x7fffffff;
    if (g->n > lim || g->k > lim || m1 - m0 > lim || g->lda > lim || g->ldb > lim || g->ldc > lim)
        return pardo_errorf(st, PARDO_ENOTSUP, "gemm: a size or stride past CBLAS's int range");
    const int m = (int)(m1 - m0), n = (int)g->n, k = (int)g->k;
    const enum CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans, tb = g->tb ? CblasTrans : CblasNoTrans;
    const int64_t aoff = g->ta ? m0 : m0 * g->lda, coff = m0 * g->ldc;
    if (blas_serial) pthread_mutex_lock(&blas_lock);
    if (g->dtype == PARDO_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, (const float *)g->a + aoff, (int)g->lda, g->b, (int)g->ldb,
                    g->accumulate ? 1.0f : 0.0f, (float *)g->c + coff, (int)g->ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, (const double *)g->a + aoff, (int)g->lda, g->b, (int)g->ldb,
                    g->accumulate ? 1.0 : 0.0, (double *)g->c + coff, (int)g->ldc);
    if (blas_serial) pthread_mutex_unlock(&blas_lock);
    return PARDO_OK;
}

#else

bool pardo_gemm_blas_compiled(void) { return false; }

const char *pardo_gemm_blas_name(void) { return "blas: none (built with BLAS=0)"; }

int pardo_gemm_blas_rows(const pardo_gemm *g, int64_t m0, int64_t m1, pardo_status *st) {
    (void)g;
    (void)m0;
    (void)m1;
    return pardo_errorf(st, PARDO_ENOTSUP, "gemm: pardo was built without BLAS (make BLAS=1)");
}

#endif
