/* check_graph_json.c - loading and saving graph files (src/io/graph_json.h).
 * Positions are checked against a naive line/column count of where a marker
 * string sits in the test's own text. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_suites.h"
#include "io/graph_json.h"
#include "test_util.h"

/* ---- helpers ---- */

/* Line and column (1-based, bytes) of the first `marker` in text. */
static void marker_pos(const char *text, const char *marker, int *line, int *col) {
    const char *at = strstr(text, marker);
    ck_assert_msg(at != NULL, "marker '%s' not in the test text", marker);
    *line = 1;
    *col = 1;
    for (const char *s = text; s < at; s++) {
        if (*s == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static pardo_program *parse_ok(const char *text) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_program *p = NULL;
    int rc = pardo_graph_parse(text, strlen(text), "g.json", &p, &st);
    ck_assert_msg(rc == PARDO_OK, "parse failed: %s", st.msg);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Parses text as "g.json", expects PARDO_EPARSE with a message that starts
 * with "g.json:L:C: " (L:C where `marker` is; just "g.json: " when marker is
 * NULL) and contains each of the NULL-terminated needles. */
static void expect_error_at(const char *text, size_t len, const char *marker, const char *const *needles) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_program *p = (pardo_program *)&st; /* must be reset to NULL */
    int rc = pardo_graph_parse(text, len, "g.json", &p, &st);
    ck_assert_msg(rc == PARDO_EPARSE, "expected EPARSE, got %s (%s) for:\n%s", pardo_code_name(rc), st.msg, text);
    ck_assert_int_eq(st.code, PARDO_EPARSE);
    ck_assert_ptr_null(p);
    char prefix[64];
    if (marker) {
        int line, col;
        marker_pos(text, marker, &line, &col);
        snprintf(prefix, sizeof prefix, "g.json:%d:%d: ", line, col);
    } else {
        snprintf(prefix, sizeof prefix, "g.json: ");
    }
    ck_assert_msg(strncmp(st.msg, prefix, strlen(prefix)) == 0, "message '%s' does not start with '%s'", st.msg,
                  prefix);
    for (int i = 0; needles[i]; i++)
        ck_assert_msg(strstr(st.msg, needles[i]) != NULL, "message '%s' lacks '%s'", st.msg, needles[i]);
}

#define EXPECT_ERROR(text, marker, ...)                                              \
    do {                                                                             \
        const char *const needles_[] = {__VA_ARGS__, NULL};                          \
        expect_error_at((text), strlen(text), (marker), needles_);                   \
    } while (0)

/* A one-block graph around the given vars and ops (JSON members / elements). */
static char *graph_with(const char *vars, const char *ops) {
    static char buf[8192];
    snprintf(buf, sizeof buf,
             "{\n"
             "  \"pardo\": 1,\n"
             "  \"blocks\": [\n"
             "    {\n"
             "      \"vars\": {\n"
             "%s\n"
             "      },\n"
             "      \"ops\": [\n"
             "%s\n"
             "      ]\n"
             "    }\n"
             "  ]\n"
             "}\n",
             vars, ops);
    return buf;
}

#define X_VAR "        \"x\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"role\": \"feed\"}"
#define RELU_OP "        {\"op\": \"relu\", \"in\": [\"x\"], \"out\": [\"y\"]}"

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* ---- the full graph ---- */

static const char full_graph[] =
    "{\n"
    "  \"pardo\": 1,\n"
    "  \"name\": \"mlp\",\n"
    "  \"doc\": {\"title\": \"test graph\", \"tags\": [\"a\", \"b\"], \"n\": 3, \"ok\": true, \"none\": null},\n"
    "  \"blocks\": [\n"
    "    {\n"
    "      \"vars\": {\n"
    "        \"x\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"role\": \"feed\"},\n"
    "        \"y\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"},\n"
    "        \"w1\": {\"dtype\": \"float32\", \"shape\": [4, 3], \"role\": \"param\",\n"
    "               \"init\": {\"fill\": \"xavier_uniform\", \"seed\": 1}},\n"
    "        \"w2\": {\"dtype\": \"float64\", \"shape\": [3, 2], \"role\": \"param\", \"init\": {\"fill\": \"kaiming_uniform\"}},\n"
    "        \"b1\": {\"dtype\": \"float32\", \"shape\": [3], \"role\": \"param\",\n"
    "               \"init\": {\"fill\": \"constant\", \"value\": 0.5, \"seed\": 7}},\n"
    "        \"u\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"state\",\n"
    "              \"init\": {\"seed\": 3, \"fill\": \"uniform\", \"low\": -0.25, \"high\": 0.75}},\n"
    "        \"n\": {\"dtype\": \"float64\", \"shape\": [2, 2], \"role\": \"state\", \"init\": {\"fill\": \"normal\", \"mean\": 1.5, \"std\": 0.125}},\n"
    "        \"d\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"state\", \"init\": {\"fill\": \"uniform\"}},\n"
    "        \"p\": {\"dtype\": \"float32\", \"shape\": [3, 2], \"role\": \"param\"},\n"
    "        \"lr\": {\"dtype\": \"float32\", \"shape\": [], \"value\": 0.1},\n"
    "        \"m\": {\"dtype\": \"int32\", \"shape\": [2, 3], \"value\": [[1, 2, 3], [4, 5, -6]]},\n"
    "        \"mask\": {\"dtype\": \"bool\", \"shape\": [3], \"value\": [true, false, 1]},\n"
    "        \"parts\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"kind\": \"tensor_array\", \"role\": \"temp\"},\n"
    "        \"t\": {\"dtype\": \"float64\", \"shape\": [-1], \"kind\": \"tensor\",\n"
    "              \"value\": [1e-300, 3.141592653589793, -2, 0.10000000149011612, 5e-324, -0, 1e999]}\n"
    "      },\n"
    "      \"ops\": [\n"
    "        {\"op\": \"matmul\", \"in\": [\"x\", \"w1\"], \"out\": [\"h\"], \"name\": \"fc1\", \"role\": \"forward\",\n"
    "         \"attrs\": {\"transpose_a\": false, \"nested\": {\"list\": [1, [2, 3], {\"k\": \"v\"}], \"x\": null}}},\n"
    "        {\"op\": \"relu\", \"in\": [\"h\"], \"out\": [\"a\"]},\n"
    "        {\"op\": \"split\", \"in\": [\"x\"], \"out\": [\"parts\"], \"attrs\": {\"parts\": 0, \"axis\": 0}},\n"
    "        {\"op\": \"parallel_do\", \"in\": [\"parts\", \"\"], \"out\": [\"o\"], \"attrs\": {\"block\": 1}, \"role\": \"loss\"},\n"
    "        {\"role\": \"backward\", \"op\": \"relu_grad\", \"in\": [\"h\", \"a\", \"a@GRAD\"], \"out\": [\"h@GRAD\", \"\\\"q\\\"\"]},\n"
    "        {\"op\": \"sgd\", \"in\": [\"w1\", \"w1@GRAD\", \"lr\"], \"out\": [\"w1\"], \"role\": \"optimize\", \"attrs\": {}}\n"
    "      ]\n"
    "    },\n"
    "    {\n"
    "      \"parent\": 0,\n"
    "      \"vars\": {\n"
    "        \"z\": {\"dtype\": \"float32\", \"shape\": [2, 2], \"value\": [1.5, 2.5, 3.5, 4.5]}\n"
    "      },\n"
    "      \"ops\": [\n"
    "        {\"op\": \"add\", \"in\": [\"parts\", \"z\"], \"out\": [\"o\"]}\n"
    "      ]\n"
    "    },\n"
    "    {\"parent\": 1}\n"
    "  ]\n"
    "}\n";

static const pardo_var *var(const pardo_program *p, int b, const char *name) {
    const pardo_var *v = pardo_block_find_var(&p->blocks[b], name);
    ck_assert_msg(v != NULL, "no var '%s' in block %d", name, b);
    ck_assert(v->declared);
    return v;
}

static void check_shape(const pardo_var *v, int ndim, const int64_t *shape) {
    ck_assert_int_eq(v->type.ndim, ndim);
    for (int d = 0; d < ndim; d++) ck_assert_int_eq(v->type.shape[d], shape[d]);
}

START_TEST(test_full_graph_fields) {
    pardo_program *p = parse_ok(full_graph);
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

    const pardo_var *v = var(p, 0, "x");
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
    pardo_program *p = parse_ok(full_graph);
    int line, col;
    /* a var is where its name is */
    marker_pos(full_graph, "\"w1\": {", &line, &col);
    ck_assert_int_eq(var(p, 0, "w1")->line, line);
    ck_assert_int_eq(var(p, 0, "w1")->col, col);
    marker_pos(full_graph, "\"z\": {", &line, &col);
    ck_assert_int_eq(var(p, 1, "z")->line, line);
    ck_assert_int_eq(var(p, 1, "z")->col, col);
    /* an op is where its object starts */
    marker_pos(full_graph, "{\"op\": \"relu\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].ops[1].line, line);
    ck_assert_int_eq(p->blocks[0].ops[1].col, col);
    marker_pos(full_graph, "{\"role\": \"backward\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].ops[4].line, line);
    ck_assert_int_eq(p->blocks[0].ops[4].col, col);
    marker_pos(full_graph, "{\"op\": \"add\"", &line, &col);
    ck_assert_int_eq(p->blocks[1].ops[0].line, line);
    ck_assert_int_eq(p->blocks[1].ops[0].col, col);
    /* blocks */
    marker_pos(full_graph, "{\n      \"vars\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].line, line);
    ck_assert_int_eq(p->blocks[0].col, col);
    marker_pos(full_graph, "{\"parent\": 1}", &line, &col);
    ck_assert_int_eq(p->blocks[2].line, line);
    ck_assert_int_eq(p->blocks[2].col, col);
    /* attrs values, nested ones too */
    const pardo_op *fc1 = &p->blocks[0].ops[0];
    marker_pos(full_graph, "{\"transpose_a\"", &line, &col);
    ck_assert_int_eq(fc1->attrs->line, line);
    ck_assert_int_eq(fc1->attrs->col, col);
    const pardo_value *list = pardo_value_get(pardo_attr(fc1, "nested"), "list");
    marker_pos(full_graph, "[1, [2, 3]", &line, &col);
    ck_assert_int_eq(list->line, line);
    ck_assert_int_eq(list->col, col);
    marker_pos(full_graph, "{\"k\": \"v\"}", &line, &col);
    ck_assert_int_eq(list->items[2].line, line);
    ck_assert_int_eq(list->items[2].col, col);
    marker_pos(full_graph, "\"v\"}", &line, &col);
    ck_assert_int_eq(list->items[2].items[0].line, line);
    ck_assert_int_eq(list->items[2].items[0].col, col);
    /* doc */
    marker_pos(full_graph, "[\"a\", \"b\"]", &line, &col);
    ck_assert_int_eq(pardo_value_get(p->doc, "tags")->line, line);
    ck_assert_int_eq(pardo_value_get(p->doc, "tags")->col, col);
    /* after an op (fc1) that spans two lines */
    char where[256];
    pardo_op_where(p, 0, 0, where, sizeof where);
    marker_pos(full_graph, "{\"op\": \"matmul\"", &line, &col);
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
    pardo_program *p = parse_ok(text);
    int line, col;
    ck_assert_str_eq(p->doc->string, "a \" [ { \\");
    ck_assert_str_eq(p->blocks[0].vars[0].name, "we\"ird\\");
    marker_pos(text, "\"we", &line, &col);
    ck_assert_int_eq(p->blocks[0].vars[0].line, line);
    ck_assert_int_eq(p->blocks[0].vars[0].col, col);
    marker_pos(text, "\"s\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].vars[1].line, line);
    ck_assert_int_eq(p->blocks[0].vars[1].col, col);
    marker_pos(text, "{\"op\"", &line, &col);
    ck_assert_int_eq(p->blocks[0].ops[0].line, line);
    ck_assert_int_eq(p->blocks[0].ops[0].col, col);
    pardo_program_free(p);
}
END_TEST

START_TEST(test_round_trip) {
    pardo_status st;
    pardo_program *p = parse_ok(full_graph);
    char *text = pardo_graph_to_json(p, &st);
    ck_assert_msg(text != NULL, "to_json: %s", st.msg);
    pardo_program *q = parse_ok(text);
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
    ck_assert_int_eq(count_entries(dir), 1); /* no temporary file left */
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
    ck_assert_int_eq(count_entries(dir), 1);
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
    pardo_var *v = pardo_block_add_var(&p->blocks[0], "c", &st);
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
    pardo_var *t = pardo_block_add_var(&p->blocks[0], "inferred", &st);
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
    pardo_program *q = parse_ok(text);
    ck_assert_ptr_null(pardo_block_find_var(&q->blocks[0], "inferred"));
    ck_assert(!pardo_program_equal(p, q)); /* p still has its inferred temp */
    p->blocks[0].n_vars = 1;
    free(t->name);
    ck_assert_msg(pardo_program_equal(p, q), "not equal after a round trip:\n%s", text);
    const pardo_var *w = &q->blocks[0].vars[0];
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
    pardo_program *p = parse_ok(full_graph), *q = parse_ok(full_graph);
    ck_assert(pardo_program_equal(p, q));
    ck_assert(pardo_program_equal(NULL, NULL));
    ck_assert(!pardo_program_equal(p, NULL));
    q->blocks[0].ops[1].role = PARDO_OP_FORWARD;
    ck_assert(!pardo_program_equal(p, q));
    q->blocks[0].ops[1].role = PARDO_OP_ROLE_NONE;
    pardo_var *v = pardo_block_find_var(&q->blocks[0], "t");
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
    pardo_program *p = parse_ok("{\"pardo\": 1, \"blocks\": [{}]}");
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

/* ---- errors: JSON syntax ---- */

START_TEST(test_err_truncated) {
    size_t n = (size_t)(strrchr(full_graph, '}') - full_graph) + 1; /* the rest is whitespace */
    for (size_t len = 0; len < n; len++) {
        pardo_status st;
        pardo_program *p = NULL;
        int rc = pardo_graph_parse(full_graph, len, "g.json", &p, &st);
        ck_assert_msg(rc == PARDO_EPARSE, "prefix of %zu bytes: %s (%s)", len, pardo_code_name(rc), st.msg);
        ck_assert_ptr_null(p);
        ck_assert_msg(strncmp(st.msg, "g.json:", 7) == 0, "prefix of %zu bytes: %s", len, st.msg);
    }
    /* the message points at the end */
    const char text[] = "{\"pardo\": 1,\n \"blocks\": [{\"vars\": {}";
    const char *const needles[] = {"invalid JSON", "end of file", NULL};
    int line, col;
    marker_pos(text, "{}", &line, &col);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "g.json:%d:%d: ", line, col + 2);
    pardo_status st;
    pardo_program *p = NULL;
    ck_assert_int_eq(pardo_graph_parse(text, strlen(text), "g.json", &p, &st), PARDO_EPARSE);
    ck_assert_msg(strncmp(st.msg, prefix, strlen(prefix)) == 0, "'%s' vs '%s'", st.msg, prefix);
    for (int i = 0; needles[i]; i++) ck_assert_ptr_nonnull(strstr(st.msg, needles[i]));
    /* the empty prefix */
    EXPECT_ERROR("", NULL, "empty file");
    EXPECT_ERROR(" \n\t ", NULL, "empty file");
}
END_TEST

START_TEST(test_err_syntax) {
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}]} x", "x", "invalid JSON", "after the end");
    EXPECT_ERROR("{\"pardo\": 1,\n  \"blocks\": [{}] \"x\": 1}", "\"x\"", "invalid JSON", "near '\"x\": 1}'");
    EXPECT_ERROR("{\"pardo\": 1,\n  \"blocks\": [{},]}", "]}", "invalid JSON");
    EXPECT_ERROR("{\"pardo\": 1,\n  \"blocks\": [{\"vars\": {\"a\": tru}}]}", "tru", "invalid JSON");
    EXPECT_ERROR("{\"pardo\": 01x}", "x}", "invalid JSON");
    /* cJSON stops one byte past a member name that is not a string */
    EXPECT_ERROR("{\"pardo\": 1,\n  blocks: [{}]}", "blocks", "invalid JSON", "near 'blocks: [{}]}'");
    EXPECT_ERROR("{\"pardo\": 1,\n  \"blocks\": [1],\n}", "}", "invalid JSON", "near '}'");
    EXPECT_ERROR("{\"pardo\": 1,\n  \"blocks\": [{\"vars\": {\"a\": {\"dtype\": \"float32}}}]}", "\"float32",
                 "invalid JSON", "unterminated string");
    static char deep[4200];
    strcpy(deep, "{\"pardo\": 1, \"doc\": ");
    for (int i = 0; i < 1500; i++) strcat(deep, "[");
    for (int i = 0; i < 1500; i++) strcat(deep, "]");
    strcat(deep, ", \"blocks\": [{}]}");
    int line, col;
    pardo_status st;
    pardo_program *p = NULL;
    ck_assert_int_eq(pardo_graph_parse(deep, strlen(deep), "g.json", &p, &st), PARDO_EPARSE);
    marker_pos(deep, "[", &line, &col);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "g.json:1:%d: invalid JSON: nested deeper than 1000 levels", col + 999);
    ck_assert_str_eq(st.msg, prefix);
}
END_TEST

START_TEST(test_err_nul_position) {
    const char nul[] = "{\"pardo\": 1,\n \"blocks\": [{}]\0}";
    pardo_status st;
    pardo_program *p = NULL;
    ck_assert_int_eq(pardo_graph_parse(nul, sizeof nul - 1, "g.json", &p, &st), PARDO_EPARSE);
    int line, col;
    marker_pos(nul, "]", &line, &col);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "g.json:%d:%d: ", line, col + 1);
    ck_assert_msg(strncmp(st.msg, prefix, strlen(prefix)) == 0, "'%s' vs '%s'", st.msg, prefix);
    ck_assert_ptr_nonnull(strstr(st.msg, "NUL"));
}
END_TEST

