/* trace_summary.c - `pardo trace summary` and `pardo run --profile`: per op
 * type and per op duration tables, other spans, per-thread busy and idle
 * time, parallel_do efficiency (see trace_report.h; TRACES.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_report.h"

typedef struct item {
    const char *key;  // grouping key (points into keys)
    const char *type; // ops: the op type
    double dur;       // us
} item;

static int cmp_item(const void *a, const void *b) {
    const item *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return (x->dur > y->dur) - (x->dur < y->dur);
}

static int cmp_stat(const void *a, const void *b) {
    const pardo_trace_stat *x = a, *y = b;
    if (x->total != y->total) return x->total > y->total ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Nearest rank: the smallest value with at least q of the n sorted values at or below it. */
static double percentile(const item *sorted, long n, double q) {
    long k = (long)ceil(q * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1].dur;
}

/* Groups items by key into rows sorted by total descending; -1 when out of memory. */
static int group(item *items, int n, double wall, pardo_trace_stat **out) {
    *out = NULL;
    if (n == 0) return 0;
    qsort(items, (size_t)n, sizeof(*items), cmp_item);
    int rows = 0;
    for (int i = 0; i < n; i++) rows += i == 0 || strcmp(items[i].key, items[i - 1].key) != 0;
    pardo_trace_stat *s = calloc((size_t)rows, sizeof(*s));
    if (!s) return -1;
    int r = 0;
    for (int i = 0; i < n;) {
        int j = i;
        double total = 0;
        while (j < n && strcmp(items[j].key, items[i].key) == 0) total += items[j++].dur;
        pardo_trace_stat *row = &s[r++];
        snprintf(row->key, sizeof row->key, "%s", items[i].key);
        snprintf(row->type, sizeof row->type, "%s", items[i].type ? items[i].type : "");
        row->count = j - i;
        row->total = total;
        row->mean = total / (double)row->count;
        row->p50 = percentile(items + i, row->count, 0.50);
        row->p99 = percentile(items + i, row->count, 0.99);
        row->max = items[j - 1].dur;
        row->share = wall > 0 ? total / wall : 0;
        i = j;
    }
    qsort(s, (size_t)rows, sizeof(*s), cmp_stat);
    *out = s;
    return rows;
}

void pardo_trace_stats_clear(pardo_trace_stats *s) {
    free(s->types);
    free(s->ops);
    free(s->spans);
    free(s->threads);
    free(s->pds);
    memset(s, 0, sizeof(*s));
}

static void op_key(char *buf, size_t n, const pardo_tev *e) {
    snprintf(buf, n, "b%d:%d %s", e->block, e->index, e->name);
}

static int cmp_flow(const void *a, const void *b) {
    const pardo_tev *const *x = a, *const *y = b;
    return ((*x)->flow > (*y)->flow) - ((*x)->flow < (*y)->flow);
}

/* The part event with flow id f, or NULL (parts sorted by flow). */
/* The summed duration of the part spans of flow f (parts sorted by flow; a part block with all_reduce ops
 * runs in segments, one span each, sharing the part's flow), or -1 when there is none. */
static double part_time(const pardo_tev **parts, int n, unsigned long long f) {
    int lo = 0, hi = n - 1, at = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (parts[mid]->flow == f) {
            at = mid;
            break;
        }
        if (parts[mid]->flow < f) lo = mid + 1;
        else hi = mid - 1;
    }
    if (at < 0) return -1;
    while (at > 0 && parts[at - 1]->flow == f) at--;
    double dur = 0;
    for (; at < n && parts[at]->flow == f; at++) dur += parts[at]->dur;
    return dur;
}

typedef struct pd_acc {
    double *sum; // per part index: total duration
    long *count; // per part index: runs
    int cap;
    double parts_wall; // sum over runs of parts x duration
} pd_acc;

