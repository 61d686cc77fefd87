/* check_main.c - runs every suite of check_suites.h; a suite that is not
 * linked into the binary counts as a failure. CK_RUN_SUITE=name runs one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"

int main(void) {
    SRunner *sr = srunner_create(NULL);
    int missing = 0;
    const char *only = getenv("CK_RUN_SUITE");
#define PARDO_SUITE_ADD(m)                                                   \
    if (make_##m##_suite) {                                                  \
        srunner_add_suite(sr, make_##m##_suite());                           \
    } else if (!only || strcmp(only, #m) == 0) {                             \
        fprintf(stderr, "check_pardo: suite '%s' is not linked\n", #m);      \
        missing++;                                                           \
    }
    PARDO_SUITES(PARDO_SUITE_ADD)
#undef PARDO_SUITE_ADD
    srunner_run_all(sr, CK_NORMAL);
    int run = srunner_ntests_run(sr);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    printf("unit: %d passed, %d failed\n", run - failed, failed + missing);
    return (failed == 0 && missing == 0) ? EXIT_SUCCESS : EXIT_FAILURE;
}
