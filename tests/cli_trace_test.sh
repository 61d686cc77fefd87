#!/bin/sh
# cli_trace_test.sh - end-to-end tests of execution traces: `pardo run
# --trace FILE` on the MLP transpiled for 2 threads writes a Chrome trace
# (also when the run fails or is interrupted, never a partial file);
# `pardo trace summary` (text, --csv, --top) and `pardo trace timeline`
# (well-formed SVG; rendered by headless Chromium to a non-trivial PNG where
# Debian's chromium is installed); `pardo run --profile`; and the errors:
# a file that is not a trace, a truncated trace, a missing file, a timeline
# without -o (exit 2 naming the file or the flag).
# Usage: tests/cli_trace_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-trace "$@"

# has NAME FILE TEXT: FILE contains TEXT
has() {
    if grep -qF -- "$3" "$2"; then ok; else bad "$1: $2 lacks '$3': $(head -c 1500 "$2")"; fi
}

# no_temp NAME DIR: no temporary file (NAME.tmpXXXXXX) left in DIR
no_temp() {
    if ls "$2" | grep -q '\.tmp'; then bad "$1: a temporary file was left: $(ls "$2")"; else ok; fi
}

FEEDS="--feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy"
expect "transpile" 0 -- transpile graphs/mlp.json -o "$T/train.json" --backward loss --optimizer adam --lr 0.01

# ---- help ----
expect "trace --help" 0 -- trace --help
has "trace --help" "$T/out" "usage: pardo trace summary"
expect "trace summary --help" 0 -- trace summary --help
has "trace summary --help" "$T/out" "--csv"
expect "trace timeline --help" 0 -- trace timeline --help
has "trace timeline --help" "$T/out" "-o FILE.svg"
expect "run --help" 0 -- run --help
has "run --help" "$T/out" "--trace FILE"
has "run --help" "$T/out" "--profile"
expect "pardo --help" 0 -- --help
has "pardo --help" "$T/out" "trace summary TRACE"

# ---- run --trace: a Chrome trace of the 2-step run ----
mkdir -p "$T/r"
expect "run --trace" 0 -- run "$T/train.json" $FEEDS --steps 2 --threads 2 --fetch loss --trace "$T/r/t.json"
has "run --trace stdout" "$T/out" "loss: float32 []"
has "trace file" "$T/r/t.json" '"traceEvents":['
has "trace file" "$T/r/t.json" '"displayTimeUnit":"ms"'
has "trace file" "$T/r/t.json" '"status":"ok"'
has "trace file" "$T/r/t.json" '"name":"thread_name"'
has "trace file" "$T/r/t.json" '"ph":"X"'
has "trace file" "$T/r/t.json" '"cat":"part"'
has "trace file" "$T/r/t.json" '"ph":"s"'
has "trace file" "$T/r/t.json" '"ph":"C"'
no_temp "run --trace" "$T/r"
# the same results as without a trace
"$PARDO" run "$T/train.json" $FEEDS --steps 2 --threads 2 --fetch loss >"$T/plain" 2>/dev/null
if cmp -s "$T/plain" "$T/out"; then ok; else bad "--trace changed the results: $(cat "$T/plain" "$T/out")"; fi

# ---- summary: text, --top, --csv ----
expect "summary" 0 -- trace summary "$T/r/t.json"
cp "$T/out" "$T/summary.txt"
for w in "per op type" "matmul" "adam" "top 10 ops by total time" "threads (busy" "main" "parallel_do (efficiency" \
    "b0:2 parts" "p99 us" "2 steps"; do
    has "summary" "$T/summary.txt" "$w"
