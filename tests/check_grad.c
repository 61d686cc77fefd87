/* check_grad.c - the gradient machinery shared by every op: the standard
 * builder's op layout, and the registry-wide rule that each differentiable
 * op's gradient op exists and takes the forward op's attrs. Each op family's
 * suite checks its own gradients against finite differences. */
#include <check.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "test_util.h"

START_TEST(standard_builder_layout) {
    pardo_status st;
    char *in[2] = {"a", ""}, *out[1] = {"y"};
    pardo_op fwd;
    memset(&fwd, 0, sizeof fwd);
    fwd.type = "identity";
    fwd.name = "id";
    fwd.in = in;
    fwd.n_in = 1;
    fwd.out = out;
    fwd.n_out = 1;
    const char *og[1] = {"y@GRAD"}, *ig[1] = {"a@GRAD"};
    pardo_grad_request req = {.fwd = &fwd, .out_grads = og, .in_grads = ig};
    pardo_block blk;
    memset(&blk, 0, sizeof blk);
    ck_assert_int_eq(pardo_grad_standard(&req, &blk, &st), PARDO_OK);
    ck_assert_int_eq(blk.n_ops, 1);
    const pardo_op *g = &blk.ops[0];
    ck_assert_str_eq(g->type, "identity_grad");
    ck_assert_str_eq(g->name, "id@grad");
    ck_assert_int_eq(g->role, PARDO_OP_BACKWARD);
    ck_assert_int_eq(g->n_in, 3);
    ck_assert_str_eq(g->in[0], "a");
    ck_assert_str_eq(g->in[1], "y");
    ck_assert_str_eq(g->in[2], "y@GRAD");
    ck_assert_int_eq(g->n_out, 1);
    ck_assert_str_eq(g->out[0], "a@GRAD");
    pardo_block_clear(&blk);
}
END_TEST

START_TEST(identity_gradient) {
    test_rng r = {3};
    int64_t shape[2] = {3, 4};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, shape, -1, 1);
    test_check_grad_default("identity", NULL, 1, &x, 1, 1u);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(every_gradient_op_is_registered) {
    char gtype[128];
    for (int i = 0; i < pardo_op_count(); i++) {
        const pardo_op_def *d = pardo_op_at(i);
        if (d->grad != pardo_grad_standard) continue;
        const pardo_op_def *g = pardo_op_lookup(pardo_grad_op_type(d->type, gtype, sizeof gtype));
        ck_assert_msg(g != NULL, "op '%s' uses the standard gradient builder but '%s' is not registered", d->type, gtype);
        /* the gradient op takes T's inputs, outputs and output gradients */
        bool variadic = g->n_inputs > 0 && g->inputs[g->n_inputs - 1].variadic;
        ck_assert_msg(variadic || g->n_inputs == d->n_inputs + 2 * d->n_outputs,
                      "%s has %d inputs, expected %d (inputs, outputs, output gradients of %s)", gtype, g->n_inputs,
                      d->n_inputs + 2 * d->n_outputs, d->type);
        ck_assert_msg(g->n_outputs == d->n_inputs || variadic, "%s has %d outputs, expected %d", gtype, g->n_outputs,
                      d->n_inputs);
        for (int k = 0; k < g->n_outputs; k++)
            ck_assert_msg(g->outputs[k].optional, "%s output %d must be optional (\"\" when not needed)", gtype, k);
        /* every forward attr is accepted by the gradient op */
        for (int a = 0; a < d->n_attrs; a++) {
            bool found = false;
            for (int b = 0; b < g->n_attrs; b++) found |= strcmp(g->attrs[b].name, d->attrs[a].name) == 0;
            ck_assert_msg(found, "%s does not take %s's attr '%s'", gtype, d->type, d->attrs[a].name);
        }
    }
}
END_TEST

Suite *make_grad_suite(void) {
    Suite *s = suite_create("grad");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, standard_builder_layout);
    tcase_add_test(tc, identity_gradient);
    tcase_add_test(tc, every_gradient_op_is_registered);
    suite_add_tcase(s, tc);
    return s;
}
