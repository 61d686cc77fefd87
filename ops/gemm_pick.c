/* gemm_pick.c - which implementation a product of PARDO_GEMM_AUTO runs
 * (gemm.h): $PARDO_GEMM (own or blas) where set; else, in a build with
 * BLAS, per shape class the faster of the own kernels and the BLAS library,
 * measured once on the machine at hand and kept like FFTW's wisdom in a
 * small text file ($PARDO_GEMM_CACHE, else $XDG_CACHE_HOME/pardo/gemm-pick,
 * else ~/.cache/pardo/gemm-pick; PARDO_GEMM_CACHE=off: no pick).
 *
 * A class is the dtype, the transposes and the sizes of op(B) (n: narrow
 * below 16, medium below 128, wide; k: short below 64, long), never the rows
 * nor the thread count: a product's bits then do not depend on either
 * (gemm.h's promise holds whatever was picked: a parallel_do part's rows are
 * the batch's). A class is measured the first time a product of it runs: its
 * representative shape (256 rows, n 10, 64 or 256, k 16 or 256) on the
 * calling thread, each implementation run once to warm up and then in
 * alternation (at least 5 times, about 3 ms in all; the shortest time of
 * each), and BLAS picked where it is at least PICK_MARGIN faster. The file
 * is read on first use and rewritten whole after each measurement (a temp
 * file renamed over it, after adopting what another process wrote
 * meanwhile). It holds a section per key (another machine sharing the home
 * folder, another OPENBLAS_CORETYPE or forced instruction set: this
 * process's first, at most PICK_KEYS); a file that is corrupt, or has no
 * section of this key, or cannot be written is ignored: the classes are
 * measured again and kept in memory.
 *
 * The file:
 *   pardo-gemm-pick 1
 *   key cpu=<CPU brand>|isa=<own kernels>|kernels=<PICK_KERNELS>|blas=<library file>|coretype=<$OPENBLAS_CORETYPE>|threads=1
 *   <f32|f64> <ta 0|1> <tb 0|1> <narrow|medium|wide> <short|long> <own|blas> <own us> <blas us>
 *   ...
 *   key <another key>
 *   ...
 * (the times are the measurement's, for people; the key's threads is the
 * thread count the classes were measured at). */
#include "gemm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if GEMM_X86
#include <cpuid.h>
#endif

#define PICK_FORMAT "pardo-gemm-pick 1"
#define PICK_KERNELS 2          // the own kernels' version in the key: bump when kernels or blocking change
#define PICK_MARGIN 0.95        // BLAS is picked where its time is below this share of the own kernels'
#define PICK_ROWS 256           // rows of a class's representative product (a batch)
#define PICK_BUDGET_S 0.003     // seconds of timed runs per class, about (after one warm-up run of each)
#define PICK_MIN_ROUNDS 5       // alternations of the two, at least (the shortest of 3 misled it on a busy machine)
#define PICK_MAX_ROUNDS 50      // and at most
#define PICK_FILE_MAX 65536     // bytes: a longer file is not a pick file
#define PICK_LINE_MAX (PATH_MAX + 1024) // bytes of a line, at most (the key line's)
#define PICK_KEYS 8             // keys' sections a file keeps, at most (this process's first)

enum { N_NCLASS = 3, N_KCLASS = 2, N_CLASSES = 2 * 2 * 2 * N_NCLASS * N_KCLASS };
enum { PICK_UNKNOWN = 0, PICK_OWN = 1, PICK_BLAS = 2 };

static const char *const nclass_names[N_NCLASS] = {"narrow", "medium", "wide"};
static const char *const kclass_names[N_KCLASS] = {"short", "long"};
static const int64_t nclass_rep[N_NCLASS] = {10, 64, 256}; // the representative's n per class
static const int64_t kclass_rep[N_KCLASS] = {16, 256};

typedef struct pick_entry {
    atomic_int pick;         // PICK_*; set once (under pick_lock), then read without it
    double own_us, blas_us;  // the measurement (or the file's)
} pick_entry;

static pthread_mutex_t pick_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    atomic_bool ready;       // the fields below are set (under pick_lock)
    pardo_gemm_impl forced;  // $PARDO_GEMM: OWN, BLAS or AUTO (none)
    bool on;                 // the pick runs: BLAS built in, PARDO_GEMM_CACHE not off
    bool off_by_env;         // PARDO_GEMM_CACHE=off
    char path[PATH_MAX];     // the cache file; "" when none (memory only)
    char key[PATH_MAX + 512];
    int measured;            // classes measured since the last reset
    bool in_file;            // the file holds this key (read, or written by this process)
    pick_entry e[N_CLASSES];
} P;

