/* check_gemm_pick.c - the pick between the own kernel and BLAS (ops/gemm_pick.c)
 * and its cache file, in a scratch $XDG_CACHE_HOME (make test pins the kernel
 * with PARDO_GEMM=own and PARDO_GEMM_CACHE=off; each test sets its own
 * environment and resets the pick): a class measured once, written, read back
 * by the next process (a reset), whatever the product's row count; a corrupt
 * file, one of another machine (its key: kept beside ours), and a folder
 * that cannot be written never fail a product and are measured again; PARDO_GEMM and
 * PARDO_GEMM_CACHE=off override it; a product through the pick has the bits
 * of the implementation it resolves to. In a build without BLAS the pick is
 * off and every test checks that instead. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check_suites.h"
#include "gemm.h"
#include "test_util.h"

static char dir[64];
static char file[128]; /* the default cache file under dir */

static void setup(void) {
    test_scratch_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/pardo/gemm-pick", dir);
    setenv("XDG_CACHE_HOME", dir, 1);
    unsetenv("PARDO_GEMM");
    unsetenv("PARDO_GEMM_CACHE");
    pardo_gemm_pick_reset();
}

static void teardown(void) {
    char sub[128];
    snprintf(sub, sizeof sub, "%s/pardo", dir);
    test_dir_remove(sub);
    test_dir_remove(dir);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("PARDO_GEMM_CACHE");
    setenv("PARDO_GEMM", "own", 1); /* as make test runs */
    pardo_gemm_pick_reset();
}

/* A float32 product's description (no operands: resolve needs the shape alone). */
static pardo_gemm shape(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    return (pardo_gemm){.dtype = PARDO_F32, .ta = ta, .tb = tb, .m = m, .n = n, .k = k};
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The cache file's line `no` (0: the format) into buf; false where it has fewer lines. */
static bool file_line(const char *path, int no, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = false;
    for (int i = 0; i <= no && fgets(buf, (int)n, f); i++) ok = i == no;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

static bool file_has(const char *path, const char *needle) {
    size_t n = 0;
    unsigned char *data = test_read_file(path, &n);
    bool has = data && strstr((const char *)data, needle) != NULL;
    free(data);
    return has;
}

START_TEST(class_measured_once_written_and_read_back) {
    pardo_gemm g = shape(256, 512, 784, false, false);
    const pardo_gemm_impl first = pardo_gemm_resolve(&g, PARDO_GEMM_AUTO);
    if (!pardo_gemm_blas_compiled()) { /* no BLAS: no pick, no file */
        ck_assert_int_eq(first, PARDO_GEMM_OWN);
        ck_assert_int_eq(pardo_gemm_pick_measured(), 0);
        ck_assert_ptr_null(pardo_gemm_pick_path());
        ck_assert(!exists(file));
        return;
    }
    ck_assert_int_eq(pardo_gemm_pick_measured(), 1);
    ck_assert_str_eq(pardo_gemm_pick_path(), file);
    char line[4096];
    ck_assert(file_line(file, 0, line, sizeof line));
    ck_assert_str_eq(line, "pardo-gemm-pick 1");
    ck_assert(file_line(file, 1, line, sizeof line));
    ck_assert_msg(strncmp(line, "key cpu=", 8) == 0 && strstr(line, "|threads=1"), "key line: %s", line);
    ck_assert(file_has(file, first == PARDO_GEMM_BLAS ? "\nf32 0 0 wide long blas " : "\nf32 0 0 wide long own "));
    /* the same class again, and at other row counts (a part's rows): decided, not measured again */
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_AUTO), first);
    for (int64_t m = 1; m <= 1000; m *= 10) {
        pardo_gemm h = shape(m, 300, 600, false, false);
        ck_assert_int_eq(pardo_gemm_resolve(&h, PARDO_GEMM_AUTO), first);
    }
    ck_assert_int_eq(pardo_gemm_pick_measured(), 1);
    /* another class is measured and added to the file */
    pardo_gemm t = shape(256, 512, 784, false, true);
    const pardo_gemm_impl second = pardo_gemm_resolve(&t, PARDO_GEMM_AUTO);
    ck_assert_int_eq(pardo_gemm_pick_measured(), 2);
    ck_assert(file_has(file, "\nf32 0 0 wide long "));
    ck_assert(file_has(file, "\nf32 0 1 wide long "));
    /* a new process reads both back without measuring */
    pardo_gemm_pick_reset();
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_AUTO), first);
    ck_assert_int_eq(pardo_gemm_resolve(&t, PARDO_GEMM_AUTO), second);
    ck_assert_int_eq(pardo_gemm_pick_measured(), 0);
    char summary[4096];
    pardo_gemm_pick_summary(summary, sizeof summary);
    ck_assert_msg(strstr(summary, file) && strstr(summary, "f32 nn n wide k long") && strstr(summary, "2 of 48"),
                  "%s", summary);
    /* what the file says is what runs: an entry edited to blas is taken as it is */
    char key[4096];
    ck_assert(file_line(file, 1, key, sizeof key));
    char text[8192];
    snprintf(text, sizeof text, "pardo-gemm-pick 1\n%s\nf32 0 0 wide long blas 9.0 1.0\n", key);
    test_write_file(file, text, strlen(text));
    pardo_gemm_pick_reset();
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_AUTO), PARDO_GEMM_BLAS);
    ck_assert_int_eq(pardo_gemm_pick_measured(), 0);
}
END_TEST

