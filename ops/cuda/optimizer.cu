// optimizer.cu - the device half of sgd, momentum, adam and adamw (ops/cuda/optimizer_cuda.c): one elementwise
// kernel per update, ops/optimizer.c's formulas in double with each state rounded to the param's dtype where the
// CPU kernel rounds it. Float32 and float64. Launched through ops/cuda/launch_train.h on PARDO_CU_STREAM; does
// not synchronise.
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_stream.cuh"
#include "launch_util.cuh"
#include "launch_train.h"

using namespace pardo_cu;

namespace {





template <typename T> __global__ void sgd_kernel(int64_t n, const T *p, const T *g, double lr, double wd, T *po) {
    GRID_LOOP(i, n) {
        const double pi = (double)p[i], gi = wd == 0 ? (double)g[i] : (double)g[i] + wd * pi;
        po[i] = (T)(pi - lr * gi);
    }
}

template <typename T>
__global__ void momentum_kernel(int64_t n, const T *p, const T *g, const T *v, double lr, double mu, double wd,
                                int nesterov, T *po, T *vo) {
    GRID_LOOP(i, n) {
        const double pi = (double)p[i], gi = wd == 0 ? (double)g[i] : (double)g[i] + wd * pi;
        const T vn = (T)(mu * (double)v[i] + gi);
        const double upd = nesterov ? gi + mu * (double)vn : (double)vn;
        po[i] = (T)(pi - lr * upd);
        if (vo) vo[i] = vn;
    }
}

template <typename T>
__global__ void adam_kernel(int64_t n, const T *p, const T *g, const T *m, const T *v, double step_size,
                            double bc2_sqrt, double b1, double b2, double eps, double wd, double decay, T *po, T *mo,
                            T *vo) {
    GRID_LOOP(i, n) {
        const double pi = (double)p[i], gi = wd == 0 ? (double)g[i] : (double)g[i] + wd * pi;
        const T mn = (T)(b1 * (double)m[i] + (1 - b1) * gi);
        const T vn = (T)(b2 * (double)v[i] + (1 - b2) * gi * gi);
        const double denom = sqrt((double)vn) / bc2_sqrt + eps;
        const double pd = decay == 1 ? pi : (double)(T)(pi * decay);
        po[i] = (T)(pd - step_size * (double)mn / denom);
        if (mo) mo[i] = mn;
        if (vo) vo[i] = vn;
    }
}

template <typename T> void launch(const pardo_cuda_opt_args *a) {
    const int grid = grid_for(a->n);
    const T *p = (const T *)a->p, *g = (const T *)a->g, *s1 = (const T *)a->s1, *s2 = (const T *)a->s2;
    T *po = (T *)a->po, *o1 = (T *)a->o1, *o2 = (T *)a->o2;
    switch (a->kind) {
    case PARDO_CU_SGD:
        sgd_kernel<T><<<grid, kThreads, 0, PARDO_CU_STREAM>>>(a->n, p, g, a->lr, a->wd, po);
        break;
    case PARDO_CU_MOMENTUM:
        momentum_kernel<T>
            <<<grid, kThreads, 0, PARDO_CU_STREAM>>>(a->n, p, g, s1, a->lr, a->mu, a->wd, a->nesterov, po, o1);
        break;
    default:
        adam_kernel<T><<<grid, kThreads, 0, PARDO_CU_STREAM>>>(a->n, p, g, s1, s2, a->lr, a->bc2_sqrt, a->b1, a->b2,
                                                               a->eps, a->wd, a->decay, po, o1, o2);
        break;
    }
}

} // namespace

extern "C" int pardo_cuda_launch_optimizer(const pardo_cuda_opt_args *a, char *err, size_t errlen) {
    if (a->n <= 0) return 0;
    if (a->f64)
        launch<double>(a);
    else
        launch<float>(a);
    return launched("optimizer", err, errlen);
}
