/* op_list.h - the one explicit table of ops: X(c_name) per op, where the
 * family file defines `const pardo_op_def pardo_op_<c_name>`. Add a line here
 * when adding an op; ops/registry.c builds the table from it. A
 * differentiable op T with `.grad = pardo_grad_standard` has its T_grad on
 * the same line. */
#ifndef PARDO_OP_LIST_H
#define PARDO_OP_LIST_H

#define PARDO_OP_LIST(X) \
    X(identity) X(identity_grad) \
    X(to_device) X(to_host) \
    X(add) X(add_grad) \
    X(sub) X(sub_grad) \
    X(mul) X(mul_grad) \
    X(div) X(div_grad) \
    X(neg) X(neg_grad) \
    X(exp) X(exp_grad) \
    X(log) X(log_grad) \
    X(sqrt) X(sqrt_grad) \
    X(abs) X(abs_grad) \
    X(pow) X(pow_grad) \
    X(scale) X(scale_grad) \
    X(clip) X(clip_grad) \
    X(relu) X(relu_grad) \
    X(leaky_relu) X(leaky_relu_grad) \
    X(sigmoid) X(sigmoid_grad) \
    X(tanh) X(tanh_grad) \
    X(gelu) X(gelu_grad) \
    X(elu) X(elu_grad) X(selu) X(selu_grad) X(celu) X(celu_grad) \
    X(hard_sigmoid) X(hard_sigmoid_grad) X(hard_swish) X(hard_swish_grad) \
    X(softplus) X(softplus_grad) X(softsign) X(softsign_grad) \
    X(thresholded_relu) X(thresholded_relu_grad) X(mish) X(mish_grad) X(shrink) X(shrink_grad) \
    X(prelu) X(prelu_grad) \
    X(matmul) X(matmul_grad) \
    X(reduce_sum) X(reduce_sum_grad) \
    X(reduce_mean) X(reduce_mean_grad) \
    X(reduce_max) X(reduce_max_grad) \
    X(reduce_min) X(reduce_min_grad) X(reduce_prod) X(reduce_prod_grad) \
    X(reduce_l1) X(reduce_l1_grad) X(reduce_l2) X(reduce_l2_grad) X(reduce_sum_square) X(reduce_sum_square_grad) \
    X(reduce_log_sum) X(reduce_log_sum_grad) X(reduce_log_sum_exp) X(reduce_log_sum_exp_grad) \
    X(argmax) X(argmin) \
    X(softmax) X(softmax_grad) \
    X(log_softmax) X(log_softmax_grad) \
    X(softmax_cross_entropy) X(softmax_cross_entropy_grad) \
    X(reshape) X(reshape_grad) \
    X(flatten) X(flatten_grad) \
    X(transpose) X(transpose_grad) \
    X(concat) X(concat_grad) \
    X(cast) X(cast_grad) \
    X(quantize_linear) X(dequantize_linear) X(dynamic_quantize_linear) X(matmul_integer) \
    X(fill) \
    X(erf) X(erf_grad) \
    X(floor) X(ceil) X(round) X(sign) \
    X(sin) X(sin_grad) X(cos) X(cos_grad) X(tan) X(tan_grad) \
    X(asin) X(asin_grad) X(acos) X(acos_grad) X(atan) X(atan_grad) \
    X(sinh) X(sinh_grad) X(cosh) X(cosh_grad) \
    X(asinh) X(asinh_grad) X(acosh) X(acosh_grad) X(atanh) X(atanh_grad) \
    X(reciprocal) X(reciprocal_grad) \
    X(max) X(max_grad) X(min) X(min_grad) X(sum) X(sum_grad) X(mean) X(mean_grad) \
    X(resize) X(non_max_suppression) X(pad) X(pad_grad) \
    X(top_k) X(compress) X(eye_like) X(one_hot) X(grid_sample) \
    X(unique) X(non_zero) X(reverse_sequence) \
    X(dft) X(stft) X(hann_window) X(hamming_window) X(blackman_window) X(mel_weight_matrix) \
    X(tf_idf_vectorizer) \
    X(mod) X(bit_shift) X(cumsum) X(cumsum_grad) X(hardmax) X(det) X(det_grad) X(einsum) X(einsum_grad) \
    X(shape) \
    X(unsqueeze) X(unsqueeze_grad) \
    X(squeeze) X(squeeze_grad) \
    X(expand) X(expand_grad) \
    X(constant_of_shape) \
    X(range) \
    X(gather) X(gather_grad) \
    X(gather_elements) X(gather_elements_grad) X(scatter_elements) X(gather_nd) X(gather_nd_grad) X(scatter_nd) \
    X(slice) X(slice_grad) \
    X(equal) X(less) X(greater) X(less_or_equal) X(greater_or_equal) \
    X(not) X(and) X(or) X(xor) X(is_nan) X(is_inf) \
    X(where_select) X(where_select_grad) /* "where": pardo_op_where is graph.h's locator */ \
    X(conv2d) X(conv2d_grad) \
    X(conv_transpose) X(conv_transpose_grad) \
    X(conv_nd) X(conv_nd_grad) \
    X(max_pool2d) X(max_pool2d_grad) \
    X(avg_pool2d) X(avg_pool2d_grad) \
    X(max_pool_nd) X(max_pool_nd_grad) X(avg_pool_nd) X(avg_pool_nd_grad) \
    X(max_unpool) X(max_unpool_grad) \
    X(roi_align) \
    X(layer_norm) X(layer_norm_grad) \
    X(lrn) X(lrn_grad) \
    X(batch_norm) X(batch_norm_grad) X(batch_norm_stats) \
    X(dropout) X(dropout_grad) \
    X(embedding) X(embedding_grad) \
    X(rnn) X(rnn_grad) X(gru) X(gru_grad) X(lstm) X(lstm_grad) \
    X(mse_loss) X(mse_loss_grad) \
    X(nll_loss) X(nll_loss_grad) \
    X(accuracy) \
    X(sgd) \
    X(momentum) \
    X(adam) \
    X(adamw) \
    X(clip_grad_norm) \
    X(split) X(merge) X(parallel_do) X(all_reduce) \
    X(rank_merge) \
    X(if) X(loop) X(scan)

#endif
