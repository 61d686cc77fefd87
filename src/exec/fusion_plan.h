/* fusion_plan.h - op chains the executor runs as one kernel: matmul ->
 * add (a bias) [-> relu] becomes matmul with an epilogue
 * (pardo_matmul_epilogue_cpu), so the product's rows get their bias and
 * activation while still in cache and the intermediates are never stored;
 * and merge -> an optimizer update (sgd, momentum, adam) becomes the update
 * merging its gradient a tile at a time (pardo_kernel_ctx.grad_merge), so
 * the merged gradient is never written and read back. In the backward
 * pass, matmul_grad -> relu_grad [-> add_grad] becomes matmul_grad whose dA
 * leaves through relu_grad's mask (pardo_matmul_grad_relu_cpu) straight
 * into the add's gradient, the bias's gradient summed from it after.
 * A chain fuses only where its intermediates are temporaries nobody else
 * can see: no other op of any block reads or writes them, no attr names
 * them (a parallel_do's parts_out), and the caller does not keep them.
 * Pure analysis of the IR; the executor builds it when it may free
 * temporaries (pardo_exec_options.release_temps). */
#ifndef PARDO_FUSION_PLAN_H
#define PARDO_FUSION_PLAN_H

#include "core/graph.h"
#include "core/status.h"

typedef struct pardo_fusion {
    int len;       // ops fused into this matmul: 0 (none), 1 (the add) or 2 (add, relu); into this matmul_grad:
                   // 1 (relu_grad) or 2 (relu_grad, add_grad)
    int follow[2]; // their indices, in order: right after a matmul; later for a matmul_grad, past ops that
                   // share no var they write with it (an optimizer update placed after the param's last use)
    int bias;      // the add's (add_grad's) input that is the bias (0 or 1)
    int update; // this merge runs inside the update op at index update - 1 (0: not fused)
    int merge;  // this update runs the merge op at index merge - 1 (0: not fused)
} pardo_fusion;

/* Fills fuse[0..n_ops) for block b of p (checked by the passes), keeping
 * the n_keep vars named in keep. */
void pardo_fusion_plan(const pardo_program *p, int b, const char *const *keep, int n_keep, pardo_fusion *fuse);

#endif
