/* bench_omp.c - W4's peer in `make bench` (tools/bench/run): the fork/join of
 * GCC's OpenMP runtime (libgomp) for the same empty work as bench_threads'
 * empty parallel_do, so pardo's figure can be read next to it. A benchmark,
 * not a test: it prints figures and exits 0 unless something fails.
 *
 *   1. `#pragma omp parallel for num_threads(2) schedule(static)` over 2
 *      empty iterations (one per thread, so the worker must take part, as
 *      in each of a parallel_do's 2 parts), back to back: the workers are
 *      awake (libgomp spins GOMP_SPINCOUNT before it blocks); median, p10
 *      and p90 of many calls, in microseconds.
 *   2. the same with the calls 1 ms apart, as bench_threads' "workers asleep"
 *      case (pardo's workers spin 50 us, then block); libgomp's default spin
 *      (OMP_WAIT_POLICY unset: GOMP_SPINCOUNT iterations) can outlast 1 ms,
 *      so its workers may still be spinning then.
 *
 * Built only where $(CC) -fopenmp links (the Makefile's bench section); it
 * needs nothing of pardo but bench_util.h. The last line of its output is
 * one JSON object: {"bench": "omp", "runtime": ..., "threads": 2, "team": the
 * team size the runtime gave, "calls": N, "median_us", "p10_us", "p90_us",
 * "apart_1ms_median_us"}.
 *
 * Usage: bench_omp [CALLS]   (default 20000 samples) */
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

#if defined(__GNUC__) && !defined(__clang__)
#define RUNTIME "libgomp (GCC " __VERSION__ ")"
#else
#define RUNTIME "OpenMP " __VERSION__
#endif

/* Sorts v and prints median, p10 and p90. Returns the median. */
static double report(const char *what, double *v, int n, double *p10, double *p90) {
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    double med = v[n / 2];
    printf("  %-58s median %7.2f us   p10 %7.2f   p90 %7.2f   (%d samples)\n", what, med, v[n / 10], v[n * 9 / 10], n);
    if (p10) *p10 = v[n / 10];
    if (p90) *p90 = v[n * 9 / 10];
    return med;
}

/* One fork/join: 2 empty iterations on a team of 2. The fence keeps the body from being taken for nothing. */
static void fork_join(void) {
#pragma omp parallel for num_threads(2) schedule(static)
    for (int k = 0; k < 2; k++) atomic_signal_fence(memory_order_seq_cst);
}

int main(int argc, char **argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 20000;
    if (calls < 100) calls = 100;
    omp_set_dynamic(0);
    int team = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        team = omp_get_num_threads();
    }
    printf("bench_omp: %s, a team of %d thread%s (asked for 2)\n", RUNTIME, team, team == 1 ? "" : "s");
    double *t = malloc((size_t)calls * sizeof(*t));
    if (!t) {
        fprintf(stderr, "bench_omp: out of memory\n");
        return 1;
    }
    for (int i = 0; i < calls / 10; i++) fork_join(); /* warm up */
    for (int i = 0; i < calls; i++) {
        double t0 = now_us();
        fork_join();
        t[i] = now_us() - t0;
    }
    double p10, p90;
    double med = report("omp parallel for, 2 empty iterations, 2 threads", t, calls, &p10, &p90);
    int cold = calls / 100 < 200 ? calls / 100 : 200;
    if (cold < 20) cold = 20;
    for (int i = 0; i < cold; i++) {
        struct timespec gap = {0, 1000000}; /* 1 ms, as bench_threads waits for pardo's workers to block */
        nanosleep(&gap, NULL);
        double t0 = now_us();
        fork_join();
        t[i] = now_us() - t0;
    }
    double apart = report("the same, calls 1 ms apart", t, cold, NULL, NULL);
    printf("{\"bench\": \"omp\", \"runtime\": \"%s\", \"threads\": 2, \"team\": %d, \"calls\": %d, \"median_us\": %.3f, "
           "\"p10_us\": %.3f, \"p90_us\": %.3f, \"apart_1ms_median_us\": %.3f}\n",
           RUNTIME, team, calls, med, p10, p90, apart);
    free(t);
    return 0;
}
