/* check_train.c - the pieces of `pardo train` beside the loader: the
 * training counters through a checkpoint (round trip, bad entries), a
 * resumed executor's step count (dropout masks follow it), the loss and
 * logits found by role, and the evaluation program: no backward or
 * optimize op left, logits brought back from the parallel_do, the same
 * loss and logits as the plain inference graph, params untouched. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "train/eval_program.h"
#include "train/lr_schedule.h"
#include "graph_test_util.h"
#include "pass.h"
#include "io/safetensors.h"
#include "test_util.h"
#include "train/train_state.h"

/* A classifier: 4 features, 3 classes; ROLE is the loss op's role. */
#define CLASSIFIER(ROLE)                                                                                               \
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"                                                                         \
    "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"role\": \"feed\"},"                                         \
    "\"y\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"},"                                              \
    "\"w\": {\"dtype\": \"float32\", \"shape\": [4, 3], \"role\": \"param\", \"init\": {\"fill\": "                    \
    "\"xavier_uniform\", \"seed\": 4}},"                                                                               \
    "\"b\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\", \"init\": {\"fill\": \"uniform\", "          \
    "\"seed\": 5}}},"                                                                                                  \
    "\"ops\": ["                                                                                                       \
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"], \"role\": \"forward\"},"                           \
    "{\"op\": \"add\", \"in\": [\"h\", \"b\"], \"out\": [\"logits\"], \"role\": \"forward\"},"                         \
    "{\"op\": \"softmax_cross_entropy\", \"in\": [\"logits\", \"y\"], \"out\": [\"loss\"], \"role\": \"" ROLE "\"}"    \
    "]}]}"
static const char classifier[] = CLASSIFIER("loss");

/* The classifier with gradients and adam, and with parts > 0 the multi-CPU rewrite. */
static pardo_program *training_program(int parts) {
    return test_training_program(classifier, "clf.json", "loss", PARDO_OPTIMIZER_ADAM, pardo_pass_defaults().lr, parts);
}

/* The learning rate schedules against torch.optim.lr_scheduler's rates
 * (tests/fixtures/optim/lr_*.npy, 40 steps at base 0.1), and bad forms. */
START_TEST(lr_schedules_match_pytorch) {
    static const struct {
        const char *fixture, *form;
        int64_t warmup;
    } cases[] = {{"lr_step", "step:7:0.5", 0}, {"lr_cosine", "cosine", 0}, {"lr_linear", "linear", 0},
                 {"lr_warm_cosine", "cosine", 10}};
    char err[160], path[64];
    for (int c = 0; c < 4; c++) {
        pardo_lr_schedule s;
        ck_assert_msg(pardo_lr_schedule_parse(cases[c].form, &s, err, sizeof err), "%s", err);
        s.warmup = cases[c].warmup;
        snprintf(path, sizeof path, "optim/%s.npy", cases[c].fixture);
        pardo_tensor *want = test_npy_load(path);
        ck_assert_int_eq(want->numel, 40);
        for (int64_t step = 0; step < 40; step++) {
            double got = 0.1 * pardo_lr_factor(&s, step, 40), w = pardo_tensor_get_f64(want, step);
            ck_assert_msg(fabs(got - w) <= 1e-12 + 1e-9 * fabs(w), "%s step %lld: %.17g, torch %.17g", cases[c].form,
                          (long long)step, got, w);
        }
        pardo_tensor_release(want);
    }
    pardo_lr_schedule s;
    ck_assert(pardo_lr_schedule_parse("constant", &s, err, sizeof err) && pardo_lr_factor(&s, 5, 10) == 1);
    static const char *const bad[] = {"step:0:0.5", "step:3", "step:3:0", "step:3:-1", "step:x:0.5", "cosine:3",
                                      "bogus", "", "step:3:0.5x"};
    for (int k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        ck_assert_msg(!pardo_lr_schedule_parse(bad[k], &s, err, sizeof err), "'%s' parsed", bad[k]);
        ck_assert_msg(strstr(err, "step:EVERY:GAMMA") != NULL, "%s", err);
    }
}
END_TEST

