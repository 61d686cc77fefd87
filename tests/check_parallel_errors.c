/* check_parallel_errors.c - the errors of split, merge and parallel_do
 * (SPEC section 2): a failing part stopping the others (its error the
 * op's, naming the part), the stop flag read between a part's ops, parts
 * that do not match at run time, and every load-time error validate gives
 * the parallel ops. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "test_util.h"

/* ---- a failing part ---- */

static const char div_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"a\": {\"dtype\": \"int32\", \"shape\": [-1], \"role\": \"feed\"},"
    "\"b\": {\"dtype\": \"int32\", \"shape\": [-1], \"role\": \"feed\"}},"
    "\"ops\": ["
    "{\"op\": \"split\", \"in\": [\"a\"], \"out\": [\"as\"], \"attrs\": {\"parts\": 8}},"
    "{\"op\": \"split\", \"in\": [\"b\"], \"out\": [\"bs\"], \"attrs\": {\"parts\": 8}},"
    "{\"op\": \"parallel_do\", \"name\": \"pd\", \"in\": [\"as\", \"bs\"], \"out\": [\"qs\"],"
    " \"attrs\": {\"block\": 1, \"parts_in\": {\"ap\": \"as\", \"bp\": \"bs\"}, \"parts_out\": {\"q\": \"qs\"}}},"
    "{\"op\": \"merge\", \"in\": [\"qs\"], \"out\": [\"quot\"], \"attrs\": {\"mode\": \"concat\"}}]},"
    "{\"parent\": 0, \"vars\": {}, \"ops\": ["
    "{\"op\": \"div\", \"name\": \"ratio\", \"in\": [\"ap\", \"bp\"], \"out\": [\"q1\"]},"
    "{\"op\": \"add\", \"in\": [\"q1\", \"q1\"], \"out\": [\"q2\"]},"
    "{\"op\": \"sub\", \"in\": [\"q2\", \"q1\"], \"out\": [\"q\"]}]}]}";

START_TEST(err_failing_part_stops_the_others) {
    test_pool_size(4);
    pardo_status st;
    pardo_program *p = test_program(div_text, "div.json");
    int64_t n = 16;
    double av[16], bv[16], good[16];
    for (int i = 0; i < 16; i++) {
        av[i] = 10 * i;
        bv[i] = (i == 6 || i == 7) ? 0 : 2; /* rows 6 and 7 are part 3 of 8 */
        good[i] = 5;
    }
    pardo_tensor *a = test_tensor_from(PARDO_I32, 1, &n, av), *b = test_tensor_from(PARDO_I32, 1, &n, bv);
    pardo_tensor *b_ok = test_tensor_from(PARDO_I32, 1, &n, good);
    const int threads[] = {1, 2, 4, 8};
    for (int t = 0; t < 4; t++) {
        pardo_executor *ex = test_executor(p, threads[t]);
        test_feed(ex, "a", a);
        test_feed(ex, "b", b);
        for (int rep = 0; rep < 20; rep++) {
            ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_ERUNTIME);
            ck_assert_msg(strstr(st.msg, "div.json:1:") && strstr(st.msg, "block 0, op 2 'pd' (parallel_do)") &&
                              strstr(st.msg, "part 3 of 8 (block 1)") && strstr(st.msg, "block 1, op 0 'ratio' (div)"),
                          "%d threads: %s", threads[t], st.msg);
        }
        ck_assert_int_eq(pardo_executor_steps(ex), 0);
        ck_assert_ptr_null(pardo_executor_fetch(ex, "quot"));
        /* the same executor runs again once the data is good */
        test_feed(ex, "b", b_ok);
        test_run(ex);
        const pardo_tensor *q = test_fetch(ex, "quot");
        for (int i = 0; i < 16; i++) ck_assert_int_eq((int)pardo_tensor_get_f64(q, i), 2 * i);
        pardo_executor_free(ex);
    }
    pardo_tensor_release(a);
    pardo_tensor_release(b);
    pardo_tensor_release(b_ok);
    pardo_program_free(p);
}
END_TEST

