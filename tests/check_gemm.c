/* check_gemm.c - the matrix product under matmul (ops/gemm.h): the own
 * kernel and BLAS (where built in) against a naive loop in double on odd
 * shapes (around the kernel's tiles, K blocks and row blocks), every
 * transpose, row strides wider than the rows, accumulate or not; the row
 * split over the thread pool (nthreads 2) against one thread, bit for bit;
 * matmul itself at 2 threads against 1; errors. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_suites.h"
#include "gemm.h"
#include "op_test_util.h"
#include "test_util.h"
#include "exec/thread_pool.h"
#include "core/value_json.h"

static void pool_size(int n) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != n) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(n, &st) == PARDO_OK, "%s", st.msg);
}

/* A product's operands and results, in float32 or float64, with row strides
 * pad elements wider than needed. */
typedef struct prod {
    pardo_gemm g;
    void *a, *b, *c;
    double *ref; // expected C [m, n], in double
    double *mag; // sum of |a||b| per element: the scale of the rounding error
} prod;

static double get(pardo_dtype dt, const void *p, int64_t i) {
    return dt == PARDO_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static void set(pardo_dtype dt, void *p, int64_t i, double v) {
    if (dt == PARDO_F32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

static prod prod_make(pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t pad, bool acc,
                      uint64_t seed) {
    prod p;
    memset(&p, 0, sizeof p);
    const size_t es = dt == PARDO_F32 ? sizeof(float) : sizeof(double);
    const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    p.g = (pardo_gemm){.dtype = dt,
                       .ta = ta,
                       .tb = tb,
                       .m = m,
                       .n = n,
                       .k = k,
                       .lda = ac + pad,
                       .ldb = bc + pad,
                       .ldc = n + pad,
                       .accumulate = acc};
    p.a = calloc((size_t)(ar * p.g.lda + 1), es);
    p.b = calloc((size_t)(br * p.g.ldb + 1), es);
    p.c = calloc((size_t)(m * p.g.ldc + 1), es);
    p.ref = calloc((size_t)(m * n + 1), sizeof(double));
    p.mag = calloc((size_t)(m * n + 1), sizeof(double));
    ck_assert(p.a && p.b && p.c && p.ref && p.mag);
    test_rng r = {seed};
    for (int64_t i = 0; i < ar * p.g.lda; i++) set(dt, p.a, i, test_rng_uniform(&r, -1, 1));
    for (int64_t i = 0; i < br * p.g.ldb; i++) set(dt, p.b, i, test_rng_uniform(&r, -1, 1));
    for (int64_t i = 0; i < m * p.g.ldc; i++) set(dt, p.c, i, acc ? test_rng_uniform(&r, -1, 1) : (double)NAN);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = acc ? get(dt, p.c, i * p.g.ldc + j) : 0, mg = fabs(s);
            for (int64_t q = 0; q < k; q++) {
                double x = get(dt, p.a, ta ? q * p.g.lda + i : i * p.g.lda + q);
                double w = get(dt, p.b, tb ? j * p.g.ldb + q : q * p.g.ldb + j);
                s += x * w;
                mg += fabs(x * w);
            }
            p.ref[i * n + j] = s;
            p.mag[i * n + j] = mg;
        }
    p.g.a = p.a;
    p.g.b = p.b;
    p.g.c = p.c;
    return p;
}

static void prod_free(prod *p) {
    free(p->a);
    free(p->b);
    free(p->c);
    free(p->ref);
    free(p->mag);
}

/* C against the reference, and the padding between rows untouched. */
static void prod_check(const prod *p, const char *what) {
    const pardo_gemm *g = &p->g;
    const double eps = g->dtype == PARDO_F32 ? 1e-6 : 1e-14;
    for (int64_t i = 0; i < g->m; i++) {
        for (int64_t j = 0; j < g->n; j++) {
            double got = get(g->dtype, p->c, i * g->ldc + j), want = p->ref[i * g->n + j];
            ck_assert_msg(fabs(got - want) <= 4 * eps * (p->mag[i * g->n + j] + 1),
                          "%s: %s m %lld n %lld k %lld ta %d tb %d acc %d: C[%lld, %lld] = %.9g, expected %.9g", what,
                          pardo_dtype_name(g->dtype), (long long)g->m, (long long)g->n, (long long)g->k, g->ta, g->tb,
                          g->accumulate, (long long)i, (long long)j, got, want);
        }
        for (int64_t j = g->n; j < g->ldc && i + 1 < g->m; j++) {
            double pad = get(g->dtype, p->c, i * g->ldc + j);
            ck_assert_msg(g->accumulate ? !isnan(pad) : isnan(pad), "%s: the padding of row %lld was written", what,
                          (long long)i);
        }
    }
}

static int run(pardo_gemm_impl impl, int nthreads, const pardo_gemm *g, pardo_status *st) {
    pardo_kernel_ctx ctx = {.st = st, .nthreads = nthreads};
    return pardo_gemm_run(&ctx, g, impl);
}

static void check_one(pardo_gemm_impl impl, int nthreads, pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta,
                      bool tb, int64_t pad, bool acc) {
    prod p = prod_make(dt, m, n, k, ta, tb, pad, acc, (uint64_t)(m * 1000003 + n * 1009 + k * 7 + ta * 2 + tb));
    pardo_status st;
    ck_assert_msg(run(impl, nthreads, &p.g, &st) == PARDO_OK, "%s", st.msg);
    prod_check(&p, impl == PARDO_GEMM_BLAS ? "blas" : "own");
    prod_free(&p);
}

/* Sizes around the tiles (mr 4, 6, 12; nr 8, 16, 32), the row blocks (96)
 * and the K blocks (256). */
static void same_bits(pardo_gemm_impl impl, pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                      bool acc);

static const int64_t ms[] = {1, 5, 12, 13, 25, 97};
static const int64_t ns[] = {1, 7, 16, 17, 33, 70};
static const int64_t ks[] = {1, 3, 64, 257};

static void sweep(pardo_gemm_impl impl, pardo_dtype dt, int nthreads) {
    for (int ti = 0; ti < 4; ti++)
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 6; b++)
                for (int c = 0; c < 4; c++)
                    check_one(impl, nthreads, dt, ms[a], ns[b], ks[c], ti & 1, ti & 2, (a + b + c) % 3,
                              (a + b) % 2 == 1);
}

START_TEST(own_against_naive_float32) { sweep(PARDO_GEMM_OWN, PARDO_F32, 1); }
END_TEST

START_TEST(own_against_naive_float64) { sweep(PARDO_GEMM_OWN, PARDO_F64, 1); }
END_TEST

static void epilogue_case(pardo_gemm_impl impl, int nthreads, pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta,
                          bool tb, bool with_bias, bool relu, bool mask);

static void column_split_case(pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool acc,
                              int64_t pad);

static void rows_independent_of_row_count(void);

static void gelu_epilogue_cases(int nthreads);

static void narrow_cases(void);

START_TEST(every_instruction_set) {
    /* the kernels this CPU can run besides the one it picks: AVX2+FMA and plain C (and the SIMD transposes off) */
    pardo_status st;
    const char *isas[] = {"avx2", "c"};
    for (int i = 0; i < 2; i++) {
        if (pardo_gemm_force_isa(isas[i], &st) != PARDO_OK) continue; /* not on this CPU */
        ck_assert_ptr_nonnull(strstr(pardo_gemm_describe(PARDO_F32, PARDO_GEMM_OWN), i ? "plain C" : "avx2"));
        sweep(PARDO_GEMM_OWN, PARDO_F32, 1);
        sweep(PARDO_GEMM_OWN, PARDO_F64, 1);
        pool_size(2);
        same_bits(PARDO_GEMM_OWN, PARDO_F32, 257, 130, 300, false, true, false);
        same_bits(PARDO_GEMM_OWN, PARDO_F64, 131, 67, 260, true, false, true);
        column_split_case(PARDO_F32, 192, 508, 300, false, true, false, 1);
        column_split_case(PARDO_F64, 120, 64, 260, true, false, true, 0);
        rows_independent_of_row_count(); /* the short kernels' rows are the full tile's */
        gelu_epilogue_cases(1);
        narrow_cases(); /* AVX2's dot products of few columns (plain C: the tiles) */
        for (int mask = 0; mask < 2; mask++) { /* each kernel's epilogue */
            epilogue_case(PARDO_GEMM_OWN, 1, PARDO_F32, 29, 70, 300, false, false, true, true, mask);
            epilogue_case(PARDO_GEMM_OWN, 1, PARDO_F64, 31, 67, 60, true, false, true, mask == 0, mask);
        }
    }
    ck_assert_int_eq(pardo_gemm_force_isa("auto", &st), PARDO_OK);
    ck_assert_int_eq(pardo_gemm_force_isa("sse9", &st), PARDO_ENOTSUP);
}
END_TEST

START_TEST(blas_against_naive) {
    if (!pardo_gemm_blas_compiled()) return;
    sweep(PARDO_GEMM_BLAS, PARDO_F32, 1);
    sweep(PARDO_GEMM_BLAS, PARDO_F64, 1);
}
END_TEST

START_TEST(large_products_and_k_blocks) {
    /* big enough to split over threads, K over several blocks, N over many panels */
    pool_size(2);
    const bool tf[2] = {false, true};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_one(PARDO_GEMM_OWN, 2, PARDO_F32, 203, 141, 600, tf[ta], tf[tb], 1, false);
            check_one(PARDO_GEMM_OWN, 2, PARDO_F64, 130, 75, 513, tf[ta], tf[tb], 0, true);
            if (pardo_gemm_blas_compiled())
                check_one(PARDO_GEMM_BLAS, 2, PARDO_F32, 300, 70, 280, tf[ta], tf[tb], 2, true);
        }
}
END_TEST

