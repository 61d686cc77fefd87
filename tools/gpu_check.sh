#!/bin/sh
# tools/gpu_check.sh - the device check of a machine with a CUDA GPU (at most 5 minutes on 16 cores):
#   1. builds pardo with CUDA (make -jN CUDA=1) and checks the kernels linked (pardo ops says
#      "cuda kernel: yes" for matmul and relu);
#   2. prints `nvidia-smi -L` where it exists and asks pardo whether it finds a GPU: without one it
#      says so and exits 3 (the build was still checked);
#   3. runs the registry and CUDA suites, cuda, cuda_nn and cuda_train (every CUDA kernel against the
#      CPU kernel), the SyncedMemory suite and the device-stream one (streams, events, the pinned
#      host cache, the feed stage's copies on the copy stream); none may skip its GPU half;
#   4. trains the digits MLP (pardo transpile --no-parallel, then pardo train) on the GPU and on the
#      CPU with the same seed: both reach 95% held out, within 2 points of each other, and the GPU
#      run names each op it hands to the CPU once (softmax_cross_entropy, a CUDA kernel, never);
#   5. checks that 5 of W1's training steps (tools/bench/mlp784.json, batch 256, SGD) end at the same
#      loss on the GPU and the CPU, times W1's step with bench_pardo on the GPU and on the CPU (1 thread,
#      as W1; and every core), and PyTorch's step on CUDA where `torch.cuda.is_available()` says True.
# Prints a PASS / FAIL line per check and the timings, then a summary.
# Usage: tools/gpu_check.sh [--build DIR] [--jobs N]   (defaults: build, the online CPUs)
# Every step runs under a timeout that ends the whole check by 290 s (a step cut short fails).
# Exit status: 0 every check passed; 1 a check failed; 2 bad usage; 3 no GPU found (no GPU check ran).
set -u
cd "$(dirname "$0")/.." || exit 1

