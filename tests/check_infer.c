/* check_infer.c - the validate and infer_shapes passes: inferred types, and
 * an error with file, line, block, op and var for each kind of mistake. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"

#define HEAD "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
#define X_W "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"role\": \"feed\"}, " \
            "\"w\": {\"dtype\": \"float32\", \"shape\": [4, 3], \"role\": \"param\", \"init\": {\"fill\": \"constant\", \"value\": 1}}"

static void expect_error(const char *text, int code, const char *const *words) {
    pardo_status st;
    int rc = test_program_status(text, "t.json", NULL, &st);
    ck_assert_msg(rc == code, "expected code %d, got %d: %s", code, rc, st.msg);
    for (; *words; words++) ck_assert_msg(strstr(st.msg, *words) != NULL, "message lacks '%s': %s", *words, st.msg);
}

START_TEST(infers_through_a_chain) {
    pardo_program *p = test_program(HEAD X_W "}, \"ops\": ["
                                    "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
                                    "{\"op\": \"relu\", \"in\": [\"h\"], \"out\": [\"a\"]},"
                                    "{\"op\": \"reduce_sum\", \"in\": [\"a\"], \"out\": [\"s\"], \"attrs\": {\"axes\": [1], \"keepdims\": false}}"
                                    "]}]}",
                                    "t.json");
    const pardo_graph_var *h = pardo_block_find_var(&p->blocks[0], "h");
    ck_assert_ptr_nonnull(h);
    ck_assert(!h->declared);
    ck_assert_int_eq(h->type.dtype, PARDO_F32);
    ck_assert_int_eq(h->type.ndim, 2);
    ck_assert_int_eq(h->type.shape[0], -1);
    ck_assert_int_eq(h->type.shape[1], 3);
    const pardo_graph_var *s = pardo_block_find_var(&p->blocks[0], "s");
    ck_assert_int_eq(s->type.ndim, 1);
    ck_assert_int_eq(s->type.shape[0], -1);
    ck_assert_ptr_eq(p->blocks[0].ops[0].def, pardo_op_lookup("matmul"));
    pardo_program_free(p);
}
END_TEST

START_TEST(declared_output_must_agree) {
    expect_error(HEAD X_W ", \"h\": {\"dtype\": \"float32\", \"shape\": [2, 3]}}, \"ops\": ["
                 "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]}]}]}",
                 PARDO_OK, (const char *[]){NULL}); /* -1 matches 2 */
    expect_error(HEAD X_W ", \"h\": {\"dtype\": \"float64\", \"shape\": [2, 3]}}, \"ops\": ["
                 "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]}]}]}",
                 PARDO_ESHAPE, (const char *[]){"t.json:1:", "'h'", "float64", "float32", NULL});
    expect_error(HEAD X_W ", \"h\": {\"dtype\": \"float32\", \"shape\": [2, 3]}}, \"ops\": ["
                 "{\"op\": \"matmul\", \"in\": [\"w\", \"w\"], \"out\": [\"h\"]}]}]}",
                 PARDO_ESHAPE, (const char *[]){"block 0, op 0 (matmul)", NULL});
}
END_TEST

START_TEST(unknown_op_lists_known) {
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"matmull\", \"name\": \"fc\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]}]}]}",
                 PARDO_EINVAL, (const char *[]){"t.json:1:", "block 0, op 0 'fc' (matmull)", "unknown op type 'matmull'; did you mean matmul? (known types:", "matmul", NULL});
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"maxpool2d\", \"in\": [\"x\"], \"out\": [\"h\"]}]}]}",
                 PARDO_EINVAL, (const char *[]){"unknown op type 'maxpool2d'; did you mean max_pool2d? (known types:", NULL});
}
END_TEST

START_TEST(arity_and_attrs) {
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"matmul\", \"in\": [\"x\"], \"out\": [\"h\"]}]}]}",
                 PARDO_EINVAL, (const char *[]){"has 1 inputs, expected 2", NULL});
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"h\", \"g\"]}]}]}",
                 PARDO_EINVAL, (const char *[]){"outputs", NULL});
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"], \"attrs\": {\"transpose_c\": true}}]}]}",
                 PARDO_EINVAL, (const char *[]){"unknown attr 'transpose_c'", "transpose_a", NULL});
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"], \"attrs\": {\"transpose_a\": \"yes\"}}]}]}",
                 PARDO_EINVAL, (const char *[]){"attr 'transpose_a' is a string", NULL});
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"\"]}]}]}",
                 PARDO_EINVAL, (const char *[]){"output 0 'Y' is required but given as \"\"", NULL});
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"fill\", \"in\": [], \"out\": [\"h\"]}]}]}",
                 PARDO_EINVAL, (const char *[]){"attr 'shape' is required", NULL});
}
END_TEST

