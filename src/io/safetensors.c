/* safetensors.c - checkpoints in the safetensors format (see safetensors.h).
 *
 * A file is: N as a u64 little-endian, N bytes of JSON header
 *     {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
 *      "__metadata__": {"k": "v"}}
 * (padded with spaces), then the data buffer. Offsets count from the start of
 * the data buffer; the entries must cover it exactly, without holes or
 * overlaps. The header is parsed with cJSON, which stays inside this file. */
#include "io/safetensors.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/bytes.h"
#include "io/file_io.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors.c copies little-endian data as is; big-endian hosts are not supported");

#define ST_MAX_HEADER 100000000u /* bytes; larger header lengths are rejected (as the reference reader does) */
#define ST_HEADER_ALIGN 8        /* the writer pads the header to a multiple of this many bytes */
#define ST_SUPPORTED "F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, BOOL"
#define ST_MAX_INT 9007199254740992.0 /* 2^53: JSON numbers above it do not hold integers exactly */

/* The safetensors dtype names, by pardo dtype. */
static const char *const st_dtype_names[PARDO_DTYPE_COUNT] = {
    [PARDO_F32] = "F32", [PARDO_F64] = "F64", [PARDO_I32] = "I32", [PARDO_I64] = "I64", [PARDO_BOOL] = "BOOL",
    [PARDO_U8] = "U8",   [PARDO_I8] = "I8",   [PARDO_I16] = "I16", [PARDO_U16] = "U16", [PARDO_U32] = "U32",
    [PARDO_U64] = "U64", [PARDO_F16] = "F16", [PARDO_BF16] = "BF16"};

/* One header entry, validated. */
typedef struct st_entry {
    const char *name;  // borrowed from the cJSON tree
    pardo_dtype dtype;
    int ndim;
    int64_t shape[PARDO_MAX_DIMS];  // sizes
    uint64_t begin, end;            // data_offsets: bytes from the start of the data buffer
    int index;                      // position in the header
} st_entry;

static const char *json_kind(const cJSON *j) {
    if (cJSON_IsObject(j)) return "an object";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    return "an unknown value";
}

/* True when j is an integer in [0, 2^53]; stores it in *out. */
static bool json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_INT)) return false;
    uint64_t v = (uint64_t)d;
    if ((double)v != d) return false;
    *out = v;
    return true;
}

/* Writes j for a message: its number, or its kind. */
static const char *json_show(const cJSON *j, char *buf, size_t n) {
    if (cJSON_IsNumber(j)) snprintf(buf, n, "%.17g", j->valuedouble);
    else snprintf(buf, n, "%s", json_kind(j));
    return buf;
}

static int parse_shape(const cJSON *sh, const char *file, const char *name, st_entry *e, pardo_status *st) {
    if (!cJSON_IsArray(sh))
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': key 'shape': expected an array of sizes, found %s",
                            file, name, json_kind(sh));
    int rank = cJSON_GetArraySize(sh);
    if (rank > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': key 'shape': rank %d exceeds %d, the most pardo supports",
                            file, name, rank, PARDO_MAX_DIMS);
    e->ndim = 0;
    for (const cJSON *d = sh->child; d; d = d->next) {
        uint64_t v;
        if (!json_uint(d, &v)) {
            char buf[48];
            return pardo_errorf(st, PARDO_EPARSE,
                                "%s: entry '%s': key 'shape': size %d is %s, expected an integer >= 0", file, name,
                                e->ndim, json_show(d, buf, sizeof buf));
        }
        e->shape[e->ndim++] = (int64_t)v;
    }
    return PARDO_OK;
}

/* Bytes the entry's dtype and shape need; -1 when that overflows int64. */
static int64_t entry_nbytes(const st_entry *e) {
    int64_t item = (int64_t)pardo_dtype_size(e->dtype), n = item;
    for (int d = 0; d < e->ndim; d++)
        if (e->shape[d] == 0) return 0;
    for (int d = 0; d < e->ndim; d++) {
        if (n > INT64_MAX / e->shape[d]) return -1;
        n *= e->shape[d];
    }
    return n;
}

