/* A batch's snapshot records straight into COPY text (seam.apply.batch.stage_rows' hot path).

   Staging decoded every record with msgspec into Python objects, only to format them as COPY text a moment
   later: most of the sink's time in a full load. For a record in the exact form Seam's own full load writes
   ({"op":"r","before":null,"after":{...the table's columns in order...},"source":{...,"batch",...,"part",
   "attempt"}} with each value a JSON string, integer or null) this code writes the COPY line directly: the
   string unescaped from JSON and escaped for COPY as psycopg does, the integer's digits as they are, null as
   \N (or -infinity in a column that takes zero dates so). It adds the record's CRC32 to its (part, attempt).

   Where every column's type has a binary form here (integers, numeric, date, text and varchar) the rows are
   written in COPY's binary format instead: PostgreSQL reads a number or a date that way in a fraction of the
   time it parses its text (lineitem: its backend's CPU 3.0 -> 2.4 s). Only when every record of the call is
   staged here and every value is one this code is sure of (an integer in its type's range, a plain decimal, a
   date of years 1 - 9999 that exists); else the whole call is COPY text as before, and PostgreSQL decides.
   tests/unit/test_snapshot_binary.py reads the rows back with psycopg's loaders; tests/stack/
   test_binary_staging.py compares what PostgreSQL stores both ways.

   A block message (seam.wire.boundary) is taken record by record: its lines, or, in a frame block, each row's
   line made into its record between the frame's pieces.

   Every other record (another op, another batch, a float or a boolean, a key out of order, a NUL, JSON that
   is not strict, bytes that are not UTF-8, anything unusual) is left to the Python path, whole: where it lies
   is returned and stage_rows decodes it as before. So the result is always the Python path's;
   tests/unit/test_snapshot_rows.py compares the two on seeded well-formed and damaged records.

   Delivery guarantee: none (formatting only); nothing is dropped: a record is staged here or given back. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "fast_crc32.h"

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int grow(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static int put(Buf *b, const char *s, Py_ssize_t n) {
    if (grow(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

typedef struct {
    const unsigned char *p, *end;
} Cur;

static void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int eat(Cur *c, unsigned char ch) {
    ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

static int word(Cur *c, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* The length of a valid UTF-8 sequence (not a surrogate, not overlong, at most U+10FFFF) at p, or 0. */
static int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char a = p[0];
    if (a < 0xC2 || a > 0xF4) return 0;
    int n = a < 0xE0 ? 2 : a < 0xF0 ? 3 : 4;
    if (end - p < n) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (a == 0xE0 && p[1] < 0xA0) return 0;
    if (a == 0xED && p[1] >= 0xA0) return 0;
    if (a == 0xF0 && p[1] < 0x90) return 0;
    if (a == 0xF4 && p[1] >= 0x90) return 0;
    return n;
}

static int hex4(const unsigned char *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = p[i];
        unsigned d = h >= '0' && h <= '9'   ? h - '0'
                     : h >= 'a' && h <= 'f' ? h - 'a' + 10
                     : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                            : 16;
        if (d == 16) return 0;
        *v = *v * 16 + d;
    }
    return 1;
}

/* COPY text's escapes, as psycopg writes them (\b \t \n \v \f \r and the backslash). */
static int put_copy_char(Buf *out, unsigned ch) {
    const char *esc = NULL;
    switch (ch) {
    case '\b': esc = "\\b"; break;
    case '\t': esc = "\\t"; break;
    case '\n': esc = "\\n"; break;
    case '\v': esc = "\\v"; break;
    case '\f': esc = "\\f"; break;
    case '\r': esc = "\\r"; break;
    case '\\': esc = "\\\\"; break;
    }
    if (esc) return put(out, esc, 2);
    char c = (char)ch;
    return put(out, &c, 1);
}

