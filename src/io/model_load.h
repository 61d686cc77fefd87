/* model_load.h - the one door to a model file: a pardo graph file (JSON,
 * graph_json.h) or an ONNX model (onnx.h), told apart by the file's first
 * bytes, not its name. */
#ifndef PARDO_MODEL_LOAD_H
#define PARDO_MODEL_LOAD_H

#include <stdbool.h>

#include "core/graph.h"
#include "core/status.h"
#include "core/tensor_list.h"

/* Loads the model at path into a new program (*out, caller frees with
 * pardo_program_free). An ONNX model's initializers that became params go
 * into `weights` (initialised by the caller; a graph file adds none) and
 * *is_onnx (may be NULL) says which kind it was. An ONNX model comes back
 * checked (pardo_pass_check); a graph file is only parsed. Errors as
 * pardo_graph_load's for a graph file (a foreign file too) and
 * pardo_onnx_import's for an ONNX one; *out NULL then and `weights` as it
 * was. A pipe or device is read as a graph file. Thread-safe. */
int pardo_model_load(const char *path, pardo_program **out, pardo_tensor_list *weights, bool *is_onnx,
                     pardo_status *st);

#endif
