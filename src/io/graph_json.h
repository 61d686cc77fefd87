/* graph_json.h - graph files (SPEC.md section 1) to the Program IR and back.
 * Loading checks the file format: keys, JSON types, dtypes, shapes, roles,
 * inits, values, block parents. It does not check op types, arity or shapes;
 * a later pass does. Every error is PARDO_EPARSE with a message
 * "PATH:LINE:COL: block B, var 'v': what was found, what was expected". */
#ifndef PARDO_GRAPH_JSON_H
#define PARDO_GRAPH_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "core/graph.h"
#include "core/status.h"

/* Reads the graph file at `path` and parses it as pardo_graph_parse does.
 * A file that cannot be read is PARDO_EIO naming path and the system's
 * reason; a file over 1 GiB is PARDO_EIO too. On success *out is a new
 * program the caller frees with pardo_program_free; on error *out is NULL.
 * Thread-safe, but for cJSON 1.7 writing a global error record when a parse
 * fails (pardo never reads it; TSan may flag concurrent failing loads). */
int pardo_graph_load(const char *path, pardo_program **out, pardo_status *st);

/* Parses graph-file text (len bytes; text need not end in NUL) into a new
 * program (*out, caller frees with pardo_program_free; NULL on error).
 * `path` (may be NULL: messages then say "<input>") is copied into
 * program->path and starts every message. Errors, all PARDO_EPARSE:
 *   "PATH: empty file" for text that is empty or only whitespace;
 *   "PATH:L:C: invalid JSON: ..." for a NUL byte in the text, a syntax error
 *   (L:C where cJSON stopped), or text after the top-level value;
 *   "PATH:L:C: WHERE: ..." for a file that is JSON but not a graph file,
 *   L:C being the offending value (or member name, for unknown and duplicate
 *   keys; or the object, for missing keys).
 * Declared vars get declared = true. Vars, ops, blocks and every attrs and
 * doc value get the line and column where they start (a var: its name).
 * PARDO_ENOMEM when out of memory, PARDO_EINVAL for NULL text or out. */
int pardo_graph_parse(const char *text, size_t len, const char *path, pardo_program **out, pardo_status *st);

/* The program as graph-file text: 2-space indents, one var and one op a
 * line, keys in a fixed order (pardo, name, doc, blocks; parent, vars, ops;
 * dtype, shape, kind, role, init, value; op, in, out, attrs, name, role),
 * numbers written so they read back to the same double (integral ones as
 * integers, -0 as -0, infinities as 1e999; a bool var's 0/1 values as
 * false/true). Only declared vars are written; kind, role, init (with just
 * the fields its fill uses, and seed when not 0), value, attrs, op name and
 * op role only when present or not the default. Returns a new
 * NUL-terminated string the caller frees with free(), or NULL with st filled:
 * PARDO_EINVAL for what JSON cannot hold (a NaN; a declared var of unknown
 * dtype or rank), PARDO_ENOMEM. Borrows p. Thread-safe. */
char *pardo_graph_to_json(const pardo_program *p, pardo_status *st);

/* Writes pardo_graph_to_json's text to `path` with pardo_file_write_atomic
 * (file_io.h): path is either its old self or the whole new file, never a
 * partial one; a FIFO or device at path is written through. Errors: those
 * of pardo_graph_to_json; PARDO_EIO naming the file and the system's reason
 * (nothing left behind). Borrows p. Thread-safe. */
int pardo_graph_save(const pardo_program *p, const char *path, pardo_status *st);

/* True when a and b hold the same program: version, name, doc, and block by
 * block the parent, every var (declared or not: name, dtype, shape, kind,
 * role, the init fields its fill uses and seed, value elements exactly, with
 * NaN equal to NaN and -0 unequal to 0) and every op (type, name, inputs,
 * outputs, attrs, role), in order. pardo_value_equal compares attrs and doc
 * (numbers by ==, object members whatever their order).
 * Positions, path and resolved op defs are not compared. So
 * load(save(load(f))) equals load(f). Either may be NULL (equal only to
 * NULL). Borrows both. Thread-safe. */
bool pardo_program_equal(const pardo_program *a, const pardo_program *b);

#endif
