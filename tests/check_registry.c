/* check_registry.c - the op table: it passes its own check, lookup of known
 * and unknown names, every op's schema is complete (docs, attr defaults that
 * parse as JSON of the declared type), the known-op list, and the CUDA
 * kernels of ops/cuda/kernels.h's list in the defs of a CUDA build (none in a
 * CPU-only one), and the note an op run on the CPU in a GPU run prints once. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "core/device.h"
#include "kernels.h"
#include "op.h"
#include "core/value.h"
#include "core/value_json.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const required_ops[] = {
    "identity", "add", "sub",   "mul",    "div",        "relu",        "sigmoid", "tanh",
    "exp",      "log", "scale", "matmul", "reduce_sum", "reduce_mean", "softmax", "softmax_cross_entropy",
    "fill",
};

START_TEST(test_registry_check_passes) {
    pardo_status st;
    ck_assert_msg(pardo_registry_check(&st) == PARDO_OK, "%s", st.msg);
}
END_TEST

START_TEST(test_lookup) {
    for (int i = 0; i < LEN(required_ops); i++) {
        const pardo_op_def *d = pardo_op_lookup(required_ops[i]);
        ck_assert_msg(d != NULL, "op '%s' is not registered", required_ops[i]);
        ck_assert_str_eq(d->type, required_ops[i]);
    }
    ck_assert_ptr_null(pardo_op_lookup("no_such_op"));
    ck_assert_ptr_null(pardo_op_lookup(""));
    ck_assert_ptr_null(pardo_op_lookup(NULL));
    ck_assert_ptr_null(pardo_op_lookup("Add")); /* names are case-sensitive */
    ck_assert_int_ge(pardo_op_count(), LEN(required_ops));
    ck_assert_ptr_null(pardo_op_at(-1));
    ck_assert_ptr_null(pardo_op_at(pardo_op_count()));
    for (int i = 0; i < pardo_op_count(); i++) ck_assert_ptr_eq(pardo_op_lookup(pardo_op_at(i)->type), pardo_op_at(i));
}
END_TEST

static bool default_fits(const pardo_value *v, pardo_attr_type t) {
    if (v->kind == PARDO_V_NULL) return true; /* optional with no default value (clip's bounds) */
    switch (t) {
    case PARDO_ATTR_INT: return pardo_value_is_integer(v);
    case PARDO_ATTR_FLOAT: return v->kind == PARDO_V_NUMBER;
    case PARDO_ATTR_BOOL: return v->kind == PARDO_V_BOOL;
    case PARDO_ATTR_STRING: return v->kind == PARDO_V_STRING;
    case PARDO_ATTR_INTS:
        if (v->kind != PARDO_V_ARRAY) return false;
        for (int i = 0; i < v->n; i++)
            if (!pardo_value_is_integer(&v->items[i])) return false;
        return true;
    case PARDO_ATTR_FLOATS: return v->kind == PARDO_V_ARRAY;
    case PARDO_ATTR_OBJECT: return v->kind == PARDO_V_OBJECT;
    default: return true;
    }
}

static void check_args(const char *op, const char *what, const pardo_arg_def *args, int n) {
    ck_assert_msg(n == 0 || args != NULL, "%s: %d %s but no array", op, n, what);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(args[i].name && args[i].name[0], "%s: %s %d has no name", op, what, i);
        ck_assert_msg(args[i].doc && args[i].doc[0], "%s: %s '%s' has no doc", op, what, args[i].name);
        ck_assert_msg(!args[i].variadic || i == n - 1, "%s: variadic %s '%s' is not last", op, what, args[i].name);
    }
}

