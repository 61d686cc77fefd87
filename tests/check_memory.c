/* check_memory.c - what keeps a training step's memory near its live set:
 * the release plan (which temporaries die after which op), the tensor pool,
 * the executor freeing dead temporaries (same results, less memory, kept
 * vars kept), the backward pass leaving out forward values gradient ops do
 * not read, add_grad with a left-out operand, the optimizer placing each
 * update right after its param's last use, and matmul -> add -> relu chains
 * run as one kernel (fusion_plan.h) with the same bits. */
#include <check.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "op_test_util.h"
#include "pass.h"
#include "exec/fusion_plan.h"
#include "exec/release_plan.h"
#include "exec/tensor_pool.h"
#include "test_util.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

static const char mlp_text[] =
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
static pardo_program *training_program_with(pardo_optimizer_kind optimizer) {
    return test_training_program(mlp_text, "mlp.json", "loss", optimizer, 0.1, 0);
}

static pardo_program *training_program(void) { return training_program_with(PARDO_OPTIMIZER_SGD); }

static const pardo_op *find_op(const pardo_program *p, const char *type, const char *out0) {
    const pardo_block *b = &p->blocks[0];
    for (int i = 0; i < b->n_ops; i++)
        if (strcmp(b->ops[i].type, type) == 0 && (!out0 || strcmp(b->ops[i].out[0], out0) == 0)) return &b->ops[i];
    ck_abort_msg("no %s op writing %s", type, out0 ? out0 : "anything");
    return NULL;
}

static bool released_after(const pardo_release_plan *r, int op, const char *name) {
    for (int k = 0; k < r->count[op]; k++)
        if (strcmp(r->names[r->first[op] + k], name) == 0) return true;
    return false;
}

static int released_total(const pardo_release_plan *r) {
    int n = 0;
    for (int i = 0; i < r->n_ops; i++) n += r->count[i];
    return n;
}

START_TEST(release_plan_frees_after_the_last_reader) {
    pardo_status st;
    pardo_program *p = test_program(mlp_text, "mlp.json");
    pardo_release_plan r;
    ck_assert_int_eq(pardo_release_plan_build(p, NULL, 0, &r, &st), PARDO_OK);
    ck_assert(released_after(&r, 1, "h"));
    ck_assert(released_after(&r, 2, "z"));
    ck_assert(released_after(&r, 3, "a"));
    ck_assert(released_after(&r, 4, "logits"));
    /* feeds, params and the unread output stay */
    ck_assert_int_eq(released_total(&r), 4);
    pardo_release_plan_clear(&r);
    const char *keep[] = {"z", "a"};
    ck_assert_int_eq(pardo_release_plan_build(p, keep, 2, &r, &st), PARDO_OK);
    ck_assert(!released_after(&r, 2, "z") && !released_after(&r, 3, "a"));
    ck_assert_int_eq(released_total(&r), 2);
    pardo_release_plan_clear(&r);
    pardo_program_free(p);

    /* written last: kept (its value is the run's result); tensor_arrays kept (split refills them) */
    p = test_program("{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                     "\"x\": {\"dtype\": \"float32\", \"shape\": [-1], \"role\": \"feed\"},"
                     "\"xs\": {\"dtype\": \"float32\", \"shape\": [-1], \"kind\": \"tensor_array\"}},"
                     "\"ops\": ["
                     "{\"op\": \"add\", \"in\": [\"x\", \"x\"], \"out\": [\"s\"]},"
                     "{\"op\": \"scale\", \"in\": [\"s\"], \"out\": [\"t\"]},"
                     "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
                     "{\"op\": \"split\", \"in\": [\"t\"], \"out\": [\"ts\"], \"attrs\": {\"parts\": 2}},"
                     "{\"op\": \"merge\", \"in\": [\"ts\"], \"out\": [\"m\"], \"attrs\": {\"mode\": \"mean\", "
                     "\"weight_by\": \"xs\"}},"
                     "{\"op\": \"scale\", \"in\": [\"m\"], \"out\": [\"s\"]}]}]}",
                     "last.json");
    ck_assert_int_eq(pardo_release_plan_build(p, NULL, 0, &r, &st), PARDO_OK);
    ck_assert(released_after(&r, 3, "t"));
    ck_assert(released_after(&r, 5, "m"));
    ck_assert_int_eq(released_total(&r), 2); /* not s: op 5 writes it last; not the tensor_arrays xs, ts */
    pardo_release_plan_clear(&r);
    pardo_program_free(p);
}
END_TEST

START_TEST(pool_reuses_by_size) {
    pardo_status st;
    pardo_tensor_pool pool;
    pardo_tensor_pool_init(&pool);
    int64_t s6[] = {2, 3}, s3x2[] = {3, 2}, s4[] = {4};
    pardo_tensor *a = pardo_tensor_new_cpu(PARDO_F32, 2, s6, &st), *shared = pardo_tensor_new_cpu(PARDO_F32, 1, s4, &st);
    pardo_tensor_retain(shared);
    pardo_tensor_pool_put(&pool, a);
    pardo_tensor_pool_put(&pool, shared); /* someone else holds it: released, not kept */
    ck_assert_int_eq(pool.n, 1);
    ck_assert_int_eq(atomic_load(&shared->refs), 1);
    ck_assert_ptr_null(pardo_tensor_pool_take(&pool, PARDO_F32, 1, s4)); /* 16 bytes: none that size */
    pardo_tensor *b = pardo_tensor_pool_take(&pool, PARDO_I32, 2, s3x2); /* 24 bytes: a, reshaped */
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(b->dtype, PARDO_I32);
    ck_assert(b->shape[0] == 3 && b->shape[1] == 2 && b->numel == 6);
    ck_assert_int_eq(pool.n, 0);
    pardo_tensor *arr = pardo_tensor_array_new(PARDO_F32, &st);
    pardo_tensor_pool_put(&pool, arr); /* arrays are not pooled */
    ck_assert_int_eq(pool.n, 0);
    pardo_tensor_pool_put(&pool, b);
    ck_assert_int_eq(pool.n, 1);
    pardo_tensor_pool_clear(&pool);
    pardo_tensor_release(shared);
}
END_TEST

