/* check_memory.c - what keeps a training step's memory near its live set:
 * the release plan (which temporaries die after which op), the tensor pool,
 * the executor freeing dead temporaries (same results, less memory, kept
 * vars kept), the backward pass leaving out forward values gradient ops do
 * not read, add_grad with a left-out operand, the optimizer placing each
 * update right after its param's last use, and matmul -> add -> relu chains
 * run as one kernel (fusion_plan.h) with the same bits. */
#include <check.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "op_test_util.h"
#include "pass.h"
#include "mlp_test_util.h"
#include "exec/release_plan.h"
#include "exec/tensor_pool.h"
#include "test_util.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

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
    pardo_program *p = test_program(test_mlp_text, "mlp.json");
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

typedef struct pool_put_job {
    pardo_tensor_pool *pool;
    pardo_tensor *t;
} pool_put_job;

static void *put_from_another_thread(void *arg) {
    pool_put_job *j = arg;
    pardo_tensor_pool_put(j->pool, j->t);
    return NULL;
}

/* Of two free tensors of the right size, a thread takes the one it put
 * itself, even when another thread put one more recently (that one's lines
 * sit in the other core's cache); with none of its own it takes the other. */
START_TEST(pool_prefers_the_takers_own_tensors) {
    pardo_status st;
    pardo_tensor_pool pool;
    pardo_tensor_pool_init(&pool);
    pool.shared = true;
    int64_t s8[] = {8};
    pardo_tensor *mine = pardo_tensor_new_cpu(PARDO_F32, 1, s8, &st), *theirs = pardo_tensor_new_cpu(PARDO_F32, 1, s8, &st);
    pardo_tensor_pool_put(&pool, mine);
    pool_put_job j = {&pool, theirs};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, put_from_another_thread, &j), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(pool.n, 2);
    ck_assert_ptr_eq(pardo_tensor_pool_take(&pool, PARDO_F32, 1, s8), mine);
    ck_assert_ptr_eq(pardo_tensor_pool_take(&pool, PARDO_F32, 1, s8), theirs);
    ck_assert_int_eq(pool.n, 0);
    pardo_tensor_release(mine);
    pardo_tensor_release(theirs);
    pardo_tensor_pool_clear(&pool);
}
END_TEST

/* Runs p for 3 steps on one batch; returns the bytes of tensors the executor
 * still holds (bound or pooled) and copies the loss and w1 out. */
