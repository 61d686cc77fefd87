/* cli_run.c - `pardo run`: load and check a graph, bind feeds, params and
 * state, run block 0 N times, then print and save the fetched vars and an
 * optional checkpoint. Nothing is written unless every step succeeded (or
 * a signal stopped the run between steps, when only --save is written),
 * except the --trace file, which is written however the run ends. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/name_index.h"
#include "exec/executor.h"
#include "io/file_io.h"
#include "io/csv.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "core/tensor_print.h"
#include "exec/thread_pool.h"
#include "trace/trace.h"
#include "train/eval_program.h"
#include "prune.h"

static const char run_help[] =
    "usage: pardo run GRAPH [--feed NAME=FILE.npy|FILE.csv]... [--fetch NAME]... [--out DIR]\n"
    "                 [--format npy|csv] [--load CKPT] [--save CKPT] [--steps N] [--train]\n"
    "                 [--threads N] [--executor auto|sequential|dataflow] [--device cpu|cuda[:K]]\n"
    "                 [--no-fuse] [--trace FILE] [--profile]\n"
    "\n"
    "Runs block 0 of GRAPH N times (default 1) and prints the fetched vars.\n"
    "Only the ops the fetched vars need run, so a feed they do not need may be left out.\n"
    "A graph's updates (ops of role optimize, and the backward ops they need) run when\n"
    "the run can show them: with --train, --save or --steps N > 1 (then every update\n"
    "runs) or when a fetched var is one they write (a gradient, an updated param);\n"
    "otherwise they are left out and the params keep their values. The run is in eval mode (dropout is the identity, batch_norm uses its\n"
    "running statistics) unless --train.\n"
    "  --feed NAME=FILE      bind feed var NAME to a .npy array or a .csv file (numbers, one row\n"
    "                        a line, comma-separated; the shape from the var, -1 the row count;\n"
    "                        a first line that is not numbers is a header and skipped). A .npy of\n"
    "                        another dtype is cast where exact enough (float64 -> float32,\n"
    "                        float32 -> float64, int32 -> int64, int64 -> int32 when every value\n"
    "                        fits), with a note; float <-> int and bool <-> number are refused\n"
    "  --fetch NAME          print var NAME after the last step (default: the vars no op reads)\n"
    "  --out DIR             also save each fetched var as DIR/NAME.npy (or .csv)\n"
    "  --format npy|csv      the --out files' format (default npy); csv: one line per row of\n"
    "                        the first dim, the rest flattened, floats printed to round-trip\n"
    "  --train               run in training mode (dropout active, batch_norm on batch statistics)\n"
    "                        and run the graph's updates\n"
    "  --load CKPT           start params and state from a safetensors checkpoint\n"
    "  --save CKPT           write params and state to a safetensors checkpoint at the end\n"
    "  --steps N             run N steps (default 1)\n"
    "  --threads N           threads to use: the thread pool's size and parallel_do's parts\n"
    "                        (default: $PARDO_NUM_THREADS, or the online CPUs)\n"
    "  --executor auto|sequential|dataflow\n"
    "                        how block 0's ops run: one after another in file order (sequential),\n"
    "                        or as their inputs are ready, ops no var links at once (dataflow);\n"
    "                        auto (the default): dataflow where the graph has such ops and there\n"
    "                        are 2 threads or more on the CPU, else sequential; the results are\n"
    "                        the same\n"
    "  --device cpu|cuda[:K] run ops that have a CUDA kernel on GPU K (default cpu)\n"
    "  --no-fuse             run the ops as the graph has them (by default on the CPU, matmul -> add -> relu,\n"
    "                        the backward products' relu and bias gradients and merge -> update run fused,\n"
    "                        with the same results: pardo check --fused shows the rewritten graph)\n"
    "  --trace FILE          write a Chrome trace of the steps (Perfetto, chrome://tracing, pardo trace),\n"
    "                        also when the run fails or is interrupted; recording stops at\n"
    "                        $PARDO_TRACE_MAX_MB MiB of events (default 16, about 150 MB of JSON)\n"
    "  --profile             print the trace's summary tables on stderr at the end (no file)\n";

#define MAX_ITEMS 256

typedef struct run_args {
    const char *graph;
    const char *feed_name[MAX_ITEMS];
    const char *feed_file[MAX_ITEMS];
    int n_feeds;
    const char *fetch[MAX_ITEMS];
    int n_fetch;
    const char *out_dir, *load, *save, *trace;
    bool profile, no_fuse, train, csv;
    long steps, threads;
    pardo_executor_kind executor;
    pardo_device_kind device;
    int device_index;
} run_args;

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    if (stop_requested) _exit(CLI_INTERRUPTED); /* second signal: leave now; files are renamed into place atomically */
    stop_requested = 1;
}


