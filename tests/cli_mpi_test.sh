#!/bin/sh
# cli_mpi_test.sh - `mpirun -np 2 pardo train` on one machine (SPEC section
# 3): two ranks of batch B train as one process of batch 2B with the same
# total parts (params and loss within float rounding; a rank alone with B
# differs), shuffled and with a short last batch; rank 0 alone prints, logs
# and writes the checkpoint; a bad file or a failing op on one rank ends the
# job with that rank's message, never a hang; SIGINT to mpirun stops both at
# a step boundary with the checkpoint whole, and a run resumes from it; one
# trace per rank, read together by `pardo trace summary`. Skipped, saying
# so, where pardo has no MPI or mpirun is missing.
# Usage: tests/cli_mpi_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-mpi "$@"

if ! "$PARDO" --version | grep -q '^MPI: built in' || ! command -v mpirun >/dev/null 2>&1; then
    echo "cli-mpi: skipped (pardo is built without MPI or mpirun is missing: make MPI=1 with Open MPI installed)"
    exit 0
fi
# CI runs as root; 2 ranks on a machine of any size; Open MPI's own leaks are not pardo's
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export TSAN_OPTIONS="${TSAN_OPTIONS:-} suppressions=$ROOT/tests/tsan_mpi.supp"
# shared memory between the ranks of one machine (no TCP plugin)
export OMPI_MCA_btl=self,vader
MPIRUN="timeout 120 mpirun --oversubscribe"
# a machine where mpirun cannot start 2 ranks at all (no shared memory, a broken launcher) is skipped, saying why;
# from here on every failure is pardo's
if ! $MPIRUN -np 2 "$PARDO" --version >"$T/pre" 2>&1; then
    echo "cli-mpi: skipped (mpirun -np 2 cannot start ranks here: $(tail -3 "$T/pre" | tr '\n' ' '))"
    exit 0
fi
NPY_CLOSE=${NPY_CLOSE:-build/tests/tools/npy_close}
case $NPY_CLOSE in /*) ;; *) NPY_CLOSE=$ROOT/$NPY_CLOSE ;; esac

D=graphs/data
DATA="--data x=$D/digits_train_x.npy --data y=$D/digits_train_y.npy"
TEST="--feed x=$D/digits_test_x.npy --feed y=$D/digits_test_y.npy"
G=graphs/digits_mlp.json
expect "transpile 1 part" 0 -- transpile $G -o "$T/p1.json" --backward loss --optimizer momentum --lr 0.05 --parts 1
expect "transpile, no parts" 0 -- transpile $G -o "$T/p0.json" --backward loss --optimizer momentum --lr 0.05 \
    --no-parallel
expect "transpile 2 parts" 0 -- transpile $G -o "$T/p2.json" --backward loss --optimizer momentum --lr 0.05 --parts 2

# the params a checkpoint holds, as .npy files under $T/$2
params() {
    run_pardo run $G --load "$1" $TEST --fetch w1 --fetch b1 --fetch w2 --fetch b2 --fetch loss --out "$T/$2"
    [ $rc = 0 ] && ok || bad "run $1: $(cat "$T/err")"
}
same_params() {
    for v in w1 b1 w2 b2 loss; do
        if "$NPY_CLOSE" "$T/$2/$v.npy" "$T/$3/$v.npy" 1e-5 1e-6 2>"$T/close"; then ok
        else bad "$1: $v differs: $(cat "$T/close")"; fi
    done
}

# 1438 rows: 28 steps of 2 x 25 and a last of 19 + 19 (one process: 50 and 38)
COMMON="$DATA --epochs 3 --shuffle --seed 5 --threads 1"
expect "one process, batch 50" 0 -- train "$T/p2.json" $COMMON --batch-size 50 --save "$T/one.safetensors"
one_loss=$(sed -n 's/^loss: //p' "$T/out")
$MPIRUN -np 2 "$PARDO" train "$T/p1.json" $COMMON --batch-size 25 --save "$T/two.safetensors" --log "$T/log.jsonl" \
    >"$T/out" 2>"$T/err"
[ $? = 0 ] && ok || bad "mpirun -np 2 train: $(cat "$T/err")"
two_loss=$(sed -n 's/^loss: //p' "$T/out")
[ -n "$two_loss" ] && [ "$two_loss" = "$one_loss" ] && ok || bad "the job's loss '$two_loss' is not one process's '$one_loss'"
[ "$(grep -c '^loss: ' "$T/out")" = 1 ] && ok || bad "not only rank 0 printed the summary: $(cat "$T/out")"
[ "$(grep -c '^epoch ' "$T/err")" = 3 ] && ok || bad "not only rank 0 printed the epoch lines: $(cat "$T/err")"
[ "$(wc -l <"$T/log.jsonl")" = 3 ] && ok || bad "--log has not one record per epoch: $(cat "$T/log.jsonl")"
params "$T/one.safetensors" one
params "$T/two.safetensors" two
same_params "2 ranks x 25 against 1 x 50" one two
# a graph not in parts overlaps its allreduce with the backward pass too: from the second step on, each bucket
# of 1 KB (one gradient) starts as the op that writes its gradient ends, so bucket 0 (the gradient written first)
# starts before that step's rank_merge; on the sequential executor and the dataflow one, the same params
early_buckets() { # a rank's trace -> steps after the first whose bucket 0 started before their rank_merge began
    grep -o '"name":"bucket","cat":"comm","ph":"X","ts":[0-9.]*[^}]*"bucket":0,' "$1" |
        sed 's/.*"ts":\([0-9.]*\).*/\1/' | sort -n >"$T/b0"
    grep -o '"name":"rank_merge","cat":"op","ph":"X","ts":[0-9.]*' "$1" | sed 's/.*"ts":\([0-9.]*\)/\1/' |
        sort -n >"$T/rm"
    [ "$(wc -l <"$T/b0")" = "$(wc -l <"$T/rm")" ] || { echo "buckets $(wc -l <"$T/b0"), merges $(wc -l <"$T/rm")"; return; }
    paste "$T/b0" "$T/rm" | awk 'NR > 1 && $1 < $2 {n++} END {print n + 0}'
}
for ex in sequential dataflow; do
    $MPIRUN -np 2 "$PARDO" train "$T/p0.json" $DATA --epochs 3 --shuffle --seed 5 --threads 1 --batch-size 25 \
        --executor $ex --bucket-mb 0.001 --save "$T/two_$ex.safetensors" --trace "$T/e_$ex.json" >"$T/out" 2>"$T/err"
    [ $? = 0 ] && ok || bad "mpirun -np 2, $ex, 1 KB buckets: $(cat "$T/err")"
    params "$T/two_$ex.safetensors" "two_$ex"
    same_params "2 ranks x 25, $ex, 1 KB buckets, against 1 x 50" one "two_$ex"
    # 3 epochs of 29 steps: 86 after the first
    n=$(early_buckets "$T/e_$ex.rank0.json")
    [ "$n" = 86 ] && ok || bad "$ex: bucket 0 started before rank_merge in $n of the 86 steps after the first"
