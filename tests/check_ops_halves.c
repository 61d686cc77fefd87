/* check_ops_halves.c - the ops that take float16 and bfloat16 through their
 * float32 kernel (pardo_op_def.halves_in_f32, ops/op_halves.c): for each,
 * a case whose float inputs are values both half types hold exactly; the
 * op on the half inputs must give, bit for bit, the float32 op's result on
 * the same values rounded once to the half type; every flagged op has a
 * case, and the gradient ops still refuse the half types. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_suites.h"
#include "core/half.h"
#include "op_test_util.h"
#include "test_util.h"
#include "unary.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_IN 4

/* An input: a float one the half types replace (lo..hi random values), a
 * float32 one kept as float32 (resize's scales; values given), or int64. */
typedef enum in_kind { IN_HALF, IN_F32, IN_I64, IN_ABSENT } in_kind;

typedef struct in_spec {
    in_kind kind;
    int nd;
    int64_t shape[5];
    double lo, hi;  // IN_HALF: the range
    double vals[8]; // IN_F32, IN_I64: the values (numel <= 8)
} in_spec;

typedef struct half_case {
    const char *op, *attrs;
    int n_in;
    in_spec in[MAX_IN];
} half_case;

static const half_case cases[] = {
    {"matmul",
     NULL,
     2,
     {{.kind = IN_HALF, .nd = 2, .shape = {4, 5}, .lo = -2, .hi = 2},
      {.kind = IN_HALF, .nd = 2, .shape = {5, 3}, .lo = -2, .hi = 2}}},
    {"reduce_sum", "{\"axes\": [1]}", 1, {{.kind = IN_HALF, .nd = 3, .shape = {3, 4, 5}, .lo = -2, .hi = 2}}},
    {"reduce_mean", "{\"axes\": [0, 2]}", 1, {{.kind = IN_HALF, .nd = 3, .shape = {3, 4, 5}, .lo = -2, .hi = 2}}},
    {"reduce_prod", "{\"axes\": [1]}", 1, {{.kind = IN_HALF, .nd = 3, .shape = {3, 4, 5}, .lo = 0.5, .hi = 1.5}}},
    {"reduce_l1", NULL, 1, {{.kind = IN_HALF, .nd = 3, .shape = {3, 4, 5}, .lo = -2, .hi = 2}}},
    {"reduce_l2", "{\"axes\": [2]}", 1, {{.kind = IN_HALF, .nd = 3, .shape = {3, 4, 5}, .lo = -2, .hi = 2}}},
    {"reduce_sum_square", "{\"axes\": [1]}", 1, {{.kind = IN_HALF, .nd = 3, .shape = {3, 4, 5}, .lo = -2, .hi = 2}}},
    {"reduce_log_sum", "{\"axes\": [1]}", 1, {{.kind = IN_HALF, .nd = 3, .shape = {3, 4, 5}, .lo = 0.25, .hi = 2}}},
    {"reduce_log_sum_exp", "{\"axes\": [1]}", 1, {{.kind = IN_HALF, .nd = 3, .shape = {3, 4, 5}, .lo = -4, .hi = 4}}},
    {"softmax", NULL, 1, {{.kind = IN_HALF, .nd = 2, .shape = {3, 7}, .lo = -4, .hi = 4}}},
    {"log_softmax", NULL, 1, {{.kind = IN_HALF, .nd = 2, .shape = {3, 7}, .lo = -4, .hi = 4}}},
    {"hardmax", NULL, 1, {{.kind = IN_HALF, .nd = 2, .shape = {3, 7}, .lo = -4, .hi = 4}}},
    {"conv2d",
     NULL,
     2,
     {{.kind = IN_HALF, .nd = 4, .shape = {1, 2, 6, 6}, .lo = -1, .hi = 1},
      {.kind = IN_HALF, .nd = 4, .shape = {3, 2, 3, 3}, .lo = -1, .hi = 1}}},
    {"conv_transpose",
     NULL,
     2,
     {{.kind = IN_HALF, .nd = 4, .shape = {1, 2, 4, 4}, .lo = -1, .hi = 1},
      {.kind = IN_HALF, .nd = 4, .shape = {2, 3, 3, 3}, .lo = -1, .hi = 1}}},
    {"conv_nd",
     "{\"strides\": [2], \"pads\": [1, 0]}",
     2,
     {{.kind = IN_HALF, .nd = 3, .shape = {2, 2, 9}, .lo = -1, .hi = 1},
      {.kind = IN_HALF, .nd = 3, .shape = {3, 2, 3}, .lo = -1, .hi = 1}}},
    {"avg_pool2d", "{\"kernel\": [2, 2]}", 1, {{.kind = IN_HALF, .nd = 4, .shape = {1, 2, 6, 6}, .lo = -2, .hi = 2}}},
    {"avg_pool_nd",
     "{\"kernel\": [3, 3], \"strides\": [1, 1]}",
     1,
     {{.kind = IN_HALF, .nd = 4, .shape = {1, 2, 6, 6}, .lo = -2, .hi = 2}}},
    {"layer_norm",
     "{\"axis\": -1}",
     3,
     {{.kind = IN_HALF, .nd = 2, .shape = {4, 6}, .lo = -2, .hi = 2},
      {.kind = IN_HALF, .nd = 1, .shape = {6}, .lo = 0.5, .hi = 1.5},
      {.kind = IN_HALF, .nd = 1, .shape = {6}, .lo = -1, .hi = 1}}},
    {"lrn", "{\"size\": 3}", 1, {{.kind = IN_HALF, .nd = 4, .shape = {1, 4, 3, 3}, .lo = -2, .hi = 2}}},
    {"resize",
     NULL,
     3,
     {{.kind = IN_HALF, .nd = 4, .shape = {1, 1, 3, 3}, .lo = -2, .hi = 2},
      {.kind = IN_ABSENT},
      {.kind = IN_F32, .nd = 1, .shape = {4}, .vals = {1, 1, 2, 2}}}},
    {"cumsum",
     NULL,
     2,
     {{.kind = IN_HALF, .nd = 2, .shape = {3, 4}, .lo = -2, .hi = 2},
      {.kind = IN_I64, .nd = 0, .shape = {0}, .vals = {1}}}},
    {"einsum",
     "{\"equation\": \"ij,jk->ik\"}",
     2,
     {{.kind = IN_HALF, .nd = 2, .shape = {3, 4}, .lo = -2, .hi = 2},
      {.kind = IN_HALF, .nd = 2, .shape = {4, 2}, .lo = -2, .hi = 2}}},
    {"roi_align",
     NULL,
     3,
     {{.kind = IN_HALF, .nd = 4, .shape = {1, 2, 6, 6}, .lo = -2, .hi = 2},
      {.kind = IN_F32, .nd = 2, .shape = {2, 4}, .vals = {0, 0, 4, 4, 1, 1, 5, 3}},
      {.kind = IN_I64, .nd = 1, .shape = {2}, .vals = {0, 0}}}},
    {"grid_sample",
     NULL,
     2,
     {{.kind = IN_HALF, .nd = 4, .shape = {1, 2, 4, 4}, .lo = -2, .hi = 2},
      {.kind = IN_HALF, .nd = 4, .shape = {1, 3, 3, 2}, .lo = -1, .hi = 1}}},
    {"prelu",
     NULL,
     2,
     {{.kind = IN_HALF, .nd = 2, .shape = {3, 4}, .lo = -2, .hi = 2},
      {.kind = IN_HALF, .nd = 1, .shape = {4}, .lo = 0, .hi = 0.5}}},
    {"det", NULL, 1, {{.kind = IN_HALF, .nd = 3, .shape = {2, 3, 3}, .lo = -2, .hi = 2}}},
};

