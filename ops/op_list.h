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
    X(split) X(merge) X(parallel_do)

#endif
