/* check_transpile.c - the whole transpiler (backward, optimizer, multi_cpu)
 * against PyTorch training runs (tests/fixtures/make_transpile_fixtures.py),
 * across part and thread counts, uneven batches, inference graphs, and the
 * written graph file. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "io/graph_json.h"
#include "graph_test_util.h"
#include "pass.h"
#include "exec/stage_plan.h"
#include "test_util.h"

static const char *const params[] = {"w1", "b1", "w2", "b2"};

static pardo_program *load_mlp(void) {
    pardo_status st;
    pardo_program *p = NULL;
    ck_assert_msg(pardo_graph_load(test_fixture("transpile/mlp.json"), &p, &st) == PARDO_OK, "%s", st.msg);
    pardo_pass_options opt = pardo_pass_defaults();
    ck_assert_msg(pardo_pass_check(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    return p;
}

/* --backward loss [--optimizer kind --lr lr] --parts parts (0: the default; -1: --no-parallel). */
static pardo_program *transpiled(const char *loss, pardo_optimizer_kind kind, double lr, bool nesterov, int parts) {
    pardo_status st;
    pardo_program *p = load_mlp();
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = loss;
    opt.optimizer = kind;
    opt.lr = lr;
    opt.nesterov = nesterov;
    opt.parts = parts;
    if (loss) ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "backward: %s", st.msg);
    if (kind != PARDO_OPTIMIZER_NONE) ck_assert_msg(pardo_pass_optimizer(p, &opt, &st) == PARDO_OK, "optimizer: %s", st.msg);
    if (parts >= 0) ck_assert_msg(pardo_pass_multi_cpu(p, &opt, &st) == PARDO_OK, "multi_cpu: %s", st.msg);
    return p;
}

static pardo_tensor *fixture(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "transpile/%s.npy", name);
    return test_npy_load(path);
}

/* An executor on nthreads with the fixture's initial params and batch `batch` ("" or "97"). */
static pardo_executor *start(const pardo_program *p, int nthreads, const char *batch) {
    pardo_status st;
    pardo_executor *ex = NULL;
    pardo_exec_options eo = {.nthreads = nthreads};
    ck_assert_int_eq(pardo_executor_new(p, &eo, &ex, &st), PARDO_OK);
    pardo_tensor_list init;
    pardo_tensor_list_init(&init);
    for (int i = 0; i < 4; i++) {
        pardo_tensor *t = fixture(params[i]);
        pardo_tensor_list_add(&init, params[i], t, &st);
        pardo_tensor_release(t);
    }
    ck_assert_msg(pardo_executor_init_vars(ex, &init, "fixtures", &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor_list_clear(&init);
    char name[16];
    const char *feeds[2] = {"x", "y"};
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "%s%s", feeds[i], batch);
        pardo_tensor *t = fixture(name);
        ck_assert_msg(pardo_executor_feed(ex, feeds[i], t, name, &st) == PARDO_OK, "%s", st.msg);
        pardo_tensor_release(t);
    }
    return ex;
}

