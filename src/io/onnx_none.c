/* onnx_none.c - a build without protobuf-c (make ONNX=0, or libprotobuf-c-dev
 * / protobuf-c-compiler / libonnx-dev missing): ONNX files are recognised
 * and refused with a message that says how to build with ONNX. */
#include "io/onnx.h"

#include "io/onnx_sniff.h"

bool pardo_onnx_built(void) { return false; }

bool pardo_onnx_looks_like(const unsigned char *buf, size_t n) { return pardo_onnx_sniff(buf, n); }

#define OFF_HINT                                                                                                     \
    "this pardo was built without ONNX support (install libprotobuf-c-dev, protobuf-c-compiler and libonnx-dev, " \
    "e.g. with tools/install-deps.sh, and rebuild)"

int pardo_onnx_import(const unsigned char *buf, size_t n, const char *path, pardo_program **out,
                      pardo_tensor_list *weights, pardo_status *st) {
    (void)buf;
    (void)n;
    (void)weights;
    if (out) *out = NULL;
    return pardo_errorf(st, PARDO_ENOTSUP, "%s: an ONNX model, but %s", path ? path : "<input>", OFF_HINT);
}

int pardo_onnx_import_fixed(const unsigned char *buf, size_t n, const char *path, const pardo_tensor_list *fixed,
                            pardo_program **out, pardo_tensor_list *weights, pardo_status *st) {
    (void)fixed;
    return pardo_onnx_import(buf, n, path, out, weights, st);
}

int pardo_onnx_read_tensor_file(const char *path, pardo_tensor **out, char **name, pardo_status *st) {
    if (out) *out = NULL;
    if (name) *name = NULL;
    return pardo_errorf(st, PARDO_ENOTSUP, "%s: an ONNX tensor, but %s", path ? path : "<input>", OFF_HINT);
}
