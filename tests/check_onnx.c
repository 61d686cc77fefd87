/* check_onnx.c - the ONNX importer through its public API (io/onnx.h,
 * io/model_load.h): telling models from graph files by content, importing
 * PyTorch's MLP export (feeds, params and their tensors, outputs by ONNX
 * name), every prefix and many byte flips of a model refused or imported
 * without a crash, a TensorProto file read back, and a build without ONNX
 * refusing with a message; a Loop whose body holds an If (subgraphs as child
 * blocks) run, and run again after a JSON round trip. The numbers are checked against PyTorch by
 * tests/cli_onnx_test.sh and against the ONNX node tests by make onnx-test. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "core/graph.h"
#include "graph_test_util.h"
#include "io/file_io.h"
#include "io/graph_json.h"
#include "io/model_load.h"
#include "io/onnx.h"
#include "test_util.h"

static unsigned char *read_fixture(const char *name, size_t *n) {
    pardo_status st;
    unsigned char *data = NULL;
    ck_assert_msg(pardo_file_read_all(test_fixture(name), &data, n, &st) == PARDO_OK, "%s", st.msg);
    return data;
}

START_TEST(models_are_told_from_graph_files_by_content) {
    size_t n;
    unsigned char *m = read_fixture("onnx/mlp.onnx", &n);
    ck_assert(pardo_onnx_looks_like(m, n));
    free(m);
    const unsigned char json[] = "{\"pardo\": 1}", ws[] = "\n  {", npy[] = "\x93NUMPY";
    ck_assert(!pardo_onnx_looks_like(json, sizeof json - 1));
    ck_assert(!pardo_onnx_looks_like(ws, sizeof ws - 1));
    ck_assert(!pardo_onnx_looks_like(npy, sizeof npy - 1));
    ck_assert(!pardo_onnx_looks_like(json, 0));
}
END_TEST

START_TEST(mlp_imports_with_feeds_params_and_outputs) {
    pardo_status st;
    pardo_program *p = NULL;
    pardo_tensor_list w;
    pardo_tensor_list_init(&w);
    bool onnx = false;
    int rc = pardo_model_load(test_fixture("onnx/mlp.onnx"), &p, &w, &onnx, &st);
    if (!pardo_onnx_built()) {
        ck_assert_int_eq(rc, PARDO_ENOTSUP);
        ck_assert(strstr(st.msg, "without ONNX support"));
        ck_assert(onnx);
        return;
    }
    ck_assert_msg(rc == PARDO_OK, "%s", st.msg);
    ck_assert(onnx);
    const pardo_block *b = &p->blocks[0];
    const pardo_graph_var *x = pardo_block_find_var(b, "x"), *y = pardo_block_find_var(b, "y");
    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(x->role, PARDO_VAR_FEED);
    ck_assert_int_eq(x->type.ndim, 2);
    ck_assert_int_eq(x->type.shape[0], -1); /* the dynamic batch */
    ck_assert_int_eq(x->type.shape[1], 20);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->type.shape[1], 5);
    int params = 0;
    for (int i = 0; i < b->n_vars; i++)
        if (b->vars[i].role == PARDO_VAR_PARAM) {
            params++;
            pardo_tensor *t = pardo_tensor_list_find(&w, b->vars[i].name);
            ck_assert_msg(t != NULL, "param %s has no tensor", b->vars[i].name);
            ck_assert(pardo_shape_equal(t->ndim, t->shape, b->vars[i].type.ndim, b->vars[i].type.shape));
        }
    ck_assert_int_eq(params, 6); /* three Gemm weights and biases */
    ck_assert_int_eq(w.n, 6);
    int matmuls = 0;
    for (int i = 0; i < b->n_ops; i++) matmuls += strcmp(b->ops[i].type, "matmul") == 0;
    ck_assert_int_eq(matmuls, 3);
    pardo_tensor_list_clear(&w);
    pardo_program_free(p);
}
END_TEST

/* Runs p with x = [1, 2, 3] and n = 4 and checks control_flow.onnx's outputs, worked out by hand in
 * tools/onnx_export/make_control_flow.py: acc + x for iterations 0 and 1, acc * 2 for 2 and 3. */
static void check_control_flow_run(const pardo_program *p) {
    const double xs[3] = {1, 2, 3}, n = 4, y[3] = {12, 24, 36}, ys[12] = {2, 4, 6, 3, 6, 9, 6, 12, 18, 12, 24, 36};
    const int64_t three = 3;
    pardo_executor *ex = test_executor(p, 2);
    pardo_tensor *x = test_tensor_from(PARDO_F32, 1, &three, xs), *nt = test_tensor_from(PARDO_I64, 0, NULL, &n);
    test_feed(ex, "x", x);
    test_feed(ex, "n", nt);
    test_run(ex);
    const pardo_tensor *yt = test_fetch(ex, "y"), *yst = test_fetch(ex, "ys");
    ck_assert_int_eq(yt->numel, 3);
    ck_assert_int_eq(yst->ndim, 2);
    ck_assert_int_eq(yst->shape[0], 4);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(pardo_tensor_get_f64(yt, i), y[i]);
    for (int i = 0; i < 12; i++) ck_assert_double_eq(pardo_tensor_get_f64(yst, i), ys[i]);
    pardo_tensor_release(x);
    pardo_tensor_release(nt);
    pardo_executor_free(ex);
}

