/* scope.h - name -> tensor bindings for one run of a block, with a parent
 * scope for the enclosing block (SPEC: a block sees its own vars and those of
 * its ancestors). A scope owns one reference to each tensor it binds. Not
 * thread-safe for writes; concurrent reads of a scope nobody writes are fine
 * (parallel_do parts read the parent scope while writing their own). */
#ifndef PARDO_SCOPE_H
#define PARDO_SCOPE_H

#include <stddef.h>

#include "core/status.h"
#include "core/tensor.h"

typedef struct pardo_scope pardo_scope;

/* A new empty scope whose lookups fall back to `parent` (borrowed; may be
 * NULL; must outlive the child). NULL when out of memory. Freed with
 * pardo_scope_free. */
pardo_scope *pardo_scope_new(pardo_scope *parent);

/* Releases every bound tensor and frees the scope. NULL is a no-op. */
void pardo_scope_free(pardo_scope *s);

/* The parent given at creation (NULL for a root). */
pardo_scope *pardo_scope_parent(const pardo_scope *s);

/* The tensor bound to name here or in an ancestor, or NULL. Borrowed. */
pardo_tensor *pardo_scope_find(const pardo_scope *s, const char *name);

/* The tensor bound to name in this scope only, or NULL. Borrowed. */
pardo_tensor *pardo_scope_find_local(const pardo_scope *s, const char *name);

/* Binds name in this scope to t, retaining t (the caller keeps its own
 * reference) and releasing what the name held before. PARDO_ENOMEM on failure. */
int pardo_scope_set(pardo_scope *s, const char *name, pardo_tensor *t, pardo_status *st);

/* As pardo_scope_set but takes over the caller's reference to t (no retain). */
int pardo_scope_set_move(pardo_scope *s, const char *name, pardo_tensor *t, pardo_status *st);

/* Unbinds name in this scope and hands its reference to the caller (who
 * releases it); NULL when the name is not bound here. The name stays
 * reserved in this scope (lookups find nothing rather than the parent's)
 * until pardo_scope_set binds it again: O(1), for the executor's hot path. */
pardo_tensor *pardo_scope_take(pardo_scope *s, const char *name);

/* Entry handles, for a caller that reads and writes the same names over and
 * over (the executor, for block 0's ops in the root scope): resolve a name
 * once, then get, take and bind by its entry with no hashing. An entry
 * index stays valid for the scope's life (names are never removed). */

/* This scope's entry for name, or -1 when the name has none here. */
int pardo_scope_entry(const pardo_scope *s, const char *name);

/* As pardo_scope_entry, but adds an unbound entry for a new name (lookups
 * then find nothing there until it is bound). -1 with PARDO_ENOMEM in st. */
int pardo_scope_reserve(pardo_scope *s, const char *name, pardo_status *st);

/* The tensor bound at entry e (borrowed), or NULL when unbound or taken. */
pardo_tensor *pardo_scope_entry_get(const pardo_scope *s, int e);

/* pardo_scope_take and pardo_scope_set_move by entry. */
pardo_tensor *pardo_scope_entry_take(pardo_scope *s, int e);
void pardo_scope_entry_set_move(pardo_scope *s, int e, pardo_tensor *t);

/* Number of names bound in this scope, and the i-th (name and tensor,
 * borrowed) in insertion order; taken names are skipped. pardo_scope_at
 * returns PARDO_ENOTFOUND past the end. */
int pardo_scope_size(const pardo_scope *s);
int pardo_scope_at(const pardo_scope *s, int i, const char **name, pardo_tensor **t);

#endif
