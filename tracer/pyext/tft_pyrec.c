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
typedef void (*fn_scope_push)(const char *);
typedef void (*fn_void)(void);
typedef void (*fn_context)(unsigned);
typedef int64_t (*fn_op_begin)(const char *, int, int, const uint64_t *);

#define MAX_OP_INPUTS 64 /* tft_op_begin's limit */

/* What setup() was given; module state would be the multi-interpreter way,
 * but the recorder is per process anyway. */
static struct {
    fn_tensor tensor;                 /* tft_tensor */
    fn_tensor_strided tensor_strided; /* tft_tensor_strided, or NULL (an older library) */
    fn_last_id last_id;               /* tft_last_tensor_id */
    fn_scope_push scope_push;         /* tft_scope_push */
    fn_void scope_pop;                /* tft_scope_pop */
    fn_context context;               /* tft_tensor_context, or NULL (an older library) */
    fn_op_begin op_begin;             /* tft_op_begin */
    fn_void op_end;                   /* tft_op_end */
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

/* The address under key in dict d (0 when absent); -1 on a bad value. */
static int addr_of(PyObject *d, const char *key, void **out)
{
    PyObject *v = PyDict_GetItemString(d, key); /* borrowed */
    *out = NULL;
    return v ? ptr_arg(v, out) : 0;
}

/* setup(addresses, dtypes, strided_layout): addresses maps the tft.h
 * function names (tft_tensor, tft_tensor_strided, tft_last_tensor_id,
 * tft_scope_push, tft_scope_pop, tft_tensor_context, tft_op_begin,
 * tft_op_end) to their addresses (ints); tft_tensor_strided and
 * tft_tensor_context may be missing (an older library). dtypes maps
 * torch.dtype to tftrace's dtype code; strided_layout is torch.strided.
 * May be called again (a fork's child). */
static PyObject *rec_setup(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *addrs, *dtypes, *strided;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyDict_Type, &addrs, &PyDict_Type, &dtypes, &strided))
        return NULL;
    void *t, *ts, *id, *push, *pop, *ctx, *ob, *oe;
    if (addr_of(addrs, "tft_tensor", &t) || addr_of(addrs, "tft_tensor_strided", &ts) ||
        addr_of(addrs, "tft_last_tensor_id", &id) || addr_of(addrs, "tft_scope_push", &push) ||
        addr_of(addrs, "tft_scope_pop", &pop) || addr_of(addrs, "tft_tensor_context", &ctx) ||
        addr_of(addrs, "tft_op_begin", &ob) || addr_of(addrs, "tft_op_end", &oe))
        return NULL;
    if (!t || !id || !push || !pop || !ob || !oe) {
        PyErr_SetString(PyExc_ValueError, "setup: a required tft.h function address is missing");
        return NULL;
    }
    g.tensor = (fn_tensor)t;
    g.tensor_strided = (fn_tensor_strided)ts;
    g.last_id = (fn_last_id)id;
    g.scope_push = (fn_scope_push)push;
    g.scope_pop = (fn_void)pop;
    g.context = (fn_context)ctx;
    g.op_begin = (fn_op_begin)ob;
    g.op_end = (fn_void)oe;
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

/* A str's UTF-8 or a bytes' contents (the object keeps it alive); NULL
 * with a TypeError for anything else. */
static const char *name_arg(PyObject *o)
{
    if (PyBytes_Check(o))
        return PyBytes_AsString(o);
    return PyUnicode_AsUTF8AndSize(o, NULL);
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
    const char *name = name_arg(args[0]);
    if (!name)
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
    else if (g.tensor_strided) /* dense strides take tft_tensor's path inside */
        rc = g.tensor_strided(name, dtype, data, ndim, shape, strides);
    else {
        g.declined++;
        Py_RETURN_NONE; /* a library older than 0.3: the Python path records it */
    }
    g.records++;
    return PyLong_FromUnsignedLongLong(rc == 0 ? g.last_id() : 0);
}

