/*
 * A C extension that uses numthunk's C API (numthunk/capi.h): its own
 * kernels, made into thunks from C and called through their addresses.
 * Built by the tests against numthunk.get_include(); also what
 * bench/bench_capi.py times.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>

#include "numthunk/capi.h"

/* ---- kernels ---- */

static double sum_kernel(const DLTensor *t)
{
    if (!nt_dl_dtype_is(t, kDLFloat, 64))
        return NAN;
    int64_t index[32] = { 0 };
    if (t->ndim > 32)
        return NAN;
    if (nt_dl_numel(t) == 0)
        return 0.0;
    double s = 0.0;
    do {
        s += NT_DL_AT(double, t, index);
    } while (nt_dl_next(t, index));
    return s;
}

/* x * scale + shift, with scale and shift bound */
static double affine_kernel(double scale, double x, double shift)
{
    return x * scale + shift;
}

/* the sum of n doubles at p */
static double psum_kernel(const double *p, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += p[i];
    return s;
}

static PyObject *sum_sig, *affine_sig, *psum_sig;

/* ---- functions ---- */

/* make_sum(arr, engine=0) -> thunk of double (void) summing arr */
static PyObject *make_sum(PyObject *self, PyObject *args)
{
    PyObject *arr;
    unsigned int flags = 0;
    if (!PyArg_ParseTuple(args, "O|I", &arr, &flags))
        return NULL;
    PyObject *values[1] = { arr };
    return numthunk_create(sum_sig, (void *)sum_kernel, values, 1, self, flags);
}

/* make_affine(scale, shift) -> thunk of double (double) */
static PyObject *make_affine(PyObject *self, PyObject *args)
{
    PyObject *scale, *shift;
    if (!PyArg_ParseTuple(args, "OO", &scale, &shift))
        return NULL;
    PyObject *values[3] = { scale, NULL, shift };
    return numthunk_create(affine_sig, (void *)affine_kernel, values, 3, self, 0);
}

/* make_psum(p, n) -> thunk of double (void): both parameters bound,
   checked as numthunk.bind checks them (the error tests use it) */
static PyObject *make_psum(PyObject *self, PyObject *args)
{
    PyObject *p, *n;
    if (!PyArg_ParseTuple(args, "OO", &p, &n))
        return NULL;
    PyObject *values[2] = { p, n };
    return numthunk_create(psum_sig, (void *)psum_kernel, values, 2, self, 0);
}

/* signature(text) (None: NULL) */
static PyObject *signature(PyObject *self, PyObject *args)
{
    (void)self;
    const char *text;
    if (!PyArg_ParseTuple(args, "z", &text))
        return NULL;
    return numthunk_signature(text);
}

/* create_flags(arr, flags) -> thunk of sum_kernel made with those flags */
static PyObject *create_flags(PyObject *self, PyObject *args)
{
    PyObject *arr;
    unsigned int flags;
    if (!PyArg_ParseTuple(args, "OI", &arr, &flags))
        return NULL;
    PyObject *values[1] = { arr };
    return numthunk_create(sum_sig, (void *)sum_kernel, values, 1, self, flags);
}

/* create_sig(signature, arr) -> numthunk_create for sum_kernel with the
   caller's signature object (None: NULL) */
static PyObject *create_sig(PyObject *self, PyObject *args)
{
    PyObject *sig, *arr;
    if (!PyArg_ParseTuple(args, "OO", &sig, &arr))
        return NULL;
    PyObject *values[1] = { arr };
    return numthunk_create(sig == Py_None ? NULL : sig, (void *)sum_kernel, values, 1, self, 0);
}

/* create_count(n) -> numthunk_create for sum_kernel with n values */
static PyObject *create_count(PyObject *self, PyObject *args)
{
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    PyObject *values[4] = { Py_None, Py_None, Py_None, Py_None };
    return numthunk_create(sum_sig, (void *)sum_kernel, values, n, self, 0);
}

/* create_null(n) -> numthunk_create for sum_kernel with values NULL and
   nvalues n */
