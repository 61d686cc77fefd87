/* check_loader.c - the data loader of `pardo train` and the mapped .npy
 * reader under it: batches in file order and in a seeded shuffle (checked
 * row by row against a naive gather from the arrays read with pardo's own
 * .npy reader), the last partial batch kept or dropped, a start in the
 * middle of an epoch, the queue that never holds more than its capacity,
 * errors of the producer and stops of the consumer through the
 * Coordinator, the files the mapped reader rejects, the shards of an
 * MPI job's ranks against one process's batches, and refilled batch slots
 * whose device copies go stale. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check_suites.h"
#include "train/loader.h"
#include "io/npy.h"
#include "test_util.h"

#define ROWS 10
#define COLS 3

static char dir[64];
static char x_path[128], y_path[128];
static pardo_tensor *x_ref, *y_ref; /* what pardo_npy_read gives for the files */
static pardo_npy_map *x_map, *y_map;

/* A folder with x (float32 [10, 3]) and y (int64 [10]) written by pardo's .npy writer. */
static void setup(void) {
    pardo_status st;
    test_scratch_dir(dir, sizeof dir);
    snprintf(x_path, sizeof x_path, "%s/x.npy", dir);
    snprintf(y_path, sizeof y_path, "%s/y.npy", dir);
    test_rng r = {11};
    int64_t xs[2] = {ROWS, COLS}, ys[1] = {ROWS};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1);
    double yv[ROWS];
    for (int i = 0; i < ROWS; i++) yv[i] = 100 + i; /* row i's label says which row it is */
    pardo_tensor *y = test_tensor_from(PARDO_I64, 1, ys, yv);
    ck_assert(pardo_npy_write(x_path, x, &st) == PARDO_OK);
    ck_assert(pardo_npy_write(y_path, y, &st) == PARDO_OK);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
    ck_assert(pardo_npy_read(x_path, &x_ref, &st) == PARDO_OK);
    ck_assert(pardo_npy_read(y_path, &y_ref, &st) == PARDO_OK);
    ck_assert_msg(pardo_npy_map_open(x_path, &x_map, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_npy_map_open(y_path, &y_map, &st) == PARDO_OK, "%s", st.msg);
}