/* An executor for p made with opt, its vars initialised and the n feeds
 * bound (names[i] to feeds[i], which the caller keeps). */
static pardo_executor *executor_with(const pardo_program *p, pardo_exec_options opt, int n, const char *const *names,
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
static void run_steps(pardo_executor *ex, int steps) {
    pardo_status st;
    for (int s = 0; s < steps; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
}

/* A copy of what block 0's var `name` holds after a run. */
static pardo_tensor *fetched_copy(pardo_executor *ex, const char *name) {
    pardo_status st;
    pardo_tensor *t = pardo_executor_fetch(ex, name);
    ck_assert_msg(t, "'%s' has no value", name);
    return pardo_tensor_clone(t, &st);
}

/* How many times needle occurs in text. */
static int occurrences(const char *text, const char *needle) {
    int count = 0;
    for (const char *q = strstr(text, needle); q; q = strstr(q + 1, needle)) count++;
    return count;
}

/* A training executor for p keeping only the loss, its vars initialised and
 * a batch of `rows` random rows of x (labels i % 3) fed. */
static pardo_executor *fed_executor(const pardo_program *p, int nthreads, bool release, int64_t rows) {
    pardo_status st;
    const char *keep[] = {"loss"};
    test_rng r = {(uint64_t)rows};
    int64_t xs[] = {rows, 6}, ys[] = {rows};
    pardo_tensor *xy[2] = {test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1),
                           pardo_tensor_new_cpu(PARDO_I64, 1, ys, &st)};
    for (int64_t i = 0; i < rows; i++) pardo_tensor_set_f64(xy[1], i, (double)(i % 3));
    static const char *const names[] = {"x", "y"};
    const pardo_exec_options opt = {.nthreads = nthreads, .training = true, .release_temps = release, .keep = keep,
                                    .n_keep = 1};
    pardo_executor *ex = executor_with(p, opt, 2, names, xy);
    pardo_tensor_release(xy[0]);
    pardo_tensor_release(xy[1]);
    return ex;
}

/* The optimizers the fusion tests train with, and the MLP's params. */
static const pardo_optimizer_kind optimizer_kinds[] = {PARDO_OPTIMIZER_SGD, PARDO_OPTIMIZER_MOMENTUM,
                                                       PARDO_OPTIMIZER_ADAM};
static const char *const mlp_params[] = {"w1", "b1", "w2"};

/* Asserts that the n tensors of without[] (the ops one by one) and with[]
 * (fused) are bitwise the same, naming `what`; releases them all. */
static void assert_same_bits(pardo_tensor **without, pardo_tensor **with, int n, const char *const *names,
                             const char *what) {
    for (int q = 0; q < n; q++) {
        ck_assert(without[q]->nbytes == with[q]->nbytes);
        ck_assert_msg(memcmp(pardo_tensor_data(without[q]), pardo_tensor_data(with[q]), with[q]->nbytes) == 0,
                      "%s: %s differs", what, names[q]);
        pardo_tensor_release(without[q]);
        pardo_tensor_release(with[q]);
    }
}

/* Runs p for 3 steps on one batch; returns the bytes of tensors the executor
 * still holds (bound or pooled) and copies the loss and w1 out. */
static int64_t train_three_steps(const pardo_program *p, bool release, double *loss, pardo_tensor **w1,
                                 pardo_tensor **released) {
    pardo_status st;
    int64_t before = pardo_tensor_bytes_in_use();
    pardo_executor *ex = fed_executor(p, 1, release, 64);
    int64_t fed = pardo_tensor_bytes_in_use();
    for (int s = 0; s < 3; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    int64_t held = pardo_tensor_bytes_in_use() - fed;
    *loss = pardo_tensor_get_f64(pardo_executor_fetch(ex, "loss"), 0);
    *w1 = pardo_tensor_clone(pardo_executor_fetch(ex, "w1"), &st);
    *released = pardo_executor_fetch(ex, "h");
    pardo_executor_free(ex);
    ck_assert_int_eq(pardo_tensor_bytes_in_use(), before + (int64_t)(*w1)->nbytes); /* all freed but the copy */
    return held;
}

START_TEST(executor_frees_dead_temporaries) {
    pardo_program *p = training_program();
    double loss_all, loss_freed;
    pardo_tensor *w_all, *w_freed, *h_all, *h_freed;
    int64_t all = train_three_steps(p, false, &loss_all, &w_all, &h_all);
    int64_t freed = train_three_steps(p, true, &loss_freed, &w_freed, &h_freed);
    ck_assert(loss_all == loss_freed);
    ck_assert(memcmp(pardo_tensor_data(w_all), pardo_tensor_data(w_freed), w_all->nbytes) == 0);
    ck_assert_ptr_nonnull(h_all);
    ck_assert_ptr_null(h_freed); /* a freed temporary has no value after the run */
    /* h, z, a, logits and their gradients share buffers: far less than one per var */
    ck_assert_msg(freed * 3 < all * 2, "held %lld bytes freeing temporaries, %lld keeping them", (long long)freed,
                  (long long)all);
    pardo_tensor_release(w_all);
    pardo_tensor_release(w_freed);
    pardo_program_free(p);
}
END_TEST

/* The data-parallel graph with temporaries freed: same loss as keeping
 * them, and no heap growth in the steady state (freed tensors come back
 * from the pool; tensor_arrays keep their parts). */
START_TEST(parallel_steady_state_allocates_nothing) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(2, &st) == PARDO_OK, "%s", st.msg);
    pardo_program *p = training_program();
    pardo_pass_options o = pardo_pass_defaults();
    o.parts = 2;
    ck_assert_msg(pardo_pass_multi_cpu(p, &o, &st) == PARDO_OK, "%s", st.msg);
    double loss[2];
    for (int release = 0; release < 2; release++) {
        pardo_executor *ex = fed_executor(p, 2, release, 48);
        for (int s = 0; s < 3; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
        struct mallinfo2 m0 = mallinfo2();
        for (int s = 0; s < 30; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
        struct mallinfo2 m1 = mallinfo2();
        ck_assert_int_eq((long long)(m1.uordblks + m1.hblkhd), (long long)(m0.uordblks + m0.hblkhd));
        loss[release] = pardo_tensor_get_f64(pardo_executor_fetch(ex, "loss"), 0);
        pardo_executor_free(ex);
    }
    ck_assert(loss[0] == loss[1]);
    pardo_program_free(p);
    pardo_thread_pool_shutdown();
}
END_TEST

static void assert_in(const pardo_op *op, int k, const char *name) {
    ck_assert_msg(strcmp(op->in[k], name) == 0, "%s input %d is '%s', expected '%s'", op->type, k, op->in[k], name);
}

START_TEST(backward_leaves_out_unread_forward_values) {
    pardo_program *p = training_program();
    const pardo_op *mg = find_op(p, "matmul_grad", "a@GRAD"); /* fc2: A, B, Y, dY */
    assert_in(mg, 0, "a");
    assert_in(mg, 1, "w2");
    assert_in(mg, 2, "");
    const pardo_op *ag = find_op(p, "add_grad", NULL); /* h fills z: shape from dz; b1 is broadcast: kept */
    assert_in(ag, 0, "");
    assert_in(ag, 1, "b1");
    assert_in(ag, 2, "");
    assert_in(ag, 3, "z@GRAD");
    const pardo_op *rg = find_op(p, "relu_grad", NULL); /* reads Y */
    assert_in(rg, 0, "");
    assert_in(rg, 1, "a");
    pardo_program_free(p);

    /* a broadcast operand keeps its value's shape; mul_grad keeps both operands */
    pardo_status st;
    p = test_program("{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                     "\"u\": {\"dtype\": \"float64\", \"shape\": [1, 3], \"role\": \"param\", \"value\": [1, 2, 3]},"
                     "\"v\": {\"dtype\": \"float64\", \"shape\": [4, 3], \"role\": \"feed\"}},"
                     "\"ops\": [{\"op\": \"add\", \"in\": [\"u\", \"v\"], \"out\": [\"s\"]},"
                     "{\"op\": \"mul\", \"in\": [\"s\", \"v\"], \"out\": [\"q\"]},"
                     "{\"op\": \"reduce_sum\", \"in\": [\"q\"], \"out\": [\"loss\"], \"attrs\": {\"keepdims\": false}}"
                     "]}]}",
                     "bcast.json");
    pardo_pass_options o = pardo_pass_defaults();
    o.loss = "loss";
    ck_assert_msg(pardo_pass_backward(p, &o, &st) == PARDO_OK, "%s", st.msg);
    ag = find_op(p, "add_grad", NULL);
    assert_in(ag, 0, "u"); /* [1, 3] broadcast to [4, 3]: its shape is needed */
    assert_in(ag, 2, "");
    const pardo_op *mu = find_op(p, "mul_grad", NULL);
    assert_in(mu, 0, "s");
    assert_in(mu, 1, "v");
    assert_in(mu, 2, "");
    pardo_program_free(p);
}
END_TEST

START_TEST(add_grad_with_an_operand_left_out) {
    pardo_status st;
    int64_t s23[] = {2, 3}, s3[] = {3};
    pardo_tensor *b = test_tensor_from(PARDO_F64, 1, s3, (const double[]){0, 0, 0}),
                 *dc = test_tensor_from(PARDO_F64, 2, s23, (const double[]){1, 2, 3, 4, 5, 6});
    pardo_tensor *in[4] = {NULL, b, NULL, dc}, *out[2] = {NULL, NULL};
    ck_assert_msg(test_run_op("sub_grad", NULL, 4, in, 2, out, &st) == PARDO_OK, "%s", st.msg);
    ck_assert(out[0]->ndim == 2 && out[0]->shape[0] == 2 && out[0]->shape[1] == 3);
    for (int i = 0; i < 6; i++) ck_assert(pardo_tensor_get_f64(out[0], i) == i + 1); /* dA = dC */
    ck_assert(pardo_tensor_get_f64(out[1], 0) == -5 && pardo_tensor_get_f64(out[1], 2) == -9); /* dB = -sum rows */
    pardo_tensor_release(out[0]);
    pardo_tensor_release(out[1]);
    /* without dC there is no shape for the missing operand */
    pardo_tensor *no_dc[4] = {NULL, b, NULL, NULL};
    ck_assert_int_ne(test_run_op("add_grad", NULL, 4, no_dc, 2, out, &st), PARDO_OK);
    ck_assert_msg(strstr(st.msg, "dC"), "%s", st.msg);
    pardo_tensor_release(b);
    pardo_tensor_release(dc);
}
END_TEST

START_TEST(updates_follow_their_params_last_use) {
    pardo_program *p = training_program();
    const pardo_block *b = &p->blocks[0];
    int updates = 0;
    for (int i = 0; i < b->n_ops; i++) {
        if (strcmp(b->ops[i].type, "sgd") != 0) continue;
        updates++;
        const char *param = b->ops[i].out[0];
        char grad[64];
        snprintf(grad, sizeof grad, "%s@GRAD", param);
        bool touched_before = false;
        for (int j = 0; j < i; j++)
            for (int k = 0; k < b->ops[j].n_out; k++) touched_before |= strcmp(b->ops[j].out[k], grad) == 0;
        ck_assert_msg(touched_before, "update of %s before its gradient", param);
        for (int j = i + 1; j < b->n_ops; j++) {
            for (int k = 0; k < b->ops[j].n_in; k++)
                ck_assert_msg(strcmp(b->ops[j].in[k], param) && strcmp(b->ops[j].in[k], grad),
                              "op %d (%s) reads %s after its update", j, b->ops[j].type, b->ops[j].in[k]);
        }
    }
    ck_assert_int_eq(updates, 3);
    /* not all at the end: w2's update comes before fc1's gradient */
    int first_update = -1, last_other = -1;
    for (int i = 0; i < b->n_ops; i++) {
        bool upd = strcmp(b->ops[i].type, "sgd") == 0;
        if (upd && first_update < 0) first_update = i;
        if (!upd) last_other = i;
    }
    ck_assert_int_lt(first_update, last_other);
    pardo_program_free(p);
}
END_TEST

/* The fusion plan's len at op 0 of block b of the graph text. */
static int fused_len(const char *text, const char *path, int b) {
    pardo_program *p = test_program(text, path);
    pardo_fusion f[8];
    ck_assert_int_le(p->blocks[b].n_ops, 8);
    pardo_fusion_plan(p, b, NULL, 0, f);
    pardo_program_free(p);
    return f[0].len;
}

START_TEST(fusion_plan_finds_private_chains) {
    pardo_program *p = test_program(mlp_text, "mlp.json");
    pardo_fusion f[8];
    pardo_fusion_plan(p, 0, NULL, 0, f);
    ck_assert(f[0].len == 2 && f[0].bias == 1); /* matmul h, add z (bias b1 at input 1), relu a */
    ck_assert_int_eq(f[3].len, 0);              /* logits go to the loss, not to an add */
    const char *keep_z[] = {"z"}, *keep_h[] = {"h"};
    pardo_fusion_plan(p, 0, keep_z, 1, f);
    ck_assert_int_eq(f[0].len, 1); /* z must stay: relu runs on its own */
    pardo_fusion_plan(p, 0, keep_h, 1, f);
    ck_assert_int_eq(f[0].len, 0);
    pardo_program_free(p);

    /* the training graph split into parts: the chain inside the parallel_do block fuses */
    pardo_status st;
    p = training_program();
    pardo_pass_options o = pardo_pass_defaults();
    o.parts = 2;
    ck_assert_msg(pardo_pass_multi_cpu(p, &o, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(p->n_blocks, 2);
    pardo_fusion g[64];
    ck_assert_int_le(p->blocks[1].n_ops, 64);
    pardo_fusion_plan(p, 1, NULL, 0, g);
    int fused = 0, fused_grads = 0;
    for (int i = 0; i < p->blocks[1].n_ops; i++) {
        const bool mm = strcmp(p->blocks[1].ops[i].type, "matmul") == 0;
        fused += mm && g[i].len == 2;
        /* backward: matmul_grad -> relu_grad -> add_grad (the bias's), one per hidden layer */
        if (!mm && g[i].len) {
            ck_assert_str_eq(p->blocks[1].ops[i].type, "matmul_grad");
            ck_assert_str_eq(p->blocks[1].ops[i + 1].type, "relu_grad");
            ck_assert_int_eq(g[i].len, 2);
            ck_assert_str_eq(p->blocks[1].ops[i + 2].type, "add_grad");
            ck_assert_str_eq(p->blocks[1].ops[i + 2].in[g[i].bias], "b1");
            fused_grads++;
        }
    }
    ck_assert_int_eq(fused, 1);
    ck_assert_int_eq(fused_grads, 1);
    pardo_program_free(p);

    /* a part's intermediate that parts_out hands to block 0 is not private: no fusion there */
    ck_assert_int_eq(fused_len("{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                     "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 2], \"role\": \"feed\"},"
                     "\"w\": {\"dtype\": \"float32\", \"shape\": [2, 2], \"role\": \"param\", \"value\": [1, 2, 3, 4]},"
                     "\"b\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"param\", \"value\": [1, 2]},"
                     "\"xs\": {\"dtype\": \"float32\", \"shape\": [-1, 2], \"kind\": \"tensor_array\"}},"
                     "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
                     "{\"op\": \"parallel_do\", \"in\": [\"xs\", \"w\", \"b\"], \"out\": [\"hs\", \"as\"],"
                     " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"h\": \"hs\", \"a\": \"as\"}}}]},"
                     "{\"parent\": 0, \"vars\": {}, \"ops\": ["
                     "{\"op\": \"matmul\", \"in\": [\"xp\", \"w\"], \"out\": [\"h\"]},"
                     "{\"op\": \"add\", \"in\": [\"h\", \"b\"], \"out\": [\"z\"]},"
                     "{\"op\": \"relu\", \"in\": [\"z\"], \"out\": [\"a\"]}]}]}",
                     "parts.json", 1),
                     0);

    /* an attr that names the intermediate (here merge's mode "sum", a var name too): no fusion */
    ck_assert_int_eq(fused_len("{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                     "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 2], \"role\": \"feed\"},"
                     "\"w\": {\"dtype\": \"float32\", \"shape\": [2, 2], \"role\": \"param\", \"value\": [1, 2, 3, 4]},"
                     "\"b\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"param\", \"value\": [1, 2]}},"
                     "\"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"sum\"]},"
                     "{\"op\": \"add\", \"in\": [\"sum\", \"b\"], \"out\": [\"z\"]},"
                     "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
                     "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"m\"], \"attrs\": {\"mode\": \"sum\"}}]}]}",
                     "named.json", 0),
                     0);
}
END_TEST

/* A bias that is not a [N] (here [1, N], which add broadcasts just as well)
 * does not fit the epilogue: the executor runs the ops one by one, and the
 * result is the same either way. */
START_TEST(fused_chain_falls_back_when_the_bias_does_not_fit) {
    for (int bias2d = 0; bias2d < 2; bias2d++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                 "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 3], \"role\": \"feed\"},"
                 "\"w\": {\"dtype\": \"float32\", \"shape\": [3, 4], \"role\": \"param\", \"init\": "
                 "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 5}},"
                 "\"b\": {\"dtype\": \"float32\", \"shape\": %s, \"role\": \"param\", \"value\": [0.5, -0.5, 1, -1]}},"
                 "\"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
                 "{\"op\": \"add\", \"in\": [\"b\", \"h\"], \"out\": [\"z\"]},"
                 "{\"op\": \"relu\", \"in\": [\"z\"], \"out\": [\"a\"]}]}]}",
                 bias2d ? "[1, 4]" : "[4]");
        pardo_program *p = test_program(text, "bias.json");
        pardo_fusion f[3];
        pardo_fusion_plan(p, 0, NULL, 0, f);
        ck_assert(f[0].len == 2 && f[0].bias == 0);
        test_rng r = {6};
        int64_t xs[] = {37, 3};
        pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -2, 2), *got[2];
        for (int release = 0; release < 2; release++) {
            const char *keep[] = {"a"}, *const names[] = {"x"};
            pardo_executor *ex = executor_with(
                p, (pardo_exec_options){.nthreads = 1, .release_temps = release, .keep = keep, .n_keep = 1}, 1,
                names, &x);
            run_steps(ex, 2);
            got[release] = fetched_copy(ex, "a");
            if (release) ck_assert_ptr_null(pardo_executor_fetch(ex, "h"));
            pardo_executor_free(ex);
        }
        ck_assert(got[0]->numel == 37 * 4);
        static const char *const outs[] = {"a"};
        assert_same_bits(&got[0], &got[1], 1, outs, bias2d ? "bias [1, N]" : "bias [N]");
        pardo_tensor_release(x);
        pardo_program_free(p);
    }
}
END_TEST