START_TEST(err_stop_flag_stops_between_ops) {
    pardo_status st;
    pardo_program *p = test_program(div_text, "div.json");
    pardo_executor *ex = test_executor(p, 1);
    pardo_scope *child = pardo_scope_new(pardo_executor_scope(ex));
    int64_t n = 2;
    pardo_tensor *a = test_tensor_from(PARDO_I32, 1, &n, (const double[]){4, 6});
    ck_assert_int_eq(pardo_scope_set(child, "ap", a, &st), PARDO_OK);
    ck_assert_int_eq(pardo_scope_set(child, "bp", a, &st), PARDO_OK);
    atomic_int stop = 1;
    pardo_block_run r = {.nthreads = 1, .stop = &stop, .cpu_only = true};
    ck_assert_int_eq(pardo_executor_run_block_with(ex, 1, child, &r, &st), PARDO_ECANCELED);
    ck_assert_msg(strstr(st.msg, "block 1 stopped before op 0"), "%s", st.msg);
    ck_assert_ptr_null(pardo_scope_find(child, "q1")); /* no op ran */
    atomic_store(&stop, 0);
    ck_assert_int_eq(pardo_executor_run_block_with(ex, 1, child, &r, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(pardo_scope_find(child, "q"), 1), 1);
    pardo_tensor_release(a);
    pardo_scope_free(child);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* Runs a graph once with feed x (float64 [rows, 3]); returns the code, st filled. */
static int run_status(const char *text, int rows, pardo_status *st) {
    pardo_program *p = test_program(text, "r.json");
    pardo_executor *ex = test_executor(p, 2);
    test_rng r = {1};
    int64_t xs[2] = {rows, 3};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1);
    test_feed(ex, "x", x);
    int rc = pardo_executor_run(ex, st);
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
    return rc;
}

#define X_FEED "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 3], \"role\": \"feed\"}"

START_TEST(err_run_time_part_mismatches) {
    pardo_status st;
    /* sum of 7 rows over 3 parts: parts of different shapes */
    ck_assert_int_eq(
        run_status(
            "{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED "}, \"ops\": ["
            "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 3}},"
            "{\"op\": \"merge\", \"name\": \"m\", \"in\": [\"xs\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"sum\"}}]}]}",
            7, &st),
        PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'m' (merge)") && strstr(st.msg, "part 1 is [2, 3] but part 0 is [3, 3]"), "%s",
                  st.msg);
    /* two parts_in arrays with different part counts */
    ck_assert_int_eq(
        run_status(
            "{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED "}, \"ops\": ["
            "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"a\"], \"attrs\": {\"parts\": 2}},"
            "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"b\"], \"attrs\": {\"parts\": 3}},"
            "{\"op\": \"parallel_do\", \"in\": [\"a\", \"b\"], \"out\": [\"cs\"], \"attrs\": {\"block\": 1,"
            " \"parts_in\": {\"ap\": \"a\", \"bp\": \"b\"}, \"parts_out\": {\"c\": \"cs\"}}}]},"
            "{\"parent\": 0, \"vars\": {}, \"ops\": [{\"op\": \"add\", \"in\": [\"ap\", \"bp\"], \"out\": [\"c\"]}]}]}",
            6, &st),
        PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'b' has 3 parts but 'a' has 2"), "%s", st.msg);
    /* a weighted mean whose split batch is empty */
    ck_assert_int_eq(
        run_status(
            "{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED "}, \"ops\": ["
            "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
            "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"mean\", \"weight_by\": \"xs\"}}]}]}",
            0, &st),
        PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "the split batch is empty"), "%s", st.msg);
    /* all_reduce of parts whose shapes differ (7 rows over 3 parts) names the part and the var */
    ck_assert_int_eq(
        run_status(
            "{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED "}, \"ops\": ["
            "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 3}},"
            "{\"op\": \"parallel_do\", \"name\": \"pd\", \"in\": [\"xs\"], \"out\": [\"cs\"], \"attrs\": {\"block\": 1,"
            " \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"c\": \"cs\"}}}]},"
            "{\"parent\": 0, \"vars\": {}, \"ops\": [{\"op\": \"all_reduce\", \"in\": [\"xp\"], \"out\": [\"c\"]}]}]}",
            7, &st),
        PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'pd' (parallel_do)") && strstr(st.msg, "part 1's 'xp' differs from part 0's"), "%s",
                  st.msg);
}
END_TEST

/* A part failing in a segment before an all_reduce stops the run there (the
 * join does not run), names the part, and the next run with good data
 * gives the sums. */
