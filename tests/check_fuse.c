/* check_fuse.c - the fusion pass (transpiler/fuse.c): which chains it
 * rewrites and which it leaves, and that the rewritten graph computes the
 * bits of the ops one by one (the unfused graph is the reference; its ops'
 * kernels are checked against naive loops and finite differences in their
 * own suites), on one thread and on two, for sgd, momentum and adam. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "mlp_test_util.h"
#include "pass.h"
#include "test_util.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"

static const pardo_optimizer_kind optimizer_kinds[] = {PARDO_OPTIMIZER_SGD, PARDO_OPTIMIZER_MOMENTUM,
                                                       PARDO_OPTIMIZER_ADAM};
static const char *const mlp_params[] = {"w1", "b1", "w2"};

/* A fused copy of p (keeping the n_keep vars of keep); the caller frees it. */
static pardo_program *fused(const pardo_program *p, const char *const *keep, int n_keep) {
    pardo_status st;
    pardo_program *q = pardo_program_clone(p);
    ck_assert_ptr_nonnull(q);
    pardo_pass_options o = pardo_pass_defaults();
    o.keep = keep;
    o.n_keep = n_keep;
    ck_assert_msg(pardo_pass_fuse(q, &o, &st) == PARDO_OK, "%s", st.msg);
    return q;
}

/* How many ops of block b have type `type`. */
static int count_ops(const pardo_program *p, int b, const char *type) {
    int n = 0;
    for (int i = 0; i < p->blocks[b].n_ops; i++) n += strcmp(p->blocks[b].ops[i].type, type) == 0;
    return n;
}

/* The string attr `name` of op, or "" when absent. */
static const char *attr_str(const pardo_op *op, const char *name) {
    const pardo_value *v = pardo_attr(op, name);
    return v && v->kind == PARDO_V_STRING ? v->string : "";
}

static void assert_names(const pardo_op *op, bool out, const char *const *want, int n) {
    ck_assert_int_eq(out ? op->n_out : op->n_in, n);
    for (int k = 0; k < n; k++)
        ck_assert_msg(strcmp((out ? op->out : op->in)[k], want[k]) == 0, "%s %s %d is '%s', expected '%s'", op->type,
                      out ? "output" : "input", k, (out ? op->out : op->in)[k], want[k]);
}

START_TEST(pass_rewrites_private_chains) {
    pardo_program *p = test_program(test_mlp_text, "mlp.json");
    pardo_program *f = fused(p, NULL, 0);
    ck_assert_int_eq(f->blocks[0].n_ops, 3); /* matmul(x, w1, b1) relu, matmul, loss */
    const pardo_op *mm = &f->blocks[0].ops[0];
    static const char *const in0[] = {"x", "w1", "b1"}, *const out0[] = {"a"};
    assert_names(mm, false, in0, 3);
    assert_names(mm, true, out0, 1);
    ck_assert_str_eq(attr_str(mm, "activation"), "relu");
    ck_assert_ptr_null(pardo_block_find_var(&f->blocks[0], "h")); /* the intermediates are gone */
    ck_assert_ptr_null(pardo_block_find_var(&f->blocks[0], "z"));
    ck_assert_int_eq(f->blocks[0].ops[1].n_in, 2); /* logits go to the loss, not to an add */
    pardo_program_free(f);
    const char *keep_z[] = {"z"}, *keep_h[] = {"h"};
    f = fused(p, keep_z, 1); /* z must stay: relu runs on its own */
    ck_assert_int_eq(f->blocks[0].n_ops, 4);
    ck_assert_str_eq(attr_str(&f->blocks[0].ops[0], "activation"), "");
    ck_assert_str_eq(f->blocks[0].ops[0].out[0], "z");
    pardo_program_free(f);
    f = fused(p, keep_h, 1);
    ck_assert_int_eq(f->blocks[0].n_ops, 5);
    pardo_program_free(f);
    pardo_program_free(p);

    /* the training graph split into parts: the chains inside the parallel_do block fuse, and the merges of
     * the gradients go into the updates */
    pardo_status st;
    p = test_mlp_training();
    pardo_pass_options o = pardo_pass_defaults();
    o.parts = 2;
    ck_assert_msg(pardo_pass_multi_cpu(p, &o, &st) == PARDO_OK, "%s", st.msg);
    const char *keep_loss[] = {"loss"};
    f = fused(p, keep_loss, 1);
    ck_assert_int_eq(count_ops(f, 1, "relu_grad"), 0);
    ck_assert_int_eq(count_ops(f, 1, "add"), 0);
    int fused_grads = 0;
    for (int i = 0; i < f->blocks[1].n_ops; i++) {
        const pardo_op *g = &f->blocks[1].ops[i];
        if (strcmp(g->type, "matmul_grad") || g->n_in < 5) continue;
        /* dA of fc2 through fc1's relu mask (a), and b1's gradient */
        static const char *const gin[] = {"a", "w2", "", "logits@GRAD", "a", "b1"},
                                 *const gout[] = {"h@GRAD", "w2@GRAD", "b1@GRAD"};
        assert_names(g, false, gin, 6);
        assert_names(g, true, gout, 3);
        fused_grads++;
    }
    ck_assert_int_eq(fused_grads, 1);
    ck_assert_int_eq(count_ops(f, 0, "merge"), 1); /* the loss's, which is kept */
    for (int i = 0; i < f->blocks[0].n_ops; i++) {
        const pardo_op *u = &f->blocks[0].ops[i];
        if (strcmp(u->type, "sgd")) continue;
        char parts[64];
        snprintf(parts, sizeof parts, "%s@GRAD@PARTS", u->out[0]);
        ck_assert_str_eq(u->in[1], parts);
        ck_assert_int_eq(u->n_in, 4);
        ck_assert_str_eq(u->in[3], "x@PARTS"); /* weight_by */
        ck_assert_str_eq(attr_str(u, "grad_merge"), "mean");
    }
    pardo_program_free(f);
    pardo_program_free(p);
}
END_TEST

