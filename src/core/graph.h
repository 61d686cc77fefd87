/* graph.h - the Program IR: blocks of vars and ops, as SPEC.md section 1
 * describes the graph file. graph_json.c loads and saves it; transpiler/
 * passes check and rewrite it; executor.c runs it. A program owns everything
 * under it (strings, vars, ops, attrs). */
#ifndef PARDO_GRAPH_H
#define PARDO_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"
#include "core/value.h"

typedef enum pardo_var_kind {
    PARDO_VAR_TENSOR = 0,
    PARDO_VAR_TENSOR_ARRAY,
} pardo_var_kind;

typedef enum pardo_var_role {
    PARDO_VAR_TEMP = 0,
    PARDO_VAR_FEED,
    PARDO_VAR_PARAM,
    PARDO_VAR_STATE,
} pardo_var_role;

typedef enum pardo_op_role {
    PARDO_OP_ROLE_NONE = 0, /* not given in the file */
    PARDO_OP_FORWARD,
    PARDO_OP_LOSS,
    PARDO_OP_BACKWARD,
    PARDO_OP_OPTIMIZE,
} pardo_op_role;

typedef enum pardo_fill {
    PARDO_FILL_NONE = 0,
    PARDO_FILL_CONSTANT,        /* value */
    PARDO_FILL_UNIFORM,         /* low, high */
    PARDO_FILL_NORMAL,          /* mean, std */
    PARDO_FILL_XAVIER_UNIFORM,  /* U(-a, a), a = sqrt(6 / (fan_in + fan_out)) */
    PARDO_FILL_KAIMING_UNIFORM, /* U(-b, b), b = sqrt(6 / fan_in) */
} pardo_fill;

/* How a param or state var starts when no checkpoint gives it. */
typedef struct pardo_init {
    pardo_fill fill;
    double value;     // constant
    double low, high; // uniform (defaults 0, 1)
    double mean, std; // normal (defaults 0, 1)
    uint64_t seed;    // random fills (default 0)
} pardo_init;

typedef struct pardo_graph_var {
    char *name;            // owned
    pardo_type type;       // declared, or inferred for undeclared temps
    bool declared;         // listed under "vars" (saved); false: inferred temp
    pardo_var_kind kind;
    pardo_var_role role;
    pardo_init init;       // init.fill == PARDO_FILL_NONE when absent
    double *value;         // "value", flattened row-major, owned; NULL if absent
    int64_t n_value;       // elements in value
    int line, col;         // position of the var in the file; 0 if built in code
} pardo_graph_var;

typedef struct pardo_op {
    char *type;            // op type, e.g. "matmul"; owned
    char *name;            // optional name, NULL if absent; owned
    char **in;             // n_in var names; "" is an absent optional input; owned
    int n_in;
    char **out;            // n_out var names; owned
    int n_out;
    pardo_value *attrs;    // object, or NULL when the op has none; owned
    pardo_op_role role;
    int line, col;         // position of the op in the file; 0 if built in code; an ONNX node: index + 1, col -1
    const struct pardo_op_def *def; // registry entry, set by pardo_program_resolve_ops
} pardo_op;

typedef struct pardo_block {
    int parent;            // index of the parent block; -1 for block 0
    pardo_graph_var *vars;       // n_vars, owned
    int n_vars, cap_vars;
    pardo_op *ops;         // n_ops, owned
    int n_ops, cap_ops;
    int line, col;         // position in the file
    /* name -> var index of vars[0..n_indexed), a cache pardo_block_find_var
     * builds on the first lookup in a block of PARDO_BLOCK_INDEX_MIN vars or
     * more and extends as vars are appended; owned, NULL until then. Code
     * that removes, reorders or renames vars in place calls
     * pardo_block_vars_changed. */
    struct pardo_name_index *var_index;
    int n_indexed;
} pardo_block;

/* Blocks with fewer vars are searched by a plain scan, without an index. */
#define PARDO_BLOCK_INDEX_MIN 8

typedef struct pardo_program {
    int version;           // "pardo": 1
    char *name;            // optional; owned
    char *path;            // file it came from, for messages; owned; may be NULL
    pardo_value *doc;      // top-level "doc", kept for round trips; owned; may be NULL
    pardo_block *blocks;   // n_blocks, owned; block 0 is main
    int n_blocks;
} pardo_program;

/* A new empty program (version 1, no blocks); NULL when out of memory.
 * Freed with pardo_program_free. */
pardo_program *pardo_program_new(void);

/* Frees the program and everything it owns. NULL is a no-op. */
void pardo_program_free(pardo_program *p);

/* Frees what block b owns (vars, ops) and empties it; b itself stays. */
void pardo_block_clear(pardo_block *b);

/* Deep copy; NULL when out of memory. */
pardo_program *pardo_program_clone(const pardo_program *p);

/* Appends an empty block with the given parent (-1 for none); returns its
 * index, or a negative code with st filled. */
int pardo_program_add_block(pardo_program *p, int parent, pardo_status *st);

/* Appends a var named `name` (copied) to block b and returns it zeroed but
 * for name; NULL and st filled when out of memory. Borrowed: valid until the
 * block's vars next grow. */
pardo_graph_var *pardo_block_add_var(pardo_block *b, const char *name, pardo_status *st);

/* Appends an op of type `type` (copied) to block b, with no inputs, outputs
 * or attrs; NULL and st when out of memory. Borrowed like add_var. */
pardo_op *pardo_block_add_op(pardo_block *b, const char *type, pardo_status *st);

/* Appends a deep copy of src (type, name, inputs, outputs, attrs, role,
 * position; def left NULL) to block b; NULL and st on failure. Borrowed like
 * add_op. */
