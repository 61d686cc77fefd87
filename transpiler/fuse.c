/* fuse.c - the fusion pass (pass.h, pardo_pass_fuse): op chains become one
 * op that carries its epilogue, as ONNX Runtime's graph transformers make
 * FusedMatMul / FusedGemm, so the executor stays generic and runs ops:
 *
 *   matmul -> add (a [N] bias) [-> relu | gelu]
 *                                          => matmul(A, B, bias) {activation: relu | gelu}
 *   matmul(A, B, bias) -> relu | gelu       => matmul(A, B, bias) {activation: relu | gelu} (an imported Gemm + Relu)
 *       (a gelu only where nothing else reads its input: inference; gelu_grad reads it in training)
 *   matmul_grad -> relu_grad [-> add_grad] (dA through relu's mask, then the
 *       add's gradient, whose left-out operand's gradient is dC itself)
 *                                          => matmul_grad(A, B, Y, dY, relu_y, bias) -> (dZ, dB, dbias)
 *   merge (mean or sum) -> sgd / momentum / adam taking it as its gradient
 *                                          => the update with grad the parts' tensor_array
 *                                             (attr grad_merge, input weight_by)
 *   add_grad(dC) -> (copy of dC, dbias), the copy read by one op (a last
 *       layer's matmul_grad)                => add_grad -> ("", dbias); that op reads dC
 *   scale (bias 0) -> softmax [, softmax_grad -> scale_grad] (attention's
 *       1/sqrt(d) before its softmax)      => softmax {scale} [, softmax_grad {scale}]
 *   conv2d -> relu [, relu_grad -> conv2d_grad]
 *                                          => conv2d {activation: relu} [, conv2d_grad {activation: relu}
 *                                             reading the relu's output and dY]
 *
 * A chain fuses only where its intermediates are temporaries nobody else
 * can see: no other op of any block reads or writes them, no attr names
 * them (a parallel_do's parts_out), and the caller does not keep them
 * (opt->keep: the vars it fetches). relu_grad and add_grad may stand further
 * down, past ops that share no var one of them writes (an optimizer update
 * placed after w2's last use): they move up into the matmul_grad. The
 * fused ops compute the same bits as the chains one by one (their kernels
 * use the same arithmetic, ops/matmul.c and ops/optimizer.c). */
#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"
#include "core/value.h"
#include "op.h"
#include "pass.h"

/* Which chain starts at each op (computed on the block before it changes). */
typedef struct fusion {
    int len;       // ops fused into this matmul: 0 (none), 1 (the add) or 2 (add, relu); into this matmul_grad:
                   // 1 (relu_grad) or 2 (relu_grad, add_grad)
    int follow[2]; // their indices, in order
    int bias;      // the add's (add_grad's) input that is the bias (0 or 1); -1: the matmul's own (input 2)
    const char *act; // a matmul's activation, the chain's last op: "relu" or "gelu" (NULL: none)
    int update;    // this merge is taken into the update at index update - 1 (0: not fused)
    int merge;     // this update takes the merge at index merge - 1 (0: not fused)
    int pass_on;   // this add_grad's output pass_on - 1 (a copy of its dC) is dropped (0: not)
    int scaled;    // this softmax (softmax_grad) takes in the scale op at index scaled - 1 (0: not)
    int scale_grad; // this softmax_grad takes in the scale_grad at index scale_grad - 1 and writes its dX (0: not)
    int relu;      // this conv2d takes in the relu at index relu - 1 (attr activation relu; 0: not)
    int relu_grad; // this conv2d_grad takes in the relu_grad at index relu_grad - 1: it reads that op's Y and dY
    const char *from, *to; // this op reads `to` where it read `from` (an add_grad's dropped copy; NULL: none)
} fusion;

/* Who uses each var, counted once per pass (the planning asks per chain;
 * a scan of every op per question made the pass quadratic): per block, an
 * index of the names that block's ops and attrs name, resolved to the
 * block owning the var, with the reads and writes and the one op that
 * reads (writes) it where there is one. Fusing a block only changes uses
 * of its own intermediates, which later blocks never ask about. */
typedef struct var_uses {
    int reads, writes;               // over every op of every block
    int read_block, read_op;         // the op that reads it, while reads == 1
    int write_block, write_op;       // the op that writes it, while writes == 1
    bool in_attr;                    // some op's attr value names it
} var_uses;

typedef struct use_table {
    pardo_name_index *owned; // per block: var name (the var's own string) -> index into uses
    var_uses *uses;
    int n, cap, n_blocks;
} use_table;

static void use_table_free(use_table *t) {
    for (int b = 0; t->owned && b < t->n_blocks; b++) pardo_name_index_free(&t->owned[b]);
    free(t->owned);
    free(t->uses);
    memset(t, 0, sizeof(*t));
}

/* The entry of the var `name` seen from block bb; NULL when there is no such var or nobody used it. */
static const var_uses *uses_find(const use_table *t, const pardo_program *p, int bb, const char *name) {
    int owner = -1;
    const pardo_graph_var *v = pardo_program_lookup_var(p, bb, name, &owner);
    int k = v && owner >= 0 ? pardo_name_index_get(&t->owned[owner], v->name) : -1;
    return k >= 0 ? &t->uses[k] : NULL;
}

/* The entry of the var `name` seen from block bb, added when new; *u NULL
 * when no var has that name (a string attr that is not a var). PARDO_OK, or
 * PARDO_ENOMEM with st filled. */
