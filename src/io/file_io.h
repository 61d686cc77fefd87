/* file_io.h - whole-file reads and crash-safe whole-file writes for pardo's
 * data files (npy, safetensors). */
#ifndef PARDO_FILE_IO_H
#define PARDO_FILE_IO_H

#include <stddef.h>

#include "core/status.h"

#include <stdbool.h>

/* Reads the whole file at path into a new buffer (*data, *n bytes; the caller
 * frees *data with free). Any file (pipes too), read until end of file, at
 * most the machine's physical memory. PARDO_EIO with "PATH: cannot ...:
 * strerror" or PARDO_ENOMEM on failure, *data NULL then. Thread-safe. Where
 * a format can tell a bad file from its first bytes, pardo_file_view_open
 * is the better way (a bad file is refused before it is read). */
int pardo_file_read_all(const char *path, unsigned char **data, size_t *n, pardo_status *st);

/* A file's bytes for a reader: a regular file mapped read-only (nothing is
 * read or copied until touched, so a reader that checks the header first
 * refuses a bad 2 GB file at once), anything else (a pipe, a device) read
 * into memory as far as the format says it needs. */
typedef struct pardo_file_view {
    const unsigned char *data; // n bytes, read-only (NULL when n is 0)
    size_t n;                  // bytes
    void *map;                 // the mapping (munmap), or NULL
    size_t map_len;            // bytes mapped
    unsigned char *heap;       // what was read of a stream (free), or NULL
} pardo_file_view;

/* "Read to the end" for a pardo_file_need_fn. */
#define PARDO_FILE_ALL ((size_t)-1)

/* What a format needs of a stream, from the n bytes read so far (its
 * prefix; buf NULL when n is 0): PARDO_OK with *need the bytes to have
 * before it is asked again, or PARDO_FILE_ALL for the rest, and *whole set
 * when *need is the file's whole size (reading then stops one byte past it,
 * for the format to report). *need <= n and not whole: it has seen enough.
 * An error code (with st filled) refuses the file at once: /dev/zero is not
 * read past its first bytes. Called again after every read for
 * PARDO_FILE_ALL. */
typedef int (*pardo_file_need_fn)(const unsigned char *buf, size_t n, const char *path, size_t *need, bool *whole,
                                  pardo_status *st);

/* Opens the file at path as *v (closed with pardo_file_view_close): mapped
 * when it is a regular file, else read as `need` asks (NULL: to the end), at
 * most the machine's physical memory. PARDO_EIO "PATH: cannot ...: strerror"
 * (a folder too), PARDO_ENOMEM, or need's error. An empty file gives n 0.
 * Thread-safe; v's bytes may be read from any thread. */
int pardo_file_view_open(const char *path, pardo_file_need_fn need, pardo_file_view *v, pardo_status *st);

/* Unmaps or frees v's bytes; v is zeroed. NULL is a no-op. */
void pardo_file_view_close(pardo_file_view *v);

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
