/* bench_pardo.c - pardo's side of `make bench` (tools/bench/run): loads a
 * graph file as `pardo run` does, makes the training graph the way `pardo
 * transpile --backward loss --optimizer sgd --lr 0.1 [--parts P]` does,
 * feeds one batch, warms up, then times each step (pardo_executor_run) and
 * prints one JSON line with the per-step median. Graph loading, the passes
 * and process start are outside the timed steps.
 *
 *   bench_pardo train GRAPH [--threads N] [--parts P] [--batch B] [--steps S] [--warmup W]
 *       P 0 (default): the single-thread training graph (backward + sgd, no
 *       parallel rewrite); P >= 1: rewritten for P parts (parallel_do).
 *   bench_pardo infer GRAPH [--threads N] [--parts P] [--fetch NAME] ...   forward only; P >= 1: parts;
 *       the fetched var NAME (default probs) is what the run keeps
 *   train and infer feed every feed var of the graph's block 0 with one batch, its -1
 *       dims B (x [B, 784] for the MLP and the CNN, [B, 64] for graphs/two_tower.json,
 *       x and a target t [B, 256] for mlp_block.json, [B, 128, 256] for attention.json):
 *       floats uniform in [0, 1) from a fixed LCG, integers (labels) k % 10
 *   bench_pardo chain [--ops N] [--steps S] ...    a chain of N adds on a 16-element
 *       float32 tensor; the JSON line also gives us_per_op.
 *   --no-fuse (any mode): leave the fusion pass out, as `pardo run --no-fuse` does
 *   --executor auto|sequential|dataflow (any mode): pardo_exec_options.kind, as `pardo run
 *       --executor` sets it (default sequential: the bench names what it times)
 *   --trace FILE (any mode): also record the timed steps as a Chrome trace
 *       (`pardo trace summary FILE` shows where the time went).
 *   --device cpu|cuda (train, infer): where the ops with a CUDA kernel run, as `pardo run --device`
 *       (default cpu); cuda without a CUDA device is an error here (exit 1), not a CPU run; each
 *       timed GPU step ends with the device synchronised (tools/gpu_check.sh times W1's step so).
 *
 * Output: {"bench": "pardo", "mode": ..., "executor": ..., "device": "cpu" or "cuda", "threads": N,
 *          "parts": P, "steps": S,
 *          "median_us": ..., "p10_us": ..., "p90_us": ..., "value": first element of
 *          loss/probs/the chain's end, "heap_delta_bytes": heap in use after the timed
 *          steps minus before (0 in the steady state), "peak_rss_kb": the process's peak
 *          resident memory (VmHWM), "gemm": the matrix product in use}
 * Exit status 0, or 1 with a message on stderr. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/device.h"
#include "exec/comm.h"
#include "exec/executor.h"
#include "gemm.h"
#include "io/graph_json.h"
#include "pass.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"
#include "bench_util.h"

static void die(const char *what, const pardo_status *st) {
    fprintf(stderr, "bench_pardo: %s: %s\n", what, st ? st->msg : "");
    exit(1);
}

/* This process's peak resident set (VmHWM in /proc/self/status), in KiB; -1 where unknown. Unlike getrusage's
 * ru_maxrss it starts afresh at exec, so it does not count the parent that forked us. */