static void steps(pardo_executor *ex, int n) {
    pardo_status st;
    for (int i = 0; i < n; i++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
}

/* Params (or their gradients, prefix "grad97") against the fixtures. */
static void expect_fixture(pardo_executor *ex, const char *prefix, const char *suffix, double rtol) {
    char want_name[64], var[64];
    for (int i = 0; i < 4; i++) {
        snprintf(want_name, sizeof want_name, "%s_%s", prefix, params[i]);
        snprintf(var, sizeof var, "%s%s", params[i], suffix);
        pardo_tensor *want = fixture(want_name), *got = pardo_executor_fetch(ex, var);
        ck_assert_msg(got != NULL, "no var %s", var);
        test_assert_close(got, want, rtol, 1e-7);
        pardo_tensor_release(want);
    }
}

static const struct {
    const char *name;
    pardo_optimizer_kind kind;
    double lr;
    bool nesterov;
} runs[] = {
    {"sgd", PARDO_OPTIMIZER_SGD, 0.1, false},
    {"momentum", PARDO_OPTIMIZER_MOMENTUM, 0.1, false},
    {"nesterov", PARDO_OPTIMIZER_MOMENTUM, 0.1, true},
    {"adam", PARDO_OPTIMIZER_ADAM, 0.01, false},
};

/* --backward loss --optimizer X --parts 1: three steps equal torch.optim's. */
START_TEST(three_steps_match_pytorch) {
    for (int r = 0; r < 4; r++) {
        pardo_program *p = transpiled("loss", runs[r].kind, runs[r].lr, runs[r].nesterov, 1);
        pardo_executor *ex = start(p, 1, "");
        steps(ex, 3);
        expect_fixture(ex, runs[r].name, "", 1e-5);
        pardo_executor_free(ex);
        pardo_program_free(p);
    }
}
END_TEST

/* Weight decay, adamw and clipping (transpile --weight-decay, --optimizer
 * adamw, --clip-grad-norm): four steps equal torch.optim's (with
 * clip_grad_norm_ before each step) at --parts 1 and 2, on 1 and 2 threads,
 * and the fusion pass (merge -> update) gives the unfused graph's bits. */
START_TEST(tuned_optimizers_match_pytorch) {
    static const struct {
        const char *name;
        pardo_optimizer_kind kind;
        double lr, wd, clip, mu;
    } tuned[] = {
        {"sgd_wd", PARDO_OPTIMIZER_SGD, 0.1, 0.05, 0, 0},
        {"momentum_wd", PARDO_OPTIMIZER_MOMENTUM, 0.1, 0.02, 0, 0.9},
        {"adamw", PARDO_OPTIMIZER_ADAMW, 0.01, 0.1, 0, 0},
        {"sgd_clip", PARDO_OPTIMIZER_SGD, 0.1, NAN, 0.2, 0},
        {"adamw_clip", PARDO_OPTIMIZER_ADAMW, 0.01, 0.1, 0.2, 0},
    };
    pardo_status st;
    pardo_tensor *unfused[4] = {0};
    for (int r = 0; r < 5; r++)
        for (int parts = 1; parts <= 2; parts++)
            for (int fused = 0; fused < 2; fused++) {
                pardo_program *p = load_mlp();
                pardo_pass_options opt = pardo_pass_defaults();
                opt.loss = "loss";
                opt.optimizer = tuned[r].kind;
                opt.lr = tuned[r].lr;
                opt.weight_decay = tuned[r].wd;
                opt.clip_grad_norm = tuned[r].clip;
                if (tuned[r].mu) opt.mu = tuned[r].mu;
                opt.parts = parts;
                ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "%s", st.msg);
                ck_assert_msg(pardo_pass_optimizer(p, &opt, &st) == PARDO_OK, "%s", st.msg);
                ck_assert_msg(pardo_pass_multi_cpu(p, &opt, &st) == PARDO_OK, "%s", st.msg);
                if (fused) ck_assert_msg(pardo_pass_fuse(p, &opt, &st) == PARDO_OK, "%s", st.msg);
                pardo_tensor *first[4] = {0};
                for (int threads = 1; threads <= 2; threads++) {
                    pardo_executor *ex = start(p, threads, "");
                    steps(ex, 4);
                    expect_fixture(ex, tuned[r].name, "", 2e-5);
                    for (int i = 0; i < 4; i++) {
                        pardo_tensor *got = pardo_executor_fetch(ex, params[i]);
                        if (threads == 1) first[i] = pardo_tensor_clone(got, NULL);
                        else ck_assert_msg(memcmp(pardo_tensor_data(got), pardo_tensor_data(first[i]), got->nbytes) == 0,
                                           "%s parts %d: 2 threads differ from 1", tuned[r].name, parts);
                        if (fused && threads == 1)
                            ck_assert_msg(memcmp(pardo_tensor_data(got), pardo_tensor_data(unfused[i]), got->nbytes) == 0,
                                          "%s parts %d: fused differs from unfused", tuned[r].name, parts);
                    }
                    pardo_executor_free(ex);
                }
                for (int i = 0; i < 4; i++) {
                    if (!fused) {
                        pardo_tensor_release(unfused[i]);
                        unfused[i] = pardo_tensor_retain(first[i]);
                    }
                    pardo_tensor_release(first[i]);
                }
                pardo_program_free(p);
            }
    for (int i = 0; i < 4; i++) pardo_tensor_release(unfused[i]);
}
END_TEST

/* --parts 4 at 1, 2 and 4 threads: bitwise the same across thread counts,
 * and within float rounding of torch's single-thread run. */
START_TEST(parts_are_thread_count_independent) {
    for (int r = 0; r < 4; r += 3) { /* sgd and adam */
        pardo_program *p = transpiled("loss", runs[r].kind, runs[r].lr, false, 4);
        pardo_tensor *first[4] = {0};
        const int threads[3] = {1, 2, 4};
        for (int t = 0; t < 3; t++) {
            pardo_executor *ex = start(p, threads[t], "");
            steps(ex, 3);
            expect_fixture(ex, runs[r].name, "", 1e-5);
            for (int i = 0; i < 4; i++) {
                pardo_tensor *got = pardo_executor_fetch(ex, params[i]);
                if (t == 0) first[i] = pardo_tensor_clone(got, NULL);
                else ck_assert_msg(memcmp(pardo_tensor_data(got), pardo_tensor_data(first[i]), got->nbytes) == 0,
                                   "%s %s: %d threads differ bitwise from 1", runs[r].name, params[i], threads[t]);
            }
            pardo_executor_free(ex);
        }
        for (int i = 0; i < 4; i++) pardo_tensor_release(first[i]);
        pardo_program_free(p);
    }
}
END_TEST

