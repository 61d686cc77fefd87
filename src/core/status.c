/* status.c - error codes and messages (see status.h). */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pardo_status_clear(pardo_status *st) {
    if (!st) return;
    st->code = PARDO_OK;
    st->msg[0] = '\0';
}

int pardo_errorf(pardo_status *st, int code, const char *fmt, ...) {
    if (!st) return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
    va_end(ap);
    st->code = code;
    return code;
}

int pardo_status_prefix(pardo_status *st, const char *fmt, ...) {
    if (!st || st->code == PARDO_OK) return st ? st->code : PARDO_OK;
    char prefix[PARDO_MSG_MAX];
    char old[PARDO_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, st->msg, sizeof(old));
    size_t np = strlen(prefix), no = strlen(old);
    if (np > sizeof(st->msg) - 1) np = sizeof(st->msg) - 1;
    if (no > sizeof(st->msg) - 1 - np) no = sizeof(st->msg) - 1 - np;
    memcpy(st->msg, prefix, np);
    memcpy(st->msg + np, old, no);
    st->msg[np + no] = '\0';
    return st->code;
}

int pardo_status_suffix(pardo_status *st, const char *fmt, ...) {
    if (!st || st->code == PARDO_OK) return st ? st->code : PARDO_OK;
    size_t used = strnlen(st->msg, sizeof(st->msg) - 1);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg + used, sizeof(st->msg) - used, fmt, ap);
    va_end(ap);
    return st->code;
}

const char *pardo_code_name(int code) {
    switch (code) {
#define PARDO_STATUS_NAME(name, value, text) \
    case (value):                            \
        return #name;
        PARDO_STATUS_MAP(PARDO_STATUS_NAME)
#undef PARDO_STATUS_NAME
    }
    return "EUNKNOWN";
}

const char *pardo_code_text(int code) {
    switch (code) {
#define PARDO_STATUS_TEXT(name, value, text) \
    case (value):                            \
        return text;
        PARDO_STATUS_MAP(PARDO_STATUS_TEXT)
#undef PARDO_STATUS_TEXT
    }
    return "unknown error";
}

void pardo_assert_fail(const char *file, int line, const char *cond) {
    fprintf(stderr, "pardo: internal error: %s:%d: assertion failed: %s\n", file, line, cond);
    abort();
}
