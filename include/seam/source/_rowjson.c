/* A snapshot row's JSON (after, key) from the columns a plain SELECT returns (seam.source.row_json's hot path).

   The source sends most columns as the text protocol prints them; this code makes each one the record's JSON
   value (seam.wire.codecs): numbers as they are, decimals quoted, strings escaped as MariaDB's JSON_QUOTE
   escapes them, dates and times in the record's form with zero and impossible dates as null. A column the
   source rendered as JSON itself comes as it is, without TO_BASE64's line breaks. The result is byte for byte
   that of row_json.render_python (tests/unit/test_row_json.py compares them, tests/stack/test_types_golden.py
   compares both with the source's own rendering).

   Delivery guarantee: none (formatting only). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { JSON = 0, NUMBER = 1, QUOTED = 2, STRING = 3, DATE = 4, DATETIME = 5, TIMESTAMP = 6 };

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buffer;

static int reserve(Buffer *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int put(Buffer *b, const char *s, Py_ssize_t n) {
    if (reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

static int digits(const char *s, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* 1: a real date; 0: zero, partly zero or past its month's end (the record's null); -1: not a date's text */
static int real_date(const char *s, Py_ssize_t n) {
    if (n < 10 || s[4] != '-' || s[7] != '-') return -1;
    int y = digits(s, 4), m = digits(s + 5, 2), d = digits(s + 8, 2);
    if (y < 0 || m < 0 || d < 0 || m > 12 || d > 31) return -1;
    if (y == 0 || m == 0 || d == 0) return 0;
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int last = days[m - 1] + (m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0));
    return d <= last;
}

static int escaped(Buffer *b, const char *s, Py_ssize_t n) {
    static const char hex[] = "0123456789ABCDEF";
    if (reserve(b, n * 6 + 2) < 0) return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
            case '"': *out++ = '"'; break;
            case '\\': *out++ = '\\'; break;
            case '\b': *out++ = 'b'; break;
            case '\t': *out++ = 't'; break;
            case '\n': *out++ = 'n'; break;
            case '\f': *out++ = 'f'; break;
            case '\r': *out++ = 'r'; break;
            default:
                memcpy(out, "u00", 3);
                out[3] = hex[c >> 4];
                out[4] = hex[c & 15];
                out += 5;
        }
    }
    *out++ = '"';
    b->len = out - b->data;
    return 0;
}

static int bad(const char *what, Py_ssize_t column) {
    PyErr_Format(PyExc_ValueError, "column %zd: %s", column, what);
    return -1;
}

/* "YYYY-MM-DD HH:MM:SS[.f...]" as "YYYY-MM-DDTHH:MM:SS.ffffff" (Z for a TIMESTAMP), quoted */
static int datetime(Buffer *b, const char *s, Py_ssize_t n, int utc, Py_ssize_t column) {
    if (n < 19 || s[10] != ' ' || s[13] != ':' || s[16] != ':' || (n > 19 && s[19] != '.') || n > 26)
        return bad("not a DATETIME's text", column);
    if (reserve(b, 30) < 0) return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    memcpy(out, s, 19);
    out[10] = 'T';
    out += 19;
    *out++ = '.';
    Py_ssize_t fraction = n > 19 ? n - 20 : 0;
    memcpy(out, s + 20, fraction);
    memset(out + fraction, '0', 6 - fraction);
    out += 6;
    if (utc) *out++ = 'Z';
    *out++ = '"';
    b->len = out - b->data;
    return 0;
}

static int value(Buffer *b, PyObject *v, int mode, Py_ssize_t column) {
    if (v == Py_None) {
        if (mode == JSON) {  /* the source's JSON is never NULL: the row is too large or a value unprintable */
            PyErr_Format(PyExc_TypeError, "column %zd: no JSON from the source", column);
            return -1;
        }
        return put(b, "null", 4);
    }
    if (!PyBytes_Check(v)) {
        PyErr_Format(PyExc_TypeError, "column %zd: not bytes", column);
        return -1;
    }
    const char *s = PyBytes_AS_STRING(v);
    Py_ssize_t n = PyBytes_GET_SIZE(v);
    int real;
    switch (mode) {
        case JSON:
            if (reserve(b, n) < 0) return -1;
            for (Py_ssize_t i = 0; i < n; i++)
                if (s[i] != '\n') b->data[b->len++] = s[i];
            return 0;
        case NUMBER:
            if (n == 0) return bad("an empty number", column);
            return put(b, s, n);
        case QUOTED:
            if (reserve(b, n + 2) < 0) return -1;
            b->data[b->len++] = '"';
            memcpy(b->data + b->len, s, n);
            b->len += n;
            b->data[b->len++] = '"';
            return 0;
        case STRING:
            return escaped(b, s, n);
        case DATE:
            real = real_date(s, n);
            if (real < 0 || n != 10) return bad("not a DATE's text", column);
            if (!real) return put(b, "null", 4);
            if (reserve(b, 12) < 0) return -1;
            b->data[b->len++] = '"';
            memcpy(b->data + b->len, s, 10);
            b->len += 10;
            b->data[b->len++] = '"';
            return 0;
        case DATETIME:
        case TIMESTAMP:
            real = real_date(s, n);
            if (real < 0) return bad("not a DATETIME's text", column);
            if (!real) return put(b, "null", 4);
            return datetime(b, s, n, mode == TIMESTAMP, column);
    }
    return bad("an unknown mode", column);
}

