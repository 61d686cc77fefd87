# cli_lib.sh - the harness every tests/cli*_test.sh sources:
#   . "$(dirname "$0")/cli_lib.sh"; cli_setup LABEL PATH/TO/pardo
# sets PARDO (absolute), ROOT (the project, also the working folder) and T (a
# scratch folder removed on exit), and gives:
#   ok, bad MSG                     count a pass or a failure (printed)
#   run_pardo ARGS...               pardo ARGS; status in $rc, output in $T/out and $T/err
#   bounded ARGS...                 run_pardo ARGS in at most 20 s and 1 GiB of address space (where the
#                                   binary runs under that: not the sanitizer builds, which reserve terabytes)
#   expect NAME CODE WORD... -- ARGS...
#                                   pardo ARGS exits CODE with every WORD in stderr
#   stdout_has NAME TEXT            the last run's stdout contains TEXT
#   no_file NAME PATH               PATH was not written
#   cli_finish                      prints "LABEL: N passed, N failed" and exits 1 on a failure

cli_setup() {
    CLI_LABEL=$1
    PARDO=${2:?usage: $0 PATH/TO/pardo}
    case $PARDO in /*) ;; *) PARDO=$(pwd)/$PARDO ;; esac
    ROOT=$(cd "$(dirname "$0")/.." && pwd)
    T=$(mktemp -d "/tmp/pardo-$CLI_LABEL-XXXXXX")
    trap 'rm -rf "$T"' EXIT
    cd "$ROOT" || exit 1
    pass=0
    fail=0
}

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

run_pardo() {
    "$PARDO" "$@" >"$T/out" 2>"$T/err"
    rc=$?
}

bounded() {
    if (ulimit -v 1048576 && "$PARDO" --version) >/dev/null 2>&1; then
        (ulimit -v 1048576 && exec timeout 20 "$PARDO" "$@") >"$T/out" 2>"$T/err"
    else
        timeout 20 "$PARDO" "$@" >"$T/out" 2>"$T/err"
    fi
    rc=$?
}

expect() {
    name=$1 code=$2
    shift 2
    words=""
    while [ "$1" != "--" ]; do words="$words
$1"; shift; done
    shift
    run_pardo "$@"
    if [ "$rc" != "$code" ]; then
        bad "$name: exit $rc, expected $code; stderr: $(cat "$T/err")"
        return
    fi
    missing=""
    IFS='
'
    for w in $words; do
        grep -qF -- "$w" "$T/err" || missing="$missing '$w'"
    done
    unset IFS
    if [ -n "$missing" ]; then
        bad "$name: stderr lacks$missing: $(cat "$T/err")"
        return
    fi
    ok
}

stdout_has() {
    if grep -qF -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2': $(head -c 2000 "$T/out")"; fi
}

no_file() {
    if [ -e "$2" ]; then bad "$1: $2 was written"; else ok; fi
}

cli_finish() {
    echo "$CLI_LABEL: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}
