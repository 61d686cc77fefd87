/* bench_threads.c - what threads cost and buy (`make bench`; a benchmark,
 * not a test: it prints figures and always exits 0 unless something fails).
 *
 *   1. fork/join of an empty parallel_do (2 parts, a block with no ops) at 2
 *      threads, through the executor: median, p10 and p90 of many steps, in
 *      microseconds, minus the same graph's split alone; at 1 thread for
 *      reference.
 *   2. the pool alone: pardo_thread_pool_for over 2 empty items; a forced
 *      hand-off (each item waits until the other started, so a worker must
 *      take part); and the same with the workers asleep (1 ms apart).
 *   3. the speedup from 1 to 2 threads of a compute-bound parallel_do: 2
 *      parts of a block of matmuls, the same work at both thread counts.
 *
 * The last two lines, "summary: ..." (1 and 3) and "pool: ..." (2's medians
 * with the workers awake), are what tools/bench/run reads for W4; bench_omp
 * times libgomp's fork/join of the same empty work beside it.
 *
 * Usage: bench_threads [CALLS]   (default 20000 fork/join samples) */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/executor.h"
#include "io/graph_json.h"
#include "pass.h"
#include "exec/thread_pool.h"
#include "bench_util.h"

/* Sorts v and prints median, p10 and p90. Returns the median. */
static double report(const char *what, double *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    double med = v[n / 2];
    printf("  %-58s median %7.2f us   p10 %7.2f   p90 %7.2f   (%d samples)\n", what, med, v[n / 10], v[n * 9 / 10], n);
    return med;
}

static void die(const pardo_status *st) {
    fprintf(stderr, "bench_threads: %s\n", st->msg);
    exit(1);
}

static pardo_program *load(const char *text, const char *name) {
    pardo_status st;
    pardo_program *p = NULL;
    pardo_pass_options opt = {0};
    if (pardo_graph_parse(text, strlen(text), name, &p, &st) != PARDO_OK || pardo_pass_check(p, &opt, &st) != PARDO_OK)
        die(&st);
    return p;
}

static pardo_executor *executor(const pardo_program *p, int nthreads) {
    pardo_status st;
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = nthreads, .device = PARDO_DEVICE_CPU};
    if (pardo_executor_new(p, &opt, &ex, &st) != PARDO_OK || pardo_executor_init_vars(ex, NULL, NULL, &st) != PARDO_OK)
        die(&st);
    return ex;
}

/* ---- 1. an empty parallel_do ---- */

/* Block 0 splits a [2, 1] tensor in 2 and runs an empty block on each part
 * (the part passed straight out). The same graph without the parallel_do
 * times the split alone; the difference is the op's fork and join. */
static const char empty_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 1], \"role\": \"feed\"}},"
    "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
    "{\"op\": \"parallel_do\", \"in\": [\"xs\"], \"out\": [\"ys\"],"
    " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"xp\": \"ys\"}}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": []}]}";

static const char split_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 1], \"role\": \"feed\"}},"
    "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}}]}]}";

/* Median time of one step of the graph in text at nthreads threads. */
static double bench_step(const char *text, const char *what, int nthreads, int calls) {
    pardo_status st;
    pardo_program *p = load(text, "bench.json");
    pardo_executor *ex = executor(p, nthreads);
    int64_t shape[2] = {2, 1};
    pardo_tensor *x = pardo_tensor_new_cpu(PARDO_F32, 2, shape, &st);
    if (!x || pardo_executor_feed(ex, "x", x, "bench", &st) != PARDO_OK) die(&st);
    double *t = malloc((size_t)calls * sizeof(*t));
    for (int i = 0; i < calls / 10; i++) /* warm up */
        if (pardo_executor_run(ex, &st) != PARDO_OK) die(&st);
    for (int i = 0; i < calls; i++) {
        double t0 = now_us();
        if (pardo_executor_run(ex, &st) != PARDO_OK) die(&st);
        t[i] = now_us() - t0;
    }
    char label[128];
    snprintf(label, sizeof label, "%s, %d thread%s", what, nthreads, nthreads > 1 ? "s" : "");
    double med = report(label, t, calls);
    free(t);
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
    return med;
}

/* ---- 2. the pool alone ---- */

static void empty_item(void *arg, int64_t i) {
    (void)arg;
    (void)i;
}

typedef struct handoff {
    atomic_int started;
} handoff;

/* Each of the 2 items waits until both have started: the worker must come. */
static void meet_item(void *arg, int64_t i) {
    handoff *h = arg;
    (void)i;
    atomic_fetch_add(&h->started, 1);
    while (atomic_load(&h->started) < 2) {
    }
}