static PyObject *render(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *given, *labels, *key_columns, *key_labels;
    const char *modes;
    Py_ssize_t n_modes;
    if (!PyArg_ParseTuple(args, "Oy#O!O!O!", &given, &modes, &n_modes, &PyTuple_Type, &labels, &PyTuple_Type,
                          &key_columns, &PyTuple_Type, &key_labels))
        return NULL;
    Py_ssize_t n_keys = PyTuple_GET_SIZE(key_columns);
    if (PyTuple_GET_SIZE(labels) != n_modes || PyTuple_GET_SIZE(key_labels) != n_keys) {
        PyErr_SetString(PyExc_ValueError, "a label per column");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n_modes; i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(labels, i))) return PyErr_Format(PyExc_TypeError, "labels are bytes");
    Py_ssize_t *keys = PyMem_Malloc(sizeof(Py_ssize_t) * (n_keys + 1));
    Py_ssize_t *ends = PyMem_Malloc(sizeof(Py_ssize_t) * (n_modes + 1) * 2);  /* each value's [start, end) */
    if (keys == NULL || ends == NULL) {
        PyMem_Free(keys);
        PyMem_Free(ends);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < n_keys; k++) {
        keys[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(key_columns, k));
        if ((keys[k] < 0 || keys[k] >= n_modes) && !PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a key column out of range");
        if (PyErr_Occurred() || !PyBytes_Check(PyTuple_GET_ITEM(key_labels, k))) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "labels are bytes");
            PyMem_Free(keys);
            PyMem_Free(ends);
            return NULL;
        }
    }
    PyObject *rows = PySequence_Fast(given, "rows are a sequence"), *out = NULL;
    Buffer b = {NULL, 0, 0};
    if (rows == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rows);
    out = PyList_New(n);
    if (out == NULL) goto done;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, r);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != n_modes) {
            PyErr_SetString(PyExc_ValueError, "a row of another width");
            goto fail;
        }
        b.len = 0;
        for (Py_ssize_t i = 0; i < n_modes; i++) {
            PyObject *label = PyTuple_GET_ITEM(labels, i);
            if (put(&b, PyBytes_AS_STRING(label), PyBytes_GET_SIZE(label)) < 0) goto fail;
            ends[2 * i] = b.len;
            if (value(&b, PyTuple_GET_ITEM(row, i), modes[i], i) < 0) goto fail;
            ends[2 * i + 1] = b.len;
        }
        if (put(&b, "}", 1) < 0) goto fail;
        Py_ssize_t after_len = b.len;
        for (Py_ssize_t k = 0; k < n_keys; k++) {  /* the key: the same values' text, after the image */
            PyObject *label = PyTuple_GET_ITEM(key_labels, k);
            Py_ssize_t at = ends[2 * keys[k]], len = ends[2 * keys[k] + 1] - at;
            if (put(&b, PyBytes_AS_STRING(label), PyBytes_GET_SIZE(label)) < 0 || reserve(&b, len + 1) < 0)
                goto fail;
            memcpy(b.data + b.len, b.data + at, len);
            b.len += len;
        }
        if (n_keys && put(&b, "}", 1) < 0) goto fail;
        PyObject *after = PyBytes_FromStringAndSize(b.data, after_len);
        PyObject *key = n_keys ? PyBytes_FromStringAndSize(b.data + after_len, b.len - after_len) : Py_NewRef(Py_None);
        PyObject *pair = after && key ? PyTuple_Pack(2, after, key) : NULL;
        Py_XDECREF(after);
        Py_XDECREF(key);
        if (pair == NULL) goto fail;
        PyList_SET_ITEM(out, r, pair);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_XDECREF(rows);
    PyMem_Free(b.data);
    PyMem_Free(keys);
    PyMem_Free(ends);
    return out;
}

static PyMethodDef methods[] = {
    {"render", render, METH_VARARGS,
     "render(rows, modes, labels, key_columns, key_labels) -> [(after, key)]: each row's image and key as the "
     "record's JSON (key None without key columns)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowjson", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__rowjson(void) { return PyModule_Create(&module); }
