/* trace.h - execution traces (SPEC section 4, "Traces"): while a trace is
 * on, the executor records one event per op run, the parallel_do kernel one
 * per part (with a flow from the parallel_do to it), the executor one per
 * stage of merges and updates, and any code may add its own spans (the data
 * loader). Events go to per-thread buffers, appended without locks; each
 * thread registers its buffer once, under a mutex, on its first event. The
 * whole trace is written once, at the end, as Chrome Trace Event Format JSON
 * (TRACES.md documents every field).
 *
 * Cost when off: every recording site tests pardo_trace_on(), one relaxed
 * load of a global flag; nothing is allocated and no clock is read.
 *
 * Life cycle: pardo_trace_start, then the traced work, then pardo_trace_stop
 * (recording ends), then pardo_trace_write / pardo_trace_json any number of
 * times, then pardo_trace_reset (frees the buffers). Start, stop, write and
 * reset are called by one controlling thread, never while another thread
 * may still record (join the traced work first: the thread pool's fork/join
 * and a TaskGroup's join_all order the workers' events before the write).
 * The recording functions are thread-safe: each thread writes its own
 * buffer. Op events borrow the program's ops: write the trace before the
 * program is freed. */
#ifndef PARDO_TRACE_H
#define PARDO_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/graph.h"
#include "core/status.h"
#include "core/tensor.h"

/* The on/off flag; read it through pardo_trace_on. */
extern atomic_bool pardo_trace_enabled;

/* True while a trace records. One relaxed load; thread-safe. */
static inline bool pardo_trace_on(void) {
    return __builtin_expect(atomic_load_explicit(&pardo_trace_enabled, memory_order_relaxed), 0);
}

/* CLOCK_MONOTONIC in nanoseconds: the time of spans of one's own
 * (pardo_trace_complete). Thread-safe. */
int64_t pardo_trace_now_ns(void);

/* Set by pardo_trace_start: the tick clock is the TSC. */
extern atomic_bool pardo_trace_tsc;

/* The recording sites' clock, in ticks: the x86-64 time-stamp counter
 * (about 7 ns to read, against about 20 for clock_gettime) when the kernel's
 * clocksource is the TSC (so that it is steady and the same on every core),
 * else pardo_trace_now_ns. The writer turns ticks into CLOCK_MONOTONIC time,
 * calibrated between pardo_trace_start and the write. Thread-safe. */
static inline int64_t pardo_trace_ticks(void) {
#if defined(__x86_64__)
    if (atomic_load_explicit(&pardo_trace_tsc, memory_order_relaxed)) return (int64_t)__builtin_ia32_rdtsc();
#endif
    return pardo_trace_now_ns();
}

/* Starts a new trace: drops any events kept from an earlier one, names the
 * calling thread "main" unless it has a name, picks the tick clock (the TSC
 * where the kernel's clocksource is "tsc", unless $PARDO_TRACE_CLOCK is
 * "monotonic"), reads the memory limit ($PARDO_TRACE_MAX_MB, below), and
 * turns recording on. PARDO_EINVAL when a trace is already recording or
 * the limit is not a number. Not thread-safe (the controlling thread, see
 * above). */
int pardo_trace_start(pardo_status *st);

/* Turns recording off; the events are kept for pardo_trace_write. Calls
 * from now on record nothing. Not thread-safe (the controlling thread). */
void pardo_trace_stop(void);

/* Frees every buffer of the last trace (recording must be off). */
void pardo_trace_reset(void);

/* What pardo_trace_write puts in "otherData" besides the version. */
typedef struct pardo_trace_info {
    const char *graph;   // graph file, or NULL
    const char *command; // e.g. "run", or NULL
    int threads;         // the run's thread count; 0: not written
    long steps;          // steps run (block 0 runs); < 0: not written
    const char *status;  // "ok", "failed", "interrupted", or NULL
} pardo_trace_info;

/* The recorded events as a Chrome trace JSON document (NUL-terminated, in
 * a new buffer the caller frees; *len its length without the NUL). info
 * may be NULL. PARDO_ENOMEM. Not thread-safe (the controlling thread, with
 * recording stopped or no thread recording meanwhile). */
int pardo_trace_json(const pardo_trace_info *info, char **out, size_t *len, pardo_status *st);

/* Writes pardo_trace_json's document to path atomically (temporary file,
 * then rename: never a partial file at path). PARDO_EIO / PARDO_ENOMEM with
 * the path in the message. Same threading rules as pardo_trace_json. */
int pardo_trace_write(const char *path, const pardo_trace_info *info, pardo_status *st);

/* The trace file of rank `rank` of an MPI job of `ranks`: path with ".rankR" before its extension (t.json ->
 * t.rank0.json) in buf (n bytes), returned; path itself for one process (ranks 1) or no path (NULL). */
const char *pardo_trace_rank_path(const char *path, int rank, int ranks, char *buf, size_t n);

