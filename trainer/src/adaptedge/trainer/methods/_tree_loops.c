/* The histogram trees' inner loops, in C: adaptedge.trainer.methods._tree_loops (optional:
 * cart.py falls back to numpy where no compiler built it, the same bits).
 *
 * fill(flat, slot, residual, count, sums, /) -> None
 *   flat      [N, d] uint16, uint32 or intp, C order: each row's flat bin per histogrammed
 *             feature (0 <= bin < B); the narrower, the less memory a pass reads
 *   slot      [N] intp: the row's node (0 <= slot < n_nodes), or n_nodes for a row of none
 *   residual  [N, K] float64, C order: the row's weights (one per output)
 *   count     [n_nodes, B] int64, C order, written: rows per (node, bin)
 *   sums      [n_nodes * B, K] float64, C order, written: summed residuals per (node, bin)
 *
 * Rows are added in row order and, within a row, feature by feature: every (node, bin) sum adds
 * its rows in row order, as numpy.bincount over ``(slot * B + flat).ravel()`` does, so the sums
 * are the same float64 values bit for bit (cart._node_histograms uses that numpy form when this
 * module was not built). Row by
 * row, consecutive additions go to different features' bins, so none waits for the one before
 * (feature by feature, two rows in a row often add to one bin, and a pass was slower). One
 * pass for all K outputs (numpy needs a weights array and a pass per output).
 *
 * split(column, rows, bin, out, /) -> int
 *   column  [N] uint8, C order: one feature's bin code of every training row
 *   rows    [m] intp: the node's rows, ascending (0 <= row < N)
 *   bin     the split: a row goes left when column[row] <= bin
 *   out     [m] intp, written: the left rows, then the right rows, each in the order of rows
 *   returns how many rows went left
 *   What cart.grow_tree otherwise does with three numpy passes (gather, compare, two masked
 *   copies): the same two index arrays, in one pass.
 *
 * sums(values, nodes, out, /) -> None
 *   values  [N, K] float64, C order: a value per row and output (residuals, hessians)
 *   nodes   a list of [m] intp arrays: each node's rows (0 <= row < N)
 *   out     [len(nodes), K] float64, C order, written: each node's sum of its rows' values
 *   Bit for bit ``values[rows].sum(axis=0)``, numpy's sum of the node's rows gathered: the
 *   output starts at +0.0, then with one output adds numpy's pairwise sum of the rows (blocks
 *   of 8 partial sums, halves past 128 rows), with several adds the rows one by one (numpy
 *   reduces a non-last axis row by row), signed zeros and all.
 *
 * tests/trainer/methods/test_tree_loops.py holds each equal to its numpy form. Each releases
 * the GIL while it runs; a bin, slot or row out of range, or arrays of other shapes or types,
 * is a ValueError before anything is written.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
get(PyObject *obj, Py_buffer *view, int writable, int ndim, Py_ssize_t itemsize,
    const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        return -1;
    }
    if (view->ndim != ndim || view->itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "%s must be a C-ordered %d-d array of %zd-byte items "
                     "(got %d-d of %zd-byte items)", name, ndim, itemsize, view->ndim,
                     view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The first index i < m with rows[i] outside 0..n-1, or -1. */
static Py_ssize_t
first_out_of_range(const Py_ssize_t *rows, Py_ssize_t m, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < m; i++) {
        if (rows[i] < 0 || rows[i] >= n) {
            return i;
        }
    }
    return -1;
}

/* One flat-bin type's range check and pass: the same loops for uint16, uint32 and intp. */
#define FLAT_LOOPS(SUFFIX, TYPE)                                                              \
static int                                                                                    \
check_bins_##SUFFIX(const Py_buffer *flat, Py_ssize_t bins)                                   \
{                                                                                             \
    const TYPE *f = (const TYPE *)flat->buf;                                                  \
    Py_ssize_t total = flat->shape[0] * flat->shape[1];                                       \
    for (Py_ssize_t i = 0; i < total; i++) {                                                  \
        if ((Py_ssize_t)f[i] < 0 || (Py_ssize_t)f[i] >= bins) {                               \
            PyErr_Format(PyExc_ValueError, "fill: flat bin %zd is outside 0..%zd",            \
                         (Py_ssize_t)f[i], bins - 1);                                         \
            return -1;                                                                        \
        }                                                                                     \
    }                                                                                         \
    return 0;                                                                                 \
}                                                                                             \
                                                                                              \
