/* check_file_io.c - src/io/file_io.c: whole-file writes that replace a
 * regular file atomically, follow a symbolic link to its target, write
 * through a FIFO or device rather than replace it (as cp does), and leave
 * nothing behind when killed part-way; reads that map a regular file and
 * read a stream only as far as its format needs, so that the readers of
 * .npy, checkpoints and traces refuse /dev/zero or a 2 GiB sparse file of
 * zeros from their first bytes. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_suites.h"
#include "io/file_io.h"
#include "io/npy.h"
#include "io/npy_map.h"
#include "io/safetensors.h"
#include "trace/trace_report.h"
#include "train/progress.h"
#include "test_util.h"

/* Fails the test unless path holds exactly the n bytes at want. */
static void assert_holds(const char *path, const char *want, size_t n) {
    size_t got;
    unsigned char *b = test_read_file(path, &got);
    ck_assert_msg(got == n && memcmp(b, want, n) == 0, "%s holds %zu bytes, expected %zu", path, got, n);
    free(b);
}

static int write_text(const char *path, const char *text, pardo_status *st) {
    pardo_file_part parts[2] = {{text, 3}, {text + 3, strlen(text) - 3}};
    return pardo_file_write_atomic(path, parts, 2, st);
}

/* Fails the test unless path is still a node of kind (S_IFIFO, S_IFCHR) and alone in dir; then removes dir. */
static void assert_node_kept(const char *dir, const char *path, mode_t kind) {
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert_msg((sb.st_mode & S_IFMT) == kind, "%s was replaced (mode %o)", path, (unsigned)sb.st_mode);
    ck_assert_int_eq(test_dir_count(dir), 1);
    test_dir_remove(dir);
}

/* A new file, then one replaced: the whole text, mode 0666 less the umask, nothing else in the folder. */
START_TEST(writes_and_replaces_regular_files) {
    char dir[64], path[128];
    pardo_status st;
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    ck_assert_msg(write_text(path, "first version", &st) == PARDO_OK, "%s", st.msg);
    assert_holds(path, "first version", 13);
    ck_assert_msg(write_text(path, "second", &st) == PARDO_OK, "%s", st.msg);
    assert_holds(path, "second", 6);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    mode_t mask = umask(022);
    umask(mask);
    ck_assert_uint_eq(sb.st_mode & 0777, 0666 & ~mask);
    ck_assert_int_eq(test_dir_count(dir), 1);
    test_dir_remove(dir);
}
END_TEST

/* A FIFO at the path is written through (its reader gets the bytes) and stays a FIFO. */
START_TEST(writes_through_a_fifo) {
    char dir[64], path[128];
    pardo_status st;
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/pipe", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    int rd = open(path, O_RDONLY | O_NONBLOCK); /* a reader is there: the writer's open does not wait */
    ck_assert_int_ge(rd, 0);
    ck_assert_msg(write_text(path, "through the pipe", &st) == PARDO_OK, "%s", st.msg);
    char got[64];
    ssize_t n = read(rd, got, sizeof got);
    close(rd);
    ck_assert_int_eq(n, 16);
    ck_assert_int_eq(memcmp(got, "through the pipe", 16), 0);
    assert_node_kept(dir, path, S_IFIFO);
}
END_TEST

/* A device node like /dev/null (made where we may: as root) is written through and stays a device. */
START_TEST(writes_through_a_device) {
    char dir[64], path[128];
    pardo_status st;
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/null", dir);
    if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) != 0) { /* not root, or no devices here */
        test_dir_remove(dir);
        return;
    }
    ck_assert_msg(write_text(path, "into the void", &st) == PARDO_OK, "%s", st.msg);
    assert_node_kept(dir, path, S_IFCHR);
}
END_TEST

