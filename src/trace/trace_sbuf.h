/* trace_sbuf.h - the growable text buffer the trace writer (trace_write.c)
 * and the SVG timeline (trace_svg.c) build their output in: appends that
 * double the buffer as needed, and an oom flag that a failed growth sets
 * and every later append respects (the caller checks it once at the end).
 * Internal to src/trace/; the buffer is the caller's (free b->p). */
#ifndef PARDO_TRACE_SBUF_H
#define PARDO_TRACE_SBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *p;    // the text, NUL-terminated; owned by the caller once built
    size_t len; // bytes of text
    size_t cap; // bytes allocated
    bool oom;   // a growth failed: nothing more is appended
} sbuf;

/* Room for n more bytes and the NUL; false (oom set) when it cannot grow. */
static inline bool sb_reserve(sbuf *b, size_t n) {
    if (b->oom) return false;
    if (b->len + n + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static inline void sb_put(sbuf *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static inline void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static inline void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_put(b, tmp, (size_t)n);
        return;
    }
    if (!sb_reserve(b, (size_t)n)) return; /* longer: formatted again, straight into the buffer */
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

#endif