static void                                                                                   \
add_rows_##SUFFIX(const Py_buffer *flat, const Py_buffer *slot, const Py_buffer *residual,    \
                  Py_buffer *count, Py_buffer *sums)                                          \
{                                                                                             \
    Py_ssize_t n = flat->shape[0], d = flat->shape[1], k = residual->shape[1];                \
    Py_ssize_t nodes = count->shape[0], bins = count->shape[1];                               \
    const TYPE *f = (const TYPE *)flat->buf;                                                  \
    const Py_ssize_t *s = (const Py_ssize_t *)slot->buf;                                      \
    const double *w = (const double *)residual->buf;                                          \
    int64_t *c = (int64_t *)count->buf;                                                       \
    double *out = (double *)sums->buf;                                                        \
    memset(c, 0, (size_t)(nodes * bins) * sizeof(int64_t));                                   \
    memset(out, 0, (size_t)(nodes * bins * k) * sizeof(double));                             \
    for (Py_ssize_t r = 0; r < n; r++) {                                                      \
        if (s[r] == nodes) {                                                                  \
            continue;  /* a row of no active node */                                          \
        }                                                                                     \
        const TYPE *row = f + r * d;                                                          \
        Py_ssize_t base = s[r] * bins;                                                        \
        if (k == 1) {  /* one output: the same additions, without the inner loop */           \
            double weight = w[r];                                                             \
            for (Py_ssize_t j = 0; j < d; j++) {                                              \
                Py_ssize_t at = base + (Py_ssize_t)row[j];                                    \
                c[at] += 1;                                                                   \
                out[at] += weight;                                                            \
            }                                                                                 \
            continue;                                                                         \
        }                                                                                     \
        const double *weights = w + r * k;                                                    \
        for (Py_ssize_t j = 0; j < d; j++) {                                                  \
            Py_ssize_t at = base + (Py_ssize_t)row[j];                                        \
            double *into = out + at * k;                                                      \
            c[at] += 1;                                                                       \
            for (Py_ssize_t o = 0; o < k; o++) {                                              \
                into[o] += weights[o];                                                        \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
}

FLAT_LOOPS(u16, uint16_t)
FLAT_LOOPS(u32, uint32_t)
FLAT_LOOPS(intp, Py_ssize_t)

static int
check(const Py_buffer *flat, const Py_buffer *slot, const Py_buffer *residual,
      const Py_buffer *count, const Py_buffer *sums)
{
    Py_ssize_t n = flat->shape[0], k = residual->shape[1];
    Py_ssize_t nodes = count->shape[0], bins = count->shape[1];
    if (slot->shape[0] != n || residual->shape[0] != n || sums->shape[0] != nodes * bins
        || sums->shape[1] != k) {
        PyErr_SetString(PyExc_ValueError, "fill: shapes disagree (flat [N, d], slot [N], "
                        "residual [N, K], count [n_nodes, B], sums [n_nodes * B, K])");
        return -1;
    }
    const Py_ssize_t *s = (const Py_ssize_t *)slot->buf;
    Py_ssize_t r = first_out_of_range(s, n, nodes + 1);  /* slot nodes: a row of no node */
    if (r >= 0) {
        PyErr_Format(PyExc_ValueError, "fill: slot[%zd] = %zd is outside 0..%zd", r, s[r],
                     nodes);
        return -1;
    }
    switch (flat->itemsize) {
    case 2: return check_bins_u16(flat, bins);
    case 4: return check_bins_u32(flat, bins);
    default: return check_bins_intp(flat, bins);
    }
}

static void
add_rows(const Py_buffer *flat, const Py_buffer *slot, const Py_buffer *residual,
         Py_buffer *count, Py_buffer *sums)
{
    switch (flat->itemsize) {
    case 2: add_rows_u16(flat, slot, residual, count, sums); break;
    case 4: add_rows_u32(flat, slot, residual, count, sums); break;
    default: add_rows_intp(flat, slot, residual, count, sums); break;
    }
}

/* flat's buffer: uint16 ('H'), uint32 ('I') or intp; anything else is refused by name. */
static int
get_flat(PyObject *obj, Py_buffer *view)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    const char *format = view->format == NULL ? "B" : view->format;
    if (format[0] == '=' || format[0] == '<' || format[0] == '@') {
        format++;
    }
    int is_u16 = view->itemsize == 2 && strcmp(format, "H") == 0;
    int is_u32 = view->itemsize == 4 && (strcmp(format, "I") == 0
                                         || (strcmp(format, "L") == 0 && sizeof(long) == 4));
    int is_intp = view->itemsize == (Py_ssize_t)sizeof(Py_ssize_t)
                  && strchr("nlq", format[0]) != NULL && format[1] == '\0';
    if (view->ndim != 2 || !(is_u16 || is_u32 || is_intp)) {
        PyErr_Format(PyExc_ValueError, "fill: flat must be a C-ordered 2-d array of uint16, "
                     "uint32 or intp (got %d-d of format '%s')", view->ndim, view->format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *
fill(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "fill(flat, slot, residual, count, sums, /) takes 5 "
                        "arrays");
        return NULL;
    }
    /* views[0] is flat (get_flat); the tables describe views[1..4] */
    Py_buffer views[5];
    static const int writable[4] = {0, 0, 1, 1}, ndims[4] = {1, 2, 2, 2};
    static const char *names[4] = {"fill: slot", "fill: residual", "fill: count",
                                   "fill: sums"};
    const Py_ssize_t sizes[4] = {sizeof(Py_ssize_t), sizeof(double), sizeof(int64_t),
                                 sizeof(double)};
    int ok = get_flat(args[0], &views[0]) == 0;
    int got = ok;  /* views taken: a failed get released its own */
    while (ok && got < 5) {
        ok = get(args[got], &views[got], writable[got - 1], ndims[got - 1], sizes[got - 1],
                 names[got - 1]) == 0;
        got += ok;
    }
    ok = ok && check(&views[0], &views[1], &views[2], &views[3], &views[4]) == 0;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        add_rows(&views[0], &views[1], &views[2], &views[3], &views[4]);
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < got; i++) {
        PyBuffer_Release(&views[i]);
    }
    if (!ok) {
        return NULL;
    }
    Py_RETURN_NONE;
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
    if (get(args[0], &column, 0, 1, 1, "split: column") < 0) {
        return NULL;
    }
    if (get(args[1], &rows, 0, 1, sizeof(Py_ssize_t), "split: rows") < 0) {
        PyBuffer_Release(&column);
        return NULL;
    }
    if (get(args[3], &out, 1, 1, sizeof(Py_ssize_t), "split: out") < 0) {
        PyBuffer_Release(&column);
        PyBuffer_Release(&rows);
        return NULL;
    }
    Py_ssize_t n = column.shape[0], m = rows.shape[0], n_left = -1;
    const Py_ssize_t *r = (const Py_ssize_t *)rows.buf;
    if (out.shape[0] != m) {
        PyErr_Format(PyExc_ValueError, "split: out holds %zd rows, rows %zd", out.shape[0], m);
    } else {
        Py_ssize_t bad = first_out_of_range(r, m, n);
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

/* numpy's DOUBLE_pairwise_sum over values[rows[i]] (stride: the row's K values, K = 1 here):
 * fewer than 8 terms one by one from 0.0; up to 128 in 8 partial sums; beyond, two halves
 * (the first a multiple of 8 terms). */
static double
pairwise(const double *values, const Py_ssize_t *rows, Py_ssize_t n)
{
    if (n < 8) {
        double res = 0.;
        for (Py_ssize_t i = 0; i < n; i++) {
            res += values[rows[i]];
        }
        return res;
    }
    if (n <= 128) {
        double r[8];
        Py_ssize_t i;
        for (int j = 0; j < 8; j++) {
            r[j] = values[rows[j]];
        }
        for (i = 8; i < n - (n % 8); i += 8) {
            for (int j = 0; j < 8; j++) {
                r[j] += values[rows[i + j]];
            }
        }
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) {
            res += values[rows[i]];
        }
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise(values, rows, n2) + pairwise(values, rows + n2, n - n2);
}

static void
node_sum(const double *values, Py_ssize_t k, const Py_ssize_t *rows, Py_ssize_t m,
         double *out)
{
    if (k == 1) {
        double total = 0.;
        total += pairwise(values, rows, m);
        out[0] = total;
        return;
    }
    for (Py_ssize_t o = 0; o < k; o++) {
        out[o] = 0.;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        const double *row = values + rows[i] * k;
        for (Py_ssize_t o = 0; o < k; o++) {
            out[o] += row[o];
        }
    }
}

static PyObject *
sums(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "sums(values, nodes, out, /) takes 3 arguments");
        return NULL;
    }
    if (!PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "sums: nodes must be a list of intp arrays");
        return NULL;
    }
    Py_ssize_t n_nodes = PyList_GET_SIZE(args[1]);
    Py_buffer values, out;
    if (get(args[0], &values, 0, 2, sizeof(double), "sums: values") < 0) {
        return NULL;
    }
    if (get(args[2], &out, 1, 2, sizeof(double), "sums: out") < 0) {
        PyBuffer_Release(&values);
        return NULL;
    }
    Py_ssize_t n = values.shape[0], k = values.shape[1];
    int ok = out.shape[0] == n_nodes && out.shape[1] == k;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "sums: out must be [%zd, %zd] (one row per node, one "
                     "column per output of values)", n_nodes, k);
    }
    /* one spare: no node at all still allocates */
    Py_buffer *views = ok ? PyMem_Calloc((size_t)(n_nodes + 1), sizeof(Py_buffer)) : NULL;
    if (ok && views == NULL) {
        PyErr_NoMemory();
        ok = 0;
    }
    Py_ssize_t got = 0;
    for (; ok && got < n_nodes; got++) {
        if (get(PyList_GET_ITEM(args[1], got), &views[got], 0, 1, sizeof(Py_ssize_t),
                "sums: each node") < 0) {
            ok = 0;
            break;
        }
        Py_ssize_t bad = first_out_of_range((const Py_ssize_t *)views[got].buf,
                                            views[got].shape[0], n);
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError, "sums: node %zd's row %zd is outside 0..%zd", got,
                         ((const Py_ssize_t *)views[got].buf)[bad], n - 1);
            ok = 0;  /* the loop's got++ still counts this view, to be released */
        }
    }
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t s = 0; s < n_nodes; s++) {
            node_sum((const double *)values.buf, k, (const Py_ssize_t *)views[s].buf,
                     views[s].shape[0], (double *)out.buf + s * k);
        }
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t s = 0; s < got; s++) {
        PyBuffer_Release(&views[s]);
    }
    PyMem_Free(views);
    PyBuffer_Release(&values);
    PyBuffer_Release(&out);
    if (!ok) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef tree_loops_methods[] = {
    {"fill", (PyCFunction)(void (*)(void))fill, METH_FASTCALL,
     "fill(flat, slot, residual, count, sums, /) -> None: rows per (node, bin) into count and "
     "their summed residuals into sums, rows added in row order."},
    {"split", (PyCFunction)(void (*)(void))split, METH_FASTCALL,
     "split(column, rows, bin, out, /) -> int: the left rows (column[row] <= bin), then the "
     "right rows, into out, each in the order of rows; returns how many went left."},
    {"sums", (PyCFunction)(void (*)(void))sums, METH_FASTCALL,
     "sums(values, nodes, out, /) -> None: each node's values[rows].sum(axis=0) into a row of "
     "out, bit for bit numpy's."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef tree_loops_module = {
    PyModuleDef_HEAD_INIT,
    "_tree_loops",
    "The histogram trees' inner loops in C (optional; cart falls back to numpy, the same bits).",
    -1,
    tree_loops_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__tree_loops(void)
{
    return PyModule_Create(&tree_loops_module);
}
