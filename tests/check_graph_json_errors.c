/* check_graph_json_errors.c - graph files that do not load
 * (src/io/graph_json.h): JSON syntax errors, every prefix and byte flip of
 * a full graph, each rule of the graph format, and file errors; each
 * message is checked for its file:line:col (against a naive count of where
 * a marker string sits in the test's own text) and its words. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_suites.h"
#include "graph_json_test_util.h"
#include "io/graph_json.h"
#include "test_util.h"

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
        test_marker_pos(text, marker, &line, &col);
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

/* ---- errors: JSON syntax ---- */

START_TEST(test_err_truncated) {
    size_t n = (size_t)(strrchr(test_full_graph, '}') - test_full_graph) + 1; /* the rest is whitespace */
    for (size_t len = 0; len < n; len++) {
        pardo_status st;
        pardo_program *p = NULL;
        int rc = pardo_graph_parse(test_full_graph, len, "g.json", &p, &st);
        ck_assert_msg(rc == PARDO_EPARSE, "prefix of %zu bytes: %s (%s)", len, pardo_code_name(rc), st.msg);
        ck_assert_ptr_null(p);
        ck_assert_msg(strncmp(st.msg, "g.json:", 7) == 0, "prefix of %zu bytes: %s", len, st.msg);
    }
    /* the message points at the end */
    const char text[] = "{\"pardo\": 1,\n \"blocks\": [{\"vars\": {}";
    const char *const needles[] = {"invalid JSON", "end of file", NULL};
    int line, col;
    test_marker_pos(text, "{}", &line, &col);
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
    /* a trailing comma is named and pointed at */
    EXPECT_ERROR("{\"pardo\": 1,\n  \"blocks\": [{},]}", ",]}", "invalid JSON", "a trailing comma before ']'");
    EXPECT_ERROR("{\"pardo\": 1,\n  \"blocks\": [{\"vars\": {\"a\": tru}}]}", "tru", "invalid JSON");
    EXPECT_ERROR("{\"pardo\": 01x}", "x}", "invalid JSON");
    /* cJSON stops one byte past a member name that is not a string */
    EXPECT_ERROR("{\"pardo\": 1,\n  blocks: [{}]}", "blocks", "invalid JSON", "near 'blocks: [{}]}'");
    EXPECT_ERROR("{\"pardo\": 1,\n  \"blocks\": [1],\n}", ",\n}", "invalid JSON", "a trailing comma before '}'");
    EXPECT_ERROR("{\"pardo\": 1, \"name\": \"a,\", \"blocks\": [}", "}", "invalid JSON", "near '}'"); /* no comma before it */
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
    test_marker_pos(deep, "[", &line, &col);
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
    test_marker_pos(nul, "]", &line, &col);
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
    size_t n = strlen(test_full_graph);
    char *buf = malloc(n + 1);
    int ok = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        for (const char *c = subst; *c; c++) {
            memcpy(buf, test_full_graph, n + 1);
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
    EXPECT_ERROR(graph_with(X_VAR ",\n        \"w1\": {\"dtype\": \"float8\", \"shape\": [2]}", RELU_OP),
                 "\"float8\"", "block 0, var 'w1'", "unknown dtype \"float8\"",
                 "expected one of float32, float64, int32, int64, bool, uint8, int8, int16, uint16, uint32, uint64, "
                 "float16, bfloat16");
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
    p = test_parse_ok(test_full_graph);
    snprintf(path, sizeof path, "%s/missing/g.json", dir);
    ck_assert_int_eq(pardo_graph_save(p, path, &st), PARDO_EIO);
    ck_assert_ptr_nonnull(strstr(st.msg, path));
    ck_assert_ptr_nonnull(strstr(st.msg, strerror(ENOENT)));
    struct stat sb;
    ck_assert_int_ne(stat(path, &sb), 0);
    ck_assert_int_eq(test_dir_count(dir), 0);
    /* saving over a folder fails and leaves no temporary file */
    snprintf(path, sizeof path, "%s/sub", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(pardo_graph_save(p, path, &st), PARDO_EIO);
    ck_assert_int_eq(test_dir_count(dir), 1);
    rmdir(path);
    /* a graph with a NaN is not saved at all */
    snprintf(path, sizeof path, "%s/nan.json", dir);
    pardo_block_find_var(&p->blocks[0], "t")->value[0] = NAN;
    ck_assert_int_eq(pardo_graph_save(p, path, &st), PARDO_EINVAL);
    ck_assert_ptr_nonnull(strstr(st.msg, path));
    ck_assert_int_eq(test_dir_count(dir), 0);
    pardo_program_free(p);
    rmdir(dir);
    /* bad arguments */
    ck_assert_int_eq(pardo_graph_parse(NULL, 0, "g.json", &p, &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_graph_load(NULL, &p, &st), PARDO_EINVAL);
}
END_TEST

Suite *make_graph_json_errors_suite(void) {
    Suite *s = suite_create("graph_json_errors");
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
