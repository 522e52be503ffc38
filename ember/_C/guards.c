/*
 * ember._C._guards: the tensor check of ember.dynamo's guard functions, in C.
 *
 * A compiled entry's guard (ember/dynamo/guards.py) checks every tensor it read
 * while tracing: its exact type, dtype, device, shape, strides and
 * requires_grad.  Written as a Python expression that is ~0.4 us a tensor (ten
 * attribute reads, two numpy tuples built and compared); an optimizer step
 * checks a few hundred.  Here one call does it:
 *
 *     g = TensorGuard(type, dtype, device, rg_attr, requires_grad, shape, strides, itemsize)
 *     g(t) -> True / False
 *
 *   type           the exact type of t (``type(t) is type``)
 *   dtype          ``t.dtype is dtype``
 *   device         ``t.device is device or t.device == device``
 *   rg_attr        the attribute read for requires_grad ("_requires_grad" or "requires_grad")
 *   requires_grad  ``t.<rg_attr> is requires_grad`` (True or False)
 *   shape          tuple of ints, or of ints and None (None: any size, a symbolic dim)
 *   strides        tuple of ints (byte strides, as numpy's), or None: C-contiguous
 *                  byte strides for the call's shape (with ``itemsize``)
 *
 * ``t._data`` is read and, when it is exactly a numpy.ndarray (the type given to
 * set_ndarray_type), its shape and strides are read from the array object's
 * header (numpy's public PyArrayObject_fields layout: data, nd, dimensions,
 * strides; ember/dynamo/guards.py checks this reading against numpy's own at
 * import and uses the Python checks if it ever differs).  Anything else is read
 * through its ``shape``/``strides`` attributes.  An exception anywhere is a
 * failed check (cleared), as in the guard function's ``try``.
 *
 * keys_are(d, keys) -> bool is a guard's ``list(d.keys()) == keys`` without the list, and
 * roots_distinct(*ts) -> bool its ``__memory_sharing(*ts) == (0, 1, ...)`` (no two share memory).
 *
 * counters() -> (checks, failures) counts the TensorGuard calls, for tests that the fast
 * path is the one taken.  No numpy headers are needed to build this file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#if PY_VERSION_HEX < 0x030B0000
#error "ember._C._guards supports CPython 3.11 and later"
#endif

#define MAX_DIMS 64

/* the head of numpy's PyArrayObject_fields (numpy/ndarraytypes.h), stable since numpy 1.7 */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
} ArrayHead;

static PyTypeObject *ndarray_type = NULL;
static unsigned long long n_checks = 0, n_failures = 0;
static PyObject *str_dtype, *str_device, *str_data, *str_shape, *str_strides, *str_base;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *type;
    PyObject *dtype;
    PyObject *device;
    PyObject *rg_attr;
    PyObject *requires_grad;
    PyObject *shape;       /* the tuples given (repr) */
    PyObject *strides;
    int ndim;
    int contiguous;        /* strides None: C-contiguous */
    Py_ssize_t itemsize;
    Py_ssize_t *sizes;     /* ndim sizes (-1: any), then ndim strides */
} TensorGuard;

/* 1: the array's (ndim, sizes, strides) match the guard's, 0: they do not */
static int
layout_matches(TensorGuard *g, int nd, const Py_ssize_t *dims, const Py_ssize_t *strides)
{
    if (nd != g->ndim)
        return 0;
    const Py_ssize_t *want = g->sizes;
    for (int i = 0; i < nd; i++)
        if (want[i] >= 0 && dims[i] != want[i])
            return 0;
    if (g->contiguous) {
        Py_ssize_t acc = g->itemsize;
        for (int i = nd - 1; i >= 0; i--) {
            if (strides[i] != acc)
                return 0;
            acc *= dims[i] > 1 ? dims[i] : 1;
        }
        return 1;
    }
    const Py_ssize_t *wst = want + nd;
    for (int i = 0; i < nd; i++)
        if (strides[i] != wst[i])
            return 0;
    return 1;
}