static void teardown(void) {
    pardo_npy_map_close(x_map);
    pardo_npy_map_close(y_map);
    pardo_tensor_release(x_ref);
    pardo_tensor_release(y_ref);
    test_dir_remove(dir);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pardo_loader *make_loader(int64_t bs, bool shuffle, uint64_t seed, bool drop_last) {
    pardo_status st;
    pardo_loader_source src[2] = {{"x", x_map}, {"y", y_map}};
    pardo_loader_options opt = {.batch_size = bs, .shuffle = shuffle, .seed = seed, .drop_last = drop_last};
    pardo_loader *l = NULL;
    ck_assert_msg(pardo_loader_new(src, 2, &opt, &l, &st) == PARDO_OK, "%s", st.msg);
    return l;
}

/* Checks batch b against rows order[first_row ...] of the reference arrays. */
static void check_batch(const pardo_batch *b, const int64_t *order) {
    pardo_tensor *x = b->tensors[0], *y = b->tensors[1];
    ck_assert_int_eq(x->shape[0], b->rows);
    ck_assert_int_eq(y->shape[0], b->rows);
    for (int64_t r = 0; r < b->rows; r++) {
        int64_t src = order[b->first_row + r];
        ck_assert_double_eq(pardo_tensor_get_f64(y, r), pardo_tensor_get_f64(y_ref, src));
        for (int c = 0; c < COLS; c++)
            ck_assert_double_eq(pardo_tensor_get_f64(x, r * COLS + c), pardo_tensor_get_f64(x_ref, src * COLS + c));
    }
}

/* Runs epochs [e0, e1) from batch b0 of an unshuffled loader, checks every
 * batch against the file order, and returns how many came (rows of each in rows_seen). */
static int drain(pardo_loader *l, int64_t e0, int64_t b0, int64_t e1, int64_t *rows_seen, int max) {
    pardo_status st;
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert_msg(pardo_loader_start(l, g, c, e0, b0, e1, &st) == PARDO_OK, "%s", st.msg);
    int64_t order[ROWS];
    pardo_loader_order(ROWS, false, 0, 0, order);
    int n = 0;
    const pardo_batch *b;
    int64_t e = e0, i = b0;
    while (pardo_loader_next(l, &b, &st) == PARDO_OK) {
        ck_assert_int_eq(b->epoch, e);
        ck_assert_int_eq(b->index, i);
        check_batch(b, order);
        ck_assert(n < max);
        rows_seen[n++] = b->rows;
        pardo_loader_release(l, b);
        if (++i == pardo_loader_batches(l)) e++, i = 0;
    }
    ck_assert_int_eq(st.code, PARDO_ENOTFOUND); /* every batch asked for came */
    ck_assert_int_eq(pardo_loader_join(l, &st), PARDO_OK);
    ck_assert_int_eq(pardo_coordinator_join(c, 1, &st), PARDO_OK);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
    return n;
}

/* Every batch of epochs [0, epochs) of l: its labels (row ids) in ids[batch][0..rows[batch]). Returns the
 * batch count. */
static int collect(pardo_loader *l, int64_t epochs, double ids[][ROWS], int64_t *rows, int max) {
    pardo_status st;
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert_msg(pardo_loader_start(l, g, c, 0, 0, epochs, &st) == PARDO_OK, "%s", st.msg);
    int n = 0;
    const pardo_batch *b;
    while (pardo_loader_next(l, &b, &st) == PARDO_OK) {
        ck_assert(n < max);
        rows[n] = b->rows;
        for (int64_t r = 0; r < b->rows; r++) ids[n][r] = pardo_tensor_get_f64(b->tensors[1], r);
        n++;
        pardo_loader_release(l, b);
    }
    ck_assert_int_eq(st.code, PARDO_ENOTFOUND);
    ck_assert_int_eq(pardo_loader_join(l, &st), PARDO_OK);
    ck_assert_int_eq(pardo_coordinator_join(c, 1, &st), PARDO_OK);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
    return n;
}

/* Shards (an MPI job's ranks): rank r's batch k is rows r, r + R, ... of
 * one process's batch k of R x B rows (the same seeded shuffle), so the
 * ranks together see what one process sees, the last chunk included; a last
 * chunk of fewer rows than ranks is left out on every rank (and counted),
 * or dropped with drop_last. */
START_TEST(ranks_together_give_one_process_batches) {
    enum { MAXB = 64 };
    static double one[MAXB][ROWS], part[MAXB][ROWS];
    int64_t one_rows[MAXB], part_rows[MAXB];
    const int ranks[] = {2, 3, 4};
    for (int ri = 0; ri < 3; ri++)
        for (int64_t bs = 1; bs <= 3; bs++)
            for (int mode = 0; mode < 4; mode++) {
                const int R = ranks[ri];
                const bool shuffle = mode & 1, drop_last = mode & 2;
                pardo_status st;
                pardo_loader_source src[2] = {{"x", x_map}, {"y", y_map}};
                pardo_loader_options opt = {.batch_size = bs * R, .shuffle = shuffle, .seed = 9, .drop_last = drop_last};
                pardo_loader *l = NULL;
                if (pardo_loader_new(src, 2, &opt, &l, &st) != PARDO_OK) continue; /* drop_last, no full batch */
                const int n_one = collect(l, 2, one, one_rows, MAXB);
                pardo_loader_free(l);
                const int64_t rem = ROWS % (bs * R), left_out = !drop_last && rem && rem < R ? rem : 0;
                for (int r = 0; r < R; r++) {
                    opt = (pardo_loader_options){.batch_size = bs, .shuffle = shuffle, .seed = 9,
                                                 .drop_last = drop_last, .rank = r, .ranks = R};
                    ck_assert_msg(pardo_loader_new(src, 2, &opt, &l, &st) == PARDO_OK, "%s", st.msg);
                    ck_assert_int_eq(pardo_loader_rows_left_out(l), left_out);
                    const int n = collect(l, 2, part, part_rows, MAXB);
                    pardo_loader_free(l);
                    /* the same batches on every rank; one fewer per epoch than one process when left out */
                    ck_assert_msg(n == n_one - (left_out ? 2 : 0), "%d ranks, B %lld, mode %d: %d batches, one "
                                  "process %d", R, (long long)bs, mode, n, n_one);
                    for (int k = 0, ko = 0; k < n; k++, ko++) {
                        if (left_out && ko == n_one / 2 - 1) ko++; /* epoch 0's left-out chunk */
                        int64_t want = (one_rows[ko] - r + R - 1) / R;
                        ck_assert_int_eq(part_rows[k], want);
                        ck_assert(want > 0);
                        for (int64_t j = 0; j < want; j++)
                            ck_assert_msg(part[k][j] == one[ko][r + j * R], "%d ranks, rank %d, B %lld, mode %d, "
                                          "batch %d row %lld: %g, expected %g", R, r, (long long)bs, mode, k,
                                          (long long)j, part[k][j], one[ko][r + j * R]);
                    }
                }
            }
}
END_TEST

START_TEST(file_order_keeps_the_last_partial_batch) {
    pardo_loader *l = make_loader(4, false, 0, false);
    ck_assert_int_eq(pardo_loader_rows(l), ROWS);
    ck_assert_int_eq(pardo_loader_batches(l), 3);
    pardo_status st;
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert(pardo_loader_start(l, g, c, 0, 0, 2, &st) == PARDO_OK);
    int64_t order[ROWS], want_rows[3] = {4, 4, 2};
    pardo_loader_order(ROWS, false, 0, 0, order);
    for (int i = 0; i < ROWS; i++) ck_assert_int_eq(order[i], i);
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < 3; i++) {
            const pardo_batch *b;
            ck_assert_msg(pardo_loader_next(l, &b, &st) == PARDO_OK, "%s", st.msg);
            ck_assert_int_eq(b->epoch, e);
            ck_assert_int_eq(b->index, i);
            ck_assert_int_eq(b->rows, want_rows[i]);
            check_batch(b, order);
            pardo_loader_release(l, b);
        }
    const pardo_batch *b;
    ck_assert_int_eq(pardo_loader_next(l, &b, &st), PARDO_ENOTFOUND);
    ck_assert_int_eq(pardo_loader_join(l, &st), PARDO_OK);
    ck_assert_int_eq(pardo_coordinator_join(c, 1, &st), PARDO_OK);
    pardo_loader_free(l);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
}
END_TEST