/* The tensor of spec s, its float values those of half type h (a float32 copy when wide). */
static pardo_tensor *make_input(const in_spec *s, pardo_dtype h, bool wide, test_rng *r) {
    if (s->kind == IN_ABSENT)
        return NULL;
    if (s->kind == IN_F32)
        return test_tensor_from(PARDO_F32, s->nd, s->shape, s->vals);
    if (s->kind == IN_I64)
        return test_tensor_from(PARDO_I64, s->nd, s->shape, s->vals);
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(wide ? PARDO_F32 : h, s->nd, s->shape, &st);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < t->numel; i++) {
        const float v = (float)test_rng_uniform(r, s->lo, s->hi);
        const uint16_t b = h == PARDO_BF16 ? pardo_bf16_from_f32(v) : pardo_f16_from_f32(v);
        if (wide)
            ((float *)pardo_tensor_data(t))[i] = h == PARDO_BF16 ? pardo_bf16_to_f32(b) : pardo_f16_to_f32(b);
        else
            ((uint16_t *)pardo_tensor_data(t))[i] = b;
    }
    return t;
}

START_TEST(test_halves_match_the_float32_op_rounded) {
    static const pardo_dtype halves[] = {PARDO_F16, PARDO_BF16};
    for (int c = 0; c < LEN(cases); c++)
        for (int h = 0; h < 2; h++) {
            const half_case *hc = &cases[c];
            pardo_tensor *wide[MAX_IN], *half[MAX_IN], *yw = NULL, *yh = NULL;
            test_rng r1 = {6000u + (uint64_t)(c * 2 + h)}, r2 = r1; /* the same draws for both */
            for (int k = 0; k < hc->n_in; k++) {
                wide[k] = make_input(&hc->in[k], halves[h], true, &r1);
                half[k] = make_input(&hc->in[k], halves[h], false, &r2);
            }
            pardo_status st;
            ck_assert_msg(test_run_op(hc->op, hc->attrs, hc->n_in, wide, 1, &yw, &st) == PARDO_OK, "%s float32: %s",
                          hc->op, st.msg);
            ck_assert_msg(test_run_op(hc->op, hc->attrs, hc->n_in, half, 1, &yh, &st) == PARDO_OK, "%s %s: %s", hc->op,
                          pardo_dtype_name(halves[h]), st.msg);
            ck_assert_int_eq(yw->dtype, PARDO_F32);
            ck_assert_int_eq(yh->dtype, halves[h]);
            ck_assert(pardo_shape_equal(yw->ndim, yw->shape, yh->ndim, yh->shape));
            for (int64_t i = 0; i < yw->numel; i++) {
                const float f = ((const float *)pardo_tensor_data(yw))[i];
                const uint16_t want = h ? pardo_bf16_from_f32(f) : pardo_f16_from_f32(f),
                               got = ((const uint16_t *)pardo_tensor_data(yh))[i];
                ck_assert_msg(got == want, "%s %s element %lld: 0x%04x, expected 0x%04x (float32 %g)", hc->op,
                              pardo_dtype_name(halves[h]), (long long)i, got, want, (double)f);
            }
            pardo_tensor_release(yw);
            pardo_tensor_release(yh);
            for (int k = 0; k < hc->n_in; k++) {
                pardo_tensor_release(wide[k]);
                pardo_tensor_release(half[k]);
            }
        }
}
END_TEST