static int64_t train_three_steps(const pardo_program *p, bool release, double *loss, pardo_tensor **w1,
                                 pardo_tensor **released) {
    pardo_status st;
    int64_t before = pardo_tensor_bytes_in_use();
    pardo_executor *ex = test_fed_mlp_executor(p, 1, release, 64);
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
    pardo_program *p = test_mlp_training();
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

/* reshape, flatten and unsqueeze of a temporary that only its producer
 * writes give a view of its data (no copy), also in training (reshape_grad
 * of a gradient); of a feed, a param, or a temp an in-place op writes
 * again, a copy; the values the same either way, a view never pooled. */
START_TEST(reshape_of_a_private_temp_is_a_view) {
    static const char text[] =
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"float32\", \"shape\": [4, 6], \"role\": \"feed\"},"
        "\"w\": {\"dtype\": \"float32\", \"shape\": [4, 6], \"role\": \"param\", \"init\": "
        "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}}},"
        "\"ops\": [{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"h\"]},"
        "{\"op\": \"reshape\", \"in\": [\"h\"], \"out\": [\"h2\"], \"attrs\": {\"shape\": [2, 12]}},"
        "{\"op\": \"flatten\", \"in\": [\"h2\"], \"out\": [\"h3\"], \"attrs\": {\"axis\": 0}},"
        "{\"op\": \"reshape\", \"in\": [\"x\"], \"out\": [\"xr\"], \"attrs\": {\"shape\": [24]}},"
        "{\"op\": \"reshape\", \"in\": [\"w\"], \"out\": [\"wr\"], \"attrs\": {\"shape\": [24]}},"
        "{\"op\": \"abs\", \"in\": [\"x\"], \"out\": [\"a\"]},"
        "{\"op\": \"reshape\", \"in\": [\"a\"], \"out\": [\"ar\"], \"attrs\": {\"shape\": [24]}},"
        "{\"op\": \"neg\", \"in\": [\"a\"], \"out\": [\"a\"]},"
        "{\"op\": \"unsqueeze\", \"in\": [\"h3\"], \"out\": [\"h4\"], \"attrs\": {\"axes\": [0]}}]}]}";
    pardo_program *p = test_program(text, "graph.json");
    test_rng r = {5};
    int64_t xs[] = {4, 6};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1);
    static const char *const names[] = {"x"}, *const keep[] = {"h", "h2", "h3", "h4", "xr", "wr", "w", "ar", "a"};
    pardo_tensor *const feeds[] = {x};
    for (int release = 0; release < 2; release++) {
        pardo_executor *ex = test_executor_with(
            p, (pardo_exec_options){.nthreads = 1, .release_temps = release, .keep = keep, .n_keep = 9}, 1, names,
            feeds);
        test_run_steps(ex, 3);
        const void *h = pardo_tensor_data(pardo_executor_fetch(ex, "h"));
        static const char *const views[] = {"h2", "h3", "h4"};
        for (int k = 0; k < 3; k++) {
            pardo_tensor *t = pardo_executor_fetch(ex, views[k]);
            ck_assert_msg(t->base && pardo_tensor_data(t) == h, "%s is not a view of h", views[k]);
        }
        static const char *const copies[] = {"xr", "wr", "ar"}, *const of[] = {"x", "w", "a"};
        for (int k = 0; k < 3; k++) {
            pardo_tensor *t = pardo_executor_fetch(ex, copies[k]), *src = pardo_executor_fetch(ex, of[k]);
            ck_assert_msg(!t->base && pardo_tensor_data(t) != pardo_tensor_data(src), "%s is a view", copies[k]);
        }
        /* the values: h4 is h, xr is x, ar is |x| although a was negated after it */
        const float *hv = h, *h4 = pardo_tensor_data(pardo_executor_fetch(ex, "h4")),
                    *xr = pardo_tensor_data(pardo_executor_fetch(ex, "xr")),
                    *ar = pardo_tensor_data(pardo_executor_fetch(ex, "ar")), *xv = pardo_tensor_data(x);
        for (int i = 0; i < 24; i++) {
            ck_assert(h4[i] == hv[i] && hv[i] == (xv[i] < 0 ? 0.0f : xv[i]));
            ck_assert(xr[i] == xv[i] && ar[i] == (xv[i] < 0 ? -xv[i] : xv[i]));
        }
        pardo_executor_free(ex);
    }
    pardo_tensor_release(x);
    pardo_program_free(p);
}
END_TEST

/* A view is never pooled nor reused as an output: its data is its base's. */
START_TEST(pool_refuses_views) {
    pardo_status st;
    int64_t s4[] = {4};
    pardo_tensor *base = pardo_tensor_new_cpu(PARDO_F32, 1, s4, &st), *v = pardo_tensor_new(PARDO_F32, 1, s4, &st);
    ck_assert_int_eq(pardo_tensor_view_of(v, base, 0, &st), PARDO_OK);
    pardo_tensor_pool pool;
    pardo_tensor_pool_init(&pool);
    pardo_tensor_pool_put(&pool, v); /* released, not kept */
    ck_assert_int_eq(pool.n, 0);
    ck_assert_int_eq(atomic_load(&base->refs), 1);
    pardo_tensor_pool_clear(&pool);
    pardo_tensor_release(base);
}
END_TEST

/* The data-parallel graph with temporaries freed: same loss as keeping
 * them, and no heap growth in the steady state (freed tensors come back
 * from the pool; tensor_arrays keep their parts). */
