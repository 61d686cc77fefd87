/* cli_trace.c - `pardo trace summary|timeline`: read a Chrome trace that
 * `pardo run --trace` wrote (or any complete-event trace) and print its
 * summary tables or draw it as an SVG timeline; and the summary that
 * `pardo run --profile` prints from a trace held in memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/file_io.h"
#include "trace/trace_report.h"

static const char trace_help[] =
    "usage: pardo trace summary TRACE... [--top N] [--csv]\n"
    "       pardo trace timeline TRACE -o FILE.svg [--width PX]\n"
    "\n"
    "Reads a Chrome trace (pardo run --trace FILE) and reports on it.\n"
    "  summary   per op type: count, total, mean, p50, p99, share of the wall time; the top ops;\n"
    "            per thread busy and idle time; parallel_do efficiency and slowest part\n"
    "  timeline  an SVG picture of the run: one lane per thread, ops coloured by type\n"
    "'pardo trace summary --help' and 'pardo trace timeline --help' describe each.\n";

static const char summary_help[] =
    "usage: pardo trace summary TRACE... [--top N] [--csv]\n"
    "\n"
    "Prints tables of a Chrome trace: per op type (count, total ms, mean, p50 and p99 us, share of the\n"
    "trace's wall span), the top N ops by total time, other spans (parts, stages, loader spans), each\n"
    "thread's busy and idle time, and each parallel_do's efficiency (sum of its part times / (parts x\n"
    "its wall time)) and slowest part.\n"
    "Several traces (an MPI job's TRACE.rank0.json, TRACE.rank1.json, ...) get a summary each, then\n"
    "one line per trace: wall time, steps, time in MPI collectives (comm spans) and its share.\n"
    "  --top N   ops in the top table (default 10)\n"
    "  --csv     one long-format CSV instead: section,key,metric,value\n";

static const char timeline_help[] =
    "usage: pardo trace timeline TRACE -o FILE.svg [--width PX]\n"
    "\n"
    "Draws a Chrome trace as one self-contained SVG: a lane per thread, ops coloured by type with a\n"
    "legend, a time axis in ms, each parallel_do run as a band across the lanes of its parts, and\n"
    "the tensor memory counter; hover a box for its details. Written atomically.\n"
    "  -o FILE.svg  where to write it (required)\n"
    "  --width PX   picture width in pixels, 600 to 20000 (default 1400)\n";

static int load(const char *path, pardo_trace_model **m) {
    pardo_status st;
    pardo_status_clear(&st);
    if (pardo_trace_model_load(path, m, &st) == PARDO_OK) return CLI_OK;
    cli_print_error(&st);
    return st.code == PARDO_ENOMEM ? CLI_FAILED : CLI_BAD_INPUT;
}

/* Prints m's summary (text or CSV) to f; returns an exit status. *wall and *comm (may be NULL) get its wall
 * span and the time of its comm spans (MPI collectives), in us. */
