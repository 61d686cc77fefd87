/* gemm_blas.c - the CBLAS side of gemm.h. Built with BLAS=1 (the Makefile
 * defines PARDO_BLAS and names the library pkg-config finds, opened on first
 * use); without it every entry says BLAS is absent. With OpenBLAS the library's own threads
 * are set to 1 once (pardo splits rows over its pool instead); a library
 * built without locking (OpenBLAS's serial build: openblas_get_parallel()
 * is 0) is not safe to call from several threads at once, so its calls are
 * serialised. */
#include "gemm.h"

#ifdef PARDO_BLAS
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The library is opened on the first BLAS call, not at start-up: loading
 * OpenBLAS costs a process about 3 MiB of resident memory, and pardo's own
 * kernel does every product on a CPU with SIMD. PARDO_BLAS_LIBRARY is the
 * file the build found (the Makefile passes pkg-config's libdir). */
#ifndef PARDO_BLAS_LIBRARY
#define PARDO_BLAS_LIBRARY "libopenblas.so.0"
#endif

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, float,
                         const float *, int, const float *, int, float, float *, int);
typedef void (*dgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, double,
                         const double *, int, const double *, int, double, double *, int);

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static sgemm_fn blas_sgemm;                                   // NULL when the library could not be opened
static dgemm_fn blas_dgemm;
static bool blas_serial;                                      // calls must not overlap
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER; // held around calls when blas_serial
static char blas_name[320];

/* *fn = the library's symbol `name` (NULL when absent). dlsym returns an
 * object pointer; POSIX guarantees it converts to a function pointer, and
 * copying the bytes says so without a cast ISO C forbids. */
static void symbol(void *lib, const char *name, void *fn, size_t fn_size) {
    void *p = dlsym(lib, name);
    memcpy(fn, &p, fn_size);
}

static void blas_setup(void) {
    void *lib = dlopen(PARDO_BLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(blas_name, sizeof blas_name, "blas: cannot open %s (%s)", PARDO_BLAS_LIBRARY, dlerror());
        return;
    }
    void (*set_threads)(int);
    int (*get_parallel)(void);
    char *(*get_config)(void);
    symbol(lib, "cblas_sgemm", &blas_sgemm, sizeof blas_sgemm);
    symbol(lib, "cblas_dgemm", &blas_dgemm, sizeof blas_dgemm);
    symbol(lib, "openblas_set_num_threads", &set_threads, sizeof set_threads);
    symbol(lib, "openblas_get_parallel", &get_parallel, sizeof get_parallel);
    symbol(lib, "openblas_get_config", &get_config, sizeof get_config);
    if (!blas_sgemm || !blas_dgemm) {
        blas_sgemm = NULL;
        snprintf(blas_name, sizeof blas_name, "blas: %s has no cblas_sgemm / cblas_dgemm", PARDO_BLAS_LIBRARY);
        return;
    }
    if (set_threads) set_threads(1);
    blas_serial = !get_parallel || get_parallel() == 0;
    snprintf(blas_name, sizeof blas_name, "blas: %s%s", get_config ? get_config() : "CBLAS",
             blas_serial ? " (calls serialised: no locking)" : " (1 thread per call)");
}

bool pardo_gemm_blas_compiled(void) { return true; }

bool pardo_gemm_blas_usable(void) {
    pthread_once(&blas_once, blas_setup);
    return blas_sgemm != NULL;
}

const char *pardo_gemm_blas_library(void) { return PARDO_BLAS_LIBRARY; }

const char *pardo_gemm_blas_name(void) {
    pthread_once(&blas_once, blas_setup);
    return blas_name;
}

int pardo_gemm_blas_rows(const pardo_gemm *g, int64_t m0, int64_t m1, pardo_status *st) {
    pthread_once(&blas_once, blas_setup);
    if (!blas_sgemm) return pardo_errorf(st, PARDO_ENOTSUP, "gemm: %s", blas_name);
    const int64_t lim = 0x7fffffff;
    if (g->n > lim || g->k > lim || m1 - m0 > lim || g->lda > lim || g->ldb > lim || g->ldc > lim)
        return pardo_errorf(st, PARDO_ENOTSUP, "gemm: a size or stride past CBLAS's int range");
    const int m = (int)(m1 - m0), n = (int)g->n, k = (int)g->k;
    const enum CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans, tb = g->tb ? CblasTrans : CblasNoTrans;
    const int64_t aoff = g->ta ? m0 : m0 * g->lda, coff = m0 * g->ldc;
    if (blas_serial) pthread_mutex_lock(&blas_lock);
    if (g->dtype == PARDO_F32)
        blas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, (const float *)g->a + aoff, (int)g->lda, g->b, (int)g->ldb,
                   g->accumulate ? 1.0f : 0.0f, (float *)g->c + coff, (int)g->ldc);
    else
        blas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, (const double *)g->a + aoff, (int)g->lda, g->b, (int)g->ldb,
                   g->accumulate ? 1.0 : 0.0, (double *)g->c + coff, (int)g->ldc);
    if (blas_serial) pthread_mutex_unlock(&blas_lock);
    return PARDO_OK;
}


#else

bool pardo_gemm_blas_compiled(void) { return false; }

bool pardo_gemm_blas_usable(void) { return false; }

const char *pardo_gemm_blas_library(void) { return "none"; }

const char *pardo_gemm_blas_name(void) { return "blas: none (built with BLAS=0)"; }

int pardo_gemm_blas_rows(const pardo_gemm *g, int64_t m0, int64_t m1, pardo_status *st) {
    (void)g;
    (void)m0;
    (void)m1;
    return pardo_errorf(st, PARDO_ENOTSUP, "gemm: pardo was built without BLAS (make BLAS=1)");
}

#endif
