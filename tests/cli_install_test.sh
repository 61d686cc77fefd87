#!/bin/sh
# cli_install_test.sh - `make install` into a scratch DESTDIR: the binary,
# libpardo.a, the public headers under include/pardo/ (each compiles on its
# own, with every header it includes installed), and pardo.pc; nothing
# written outside DESTDIR. A program built with pkg-config's flags loads a
# graph file, feeds it, runs it and prints a fetched value; the installed
# pardo runs the same graph; another has relu's CUDA kernel exactly when
# the library was built with CUDA. `make uninstall` then leaves no file in
# DESTDIR. Then a small C program that includes only
# <pardo/engine.h> is compiled against the installed headers and linked
# against the installed libpardo.a with pardo.pc's flags; it pushes ops on
# vars and checks the order of their side effects, errors and refusals as
# engine.h and SPEC section 5 document them. While the library has no
# engine yet (no src/engine/engine.c), the program is compiled but not
# linked, and the script says so.
# Usage: tests/cli_install_test.sh PATH/TO/pardo   (the build folder is the binary's)
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-install "$@"

B=$(cd "$(dirname "$PARDO")" && pwd)
case $B in "$ROOT"/*) BUILD_DIR=${B#"$ROOT"/} ;; *) BUILD_DIR=$B ;; esac
# the build's switches, from its folder's name (the Makefile names them so), so that make finds the same objects
SWITCHES=""
case $BUILD_DIR in *build-asan*) SWITCHES="$SWITCHES SANITIZE=address,undefined" ;; *build-tsan*) SWITCHES="$SWITCHES SANITIZE=thread" ;; esac
case $BUILD_DIR in *-nocuda*) SWITCHES="$SWITCHES CUDA=0" ;; esac
case $BUILD_DIR in *-noblas*) SWITCHES="$SWITCHES BLAS=0" ;; esac
CC=${CC:-cc}
PREFIX=/opt/pardo-install-test-$$
DEST=$T/dest
P=$DEST$PREFIX

# ---- make install ------------------------------------------------------
# shellcheck disable=SC2086
if ${MAKE:-make} -s --no-print-directory -C "$ROOT" install DESTDIR="$DEST" PREFIX="$PREFIX" BUILD="$BUILD_DIR" \
    $SWITCHES >"$T/make.out" 2>&1; then ok; else bad "make install failed: $(cat "$T/make.out")"; fi
for f in bin/pardo lib/libpardo.a include/pardo/engine.h include/pardo/core/status.h lib/pkgconfig/pardo.pc \
    include/pardo/exec/executor.h include/pardo/io/model_load.h include/pardo/pass.h include/pardo/core/tensor.h \
    include/pardo/core/scope.h include/pardo/io/npy.h include/pardo/io/csv.h include/pardo/io/safetensors.h; do
    if [ -f "$P/$f" ]; then ok; else bad "make install: no $PREFIX/$f under DESTDIR"; fi
done
if [ -x "$P/bin/pardo" ] && "$P/bin/pardo" --version 2>&1 | grep -q "^pardo "; then ok; else
    bad "the installed pardo does not run: $("$P/bin/pardo" --version 2>&1)"
fi
cmp -s "$P/lib/libpardo.a" "$B/libpardo.a" && ok || bad "the installed libpardo.a is not $BUILD_DIR/libpardo.a"
cmp -s "$P/include/pardo/engine.h" src/engine/engine.h && ok || bad "include/pardo/engine.h is not src/engine/engine.h"
cmp -s "$P/include/pardo/core/status.h" src/core/status.h && ok || bad "include/pardo/core/status.h is not src/core/status.h"
if [ -e "$PREFIX" ]; then bad "make install wrote $PREFIX itself, not under DESTDIR"; else ok; fi
# every "..." include of an installed header is installed, under the same relative name
for h in $(cd "$P/include/pardo" && find . -name '*.h'); do
    for inc in $(sed -n 's/^#include "\(.*\)"/\1/p' "$P/include/pardo/$h"); do
        if [ -f "$P/include/pardo/$inc" ]; then ok; else bad "include/pardo/$h includes \"$inc\", which is not installed"; fi
    done
done
grep -q "^Libs: -L\${libdir} -lpardo .*-lcjson" "$P/lib/pkgconfig/pardo.pc" && ok ||
    bad "pardo.pc: no Libs line with -lpardo and -lcjson: $(cat "$P/lib/pkgconfig/pardo.pc")"
PC_CFLAGS=$(pkg-config --define-variable=prefix="$P" --cflags "$P/lib/pkgconfig/pardo.pc") &&
    PC_LIBS=$(pkg-config --define-variable=prefix="$P" --libs "$P/lib/pkgconfig/pardo.pc") && ok ||
    bad "pkg-config cannot read the installed pardo.pc"

# every installed header compiles on its own
for h in $(cd "$P/include/pardo" && find . -name '*.h' | sed 's|^\./||'); do
    printf '#include <pardo/%s>\nint pardo_header_test_unit;\n' "$h" >"$T/one.c"
    # shellcheck disable=SC2086
    if $CC -std=c11 -Wall -Wextra -Wpedantic -Werror $PC_CFLAGS -c "$T/one.c" -o "$T/one.o" 2>"$T/cc.err"; then ok; else
        bad "<pardo/$h> does not compile on its own: $(cat "$T/cc.err")"
    fi
done

# ---- a program that loads a graph, runs it and prints a fetched value ----------
cat >"$T/g.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {"x": {"dtype": "float32", "shape": [-1, 3], "role": "feed"},
                                  "w": {"dtype": "float32", "shape": [3], "value": [1, 2, 3]}},
 "ops": [{"op": "mul", "in": ["x", "w"], "out": ["y"]}, {"op": "scale", "in": ["y"], "out": ["z"], "attrs": {"scale": 0.5}}]}]}
G
cat >"$T/app.c" <<'EOF'
/* Loads the graph file argv[1], checks it, feeds x = [[2, 3, 4]], runs it and prints the fetched z. */
#include <pardo/exec/executor.h>
#include <pardo/io/model_load.h>
#include <pardo/pass.h>

