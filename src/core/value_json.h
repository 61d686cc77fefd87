/* value_json.h - JSON text to pardo_value and back (cJSON inside, not in
 * this header). Used for attrs given as text (tests, `pardo ops`) and by
 * graph_json.c. */
#ifndef PARDO_VALUE_JSON_H
#define PARDO_VALUE_JSON_H

#include <stddef.h>

#include "core/status.h"
#include "core/value.h"

/* Parses JSON text into a new value (*out, caller frees with
 * pardo_value_free). Syntax errors are PARDO_EPARSE with "line L, column C:
 * expected ...". Positions of values are not recorded. */
int pardo_value_parse_json(const char *text, pardo_value **out, pardo_status *st);

/* Prints v as compact JSON; the caller frees the returned string with free().
 * NULL when out of memory. */
char *pardo_value_to_json(const pardo_value *v);

#endif
