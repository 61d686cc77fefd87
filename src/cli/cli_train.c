/* cli_train.c - `pardo train`: runs a training graph over .npy data sets
 * for some epochs. A loader (src/train/loader.h) gathers each batch on its own
 * thread two batches ahead, in file order or a seeded shuffle per epoch;
 * the training loop feeds it to the graph and runs one step; a Coordinator
 * joins the two, so an error on either side stops both and the first error
 * is the one reported. After each epoch: an evaluation on the --eval sets
 * (the graph without its backward and optimize ops, src/train/eval_program.h),
 * a progress line, a --log line and a --save checkpoint holding the params,
 * the optimizer state and where the run is (src/train/train_state.h), so --load
 * resumes it bit for bit, mid-epoch too. SIGINT or SIGTERM: the step in
 * flight finishes, the checkpoint is written, exit 130; a second signal
 * leaves at once (checkpoints are renamed into place, never torn). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "trace/trace.h"
#include "exec/comm.h"
#include "exec/coordinator.h"
#include "train/eval_program.h"
#include "exec/executor.h"
#include "train/feed_stage.h"
#include "train/loader.h"
#include "train/lr_schedule.h"
#include "io/csv.h"
#include "io/npy.h"
#include "io/npy_map.h"
#include "train/progress.h"
#include "io/safetensors.h"
#include "pass.h"
#include "exec/task.h"
#include "exec/thread_pool.h"
#include "train/train_state.h"

static const char train_help[] =
    "usage: pardo train GRAPH --data NAME=FILE.npy|FILE.csv... --batch-size B [--epochs E]\n"
    "                   [--shuffle] [--seed S] [--drop-last] [--eval NAME=FILE.npy|FILE.csv]...\n"
    "                   [--threads N] [--executor auto|sequential|dataflow] [--load CKPT] [--save CKPT]\n"
    "                   [--log FILE.jsonl] [--loss NAME] [--early-stop N] [--save-best CKPT]\n"
    "                   [--lr X] [--lr-schedule constant|step:EVERY:GAMMA|cosine|linear] [--warmup-steps N]\n"
    "                   [--no-fuse] [--device cpu|cuda[:K]] [--trace FILE] [--profile] [--bucket-mb X]\n"
    "\n"
    "Trains GRAPH, a training graph (one with optimize ops, as `pardo transpile\n"
    "--backward LOSS --optimizer adam` writes), one step per batch of the data.\n"
    "  --data NAME=FILE.npy  the rows of feed var NAME (every feed needs one; all with the same rows);\n"
    "                        a .csv file is parsed into the var's dtype (one row a line), a .npy of a\n"
    "                        near dtype cast (float64 <-> float32, int32 <-> int64) with a note\n"
    "  --batch-size B        rows per step; an epoch's last batch may have fewer\n"
    "  --epochs E            train until E epochs are done, counting a --load checkpoint's (default 1)\n"
    "  --shuffle             a new order of the rows every epoch ...\n"
    "  --seed S              ... from this seed (default 0): the same seed, the same orders\n"
    "  --drop-last           drop an epoch's last batch when it is short\n"
    "  --eval NAME=FILE.npy  after each epoch, the mean loss (and the accuracy, for a classifier's\n"
    "                        logits and labels) over these rows, without updating the params\n"
    "  --lr X                the learning rate, replacing the graph's (the rate var its updates read)\n"
    "  --lr-schedule S       the rate over the run's steps (epochs x batches, a --load checkpoint's\n"
    "                        counted): constant (default), step:EVERY:GAMMA (times GAMMA every\n"
    "                        EVERY steps), cosine (to 0, torch's CosineAnnealingLR) or linear (to 0)\n"
    "  --warmup-steps N      first N steps from 0 up to the rate in a line, then the schedule\n"
    ;
/* The rest of the help (one literal each: a C string literal over 4095 bytes is not portable). */
static const char train_help_more[] =
    "  --threads N           threads to use (default: $PARDO_NUM_THREADS, or the online CPUs)\n"
    "  --executor auto|sequential|dataflow\n"
    "                        how the training and evaluation steps run their ops: in file order\n"
    "                        (sequential) or as their inputs are ready, ops no var links at once,\n"
    "                        with the next batch copied in meanwhile (dataflow); auto (the\n"
    "                        default) as for pardo run; the results are the same\n"
    "  --load CKPT           start from a checkpoint: params, optimizer state and, if it has them,\n"
    "                        the epoch and batch it stopped at\n"
    "  --save CKPT           write a checkpoint after each epoch, at the end, and when stopped\n"
    "  --early-stop N        stop once N epochs in a row end without a lower eval loss than the\n"
    "                        best so far (needs --eval; a --load checkpoint's count goes on)\n"
    "  --save-best CKPT      write a checkpoint (as --save's) after each epoch whose eval loss is\n"
    "                        the lowest so far: the best epoch's params (needs --eval)\n"
    "  --log FILE.jsonl      append one JSON object per epoch: epoch, loss, accuracy, eval_loss,\n"
    "                        eval_accuracy, lr (the epoch's last step's), samples_per_s, seconds\n"
    "                        (accuracy: the mean of the graph's accuracy op over the epoch's\n"
    "                        batches, where it has one)\n"
    "  --loss NAME           the loss var (default: the output of the op with role loss)\n"
    "  --no-fuse             run the ops as the graph has them (by default matmul -> add -> relu, the\n"
    "                        backward products' relu and bias gradients and merge -> update run fused,\n"
    "                        with the same results: pardo check --fused shows the rewritten graph)\n"
    "  --device cpu|cuda[:K] run the ops that have a CUDA kernel on GPU K, training and evaluation\n"
    "                        (default cpu; with no GPU it says so and runs on the CPU; a parallel_do's\n"
    "                        parts run on the CPU: `pardo transpile --no-parallel` makes a graph without)\n"
    "  --trace FILE          write a Chrome trace of the training (ops, parts, stages, loader batches),\n"
    "                        also when the run fails or is stopped; recording stops at\n"
    "                        $PARDO_TRACE_MAX_MB MiB of events (default 16, about 150 MB of JSON)\n"
    "  --profile             print the trace's summary tables on stderr at the end (no file)\n"
    "  --bucket-mb X         under mpirun: MiB of gradients summed over the ranks by one allreduce\n"
    "                        (default 25, as PyTorch DDP's; buckets start during the backward pass)\n"
    "Progress goes to stderr, the final figures to stdout. SIGINT or SIGTERM stops after\n"
    "the current step and writes the --save checkpoint (exit status 130).\n";

#define MAX_ITEMS 64
#define JOIN_GRACE_S 10.0 /* how long the loader may take to stop once asked */

typedef struct named_file {
    char name[256];
    const char *file;
} named_file;

typedef struct train_args {
    const char *graph;
    named_file data[MAX_ITEMS];
    int n_data;
    named_file eval[MAX_ITEMS];
    int n_eval;
    long batch_size, epochs, threads, seed, early_stop; // early_stop 0: off
    pardo_executor_kind executor;
    bool shuffle, drop_last, seed_given;
    const char *load, *save, *save_best, *log, *loss, *trace;
    double lr;                  // --lr; < 0: the graph's
    double bucket_mb;           // --bucket-mb; 0: rank_merge's default
    pardo_lr_schedule schedule; // --lr-schedule and --warmup-steps
    bool lr_given;              // any of the three: the rate is set before every step
    bool profile, no_fuse;
    pardo_device_kind device; // --device: the training and evaluation executors' (default the CPU)
    int device_index;
} train_args;

