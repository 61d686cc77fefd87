/* value.h - a small JSON-like value tree, used for op attrs and anything of
 * the graph file that has no fixed shape. Keeps cJSON out of public headers.
 * Each value remembers its line and column in the source file (0 if none). */
#ifndef PARDO_VALUE_H
#define PARDO_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum pardo_value_kind {
    PARDO_V_NULL = 0,
    PARDO_V_BOOL,
    PARDO_V_NUMBER,
    PARDO_V_STRING,
    PARDO_V_ARRAY,
    PARDO_V_OBJECT,
} pardo_value_kind;

typedef struct pardo_value {
    pardo_value_kind kind;
    bool boolean;               // PARDO_V_BOOL
    double number;              // PARDO_V_NUMBER
    char *string;               // PARDO_V_STRING, owned
    int n;                      // elements (array) or members (object)
    struct pardo_value *items;  // n values, owned
    char **keys;                // object member names (n), owned
    int line, col;              // position in the source file; 0 when built in code
} pardo_value;

/* Constructors: each returns a new heap value the caller frees with
 * pardo_value_free, or NULL when out of memory. */
pardo_value *pardo_value_new_object(void);
pardo_value *pardo_value_new_array(void);
pardo_value *pardo_value_new_number(double v);
pardo_value *pardo_value_new_string(const char *s);
pardo_value *pardo_value_new_bool(bool b);

/* Frees v and everything under it. NULL is a no-op. */
void pardo_value_free(pardo_value *v);

/* Releases what v owns without freeing v itself (for values held inline). */
void pardo_value_clear(pardo_value *v);

/* Deep copy into *dst (which is overwritten, not freed). PARDO_ENOMEM on failure. */
int pardo_value_copy(pardo_value *dst, const pardo_value *src, pardo_status *st);

/* Deep copy on the heap; NULL when out of memory. */
pardo_value *pardo_value_clone(const pardo_value *src);

/* Appends a deep copy of item to array `arr`; sets (replaces) member `key`
 * of object `obj` to a deep copy of item. PARDO_ENOMEM on failure. */
int pardo_value_append(pardo_value *arr, const pardo_value *item, pardo_status *st);
int pardo_value_set(pardo_value *obj, const char *key, const pardo_value *item, pardo_status *st);

/* Member `key` of an object, or NULL (also when obj is NULL or no object).
 * Borrowed: valid while obj lives. */
const pardo_value *pardo_value_get(const pardo_value *obj, const char *key);

/* True when v is a number with an integral value that fits int64. */
bool pardo_value_is_integer(const pardo_value *v);

/* Kind as a word for messages: "null", "bool", "number", "string", "array", "object". */
const char *pardo_value_kind_name(pardo_value_kind k);

/* Structural equality (numbers compared exactly, object members by key). */
bool pardo_value_equal(const pardo_value *a, const pardo_value *b);

/* True when v (may be NULL) is the string `name` or holds it at any depth
 * (an attr that names a var). */
bool pardo_value_names(const pardo_value *v, const char *name);

#endif
