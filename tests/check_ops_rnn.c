/* check_ops_rnn.c - rnn, gru and lstm: the forward (Y, Y_h, Y_c) against a
 * naive reference written here (per batch entry, per time step, the ONNX
 * equations with dot products), over directions forward, reverse and
 * bidirectional, layouts 0 and 1, sequence_lens, initial states, biases,
 * peepholes, clip, linear_before_reset, input_forget and activation lists;
 * the gradients rnn_grad, gru_grad, lstm_grad by float64 finite
 * differences; inference; shape, attr and sequence_lens refusals. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "exec/executor.h"
#include "grad_test_util.h"
#include "graph_test_util.h"
#include "pass.h"
#include "op_test_util.h"
#include "test_util.h"

enum { CELL_RNN, CELL_GRU, CELL_LSTM };
static const char *const cell_type[3] = {"rnn", "gru", "lstm"};
static const int cell_g[3] = {1, 3, 4};

/* One case: the cell, the sizes, which optional inputs, the attrs. */
typedef struct rnn_case {
    int cell;
    int64_t seq, batch, input, hidden;
    const char *direction; // forward, reverse, bidirectional
    int layout;
    bool bias, lens, init_h, init_c, peep;
    bool lbr, input_forget;
    double clip;           // 0: none
    const char *acts;      // JSON list or NULL
} rnn_case;

static int case_dirs(const rnn_case *c) { return strcmp(c->direction, "bidirectional") == 0 ? 2 : 1; }

/* The case's attrs as JSON. */
static void case_attrs(const rnn_case *c, char *buf, size_t n) {
    int o = snprintf(buf, n, "{\"hidden_size\": %lld, \"direction\": \"%s\", \"layout\": %d", (long long)c->hidden,
                     c->direction, c->layout);
    if (c->clip > 0) o += snprintf(buf + o, n - (size_t)o, ", \"clip\": %g", c->clip);
    if (c->cell == CELL_GRU) o += snprintf(buf + o, n - (size_t)o, ", \"linear_before_reset\": %d", c->lbr);
    if (c->cell == CELL_LSTM) o += snprintf(buf + o, n - (size_t)o, ", \"input_forget\": %d", c->input_forget);
    if (c->acts) o += snprintf(buf + o, n - (size_t)o, ", \"activations\": %s", c->acts);
    snprintf(buf + o, n - (size_t)o, "}");
}

/* Random inputs for case c (absent ones NULL); sequence_lens int32 from 0 up to seq. */
static int make_inputs(const rnn_case *c, pardo_dtype dt, uint64_t seed, pardo_tensor **in) {
    test_rng r = {seed};
    const int64_t D = case_dirs(c), G = cell_g[c->cell], H = c->hidden, B = c->batch;
    const int64_t xs[3] = {c->layout ? B : c->seq, c->layout ? c->seq : B, c->input};
    const int64_t hs[3] = {c->layout ? B : D, c->layout ? D : B, H};
    in[0] = test_tensor_random(&r, dt, 3, xs, -1, 1);
    in[1] = test_tensor_random(&r, dt, 3, (int64_t[]){D, G * H, c->input}, -0.7, 0.7);
    in[2] = test_tensor_random(&r, dt, 3, (int64_t[]){D, G * H, H}, -0.7, 0.7);
    in[3] = c->bias ? test_tensor_random(&r, dt, 2, (int64_t[]){D, 2 * G * H}, -0.5, 0.5) : NULL;
    in[4] = NULL;
    if (c->lens) {
        in[4] = test_tensor_random(&r, PARDO_I32, 1, &B, 0, 1);
        for (int64_t b = 0; b < B; b++) pardo_tensor_set_f64(in[4], b, (double)((c->seq - b) > 0 ? c->seq - b : 0));
    }
    in[5] = c->init_h ? test_tensor_random(&r, dt, 3, hs, -1, 1) : NULL;
    in[6] = c->init_c ? test_tensor_random(&r, dt, 3, hs, -1, 1) : NULL;
    in[7] = c->peep ? test_tensor_random(&r, dt, 2, (int64_t[]){D, 3 * H}, -0.5, 0.5) : NULL;
    return c->cell == CELL_LSTM ? 8 : 6;
}

/* ---- the reference ---- */

