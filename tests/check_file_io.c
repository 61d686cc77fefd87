/* check_file_io.c - src/io/file_io.c: whole-file writes that replace a
 * regular file atomically, follow a symbolic link to its target, write
 * through a FIFO or device rather than replace it (as cp does), and leave
 * nothing behind when killed part-way. */
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
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert_msg(S_ISFIFO(sb.st_mode), "the FIFO was replaced (mode %o)", (unsigned)sb.st_mode);
    ck_assert_int_eq(test_dir_count(dir), 1);
    test_dir_remove(dir);
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
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert_msg(S_ISCHR(sb.st_mode), "the device was replaced (mode %o)", (unsigned)sb.st_mode);
    ck_assert_int_eq(test_dir_count(dir), 1);
    test_dir_remove(dir);
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

Suite *make_file_io_suite(void) {
    Suite *s = suite_create("file_io");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, writes_and_replaces_regular_files);
    tcase_add_test(tc, writes_through_a_fifo);
    tcase_add_test(tc, writes_through_a_device);
    tcase_add_test(tc, follows_symbolic_links);
    tcase_add_test(tc, a_killed_write_leaves_nothing);
    suite_add_tcase(s, tc);
    return s;
}
