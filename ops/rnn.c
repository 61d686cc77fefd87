/* rnn.c - rnn, gru and lstm (ONNX RNN, GRU, LSTM) and their gradients
 * rnn_grad, gru_grad, lstm_grad (back through time): schemas, shape
 * inference and the kernels around the time loop of ops/rnn_cells.c.
 *
 * Inputs as ONNX: X [seq, batch, input] ([batch, seq, input] with layout
 * 1), W [dirs, G H, input], R [dirs, G H, H], optional B [dirs, 2 G H] (Wb
 * then Rb), sequence_lens [batch] (int32 or int64, each in [0, seq]),
 * initial_h [dirs, batch, H] ([batch, dirs, H] with layout 1), and for lstm
 * initial_c (initial_h's shape) and P [dirs, 3 H]. G is 1 (rnn), 3 (gru:
 * z, r, h) or 4 (lstm: i, o, f, c). Outputs Y [seq, dirs, batch, H]
 * ([batch, seq, dirs, H] with layout 1; zero past an entry's length), Y_h
 * (initial_h's shape) and for lstm Y_c; any may be left out.
 *
 * The kernels work in double (X and the weights are read into a workspace
 * in the calling thread's scratch, ops/scratch.h, so the steady state
 * allocates nothing) and store in X's dtype. The gradient ops run the
 * forward again, keeping every step's gate inputs, then go back through
 * time; they take the forward's inputs and the gradients of Y, Y_h (and
 * Y_c) and give those of X, W, R, B, initial_h (initial_c, P). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/value.h"
#include "nn_util.h"
#include "op.h"
#include "rnn_internal.h"
#include "scratch.h"

#define RNN_ATTRS_COMMON                                                                                               \
    {"hidden_size", PARDO_ATTR_INT, "null", "H, > 0 (absent: R's last dim)"},                                          \
        {"direction", PARDO_ATTR_STRING, "\"forward\"", "forward, reverse or bidirectional"},                          \
        {"layout", PARDO_ATTR_INT, "0", "0: X [seq, batch, input]; 1: X [batch, seq, input] (and the states too)"},    \
        {"activations", PARDO_ATTR_ANY, "null",                                                                        \
         "list of activation names, per direction (forward's then reverse's): relu, tanh, sigmoid, affine, "           \
         "leaky_relu, thresholded_relu, scaled_tanh, hard_sigmoid, elu, softsign, softplus"},                          \
        {"activation_alpha", PARDO_ATTR_FLOATS, "null", "alphas of the activations that take one, in order"},          \
        {"activation_beta", PARDO_ATTR_FLOATS, "null", "betas of the activations that take one, in order"},            \
        {"clip", PARDO_ATTR_FLOAT, "null", "bound the gates' inputs to [-clip, clip], > 0 (absent: no bound)"}

static const pardo_attr_def rnn_attrs[] = {RNN_ATTRS_COMMON};
static const pardo_attr_def gru_attrs[] = {
    RNN_ATTRS_COMMON,
    {"linear_before_reset", PARDO_ATTR_INT, "0", "1: h = g(X Wh^T + r (H Rh^T + Rbh) + Wbh)"},
};
static const pardo_attr_def lstm_attrs[] = {
    RNN_ATTRS_COMMON,
    {"input_forget", PARDO_ATTR_INT, "0", "1: couple the input and forget gates, f = 1 - i"},
};

static const char *const cell_name[3] = {"rnn", "gru", "lstm"};
static const int cell_gates[3] = {1, 3, 4};
static const int cell_acts[3] = {1, 2, 3};
#define N_IN(cell) ((cell) == RNN_CELL_LSTM ? 8 : 6)
#define N_OUT(cell) ((cell) == RNN_CELL_LSTM ? 3 : 2)

static const struct {
    const char *name;
    rnn_act_kind kind;
    double alpha, beta; // defaults; NAN: not taken
} act_names[] = {
    {"relu", RNN_ACT_RELU, NAN, NAN},
    {"tanh", RNN_ACT_TANH, NAN, NAN},
    {"sigmoid", RNN_ACT_SIGMOID, NAN, NAN},
    {"affine", RNN_ACT_AFFINE, 1.0, 0.0},
    {"leaky_relu", RNN_ACT_LEAKY_RELU, 0.01, NAN},
    {"thresholded_relu", RNN_ACT_THRESHOLDED_RELU, 1.0, NAN},
    {"scaled_tanh", RNN_ACT_SCALED_TANH, 1.0, 1.0},
    {"hard_sigmoid", RNN_ACT_HARD_SIGMOID, 0.2, 0.5},
    {"elu", RNN_ACT_ELU, 1.0, NAN},
    {"softsign", RNN_ACT_SOFTSIGN, NAN, NAN},
    {"softplus", RNN_ACT_SOFTPLUS, NAN, NAN},
};

/* Numbers of attr `name` (a list) into v (at most max; *n = 0 when absent). */
static int attr_numbers(const pardo_op *op, const char *name, double *v, int max, int *n, pardo_status *st) {
    const pardo_value *a = pardo_attr(op, name);
    *n = 0;
    if (!a || a->kind == PARDO_V_NULL) return PARDO_OK;
    if (a->kind != PARDO_V_ARRAY || a->n > max)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s': expected a list of at most %d numbers", name, max);
    for (int i = 0; i < a->n; i++) {
        if (a->items[i].kind != PARDO_V_NUMBER)
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s': item %d is not a number", name, i);
        v[i] = a->items[i].number;
    }
    *n = a->n;
    return PARDO_OK;
}