static double ref_act(const char *name, double x) {
    if (strcmp(name, "tanh") == 0) return tanh(x);
    if (strcmp(name, "sigmoid") == 0) return 1 / (1 + exp(-x));
    if (strcmp(name, "relu") == 0) return x < 0 ? 0 : x;
    ck_abort_msg("reference: unknown activation %s", name);
    return 0;
}

static double ref_clip(const rnn_case *c, double x) {
    return c->clip > 0 ? fmin(c->clip, fmax(-c->clip, x)) : x;
}

/* Element getters with absent tensors as zeros. */
static double at(const pardo_tensor *t, int64_t i) { return t ? pardo_tensor_get_f64(t, i) : 0; }

/* The activation names f, g, h of direction d: from c->acts (a JSON list of quoted names, per direction or
 * for both) or the defaults. */
static void ref_acts(const rnn_case *c, int d, char names[3][16]) {
    static const char *const dflt[3][3] = {{"tanh"}, {"sigmoid", "tanh"}, {"sigmoid", "tanh", "tanh"}};
    const int per = c->cell == CELL_RNN ? 1 : c->cell == CELL_GRU ? 2 : 3;
    for (int k = 0; k < per; k++) snprintf(names[k], 16, "%s", dflt[c->cell][k]);
    if (!c->acts) return;
    char all[6][16];
    int n = 0;
    for (const char *p = c->acts; (p = strchr(p, '"')) && n < 6; n++) {
        const char *e = strchr(p + 1, '"');
        snprintf(all[n], 16, "%.*s", (int)(e - p - 1), p + 1);
        p = e + 1;
    }
    for (int k = 0; k < per; k++) snprintf(names[k], 16, "%s", all[n == per ? k : d * per + k]);
}

/* Y, Y_h, Y_c of case c on inputs in, as new float64 tensors. */
static void ref_run(const rnn_case *c, pardo_tensor **in, pardo_tensor **y, pardo_tensor **yh, pardo_tensor **yc) {
    pardo_status st;
    const int64_t D = case_dirs(c), G = cell_g[c->cell], H = c->hidden, B = c->batch, S = c->seq, I = c->input;
    const int64_t ys0[4] = {S, D, B, H}, ys1[4] = {B, S, D, H}, hs0[3] = {D, B, H}, hs1[3] = {B, D, H};
    *y = pardo_tensor_new_cpu(PARDO_F64, 4, c->layout ? ys1 : ys0, &st);
    *yh = pardo_tensor_new_cpu(PARDO_F64, 3, c->layout ? hs1 : hs0, &st);
    *yc = pardo_tensor_new_cpu(PARDO_F64, 3, c->layout ? hs1 : hs0, &st);
    for (int64_t i = 0; i < (*y)->numel; i++) pardo_tensor_set_f64(*y, i, 0);
    const pardo_tensor *X = in[0], *W = in[1], *R = in[2], *Bt = in[3], *L = in[4], *H0 = in[5];
    const pardo_tensor *C0 = c->cell == CELL_LSTM ? in[6] : NULL, *P = c->cell == CELL_LSTM ? in[7] : NULL;
    for (int d = 0; d < D; d++) {
        const bool rev = strcmp(c->direction, "reverse") == 0 || d == 1;
        char an[3][16];
        ref_acts(c, d, an);
        for (int64_t b = 0; b < B; b++) {
            const int64_t len = L ? (int64_t)pardo_tensor_get_f64(L, b) : S;
            const int64_t so = c->layout ? (b * D + d) * H : (d * B + b) * H;
            double h[16], cst[16], hn[16], cn[16], lx[4][16], lh[4][16];
            for (int64_t j = 0; j < H; j++) {
                h[j] = at(H0, so + j);
                cst[j] = at(C0, so + j);
            }
            for (int64_t k = 0; k < len; k++) {
                const int64_t t = rev ? len - 1 - k : k;
                const int64_t xo = (c->layout ? b * S + t : t * B + b) * I;
                for (int gi = 0; gi < G; gi++)
                    for (int64_t j = 0; j < H; j++) {
                        const int64_t row = d * G * H + gi * H + j;
                        double sx = at(Bt, d * 2 * G * H + gi * H + j), sh = at(Bt, d * 2 * G * H + G * H + gi * H + j);
                        for (int64_t i = 0; i < I; i++) sx += at(W, row * I + i) * at(X, xo + i);
                        for (int64_t m = 0; m < H; m++) sh += at(R, row * H + m) * h[m];
                        lx[gi][j] = sx;
                        lh[gi][j] = sh;
                    }
                for (int64_t j = 0; j < H; j++) {
                    if (c->cell == CELL_RNN) {
                        hn[j] = ref_act(an[0], ref_clip(c, lx[0][j] + lh[0][j]));
                    } else if (c->cell == CELL_GRU) {
                        const double z = ref_act(an[0], ref_clip(c, lx[0][j] + lh[0][j]));
                        double a;
                        if (c->lbr) {
                            const double r = ref_act(an[0], ref_clip(c, lx[1][j] + lh[1][j]));
                            a = lx[2][j] + r * lh[2][j];
                        } else {
                            a = lx[2][j] + at(Bt, d * 2 * G * H + G * H + 2 * H + j);
                            for (int64_t m = 0; m < H; m++) {
                                const double rm = ref_act(an[0], ref_clip(c, lx[1][m] + lh[1][m]));
                                a += at(R, (d * G * H + 2 * H + j) * H + m) * rm * h[m];
                            }
                        }
                        const double hh = ref_act(an[1], ref_clip(c, a));
                        hn[j] = (1 - z) * hh + z * h[j];
                    } else {
                        const double pi = at(P, d * 3 * H + j), po = at(P, d * 3 * H + H + j),
                                     pf = at(P, d * 3 * H + 2 * H + j);
                        const double i = ref_act(an[0], ref_clip(c, lx[0][j] + lh[0][j] + pi * cst[j]));
                        const double f = c->input_forget ? 1 - i
                                                         : ref_act(an[0], ref_clip(c, lx[2][j] + lh[2][j] + pf * cst[j]));
                        const double g = ref_act(an[1], ref_clip(c, lx[3][j] + lh[3][j]));
                        cn[j] = f * cst[j] + i * g;
                        const double o = ref_act(an[0], ref_clip(c, lx[1][j] + lh[1][j] + po * cn[j]));
                        hn[j] = o * ref_act(an[2], cn[j]);
                    }
                }
                for (int64_t j = 0; j < H; j++) {
                    h[j] = hn[j];
                    if (c->cell == CELL_LSTM) cst[j] = cn[j];
                    const int64_t yo = c->layout ? ((b * S + t) * D + d) * H : ((t * D + d) * B + b) * H;
                    pardo_tensor_set_f64(*y, yo + j, h[j]);
                }
            }
            for (int64_t j = 0; j < H; j++) {
                pardo_tensor_set_f64(*yh, so + j, h[j]);
                pardo_tensor_set_f64(*yc, so + j, cst[j]);
            }
        }
    }
}