#include <stdio.h>

int main(int argc, char **argv) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_program *p = NULL;
    pardo_tensor_list weights;
    pardo_tensor_list_init(&weights);
    bool onnx = false;
    pardo_executor *ex = NULL;
    int64_t shape[2] = {1, 3};
    pardo_tensor *x = NULL;
    pardo_pass_options opt = pardo_pass_defaults();
    pardo_exec_options eo = {.nthreads = 1};
    if (argc != 2 || pardo_model_load(argv[1], &p, &weights, &onnx, &st) != PARDO_OK ||
        pardo_pass_check(p, &opt, &st) != PARDO_OK || pardo_executor_new(p, &eo, &ex, &st) != PARDO_OK ||
        pardo_executor_init_vars(ex, NULL, argv[1], &st) != PARDO_OK ||
        !(x = pardo_tensor_new_cpu(PARDO_F32, 2, shape, &st))) {
        fprintf(stderr, "app: %s\n", st.msg);
        return 1;
    }
    float *xd = pardo_tensor_mutable_cpu(x, &st);
    xd[0] = 2, xd[1] = 3, xd[2] = 4;
    if (pardo_executor_feed(ex, "x", x, "app", &st) != PARDO_OK || pardo_executor_run(ex, &st) != PARDO_OK) {
        fprintf(stderr, "app: %s\n", st.msg);
        return 1;
    }
    pardo_tensor *z = pardo_executor_fetch(ex, "z");
    printf("z =");
    for (int64_t i = 0; z && i < z->numel; i++) printf(" %g", pardo_tensor_get_f64(z, i));
    printf("\n");
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
    pardo_tensor_list_clear(&weights);
    return 0;
}
EOF
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Wextra -Werror $PC_CFLAGS "$T/app.c" -o "$T/app" $PC_LIBS 2>"$T/cc.err"; then ok; else
    bad "the graph program does not build with pkg-config's flags: $(cat "$T/cc.err")"