/* Returns -1 when the arguments are fine, else the exit status. */
static int parse_args(int argc, char **argv, run_args *a) {
    memset(a, 0, sizeof(*a));
    a->steps = 1;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        int shared = cli_parse_exec_flag("run", argc, argv, &i, &a->threads, &a->executor);
        if (shared < 0) return CLI_BAD_INPUT;
        if (shared > 0) continue;
        if (cli_is_help(arg)) {
            fputs(run_help, stdout);
            return CLI_OK;
        } else if (cli_flag_is(arg, "--feed")) {
            if (!(v = cli_flag_value("run", argc, argv, &i, "--feed"))) return CLI_BAD_INPUT;
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                return cli_usage_error("run", "--feed expects NAME=FILE.npy or NAME=FILE.csv, got '%s'", v);
            if (a->n_feeds == MAX_ITEMS) return cli_usage_error("run", "at most %d --feed", MAX_ITEMS);
            a->feed_name[a->n_feeds] = v;
            a->feed_file[a->n_feeds++] = eq + 1;
        } else if (cli_flag_is(arg, "--fetch")) {
            if (!(v = cli_flag_value("run", argc, argv, &i, "--fetch"))) return CLI_BAD_INPUT;
            if (a->n_fetch == MAX_ITEMS) return cli_usage_error("run", "at most %d --fetch", MAX_ITEMS);
            a->fetch[a->n_fetch++] = v;
        } else if (cli_flag_is(arg, "--out")) {
            if (!(a->out_dir = cli_flag_value("run", argc, argv, &i, "--out"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--load")) {
            if (!(a->load = cli_flag_value("run", argc, argv, &i, "--load"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--save")) {
            if (!(a->save = cli_flag_value("run", argc, argv, &i, "--save"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--trace")) {
            if (!(a->trace = cli_flag_value("run", argc, argv, &i, "--trace"))) return CLI_BAD_INPUT;
        } else if (strcmp(arg, "--profile") == 0) {
            a->profile = true;
        } else if (strcmp(arg, "--no-fuse") == 0) {
            a->no_fuse = true;
        } else if (strcmp(arg, "--train") == 0) {
            a->train = true;
        } else if (cli_flag_is(arg, "--format")) {
            if (!(v = cli_flag_value("run", argc, argv, &i, "--format"))) return CLI_BAD_INPUT;
            if (strcmp(v, "csv") != 0 && strcmp(v, "npy") != 0)
                return cli_usage_error("run", "--format expects npy or csv, got '%s'", v);
            a->csv = strcmp(v, "csv") == 0;
        } else if (cli_flag_is(arg, "--steps")) {
            if (!(v = cli_flag_value("run", argc, argv, &i, "--steps")) ||
                !cli_parse_int("run", "--steps", v, 1, 1000000000L, &a->steps))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--device")) {
            if (!(v = cli_flag_value("run", argc, argv, &i, "--device")) ||
                !cli_parse_device("run", v, &a->device, &a->device_index))
                return CLI_BAD_INPUT;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return cli_usage_error("run", "unknown flag '%s'", arg);
        } else if (!a->graph) {
            a->graph = arg;
        } else {
            return cli_usage_error("run", "unexpected argument '%s' (one GRAPH only)", arg);
        }
    }
    if (!a->graph) return cli_usage_error("run", "missing GRAPH");
    if (!cli_resolve_threads(&a->threads)) return CLI_BAD_INPUT;
    return -1;
}

/* Feeds every --feed file (.npy, or .csv parsed into the var's dtype; a
 * .npy of a near dtype cast, csv.h); a feed of `orig` the cut program no
 * longer has is not read, with a note. Returns an exit status or -1. */
static int bind_feeds(pardo_executor *ex, const pardo_program *prog, const pardo_program *orig, const run_args *a) {
    pardo_status st;
    for (int i = 0; i < a->n_feeds; i++) {
        char name[256];
        size_t len = (size_t)(a->feed_file[i] - 1 - a->feed_name[i]);
        if (len >= sizeof name) return cli_usage_error("run", "--feed name is too long");
        memcpy(name, a->feed_name[i], len);
        name[len] = '\0';
        const char *file = a->feed_file[i];
        const pardo_graph_var *v = pardo_block_find_var(&prog->blocks[0], name);
        const pardo_graph_var *ov = pardo_block_find_var(&orig->blocks[0], name);
        if (!v && ov && ov->role == PARDO_VAR_FEED) {
            fprintf(stderr, "pardo: note: --feed %s=%s: the fetched vars do not need '%s'; not read\n", name, file,
                    name);
            continue;
        }
        pardo_tensor *t = NULL, *c = NULL;
        pardo_status_clear(&st);
        int rc;
        if (pardo_csv_is_csv_path(file)) { /* the text is parsed as the feed var says */
            if (!v || v->role != PARDO_VAR_FEED) {
                fprintf(stderr, "pardo: %s: %s has no feed var '%s'%s%s\n", file, a->graph, name,
                        v ? "; it is a " : "", v ? pardo_var_role_name(v->role) : "");
                return CLI_BAD_INPUT;
            }
            rc = pardo_csv_read(file, &v->type, &c, &st);
        } else {
            rc = pardo_npy_read(file, &t, &st);
            if (rc == PARDO_OK && v && v->role == PARDO_VAR_FEED) rc = pardo_feed_cast(t, v->type.dtype, file, name, &c, &st);
            else if (rc == PARDO_OK) c = pardo_tensor_retain(t);
        }
        if (rc == PARDO_OK) rc = pardo_executor_feed(ex, name, c, file, &st);
        pardo_tensor_release(t);
        pardo_tensor_release(c);
        if (rc != PARDO_OK) {
            cli_print_error(&st);
            return CLI_BAD_INPUT;
        }
    }
    return -1;
}

/* The default fetch list: vars of block 0 that some op writes and no op reads. */
static void default_fetches(const pardo_program *p, run_args *a) {
    const pardo_block *b = &p->blocks[0];
    pardo_name_index read; /* every name an op reads: one pass, not a scan of the ops per output */
    pardo_name_index_init(&read);
    pardo_status st;
    pardo_status_clear(&st);
    for (int j = 0; j < b->n_ops; j++)
        for (int k = 0; k < b->ops[j].n_in; k++)
            if (pardo_name_index_set(&read, b->ops[j].in[k], 1, &st) != PARDO_OK) {
                pardo_name_index_free(&read);
                return; /* out of memory: no default fetches, as with an empty graph */
            }
    for (int i = 0; i < b->n_ops; i++)
        for (int o = 0; o < b->ops[i].n_out; o++) {
            const char *name = b->ops[i].out[o];
            bool listed = false;
            for (int f = 0; f < a->n_fetch && !listed; f++) listed = strcmp(a->fetch[f], name) == 0;
            /* the var's own copy of the name, which outlives the ops (the fusion pass rewrites them) */
            const pardo_graph_var *v = pardo_block_find_var(b, name);
            if (pardo_name_index_get(&read, name) < 0 && !listed && a->n_fetch < MAX_ITEMS)
                a->fetch[a->n_fetch++] = v ? v->name : name;
        }
    pardo_name_index_free(&read);
}

/* Replaces characters that cannot stand in a file name. */
static void file_name_for(const char *var, char *buf, size_t n) {
    snprintf(buf, n, "%s", var);
    for (char *c = buf; *c; c++)
        if (*c == '/' || *c == '\\') *c = '_';
}

static int write_outputs(pardo_executor *ex, const run_args *a) {
    pardo_status st;
    if (mkdir(a->out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "pardo: --out %s: cannot create the folder: %s\n", a->out_dir, strerror(errno));
        return CLI_FAILED;
    }
    for (int f = 0; f < a->n_fetch; f++) {
        char file[512], path[4096];
        file_name_for(a->fetch[f], file, sizeof file);
        pardo_tensor *t = pardo_executor_fetch(ex, a->fetch[f]);
        /* a tensor_array is saved one file per part: DIR/NAME.partI.npy (.csv) */
        for (int i = 0; i < (t->is_array ? t->n_parts : 1); i++) {
            const char *ext = a->csv ? "csv" : "npy";
            if (t->is_array) snprintf(path, sizeof path, "%s/%s.part%d.%s", a->out_dir, file, i, ext);
            else snprintf(path, sizeof path, "%s/%s.%s", a->out_dir, file, ext);
            pardo_status_clear(&st);
            pardo_tensor *part = t->is_array ? t->parts[i] : t;
            if ((a->csv ? pardo_csv_write(path, part, &st) : pardo_npy_write(path, part, &st)) != PARDO_OK) {
                cli_print_error(&st);
                return CLI_FAILED;
            }
        }
    }
    return CLI_OK;
}

static int save_checkpoint(pardo_executor *ex, const char *path) {
    pardo_status st;
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_status_clear(&st);
    int rc = pardo_executor_collect_state(ex, &l, &st);
    if (rc == PARDO_OK) rc = pardo_safetensors_write(path, &l, &st);
    pardo_tensor_list_clear(&l);
    if (rc != PARDO_OK) {
        cli_print_error(&st);
        return CLI_FAILED;
    }
    return CLI_OK;
}

static int finish_trace(const run_args *a, pardo_executor *ex, const char *status) {
    if (!a->trace && !a->profile) return CLI_OK;
    return cli_trace_finish(a->trace, a->profile, a->graph, "run", (int)a->threads,
                            (long)pardo_executor_steps(ex), status);
}

/* Everything after a successfully parsed command line. */
static int run_graph(run_args *a, const pardo_program *prog, const pardo_program *orig, pardo_executor *ex) {
    pardo_status st;
    pardo_status_clear(&st);
    int rc;
    pardo_tensor_list ckpt;
    if ((rc = cli_checkpoint_with_weights(a->load, &ckpt)) != CLI_OK) return rc;
    rc = pardo_executor_init_vars(ex, a->load || ckpt.n ? &ckpt : NULL, a->load ? a->load : a->graph, &st);
    pardo_tensor_list_clear(&ckpt);
    if (rc != PARDO_OK) {
        cli_print_error(&st);
        return CLI_BAD_INPUT;
    }
    if ((rc = bind_feeds(ex, prog, orig, a)) >= 0) return rc;
    if (pardo_executor_check_feeds(ex, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_BAD_INPUT;
    }
    if (a->n_fetch == 0) default_fetches(prog, a);
    for (int f = 0; f < a->n_fetch; f++)
        if (!pardo_program_lookup_var(prog, 0, a->fetch[f], NULL))
            return cli_usage_error("run", "--fetch %s: %s has no var '%s' in block 0", a->fetch[f], a->graph,
                                   a->fetch[f]);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if ((a->trace || a->profile) && (rc = cli_trace_start()) != CLI_OK) return rc;
    for (long s = 0; s < a->steps && !stop_requested; s++) {
        /* the last step's fetches are waits on their vars (the dataflow executor's wait_to_read: an error
         * that reached one surfaces there), then the step's end */
        bool last = s + 1 == a->steps;
        int src = last ? pardo_executor_run_async(ex, &st) : pardo_executor_run(ex, &st);
        for (int f = 0; last && src == PARDO_OK && f < a->n_fetch; f++) {
            pardo_tensor *ignored;
            src = pardo_executor_fetch_wait(ex, a->fetch[f], &ignored, &st);
        }
        if (last) {
            pardo_status wst;
            int wrc = pardo_executor_wait(ex, &wst); /* after an error too: nothing of the step may still run */
            if (src == PARDO_OK && wrc != PARDO_OK) {
                src = wrc;
                st = wst;
            }
        }
        if (src != PARDO_OK) {
            cli_print_error(&st);
            finish_trace(a, ex, "failed");
            return CLI_FAILED;
        }
    }
    if (stop_requested) {
        fprintf(stderr, "pardo: stopped after %llu steps\n", (unsigned long long)pardo_executor_steps(ex));
        rc = finish_trace(a, ex, "interrupted");
        if (a->save && save_checkpoint(ex, a->save) != CLI_OK) return CLI_FAILED;
        return rc == CLI_OK ? CLI_INTERRUPTED : rc;
    }
    if (finish_trace(a, ex, "ok") != CLI_OK) return CLI_FAILED;
    for (int f = 0; f < a->n_fetch; f++) {
        pardo_tensor *t = pardo_executor_fetch(ex, a->fetch[f]);
        bool unset = !t;
        for (int i = 0; t && t->is_array && i < t->n_parts; i++) unset |= !t->parts[i];
        if (unset) {
            fprintf(stderr, "pardo: --fetch %s: the var has no value after the run\n", a->fetch[f]);
            return CLI_FAILED;
        }
        for (int i = 0; i < (t->is_array ? t->n_parts : 1); i++) { /* a tensor_array prints a line per part */
            pardo_tensor *part = t->is_array ? t->parts[i] : t;
            char name[300];
            if (t->is_array) snprintf(name, sizeof name, "%s[%d]", a->fetch[f], i);
            else snprintf(name, sizeof name, "%s", a->fetch[f]);
            if (!pardo_tensor_cpu(part, &st)) {
                cli_print_error(&st);
                return CLI_FAILED;
            }
            pardo_tensor_print(stdout, name, part, 8);
        }
    }
    if (a->out_dir && (rc = write_outputs(ex, a)) != CLI_OK) return rc;
    if (a->save && (rc = save_checkpoint(ex, a->save)) != CLI_OK) return rc;
    return CLI_OK;
}

int pardo_cli_run(int argc, char **argv) {
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    pardo_status st;
    pardo_status_clear(&st);
    pardo_program *orig = cli_start(a.threads, a.graph), *prog = NULL;
    if (!orig) return CLI_BAD_INPUT;
    /* the ops the fetches need; the updates too where the run can show them (see run_help) */
    bool updates = a.train || a.save || a.steps > 1;
    if (pardo_pass_prune(orig, a.fetch, a.n_fetch, updates, &prog, &st) != PARDO_OK) {
        cli_print_error(&st);
        pardo_program_free(orig);
        return st.code == PARDO_ENOMEM ? CLI_FAILED : CLI_BAD_INPUT;
    }
    if (pardo_program_trains(orig) && !a.train)
        fprintf(stderr, "note: %s has optimize ops; running in eval mode (dropout off, batch_norm on running stats)%s; "
                "--train to train\n", a.graph, pardo_program_trains(prog) ? " with its updates" : " without its updates");
    if (a.n_fetch == 0) default_fetches(prog, &a);
    if ((!a.no_fuse && a.device == PARDO_DEVICE_CPU && cli_fuse(prog, a.fetch, a.n_fetch) != CLI_OK) ||
        cli_place(prog, a.device) != CLI_OK) {
        pardo_program_free(prog);
        pardo_program_free(orig);
        return CLI_BAD_INPUT;
    }
    /* temporaries are freed after their last reader and their buffers reused; the fetched vars stay */
    pardo_exec_options opt = {.nthreads = (int)a.threads, .kind = a.executor, .training = a.train,
                              .device = a.device, .device_index = a.device_index, .release_temps = true,
                              .keep = a.fetch, .n_keep = a.n_fetch};
    pardo_executor *ex = NULL;
    if (pardo_executor_new(prog, &opt, &ex, &st) != PARDO_OK) {
        cli_print_error(&st);
        pardo_program_free(prog);
        pardo_program_free(orig);
        return CLI_BAD_INPUT;
    }
    rc = run_graph(&a, prog, orig, ex);
    pardo_executor_free(ex);
    pardo_program_free(prog);
    pardo_program_free(orig);
    return rc;
}
