/*
 * tft_pyrec.c — the PyTorch recording hot path in C: a CPython extension
 * (`_tftrace_rec`, built against the stable ABI of Python 3.10, so one
 * build serves every CPython >= 3.10) that records one torch.Tensor per
 * call. It reads what tftrace needs of the tensor — dtype, shape, strides,
 * data pointer, layout, device — through the tensor's own attributes, and
 * calls the recorder (tft_tensor / tft_tensor_strided, tft.h) directly, so
 * a record from Python costs a few attribute reads plus the C record and
 * the statistics pass instead of ~2–6 µs of Python and ctypes. A strided
 * tensor (a transposed view) is read in place (tft_tensor_strided), not
 * copied. No link to torch or to libtftrace: the Python layer
 * (python/tftrace/_torch/tensors.py) passes the library's function
 * addresses and the dtype table to setup(), and keeps its pure-Python path
 * for every tensor this module declines (and for the whole run when the
 * module cannot load: another interpreter, a library without it).
 *
 * Contract of record(name, tensor): returns the recorded tensor's id (an
 * int, 0 when the recorder refused it), or None when the tensor is not a
 * dense-layout CPU tensor of a mapped dtype with at most 8 dimensions —
 * the caller then records it its own way. Never raises for the tensor's
 * sake: an attribute that fails is cleared and answered with None. Holds
 * the GIL throughout (the statistics pass included, as ctypes.PyDLL did).
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#define MAX_NDIM 8

typedef int (*fn_tensor)(const char *, int, const void *, int, const int64_t *);
typedef int (*fn_tensor_strided)(const char *, int, const void *, int, const int64_t *, const int64_t *);
typedef uint64_t (*fn_last_id)(void);

/* What setup() was given; module state would be the multi-interpreter way,
 * but the recorder is per process anyway. */
static struct {
    fn_tensor tensor;                 /* tft_tensor */
    fn_tensor_strided tensor_strided; /* tft_tensor_strided, or NULL (an older library) */
    fn_last_id last_id;               /* tft_last_tensor_id */
    PyObject *dtypes;                 /* dict: torch.dtype -> tftrace dtype code (a strong ref) */
    PyObject *strided;                /* torch.strided (a strong ref) */
    uint64_t records;                 /* tensors recorded through this module */
    uint64_t declined;                /* tensors handed back to the Python path */
} g;

/* Interned attribute names, made at module init. */
static PyObject *s_dtype, *s_layout, *s_is_cpu, *s_shape, *s_stride, *s_data_ptr;

static int ptr_arg(PyObject *o, void **out)
{
    *out = PyLong_AsVoidPtr(o);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

/* setup(tensor, tensor_strided, last_tensor_id, dtypes, strided_layout):
 * the three function addresses (ints; tensor_strided may be 0), the
 * dtype table and torch.strided. May be called again (a fork's child). */
static PyObject *rec_setup(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *a_t, *a_ts, *a_id, *dtypes, *strided;
    if (!PyArg_ParseTuple(args, "OOOO!O", &a_t, &a_ts, &a_id, &PyDict_Type, &dtypes, &strided))
        return NULL;
    void *t, *ts, *id;
    if (ptr_arg(a_t, &t) || ptr_arg(a_ts, &ts) || ptr_arg(a_id, &id))
        return NULL;
    if (!t || !id) {
        PyErr_SetString(PyExc_ValueError, "tft_tensor and tft_last_tensor_id are required");
        return NULL;
    }
    g.tensor = (fn_tensor)t;
    g.tensor_strided = (fn_tensor_strided)ts;
    g.last_id = (fn_last_id)id;
    PyObject *old_dtypes = g.dtypes, *old_strided = g.strided;
    Py_INCREF(dtypes);
    Py_INCREF(strided);
    g.dtypes = dtypes;
    g.strided = strided;
    Py_XDECREF(old_dtypes);
    Py_XDECREF(old_strided);
    Py_RETURN_NONE;
}

/* 1 when attribute name of o is True, 0 when False, -1 on error or another value. */
static int attr_bool(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v)
        return -1;
    int r = v == Py_True ? 1 : v == Py_False ? 0 : -1;
    Py_DECREF(v);
    return r;
}

/* Reads a tuple of at most MAX_NDIM ints into out; returns its length, -1
 * on error or when longer. */