done
# 2 parts a rank on 2 threads, buckets of 1 KB (one per gradient, started as the parts hand them on), against
# one process of 4 parts
expect "transpile 4 parts" 0 -- transpile $G -o "$T/p4.json" --backward loss --optimizer momentum --lr 0.05 --parts 4
expect "one process, 4 parts" 0 -- train "$T/p4.json" $DATA --epochs 3 --shuffle --seed 5 --threads 2 --batch-size 50 \
    --save "$T/four.safetensors"
$MPIRUN -np 2 "$PARDO" train "$T/p2.json" $DATA --epochs 3 --shuffle --seed 5 --threads 2 --batch-size 25 \
    --bucket-mb 0.001 --save "$T/two2.safetensors" --trace "$T/b.json" >"$T/out" 2>"$T/err"
[ $? = 0 ] && ok || bad "mpirun -np 2, 2 parts a rank: $(cat "$T/err")"
params "$T/four.safetensors" four
params "$T/two2.safetensors" two2
same_params "2 ranks x 2 parts against 1 x 4 parts" four two2
[ "$(grep -o '"name":"bucket","cat":"comm"[^}]*"bucket":3' "$T/b.rank0.json" | head -1)" ] && ok ||
    bad "--bucket-mb 0.001 did not give the 4 buckets of the 4 gradients"
# a check that can fail: one process of 25 rows a step trains otherwise
expect "one process, batch 25" 0 -- train "$T/p1.json" $COMMON --batch-size 25 --save "$T/alone.safetensors"
params "$T/alone.safetensors" alone
"$NPY_CLOSE" "$T/alone/w1.npy" "$T/two/w1.npy" 1e-5 1e-6 2>/dev/null && bad "25 rows alone train as the job does" || ok

# a bad file on rank 1 (MPMD: its own --data): the job ends with rank 1's message and status 2
$MPIRUN -np 1 "$PARDO" train "$T/p1.json" $DATA --batch-size 25 --epochs 2 --threads 1 : \
    -np 1 "$PARDO" train "$T/p1.json" --data x=$D/digits_test_x.npy --data y=$D/digits_train_y.npy --batch-size 25 \
    --epochs 2 --threads 1 >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 2 ] && ok || bad "a bad file on rank 1: mpirun exited $rc, expected 2: $(cat "$T/err")"
grep -q "digits_test_x.npy has 359" "$T/err" && grep -q "rank 1 of 2 failed (exit status 2)" "$T/err" && ok ||
    bad "a bad file on rank 1: $(cat "$T/err")"