/* Signals seen: the first asks for a stop, the second leaves at once; but a rank of an MPI job stops only at
 * a step boundary (the ranks agree on which), since mpirun passes a SIGINT on and follows it with SIGTERM,
 * then after odls_base_sigkill_timeout (1 s by default) with SIGKILL. */
static atomic_int signals_seen;
static bool in_job; /* set before the handler is installed */

static void on_signal(int sig) {
    (void)sig;
    if (atomic_fetch_add(&signals_seen, 1) > 0 && !in_job) _exit(CLI_INTERRUPTED);
}

static bool stop_signalled(void) { return atomic_load(&signals_seen) > 0; }

/* Whether any rank saw a signal: at a step boundary every rank asks, so all stop after the same step
 * (one process: this one's). */
static bool stop_agreed(void) {
    int64_t any = stop_signalled();
    pardo_status st;
    if (pardo_comm_size() > 1 && pardo_comm_allreduce_sum(PARDO_I64, &any, 1, &st) != PARDO_OK) return true;
    return any > 0;
}

/* Sums vals[0..n) over the ranks (the epoch's and the evaluation's figures); one process: as they are. */
static int sum_over_ranks(double *vals, int n, pardo_status *st) {
    return pardo_comm_size() > 1 ? pardo_comm_allreduce_sum(PARDO_F64, vals, n, st) : PARDO_OK;
}

/* Rank 0 of a job (or the one process) prints, logs and writes checkpoints. */
static bool is_rank0(void) { return pardo_comm_rank() == 0; }

/* Parses NAME=FILE for `flag` into list; returns false after a usage error. */
static bool add_named(const char *flag, const char *v, named_file *list, int *n) {
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) {
        cli_usage_error("train", "%s expects NAME=FILE.npy or NAME=FILE.csv, got '%s'", flag, v);
        return false;
    }
    size_t len = (size_t)(eq - v);
    if (len >= sizeof list[0].name) {
        cli_usage_error("train", "%s: the name is too long", flag);
        return false;
    }
    if (*n == MAX_ITEMS) {
        cli_usage_error("train", "at most %d %s", MAX_ITEMS, flag);
        return false;
    }
    for (int i = 0; i < *n; i++)
        if (strlen(list[i].name) == len && strncmp(list[i].name, v, len) == 0) {
            cli_usage_error("train", "%s %.*s is given twice", flag, (int)len, v);
            return false;
        }
    memcpy(list[*n].name, v, len);
    list[*n].name[len] = '\0';
    list[*n].file = eq + 1;
    ++*n;
    return true;
}

