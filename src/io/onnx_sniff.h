/* onnx_sniff.h - telling an ONNX model from a graph file by its first byte,
 * shared by the ONNX build and the build without it. */
#ifndef PARDO_ONNX_SNIFF_H
#define PARDO_ONNX_SNIFF_H

#include <stdbool.h>
#include <stddef.h>

/* A ModelProto's fields are 1 ir_version (varint), 2-4 and 6 strings,
 * 5 model_version (varint), 7 graph, 8 opset_import, 14 metadata_props,
 * 20 training_info, 25 functions: the first byte is one of their tags. */
static inline bool pardo_onnx_sniff(const unsigned char *buf, size_t n) {
    if (n < 2) return false;
    switch (buf[0]) {
    case 0x08: case 0x12: case 0x1a: case 0x22: case 0x28: case 0x32: case 0x3a: case 0x42: case 0x72:
        return true;
    case 0xa2: case 0xca: /* fields 20 and 25: two-byte tags */
        return buf[1] == 0x01;
    default:
        return false;
    }
}

#endif