/* a tuple of ints into out[0..n); -1 on error or a non-tuple / too long one */
static int
ints_of(PyObject *tup, Py_ssize_t *out, int *n)
{
    if (!PyTuple_Check(tup) || PyTuple_GET_SIZE(tup) > MAX_DIMS)
        return -1;
    *n = (int)PyTuple_GET_SIZE(tup);
    for (int i = 0; i < *n; i++) {
        /* (an int, or anything with __index__: a numpy integer in a stand-in array's shape) */
        out[i] = PyNumber_AsSsize_t(PyTuple_GET_ITEM(tup, i), PyExc_OverflowError);
        if (out[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* 1 pass, 0 fail, -1 error (counts as a failure) */
static int
check(TensorGuard *g, PyObject *t)
{
    if ((PyObject *)Py_TYPE(t) != g->type)
        return 0;
    PyObject *v = PyObject_GetAttr(t, str_dtype);
    if (v == NULL)
        return -1;
    int ok = v == g->dtype;
    Py_DECREF(v);
    if (!ok)
        return 0;
    v = PyObject_GetAttr(t, str_device);
    if (v == NULL)
        return -1;
    if (v != g->device) {
        ok = PyObject_RichCompareBool(v, g->device, Py_EQ);
        Py_DECREF(v);
        if (ok <= 0)
            return ok;
    }
    else
        Py_DECREF(v);
    PyObject *d = PyObject_GetAttr(t, str_data);
    if (d == NULL)
        return -1;
    if (ndarray_type != NULL && Py_TYPE(d) == ndarray_type) {
        ArrayHead *a = (ArrayHead *)d;
        ok = layout_matches(g, a->nd, a->dimensions, a->strides);
        Py_DECREF(d);
    }
    else {
        Py_ssize_t dims[MAX_DIMS], strides[MAX_DIMS];
        int nd, ns;
        PyObject *sh = PyObject_GetAttr(d, str_shape);
        PyObject *st = sh == NULL ? NULL : PyObject_GetAttr(d, str_strides);
        Py_DECREF(d);
        ok = st != NULL && ints_of(sh, dims, &nd) == 0 && ints_of(st, strides, &ns) == 0 ? 1 : -1;
        if (ok == 1)
            ok = nd == ns && layout_matches(g, nd, dims, strides);
        Py_XDECREF(sh);
        Py_XDECREF(st);
        if (ok <= 0)
            return ok;
    }
    if (!ok)
        return 0;
    v = PyObject_GetAttr(t, g->rg_attr);
    if (v == NULL)
        return -1;
    ok = v == g->requires_grad;
    Py_DECREF(v);
    return ok;
}

static PyObject *
guard_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "TensorGuard takes exactly one argument (the tensor)");
        return NULL;
    }
    n_checks++;
    int r = check((TensorGuard *)self, args[0]);
    if (r > 0)
        Py_RETURN_TRUE;
    if (r < 0)
        PyErr_Clear();
    n_failures++;
    Py_RETURN_FALSE;
}

static PyObject *
guard_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    PyObject *type, *dtype, *device, *rg_attr, *rg, *shape, *strides;
    Py_ssize_t itemsize;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "TensorGuard takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOUOO!On:TensorGuard", &type, &dtype, &device, &rg_attr, &rg,
                          &PyTuple_Type, &shape, &strides, &itemsize))
        return NULL;
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "TensorGuard: type must be a class");
        return NULL;
    }
    if (rg != Py_True && rg != Py_False) {
        PyErr_SetString(PyExc_TypeError, "TensorGuard: requires_grad must be True or False");
        return NULL;
    }
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (nd > MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "TensorGuard: at most %d dims", MAX_DIMS);
        return NULL;
    }
    int contiguous = strides == Py_None;
    if (!contiguous && (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != nd)) {
        PyErr_SetString(PyExc_TypeError, "TensorGuard: strides must be None or a tuple as long as shape");
        return NULL;
    }
    TensorGuard *g = (TensorGuard *)cls->tp_alloc(cls, 0);
    if (g == NULL)
        return NULL;
    g->vectorcall = guard_vectorcall;
    g->sizes = PyMem_Malloc(sizeof(Py_ssize_t) * (2 * nd + 1));
    if (g->sizes == NULL) {
        Py_DECREF(g);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        PyObject *s = PyTuple_GET_ITEM(shape, i);
        Py_ssize_t v = -1;
        if (s != Py_None) {
            v = PyLong_AsSsize_t(s);
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(g);
                return NULL;
            }
            if (v < 0) {
                Py_DECREF(g);
                PyErr_SetString(PyExc_ValueError, "TensorGuard: a size must be >= 0 or None");
                return NULL;
            }
        }
        g->sizes[i] = v;
        if (!contiguous) {
            Py_ssize_t st = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, i));
            if (st == -1 && PyErr_Occurred()) {
                Py_DECREF(g);
                return NULL;
            }
            g->sizes[nd + i] = st;
        }
    }
    g->ndim = (int)nd;
    g->contiguous = contiguous;
    g->itemsize = itemsize;
    g->type = Py_NewRef(type);
    g->dtype = Py_NewRef(dtype);
    g->device = Py_NewRef(device);
    Py_INCREF(rg_attr);
    PyUnicode_InternInPlace(&rg_attr);
    g->rg_attr = rg_attr;
    g->requires_grad = Py_NewRef(rg);
    g->shape = Py_NewRef(shape);
    g->strides = Py_NewRef(strides);
    return (PyObject *)g;
}