/* Returns -1 when the arguments are fine, else the exit status. */
static int parse_args(int argc, char **argv, train_args *a) {
    memset(a, 0, sizeof(*a));
    a->epochs = 1;
    a->lr = -1;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i], *v;
        int shared = cli_parse_exec_flag("train", argc, argv, &i, &a->threads, &a->executor);
        if (shared < 0) return CLI_BAD_INPUT;
        if (shared > 0) continue;
        if (cli_is_help(arg)) {
            fputs(train_help, stdout);
            fputs(train_help_more, stdout);
            return CLI_OK;
        } else if (cli_flag_is(arg, "--data")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--data")) ||
                !add_named("--data", v, a->data, &a->n_data))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--eval")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--eval")) ||
                !add_named("--eval", v, a->eval, &a->n_eval))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--batch-size")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--batch-size")) ||
                !cli_parse_int("train", "--batch-size", v, 1, 1L << 40, &a->batch_size))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--epochs")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--epochs")) ||
                !cli_parse_int("train", "--epochs", v, 1, 1000000000L, &a->epochs))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--seed")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--seed")) ||
                !cli_parse_int("train", "--seed", v, 0, LONG_MAX, &a->seed))
                return CLI_BAD_INPUT;
            a->seed_given = true;
        } else if (strcmp(arg, "--shuffle") == 0) {
            a->shuffle = true;
        } else if (strcmp(arg, "--drop-last") == 0) {
            a->drop_last = true;
        } else if (cli_flag_is(arg, "--load")) {
            if (!(a->load = cli_flag_value("train", argc, argv, &i, "--load"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--save")) {
            if (!(a->save = cli_flag_value("train", argc, argv, &i, "--save"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--early-stop")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--early-stop")) ||
                !cli_parse_int("train", "--early-stop", v, 1, 1000000000L, &a->early_stop))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--lr")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--lr")) ||
                !cli_parse_double("train", "--lr", v, 1e-300, 1e9, &a->lr))
                return CLI_BAD_INPUT;
            a->lr_given = true;
        } else if (cli_flag_is(arg, "--bucket-mb")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--bucket-mb")) ||
                !cli_parse_double("train", "--bucket-mb", v, 1e-6, 1e6, &a->bucket_mb))
                return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--lr-schedule")) {
            char err[160];
            int64_t warmup = a->schedule.warmup;
            if (!(v = cli_flag_value("train", argc, argv, &i, "--lr-schedule"))) return CLI_BAD_INPUT;
            if (!pardo_lr_schedule_parse(v, &a->schedule, err, sizeof err))
                return cli_usage_error("train", "--lr-schedule %s", err);
            a->schedule.warmup = warmup;
            a->lr_given = true;
        } else if (cli_flag_is(arg, "--warmup-steps")) {
            long w;
            if (!(v = cli_flag_value("train", argc, argv, &i, "--warmup-steps")) ||
                !cli_parse_int("train", "--warmup-steps", v, 0, 1L << 50, &w))
                return CLI_BAD_INPUT;
            a->schedule.warmup = w;
            a->lr_given = true;
        } else if (cli_flag_is(arg, "--save-best")) {
            if (!(a->save_best = cli_flag_value("train", argc, argv, &i, "--save-best"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--log")) {
            if (!(a->log = cli_flag_value("train", argc, argv, &i, "--log"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--loss")) {
            if (!(a->loss = cli_flag_value("train", argc, argv, &i, "--loss"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--trace")) {
            if (!(a->trace = cli_flag_value("train", argc, argv, &i, "--trace"))) return CLI_BAD_INPUT;
        } else if (strcmp(arg, "--no-fuse") == 0) {
            a->no_fuse = true;
        } else if (cli_flag_is(arg, "--device")) {
            if (!(v = cli_flag_value("train", argc, argv, &i, "--device")) ||
                !cli_parse_device("train", v, &a->device, &a->device_index))
                return CLI_BAD_INPUT;
        } else if (strcmp(arg, "--profile") == 0) {
            a->profile = true;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return cli_usage_error("train", "unknown flag '%s'", arg);
        } else if (!a->graph) {
            a->graph = arg;
        } else {
            return cli_usage_error("train", "unexpected argument '%s' (one GRAPH only)", arg);
        }
    }
    if (!a->graph) return cli_usage_error("train", "missing GRAPH");
    if (a->n_data == 0) return cli_usage_error("train", "missing --data NAME=FILE.npy");
    if (a->batch_size == 0) return cli_usage_error("train", "missing --batch-size B");
    if (a->seed_given && !a->shuffle) return cli_usage_error("train", "--seed needs --shuffle");
    if (a->early_stop && a->n_eval == 0)
        return cli_usage_error("train", "--early-stop needs --eval NAME=FILE (it watches the eval loss)");
    if (a->save_best && a->n_eval == 0)
        return cli_usage_error("train", "--save-best needs --eval NAME=FILE (the best epoch is the lowest eval loss)");
    if (a->save_best && a->save && strcmp(a->save_best, a->save) == 0)
        return cli_usage_error("train", "--save-best and --save name the same file '%s'", a->save);
    if (a->threads <= 0 && pardo_comm_size() > 1 && !getenv("PARDO_NUM_THREADS")) { /* ranks x threads <= cores */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        a->threads = cores / pardo_comm_local_size() > 0 ? cores / pardo_comm_local_size() : 1;
    }
    if (!cli_resolve_threads(&a->threads)) return CLI_BAD_INPUT;
    return -1;
}

/* One data set: the files of each feed, mapped, and the loader over them. */
typedef struct data_set {
    const char *flag;        // "--data" or "--eval", for messages
    const named_file *files; // borrowed from the args
    int n;
    pardo_npy_map *maps[MAX_ITEMS]; // owned
    pardo_loader *loader;           // owned
    pardo_task_group *group;        // the loader's; owned
} data_set;

static void data_set_free(data_set *d) {
    pardo_loader_free(d->loader);
    pardo_task_group_free(d->group);
    for (int i = 0; i < d->n; i++) pardo_npy_map_close(d->maps[i]);
}

/* Opens a --data/--eval file for feed var v as *m: a .csv parsed into v's
 * dtype, a .npy mapped, or read and cast when its dtype is a near one
 * (csv.h); a refused dtype or a shape that is not v's (rows aside) is
 * refused naming the file's own dtype and shape. */
static int open_feed_file(const char *file, const pardo_graph_var *v, pardo_npy_map **m, pardo_status *st) {
    pardo_tensor *t = NULL, *c = NULL;
    int rc;
    if (pardo_csv_is_csv_path(file)) {
        if ((rc = pardo_csv_read(file, &v->type, &t, st)) == PARDO_OK) rc = pardo_npy_map_from_tensor(file, t, m, st);
        pardo_tensor_release(t);
        return rc;
    }
    if ((rc = pardo_npy_map_open(file, m, st)) != PARDO_OK) return rc;
    const pardo_npy_info *in = &(*m)->info;
    bool fits = in->ndim == v->type.ndim && in->ndim > 0;
    for (int d = 0; fits && d < in->ndim; d++) fits = v->type.shape[d] < 0 || v->type.shape[d] == in->shape[d];
    int kind = pardo_feed_cast_kind(in->dtype, v->type.dtype);
    if (!fits || kind < 0) {
        char fs[160], vs[160];
        rc = pardo_errorf(st, PARDO_ESHAPE, "%s: the file is %s %s, but feed var '%s' is %s %s%s", file,
                          pardo_dtype_name(in->dtype), pardo_shape_str(in->ndim, in->shape, fs, sizeof fs), v->name,
                          pardo_dtype_name(v->type.dtype), pardo_shape_str(v->type.ndim, v->type.shape, vs, sizeof vs),
                          kind < 0 ? " (only float64 <-> float32 and int32 <-> int64 casts are made)"
                                   : " (rows are the first dim; the others must match)");
    } else if (kind > 0) {
        pardo_npy_map_close(*m);
        *m = NULL;
        rc = pardo_npy_read(file, &t, st);
        if (rc == PARDO_OK) rc = pardo_feed_cast(t, v->type.dtype, file, v->name, &c, st);
        if (rc == PARDO_OK) rc = pardo_npy_map_from_tensor(file, c, m, st);
        pardo_tensor_release(t);
        pardo_tensor_release(c);
    }
    if (rc != PARDO_OK) {
        pardo_npy_map_close(*m);
        *m = NULL;
    }
    return rc;
}

/* Maps the files of d and checks them against the feeds of block 0 of p:
 * every file feeds a feed var, every feed var has a file. Then makes the
 * loader and checks its batch tensors against the vars through `ex` (the
 * executor's own checks, which name the file). Returns -1 or an exit status. */
static int data_set_open(data_set *d, const pardo_program *p, pardo_executor *ex, const pardo_loader_options *opt) {
    pardo_status st;
    pardo_status_clear(&st);
    const pardo_block *b0 = &p->blocks[0];
    for (int i = 0; i < d->n; i++) {
        const pardo_graph_var *v = pardo_block_find_var(b0, d->files[i].name);
        if (!v || v->role != PARDO_VAR_FEED) {
            fprintf(stderr, "pardo: %s %s=%s: %s has no feed var '%s'%s%s\n", d->flag, d->files[i].name,
                    d->files[i].file, p->path, d->files[i].name, v ? "; it is a " : "",
                    v ? pardo_var_role_name(v->role) : "");
            return CLI_BAD_INPUT;
        }
        if (open_feed_file(d->files[i].file, v, &d->maps[i], &st) != PARDO_OK) {
            cli_print_error(&st);
            return st.code == PARDO_ENOMEM ? CLI_FAILED : CLI_BAD_INPUT;
        }
    }
    for (int i = 0; i < b0->n_vars; i++) {
        const pardo_graph_var *v = &b0->vars[i];
        bool given = false;
        for (int k = 0; k < d->n && !given; k++) given = strcmp(d->files[k].name, v->name) == 0;
        if (v->role == PARDO_VAR_FEED && !given) {
            fprintf(stderr, "pardo: %s: feed var '%s' has no data: pass %s %s=FILE.npy (or .csv)\n", p->path, v->name,
                    d->flag,
                    v->name);
            return CLI_BAD_INPUT;
        }
    }
    pardo_loader_source src[MAX_ITEMS];
    for (int i = 0; i < d->n; i++) src[i] = (pardo_loader_source){d->files[i].name, d->maps[i]};
    if (!(d->group = pardo_task_group_new())) {
        fprintf(stderr, "pardo: out of memory\n");
        return CLI_FAILED;
    }
    if (pardo_loader_new(src, d->n, opt, &d->loader, &st) != PARDO_OK) {
        fprintf(stderr, "pardo: %s: %s\n", d->flag, st.msg);
        return st.code == PARDO_ENOMEM ? CLI_FAILED : CLI_BAD_INPUT;
    }
    /* the batch tensors (full, and the last short batch) against the feed vars */
    int64_t rows = pardo_loader_rows(d->loader), bs = opt->batch_size;
    int64_t shapes[2] = {bs, opt->drop_last ? 0 : rows % bs};
    for (int s = 0; s < 2; s++) {
        pardo_tensor *const *t = shapes[s] ? pardo_loader_probe(d->loader, shapes[s]) : NULL;
        for (int i = 0; t && i < d->n; i++)
            if (pardo_executor_feed(ex, d->files[i].name, t[i], d->files[i].file, &st) != PARDO_OK) {
                cli_print_error(&st);
                return CLI_BAD_INPUT;
            }
    }
    return -1;
}

/* The evaluation side: the graph without backward and optimize ops, its
 * executor, which shares the training executor's params while it runs. */
typedef struct evaluator {
    pardo_program *prog; // owned
    pardo_executor *ex;  // owned
    data_set data;
    const char *loss;   // borrowed from prog
    const char *logits; // borrowed from prog; NULL: no accuracy
    int labels;         // index of the labels' file in data, or -1
    char lane[64];      // the producer's name for this evaluation ("eval loader, epoch 2"): a lane per epoch
} evaluator;

typedef struct eval_result {
    double loss;     // mean over the rows
    int64_t correct; // rows whose argmax is the label
    int64_t rows;
    bool stopped; // a signal came first
} eval_result;

/* Everything the training loop works with. */
typedef struct trainer {
    const train_args *a;
    const pardo_program *prog;
    pardo_executor *ex;
    pardo_loss_info li;
    data_set data;
    evaluator ev;
    bool has_eval;
    pardo_coordinator *coord;
    pardo_train_state state; // where the run is (what a checkpoint records)
    FILE *log;
    bool log_made;       // --log did not exist before this run: removed again when no record was written
    int64_t log_records; // records written to --log by this run
    pardo_progress progress;
    pardo_epoch_stats last; // the last epoch's figures
    bool have_last;
    bool last_trained;   // last holds a training loss (not only an evaluation of a loaded checkpoint)
    int64_t steps_run;   // by this process
    double seconds;      // of training and evaluation in this process
    double step_seconds; // of training alone (loader waits and steps)
    int64_t samples;     // rows trained in this process
    bool tracing;        // --trace or --profile started a trace (ended by cli_trace_finish)
    bool early_stopped;  // --early-stop ended the run before --epochs
    const char *lr_vars[4]; // the rate vars the updates read (pardo_lr_vars); borrowed from prog
    double lr_base[4];      // each one's base rate: --lr, or the graph's
    int n_lr;
    int64_t total_steps;    // of the whole run: --epochs x batches per epoch
} trainer;

/* Writes params, state and where the run is to path (atomic). */
static int save_checkpoint(trainer *t, const char *path) {
    if (!is_rank0()) return CLI_OK; /* every rank holds the same params */
    pardo_status st;
    pardo_status_clear(&st);
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    int rc = pardo_executor_collect_state(t->ex, &l, &st);
    if (rc == PARDO_OK) rc = pardo_train_state_save(&t->state, &l, &st);
    if (rc == PARDO_OK) rc = pardo_safetensors_write(path, &l, &st);
    pardo_tensor_list_clear(&l);
    if (rc != PARDO_OK) {
        pardo_progress_break(&t->progress);
        cli_print_error(&st);
        return CLI_FAILED;
    }
    return CLI_OK;
}

/* The scalar value of var `name` (the loss, or `what` else) after a run of ex. */
static int read_scalar(pardo_executor *ex, const char *what, const char *name, double *out, pardo_status *st) {
    pardo_tensor *t = pardo_executor_fetch(ex, name);
    if (!t || t->is_array) return pardo_errorf(st, PARDO_ERUNTIME, "the %s '%s' has no value after the step", what, name);
    if (t->numel != 1 || !pardo_dtype_is_float(t->dtype))
        return pardo_errorf(st, PARDO_ERUNTIME, "the %s '%s' is a %s of %lld elements, expected a float scalar", what,
                            name, pardo_dtype_name(t->dtype), (long long)t->numel);
    if (!pardo_tensor_cpu(t, st)) return st->code;
    *out = pardo_tensor_get_f64(t, 0);
    return PARDO_OK;
}

static int feed_batch(pardo_executor *ex, const data_set *d, const pardo_batch *b, pardo_status *st) {
    for (int i = 0; i < d->n; i++)
        if (pardo_executor_feed(ex, d->files[i].name, b->tensors[i], d->files[i].file, st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

/* Rows of batch b whose logits' argmax is the label. */
static int count_correct(evaluator *ev, const pardo_batch *b, int64_t *correct, pardo_status *st) {
    pardo_tensor *lg = pardo_executor_fetch(ev->ex, ev->logits), *lb = b->tensors[ev->labels];
    if (!lg || lg->is_array || lg->ndim != 2 || lg->shape[0] != b->rows)
        return pardo_errorf(st, PARDO_ERUNTIME, "the logits '%s' are not [%lld, C] after the evaluation step",
                            ev->logits, (long long)b->rows);
    if (!pardo_tensor_cpu(lg, st) || !pardo_tensor_cpu(lb, st)) return st->code;
    int64_t c = lg->shape[1];
    for (int64_t r = 0; r < b->rows; r++) {
        int64_t best = 0;
        double top = pardo_tensor_get_f64(lg, r * c);
        for (int64_t k = 1; k < c; k++) {
            double v = pardo_tensor_get_f64(lg, r * c + k);
            if (v > top) top = v, best = k;
        }
        *correct += best == (int64_t)pardo_tensor_get_f64(lb, r);
    }
    return PARDO_OK;
}

/* Binds (or, with bind false, unbinds) the training executor's params and
 * state in the evaluation executor: shared tensors, no copies. */
static int share_params(trainer *t, bool bind, pardo_status *st) {
    const pardo_block *b0 = &t->ev.prog->blocks[0];
    pardo_scope *s = pardo_executor_scope(t->ev.ex);
    for (int i = 0; i < b0->n_vars; i++) {
        const pardo_graph_var *v = &b0->vars[i];
        if (v->role != PARDO_VAR_PARAM && v->role != PARDO_VAR_STATE) continue;
        if (!bind) {
            pardo_tensor_release(pardo_scope_take(s, v->name));
            continue;
        }
        pardo_tensor *p = pardo_executor_fetch(t->ex, v->name);
        if (p && pardo_scope_set(s, v->name, p, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}

/* One pass over the eval set. Returns PARDO_OK (r->stopped when a signal
 * came) or the first error, with the coordinator told. */
static int evaluate(trainer *t, eval_result *r, pardo_status *st) {
    evaluator *ev = &t->ev;
    memset(r, 0, sizeof(*r));
    double sum = 0;
    int rc = share_params(t, true, st);
    /* each evaluation's producer is a new thread: its own name, not a second "eval loader" lane in a trace */
    snprintf(ev->lane, sizeof ev->lane, "eval loader, epoch %lld", (long long)t->state.epoch);
    pardo_loader_set_lane(ev->data.loader, ev->lane);
    if (rc == PARDO_OK) rc = pardo_loader_start(ev->data.loader, ev->data.group, t->coord, 0, 0, 1, st);
    int64_t n = pardo_loader_batches(ev->data.loader);
    for (int64_t i = 0; rc == PARDO_OK && i < n; i++) {
        if (stop_signalled()) {
            r->stopped = true;
            break;
        }
        const pardo_batch *b;
        if ((rc = pardo_loader_next(ev->data.loader, &b, st)) != PARDO_OK) break;
        double loss = 0;
        if ((rc = feed_batch(ev->ex, &ev->data, b, st)) == PARDO_OK &&
            (rc = pardo_executor_run(ev->ex, st)) == PARDO_OK &&
            (rc = read_scalar(ev->ex, "loss", ev->loss, &loss, st)) == PARDO_OK && ev->logits)
            rc = count_correct(ev, b, &r->correct, st);
        if (rc == PARDO_OK) {
            sum += loss * (double)b->rows;
            r->rows += b->rows;
        } else if (rc != PARDO_ECANCELED) {
            pardo_status_prefix(st, "evaluating: ");
            pardo_coordinator_request_stop(t->coord, st);
        }
        pardo_loader_release(ev->data.loader, b);
    }
    pardo_loader_stop(ev->data.loader);
    pardo_status jst;
    pardo_status_clear(&jst);
    pardo_loader_join(ev->data.loader, &jst);
    pardo_status ust;
    share_params(t, false, &ust);
    /* every rank's shard: the sums over the ranks (an error on one rank ends the job before this) */
    double v[4] = {sum, (double)r->rows, (double)r->correct, r->stopped};
    if (rc == PARDO_OK && (rc = sum_over_ranks(v, 4, st)) == PARDO_OK) {
        sum = v[0];
        r->rows = (int64_t)v[1];
        r->correct = (int64_t)v[2];
        r->stopped = v[3] > 0;
    }
    r->loss = r->rows ? sum / (double)r->rows : 0;
    return rc;
}

/* The batch whose copy the feed stage has in flight (feed_stage.h), if any. */
typedef struct staged {
    pardo_feed_stage *stage; // NULL: batches are bound as the loader gives them (no copy)
    const pardo_batch *b;    // pushed, not yet taken; NULL when none
} staged;

/* Takes the next batch from the loader and, with a stage, pushes its copy. */
static int stage_next(data_set *d, staged *sg, const pardo_batch **out, pardo_status *st) {
    if (pardo_loader_next(d->loader, out, st) != PARDO_OK) return st->code;
    if (!sg->stage) return PARDO_OK;
    sg->b = *out;
    return pardo_feed_stage_push(sg->stage, *out, st);
}

/* Waits for the copy in flight (if any) and gives its batch back to the loader. */
static void stage_drain(data_set *d, staged *sg) {
    if (!sg->stage || !sg->b) return;
    pardo_tensor *const *ignored_t;
    pardo_status ignored;
    pardo_feed_stage_take(sg->stage, &ignored_t, &ignored);
    pardo_loader_release(d->loader, sg->b);
    sg->b = NULL;
}

/* Runs one training step on batch b (its tensors, or the stage's copy of
 * them): the next batch's copy is pushed before the step starts, so that it
 * runs while the step does; the loss is fetched as the step's var. */
static int train_step(trainer *t, staged *sg, const pardo_batch *b, bool has_next, double *loss, double *metric,
                      int64_t *rows, pardo_status *st) {
    data_set *d = &t->data;
    *rows = b->rows;
    int rc = PARDO_OK;
    if (sg->stage) {
        pardo_tensor *const *feeds;
        rc = pardo_feed_stage_take(sg->stage, &feeds, st);
        pardo_loader_release(d->loader, b);
        sg->b = NULL;
        for (int i = 0; rc == PARDO_OK && i < d->n; i++)
            rc = pardo_executor_feed(t->ex, d->files[i].name, feeds[i], d->files[i].file, st);
        const pardo_batch *next;
        if (rc == PARDO_OK && has_next) rc = stage_next(d, sg, &next, st);
    } else {
        rc = feed_batch(t->ex, d, b, st);
    }
    if (rc == PARDO_OK) rc = pardo_executor_run_async(t->ex, st);
    pardo_tensor *unused;
    if (rc == PARDO_OK) rc = pardo_executor_fetch_wait(t->ex, t->li.loss, &unused, st);
    int wrc = pardo_executor_wait(t->ex, st); /* after an error too: nothing of the step may still run */
    if (rc == PARDO_OK) rc = wrc;
    if (rc == PARDO_OK) rc = read_scalar(t->ex, "loss", t->li.loss, loss, st);
    if (rc == PARDO_OK && t->li.metric) rc = read_scalar(t->ex, "accuracy", t->li.metric, metric, st);
    if (!sg->stage) pardo_loader_release(d->loader, b);
    return rc;
}

/* Sets every rate var to its base times factor, before a step. */
static void set_rate(trainer *t, double factor) {
    for (int k = 0; k < t->n_lr; k++) {
        pardo_tensor *v = pardo_executor_fetch(t->ex, t->lr_vars[k]);
        if (v && !v->is_array && v->numel == 1) pardo_tensor_set_f64(v, 0, t->lr_base[k] * factor);
    }
}

/* The rate the last step ran with (the first rate var's value), 0 without one. */
static double current_rate(trainer *t) {
    pardo_tensor *v = t->n_lr ? pardo_executor_fetch(t->ex, t->lr_vars[0]) : NULL;
    pardo_status st;
    if (!v || v->is_array || v->numel != 1 || !pardo_tensor_cpu(v, &st)) return 0;
    return pardo_tensor_get_f64(v, 0);
}

/* Finds the rate vars and their base rates. Returns -1, or exit status 2
 * when --lr or a schedule was given for a graph whose updates read none. */
static int open_rates(trainer *t, int64_t n_batches) {
    const train_args *a = t->a;
    t->n_lr = pardo_lr_vars(t->prog, t->lr_vars, 4);
    t->total_steps = a->epochs * n_batches;
    if (a->lr_given && t->n_lr == 0) {
        fprintf(stderr,
                "pardo: %s: no optimize op reads a learning rate (an input named lr), so --lr, --lr-schedule and "
                "--warmup-steps have nothing to set; make the graph with 'pardo transpile --optimizer'\n",
                a->graph);
        return CLI_BAD_INPUT;
    }
    for (int k = 0; k < t->n_lr; k++) {
        t->lr_base[k] = a->lr;
        if (a->lr < 0 && !pardo_lr_declared(t->prog, t->lr_vars[k], &t->lr_base[k])) {
            if (!a->lr_given) continue;
            fprintf(stderr, "pardo: %s: the learning rate var '%s' has no constant init or value to schedule from; "
                            "give --lr\n", a->graph, t->lr_vars[k]);
            return CLI_BAD_INPUT;
        }
    }
    return -1;
}

/* Counts an epoch's eval loss against the best so far; true when it is
 * the new best (strictly lower: a tie is not progress, as torch's
 * ReduceLROnPlateau and Keras's EarlyStopping with min_delta 0 count it). */
static bool note_eval_loss(pardo_train_state *s, double eval_loss) {
    if (s->best_epoch > 0 && !(eval_loss < s->best_eval_loss)) {
        s->bad_epochs++;
        return false;
    }
    s->best_eval_loss = eval_loss;
    s->best_epoch = s->epoch; /* already counted as done */
    s->bad_epochs = 0;
    return true;
}

/* The epoch's loss and metric sums and rows so far: over every rank's shard (a checkpoint and the epoch
 * line hold the job's). A run resumed from such a checkpoint keeps them on rank 0 only (load_checkpoint). */
static int combine_partial_epoch(trainer *t, pardo_status *st) {
    if (pardo_comm_size() == 1) return PARDO_OK;
    double v[3] = {t->state.loss_sum, t->state.metric_sum, (double)t->state.rows};
    int rc = sum_over_ranks(v, 3, st);
    if (rc != PARDO_OK) return rc;
    t->state.loss_sum = v[0];
    t->state.metric_sum = v[1];
    t->state.rows = (int64_t)v[2];
    return PARDO_OK;
}

/* Trains epochs state.epoch .. epochs - 1 from batch state.batch. Returns
 * PARDO_OK, or the code that stopped it (the coordinator holds the error). */
static int train_epochs_staged(trainer *t, staged *sg, bool *stopped, pardo_status *st) {
    const train_args *a = t->a;
    data_set *d = &t->data;
    int64_t n_batches = pardo_loader_batches(d->loader);
    int rc = pardo_loader_start(d->loader, d->group, t->coord, t->state.epoch, t->state.batch, a->epochs, st);
    if (rc != PARDO_OK) return rc;
    while (t->state.epoch < a->epochs) {
        int64_t e = t->state.epoch;
        double t0 = pardo_now_s();
        int64_t rows_run = 0;
        pardo_progress_epoch_begin(&t->progress, e + 1, n_batches, t->state.batch);
        const pardo_batch *b = NULL;
        if (t->state.batch < n_batches && (rc = stage_next(d, sg, &b, st)) != PARDO_OK) return rc;
        while (t->state.batch < n_batches) {
            if (stop_agreed()) { /* the summary counts this epoch's part */
                t->samples += rows_run;
                t->step_seconds += pardo_now_s() - t0;
                t->seconds += pardo_now_s() - t0;
                *stopped = true;
                return combine_partial_epoch(t, st);
            }
            PARDO_ASSERT(b->epoch == e && b->index == t->state.batch);
            double loss = 0, metric = 0;
            int64_t rows;
            bool has_next = t->state.batch + 1 < n_batches;
            if (a->lr_given) set_rate(t, pardo_lr_factor(&a->schedule, t->state.step, t->total_steps));
            rc = train_step(t, sg, b, has_next, &loss, &metric, &rows, st);
            b = sg->b; /* the next batch, when the stage pushed it */
            if (rc != PARDO_OK) {
                pardo_coordinator_request_stop(t->coord, st); /* the loader stops too */
                return rc;
            }
            t->state.step++;
            t->steps_run++;
            t->state.batch++;
            t->state.loss_sum += loss * (double)rows;
            t->state.metric_sum += metric * (double)rows;
            t->state.rows += rows;
            rows_run += rows;
            pardo_progress_batch(&t->progress, t->state.batch, t->state.loss_sum / (double)t->state.rows, rows_run);
            if (!sg->stage && t->state.batch < n_batches && (rc = pardo_loader_next(d->loader, &b, st)) != PARDO_OK)
                return rc;
        }
        double t_train = pardo_now_s() - t0;
        double job_rows = (double)rows_run; /* the job's throughput */
        if ((rc = combine_partial_epoch(t, st)) != PARDO_OK || (rc = sum_over_ranks(&job_rows, 1, st)) != PARDO_OK)
            return rc;
        pardo_epoch_stats s = {.epoch = e + 1,
                               .epochs = a->epochs,
                               .loss = t->state.loss_sum / (double)t->state.rows,
                               .has_metric = t->li.metric != NULL,
                               .has_lr = t->n_lr > 0,
                               .lr = current_rate(t),
                               .accuracy = t->state.metric_sum / (double)t->state.rows,
                               .samples_per_s = t_train > 0 ? job_rows / t_train : 0};
        t->samples += rows_run;
        t->step_seconds += t_train;
        t->state.epoch++;
        t->state.batch = 0;
        t->state.loss_sum = 0;
        t->state.metric_sum = 0;
        t->state.rows = 0;
        bool best = false;
        if (t->has_eval) {
            eval_result r;
            if ((rc = evaluate(t, &r, st)) != PARDO_OK) return rc;
            if (r.stopped) {
                *stopped = true;
                return PARDO_OK;
            }
            s.has_eval = true;
            s.eval_loss = r.loss;
            s.has_accuracy = t->ev.logits != NULL;
            s.eval_accuracy = r.rows ? (double)r.correct / (double)r.rows : 0;
            best = note_eval_loss(&t->state, r.loss);
        }
        s.seconds = pardo_now_s() - t0;
        t->seconds += s.seconds;
        pardo_progress_epoch_end(&t->progress, &s);
        t->last = s;
        t->have_last = true;
        t->last_trained = true;
        if (t->log && pardo_train_log_write(t->log, a->log, &s, st) != PARDO_OK) {
            pardo_coordinator_request_stop(t->coord, st);
            return st->code;
        }
        t->log_records++;
        const char *ckpt[2] = {a->save, best ? a->save_best : NULL};
        for (int k = 0; k < 2; k++)
            if (ckpt[k] && save_checkpoint(t, ckpt[k]) != CLI_OK) {
                rc = pardo_errorf(st, PARDO_EIO, "%s: the checkpoint was not written", ckpt[k]);
                pardo_coordinator_request_stop(t->coord, st);
                return rc;
            }
        if (a->early_stop && t->state.bad_epochs >= a->early_stop) {
            t->early_stopped = true;
            return PARDO_OK;
        }
    }
    return PARDO_OK;
}

/* train_epochs_staged, with a feed stage where copying the next batch
 * while a step runs pays (pardo_executor_overlaps_input). */
static int train_epochs(trainer *t, bool *stopped, pardo_status *st) {
    staged sg = {0};
    const int device = pardo_executor_device(t->ex) == PARDO_DEVICE_CUDA ? pardo_executor_device_index(t->ex) : -1;
    if (pardo_executor_overlaps_input(t->ex) && pardo_feed_stage_new(t->data.n, device, &sg.stage, st) != PARDO_OK)
        return st->code;
    int rc = train_epochs_staged(t, &sg, stopped, st);
    stage_drain(&t->data, &sg);
    pardo_feed_stage_free(sg.stage);
    return rc;
}

/* Loads --load: params and state into ex, the counters into t->state.
 * Returns -1 or an exit status. */
static int load_checkpoint(trainer *t, int64_t n_batches) {
    const train_args *a = t->a;
    const int64_t job_batch = a->batch_size * pardo_comm_size(); /* what the ranks' steps take together */
    pardo_status st;
    pardo_status_clear(&st);
    pardo_tensor_list ckpt;
    bool found = false;
    int rc = cli_checkpoint_with_weights(a->load, &ckpt);
    if (rc != CLI_OK) return rc;
    if (a->load) rc = pardo_train_state_load(&ckpt, a->load, &t->state, &found, &st);
    if (rc == PARDO_OK)
        rc = pardo_executor_init_vars(t->ex, a->load || ckpt.n ? &ckpt : NULL, a->load ? a->load : a->graph, &st);
    pardo_tensor_list_clear(&ckpt);
    if (rc != PARDO_OK) {
        cli_print_error(&st);
        return CLI_BAD_INPUT;
    }
    pardo_train_state *s = &t->state;
    if (!found) {
        memset(s, 0, sizeof(*s));
        s->best_eval_loss = (double)INFINITY;
    } else if (s->batch > 0) { /* stopped mid-epoch: the same batches must follow (of all ranks together) */
        if (s->batch_size != job_batch || s->shuffle != a->shuffle ||
            (a->shuffle && s->seed != (uint64_t)a->seed)) {
            fprintf(stderr,
                    "pardo: %s: stopped in epoch %lld after batch %lld of a run with --batch-size %lld%s (rows a "
                    "step over all ranks); resume it with the same batch, --shuffle and --seed\n",
                    a->load, (long long)s->epoch + 1, (long long)s->batch, (long long)s->batch_size,
                    s->shuffle ? " --shuffle" : "");
            return CLI_BAD_INPUT;
        }
        if (s->batch >= n_batches) {
            fprintf(stderr,
                    "pardo: %s: stopped after batch %lld of epoch %lld, but an epoch of this data has %lld "
                    "batches\n",
                    a->load, (long long)s->batch, (long long)s->epoch + 1, (long long)n_batches);
            return CLI_BAD_INPUT;
        }
    }
    if (!is_rank0()) { /* the checkpoint's partial epoch sums are the job's: counted once, on rank 0 */
        s->loss_sum = s->metric_sum = 0;
        s->rows = 0;
    }
    s->batch_size = job_batch;
    s->shuffle = a->shuffle;
    s->seed = (uint64_t)a->seed;
    if (s->step > 0 && pardo_executor_set_steps(t->ex, (uint64_t)s->step, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_FAILED;
    }
    return -1;
}

/* Builds the evaluator: program, executor, data. Returns -1 or an exit status. */
static int open_evaluator(trainer *t, const pardo_loader_options *train_opt) {
    const train_args *a = t->a;
    evaluator *ev = &t->ev;
    pardo_status st;
    pardo_status_clear(&st);
    if (pardo_eval_program_build(t->prog, &t->li, &ev->prog, &ev->logits, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_BAD_INPUT;
    }
    ev->loss = pardo_block_find_var(&ev->prog->blocks[0], t->li.loss)->name;
    /* temporaries freed after their last reader; the loss and logits stay */
    const char *keep[] = {ev->loss, ev->logits};
    pardo_exec_options eo = {.nthreads = (int)a->threads, .kind = a->executor, .training = false,
                             .device = a->device, .device_index = a->device_index, .release_temps = true,
                             .keep = keep, .n_keep = 2};
    if (pardo_executor_new(ev->prog, &eo, &ev->ex, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_BAD_INPUT;
    }
    /* constants from their values; params and state are the training executor's (share_params) */
    pardo_tensor_list shared;
    pardo_tensor_list_init(&shared);
    int rc = pardo_executor_collect_state(t->ex, &shared, &st);
    if (rc == PARDO_OK) rc = pardo_executor_init_vars(ev->ex, &shared, "the training state", &st);
    pardo_tensor_list_clear(&shared);
    if (rc == PARDO_OK) rc = share_params(t, false, &st);
    if (rc != PARDO_OK) {
        cli_print_error(&st);
        return CLI_FAILED;
    }
    pardo_loader_options opt = *train_opt;
    opt.shuffle = false;
    opt.drop_last = false;
    opt.name = "eval loader";
    ev->data = (data_set){.flag = "--eval", .files = a->eval, .n = a->n_eval};
    int code = data_set_open(&ev->data, ev->prog, ev->ex, &opt);
    if (code >= 0) return code;
    ev->labels = -1;
    for (int i = 0; ev->logits && t->li.labels && i < a->n_eval; i++)
        if (strcmp(a->eval[i].name, t->li.labels) == 0) ev->labels = i;
    if (ev->labels < 0) ev->logits = NULL;
    return -1;
}

static void close_evaluator(evaluator *ev) {
    data_set_free(&ev->data);
    pardo_executor_free(ev->ex);
    pardo_program_free(ev->prog);
}

/* The final figures on stdout. */
static void print_summary(const trainer *t) {
    if (!is_rank0()) return;
    printf("trained %lld steps in %.2f s, evaluation included (%.0f samples/s in the steps%s); %lld/%ld epochs done\n",
           (long long)t->steps_run, t->seconds, t->step_seconds > 0 ? (double)t->samples / t->step_seconds : 0,
           pardo_comm_size() > 1 ? " of rank 0" : "", (long long)t->state.epoch, t->a->epochs);
    if (!t->have_last) return;
    if (t->last_trained) printf("loss: %.6f\n", t->last.loss);
    if (t->last_trained && t->last.has_metric) printf("accuracy: %.4f\n", t->last.accuracy);
    if (t->last.has_eval) printf("eval_loss: %.6f\n", t->last.eval_loss);
    if (t->last.has_eval && t->last.has_accuracy) printf("eval_accuracy: %.4f\n", t->last.eval_accuracy);
    if ((t->a->early_stop || t->a->save_best) && t->state.best_epoch > 0)
        printf("best_eval_loss: %.6f (epoch %lld)\n", t->state.best_eval_loss, (long long)t->state.best_epoch);
}

/* Maps the first error of the run to an exit status: a failed step (or
 * evaluation, log, checkpoint) is 1; a loader's error is 2 when it is
 * about its input. */
static int error_status(const pardo_status *first, const pardo_status *trainer_st) {
    if (first->code == trainer_st->code && strcmp(first->msg, trainer_st->msg) == 0) return CLI_FAILED;
    return first->code == PARDO_EPARSE || first->code == PARDO_ESHAPE || first->code == PARDO_EINVAL ? CLI_BAD_INPUT
                                                                                                     : CLI_FAILED;
}

/* Under mpirun: every rank must run the same steps on the same graph, or the collectives would wait for
 * ever (horovod#534) or mix tensors: the data's rows, the batches, the epochs, the eval rows, the params'
 * elements and the step a checkpoint resumes at are checked equal over the ranks (the sums of each value and
 * of its square: N sum v^2 = (sum v)^2 only when all are equal). Returns -1, or exit status 2 on every rank. */
static int agree_over_ranks(const trainer *t) {
    if (pardo_comm_size() == 1) return -1;
    static const char *const what[] = {"the --data rows", "the batches per epoch", "--epochs", "the --eval rows",
                                       "the params' elements", "the checkpoint's step"};
    enum { N_VALUES = 6 };
    int64_t params = 0;
    const pardo_block *b0 = &t->prog->blocks[0];
    for (int i = 0; i < b0->n_vars; i++) {
        const pardo_graph_var *v = &b0->vars[i];
        int64_t n = 1;
        if (v->role != PARDO_VAR_PARAM) continue;
        for (int d = 0; d < v->type.ndim; d++) n *= v->type.shape[d] > 0 ? v->type.shape[d] : 1;
        params += n;
    }
    const int64_t mine[N_VALUES] = {pardo_loader_rows(t->data.loader), pardo_loader_batches(t->data.loader),
                                    t->a->epochs, t->has_eval ? pardo_loader_rows(t->ev.data.loader) : 0, params,
                                    t->state.step};
    double sums[2 * N_VALUES];
    for (int k = 0; k < N_VALUES; k++) {
        sums[k] = (double)mine[k];
        sums[N_VALUES + k] = (double)mine[k] * (double)mine[k];
    }
    pardo_status st;
    if (sum_over_ranks(sums, 2 * N_VALUES, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_FAILED;
    }
    const double n = pardo_comm_size();
    for (int k = 0; k < N_VALUES; k++)
        if (n * sums[N_VALUES + k] != sums[k] * sums[k]) {
            fprintf(stderr, "pardo (rank %d of %d): the ranks differ in %s (this rank: %lld; the mean over the ranks: "
                            "%g): every rank needs the same graph, data, --batch-size, --epochs and --load\n",
                    pardo_comm_rank(), pardo_comm_size(), what[k], (long long)mine[k], sums[k] / n);
            return CLI_BAD_INPUT;
        }
    return -1;
}

/* On rank 0, a note when a data set's last rows are in no rank's batch (fewer than the ranks). */
static void note_left_out(const data_set *d) {
    int64_t n = pardo_loader_rows_left_out(d->loader);
    if (n && is_rank0())
        fprintf(stderr, "pardo: note: %s: the last %lld rows of each pass are left out: fewer than the %d ranks, so a "
                        "rank would get none\n", d->flag, (long long)n, pardo_comm_size());
}

static int run_training(trainer *t) {
    const train_args *a = t->a;
    pardo_status st;
    pardo_status_clear(&st);
    pardo_loader_options opt = {.batch_size = a->batch_size,
                                .shuffle = a->shuffle,
                                .seed = (uint64_t)a->seed,
                                .drop_last = a->drop_last,
                                .capacity = 2,
                                .name = "loader",
                                .rank = pardo_comm_rank(),
                                .ranks = pardo_comm_size()};
    t->data = (data_set){.flag = "--data", .files = a->data, .n = a->n_data};
    int code = data_set_open(&t->data, t->prog, t->ex, &opt);
    if (code >= 0) return code;
    note_left_out(&t->data);
    if ((code = load_checkpoint(t, pardo_loader_batches(t->data.loader))) >= 0) return code;
    if ((code = open_rates(t, pardo_loader_batches(t->data.loader))) >= 0) return code;
    if (a->n_eval > 0) {
        t->has_eval = true;
        if ((code = open_evaluator(t, &opt)) >= 0) return code;
        note_left_out(&t->ev.data);
    }
    if ((code = agree_over_ranks(t)) >= 0) return code;
    /* opened now, so that a log that cannot be written stops the run before it trains */
    t->log_made = a->log && is_rank0() && access(a->log, F_OK) != 0;
    if (a->log && is_rank0() && !(t->log = fopen(a->log, "a"))) {
        fprintf(stderr, "pardo: --log %s: cannot open: %s\n", a->log, strerror(errno));
        return CLI_FAILED;
    }
    if (!(t->coord = pardo_coordinator_new())) {
        fprintf(stderr, "pardo: out of memory\n");
        return CLI_FAILED;
    }
    pardo_progress_init(&t->progress, is_rank0() ? stderr : NULL, isatty(STDERR_FILENO), a->epochs);
    if (a->trace || a->profile) { /* the inputs are good: trace from here, however the run ends */
        const int rc = cli_trace_start();
        if (rc != CLI_OK) return rc;
        t->tracing = true;
    }

    in_job = pardo_comm_size() > 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int id;
    bool stopped = false;
    int rc = pardo_coordinator_register(t->coord, "training loop", &id, &st);
    if (rc == PARDO_OK) {
        if (t->state.epoch < a->epochs) rc = train_epochs(t, &stopped, &st);
        pardo_coordinator_done(t->coord, id);
    }
    /* stop and join the loader, then take the first error of either side */
    pardo_loader_stop(t->data.loader);
    pardo_status jst, first;
    pardo_status_clear(&jst);
    pardo_status_clear(&first);
    pardo_loader_join(t->data.loader, &jst);
    int first_rc = pardo_coordinator_join(t->coord, JOIN_GRACE_S, &first);
    pardo_progress_break(&t->progress);
    if (first_rc != PARDO_OK) {
        cli_print_error(&first);
        return error_status(&first, &st);
    }
    if (rc != PARDO_OK) { /* an error the coordinator did not hear of (registering) */
        cli_print_error(&st);
        return CLI_FAILED;
    }
    if (stopped) {
        if (is_rank0()) fprintf(stderr, "pardo: stopped in epoch %lld after batch %lld (%lld steps in all)\n",
                (long long)t->state.epoch + 1, (long long)t->state.batch, (long long)t->state.step);
        if (a->save && save_checkpoint(t, a->save) != CLI_OK) return CLI_FAILED;
        print_summary(t);
        return CLI_INTERRUPTED;
    }
    if (t->has_eval && !t->have_last) { /* nothing left to train: evaluate what was loaded */
        eval_result r;
        if (evaluate(t, &r, &st) != PARDO_OK) {
            cli_print_error(&st);
            return CLI_FAILED;
        }
        t->last = (pardo_epoch_stats){.epoch = t->state.epoch,
                                      .has_eval = !r.stopped,
                                      .eval_loss = r.loss,
                                      .has_accuracy = t->ev.logits != NULL,
                                      .eval_accuracy = r.rows ? (double)r.correct / (double)r.rows : 0};
        t->have_last = true;
    }
    if (a->save && t->steps_run == 0 && save_checkpoint(t, a->save) != CLI_OK) return CLI_FAILED;
    if (t->early_stopped && is_rank0())
        fprintf(stderr, "pardo: early stop after epoch %lld: %lld epochs without a lower eval loss than %.6f (epoch %lld)%s%s\n",
                (long long)t->state.epoch, (long long)t->state.bad_epochs, t->state.best_eval_loss,
                (long long)t->state.best_epoch, a->save_best ? "; its params are in " : "", a->save_best ? a->save_best : "");
    print_summary(t);
    return CLI_OK;
}

/* Finds the loss (and the classifier's logits and labels) of prog, and,
 * unless --no-fuse, runs the fusion pass keeping them, then finds them again
 * in the rewritten program (li borrows from it). CLI_OK, or CLI_BAD_INPUT
 * after printing the error. */
static int find_loss_fused(pardo_program *prog, const train_args *a, pardo_loss_info *li) {
    pardo_status st;
    pardo_status_clear(&st);
    for (int pass = 0; pass < 2; pass++) {
        if (pardo_loss_find(prog, a->loss, li, &st) != PARDO_OK) {
            cli_print_error(&st);
            return CLI_BAD_INPUT;
        }
        if (pass == 1 || a->no_fuse) return CLI_OK;
        /* copies: the pass frees the ops whose names li may borrow */
        char *keep[4] = {NULL, NULL, NULL, NULL};
        const char *from[4] = {li->loss, li->logits, li->labels, li->metric};
        bool copied = true;
        for (int k = 0; k < 4; k++) copied &= !from[k] || (keep[k] = strdup(from[k])) != NULL;
        int rc = copied ? cli_fuse(prog, (const char *const *)keep, 4) : CLI_BAD_INPUT;
        if (!copied) fprintf(stderr, "pardo: out of memory\n");
        for (int k = 0; k < 4; k++) free(keep[k]);
        if (rc != CLI_OK) return rc;
    }
    return CLI_OK;
}

static int train_main(int argc, char **argv) {
    train_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    pardo_status st;
    pardo_status_clear(&st);
    pardo_program *prog = cli_start(a.threads, a.graph);
    if (!prog) return CLI_BAD_INPUT;
    trainer t;
    memset(&t, 0, sizeof t);
    t.a = &a;
    t.prog = prog;
    if (!pardo_program_trains(prog)) {
        fprintf(stderr,
                "pardo: %s: no op has role \"optimize\", so training would change nothing; make a training "
                "graph with 'pardo transpile GRAPH -o OUT --backward LOSS --optimizer adam'\n",
                a.graph);
        pardo_program_free(prog);
        return CLI_BAD_INPUT;
    }
    if (pardo_comm_size() > 1) { /* the gradients averaged over the ranks before the updates */
        pardo_pass_options po = pardo_pass_defaults();
        po.bucket_mb = a.bucket_mb;
        if (pardo_pass_ranks(prog, &po, &st) != PARDO_OK) {
            cli_print_error(&st);
            pardo_program_free(prog);
            return CLI_BAD_INPUT;
        }
    }
    if (find_loss_fused(prog, &a, &t.li) != CLI_OK || cli_place(prog, a.device) != CLI_OK) {
        pardo_program_free(prog);
        return CLI_BAD_INPUT;
    }
    const char *keep[] = {t.li.loss, t.li.metric};
    pardo_exec_options opt = {.nthreads = (int)a.threads, .kind = a.executor, .training = true,
                              .device = a.device, .device_index = a.device_index, .release_temps = true,
                              .keep = keep, .n_keep = t.li.metric ? 2 : 1};
    if (pardo_executor_new(prog, &opt, &t.ex, &st) != PARDO_OK) {
        cli_print_error(&st);
        pardo_program_free(prog);
        return CLI_BAD_INPUT;
    }
    rc = run_training(&t);
    if (t.tracing) {
        const char *status = rc == CLI_OK ? "ok" : rc == CLI_INTERRUPTED ? "interrupted" : "failed";
        char path[4096];
        if (cli_trace_finish(pardo_trace_rank_path(a.trace, pardo_comm_rank(), pardo_comm_size(), path, sizeof path),
                             a.profile && is_rank0(), a.graph, "train", (int)a.threads, (long)t.state.step,
                             status) != CLI_OK &&
            rc == CLI_OK)
            rc = CLI_FAILED;
    }
    /* the loaders first (they join their producers), then what they used */
    data_set_free(&t.data);
    if (t.has_eval) close_evaluator(&t.ev);
    pardo_coordinator_free(t.coord);
    if (t.log) fclose(t.log);
    if (t.log_made && t.log_records == 0) unlink(a.log); /* a run that ended before its first epoch: no empty log */
    pardo_executor_free(t.ex);
    pardo_program_free(prog);
    return rc;
}

int pardo_cli_train(int argc, char **argv) {
    pardo_status st;
    pardo_status_clear(&st);
    if (pardo_comm_init(&st) != PARDO_OK) { /* under mpirun: join the job */
        cli_print_error(&st);
        return CLI_FAILED;
    }
    int rc = train_main(argc, argv);
    if (pardo_comm_size() == 1) return rc;
    if (rc == CLI_OK || rc == CLI_INTERRUPTED) { /* every rank got here: the same steps, the same stop */
        pardo_comm_finalize();
        return rc;
    }
    /* this rank failed: its message is out; end every rank rather than leave them waiting in a collective */
    fprintf(stderr, "pardo: rank %d of %d failed (exit status %d); ending the job\n", pardo_comm_rank(),
            pardo_comm_size(), rc);
    pardo_comm_abort(rc);
}