static int pd_stats(const pardo_trace_model *m, pardo_trace_stats *s) {
    int n_parts = 0, n_pd = 0, rc = -1;
    for (int i = 0; i < m->n_ev; i++) {
        n_parts += m->ev[i].kind == PARDO_TEV_PART && m->ev[i].flow;
        n_pd += m->ev[i].kind == PARDO_TEV_OP && m->ev[i].flows > 0;
    }
    if (n_pd == 0) return 0;
    const pardo_tev **parts = calloc((size_t)n_parts + 1, sizeof(*parts));
    pd_acc *acc = calloc((size_t)n_pd, sizeof(*acc));
    s->pds = calloc((size_t)n_pd, sizeof(*s->pds));
    if (!parts || !acc || !s->pds) goto done;
    for (int i = 0, k = 0; i < m->n_ev; i++)
        if (m->ev[i].kind == PARDO_TEV_PART && m->ev[i].flow) parts[k++] = &m->ev[i];
    qsort(parts, (size_t)n_parts, sizeof(*parts), cmp_flow);
    /* runs in time order, so that pds come in order of first run */
    const pardo_tev **runs = calloc((size_t)n_pd, sizeof(*runs));
    if (!runs) goto done;
    for (int i = 0, k = 0; i < m->n_ev; i++)
        if (m->ev[i].kind == PARDO_TEV_OP && m->ev[i].flows > 0) runs[k++] = &m->ev[i];
    for (int a = 1; a < n_pd; a++) /* insertion sort by ts: runs of one thread are sorted already */
        for (int b = a; b > 0 && runs[b]->ts < runs[b - 1]->ts; b--) {
            const pardo_tev *t = runs[b];
            runs[b] = runs[b - 1];
            runs[b - 1] = t;
        }
    for (int r = 0; r < n_pd; r++) {
        const pardo_tev *e = runs[r];
        char key[PARDO_TRACE_KEY_MAX];
        op_key(key, sizeof key, e);
        int p = 0;
        while (p < s->n_pds && strcmp(s->pds[p].key, key) != 0) p++;
        pardo_trace_pd_stat *d = &s->pds[p];
        if (p == s->n_pds) {
            s->n_pds++;
            snprintf(d->key, sizeof d->key, "%s", key);
            d->slowest_part = -1;
        }
        pd_acc *a = &acc[p];
        if (e->flows > a->cap) {
            double *sum = realloc(a->sum, (size_t)e->flows * sizeof(*sum));
            long *count = sum ? realloc(a->count, (size_t)e->flows * sizeof(*count)) : NULL;
            if (sum) a->sum = sum;
            if (!sum || !count) {
                free(runs);
                goto done;
            }
            a->count = count;
            for (int k = a->cap; k < e->flows; k++) a->sum[k] = 0, a->count[k] = 0;
            a->cap = e->flows;
        }
        d->runs++;
        d->wall += e->dur;
        if (e->flows > d->parts) d->parts = e->flows;
        a->parts_wall += (double)e->flows * e->dur;
        for (int k = 0; k < e->flows; k++) {
            const double dur = part_time(parts, n_parts, e->flow + (unsigned long long)k);
            if (dur < 0) continue; /* a part that did not start (another failed) */
            d->part_time += dur;
            a->sum[k] += dur;
            a->count[k]++;
            if (dur > d->max_part) d->max_part = dur;
        }
    }
    free(runs);
    for (int p = 0; p < s->n_pds; p++) {
        pardo_trace_pd_stat *d = &s->pds[p];
        d->efficiency = acc[p].parts_wall > 0 ? d->part_time / acc[p].parts_wall : 0;
        for (int k = 0; k < acc[p].cap; k++) {
            if (!acc[p].count[k]) continue;
            double mean = acc[p].sum[k] / (double)acc[p].count[k];
            if (d->slowest_part < 0 || mean > d->slowest_mean) {
                d->slowest_part = k;
                d->slowest_mean = mean;
            }
        }
    }
    rc = 0;
done:
    for (int p = 0; acc && p < n_pd; p++) {
        free(acc[p].sum);
        free(acc[p].count);
    }
    free(acc);
    free(parts);
    return rc;
}

