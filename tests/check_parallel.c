/* check_parallel.c - split, merge and parallel_do (SPEC section 2): a
 * hand-written split / parallel_do / merge graph against the single-thread
 * graph for every merge mode at 1, 2 and 4 threads, uneven splits included;
 * splits on the pool and where parts may be written; inference of
 * tensor_arrays and sub-block vars; reuse in the steady state; 100,000
 * parallel_do calls; merge's arithmetic against a naive loop; all_reduce
 * joining the parts.
 * check_parallel_errors.c has the errors. */
#include <check.h>
#include <float.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "merge_combine.h"
#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#endif
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#endif

/* ---- the same numbers as the single-thread graph ---- */

#define W_VAR                                                                                                          \
    "\"w\": {\"dtype\": \"float64\", \"shape\": [3, 2], \"role\": \"param\", "                                         \
    "\"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}}"

static const char single_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 3], \"role\": \"feed\"}, " W_VAR "},"
    "\"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"y\"]},"
    "{\"op\": \"reduce_sum\", \"in\": [\"y\"], \"out\": [\"s\"], \"attrs\": {\"axes\": [0], \"keepdims\": false}},"
    "{\"op\": \"reduce_mean\", \"in\": [\"y\"], \"out\": [\"m\"], \"attrs\": {\"axes\": [0], \"keepdims\": false}}"
    "]}]}";

/* The same computation over parts; %d is split's attr parts. */
static const char parallel_fmt[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 3], \"role\": \"feed\"}, " W_VAR ","
    "\"xs\": {\"dtype\": \"float64\", \"shape\": [-1, 3], \"kind\": \"tensor_array\"}},"
    "\"ops\": ["
    "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": %d}},"
    "{\"op\": \"parallel_do\", \"name\": \"pd\", \"in\": [\"xs\", \"w\"], \"out\": [\"ys\", \"ss\", \"ms\"],"
    " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"y\": \"ys\", \"s\": \"ss\", \"m\": \"ms\"}}},"
    "{\"op\": \"merge\", \"in\": [\"ys\"], \"out\": [\"y_cat\"], \"attrs\": {\"mode\": \"concat\"}},"
    "{\"op\": \"merge\", \"in\": [\"ms\", \"xs\"], \"out\": [\"m_mean\"], \"attrs\": {\"mode\": \"mean\", \"weight_by\": \"xs\"}},"
    "{\"op\": \"merge\", \"in\": [\"ms\"], \"out\": [\"m_plain\"], \"attrs\": {\"mode\": \"mean\"}},"
    "{\"op\": \"merge\", \"in\": [\"ss\"], \"out\": [\"s_sum\"], \"attrs\": {\"mode\": \"sum\"}},"
    "{\"op\": \"merge\", \"in\": [\"ss\"], \"out\": [\"s_max\"], \"attrs\": {\"mode\": \"max\"}},"
    "{\"op\": \"merge\", \"in\": [\"ss\"], \"out\": [\"s_min\"], \"attrs\": {\"mode\": \"min\"}}"
    "]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"xp\", \"w\"], \"out\": [\"y\"]},"
    "{\"op\": \"reduce_sum\", \"in\": [\"y\"], \"out\": [\"s\"], \"attrs\": {\"axes\": [0], \"keepdims\": false}},"
    "{\"op\": \"reduce_mean\", \"in\": [\"y\"], \"out\": [\"m\"], \"attrs\": {\"axes\": [0], \"keepdims\": false}}"
    "]}]}";

static pardo_program *parallel_program(int parts) {
    char text[sizeof parallel_fmt + 16];
    snprintf(text, sizeof text, parallel_fmt, parts);
    return test_program(text, "par.json");
}

static void assert_close_or_nan(const pardo_tensor *a, const pardo_tensor *b, double tol, const char *what) {
    ck_assert_int_eq(a->numel, b->numel);
    for (int64_t i = 0; i < a->numel; i++) {
        double x = pardo_tensor_get_f64(a, i), y = pardo_tensor_get_f64(b, i);
        ck_assert_msg((isnan(x) && isnan(y)) || fabs(x - y) <= tol, "%s[%lld]: %.17g vs %.17g", what, (long long)i, x,
                      y);
    }
}

/* A split of at least 64 KiB copies its parts on the pool (here 2
 * threads, parts fewer and more than threads, along either axis): every
 * element lands where a naive loop puts it, and a second run into the
 * reused parts does the same. */
