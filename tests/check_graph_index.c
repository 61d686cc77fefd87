/* check_graph_index.c - the name index (src/core/name_index.[ch]) against a
 * naive list, the blocks' var index and last-use map against the plain
 * scans they replace (pardo_block_last_use), and big chains built in code
 * that check and transpile only when every lookup on the way is a hash: a
 * quadratic lookup would take minutes there, past the Tcase's timeout. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "core/graph.h"
#include "core/name_index.h"
#include "pass.h"

START_TEST(hash_is_fnv1a) {
    ck_assert_uint_eq(pardo_name_hash(""), 2166136261u);
    ck_assert_uint_eq(pardo_name_hash("a"), 0xe40c292cu);
    ck_assert_uint_eq(pardo_name_hash("foobar"), 0xbf9cf968u);
}
END_TEST

START_TEST(empty_index) {
    pardo_name_index ix = {0};
    ck_assert_int_eq(pardo_name_index_get(&ix, "x"), -1);
    ck_assert_int_eq(pardo_name_index_get(&ix, ""), -1);
    pardo_name_index_clear(&ix);
    pardo_name_index_free(&ix);
    ck_assert_ptr_null(ix.slots);
}
END_TEST

START_TEST(set_add_and_get) {
    pardo_name_index ix;
    pardo_status st;
    pardo_name_index_init(&ix);
    ck_assert_int_eq(pardo_name_index_set(&ix, "x", 1, &st), PARDO_OK);
    ck_assert_int_eq(pardo_name_index_set(&ix, "", 7, &st), PARDO_OK);
    ck_assert_int_eq(pardo_name_index_get(&ix, "x"), 1);
    ck_assert_int_eq(pardo_name_index_get(&ix, ""), 7);
    ck_assert_int_eq(pardo_name_index_get(&ix, "y"), -1);
    /* set replaces, add keeps the first */
    char other[] = "x"; /* an equal key at another address */
    ck_assert_int_eq(pardo_name_index_set(&ix, other, 2, &st), PARDO_OK);
    ck_assert_int_eq(pardo_name_index_get(&ix, "x"), 2);
    int held = -5;
    ck_assert_int_eq(pardo_name_index_add(&ix, "x", 9, &held, &st), PARDO_OK);
    ck_assert_int_eq(held, 2);
    ck_assert_int_eq(pardo_name_index_get(&ix, "x"), 2);
    ck_assert_int_eq(pardo_name_index_add(&ix, "z", 3, &held, &st), PARDO_OK);
    ck_assert_int_eq(held, 3);
    ck_assert_uint_eq(ix.n, 3);
    pardo_name_index_clear(&ix);
    ck_assert_uint_eq(ix.n, 0);
    ck_assert_ptr_nonnull(ix.slots); /* kept for refilling */
    ck_assert_int_eq(pardo_name_index_get(&ix, "x"), -1);
    ck_assert_int_eq(pardo_name_index_set(&ix, "x", 4, &st), PARDO_OK);
    ck_assert_int_eq(pardo_name_index_get(&ix, "x"), 4);
    pardo_name_index_free(&ix);
}
END_TEST

/* Grows from empty through many doublings; every key stays found with its
 * value, and keys never added are not found (against the names themselves). */
START_TEST(growth_keeps_every_key) {
    enum { N = 100000 };
    char(*names)[16] = malloc(sizeof(*names) * N);
    pardo_name_index ix = {0};
    pardo_status st;
    ck_assert_ptr_nonnull(names);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "v%d", i);
        size_t cap = ix.cap;
        ck_assert_int_eq(pardo_name_index_set(&ix, names[i], i, &st), PARDO_OK);
        ck_assert(ix.cap == cap || ix.cap == (cap ? cap * 2 : 16));
        ck_assert(ix.n * 4 <= ix.cap * 3); /* at most 3/4 full */
    }
    ck_assert_uint_eq(ix.n, N);
    for (int i = 0; i < N; i++) ck_assert_int_eq(pardo_name_index_get(&ix, names[i]), i);
    char miss[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(miss, sizeof miss, "w%d", i);
        ck_assert_int_eq(pardo_name_index_get(&ix, miss), -1);
    }
    free(names);
    pardo_name_index_free(&ix);
}
END_TEST