int pardo_trace_stats_compute(const pardo_trace_model *m, pardo_trace_stats *s, pardo_status *st) {
    memset(s, 0, sizeof(*s));
    s->wall = m->t1 - m->t0;
    s->n_events = m->n_ev;
    item *items = calloc((size_t)m->n_ev + 1, sizeof(*items));
    char(*keys)[PARDO_TRACE_KEY_MAX] = calloc((size_t)m->n_ev + 1, sizeof(*keys));
    if (!items || !keys) goto oom;
    int n = 0;
    for (int i = 0; i < m->n_ev; i++)
        if (m->ev[i].kind == PARDO_TEV_OP) items[n++] = (item){m->ev[i].op, m->ev[i].op, m->ev[i].dur};
    if ((s->n_types = group(items, n, s->wall, &s->types)) < 0) goto oom;
    n = 0;
    for (int i = 0; i < m->n_ev; i++) {
        if (m->ev[i].kind != PARDO_TEV_OP) continue;
        op_key(keys[i], sizeof keys[i], &m->ev[i]);
        items[n++] = (item){keys[i], m->ev[i].op, m->ev[i].dur};
    }
    if ((s->n_ops = group(items, n, s->wall, &s->ops)) < 0) goto oom;
    n = 0;
    for (int i = 0; i < m->n_ev; i++) {
        if (m->ev[i].kind == PARDO_TEV_OP) continue;
        snprintf(keys[i], sizeof keys[i], "%s/%s", m->ev[i].cat, m->ev[i].name);
        items[n++] = (item){keys[i], NULL, m->ev[i].dur};
    }
    if ((s->n_spans = group(items, n, s->wall, &s->spans)) < 0) goto oom;
    free(items);
    free(keys);
    items = NULL;
    keys = NULL;

    if (m->n_threads && !(s->threads = calloc((size_t)m->n_threads, sizeof(*s->threads)))) goto oom;
    s->n_threads = m->n_threads;
    for (int t = 0; t < m->n_threads; t++)
        snprintf(s->threads[t].name, sizeof s->threads[t].name, "%s", m->threads[t].name);
    double cur_end = 0;
    for (int i = 0; i < m->n_ev; i++) { /* events come by thread, then start: the union of their spans */
        const pardo_tev *e = &m->ev[i];
        pardo_trace_thread_stat *t = &s->threads[e->thread];
        if (i == 0 || e->thread != m->ev[i - 1].thread) cur_end = e->ts;
        t->events++;
        double a = e->ts > cur_end ? e->ts : cur_end, b = e->ts + e->dur;
        if (b > a) t->busy += b - a;
        if (b > cur_end) cur_end = b;
    }
    for (int t = 0; t < s->n_threads; t++) {
        pardo_trace_thread_stat *r = &s->threads[t];
        r->idle = s->wall > r->busy ? s->wall - r->busy : 0;
        r->busy_share = s->wall > 0 ? r->busy / s->wall : 0;
        r->idle_share = s->wall > 0 ? r->idle / s->wall : 0;
    }
    if (pd_stats(m, s) != 0) goto oom;
    return PARDO_OK;
oom:
    free(items);
    free(keys);
    pardo_trace_stats_clear(s);
    return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory summarising the trace", m->source);
}

/* ---- text ---- */

/* w, or the length of s where that is more: text columns widen to fit the
 * longest name (an op key, op type or thread name is never cut). */
static int wider(int w, const char *s) {
    int k = (int)strlen(s);
    return k > w ? k : w;
}

