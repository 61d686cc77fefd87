/* check_graph_json.c - loading and saving graph files (src/io/graph_json.h):
 * every field of a full graph, positions, round trips through text and
 * files, program equality; check_graph_json_errors.c has the errors.
 * Positions are checked against a naive line/column count of where a marker
 * string sits in the test's own text. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "graph_json_test_util.h"
#include "io/graph_json.h"
#include "test_util.h"

static const pardo_graph_var *var(const pardo_program *p, int b, const char *name) {
    const pardo_graph_var *v = pardo_block_find_var(&p->blocks[b], name);
    ck_assert_msg(v != NULL, "no var '%s' in block %d", name, b);
    ck_assert(v->declared);
    return v;
}

static void check_shape(const pardo_graph_var *v, int ndim, const int64_t *shape) {
    ck_assert_int_eq(v->type.ndim, ndim);
    for (int d = 0; d < ndim; d++) ck_assert_int_eq(v->type.shape[d], shape[d]);
}

START_TEST(test_full_graph_fields) {
    pardo_program *p = test_parse_ok(test_full_graph);
    ck_assert_int_eq(p->version, 1);
    ck_assert_str_eq(p->name, "mlp");
    ck_assert_str_eq(p->path, "g.json");
    ck_assert_int_eq(p->n_blocks, 3);

    /* doc kept as a value */
    ck_assert_ptr_nonnull(p->doc);
    ck_assert_int_eq(p->doc->kind, PARDO_V_OBJECT);
    ck_assert_int_eq(p->doc->n, 5);
    ck_assert_str_eq(pardo_value_get(p->doc, "title")->string, "test graph");
    ck_assert_int_eq(pardo_value_get(p->doc, "tags")->n, 2);
    ck_assert_str_eq(pardo_value_get(p->doc, "tags")->items[1].string, "b");
    ck_assert(pardo_value_get(p->doc, "n")->number == 3);
    ck_assert(pardo_value_get(p->doc, "ok")->boolean);
    ck_assert_int_eq(pardo_value_get(p->doc, "none")->kind, PARDO_V_NULL);

    /* block 0 vars, in file order */
    const pardo_block *b0 = &p->blocks[0];
    ck_assert_int_eq(b0->parent, -1);
    ck_assert_int_eq(b0->n_vars, 14);
    const char *order[] = {"x", "y", "w1", "w2", "b1", "u", "n", "d", "p", "lr", "m", "mask", "parts", "t"};
    for (int i = 0; i < 14; i++) ck_assert_str_eq(b0->vars[i].name, order[i]);

    const pardo_graph_var *v = var(p, 0, "x");
    ck_assert_int_eq(v->type.dtype, PARDO_F32);
    check_shape(v, 2, (int64_t[]){-1, 4});
    ck_assert_int_eq(v->role, PARDO_VAR_FEED);
    ck_assert_int_eq(v->kind, PARDO_VAR_TENSOR);
    ck_assert_int_eq(v->init.fill, PARDO_FILL_NONE);
    ck_assert_ptr_null(v->value);

    v = var(p, 0, "y");
    ck_assert_int_eq(v->type.dtype, PARDO_I64);
    check_shape(v, 1, (int64_t[]){-1});

    v = var(p, 0, "w1");
    ck_assert_int_eq(v->role, PARDO_VAR_PARAM);
    ck_assert_int_eq(v->init.fill, PARDO_FILL_XAVIER_UNIFORM);
    ck_assert_uint_eq(v->init.seed, 1);

    v = var(p, 0, "w2");
    ck_assert_int_eq(v->type.dtype, PARDO_F64);
    ck_assert_int_eq(v->init.fill, PARDO_FILL_KAIMING_UNIFORM);
    ck_assert_uint_eq(v->init.seed, 0);

    v = var(p, 0, "b1");
    ck_assert_int_eq(v->init.fill, PARDO_FILL_CONSTANT);
    ck_assert(v->init.value == 0.5);
    ck_assert_uint_eq(v->init.seed, 7);

    v = var(p, 0, "u");
    ck_assert_int_eq(v->role, PARDO_VAR_STATE);
    ck_assert_int_eq(v->init.fill, PARDO_FILL_UNIFORM);
    ck_assert(v->init.low == -0.25 && v->init.high == 0.75);
    ck_assert_uint_eq(v->init.seed, 3);

    v = var(p, 0, "n");
    ck_assert_int_eq(v->init.fill, PARDO_FILL_NORMAL);
    ck_assert(v->init.mean == 1.5 && v->init.std == 0.125);

    v = var(p, 0, "d"); /* uniform defaults */
    ck_assert(v->init.low == 0 && v->init.high == 1);

    v = var(p, 0, "p"); /* a param with neither init nor value: a checkpoint gives it */
    ck_assert_int_eq(v->init.fill, PARDO_FILL_NONE);
    ck_assert_ptr_null(v->value);

    v = var(p, 0, "lr"); /* a bare number is a one-element value */
    check_shape(v, 0, NULL);
    ck_assert_int_eq(v->n_value, 1);
    ck_assert(v->value[0] == 0.1);
    ck_assert_int_eq(v->role, PARDO_VAR_TEMP);

    v = var(p, 0, "m"); /* nested arrays flatten row-major */
    ck_assert_int_eq(v->type.dtype, PARDO_I32);
    ck_assert_int_eq(v->n_value, 6);
    for (int i = 0; i < 6; i++) ck_assert(v->value[i] == (i == 5 ? -6 : i + 1));

    v = var(p, 0, "mask");
    ck_assert_int_eq(v->type.dtype, PARDO_BOOL);
    ck_assert_int_eq(v->n_value, 3);
    ck_assert(v->value[0] == 1 && v->value[1] == 0 && v->value[2] == 1);

    v = var(p, 0, "parts");
    ck_assert_int_eq(v->kind, PARDO_VAR_TENSOR_ARRAY);
    ck_assert_int_eq(v->role, PARDO_VAR_TEMP);

    v = var(p, 0, "t"); /* shape with -1: any count */
    ck_assert_int_eq(v->n_value, 7);
    ck_assert(v->value[0] == 1e-300);
    ck_assert(v->value[1] == 3.141592653589793);
    ck_assert(v->value[3] == (double)0.1f);
    ck_assert(v->value[4] == 5e-324);
    ck_assert(v->value[5] == 0 && signbit(v->value[5]));
    ck_assert(isinf(v->value[6]) && v->value[6] > 0);

    /* block 0 ops */
    ck_assert_int_eq(b0->n_ops, 6);
    const pardo_op *op = &b0->ops[0];
    ck_assert_str_eq(op->type, "matmul");
    ck_assert_str_eq(op->name, "fc1");
    ck_assert_int_eq(op->role, PARDO_OP_FORWARD);
    ck_assert_int_eq(op->n_in, 2);
    ck_assert_str_eq(op->in[0], "x");
    ck_assert_str_eq(op->in[1], "w1");
    ck_assert_int_eq(op->n_out, 1);
    ck_assert_str_eq(op->out[0], "h");
    ck_assert_ptr_null(op->def);
    const pardo_value *a = pardo_attr(op, "transpose_a");
    ck_assert(a && a->kind == PARDO_V_BOOL && !a->boolean);
    const pardo_value *nested = pardo_attr(op, "nested");
    ck_assert(nested && nested->kind == PARDO_V_OBJECT);
    const pardo_value *list = pardo_value_get(nested, "list");
    ck_assert(list && list->kind == PARDO_V_ARRAY && list->n == 3);
    ck_assert(list->items[1].kind == PARDO_V_ARRAY && list->items[1].n == 2 && list->items[1].items[1].number == 3);
    ck_assert_str_eq(pardo_value_get(&list->items[2], "k")->string, "v");
    ck_assert_int_eq(pardo_value_get(nested, "x")->kind, PARDO_V_NULL);

    op = &b0->ops[1];
    ck_assert_str_eq(op->type, "relu");
    ck_assert_ptr_null(op->name);
    ck_assert_ptr_null(op->attrs);
    ck_assert_int_eq(op->role, PARDO_OP_ROLE_NONE);

    op = &b0->ops[3];
    ck_assert_int_eq(op->role, PARDO_OP_LOSS);
    ck_assert_int_eq(op->n_in, 2);
    ck_assert_str_eq(op->in[1], ""); /* an absent optional input */
    int64_t blk = -1;
    pardo_status st;
    ck_assert_int_eq(pardo_attr_int(op, "block", -1, &blk, &st), PARDO_OK);
    ck_assert_int_eq(blk, 1);

    op = &b0->ops[4];
    ck_assert_str_eq(op->type, "relu_grad");
    ck_assert_int_eq(op->role, PARDO_OP_BACKWARD);
    ck_assert_int_eq(op->n_out, 2);
    ck_assert_str_eq(op->out[1], "\"q\"");

    op = &b0->ops[5];
    ck_assert_int_eq(op->role, PARDO_OP_OPTIMIZE);
    ck_assert(op->attrs && op->attrs->kind == PARDO_V_OBJECT && op->attrs->n == 0);

    /* block 1 and 2 */
    const pardo_block *b1 = &p->blocks[1];
    ck_assert_int_eq(b1->parent, 0);
    ck_assert_int_eq(b1->n_vars, 1);
    v = var(p, 1, "z");
    ck_assert_int_eq(v->n_value, 4);
    ck_assert(v->value[3] == 4.5);
    ck_assert_int_eq(b1->n_ops, 1);
    ck_assert_str_eq(b1->ops[0].type, "add");
    int owner = -1;
    ck_assert_ptr_nonnull(pardo_program_lookup_var(p, 1, "w1", &owner));
    ck_assert_int_eq(owner, 0);
    ck_assert_int_eq(p->blocks[2].parent, 1);
    ck_assert_int_eq(p->blocks[2].n_vars, 0);
    ck_assert_int_eq(p->blocks[2].n_ops, 0);
    pardo_program_free(p);
}
END_TEST

