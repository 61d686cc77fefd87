/* npy_map.h - a .npy file opened for reading in place: the file is mapped
 * into memory (mmap, read-only) and checked like pardo_npy_read checks it,
 * but its data is not copied, so a data set larger than memory can be read
 * batch by batch (the data loader, src/train/loader.h). A file that cannot be
 * mapped (a pipe) is read instead, its header first (file_io.h's views). */
#ifndef PARDO_NPY_MAP_H
#define PARDO_NPY_MAP_H

#include <stddef.h>

#include "io/file_io.h"
#include "io/npy.h"
#include "core/status.h"

typedef struct pardo_npy_map {
    pardo_npy_info info;       // dtype, shape, data offset and size
    const unsigned char *data; // info.nbytes bytes of array data, read-only; borrowed from the mapping
    char *path;                // the file's path, for messages; owned
    pardo_file_view view;      // the file, mapped (or read, for a pipe); owned
    pardo_tensor *held;        // the data in memory instead (a CSV parsed, a file cast), one reference; else NULL
} pardo_npy_map;

/* Opens and maps the .npy file at path and checks it (magic, version,
 * header, dtype, C order, data size exactly as the shape needs): PARDO_EIO
 * when it cannot be opened or read, PARDO_EPARSE for a bad file, each with
 * a message that begins with the path. Bool data is mapped as stored; a
 * reader treats any non-zero byte as true. *out is closed with
 * pardo_npy_map_close. Thread-safe; the data may be read from any thread. */
int pardo_npy_map_open(const char *path, pardo_npy_map **out, pardo_status *st);

/* A map over tensor t held in memory (a CSV file parsed, a .npy cast to
 * its var's dtype), presented as a mapped file is: info from t's dtype and
 * shape, data its host bytes. Takes a reference to t (the caller keeps
 * its own); path (copied) names it in messages. PARDO_ENOMEM. Closed with
 * pardo_npy_map_close. */
int pardo_npy_map_from_tensor(const char *path, pardo_tensor *t, pardo_npy_map **out, pardo_status *st);

/* Rows of the array (its first dim; 1 for a scalar). */
int64_t pardo_npy_map_rows(const pardo_npy_map *m);

/* Bytes of one row (the product of the trailing dims times the item size). */
size_t pardo_npy_map_row_bytes(const pardo_npy_map *m);

/* Unmaps the file and frees m. NULL is a no-op. No reader may use m->data after. */
void pardo_npy_map_close(pardo_npy_map *m);

#endif
