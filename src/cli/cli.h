/* cli.h - the subcommands of the pardo binary (src/cli/cli_*.c) and the helpers
 * they share. Each command takes argc/argv after its own name and returns
 * the process exit status: 0 success, 1 the run failed, 2 bad usage or a bad
 * input file, 130 stopped by a signal (SPEC section 3). */
#ifndef PARDO_CLI_H
#define PARDO_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/graph.h"
#include "core/status.h"
#include "core/tensor_list.h"
#include "exec/executor.h"

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_BAD_INPUT = 2, CLI_INTERRUPTED = 130 };

int pardo_cli_run(int argc, char **argv);
int pardo_cli_check(int argc, char **argv);
int pardo_cli_ops(int argc, char **argv);
int pardo_cli_dot(int argc, char **argv);
int pardo_cli_transpile(int argc, char **argv);
int pardo_cli_train(int argc, char **argv);
int pardo_cli_trace(int argc, char **argv);
int pardo_cli_import(int argc, char **argv);

/* Prints the summary tables of a Chrome trace held in memory (json, len
 * bytes; borrowed), named `name` in the heading, to f: `pardo run
 * --profile`. Returns an exit status (1 when it cannot). */
int cli_trace_profile(FILE *f, const char *json, size_t len, const char *name);

/* Starts the trace of `pardo run` or `pardo train` (--trace, --profile):
 * CLI_OK when recording; else the error printed and CLI_BAD_INPUT for a
 * bad $PARDO_TRACE_MAX_MB (the only PARDO_EINVAL a fresh start gives),
 * CLI_FAILED otherwise. */
int cli_trace_start(void);

/* Ends a trace started with cli_trace_start for `pardo run` or `pardo
 * train`: writes it to `path` atomically (when not NULL) and prints the
 * summary tables on stderr when `profile`; otherData names the graph, the
 * command, threads, steps and status ("ok", "failed", "interrupted"). Resets
 * the trace. Returns CLI_OK or CLI_FAILED (the error printed). Call before
 * the program is freed. */
int cli_trace_finish(const char *path, bool profile, const char *graph, const char *command, int threads, long steps,
                     const char *status);

/* Prints "pardo CMD: message" and a hint to use --help on stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "pardo: " and st's message on stderr. */
void cli_print_error(const pardo_status *st);

/* True when arg is -h or --help. */
bool cli_is_help(const char *arg);

/* Parses a decimal integer in [lo, hi] given to `flag`; on failure prints a
 * usage error for cmd and returns false. */
bool cli_parse_int(const char *cmd, const char *flag, const char *text, long lo, long hi, long *out);

/* Parses a finite decimal number in [lo, hi] given to `flag`; on failure
 * prints a usage error for cmd and returns false. */
bool cli_parse_double(const char *cmd, const char *flag, const char *text, double lo, double hi, double *out);

/* Loads the graph file or ONNX model at path (by content) and runs the
 * check passes (validate, infer shapes). An ONNX model's params' tensors
 * are kept for cli_model_weights. On failure prints the error and returns
 * NULL; the caller frees with pardo_program_free. */
pardo_program *cli_load_checked(const char *path);

/* The weights of the model cli_load_checked loaded last (an ONNX model's
 * params; empty for a graph file): borrowed, valid until the next load or
 * cli_model_release. */
const pardo_tensor_list *cli_model_weights(void);

/* Whether the model cli_load_checked loaded last was an ONNX model. */
bool cli_model_is_onnx(void);

/* Releases the model's weights (main, before exit). */
void cli_model_release(void);

/* *ckpt (initialised here; the caller clears it) = the checkpoint at load
 * (may be NULL) plus the model's weights it does not name. CLI_OK, or the
 * exit status after printing the error. */
int cli_checkpoint_with_weights(const char *load, pardo_tensor_list *ckpt);

/* The weights file for graph file `graph`: `given`, or graph with
 * .safetensors for .json, into buf (n bytes). CLI_BAD_INPUT if too long. */
int cli_weights_path(const char *graph, const char *given, char *buf, size_t n);

/* Writes the model's weights (if any) to `weights`, then p to `out`
 * (removing the weights again when the graph cannot be written). CLI_OK;
 * CLI_BAD_INPUT when the graph holds what a graph file cannot (a NaN
 * attr); CLI_FAILED when a write fails; the error printed. */
int cli_write_graph_and_weights(const pardo_program *p, const char *out, const char *weights);

/* The flags run and train share that take a checked value: argv[*i] is
 * --threads N (1..PARDO_MAX_THREADS, into *threads) or --executor
 * auto|sequential|dataflow (into *executor, pardo_exec_options.kind). 1
 * when it was one of them and its value is good (*i moved past the value),
 * 0 when it is neither, -1 after printing a usage error that names the
 * flag, the value and what was expected (the caller's exit status is then
 * CLI_BAD_INPUT). */
int cli_parse_exec_flag(const char *cmd, int argc, char **argv, int *i, long *threads, pardo_executor_kind *executor);

/* run's and train's --device value: "cpu", "cuda" (device 0) or "cuda:K" (0..1023) into *device and *index.
 * False after printing a usage error that names command cmd and the value (exit status CLI_BAD_INPUT). */
bool cli_parse_device(const char *cmd, const char *text, pardo_device_kind *device, int *index);

/* run's and train's thread count: *threads as --threads gave it, or, where
 * it is 0 (not given), $PARDO_NUM_THREADS, else the online CPUs. False
 * (after printing why) when $PARDO_NUM_THREADS is needed and set but is not
 * a thread count 1..PARDO_MAX_THREADS, which the pool would pass over in
 * silence. */
bool cli_resolve_threads(long *threads);

/* The fusion pass (pardo_pass_fuse) over p, keeping the n_keep vars named
 * in keep (the fetched ones): what run and train do before they make their
 * executors, unless --no-fuse. On failure prints the error and returns
 * CLI_BAD_INPUT; CLI_OK otherwise. */
int cli_fuse(pardo_program *p, const char *const *keep, int n_keep);

/* The placement pass (pardo_pass_place) over p where `device` is CUDA and a
 * GPU is present (else nothing: the run is on the CPU): what run and train
 * do last before they make their executors. On failure prints the error
 * and returns CLI_BAD_INPUT; CLI_OK otherwise. */
int cli_place(pardo_program *p, pardo_device_kind device);

/* What run and train do first: sizes the thread pool to `threads`, then
 * loads and checks the graph at path (cli_load_checked). On failure prints
 * the error and returns NULL; the caller frees with pardo_program_free. */
pardo_program *cli_start(long threads, const char *path);

/* Takes the value of flag argv[*i] ("--flag VALUE" or "--flag=VALUE"):
 * returns it and advances *i, or prints a usage error and returns NULL. */
const char *cli_flag_value(const char *cmd, int argc, char **argv, int *i, const char *flag);

/* True when argv[i] is `flag` or starts with "flag=". */
bool cli_flag_is(const char *arg, const char *flag);

#endif