/* Each broken file: a product resolves (measuring its class again) and the file is rewritten whole. */
START_TEST(corrupt_file_ignored_and_measured_again) {
    if (!pardo_gemm_blas_compiled()) return;
    pardo_gemm g = shape(256, 10, 512, false, false);
    pardo_gemm_resolve(&g, PARDO_GEMM_AUTO); /* a valid file, for its key */
    char key[4096];
    ck_assert(file_line(file, 1, key, sizeof key));
    char *huge = malloc(100000);
    ck_assert_ptr_nonnull(huge);
    memset(huge, 'x', 99999);
    huge[99999] = '\0';
    char bad[8][8192];
    snprintf(bad[0], sizeof bad[0], "%s", "");                                           /* empty */
    snprintf(bad[1], sizeof bad[1], "pardo-gemm-pick 2\n%s\nf32 0 0 narrow long own 1 2\n", key); /* another format */
    snprintf(bad[2], sizeof bad[2], "pardo-gemm-pick 1\n%s\nf32 0 0 narrow long maybe 1 2\n", key); /* no pick */
    snprintf(bad[3], sizeof bad[3], "pardo-gemm-pick 1\n%s\nf32 0 0 narrow long own 1", key); /* cut off */
    snprintf(bad[4], sizeof bad[4], "pardo-gemm-pick 1\n%s\nf32 2 0 narrow long own 1 2\n", key); /* ta 2 */
    snprintf(bad[5], sizeof bad[5], "pardo-gemm-pick 1\n%s\nf16 0 0 narrow long own 1 2\n", key);  /* dtype */
    snprintf(bad[6], sizeof bad[6], "pardo-gemm-pick 1\n%s\nf32 0 0 narrow long own 1 2 extra\n", key);
    snprintf(bad[7], sizeof bad[7], "\x7f" "ELF\x01\x01\x01");
    for (int i = 0; i < 10; i++) {
        if (i < 8)
            test_write_file(file, bad[i], strlen(bad[i]));
        else if (i == 8)
            test_write_file(file, huge, 99999); /* one long line */
        else {
            unsigned char bin[64];
            for (int b = 0; b < 64; b++) bin[b] = (unsigned char)(b * 37);
            test_write_file(file, bin, sizeof bin); /* NULs and all */
        }
        pardo_gemm_pick_reset();
        const pardo_gemm_impl impl = pardo_gemm_resolve(&g, PARDO_GEMM_AUTO);
        ck_assert(impl == PARDO_GEMM_OWN || impl == PARDO_GEMM_BLAS);
        ck_assert_msg(pardo_gemm_pick_measured() == 1, "broken file %d was not measured again", i);
        char line[4096];
        ck_assert(file_line(file, 0, line, sizeof line));
        ck_assert_str_eq(line, "pardo-gemm-pick 1");
        ck_assert(file_line(file, 1, line, sizeof line));
        ck_assert_str_eq(line, key);
    }
    free(huge);
}
END_TEST