/* The same product at 1 and 2 threads gives the same bits. */
static void same_bits(pardo_gemm_impl impl, pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                      bool acc) {
    prod p = prod_make(dt, m, n, k, ta, tb, 0, acc, 99), q = prod_make(dt, m, n, k, ta, tb, 0, acc, 99);
    pardo_status st;
    ck_assert_msg(run(impl, 1, &p.g, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(run(impl, 2, &q.g, &st) == PARDO_OK, "%s", st.msg);
    const size_t es = dt == PARDO_F32 ? sizeof(float) : sizeof(double);
    ck_assert_msg(memcmp(p.c, q.c, (size_t)(m * n) * es) == 0, "%s m %lld n %lld k %lld: 2 threads differ from 1",
                  impl == PARDO_GEMM_BLAS ? "blas" : "own", (long long)m, (long long)n, (long long)k);
    prod_check(&q, "2 threads");
    prod_free(&p);
    prod_free(&q);
}

START_TEST(two_threads_give_the_same_bits) {
    pool_size(2);
    for (int t = 0; t < 4; t++) {
        same_bits(PARDO_GEMM_OWN, PARDO_F32, 257, 130, 300, t & 1, t & 2, false);
        same_bits(PARDO_GEMM_OWN, PARDO_F64, 131, 67, 260, t & 1, t & 2, true);
        if (pardo_gemm_blas_compiled()) same_bits(PARDO_GEMM_BLAS, PARDO_F32, 300, 64, 200, t & 1, t & 2, false);
    }
}
END_TEST

/* A product that 2 threads split by column panels (each packing its own
 * panels of op(B)): the bits of 1 thread, the reference, padding untouched. */
static void column_split_case(pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool acc,
                              int64_t pad) {
    prod p = prod_make(dt, m, n, k, ta, tb, pad, acc, 5), q = prod_make(dt, m, n, k, ta, tb, pad, acc, 5);
    ck_assert_msg(pardo_gemm_splits_columns(&q.g, 2), "m %lld n %lld k %lld: expected a split by column panels",
                  (long long)m, (long long)n, (long long)k);
    pardo_status st;
    ck_assert_msg(run(PARDO_GEMM_OWN, 1, &p.g, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(run(PARDO_GEMM_OWN, 2, &q.g, &st) == PARDO_OK, "%s", st.msg);
    const size_t es = dt == PARDO_F32 ? sizeof(float) : sizeof(double);
    ck_assert_msg(memcmp(p.c, q.c, (size_t)(m * q.g.ldc) * es) == 0,
                  "%s m %lld n %lld k %lld ta %d tb %d: split by column panels differs from 1 thread",
                  pardo_dtype_name(dt), (long long)m, (long long)n, (long long)k, ta, tb);
    prod_check(&q, "column panels");
    prod_free(&p);
    prod_free(&q);
}

START_TEST(column_panels_split_over_threads) {
    pool_size(2);
    column_split_case(PARDO_F32, 192, 512, 300, false, false, false, 0); /* 6x64: 8 panels, 3 K blocks */
    column_split_case(PARDO_F32, 192, 512, 300, false, true, true, 3);   /* B packed by transposing; C += */
    column_split_case(PARDO_F32, 256, 512, 200, true, false, false, 1);  /* A down its columns: 12x32, 16 panels */
    column_split_case(PARDO_F32, 100, 508, 160, false, false, false, 0); /* a last panel narrower than nr */
    column_split_case(PARDO_F64, 120, 64, 260, false, false, true, 0);   /* 12x16: 4 panels, 2 K blocks */
    /* and where it splits by rows: panels that do not share out evenly (an odd count for nr 8 to 64), too few
     * rows, a short K, one thread */
    const int64_t rows_only[][3] = {{256, 520, 512}, {64, 512, 512}, {256, 512, 64}};
    for (size_t i = 0; i < sizeof rows_only / sizeof rows_only[0]; i++) {
        pardo_gemm g = {.dtype = PARDO_F32, .m = rows_only[i][0], .n = rows_only[i][1], .k = rows_only[i][2]};
        ck_assert_msg(!pardo_gemm_splits_columns(&g, 2), "m %lld n %lld k %lld: expected a split by rows",
                      (long long)g.m, (long long)g.n, (long long)g.k);
    }
    pardo_gemm g = {.dtype = PARDO_F32, .m = 256, .n = 512, .k = 784};
    ck_assert(!pardo_gemm_splits_columns(&g, 1));
}
END_TEST

/* The product of p's first m rows of op(A) by the first n columns of op(B) (the same strides), on one thread,
 * gives the bits p's product (already run) has there. */
static void same_bits_as_part(const prod *p, int64_t m, int64_t n) {
    const size_t es = p->g.dtype == PARDO_F32 ? sizeof(float) : sizeof(double);
    void *c = malloc((size_t)(m * n) * es);
    ck_assert(c);
    pardo_gemm g = p->g;
    g.m = m;
    g.n = n;
    g.c = c;
    g.ldc = n;
    pardo_status st;
    ck_assert_msg(run(PARDO_GEMM_OWN, 1, &g, &st) == PARDO_OK, "%s", st.msg);
    for (int64_t i = 0; i < m; i++)
        ck_assert_msg(memcmp((char *)c + (size_t)(i * n) * es, (char *)p->c + (size_t)(i * p->g.ldc) * es,
                             (size_t)n * es) == 0,
                      "%s m %lld n %lld ta %d tb %d: row %lld differs from the %lld x %lld product's",
                      pardo_dtype_name(g.dtype), (long long)m, (long long)n, g.ta, g.tb, (long long)i,
                      (long long)p->g.m, (long long)p->g.n);
    free(c);
}

/* A last row panel of fewer rows than the kernel's tile is cut into short
 * kernels (6, 4, 2, 1 rows): every remainder of the 12- and 6-row tiles,
 * against the naive loop; and the rows it computes come out the bits the
 * full tile gives the same rows of a taller product. */
START_TEST(short_row_panels) {
    for (int t = 0; t < 4; t++)
        for (int64_t m = 1; m <= 26; m++) {
            check_one(PARDO_GEMM_OWN, 1, PARDO_F32, m, 70, 257, t & 1, t & 2, m % 2, m % 3 == 0);
            check_one(PARDO_GEMM_OWN, 1, PARDO_F32, m, 33, 3, t & 1, t & 2, 0, m % 3 == 1);
            check_one(PARDO_GEMM_OWN, 1, PARDO_F64, m, 17, 257, t & 1, t & 2, 1, m % 3 == 2);
        }
    const pardo_dtype dts[2] = {PARDO_F32, PARDO_F64};
    const int64_t tall = 60, ns2[2] = {70, 33};
    for (int t = 0; t < 16; t++) {
        const pardo_dtype dt = dts[t / 8];
        const int64_t n = ns2[(t / 4) % 2];
        prod p = prod_make(dt, tall, n, 300, t & 1, t & 2, 0, false, 7);
        pardo_status st;
        ck_assert_msg(run(PARDO_GEMM_OWN, 1, &p.g, &st) == PARDO_OK, "%s", st.msg);
        for (int64_t m = 49; m < tall; m++) /* the first m rows of A (columns when transposed: same lda) */
            same_bits_as_part(&p, m, n);
        prod_free(&p);
    }
}
END_TEST

/* A last column panel of at most a quarter of the 6 x 64 tile (16 columns) runs the 6 x 16 kernel: against the
 * naive loop, and the same bits as those columns inside a wider product, where the full kernel makes them. */
START_TEST(quarter_width_panels) {
    const int64_t ns_[] = {65, 72, 80, 144, 784};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof ns_ / sizeof ns_[0]; i++) {
            check_one(PARDO_GEMM_OWN, 1, PARDO_F32, 13, ns_[i], 300, false, t, (int64_t)i % 2, i % 3 == 1);
            check_one(PARDO_GEMM_OWN, 1, PARDO_F32, 256, ns_[i], 5, false, t, 0, false);
        }
    for (int t = 0; t < 2; t++) {
        prod p = prod_make(PARDO_F32, 29, 128, 300, false, t, 0, false, 11);
        pardo_status st;
        ck_assert_msg(run(PARDO_GEMM_OWN, 1, &p.g, &st) == PARDO_OK, "%s", st.msg);
        for (int64_t n = 65; n <= 80; n += 15) /* B's first n columns (rows when transposed), ldb as before */
            same_bits_as_part(&p, 29, n);
        prod_free(&p);
    }
}
END_TEST

/* A row of C comes out the same bits whatever the row count (a parallel_do
 * part's share of a batch against the whole batch), on every path a shape
 * may take: the tiles, the dot products of few columns, the swapped
 * product of a transposed weight or of few columns from a transposed A. */
static void rows_independent_of_row_count(void) {
    static const struct {
        int64_t n, k;
        bool ta, tb;
    } shapes[] = {{70, 300, false, false}, {10, 512, false, false}, {10, 64, false, true},
                  {512, 512, false, true}, {10, 256, true, false},  {300, 200, true, true}};
    const int64_t tall = 128, ms3[] = {1, 5, 8, 16, 48, 64, 100};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int64_t n = shapes[c].n;
        prod p = prod_make(PARDO_F32, tall, n, shapes[c].k, shapes[c].ta, shapes[c].tb, 0, false, 11 + c);
        pardo_status st;
        ck_assert_msg(run(PARDO_GEMM_OWN, 1, &p.g, &st) == PARDO_OK, "%s", st.msg);
        float *rows = malloc((size_t)(tall * n) * sizeof(float));
        ck_assert_ptr_nonnull(rows);
        for (size_t i = 0; i < sizeof ms3 / sizeof ms3[0]; i++) {
            pardo_gemm g = p.g; /* the first m rows of op(A): A's first rows, or its first columns (same lda) */
            g.m = ms3[i];
            g.c = rows;
            g.ldc = n;
            ck_assert_msg(run(PARDO_GEMM_OWN, 1, &g, &st) == PARDO_OK, "%s", st.msg);
            for (int64_t r = 0; r < g.m; r++)
                ck_assert_msg(memcmp(rows + r * n, (float *)p.c + r * p.g.ldc, (size_t)n * sizeof(float)) == 0,
                              "n %lld k %lld ta %d tb %d: row %lld of %lld differs from the %lld-row product's",
                              (long long)n, (long long)shapes[c].k, shapes[c].ta, shapes[c].tb, (long long)r,
                              (long long)g.m, (long long)tall);
        }
        free(rows);
        prod_free(&p);
    }
}

START_TEST(rows_do_not_depend_on_the_row_count) { rows_independent_of_row_count(); }
END_TEST

/* The epilogue (bias along rows, then relu, then relu_grad's mask through
 * y) gives bitwise what the plain product then the add, relu and relu_grad
 * arithmetic give, on every path: own kernel in float32 and float64, one
 * and two threads, short row panels, several K blocks, BLAS, and k = 0.
 * The mask's y holds positives, negatives, zeros of both signs and NaN
 * (only y > 0 lets the product through). */
static void epilogue_case(pardo_gemm_impl impl, int nthreads, pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta,
                          bool tb, bool with_bias, bool relu, bool mask) {
    pardo_status st;
    prod p = prod_make(dt, m, n, k, ta, tb, 1, false, (uint64_t)(m * 31 + n * 7 + k));
    const size_t es = dt == PARDO_F32 ? sizeof(float) : sizeof(double);
    void *bias = calloc((size_t)n + 1, es), *plain = calloc((size_t)(m * p.g.ldc + 1), es),
         *y = calloc((size_t)(m * p.g.ldc + 1), es);
    ck_assert(bias && plain && y);
    test_rng r = {(uint64_t)n};
    for (int64_t j = 0; j < n; j++) set(dt, bias, j, test_rng_uniform(&r, -0.5, 0.5));
    static const double specials[] = {0.0, -0.0, NAN, 1e-30, -1e-30};
    for (int64_t i = 0; i < m * p.g.ldc; i++)
        set(dt, y, i, i % 7 < 5 ? specials[i % 7] : test_rng_uniform(&r, -1, 1));
    pardo_gemm g = p.g;
    g.c = plain;
    ck_assert_msg(run(impl, nthreads, &g, &st) == PARDO_OK, "%s", st.msg);
    g = p.g;
    g.bias = with_bias ? bias : NULL;
    g.act = relu ? PARDO_GEMM_ACT_RELU : PARDO_GEMM_ACT_NONE;
    g.relu_y = mask ? y : NULL;
    ck_assert_msg(run(impl, nthreads, &g, &st) == PARDO_OK, "%s", st.msg);
    int negatives = 0, masked = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t at = i * p.g.ldc + j;
            double want;
            if (dt == PARDO_F32) {
                float v = ((float *)plain)[at];
                if (with_bias) v = v + ((float *)bias)[j];
                negatives += v < 0;
                want = relu && v < 0 ? 0.0f : v;
                if (mask) want = ((float *)y)[at] > 0 ? (float)want : 0.0f;
            } else {
                double v = ((double *)plain)[at];
                if (with_bias) v = v + ((double *)bias)[j];
                negatives += v < 0;
                want = relu && v < 0 ? 0.0 : v;
                if (mask) want = ((double *)y)[at] > 0 ? want : 0.0;
            }
            masked += mask && !(get(dt, y, at) > 0) && want == 0;
            const float wantf = (float)want;
            ck_assert_msg(memcmp((char *)p.c + (size_t)at * es, dt == PARDO_F32 ? (const void *)&wantf : &want, es) == 0,
                          "%s m %lld n %lld k %lld: C[%lld, %lld] = %.9g, expected the bits of %.9g",
                          pardo_dtype_name(dt), (long long)m, (long long)n, (long long)k, (long long)i, (long long)j,
                          get(dt, p.c, at), want);
        }
    ck_assert(m * n < 8 || negatives > 0);     /* relu had something to do */
    ck_assert(!mask || m * n < 8 || masked > 0); /* and the mask */
    free(bias);
    free(plain);
    free(y);
    prod_free(&p);
}

START_TEST(epilogue_matches_add_relu_and_relu_grad) {
    pool_size(2);
    for (int t = 0; t < 2; t++) {
        const int th = t + 1;
        for (int mask = 0; mask < 2; mask++) {
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F32, 97, 70, 300, false, false, true, true, mask);
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F32, 128, 256, 200, false, false, true, true, mask); /* columns */
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F32, 13, 64, 64, false, false, true, false, mask);
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F32, 25, 33, 257, true, true, false, true, mask);
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F64, 131, 67, 260, true, false, true, true, mask);
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F32, 5, 7, 0, false, false, true, true, mask); /* an empty sum */
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F32, 5, 70, 300, false, true, true, true, mask); /* swapped */
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F32, 200, 10, 64, true, false, true, true, mask); /* swapped */
            /* the mask alone, as matmul_grad's dA carries it */
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F32, 256, 512, 10, false, true, false, false, mask);
            epilogue_case(PARDO_GEMM_OWN, th, PARDO_F64, 40, 96, 33, false, true, false, false, mask);
            if (pardo_gemm_blas_compiled())
                epilogue_case(PARDO_GEMM_BLAS, th, PARDO_F32, 300, 64, 200, false, true, true, true, mask);
        }
    }
}
END_TEST