/* A symbolic link stays a link and its target gets the text: absolute, relative, a chain, dangling. */
START_TEST(follows_symbolic_links) {
    char dir[64], path[128], link[128], link2[128];
    pardo_status st;
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/real.json", dir);
    snprintf(link, sizeof link, "%s/link.json", dir);
    snprintf(link2, sizeof link2, "%s/link2.json", dir);
    test_write_file(path, "old", 3);
    ck_assert_int_eq(symlink(path, link), 0);
    ck_assert_msg(write_text(link, "via the link", &st) == PARDO_OK, "%s", st.msg);
    struct stat sb;
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert_msg(S_ISLNK(sb.st_mode), "the link was replaced by a file");
    assert_holds(path, "via the link", 12);
    /* relative, through a second link */
    ck_assert_int_eq(symlink("link.json", link2), 0);
    ck_assert_msg(write_text(link2, "two hops", &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(lstat(link2, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    assert_holds(path, "two hops", 8);
    ck_assert_int_eq(test_dir_count(dir), 3);
    /* dangling: the target is made */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_msg(write_text(link, "made anew", &st) == PARDO_OK, "%s", st.msg);
    assert_holds(path, "made anew", 9);
    /* a loop is an error naming the path */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(symlink("link2.json", path), 0);
    ck_assert_int_eq(write_text(link, "never", &st), PARDO_EIO);
    ck_assert_msg(strstr(st.msg, link) != NULL, "%s", st.msg);
    ck_assert_int_eq(test_dir_count(dir), 3);
    test_dir_remove(dir);
}
END_TEST

/* True once process pid has a file of folder dir open (its fds, read from /proc), false after 10 s. */
static bool opens_a_file_in(pid_t pid, const char *dir) {
    char fds[64], link[320], target[512];
    size_t dl = strlen(dir);
    snprintf(fds, sizeof fds, "/proc/%d/fd", (int)pid);
    for (int tries = 0; tries < 100000; tries++) {
        DIR *d = opendir(fds);
        if (!d) return false;
        bool found = false;
        for (struct dirent *e; !found && (e = readdir(d));) {
            snprintf(link, sizeof link, "%s/%s", fds, e->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n > (ssize_t)dl && memcmp(target, dir, dl) == 0 && target[dl] == '/') found = true;
        }
        closedir(d);
        if (found) return true;
        usleep(100);
    }
    return false;
}

/* A process killed (SIGKILL) while it writes a 64 MiB checkpoint leaves nothing in the folder: the new file has no
 * name until it is whole (O_TMPFILE), then it is the whole file. Where the folder's filesystem has no O_TMPFILE the
 * named way is taken, which may leave a temporary file, and only the write itself is checked. */
START_TEST(a_killed_write_leaves_nothing) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    int probe = open(dir, O_TMPFILE | O_WRONLY, 0600);
    bool unnamed = probe >= 0;
    if (probe >= 0) close(probe);
    enum { PART = 8 << 20, PARTS = 8 };
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char *zeros = calloc(1, PART);
        pardo_file_part parts[PARTS];
        for (int i = 0; i < PARTS; i++) parts[i] = (pardo_file_part){zeros, PART};
        pardo_status st;
        _exit(zeros && pardo_file_write_atomic(path, parts, PARTS, &st) == PARDO_OK ? 0 : 1);
    }
    bool seen = opens_a_file_in(pid, dir); /* the write has begun */
    kill(pid, SIGKILL);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(seen || WIFEXITED(status));
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[384];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        ck_assert_int_eq(stat(p, &sb), 0);
        if (unnamed || strcmp(e->d_name, "ck.safetensors") == 0)
            ck_assert_msg(strcmp(e->d_name, "ck.safetensors") == 0 && sb.st_size == (off_t)PART * PARTS,
                          "the killed write left %s of %lld bytes", e->d_name, (long long)sb.st_size);
    }
    closedir(d);
    test_dir_remove(dir);
}
END_TEST

/* ---- reads ---- */

/* A regular file is mapped, not read; an empty one has no bytes; a folder is an error. */
START_TEST(views_map_regular_files) {
    char dir[64], path[128];
    pardo_status st;
    pardo_file_view v;
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/f.bin", dir);
    test_write_file(path, "0123456789", 10);
    ck_assert_int_eq(pardo_file_view_open(path, pardo_npy_stream_need, &v, &st), PARDO_OK);
    ck_assert_ptr_nonnull(v.map);
    ck_assert_uint_eq(v.n, 10);
    ck_assert_int_eq(memcmp(v.data, "0123456789", 10), 0);
    pardo_file_view_close(&v);
    test_write_file(path, "", 0);
    ck_assert_int_eq(pardo_file_view_open(path, NULL, &v, &st), PARDO_OK);
    ck_assert_uint_eq(v.n, 0);
    pardo_file_view_close(&v);
    ck_assert_int_eq(pardo_file_view_open(dir, NULL, &v, &st), PARDO_EIO);
    ck_assert_msg(strstr(st.msg, dir) && strstr(st.msg, "folder"), "%s", st.msg);
    test_dir_remove(dir);
}
END_TEST

/* "/proc/self/fd/N" of a pipe's read end that holds the n bytes at data (n within the pipe's buffer). */
static const char *pipe_of(const void *data, size_t n, int *rd) {
    static char path[64];
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(write(fds[1], data, n), (ssize_t)n);
    close(fds[1]);
    *rd = fds[0];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    return path;
}

/* A .npy file, a checkpoint and a trace read from a pipe: the same as from a file; a byte more or less is an error. */
START_TEST(streams_read_as_much_as_the_format_needs) {
    pardo_status st;
    size_t n;
    int rd;
    unsigned char *img = test_read_file(test_fixture("f8_3x4.npy"), &n);
    pardo_tensor *t = NULL, *ref = test_npy_load("f8_3x4.npy");
    ck_assert_msg(pardo_npy_read(pipe_of(img, n, &rd), &t, &st) == PARDO_OK, "%s", st.msg);
    close(rd);
    test_assert_close(t, ref, 0, 0);
    pardo_tensor_release(t);
    pardo_tensor_release(ref);
    ck_assert_int_eq(pardo_npy_read(pipe_of(img, n - 1, &rd), &t, &st), PARDO_EPARSE);
    close(rd);
    ck_assert_msg(strstr(st.msg, "truncated"), "%s", st.msg);
    unsigned char *more = malloc(n + 5);
    memcpy(more, img, n);
    memset(more + n, 0, 5);
    ck_assert_int_eq(pardo_npy_read(pipe_of(more, n + 5, &rd), &t, &st), PARDO_EPARSE);
    close(rd);
    ck_assert_msg(strstr(st.msg, "expected the end of the file"), "%s", st.msg);
    free(more);
    free(img);

    img = test_read_file(test_fixture("model.safetensors"), &n);
    pardo_tensor_list a, b;
    pardo_tensor_list_init(&a);
    pardo_tensor_list_init(&b);
    ck_assert_msg(pardo_safetensors_read(test_fixture("model.safetensors"), &a, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_safetensors_read(pipe_of(img, n, &rd), &b, &st) == PARDO_OK, "%s", st.msg);
    close(rd);
    ck_assert_int_eq(a.n, b.n);
    for (int k = 0; k < a.n; k++) {
        ck_assert_str_eq(a.names[k], b.names[k]);
        test_assert_close(a.tensors[k], b.tensors[k], 0, 0);
    }
    pardo_tensor_list_clear(&a);
    pardo_tensor_list_clear(&b);
    ck_assert_int_eq(pardo_safetensors_read(pipe_of(img, n - 1, &rd), &b, &st), PARDO_EPARSE);
    close(rd);
    free(img);

    const char *trace = "  {\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 2, \"tid\": 1}]}";
    pardo_trace_model *m = NULL;
    ck_assert_msg(pardo_trace_model_load(pipe_of(trace, strlen(trace), &rd), &m, &st) == PARDO_OK, "%s", st.msg);
    close(rd);
    ck_assert_int_eq(m->n_ev, 1);
    pardo_trace_model_free(m);
}
END_TEST

/* /dev/zero, endless, is refused by every reader at its first bytes, never read into memory. */
START_TEST(readers_refuse_dev_zero_at_once) {
    pardo_status st;
    double t0 = pardo_now_s();
    pardo_tensor *t = NULL;
    ck_assert_int_eq(pardo_npy_read("/dev/zero", &t, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "/dev/zero: byte 0") && strstr(st.msg, "magic"), "%s", st.msg);
    pardo_npy_map *nm = NULL;
    ck_assert_int_eq(pardo_npy_map_open("/dev/zero", &nm, &st), PARDO_EPARSE);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    ck_assert_int_eq(pardo_safetensors_read("/dev/zero", &l, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "/dev/zero: byte 8"), "%s", st.msg);
    pardo_trace_model *m = NULL;
    ck_assert_int_eq(pardo_trace_model_load("/dev/zero", &m, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "/dev/zero: byte 0") && !strstr(st.msg, "empty"), "%s", st.msg);
    ck_assert_msg(pardo_now_s() - t0 < 5, "took %.1f s", pardo_now_s() - t0);
}
END_TEST

/* A 2 GiB sparse file of zeros (truncate) is refused from its header, at once: mapped, not read. */
START_TEST(readers_refuse_a_sparse_file_at_once) {
    char dir[64], path[128];
    pardo_status st;
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/big.npy", dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)2 << 30), 0);
    close(fd);
    double t0 = pardo_now_s();
    pardo_tensor *t = NULL;
    ck_assert_int_eq(pardo_npy_read(path, &t, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "byte 0") && strstr(st.msg, "magic"), "%s", st.msg);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    ck_assert_int_eq(pardo_safetensors_read(path, &l, &st), PARDO_EPARSE);
    pardo_trace_model *m = NULL;
    ck_assert_int_eq(pardo_trace_model_load(path, &m, &st), PARDO_EPARSE);
    ck_assert_msg(strstr(st.msg, "byte 0") && !strstr(st.msg, "empty"), "%s", st.msg);
    ck_assert_msg(pardo_now_s() - t0 < 5, "took %.1f s", pardo_now_s() - t0);
    test_dir_remove(dir);
}
END_TEST

Suite *make_file_io_suite(void) {
    Suite *s = suite_create("file_io");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, writes_and_replaces_regular_files);
    tcase_add_test(tc, writes_through_a_fifo);
    tcase_add_test(tc, writes_through_a_device);
    tcase_add_test(tc, follows_symbolic_links);
    tcase_add_test(tc, a_killed_write_leaves_nothing);
    tcase_add_test(tc, views_map_regular_files);
    tcase_add_test(tc, streams_read_as_much_as_the_format_needs);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, readers_refuse_dev_zero_at_once);
    tcase_add_test(te, readers_refuse_a_sparse_file_at_once);
    suite_add_tcase(s, te);
    return s;
}
