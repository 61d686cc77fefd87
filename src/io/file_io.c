/* file_io.c - whole-file reads and crash-safe whole-file writes (see file_io.h). */
#include "io/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bytes of physical memory (a stream longer than that cannot be held); SIZE_MAX where unknown. */
static size_t memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0 || (unsigned long)pages > SIZE_MAX / (unsigned long)page) return SIZE_MAX;
    return (size_t)pages * (size_t)page;
}

/* Reads a stream (a pipe, a device) into v->heap, as much as `need` asks
 * for (everything where need is NULL), at most the physical memory. */
static int read_stream(int fd, const char *path, pardo_file_need_fn need, pardo_file_view *v, pardo_status *st) {
    const size_t limit = memory_bytes();
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, want = PARDO_FILE_ALL;
    bool whole = false;
    int rc = PARDO_OK;
    if (need && (rc = need(NULL, 0, path, &want, &whole, st)) != PARDO_OK) goto fail;
    for (;;) {
        /* a byte past a whole file, for the format to report */
        const size_t goal = whole && want != PARDO_FILE_ALL ? want + 1 : want;
        if (goal != PARDO_FILE_ALL && len >= goal) {
            if (whole) break;
            if ((rc = need(buf, len, path, &want, &whole, st)) != PARDO_OK) goto fail;
            if (!whole && want != PARDO_FILE_ALL && want <= len) break; /* it has seen enough */
            continue;
        }
        if (goal != PARDO_FILE_ALL && goal > limit) {
            rc = pardo_errorf(st, PARDO_ENOMEM, "%s: the file would be %zu bytes, more than fit in memory (%zu)",
                              path, want, limit);
            goto fail;
        }
        if (len == cap || (goal != PARDO_FILE_ALL && goal > cap)) {
            size_t ncap = goal != PARDO_FILE_ALL ? goal : cap ? cap * 2 : 65536;
            if (ncap > limit) ncap = limit;
            if (ncap <= len) {
                rc = pardo_errorf(st, PARDO_ENOMEM, "%s: more than %zu bytes, more than fit in memory", path, len);
                goto fail;
            }
            unsigned char *nb = realloc(buf, ncap);
            if (!nb) {
                rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory reading %zu bytes", path, ncap);
                goto fail;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = pardo_errorf(st, PARDO_EIO, "%s: cannot read: %s", path, strerror(errno));
            goto fail;
        }
        if (r == 0) break; /* the end: short of what was wanted is the format's to report */
        len += (size_t)r;
        if (goal == PARDO_FILE_ALL && need && (rc = need(buf, len, path, &want, &whole, st)) != PARDO_OK) goto fail;
    }
    v->heap = buf;
    v->data = buf;
    v->n = len;
    return PARDO_OK;
fail:
    free(buf);
    return rc;
}

int pardo_file_view_open(const char *path, pardo_file_need_fn need, pardo_file_view *v, pardo_status *st) {
    memset(v, 0, sizeof(*v));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pardo_errorf(st, PARDO_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int rc = PARDO_OK;
    if (fstat(fd, &sb) != 0) {
        rc = pardo_errorf(st, PARDO_EIO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        rc = pardo_errorf(st, PARDO_EIO, "%s: cannot read a folder: %s", path, strerror(EISDIR));
    } else if (S_ISREG(sb.st_mode) && sb.st_size > 0 && (uint64_t)sb.st_size <= SIZE_MAX) {
        void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            v->map = p;
            v->map_len = (size_t)sb.st_size;
            v->data = p;
            v->n = (size_t)sb.st_size;
        } else {
            rc = read_stream(fd, path, need, v, st); /* a file that cannot be mapped is read as it comes */
        }
    } else if (!S_ISREG(sb.st_mode)) {
        rc = read_stream(fd, path, need, v, st);
    }
    close(fd);
    return rc;
}

void pardo_file_view_close(pardo_file_view *v) {
    if (!v) return;
    if (v->map) munmap(v->map, v->map_len);
    free(v->heap);
    memset(v, 0, sizeof(*v));
}

int pardo_file_read_all(const char *path, unsigned char **data, size_t *n, pardo_status *st) {
    *data = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pardo_errorf(st, PARDO_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int rc;
    pardo_file_view v = {0};
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) rc = pardo_errorf(st, PARDO_EIO, "%s: cannot read a folder: %s",
                                                                       path, strerror(EISDIR));
    else rc = read_stream(fd, path, NULL, &v, st);
    close(fd);
    if (rc == PARDO_OK) {
        *data = v.heap ? v.heap : malloc(1);
        *n = v.n;
        if (!*data) rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory reading the file", path);
    }
    return rc;
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
        /* a relative target is in the link's folder */
        int dir = target[0] != '/' && slash ? (int)(slash - cur) + 1 : 0;
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

static int write_parts(int fd, const pardo_file_part *parts, int nparts) {
    for (int i = 0; i < nparts; i++)
        if (parts[i].n > 0 && write_all(fd, parts[i].data, parts[i].n) != 0) return -1;
    return 0;
}

/* Writes the parts as a named temporary file "TARGET.tmpXXXXXX" renamed over
 * target: the way for a filesystem without O_TMPFILE (a crash leaves the
 * temporary file behind). */
static int write_named(const char *path, const char *target, const pardo_file_part *parts, int nparts,
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
    if (write_parts(fd, parts, nparts) != 0) goto fail;
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

/* Names the unnamed file fd: linkat through /proc/self/fd, else with
 * AT_EMPTY_PATH (which needs CAP_DAC_READ_SEARCH). 0, or -1 with errno
 * (EEXIST: name exists). */
static int link_unnamed(int fd, const char *name) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno == EEXIST) return -1;
    int e = errno;
    if (linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH) == 0) return 0;
    if (errno != EEXIST) errno = e;
    return -1;
}

/* Links fd as a fresh "TARGET.tmpXXXXXX" (written into tmp, of plen + 11
 * bytes) and renames that over target: linkat cannot replace a file, and the
 * name lasts only an instant. 0, or -1 with errno and *what the step. */
static int link_over(int fd, const char *target, char *tmp, size_t plen, const char **what) {
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static atomic_uint counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
    memcpy(tmp, target, plen);
    *what = "link";
    for (int attempt = 0;; attempt++) {
        x += 0x9e3779b97f4a7c15ull * (1 + atomic_fetch_add(&counter, 1)); /* splitmix64 */
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        memcpy(tmp + plen, ".tmp", 4);
        for (int i = 0; i < 6; i++, z /= 62) tmp[plen + 4 + i] = digits[z % 62];
        tmp[plen + 10] = '\0';
        if (link_unnamed(fd, tmp) == 0) break;
        if (errno != EEXIST || attempt == 99) return -1;
    }
    *what = "rename";
    if (rename(tmp, target) == 0) return 0;
    int e = errno;
    unlink(tmp);
    errno = e;
    return -1;
}

/* Writes the parts as an unnamed file in target's folder (O_TMPFILE, mode
 * 0666 less the umask), fsynced, then given target's name (linked straight
 * to it when there is no file there, else linked to a unique name renamed
 * over it), so that a crash at any point leaves no temporary file. Sets
 * *unsupported and changes nothing where the kernel, the filesystem or the
 * process cannot do that (no O_TMPFILE, no /proc and no capability). */
static int write_unnamed(const char *path, const char *target, const pardo_file_part *parts, int nparts,
                         bool *unsupported, pardo_status *st) {
    *unsupported = false;
    const char *slash = strrchr(target, '/');
    size_t plen = strlen(target);
    char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target)) : strdup(".");
    char *tmp = malloc(plen + sizeof(".tmpXXXXXX"));
    if (!dir || !tmp) {
        free(dir);
        free(tmp);
        return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    }
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    free(dir);
    if (fd < 0) { /* EOPNOTSUPP, EISDIR (a kernel without O_TMPFILE), and errors the named way reports too */
        free(tmp);
        *unsupported = true;
        return PARDO_OK;
    }
    struct stat sb;
    const bool exists = lstat(target, &sb) == 0;
    const char *what = "write";
    int rc = -1;
    if (write_parts(fd, parts, nparts) != 0) goto fail;
    what = "fsync";
    if (fsync(fd) != 0) goto fail;
    what = "link";
    rc = exists ? -1 : link_unnamed(fd, target);
    if (rc != 0 && (exists || errno == EEXIST)) rc = link_over(fd, target, tmp, plen, &what);
    if (rc != 0 && strcmp(what, "link") == 0 && errno != EEXIST) { /* no way to name it here: the named way */
        close(fd);
        free(tmp);
        *unsupported = true;
        return PARDO_OK;
    }
    if (rc != 0) goto fail;
    close(fd); /* written and fsynced: nothing is lost at close */
    free(tmp);
    sync_parent_dir(target);
    return PARDO_OK;
fail: {
    int e = errno;
    close(fd);
    if (strcmp(what, "rename") == 0)
        pardo_errorf(st, PARDO_EIO, "%s: cannot rename %s into place: %s", path, tmp, strerror(e));
    else pardo_errorf(st, PARDO_EIO, "%s: cannot %s the new file: %s", path, what, strerror(e));
    free(tmp);
    return PARDO_EIO;
}
}

/* Writes the parts as a new file that replaces target (a regular file, a
 * folder that makes the rename fail, or nothing yet). */
static int write_replacing(const char *path, const char *target, const pardo_file_part *parts, int nparts,
                           pardo_status *st) {
    bool unsupported;
    int rc = write_unnamed(path, target, parts, nparts, &unsupported, st);
    return unsupported ? write_named(path, target, parts, nparts, st) : rc;
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