/* The activations of each direction from attrs activations, activation_alpha and activation_beta. */
static int parse_acts(const pardo_op *op, rnn_cell cell, rnn_geom *g, pardo_status *st) {
    static const int dflt[3][3] = {{RNN_ACT_TANH}, {RNN_ACT_SIGMOID, RNN_ACT_TANH},
                                   {RNN_ACT_SIGMOID, RNN_ACT_TANH, RNN_ACT_TANH}};
    const int na = cell_acts[cell];
    const pardo_value *a = pardo_attr(op, "activations");
    int idx[6];
    int count = 0;
    if (!a || a->kind == PARDO_V_NULL) {
        for (int d = 0; d < g->dirs; d++)
            for (int k = 0; k < na; k++) idx[count++] = -1 - dflt[cell][k];
    } else {
        if (a->kind != PARDO_V_ARRAY || (a->n != na && a->n != na * g->dirs))
            return pardo_errorf(st, PARDO_EINVAL, "attr 'activations': expected a list of %d names (per direction, "
                                "%d directions) for %s", na, g->dirs, cell_name[cell]);
        for (int i = 0; i < a->n; i++) {
            const pardo_value *it = &a->items[i];
            int found = -1;
            for (int k = 0; it->kind == PARDO_V_STRING && k < (int)(sizeof act_names / sizeof act_names[0]); k++)
                if (strcmp(it->string, act_names[k].name) == 0) found = k;
            if (found < 0)
                return pardo_errorf(st, PARDO_EINVAL, "attr 'activations': item %d is %s, expected one of relu, tanh, "
                                    "sigmoid, affine, leaky_relu, thresholded_relu, scaled_tanh, hard_sigmoid, elu, "
                                    "softsign, softplus", i, it->kind == PARDO_V_STRING ? it->string : "not a string");
            idx[count++] = found;
        }
        for (int i = count; i < na * g->dirs; i++) idx[i] = idx[i - na]; /* one list for both directions */
        count = na * g->dirs;
    }
    double alpha[6], beta[6];
    int n_alpha, n_beta, ia = 0, ib = 0, rc;
    if ((rc = attr_numbers(op, "activation_alpha", alpha, 6, &n_alpha, st)) != PARDO_OK ||
        (rc = attr_numbers(op, "activation_beta", beta, 6, &n_beta, st)) != PARDO_OK)
        return rc;
    for (int i = 0; i < count; i++) {
        rnn_act *act = &g->act[i / na][i % na];
        if (idx[i] < 0) { /* a default: tanh or sigmoid */
            act->kind = (rnn_act_kind)(-1 - idx[i]);
            act->alpha = act->beta = 0;
            continue;
        }
        act->kind = act_names[idx[i]].kind;
        act->alpha = act_names[idx[i]].alpha;
        act->beta = act_names[idx[i]].beta;
        if (!isnan(act->alpha) && ia < n_alpha) act->alpha = alpha[ia++];
        if (!isnan(act->beta) && ib < n_beta) act->beta = beta[ib++];
    }
    return PARDO_OK;
}

/* PARDO_OK when t has rank nd and each dim that both t and want know (>= 0) agrees; else PARDO_ESHAPE. */
static int expect_dims(const pardo_type *t, const char *what, int nd, const int64_t *want, const char *layout,
                       pardo_status *st) {
    char s[96];
    if (t->ndim < 0) return PARDO_OK;
    bool ok = t->ndim == nd;
    for (int k = 0; ok && k < nd; k++) ok = want[k] < 0 || t->shape[k] < 0 || t->shape[k] == want[k];
    if (ok) return PARDO_OK;
    char w[96];
    int o = snprintf(w, sizeof w, "[");
    for (int k = 0; k < nd && o < (int)sizeof w; k++)
        o += want[k] < 0 ? snprintf(w + o, sizeof w - (size_t)o, "%s?", k ? ", " : "")
                         : snprintf(w + o, sizeof w - (size_t)o, "%s%lld", k ? ", " : "", (long long)want[k]);
    if (o < (int)sizeof w) snprintf(w + o, sizeof w - (size_t)o, "]");
    return pardo_errorf(st, PARDO_ESHAPE, "%s has shape %s, expected %s %s", what,
                        pardo_shape_str(t->ndim, t->shape, s, sizeof s), w, layout);
}

/* A known dim from the first of the candidates that knows it (-1: none). */
static int64_t known(int64_t a, int64_t b) { return a >= 0 ? a : b; }

/* Checks the inputs in[0..n_in) (NULL: absent) and attrs of one rnn, gru or lstm; fills g and, when out is not
 * NULL, the types of Y, Y_h (and Y_c). Inference (dims may be -1) and the kernels use it. */
