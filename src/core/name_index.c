/* name_index.c - the string -> int hash table of name_index.h. */
#include "core/name_index.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void pardo_name_index_init(pardo_name_index *ix) { memset(ix, 0, sizeof(*ix)); }

void pardo_name_index_free(pardo_name_index *ix) {
    free(ix->slots);
    pardo_name_index_init(ix);
}

void pardo_name_index_clear(pardo_name_index *ix) {
    if (ix->slots) memset(ix->slots, 0, ix->cap * sizeof(*ix->slots));
    ix->n = 0;
}

uint32_t pardo_name_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) h = (h ^ *c) * 16777619u;
    return h;
}

/* The slot holding key, or the empty slot where it would go. cap > 0. */
static pardo_name_slot *probe(pardo_name_slot *slots, size_t cap, const char *key, uint32_t h) {
    size_t mask = cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        pardo_name_slot *s = &slots[i];
        if (!s->key || (s->hash == h && (s->key == key || strcmp(s->key, key) == 0))) return s;
    }
}

/* Slots kept at most 3/4 full: room for n keys needs cap >= n * 4 / 3. */
static bool fits(size_t cap, size_t n) { return n <= cap / 4 * 3; }

int pardo_name_index_reserve(pardo_name_index *ix, size_t n, pardo_status *st) {
    if (fits(ix->cap, n)) return PARDO_OK;
    size_t cap = ix->cap ? ix->cap : 16;
    while (!fits(cap, n)) {
        if (cap > SIZE_MAX / 2 / sizeof(*ix->slots)) return pardo_errorf(st, PARDO_ENOMEM, "name index: too many names");
        cap *= 2;
    }
    pardo_name_slot *slots = calloc(cap, sizeof(*slots));
    if (!slots) return pardo_errorf(st, PARDO_ENOMEM, "out of memory growing a name index to %zu slots", cap);
    for (size_t i = 0; i < ix->cap; i++)
        if (ix->slots[i].key) *probe(slots, cap, ix->slots[i].key, ix->slots[i].hash) = ix->slots[i];
    free(ix->slots);
    ix->slots = slots;
    ix->cap = cap;
    return PARDO_OK;
}

int pardo_name_index_get(const pardo_name_index *ix, const char *key) {
    if (ix->n == 0) return -1;
    const pardo_name_slot *s = probe(ix->slots, ix->cap, key, pardo_name_hash(key));
    return s->key ? s->value : -1;
}

static int put(pardo_name_index *ix, const char *key, int value, bool replace, int *held, pardo_status *st) {
    uint32_t h = pardo_name_hash(key);
    pardo_name_slot *s = ix->cap ? probe(ix->slots, ix->cap, key, h) : NULL;
    if (!s || !s->key) {
        int rc = pardo_name_index_reserve(ix, ix->n + 1, st);
        if (rc != PARDO_OK) return rc;
        s = probe(ix->slots, ix->cap, key, h);
        s->key = key;
        s->hash = h;
        s->value = value;
        ix->n++;
    } else if (replace) {
        s->value = value;
    }
    if (held) *held = s->value;
    return PARDO_OK;
}

int pardo_name_index_set(pardo_name_index *ix, const char *key, int value, pardo_status *st) {
    return put(ix, key, value, true, NULL, st);
}

int pardo_name_index_add(pardo_name_index *ix, const char *key, int value, int *held, pardo_status *st) {
    return put(ix, key, value, false, held, st);
}