START_TEST(test_schemas_complete) {
    for (int i = 0; i < pardo_op_count(); i++) {
        const pardo_op_def *d = pardo_op_at(i);
        ck_assert_msg(d->doc && d->doc[0], "%s: no doc", d->type);
        ck_assert_msg(d->infer && d->cpu, "%s: no infer or cpu kernel", d->type);
        ck_assert_msg(d->n_outputs >= 1, "%s: no outputs", d->type);
        check_args(d->type, "input", d->inputs, d->n_inputs);
        check_args(d->type, "output", d->outputs, d->n_outputs);
        ck_assert_msg(d->n_attrs == 0 || d->attrs != NULL, "%s: attrs missing", d->type);
        for (int a = 0; a < d->n_attrs; a++) {
            const pardo_attr_def *ad = &d->attrs[a];
            ck_assert_msg(ad->name && ad->name[0], "%s: attr %d has no name", d->type, a);
            ck_assert_msg(ad->doc && ad->doc[0], "%s: attr '%s' has no doc", d->type, ad->name);
            for (int b = 0; b < a; b++)
                ck_assert_msg(strcmp(d->attrs[b].name, ad->name) != 0, "%s: attr '%s' twice", d->type, ad->name);
            if (!ad->dflt) continue; /* required */
            pardo_value *v = NULL;
            pardo_status st;
            ck_assert_msg(pardo_value_parse_json(ad->dflt, &v, &st) == PARDO_OK, "%s: attr '%s' default %s: %s",
                          d->type, ad->name, ad->dflt, st.msg);
            ck_assert_msg(default_fits(v, ad->type), "%s: attr '%s' default %s does not fit its type", d->type,
                          ad->name, ad->dflt);
            pardo_value_free(v);
        }
    }
}
END_TEST

START_TEST(test_known_list) {
    char buf[2048];
    pardo_op_known_list(buf, sizeof buf);
    for (int i = 0; i < LEN(required_ops); i++)
        ck_assert_msg(strstr(buf, required_ops[i]) != NULL, "'%s' missing from known list: %s", required_ops[i], buf);
    ck_assert_msg(strstr(buf, ", ") != NULL, "list is not comma separated: %s", buf);
    char small[8];
    pardo_op_known_list(small, sizeof small); /* truncates, stays terminated */
    ck_assert_uint_lt(strlen(small), sizeof small);
}
END_TEST

/* The "did you mean" names: the nearest by edit distance (case ignored, a swap one edit), ties in table order,
 * none where every name is far. */
START_TEST(test_nearest_names) {
    char buf[256];
    ck_assert_str_eq(pardo_op_nearest("maxpool2d", buf, sizeof buf), "max_pool2d");
    ck_assert_str_eq(pardo_op_nearest("MaxPool", buf, sizeof buf), "max_pool2d or max_unpool");
    ck_assert_str_eq(pardo_op_nearest("matmull", buf, sizeof buf), "matmul");
    ck_assert_str_eq(pardo_op_nearest("Relu", buf, sizeof buf), "relu");
    ck_assert_str_eq(pardo_op_nearest("rleu", buf, sizeof buf), "relu");
    ck_assert_str_eq(pardo_op_nearest("softmax_crossentropy", buf, sizeof buf), "softmax_cross_entropy");
    ck_assert_str_eq(pardo_op_nearest("mull", buf, sizeof buf), "mul");
    ck_assert_str_eq(pardo_op_nearest("xyzzyplugh", buf, sizeof buf), "");
    ck_assert_str_eq(pardo_op_nearest("foo", buf, sizeof buf), "");
    ck_assert_str_eq(pardo_op_nearest("", buf, sizeof buf), "");
    /* two at the same distance, both named */
    ck_assert_str_eq(pardo_op_nearest("qqq_pool2d", buf, sizeof buf), "max_pool2d or avg_pool2d");
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ck_assert_str_eq(pardo_op_nearest(longname, buf, sizeof buf), "");
    char small[4];
    pardo_op_nearest("maxpool2d", small, sizeof small); /* truncates, stays terminated */
    ck_assert_uint_lt(strlen(small), sizeof small);
}
END_TEST

/* The ops ops/cuda/kernels.h lists, each with its kernel as this program linked it: the function in a CUDA build
 * (a strong reference: libpardo.a's ops/cuda/ objects linked in), NULL in a CPU-only one (weak, never defined). */
