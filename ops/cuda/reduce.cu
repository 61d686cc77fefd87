// reduce.cu - the device half of reduce_sum, reduce_mean, reduce_max, reduce_min, their gradients and argmax
// (ops/cuda/reduce_cuda.c; the CPU kernels are ops/reduce.c's, whose semantics these follow: sums in double, NaN
// winning a max or min, the gradient of a max or min to the first one in the reduced elements' row-major order).
// An output element is a block's where many elements reduce into it and a thread's otherwise (nn_block.cuh's row
// walk over [out_numel, count]); argmax is a thread per output. Float32 and float64. Launched through
// ops/cuda/launch_nn.h on PARDO_CU_STREAM; nothing here synchronises.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_stream.cuh"
#include "launch_nn.h"
#include "nn_block.cuh"

using namespace pardo_nn;

namespace {

// v beats best: greater (less), or the first NaN (ops/reduce.c's GT_F and LT_F)
__device__ bool gt_f(double v, double best) { return v > best || (isnan(v) && !isnan(best)); }
__device__ bool lt_f(double v, double best) { return v < best || (isnan(v) && !isnan(best)); }

struct MaxNanOp {
    __device__ double operator()(double a, double b) const { return gt_f(b, a) ? b : a; }
};
struct MinNanOp {
    __device__ double operator()(double a, double b) const { return lt_f(b, a) ? b : a; }
};

// X's offset of output element o's first element (its kept coordinates)
__device__ int64_t kept_offset(const pardo_cuda_red_plan &p, int64_t o) {
    int64_t off = 0;
    for (int d = p.nk - 1; d >= 0; d--) {
        off += o % p.kdims[d] * p.kstr[d];
        o /= p.kdims[d];
    }
    return off;
}

// the offset from o's first element of its r-th reduced element (row-major over the reduced dims)
__device__ int64_t reduced_offset(const pardo_cuda_red_plan &p, int64_t r) {
    if (p.nr == 1) return r * p.rstr[0]; // the common plan: no 64-bit division per element
    int64_t off = 0;
    for (int d = p.nr - 1; d >= 0; d--) {
        off += r % p.rdims[d] * p.rstr[d];
        r /= p.rdims[d];
    }
    return off;
}

template <typename T, bool kBlock> __global__ void reduce_kernel(int kind, const T *x, T *y, pardo_cuda_red_plan p) {
    __shared__ double sh[32];
    for (int64_t o = row_first<kBlock>(); o < p.out_numel; o += row_step<kBlock>()) {
        const Walk w = walk_of<kBlock>(o, p.count, 1);
        const T *px = x + kept_offset(p, o);
        double acc = kind == PARDO_CU_REDUCE_MAX ? -INFINITY : kind == PARDO_CU_REDUCE_MIN ? INFINITY : 0.0;
        for (int64_t r = w.first; r < p.count; r += w.step) {
            const double v = (double)px[reduced_offset(p, r)];
            if (kind == PARDO_CU_REDUCE_MAX)
                acc = MaxNanOp()(acc, v);
            else if (kind == PARDO_CU_REDUCE_MIN)
                acc = MinNanOp()(acc, v);
            else
                acc += v;
        }
        if (kind == PARDO_CU_REDUCE_MAX)
            acc = row_reduce<kBlock>(acc, sh, MaxNanOp());
        else if (kind == PARDO_CU_REDUCE_MIN)
            acc = row_reduce<kBlock>(acc, sh, MinNanOp());
        else
            acc = row_reduce<kBlock>(acc, sh, SumOp());
        if (w.first == 0) y[o] = (T)(kind == PARDO_CU_REDUCE_MEAN ? acc / (double)p.count : acc);
    }
}

// The best (value, index) of the block's threads' candidates, the lower index on a tie (every thread gets it);
// a thread with no element has index -1. Every thread of the block calls it (it synchronises).
__device__ void block_best(int min, double *v, int64_t *r) {
    __shared__ double cv[kThreads];
    __shared__ int64_t cr[kThreads];
    __syncthreads(); // the previous row's readers are done
    cv[threadIdx.x] = *v;
    cr[threadIdx.x] = *r;
    __syncthreads();
    if (threadIdx.x == 0) {
        double bv = cv[0];
        int64_t br = cr[0];
        for (int k = 1; k < (int)blockDim.x; k++) {
            if (cr[k] < 0) continue;
            const bool better = min ? lt_f(cv[k], bv) : gt_f(cv[k], bv);
            const bool worse = min ? lt_f(bv, cv[k]) : gt_f(bv, cv[k]);
            if (br < 0 || better || (!worse && cr[k] < br)) bv = cv[k], br = cr[k];
        }
        cv[0] = bv;
        cr[0] = br;
    }
    __syncthreads();
    *v = cv[0];
    *r = cr[0];
}

template <typename T, bool kBlock>
__global__ void reduce_grad_kernel(int kind, const T *x, const T *dy, T *dx, pardo_cuda_red_plan p) {
    for (int64_t o = row_first<kBlock>(); o < p.out_numel; o += row_step<kBlock>()) {
        const Walk w = walk_of<kBlock>(o, p.count, 1);
        const int64_t base = kept_offset(p, o);
        const T g = dy[o];
        if (kind == PARDO_CU_REDUCE_SUM || kind == PARDO_CU_REDUCE_MEAN) {
            const double scale = kind == PARDO_CU_REDUCE_MEAN ? 1.0 / (double)p.count : 1.0;
            const T d = (T)(scale * (double)g);
            for (int64_t r = w.first; r < p.count; r += w.step) dx[base + reduced_offset(p, r)] = d;
            continue;
        }
        const int min = kind == PARDO_CU_REDUCE_MIN;
        double bv = 0;
        int64_t br = -1; // this thread's first best (its elements come in order)
        for (int64_t r = w.first; r < p.count; r += w.step) {
            const double v = (double)x[base + reduced_offset(p, r)];
            if (br < 0 || (min ? lt_f(v, bv) : gt_f(v, bv))) bv = v, br = r;
        }
        if (kBlock) block_best(min, &bv, &br);
        for (int64_t r = w.first; r < p.count; r += w.step) dx[base + reduced_offset(p, r)] = r == br ? g : T(0);
    }
}

template <typename T>
__global__ void argmax_kernel(int min, int last, const T *x, int64_t *y, int64_t outer, int64_t n, int64_t inner) {
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < outer * inner;
         c += (int64_t)gridDim.x * blockDim.x) {
        const T *px = x + (c / inner) * n * inner + c % inner;
        int64_t best = 0;
        for (int64_t k = 1; k < n; k++) {
            const double v = (double)px[k * inner], b = (double)px[best * inner];
            const bool wins = last ? !(min ? lt_f(b, v) : gt_f(b, v)) : (min ? lt_f(v, b) : gt_f(v, b));
            if (wins) best = k;
        }
        y[c] = best;
    }
}