static int class_index(int dt, int ta, int tb, int nc, int kc) {
    return (((dt * 2 + ta) * 2 + tb) * N_NCLASS + nc) * N_KCLASS + kc;
}

static int class_of(const pardo_gemm *g) {
    const int nc = g->n < 16 ? 0 : g->n < 128 ? 1 : 2, kc = g->k < 64 ? 0 : 1;
    return class_index(g->dtype == PARDO_F64, g->ta, g->tb, nc, kc);
}

/* The CPU's brand string ("AMD EPYC 9654 96-Core Processor"), trimmed; "unknown" where there is none. */
static void cpu_brand(char *out, size_t n) {
    snprintf(out, n, "unknown");
#if GEMM_X86
    unsigned int r[12];
    if (__get_cpuid_max(0x80000000, NULL) < 0x80000004) return;
    for (unsigned int i = 0; i < 3; i++) __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    char s[49];
    memcpy(s, r, 48);
    s[48] = '\0';
    char *b = s;
    while (*b == ' ') b++;
    size_t len = strlen(b);
    while (len > 0 && b[len - 1] == ' ') b[--len] = '\0';
    for (char *c = b; *c; c++)
        if (*c == '|' || *c == '\n' || *c == '\r') *c = '_';
    if (*b) snprintf(out, n, "%s", b);
#endif
}

/* The key of this process's measurements: what makes another machine's, or another build's, not ours. */
static void make_key(char *out, size_t n) {
    char cpu[64], lib[PATH_MAX];
    cpu_brand(cpu, sizeof cpu);
    const char *blas = pardo_gemm_blas_library();
    if (!realpath(blas, lib)) snprintf(lib, sizeof lib, "%s", blas); /* the versioned file behind the link */
    const char *core = getenv("OPENBLAS_CORETYPE");
    snprintf(out, n, "cpu=%s|isa=%s|kernels=%d|blas=%s|coretype=%s|threads=1", cpu, pardo_gemm_own_arch[0].name,
             PICK_KERNELS, lib, core ? core : "");
}

/* The cache file from the environment into P.path ("" when none: no HOME, or the name too long). */
static void cache_path(void) {
    const char *e = getenv("PARDO_GEMM_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int len;
    P.path[0] = '\0';
    if (e && *e)
        len = snprintf(P.path, sizeof P.path, "%s", e);
    else if (xdg && *xdg == '/') /* the XDG spec: a relative path is to be ignored */
        len = snprintf(P.path, sizeof P.path, "%s/pardo/gemm-pick", xdg);
    else if (home && *home)
        len = snprintf(P.path, sizeof P.path, "%s/.cache/pardo/gemm-pick", home);
    else
        return;
    if (len < 0 || (size_t)len >= sizeof P.path) P.path[0] = '\0';
}

/* Parses one entry line into its class and pick; false where it is not one. */
static bool parse_entry(const char *line, int *cls, int *pick, double *own_us, double *blas_us) {
    char dt[8], nc[8], kc[8], pk[8];
    int ta, tb, end = -1;
    if (sscanf(line, "%7s %d %d %7s %7s %7s %lf %lf %n", dt, &ta, &tb, nc, kc, pk, own_us, blas_us, &end) != 8 ||
        end < 0 || line[end] != '\0')
        return false;
    const int d = strcmp(dt, "f32") == 0 ? 0 : strcmp(dt, "f64") == 0 ? 1 : -1;
    int n = -1, k = -1;
    for (int i = 0; i < N_NCLASS; i++)
        if (strcmp(nc, nclass_names[i]) == 0) n = i;
    for (int i = 0; i < N_KCLASS; i++)
        if (strcmp(kc, kclass_names[i]) == 0) k = i;
    *pick = strcmp(pk, "own") == 0 ? PICK_OWN : strcmp(pk, "blas") == 0 ? PICK_BLAS : PICK_UNKNOWN;
    if (d < 0 || n < 0 || k < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1) || *pick == PICK_UNKNOWN)
        return false;
    *cls = class_index(d, ta, tb, n, k);
    return true;
}

/* The other keys' sections of the file last read (another machine sharing the home folder, another
 * OPENBLAS_CORETYPE, another instruction set forced), kept verbatim to be written back after ours. */
static char others[PICK_FILE_MAX];
static size_t others_len;
static int others_n; // sections in others

/* Reads the cache file: adopts its picks under this process's key for the classes not decided yet, and keeps the
 * other keys' sections (others); false (nothing adopted, no others) when the file is missing, unreadable, too
 * long, of another format, or has a line that is neither a key nor an entry (the whole file is ignored). True
 * when it was read; *ours says whether it had this key. */
