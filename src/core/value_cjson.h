/* value_cjson.h - internal bridge between cJSON trees and pardo_value, for
 * the JSON files of src/ only (graph_json.c, value_json.c). Not public. */
#ifndef PARDO_VALUE_CJSON_H
#define PARDO_VALUE_CJSON_H

#include <cJSON.h>

#include "core/status.h"
#include "core/value.h"

/* Deep-converts a cJSON item into *out (overwritten). PARDO_ENOMEM on failure. */
int pardo_value_from_cjson(const cJSON *item, pardo_value *out, pardo_status *st);

/* A new cJSON tree for v (caller frees with cJSON_Delete); NULL when out of memory. */
cJSON *pardo_value_to_cjson(const pardo_value *v);

/* Line and column (1-based) of byte offset `off` in text. */
void pardo_text_position(const char *text, size_t off, int *line, int *col);

#endif