START_TEST(big_split_copies_on_the_pool) {
    test_pool_size(2);
    enum { ROWS = 301, COLS = 70 }; /* 84 KB of int32 */
    static const int cases[][2] = {{0, 2}, {0, 5}, {1, 3}, {-1, 7}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int axis = cases[c][0], n = cases[c][1], ax = axis < 0 ? 2 + axis : axis;
        char text[512];
        snprintf(text, sizeof text,
                 "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                 "\"x\": {\"dtype\": \"int32\", \"shape\": [-1, -1], \"role\": \"feed\"}},"
                 "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xa\"], "
                 "\"attrs\": {\"parts\": %d, \"axis\": %d}}]}]}",
                 n, axis);
        pardo_program *p = test_program(text, "big_split.json");
        pardo_executor *ex = test_executor(p, 2);
        int64_t shape[2] = {ROWS, COLS};
        static double v[ROWS * COLS];
        for (int run_ = 0; run_ < 2; run_++) {
            for (int i = 0; i < ROWS * COLS; i++) v[i] = i + run_;
            pardo_tensor *x = test_tensor_from(PARDO_I32, 2, shape, v);
            test_feed(ex, "x", x);
            test_run(ex);
            const pardo_tensor *a = test_fetch(ex, "xa");
            ck_assert_int_eq(a->n_parts, n);
            const int64_t len = shape[ax];
            int64_t start = 0;
            for (int q = 0; q < n; q++) {
                const int64_t part_len = len / n + (q < len % n); /* larger parts first */
                const pardo_tensor *t = a->parts[q];
                if (ax == 0) { /* rows: views of this run's x, nothing copied */
                    ck_assert_ptr_eq(t->base, x);
                    ck_assert_ptr_eq(pardo_tensor_data(t), (char *)pardo_tensor_data(x) + start * COLS * 4);
                } else { /* columns: copies */
                    ck_assert_ptr_null(t->base);
                }
                ck_assert_int_eq(t->shape[ax], part_len);
                ck_assert_int_eq(t->shape[1 - ax], shape[1 - ax]);
                for (int64_t i = 0; i < t->shape[0]; i++)
                    for (int64_t j = 0; j < t->shape[1]; j++) {
                        const int64_t row = ax == 0 ? start + i : i, col = ax == 1 ? start + j : j;
                        ck_assert_int_eq((int64_t)pardo_tensor_get_f64(t, i * t->shape[1] + j),
                                         row * COLS + col + run_);
                    }
                start += part_len;
            }
            pardo_tensor_release(x); /* the executor and the views hold it until the next run's split */
        }
        pardo_executor_free(ex);
        pardo_program_free(p);
    }
}
END_TEST

/* Where an op may write a part or the input under it, parts are copies:
 * a part block applying relu to its slice in place, and block 0 applying
 * it to x after the split. x stays as fed, the parts as x was. */
START_TEST(split_copies_where_parts_may_be_written) {
    test_pool_size(2);
    static const char *const texts[] = {
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 3], \"role\": \"feed\"},"
        "\"xs\": {\"dtype\": \"float64\", \"shape\": [-1, 3], \"kind\": \"tensor_array\"}},"
        "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
        "{\"op\": \"parallel_do\", \"in\": [\"xs\"], \"out\": [\"ys\"], \"attrs\": {\"block\": 1, "
        "\"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"xp\": \"ys\"}}},"
        "{\"op\": \"merge\", \"in\": [\"ys\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"concat\"}}]},"
        "{\"parent\": 0, \"vars\": {}, \"ops\": [{\"op\": \"relu\", \"in\": [\"xp\"], \"out\": [\"xp\"]}]}]}",
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 3], \"role\": \"feed\"},"
        "\"xs\": {\"dtype\": \"float64\", \"shape\": [-1, 3], \"kind\": \"tensor_array\"}},"
        "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
        "{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"x\"]},"
        "{\"op\": \"parallel_do\", \"in\": [\"xs\"], \"out\": [\"ys\"], \"attrs\": {\"block\": 1, "
        "\"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"h\": \"ys\"}}},"
        "{\"op\": \"merge\", \"in\": [\"ys\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"concat\"}}]},"
        "{\"parent\": 0, \"vars\": {}, \"ops\": [{\"op\": \"scale\", \"in\": [\"xp\"], \"out\": [\"h\"], "
        "\"attrs\": {\"scale\": 1}}]}]}",
    };
    for (int c = 0; c < 2; c++) {
        pardo_program *p = test_program(texts[c], "written.json");
        pardo_executor *ex = test_executor(p, 2);
        int64_t shape[2] = {5, 3};
        double v[15];
        for (int i = 0; i < 15; i++) v[i] = i % 2 ? -i : i;
        pardo_tensor *x = test_tensor_from(PARDO_F64, 2, shape, v);
        test_feed(ex, "x", x);
        test_run(ex);
        const pardo_tensor *a = test_fetch(ex, "xs"), *y = test_fetch(ex, "y");
        for (int q = 0; q < 2; q++) ck_assert_ptr_null(a->parts[q]->base);
        for (int i = 0; i < 15; i++) {
            if (c == 0) ck_assert_double_eq(pardo_tensor_get_f64(x, i), v[i]); /* the part's relu left x alone */
            ck_assert_double_eq(pardo_tensor_get_f64(y, i), c == 0 && v[i] < 0 ? 0 : v[i]);
        }
        pardo_tensor_release(x);
        pardo_executor_free(ex);
        pardo_program_free(p);
    }
}
END_TEST