static void print_stat_table(FILE *f, const char *first, const pardo_trace_stat *rows, int n, bool with_type) {
    int kw = wider(28, first), tw = 22;
    for (int i = 0; i < n; i++) kw = wider(kw, rows[i].key), tw = wider(tw, rows[i].type);
    fprintf(f, "%-*s ", kw, first);
    if (with_type) fprintf(f, "%-*s ", tw, "type");
    fprintf(f, "%8s %10s %10s %10s %10s %7s\n", "count", "total ms", "mean us", "p50 us", "p99 us", "share");
    for (int i = 0; i < n; i++) {
        const pardo_trace_stat *r = &rows[i];
        fprintf(f, "%-*s ", kw, r->key);
        if (with_type) fprintf(f, "%-*s ", tw, r->type);
        fprintf(f, "%8ld %10.3f %10.2f %10.2f %10.2f %6.1f%%\n", r->count, r->total / 1e3, r->mean, r->p50, r->p99,
                r->share * 100);
    }
}

void pardo_trace_stats_print(FILE *f, const pardo_trace_model *m, const pardo_trace_stats *s, int top) {
    fprintf(f, "trace %s: wall %.3f ms, %ld events on %d thread%s", m->source, s->wall / 1e3, s->n_events, s->n_threads,
            s->n_threads == 1 ? "" : "s");
    if (m->command || m->graph) {
        fprintf(f, " (pardo%s%s%s%s", m->command ? " " : "", m->command ? m->command : "", m->graph ? " " : "",
                m->graph ? m->graph : "");
        if (m->threads_opt > 0) fprintf(f, ", --threads %d", m->threads_opt);
        if (m->steps >= 0) fprintf(f, ", %ld steps", m->steps);
        if (m->status) fprintf(f, ", %s", m->status);
        fputc(')', f);
    }
    fputs("\n", f);
    if (m->full_at_us >= 0)
        fprintf(f, "recording stopped %.3f s into the run, at its memory limit (PARDO_TRACE_MAX_MB): the %ld events "
                "after it are not in the trace\n", m->full_at_us / 1e6, m->dropped);
    if (s->n_types) {
        fputs("\nper op type (a parallel_do's time includes its parts' ops)\n", f);
        print_stat_table(f, "op type", s->types, s->n_types, false);
    }
    if (s->n_ops) {
        int n = top < s->n_ops ? top : s->n_ops;
        fprintf(f, "\ntop %d ops by total time\n", n);
        print_stat_table(f, "op (bBLOCK:INDEX name)", s->ops, n, true);
    }
    if (s->n_spans) {
        fputs("\nother spans (cat/name)\n", f);
        print_stat_table(f, "span", s->spans, s->n_spans, false);
    }
    if (s->n_threads) {
        fputs("\nthreads (busy: covered by at least one event)\n", f);
        int w = 28;
        for (int t = 0; t < s->n_threads; t++) w = wider(w, s->threads[t].name);
        fprintf(f, "%-*s %8s %10s %7s %10s %7s\n", w, "thread", "events", "busy ms", "busy", "idle ms", "idle");
        for (int t = 0; t < s->n_threads; t++) {
            const pardo_trace_thread_stat *r = &s->threads[t];
            fprintf(f, "%-*s %8ld %10.3f %6.1f%% %10.3f %6.1f%%\n", w, r->name, r->events, r->busy / 1e3,
                    r->busy_share * 100, r->idle / 1e3, r->idle_share * 100);
        }
    }
    if (s->n_pds) {
        fputs("\nparallel_do (efficiency: sum of part times / (parts x wall))\n", f);
        int w = 28;
        for (int p = 0; p < s->n_pds; p++) w = wider(w, s->pds[p].key);
        fprintf(f, "%-*s %6s %6s %12s %10s  %s\n", w, "parallel_do", "runs", "parts", "mean wall us", "efficiency",
                "slowest part (mean us, max us)");
        for (int p = 0; p < s->n_pds; p++) {
            const pardo_trace_pd_stat *d = &s->pds[p];
            fprintf(f, "%-*s %6ld %6d %12.2f %9.1f%%  ", w, d->key, d->runs, d->parts, d->wall / (double)d->runs,
                    d->efficiency * 100);
            if (d->slowest_part >= 0)
                fprintf(f, "part %d (%.2f, %.2f)\n", d->slowest_part, d->slowest_mean, d->max_part);
            else fputs("-\n", f);
        }
    }
}

