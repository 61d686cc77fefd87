/* graph_json_test_util.c - the graph file suites' shared text and helpers (see graph_json_test_util.h). */
#include "graph_json_test_util.h"

#include <check.h>
#include <string.h>

#include "io/graph_json.h"

const char test_full_graph[] =
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

void test_marker_pos(const char *text, const char *marker, int *line, int *col) {
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

pardo_program *test_parse_ok(const char *text) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_program *p = NULL;
    int rc = pardo_graph_parse(text, strlen(text), "g.json", &p, &st);
    ck_assert_msg(rc == PARDO_OK, "parse failed: %s", st.msg);
    ck_assert_ptr_nonnull(p);
    return p;
}
