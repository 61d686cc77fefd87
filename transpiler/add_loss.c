/* add_loss.c - `pardo transpile --add-loss KIND:OUTPUT` (see pass.h): a loss
 * op on an output of an inference graph, with a new labels feed, so that an
 * imported model (an ONNX model has no loss) can be trained with
 * `--backward loss`. This pass is where the loss kinds are spelled: it
 * appends softmax_cross_entropy or mse_loss ops as optimizer.c appends the
 * updates. */
#include <stdio.h>
#include <string.h>

#include "pass.h"

#define ADDED_LOSS_NAME "loss"

static const char *const loss_kind_names[] = {NULL, "softmax_cross_entropy", "mse"};

bool pardo_loss_kind_parse(const char *s, pardo_loss_kind *out) {
    for (int i = 1; i < 3; i++)
        if (s && strcmp(s, loss_kind_names[i]) == 0) {
            *out = (pardo_loss_kind)i;
            return true;
        }
    return false;
}

/* A var of block 0 that an op writes and no op reads (the graph's outputs),
 * listed into buf for a message: "a, b" or "none". */
static void list_outputs(const pardo_block *b, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < b->n_ops && len + 1 < n; i++)
        for (int k = 0; k < b->ops[i].n_out; k++) {
            const char *name = b->ops[i].out[k];
            if (!name[0]) continue;
            bool read = false;
            for (int j = 0; j < b->n_ops && !read; j++) read = pardo_op_reads(&b->ops[j], name) > 0;
            if (read) continue;
            int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", name);
            if (w < 0 || (size_t)w >= n - len) return;
            len += (size_t)w;
        }
    if (!len) snprintf(buf, n, "none");
}

/* True when an op of block b writes var `name`. */
static bool written(const pardo_block *b, const char *name) {
    for (int i = 0; i < b->n_ops; i++)
        if (pardo_op_writes(&b->ops[i], name) > 0) return true;
    return false;
}

int pardo_pass_add_loss(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    const char *out_name = opt->add_loss_output, *labels = opt->labels ? opt->labels : "labels";
    const char *kind = loss_kind_names[opt->add_loss];
    pardo_block *b0 = &p->blocks[0];
    const char *file = p->path ? p->path : "the graph";
    char outputs[512];
    const pardo_graph_var *out = pardo_block_find_var(b0, out_name);
    if (!out || !written(b0, out_name)) {
        list_outputs(b0, outputs, sizeof outputs);
        return pardo_errorf(st, PARDO_ENOTFOUND,
                            "%s: --add-loss %s:%s: no op of block 0 writes a var '%s' (the graph's outputs: %s)", file,
                            kind, out_name, out_name, outputs);
    }
    if (out->kind != PARDO_VAR_TENSOR || !pardo_dtype_is_float(out->type.dtype))
        return pardo_errorf(st, PARDO_EINVAL, "%s: --add-loss %s:%s: '%s' is %s, expected a float32 or float64 tensor",
                            file, kind, out_name, out_name,
                            out->kind != PARDO_VAR_TENSOR ? "a tensor_array" : pardo_dtype_name(out->type.dtype));
    if (opt->add_loss == PARDO_LOSS_SOFTMAX_CROSS_ENTROPY && out->type.ndim != 2)
        return pardo_errorf(st, PARDO_ESHAPE,
                            "%s: --add-loss softmax_cross_entropy:%s: '%s' has %d dims, expected logits [N, C]", file,
                            out_name, out_name, out->type.ndim);
    if (opt->add_loss == PARDO_LOSS_MSE && out->type.ndim < 1)
        return pardo_errorf(st, PARDO_ESHAPE, "%s: --add-loss mse:%s: '%s' is a scalar, expected [N, ...] rows", file,
                            out_name, out_name);
    if (pardo_block_find_var(b0, labels))
        return pardo_errorf(st, PARDO_EINVAL, "%s: --add-loss: a var '%s' already exists; name the labels feed with --labels NAME",
                            file, labels);
    if (pardo_block_find_var(b0, ADDED_LOSS_NAME))
        return pardo_errorf(st, PARDO_EINVAL,
                            "%s: --add-loss: a var '" ADDED_LOSS_NAME "' already exists (the graph has a loss: train it "
                            "with --backward " ADDED_LOSS_NAME ")", file);
    for (int i = 0; i < b0->n_ops; i++)
        if (pardo_op_effective_role(p, 0, &b0->ops[i]) == PARDO_OP_LOSS)
            return pardo_errorf(st, PARDO_EINVAL, "%s: --add-loss: op %d already has role loss", file, i);

    pardo_type out_type = out->type; /* copied before b0->vars moves */
    pardo_graph_var *lv = pardo_block_add_var(b0, labels, st);
    if (!lv) return st->code;
    lv->declared = true;
    lv->role = PARDO_VAR_FEED;
    if (opt->add_loss == PARDO_LOSS_SOFTMAX_CROSS_ENTROPY) { /* class indices [N] */
        lv->type.dtype = PARDO_I64;
        lv->type.ndim = 1;
        lv->type.shape[0] = out_type.shape[0];
    } else { /* targets of the prediction's dtype and shape, any number of rows */
        lv->type = out_type;
        lv->type.shape[0] = -1;
    }
    pardo_op *op = pardo_block_add_op(b0, opt->add_loss == PARDO_LOSS_MSE ? "mse_loss" : "softmax_cross_entropy", st);
    if (!op) return st->code;
    op->role = PARDO_OP_LOSS;
    int rc = pardo_op_add_input(op, out_name, st);
    if (rc == PARDO_OK) rc = pardo_op_add_input(op, labels, st);
    if (rc == PARDO_OK) rc = pardo_op_add_output(op, ADDED_LOSS_NAME, st);
    if (rc == PARDO_OK) rc = pardo_op_set_attr(op, "reduction", pardo_value_new_string("mean"), st);
    if (rc == PARDO_OK && !(op->name = strdup("added_loss"))) rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    if (rc != PARDO_OK) return rc;
    return pardo_pass_check(p, opt, st);
}