/* Runs x through the single-thread graph and the parallel one (split into
 * `parts`, 0: the thread count) at `threads` threads and compares every
 * merge mode with the single-thread result or a naive loop. */
static void compare_modes(int rows, int parts, int threads, pardo_executor **keep) {
    test_rng r = {11 + (uint64_t)rows};
    int64_t xs[2] = {rows, 3};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, xs, -2, 2);
    pardo_program *ps = test_program(single_text, "single.json"), *pp = parallel_program(parts);
    pardo_executor *es = test_executor(ps, 1), *ep = test_executor(pp, threads);
    test_feed(es, "x", x);
    test_feed(ep, "x", x);
    test_run(es);
    test_run(ep);
    char what[128];
    snprintf(what, sizeof what, "%d rows, parts %d, %d threads", rows, parts, threads);
    const pardo_tensor *y = test_fetch(es, "y");
    test_assert_close(test_fetch(ep, "y_cat"), y, 0, 1e-12);               /* concat */
    test_assert_close(test_fetch(ep, "m_mean"), test_fetch(es, "m"), 0, 1e-12); /* mean weighted by rows */
    test_assert_close(test_fetch(ep, "s_sum"), test_fetch(es, "s"), 0, 1e-12);  /* sum */
    /* max, min and the plain mean of the per-part sums and means: a naive loop */
    int n = parts ? parts : threads;
    int64_t start = 0;
    double mx[2] = {-INFINITY, -INFINITY}, mn[2] = {INFINITY, INFINITY}, mean[2] = {0, 0};
    for (int p = 0; p < n; p++) {
        int64_t len = rows / n + (p < rows % n); /* larger parts first */
        for (int c = 0; c < 2; c++) {
            double sum = 0;
            for (int64_t i = start; i < start + len; i++) sum += pardo_tensor_get_f64(y, i * 2 + c);
            mx[c] = fmax(mx[c], sum);
            mn[c] = fmin(mn[c], sum);
            mean[c] += (len ? sum / (double)len : (double)NAN) / n;
        }
        start += len;
    }
    int64_t two = 2;
    pardo_tensor *want_max = test_tensor_from(PARDO_F64, 1, &two, mx),
                 *want_min = test_tensor_from(PARDO_F64, 1, &two, mn);
    pardo_tensor *want_mean = test_tensor_from(PARDO_F64, 1, &two, mean);
    assert_close_or_nan(test_fetch(ep, "s_max"), want_max, 1e-12, what);
    assert_close_or_nan(test_fetch(ep, "s_min"), want_min, 1e-12, what);
    assert_close_or_nan(test_fetch(ep, "m_plain"), want_mean, 1e-12, what);
    ck_assert_int_eq(test_fetch(ep, "ys")->n_parts, n);
    pardo_tensor_release(want_max);
    pardo_tensor_release(want_min);
    pardo_tensor_release(want_mean);
    pardo_tensor_release(x);
    pardo_executor_free(es);
    pardo_program_free(ps);
    if (keep) {
        *keep = ep; /* the caller frees it and its program */
    } else {
        pardo_executor_free(ep);
        pardo_program_free(pp);
    }
}

START_TEST(merge_modes_match_single_thread) {
    test_pool_size(4);
    const int threads[] = {1, 2, 4};
    for (int t = 0; t < 3; t++) {
        compare_modes(8, 0, threads[t], NULL); /* parts = thread count */
        compare_modes(7, 3, threads[t], NULL); /* 7 rows over 3 parts: 3, 2, 2 */
        compare_modes(7, 0, threads[t], NULL);
        compare_modes(2, 3, threads[t], NULL); /* 1, 1, 0: an empty part */
        compare_modes(13, 5, threads[t], NULL);
    }
}
END_TEST

