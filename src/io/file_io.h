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

/* Writes the nparts pieces, in order, as the file at path: to an unnamed file
 * in the same folder (O_TMPFILE, mode 0666 less the umask), fsynced, then
 * linked as path (where no file is there) or as a unique "PATH.tmpXXXXXX"
 * renamed over path at once, and the folder fsynced (best effort); a crash
 * or SIGKILL at any point leaves path its old self or the whole new file and
 * nothing else. Where the filesystem lacks O_TMPFILE the temporary file is
 * named from the start (mkstemp), and a crash may leave it behind. On any
 * failure a previous file at path is left untouched, nothing is left behind,
 * and PARDO_EIO is returned with "PATH: ...: strerror". A symbolic
 * link at path is followed (its target is replaced, the link kept); a target
 * that exists and is neither a regular file nor a folder (a FIFO, a device
 * such as /dev/null) is written through, as cp does, never replaced.
 * Thread-safe for distinct paths. */
int pardo_file_write_atomic(const char *path, const pardo_file_part *parts, int nparts, pardo_status *st);

#endif