static PyObject *create_null(PyObject *self, PyObject *args)
{
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    return numthunk_create(sum_sig, (void *)sum_kernel, NULL, n, self, 0);
}

/* call0(thunk) -> float: calls a double (void) thunk through its address,
   without the GIL */
static PyObject *call0(PyObject *self, PyObject *thunk)
{
    (void)self;
    double (*f)(void) = (double (*)(void))numthunk_address(thunk);
    if (f == NULL)
        return NULL;
    double r;
    Py_BEGIN_ALLOW_THREADS
    r = f();
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(r);
}

/* call1(thunk, x) -> float for a double (double) thunk */
static PyObject *call1(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *thunk;
    double x;
    if (!PyArg_ParseTuple(args, "Od", &thunk, &x))
        return NULL;
    double (*f)(double) = (double (*)(double))numthunk_address(thunk);
    if (f == NULL)
        return NULL;
    return PyFloat_FromDouble(f(x));
}

/* address_of(thunk) -> int: numthunk_address (None: NULL) */
static PyObject *address_of(PyObject *self, PyObject *thunk)
{
    (void)self;
    void *p = numthunk_address(thunk == Py_None ? NULL : thunk);
    if (p == NULL)
        return NULL;
    return PyLong_FromVoidPtr(p);
}

static PyObject *release(PyObject *self, PyObject *thunk)
{
    (void)self;
    if (numthunk_release(thunk) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *rebind(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *thunk, *value;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "OnO", &thunk, &i, &value))
        return NULL;
    if (numthunk_rebind(thunk, i, value) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* rebind_null(thunk, i) -> numthunk_rebind with value NULL */
static PyObject *rebind_null(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *thunk;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "On", &thunk, &i))
        return NULL;
    if (numthunk_rebind(thunk, i, NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *is_thunk(PyObject *self, PyObject *obj)
{
    (void)self;
    return PyBool_FromLong(numthunk_check(obj));
}

/* dltensor_null(obj, null_out): numthunk_dltensor with obj NULL (obj None)
   or out NULL (null_out true); returns what it kept */
static PyObject *dltensor_null(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj;
    int null_out;
    if (!PyArg_ParseTuple(args, "Op", &obj, &null_out))
        return NULL;
    DLTensor *t;
    return numthunk_dltensor(obj == Py_None ? NULL : obj, 0, null_out ? NULL : &t);
}

/* dltensor_sum(obj, writable=0) -> (sum, ndim, shape, strides): a DLTensor
   for any array-like, read in C */
static PyObject *dltensor_sum(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj;
    int writable = 0;
    if (!PyArg_ParseTuple(args, "O|p", &obj, &writable))
        return NULL;
    DLTensor *t;
    PyObject *keep = numthunk_dltensor(obj, writable, &t);
    if (keep == NULL)
        return NULL;
    PyObject *shape = PyTuple_New(t->ndim), *strides = PyTuple_New(t->ndim);
    PyObject *result = NULL;
    if (shape == NULL || strides == NULL)
        goto done;
    for (int32_t d = 0; d < t->ndim; d++) {
        PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(t->shape[d]));
        PyTuple_SET_ITEM(strides, d, PyLong_FromLongLong(t->strides[d]));
    }
    result = Py_BuildValue("(diOO)", sum_kernel(t), (int)t->ndim, shape, strides);
done:
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_DECREF(keep);
    return result;
}

/* create_release_loop(arr, n): n thunks made, their address read, and
   released, all from C (the C API's creation cost, for the bench) */
static PyObject *create_release_loop(PyObject *self, PyObject *args)
{
    PyObject *arr;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On", &arr, &n))
        return NULL;
    PyObject *values[1] = { arr };
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = numthunk_create(sum_sig, (void *)sum_kernel, values, 1, self, 0);
        if (t == NULL)
            return NULL;
        if (numthunk_address(t) == NULL || numthunk_release(t) < 0) {
            Py_DECREF(t);
            return NULL;
        }
        Py_DECREF(t);
    }
    Py_RETURN_NONE;
}

/* create_psum_loop(p, n, count): count thunks of psum_kernel with (p, n)
   bound, each dropped at once (the bench's plain-pointer case) */
static PyObject *create_psum_loop(PyObject *self, PyObject *args)
{
    PyObject *p, *n;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "OOn", &p, &n, &count))
        return NULL;
    PyObject *values[2] = { p, n };
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *t = numthunk_create(psum_sig, (void *)psum_kernel, values, 2, self, 0);
        if (t == NULL)
            return NULL;
        Py_DECREF(t);
    }
    Py_RETURN_NONE;
}