/* Every byte replaced by JSON-ish bytes: loads or fails cleanly, and when
 * it loads, positions still match (the scanner agrees with cJSON). */
START_TEST(test_err_mutations) {
    static const char subst[] = "{}[]\",:0-e. \ntfn\\x";
    size_t n = strlen(full_graph);
    char *buf = malloc(n + 1);
    int ok = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        for (const char *c = subst; *c; c++) {
            memcpy(buf, full_graph, n + 1);
            buf[i] = *c;
            pardo_status st;
            pardo_program *p = NULL;
            int rc = pardo_graph_parse(buf, n, "g.json", &p, &st);
            ck_assert_msg(rc == PARDO_OK || rc == PARDO_EPARSE, "%s", st.msg);
            if (rc == PARDO_OK) {
                ok++;
                ck_assert_int_gt(p->blocks[0].line, 0);
                pardo_program_free(p);
            } else {
                failed++;
                ck_assert_msg(strncmp(st.msg, "g.json:", 7) == 0, "%s", st.msg);
            }
        }
    }
    ck_assert_int_gt(ok, 0);
    ck_assert_int_gt(failed, 0);
    free(buf);
}
END_TEST

/* ---- errors: the graph format ---- */

START_TEST(test_err_top_level) {
    EXPECT_ERROR("[1]", "[", "the file is an array", "expected an object");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}],\n \"version\": 2}", "\"version\"", "top level", "unknown key \"version\"",
                 "allowed: pardo, name, blocks, doc");
    EXPECT_ERROR("{\n  \"blocks\": [{}]}", "{", "missing key \"pardo\"");
    EXPECT_ERROR("{\"pardo\": 1}", "{", "missing key \"blocks\"");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": []}", "[]", "\"blocks\" is empty");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": {}}", "{}", "\"blocks\" is an object, expected an array");
    EXPECT_ERROR("{\"pardo\": 1, \"name\": 3, \"blocks\": [{}]}", "3", "\"name\" is a number, expected a string");
    EXPECT_ERROR("{\"pardo\": 1, \"pardo\": 1, \"blocks\": [{}]}", "\"pardo\": 1, \"b", "duplicate key \"pardo\"");
    EXPECT_ERROR("{\"pardo\": 1, \"doc\": {\"a\": 1, \"a\": 2}, \"blocks\": [{}]}", "\"a\": 2", "doc",
                 "duplicate key \"a\"");
}
END_TEST

