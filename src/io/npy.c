/* npy.c - NumPy .npy files, read and written by pardo itself (see npy.h).
 *
 * A file is: the magic "\x93NUMPY", major and minor version bytes, the
 * header length (u16 little-endian in version 1, u32 in versions 2 and 3),
 * the header - a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and ended by '\n' - then the raw array data. */
#include "io/npy.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/bytes.h"
#include "io/file_io.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "npy.c copies little-endian data as is; big-endian hosts are not supported");

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64 /* the data starts at a multiple of this many bytes (as NumPy writes) */
#define NPY_SUPPORTED "<f4 <f8 <f2 <i4 <i8 <i2 |i1 <u8 <u4 <u2 |u1 |b1"

/* The descr strings pardo accepts and the dtype each means. */
static const struct {
    const char *descr;
    pardo_dtype dtype;
} npy_dtypes[] = {
    {"<f4", PARDO_F32}, {"<f8", PARDO_F64}, {"<i4", PARDO_I32},
    {"<i8", PARDO_I64}, {"|b1", PARDO_BOOL}, {"<b1", PARDO_BOOL},
    {"|u1", PARDO_U8},  {"|i1", PARDO_I8},   {"<i2", PARDO_I16},
    {"<u2", PARDO_U16}, {"<u4", PARDO_U32},  {"<u8", PARDO_U64},
    {"<f2", PARDO_F16},
};

/* The descr pardo writes, by dtype; NULL: npy has none (bfloat16). */
static const char *const npy_descr_out[PARDO_DTYPE_COUNT] = {
    [PARDO_F32] = "<f4", [PARDO_F64] = "<f8", [PARDO_I32] = "<i4", [PARDO_I64] = "<i8", [PARDO_BOOL] = "|b1",
    [PARDO_U8] = "|u1",  [PARDO_I8] = "|i1",  [PARDO_I16] = "<i2", [PARDO_U16] = "<u2", [PARDO_U32] = "<u4",
    [PARDO_U64] = "<u8", [PARDO_F16] = "<f2", [PARDO_BF16] = NULL};

/* What the header dict said. */
typedef struct npy_header {
    pardo_dtype dtype;
    int ndim;
    int64_t shape[PARDO_MAX_DIMS];  // sizes
} npy_header;

/* A cursor over the header bytes. */
typedef struct hdr_parser {
    const unsigned char *s;  // the header (not NUL-terminated)
    size_t n;                // header length, bytes
    size_t i;                // cursor, index into s
    size_t base;             // file offset of s[0], for messages
    const char *name;        // file name, for messages
    pardo_status *st;
} hdr_parser;

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, KEY_COUNT };
static const char *const key_names[KEY_COUNT] = {"descr", "fortran_order", "shape"};

/* Writes what is at the cursor, for "found ..." in messages. */
static const char *describe_here(const hdr_parser *h, char *buf, size_t n) {
    if (h->i >= h->n) return "the end of the header";
    unsigned char c = h->s[h->i];
    if (c > 0x20 && c < 0x7f) snprintf(buf, n, "'%c'", c);
    else snprintf(buf, n, "byte 0x%02x", c);
    return buf;
}

/* A syntax error at the cursor: "NAME: byte OFF: expected WHAT in the header, found X". */
static int expected_here(hdr_parser *h, const char *what) {
    char found[32];
    return pardo_errorf(h->st, PARDO_EPARSE, "%s: byte %zu: expected %s in the header, found %s", h->name,
                        h->base + h->i, what, describe_here(h, found, sizeof found));
}

/* An error about the value of a key: "NAME: byte OFF: header key 'KEY': ...". */
__attribute__((format(printf, 4, 5))) static int key_error(hdr_parser *h, size_t at, const char *key,
                                                           const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return pardo_errorf(h->st, PARDO_EPARSE, "%s: byte %zu: header key '%s': %s", h->name, h->base + at, key, what);
}

static void skip_ws(hdr_parser *h) {
    while (h->i < h->n && (h->s[h->i] == ' ' || h->s[h->i] == '\t' || h->s[h->i] == '\n' || h->s[h->i] == '\r'))
        h->i++;
}