/* Validates one entry against the data buffer of data_size bytes. */
static int parse_entry(const cJSON *j, const char *file, uint64_t data_size, st_entry *e, pardo_status *st) {
    const char *name = j->string;
    e->name = name;
    if (!cJSON_IsObject(j))
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: entry '%s': expected an object with dtype, shape and data_offsets, found %s", file,
                            name, json_kind(j));
    const cJSON *dt = NULL, *sh = NULL, *off = NULL;
    for (const cJSON *c = j->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &dt
                             : strcmp(c->string, "shape") == 0        ? &sh
                             : strcmp(c->string, "data_offsets") == 0 ? &off
                                                                      : NULL;
        if (!slot)
            return pardo_errorf(st, PARDO_EPARSE,
                                "%s: entry '%s': unexpected key '%s' (expected dtype, shape and data_offsets)", file,
                                name, c->string);
        if (*slot) return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': duplicate key '%s'", file, name, c->string);
        *slot = c;
    }
    const char *missing = !dt ? "dtype" : !sh ? "shape" : !off ? "data_offsets" : NULL;
    if (missing)
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': missing key '%s' (expected dtype, shape and data_offsets)",
                            file, name, missing);

    if (!cJSON_IsString(dt))
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': key 'dtype': expected a string such as \"F32\", found %s",
                            file, name, json_kind(dt));
    e->dtype = PARDO_DTYPE_UNKNOWN;
    for (int k = 0; k < PARDO_DTYPE_COUNT; k++)
        if (strcmp(dt->valuestring, st_dtype_names[k]) == 0) e->dtype = (pardo_dtype)k;
    if (e->dtype == PARDO_DTYPE_UNKNOWN)
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': unsupported dtype '%s' (supported: %s)", file, name,
                            dt->valuestring, ST_SUPPORTED);

    int rc = parse_shape(sh, file, name, e, st);
    if (rc != PARDO_OK) return rc;
    char shape_s[256];
    pardo_shape_str(e->ndim, e->shape, shape_s, sizeof shape_s);
    int64_t need = entry_nbytes(e);
    if (need < 0)
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': shape %s holds more bytes than pardo can address", file,
                            name, shape_s);

    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &e->begin) ||
        !json_uint(off->child->next, &e->end))
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: entry '%s': key 'data_offsets': expected [begin, end], two integers >= 0", file,
                            name);
    unsigned long long b = e->begin, en = e->end;
    if (e->begin > e->end)
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': data_offsets [%llu, %llu]: begin is after end", file,
                            name, b, en);
    if (e->end > data_size)
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: entry '%s': data_offsets [%llu, %llu] go past the end of the data buffer (%llu bytes)",
                            file, name, b, en, (unsigned long long)data_size);
    if (e->end - e->begin != (uint64_t)need)
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: entry '%s': data_offsets [%llu, %llu] hold %llu bytes, expected %lld for %s %s", file,
                            name, b, en, en - b, (long long)need, st_dtype_names[e->dtype], shape_s);
    return PARDO_OK;
}

/* "__metadata__": an object of strings, which pardo ignores. */
static int check_metadata(const cJSON *j, const char *file, pardo_status *st) {
    if (!cJSON_IsObject(j))
        return pardo_errorf(st, PARDO_EPARSE, "%s: entry '__metadata__': expected an object of strings, found %s", file,
                            json_kind(j));
    for (const cJSON *c = j->child; c; c = c->next)
        if (!cJSON_IsString(c))
            return pardo_errorf(st, PARDO_EPARSE, "%s: entry '__metadata__': key '%s': expected a string, found %s",
                                file, c->string, json_kind(c));
    return PARDO_OK;
}