/* The gelu epilogue (bias along rows, then gelu, then maybe relu_grad's mask) gives bitwise what the plain
 * product then the add and gelu ops themselves give (run as ops, on tensors of the product's rows), on the
 * paths epilogue_case covers. */
static void gelu_epilogue_case(pardo_gemm_impl impl, int nthreads, pardo_dtype dt, int64_t m, int64_t n, int64_t k,
                               bool ta, bool tb, bool with_bias, bool mask) {
    pardo_status st;
    prod p = prod_make(dt, m, n, k, ta, tb, 1, false, (uint64_t)(m * 37 + n * 5 + k));
    const size_t es = dt == PARDO_F32 ? sizeof(float) : sizeof(double);
    void *plain = calloc((size_t)(m * p.g.ldc + 1), es), *y = calloc((size_t)(m * p.g.ldc + 1), es);
    double *vals = calloc((size_t)(m * n + 1), sizeof(double)), *bvals = calloc((size_t)n + 1, sizeof(double));
    ck_assert(plain && y && vals && bvals);
    test_rng r = {(uint64_t)n + 3};
    for (int64_t j = 0; j < n; j++) bvals[j] = dt == PARDO_F32 ? (double)(float)test_rng_uniform(&r, -2, 2)
                                                              : test_rng_uniform(&r, -2, 2);
    for (int64_t i = 0; i < m * p.g.ldc; i++) set(dt, y, i, i % 5 == 0 ? -1.0 : i % 5 == 1 ? (double)NAN : 1.0);
    pardo_tensor *bias = test_tensor_from(dt, 1, &n, bvals);
    ck_assert_ptr_nonnull(bias);
    pardo_gemm g = p.g;
    g.c = plain;
    ck_assert_msg(run(impl, nthreads, &g, &st) == PARDO_OK, "%s", st.msg);
    g = p.g;
    g.bias = with_bias ? pardo_tensor_data(bias) : NULL;
    g.act = PARDO_GEMM_ACT_GELU;
    g.relu_y = mask ? y : NULL;
    ck_assert_msg(run(impl, nthreads, &g, &st) == PARDO_OK, "%s", st.msg);
    /* the reference: add, then gelu, as ops */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) vals[i * n + j] = get(dt, plain, i * p.g.ldc + j);
    const int64_t shape[2] = {m, n};
    pardo_tensor *x = test_tensor_from(dt, 2, shape, vals), *sum = NULL, *want = NULL;
    ck_assert_ptr_nonnull(x);
    if (with_bias) {
        pardo_tensor *in[2] = {x, bias};
        ck_assert_msg(test_run_op("add", NULL, 2, in, 1, &sum, &st) == PARDO_OK, "%s", st.msg);
    } else {
        sum = x;
        pardo_tensor_retain(sum);
    }
    ck_assert_msg(test_run_op("gelu", NULL, 1, &sum, 1, &want, &st) == PARDO_OK, "%s", st.msg);
    const char *w = pardo_tensor_data(want);
    int64_t mixed = 0; /* elements where gelu is neither 0 nor x: it had something to do */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t at = i * p.g.ldc + j;
            const double before = get(dt, pardo_tensor_data(sum), i * n + j), after = get(dt, w, i * n + j);
            mixed += after != 0 && after != before;
            const bool keep = !mask || get(dt, y, at) > 0;
            const double zero = 0.0;
            const float zerof = 0.0f;
            const void *expect = keep ? (const void *)(w + (size_t)(i * n + j) * es)
                                      : dt == PARDO_F32 ? (const void *)&zerof : (const void *)&zero;
            ck_assert_msg(memcmp((char *)p.c + (size_t)at * es, expect, es) == 0,
                          "%s m %lld n %lld k %lld ta %d tb %d bias %d mask %d: C[%lld, %lld] = %.9g, expected the "
                          "bits of %.9g",
                          pardo_dtype_name(dt), (long long)m, (long long)n, (long long)k, ta, tb, with_bias, mask,
                          (long long)i, (long long)j, get(dt, p.c, at), keep ? after : 0.0);
        }
    ck_assert(m * n < 8 || k == 0 || mixed > 0);
    pardo_tensor_release(x);
    pardo_tensor_release(sum);
    pardo_tensor_release(want);
    pardo_tensor_release(bias);
    free(plain);
    free(y);
    free(vals);
    free(bvals);
    prod_free(&p);
}