START_TEST(pass_leaves_chains_others_can_see) {
    /* a part's intermediate that parts_out hands to block 0 is not private */
    pardo_program *p = test_program(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
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
        "parts.json");
    pardo_program *f = fused(p, NULL, 0);
    ck_assert_int_eq(f->blocks[1].n_ops, 3);
    pardo_program_free(f);
    pardo_program_free(p);

    /* an attr that names the intermediate (here merge's mode "sum", a var name too) */
    p = test_program("{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                     "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 2], \"role\": \"feed\"},"
                     "\"w\": {\"dtype\": \"float32\", \"shape\": [2, 2], \"role\": \"param\", \"value\": [1, 2, 3, 4]},"
                     "\"b\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"param\", \"value\": [1, 2]}},"
                     "\"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"sum\"]},"
                     "{\"op\": \"add\", \"in\": [\"sum\", \"b\"], \"out\": [\"z\"]},"
                     "{\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"xs\"], \"attrs\": {\"parts\": 2}},"
                     "{\"op\": \"merge\", \"in\": [\"xs\"], \"out\": [\"m\"], \"attrs\": {\"mode\": \"sum\"}}]}]}",
                     "named.json");
    f = fused(p, NULL, 0);
    ck_assert_int_eq(f->blocks[0].n_ops, 4);
    pardo_program_free(f);
    pardo_program_free(p);

    /* an integer product has no epilogue: matmul + add + relu of int64 stay three ops */
    p = test_program("{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                     "\"x\": {\"dtype\": \"int64\", \"shape\": [-1, 2], \"role\": \"feed\"},"
                     "\"w\": {\"dtype\": \"int64\", \"shape\": [2, 2], \"role\": \"param\", \"value\": [1, 2, 3, 4]},"
                     "\"b\": {\"dtype\": \"int64\", \"shape\": [2], \"role\": \"param\", \"value\": [1, 2]}},"
                     "\"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
                     "{\"op\": \"add\", \"in\": [\"h\", \"b\"], \"out\": [\"z\"]},"
                     "{\"op\": \"relu\", \"in\": [\"z\"], \"out\": [\"y\"]}]}]}",
                     "int_product.json");
    f = fused(p, NULL, 0);
    ck_assert_int_eq(f->blocks[0].n_ops, 3);
    pardo_program_free(f);
    pardo_program_free(p);

    /* an op between matmul_grad and relu_grad that writes relu_grad's Y: relu_grad cannot move up */
    p = test_mlp_training();
    pardo_block *b0 = &p->blocks[0];
    int g = -1, r = -1;
    for (int i = 0; i < b0->n_ops; i++) {
        if (strcmp(b0->ops[i].type, "matmul_grad") == 0 && strcmp(b0->ops[i].out[0], "a@GRAD") == 0) g = i;
        if (strcmp(b0->ops[i].type, "relu_grad") == 0) r = i;
    }
    ck_assert(g >= 0 && r > g + 1);
    ck_assert_int_eq(b0->ops[g + 1].role, PARDO_OP_OPTIMIZE); /* w2's update stands between */
    f = fused(p, NULL, 0);
    ck_assert_int_eq(count_ops(f, 0, "relu_grad"), 0); /* hoisted over the update */
    pardo_program_free(f);
    pardo_op *between = &b0->ops[g + 1]; /* the update: make it write relu_grad's Y instead of the param */
    char *was = between->out[0];
    between->out[0] = b0->ops[r].in[1];
    pardo_program *q = pardo_program_clone(p);
    between->out[0] = was;
    pardo_status st;
    pardo_pass_options o = pardo_pass_defaults();
    /* (q's update now writes a, which makes q no valid graph to check again: fuse's plan alone is asked, so the
     * relu chain is left and the pass re-checks what it rewrote) */
    int rc = pardo_pass_fuse(q, &o, &st);
    if (rc == PARDO_OK) ck_assert_int_eq(count_ops(q, 0, "relu_grad"), 1);
    pardo_program_free(q);
    pardo_program_free(p);
}
END_TEST

/* Runs p (fused or not) for `steps` steps of the MLP's batch on `threads`
 * threads and copies out its params. */
static void train_params(const pardo_program *p, int threads, int steps, int64_t rows, pardo_tensor **got) {
    pardo_executor *ex = test_fed_mlp_executor(p, threads, true, rows);
    test_run_steps(ex, steps);
    for (int q = 0; q < 3; q++) got[q] = test_fetched_copy(ex, mlp_params[q]);
    pardo_executor_free(ex);
}

/* The plain and the data-parallel training graphs, fused and not: the same
 * params bit for bit after some steps, for sgd, momentum and adam, on one
 * thread and on two (where the updates run as parallel stages and early). */
