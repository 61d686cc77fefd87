/* json_pos.c - positions of the values of a JSON text (see json_pos.h). */
#include "io/json_pos.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/value_cjson.h"

/* Deeper than cJSON's nesting limit (1000), so valid text never hits it. */
#define SCAN_MAX_DEPTH 1100

typedef struct scanner {
    const unsigned char *s;
    size_t len, i;           // text and the offset read up to (bytes)
    int line;                // line of s[i]
    size_t line_start;       // offset of the first byte of that line
    pardo_json_pos *pos;     // entries so far
    int n, cap;
    bool oom;
} scanner;

static void step(scanner *sc) {
    if (sc->s[sc->i] == '\n') {
        sc->line++;
        sc->line_start = sc->i + 1;
    }
    sc->i++;
}

static void skip_ws(scanner *sc) {
    while (sc->i < sc->len && sc->s[sc->i] <= 32) step(sc);
}

static bool at(const scanner *sc, char c) { return sc->i < sc->len && sc->s[sc->i] == (unsigned char)c; }

static int col_of(const scanner *sc) { return (int)(sc->i - sc->line_start) + 1; }

/* Skips a string starting at its opening quote, as cJSON finds its end. */
static bool skip_string(scanner *sc) {
    step(sc);
    while (sc->i < sc->len) {
        unsigned char c = sc->s[sc->i];
        if (c == '"') {
            step(sc);
            return true;
        }
        if (c == '\\') {
            if (sc->i + 1 >= sc->len) return false;
            step(sc);
        }
        step(sc);
    }
    return false;
}

static bool is_number_byte(unsigned char c) {
    return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == 'e' || c == 'E' || c == '.';
}

static bool skip_literal(scanner *sc, const char *word) {
    size_t n = strlen(word);
    if (sc->len - sc->i < n || memcmp(sc->s + sc->i, word, n) != 0) return false;
    for (size_t k = 0; k < n; k++) step(sc);
    return true;
}

static int push(scanner *sc, int key_line, int key_col) {
    if (sc->n == sc->cap) {
        int cap = sc->cap ? sc->cap * 2 : 64;
        pardo_json_pos *p = realloc(sc->pos, (size_t)cap * sizeof(*p));
        if (!p) {
            sc->oom = true;
            return -1;
        }
        sc->pos = p;
        sc->cap = cap;
    }
    pardo_json_pos *e = &sc->pos[sc->n];
    e->line = sc->line;
    e->col = col_of(sc);
    e->key_line = key_line;
    e->key_col = key_col;
    e->count = 1;
    return sc->n++;
}

/* Scans one value at sc->i (whitespace already skipped). */
static bool scan_value(scanner *sc, int depth, int key_line, int key_col) {
    if (sc->i >= sc->len || depth > SCAN_MAX_DEPTH) return false;
    int self = push(sc, key_line, key_col);
    if (self < 0) return false;
    unsigned char c = sc->s[sc->i];
    bool ok = true;
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        char close = obj ? '}' : ']';
        step(sc);
        skip_ws(sc);
        if (at(sc, close)) {
            step(sc);
        } else {
            for (;;) {
                int kl = 0, kc = 0;
                if (obj) {
                    if (!at(sc, '"')) return false;
                    kl = sc->line;
                    kc = col_of(sc);
                    if (!skip_string(sc)) return false;
                    skip_ws(sc);
                    if (!at(sc, ':')) return false;
                    step(sc);
                    skip_ws(sc);
                }
                if (!scan_value(sc, depth + 1, kl, kc)) return false;
                skip_ws(sc);
                if (at(sc, ',')) {
                    step(sc);
                    skip_ws(sc);
                    continue;
                }
                if (!at(sc, close)) return false;
                step(sc);
                break;
            }
        }
    } else if (c == '"') {
        ok = skip_string(sc);
    } else if (c == 't') {
        ok = skip_literal(sc, "true");
    } else if (c == 'f') {
        ok = skip_literal(sc, "false");
    } else if (c == 'n') {
        ok = skip_literal(sc, "null");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        while (sc->i < sc->len && is_number_byte(sc->s[sc->i])) step(sc);
    } else {
        ok = false;
    }
    sc->pos[self].count = sc->n - self;
    return ok;
}

int pardo_json_scan(const char *text, size_t len, pardo_json_pos **out, int *n, pardo_status *st) {
    scanner sc = {.s = (const unsigned char *)text, .len = len, .line = 1};
    *out = NULL;
    *n = 0;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) sc.i = 3; // cJSON skips a BOM; columns still count its bytes
    skip_ws(&sc);
    bool ok = scan_value(&sc, 0, 0, 0);
    if (ok) {
        skip_ws(&sc);
        ok = sc.i == len;
    }
    if (!ok) {
        free(sc.pos);
        if (sc.oom) return pardo_errorf(st, PARDO_ENOMEM, "out of memory scanning JSON");
        return pardo_errorf(st, PARDO_EPARSE, "JSON position scan stopped at byte %zu", sc.i);
    }
    *out = sc.pos;
    *n = sc.n;
    return PARDO_OK;
}