static int uses_note(use_table *t, const pardo_program *p, int bb, const char *name, var_uses **u, pardo_status *st) {
    int owner = -1;
    const pardo_graph_var *v = pardo_program_lookup_var(p, bb, name, &owner);
    *u = NULL;
    if (!v || owner < 0) return PARDO_OK;
    int k = pardo_name_index_get(&t->owned[owner], v->name);
    if (k < 0) {
        if (t->n == t->cap) {
            int cap = t->cap ? t->cap * 2 : 256;
            var_uses *grown = realloc(t->uses, sizeof(*grown) * (size_t)cap);
            if (!grown) return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the fusion");
            t->uses = grown;
            t->cap = cap;
        }
        if (pardo_name_index_set(&t->owned[owner], v->name, t->n, st) != PARDO_OK) return st->code;
        t->uses[k = t->n++] = (var_uses){.read_block = -1, .write_block = -1};
    }
    *u = &t->uses[k];
    return PARDO_OK;
}

static int note_attr_names(use_table *t, const pardo_program *p, int bb, const pardo_value *v, pardo_status *st) {
    if (!v) return PARDO_OK;
    if (v->kind == PARDO_V_STRING) {
        var_uses *u;
        if (uses_note(t, p, bb, v->string, &u, st) != PARDO_OK) return st->code;
        if (u) u->in_attr = true;
        return PARDO_OK;
    }
    if (v->kind == PARDO_V_ARRAY || v->kind == PARDO_V_OBJECT)
        for (int i = 0; i < v->n; i++)
            if (note_attr_names(t, p, bb, &v->items[i], st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

static int use_table_build(use_table *t, const pardo_program *p, pardo_status *st) {
    memset(t, 0, sizeof(*t));
    if (!(t->owned = calloc((size_t)p->n_blocks + 1, sizeof(*t->owned))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning the fusion");
    t->n_blocks = p->n_blocks;
    for (int bb = 0; bb < p->n_blocks; bb++)
        for (int i = 0; i < p->blocks[bb].n_ops; i++) {
            const pardo_op *op = &p->blocks[bb].ops[i];
            for (int k = 0; k < op->n_in + op->n_out; k++) {
                const bool in = k < op->n_in;
                const char *name = in ? op->in[k] : op->out[k - op->n_in];
                if (!name[0]) continue;
                var_uses *u;
                if (uses_note(t, p, bb, name, &u, st) != PARDO_OK) return st->code;
                if (!u) continue;
                int *count = in ? &u->reads : &u->writes, *blk = in ? &u->read_block : &u->write_block,
                    *at = in ? &u->read_op : &u->write_op;
                if ((*count)++ == 0) *blk = bb, *at = i;
            }
            if (note_attr_names(t, p, bb, op->attrs, st) != PARDO_OK) return st->code;
        }
    return PARDO_OK;
}

/* What the planning reads besides the program. */
typedef struct fuse_ctx {
    const char *const *keep; // the caller's vars (not fused away)
    int n_keep;
    const use_table *uses;
} fuse_ctx;

/* True when the parallel_do that runs block b binds `name` to a part
 * (a key of its parts_in or parts_out: keys there are that block's vars). */
static bool binds_part(const pardo_program *p, int b, const char *name) {
    int rb, ri;
    if (!pardo_block_runner(p, b, &rb, &ri)) return false;
    const pardo_value *attrs = p->blocks[rb].ops[ri].attrs;
    return pardo_value_get(pardo_value_get(attrs, "parts_in"), name) ||
           pardo_value_get(pardo_value_get(attrs, "parts_out"), name);
}

/* True when the var `name` is block b's own temporary tensor (no value)
 * that the caller does not keep and no parallel_do binds to a part: what
 * private_temp asks of a var before it counts its uses. */
static bool private_var(const pardo_program *p, int b, const char *name, const fuse_ctx *fc) {
    int owner = -1;
    const pardo_graph_var *v = pardo_program_lookup_var(p, b, name, &owner);
    return v && owner == b && v->role == PARDO_VAR_TEMP && v->kind == PARDO_VAR_TENSOR && !v->value &&
           !pardo_name_listed(fc->keep, fc->n_keep, name) && !binds_part(p, b, name);
}

/* True when the var `name` of block b is a temporary that exactly one op
 * (block b's `writer`) writes and exactly one (`reader`, once) reads, that
 * no attr value names, that no parallel_do binds to a part (parts_in,
 * parts_out), and that the caller does not keep. Ops of a block where the
 * name means a var of its own (a child block's `w@GRAD`) do not count. */
static bool private_temp(const pardo_program *p, int b, const char *name, int writer, int reader,
                         const fuse_ctx *fc) {
    if (!private_var(p, b, name, fc)) return false;
    const var_uses *u = uses_find(fc->uses, p, b, name);
    return u && !u->in_attr && u->reads == 1 && u->read_block == b && u->read_op == reader && u->writes == 1 &&
           u->write_block == b && u->write_op == writer;
}

static bool is_update(const char *type) {
    return strcmp(type, "sgd") == 0 || strcmp(type, "momentum") == 0 || strcmp(type, "adam") == 0 ||
           strcmp(type, "adamw") == 0;
}

/* A merge of mode mean or sum (what an update merges as it runs). */
static bool elementwise_mean_or_sum(const pardo_op *m) {
    const pardo_value *mode = m->attrs ? pardo_value_get(m->attrs, "mode") : NULL;
    return mode && mode->kind == PARDO_V_STRING && (strcmp(mode->string, "mean") == 0 || strcmp(mode->string, "sum") == 0);
}

/* True when no op between i and j writes the merge's tensor_array or its
 * weight_by (the update reads them where the merge stood). */
static bool parts_unchanged_between(const pardo_block *blk, int i, int j, const pardo_op *m) {
    for (int x = i + 1; x < j; x++)
        for (int k = 0; k < m->n_in && k < 2; k++)
            if (m->in[k][0] && pardo_op_writes(&blk->ops[x], m->in[k])) return false;
    return true;
}

/* merge -> update: a merge whose output only an optimizer update reads, as
 * its gradient (input 1), and that nothing else can see; the update must
 * leave its weight_by slot free (its inputs stop before it). */
static void plan_merge_updates(const pardo_program *p, int b, const fuse_ctx *fc, fusion *fuse) {
    const pardo_block *blk = &p->blocks[b];
    for (int i = 0; i < blk->n_ops; i++) {
        const pardo_op *m = &blk->ops[i];
        if (strcmp(m->type, "merge") || m->n_out != 1 || !m->out[0][0] || m->n_in < 1 || !elementwise_mean_or_sum(m))
            continue;
        const char *g = m->out[0];
        for (int j = i + 1; j < blk->n_ops; j++) {
            const pardo_op *u = &blk->ops[j];
            if (!pardo_op_reads(u, g)) continue;
            /* the first reader: an update taking g as its gradient, and nothing else reads or writes g */
            if (is_update(u->type) && u->n_in > 1 && strcmp(u->in[1], g) == 0 && pardo_op_reads(u, g) == 1 &&
                u->def && u->n_in < u->def->n_inputs && private_temp(p, b, g, i, j, fc) &&
                parts_unchanged_between(blk, i, j, m)) {
                fuse[i].update = j + 1;
                fuse[j].merge = i + 1;
            }
            break;
        }
    }
}

/* The first op after index `from` of block b that reads `name`, if it
 * shares no var one of them writes with any op between `from` and it (but
 * those listed in `moved`, which run before it anyway): it can then run
 * right after op `from`. -1 otherwise. */
static int hoistable_reader(const pardo_block *blk, int from, const char *name, const int *moved, int n_moved) {
    for (int j = from + 1; j < blk->n_ops; j++) {
        if (!pardo_op_reads(&blk->ops[j], name)) continue;
        for (int x = from + 1; x < j; x++) {
            bool skip = false;
            for (int m = 0; m < n_moved; m++) skip |= moved[m] == x;
            if (!skip && pardo_ops_conflict(&blk->ops[x], &blk->ops[j])) return -1;
        }
        return j;
    }
    return -1;
}

/* matmul_grad at index i -> relu_grad [-> add_grad]: relu_grad reads
 * matmul_grad's dA as its dY and nothing else does; add_grad takes
 * relu_grad's output (read by nobody else) as its dC, one of its operands
 * is left out (its gradient is dC itself: the fused dA goes there) and the
 * other is the bias. Ops between them stay where they are if they share no
 * var one of them writes with the ops moved up. Fills f (len 0: none). */
static void plan_grad_chain(const pardo_program *p, int b, int i, const fuse_ctx *fc, fusion *f) {
    const pardo_block *blk = &p->blocks[b];
    const pardo_op *g = &blk->ops[i];
    if (strcmp(g->type, "matmul_grad") || g->n_out < 1 || !g->out[0][0]) return;
    const char *d = g->out[0];
    const int ri = hoistable_reader(blk, i, d, NULL, 0);
    if (ri < 0) return;
    const pardo_op *r = &blk->ops[ri];
    if (strcmp(r->type, "relu_grad") || r->n_in < 3 || r->n_out != 1 || !r->out[0][0]) return;
    const char *y = r->in[1], *z = r->out[0];
    if (strcmp(r->in[2], d) || !y[0] || pardo_op_writes(g, y) || pardo_op_reads(g, z) || strcmp(z, y) == 0 ||
        !private_temp(p, b, d, i, ri, fc))
        return;
    f->len = 1;
    f->follow[0] = ri;
    const int moved[1] = {ri}, ai = hoistable_reader(blk, i, z, moved, 1);
    if (ai < 0) return;
    const pardo_op *a = &blk->ops[ai];
    if (strcmp(a->type, "add_grad") || a->n_in != 4 || a->n_out != 2 || strcmp(a->in[3], z) ||
        !a->in[0][0] == !a->in[1][0] || strcmp(a->in[2], z) == 0)
        return;
    const int fill = a->in[0][0] ? 1 : 0; /* the left-out operand: its gradient is dC */
    const char *h = a->out[fill], *db = a->out[1 - fill];
    if (!h[0] || pardo_op_reads(g, h) || strcmp(h, y) == 0 || pardo_op_reads(g, db) || strcmp(db, y) == 0 ||
        strcmp(h, db) == 0 || !private_temp(p, b, z, ri, ai, fc))
        return;
    f->len = 2;
    f->follow[1] = ai;
    f->bias = 1 - fill;
}

/* True when the add's bias is a [N] of the product's dtype, N its last dim,
 * as inferred (the GEMM epilogue's case; the rewrite keeps the add as it
 * is otherwise, whose broadcast may grow the product's shape), and the
 * product is float32 or float64 (an integer matmul has no epilogue). */
static bool bias_fits_epilogue(const pardo_program *p, int b, const pardo_op *mm, const char *bias) {
    const pardo_graph_var *vb = pardo_program_lookup_var(p, b, bias, NULL),
                    *vy = pardo_program_lookup_var(p, b, mm->out[0], NULL);
    if (!vb || !vy || vb->kind != PARDO_VAR_TENSOR || vb->type.dtype != vy->type.dtype ||
        !pardo_dtype_is_float(vy->type.dtype))
        return false;
    const pardo_type *tb = &vb->type, *ty = &vy->type;
    return tb->ndim == 1 && ty->ndim >= 2 && tb->shape[0] > 0 && ty->shape[ty->ndim - 1] == tb->shape[0];
}

/* True when some op of blk in (from, to) writes `name` (or, with reads, reads it). */
static bool used_between(const pardo_block *blk, int from, int to, const char *name, bool reads) {
    for (int x = from + 1; x < to; x++)
        if (pardo_op_writes(&blk->ops[x], name) || (reads && pardo_op_reads(&blk->ops[x], name))) return true;
    return false;
}

/* add_grad at index i with an operand left out (its gradient is dC
 * itself, which add_grad copies) whose copy one later op reads, and nothing
 * else: that op reads dC instead and the copy is not made (the gradient
 * of a last layer's bias, whose matmul_grad reads the copy as its dY).
 * dC must not be written in between; ops already in a chain stay as they
 * are. Fills fuse[i] and the reader's fusion. */
static void plan_pass_on(const pardo_program *p, int b, int i, const fuse_ctx *fc, const bool *chained,
                         fusion *fuse) {
    const pardo_block *blk = &p->blocks[b];
    const pardo_op *a = &blk->ops[i];
    if (strcmp(a->type, "add_grad") || a->n_in != 4 || a->n_out != 2 || !a->in[0][0] == !a->in[1][0] ||
        !a->in[3][0] || chained[i])
        return;
    const int fill = a->in[0][0] ? 1 : 0;
    const char *h = a->out[fill], *dc = a->in[3];
    const var_uses *u = h[0] ? uses_find(fc->uses, p, b, h) : NULL;
    if (!u || u->read_block != b || u->read_op <= i || strcmp(h, dc) == 0 || strcmp(a->out[1 - fill], dc) == 0)
        return;
    const int j = u->read_op;
    if (chained[j] || fuse[j].from || !private_temp(p, b, h, i, j, fc) || used_between(blk, i, j + 1, dc, false))
        return;
    fuse[i].pass_on = fill + 1;
    fuse[j].from = h;
    fuse[j].to = dc;
}

/* The float attr `name` of op (dflt when absent); false where it is not a number. */
static bool attr_number(const pardo_op *op, const char *name, double dflt, double *v) {
    const pardo_value *a = pardo_attr(op, name);
    if (!a) return *v = dflt, true;
    return a->kind == PARDO_V_NUMBER && (*v = a->number, true);
}

/* scale at index i (bias 0) whose output S only a softmax reads, and in a
 * training graph that softmax's gradient as its X (and the scale's
 * gradient as its Y), the softmax_grad's dX read by the scale's gradient only: softmax {scale} reads the scale's input X, and
 * softmax_grad {scale} writes the scale_grad's dX. S and dS must be private
 * temps, X written before the scale only, dX not touched in between. The
 * kernels multiply by the scale where the ops did (the same bits). */
static void plan_softmax_scale(const pardo_program *p, int b, int i, const fuse_ctx *fc, const bool *chained,
                               fusion *fuse) {
    const pardo_block *blk = &p->blocks[b];
    const pardo_op *sc = &blk->ops[i];
    double c, bias;
    if (strcmp(sc->type, "scale") || sc->n_in != 1 || sc->n_out != 1 || !sc->in[0][0] || !sc->out[0][0] ||
        chained[i] || !attr_number(sc, "scale", 1.0, &c) || !attr_number(sc, "bias", 0.0, &bias) || bias != 0)
        return;
    const char *x = sc->in[0], *sv = sc->out[0];
    const var_uses *ux = uses_find(fc->uses, p, b, x), *us = uses_find(fc->uses, p, b, sv);
    if (strcmp(x, sv) == 0 || !ux || ux->writes > 1 || (ux->writes == 1 && (ux->write_block != b || ux->write_op > i)) ||
        !us || us->in_attr || us->writes != 1 || us->reads < 1 || us->reads > 3)
        return;
    /* S's readers: the softmax, and in training its gradient (X) and the scale's gradient (Y, for its shape) */
    int sm = -1, sg = -1, sy = -1, n_readers = 0;
    for (int j = i + 1; j < blk->n_ops; j++) {
        const pardo_op *o = &blk->ops[j];
        if (!pardo_op_reads(o, sv)) continue;
        n_readers++;
        if (strcmp(o->type, "softmax") == 0 && sm < 0 && o->n_in == 1 && o->n_out == 1) sm = j;
        else if (strcmp(o->type, "softmax_grad") == 0 && sm >= 0 && sg < 0 && o->n_in == 3 && o->n_out == 1 &&
                 strcmp(o->in[0], sv) == 0 && strcmp(o->in[1], sv) && strcmp(o->in[2], sv))
            sg = j;
        else if (strcmp(o->type, "scale_grad") == 0 && sg >= 0 && sy < 0 && o->n_in == 3 && strcmp(o->in[1], sv) == 0 &&
                 strcmp(o->in[0], sv) && strcmp(o->in[2], sv))
            sy = j;
        else return;
    }
    if (sm < 0 || chained[sm] || fuse[sm].from || n_readers != us->reads || (sg < 0 && us->reads != 1)) return;
    /* S read by these ops only, and no block but b sees it (private_temp asks for one reader: counted above) */
    if (!private_var(p, b, sv, fc) || us->write_block != b || us->write_op != i) return;
    int gj = -1;
    if (sg >= 0) {
        const pardo_op *g = &blk->ops[sg];
        const char *ds = g->out[0];
        const var_uses *ud = ds[0] ? uses_find(fc->uses, p, b, ds) : NULL;
        if (chained[sg] || fuse[sg].from || !ud || ud->reads != 1 || ud->read_block != b) return;
        gj = ud->read_op;
        const pardo_op *sgr = &blk->ops[gj];
        double c2, bias2;
        if (strcmp(sgr->type, "scale_grad") || sgr->n_in != 3 || sgr->n_out != 1 || strcmp(sgr->in[2], ds) ||
            strcmp(sgr->in[0], ds) == 0 || strcmp(sgr->in[1], ds) == 0 || !sgr->out[0][0] || chained[gj] ||
            fuse[gj].from || !attr_number(sgr, "scale", 1.0, &c2) || !attr_number(sgr, "bias", 0.0, &bias2) ||
            c2 != c || (sy >= 0 && sy != gj) || !private_temp(p, b, ds, sg, gj, fc))
            return;
        const char *dx = sgr->out[0];
        const var_uses *udx = uses_find(fc->uses, p, b, dx);
        if (!udx || udx->writes != 1 || strcmp(dx, x) == 0 || strcmp(dx, g->in[1]) == 0 || strcmp(dx, g->in[2]) == 0 ||
            used_between(blk, sg, gj, dx, true))
            return;
    }
    fuse[sm].scaled = i + 1;
    if (sg >= 0) {
        fuse[sg].scaled = i + 1;
        fuse[sg].scale_grad = gj + 1;
    }
}

/* The string attr `name` of op is absent or `want`. */
static bool attr_is(const pardo_op *op, const char *name, const char *want) {
    const pardo_value *a = pardo_attr(op, name);
    return !a || (a->kind == PARDO_V_STRING && strcmp(a->string, want) == 0);
}

/* conv2d at index i (no activation) whose output Z only a relu reads: the
 * relu goes into the conv (attr activation relu, the kernel's epilogue);
 * and in training, relu_grad(Y = the relu's output, dY) -> dZ, dZ only read
 * as dY by this conv's conv2d_grad: that conv2d_grad {activation: relu}
 * reads the relu's Y and dY itself (the mask, in the same bits). */
static void plan_conv_relu(const pardo_program *p, int b, int i, const fuse_ctx *fc, const bool *chained,
                           fusion *fuse) {
    const pardo_block *blk = &p->blocks[b];
    const pardo_op *cv = &blk->ops[i];
    if (strcmp(cv->type, "conv2d") || cv->n_out != 1 || !cv->out[0][0] || chained[i] || fuse[i].from ||
        !attr_is(cv, "activation", "none"))
        return;
    const char *z = cv->out[0];
    const var_uses *uz = uses_find(fc->uses, p, b, z);
    if (!uz || uz->reads != 1 || uz->read_block != b) return;
    const int j = uz->read_op;
    const pardo_op *r = &blk->ops[j];
    if (j <= i || strcmp(r->type, "relu") || r->n_in != 1 || r->n_out != 1 || !r->out[0][0] || chained[j] ||
        fuse[j].from || strcmp(r->out[0], z) == 0 || pardo_op_reads(cv, r->out[0]) || !private_temp(p, b, z, i, j, fc))
        return;
    const char *a = r->out[0];
    const var_uses *ua = uses_find(fc->uses, p, b, a);
    if (!ua || ua->writes != 1) return;
    fuse[i].relu = j + 1;
    /* the backward: relu_grad reading a as its Y, whose dZ only this conv's gradient reads */
    for (int g = j + 1; g < blk->n_ops; g++) {
        const pardo_op *rg = &blk->ops[g];
        if (strcmp(rg->type, "relu_grad") || rg->n_in != 3 || rg->n_out != 1 || strcmp(rg->in[1], a) ||
            rg->in[0][0] || !rg->in[2][0] || !rg->out[0][0] || chained[g] || fuse[g].from)
            continue;
        const char *dz = rg->out[0], *da = rg->in[2];
        const var_uses *ud = uses_find(fc->uses, p, b, dz), *uda = uses_find(fc->uses, p, b, da);
        if (!ud || ud->reads != 1 || ud->read_block != b || !uda || uda->writes > 1 ||
            (uda->writes == 1 && (uda->write_block != b || uda->write_op > g)))
            return;
        const int c = ud->read_op;
        const pardo_op *cg = &blk->ops[c];
        if (c <= g || strcmp(cg->type, "conv2d_grad") || cg->n_in != 5 || strcmp(cg->in[4], dz) || cg->in[3][0] ||
            chained[c] || fuse[c].from || !attr_is(cg, "activation", "none") || !private_temp(p, b, dz, g, c, fc))
            return;
        for (int k = 0; k < 3; k++)
            if (strcmp(cg->in[k], k < cv->n_in ? cv->in[k] : "")) return;
        if (used_between(blk, g, c, da, false)) return;
        fuse[c].relu_grad = g + 1;
        return;
    }
}

/* An op the GEMM's epilogue applies after the bias (matmul's attr activation). */
static bool is_epilogue_act(const char *type) { return strcmp(type, "relu") == 0 || strcmp(type, "gelu") == 0; }

/* Fills fuse[0..n_ops) for block b of p. */
static void plan_block(const pardo_program *p, int b, const fuse_ctx *fc, fusion *fuse) {
    const pardo_block *blk = &p->blocks[b];
    for (int i = 0; i < blk->n_ops; i++) fuse[i] = (fusion){0};
    plan_merge_updates(p, b, fc, fuse);
    for (int i = 0; i + 1 < blk->n_ops; i++) {
        const pardo_op *mm = &blk->ops[i], *add = &blk->ops[i + 1];
        if (strcmp(mm->type, "matmul_grad") == 0) {
            if (mm->n_in <= 4 && mm->n_out <= 2) plan_grad_chain(p, b, i, fc, &fuse[i]);
            continue;
        }
        /* matmul(A, B, bias) -> relu or gelu, as an imported Gemm + Relu: the activation goes into the epilogue */
        if (strcmp(mm->type, "matmul") == 0 && mm->n_in == 3 && mm->in[2][0] && mm->n_out == 1 &&
            !pardo_attr(mm, "activation") && is_epilogue_act(add->type) && add->n_in == 1 && add->n_out == 1 &&
            strcmp(add->in[0], mm->out[0]) == 0 && !pardo_op_reads(mm, add->out[0]) &&
            bias_fits_epilogue(p, b, mm, mm->in[2]) && private_temp(p, b, mm->out[0], i, i + 1, fc)) {
            fuse[i].len = 1;
            fuse[i].follow[0] = i + 1;
            fuse[i].bias = -1;
            fuse[i].act = add->type;
            i += 1;
            continue;
        }
        if (strcmp(mm->type, "matmul") || mm->n_in != 2 || mm->n_out != 1 || pardo_attr(mm, "activation") ||
            strcmp(add->type, "add") || add->n_in != 2 || add->n_out != 1)
            continue;
        const char *h = mm->out[0];
        int at = strcmp(add->in[0], h) == 0 ? 0 : strcmp(add->in[1], h) == 0 ? 1 : -1;
        if (at < 0 || strcmp(add->in[1 - at], h) == 0 || !private_temp(p, b, h, i, i + 1, fc)) continue;
        /* the bias and the result must not be the product's inputs (the fused kernel reads A and B to the end) */
        const char *bias = add->in[1 - at], *z = add->out[0];
        if (!bias[0] || pardo_op_reads(mm, z) || strcmp(bias, z) == 0 || !bias_fits_epilogue(p, b, mm, bias)) continue;
        fuse[i].len = 1;
        fuse[i].follow[0] = i + 1;
        fuse[i].bias = 1 - at;
        if (i + 2 < blk->n_ops) {
            const pardo_op *relu = &blk->ops[i + 2];
            if (is_epilogue_act(relu->type) && relu->n_in == 1 && relu->n_out == 1 &&
                strcmp(relu->in[0], z) == 0 && !pardo_op_reads(mm, relu->out[0]) &&
                strcmp(relu->out[0], bias) != 0 && private_temp(p, b, z, i + 1, i + 2, fc))
                fuse[i].len = 2, fuse[i].follow[1] = i + 2, fuse[i].act = relu->type;
        }
        i += fuse[i].len;
    }
    bool *chained = calloc((size_t)blk->n_ops + 1, sizeof(*chained));
    if (!chained) return; /* the chains above stand; only the pass-ons are not planned */
    for (int i = 0; i < blk->n_ops; i++) {
        chained[i] |= fuse[i].len > 0 || fuse[i].update || fuse[i].merge;
        for (int k = 0; k < fuse[i].len; k++) chained[fuse[i].follow[k]] = true;
    }
    for (int i = 0; i < blk->n_ops; i++) plan_pass_on(p, b, i, fc, chained, fuse);
    for (int i = 0; i < blk->n_ops; i++) plan_softmax_scale(p, b, i, fc, chained, fuse);
    for (int i = 0; i < blk->n_ops; i++) plan_conv_relu(p, b, i, fc, chained, fuse);
    free(chained);
}


/* Copies src's type, name, role, position and attrs into a new op of blk;
 * its inputs and outputs are the caller's. NULL with st filled on failure. */
static pardo_op *new_op_like(pardo_block *blk, const pardo_op *src, pardo_status *st) {
    pardo_op *op = pardo_block_add_op(blk, src->type, st);
    if (!op) return NULL;
    op->role = src->role, op->line = src->line, op->col = src->col;
    if ((src->name && !(op->name = strdup(src->name))) || (src->attrs && !(op->attrs = pardo_value_clone(src->attrs)))) {
        pardo_errorf(st, PARDO_ENOMEM, "out of memory fusing ops");
        return NULL;
    }
    return op;
}

static int add_names(pardo_op *op, bool out, const char *const *names, int n, pardo_status *st) {
    for (int k = 0; k < n; k++)
        if ((out ? pardo_op_add_output(op, names[k], st) : pardo_op_add_input(op, names[k], st)) != PARDO_OK)
            return st->code;
    return PARDO_OK;
}

/* matmul(A, B) with the add's bias [and relu]: Y is the chain's last output. */
static int emit_matmul(pardo_block *to, const pardo_block *blk, int i, const fusion *f, pardo_status *st) {
    const pardo_op *mm = &blk->ops[i], *add = &blk->ops[f->follow[0]], *last = &blk->ops[f->follow[f->len - 1]];
    pardo_op *op = new_op_like(to, mm, st);
    if (!op) return st->code;
    const char *in[3] = {mm->in[0], mm->in[1], f->bias < 0 ? mm->in[2] : add->in[f->bias]};
    if (add_names(op, false, in, 3, st) != PARDO_OK ||
        add_names(op, true, (const char *const *)last->out, 1, st) != PARDO_OK)
        return st->code;
    /* the activation is the chain's last op: matmul -> add -> relu / gelu, or matmul(bias) -> relu / gelu */
    return f->act ? pardo_op_set_attr(op, "activation", pardo_value_new_string(f->act), st) : PARDO_OK;
}

/* matmul_grad with relu_grad's mask [and add_grad's bias gradient]: dA goes
 * where the chain's last op put it. */
static int emit_matmul_grad(pardo_block *to, const pardo_block *blk, int i, const fusion *f, pardo_status *st) {
    const pardo_op *g = &blk->ops[i], *relu = &blk->ops[f->follow[0]];
    const pardo_op *add = f->len == 2 ? &blk->ops[f->follow[1]] : NULL;
    pardo_op *op = new_op_like(to, g, st);
    if (!op) return st->code;
    const char *in[6] = {"", "", "", "", relu->in[1], add ? add->in[f->bias] : ""};
    for (int k = 0; k < g->n_in && k < 4; k++) in[k] = g->in[k];
    const int fill = 1 - f->bias;
    const char *out[3] = {add ? add->out[fill] : relu->out[0], g->n_out > 1 ? g->out[1] : "",
                          add ? add->out[f->bias] : ""};
    if (add_names(op, false, in, add ? 6 : 5, st) != PARDO_OK || add_names(op, true, out, add ? 3 : 2, st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

/* The update with the merge's tensor_array as its gradient: inputs as the
 * update's, grad replaced, weight_by last (the merge's input 1, or its
 * attr), attr grad_merge the merge's mode. */
static int emit_update(pardo_block *to, const pardo_block *blk, int j, const fusion *f, pardo_status *st) {
    const pardo_op *u = &blk->ops[j], *m = &blk->ops[f->merge - 1];
    pardo_op *op = new_op_like(to, u, st);
    if (!op) return st->code;
    const pardo_value *wb_attr = m->attrs ? pardo_value_get(m->attrs, "weight_by") : NULL;
    const char *wb = m->n_in > 1 && m->in[1][0] ? m->in[1]
                     : wb_attr && wb_attr->kind == PARDO_V_STRING ? wb_attr->string
                                                                  : "";
    for (int k = 0; k < u->def->n_inputs - 1; k++)
        if (pardo_op_add_input(op, k == 1 ? m->in[0] : k < u->n_in ? u->in[k] : "", st) != PARDO_OK) return st->code;
    if ((wb[0] && pardo_op_add_input(op, wb, st) != PARDO_OK) ||
        add_names(op, true, (const char *const *)u->out, u->n_out, st) != PARDO_OK)
        return st->code;
    const pardo_value *mode = pardo_value_get(m->attrs, "mode");
    return pardo_op_set_attr(op, "grad_merge", pardo_value_new_string(mode->string), st);
}

/* Copies op i of blk with a pass-on's changes (fusion.pass_on, .from):
 * the dropped copy left out of its outputs, or read as the dC it copied. */
static int emit_passed_on(pardo_block *to, const pardo_block *blk, int i, const fusion *f, pardo_status *st) {
    const pardo_op *src = &blk->ops[i];
    pardo_op *op = new_op_like(to, src, st);
    if (!op) return st->code;
    for (int k = 0; k < src->n_in; k++) {
        const char *name = f->from && strcmp(src->in[k], f->from) == 0 ? f->to : src->in[k];
        if (pardo_op_add_input(op, name, st) != PARDO_OK) return st->code;
    }
    for (int k = 0; k < src->n_out; k++)
        if (pardo_op_add_output(op, f->pass_on == k + 1 ? "" : src->out[k], st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

/* softmax (softmax_grad) at index i with the scale op before it taken in:
 * it reads the scale's input, its attr scale is multiplied by the scale's,
 * and a softmax_grad writes the scale_grad's dX. */
static int emit_softmax_scaled(pardo_block *to, const pardo_block *blk, int i, const fusion *f, pardo_status *st) {
    const pardo_op *src = &blk->ops[i], *sc = &blk->ops[f->scaled - 1];
    double c = 1, own = 1;
    (void)attr_number(sc, "scale", 1.0, &c);
    (void)attr_number(src, "scale", 1.0, &own);
    pardo_op *op = new_op_like(to, src, st);
    if (!op) return st->code;
    if (pardo_op_set_attr(op, "scale", pardo_value_new_number(c * own), st) != PARDO_OK) return st->code;
    for (int k = 0; k < src->n_in; k++)
        if (pardo_op_add_input(op, strcmp(src->in[k], sc->out[0]) == 0 ? sc->in[0] : src->in[k], st) != PARDO_OK)
            return st->code;
    const char *out = f->scale_grad ? blk->ops[f->scale_grad - 1].out[0] : src->out[0];
    return pardo_op_add_output(op, out, st) == PARDO_OK ? PARDO_OK : st->code;
}

/* Copies op i of blk with attr activation "relu": a conv2d writing its
 * relu's output, or a conv2d_grad reading the relu_grad's Y and dY. */
static int emit_conv_relu(pardo_block *to, const pardo_block *blk, int i, const fusion *f, pardo_status *st) {
    const pardo_op *src = &blk->ops[i];
    pardo_op *op = new_op_like(to, src, st);
    if (!op) return st->code;
    int rc = pardo_op_set_attr(op, "activation", pardo_value_new_string("relu"), st);
    const pardo_op *rg = f->relu_grad ? &blk->ops[f->relu_grad - 1] : NULL;
    for (int k = 0; rc == PARDO_OK && k < src->n_in; k++)
        rc = pardo_op_add_input(op, rg && k == 3 ? rg->in[1] : rg && k == 4 ? rg->in[2] : src->in[k], st);
    for (int k = 0; rc == PARDO_OK && k < src->n_out; k++)
        rc = pardo_op_add_output(op, f->relu ? blk->ops[f->relu - 1].out[0] : src->out[k], st);
    return rc;
}

/* Rewrites block b's chains; *n_fused counts the ops taken into others and
 * the add_grads whose copy is passed on. */
static int fuse_block(pardo_program *p, int b, const fuse_ctx *fc, int *n_fused, pardo_status *st) {
    pardo_block *blk = &p->blocks[b];
    const int n = blk->n_ops;
    fusion *fuse = calloc((size_t)n + 1, sizeof(*fuse));
    bool *gone = calloc((size_t)n + 1, sizeof(*gone));
    pardo_block to = {.parent = blk->parent};
    int rc = PARDO_OK;
    if (!fuse || !gone) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory fusing block %d", b);
        goto done;
    }
    plan_block(p, b, fc, fuse);
    int taken = 0;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < fuse[i].len; k++) gone[fuse[i].follow[k]] = true;
        if (fuse[i].update) gone[i] = true;
        if (fuse[i].scaled) gone[fuse[i].scaled - 1] = true;
        if (fuse[i].scale_grad) gone[fuse[i].scale_grad - 1] = true;
        if (fuse[i].relu) gone[fuse[i].relu - 1] = true;
        if (fuse[i].relu_grad) gone[fuse[i].relu_grad - 1] = true;
    }
    int passed_on = 0;
    for (int i = 0; i < n; i++) taken += gone[i], passed_on += fuse[i].pass_on > 0;
    if (taken == 0 && passed_on == 0) goto done;
    for (int i = 0; rc == PARDO_OK && i < n; i++) {
        const pardo_op *op = &blk->ops[i];
        if (gone[i]) continue;
        if (fuse[i].len) rc = strcmp(op->type, "matmul") == 0 ? emit_matmul(&to, blk, i, &fuse[i], st)
                                                               : emit_matmul_grad(&to, blk, i, &fuse[i], st);
        else if (fuse[i].merge) rc = emit_update(&to, blk, i, &fuse[i], st);
        else if (fuse[i].pass_on || fuse[i].from) rc = emit_passed_on(&to, blk, i, &fuse[i], st);
        else if (fuse[i].scaled) rc = emit_softmax_scaled(&to, blk, i, &fuse[i], st);
        else if (fuse[i].relu || fuse[i].relu_grad) rc = emit_conv_relu(&to, blk, i, &fuse[i], st);
        else rc = pardo_block_add_op_copy(&to, op, st) ? PARDO_OK : st->code;
    }
    if (rc != PARDO_OK) goto done;
    /* the new ops take the block's place; the old ones are freed with `to` */
    pardo_op *ops = blk->ops;
    const int cap = blk->cap_ops;
    blk->ops = to.ops, blk->n_ops = to.n_ops, blk->cap_ops = to.cap_ops;
    to.ops = ops, to.n_ops = n, to.cap_ops = cap;
    *n_fused += taken + passed_on;
done:
    pardo_block_clear(&to);
    free(fuse);
    free(gone);
    return rc;
}

/* Drops the inferred temps that no op names any more (the chains'
 * intermediates: no input, output or attr of any op means them); declared
 * vars stay. Which ones is decided for every block first, from one count of
 * the uses, then their names are freed. */
static int drop_dead_temps(pardo_program *p, pardo_status *st) {
    use_table t;
    int rc = use_table_build(&t, p, st);
    bool *dead = NULL;
    int total = 0;
    for (int b = 0; b < p->n_blocks; b++) total += p->blocks[b].n_vars;
    if (rc == PARDO_OK && !(dead = calloc((size_t)total + 1, sizeof(*dead))))
        rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory dropping the fused chains' temps");
    for (int b = 0, at = 0; rc == PARDO_OK && b < p->n_blocks; at += p->blocks[b].n_vars, b++)
        for (int r = 0; r < p->blocks[b].n_vars; r++) {
            const pardo_graph_var *v = &p->blocks[b].vars[r];
            const var_uses *u = uses_find(&t, p, b, v->name);
            dead[at + r] = !v->declared && v->role == PARDO_VAR_TEMP && !v->value &&
                           !(u && (u->reads || u->writes || u->in_attr));
        }
    use_table_free(&t);
    for (int b = 0, at = 0; rc == PARDO_OK && b < p->n_blocks; b++) {
        pardo_block *blk = &p->blocks[b];
        int w = 0;
        for (int r = 0; r < blk->n_vars; r++) {
            if (dead[at + r]) {
                free(blk->vars[r].name);
                continue;
            }
            blk->vars[w++] = blk->vars[r];
        }
        at += blk->n_vars;
        if (w != blk->n_vars) pardo_block_vars_changed(blk);
        blk->n_vars = w;
    }
    free(dead);
    return rc;
}

int pardo_pass_fuse(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    int fused = 0, rc;
    use_table uses;
    if ((rc = use_table_build(&uses, p, st)) != PARDO_OK) {
        use_table_free(&uses);
        return rc;
    }
    fuse_ctx fc = {.keep = opt->keep, .n_keep = opt->n_keep, .uses = &uses};
    for (int b = 0; rc == PARDO_OK && b < p->n_blocks; b++) rc = fuse_block(p, b, &fc, &fused, st);
    use_table_free(&uses);
    if (rc != PARDO_OK || fused == 0) return rc;
    if ((rc = drop_dead_temps(p, st)) != PARDO_OK) return rc;
    return pardo_pass_check(p, opt, st);
}
