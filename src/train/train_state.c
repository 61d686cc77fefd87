/* train_state.c - the counters of `pardo train` in a checkpoint (see train_state.h). */
#include "train/train_state.h"

#include <math.h>
#include <string.h>

/* F_EPOCH .. F_ROWS every training checkpoint has; the rest came later
 * (early stopping, training accuracy): all or none of them, none in a
 * checkpoint of an older pardo, which then starts them afresh. */
enum {
    F_EPOCH, F_BATCH, F_STEP, F_BATCH_SIZE, F_SHUFFLE, F_SEED, F_LOSS_SUM, F_ROWS, F_REQUIRED,
    F_METRIC_SUM = F_REQUIRED, F_BEST_EVAL_LOSS, F_BEST_EPOCH, F_BAD_EPOCHS, F_COUNT
};

static const struct {
    const char *name;
    pardo_dtype dtype;
} fields[F_COUNT] = {
    {"pardo@epoch", PARDO_I64},      {"pardo@batch", PARDO_I64},   {"pardo@step", PARDO_I64},
    {"pardo@batch_size", PARDO_I64}, {"pardo@shuffle", PARDO_I64}, {"pardo@seed", PARDO_I64},
    {"pardo@loss_sum", PARDO_F64},   {"pardo@rows", PARDO_I64},
    {"pardo@metric_sum", PARDO_F64}, {"pardo@best_eval_loss", PARDO_F64}, {"pardo@best_epoch", PARDO_I64},
    {"pardo@bad_epochs", PARDO_I64},
};

static int add_scalar(pardo_tensor_list *l, int f, int64_t iv, double dv, pardo_status *st) {
    pardo_tensor *t = pardo_tensor_new_cpu(fields[f].dtype, 0, NULL, st);
    if (!t) return st->code;
    if (fields[f].dtype == PARDO_I64) *(int64_t *)pardo_tensor_data(t) = iv;
    else *(double *)pardo_tensor_data(t) = dv;
    int rc = pardo_tensor_list_add(l, fields[f].name, t, st);
    pardo_tensor_release(t);
    return rc;
}

int pardo_train_state_save(const pardo_train_state *s, pardo_tensor_list *l, pardo_status *st) {
    int64_t v[F_COUNT] = {s->epoch, s->batch, s->step, s->batch_size, s->shuffle, (int64_t)s->seed, 0, s->rows,
                          0, 0, s->best_epoch, s->bad_epochs};
    double d[F_COUNT] = {[F_LOSS_SUM] = s->loss_sum, [F_METRIC_SUM] = s->metric_sum,
                         [F_BEST_EVAL_LOSS] = s->best_eval_loss};
    for (int f = 0; f < F_COUNT; f++) {
        int rc = add_scalar(l, f, v[f], d[f], st);
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

int pardo_train_state_load(const pardo_tensor_list *l, const char *ckpt, pardo_train_state *s, bool *found,
                           pardo_status *st) {
    memset(s, 0, sizeof(*s));
    s->best_eval_loss = (double)INFINITY;
    *found = false;
    pardo_tensor *t[F_COUNT];
    int present = 0, present_late = 0;
    for (int f = 0; f < F_COUNT; f++) {
        bool here = (t[f] = pardo_tensor_list_find(l, fields[f].name)) != NULL;
        if (f < F_REQUIRED) present += here;
        else present_late += here;
    }
    if (present == 0 && present_late == 0) return PARDO_OK;
    int64_t v[F_COUNT] = {0};
    double d[F_COUNT] = {0};
    for (int f = 0; f < F_COUNT; f++) {
        if (!t[f] && f >= F_REQUIRED && present_late == 0) continue;
        if (!t[f])
            return pardo_errorf(st, PARDO_EPARSE, "%s: has some of the training counters but not '%s'", ckpt,
                                fields[f].name);
        if (t[f]->dtype != fields[f].dtype || t[f]->numel != 1)
            return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s' must be a %s scalar", ckpt, fields[f].name,
                                pardo_dtype_name(fields[f].dtype));
        const void *p = pardo_tensor_cpu(t[f], st);
        if (!p) return pardo_status_prefix(st, "%s: ", ckpt);
        if (fields[f].dtype == PARDO_F64) {
            memcpy(&d[f], p, sizeof d[f]);
            continue;
        }
        memcpy(&v[f], p, sizeof v[f]);
        if (v[f] < 0 && f != F_SEED)
            return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s' is %lld, expected 0 or more", ckpt, fields[f].name,
                                (long long)v[f]);
    }
    if (v[F_BATCH_SIZE] < 1)
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry 'pardo@batch_size' is %lld, expected 1 or more", ckpt,
                            (long long)v[F_BATCH_SIZE]);
    if (v[F_SHUFFLE] > 1)
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry 'pardo@shuffle' is %lld, expected 0 or 1", ckpt,
                            (long long)v[F_SHUFFLE]);
    if (present_late && v[F_BEST_EPOCH] > v[F_EPOCH])
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry 'pardo@best_epoch' is %lld, past the %lld epochs done", ckpt,
                            (long long)v[F_BEST_EPOCH], (long long)v[F_EPOCH]);
    s->epoch = v[F_EPOCH];
    s->batch = v[F_BATCH];
    s->step = v[F_STEP];
    s->batch_size = v[F_BATCH_SIZE];
    s->shuffle = v[F_SHUFFLE] == 1;
    s->seed = (uint64_t)v[F_SEED];
    s->loss_sum = d[F_LOSS_SUM];
    s->rows = v[F_ROWS];
    if (present_late) {
        s->metric_sum = d[F_METRIC_SUM];
        s->best_eval_loss = v[F_BEST_EPOCH] > 0 ? d[F_BEST_EVAL_LOSS] : (double)INFINITY;
        s->best_epoch = v[F_BEST_EPOCH];
        s->bad_epochs = v[F_BAD_EPOCHS];
    }
    *found = true;
    return PARDO_OK;
}