/* merge -> update fused (the update merges its gradient tile by tile):
 * planned for every param's gradient, and the params come out bitwise as
 * with the merge run on its own, for sgd, momentum and adam, on one thread
 * and on two (where the merges and updates run as parallel stages). */
START_TEST(merge_update_fusion_keeps_the_bits) {
    pardo_status st;
    for (int k = 0; k < 3; k++) {
        pardo_program *p = training_program_with(optimizer_kinds[k]);
        pardo_pass_options o = pardo_pass_defaults();
        o.parts = 2;
        ck_assert_msg(pardo_pass_multi_cpu(p, &o, &st) == PARDO_OK, "%s", st.msg);
        pardo_fusion f[64];
        const pardo_block *b0 = &p->blocks[0];
        ck_assert_int_le(b0->n_ops, 64);
        pardo_fusion_plan(p, 0, NULL, 0, f);
        int fused = 0;
        for (int i = 0; i < b0->n_ops; i++)
            if (f[i].update) {
                fused++;
                ck_assert_str_eq(b0->ops[i].type, "merge");
                ck_assert_int_eq(f[f[i].update - 1].merge, i + 1);
            }
        ck_assert_int_eq(fused, 3); /* the loss's merge is fetched, not fused */
        for (int threads = 1; threads <= 2; threads++) {
            if (pardo_thread_pool_started() && pardo_thread_pool_size() != threads) pardo_thread_pool_shutdown();
            ck_assert_msg(pardo_thread_pool_configure(threads, &st) == PARDO_OK, "%s", st.msg);
            pardo_tensor *got[2][3];
            for (int release = 0; release < 2; release++) {
                pardo_executor *ex = fed_executor(p, threads, release, 40);
                run_steps(ex, 4);
                for (int q = 0; q < 3; q++) got[release][q] = fetched_copy(ex, mlp_params[q]);
                if (release) ck_assert_ptr_null(pardo_executor_fetch(ex, "w1@GRAD")); /* never merged on its own */
                pardo_executor_free(ex);
            }
            char what[64];
            snprintf(what, sizeof what, "optimizer %d, %d threads", k, threads);
            assert_same_bits(got[0], got[1], 3, mlp_params, what);
        }
        pardo_program_free(p);
    }
    pardo_thread_pool_shutdown();
}
END_TEST