START_TEST(fused_training_keeps_the_bits) {
    pardo_status st;
    const char *keep[] = {"loss"};
    for (int k = 0; k < 3; k++)
        for (int parts = 0; parts <= 2; parts += 2) {
            pardo_program *p = test_mlp_training_with(optimizer_kinds[k]);
            if (parts) {
                pardo_pass_options o = pardo_pass_defaults();
                o.parts = parts;
                ck_assert_msg(pardo_pass_multi_cpu(p, &o, &st) == PARDO_OK, "%s", st.msg);
            }
            pardo_program *f = fused(p, keep, 1);
            ck_assert_int_lt(f->blocks[0].n_ops + f->blocks[f->n_blocks - 1].n_ops,
                             p->blocks[0].n_ops + p->blocks[p->n_blocks - 1].n_ops);
            for (int threads = 1; threads <= 2; threads++) {
                if (pardo_thread_pool_started() && pardo_thread_pool_size() != threads) pardo_thread_pool_shutdown();
                ck_assert_msg(pardo_thread_pool_configure(threads, &st) == PARDO_OK, "%s", st.msg);
                pardo_tensor *got[2][3];
                train_params(p, threads, 4, 37, got[0]);
                train_params(f, threads, 4, 37, got[1]);
                char what[64];
                snprintf(what, sizeof what, "optimizer %d, %d parts, %d threads", k, parts, threads);
                test_assert_same_bits(got[0], got[1], 3, mlp_params, what);
            }
            pardo_program_free(f);
            pardo_program_free(p);
        }
    pardo_thread_pool_shutdown();
}
END_TEST

/* One op a chain: the fused graph's trace has one event per fused op and
 * step, and none of the ops it took in. */
START_TEST(fused_ops_have_one_trace_event) {
    pardo_status st;
    pardo_program *p = test_mlp_training();
    const char *keep[] = {"loss"};
    pardo_program *f = fused(p, keep, 1);
    pardo_executor *ex = test_fed_mlp_executor(f, 1, true, 5);
    ck_assert_int_eq(pardo_trace_start(&st), PARDO_OK);
    test_run_steps(ex, 2);
    pardo_trace_stop();
    char *json = NULL;
    size_t n = 0;
    ck_assert_int_eq(pardo_trace_json(NULL, &json, &n, &st), PARDO_OK);
    ck_assert_int_eq(test_occurrences(json, "\"op\":\"matmul\""), 4);
    ck_assert_int_eq(test_occurrences(json, "\"op\":\"matmul_grad\""), 4);
    ck_assert_int_eq(test_occurrences(json, "\"op\":\"add\""), 0);
    ck_assert_int_eq(test_occurrences(json, "\"op\":\"relu\""), 0);
    ck_assert_int_eq(test_occurrences(json, "\"op\":\"relu_grad\""), 0);
    free(json);
    pardo_trace_reset();
    ck_assert_ptr_null(pardo_executor_fetch(ex, "a@GRAD")); /* no such var any more */
    pardo_executor_free(ex);
    pardo_program_free(f);
    pardo_program_free(p);
}
END_TEST

/* Runs the graph text's block 0 twice on the feeds, fused or not, and
 * asserts the fetched vars are the same bits. */
static void fused_and_unfused_agree(const char *text, int n_feeds, const char *const *names,
                                    pardo_tensor *const *feeds, int n_out, const char *const *outs, const char *what,
                                    bool expect_rewrite) {
    pardo_program *p = test_program(text, "graph.json");
    pardo_program *f = fused(p, outs, n_out);
    ck_assert_msg((f->blocks[0].n_ops < p->blocks[0].n_ops) == expect_rewrite, "%s: %d ops fused to %d", what,
                  p->blocks[0].n_ops, f->blocks[0].n_ops);
    pardo_tensor *got[2][4];
    ck_assert_int_le(n_out, 4);
    for (int g = 0; g < 2; g++) {
        pardo_executor *ex = test_executor_with(
            g ? f : p, (pardo_exec_options){.nthreads = 1, .release_temps = true, .keep = outs, .n_keep = n_out},
            n_feeds, names, feeds);
        test_run_steps(ex, 2);
        for (int q = 0; q < n_out; q++) got[g][q] = test_fetched_copy(ex, outs[q]);
        pardo_executor_free(ex);
    }
    test_assert_same_bits(got[0], got[1], n_out, outs, what);
    pardo_program_free(f);
    pardo_program_free(p);
}

/* matmul -> add -> relu where the add's bias is [N] (fused: the GEMM's
 * epilogue) or [1, N] (left as it is); matmul(x, w, b) -> relu the same;
 * and matmul with a [1, N] bias and
 * relu written by hand (the kernel adds it after the product): each the
 * bits of the ops one by one. */
