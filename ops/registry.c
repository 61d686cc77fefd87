/* registry.c - the op table, built from op_list.h (see op.h). */
#include <assert.h>
#include <ctype.h>
#include <stdatomic.h>
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

/* One flag per op of the table, and one for defs outside it (a test's own), set when its note was printed. */
static atomic_bool noted_cpu[N_OPS + 1];

void pardo_op_note_cpu_run(const pardo_op_def *def, const char *why) {
    if (!def) return;
    int i = 0;
    while (i < N_OPS && op_table[i] != def) i++;
    if (atomic_exchange(&noted_cpu[i], true)) return;
    fprintf(stderr, "note: op '%s' runs on the CPU in this GPU run (%s); its tensors are moved between the devices\n",
            def->type ? def->type : "?", why ? why : "no CUDA kernel");
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

/* The optimal string alignment distance between a and b (insertions,
 * deletions, substitutions and swaps of neighbours count one; case is
 * ignored); both at most NEAR_MAX letters. */
enum { NEAR_MAX = 64 };

static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    int d[NEAR_MAX + 1][NEAR_MAX + 1];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

char *pardo_op_nearest(const char *type, char *buf, size_t n) {
    if (n) buf[0] = '\0';
    size_t len = type ? strlen(type) : 0;
    if (len == 0 || len > NEAR_MAX || n == 0) return buf;
    int dist[N_OPS], best = NEAR_MAX + 1;
    for (int i = 0; i < N_OPS; i++) {
        dist[i] = strlen(op_table[i]->type) <= NEAR_MAX ? edit_distance(type, op_table[i]->type) : NEAR_MAX + 1;
        if (dist[i] < best) best = dist[i];
    }
    const int limit = (int)(len + 2) / 3; /* at most a third of the name's letters change (rounded up) */
    if (best > limit) return buf;
    size_t used = 0;
    for (int i = 0, shown = 0; i < N_OPS && shown < 3 && used < n; i++) {
        if (dist[i] != best) continue;
        int w = snprintf(buf + used, n - used, "%s%s", shown ? " or " : "", op_table[i]->type);
        if (w < 0) break;
        used += (size_t)w;
        shown++;
    }
    return buf;
}
