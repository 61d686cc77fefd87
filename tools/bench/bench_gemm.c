/* bench_gemm.c - workload W5 of `make bench` (tools/bench/run): GFLOP/s of
 * pardo's matrix product (ops/gemm.h, what matmul and matmul_grad call)
 * against OpenBLAS's sgemm on one thread, at the shapes of the bench's MLP
 * (784-512-512-10, batch 256): each forward product and both gradient
 * products of each layer. Rounds interleave pardo and OpenBLAS; each
 * round's figure is the median of its repetitions, and the result the
 * median over rounds. OpenBLAS is timed where the build found it
 * (BENCH_OPENBLAS), called directly with its thread count set to 1.
 *
 *   bench_gemm [--rounds R] [--reps N] [--threads T] [--cpu 1] [--isa avx512f|avx2|c] [--shapes mlp|block]
 * --shapes block times W11's products instead (the transformer MLP block,
 * 2048 tokens, 256 -> 1024 -> 256), a diagnostic `make bench` does not run.
 * --cpu 1 times the calling thread's CPU time instead of the wall clock: a
 * steadier 1-thread figure on a busy machine (the 2-thread one is then meaningless).
 * --isa makes pardo's own kernel use that instruction set (pardo_gemm_force_isa;
 * OPENBLAS_CORETYPE=Haswell does the same to OpenBLAS on an AVX-512 CPU).
 * One JSON line per shape: {"bench": "gemm", "shape": ..., "m", "n", "k", "ta", "tb",
 *   "pardo_gflops", "openblas_gflops" (or null), "pardo_gflops_2t" (T threads),
 *   "impl": pardo's implementation for the shape: the own kernel, or BLAS where
 *   the pick (ops/gemm_pick.c) measured it faster for the shape's class; PARDO_GEMM=own
 *   times the own kernel alone} */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm.h"
#include "exec/thread_pool.h"
#ifdef BENCH_OPENBLAS
#include <cblas.h>
#include "bench_util.h"
#endif

static clockid_t clock_id = CLOCK_MONOTONIC; // --cpu: the thread's CPU time (1-thread figures under load)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

typedef struct shape {
    const char *name;
    int m, n, k, ta, tb;
} shape;

/* Y = A W with A [256, in], W [in, out]: forward (m 256, n out, k in),
 * dA = dY W^T (m 256, n in, k out, tb), dW = A^T dY (m in, n out, k 256, ta). */
static const shape mlp_shapes[] = {
    {"fc1 Y = X W1       [256,784]x[784,512]", 256, 512, 784, 0, 0},
    {"fc1 dX = dY W1^T   [256,512]x[512,784]", 256, 784, 512, 0, 1},
    {"fc1 dW1 = X^T dY   [784,256]x[256,512]", 784, 512, 256, 1, 0},
    {"fc2 Y = A1 W2      [256,512]x[512,512]", 256, 512, 512, 0, 0},
    {"fc2 dA1 = dY W2^T  [256,512]x[512,512]", 256, 512, 512, 0, 1},
    {"fc2 dW2 = A1^T dY  [512,256]x[256,512]", 512, 512, 256, 1, 0},
    {"fc3 Y = A2 W3      [256,512]x[512,10]", 256, 10, 512, 0, 0},
    {"fc3 dA2 = dY W3^T  [256,10]x[10,512]", 256, 512, 10, 0, 1},
    {"fc3 dW3 = A2^T dY  [512,256]x[256,10]", 512, 10, 256, 1, 0},
};

/* W11's block: H = X W1 [2048, 256] x [256, 1024], Y = H W2 [2048, 1024] x [1024, 256], and their gradients. */
static const shape block_shapes[] = {
    {"fc1 H = X W1       [2048,256]x[256,1024]", 2048, 1024, 256, 0, 0},
    {"fc1 dX = dH W1^T   [2048,1024]x[1024,256]", 2048, 256, 1024, 0, 1},
    {"fc1 dW1 = X^T dH   [256,2048]x[2048,1024]", 256, 1024, 2048, 1, 0},
    {"fc2 Y = H W2       [2048,1024]x[1024,256]", 2048, 256, 1024, 0, 0},
    {"fc2 dH = dY W2^T   [2048,256]x[256,1024]", 2048, 1024, 256, 0, 1},
    {"fc2 dW2 = H^T dY   [1024,2048]x[2048,256]", 1024, 256, 2048, 1, 0},
};
#define MAX_ELEMS (2048 * 1024) /* the largest operand of either set */

static void fill(float *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)(seed >> 40) / (float)(1 << 24) - 0.5f;
    }
}

/* Median seconds of reps runs of one product (after one warm-up run). */
static double time_pardo(pardo_kernel_ctx *ctx, const pardo_gemm *g, int reps, double *buf) {
    if (pardo_gemm_run(ctx, g, PARDO_GEMM_AUTO) != PARDO_OK) {
        fprintf(stderr, "bench_gemm: %s\n", ctx->st->msg);
        exit(1);
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        pardo_gemm_run(ctx, g, PARDO_GEMM_AUTO);
        buf[r] = now_s() - t0;
    }
    return median(buf, reps);
}