typedef struct cuda_entry {
    const char *type;
    pardo_kernel_fn fn;
} cuda_entry;
#define CUDA_ENTRY(name) {#name, pardo_cuda_##name},
static const cuda_entry cuda_listed[] = {PARDO_CUDA_KERNELS(CUDA_ENTRY)};
#undef CUDA_ENTRY

/* In a CUDA build every listed op's def has its kernel, in a CPU-only build none has one; and no op outside the
 * list has a CUDA kernel (the list is where a new kernel is added). */
START_TEST(test_cuda_kernels_registered) {
    const bool built = pardo_device_compiled();
    ck_assert_int_ge(LEN(cuda_listed), 10);
    for (int i = 0; i < LEN(cuda_listed); i++) {
        const pardo_op_def *d = pardo_op_lookup(cuda_listed[i].type);
        ck_assert_msg(d != NULL, "ops/cuda/kernels.h lists '%s', which is not registered", cuda_listed[i].type);
        if (built) {
            ck_assert_msg(cuda_listed[i].fn != NULL, "pardo_cuda_%s did not link into a CUDA build",
                          cuda_listed[i].type);
            ck_assert_msg(d->cuda == cuda_listed[i].fn, "op '%s' in a CUDA build: def->cuda is %s, expected "
                          "pardo_cuda_%s", d->type, d->cuda ? "another function" : "NULL", d->type);
        } else {
            ck_assert_msg(cuda_listed[i].fn == NULL && d->cuda == NULL,
                          "op '%s' has a CUDA kernel in a build without CUDA", d->type);
        }
    }
    for (int i = 0; i < pardo_op_count(); i++) {
        const pardo_op_def *d = pardo_op_at(i);
        bool listed = false;
        for (int k = 0; k < LEN(cuda_listed) && !listed; k++) listed = strcmp(cuda_listed[k].type, d->type) == 0;
        ck_assert_msg(listed || d->cuda == NULL, "op '%s' has a CUDA kernel that ops/cuda/kernels.h does not list",
                      d->type);
    }
}
END_TEST

/* An op a GPU run hands to the CPU is said once per op type, with the reason, on stderr (the test runs in its own
 * process under Check's fork; stderr goes to a temporary file for it). */
START_TEST(test_cpu_run_noted_once_per_op_type) {
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    fflush(stderr);
    int saved = dup(fileno(stderr));
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(f), fileno(stderr)), 0);
    const pardo_op_def *softmax = pardo_op_lookup("softmax"), *add = pardo_op_lookup("add");
    pardo_op_note_cpu_run(softmax, "it has no CUDA kernel");
    pardo_op_note_cpu_run(softmax, "it has no CUDA kernel");
    pardo_op_note_cpu_run(add, "its CUDA kernel takes float32 and float64, not int64");
    pardo_op_note_cpu_run(add, "its CUDA kernel takes float32 and float64, not int32");
    pardo_op_note_cpu_run(NULL, "nothing");
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    char text[1024] = "";
    rewind(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    ck_assert_str_eq(text,
                     "note: op 'softmax' runs on the CPU in this GPU run (it has no CUDA kernel); its tensors are "
                     "moved between the devices\nnote: op 'add' runs on the CPU in this GPU run (its CUDA kernel "
                     "takes float32 and float64, not int64); its tensors are moved between the devices\n");
}
END_TEST

START_TEST(test_err_unknown_op_is_null) {
    /* an unknown name is not an error inside the registry: lookup returns
     * NULL and the caller lists the known ones */
    ck_assert_ptr_null(pardo_op_lookup("matmul "));
    ck_assert_ptr_null(pardo_op_lookup("softmax_cross"));
}
END_TEST

Suite *make_registry_suite(void) {
    Suite *s = suite_create("registry");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_registry_check_passes);
    tcase_add_test(core, test_lookup);
    tcase_add_test(core, test_schemas_complete);
    tcase_add_test(core, test_known_list);
    tcase_add_test(core, test_nearest_names);
    tcase_add_test(core, test_cuda_kernels_registered);
    tcase_add_test(core, test_cpu_run_noted_once_per_op_type);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_unknown_op_is_null);
    suite_add_tcase(s, errors);
    return s;
}