/* A table kept at its smallest size (16 slots) holding 12 keys whose home
 * slot is 14 or 15: they collide, and the probes wrap past the end. */
START_TEST(collisions_and_wrap) {
    enum { N = 12 };
    char keys[N][16];
    pardo_name_index ix = {0};
    pardo_status st;
    for (int i = 0, c = 0; i < N; c++) {
        snprintf(keys[i], sizeof keys[i], "k%d", c);
        if ((pardo_name_hash(keys[i]) & 15) >= 14) i++;
    }
    ck_assert_int_eq(pardo_name_index_reserve(&ix, N, &st), PARDO_OK);
    ck_assert_uint_eq(ix.cap, 16);
    for (int i = 0; i < N; i++) ck_assert_int_eq(pardo_name_index_set(&ix, keys[i], i, &st), PARDO_OK);
    ck_assert_uint_eq(ix.cap, 16); /* reserved: no growth */
    ck_assert_ptr_nonnull(ix.slots[0].key); /* wrapped */
    for (int i = 0; i < N; i++) ck_assert_int_eq(pardo_name_index_get(&ix, keys[i]), i);
    char miss[16];
    for (int c = 0; c < 200; c++) { /* misses walk the full cluster to its empty end */
        snprintf(miss, sizeof miss, "m%d", c);
        ck_assert_int_eq(pardo_name_index_get(&ix, miss), -1);
    }
    pardo_name_index_free(&ix);
}
END_TEST

static pardo_block *new_block(pardo_program **p) {
    pardo_status st;
    *p = pardo_program_new();
    ck_assert_ptr_nonnull(*p);
    ck_assert_int_eq(pardo_program_add_block(*p, -1, &st), 0);
    return &(*p)->blocks[0];
}

/* The block's var index agrees with a scan as vars are added, duplicated,
 * dropped in place and truncated, and a clone gets its own. */
START_TEST(block_var_index) {
    pardo_program *p;
    pardo_block *b = new_block(&p);
    pardo_status st;
    char name[32];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "v%d", i);
        ck_assert_ptr_nonnull(pardo_block_add_var(b, name, &st));
        for (int j = 0; j <= i; j++) { /* looked up between adds: the index follows */
            snprintf(name, sizeof name, "v%d", j);
            ck_assert_ptr_eq(pardo_block_find_var(b, name), &b->vars[j]);
        }
        ck_assert_ptr_null(pardo_block_find_var(b, "nope"));
    }
    ck_assert_ptr_nonnull(b->var_index);
    ck_assert_int_eq(b->n_indexed, 40);
    /* a second var of the same name: the first is found, as by a scan */
    ck_assert_ptr_nonnull(pardo_block_add_var(b, "v3", &st));
    ck_assert_ptr_eq(pardo_block_find_var(b, "v3"), &b->vars[3]);
    int owner = -1;
    ck_assert_ptr_eq(pardo_program_lookup_var(p, 0, "v39", &owner), &b->vars[39]);
    ck_assert_int_eq(owner, 0);
    /* a clone has an index of its own */
    pardo_program *q = pardo_program_clone(p);
    ck_assert_ptr_nonnull(q);
    ck_assert(q->blocks[0].var_index != b->var_index);
    ck_assert_ptr_eq(pardo_block_find_var(&q->blocks[0], "v17"), &q->blocks[0].vars[17]);
    pardo_program_free(q);
    /* drop the even vars in place, as fuse drops dead temps */
    int w = 0;
    for (int r = 0; r < b->n_vars; r++) {
        if (r < 40 && r % 2 == 0) {
            free(b->vars[r].name);
            continue;
        }
        b->vars[w++] = b->vars[r];
    }
    pardo_block_vars_changed(b);
    b->n_vars = w;
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "v%d", i);
        const pardo_graph_var *v = pardo_block_find_var(b, name);
        if (i % 2 == 0 && i != 3) ck_assert_ptr_null(v);
        else ck_assert_str_eq(v->name, name);
    }
    ck_assert_ptr_eq(pardo_block_find_var(b, "v3"), &b->vars[1]);
    /* cut short without telling the block: the index starts again */
    b->n_vars = 10;
    ck_assert_ptr_null(pardo_block_find_var(b, "v39"));
    ck_assert_ptr_eq(pardo_block_find_var(b, "v19"), &b->vars[9]);
    b->n_vars = w;
    pardo_program_index_vars(p);
    ck_assert_int_eq(b->n_indexed, w);
    pardo_program_free(p);
}
END_TEST

