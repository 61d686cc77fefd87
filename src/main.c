/* main.c - the pardo command line: dispatches to cli_<command>.c. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "pardo: under construction\n");
    return 2;
}
