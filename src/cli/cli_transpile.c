/* cli_transpile.c - `pardo transpile`: autodiff, optimizer and the multi-CPU
 * rewrite (transpiler/), written as a graph file that `pardo check` accepts. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "io/graph_json.h"
#include "pass.h"

static const char transpile_help[] =
    "usage: pardo transpile GRAPH -o OUT [--parts N | --no-parallel] [--backward LOSS]\n"
    "                       [--optimizer sgd|momentum|adam|adamw] [--lr X] [--mu X] [--nesterov]\n"
    "                       [--beta1 X] [--beta2 X] [--epsilon X] [--weight-decay X]\n"
    "                       [--clip-grad-norm X] [--sync-batch-norm] [--weights FILE]\n"
    "                       [--add-loss softmax_cross_entropy|mse:OUTPUT [--labels NAME]]\n"
    "\n"
    "Rewrites a single-thread graph into a data-parallel one and writes it to OUT:\n"
    "every feed is split into parts (X -> X@PARTS), one parallel_do runs the forward,\n"
    "loss and backward ops on each part, the gradients and the loss are merged back\n"
    "(mean weighted by each part's rows) under their own names, then the optimizer\n"
    "runs. An inference graph gets its outputs concatenated (or averaged, without a\n"
    "batch dim).\n"
    "  -o OUT             the graph file to write (written whole or not at all)\n"
    "  --parts N          parts per batch (default 0: the thread count at run time)\n"
    "  --no-parallel      no data-parallel rewrite: only the loss, gradient and optimizer ops are\n"
    "                     appended, a single-thread training graph (what `pardo train --device cuda`\n"
    "                     runs on the GPU: a parallel_do's parts run on the CPU)\n"
    "  --add-loss KIND:OUTPUT  first append a loss on output var OUTPUT (an inference model, such\n"
    "                     as an imported ONNX one, has none): softmax_cross_entropy (OUTPUT the\n"
    "                     logits [N, C], against int64 class labels [N]) or mse (against targets\n"
    "                     of OUTPUT's shape), mean over the rows, written to var `loss`; then\n"
    "                     --backward loss trains the model\n"
    "  --labels NAME      the feed var --add-loss adds for the labels or targets (default labels)\n"
    "  --backward LOSS    append the gradient ops of the scalar LOSS (V@GRAD)\n"
    "  --optimizer NAME   then one sgd, momentum, adam or adamw update per param (torch.optim's\n"
    "                     equations)\n"
    "  --lr X             learning rate (default 0.01; pardo train --lr replaces it at run time)\n"
    "  --mu X, --nesterov momentum coefficient (0.9) and Nesterov's update\n"
    "  --beta1 X, --beta2 X, --epsilon X   adam and adamw (0.9, 0.999, 1e-8)\n"
    "  --weight-decay X   sgd, momentum, adam: an L2 term X * param added to the gradient (default 0);\n"
    "                     adamw: decoupled, param *= 1 - lr * X before each step (default 0.01)\n"
    "  --clip-grad-norm X scale the (merged) gradients so that their global L2 norm is at most X\n"
    "                     before the updates (torch.nn.utils.clip_grad_norm_)\n"
    "  --sync-batch-norm  every batch_norm takes its training statistics over the whole batch, every\n"
    "                     part's rows (torch.nn.SyncBatchNorm; as the attr sync: true): the parts join\n"
    "                     at each; without it each part normalises by its own rows' statistics\n"
    "  --weights FILE     GRAPH is an ONNX model: its params' tensors go to FILE\n"
    "                     (default: OUT with .safetensors for .json), for --load\n";

typedef struct transpile_args {
    const char *graph, *out, *weights;
    pardo_pass_options opt;
    bool lr_given;
    bool tuning_given; // --weight-decay or --clip-grad-norm
    bool no_parallel;  // --no-parallel: leave the multi_cpu pass out
    bool parts_given;  // --parts
} transpile_args;

static bool number_flag(const char *arg, const char *flag, int argc, char **argv, int *i, double lo, double hi,
                        double *out, bool *matched) {
    if (!cli_flag_is(arg, flag)) return true;
    *matched = true;
    const char *v = cli_flag_value("transpile", argc, argv, i, flag);
    return v && cli_parse_double("transpile", flag, v, lo, hi, out);
}

/* Returns -1 when the arguments are fine, else the exit status. */
static int parse_args(int argc, char **argv, transpile_args *a) {
    memset(a, 0, sizeof(*a));
    a->opt = pardo_pass_defaults();
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        bool matched = false;
        if (cli_is_help(arg)) {
            fputs(transpile_help, stdout);
            return CLI_OK;
        }
        if (!number_flag(arg, "--lr", argc, argv, &i, 0, 1e9, &a->opt.lr, &matched) ||
            !number_flag(arg, "--mu", argc, argv, &i, 0, 1, &a->opt.mu, &matched) ||
            !number_flag(arg, "--beta1", argc, argv, &i, 0, 0.999999999, &a->opt.beta1, &matched) ||
            !number_flag(arg, "--beta2", argc, argv, &i, 0, 0.999999999, &a->opt.beta2, &matched) ||
            !number_flag(arg, "--epsilon", argc, argv, &i, 0, 1, &a->opt.epsilon, &matched) ||
            !number_flag(arg, "--weight-decay", argc, argv, &i, 0, 1e9, &a->opt.weight_decay, &matched) ||
            !number_flag(arg, "--clip-grad-norm", argc, argv, &i, 1e-30, 1e30, &a->opt.clip_grad_norm, &matched))
            return CLI_BAD_INPUT;
        if (matched) {
            a->lr_given |= cli_flag_is(arg, "--lr");
            a->tuning_given |= cli_flag_is(arg, "--weight-decay") || cli_flag_is(arg, "--clip-grad-norm");
            continue;
        }
        if (strcmp(arg, "-o") == 0 || cli_flag_is(arg, "--out")) {
            if (!(a->out = cli_flag_value("transpile", argc, argv, &i, strcmp(arg, "-o") == 0 ? "-o" : "--out")))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--parts")) {
            long n;
            if (!(v = cli_flag_value("transpile", argc, argv, &i, "--parts")) ||
                !cli_parse_int("transpile", "--parts", v, 0, 4096, &n))
                return CLI_BAD_INPUT;
            a->opt.parts = (int)n;
            a->parts_given = true;
        } else if (strcmp(arg, "--no-parallel") == 0) {
            a->no_parallel = true;
        } else if (cli_flag_is(arg, "--backward")) {
            if (!(a->opt.loss = cli_flag_value("transpile", argc, argv, &i, "--backward"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--optimizer")) {
            if (!(v = cli_flag_value("transpile", argc, argv, &i, "--optimizer"))) return CLI_BAD_INPUT;
            if (!pardo_optimizer_parse(v, &a->opt.optimizer))
                return cli_usage_error("transpile", "--optimizer expects sgd, momentum, adam or adamw, got '%s'", v);
        } else if (cli_flag_is(arg, "--add-loss")) {
            if (!(v = cli_flag_value("transpile", argc, argv, &i, "--add-loss"))) return CLI_BAD_INPUT;
            const char *colon = strchr(v, ':');
            char kind[64];
            size_t len = colon ? (size_t)(colon - v) : 0;
            if (colon && len < sizeof kind) memcpy(kind, v, len);
            kind[colon && len < sizeof kind ? len : 0] = '\0';
            if (!colon || !colon[1] || !pardo_loss_kind_parse(kind, &a->opt.add_loss))
                return cli_usage_error("transpile",
                                       "--add-loss expects softmax_cross_entropy:OUTPUT or mse:OUTPUT, got '%s'", v);
            a->opt.add_loss_output = colon + 1;
        } else if (cli_flag_is(arg, "--labels")) {
            if (!(a->opt.labels = cli_flag_value("transpile", argc, argv, &i, "--labels"))) return CLI_BAD_INPUT;
            if (!a->opt.labels[0]) return cli_usage_error("transpile", "--labels expects a var name");
        } else if (cli_flag_is(arg, "--weights")) {
            if (!(a->weights = cli_flag_value("transpile", argc, argv, &i, "--weights"))) return CLI_BAD_INPUT;
        } else if (strcmp(arg, "--nesterov") == 0) {
            a->opt.nesterov = true;
        } else if (strcmp(arg, "--sync-batch-norm") == 0) {
            a->opt.sync_parts = true;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return cli_usage_error("transpile", "unknown flag '%s'", arg);
        } else if (!a->graph) {
            a->graph = arg;
        } else {
            return cli_usage_error("transpile", "unexpected argument '%s' (one GRAPH only)", arg);
        }
    }
    if (!a->graph) return cli_usage_error("transpile", "missing GRAPH");
    if (!a->out) return cli_usage_error("transpile", "missing -o OUT");
    if (a->lr_given && a->opt.optimizer == PARDO_OPTIMIZER_NONE)
        return cli_usage_error("transpile", "--lr needs --optimizer");
    if (a->tuning_given && a->opt.optimizer == PARDO_OPTIMIZER_NONE)
        return cli_usage_error("transpile", "--weight-decay and --clip-grad-norm need --optimizer");
    if (a->opt.labels && a->opt.add_loss == PARDO_LOSS_NONE)
        return cli_usage_error("transpile", "--labels needs --add-loss");
    if (a->no_parallel && (a->parts_given || a->opt.sync_parts))
        return cli_usage_error("transpile",
                               "--no-parallel makes no parts: it takes neither --parts nor --sync-batch-norm");
    if (a->opt.nesterov && a->opt.optimizer != PARDO_OPTIMIZER_MOMENTUM)
        return cli_usage_error("transpile", "--nesterov needs --optimizer momentum");
    return -1;
}

int pardo_cli_transpile(int argc, char **argv) {
    transpile_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    pardo_program *p = cli_load_checked(a.graph);
    if (!p) return CLI_BAD_INPUT;
    pardo_status st;
    pardo_status_clear(&st);
    if ((a.opt.add_loss != PARDO_LOSS_NONE && pardo_pass_add_loss(p, &a.opt, &st) != PARDO_OK) ||
        (a.opt.loss && pardo_pass_backward(p, &a.opt, &st) != PARDO_OK) ||
        (a.opt.optimizer != PARDO_OPTIMIZER_NONE && pardo_pass_optimizer(p, &a.opt, &st) != PARDO_OK) ||
        (!a.no_parallel && pardo_pass_multi_cpu(p, &a.opt, &st) != PARDO_OK)) {
        cli_print_error(&st);
        pardo_program_free(p);
        return CLI_BAD_INPUT;
    }
    char wpath[4096];
    if (cli_model_is_onnx()) {
        if (cli_weights_path(a.out, a.weights, wpath, sizeof wpath) != CLI_OK || strcmp(wpath, a.out) == 0) {
            pardo_program_free(p);
            return cli_usage_error("transpile", "bad --weights path");
        }
        rc = cli_write_graph_and_weights(p, a.out, wpath);
    } else if (a.weights) {
        pardo_program_free(p);
        return cli_usage_error("transpile", "--weights is for an ONNX model; %s is a graph file", a.graph);
    } else {
        rc = pardo_graph_save(p, a.out, &st) == PARDO_OK ? CLI_OK : CLI_FAILED;
        if (rc != CLI_OK) cli_print_error(&st);
    }
    if (rc == CLI_OK) fprintf(stderr, "pardo: wrote %s (%d ops in block 0, %d in block 1)\n", a.out, p->blocks[0].n_ops,
                 p->n_blocks > 1 ? p->blocks[1].n_ops : 0);
    pardo_program_free(p);
    return rc;
}