static int cmp_by_name(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int cmp_by_offset(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Checks names are unique and that the entries tile [0, data_size) exactly;
 * sorts e by offset. */
static int check_layout(st_entry *e, int n, const char *file, uint64_t data_size, pardo_status *st) {
    if (n > 1) qsort(e, (size_t)n, sizeof(*e), cmp_by_name);
    for (int k = 1; k < n; k++)
        if (strcmp(e[k - 1].name, e[k].name) == 0)
            return pardo_errorf(st, PARDO_EPARSE, "%s: entry '%s': duplicate name (entries %d and %d of the header)",
                                file, e[k].name, e[k - 1].index, e[k].index);
    if (n > 1) qsort(e, (size_t)n, sizeof(*e), cmp_by_offset);
    uint64_t pos = 0;
    for (int k = 0; k < n; k++) {
        unsigned long long b = e[k].begin, en = e[k].end;
        if (e[k].begin < pos)
            return pardo_errorf(st, PARDO_EPARSE,
                                "%s: entry '%s': data_offsets [%llu, %llu] overlap entry '%s' [%llu, %llu] "
                                "(expected contiguous, non-overlapping data)",
                                file, e[k].name, b, en, e[k - 1].name, (unsigned long long)e[k - 1].begin,
                                (unsigned long long)e[k - 1].end);
        if (e[k].begin > pos)
            return pardo_errorf(st, PARDO_EPARSE,
                                "%s: entry '%s': data_offsets [%llu, %llu] leave a hole at bytes [%llu, %llu) "
                                "(expected the data of each entry to start where the previous one ends)",
                                file, e[k].name, b, en, (unsigned long long)pos, b);
        pos = e[k].end;
    }
    if (pos != data_size)
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: the entries cover %llu bytes of data, the file has %llu (expected the entries to "
                            "cover the whole data buffer)",
                            file, (unsigned long long)pos, (unsigned long long)data_size);
    return PARDO_OK;
}

/* Drops the entries of l past its first n. */
static void list_truncate(pardo_tensor_list *l, int n) {
    while (l->n > n) {
        l->n--;
        free(l->names[l->n]);
        pardo_tensor_release(l->tensors[l->n]);
    }
}

int pardo_safetensors_parse(const void *buf, size_t n, const char *name, pardo_tensor_list *out,
                            pardo_status *st) {
    const unsigned char *p = buf;
    if (n < 8)
        return pardo_errorf(st, PARDO_EPARSE, "%s: truncated: file has %zu bytes, expected at least 8 (the header length)",
                            name, n);
    uint64_t hn = pardo_load_u64le(p);
    if (hn > ST_MAX_HEADER)
        return pardo_errorf(st, PARDO_EPARSE, "%s: byte 0: header length %llu is too large (expected at most %u bytes)",
                            name, (unsigned long long)hn, ST_MAX_HEADER);
    if (hn > n - 8)
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: byte 0: truncated: header length %llu goes past the end of the file (%zu bytes follow)",
                            name, (unsigned long long)hn, n - 8);
    uint64_t data_size = n - 8 - hn;
    const unsigned char *data = p + 8 + hn;

    int rc = PARDO_OK, n0 = out->n, count = 0;
    st_entry *e = NULL;
    pardo_tensor **ts = NULL;
    cJSON *root = NULL;
    char *text = malloc(hn + 1);
    if (!text) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory for a %llu-byte header", name, (unsigned long long)hn);
        goto done;
    }
    if (hn) memcpy(text, p + 8, hn);
    text[hn] = '\0';
    const char *end = NULL;
    root = cJSON_ParseWithOpts(text, &end, 1);
    size_t at = end ? (size_t)(end - text) : 0;
    if (!root || at != hn) {
        const char *what = !root ? "invalid JSON in the header" : "expected the end of the header";
        if (at < hn) {
            unsigned char c = (unsigned char)text[at];
            if (c > 0x20 && c < 0x7f)
                rc = pardo_errorf(st, PARDO_EPARSE, "%s: byte %zu: %s (found '%c')", name, 8 + at, what, c);
            else rc = pardo_errorf(st, PARDO_EPARSE, "%s: byte %zu: %s (found byte 0x%02x)", name, 8 + at, what, c);
        } else {
            rc = pardo_errorf(st, PARDO_EPARSE, "%s: byte %zu: %s (found the end of the header)", name, 8 + at, what);
        }
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        rc = pardo_errorf(st, PARDO_EPARSE, "%s: header: expected a JSON object, found %s", name, json_kind(root));
        goto done;
    }
    int total = cJSON_GetArraySize(root);
    if (total > 0 && !(e = calloc((size_t)total, sizeof(*e)))) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", name);
        goto done;
    }
    bool have_meta = false;
    int idx = 0;
    for (const cJSON *c = root->child; c; c = c->next, idx++) {
        if (strcmp(c->string, "__metadata__") == 0) {
            if (have_meta) {
                rc = pardo_errorf(st, PARDO_EPARSE, "%s: entry '__metadata__': duplicate name", name);
                goto done;
            }
            have_meta = true;
            if ((rc = check_metadata(c, name, st)) != PARDO_OK) goto done;
            continue;
        }
        e[count].index = idx;
        if ((rc = parse_entry(c, name, data_size, &e[count], st)) != PARDO_OK) goto done;
        count++;
    }
    if ((rc = check_layout(e, count, name, data_size, st)) != PARDO_OK) goto done;

    if (count > 0 && !(ts = calloc((size_t)count, sizeof(*ts)))) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", name);
        goto done;
    }
    for (int k = 0; k < count; k++) {
        if (!(ts[k] = pardo_tensor_new_cpu(e[k].dtype, e[k].ndim, e[k].shape, st))) {
            rc = pardo_status_prefix(st, "%s: entry '%s': ", name, e[k].name);
            goto done;
        }
        unsigned char *dst = pardo_tensor_data(ts[k]);
        size_t nb = (size_t)(e[k].end - e[k].begin);
        if (nb) memcpy(dst, data + e[k].begin, nb);
        if (e[k].dtype == PARDO_BOOL)
            for (size_t b = 0; b < nb; b++) dst[b] = dst[b] != 0; /* any non-zero byte is true */
    }
    for (int k = 0; k < count; k++) {
        if ((rc = pardo_tensor_list_add(out, e[k].name, ts[k], st)) != PARDO_OK) {
            pardo_status_prefix(st, "%s: ", name);
            list_truncate(out, n0);
            goto done;
        }
    }