static bool at_char(const hdr_parser *h, char c) { return h->i < h->n && h->s[h->i] == (unsigned char)c; }

/* Parses a quoted string (single or double quotes, printable ASCII, no
 * escapes) into out (NUL-terminated, cut to cap - 1 characters); *len gets
 * its full length. */
static int parse_string(hdr_parser *h, char *out, size_t cap, size_t *len) {
    if (!at_char(h, '\'') && !at_char(h, '"')) return expected_here(h, "a quoted string");
    unsigned char q = h->s[h->i++];
    size_t k = 0;
    for (;;) {
        if (h->i >= h->n) return expected_here(h, "a closing quote");
        unsigned char c = h->s[h->i];
        if (c == q) break;
        if (c == '\\') return expected_here(h, "a string without escape sequences");
        if (c < 0x20 || c > 0x7e) return expected_here(h, "a printable ASCII character or a closing quote");
        if (k + 1 < cap) out[k] = (char)c;
        k++;
        h->i++;
    }
    h->i++;
    out[k + 1 < cap ? k : cap - 1] = '\0';
    *len = k;
    return PARDO_OK;
}

static int parse_descr(hdr_parser *h, npy_header *hd) {
    size_t at = h->i;
    if (!at_char(h, '\'') && !at_char(h, '"')) {
        char found[32];
        return key_error(h, at, "descr",
                         "expected a dtype string such as '<f4' (structured dtypes are not supported), found %s",
                         describe_here(h, found, sizeof found));
    }
    char d[32];
    size_t len;
    int rc = parse_string(h, d, sizeof d, &len);
    if (rc != PARDO_OK) return rc;
    for (size_t k = 0; k < sizeof npy_dtypes / sizeof npy_dtypes[0]; k++) {
        if (len == strlen(npy_dtypes[k].descr) && strcmp(d, npy_dtypes[k].descr) == 0) {
            hd->dtype = npy_dtypes[k].dtype;
            return PARDO_OK;
        }
    }
    if (d[0] == '>' && len == 3 && strchr("fib", d[1]) && strchr("148", d[2]))
        return key_error(h, at, "descr", "dtype '%s' is big-endian, expected little-endian (supported: %s)", d,
                         NPY_SUPPORTED);
    return key_error(h, at, "descr", "unsupported dtype '%s%s' (supported: %s)", d, len >= sizeof d ? "..." : "",
                     NPY_SUPPORTED);
}

static int parse_fortran(hdr_parser *h) {
    size_t at = h->i, k = h->i;
    while (k < h->n && ((h->s[k] >= 'a' && h->s[k] <= 'z') || (h->s[k] >= 'A' && h->s[k] <= 'Z'))) k++;
    size_t len = k - h->i;
    if (len == 5 && memcmp(h->s + h->i, "False", 5) == 0) {
        h->i = k;
        return PARDO_OK;
    }
    if (len == 4 && memcmp(h->s + h->i, "True", 4) == 0)
        return key_error(h, at, "fortran_order", "True (Fortran order), expected C order (False)");
    return expected_here(h, "True or False for 'fortran_order'");
}

/* One size of the shape tuple: digits, optionally an 'L' (Python 2). */
static int parse_dim(hdr_parser *h, int d, int64_t *out) {
    size_t at = h->i;
    bool neg = at_char(h, '-');
    if (neg) h->i++;
    if (h->i >= h->n || h->s[h->i] < '0' || h->s[h->i] > '9') return expected_here(h, "a size (an integer >= 0)");
    uint64_t v = 0;
    bool overflow = false;
    while (h->i < h->n && h->s[h->i] >= '0' && h->s[h->i] <= '9') {
        unsigned dig = h->s[h->i++] - '0';
        if (v > (UINT64_MAX - dig) / 10) overflow = true;
        else v = v * 10 + dig;
    }
    if (at_char(h, 'L')) h->i++;
    if (neg && (v != 0 || overflow))
        return key_error(h, at, "shape", "size %d is negative (%.*s), expected a size >= 0", d, (int)(h->i - at),
                         (const char *)h->s + at);
    if (overflow || v > (uint64_t)INT64_MAX)
        return key_error(h, at, "shape", "size %d is too large (more than 2^63 - 1)", d);
    *out = (int64_t)v;
    return PARDO_OK;
}

