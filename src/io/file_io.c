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

/* The file a write to path lands on: path with the symbolic links of its
 * last component followed, as cp writes through a link (a link to a
 * checkpoint stays a link, and its target is replaced). A new string the
 * caller frees, or NULL with st filled. */
static char *follow_links(const char *path, pardo_status *st) {
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0 || !S_ISLNK(sb.st_mode)) return cur;
        char target[4096];
        ssize_t n = hops < 40 ? readlink(cur, target, sizeof target - 1) : -1;
        if (n < 0) {
            int e = hops < 40 ? errno : ELOOP;
            pardo_errorf(st, PARDO_EIO, "%s: cannot follow the link %s: %s", path, cur, strerror(e));
            free(cur);
            return NULL;
        }
        target[n] = '\0';
        const char *slash = strrchr(cur, '/');
        int dir = target[0] != '/' && slash ? (int)(slash - cur) + 1 : 0; /* a relative target is in the link's folder */
        char *next = malloc((size_t)dir + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, (size_t)dir);
            memcpy(next + dir, target, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    return NULL;
}

/* Writes the parts straight into target, a FIFO, device or socket that
 * exists (as cp does: a temporary file renamed over it would replace the
 * node itself). Nothing to fsync or rename. */
static int write_through(const char *path, const char *target, const pardo_file_part *parts, int nparts,
                         pardo_status *st) {
    int fd = open(target, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return pardo_errorf(st, PARDO_EIO, "%s: cannot open: %s", path, strerror(errno));
    for (int i = 0; i < nparts; i++)
        if (parts[i].n > 0 && write_all(fd, parts[i].data, parts[i].n) != 0) {
            int e = errno;
            close(fd);
            return pardo_errorf(st, PARDO_EIO, "%s: cannot write: %s", path, strerror(e));
        }
    if (close(fd) != 0) return pardo_errorf(st, PARDO_EIO, "%s: cannot write: %s", path, strerror(errno));
    return PARDO_OK;
}

/* Writes the parts as a new file renamed over target (a regular file, a
 * folder that makes the rename fail, or nothing yet). */
static int write_replacing(const char *path, const char *target, const pardo_file_part *parts, int nparts,
                           pardo_status *st) {
    size_t plen = strlen(target);
    char *tmp = malloc(plen + sizeof(".tmpXXXXXX"));
    if (!tmp) return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    memcpy(tmp, target, plen);
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
    if (rename(tmp, target) != 0) {
        int e = errno;
        unlink(tmp);
        pardo_errorf(st, PARDO_EIO, "%s: cannot rename %s into place: %s", path, tmp, strerror(e));
        free(tmp);
        return PARDO_EIO;
    }
    free(tmp);
    sync_parent_dir(target);
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

int pardo_file_write_atomic(const char *path, const pardo_file_part *parts, int nparts, pardo_status *st) {
    char *target = follow_links(path, st);
    if (!target) return st->code;
    struct stat sb;
    int rc = stat(target, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)
                 ? write_through(path, target, parts, nparts, st)
                 : write_replacing(path, target, parts, nparts, st);
    free(target);
    return rc;
}