/* Checks the outputs of case c against the reference, float64 and float32. */
static void check_case(const rnn_case *c, uint64_t seed) {
    static const pardo_dtype dts[2] = {PARDO_F64, PARDO_F32};
    for (int t = 0; t < 2; t++) {
        pardo_tensor *in[8], *out[3] = {NULL, NULL, NULL}, *want[3], *in64[8];
        const int n_in = make_inputs(c, dts[t], seed, in);
        make_inputs(c, PARDO_F64, seed, in64);
        /* the float32 run's inputs, widened exactly, for the reference */
        for (int k = 0; k < 8; k++)
            if (in[k] && in64[k])
                for (int64_t i = 0; i < in[k]->numel; i++) pardo_tensor_set_f64(in64[k], i, pardo_tensor_get_f64(in[k], i));
        char attrs[256];
        case_attrs(c, attrs, sizeof attrs);
        pardo_status st;
        const int n_out = c->cell == CELL_LSTM ? 3 : 2;
        ck_assert_msg(test_run_op(cell_type[c->cell], attrs, n_in, in, n_out, out, &st) == PARDO_OK, "%s %s: %s",
                      cell_type[c->cell], attrs, st.msg);
        ref_run(c, in64, &want[0], &want[1], &want[2]);
        for (int k = 0; k < n_out; k++) {
            pardo_tensor *got = out[k];
            if (t) { /* compare in float64 */
                pardo_tensor *w = pardo_tensor_new_cpu(PARDO_F64, got->ndim, got->shape, &st);
                for (int64_t i = 0; i < got->numel; i++) pardo_tensor_set_f64(w, i, pardo_tensor_get_f64(got, i));
                got = w;
            }
            test_assert_close(got, want[k], t ? 1e-5 : 1e-12, t ? 1e-5 : 1e-12);
            if (t) pardo_tensor_release(got);
        }
        for (int k = 0; k < 3; k++) {
            pardo_tensor_release(out[k]);
            pardo_tensor_release(want[k]);
        }
        for (int k = 0; k < 8; k++) {
            pardo_tensor_release(in[k]);
            pardo_tensor_release(in64[k]);
        }
    }
}