START_TEST(err_failing_part_before_a_join) {
    test_pool_size(4);
    pardo_status st;
    pardo_program *p = test_program(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"a\": {\"dtype\": \"int32\", \"shape\": [-1], \"role\": \"feed\"},"
        "\"b\": {\"dtype\": \"int32\", \"shape\": [-1], \"role\": \"feed\"}},"
        "\"ops\": ["
        "{\"op\": \"split\", \"in\": [\"a\"], \"out\": [\"as\"], \"attrs\": {\"parts\": 4}},"
        "{\"op\": \"split\", \"in\": [\"b\"], \"out\": [\"bs\"], \"attrs\": {\"parts\": 4}},"
        "{\"op\": \"parallel_do\", \"name\": \"pd\", \"in\": [\"as\", \"bs\"], \"out\": [\"ts\"],"
        " \"attrs\": {\"block\": 1, \"parts_in\": {\"ap\": \"as\", \"bp\": \"bs\"}, \"parts_out\": {\"t\": \"ts\"}}},"
        "{\"op\": \"merge\", \"in\": [\"ts\"], \"out\": [\"total\"], \"attrs\": {\"mode\": \"max\"}}]},"
        "{\"parent\": 0, \"vars\": {}, \"ops\": ["
        "{\"op\": \"div\", \"name\": \"ratio\", \"in\": [\"ap\", \"bp\"], \"out\": [\"q\"]},"
        "{\"op\": \"cast\", \"in\": [\"q\"], \"out\": [\"qf\"], \"attrs\": {\"dtype\": \"float64\"}},"
        "{\"op\": \"all_reduce\", \"in\": [\"qf\"], \"out\": [\"s\"]},"
        "{\"op\": \"reduce_sum\", \"in\": [\"s\"], \"out\": [\"t\"], \"attrs\": {\"keepdims\": false}}]}]}",
        "join.json");
    int64_t n = 8;
    double av[8], bad[8], good[8];
    for (int i = 0; i < 8; i++) {
        av[i] = 6 * i;
        bad[i] = i == 5 ? 0 : 3; /* row 5 is in part 2 */
        good[i] = 3;
    }
    pardo_tensor *a = test_tensor_from(PARDO_I32, 1, &n, av), *b = test_tensor_from(PARDO_I32, 1, &n, bad),
                 *b_ok = test_tensor_from(PARDO_I32, 1, &n, good);
    const int threads[] = {1, 2, 4};
    for (int t = 0; t < 3; t++) {
        pardo_executor *ex = test_executor(p, threads[t]);
        test_feed(ex, "a", a);
        test_feed(ex, "b", b);
        ck_assert_int_eq(pardo_executor_run(ex, &st), PARDO_ERUNTIME);
        ck_assert_msg(strstr(st.msg, "part 2 of 4 (block 1)") && strstr(st.msg, "'ratio' (div)"), "%s", st.msg);
        test_feed(ex, "b", b_ok);
        test_run(ex);
        /* the quotients 2i summed over the parts ([24, 32] in every part), then over the two: 56 */
        ck_assert_double_eq(pardo_tensor_get_f64(test_fetch(ex, "total"), 0), 56.0);
        pardo_executor_free(ex);
    }
    pardo_tensor_release(a);
    pardo_tensor_release(b);
    pardo_tensor_release(b_ok);
    pardo_program_free(p);
}
END_TEST

/* ---- load-time errors ---- */

static void expect_error(const char *text, int code, const char *const *words) {
    pardo_status st;
    int rc = test_program_status(text, "t.json", NULL, &st);
    ck_assert_msg(rc == code, "expected code %d, got %d: %s", code, rc, st.msg);
    for (; *words; words++) ck_assert_msg(strstr(st.msg, *words) != NULL, "message lacks '%s': %s", *words, st.msg);
}

#define HEAD                                                                                                                 \
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED ", "                                                                   \
    "\"w\": {\"dtype\": \"float64\", \"shape\": [3, 2], \"role\": \"param\", \"init\": {\"fill\": \"normal\"}}}, \"ops\": [" \
    "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"]},"
#define PD(in, attrs)                                                                                                  \
    "{\"op\": \"parallel_do\", \"name\": \"outer\", \"in\": " in ", \"out\": [\"ys\"], \"attrs\": " attrs "}"
