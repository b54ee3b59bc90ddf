/* A tree node's row split, in C: adaptedge.trainer.methods._row_split.
 *
 * split(column, rows, bin, out, /) -> int
 *   column  [N] uint8, C order: one feature's bin code of every training row
 *   rows    [m] intp: the node's rows, ascending (0 <= row < N)
 *   bin     the split: a row goes left when column[row] <= bin
 *   out     [m] intp, written: the left rows, then the right rows, each in the order of rows
 *   returns how many rows went left
 *
 * What cart.grow_tree otherwise does with three numpy passes (gather, compare, two masked
 * copies): the same two index arrays, in one pass, the GIL released during it. A row out of
 * range, or arrays of other shapes or types, is a ValueError before anything is written.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int
get(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t itemsize, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "split: %s must be a C-ordered 1-d array of %zd-byte "
                     "items (got %d-d of %zd-byte items)", name, itemsize, view->ndim,
                     view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static Py_ssize_t
split_rows(const uint8_t *column, const Py_ssize_t *rows, Py_ssize_t m, long bin,
           Py_ssize_t *out)
{
    Py_ssize_t n_left = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        n_left += (long)column[rows[i]] <= bin;
    }
    Py_ssize_t left = 0, right = n_left;
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_ssize_t row = rows[i];
        if ((long)column[row] <= bin) {
            out[left++] = row;
        } else {
            out[right++] = row;
        }
    }
    return n_left;
}

static PyObject *
split(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "split(column, rows, bin, out, /) takes 4 arguments");
        return NULL;
    }
    long bin = PyLong_AsLong(args[2]);
    if (bin == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer column, rows, out;
    if (get(args[0], &column, 0, 1, "column") < 0) {
        return NULL;
    }
    if (get(args[1], &rows, 0, sizeof(Py_ssize_t), "rows") < 0) {
        PyBuffer_Release(&column);
        return NULL;
    }
    if (get(args[3], &out, 1, sizeof(Py_ssize_t), "out") < 0) {
        PyBuffer_Release(&column);
        PyBuffer_Release(&rows);
        return NULL;
    }
    Py_ssize_t n = column.shape[0], m = rows.shape[0], n_left = -1;
    const Py_ssize_t *r = (const Py_ssize_t *)rows.buf;
    if (out.shape[0] != m) {
        PyErr_Format(PyExc_ValueError, "split: out holds %zd rows, rows %zd", out.shape[0], m);
    } else {
        Py_ssize_t bad = -1;
        for (Py_ssize_t i = 0; i < m && bad < 0; i++) {
            bad = (r[i] < 0 || r[i] >= n) ? i : -1;
        }
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError, "split: rows[%zd] = %zd is outside 0..%zd", bad,
                         r[bad], n - 1);
        } else {
            Py_BEGIN_ALLOW_THREADS
            n_left = split_rows((const uint8_t *)column.buf, r, m, bin, (Py_ssize_t *)out.buf);
            Py_END_ALLOW_THREADS
        }
    }
    PyBuffer_Release(&column);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&out);
    if (n_left < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(n_left);
}

static PyMethodDef row_split_methods[] = {
    {"split", (PyCFunction)(void (*)(void))split, METH_FASTCALL,
     "split(column, rows, bin, out, /) -> int: the left rows (column[row] <= bin), then the "
     "right rows, into out, each in the order of rows; returns how many went left."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef row_split_module = {
    PyModuleDef_HEAD_INIT,
    "_row_split",
    "A tree node's row split in C (optional; cart falls back to numpy).",
    -1,
    row_split_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__row_split(void)
{
    return PyModule_Create(&row_split_module);
}