START_TEST(bias_shapes_keep_the_bits) {
    static const char fmt[] =
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"%s\", \"shape\": [-1, 3], \"role\": \"feed\"},"
        "\"w\": {\"dtype\": \"%s\", \"shape\": [3, 4], \"role\": \"param\", \"init\": "
        "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 5}},"
        "\"b\": {\"dtype\": \"%s\", \"shape\": %s, \"role\": \"param\", \"value\": [0.5, -0.5, 1, -1]}},"
        "\"ops\": [%s]}]}";
    static const char chain[] = "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
                                "{\"op\": \"add\", \"in\": [\"b\", \"h\"], \"out\": [\"z\"]},"
                                "{\"op\": \"relu\", \"in\": [\"z\"], \"out\": [\"a\"]}";
    static const char by_hand[] = "{\"op\": \"matmul\", \"in\": [\"x\", \"w\", \"b\"], \"out\": [\"a\"], "
                                  "\"attrs\": {\"activation\": \"relu\"}}";
    for (int dt = 0; dt < 2; dt++) {
        const char *dtype = dt ? "float64" : "float32";
        test_rng r = {6};
        int64_t xs[] = {37, 3};
        pardo_tensor *x = test_tensor_random(&r, dt ? PARDO_F64 : PARDO_F32, 2, xs, -2, 2);
        static const char *const names[] = {"x"}, *const outs[] = {"a"};
        char text[2048];
        for (int bias2d = 0; bias2d < 2; bias2d++) {
            snprintf(text, sizeof text, fmt, dtype, dtype, dtype, bias2d ? "[1, 4]" : "[4]", chain);
            fused_and_unfused_agree(text, 1, names, &x, 1, outs, bias2d ? "chain, bias [1, N]" : "chain, bias [N]",
                                    !bias2d);
        }
        /* matmul(x, w, b) -> relu, as an imported Gemm + Relu is: the relu goes into the epilogue for a [N] bias
         * (a transposed B too), and stays where the bias is [1, N] */
        static const char gemm_relu[] = "{\"op\": \"matmul\", \"in\": [\"x\", \"w\", \"b\"], \"out\": [\"h\"]},"
                                        "{\"op\": \"relu\", \"in\": [\"h\"], \"out\": [\"a\"]}";
        for (int bias2d = 0; bias2d < 2; bias2d++) {
            snprintf(text, sizeof text, fmt, dtype, dtype, dtype, bias2d ? "[1, 4]" : "[4]", gemm_relu);
            fused_and_unfused_agree(text, 1, names, &x, 1, outs, bias2d ? "gemm + relu, bias [1, N]" : "gemm + relu",
                                    !bias2d);
            if (!bias2d) {
                pardo_program *p = test_program(text, "gemm.json"), *f = fused(p, outs, 1);
                ck_assert_int_eq(f->blocks[0].n_ops, 1);
                ck_assert_str_eq(attr_str(&f->blocks[0].ops[0], "activation"), "relu");
                ck_assert_int_eq(f->blocks[0].ops[0].n_in, 3);
                pardo_program_free(f);
                pardo_program_free(p);
            }
        }
        /* by hand against the chain: the same bits (a [1, N] bias added after the product; relu alone in the
         * GEMM's epilogue) */
        static const char relu_chain[] = "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
                                         "{\"op\": \"relu\", \"in\": [\"h\"], \"out\": [\"a\"]}";
        static const char relu_by_hand[] = "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"a\"], "
                                           "\"attrs\": {\"activation\": \"relu\"}}";
        static const struct {
            const char *chain, *by_hand, *what;
        } pairs[] = {{chain, by_hand, "matmul with a [1, N] bias and relu"},
                     {relu_chain, relu_by_hand, "matmul with relu and no bias"}};
        for (size_t c = 0; c < sizeof pairs / sizeof pairs[0]; c++) {
            pardo_tensor *got[2];
            for (int g = 0; g < 2; g++) {
                snprintf(text, sizeof text, fmt, dtype, dtype, dtype, "[1, 4]", g ? pairs[c].by_hand : pairs[c].chain);
                pardo_program *p = test_program(text, "hand.json");
                pardo_executor *ex = test_executor_with(p, (pardo_exec_options){.nthreads = 1}, 1, names, &x);
                test_run_steps(ex, 1);
                got[g] = test_fetched_copy(ex, "a");
                pardo_executor_free(ex);
                pardo_program_free(p);
            }
            test_assert_same_bits(&got[0], &got[1], 1, outs, pairs[c].what);
        }
        pardo_tensor_release(x);
    }
}
END_TEST

/* matmul_grad -> relu_grad -> add_grad written by hand, for matrices (the
 * mask in the GEMM's epilogue) and with a batch dim (dA summed over
 * batches, masked after): fused, the same gradients. */
START_TEST(backward_chain_keeps_the_bits_with_batch_dims) {
    for (int batched = 0; batched < 2; batched++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                 "\"x\": {\"dtype\": \"float32\", \"shape\": %s, \"role\": \"feed\"},"
                 "\"dy\": {\"dtype\": \"float32\", \"shape\": %s, \"role\": \"feed\"},"
                 "\"b\": {\"dtype\": \"float32\", \"shape\": [4], \"role\": \"param\", \"value\": [1, -1, 0.5, 0]},"
                 "\"w\": {\"dtype\": \"float32\", \"shape\": [4, 3], \"role\": \"param\", \"init\": "
                 "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}}},"
                 "\"ops\": [{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"a\"]},"
                 "{\"op\": \"matmul_grad\", \"in\": [\"a\", \"w\", \"\", \"dy\"], \"out\": [\"da\", \"dw\"]},"
                 "{\"op\": \"relu_grad\", \"in\": [\"\", \"a\", \"da\"], \"out\": [\"dz\"]},"
                 "{\"op\": \"add_grad\", \"in\": [\"\", \"b\", \"\", \"dz\"], \"out\": [\"dh\", \"db\"]}]}]}",
                 batched ? "[2, -1, 4]" : "[-1, 4]", batched ? "[2, -1, 3]" : "[-1, 3]");
        test_rng r = {9};
        int64_t xs[] = {2, 29, 4}, ys[] = {2, 29, 3};
        const int nd = batched ? 3 : 2;
        pardo_tensor *x = test_tensor_random(&r, PARDO_F32, nd, batched ? xs : xs + 1, -1, 1),
                     *dy = test_tensor_random(&r, PARDO_F32, nd, batched ? ys : ys + 1, -1, 1);
        static const char *const outs[] = {"dh", "dw", "db"}, *const names[] = {"x", "dy"};
        pardo_tensor *const feeds[] = {x, dy};
        fused_and_unfused_agree(text, 2, names, feeds, 3, outs, batched ? "batched" : "matrices", true);
        pardo_tensor_release(x);
        pardo_tensor_release(dy);
    }
}
END_TEST