#define STD_ATTRS "{\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"y\": \"ys\"}}"
#define SUB(ops) "{\"parent\": 0, \"vars\": {}, \"ops\": [" ops "]}"
#define MATMUL "{\"op\": \"matmul\", \"in\": [\"xp\", \"w\"], \"out\": [\"y\"]}"

START_TEST(err_parallel_do_block_attr) {
    expect_error(HEAD PD("[\"xs\", \"w\"]", "{\"block\": 0}") "]}]}", PARDO_EINVAL,
                 (const char *[]){"t.json:1:", "'outer' (parallel_do)", "attr 'block' is 0", NULL});
    expect_error(HEAD PD("[\"xs\", \"w\"]", "{\"block\": 4, \"parts_in\": {\"xp\": \"xs\"}}") "]}, " SUB(MATMUL) "]}",
                 PARDO_EINVAL, (const char *[]){"attr 'block' is 4", "0..1", NULL});
    /* block 2's parent is block 1, not the op's block 0 */
    expect_error(
        HEAD
            PD("[\"xs\", \"w\"]", "{\"block\": 2, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"y\": \"ys\"}}") "]}, " SUB(
                "") ", {\"parent\": 1, \"vars\": {}, \"ops\": [" MATMUL "]}]}",
        PARDO_EINVAL, (const char *[]){"whose parent is block 1", "child of the op's block 0", NULL});
    /* two parallel_dos on one block */
    expect_error(
        HEAD PD(
            "[\"xs\", \"w\"]",
            STD_ATTRS) ","
                       "{\"op\": \"parallel_do\", \"name\": \"again\", \"in\": [\"xs\", \"w\"], \"out\": [\"zs\"], \"attrs\": " STD_ATTRS
                       "}"
                       "]}, " SUB(MATMUL) "]}",
        PARDO_EINVAL, (const char *[]){"'again'", "block 1 is already run by block 0, op 1 'outer'", NULL});
}
END_TEST

START_TEST(err_nested_parallel_do_names_both) {
    expect_error(
        HEAD PD(
            "[\"xs\", \"w\"]",
            STD_ATTRS) "]}, "
                       "{\"parent\": 0, \"vars\": {}, \"ops\": [" MATMUL ","
                       "{\"op\": \"split\", \"in\": [\"xp\"], \"out\": [\"inner_parts\"]},"
                       "{\"op\": \"parallel_do\", \"name\": \"inner\", \"in\": [\"inner_parts\"], \"out\": [\"zs\"],"
                       " \"attrs\": {\"block\": 2, \"parts_in\": {\"z\": \"inner_parts\"}, \"parts_out\": {\"z\": \"zs\"}}}]},"
                       "{\"parent\": 1, \"vars\": {}, \"ops\": []}]}",
        PARDO_EINVAL,
        (const char *[]){"block 1, op 2 'inner' (parallel_do)", "nested parallel_do",
                         "block 0, op 1 'outer' (parallel_do)", NULL});
}
END_TEST

