/* status.h - pardo's one error type: a code from one X-macro list plus a
 * message that names the file, the place in it and what was expected. */
#ifndef PARDO_STATUS_H
#define PARDO_STATUS_H

#include <stdbool.h>

/* X(name, value, text): every status code pardo returns, with its meaning. */
#define PARDO_STATUS_MAP(X)                                  \
    X(OK, 0, "ok")                                           \
    X(EINVAL, -1, "invalid argument")                        \
    X(ENOMEM, -2, "out of memory")                           \
    X(EPARSE, -3, "parse error")                             \
    X(EIO, -4, "i/o error")                                  \
    X(ENOTSUP, -5, "not supported")                          \
    X(ECANCELED, -6, "canceled")                             \
    X(ECUDA, -7, "cuda error")                               \
    X(ESHAPE, -8, "shape or dtype mismatch")                 \
    X(ENOTFOUND, -9, "not found")                            \
    X(ERUNTIME, -10, "run-time failure")

typedef enum pardo_code {
#define PARDO_STATUS_ENUM(name, value, text) PARDO_##name = (value),
    PARDO_STATUS_MAP(PARDO_STATUS_ENUM)
#undef PARDO_STATUS_ENUM
} pardo_code;

#define PARDO_MSG_MAX 1024

/* A status: code PARDO_OK (0) or a negative pardo_code, and a message.
 * Fallible functions take a `pardo_status *st` they fill on error and return
 * the code; callers own the struct (usually on their stack). */
typedef struct pardo_status {
    int code;
    char msg[PARDO_MSG_MAX];
} pardo_status;

/* Resets st to PARDO_OK with an empty message. st may be NULL. */
void pardo_status_clear(pardo_status *st);

/* Sets st's code and a printf-style message; returns code, so that
 * `return pardo_errorf(st, PARDO_EINVAL, "...")` reads naturally.
 * st may be NULL (the message is dropped). Thread-safe for distinct st. */
int pardo_errorf(pardo_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends a printf-style context ("file.json: ") to st's message, keeping
 * its code; returns the code. Does nothing when st is OK or NULL. */
int pardo_status_prefix(pardo_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends a printf-style note (" (inputs: ...)") to st's message, keeping its
 * code; returns the code. Does nothing when st is OK or NULL; a message that
 * would grow past PARDO_MSG_MAX is cut. */
int pardo_status_suffix(pardo_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The name of a code ("EINVAL"); "EUNKNOWN" for values not in the map. */
const char *pardo_code_name(int code);

/* The meaning of a code ("invalid argument"). */
const char *pardo_code_text(int code);

/* Aborts with file, line and message when cond is false. Stays on in release
 * builds; only for pardo's own broken invariants, never for bad input. */
#define PARDO_ASSERT(cond)                                                \
    do {                                                                  \
        if (!(cond)) pardo_assert_fail(__FILE__, __LINE__, #cond);        \
    } while (0)

_Noreturn void pardo_assert_fail(const char *file, int line, const char *cond);

#endif