fi
if [ -x "$T/app" ] && [ "$(timeout 60 "$T/app" "$T/g.json" 2>&1)" = "z = 1 3 6" ]; then ok; else
    bad "the graph program printed: $("$T/app" "$T/g.json" 2>&1)"
fi
# the same link line gives a program the CUDA kernels exactly when the library has CUDA (ops/cuda/kernels.h)
cat >"$T/kernels.c" <<'EOF'
/* Prints whether this library has CUDA and whether relu's def has its CUDA kernel in this program. */
#include <pardo/core/device.h>
#include <pardo/op.h>

#include <stdio.h>

int main(void) {
    const pardo_op_def *d = pardo_op_lookup("relu");
    printf("%s %s\n", pardo_device_compiled() ? "cuda" : "cpu", d && d->cuda ? "kernel" : "none");
    return 0;
}
EOF
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Wextra -Werror $PC_CFLAGS "$T/kernels.c" -o "$T/kernels" $PC_LIBS 2>"$T/cc.err"; then
    case $(timeout 60 "$T/kernels" 2>&1) in
    "cuda kernel" | "cpu none") ok ;;
    *) bad "a program linking libpardo.a: $("$T/kernels" 2>&1) (a CUDA library must give relu its CUDA kernel)" ;;
    esac
else
    bad "the kernels program does not build with pkg-config's flags: $(cat "$T/cc.err")"
fi
printf '2,3,4\n' >"$T/x.csv"
if "$P/bin/pardo" run "$T/g.json" --feed x="$T/x.csv" --fetch z 2>&1 | grep -qF "z: float32 [1, 3] = [1, 3, 6]"; then ok; else
    bad "the installed pardo run: $("$P/bin/pardo" run "$T/g.json" --feed x="$T/x.csv" --fetch z 2>&1)"
fi

# ---- a program against <pardo/engine.h> and libpardo.a -------------------
cat >"$T/engine_order.c" <<'EOF'
/* Pushes ops on vars through the installed <pardo/engine.h> and checks what
 * engine.h documents: per var, in push order, a read waits for the writes
 * before it and a write for every earlier read and write; push never runs
 * the function on the calling thread; refused pushes push nothing; a
 * failing op's error stays on the vars it writes, ops on them do not run
 * and pass it on; wait_to_read and wait_all return the first error and
 * clear it; a wait inside an op is refused. Prints "engine ok", or each
 * failed check, and exits 1. */
#include <pardo/engine.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int failures;
static pardo_engine *eng;
static pthread_t main_thread;
static atomic_int pushing;        /* main is inside pardo_engine_push */
static atomic_int ran_inside_push; /* an op ran on main while it was */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int order[256], n_order; /* the ids of the ops that ran, as they ran */

static void check(int cond, int line, const char *what) {
    if (!cond) {
        failures++;
        printf("FAIL (line %d): %s\n", line, what);
    }
}
#define CHECK(cond) check((cond), __LINE__, #cond)

static void note_ran(int id) {
    if (atomic_load(&pushing) && pthread_equal(pthread_self(), main_thread)) atomic_store(&ran_inside_push, 1);
    pthread_mutex_lock(&log_mu);
    if (n_order < 256) order[n_order++] = id;
    pthread_mutex_unlock(&log_mu);
}

/* where op `id` ran in the log; -1: it did not */
static int pos(int id) {
    pthread_mutex_lock(&log_mu);
    int p = -1;
    for (int i = 0; i < n_order && p < 0; i++)
        if (order[i] == id) p = i;
    pthread_mutex_unlock(&log_mu);
    return p;
}