START_TEST(err_parallel_do_parts_and_lists) {
    /* parts_in names a tensor */
    expect_error(
        HEAD PD(
            "[\"x\", \"w\"]",
            "{\"block\": 1, \"parts_in\": {\"xp\": \"x\"}, \"parts_out\": {\"y\": \"ys\"}}") "]}, " SUB(MATMUL) "]}",
        PARDO_EINVAL, (const char *[]){"parts_in 'xp'", "'x' is a tensor, expected a tensor_array", NULL});
    /* parts_in's array not in "in" */
    expect_error(HEAD PD("[\"w\"]", STD_ATTRS) "]}, " SUB(MATMUL) "]}", PARDO_EINVAL,
                 (const char *[]){"'outer'", "'xs' must be listed in \"in\"", NULL});
    /* the block reads w, which "in" lacks */
    expect_error(HEAD PD("[\"xs\"]", STD_ATTRS) "]}, " SUB(MATMUL) "]}", PARDO_EINVAL,
                 (const char *[]){"'outer'", "block 1, op 0 (matmul) reads 'w' of block 0", "list it in \"in\"", NULL});
    /* an output that no parts_out fills */
    expect_error(
        HEAD "{\"op\": \"parallel_do\", \"in\": [\"xs\", \"w\"], \"out\": [\"ys\", \"extra\"], \"attrs\": " STD_ATTRS
             "}"
             "]}, " SUB(MATMUL) "]}",
        PARDO_EINVAL, (const char *[]){"output 1 'extra' is not a parts_out target", NULL});
    /* parts_out names a var the block never writes */
    expect_error(
        HEAD PD(
            "[\"xs\", \"w\"]",
            "{\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"nope\": \"ys\"}}") "]}, " SUB(MATMUL) "]}",
        PARDO_EINVAL, (const char *[]){"parts_out 'nope': no op of block 1 writes 'nope'", NULL});
    /* parts_in must map to names */
    expect_error(
        HEAD PD("[\"xs\", \"w\"]",
                "{\"block\": 1, \"parts_in\": {\"xp\": 3}, \"parts_out\": {\"y\": \"ys\"}}") "]}, " SUB(MATMUL) "]}",
        PARDO_EINVAL, (const char *[]){"attr 'parts_in': 'xp' maps to number", NULL});
    /* the block updates an enclosing var in place */
    expect_error(HEAD PD("[\"xs\", \"w\"]", STD_ATTRS) "]}, " SUB(
                     MATMUL
                     ", {\"op\": \"scale\", \"in\": [\"w\"], \"out\": [\"w\"], \"attrs\": {\"scale\": 0.5}}") "]}",
                 PARDO_EINVAL,
                 (const char *[]){"block 1, op 0 (matmul)", "'w' of block 0 is read here and written in block 1",
                                  "read-only", NULL});
    /* a part block declares a param */
    expect_error(
        HEAD PD(
            "[\"xs\", \"w\"]",
            STD_ATTRS) "]}, "
                       "{\"parent\": 0, \"vars\": {\"v\": {\"dtype\": \"float64\", \"shape\": [2], \"role\": \"param\", "
                       "\"init\": {\"fill\": \"normal\"}}}, \"ops\": [" MATMUL "]}]}",
        PARDO_EINVAL, (const char *[]){"block 1, var 'v'", "declare param vars and constants in block 0", NULL});
    /* the block reads one of its temps before writing it */
    expect_error(HEAD PD("[\"xs\", \"w\"]",
                         STD_ATTRS) "]}, " SUB("{\"op\": \"relu\", \"in\": [\"t\"], \"out\": [\"u\"]}, " MATMUL
                                               ", {\"op\": \"relu\", \"in\": [\"y\"], \"out\": [\"t\"]}") "]}",
                 PARDO_EINVAL, (const char *[]){"block 1, op 0 (relu)", "'t' of block 1 is read before", NULL});
}
END_TEST

START_TEST(err_tensor_array_kinds) {
    /* a tensor_array param */
    expect_error("{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED ", \"ta\": {\"dtype\": \"float32\", \"shape\": [2], "
                 "\"kind\": \"tensor_array\", \"role\": \"param\", \"init\": {\"fill\": \"normal\"}}}, \"ops\": []}]}",
                 PARDO_EINVAL, (const char *[]){"var 'ta'", "must be a temp", NULL});
    /* an ordinary op reading a tensor_array */
    expect_error(HEAD "{\"op\": \"relu\", \"name\": \"r\", \"in\": [\"xs\"], \"out\": [\"y\"]}]}]}", PARDO_EINVAL,
                 (const char *[]){"'r' (relu)", "'xs' is a tensor_array; relu reads tensors", NULL});
    /* merge of a tensor */
    expect_error(HEAD "{\"op\": \"merge\", \"in\": [\"x\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"sum\"}}]}]}",
                 PARDO_EINVAL, (const char *[]){"'x' is a tensor, but merge reads a tensor_array", NULL});
    /* split into a declared tensor */
    expect_error("{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED
                 ", \"t\": {\"dtype\": \"float64\", \"shape\": [-1, 3]}},"
                 " \"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"t\"]}]}]}",
                 PARDO_EINVAL, (const char *[]){"'t' is declared as a tensor, but split writes a tensor_array", NULL});
}
END_TEST