#ifdef BENCH_OPENBLAS
static double time_openblas(const pardo_gemm *g, int reps, double *buf) {
    for (int r = -1; r < reps; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, (int)g->m,
                    (int)g->n, (int)g->k, 1.0f, g->a, (int)g->lda, g->b, (int)g->ldb, 0.0f, g->c, (int)g->ldc);
        if (r >= 0) buf[r] = now_s() - t0;
    }
    return median(buf, reps);
}
#endif

int main(int argc, char **argv) {
    int rounds = 5, reps = 20, threads = 2;
    const shape *shapes = mlp_shapes;
    int ns = sizeof mlp_shapes / sizeof mlp_shapes[0];
    const char *isa = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--cpu") == 0)
            clock_id = atoi(argv[i + 1]) ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
        else if (strcmp(argv[i], "--isa") == 0)
            isa = argv[i + 1];
        else if (strcmp(argv[i], "--shapes") == 0 && strcmp(argv[i + 1], "mlp") == 0)
            shapes = mlp_shapes, ns = sizeof mlp_shapes / sizeof mlp_shapes[0];
        else if (strcmp(argv[i], "--shapes") == 0 && strcmp(argv[i + 1], "block") == 0)
            shapes = block_shapes, ns = sizeof block_shapes / sizeof block_shapes[0];
        else {
            fprintf(stderr, "usage: bench_gemm [--rounds R] [--reps N] [--threads T] [--cpu 1] [--isa avx512f|avx2|c] "
                            "[--shapes mlp|block]\n");
            return 1;
        }
    }
    if (rounds < 1 || reps < 1 || threads < 1) return 1;
    pardo_status st;
    if (isa && pardo_gemm_force_isa(isa, &st) != PARDO_OK) {
        fprintf(stderr, "bench_gemm: %s\n", st.msg);
        return 1;
    }
    if (pardo_thread_pool_configure(threads, &st) != PARDO_OK) {
        fprintf(stderr, "bench_gemm: %s\n", st.msg);
        return 1;
    }
#ifdef BENCH_OPENBLAS
    openblas_set_num_threads(1);
#endif
    enum { NS_MAX = 16 };
    const int NS = ns;
    double *buf = malloc(sizeof(double) * (size_t)reps);
    double *res = malloc(sizeof(double) * (size_t)rounds * NS * 3);
    const char *impl[NS_MAX]; /* what pardo ran each shape with (the pick's choice for its class, or forced) */
    /* 64-byte aligned, as pardo's tensors are (src/core/synced_mem.c): malloc's large blocks are 16 bytes past a
     * page, which turns off the in-place read of B that a product of few rows takes on a tensor */
    float *a = aligned_alloc(64, sizeof(float) * MAX_ELEMS), *b = aligned_alloc(64, sizeof(float) * MAX_ELEMS),
          *c = aligned_alloc(64, sizeof(float) * MAX_ELEMS);
    if (!buf || !res || !a || !b || !c) return 1;
    fill(a, MAX_ELEMS, 1);
    fill(b, MAX_ELEMS, 2);
    pardo_kernel_ctx one = {.st = &st, .nthreads = 1}, many = {.st = &st, .nthreads = threads};
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < NS; s++) {
            const shape *sh = &shapes[s];
            pardo_gemm g = {.dtype = PARDO_F32,
                            .ta = sh->ta,
                            .tb = sh->tb,
                            .m = sh->m,
                            .n = sh->n,
                            .k = sh->k,
                            .a = a,
                            .lda = sh->ta ? sh->m : sh->k,
                            .b = b,
                            .ldb = sh->tb ? sh->k : sh->n,
                            .c = c,
                            .ldc = sh->n};
            double *o = res + ((size_t)s * rounds + r) * 3;
            o[0] = time_pardo(&one, &g, reps, buf);
#ifdef BENCH_OPENBLAS
            o[1] = time_openblas(&g, reps, buf);
#else
            o[1] = 0;
#endif
            o[2] = time_pardo(&many, &g, reps, buf);
            impl[s] = pardo_gemm_describe(PARDO_F32, pardo_gemm_resolve(&g, PARDO_GEMM_AUTO));
        }
    for (int s = 0; s < NS; s++) {
        const shape *sh = &shapes[s];
        double v[3][64], flop = 2.0 * sh->m * sh->n * sh->k;
        int nr = rounds < 64 ? rounds : 64;
        for (int j = 0; j < 3; j++)
            for (int r = 0; r < nr; r++) v[j][r] = res[((size_t)s * rounds + r) * 3 + j];
        double tp = median(v[0], nr), tb = median(v[1], nr), t2 = median(v[2], nr);
        printf("{\"bench\": \"gemm\", \"shape\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"ta\": %d, \"tb\": %d, "
               "\"pardo_gflops\": %.2f, ",
               sh->name, sh->m, sh->n, sh->k, sh->ta, sh->tb, flop / tp * 1e-9);
        if (tb > 0)
            printf("\"openblas_gflops\": %.2f, ", flop / tb * 1e-9);
        else
            printf("\"openblas_gflops\": null, ");
        printf("\"pardo_gflops_2t\": %.2f, \"threads\": %d, \"impl\": \"%s\"}\n", flop / t2 * 1e-9, threads, impl[s]);
    }
    free(buf);
    free(res);
    free(a);
    free(b);
    free(c);
    pardo_thread_pool_shutdown();
    return 0;
}
