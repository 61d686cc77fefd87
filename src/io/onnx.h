/* onnx.h - ONNX models (SPEC.md section 6) to the Program IR: the
 * ModelProto parsed with protobuf-c (onnx.proto compiled by protoc-c in the
 * build), each node of the default domain (opsets 7 to 17) mapped by its
 * op type and since-version (onnx_ops.c), shape computations on static dims
 * folded at load (onnx_fold.c), initializers turned into params (floats)
 * or constants, graph inputs into feeds, graph outputs kept under their
 * ONNX names. A build without protobuf-c compiles onnx_none.c instead: it
 * says the model is ONNX and that ONNX support is off. */
#ifndef PARDO_ONNX_H
#define PARDO_ONNX_H

#include <stdbool.h>
#include <stddef.h>

#include "core/graph.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/tensor_list.h"

/* Whether this build reads ONNX files. */
bool pardo_onnx_built(void);

/* Whether the first n bytes of a file look like a protobuf ModelProto (its
 * first field tag is one of ModelProto's): a graph file starts with '{' or
 * white space, never with one of these bytes. */
bool pardo_onnx_looks_like(const unsigned char *buf, size_t n);

/* Imports the ONNX model in buf (n bytes; `path` names it in messages and
 * locates external data files, which lie beside it). On success *out is a
 * new program (caller frees with pardo_program_free), already checked
 * (pardo_pass_check: ops resolved, every var's type inferred), and
 * `weights` (initialised by the caller)
 * gets one tensor per param, keyed by var name, as a checkpoint would give
 * it. Errors: PARDO_EPARSE for a file that is not a valid model (truncated,
 * foreign, a tensor whose data does not match its dims), PARDO_ENOTSUP for
 * an op type, attr, opset or dtype pardo cannot run; messages name the
 * file, the node (name, index, op type) and the input or attr. On error
 * *out is NULL and `weights` is as it was. Thread-safe. */
int pardo_onnx_import(const unsigned char *buf, size_t n, const char *path, pardo_program **out,
                      pardo_tensor_list *weights, pardo_status *st);

/* As pardo_onnx_import, with the graph inputs that `fixed` names (may be
 * NULL) taken as constants of the given values instead of feeds, as a
 * runtime that specialises a model to known shapes does (the node tests'
 * shape, axes and bounds inputs). `fixed` is borrowed. */
int pardo_onnx_import_fixed(const unsigned char *buf, size_t n, const char *path, const pardo_tensor_list *fixed,
                            pardo_program **out, pardo_tensor_list *weights, pardo_status *st);

/* Reads a serialised TensorProto (the node tests' input_N.pb, output_N.pb)
 * into a new CPU tensor (*out, caller releases) and, when name is not NULL,
 * its name (*name, caller frees; "" when it has none). PARDO_EPARSE for a
 * bad file or a dtype pardo lacks (naming it). */
int pardo_onnx_read_tensor_file(const char *path, pardo_tensor **out, char **name, pardo_status *st);

#endif