/* Reads text[0, off) as JSON tokens: *open_quote gets the offset of the
 * quote of the string off is inside (or SIZE_MAX), *depth the brackets open
 * at off, *inner the innermost of them ('{', '[', or 0 when none or too deep). */
static void prefix_state(const char *text, size_t off, size_t *open_quote, int *depth, char *inner) {
    char stack[CJSON_NESTING_LIMIT + 8];
    *open_quote = SIZE_MAX;
    *depth = 0;
    for (size_t i = 0; i < off; i++) {
        char c = text[i];
        if (*open_quote != SIZE_MAX) {
            if (c == '\\') i++;
            else if (c == '"') *open_quote = SIZE_MAX;
        } else if (c == '"') {
            *open_quote = i;
        } else if (c == '[' || c == '{') {
            if (*depth >= 0 && *depth < (int)sizeof stack) stack[*depth] = c;
            (*depth)++;
        } else if (c == ']' || c == '}') {
            (*depth)--;
        }
    }
    *inner = (*depth > 0 && *depth <= (int)sizeof stack) ? stack[*depth - 1] : 0;
}

/* True when the last byte before `at` that is not white space is a comma
 * (`[1, 2,]`, `{"a": 1,}`), outside a string; *comma gets its offset. */
static bool trailing_comma(const char *text, size_t at, size_t *comma) {
    size_t b = at, q;
    int d;
    char in_k;
    while (b > 0 && (unsigned char)text[b - 1] <= 32) b--;
    if (b == 0 || text[b - 1] != ',') return false;
    prefix_state(text, b - 1, &q, &d, &in_k);
    if (q != SIZE_MAX) return false; /* inside a string */
    *comma = b - 1;
    return true;
}

void pardo_json_explain_error(const char *text, size_t len, size_t stop, int *line, int *col, char *msg, size_t n) {
    size_t off = stop > len ? len : stop;
    const char *end = NULL;
    cJSON *prefix = cJSON_ParseWithLengthOpts(text, len + 1, &end, 0);
    if (prefix) { /* a whole value, then more */
        cJSON_Delete(prefix);
        off = (size_t)(end - text);
        while (off < len && (unsigned char)text[off] <= 32) off++;
        pardo_text_position(text, off, line, col);
        snprintf(msg, n, "unexpected text after the end of the top-level value");
        return;
    }
    size_t quote;
    int depth;
    char inner;
    prefix_state(text, off, &quote, &depth, &inner);
    if (quote != SIZE_MAX) { /* cJSON stops just inside a string it cannot read */
        bool closed = false;
        for (size_t i = off; i < len && !closed; i++) {
            if (text[i] == '\\') i++;
            else closed = text[i] == '"';
        }
        if (!closed) {
            pardo_text_position(text, quote, line, col);
            snprintf(msg, n, "unterminated string");
            return;
        }
    }
    /* where a member name should start but does not, cJSON stops one byte
     * past it: step back onto it */
    if (off > 0 && (unsigned char)text[off - 1] > 32 && text[off - 1] != '"') {
        size_t k = off - 1, b = k, q;
        int d;
        char in_k;
        prefix_state(text, k, &q, &d, &in_k);
        while (b > 0 && (unsigned char)text[b - 1] <= 32) b--;
        if (in_k == '{' && q == SIZE_MAX && b > 0 && (text[b - 1] == ',' || (text[b - 1] == '{' && text[k] != '}')))
            off = k;
    }
    size_t rest = off;
    while (rest < len && (unsigned char)text[rest] <= 32) rest++;
    pardo_text_position(text, off, line, col);
    if (rest >= len) {
        snprintf(msg, n, "unexpected end of file");
    } else if (depth >= CJSON_NESTING_LIMIT && (text[off] == '[' || text[off] == '{')) {
        snprintf(msg, n, "nested deeper than %d levels", CJSON_NESTING_LIMIT);
    } else if ((text[rest] == '}' || text[rest] == ']') && trailing_comma(text, rest, &off)) {
        pardo_text_position(text, off, line, col);
        snprintf(msg, n, "a trailing comma before '%c' (JSON allows none)", text[rest]);
    } else {
        char snip[128];
        size_t o = 0;
        for (size_t i = off; i < len && i < off + 24 && text[i] != '\n'; i++) {
            unsigned char c = (unsigned char)text[i];
            if (c < 32 || c == 127) o += (size_t)snprintf(snip + o, sizeof snip - o, "\\x%02x", c);
            else snip[o++] = (char)c;
        }
        snip[o] = '\0';
        snprintf(msg, n, "syntax error near '%s'", snip);
    }
}
