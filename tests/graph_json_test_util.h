/* graph_json_test_util.h - what the graph file suites share
 * (check_graph_json.c: loading, positions and round trips;
 * check_graph_json_errors.c: the errors): a graph that uses every field of
 * the format, parsing that must succeed, and where a marker sits in text. */
#ifndef PARDO_GRAPH_JSON_TEST_UTIL_H
#define PARDO_GRAPH_JSON_TEST_UTIL_H

#include "core/graph.h"

/* A three-block graph file using every field of the format (doc, every init fill, values of every dtype,
 * tensor_arrays, attrs nested, roles, a parallel_do's block, an empty block). */
extern const char test_full_graph[];

/* Line and column (1-based, bytes) of the first `marker` in text; fails the test when it is not there. */
void test_marker_pos(const char *text, const char *marker, int *line, int *col);

/* text parsed as "g.json" (no passes run); fails the test on error. The caller frees with pardo_program_free. */
pardo_program *test_parse_ok(const char *text);

#endif