/* add_grad("", b, "", dy) -> (dh, db), dh read by a matmul_grad only: the
 * copy dh is not made and the matmul_grad reads dy (the bits of the ops one
 * by one); a dh that is fetched, or read twice, stays. */
START_TEST(bias_grad_copy_is_passed_on) {
    static const char fmt[] =
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"role\": \"feed\"},"
        "\"dy\": {\"dtype\": \"float32\", \"shape\": [-1, 3], \"role\": \"feed\"},"
        "\"b\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\", \"value\": [1, -1, 0.5]},"
        "\"w\": {\"dtype\": \"float32\", \"shape\": [4, 3], \"role\": \"param\", \"init\": "
        "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}}},"
        "\"ops\": [{\"op\": \"add_grad\", \"in\": [\"\", \"b\", \"\", \"dy\"], \"out\": [\"dh\", \"db\"]},"
        "{\"op\": \"matmul_grad\", \"in\": [\"x\", \"w\", \"\", \"dh\"], \"out\": [\"dx\", \"dw\"]}%s]}]}";
    char text[2048];
    snprintf(text, sizeof text, fmt, "");
    test_rng r = {21};
    int64_t xs[] = {37, 4}, ys[] = {37, 3};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1), *dy = test_tensor_random(&r, PARDO_F32, 2, ys, -1, 1);
    static const char *const outs[] = {"dx", "dw", "db"}, *const names[] = {"x", "dy"};
    pardo_tensor *const feeds[] = {x, dy};
    fused_and_unfused_agree(text, 2, names, feeds, 3, outs, "pass-on", false);
    pardo_program *p = test_program(text, "graph.json");
    pardo_program *f = fused(p, outs, 3);
    static const char *const add_out[] = {"", "db"}, *const mm_in[] = {"x", "w", "", "dy"};
    assert_names(&f->blocks[0].ops[0], true, add_out, 2);
    assert_names(&f->blocks[0].ops[1], false, mm_in, 4);
    ck_assert_ptr_null(pardo_program_lookup_var(f, 0, "dh", NULL)); /* the copy's temp is gone */
    pardo_program_free(f);
    /* kept by the caller: stays */
    static const char *const keep_dh[] = {"dx", "dw", "db", "dh"};
    f = fused(p, keep_dh, 4);
    static const char *const add_kept[] = {"dh", "db"};
    assert_names(&f->blocks[0].ops[0], true, add_kept, 2);
    pardo_program_free(f);
    pardo_program_free(p);
    /* read by a second op: stays */
    snprintf(text, sizeof text, fmt, ", {\"op\": \"relu\", \"in\": [\"dh\"], \"out\": [\"r\"]}");
    p = test_program(text, "graph.json");
    f = fused(p, outs, 3);
    assert_names(&f->blocks[0].ops[0], true, add_kept, 2);
    pardo_program_free(f);
    pardo_program_free(p);
    pardo_tensor_release(x);
    pardo_tensor_release(dy);
}
END_TEST

/* scale -> softmax (inference), and with softmax_grad -> scale_grad
 * (training, the gradient ops as autodiff writes them): softmax {scale}
 * and softmax_grad {scale} with the bits of the ops one by one, rows on and
 * off the kernels' lanes, float32 and float64; a scale with a bias stays. */
START_TEST(softmax_takes_in_its_scale) {
    static const char fmt[] =
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"%s\", \"shape\": [-1, %d], \"role\": \"feed\"},"
        "\"dp\": {\"dtype\": \"%s\", \"shape\": [-1, %d], \"role\": \"feed\"}},"
        "\"ops\": [{\"op\": \"scale\", \"in\": [\"x\"], \"out\": [\"s\"], \"attrs\": {\"scale\": 0.125%s}},"
        "{\"op\": \"softmax\", \"in\": [\"s\"], \"out\": [\"p\"]}%s]}]}";
    static const char grads[] = ", {\"op\": \"softmax_grad\", \"in\": [\"s\", \"p\", \"dp\"], \"out\": [\"ds\"]},"
                                "{\"op\": \"scale_grad\", \"in\": [\"\", \"s\", \"ds\"], \"out\": [\"dx\"], "
                                "\"attrs\": {\"scale\": 0.125%s}}";
    static const char *const dts[] = {"float32", "float64"};
    static const int widths[] = {7, 40};
    for (int dt = 0; dt < 2; dt++)
        for (int w = 0; w < 2; w++)
            for (int train = 0; train < 2; train++)
                for (int biased = 0; biased < 2; biased++) {
                    char g[512], text[2048];
                    const char *bias = biased ? ", \"bias\": 1" : "";
                    snprintf(g, sizeof g, grads, bias);
                    snprintf(text, sizeof text, fmt, dts[dt], widths[w], dts[dt], widths[w], bias, train ? g : "");
                    test_rng r = {40u + (uint64_t)(dt * 8 + w * 4 + train * 2 + biased)};
                    int64_t xs[] = {5, widths[w]};
                    const pardo_dtype d = dt ? PARDO_F64 : PARDO_F32;
                    pardo_tensor *x = test_tensor_random(&r, d, 2, xs, -20, 20), *dp = test_tensor_random(&r, d, 2, xs, -1, 1);
                    static const char *const names[] = {"x", "dp"}, *const outs[] = {"p", "dx"};
                    pardo_tensor *const feeds[] = {x, dp};
                    char what[64];
                    snprintf(what, sizeof what, "%s width %d%s%s", dts[dt], widths[w], train ? " training" : "",
                             biased ? " biased" : "");
                    fused_and_unfused_agree(text, 2, names, feeds, train ? 2 : 1, outs, what, !biased);
                    if (!biased) {
                        pardo_program *p = test_program(text, "graph.json");
                        pardo_program *f = fused(p, outs, train ? 2 : 1);
                        ck_assert_int_eq(count_ops(f, 0, "scale") + count_ops(f, 0, "scale_grad"), 0);
                        static const char *const sm_in[] = {"x"}, *const sg_in[] = {"x", "p", "dp"}, *const sg_out[] = {"dx"};
                        assert_names(&f->blocks[0].ops[0], false, sm_in, 1);
                        double c = 0;
                        pardo_status st;
                        ck_assert(pardo_attr_float(&f->blocks[0].ops[0], "scale", 1, &c, &st) == PARDO_OK && c == 0.125);
                        if (train) {
                            assert_names(&f->blocks[0].ops[1], false, sg_in, 3);
                            assert_names(&f->blocks[0].ops[1], true, sg_out, 1);
                        }
                        pardo_program_free(f);
                        pardo_program_free(p);
                    }
                    pardo_tensor_release(x);
                    pardo_tensor_release(dp);
                }
}
END_TEST

