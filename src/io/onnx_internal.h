/* onnx_internal.h - what the ONNX importer's files share: the import
 * context (a table of the model's values: each a pardo var, a constant
 * known at load, or a shape vector with run-time dims), the helpers node
 * mappings emit pardo ops with, and the tensor conversion. Not installed;
 * includes the protobuf-c code generated from Debian's onnx.proto. */
#ifndef PARDO_ONNX_INTERNAL_H
#define PARDO_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/tensor_list.h"
#include "onnx.pb-c.h"

/* One entry of a shape vector: a number, or dim `dim` of pardo var `var`
 * known only at run time (the batch of a dynamic axis). */
typedef struct onnx_dim {
    int64_t value;   // when var is NULL
    const char *var; // borrowed from the program's var names; NULL: value
    int dim;
} onnx_dim;

/* A value of the model, by ONNX name. At most one of konst / sym is set
 * before it becomes a var; `var` is set once an op reads or writes it at
 * run time. */
typedef struct onnx_value {
    char *name;          // ONNX name; owned
    char *var;           // the pardo var holding it at run time, or NULL; owned
    pardo_tensor *konst; // known at load (initializer, Constant, folded); one reference; or NULL
    bool initializer;    // konst came from the graph's initializers (a float one becomes a param)
    onnx_dim *sym;       // an int64 1-D vector with run-time entries; owned; or NULL
    int n_sym;
    bool sym_scalar;     // sym is a 0-d scalar (one entry), as Gather of one index gives
    int block;           // the block of the graph (0) or subgraph defining it, where its ops go
} onnx_value;

typedef struct onnx_ctx {
    const char *path;        // the model file, for messages
    char *dir;               // its folder, for external data; owned
    int64_t opset;           // of the default domain
    pardo_program *p;        // being built; owned until handed out
    int block;               // the block being written: 0, or a subgraph's (onnx_subgraph); constants,
                             // params and feeds always go to block 0
    pardo_tensor_list *weights; // params' tensors
    onnx_value **vals;       // n_vals, each its own allocation (pointers to them stay valid); owned
    int n_vals, cap_vals;
    int *slot;               // hash of vals by name: cap_slot slots, -1 empty; owned
    int cap_slot;
    bool types_dirty;        // ops were added since shapes were last inferred
    int *inferred_ops;       // per block (n_inferred): its ops whose outputs' types are known; owned
    int n_inferred;
    int64_t fresh;           // counter for fresh var names
    /* the node being mapped, for messages */
    const Onnx__NodeProto *node;
    int node_index;
} onnx_ctx;

/* A node mapping: emits the pardo ops (or folds) for ctx->node. */
typedef int (*onnx_map_fn)(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st);

/* The mapping for op_type at the context's opset, or NULL (onnx_ops.c). */
onnx_map_fn onnx_find_mapping(const char *op_type);

/* The op types with a mapping, as "A, B, C" (static storage). */
const char *onnx_supported_list(void);

/* One entry of a mapping table: an ONNX op type and its mapping (NULL: it
 * always folds). onnx_ops.c has the table of op types that map to one
 * pardo op (with what their attrs need around it); onnx_compose.c this one,
 * of op types pardo runs as several of its own ops. Sorted by op_type. */
typedef struct onnx_mapping {
    const char *op_type;
    onnx_map_fn fn;
} onnx_mapping;

extern const onnx_mapping onnx_compose_table[];
extern const size_t onnx_compose_count;

/* Clip whose bounds are known only at run time, and BatchNormalization
 * whose statistics or scale are: the composite forms (onnx_compose.c) that
 * onnx_ops.c's mappings hand those nodes to. PARDO_OK or the error. */
/* NegativeLogLikelihoodLoss's nll_loss of var `input` (borrowed) against
 * node n's inputs 1 (target) and 2 (weight, optional) into n's output 0,
 * with n's reduction and ignore_index; PARDO_OK or st's code. */
int onnx_emit_nll(onnx_ctx *c, const Onnx__NodeProto *n, const char *input, pardo_status *st);
int onnx_clip_at_run_time(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st);
int onnx_batch_norm_at_run_time(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st);
/* BatchNormalization with training_mode 1 (opset 14 on): X normalised with its own batch's statistics and the
 * running ones (outputs 1 and 2, where named) moved towards them by momentum. */
int onnx_batch_norm_training(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st);

/* ---- helpers the mappings share (onnx_ops.c) ---- */

/* At most this many ints read from an attr or a constant input. */
#define ONNX_MAX_INTS 64

/* The NULL-terminated empty attr list, for onnx_check_attrs. */
extern const char *const onnx_no_attrs[];