START_TEST(loop_and_if_import_as_child_blocks) {
    if (!pardo_onnx_built()) return;
    pardo_status st;
    pardo_program *p = NULL;
    pardo_tensor_list w;
    pardo_tensor_list_init(&w);
    bool onnx = false;
    int rc = pardo_model_load(test_fixture("onnx/control_flow.onnx"), &p, &w, &onnx, &st);
    ck_assert_msg(rc == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(p->n_blocks, 4); /* main, the body, the If's branches (children of the body) */
    ck_assert_str_eq(p->blocks[0].ops[0].type, "loop");
    ck_assert_int_eq(p->blocks[1].parent, 0);
    ck_assert_int_eq(p->blocks[2].parent, 1);
    ck_assert_int_eq(p->blocks[3].parent, 1);
    check_control_flow_run(p);
    char *text = pardo_graph_to_json(p, &st);
    ck_assert_msg(text, "%s", st.msg);
    pardo_program *q = test_program(text, "control_flow.json");
    check_control_flow_run(q);
    free(text);
    pardo_program_free(q);
    pardo_tensor_list_clear(&w);
    pardo_program_free(p);
}
END_TEST

/* A damaged model is refused with a message or imported; never a crash, never weights left on failure. */
static void import_damaged(const unsigned char *buf, size_t n) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_program *p = NULL;
    pardo_tensor_list w;
    pardo_tensor_list_init(&w);
    int rc = pardo_onnx_import(buf, n, "damaged.onnx", &p, &w, &st);
    if (rc != PARDO_OK) {
        ck_assert_ptr_null(p);
        ck_assert_int_eq(w.n, 0);
        ck_assert_msg(strncmp(st.msg, "damaged.onnx", 12) == 0, "message without the file: %s", st.msg);
    }
    pardo_tensor_list_clear(&w);
    pardo_program_free(p);
}

START_TEST(every_prefix_and_byte_flips_are_refused_or_imported) {
    if (!pardo_onnx_built()) return;
    size_t n;
    unsigned char *m = read_fixture("onnx/mlp.onnx", &n);
    for (size_t k = 0; k < n; k += (k < 512 ? 1 : 7)) import_damaged(m, k);
    unsigned char *c = malloc(n);
    ck_assert_ptr_nonnull(c);
    uint64_t s = 12345;
    for (int it = 0; it < 400; it++) {
        memcpy(c, m, n);
        for (int f = 0; f < 1 + it % 4; f++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            c[(s >> 33) % n] ^= (unsigned char)(1u << ((s >> 20) % 8));
        }
        import_damaged(c, n);
    }
    free(c);
    free(m);
}
END_TEST

START_TEST(a_graph_file_loads_through_the_same_door) {
    pardo_status st;
    pardo_program *p = NULL;
    pardo_tensor_list w;
    pardo_tensor_list_init(&w);
    bool onnx = true;
    ck_assert_msg(pardo_model_load("graphs/mlp.json", &p, &w, &onnx, &st) == PARDO_OK, "%s", st.msg);
    ck_assert(!onnx);
    ck_assert_int_eq(w.n, 0);
    pardo_program_free(p);
    ck_assert_int_ne(pardo_model_load("no/such/file.onnx", &p, &w, &onnx, &st), PARDO_OK);
    ck_assert(strstr(st.msg, "no/such/file.onnx"));
}
END_TEST

START_TEST(a_tensor_file_that_is_not_one_is_refused) {
    pardo_status st;
    pardo_tensor *t = NULL;
    char *name = NULL;
    int rc = pardo_onnx_read_tensor_file(test_fixture("f4_2x3.npy"), &t, &name, &st);
    ck_assert_int_ne(rc, PARDO_OK);
    ck_assert_ptr_null(t);
    ck_assert(strstr(st.msg, "f4_2x3.npy"));
}
END_TEST

Suite *make_onnx_suite(void) {
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, models_are_told_from_graph_files_by_content);
    tcase_add_test(tc, mlp_imports_with_feeds_params_and_outputs);
    tcase_add_test(tc, loop_and_if_import_as_child_blocks);
    tcase_add_test(tc, a_graph_file_loads_through_the_same_door);
    tcase_add_test(tc, a_tensor_file_that_is_not_one_is_refused);
    tcase_add_test(tc, every_prefix_and_byte_flips_are_refused_or_imported);
    suite_add_tcase(s, tc);
    return s;
}