static int rnn_geometry(const pardo_op *op, rnn_cell cell, const pardo_type *const *in, int n_in, rnn_geom *g,
                        pardo_type *out, pardo_status *st) {
    const pardo_type *x = in[0], *w = in[1], *r = in[2];
    const pardo_type *opt[5] = {NULL, NULL, NULL, NULL, NULL}; // B, sequence_lens, initial_h, initial_c, P
    for (int k = 3; k < n_in && k < N_IN(cell); k++) opt[k - 3] = in[k];
    int rc;
    memset(g, 0, sizeof *g);
    g->cell = cell;
    g->gates = cell_gates[cell];
    const char *dir;
    int64_t hs, layout, lbr = 0, ifg = 0;
    double clip;
    if ((rc = pardo_attr_string(op, "direction", "forward", &dir, st)) != PARDO_OK ||
        (rc = pardo_attr_int(op, "hidden_size", -1, &hs, st)) != PARDO_OK ||
        (rc = pardo_attr_int(op, "layout", 0, &layout, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "clip", 0, &clip, st)) != PARDO_OK)
        return rc;
    if (cell == RNN_CELL_GRU && (rc = pardo_attr_int(op, "linear_before_reset", 0, &lbr, st)) != PARDO_OK) return rc;
    if (cell == RNN_CELL_LSTM && (rc = pardo_attr_int(op, "input_forget", 0, &ifg, st)) != PARDO_OK) return rc;
    if (strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) g->dirs = 1;
    else if (strcmp(dir, "bidirectional") == 0) g->dirs = 2;
    else
        return pardo_errorf(st, PARDO_EINVAL, "attr 'direction' is '%s', expected forward, reverse or bidirectional",
                            dir);
    g->reverse = strcmp(dir, "reverse") == 0;
    if (layout != 0 && layout != 1) return pardo_errorf(st, PARDO_EINVAL, "attr 'layout' is %lld, expected 0 or 1",
                                                        (long long)layout);
    if (pardo_attr(op, "clip") && !(clip > 0))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'clip' is %g, expected > 0", clip);
    if (pardo_attr(op, "hidden_size") && hs <= 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'hidden_size' is %lld, expected > 0", (long long)hs);
    if ((lbr != 0 && lbr != 1) || (ifg != 0 && ifg != 1))
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is %lld, expected 0 or 1",
                            cell == RNN_CELL_GRU ? "linear_before_reset" : "input_forget", (long long)(lbr | ifg));
    g->layout = (int)layout;
    g->clip = clip;
    g->lbr = lbr != 0;
    g->input_forget = ifg != 0;
    if ((rc = parse_acts(op, cell, g, st)) != PARDO_OK) return rc;
    /* dtypes */
    static const char *const what_in[8] = {"input 0 'X'",           "input 1 'W'",         "input 2 'R'",
                                           "input 3 'B'",           "input 4 'sequence_lens'", "input 5 'initial_h'",
                                           "input 6 'initial_c'",   "input 7 'P'"};
    if ((rc = pardo_nn_expect_float(x, what_in[0], st)) != PARDO_OK) return rc;
    for (int k = 1; k < n_in && k < N_IN(cell); k++) {
        if (!in[k] || k == 4) continue;
        if (in[k]->dtype != x->dtype)
            return pardo_errorf(st, PARDO_ESHAPE, "%s is %s, expected X's dtype %s", what_in[k],
                                pardo_dtype_name(in[k]->dtype), pardo_dtype_name(x->dtype));
    }
    if (opt[1] && opt[1]->dtype != PARDO_I32 && opt[1]->dtype != PARDO_I64)
        return pardo_errorf(st, PARDO_ESHAPE, "input 4 'sequence_lens' is %s, expected int32 or int64",
                            pardo_dtype_name(opt[1]->dtype));
    /* sizes: hidden from the attr or R, the rest from X */
    const int64_t G = g->gates;
    if (hs < 0 && r->ndim == 3) hs = r->shape[2];
    g->hidden = hs;
    g->seq = x->ndim == 3 ? x->shape[layout ? 1 : 0] : -1;
    g->batch = x->ndim == 3 ? x->shape[layout ? 0 : 1] : -1;
    g->input = x->ndim == 3 ? x->shape[2] : -1;
    if (x->ndim >= 0 && x->ndim != 3)
        return expect_dims(x, what_in[0], 3, (int64_t[]){-1, -1, -1}, layout ? "[batch, seq, input]" :
                                                                               "[seq, batch, input]", st);
    const int64_t H = g->hidden, GH = H >= 0 ? G * H : -1, D = g->dirs;
    if ((rc = expect_dims(w, what_in[1], 3, (int64_t[]){D, GH, g->input}, "[dirs, gates * hidden, input]", st)) !=
            PARDO_OK ||
        (rc = expect_dims(r, what_in[2], 3, (int64_t[]){D, GH, H}, "[dirs, gates * hidden, hidden]", st)) != PARDO_OK)
        return rc;
    if (g->input < 0 && w->ndim == 3) g->input = w->shape[2];
    if (opt[0] && (rc = expect_dims(opt[0], what_in[3], 2, (int64_t[]){D, GH >= 0 ? 2 * GH : -1},
                                    "[dirs, 2 * gates * hidden]", st)) != PARDO_OK)
        return rc;
    if (opt[1] && (rc = expect_dims(opt[1], what_in[4], 1, (int64_t[]){g->batch}, "[batch]", st)) != PARDO_OK)
        return rc;
    if (g->batch < 0 && opt[1] && opt[1]->ndim == 1) g->batch = opt[1]->shape[0];
    const int64_t hstate[3] = {layout ? g->batch : D, layout ? D : g->batch, H};
    const char *hl = layout ? "[batch, dirs, hidden]" : "[dirs, batch, hidden]";
    for (int k = 2; k < 4; k++)
        if (opt[k] && (rc = expect_dims(opt[k], what_in[k + 3], 3, hstate, hl, st)) != PARDO_OK) return rc;
    if (opt[4] && (rc = expect_dims(opt[4], what_in[7], 2, (int64_t[]){D, H >= 0 ? 3 * H : -1}, "[dirs, 3 * hidden]",
                                    st)) != PARDO_OK)
        return rc;
    if (g->hidden < 0 && opt[2] && opt[2]->ndim == 3) g->hidden = opt[2]->shape[2];
    if (out) {
        const int64_t b = known(g->batch, -1), s = g->seq, h = g->hidden;
        out[0] = (pardo_type){.dtype = x->dtype, .ndim = 4};
        const int64_t y0[4] = {s, D, b, h}, y1[4] = {b, s, D, h};
        memcpy(out[0].shape, layout ? y1 : y0, sizeof y0);
        out[1] = (pardo_type){.dtype = x->dtype, .ndim = 3};
        const int64_t st0[3] = {layout ? b : D, layout ? D : b, h};
        memcpy(out[1].shape, st0, sizeof st0);
        out[2] = out[1];
    }
    return PARDO_OK;
}

