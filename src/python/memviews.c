/*
 * Memoryview declarations: what a Cython typed memoryview parameter
 * (__Pyx_memviewslice) holds, given at creation as {index: (dtype, ndim,
 * contig, const)} (numthunk.Function and numthunk.cython write them from
 * the text form 'double[:, ::1]'), read into nt_mvspec rows that
 * convert/value.c checks each bound or forwarded buffer against.
 *
 * Place in the pipeline: python, the boundary: Python declarations in,
 * nt_mvspec rows for convert/value.c out.
 */
#include "python/pyapi.h"

/* A memoryview's contiguity, exactly "C", "F" or None (0): "CF" is no
   order, and "" no absence of one that was meant. */
static int parse_contig(PyObject *contig, long long i, char *out)
{
    *out = 0;
    if (contig == Py_None)
        return 0;
    Py_ssize_t len = 0;
    const char *s = PyUnicode_Check(contig) ? PyUnicode_AsUTF8AndSize(contig, &len) : NULL;
    if (s == NULL)
        PyErr_Clear();
    if (s == NULL || len != 1 || (s[0] != 'C' && s[0] != 'F')) {
        PyErr_Format(PyExc_ValueError,
                     "memoryview %lld: contig must be 'C', 'F' or None, got %.100s %R", i,
                     Py_TYPE(contig)->tp_name, contig);
        return -1;
    }
    *out = s[0];
    return 0;
}

/* One memoryview declaration, {index: (dtype, ndim, contig, const)}, of
   a signature's __Pyx_memviewslice parameter: checked into *out. */
static int parse_mvspec(const nt_sig *sig, PyObject *key, PyObject *value, nt_mvspec *out,
                        long long *index)
{
    if (!PyLong_Check(key) || PyBool_Check(key)) {
        PyErr_Format(PyExc_TypeError,
                     "memoryview declarations are keyed by 0-based "
                     "parameter index (int), not %.100s %R",
                     Py_TYPE(key)->tp_name, key);
        return -1;
    }
    int ovf = 0;
    long long i = PyLong_AsLongLongAndOverflow(key, &ovf);
    if (ovf != 0 || i < 0 || i >= sig->nargs) {
        PyErr_Format(PyExc_ValueError,
                     "memoryview declaration for parameter %R, out of range (the "
                     "signature has %d parameter%s: 0 to %d)",
                     key, sig->nargs, sig->nargs == 1 ? "" : "s", sig->nargs - 1);
        return -1;
    }
    if (sig->args[i].kind != NT_MEMVIEW) {
        PyErr_Format(PyExc_ValueError,
                     "memoryview declaration for parameter %lld, which is not a "
                     "__Pyx_memviewslice parameter of this signature",
                     i);
        return -1;
    }
    const char *text;
    PyObject *contig;
    int ndim, is_const;
    if (!PyTuple_Check(value)) {
        PyErr_Format(PyExc_TypeError,
                     "memoryview %lld: the core takes a declaration as "
                     "(dtype, ndim, contig, const), got %.100s %R; numthunk.Function "
                     "and numthunk.cython take the text form 'double[:, ::1]'",
                     i, Py_TYPE(value)->tp_name, value);
        return -1;
    }
    if (!PyArg_ParseTuple(value, "siOp", &text, &ndim, &contig, &is_const))
        return -1;
    char c;
    if (parse_contig(contig, i, &c) < 0)
        return -1;
    nt_type t;
    nt_error err = { NT_OK, -1, "" };
    if (nt_type_parse(text, NULL, 0, &t, &err) != 0) {
        PyErr_Format(PyExc_ValueError, "memoryview %lld dtype '%s': %s", i, text, err.msg);
        return -1;
    }
    if (!(NT_IS_INT(t.kind) || NT_IS_FLOAT(t.kind) || NT_IS_COMPLEX(t.kind))) { /* (or a pointer) */
        if (t.fn != NULL)
            nt_sig_free(t.fn);
        PyErr_Format(PyExc_ValueError, "memoryview %lld dtype '%s' is not a scalar type", i, text);
        return -1;
    }
    if (ndim < 1 || ndim > NT_MEMVIEW_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "memoryview %lld: ndim must be 1..%d", i,
                     NT_MEMVIEW_MAX_DIMS);
        return -1;
    }
    *out = (nt_mvspec){ t.kind, ndim, c, is_const };
    *index = i;
    return 0;
}

/* memviews: {index: (type_text, ndim, contig, const)}, or None, against
   sig: *out NULL when sig has no __Pyx_memviewslice parameter, else an
   array of nargs specs (PyMem, the caller's; undeclared ones zero). 0, or
   -1 with an exception set. */
int nt_mvspecs_read(const nt_sig *sig, PyObject *memviews, nt_mvspec **out)
{
    *out = NULL;
    int any = 0;
    for (int i = 0; i < sig->nargs; i++)
        any |= sig->args[i].kind == NT_MEMVIEW;
    if (memviews != Py_None && !PyDict_Check(memviews)) {
        PyErr_SetString(PyExc_TypeError, "memviews must be a dict {index: spec}");
        return -1;
    }
    if (!any) {
        if (memviews != Py_None && PyDict_Size(memviews) > 0) {
            PyErr_SetString(PyExc_ValueError,
                            "memoryview declarations given, but the signature has no "
                            "__Pyx_memviewslice parameter");
            return -1;
        }
        return 0;
    }
    nt_mvspec *specs = PyMem_Calloc((size_t)sig->nargs, sizeof(nt_mvspec));
    if (specs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (memviews != Py_None && PyDict_Next(memviews, &pos, &key, &value)) {
        nt_mvspec spec;
        long long i;
        if (parse_mvspec(sig, key, value, &spec, &i) < 0) {
            PyMem_Free(specs);
            return -1;
        }
        specs[i] = spec;
    }
    *out = specs;
    return 0;
}