static bool load_file(bool *ours) {
    *ours = false;
    others_len = 0;
    others_n = 0;
    if (!P.path[0]) return false;
    FILE *f = fopen(P.path, "r");
    if (!f) return false;
    static char line[PICK_LINE_MAX];
    int picks[N_CLASSES] = {0};
    double times[N_CLASSES][2];
    bool ok = true, mine = false, found = false;
    size_t total = 0;
    for (int no = 0; ok && fgets(line, sizeof line, f); no++) {
        size_t len = strlen(line);
        total += len;
        if (total > PICK_FILE_MAX || len == 0 || line[len - 1] != '\n') { /* too long, or a NUL or a cut line */
            ok = false;
            break;
        }
        if (no == 0) {
            ok = strcmp(line, PICK_FORMAT "\n") == 0;
        } else if (strncmp(line, "key ", 4) == 0) {
            line[len - 1] = '\0';
            mine = strcmp(line + 4, P.key) == 0;
            found |= mine;
            line[len - 1] = '\n';
            if (!mine) others_n++;
        } else if (no == 1) {
            ok = false; /* the first section has no key */
        } else if (line[0] != '#' && line[0] != '\n') {
            int c, p;
            double ou, bu;
            line[len - 1] = '\0';
            ok = parse_entry(line, &c, &p, &ou, &bu);
            line[len - 1] = '\n';
            if (ok && mine) {
                picks[c] = p;
                times[c][0] = ou;
                times[c][1] = bu;
            }
        }
        if (ok && no > 0 && !mine && line[0] != '#') { /* another key's line, kept as it is */
            memcpy(others + others_len, line, len);
            others_len += len;
        }
    }
    ok = ok && !ferror(f) && total > 0;
    fclose(f);
    if (!ok) {
        others_len = 0;
        others_n = 0;
        return false;
    }
    for (int c = 0; c < N_CLASSES; c++)
        if (picks[c] && atomic_load(&P.e[c].pick) == PICK_UNKNOWN) {
            P.e[c].own_us = times[c][0];
            P.e[c].blas_us = times[c][1];
            atomic_store_explicit(&P.e[c].pick, picks[c], memory_order_release);
        }
    *ours = found;
    return true;
}

/* mkdir of path's folder and its parent where the path is the default one (the cache home may not exist yet);
 * a path from PARDO_GEMM_CACHE is used as it is. */
static void make_dirs(void) {
    const char *e = getenv("PARDO_GEMM_CACHE");
    if (e && *e) return;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", P.path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0'; /* .../pardo */
    char *up = strrchr(dir, '/');
    if (up && up != dir) {
        *up = '\0';
        (void)mkdir(dir, 0700); /* the cache home: exists or not makeable, either way mkdir below says */
        *up = '/';
    }
    (void)mkdir(dir, 0700);
}

/* Writes every decided class to the cache file through a temp file renamed over it (readers see the old file
 * or the new, whole); on any failure the file is left as it was and the picks stay in memory. */
static void write_file(void) {
    if (!P.path[0]) return;
    bool ours;
    load_file(&ours); /* what another process measured meanwhile, and the other keys' sections: kept too */
    make_dirs();
    char tmp[PATH_MAX + 32];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", P.path, (long)getpid()) >= (int)sizeof tmp) return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return;
    }
    fprintf(f, "%s\nkey %s\n# dtype ta tb n k pick own_us blas_us (pardo's matrix product, ops/gemm_pick.c)\n",
            PICK_FORMAT, P.key);
    for (int dt = 0; dt < 2; dt++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int nc = 0; nc < N_NCLASS; nc++)
                    for (int kc = 0; kc < N_KCLASS; kc++) {
                        const pick_entry *e = &P.e[class_index(dt, ta, tb, nc, kc)];
                        const int p = atomic_load(&e->pick);
                        if (p)
                            fprintf(f, "%s %d %d %s %s %s %.1f %.1f\n", dt ? "f64" : "f32", ta, tb, nclass_names[nc],
                                    kclass_names[kc], p == PICK_BLAS ? "blas" : "own", e->own_us, e->blas_us);
                    }
    /* then the other keys', the most recent first, at most PICK_KEYS in all (the last ones dropped) */
    for (size_t at = 0, n = 1; at < others_len; n++) {
        const char *next = memmem(others + at + 4, others_len - at - 4, "\nkey ", 5);
        const size_t end = next ? (size_t)(next - others) + 1 : others_len;
        if (n < PICK_KEYS) fwrite(others + at, 1, end - at, f);
        at = end;
    }
    const bool ok = fflush(f) == 0 && !ferror(f);
    if (fclose(f) != 0 || !ok || rename(tmp, P.path) != 0)
        unlink(tmp);
    else
        P.in_file = true;
}

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds of one run of g through impl, or a negative number when it failed. */
static double time_run(const pardo_gemm *g, pardo_gemm_impl impl) {
    pardo_status st;
    pardo_kernel_ctx ctx = {.st = &st, .nthreads = 1};
    const double t0 = thread_seconds();
    const int rc = pardo_gemm_run(&ctx, g, impl);
    const double t = thread_seconds() - t0;
    return rc == PARDO_OK ? t : -1;
}