static int rnn_infer_cell(pardo_infer_ctx *ctx, rnn_cell cell) {
    const pardo_type *in[8] = {NULL};
    for (int k = 0; k < N_IN(cell); k++) in[k] = pardo_nn_in_type(ctx, k);
    rnn_geom g;
    pardo_type out[3];
    int rc = rnn_geometry(ctx->op, cell, in, N_IN(cell), &g, out, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < ctx->n_out && k < N_OUT(cell); k++) ctx->out[k] = out[k];
    return PARDO_OK;
}

/* ---- the kernels ---- */

/* n elements of t from element off on, as doubles, into dst (t NULL: zeros). */
static void load(const pardo_tensor *t, int64_t off, int64_t n, double *dst) {
    if (!t) {
        memset(dst, 0, sizeof(double) * (size_t)n);
        return;
    }
    if (t->dtype == PARDO_F64) {
        memcpy(dst, (const double *)pardo_tensor_data(t) + off, sizeof(double) * (size_t)n);
        return;
    }
    const float *src = (const float *)pardo_tensor_data(t) + off;
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

/* n doubles of src into t from element off on (t's dtype: float32 or float64). */
static void store(pardo_tensor *t, int64_t off, int64_t n, const double *src) {
    if (t->dtype == PARDO_F64) {
        memcpy((double *)pardo_tensor_data(t) + off, src, sizeof(double) * (size_t)n);
        return;
    }
    float *dst = (float *)pardo_tensor_data(t) + off;
    for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* Element offset of Y's row (time t, direction d, batch b), and of a state's row (d, b). */
static int64_t y_off(const rnn_geom *g, int64_t t, int d, int64_t b) {
    return (g->layout ? (b * g->seq + t) * g->dirs + d : (t * g->dirs + d) * g->batch + b) * g->hidden;
}
static int64_t state_off(const rnn_geom *g, int d, int64_t b) {
    return (g->layout ? b * g->dirs + d : d * g->batch + b) * g->hidden;
}
/* The row of X (or of a [seq * batch, ...] buffer in X's order) for time t, batch b. */
static int64_t x_row(const rnn_geom *g, int64_t t, int64_t b) { return g->layout ? b * g->seq + t : t * g->batch + b; }

/* Time of step s for batch entry b in direction dr (-1: past its length). */
static int64_t step_time(const rnn_dir *dr, int64_t s, int64_t b) {
    if (s >= dr->len[b]) return -1;
    return dr->reverse ? dr->len[b] - 1 - s : s;
}

/* One kernel run: the geometry, the inputs and outputs, the workspace. */
typedef struct rnn_run {
    rnn_geom g;
    pardo_tensor *in[8];  // forward inputs, NULL where absent
    int64_t *len;         // [batch]
    double *ws;           // the workspace
    size_t ws_doubles;
} rnn_run;

/* Reads the inputs, checks them (shapes, sequence_lens' values) and carves the workspace. */
static int run_setup(pardo_kernel_ctx *ctx, rnn_cell cell, rnn_run *rr, rnn_dir *dr, bool backward) {
    pardo_type types[8];
    const pardo_type *tp[8] = {NULL};
    const int n_in = N_IN(cell);
    for (int k = 0; k < n_in; k++) {
        rr->in[k] = pardo_nn_in(ctx, k);
        if (rr->in[k]) {
            types[k] = pardo_tensor_type(rr->in[k]);
            tp[k] = &types[k];
        }
    }
    if (!tp[0] || !tp[1] || !tp[2])
        return pardo_errorf(ctx->st, PARDO_EINVAL, "inputs X, W and R are required");
    int rc = rnn_geometry(ctx->op, cell, tp, n_in, &rr->g, NULL, ctx->st);
    if (rc != PARDO_OK) return rc;
    const rnn_geom *g = &rr->g;
    if (g->hidden < 0 || g->batch < 0)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "hidden size unknown (attr 'hidden_size' or R's shape)");
    const int64_t S = g->seq, B = g->batch, I = g->input, H = g->hidden, GH = g->gates * H;
    const size_t sb = (size_t)(S * B);
    size_t n = (size_t)B /* len */ + sb * (size_t)I + (size_t)(GH * I + GH * H + 2 * GH + 3 * H) + sb * (size_t)GH +
               2 * (sb + (size_t)B) * (size_t)H + 2 * sb * (size_t)H + (size_t)(B * GH);
    if (backward)
        n += 2 * sb * (size_t)GH + 4 * (size_t)(B * H) + 3 * (size_t)H + sb * (size_t)H + 2 * sb * (size_t)I +
             (size_t)(GH * I + GH * H + 2 * GH);
    double *p = pardo_scratch_get(PARDO_SCRATCH_COL, sizeof(double) * n);
    if (!p) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for a %zu-byte workspace", sizeof(double) * n);
    rr->ws = p;
    rr->ws_doubles = n;
    rr->len = (int64_t *)p;
    p += B;
    const pardo_tensor *sl = rr->in[4];
    for (int64_t b = 0; b < B; b++) {
        rr->len[b] = sl ? (int64_t)pardo_tensor_get_f64(sl, b) : S;
        if (rr->len[b] < 0 || rr->len[b] > S)
            return pardo_errorf(ctx->st, PARDO_EINVAL, "input 4 'sequence_lens' [%lld] is %lld, expected 0..%lld",
                                (long long)b, (long long)rr->len[b], (long long)S);
    }
    memset(dr, 0, sizeof *dr);
    dr->g = g;
    dr->len = rr->len;
#define TAKE(field, count)                                                                                             \
    do {                                                                                                               \
        dr->field = p;                                                                                                 \
        p += (count);                                                                                                  \
    } while (0)
    TAKE(xs, sb * (size_t)I);
    double *w, *r, *wb, *pp;
    w = p, p += GH * I;
    r = p, p += GH * H;
    wb = p, p += 2 * GH;
    pp = p, p += 3 * H;
    dr->w = w, dr->r = r, dr->wb = wb, dr->rb = wb + GH, dr->p = pp;
    TAKE(pre, sb * (size_t)GH);
    TAKE(hs, (sb + (size_t)B) * (size_t)H);
    TAKE(cs, (sb + (size_t)B) * (size_t)H);
    TAKE(rh, sb * (size_t)H);
    TAKE(q, sb * (size_t)H);
    TAKE(hr, (size_t)(B * GH));
    if (cell != RNN_CELL_LSTM) dr->cs = NULL;
    if (backward) {
        TAKE(dax, sb * (size_t)GH);
        TAKE(dar, sb * (size_t)GH);
        if (!(cell == RNN_CELL_GRU && g->lbr)) dr->dar = dr->dax;
        TAKE(dh, (size_t)(B * H));
        TAKE(dc, (size_t)(B * H));
        TAKE(tmp, (size_t)(B * H));
        TAKE(drh, (size_t)(B * H));
        TAKE(dp, 3 * (size_t)H);
        if (cell != RNN_CELL_LSTM) dr->dp = NULL;
    }
#undef TAKE
    rr->ws_doubles = (size_t)(p - rr->ws);
    return PARDO_OK;
}

/* Direction d's weights into dr, X gathered in its step order, and H (C) before the first step. */
static void dir_setup(rnn_run *rr, rnn_dir *dr, int d) {
    const rnn_geom *g = &rr->g;
    const int64_t S = g->seq, B = g->batch, I = g->input, H = g->hidden, GH = g->gates * H;
    dr->reverse = g->reverse || d == 1;
    dr->act = g->act[d];
    load(rr->in[1], d * GH * I, GH * I, (double *)dr->w);
    load(rr->in[2], d * GH * H, GH * H, (double *)dr->r);
    load(rr->in[3], d * 2 * GH, 2 * GH, (double *)dr->wb);
    if (g->cell == RNN_CELL_LSTM) load(rr->in[7], d * 3 * H, 3 * H, (double *)dr->p);
    for (int64_t s = 0; s < S; s++)
        for (int64_t b = 0; b < B; b++) {
            const int64_t t = step_time(dr, s, b);
            if (t < 0) memset(dr->xs + (s * B + b) * I, 0, sizeof(double) * (size_t)I);
            else load(rr->in[0], x_row(g, t, b) * I, I, dr->xs + (s * B + b) * I);
        }
    for (int64_t b = 0; b < B; b++) {
        load(rr->in[5], rr->in[5] ? state_off(g, d, b) : 0, H, dr->hs + b * H);
        if (dr->cs) load(rr->in[6], rr->in[6] ? state_off(g, d, b) : 0, H, dr->cs + b * H);
    }
}

static int rnn_cpu_cell(pardo_kernel_ctx *ctx, rnn_cell cell) {
    rnn_run rr;
    rnn_dir dr;
    int rc = run_setup(ctx, cell, &rr, &dr, false);
    if (rc != PARDO_OK) return rc;
    const rnn_geom *g = &rr.g;
    pardo_type ot[3];
    const pardo_type *tp[8] = {NULL};
    pardo_type types[8];
    for (int k = 0; k < N_IN(cell); k++)
        if (rr.in[k]) types[k] = pardo_tensor_type(rr.in[k]), tp[k] = &types[k];
    if ((rc = rnn_geometry(ctx->op, cell, tp, N_IN(cell), &rr.g, ot, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *out[3] = {NULL, NULL, NULL};
    for (int k = 0; k < ctx->n_out && k < N_OUT(cell); k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        if (!(out[k] = pardo_nn_zeros(ctx, k, ot[k].dtype, ot[k].ndim, ot[k].shape))) return ctx->st->code;
    }
    const int64_t S = g->seq, B = g->batch, H = g->hidden;
    for (int d = 0; d < g->dirs; d++) {
        dir_setup(&rr, &dr, d);
        if ((rc = rnn_dir_forward(ctx, &dr)) != PARDO_OK) return rc;
        for (int64_t s = 0; out[0] && s < S; s++)
            for (int64_t b = 0; b < B; b++) {
                const int64_t t = step_time(&dr, s, b);
                if (t >= 0) store(out[0], y_off(g, t, d, b), H, dr.hs + ((s + 1) * B + b) * H);
            }
        for (int64_t b = 0; b < B; b++) {
            if (out[1]) store(out[1], state_off(g, d, b), H, dr.hs + (S * B + b) * H);
            if (out[2]) store(out[2], state_off(g, d, b), H, dr.cs + (S * B + b) * H);
        }
    }
    return PARDO_OK;
}

static int rnn_grad_cpu_cell(pardo_kernel_ctx *ctx, rnn_cell cell) {
    rnn_run rr;
    rnn_dir dr;
    int rc = run_setup(ctx, cell, &rr, &dr, true);
    if (rc != PARDO_OK) return rc;
    const rnn_geom *g = &rr.g;
    const int n_in = N_IN(cell), n_out = N_OUT(cell);
    const int64_t S = g->seq, B = g->batch, I = g->input, H = g->hidden, GH = g->gates * H;
    const size_t sb = (size_t)(S * B);
    pardo_tensor *dyt[3] = {NULL, NULL, NULL};
    for (int k = 0; k < n_out; k++) {
        dyt[k] = pardo_nn_in(ctx, n_in + n_out + k);
        if (dyt[k] && dyt[k]->dtype != rr.in[0]->dtype)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d (gradient of output %d) is %s, expected %s",
                                n_in + n_out + k, k, pardo_dtype_name(dyt[k]->dtype),
                                pardo_dtype_name(rr.in[0]->dtype));
    }
    /* the rest of the workspace, after what run_setup carved */
    double *p = rr.ws + rr.ws_doubles;
    double *dy = p, *dxs = dy + sb * (size_t)H, *dxall = dxs + sb * (size_t)I, *dw = dxall + sb * (size_t)I,
           *drr = dw + GH * I, *db = drr + GH * H;
    const bool gru_rh = cell == RNN_CELL_GRU && !g->lbr;
    if (pardo_kernel_wants_output(ctx, 4))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "output 4 (gradient of sequence_lens) is never computed");
    pardo_tensor *out[8] = {NULL};
    for (int k = 0; k < n_in && k < ctx->n_out; k++) {
        if (k == 4 || !pardo_kernel_wants_output(ctx, k)) continue;
        int64_t shape[3];
        int nd;
        if (rr.in[k]) {
            nd = rr.in[k]->ndim;
            memcpy(shape, rr.in[k]->shape, sizeof(int64_t) * (size_t)nd);
        } else if (k == 3 || k == 7) {
            nd = 2;
            shape[0] = g->dirs;
            shape[1] = k == 3 ? 2 * GH : 3 * H;
        } else {
            nd = 3;
            shape[0] = g->layout ? B : g->dirs;
            shape[1] = g->layout ? g->dirs : B;
            shape[2] = H;
        }
        if (!(out[k] = pardo_nn_zeros(ctx, k, rr.in[0]->dtype, nd, shape))) return ctx->st->code;
    }
    memset(dxall, 0, sizeof(double) * sb * (size_t)I);
    for (int d = 0; d < g->dirs; d++) {
        dir_setup(&rr, &dr, d);
        if ((rc = rnn_dir_forward(ctx, &dr)) != PARDO_OK) return rc;
        for (int64_t b = 0; b < B; b++) {
            load(dyt[1], dyt[1] ? state_off(g, d, b) : 0, H, dr.dh + b * H);
            if (cell == RNN_CELL_LSTM) load(dyt[2], dyt[2] ? state_off(g, d, b) : 0, H, dr.dc + b * H);
        }
        for (int64_t s = 0; dyt[0] && s < S; s++)
            for (int64_t b = 0; b < B; b++) {
                const int64_t t = step_time(&dr, s, b);
                if (t < 0) memset(dy + (s * B + b) * H, 0, sizeof(double) * (size_t)H);
                else load(dyt[0], y_off(g, t, d, b), H, dy + (s * B + b) * H);
            }
        if ((rc = rnn_dir_backward(ctx, &dr, dyt[0] ? dy : NULL)) != PARDO_OK) return rc;
        /* dX: dA W, back to X's rows */
        if (out[0]) {
            if ((rc = rnn_gemm(ctx, false, false, S * B, I, GH, dr.dax, GH, dr.w, I, dxs, I, false, NULL)) != PARDO_OK)
                return rc;
            for (int64_t s = 0; s < S; s++)
                for (int64_t b = 0; b < B; b++) {
                    const int64_t t = step_time(&dr, s, b);
                    if (t < 0) continue;
                    double *dst = dxall + x_row(g, t, b) * I, *src = dxs + (s * B + b) * I;
                    for (int64_t i = 0; i < I; i++) dst[i] += src[i];
                }
        }
        /* dW = dA^T X; dR = dA^T H_prev (gru's h gate without linear_before_reset: dA_h^T (r H_prev)) */
        if (out[1]) {
            if ((rc = rnn_gemm(ctx, true, false, GH, I, S * B, dr.dax, GH, dr.xs, I, dw, I, false, NULL)) != PARDO_OK)
                return rc;
            store(out[1], d * GH * I, GH * I, dw);
        }
        if (out[2]) {
            if ((rc = rnn_gemm(ctx, true, false, gru_rh ? 2 * H : GH, H, S * B, dr.dar, GH, dr.hs, H, drr, H, false,
                               NULL)) != PARDO_OK)
                return rc;
            if (gru_rh && (rc = rnn_gemm(ctx, true, false, H, H, S * B, dr.dax + 2 * H, GH, dr.rh, H, drr + 2 * H * H,
                                         H, false, NULL)) != PARDO_OK)
                return rc;
            store(out[2], d * GH * H, GH * H, drr);
        }
        if (out[3]) {
            memset(db, 0, sizeof(double) * 2 * (size_t)GH);
            for (size_t row = 0; row < sb; row++)
                for (int64_t j = 0; j < GH; j++) {
                    db[j] += dr.dax[row * (size_t)GH + (size_t)j];
                    db[GH + j] += dr.dar[row * (size_t)GH + (size_t)j];
                }
            store(out[3], d * 2 * GH, 2 * GH, db);
        }
        for (int64_t b = 0; b < B; b++) {
            if (out[5]) store(out[5], state_off(g, d, b), H, dr.dh + b * H);
            if (cell == RNN_CELL_LSTM && out[6]) store(out[6], state_off(g, d, b), H, dr.dc + b * H);
        }
        if (cell == RNN_CELL_LSTM && out[7]) store(out[7], d * 3 * H, 3 * H, dr.dp);
    }
    if (out[0]) store(out[0], 0, (int64_t)sb * I, dxall);
    return PARDO_OK;
}

/* The gradient op's inputs: the forward's (checked as there) and the output gradients against the outputs. */
static int rnn_grad_infer_cell(pardo_infer_ctx *ctx, rnn_cell cell) {
    const int n_in = N_IN(cell), n_out = N_OUT(cell);
    const pardo_type *in[8] = {NULL};
    for (int k = 0; k < n_in; k++) in[k] = pardo_nn_in_type(ctx, k);
    rnn_geom g;
    pardo_type ot[3];
    int rc = rnn_geometry(ctx->op, cell, in, n_in, &g, ot, ctx->st);
    static const char *const what[3] = {"the gradient of Y", "the gradient of Y_h", "the gradient of Y_c"};
    for (int k = 0; rc == PARDO_OK && k < n_out; k++) {
        const pardo_type *dy = pardo_nn_in_type(ctx, n_in + n_out + k);
        if (dy) rc = pardo_nn_expect_same(dy, what[k], &ot[k], "that output", ctx->st);
    }
    if (rc != PARDO_OK) return rc;
    const int64_t GH = g.hidden >= 0 ? g.gates * g.hidden : -1;
    for (int k = 0; k < ctx->n_out && k < n_in; k++) {
        if (in[k]) {
            ctx->out[k] = *in[k];
        } else if (k == 3 || k == 7) {
            ctx->out[k] = (pardo_type){.dtype = in[0]->dtype, .ndim = 2, .shape = {g.dirs, k == 3 ? 2 * GH : 3 * g.hidden}};
            if (g.hidden < 0) ctx->out[k].shape[1] = -1;
        } else {
            ctx->out[k] = ot[1];
        }
    }
    return PARDO_OK;
}

/* The gradient reads the forward's inputs and the output gradients, not the outputs (it runs the forward again). */
static int rnn_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 7, st);
}

