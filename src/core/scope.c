/* scope.c - name -> tensor bindings: an open-addressing hash over an
 * insertion-ordered entry array (see scope.h). */
#include "core/scope.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char *name;          // owned
    pardo_tensor *t;     // one reference owned; NULL while taken (pardo_scope_take)
    uint64_t hash;
} entry;

struct pardo_scope {
    pardo_scope *parent; // borrowed
    entry *entries;      // insertion order
    int n_entries, cap_entries;
    int *slots;          // hash slots: index into entries, -1 empty
    int n_slots;         // power of two
    atomic_int live;     // bound names (atomic: the executor's parallel stages take and bind distinct names at once)
};

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

pardo_scope *pardo_scope_new(pardo_scope *parent) {
    pardo_scope *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->parent = parent;
    return s;
}

void pardo_scope_free(pardo_scope *s) {
    if (!s) return;
    for (int i = 0; i < s->n_entries; i++) {
        free(s->entries[i].name);
        pardo_tensor_release(s->entries[i].t);
    }
    free(s->entries);
    free(s->slots);
    free(s);
}

pardo_scope *pardo_scope_parent(const pardo_scope *s) { return s->parent; }

static int find_slot(const pardo_scope *s, const char *name, uint64_t h) {
    if (!s->n_slots) return -1;
    for (int i = (int)(h & (uint64_t)(s->n_slots - 1)), probes = 0; probes < s->n_slots;
         i = (i + 1) & (s->n_slots - 1), probes++) {
        int e = s->slots[i];
        if (e < 0) return -1;
        if (s->entries[e].hash == h && strcmp(s->entries[e].name, name) == 0) return i;
    }
    return -1;
}

static int rehash(pardo_scope *s, int n_slots) {
    int *slots = malloc((size_t)n_slots * sizeof(*slots));
    if (!slots) return PARDO_ENOMEM;
    for (int i = 0; i < n_slots; i++) slots[i] = -1;
    for (int r = 0; r < s->n_entries; r++) {
        int i = (int)(s->entries[r].hash & (uint64_t)(n_slots - 1));
        while (slots[i] >= 0) i = (i + 1) & (n_slots - 1);
        slots[i] = r;
    }
    free(s->slots);
    s->slots = slots;
    s->n_slots = n_slots;
    return PARDO_OK;
}

pardo_tensor *pardo_scope_find_local(const pardo_scope *s, const char *name) {
    int i = find_slot(s, name, hash_name(name));
    return i < 0 ? NULL : s->entries[s->slots[i]].t;
}

pardo_tensor *pardo_scope_find(const pardo_scope *s, const char *name) {
    uint64_t h = hash_name(name);
    for (; s; s = s->parent) {
        int i = find_slot(s, name, h);
        if (i >= 0) return s->entries[s->slots[i]].t;
    }
    return NULL;
}

/* Appends an entry for name (hash h) bound to t (may be NULL: reserved);
 * its index, or -1 when out of memory. */
static int add_entry(pardo_scope *s, const char *name, uint64_t h, pardo_tensor *t) {
    if ((s->n_entries + 1) * 2 > s->n_slots) {
        int n = s->n_slots ? s->n_slots * 2 : 16;
        if (rehash(s, n) != PARDO_OK) return -1;
    }
    if (s->n_entries == s->cap_entries) {
        int cap = s->cap_entries ? s->cap_entries * 2 : 16;
        entry *e = realloc(s->entries, (size_t)cap * sizeof(*e));
        if (!e) return -1;
        s->entries = e;
        s->cap_entries = cap;
    }
    char *copy = strdup(name);
    if (!copy) return -1;
    s->entries[s->n_entries] = (entry){copy, t, h};
    int k = (int)(h & (uint64_t)(s->n_slots - 1));
    while (s->slots[k] >= 0) k = (k + 1) & (s->n_slots - 1);
    s->slots[k] = s->n_entries;
    if (t) s->live++;
    return s->n_entries++;
}

void pardo_scope_entry_set_move(pardo_scope *s, int i, pardo_tensor *t) {
    entry *e = &s->entries[i];
    if (!e->t && t) s->live++;
    else if (e->t && !t) s->live--;
    if (e->t != t) pardo_tensor_release(e->t);
    else pardo_tensor_release(t); /* same tensor: keep one reference */
    e->t = t;
}

int pardo_scope_set_move(pardo_scope *s, const char *name, pardo_tensor *t, pardo_status *st) {
    uint64_t h = hash_name(name);
    int i = find_slot(s, name, h);
    if (i >= 0) {
        pardo_scope_entry_set_move(s, s->slots[i], t);
        return PARDO_OK;
    }
    if (add_entry(s, name, h, t) >= 0) return PARDO_OK;
    pardo_tensor_release(t);
    return pardo_errorf(st, PARDO_ENOMEM, "out of memory binding var '%s'", name);
}

int pardo_scope_entry(const pardo_scope *s, const char *name) {
    int i = find_slot(s, name, hash_name(name));
    return i < 0 ? -1 : s->slots[i];
}

int pardo_scope_reserve(pardo_scope *s, const char *name, pardo_status *st) {
    uint64_t h = hash_name(name);
    int i = find_slot(s, name, h);
    if (i >= 0) return s->slots[i];
    int e = add_entry(s, name, h, NULL);
    if (e < 0) pardo_errorf(st, PARDO_ENOMEM, "out of memory binding var '%s'", name);
    return e;
}

pardo_tensor *pardo_scope_entry_get(const pardo_scope *s, int e) { return s->entries[e].t; }

pardo_tensor *pardo_scope_entry_take(pardo_scope *s, int i) {
    entry *e = &s->entries[i];
    pardo_tensor *t = e->t;
    if (t) s->live--;
    e->t = NULL; /* the name stays reserved here, so lookups do not fall through to the parent */
    return t;
}

int pardo_scope_set(pardo_scope *s, const char *name, pardo_tensor *t, pardo_status *st) {
    return pardo_scope_set_move(s, name, pardo_tensor_retain(t), st);
}

pardo_tensor *pardo_scope_take(pardo_scope *s, const char *name) {
    int i = find_slot(s, name, hash_name(name));
    return i < 0 ? NULL : pardo_scope_entry_take(s, s->slots[i]);
}

int pardo_scope_size(const pardo_scope *s) { return atomic_load(&s->live); }

int pardo_scope_at(const pardo_scope *s, int i, const char **name, pardo_tensor **t) {
    for (int r = 0, k = 0; r < s->n_entries; r++) {
        if (!s->entries[r].t) continue;
        if (k++ == i) {
            *name = s->entries[r].name;
            *t = s->entries[r].t;
            return PARDO_OK;
        }
    }
    return PARDO_ENOTFOUND;
}
