/* trace_read.c - a Chrome trace JSON file into a pardo_trace_model (see
 * trace_report.h): cJSON parses it; complete events are checked and
 * indexed, thread names and sort order come from the metadata events, the
 * "tensor memory" counter from its "C" events. */
#include <cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_io.h"
#include "io/json_pos.h"
#include "trace/trace_report.h"

#define EXPECTED "expected a Chrome trace (a JSON object with a \"traceEvents\" array)"

void pardo_trace_model_free(pardo_trace_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->ev);
    free(m->threads);
    free(m->mem);
    free(m->source);
    cJSON_Delete(m->doc);
    free(m);
}

/* A printf-made string the model owns; NULL when out of memory. */
static const char *own_printf(pardo_trace_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *own_printf(pardo_trace_model *m, const char *fmt, ...) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 16;
        char **p = realloc(m->owned, (size_t)cap * sizeof(*p));
        if (!p) return NULL;
        m->owned = p;
        m->cap_owned = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    m->owned[m->n_owned++] = s;
    return s;
}

static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool num_of(const cJSON *o, const char *key, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return false;
    *out = v->valuedouble;
    return true;
}

/* A number as an integer; dflt when absent or out of int64's range (a cast would be undefined). */
static long long int_of(const cJSON *o, const char *key, long long dflt) {
    double d;
    return num_of(o, key, &d) && d > -9.2e18 && d < 9.2e18 ? (long long)d : dflt;
}

/* The thread with id tid (added when new); -1 when out of memory. */
static int thread_index(pardo_trace_model *m, long tid, int *cap) {
    for (int i = 0; i < m->n_threads; i++)
        if (m->threads[i].tid == tid) return i;
    if (m->n_threads == *cap) {
        int ncap = *cap ? *cap * 2 : 8;
        pardo_trace_thread *p = realloc(m->threads, (size_t)ncap * sizeof(*p));
        if (!p) return -1;
        m->threads = p;
        *cap = ncap;
    }
    m->threads[m->n_threads] = (pardo_trace_thread){.tid = tid, .name = NULL, .sort = 1 << 30};
    return m->n_threads++;
}