/* Measures class c on its representative product and decides it (under pick_lock). */
static void measure(int c) {
    const int kc = c % N_KCLASS, nc = c / N_KCLASS % N_NCLASS, tb = c / (N_KCLASS * N_NCLASS) % 2,
              ta = c / (N_KCLASS * N_NCLASS * 2) % 2, dt = c / (N_KCLASS * N_NCLASS * 4);
    const int64_t m = PICK_ROWS, n = nclass_rep[nc], k = kclass_rep[kc];
    const size_t es = dt ? sizeof(double) : sizeof(float);
    const size_t na = (size_t)(m * k), nb = (size_t)(k * n), ncn = (size_t)(m * n);
    void *a = aligned_alloc(64, (na * es + 63) & ~(size_t)63), *b = aligned_alloc(64, (nb * es + 63) & ~(size_t)63),
         *cc = aligned_alloc(64, (ncn * es + 63) & ~(size_t)63);
    int pick = PICK_OWN;
    double best[2] = {-1, -1};
    if (a && b && cc && pardo_gemm_blas_usable()) {
        for (size_t i = 0; i < na || i < nb; i++) { /* values of both signs, no zeros, no denormals */
            const double v = (double)((i * 7919) % 201) / 100.0 - 1.005;
            if (dt) {
                if (i < na) ((double *)a)[i] = v;
                if (i < nb) ((double *)b)[i] = -v;
            } else {
                if (i < na) ((float *)a)[i] = (float)v;
                if (i < nb) ((float *)b)[i] = (float)-v;
            }
        }
        pardo_gemm g = {.dtype = dt ? PARDO_F64 : PARDO_F32, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .a = a,
                        .lda = ta ? m : k, .b = b, .ldb = tb ? k : n, .c = cc, .ldc = n};
        const double w0 = time_run(&g, PARDO_GEMM_OWN), w1 = time_run(&g, PARDO_GEMM_BLAS); /* warm up */
        if (w0 >= 0 && w1 >= 0) {
            int rounds = (int)(PICK_BUDGET_S / (w0 + w1 + 1e-9));
            rounds = rounds < PICK_MIN_ROUNDS ? PICK_MIN_ROUNDS : rounds > PICK_MAX_ROUNDS ? PICK_MAX_ROUNDS : rounds;
            best[0] = w0;
            best[1] = w1;
            for (int r = 0; r < rounds; r++)
                for (int i = 0; i < 2; i++) {
                    const double t = time_run(&g, i ? PARDO_GEMM_BLAS : PARDO_GEMM_OWN);
                    if (t >= 0 && t < best[i]) best[i] = t;
                }
            if (best[1] < PICK_MARGIN * best[0]) pick = PICK_BLAS;
        }
    }
    free(a);
    free(b);
    free(cc);
    P.e[c].own_us = best[0] * 1e6;
    P.e[c].blas_us = best[1] * 1e6;
    P.measured++;
    atomic_store_explicit(&P.e[c].pick, pick, memory_order_release);
}

/* Reads the environment and the cache file once (under pick_lock). */
static void ready_locked(void) {
    if (atomic_load(&P.ready)) return;
    const char *e = getenv("PARDO_GEMM");
    P.forced = e && strcmp(e, "own") == 0                                  ? PARDO_GEMM_OWN
               : e && strcmp(e, "blas") == 0 && pardo_gemm_blas_compiled() ? PARDO_GEMM_BLAS
                                                                           : PARDO_GEMM_AUTO;
    const char *cache = getenv("PARDO_GEMM_CACHE");
    P.off_by_env = cache && strcmp(cache, "off") == 0;
    P.on = pardo_gemm_blas_compiled() && !P.off_by_env && pardo_gemm_own_arch[0].simd;
    if (P.on) {
        cache_path();
        make_key(P.key, sizeof P.key);
        bool ours = false;
        load_file(&ours);
        P.in_file = ours;
    }
    atomic_store(&P.ready, true);
}