static long peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* The chain graph: a = x + b, then N - 1 more adds of b. */
static char *chain_text(int n) {
    size_t cap = (size_t)n * 96 + 512, len = 0;
    char *s = malloc(cap);
    if (!s) die("out of memory", NULL);
    len += (size_t)snprintf(s + len, cap - len,
                            "{\"pardo\": 1, \"name\": \"chain\", \"blocks\": [{\"vars\": {"
                            "\"x\": {\"dtype\": \"float32\", \"shape\": [16], \"role\": \"feed\"},"
                            "\"b\": {\"dtype\": \"float32\", \"shape\": [16], \"value\": [");
    for (int i = 0; i < 16; i++) len += (size_t)snprintf(s + len, cap - len, "%s0.001", i ? ", " : "");
    len += (size_t)snprintf(s + len, cap - len, "]}}, \"ops\": [");
    for (int i = 0; i < n; i++) {
        char in[32];
        snprintf(in, sizeof in, i ? "a%d" : "x", i - 1);
        len += (size_t)snprintf(s + len, cap - len, "%s{\"op\": \"add\", \"in\": [\"%s\", \"b\"], \"out\": [\"a%d\"]}",
                                i ? ", " : "", in, i);
    }
    snprintf(s + len, cap - len, "]}]}");
    return s;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_pardo train|infer GRAPH [options] | chain [options]\n");
        return 1;
    }
    const char *mode = argv[1], *graph = NULL;
    int threads = 1, parts = 0, batch = 256, steps = 50, warmup = 5, nops = 1000;
    int i = 2;
    if (strcmp(mode, "chain") != 0) {
        if (argc < 3) die("train and infer need a GRAPH", NULL);
        graph = argv[i++];
    }
    const char *trace = NULL, *fetch_arg = NULL;
    double bucket_mb = 0;
    bool fuse = true;
    pardo_executor_kind kind = PARDO_EXEC_SEQUENTIAL;
    pardo_device_kind device = PARDO_DEVICE_CPU;
    for (; i < argc; i++) {
        int *dst = NULL;
        if (strcmp(argv[i], "--no-fuse") == 0) {
            fuse = false;
            continue;
        }
        if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
            trace = argv[++i];
            continue;
        }
        if (strcmp(argv[i], "--bucket-mb") == 0 && i + 1 < argc) { /* under mpirun: rank_merge's buckets */
            bucket_mb = atof(argv[++i]);
            continue;
        }
        if (strcmp(argv[i], "--fetch") == 0 && i + 1 < argc) {
            fetch_arg = argv[++i];
            continue;
        }
        if (strcmp(argv[i], "--executor") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "auto") == 0) kind = PARDO_EXEC_AUTO;
            else if (strcmp(v, "sequential") == 0) kind = PARDO_EXEC_SEQUENTIAL;
            else if (strcmp(v, "dataflow") == 0) kind = PARDO_EXEC_DATAFLOW;
            else die("--executor expects auto, sequential or dataflow", NULL);
            continue;
        }
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "cpu") == 0) device = PARDO_DEVICE_CPU;
            else if (strcmp(v, "cuda") == 0) device = PARDO_DEVICE_CUDA;
            else die("--device expects cpu or cuda", NULL);
            continue;
        }
        if (strcmp(argv[i], "--threads") == 0)
            dst = &threads;
        else if (strcmp(argv[i], "--parts") == 0)
            dst = &parts;
        else if (strcmp(argv[i], "--batch") == 0)
            dst = &batch;
        else if (strcmp(argv[i], "--steps") == 0)
            dst = &steps;
        else if (strcmp(argv[i], "--warmup") == 0)
            dst = &warmup;
        else if (strcmp(argv[i], "--ops") == 0)
            dst = &nops;
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "bench_pardo: bad argument '%s'\n", argv[i]);
            return 1;
        }
        *dst = atoi(argv[++i]);
    }
    if (threads < 1 || parts < 0 || batch < 1 || steps < 1 || warmup < 0 || nops < 1) die("bad numbers", NULL);
    if (device == PARDO_DEVICE_CUDA && strcmp(mode, "chain") == 0) die("--device cuda is for train and infer", NULL);
    if (device == PARDO_DEVICE_CUDA && pardo_device_count() == 0)
        die("--device cuda: no CUDA device (or pardo built without CUDA)", NULL);

    pardo_status st;
    if (pardo_comm_init(&st) != PARDO_OK) die("MPI", &st); /* under mpirun: a rank of the job (W13) */
    if (pardo_thread_pool_configure(threads, &st) != PARDO_OK) die("--threads", &st);
    pardo_program *p = NULL;
    pardo_pass_options opt = pardo_pass_defaults();
    const bool train = strcmp(mode, "train") == 0, chain = strcmp(mode, "chain") == 0;
    if (!train && !chain && strcmp(mode, "infer") != 0) die("mode must be train, infer or chain", NULL);
    if (chain) {
        char *text = chain_text(nops);
        if (pardo_graph_parse(text, strlen(text), "chain.json", &p, &st) != PARDO_OK) die("chain graph", &st);
        free(text);
    } else if (pardo_graph_load(graph, &p, &st) != PARDO_OK) {
        die(graph, &st);
    }
    if (pardo_pass_check(p, &opt, &st) != PARDO_OK) die("check", &st);
    if (train) {
        opt.loss = "loss";
        opt.optimizer = PARDO_OPTIMIZER_SGD;
        opt.lr = 0.1;
        if (pardo_pass_backward(p, &opt, &st) != PARDO_OK || pardo_pass_optimizer(p, &opt, &st) != PARDO_OK)
            die("backward/optimizer", &st);
    }
    if (parts > 0) {
        opt.parts = parts;
        if (pardo_pass_multi_cpu(p, &opt, &st) != PARDO_OK) die("multi_cpu", &st);
    }
    /* as pardo train does under mpirun: the gradients averaged over the ranks before the updates */
    opt.bucket_mb = bucket_mb;
    if (train && pardo_comm_size() > 1 && pardo_pass_ranks(p, &opt, &st) != PARDO_OK) die("ranks", &st);

    pardo_executor *ex = NULL;
    char name[32];
    snprintf(name, sizeof name, "a%d", nops - 1);
    const char *fetch = train ? "loss" : chain ? name : fetch_arg ? fetch_arg : "probs";
    if (!chain && !pardo_program_lookup_var(p, 0, fetch, NULL)) die("--fetch: the graph has no such var in block 0", NULL);
    /* as `pardo run` does: the fusion pass, keeping the fetched var */
    opt.keep = &fetch;
    opt.n_keep = 1;
    if (fuse && pardo_pass_fuse(p, &opt, &st) != PARDO_OK) die("fuse", &st);
    /* as `pardo run` does: temporaries freed after their last reader, the fetched var kept */
    pardo_exec_options eo = {.nthreads = threads, .kind = kind, .training = train, .device = device,
                             .release_temps = true, .keep = &fetch, .n_keep = 1};
    if (pardo_executor_new(p, &eo, &ex, &st) != PARDO_OK || pardo_executor_init_vars(ex, NULL, NULL, &st) != PARDO_OK)
        die("executor", &st);

    /* one batch: every feed var of block 0 (x, and y or a target t where the graph has them), its -1 dims the
     * batch; floats uniform in [0, 1) from one fixed LCG (taken in the vars' order, so x, the first, gets the
     * numbers it always had), integers k % 10 (the labels) */
    enum { MAX_FEEDS = 8 };
    pardo_tensor *feeds[MAX_FEEDS];
    int n_feeds = 0;
    uint64_t s = 12345;
    const pardo_block *b0 = &p->blocks[0];
    for (int v = 0; v < b0->n_vars; v++) {
        const pardo_graph_var *gv = &b0->vars[v];
        if (gv->role != PARDO_VAR_FEED) continue;
        if (n_feeds == MAX_FEEDS) die("the graph has more than 8 feeds", NULL);
        int64_t shape[PARDO_MAX_DIMS];
        for (int d = 0; d < gv->type.ndim; d++) shape[d] = gv->type.shape[d] < 0 ? batch : gv->type.shape[d];
        pardo_tensor *f = pardo_tensor_new_cpu(gv->type.dtype, gv->type.ndim, shape, &st);
        if (!f) die(gv->name, &st);
        feeds[n_feeds++] = f;
        if (gv->type.dtype == PARDO_F32) {
            float *fd = pardo_tensor_data(f);
            for (int64_t k = 0; k < f->numel; k++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                fd[k] = (float)(s >> 40) / (float)(1 << 24);
            }
        } else if (gv->type.dtype == PARDO_I64) {
            int64_t *id = pardo_tensor_data(f);
            for (int64_t k = 0; k < f->numel; k++) id[k] = k % 10;
        } else if (gv->type.dtype == PARDO_I32) {
            int32_t *id = pardo_tensor_data(f);
            for (int64_t k = 0; k < f->numel; k++) id[k] = (int32_t)(k % 10);
        } else {
            die("a feed is neither float32 nor int32/int64", NULL);
        }
        if (pardo_executor_feed(ex, gv->name, f, "bench", &st) != PARDO_OK) die(gv->name, &st);
    }
    if (n_feeds == 0) die("the graph has no feed var in block 0", NULL);

    for (int k = 0; k < warmup; k++)
        if (pardo_executor_run(ex, &st) != PARDO_OK) die("run", &st);
    double *t = malloc(sizeof(double) * (size_t)steps);
    if (!t) die("out of memory", NULL);
    if (trace && pardo_trace_start(&st) != PARDO_OK) die("--trace", &st);
    struct mallinfo2 m0 = mallinfo2(); /* heap in use around the timed steps: 0 growth in the steady state */
    for (int k = 0; k < steps; k++) {
        double t0 = now_us();
        if (pardo_executor_run(ex, &st) != PARDO_OK) die("run", &st);
        if (device == PARDO_DEVICE_CUDA && pardo_device_sync(&st) != PARDO_OK) die("run", &st);
        t[k] = now_us() - t0;
    }
    struct mallinfo2 m1 = mallinfo2();
    if (trace) {
        pardo_trace_stop();
        pardo_trace_info info = {.graph = graph, .command = mode, .threads = threads, .steps = steps, .status = "ok"};
        char path[4096]; /* under mpirun: one file per rank */
        if (pardo_trace_write(pardo_trace_rank_path(trace, pardo_comm_rank(), pardo_comm_size(), path, sizeof path),
                              &info, &st) != PARDO_OK)
            die("--trace", &st);
        pardo_trace_reset();
    }
    long long heap_delta = (long long)(m1.uordblks + m1.hblkhd) - (long long)(m0.uordblks + m0.hblkhd);
    qsort(t, (size_t)steps, sizeof(double), cmp_double);
    pardo_tensor *v = pardo_executor_fetch(ex, fetch);
    if (v && !pardo_tensor_cpu(v, &st)) die("fetch", &st); /* a GPU op's output comes back to the host */
    double value = v ? pardo_tensor_get_f64(v, 0) : 0;
    double med = t[steps / 2];
    if (pardo_comm_rank() == 0) printf(
        "{\"bench\": \"pardo\", \"mode\": \"%s\", \"executor\": \"%s\", \"device\": \"%s\", \"threads\": %d, "
        "\"parts\": %d, \"steps\": %d, \"median_us\": %.3f, \"p10_us\": %.3f, \"p90_us\": %.3f, \"value\": %.6g",
        mode, kind == PARDO_EXEC_DATAFLOW ? "dataflow" : "sequential",
        pardo_executor_device(ex) == PARDO_DEVICE_CUDA ? "cuda" : "cpu", threads, parts, steps, med, t[steps / 10],
        t[steps * 9 / 10], value);
    if (chain) printf(", \"us_per_op\": %.4f", med / nops);
    if (pardo_comm_rank() == 0)
        printf(", \"ranks\": %d, \"heap_delta_bytes\": %lld, \"peak_rss_kb\": %ld, \"gemm\": \"%s\"}\n",
               pardo_comm_size(), heap_delta, peak_rss_kb(), pardo_gemm_describe(PARDO_F32, PARDO_GEMM_AUTO));
    pardo_comm_finalize();
    free(t);
    for (int k = 0; k < n_feeds; k++) pardo_tensor_release(feeds[k]);
    pardo_executor_free(ex);
    pardo_program_free(p);
    pardo_thread_pool_shutdown();
    return 0;
}