static int cmp_thread(const void *a, const void *b) {
    const pardo_trace_thread *x = a, *y = b;
    if (x->sort != y->sort) return x->sort < y->sort ? -1 : 1;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

static int cmp_event(const void *a, const void *b) {
    const pardo_tev *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1; /* the enclosing one first */
    return 0;
}

static int cmp_sample(const void *a, const void *b) {
    const pardo_trace_sample *x = a, *y = b;
    return (x->ts > y->ts) - (x->ts < y->ts);
}

static int bad_event(pardo_status *st, const char *source, int i, const char *ph, const char *what) {
    return pardo_errorf(st, PARDO_EPARSE, "%s: traceEvents[%d]%s%s%s: expected %s", source, i, ph ? " (\"ph\": \"" : "",
                        ph ? ph : "", ph ? "\")" : "", what);
}

/* Fills e's pardo fields from its cat and args. */
static void classify(pardo_tev *e) {
    const cJSON *a = e->args;
    e->block = e->index = e->part = e->parts = e->op_block = e->op_index = -1;
    e->rows = -1;
    e->error = a ? str_of(a, "error") : NULL;
    if (!a) {
        e->kind = PARDO_TEV_OTHER;
        return;
    }
    if (strcmp(e->cat, "op") == 0 && str_of(a, "op")) {
        e->kind = PARDO_TEV_OP;
        e->op = str_of(a, "op");
        e->block = (int)int_of(a, "block", -1);
        e->index = (int)int_of(a, "index", -1);
        num_of(a, "queued_us", &e->queued);
        e->bytes_written = int_of(a, "bytes_written", 0);
        e->flow = (unsigned long long)int_of(a, "flow_first", 0);
        e->flows = (int)int_of(a, "flows", 0);
    } else if (strcmp(e->cat, "part") == 0) {
        e->kind = PARDO_TEV_PART;
        e->block = (int)int_of(a, "block", -1);
        e->part = (int)int_of(a, "part", -1);
        e->parts = (int)int_of(a, "parts", -1);
        e->op_block = (int)int_of(a, "op_block", -1);
        e->op_index = (int)int_of(a, "op_index", -1);
        e->rows = int_of(a, "rows", -1);
        e->flow = (unsigned long long)int_of(a, "flow", 0);
    } else if (strcmp(e->cat, "stage") == 0) {
        e->kind = PARDO_TEV_STAGE;
        e->block = (int)int_of(a, "block", -1);
        e->index = (int)int_of(a, "first", -1);
    } else {
        e->kind = PARDO_TEV_OTHER;
    }
}

static int oom(pardo_status *st, const char *source) {
    return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory reading the trace", source);
}

static bool is_json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Where a trace's text starts (past JSON white space), or an EPARSE error
 * when it is empty or its first byte cannot start a JSON value: a file of
 * zeros is refused at its first byte, before it is copied or parsed. */
static int check_start(const char *text, size_t len, const char *source, size_t *at, pardo_status *st) {
    size_t i = 0;
    while (i < len && is_json_space((unsigned char)text[i])) i++;
    *at = i;
    if (i == len)
        return pardo_errorf(st, PARDO_EPARSE, "%s: %s, " EXPECTED, source, len ? "only white space" : "empty file");
    unsigned char c = (unsigned char)text[i];
    if (strchr("{[\"-0123456789tfn", c) && c) return PARDO_OK; /* the parser says the rest */
    if (c > 0x20 && c < 0x7f)
        return pardo_errorf(st, PARDO_EPARSE, "%s: byte %zu: found '%c', " EXPECTED, source, i, c);
    return pardo_errorf(st, PARDO_EPARSE, "%s: byte %zu: found byte 0x%02x%s, " EXPECTED, source, i, c,
                        c ? "" : " (a NUL: not a text file)");
}

/* pardo_file_need_fn of a trace read as a stream: refused at its first
 * byte past white space where that cannot start JSON, else read whole. */
static int stream_need(const unsigned char *buf, size_t n, const char *path, size_t *need, bool *whole,
                       pardo_status *st) {
    size_t at = 0;
    *need = PARDO_FILE_ALL;
    *whole = false;
    while (at < n && is_json_space(buf[at])) at++;
    return at == n ? PARDO_OK : check_start((const char *)buf, n, path, &at, st);
}

int pardo_trace_model_parse(const char *text, size_t len, const char *source, pardo_trace_model **out,
                            pardo_status *st) {
    *out = NULL;
    if (!source) source = "<trace>";
    size_t start;
    if (check_start(text, len, source, &start, st) != PARDO_OK) return st->code;
    pardo_trace_model *m = calloc(1, sizeof(*m));
    if (!m || !(m->source = strdup(source))) {
        free(m);
        return oom(st, source);
    }
    m->steps = -1;
    m->full_at_us = -1;
    int rc = PARDO_OK, cap_threads = 0;
    char *buf = malloc(len + 1);
    if (!buf) {
        rc = oom(st, source);
        goto fail;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    const char *end = NULL;
    if (memchr(buf, '\0', len) || !(m->doc = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1))) {
        int line = 0, col = 0;
        char why[256] = "a NUL byte in the text";
        if (!memchr(buf, '\0', len))
            pardo_json_explain_error(buf, len, end ? (size_t)(end - buf) : 0, &line, &col, why, sizeof why);
        rc = pardo_errorf(st, PARDO_EPARSE, "%s:%d:%d: not valid JSON (%s; a truncated file?): " EXPECTED, source, line,
                          col, why);
        goto fail;
    }
    const cJSON *events = m->doc;
    if (cJSON_IsObject(m->doc)) {
        events = cJSON_GetObjectItemCaseSensitive(m->doc, "traceEvents");
        const cJSON *other = cJSON_GetObjectItemCaseSensitive(m->doc, "otherData");
        if (cJSON_IsObject(other)) {
            m->command = str_of(other, "command");
            m->graph = str_of(other, "graph");
            m->threads_opt = (int)int_of(other, "threads", 0);
            m->steps = (long)int_of(other, "steps", -1);
            m->status = str_of(other, "status");
            m->dropped = (long)int_of(other, "dropped_events", 0);
            if (!num_of(other, "full_at_us", &m->full_at_us)) m->full_at_us = -1;
        }
    }
    if (!cJSON_IsArray(events)) {
        rc = pardo_errorf(st, PARDO_EPARSE, "%s: %s, " EXPECTED, source,
                          cJSON_IsObject(m->doc) ? "a JSON object without a \"traceEvents\" array" : "not an object");
        goto fail;
    }
    int n = cJSON_GetArraySize(events);
    if (n > 0 && !(m->ev = calloc((size_t)n, sizeof(*m->ev)))) {
        rc = oom(st, source);
        goto fail;
    }
    int cap_mem = 0, i = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        i++;
        if (!cJSON_IsObject(e)) {
            rc = bad_event(st, source, i, NULL, "an event object");
            goto fail;
        }
        const char *ph = str_of(e, "ph");
        if (!ph) {
            rc = bad_event(st, source, i, NULL, "a string \"ph\"");
            goto fail;
        }
        double tid = 0, ts = 0, dur = 0;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        if (!cJSON_IsObject(args)) args = NULL;
        if (strcmp(ph, "X") == 0) {
            if (!num_of(e, "ts", &ts)) rc = bad_event(st, source, i, ph, "a number \"ts\" (us)");
            else if (!num_of(e, "dur", &dur) || dur < 0)
                rc = bad_event(st, source, i, ph, "a number \"dur\" >= 0 (us)");
            else if (!num_of(e, "tid", &tid)) rc = bad_event(st, source, i, ph, "a number \"tid\"");
            if (rc != PARDO_OK) goto fail;
            int t = thread_index(m, (long)tid, &cap_threads);
            if (t < 0) {
                rc = oom(st, source);
                goto fail;
            }
            pardo_tev *v = &m->ev[m->n_ev++];
            v->name = str_of(e, "name") ? str_of(e, "name") : "";
            v->cat = str_of(e, "cat") ? str_of(e, "cat") : "";
            v->ts = ts;
            v->dur = dur;
            v->thread = t;
            v->args = args;
            classify(v);
        } else if (strcmp(ph, "M") == 0 && num_of(e, "tid", &tid) && args) {
            const char *what = str_of(e, "name");
            if (!what || (strcmp(what, "thread_name") != 0 && strcmp(what, "thread_sort_index") != 0)) continue;
            int t = thread_index(m, (long)tid, &cap_threads);
            if (t < 0) {
                rc = oom(st, source);
                goto fail;
            }
            double k;
            if (strcmp(what, "thread_name") == 0 && str_of(args, "name")) m->threads[t].name = str_of(args, "name");
            else if (strcmp(what, "thread_sort_index") == 0 && num_of(args, "sort_index", &k))
                m->threads[t].sort = (int)k;
        } else if (strcmp(ph, "C") == 0 && args && str_of(e, "name") &&
                   strcmp(str_of(e, "name"), "tensor memory") == 0) {
            double v;
            if (!num_of(e, "ts", &ts) || !num_of(args, "bytes", &v)) continue;
            if (m->n_mem == cap_mem) {
                cap_mem = cap_mem ? cap_mem * 2 : 256;
                pardo_trace_sample *p = realloc(m->mem, (size_t)cap_mem * sizeof(*p));
                if (!p) {
                    rc = oom(st, source);
                    goto fail;
                }
                m->mem = p;
            }
            m->mem[m->n_mem++] = (pardo_trace_sample){ts, v};
        }
    }
    /* threads in sort order, events renumbered to match */
    int *old_to_new = NULL;
    if (m->n_threads) {
        pardo_trace_thread *orig = malloc((size_t)m->n_threads * sizeof(*orig));
        old_to_new = malloc((size_t)m->n_threads * sizeof(*old_to_new));
        if (!orig || !old_to_new) {
            free(orig);
            free(old_to_new);
            rc = oom(st, source);
            goto fail;
        }
        memcpy(orig, m->threads, (size_t)m->n_threads * sizeof(*orig));
        qsort(m->threads, (size_t)m->n_threads, sizeof(*m->threads), cmp_thread);
        for (int a = 0; a < m->n_threads; a++)
            for (int b = 0; b < m->n_threads; b++)
                if (m->threads[b].tid == orig[a].tid) old_to_new[a] = b;
        free(orig);
        for (int k = 0; k < m->n_ev; k++) m->ev[k].thread = old_to_new[m->ev[k].thread];
        free(old_to_new);
        for (int t = 0; t < m->n_threads; t++)
            if (!m->threads[t].name && !(m->threads[t].name = own_printf(m, "tid %ld", m->threads[t].tid))) {
                rc = oom(st, source);
                goto fail;
            }
    }
    if (m->n_ev) qsort(m->ev, (size_t)m->n_ev, sizeof(*m->ev), cmp_event);
    if (m->n_mem) qsort(m->mem, (size_t)m->n_mem, sizeof(*m->mem), cmp_sample);
    for (int k = 0; k < m->n_ev; k++) {
        double a = m->ev[k].ts, b = m->ev[k].ts + m->ev[k].dur;
        if (k == 0 || a < m->t0) m->t0 = a;
        if (k == 0 || b > m->t1) m->t1 = b;
    }
    free(buf);
    *out = m;
    return PARDO_OK;
fail:
    free(buf);
    pardo_trace_model_free(m);
    return rc;
}

int pardo_trace_model_load(const char *path, pardo_trace_model **out, pardo_status *st) {
    pardo_file_view v;
    *out = NULL;
    if (pardo_file_view_open(path, stream_need, &v, st) != PARDO_OK) return st->code;
    int rc = pardo_trace_model_parse((const char *)v.data, v.n, path, out, st);
    pardo_file_view_close(&v);
    return rc;
}