/* ---- CSV ---- */

static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* One row, its value with a fixed number of decimals: 0 for counts, 3 for
 * microseconds (the trace's nanoseconds), 6 for shares. */
enum { CSV_COUNT = 0, CSV_US = 3, CSV_SHARE = 6 };

static void csv_row(FILE *f, const char *section, const char *key, const char *metric, int decimals, double v) {
    fputs(section, f);
    fputc(',', f);
    csv_field(f, key);
    fprintf(f, ",%s,%.*f\n", metric, decimals, v);
}

static void csv_stats(FILE *f, const char *section, const pardo_trace_stat *rows, int n) {
    for (int i = 0; i < n; i++) {
        const pardo_trace_stat *r = &rows[i];
        csv_row(f, section, r->key, "count", CSV_COUNT, (double)r->count);
        csv_row(f, section, r->key, "total_us", CSV_US, r->total);
        csv_row(f, section, r->key, "mean_us", CSV_US, r->mean);
        csv_row(f, section, r->key, "p50_us", CSV_US, r->p50);
        csv_row(f, section, r->key, "p99_us", CSV_US, r->p99);
        csv_row(f, section, r->key, "max_us", CSV_US, r->max);
        csv_row(f, section, r->key, "share", CSV_SHARE, r->share);
    }
}

void pardo_trace_stats_csv(FILE *f, const pardo_trace_model *m, const pardo_trace_stats *s, int top) {
    fputs("section,key,metric,value\n", f);
    csv_row(f, "trace", m->source, "wall_us", CSV_US, s->wall);
    csv_row(f, "trace", m->source, "events", CSV_COUNT, (double)s->n_events);
    csv_row(f, "trace", m->source, "threads", CSV_COUNT, (double)s->n_threads);
    csv_stats(f, "op_type", s->types, s->n_types);
    csv_stats(f, "top_op", s->ops, top < s->n_ops ? top : s->n_ops);
    csv_stats(f, "span", s->spans, s->n_spans);
    for (int t = 0; t < s->n_threads; t++) {
        const pardo_trace_thread_stat *r = &s->threads[t];
        csv_row(f, "thread", r->name, "events", CSV_COUNT, (double)r->events);
        csv_row(f, "thread", r->name, "busy_us", CSV_US, r->busy);
        csv_row(f, "thread", r->name, "idle_us", CSV_US, r->idle);
        csv_row(f, "thread", r->name, "busy_share", CSV_SHARE, r->busy_share);
        csv_row(f, "thread", r->name, "idle_share", CSV_SHARE, r->idle_share);
    }
    for (int p = 0; p < s->n_pds; p++) {
        const pardo_trace_pd_stat *d = &s->pds[p];
        csv_row(f, "parallel_do", d->key, "runs", CSV_COUNT, (double)d->runs);
        csv_row(f, "parallel_do", d->key, "parts", CSV_COUNT, d->parts);
        csv_row(f, "parallel_do", d->key, "wall_us", CSV_US, d->wall);
        csv_row(f, "parallel_do", d->key, "part_us", CSV_US, d->part_time);
        csv_row(f, "parallel_do", d->key, "efficiency", CSV_SHARE, d->efficiency);
        csv_row(f, "parallel_do", d->key, "slowest_part", CSV_COUNT, d->slowest_part);
        csv_row(f, "parallel_do", d->key, "slowest_part_mean_us", CSV_US, d->slowest_mean);
        csv_row(f, "parallel_do", d->key, "max_part_us", CSV_US, d->max_part);
    }
}
