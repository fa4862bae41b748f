/* Row images decoded straight into record values (seam.wire.codecs' canonical forms).

   The change reader spent most of its time building Python objects for each value (an int, a Decimal, a
   datetime) only to turn them into the record's form (a number, a string with the declared scale, an ISO
   text) a moment later. Here the common column families go from the binlog's bytes to the record value in
   one step; every other column is read by its Python reader and codec, named in the plan
   (seam.source.rows.Decoder.canonical builds it and says which families are native).

   Anything this code is not sure of (bytes that are not UTF-8, a decimal digit group
   over nine digits, an image that runs past its event) raises ``Unsure``: the caller then decodes that whole
   event in Python, which gives the exact value or the exact error. So the result is always the Python path's;
   tests/stack/test_row_decoder.py compares the two on every type family.

   Delivery guarantee: none (decoding only); nothing is dropped without an error. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    K_PY, K_I8, K_U8, K_I16, K_U16, K_I24, K_U24, K_I32, K_U32, K_I64, K_U64, K_U64_TEXT,
    K_FLOAT, K_DOUBLE, K_DECIMAL, K_DATE, K_DATETIME2, K_TIMESTAMP2, K_UTF8, K_COUNT
};

typedef struct {
    PyObject *name;                      /* borrowed from the plan, as are the three below */
    int kind, a, b;                      /* a, b: DECIMAL precision and scale; fsp; a length's size */
    PyObject *reader, *record, *column;  /* K_PY: reader(data, pos) -> (value, pos); record(column, value) */
} Col;

static PyObject *Unsure;

static PyObject *unsure(void) {
    PyErr_SetNone(Unsure);
    return NULL;
}

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

static int64_t sign_extend(uint64_t v, int bytes) {
    int shift = 64 - 8 * bytes;
    return (int64_t)(v << shift) >> shift;
}

static int days_in_month(int y, int m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return days[m - 1];
}

static int valid_date(int y, int m, int d) {
    return y >= 1 && y <= 9999 && m >= 1 && m <= 12 && d >= 1 && d <= days_in_month(y, m);
}

static char *digits(char *out, unsigned v, int width) {
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return out + width;
}

/* "YYYY-MM-DD", then "THH:MM:SS.ffffff" and "Z" as asked: datetime.isoformat(timespec="microseconds") */
static PyObject *iso(int y, int mo, int d, int with_time, int h, int mi, int s, long micro, int zulu) {
    char buf[32], *p = buf;
    p = digits(p, (unsigned)y, 4); *p++ = '-';
    p = digits(p, (unsigned)mo, 2); *p++ = '-';
    p = digits(p, (unsigned)d, 2);
    if (with_time) {
        *p++ = 'T';
        p = digits(p, (unsigned)h, 2); *p++ = ':';
        p = digits(p, (unsigned)mi, 2); *p++ = ':';
        p = digits(p, (unsigned)s, 2); *p++ = '.';
        p = digits(p, (unsigned)micro, 6);
        if (zulu) *p++ = 'Z';
    }
    return PyUnicode_FromStringAndSize(buf, p - buf);
}

/* seam.source.row_values._micro: the fraction of a DATETIME2/TIMESTAMP2, or -1 when it is out of range */
static long fraction(const unsigned char *p, int fsp) {
    static const long scale[] = {1000000, 100000, 10000, 1000, 100, 10, 1};
    int size = (fsp + 1) / 2;
    if (!size) return 0;
    int64_t v = sign_extend(be(p, size), size);
    if (fsp % 2) v /= 10;
    v *= scale[fsp];
    return (v < 0 || v > 999999) ? -1 : (long)v;
}