START_TEST(test_err_version) {
    EXPECT_ERROR("{\"pardo\": 2, \"blocks\": [{}]}", "2", "\"pardo\" is 2", "expected format version 1");
    EXPECT_ERROR("{\"pardo\": 1.5, \"blocks\": [{}]}", "1.5", "expected format version 1");
    EXPECT_ERROR("{\"pardo\": \"1\", \"blocks\": [{}]}", "\"1\"", "\"pardo\" is a string", "expected format version 1");
}
END_TEST

START_TEST(test_err_dtype) {
    EXPECT_ERROR(graph_with(X_VAR ",\n        \"w1\": {\"dtype\": \"float16\", \"shape\": [2]}", RELU_OP),
                 "\"float16\"", "block 0, var 'w1'", "unknown dtype \"float16\"",
                 "expected one of float32, float64, int32, int64, bool");
    EXPECT_ERROR(graph_with("        \"w1\": {\"dtype\": 32, \"shape\": [2]}", RELU_OP), "32",
                 "block 0, var 'w1'", "\"dtype\" is a number, expected a string");
    EXPECT_ERROR(graph_with("        \"w1\": {\"shape\": [2]}", RELU_OP), "\"w1\"", "block 0, var 'w1'",
                 "missing key \"dtype\"");
}
END_TEST