done
expect "summary --top 3" 0 -- trace summary "$T/r/t.json" --top 3
has "summary --top 3" "$T/out" "top 3 ops by total time"
n=$(sed -n '/^top 3 ops/,/^$/p' "$T/out" | grep -c '^b[01]:')
if [ "$n" = 3 ]; then ok; else bad "summary --top 3: $n op rows: $(cat "$T/out")"; fi
expect "summary --csv" 0 -- trace summary "$T/r/t.json" --csv
if [ "$(head -1 "$T/out")" = "section,key,metric,value" ]; then ok; else bad "csv header: $(head -1 "$T/out")"; fi
has "summary --csv" "$T/out" "op_type,matmul,count,8"
has "summary --csv" "$T/out" "parallel_do,b0:2 parts,efficiency,"
has "summary --csv" "$T/out" "thread,main,busy_share,"
if awk -F, 'NR > 1 && NF != 4 { exit 1 }' "$T/out"; then ok; else bad "csv rows without 4 fields: $(head -5 "$T/out")"; fi
# values with fixed decimals: counts whole, microseconds to 3 places, shares to 6 (not 343.53099999999995)
if awk -F, 'NR > 1 && $4 !~ /^-?[0-9]+(\.[0-9][0-9][0-9]|\.[0-9][0-9][0-9][0-9][0-9][0-9])?$/ { print; exit 1 }' "$T/out" >"$T/csv.bad"
then ok; else bad "csv values without fixed decimals: $(cat "$T/csv.bad")"; fi
if grep -qx 'op_type,matmul,count,8' "$T/out"; then ok; else bad "csv count not whole: $(grep op_type,matmul,count "$T/out")"; fi
# long op names are not cut: the columns widen to the longest
expect "summary --top 100" 0 -- trace summary "$T/r/t.json" --top 100
if grep -qE ' softmax_cross_entropy_grad +softmax_cross_entropy_grad +[0-9]' "$T/out"; then ok; else
    bad "summary cuts a long op name: $(grep softmax_cross "$T/out")"
fi

# ---- timeline: one well-formed SVG ----
expect "timeline" 0 -- trace timeline "$T/r/t.json" -o "$T/r/t.svg"
if command -v xmllint >/dev/null 2>&1; then
    if xmllint --noout "$T/r/t.svg" 2>"$T/xml.err"; then ok; else bad "timeline is not well-formed XML: $(head -5 "$T/xml.err")"; fi
else
    echo "cli-trace: xmllint not installed: checked the SVG's root element and tag counts instead"
    if head -2 "$T/r/t.svg" | grep -q '<svg xmlns="http://www.w3.org/2000/svg"' && tail -1 "$T/r/t.svg" | grep -q '^</svg>$' &&
        [ "$(grep -o '<title>' "$T/r/t.svg" | wc -l)" = "$(grep -o '</title>' "$T/r/t.svg" | wc -l)" ]; then
        ok
    else bad "timeline: not an SVG document"; fi
fi
for w in ">main</text>" ">matmul</text>" " ms</text>" "<title>" "parallel_do part"; do
    has "timeline" "$T/r/t.svg" "$w"
done
# a lane for the pool's worker when it ran a part (in so short a run the caller may run both)
if grep -q '"args":{"name":"pool-1"}' "$T/r/t.json"; then has "timeline lanes" "$T/r/t.svg" ">pool-1</text>"; fi
no_temp "timeline" "$T/r"
expect "timeline --width" 0 -- trace timeline "$T/r/t.json" -o "$T/r/wide.svg" --width 3000
has "timeline --width" "$T/r/wide.svg" 'width="3000"'

# headless Chromium renders it to a picture with something on it
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ]; then
    timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$T/chromium" \
        --screenshot="$T/t.png" --window-size=1400,500 "file://$T/r/t.svg" >"$T/chromium.log" 2>&1
    size=$(wc -c <"$T/t.png" 2>/dev/null || echo 0)
    if [ "$size" -gt 8000 ] && head -c 8 "$T/t.png" | grep -q PNG; then ok; else
        bad "chromium rendered a PNG of $size bytes: $(tail -3 "$T/chromium.log")"
    fi
else
    echo "cli-trace: Debian's chromium is not installed: skipped rendering the SVG (apt-get install chromium)"
fi

# ---- --profile: the summary on stderr, no file ----
mkdir -p "$T/p"
(cd "$T/p" && "$PARDO" run "$T/train.json" --feed x="$ROOT/graphs/data/mlp_x.npy" --feed y="$ROOT/graphs/data/mlp_y.npy" \
    --steps 3 --threads 2 --fetch loss --profile >"$T/out" 2>"$T/err")