/* The backward pass of the plain graph: matmul_grad -> relu_grad ->
 * add_grad (the bias's gradient) fuses, relu_grad hoisted over the update
 * placed after w2's last use; the params come out bitwise as with the ops
 * run one by one, for sgd, momentum and adam, and the fused ops keep one
 * trace event per run. An op between them that writes what relu_grad reads
 * keeps the chain apart. */
START_TEST(backward_relu_chain_fuses_and_keeps_the_bits) {
    pardo_status st;
    for (int k = 0; k < 3; k++) {
        pardo_program *p = training_program_with(optimizer_kinds[k]);
        const pardo_block *b0 = &p->blocks[0];
        pardo_fusion f[64];
        ck_assert_int_le(b0->n_ops, 64);
        pardo_fusion_plan(p, 0, NULL, 0, f);
        int chains = 0;
        for (int i = 0; i < b0->n_ops; i++) {
            if (strcmp(b0->ops[i].type, "matmul_grad") || !f[i].len) continue;
            chains++;
            ck_assert_int_eq(f[i].len, 2);
            ck_assert_str_eq(b0->ops[f[i].follow[0]].type, "relu_grad");
            ck_assert_str_eq(b0->ops[f[i].follow[1]].type, "add_grad");
            ck_assert_str_eq(b0->ops[f[i].follow[1]].in[f[i].bias], "b1");
            ck_assert_int_gt(f[i].follow[0], i + 1); /* w2's update stands between */
            ck_assert_int_eq(b0->ops[i + 1].role, PARDO_OP_OPTIMIZE);
        }
        ck_assert_int_eq(chains, 1);
        pardo_tensor *got[2][3];
        for (int release = 0; release < 2; release++) {
            pardo_executor *ex = fed_executor(p, 1, release, 37);
            if (release) ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
            run_steps(ex, 3);
            if (release) {
                pardo_trace_stop();
                char *json = NULL;
                size_t n = 0;
                ck_assert_int_eq(pardo_trace_json(NULL, &json, &n, &st), PARDO_OK);
                static const char *const ops[] = {"\"op\":\"relu_grad\"", "\"op\":\"add_grad\""};
                for (int q = 0; q < 2; q++)
                    ck_assert_msg(occurrences(json, ops[q]) == 3, "%s: %d events", ops[q], occurrences(json, ops[q]));
                free(json);
                pardo_trace_reset();
                ck_assert_ptr_null(pardo_executor_fetch(ex, "a@GRAD")); /* dA never stored */
            }
            for (int q = 0; q < 3; q++) got[release][q] = fetched_copy(ex, mlp_params[q]);
            pardo_executor_free(ex);
        }
        char what[32];
        snprintf(what, sizeof what, "optimizer %d", k);
        assert_same_bits(got[0], got[1], 3, mlp_params, what);
        pardo_program_free(p);
    }

    /* an op between matmul_grad and relu_grad that writes relu_grad's Y: relu_grad cannot move up */
    pardo_program *p = training_program();
    pardo_block *b0 = &p->blocks[0];
    int g = -1, r = -1;
    for (int i = 0; i < b0->n_ops; i++) {
        if (strcmp(b0->ops[i].type, "matmul_grad") == 0 && strcmp(b0->ops[i].out[0], "a@GRAD") == 0) g = i;
        if (strcmp(b0->ops[i].type, "relu_grad") == 0) r = i;
    }
    ck_assert(g >= 0 && r > g + 1);
    pardo_op *between = &b0->ops[g + 1]; /* the update: make it write relu_grad's Y instead of the param */
    char *was = between->out[0];
    between->out[0] = b0->ops[r].in[1];
    pardo_fusion f[64];
    pardo_fusion_plan(p, 0, NULL, 0, f);
    ck_assert_int_eq(f[g].len, 0);
    between->out[0] = was;
    pardo_fusion_plan(p, 0, NULL, 0, f);
    ck_assert_int_eq(f[g].len, 2);
    pardo_program_free(p);
}
END_TEST

