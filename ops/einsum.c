/* einsum.c - einsum, like ONNX Einsum: attr equation ("ij,jk->ik"; no
 * "->" gives the labels that appear once, in alphabetical order), one or
 * more float32 or float64 inputs, "..." for broadcast leading dims, a label
 * repeated in one input for its diagonal, labels missing from the output
 * summed over. Computed as one loop over every label's index, products and
 * sums in double: for the small contractions models spell with einsum, not
 * a matrix product's speed (matmul is that). einsum_grad runs the same loop,
 * adding dY times the other inputs into each wanted dX_j. */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "op.h"

enum {
    EIN_IN = 8,      /* inputs */
    EIN_LABELS = 24, /* distinct labels, the ellipsis' dims included */
    EIN_ELL = PARDO_MAX_DIMS,
};

static const pardo_arg_def einsum_in[] = {{"X", "one or more inputs (float32 or float64, one dtype)", false, true}};
static const pardo_arg_def einsum_out[] = {{"Y", "the result, the inputs' dtype", false, false}};
static const pardo_attr_def einsum_attrs[] = {
    {"equation", PARDO_ATTR_STRING, NULL, "the einsum equation, e.g. \"bij,bjk->bik\" or \"...ii->...i\""},
};

/* The equation parsed against the inputs' ranks: for each input and the output, its dims as label ids;
 * ids 0..51 the letters, 52.. the ellipsis' dims (52 + its dim, right-aligned to the widest ellipsis). */
typedef struct ein_eq {
    int n_in;
    int nd[EIN_IN + 1];                  // dims of each input, then of the output (index n_in)
    int lab[EIN_IN + 1][PARDO_MAX_DIMS]; // label id of each dim
    int n_ell;                           // dims the ellipsis stands for (the widest)
} ein_eq;

static int label_id(char ch) { return ch >= 'a' && ch <= 'z' ? ch - 'a' : ch >= 'A' && ch <= 'Z' ? 26 + ch - 'A' : -1; }

/* Parses one term (up to ',' or '-' or the end) for an operand of rank `rank` (-1: the output, whose
 * ellipsis is n_ell wide). Letters into labs, the ellipsis as its dims; *p moves past the term. */
static int parse_term(const char **p, int rank, int n_ell_out, int *labs, int *nd, int *ell_dims, pardo_status *st) {
    int letters = 0, ell_at = -1;
    const char *s = *p;
    for (const char *q = s; *q && *q != ',' && *q != '-'; q++) {
        if (*q == '.') {
            if (strncmp(q, "...", 3) != 0 || ell_at >= 0)
                return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': a '.' that is not one '...' per term");
            ell_at = letters;
            q += 2;
        } else if (label_id(*q) >= 0) {
            letters++;
        } else if (!isspace((unsigned char)*q)) {
            return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': character '%c', expected letters, '...', ',' "
                                "and '->'", *q);
        }
    }
    int ell = 0;
    if (ell_at >= 0) ell = rank >= 0 ? rank - letters : n_ell_out;
    if (ell < 0 || (rank >= 0 && ell_at < 0 && letters != rank))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': a term of %d labels for an input of rank %d", letters,
                            rank);
    if (letters + ell > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': a term of too many dims");
    *ell_dims = ell;
    int k = 0;
    for (; *s && *s != ',' && *s != '-'; s++) {
        if (*s == '.') {
            /* the ellipsis' dims right-aligned: its last dim is id 52 + EIN_ELL - 1 */
            for (int e = 0; e < ell; e++) labs[k++] = 52 + EIN_ELL - ell + e;
            s += 2;
        } else if (label_id(*s) >= 0) {
            labs[k++] = label_id(*s);
        }
    }
    *nd = k;
    *p = s;
    return PARDO_OK;
}

