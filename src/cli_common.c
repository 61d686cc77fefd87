/* cli_common.c - helpers shared by the subcommands (see cli.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "graph_json.h"
#include "pass.h"

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "pardo %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'pardo %s --help')\n", cmd);
    return CLI_BAD_INPUT;
}

void cli_print_error(const pardo_status *st) { fprintf(stderr, "pardo: %s\n", st->msg); }

bool cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

bool cli_parse_int(const char *cmd, const char *flag, const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || !end || end == text || *end || v < lo || v > hi) {
        cli_usage_error(cmd, "%s expects an integer from %ld to %ld, got '%s'", flag, lo, hi, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_double(const char *cmd, const char *flag, const char *text, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || !end || end == text || *end || !(v >= lo && v <= hi)) {
        cli_usage_error(cmd, "%s expects a number from %g to %g, got '%s'", flag, lo, hi, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_flag_is(const char *arg, const char *flag) {
    size_t n = strlen(flag);
    return strncmp(arg, flag, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

const char *cli_flag_value(const char *cmd, int argc, char **argv, int *i, const char *flag) {
    const char *arg = argv[*i];
    size_t n = strlen(flag);
    if (arg[n] == '=') return arg + n + 1;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "%s needs a value", flag);
        return NULL;
    }
    return argv[++*i];
}

pardo_program *cli_load_checked(const char *path) {
    pardo_status st;
    pardo_program *p = NULL;
    pardo_status_clear(&st);
    if (pardo_graph_load(path, &p, &st) != PARDO_OK) {
        cli_print_error(&st);
        return NULL;
    }
    pardo_pass_options opt = {0};
    if (pardo_pass_check(p, &opt, &st) != PARDO_OK) {
        cli_print_error(&st);
        pardo_program_free(p);
        return NULL;
    }
    return p;
}