/* The gelu epilogue's shapes: the tiles (A along rows and down columns, K blocks, short row panels, narrow
 * column panels), the split by column panels at 2 threads, an empty sum, the swapped products, the dot
 * products of few columns, float64, and BLAS where built in. */
static void gelu_epilogue_cases(int nthreads) {
    for (int b = 0; b < 2; b++) {
        const bool bias = b == 0;
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F32, 97, 70, 300, false, false, bias, false);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F32, 128, 256, 200, false, false, bias, b == 1);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F32, 13, 64, 64, false, false, bias, false);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F32, 25, 33, 257, true, true, bias, false);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F64, 131, 67, 260, true, false, bias, b == 1);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F32, 5, 7, 0, false, false, bias, false);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F32, 5, 70, 300, false, true, bias, false);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F32, 200, 10, 64, true, false, bias, false);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F32, 256, 10, 512, false, false, bias, b == 1);
        gelu_epilogue_case(PARDO_GEMM_OWN, nthreads, PARDO_F64, 40, 96, 33, false, true, bias, false);
        if (pardo_gemm_blas_compiled())
            gelu_epilogue_case(PARDO_GEMM_BLAS, nthreads, PARDO_F32, 300, 64, 200, false, true, bias, b == 1);
    }
}

START_TEST(gelu_epilogue_matches_add_and_gelu_ops) {
    pool_size(2);
    gelu_epilogue_cases(1);
    gelu_epilogue_cases(2);
}
END_TEST

