/* npy_map.c - .npy files mapped read-only (see npy_map.h). */
#include "io/npy_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file_io.h"

void pardo_npy_map_close(pardo_npy_map *m) {
    if (!m) return;
    if (m->base) munmap(m->base, m->map_len);
    free(m->heap);
    free(m->path);
    free(m);
}

/* Maps the regular file at fd; false (errno set) when it cannot be mapped. */
static bool map_file(int fd, size_t len, pardo_npy_map *m) {
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return false;
    m->base = p;
    m->map_len = len;
    return true;
}

int pardo_npy_map_open(const char *path, pardo_npy_map **out, pardo_status *st) {
    *out = NULL;
    pardo_npy_map *m = calloc(1, sizeof(*m));
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        pardo_npy_map_close(m);
        return pardo_errorf(st, PARDO_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat sb;
    int rc = PARDO_OK;
    if (fstat(fd, &sb) != 0) {
        rc = pardo_errorf(st, PARDO_EIO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        rc = pardo_errorf(st, PARDO_EIO, "%s: is a folder, expected a .npy file", path);
    } else if (S_ISREG(sb.st_mode) && sb.st_size == 0) {
        rc = pardo_errorf(st, PARDO_EPARSE, "%s: empty file, expected a .npy file", path);
    } else if (!(S_ISREG(sb.st_mode) && (uint64_t)sb.st_size <= SIZE_MAX && map_file(fd, (size_t)sb.st_size, m))) {
        /* not a regular file (a pipe), or the map failed: read it whole */
        size_t n;
        rc = pardo_file_read_all(path, &m->heap, &n, st);
        if (rc == PARDO_OK) m->map_len = n;
    }
    close(fd);
    if (rc == PARDO_OK) {
        const unsigned char *img = m->base ? m->base : m->heap;
        rc = pardo_npy_parse_header(img, m->map_len, path, &m->info, st);
        if (rc == PARDO_OK) m->data = img + m->info.data_offset;
    }
    if (rc != PARDO_OK) {
        pardo_npy_map_close(m);
        return rc;
    }
    *out = m;
    return PARDO_OK;
}

int64_t pardo_npy_map_rows(const pardo_npy_map *m) { return m->info.ndim > 0 ? m->info.shape[0] : 1; }

size_t pardo_npy_map_row_bytes(const pardo_npy_map *m) {
    size_t n = pardo_dtype_size(m->info.dtype);
    for (int d = 1; d < m->info.ndim; d++) n *= (size_t)m->info.shape[d];
    return n;
}