/* ---- the op defs ---- */

static const pardo_arg_def rnn_in[] = {
    {"X", "input sequence (float32 or float64), [seq, batch, input] ([batch, seq, input] with layout 1)", false, false},
    {"W", "input weights [dirs, gates * hidden, input]", false, false},
    {"R", "recurrence weights [dirs, gates * hidden, hidden]", false, false},
    {"B", "biases Wb then Rb [dirs, 2 * gates * hidden] (\"\": zeros)", true, false},
    {"sequence_lens", "int32 or int64 [batch], each in 0..seq (\"\": all seq)", true, false},
    {"initial_h", "[dirs, batch, hidden] ([batch, dirs, hidden] with layout 1; \"\": zeros)", true, false},
    {"initial_c", "lstm: the initial cell state, initial_h's shape (\"\": zeros)", true, false},
    {"P", "lstm: peepholes i, o, f [dirs, 3 * hidden] (\"\": zeros)", true, false},
};
static const pardo_arg_def rnn_out[] = {
    {"Y", "every step's H, [seq, dirs, batch, hidden] ([batch, seq, dirs, hidden] with layout 1)", true, false},
    {"Y_h", "the last H, initial_h's shape", true, false},
    {"Y_c", "lstm: the last C, initial_h's shape", true, false},
};
static const pardo_arg_def rnn_grad_in[] = {
    {"X", "the forward input", false, false},      {"W", "the forward input", false, false},
    {"R", "the forward input", false, false},      {"B", "the forward input", true, false},
    {"sequence_lens", "the forward input", true, false}, {"initial_h", "the forward input", true, false},
    {"Y", "the forward output (not read)", true, false}, {"Y_h", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false}, {"dY_h", "gradient of Y_h (\"\": zeros)", true, false},
};
static const pardo_arg_def lstm_grad_in[] = {
    {"X", "the forward input", false, false},      {"W", "the forward input", false, false},
    {"R", "the forward input", false, false},      {"B", "the forward input", true, false},
    {"sequence_lens", "the forward input", true, false}, {"initial_h", "the forward input", true, false},
    {"initial_c", "the forward input", true, false}, {"P", "the forward input", true, false},
    {"Y", "the forward output (not read)", true, false}, {"Y_h", "the forward output (not read)", true, false},
    {"Y_c", "the forward output (not read)", true, false}, {"dY", "gradient of Y (\"\": zeros)", true, false},
    {"dY_h", "gradient of Y_h (\"\": zeros)", true, false}, {"dY_c", "gradient of Y_c (\"\": zeros)", true, false},
};
static const pardo_arg_def rnn_grad_out[] = {
    {"dX", "gradient of X", true, false},
    {"dW", "gradient of W", true, false},
    {"dR", "gradient of R", true, false},
    {"dB", "gradient of B", true, false},
    {"dsequence_lens", "never computed (must be \"\")", true, false},
    {"dinitial_h", "gradient of initial_h", true, false},
    {"dinitial_c", "lstm: gradient of initial_c", true, false},
    {"dP", "lstm: gradient of P", true, false},
};