/* pardo_block_last_uses gives what pardo_block_last_use does for every name,
 * attrs naming vars at any depth included. */
START_TEST(last_uses_match_the_scan) {
    pardo_program *p;
    pardo_block *b = new_block(&p);
    pardo_status st;
    static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g", ""};
    const int n = (int)(sizeof names / sizeof names[0]);
    for (int i = 0; i < 60; i++) {
        pardo_op *op = pardo_block_add_op(b, "add", &st);
        ck_assert_ptr_nonnull(op);
        ck_assert_int_eq(pardo_op_add_input(op, names[(i * 3) % n], &st), PARDO_OK);
        ck_assert_int_eq(pardo_op_add_input(op, names[(i * 5 + 1) % n], &st), PARDO_OK);
        ck_assert_int_eq(pardo_op_add_output(op, names[(i * 7 + 2) % (n - 2)], &st), PARDO_OK);
        if (i % 11 == 0) { /* an attr naming a var inside an object inside an array */
            pardo_value *arr = pardo_value_new_array(), *obj = pardo_value_new_object(), *s;
            s = pardo_value_new_string(i == 55 ? "h" : "g");
            ck_assert_int_eq(pardo_value_set(obj, "part", s, &st), PARDO_OK);
            ck_assert_int_eq(pardo_value_append(arr, obj, &st), PARDO_OK);
            pardo_value_free(s);
            pardo_value_free(obj);
            ck_assert_int_eq(pardo_op_set_attr(op, "map", arr, &st), PARDO_OK);
        }
    }
    pardo_name_index last = {0};
    ck_assert_int_eq(pardo_block_last_uses(b, &last, &st), PARDO_OK);
    const char *all[] = {"a", "b", "c", "d", "e", "f", "g", "h", "x"};
    for (int k = 0; k < (int)(sizeof all / sizeof all[0]); k++)
        ck_assert_int_eq(pardo_name_index_get(&last, all[k]), pardo_block_last_use(b, all[k]));
    ck_assert_int_eq(pardo_block_last_use(b, "h"), 55);
    pardo_name_index_free(&last);
    pardo_program_free(p);
}
END_TEST

/* A chain of about n ops: x -> (matmul w_j, add b_j, relu) per layer with 8
 * shared param pairs -> reduce_mean loss, built in code. */
static pardo_program *chain(int n) {
    pardo_program *p;
    pardo_block *b = new_block(&p);
    pardo_status st;
    char name[64], in[64], w[32], bias[32];
    pardo_graph_var *x = pardo_block_add_var(b, "x", &st);
    ck_assert_ptr_nonnull(x);
    *x = (pardo_graph_var){.name = x->name, .declared = true, .role = PARDO_VAR_FEED,
                           .type = {.dtype = PARDO_F32, .ndim = 2, .shape = {-1, 4}}};
    for (int j = 0; j < 8; j++) {
        snprintf(name, sizeof name, "w_%d", j);
        pardo_graph_var *v = pardo_block_add_var(b, name, &st);
        ck_assert_ptr_nonnull(v);
        *v = (pardo_graph_var){.name = v->name, .declared = true, .role = PARDO_VAR_PARAM,
                               .init = {.fill = PARDO_FILL_CONSTANT, .value = 0.5},
                               .type = {.dtype = PARDO_F32, .ndim = 2, .shape = {4, 4}}};
        snprintf(name, sizeof name, "b_%d", j);
        v = pardo_block_add_var(b, name, &st);
        ck_assert_ptr_nonnull(v);
        *v = (pardo_graph_var){.name = v->name, .declared = true, .role = PARDO_VAR_PARAM,
                               .init = {.fill = PARDO_FILL_CONSTANT},
                               .type = {.dtype = PARDO_F32, .ndim = 1, .shape = {4}}};
    }
    snprintf(in, sizeof in, "x");
    static const char *const types[] = {"matmul", "add", "relu"};
    for (int i = 0; i + 1 < n; i++) {
        pardo_op *op = pardo_block_add_op(b, types[i % 3], &st);
        ck_assert_ptr_nonnull(op);
        op->role = PARDO_OP_FORWARD;
        snprintf(w, sizeof w, "w_%d", i / 3 % 8);
        snprintf(bias, sizeof bias, "b_%d", i / 3 % 8);
        snprintf(name, sizeof name, "t_%d", i);
        ck_assert_int_eq(pardo_op_add_input(op, in, &st), PARDO_OK);
        if (i % 3 < 2) ck_assert_int_eq(pardo_op_add_input(op, i % 3 == 0 ? w : bias, &st), PARDO_OK);
        ck_assert_int_eq(pardo_op_add_output(op, name, &st), PARDO_OK);
        snprintf(in, sizeof in, "%s", name);
    }
    pardo_op *op = pardo_block_add_op(b, "reduce_mean", &st);
    ck_assert_ptr_nonnull(op);
    op->role = PARDO_OP_LOSS;
    ck_assert_int_eq(pardo_op_add_input(op, in, &st), PARDO_OK);
    ck_assert_int_eq(pardo_op_add_output(op, "loss", &st), PARDO_OK);
    ck_assert_int_eq(pardo_op_set_attr(op, "keepdims", pardo_value_new_bool(false), &st), PARDO_OK);
    return p;
}