/* Parses op's equation for n inputs of the given ranks into *e. PARDO_EINVAL naming what is wrong. */
static int ein_parse(const pardo_op *op, int n, const int *ranks, ein_eq *e, pardo_status *st) {
    const char *eq = NULL;
    if (!pardo_attr(op, "equation")) return pardo_errorf(st, PARDO_EINVAL, "attr 'equation' is required");
    int rc = pardo_attr_string(op, "equation", NULL, &eq, st);
    if (rc != PARDO_OK) return rc;
    if (!eq) return pardo_errorf(st, PARDO_EINVAL, "attr 'equation' is required");
    if (n < 1 || n > EIN_IN) return pardo_errorf(st, PARDO_EINVAL, "has %d inputs, expected 1 to %d", n, EIN_IN);
    e->n_in = n;
    e->n_ell = 0;
    const char *p = eq;
    for (int i = 0; i < n; i++) {
        int ell;
        if ((rc = parse_term(&p, ranks[i], 0, e->lab[i], &e->nd[i], &ell, st)) != PARDO_OK) return rc;
        if (ell > e->n_ell) e->n_ell = ell;
        if (i + 1 < n && *p++ != ',')
            return pardo_errorf(st, PARDO_EINVAL, "attr 'equation' has %d input terms, expected %d", i + 1, n);
    }
    if (*p == ',') return pardo_errorf(st, PARDO_EINVAL, "attr 'equation' has more input terms than the %d inputs", n);
    if (*p == '-') {
        if (p[1] != '>') return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': '-' not followed by '>'");
        p += 2;
        int ell;
        if ((rc = parse_term(&p, -1, e->n_ell, e->lab[n], &e->nd[n], &ell, st)) != PARDO_OK) return rc;
        if (*p) return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': more after the output term");
        for (int d = 0; d < e->nd[n]; d++) {
            bool seen = false;
            for (int i = 0; i < n && !seen; i++)
                for (int k = 0; k < e->nd[i]; k++) seen |= e->lab[i][k] == e->lab[n][d];
            for (int k = 0; k < d; k++)
                if (e->lab[n][k] == e->lab[n][d])
                    return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': the output repeats a label");
            if (!seen) return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': an output label no input has");
        }
        return PARDO_OK;
    }
    /* implicit output: the ellipsis, then the labels that appear once, alphabetically */
    int count[52 + EIN_ELL] = {0}, k = 0;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < e->nd[i]; d++) count[e->lab[i][d]]++;
    for (int l = 0; l < 52 + EIN_ELL; l++) {
        /* the ellipsis first, then alphabetical: A..Z sort before a..z in ASCII, as numpy orders them */
        const int id = l < EIN_ELL ? 52 + l : l - EIN_ELL < 26 ? 26 + (l - EIN_ELL) : l - EIN_ELL - 26;
        if (!(id >= 52 ? count[id] > 0 : count[id] == 1)) continue;
        if (k == PARDO_MAX_DIMS)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': an output of more than %d dims", PARDO_MAX_DIMS);
        e->lab[n][k++] = id;
    }
    e->nd[n] = k;
    return PARDO_OK;
}

/* Each label's size from the inputs' shapes (-1: unknown; an ellipsis dim of 1 broadcasts). PARDO_ESHAPE
 * where two inputs disagree. */
static int ein_sizes(const ein_eq *e, const int64_t *const *shapes, int64_t *size, pardo_status *st) {
    for (int l = 0; l < 52 + EIN_ELL; l++) size[l] = -2; /* unseen */
    for (int i = 0; i < e->n_in; i++)
        for (int d = 0; d < e->nd[i]; d++) {
            const int l = e->lab[i][d];
            const int64_t v = shapes[i][d];
            if (size[l] == -2 || size[l] == -1 || (l >= 52 && size[l] == 1)) {
                if (!(size[l] >= 0 && v < 0)) size[l] = v;
            } else if (v >= 0 && v != size[l] && !(l >= 52 && v == 1)) {
                return pardo_errorf(st, PARDO_ESHAPE, "input %d dim %d is %lld, where the equation's label has %lld", i,
                                    d, (long long)v, (long long)size[l]);
            }
        }
    return PARDO_OK;
}

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

