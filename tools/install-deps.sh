#!/bin/sh
# Installs what pardo's build needs on Debian or Ubuntu: gcc, make,
# pkg-config, cJSON and Check, OpenBLAS (optional: `make` links it when
# pkg-config finds it, BLAS=1; the own kernel in ops/gemm.c is used either way
# on CPUs with AVX2 or AVX-512), and for ONNX models protobuf-c with Debian's
# onnx.proto (optional: ONNX=1 where found) and the ONNX node tests that
# `make onnx-test` runs (libonnx-testdata), and Open MPI for `mpirun -np N
# pardo train` (optional: MPI=1 where mpicc is found). As root it runs apt-get; otherwise it prints
# the command to run and fails, so `make` stops with a clear message.
set -e
PKGS="gcc make pkg-config libcjson-dev check libopenblas-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata libopenmpi-dev openmpi-bin"
if [ "$(id -u)" = 0 ]; then
    echo "pardo: installing build dependencies: $PKGS" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq $PKGS >&2
else
    echo "pardo: missing build dependencies. Run:" >&2
    echo "    sudo apt-get install -y $PKGS" >&2
    exit 1
fi