static void nap_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* an op: logs its id, sleeps first when nap_ms > 0, copies *from into *to when both are given */
typedef struct op {
    int id;
    int nap_ms;
    const int *from;
    int *to;
    int set; /* with to and no from: *to = set */
} op;

static int op_fn(void *arg, pardo_status *st) {
    (void)st;
    op *o = arg;
    if (o->nap_ms > 0) nap_ms(o->nap_ms);
    if (o->to) *o->to = o->from ? *o->from : o->set;
    note_ran(o->id);
    return PARDO_OK;
}

static int fail_fn(void *arg, pardo_status *st) {
    op *o = arg;
    note_ran(o->id);
    return pardo_errorf(st, PARDO_ERUNTIME, "boom %d", o->id);
}

static atomic_int inner_wait_all_rc, inner_wait_read_rc;
static pardo_var *inner_var;
static int waits_inside_fn(void *arg, pardo_status *st) {
    (void)arg;
    pardo_status inner;
    pardo_status_clear(&inner);
    atomic_store(&inner_wait_all_rc, pardo_engine_wait_all(eng, &inner));
    atomic_store(&inner_wait_read_rc, pardo_engine_wait_to_read(eng, inner_var, &inner));
    (void)st;
    return PARDO_OK;
}

static int push(pardo_engine_fn fn, void *arg, pardo_var *const *r, int nr, pardo_var *const *w, int nw,
                const char *name, pardo_status *st) {
    atomic_store(&pushing, 1);
    int rc = pardo_engine_push(eng, fn, arg, r, nr, w, nw, name, st);
    atomic_store(&pushing, 0);
    return rc;
}

static pardo_var *new_var(void) {
    pardo_status st;
    pardo_status_clear(&st);
    pardo_var *v = pardo_engine_new_var(eng, &st);
    if (!v) {
        printf("FAIL: new_var: %s\n", st.msg);
        failures++;
    }
    return v;
}