/* create_drop_loop(arr, count): count descriptor thunks, each dropped */
static PyObject *create_drop_loop(PyObject *self, PyObject *args)
{
    PyObject *arr;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "On", &arr, &count))
        return NULL;
    PyObject *values[1] = { arr };
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *t = numthunk_create(sum_sig, (void *)sum_kernel, values, 1, self, 0);
        if (t == NULL)
            return NULL;
        Py_DECREF(t);
    }
    Py_RETURN_NONE;
}

/* create_list(arr, n) -> list of n thunks (creation only) */
static PyObject *create_list(PyObject *self, PyObject *args)
{
    PyObject *arr;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On", &arr, &n))
        return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    PyObject *values[1] = { arr };
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = numthunk_create(sum_sig, (void *)sum_kernel, values, 1, self, 0);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

/* kernel_address("sum" | "psum") -> int, for binding from Python */
static PyObject *kernel_address(PyObject *self, PyObject *name)
{
    (void)self;
    if (PyUnicode_CompareWithASCIIString(name, "sum") == 0)
        return PyLong_FromVoidPtr((void *)sum_kernel);
    if (PyUnicode_CompareWithASCIIString(name, "psum") == 0)
        return PyLong_FromVoidPtr((void *)psum_kernel);
    PyErr_SetObject(PyExc_KeyError, name);
    return NULL;
}

static PyMethodDef methods[] = {
    { "make_sum", make_sum, METH_VARARGS, NULL },
    { "make_affine", make_affine, METH_VARARGS, NULL },
    { "make_psum", make_psum, METH_VARARGS, NULL },
    { "signature", signature, METH_VARARGS, NULL },
    { "create_flags", create_flags, METH_VARARGS, NULL },
    { "create_sig", create_sig, METH_VARARGS, NULL },
    { "create_count", create_count, METH_VARARGS, NULL },
    { "create_null", create_null, METH_VARARGS, NULL },
    { "call0", call0, METH_O, NULL },
    { "call1", call1, METH_VARARGS, NULL },
    { "address_of", address_of, METH_O, NULL },
    { "release", release, METH_O, NULL },
    { "rebind", rebind, METH_VARARGS, NULL },
    { "rebind_null", rebind_null, METH_VARARGS, NULL },
    { "dltensor_null", dltensor_null, METH_VARARGS, NULL },
    { "is_thunk", is_thunk, METH_O, NULL },
    { "dltensor_sum", dltensor_sum, METH_VARARGS, NULL },
    { "create_release_loop", create_release_loop, METH_VARARGS, NULL },
    { "create_list", create_list, METH_VARARGS, NULL },
    { "create_psum_loop", create_psum_loop, METH_VARARGS, NULL },
    { "create_drop_loop", create_drop_loop, METH_VARARGS, NULL },
    { "kernel_address", kernel_address, METH_O, NULL },
    { NULL, NULL, 0, NULL }
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ntcapi_ext", "numthunk C API test extension", -1, methods,
    NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit_ntcapi_ext(void)
{
    if (numthunk_import_capi() < 0)
        return NULL;
    sum_sig = numthunk_signature("double (const DLTensor *t)");
    affine_sig = numthunk_signature("double (double scale, double x, double shift)");
    psum_sig = numthunk_signature("double (const double *p, int n)");
    if (sum_sig == NULL || affine_sig == NULL || psum_sig == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    PyObject *v = PyLong_FromLong(numthunk_capi->version);
    if (v == NULL || PyModule_AddObject(m, "capi_version", v) < 0) {
        Py_XDECREF(v);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