/* A kept op(B) (pardo_gemm_packed): not kept on first sight, packed whole
 * and kept when the same B comes again unchanged, then read; every product
 * bitwise the plain one. A new version of B (its data written) or another
 * B is packed anew, never read stale. Small and wide products, B either
 * way, one and two threads, both dtypes. */
static void kept_b_case(int nthreads, pardo_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    pardo_status st;
    prod p = prod_make(dt, m, n, k, ta, tb, 3, false, (uint64_t)(m + n + k));
    const size_t es = dt == PARDO_F32 ? sizeof(float) : sizeof(double), cbytes = (size_t)(m * p.g.ldc) * es;
    void *plain = calloc(cbytes + es, 1);
    ck_assert(plain);
    pardo_gemm_packed kept = {0};
    uint64_t version = 7;
    for (int call = 0; call < 6; call++) {
        if (call == 4) { /* B written: a new version */
            const int64_t bn = (tb ? n : k) * p.g.ldb;
            for (int64_t i = 0; i < bn; i++) set(dt, p.b, i, -get(dt, p.b, i) * 0.5);
            version++;
        }
        pardo_gemm g = p.g;
        g.c = plain;
        ck_assert_msg(run(PARDO_GEMM_OWN, nthreads, &g, &st) == PARDO_OK, "%s", st.msg);
        g = p.g;
        g.b_packed = &kept;
        g.b_version = version;
        ck_assert_msg(run(PARDO_GEMM_OWN, nthreads, &g, &st) == PARDO_OK, "%s", st.msg);
        for (int64_t i = 0; i < m; i++)
            ck_assert_msg(memcmp((char *)p.c + (size_t)(i * p.g.ldc) * es, (char *)plain + (size_t)(i * p.g.ldc) * es,
                                 (size_t)n * es) == 0,
                          "%s m %lld n %lld k %lld ta %d tb %d, call %d: row %lld differs from the plain product",
                          pardo_dtype_name(dt), (long long)m, (long long)n, (long long)k, ta, tb, call, (long long)i);
        /* kept (for this version) from its second sight on */
        ck_assert_int_eq(kept.valid && kept.version == version, call == 1 || call == 2 || call == 3 || call == 5);
        ck_assert(!kept.valid || kept.b == p.b);
    }
    /* another B at a new address: not the kept one */
    pardo_gemm g = p.g;
    void *b2 = malloc((size_t)((tb ? n : k) * p.g.ldb + 1) * es);
    ck_assert(b2);
    memcpy(b2, p.b, (size_t)((tb ? n : k) * p.g.ldb) * es);
    g.b = b2;
    g.b_packed = &kept;
    g.b_version = version;
    ck_assert_msg(run(PARDO_GEMM_OWN, nthreads, &g, &st) == PARDO_OK, "%s", st.msg);
    ck_assert(kept.b == p.b); /* seen once: still the old copy, unused */
    for (int64_t i = 0; i < m; i++)
        ck_assert(memcmp((char *)p.c + (size_t)(i * p.g.ldc) * es, (char *)plain + (size_t)(i * p.g.ldc) * es,
                         (size_t)n * es) == 0);
    free(b2);
    pardo_gemm_packed_clear(&kept);
    ck_assert(!kept.data && !kept.valid);
    free(plain);
    prod_free(&p);
}