START_TEST(key_mismatch_measured_again) {
    if (!pardo_gemm_blas_compiled()) return;
    /* another machine's file (or another build's kernels): its picks are not ours */
    mkdir(dir, 0700);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/pardo", dir);
    mkdir(sub, 0700);
    const char *foreign = "pardo-gemm-pick 1\nkey cpu=Some Other CPU|isa=own avx2+fma 6x16|kernels=1|blas=x|coretype=|"
                          "threads=1\nf32 1 0 wide long blas 9.0 1.0\n";
    test_write_file(file, foreign, strlen(foreign));
    pardo_gemm g = shape(784, 512, 256, true, false);
    pardo_gemm_resolve(&g, PARDO_GEMM_AUTO);
    ck_assert_int_eq(pardo_gemm_pick_measured(), 1);
    char line[4096];
    ck_assert(file_line(file, 1, line, sizeof line));
    ck_assert_msg(strstr(line, "Some Other CPU") == NULL, "the foreign key came first: %s", line);
    /* its section is kept, after ours, for the machine it belongs to */
    ck_assert(file_has(file, "\nkey cpu=Some Other CPU|isa=own avx2+fma 6x16|kernels=1|blas=x|coretype=|threads=1\n"
                             "f32 1 0 wide long blas 9.0 1.0\n"));
    pardo_gemm_pick_reset(); /* and ours is read back from it */
    pardo_gemm_resolve(&g, PARDO_GEMM_AUTO);
    ck_assert_int_eq(pardo_gemm_pick_measured(), 0);
    /* the key names the own kernels: forcing another instruction set makes a new key, measured anew */
    pardo_status st;
    char first[4096];
    ck_assert(file_line(file, 1, first, sizeof first));
    if (pardo_gemm_force_isa("avx2", &st) == PARDO_OK && strstr(first, "isa=own avx2") == NULL) {
        pardo_gemm_resolve(&g, PARDO_GEMM_AUTO);
        ck_assert_int_eq(pardo_gemm_pick_measured(), 1);
        ck_assert(file_line(file, 1, line, sizeof line));
        ck_assert_msg(strstr(line, "isa=own avx2") != NULL, "%s", line);
        ck_assert(file_has(file, first)); /* the other instruction set's section kept */
        ck_assert_int_eq(pardo_gemm_force_isa("auto", &st), PARDO_OK);
        pardo_gemm_resolve(&g, PARDO_GEMM_AUTO); /* back: read, not measured */
        ck_assert_int_eq(pardo_gemm_pick_measured(), 0);
    }
    /* a file of many keys keeps at most 8 sections, this process's first */
    char text[16384];
    size_t len = (size_t)snprintf(text, sizeof text, "pardo-gemm-pick 1\n");
    for (int i = 0; i < 12; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "key cpu=machine %d|x\nf32 0 0 wide long own 1.0 2.0\n", i);
    test_write_file(file, text, len);
    pardo_gemm_pick_reset();
    pardo_gemm g2 = shape(256, 64, 16, false, false);
    pardo_gemm_resolve(&g2, PARDO_GEMM_AUTO);
    ck_assert_int_eq(pardo_gemm_pick_measured(), 1);
    ck_assert(file_has(file, "key cpu=machine 0|x\n") && file_has(file, "key cpu=machine 6|x\n"));
    ck_assert(!file_has(file, "key cpu=machine 7|x\n"));
}
END_TEST

START_TEST(unwritable_cache_kept_in_memory) {
    pardo_gemm g = shape(256, 512, 10, false, true);
    /* the cache home is a file: no folder can be made under it */
    char home[128];
    snprintf(home, sizeof home, "%s/plain", dir);
    test_write_file(home, "x", 1);
    setenv("XDG_CACHE_HOME", home, 1);
    pardo_gemm_pick_reset();
    const pardo_gemm_impl impl = pardo_gemm_resolve(&g, PARDO_GEMM_AUTO);
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_AUTO), impl);
    ck_assert_int_eq(pardo_gemm_pick_measured(), pardo_gemm_blas_compiled() ? 1 : 0); /* once, then in memory */
    char summary[4096];
    pardo_gemm_pick_summary(summary, sizeof summary);
    if (pardo_gemm_blas_compiled()) ck_assert_msg(strstr(summary, "not written yet") != NULL, "%s", summary);
    /* a PARDO_GEMM_CACHE file in a folder that does not exist (not made: the path is the user's) */
    char path[160];
    snprintf(path, sizeof path, "%s/none/gemm-pick", dir);
    setenv("PARDO_GEMM_CACHE", path, 1);
    pardo_gemm_pick_reset();
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_AUTO), pardo_gemm_blas_compiled() ? impl : PARDO_GEMM_OWN);
    ck_assert(!exists(path));
    /* and a product through the pick runs */
    float a[4 * 3], b[5 * 3], c[4 * 5];
    for (int i = 0; i < 12; i++) a[i] = (float)i;
    for (int i = 0; i < 15; i++) b[i] = (float)(i % 4) - 1.5f;
    pardo_gemm p = {.dtype = PARDO_F32, .tb = true, .m = 4, .n = 5, .k = 3, .a = a, .lda = 3, .b = b, .ldb = 3, .c = c,
                    .ldc = 5};
    pardo_status st;
    pardo_kernel_ctx ctx = {.st = &st, .nthreads = 1};
    ck_assert_int_eq(pardo_gemm_run(&ctx, &p, PARDO_GEMM_AUTO), PARDO_OK);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            float want = 0;
            for (int q = 0; q < 3; q++) want += a[i * 3 + q] * b[j * 3 + q];
            ck_assert_double_eq_tol((double)c[i * 5 + j], (double)want, 1e-5);
        }
}
END_TEST