/* civil date of days since 1970-01-01 (H. Hinnant's algorithm) */
static void civil(int64_t z, int *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const unsigned POW10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

/* DECIMAL(precision, scale) as f"{Decimal(text):.{scale}f}": leading zeros dropped, the sign kept (even of 0) */
static PyObject *decimal_text(const unsigned char *p, Py_ssize_t left, int precision, int scale,
                              Py_ssize_t *size_out) {
    int integral = precision - scale;
    int wi = integral / 9, wf = scale / 9, pi = integral - wi * 9, pf = scale - wf * 9;
    int head = DIG2BYTES[pi], tail = DIG2BYTES[pf];
    Py_ssize_t size = head + wi * 4 + wf * 4 + tail;
    unsigned char raw[64];
    char text[160], *t = text;
    if (size <= 0 || size > left || size > (Py_ssize_t)sizeof raw) return unsure();
    memcpy(raw, p, (size_t)size);
    int negative = !(raw[0] & 0x80);
    raw[0] ^= 0x80;
    if (negative)
        for (Py_ssize_t i = 0; i < size; i++) raw[i] = (unsigned char)~raw[i];
    const unsigned char *at = raw;
    if (negative) *t++ = '-';
    char *whole = t;
    if (head) {
        uint64_t v = be(at, head);
        if (v >= POW10[pi]) return unsure();
        t = digits(t, (unsigned)v, pi);
        at += head;
    }
    for (int i = 0; i < wi; i++, at += 4) {
        uint64_t v = be(at, 4);
        if (v > 999999999u) return unsure();
        t = digits(t, (unsigned)v, 9);
    }
    char *first = whole;  /* leading zeros of the integral part dropped, one zero kept */
    while (first < t && *first == '0') first++;
    if (first == t) {
        *whole = '0';
        t = whole + 1;
    } else if (first > whole) {
        memmove(whole, first, (size_t)(t - first));
        t = whole + (t - first);
    }
    if (scale) *t++ = '.';
    for (int i = 0; i < wf; i++, at += 4) {
        uint64_t v = be(at, 4);
        if (v > 999999999u) return unsure();
        t = digits(t, (unsigned)v, 9);
    }
    if (tail) {
        uint64_t v = be(at, tail);
        if (v >= POW10[pf]) return unsure();
        t = digits(t, (unsigned)v, pf);
    }
    *size_out = size;
    return PyUnicode_FromStringAndSize(text, t - text);
}

static PyObject *py_value(const Col *c, PyObject *data, Py_ssize_t *pos, Py_ssize_t end) {
    PyObject *at = PyLong_FromSsize_t(*pos);
    if (!at) return NULL;
    PyObject *got = PyObject_CallFunctionObjArgs(c->reader, data, at, NULL);
    Py_DECREF(at);
    if (!got) return NULL;
    if (!PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2) {
        Py_DECREF(got);
        return unsure();
    }
    Py_ssize_t next = PyLong_AsSsize_t(PyTuple_GET_ITEM(got, 1));
    if (next < *pos || next > end) {
        Py_DECREF(got);
        PyErr_Clear();
        return unsure();
    }
    *pos = next;
    PyObject *value = PyTuple_GET_ITEM(got, 0), *out;
    if (value == Py_None) {
        out = Py_NewRef(Py_None);
    } else {
        out = PyObject_CallFunctionObjArgs(c->record, c->column, value, NULL);
    }
    Py_DECREF(got);
    return out;
}

/* One non-NULL value at *pos, as its record value; *pos moves past it. NULL with Unsure (or the Python
   reader's error) set when it cannot. */
static PyObject *value(const Col *c, PyObject *data, const unsigned char *d, Py_ssize_t *pos, Py_ssize_t end) {
    static const int FIXED[K_COUNT] = {[K_I8] = 1, [K_U8] = 1, [K_I16] = 2, [K_U16] = 2, [K_I24] = 3, [K_U24] = 3,
                                       [K_I32] = 4, [K_U32] = 4, [K_I64] = 8, [K_U64] = 8, [K_U64_TEXT] = 8,
                                       [K_FLOAT] = 4, [K_DOUBLE] = 8, [K_DATE] = 3};
    const unsigned char *p = d + *pos;
    Py_ssize_t left = end - *pos;
    int n = FIXED[c->kind];
    if (n) {
        if (left < n) return unsure();
        *pos += n;
        uint64_t v = le(p, n);
        switch (c->kind) {
        case K_U8: case K_U16: case K_U24: case K_U32:
            return PyLong_FromUnsignedLongLong(v);
        case K_I8: case K_I16: case K_I24: case K_I32: case K_I64:
            return PyLong_FromLongLong(sign_extend(v, n));
        case K_U64:
            return PyLong_FromUnsignedLongLong(v);
        case K_U64_TEXT: {
            char buf[24];
            int len = snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
            return PyUnicode_FromStringAndSize(buf, len);
        }
        case K_FLOAT: {
            uint32_t bits = (uint32_t)v;
            float f;
            memcpy(&f, &bits, 4);
            return PyFloat_FromDouble((double)f);
        }
        case K_DOUBLE: {
            double x;
            memcpy(&x, &v, 8);
            return PyFloat_FromDouble(x);
        }
        case K_DATE: {
            int y = (int)((v >> 9) & 0x7FFF), m = (int)((v >> 5) & 0xF), day = (int)(v & 0x1F);
            if (!valid_date(y, m, day)) return Py_NewRef(Py_None);  /* zero, partly zero, or 2024-02-31 */
            return iso(y, m, day, 0, 0, 0, 0, 0, 0);
        }
        }
        return unsure();
    }
    switch (c->kind) {
    case K_PY:
        return py_value(c, data, pos, end);
    case K_DECIMAL: {
        Py_ssize_t size = 0;
        PyObject *out = decimal_text(p, left, c->a, c->b, &size);
        if (out) *pos += size;
        return out;
    }
    case K_DATETIME2: {
        int size = 5 + (c->a + 1) / 2;
        if (left < size) return unsure();
        uint64_t v = be(p, 5);
        int ym = (int)((v >> 22) & 0x1FFFF);
        int y = ym / 13, mo = ym % 13, day = (int)((v >> 17) & 0x1F);
        int h = (int)((v >> 12) & 0x1F), mi = (int)((v >> 6) & 0x3F), s = (int)(v & 0x3F);
        if (!valid_date(y, mo, day) || h > 23 || mi > 59 || s > 59) {  /* a zero or partly zero date */
            *pos += size;
            return Py_NewRef(Py_None);
        }
        long micro = fraction(p + 5, c->a);
        if (micro < 0) return unsure();
        *pos += size;
        return iso(y, mo, day, 1, h, mi, s, micro, 0);
    }
    case K_TIMESTAMP2: {
        int size = 4 + (c->a + 1) / 2;
        if (left < size) return unsure();
        int64_t secs = sign_extend(be(p, 4), 4);
        long micro = fraction(p + 4, c->a);
        if (secs == 0 && micro == 0) {  /* the binlog's zero TIMESTAMP */
            *pos += size;
            return Py_NewRef(Py_None);
        }
        if (secs < 0 || micro < 0) return unsure();
        int y, mo, day;
        civil(secs / 86400, &y, &mo, &day);
        int64_t rest = secs % 86400;
        *pos += size;
        return iso(y, mo, day, 1, (int)(rest / 3600), (int)(rest % 3600 / 60), (int)(rest % 60), micro, 1);
    }
    case K_UTF8: {
        int ls = c->a;
        if (ls < 1 || ls > 4 || left < ls) return unsure();
        Py_ssize_t len = (Py_ssize_t)le(p, ls);
        if (len > left - ls) return unsure();
        PyObject *out = PyUnicode_DecodeUTF8((const char *)p + ls, len, NULL);
        if (!out) {
            PyErr_Clear();
            return unsure();
        }
        *pos += ls + len;
        return out;
    }
    }
    return unsure();
}

static PyObject *image(const Col *cols, Py_ssize_t n, PyObject *data, const unsigned char *d, Py_ssize_t *pos,
                       Py_ssize_t end) {
    Py_ssize_t nulls = (n + 7) / 8;
    if (end - *pos < nulls) return unsure();
    const unsigned char *bitmap = d + *pos;
    *pos += nulls;
    PyObject *row = PyDict_New();
    if (!row) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = (bitmap[i >> 3] & (1 << (i & 7))) ? Py_NewRef(Py_None) : value(&cols[i], data, d, pos, end);
        if (!v || PyDict_SetItem(row, cols[i].name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(row);
            return NULL;
        }
        Py_DECREF(v);
    }
    return row;
}

static int read_plan(PyObject *plan, Col *cols, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(plan, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 7) {
            PyErr_SetString(PyExc_TypeError, "a plan's column is (name, kind, a, b, reader, record, column)");
            return -1;
        }
        Col *c = &cols[i];
        c->name = PyTuple_GET_ITEM(item, 0);
        c->kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(item, 1));
        c->a = (int)PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
        c->b = (int)PyLong_AsLong(PyTuple_GET_ITEM(item, 3));
        c->reader = PyTuple_GET_ITEM(item, 4);
        c->record = PyTuple_GET_ITEM(item, 5);
        c->column = PyTuple_GET_ITEM(item, 6);
        if (PyErr_Occurred()) return -1;
        if (c->kind < 0 || c->kind >= K_COUNT || (c->kind == K_DECIMAL && (c->a < 1 || c->a > 65 || c->b < 0 ||
                                                                              c->b > 30 || c->b > c->a))) {
            PyErr_Format(PyExc_ValueError, "column %zd of the plan has an unknown kind or size", i);
            return -1;
        }
    }
    return 0;
}

