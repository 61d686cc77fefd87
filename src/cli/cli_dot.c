/* cli_dot.c - `pardo dot GRAPH`: the graph as Graphviz dot on stdout. Vars
 * are ellipses (feeds, params and state coloured), ops are boxes, each block
 * other than 0 is a cluster. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char dot_help[] =
    "usage: pardo dot GRAPH\n"
    "\n"
    "Prints GRAPH as Graphviz dot: ops as boxes, vars as ellipses (feeds green,\n"
    "params orange, state grey), one cluster per sub-block. Render it with\n"
    "  pardo dot GRAPH | dot -Tsvg -o graph.svg\n";

/* Prints s as the inside of a dot double-quoted string. */
static void put_escaped(const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if (*s == '\n') {
            fputs("\\n", stdout);
            continue;
        }
        putchar(*s);
    }
}

static const char *var_style(const pardo_graph_var *v) {
    switch (v->role) {
    case PARDO_VAR_FEED: return "style=filled, fillcolor=\"#c7e9c0\"";
    case PARDO_VAR_PARAM: return "style=filled, fillcolor=\"#fdd0a2\"";
    case PARDO_VAR_STATE: return "style=filled, fillcolor=\"#d9d9d9\"";
    case PARDO_VAR_TEMP: break;
    }
    return "style=solid";
}

static void print_var_node(int b, const pardo_graph_var *v, const char *indent) {
    char shape[160];
    printf("%s\"v%d:", indent, b);
    put_escaped(v->name);
    printf("\" [shape=ellipse, %s, label=\"", var_style(v));
    put_escaped(v->name);
    printf("\\n%s %s\"];\n", pardo_dtype_name(v->type.dtype), pardo_shape_str(v->type.ndim, v->type.shape, shape, sizeof shape));
}

static void print_var_ref(const pardo_program *p, int b, const char *name) {
    int owner = b;
    pardo_program_lookup_var(p, b, name, &owner);
    printf("\"v%d:", owner);
    put_escaped(name);
    printf("\"");
}

static void print_block(const pardo_program *p, int b, const char *indent) {
    const pardo_block *blk = &p->blocks[b];
    for (int i = 0; i < blk->n_vars; i++) print_var_node(b, &blk->vars[i], indent);
    for (int i = 0; i < blk->n_ops; i++) {
        const pardo_op *op = &blk->ops[i];
        printf("%s\"op%d:%d\" [shape=box, style=\"rounded,filled\", fillcolor=\"#deebf7\", label=\"", indent, b, i);
        put_escaped(op->type);
        if (op->name) {
            printf("\\n");
            put_escaped(op->name);
        }
        printf("\"];\n");
        for (int k = 0; k < op->n_in; k++) {
            if (!op->in[k][0]) continue;
            printf("%s", indent);
            print_var_ref(p, b, op->in[k]);
            printf(" -> \"op%d:%d\";\n", b, i);
        }
        for (int k = 0; k < op->n_out; k++) {
            if (!op->out[k][0]) continue; /* an output the op leaves out ("") */
            printf("%s\"op%d:%d\" -> ", indent, b, i);
            print_var_ref(p, b, op->out[k]);
            printf(";\n");
        }
    }
}

int pardo_cli_dot(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(dot_help, stdout);
            return CLI_OK;
        }
        if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("dot", "unknown flag '%s'", argv[i]);
        if (path) return cli_usage_error("dot", "unexpected argument '%s' (one GRAPH only)", argv[i]);
        path = argv[i];
    }
    if (!path) return cli_usage_error("dot", "missing GRAPH");
    pardo_program *p = cli_load_checked(path);
    if (!p) return CLI_BAD_INPUT;
    printf("digraph \"");
    put_escaped(p->name ? p->name : "pardo");
    printf("\" {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    print_block(p, 0, "  ");
    for (int b = 1; b < p->n_blocks; b++) {
        printf("  subgraph cluster_block%d {\n    label=\"block %d\";\n    style=dashed;\n", b, b);
        print_block(p, b, "    ");
        printf("  }\n");
    }
    printf("}\n");
    pardo_program_free(p);
    return CLI_OK;
}
