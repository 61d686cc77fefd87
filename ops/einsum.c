/* einsum.c - einsum, like ONNX Einsum: attr equation ("ij,jk->ik"; no
 * "->" gives the labels that appear once, in alphabetical order), one or
 * more float32 or float64 inputs, "..." for broadcast leading dims, a label
 * repeated in one input for its diagonal, labels missing from the output
 * summed over. Computed as one loop over every label's index, products and
 * sums in double: for the small contractions models spell with einsum, not
 * a matrix product's speed (matmul is that). No gradient. */
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
    if (letters + ell > PARDO_MAX_DIMS) return pardo_errorf(st, PARDO_EINVAL, "attr 'equation': a term of too many dims");
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

static int einsum_cpu(pardo_kernel_ctx *ctx) {
    int ranks[EIN_IN];
    const int64_t *shapes[EIN_IN];
    if (ctx->n_in < 1 || ctx->n_in > EIN_IN)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs, expected 1 to %d", ctx->n_in, EIN_IN);
    const pardo_dtype dt = ctx->in[0]->dtype;
    for (int i = 0; i < ctx->n_in; i++) {
        if (!ctx->in[i] || ctx->in[i]->dtype != dt || !pardo_dtype_is_float(dt))
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d must be float32 or float64 like input 0", i);
        ranks[i] = ctx->in[i]->ndim;
        shapes[i] = ctx->in[i]->shape;
    }
    ein_eq e;
    int64_t size[52 + EIN_ELL];
    int rc = ein_parse(ctx->op, ctx->n_in, ranks, &e, ctx->st);
    if (rc == PARDO_OK) rc = ein_sizes(&e, shapes, size, ctx->st);
    if (rc != PARDO_OK) return rc;
    /* the loop's labels: the output's, then the summed ones */
    int labs[EIN_LABELS], nl = 0;
    bool used[52 + EIN_ELL] = {false};
    const int n = e.n_in;
    for (int d = 0; d < e.nd[n]; d++) used[labs[nl++] = e.lab[n][d]] = true;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < e.nd[i]; d++)
            if (!used[e.lab[i][d]]) {
                if (nl == EIN_LABELS) return pardo_errorf(ctx->st, PARDO_ENOTSUP, "more than %d labels", EIN_LABELS);
                used[labs[nl++] = e.lab[i][d]] = true;
            }
    int64_t dims[EIN_LABELS], oshape[PARDO_MAX_DIMS], total = 1;
    for (int k = 0; k < nl; k++) {
        dims[k] = size[labs[k]];
        if (dims[k] > 0 && total > INT64_MAX / dims[k])
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "attr 'equation' makes more than 2^63 terms");
        total *= dims[k];
    }
    for (int d = 0; d < e.nd[n]; d++) oshape[d] = size[e.lab[n][d]];
    /* each operand's stride per loop label: the sum over its dims of that label (a diagonal), 0 where the
     * operand broadcasts */
    int64_t str[EIN_IN + 1][EIN_LABELS];
    memset(str, 0, sizeof str);
    for (int i = 0; i <= n; i++) {
        int64_t s = 1;
        for (int d = e.nd[i] - 1; d >= 0; d--) {
            const int64_t dim = i < n ? shapes[i][d] : oshape[d];
            for (int k = 0; k < nl; k++)
                if (labs[k] == e.lab[i][d] && dim != 1) str[i][k] += s;
            s *= dim;
        }
    }
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, e.nd[n], oshape);
    if (!y) return ctx->st->code;
    pardo_tensor_zero(y);
    if (total == 0) return PARDO_OK;
    const void *x[EIN_IN];
    for (int i = 0; i < n; i++) x[i] = pardo_tensor_data(ctx->in[i]);
    void *py = pardo_tensor_data(y);
    /* the summed labels come last, so each output element's terms are one run of `inner` iterations, summed in
     * double and stored once */
    int64_t inner = 1;
    for (int k = e.nd[n]; k < nl; k++) inner *= dims[k];
    int64_t idx[EIN_LABELS] = {0}, off[EIN_IN + 1] = {0};
    double acc = 0;
    for (int64_t t = 0; t < total; t++) {
        double prod = 1;
        for (int i = 0; i < n; i++)
            prod *= dt == PARDO_F32 ? (double)((const float *)x[i])[off[i]] : ((const double *)x[i])[off[i]];
        acc += prod;
        if ((t + 1) % inner == 0) {
            if (dt == PARDO_F32) ((float *)py)[off[n]] = (float)acc;
            else ((double *)py)[off[n]] = acc;
            acc = 0;
        }
        for (int k = nl - 1; k >= 0; k--) { /* the odometer over the loop labels */
            if (++idx[k] < dims[k]) {
                for (int i = 0; i <= n; i++) off[i] += str[i][k];
                break;
            }
            idx[k] = 0;
            for (int i = 0; i <= n; i++) off[i] -= str[i][k] * (dims[k] - 1);
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_einsum = {
    .type = "einsum",
    .doc = "Y = einsum(equation, X...), like ONNX Einsum: '...' broadcast dims, a repeated label a diagonal, "
           "labels left out of the output summed (float32, float64; no gradient)",
    .inputs = einsum_in,
    .n_inputs = 1,
    .outputs = einsum_out,
    .n_outputs = 1,
    .attrs = einsum_attrs,
    .n_attrs = 1,
    .infer = einsum_infer,
    .cpu = einsum_cpu,
};