/* images(data, pos, end, op, plan) -> [(before, after), ...]: the rows of a row event whose body (after the
   column bitmaps) runs from pos to end; op is "c", "u" or "d". */
static PyObject *images(PyObject *self, PyObject *args) {
    PyObject *data, *plan;
    Py_ssize_t pos, end;
    int op;
    if (!PyArg_ParseTuple(args, "SnnCO!", &data, &pos, &end, &op, &PyTuple_Type, &plan)) return NULL;
    if (pos < 0 || end > PyBytes_GET_SIZE(data) || pos > end) return unsure();
    Py_ssize_t n = PyTuple_GET_SIZE(plan);
    if (n == 0) return unsure();  /* no table has no columns; an image of none would never advance */
    Col *cols = PyMem_Malloc(sizeof(Col) * (size_t)(n ? n : 1));
    if (!cols) return PyErr_NoMemory();
    PyObject *out = NULL;
    if (read_plan(plan, cols, n) < 0) goto done;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
    out = PyList_New(0);
    while (out && pos < end) {
        PyObject *before = Py_NewRef(Py_None), *after = Py_NewRef(Py_None), *pair = NULL;
        if (op != 'c') {
            Py_DECREF(before);
            before = image(cols, n, data, d, &pos, end);
        }
        if (before && op == 'u' && pos >= end) {
            Py_CLEAR(before);
            unsure();  /* an update's after image is missing */
        }
        if (before && op != 'd') {
            Py_DECREF(after);
            after = image(cols, n, data, d, &pos, end);
        }
        if (before && after) pair = PyTuple_Pack(2, before, after);
        Py_XDECREF(before);
        Py_XDECREF(after);
        if (!pair || PyList_Append(out, pair) < 0) Py_CLEAR(out);
        Py_XDECREF(pair);
    }
    if (out && pos != end) {
        Py_CLEAR(out);
        unsure();
    }
done:
    PyMem_Free(cols);
    return out;
}

static PyMethodDef methods[] = {
    {"images", images, METH_VARARGS, "images(data, pos, end, op, plan) -> [(before, after), ...] in record values"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowimages", NULL, -1, methods};

PyMODINIT_FUNC PyInit__rowimages(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Unsure = PyErr_NewException("seam.source._rowimages.Unsure", PyExc_ValueError, NULL);
    if (!Unsure || PyModule_AddObjectRef(m, "Unsure", Unsure) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static const char *names[] = {"PY", "I8", "U8", "I16", "U16", "I24", "U24", "I32", "U32", "I64", "U64",
                                  "U64_TEXT", "FLOAT", "DOUBLE", "DECIMAL", "DATE", "DATETIME2", "TIMESTAMP2",
                                  "UTF8"};
    for (int k = 0; k < K_COUNT; k++)
        if (PyModule_AddIntConstant(m, names[k], k) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}