static const rnn_case fwd_cases[] = {
    /* cell, seq, batch, input, hidden, direction, layout, bias, lens, init_h, init_c, peep, lbr, if, clip, acts */
    {CELL_RNN, 4, 3, 2, 5, "forward", 0, false, false, false, false, false, false, false, 0, NULL},
    {CELL_RNN, 3, 2, 3, 4, "reverse", 0, true, true, true, false, false, false, false, 0, NULL},
    {CELL_RNN, 5, 3, 2, 3, "bidirectional", 1, true, true, true, false, false, false, false, 0,
     "[\"relu\", \"tanh\"]"},
    {CELL_RNN, 3, 2, 2, 3, "forward", 0, true, false, false, false, false, false, false, 0.3, "[\"sigmoid\"]"},
    {CELL_RNN, 2, 3, 2, 3, "bidirectional", 0, true, true, true, false, false, false, false, 0, NULL}, /* a length 0 */
    {CELL_GRU, 4, 3, 2, 5, "forward", 0, false, false, false, false, false, false, false, 0, NULL},
    {CELL_GRU, 3, 2, 3, 4, "reverse", 1, true, true, true, false, false, false, false, 0, NULL},
    {CELL_GRU, 4, 3, 2, 3, "bidirectional", 0, true, true, true, false, false, true, false, 0, NULL},
    {CELL_GRU, 3, 2, 2, 3, "bidirectional", 1, true, false, true, false, false, false, false, 0.4,
     "[\"sigmoid\", \"relu\", \"sigmoid\", \"tanh\"]"},
    {CELL_LSTM, 4, 3, 2, 5, "forward", 0, false, false, false, false, false, false, false, 0, NULL},
    {CELL_LSTM, 3, 2, 3, 4, "reverse", 1, true, true, true, true, true, false, false, 0, NULL},
    {CELL_LSTM, 4, 3, 2, 3, "bidirectional", 0, true, true, true, true, true, false, false, 0, NULL},
    {CELL_LSTM, 3, 2, 2, 3, "forward", 1, true, false, true, true, true, false, true, 0.5,
     "[\"sigmoid\", \"relu\", \"tanh\"]"},
};

START_TEST(test_rnn_reference) {
    for (int k = 0; k < (int)(sizeof fwd_cases / sizeof fwd_cases[0]); k++) check_case(&fwd_cases[k], 700u + (uint64_t)k);
}
END_TEST

START_TEST(test_rnn_hand_values) {
    /* rnn, one step, H = 1: Y_h = tanh(w x + r h0 + wb + rb) = tanh(0.5 * 2 + 0.25 * -1 + 0.1 + 0.2) = tanh(1.05) */
    int64_t s3[3] = {1, 1, 1}, s2[2] = {1, 2};
    pardo_tensor *in[6] = {test_tensor_from(PARDO_F64, 3, s3, (double[]){2}),
                           test_tensor_from(PARDO_F64, 3, s3, (double[]){0.5}),
                           test_tensor_from(PARDO_F64, 3, s3, (double[]){0.25}),
                           test_tensor_from(PARDO_F64, 2, s2, (double[]){0.1, 0.2}), NULL,
                           test_tensor_from(PARDO_F64, 3, s3, (double[]){-1})};
    pardo_tensor *out[2];
    pardo_status st;
    ck_assert_int_eq(test_run_op("rnn", NULL, 6, in, 2, out, &st), PARDO_OK);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(out[1], 0), tanh(1.05), 1e-15);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(out[0], 0), tanh(1.05), 1e-15);
    for (int k = 0; k < 2; k++) pardo_tensor_release(out[k]);
    for (int k = 0; k < 6; k++) pardo_tensor_release(in[k]);
}
END_TEST