START_TEST(drop_last_drops_the_short_batch) {
    pardo_loader *l = make_loader(4, false, 0, true);
    ck_assert_int_eq(pardo_loader_batches(l), 2);
    int64_t rows[8];
    int n = drain(l, 0, 0, 3, rows, 8);
    ck_assert_int_eq(n, 6);
    for (int i = 0; i < n; i++) ck_assert_int_eq(rows[i], 4);
    ck_assert_ptr_null(pardo_loader_probe(l, 2));
    ck_assert_ptr_nonnull(pardo_loader_probe(l, 4));
    pardo_loader_free(l);
    /* an exact fit has no short batch either way */
    l = make_loader(5, false, 0, false);
    ck_assert_int_eq(pardo_loader_batches(l), 2);
    ck_assert_ptr_null(pardo_loader_probe(l, 0));
    pardo_loader_free(l);
    /* one batch larger than the data: the whole data, short */
    l = make_loader(64, false, 0, false);
    ck_assert_int_eq(pardo_loader_batches(l), 1);
    n = drain(l, 0, 0, 2, rows, 8);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(rows[0], ROWS);
    pardo_loader_free(l);
}
END_TEST

static bool is_permutation(const int64_t *o, int64_t n) {
    bool seen[ROWS * 100] = {false};
    for (int64_t i = 0; i < n; i++) {
        if (o[i] < 0 || o[i] >= n || seen[o[i]]) return false;
        seen[o[i]] = true;
    }
    return true;
}

