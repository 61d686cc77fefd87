/* trace_svg.c - `pardo trace timeline`: a trace model as one self-contained
 * SVG (see trace_report.h). Layout, top to bottom: a title, the legend (op
 * types by total time), the time axis in ms, one lane per thread (events
 * stacked by nesting depth), and the tensor memory counter when the trace
 * has one. Each parallel_do run gets a translucent band across every lane
 * its parts ran on, and its parts are outlined in its colour. */
#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_report.h"
#include "trace/trace_sbuf.h"

#define MAX_DEPTH 8
#define ROW_H 18.0    // px per nesting level
#define LANE_PAD 4.0  // px above and below a lane's rows
#define LABEL_W 130.0 // px of lane labels at the left
#define RIGHT_W 24.0  // px of margin at the right
#define MEM_H 44.0    // px of the memory lane
#define CHAR_W 6.1    // px per character of an 11px label (estimate)

static const char *const type_colors[] = {
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
    "#86bcb6", "#d37295", "#b6992d", "#499894", "#8cd17d", "#a0cbe8", "#ffbe7d", "#d4a6c8", "#f1ce63", "#79706e",
};
#define N_TYPE_COLORS ((int)(sizeof type_colors / sizeof type_colors[0]))
static const char *const pd_colors[] = {"#6a3d9a", "#b15928", "#1f78b4", "#33a02c", "#e31a1c"};
#define N_PD_COLORS ((int)(sizeof pd_colors / sizeof pd_colors[0]))
#define OTHER_COLOR "#8d8d8d"

/* s with &, <, >, " and ' escaped for XML text and attributes; at most max
 * bytes of s (0: all), "..." appended when cut. Control characters other
 * than newline and tab become spaces. */
static void sb_xml(sbuf *b, const char *s, size_t max) {
    size_t n = 0;
    for (const char *c = s; *c; c++, n++) {
        if (max && n == max) {
            sb_put(b, "...", 3);
            return;
        }
        switch (*c) {
        case '&': sb_put(b, "&amp;", 5); break;
        case '<': sb_put(b, "&lt;", 4); break;
        case '>': sb_put(b, "&gt;", 4); break;
        case '"': sb_put(b, "&quot;", 6); break;
        case '\'': sb_put(b, "&apos;", 6); break;
        default:
            if ((unsigned char)*c < 0x20 && *c != '\n' && *c != '\t') sb_put(b, " ", 1);
            else sb_put(b, c, 1);
        }
    }
}

/* ---- colours ---- */

typedef struct type_total {
    const char *type;
    double total;
} type_total;

static int cmp_type_total(const void *a, const void *b) {
    const type_total *x = a, *y = b;
    if (x->total != y->total) return x->total > y->total ? -1 : 1;
    return strcmp(x->type, y->type);
}

/* Op types (parallel_do aside) by total time, the colour order. */
static int op_types(const pardo_trace_model *m, type_total **out) {
    type_total *t = calloc((size_t)m->n_ev + 1, sizeof(*t));
    int n = 0;
    if (!t) return -1;
    for (int i = 0; i < m->n_ev; i++) {
        const pardo_tev *e = &m->ev[i];
        if (e->kind != PARDO_TEV_OP || e->flows > 0) continue;
        int k = 0;
        while (k < n && strcmp(t[k].type, e->op) != 0) k++;
        if (k == n) t[n++] = (type_total){e->op, 0};
        t[k].total += e->dur;
    }
    qsort(t, (size_t)n, sizeof(*t), cmp_type_total);
    *out = t;
    return n;
}

static const char *type_color(const type_total *types, int n, const char *type) {
    for (int k = 0; k < n; k++)
        if (strcmp(types[k].type, type) == 0) return k < N_TYPE_COLORS ? type_colors[k] : OTHER_COLOR;
    return OTHER_COLOR;
}

/* ---- geometry ---- */

typedef struct layout {
    double t0, span;  // us
    double x0, width; // px of the plot area
} layout;

static double px(const layout *l, double t) { return l->x0 + (t - l->t0) / l->span * l->width; }

