/* dropout_mask.h - dropout's mask generator, shared by its CPU kernels (ops/dropout.c) and its CUDA kernels
 * (ops/cuda/dropout.cu, compiled by nvcc: the functions are host and device functions there), so that both
 * draw the very same bits: element i of a (seed, step) is kept when u(key, i) >= ratio, u a uniform double in
 * [0, 1) from splitmix64's mixer applied to a key made of seed and step, then to the element index. Integer
 * arithmetic and one exact conversion: the same bits on every machine. */
#ifndef PARDO_DROPOUT_MASK_H
#define PARDO_DROPOUT_MASK_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PARDO_DROPOUT_FN static inline __host__ __device__
#else
#define PARDO_DROPOUT_FN static inline
#endif

/* splitmix64's output mixer. */
PARDO_DROPOUT_FN uint64_t pardo_dropout_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The key of one (seed, step): the mask of element i is a function of key and i. */
PARDO_DROPOUT_FN uint64_t pardo_dropout_key(uint64_t seed, uint64_t step) {
    return pardo_dropout_mix64(pardo_dropout_mix64(seed + 0x9e3779b97f4a7c15ULL) ^ (step + 1) * 0xd1b54a32d192ed03ULL);
}

/* True when element i is kept: a uniform double in [0, 1) at least ratio. */
PARDO_DROPOUT_FN bool pardo_dropout_keep(uint64_t key, int64_t i, double ratio) {
    const uint64_t h = pardo_dropout_mix64(key + ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ULL);
    return (double)(h >> 11) * 0x1.0p-53 >= ratio;
}

#undef PARDO_DROPOUT_FN

#endif
