/* The histogram pass of the cost-penalised trees, in C: adaptedge.trainer.methods._histograms.
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
 * module was not built; tests/trainer/methods/test_histograms.py holds the two equal). Row by
 * row, consecutive additions go to different features' bins, so none waits for the one before
 * (feature by feature, two rows in a row often add to one bin, and a pass was slower). One
 * pass for all K outputs (numpy needs a weights array and a pass per output), the GIL released
 * during it. A bin or slot out of range is a ValueError before anything is written.
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
        PyErr_Format(PyExc_ValueError, "fill: %s must be a C-ordered %d-d array of %zd-byte "
                     "items (got %d-d of %zd-byte items)", name, ndim, itemsize, view->ndim,
                     view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
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
    for (Py_ssize_t r = 0; r < n; r++) {
        if (s[r] < 0 || s[r] > nodes) {
            PyErr_Format(PyExc_ValueError, "fill: slot[%zd] = %zd is outside 0..%zd", r, s[r],
                         nodes);
            return -1;
        }
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
    Py_buffer views[5];
    static const int writable[5] = {0, 0, 0, 1, 1}, ndims[5] = {2, 1, 2, 2, 2};
    static const char *names[5] = {"flat", "slot", "residual", "count", "sums"};
    const Py_ssize_t sizes[5] = {sizeof(Py_ssize_t), sizeof(Py_ssize_t), sizeof(double),
                                 sizeof(int64_t), sizeof(double)};
    int got = 0, ok = 1;
    for (; got < 5 && ok; got++) {
        ok = (got == 0 ? get_flat(args[0], &views[0])
              : get(args[got], &views[got], writable[got], ndims[got], sizes[got],
                    names[got])) == 0;
    }
    if (!ok) {
        got--;  /* views[got] was released by get */
    } else if (check(&views[0], &views[1], &views[2], &views[3], &views[4]) < 0) {
        ok = 0;
    } else {
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

static PyMethodDef histograms_methods[] = {
    {"fill", (PyCFunction)(void (*)(void))fill, METH_FASTCALL,
     "fill(flat, slot, residual, count, sums, /) -> None: rows per (node, bin) into count and "
     "their summed residuals into sums, rows added in row order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef histograms_module = {
    PyModuleDef_HEAD_INIT,
    "_histograms",
    "The trees' histogram pass in C (optional; cart falls back to numpy.bincount).",
    -1,
    histograms_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__histograms(void)
{
    return PyModule_Create(&histograms_module);
}
