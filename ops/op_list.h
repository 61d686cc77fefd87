/* op_list.h - the one explicit table of ops: X(c_name) per op, where the
 * family file defines `const pardo_op_def pardo_op_<c_name>`. Add a line here
 * when adding an op; ops/registry.c builds the table from it. */
#ifndef PARDO_OP_LIST_H
#define PARDO_OP_LIST_H

#define PARDO_OP_LIST(X) \
    X(identity) X(identity_grad) \
    X(add) \
    X(sub) \
    X(mul) \
    X(div) \
    X(relu) \
    X(sigmoid) \
    X(tanh) \
    X(exp) \
    X(log) \
    X(scale) \
    X(matmul) \
    X(reduce_sum) \
    X(reduce_mean) \
    X(softmax) \
    X(softmax_cross_entropy) \
    X(fill) \
    X(conv2d) X(conv2d_grad) \
    X(max_pool2d) X(max_pool2d_grad) \
    X(avg_pool2d) X(avg_pool2d_grad) \
    X(layer_norm) X(layer_norm_grad) \
    X(dropout) X(dropout_grad) \
    X(embedding) X(embedding_grad) \
    X(mse_loss) X(mse_loss_grad) \
    X(accuracy) \
    X(sgd) \
    X(momentum) \
    X(adam)

#endif