/* An op whose inputs are all optional, given fewer than its schema lists (found by fuzzing: add_grad with no
 * inputs read past the op's input list): the inputs it leaves out are read as absent, like "". */
START_TEST(trailing_optional_inputs_left_out) {
    const char *none[] = {"add_grad", "sub_grad", NULL};
    for (const char *const *op = none; *op; op++) {
        char text[512];
        snprintf(text, sizeof text, HEAD X_W "}, \"ops\": [{\"op\": \"%s\", \"in\": [], \"out\": [\"da\", \"db\"]}]}]}",
                 *op);
        expect_error(text, PARDO_EINVAL, (const char *[]){"t.json:1:", *op, "input 0 'A' is left out", "dC", NULL});
        snprintf(text, sizeof text, HEAD X_W "}, \"ops\": [{\"op\": \"%s\", \"in\": [\"x\"], \"out\": [\"da\"]}]}]}", *op);
        expect_error(text, PARDO_EINVAL, (const char *[]){"input 1 'B' is left out", "dC", NULL});
    }
    /* given dC, the left-out operands take its type */
    pardo_program *p = test_program(HEAD X_W "}, \"ops\": [{\"op\": \"add_grad\", \"in\": [\"\", \"\", \"\", \"x\"], "
                                    "\"out\": [\"da\"]}]}]}",
                                    "t.json");
    const pardo_graph_var *da = pardo_block_find_var(&p->blocks[0], "da");
    ck_assert(da && da->type.dtype == PARDO_F32 && da->type.ndim == 2 && da->type.shape[1] == 4);
    pardo_program_free(p);
}
END_TEST

/* Attr shapes whose element count overflows int64 (found by fuzzing: reshape's product of sizes overflowed) are
 * refused at inference, before any kernel sizes a tensor from them. */
START_TEST(shapes_too_large) {
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"reshape\", \"in\": [\"x\"], \"out\": [\"y\"], "
                 "\"attrs\": {\"shape\": [2147483648, 1, 2147483648, 1, 3]}}]}]}",
                 PARDO_EINVAL, (const char *[]){"(reshape)", "attr 'shape'", "more elements than fit in 64 bits", NULL});
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"fill\", \"in\": [], \"out\": [\"y\"], "
                 "\"attrs\": {\"shape\": [4294967296, 4294967296, 2]}}]}]}",
                 PARDO_ESHAPE, (const char *[]){"(fill)", "var 'y' would be [4294967296, 4294967296, 2]", NULL});
    /* an outer product of two huge vectors: each fits, their broadcast does not */
    expect_error(HEAD "\"a\": {\"dtype\": \"float32\", \"shape\": [4294967296, 1], \"role\": \"feed\"}, "
                 "\"b\": {\"dtype\": \"float32\", \"shape\": [1, 4294967296], \"role\": \"feed\"}}, \"ops\": ["
                 "{\"op\": \"mul\", \"in\": [\"a\", \"b\"], \"out\": [\"y\"]}]}]}",
                 PARDO_ESHAPE, (const char *[]){"(mul)", "more elements than fit in 64 bits", NULL});
}
END_TEST

START_TEST(unknown_and_unwritten_vars) {
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"matmul\", \"in\": [\"x\", \"w2\"], \"out\": [\"h\"]}]}]}",
                 PARDO_ENOTFOUND, (const char *[]){"t.json:1:", "unknown var 'w2'", NULL});
    expect_error(HEAD X_W ", \"t\": {\"dtype\": \"float32\", \"shape\": [4]}}, \"ops\": [{\"op\": \"relu\", \"in\": [\"t\"], \"out\": [\"h\"]}]}]}",
                 PARDO_EINVAL, (const char *[]){"'t' is read before any op writes it", NULL});
    /* read before a later op writes it */
    expect_error(HEAD X_W "}, \"ops\": [{\"op\": \"relu\", \"in\": [\"h\"], \"out\": [\"a\"]},"
                 "{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"h\"]}]}]}",
                 PARDO_ENOTFOUND, (const char *[]){"block 0, op 0 (relu)", "'h'", NULL});
}
END_TEST

START_TEST(dtype_errors_name_the_op) {
    expect_error(HEAD X_W ", \"i\": {\"dtype\": \"int64\", \"shape\": [4, 3], \"role\": \"feed\"}}, \"ops\": ["
                 "{\"op\": \"add\", \"name\": \"mix\", \"in\": [\"w\", \"i\"], \"out\": [\"h\"]}]}]}",
                 PARDO_ESHAPE, (const char *[]){"block 0, op 0 'mix' (add)", "int64", NULL});
}
END_TEST

