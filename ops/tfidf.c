/* tfidf.c - tf_idf_vectorizer, ONNX's TfIdfVectorizer over integer tokens:
 * X (int32 or int64, [C] or [B, C]: B rows of C tokens) in, the counts of
 * the pool's n-grams in each row out (float32 [K] or [B, K], K = the
 * largest of ngram_indexes + 1).
 *
 * The pool (attr pool_int64s) holds the n-grams level by level: the
 * n-grams of n tokens from offset ngram_counts[n - 1] to the next level's
 * offset (the pool's end for the last level); n-gram number g over all
 * levels in order is counted into column ngram_indexes[g] (a repeated pool
 * n-gram into its first one's). In a row, an n-gram of n in
 * [min_gram_length, max_gram_length] is the tokens at i, i + d, ..., i +
 * (n - 1) d for each start i and each step d in 1 .. max_skip_count + 1
 * (a unigram once, at d 1). Attr mode: "TF" the counts, "IDF" weights[k]
 * (1 without weights) where column k's count is above 0, else 0, "TFIDF"
 * the count times weights[k] (times 1 without). Attr weights (absent or at
 * least K values) per output column, as ONNX's reference reads them.
 *
 * Tokens are compared as the attrs' values, exact for integers up to 2^53.
 * Not differentiable. One thread; nothing is allocated but the output. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn_util.h"
#include "op.h"

static const pardo_dtype int_dtypes[] = {PARDO_I32, PARDO_I64};

static const pardo_arg_def tfidf_in[] = {{"X", "int32 or int64 [C] or [B, C]: the tokens of each row", false, false}};
static const pardo_arg_def tfidf_out[] = {
    {"Y", "float32 [K] or [B, K]: each row's n-gram counts (or weights), K = max(ngram_indexes) + 1", false, false}};
static const pardo_attr_def tfidf_attrs[] = {
    {"mode", PARDO_ATTR_STRING, NULL, "\"TF\" counts, \"IDF\" weights where counted, \"TFIDF\" counts times weights"},
    {"min_gram_length", PARDO_ATTR_INT, NULL, "the shortest n-grams counted (1 or more)"},
    {"max_gram_length", PARDO_ATTR_INT, NULL, "the longest n-grams counted (min_gram_length or more)"},
    {"max_skip_count", PARDO_ATTR_INT, NULL, "the most tokens skipped between an n-gram's tokens (0 or more)"},
    {"ngram_counts", PARDO_ATTR_INTS, NULL, "where each level (1-grams, 2-grams, ...) starts in pool_int64s"},
    {"ngram_indexes", PARDO_ATTR_INTS, NULL, "the output column of each pool n-gram, in pool order"},
    {"pool_int64s", PARDO_ATTR_INTS, NULL, "the n-grams' tokens, level by level"},
    {"weights", PARDO_ATTR_FLOATS, "null", "the weight of each output column (absent: 1)"},
};

enum { TF, IDF, TFIDF };

/* The attrs, checked; the lists borrow the op's values. */
typedef struct tfidf_cfg {
    int mode;
    int64_t min_n, max_n, max_skip, k; // k: output columns
    const pardo_value *counts, *indexes, *pool, *weights; // arrays; weights NULL when absent
} tfidf_cfg;

/* Attr `name` as an array of n values, integers unless `floats`; NULL with st set otherwise. */
static const pardo_value *attr_list(const pardo_op *op, const char *name, bool floats, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, name);
    if (!v || v->kind != PARDO_V_ARRAY) {
        pardo_errorf(st, PARDO_EINVAL, "attr '%s' is required, a list of %s", name, floats ? "numbers" : "integers");
        return NULL;
    }
    for (int i = 0; i < v->n; i++)
        if (v->items[i].kind != PARDO_V_NUMBER || (!floats && !pardo_value_is_integer(&v->items[i]))) {
            pardo_errorf(st, PARDO_EINVAL, "attr '%s' element %d is not %s", name, i,
                         floats ? "a number" : "an integer");
            return NULL;
        }
    return v;
}

static int64_t at(const pardo_value *list, int i) { return (int64_t)list->items[i].number; }

static int tfidf_check(const pardo_op *op, tfidf_cfg *g, pardo_status *st) {
    const char *mode;
    int rc = pardo_attr_string(op, "mode", "", &mode, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "min_gram_length", 0, &g->min_n, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "max_gram_length", 0, &g->max_n, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "max_skip_count", -1, &g->max_skip, st);
    if (rc != PARDO_OK) return rc;
    g->mode = strcmp(mode, "TF") == 0 ? TF : strcmp(mode, "IDF") == 0 ? IDF : strcmp(mode, "TFIDF") == 0 ? TFIDF : -1;
    if (g->mode < 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'mode' is \"%s\", expected TF, IDF or TFIDF", mode);
    if (g->min_n < 1 || g->max_n < g->min_n || g->max_skip < 0)
        return pardo_errorf(st, PARDO_EINVAL, "attrs min_gram_length %lld, max_gram_length %lld, max_skip_count "
                            "%lld: expected 1 <= min <= max and a skip count of 0 or more", (long long)g->min_n,
                            (long long)g->max_n, (long long)g->max_skip);
    if (!(g->counts = attr_list(op, "ngram_counts", false, st)) ||
        !(g->indexes = attr_list(op, "ngram_indexes", false, st)) ||
        !(g->pool = attr_list(op, "pool_int64s", false, st)))
        return st->code;
    g->weights = pardo_attr(op, "weights") ? attr_list(op, "weights", true, st) : NULL;
    if (pardo_attr(op, "weights") && !g->weights) return st->code;
    /* the levels: offsets rising within the pool; every n-gram of them has an index */
    int64_t prev = 0, grams = 0;
    const int levels = g->counts->n;
    for (int l = 0; l < levels; l++) {
        const int64_t start = at(g->counts, l), end = l + 1 < levels ? at(g->counts, l + 1) : g->pool->n;
        if (start < prev || end < start || end > g->pool->n)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'ngram_counts' element %d is %lld: the levels' offsets must "
                                "rise within the pool's %d values", l, (long long)start, g->pool->n);
        prev = start;
        grams += (end - start) / (l + 1);
    }
    if (grams > g->indexes->n)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'ngram_indexes' has %d values for the pool's %lld n-grams",
                            g->indexes->n, (long long)grams);
    g->k = 0;
    for (int i = 0; i < g->indexes->n; i++) {
        if (at(g->indexes, i) < 0)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'ngram_indexes' element %d is %lld, expected 0 or more", i,
                                (long long)at(g->indexes, i));
        if (at(g->indexes, i) + 1 > g->k) g->k = at(g->indexes, i) + 1;
    }
    if (g->weights && g->weights->n < g->k)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'weights' has %d values for %lld output columns", g->weights->n,
                            (long long)g->k);
    return PARDO_OK;
}

