/* check_ops_tfidf.c - ops/tfidf.c: tf_idf_vectorizer against counts worked
 * by hand (ONNX's uni- and bigram example with skips; a 2-D input with
 * three levels, permuted output columns and skips; a repeated pool n-gram)
 * in TF, IDF and TFIDF modes with and without weights; the refusals. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

static void run_expect(const char *attrs, pardo_tensor *x, int64_t n, const double *want, const char *what) {
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("tf_idf_vectorizer", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", what, st.msg);
    ck_assert_int_eq(y->dtype, PARDO_F32);
    ck_assert_int_eq(y->numel, n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(pardo_tensor_get_f64(y, i) == want[i], "%s[%lld]: %g, want %g", what, (long long)i,
                      pardo_tensor_get_f64(y, i), want[i]);
    pardo_tensor_release(y);
}

START_TEST(test_tfidf_onnx_example) {
    /* X 1 1 3 3 3 7 8 6 7 5 6 8; unigrams 2 3 5 4, bigrams (5 6) (7 8) (6 7); steps 1 to 6: 3 appears 3 times
     * (a unigram once per place), 5 once; (5 6) at places 9-10, (7 8) at 5-6, 5-11 and 8-11, (6 7) at 7-8 */
    pardo_tensor *x = test_tensor_from(PARDO_I32, 1, (int64_t[]){12}, (double[]){1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8});
    run_expect("{\"mode\": \"TF\", \"min_gram_length\": 1, \"max_gram_length\": 2, \"max_skip_count\": 5, "
               "\"ngram_counts\": [0, 4], \"ngram_indexes\": [0, 1, 2, 3, 4, 5, 6], "
               "\"pool_int64s\": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]}",
               x, 7, (double[]){0, 3, 1, 0, 1, 3, 1}, "example");
    /* bigrams only, no skip: (7 8) once, (5 6) once, (6 7) once */
    run_expect("{\"mode\": \"TF\", \"min_gram_length\": 2, \"max_gram_length\": 2, \"max_skip_count\": 0, "
               "\"ngram_counts\": [0, 4], \"ngram_indexes\": [0, 1, 2, 3, 4, 5, 6], "
               "\"pool_int64s\": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]}",
               x, 7, (double[]){0, 0, 0, 0, 1, 1, 1}, "bigrams");
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_tfidf_modes) {
    /* rows [1 2 3 1 2] and [2 3 2 3 9]; unigrams 2 9 (columns 4, 3), bigrams (1 2) (2 3) (columns 0, 1), the
     * trigram (1 2 3) (column 2); steps 1 and 2. Row 0: 2 twice; (1 2) at 0-1 and 3-4, (2 3) at 1-2 (step 2
     * gives (1 3) (2 1) (3 2)); (1 2 3) at 0-1-2. Row 1: 2 twice, 9 once; (2 3) at 0-1 and 2-3. */
    pardo_tensor *x = test_tensor_from(PARDO_I64, 2, (int64_t[]){2, 5}, (double[]){1, 2, 3, 1, 2, 2, 3, 2, 3, 9});
    char attrs[512];
    static const char *const base = "\"max_gram_length\": 3, \"max_skip_count\": 1, \"ngram_counts\": [0, 2, 6], "
                                    "\"ngram_indexes\": [4, 3, 0, 1, 2], \"pool_int64s\": [2, 9, 1, 2, 2, 3, 1, 2, 3]";
    snprintf(attrs, sizeof attrs, "{\"mode\": \"TF\", \"min_gram_length\": 1, %s}", base);
    run_expect(attrs, x, 10, (double[]){2, 1, 1, 0, 2, 0, 2, 0, 1, 2}, "TF");
    snprintf(attrs, sizeof attrs, "{\"mode\": \"TF\", \"min_gram_length\": 2, %s}", base);
    run_expect(attrs, x, 10, (double[]){2, 1, 1, 0, 0, 0, 2, 0, 0, 0}, "TF from bigrams");
    snprintf(attrs, sizeof attrs, "{\"mode\": \"IDF\", \"min_gram_length\": 1, %s}", base);
    run_expect(attrs, x, 10, (double[]){1, 1, 1, 0, 1, 0, 1, 0, 1, 1}, "IDF");
    snprintf(attrs, sizeof attrs, "{\"mode\": \"IDF\", \"min_gram_length\": 1, \"weights\": [0.5, 1.5, 2, 3, 4], %s}",
             base);
    run_expect(attrs, x, 10, (double[]){0.5, 1.5, 2, 0, 4, 0, 1.5, 0, 3, 4}, "IDF weighted");
    snprintf(attrs, sizeof attrs,
             "{\"mode\": \"TFIDF\", \"min_gram_length\": 1, \"weights\": [0.5, 1.5, 2, 3, 4], %s}", base);
    run_expect(attrs, x, 10, (double[]){1, 1.5, 2, 0, 8, 0, 3, 0, 3, 8}, "TFIDF weighted");
    pardo_tensor_release(x);
    /* a pool unigram given twice counts into its first column */
    x = test_tensor_from(PARDO_I32, 1, (int64_t[]){3}, (double[]){3, 3, 4});
    run_expect("{\"mode\": \"TF\", \"min_gram_length\": 1, \"max_gram_length\": 1, \"max_skip_count\": 0, "
               "\"ngram_counts\": [0], \"ngram_indexes\": [0, 1], \"pool_int64s\": [3, 3]}",
               x, 2, (double[]){2, 0}, "repeat");
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_tfidf_errors) {
    pardo_status st;
    pardo_type x = test_type(PARDO_I64, 1, (int64_t[]){6}), out;
    const pardo_type *in[1] = {&x};
    static const char *const bad[] = {
        "{\"mode\": \"BM25\", \"min_gram_length\": 1, \"max_gram_length\": 1, \"max_skip_count\": 0, "
        "\"ngram_counts\": [0], \"ngram_indexes\": [0], \"pool_int64s\": [3]}",
        "{\"mode\": \"TF\", \"min_gram_length\": 2, \"max_gram_length\": 1, \"max_skip_count\": 0, "
        "\"ngram_counts\": [0], \"ngram_indexes\": [0], \"pool_int64s\": [3]}",
        "{\"mode\": \"TF\", \"min_gram_length\": 1, \"max_gram_length\": 1, \"max_skip_count\": 0, "
        "\"ngram_counts\": [0], \"ngram_indexes\": [0], \"pool_int64s\": [3, 4]}",
        "{\"mode\": \"TF\", \"min_gram_length\": 1, \"max_gram_length\": 1, \"max_skip_count\": 0, "
        "\"ngram_counts\": [0, 5], \"ngram_indexes\": [0], \"pool_int64s\": [3]}",
        "{\"mode\": \"IDF\", \"min_gram_length\": 1, \"max_gram_length\": 1, \"max_skip_count\": 0, "
        "\"ngram_counts\": [0], \"ngram_indexes\": [1], \"pool_int64s\": [3], \"weights\": [1]}",
        "{\"mode\": \"TF\", \"min_gram_length\": 1, \"max_gram_length\": 1, \"max_skip_count\": 0, "
        "\"ngram_counts\": [0], \"ngram_indexes\": [0]}",
    };
    for (int i = 0; i < 6; i++) {
        ck_assert_msg(test_infer_op("tf_idf_vectorizer", bad[i], 1, in, 1, &out, &st) == PARDO_EINVAL, "case %d", i);
        ck_assert_msg(strstr(st.msg, "attr"), "case %d: %s", i, st.msg);
    }
    x = test_type(PARDO_F32, 1, (int64_t[]){6});
    ck_assert_int_eq(test_infer_op("tf_idf_vectorizer",
                                   "{\"mode\": \"TF\", \"min_gram_length\": 1, \"max_gram_length\": 1, "
                                   "\"max_skip_count\": 0, \"ngram_counts\": [0], \"ngram_indexes\": [0], "
                                   "\"pool_int64s\": [3]}",
                                   1, in, 1, &out, &st),
                     PARDO_ESHAPE);
}
END_TEST

Suite *make_ops_tfidf_suite(void) {
    Suite *s = suite_create("ops_tfidf");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_tfidf_onnx_example);
    tcase_add_test(core, test_tfidf_modes);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_tfidf_errors);
    suite_add_tcase(s, errors);
    return s;
}