/* The var of input i, which must be present (else PARDO_EPARSE naming it):
 * borrowed; NULL with st set on error. */
const char *onnx_in_var(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st);
/* The var of optional input i, "" when absent; NULL with st set on error. */
const char *onnx_opt_var(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st);
/* The int64 values of constant input i into out (at most ONNX_MAX_INTS, *count of them); false when
 * absent or not a constant known at load. */
bool onnx_const_input_ints(onnx_ctx *c, const Onnx__NodeProto *n, int i, int64_t *out, int *count);
/* The value of constant one-element input i as a double; false when absent or not constant. */
bool onnx_const_input_scalar(onnx_ctx *c, const Onnx__NodeProto *n, int i, double *out);
/* Emits op `type` on the n_in vars `in` into node output 0; the op (for attrs) or NULL with st set. */
pardo_op *onnx_emit1(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, const char *const *in, int n_in,
                     pardo_status *st);
/* A scalar constant var of dtype dt holding v (borrowed name; NULL with st set). */
const char *onnx_scalar_const(onnx_ctx *c, pardo_dtype dt, double v, pardo_status *st);
/* Emits op `type` on a (and b when not NULL) into a fresh temp, or into node output 0 when `last`; the
 * output's var (borrowed) or NULL with st set. */
const char *onnx_step(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, const char *a, const char *b,
                      bool last, pardo_status *st);
/* Input 0's var into *x and its inferred type into *t; PARDO_OK or the error. */
int onnx_input0(onnx_ctx *c, const Onnx__NodeProto *n, const char **x, pardo_type *t, pardo_status *st);

/* ---- N-d pool windows (onnx_ops.c; MaxPool / AveragePool there, LpPool in onnx_compose.c) ---- */

/* A pool's window over its nk spatial dims: pads begins then ends. */
typedef struct onnx_pool_geom {
    int nk;
    int64_t kernel[3], strides[3], dilations[3], pads[6];
} onnx_pool_geom;

/* The window of pool node n (attrs kernel_shape, strides, dilations, pads,
 * auto_pad, ceil_mode) over input x into *g, auto_pad SAME_* and ceil_mode
 * folded into the pads (they need static spatial dims); PARDO_OK or the error. */
int onnx_pool_geometry(onnx_ctx *c, const Onnx__NodeProto *n, const char *x, onnx_pool_geom *g, pardo_status *st);
/* x zero-padded by g's pads (emitted; g's pads become 0), or x itself without pads; NULL with st set. */
const char *onnx_pool_zero_pad(onnx_ctx *c, const char *x, onnx_pool_geom *g, pardo_status *st);
/* Emits max_pool_nd / avg_pool_nd (`type`) of x with g's window into out; the op or NULL with st set. */
pardo_op *onnx_emit_pool_nd(onnx_ctx *c, const char *type, const char *x, const char *const *out, int n_out,
                            const onnx_pool_geom *g, pardo_status *st);

/* ---- subgraphs (onnx_import.c; the If, Loop and Scan mappings of onnx_control.c) ---- */

/* Imports subgraph g (a GRAPH attr of node n, named attr) into a new block
 * whose parent is the current block: g's inputs become that block's vars,
 * of the n_in types in_types (the node's mapping says what it binds them
 * to; n_in must be g's input count), its initializers constants, its nodes
 * are mapped there (names of the enclosing graphs resolve as ONNX scopes
 * them), its outputs get vars (named as the values are). The block's index
 * into *block. PARDO_OK, or the error naming the subgraph's node. */
int onnx_subgraph(onnx_ctx *c, const Onnx__NodeProto *n, const char *attr, const pardo_type *in_types, int n_in,
                  int *block, pardo_status *st);

/* The mappings of the control-flow op types (onnx_control.c). */
int onnx_map_if(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st);
int onnx_map_loop(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st);
int onnx_map_scan(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st);

/* ---- errors naming the node (onnx_import.c) ---- */