/* matmul_grad -> relu_grad written by hand: fused for matrices; with a
 * batch dim (dA summed over batches) the mask does not fit an epilogue and
 * the two ops run one by one. The gradient is the same either way. */
START_TEST(backward_relu_chain_falls_back_with_batch_dims) {
    for (int batched = 0; batched < 2; batched++) {
        char text[1400];
        snprintf(text, sizeof text,
                 "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                 "\"x\": {\"dtype\": \"float32\", \"shape\": %s, \"role\": \"feed\"},"
                 "\"dy\": {\"dtype\": \"float32\", \"shape\": %s, \"role\": \"feed\"},"
                 "\"w\": {\"dtype\": \"float32\", \"shape\": [4, 3], \"role\": \"param\", \"init\": "
                 "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}}},"
                 "\"ops\": [{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"a\"]},"
                 "{\"op\": \"matmul_grad\", \"in\": [\"a\", \"w\", \"\", \"dy\"], \"out\": [\"da\", \"dw\"]},"
                 "{\"op\": \"relu_grad\", \"in\": [\"\", \"a\", \"da\"], \"out\": [\"dx\"]}]}]}",
                 batched ? "[2, -1, 4]" : "[-1, 4]", batched ? "[2, -1, 3]" : "[-1, 3]");
        pardo_program *p = test_program(text, "chain.json");
        pardo_fusion f[3];
        pardo_fusion_plan(p, 0, NULL, 0, f);
        ck_assert(f[1].len == 1 && f[1].follow[0] == 2);
        test_rng r = {9};
        int64_t xs[] = {2, 29, 4}, ys[] = {2, 29, 3};
        const int nd = batched ? 3 : 2;
        pardo_tensor *x = test_tensor_random(&r, PARDO_F32, nd, batched ? xs : xs + 1, -1, 1),
                     *dy = test_tensor_random(&r, PARDO_F32, nd, batched ? ys : ys + 1, -1, 1), *got[2][2];
        static const char *const outs[] = {"dx", "dw"}, *const names[] = {"x", "dy"};
        pardo_tensor *const feeds[] = {x, dy};
        for (int release = 0; release < 2; release++) {
            pardo_executor *ex = executor_with(
                p, (pardo_exec_options){.nthreads = 1, .release_temps = release, .keep = outs, .n_keep = 2}, 2,
                names, feeds);
            run_steps(ex, 2);
            for (int q = 0; q < 2; q++) got[release][q] = fetched_copy(ex, outs[q]);
            if (release && !batched) ck_assert_ptr_null(pardo_executor_fetch(ex, "da")); /* fused: never stored */
            pardo_executor_free(ex);
        }
        assert_same_bits(got[0], got[1], 2, outs, batched ? "batched" : "matrices");
        pardo_tensor_release(x);
        pardo_tensor_release(dy);
        pardo_program_free(p);
    }
}
END_TEST