/* 200,000 ops checked (validate and infer_shapes): ~40,000 lookups of 200,000
 * names by a scan each would be 10^10 string compares. */
START_TEST(big_chain_checks) {
    enum { N = 200000 };
    pardo_program *p = chain(N);
    pardo_status st;
    pardo_pass_options opt = pardo_pass_defaults();
    ck_assert_msg(pardo_pass_check(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    const pardo_block *b = &p->blocks[0];
    ck_assert_int_eq(b->n_ops, N);
    ck_assert_int_eq(b->n_vars, 17 + N); /* x, 16 params, a temp per op */
    const pardo_graph_var *loss = pardo_block_find_var(b, "loss");
    ck_assert_ptr_nonnull(loss);
    ck_assert_int_eq(loss->type.ndim, 0);
    const pardo_graph_var *t = pardo_block_find_var(b, "t_1234");
    ck_assert_int_eq(t->type.ndim, 2);
    ck_assert_int_eq(t->type.shape[0], -1);
    ck_assert_int_eq(t->type.shape[1], 4);
    pardo_program_free(p);
}
END_TEST

/* The transpiler's passes on 60,000 ops: backward, an optimizer, and the
 * parallel rewrite, each ending in a check. */
START_TEST(big_chain_transpiles) {
    enum { N = 60000 };
    pardo_program *p = chain(N);
    pardo_status st;
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = "loss";
    opt.optimizer = PARDO_OPTIMIZER_SGD;
    opt.lr = 0.1;
    opt.parts = 2;
    ck_assert_msg(pardo_pass_check(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_pass_optimizer(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_pass_multi_cpu(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(p->n_blocks, 2);
    ck_assert_ptr_nonnull(pardo_block_find_var(&p->blocks[0], "w_0@GRAD@PARTS"));
    ck_assert_int_gt(p->blocks[1].n_ops, 2 * N); /* forward, loss and backward per part */
    pardo_program_free(p);
}
END_TEST

Suite *make_graph_index_suite(void) {
    Suite *s = suite_create("graph_index");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, hash_is_fnv1a);
    tcase_add_test(core, empty_index);
    tcase_add_test(core, set_add_and_get);
    tcase_add_test(core, growth_keeps_every_key);
    tcase_add_test(core, collisions_and_wrap);
    tcase_add_test(core, block_var_index);
    tcase_add_test(core, last_uses_match_the_scan);
    suite_add_tcase(s, core);
    TCase *big = tcase_create("Big");
    tcase_set_timeout(big, 20); /* the linear passes take well under a second here; quadratic ones, minutes */
    tcase_add_test(big, big_chain_checks);
    tcase_add_test(big, big_chain_transpiles);
    suite_add_tcase(s, big);
    return s;
}