START_TEST(test_err_shape) {
    EXPECT_ERROR(graph_with("        \"s\": {\"dtype\": \"float32\"}", RELU_OP), "\"s\"", "var 's'",
                 "missing key \"shape\"");
    EXPECT_ERROR(graph_with("        \"s\": {\"dtype\": \"float32\", \"shape\": \"2x3\"}", RELU_OP), "\"2x3\"",
                 "var 's'", "\"shape\" is a string, expected an array of integers");
    EXPECT_ERROR(graph_with("        \"s\": {\"dtype\": \"float32\", \"shape\": [2, -2]}", RELU_OP), "-2]", "var 's'",
                 "shape[1] is -2");
    EXPECT_ERROR(graph_with("        \"s\": {\"dtype\": \"float32\", \"shape\": [2.5]}", RELU_OP), "2.5", "var 's'",
                 "shape[0] is 2.5", "expected an integer");
    EXPECT_ERROR(graph_with("        \"s\": {\"dtype\": \"float32\", \"shape\": [2, \"3\"]}", RELU_OP), "\"3\"",
                 "var 's'", "shape[1] is a string");
    EXPECT_ERROR(graph_with("        \"s\": {\"dtype\": \"float32\", \"shape\": [1, 1, 1, 1, 1, 1, 1, 1, 1]}", RELU_OP),
                 "[1, 1", "var 's'", "9 dims, at most 8");
    EXPECT_ERROR(graph_with("        \"s\": {\"dtype\": \"float32\", \"shape\": [4294967296, 4294967296]}", RELU_OP),
                 "[4294967296", "var 's'", "64 bits");
    /* 2^60 elements fit in int64, their bytes do not: the same rule as shape inference and the tensors */
    EXPECT_ERROR(graph_with("        \"s\": {\"dtype\": \"float32\", \"shape\": [-1, 1073741824, 1073741824]}", RELU_OP),
                 "[-1", "var 's'", "64 bits");
}
END_TEST

