/* optimizer_cuda.c - sgd, momentum, adam and adamw on the GPU (pardo_kernel_fn), built only with CUDA=1;
 * ops/optimizer.c names them through ops/cuda/kernels.h. The semantics are ops/optimizer.c's (torch.optim's
 * equations, the param and its states updated in place): its infer function checks the run-time types (the CPU
 * kernel's checks and messages), lr and adam's step are read on the host, the bias corrections computed there in
 * double as the CPU kernel computes them, and the element update is one kernel (ops/cuda/optimizer.cu). adam's new
 * step is written on the host (a scalar; the next step's read then needs no copy back). A gradient that is a
 * tensor_array of parts (the fused merge -> update) and integer or half dtypes run the CPU kernel. */
#include <math.h>

#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_train.h"
#include "train_util.h"

/* The update of a: launched, then synchronised; the op's status. */
static int run_update(pardo_kernel_ctx *ctx, const pardo_cuda_opt_args *a) {
    char err[256];
    int rc = pardo_cuda_launch_optimizer(a, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check(ctx->op->def->type, err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

/* Output k with input in_of's type on the device, or NULL (k > 0 not wanted: dropped). *ok false on failure. */
static void *state_out(pardo_kernel_ctx *ctx, int k, int in_of, bool *ok) {
    if (k >= ctx->n_out || (k > 0 && !pardo_kernel_wants_output(ctx, k))) return NULL;
    const pardo_tensor *src = ctx->in[in_of];
    pardo_tensor *t = pardo_kernel_output(ctx, k, src->dtype, src->ndim, src->shape);
    if (!t) {
        *ok = false;
        return NULL;
    }
    return t->mem->gpu_ptr;
}

int pardo_cuda_sgd(pardo_kernel_ctx *ctx) {
    if (!pardo_cuda_floats_in(ctx, 0x3)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x3);
    pardo_tensor *p = ctx->in[0];
    double wd, lr;
    bool ok = true;
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "weight_decay", 0, &wd, ctx->st);
    if (rc == PARDO_OK) rc = pardo_cuda_host_scalar(ctx, ctx->in[2], &lr);
    if (rc != PARDO_OK) return rc;
    pardo_cuda_opt_args a = {.kind = PARDO_CU_SGD,
                             .f64 = p->dtype == PARDO_F64,
                             .n = p->numel,
                             .p = p->mem->gpu_ptr,
                             .g = ctx->in[1]->mem->gpu_ptr,
                             .lr = lr,
                             .wd = wd};
    a.po = state_out(ctx, 0, 0, &ok);
    return ok ? run_update(ctx, &a) : ctx->st->code;
}

int pardo_cuda_momentum(pardo_kernel_ctx *ctx) {
    if (!pardo_cuda_floats_in(ctx, 0x7)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x7);
    pardo_tensor *p = ctx->in[0];
    double mu, wd, lr;
    bool nesterov, ok = true;
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "mu", 0.9, &mu, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "nesterov", false, &nesterov, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "weight_decay", 0, &wd, ctx->st);
    if (rc == PARDO_OK) rc = pardo_cuda_host_scalar(ctx, ctx->in[3], &lr);
    if (rc != PARDO_OK) return rc;
    pardo_cuda_opt_args a = {.kind = PARDO_CU_MOMENTUM,
                             .f64 = p->dtype == PARDO_F64,
                             .n = p->numel,
                             .p = p->mem->gpu_ptr,
                             .g = ctx->in[1]->mem->gpu_ptr,
                             .s1 = ctx->in[2]->mem->gpu_ptr,
                             .lr = lr,
                             .mu = mu,
                             .wd = wd,
                             .nesterov = nesterov};
    a.po = state_out(ctx, 0, 0, &ok);
    if (ok) a.o1 = state_out(ctx, 1, 2, &ok);
    return ok ? run_update(ctx, &a) : ctx->st->code;
}

/* adam and adamw (attr weight_decay decoupled: the param scaled by 1 - lr wd first). */
static int adam_run(pardo_kernel_ctx *ctx, bool decoupled) {
    if (!pardo_cuda_floats_in(ctx, 0xf)) return pardo_cuda_run_on_cpu_inputs(ctx, 0xf);
    pardo_tensor *p = ctx->in[0], *step = ctx->in[4];
    double b1, b2, eps, wd, s, lr;
    bool ok = true;
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "weight_decay", decoupled ? 0.01 : 0, &wd, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "beta1", 0.9, &b1, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "beta2", 0.999, &b2, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "epsilon", 1e-8, &eps, ctx->st);
    if (rc == PARDO_OK) rc = pardo_cuda_host_scalar(ctx, step, &s);
    if (rc == PARDO_OK) rc = pardo_cuda_host_scalar(ctx, ctx->in[5], &lr);
    if (rc != PARDO_OK) return rc;
    const double t = s + 1;
    if (!(t >= 1) || t > 9007199254740992.0) /* 2^53: beyond it t + 1 == t */
        return pardo_errorf(ctx->st, PARDO_ERUNTIME, "input 4 'step' is %g, expected a count >= 0", t - 1);
    pardo_cuda_opt_args a = {.kind = PARDO_CU_ADAM,
                             .f64 = p->dtype == PARDO_F64,
                             .n = p->numel,
                             .p = p->mem->gpu_ptr,
                             .g = ctx->in[1]->mem->gpu_ptr,
                             .s1 = ctx->in[2]->mem->gpu_ptr,
                             .s2 = ctx->in[3]->mem->gpu_ptr,
                             .lr = lr / (1 - pow(b1, t)),
                             .b1 = b1,
                             .b2 = b2,
                             .eps = eps,
                             .bc2_sqrt = sqrt(1 - pow(b2, t)),
                             .wd = decoupled ? 0 : wd,
                             .decay = decoupled ? 1 - lr * wd : 1};
    a.po = state_out(ctx, 0, 0, &ok);
    if (ok) a.o1 = state_out(ctx, 1, 2, &ok);
    if (ok) a.o2 = state_out(ctx, 2, 3, &ok);
    if (!ok || (rc = run_update(ctx, &a)) != PARDO_OK) return ctx->st->code;
    if (ctx->n_out > 3 && pardo_kernel_wants_output(ctx, 3)) { /* step + 1, on the host */
        pardo_kernel_ctx host = *ctx;
        host.device = PARDO_DEVICE_CPU;
        pardo_tensor *so = pardo_kernel_output(&host, 3, step->dtype, step->ndim, step->shape);
        if (!so) return ctx->st->code;
        pardo_tensor_set_f64(so, 0, t);
    }
    return PARDO_OK;
}

int pardo_cuda_adam(pardo_kernel_ctx *ctx) { return adam_run(ctx, false); }
int pardo_cuda_adamw(pardo_kernel_ctx *ctx) { return adam_run(ctx, true); }