# a rank with other data (good files, fewer rows) would run fewer steps: refused on every rank before the first
$MPIRUN -np 1 "$PARDO" train "$T/p1.json" $DATA --batch-size 25 --epochs 2 --threads 1 : \
    -np 1 "$PARDO" train "$T/p1.json" --data x=$D/digits_test_x.npy --data y=$D/digits_test_y.npy --batch-size 25 \
    --epochs 2 --threads 1 >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 2 ] && ok || bad "other data on rank 1: mpirun exited $rc, expected 2: $(cat "$T/err")"
grep -q "the ranks differ in the --data rows (this rank: 359" "$T/err" && ok || bad "other data on rank 1: $(cat "$T/err")"
# a failing op on rank 1 (a label out of range in its rows): status 1, the op and the rank named
cp $D/digits_train_y.npy "$T/bad_y.npy"
# row 901 (rank 1's in file order) gets label 99: byte 128 + 8 x 901 of the int64 array
printf 'c\000\000\000\000\000\000\000' | dd of="$T/bad_y.npy" bs=1 seek=$((128 + 8 * 901)) conv=notrunc 2>/dev/null
$MPIRUN -np 1 "$PARDO" train "$T/p1.json" $DATA --batch-size 25 --epochs 2 --threads 1 : \
    -np 1 "$PARDO" train "$T/p1.json" --data x=$D/digits_train_x.npy --data y="$T/bad_y.npy" --batch-size 25 \
    --epochs 2 --threads 1 >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 1 ] && ok || bad "a failing op on rank 1: mpirun exited $rc, expected 1: $(cat "$T/err")"
grep -q "pardo (rank 1 of 2):.*softmax_cross_entropy.*label 99" "$T/err" && ok || bad "a failing op: $(cat "$T/err")"

# SIGINT to mpirun (itself, not through timeout, which would pass on its own): both ranks stop after the same
# step, rank 0 writes the checkpoint whole; a watchdog ends a job that hangs
watchdog() {
    (sleep 60 && kill -9 "$1") >/dev/null 2>&1 &
    wd=$!
}
: >"$T/err" # emptied before the job starts: the wait below must see this job's lines
mpirun --oversubscribe -np 2 "$PARDO" train "$T/p1.json" $DATA --batch-size 25 --epochs 1000000 --threads 1 \
    --save "$T/sig.safetensors" >"$T/out" 2>"$T/err" &
job=$!
watchdog $job
for i in $(seq 1 100); do grep -q '^epoch 2/' "$T/err" && break; sleep 0.1; done
kill -INT $job
wait $job
rc=$?
kill $wd 2>/dev/null
[ $rc != 0 ] && ok || bad "mpirun exited 0 after SIGINT"
grep -q "stopped in epoch" "$T/err" && ok || bad "no 'stopped' line after SIGINT: $(tail -3 "$T/err")"
# stopped mid-epoch: the same steps follow with 2 ranks of 25 or one process of 50 (the checkpoint counts the job's batch)
: >"$T/err"
mpirun --oversubscribe -np 2 "$PARDO" train "$T/p1.json" $DATA --batch-size 25 --epochs 1000000 --threads 1 \
    --load "$T/sig.safetensors" --save "$T/sig2.safetensors" >"$T/out" 2>"$T/err" &
job=$!
watchdog $job
for i in $(seq 1 100); do grep -q '^epoch' "$T/err" && break; sleep 0.1; done
kill -INT $job
wait $job
kill $wd 2>/dev/null
grep -q "stopped in epoch" "$T/err" && ok || bad "the job did not resume: $(tail -3 "$T/err")"
expect "resume with one process" 0 -- train "$T/p1.json" $DATA --batch-size 50 --epochs 1 --load "$T/sig2.safetensors"
grep -q "epochs done" "$T/out" && ok || bad "the checkpoint did not resume: $(cat "$T/out")"
at=$(sed -n 's/.*stopped in epoch [0-9]* after batch \([0-9]*\) .*/\1/p' "$T/err")
if [ "${at:-0}" != 0 ]; then # mid-epoch (not at an epoch's end, where any batch may follow)
    expect "resume with another batch" 2 "resume it with the same batch" -- train "$T/p1.json" $DATA --batch-size 25 \
        --epochs 1 --load "$T/sig2.safetensors"
fi

# one trace per rank, with the allreduce spans; the summary reads both
$MPIRUN -np 2 "$PARDO" train "$T/p1.json" $DATA --batch-size 25 --epochs 1 --threads 1 --trace "$T/t.json" \
    >"$T/out" 2>"$T/err"
[ $? = 0 ] && [ -s "$T/t.rank0.json" ] && [ -s "$T/t.rank1.json" ] && [ ! -e "$T/t.json" ] && ok ||
    bad "--trace under mpirun: $(ls "$T"; cat "$T/err")"
grep -q '"cat":"comm"' "$T/t.rank1.json" && ok || bad "no allreduce span in rank 1's trace"
expect "summary of both" 0 -- trace summary "$T/t.rank0.json" "$T/t.rank1.json"
grep -q "traces side by side" "$T/out" && grep -q "t.rank1.json" "$T/out" && ok || bad "summary: $(tail -5 "$T/out")"
cli_finish