/* Sets *for_us and *handoff_us to the medians of the first two (the workers awake). */
static void bench_pool(int calls, double *for_us, double *handoff_us) {
    double *t = malloc((size_t)calls * sizeof(*t));
    for (int i = 0; i < calls; i++) {
        double t0 = now_us();
        pardo_thread_pool_for(2, 2, empty_item, NULL);
        t[i] = now_us() - t0;
    }
    *for_us = report("pardo_thread_pool_for, 2 empty items, width 2", t, calls);
    for (int i = 0; i < calls; i++) {
        handoff h = {0};
        double t0 = now_us();
        pardo_thread_pool_for(2, 2, meet_item, &h);
        t[i] = now_us() - t0;
    }
    *handoff_us = report("forced hand-off: both items must run at once (worker awake)", t, calls);
    int cold = calls / 100 < 200 ? calls / 100 : 200;
    if (cold < 20) cold = 20;
    for (int i = 0; i < cold; i++) {
        struct timespec gap = {0, 1000000}; /* past the workers' 50 us spin: they block */
        nanosleep(&gap, NULL);
        handoff h = {0};
        double t0 = now_us();
        pardo_thread_pool_for(2, 2, meet_item, &h);
        t[i] = now_us() - t0;
    }
    report("forced hand-off, workers asleep (calls 1 ms apart)", t, cold);
    free(t);
}

/* ---- 3. compute-bound speedup ---- */

static const char compute_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 256], \"role\": \"feed\"},"
    "\"w1\": {\"dtype\": \"float32\", \"shape\": [256, 256], \"role\": \"param\", \"init\": {\"fill\": \"xavier_uniform\", \"seed\": 1}},"
    "\"w2\": {\"dtype\": \"float32\", \"shape\": [256, 256], \"role\": \"param\", \"init\": {\"fill\": \"xavier_uniform\", \"seed\": 2}}},"
    "\"ops\": ["
    "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
    "{\"op\": \"parallel_do\", \"in\": [\"xs\", \"w1\", \"w2\"], \"out\": [\"ys\"],"
    " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"y\": \"ys\"}}},"
    "{\"op\": \"merge\", \"in\": [\"ys\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"concat\"}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"xp\", \"w1\"], \"out\": [\"h1\"]},"
    "{\"op\": \"tanh\", \"in\": [\"h1\"], \"out\": [\"a1\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a1\", \"w2\"], \"out\": [\"h2\"]},"
    "{\"op\": \"tanh\", \"in\": [\"h2\"], \"out\": [\"a2\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a2\", \"w1\"], \"out\": [\"h3\"]},"
    "{\"op\": \"tanh\", \"in\": [\"h3\"], \"out\": [\"a3\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a3\", \"w2\"], \"out\": [\"y\"]}]}]}";

static double bench_compute(int nthreads, int runs) {
    pardo_status st;
    pardo_program *p = load(compute_text, "compute.json");
    pardo_executor *ex = executor(p, nthreads);
    int64_t shape[2] = {512, 256};
    pardo_tensor *x = pardo_tensor_new_cpu(PARDO_F32, 2, shape, &st);
    if (!x) die(&st);
    float *xd = pardo_tensor_data(x);
    for (int64_t i = 0; i < x->numel; i++) xd[i] = (float)((i * 7919) % 2000) / 1000.0f - 1.0f;
    if (pardo_executor_feed(ex, "x", x, "bench", &st) != PARDO_OK) die(&st);
    double *t = malloc((size_t)runs * sizeof(*t));
    if (pardo_executor_run(ex, &st) != PARDO_OK) die(&st); /* warm up */
    for (int i = 0; i < runs; i++) {
        double t0 = now_us();
        if (pardo_executor_run(ex, &st) != PARDO_OK) die(&st);
        t[i] = (now_us() - t0);
    }
    char what[128];
    snprintf(what, sizeof what, "2 parts x 4 matmuls [256,256]x[256,256], %d thread%s", nthreads,
             nthreads > 1 ? "s" : "");
    double med = report(what, t, runs);
    free(t);
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
    return med;
}

int main(int argc, char **argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 20000;
    if (calls < 100) calls = 100;
    pardo_status st;
    if (pardo_thread_pool_configure(2, &st) != PARDO_OK) die(&st);
    printf("bench_threads: pool of 2 threads (the caller and 1 worker); %ld online CPUs\n",
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("fork/join:\n");
    double split1 = bench_step(split_text, "split alone (2 parts)", 1, calls);
    double pd1 = bench_step(empty_text, "split + empty parallel_do (2 parts)", 1, calls);
    double split2 = bench_step(split_text, "split alone (2 parts)", 2, calls);
    double pd2 = bench_step(empty_text, "split + empty parallel_do (2 parts)", 2, calls);
    double fj = pd2 - split2;
    printf("  => empty parallel_do alone: %.2f us at 1 thread, %.2f us at 2 threads\n", pd1 - split1, fj);
    double for_us, handoff_us;
    bench_pool(calls, &for_us, &handoff_us);
    printf("compute-bound parallel_do:\n");
    double t1 = bench_compute(1, 30), t2 = bench_compute(2, 30);
    printf("summary: empty parallel_do fork/join at 2 threads %.2f us (median); 1 -> 2 threads speedup %.2fx\n", fj,
           t1 / t2);
    printf("pool: pardo_thread_pool_for 2 empty items %.2f us; forced hand-off %.2f us (medians, 2 threads)\n", for_us,
           handoff_us);
    pardo_thread_pool_shutdown();
    return 0;
}