int main(void) {
    pardo_status st;
    pardo_status_clear(&st);
    main_thread = pthread_self();
    eng = pardo_engine_get();
    CHECK(eng != NULL);
    CHECK(pardo_engine_get() == eng);
    pardo_var *a = new_var(), *b = new_var(), *c1 = new_var(), *c2 = new_var(), *c3 = new_var();
    pardo_var *f = new_var(), *g = new_var(), *h = new_var(), *k = new_var();
    if (failures) return 1;

    /* A: five writes of one var run one after another in push order (the first naps, so that running them at
     * once would show) */
    static op chain[5];
    for (int i = 0; i < 5; i++) {
        chain[i] = (op){.id = 1 + i, .nap_ms = i == 0 ? 20 : 0};
        CHECK(push(op_fn, &chain[i], NULL, 0, &a, 1, "chain", &st) == PARDO_OK);
    }
    CHECK(pardo_engine_wait_to_read(eng, a, &st) == PARDO_OK);
    for (int i = 0; i < 5; i++) CHECK(pos(1 + i) >= 0);
    for (int i = 0; i + 1 < 5; i++) CHECK(pos(1 + i) < pos(2 + i));

    /* B: a write, two reads, a write, a read of one var: the reads see the first write's value, the last read
     * the second's */
    static int value, seen1 = -1, seen2 = -1, seen3 = -1;
    static op w1 = {.id = 11, .nap_ms = 10, .to = &value, .set = 10};
    static op r1 = {.id = 12, .from = &value, .to = &seen1}, r2 = {.id = 13, .from = &value, .to = &seen2};
    static op w2 = {.id = 14, .to = &value, .set = 20}, r3 = {.id = 15, .from = &value, .to = &seen3};
    CHECK(push(op_fn, &w1, NULL, 0, &b, 1, "w1", &st) == PARDO_OK);
    CHECK(push(op_fn, &r1, &b, 1, NULL, 0, "r1", &st) == PARDO_OK);
    CHECK(push(op_fn, &r2, &b, 1, NULL, 0, "r2", &st) == PARDO_OK);
    CHECK(push(op_fn, &w2, NULL, 0, &b, 1, "w2", &st) == PARDO_OK);
    CHECK(push(op_fn, &r3, &b, 1, NULL, 0, "r3", &st) == PARDO_OK);
    CHECK(pardo_engine_wait_all(eng, &st) == PARDO_OK);
    CHECK(seen1 == 10 && seen2 == 10 && seen3 == 20 && value == 20);
    CHECK(pos(11) < pos(12) && pos(11) < pos(13));
    CHECK(pos(12) < pos(14) && pos(13) < pos(14) && pos(14) < pos(15));

    /* C: an op reading two vars waits for the writes of both */
    static op x = {.id = 21, .nap_ms = 10}, y = {.id = 22, .nap_ms = 5}, z = {.id = 23};
    pardo_var *both[2] = {c1, c2};
    CHECK(push(op_fn, &x, NULL, 0, &c1, 1, "x", &st) == PARDO_OK);
    CHECK(push(op_fn, &y, NULL, 0, &c2, 1, "y", &st) == PARDO_OK);
    CHECK(push(op_fn, &z, both, 2, &c3, 1, "z", &st) == PARDO_OK);
    CHECK(pardo_engine_wait_to_read(eng, c3, &st) == PARDO_OK);
    CHECK(pos(21) >= 0 && pos(22) >= 0 && pos(21) < pos(23) && pos(22) < pos(23));

    /* D: refused pushes push nothing */
    static op never = {.id = 99};
    pardo_var *twice[2] = {a, a};
    CHECK(push(NULL, &never, NULL, 0, &a, 1, "no fn", &st) == PARDO_EINVAL);
    CHECK(push(op_fn, &never, NULL, 0, twice, 2, "twice", &st) == PARDO_EINVAL);
    CHECK(push(op_fn, &never, twice, 2, NULL, 0, "read twice", &st) == PARDO_EINVAL);
    CHECK(push(op_fn, &never, &a, 1, &a, 1, "read and written", &st) == PARDO_EINVAL);
    CHECK(pardo_engine_wait_all(eng, &st) == PARDO_OK);
    CHECK(pos(99) < 0);

    /* E: a failing op's error is wait_all's, once; then the var takes ops again */
    static op fails_h = {.id = 31}, after_h = {.id = 32};
    CHECK(push(fail_fn, &fails_h, NULL, 0, &h, 1, "fails_on_purpose_h", &st) == PARDO_OK);
    pardo_status_clear(&st);
    CHECK(pardo_engine_wait_all(eng, &st) == PARDO_ERUNTIME);
    CHECK(strstr(st.msg, "boom 31") != NULL);
    CHECK(pardo_engine_wait_all(eng, &st) == PARDO_OK);
    CHECK(push(op_fn, &after_h, NULL, 0, &h, 1, "after_h", &st) == PARDO_OK);
    CHECK(pardo_engine_wait_to_read(eng, h, &st) == PARDO_OK);
    CHECK(pos(32) >= 0);

    /* F: ops on a failed var do not run and pass the error on; wait_to_read returns it, naming the op, once */
    static op fails_f = {.id = 41}, writes_f = {.id = 42}, reads_f = {.id = 43};
    CHECK(push(fail_fn, &fails_f, NULL, 0, &f, 1, "fails_on_purpose", &st) == PARDO_OK);
    CHECK(push(op_fn, &writes_f, NULL, 0, &f, 1, "writes_f", &st) == PARDO_OK);
    CHECK(push(op_fn, &reads_f, &f, 1, &g, 1, "reads_f", &st) == PARDO_OK);
    pardo_status_clear(&st);
    CHECK(pardo_engine_wait_to_read(eng, f, &st) == PARDO_ERUNTIME);
    CHECK(strstr(st.msg, "boom 41") != NULL);
    CHECK(strstr(st.msg, "fails_on_purpose") != NULL);
    CHECK(pardo_engine_wait_to_read(eng, f, &st) == PARDO_OK);
    pardo_status_clear(&st);
    CHECK(pardo_engine_wait_to_read(eng, g, &st) != PARDO_OK);
    CHECK(strstr(st.msg, "boom 41") != NULL);
    CHECK(pos(41) >= 0 && pos(42) < 0 && pos(43) < 0);
    pardo_engine_wait_all(eng, &st); /* may or may not report f's error again: engine.h leaves it open */
    CHECK(pardo_engine_wait_all(eng, &st) == PARDO_OK);

    /* G: a wait from inside an op is refused, not a deadlock */
    inner_var = k;
    atomic_store(&inner_wait_all_rc, 1);
    atomic_store(&inner_wait_read_rc, 1);
    static int dummy;
    CHECK(push(waits_inside_fn, &dummy, NULL, 0, &k, 1, "waits_inside", &st) == PARDO_OK);
    CHECK(pardo_engine_wait_all(eng, &st) == PARDO_OK);
    CHECK(atomic_load(&inner_wait_all_rc) == PARDO_EINVAL);
    CHECK(atomic_load(&inner_wait_read_rc) == PARDO_EINVAL);

    /* push never ran a function on the pushing thread */
    CHECK(atomic_load(&ran_inside_push) == 0);

    pardo_var *all[] = {a, b, c1, c2, c3, f, g, h, k};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CHECK(pardo_engine_delete_var(eng, all[i], &st) == PARDO_OK);
    CHECK(pardo_engine_delete_var(eng, NULL, &st) == PARDO_EINVAL);
    CHECK(pardo_engine_wait_all(eng, &st) == PARDO_OK);
    CHECK(pardo_engine_pending(eng) == 0);
    pardo_engine_shutdown();
    if (failures) return 1;
    printf("engine ok\n");
    return 0;
}
EOF
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Wextra -Wpedantic -Werror $PC_CFLAGS -c "$T/engine_order.c" -o "$T/engine_order.o" \
    2>"$T/cc.err"; then ok; else bad "the program does not compile against the installed <pardo/engine.h>: $(cat "$T/cc.err")"; fi