static int tfidf_x(const pardo_type *x, pardo_status *st) {
    char s[128];
    int rc = pardo_expect_dtype(x, "input 0 'X'", int_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    if (x->ndim > 2 || (x->ndim == 2 && x->shape[0] == 0))
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' %s, expected [C] or [B, C] with B 1 or more",
                            pardo_shape_str(x->ndim, x->shape, s, sizeof s));
    return PARDO_OK;
}

static int tfidf_infer(pardo_infer_ctx *ctx) {
    tfidf_cfg g;
    const pardo_type *x = ctx->in[0];
    int rc = tfidf_check(ctx->op, &g, ctx->st);
    if (rc == PARDO_OK) rc = tfidf_x(x, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (x->ndim == 2) ctx->out[0] = (pardo_type){.dtype = PARDO_F32, .ndim = 2, .shape = {x->shape[0], g.k}};
    else if (x->ndim >= 0) ctx->out[0] = (pardo_type){.dtype = PARDO_F32, .ndim = 1, .shape = {g.k}};
    else ctx->out[0] = (pardo_type){.dtype = PARDO_F32, .ndim = -1};
    return PARDO_OK;
}

static int64_t token(const pardo_tensor *x, const void *data, int64_t i) {
    return x->dtype == PARDO_I32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
}

/* Counts row r's n-grams (tokens row[0..c)) into y[0..k). */
static void count_row(const tfidf_cfg *g, const pardo_tensor *x, const void *data, int64_t r, int64_t c, float *y) {
    const int levels = g->counts->n;
    int64_t first = 0; /* number of the level's first n-gram over all levels */
    for (int l = 0; l < levels; l++) {
        const int64_t n = l + 1, start = at(g->counts, l), end = l + 1 < levels ? at(g->counts, l + 1) : g->pool->n;
        const int64_t grams = (end - start) / n;
        if (n >= g->min_n && n <= g->max_n)
            for (int64_t d = 1; d <= (n == 1 ? 1 : g->max_skip + 1); d++)
                for (int64_t i = 0; i + (n - 1) * d < c; i++)
                    for (int64_t q = 0; q < grams; q++) {
                        int64_t j = 0;
                        while (j < n && token(x, data, r * c + i + j * d) == at(g->pool, (int)(start + q * n + j))) j++;
                        if (j == n) {
                            y[at(g->indexes, (int)(first + q))] += 1;
                            break; /* a repeat in the pool counts into the first */
                        }
                    }
        first += grams;
    }
}

static int tfidf_cpu(pardo_kernel_ctx *ctx) {
    const pardo_tensor *x = ctx->in[0];
    pardo_type tx = pardo_tensor_type(x);
    tfidf_cfg g;
    int rc = tfidf_check(ctx->op, &g, ctx->st);
    if (rc == PARDO_OK) rc = tfidf_x(&tx, ctx->st);
    if (rc != PARDO_OK) return rc;
    const int64_t rows = x->ndim == 2 ? x->shape[0] : 1, c = x->ndim == 2 ? x->shape[1] : x->numel;
    pardo_tensor *y = pardo_nn_zeros(ctx, 0, PARDO_F32, x->ndim == 2 ? 2 : 1,
                                     x->ndim == 2 ? (int64_t[]){rows, g.k} : (int64_t[]){g.k});
    if (!y) return ctx->st->code;
    float *o = pardo_tensor_data(y);
    const void *data = pardo_tensor_data(x);
    for (int64_t r = 0; r < rows; r++) {
        float *row = o + r * g.k;
        count_row(&g, x, data, r, c, row);
        for (int64_t k = 0; k < g.k && g.mode != TF; k++) {
            const float w = g.weights ? (float)g.weights->items[k].number : 1;
            row[k] = g.mode == IDF ? (row[k] > 0 ? w : 0) : row[k] * w;
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_tf_idf_vectorizer = {
    .type = "tf_idf_vectorizer",
    .doc = "counts of the pool's n-grams (with skips) in each row of integer tokens, as TF, IDF or TFIDF (ONNX "
           "TfIdfVectorizer)",
    .inputs = tfidf_in,
    .n_inputs = 1,
    .outputs = tfidf_out,
    .n_outputs = 1,
    .attrs = tfidf_attrs,
    .n_attrs = 8,
    .infer = tfidf_infer,
    .cpu = tfidf_cpu,
};