/* matmul -> add -> gelu and matmul(x, w, b) -> gelu (inference): one
 * matmul {activation: gelu}, the GEMM's epilogue computing the gelu op's
 * bits (rows past the kernels' tiles, float32 and float64); with gelu_grad
 * reading the gelu's input (training), nothing fuses past the add. */
START_TEST(matmul_takes_in_a_gelu) {
    static const char fmt[] =
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"%s\", \"shape\": [-1, 5], \"role\": \"feed\"},"
        "\"dy\": {\"dtype\": \"%s\", \"shape\": [-1, 37], \"role\": \"feed\"},"
        "\"w\": {\"dtype\": \"%s\", \"shape\": [5, 37], \"role\": \"param\", \"init\": "
        "{\"fill\": \"uniform\", \"low\": -2, \"high\": 2, \"seed\": 5}},"
        "\"b\": {\"dtype\": \"%s\", \"shape\": [37], \"role\": \"param\", \"init\": "
        "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 6}}},"
        "\"ops\": [%s]}]}";
    static const char chain[] = "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
                                "{\"op\": \"add\", \"in\": [\"h\", \"b\"], \"out\": [\"z\"]},"
                                "{\"op\": \"gelu\", \"in\": [\"z\"], \"out\": [\"a\"]}";
    static const char gemm_gelu[] = "{\"op\": \"matmul\", \"in\": [\"x\", \"w\", \"b\"], \"out\": [\"z\"]},"
                                    "{\"op\": \"gelu\", \"in\": [\"z\"], \"out\": [\"a\"]}";
    static const char training[] = "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
                                   "{\"op\": \"add\", \"in\": [\"h\", \"b\"], \"out\": [\"z\"]},"
                                   "{\"op\": \"gelu\", \"in\": [\"z\"], \"out\": [\"a\"]},"
                                   "{\"op\": \"gelu_grad\", \"in\": [\"z\", \"a\", \"dy\"], \"out\": [\"dz\"]}";
    static const char *const dts[] = {"float32", "float64"};
    for (int dt = 0; dt < 2; dt++)
        for (int form = 0; form < 3; form++) {
            char text[4096];
            snprintf(text, sizeof text, fmt, dts[dt], dts[dt], dts[dt], dts[dt],
                     form == 0 ? chain : form == 1 ? gemm_gelu : training);
            test_rng r = {80u + (uint64_t)(dt * 3 + form)};
            int64_t xs[] = {29, 5}, ys[] = {29, 37};
            const pardo_dtype d = dt ? PARDO_F64 : PARDO_F32;
            pardo_tensor *x = test_tensor_random(&r, d, 2, xs, -3, 3), *dy = test_tensor_random(&r, d, 2, ys, -1, 1);
            static const char *const names[] = {"x", "dy"}, *const outs[] = {"a", "dz"};
            pardo_tensor *const feeds[] = {x, dy};
            char what[64];
            snprintf(what, sizeof what, "gelu %s form %d", dts[dt], form);
            fused_and_unfused_agree(text, 2, names, feeds, form == 2 ? 2 : 1, outs, what, true);
            pardo_program *p = test_program(text, "graph.json");
            pardo_program *f = fused(p, outs, form == 2 ? 2 : 1);
            const pardo_op *mm = &f->blocks[0].ops[0];
            ck_assert_str_eq(mm->type, "matmul");
            ck_assert_str_eq(attr_str(mm, "activation"), form == 2 ? "" : "gelu");
            ck_assert_int_eq(count_ops(f, 0, "gelu"), form == 2 ? 1 : 0);
            pardo_program_free(f);
            pardo_program_free(p);
            pardo_tensor_release(x);
            pardo_tensor_release(dy);
        }
}
END_TEST

/* conv2d -> relu (inference), and with relu_grad -> conv2d_grad as
 * autodiff writes them (training): conv2d {activation: relu} writing the
 * relu's output and conv2d_grad {activation: relu} reading it and its
 * gradient, with the bits of the ops one by one, float32 and float64; a
 * relu whose input is also fetched stays. */
