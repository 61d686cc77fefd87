/* file_io.h - whole-file reads and crash-safe whole-file writes for pardo's
 * data files (npy, safetensors). */
#ifndef PARDO_FILE_IO_H
#define PARDO_FILE_IO_H

#include <stddef.h>

#include "core/status.h"

/* Reads the whole file at path into a new buffer (*data, *n bytes; the caller
 * frees *data with free). Any file (pipes too), read until end of file.
 * PARDO_EIO with "PATH: cannot ...: strerror" or PARDO_ENOMEM on failure,
 * *data NULL then. Thread-safe. */
int pardo_file_read_all(const char *path, unsigned char **data, size_t *n, pardo_status *st);

/* One piece of a file to write: n bytes at data (borrowed). */
typedef struct pardo_file_part {
    const void *data;
    size_t n;  // bytes
} pardo_file_part;

/* Writes the nparts pieces, in order, as the file at path: to a temporary file
 * "PATH.tmpXXXXXX" in the same folder (mode 0666 less the umask), fsynced,
 * then renamed over path, and the folder fsynced (best effort). On any
 * failure the temporary file is removed, a previous file at path is left
 * untouched, and PARDO_EIO is returned with "PATH: ...: strerror". A symbolic
 * link at path is followed (its target is replaced, the link kept); a target
 * that exists and is neither a regular file nor a folder (a FIFO, a device
 * such as /dev/null) is written through, as cp does, never replaced.
 * Thread-safe for distinct paths. */
int pardo_file_write_atomic(const char *path, const pardo_file_part *parts, int nparts, pardo_status *st);

#endif