START_TEST(err_split_and_merge_attrs) {
    expect_error(HEAD "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"median\"}}]}]}",
                 PARDO_EINVAL, (const char *[]){"attr 'mode' is \"median\"", NULL});
    expect_error(HEAD "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"y\"]}]}]}", PARDO_EINVAL,
                 (const char *[]){"attr 'mode' is required", NULL});
    expect_error(
        HEAD
        "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"mean\", \"weight_by\": \"zz\"}}]}]}",
        PARDO_ENOTFOUND, (const char *[]){"attr 'weight_by': unknown var 'zz'", NULL});
    expect_error(
        HEAD
        "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"mean\", \"weight_by\": \"x\"}}]}]}",
        PARDO_EINVAL, (const char *[]){"'x' is a tensor, expected the tensor_array a split wrote", NULL});
    expect_error(
        HEAD
        "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"sum\", \"weight_by\": \"xs\"}}]}]}",
        PARDO_EINVAL, (const char *[]){"'weight_by' weights a mean", NULL});
    /* a declared tensor_array nobody wrote, read directly and as weight_by */
    expect_error("{\"pardo\": 1, \"blocks\": [{\"vars\": {\"ta\": {\"dtype\": \"float32\", \"shape\": [-1], "
                 "\"kind\": \"tensor_array\"}}, \"ops\": ["
                 "{\"op\": \"merge\", \"in\": [\"ta\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"sum\"}}]}]}",
                 PARDO_EINVAL, (const char *[]){"'ta' is read before any op writes it", NULL});
    expect_error(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED ", \"later\": {\"dtype\": \"float64\", \"shape\": [-1, 3], "
        "\"kind\": \"tensor_array\"}}, \"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"]},"
        "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"y\"], \"attrs\": {\"mode\": \"mean\", \"weight_by\": \"later\"}},"
        "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"later\"]}]}]}",
        PARDO_EINVAL, (const char *[]){"tensor_array 'later' is read before any op writes it", NULL});
    expect_error(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {\"k\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"}}, \"ops\": ["
        "{\"op\": \"split\", \"in\": [\"k\"], \"out\": [\"ks\"]},"
        "{\"op\": \"merge\", \"in\": [\"ks\"], \"out\": [\"m\"], \"attrs\": {\"mode\": \"mean\"}}]}]}",
        PARDO_ESHAPE, (const char *[]){"mode mean needs float parts, got int64", NULL});
    expect_error(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {\"s\": {\"dtype\": \"float32\", \"shape\": [], \"role\": \"feed\"}}, \"ops\": ["
        "{\"op\": \"split\", \"in\": [\"s\"], \"out\": [\"ss\"]}]}]}",
        PARDO_ESHAPE, (const char *[]){"cannot split a scalar", NULL});
    expect_error("{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED "}, \"ops\": ["
                 "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": -2}}]}]}",
                 PARDO_EINVAL, (const char *[]){"attr 'parts' is -2", NULL});
    expect_error("{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED "}, \"ops\": ["
                 "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"axis\": 2}}]}]}",
                 PARDO_EINVAL, (const char *[]){"axis", NULL});
}
END_TEST

START_TEST(err_sub_block_inference_is_located) {
    expect_error(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {" X_FEED ", "
        "\"w\": {\"dtype\": \"float64\", \"shape\": [4, 2], \"role\": \"param\", \"init\": {\"fill\": \"normal\"}}}, \"ops\": ["
        "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"]}," PD("[\"xs\", \"w\"]", STD_ATTRS) "]}, " SUB(
            "{\"op\": \"matmul\", \"name\": \"fc\", \"in\": [\"xp\", \"w\"], \"out\": [\"y\"]}") "]}",
        PARDO_ESHAPE, (const char *[]){"t.json:1:", "block 1, op 0 'fc' (matmul)", NULL});
}
END_TEST

Suite *make_parallel_errors_suite(void) {
    Suite *s = suite_create("parallel_errors");
    TCase *errors = tcase_create("Errors");
    tcase_set_timeout(errors, 60);
    tcase_add_test(errors, err_failing_part_stops_the_others);
    tcase_add_test(errors, err_stop_flag_stops_between_ops);
    tcase_add_test(errors, err_run_time_part_mismatches);
    tcase_add_test(errors, err_failing_part_before_a_join);
    tcase_add_test(errors, err_parallel_do_block_attr);
    tcase_add_test(errors, err_nested_parallel_do_names_both);
    tcase_add_test(errors, err_parallel_do_parts_and_lists);
    tcase_add_test(errors, err_tensor_array_kinds);
    tcase_add_test(errors, err_split_and_merge_attrs);
    tcase_add_test(errors, err_sub_block_inference_is_located);
    suite_add_tcase(s, errors);
    return s;
}