/* A shape tuple: "()", "(3,)", "(2, 3)", "(2, 3,)". */
static int parse_shape(hdr_parser *h, npy_header *hd) {
    size_t at = h->i;
    if (!at_char(h, '(')) {
        char found[32];
        return key_error(h, at, "shape", "expected a tuple such as (2, 3), found %s",
                         describe_here(h, found, sizeof found));
    }
    h->i++;
    skip_ws(h);
    hd->ndim = 0;
    if (at_char(h, ')')) {
        h->i++;
        return PARDO_OK;
    }
    for (;;) {
        if (hd->ndim == PARDO_MAX_DIMS)
            return key_error(h, h->i, "shape", "rank exceeds %d, the most pardo supports", PARDO_MAX_DIMS);
        int rc = parse_dim(h, hd->ndim, &hd->shape[hd->ndim]);
        if (rc != PARDO_OK) return rc;
        hd->ndim++;
        skip_ws(h);
        if (at_char(h, ',')) {
            h->i++;
            skip_ws(h);
            if (at_char(h, ')')) break;
            continue;
        }
        if (at_char(h, ')')) {
            if (hd->ndim == 1) return expected_here(h, "',' after the only size of a 1-D shape, as in (3,)");
            break;
        }
        return expected_here(h, "',' or ')' in the shape");
    }
    h->i++;
    return PARDO_OK;
}

/* Parses the header dict: the three keys, in any order, each once. */
static int parse_header(hdr_parser *h, npy_header *hd) {
    bool seen[KEY_COUNT] = {false, false, false};
    int rc;
    skip_ws(h);
    if (!at_char(h, '{')) return expected_here(h, "'{' opening the header dict");
    h->i++;
    for (;;) {
        skip_ws(h);
        if (at_char(h, '}')) break;
        size_t key_at = h->i;
        char key[40];
        size_t klen;
        if (!at_char(h, '\'') && !at_char(h, '"')) return expected_here(h, "a quoted key or '}'");
        if ((rc = parse_string(h, key, sizeof key, &klen)) != PARDO_OK) return rc;
        int k = 0;
        while (k < KEY_COUNT && !(klen == strlen(key_names[k]) && strcmp(key, key_names[k]) == 0)) k++;
        if (k == KEY_COUNT)
            return key_error(h, key_at, key, "unexpected key (expected 'descr', 'fortran_order' and 'shape')");
        if (seen[k]) return key_error(h, key_at, key, "duplicate key");
        seen[k] = true;
        skip_ws(h);
        if (!at_char(h, ':')) return expected_here(h, "':' after the key");
        h->i++;
        skip_ws(h);
        switch (k) {
        case KEY_DESCR: rc = parse_descr(h, hd); break;
        case KEY_FORTRAN: rc = parse_fortran(h); break;
        default: rc = parse_shape(h, hd); break;
        }
        if (rc != PARDO_OK) return rc;
        skip_ws(h);
        if (at_char(h, ',')) {
            h->i++;
            continue;
        }
        if (!at_char(h, '}')) return expected_here(h, "',' or '}' after a value");
    }
    h->i++;
    skip_ws(h);
    if (h->i != h->n) return expected_here(h, "only spaces after the header dict");
    for (int k = 0; k < KEY_COUNT; k++)
        if (!seen[k])
            return pardo_errorf(h->st, PARDO_EPARSE,
                                "%s: header: missing key '%s' (expected 'descr', 'fortran_order' and 'shape')",
                                h->name, key_names[k]);
    return PARDO_OK;
}

/* The magic, version, header and what the data must be (info->data_offset,
 * info->nbytes), without looking at the data: pardo_npy_parse_header less
 * the data size check. */