static int put_code_point(Buf *out, unsigned cp, int raw) {
    char s[4];
    int n;
    if (cp < 0x80) {
        if (!raw) return put_copy_char(out, cp);
        s[0] = (char)cp;
        return put(out, s, 1);
    }
    if (cp < 0x800) {
        s[0] = (char)(0xC0 | (cp >> 6)); s[1] = (char)(0x80 | (cp & 0x3F)); n = 2;
    } else if (cp < 0x10000) {
        s[0] = (char)(0xE0 | (cp >> 12)); s[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        s[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        s[0] = (char)(0xF0 | (cp >> 18)); s[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        s[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); s[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    return put(out, s, n);
}

/* A strict JSON string at c->p (the opening quote); with ``out``, its text written as COPY text (``raw``: as
   it is, for COPY's binary format). 1: read; 0: not a string this code is sure of (a NUL, a lone surrogate,
   bytes that are not UTF-8); -1: no memory. */
static int string(Cur *c, Buf *out, int raw) {
    if (c->p >= c->end || *c->p != '"') return 0;
    const unsigned char *p = c->p + 1, *end = c->end;
    while (p < end) {
        const unsigned char *run = p;  /* printable ASCII is written as it is, a run at a time */
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
        if (out && p > run && put(out, (const char *)run, p - run) < 0) return -1;
        if (p >= end) break;
        unsigned char ch = *p;
        if (ch == '"') {
            c->p = p + 1;
            return 1;
        }
        if (ch < 0x20) return 0;
        if (ch == '\\') {
            if (end - p < 2) return 0;
            unsigned cp;
            switch (p[1]) {
            case '"': cp = '"'; break;
            case '\\':  /* a text holding "\\u0000" too: the Python path maps it (a JSON document's NUL) */
                if (end - p >= 7 && memcmp(p + 2, "u0000", 5) == 0) return 0;
                cp = '\\';
                break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (end - p < 6 || !hex4(p + 2, &cp)) return 0;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return 0;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned low;
                    if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || !hex4(p + 8, &low))
                        return 0;
                    if (low < 0xDC00 || low > 0xDFFF) return 0;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    p += 6;
                }
                if (cp == 0) return 0;  /* a NUL: the Python path maps it (target.text_nul) */
                p += 4;
                break;
            default:
                return 0;
            }
            p += 2;
            if (out && put_code_point(out, cp, raw) < 0) return -1;
            continue;
        }
        int n = utf8_len(p, end);
        if (n == 0) return 0;
        if (out && put(out, (const char *)p, n) < 0) return -1;
        p += n;
    }
    return 0;
}

/* A JSON integer at c->p, as the Python path writes it: its digits (none of -0, leading zeros, a fraction
   or an exponent). Returns its length, or 0. */
static Py_ssize_t integer(Cur *c) {
    const unsigned char *p = c->p, *end = c->end;
    if (p < end && *p == '-') p++;
    const unsigned char *digits = p;
    while (p < end && *p >= '0' && *p <= '9') p++;
    Py_ssize_t n = p - digits;
    if (n == 0 || (digits[0] == '0' && (n > 1 || digits != c->p))) return 0;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return 0;
    Py_ssize_t len = p - c->p;
    c->p = p;
    return len;
}

static int value(Cur *c, int depth);

static int number(Cur *c) {  /* any strict JSON number (skipped) */
    const unsigned char *p = c->p, *end = c->end;
    if (p < end && *p == '-') p++;
    if (p >= end || *p < '0' || *p > '9') return 0;
    if (*p == '0') p++;
    else while (p < end && *p >= '0' && *p <= '9') p++;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    c->p = p;
    return 1;
}

/* Skip any strict JSON value; 1 if it was one. */
static int value(Cur *c, int depth) {
    ws(c);
    if (c->p >= c->end || depth > 64) return 0;
    unsigned char ch = *c->p;
    if (ch == '"') return string(c, NULL, 0) == 1;
    if (ch == '{' || ch == '[') {
        unsigned char close = ch == '{' ? '}' : ']';
        c->p++;
        if (eat(c, close)) return 1;
        do {
            if (ch == '{') {
                ws(c);
                if (string(c, NULL, 0) != 1 || !eat(c, ':')) return 0;
            }
            if (!value(c, depth + 1)) return 0;
        } while (eat(c, ','));
        return eat(c, close);
    }
    if (ch == 't') return word(c, "true");
    if (ch == 'f') return word(c, "false");
    if (ch == 'n') return word(c, "null");
    return number(c);
}

/* A key without escapes, and the colon after it: its bytes, or NULL. */
static const unsigned char *key(Cur *c, Py_ssize_t *len) {
    ws(c);
    const unsigned char *start = c->p + 1;
    if (string(c, NULL, 0) != 1) return NULL;  /* strict, UTF-8 checked */
    *len = c->p - 1 - start;
    if (memchr(start, '\\', *len) != NULL || !eat(c, ':')) return NULL;
    return start;
}

static int is(const unsigned char *k, Py_ssize_t n, const char *w) {
    return (size_t)n == strlen(w) && memcmp(k, w, n) == 0;
}

typedef struct {
    PyObject *names;        /* tuple of bytes: the columns in order */
    const char *infinite;   /* per column: 1 if null is written -infinity */
    const char *batch;
    Py_ssize_t batch_len;
    const unsigned char *binary; /* per column its BINARY_ kind: COPY's binary format; NULL: COPY text */
} Plan;

/* COPY's binary format: a row is its number of fields, then each field's length (-1: null) and its value in
   the type's binary form, all big-endian. The target column's type, per column: */
enum { BINARY_INT2 = 1, BINARY_INT4, BINARY_INT8, BINARY_NUMERIC, BINARY_DATE, BINARY_TEXT };

static int put_be(Buf *b, uint64_t v, int bytes) {
    char s[8];
    for (int i = 0; i < bytes; i++) s[i] = (char)(v >> (8 * (bytes - 1 - i)));
    return put(b, s, bytes);
}

/* A decimal "-123.4500" as a numeric: base-10000 digits around the point, its weight (of the first digit),
   sign and display scale (the fraction's digits, as numeric_in keeps them before the column's typmod). */
static int binary_numeric(const unsigned char *p, Py_ssize_t len, Buf *out) {
    const unsigned char *end = p + len, *ip, *fp;
    int negative = p < end && *p == '-';
    p += negative;
    for (ip = p; p < end && *p >= '0' && *p <= '9'; p++);
    Py_ssize_t ilen = p - ip, flen = 0;
    if (ilen == 0) return 0;
    fp = p;
    if (p < end && *p == '.') {
        for (fp = ++p; p < end && *p >= '0' && *p <= '9'; p++);
        flen = p - fp;
        if (flen == 0) return 0;
    }
    if (p != end || ilen + flen > 1000) return 0;
    while (ilen > 0 && *ip == '0') ip++, ilen--;
    uint16_t digits[260];
    Py_ssize_t pad = (4 - ilen % 4) % 4, whole = (ilen + pad) / 4, n = 0;
    for (Py_ssize_t g = 0, k = -pad; g < whole; g++) {
        unsigned v = 0;
        for (int j = 0; j < 4; j++, k++) v = v * 10 + (k >= 0 ? ip[k] - '0' : 0);
        digits[n++] = (uint16_t)v;
    }
    for (Py_ssize_t f = 0; f < flen; f += 4) {
        unsigned v = 0;
        for (int j = 0; j < 4; j++) v = v * 10 + (f + j < flen ? fp[f + j] - '0' : 0);
        digits[n++] = (uint16_t)v;
    }
    Py_ssize_t first = 0, last = n, weight = whole - 1;
    while (first < last && digits[first] == 0) first++, weight--;
    while (last > first && digits[last - 1] == 0) last--;
    if (first == last) weight = 0, negative = 0;
    if (put_be(out, 8 + 2 * (uint64_t)(last - first), 4) < 0 || put_be(out, (uint64_t)(last - first), 2) < 0 ||
        put_be(out, (uint16_t)(int16_t)weight, 2) < 0 || put_be(out, negative ? 0x4000 : 0, 2) < 0 ||
        put_be(out, (uint64_t)flen, 2) < 0)
        return -1;
    for (Py_ssize_t i = first; i < last; i++)
        if (put_be(out, digits[i], 2) < 0) return -1;
    return 1;
}

/* "YYYY-MM-DD" (years 1 - 9999, a day the month has) as a date: days since 2000-01-01, proleptic Gregorian. */
static int binary_date(const unsigned char *p, Py_ssize_t len, Buf *out) {
    if (len != 10 || p[4] != '-' || p[7] != '-') return 0;
    int v[3] = {0, 0, 0}, at[3] = {0, 5, 8}, width[3] = {4, 2, 2};
    for (int f = 0; f < 3; f++)
        for (int i = 0; i < width[f]; i++) {
            unsigned char d = p[at[f] + i];
            if (d < '0' || d > '9') return 0;
            v[f] = v[f] * 10 + (d - '0');
        }
    int y = v[0], m = v[1], d = v[2];
    static const int month_days[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (y < 1 || m < 1 || m > 12 || d < 1 || d > month_days[m - 1] || (m == 2 && d == 29 && !leap)) return 0;
    long yy = y - (m <= 2), era = yy / 400, yoe = yy - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1, doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    long days = era * 146097 + doe - 719468 - 10957; /* from 1970-01-01, then from 2000-01-01 */
    return put_be(out, 4, 4) < 0 || put_be(out, (uint32_t)(int32_t)days, 4) < 0 ? -1 : 1;
}

/* A JSON integer's digits as a smallint, integer or bigint: 0 if out of the type's range. */
static int binary_integer(const unsigned char *p, Py_ssize_t len, int kind, Buf *out) {
    int negative = *p == '-';
    unsigned long long v = 0, limit = kind == BINARY_INT2 ? 32767ULL : kind == BINARY_INT4 ? 2147483647ULL
                                                                                      : 9223372036854775807ULL;
    for (Py_ssize_t i = negative; i < len; i++) {
        if (v > (limit + 1) / 10) return 0;
        v = v * 10 + (p[i] - '0');
    }
    if (v > limit + negative) return 0;
    uint64_t x = negative ? (uint64_t)0 - v : v;
    int bytes = kind == BINARY_INT2 ? 2 : kind == BINARY_INT4 ? 4 : 8;
    return put_be(out, (uint64_t)bytes, 4) < 0 || put_be(out, x, bytes) < 0 ? -1 : 1;
}

/* One column's value (at c->p: a string, an integer or null) as a field of COPY's binary format; 0: not a
   value this code is sure of for the column's type (the run goes as COPY text: PostgreSQL says). */
static int binary_field(Cur *c, const Plan *plan, Py_ssize_t i, Buf *out) {
    int kind = plan->binary[i];
    if (*c->p == 'n') {
        if (!word(c, "null")) return 0;
        if (!plan->infinite[i]) return put_be(out, 0xFFFFFFFFu, 4) < 0 ? -1 : 1;
        if (kind != BINARY_DATE) return 0;
        return put_be(out, 4, 4) < 0 || put_be(out, 0x80000000u, 4) < 0 ? -1 : 1; /* -infinity */
    }
    if (*c->p == '"') {
        if (kind == BINARY_TEXT) {
            Py_ssize_t at = out->len;
            if (put_be(out, 0, 4) < 0) return -1;
            int rc = string(c, out, 1);
            if (rc == 1) {
                uint64_t n = (uint64_t)(out->len - at - 4);
                if (n > 0x7FFFFFFF) return 0;
                for (int k = 0; k < 4; k++) out->data[at + k] = (char)(n >> (8 * (3 - k)));
            }
            return rc;
        }
        const unsigned char *text = c->p + 1, *close = memchr(text, '"', c->end - text);
        if (close == NULL || memchr(text, '\\', close - text) != NULL) return 0; /* no escape in these */
        c->p = close + 1;
        if (kind == BINARY_NUMERIC) return binary_numeric(text, close - text, out);
        return kind == BINARY_DATE ? binary_date(text, close - text, out) : 0;
    }
    const unsigned char *start = c->p;
    Py_ssize_t len = integer(c);
    if (len == 0) return 0;
    if (kind == BINARY_TEXT) return put_be(out, (uint64_t)len, 4) < 0 || put(out, (const char *)start, len) < 0 ? -1 : 1;
    if (kind == BINARY_NUMERIC) return binary_numeric(start, len, out);
    return kind <= BINARY_INT8 ? binary_integer(start, len, kind, out) : 0;
}

/* The image's columns in order, each a string, an integer or null, written as one COPY line's first fields. */
static int image(Cur *c, const Plan *plan, Buf *out) {
    if (!eat(c, '{')) return 0;
    Py_ssize_t count = PyTuple_GET_SIZE(plan->names);
    if (plan->binary && put_be(out, (uint64_t)count + 2, 2) < 0) return -1; /* its fields, with part and attempt */
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i > 0 && !eat(c, ',')) return 0;
        /* the column's name as it is, quoted (a name is never escaped here: _native_plan), then the colon; a key
           written any other way is not this code's to judge */
        PyObject *name = PyTuple_GET_ITEM(plan->names, i);
        Py_ssize_t n = PyBytes_GET_SIZE(name);
        ws(c);
        if (c->end - c->p < n + 2 || c->p[0] != '"' || memcmp(c->p + 1, PyBytes_AS_STRING(name), n) != 0 ||
            c->p[n + 1] != '"')
            return 0;
        c->p += n + 2;
        if (!eat(c, ':')) return 0;
        ws(c);
        if (c->p >= c->end) return 0;
        if (plan->binary) {
            int rc = binary_field(c, plan, i, out);
            if (rc != 1) return rc;
            continue;
        }
        unsigned char ch = *c->p;
        int ok;
        if (ch == '"') {
            ok = string(c, out, 0);
        } else if (ch == 'n') {
            ok = word(c, "null");
            if (ok) ok = plan->infinite[i] ? put(out, "-infinity", 9) == 0 : put(out, "\\N", 2) == 0;
        } else {
            const unsigned char *start = c->p;
            Py_ssize_t len = integer(c);
            ok = len > 0 && put(out, (const char *)start, len) == 0;
        }
        if (ok != 1) return ok;
        if (put(out, "\t", 1) < 0) return -1;
    }
    return eat(c, '}');
}

typedef struct {
    long long part, attempt;
    int has_part, has_attempt, batch_ok;
} Source;

static int signed_integer(Cur *c, long long *v) {
    const unsigned char *start = c->p;
    Py_ssize_t len = integer(c);
    if (len == 0 || len > 18) return 0;
    char digits[20];
    memcpy(digits, start, len);
    digits[len] = 0;
    *v = strtoll(digits, NULL, 10);
    return 1;
}

static int source(Cur *c, const Plan *plan, Source *s) {
    if (!eat(c, '{')) return 0;
    int seen_batch = 0;
    if (eat(c, '}')) return 0;
    do {
        Py_ssize_t n;
        const unsigned char *k = key(c, &n);
        if (k == NULL) return 0;
        ws(c);
        if (is(k, n, "batch") || is(k, n, "part") || is(k, n, "attempt")) {
            int *seen = is(k, n, "batch") ? &seen_batch : is(k, n, "part") ? &s->has_part : &s->has_attempt;
            if (*seen) return 0;  /* a repeated key: the Python path says what it means */
            *seen = 1;
            if (is(k, n, "batch")) {
                const unsigned char *start = c->p + 1;
                if (string(c, NULL, 0) != 1) return 0;
                Py_ssize_t len = c->p - 1 - start;
                s->batch_ok = len == plan->batch_len && memcmp(start, plan->batch, len) == 0;
            } else if (!signed_integer(c, is(k, n, "part") ? &s->part : &s->attempt)) {
                return 0;
            }
        } else if (!value(c, 1)) {
            return 0;
        }
    } while (eat(c, ','));
    return eat(c, '}') && seen_batch;
}

typedef struct {
    long long part, attempt;
    unsigned long long rows, crc;
} Tally;

/* A row's last two fields, its part and attempt: 1 written, 0 a part out of an integer's range, -1 no memory. */
static int put_part(Buf *out, const Plan *plan, long long part, long long attempt) {
    if (plan->binary) {
        if (part < INT32_MIN || part > INT32_MAX) return 0;
        return put_be(out, 4, 4) < 0 || put_be(out, (uint32_t)(int32_t)part, 4) < 0 || put_be(out, 8, 4) < 0 ||
                       put_be(out, (uint64_t)attempt, 8) < 0
                   ? -1
                   : 1;
    }
    char tail[48];
    int n = snprintf(tail, sizeof tail, "%lld\t%lld\n", part, attempt);
    return put(out, tail, n) < 0 ? -1 : 1;
}

/* One message: 1 staged (its line appended to out, its tally counted), 0 given back, -1 no memory. */
static int stage_one(const unsigned char *v, Py_ssize_t len, const Plan *plan, Buf *out, Tally *t) {
    Cur c = {v, v + len};
    Py_ssize_t line = out->len;
    int op = 0, before = 0, after = 0, src = 0;
    Source s = {0, 0, 0, 0, 0};
    if (!eat(&c, '{')) return 0;
    if (eat(&c, '}')) return 0;
    do {
        Py_ssize_t n;
        const unsigned char *k = key(&c, &n);
        int ok;
        if (k == NULL) goto back;
        ws(&c);
        if (is(k, n, "op")) {
            ok = !op++ && word(&c, "\"r\"");
        } else if (is(k, n, "before")) {
            ok = !before++ && word(&c, "null");
        } else if (is(k, n, "after")) {
            ok = after++ ? 0 : image(&c, plan, out);
            if (ok < 0) return -1;
        } else if (is(k, n, "source")) {
            ok = !src++ && source(&c, plan, &s);
        } else {
            ok = value(&c, 1);
        }
        if (!ok) goto back;
    } while (eat(&c, ','));
    if (!eat(&c, '}')) goto back;
    ws(&c);
    if (c.p != c.end || !op || !before || !after || !src || !s.batch_ok || !s.has_part || !s.has_attempt) goto back;
    int rc = put_part(out, plan, s.part, s.attempt);
    if (rc < 0) return -1;
    if (rc == 0) goto back;
    t->part = s.part;
    t->attempt = s.attempt;
    t->rows = 1;
    t->crc = seam_crc32(0, v, (size_t)len);
    return 1;
back:
    out->len = line;
    return 0;
}

static int count(PyObject *sums, const Tally *t) {
    PyObject *kind = Py_BuildValue("(LL)", t->part, t->attempt);
    if (kind == NULL) return -1;
    PyObject *tally = PyDict_GetItemWithError(sums, kind);
    int rc = -1;
    if (tally == NULL && !PyErr_Occurred()) {
        tally = Py_BuildValue("[KK]", t->rows, t->crc);
        rc = tally ? PyDict_SetItem(sums, kind, tally) : -1;
        Py_XDECREF(tally);
    } else if (tally != NULL) {
        PyObject *rows = PyLong_FromUnsignedLongLong(t->rows), *crc = PyLong_FromUnsignedLongLong(t->crc);
        PyObject *rows_sum = rows ? PyNumber_Add(PyList_GET_ITEM(tally, 0), rows) : NULL;
        PyObject *crc_sum = crc ? PyNumber_Add(PyList_GET_ITEM(tally, 1), crc) : NULL;
        Py_XDECREF(rows);
        Py_XDECREF(crc);
        if (rows_sum && crc_sum) {
            PyList_SetItem(tally, 0, rows_sum);
            PyList_SetItem(tally, 1, crc_sum);
            rc = 0;
        } else {
            Py_XDECREF(rows_sum);
            Py_XDECREF(crc_sum);
        }
    }
    Py_DECREF(kind);
    return rc;
}

/* Adds the (part, attempt) of one staged record to the run being counted; -1 on error. */
static int tally_one(PyObject *sums, Tally *last, const Tally *t) {
    if (last->rows && (last->part != t->part || last->attempt != t->attempt)) {
        if (count(sums, last) < 0) return -1;
        last->rows = 0;
    }
    if (!last->rows) {
        *last = *t;
    } else {
        last->rows++;
        last->crc += t->crc;
    }
    return 0;
}

/* Gives a record back to the Python path: (message index, the record's bytes, or None: the whole message). */
static int give_back(PyObject *rest, Py_ssize_t i, const unsigned char *record, Py_ssize_t len) {
    PyObject *item = record ? Py_BuildValue("(ny#)", i, (const char *)record, len) : Py_BuildValue("(nO)", i, Py_None);
    if (item == NULL) return -1;
    int rc = PyList_Append(rest, item);
    Py_DECREF(item);
    return rc;
}

/* A frame's first line, "%d %d %d " + head + middle + tail (seam.wire.boundary.frame): 1 parsed, 0 not. */
static int parse_frame(const unsigned char *v, Py_ssize_t len, Py_ssize_t sizes[3], const unsigned char **parts) {
    Py_ssize_t at = 0;
    for (int k = 0; k < 3; k++) {
        Py_ssize_t n = 0, digits = 0;
        while (at < len && v[at] >= '0' && v[at] <= '9' && digits < 12) n = n * 10 + (v[at++] - '0'), digits++;
        if (!digits || at >= len || v[at++] != ' ') return 0;
        sizes[k] = n;
    }
    if (sizes[0] + sizes[1] + sizes[2] != len - at) return 0;
    parts[0] = v + at;
    parts[1] = parts[0] + sizes[0];
    parts[2] = parts[1] + sizes[1];
    return 1;
}

/* A frame row taken without making its record: its key a whole JSON value, its image the table's columns,
   after a row of the same frame was staged whole (so the frame's pieces make a record with any such key and
   image). 1 staged, 0 not sure (made whole and staged the long way), -1 no memory. */
static int stage_frame_row(const unsigned char *key, Py_ssize_t key_len, const unsigned char *after,
                           Py_ssize_t after_len, const Plan *plan, Buf *out, Tally *t) {
    Cur k = {key, key + key_len}, a = {after, after + after_len};
    if (!value(&k, 1)) return 0;
    ws(&k);
    if (k.p != k.end) return 0;
    Py_ssize_t line = out->len;
    int rc = image(&a, plan, out);
    if (rc < 0) return -1;
    if (rc == 1) {
        ws(&a);
        rc = a.p == a.end ? put_part(out, plan, t->part, t->attempt) : 0;
        if (rc < 0) return -1;
    }
    if (rc == 0) out->len = line;
    return rc;
}

/* The rows of a frame block after its first line (``start``): each row staged (its record made in ``scratch``
   until one is staged whole, then only its key and image read: ``stage_frame_row``). */
static int stage_framed(PyObject *rest, PyObject *sums, Tally *last, Py_ssize_t i, const unsigned char *v,
                        Py_ssize_t len, Py_ssize_t start, const Py_ssize_t sizes[3], const unsigned char **parts,
                        const Plan *plan, Buf *out, Buf *scratch) {
    Tally framed = {0, 0, 0, 0}; /* the frame's part and attempt, once a row was staged whole */
    uint32_t head_crc = seam_crc32(0, parts[0], (size_t)sizes[0]);
    while (start <= len) {
        const unsigned char *nl = memchr(v + start, '\n', len - start);
        Py_ssize_t end = nl ? nl - v : len;
        const unsigned char *row = v + start, *tab = memchr(row, '\t', end - start);
        const unsigned char *key = row, *after = tab ? tab + 1 : row;
        Py_ssize_t key_len = tab ? tab - row : end - start, after_len = tab ? v + end - after : end - start;
        Tally t = framed;
        int rc = framed.rows ? stage_frame_row(key, key_len, after, after_len, plan, out, &t) : 0;
        if (rc == 1) {
            uint32_t c = seam_crc32(head_crc, key, (size_t)key_len);
            c = seam_crc32(c, parts[1], (size_t)sizes[1]);
            c = seam_crc32(c, after, (size_t)after_len);
            t.crc = seam_crc32(c, parts[2], (size_t)sizes[2]);
        } else if (rc == 0) {
            scratch->len = 0;
            if (put(scratch, (const char *)parts[0], sizes[0]) < 0 || put(scratch, (const char *)key, key_len) < 0 ||
                put(scratch, (const char *)parts[1], sizes[1]) < 0 || put(scratch, (const char *)after, after_len) < 0 ||
                put(scratch, (const char *)parts[2], sizes[2]) < 0)
                return -1;
            rc = stage_one((const unsigned char *)scratch->data, scratch->len, plan, out, &t);
            if (rc == 1 && !framed.rows) framed = t;
        }
        if (rc < 0) return -1;
        if (rc == 0 ? give_back(rest, i, (const unsigned char *)scratch->data, scratch->len) < 0
                    : tally_one(sums, last, &t) < 0)
            return -2;
        start = end + 1;
    }
    return 0;
}

/* Stages every message (see ``stage``) into ``out``, ``rest`` and ``sums``: 0; 1 where binary rows were asked
   for and a record was left to Python (stopped there: the call goes as COPY text); -1 on an error (raised). */
static int stage_all(PyObject *values, const char *kinds, const Plan *plan, Buf *out, Buf *scratch, PyObject *rest,
                     PyObject *sums) {
    Tally last = {0, 0, 0, 0};  /* a run of one (part, attempt) is counted at once when it ends */
    Py_ssize_t n = PyList_GET_SIZE(values);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (plan->binary && PyList_GET_SIZE(rest)) return 1; /* not binary after all: no use going on */
        PyObject *value = PyList_GET_ITEM(values, i);
        if (!PyBytes_Check(value)) {
            if (give_back(rest, i, NULL, 0) < 0) return -1;
            continue;
        }
        const unsigned char *v = (const unsigned char *)PyBytes_AS_STRING(value);
        Py_ssize_t len = PyBytes_GET_SIZE(value), start = 0;
        if (kinds[i] == 2) {  /* a frame and its rows */
            const unsigned char *nl = memchr(v, '\n', len), *parts[3];
            Py_ssize_t sizes[3];
            if (nl == NULL || !parse_frame(v, nl - v, sizes, parts)) {
                if (give_back(rest, i, NULL, 0) < 0) return -1;
                continue;
            }
            int rc = stage_framed(rest, sums, &last, i, v, len, nl - v + 1, sizes, parts, plan, out, scratch);
            if (rc == -1) PyErr_NoMemory();
            if (rc < 0) return -1;
            continue;
        }
        /* a block's records are its lines; any other message is one record, whatever it holds */
        while (start <= len) {
            const unsigned char *nl = kinds[i] == 1 ? memchr(v + start, '\n', len - start) : NULL;
            Py_ssize_t end = nl ? nl - v : len;
            Tally t;
            int rc = stage_one(v + start, end - start, plan, out, &t);
            if (rc < 0) {
                PyErr_NoMemory();
                return -1;
            }
            if (rc == 0 ? give_back(rest, i, kinds[i] == 1 ? v + start : NULL, end - start) < 0
                        : tally_one(sums, &last, &t) < 0)
                return -1;
            start = end + 1;
        }
    }
    return last.rows ? count(sums, &last) : 0;
}

static PyObject *stage(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *values, *names, *binary = Py_None;
    const char *kinds, *batch, *infinite;
    Py_ssize_t kinds_len, batch_len, infinite_len;
    if (!PyArg_ParseTuple(args, "O!y#y#O!y#|O", &PyList_Type, &values, &kinds, &kinds_len, &batch, &batch_len,
                          &PyTuple_Type, &names, &infinite, &infinite_len, &binary))
        return NULL;
    if (infinite_len != PyTuple_GET_SIZE(names) ||
        (binary != Py_None && (!PyBytes_Check(binary) || PyBytes_GET_SIZE(binary) != infinite_len))) {
        PyErr_SetString(PyExc_ValueError, "one infinite flag and one binary kind (or None) per column");
        return NULL;
    }
    if (kinds_len != PyList_GET_SIZE(values)) {
        PyErr_SetString(PyExc_ValueError, "one kind per message");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "column names are bytes");
            return NULL;
        }
    Plan plan = {names, infinite, batch, batch_len,
                 binary != Py_None ? (const unsigned char *)PyBytes_AS_STRING(binary) : NULL};
    Buf out = {NULL, 0, 0}, scratch = {NULL, 0, 0};
    PyObject *rest = NULL, *sums = NULL, *result = NULL;
    for (;;) {
        rest = PyList_New(0);
        sums = PyDict_New();
        int rc = rest == NULL || sums == NULL ? -1 : stage_all(values, kinds, &plan, &out, &scratch, rest, sums);
        if (rc < 0) goto done;
        if (plan.binary == NULL || (rc == 0 && PyList_GET_SIZE(rest) == 0)) break;
        /* binary only when every record is staged here, each value sure: else all of them as COPY text */
        plan.binary = NULL;
        out.len = 0;
        Py_CLEAR(rest);
        Py_CLEAR(sums);
    }
    result = Py_BuildValue("(y#OOO)", out.data ? out.data : "", out.len, rest, sums,
                           plan.binary ? Py_True : Py_False);
done:
    PyMem_Free(out.data);
    PyMem_Free(scratch.data);
    Py_XDECREF(rest);
    Py_XDECREF(sums);
    return result;
}

static PyMethodDef methods[] = {
    {"stage", stage, METH_VARARGS,
     "stage(values, kinds, batch, names, infinite, binary=None) -> (copy_data, rest, sums, is_binary): the "
     "snapshot rows of ``batch`` among ``values`` (bytes; ``kinds``, one byte each: 0 a message, 1 a block of "
     "records, 2 a frame block) as COPY text with their part and attempt, or as COPY's binary rows (no header) "
     "where ``binary`` (one kind per column) is given and every record is staged here; ``rest``: (message index, "
     "record) of each record left to the Python path (record None: the whole message); ``sums``: {(part, "
     "attempt): [rows, CRC32 sum]} of the rows staged here"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_snapshotrows", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__snapshotrows(void) { return PyModule_Create(&module); }
