/* The request checks msgspec cannot express, in C: adaptedge.protocol._speedups.request_ok.
 *
 * request_ok(features: bytes, mask: bytes, /) -> bool is True iff
 *   - features holds whole little-endian float32 values (a non-empty multiple of 4 bytes),
 *   - mask has exactly one bit per feature (numpy.packbits, little bit order) with its padding
 *     bits clear, and
 *   - every measured feature (mask bit set) is finite (its exponent bits are not all ones).
 * It is the same predicate as codec._request_ok_py, which the codec uses when this module was
 * not built (no C compiler at install); tests/test_protocol_speedups.py holds the two equal.
 * Only reads the two bytes objects: no allocation, no reference kept.
 *
 * sizeless(encoded: bytes, /) -> bytes turns an encoded 11-element request (fixarray header
 * 0x9b, a trailing nil for its absent size) into the 10-element layout older devices send
 * (header 0x9a, the nil dropped) in one copy; ValueError if it is not such an array.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
request_ok(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "request_ok(features: bytes, mask: bytes) takes two bytes");
        return NULL;
    }
    const unsigned char *features = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const unsigned char *mask = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    Py_ssize_t n_bytes = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t mask_bytes = PyBytes_GET_SIZE(args[1]);
    if (n_bytes == 0 || (n_bytes & 3) != 0) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t n = n_bytes >> 2;
    if (mask_bytes != ((n + 7) >> 3)) {
        Py_RETURN_FALSE;
    }
    if ((n & 7) != 0 && (mask[mask_bytes - 1] >> (n & 7)) != 0) {
        Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *value = features + 4 * i;  /* little-endian: value[3] is the top byte */
        if ((value[3] & 0x7F) == 0x7F && (value[2] & 0x80) != 0 && ((mask[i >> 3] >> (i & 7)) & 1)) {
            Py_RETURN_FALSE;  /* NaN or infinity in a measured slot */
        }
    }
    Py_RETURN_TRUE;
}

static PyObject *
sizeless(PyObject *module, PyObject *encoded)
{
    (void)module;
    if (!PyBytes_CheckExact(encoded)) {
        PyErr_SetString(PyExc_TypeError, "sizeless(encoded: bytes) takes bytes");
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(encoded);
    Py_ssize_t size = PyBytes_GET_SIZE(encoded);
    if (size < 2 || (unsigned char)data[0] != 0x9B || (unsigned char)data[size - 1] != 0xC0) {
        PyErr_SetString(PyExc_ValueError, "not an 11-element msgpack array ending in nil");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size - 1);
    if (out == NULL) {
        return NULL;
    }
    char *dest = PyBytes_AS_STRING(out);
    dest[0] = (char)0x9A;
    memcpy(dest + 1, data + 1, (size_t)(size - 2));
    return out;
}

static PyMethodDef speedups_methods[] = {
    {"request_ok", (PyCFunction)(void (*)(void))request_ok, METH_FASTCALL,
     "request_ok(features, mask, /) -> bool: whole float32 features, one mask bit per feature "
     "with clear padding, every measured feature finite."},
    {"sizeless", sizeless, METH_O,
     "sizeless(encoded, /) -> bytes: an encoded 11-element request in the 10-element layout "
     "(header 0x9a, trailing nil dropped)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "_speedups",
    "C helpers of the wire codec (optional; pure-Python fallbacks in codec).",
    -1,
    speedups_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&speedups_module);
}
