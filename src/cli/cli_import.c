/* cli_import.c - `pardo import`: an ONNX model written as a pardo graph file,
 * its params' tensors (the model's float initializers) as a safetensors
 * file beside it for `--load`. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/graph_json.h"
#include "io/safetensors.h"

static const char import_help[] =
    "usage: pardo import MODEL.onnx -o GRAPH.json [--weights FILE.safetensors]\n"
    "\n"
    "Writes the ONNX model as a pardo graph file: graph inputs become feeds and graph\n"
    "outputs keep their ONNX names; the float initializers become params whose\n"
    "tensors go to the weights file (default: GRAPH with .safetensors for .json),\n"
    "other constants are written inline. Run it with\n"
    "    pardo run GRAPH.json --load FILE.safetensors --feed NAME=X.npy\n"
    "  -o GRAPH           the graph file to write\n"
    "  --weights FILE     the safetensors file for the params\n"
    "Both files are written whole or not at all.\n";

int cli_weights_path(const char *graph, const char *given, char *buf, size_t n) {
    if (given) return snprintf(buf, n, "%s", given) < (int)n ? CLI_OK : CLI_BAD_INPUT;
    size_t l = strlen(graph);
    if (l > 5 && strcmp(graph + l - 5, ".json") == 0) l -= 5;
    return snprintf(buf, n, "%.*s.safetensors", (int)l, graph) < (int)n ? CLI_OK : CLI_BAD_INPUT;
}

int cli_write_graph_and_weights(const pardo_program *p, const char *out, const char *weights) {
    pardo_status st;
    pardo_status_clear(&st);
    const pardo_tensor_list *w = cli_model_weights();
    if (w->n && pardo_safetensors_write(weights, w, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_FAILED;
    }
    if (pardo_graph_save(p, out, &st) != PARDO_OK) {
        cli_print_error(&st);
        if (w->n) unlink(weights); /* no half of the pair left behind */
        /* a model a graph file cannot hold (a NaN or infinite attr) is the input's fault; a failed write is not */
        return st.code == PARDO_EINVAL ? CLI_BAD_INPUT : CLI_FAILED;
    }
    if (w->n) fprintf(stderr, "pardo: wrote %s and its %d params to %s (run it with --load %s)\n", out, w->n, weights,
                      weights);
    return CLI_OK;
}

int pardo_cli_import(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *weights = NULL;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_is_help(arg)) {
            fputs(import_help, stdout);
            return CLI_OK;
        }
        if (strcmp(arg, "-o") == 0 || cli_flag_is(arg, "--out")) {
            if (!(out = cli_flag_value("import", argc, argv, &i, strcmp(arg, "-o") == 0 ? "-o" : "--out")))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--weights")) {
            if (!(weights = cli_flag_value("import", argc, argv, &i, "--weights"))) return CLI_BAD_INPUT;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return cli_usage_error("import", "unknown flag '%s'", arg);
        } else if (!model) {
            model = arg;
        } else {
            return cli_usage_error("import", "unexpected argument '%s' (one MODEL only)", arg);
        }
    }
    if (!model) return cli_usage_error("import", "missing MODEL.onnx");
    if (!out) return cli_usage_error("import", "missing -o GRAPH.json");
    char wpath[4096];
    if (cli_weights_path(out, weights, wpath, sizeof wpath) != CLI_OK)
        return cli_usage_error("import", "the weights path is too long");
    if (strcmp(wpath, out) == 0) return cli_usage_error("import", "--weights names the graph file itself");
    pardo_program *p = cli_load_checked(model);
    if (!p) return CLI_BAD_INPUT;
    int rc;
    if (!cli_model_is_onnx()) {
        fprintf(stderr, "pardo: %s: a pardo graph file already, not an ONNX model (nothing to import)\n", model);
        rc = CLI_BAD_INPUT;
    } else {
        rc = cli_write_graph_and_weights(p, out, wpath);
    }
    pardo_program_free(p);
    return rc;
}
