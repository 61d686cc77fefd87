/* cli_check.c - `pardo check GRAPH`: validate, then print ops, vars with
 * their (inferred) types, and the parameter count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/value_json.h"

static const char check_help[] =
    "usage: pardo check GRAPH [--fused]\n"
    "\n"
    "Loads GRAPH, checks it (keys, op types, attrs, vars, shapes and dtypes) and prints\n"
    "each block's vars with their inferred types, its ops, and the parameter count.\n"
    "  --fused  print the graph as pardo run and pardo train run it on the CPU: after the fusion\n"
    "           pass (matmul with its bias and relu, matmul_grad with relu_grad's mask and the bias\n"
    "           gradient, updates merging their gradient's parts), each op with its attrs\n"
    "Exit status 2 with a message naming the file, line, block, op and var on the first error.\n";

static void print_type(const pardo_graph_var *v) {
    char shape[160];
    printf("%-8s %s", pardo_dtype_name(v->type.dtype), pardo_shape_str(v->type.ndim, v->type.shape, shape, sizeof shape));
}

static void print_var(const pardo_graph_var *v) {
    printf("    %-20s %-6s ", v->name, pardo_var_role_name(v->role));
    print_type(v);
    if (v->kind == PARDO_VAR_TENSOR_ARRAY) printf(" tensor_array");
    if (!v->declared) printf(" (inferred)");
    const pardo_init *in = &v->init;
    switch (in->fill) {
    case PARDO_FILL_NONE: break;
    case PARDO_FILL_CONSTANT: printf(" init constant %g", in->value); break;
    case PARDO_FILL_UNIFORM: printf(" init uniform [%g, %g) seed %llu", in->low, in->high, (unsigned long long)in->seed); break;
    case PARDO_FILL_NORMAL: printf(" init normal mean %g std %g seed %llu", in->mean, in->std, (unsigned long long)in->seed); break;
    case PARDO_FILL_XAVIER_UNIFORM:
    case PARDO_FILL_KAIMING_UNIFORM: printf(" init %s seed %llu", pardo_fill_name(in->fill), (unsigned long long)in->seed); break;
    }
    if (v->value) printf(" value (%lld elements)", (long long)v->n_value);
    printf("\n");
}

static void print_names(char **names, int n) {
    for (int i = 0; i < n; i++) printf("%s%s", i ? ", " : "", names[i][0] ? names[i] : "\"\"");
}

static void print_op(const pardo_program *p, int b, int i, bool show_attrs) {
    const pardo_op *op = &p->blocks[b].ops[i];
    printf("    %3d %-22s %-12s (", i, op->type, op->name ? op->name : "-");
    print_names(op->in, op->n_in);
    printf(") -> (");
    print_names(op->out, op->n_out);
    printf(")");
    if (op->role != PARDO_OP_ROLE_NONE) printf("  [%s]", pardo_op_role_name(op->role));
    if (show_attrs && op->attrs && op->attrs->n > 0 && strcmp(op->type, "parallel_do") != 0) { /* what the fusion pass set: activation, grad_merge */
        char *json = pardo_value_to_json(op->attrs);
        if (json) printf("  %s", json);
        free(json);
    }
    printf("\n");
}

int pardo_cli_check(int argc, char **argv) {
    const char *path = NULL;
    bool fused = false;
    for (int i = 0; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(check_help, stdout);
            return CLI_OK;
        }
        if (strcmp(argv[i], "--fused") == 0) {
            fused = true;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("check", "unknown flag '%s'", argv[i]);
        if (path) return cli_usage_error("check", "unexpected argument '%s' (one GRAPH only)", argv[i]);
        path = argv[i];
    }
    if (!path) return cli_usage_error("check", "missing GRAPH");
    pardo_program *p = cli_load_checked(path);
    if (!p) return CLI_BAD_INPUT;
    if (fused && cli_fuse(p, NULL, 0) != CLI_OK) {
        pardo_program_free(p);
        return CLI_BAD_INPUT;
    }
    long long n_params = 0, param_elems = 0, bytes = 0;
    printf("%s: graph '%s', %d block%s\n", path, p->name ? p->name : "", p->n_blocks, p->n_blocks == 1 ? "" : "s");
    for (int b = 0; b < p->n_blocks; b++) {
        const pardo_block *blk = &p->blocks[b];
        printf("block %d", b);
        if (blk->parent >= 0) printf(" (parent %d)", blk->parent);
        printf(": %d vars, %d ops\n  vars:\n", blk->n_vars, blk->n_ops);
        for (int i = 0; i < blk->n_vars; i++) {
            const pardo_graph_var *v = &blk->vars[i];
            print_var(v);
            if (v->role == PARDO_VAR_PARAM) {
                int64_t n = pardo_shape_numel(v->type.ndim, v->type.shape);
                n_params++;
                if (n > 0) {
                    param_elems += n;
                    bytes += n * (long long)pardo_dtype_size(v->type.dtype);
                }
            }
        }
        printf("  ops:\n");
        for (int i = 0; i < blk->n_ops; i++) print_op(p, b, i, fused);
    }
    printf("params: %lld vars, %lld elements, %lld bytes\n", n_params, param_elems, bytes);
    printf("ok\n");
    pardo_program_free(p);
    return CLI_OK;
}
