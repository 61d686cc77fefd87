/* name_index.h - a string -> int hash table (open addressing, linear
 * probing, FNV-1a) for the graph's name lookups: a block's vars
 * (graph.c), and the passes' "which op writes (reads) var X" maps, so that
 * loading, checking and transpiling a graph is linear in its size. Keys are
 * borrowed: the caller keeps each key's string alive and unchanged while it
 * is in the index. Values are ints >= 0. No removal (clear and refill).
 * An index is not locked: a thread may read it while no thread changes it. */
#ifndef PARDO_NAME_INDEX_H
#define PARDO_NAME_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct pardo_name_slot {
    const char *key; // borrowed; NULL: empty slot
    uint32_t hash;   // FNV-1a of key
    int value;
} pardo_name_slot;

typedef struct pardo_name_index {
    pardo_name_slot *slots; // cap slots, owned; NULL while empty
    size_t cap;             // 0 or a power of two
    size_t n;               // keys held
} pardo_name_index;

/* An empty index (all zero, as `= {0}` makes it too); allocates nothing. */
void pardo_name_index_init(pardo_name_index *ix);

/* Frees the slots and empties ix; ix itself stays (init state). */
void pardo_name_index_free(pardo_name_index *ix);

/* Forgets every key but keeps the slots for refilling. */
void pardo_name_index_clear(pardo_name_index *ix);

/* Makes room for n keys in all without growing again; PARDO_ENOMEM with st
 * filled when out of memory (ix unchanged). */
int pardo_name_index_reserve(pardo_name_index *ix, size_t n, pardo_status *st);

/* The 32-bit FNV-1a hash of s. */
uint32_t pardo_name_hash(const char *s);

/* The value of key, or -1 when ix does not hold it. Allocates nothing. */
int pardo_name_index_get(const pardo_name_index *ix, const char *key);

/* Sets key (borrowed) to value (>= 0), replacing the value a key equal to it
 * had (the first key's pointer stays). PARDO_ENOMEM with st filled when the
 * index must grow and cannot (ix unchanged). */
int pardo_name_index_set(pardo_name_index *ix, const char *key, int value, pardo_status *st);

/* Like set, but keeps the value of a key already held: the first value
 * added wins. *held (may be NULL) gets the value ix holds afterwards. */
int pardo_name_index_add(pardo_name_index *ix, const char *key, int value, int *held, pardo_status *st);

#endif
