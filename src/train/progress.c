/* progress.c - progress lines and the --log file of `pardo train` (see progress.h). */
#include "train/progress.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/status.h"

#define REDRAW_S 0.1 /* at most 10 redraws a second */

double pardo_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pardo_progress_init(pardo_progress *p, FILE *out, bool live, int64_t epochs) {
    memset(p, 0, sizeof(*p));
    p->out = out;
    p->live = live;
    p->epochs = epochs;
}

void pardo_progress_epoch_begin(pardo_progress *p, int64_t epoch, int64_t n_batches, int64_t first_batch) {
    p->epoch = epoch;
    p->n_batches = n_batches;
    p->first_batch = first_batch;
    p->t_start = pardo_now_s();
    p->last_draw = 0;
}

void pardo_progress_batch(pardo_progress *p, int64_t batches_done, double mean_loss, int64_t rows) {
    if (!p->live) return;
    double now = pardo_now_s();
    if (!p->out || (now - p->last_draw < REDRAW_S && batches_done < p->n_batches)) return;
    p->last_draw = now;
    double elapsed = now - p->t_start;
    int64_t run = batches_done - p->first_batch;
    double rate = elapsed > 0 ? (double)rows / elapsed : 0;
    double eta = run > 0 ? elapsed / (double)run * (double)(p->n_batches - batches_done) : 0;
    fprintf(p->out, "\r\033[Kepoch %lld/%lld  batch %lld/%lld  loss %.4f  %.0f samples/s  ETA %.1f s",
            (long long)p->epoch, (long long)p->epochs, (long long)batches_done, (long long)p->n_batches, mean_loss,
            rate, eta);
    fflush(p->out);
    p->drawn = true;
}

void pardo_progress_break(pardo_progress *p) {
    if (p->drawn) fputc('\n', p->out);
    p->drawn = false;
}

void pardo_progress_epoch_end(pardo_progress *p, const pardo_epoch_stats *s) {
    if (!p->out) return;
    if (p->drawn) fputs("\r\033[K", p->out);
    p->drawn = false;
    fprintf(p->out, "epoch %lld/%lld: loss %.6f", (long long)s->epoch, (long long)s->epochs, s->loss);
    if (s->has_metric) fprintf(p->out, ", accuracy %.4f", s->accuracy);
    if (s->has_eval) fprintf(p->out, ", eval_loss %.6f", s->eval_loss);
    if (s->has_eval && s->has_accuracy) fprintf(p->out, ", eval_accuracy %.4f", s->eval_accuracy);
    if (s->has_lr) fprintf(p->out, ", lr %.6g", s->lr);
    fprintf(p->out, ", %.0f samples/s, %.3f s\n", s->samples_per_s, s->seconds);
    fflush(p->out);
}

/* A JSON number, or null when it is not finite or not measured. */
static void json_num(FILE *f, const char *key, bool have, double v, const char *fmt) {
    fprintf(f, ", \"%s\": ", key);
    if (have && isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

int pardo_train_log_write(FILE *f, const char *path, const pardo_epoch_stats *s, pardo_status *st) {
    fprintf(f, "{\"epoch\": %lld", (long long)s->epoch);
    json_num(f, "loss", true, s->loss, "%.9g");
    json_num(f, "accuracy", s->has_metric, s->accuracy, "%.9g");
    json_num(f, "eval_loss", s->has_eval, s->eval_loss, "%.9g");
    json_num(f, "eval_accuracy", s->has_eval && s->has_accuracy, s->eval_accuracy, "%.9g");
    json_num(f, "lr", s->has_lr, s->lr, "%.9g");
    json_num(f, "samples_per_s", true, s->samples_per_s, "%.1f");
    json_num(f, "seconds", true, s->seconds, "%.6f");
    fputs("}\n", f);
    if (fflush(f) != 0 || ferror(f))
        return pardo_errorf(st, PARDO_EIO, "%s: cannot write the log: %s", path, strerror(errno));
    return PARDO_OK;
}