START_TEST(kept_b_is_read_only_while_current) {
    pool_size(2);
    for (int th = 1; th <= 2; th++) {
        kept_b_case(th, PARDO_F32, 256, 512, 300, false, false);
        kept_b_case(th, PARDO_F32, 30, 70, 600, false, true);
        kept_b_case(th, PARDO_F64, 97, 40, 33, true, false);
        kept_b_case(th, PARDO_F32, 5, 64, 512, false, false); /* few rows: B would be read in place */
    }
}
END_TEST

/* Products of few rows read B in place instead of packing it (B not
 * transposed, whole panels, 64-byte aligned rows): against the naive loop,
 * several K blocks, A either way, one and two threads, both dtypes. */
START_TEST(few_rows_read_b_in_place) {
    pool_size(2);
    static const int64_t ms_small[] = {1, 5, 13, 48};
    for (int dt = 0; dt < 2; dt++)
        for (int a = 0; a < 4; a++)
            for (int ta = 0; ta < 2; ta++)
                for (int th = 1; th <= 2; th++) {
                    const pardo_dtype d = dt ? PARDO_F64 : PARDO_F32;
                    const size_t es = dt ? sizeof(double) : sizeof(float);
                    const int64_t m = ms_small[a], n = 128, k = 300, ldb = 128 + 16;
                    prod p = prod_make(d, m, n, k, ta, false, 0, false, (uint64_t)(m * 5 + ta + dt));
                    void *b = aligned_alloc(64, (size_t)(k * ldb) * es);
                    ck_assert_ptr_nonnull(b);
                    for (int64_t q = 0; q < k; q++)
                        for (int64_t j = 0; j < ldb; j++)
                            set(d, b, q * ldb + j, j < n ? get(d, p.b, q * p.g.ldb + j) : (double)NAN);
                    p.g.b = b;
                    p.g.ldb = ldb;
                    pardo_status st;
                    ck_assert_msg(run(PARDO_GEMM_OWN, th, &p.g, &st) == PARDO_OK, "%s", st.msg);
                    prod_check(&p, "in place");
                    free(b);
                    prod_free(&p);
                }
}
END_TEST

/* A product run as the swapped product C^T = op(B)^T op(A)^T (ops/gemm.c):
 * against the naive loop, and the same bits on 1 and 2 threads. */
static void swapped_case(pardo_dtype d, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    const size_t es = d == PARDO_F64 ? sizeof(double) : sizeof(float);
    prod p = prod_make(d, m, n, k, ta, tb, 1, false, (uint64_t)(7 + ta + 2 * tb + m + n));
    pardo_status st;
    ck_assert_msg(run(PARDO_GEMM_OWN, 1, &p.g, &st) == PARDO_OK, "%s", st.msg);
    prod_check(&p, "swapped");
    void *one = malloc((size_t)(m * p.g.ldc) * es);
    ck_assert_ptr_nonnull(one);
    memcpy(one, p.c, (size_t)(m * p.g.ldc) * es);
    ck_assert_msg(run(PARDO_GEMM_OWN, 2, &p.g, &st) == PARDO_OK, "%s", st.msg);
    for (int64_t i = 0; i < m; i++)
        ck_assert(memcmp((char *)one + (size_t)(i * p.g.ldc) * es, (char *)p.c + (size_t)(i * p.g.ldc) * es,
                         (size_t)p.g.n * es) == 0);
    free(one);
    prod_free(&p);
}

/* A few rows against a transposed B. */
START_TEST(few_rows_against_transposed_b) {
    pool_size(2);
    for (int dt = 0; dt < 2; dt++)
        for (int ta = 0; ta < 2; ta++)
            for (int64_t m = 1; m <= 48; m += 47) swapped_case(dt ? PARDO_F64 : PARDO_F32, m, 300, 520, ta, true);
}
END_TEST

/* Products of 1 to 12 columns from A as stored (a 10-class layer's Y = H W,
 * a regression head's one column) run as dot products along K
 * (ops/gemm_narrow.c, AVX-512 or AVX2): against the naive loop for K below, at and
 * past a vector, rows around the kernels' 2 to 6, B stored either way,
 * the epilogue; and the same bits on 1 and 2 threads. */
static void narrow_cases(void) {
    const int64_t ks2[4] = {5, 16, 300, 784};
    for (int64_t n = 1; n <= 13; n++)
        for (int c = 0; c < 4; c++)
            for (int tb = 0; tb < 2; tb++) {
                const int64_t m = 16 + (n * 7 + c) % 11; /* 16 to 26 rows: every remainder of 2 to 6 */
                check_one(PARDO_GEMM_OWN, 1, PARDO_F32, m, n, ks2[c], false, tb, c % 2, false);
                if (c == 2) same_bits(PARDO_GEMM_OWN, PARDO_F32, 100 + n, n, ks2[c], false, tb, false);
            }
    for (int mask = 0; mask < 2; mask++)
        epilogue_case(PARDO_GEMM_OWN, 2, PARDO_F32, 256, 10, 512, false, false, true, true, mask);
}