START_TEST(test_err_role_kind) {
    EXPECT_ERROR(graph_with("        \"r\": {\"dtype\": \"float32\", \"shape\": [], \"role\": \"weight\"}", RELU_OP),
                 "\"weight\"", "var 'r'", "unknown role \"weight\"", "feed, param, state, temp");
    EXPECT_ERROR(graph_with("        \"r\": {\"dtype\": \"float32\", \"shape\": [], \"role\": null}", RELU_OP), "null",
                 "var 'r'", "\"role\" is null, expected a string");
    EXPECT_ERROR(graph_with("        \"k\": {\"dtype\": \"float32\", \"shape\": [], \"kind\": \"list\"}", RELU_OP),
                 "\"list\"", "var 'k'", "unknown kind \"list\"", "tensor or tensor_array");
    EXPECT_ERROR(graph_with("        \"k\": {\"dtype\": \"float32\", \"shape\": [], \"size\": 3}", RELU_OP),
                 "\"size\"", "var 'k'", "unknown key \"size\"", "allowed: dtype, shape, kind, role, init, value");
    EXPECT_ERROR(graph_with("        \"k\": {\"dtype\": \"float32\", \"shape\": [], \"dtype\": \"int32\"}", RELU_OP),
                 "\"dtype\": \"int32\"", "var 'k'", "duplicate key \"dtype\"");
    EXPECT_ERROR(graph_with("        \"k\": [1]", RELU_OP), "[1]", "var 'k'", "the var is an array");
    EXPECT_ERROR(graph_with("        \"\": {\"dtype\": \"float32\", \"shape\": []}", RELU_OP), "\"\":", "var ''",
                 "name is empty");
}
END_TEST