START_TEST(shuffle_is_a_seeded_permutation_per_epoch) {
    enum { N = 1000 };
    static int64_t a[N], b[N], c[N], d[N];
    pardo_loader_order(N, true, 42, 0, a);
    pardo_loader_order(N, true, 42, 0, b);
    pardo_loader_order(N, true, 42, 1, c);
    pardo_loader_order(N, true, 43, 0, d);
    ck_assert(is_permutation(a, N) && is_permutation(c, N) && is_permutation(d, N));
    ck_assert(memcmp(a, b, sizeof a) == 0); /* reproducible */
    ck_assert(memcmp(a, c, sizeof a) != 0); /* a new order each epoch */
    ck_assert(memcmp(a, d, sizeof a) != 0); /* and for each seed */
    int fixed = 0;
    for (int i = 0; i < N; i++) fixed += a[i] == i;
    ck_assert_int_lt(fixed, 20); /* a shuffle, not the identity (about 1 fixed point expected) */
    /* every position is equally likely: row 0 lands in each tenth about as often */
    int buckets[10] = {0};
    for (int s = 0; s < 2000; s++) {
        int64_t o[10];
        pardo_loader_order(10, true, (uint64_t)s, 0, o);
        for (int i = 0; i < 10; i++)
            if (o[i] == 0) buckets[i]++;
    }
    for (int i = 0; i < 10; i++) ck_assert_msg(buckets[i] > 120 && buckets[i] < 280, "position %d: %d", i, buckets[i]);
}
END_TEST

START_TEST(shuffled_batches_follow_the_order) {
    pardo_status st;
    pardo_loader *l = make_loader(3, true, 7, false);
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    /* start in epoch 1 at batch 2, go through epoch 2 */
    ck_assert(pardo_loader_start(l, g, c, 1, 2, 3, &st) == PARDO_OK);
    int64_t order[ROWS];
    int64_t seen = 0;
    for (int e = 1; e < 3; e++) {
        pardo_loader_order(ROWS, true, 7, e, order);
        for (int i = e == 1 ? 2 : 0; i < 4; i++) {
            const pardo_batch *b;
            ck_assert_msg(pardo_loader_next(l, &b, &st) == PARDO_OK, "%s", st.msg);
            ck_assert_int_eq(b->epoch, e);
            ck_assert_int_eq(b->index, i);
            ck_assert_int_eq(b->first_row, 3 * i);
            ck_assert_int_eq(b->rows, i == 3 ? 1 : 3);
            check_batch(b, order);
            seen += b->rows;
            pardo_loader_release(l, b);
        }
    }
    ck_assert_int_eq(seen, 4 + ROWS);
    ck_assert_int_eq(pardo_loader_join(l, &st), PARDO_OK);
    /* the same loader runs again: the same batches */
    ck_assert(pardo_loader_start(l, g, c, 2, 0, 3, &st) == PARDO_OK);
    const pardo_batch *b;
    ck_assert(pardo_loader_next(l, &b, &st) == PARDO_OK);
    ck_assert_int_eq(b->epoch, 2);
    check_batch(b, order);
    pardo_loader_release(l, b);
    pardo_loader_free(l); /* stops and joins the producer */
    ck_assert_int_eq(pardo_coordinator_join(c, 1, &st), PARDO_OK);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
}
END_TEST