START_TEST(parallel_steady_state_allocates_nothing) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(2, &st) == PARDO_OK, "%s", st.msg);
    pardo_program *p = test_mlp_training();
    pardo_pass_options o = pardo_pass_defaults();
    o.parts = 2;
    ck_assert_msg(pardo_pass_multi_cpu(p, &o, &st) == PARDO_OK, "%s", st.msg);
    double loss[2];
    for (int release = 0; release < 2; release++) {
        pardo_executor *ex = test_fed_mlp_executor(p, 2, release, 48);
        /* the steady state: until 10 steps in a row take nothing (at most 200). The default executor here is
         * the dataflow one, whose units run on either thread: what a thread grows once (a kernel's buffer,
         * the pool's tensors for an order of frees not seen before) can come after the first steps */
        int steps = 3;
        for (int s = 0; s < 3; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
        for (int w = 0; w < 20; w++) {
            struct mallinfo2 a = mallinfo2();
            for (int s = 0; s < 10; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
            steps += 10;
            struct mallinfo2 b = mallinfo2();
            if (a.uordblks + a.hblkhd == b.uordblks + b.hblkhd) break;
        }
        struct mallinfo2 m0 = mallinfo2();
        for (int s = 0; s < 30; s++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
        struct mallinfo2 m1 = mallinfo2();
        ck_assert_int_eq((long long)(m1.uordblks + m1.hblkhd), (long long)(m0.uordblks + m0.hblkhd));
        /* the two runs may reach the steady state after different step counts: the losses compare after the
         * same number of steps, the most the loop above can take */
        for (; steps < 3 + 200; steps++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
        loss[release] = pardo_tensor_get_f64(pardo_executor_fetch(ex, "loss"), 0);
        pardo_executor_free(ex);
    }
    ck_assert_msg(loss[0] == loss[1], "loss %.17g keeping temporaries, %.17g freeing them", loss[0], loss[1]);
    pardo_program_free(p);
    pardo_thread_pool_shutdown();
}
END_TEST

static void assert_in(const pardo_op *op, int k, const char *name) {
    ck_assert_msg(strcmp(op->in[k], name) == 0, "%s input %d is '%s', expected '%s'", op->type, k, op->in[k], name);
}

START_TEST(backward_leaves_out_unread_forward_values) {
    pardo_program *p = test_mlp_training();
    const pardo_op *mg = test_find_op(p, "matmul_grad", "a@GRAD"); /* fc2: A, B, Y, dY */
    assert_in(mg, 0, "a");
    assert_in(mg, 1, "w2");
    assert_in(mg, 2, "");
    const pardo_op *ag = test_find_op(p, "add_grad", NULL); /* h fills z: shape from dz; b1 is broadcast: kept */
    assert_in(ag, 0, "");
    assert_in(ag, 1, "b1");
    assert_in(ag, 2, "");
    assert_in(ag, 3, "z@GRAD");
    const pardo_op *rg = test_find_op(p, "relu_grad", NULL); /* reads Y */
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
    ag = test_find_op(p, "add_grad", NULL);
    assert_in(ag, 0, "u"); /* [1, 3] broadcast to [4, 3]: its shape is needed */
    assert_in(ag, 2, "");
    const pardo_op *mu = test_find_op(p, "mul_grad", NULL);
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
    pardo_program *p = test_mlp_training();
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
        pardo_executor *ex = test_executor_with(p, (pardo_exec_options){.nthreads = threads}, 2, names, feeds);
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

Suite *make_memory_suite(void) {
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, release_plan_frees_after_the_last_reader);
    tcase_add_test(tc, pool_reuses_by_size);
    tcase_add_test(tc, pool_prefers_the_takers_own_tensors);
    tcase_add_test(tc, executor_frees_dead_temporaries);
    tcase_add_test(tc, parallel_steady_state_allocates_nothing);
    tcase_add_test(tc, backward_leaves_out_unread_forward_values);
    tcase_add_test(tc, add_grad_with_an_operand_left_out);
    tcase_add_test(tc, updates_follow_their_params_last_use);
    tcase_add_test(tc, kept_weights_follow_their_writes);
    tcase_add_test(tc, reshape_of_a_private_temp_is_a_view);
    tcase_add_test(tc, pool_refuses_views);
    suite_add_tcase(s, tc);
    return s;
}