#define CELL_FNS(NAME, CELL)                                                                                           \
    static int NAME##_infer(pardo_infer_ctx *ctx) { return rnn_infer_cell(ctx, CELL); }                                \
    static int NAME##_cpu(pardo_kernel_ctx *ctx) { return rnn_cpu_cell(ctx, CELL); }                                   \
    static int NAME##_grad_infer(pardo_infer_ctx *ctx) { return rnn_grad_infer_cell(ctx, CELL); }                      \
    static int NAME##_grad_cpu(pardo_kernel_ctx *ctx) { return rnn_grad_cpu_cell(ctx, CELL); }
CELL_FNS(rnn, RNN_CELL_RNN)
CELL_FNS(gru, RNN_CELL_GRU)
CELL_FNS(lstm, RNN_CELL_LSTM)

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

const pardo_op_def pardo_op_rnn = {
    .type = "rnn",
    .doc = "simple recurrent network (ONNX RNN): H = f(X W^T + H_prev R^T + Wb + Rb) over the sequence",
    .inputs = rnn_in, .n_inputs = 6, .outputs = rnn_out, .n_outputs = 2,
    .attrs = rnn_attrs, .n_attrs = LEN(rnn_attrs),
    .infer = rnn_infer, .cpu = rnn_cpu, .grad = rnn_grad_build,
};
const pardo_op_def pardo_op_rnn_grad = {
    .type = "rnn_grad",
    .doc = "gradients of rnn back through time: dX, dW, dR, dB, dinitial_h",
    .inputs = rnn_grad_in, .n_inputs = LEN(rnn_grad_in), .outputs = rnn_grad_out, .n_outputs = 6,
    .attrs = rnn_attrs, .n_attrs = LEN(rnn_attrs),
    .infer = rnn_grad_infer, .cpu = rnn_grad_cpu,
};
const pardo_op_def pardo_op_gru = {
    .type = "gru",
    .doc = "gated recurrent unit (ONNX GRU): gates z, r, h over the sequence",
    .inputs = rnn_in, .n_inputs = 6, .outputs = rnn_out, .n_outputs = 2,
    .attrs = gru_attrs, .n_attrs = LEN(gru_attrs),
    .infer = gru_infer, .cpu = gru_cpu, .grad = rnn_grad_build,
};
const pardo_op_def pardo_op_gru_grad = {
    .type = "gru_grad",
    .doc = "gradients of gru back through time: dX, dW, dR, dB, dinitial_h",
    .inputs = rnn_grad_in, .n_inputs = LEN(rnn_grad_in), .outputs = rnn_grad_out, .n_outputs = 6,
    .attrs = gru_attrs, .n_attrs = LEN(gru_attrs),
    .infer = gru_grad_infer, .cpu = gru_grad_cpu,
};
const pardo_op_def pardo_op_lstm = {
    .type = "lstm",
    .doc = "long short-term memory (ONNX LSTM): gates i, o, f, c with optional peepholes over the sequence",
    .inputs = rnn_in, .n_inputs = 8, .outputs = rnn_out, .n_outputs = 3,
    .attrs = lstm_attrs, .n_attrs = LEN(lstm_attrs),
    .infer = lstm_infer, .cpu = lstm_cpu, .grad = rnn_grad_build,
};
const pardo_op_def pardo_op_lstm_grad = {
    .type = "lstm_grad",
    .doc = "gradients of lstm back through time: dX, dW, dR, dB, dinitial_h, dinitial_c, dP",
    .inputs = lstm_grad_in, .n_inputs = LEN(lstm_grad_in), .outputs = rnn_grad_out, .n_outputs = 8,
    .attrs = lstm_attrs, .n_attrs = LEN(lstm_attrs),
    .infer = lstm_grad_infer, .cpu = lstm_grad_cpu,
};