START_TEST(test_err_init) {
#define INIT_VAR(init) "        \"w\": {\"dtype\": \"float32\", \"shape\": [2], \"role\": \"param\", \"init\": " init "}"
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"zeros\"}"), RELU_OP), "\"zeros\"", "block 0, var 'w', init",
                 "unknown fill \"zeros\"", "constant, uniform, normal, xavier_uniform, kaiming_uniform");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"uniform\", \"mean\": 0}"), RELU_OP), "\"mean\"",
                 "var 'w', init", "unknown key \"mean\" for fill uniform", "allowed: fill, low, high, seed");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"normal\", \"sed\": 1}"), RELU_OP), "\"sed\"", "var 'w', init",
                 "unknown key \"sed\"");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"seed\": 1}"), RELU_OP), "{\"seed\"", "var 'w', init",
                 "missing key \"fill\"");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"constant\"}"), RELU_OP), "{\"fill\"", "var 'w', init",
                 "missing key \"value\"");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"constant\", \"value\": \"1\"}"), RELU_OP), "\"1\"",
                 "var 'w', init", "\"value\" is a string, expected a number");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"xavier_uniform\", \"seed\": -1}"), RELU_OP), "-1",
                 "var 'w', init", "\"seed\" is -1, expected a non-negative integer");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"xavier_uniform\", \"seed\": \"7\"}"), RELU_OP), "\"7\"",
                 "var 'w', init", "\"seed\" is a string");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"uniform\", \"low\": 2, \"high\": 1}"), RELU_OP), "{\"fill\"",
                 "var 'w', init", "low <= high");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"normal\", \"std\": -1}"), RELU_OP), "{\"fill\"",
                 "var 'w', init", "std >= 0");
    EXPECT_ERROR(graph_with(INIT_VAR("{\"fill\": \"normal\", \"fill\": \"normal\"}"), RELU_OP),
                 "\"fill\": \"normal\"}", "var 'w', init", "duplicate key \"fill\"");
    EXPECT_ERROR(graph_with(INIT_VAR("\"xavier_uniform\""), RELU_OP), "\"xavier_uniform\"", "var 'w'",
                 "\"init\" is a string, expected an object");
#undef INIT_VAR
}
END_TEST