START_TEST(test_positions) {
    pardo_program *p = test_parse_ok(test_full_graph);
    int line, col;
    /* a var is where its name is */
    test_marker_pos(test_full_graph, "\"w1\": {", &line, &col);
    ck_assert_int_eq(var(p, 0, "w1")->line, line);
    ck_assert_int_eq(var(p, 0, "w1")->col, col);
    test_marker_pos(test_full_graph, "\"z\": {", &line, &col);
    ck_assert_int_eq(var(p, 1, "z")->line, line);
    ck_assert_int_eq(var(p, 1, "z")->col, col);
    /* an op is where its object starts */
    test_marker_pos(test_full_graph, "{\"op\": \"relu\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].ops[1].line, line);
    ck_assert_int_eq(p->blocks[0].ops[1].col, col);
    test_marker_pos(test_full_graph, "{\"role\": \"backward\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].ops[4].line, line);
    ck_assert_int_eq(p->blocks[0].ops[4].col, col);
    test_marker_pos(test_full_graph, "{\"op\": \"add\"", &line, &col);
    ck_assert_int_eq(p->blocks[1].ops[0].line, line);
    ck_assert_int_eq(p->blocks[1].ops[0].col, col);
    /* blocks */
    test_marker_pos(test_full_graph, "{\n      \"vars\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].line, line);
    ck_assert_int_eq(p->blocks[0].col, col);
    test_marker_pos(test_full_graph, "{\"parent\": 1}", &line, &col);
    ck_assert_int_eq(p->blocks[2].line, line);
    ck_assert_int_eq(p->blocks[2].col, col);
    /* attrs values, nested ones too */
    const pardo_op *fc1 = &p->blocks[0].ops[0];
    test_marker_pos(test_full_graph, "{\"transpose_a\"", &line, &col);
    ck_assert_int_eq(fc1->attrs->line, line);
    ck_assert_int_eq(fc1->attrs->col, col);
    const pardo_value *list = pardo_value_get(pardo_attr(fc1, "nested"), "list");
    test_marker_pos(test_full_graph, "[1, [2, 3]", &line, &col);
    ck_assert_int_eq(list->line, line);
    ck_assert_int_eq(list->col, col);
    test_marker_pos(test_full_graph, "{\"k\": \"v\"}", &line, &col);
    ck_assert_int_eq(list->items[2].line, line);
    ck_assert_int_eq(list->items[2].col, col);
    test_marker_pos(test_full_graph, "\"v\"}", &line, &col);
    ck_assert_int_eq(list->items[2].items[0].line, line);
    ck_assert_int_eq(list->items[2].items[0].col, col);
    /* doc */
    test_marker_pos(test_full_graph, "[\"a\", \"b\"]", &line, &col);
    ck_assert_int_eq(pardo_value_get(p->doc, "tags")->line, line);
    ck_assert_int_eq(pardo_value_get(p->doc, "tags")->col, col);
    /* after an op (fc1) that spans two lines */
    char where[256];
    pardo_op_where(p, 0, 0, where, sizeof where);
    test_marker_pos(test_full_graph, "{\"op\": \"matmul\"", &line, &col);
    char expect[64];
    snprintf(expect, sizeof expect, "g.json:%d:%d: block 0, op 0 'fc1'", line, col);
    ck_assert_str_eq(where, strcat(expect, " (matmul)"));
    pardo_program_free(p);
}
END_TEST

/* Positions past strings with escapes and raw newlines, tabs, CRLF and a BOM. */
START_TEST(test_positions_odd_text) {
    const char text[] = "\xEF\xBB\xBF{\"pardo\":1,\r\n\"doc\": \"a \\\" [ { \\\\\",\t\"blocks\":[{\"vars\":{\r\n"
                        "\t\"we\\\"ird\\\\\": {\"dtype\":\"bool\",\"shape\":[]},\n"
                        "  \"s\": {\"dtype\":\"int32\",\"shape\":[1]}},\n"
                        "\"ops\":[ {\"op\":\"x\",\"out\":[\"y\"]} ]}]}";
    pardo_program *p = test_parse_ok(text);
    int line, col;
    ck_assert_str_eq(p->doc->string, "a \" [ { \\");
    ck_assert_str_eq(p->blocks[0].vars[0].name, "we\"ird\\");
    test_marker_pos(text, "\"we", &line, &col);
    ck_assert_int_eq(p->blocks[0].vars[0].line, line);
    ck_assert_int_eq(p->blocks[0].vars[0].col, col);
    test_marker_pos(text, "\"s\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].vars[1].line, line);
    ck_assert_int_eq(p->blocks[0].vars[1].col, col);
    test_marker_pos(text, "{\"op\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].ops[0].line, line);
    ck_assert_int_eq(p->blocks[0].ops[0].col, col);
    pardo_program_free(p);
}
END_TEST

START_TEST(test_round_trip) {
    pardo_status st;
    pardo_program *p = test_parse_ok(test_full_graph);
    char *text = pardo_graph_to_json(p, &st);
    ck_assert_msg(text != NULL, "to_json: %s", st.msg);
    pardo_program *q = test_parse_ok(text);
    ck_assert(pardo_program_equal(p, q));
    /* writing is stable: the reloaded program gives the same text */
    char *again = pardo_graph_to_json(q, &st);
    ck_assert_ptr_nonnull(again);
    ck_assert_str_eq(text, again);
    /* spot checks of the written form */
    ck_assert_ptr_nonnull(strstr(text, "\n  \"blocks\": [\n"));
    ck_assert_ptr_nonnull(strstr(text, "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"role\": \"feed\"}"));
    ck_assert_ptr_nonnull(strstr(text, "\"init\": {\"fill\": \"uniform\", \"low\": -0.25, \"high\": 0.75, \"seed\": 3}"));
    ck_assert_ptr_nonnull(strstr(text, "\"m\": {\"dtype\": \"int32\", \"shape\": [2, 3], \"value\": [1, 2, 3, 4, 5, -6]}"));
    ck_assert_ptr_nonnull(strstr(text, "\"value\": [true, false, true]"));
    ck_assert_ptr_nonnull(strstr(text, "{\"op\": \"relu\", \"in\": [\"h\"], \"out\": [\"a\"]}"));
    ck_assert_ptr_nonnull(strstr(text, "[1e-300, 3.141592653589793, -2, 0.10000000149011612, 4.94065645841247e-324, -0, 1e999]"));
    ck_assert_ptr_null(strstr(text, "\"kind\": \"tensor\""));
    ck_assert_ptr_null(strstr(text, "\"role\": \"temp\""));
    free(again);
    free(text);

    /* through a file */
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/g.json", dir);
    ck_assert_msg(pardo_graph_save(q, path, &st) == PARDO_OK, "save: %s", st.msg);
    ck_assert_int_eq(test_dir_count(dir), 1); /* no temporary file left */
    pardo_program *r = NULL;
    ck_assert_msg(pardo_graph_load(path, &r, &st) == PARDO_OK, "load: %s", st.msg);
    ck_assert(pardo_program_equal(p, r));
    ck_assert_str_eq(r->path, path);
    /* saving over an existing file replaces it */
    pardo_program_free(r);
    free(q->name);
    q->name = strdup("renamed");
    ck_assert_int_eq(pardo_graph_save(q, path, &st), PARDO_OK);
    ck_assert_int_eq(pardo_graph_load(path, &r, &st), PARDO_OK);
    ck_assert_str_eq(r->name, "renamed");
    ck_assert(!pardo_program_equal(p, r));
    ck_assert_int_eq(test_dir_count(dir), 1);
    unlink(path);
    rmdir(dir);
    pardo_program_free(r);
    pardo_program_free(q);
    pardo_program_free(p);
}
END_TEST

/* A program built in code with awkward numbers survives save and load bit
 * for bit; inferred temps are not written. */
START_TEST(test_round_trip_numbers) {
    pardo_status st;
    static const double vals[] = {0.1,       (double)0.1f, 1.0 / 3,  -0.0,         DBL_MIN,
                                  DBL_MAX,   5e-324,       -INFINITY, 9007199254740993.0, 123456789012345678.0,
                                  1e17,      -1e16,        2.5e-8,   (double)3.4028235e38f, 0.30000000000000004};
    const int n = (int)(sizeof vals / sizeof vals[0]);
    pardo_program *p = pardo_program_new();
    ck_assert_int_eq(pardo_program_add_block(p, -1, &st), 0);
    pardo_graph_var *v = pardo_block_add_var(&p->blocks[0], "c", &st);
    v->declared = true;
    v->type.dtype = PARDO_F64;
    v->type.ndim = 1;
    v->type.shape[0] = n;
    v->value = malloc(sizeof vals);
    memcpy(v->value, vals, sizeof vals);
    v->n_value = n;
    v->init.fill = PARDO_FILL_NORMAL;
    v->init.mean = (double)0.1f;
    v->init.std = 1.0 / 3;
    v->init.seed = 9007199254740992ULL;
    v->init.low = 42; /* not used by normal: not written, not compared */
    pardo_graph_var *t = pardo_block_add_var(&p->blocks[0], "inferred", &st);
    t->type.dtype = PARDO_F32;
    t->type.ndim = 0;
    pardo_op *op = pardo_block_add_op(&p->blocks[0], "scale", &st);
    pardo_op_add_input(op, "c", &st);
    pardo_op_add_output(op, "inferred", &st);
    op->attrs = pardo_value_new_object();
    pardo_value *num = pardo_value_new_number((double)0.1f);
    pardo_value_set(op->attrs, "scale", num, &st);
    pardo_value_free(num);

    char *text = pardo_graph_to_json(p, &st);
    ck_assert_msg(text != NULL, "to_json: %s", st.msg);
    pardo_program *q = test_parse_ok(text);
    ck_assert_ptr_null(pardo_block_find_var(&q->blocks[0], "inferred"));
    ck_assert(!pardo_program_equal(p, q)); /* p still has its inferred temp */
    p->blocks[0].n_vars = 1;
    free(t->name);
    ck_assert_msg(pardo_program_equal(p, q), "not equal after a round trip:\n%s", text);
    const pardo_graph_var *w = &q->blocks[0].vars[0];
    for (int i = 0; i < n; i++)
        ck_assert_msg(memcmp(&w->value[i], &vals[i], sizeof(double)) == 0, "value %d: %.17g != %.17g", i,
                      w->value[i], vals[i]);
    ck_assert(pardo_attr(&q->blocks[0].ops[0], "scale")->number == (double)0.1f);
    ck_assert_uint_eq(w->init.seed, 9007199254740992ULL);
    free(text);

    /* a NaN cannot be written */
    p->blocks[0].vars[0].value[2] = NAN;
    ck_assert_ptr_null(pardo_graph_to_json(p, &st));
    ck_assert_int_eq(st.code, PARDO_EINVAL);
    ck_assert_ptr_nonnull(strstr(st.msg, "var 'c'"));
    ck_assert_ptr_nonnull(strstr(st.msg, "NaN"));
    pardo_program_free(q);
    pardo_program_free(p);
}
END_TEST

START_TEST(test_equal) {
    pardo_program *p = test_parse_ok(test_full_graph), *q = test_parse_ok(test_full_graph);
    ck_assert(pardo_program_equal(p, q));
    ck_assert(pardo_program_equal(NULL, NULL));
    ck_assert(!pardo_program_equal(p, NULL));
    q->blocks[0].ops[1].role = PARDO_OP_FORWARD;
    ck_assert(!pardo_program_equal(p, q));
    q->blocks[0].ops[1].role = PARDO_OP_ROLE_NONE;
    pardo_graph_var *v = pardo_block_find_var(&q->blocks[0], "t");
    v->value[5] = 0.0; /* was -0 */
    ck_assert(!pardo_program_equal(p, q));
    v->value[5] = -0.0;
    ck_assert(pardo_program_equal(p, q));
    pardo_block_find_var(&q->blocks[0], "u")->init.high = 0.5;
    ck_assert(!pardo_program_equal(p, q));
    pardo_block_find_var(&q->blocks[0], "u")->init.high = 0.75;
    pardo_block_find_var(&q->blocks[0], "u")->init.mean = 3; /* unused by uniform */
    ck_assert(pardo_program_equal(p, q));
    q->blocks[0].ops[0].line = 99; /* positions are not compared */
    ck_assert(pardo_program_equal(p, q));
    pardo_program_free(q);
    pardo_program_free(p);
}
END_TEST

START_TEST(test_minimal) {
    pardo_program *p = test_parse_ok("{\"pardo\": 1, \"blocks\": [{}]}");
    ck_assert_int_eq(p->n_blocks, 1);
    ck_assert_ptr_null(p->name);
    ck_assert_ptr_null(p->doc);
    ck_assert_int_eq(p->blocks[0].n_vars, 0);
    ck_assert_int_eq(p->blocks[0].n_ops, 0);
    /* no path: messages say <input> */
    pardo_status st;
    pardo_program *q = NULL;
    ck_assert_int_eq(pardo_graph_parse("{}", 2, NULL, &q, &st), PARDO_EPARSE);
    ck_assert_msg(strncmp(st.msg, "<input>:1:1: ", 13) == 0, "%s", st.msg);
    /* text need not end in NUL */
    const char text[] = "{\"pardo\": 1, \"blocks\": [{}]}garbage";
    ck_assert_int_eq(pardo_graph_parse(text, strlen(text) - 7, "g.json", &q, &st), PARDO_OK);
    pardo_program_free(q);
    pardo_program_free(p);
}
END_TEST

Suite *make_graph_json_suite(void) {
    Suite *s = suite_create("graph_json");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_full_graph_fields);
    tcase_add_test(core, test_positions);
    tcase_add_test(core, test_positions_odd_text);
    tcase_add_test(core, test_round_trip);
    tcase_add_test(core, test_round_trip_numbers);
    tcase_add_test(core, test_equal);
    tcase_add_test(core, test_minimal);
    suite_add_tcase(s, core);
    return s;
}