/* tft_scope_push(name): name a str or bytes. */
static PyObject *rec_scope_push(PyObject *self, PyObject *name)
{
    (void)self;
    const char *n = name_arg(name);
    if (!n)
        return NULL;
    if (g.scope_push)
        g.scope_push(n);
    Py_RETURN_NONE;
}

static PyObject *rec_scope_pop(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (g.scope_pop)
        g.scope_pop();
    Py_RETURN_NONE;
}

/* tft_tensor_context(flags) (a no-op with a library without it). */
static PyObject *rec_context(PyObject *self, PyObject *flags)
{
    (void)self;
    unsigned long f = PyLong_AsUnsignedLong(flags);
    if (f == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (g.context)
        g.context((unsigned)f);
    Py_RETURN_NONE;
}

/* op_begin(name, kind, ids) -> seq: ids a sequence of tensor ids (ints;
 * zeros are skipped, as the Python layer never passes an unrecorded
 * input), or None. */
static PyObject *rec_op_begin(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "op_begin(name, kind, ids)");
        return NULL;
    }
    const char *name = name_arg(args[0]);
    if (!name)
        return NULL;
    long kind = PyLong_AsLong(args[1]);
    if (kind == -1 && PyErr_Occurred())
        return NULL;
    uint64_t ids[MAX_OP_INPUTS];
    int n = 0;
    if (args[2] != Py_None) {
        PyObject *seq = PySequence_Fast(args[2], "op_begin: ids must be a sequence");
        if (!seq)
            return NULL;
        Py_ssize_t len = PySequence_Size(seq);
        for (Py_ssize_t i = 0; i < len && n < MAX_OP_INPUTS; i++) {
            PyObject *item = PySequence_GetItem(seq, i);
            unsigned long long v = item ? PyLong_AsUnsignedLongLong(item) : 0;
            Py_XDECREF(item);
            if (PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
            if (v)
                ids[n++] = v;
        }
        Py_DECREF(seq);
    }
    if (!g.op_begin)
        return PyLong_FromLong(0);
    return PyLong_FromLongLong((long long)g.op_begin(name, (int)kind, n, n ? ids : NULL));
}

static PyObject *rec_op_end(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (g.op_end)
        g.op_end();
    Py_RETURN_NONE;
}

/* scalar(name, x) -> id: the Python number x as a 0-d f64 tensor. */
static PyObject *rec_scalar(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "scalar(name, x)");
        return NULL;
    }
    const char *name = name_arg(args[0]);
    if (!name)
        return NULL;
    double v = PyFloat_AsDouble(args[1]);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    if (!g.tensor)
        return PyLong_FromLong(0);
    int64_t shape0[1] = {0}; /* (ndim 0: not read) */
    int rc = g.tensor(name, 1 /* TFT_F64 */, &v, 0, shape0);
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
    {"setup", rec_setup, METH_VARARGS, "setup(addresses, dtypes, strided)"},
    {"record", (PyCFunction)(void (*)(void))rec_record, METH_FASTCALL, "record(name, tensor) -> id | 0 | None"},
    {"counts", rec_counts, METH_NOARGS, "counts() -> (recorded, declined)"},
    {"scope_push", rec_scope_push, METH_O, "tft_scope_push(name)"},
    {"scope_pop", rec_scope_pop, METH_NOARGS, "tft_scope_pop()"},
    {"tensor_context", rec_context, METH_O, "tft_tensor_context(flags)"},
    {"op_begin", (PyCFunction)(void (*)(void))rec_op_begin, METH_FASTCALL, "op_begin(name, kind, ids) -> seq"},
    {"op_end", rec_op_end, METH_NOARGS, "tft_op_end()"},
    {"scalar", (PyCFunction)(void (*)(void))rec_scalar, METH_FASTCALL, "scalar(name, x) -> id (a 0-d f64 tensor)"},
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
