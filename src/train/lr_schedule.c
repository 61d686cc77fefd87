/* lr_schedule.c - warm-up and schedules of the learning rate (see lr_schedule.h). */
#include "train/lr_schedule.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

#define SCHEDULE_FORMS "constant, step:EVERY:GAMMA (EVERY steps >= 1, GAMMA > 0), cosine or linear"

bool pardo_lr_schedule_parse(const char *text, pardo_lr_schedule *s, char *err, size_t n) {
    memset(s, 0, sizeof(*s));
    if (strcmp(text, "constant") == 0) return true;
    if (strcmp(text, "cosine") == 0) {
        s->kind = PARDO_LR_COSINE;
        return true;
    }
    if (strcmp(text, "linear") == 0) {
        s->kind = PARDO_LR_LINEAR;
        return true;
    }
    if (strncmp(text, "step:", 5) == 0) {
        char *end = NULL;
        errno = 0;
        long long every = strtoll(text + 5, &end, 10);
        if (!errno && end != text + 5 && *end == ':' && every >= 1) {
            const char *g = end + 1;
            double gamma = strtod(g, &end);
            if (!errno && end != g && *end == '\0' && gamma > 0 && isfinite(gamma)) {
                s->kind = PARDO_LR_STEP;
                s->every = every;
                s->gamma = gamma;
                return true;
            }
        }
    }
    snprintf(err, n, "expects " SCHEDULE_FORMS ", got '%s'", text);
    return false;
}

double pardo_lr_factor(const pardo_lr_schedule *s, int64_t step, int64_t total) {
    if (step < s->warmup) return (double)step / (double)s->warmup;
    const int64_t u = step - s->warmup, r = total - s->warmup > 1 ? total - s->warmup : 1;
    const double at = (double)(u < r ? u : r) / (double)r;
    switch (s->kind) {
    case PARDO_LR_STEP: return pow(s->gamma, (double)(u / s->every));
    case PARDO_LR_COSINE: return (1 + cos(M_PI * at)) / 2;
    case PARDO_LR_LINEAR: return 1 - at;
    case PARDO_LR_CONSTANT: break;
    }
    return 1;
}

int pardo_lr_vars(const pardo_program *p, const char **names, int max) {
    int n = 0;
    const pardo_block *b0 = &p->blocks[0];
    for (int i = 0; i < b0->n_ops; i++) {
        const pardo_op *op = &b0->ops[i];
        if (!op->def || pardo_op_effective_role(p, 0, op) != PARDO_OP_OPTIMIZE) continue;
        for (int k = 0; k < op->n_in && k < op->def->n_inputs; k++) {
            if (strcmp(op->def->inputs[k].name, "lr") != 0 || !op->in[k][0]) continue;
            bool seen = false;
            for (int j = 0; j < n && !seen; j++) seen = strcmp(names[j], op->in[k]) == 0;
            if (!seen && n < max) names[n++] = op->in[k];
        }
    }
    return n;
}

bool pardo_lr_declared(const pardo_program *p, const char *name, double *out) {
    const pardo_graph_var *v = pardo_block_find_var(&p->blocks[0], name);
    if (!v) return false;
    if (v->value && v->n_value == 1) {
        *out = v->value[0];
        return true;
    }
    if (v->init.fill == PARDO_FILL_CONSTANT) {
        *out = v->init.value;
        return true;
    }
    return false;
}
