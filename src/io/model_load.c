/* model_load.c - a graph file or an ONNX model, by content (see model_load.h). */
#include "io/model_load.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file_io.h"
#include "io/graph_json.h"
#include "io/onnx.h"

/* Whether path is a regular file starting like an ONNX model. A pipe or
 * device is never peeked at (its bytes could not be read twice): it is
 * read as a graph file. */
static bool peek_onnx(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false; /* the loader says why */
    struct stat sb;
    unsigned char head[16];
    ssize_t got = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) got = read(fd, head, sizeof head);
    close(fd);
    return got > 0 && pardo_onnx_looks_like(head, (size_t)got);
}

int pardo_model_load(const char *path, pardo_program **out, pardo_tensor_list *weights, bool *is_onnx,
                     pardo_status *st) {
    *out = NULL;
    if (is_onnx) *is_onnx = false;
    if (!peek_onnx(path)) return pardo_graph_load(path, out, st);
    if (is_onnx) *is_onnx = true;
    unsigned char *data = NULL;
    size_t n = 0;
    int rc = pardo_file_read_all(path, &data, &n, st);
    if (rc == PARDO_OK) rc = pardo_onnx_import(data, n, path, out, weights, st);
    free(data);
    return rc;
}