/* y = x w and z = y c (w a param, c a constant), and u = x f with f a feed:
 * the executor keeps w and c packed from run to run (ops/gemm.h,
 * pardo_gemm_packed), never f. Each run matches a naive loop, also after w
 * is written between runs through pardo_tensor_set_f64 and through
 * pardo_tensor_mutable_cpu, and after the caller writes the fed tensor in
 * place. */
static void naive_mm(const pardo_tensor *a, const pardo_tensor *b, double *out) {
    const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t q = 0; q < k; q++)
                acc += pardo_tensor_get_f64(a, i * k + q) * pardo_tensor_get_f64(b, q * n + j);
            out[i * n + j] = acc;
        }
}

static void expect_products(pardo_executor *ex) {
    pardo_tensor *x = pardo_executor_fetch(ex, "x"), *w = pardo_executor_fetch(ex, "w"),
                 *c = pardo_executor_fetch(ex, "c"), *f = pardo_executor_fetch(ex, "f");
    const pardo_tensor *y = pardo_executor_fetch(ex, "y"), *z = pardo_executor_fetch(ex, "z"),
                       *u = pardo_executor_fetch(ex, "u");
    double want_y[70 * 40], want_z[70 * 8], want_u[70 * 40];
    naive_mm(x, w, want_y);
    naive_mm(y, c, want_z);
    naive_mm(x, f, want_u);
    for (int64_t i = 0; i < y->numel; i++) ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i), want_y[i], 1e-9);
    for (int64_t i = 0; i < z->numel; i++) ck_assert_double_eq_tol(pardo_tensor_get_f64(z, i), want_z[i], 1e-9);
    for (int64_t i = 0; i < u->numel; i++) ck_assert_double_eq_tol(pardo_tensor_get_f64(u, i), want_u[i], 1e-9);
}

