/* A chunk's rows into frame blocks (seam.wire.boundary.frame_blocks' hot path).

   From the (after, key) JSON pairs the source returns, one pass writes each block (the frame line, then one
   line per row: key TAB after, or after alone where the key is the row) and adds up the CRC-32 of each row's
   record, head + key + middle + after + tail, without making it. The result is byte for byte that of the
   Python function it stands in for (tests/unit/test_blocks.py compares them).

   Delivery guarantee: none (formatting only). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <zlib.h>

#include "fast_crc32.h"

static PyObject *frame_blocks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *given, *rows;
    int keyed;
    const char *head, *middle, *tail, *first;
    Py_ssize_t head_len, middle_len, tail_len, first_len, block_bytes, block_rows;
    if (!PyArg_ParseTuple(args, "Opy#y#y#y#nn", &given, &keyed, &head, &head_len, &middle,
                          &middle_len, &tail, &tail_len, &first, &first_len, &block_bytes, &block_rows))
        return NULL;
    rows = PySequence_Fast(given, "rows are a sequence");  /* the C client returns a tuple of them */
    if (rows == NULL) return NULL;
    PyObject *blocks = PyList_New(0);
    if (blocks == NULL) {
        Py_DECREF(rows);
        return NULL;
    }
    unsigned long long sum = 0;
    uint32_t head_crc = seam_crc32(0, (const unsigned char *)head, (size_t)head_len);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rows), start = 0;
    while (start < n) {
        /* the block's extent: as boundary.blocks cuts it */
        Py_ssize_t size = first_len, end = start;
        for (; end < n; end++) {
            PyObject *row = PySequence_Fast_GET_ITEM(rows, end);
            PyObject *after = PyTuple_Check(row) && PyTuple_GET_SIZE(row) >= 2 ? PyTuple_GET_ITEM(row, 0) : NULL;
            PyObject *key = after ? PyTuple_GET_ITEM(row, 1) : NULL;
            if (!after || !PyBytes_Check(after) || (keyed && !PyBytes_Check(key))) {
                Py_DECREF(blocks);
                Py_DECREF(rows);
                PyErr_SetString(PyExc_TypeError, "a row without its JSON");
                return NULL;
            }
            Py_ssize_t line = PyBytes_GET_SIZE(after) + (keyed ? PyBytes_GET_SIZE(key) + 1 : 0);
            if (end > start && (size + line > block_bytes || end - start >= block_rows)) break;
            size += line + 1;
        }
        PyObject *block = PyBytes_FromStringAndSize(NULL, size);
        if (block == NULL) {
            Py_DECREF(blocks);
            Py_DECREF(rows);
            return NULL;
        }
        char *out = PyBytes_AS_STRING(block);
        memcpy(out, first, first_len);
        out += first_len;
        for (Py_ssize_t i = start; i < end; i++) {
            PyObject *row = PySequence_Fast_GET_ITEM(rows, i);
            PyObject *after = PyTuple_GET_ITEM(row, 0), *key = keyed ? PyTuple_GET_ITEM(row, 1) : after;
            const char *a = PyBytes_AS_STRING(after), *k = PyBytes_AS_STRING(key);
            Py_ssize_t a_len = PyBytes_GET_SIZE(after), k_len = PyBytes_GET_SIZE(key);
            *out++ = '\n';
            if (keyed) {
                memcpy(out, k, k_len);
                out += k_len;
                *out++ = '\t';
            }
            memcpy(out, a, a_len);
            out += a_len;
            uint32_t c = seam_crc32(head_crc, (const unsigned char *)k, (size_t)k_len);
            c = seam_crc32(c, (const unsigned char *)middle, (size_t)middle_len);
            c = seam_crc32(c, (const unsigned char *)a, (size_t)a_len);
            sum += seam_crc32(c, (const unsigned char *)tail, (size_t)tail_len);
        }
        int rc = PyList_Append(blocks, block);
        Py_DECREF(block);
        if (rc < 0) {
            Py_DECREF(blocks);
            Py_DECREF(rows);
            return NULL;
        }
        start = end;
    }
    Py_DECREF(rows);
    return Py_BuildValue("(NK)", blocks, sum);
}

static PyObject *fast_crc32(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &data, &value)) return NULL;
    uint32_t crc = seam_crc32(value, (const unsigned char *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"crc32", fast_crc32, METH_VARARGS, "crc32(data, value=0) -> zlib.crc32(data, value), by fast_crc32.h"},
    {"frame_blocks", frame_blocks, METH_VARARGS,
     "frame_blocks(rows, keyed, head, middle, tail, first, block_bytes, block_rows) -> (blocks, crc_sum): rows "
     "((after, key) bytes) as frame blocks beginning with ``first``, and the sum of their records' CRC-32s"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_frames", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__frames(void) { return PyModule_Create(&module); }
