/* trace_internal.h - what the trace's recording (trace.c) and its JSON
 * writer (trace_write.c) share; not public (trace.h is). The records a
 * thread appends to its buffer, the buffers and their chunks, the tick
 * clock's calibration, and the few calls the writer makes into the
 * recording's state. Types and inline helpers keep their short names:
 * nothing else includes this header; what links across the two files is
 * named pardo_trace_*. */
#ifndef PARDO_TRACE_INTERNAL_H
#define PARDO_TRACE_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"

#define NAME_MAX_LEN 48 // bytes of a thread name, NUL included

enum { REC_OP = 1, REC_FLOW, REC_PART, REC_STAGE, REC_USER, REC_MEM };
enum { F_ERROR = 1, F_LONG = 2 }; /* rec_op flags: an error string follows; 64-bit times follow */

typedef struct rec_hdr {
    uint8_t kind;
    uint8_t flags;
    uint16_t pad;
    uint32_t size; // bytes of the whole record, a multiple of 8
} rec_hdr;

/* One tensor of a shapes block: ndim dims follow. */
typedef struct rec_tensor {
    int8_t dtype; // pardo_dtype, or -1 when absent
    int8_t ndim;  // dims that follow (a tensor_array: its first part's), -1: none known
    int16_t pad;
    int32_t parts;  // tensor_array: its parts; -1: a plain tensor
    int64_t nbytes; // bytes of data (a tensor_array: of all its parts)
    int64_t dims[];
} rec_tensor;

/* The inputs and outputs of an op run: n_in + max(n_out, 0) rec_tensors follow. */
typedef struct rec_shapes {
    int16_t n_in, n_out; // n_out -1: the op failed (no outputs)
    uint32_t size;       // bytes of the block, this header included
} rec_shapes;

/* An op run: 48 bytes in the steady state, where its shapes are those of
 * the op's last run on this thread and `shapes` points there. */
typedef struct rec_op {
    rec_hdr h;
    const pardo_op *op;       // borrowed from the program
    int64_t t0;               // ns
    uint32_t dur, queued;     // ns; with F_LONG both saturate and int64 copies follow the record head
    const rec_shapes *shapes; // in this record (after the head) or in an earlier one of this thread
    int32_t block, index;
} rec_op;

/* Flows a parallel_do started: attached to the op's event at write time. */
typedef struct rec_flow {
    rec_hdr h;
    const pardo_op *op;
    uint64_t first; // flow ids first .. first + n - 1
    int64_t ts;     // ns
    int32_t n, pad;
} rec_flow;

typedef struct rec_part {
    rec_hdr h;
    const pardo_op *pd;
    int32_t op_block, op_index, block, part, parts, err_len, segment, pad;
    int64_t rows;
    uint64_t flow;
    int64_t t0, t1;
} rec_part;

typedef struct rec_stage {
    rec_hdr h;
    int32_t block, first, end, chains;
    int64_t t0, t1;
} rec_stage;

/* name, cat, then n_args (key, value) pairs as NUL-terminated strings follow;
 * a number's value is stored as a string already ("%.17g"). */
typedef struct rec_user {
    rec_hdr h;
    int64_t t0, t1;
    int32_t n_args;
    uint32_t str_mask; // bit i: arg i is a string (else a number)
} rec_user;

/* The tensor memory counter, when it changed since this thread's last sample. */
typedef struct rec_mem {
    rec_hdr h;
    int64_t t;     // ns
    int64_t bytes; // pardo_tensor_bytes_in_use
} rec_mem;

/* A piece of a thread's buffer, mmap'd: records appended at data + used. */
typedef struct chunk {
    struct chunk *next;
    size_t used, cap; // bytes of data
    size_t map;       // bytes mapped, this header included
    _Alignas(8) unsigned char data[];
} chunk;

/* One thread's buffer in one trace: its chunks in order, appended to by that thread alone. */
typedef struct trace_buf {
    struct trace_buf *next; // global list, in registration order
    int order;              // registration order in this trace, from 0
    long tid;               // kernel thread id
    bool main;              // the thread that started the trace
    char name[NAME_MAX_LEN];
    chunk *head, *tail;
    uint32_t flows; // flow ids made so far by this thread
    int64_t mem;    // the last memory sample this thread recorded, -1: none
} trace_buf;

/* Bytes of a rec_tensor of ndim dims (none below 0). */
static inline size_t tensor_rec_size(int ndim) {
    return sizeof(rec_tensor) + (size_t)(ndim > 0 ? ndim : 0) * sizeof(int64_t);
}

/* The trace's tick clock against CLOCK_MONOTONIC: set by pardo_trace_start (start_ns, start_tick; tick_ns 1),
 * calibrated by pardo_trace_calibrate; read by the writer, which the controlling thread runs after them. */
typedef struct trace_clock {
    int64_t start_ns;   // the trace's t = 0, CLOCK_MONOTONIC ns
    int64_t start_tick; // pardo_trace_ticks at start_ns
    double tick_ns;     // ns per tick, calibrated when the trace is written
} trace_clock;
extern trace_clock pardo_trace_clock;

/* A tick as CLOCK_MONOTONIC ns, and a tick count as ns. */
static inline int64_t ns_at(int64_t tick) {
    return pardo_trace_clock.start_ns +
           llround((double)(tick - pardo_trace_clock.start_tick) * pardo_trace_clock.tick_ns);
}
static inline int64_t ns_of(int64_t ticks) { return llround((double)ticks * pardo_trace_clock.tick_ns); }

/* ---- trace.c, for the writer (the controlling thread; see trace.h's life cycle) ---- */

/* Fixes pardo_trace_clock.tick_ns from the ticks and ns elapsed since the start (the tick clock against
 * CLOCK_MONOTONIC); 1 where the ticks are CLOCK_MONOTONIC ns. */
void pardo_trace_calibrate(void);

/* Locks the list of the trace's buffers (no thread registers one meanwhile) and returns its first, the rest
 * along ->next in registration order (NULL: none). The buffers stay the recording's: read them until
 * pardo_trace_bufs_unlock. */
const trace_buf *pardo_trace_bufs_lock(void);
void pardo_trace_bufs_unlock(void);

/* True once the trace is full (its memory limit reached: later events were dropped), with *tick the
 * pardo_trace_ticks value when it became full. */
bool pardo_trace_full_tick(int64_t *tick);

#endif
