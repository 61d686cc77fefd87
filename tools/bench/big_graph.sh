#!/bin/sh
# big_graph.sh N [WIDTH] [PARAMS] - writes to stdout a graph file with a
# chain of N ops: layers of matmul, add and relu of width WIDTH (default 4)
# on a feed x [-1, WIDTH], layer K using the params w_J, b_J with J = K mod
# PARAMS (default 16: a parallel_do takes at most 64 inputs, so the
# gradients of 2 * PARAMS params must fit), and a reduce_mean loss at the
# end ("loss"), so that `pardo transpile G -o OUT --parts 2 --backward loss`
# works. For the load/check/transpile times of big graphs
# (tools/bench/NOTES.md, "Big graphs"); needs only sh and awk.
#   tools/bench/big_graph.sh 1000000 > /tmp/big.json
set -eu
n=${1:?usage: big_graph.sh N [WIDTH] [PARAMS]}
w=${2:-4}
np=${3:-16}
exec awk -v n="$n" -v w="$w" -v np="$np" 'BEGIN {
    layers = int((n - 1) / 3); if (layers < 1) layers = 1
    if (np > layers) np = layers
    printf "{\n  \"pardo\": 1,\n  \"name\": \"big_chain_%d\",\n  \"blocks\": [\n    {\n      \"vars\": {\n", n
    printf "        \"x\": {\"dtype\": \"float32\", \"shape\": [-1, %d], \"role\": \"feed\"}", w
    for (k = 0; k < np; k++) {
        printf ",\n        \"w_%d\": {\"dtype\": \"float32\", \"shape\": [%d, %d], \"role\": \"param\", \"init\": {\"fill\": \"xavier_uniform\", \"seed\": %d}}", k, w, w, k + 1
        printf ",\n        \"b_%d\": {\"dtype\": \"float32\", \"shape\": [%d], \"role\": \"param\", \"init\": {\"fill\": \"constant\", \"value\": 0}}", k, w
    }
    printf "\n      },\n      \"ops\": [\n"
    h = "x"
    for (k = 0; k < layers; k++) {
        printf "        {\"op\": \"matmul\", \"in\": [\"%s\", \"w_%d\"], \"out\": [\"mm_%d\"], \"role\": \"forward\"},\n", h, k % np, k
        printf "        {\"op\": \"add\", \"in\": [\"mm_%d\", \"b_%d\"], \"out\": [\"z_%d\"], \"role\": \"forward\"},\n", k, k % np, k
        printf "        {\"op\": \"relu\", \"in\": [\"z_%d\"], \"out\": [\"a_%d\"], \"role\": \"forward\"},\n", k, k
        h = "a_" k
    }
    printf "        {\"op\": \"reduce_mean\", \"in\": [\"%s\"], \"out\": [\"loss\"], \"attrs\": {\"keepdims\": false}, \"role\": \"loss\"}\n", h
    printf "      ]\n    }\n  ]\n}\n"
}'