START_TEST(fixed_parts_give_bitwise_the_same_at_any_thread_count) {
    test_pool_size(4);
    pardo_executor *a, *b;
    compare_modes(11, 3, 1, &a);
    compare_modes(11, 3, 4, &b);
    const char *names[] = {"y_cat", "m_mean", "m_plain", "s_sum", "s_max", "s_min"};
    for (int i = 0; i < 6; i++) test_assert_close(test_fetch(a, names[i]), test_fetch(b, names[i]), 0, 0);
    const pardo_program *pa = pardo_executor_program(a), *pb = pardo_executor_program(b);
    pardo_executor_free(a);
    pardo_executor_free(b);
    pardo_program_free((pardo_program *)pa);
    pardo_program_free((pardo_program *)pb);
}
END_TEST

START_TEST(split_sizes_and_axis) {
    test_pool_size(2);
    pardo_program *p = test_program(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"int32\", \"shape\": [2, -1], \"role\": \"feed\"}},"
        "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xa\"], \"attrs\": {\"parts\": 3, \"axis\": -1}},"
        "{\"op\": \"merge\", \"in\": [\"xa\"], \"out\": [\"back\"], \"attrs\": {\"mode\": \"concat\", \"axis\": 1}}]}]}",
        "ax.json");
    const pardo_graph_var *xa = pardo_block_find_var(&p->blocks[0], "xa");
    ck_assert_int_eq(xa->kind, PARDO_VAR_TENSOR_ARRAY);
    ck_assert_int_eq(xa->type.dtype, PARDO_I32);
    ck_assert_int_eq(xa->type.shape[0], 2);
    ck_assert_int_eq(xa->type.shape[1], -1);
    pardo_executor *ex = test_executor(p, 2);
    int64_t shape[2] = {2, 7};
    double v[14];
    for (int i = 0; i < 14; i++) v[i] = i;
    pardo_tensor *x = test_tensor_from(PARDO_I32, 2, shape, v);
    test_feed(ex, "x", x);
    test_run(ex);
    const pardo_tensor *a = test_fetch(ex, "xa");
    ck_assert(a->is_array);
    ck_assert_int_eq(a->n_parts, 3);
    const int64_t cols[3] = {3, 2, 2}, first[3] = {0, 3, 5};
    for (int p_ = 0; p_ < 3; p_++) {
        const pardo_tensor *part = a->parts[p_];
        ck_assert_int_eq(part->shape[0], 2);
        ck_assert_int_eq(part->shape[1], cols[p_]);
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < cols[p_]; c++)
                ck_assert_int_eq((int)pardo_tensor_get_f64(part, r * cols[p_] + c), r * 7 + first[p_] + c);
    }
    test_assert_close(test_fetch(ex, "back"), x, 0, 0);
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(inference_types_parts_and_sub_block_vars) {
    pardo_program *p = parallel_program(0);
    const pardo_block *b0 = &p->blocks[0], *b1 = &p->blocks[1];
    const pardo_graph_var *xp = pardo_block_find_var(b1, "xp"), *y = pardo_block_find_var(b1, "y");
    ck_assert_ptr_nonnull(xp);
    ck_assert_int_eq(xp->kind, PARDO_VAR_TENSOR);
    ck_assert_int_eq(xp->type.dtype, PARDO_F64);
    ck_assert_int_eq(xp->type.ndim, 2);
    ck_assert_int_eq(xp->type.shape[0], -1);
    ck_assert_int_eq(xp->type.shape[1], 3);
    ck_assert_int_eq(y->type.shape[1], 2);
    const pardo_graph_var *ys = pardo_block_find_var(b0, "ys"), *ss = pardo_block_find_var(b0, "ss");
    ck_assert_int_eq(ys->kind, PARDO_VAR_TENSOR_ARRAY);
    ck_assert(!ys->declared);
    ck_assert_int_eq(ys->type.ndim, 2);
    ck_assert_int_eq(ys->type.shape[0], -1);
    ck_assert_int_eq(ss->type.ndim, 1);
    ck_assert_int_eq(ss->type.shape[0], 2);
    const pardo_graph_var *cat = pardo_block_find_var(b0, "y_cat"), *sum = pardo_block_find_var(b0, "s_sum");
    ck_assert_int_eq(cat->kind, PARDO_VAR_TENSOR);
    ck_assert_int_eq(cat->type.shape[0], -1);
    ck_assert_int_eq(cat->type.shape[1], 2);
    ck_assert_int_eq(sum->type.shape[0], 2);
    pardo_program_free(p);
}
END_TEST

