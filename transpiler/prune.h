/* prune.h - cuts block 0 of a program down to the ops the fetched vars
 * need (`pardo run`), so that a feed nobody needs may be left out. Roles
 * only: no op type is named but parallel_do, whose part block is cut to the
 * parts_out entries block 0 still needs. */
#ifndef PARDO_PRUNE_H
#define PARDO_PRUNE_H

#include <stdbool.h>

#include "core/graph.h"
#include "core/status.h"

/* Makes *out: a copy of checked program p (its declared vars) without the
 * ops of block 0 that no fetched var
 * depends on (transitively, through what each kept op reads; a parallel_do
 * reads what its `in` list names). Roots: the ops that write a name in
 * fetch[0..n_fetch) (borrowed) and, when keep_updates, every op of
 * effective role optimize; without keep_updates, unless an op of role
 * backward or optimize of block 0 writes a fetched var (a gradient, an
 * updated param: then as with keep_updates), the ops of role backward and
 * optimize are dropped first (the eval program).
 * n_fetch 0 with keep_updates copies every op; n_fetch 0 without it
 * keeps every forward and loss op. A kept parallel_do's block is cut to
 * the ops its still-needed parts_out entries depend on, and its in/out
 * lists, parts_in and parts_out to what those ops read and write. Feed
 * vars no kept op reads are left out of the copy. Then the copy is checked (validate, infer shapes). PARDO_ENOMEM, or the check's
 * error prefixed with what was cut. p is borrowed and unchanged; *out is
 * freed with pardo_program_free. */
int pardo_pass_prune(const pardo_program *p, const char *const *fetch, int n_fetch, bool keep_updates,
                     pardo_program **out, pardo_status *st);

#endif
