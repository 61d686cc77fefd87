/* bench_util.h - what the bench's C drivers (bench_pardo, bench_gemm,
 * bench_threads, bench_engine) share: a monotonic clock in microseconds
 * and a qsort comparison of doubles, for their medians. */
#ifndef PARDO_BENCH_UTIL_H
#define PARDO_BENCH_UTIL_H

#include <time.h>

/* Monotonic time in microseconds. */
static inline double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* qsort's comparison for doubles, ascending. */
static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