/* Every op's shape error names its input vars and their types (the op's own message names only shapes). */
START_TEST(shape_errors_name_the_inputs) {
    expect_error(HEAD X_W ", \"w2\": {\"dtype\": \"float32\", \"shape\": [7, 2], \"role\": \"param\"}}, \"ops\": ["
                 "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h1\"]},"
                 "{\"op\": \"matmul\", \"name\": \"fc2\", \"in\": [\"h1\", \"w2\"], \"out\": [\"h2\"]}]}]}",
                 PARDO_ESHAPE, (const char *[]){"block 0, op 1 'fc2' (matmul)", "inner dims differ",
                                                "(inputs: h1 float32 [-1, 3], w2 float32 [7, 2])", NULL});
    /* an output that disagrees with its declaration, and an absent optional input left out of the list */
    expect_error(HEAD X_W ", \"h\": {\"dtype\": \"float32\", \"shape\": [-1, 5]}}, \"ops\": ["
                 "{\"op\": \"add_grad\", \"in\": [\"\", \"\", \"\", \"x\"], \"out\": [\"h\"]}]}]}",
                 PARDO_ESHAPE, (const char *[]){"var 'h' is declared", "(inputs: x float32 [-1, 4])", NULL});
}
END_TEST

START_TEST(positions_point_at_the_op) {
    pardo_status st;
    const char *text = "{\"pardo\": 1, \"blocks\": [{\n"
                       "  \"vars\": {\"x\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"feed\"}},\n"
                       "  \"ops\": [\n"
                       "    {\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"a\"]},\n"
                       "    {\"op\": \"bogus\", \"in\": [\"a\"], \"out\": [\"b\"]}\n"
                       "  ]}]}";
    ck_assert_int_eq(test_program_status(text, "pos.json", NULL, &st), PARDO_EINVAL);
    ck_assert_msg(strncmp(st.msg, "pos.json:5:5: block 0, op 1 (bogus)", 35) == 0, "%s", st.msg);
}
END_TEST

/* A param or state var is made before the first step, so a -1 dim in its
 * declared shape is refused when the graph is checked (it had passed
 * `pardo check` and failed only when run). */
START_TEST(params_need_their_full_shape) {
    static const char *const words[] = {"var 'w'", "a param is made before the first step", "[-1, 3]", NULL};
    expect_error(HEAD "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 3], \"role\": \"feed\"}, "
                 "\"w\": {\"dtype\": \"float32\", \"shape\": [-1, 3], \"role\": \"param\", "
                 "\"init\": {\"fill\": \"constant\", \"value\": 1}}}, "
                 "\"ops\": [{\"op\": \"add\", \"in\": [\"x\", \"w\"], \"out\": [\"y\"]}]}]}",
                 PARDO_ESHAPE, words);
    static const char *const state_words[] = {"var 's'", "a state is made", NULL};
    expect_error(HEAD "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 3], \"role\": \"feed\"}, "
                 "\"s\": {\"dtype\": \"float32\", \"shape\": [2, -1], \"role\": \"state\", "
                 "\"init\": {\"fill\": \"constant\", \"value\": 0}}}, "
                 "\"ops\": [{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"y\"]}]}]}",
                 PARDO_ESHAPE, state_words);
}
END_TEST

/* init is how a param or state starts: on a feed or a temp it is refused
 * (it had been passed over in silence). */
START_TEST(init_only_on_params_and_state) {
    static const char *const feed_words[] = {"var 'x'", "has an init", "a feed is given at run time", NULL};
    expect_error(HEAD "\"x\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"feed\", "
                 "\"init\": {\"fill\": \"constant\", \"value\": 1}}}, "
                 "\"ops\": [{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"y\"]}]}]}",
                 PARDO_EINVAL, feed_words);
    static const char *const temp_words[] = {"var 'y'", "has an init", "a temp is written by an op", NULL};
    expect_error(HEAD "\"x\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"feed\"}, "
                 "\"y\": {\"dtype\": \"float32\", \"shape\": [2], \"init\": {\"fill\": \"normal\"}}}, "
                 "\"ops\": [{\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"y\"]}]}]}",
                 PARDO_EINVAL, temp_words);
}
END_TEST

Suite *make_infer_suite(void) {
    Suite *s = suite_create("infer");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, infers_through_a_chain);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, declared_output_must_agree);
    tcase_add_test(te, unknown_op_lists_known);
    tcase_add_test(te, arity_and_attrs);
    tcase_add_test(te, trailing_optional_inputs_left_out);
    tcase_add_test(te, shapes_too_large);
    tcase_add_test(te, unknown_and_unwritten_vars);
    tcase_add_test(te, dtype_errors_name_the_op);
    tcase_add_test(te, shape_errors_name_the_inputs);
    tcase_add_test(te, params_need_their_full_shape);
    tcase_add_test(te, init_only_on_params_and_state);
    tcase_add_test(te, positions_point_at_the_op);
    suite_add_tcase(s, te);
    return s;
}