rc=$?
if [ "$rc" = 0 ]; then ok; else bad "run --profile: exit $rc: $(cat "$T/err")"; fi
for w in "trace --profile" "per op type" "softmax_cross_entropy" "threads (busy" "parallel_do (efficiency" "3 steps"; do
    has "--profile" "$T/err" "$w"
done
has "--profile stdout" "$T/out" "loss: float32 []"
if [ -z "$(ls "$T/p")" ]; then ok; else bad "--profile wrote files: $(ls "$T/p")"; fi
expect "--profile and --trace" 0 -- run "$T/train.json" $FEEDS --threads 2 --fetch loss --profile --trace "$T/r/both.json"
has "--profile and --trace" "$T/err" "per op type"
expect "summary of --profile's trace" 0 -- trace summary "$T/r/both.json"

# ---- a failing run: exit 1, and a whole trace that ends at the failing op ----
cat >"$T/div.json" <<'EOF'
{"pardo": 1, "blocks": [{"vars": {
  "a": {"dtype": "int32", "shape": [2], "value": [1, 2]},
  "b": {"dtype": "int32", "shape": [2], "value": [1, 0]}},
 "ops": [
  {"op": "add", "in": ["a", "b"], "out": ["c"]},
  {"op": "div", "in": ["c", "b"], "out": ["d"], "name": "divide"},
  {"op": "add", "in": ["d", "b"], "out": ["e"]}]}]}
EOF
mkdir -p "$T/f"
expect "failing run --trace" 1 "division by zero" -- run "$T/div.json" --trace "$T/f/t.json"
has "failing trace" "$T/f/t.json" '"status":"failed"'
has "failing trace" "$T/f/t.json" '"error":"'
has "failing trace" "$T/f/t.json" "division by zero"
no_temp "failing run" "$T/f"
if [ "$(grep -o '"cat":"op"' "$T/f/t.json" | wc -l)" = 2 ]; then ok; else bad "failing trace: not 2 op events"; fi
expect "summary of a failed run" 0 -- trace summary "$T/f/t.json"
has "summary of a failed run" "$T/out" "failed"

# ---- interrupted: SIGINT -> exit 130, the trace written first ----
# On the digits' 1,438 rows (the MLP's 64 inputs, 10 classes), steps slow enough that a trace of a fraction of a
# second stays tens of MB (mlp_x's 16 rows make ~300 MB a second). The signal goes once the run's pool has its
# second thread (/proc/PID/task: the steps have begun, or are about to) and 0.3 s more, however late a loaded
# machine starts the process.
mkdir -p "$T/i"
"$PARDO" run "$T/train.json" --feed x=graphs/data/digits_train_x.npy --feed y=graphs/data/digits_train_y.npy \
    --steps 100000000 --threads 2 --fetch loss --trace "$T/i/t.json" >"$T/i.out" 2>"$T/i.err" &