START_TEST(kept_weights_follow_their_writes) {
    pardo_status st;
    char values[40 * 8 * 8], text[4096];
    size_t at = 0;
    for (int i = 0; i < 40 * 8; i++)
        at += (size_t)snprintf(values + at, sizeof values - at, "%s%d", i ? "," : "", i % 7 - 3);
    snprintf(text, sizeof text,
             "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
             "\"x\": {\"dtype\": \"float64\", \"shape\": [-1, 50], \"role\": \"feed\"},"
             "\"f\": {\"dtype\": \"float64\", \"shape\": [50, 40], \"role\": \"feed\"},"
             "\"w\": {\"dtype\": \"float64\", \"shape\": [50, 40], \"role\": \"param\", \"init\": "
             "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 4}},"
             "\"c\": {\"dtype\": \"float64\", \"shape\": [40, 8], \"value\": [%s]}},"
             "\"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"y\"]},"
             "{\"op\": \"matmul\", \"in\": [\"y\", \"c\"], \"out\": [\"z\"]},"
             "{\"op\": \"matmul\", \"in\": [\"x\", \"f\"], \"out\": [\"u\"]}]}]}",
             values);
    pardo_program *p = test_program(text, "kept.json");
    for (int threads = 1; threads <= 2; threads++) {
        if (pardo_thread_pool_started() && pardo_thread_pool_size() != threads) pardo_thread_pool_shutdown();
        ck_assert_msg(pardo_thread_pool_configure(threads, &st) == PARDO_OK, "%s", st.msg);
        test_rng r = {21};
        int64_t xs[] = {70, 50}, fs[] = {50, 40};
        pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1),
                     *f = test_tensor_random(&r, PARDO_F64, 2, fs, -1, 1);
        static const char *const names[] = {"x", "f"};
        pardo_tensor *const feeds[] = {x, f};
        pardo_executor *ex = executor_with(p, (pardo_exec_options){.nthreads = threads}, 2, names, feeds);
        for (int s = 0; s < 3; s++) { /* the second run keeps w and c, the third reads them */
            ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
            expect_products(ex);
        }
        pardo_tensor *w = pardo_executor_fetch(ex, "w");
        for (int64_t i = 0; i < w->numel; i += 3) pardo_tensor_set_f64(w, i, 2.0 - pardo_tensor_get_f64(w, i));
        for (int s = 0; s < 3; s++) {
            ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
            expect_products(ex);
        }
        double *wd = pardo_tensor_mutable_cpu(w, &st);
        for (int64_t i = 0; i < w->numel; i += 5) wd[i] = -wd[i];
        double *fd = pardo_tensor_data(f); /* the caller's own tensor, written in place */
        for (int64_t i = 0; i < f->numel; i += 2) fd[i] = 3 * fd[i];
        for (int s = 0; s < 2; s++) {
            ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
            expect_products(ex);
        }
        pardo_tensor_release(x);
        pardo_tensor_release(f);
        pardo_executor_free(ex);
    }
    pardo_thread_pool_shutdown();
    pardo_program_free(p);
}
END_TEST

/* Ops that ran inside another's kernel still have their trace event (one per
 * op run), of zero length. */