START_TEST(test_rnn_outputs_left_out) {
    /* lstm with only Y asked for: Y as the reference's */
    const rnn_case c = {CELL_LSTM, 3, 2, 2, 3, "bidirectional", 0, true, true, true, true, true, false, false, 0, NULL};
    pardo_tensor *in[8], *y = NULL, *want[3];
    make_inputs(&c, PARDO_F64, 77, in);
    char attrs[256];
    case_attrs(&c, attrs, sizeof attrs);
    pardo_status st;
    ck_assert_msg(test_run_op("lstm", attrs, 8, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ref_run(&c, in, &want[0], &want[1], &want[2]);
    test_assert_close(y, want[0], 1e-12, 1e-12);
    pardo_tensor_release(y);
    for (int k = 0; k < 3; k++) pardo_tensor_release(want[k]);
    for (int k = 0; k < 8; k++) pardo_tensor_release(in[k]);
}
END_TEST

/* Gradient of every float input of case c against finite differences. */
static void check_grad_case(const rnn_case *c, uint64_t seed) {
    pardo_tensor *in[8];
    const int n_in = make_inputs(c, PARDO_F64, seed, in);
    unsigned which = 0;
    for (int k = 0; k < n_in; k++)
        if (in[k] && k != 4) which |= 1u << k;
    char attrs[256];
    case_attrs(c, attrs, sizeof attrs);
    test_check_grad(cell_type[c->cell], attrs, n_in, in, c->cell == CELL_LSTM ? 3 : 2, which, 1e-6, 1e-6);
    for (int k = 0; k < 8; k++) pardo_tensor_release(in[k]);
}

static const rnn_case grad_cases[] = {
    {CELL_RNN, 3, 2, 2, 3, "forward", 0, true, true, true, false, false, false, false, 0, NULL},
    {CELL_RNN, 3, 3, 2, 3, "bidirectional", 1, true, true, true, false, false, false, false, 0,
     "[\"tanh\", \"sigmoid\"]"},
    {CELL_GRU, 3, 2, 2, 3, "forward", 0, true, true, true, false, false, false, false, 0, NULL},
    {CELL_GRU, 3, 3, 2, 3, "bidirectional", 1, true, true, true, false, false, true, false, 0, NULL},
    {CELL_GRU, 2, 2, 3, 2, "reverse", 0, false, false, false, false, false, false, false, 0, NULL},
    {CELL_GRU, 2, 3, 2, 2, "bidirectional", 0, true, true, true, false, false, false, false, 0, NULL}, /* a length 0 */
    {CELL_LSTM, 3, 2, 2, 3, "forward", 0, true, true, true, true, true, false, false, 0, NULL},
    {CELL_LSTM, 3, 3, 2, 3, "bidirectional", 1, true, true, true, true, true, false, false, 0, NULL},
    {CELL_LSTM, 2, 2, 3, 2, "reverse", 0, true, false, true, true, true, false, true, 0, NULL},
    /* clip (the gradient is 0 where a gate's input is clipped) and other activations; no input is near a kink */
    {CELL_RNN, 3, 2, 2, 3, "forward", 0, true, false, true, false, false, false, false, 0.6, "[\"relu\"]"},
    {CELL_GRU, 3, 2, 2, 3, "forward", 1, true, false, true, false, false, true, false, 0.6, NULL},
    {CELL_LSTM, 3, 2, 2, 3, "forward", 0, true, false, true, true, true, false, false, 0.6,
     "[\"sigmoid\", \"relu\", \"tanh\"]"},
};

START_TEST(test_rnn_grads) {
    for (int k = 0; k < (int)(sizeof grad_cases / sizeof grad_cases[0]); k++)
        check_grad_case(&grad_cases[k], 900u + (uint64_t)k);
}
END_TEST

#define F64(shape) "{\"dtype\": \"float64\", \"shape\": " shape
#define PARAM(name, shape, seed)                                                                                       \
    "\"" name "\": " F64(shape) ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -0.6, \"high\": 0.6, "  \
                           "\"seed\": " seed "}}"
/* A bidirectional lstm (layout 1, its Y_h and Y_c left unused) into a gru whose Y_h meets the loss. */
static const char stack_graph[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": " F64("[-1, 3, 3]") ", \"role\": \"feed\"}, \"t\": " F64("[-1, 2]") ", \"role\": \"feed\"},"
    PARAM("w1", "[2, 8, 3]", "1") "," PARAM("r1", "[2, 8, 2]", "2") "," PARAM("b1", "[2, 16]", "3") ","
    PARAM("p1", "[2, 6]", "4") "," PARAM("w2", "[1, 6, 4]", "5") "," PARAM("r2", "[1, 6, 2]", "6") ","
    PARAM("b2", "[1, 12]", "7") "},"
    "\"ops\": ["
    "{\"op\": \"lstm\", \"in\": [\"x\", \"w1\", \"r1\", \"b1\", \"\", \"\", \"\", \"p1\"], \"out\": [\"y1\", \"h1\", \"c1\"],"
    " \"attrs\": {\"hidden_size\": 2, \"direction\": \"bidirectional\", \"layout\": 1}},"
    "{\"op\": \"reshape\", \"in\": [\"y1\"], \"out\": [\"y1r\"], \"attrs\": {\"shape\": [-1, 3, 4]}},"
    "{\"op\": \"gru\", \"in\": [\"y1r\", \"w2\", \"r2\", \"b2\"], \"out\": [\"\", \"h2\"],"
    " \"attrs\": {\"hidden_size\": 2, \"layout\": 1}},"
    "{\"op\": \"reshape\", \"in\": [\"h2\"], \"out\": [\"h2r\"], \"attrs\": {\"shape\": [-1, 2]}},"
    "{\"op\": \"mse_loss\", \"in\": [\"h2r\", \"t\"], \"out\": [\"loss\"]}"
    "]}]}";

/* Random x in [-1, 1) and t in [-t_range, t_range). */
static void feed_xt(pardo_executor *ex, test_rng *r, double t_range) {
    pardo_tensor *x = test_tensor_random(r, PARDO_F64, 3, (int64_t[]){2, 3, 3}, -1, 1),
                 *t = test_tensor_random(r, PARDO_F64, 2, (int64_t[]){2, 2}, -t_range, t_range);
    test_feed(ex, "x", x);
    test_feed(ex, "t", t);
    pardo_tensor_release(x);
    pardo_tensor_release(t);
}

static double graph_loss(pardo_executor *ex) {
    test_run(ex);
    return pardo_tensor_get_f64(test_fetch(ex, "loss"), 0);
}

START_TEST(test_rnn_graph_backward) {
    /* the autodiff pass's gradients of every param against central differences of the whole graph */
    pardo_status st;
    pardo_program *p = test_program(stack_graph, "rnn.json");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = "loss";
    ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "backward: %s", st.msg);
    pardo_executor *ex = test_executor(p, 1);
    test_rng r = {21};
    feed_xt(ex, &r, 1.0);
    static const char *const params[] = {"w1", "r1", "b1", "p1", "w2", "r2", "b2"};
    int checked = 0;
    for (int k = 0; k < 7; k++) {
        char gname[32];
        snprintf(gname, sizeof gname, "%s@GRAD", params[k]);
        graph_loss(ex);
        pardo_tensor *g = pardo_tensor_clone(test_fetch(ex, gname), NULL);
        pardo_tensor *w = pardo_scope_find(pardo_executor_scope(ex), params[k]);
        for (int64_t i = 0; i < w->numel; i++) {
            const double eps = 1e-6, orig = pardo_tensor_get_f64(w, i);
            pardo_tensor_set_f64(w, i, orig + eps);
            const double lp = graph_loss(ex);
            pardo_tensor_set_f64(w, i, orig - eps);
            const double lm = graph_loss(ex);
            pardo_tensor_set_f64(w, i, orig);
            const double num = (lp - lm) / (2 * eps), ana = pardo_tensor_get_f64(g, i);
            ck_assert_msg(fabs(num - ana) <= 1e-6 * fmax(1, fmax(fabs(num), fabs(ana))),
                          "%s[%lld]: analytic %.12g, finite differences %.12g", gname, (long long)i, ana, num);
            checked++;
        }
        pardo_tensor_release(g);
    }
    ck_assert_int_eq(checked, 16 * 3 + 16 * 2 + 32 + 12 + 24 + 12 + 12);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(test_rnn_trains) {
    /* as pardo transpile --backward loss --optimizer adam --parts 2: the loss falls */
    pardo_program *p = test_training_program(stack_graph, "rnn.json", "loss", PARDO_OPTIMIZER_ADAM, 0.05, 2);
    pardo_executor *ex = test_executor(p, 2);
    test_rng r = {22};
    feed_xt(ex, &r, 0.5);
    const double first = graph_loss(ex);
    double last = first;
    for (int k = 0; k < 60; k++) last = graph_loss(ex);
    ck_assert_msg(last < 0.1 * first, "loss %g after 60 steps, %g at first", last, first);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(test_rnn_infer) {
    /* unknown seq and batch carry into Y and Y_h; hidden_size from R when the attr is absent */
    pardo_type x = test_type(PARDO_F32, 3, (int64_t[]){-1, -1, 4}), w = test_type(PARDO_F32, 3, (int64_t[]){2, 12, 4}),
               r = test_type(PARDO_F32, 3, (int64_t[]){2, 12, 3}), out[3];
    const pardo_type *in[3] = {&x, &w, &r};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("lstm", "{\"direction\": \"bidirectional\"}", 3, in, 3, out, &st), PARDO_OK);
    ck_assert_int_eq(out[0].ndim, 4);
    ck_assert_int_eq(out[0].shape[0], -1);
    ck_assert_int_eq(out[0].shape[1], 2);
    ck_assert_int_eq(out[0].shape[3], 3);
    ck_assert_int_eq(out[1].ndim, 3);
    ck_assert_int_eq(out[1].shape[0], 2);
    ck_assert_int_eq(out[2].shape[2], 3);
}
END_TEST

START_TEST(test_rnn_errors) {
    pardo_type x = test_type(PARDO_F32, 3, (int64_t[]){5, 2, 4}), w = test_type(PARDO_F32, 3, (int64_t[]){1, 9, 4}),
               r = test_type(PARDO_F32, 3, (int64_t[]){1, 9, 3}), out[3];
    const pardo_type *in[3] = {&x, &w, &r};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("gru", NULL, 3, in, 2, out, &st), PARDO_OK);
    /* W's rows are not gates * hidden: lstm has 4 gates */
    ck_assert_int_eq(test_infer_op("lstm", NULL, 3, in, 3, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "input 1 'W'") != NULL, "%s", st.msg);
    /* hidden_size against R */
    ck_assert_int_eq(test_infer_op("gru", "{\"hidden_size\": 4}", 3, in, 2, out, &st), PARDO_ESHAPE);
    /* direction bidirectional wants 2 directions of weights */
    ck_assert_int_eq(test_infer_op("gru", "{\"direction\": \"bidirectional\"}", 3, in, 2, out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("gru", "{\"direction\": \"sideways\"}", 3, in, 2, out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("gru", "{\"layout\": 2}", 3, in, 2, out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("gru", "{\"clip\": -1}", 3, in, 2, out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("gru", "{\"activations\": [\"tanh\"]}", 3, in, 2, out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("gru", "{\"activations\": [\"tanh\", \"swish\"]}", 3, in, 2, out, &st),
                     PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "swish") != NULL, "%s", st.msg);
    /* X of rank 2; W of another dtype */
    pardo_type x2 = test_type(PARDO_F32, 2, (int64_t[]){5, 4}), w64 = test_type(PARDO_F64, 3, (int64_t[]){1, 9, 4});
    const pardo_type *bad_rank[3] = {&x2, &w, &r}, *bad_dt[3] = {&x, &w64, &r};
    ck_assert_int_eq(test_infer_op("gru", NULL, 3, bad_rank, 2, out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("gru", NULL, 3, bad_dt, 2, out, &st), PARDO_ESHAPE);
    /* sequence_lens past seq, at run time */
    const rnn_case c = {CELL_RNN, 3, 2, 2, 3, "forward", 0, false, true, false, false, false, false, false, 0, NULL};
    pardo_tensor *t[8], *o[2];
    make_inputs(&c, PARDO_F64, 5, t);
    pardo_tensor_set_f64(t[4], 1, 4);
    ck_assert_int_eq(test_run_op("rnn", "{\"hidden_size\": 3}", 6, t, 2, o, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "sequence_lens") != NULL, "%s", st.msg);
    for (int k = 0; k < 8; k++) pardo_tensor_release(t[k]);
}
END_TEST

Suite *make_ops_rnn_suite(void) {
    Suite *s = suite_create("ops_rnn");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 120);
    tcase_add_test(core, test_rnn_reference);
    tcase_add_test(core, test_rnn_hand_values);
    tcase_add_test(core, test_rnn_outputs_left_out);
    tcase_add_test(core, test_rnn_grads);
    tcase_add_test(core, test_rnn_graph_backward);
    tcase_add_test(core, test_rnn_trains);
    tcase_add_test(core, test_rnn_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_rnn_errors);
    suite_add_tcase(s, errors);
    return s;
}
