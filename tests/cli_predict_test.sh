#!/bin/sh
# cli_predict_test.sh - `pardo run` as a predictor: only the ops the fetches
# need run (a transpiled training graph's probs without its labels, against
# the untranspiled graph's), eval mode unless --train (dropout), a training
# graph's updates with --steps N / --save, --format csv for --out and CSV
# feeds (read back bit for bit), feed dtype casts made and refused, and
# bad values exiting 2 with their place. `pardo train --data/--eval FILE.csv`.
# Usage: tests/cli_predict_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-predict "$@"
NPY_CLOSE=${NPY_CLOSE:-build/tests/tools/npy_close}
case $NPY_CLOSE in /*) ;; *) NPY_CLOSE=$ROOT/$NPY_CLOSE ;; esac
D=graphs/data
close() { # NAME GOT WANT [RTOL ATOL]
    n=$1; shift
    if "$NPY_CLOSE" "$@" 2>"$T/close.err"; then ok; else bad "$n: $(cat "$T/close.err")"; fi
}

# ---- pruning: probs of a transpiled training graph need no labels ----------
expect "transpile mlp" 0 -- transpile graphs/mlp.json -o "$T/train.json" --backward loss --optimizer sgd --lr 0.1 --parts 2
expect "probs without labels" 0 "has optimize ops; running in eval mode" "without its updates" -- \
    run "$T/train.json" --feed x=$D/mlp_x.npy --fetch probs --out "$T/p1" --threads 2
expect "probs of the plain graph" 0 -- run graphs/mlp.json --feed x=$D/mlp_x.npy --fetch probs --out "$T/p0"
close "transpiled probs = plain probs" "$T/p1/probs.npy" "$T/p0/probs.npy" 1e-6 1e-7
expect "labels given, not needed" 0 "--feed y=$D/mlp_y.npy: the fetched vars do not need 'y'; not read" -- \
    run graphs/mlp.json --feed x=$D/mlp_x.npy --feed y=$D/mlp_y.npy --fetch probs
expect "needed feed missing" 2 "missing feed 'y'" -- run "$T/train.json" --feed x=$D/mlp_x.npy --fetch loss
expect "needed feed missing, plain" 2 "missing feed 'x'" -- run graphs/mlp.json --fetch probs

# ---- a training graph's updates: with --steps N and --save they run --------
# (fetching w1 or a gradient would ask for the updates: an updated param is what they write)
expect "train 3 steps and save" 0 "with its updates" -- \
    run "$T/train.json" --feed x=$D/mlp_x.npy --feed y=$D/mlp_y.npy --steps 3 --save "$T/ck.safetensors"
expect "trained probs, one eval step" 0 -- run "$T/train.json" --feed x=$D/mlp_x.npy --load "$T/ck.safetensors" \
    --fetch probs --out "$T/w3"
if cmp -s "$T/p1/probs.npy" "$T/w3/probs.npy"; then bad "3 steps with --save left the params as they were"; else ok; fi
expect "trained probs again" 0 -- run "$T/train.json" --feed x=$D/mlp_x.npy --load "$T/ck.safetensors" \
    --fetch probs --out "$T/w3b"
if cmp -s "$T/w3/probs.npy" "$T/w3b/probs.npy"; then ok; else bad "one eval step changed the params"; fi
expect "one step fetching w1 updates it" 0 -- run "$T/train.json" --feed x=$D/mlp_x.npy --feed y=$D/mlp_y.npy \
    --fetch w1 --fetch probs --out "$T/w1"
if cmp -s "$T/w1/probs.npy" "$T/p1/probs.npy"; then ok; else bad "probs differ though computed before the update"; fi

# ---- eval mode unless --train: dropout ------------------------------------
cat >"$T/drop.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {"x": {"dtype": "float32", "shape": [-1, 64], "role": "feed"}},
 "ops": [{"op": "dropout", "in": ["x"], "out": ["y"], "attrs": {"ratio": 0.5, "seed": 3}}]}]}
G
expect "dropout, eval" 0 -- run "$T/drop.json" --feed x=$D/mlp_x.npy --fetch y --out "$T/d0"
close "dropout off in eval mode" "$T/d0/y.npy" "$D/mlp_x.npy" 0 0
expect "dropout, --train" 0 -- run "$T/drop.json" --feed x=$D/mlp_x.npy --fetch y --out "$T/d1" --train
if "$NPY_CLOSE" "$T/d1/y.npy" "$D/mlp_x.npy" 0 0 2>/dev/null; then bad "--train left dropout off"; else ok; fi

# ---- --format csv and CSV feeds ------------------------------------------
expect "probs as csv" 0 -- run graphs/mlp.json --feed x=$D/mlp_x.npy --fetch probs --out "$T/c" --format csv
rows=$(wc -l <"$T/c/probs.csv")
[ "$rows" -eq "$(grep -c . "$T/c/probs.csv")" ] && [ "$(head -1 "$T/c/probs.csv" | tr ',' '\n' | wc -l)" -eq 10 ] \
    && ok || bad "probs.csv: $rows lines, first line $(head -1 "$T/c/probs.csv")"
cat >"$T/id.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {"p": {"dtype": "float32", "shape": [-1, 10], "role": "feed"}},
 "ops": [{"op": "identity", "in": ["p"], "out": ["q"]}]}]}
G
expect "csv feed" 0 -- run "$T/id.json" --feed p="$T/c/probs.csv" --fetch q --out "$T/c2"
close "csv round trip, bit for bit" "$T/c2/q.npy" "$T/p0/probs.npy" 0 0
expect "x as csv" 0 -- run "$T/id.json" --feed p="$T/c/probs.csv" --fetch q --out "$T/c3" --format csv
if cmp -s "$T/c/probs.csv" "$T/c3/q.csv"; then ok; else bad "csv written twice differs"; fi
printf 'a,b\n1,2\n3,4\n\n' >"$T/h.csv"
cat >"$T/id2.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {"p": {"dtype": "int64", "shape": [-1, 2], "role": "feed"}},
 "ops": [{"op": "identity", "in": ["p"], "out": ["q"]}]}]}
G
expect "csv header and int64" 0 -- run "$T/id2.json" --feed p="$T/h.csv" --fetch q
stdout_has "csv header and int64" "q: int64 [2, 2] = [1, 2, 3, 4]"
printf '1,2\n3\n' >"$T/ragged.csv"
expect "ragged csv" 2 "$T/ragged.csv: line 2: 1 fields" -- run "$T/id2.json" --feed p="$T/ragged.csv"
printf '1,2\n3,x\n' >"$T/nan.csv"
expect "non-number csv" 2 "$T/nan.csv: line 2, column 2: 'x' is not an integer" -- run "$T/id2.json" --feed p="$T/nan.csv"
printf '1,2,3\n' >"$T/wide.csv"
expect "csv columns vs shape" 2 "$T/wide.csv: line 1: more than 2 fields" "[-1, 2]" -- run "$T/id2.json" --feed p="$T/wide.csv"
expect "csv for no feed" 2 "$T/h.csv: $T/id2.json has no feed var 'q'" -- run "$T/id2.json" --feed p="$T/h.csv" --feed q="$T/h.csv"
expect "bad --format" 2 "--format expects npy or csv, got 'tsv'" -- run "$T/id2.json" --feed p="$T/h.csv" --format tsv

# ---- dtype casts of feeds ------------------------------------------------
cat >"$T/to64.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {"x": {"dtype": "float32", "shape": [-1, 64], "role": "feed"}},
 "ops": [{"op": "cast", "in": ["x"], "out": ["x64"], "attrs": {"dtype": "float64"}}]}]}
G
expect "make a float64 file" 0 -- run "$T/to64.json" --feed x=$D/mlp_x.npy --fetch x64 --out "$T/f"
expect "float64 feed cast" 0 "$T/f/x64.npy: float64 [" "cast to float32 for 'x'" -- \
    run graphs/mlp.json --feed x="$T/f/x64.npy" --fetch probs --out "$T/p2"
close "cast feed, same probs" "$T/p2/probs.npy" "$T/p0/probs.npy" 0 0
expect "refused cast" 2 "$D/mlp_y.npy: the file is int64 [" "but the var 'x' is float32" -- \
    run graphs/mlp.json --feed x=$D/mlp_y.npy --fetch probs

# ---- pardo train --data/--eval FILE.csv and cast files ---------------------
cat >"$T/idx.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {"x": {"dtype": "float32", "shape": [-1, 64], "role": "feed"},
                                  "y": {"dtype": "int64", "shape": [-1], "role": "feed"}},
 "ops": [{"op": "identity", "in": ["x"], "out": ["xo"]}, {"op": "identity", "in": ["y"], "out": ["yo"]},
         {"op": "cast", "in": ["y"], "out": ["y32"], "attrs": {"dtype": "int32"}}]}]}
G
expect "data as csv" 0 -- run "$T/idx.json" --feed x=$D/mlp_x.npy --feed y=$D/mlp_y.npy --fetch xo --fetch yo \
    --out "$T/csv" --format csv
expect "labels as int32" 0 -- run "$T/idx.json" --feed x=$D/mlp_x.npy --feed y=$D/mlp_y.npy --fetch y32 --out "$T/i32"
expect "train on npy" 0 -- train "$T/train.json" --data x=$D/mlp_x.npy --data y=$D/mlp_y.npy --batch-size 16 \
    --eval x=$D/mlp_x.npy --eval y=$D/mlp_y.npy --save "$T/npy.st"
expect "train on csv" 0 -- train "$T/train.json" --data x="$T/csv/xo.csv" --data y="$T/csv/yo.csv" --batch-size 16 \
    --eval x="$T/csv/xo.csv" --eval y="$T/csv/yo.csv" --save "$T/csv.st"
if cmp -s "$T/npy.st" "$T/csv.st"; then ok; else bad "training on the CSV copies gave another checkpoint"; fi
expect "train on int32 labels" 0 "$T/i32/y32.npy: int32 [" "cast to int64 for 'y'" -- \
    train "$T/train.json" --data x=$D/mlp_x.npy --data y="$T/i32/y32.npy" --batch-size 16 \
    --eval x=$D/mlp_x.npy --eval y=$D/mlp_y.npy --save "$T/i32.st"
if cmp -s "$T/npy.st" "$T/i32.st"; then ok; else bad "training on int32 labels gave another checkpoint"; fi
expect "train refuses a float label file" 2 "$D/mlp_x.npy: the file is float32 [" ", 64], but feed var 'y' is int64 [-1]" -- \
    train "$T/train.json" --data x=$D/mlp_x.npy --data y=$D/mlp_x.npy --batch-size 16
printf '1\n2,3\n' >"$T/ragged_y.csv"
expect "train refuses a ragged csv" 2 "$T/ragged_y.csv: line 2: more than 1 fields" -- \
    train "$T/train.json" --data x=$D/mlp_x.npy --data y="$T/ragged_y.csv" --batch-size 16

cli_finish