START_TEST(env_forces_or_turns_off) {
    pardo_gemm g = shape(256, 512, 512, false, false);
    setenv("PARDO_GEMM_CACHE", "off", 1);
    pardo_gemm_pick_reset();
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_AUTO), PARDO_GEMM_OWN);
    ck_assert_ptr_null(pardo_gemm_pick_path());
    char summary[4096];
    pardo_gemm_pick_summary(summary, sizeof summary);
    if (pardo_gemm_blas_compiled()) ck_assert_msg(strstr(summary, "PARDO_GEMM_CACHE=off") != NULL, "%s", summary);
    unsetenv("PARDO_GEMM_CACHE");
    setenv("PARDO_GEMM", "own", 1);
    pardo_gemm_pick_reset();
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_AUTO), PARDO_GEMM_OWN);
    setenv("PARDO_GEMM", "blas", 1);
    pardo_gemm_pick_reset();
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_AUTO),
                     pardo_gemm_blas_compiled() ? PARDO_GEMM_BLAS : PARDO_GEMM_OWN);
    pardo_gemm_pick_summary(summary, sizeof summary);
    if (pardo_gemm_blas_compiled()) ck_assert_msg(strstr(summary, "PARDO_GEMM=blas") != NULL, "%s", summary);
    /* an explicit implementation is never the pick's */
    ck_assert_int_eq(pardo_gemm_resolve(&g, PARDO_GEMM_OWN), PARDO_GEMM_OWN);
    ck_assert_int_eq(pardo_gemm_pick_measured(), 0);
    ck_assert(!exists(file));
}
END_TEST

/* A product through the pick gives the bits of the implementation it resolves to, on 1 and 2 threads. */
START_TEST(picked_product_has_its_implementations_bits) {
    test_pool_size(2);
    static const int64_t shapes[][5] = {{97, 70, 300, 0, 0}, {256, 10, 512, 0, 0}, {64, 512, 10, 0, 1},
                                        {300, 10, 200, 1, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        const bool ta = shapes[s][3], tb = shapes[s][4];
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n)),
              *c1 = malloc(sizeof(float) * (size_t)(m * n)), *c2 = malloc(sizeof(float) * (size_t)(m * n));
        ck_assert(a && b && c1 && c2);
        test_rng r = {(uint64_t)(s + 1)};
        for (int64_t i = 0; i < m * k; i++) a[i] = (float)test_rng_uniform(&r, -1, 1);
        for (int64_t i = 0; i < k * n; i++) b[i] = (float)test_rng_uniform(&r, -1, 1);
        pardo_gemm g = {.dtype = PARDO_F32, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .a = a, .lda = ta ? m : k,
                        .b = b, .ldb = tb ? k : n, .c = c1, .ldc = n};
        const pardo_gemm_impl impl = pardo_gemm_resolve(&g, PARDO_GEMM_AUTO);
        pardo_status st;
        for (int th = 1; th <= 2; th++) {
            pardo_kernel_ctx ctx = {.st = &st, .nthreads = th};
            g.c = c1;
            ck_assert_int_eq(pardo_gemm_run(&ctx, &g, PARDO_GEMM_AUTO), PARDO_OK);
            g.c = c2;
            ck_assert_int_eq(pardo_gemm_run(&ctx, &g, impl), PARDO_OK);
            ck_assert_msg(memcmp(c1, c2, sizeof(float) * (size_t)(m * n)) == 0,
                          "m %lld n %lld k %lld: the picked product differs from %s", (long long)m, (long long)n,
                          (long long)k, impl == PARDO_GEMM_BLAS ? "blas" : "own");
        }
        free(a);
        free(b);
        free(c1);
        free(c2);
    }
}
END_TEST

Suite *make_gemm_pick_suite(void) {
    Suite *s = suite_create("gemm_pick");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 30);
    tcase_add_checked_fixture(core, setup, teardown);
    tcase_add_test(core, class_measured_once_written_and_read_back);
    tcase_add_test(core, picked_product_has_its_implementations_bits);
    tcase_add_test(core, env_forces_or_turns_off);
    suite_add_tcase(s, core);
    TCase *err = tcase_create("Errors");
    tcase_set_timeout(err, 30);
    tcase_add_checked_fixture(err, setup, teardown);
    tcase_add_test(err, corrupt_file_ignored_and_measured_again);
    tcase_add_test(err, key_mismatch_measured_again);
    tcase_add_test(err, unwritable_cache_kept_in_memory);
    suite_add_tcase(s, err);
    return s;
}