START_TEST(test_err_value) {
    EXPECT_ERROR(graph_with("        \"c\": {\"dtype\": \"float32\", \"shape\": [2, 3],\n"
                            "              \"value\": [[1, 2, 3], [4, 5]]}",
                            RELU_OP),
                 "[[1", "var 'c'", "\"value\" has 5 elements, shape [2, 3] has 6");
    EXPECT_ERROR(graph_with("        \"c\": {\"dtype\": \"float32\", \"shape\": [], \"value\": [1, 2]}", RELU_OP),
                 "[1, 2]", "var 'c'", "2 elements");
    EXPECT_ERROR(graph_with("        \"c\": {\"dtype\": \"float32\", \"shape\": [2], \"value\": [1, \"2\"]}", RELU_OP),
                 "\"2\"", "var 'c'", "value element 1 is a string");
    EXPECT_ERROR(graph_with("        \"c\": {\"dtype\": \"float32\", \"shape\": [1], \"value\": [[null]]}", RELU_OP),
                 "null", "var 'c'", "value element 0 is null");
    EXPECT_ERROR(graph_with("        \"c\": {\"dtype\": \"float32\", \"shape\": [1], \"value\": {\"a\": 1}}", RELU_OP),
                 "{\"a\"", "var 'c'", "\"value\" is an object");
    EXPECT_ERROR(graph_with("        \"c\": {\"dtype\": \"int32\", \"shape\": [2], \"value\": [1, 2.5]}", RELU_OP),
                 "2.5", "var 'c'", "value element 1 is 2.5", "int32");
    EXPECT_ERROR(graph_with("        \"c\": {\"dtype\": \"int32\", \"shape\": [1], \"value\": [3000000000]}", RELU_OP),
                 "3000000000", "var 'c'", "value element 0", "int32");
    EXPECT_ERROR(graph_with("        \"c\": {\"dtype\": \"bool\", \"shape\": [1], \"value\": [2]}", RELU_OP), "2]",
                 "var 'c'", "value element 0 is 2", "bool");
}
END_TEST

START_TEST(test_err_duplicate_var) {
    EXPECT_ERROR(graph_with(X_VAR ",\n        \"w\": {\"dtype\": \"float32\", \"shape\": []},\n" X_VAR, RELU_OP),
                 "\"x\": {\"dtype\": \"float32\", \"shape\": [-1, 4], \"role\": \"feed\"}\n", "block 0",
                 "duplicate var 'x'");
}
END_TEST

START_TEST(test_err_op_keys) {
    EXPECT_ERROR(graph_with(X_VAR, RELU_OP ",\n        {\"op\": \"matmul\", \"inputs\": [\"x\"], \"out\": [\"h\"], \"name\": \"fc1\"}"),
                 "\"inputs\"", "block 0, op 1 'fc1'", "unknown key \"inputs\"",
                 "(allowed: op, in, out, attrs, name, role)");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"in\": [\"x\"], \"out\": [\"h\"]}"), "{\"in\"", "block 0, op 0",
                 "missing key \"op\"");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"in\": [\"x\"]}"), "{\"op\"", "block 0, op 0 (relu)",
                 "missing key \"out\"");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"in\": [\"x\"], \"out\": []}"), "[]}", "op 0 (relu)",
                 "\"out\" is empty");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"in\": [\"x\", 3], \"out\": [\"y\"]}"), "3]",
                 "op 0 (relu)", "in[1] is a number, expected a var name");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"in\": \"x\", \"out\": [\"y\"]}"), "\"x\", \"out",
                 "op 0 (relu)", "\"in\" is a string, expected an array");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": 7, \"out\": [\"y\"]}"), "7", "op 0", "\"op\" is a number");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"\", \"out\": [\"y\"]}"), "\"\"", "op 0", "\"op\" is empty");
    EXPECT_ERROR(graph_with(X_VAR, "        \"relu\""), "\"relu\"", "block 0, op 0", "the op is a string");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"out\": [\"y\"], \"role\": \"train\"}"), "\"train\"",
                 "op 0 (relu)", "unknown role \"train\"", "forward, loss, backward, optimize");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"out\": [\"y\"], \"attrs\": [1]}"), "[1]",
                 "op 0 (relu)", "\"attrs\" is an array, expected an object");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"out\": [\"y\"], \"attrs\": {\"a\": {\"b\": 1, \"b\": 2}}}"),
                 "\"b\": 2", "op 0 (relu), attrs", "duplicate key \"b\"");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"out\": [\"y\"], \"name\": \"\"}"), "\"\"}",
                 "op 0", "\"name\" is empty");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"out\": [\"y\"], \"name\": [\"n\"]}"), "[\"n\"]",
                 "op 0 (relu)", "\"name\" is an array, expected a string");
    EXPECT_ERROR(graph_with(X_VAR, "        {\"op\": \"relu\", \"out\": [\"y\"], \"out\": [\"z\"]}"), "\"out\": [\"z",
                 "op 0 (relu)", "duplicate key \"out\"");
}
END_TEST