if nm -g --defined-only "$P/lib/libpardo.a" 2>/dev/null | grep -q " T pardo_engine_push$"; then
    # shellcheck disable=SC2086
    if $CC "$T/engine_order.o" -o "$T/engine_order" $PC_LIBS 2>"$T/ld.err"; then ok; else
        bad "the program does not link against the installed libpardo.a with pardo.pc's Libs: $(cat "$T/ld.err")"
    fi
    if [ -x "$T/engine_order" ]; then
        timeout 60 "$T/engine_order" >"$T/out" 2>"$T/err"
        rc=$?
        if [ "$rc" = 0 ] && grep -q "^engine ok$" "$T/out"; then ok; else
            bad "the engine program: exit $rc: $(cat "$T/out" "$T/err")"
        fi
    fi
else
    echo "cli-install: the installed libpardo.a has no pardo_engine_push yet (no src/engine/engine.c): compiled the engine program, did not link or run it"
fi

# ---- make uninstall: no file of pardo's left in DESTDIR --------------------
# shellcheck disable=SC2086
if ${MAKE:-make} -s --no-print-directory -C "$ROOT" uninstall DESTDIR="$DEST" PREFIX="$PREFIX" BUILD="$BUILD_DIR" \
    $SWITCHES >"$T/make.out" 2>&1; then ok; else bad "make uninstall failed: $(cat "$T/make.out")"; fi
left=$(find "$DEST" ! -type d)
if [ -z "$left" ]; then ok; else bad "make uninstall left: $left"; fi
if [ -e "$P/include/pardo" ]; then bad "make uninstall left $PREFIX/include/pardo"; else ok; fi

cli_finish