START_TEST(conv_takes_in_its_relu) {
    static const char fmt[] =
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"%s\", \"shape\": [-1, 2, 6, 5], \"role\": \"feed\"},"
        "\"da\": {\"dtype\": \"%s\", \"shape\": [-1, 3, 6, 5], \"role\": \"feed\"},"
        "\"w\": {\"dtype\": \"%s\", \"shape\": [3, 2, 3, 3], \"role\": \"param\", \"init\": "
        "{\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 7}},"
        "\"b\": {\"dtype\": \"%s\", \"shape\": [3], \"role\": \"param\", \"value\": [0.5, -0.25, 0]}},"
        "\"ops\": [{\"op\": \"conv2d\", \"in\": [\"x\", \"w\", \"b\"], \"out\": [\"z\"], "
        "\"attrs\": {\"pads\": [1, 1, 1, 1]}},"
        "{\"op\": \"relu\", \"in\": [\"z\"], \"out\": [\"a\"]}%s]}]}";
    static const char grads[] =
        ", {\"op\": \"relu_grad\", \"in\": [\"\", \"a\", \"da\"], \"out\": [\"dz\"]},"
        "{\"op\": \"conv2d_grad\", \"in\": [\"x\", \"w\", \"b\", \"\", \"dz\"], \"out\": [\"dx\", \"dw\", \"db\"], "
        "\"attrs\": {\"pads\": [1, 1, 1, 1]}}";
    static const char *const dts[] = {"float32", "float64"};
    for (int dt = 0; dt < 2; dt++)
        for (int train = 0; train < 2; train++) {
            char text[4096];
            snprintf(text, sizeof text, fmt, dts[dt], dts[dt], dts[dt], dts[dt], train ? grads : "");
            test_rng r = {60u + (uint64_t)(dt * 2 + train)};
            int64_t xs[] = {3, 2, 6, 5}, as[] = {3, 3, 6, 5};
            const pardo_dtype d = dt ? PARDO_F64 : PARDO_F32;
            pardo_tensor *x = test_tensor_random(&r, d, 4, xs, -1, 1), *da = test_tensor_random(&r, d, 4, as, -1, 1);
            static const char *const names[] = {"x", "da"}, *const outs[] = {"a", "dx", "dw", "db"};
            pardo_tensor *const feeds[] = {x, da};
            char what[64];
            snprintf(what, sizeof what, "conv %s%s", dts[dt], train ? " training" : "");
            fused_and_unfused_agree(text, 2, names, feeds, train ? 4 : 1, outs, what, true);
            pardo_program *p = test_program(text, "graph.json");
            pardo_program *f = fused(p, outs, train ? 4 : 1);
            ck_assert_int_eq(count_ops(f, 0, "relu") + count_ops(f, 0, "relu_grad"), 0);
            static const char *const cv_out[] = {"a"}, *const cg_in[] = {"x", "w", "b", "a", "da"};
            assert_names(&f->blocks[0].ops[0], true, cv_out, 1);
            ck_assert_str_eq(attr_str(&f->blocks[0].ops[0], "activation"), "relu");
            if (train) {
                assert_names(&f->blocks[0].ops[1], false, cg_in, 5);
                ck_assert_str_eq(attr_str(&f->blocks[0].ops[1], "activation"), "relu");
            }
            pardo_program_free(f);
            /* z fetched too: nothing fuses */
            static const char *const keep_z[] = {"a", "dx", "dw", "db", "z"};
            f = fused(p, keep_z, 5);
            ck_assert_int_eq(count_ops(f, 0, "relu"), 1);
            pardo_program_free(f);
            pardo_program_free(p);
            pardo_tensor_release(x);
            pardo_tensor_release(da);
        }
}
END_TEST

/* A float32 merge of parts taken into the sgd that reads it for a plain
 * mean (over 2 and 4 parts: times the exact inverse; over 3: a divide), a
 * sum and a weighted mean of unequal parts, with an empty part (weight 0,
 * its mean over no rows NaN: skipped, as the merge skips it), and over 70
 * parts (more than an update merges as it runs: merged first): the same
 * param as the two ops one by one. 37 elements: whole lanes and a tail. */
START_TEST(merged_updates_keep_the_bits) {
    static const struct {
        const char *mode;
        bool weighted; // weight_by the parts' rows
        int64_t rows;
        int parts;
    } cases[] = {{"mean", false, 5, 2}, {"sum", false, 5, 2},  {"mean", true, 5, 2},  {"mean", true, 1, 2},
                 {"mean", false, 6, 3}, {"mean", false, 8, 4}, {"mean", true, 75, 70}, {"sum", false, 70, 70}};
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
        int64_t xs[] = {cases[c].rows, 37};
        test_rng r = {12};
        pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1);
        static const char *const names[] = {"x"}, *const params[] = {"w"};
        char what[64];
        snprintf(what, sizeof what, "%s%s, %lld rows in %d parts", cases[c].mode, weighted ? " weighted" : "",
                 (long long)cases[c].rows, cases[c].parts);
        fused_and_unfused_agree(json, 1, names, &x, 1, params, what, true);
        pardo_tensor_release(x);
    }
}
END_TEST

/* A matmul with an activation has no gradient of its own (the pass runs
 * after autodiff); the error says what to write instead. (A bias input,
 * an imported Gemm's, has one: check_ops_matmul.) */
