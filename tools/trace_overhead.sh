#!/bin/sh
# trace_overhead.sh - what `pardo run --trace` costs on an MLP training step.
# Transpiles graphs/mlp.json (backward, adam, one part per thread), makes a
# batch of ROWS random rows (with pardo itself: a param with a uniform init,
# fetched with --out), then times `pardo run` of STEPS steps without and
# with --trace, alternating, REPS times each, and prints the medians:
#   steps only:  the run less a 1-step run of the same kind (startup), per step;
#                with --trace this includes writing the trace's JSON.
# The trace's own wall span (`pardo trace summary`) is printed as well.
# Usage: tools/trace_overhead.sh PATH/TO/pardo [STEPS] [REPS] [ROWS] [THREADS]
set -eu
PARDO=${1:?usage: trace_overhead.sh PATH/TO/pardo [STEPS] [REPS] [ROWS] [THREADS]}
STEPS=${2:-2000}
REPS=${3:-11}
ROWS=${4:-256}
THREADS=${5:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/pardo-trace-overhead-XXXXXX)
trap 'rm -rf "$T"' EXIT

"$PARDO" transpile "$ROOT/graphs/mlp.json" -o "$T/train.json" --backward loss --optimizer adam --lr 0.01 >/dev/null
cat >"$T/gen.json" <<EOF
{"pardo": 1, "name": "batch", "blocks": [{"vars": {
  "x": {"dtype": "float32", "shape": [$ROWS, 64], "role": "param", "init": {"fill": "uniform", "low": -1, "high": 1, "seed": 3}},
  "r": {"dtype": "float32", "shape": [$ROWS], "role": "param", "init": {"fill": "uniform", "low": 0, "high": 9.99, "seed": 4}}},
 "ops": [{"op": "cast", "in": ["r"], "out": ["y"], "attrs": {"dtype": "int64"}}]}]}
EOF
"$PARDO" run "$T/gen.json" --fetch x --fetch y --out "$T/data" >/dev/null 2>&1

# us NAME ARGS...: runs pardo run with ARGS, prints the wall time in microseconds
us() {
    s=$(date +%s%N)
    "$PARDO" run "$T/train.json" --feed x="$T/data/x.npy" --feed y="$T/data/y.npy" --threads "$THREADS" \
        --fetch loss "$@" >/dev/null 2>&1
    e=$(date +%s%N)
    echo $(((e - s) / 1000))
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

: >"$T/off" && : >"$T/on" && : >"$T/off1" && : >"$T/on1"
i=0
while [ $i -lt "$REPS" ]; do
    us --steps "$STEPS" >>"$T/off"
    us --steps "$STEPS" --trace "$T/t.json" >>"$T/on"
    us --steps 1 >>"$T/off1"
    us --steps 1 --trace "$T/t1.json" >>"$T/on1"
    i=$((i + 1))
done
off=$(median <"$T/off")
on=$(median <"$T/on")
off1=$(median <"$T/off1")
on1=$(median <"$T/on1")
size=$(wc -c <"$T/t.json")
awk -v off="$off" -v on="$on" -v off1="$off1" -v on1="$on1" -v n="$STEPS" -v reps="$REPS" -v rows="$ROWS" \
    -v th="$THREADS" -v size="$size" 'BEGIN {
    printf "MLP 64-32-10, adam, batch %d, --threads %d, %d steps, median of %d runs each:\n", rows, th, n, reps
    printf "  whole run:  without --trace %.1f ms, with %.1f ms (+%.1f%%); trace %.1f MB\n", off / 1e3, on / 1e3, (on / off - 1) * 100, size / 1e6
    a = (off - off1) / (n - 1); b = (on - on1) / (n - 1)
    printf "  per step:   without %.2f us, with %.2f us (+%.1f%%, writing the JSON included)\n", a, b, (b / a - 1) * 100
}'
"$PARDO" trace summary "$T/t.json" | head -1
