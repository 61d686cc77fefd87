/* main.c - the pardo command line: checks the op registry, then dispatches
 * to the subcommand in src/cli/cli_<command>.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/onnx.h"
#include "core/device.h"
#include "core/device_cache.h"
#include "core/host_cache.h"
#include "engine/engine.h"
#include "exec/thread_pool.h"
#include "gemm.h"
#include "op.h"
#include "cli/version.h"
#include "exec/comm.h"

static const char usage[] =
    "usage: pardo COMMAND [ARGS]\n"
    "\n"
    "pardo runs op graphs stored as JSON on CPU threads (and a CUDA GPU where one exists).\n"
    "\n"
    "GRAPH is a pardo graph file (JSON) or an ONNX model (.onnx), told apart by content.\n"
    "\n"
    "commands:\n"
    "  run GRAPH [--feed NAME=FILE.npy]... [--fetch NAME]... [--out DIR]\n"
    "            [--load CKPT] [--save CKPT] [--steps N] [--threads N] [--executor auto|sequential|dataflow]\n"
    "            [--device cpu|cuda[:K]] [--no-fuse] [--trace FILE] [--profile]\n"
    "                   run block 0 of a graph N times and print or save the fetched vars\n"
    "  train GRAPH --data NAME=FILE.npy... --batch-size B [--epochs E] [--shuffle] [--seed S]\n"
    "            [--drop-last] [--eval NAME=FILE.npy]... [--threads N] [--executor auto|sequential|dataflow]\n"
    "            [--load CKPT] [--save CKPT] [--log FILE.jsonl] [--loss NAME] [--no-fuse] [--trace FILE]\n"
    "            [--profile]\n"
    "                   train a training graph on .npy data sets, epoch by epoch, with evaluation\n"
    "  transpile GRAPH -o OUT [--parts N] [--backward LOSS] [--optimizer sgd|momentum|adam] [--lr X]\n"
    "            [--mu X] [--nesterov] [--beta1 X] [--beta2 X] [--epsilon X] [--weights FILE]\n"
    "                   append gradients and an optimizer, and rewrite for many CPU threads\n"
    "  import MODEL.onnx -o GRAPH.json [--weights FILE.safetensors]\n"
    "                   write an ONNX model as a pardo graph file and its params\n"
    "  check GRAPH [--fused]\n"
    "                   validate a graph; print its ops, vars, param count and inferred shapes\n"
    "                   (--fused: as run and train run it, after the fusion pass)\n"
    "  ops [OP]         list the ops, or one op's inputs, outputs and attrs\n"
    "  dot GRAPH        print the graph as Graphviz dot\n"
    "  trace summary TRACE [--top N] [--csv]\n"
    "                   per op type, per op, per thread and per parallel_do tables of a trace\n"
    "  trace timeline TRACE -o FILE.svg\n"
    "                   draw a trace: one lane per thread, ops coloured by type\n"
    "\n"
    "'pardo COMMAND --help' describes a command; 'pardo --version' prints the version and what\n"
    "this build runs products with. Exit status: 0 ok, 1 the run failed,\n"
    "2 bad usage or a bad input file, 130 stopped by SIGINT or SIGTERM.\n";

/* `pardo --version`: the version, then the build's parts (the matrix product this CPU gets and its pick between
 * the own kernel and BLAS, read from the cache file, BLAS, CUDA); starts no CUDA runtime, opens no BLAS. */
static int print_version(void) {
    printf("pardo %s\n", PARDO_VERSION);
    printf("matmul: %s (float32, on this CPU)\n", pardo_gemm_describe(PARDO_F32, PARDO_GEMM_AUTO));
    char pick[4096];
    pardo_gemm_pick_summary(pick, sizeof pick);
    printf("matmul pick: %s\n", pick);
    printf("BLAS: %s\n", pardo_gemm_blas_compiled() ? "built in (opened on first use; runs the classes the pick gave "
                                                       "it, or every product with PARDO_GEMM=blas)"
                                                     : "not built in (make BLAS=1)");
    printf("MPI: %s\n", pardo_comm_built() ? "built in (mpirun -np N pardo train: data-parallel over the ranks)"
                                           : "not built in (make MPI=1, with Open MPI installed)");
    printf("ONNX: %s\n", pardo_onnx_built() ? "built in (pardo run|check|dot|transpile MODEL.onnx, pardo import)"
                                             : "not built in (make ONNX=1, with protobuf-c, protoc-c and onnx.proto installed)");
    printf("CUDA: %s\n", pardo_device_compiled() ? "built in (--device cuda looks for a GPU at run time)"
                                                 : "not built in (nvcc was not found at build time)");
    return CLI_OK;
}

/* PARDO_DEVICE_CACHE_STATS=1: the device cache's counters on stderr as the command ends (before the trim), so a
 * test can see that more training steps did not allocate more device memory; then the pinned host cache's
 * (core/host_cache.h: the feed stage's staging blocks), so that it can see the same of cudaMallocHost. */
static void note_device_cache(void) {
    const char *env = getenv("PARDO_DEVICE_CACHE_STATS");
    if (!env || strcmp(env, "1") != 0) return;
    pardo_device_cache_stats c;
    pardo_device_cache_get_stats(&c);
    fprintf(stderr,
            "pardo: device cache: %llu raw allocations, %llu raw frees, %llu cache hits, %llu out-of-memory "
            "flushes, %zu bytes held, %zu bytes cached\n",
            (unsigned long long)c.raw_allocs, (unsigned long long)c.raw_frees, (unsigned long long)c.cache_hits,
            (unsigned long long)c.oom_flushes, c.bytes_held, c.bytes_cached);
    pardo_host_cache_stats h;
    pardo_host_cache_get_stats(&h);
    fprintf(stderr,
            "pardo: host cache: %llu pinned allocations, %llu pinned frees, %llu cache hits, %llu waits at reuse, "
            "%llu events made, %zu bytes held\n",
            (unsigned long long)h.raw_allocs, (unsigned long long)h.raw_frees, (unsigned long long)h.cache_hits,
            (unsigned long long)h.reuse_waits, (unsigned long long)h.events_made, h.bytes_held);
}

int main(int argc, char **argv) {
    pardo_status st;
    pardo_status_clear(&st);
    if (pardo_registry_check(&st) != PARDO_OK) {
        fprintf(stderr, "pardo: internal error: %s\n", st.msg);
        return CLI_FAILED;
    }
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (cli_is_help(cmd) || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0) return print_version();
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } commands[] = {
        {"run", pardo_cli_run},
        {"check", pardo_cli_check},
        {"ops", pardo_cli_ops},
        {"dot", pardo_cli_dot},
        {"transpile", pardo_cli_transpile},
        {"train", pardo_cli_train},
        {"trace", pardo_cli_trace},
        {"import", pardo_cli_import},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0) {
            int rc = commands[i].fn(argc - 2, argv + 2);
            /* join the pool's workers: a clean exit (valgrind counts the stacks of threads never joined) */
            cli_model_release();
            note_device_cache();
            pardo_device_cache_trim(); /* the cached device blocks go back to the device */
            pardo_engine_shutdown(); /* its free lists; its spinning dispatchers give their workers back */
            pardo_thread_pool_shutdown();
            return rc;
        }
    fprintf(stderr, "pardo: unknown command '%s' (expected run, train, transpile, import, check, ops, dot or trace)\n\n%s",
            cmd, usage);
    return CLI_BAD_INPUT;
}