START_TEST(fused_matmul_refuses_autodiff) {
    pardo_status st;
    pardo_program *p = NULL;
    int rc = test_program_status(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 3], \"role\": \"feed\"},"
        "\"w\": {\"dtype\": \"float32\", \"shape\": [3, 4], \"role\": \"param\", \"value\": [1,2,3,4,5,6,7,8,9,1,2,3]},"
        "\"b\": {\"dtype\": \"float32\", \"shape\": [4], \"role\": \"param\", \"value\": [1, 2, 3, 4]}},"
        "\"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\", \"b\"], \"out\": [\"h\"], \"attrs\": {\"activation\": \"relu\"}},"
        "{\"op\": \"reduce_sum\", \"in\": [\"h\"], \"out\": [\"loss\"], \"attrs\": {\"keepdims\": false}}]}]}",
        "fusedmm.json", &p, &st);
    ck_assert_msg(rc == PARDO_OK, "%s", st.msg);
    pardo_pass_options o = pardo_pass_defaults();
    o.loss = "loss";
    ck_assert_int_eq(pardo_pass_backward(p, &o, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "matmul, add and relu"), "%s", st.msg);
    pardo_program_free(p);
}
END_TEST

/* The fused forms' bad inputs are refused when the graph is checked, each
 * naming what it expected. */
START_TEST(fused_forms_refuse_bad_inputs) {
#define FX "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 3], \"role\": \"feed\"}, " \
           "\"w\": {\"dtype\": \"float32\", \"shape\": [3, 4], \"role\": \"param\", \"init\": {\"fill\": \"uniform\"}}, " \
           "\"dy\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"role\": \"feed\"}, "
    static const struct {
        const char *vars, *op, *want;
        int code;
    } cases[] = {
        {"\"b\": {\"dtype\": \"float32\", \"shape\": [4], \"role\": \"param\", \"value\": [1, 2, 3, 4]}",
         "{\"op\": \"matmul\", \"in\": [\"x\", \"w\", \"b\"], \"out\": [\"y\"], \"attrs\": {\"activation\": \"tanh\"}}",
         "attr 'activation' is \"tanh\", expected \"none\", \"relu\" or \"gelu\"", PARDO_EINVAL},
        {"\"b\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\", \"value\": [1, 2, 3]}",
         "{\"op\": \"matmul\", \"in\": [\"x\", \"w\", \"b\"], \"out\": [\"y\"]}",
         "input 2 'bias' has shape [3], which does not broadcast to the product's [-1, 4]", PARDO_ESHAPE},
        {"\"b\": {\"dtype\": \"float64\", \"shape\": [4], \"role\": \"param\", \"value\": [1, 2, 3, 4]}",
         "{\"op\": \"matmul\", \"in\": [\"x\", \"w\", \"b\"], \"out\": [\"y\"]}",
         "input 2 'bias' has dtype float64, expected float32 like the product", PARDO_ESHAPE},
        {"\"b\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\", \"value\": [1, 2, 3]}",
         "{\"op\": \"matmul_grad\", \"in\": [\"x\", \"w\", \"\", \"dy\", \"\", \"b\"], \"out\": [\"dx\", \"dw\", \"db\"]}",
         "input 5 'bias' needs input 4 'relu_y'", PARDO_EINVAL},
        {"\"b\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\", \"value\": [1, 2, 3]}",
         "{\"op\": \"matmul_grad\", \"in\": [\"x\", \"w\", \"\", \"dy\"], \"out\": [\"dx\", \"dw\", \"db\"]}",
         "output 2 'dbias' needs input 5 'bias'", PARDO_EINVAL},
        {"\"lr\": {\"dtype\": \"float32\", \"shape\": [], \"value\": [0.1]}",
         "{\"op\": \"sgd\", \"in\": [\"w\", \"w\", \"lr\"], \"out\": [\"w\"], \"attrs\": {\"grad_merge\": \"max\"}, "
         "\"role\": \"optimize\"}",
         "attr 'grad_merge' is \"max\", expected \"mean\" or \"sum\"", PARDO_EINVAL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char text[2048];
        snprintf(text, sizeof text, "{\"pardo\": 1, \"blocks\": [{\"vars\": {" FX "%s}, \"ops\": [%s]}]}", cases[c].vars,
                 cases[c].op);
        pardo_status st;
        ck_assert_int_eq(test_program_status(text, "bad.json", NULL, &st), cases[c].code);
        ck_assert_msg(strstr(st.msg, cases[c].want) && strstr(st.msg, "bad.json:"), "case %zu: %s", c, st.msg);
    }
#undef FX
}
END_TEST

Suite *make_fuse_suite(void) {
    Suite *s = suite_create("fuse");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pass_rewrites_private_chains);
    tcase_add_test(tc, pass_leaves_chains_others_can_see);
    tcase_add_test(tc, fused_training_keeps_the_bits);
    tcase_add_test(tc, fused_ops_have_one_trace_event);
    tcase_add_test(tc, bias_shapes_keep_the_bits);
    tcase_add_test(tc, backward_chain_keeps_the_bits_with_batch_dims);
    tcase_add_test(tc, bias_grad_copy_is_passed_on);
    tcase_add_test(tc, softmax_takes_in_its_scale);
    tcase_add_test(tc, conv_takes_in_its_relu);
    tcase_add_test(tc, matmul_takes_in_a_gelu);
    tcase_add_test(tc, merged_updates_keep_the_bits);
    tcase_add_test(tc, fused_matmul_refuses_autodiff);
    tcase_add_test(tc, fused_forms_refuse_bad_inputs);
    suite_add_tcase(s, tc);
    return s;
}