pid=$!
i=0
while [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -lt 2 ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.3
kill -INT $pid
wait $pid
rc=$?
if [ "$rc" = 130 ]; then ok; else bad "interrupted run: exit $rc, expected 130: $(cat "$T/i.err")"; fi
has "interrupted trace" "$T/i/t.json" '"status":"interrupted"'
no_temp "interrupted run" "$T/i"
expect "summary of an interrupted run" 0 -- trace summary "$T/i/t.json"

# ---- a trace past its memory limit: the run goes on, the trace is its first part, and says so ----
mkdir -p "$T/m"
(PARDO_TRACE_MAX_MB=1 "$PARDO" run "$T/train.json" --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy \
    --steps 3000 --threads 2 --fetch loss --trace "$T/m/t.json" >"$T/out" 2>"$T/err")
rc=$?
if [ "$rc" = 0 ]; then ok; else bad "trace past its limit: exit $rc: $(cat "$T/err")"; fi
has "trace past its limit" "$T/err" "recording stopped"
has "trace past its limit" "$T/err" "PARDO_TRACE_MAX_MB"
has "trace past its limit" "$T/m/t.json" '"full_at_us":'
has "trace past its limit" "$T/out" "loss: float32 []"
expect "summary of a trace past its limit" 0 -- trace summary "$T/m/t.json"
has "summary of a trace past its limit" "$T/out" "recording stopped"
(PARDO_TRACE_MAX_MB=lots "$PARDO" run "$T/train.json" $FEEDS --threads 2 --trace "$T/m/bad.json" >"$T/out" 2>"$T/err")
rc=$?
if [ "$rc" = 2 ]; then ok; else bad "a bad PARDO_TRACE_MAX_MB: exit $rc, expected 2"; fi
has "a bad PARDO_TRACE_MAX_MB" "$T/err" "PARDO_TRACE_MAX_MB is 'lots'"
no_file "a bad PARDO_TRACE_MAX_MB" "$T/m/bad.json"
(PARDO_TRACE_MAX_MB=0 "$PARDO" train "$T/train.json" --data x=graphs/data/mlp_x.npy --data y=graphs/data/mlp_y.npy \
    --batch-size 8 --epochs 1 --trace "$T/m/bad.json" >"$T/out" 2>"$T/err")
rc=$?
if [ "$rc" = 2 ]; then ok; else bad "train with a bad PARDO_TRACE_MAX_MB: exit $rc, expected 2"; fi
has "train with a bad PARDO_TRACE_MAX_MB" "$T/err" "PARDO_TRACE_MAX_MB is '0'"
no_file "train with a bad PARDO_TRACE_MAX_MB" "$T/m/bad.json"

# ---- errors: exit 2 naming the file and what was expected ----
expect "summary of a graph" 2 "graphs/mlp.json" "traceEvents" -- trace summary graphs/mlp.json
head -c 3000 "$T/r/t.json" >"$T/half.json"
expect "summary of a truncated trace" 2 "$T/half.json" "truncated" "expected a Chrome trace" -- trace summary "$T/half.json"
expect "timeline of a truncated trace" 2 "$T/half.json" -- trace timeline "$T/half.json" -o "$T/half.svg"
no_file "timeline of a truncated trace" "$T/half.svg"
expect "summary of a missing file" 2 "$T/missing.json" -- trace summary "$T/missing.json"
: >"$T/empty.json"
expect "summary of an empty file" 2 "$T/empty.json" "empty file" -- trace summary "$T/empty.json"
# zeros are no trace (not an "empty" one), refused from their first byte: a 2 GB sparse file, and /dev/zero
truncate -s 2G "$T/zeros.json"
for f in "$T/zeros.json" /dev/zero; do
    bounded trace summary "$f"
    if [ "$rc" = 2 ] && grep -qF "$f: byte 0: found byte 0x00" "$T/err" && ! grep -q "empty" "$T/err"; then ok; else
        bad "summary of zeros $f: exit $rc: $(cat "$T/err")"
    fi
done
rm -f "$T/zeros.json"
printf '{"traceEvents": [{"ph": "X", "ts": 1, "tid": 1}]}' >"$T/nodur.json"
expect "an event without dur" 2 "$T/nodur.json" "traceEvents[0]" '"dur"' -- trace summary "$T/nodur.json"
expect "timeline without -o" 2 "missing -o" -- trace timeline "$T/r/t.json"
expect "timeline without TRACE" 2 "missing TRACE" -- trace timeline -o "$T/x.svg"
expect "summary without TRACE" 2 "missing TRACE" -- trace summary
expect "unknown subcommand" 2 "unknown subcommand 'sumary'" -- trace sumary "$T/r/t.json"
expect "trace alone" 2 "usage: pardo trace" -- trace
expect "bad --top" 2 "--top expects an integer" -- trace summary "$T/r/t.json" --top 0
expect "unknown flag" 2 "unknown flag '--svg'" -- trace summary "$T/r/t.json" --svg
expect "timeline into a missing folder" 1 "$T/nowhere/t.svg" -- trace timeline "$T/r/t.json" -o "$T/nowhere/t.svg"
expect "run --trace into a missing folder" 1 "$T/nowhere/t.json" -- run "$T/train.json" $FEEDS --threads 2 --fetch loss --trace "$T/nowhere/t.json"
no_file "run --trace into a missing folder" "$T/nowhere"

cli_finish