START_TEST(narrow_products) {
    pool_size(2);
    narrow_cases();
}
END_TEST

/* A parallel_do part's product (nthreads 1, idle_help) while the pool's other
 * thread has nothing to do: that thread takes row blocks of it
 * (pardo_parallel_for_idle), and the result is the unhelped product's, bit
 * for bit, and right against the naive loop. Shapes of the MLP's part: the
 * forward product (A read along rows), the weight gradient (A packed down
 * its columns), the swapped dX; each also with the epilogue the executor's
 * fused chains give it (bias and relu; relu_grad's mask), bit for bit. */
typedef struct helped_prod {
    prod *p;
    pardo_status st;
    int rc;
} helped_prod;

static void helped_item(void *arg, int64_t i) {
    helped_prod *h = arg;
    struct timespec ts = {0, 5000000}; /* both items sleep; the thread without the product then waits, awake */
    nanosleep(&ts, NULL);
    if (i != 1) return;
    test_someone_idle_within_100ms(); /* until it does (else, after 100 ms, the product runs alone) */
    pardo_kernel_ctx ctx = {.st = &h->st, .nthreads = 1, .idle_help = true};
    h->rc = pardo_gemm_run(&ctx, &h->p->g, PARDO_GEMM_OWN);
}

START_TEST(part_product_helped_by_an_idle_thread) {
    pool_size(2);
    static const struct {
        int64_t m, n, k;
        bool ta, tb;
    } cases[] = {{128, 512, 784, false, false}, {784, 512, 128, true, false}, {128, 512, 512, false, true}};
    for (int dt = 0; dt < 2; dt++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int epi = 0; epi < 2; epi++) {
                const pardo_dtype d = dt ? PARDO_F64 : PARDO_F32;
                const size_t es = dt ? sizeof(double) : sizeof(float);
                prod p = prod_make(d, cases[c].m, cases[c].n, cases[c].k, cases[c].ta, cases[c].tb, 1, false, 11);
                void *bias = calloc((size_t)p.g.n, es), *y = calloc((size_t)(p.g.m * p.g.ldc), es);
                ck_assert(bias && y);
                for (int64_t j = 0; j < p.g.n; j++) set(d, bias, j, 0.01 * (double)(j % 13) - 0.06);
                for (int64_t i = 0; i < p.g.m * p.g.ldc; i++) set(d, y, i, i % 3 == 0 ? -1.0 : 1.0);
                if (epi && c == 0) { /* the forward chain: matmul -> add -> relu */
                    p.g.bias = bias;
                    p.g.act = PARDO_GEMM_ACT_RELU;
                } else if (epi) { /* the backward chain: matmul_grad -> relu_grad */
                    p.g.relu_y = y;
                }
                pardo_status st;
                ck_assert_msg(run(PARDO_GEMM_OWN, 1, &p.g, &st) == PARDO_OK, "%s", st.msg);
                const size_t bytes = (size_t)(p.g.m * p.g.ldc) * es;
                void *alone = malloc(bytes);
                ck_assert_ptr_nonnull(alone);
                memcpy(alone, p.c, bytes);
                for (int64_t r = 0; r < p.g.m; r++) /* a row the helped run leaves unwritten shows */
                    for (int64_t q = 0; q < p.g.n; q++) set(d, p.c, r * p.g.ldc + q, -7.0);
                helped_prod h = {.p = &p, .rc = -1};
                pardo_thread_pool_for(2, 2, helped_item, &h);
                ck_assert_msg(h.rc == PARDO_OK, "%s", h.st.msg);
                if (!epi) prod_check(&p, "helped"); /* the epilogue's own reference is epilogue_case's */
                for (int64_t r = 0; r < p.g.m; r++)
                    ck_assert_msg(memcmp((char *)alone + (size_t)(r * p.g.ldc) * es,
                                         (char *)p.c + (size_t)(r * p.g.ldc) * es, (size_t)p.g.n * es) == 0,
                                  "%s case %zu%s: row %lld differs helped and alone", pardo_dtype_name(d), c,
                                  epi ? " with its epilogue" : "", (long long)r);
                free(alone);
                free(bias);
                free(y);
                prod_free(&p);
            }
}
END_TEST

/* A part's rows against a square weight, transposed (dY W^T in a
 * parallel_do part), and a batch against a wider one (fc1's dX = dY W1^T,
 * 256 x 784 from K 512: transposing dY and the result moves 331,776
 * elements, packing W1^T 401,408): swapped where that transposes less, with
 * the bits of the product run unswapped (as it is where B is kept packed). */
START_TEST(part_rows_against_transposed_weight) {
    pool_size(2);
    static const int64_t shapes[4][3] = {{128, 512, 512}, {100, 512, 512}, {64, 512, 512}, {256, 784, 512}};
    for (int dt = 0; dt < 2; dt++)
        for (int i = 0; i < 4; i++) {
            const pardo_dtype d = dt ? PARDO_F64 : PARDO_F32;
            const size_t es = dt ? sizeof(double) : sizeof(float);
            const int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
            swapped_case(d, m, n, k, false, true);
            prod p = prod_make(d, m, n, k, false, true, 1, false, 5);
            pardo_status st;
            ck_assert_msg(run(PARDO_GEMM_OWN, 1, &p.g, &st) == PARDO_OK, "%s", st.msg);
            void *plain = malloc((size_t)(m * p.g.ldc) * es);
            ck_assert_ptr_nonnull(plain);
            pardo_gemm g = p.g;
            pardo_gemm_packed kept = {0}; /* seen once: packed as usual, not swapped */
            g.c = plain;
            g.b_packed = &kept;
            ck_assert_msg(run(PARDO_GEMM_OWN, 1, &g, &st) == PARDO_OK, "%s", st.msg);
            for (int64_t r = 0; r < m; r++)
                ck_assert_msg(memcmp((char *)plain + (size_t)(r * p.g.ldc) * es, (char *)p.c + (size_t)(r * p.g.ldc) * es,
                                     (size_t)p.g.n * es) == 0,
                              "%s m %lld: row %lld differs swapped and not", pardo_dtype_name(d), (long long)m,
                              (long long)r);
            pardo_gemm_packed_clear(&kept);
            free(plain);
            prod_free(&p);
        }
}
END_TEST