static void
guard_dealloc(TensorGuard *g)
{
    Py_XDECREF(g->type);
    Py_XDECREF(g->dtype);
    Py_XDECREF(g->device);
    Py_XDECREF(g->rg_attr);
    Py_XDECREF(g->requires_grad);
    Py_XDECREF(g->shape);
    Py_XDECREF(g->strides);
    PyMem_Free(g->sizes);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

static PyObject *
guard_repr(TensorGuard *g)
{
    return PyUnicode_FromFormat("TensorGuard(%s, %R, %R, shape=%R, strides=%R, %U=%R)",
                                ((PyTypeObject *)g->type)->tp_name, g->dtype, g->device, g->shape,
                                g->contiguous ? (PyObject *)Py_None : g->strides, g->rg_attr,
                                g->requires_grad);
}

static PyTypeObject TensorGuard_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._C._guards.TensorGuard",
    .tp_basicsize = sizeof(TensorGuard),
    .tp_dealloc = (destructor)guard_dealloc,
    .tp_vectorcall_offset = offsetof(TensorGuard, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)guard_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "TensorGuard(type, dtype, device, rg_attr, requires_grad, shape, strides, itemsize)(t) -> bool: "
              "the tensor check of a dynamo guard (see guards.c).",
    .tp_new = guard_new,
};

static PyObject *
set_ndarray_type(PyObject *self, PyObject *t)
{
    if (!PyType_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "set_ndarray_type: expected numpy.ndarray");
        return NULL;
    }
    if (((PyTypeObject *)t)->tp_basicsize < (Py_ssize_t)sizeof(ArrayHead)) {
        PyErr_SetString(PyExc_TypeError, "set_ndarray_type: the type is smaller than an array header");
        return NULL;
    }
    Py_INCREF(t);
    Py_XSETREF(ndarray_type, (PyTypeObject *)t);
    Py_RETURN_NONE;
}

static PyObject *
tuple_of(int n, const Py_ssize_t *v)
{
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromSsize_t(v[i]);
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, x);
    }
    return out;
}

/* (shape, strides) as read from the array header: checked against numpy's at import */
static PyObject *
array_layout(PyObject *self, PyObject *a)
{
    if (ndarray_type == NULL || Py_TYPE(a) != ndarray_type) {
        PyErr_SetString(PyExc_TypeError, "array_layout: expected a numpy.ndarray (set_ndarray_type first)");
        return NULL;
    }
    ArrayHead *h = (ArrayHead *)a;
    if (h->nd < 0 || h->nd > MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "array_layout: the header's ndim is out of range");
        return NULL;
    }
    PyObject *sh = tuple_of(h->nd, h->dimensions);
    PyObject *st = sh == NULL ? NULL : tuple_of(h->nd, h->strides);
    if (st == NULL) {
        Py_XDECREF(sh);
        return NULL;
    }
    return Py_BuildValue("(NN)", sh, st);
}

/* keys_are(d, keys) -> bool: ``list(d.keys()) == list(keys)`` for a tuple ``keys``, without the
 * list (an exact dict is walked in place; anything else goes through its keys()).  An
 * exception is False, as in a guard. */
static PyObject *
keys_are(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "keys_are(mapping, keys_tuple)");
        return NULL;
    }
    PyObject *d = args[0], *want = args[1];
    Py_ssize_t n = PyTuple_GET_SIZE(want);
    int ok;
    if (PyDict_CheckExact(d)) {
        if (PyDict_GET_SIZE(d) != n)
            Py_RETURN_FALSE;
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *v;
        ok = 1;
        /* (an __eq__ that changes the dict: i stays in the tuple, and the sizes are checked again) */
        while (ok == 1 && i < n && PyDict_Next(d, &pos, &k, &v)) {
            PyObject *w = PyTuple_GET_ITEM(want, i++);
            if (k != w) {
                Py_INCREF(k);
                ok = PyObject_RichCompareBool(k, w, Py_EQ);
                Py_DECREF(k);
            }
        }
        if (ok == 1 && (i != n || PyDict_GET_SIZE(d) != n))
            ok = 0;
    }
    else {
        PyObject *keys = PyObject_CallMethod(d, "keys", NULL);
        PyObject *lst = keys == NULL ? NULL : PySequence_List(keys);
        Py_XDECREF(keys);
        PyObject *wl = lst == NULL ? NULL : PySequence_List(want);
        ok = wl == NULL ? -1 : PyObject_RichCompareBool(lst, wl, Py_EQ);
        Py_XDECREF(lst);
        Py_XDECREF(wl);
    }
    if (ok < 0)
        PyErr_Clear();
    if (ok > 0)
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static int
cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(PyObject *const *)a, y = (uintptr_t)*(PyObject *const *)b;
    return x < y ? -1 : x > y;
}