START_TEST(fused_ops_keep_their_trace_events) {
    pardo_status st;
    pardo_program *p = test_program(mlp_text, "mlp.json");
    pardo_executor *ex = fed_executor(p, 1, true, 5);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    run_steps(ex, 2);
    pardo_trace_stop();
    char *json = NULL;
    size_t n = 0;
    ck_assert_int_eq(pardo_trace_json(NULL, &json, &n, &st), PARDO_OK);
    static const char *const ops[] = {"\"op\":\"matmul\"", "\"op\":\"add\"", "\"op\":\"relu\""};
    for (int k = 0; k < 3; k++)
        ck_assert_msg(occurrences(json, ops[k]) == (k == 0 ? 4 : 2), "%s: %d events", ops[k],
                      occurrences(json, ops[k]));
    free(json);
    pardo_trace_reset();
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* A float32 merge of parts fused into the sgd that reads it (one pass,
 * no tile: sgd_merged_f32) for a plain mean (over 2 and 4 parts: times the
 * exact inverse; over 3: a divide), a sum and a weighted mean of unequal
 * parts, and with an empty part (weight 0, its mean over no rows NaN:
 * skipped, as the merge skips it): the same param as the two ops one by
 * one. 37 elements: whole lanes and a tail. */
START_TEST(merge_update_fusion_without_weights) {
    static const struct {
        const char *mode;
        bool weighted; // weight_by the parts' rows
        int64_t rows;
        int parts;
    } cases[] = {{"mean", false, 5, 2}, {"sum", false, 5, 2}, {"mean", true, 5, 2},
                 {"mean", true, 1, 2},  {"mean", false, 6, 3}, {"mean", false, 8, 4}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const bool weighted = cases[c].weighted;
        char json[2048];
        snprintf(json, sizeof json,
                 "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                 "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 37], \"role\": \"feed\"},"
                 "\"w\": {\"dtype\": \"float32\", \"shape\": [37], \"role\": \"param\","
                 " \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}},"
                 "\"lr\": {\"dtype\": \"float32\", \"shape\": [], \"value\": [0.1]},"
                 "\"xs\": {\"dtype\": \"float32\", \"shape\": [-1, 37], \"kind\": \"tensor_array\"}},"
                 "\"ops\": [{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": %d}},"
                 "{\"op\": \"parallel_do\", \"in\": [\"xs\", \"w\"], \"out\": [\"gs\"],"
                 " \"attrs\": {\"block\": 1, \"parts_in\": {\"xp\": \"xs\"}, \"parts_out\": {\"g\": \"gs\"}}},"
                 "{\"op\": \"merge\", \"in\": %s, \"out\": [\"gm\"], \"attrs\": {\"mode\": \"%s\"%s}},"
                 "{\"op\": \"sgd\", \"in\": [\"w\", \"gm\", \"lr\"], \"out\": [\"w\"], \"role\": \"optimize\"}]},"
                 "{\"parent\": 0, \"vars\": {}, \"ops\": ["
                 "{\"op\": \"mul\", \"in\": [\"xp\", \"w\"], \"out\": [\"h\"]},"
                 "{\"op\": \"reduce_mean\", \"in\": [\"h\"], \"out\": [\"g\"], "
                 "\"attrs\": {\"axes\": [0], \"keepdims\": false}}]}]}",
                 cases[c].parts, weighted ? "[\"gs\", \"xs\"]" : "[\"gs\"]", cases[c].mode,
                 weighted ? ", \"weight_by\": \"xs\"" : "");
        pardo_program *p = test_program(json, "merged.json");
        pardo_fusion f[4];
        pardo_fusion_plan(p, 0, NULL, 0, f);
        ck_assert(f[2].update == 4 && f[3].merge == 3);
        int64_t xs[] = {cases[c].rows, 37};
        test_rng r = {12};
        pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1), *got[2];
        static const char *const names[] = {"x"}, *const params[] = {"w"};
        for (int release = 0; release < 2; release++) {
            pardo_executor *ex =
                executor_with(p, (pardo_exec_options){.nthreads = 1, .release_temps = release}, 1, names, &x);
            run_steps(ex, 3);
            got[release] = fetched_copy(ex, "w");
            pardo_executor_free(ex);
        }
        pardo_executor *fresh = executor_with(p, (pardo_exec_options){.nthreads = 1}, 1, names, &x);
        pardo_tensor *w0 = fetched_copy(fresh, "w");
        for (int64_t i = 0; i < 37; i++) /* it did update, every element */
            ck_assert(pardo_tensor_get_f64(got[1], i) != pardo_tensor_get_f64(w0, i));
        char what[64];
        snprintf(what, sizeof what, "%s%s, %lld rows in %d parts", cases[c].mode, weighted ? " weighted" : "",
                 (long long)cases[c].rows, cases[c].parts);
        assert_same_bits(&got[0], &got[1], 1, params, what); /* releases got */
        pardo_tensor_release(w0);
        pardo_executor_free(fresh);
        pardo_tensor_release(x);
        pardo_program_free(p);
    }
}
END_TEST

Suite *make_memory_suite(void) {
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, release_plan_frees_after_the_last_reader);
    tcase_add_test(tc, pool_reuses_by_size);
    tcase_add_test(tc, executor_frees_dead_temporaries);
    tcase_add_test(tc, parallel_steady_state_allocates_nothing);
    tcase_add_test(tc, backward_leaves_out_unread_forward_values);
    tcase_add_test(tc, add_grad_with_an_operand_left_out);
    tcase_add_test(tc, updates_follow_their_params_last_use);
    tcase_add_test(tc, fusion_plan_finds_private_chains);
    tcase_add_test(tc, fused_chain_falls_back_when_the_bias_does_not_fit);
    tcase_add_test(tc, merge_update_fusion_keeps_the_bits);
    tcase_add_test(tc, merge_update_fusion_without_weights);
    tcase_add_test(tc, backward_relu_chain_fuses_and_keeps_the_bits);
    tcase_add_test(tc, backward_relu_chain_falls_back_with_batch_dims);
    tcase_add_test(tc, kept_weights_follow_their_writes);
    tcase_add_test(tc, fused_ops_keep_their_trace_events);
    suite_add_tcase(s, tc);
    return s;
}
