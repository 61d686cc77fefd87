/* csv.h - CSV files of numbers for feeds, training data and fetches (SPEC
 * section 4): one row a line, fields comma-separated; the shape comes from
 * the var the file is for, with -1 the row count. Also the dtype casts a
 * feed file may need to fit its var (`pardo run --feed`, `pardo train
 * --data/--eval`), for .npy and CSV alike. */
#ifndef PARDO_CSV_H
#define PARDO_CSV_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "core/tensor.h"

/* Parses n bytes of CSV text (borrowed; `name` names it in messages) into
 * a new tensor of ty's dtype (*out, caller releases). Rows: one a line
 * (LF or CRLF); blank lines only at the end. Each row has the same number
 * of fields, the product of ty's dims after the first (1 for rank 0 or 1);
 * the tensor's shape is ty's with dim 0 the row count (a rank-0 ty takes
 * exactly one row of one field). A fixed dim 0 must equal the row count.
 * A first line none of whose fields is a number is a header, skipped.
 * Fields: decimal numbers with optional spaces around them (floats as
 * strtod reads them, nan and inf too; integers in the dtype's range; bool 0
 * or 1, true or false). Errors: PARDO_EPARSE "NAME: line L, column C: ..."
 * naming the field and what was expected, PARDO_ESHAPE for a field count
 * or row count the var's shape refuses, PARDO_EINVAL for a ty with a -1
 * past dim 0 or an unknown rank. Thread-safe. */
int pardo_csv_parse(const char *buf, size_t n, const char *name, const pardo_type *ty, pardo_tensor **out,
                    pardo_status *st);

/* Reads the file at path (a regular file is mapped; a pipe is read, and a
 * NUL byte refuses it at once: /dev/zero is not read) and parses it as
 * pardo_csv_parse does, messages beginning with the path. */
int pardo_csv_read(const char *path, const pardo_type *ty, pardo_tensor **out, pardo_status *st);

/* Writes t (on the host; a tensor, not a tensor_array) to path as CSV: one
 * line per index of the first dim (one line for a scalar), the rest
 * flattened row-major, comma-separated; float32 as %.9g, float64 as %.17g
 * (both read back to the same bits), integers as they are, bool as 0/1.
 * Atomic as pardo_file_write_atomic. PARDO_ENOMEM, PARDO_EIO. */
int pardo_csv_write(const char *path, const pardo_tensor *t, pardo_status *st);

/* True when path ends in ".csv" (any case): the file is read as CSV. */
bool pardo_csv_is_csv_path(const char *path);

/* The dtype cast a feed file of dtype `from` gets to fit a var of dtype
 * `to`: 1 a cast to make (float64 -> float32, float32 -> float64, int32 ->
 * int64, int64 -> int32 when every value fits, checked by pardo_feed_cast),
 * 0 none needed (the same dtype), -1 refused (float <-> int, bool <->
 * number). */
int pardo_feed_cast_kind(pardo_dtype from, pardo_dtype to);

/* *out = t cast to dtype `to` (a new tensor, caller releases; t borrowed,
 * on the host), or t itself retained when the dtypes agree. A refused cast,
 * or an int64 value outside int32, is PARDO_EINVAL: "SOURCE: the file is
 * DTYPE SHAPE (its own), the var 'NAME' is DTYPE: ..." naming what was
 * refused. A made cast prints one note on stderr ("pardo: note: SOURCE:
 * DTYPE cast to DTYPE for 'NAME'"). */
int pardo_feed_cast(const pardo_tensor *t, pardo_dtype to, const char *source, const char *name, pardo_tensor **out,
                    pardo_status *st);

#endif
