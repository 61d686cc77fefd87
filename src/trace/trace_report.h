/* trace_report.h - reading a Chrome trace back (pardo's own or any other
 * tool's complete events) and what `pardo trace` makes of it: the summary
 * tables (src/trace/trace_summary.c) and the SVG timeline (src/trace/trace_svg.c).
 * Nothing here is thread-safe for a shared model or stats being written;
 * distinct ones may be used from distinct threads. */
#ifndef PARDO_TRACE_REPORT_H
#define PARDO_TRACE_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

struct cJSON; /* the event's args stay cJSON, inside the .c files */

typedef enum pardo_tev_kind {
    PARDO_TEV_OP = 0, // cat "op" with args.op: one op run
    PARDO_TEV_PART,   // cat "part": one parallel_do part
    PARDO_TEV_STAGE,  // cat "stage": merges and updates run as chains
    PARDO_TEV_OTHER,  // any other complete event (a loader's spans, other tools')
} pardo_tev_kind;

/* One complete ("ph": "X") event. Strings are borrowed from the model. */
typedef struct pardo_tev {
    pardo_tev_kind kind;
    const char *name, *cat;
    double ts, dur;           // us
    int thread;               // index into the model's threads
    const char *op;           // OP: the op type; else NULL
    int block, index;         // OP: the op's place; STAGE: block and first op; PART: the block it ran; else -1
    int part, parts;          // PART: which part of how many; else -1
    int op_block, op_index;   // PART: the parallel_do's place; else -1
    long long rows;           // PART: rows, -1 when absent
    unsigned long long flow;  // PART: its flow id; OP: the first flow it started (0: none)
    int flows;                // OP: flows started (a parallel_do's parts)
    double queued;            // OP: queued_us, 0 when absent
    long long bytes_written;  // OP: bytes_written, 0 when absent
    const char *error;        // args.error, or NULL
    const struct cJSON *args; // the event's args object, or NULL; borrowed
} pardo_tev;

typedef struct pardo_trace_thread {
    long tid;
    const char *name; // thread_name metadata, else "tid N"; borrowed from the model
    int sort;         // thread_sort_index metadata, else a large number (then by tid)
} pardo_trace_thread;

typedef struct pardo_trace_sample {
    double ts;    // us
    double value; // bytes
} pardo_trace_sample;

typedef struct pardo_trace_model {
    char *source;  // the file (or name) it came from; owned
    pardo_tev *ev; // complete events, by thread (in sort order), then ts, longer first
    int n_ev;
    pardo_trace_thread *threads; // threads with at least one event or a name, in sort order
    int n_threads;
    pardo_trace_sample *mem; // the "tensor memory" counter, by ts
    int n_mem;
    double t0, t1;               // wall span of the complete events (us); 0, 0 when there are none
    const char *command, *graph; // otherData, or NULL
    int threads_opt;             // otherData.threads, or 0
    long steps;                  // otherData.steps, or -1
    const char *status;          // otherData.status, or NULL
    long dropped;                // otherData.dropped_events, or 0
    double full_at_us;           // otherData.full_at_us: where recording stopped at its memory limit, or -1
    struct cJSON *doc;           // the parsed file, owned
    char **owned;                // strings the model made, owned
    int n_owned, cap_owned;
} pardo_trace_model;

/* Parses len bytes of text (need not be NUL-terminated) as a Chrome trace:
 * a JSON object with a "traceEvents" array (or a bare array of events).
 * Complete events need numeric ts, dur and tid. On failure PARDO_EPARSE
 * (not JSON, truncated, not a trace, a malformed event: the message names
 * source, the byte or event index, and what was expected) or PARDO_ENOMEM.
 * *out is freed with pardo_trace_model_free. */
int pardo_trace_model_parse(const char *text, size_t len, const char *source, pardo_trace_model **out,
                            pardo_status *st);

/* Reads the file at path and parses it as above; PARDO_EIO when it cannot
 * be read. */
int pardo_trace_model_load(const char *path, pardo_trace_model **out, pardo_status *st);

/* Frees the model; NULL is a no-op. */
void pardo_trace_model_free(pardo_trace_model *m);

/* ---- the summary (src/trace/trace_summary.c) ---- */

#define PARDO_TRACE_KEY_MAX 96

/* One row of a duration table; times in us. */
typedef struct pardo_trace_stat {
    char key[PARDO_TRACE_KEY_MAX];  // op type; an op's "bB:I name"; a span's "cat/name"
    char type[PARDO_TRACE_KEY_MAX]; // ops: the op type; else ""
    long count;
    double total, mean, p50, p99, max; // us
    double share;                      // total / the trace's wall span
} pardo_trace_stat;

typedef struct pardo_trace_thread_stat {
    char name[PARDO_TRACE_KEY_MAX];
    long events;
    double busy, idle;             // us: time covered by at least one of its events; wall - busy
    double busy_share, idle_share; // of the wall span
} pardo_trace_thread_stat;

/* One parallel_do op (all its runs). */
typedef struct pardo_trace_pd_stat {
    char key[PARDO_TRACE_KEY_MAX]; // "bB:I name"
    long runs;
    int parts;           // most parts in a run
    double wall;         // us: sum of its runs' durations
    double part_time;    // us: sum of its parts' durations
    double efficiency;   // part_time / sum over runs of (parts x run duration)
    int slowest_part;    // the part index with the largest mean duration, -1 if no parts
    double slowest_mean; // its mean (us)
    double max_part;     // the longest single part (us)
} pardo_trace_pd_stat;

typedef struct pardo_trace_stats {
    double wall;             // us: the trace's wall span
    long n_events;           // complete events
    pardo_trace_stat *types; // per op type, by total descending
    int n_types;
    pardo_trace_stat *ops; // per op (block, index, name), by total descending
    int n_ops;
    pardo_trace_stat *spans; // parts, stages and other spans per "cat/name", by total descending
    int n_spans;
    pardo_trace_thread_stat *threads; // in the model's thread order
    int n_threads;
    pardo_trace_pd_stat *pds; // per parallel_do op, in order of first run
    int n_pds;
} pardo_trace_stats;

/* Computes the summary of m into *s (cleared first; free with
 * pardo_trace_stats_clear). PARDO_ENOMEM. */
int pardo_trace_stats_compute(const pardo_trace_model *m, pardo_trace_stats *s, pardo_status *st);

/* Frees what s holds and zeroes it. */
void pardo_trace_stats_clear(pardo_trace_stats *s);

/* Prints the summary as text tables (the top `top` ops) to f. */
void pardo_trace_stats_print(FILE *f, const pardo_trace_model *m, const pardo_trace_stats *s, int top);

/* Prints the summary as one long-format CSV (section,key,metric,value) to f. */
void pardo_trace_stats_csv(FILE *f, const pardo_trace_model *m, const pardo_trace_stats *s, int top);

/* ---- the timeline (src/trace/trace_svg.c) ---- */

/* The model as one self-contained SVG document (a new NUL-terminated
 * buffer the caller frees; *len its length): a lane per thread, ops
 * coloured by type with a legend, a time axis in ms, parallel_do parts
 * banded and outlined, <title> tooltips. width in pixels (0: 1400).
 * PARDO_ENOMEM. */
int pardo_trace_svg(const pardo_trace_model *m, int width, char **out, size_t *len, pardo_status *st);

#endif
