#!/bin/sh
# cli_docs_test.sh - keeps README.md and graphs/README.md true: runs, in
# order, every pardo command of their ```sh blocks (a line, with its
# backslash continuations, whose first word after any VAR=value is
# build/pardo or pardo; the binary under test stands in for it) in a scratch
# copy of the project's graphs/ (and the ONNX models of tests/fixtures/onnx)
# with an empty build/, as from a fresh clone; a build without ONNX skips
# the commands that read an .onnx file, saying so.
# Each must exit 0, or the N of a trailing "# exits N" comment; a trailing
# "# eval_accuracy >= X" also checks the "eval_accuracy: V" line pardo train
# prints. Then: every subcommand appears in the README, and no command wrote
# outside build/. Other lines (make, dot, comments) are not run.
# Usage: tests/cli_docs_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-docs "$@"

W=$T/work
mkdir -p "$W/build"
cp -R graphs "$W/graphs"
mkdir -p "$W/tests/fixtures"
cp -R tests/fixtures/onnx "$W/tests/fixtures/onnx"
onnx_built=0
"$PARDO" --version | grep -q "^ONNX: built in" && onnx_built=1
ln -s "$PARDO" "$W/build/pardo"
TAB=$(printf '\t')

# FILE...: "FILE:LINE<TAB>COMMAND" for each command of the ```sh blocks, continuations joined
commands() {
    awk '
        FNR == 1 { insh = 0; cmd = "" }
        /^```/ { insh = !insh && $0 ~ /^```sh[ \t]*$/; cmd = ""; next }
        !insh { next }
        {
            line = $0
            if (cmd == "") start = FNR
            if (line ~ /\\[ \t]*$/) { sub(/\\[ \t]*$/, "", line); cmd = cmd line " "; next }
            print FILENAME ":" start "\t" cmd line
            cmd = ""
        }' "$@" |
        grep -E "^[^$TAB]*$TAB *([A-Za-z_][A-Za-z0-9_]*=[^ ]* +)*(build/pardo|pardo) "
}

commands README.md graphs/README.md >"$T/commands"
n_readme=$(grep -c "^README.md:" "$T/commands")
n_guide=$(grep -c "^graphs/README.md:" "$T/commands")
[ "$n_readme" -ge 20 ] && ok || bad "README.md: only $n_readme pardo commands found in its sh blocks"
[ "$n_guide" -ge 5 ] && ok || bad "graphs/README.md: only $n_guide pardo commands found in its sh blocks"

# every subcommand has a working example in the README
for sub in "run" "train" "transpile" "import" "check" "ops" "dot" "trace summary" "trace timeline" "--version"; do
    grep "^README.md:" "$T/commands" | grep -qE "$TAB *([A-Za-z_][A-Za-z0-9_]*=[^ ]* +)*(build/pardo|pardo) $sub( |$)" &&
        ok || bad "README.md has no example of 'pardo $sub' in a sh block"
done

accuracy_checks=0
onnx_skipped=0
while IFS="$TAB" read -r where cmd; do
    case $cmd in *.onnx*|*build/mlp.json*|*build/cnn2.json*|*build/mlp_ft.json*)
        if [ "$onnx_built" = 0 ]; then onnx_skipped=$((onnx_skipped + 1)); continue; fi ;;
    esac
    want=0
    case $cmd in *"# exits "[0-9]*) want=$(printf '%s\n' "$cmd" | sed -n 's/.*# exits \([0-9]*\).*/\1/p') ;; esac
    min=$(printf '%s\n' "$cmd" | sed -n 's/.*# eval_accuracy >= \([0-9.]*\).*/\1/p')
    run=$(printf '%s\n' "$cmd" |
        sed -E 's#^( *([A-Za-z_][A-Za-z0-9_]*=[^ ]* +)*)(build/pardo|pardo) #\1"$PARDO" #')
    (cd "$W" && PARDO=$PARDO sh -c "$run") >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    if [ "$rc" != "$want" ]; then
        bad "$where: exit $rc, expected $want: $cmd
stderr: $(head -c 2000 "$T/err")"
        continue
    fi
    if [ "$want" != 0 ] && ! grep -q "^pardo" "$T/err"; then
        bad "$where: exit $want without a message: $cmd"
        continue
    fi
    if [ -n "$min" ]; then
        accuracy_checks=$((accuracy_checks + 1))
        acc=$(sed -n 's/^eval_accuracy: \([0-9.]*\)$/\1/p' "$T/out")
        if [ -z "$acc" ] || ! awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a >= m) }'; then
            bad "$where: eval_accuracy '$acc', the doc says at least $min: $cmd"
            continue
        fi
    fi
    ok
done <"$T/commands"
[ "$onnx_skipped" = 0 ] || echo "cli-docs: $onnx_skipped commands on ONNX models skipped (this pardo has no ONNX support)"
[ "$accuracy_checks" -ge 2 ] && ok || bad "only $accuracy_checks commands check a stated accuracy (README's MLP, the guide's CNN)"

# the docs write only under build/
diff -r graphs "$W/graphs" >"$T/diff" 2>&1 && ok || bad "a documented command changed graphs/: $(head -c 1000 "$T/diff")"

cli_finish
