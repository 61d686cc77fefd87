/* json_pos.h - positions in JSON text. cJSON keeps no positions, so
 * graph_json.c scans the text (already accepted by cJSON) once more with
 * this scanner and pairs the two in document order; and when cJSON rejects
 * text, says where and why in words. */
#ifndef PARDO_JSON_POS_H
#define PARDO_JSON_POS_H

#include <stddef.h>

#include "core/status.h"

/* One JSON value of the text. Lines and columns are 1-based; columns count
 * bytes, so a tab or a UTF-8 sequence moves them by its byte count. */
typedef struct pardo_json_pos {
    int line, col;         // first byte of the value
    int key_line, key_col; // opening quote of its member name; 0 when not an object member
    int count;             // values in this subtree, itself included (>= 1)
} pardo_json_pos;

/* Scans `text` (len bytes; no NUL needed at text[len]) and records every
 * value in pre-order: a value, then the values inside it in text order, an
 * object's member values with the position of their names. This is the order
 * of a walk over a cJSON tree that visits an item, then its children from
 * `child` along `next`, so entry k belongs to the k-th item of that walk. The
 * scanner reads JSON as cJSON 1.7 does (a UTF-8 byte order mark and bytes up
 * to 32 are skipped) but only finds where values start: run it on text cJSON
 * accepted. On success *out (caller frees with free()) holds *n entries.
 * Text it cannot follow is PARDO_EPARSE (with the byte offset); out of memory
 * is PARDO_ENOMEM. Thread-safe. */
int pardo_json_scan(const char *text, size_t len, pardo_json_pos **out, int *n, pardo_status *st);

/* Explains why cJSON rejected `text` (len bytes, and a NUL at text[len]),
 * given the offset where cJSON stopped (its return_parse_end): fills *line
 * and *col (1-based, as pardo_json_scan counts) and writes into msg (n
 * bytes) one of "unexpected end of file", "unexpected text after the end of
 * the top-level value", "unterminated string", "nested deeper than 1000
 * levels" or "syntax error near '...'" quoting the text there. Corrects
 * cJSON's position where it stops one byte past a bad member name. */
void pardo_json_explain_error(const char *text, size_t len, size_t stop, int *line, int *col, char *msg, size_t n);

#endif
