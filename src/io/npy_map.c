/* npy_map.c - .npy files mapped read-only (see npy_map.h). */
#include "io/npy_map.h"

#include <stdlib.h>
#include <string.h>

#include "io/file_io.h"

void pardo_npy_map_close(pardo_npy_map *m) {
    if (!m) return;
    pardo_file_view_close(&m->view);
    pardo_tensor_release(m->held);
    free(m->path);
    free(m);
}

int pardo_npy_map_open(const char *path, pardo_npy_map **out, pardo_status *st) {
    *out = NULL;
    pardo_npy_map *m = calloc(1, sizeof(*m));
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    }
    int rc = pardo_file_view_open(path, pardo_npy_stream_need, &m->view, st);
    if (rc == PARDO_OK) rc = pardo_npy_parse_header(m->view.data, m->view.n, path, &m->info, st);
    if (rc != PARDO_OK) {
        pardo_npy_map_close(m);
        return rc;
    }
    m->data = m->view.data + m->info.data_offset;
    *out = m;
    return PARDO_OK;
}

int64_t pardo_npy_map_rows(const pardo_npy_map *m) { return m->info.ndim > 0 ? m->info.shape[0] : 1; }

size_t pardo_npy_map_row_bytes(const pardo_npy_map *m) {
    size_t n = pardo_dtype_size(m->info.dtype);
    for (int d = 1; d < m->info.ndim; d++) n *= (size_t)m->info.shape[d];
    return n;
}

int pardo_npy_map_from_tensor(const char *path, pardo_tensor *t, pardo_npy_map **out, pardo_status *st) {
    *out = NULL;
    pardo_npy_map *m = calloc(1, sizeof(*m));
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    }
    m->held = pardo_tensor_retain(t);
    m->info.dtype = t->dtype;
    m->info.ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) m->info.shape[d] = t->shape[d];
    m->info.nbytes = (size_t)t->nbytes;
    m->data = pardo_tensor_data(t);
    *out = m;
    return PARDO_OK;
}