/* A tick step in us giving about `want` ticks over span: 1, 2 or 5 times a power of ten. */
static double tick_step(double span, int want) {
    double raw = span / want, p = pow(10, floor(log10(raw)));
    double steps[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (steps[i] * p >= raw) return steps[i] * p;
    return 10 * p;
}

static void fmt_us(char *buf, size_t n, double us) {
    if (us >= 1000) snprintf(buf, n, "%.3f ms", us / 1e3);
    else snprintf(buf, n, "%.2f us", us);
}

/* The tooltip of an event: its name, place, times and args. */
static void tooltip(sbuf *b, const pardo_trace_model *m, const pardo_tev *e) {
    char t0[32], dur[32];
    fmt_us(t0, sizeof t0, e->ts - m->t0);
    fmt_us(dur, sizeof dur, e->dur);
    sb_put(b, "<title>", 7);
    switch (e->kind) {
    case PARDO_TEV_OP: {
        sb_xml(b, e->name, 0);
        sb_printf(b, " (");
        sb_xml(b, e->op, 0);
        sb_printf(b, ") block %d, op %d\nstart %s, took %s, queued %.2f us\n", e->block, e->index, t0, dur, e->queued);
        const char *lists[2] = {"inputs", "outputs"};
        for (int l = 0; l < 2; l++) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(e->args, lists[l]);
            if (!cJSON_IsArray(arr)) continue;
            sb_printf(b, "%s:", lists[l]);
            const cJSON *t;
            cJSON_ArrayForEach(t, arr) {
                const cJSON *var = cJSON_GetObjectItemCaseSensitive(t, "var");
                const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
                const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
                const cJSON *parts = cJSON_GetObjectItemCaseSensitive(t, "tensor_array");
                if (!cJSON_IsString(var)) {
                    sb_printf(b, " -");
                    continue;
                }
                sb_printf(b, " ");
                sb_xml(b, var->valuestring, 0);
                if (cJSON_IsNumber(parts)) sb_printf(b, " (tensor_array of %d)", parts->valueint);
                if (cJSON_IsString(dt)) {
                    sb_printf(b, " ");
                    sb_xml(b, dt->valuestring, 0);
                }
                if (cJSON_IsArray(shape)) {
                    sb_printf(b, " [");
                    const cJSON *d;
                    int k = 0;
                    cJSON_ArrayForEach(d, shape) sb_printf(b, "%s%.0f", k++ ? ", " : "", d->valuedouble);
                    sb_printf(b, "]");
                }
            }
            sb_printf(b, "\n");
        }
        sb_printf(b, "bytes written %lld", e->bytes_written);
        break;
    }
    case PARDO_TEV_PART: {
        const cJSON *pd = cJSON_GetObjectItemCaseSensitive(e->args, "parallel_do");
        sb_printf(b, "part %d of %d of parallel_do ", e->part, e->parts);
        sb_xml(b, cJSON_IsString(pd) ? pd->valuestring : "?", 0);
        sb_printf(b, " (block %d, op %d), running block %d\nstart %s, took %s", e->op_block, e->op_index, e->block, t0,
                  dur);
        if (e->rows >= 0) sb_printf(b, "\nrows %lld", e->rows);
        break;
    }
    default: {
        sb_xml(b, e->name, 0);
        sb_printf(b, " (");
        sb_xml(b, e->cat, 0);
        sb_printf(b, ")\nstart %s, took %s", t0, dur);
        const cJSON *a;
        if (e->args) cJSON_ArrayForEach(a, e->args) {
                if (!a->string || (!cJSON_IsNumber(a) && !cJSON_IsString(a))) continue;
                sb_printf(b, "\n");
                sb_xml(b, a->string, 0);
                sb_printf(b, ": ");
                if (cJSON_IsNumber(a)) sb_printf(b, "%.10g", a->valuedouble);
                else sb_xml(b, a->valuestring, 200);
            }
    }
    }
    if (e->error) {
        sb_printf(b, "\nerror: ");
        sb_xml(b, e->error, 600);
    }
    sb_put(b, "</title>", 8);
}