pardo_op *pardo_block_add_op_copy(pardo_block *b, const pardo_op *src, pardo_status *st);

/* Appends a deep copy of var src to block b; NULL and st on failure. */
pardo_graph_var *pardo_block_add_var_copy(pardo_block *b, const pardo_graph_var *src, pardo_status *st);

/* Appends a copy of name to op's inputs or outputs. */
int pardo_op_add_input(pardo_op *op, const char *name, pardo_status *st);
int pardo_op_add_output(pardo_op *op, const char *name, pardo_status *st);

/* The var named `name` in block b itself (the first such when the block
 * names two), or NULL. Borrowed. Through the block's var index (built or
 * extended here, which is why a const block changes: not thread-safe while
 * vars were added since the last lookup; lookups alone are, once
 * pardo_program_index_vars ran); a plain scan in a small block or when the
 * index cannot be allocated. */
pardo_graph_var *pardo_block_find_var(const pardo_block *b, const char *name);

/* The var named `name` seen from block `block`: its own vars, then its
 * ancestors'. NULL when none. *owner (may be NULL) gets the block index.
 * Thread-safety as pardo_block_find_var. */
pardo_graph_var *pardo_program_lookup_var(const pardo_program *p, int block, const char *name, int *owner);

/* Tells block b that its vars were removed, reordered or renamed in place
 * (not through pardo_block_add_var): drops its var index, rebuilt by the
 * next lookup. Not thread-safe. */
void pardo_block_vars_changed(pardo_block *b);

/* Brings every block's var index up to date, so that later lookups only
 * read (several threads may then look up at once, as long as none adds a
 * var). Without memory the blocks stay scanned. Not thread-safe. */
void pardo_program_index_vars(const pardo_program *p);

/* How many of op's inputs (outputs) are the var `name`; "" (a left-out
 * slot) never counts. */
int pardo_op_reads(const pardo_op *op, const char *name);
int pardo_op_writes(const pardo_op *op, const char *name);

/* The index of the last op of b that reads, writes or (in an attr) names
 * the var `name`; -1 when none does. */
int pardo_block_last_use(const pardo_block *b, const char *name);

/* Fills ix (borrowed keys: the block's op strings, valid while its ops stay
 * unchanged) with, for every name, what pardo_block_last_use would return
 * for it; one pass over b's ops. A name missing from ix has no use (-1).
 * ix must be empty or hold only earlier such uses (of the same block); the
 * caller frees it. PARDO_ENOMEM with st filled. Reads b only. */
struct pardo_name_index;
int pardo_block_last_uses(const pardo_block *b, struct pardo_name_index *ix, pardo_status *st);

/* True when a (run before b) and b share a var one of them writes: they
 * must keep their order. */
bool pardo_ops_conflict(const pardo_op *a, const pardo_op *b);

/* True when op (of block `block`) writes a var of role param or state. */
bool pardo_op_writes_state(const pardo_program *p, int block, const pardo_op *op);

/* An op's role, with the multi-CPU transpiler's rule for ops the file gave
 * none: writes params or state vars and nothing else (an update): optimize;
 * reads or writes a var named "...@GRAD...": backward; else forward. */
pardo_op_role pardo_op_effective_role(const pardo_program *p, int block, const pardo_op *op);

/* True when `name` is one of the n names (NULL entries never match). */
bool pardo_name_listed(const char *const *names, int n, const char *name);

/* Writes "path:line:col: block B, op I 'name' (type)" for messages into buf
 * (path and position left out when unknown); returns buf. */
char *pardo_op_where(const pardo_program *p, int block, int index, char *buf, size_t n);

/* Writes "path:line:col: block B, var 'name'" for messages; returns buf. */
char *pardo_var_where(const pardo_program *p, int block, const pardo_graph_var *v, char *buf, size_t n);

/* Names of enums as the graph file spells them, and back. The parsers return
 * false for an unknown word. */
const char *pardo_var_role_name(pardo_var_role r);
bool pardo_var_role_parse(const char *s, pardo_var_role *out);
const char *pardo_var_kind_name(pardo_var_kind k);
bool pardo_var_kind_parse(const char *s, pardo_var_kind *out);
const char *pardo_op_role_name(pardo_op_role r);
bool pardo_op_role_parse(const char *s, pardo_op_role *out);
const char *pardo_fill_name(pardo_fill f);
bool pardo_fill_parse(const char *s, pardo_fill *out);

/* Op attribute accessors. Each reads attr `name` of op, or gives `dflt` when
 * it is absent; a present attr of the wrong type is PARDO_EINVAL with a
 * message naming the attr and what was expected. */
int pardo_attr_int(const pardo_op *op, const char *name, int64_t dflt, int64_t *out, pardo_status *st);
int pardo_attr_float(const pardo_op *op, const char *name, double dflt, double *out, pardo_status *st);
int pardo_attr_bool(const pardo_op *op, const char *name, bool dflt, bool *out, pardo_status *st);
/* *out borrows from the op (or is dflt). */
int pardo_attr_string(const pardo_op *op, const char *name, const char *dflt, const char **out, pardo_status *st);
/* Integer list: up to max values into out, count in *n; absent: *n = -1. */
int pardo_attr_ints(const pardo_op *op, const char *name, int64_t *out, int max, int *n, pardo_status *st);
/* Sets attr `key` of op to val, taking ownership of val (freed here, also
 * on failure; NULL val is PARDO_ENOMEM, so constructors can be passed in
 * directly). Creates the attrs object when the op has none. */
int pardo_op_set_attr(pardo_op *op, const char *key, pardo_value *val, pardo_status *st);

/* Raw attr value or NULL; borrowed. */
const pardo_value *pardo_attr(const pardo_op *op, const char *name);

#endif
