/* file_io.c - whole-file reads and temp-file-and-rename writes (see file_io.h). */
#include "io/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pardo_file_read_all(const char *path, unsigned char **data, size_t *n, pardo_status *st) {
    *data = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pardo_errorf(st, PARDO_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    size_t cap = 0;
    if (fstat(fd, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            close(fd);
            return pardo_errorf(st, PARDO_EIO, "%s: cannot read: %s", path, strerror(EISDIR));
        }
        if (S_ISREG(sb.st_mode) && sb.st_size > 0) cap = (size_t)sb.st_size + 1;
    }
    if (cap == 0) cap = 4096;
    unsigned char *buf = malloc(cap);
    size_t len = 0;
    if (!buf) goto oom;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap * 2;
            unsigned char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) goto oom;
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return pardo_errorf(st, PARDO_EIO, "%s: cannot read: %s", path, strerror(e));
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    *data = buf;
    *n = len;
    return PARDO_OK;
oom:
    free(buf);
    close(fd);
    return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory reading the file", path);
}

/* The process umask, read without changing it (umask(2) would race with other
 * threads creating files); 022 when /proc is unavailable. */
static mode_t current_umask(void) {
    mode_t mask = 022;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return mask;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned int m;
        if (sscanf(line, "Umask: %o", &m) == 1) {
            mask = (mode_t)(m & 0777);
            break;
        }
    }
    fclose(f);
    return mask;
}

static int write_all(int fd, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsyncs the folder holding path so that a rename into it is durable. */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

int pardo_file_write_atomic(const char *path, const pardo_file_part *parts, int nparts, pardo_status *st) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof(".tmpXXXXXX"));
    if (!tmp) return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmpXXXXXX", sizeof(".tmpXXXXXX"));
    int fd = mkstemp(tmp);
    if (fd < 0) {
        pardo_errorf(st, PARDO_EIO, "%s: cannot create temporary file %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return PARDO_EIO;
    }
    int rc;
    const char *what = "change the mode of";
    if (fchmod(fd, 0666 & ~current_umask()) != 0) goto fail;
    what = "write";
    for (int i = 0; i < nparts; i++)
        if (parts[i].n > 0 && write_all(fd, parts[i].data, parts[i].n) != 0) goto fail;
    what = "fsync";
    if (fsync(fd) != 0) goto fail;
    what = "close";
    rc = close(fd);
    fd = -1;
    if (rc != 0) goto fail;
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        pardo_errorf(st, PARDO_EIO, "%s: cannot rename %s into place: %s", path, tmp, strerror(e));
        free(tmp);
        return PARDO_EIO;
    }
    free(tmp);
    sync_parent_dir(path);
    return PARDO_OK;
fail: {
    int e = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    pardo_errorf(st, PARDO_EIO, "%s: cannot %s temporary file %s: %s", path, what, tmp, strerror(e));
    free(tmp);
    return PARDO_EIO;
}
}