static int einsum_infer(pardo_infer_ctx *ctx) {
    int ranks[EIN_IN];
    const int64_t *shapes[EIN_IN];
    if (ctx->n_in < 1 || ctx->n_in > EIN_IN)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs, expected 1 to %d", ctx->n_in, EIN_IN);
    for (int i = 0; i < ctx->n_in; i++) {
        const pardo_type *t = ctx->in[i];
        int rc = t ? pardo_expect_dtype(t, "an input", float_dtypes, 2, ctx->st)
                   : pardo_errorf(ctx->st, PARDO_EINVAL, "input %d is absent", i);
        if (rc != PARDO_OK) return rc;
        if (t->dtype != ctx->in[0]->dtype)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d has dtype %s, expected %s like input 0", i,
                                pardo_dtype_name(t->dtype), pardo_dtype_name(ctx->in[0]->dtype));
        if (t->ndim < 0) {
            ctx->out[0].dtype = t->dtype;
            ctx->out[0].ndim = -1;
            return PARDO_OK;
        }
        ranks[i] = t->ndim;
        shapes[i] = t->shape;
    }
    ein_eq e;
    int64_t size[52 + EIN_ELL];
    int rc = ein_parse(ctx->op, ctx->n_in, ranks, &e, ctx->st);
    if (rc == PARDO_OK) rc = ein_sizes(&e, shapes, size, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type *y = &ctx->out[0];
    y->dtype = ctx->in[0]->dtype;
    y->ndim = e.nd[e.n_in];
    for (int d = 0; d < y->ndim; d++) y->shape[d] = size[e.lab[e.n_in][d]];
    return PARDO_OK;
}

/* One run's loop: the labels (the output's, then the summed ones), their sizes, and each operand's stride
 * per label (inputs 0..n-1, the output n): the sum over its dims of that label (a diagonal), 0 where the
 * operand broadcasts. */
typedef struct ein_loop {
    int n, nl, out_nd;
    int64_t dims[EIN_LABELS];
    int64_t oshape[PARDO_MAX_DIMS];
    int64_t str[EIN_IN + 1][EIN_LABELS];
    int64_t total, inner; // iterations; those of one output element (the summed labels' product)
} ein_loop;

/* Plans the loop of op over the n tensors x (checked: float32 or float64 of one dtype). */
static int ein_loop_make(const pardo_kernel_ctx *ctx, int n, pardo_tensor *const *x, ein_loop *L) {
    int ranks[EIN_IN];
    const int64_t *shapes[EIN_IN];
    if (n < 1 || n > EIN_IN) return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs, expected 1 to %d", n, EIN_IN);
    const pardo_dtype dt = x[0] ? x[0]->dtype : PARDO_DTYPE_UNKNOWN;
    for (int i = 0; i < n; i++) {
        if (!x[i] || x[i]->dtype != dt || !pardo_dtype_is_float(dt))
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d must be float32 or float64 like input 0", i);
        ranks[i] = x[i]->ndim;
        shapes[i] = x[i]->shape;
    }
    ein_eq e;
    int64_t size[52 + EIN_ELL];
    int rc = ein_parse(ctx->op, n, ranks, &e, ctx->st);
    if (rc == PARDO_OK) rc = ein_sizes(&e, shapes, size, ctx->st);
    if (rc != PARDO_OK) return rc;
    int labs[EIN_LABELS], nl = 0;
    bool used[52 + EIN_ELL] = {false};
    for (int d = 0; d < e.nd[n]; d++) used[labs[nl++] = e.lab[n][d]] = true;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < e.nd[i]; d++)
            if (!used[e.lab[i][d]]) {
                if (nl == EIN_LABELS) return pardo_errorf(ctx->st, PARDO_ENOTSUP, "more than %d labels", EIN_LABELS);
                used[labs[nl++] = e.lab[i][d]] = true;
            }
    L->n = n;
    L->nl = nl;
    L->out_nd = e.nd[n];
    L->total = L->inner = 1;
    for (int k = 0; k < nl; k++) {
        L->dims[k] = size[labs[k]];
        if (L->dims[k] > 0 && L->total > INT64_MAX / L->dims[k])
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "attr 'equation' makes more than 2^63 terms");
        L->total *= L->dims[k];
        if (k >= e.nd[n]) L->inner *= L->dims[k];
    }
    for (int d = 0; d < e.nd[n]; d++) L->oshape[d] = size[e.lab[n][d]];
    memset(L->str, 0, sizeof L->str);
    for (int i = 0; i <= n; i++) {
        int64_t st = 1;
        for (int d = e.nd[i] - 1; d >= 0; d--) {
            const int64_t dim = i < n ? shapes[i][d] : L->oshape[d];
            for (int k = 0; k < nl; k++)
                if (labs[k] == e.lab[i][d] && dim != 1) L->str[i][k] += st;
            st *= dim;
        }
    }
    return PARDO_OK;
}

