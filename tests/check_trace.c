/* check_trace.c - execution traces (src/trace/trace.c) and what `pardo trace`
 * makes of them (src/trace/trace_read.c, trace_summary.c, trace_svg.c): a trace
 * of graphs/mlp.json transpiled for 2 parts (backward, adam, multi_cpu) run
 * at 2 threads has one event per op executed, parts on two threads, parts
 * inside their parallel_do and a part's ops inside the part, flows that
 * pair up, thread names and the memory counter; the summary's totals are
 * the sums of the events (computed here from the JSON with cJSON); spans of
 * one's own (the loader's API) from another thread; a failing run still
 * gives a valid trace that ends at the failing op with its error; tracing
 * off allocates no buffer; bad trace files are errors naming the file. */
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "io/graph_json.h"
#include "graph_test_util.h"
#include "pass.h"
#include "test_util.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"
#include "trace/trace_report.h"

#define TOL 0.0021 /* us: ts and dur are each rounded to 1 ns */

static void pool_size(int n) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != n) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(n, &st) == PARDO_OK, "%s", st.msg);
}

/* graphs/mlp.json as `pardo transpile --backward loss --optimizer adam --parts N` makes it. */
static pardo_program *mlp_train(int parts) {
    pardo_status st;
    pardo_program *p = NULL;
    ck_assert_msg(pardo_graph_load(test_fixture("../../graphs/mlp.json"), &p, &st) == PARDO_OK, "%s", st.msg);
    pardo_pass_options opt = pardo_pass_defaults();
    ck_assert_msg(pardo_pass_check(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    opt.loss = "loss";
    opt.optimizer = PARDO_OPTIMIZER_ADAM;
    opt.lr = 0.01;
    opt.parts = parts;
    ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "backward: %s", st.msg);
    ck_assert_msg(pardo_pass_optimizer(p, &opt, &st) == PARDO_OK, "optimizer: %s", st.msg);
    ck_assert_msg(pardo_pass_multi_cpu(p, &opt, &st) == PARDO_OK, "multi_cpu: %s", st.msg);
    ck_assert_int_eq(p->n_blocks, 2);
    return p;
}

/* An executor on nthreads fed `rows` random rows and labels; with bad_label
 * the last row's label is 99, out of range (in the last part). */
/* An executor of kind `kind` for p on nthreads, vars initialised. */
static pardo_executor *executor_of_kind(const pardo_program *p, int nthreads, pardo_executor_kind kind) {
    pardo_status st;
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = nthreads, .kind = kind, .device = PARDO_DEVICE_CPU};
    ck_assert_msg(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK, "executor: %s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "init_vars: %s", st.msg);
    return ex;
}

static pardo_executor *mlp_executor_of_kind(const pardo_program *p, int nthreads, int64_t rows, bool bad_label,
                                            pardo_executor_kind kind) {
    pardo_status st;
    pardo_executor *ex = executor_of_kind(p, nthreads, kind);
    test_rng r = {42};
    int64_t xs[2] = {rows, 64}, ys[1] = {rows};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1);
    pardo_tensor *y = test_tensor_random(&r, PARDO_I64, 1, ys, 0, 10);
    if (bad_label) pardo_tensor_set_f64(y, rows - 1, 99);
    ck_assert_msg(pardo_executor_feed(ex, "x", x, "x", &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_executor_feed(ex, "y", y, "y", &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
    return ex;
}

static pardo_executor *mlp_executor(const pardo_program *p, int nthreads, int64_t rows, bool bad_label) {
    return mlp_executor_of_kind(p, nthreads, rows, bad_label, PARDO_EXEC_AUTO);
}

/* The recorded trace as parsed JSON (stops and resets the trace). */
static cJSON *take_trace(char **text, size_t *len) {
    pardo_status st;
    pardo_trace_stop();
    pardo_trace_info info = {.graph = "graphs/mlp.json", .command = "test", .threads = 2, .steps = -1};
    ck_assert_msg(pardo_trace_json(&info, text, len, &st) == PARDO_OK, "%s", st.msg);
    pardo_trace_reset();
    ck_assert_uint_eq(strlen(*text), *len);
    cJSON *doc = cJSON_Parse(*text);
    ck_assert_msg(doc != NULL, "the trace is not JSON near: %.80s", cJSON_GetErrorPtr());
    return doc;
}

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }
static double num(const cJSON *o, const char *key) {
    const cJSON *v = get(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "no number '%s'", key);
    return v->valuedouble;
}
static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = get(o, key);
    ck_assert_msg(cJSON_IsString(v), "no string '%s'", key);
    return v->valuestring;
}
static bool is(const cJSON *e, const char *ph, const char *cat) {
    const cJSON *p = get(e, "ph"), *c = get(e, "cat");
    return cJSON_IsString(p) && strcmp(p->valuestring, ph) == 0 &&
           (!cat || (cJSON_IsString(c) && strcmp(c->valuestring, cat) == 0));
}
static double end_of(const cJSON *e) { return num(e, "ts") + num(e, "dur"); }

/* ---- Core ---- */

/* Traces `steps` steps of p (2 parts) on a fresh executor of kind `kind` at
 * 2 threads and checks every op event, part, flow, stage and thread name;
 * returns whether the parts ran on two threads. */
static bool check_mlp_trace(const pardo_program *p, int steps, pardo_executor_kind kind) {
    const int parts = 2;
    pardo_status st;
    pardo_executor *ex = mlp_executor_of_kind(p, 2, 2048, false, kind);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    for (int s = 0; s < steps; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    char *text = NULL;
    size_t len = 0;
    cJSON *doc = take_trace(&text, &len);

    ck_assert_str_eq(str(doc, "displayTimeUnit"), "ms");
    ck_assert_ptr_nonnull(get(get(doc, "otherData"), "pardo"));
    ck_assert_int_eq((int)num(get(doc, "otherData"), "threads"), 2);
    const cJSON *events = get(doc, "traceEvents"), *e;
    ck_assert(cJSON_IsArray(events));

    /* one op event per op executed: block 0 once a step, block 1 once a part */
    const int n0 = p->blocks[0].n_ops, n1 = p->blocks[1].n_ops;
    int *seen0 = calloc((size_t)n0, sizeof(int)), *seen1 = calloc((size_t)n1, sizeof(int));
    int ops = 0, n_parts = 0, n_stage = 0, n_counter = 0, n_s = 0, n_f = 0;
    cJSON_ArrayForEach(e, events) {
        if (is(e, "X", "op")) {
            const cJSON *a = get(e, "args");
            int b = (int)num(a, "block"), i = (int)num(a, "index");
            ck_assert(b == 0 || b == 1);
            ck_assert(i >= 0 && i < (b ? n1 : n0));
            (b ? seen1 : seen0)[i]++;
            ops++;
            ck_assert_str_eq(str(a, "op"), p->blocks[b].ops[i].type);
            ck_assert(num(a, "queued_us") >= 0);
            ck_assert(num(e, "dur") >= 0);
            /* bytes written: the sum of the outputs' bytes */
            const cJSON *outs = get(a, "outputs"), *o;
            ck_assert(cJSON_IsArray(outs) && cJSON_IsArray(get(a, "inputs")));
            ck_assert_int_eq(cJSON_GetArraySize(outs), p->blocks[b].ops[i].n_out);
            ck_assert_int_eq(cJSON_GetArraySize(get(a, "inputs")), p->blocks[b].ops[i].n_in);
            double bytes = 0;
            cJSON_ArrayForEach(o, outs) {
                if (cJSON_IsNull(o)) continue;
                ck_assert(cJSON_IsString(get(o, "dtype")) && cJSON_IsArray(get(o, "shape")));
                bytes += num(o, "bytes");
            }
            ck_assert_double_eq(num(a, "bytes_written"), bytes);
            ck_assert_ptr_null(get(a, "error"));
        }
        n_parts += is(e, "X", "part");
        n_stage += is(e, "X", "stage");
        n_counter += is(e, "C", NULL);
        n_s += is(e, "s", "flow");
        n_f += is(e, "f", "flow");
    }
    ck_assert_int_eq(ops, steps * (n0 + parts * n1));
    for (int i = 0; i < n0; i++) ck_assert_msg(seen0[i] == steps, "block 0 op %d: %d events", i, seen0[i]);
    for (int i = 0; i < n1; i++) ck_assert_msg(seen1[i] == steps * parts, "block 1 op %d: %d events", i, seen1[i]);
    ck_assert_int_eq(n_parts, steps * parts);
    ck_assert_int_eq(n_s, steps * parts);
    ck_assert_int_eq(n_f, steps * parts);
    /* merges and updates run as chains from the second step (the dataflow executor binds every name first:
     * from the first) */
    ck_assert_int_eq(n_stage, kind == PARDO_EXEC_DATAFLOW ? steps : steps - 1);
    ck_assert_int_gt(n_counter, 0);

    /* parts on two threads; each inside its parallel_do, with its flow; the
     * part's ops inside the part, on its thread */
    double tid0 = -1;
    bool two_threads = false;
    cJSON_ArrayForEach(e, events) {
        if (!is(e, "X", "part")) continue;
        const cJSON *a = get(e, "args");
        if (tid0 < 0) tid0 = num(e, "tid");
        two_threads |= num(e, "tid") != tid0;
        double flow = num(a, "flow");
        const cJSON *pd = NULL, *x, *f = NULL;
        cJSON_ArrayForEach(x, events) {
            if (is(x, "X", "op") && get(get(x, "args"), "flow_first")) {
                double first = num(get(x, "args"), "flow_first"), n = num(get(x, "args"), "flows");
                if (flow >= first && flow < first + n) pd = x;
            }
            if (is(x, "f", "flow") && num(x, "id") == flow) f = x;
        }
        ck_assert_msg(pd != NULL, "part %g: no parallel_do started its flow", num(a, "part"));
        ck_assert_str_eq(str(get(pd, "args"), "op"), "parallel_do");
        ck_assert_int_eq((int)num(a, "op_block"), (int)num(get(pd, "args"), "block"));
        ck_assert_int_eq((int)num(a, "op_index"), (int)num(get(pd, "args"), "index"));
        ck_assert_int_eq((int)num(a, "parts"), parts);
        ck_assert_int_eq((int)num(a, "rows"), 2048 / parts);
        ck_assert_msg(num(e, "ts") >= num(pd, "ts") - TOL && end_of(e) <= end_of(pd) + TOL,
                      "part [%f, %f] outside its parallel_do [%f, %f]", num(e, "ts"), end_of(e), num(pd, "ts"),
                      end_of(pd));
        ck_assert_msg(f != NULL && num(f, "tid") == num(e, "tid") && fabs(num(f, "ts") - num(e, "ts")) < TOL,
                      "part's flow end");
        ck_assert_str_eq(str(f, "bp"), "e");
        int inside = 0;
        cJSON_ArrayForEach(x, events) {
            if (!is(x, "X", "op") || num(get(x, "args"), "block") != 1 || num(x, "tid") != num(e, "tid")) continue;
            if (num(x, "ts") >= num(e, "ts") - TOL && end_of(x) <= end_of(e) + TOL) inside++;
        }
        ck_assert_int_eq(inside, n1);
    }
    /* every block 1 op lies inside a part on its thread */
    cJSON_ArrayForEach(e, events) {
        if (!is(e, "X", "op") || num(get(e, "args"), "block") != 1) continue;
        const cJSON *x;
        bool in = false;
        cJSON_ArrayForEach(x, events) in |= is(x, "X", "part") && num(x, "tid") == num(e, "tid") &&
                                            num(e, "ts") >= num(x, "ts") - TOL && end_of(e) <= end_of(x) + TOL;
        ck_assert_msg(in, "op %s of block 1 is in no part", str(e, "name"));
    }
    /* thread names: main and pool-1, one per thread with events */
    bool main_named = false, pool_named = false;
    cJSON_ArrayForEach(e, events) {
        if (!is(e, "M", NULL) || strcmp(str(e, "name"), "thread_name") != 0) continue;
        main_named |= strcmp(str(get(e, "args"), "name"), "main") == 0;
        pool_named |= strcmp(str(get(e, "args"), "name"), "pool-1") == 0;
    }
    ck_assert(main_named);
    ck_assert(pool_named || !two_threads);
    free(seen0);
    free(seen1);
    cJSON_Delete(doc);
    free(text);
    pardo_executor_free(ex);
    return two_threads;
}

START_TEST(mlp_trace_has_every_op_parts_on_two_threads_and_consistent_nesting) {
    pool_size(2);
    pardo_program *p = mlp_train(2);
    /* The caller claims part 0 and the woken worker part 1, unless the OS runs the worker only after the
     * caller's first part is done: then the caller claims both. A loaded machine (CI's two CPUs) can do that
     * on every step of a trace, so a trace on one thread is checked like any other and the test traces
     * again, up to 20 times; parts that never reach the pool's worker still fail it. */
    for (int k = 0; k < 2; k++) {
        pardo_executor_kind kind = k == 0 ? PARDO_EXEC_SEQUENTIAL : PARDO_EXEC_DATAFLOW;
        bool two_threads = false;
        for (int attempt = 0; attempt < 20 && !two_threads; attempt++) two_threads = check_mlp_trace(p, 4, kind);
        ck_assert_msg(two_threads, "every part of 20 traces ran on one thread (%s)", k ? "dataflow" : "sequential");
    }
    pardo_program_free(p);
}
END_TEST

/* Two towers of 6 matmuls that share only their input: with the dataflow
 * executor on 2 threads, block 0's op events overlap on two threads, and
 * every op's queued_us (ready to start) is a time of at least 0. */
static const char towers_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 64], \"role\": \"feed\"},"
    "\"w\": {\"dtype\": \"float32\", \"shape\": [64, 64], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -0.2, \"high\": 0.2, \"seed\": 3}}},"
    "\"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"a1\"]}, {\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"b1\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a1\", \"w\"], \"out\": [\"a2\"]}, {\"op\": \"matmul\", \"in\": [\"b1\", \"w\"], \"out\": [\"b2\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a2\", \"w\"], \"out\": [\"a3\"]}, {\"op\": \"matmul\", \"in\": [\"b2\", \"w\"], \"out\": [\"b3\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a3\", \"w\"], \"out\": [\"a4\"]}, {\"op\": \"matmul\", \"in\": [\"b3\", \"w\"], \"out\": [\"b4\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a4\", \"w\"], \"out\": [\"a5\"]}, {\"op\": \"matmul\", \"in\": [\"b4\", \"w\"], \"out\": [\"b5\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a5\", \"w\"], \"out\": [\"a6\"]}, {\"op\": \"matmul\", \"in\": [\"b5\", \"w\"], \"out\": [\"b6\"]},"
    "{\"op\": \"add\", \"in\": [\"a6\", \"b6\"], \"out\": [\"y\"]}"
    "]}]}";

/* Traces 10 steps; true when two of block 0's op events on different threads overlap in time. */
static bool towers_overlap_once(const pardo_program *p) {
    pardo_status st;
    pardo_executor *ex = executor_of_kind(p, 2, PARDO_EXEC_DATAFLOW);
    test_rng r = {9};
    int64_t xs[2] = {256, 64};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1);
    ck_assert_msg(pardo_executor_feed(ex, "x", x, "x", &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor_release(x);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    for (int s = 0; s < 10; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    char *text = NULL;
    size_t len = 0;
    cJSON *doc = take_trace(&text, &len);
    const cJSON *events = get(doc, "traceEvents"), *e, *f;
    int ops = 0;
    bool overlap = false;
    cJSON_ArrayForEach(e, events) {
        if (!is(e, "X", "op")) continue;
        ops++;
        const cJSON *a = get(e, "args");
        ck_assert_int_eq((int)num(a, "block"), 0);
        ck_assert(num(a, "queued_us") >= 0);
        cJSON_ArrayForEach(f, events) {
            if (f == e || !is(f, "X", "op") || num(f, "tid") == num(e, "tid")) continue;
            if (num(f, "ts") < end_of(e) && num(e, "ts") < end_of(f)) overlap = true;
        }
    }
    ck_assert_int_eq(ops, 10 * p->blocks[0].n_ops);
    cJSON_Delete(doc);
    free(text);
    pardo_executor_free(ex);
    return overlap;
}

START_TEST(dataflow_runs_block_0_ops_on_two_threads_at_once) {
    pool_size(2);
    pardo_program *p = test_program(towers_text, "towers.json");
    bool overlap = false;
    for (int attempt = 0; attempt < 10 && !overlap; attempt++) overlap = towers_overlap_once(p);
    ck_assert_msg(overlap, "in 10 traces of 10 steps, no two ops of the towers ran at once");
    pardo_program_free(p);
}
END_TEST

START_TEST(summary_totals_are_the_sums_of_the_events) {
    pool_size(2);
    pardo_status st;
    pardo_program *p = mlp_train(2);
    pardo_executor *ex = mlp_executor(p, 2, 256, false);
    const int steps = 3;
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    for (int s = 0; s < steps; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    char *text = NULL;
    size_t len = 0;
    cJSON *doc = take_trace(&text, &len);
    pardo_trace_model *m = NULL;
    ck_assert_msg(pardo_trace_model_parse(text, len, "mem.json", &m, &st) == PARDO_OK, "%s", st.msg);
    pardo_trace_stats s;
    ck_assert_int_eq(pardo_trace_stats_compute(m, &s, &st), PARDO_OK);

    /* the wall span and per-type totals, from the JSON */
    const cJSON *e;
    double t0 = INFINITY, t1 = -INFINITY, all_ops = 0;
    long n_x = 0;
    cJSON_ArrayForEach(e, get(doc, "traceEvents")) {
        if (!is(e, "X", NULL)) continue;
        n_x++;
        t0 = fmin(t0, num(e, "ts"));
        t1 = fmax(t1, end_of(e));
        if (is(e, "X", "op")) all_ops += num(e, "dur");
    }
    ck_assert_int_eq(s.n_events, n_x);
    ck_assert_double_eq_tol(s.wall, t1 - t0, 1e-6);
    double sum_types = 0, sum_ops = 0;
    for (int k = 0; k < s.n_types; k++) {
        double total = 0, mx = 0;
        long count = 0;
        cJSON_ArrayForEach(e, get(doc, "traceEvents")) {
            if (!is(e, "X", "op") || strcmp(str(get(e, "args"), "op"), s.types[k].key) != 0) continue;
            total += num(e, "dur");
            mx = fmax(mx, num(e, "dur"));
            count++;
        }
        ck_assert_int_eq(s.types[k].count, count);
        ck_assert_double_eq_tol(s.types[k].total, total, 1e-6);
        ck_assert_double_eq_tol(s.types[k].mean, total / (double)count, 1e-6);
        ck_assert_double_eq_tol(s.types[k].max, mx, 1e-9);
        ck_assert(s.types[k].p50 <= s.types[k].p99 && s.types[k].p99 <= s.types[k].max);
        ck_assert_double_eq_tol(s.types[k].share, total / (t1 - t0), 1e-9);
        if (k) ck_assert(s.types[k].total <= s.types[k - 1].total);
        sum_types += s.types[k].total;
    }
    for (int k = 0; k < s.n_ops; k++) sum_ops += s.ops[k].total;
    ck_assert_double_eq_tol(sum_types, all_ops, 1e-6);
    ck_assert_double_eq_tol(sum_ops, all_ops, 1e-6);
    ck_assert_int_eq(s.n_ops, p->blocks[0].n_ops + p->blocks[1].n_ops);
    /* threads: main (and pool-1 when it took a part), busy within the wall span */
    ck_assert(s.n_threads == 1 || s.n_threads == 2);
    ck_assert_str_eq(s.threads[0].name, "main");
    for (int t = 0; t < s.n_threads; t++) {
        ck_assert(s.threads[t].busy > 0 && s.threads[t].busy <= s.wall + 1e-6);
        ck_assert_double_eq_tol(s.threads[t].busy + s.threads[t].idle, s.wall, 1e-6);
    }
    /* the one parallel_do: a run per step, efficiency from its parts */
    ck_assert_int_eq(s.n_pds, 1);
    ck_assert_int_eq(s.pds[0].runs, steps);
    ck_assert_int_eq(s.pds[0].parts, 2);
    double part_time = 0, pd_wall = 0;
    cJSON_ArrayForEach(e, get(doc, "traceEvents")) {
        if (is(e, "X", "part")) part_time += num(e, "dur");
        if (is(e, "X", "op") && strcmp(str(get(e, "args"), "op"), "parallel_do") == 0) pd_wall += num(e, "dur");
    }
    ck_assert_double_eq_tol(s.pds[0].part_time, part_time, 1e-6);
    ck_assert_double_eq_tol(s.pds[0].wall, pd_wall, 1e-6);
    ck_assert_double_eq_tol(s.pds[0].efficiency, part_time / (2 * pd_wall), 1e-9);
    ck_assert(s.pds[0].efficiency > 0 && s.pds[0].efficiency <= 1.0 + 1e-6);
    ck_assert(s.pds[0].slowest_part == 0 || s.pds[0].slowest_part == 1);

    /* the text, CSV and SVG forms are produced */
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    pardo_trace_stats_print(f, m, &s, 5);
    pardo_trace_stats_csv(f, m, &s, 5);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(out, "per op type"));
    ck_assert_ptr_nonnull(strstr(out, "section,key,metric,value\n"));
    ck_assert_ptr_nonnull(strstr(out, "parallel_do,"));
    free(out);
    ck_assert_int_eq(pardo_trace_svg(m, 0, &out, &n, &st), PARDO_OK);
    ck_assert_ptr_nonnull(strstr(out, "<svg "));
    ck_assert_ptr_nonnull(strstr(out, "</svg>\n"));
    ck_assert_ptr_nonnull(strstr(out, ">main</text>"));
    free(out);

    pardo_trace_stats_clear(&s);
    pardo_trace_model_free(m);
    cJSON_Delete(doc);
    free(text);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

static void *loader_thread(void *arg) {
    (void)arg;
    pardo_trace_set_thread_name("loader");
    for (int i = 0; i < 3; i++) {
        pardo_trace_begin("batch", "loader");
        pardo_trace_arg a[2] = {{.key = "batch", .num = i}, {.key = "file", .str = "x \"quoted\".npy"}};
        pardo_trace_end(a, 2);
    }
    return NULL;
}

START_TEST(spans_of_ones_own_from_another_thread) {
    pardo_status st;
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    int64_t t0 = pardo_trace_now_ns();
    pardo_trace_begin("outer", "user");
    pardo_trace_begin("inner", NULL);
    pardo_trace_end(NULL, 0);
    pardo_trace_end(NULL, 0);
    pardo_trace_end(NULL, 0); /* nothing open: ignored */
    pardo_trace_arg odd[2] = {{.key = "nan", .num = NAN}, {.key = "n", .num = 1.5}};
    pardo_trace_complete("done", "loader", t0, pardo_trace_now_ns(), odd, 2);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, loader_thread, NULL), 0);
    pthread_join(th, NULL);
    char *text = NULL;
    size_t len = 0;
    cJSON *doc = take_trace(&text, &len);
    const cJSON *e;
    double loader_tid = -1, outer_end = 0, inner_end = 0;
    int batches = 0;
    cJSON_ArrayForEach(e, get(doc, "traceEvents")) {
        if (is(e, "M", NULL) && strcmp(str(e, "name"), "thread_name") == 0 &&
            strcmp(str(get(e, "args"), "name"), "loader") == 0)
            loader_tid = num(e, "tid");
    }
    ck_assert(loader_tid > 0);
    cJSON_ArrayForEach(e, get(doc, "traceEvents")) {
        if (is(e, "X", "loader") && strcmp(str(e, "name"), "batch") == 0) {
            ck_assert(num(e, "tid") == loader_tid);
            ck_assert_int_eq((int)num(get(e, "args"), "batch"), batches++);
            ck_assert_str_eq(str(get(e, "args"), "file"), "x \"quoted\".npy");
        }
        if (is(e, "X", "loader") && strcmp(str(e, "name"), "done") == 0) {
            ck_assert_str_eq(str(get(e, "args"), "nan"), "nan"); /* JSON has no NaN: a string */
            ck_assert_double_eq(num(get(e, "args"), "n"), 1.5);
        }
        if (is(e, "X", "user") && strcmp(str(e, "name"), "outer") == 0) outer_end = end_of(e);
        if (is(e, "X", "user") && strcmp(str(e, "name"), "inner") == 0) inner_end = end_of(e);
    }
    ck_assert_int_eq(batches, 3);
    ck_assert(inner_end > 0 && inner_end <= outer_end);
    cJSON_Delete(doc);
    free(text);
}
END_TEST

START_TEST(tracing_off_creates_no_buffer) {
    pool_size(2);
    pardo_status st;
    pardo_program *p = mlp_train(2);
    pardo_executor *ex = mlp_executor(p, 2, 64, false);
    long before = pardo_trace_buffers_created();
    pardo_trace_begin("x", "y"); /* the recording API does nothing while off */
    pardo_trace_end(NULL, 0);
    pardo_trace_complete("x", "y", 0, 1, NULL, 0);
    for (int s = 0; s < 20; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(pardo_trace_buffers_created(), before);
    /* on: a buffer for main and one for each thread that ran a part */
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    for (int s = 0; s < 4; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    pardo_trace_stop();
    long on = pardo_trace_buffers_created();
    ck_assert(on >= before + 1 && on <= before + 2);
    pardo_trace_reset();
    for (int s = 0; s < 4; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(pardo_trace_buffers_created(), on);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(write_is_atomic_and_readable) {
    pardo_status st;
    char dir[256], path[300];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.json", dir);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    int64_t now = pardo_trace_now_ns();
    pardo_trace_complete("a", "loader", now, now + 1000, NULL, 0);
    pardo_trace_stop();
    ck_assert_msg(pardo_trace_write(path, NULL, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(test_dir_count(dir), 1); /* no temporary file left */
    pardo_trace_model *m = NULL;
    ck_assert_msg(pardo_trace_model_load(path, &m, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(m->n_ev, 1);
    ck_assert_str_eq(m->ev[0].name, "a");
    ck_assert_double_eq_tol(m->ev[0].dur, 1.0, 1e-9);
    ck_assert_str_eq(m->threads[0].name, "main");
    pardo_trace_model_free(m);
    /* a folder that does not exist: an error naming the path, nothing written */
    snprintf(path, sizeof path, "%s/no/such/t.json", dir);
    ck_assert_int_eq(pardo_trace_write(path, NULL, &st), PARDO_EIO);
    ck_assert_ptr_nonnull(strstr(st.msg, path));
    pardo_trace_reset();
    test_dir_remove(dir);
}
END_TEST

/* A trace past its memory limit ($PARDO_TRACE_MAX_MB) keeps its first part, cut cleanly: every event kept ends
 * by the cut (give or take an event another thread was storing then), later ones are dropped and counted, the
 * run goes on, and the file says where the cut was. */
START_TEST(full_trace_keeps_its_first_part) {
    pool_size(2);
    pardo_status st;
    pardo_program *p = mlp_train(2);
    pardo_executor *ex = mlp_executor(p, 2, 64, false);
    setenv("PARDO_TRACE_MAX_MB", "1", 1);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    ck_assert_uint_eq(pardo_trace_max_bytes(), 1u << 20);
    int steps = 0;
    while (pardo_trace_full_at_s() < 0 && steps < 100000) {
        ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
        steps++;
    }
    ck_assert_msg(pardo_trace_full_at_s() >= 0, "1 MiB of records held %d steps", steps);
    for (int s = 0; s < 20; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_gt(pardo_trace_dropped(), 0);
    char *text = NULL;
    size_t len = 0;
    cJSON *doc = take_trace(&text, &len);
    const cJSON *other = get(doc, "otherData");
    ck_assert_double_eq(num(other, "max_bytes"), 1 << 20);
    ck_assert_int_gt((long)num(other, "dropped_events"), 0);
    const double cut = num(other, "full_at_us");
    ck_assert(cut > 0);
    const cJSON *e;
    int ops = 0;
    cJSON_ArrayForEach(e, get(doc, "traceEvents")) {
        if (!is(e, "X", "op")) continue;
        ops++;
        ck_assert_msg(end_of(e) <= cut + 1000, "an op ending at %.1f us, after the cut at %.1f", end_of(e), cut);
    }
    ck_assert_int_gt(ops, 100);
    cJSON_Delete(doc);
    free(text);
    /* a small limit and many pool threads: the first chunks made at start take at most half of it, and a
     * trace is not full before its first event */
    pool_size(24);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    ck_assert(pardo_trace_full_at_s() < 0);
    pardo_trace_complete("a", "user", 0, 1, NULL, 0);
    ck_assert(pardo_trace_full_at_s() < 0 && pardo_trace_dropped() == 0);
    pardo_trace_stop();
    pardo_trace_reset();
    pool_size(2);
    /* the next trace starts empty, with the default limit */
    unsetenv("PARDO_TRACE_MAX_MB");
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    ck_assert_uint_eq(pardo_trace_max_bytes(), 16u << 20);
    ck_assert(pardo_trace_full_at_s() < 0 && pardo_trace_dropped() == 0);
    pardo_trace_stop();
    pardo_trace_reset();
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* ---- Errors ---- */

static const char div_graph[] = "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                                "\"a\": {\"dtype\": \"int32\", \"shape\": [2], \"value\": [1, 2]},"
                                "\"b\": {\"dtype\": \"int32\", \"shape\": [2], \"value\": [1, 0]}},"
                                "\"ops\": ["
                                "{\"op\": \"add\", \"in\": [\"a\", \"b\"], \"out\": [\"c\"]},"
                                "{\"op\": \"div\", \"in\": [\"c\", \"b\"], \"out\": [\"d\"], \"name\": \"divide\"},"
                                "{\"op\": \"add\", \"in\": [\"d\", \"b\"], \"out\": [\"e\"]}"
                                "]}]}";

START_TEST(failing_run_ends_the_trace_at_the_failing_op) {
    pardo_status st;
    pardo_program *p = test_program(div_graph, "div.json");
    pardo_executor *ex = test_executor(p, 1);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    ck_assert_int_ne(pardo_executor_run(ex, &st), PARDO_OK);
    char *text = NULL;
    size_t len = 0;
    cJSON *doc = take_trace(&text, &len);
    const cJSON *e, *last = NULL;
    int ops = 0;
    cJSON_ArrayForEach(e, get(doc, "traceEvents")) {
        if (!is(e, "X", "op")) continue;
        ops++;
        if (!last || num(e, "ts") > num(last, "ts")) last = e;
    }
    ck_assert_int_eq(ops, 2);
    ck_assert_str_eq(str(last, "name"), "divide");
    ck_assert_int_eq((int)num(get(last, "args"), "index"), 1);
    ck_assert_ptr_nonnull(strstr(str(get(last, "args"), "error"), "division by zero"));
    ck_assert_ptr_nonnull(strstr(str(get(last, "args"), "error"), "'divide'"));
    ck_assert(cJSON_IsNull(get(get(last, "args"), "outputs")));
    cJSON_Delete(doc);
    free(text);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(failing_part_is_in_the_trace_with_its_error) {
    pool_size(2);
    pardo_status st;
    pardo_program *p = mlp_train(2);
    pardo_executor *ex = mlp_executor(p, 2, 64, true); /* a label out of range in the second part */
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    ck_assert_int_ne(pardo_executor_run(ex, &st), PARDO_OK);
    char *text = NULL;
    size_t len = 0;
    cJSON *doc = take_trace(&text, &len);
    const cJSON *e;
    bool op_error = false, part_error = false, pd_error = false;
    cJSON_ArrayForEach(e, get(doc, "traceEvents")) {
        const cJSON *a = get(e, "args");
        if (!cJSON_IsString(get(a, "error"))) continue;
        if (is(e, "X", "op") && num(a, "block") == 1) {
            op_error = true;
            ck_assert_str_eq(str(a, "op"), "softmax_cross_entropy");
        }
        part_error |= is(e, "X", "part") && num(a, "part") == 1;
        pd_error |= is(e, "X", "op") && strcmp(str(a, "op"), "parallel_do") == 0;
    }
    ck_assert(op_error && part_error && pd_error);
    cJSON_Delete(doc);
    free(text);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(start_twice_is_an_error) {
    pardo_status st;
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_EINVAL);
    pardo_trace_stop();
    pardo_trace_reset();
}
END_TEST

static void expect_bad(const char *text, const char *words) {
    pardo_status st;
    pardo_trace_model *m = NULL;
    ck_assert_int_eq(pardo_trace_model_parse(text, strlen(text), "bad.json", &m, &st), PARDO_EPARSE);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(st.msg, "bad.json") && strstr(st.msg, words), "'%s' lacks '%s'", st.msg, words);
}

START_TEST(bad_memory_limit_is_an_error) {
    pardo_status st;
    const char *bad[] = {"0", "-5", "12abc", "lots", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("PARDO_TRACE_MAX_MB", bad[i], 1);
        ck_assert_int_eq(pardo_trace_start(&st), PARDO_EINVAL);
        ck_assert_msg(strstr(st.msg, "PARDO_TRACE_MAX_MB") && strstr(st.msg, bad[i]), "%s", st.msg);
        ck_assert(!pardo_trace_on());
    }
    unsetenv("PARDO_TRACE_MAX_MB");
}
END_TEST

START_TEST(bad_trace_files_name_the_file_and_what_was_expected) {
    expect_bad("", "empty file");
    expect_bad("not json", "not valid JSON");
    expect_bad("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1", "not valid JSON");
    expect_bad("{\"pardo\": 1, \"blocks\": []}", "without a \"traceEvents\" array");
    expect_bad("42", "expected a Chrome trace");
    expect_bad("{\"traceEvents\": [1]}", "traceEvents[0]");
    expect_bad("{\"traceEvents\": [{\"ts\": 1}]}", "\"ph\"");
    expect_bad("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1, \"tid\": 1}]}", "\"dur\"");
    expect_bad("{\"traceEvents\": [{\"ph\": \"X\", \"dur\": 1, \"tid\": 1}]}", "\"ts\"");
    expect_bad("{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1, \"dur\": -1, \"tid\": 1}]}", "\"dur\" >= 0");
    /* a truncated real trace */
    pardo_status st;
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    pardo_trace_complete("a", "b", 1, 2, NULL, 0);
    char *text = NULL;
    size_t len = 0;
    cJSON_Delete(take_trace(&text, &len));
    pardo_trace_model *m = NULL;
    ck_assert_int_eq(pardo_trace_model_parse(text, len / 2, "half.json", &m, &st), PARDO_EPARSE);
    ck_assert_ptr_nonnull(strstr(st.msg, "half.json"));
    ck_assert_ptr_nonnull(strstr(st.msg, "truncated"));
    free(text);
    /* a missing file */
    ck_assert_int_eq(pardo_trace_model_load("/nonexistent/trace.json", &m, &st), PARDO_EIO);
    ck_assert_ptr_nonnull(strstr(st.msg, "/nonexistent/trace.json"));
    /* another tool's trace, with no pardo fields: read, summarised */
    const char *other = "[{\"ph\": \"X\", \"name\": \"work\", \"ts\": 0, \"dur\": 5, \"tid\": 7, \"pid\": 1}]";
    ck_assert_int_eq(pardo_trace_model_parse(other, strlen(other), "other.json", &m, &st), PARDO_OK);
    pardo_trace_stats s;
    ck_assert_int_eq(pardo_trace_stats_compute(m, &s, &st), PARDO_OK);
    ck_assert_int_eq(s.n_types, 0);
    ck_assert_int_eq(s.n_spans, 1);
    ck_assert_double_eq(s.threads[0].busy, 5);
    pardo_trace_stats_clear(&s);
    pardo_trace_model_free(m);
}
END_TEST

Suite *make_trace_suite(void) {
    Suite *s = suite_create("trace");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 120);
    tcase_add_test(core, mlp_trace_has_every_op_parts_on_two_threads_and_consistent_nesting);
    tcase_add_test(core, dataflow_runs_block_0_ops_on_two_threads_at_once);
    tcase_add_test(core, summary_totals_are_the_sums_of_the_events);
    tcase_add_test(core, spans_of_ones_own_from_another_thread);
    tcase_add_test(core, tracing_off_creates_no_buffer);
    tcase_add_test(core, write_is_atomic_and_readable);
    tcase_add_test(core, full_trace_keeps_its_first_part);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_set_timeout(errors, 60);
    tcase_add_test(errors, failing_run_ends_the_trace_at_the_failing_op);
    tcase_add_test(errors, failing_part_is_in_the_trace_with_its_error);
    tcase_add_test(errors, start_twice_is_an_error);
    tcase_add_test(errors, bad_memory_limit_is_an_error);
    tcase_add_test(errors, bad_trace_files_name_the_file_and_what_was_expected);
    suite_add_tcase(s, errors);
    return s;
}
