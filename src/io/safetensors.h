/* safetensors.h - checkpoints in the safetensors format: 8-byte little-endian
 * header length, a JSON header {name: {dtype, shape, data_offsets}, optional
 * "__metadata__"}, then the raw little-endian data. pardo's dtypes map to
 * F32 F64 I32 I64 BOOL. Readers never read past the file and reject bad files
 * with PARDO_EPARSE and a message naming the file, the entry and what was
 * expected (a header that lies about sizes or offsets, overlapping or
 * out-of-range data, unknown dtypes, truncation). */
#ifndef PARDO_SAFETENSORS_H
#define PARDO_SAFETENSORS_H

#include <stddef.h>

#include "core/status.h"
#include "core/tensor_list.h"

/* Reads every entry of the file into `out` (which must be initialised; the
 * entries are appended in file offset order). On error `out` is left as it was. */
int pardo_safetensors_read(const char *path, pardo_tensor_list *out, pardo_status *st);

/* Parses an in-memory image of n bytes; `name` names it in messages. */
int pardo_safetensors_parse(const void *buf, size_t n, const char *name, pardo_tensor_list *out,
                            pardo_status *st);

/* Writes the tensors of `in` (names must be unique) to path through a
 * temporary file in the same folder, fsynced and renamed into place. */
int pardo_safetensors_write(const char *path, const pardo_tensor_list *in, pardo_status *st);

#endif