int plan_check(const pardo_cuda_red_plan *p, char *err, size_t errlen) {
    if (p->nk >= 1 && p->nk <= PARDO_CU_RED_DIMS && p->nr >= 0 && p->nr <= PARDO_CU_RED_DIMS) return 0;
    snprintf(err, errlen, "CUDA reduce kernel: %d kept and %d reduced dims past %d", p->nk, p->nr, PARDO_CU_RED_DIMS);
    return -5; // PARDO_ENOTSUP
}

} // namespace

extern "C" int pardo_cuda_launch_reduce(int kind, int f64, const void *x, void *y, const pardo_cuda_red_plan *p,
                                        char *err, size_t errlen) {
    int rc = plan_check(p, err, errlen);
    if (rc || p->out_numel <= 0) return rc;
    if (f64)
        PARDO_NN_LAUNCH_ROWS(reduce_kernel, double, p->out_numel, p->count, 1, kind, (const double *)x, (double *)y,
                             *p);
    else
        PARDO_NN_LAUNCH_ROWS(reduce_kernel, float, p->out_numel, p->count, 1, kind, (const float *)x, (float *)y, *p);
    return launched("reduce", err, errlen);
}

extern "C" int pardo_cuda_launch_reduce_grad(int kind, int f64, const void *x, const void *dy, void *dx,
                                             const pardo_cuda_red_plan *p, char *err, size_t errlen) {
    int rc = plan_check(p, err, errlen);
    if (rc || p->out_numel <= 0 || p->count <= 0) return rc;
    if (f64)
        PARDO_NN_LAUNCH_ROWS(reduce_grad_kernel, double, p->out_numel, p->count, 1, kind, (const double *)x,
                             (const double *)dy, (double *)dx, *p);
    else
        PARDO_NN_LAUNCH_ROWS(reduce_grad_kernel, float, p->out_numel, p->count, 1, kind, (const float *)x,
                             (const float *)dy, (float *)dx, *p);
    return launched("reduce gradient", err, errlen);
}

extern "C" int pardo_cuda_launch_argmax(int min, int last, int f64, const void *x, int64_t *y, int64_t outer, int64_t n,
                                        int64_t inner, char *err, size_t errlen) {
    const int64_t m = outer * inner;
    if (m <= 0) return 0;
    if (f64)
        argmax_kernel<double>
            <<<grid_for(m, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(min, last, (const double *)x, y, outer, n, inner);
    else
        argmax_kernel<float>
            <<<grid_for(m, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(min, last, (const float *)x, y, outer, n, inner);
    return launched("argmax", err, errlen);
}
