/* cli_ops.c - `pardo ops [OP]`: the op registry, as users see it. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "op.h"

static const char ops_help[] =
    "usage: pardo ops [OP]\n"
    "\n"
    "Lists every op pardo knows ([grad]: differentiable, [cuda]: has a CUDA kernel),\n"
    "or describes OP: its inputs, outputs, attrs with their defaults, its gradient\n"
    "op, and whether it has a CUDA kernel.\n";

static const char *attr_type_word(pardo_attr_type t) {
    static const char *const words[] = {"int", "float", "bool", "string", "ints", "floats", "object", "any"};
    return (t >= 0 && t <= PARDO_ATTR_ANY) ? words[t] : "?";
}

static void describe(const pardo_op_def *d) {
    printf("%s: %s\n", d->type, d->doc ? d->doc : "");
    printf("inputs:\n");
    if (d->n_inputs == 0) printf("  (none)\n");
    for (int i = 0; i < d->n_inputs; i++)
        printf("  %d %-10s %s%s%s\n", i, d->inputs[i].name, d->inputs[i].doc ? d->inputs[i].doc : "",
               d->inputs[i].optional ? " (optional)" : "", d->inputs[i].variadic ? " (repeats)" : "");
    printf("outputs:\n");
    for (int i = 0; i < d->n_outputs; i++)
        printf("  %d %-10s %s%s\n", i, d->outputs[i].name, d->outputs[i].doc ? d->outputs[i].doc : "",
               d->outputs[i].optional ? " (optional)" : "");
    printf("attrs:\n");
    if (d->n_attrs == 0) printf("  (none)\n");
    for (int i = 0; i < d->n_attrs; i++)
        printf("  %-12s %-7s %s%s  %s\n", d->attrs[i].name, attr_type_word(d->attrs[i].type),
               d->attrs[i].dflt ? "default " : "required", d->attrs[i].dflt ? d->attrs[i].dflt : "",
               d->attrs[i].doc ? d->attrs[i].doc : "");
    char gtype[128];
    const pardo_op_def *g = d->grad ? pardo_op_lookup(pardo_grad_op_type(d->type, gtype, sizeof gtype)) : NULL;
    if (!d->grad) printf("gradient: no (not differentiable)\n");
    else if (g) printf("gradient: yes (%s)\n", g->type); /* the gradient op T_grad its builder appends */
    else printf("gradient: yes\n");
    printf("cuda kernel: %s\n", d->cuda ? "yes" : "no (runs on the CPU)");
    printf("in place: %s\n", d->inplace ? "yes" : "no");
    if (d->halves_in_f32) printf("float16, bfloat16: through the float32 kernel (inputs widened, outputs rounded)\n");
}

int pardo_cli_ops(int argc, char **argv) {
    const char *name = NULL;
    for (int i = 0; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(ops_help, stdout);
            return CLI_OK;
        }
        if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("ops", "unknown flag '%s'", argv[i]);
        if (name) return cli_usage_error("ops", "unexpected argument '%s' (one OP only)", argv[i]);
        name = argv[i];
    }
    if (name) {
        const pardo_op_def *d = pardo_op_lookup(name);
        if (!d) {
            char known[2048], near[256];
            pardo_op_nearest(name, near, sizeof near);
            fprintf(stderr, "pardo ops: unknown op '%s'%s%s%s (known ops: %s)\n", name,
                    near[0] ? "; did you mean " : "", near, near[0] ? "?" : "",
                    pardo_op_known_list(known, sizeof known));
            return CLI_BAD_INPUT;
        }
        describe(d);
        return CLI_OK;
    }
    for (int i = 0; i < pardo_op_count(); i++) {
        const pardo_op_def *d = pardo_op_at(i);
        printf("%-24s %s%s%s\n", d->type, d->doc ? d->doc : "", d->grad ? " [grad]" : "", d->cuda ? " [cuda]" : "");
    }
    return CLI_OK;
}
