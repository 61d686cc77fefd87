/* graph_test_util.h - building checked programs and executors from JSON
 * text inside tests. */
#ifndef PARDO_GRAPH_TEST_UTIL_H
#define PARDO_GRAPH_TEST_UTIL_H

#include "exec/executor.h"
#include "core/graph.h"
#include "pass.h"

/* The ops of block 0 of a one-hidden-layer MLP as JSON text to embed in a
 * graph whose vars are x, y (labels), w1, b1, w2: h = x w1, z = h + b1,
 * a = relu(z), logits = a w2, loss = softmax_cross_entropy(logits, y). */
#define TEST_MLP_OPS \
    "\"ops\": [" \
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w1\"], \"out\": [\"h\"]}," \
    "{\"op\": \"add\", \"in\": [\"h\", \"b1\"], \"out\": [\"z\"]}," \
    "{\"op\": \"relu\", \"in\": [\"z\"], \"out\": [\"a\"]}," \
    "{\"op\": \"matmul\", \"in\": [\"a\", \"w2\"], \"out\": [\"logits\"]}," \
    "{\"op\": \"softmax_cross_entropy\", \"in\": [\"logits\", \"y\"], \"out\": [\"loss\"]}" \
    "]"

/* Parses text as the graph file `path` and runs the check passes; fails the
 * test on error. The caller frees with pardo_program_free. */
pardo_program *test_program(const char *text, const char *path);

/* Parses and checks text; returns the status code and leaves the message in
 * st (for error tests). *out (may be NULL) gets the program on success. */
int test_program_status(const char *text, const char *path, pardo_program **out, pardo_status *st);

/* test_program, then gradients of `loss` and the optimizer appended
 * (learning rate lr), then with parts > 0 the multi-CPU rewrite: as
 * `pardo transpile --backward loss --optimizer ...` does. */
pardo_program *test_training_program(const char *text, const char *path, const char *loss,
                                     pardo_optimizer_kind optimizer, double lr, int parts);

/* A CPU executor for p with vars initialised (no checkpoint); fails the test on error. */
pardo_executor *test_executor(const pardo_program *p, int nthreads);

/* pardo_executor_feed of t as var `name` (t retained by the executor), pardo_executor_run, and
 * pardo_executor_fetch (borrowed); each fails the test on error (fetch: on no value). */
void test_feed(pardo_executor *ex, const char *name, pardo_tensor *t);
void test_run(pardo_executor *ex);
pardo_tensor *test_fetch(pardo_executor *ex, const char *name);

#endif