/* roots_distinct(*tensors) -> bool: no two of the tensors share a memory root (the end of their
 * ``_base`` chains), as a guard's ``__memory_sharing(...) == (0, 1, 2, ...)`` -- the common case
 * of an optimizer step's few hundred inputs, which Python walked at ~0.25 us a tensor. An
 * exception (a non-tensor: no ``_base``) is False. */
static PyObject *
roots_distinct(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    PyObject *small[32];
    PyObject **roots = n <= 32 ? small : PyMem_Malloc(sizeof(PyObject *) * n);
    if (roots == NULL)
        return PyErr_NoMemory();
    Py_ssize_t got = 0;
    int ok = 1;
    for (; got < n; got++) {
        PyObject *r = Py_NewRef(args[got]);
        for (int depth = 0;; depth++) {
            PyObject *b = PyObject_GetAttr(r, str_base);
            if (b == NULL || depth > 100000) {   /* (a cycle of _base: not a tensor chain) */
                Py_XDECREF(b);
                ok = -1;
                break;
            }
            if (b == Py_None) {
                Py_DECREF(b);
                break;
            }
            Py_SETREF(r, b);
        }
        roots[got] = r;           /* held: its id stays its own while compared */
        if (ok < 0) {
            got++;
            break;
        }
    }
    if (ok == 1) {
        if (n <= 16) {
            for (Py_ssize_t i = 1; i < n && ok; i++)
                for (Py_ssize_t j = 0; j < i; j++)
                    if (roots[i] == roots[j]) {
                        ok = 0;
                        break;
                    }
        }
        else {
            qsort(roots, (size_t)n, sizeof(PyObject *), cmp_ptr);
            for (Py_ssize_t i = 1; i < n; i++)
                if (roots[i] == roots[i - 1]) {
                    ok = 0;
                    break;
                }
        }
    }
    for (Py_ssize_t i = 0; i < got; i++)
        Py_DECREF(roots[i]);
    if (roots != small)
        PyMem_Free(roots);
    if (ok < 0)
        PyErr_Clear();
    if (ok > 0)
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyObject *
counters(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("(KK)", n_checks, n_failures);
}

static PyMethodDef methods[] = {
    {"set_ndarray_type", set_ndarray_type, METH_O, "set_ndarray_type(numpy.ndarray): arrays read from their header."},
    {"array_layout", array_layout, METH_O, "array_layout(a) -> (shape, strides) read from the array header."},
    {"keys_are", (PyCFunction)(void (*)(void))keys_are, METH_FASTCALL,
     "keys_are(mapping, keys_tuple) -> list(mapping.keys()) == list(keys_tuple), False on an error."},
    {"roots_distinct", (PyCFunction)(void (*)(void))roots_distinct, METH_FASTCALL,
     "roots_distinct(*tensors) -> no two share a memory root (end of the _base chain); False on an error."},
    {"counters", counters, METH_NOARGS, "counters() -> (tensor checks, failed tensor checks) so far."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._C._guards",
    "The tensor check of ember.dynamo's guard functions, in C (see guards.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__guards(void)
{
    if (PyType_Ready(&TensorGuard_Type) < 0)
        return NULL;
    str_dtype = PyUnicode_InternFromString("dtype");
    str_device = PyUnicode_InternFromString("device");
    str_data = PyUnicode_InternFromString("_data");
    str_shape = PyUnicode_InternFromString("shape");
    str_strides = PyUnicode_InternFromString("strides");
    str_base = PyUnicode_InternFromString("_base");
    if (!str_dtype || !str_device || !str_data || !str_shape || !str_strides || !str_base)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&TensorGuard_Type);
    if (PyModule_AddObject(m, "TensorGuard", (PyObject *)&TensorGuard_Type) < 0) {
        Py_DECREF(&TensorGuard_Type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
