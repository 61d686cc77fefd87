/* bench_engine.c - what the dependency engine (src/engine/engine.h) costs per
 * op: `make bench`'s W9 (tools/bench/run). A benchmark, not a test: it
 * prints figures and exits 0 unless something fails.
 *
 *   chain:  N pushes of an empty op (it returns PARDO_OK and does nothing
 *           else), each writing the same var, so each waits for the one
 *           before it; then pardo_engine_wait_all.
 *   fanout: N pushes of the empty op, each writing a var of its own (made
 *           before the clock starts), so none waits for another; then
 *           pardo_engine_wait_all.
 *
 * A repetition is timed from before its first push to the return of
 * wait_all, and divided by N; one untimed repetition first grows the
 * engine's free lists, and checks with a counting op that every op ran,
 * the chain's in push order. Only the API of engine/engine.h is used; the
 * engine runs its ops on the process's thread pool, whose size comes from
 * $PARDO_NUM_THREADS, else the online CPUs (tools/bench/run sets 2).
 *
 * Usage: [PARDO_NUM_THREADS=T] bench_engine [--case chain|fanout|both] [--ops N] [--reps R]
 * Output: one JSON line per case:
 *   {"bench": "engine", "case": "chain", "ops": N, "reps": R, "threads": "T" or null (unset),
 *    "us_per_op": median over the repetitions, "p10_us_per_op": ..., "p90_us_per_op": ...,
 *    "push_us_per_op": the median of the pushes alone (before wait_all), "median_us": a repetition's median}
 * Exit status 0, or 1 with a message on stderr. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "bench_util.h"

static void die(const char *what, const pardo_status *st) {
    fprintf(stderr, "bench_engine: %s%s%s\n", what, st ? ": " : "", st ? st->msg : "");
    exit(1);
}

/* The timed op. */
static int empty_op(void *arg, pardo_status *st) {
    (void)arg;
    (void)st;
    return PARDO_OK;
}

/* The check: the op pushed i-th records that it ran, and (for the chain) that the one before it had run. */
typedef struct check {
    atomic_long ran;      // ops that ran
    atomic_long in_order; // chain ops that found ran == their index
} check;

typedef struct check_op {
    check *c;
    long index;
} check_op;

static int counting_op(void *arg, pardo_status *st) {
    (void)st;
    check_op *o = arg;
    long before = atomic_fetch_add(&o->c->ran, 1);
    if (before == o->index) atomic_fetch_add(&o->c->in_order, 1);
    return PARDO_OK;
}

/* One repetition of `kind` over n ops; returns its wall time in us and the pushes' alone in *push_us. With
 * ops (not NULL) the counting op runs instead of the empty one. */
static double repetition(pardo_engine *e, bool chain, pardo_var **vars, long n, check_op *ops, double *push_us) {
    pardo_status st;
    pardo_status_clear(&st);
    double t0 = now_us();
    for (long i = 0; i < n; i++) {
        pardo_var *w = chain ? vars[0] : vars[i];
        if (pardo_engine_push(e, ops ? counting_op : empty_op, ops ? (void *)&ops[i] : NULL, NULL, 0, &w, 1,
                              "empty", &st) != PARDO_OK)
            die("push", &st);
    }
    double t1 = now_us();
    if (pardo_engine_wait_all(e, &st) != PARDO_OK) die("wait_all", &st);
    double t2 = now_us();
    if (pardo_engine_pending(e) != 0) die("ops still pending after wait_all", NULL);
    *push_us = t1 - t0;
    return t2 - t0;
}

static void run_case(pardo_engine *e, bool chain, long n, int reps) {
    pardo_status st;
    pardo_status_clear(&st);
    long nvars = chain ? 1 : n;
    pardo_var **vars = calloc((size_t)nvars, sizeof(*vars));
    check_op *ops = calloc((size_t)n, sizeof(*ops));
    double *t = calloc((size_t)reps, sizeof(*t)), *tp = calloc((size_t)reps, sizeof(*tp));
    check c;
    if (!vars || !ops || !t || !tp) die("out of memory", NULL);
    for (long i = 0; i < nvars; i++)
        if (!(vars[i] = pardo_engine_new_var(e, &st))) die("new_var", &st);

    /* untimed: grows the free lists; every op must run, the chain's in push order */
    atomic_init(&c.ran, 0);
    atomic_init(&c.in_order, 0);
    for (long i = 0; i < n; i++) ops[i] = (check_op){&c, i};
    double ignored;
    repetition(e, chain, vars, n, ops, &ignored);
    if (atomic_load(&c.ran) != n) die("not every pushed op ran", NULL);
    if (chain && atomic_load(&c.in_order) != n) die("the chain's ops ran out of push order", NULL);

    for (int r = 0; r < reps; r++) t[r] = repetition(e, chain, vars, n, NULL, &tp[r]) / (double)n;
    for (int r = 0; r < reps; r++) tp[r] /= (double)n;
    qsort(t, (size_t)reps, sizeof(*t), cmp_double);
    qsort(tp, (size_t)reps, sizeof(*tp), cmp_double);
    const char *threads = getenv("PARDO_NUM_THREADS");
    bool digits = threads && *threads && strspn(threads, "0123456789") == strlen(threads);
    printf("{\"bench\": \"engine\", \"case\": \"%s\", \"ops\": %ld, \"reps\": %d, \"threads\": %s%s%s, "
           "\"us_per_op\": %.4f, \"p10_us_per_op\": %.4f, \"p90_us_per_op\": %.4f, \"push_us_per_op\": %.4f, "
           "\"median_us\": %.1f}\n",
           chain ? "chain" : "fanout", n, reps, digits ? "\"" : "", digits ? threads : "null", digits ? "\"" : "",
           t[reps / 2], t[reps / 10], t[reps * 9 / 10], tp[reps / 2], t[reps / 2] * (double)n);
    fflush(stdout);

    for (long i = 0; i < nvars; i++)
        if (pardo_engine_delete_var(e, vars[i], &st) != PARDO_OK) die("delete_var", &st);
    if (pardo_engine_wait_all(e, &st) != PARDO_OK) die("wait_all after delete_var", &st);
    free(vars);
    free(ops);
    free(t);
    free(tp);
}

int main(int argc, char **argv) {
    const char *which = "both";
    long n = 100000, reps = 9;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) die("usage: bench_engine [--case chain|fanout|both] [--ops N] [--reps R]", NULL);
        if (strcmp(argv[i], "--case") == 0) which = argv[++i];
        else if (strcmp(argv[i], "--ops") == 0) n = atol(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0) reps = atol(argv[++i]);
        else die("bad argument", NULL);
    }
    if (n < 1 || reps < 1 || reps > 1000) die("bad numbers", NULL);
    bool chain = strcmp(which, "chain") == 0 || strcmp(which, "both") == 0;
    bool fanout = strcmp(which, "fanout") == 0 || strcmp(which, "both") == 0;
    if (!chain && !fanout) die("--case expects chain, fanout or both", NULL);

    pardo_engine *e = pardo_engine_get();
    if (chain) run_case(e, true, n, (int)reps);
    if (fanout) run_case(e, false, n, (int)reps);
    pardo_engine_shutdown();
    return 0;
}