/* PARDO_ENOTSUP / PARDO_EPARSE with "PATH: node 'NAME' (index I, OP_TYPE, opset O): " before the message. */
int onnx_unsupported(onnx_ctx *c, pardo_status *st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int onnx_bad(onnx_ctx *c, pardo_status *st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- values ---- */

/* The value named name (NULL when the model has none yet). */
onnx_value *onnx_value_find(onnx_ctx *c, const char *name);

/* Input i of node n: its value, or NULL when absent (past the end or ""). */
onnx_value *onnx_input(onnx_ctx *c, const Onnx__NodeProto *n, int i);

/* Sets output i of node n to a constant (takes the reference to t). */
int onnx_set_const(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_tensor *t, pardo_status *st);

/* Sets output i of node n to a shape vector (copies dims); nd < 0: a
 * scalar, the one entry dims[0]. */
int onnx_set_sym(onnx_ctx *c, const Onnx__NodeProto *n, int i, const onnx_dim *dims, int nd, pardo_status *st);

/* The pardo var holding value v at run time, made on first use: a float
 * initializer becomes a param (its tensor into weights), another constant
 * a var with a `value`, a shape vector the ops that compute it. Borrowed
 * name; NULL with st set on error. */
const char *onnx_var_of(onnx_ctx *c, onnx_value *v, pardo_status *st);

/* A var "onnx::HINT_K" holding t (takes the reference): a param (its
 * tensor into weights) when `param` and t is float, else a constant var.
 * Borrowed name; NULL with st set on error. */
const char *onnx_const_var(onnx_ctx *c, const char *hint, pardo_tensor *t, bool param, pardo_status *st);
/* A state var (role state, its tensor among the model's weights) holding
 * constant v's tensor: a BatchNormalization's running statistic, which
 * batch_norm updates in place when training. Named as v where v is an
 * initializer no var was made of yet. The var's name (borrowed), or NULL. */
const char *onnx_state_var(onnx_ctx *c, onnx_value *v, pardo_status *st);

/* The var for output i of node n (ONNX's name; created as a value). */
const char *onnx_out_var(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st);

/* A fresh var name "onnx::T_K" for a temp the mapping needs. Borrowed from the program. */
const char *onnx_temp(onnx_ctx *c, const char *hint, pardo_status *st);

/* Appends op `type` reading the n_in var names `in` ("" absent) and writing
 * n_out names; named after the node (suffixed when a node makes several).
 * The op is returned for attrs; NULL on error. */
pardo_op *onnx_emit(onnx_ctx *c, const char *type, const char *const *in, int n_in, const char *const *out,
                    int n_out, pardo_status *st);

/* Attr setters on an emitted op (PARDO_ENOMEM on failure). */
int onnx_set_int(pardo_op *op, const char *key, int64_t v, pardo_status *st);
int onnx_set_float(pardo_op *op, const char *key, double v, pardo_status *st);
int onnx_set_bool(pardo_op *op, const char *key, bool v, pardo_status *st);
int onnx_set_string(pardo_op *op, const char *key, const char *v, pardo_status *st);
int onnx_set_ints(pardo_op *op, const char *key, const int64_t *v, int n, pardo_status *st);

/* The inferred type of var `var` (shape inference over the ops so far).
 * PARDO_OK and *t filled, or the pass's error. */
int onnx_type_of(onnx_ctx *c, const char *var, pardo_type *t, pardo_status *st);

/* ---- attrs of the node ---- */

const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name);
int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt);
double onnx_attr_float(const Onnx__NodeProto *n, const char *name, double dflt);
/* A string attr copied into buf (n bytes), or dflt. */
const char *onnx_attr_string(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf, size_t bn);
/* An ints attr: *count elements (borrowed pointer), or NULL/0 when absent. */
const int64_t *onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int *count);

/* Refuses any attr of n not in the NULL-terminated list `known`. */
int onnx_check_attrs(onnx_ctx *c, const Onnx__NodeProto *n, const char *const *known, pardo_status *st);

/* ---- tensors (onnx_tensor.c) ---- */

/* pardo's dtype for an ONNX TensorProto data type, or PARDO_DTYPE_UNKNOWN. */
pardo_dtype onnx_dtype(int32_t data_type);

/* ONNX's name of a TensorProto data type ("uint8", ...). */
const char *onnx_dtype_name(int32_t data_type);

/* A new CPU tensor with t's dims and data (raw_data little-endian, the typed
 * fields, or external data in a file under dir). `what` names the tensor in
 * messages ("PATH: initializer 'w'"). PARDO_EPARSE / PARDO_ENOTSUP. */
int onnx_tensor_to_pardo(const Onnx__TensorProto *t, const char *dir, const char *what, pardo_tensor **out,
                         pardo_status *st);

/* The elements of an integer (int32 / int64) or float constant as int64. */
bool onnx_const_ints(const pardo_tensor *t, int64_t *out, int max, int *n);

/* ---- folding (onnx_fold.c) ---- */

/* Folds node n at load when its inputs are constants or shape vectors and
 * its op is one of the shape computations (Shape, Size, Gather, Unsqueeze,
 * Squeeze, Concat, Cast, Slice, Add, Sub, Mul, Div, Neg, Equal, Where,
 * ConstantOfShape, Range, Reshape, Identity, Constant). *folded says
 * whether it did. */
int onnx_try_fold(onnx_ctx *c, const Onnx__NodeProto *n, bool *folded, pardo_status *st);

#endif