done:
    if (ts)
        for (int k = 0; k < count; k++) pardo_tensor_release(ts[k]);
    free(ts);
    free(e);
    cJSON_Delete(root);
    free(text);
    return rc;
}

/* pardo_file_need_fn of a checkpoint read as a stream: the header length
 * first (refused at once when too large), then the header, whose entries'
 * largest end offset says how much data follows. A header that does not
 * parse ends the read there; pardo_safetensors_parse says what is wrong. */
static int stream_need(const unsigned char *buf, size_t n, const char *path, size_t *need, bool *whole,
                       pardo_status *st) {
    *whole = false;
    if (n < 8) {
        *need = 8;
        return PARDO_OK;
    }
    uint64_t hn = pardo_load_u64le(buf);
    if (hn > ST_MAX_HEADER)
        return pardo_errorf(st, PARDO_EPARSE, "%s: byte 0: header length %llu is too large (expected at most %u bytes)",
                            path, (unsigned long long)hn, ST_MAX_HEADER);
    *need = 8 + (size_t)hn;
    if (n < *need) return PARDO_OK;
    *whole = true;
    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hn);
    uint64_t end = 0, e;
    for (const cJSON *c = root && cJSON_IsObject(root) ? root->child : NULL; c; c = c->next) {
        const cJSON *off = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "data_offsets") : NULL;
        if (cJSON_IsArray(off) && cJSON_GetArraySize(off) == 2 && json_uint(off->child->next, &e) && e > end) end = e;
    }
    cJSON_Delete(root);
    if (end > SIZE_MAX - *need)
        return pardo_errorf(st, PARDO_EPARSE, "%s: header: data_offsets end at %llu, more than pardo can address", path,
                            (unsigned long long)end);
    *need += (size_t)end;
    return PARDO_OK;
}

int pardo_safetensors_read(const char *path, pardo_tensor_list *out, pardo_status *st) {
    pardo_file_view v;
    int rc = pardo_file_view_open(path, stream_need, &v, st);
    if (rc != PARDO_OK) return rc;
    rc = pardo_safetensors_parse(v.data, v.n, path, out, st);
    pardo_file_view_close(&v);
    return rc;
}