/* A label inside a box of w px: the event's name, cut to fit; nothing when too narrow. */
static void box_label(sbuf *b, const pardo_tev *e, double x, double y, double w, const char *color) {
    int fit = (int)((w - 4) / CHAR_W);
    if (fit < 3) return;
    size_t len = strlen(e->name);
    sb_printf(b, "<text x=\"%.2f\" y=\"%.2f\" class=\"l\" fill=\"%s\">", x + 2, y + ROW_H / 2 + 3, color);
    sb_xml(b, e->name, len > (size_t)fit ? (size_t)(fit > 4 ? fit - 3 : fit) : 0);
    sb_put(b, "</text>", 7);
}

static int cmp_flow_idx(const void *a, const void *b, void *ctx) {
    const pardo_trace_model *m = ctx;
    unsigned long long x = m->ev[*(const int *)a].flow, y = m->ev[*(const int *)b].flow;
    return (x > y) - (x < y);
}

static int find_flow(const pardo_trace_model *m, const int *parts, int n, unsigned long long f) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        unsigned long long g = m->ev[parts[mid]].flow;
        if (g == f) return parts[mid];
        if (g < f) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* The colour of a parallel_do op: by its order among the parallel_do ops (block, index). */
static const char *pd_color(const pardo_trace_model *m, int block, int index) {
    int k = 0;
    int seen[N_PD_COLORS][2];
    for (int i = 0; i < m->n_ev; i++) {
        const pardo_tev *e = &m->ev[i];
        if (e->kind != PARDO_TEV_OP || e->flows == 0) continue;
        int j = 0;
        while (j < k && !(seen[j][0] == e->block && seen[j][1] == e->index)) j++;
        if (j < k) continue;
        if (e->block == block && e->index == index) return pd_colors[k % N_PD_COLORS];
        if (k < N_PD_COLORS) {
            seen[k][0] = e->block;
            seen[k][1] = e->index;
            k++;
        } else {
            break;
        }
    }
    return pd_colors[0];
}