START_TEST(steady_state_reuses_parts_scopes_and_outputs) {
    test_pool_size(2);
    pardo_program *p = parallel_program(2);
    pardo_executor *ex = test_executor(p, 2);
    test_rng r = {5};
    int64_t xs[2] = {9, 3};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1);
    test_feed(ex, "x", x);
    test_run(ex);
    const pardo_tensor *part0 = test_fetch(ex, "xs")->parts[0], *ys0 = test_fetch(ex, "ys")->parts[1];
    const pardo_tensor *cat = test_fetch(ex, "y_cat"), *arr = test_fetch(ex, "ys");
    for (int s = 0; s < 5; s++) test_run(ex);
    ck_assert_ptr_eq(test_fetch(ex, "xs")->parts[0], part0); /* split's copies reused */
    ck_assert_ptr_eq(test_fetch(ex, "ys"), arr);             /* the array */
    ck_assert_ptr_eq(test_fetch(ex, "ys")->parts[1], ys0);   /* a part's output, moved back and forth */
    ck_assert_ptr_eq(test_fetch(ex, "y_cat"), cat);
#ifndef UNDER_SANITIZER
    /* and nothing is allocated per step */
    struct mallinfo2 before = mallinfo2();
    for (int s = 0; s < 200; s++) test_run(ex);
    struct mallinfo2 after = mallinfo2();
    ck_assert_msg(after.uordblks == before.uordblks, "the heap grew by %zu bytes over 200 steps",
                  after.uordblks - before.uordblks);
#endif
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* ---- 100,000 parallel_do calls ---- */