/* Every op flagged halves_in_f32 has a case above, or is one of the unary ops (the shared schema
 * pardo_unary_x_in: check_ops_elementwise.c's test_unary_ops_take_half_types runs each); the ops not flagged (and
 * the gradients) refuse the half types. */
START_TEST(test_every_flagged_op_has_a_case) {
    int flagged = 0, unary = 0;
    for (int i = 0; i < pardo_op_count(); i++) {
        const pardo_op_def *def = pardo_op_at(i);
        if (!def->halves_in_f32)
            continue;
        if (def->inputs == pardo_unary_x_in) {
            unary++;
            continue;
        }
        flagged++;
        bool found = false;
        for (int c = 0; c < LEN(cases); c++)
            found = found || strcmp(cases[c].op, def->type) == 0;
        ck_assert_msg(found, "%s takes the half types through float32 but has no case here", def->type);
    }
    ck_assert_int_eq(flagged, LEN(cases));
    ck_assert_int_ge(unary, 30);
    const int64_t s[] = {4, 5};
    pardo_type x = test_type(PARDO_F16, 2, s), y;
    const pardo_type *in[3] = {&x, &x, &x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("softmax_grad", NULL, 3, in, 1, &y, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "float16") != NULL, "%s", st.msg);
    ck_assert_int_eq(test_infer_op("batch_norm", NULL, 1, in, 1, &y, &st), PARDO_ENOTSUP);
}
END_TEST

Suite *make_ops_halves_suite(void) {
    Suite *s = suite_create("ops_halves");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, test_halves_match_the_float32_op_rounded);
    tcase_add_test(tc, test_every_flagged_op_has_a_case);
    suite_add_tcase(s, tc);
    return s;
}