static int print_summary(FILE *f, const pardo_trace_model *m, long top, bool csv, double *wall, double *comm) {
    pardo_status st;
    pardo_trace_stats s;
    pardo_status_clear(&st);
    if (pardo_trace_stats_compute(m, &s, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_FAILED;
    }
    if (csv) pardo_trace_stats_csv(f, m, &s, (int)top);
    else pardo_trace_stats_print(f, m, &s, (int)top);
    if (wall) *wall = s.wall;
    if (comm) *comm = 0;
    for (int i = 0; comm && i < s.n_spans; i++)
        if (strncmp(s.spans[i].key, "comm/", 5) == 0) *comm += s.spans[i].total;
    pardo_trace_stats_clear(&s);
    return CLI_OK;
}

/* One line per trace of a job: wall, steps, the time of its comm spans (allreduce) and their share (us, as
 * print_summary gave them). */
static void print_ranks(FILE *f, pardo_trace_model *const *m, const double *wall, const double *comm, int n) {
    fprintf(f, "\ntraces side by side (comm: time in MPI collectives, every rank waits there for the slowest)\n");
    fprintf(f, "%-40s %10s %7s %10s %7s\n", "trace", "wall ms", "steps", "comm ms", "share");
    for (int k = 0; k < n; k++)
        fprintf(f, "%-40s %10.3f %7ld %10.3f %6.1f%%\n", m[k]->source, wall[k] / 1000, m[k]->steps, comm[k] / 1000,
                wall[k] > 0 ? 100 * comm[k] / wall[k] : 0);
}

#define MAX_TRACES 256

static int cmd_summary(int argc, char **argv) {
    const char *paths[MAX_TRACES], *v;
    int n_paths = 0;
    long top = 10;
    bool csv = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_is_help(arg)) {
            fputs(summary_help, stdout);
            return CLI_OK;
        } else if (cli_flag_is(arg, "--top")) {
            if (!(v = cli_flag_value("trace summary", argc, argv, &i, "--top")) ||
                !cli_parse_int("trace summary", "--top", v, 1, 1000000, &top))
                return CLI_BAD_INPUT;
        } else if (strcmp(arg, "--csv") == 0) {
            csv = true;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return cli_usage_error("trace summary", "unknown flag '%s'", arg);
        } else if (n_paths < MAX_TRACES) {
            paths[n_paths++] = arg;
        } else {
            return cli_usage_error("trace summary", "more than %d traces", MAX_TRACES);
        }
    }
    if (n_paths == 0) return cli_usage_error("trace summary", "missing TRACE");
    /* every trace read before anything is printed: a bad one prints no partial summary */
    pardo_trace_model *m[MAX_TRACES] = {NULL};
    int rc = CLI_OK;
    for (int k = 0; k < n_paths && rc == CLI_OK; k++) rc = load(paths[k], &m[k]);
    double wall[MAX_TRACES] = {0}, comm[MAX_TRACES] = {0};
    for (int k = 0; k < n_paths && rc == CLI_OK; k++) {
        if (k > 0 && !csv) fputc('\n', stdout);
        rc = print_summary(stdout, m[k], top, csv, &wall[k], &comm[k]);
    }
    if (rc == CLI_OK && n_paths > 1 && !csv) print_ranks(stdout, m, wall, comm, n_paths);
    for (int k = 0; k < n_paths; k++) pardo_trace_model_free(m[k]);
    return rc;
}

static int cmd_timeline(int argc, char **argv) {
    const char *path = NULL, *out = NULL, *v;
    long width = 1400;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_is_help(arg)) {
            fputs(timeline_help, stdout);
            return CLI_OK;
        } else if (cli_flag_is(arg, "-o")) {
            if (!(out = cli_flag_value("trace timeline", argc, argv, &i, "-o"))) return CLI_BAD_INPUT;
        } else if (cli_flag_is(arg, "--width")) {
            if (!(v = cli_flag_value("trace timeline", argc, argv, &i, "--width")) ||
                !cli_parse_int("trace timeline", "--width", v, 600, 20000, &width))
                return CLI_BAD_INPUT;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return cli_usage_error("trace timeline", "unknown flag '%s'", arg);
        } else if (!path) {
            path = arg;
        } else {
            return cli_usage_error("trace timeline", "unexpected argument '%s' (one TRACE only)", arg);
        }
    }
    if (!path) return cli_usage_error("trace timeline", "missing TRACE");
    if (!out) return cli_usage_error("trace timeline", "missing -o FILE.svg (where to write the picture)");
    pardo_trace_model *m = NULL;
    int rc = load(path, &m);
    if (rc != CLI_OK) return rc;
    pardo_status st;
    pardo_status_clear(&st);
    char *svg = NULL;
    size_t n = 0;
    if (pardo_trace_svg(m, (int)width, &svg, &n, &st) == PARDO_OK) {
        pardo_file_part part = {svg, n};
        pardo_file_write_atomic(out, &part, 1, &st);
    }
    free(svg);
    pardo_trace_model_free(m);
    if (st.code != PARDO_OK) {
        cli_print_error(&st);
        return CLI_FAILED;
    }
    return CLI_OK;
}

int pardo_cli_trace(int argc, char **argv) {
    if (argc < 1) {
        fputs(trace_help, stderr);
        return CLI_BAD_INPUT;
    }
    if (cli_is_help(argv[0])) {
        fputs(trace_help, stdout);
        return CLI_OK;
    }
    if (strcmp(argv[0], "summary") == 0) return cmd_summary(argc - 1, argv + 1);
    if (strcmp(argv[0], "timeline") == 0) return cmd_timeline(argc - 1, argv + 1);
    return cli_usage_error("trace", "unknown subcommand '%s' (expected summary or timeline)", argv[0]);
}

int cli_trace_profile(FILE *f, const char *json, size_t len, const char *name) {
    pardo_status st;
    pardo_trace_model *m = NULL;
    pardo_status_clear(&st);
    if (pardo_trace_model_parse(json, len, name, &m, &st) != PARDO_OK) {
        cli_print_error(&st);
        return CLI_FAILED;
    }
    int rc = print_summary(f, m, 10, false, NULL, NULL);
    pardo_trace_model_free(m);
    return rc;
}