static const char tiny_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 2], \"role\": \"feed\"}},"
    "\"ops\": ["
    "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
    "{\"op\": \"parallel_do\", \"in\": [\"xs\"], \"out\": [\"ys\"],"
    " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"yp\": \"ys\"}}},"
    "{\"op\": \"merge\", \"in\": [\"ys\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"concat\"}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    "{\"op\": \"scale\", \"in\": [\"xp\"], \"out\": [\"yp\"], \"attrs\": {\"scale\": 2, \"bias\": 1}}]}]}";

START_TEST(stress_100000_parallel_do_calls) {
#ifdef UNDER_TSAN
    const int calls = 20000; /* TSan runs each call many times slower; the plain and ASan builds do the full count */
#else
    const int calls = 100000;
#endif
    test_pool_size(2);
    pardo_program *p = test_program(tiny_text, "tiny.json");
    pardo_executor *ex = test_executor(p, 2);
    int64_t xs[2] = {5, 2};
    pardo_tensor *x = test_tensor_from(PARDO_F32, 2, xs, (const double[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    test_feed(ex, "x", x);
    pardo_status st;
    for (int i = 0; i < calls; i++)
        if (pardo_executor_run(ex, &st) != PARDO_OK) ck_abort_msg("call %d: %s", i, st.msg);
    ck_assert_int_eq(pardo_executor_steps(ex), calls);
    const pardo_tensor *y = test_fetch(ex, "y");
    for (int i = 0; i < 10; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), 2.0 * i + 1);
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* pardo_merge_combine, the merge op's arithmetic, against a naive loop: every
 * dtype and elementwise mode, weights with an empty (NaN) part, ranges that
 * cut tiles anywhere, and bitwise the same whatever the range split. */
static double naive_merge(pardo_dtype dt, pardo_merge_mode mode, const double *const *vals, int n, const double *w,
                          int64_t i) {
    bool first = true;
    double acc = 0;
    for (int p = 0; p < n; p++) {
        if (w && w[p] == 0) continue;
        double v = vals[p][i] * (w ? w[p] : 1.0);
        if (first) acc = v;
        else if (mode == PARDO_MERGE_MAX) acc = v > acc ? v : acc;
        else if (mode == PARDO_MERGE_MIN) acc = v < acc ? v : acc;
        else acc += v;
        first = false;
    }
    if (mode == PARDO_MERGE_MEAN && !w) acc /= n;
    if (dt == PARDO_F32) return (float)acc;
    if (dt == PARDO_BOOL) return acc != 0;
    return acc;
}

START_TEST(merge_combine_matches_naive) {
    enum { N = 3, LEN = 1301 };
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_BOOL};
    static const pardo_merge_mode modes[] = {PARDO_MERGE_MEAN, PARDO_MERGE_SUM, PARDO_MERGE_MAX, PARDO_MERGE_MIN};
    test_rng r = {21};
    static double vals[N][LEN];
    const double *rows[N] = {vals[0], vals[1], vals[2]};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        pardo_dtype dt = dts[d];
        bool fl = pardo_dtype_is_float(dt);
        pardo_status st;
        int64_t shape[1] = {LEN};
        pardo_tensor *parts[N], *y = pardo_tensor_new_cpu(dt, 1, shape, &st), *y2 = pardo_tensor_new_cpu(dt, 1, shape, &st);
        const void *data[N];
        for (int p = 0; p < N; p++) {
            parts[p] = pardo_tensor_new_cpu(dt, 1, shape, &st);
            for (int64_t i = 0; i < LEN; i++) {
                double v = dt == PARDO_BOOL ? (double)(test_rng_next(&r) % 2)
                                            : fl ? test_rng_uniform(&r, -5, 5) : (double)(int)test_rng_uniform(&r, -50, 50);
                if (dt == PARDO_F32) v = (float)v;
                if (fl && p == 1 && i % 97 == 0) v = NAN; /* the zero-weight part below */
                vals[p][i] = v;
                pardo_tensor_set_f64(parts[p], i, v);
            }
            data[p] = pardo_tensor_data(parts[p]);
        }
        const double weights[N] = {0.25, 0.0, 0.75};
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            if (!fl && modes[m] == PARDO_MERGE_MEAN) continue; /* mean is float-only (merge's inference says so) */
            if (dt == PARDO_BOOL && modes[m] == PARDO_MERGE_SUM) continue;
            for (int weighted = 0; weighted < (modes[m] == PARDO_MERGE_MEAN ? 2 : 1); weighted++) {
                const double *w = weighted ? weights : NULL;
                /* without weights part 1's NaNs are real input: keep them out of the float check */
                int n = fl && !weighted ? 1 : N;
                pardo_merge_args a = {dt, modes[m], data, n, w, pardo_tensor_data(y), NULL};
                pardo_merge_combine(&a, 0, LEN);
                pardo_merge_args b = a;
                b.y = pardo_tensor_data(y2);
                pardo_merge_combine(&b, 0, 7);
                pardo_merge_combine(&b, 7, 700);
                pardo_merge_combine(&b, 700, LEN);
                ck_assert(memcmp(pardo_tensor_data(y), pardo_tensor_data(y2), (size_t)LEN * pardo_dtype_size(dt)) == 0);
                if (fl && !weighted) { /* a plain mean or sum over parts 0 and 2 */
                    const void *two[2] = {data[0], data[2]};
                    const double *tworows[2] = {rows[0], rows[2]};
                    a.parts = two;
                    a.n = 2;
                    pardo_merge_combine(&a, 0, LEN);
                    for (int64_t i = 0; i < LEN; i++)
                        ck_assert_msg(pardo_tensor_get_f64(y, i) == naive_merge(dt, modes[m], tworows, 2, NULL, i),
                                      "%s mode %d [%lld]", pardo_dtype_name(dt), (int)modes[m], (long long)i);
                    continue;
                }
                for (int64_t i = 0; i < LEN; i++)
                    ck_assert_msg(pardo_tensor_get_f64(y, i) == naive_merge(dt, modes[m], rows, n, w, i),
                                  "%s mode %d weighted %d [%lld]: %g vs %g", pardo_dtype_name(dt), (int)modes[m],
                                  weighted, (long long)i, pardo_tensor_get_f64(y, i),
                                  naive_merge(dt, modes[m], rows, n, w, i));
            }
        }
        for (int p = 0; p < N; p++) pardo_tensor_release(parts[p]);
        pardo_tensor_release(y);
        pardo_tensor_release(y2);
    }
}
END_TEST

/* A plain float mean over a power of two of parts multiplies by the exact inverse (pardo_merge_exact_inverse)
 * instead of dividing: bit for bit the divide of a naive loop over values of every magnitude (the largest and
 * smallest floats, subnormals, signed zeros, infinities), float32 and float64, for 2, 4 and 8 parts, and over 3
 * and 6 (a divide: a multiply by an inexact 1/3 differs from it in float64's last bit; rounded to float32 it
 * would hardly ever show, so the choice itself is asserted too). */
START_TEST(mean_over_a_power_of_two_is_the_divide) {
    enum { MAXP = 8, LEN = 515 };
    static const float special[] = {FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f, 3e-39f, 0.0f, -0.0f,
                                    1.0f,    -1.0f,    0.1f,    INFINITY, 1e30f,  -7e-20f};
    const int nspecial = (int)(sizeof special / sizeof special[0]);
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    static const int counts[] = {2, 4, 8, 3, 6};
    static double vals[MAXP][LEN];
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        test_rng r = {5};
        pardo_status st;
        int64_t shape[1] = {LEN};
        pardo_tensor *parts[MAXP], *y = pardo_tensor_new_cpu(dts[d], 1, shape, &st);
        const void *data[MAXP];
        const double *rows[MAXP];
        for (int p = 0; p < MAXP; p++) {
            parts[p] = pardo_tensor_new_cpu(dts[d], 1, shape, &st);
            for (int64_t i = 0; i < LEN; i++) {
                /* a special value, or a random one scaled by 2^-140 .. 2^120 */
                double v = test_rng_next(&r) % 3 == 0
                               ? (double)special[test_rng_next(&r) % (uint64_t)nspecial]
                               : ldexp(test_rng_uniform(&r, -1, 1), (int)(test_rng_next(&r) % 261) - 140);
                if (dts[d] == PARDO_F32) v = (float)v;
                vals[p][i] = v;
                pardo_tensor_set_f64(parts[p], i, v);
            }
            data[p] = pardo_tensor_data(parts[p]);
            rows[p] = vals[p];
        }
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            const int n = counts[c];
            ck_assert(pardo_merge_exact_inverse(n) == ((n & (n - 1)) == 0 ? 1.0 / n : 0));
            pardo_merge_args a = {dts[d], PARDO_MERGE_MEAN, data, n, NULL, pardo_tensor_data(y), NULL};
            pardo_merge_combine(&a, 0, LEN);
            for (int64_t i = 0; i < LEN; i++) {
                const double got = pardo_tensor_get_f64(y, i),
                             want = naive_merge(dts[d], PARDO_MERGE_MEAN, rows, n, NULL, i);
                ck_assert_msg(memcmp(&got, &want, sizeof want) == 0 || (isnan(got) && isnan(want)),
                              "%s, %d parts [%lld]: %a vs %a", pardo_dtype_name(dts[d]), n, (long long)i, got, want);
            }
        }
        for (int p = 0; p < MAXP; p++) pardo_tensor_release(parts[p]);
        pardo_tensor_release(y);
    }
}
END_TEST