int pardo_trace_svg(const pardo_trace_model *m, int width, char **out, size_t *len, pardo_status *st) {
    *out = NULL;
    *len = 0;
    if (width <= 0) width = 1400;
    sbuf b = {0};
    type_total *types = NULL;
    int *depth = calloc((size_t)m->n_ev + 1, sizeof(*depth));
    int *parts = calloc((size_t)m->n_ev + 1, sizeof(*parts));
    double *lane_y = calloc((size_t)m->n_threads + 1, sizeof(*lane_y));
    double *lane_h = calloc((size_t)m->n_threads + 1, sizeof(*lane_h));
    int n_types = op_types(m, &types);
    if (!depth || !parts || !lane_y || !lane_h || n_types < 0) goto oom;

    /* nesting depth of each event within its thread */
    double stack[MAX_DEPTH + 1];
    int sp = 0;
    int *lane_depth = calloc((size_t)m->n_threads + 1, sizeof(*lane_depth));
    if (!lane_depth) goto oom;
    for (int i = 0; i < m->n_ev; i++) {
        const pardo_tev *e = &m->ev[i];
        if (i == 0 || e->thread != m->ev[i - 1].thread) sp = 0;
        while (sp > 0 && stack[sp - 1] <= e->ts) sp--;
        depth[i] = sp < MAX_DEPTH ? sp : MAX_DEPTH - 1;
        if (depth[i] + 1 > lane_depth[e->thread]) lane_depth[e->thread] = depth[i] + 1;
        if (sp < MAX_DEPTH) stack[sp++] = e->ts + e->dur;
    }

    /* legend entries: op types, then parts, stages, other spans */
    bool has_part = false, has_stage = false, has_other = false;
    for (int i = 0; i < m->n_ev; i++) {
        has_part |= m->ev[i].kind == PARDO_TEV_PART;
        has_stage |= m->ev[i].kind == PARDO_TEV_STAGE;
        has_other |= m->ev[i].kind == PARDO_TEV_OTHER;
    }
    double W = width, x0 = LABEL_W, pw = W - LABEL_W - RIGHT_W;
    /* legend rows: lay the items out once to count the rows */
    int n_items = n_types + has_part + has_stage + has_other;
    double lx = x0, legend_rows = n_items ? 1 : 0;
    for (int k = 0; k < n_items; k++) {
        const char *label = k < n_types ? types[k].type : "parallel_do part (band: one parallel_do run)";
        double w = 18 + CHAR_W * (double)strlen(label) + 14;
        if (lx + w > W - RIGHT_W && lx > x0) {
            legend_rows++;
            lx = x0;
        }
        lx += w;
    }
    double legend_y = 40, axis_y = legend_y + legend_rows * 18 + 26, lanes_y = axis_y + 8;
    double y = lanes_y;
    for (int t = 0; t < m->n_threads; t++) {
        lane_y[t] = y;
        lane_h[t] = (lane_depth[t] ? lane_depth[t] : 1) * ROW_H + 2 * LANE_PAD;
        if (lane_h[t] < 34) lane_h[t] = 34;
        y += lane_h[t];
    }
    double mem_y = y + 10, H = (m->n_mem ? mem_y + MEM_H + 16 : y) + 30;
    double span = m->t1 - m->t0;
    layout L = {.t0 = m->t0, .span = span > 0 ? span : 1, .x0 = x0, .width = pw};

    sb_printf(&b,
              "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
              "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
              "<style>.l{font-size:10px;pointer-events:none}.n{font-size:12px;font-weight:bold}"
              ".s{font-size:10px;fill:#555}.t{font-size:10px;fill:#333}.h{font-size:15px;font-weight:bold}"
              ".e{stroke:#d00000;stroke-width:2}</style>\n"
              "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
              width, H, width, H, width, H);

    /* title */
    char wall[32];
    fmt_us(wall, sizeof wall, span);
    sb_printf(&b, "<text x=\"12\" y=\"24\" class=\"h\">");
    sb_printf(&b, "pardo");
    if (m->command) {
        sb_printf(&b, " ");
        sb_xml(&b, m->command, 100);
    }
    if (m->graph) {
        sb_printf(&b, " ");
        sb_xml(&b, m->graph, 100);
    }
    if (!m->command && !m->graph) {
        sb_printf(&b, " trace ");
        sb_xml(&b, m->source, 100);
    }
    if (m->threads_opt > 0) sb_printf(&b, " - %d threads", m->threads_opt);
    if (m->steps >= 0) sb_printf(&b, ", %ld steps", m->steps);
    sb_printf(&b, " - wall %s, %d events", wall, m->n_ev);
    if (m->status && strcmp(m->status, "ok") != 0) {
        sb_printf(&b, " - ");
        sb_xml(&b, m->status, 40);
    }
    sb_printf(&b, "</text>\n");

    /* legend */
    lx = x0;
    double ly = legend_y;
    sb_printf(&b, "<text x=\"12\" y=\"%.1f\" class=\"n\">op types</text>\n", ly + 10);
    for (int k = 0; k < n_items; k++) {
        const char *label, *fill = OTHER_COLOR, *stroke = "none";
        char extra[64] = "";
        if (k < n_types) {
            label = types[k].type;
            fill = type_color(types, n_types, label);
        } else if (k == n_types && has_part) {
            label = "parallel_do part (band: one parallel_do run)";
            fill = "#f0ebf8";
            stroke = pd_colors[0];
        } else if (k - n_types - has_part == 0 && has_stage) {
            label = "stage (merges, updates)";
            fill = "#ffffff";
            stroke = "#555555";
            snprintf(extra, sizeof extra, " stroke-dasharray=\"3,2\"");
        } else {
            label = "other spans";
        }
        double w = 18 + CHAR_W * (double)strlen(label) + 14;
        if (lx + w > W - RIGHT_W && lx > x0) {
            ly += 18;
            lx = x0;
        }
        sb_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"%s\"%s/>", lx, ly,
                  fill, stroke, extra);
        sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" class=\"t\">", lx + 16, ly + 10);
        sb_xml(&b, label, 0);
        sb_printf(&b, "</text>\n");
        lx += w;
    }

    /* lanes: backgrounds and labels */
    double ttop = lanes_y, tbottom = y;
    for (int t = 0; t < m->n_threads; t++) {
        sb_printf(&b, "<rect x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"/>\n", lane_y[t], width,
                  lane_h[t], t % 2 ? "#ffffff" : "#f4f5f7");
        double busy = 0, cur = 0;
        long nev = 0;
        for (int i = 0; i < m->n_ev; i++) { /* events are by thread then start: union of spans */
            const pardo_tev *e = &m->ev[i];
            if (e->thread != t) continue;
            if (nev++ == 0) cur = e->ts;
            double a = e->ts > cur ? e->ts : cur, c = e->ts + e->dur;
            if (c > a) busy += c - a;
            if (c > cur) cur = c;
        }
        sb_printf(&b, "<text x=\"10\" y=\"%.1f\" class=\"n\">", lane_y[t] + 15);
        sb_xml(&b, m->threads[t].name, 18);
        sb_printf(&b,
                  "</text><text x=\"10\" y=\"%.1f\" class=\"s\">busy %.0f%%<title>%ld events, busy %.3f ms of %.3f ms"
                  "</title></text>\n",
                  lane_y[t] + 28, span > 0 ? busy / span * 100 : 0, nev, busy / 1e3, span / 1e3);
    }

    /* time axis: ticks and grid */
    double step = tick_step(L.span, (int)(pw / 110) > 2 ? (int)(pw / 110) : 2);
    int decimals = step >= 1000 ? 0 : (int)ceil(-log10(step / 1000) - 1e-9);
    if (decimals < 0) decimals = 0;
    sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x0, axis_y, x0 + pw,
              axis_y);
    for (int k = 0;; k++) {
        double t = (double)k * step;
        if (t > L.span * 1.0000001) break;
        double x = px(&L, m->t0 + t);
        sb_printf(&b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\"/>", x, axis_y - 4, x,
                  axis_y);
        sb_printf(&b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#d0d0d0\" stroke-width=\"0.6\"/>",
                  x, ttop, x, tbottom);
        sb_printf(&b, "<text x=\"%.2f\" y=\"%.1f\" class=\"t\" text-anchor=\"middle\">%.*f%s</text>\n", x, axis_y - 7,
                  decimals, t / 1e3, k == 0 ? " ms" : "");
    }

    /* parallel_do bands, under everything else */
    int n_parts = 0;
    for (int i = 0; i < m->n_ev; i++)
        if (m->ev[i].kind == PARDO_TEV_PART && m->ev[i].flow) parts[n_parts++] = i;
    qsort_r(parts, (size_t)n_parts, sizeof(*parts), cmp_flow_idx, (void *)m);
    double band_end = 0;
    for (int i = 0; i < m->n_ev; i++) {
        const pardo_tev *e = &m->ev[i];
        if (e->kind != PARDO_TEV_OP || e->flows == 0) continue;
        if (e->dur / L.span * pw < 1.0 && px(&L, e->ts) + 1.0 <= band_end + 0.5) continue; /* as events, below */
        band_end = fmax(band_end, px(&L, e->ts) + fmax(e->dur / L.span * pw, 1.0));
        int lo = e->thread, hi = e->thread;
        for (int k = 0; k < e->flows; k++) {
            int p = find_flow(m, parts, n_parts, e->flow + (unsigned long long)k);
            if (p < 0) continue;
            if (m->ev[p].thread < lo) lo = m->ev[p].thread;
            if (m->ev[p].thread > hi) hi = m->ev[p].thread;
        }
        const char *c = pd_color(m, e->block, e->index);
        double x = px(&L, e->ts), w = fmax(e->dur / L.span * pw, 1.0);
        sb_printf(&b,
                  "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.10\" "
                  "stroke=\"%s\" stroke-opacity=\"0.7\" stroke-dasharray=\"4,3\">",
                  x, lane_y[lo] + 1, w, lane_y[hi] + lane_h[hi] - lane_y[lo] - 2, c, c);
        tooltip(&b, m, e);
        sb_printf(&b, "</rect>\n");
    }

    /* events; one narrower than a pixel that falls where its row is drawn
     * already is left out, so that a long trace stays a picture of bounded size */
    double last_end[MAX_DEPTH] = {0};
    for (int i = 0; i < m->n_ev; i++) {
        const pardo_tev *e = &m->ev[i];
        double x = px(&L, e->ts), w = fmax(e->dur / L.span * pw, 0.8);
        if (i == 0 || e->thread != m->ev[i - 1].thread)
            for (int d = 0; d < MAX_DEPTH; d++) last_end[d] = 0;
        if (e->dur / L.span * pw < 1.0 && x + w <= last_end[depth[i]] + 0.5) continue;
        if (x + w > last_end[depth[i]]) last_end[depth[i]] = x + w;
        double ey = lane_y[e->thread] + LANE_PAD + depth[i] * ROW_H;
        const char *fill, *text = "#ffffff";
        char style[160] = "";
        if (e->kind == PARDO_TEV_OP && e->flows > 0) { /* the parallel_do op itself */
            const char *c = pd_color(m, e->block, e->index);
            fill = c;
            snprintf(style, sizeof style, " fill-opacity=\"0.25\" stroke=\"%s\" stroke-width=\"1.2\"", c);
            text = "#222222";
        } else if (e->kind == PARDO_TEV_OP) {
            fill = type_color(types, n_types, e->op);
        } else if (e->kind == PARDO_TEV_PART) {
            const char *c = pd_color(m, e->op_block, e->op_index);
            fill = c;
            snprintf(style, sizeof style, " fill-opacity=\"0.13\" stroke=\"%s\" stroke-width=\"1.6\"", c);
            text = "#222222";
        } else if (e->kind == PARDO_TEV_STAGE) {
            fill = "#ffffff";
            snprintf(style, sizeof style, " fill-opacity=\"0.6\" stroke=\"#555555\" stroke-dasharray=\"3,2\"");
            text = "#222222";
        } else {
            fill = OTHER_COLOR;
        }
        sb_printf(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"%s%s>", x, ey + 1, w,
                  ROW_H - 2, fill, style, e->error ? " class=\"e\"" : "");
        tooltip(&b, m, e);
        sb_printf(&b, "</rect>");
        box_label(&b, e, x, ey, w, text);
        sb_printf(&b, "\n");
    }

    /* the tensor memory counter */
    if (m->n_mem) {
        double vmax = 0;
        for (int i = 0; i < m->n_mem; i++) vmax = fmax(vmax, m->mem[i].value);
        if (vmax <= 0) vmax = 1;
        sb_printf(&b, "<rect x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#f4f5f7\"/>\n", mem_y - 4, width,
                  MEM_H + 8);
        sb_printf(&b, "<text x=\"10\" y=\"%.1f\" class=\"n\">tensor memory</text>", mem_y + 12);
        sb_printf(&b, "<text x=\"10\" y=\"%.1f\" class=\"s\">max %.1f KiB</text>\n", mem_y + 25, vmax / 1024);
        sb_printf(&b, "<polyline fill=\"none\" stroke=\"#2a7f62\" stroke-width=\"1.4\" points=\"");
        double prev_y = mem_y + MEM_H;
        for (int i = 0; i < m->n_mem; i++) {
            double x = px(&L, m->mem[i].ts), yy = mem_y + MEM_H - m->mem[i].value / vmax * (MEM_H - 4);
            if (i) sb_printf(&b, "%.2f,%.2f ", x, prev_y);
            sb_printf(&b, "%.2f,%.2f ", x, yy);
            prev_y = yy;
        }
        sb_printf(&b,
                  "%.2f,%.2f\"><title>tensor memory in use (bytes, sampled at each op end); max %.0f</title>"
                  "</polyline>\n",
                  x0 + pw, prev_y, vmax);
    }
    sb_printf(&b,
              "<text x=\"12\" y=\"%.0f\" class=\"s\">hover a box for its details; ops are coloured by type; "
              "a dashed band spans one parallel_do run across the lanes of its parts</text>\n",
              H - 10);
    sb_printf(&b, "</svg>\n");
    free(lane_depth);
    if (b.oom) goto oom;
    free(types);
    free(depth);
    free(parts);
    free(lane_y);
    free(lane_h);
    *out = b.p;
    *len = b.len;
    return PARDO_OK;
oom:
    free(b.p);
    free(types);
    free(depth);
    free(parts);
    free(lane_y);
    free(lane_h);
    return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory drawing the timeline", m->source);
}