static int parse_head(const unsigned char *p, size_t n, const char *name, pardo_npy_info *info, pardo_status *st) {
    memset(info, 0, sizeof(*info));
    if (n == 0) return pardo_errorf(st, PARDO_EPARSE, "%s: empty file, expected a .npy file", name);
    if (n < NPY_MAGIC_LEN || memcmp(p, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        if (n < NPY_MAGIC_LEN && memcmp(p, NPY_MAGIC, n) == 0)
            return pardo_errorf(st, PARDO_EPARSE, "%s: truncated: file has %zu bytes, expected the 6-byte .npy magic",
                                name, n);
        return pardo_errorf(st, PARDO_EPARSE, "%s: byte 0: expected the .npy magic \\x93NUMPY, not a .npy file",
                            name);
    }
    if (n < 8)
        return pardo_errorf(st, PARDO_EPARSE, "%s: truncated: file has %zu bytes, expected the version at byte 6",
                            name, n);
    unsigned major = p[6], minor = p[7];
    if (major < 1 || major > 3 || minor != 0)
        return pardo_errorf(st, PARDO_EPARSE, "%s: byte 6: unsupported .npy version %u.%u (expected 1.0, 2.0 or 3.0)",
                            name, major, minor);
    size_t pre = major == 1 ? 10 : 12;
    if (n < pre)
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: truncated: file has %zu bytes, expected a %zu-byte preamble (header length at byte 8)",
                            name, n, pre);
    size_t hlen = major == 1 ? pardo_load_u16le(p + 8) : pardo_load_u32le(p + 8);
    if (hlen > n - pre)
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: byte 8: truncated header: header length %zu goes past the end of the file "
                            "(%zu bytes follow the preamble)",
                            name, hlen, n - pre);

    npy_header hd = {.dtype = PARDO_DTYPE_UNKNOWN, .ndim = 0};
    hdr_parser h = {.s = p + pre, .n = hlen, .i = 0, .base = pre, .name = name, .st = st};
    int rc = parse_header(&h, &hd);
    if (rc != PARDO_OK) return rc;

    size_t item = pardo_dtype_size(hd.dtype);
    int64_t numel = 1;
    for (int d = 0; d < hd.ndim; d++) {
        if (hd.shape[d] == 0) {
            numel = 0;
            break;
        }
    }
    for (int d = 0; d < hd.ndim && numel != 0; d++) {
        if (numel > INT64_MAX / (int64_t)item / hd.shape[d]) {
            char s[256];
            return pardo_errorf(st, PARDO_EPARSE, "%s: header key 'shape': %s holds more bytes than pardo can address",
                                name, pardo_shape_str(hd.ndim, hd.shape, s, sizeof s));
        }
        numel *= hd.shape[d];
    }
    info->dtype = hd.dtype;
    info->ndim = hd.ndim;
    memcpy(info->shape, hd.shape, sizeof hd.shape);
    info->data_offset = pre + hlen;
    info->nbytes = (size_t)((uint64_t)numel * item);
    return PARDO_OK;
}

int pardo_npy_parse_header(const void *buf, size_t n, const char *name, pardo_npy_info *info, pardo_status *st) {
    int rc = parse_head(buf, n, name, info, st);
    if (rc != PARDO_OK) return rc;
    uint64_t nbytes = info->nbytes;
    size_t data_at = info->data_offset, have = n - data_at;
    if (have < nbytes)
        return pardo_errorf(st, PARDO_EPARSE, "%s: truncated: expected %llu bytes of data, file has %zu", name,
                            (unsigned long long)nbytes, have);
    if (have > nbytes)
        return pardo_errorf(st, PARDO_EPARSE,
                            "%s: byte %llu: expected the end of the file after %llu bytes of data, file has %zu "
                            "bytes of data",
                            name, (unsigned long long)(data_at + nbytes), (unsigned long long)nbytes, have);
    return PARDO_OK;
}