START_TEST(queue_stays_bounded) {
    pardo_status st;
    pardo_loader *l = make_loader(1, false, 0, false); /* 10 batches an epoch */
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert(pardo_loader_start(l, g, c, 0, 0, 5, &st) == PARDO_OK);
    /* nobody consumes: the producer fills the queue (2) and waits */
    double deadline = now_s() + 10;
    while (pardo_loader_gathered(l) < 2 && now_s() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(pardo_loader_gathered(l), 2);
    ck_assert_int_eq(pardo_loader_queued(l), 2);
    /* a slow consumer: the producer stays at most 2 ahead */
    const pardo_batch *b;
    int n = 0;
    while (pardo_loader_next(l, &b, &st) == PARDO_OK) {
        ck_assert_int_le(pardo_loader_gathered(l) - n, 3); /* this one and at most 2 queued */
        pardo_loader_release(l, b);
        n++;
    }
    ck_assert_int_eq(n, 50);
    ck_assert_int_eq(pardo_loader_high_water(l), 2);
    ck_assert_int_eq(pardo_loader_join(l, &st), PARDO_OK);
    pardo_loader_free(l);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
}
END_TEST

START_TEST(batch_tensors_are_reused) {
    pardo_status st;
    pardo_loader *l = make_loader(2, true, 1, false);
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert(pardo_loader_start(l, g, c, 0, 0, 4, &st) == PARDO_OK);
    pardo_tensor *seen[8] = {0};
    int n_seen = 0;
    const pardo_batch *b;
    while (pardo_loader_next(l, &b, &st) == PARDO_OK) {
        bool known = false;
        for (int i = 0; i < n_seen; i++) known |= seen[i] == b->tensors[0];
        if (!known) {
            ck_assert_int_lt(n_seen, 3); /* capacity + 1 slots */
            seen[n_seen++] = b->tensors[0];
        }
        pardo_loader_release(l, b);
    }
    ck_assert_int_eq(pardo_loader_join(l, &st), PARDO_OK);
    pardo_loader_free(l);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
}
END_TEST

/* A slot refilled after a GPU run read its batch (the head SYNCED: a device copy beside the host's) has its head
 * at the CPU again, so the device copy is stale and the next GPU op copies the new rows. */
START_TEST(refilled_slots_leave_device_copies_stale) {
    pardo_status st;
    pardo_loader *l = make_loader(2, false, 0, false);
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert(pardo_loader_start(l, g, c, 0, 0, 3, &st) == PARDO_OK);
    const pardo_batch *b;
    int n = 0;
    while (pardo_loader_next(l, &b, &st) == PARDO_OK) {
        for (int i = 0; i < 2; i++) {
            ck_assert_msg(b->tensors[i]->mem->head == PARDO_MEM_HEAD_AT_CPU, "batch %d, tensor %d: head %s", n, i,
                          pardo_mem_head_name(b->tensors[i]->mem->head));
            b->tensors[i]->mem->head = PARDO_MEM_SYNCED; /* what a GPU op's read of it leaves */
        }
        pardo_loader_release(l, b);
        n++;
    }
    ck_assert_int_eq(n, 15); /* 3 epochs of 5 batches through 3 slots: each slot refilled */
    ck_assert_int_eq(pardo_loader_join(l, &st), PARDO_OK);
    pardo_loader_free(l);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
}
END_TEST

START_TEST(mapped_file_matches_the_reader) {
    ck_assert_int_eq(x_map->info.dtype, PARDO_F32);
    ck_assert_int_eq(x_map->info.ndim, 2);
    ck_assert_int_eq(pardo_npy_map_rows(x_map), ROWS);
    ck_assert_uint_eq(pardo_npy_map_row_bytes(x_map), COLS * 4);
    ck_assert_uint_eq(x_map->info.nbytes, x_ref->nbytes);
    ck_assert(memcmp(x_map->data, pardo_tensor_data(x_ref), x_ref->nbytes) == 0);
    ck_assert_ptr_nonnull(x_map->view.map); /* a regular file is mapped, not copied */
    ck_assert_int_eq(pardo_npy_map_rows(y_map), ROWS);
    /* every fixture the reader accepts maps to the same bytes */
    const char *names[] = {"f4_2x3.npy",  "f8_3x4.npy",  "i4_2x3.npy",    "i8_2x2x2.npy",
                           "v2_f4_3.npy", "v3_i8_2.npy", "scalar_f8.npy", "b1_5.npy"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pardo_status st;
        pardo_npy_map *m = NULL;
        pardo_tensor *t = test_npy_load(names[i]);
        ck_assert_msg(pardo_npy_map_open(test_fixture(names[i]), &m, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_int_eq(m->info.dtype, t->dtype);
        ck_assert(pardo_shape_equal(m->info.ndim, m->info.shape, t->ndim, t->shape));
        if (t->dtype != PARDO_BOOL) ck_assert(memcmp(m->data, pardo_tensor_data(t), t->nbytes) == 0);
        pardo_npy_map_close(m);
        pardo_tensor_release(t);
    }
}
END_TEST

/* ---- errors ---- */

static void expect_map_error(const char *path, int code, const char *words) {
    pardo_status st;
    pardo_npy_map *m = (pardo_npy_map *)1;
    ck_assert_int_eq(pardo_npy_map_open(path, &m, &st), code);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(st.msg, path) && strstr(st.msg, words), "%s", st.msg);
}

START_TEST(map_rejects_bad_files) {
    char p[160];
    snprintf(p, sizeof p, "%s/missing.npy", dir);
    expect_map_error(p, PARDO_EIO, "cannot open");
    expect_map_error(dir, PARDO_EIO, "folder");
    snprintf(p, sizeof p, "%s/empty.npy", dir);
    test_write_file(p, "", 0);
    expect_map_error(p, PARDO_EPARSE, "empty");
    snprintf(p, sizeof p, "%s/text.npy", dir);
    test_write_file(p, "hello, world\n", 13);
    expect_map_error(p, PARDO_EPARSE, "not a .npy file");
    expect_map_error(test_fixture("fortran_f4_2x3.npy"), PARDO_EPARSE, "Fortran");
    expect_map_error(test_fixture("be_f4_3.npy"), PARDO_EPARSE, "big-endian");
    /* every cut of a good file is rejected, never read past */
    size_t n;
    unsigned char *img = test_read_file(x_path, &n);
    snprintf(p, sizeof p, "%s/cut.npy", dir);
    for (size_t cut = 1; cut < n; cut += 7) {
        test_write_file(p, img, cut);
        pardo_status st;
        pardo_npy_map *m = NULL;
        ck_assert_int_eq(pardo_npy_map_open(p, &m, &st), PARDO_EPARSE);
        ck_assert_msg(strstr(st.msg, p), "%s", st.msg);
    }
    /* one byte too many */
    unsigned char *more = malloc(n + 1);
    memcpy(more, img, n);
    more[n] = 0;
    test_write_file(p, more, n + 1);
    expect_map_error(p, PARDO_EPARSE, "expected the end of the file");
    free(more);
    free(img);
}
END_TEST

START_TEST(loader_rejects_mismatched_rows) {
    pardo_status st;
    char p[160];
    snprintf(p, sizeof p, "%s/short.npy", dir);
    int64_t s[1] = {ROWS - 1};
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_I64, 1, s, &st);
    ck_assert(pardo_npy_write(p, t, &st) == PARDO_OK);
    pardo_tensor_release(t);
    pardo_npy_map *m;
    ck_assert(pardo_npy_map_open(p, &m, &st) == PARDO_OK);
    pardo_loader_source src[2] = {{"x", x_map}, {"y", m}};
    pardo_loader_options opt = {.batch_size = 4};
    pardo_loader *l = (pardo_loader *)1;
    ck_assert_int_eq(pardo_loader_new(src, 2, &opt, &l, &st), PARDO_ESHAPE);
    ck_assert_ptr_null(l);
    ck_assert_msg(strstr(st.msg, p) && strstr(st.msg, x_path) && strstr(st.msg, "9 rows") && strstr(st.msg, "10"), "%s",
                  st.msg);
    pardo_npy_map_close(m);
    /* a batch larger than the data with the short batch dropped: nothing to train on */
    opt = (pardo_loader_options){.batch_size = 11, .drop_last = true};
    ck_assert_int_eq(pardo_loader_new(src, 1, &opt, &l, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "no batch"), "%s", st.msg);
    opt.batch_size = 0;
    ck_assert_int_eq(pardo_loader_new(src, 1, &opt, &l, &st), PARDO_EINVAL);
    /* no rows */
    s[0] = 0;
    t = pardo_tensor_new_cpu(PARDO_I64, 1, s, &st);
    ck_assert(pardo_npy_write(p, t, &st) == PARDO_OK);
    pardo_tensor_release(t);
    ck_assert(pardo_npy_map_open(p, &m, &st) == PARDO_OK);
    src[0].data = m;
    opt.batch_size = 2;
    ck_assert_int_eq(pardo_loader_new(src, 1, &opt, &l, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "no rows") && strstr(st.msg, p), "%s", st.msg);
    pardo_npy_map_close(m);
}
END_TEST

START_TEST(producer_error_stops_the_consumer) {
    pardo_status st;
    pardo_loader_source src[2] = {{"x", x_map}, {"y", y_map}};
    pardo_loader_options opt = {.batch_size = 2, .fail_at = 3};
    pardo_loader *l;
    ck_assert(pardo_loader_new(src, 2, &opt, &l, &st) == PARDO_OK);
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert(pardo_loader_start(l, g, c, 0, 0, 3, &st) == PARDO_OK);
    const pardo_batch *b;
    int got = 0;
    int rc;
    while ((rc = pardo_loader_next(l, &b, &st)) == PARDO_OK) {
        got++;
        pardo_loader_release(l, b);
    }
    ck_assert_int_eq(rc, PARDO_ECANCELED); /* stopped, not finished */
    ck_assert_int_le(got, 2);
    ck_assert_int_eq(pardo_loader_join(l, &st), PARDO_EIO);
    ck_assert_msg(strstr(st.msg, "loader") && strstr(st.msg, "injected"), "%s", st.msg);
    /* the coordinator holds the first error, named for its file */
    ck_assert_int_eq(pardo_coordinator_join(c, 1, &st), PARDO_EIO);
    ck_assert_msg(strstr(st.msg, x_path) && strstr(st.msg, "loader: "), "%s", st.msg);
    pardo_loader_free(l);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
}
END_TEST

START_TEST(consumer_stop_wakes_a_waiting_producer) {
    pardo_status st, why;
    pardo_loader *l = make_loader(1, false, 0, false);
    pardo_task_group *g = pardo_task_group_new();
    pardo_coordinator *c = pardo_coordinator_new();
    ck_assert(pardo_loader_start(l, g, c, 0, 0, 1000, &st) == PARDO_OK);
    const pardo_batch *b;
    ck_assert(pardo_loader_next(l, &b, &st) == PARDO_OK);
    pardo_loader_release(l, b);
    /* the training step failed: stop everything */
    pardo_errorf(&why, PARDO_ERUNTIME, "step 1 failed");
    pardo_coordinator_request_stop(c, &why);
    ck_assert_int_eq(pardo_loader_next(l, &b, &st), PARDO_ECANCELED);
    pardo_loader_stop(l);
    double t0 = now_s();
    int rc = pardo_loader_join(l, &st);
    ck_assert(rc == PARDO_ECANCELED || rc == PARDO_OK);
    ck_assert(now_s() - t0 < 5);
    ck_assert_int_eq(pardo_coordinator_join(c, 1, &st), PARDO_ERUNTIME);
    ck_assert_str_eq(st.msg, "step 1 failed");
    /* freeing a loader whose producer waits on a full queue stops it too */
    pardo_coordinator_clear_stop(c);
    ck_assert(pardo_loader_start(l, g, c, 0, 0, 1000, &st) == PARDO_OK);
    pardo_loader_free(l);
    pardo_coordinator_free(c);
    pardo_task_group_free(g);
}
END_TEST

Suite *make_loader_suite(void) {
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("Core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, file_order_keeps_the_last_partial_batch);
    tcase_add_test(tc, ranks_together_give_one_process_batches);
    tcase_add_test(tc, drop_last_drops_the_short_batch);
    tcase_add_test(tc, shuffle_is_a_seeded_permutation_per_epoch);
    tcase_add_test(tc, shuffled_batches_follow_the_order);
    tcase_add_test(tc, queue_stays_bounded);
    tcase_add_test(tc, batch_tensors_are_reused);
    tcase_add_test(tc, refilled_slots_leave_device_copies_stale);
    tcase_add_test(tc, mapped_file_matches_the_reader);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_checked_fixture(te, setup, teardown);
    tcase_add_test(te, map_rejects_bad_files);
    tcase_add_test(te, loader_rejects_mismatched_rows);
    tcase_add_test(te, producer_error_stops_the_consumer);
    tcase_add_test(te, consumer_stop_wakes_a_waiting_producer);
    suite_add_tcase(s, te);
    return s;
}