/* A few columns from a transposed A (a 10-class layer's weight gradient
 * A^T dY): its wide B is A itself, read in place or packed. */
START_TEST(few_columns_from_transposed_a) {
    pool_size(2);
    for (int dt = 0; dt < 2; dt++) {
        const pardo_dtype d = dt ? PARDO_F64 : PARDO_F32;
        swapped_case(d, 512, 10, 300, true, false); /* B read in place: 10 rows, whole panels */
        swapped_case(d, 784, 10, 256, true, false); /* 784 columns: B packed, a short panel */
        swapped_case(d, 60, 15, 33, true, false);
        swapped_case(d, 700, 1, 5, true, false);
    }
}
END_TEST

START_TEST(empty_sizes) {
    pardo_status st;
    prod p = prod_make(PARDO_F32, 3, 4, 0, false, false, 1, false, 1); /* k 0: C = 0, padding untouched */
    ck_assert_int_eq(run(PARDO_GEMM_OWN, 1, &p.g, &st), PARDO_OK);
    prod_check(&p, "k 0");
    prod_free(&p);
    p = prod_make(PARDO_F32, 3, 4, 0, false, false, 0, true, 1); /* k 0, accumulate: C unchanged */
    ck_assert_int_eq(run(PARDO_GEMM_OWN, 1, &p.g, &st), PARDO_OK);
    prod_check(&p, "k 0 acc");
    prod_free(&p);
    p = prod_make(PARDO_F64, 0, 5, 3, true, true, 0, false, 1);
    ck_assert_int_eq(run(PARDO_GEMM_OWN, 2, &p.g, &st), PARDO_OK);
    prod_free(&p);
}
END_TEST

START_TEST(matmul_op_at_two_threads) {
    /* the op itself with a kernel ctx of 2 threads: batched, broadcast, transposed, and its gradient */
    pool_size(2);
    test_rng r = {7};
    int64_t sa[3] = {3, 150, 90}, sb[2] = {150, 120}; /* A^T B per batch: [3, 90, 120] */
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F32, 3, sa, -1, 1),
                           test_tensor_random(&r, PARDO_F32, 2, sb, -1, 1)};
    pardo_op op;
    memset(&op, 0, sizeof op);
    op.type = "matmul";
    op.def = pardo_op_lookup("matmul");
    pardo_value *attrs = NULL;
    pardo_status st;
    ck_assert_int_eq(pardo_value_parse_json("{\"transpose_a\": true}", &attrs, &st), PARDO_OK);
    op.attrs = attrs;
    pardo_tensor *y1 = NULL, *y2 = NULL;
    pardo_kernel_ctx c1 = {.op = &op, .n_in = 2, .in = in, .n_out = 1, .out = &y1, .st = &st, .nthreads = 1};
    pardo_kernel_ctx c2 = {.op = &op, .n_in = 2, .in = in, .n_out = 1, .out = &y2, .st = &st, .nthreads = 2};
    ck_assert_msg(op.def->cpu(&c1) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(op.def->cpu(&c2) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y1->numel, 3 * 90 * 120);
    ck_assert(memcmp(pardo_tensor_data(y1), pardo_tensor_data(y2), y1->nbytes) == 0);
    pardo_tensor *y3 = NULL;
    pardo_tensor *rin[2] = {in[0], in[1]};
    ck_assert_int_eq(test_run_op("matmul", "{\"transpose_a\": true}", 2, rin, 1, &y3, &st), PARDO_OK);
    test_assert_close(y2, y3, 0, 0);
    pardo_tensor_release(y1);
    pardo_tensor_release(y2);
    pardo_tensor_release(y3);
    pardo_value_free(attrs);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

START_TEST(errors) {
    pardo_status st;
    float a[4] = {0}, b[4] = {0}, c[4] = {0};
    pardo_gemm g = {.dtype = PARDO_I32, .m = 2, .n = 2, .k = 2, .a = a, .lda = 2, .b = b, .ldb = 2, .c = c, .ldc = 2};
    ck_assert_int_eq(run(PARDO_GEMM_OWN, 1, &g, &st), PARDO_EINVAL);
    ck_assert_ptr_nonnull(strstr(st.msg, "int32"));
    g.dtype = PARDO_F32;
    g.lda = 1; /* narrower than a row */
    ck_assert_int_eq(run(PARDO_GEMM_OWN, 1, &g, &st), PARDO_EINVAL);
    g.lda = 2;
    g.m = -1;
    ck_assert_int_eq(run(PARDO_GEMM_OWN, 1, &g, &st), PARDO_EINVAL);
    g.m = 2;
    ck_assert_int_eq(run(PARDO_GEMM_BLAS, 1, &g, &st), pardo_gemm_blas_compiled() ? PARDO_OK : PARDO_ENOTSUP);
    ck_assert_ptr_nonnull(pardo_gemm_describe(PARDO_F32, PARDO_GEMM_AUTO));
    ck_assert_ptr_nonnull(strstr(pardo_gemm_describe(PARDO_F64, PARDO_GEMM_OWN), "own"));
}
END_TEST

Suite *make_gemm_suite(void) {
    Suite *s = suite_create("gemm");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, own_against_naive_float32);
    tcase_add_test(core, own_against_naive_float64);
    tcase_add_test(core, every_instruction_set);
    tcase_add_test(core, blas_against_naive);
    tcase_add_test(core, large_products_and_k_blocks);
    tcase_add_test(core, two_threads_give_the_same_bits);
    tcase_add_test(core, column_panels_split_over_threads);
    tcase_add_test(core, short_row_panels);
    tcase_add_test(core, empty_sizes);
    tcase_add_test(core, few_rows_read_b_in_place);
    tcase_add_test(core, few_rows_against_transposed_b);
    tcase_add_test(core, few_columns_from_transposed_a);
    tcase_add_test(core, part_rows_against_transposed_weight);
    tcase_add_test(core, part_product_helped_by_an_idle_thread);
    tcase_add_test(core, narrow_products);
    tcase_add_test(core, rows_do_not_depend_on_the_row_count);
    tcase_add_test(core, quarter_width_panels);
    tcase_add_test(core, epilogue_matches_add_relu_and_relu_grad);
    tcase_add_test(core, gelu_epilogue_matches_add_and_gelu_ops);
    tcase_add_test(core, kept_b_is_read_only_while_current);
    tcase_add_test(core, matmul_op_at_two_threads);
    suite_add_tcase(s, core);
    TCase *err = tcase_create("Errors");
    tcase_add_test(err, errors);
    suite_add_tcase(s, err);
    return s;
}