/* Moves the loop's odometer on by one, with every operand's offset. */
static inline void ein_next(const ein_loop *L, int64_t *idx, int64_t *off) {
    for (int k = L->nl - 1; k >= 0; k--) {
        if (++idx[k] < L->dims[k]) {
            for (int i = 0; i <= L->n; i++) off[i] += L->str[i][k];
            return;
        }
        idx[k] = 0;
        for (int i = 0; i <= L->n; i++) off[i] -= L->str[i][k] * (L->dims[k] - 1);
    }
}

static inline double f_at(const void *p, bool f32, int64_t i) {
    return f32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static int einsum_cpu(pardo_kernel_ctx *ctx) {
    ein_loop L;
    int rc = ein_loop_make(ctx, ctx->n_in, ctx->in, &L);
    if (rc != PARDO_OK) return rc;
    const pardo_dtype dt = ctx->in[0]->dtype;
    const bool f32 = dt == PARDO_F32;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, L.out_nd, L.oshape);
    if (!y) return ctx->st->code;
    pardo_tensor_zero(y);
    if (L.total == 0) return PARDO_OK;
    const void *x[EIN_IN];
    for (int i = 0; i < L.n; i++) x[i] = pardo_tensor_data(ctx->in[i]);
    void *py = pardo_tensor_data(y);
    /* the summed labels come last, so each output element's terms are one run of `inner` iterations, summed in
     * double and stored once */
    int64_t idx[EIN_LABELS] = {0}, off[EIN_IN + 1] = {0};
    double acc = 0;
    for (int64_t t = 0; t < L.total; t++, ein_next(&L, idx, off)) {
        double prod = 1;
        for (int i = 0; i < L.n; i++) prod *= f_at(x[i], f32, off[i]);
        acc += prod;
        if ((t + 1) % L.inner == 0) {
            if (f32) ((float *)py)[off[L.n]] = (float)acc;
            else ((double *)py)[off[L.n]] = acc;
            acc = 0;
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_einsum = {
    .type = "einsum",
    .doc = "Y = einsum(equation, X...), like ONNX Einsum: '...' broadcast dims, a repeated label a diagonal, "
           "labels left out of the output summed (float32, float64)",
    .inputs = einsum_in,
    .n_inputs = 1,
    .outputs = einsum_out,
    .n_outputs = 1,
    .attrs = einsum_attrs,
    .n_attrs = 1,
    .infer = einsum_infer,
    .cpu = einsum_cpu,
    .halves_in_f32 = true,
    .grad = pardo_grad_standard,
};

/* ---- einsum_grad: inputs X_0..X_{k-1}, Y, dY; outputs dX_0..dX_{k-1} ---- */

static const pardo_arg_def einsum_grad_in[] = {
    {"X", "the forward inputs X_0..X_{k-1}, then the forward output Y (unused), then dY (\"\": zeros)", true, true},
};
static const pardo_arg_def einsum_grad_out[] = {{"dX", "gradient of each X_i, its dtype and shape", true, true}};

static int einsum_grad_infer(pardo_infer_ctx *ctx) {
    const int k = ctx->n_in - 2;
    if (k < 1 || k > EIN_IN || ctx->n_out > k)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs and %d outputs, expected k forward inputs, Y and dY "
                            "in and at most k outputs (1 <= k <= %d)", ctx->n_in, ctx->n_out, EIN_IN);
    for (int i = 0; i < ctx->n_out; i++) {
        if (!ctx->in[i]) return pardo_errorf(ctx->st, PARDO_EINVAL, "input %d is absent", i);
        int rc = pardo_grad_expect_float(ctx->op, i, ctx->in[i], "a forward input", ctx->st);
        if (rc != PARDO_OK) return rc;
        ctx->out[i] = *ctx->in[i];
    }
    return PARDO_OK;
}

/* dX_j[its element] += dY[the output element] times the product of the other inputs' elements, over the same
 * loop as the forward (a diagonal's and a broadcast dim's terms add up where they land). */
static int einsum_grad_cpu(pardo_kernel_ctx *ctx) {
    const int k = ctx->n_in - 2;
    if (k < 1 || k > EIN_IN || ctx->n_out > k)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs and %d outputs, expected k forward inputs, Y and dY "
                            "in and at most k outputs (1 <= k <= %d)", ctx->n_in, ctx->n_out, EIN_IN);
    ein_loop L;
    int rc = ein_loop_make(ctx, k, ctx->in, &L);
    if (rc != PARDO_OK) return rc;
    const pardo_dtype dt = ctx->in[0]->dtype;
    const bool f32 = dt == PARDO_F32;
    pardo_tensor *dy = ctx->in[k + 1];
    if (dy && (dy->dtype != dt || !pardo_shape_equal(dy->ndim, dy->shape, L.out_nd, L.oshape)))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d 'dY' must have Y's dtype and shape", k + 1);
    void *dx[EIN_IN] = {NULL};
    const void *x[EIN_IN];
    for (int i = 0; i < k; i++) {
        x[i] = pardo_tensor_data(ctx->in[i]);
        if (i >= ctx->n_out || !pardo_kernel_wants_output(ctx, i)) continue;
        pardo_tensor *d = pardo_kernel_output(ctx, i, dt, ctx->in[i]->ndim, ctx->in[i]->shape);
        if (!d) return ctx->st->code;
        pardo_tensor_zero(d);
        dx[i] = pardo_tensor_data(d);
    }
    if (!dy || L.total == 0) return PARDO_OK;
    const void *pdy = pardo_tensor_data(dy);
    int64_t idx[EIN_LABELS] = {0}, off[EIN_IN + 1] = {0};
    for (int64_t t = 0; t < L.total; t++, ein_next(&L, idx, off)) {
        const double g = f_at(pdy, f32, off[k]);
        for (int j = 0; j < k; j++) {
            if (!dx[j]) continue;
            double prod = g;
            for (int i = 0; i < k; i++)
                if (i != j) prod *= f_at(x[i], f32, off[i]);
            if (f32) ((float *)dx[j])[off[j]] += (float)prod;
            else ((double *)dx[j])[off[j]] += prod;
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_einsum_grad = {
    .type = "einsum_grad",
    .doc = "dX_j = dY contracted with the other inputs back to X_j's labels (gradient of einsum; float32, float64)",
    .inputs = einsum_grad_in,
    .n_inputs = 1,
    .outputs = einsum_grad_out,
    .n_outputs = 1,
    .attrs = einsum_attrs,
    .n_attrs = 1,
    .infer = einsum_grad_infer,
    .cpu = einsum_grad_cpu,
};