/* 97 rows over 4 parts (25, 24, 24, 24): the merged gradient is the
 * single-thread gradient of the batch mean loss. */
START_TEST(uneven_batch_gives_the_full_gradient) {
    pardo_program *p = transpiled("loss", PARDO_OPTIMIZER_NONE, 0, false, 4);
    pardo_executor *ex = start(p, 2, "97");
    steps(ex, 1);
    expect_fixture(ex, "grad97", "@GRAD", 1e-5);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* An inference graph: outputs with a batch dim are concatenated, the loss is
 * averaged by rows; both equal the single-thread run. */
START_TEST(inference_merges_equal_single_thread) {
    pardo_program *single = load_mlp();
    pardo_program *multi = transpiled(NULL, PARDO_OPTIMIZER_NONE, 0, false, 3);
    pardo_executor *a = start(single, 1, "97"), *b = start(multi, 2, "97");
    steps(a, 1);
    steps(b, 1);
    test_assert_close(pardo_executor_fetch(b, "probs"), pardo_executor_fetch(a, "probs"), 1e-6, 1e-7);
    test_assert_close(pardo_executor_fetch(b, "loss"), pardo_executor_fetch(a, "loss"), 1e-6, 1e-7);
    pardo_executor_free(a);
    pardo_executor_free(b);
    pardo_program_free(single);
    pardo_program_free(multi);
}
END_TEST

/* Three steps of p and of q on nthreads over batch `batch` (start's) end with the same params, bit for bit. */
static void same_params_as(const pardo_program *p, const pardo_program *q, int nthreads, const char *batch) {
    pardo_executor *a = start(p, nthreads, batch), *b = start(q, nthreads, batch);
    steps(a, 3);
    steps(b, 3);
    for (int i = 0; i < 4; i++)
        test_assert_close(pardo_executor_fetch(a, params[i]), pardo_executor_fetch(b, params[i]), 0, 0);
    pardo_executor_free(a);
    pardo_executor_free(b);
}

/* The ranks pass (mpirun): one rank_merge op, role backward, right before
 * the first update, reading the batch then every gradient in the order of
 * their merges and writing them in place; in one process it is a copy:
 * the same bits as without it, steps on. A graph with no updates is left
 * alone. */
START_TEST(ranks_pass_puts_rank_merge_before_the_updates) {
    pardo_status st;
    pardo_program *p = transpiled("loss", PARDO_OPTIMIZER_ADAM, 0.01, false, 2);
    pardo_program *plain = pardo_program_clone(p);
    pardo_pass_options opt = pardo_pass_defaults();
    opt.bucket_mb = 0.25;
    ck_assert_msg(pardo_pass_ranks(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    const pardo_block *b0 = &p->blocks[0];
    int at = -1, first_update = -1;
    for (int i = 0; i < b0->n_ops; i++) {
        if (strcmp(b0->ops[i].type, "rank_merge") == 0) {
            ck_assert_int_eq(at, -1);
            at = i;
        }
        if (first_update < 0 && b0->ops[i].role == PARDO_OP_OPTIMIZE) first_update = i;
    }
    ck_assert_int_ge(at, 0);
    ck_assert_int_eq(first_update, at + 1);
    const pardo_op *rm = &b0->ops[at];
    ck_assert_int_eq(rm->role, PARDO_OP_BACKWARD);
    ck_assert_str_eq(rm->in[0], "x");
    ck_assert_int_eq(rm->n_in, 5);
    ck_assert_int_eq(rm->n_out, 4);
    const pardo_value *mb = pardo_attr(rm, "bucket_mb");
    ck_assert(mb && mb->number == 0.25);
    /* the gradients in the order their merges come */
    int last = -1;
    for (int k = 0; k < 4; k++) {
        ck_assert_str_eq(rm->in[k + 1], rm->out[k]);
        ck_assert_ptr_nonnull(strstr(rm->in[k + 1], "@GRAD"));
        int writer = -1;
        for (int i = 0; i < at && writer < 0; i++)
            if (strcmp(b0->ops[i].type, "merge") == 0 && strcmp(b0->ops[i].out[0], rm->in[k + 1]) == 0) writer = i;
        ck_assert_int_gt(writer, last);
        last = writer;
    }
    same_params_as(p, plain, 2, ""); /* one process: the same bits as the graph without it */
    pardo_program_free(p);
    pardo_program_free(plain);
    /* nothing to average in an inference graph */
    p = transpiled(NULL, PARDO_OPTIMIZER_NONE, 0, false, 2);
    int n_ops = p->blocks[0].n_ops;
    ck_assert_int_eq(pardo_pass_ranks(p, &opt, &st), PARDO_OK);
    ck_assert_int_eq(p->blocks[0].n_ops, n_ops);
    pardo_program_free(p);
}
END_TEST

/* The ranks pass on a graph whose updates follow their gradients at once (no parts: --no-parallel): the updates
 * move after the last gradient's writer, in their order, and rank_merge before them reads exactly the gradients
 * the updates read (no activation's gradient, which is batch-sized); one process: the same bits as the graph
 * without it. An update that cannot move past an op (one that reads what it updates) is refused, naming both. */
START_TEST(ranks_pass_moves_interleaved_updates_after_the_backward_pass) {
    pardo_status st;
    pardo_program *p = transpiled("loss", PARDO_OPTIMIZER_MOMENTUM, 0.05, false, -1);
    pardo_block *b0 = &p->blocks[0];
    int first_update = -1, last_backward = -1;
    for (int i = 0; i < b0->n_ops; i++) {
        if (b0->ops[i].role == PARDO_OP_OPTIMIZE && first_update < 0) first_update = i;
        if (b0->ops[i].role == PARDO_OP_BACKWARD) last_backward = i;
    }
    ck_assert_msg(first_update >= 0 && first_update < last_backward, "the graph's updates are not interleaved");
    pardo_program *plain = pardo_program_clone(p), *refused = pardo_program_clone(p);
    pardo_pass_options opt = pardo_pass_defaults();
    ck_assert_msg(pardo_pass_ranks(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    b0 = &p->blocks[0];
    int at = -1;
    for (int i = 0; i < b0->n_ops; i++)
        if (strcmp(b0->ops[i].type, "rank_merge") == 0) at = i;
    ck_assert_int_ge(at, 0);
    for (int i = 0; i < b0->n_ops; i++) /* every update after it, every other op before it */
        ck_assert_msg((b0->ops[i].role == PARDO_OP_OPTIMIZE) == (i > at), "op %d (%s) is on the wrong side", i,
                      b0->ops[i].type);
    const pardo_op *rm = &b0->ops[at];
    ck_assert_int_eq(rm->n_in, 5);
    for (int k = 1; k < rm->n_in; k++) { /* each the gradient input of one update */
        int readers = 0;
        for (int i = at + 1; i < b0->n_ops; i++) readers += b0->ops[i].n_in > 1 && !strcmp(b0->ops[i].in[1], rm->in[k]);
        ck_assert_msg(readers == 1, "rank_merge's input %d '%s' is not an update's gradient", k, rm->in[k]);
    }
    same_params_as(p, plain, 1, "97");
    /* an op right after the first update that reads the param it updates */
    b0 = &refused->blocks[0];
    const pardo_op *u = &b0->ops[first_update];
    char param[64];
    snprintf(param, sizeof param, "%s", u->out[0]);
    pardo_op *reader = pardo_block_add_op(b0, "identity", &st);
    ck_assert_ptr_nonnull(reader);
    ck_assert_int_eq(pardo_op_add_input(reader, param, &st), PARDO_OK);
    ck_assert_int_eq(pardo_op_add_output(reader, "param_seen", &st), PARDO_OK);
    reader->role = PARDO_OP_BACKWARD;
    pardo_op moved = b0->ops[b0->n_ops - 1];
    memmove(&b0->ops[first_update + 2], &b0->ops[first_update + 1],
            sizeof(pardo_op) * (size_t)(b0->n_ops - 2 - first_update));
    b0->ops[first_update + 1] = moved;
    ck_assert_int_eq(pardo_pass_ranks(refused, &opt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "updates") && strstr(st.msg, param) && strstr(st.msg, "identity"), "%s", st.msg);
    pardo_program_free(p);
    pardo_program_free(plain);
    pardo_program_free(refused);
}
END_TEST

/* ---- the placement pass (--device cuda) ---- */

/* A GPU op (relu, add: CUDA kernels) reads feed x, CPU ops (sin, cos: none) read its output a, a GPU op reads
 * theirs: one to_device before the first relu (x), one to_host before sin shared by cos (a), one to_device
 * before the second relu (b) and none for add (c and a are on the GPU already), each reader renamed; an int32
 * feed goes to relu's GPU side too (where its kernel hands it to the CPU, noted: the executor's choice, which
 * the pass follows); on the CPU the placed graph gives the same bits as the unplaced one. In a
 * CPU-only build no op has a CUDA kernel: nothing is placed, said so. */
START_TEST(place_pass_makes_every_crossing_an_op) {
    const char *graph = "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
                        "\"x\": {\"dtype\": \"float32\", \"shape\": [2, 3], \"role\": \"feed\"},"
                        "\"n\": {\"dtype\": \"int32\", \"shape\": [2, 3], \"role\": \"feed\"}},"
                        "\"ops\": ["
                        "{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"a\"]},"
                        "{\"op\": \"sin\", \"in\": [\"a\"], \"out\": [\"b\"]},"
                        "{\"op\": \"cos\", \"in\": [\"a\"], \"out\": [\"b2\"]},"
                        "{\"op\": \"relu\", \"in\": [\"b\"], \"out\": [\"c\"]},"
                        "{\"op\": \"add\", \"in\": [\"c\", \"a\"], \"out\": [\"d\"]},"
                        "{\"op\": \"add\", \"in\": [\"d\", \"b2\"], \"out\": [\"e\"]},"
                        "{\"op\": \"relu\", \"in\": [\"n\"], \"out\": [\"m\"]}]}]}";
    pardo_program *p = test_program(graph, "place.json"), *plain = pardo_program_clone(p);
    const pardo_op_def *relu = pardo_op_lookup("relu"), *sin_def = pardo_op_lookup("sin");
    ck_assert(sin_def->cuda == NULL);
    if (!relu->cuda) {
        printf("transpile: place_pass_makes_every_crossing_an_op: skipped (a CPU-only build: no op has a CUDA "
               "kernel, nothing crosses)\n");
        pardo_program_free(p);
        pardo_program_free(plain);
        return;
    }
    pardo_status st;
    pardo_pass_options opt = pardo_pass_defaults();
    ck_assert_msg(pardo_pass_place(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    /* type, input, output of each op, in order */
    const char *want[][3] = {{"to_device", "x", "x@CUDA"}, {"relu", "x@CUDA", "a"}, {"to_host", "a", "a@HOST"},
                             {"sin", "a@HOST", "b"},       {"cos", "a@HOST", "b2"},  {"to_device", "b", "b@CUDA"},
                             {"relu", "b@CUDA", "c"},       {"add", "c", "d"},        {"to_device", "b2", "b2@CUDA"},
                             {"add", "d", "e"},             {"to_device", "n", "n@CUDA"}, {"relu", "n@CUDA", "m"}};
    const pardo_block *b0 = &p->blocks[0];
    ck_assert_int_eq(b0->n_ops, 12);
    for (int i = 0; i < 12; i++) {
        ck_assert_str_eq(b0->ops[i].type, want[i][0]);
        ck_assert_str_eq(b0->ops[i].in[0], want[i][1]);
        ck_assert_str_eq(b0->ops[i].out[0], want[i][2]);
    }
    ck_assert_str_eq(b0->ops[7].in[1], "a");       /* the GPU's a: no copy */
    ck_assert_str_eq(b0->ops[9].in[1], "b2@CUDA"); /* cos ran on the CPU */
    const pardo_graph_var *v = pardo_block_find_var(b0, "a@HOST");
    ck_assert(v && v->role == PARDO_VAR_TEMP && v->type.dtype == PARDO_F32 && v->type.ndim == 2);
    /* on the CPU: the same bits */
    pardo_executor *a = test_executor(p, 1), *b = test_executor(plain, 1);
    pardo_tensor *x = test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 3}, (double[]){-1, 0.5, 2, -3, 4, 0.25});
    pardo_tensor *n = pardo_tensor_new_cpu(PARDO_I32, 2, (int64_t[]){2, 3}, &st);
    for (pardo_executor **ex = (pardo_executor *[]){a, b, NULL}; *ex; ex++) {
        test_feed(*ex, "x", x);
        test_feed(*ex, "n", n);
        test_run(*ex);
    }
    test_assert_close(test_fetch(a, "e"), test_fetch(b, "e"), 0, 0);
    pardo_tensor_release(x);
    pardo_tensor_release(n);
    pardo_executor_free(a);
    pardo_executor_free(b);
    pardo_program_free(p);
    pardo_program_free(plain);
}
END_TEST

/* ---- batch_norm's sync form (SyncBatchNorm) ---- */

/* conv2d -> batch_norm (over N x 4 x 4 per channel) -> relu -> linear ->
 * softmax_cross_entropy; %s is batch_norm's extra attrs. */
static const char sync_bn_fmt[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 2, 4, 4], \"role\": \"feed\"},"
    "\"y\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"},"
    "\"k\": {\"dtype\": \"float32\", \"shape\": [3, 2, 3, 3], \"role\": \"param\", \"init\": {\"fill\": \"kaiming_uniform\", \"seed\": 1}},"
    "\"bs\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": 0.5, \"high\": 1.5, \"seed\": 4}},"
    "\"bb\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -0.5, \"high\": 0.5, \"seed\": 5}},"
    "\"bm\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"state\", \"init\": {\"fill\": \"constant\", \"value\": 0}},"
    "\"bv\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"state\", \"init\": {\"fill\": \"constant\", \"value\": 1}},"
    "\"w\": {\"dtype\": \"float32\", \"shape\": [48, 5], \"role\": \"param\", \"init\": {\"fill\": \"xavier_uniform\", \"seed\": 2}}},"
    "\"ops\": ["
    "{\"op\": \"conv2d\", \"in\": [\"x\", \"k\"], \"out\": [\"c\"], \"attrs\": {\"pads\": [1, 1, 1, 1]}},"
    "{\"op\": \"batch_norm\", \"name\": \"bn\", \"in\": [\"c\", \"bs\", \"bb\", \"bm\", \"bv\"], \"out\": [\"n\", \"bm\", \"bv\"],"
    " \"attrs\": {\"momentum\": 0.8%s}, \"role\": \"forward\"},"
    "{\"op\": \"relu\", \"in\": [\"n\"], \"out\": [\"a\"]},"
    "{\"op\": \"flatten\", \"in\": [\"a\"], \"out\": [\"f\"], \"attrs\": {\"axis\": 1}},"
    "{\"op\": \"matmul\", \"in\": [\"f\", \"w\"], \"out\": [\"logits\"]},"
    "{\"op\": \"softmax_cross_entropy\", \"in\": [\"logits\", \"y\"], \"out\": [\"loss\"], \"role\": \"loss\"}"
    "]}]}";

static const char *const bn_vars[] = {"k", "bs", "bb", "w", "bm", "bv"};

/* The graph with sgd (lr 0.2) and parts (0: none): attr sync or --sync-batch-norm; fused too if asked. */
static pardo_program *sync_bn_program(int parts, bool attr, bool flag, bool fused) {
    char text[sizeof sync_bn_fmt + 32];
    snprintf(text, sizeof text, sync_bn_fmt, attr ? ", \"sync\": true" : "");
    pardo_status st;
    pardo_program *p = test_program(text, "sync_bn.json");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = "loss";
    opt.optimizer = PARDO_OPTIMIZER_SGD;
    opt.lr = 0.2;
    opt.parts = parts;
    opt.sync_parts = flag;
    ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_pass_optimizer(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    if (parts) ck_assert_msg(pardo_pass_multi_cpu(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    if (fused) ck_assert_msg(pardo_pass_fuse(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    return p;
}

/* Four training-mode steps on a batch of 13 rows; the params and running statistics after them (cloned: the caller
 * releases them). */
static void sync_bn_train(const pardo_program *p, int threads, pardo_tensor **out) {
    test_rng r = {11};
    int64_t xs[4] = {13, 2, 4, 4}, n = 13;
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 4, xs, -1, 2);
    double yv[13];
    for (int i = 0; i < 13; i++) yv[i] = (i * 7) % 5;
    pardo_tensor *y = test_tensor_from(PARDO_I64, 1, &n, yv);
    pardo_status st;
    pardo_executor *ex = NULL;
    pardo_exec_options eo = {.nthreads = threads, .training = true};
    ck_assert_msg(pardo_executor_new(p, &eo, &ex, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "%s", st.msg);
    test_feed(ex, "x", x);
    test_feed(ex, "y", y);
    for (int s = 0; s < 4; s++) test_run(ex);
    for (int i = 0; i < 6; i++) out[i] = pardo_tensor_clone(test_fetch(ex, bn_vars[i]), NULL);
    pardo_executor_free(ex);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
}

static double max_rel_diff(const pardo_tensor *a, const pardo_tensor *b) {
    double worst = 0;
    for (int64_t i = 0; i < a->numel; i++) {
        double u = pardo_tensor_get_f64(a, i), v = pardo_tensor_get_f64(b, i), d = fabs(u - v) / (fabs(v) + 1e-3);
        if (d > worst) worst = d;
    }
    return worst;
}

/* With the sync form, 2 and 3 parts (13 rows: 7 + 6, 5 + 4 + 4) train as
 * one part does: the same params and running statistics within float
 * rounding (its running variance is the whole batch's, unbiased), by attr
 * sync or --sync-batch-norm, fused or not, bitwise the same at 1 and 2
 * threads. Without it each part normalises by its own rows: the run
 * differs from one part's. */
START_TEST(sync_batch_norm_trains_as_one_part) {
    test_pool_size(2);
    pardo_tensor *one[6], *got[6], *again[6];
    pardo_program *p = sync_bn_program(0, false, false, false);
    sync_bn_train(p, 1, one);
    pardo_program_free(p);
    static const struct {
        int parts;
        bool attr, flag, fused;
    } cfg[] = {{1, true, false, false}, {2, true, false, false}, {3, false, true, false}, {3, true, false, true}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        p = sync_bn_program(cfg[c].parts, cfg[c].attr, cfg[c].flag, cfg[c].fused);
        int joins = 0;
        for (int i = 0; i < p->blocks[1].n_ops; i++) joins += strcmp(p->blocks[1].ops[i].type, "all_reduce") == 0;
        ck_assert_int_eq(joins, 2); /* the forward's statistics and the gradient's sums */
        sync_bn_train(p, 1, got);
        sync_bn_train(p, 2, again);
        for (int i = 0; i < 6; i++) {
            double d = max_rel_diff(got[i], one[i]);
            ck_assert_msg(d < 2e-5, "%d parts: %s differs from one part's by %g", cfg[c].parts, bn_vars[i], d);
            ck_assert_msg(memcmp(pardo_tensor_data(got[i]), pardo_tensor_data(again[i]), got[i]->nbytes) == 0,
                          "%d parts: %s at 2 threads differs from 1", cfg[c].parts, bn_vars[i]);
            pardo_tensor_release(got[i]);
            pardo_tensor_release(again[i]);
        }
        pardo_program_free(p);
    }
    /* the plain form: each part's own statistics */
    p = sync_bn_program(3, false, false, false);
    sync_bn_train(p, 2, got);
    double worst = 0;
    for (int i = 0; i < 6; i++) {
        double d = max_rel_diff(got[i], one[i]);
        if (d > worst) worst = d;
        pardo_tensor_release(got[i]);
    }
    ck_assert_msg(worst > 1e-3, "3 parts without sync train as one part (%g): the test cannot tell", worst);
    pardo_program_free(p);
    for (int i = 0; i < 6; i++) pardo_tensor_release(one[i]);
}
END_TEST

/* The written graph loads, checks, and names its parts readably. */
START_TEST(written_graph_checks_and_reads_well) {
    pardo_status st;
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.json", dir);
    pardo_program *p = transpiled("loss", PARDO_OPTIMIZER_ADAM, 0.01, false, 0);
    ck_assert_msg(pardo_graph_save(p, path, &st) == PARDO_OK, "%s", st.msg);
    pardo_program *q = NULL;
    ck_assert_msg(pardo_graph_load(path, &q, &st) == PARDO_OK, "%s", st.msg);
    pardo_pass_options opt = pardo_pass_defaults();
    ck_assert_msg(pardo_pass_check(q, &opt, &st) == PARDO_OK, "%s", st.msg);
    const char *names[] = {"x@PARTS", "y@PARTS", "w1@GRAD@PARTS", "loss@PARTS", "w1@MOMENT1", "w1@STEP"};
    for (int i = 0; i < 6; i++) ck_assert_msg(pardo_block_find_var(&q->blocks[0], names[i]), "no var %s", names[i]);
    /* a merged gradient and its parts have the param's type (not a -1 for rows the parts do not have) */
    for (int i = 0; i < 4; i++) {
        char grad[64], parts[64];
        snprintf(grad, sizeof grad, "%s@GRAD", params[i]);
        snprintf(parts, sizeof parts, "%s@GRAD@PARTS", params[i]);
        const pardo_graph_var *w = pardo_block_find_var(&q->blocks[0], params[i]);
        const char *merged[] = {grad, parts};
        for (int k = 0; k < 2; k++) {
            const pardo_graph_var *g = pardo_block_find_var(&q->blocks[0], merged[k]);
            ck_assert_msg(w && g, "no var %s or %s", params[i], merged[k]);
            char ws[64], gs[64];
            ck_assert_msg(g->type.dtype == w->type.dtype && g->type.ndim == w->type.ndim &&
                              memcmp(g->type.shape, w->type.shape, sizeof(int64_t) * (size_t)w->type.ndim) == 0,
                          "%s is %s, %s is %s", merged[k], pardo_shape_str(g->type.ndim, g->type.shape, gs, sizeof gs),
                          params[i], pardo_shape_str(w->type.ndim, w->type.shape, ws, sizeof ws));
        }
    }
    ck_assert_int_eq(q->n_blocks, 2);
    ck_assert_str_eq(q->blocks[0].ops[0].type, "split");
    ck_assert_str_eq(q->blocks[0].ops[2].type, "parallel_do");
    ck_assert_str_eq(q->blocks[0].ops[q->blocks[0].n_ops - 1].type, "adam");
    /* the same program written twice is the same text: stable order */
    char *t1 = pardo_graph_to_json(p, &st), *t2 = pardo_graph_to_json(q, &st);
    ck_assert_str_eq(t1, t2);
    free(t1);
    free(t2);
    /* transpiling it again is refused */
    ck_assert_int_eq(pardo_pass_multi_cpu(q, &opt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "already transpiled"), "%s", st.msg);
    pardo_program_free(p);
    pardo_program_free(q);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* The merges and updates after the parallel_do form one stage whose chains
 * are the params (merge dW, update W) and the loss's merge. */
START_TEST(optimizer_stage_runs_params_apart) {
    pardo_status st;
    pardo_program *p = transpiled("loss", PARDO_OPTIMIZER_ADAM, 0.01, false, 2);
    pardo_stage_plan plan;
    ck_assert_int_eq(pardo_stage_plan_build(p, 0, &plan, &st), PARDO_OK);
    const pardo_block *b0 = &p->blocks[0];
    int stages = 0;
    for (int i = 0; i < b0->n_ops; i++) {
        if (plan.stage_end[i] < 0) continue;
        stages++;
        ck_assert_str_eq(b0->ops[i].type, "merge");
        ck_assert_int_eq(plan.stage_end[i], b0->n_ops);
        ck_assert_int_eq(plan.n_chains[i], 6); /* 4 params, the loss, the probs */
        /* each param's merge and adam update share a chain */
        for (int j = i; j < b0->n_ops; j++)
            for (int k = i; k < b0->n_ops; k++) {
                bool same_param = false;
                for (int q = 0; q < 4; q++) {
                    char g[32];
                    snprintf(g, sizeof g, "%s@GRAD", params[q]);
                    bool jj = strcmp(b0->ops[j].out[0], g) == 0 || strcmp(b0->ops[j].out[0], params[q]) == 0;
                    bool kk = strcmp(b0->ops[k].out[0], g) == 0 || strcmp(b0->ops[k].out[0], params[q]) == 0;
                    same_param |= jj && kk;
                }
                if (same_param) ck_assert_int_eq(plan.chain[j], plan.chain[k]);
            }
    }
    ck_assert_int_eq(stages, 1);
    pardo_stage_plan_clear(&plan);
    pardo_program_free(p);
}
END_TEST

START_TEST(ops_that_cannot_be_placed) {
    pardo_status st;
    /* "late" reads w after the update "decay" wrote it: the update cannot move behind it */
    pardo_program *p = test_program(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 2], \"role\": \"feed\"},"
        "\"w\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"param\", \"value\": [1, 2]}},"
        "\"ops\": [{\"op\": \"mul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
        "{\"op\": \"scale\", \"in\": [\"w\"], \"out\": [\"w\"], \"name\": \"decay\"},"
        "{\"op\": \"mul\", \"in\": [\"h\", \"w\"], \"out\": [\"r\"], \"name\": \"late\"}]}]}",
        "late.json");
    pardo_pass_options opt = pardo_pass_defaults();
    ck_assert_int_eq(pardo_pass_multi_cpu(p, &opt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "late.json") && strstr(st.msg, "'late'") && strstr(st.msg, "after the optimize op"),
                  "%s", st.msg);
    pardo_program_free(p);
    /* an op that shares nothing with the update: the update moves behind it, after the parts */
    p = test_program(
        "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
        "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 2], \"role\": \"feed\"},"
        "\"w\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"param\", \"value\": [1, 2]}},"
        "\"ops\": [{\"op\": \"mul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
        "{\"op\": \"scale\", \"in\": [\"w\"], \"out\": [\"w\"], \"name\": \"decay\"},"
        "{\"op\": \"relu\", \"in\": [\"h\"], \"out\": [\"r\"], \"name\": \"late\"}]}]}",
        "late.json");
    ck_assert_msg(pardo_pass_multi_cpu(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    const pardo_block *b0 = &p->blocks[0];
    ck_assert_str_eq(b0->ops[b0->n_ops - 1].name, "decay");
    pardo_program_free(p);
}
END_TEST

Suite *make_transpile_suite(void) {
    Suite *s = suite_create("transpile");
    TCase *tc = tcase_create("Core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, three_steps_match_pytorch);
    tcase_add_test(tc, parts_are_thread_count_independent);
    tcase_add_test(tc, tuned_optimizers_match_pytorch);
    tcase_add_test(tc, uneven_batch_gives_the_full_gradient);
    tcase_add_test(tc, inference_merges_equal_single_thread);
    tcase_add_test(tc, written_graph_checks_and_reads_well);
    tcase_add_test(tc, optimizer_stage_runs_params_apart);
    tcase_add_test(tc, sync_batch_norm_trains_as_one_part);
    tcase_add_test(tc, ranks_pass_puts_rank_merge_before_the_updates);
    tcase_add_test(tc, ranks_pass_moves_interleaved_updates_after_the_backward_pass);
    tcase_add_test(tc, place_pass_makes_every_crossing_an_op);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, ops_that_cannot_be_placed);
    suite_add_tcase(s, te);
    return s;
}