/* ---- all_reduce: the parts join ---- */

/* Block 1 starts and ends with an all_reduce (the joins of the segments
 * parallel_do runs): wn = parts x w (an enclosing var), r = the part's
 * column sums, s = their sum over the parts, then z = all_reduce(s + wn)
 * and rr = all_reduce(r) at the end; %d is split's attr parts. */
static const char all_reduce_fmt[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 2], \"role\": \"feed\"},"
    "\"w\": {\"dtype\": \"float64\", \"shape\": [2], \"role\": \"param\", \"init\": {\"fill\": \"constant\", \"value\": 0.5}},"
    "\"xs\": {\"dtype\": \"float64\", \"shape\": [-1, 2], \"kind\": \"tensor_array\"}},"
    "\"ops\": ["
    "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": %d}},"
    "{\"op\": \"parallel_do\", \"name\": \"pd\", \"in\": [\"xs\", \"w\"], \"out\": [\"zs\", \"rrs\", \"ss\"],"
    " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"z\": \"zs\", \"rr\": \"rrs\", \"s\": \"ss\"}}},"
    "{\"op\": \"merge\", \"in\": [\"zs\"], \"out\": [\"z_max\"], \"attrs\": {\"mode\": \"max\"}},"
    "{\"op\": \"merge\", \"in\": [\"zs\"], \"out\": [\"z_min\"], \"attrs\": {\"mode\": \"min\"}},"
    "{\"op\": \"merge\", \"in\": [\"rrs\"], \"out\": [\"rr_max\"], \"attrs\": {\"mode\": \"max\"}},"
    "{\"op\": \"merge\", \"in\": [\"ss\"], \"out\": [\"s_min\"], \"attrs\": {\"mode\": \"min\"}}"
    "]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    "{\"op\": \"all_reduce\", \"in\": [\"w\"], \"out\": [\"wn\"]},"
    "{\"op\": \"reduce_sum\", \"in\": [\"xp\"], \"out\": [\"r\"], \"attrs\": {\"axes\": [0], \"keepdims\": false}},"
    "{\"op\": \"all_reduce\", \"in\": [\"r\"], \"out\": [\"s\"]},"
    "{\"op\": \"add\", \"in\": [\"s\", \"wn\"], \"out\": [\"y\"]},"
    "{\"op\": \"all_reduce\", \"in\": [\"y\", \"r\"], \"out\": [\"z\", \"rr\"]}"
    "]}]}";

/* Every part gets the sums over all parts, whatever the parts (more than
 * the threads, uneven, one) and threads, run after run; in block 0 (one
 * part) all_reduce copies. */
START_TEST(all_reduce_joins_the_parts) {
    test_pool_size(4);
    const int parts[] = {1, 3, 5, 8};
    const int threads[] = {1, 2, 4};
    int64_t shape[2] = {7, 2};
    double xv[14], col[2] = {0, 0};
    for (int i = 0; i < 14; i++) {
        xv[i] = 0.25 * i - 1;
        col[i % 2] += xv[i];
    }
    pardo_tensor *x = test_tensor_from(PARDO_F64, 2, shape, xv);
    for (size_t pi = 0; pi < sizeof parts / sizeof parts[0]; pi++) {
        char text[sizeof all_reduce_fmt + 16];
        snprintf(text, sizeof text, all_reduce_fmt, parts[pi]);
        pardo_program *p = test_program(text, "all_reduce.json");
        const int n = parts[pi];
        for (int t = 0; t < 3; t++) {
            pardo_executor *ex = test_executor(p, threads[t]);
            test_feed(ex, "x", x);
            for (int rep = 0; rep < 3; rep++) {
                test_run(ex);
                const pardo_tensor *zmax = test_fetch(ex, "z_max"), *zmin = test_fetch(ex, "z_min"),
                                   *rr = test_fetch(ex, "rr_max"), *smin = test_fetch(ex, "s_min");
                for (int c = 0; c < 2; c++) {
                    const double z = n * (col[c] + n * 0.5);
                    ck_assert_msg(fabs(pardo_tensor_get_f64(zmax, c) - z) < 1e-12 &&
                                      fabs(pardo_tensor_get_f64(zmin, c) - z) < 1e-12,
                                  "%d parts, %d threads: z[%d] %g..%g, expected %g", n, threads[t], c,
                                  pardo_tensor_get_f64(zmin, c), pardo_tensor_get_f64(zmax, c), z);
                    ck_assert(fabs(pardo_tensor_get_f64(rr, c) - col[c]) < 1e-12);
                    ck_assert(fabs(pardo_tensor_get_f64(smin, c) - col[c]) < 1e-12);
                }
            }
            pardo_executor_free(ex);
        }
        pardo_program_free(p);
    }
    /* block 0: a copy */
    pardo_program *p = test_program(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 2], \"role\": \"feed\"}},"
        "\"ops\": [{\"op\": \"all_reduce\", \"in\": [\"x\"], \"out\": [\"y\"]}]}]}", "copy.json");
    pardo_executor *ex = test_executor(p, 1);
    pardo_tensor *xf = test_tensor_from(PARDO_F32, 2, shape, xv);
    test_feed(ex, "x", xf);
    test_run(ex);
    test_assert_close(test_fetch(ex, "y"), xf, 0, 0);
    pardo_tensor_release(xf);
    pardo_executor_free(ex);
    pardo_program_free(p);
    pardo_tensor_release(x);
}
END_TEST

Suite *make_parallel_suite(void) {
    Suite *s = suite_create("parallel");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 300);
    tcase_add_test(core, merge_modes_match_single_thread);
    tcase_add_test(core, merge_combine_matches_naive);
    tcase_add_test(core, mean_over_a_power_of_two_is_the_divide);
    tcase_add_test(core, fixed_parts_give_bitwise_the_same_at_any_thread_count);
    tcase_add_test(core, split_sizes_and_axis);
    tcase_add_test(core, big_split_copies_on_the_pool);
    tcase_add_test(core, split_copies_where_parts_may_be_written);
    tcase_add_test(core, inference_types_parts_and_sub_block_vars);
    tcase_add_test(core, steady_state_reuses_parts_scopes_and_outputs);
    tcase_add_test(core, stress_100000_parallel_do_calls);
    tcase_add_test(core, all_reduce_joins_the_parts);
    suite_add_tcase(s, core);
    return s;
}