static int read_ints(PyObject *tup, int64_t *out)
{
    if (!PyTuple_Check(tup))
        return -1;
    Py_ssize_t n = PyTuple_Size(tup);
    if (n < 0 || n > MAX_NDIM)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GetItem(tup, i));
        if (v == -1 && PyErr_Occurred())
            return -1;
        out[i] = v;
    }
    return (int)n;
}

/* The tensor's dtype code, dims, shape, strides and data pointer; 0, or
 * -1 when it is not one for this path (any Python error is cleared). */
static int tensor_view(PyObject *t, int *dtype, int *ndim, int64_t *shape, int64_t *strides, void **data)
{
    int rc = -1;
    PyObject *dt = NULL, *layout = NULL, *shp = NULL, *str = NULL, *ptr = NULL;
    dt = PyObject_GetAttr(t, s_dtype);
    PyObject *code = dt ? PyDict_GetItemWithError(g.dtypes, dt) : NULL; /* borrowed */
    if (!code)
        goto out;
    *dtype = (int)PyLong_AsLong(code);
    /* a strided nested tensor has no shape (its read fails below); a jagged
     * one has the jagged layout */
    if (attr_bool(t, s_is_cpu) != 1)
        goto out;
    layout = PyObject_GetAttr(t, s_layout);
    if (layout != g.strided)
        goto out;
    shp = PyObject_GetAttr(t, s_shape);
    int nd = shp ? read_ints(shp, shape) : -1;
    if (nd < 0)
        goto out;
    str = PyObject_CallMethodObjArgs(t, s_stride, NULL);
    if (!str || read_ints(str, strides) != nd)
        goto out;
    ptr = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
    if (!ptr || ptr_arg(ptr, data))
        goto out;
    *ndim = nd;
    rc = 0;
out:
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_XDECREF(dt);
    Py_XDECREF(layout);
    Py_XDECREF(shp);
    Py_XDECREF(str);
    Py_XDECREF(ptr);
    return rc;
}

static int dense(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t want = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] != 1 && strides[d] != want)
            return 0;
        want *= shape[d];
    }
    return 1;
}

/* record(name, tensor) -> id, 0, or None (see the file's comment). */
static PyObject *rec_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "record(name, tensor)");
        return NULL;
    }
    if (!g.tensor)
        Py_RETURN_NONE;
    const char *name;
    if (PyBytes_Check(args[0]))
        name = PyBytes_AsString(args[0]);
    else if (!(name = PyUnicode_AsUTF8AndSize(args[0], NULL)))
        return NULL; /* not a str: the caller's mistake, not the tensor's */
    int dtype = 0, ndim = 0;
    int64_t shape[MAX_NDIM], strides[MAX_NDIM];
    void *data = NULL;
    if (tensor_view(args[1], &dtype, &ndim, shape, strides, &data) < 0) {
        g.declined++;
        Py_RETURN_NONE;
    }
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    int rc;
    if (numel == 0)
        rc = g.tensor(name, dtype, NULL, ndim, shape);
    else if (dense(ndim, shape, strides))
        rc = g.tensor(name, dtype, data, ndim, shape);
    else if (g.tensor_strided)
        rc = g.tensor_strided(name, dtype, data, ndim, shape, strides);
    else {
        g.declined++;
        Py_RETURN_NONE; /* an older library: the Python path copies it */
    }
    g.records++;
    return PyLong_FromUnsignedLongLong(rc == 0 ? g.last_id() : 0);
}

/* counts() -> (recorded, declined): how many tensors took this path and
 * how many were handed back (for the benchmark and the tests). */
static PyObject *rec_counts(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("(KK)", (unsigned long long)g.records, (unsigned long long)g.declined);
}

static PyMethodDef methods[] = {
    {"setup", rec_setup, METH_VARARGS, "setup(tensor, tensor_strided, last_tensor_id, dtypes, strided)"},
    {"record", (PyCFunction)(void (*)(void))rec_record, METH_FASTCALL, "record(name, tensor) -> id | 0 | None"},
    {"counts", rec_counts, METH_NOARGS, "counts() -> (recorded, declined)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tftrace_rec", "tftrace's PyTorch recording hot path (tracer/pyext/tft_pyrec.c)", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tftrace_rec(void)
{
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {{&s_dtype, "dtype"}, {&s_layout, "layout"}, {&s_is_cpu, "is_cpu"},
                 {&s_shape, "shape"}, {&s_stride, "stride"},       {&s_data_ptr, "data_ptr"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!*names[i].slot && !(*names[i].slot = PyUnicode_InternFromString(names[i].name)))
            return NULL;
    return PyModule_Create(&module);
}