BUILD=build
JOBS=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)
while [ $# -gt 0 ]; do
    case $1 in
    --build) [ $# -ge 2 ] || { echo "gpu_check: --build needs a folder" >&2; exit 2; }; BUILD=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || { echo "gpu_check: --jobs needs a number" >&2; exit 2; }; JOBS=$2; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case $JOBS in '' | *[!0-9]*) echo "gpu_check: --jobs expects a number, got '$JOBS'" >&2; exit 2 ;; esac

T=$(mktemp -d "/tmp/pardo-gpu-check-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
: >"$T/summary"
failed=0
START=$(date +%s)
PARDO=$BUILD/pardo
# the tests' environment (Makefile TEST_ENV): the own matrix product, no pick cache
TEST_ENV="PARDO_TEST_FIXTURES=tests/fixtures PARDO_GEMM=own PARDO_GEMM_CACHE=off"

DEADLINE=$((START + 290))
# within SECS CMD...: CMD under a timeout of SECS, or of the time left before the deadline where that is less
within() {
    s=$1
    shift
    left=$((DEADLINE - $(date +%s)))
    [ "$left" -lt "$s" ] && s=$left
    if [ "$s" -lt 1 ]; then
        echo "gpu_check: out of time (the check's 290 s) before: $*" >&2
        return 124
    fi
    timeout "$s" "$@"
}
say() { echo "== $*"; }
pass() { echo "PASS: $*" | tee -a "$T/summary"; }
fail() { echo "FAIL: $*" | tee -a "$T/summary"; failed=1; }
note() { echo "      $*" | tee -a "$T/summary"; }
summary() {
    echo
    echo "== gpu_check summary ($(($(date +%s) - START)) s)"
    cat "$T/summary"
}
# a JSON line's number field: json_num FILE KEY
json_num() { sed -n "s/.*\"$2\": \([-0-9.e+]*\).*/\1/p" "$1" | head -1; }

# ---- 1. the CUDA build ----
NVCC_FOUND=$(command -v nvcc 2>/dev/null || { [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] && echo yes; })
if [ -z "$NVCC_FOUND" ]; then
    fail "build: no nvcc (put the CUDA toolkit's bin on PATH or set CUDA_HOME)"
    summary
    exit 1
fi
say "make -j$JOBS CUDA=1 BUILD=$BUILD"
if within 200 make -j"$JOBS" CUDA=1 BUILD="$BUILD" "$PARDO" "$BUILD/check_pardo" "$BUILD/tools/bench/bench_pardo" \
    >"$T/make.out" 2>&1; then
    pass "build: pardo, check_pardo and bench_pardo with CUDA"
else
    tail -30 "$T/make.out"
    fail "build: make failed (or ran out of time)"
    summary
    exit 1
fi
if "$PARDO" --version | grep -q '^CUDA: built in'; then pass "pardo --version: CUDA built in"; else
    fail "pardo --version does not say CUDA is built in: $("$PARDO" --version | grep CUDA)"
fi
for op in matmul matmul_grad relu add; do
    "$PARDO" ops $op | grep -q '^cuda kernel: yes' || fail "pardo ops $op: no CUDA kernel in the binary"
done
grep -q "FAIL: pardo ops" "$T/summary" || pass "pardo ops: matmul, matmul_grad, relu and add have their CUDA kernels"

# ---- 2. is there a GPU? ----
if command -v nvidia-smi >/dev/null 2>&1; then
    say "nvidia-smi -L"
    within 30 nvidia-smi -L 2>&1 | tee "$T/smi.out"
else
    echo "== nvidia-smi: not installed here"
fi
MX=graphs/data/mlp_x.npy
MY=graphs/data/mlp_y.npy
within 60 "$PARDO" run graphs/mlp.json --feed x=$MX --feed y=$MY --device cuda --fetch loss >"$T/probe.out" \
    2>"$T/probe.err"
probe_rc=$?
if grep -q "running on the CPU" "$T/probe.err"; then
    why=$(sed -n 's/^pardo: running on the CPU: //p' "$T/probe.err" | head -1)
    note "no GPU: pardo run --device cuda says \"$why\"; the GPU checks did not run"
    summary
    echo "gpu_check: no GPU found (exit 3)"
    exit 3
fi
if [ "$probe_rc" -ne 0 ]; then
    fail "pardo run --device cuda of graphs/mlp.json: exit $probe_rc: $(head -c 600 "$T/probe.err")"
    summary
    exit 1
fi
pass "a GPU is here: pardo run --device cuda ran graphs/mlp.json on it"

# ---- 3. the registry, CUDA, SyncedMemory and device-stream suites ----
say "CK_RUN_SUITE=registry, cuda, cuda_nn, cuda_train, synced_mem and device_stream $BUILD/check_pardo"
for suite in registry cuda cuda_nn cuda_train synced_mem device_stream; do
    # shellcheck disable=SC2086
    if within 150 env $TEST_ENV CK_RUN_SUITE=$suite "$BUILD/check_pardo" >"$T/$suite.out" 2>&1; then
        if grep -q "skipped the GPU" "$T/$suite.out"; then
            fail "suite $suite: a test skipped its GPU half: $(grep 'skipped the GPU' "$T/$suite.out" | head -3)"
        else
            pass "suite $suite: $(tail -1 "$T/$suite.out")"
        fi
    else
        grep -E "^tests/|:F:|:E:" "$T/$suite.out" | head -20
        fail "suite $suite: $(tail -1 "$T/$suite.out")"
    fi
done

# ---- 4. the digits MLP trained on the GPU and on the CPU ----
say "the digits MLP: pardo transpile --no-parallel, pardo train on the GPU and on the CPU"
DATA="--data x=graphs/data/digits_train_x.npy --data y=graphs/data/digits_train_y.npy"
EVAL="--eval x=graphs/data/digits_test_x.npy --eval y=graphs/data/digits_test_y.npy"
if within 30 "$PARDO" transpile graphs/digits_mlp.json -o "$T/digits.json" --backward loss --optimizer adam \
    --lr 0.01 --no-parallel 2>"$T/transpile.err"; then
    for dev in cuda cpu; do
        # shellcheck disable=SC2086
        within 60 "$PARDO" train "$T/digits.json" $DATA $EVAL --batch-size 32 --epochs 10 --shuffle --seed 1 \
            --device $dev >"$T/train_$dev.out" 2>"$T/train_$dev.err"
        echo $? >"$T/train_$dev.rc"
    done
    acc_gpu=$(sed -n 's/^eval_accuracy: //p' "$T/train_cuda.out")
    acc_cpu=$(sed -n 's/^eval_accuracy: //p' "$T/train_cpu.out")
    loss_gpu=$(sed -n 's/^loss: //p' "$T/train_cuda.out")
    loss_cpu=$(sed -n 's/^loss: //p' "$T/train_cpu.out")
    if [ "$(cat "$T/train_cuda.rc")" != 0 ] || [ "$(cat "$T/train_cpu.rc")" != 0 ]; then
        fail "train: exit $(cat "$T/train_cuda.rc") on the GPU, $(cat "$T/train_cpu.rc") on the CPU:" \
            "$(tail -3 "$T/train_cuda.err")"
    elif grep -q "running on the CPU" "$T/train_cuda.err"; then
        fail "train --device cuda ran on the CPU: $(grep 'running on the CPU' "$T/train_cuda.err")"
    elif awk -v g="$acc_gpu" -v c="$acc_cpu" \
        'BEGIN { d = g - c; if (d < 0) d = -d; exit !(g >= 0.95 && c >= 0.95 && d <= 0.02) }'; then
        pass "train digits: held-out accuracy $acc_gpu on the GPU, $acc_cpu on the CPU" \
            "(final loss $loss_gpu, $loss_cpu)"
    else
        fail "train digits: held-out accuracy $acc_gpu on the GPU, $acc_cpu on the CPU" \
            "(both >= 0.95, within 0.02 expected)"
    fi
    # the ops handed to the CPU are named once each, and softmax_cross_entropy (a CUDA kernel) is not
    twice=$(grep "runs on the CPU in this GPU run" "$T/train_cuda.err" | sort | uniq -d)
    if [ -z "$twice" ] && ! grep -q "note: op 'softmax_cross_entropy" "$T/train_cuda.err"; then
        pass "train --device cuda: the CPU-only ops are noted once each, softmax_cross_entropy not at all"
    else
        fail "train --device cuda: a note came twice or softmax_cross_entropy ran on the CPU: ${twice:-(none twice)}"
    fi
    grep "^note: op" "$T/train_cuda.err" | sed 's/^/      /'
else
    fail "transpile --no-parallel: $(cat "$T/transpile.err")"
fi

# ---- 5. W1's step: the GPU against the CPU (and PyTorch on CUDA) ----
say "W1's training step (tools/bench/mlp784.json, batch 256, SGD 0.1): bench_pardo on the GPU and the CPU"
BP=$BUILD/tools/bench/bench_pardo
MLP=tools/bench/mlp784.json
CORES=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
w1() { # w1 NAME ARGS...: one bench_pardo train run of W1 into $T/w1_NAME.json
    name=$1
    shift
    if within 60 "$BP" train "$MLP" --steps 50 --warmup 5 "$@" >"$T/w1_$name.json" 2>"$T/w1_$name.err"; then
        return 0
    fi
    fail "W1 $name: bench_pardo failed: $(tail -2 "$T/w1_$name.err")"
    return 1
}
# the same 5 SGD steps from the same init on the same batch end at the same loss within float32 rounding (past
# some 15 steps at lr 0.1 the runs drift apart: the rounding of the two products grows, on any two kernels)
if w1 gpu5 --device cuda --steps 1 --warmup 4 && w1 cpu5 --threads 1 --steps 1 --warmup 4; then
    vg=$(json_num "$T/w1_gpu5.json" value)
    vc=$(json_num "$T/w1_cpu5.json" value)
    if awk -v a="$vg" -v b="$vc" \
        'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * (b < 0 ? -b : b) + 1e-5) }'; then
        pass "W1: the loss after 5 steps is $vg on the GPU, $vc on the CPU"
    else
        fail "W1: the loss after 5 steps is $vg on the GPU, $vc on the CPU (within 1e-3 relative expected)"
    fi
fi
if w1 gpu --device cuda && w1 cpu1 --threads 1 && w1 cpun --threads "$CORES"; then
    g=$(json_num "$T/w1_gpu.json" median_us)
    c1=$(json_num "$T/w1_cpu1.json" median_us)
    cn=$(json_num "$T/w1_cpun.json" median_us)
    if grep -q '"device": "cuda"' "$T/w1_gpu.json"; then pass "W1 timed on the GPU"; else
        fail "W1 gpu: bench_pardo did not run on the GPU"
    fi
    awk -v g="$g" -v c1="$c1" -v cn="$cn" -v n="$CORES" 'BEGIN {
        printf "      W1 step (median of 50): GPU %.0f us; CPU 1 thread %.0f us (the GPU %.1fx as fast); ", g, c1, c1 / g
        printf "CPU %d threads %.0f us (the GPU %.1fx as fast)\n", n, cn, cn / g }' | tee -a "$T/summary"
else
    g=""
fi
if command -v python3 >/dev/null 2>&1 &&
    [ "$(within 60 python3 -c 'import torch; print(torch.cuda.is_available())' 2>/dev/null)" = "True" ]; then
    cat >"$T/torch_w1.py" <<'EOF'
# W1's step in PyTorch on CUDA: the MLP 784-512-512-10 (ReLU), cross-entropy, SGD lr 0.1, batch 256, float32.
import time
import torch
import torch.nn.functional as F
torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.rand(256, 784, device=dev), torch.arange(256, device=dev) % 10
def step():
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    opt.step()
for _ in range(5):
    step()
torch.cuda.synchronize()
times = []
for _ in range(50):
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e6)
times.sort()
print("%.3f" % times[len(times) // 2])
EOF
    if tg=$(within 90 python3 "$T/torch_w1.py" 2>"$T/torch.err"); then
        awk -v t="$tg" -v g="${g:-0}" 'BEGIN {
            if (g > 0) printf "      W1 step, PyTorch on CUDA: %.0f us (pardo on the GPU: %.2fx its time)\n", t, g / t
            else printf "      W1 step, PyTorch on CUDA: %.0f us\n", t }' | tee -a "$T/summary"
    else
        note "PyTorch on CUDA: the timing script failed: $(tail -2 "$T/torch.err")"
    fi
else
    note "PyTorch on CUDA: not here (python3 -c 'import torch; print(torch.cuda.is_available())' is not True): skipped"
fi

summary
if [ "$failed" -ne 0 ]; then
    echo "gpu_check: FAILED"
    exit 1
fi
echo "gpu_check: every check passed"
exit 0