int pardo_npy_parse(const void *buf, size_t n, const char *name, pardo_tensor **out, pardo_status *st) {
    pardo_npy_info info;
    *out = NULL;
    int rc = pardo_npy_parse_header(buf, n, name, &info, st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *t = pardo_tensor_new_cpu(info.dtype, info.ndim, info.shape, st);
    if (!t) return pardo_status_prefix(st, "%s: ", name);
    unsigned char *dst = pardo_tensor_data(t);
    if (info.nbytes) memcpy(dst, (const unsigned char *)buf + info.data_offset, info.nbytes);
    if (info.dtype == PARDO_BOOL)
        for (size_t k = 0; k < info.nbytes; k++) dst[k] = dst[k] != 0; /* NumPy reads any non-zero byte as True */
    *out = t;
    return PARDO_OK;
}

int pardo_npy_stream_need(const unsigned char *buf, size_t n, const char *path, size_t *need, bool *whole,
                          pardo_status *st) {
    pardo_npy_info info;
    *whole = false;
    if (n < 8) { /* the magic and the version */
        if (n && memcmp(buf, NPY_MAGIC, n < NPY_MAGIC_LEN ? n : NPY_MAGIC_LEN) != 0)
            return parse_head(buf, n, path, &info, st); /* says what the magic lacks */
        *need = 8;
        return PARDO_OK;
    }
    if (memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) != 0 || buf[6] < 1 || buf[6] > 3 || buf[7] != 0)
        return parse_head(buf, n, path, &info, st);
    size_t pre = buf[6] == 1 ? 10 : 12;
    if (n < pre) {
        *need = pre;
        return PARDO_OK;
    }
    size_t hlen = buf[6] == 1 ? pardo_load_u16le(buf + 8) : pardo_load_u32le(buf + 8);
    if (n - pre < hlen) {
        *need = pre + hlen;
        return PARDO_OK;
    }
    int rc = parse_head(buf, n, path, &info, st);
    if (rc != PARDO_OK) return rc;
    *need = info.data_offset + info.nbytes;
    *whole = true;
    return PARDO_OK;
}

int pardo_npy_read(const char *path, pardo_tensor **out, pardo_status *st) {
    pardo_file_view v;
    *out = NULL;
    int rc = pardo_file_view_open(path, pardo_npy_stream_need, &v, st);
    if (rc != PARDO_OK) return rc;
    rc = pardo_npy_parse(v.data, v.n, path, out, st);
    pardo_file_view_close(&v);
    return rc;
}

int pardo_npy_write(const char *path, pardo_tensor *t, pardo_status *st) {
    if (t->dtype < 0 || t->dtype >= PARDO_DTYPE_COUNT || t->ndim < 0 || t->ndim > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_EINVAL, "%s: cannot write a tensor of dtype %d and rank %d", path,
                            (int)t->dtype, t->ndim);
    if (!npy_descr_out[t->dtype])
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: npy has no dtype for %s (write it as float32, or as safetensors)",
                            path, pardo_dtype_name(t->dtype));
    /* The dict as NumPy writes it; at most about 250 characters for rank <= 8. */
    char dict[512];
    size_t len = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                                  npy_descr_out[t->dtype]);
    for (int d = 0; d < t->ndim; d++)
        len += (size_t)snprintf(dict + len, sizeof dict - len, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    len += (size_t)snprintf(dict + len, sizeof dict - len, "%s), }", t->ndim == 1 ? "," : "");
    PARDO_ASSERT(len < sizeof dict);

    /* Version 1 unless the padded header outgrows its u16 length (it cannot
     * for rank <= 8, but the rule is the format's). The '\n' ends the padding. */
    size_t pre = 10;
    size_t total = (pre + len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    if (total - pre > 0xffff) {
        pre = 12;
        total = (pre + len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    }
    unsigned char *head = malloc(total);
    if (!head) return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
    memcpy(head, NPY_MAGIC, NPY_MAGIC_LEN);
    head[6] = pre == 10 ? 1 : 2;
    head[7] = 0;
    if (pre == 10) pardo_store_u16le(head + 8, (uint16_t)(total - pre));
    else pardo_store_u32le(head + 8, (uint32_t)(total - pre));
    memcpy(head + pre, dict, len);
    memset(head + pre + len, ' ', total - pre - len - 1);
    head[total - 1] = '\n';

    const void *data = pardo_tensor_cpu(t, st);
    if (!data) {
        free(head);
        return pardo_status_prefix(st, "%s: ", path);
    }
    pardo_file_part parts[2] = {{head, total}, {data, t->nbytes}};
    int rc = pardo_file_write_atomic(path, parts, 2, st);
    free(head);
    return rc;
}
