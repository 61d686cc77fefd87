/* registry.c - the op table, built from op_list.h (see op.h). */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "op.h"
#include "op_list.h"

#define PARDO_OP_EXTERN(c) extern const pardo_op_def pardo_op_##c;
PARDO_OP_LIST(PARDO_OP_EXTERN)
#undef PARDO_OP_EXTERN

#define PARDO_OP_ENTRY(c) &pardo_op_##c,
static const pardo_op_def *const op_table[] = {PARDO_OP_LIST(PARDO_OP_ENTRY)};
#undef PARDO_OP_ENTRY

#define PARDO_OP_ONE(c) +1
enum { N_OPS = 0 PARDO_OP_LIST(PARDO_OP_ONE) };
#undef PARDO_OP_ONE
static_assert(sizeof(op_table) / sizeof(op_table[0]) == N_OPS, "op table and op list disagree");

const pardo_op_def *pardo_op_lookup(const char *type) {
    if (!type) return NULL;
    for (int i = 0; i < N_OPS; i++)
        if (strcmp(op_table[i]->type, type) == 0) return op_table[i];
    return NULL;
}

int pardo_op_count(void) { return N_OPS; }

const pardo_op_def *pardo_op_at(int i) { return (i >= 0 && i < N_OPS) ? op_table[i] : NULL; }

int pardo_registry_check(pardo_status *st) {
    for (int i = 0; i < N_OPS; i++) {
        const pardo_op_def *d = op_table[i];
        if (!d->type || !d->infer || !d->cpu)
            return pardo_errorf(st, PARDO_EINVAL, "op registry: entry %d (%s) lacks a type, infer or cpu kernel", i,
                                d->type ? d->type : "?");
        for (int j = 0; j < i; j++)
            if (strcmp(op_table[j]->type, d->type) == 0)
                return pardo_errorf(st, PARDO_EINVAL, "op registry: op '%s' is registered twice", d->type);
    }
    return PARDO_OK;
}

char *pardo_op_known_list(char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = '\0';
    for (int i = 0; i < N_OPS && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? ", " : "", op_table[i]->type);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}
