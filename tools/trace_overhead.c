/* trace_overhead.c - what recording a trace costs a training step, measured
 * inside one process (no startup, no JSON): runs a graph's block 0 STEPS
 * times with tracing off, then STEPS times with it on, REPS times
 * alternating, and prints the median of the per-rep ratios, and the time the
 * JSON takes to make afterwards. tools/trace_overhead.sh measures the whole
 * `pardo run`, writing included.
 *
 * Build (after `make`), from the repository root:
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Isrc -Iops -Itranspiler tools/trace_overhead.c build/libpardo.a \
 *      $(pkg-config --libs libcjson) -lm -lpthread -o build/trace_overhead
 *   (a CUDA build also needs -L$CUDA_HOME/lib64 -lcudart -lstdc++)
 * Run: build/trace_overhead GRAPH X.npy Y.npy [STEPS] [THREADS] [REPS]
 * With TRACE_OVERHEAD_AA=1 in the environment the second half of each rep
 * runs without a trace too: the noise floor of the machine.
 * GRAPH is a training graph with feeds x and y (pardo transpile of
 * graphs/mlp.json --backward loss --optimizer adam). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "exec/executor.h"
#include "io/graph_json.h"
#include "io/npy.h"
#include "pass.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

static double now_us(void) { return (double)pardo_trace_now_ns() / 1e3; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const pardo_status *st) {
    fprintf(stderr, "trace_overhead: %s: %s\n", what, st->msg);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: trace_overhead GRAPH X.npy Y.npy [STEPS] [THREADS] [REPS]\n");
        return 2;
    }
    int steps = argc > 4 ? atoi(argv[4]) : 500, threads = argc > 5 ? atoi(argv[5]) : 2;
    int reps = argc > 6 ? atoi(argv[6]) : 15;
    if (steps < 1 || threads < 1 || reps < 1 || reps > 1000) return 2;
    pardo_status st;
    pardo_program *p = NULL;
    pardo_executor *ex = NULL;
    pardo_tensor *x = NULL, *y = NULL;
    if (pardo_thread_pool_configure(threads, &st) != PARDO_OK) die("--threads", &st);
    if (pardo_graph_load(argv[1], &p, &st) != PARDO_OK) die(argv[1], &st);
    pardo_pass_options opt = pardo_pass_defaults();
    if (pardo_pass_check(p, &opt, &st) != PARDO_OK) die(argv[1], &st);
    pardo_exec_options eo = {.nthreads = threads, .training = true};
    if (pardo_executor_new(p, &eo, &ex, &st) != PARDO_OK || pardo_executor_init_vars(ex, NULL, NULL, &st) != PARDO_OK)
        die("executor", &st);
    if (pardo_npy_read(argv[2], &x, &st) != PARDO_OK || pardo_executor_feed(ex, "x", x, argv[2], &st) != PARDO_OK)
        die(argv[2], &st);
    if (pardo_npy_read(argv[3], &y, &st) != PARDO_OK || pardo_executor_feed(ex, "y", y, argv[3], &st) != PARDO_OK)
        die(argv[3], &st);
    for (int i = 0; i < 200; i++) /* warm up: first-run allocations, the pool */
        if (pardo_executor_run(ex, &st) != PARDO_OK) die("run", &st);
    double *ratio = calloc((size_t)reps, sizeof(*ratio)), off_sum = 0, on_sum = 0, json_ms = 0;
    size_t json_bytes = 0;
    bool aa = getenv("TRACE_OVERHEAD_AA") != NULL;
    for (int r = 0; r < reps; r++) {
        double t0 = now_us();
        for (int i = 0; i < steps; i++) pardo_executor_run(ex, &st);
        double off = now_us() - t0;
        if (!aa && pardo_trace_start(&st) != PARDO_OK) die("trace", &st);
        t0 = now_us();
        for (int i = 0; i < steps; i++) pardo_executor_run(ex, &st);
        double on = now_us() - t0;
        pardo_trace_stop();
        t0 = now_us();
        char *json = NULL;
        if (pardo_trace_json(NULL, &json, &json_bytes, &st) != PARDO_OK) die("json", &st);
        json_ms += (now_us() - t0) / 1e3;
        free(json);
        pardo_trace_reset();
        ratio[r] = on / off;
        off_sum += off;
        on_sum += on;
    }
    qsort(ratio, (size_t)reps, sizeof(*ratio), cmp_double);
    printf("%d steps x %d reps, %d threads: off %.2f us/step, on %.2f us/step (means); median on/off %+.1f%%\n", steps,
           reps, threads, off_sum / reps / steps, on_sum / reps / steps, (ratio[reps / 2] - 1) * 100);
    printf("making the JSON afterwards: %.1f ms for %.1f MB (%.2f us a step)\n", json_ms / reps,
           (double)json_bytes / 1e6, json_ms / reps * 1e3 / steps);
    free(ratio);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
    pardo_executor_free(ex);
    pardo_program_free(p);
    return 0;
}
