/* mlp_test_util.c - the small MLP the memory and fusion suites train, and
 * helpers to run it (see mlp_test_util.h). */
#include <check.h>
#include <string.h>

#include "graph_test_util.h"
#include "mlp_test_util.h"
#include "test_util.h"

const char test_mlp_text[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 6], \"role\": \"feed\"},"
    "\"y\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"},"
    "\"w1\": {\"dtype\": \"float64\", \"shape\": [6, 8], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", "
    "\"low\": -1, \"high\": 1, \"seed\": 1}},"
    "\"b1\": {\"dtype\": \"float64\", \"shape\": [8], \"role\": \"param\", \"value\": [0.1, -0.1, 0.2, 0, 0, 0.3, 0, 0]},"
    "\"w2\": {\"dtype\": \"float64\", \"shape\": [8, 3], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", "
    "\"low\": -1, \"high\": 1, \"seed\": 2}}},"
    TEST_MLP_OPS "}]}";

/* The MLP with gradients and an optimizer appended, as `pardo transpile`
 * does before its parallel rewrite. */
pardo_program *test_mlp_training_with(pardo_optimizer_kind optimizer) {
    return test_training_program(test_mlp_text, "mlp.json", "loss", optimizer, 0.1, 0);
}

pardo_program *test_mlp_training(void) { return test_mlp_training_with(PARDO_OPTIMIZER_SGD); }

const pardo_op *test_find_op(const pardo_program *p, const char *type, const char *out0) {
    const pardo_block *b = &p->blocks[0];
    for (int i = 0; i < b->n_ops; i++)
        if (strcmp(b->ops[i].type, type) == 0 && (!out0 || strcmp(b->ops[i].out[0], out0) == 0)) return &b->ops[i];
    ck_abort_msg("no %s op writing %s", type, out0 ? out0 : "anything");
    return NULL;
}

/* An executor for p made with opt, its vars initialised and the n feeds
 * bound (names[i] to feeds[i], which the caller keeps). */
pardo_executor *test_executor_with(const pardo_program *p, pardo_exec_options opt, int n, const char *const *names,
                                     pardo_tensor *const *feeds) {
    pardo_status st;
    pardo_executor *ex = NULL;
    ck_assert_msg(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "%s", st.msg);
    for (int i = 0; i < n; i++)
        ck_assert_msg(pardo_executor_feed(ex, names[i], feeds[i], "test", &st) == PARDO_OK, "%s", st.msg);
    return ex;
}

/* Runs ex `steps` times. */
void test_run_steps(pardo_executor *ex, int steps) {
    pardo_status st;
    for (int s = 0; s < steps; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
}

/* A copy of what block 0's var `name` holds after a run. */
pardo_tensor *test_fetched_copy(pardo_executor *ex, const char *name) {
    pardo_status st;
    pardo_tensor *t = pardo_executor_fetch(ex, name);
    ck_assert_msg(t, "'%s' has no value", name);
    return pardo_tensor_clone(t, &st);
}

/* How many times needle occurs in text. */
int test_occurrences(const char *text, const char *needle) {
    int count = 0;
    for (const char *q = strstr(text, needle); q; q = strstr(q + 1, needle)) count++;
    return count;
}

/* A training executor for p keeping only the loss, its vars initialised and
 * a batch of `rows` random rows of x (labels i % 3) fed. */
pardo_executor *test_fed_mlp_executor(const pardo_program *p, int nthreads, bool release, int64_t rows) {
    pardo_status st;
    const char *keep[] = {"loss"};
    test_rng r = {(uint64_t)rows};
    int64_t xs[] = {rows, 6}, ys[] = {rows};
    pardo_tensor *xy[2] = {test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1),
                           pardo_tensor_new_cpu(PARDO_I64, 1, ys, &st)};
    for (int64_t i = 0; i < rows; i++) pardo_tensor_set_f64(xy[1], i, (double)(i % 3));
    const char *const names[] = {"x", "y"};
    const pardo_exec_options opt = {.nthreads = nthreads, .training = true, .release_temps = release, .keep = keep,
                                    .n_keep = 1};
    pardo_executor *ex = test_executor_with(p, opt, 2, names, xy);
    pardo_tensor_release(xy[0]);
    pardo_tensor_release(xy[1]);
    return ex;
}

/* Asserts that the n tensors of without[] (the ops one by one) and with[]
 * (fused) are bitwise the same, naming `what`; releases them all. */
void test_assert_same_bits(pardo_tensor **without, pardo_tensor **with, int n, const char *const *names,
                             const char *what) {
    for (int q = 0; q < n; q++) {
        ck_assert(without[q]->nbytes == with[q]->nbytes);
        ck_assert_msg(memcmp(pardo_tensor_data(without[q]), pardo_tensor_data(with[q]), with[q]->nbytes) == 0,
                      "%s: %s differs", what, names[q]);
        pardo_tensor_release(without[q]);
        pardo_tensor_release(with[q]);
    }
}