/* Buffers (one per recording thread) created since the process started:
 * a test's way to see that a run with tracing off allocated none. */
long pardo_trace_buffers_created(void);

/* Events of the current (or last) trace dropped: a buffer could not grow (out of memory), or the trace was
 * full (below). */
long pardo_trace_dropped(void);

/* A trace keeps at most this many bytes of event records in memory ($PARDO_TRACE_MAX_MB megabytes, read by
 * pardo_trace_start; default 16, which writes as about 150 MB of JSON): when the next chunk would pass it, the
 * trace is full and every later event is dropped, so a long run's trace is its first part, cut cleanly.
 * pardo_trace_full_at_s: seconds from the start to the cut, or -1 while the trace is not full. */
size_t pardo_trace_max_bytes(void);
double pardo_trace_full_at_s(void);

/* Names the calling thread in traces ("pool-1", "loader"): copied (at most
 * 47 bytes kept) into thread-local storage; no allocation, cheap, callable
 * whether or not a trace is on, from any thread. The name a thread has
 * when a trace is written is the one shown. */
void pardo_trace_set_thread_name(const char *name);

/* ---- spans of your own (the data loader, tools) ---- */

/* One argument of a span: key and a string value, or a number when str is
 * NULL. Both strings are borrowed for the call only (copied). */
typedef struct pardo_trace_arg {
    const char *key;
    const char *str; // the value, or NULL: num is
    double num;
} pardo_trace_arg;

/* Records a complete event ("ph": "X") on the calling thread: name and cat
 * (category, e.g. "loader"; NULL: "user") copied, from t0_ns to t1_ns
 * (pardo_trace_now_ns values), with n_args args (copied; at most 16 kept).
 * Does nothing when no trace is on. Thread-safe; lock-free after the
 * thread's first event. */
void pardo_trace_complete(const char *name, const char *cat, int64_t t0_ns, int64_t t1_ns, const pardo_trace_arg *args,
                          int n_args);

/* Opens a span on the calling thread now: name and cat are borrowed until
 * the matching pardo_trace_end. Spans nest (at most 32 open per thread; deeper
 * ones are not recorded). Does nothing when no trace is on. Thread-safe. */
void pardo_trace_begin(const char *name, const char *cat);

/* Closes the calling thread's innermost open span now, recording it as
 * pardo_trace_complete would, with args (copied). A begin made while the
 * trace was off has no end to match: calls balance only within one trace;
 * an end with nothing open does nothing. Thread-safe. */
void pardo_trace_end(const pardo_trace_arg *args, int n_args);

/* ---- what the executor and the parallel_do kernel record ---- */

/* One op run. Pointers are borrowed for the call; op (the program's) must
 * outlive the trace's write. Times are pardo_trace_ticks values. */
typedef struct pardo_trace_op {
    const pardo_op *op;
    int block, index;
    int64_t ready, t0, t1;   // ticks: became ready, started, ended
    pardo_tensor *const *in; // n_in inputs (NULL entries: absent)
    int n_in;
    pardo_tensor *const *out; // n_out outputs, or NULL when the op failed
    int n_out;
    const char *error; // the failure's message, or NULL
} pardo_trace_op;

/* Records an op run on the calling thread, sampling the tensor memory
 * counter (pardo_tensor_bytes_in_use) at its end. Copies shapes and dtypes. */
void pardo_trace_record_op(const pardo_trace_op *r);

/* Called by the parallel_do kernel of op (on the calling thread, inside the
 * op) before it forks n parts: returns the first of n consecutive flow ids,
 * one per part, starting now; the op's own event, recorded next on this
 * thread, carries the flow starts. 0 when no trace is on. */
uint64_t pardo_trace_flow_start(const pardo_op *op, int n);

/* One parallel_do part run, on the thread that ran it. */
typedef struct pardo_trace_part {
    const pardo_op *parallel_do; // the parallel_do op (borrowed, as pardo_trace_op.op)
    int op_block, op_index;      // its place
    int block;                   // the block the part ran
    int part, parts;             // this part, and how many
    int segment;                 // which segment of a block with all_reduce ops (0: the first, or the block)
    int64_t rows;                // rows of the part's first parts_in tensor, or -1
    uint64_t flow;               // its flow id (pardo_trace_flow_start's + part)
    int64_t t0, t1;              // ticks (pardo_trace_ticks)
    const char *error;           // or NULL
} pardo_trace_part;

/* Records a part (with the flow's end at its start). Thread-safe. */
void pardo_trace_record_part(const pardo_trace_part *r);

/* Records a stage of merges and optimizer updates run as chains on the pool
 * (src/exec/stage_plan.h): ops first..end-1 of block, in `chains` chains, from
 * tick t0 to tick t1. */
void pardo_trace_record_stage(int block, int first, int end, int chains, int64_t t0, int64_t t1);

#endif