/* A growable text buffer for the writer's header; `failed` once out of memory. */
typedef struct text_buf {
    char *p;
    size_t n, cap;  // bytes used, bytes allocated
    bool failed;
} text_buf;

static void tb_put(text_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void tb_puts(text_buf *b, const char *s) { tb_put(b, s, strlen(s)); }

/* s as a JSON string, quotes included. Bytes >= 0x80 pass as they are. */
static void tb_json_string(text_buf *b, const char *s) {
    tb_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            tb_put(b, esc, 2);
        } else if (*c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *c);
            tb_put(b, esc, 6);
        } else {
            tb_put(b, (const char *)c, 1);
        }
    }
    tb_put(b, "\"", 1);
}

typedef struct name_ref {
    const char *name;
    int index;
} name_ref;

static int cmp_name_ref(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* PARDO_EINVAL unless the list's names are unique and none is "__metadata__". */
static int check_names(const char *path, const pardo_tensor_list *in, pardo_status *st) {
    if (in->n == 0) return PARDO_OK;
    name_ref *r = malloc((size_t)in->n * sizeof(*r));
    if (!r) return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    for (int k = 0; k < in->n; k++) r[k] = (name_ref){in->names[k], k};
    qsort(r, (size_t)in->n, sizeof(*r), cmp_name_ref);
    int rc = PARDO_OK;
    for (int k = 0; k < in->n && rc == PARDO_OK; k++) {
        if (strcmp(r[k].name, "__metadata__") == 0)
            rc = pardo_errorf(st, PARDO_EINVAL, "%s: tensor %d: the name '__metadata__' is reserved by safetensors",
                              path, r[k].index);
        else if (k > 0 && strcmp(r[k - 1].name, r[k].name) == 0)
            rc = pardo_errorf(st, PARDO_EINVAL, "%s: duplicate tensor name '%s' (tensors %d and %d), expected unique names",
                              path, r[k].name, r[k - 1].index, r[k].index);
    }
    free(r);
    return rc;
}

int pardo_safetensors_write(const char *path, const pardo_tensor_list *in, pardo_status *st) {
    int rc = check_names(path, in, st);
    if (rc != PARDO_OK) return rc;
    text_buf hb = {NULL, 0, 0, false};
    pardo_file_part *parts = calloc((size_t)in->n + 2, sizeof(*parts));
    if (!parts) return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);

    uint64_t off = 0;
    tb_puts(&hb, "{");
    for (int k = 0; k < in->n; k++) {
        pardo_tensor *t = in->tensors[k];
        if (t->dtype < 0 || t->dtype >= PARDO_DTYPE_COUNT) {
            rc = pardo_errorf(st, PARDO_EINVAL, "%s: tensor '%s' has unknown dtype %d", path, in->names[k], (int)t->dtype);
            goto done;
        }
        const void *d = pardo_tensor_cpu(t, st);
        if (!d) {
            rc = pardo_status_prefix(st, "%s: tensor '%s': ", path, in->names[k]);
            goto done;
        }
        parts[k + 2] = (pardo_file_part){d, t->nbytes};
        char num[64];
        if (k) tb_puts(&hb, ",");
        tb_json_string(&hb, in->names[k]);
        tb_puts(&hb, ":{\"dtype\":\"");
        tb_puts(&hb, st_dtype_names[t->dtype]);
        tb_puts(&hb, "\",\"shape\":[");
        for (int i = 0; i < t->ndim; i++) {
            snprintf(num, sizeof num, "%s%lld", i ? "," : "", (long long)t->shape[i]);
            tb_puts(&hb, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + t->nbytes));
        tb_puts(&hb, num);
        off += t->nbytes;
    }
    tb_puts(&hb, "}");
    while (!hb.failed && hb.n % ST_HEADER_ALIGN) tb_puts(&hb, " ");
    if (hb.failed) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory for the header", path);
        goto done;
    }
    unsigned char len8[8];
    pardo_store_u64le(len8, hb.n);
    parts[0] = (pardo_file_part){len8, 8};
    parts[1] = (pardo_file_part){hb.p, hb.n};
    rc = pardo_file_write_atomic(path, parts, in->n + 2, st);
done:
    free(parts);
    free(hb.p);
    return rc;
}
