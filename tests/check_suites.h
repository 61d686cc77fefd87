/* check_suites.h - every Check suite of pardo; tests/check_main.c runs them all.
 * tests/check_<module>.c defines make_<module>_suite. */
#ifndef PARDO_CHECK_SUITES_H
#define PARDO_CHECK_SUITES_H

#include <check.h>

/* X(module): one line per suite, in the order they run. */
#define PARDO_SUITES(X) \
    X(status)           \
    X(value)            \
    X(tensor)           \
    X(half)             \
    X(synced_mem)       \
    X(device_stream)    \
    X(file_io)          \
    X(npy)              \
    X(csv)              \
    X(safetensors)      \
    X(graph_json)       \
    X(graph_json_errors)\
    X(graph_index)      \
    X(onnx)             \
    X(registry)         \
    X(vmath)            \
    X(ops_elementwise)  \
    X(ops_activation)   \
    X(ops_matmul)       \
    X(gemm)             \
    X(gemm_pick)        \
    X(ops_reduce)       \
    X(ops_halves)       \
    X(ops_softmax)      \
    X(ops_shape)        \
    X(ops_quantize)     \
    X(ops_index)        \
    X(ops_index_elements) \
    X(ops_resize)       \
    X(ops_nms)          \
    X(ops_pad)          \
    X(ops_control_flow) \
    X(ops_index_select) \
    X(ops_index_unique) \
    X(ops_signal)       \
    X(ops_tfidf)        \
    X(ops_grid_sample)  \
    X(ops_compare)      \
    X(ops_math)         \
    X(ops_bitwise)      \
    X(ops_fill)         \
    X(ops_conv)         \
    X(ops_conv_transpose) \
    X(ops_conv_nd)      \
    X(ops_pool)         \
    X(ops_pool_nd)      \
    X(ops_max_unpool)   \
    X(ops_roi_align)    \
    X(ops_norm)         \
    X(ops_lrn)          \
    X(ops_rnn)          \
    X(ops_batch_norm)   \
    X(ops_dropout)      \
    X(ops_embedding)    \
    X(ops_loss)         \
    X(ops_optimizer)    \
    X(grad)             \
    X(infer)            \
    X(backward)         \
    X(transpile)        \
    X(scope)            \
    X(executor)         \
    X(cuda)             \
    X(cuda_nn)          \
    X(cuda_train)       \
    X(memory)           \
    X(fuse)             \
    X(checkpoint)       \
    X(blocking_counter) \
    X(thread_pool)      \
    X(task)             \
    X(coordinator)      \
    X(engine)           \
    X(parallel)         \
    X(parallel_errors)  \
    X(early_stage)      \
    X(dataflow)         \
    X(loader)           \
    X(train)            \
    X(trace)

#define PARDO_SUITE_DECL(m) Suite *make_##m##_suite(void) __attribute__((weak));
PARDO_SUITES(PARDO_SUITE_DECL)
#undef PARDO_SUITE_DECL

#endif
