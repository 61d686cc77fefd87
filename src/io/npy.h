/* npy.h - NumPy .npy files, read and written by pardo itself: format
 * versions 1, 2 (and 3), little-endian, C order, dtypes <f4 <f8 <i4 <i8 |b1.
 * Readers never read past their buffer and reject anything else with
 * PARDO_EPARSE (or PARDO_EIO for file errors) and a message that names the
 * file, the place (byte offset or header key) and what was expected. */
#ifndef PARDO_NPY_H
#define PARDO_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* Reads the .npy file at path into a new tensor (*out, caller releases).
 * Messages begin with the path. */
int pardo_npy_read(const char *path, pardo_tensor **out, pardo_status *st);

/* What a .npy header says, and where the data lies in the file. */
typedef struct pardo_npy_info {
    pardo_dtype dtype;
    int ndim;                        // rank, 0..PARDO_MAX_DIMS
    int64_t shape[PARDO_MAX_DIMS];   // sizes
    size_t data_offset;              // bytes from the start of the file to the data
    size_t nbytes;                   // bytes of data (the file ends right after them)
} pardo_npy_info;

/* Checks an in-memory .npy image of n bytes as pardo_npy_parse does (magic,
 * version, header, data size exactly as the shape needs) without copying the
 * data; fills *info. `name` names the image in messages. Thread-safe. */
int pardo_npy_parse_header(const void *buf, size_t n, const char *name, pardo_npy_info *info, pardo_status *st);

/* A pardo_file_need_fn (file_io.h) for a .npy file read as a stream (a
 * pipe, a device): the magic and version first (so /dev/zero is refused at
 * its first bytes), then the header, then exactly the bytes the header's
 * shape needs. Thread-safe. */
int pardo_npy_stream_need(const unsigned char *buf, size_t n, const char *path, size_t *need, bool *whole,
                          pardo_status *st);

/* Parses an in-memory .npy image of n bytes; `name` names it in messages. */
int pardo_npy_parse(const void *buf, size_t n, const char *name, pardo_tensor **out, pardo_status *st);

/* Writes t to path as .npy version 1 (version 2 if the header needs it),
 * through a temporary file in the same folder renamed into place, so a
 * failure leaves no partial file. */
int pardo_npy_write(const char *path, pardo_tensor *t, pardo_status *st);

#endif