/* Removes the last entry of l (the test's own list surgery). */
static void drop_last(pardo_tensor_list *l) {
    l->n--;
    free(l->names[l->n]);
    pardo_tensor_release(l->tensors[l->n]);
}

START_TEST(train_state_round_trip) {
    char dir[64], path[128];
    pardo_status st;
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    pardo_train_state s = {.epoch = 3,
                           .batch = 17,
                           .step = 1234567890123LL,
                           .batch_size = 32,
                           .shuffle = true,
                           .seed = 0xfedcba9876543210ULL,
                           .loss_sum = 0.1 + 1e-17 * 3,
                           .rows = 544,
                           .metric_sum = 517.25,
                           .best_eval_loss = 0.0625 + 1e-17,
                           .best_epoch = 2,
                           .bad_epochs = 1};
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    ck_assert(pardo_train_state_save(&s, &l, &st) == PARDO_OK);
    ck_assert_int_eq(l.n, 12);
    ck_assert_msg(pardo_safetensors_write(path, &l, &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor_list_clear(&l);
    ck_assert(pardo_safetensors_read(path, &l, &st) == PARDO_OK);
    pardo_train_state back;
    bool found = false;
    ck_assert_msg(pardo_train_state_load(&l, path, &back, &found, &st) == PARDO_OK, "%s", st.msg);
    ck_assert(found);
    ck_assert_int_eq(back.epoch, 3);
    ck_assert_int_eq(back.batch, 17);
    ck_assert_int_eq(back.step, 1234567890123LL);
    ck_assert_int_eq(back.batch_size, 32);
    ck_assert(back.shuffle);
    ck_assert(back.seed == 0xfedcba9876543210ULL);
    ck_assert(memcmp(&back.loss_sum, &s.loss_sum, sizeof s.loss_sum) == 0); /* bit for bit */
    ck_assert_int_eq(back.rows, 544);
    ck_assert(back.metric_sum == 517.25);
    ck_assert(memcmp(&back.best_eval_loss, &s.best_eval_loss, sizeof s.best_eval_loss) == 0);
    ck_assert_int_eq(back.best_epoch, 2);
    ck_assert_int_eq(back.bad_epochs, 1);
    pardo_tensor_list_clear(&l);
    /* an older checkpoint, without the early-stopping counters (the last 4 saved): none of them yet */
    ck_assert(pardo_train_state_save(&s, &l, &st) == PARDO_OK);
    for (int k = 0; k < 4; k++) drop_last(&l);
    ck_assert_msg(pardo_train_state_load(&l, path, &back, &found, &st) == PARDO_OK, "%s", st.msg);
    ck_assert(found && back.epoch == 3 && back.best_epoch == 0 && back.bad_epochs == 0 && isinf(back.best_eval_loss));
    pardo_tensor_list_clear(&l);
    /* some of them but not all: refused, naming the one missing */
    ck_assert(pardo_train_state_save(&s, &l, &st) == PARDO_OK);
    drop_last(&l);
    ck_assert(pardo_train_state_load(&l, path, &back, &found, &st) == PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "pardo@bad_epochs") != NULL, "%s", st.msg);
    pardo_tensor_list_clear(&l);
    /* a checkpoint without counters (pardo run's) */
    ck_assert(pardo_train_state_load(&l, path, &back, &found, &st) == PARDO_OK);
    ck_assert(!found);
    ck_assert_int_eq(back.epoch, 0);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* w and v each take w -= 0.1 * dropout(w): the mask depends on the step. */
static const char dropout_graph[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"w\": {\"dtype\": \"float32\", \"shape\": [64], \"role\": \"param\", \"init\": {\"fill\": \"normal\", \"seed\": "
    "1}},"
    "\"v\": {\"dtype\": \"float32\", \"shape\": [64], \"role\": \"param\", \"init\": {\"fill\": \"normal\", \"seed\": "
    "2}}},"
    "\"ops\": ["
    "{\"op\": \"dropout\", \"in\": [\"w\"], \"out\": [\"dw\"], \"attrs\": {\"ratio\": 0.5, \"seed\": 7}},"
    "{\"op\": \"dropout\", \"in\": [\"v\"], \"out\": [\"dv\"], \"attrs\": {\"ratio\": 0.5, \"seed\": 8}},"
    "{\"op\": \"scale\", \"in\": [\"dw\"], \"out\": [\"sw\"], \"attrs\": {\"scale\": -0.1}},"
    "{\"op\": \"scale\", \"in\": [\"dv\"], \"out\": [\"sv\"], \"attrs\": {\"scale\": -0.1}},"
    "{\"op\": \"add\", \"in\": [\"w\", \"sw\"], \"out\": [\"w\"], \"role\": \"optimize\"},"
    "{\"op\": \"add\", \"in\": [\"v\", \"sv\"], \"out\": [\"v\"], \"role\": \"optimize\"}"
    "]}]}";

static pardo_executor *training_executor(const pardo_program *p, int nthreads, const pardo_tensor_list *ckpt) {
    pardo_status st;
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = nthreads, .training = true};
    ck_assert(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK);
    ck_assert_msg(pardo_executor_init_vars(ex, ckpt, "ck", &st) == PARDO_OK, "%s", st.msg);
    return ex;
}

START_TEST(resumed_steps_continue_the_count) {
    pardo_status st;
    pardo_program *p = test_program(dropout_graph, "drop.json");
    for (int nthreads = 1; nthreads <= 2; nthreads++) {
        pardo_executor *straight = training_executor(p, nthreads, NULL);
        for (int i = 0; i < 5; i++) ck_assert(pardo_executor_run(straight, &st) == PARDO_OK);
        pardo_executor *first = training_executor(p, nthreads, NULL);
        for (int i = 0; i < 2; i++) ck_assert(pardo_executor_run(first, &st) == PARDO_OK);
        pardo_tensor_list l;
        pardo_tensor_list_init(&l);
        ck_assert(pardo_executor_collect_state(first, &l, &st) == PARDO_OK);
        pardo_executor *second = training_executor(p, nthreads, &l);
        ck_assert(pardo_executor_set_steps(second, pardo_executor_steps(first), &st) == PARDO_OK);
        pardo_tensor_list_clear(&l);
        for (int i = 0; i < 3; i++) ck_assert_msg(pardo_executor_run(second, &st) == PARDO_OK, "%s", st.msg);
        test_assert_close(pardo_executor_fetch(second, "w"), pardo_executor_fetch(straight, "w"), 0, 0);
        test_assert_close(pardo_executor_fetch(second, "v"), pardo_executor_fetch(straight, "v"), 0, 0);
        ck_assert_int_eq(pardo_executor_steps(second), 5);
        pardo_executor_free(straight);
        pardo_executor_free(first);
        pardo_executor_free(second);
    }
    pardo_program_free(p);
}
END_TEST

START_TEST(loss_and_logits_are_found_by_role) {
    pardo_status st;
    pardo_loss_info li;
    for (int parts = 0; parts <= 2; parts += 2) {
        pardo_program *p = training_program(parts);
        ck_assert(pardo_program_trains(p));
        ck_assert_msg(pardo_loss_find(p, NULL, &li, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_str_eq(li.loss, "loss");
        ck_assert_str_eq(li.logits, "logits");
        ck_assert_str_eq(li.labels, "y");
        ck_assert_int_eq(li.block, parts ? 1 : 0); /* transpiled: the loss op runs in the parts */
        ck_assert(pardo_loss_find(p, "loss", &li, &st) == PARDO_OK);
        ck_assert_str_eq(li.logits, "logits");
        pardo_program_free(p);
    }
    pardo_program *inference = test_program(classifier, "clf.json");
    ck_assert(!pardo_program_trains(inference));
    pardo_program_free(inference);
}
END_TEST

static void assert_no_training_ops(const pardo_program *q) {
    for (int b = 0; b < q->n_blocks; b++)
        for (int i = 0; i < q->blocks[b].n_ops; i++) {
            const pardo_op *op = &q->blocks[b].ops[i];
            pardo_op_role r = pardo_op_effective_role(q, b, op);
            ck_assert_msg(r != PARDO_OP_BACKWARD && r != PARDO_OP_OPTIMIZE, "block %d op %d %s", b, i, op->type);
            for (int k = 0; k < op->n_out; k++) ck_assert_msg(!strstr(op->out[k], "@GRAD"), "%s", op->out[k]);
        }
}

START_TEST(eval_program_matches_the_inference_graph) {
    pardo_status st;
    test_rng r = {3};
    int64_t xs[2] = {13, 4}, ys[1] = {13};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1);
    pardo_tensor *y = test_tensor_random(&r, PARDO_I64, 1, ys, 0, 3);
    /* the reference: the single-thread inference graph with the same init */
    pardo_program *ref = test_program(classifier, "clf.json");
    pardo_executor *rex = test_executor(ref, 1);
    ck_assert(pardo_executor_feed(rex, "x", x, "x", &st) == PARDO_OK &&
              pardo_executor_feed(rex, "y", y, "y", &st) == PARDO_OK);
    ck_assert_msg(pardo_executor_run(rex, &st) == PARDO_OK, "%s", st.msg);
    for (int parts = 0; parts <= 3; parts += 3) {
        pardo_program *p = training_program(parts);
        pardo_loss_info li;
        ck_assert(pardo_loss_find(p, NULL, &li, &st) == PARDO_OK);
        pardo_program *q = NULL;
        const char *logits = NULL;
        ck_assert_msg(pardo_eval_program_build(p, &li, &q, &logits, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_str_eq(logits, "logits");
        ck_assert_ptr_nonnull(pardo_block_find_var(&q->blocks[0], "logits"));
        assert_no_training_ops(q);
        ck_assert(!pardo_program_trains(q));
        /* the training executor holds the params; the evaluation shares them */
        pardo_executor *tex = training_executor(p, 2, NULL);
        pardo_tensor_list shared;
        pardo_tensor_list_init(&shared);
        ck_assert(pardo_executor_collect_state(tex, &shared, &st) == PARDO_OK);
        pardo_executor *eex = NULL;
        pardo_exec_options eo = {.nthreads = 2};
        ck_assert(pardo_executor_new(q, &eo, &eex, &st) == PARDO_OK);
        ck_assert_msg(pardo_executor_init_vars(eex, &shared, "shared", &st) == PARDO_OK, "%s", st.msg);
        pardo_tensor *w_before = pardo_tensor_clone(pardo_executor_fetch(tex, "w"), &st);
        for (int run = 0; run < 2; run++) {
            ck_assert(pardo_executor_feed(eex, "x", x, "x", &st) == PARDO_OK);
            ck_assert(pardo_executor_feed(eex, "y", y, "y", &st) == PARDO_OK);
            ck_assert_msg(pardo_executor_run(eex, &st) == PARDO_OK, "%s", st.msg);
            test_assert_close(pardo_executor_fetch(eex, "loss"), pardo_executor_fetch(rex, "loss"), 1e-6, 1e-6);
            test_assert_close(pardo_executor_fetch(eex, "logits"), pardo_executor_fetch(rex, "logits"), 0, 0);
        }
        /* nothing was updated: the params and adam's step count are as they were */
        test_assert_close(pardo_executor_fetch(tex, "w"), w_before, 0, 0);
        ck_assert_double_eq(pardo_tensor_get_f64(pardo_executor_fetch(tex, "w@STEP"), 0), 0);
        pardo_tensor_release(w_before);
        pardo_tensor_list_clear(&shared);
        pardo_executor_free(eex);
        pardo_executor_free(tex);
        pardo_program_free(q);
        pardo_program_free(p);
    }
    pardo_executor_free(rex);
    pardo_program_free(ref);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
}
END_TEST

/* ---- errors ---- */

START_TEST(bad_counters_are_rejected) {
    pardo_status st;
    pardo_train_state s = {.epoch = 1, .batch_size = 8};
    pardo_train_state back;
    bool found;
    /* one entry missing */
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    ck_assert(pardo_train_state_save(&s, &l, &st) == PARDO_OK);
    pardo_tensor_list partial;
    pardo_tensor_list_init(&partial);
    for (int i = 0; i < l.n; i++)
        if (strcmp(l.names[i], "pardo@rows") != 0) pardo_tensor_list_add(&partial, l.names[i], l.tensors[i], &st);
    ck_assert_int_eq(pardo_train_state_load(&partial, "ck.safetensors", &back, &found, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "ck.safetensors") && strstr(st.msg, "pardo@rows"), "%s", st.msg);
    /* the wrong dtype */
    pardo_tensor *f = pardo_tensor_new_cpu(PARDO_F32, 0, NULL, &st);
    pardo_tensor_list_add(&partial, "pardo@rows", f, &st);
    ck_assert_int_eq(pardo_train_state_load(&partial, "ck.safetensors", &back, &found, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "pardo@rows") && strstr(st.msg, "int64"), "%s", st.msg);
    pardo_tensor_release(f);
    pardo_tensor_list_clear(&partial);
    /* a negative counter, a zero batch size */
    for (int i = 0; i < l.n; i++) {
        if (strcmp(l.names[i], "pardo@epoch") == 0) *(int64_t *)pardo_tensor_data(l.tensors[i]) = -2;
    }
    ck_assert_int_eq(pardo_train_state_load(&l, "ck.safetensors", &back, &found, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "pardo@epoch") && strstr(st.msg, "-2"), "%s", st.msg);
    pardo_tensor_list_clear(&l);
    s.batch_size = 0;
    ck_assert(pardo_train_state_save(&s, &l, &st) == PARDO_OK);
    ck_assert_int_eq(pardo_train_state_load(&l, "ck.safetensors", &back, &found, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "pardo@batch_size"), "%s", st.msg);
    pardo_tensor_list_clear(&l);
}
END_TEST

START_TEST(bad_losses_are_rejected) {
    pardo_status st;
    pardo_loss_info li;
    pardo_program *p = training_program(2);
    ck_assert_int_eq(pardo_loss_find(p, "nope", &li, &st), PARDO_ENOTFOUND);
    ck_assert_msg(strstr(st.msg, "clf.json") && strstr(st.msg, "'nope'"), "%s", st.msg);
    ck_assert_int_eq(pardo_loss_find(p, "w", &li, &st), PARDO_EINVAL); /* a param */
    ck_assert_msg(strstr(st.msg, "'w'") && strstr(st.msg, "param"), "%s", st.msg);
    ck_assert_int_eq(pardo_loss_find(p, "x", &li, &st), PARDO_EINVAL); /* a feed */
    ck_assert_int_eq(pardo_loss_find(p, "y", &li, &st), PARDO_EINVAL); /* not a float */
    pardo_program_free(p);
    /* no op of role loss: the loss must be named */
    pardo_program *q = test_program(CLASSIFIER("forward"), "clf.json");
    ck_assert_int_eq(pardo_loss_find(q, NULL, &li, &st), PARDO_ENOTFOUND);
    ck_assert_msg(strstr(st.msg, "--loss"), "%s", st.msg);
    ck_assert(pardo_loss_find(q, "loss", &li, &st) == PARDO_OK); /* named: fine, and no logits known */
    ck_assert_ptr_null(li.logits);
    pardo_program_free(q);
}
END_TEST

Suite *make_train_suite(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, train_state_round_trip);
    tcase_add_test(tc, lr_schedules_match_pytorch);
    tcase_add_test(tc, resumed_steps_continue_the_count);
    tcase_add_test(tc, loss_and_logits_are_found_by_role);
    tcase_add_test(tc, eval_program_matches_the_inference_graph);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, bad_counters_are_rejected);
    tcase_add_test(te, bad_losses_are_rejected);
    suite_add_tcase(s, te);
    return s;
}