pardo_gemm_impl pardo_gemm_env_impl(void) {
    pardo_gemm_setup(); /* the own kernels first: the key names them */
    if (!atomic_load(&P.ready)) {
        pthread_mutex_lock(&pick_lock);
        ready_locked();
        pthread_mutex_unlock(&pick_lock);
    }
    return P.forced;
}

bool pardo_gemm_pick_blas(const pardo_gemm *g) {
    const pardo_gemm_impl forced = pardo_gemm_env_impl();
    if (forced != PARDO_GEMM_AUTO) return forced == PARDO_GEMM_BLAS;
    if (!pardo_gemm_own_arch[0].simd) return pardo_gemm_blas_compiled(); /* no SIMD kernel: BLAS where built in */
    if (!P.on || (g->dtype != PARDO_F32 && g->dtype != PARDO_F64)) return false;
    const int c = class_of(g);
    int p = atomic_load_explicit(&P.e[c].pick, memory_order_acquire);
    if (p == PICK_UNKNOWN) {
        pthread_mutex_lock(&pick_lock);
        if ((p = atomic_load(&P.e[c].pick)) == PICK_UNKNOWN) {
            measure(c);
            write_file();
            p = atomic_load(&P.e[c].pick);
        }
        pthread_mutex_unlock(&pick_lock);
    }
    return p == PICK_BLAS;
}

void pardo_gemm_pick_reset(void) {
    pthread_mutex_lock(&pick_lock);
    atomic_store(&P.ready, false);
    P.measured = 0;
    P.in_file = false;
    for (int c = 0; c < N_CLASSES; c++) atomic_store(&P.e[c].pick, PICK_UNKNOWN);
    pthread_mutex_unlock(&pick_lock);
}

int pardo_gemm_pick_measured(void) {
    pthread_mutex_lock(&pick_lock);
    const int n = P.measured;
    pthread_mutex_unlock(&pick_lock);
    return n;
}

const char *pardo_gemm_pick_path(void) {
    pardo_gemm_env_impl();
    return P.on && P.path[0] ? P.path : NULL;
}

void pardo_gemm_pick_summary(char *buf, size_t n) {
    const pardo_gemm_impl forced = pardo_gemm_env_impl();
    if (n == 0) return;
    buf[0] = '\0';
    if (forced != PARDO_GEMM_AUTO) {
        snprintf(buf, n, "none: PARDO_GEMM=%s runs every product", forced == PARDO_GEMM_BLAS ? "blas" : "own");
        return;
    }
    if (!pardo_gemm_blas_compiled()) {
        snprintf(buf, n, "none: no BLAS built in, the own kernel runs every product");
        return;
    }
    if (!pardo_gemm_own_arch[0].simd) {
        snprintf(buf, n, "none: no SIMD own kernel on this CPU, BLAS runs every product");
        return;
    }
    if (P.off_by_env) {
        snprintf(buf, n, "off (PARDO_GEMM_CACHE=off): the own kernel runs every product");
        return;
    }
    pthread_mutex_lock(&pick_lock);
    size_t used = 0;
    int decided = 0, blas = 0;
    int w = snprintf(buf, n, "per shape class the faster of the own kernel and BLAS, measured once (cache: %s%s)",
                     P.path[0] ? P.path : "none, in memory", P.path[0] && !P.in_file ? ", not written yet" : "");
    used = w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
    for (int c = 0; c < N_CLASSES; c++) {
        const int p = atomic_load(&P.e[c].pick);
        if (!p) continue;
        decided++;
        blas += p == PICK_BLAS;
        const int kc = c % N_KCLASS, nc = c / N_KCLASS % N_NCLASS, tb = c / (N_KCLASS * N_NCLASS) % 2,
                  ta = c / (N_KCLASS * N_NCLASS * 2) % 2, dt = c / (N_KCLASS * N_NCLASS * 4);
        w = snprintf(buf + used, n - used, "%s%s %s%s n %s k %s: %s", decided == 1 ? ": " : ", ", dt ? "f64" : "f32",
                     ta ? "t" : "n", tb ? "t" : "n", nclass_names[nc], kclass_names[kc], p == PICK_BLAS ? "blas" : "own");
        used += w < 0 ? 0 : (size_t)w < n - used ? (size_t)w : n - used - 1;
    }
    snprintf(buf + used, n - used, "%s%d of %d classes measured, %d run on BLAS", decided ? "; " : ": ", decided,
             N_CLASSES, blas);
    pthread_mutex_unlock(&pick_lock);
}