START_TEST(test_err_blocks) {
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{\"parent\": 0}]}", "\"parent\"", "block 0",
                 "block 0 is the main block");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{},\n {\"vars\": {}}]}", "{\"vars\"", "block 1",
                 "missing key \"parent\"");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}, {\"parent\": 2}]}", "2}", "block 1",
                 "\"parent\" is 2, expected a block index from 0 to 1");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}, {\"parent\": -1}]}", "-1", "block 1", "\"parent\" is -1");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}, {\"parent\": 1}]}", "1}", "block 1", "the block itself");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}, {\"parent\": \"0\"}]}", "\"0\"", "block 1",
                 "\"parent\" is a string, expected a block index");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}, {\"parent\": 0}, {\"parent\": 3},\n {\"parent\": 2}]}", "3}",
                 "block 2", "cycle (2 -> 3 -> 2)");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}, {\"parent\": 0, \"ops\": 1}]}", "1}", "block 1",
                 "\"ops\" is a number, expected an array");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{\"vars\": []}]}", "[]}", "block 0",
                 "\"vars\" is an array, expected an object");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{\"var\": {}}]}", "\"var\"", "block 0", "unknown key \"var\"",
                 "allowed: parent, vars, ops");
    EXPECT_ERROR("{\"pardo\": 1, \"blocks\": [{}, 5]}", "5]", "block 1", "the block is a number");
}
END_TEST

START_TEST(test_err_io) {
    pardo_status st;
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    /* a missing file */
    snprintf(path, sizeof path, "%s/none.json", dir);
    pardo_program *p = (pardo_program *)&st;
    ck_assert_int_eq(pardo_graph_load(path, &p, &st), PARDO_EIO);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(st.msg, path));
    ck_assert_ptr_nonnull(strstr(st.msg, strerror(ENOENT)));
    /* a folder */
    ck_assert_int_eq(pardo_graph_load(dir, &p, &st), PARDO_EIO);
    ck_assert_ptr_nonnull(strstr(st.msg, dir));
    /* a file with a bad graph: the message names the file */
    snprintf(path, sizeof path, "%s/bad.json", dir);
    const char *bad = "{\"pardo\": 3, \"blocks\": [{}]}";
    test_write_file(path, bad, strlen(bad));
    ck_assert_int_eq(pardo_graph_load(path, &p, &st), PARDO_EPARSE);
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s:1:11: ", path);
    ck_assert_msg(strncmp(st.msg, prefix, strlen(prefix)) == 0, "%s", st.msg);
    unlink(path);
    /* saving into a missing folder fails and leaves nothing */
    p = parse_ok(full_graph);
    snprintf(path, sizeof path, "%s/missing/g.json", dir);
    ck_assert_int_eq(pardo_graph_save(p, path, &st), PARDO_EIO);
    ck_assert_ptr_nonnull(strstr(st.msg, path));
    ck_assert_ptr_nonnull(strstr(st.msg, strerror(ENOENT)));
    struct stat sb;
    ck_assert_int_ne(stat(path, &sb), 0);
    ck_assert_int_eq(count_entries(dir), 0);
    /* saving over a folder fails and leaves no temporary file */
    snprintf(path, sizeof path, "%s/sub", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(pardo_graph_save(p, path, &st), PARDO_EIO);
    ck_assert_int_eq(count_entries(dir), 1);
    rmdir(path);
    /* a graph with a NaN is not saved at all */
    snprintf(path, sizeof path, "%s/nan.json", dir);
    pardo_block_find_var(&p->blocks[0], "t")->value[0] = NAN;
    ck_assert_int_eq(pardo_graph_save(p, path, &st), PARDO_EINVAL);
    ck_assert_ptr_nonnull(strstr(st.msg, path));
    ck_assert_int_eq(count_entries(dir), 0);
    pardo_program_free(p);
    rmdir(dir);
    /* bad arguments */
    ck_assert_int_eq(pardo_graph_parse(NULL, 0, "g.json", &p, &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_graph_load(NULL, &p, &st), PARDO_EINVAL);
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
    TCase *errors = tcase_create("Errors");
    tcase_set_timeout(errors, 60);
    tcase_add_test(errors, test_err_truncated);
    tcase_add_test(errors, test_err_syntax);
    tcase_add_test(errors, test_err_nul_position);
    tcase_add_test(errors, test_err_mutations);
    tcase_add_test(errors, test_err_top_level);
    tcase_add_test(errors, test_err_version);
    tcase_add_test(errors, test_err_dtype);
    tcase_add_test(errors, test_err_shape);
    tcase_add_test(errors, test_err_role_kind);
    tcase_add_test(errors, test_err_init);
    tcase_add_test(errors, test_err_value);
    tcase_add_test(errors, test_err_duplicate_var);
    tcase_add_test(errors, test_err_op_keys);
    tcase_add_test(errors, test_err_blocks);
    tcase_add_test(errors, test_err_io);
    suite_add_tcase(s, errors);
    return s;
}
